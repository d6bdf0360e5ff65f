//! `canopy events [-f] [--since T] [--type K] [--json]`: the controller's event log (node
//! up/down/drain/resume, relay re-attachments, job state changes, authentication failures,
//! stuck actors), repeats folded into one line with their hostlist and count.
//!
//! `-f` follows: each request is held by the controller until something new is recorded (or
//! its wait ends) and the next one starts from the last sequence number seen, so a follower
//! that sees nothing costs nothing but one open request. A folded record that grew is printed
//! again with its new count.

use super::client::{CliError, Client};
use crate::console::events::{self, EventLine, EventQuery};
use crate::daemon::event_log::MAX_WAIT_MS;
use crate::wire::messages::Body;

const USAGE: &str = "usage: canopy events [-f] [--since TIME] [--type KIND[,KIND...]] [--json]
  -f, --follow      keep printing events as they happen
  --since TIME      only events since TIME (Slurm's forms: now-1hour, 2026-12-06T10:00, 10:00, ...)
  --type KIND       node, job, auth, actor, relay (or a full kind: node-down, ...)
  --json            JSON (with -f: one object per line, one per record)";

#[derive(Debug, PartialEq, Eq)]
pub struct Args {
    pub query: EventQuery,
    pub follow: bool,
    pub json: bool,
}

const KINDS: &[&str] = &[
    "node",
    "job",
    "auth",
    "actor",
    "relay",
    "node up",
    "node down",
    "node drain",
    "node resume",
    "node unreachable",
    "relay re-attach",
    "job state",
    "auth failure",
    "actor stuck",
];

/// Parse the arguments at `now` (for `--since`); an error names what was wrong.
pub fn parse(args: &[String], now: i64) -> Result<Option<Args>, String> {
    let mut a = Args {
        query: EventQuery::default(),
        follow: false,
        json: false,
    };
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let (name, inline) = match arg.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n, Some(v.to_string())),
            _ => (arg.as_str(), None),
        };
        let mut value = |what: &str| -> Result<String, String> {
            inline
                .clone()
                .or_else(|| it.next().cloned())
                .ok_or_else(|| format!("option {what} needs a value"))
        };
        match name {
            "--json" => a.json = true,
            "-f" | "--follow" => a.follow = true,
            "--since" | "-S" => {
                let v = value("--since")?;
                let t = crate::cli::sacct_args::parse_slurm_time(
                    &v,
                    now,
                    &chrono::Local,
                    crate::cli::sacct_args::Tense::Past,
                )
                .ok()
                .flatten()
                .ok_or_else(|| {
                    format!("--since {v}: not a time (try now-1hour, 2026-12-06T10:00 or 10:00)")
                })?;
                a.query.since = Some(t);
            }
            "--type" | "-t" => {
                for k in value("--type")?
                    .split(',')
                    .map(str::trim)
                    .filter(|k| !k.is_empty())
                {
                    if !KINDS.iter().any(|w| {
                        w.replace('-', " ") == k.to_ascii_lowercase().replace(['-', '_'], " ")
                    }) {
                        return Err(format!(
                            "--type {k}: unknown kind (node, job, auth, actor, relay, node-down, ...)"
                        ));
                    }
                    a.query.types.push(k.to_string());
                }
            }
            "-h" | "--help" => return Ok(None),
            other => return Err(format!("unknown option {other}")),
        }
    }
    Ok(Some(a))
}

fn stamp(t: i64) -> String {
    crate::model::time::fmt_timestamp(Some(t))
}

fn print_lines(records: &[EventLine], json: bool) -> Result<(), serde_json::Error> {
    for r in records {
        if json {
            println!("{}", serde_json::to_string(r)?);
        } else {
            println!("{}", events::line(r, stamp));
        }
    }
    Ok(())
}

pub fn run(args: &[String]) -> i32 {
    let a = match parse(args, chrono::Utc::now().timestamp()) {
        Ok(Some(a)) => a,
        Ok(None) => {
            println!("{USAGE}");
            return 0;
        }
        Err(e) => {
            eprintln!("canopy events: error: {e}\n{USAGE}");
            return 2;
        }
    };
    super::block_on(async move {
        let r: Result<i32, CliError> = async {
            let mut c = Client::connect(None).await?;
            let rep = match c.call(Body::QueryEvents(a.query.clone())).await? {
                Body::Events(e) => e,
                other => return Err(CliError::Unexpected(other.kind())),
            };
            if !a.follow {
                if a.json {
                    println!(
                        "{}",
                        serde_json::to_string_pretty(&*rep)
                            .map_err(|e| CliError::Usage(e.to_string()))?
                    );
                } else {
                    print!("{}", events::render(&rep, stamp));
                }
                return Ok(0);
            }
            print_lines(&rep.records, a.json).map_err(|e| CliError::Usage(e.to_string()))?;
            eprint!("{}", events::left_out(&rep));
            let mut after = rep.last_seq;
            loop {
                let q = EventQuery {
                    after_seq: Some(after),
                    wait_ms: MAX_WAIT_MS,
                    since: None,
                    types: a.query.types.clone(),
                };
                let rep = match c.call(Body::QueryEvents(q)).await? {
                    Body::Events(e) => e,
                    other => return Err(CliError::Unexpected(other.kind())),
                };
                print_lines(&rep.records, a.json).map_err(|e| CliError::Usage(e.to_string()))?;
                // Records the bounded reply could not carry are named, never skipped silently.
                eprint!("{}", events::left_out(&rep));
                let _ = std::io::Write::flush(&mut std::io::stdout());
                after = rep.last_seq.max(after);
            }
        }
        .await;
        match r {
            Ok(code) => code,
            Err(e) => super::report("canopy events", &e),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn options_parse_and_bad_ones_are_named() {
        let now = 1_800_000_000;
        let a = parse(
            &args(&["-f", "--since", "now-1hour", "--type=node,job", "--json"]),
            now,
        )
        .unwrap()
        .unwrap();
        assert!(a.follow && a.json);
        assert_eq!(a.query.since, Some(now - 3600));
        assert_eq!(a.query.types, vec!["node".to_string(), "job".to_string()]);
        assert!(parse(&args(&["--since", "whenever"]), now)
            .unwrap_err()
            .contains("--since whenever"));
        assert!(parse(&args(&["--type", "weather"]), now)
            .unwrap_err()
            .contains("--type weather"));
        assert!(parse(&args(&["--type", "node-down"]), now).is_ok());
        assert!(parse(&args(&["-x"]), now).unwrap_err().contains("-x"));
        assert_eq!(parse(&args(&["--help"]), now).unwrap(), None);
    }
}
