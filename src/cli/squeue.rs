//! `squeue`: list jobs in Slurm's formats (`-o`, `-O`, `-l`, `-h`), filtered by
//! id, user, name, partition, node and state. Layout lives in `format::squeue`.

use super::client::{CliError, Client};
use super::format::squeue::{group_pending_arrays, render, SqueueFormat, START_SORT, START_STATES};
use super::format::squeue_steps::{render as render_steps, StepFormat};
use super::format::FormatError;
use super::getopt::{
    self, spec, Ambiguity,
    ArgKind::{Flag, Optional, Required},
};
use crate::config::hostlist;
use crate::wire::messages::{AcctQuery, Body, JobQuery};
use crate::wire::types::{AcctJob, AcctStep, JobInfo, JobState, StepKind};

/// What each option does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Opt {
    Account,
    All,
    Array,
    Format,
    FormatLong,
    Help,
    Iterate,
    Jobs,
    Long,
    Me,
    Name,
    NoHeader,
    NodeList,
    Partition,
    Sort,
    Start,
    States,
    Steps,
    User,
    Usage,
    Verbose,
    Version,
    Clusters,
    NoConvert,
    /// `-q`: jobs of these QOS.
    Qos,
    /// `-R`: jobs of these reservations.
    Reservation,
    /// `-L`: jobs asking for any of these licenses.
    Licenses,
    /// Options that change nothing on a single cluster whose jobs each name
    /// one partition: federation views, `--hide` (the default), `-P`
    /// (per-partition listing of multi-partition jobs), `--array-unique`
    /// (pending tasks are expanded only with `-r`, as in 22.05).
    Moot,
}

/// squeue's option table (getopt_long syntax, as Slurm's squeue reads it).
static OPTIONS: &[getopt::OptSpec<Opt>] = &[
    spec("account", Some('A'), Required, Opt::Account),
    spec("all", Some('a'), Flag, Opt::All),
    spec("array", Some('r'), Flag, Opt::Array),
    spec("array-unique", None, Flag, Opt::Moot),
    spec("clusters", Some('M'), Required, Opt::Clusters),
    spec("federation", None, Flag, Opt::Moot),
    spec("format", Some('o'), Required, Opt::Format),
    spec("Format", Some('O'), Required, Opt::FormatLong),
    spec("help", None, Flag, Opt::Help),
    spec("hide", None, Flag, Opt::Moot),
    spec("iterate", Some('i'), Required, Opt::Iterate),
    spec("jobs", Some('j'), Optional, Opt::Jobs),
    spec("licenses", Some('L'), Required, Opt::Licenses),
    spec("local", None, Flag, Opt::Moot),
    spec("long", Some('l'), Flag, Opt::Long),
    spec("me", None, Flag, Opt::Me),
    spec("name", Some('n'), Required, Opt::Name),
    spec("noconvert", None, Flag, Opt::NoConvert),
    spec("noheader", Some('h'), Flag, Opt::NoHeader),
    spec("nodelist", Some('w'), Required, Opt::NodeList),
    spec("partition", Some('p'), Required, Opt::Partition),
    spec("priority", Some('P'), Flag, Opt::Moot),
    spec("qos", Some('q'), Required, Opt::Qos),
    spec("reservation", Some('R'), Required, Opt::Reservation),
    spec("sibling", None, Flag, Opt::Moot),
    spec("sort", Some('S'), Required, Opt::Sort),
    spec("start", None, Flag, Opt::Start),
    spec("states", Some('t'), Required, Opt::States),
    spec("steps", Some('s'), Optional, Opt::Steps),
    spec("usage", None, Flag, Opt::Usage),
    spec("user", Some('u'), Required, Opt::User),
    spec("verbose", Some('v'), Flag, Opt::Verbose),
    spec("version", Some('V'), Flag, Opt::Version),
];

