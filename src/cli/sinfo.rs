//! `sinfo`: partitions and nodes in Slurm's views (default, `-s`, `-N`, `-R`,
//! `-l`, `-o`, `-O`). Grouping and layout live in `format::sinfo`.

use clap::Parser;

use super::client::Client;
use super::format::sinfo::{render, SinfoFormat, SinfoView};
use crate::config::hostlist;
use crate::wire::messages::{Body, NodeQuery};

#[derive(Parser, Debug)]
#[command(name = "sinfo", disable_help_flag = true, disable_version_flag = true)]
struct Args {
    #[arg(short = 'o', long = "format")]
    format: Option<String>,
    #[arg(short = 'O', long = "Format")]
    format_long: Option<String>,
    #[arg(short = 'h', long = "noheader")]
    noheader: bool,
    #[arg(short = 'l', long = "long")]
    long: bool,
    #[arg(short = 'N', long = "Node")]
    node_view: bool,
    #[arg(short = 's', long = "summarize")]
    summarize: bool,
    #[arg(short = 'R', long = "list-reasons")]
    reasons: bool,
    #[arg(short = 'e', long = "exact")]
    exact: bool,
    #[arg(short = 't', long = "states")]
    states: Option<String>,
    #[arg(short = 'p', long = "partition")]
    partition: Option<String>,
    #[arg(short = 'n', long = "nodes")]
    nodes: Option<String>,
    /// Accepted for compatibility: hidden partitions are not implemented yet.
    #[arg(short = 'a', long = "all")]
    all: bool,
    #[arg(short = 'v', long = "verbose", action = clap::ArgAction::Count)]
    verbose: u8,
    #[arg(long = "help")]
    help: bool,
    #[arg(short = 'V', long = "version")]
    version: bool,
}

pub fn run(args: &[String]) -> i32 {
    let argv = std::iter::once("sinfo".to_string()).chain(args.iter().cloned());
    let a = match Args::try_parse_from(argv) {
        Ok(a) => a,
        Err(e) => {
            eprintln!(
                "sinfo: {}",
                e.to_string().trim_start_matches("error: ").trim_end()
            );
            eprintln!("Try \"sinfo --help\" for more information");
            return 1;
        }
    };
    if a.help {
        println!("Usage: sinfo [-N] [-s] [-R] [-l] [-h] [-e] [-p partitions] [-n nodes] [-t states] [-o format] [-O fields]");
        return 0;
    }
    if a.version {
        println!("canopy {}", env!("CARGO_PKG_VERSION"));
        return 0;
    }
    if a.long && a.format.is_some() {
        eprintln!("sinfo: fatal: Options -o(--format) and -l(--long) are mutually exclusive. Please remove one and retry.");
        return 1;
    }
    let view = if a.reasons {
        SinfoView::Reasons
    } else if a.node_view {
        SinfoView::Nodes
    } else if a.summarize {
        SinfoView::Summary
    } else {
        SinfoView::Partitions
    };
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let (mut fmt, warnings) = match (
        a.format.clone().or_else(|| env("SINFO_FORMAT")),
        a.format_long.clone(),
    ) {
        (Some(f), _) if !a.long => SinfoFormat::user_format(view, &f),
        (None, Some(f)) if !a.long => SinfoFormat::field_list(view, &f),
        _ => (SinfoFormat::standard(view, a.long), vec![]),
    };
    for w in warnings {
        eprintln!("{w}");
    }
    fmt.no_header = a.noheader;
    fmt.exact = a.exact;
    fmt.states = a.states.clone();
    fmt.partitions = a
        .partition
        .clone()
        .or_else(|| env("SINFO_PARTITION"))
        .map(|p| p.split(',').map(str::to_string).collect());
    fmt.nodes = match a.nodes.as_deref().map(hostlist::expand).transpose() {
        Ok(n) => n,
        Err(e) => {
            eprintln!("sinfo: error: Invalid node name specified: {e}");
            return 1;
        }
    };
    super::block_on(async move {
        let r = async {
            let mut c = Client::connect(None).await?;
            let parts = c.call(Body::QueryPartitions).await?;
            let nodes = c.call(Body::QueryNodes(NodeQuery::default())).await?;
            Ok::<_, super::client::CliError>((parts, nodes))
        }
        .await;
        let (parts, nodes) = match r {
            Ok((Body::Partitions(p), Body::Nodes(n))) => (p, n),
            Ok(_) => {
                eprintln!("sinfo: error: unexpected reply from the controller");
                return 1;
            }
            Err(e) => {
                eprintln!("slurm_load_partitions: {e}");
                return 1;
            }
        };
        match render(&parts, &nodes, &fmt, chrono::Utc::now().timestamp()) {
            Ok(text) => {
                print!("{text}");
                0
            }
            Err(e) => {
                eprintln!("sinfo: error: {e}");
                1
            }
        }
    })
}
