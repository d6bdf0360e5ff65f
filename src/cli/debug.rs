//! `canopy debug`: raise log detail on some daemons for a while
//! (`-w NODESET --flags route,agent --for 10m [--level debug]`), list what is
//! raised where (`--show`), or revert now (`--off`). Each daemon holds its
//! own deadline and reverts by itself. Operators only (the controller
//! checks).

use std::time::Duration;

use clap::Parser;

use super::client::Client;
use crate::wire::messages::{Body, DebugReport, DebugRequest, DebugSet};

#[derive(Parser, Debug)]
#[command(
    name = "canopy debug",
    about = "Raise log detail on some daemons for a while"
)]
struct Args {
    /// The nodes (hostlist); `--show` without it asks every node.
    #[arg(short = 'w', long = "nodes")]
    nodes: Option<String>,
    /// Comma list: route, agent, link, wire, auth, step, all.
    #[arg(long)]
    flags: Option<String>,
    /// How long: 30s, 10m, 2h, 1d, or Slurm's [days-]hours:minutes:seconds (a bare number is minutes).
    #[arg(long = "for", default_value = "10m")]
    for_: String,
    /// debug or trace (info lowers it back).
    #[arg(long, default_value = "debug")]
    level: String,
    /// List what is raised where, and until when.
    #[arg(long, conflicts_with_all = ["flags", "off"])]
    show: bool,
    /// Revert now.
    #[arg(long, conflicts_with = "flags")]
    off: bool,
    #[arg(long)]
    json: bool,
}

/// `--for`: a number with s/m/h/d, or a Slurm duration (minutes by default).
pub fn parse_for(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let unit = t.chars().last().filter(|c| "smhd".contains(*c));
    let secs = match unit {
        Some(u) => {
            let n: u64 = t[..t.len() - 1]
                .parse()
                .map_err(|_| format!("--for {s}: not a duration (30s, 10m, 2h, 1d)"))?;
            n.saturating_mul(match u {
                's' => 1,
                'm' => 60,
                'h' => 3600,
                _ => 86_400,
            })
        }
        None => crate::config::units::parse_duration_secs(t)
            .map_err(|e| format!("--for {s}: {e}"))?
            .ok_or_else(|| format!("--for {s}: must end (24 h at most)"))?,
    };
    crate::console::debug::check_duration(secs).map_err(|e| format!("--for {s}: {e}"))
}

fn request(a: &Args) -> Result<DebugRequest, String> {
    if a.show {
        return Ok(DebugRequest {
            nodes: a.nodes.clone(),
            set: None,
            budget_ms: 10_000,
        });
    }
    let Some(nodes) = a.nodes.clone() else {
        return Err("which daemons? -w NODESET (or --show)".into());
    };
    let set = if a.off {
        DebugSet {
            flags: Vec::new(),
            level: "info".into(),
            for_secs: 0,
            until: 0,
        }
    } else {
        let Some(f) = &a.flags else {
            return Err("--flags route,agent,... (or --off, or --show)".into());
        };
        let flags = crate::console::debug::parse_flags(f).map_err(|e| e.to_string())?;
        let level = crate::console::debug::parse_level(&a.level).map_err(|e| e.to_string())?;
        let d = parse_for(&a.for_)?;
        DebugSet {
            flags,
            level,
            for_secs: d.as_secs(),
            until: chrono::Utc::now().timestamp() + d.as_secs() as i64,
        }
    };
    Ok(DebugRequest {
        nodes: Some(nodes),
        set: Some(set),
        budget_ms: 10_000,
    })
}

pub fn run(args: &[String]) -> i32 {
    let a = match Args::try_parse_from(
        std::iter::once("canopy debug".to_string()).chain(args.iter().cloned()),
    ) {
        Ok(a) => a,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { 2 } else { 0 };
        }
    };
    let req = match request(&a) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("canopy debug: error: {e}");
            return 2;
        }
    };
    super::block_on(async move {
        let r = async {
            let mut c = Client::connect(None).await?;
            c.call(Body::Debug(req)).await
        }
        .await;
        match r {
            Ok(Body::DebugReply(rep)) => {
                if a.json {
                    match serde_json::to_string_pretty(&rep) {
                        Ok(t) => println!("{t}"),
                        Err(e) => {
                            eprintln!("canopy debug: error: {e}");
                            return 1;
                        }
                    }
                } else {
                    print!("{}", render(&rep, chrono::Utc::now().timestamp()));
                }
                i32::from(!rep.failed.is_empty())
            }
            Ok(other) => {
                eprintln!("canopy debug: error: unexpected reply {}", other.kind());
                1
            }
            Err(e) => super::report("canopy debug", &e),
        }
    })
}

/// The text view: one line per group of nodes that answered alike.
pub fn render(rep: &DebugReport, now: i64) -> String {
    let mut o = String::new();
    for (list, raised) in &rep.groups {
        if raised.is_empty() {
            o.push_str(&format!("{list}: nothing raised\n"));
            continue;
        }
        let parts: Vec<String> = raised
            .iter()
            .map(|r| {
                let left = (r.until - now).max(0);
                format!(
                    "{}={} for {}m{:02}s more",
                    r.flag,
                    r.level,
                    left / 60,
                    left % 60
                )
            })
            .collect();
        o.push_str(&format!("{list}: {}\n", parts.join(", ")));
    }
    for (list, why) in &rep.failed {
        o.push_str(&format!("{list}: did not answer: {why}\n"));
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::console::debug::Raised;

    #[test]
    fn durations_take_units_or_slurm_form() {
        assert_eq!(parse_for("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(parse_for("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_for("2h"), Ok(Duration::from_secs(7200)));
        assert_eq!(parse_for("5"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_for("1:00:00"), Ok(Duration::from_secs(3600)));
        assert!(parse_for("2d").is_err(), "more than a day");
        assert!(parse_for("0s").is_err());
        assert!(parse_for("soon").is_err());
        assert!(parse_for("UNLIMITED").is_err());
    }

    #[test]
    fn groups_print_one_line_each() {
        let rep = DebugReport {
            groups: vec![
                (
                    "n[1-3]".into(),
                    vec![Raised {
                        flag: "route".into(),
                        level: "debug".into(),
                        until: 1000,
                    }],
                ),
                ("n[4-9]".into(), vec![]),
            ],
            failed: vec![("n10".into(), "timed out".into())],
        };
        let t = render(&rep, 1000 - 125);
        assert_eq!(
            t,
            "n[1-3]: route=debug for 2m05s more\nn[4-9]: nothing raised\nn10: did not answer: timed out\n"
        );
    }
}
