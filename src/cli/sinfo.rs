//! `sinfo`: partitions and nodes in Slurm's views (default, `-s`, `-N`, `-R`,
//! `-l`, `-o`, `-O`). Grouping and layout live in `format::sinfo`.

use super::client::Client;
use super::format::sinfo::{render, SinfoFormat, SinfoView};
use super::getopt::{
    self, spec, Ambiguity,
    ArgKind::{Flag, Required},
};
use crate::config::hostlist;
use crate::wire::messages::{Body, NodeQuery};

/// What each option does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Opt {
    All,
    Exact,
    Format,
    FormatLong,
    Dead,
    Help,
    Iterate,
    Long,
    Node,
    NoHeader,
    Nodes,
    Partition,
    Reasons,
    Responding,
    States,
    Summarize,
    Usage,
    Verbose,
    Version,
    Sort,
    Clusters,
    /// `-T`: the reservations instead of partitions.
    Reservations,
    /// Options that change nothing on one cluster without hidden
    /// partitions: federation views, `--hide` (the default), and
    /// `--noconvert` (sinfo prints memory in MB either way).
    Moot,
}

/// sinfo's option table (getopt_long syntax, as Slurm's sinfo reads it).
static OPTIONS: &[getopt::OptSpec<Opt>] = &[
    spec("all", Some('a'), Flag, Opt::All),
    spec("clusters", Some('M'), Required, Opt::Clusters),
    spec("dead", Some('d'), Flag, Opt::Dead),
    spec("exact", Some('e'), Flag, Opt::Exact),
    spec("federation", None, Flag, Opt::Moot),
    spec("format", Some('o'), Required, Opt::Format),
    spec("Format", Some('O'), Required, Opt::FormatLong),
    spec("help", None, Flag, Opt::Help),
    spec("hide", None, Flag, Opt::Moot),
    spec("iterate", Some('i'), Required, Opt::Iterate),
    spec("local", None, Flag, Opt::Moot),
    spec("long", Some('l'), Flag, Opt::Long),
    spec("Node", Some('N'), Flag, Opt::Node),
    spec("noconvert", None, Flag, Opt::Moot),
    spec("noheader", Some('h'), Flag, Opt::NoHeader),
    spec("nodes", Some('n'), Required, Opt::Nodes),
    spec("partition", Some('p'), Required, Opt::Partition),
    spec("responding", Some('r'), Flag, Opt::Responding),
    spec("list-reasons", Some('R'), Flag, Opt::Reasons),
    spec("summarize", Some('s'), Flag, Opt::Summarize),
    spec("sort", Some('S'), Required, Opt::Sort),
    spec("states", Some('t'), Required, Opt::States),
    spec("reservation", Some('T'), Flag, Opt::Reservations),
    spec("usage", None, Flag, Opt::Usage),
    spec("verbose", Some('v'), Flag, Opt::Verbose),
    spec("version", Some('V'), Flag, Opt::Version),
];

/// A parsed command line.
#[derive(Debug, Default)]
struct Args {
    format: Option<String>,
    format_long: Option<String>,
    noheader: bool,
    long: bool,
    node_view: bool,
    summarize: bool,
    reasons: bool,
    exact: bool,
    states: Option<String>,
    partition: Option<String>,
    nodes: Option<String>,
    /// `-i secs`: list again every secs seconds.
    iterate_arg: Option<String>,
    dead: bool,
    responding: bool,
    help: bool,
    usage: bool,
    version: bool,
    sort: Option<String>,
    /// `-M`: the clusters to list (this one, by name, or `all`).
    clusters: Option<String>,
    reservations: bool,
    /// `-a`, or `-p`: hidden partitions too.
    all: bool,
}

