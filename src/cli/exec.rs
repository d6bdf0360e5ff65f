//! `canopy exec -w NODES [--timeout S] [--diff] [--json] -- CMD [ARGS...]`:
//! run a command on a node set through the relay tree, as the caller, and
//! print the results folded: one block per distinct (output, exit code)
//! with its hostlist, the exit codes grouped, and the nodes that gave no
//! result. Exit status: the largest remote exit code.
//!
//! Ctrl-C asks the controller to stop the command on the nodes; they answer
//! with what it printed so far, which is shown with the unfinished nodes
//! named. A second Ctrl-C quits at once.

use std::future::Future;
use std::pin::Pin;

use super::client::Client;
use crate::console::fold;
use crate::wire::exec::{ExecInterrupt, ExecRequest, DEFAULT_MAX_OUTPUT, DEFAULT_TIMEOUT_S};
use crate::wire::messages::Body;

const USAGE: &str = "usage: canopy exec -w NODES [-t|--timeout SECONDS] [--max-output BYTES] [--diff] [--json] [--] CMD [ARGS...]";

/// What the command line asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct Args {
    pub nodes: String,
    pub argv: Vec<String>,
    pub timeout_ms: u64,
    pub max_output: u32,
    pub diff: bool,
    pub json: bool,
}

fn seconds(v: &str) -> Result<u64, String> {
    match v.trim().parse::<f64>() {
        Ok(s) if s.is_finite() && s > 0.0 => Ok(((s * 1000.0).ceil() as u64).max(1)),
        _ => Err(format!(
            "invalid --timeout '{v}': a number of seconds above 0"
        )),
    }
}

/// Parse `canopy exec`'s arguments; the error names what was wrong.
pub fn parse(args: &[String]) -> Result<Args, String> {
    let mut a = Args {
        nodes: String::new(),
        argv: Vec::new(),
        timeout_ms: DEFAULT_TIMEOUT_S * 1000,
        max_output: DEFAULT_MAX_OUTPUT,
        diff: false,
        json: false,
    };
    let mut it = args.iter();
    let value = |it: &mut std::slice::Iter<String>, opt: &str| -> Result<String, String> {
        it.next()
            .cloned()
            .ok_or_else(|| format!("option {opt} needs a value"))
    };
    while let Some(arg) = it.next() {
        let (opt, inline) = match arg.split_once('=') {
            Some((o, v)) if o.starts_with("--") => (o, Some(v.to_string())),
            _ => (arg.as_str(), None),
        };
        match opt {
            "--" => {
                a.argv = it.cloned().collect();
                break;
            }
            "-w" | "--nodelist" => a.nodes = inline.map_or_else(|| value(&mut it, opt), Ok)?,
            "-t" | "--timeout" => {
                a.timeout_ms = seconds(&inline.map_or_else(|| value(&mut it, opt), Ok)?)?
            }
            "--max-output" => {
                let v = inline.map_or_else(|| value(&mut it, opt), Ok)?;
                a.max_output = v
                    .parse()
                    .map_err(|_| format!("invalid --max-output '{v}': a number of bytes"))?;
            }
            "--diff" => a.diff = true,
            "--json" => a.json = true,
            o if o.starts_with("-w") && o.len() > 2 => a.nodes = o[2..].to_string(),
            o if o.starts_with('-') && o.len() > 1 => return Err(format!("unknown option {o}")),
            _ => {
                // The command starts at the first word that is not an option.
                a.argv = std::iter::once(arg.clone()).chain(it.cloned()).collect();
                break;
            }
        }
    }
    if a.nodes.trim().is_empty() {
        return Err("no nodes given: -w NODES is required".into());
    }
    if a.argv.is_empty() {
        return Err("no command given".into());
    }
    Ok(a)
}

pub fn run(args: &[String]) -> i32 {
    if args.iter().any(|a| a == "-h" || a == "--help") {
        println!("{USAGE}");
        return 0;
    }
    let a = match parse(args) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("canopy exec: error: {e}\n{USAGE}");
            return 2;
        }
    };
    // Unlike the other commands, this one needs the signal driver (Ctrl-C).
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("canopy exec: cannot start runtime: {e}");
            return 1;
        }
    };
    rt.block_on(exec(a))
}

