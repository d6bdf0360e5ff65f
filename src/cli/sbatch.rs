//! `sbatch`: parse options and the script (see `sbatch_args`), submit, print
//! `Submitted batch job N` (or just `N` with `--parsable`).

use std::io::{IsTerminal, Read};

use super::client::{CliError, Client};
use super::sbatch_args::{parse_submission, SubmitContext};
use crate::wire::messages::Body;

pub fn run(args: &[String]) -> i32 {
    let ctx = match context() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("sbatch: error: {e}");
            return 1;
        }
    };
    // A script on stdin is read only when no script path or --wrap is given;
    // parse_submission decides, we just offer it when stdin is not a terminal.
    let stdin_script = if std::io::stdin().is_terminal() {
        None
    } else {
        let needs = !args.iter().any(|a| a.starts_with("--wrap")) && script_arg_absent(args);
        if needs {
            let mut s = String::new();
            match std::io::stdin().read_to_string(&mut s) {
                Ok(_) => Some(s),
                Err(e) => {
                    eprintln!("sbatch: error: cannot read script from stdin: {e}");
                    return 1;
                }
            }
        } else {
            None
        }
    };
    let sub = match parse_submission(args, stdin_script, &ctx) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{e}");
            return 1;
        }
    };
    for w in &sub.warnings {
        eprintln!("{w}");
    }
    super::block_on(async move {
        let reply = async {
            let mut c = Client::connect(None).await?;
            c.call(Body::SubmitJob(Box::new(sub.submit))).await
        }
        .await;
        match reply {
            Ok(Body::SubmitReply(r)) => {
                if sub.quiet {
                } else if sub.parsable {
                    println!("{}", r.job_id);
                } else {
                    println!("Submitted batch job {}", r.job_id);
                }
                0
            }
            Ok(other) => {
                eprintln!("sbatch: error: unexpected reply {}", other.kind());
                1
            }
            Err(CliError::Refused(e)) => {
                eprintln!("sbatch: error: Batch job submission failed: {}", e.message);
                1
            }
            Err(e) => super::report("sbatch", &e),
        }
    })
}

/// True if no positional (script) argument appears among `args`.
fn script_arg_absent(args: &[String]) -> bool {
    // Cheap pre-check only to decide whether to read stdin; the real parser
    // decides what is the script. An option's separate value could look
    // positional, so we only read stdin when nothing positional-looking exists
    // after accounting for `--opt value` pairs of options that take values.
    !args
        .iter()
        .enumerate()
        .any(|(i, a)| !a.starts_with('-') && (i == 0 || !takes_value(&args[i - 1])))
}

fn takes_value(opt: &str) -> bool {
    if opt.contains('=') || !opt.starts_with('-') {
        return false;
    }
    const FLAGS: &[&str] = &[
        "--parsable",
        "-H",
        "--hold",
        "-Q",
        "--quiet",
        "--exclusive",
        "--requeue",
        "--no-requeue",
        "--test-only",
        "-W",
        "--wait",
        "-s",
        "--oversubscribe",
        "--contiguous",
        "-v",
        "--verbose",
        "-h",
        "--help",
        "--usage",
        "-V",
        "--version",
        "--overcommit",
        "-O",
        "--spread-job",
        "--use-min-nodes",
        "--ignore-pbs",
        "--get-user-env",
    ];
    if FLAGS.contains(&opt) {
        return false;
    }
    // "-N2" style short options carry their value.
    !(opt.len() > 2 && !opt.starts_with("--"))
}

fn context() -> Result<SubmitContext, std::io::Error> {
    let cwd = std::env::current_dir()?;
    let uid = nix::unistd::getuid();
    let gid = nix::unistd::getgid();
    let user = nix::unistd::User::from_uid(uid)
        .ok()
        .flatten()
        .map(|u| u.name)
        .unwrap_or_else(|| uid.to_string());
    let host = nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_else(|| "localhost".into());
    Ok(SubmitContext {
        cwd,
        env: std::env::vars().collect(),
        user,
        uid: uid.as_raw(),
        gid: gid.as_raw(),
        host,
        argv0: "sbatch".into(),
    })
}