/// A parsed command line.
#[derive(Debug, Default)]
struct Args {
    format: Option<String>,
    format_long: Option<String>,
    noheader: bool,
    /// `-a`: jobs of hidden partitions too.
    all: bool,
    long: bool,
    states: Option<String>,
    user: Option<String>,
    me: bool,
    jobs: Option<String>,
    name: Option<String>,
    partition: Option<String>,
    /// `-A`: comma list, compared lower-cased (Slurm stores accounts so).
    account: Option<String>,
    /// `-q`: comma list, lower-cased; a job without a QOS matches none.
    qos: Option<String>,
    nodelist: Option<String>,
    sort: Option<String>,
    /// `--start`: pending jobs with their expected start times.
    start: bool,
    /// One line per array task, pending ones included.
    array: bool,
    /// `-s[list]`: list running steps instead of jobs (`Some("")`: all).
    steps: Option<String>,
    /// `-i secs`: list again every secs seconds.
    iterate_arg: Option<String>,
    help: bool,
    usage: bool,
    version: bool,
    /// `-M`: the clusters to list (this one, by name, or `all`).
    clusters: Option<String>,
    /// `--noconvert`: memory in MB, not the largest unit.
    noconvert: bool,
    /// `-R`.
    reservation: Option<String>,
    /// `-L`.
    licenses: Option<String>,
}

impl Args {
    fn parse(args: &[String]) -> Result<Args, getopt::GetoptError> {
        let (options, words) = getopt::read_all(OPTIONS, args, Ambiguity::SameAction)?;
        let mut a = Args::default();
        for g in options {
            let v = g.value;
            match g.spec.action {
                Opt::All => a.all = true,
                Opt::Verbose => {}
                Opt::Array => a.array = true,
                Opt::Format => a.format = v,
                Opt::FormatLong => a.format_long = v,
                Opt::Help => a.help = true,
                Opt::Iterate => a.iterate_arg = v,
                Opt::Jobs => a.jobs = v.or(a.jobs),
                Opt::Long => a.long = true,
                Opt::Me => a.me = true,
                Opt::Name => a.name = v,
                Opt::NoHeader => a.noheader = true,
                Opt::NodeList => a.nodelist = v,
                Opt::Partition => a.partition = v,
                Opt::Account => a.account = v.map(|v| v.to_lowercase()),
                Opt::Qos => a.qos = v.map(|v| v.to_lowercase()),
                Opt::Sort => a.sort = v,
                Opt::Start => a.start = true,
                Opt::States => a.states = v,
                Opt::Steps => a.steps = Some(v.unwrap_or_default()),
                Opt::User => a.user = v,
                Opt::Usage => a.usage = true,
                Opt::Version => a.version = true,
                Opt::Clusters => a.clusters = v,
                Opt::NoConvert => a.noconvert = true,
                Opt::Reservation => a.reservation = v,
                Opt::Licenses => a.licenses = v,
                Opt::Moot => {}
            }
        }
        // Like Slurm, job ids may also follow the options (`squeue 12 13`).
        if !words.is_empty() {
            let listed = a.jobs.take().into_iter().chain(words);
            a.jobs = Some(listed.collect::<Vec<_>>().join(","));
        }
        Ok(a)
    }
}

pub fn run(args: &[String]) -> i32 {
    let a = match Args::parse(args) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{}", e.message("squeue"));
            eprintln!("Try \"squeue --help\" for more information");
            return 1;
        }
    };
    if a.usage {
        println!("{USAGE}");
        return 0;
    }
    if a.help {
        println!("{USAGE}");
        return 0;
    }
    if a.version {
        println!("canopy {}", env!("CARGO_PKG_VERSION"));
        return 0;
    }
    if a.long && a.format.is_some() {
        eprintln!("squeue: fatal: Options -o(--format) and -l(--long) are mutually exclusive. Please remove one and retry.");
        return 1;
    }
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    if a.steps.is_some() {
        return steps(&a);
    }
    let (mut fmt, warnings) = match (
        a.format.clone().or_else(|| env("SQUEUE_FORMAT")),
        a.format_long.clone().or_else(|| env("SQUEUE_FORMAT2")),
    ) {
        (Some(f), _) if !a.long => SqueueFormat::user_format(&f),
        (None, Some(f)) if !a.long => SqueueFormat::field_list(&f),
        _ if a.long => (SqueueFormat::long_format(), vec![]),
        _ if a.start => (SqueueFormat::start_format(), vec![]),
        _ => (SqueueFormat::default_format(), vec![]),
    };
    for w in warnings {
        eprintln!("squeue: error: {w}");
    }
    fmt.no_header = a.noheader;
    fmt.noconvert = a.noconvert;
    fmt.sort = a.sort.clone().or_else(|| env("SQUEUE_SORT"));
    fmt.states = a.states.clone().or_else(|| env("SQUEUE_STATES"));
    if a.start {
        fmt.sort = fmt.sort.or_else(|| Some(START_SORT.into()));
        fmt.states = fmt.states.or_else(|| Some(START_STATES.into()));
    }
    let ids = match parse_ids(a.jobs.as_deref()) {
        Ok(ids) => ids,
        Err(e) => {
            eprintln!("squeue: error: {e}");
            return 1;
        }
    };
    let (users, nodes) = match user_and_node_filters(&a) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("squeue: error: {e}");
            return 1;
        }
    };
    // With explicit ids, finished jobs are shown too (as Slurm does within MinJobAge).
    if !ids.is_empty() && fmt.states.is_none() {
        fmt.states = Some("all".into());
    }
    let iterate = match super::iterate_option("squeue", a.iterate_arg.as_deref()) {
        Ok(i) => i,
        Err(code) => return code,
    };
    let Some(every) = iterate else {
        return super::block_on(async { list(&a, &fmt, &ids, &users, &nodes).await });
    };
    fmt.date_line = !fmt.no_header;
    super::block_on(async {
        super::repeat_every(every, || list(&a, &fmt, &ids, &users, &nodes)).await
    })
}