impl Args {
    fn parse(args: &[String]) -> Result<Args, getopt::GetoptError> {
        let (options, _words) = getopt::read_all(OPTIONS, args, Ambiguity::SameAction)?;
        let mut a = Args::default();
        for g in options {
            let v = g.value;
            match g.spec.action {
                Opt::All => a.all = true,
                Opt::Verbose => {}
                Opt::Exact => a.exact = true,
                Opt::Format => a.format = v,
                Opt::FormatLong => a.format_long = v,
                Opt::Help => a.help = true,
                Opt::Long => a.long = true,
                Opt::Iterate => a.iterate_arg = v,
                Opt::Dead => a.dead = true,
                Opt::Responding => a.responding = true,
                Opt::Node => a.node_view = true,
                Opt::NoHeader => a.noheader = true,
                Opt::Nodes => a.nodes = v,
                // Naming partitions shows them even if hidden, as Slurm's sinfo does.
                Opt::Partition => {
                    a.partition = v;
                    a.all = true;
                }
                Opt::Reasons => a.reasons = true,
                Opt::States => a.states = v,
                Opt::Summarize => a.summarize = true,
                Opt::Usage => a.usage = true,
                Opt::Version => a.version = true,
                Opt::Sort => a.sort = v,
                Opt::Clusters => a.clusters = v,
                Opt::Reservations => a.reservations = true,
                Opt::Moot => {}
            }
        }
        Ok(a)
    }
}

const USAGE: &str = "Usage: sinfo [-abdelNRrsTv] [-i seconds] [-t states] [-p partition] [-n nodes] [-S fields] [-o format] [-O Format] [--federation] [--local] [--sibling]";

pub fn run(args: &[String]) -> i32 {
    let a = match Args::parse(args) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{}", e.message("sinfo"));
            eprintln!("Try \"sinfo --help\" for more information");
            return 1;
        }
    };
    if a.help || a.usage {
        println!("{USAGE}");
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
    fmt.dead_only = a.dead;
    fmt.responding_only = a.responding;
    fmt.states = a.states.clone();
    fmt.sort = a.sort.clone().or_else(|| env("SINFO_SORT"));
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
    let iterate = match super::iterate_option("sinfo", a.iterate_arg.as_deref()) {
        Ok(i) => i,
        Err(code) => return code,
    };
    let Some(every) = iterate else {
        return super::block_on(list(&fmt, &a));
    };
    fmt.date_line = !fmt.no_header;
    super::block_on(async { super::repeat_every(every, || list(&fmt, &a)).await })
}

/// Fetch partitions and nodes and print the listing once; the exit code.
async fn list(fmt: &SinfoFormat, a: &Args) -> i32 {
    {
        let r = async {
            let mut c = Client::connect(None).await?;
            if let Some(list) = &a.clusters {
                super::check_clusters(list, &c.conf.cluster_name)
                    .map_err(super::client::CliError::Usage)?;
                println!("CLUSTER: {}", c.conf.cluster_name);
            }
            if a.reservations {
                let list = c.call(Body::QueryResv).await?;
                return Ok(Some((list, Body::Ok)));
            }
            let parts = c.call(Body::QueryPartitions).await?;
            let nodes = c.call(Body::QueryNodes(NodeQuery::default())).await?;
            Ok::<_, super::client::CliError>(Some((parts, nodes)))
        }
        .await;
        let (parts, nodes) = match r {
            Ok(Some((Body::Partitions(p), Body::Nodes(n)))) => (
                p.into_iter()
                    .filter(|p| a.all || !p.hidden)
                    .collect::<Vec<_>>(),
                n,
            ),
            Ok(Some((Body::Reservations(list), _))) => {
                if list.is_empty() {
                    println!("No reservations in the system");
                } else {
                    let now = chrono::Utc::now().timestamp();
                    print!("{}", super::format::resv::sinfo_reservations(&list, now));
                }
                return 0;
            }
            Ok(None) => return 0,
            Ok(Some(_)) => {
                eprintln!("sinfo: error: unexpected reply from the controller");
                return 1;
            }
            Err(super::client::CliError::Usage(e)) => {
                eprintln!("sinfo: error: {e}");
                return 1;
            }
            Err(e) => {
                eprintln!("slurm_load_partitions: {e}");
                return 1;
            }
        };
        match render(&parts, &nodes, fmt, chrono::Utc::now().timestamp()) {
            Ok(text) => {
                print!("{text}");
                0
            }
            Err(e) => {
                eprintln!("sinfo: error: {e}");
                1
            }
        }
    }
}
