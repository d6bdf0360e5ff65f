//! `scancel`: cancel or signal jobs by id. Exit 0 also for ids that are
//! unknown or already finished (with the error printed), as Slurm does.

use clap::Parser;

use super::client::{CliError, Client};
use crate::wire::messages::{Body, CancelRequest};

#[derive(Parser, Debug)]
#[command(
    name = "scancel",
    disable_help_flag = true,
    disable_version_flag = true
)]
struct Args {
    /// Signal to send instead of cancelling (name or number, optional SIG prefix).
    #[arg(short = 's', long = "signal")]
    signal: Option<String>,
    /// Signal only the batch shell.
    #[arg(short = 'b', long = "batch")]
    batch: bool,
    /// Do not report errors for finished or unknown jobs.
    #[arg(short = 'Q', long = "quiet")]
    quiet: bool,
    #[arg(short = 'v', long = "verbose", action = clap::ArgAction::Count)]
    verbose: u8,
    #[arg(long = "help")]
    help: bool,
    /// Job ids (`123`, `123_4` array tasks are not supported yet).
    ids: Vec<String>,
}

/// Parse a signal name (`TERM`, `SIGTERM`, `usr2`) or number.
pub fn parse_signal(s: &str) -> Option<i32> {
    if let Ok(n) = s.parse::<i32>() {
        return (1..=64).contains(&n).then_some(n);
    }
    let up = s.to_ascii_uppercase();
    let name = up.strip_prefix("SIG").unwrap_or(&up);
    let n = match name {
        "HUP" => 1,
        "INT" => 2,
        "QUIT" => 3,
        "ABRT" => 6,
        "KILL" => 9,
        "USR1" => 10,
        "USR2" => 12,
        "PIPE" => 13,
        "ALRM" => 14,
        "TERM" => 15,
        "CONT" => 18,
        "STOP" => 19,
        "TSTP" => 20,
        "URG" => 23,
        "XCPU" => 24,
        _ => return None,
    };
    Some(n)
}

pub fn run(args: &[String]) -> i32 {
    let argv = std::iter::once("scancel".to_string()).chain(args.iter().cloned());
    let a = match Args::try_parse_from(argv) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("scancel: {}", e.to_string().trim_start_matches("error: "));
            return 1;
        }
    };
    if a.help {
        println!("Usage: scancel [-b] [-Q] [-s signal] job_id[,job_id...]");
        return 0;
    }
    let signal = match a.signal.as_deref().map(|s| (s, parse_signal(s))) {
        None => None,
        Some((_, Some(n))) => Some(n),
        Some((s, None)) => {
            eprintln!("scancel: error: Invalid job signal: {s}");
            return 1;
        }
    };
    let mut ids = Vec::new();
    for raw in a
        .ids
        .iter()
        .flat_map(|s| s.split(','))
        .filter(|s| !s.is_empty())
    {
        match raw.parse::<u32>() {
            Ok(n) => ids.push(n),
            Err(_) => {
                eprintln!("scancel: error: Invalid job id {raw}");
                return 1;
            }
        }
    }
    if ids.is_empty() {
        eprintln!("scancel: error: No job identification provided");
        return 1;
    }
    let quiet = a.quiet;
    super::block_on(async move {
        let req = CancelRequest {
            job_ids: ids,
            signal,
            batch_only: a.batch,
        };
        let r = async {
            let mut c = Client::connect(None).await?;
            c.call(Body::CancelJobs(req)).await
        }
        .await;
        match r {
            Ok(Body::CancelReply(rep)) => {
                for (id, err) in rep.results {
                    if let Some(msg) = err {
                        if !quiet {
                            eprintln!("scancel: error: Kill job error on job id {id}: {msg}");
                        }
                    }
                }
                0
            }
            Ok(other) => {
                eprintln!("scancel: error: unexpected reply {}", other.kind());
                1
            }
            Err(CliError::Refused(e)) => {
                eprintln!("scancel: error: {}", e.message);
                1
            }
            Err(e) => super::report("scancel", &e),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::parse_signal;

    #[test]
    fn signal_names_and_numbers() {
        assert_eq!(parse_signal("SIGTERM"), Some(15));
        assert_eq!(parse_signal("usr2"), Some(12));
        assert_eq!(parse_signal("9"), Some(9));
        assert_eq!(parse_signal("0"), None);
        assert_eq!(parse_signal("BOGUS"), None);
    }
}