/// Fetch the jobs, filter them and print the listing once; the exit code.
async fn list(
    a: &Args,
    fmt: &SqueueFormat,
    ids: &[(u32, Option<u32>)],
    users: &Option<Vec<u32>>,
    nodes: &Option<Vec<String>>,
) -> i32 {
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    {
        let q = JobQuery {
            job_ids: ids.iter().map(|&(id, _)| id).collect(),
            include_finished: true,
            brief: !fmt.needs_detail(),
        };
        let r = async {
            let mut c = Client::connect(None).await?;
            if let Some(list) = &a.clusters {
                super::check_clusters(list, &c.conf.cluster_name).map_err(CliError::Usage)?;
                println!("CLUSTER: {}", c.conf.cluster_name);
            }
            c.call(Body::QueryJobs(q)).await
        }
        .await;
        let jobs = match r {
            Ok(Body::Jobs(j)) => j.into_rows(),
            Ok(other) => {
                eprintln!("squeue: error: unexpected reply {}", other.kind());
                return 1;
            }
            Err(CliError::Refused(e)) => {
                eprintln!("slurm_load_jobs error: {}", e.message);
                return 1;
            }
            Err(CliError::Usage(e)) => {
                eprintln!("squeue: error: {e}");
                return 1;
            }
            Err(e) => {
                eprintln!("slurm_load_jobs error: {e}");
                return 1;
            }
        };
        if !ids.is_empty() && jobs.is_empty() {
            eprintln!("slurm_load_jobs error: Invalid job id specified");
            return 1;
        }
        let names: Option<Vec<&str>> = a.name.as_deref().map(|n| n.split(',').collect());
        let parts: Option<Vec<&str>> = a.partition.as_deref().map(|p| p.split(',').collect());
        let accounts: Option<Vec<&str>> = a.account.as_deref().map(|p| p.split(',').collect());
        let qos: Option<Vec<&str>> = a.qos.as_deref().map(|p| p.split(',').collect());
        // Jobs of hidden partitions only with `-a`, or when named by id
        // or partition (squeue sets its all flag for `-j` and `-p`).
        let all = a.all || !ids.is_empty() || parts.is_some();
        let shown: Vec<JobInfo> = jobs
            .into_iter()
            .filter(|j| all || !j.hidden)
            .filter(|j| {
                a.reservation
                    .as_deref()
                    .is_none_or(|r| r.split(',').any(|r| r == j.reservation))
            })
            .filter(|j| {
                a.licenses.as_deref().is_none_or(|l| {
                    l.split(',').any(|want| {
                        j.licenses
                            .split(',')
                            .any(|have| have.split(':').next() == Some(want))
                    })
                })
            })
            .filter(|j| {
                ids.is_empty()
                    || ids
                        .iter()
                        .any(|&(id, task)| super::names_job(id, task, j.job_id, j.array))
            })
            .filter(|j| users.as_ref().is_none_or(|u| u.contains(&j.uid)))
            .filter(|j| names.as_ref().is_none_or(|n| n.contains(&j.name.as_str())))
            .filter(|j| {
                parts
                    .as_ref()
                    .is_none_or(|p| p.contains(&j.partition.as_str()))
            })
            .filter(|j| {
                accounts
                    .as_ref()
                    .is_none_or(|want| want.contains(&j.account.as_str()))
            })
            .filter(|j| {
                qos.as_ref()
                    .is_none_or(|want| want.contains(&j.qos.as_str()))
            })
            .filter(|j| {
                nodes.as_ref().is_none_or(|want| {
                    hostlist::expand(&j.nodes)
                        .map(|have| have.iter().any(|h| want.contains(h)))
                        .unwrap_or(false)
                })
            })
            .collect();
        let array_env = env("SQUEUE_ARRAY").is_some();
        let shown = if a.array || array_env {
            shown
        } else {
            group_pending_arrays(shown)
        };
        match render(&shown, fmt, chrono::Utc::now().timestamp()) {
            Ok(text) => {
                print!("{text}");
                0
            }
            Err(e @ FormatError::InvalidJobState { .. }) => {
                eprintln!("squeue: error: {e}");
                eprintln!("squeue: error: Valid job states include: {VALID_STATES}\n");
                1
            }
            Err(e) => {
                eprintln!("squeue: error: {e}");
                1
            }
        }
    }
}

