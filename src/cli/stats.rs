//! `canopy stats [--json] [--reset]`: the controller's latency histograms:
//! p50, p99, p99.9 and max per message kind, per user and per fan-out depth.
//! Users are recorded by uid; names are looked up here, in the CLI, so the
//! controller never waits on the user database.

use super::client::Client;
use crate::console::latency::{self, LatencyReport};
use crate::wire::messages::{Body, LatencyQuery};

const USAGE: &str = "usage: canopy stats [--json] [--reset]";

/// Replace uids by user names where the local user database knows them.
fn name_users(r: &mut LatencyReport) {
    for row in &mut r.by_user {
        if let Ok(uid) = row.key.parse::<u32>() {
            if let Ok(Some(u)) = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid)) {
                row.key = format!("{}({uid})", u.name);
            }
        }
    }
}

/// Ask for the histograms (and a reset); `Ok(None)` when the controller is
/// too old to keep them.
pub async fn fetch(c: &mut Client, reset: bool) -> Result<Option<LatencyReport>, String> {
    match c.call(Body::QueryLatency(LatencyQuery { reset })).await {
        Ok(Body::Latency(r)) => Ok(Some(*r)),
        Ok(Body::Error(e)) if e.message.starts_with("unexpected request") => Ok(None),
        Ok(Body::Error(e)) => Err(e.message),
        Ok(other) => Err(format!("unexpected reply {}", other.kind())),
        Err(e) => Err(e.to_string()),
    }
}

pub fn run(args: &[String]) -> i32 {
    let mut json = false;
    let mut reset = false;
    for a in args {
        match a.as_str() {
            "--json" => json = true,
            "--reset" => reset = true,
            "-h" | "--help" => {
                println!("{USAGE}");
                return 0;
            }
            other => {
                eprintln!("canopy stats: error: unrecognized option '{other}'\n{USAGE}");
                return 2;
            }
        }
    }
    super::block_on(async move {
        let mut c = match Client::connect(None).await {
            Ok(c) => c,
            Err(e) => return super::report("canopy stats", &e),
        };
        let mut r = match fetch(&mut c, reset).await {
            Ok(Some(r)) => r,
            Ok(None) => {
                eprintln!("canopy stats: error: the controller keeps no latency histograms (older version)");
                return 1;
            }
            Err(e) => {
                eprintln!("canopy stats: error: {e}");
                return 1;
            }
        };
        name_users(&mut r);
        if json {
            match serde_json::to_string_pretty(&r) {
                Ok(t) => println!("{t}"),
                Err(e) => {
                    eprintln!("canopy stats: error: {e}");
                    return 1;
                }
            }
        } else {
            println!(
                "Latency since {} (microsecond histograms, 1% precision)",
                crate::model::time::fmt_timestamp(Some(r.since))
            );
            print!("{}", latency::render(&r));
            if reset {
                println!("(statistics reset)");
            }
        }
        0
    })
}
