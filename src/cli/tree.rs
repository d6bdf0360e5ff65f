//! `canopy tree [--json] [--depth N] [--down] [--node X]`: the relay tree's health in one
//! screen, answered from what the controller already holds (no request per node): counts by
//! Slurm state word per subtree, unhealthy nodes grouped by reason as hostlists with their age,
//! and, with `--node`, the hops from the controller to a node with each hop's view of it. The
//! view is bounded ([`crate::console::tree::MAX_LINES`]) and says what it left out.

use super::client::{CliError, Client};
use crate::console::tree::{self, TreeQuery};
use crate::wire::messages::Body;

const USAGE: &str = "usage: canopy tree [--json] [--depth N] [--down] [--node NODE]
  --depth N    list subtrees N levels below the controller (default 1; 0: totals only)
  --down       only subtrees with an unhealthy node
  --node NODE  NODE's path from the controller and what each hop says of it
  --json       the whole report as JSON";

/// Parsed arguments: the query and whether to print JSON.
#[derive(Debug, PartialEq, Eq)]
pub struct Args {
    pub query: TreeQuery,
    pub json: bool,
}

/// Parse `canopy tree`'s arguments; an error names what was wrong.
pub fn parse(args: &[String]) -> Result<Option<Args>, String> {
    let mut a = Args {
        query: TreeQuery {
            depth: 1,
            ..Default::default()
        },
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
            "--down" => a.query.down = true,
            "--depth" | "-d" => {
                let v = value("--depth")?;
                a.query.depth =
                    v.parse::<u32>().ok().filter(|d| *d <= 64).ok_or_else(|| {
                        format!("--depth {v}: expected a number of levels (0-64)")
                    })?;
            }
            "--node" | "-n" => {
                let v = value("--node")?;
                if v.is_empty() || v.contains([',', '[']) {
                    return Err(format!("--node {v}: expected one node name"));
                }
                a.query.node = Some(v);
            }
            "-h" | "--help" => return Ok(None),
            other => return Err(format!("unknown option {other}")),
        }
    }
    Ok(Some(a))
}

pub fn run(args: &[String]) -> i32 {
    let a = match parse(args) {
        Ok(Some(a)) => a,
        Ok(None) => {
            println!("{USAGE}");
            return 0;
        }
        Err(e) => {
            eprintln!("canopy tree: error: {e}\n{USAGE}");
            return 2;
        }
    };
    super::block_on(async move {
        let r = async {
            let mut c = Client::connect(None).await?;
            c.call(Body::QueryTree(a.query.clone())).await
        }
        .await;
        match r {
            Ok(Body::Tree(t)) => {
                if a.json {
                    match serde_json::to_string_pretty(&*t) {
                        Ok(text) => println!("{text}"),
                        Err(e) => {
                            eprintln!("canopy tree: error: {e}");
                            return 1;
                        }
                    }
                } else {
                    print!("{}", tree::render(&t));
                }
                if a.query.node.is_some() && t.path.is_none() {
                    eprintln!("canopy tree: error: no such node");
                    return 1;
                }
                0
            }
            Ok(other) => super::report("canopy tree", &CliError::Unexpected(other.kind())),
            Err(e) => super::report("canopy tree", &e),
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
        let a = parse(&args(&["--depth", "3", "--down", "--node=n7", "--json"]))
            .unwrap()
            .unwrap();
        assert_eq!(a.query.depth, 3);
        assert!(a.query.down && a.json);
        assert_eq!(a.query.node.as_deref(), Some("n7"));
        assert_eq!(parse(&args(&[])).unwrap().unwrap().query.depth, 1);
        assert!(parse(&args(&["--depth", "x"]))
            .unwrap_err()
            .contains("--depth x"));
        assert!(parse(&args(&["--depth"]))
            .unwrap_err()
            .contains("needs a value"));
        assert!(parse(&args(&["--node", "n[1-2]"]))
            .unwrap_err()
            .contains("one node"));
        assert!(parse(&args(&["--frob"])).unwrap_err().contains("--frob"));
        assert_eq!(parse(&args(&["-h"])).unwrap(), None);
    }
}