/// `squeue -s`: the running steps, from the accounting view (which holds
/// every job's batch and srun steps), narrowed by the step list, `-j`, `-u`,
/// `-p` and `-w`.
fn steps(a: &Args) -> i32 {
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let (mut fmt, warnings) = match (a.format.clone(), a.format_long.clone()) {
        (Some(f), _) => StepFormat::user_format(&f),
        (None, Some(f)) => StepFormat::field_list(&f),
        _ => (StepFormat::default_format(), vec![]),
    };
    for w in warnings {
        eprintln!("squeue: error: {w}");
    }
    fmt.no_header = a.noheader;
    fmt.date_line = a.long;
    fmt.sort = a.sort.clone().or_else(|| env("SQUEUE_SORT"));
    // `J` (every step of job J) or `J.S`; from -s's list and the words that
    // follow the options. Array tasks (`J_T`) are not step ids: Slurm says
    // nothing for them either.
    let list: Vec<&str> = a
        .steps
        .iter()
        .chain(a.jobs.iter())
        .flat_map(|l| l.split(','))
        .filter(|s| !s.is_empty())
        .collect();
    let mut wanted: Vec<(u32, Option<String>)> = Vec::new();
    for item in list {
        let (job, step) = match item.split_once('.') {
            Some((j, s)) => (j, Some(s.to_string())),
            None => (item, None),
        };
        match job.parse() {
            Ok(id) => wanted.push((id, step)),
            Err(_) => {
                eprintln!("squeue: error: Invalid job step id: {item}");
                return 1;
            }
        }
    }
    let (users, nodes) = match user_and_node_filters(a) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("squeue: error: {e}");
            return 1;
        }
    };
    let parts: Option<Vec<&str>> = a.partition.as_deref().map(|p| p.split(',').collect());
    let q = AcctQuery {
        job_ids: wanted.iter().map(|(id, _)| *id).collect(),
        states: vec![JobState::Running, JobState::Suspended],
        ..AcctQuery::default()
    };
    super::block_on(async move {
        let r = async {
            let mut c = Client::connect(None).await?;
            c.call(Body::QueryAcct(q)).await
        }
        .await;
        let jobs = match r {
            Ok(Body::Acct(j)) => j,
            Ok(other) => {
                eprintln!("squeue: error: unexpected reply {}", other.kind());
                return 1;
            }
            Err(e) => {
                eprintln!("slurm_get_job_steps error: {e}");
                return 1;
            }
        };
        let keep = |j: &AcctJob, s: &AcctStep| {
            (wanted.is_empty()
                || wanted.iter().any(|(id, step)| {
                    *id == j.job_id
                        && step
                            .as_deref()
                            .is_none_or(|want| step_matches(want, s.kind))
                }))
                && users.as_ref().is_none_or(|u| u.contains(&j.uid))
                && parts
                    .as_ref()
                    .is_none_or(|p| p.contains(&j.partition.as_str()))
                && nodes.as_ref().is_none_or(|want| {
                    hostlist::expand(&s.nodes)
                        .map(|have| have.iter().any(|h| want.contains(h)))
                        .unwrap_or(false)
                })
        };
        match render_steps(&jobs, keep, &fmt, chrono::Utc::now().timestamp()) {
            Ok(text) => {
                print!("{text}");
                0
            }
            Err(e) => {
                eprintln!("squeue: error: {e}");
                1
            }
        }
    })
}