async fn exec(a: Args) -> i32 {
    use tokio::signal::unix::{signal, SignalKind};
    let token: u64 = rand::random();
    let req = ExecRequest {
        nodes: a.nodes.clone(),
        argv: a.argv.clone(),
        timeout_ms: a.timeout_ms,
        max_output: a.max_output,
        token,
    };
    let mut sigint = match signal(SignalKind::interrupt()) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("canopy exec: cannot watch for Ctrl-C: {e}");
            return 1;
        }
    };
    let mut client = match Client::connect(None).await {
        Ok(c) => c,
        Err(e) => return super::report("canopy exec", &e),
    };
    let call = client.call(Body::Exec(req));
    tokio::pin!(call);
    let mut stopping: Option<Pin<Box<dyn Future<Output = ()>>>> = None;
    let mut interrupted = false;
    let reply = loop {
        tokio::select! {
            r = &mut call => break r,
            _ = sigint.recv() => {
                if interrupted {
                    eprintln!(
                        "canopy exec: quit before the nodes answered; not finished: {}",
                        a.nodes
                    );
                    return 130;
                }
                interrupted = true;
                eprintln!(
                    "canopy exec: interrupted: stopping the command and gathering what it printed (Ctrl-C again to quit at once)"
                );
                stopping = Some(Box::pin(interrupt(a.nodes.clone(), token)));
            }
            _ = async { stopping.as_mut().expect("guarded").await }, if stopping.is_some() => {
                stopping = None;
            }
        }
    };
    match reply {
        Ok(Body::ExecReply(report)) => {
            if a.json {
                match serde_json::to_string_pretty(&fold::to_json(&report, a.diff)) {
                    Ok(t) => println!("{t}"),
                    Err(e) => {
                        eprintln!("canopy exec: error: {e}");
                        return 1;
                    }
                }
            } else {
                print!("{}", fold::render(&report, a.diff));
            }
            let status = fold::exit_status(&report);
            if interrupted {
                status.max(130)
            } else {
                status
            }
        }
        Ok(other) => {
            eprintln!("canopy exec: error: unexpected reply {}", other.kind());
            1
        }
        Err(e) => super::report("canopy exec", &e),
    }
}

/// Ask the controller, on a connection of its own (the first one waits for
/// the report), to stop run `token`.
async fn interrupt(nodes: String, token: u64) {
    let sent = async {
        let mut c = Client::connect(None).await?;
        c.call(Body::ExecInterrupt(ExecInterrupt { nodes, token }))
            .await
    }
    .await;
    if let Err(e) = sent {
        eprintln!("canopy exec: could not stop the command: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &[&str]) -> Vec<String> {
        s.iter().map(|a| a.to_string()).collect()
    }

    #[test]
    fn parses_options_and_the_command_after_them() {
        let a = parse(&args(&[
            "-w",
            "n[1-4]",
            "--timeout",
            "2.5",
            "--diff",
            "--json",
            "--",
            "uname",
            "-r",
        ]))
        .unwrap();
        assert_eq!(a.nodes, "n[1-4]");
        assert_eq!(a.timeout_ms, 2500);
        assert!(a.diff && a.json);
        assert_eq!(a.argv, vec!["uname", "-r"]);
        let a = parse(&args(&["-wn1", "--max-output=10", "echo", "-n", "x"])).unwrap();
        assert_eq!(a.nodes, "n1");
        assert_eq!(a.max_output, 10);
        assert_eq!(
            a.argv,
            vec!["echo", "-n", "x"],
            "options after CMD are CMD's"
        );
    }

    #[test]
    fn errors_name_what_was_wrong() {
        let e = parse(&args(&["--", "true"])).unwrap_err();
        assert!(e.contains("-w"), "{e}");
        let e = parse(&args(&["-w", "n1"])).unwrap_err();
        assert!(e.contains("no command"), "{e}");
        let e = parse(&args(&["-w", "n1", "-t", "soon", "true"])).unwrap_err();
        assert!(e.contains("--timeout 'soon'"), "{e}");
        let e = parse(&args(&["-w", "n1", "--bogus", "true"])).unwrap_err();
        assert!(e.contains("--bogus"), "{e}");
        let e = parse(&args(&["-w"])).unwrap_err();
        assert!(e.contains("needs a value"), "{e}");
    }
}