/// Whether a typed step id (`0`, `batch`, `extern`) names `kind`.
fn step_matches(want: &str, kind: StepKind) -> bool {
    match kind {
        StepKind::Batch => want == "batch",
        StepKind::Extern => want == "extern",
        StepKind::Numbered(n) => want.parse() == Ok(n),
    }
}

/// Listed after an invalid `-t` state, as Slurm lists them.
const VALID_STATES: &str = "PENDING,RUNNING,SUSPENDED,COMPLETED,CANCELLED,FAILED,TIMEOUT,NODE_FAIL,PREEMPTED,BOOT_FAIL,DEADLINE,OUT_OF_MEMORY,COMPLETING,CONFIGURING,RESIZING,RESV_DEL_HOLD,REQUEUED,REQUEUE_FED,REQUEUE_HOLD,REVOKED,SIGNALING,SPECIAL_EXIT,STAGE_OUT,STOPPED";

const USAGE: &str = "Usage: squeue [-A account] [--clusters names] [-i seconds] [--job jobid] [-n name] [-o format] [-O fields] [-p partitions] [--qos qos] [--reservation reservation] [--sort fields] [--start] [--step step_id] [-t states] [-u user_name] [--usage] [-L licenses] [-w nodes] [--federation] [--local] [--sibling] [-ahjlrsv]";

/// `-j` items: `N` (a job, or every task of array N) or `N_T` (one task).
fn parse_ids(list: Option<&str>) -> Result<Vec<(u32, Option<u32>)>, String> {
    let Some(list) = list else {
        return Ok(Vec::new());
    };
    let bad = |s: &str| format!("Invalid job id: {s}");
    list.split(',')
        .filter(|s| !s.is_empty())
        .map(|s| match s.split_once('_') {
            Some((job, task)) => Ok((
                job.parse::<u32>().map_err(|_| bad(s))?,
                Some(task.parse::<u32>().map_err(|_| bad(s))?),
            )),
            None => Ok((s.parse::<u32>().map_err(|_| bad(s))?, None)),
        })
        .collect()
}

/// `-w`, expanded: the node names to keep (`None`: every node).
type NodeFilter = Option<Vec<String>>;

/// The uids (`-u`, `--me`, SQUEUE_USERS) and node names (`-w`) to keep.
fn user_and_node_filters(a: &Args) -> Result<(Option<Vec<u32>>, NodeFilter), String> {
    let env_users = std::env::var("SQUEUE_USERS").ok().filter(|v| !v.is_empty());
    let users = user_filter(a, env_users)?;
    let nodes = a
        .nodelist
        .as_deref()
        .map(hostlist::expand)
        .transpose()
        .map_err(|e| {
            format!(
                "Invalid node name {}: {e}",
                a.nodelist.as_deref().unwrap_or_default()
            )
        })?;
    Ok((users, nodes))
}

/// `-u a,b` (names or uids) and `--me` → the uids to keep.
fn user_filter(a: &Args, env_users: Option<String>) -> Result<Option<Vec<u32>>, String> {
    let mut uids = Vec::new();
    if a.me {
        uids.push(nix::unistd::getuid().as_raw());
    }
    if let Some(list) = a.user.clone().or(env_users) {
        for u in list.split(',').filter(|s| !s.is_empty()) {
            let uid = match u.parse::<u32>() {
                Ok(n) => n,
                Err(_) => nix::unistd::User::from_name(u)
                    .ok()
                    .flatten()
                    .map(|x| x.uid.as_raw())
                    .ok_or_else(|| format!("Invalid user: {u}"))?,
            };
            uids.push(uid);
        }
    }
    Ok((!uids.is_empty()).then_some(uids))
}
