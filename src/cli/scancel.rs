//! `scancel`: cancel jobs or send them a signal, with Slurm's command line and messages
//! (slurm.md §11, clients.md §8.5).
//!
//! Owns: getopt-style option syntax (`--k=v`, `--k v`, `-kv`, `-k v`, bundled flags, unique
//! long prefixes, options after the job ids, `--`), the job id grammar, signal names, the
//! job filters (`-u`, `--me`, `-t`, `-p`, `-n`, `-w`, `-A`, `-q`, `-R`, `--wckey`; combined
//! with AND) applied on the client to the controller's job list, `-i` confirmation, and the
//! lines and exit status Slurm's scancel gives.
//!
//! Does not: decide what cancelling or signalling does to a job, or check permissions;
//! the controller does both.
//!
//! Where canopy cannot be Slurm yet, the choice made here:
//! - Arrays: `N` (or `N_*`) names every task of array N, `N_T` one task and
//!   `N_[a-b,c]` several. Het jobs do not exist: `N+C` is an invalid job id.
//! - Steps: `N.S` cancels (SIGKILL, with slurmstepd's STEP note to srun) or signals one
//!   srun step; each is its own request. As in Slurm 22.05, a step of a pending job is
//!   passed over, a step of an unknown or finished job is always reported and exits 1,
//!   and a running job without that step gets Slurm's line naming the job alone, exit
//!   225. `N.batch` is not a step id here either (Slurm rejects it).
//! - Jobs have no reservation or wckey and run under QOS `normal`: `-R` and `--wckey`
//!   match only the empty value, `-q` matches `normal`. `-A` matches the job's account.
//! - Unknown and finished jobs: the error line is printed (unless `-Q`) and the exit
//!   status stays 0, which the client libraries calling scancel rely on.
//! - `-M/--clusters` accepts `all` and the local ClusterName; it always acts locally.
//! - `-i` takes end of input as "no" (Slurm would ask again forever).
//! - `-u` takes a comma list of names or uids; `-h` is `--help`.
//! - `--hurry`, `--cron`, `--ctld` and `--sibling` are accepted with a warning and ignored.

use std::collections::HashSet;
use std::io::{BufRead, Write};

use thiserror::Error;

use super::client::Client;
use super::getopt::{
    self, spec, Ambiguity,
    ArgKind::{Flag, Required},
    GetoptError, Word,
};
use crate::config::hostlist;
use crate::wire::messages::{Body, CancelRequest, JobQuery, StepCancel};
use crate::wire::types::{JobInfo, JobState};

/// The QOS every canopy job runs under.
const JOB_QOS: &str = "normal";
/// The controller's replies for a job that is not there to act on (see `Cancel` in the
/// controller); Slurm exits 0 for these and `-Q` hides them.
const INVALID_JOB_ID: &str = "Invalid job id specified";
const ALREADY_DONE: &str = "Job/step already completing or completed";
const SIGKILL: i32 = 9;

/// A job named on the command line: `N`, `N_T`, `N_[set]` or `N.S`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub job_id: u32,
    /// Array indices (`N_T`, `N_[a-b]`); `None` = the job, or every task
    /// of array N.
    pub tasks: Option<Vec<u32>>,
    pub step: Option<u32>,
}

impl Target {
    fn matches(&self, j: &JobInfo) -> bool {
        match &self.tasks {
            None => super::names_job(self.job_id, None, j.job_id, j.array),
            Some(ts) => ts
                .iter()
                .any(|&t| super::names_job(self.job_id, Some(t), j.job_id, j.array)),
        }
    }
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.job_id)?;
        match self.tasks.as_deref() {
            Some([t]) => write!(f, "_{t}")?,
            Some(ts) => write!(f, "_[{}]", crate::sched::array::compress(ts))?,
            None => {}
        }
        if let Some(s) = self.step {
            write!(f, ".{s}")?;
        }
        Ok(())
    }
}

/// Whose jobs: `--me` or `-u list` (the later option wins, as in Slurm).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Users {
    Me,
    /// The comma list as given: names or uids.
    Listed(String),
}

/// The job filters as given; [`Selector::resolve`] looks up what they name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filters {
    pub users: Option<Users>,
    pub state: Option<JobState>,
    pub partition: Option<String>,
    pub name: Option<String>,
    /// A hostlist, or a file of names when it contains `/` (as Slurm reads `-w`).
    pub nodelist: Option<String>,
    /// Lower-cased, as Slurm stores accounts and QOS names.
    pub account: Option<String>,
    pub qos: Option<String>,
    pub reservation: Option<String>,
    pub wckey: Option<String>,
}

impl Filters {
    fn any(&self) -> bool {
        *self != Filters::default()
    }
}

/// A parsed `scancel` command line.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScancelArgs {
    pub targets: Vec<Target>,
    pub filters: Filters,
    /// `-s`; `None` cancels.
    pub signal: Option<i32>,
    pub batch: bool,
    pub full: bool,
    pub interactive: bool,
    /// Slurm's verbosity: each `-v` adds one, `-Q` sets -1.
    pub verbosity: i8,
    /// `-M` as given.
    pub clusters: Option<String>,
    /// Long names of accepted-but-ignored options, for the warnings.
    pub ignored: Vec<&'static str>,
}

impl ScancelArgs {
    pub fn quiet(&self) -> bool {
        self.verbosity < 0
    }

    /// Plain ids to cancel: sent straight to the controller, as Slurm does, so its own
    /// answers (e.g. "already completing or completed") are what the user sees.
    fn direct(&self) -> bool {
        !self.filters.any()
            && !self.interactive
            && self.signal.is_none()
            && self
                .targets
                .iter()
                .all(|t| t.step.is_none() && t.tasks.is_none())
    }

    /// `-f` signals the batch shell and the steps, so it overrides `-b`.
    fn batch_only(&self) -> bool {
        self.batch && !self.full
    }
}

/// What the command line asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    Cancel(Box<ScancelArgs>),
    Help,
    Usage,
    Version,
}

/// Why the command line (or what it names) is unusable. `Display` is the complete text
/// for stderr, in Slurm's words where Slurm has them; the exit status is 1.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ScancelError {
    /// A getopt syntax problem (unknown, ambiguous or incomplete option).
    #[error("{}\n{TRY_HELP}", .0.message("scancel"))]
    Syntax(#[from] GetoptError),
    #[error("scancel: error: Invalid job id {id}")]
    InvalidJobId { id: String },
    /// Slurm prints this one, and the state error, without the `scancel:` prefix.
    #[error("Unknown job signal: {signal}")]
    UnknownSignal { signal: String },
    #[error(
        "Invalid job state specified: {state}\n\
         Valid job states are PENDING, RUNNING, and SUSPENDED"
    )]
    InvalidState { state: String },
    #[error("scancel: error: Invalid user name: {name}")]
    InvalidUser { name: String },
    #[error("scancel: error: Invalid node list \"{list}\": {reason}")]
    InvalidNodeList { list: String, reason: String },
    #[error("scancel: error: Unable to read node list file {path}: {reason}")]
    NodeListFile { path: String, reason: String },
    #[error("scancel: error: No job identification provided")]
    NoJobIdentification,
    #[error(
        "scancel: error: '{name}' can't be reached now, or it is an invalid entry for \
         --cluster.  Use 'sacctmgr list clusters' to see available clusters."
    )]
    UnknownCluster { name: String },
}

const TRY_HELP: &str = "Try \"scancel --help\" for more information";

const USAGE_TEXT: &str = "\
Usage: scancel [-A account] [-b] [-f] [-i] [-M clusters] [-n job_name] [--me]
               [-p partition] [-Q] [-q qos] [-R reservation] [-s signal | integer]
               [-t PENDING | RUNNING | SUSPENDED] [-u user_list] [-V] [-v]
               [-w hosts] [--wckey=wckey] [job_id[.step_id]]...
";

const HELP_TEXT: &str = "\
Usage: scancel [OPTIONS] [job_id[.step_id]]...
Cancel jobs, or send them a signal. Filters combine: a job must pass all of them.

  -A, --account=account         only jobs charged to this account
  -b, --batch                   signal only the batch shell
  -f, --full                    signal the batch shell and every step
  -i, --interactive             ask before acting on each job
  -M, --clusters=names          clusters to act on (the local one, or all)
      --me                      only your own jobs
  -n, --name, --jobname=name    only jobs with this name
  -p, --partition=partition     only jobs in this partition
  -Q, --quiet                   no errors for finished or unknown jobs
  -q, --qos=qos                 only jobs with this quality of service
  -R, --reservation=name        only jobs in this reservation
  -s, --signal=name | integer   send this signal instead of cancelling
  -t, --state=state             only jobs in this state: PENDING, RUNNING, SUSPENDED
  -u, --user=user[,user...]     only jobs of these users (names or uids)
  -V, --version                 print the version and exit
  -v, --verbose                 say what is done to each job
  -w, --nodelist=hosts          only jobs running on one of these nodes
      --wckey=wckey             only jobs with this workload characterization key

  -h, --help                    this text
      --usage                   a short usage line
";

/// What an option does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Opt {
    Account,
    Batch,
    Clusters,
    Full,
    Help,
    Interactive,
    Me,
    Name,
    NodeList,
    Partition,
    Qos,
    Quiet,
    Reservation,
    Signal,
    State,
    Usage,
    User,
    Verbose,
    Version,
    Wckey,
    /// A Slurm option with no effect in canopy yet: warned about and ignored.
    Ignored,
}

type OptSpec = getopt::OptSpec<Opt>;

/// Every option of Slurm's scancel (its getopt table), plus `-h`.
static OPTIONS: &[OptSpec] = &[
    spec("account", Some('A'), Required, Opt::Account),
    spec("batch", Some('b'), Flag, Opt::Batch),
    spec("cluster", Some('M'), Required, Opt::Clusters),
    spec("clusters", Some('M'), Required, Opt::Clusters),
    spec("full", Some('f'), Flag, Opt::Full),
    spec("help", Some('h'), Flag, Opt::Help),
    spec("interactive", Some('i'), Flag, Opt::Interactive),
    spec("jobname", Some('n'), Required, Opt::Name),
    spec("me", None, Flag, Opt::Me),
    spec("name", Some('n'), Required, Opt::Name),
    spec("nodelist", Some('w'), Required, Opt::NodeList),
    spec("partition", Some('p'), Required, Opt::Partition),
    spec("qos", Some('q'), Required, Opt::Qos),
    spec("quiet", Some('Q'), Flag, Opt::Quiet),
    spec("reservation", Some('R'), Required, Opt::Reservation),
    spec("signal", Some('s'), Required, Opt::Signal),
    spec("state", Some('t'), Required, Opt::State),
    spec("usage", None, Flag, Opt::Usage),
    spec("user", Some('u'), Required, Opt::User),
    spec("verbose", Some('v'), Flag, Opt::Verbose),
    spec("version", Some('V'), Flag, Opt::Version),
    spec("wckey", None, Required, Opt::Wckey),
    // No burst buffers, scrontab or federation in canopy, and every request goes to the
    // controller anyway.
    spec("hurry", Some('H'), Flag, Opt::Ignored),
    spec("cron", Some('c'), Flag, Opt::Ignored),
    spec("ctld", None, Flag, Opt::Ignored),
    spec("sibling", None, Required, Opt::Ignored),
];

/// Parses `scancel`'s arguments (without argv[0]). Like GNU getopt, options may come
/// anywhere and each takes effect as it is read, so `--help` or the first bad option in
/// argv order decides; the job ids are checked after all options.
pub fn parse(args: &[String]) -> Result<Command, ScancelError> {
    let mut a = ScancelArgs::default();
    let mut words = Vec::new();
    let mut i = 0;
    while let Some(arg) = args.get(i) {
        if arg == "--" {
            words.extend(args.iter().skip(i + 1).cloned());
            break;
        }
        let (given, problem, next) =
            match getopt::read_word(OPTIONS, args, i, Ambiguity::SameAction) {
                Word::Options {
                    given,
                    problem,
                    next,
                } => (given, problem.map(ScancelError::from), next),
                Word::EndOfOptions | Word::Positional => {
                    words.push(arg.clone());
                    (Vec::new(), None, i + 1)
                }
            };
        for g in given {
            if let Some(done) = apply(&mut a, g.spec, g.value)? {
                return Ok(done);
            }
        }
        if let Some(problem) = problem {
            return Err(problem);
        }
        i = next;
    }
    for word in &words {
        parse_targets(word, &mut a.targets)?;
    }
    if a.targets.is_empty() && !a.filters.any() {
        return Err(ScancelError::NoJobIdentification);
    }
    Ok(Command::Cancel(Box::new(a)))
}

/// Applies one option; `Some` when it ends parsing (help, usage, version).
fn apply(
    a: &mut ScancelArgs,
    spec: &'static OptSpec,
    value: Option<String>,
) -> Result<Option<Command>, ScancelError> {
    let v = value.unwrap_or_default();
    let f = &mut a.filters;
    match spec.action {
        Opt::Account => f.account = Some(v.to_lowercase()),
        Opt::Batch => a.batch = true,
        Opt::Clusters => a.clusters = Some(v),
        Opt::Full => a.full = true,
        Opt::Help => return Ok(Some(Command::Help)),
        Opt::Interactive => a.interactive = true,
        Opt::Me => f.users = Some(Users::Me),
        Opt::Name => f.name = Some(v),
        Opt::NodeList => f.nodelist = Some(v),
        Opt::Partition => f.partition = Some(v),
        Opt::Qos => f.qos = Some(v.to_lowercase()),
        Opt::Quiet => a.verbosity = -1,
        Opt::Reservation => f.reservation = Some(v),
        Opt::Signal => match parse_signal(&v) {
            Some(n) => a.signal = Some(n),
            None => return Err(ScancelError::UnknownSignal { signal: v }),
        },
        Opt::State => match JobState::parse(&v) {
            Some(s) => f.state = Some(s),
            None => return Err(ScancelError::InvalidState { state: v }),
        },
        Opt::Usage => return Ok(Some(Command::Usage)),
        Opt::User => f.users = Some(Users::Listed(v)),
        Opt::Verbose => a.verbosity = a.verbosity.saturating_add(1),
        Opt::Version => return Ok(Some(Command::Version)),
        Opt::Wckey => f.wckey = Some(v),
        Opt::Ignored => {
            if !a.ignored.contains(&spec.long) {
                a.ignored.push(spec.long);
            }
        }
    }
    Ok(None)
}

/// One job id word: `N`, `N.S`, or a comma list of them. The error names the text from
/// the first bad element on, as Slurm's does.
fn parse_targets(word: &str, into: &mut Vec<Target>) -> Result<(), ScancelError> {
    let mut rest = word;
    loop {
        // A comma inside `N_[1,3]` belongs to the index set.
        let cut = comma_outside_brackets(rest);
        let (head, tail) = match cut {
            Some(at) => (&rest[..at], Some(&rest[at + 1..])),
            None => (rest, None),
        };
        let target = parse_target(head).ok_or_else(|| ScancelError::InvalidJobId {
            id: rest.to_string(),
        })?;
        into.push(target);
        match tail {
            Some(tail) => rest = tail,
            None => return Ok(()),
        }
    }
}

fn comma_outside_brackets(text: &str) -> Option<usize> {
    let mut depth = 0i32;
    for (i, c) in text.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            ',' if depth == 0 => return Some(i),
            _ => {}
        }
    }
    None
}

fn parse_target(text: &str) -> Option<Target> {
    let (job, step) = match text.split_once('.') {
        Some((job, step)) => (job, Some(digits(step)?)),
        None => (text, None),
    };
    let (job, tasks) = match job.split_once('_') {
        Some((job, "*")) => (job, None),
        Some((job, set)) => {
            let inner = match set.strip_prefix('[') {
                Some(rest) => rest.strip_suffix(']')?,
                None => {
                    digits(set)?;
                    set
                }
            };
            let spec = crate::sched::array::parse(inner).ok()?;
            if spec.throttle.is_some() {
                return None;
            }
            (job, Some(spec.indices))
        }
        None => (job, None),
    };
    let job_id = digits(job).filter(|&n| n > 0)?;
    Some(Target {
        job_id,
        tasks,
        step,
    })
}

/// A plain decimal number (no sign, no spaces: `N_T`, `N+C` and the like fail here).
fn digits(text: &str) -> Option<u32> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// A signal by number (1-64) or name, any case, with or without `SIG`: the platform's
/// names (through nix), the aliases `IOT`, `CLD`, `POLL`, and `RTMIN[+n]`/`RTMAX[-n]`.
pub fn parse_signal(s: &str) -> Option<i32> {
    if let Ok(n) = s.parse::<i32>() {
        return (1..=SIGRTMAX).contains(&n).then_some(n);
    }
    let up = s.to_ascii_uppercase();
    let name = up.strip_prefix("SIG").unwrap_or(&up);
    let name = match name {
        "IOT" => "ABRT",
        "CLD" => "CHLD",
        "POLL" => "IO",
        other => other,
    };
    if let Some(n) = realtime_signal(name) {
        return Some(n);
    }
    format!("SIG{name}")
        .parse::<nix::sys::signal::Signal>()
        .ok()
        .map(|sig| sig as i32)
}

/// glibc keeps the first two real-time signals for itself, so `SIGRTMIN` is 34 to users.
const SIGRTMIN: i32 = 34;
const SIGRTMAX: i32 = 64;

/// `RTMIN`, `RTMIN+n`, `RTMAX`, `RTMAX-n` within the real-time range.
fn realtime_signal(name: &str) -> Option<i32> {
    let n = if let Some(rest) = name.strip_prefix("RTMIN") {
        SIGRTMIN + offset(rest, '+')?
    } else if let Some(rest) = name.strip_prefix("RTMAX") {
        SIGRTMAX - offset(rest, '-')?
    } else {
        return None;
    };
    (SIGRTMIN..=SIGRTMAX).contains(&n).then_some(n)
}

fn offset(rest: &str, sign: char) -> Option<i32> {
    if rest.is_empty() {
        return Some(0);
    }
    rest.strip_prefix(sign)
        .and_then(digits)
        .and_then(|n| i32::try_from(n).ok())
}

/// The filters with users and nodes looked up: decides which jobs they let through.
#[derive(Debug, Clone, PartialEq)]
pub struct Selector {
    filters: Filters,
    uids: Option<Vec<u32>>,
    nodes: Option<Vec<String>>,
}

impl Selector {
    /// Looks up `-u` names (`uid_of`; a number is taken as a uid), `--me` (`me`) and the
    /// `-w` hostlist (reading it with `read_file` when it is a path).
    pub fn resolve(
        filters: &Filters,
        me: u32,
        uid_of: impl Fn(&str) -> Option<u32>,
        read_file: impl Fn(&str) -> std::io::Result<String>,
    ) -> Result<Selector, ScancelError> {
        let uids = match &filters.users {
            None => None,
            Some(Users::Me) => Some(vec![me]),
            Some(Users::Listed(list)) => Some(resolve_users(list, uid_of)?),
        };
        let nodes = match &filters.nodelist {
            None => None,
            Some(list) => Some(expand_nodes(list, read_file)?),
        };
        Ok(Selector {
            filters: filters.clone(),
            uids,
            nodes,
        })
    }

    /// Whether every filter accepts `job` (whatever its state; see [`select`]).
    pub fn matches(&self, job: &JobInfo) -> bool {
        let f = &self.filters;
        let is = |want: &Option<String>, have: &str| want.as_deref().is_none_or(|w| w == have);
        self.uids.as_ref().is_none_or(|u| u.contains(&job.uid))
            && f.state.is_none_or(|s| s == job.state)
            && is(&f.partition, &job.partition)
            && is(&f.name, &job.name)
            && is(&f.account, &job.account)
            && is(&f.qos, JOB_QOS)
            && is(&f.reservation, "")
            && is(&f.wckey, "")
            && self
                .nodes
                .as_ref()
                .is_none_or(|want| runs_on_any(job, want))
    }
}

fn resolve_users(
    list: &str,
    uid_of: impl Fn(&str) -> Option<u32>,
) -> Result<Vec<u32>, ScancelError> {
    let names: Vec<&str> = list.split(',').filter(|n| !n.is_empty()).collect();
    if names.is_empty() {
        return Err(ScancelError::InvalidUser {
            name: list.to_string(),
        });
    }
    names
        .into_iter()
        .map(|n| {
            uid_of(n)
                .or_else(|| n.parse().ok())
                .ok_or_else(|| ScancelError::InvalidUser {
                    name: n.to_string(),
                })
        })
        .collect()
}

fn expand_nodes(
    list: &str,
    read_file: impl Fn(&str) -> std::io::Result<String>,
) -> Result<Vec<String>, ScancelError> {
    let text = if list.contains('/') {
        read_file(list).map_err(|e| ScancelError::NodeListFile {
            path: list.to_string(),
            reason: e.to_string(),
        })?
    } else {
        list.to_string()
    };
    hostlist::expand(&text).map_err(|e| ScancelError::InvalidNodeList {
        list: list.to_string(),
        reason: e.to_string(),
    })
}

fn runs_on_any(job: &JobInfo, nodes: &[String]) -> bool {
    hostlist::expand(&job.nodes).is_ok_and(|have| have.iter().any(|h| nodes.contains(h)))
}

/// Only these states can be cancelled; Slurm treats any other job as gone.
fn is_active(state: JobState) -> bool {
    matches!(
        state,
        JobState::Pending | JobState::Running | JobState::Suspended
    )
}

/// Which jobs of the controller's list to act on.
#[derive(Debug, Default, PartialEq)]
pub struct Selection {
    /// Each once, pending jobs first (so none of them starts while the others are handled,
    /// as Slurm orders it).
    pub jobs: Vec<JobInfo>,
    /// Named targets with no active job: error lines.
    pub missing: Vec<Target>,
    /// Steps of started jobs (`N.S`), as (job id, step id), each once.
    pub steps: Vec<(u32, u32)>,
}

/// The active jobs named by `targets` (all active jobs when there are none) that pass
/// `selector`.
pub fn select(targets: &[Target], selector: &Selector, jobs: &[JobInfo]) -> Selection {
    let active = || jobs.iter().filter(|j| is_active(j.state));
    let mut missing = Vec::new();
    let mut steps = Vec::new();
    let mut chosen: Vec<&JobInfo> = if targets.is_empty() {
        active().collect()
    } else {
        let mut named = Vec::new();
        for t in targets {
            let hits: Vec<&JobInfo> = active().filter(|j| t.matches(j)).collect();
            match (hits.is_empty(), t.step) {
                (true, _) => missing.push(t.clone()),
                // Slurm passes over step ids of pending jobs without a word.
                (false, Some(step)) => steps.extend(
                    hits.iter()
                        .filter(|j| j.state != JobState::Pending && selector.matches(j))
                        .map(|j| (j.job_id, step)),
                ),
                (false, None) => named.extend(hits),
            }
        }
        named
    };
    let mut seen = HashSet::new();
    chosen.retain(|j| selector.matches(j) && seen.insert(j.job_id));
    chosen.sort_by_key(|j| j.state != JobState::Pending);
    let mut seen = HashSet::new();
    steps.retain(|s| seen.insert(*s));
    Selection {
        jobs: chosen.into_iter().cloned().collect(),
        missing,
        steps,
    }
}

/// The requests for the chosen jobs: one, except that SIGKILL to a pending job cancels it
/// (as in Slurm; the controller only signals started jobs), so those go first as a cancel.
pub fn requests(jobs: &[JobInfo], signal: Option<i32>, batch_only: bool) -> Vec<CancelRequest> {
    let (cancel, rest): (Vec<&JobInfo>, Vec<&JobInfo>) = jobs
        .iter()
        .partition(|j| signal == Some(SIGKILL) && j.state == JobState::Pending);
    let request = |group: Vec<&JobInfo>, signal| CancelRequest {
        job_ids: group.iter().map(|j| j.job_id).collect(),
        signal,
        batch_only,
        exact: true,
    };
    [request(cancel, None), request(rest, signal)]
        .into_iter()
        .filter(|r| !r.job_ids.is_empty())
        .collect()
}

/// Asks about one job on `out` and reads the answer from `input`: `y` or `n` (either
/// case) decides, anything else asks again, end of input means no.
fn confirm(job: &JobInfo, input: &mut impl BufRead, out: &mut impl Write) -> bool {
    loop {
        // A prompt that cannot be shown still gets its answer read.
        let _ = write!(
            out,
            "Cancel job_id={} name={} partition={} [y/n]? ",
            job.job_id, job.name, job.partition
        );
        let _ = out.flush();
        let mut line = String::new();
        if matches!(input.read_line(&mut line), Ok(0) | Err(_)) {
            let _ = writeln!(out);
            return false;
        }
        match line.chars().next() {
            Some('y' | 'Y') => return true,
            Some('n' | 'N') => return false,
            _ => {}
        }
    }
}

/// `-v`: what is about to happen to one job, as Slurm words it.
fn action_line(job_id: impl std::fmt::Display, a: &ScancelArgs) -> String {
    let kind = match (a.full, a.batch) {
        (true, _) => "full ",
        (false, true) => "batch ",
        (false, false) => "",
    };
    match a.signal {
        None => format!("scancel: Terminating {kind}job {job_id}"),
        Some(sig) => format!("scancel: Signal {sig} to {kind}job {job_id}"),
    }
}

fn missing_line(t: &Target) -> String {
    match t.step {
        None => format!("scancel: error: Kill job error on job id {t}: {INVALID_JOB_ID}"),
        Some(_) => format!("scancel: error: Kill job error on job step id {t}: {INVALID_JOB_ID}"),
    }
}

/// `-v` when the filters select nothing: the filters, as Slurm lists them.
fn no_match_line(f: &Filters, me: u32) -> String {
    let users = f.users.as_ref().map(|u| match u {
        Users::Me => me.to_string(),
        Users::Listed(list) => list.clone(),
    });
    let parts = [
        ("account", f.account.clone()),
        ("job_name", f.name.clone()),
        ("nodelist", f.nodelist.clone()),
        ("partition", f.partition.clone()),
        ("qos", f.qos.clone()),
        ("reservation", f.reservation.clone()),
        ("state", f.state.map(|s| s.name().to_string())),
        ("user_name", users),
        ("wckey", f.wckey.clone()),
    ];
    let listed: Vec<String> = parts
        .into_iter()
        .filter_map(|(key, value)| value.map(|v| format!("{key}={v}")))
        .collect();
    format!(
        "scancel: error: No active jobs match ALL job filters, including: {}",
        listed.join(" ")
    )
}

/// Error lines for the controller's per-job answers, and the exit status: 0 unless a job
/// was refused for a reason other than being unknown or finished. Like Slurm 22.05,
/// an unknown or finished job is only reported when `verbose`.
fn outcome(results: &[(u32, Option<String>)], verbose: bool) -> (Vec<String>, i32) {
    let mut lines = Vec::new();
    let mut code = 0;
    for (id, err) in results {
        let Some(msg) = err else { continue };
        let gone = msg == INVALID_JOB_ID || msg == ALREADY_DONE;
        if !gone {
            code = 1;
        }
        if verbose || !gone {
            lines.push(format!(
                "scancel: error: Kill job error on job id {id}: {msg}"
            ));
        }
    }
    (lines, code)
}

/// `-M`: every name must be `all` or this cluster.
fn check_clusters(list: &str, local: &str) -> Result<(), ScancelError> {
    match list
        .split(',')
        .find(|c| !c.eq_ignore_ascii_case("all") && !c.eq_ignore_ascii_case(local))
    {
        Some(bad) => Err(ScancelError::UnknownCluster {
            name: bad.to_string(),
        }),
        None => Ok(()),
    }
}

fn uid_of_name(name: &str) -> Option<u32> {
    nix::unistd::User::from_name(name)
        .ok()
        .flatten()
        .map(|u| u.uid.as_raw())
}

pub fn run(args: &[String]) -> i32 {
    let a = match parse(args) {
        Ok(Command::Cancel(a)) => *a,
        Ok(Command::Help) => {
            print!("{HELP_TEXT}");
            return 0;
        }
        Ok(Command::Usage) => {
            print!("{USAGE_TEXT}");
            return 0;
        }
        Ok(Command::Version) => {
            println!("canopy {}", env!("CARGO_PKG_VERSION"));
            return 0;
        }
        Err(e) => {
            eprintln!("{e}");
            return 1;
        }
    };
    for name in &a.ignored {
        eprintln!("{}", super::unsupported_option("scancel", name));
    }
    let me = nix::unistd::getuid().as_raw();
    let selector = match Selector::resolve(&a.filters, me, uid_of_name, |path| {
        std::fs::read_to_string(path)
    }) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{e}");
            return 1;
        }
    };
    super::block_on(execute(a, selector, me))
}

async fn execute(a: ScancelArgs, selector: Selector, me: u32) -> i32 {
    let mut c = match Client::connect(None).await {
        Ok(c) => c,
        Err(e) => return super::report("scancel", &e),
    };
    if let Some(list) = &a.clusters {
        if let Err(e) = check_clusters(list, &c.conf.cluster_name) {
            eprintln!("{e}");
            return 1;
        }
    }
    let mut code = 0;
    let requests = if a.direct() {
        vec![CancelRequest {
            job_ids: a.targets.iter().map(|t| t.job_id).collect(),
            signal: None,
            batch_only: a.batch_only(),
            exact: false,
        }]
    } else {
        let query = JobQuery {
            job_ids: a.targets.iter().map(|t| t.job_id).collect(),
            include_finished: true,
            brief: false,
        };
        let jobs = match c.call(Body::QueryJobs(query)).await {
            Ok(Body::Jobs(jobs)) => jobs.into_rows(),
            Ok(other) => return unexpected(&other),
            Err(e) => return super::report("scancel", &e),
        };
        let picked = select(&a.targets, &selector, &jobs);
        // Slurm 22.05 says nothing about a job that is not there unless
        // asked to be verbose (and exits 0 either way); a step of one is
        // always reported, and fails the command.
        for t in &picked.missing {
            if a.verbosity > 0 {
                eprintln!("{}", action_line(t, &a));
            }
            if t.step.is_some() {
                if !a.quiet() {
                    eprintln!("{}", missing_line(t));
                }
                code = 1;
            } else if a.verbosity > 0 {
                eprintln!("{}", missing_line(t));
            }
        }
        for &(job_id, step_id) in &picked.steps {
            code = code.max(cancel_step(&mut c, &a, job_id, step_id).await);
        }
        if picked.jobs.is_empty() && a.targets.is_empty() && a.verbosity > 0 {
            eprintln!("{}", no_match_line(&a.filters, me));
        }
        let jobs = if a.interactive {
            let (mut input, mut out) = (std::io::stdin().lock(), std::io::stdout());
            picked
                .jobs
                .into_iter()
                .filter(|j| confirm(j, &mut input, &mut out))
                .collect()
        } else {
            picked.jobs
        };
        requests(&jobs, a.signal, a.batch_only())
    };
    for req in requests {
        if a.verbosity > 0 {
            for id in &req.job_ids {
                eprintln!("{}", action_line(*id, &a));
            }
        }
        match c.call(Body::CancelJobs(req)).await {
            Ok(Body::CancelReply(reply)) => {
                let (lines, rc) = outcome(&reply.results, a.verbosity > 0);
                for line in lines {
                    eprintln!("{line}");
                }
                code = code.max(rc);
            }
            Ok(other) => return unexpected(&other),
            Err(e) => return super::report("scancel", &e),
        }
    }
    code
}

/// Cancel or signal step `job_id.step_id`; returns the exit status it calls for.
async fn cancel_step(c: &mut Client, a: &ScancelArgs, job_id: u32, step_id: u32) -> i32 {
    if a.verbosity > 0 {
        eprintln!("{}", step_action_line(job_id, step_id, a.signal));
    }
    let req = StepCancel {
        job_id,
        step_id,
        signal: a.signal,
        terminate: false,
    };
    let msg = match c.call(Body::CancelStep(req)).await {
        Ok(Body::CancelReply(r)) => r.results.into_iter().find_map(|(_, e)| e),
        Ok(other) => return unexpected(&other),
        Err(e) => return super::report("scancel", &e),
    };
    let Some(msg) = msg else { return 0 };
    let (line, code) = step_error(job_id, step_id, &msg);
    if !a.quiet() {
        eprintln!("{line}");
    }
    code
}

/// `-v`: Slurm's line before acting on a step.
fn step_action_line(job_id: u32, step_id: u32, signal: Option<i32>) -> String {
    match signal {
        None => format!("scancel: Terminating step {job_id}.{step_id}"),
        Some(sig) => format!("scancel: Signal {sig} to step {job_id}.{step_id}"),
    }
}

/// The error line and exit status for a refused step cancel. Slurm 22.05
/// names only the job when the step is not there, and exits with its error
/// number's low byte (ESLURM_INVALID_JOB_ID, 2017: 225).
fn step_error(job_id: u32, step_id: u32, msg: &str) -> (String, i32) {
    if msg == INVALID_JOB_ID {
        (
            format!("scancel: error: Kill job error on job step id {job_id}: {msg}"),
            2017 & 0xff,
        )
    } else {
        (
            format!("scancel: error: Kill job error on job step id {job_id}.{step_id}: {msg}"),
            1,
        )
    }
}

fn unexpected(body: &Body) -> i32 {
    eprintln!("scancel: error: unexpected reply {}", body.kind());
    1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(words: &[&str]) -> Vec<String> {
        words.iter().map(|s| s.to_string()).collect()
    }

    fn cancel(words: &[&str]) -> ScancelArgs {
        match parse(&args(words)) {
            Ok(Command::Cancel(a)) => *a,
            other => panic!("{words:?}: {other:?}"),
        }
    }

    fn error(words: &[&str]) -> ScancelError {
        parse(&args(words)).unwrap_err()
    }

    fn target(job_id: u32) -> Target {
        Target {
            job_id,
            tasks: None,
            step: None,
        }
    }

    fn job(job_id: u32, state: JobState, uid: u32, name: &str, partition: &str) -> JobInfo {
        JobInfo {
            job_id,
            name: name.into(),
            user: format!("u{uid}"),
            uid,
            gid: uid,
            partition: partition.into(),
            state,
            reason: "None".into(),
            priority: 1,
            submit_time: 0,
            eligible_time: None,
            start_time: None,
            end_time: None,
            time_limit_min: None,
            nodes: if state == JobState::Pending {
                String::new()
            } else {
                "n[1-2]".into()
            },
            num_nodes: 1,
            num_cpus: 1,
            num_tasks: 1,
            cpus_per_task: 1,
            mem_per_node_mb: 0,
            exit_code: (0, 0),
            workdir: "/".into(),
            stdout: String::new(),
            stderr: String::new(),
            stdin: String::new(),
            command: String::new(),
            submit_line: String::new(),
            batch_host: None,
            restarts: 0,
            req_nodes: 1,
            array: None,
            array_pending: None,
            dependency: String::new(),
            ..JobInfo::default()
        }
    }

    fn no_file(_: &str) -> std::io::Result<String> {
        Err(std::io::Error::from(std::io::ErrorKind::NotFound))
    }

    fn selector(words: &[&str]) -> Selector {
        let lookup = |n: &str| (n == "alice").then_some(1000);
        Selector::resolve(&cancel(words).filters, 500, lookup, no_file).unwrap()
    }

    fn ids(s: &Selection) -> Vec<u32> {
        s.jobs.iter().map(|j| j.job_id).collect()
    }

    #[test]
    fn option_syntax_forms_all_reach_the_same_value() {
        for form in [
            &["--signal=USR1", "5"][..],
            &["--signal", "USR1", "5"],
            &["-sUSR1", "5"],
            &["-s", "USR1", "5"],
            &["5", "--signal", "SIGUSR1"],
            &["5", "-s", "usr1"],
            &["--sig=10", "5"],
        ] {
            let a = cancel(form);
            assert_eq!(a.signal, Some(10), "{form:?}");
            assert_eq!(a.targets, vec![target(5)], "{form:?}");
        }
    }

    #[test]
    fn bundled_flags_and_counted_verbosity() {
        let a = cancel(&["-bfiv", "-vv", "7"]);
        assert!(a.batch && a.full && a.interactive);
        assert_eq!(a.verbosity, 3);
        assert!(!a.batch_only(), "-f overrides -b");
        let a = cancel(&["-vs", "KILL", "7"]);
        assert_eq!((a.verbosity, a.signal), (1, Some(9)));
        // -Q and -v both set Slurm's one verbosity level, the later one winning.
        assert!(cancel(&["-v", "-Q", "7"]).quiet());
        assert_eq!(cancel(&["-Q", "-v", "7"]).verbosity, 0);
        assert!(cancel(&["-b", "7"]).batch_only());
    }

    #[test]
    fn double_dash_ends_options() {
        assert_eq!(cancel(&["--", "8"]).targets, vec![target(8)]);
        assert_eq!(
            error(&["--", "-s"]),
            ScancelError::InvalidJobId { id: "-s".into() }
        );
    }

    #[test]
    fn every_filter_option_is_recorded() {
        let a = cancel(&[
            "-u",
            "alice,7",
            "-t",
            "pd",
            "-p",
            "debug",
            "-n",
            "x",
            "-w",
            "n[1-2]",
            "-A",
            "ACC",
            "-q",
            "Normal",
            "-R",
            "r1",
            "--wckey=w",
        ]);
        let f = a.filters;
        assert_eq!(f.users, Some(Users::Listed("alice,7".into())));
        assert_eq!(f.state, Some(JobState::Pending));
        assert_eq!(f.partition.as_deref(), Some("debug"));
        assert_eq!(f.name.as_deref(), Some("x"));
        assert_eq!(f.nodelist.as_deref(), Some("n[1-2]"));
        assert_eq!(f.account.as_deref(), Some("acc"));
        assert_eq!(f.qos.as_deref(), Some("normal"));
        assert_eq!(f.reservation.as_deref(), Some("r1"));
        assert_eq!(f.wckey.as_deref(), Some("w"));
        assert!(a.targets.is_empty());
        // Long spellings, and the later of --me / -u wins.
        let f = cancel(&["--jobname=j", "--user=bob", "--me", "--state=RUNNING"]).filters;
        assert_eq!(f.name.as_deref(), Some("j"));
        assert_eq!(f.users, Some(Users::Me));
        assert_eq!(f.state, Some(JobState::Running));
        assert_eq!(
            cancel(&["--me", "-u", "bob"]).filters.users,
            Some(Users::Listed("bob".into()))
        );
        assert_eq!(cancel(&["--name", "y"]).filters.name.as_deref(), Some("y"));
        assert_eq!(
            cancel(&["--state", "S"]).filters.state,
            Some(JobState::Suspended)
        );
    }

    #[test]
    fn clusters_and_ignored_options() {
        let a = cancel(&[
            "--clusters=all",
            "-H",
            "--cron",
            "--hurry",
            "--sibling",
            "c2",
            "1",
        ]);
        assert_eq!(a.clusters.as_deref(), Some("all"));
        assert_eq!(a.ignored, vec!["hurry", "cron", "sibling"]);
        assert_eq!(cancel(&["-M", "x", "1"]).clusters.as_deref(), Some("x"));
        assert_eq!(cancel(&["--clu", "y", "1"]).clusters.as_deref(), Some("y"));
        assert_eq!(cancel(&["--ctld", "1"]).ignored, vec!["ctld"]);
    }

    #[test]
    fn help_usage_version_stop_parsing_in_argv_order() {
        assert_eq!(parse(&args(&["--help"])), Ok(Command::Help));
        assert_eq!(parse(&args(&["-h", "--bogus"])), Ok(Command::Help));
        assert_eq!(parse(&args(&["abc", "--usage"])), Ok(Command::Usage));
        assert_eq!(parse(&args(&["-V"])), Ok(Command::Version));
        assert_eq!(parse(&args(&["-vV"])), Ok(Command::Version));
        assert_eq!(
            error(&["--bogus", "--help"]),
            ScancelError::Syntax(GetoptError::Unrecognized {
                option: "bogus".into()
            })
        );
    }

    #[test]
    fn option_errors_use_getopt_wording() {
        let e = error(&["--bogus", "1"]);
        assert_eq!(
            e.to_string(),
            "scancel: unrecognized option '--bogus'\nTry \"scancel --help\" for more information"
        );
        assert_eq!(
            error(&["-z", "1"]),
            ScancelError::Syntax(GetoptError::InvalidShort { option: 'z' })
        );
        assert_eq!(
            error(&["-vz", "1"]),
            ScancelError::Syntax(GetoptError::InvalidShort { option: 'z' })
        );
        assert_eq!(
            error(&["1", "--signal"]),
            ScancelError::Syntax(GetoptError::MissingLongArgument { option: "signal" })
        );
        assert_eq!(
            error(&["1", "-s"]),
            ScancelError::Syntax(GetoptError::MissingShortArgument { option: 's' })
        );
        assert_eq!(
            error(&["--batch=yes", "1"]),
            ScancelError::Syntax(GetoptError::UnexpectedArgument { option: "batch" })
        );
        let e = error(&["--s=9", "1"]);
        assert_eq!(
            e,
            ScancelError::Syntax(GetoptError::Ambiguous {
                option: "s".into(),
                candidates: "'--signal' '--state' '--sibling'".into()
            })
        );
        assert!(e.to_string().contains("is ambiguous"));
        assert_eq!(
            error(&["--=x"]),
            ScancelError::Syntax(GetoptError::Unrecognized { option: "".into() })
        );
    }

    #[test]
    fn job_id_forms() {
        assert_eq!(
            cancel(&["1,2", "3"]).targets,
            vec![target(1), target(2), target(3)]
        );
        let arr = |job_id, tasks: Option<Vec<u32>>| Target {
            job_id,
            tasks,
            step: None,
        };
        assert_eq!(
            cancel(&["7_1", "7_[1-3,5],8_*"]).targets,
            vec![
                arr(7, Some(vec![1])),
                arr(7, Some(vec![1, 2, 3, 5])),
                arr(8, None)
            ]
        );
        assert_eq!(arr(7, Some(vec![1, 2, 3])).to_string(), "7_[1-3]");
        assert_eq!(arr(7, Some(vec![4])).to_string(), "7_4");
        assert_eq!(
            cancel(&["4.0", "5.12"]).targets,
            vec![
                Target {
                    job_id: 4,
                    tasks: None,
                    step: Some(0),
                },
                Target {
                    job_id: 5,
                    tasks: None,
                    step: Some(12),
                }
            ]
        );
        for (word, reported) in [
            ("abc", "abc"),
            ("0", "0"),
            ("", ""),
            ("12x,3", "12x,3"),
            ("1,abc", "abc"),
            ("1,,2", ",2"),
            ("1,", ""),
            ("7_x", "7_x"),
            ("7_[1-3", "7_[1-3"),
            ("7_[3-1]", "7_[3-1]"),
            ("7_[1-3%2]", "7_[1-3%2]"),
            ("7+1", "7+1"),
            ("7.batch", "7.batch"),
            ("7.", "7."),
            ("+7", "+7"),
            ("99999999999", "99999999999"),
        ] {
            let e = error(&[word]);
            assert_eq!(
                e,
                ScancelError::InvalidJobId {
                    id: reported.into()
                },
                "{word:?}"
            );
            assert_eq!(
                e.to_string(),
                format!("scancel: error: Invalid job id {reported}")
            );
        }
    }

    #[test]
    fn nothing_to_act_on_is_an_error() {
        let e = error(&[]);
        assert_eq!(e, ScancelError::NoJobIdentification);
        assert_eq!(
            e.to_string(),
            "scancel: error: No job identification provided"
        );
        assert_eq!(error(&["-v", "-s", "9"]), ScancelError::NoJobIdentification);
        // Any filter is enough.
        assert!(cancel(&["--me"]).targets.is_empty());
        assert!(cancel(&["--wckey", "w"]).filters.any());
    }

    #[test]
    fn bad_signal_and_state_values() {
        let e = error(&["-s", "BOGUS", "1"]);
        assert_eq!(e.to_string(), "Unknown job signal: BOGUS");
        assert_eq!(
            error(&["-t", "NOPE"]).to_string(),
            "Invalid job state specified: NOPE\n\
             Valid job states are PENDING, RUNNING, and SUSPENDED"
        );
        // A real state that is never active is accepted (it just matches nothing).
        assert_eq!(
            cancel(&["-t", "cd"]).filters.state,
            Some(JobState::Completed)
        );
    }

    #[test]
    fn signal_names_and_numbers() {
        assert_eq!(parse_signal("SIGTERM"), Some(15));
        assert_eq!(parse_signal("usr2"), Some(12));
        assert_eq!(parse_signal("SigKill"), Some(9));
        assert_eq!(parse_signal("9"), Some(9));
        assert_eq!(parse_signal("64"), Some(64));
        assert_eq!(parse_signal("winch"), Some(28));
        assert_eq!(parse_signal("SIGSYS"), Some(31));
        assert_eq!(parse_signal("PWR"), Some(30));
        assert_eq!(parse_signal("iot"), Some(6));
        assert_eq!(parse_signal("SIGCLD"), Some(17));
        assert_eq!(parse_signal("poll"), Some(29));
        assert_eq!(parse_signal("RTMIN"), Some(34));
        assert_eq!(parse_signal("SIGRTMIN+2"), Some(36));
        assert_eq!(parse_signal("rtmax-1"), Some(63));
        assert_eq!(parse_signal("RTMAX"), Some(64));
        for bad in [
            "0",
            "65",
            "-1",
            "BOGUS",
            "",
            "SIG",
            "SIGSIGTERM",
            "RTMIN+31",
            "RTMIN-1",
        ] {
            assert_eq!(parse_signal(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn resolve_looks_up_users_and_nodes() {
        let lookup = |n: &str| (n == "alice").then_some(1000);
        let s = Selector::resolve(&cancel(&["-u", "alice,42"]).filters, 5, lookup, no_file);
        assert_eq!(s.unwrap().uids, Some(vec![1000, 42]));
        let s = Selector::resolve(&cancel(&["--me"]).filters, 5, lookup, no_file).unwrap();
        assert_eq!(s.uids, Some(vec![5]));
        for (list, bad) in [("alice,nobody_here", "nobody_here"), ("", ""), (",", ",")] {
            let e = Selector::resolve(&cancel(&["-u", list]).filters, 5, lookup, no_file);
            assert_eq!(e, Err(ScancelError::InvalidUser { name: bad.into() }));
        }
        let s = Selector::resolve(&cancel(&["-w", "n[1-3]"]).filters, 5, lookup, no_file);
        assert_eq!(
            s.unwrap().nodes,
            Some(vec!["n1".into(), "n2".into(), "n3".into()])
        );
        let e = Selector::resolve(&cancel(&["-w", "n[3-1]"]).filters, 5, lookup, no_file);
        assert!(
            matches!(e, Err(ScancelError::InvalidNodeList { .. })),
            "{e:?}"
        );
        // A path is a file of names.
        let file = |p: &str| {
            assert_eq!(p, "/tmp/hosts");
            Ok("n4\nn[5-6]\n".to_string())
        };
        let s = Selector::resolve(&cancel(&["-w", "/tmp/hosts"]).filters, 5, lookup, file);
        assert_eq!(
            s.unwrap().nodes,
            Some(vec!["n4".into(), "n5".into(), "n6".into()])
        );
        let e = Selector::resolve(&cancel(&["-w", "./nope"]).filters, 5, lookup, no_file);
        assert!(
            matches!(&e, Err(ScancelError::NodeListFile { path, .. }) if path == "./nope"),
            "{e:?}"
        );
    }

    #[test]
    fn each_filter_matches_only_its_jobs() {
        use JobState::*;
        let a = job(1, Pending, 1000, "alpha", "debug");
        let b = job(2, Running, 1000, "beta", "short");
        let c = job(3, Suspended, 42, "alpha", "short");
        let all = [&a, &b, &c];
        let pass = |words: &[&str]| -> Vec<u32> {
            let s = selector(words);
            all.iter()
                .filter(|j| s.matches(j))
                .map(|j| j.job_id)
                .collect()
        };
        assert_eq!(pass(&["-u", "alice"]), vec![1, 2]);
        assert_eq!(pass(&["-u", "42,alice"]), vec![1, 2, 3]);
        assert_eq!(pass(&["--me"]), Vec::<u32>::new());
        assert_eq!(pass(&["-t", "PENDING"]), vec![1]);
        assert_eq!(pass(&["-t", "r"]), vec![2]);
        assert_eq!(pass(&["-t", "suspended"]), vec![3]);
        assert_eq!(pass(&["-p", "short"]), vec![2, 3]);
        assert_eq!(pass(&["-n", "alpha"]), vec![1, 3]);
        assert_eq!(pass(&["-n", "Alpha"]), Vec::<u32>::new());
        assert_eq!(pass(&["-w", "n2,n9"]), vec![2, 3]);
        assert_eq!(pass(&["-w", "n9"]), Vec::<u32>::new());
        assert_eq!(pass(&["-q", "NORMAL"]), vec![1, 2, 3]);
        assert_eq!(pass(&["-q", "high"]), Vec::<u32>::new());
        assert_eq!(pass(&["-A", "acct"]), Vec::<u32>::new());
        assert_eq!(pass(&["-R", "maint"]), Vec::<u32>::new());
        assert_eq!(pass(&["--wckey", "submitit"]), Vec::<u32>::new());
        // Combined with AND.
        assert_eq!(pass(&["-n", "alpha", "-p", "short"]), vec![3]);
        assert_eq!(pass(&["-n", "alpha", "-u", "alice", "-t", "PD"]), vec![1]);
    }

    #[test]
    fn select_without_ids_takes_every_active_job_pending_first() {
        use JobState::*;
        let jobs = [
            job(1, Running, 1, "a", "p"),
            job(2, Completed, 1, "a", "p"),
            job(3, Pending, 1, "a", "p"),
            job(4, Completing, 1, "a", "p"),
            job(5, Suspended, 1, "a", "p"),
            job(6, Pending, 1, "b", "p"),
        ];
        let s = select(&[], &selector(&["-n", "a"]), &jobs);
        assert_eq!(ids(&s), vec![3, 1, 5]);
        assert!(s.missing.is_empty());
        let s = select(&[], &selector(&["-n", "nothing"]), &jobs);
        assert_eq!(s, Selection::default());
    }

    #[test]
    fn select_with_ids_reports_missing_ones_and_keeps_filters() {
        use JobState::*;
        let jobs = [
            job(1, Running, 1, "a", "p"),
            job(2, Completed, 1, "a", "p"),
            job(3, Pending, 1, "a", "p"),
            job(4, Running, 1, "b", "p"),
        ];
        let step = |job_id, s| Target {
            job_id,
            step: Some(s),
            tasks: None,
        };
        let targets = [
            target(1),
            target(2),
            target(9),
            target(4),
            target(1),
            step(1, 0),
            step(3, 0),
            step(9, 1),
            target(3),
        ];
        let s = select(&targets, &selector(&["-n", "a"]), &jobs);
        // 4 is filtered out silently, 1 is taken once, pending 3 goes first.
        assert_eq!(ids(&s), vec![3, 1]);
        // Finished 2 and unknown 9 are missing, with their steps; the step of
        // running 1 is acted on, the step of pending 3 passed over.
        assert_eq!(s.missing, vec![target(2), target(9), step(9, 1)]);
        assert_eq!(s.steps, vec![(1, 0)]);
        // A step of a job the filters leave out is left out too.
        let s = select(&[step(4, 0)], &selector(&["-n", "a"]), &jobs);
        assert_eq!((s.steps.len(), s.missing.len()), (0, 0));
        assert_eq!(
            missing_line(&target(2)),
            "scancel: error: Kill job error on job id 2: Invalid job id specified"
        );
        assert_eq!(
            missing_line(&step(9, 1)),
            "scancel: error: Kill job error on job step id 9.1: Invalid job id specified"
        );
        // A running job without that step: Slurm names the job alone, and
        // exits with its error number's low byte.
        assert_eq!(
            step_error(1, 7, INVALID_JOB_ID),
            (
                "scancel: error: Kill job error on job step id 1: Invalid job id specified".into(),
                225
            )
        );
        assert_eq!(
            step_action_line(1, 0, Some(10)),
            "scancel: Signal 10 to step 1.0"
        );
    }

    #[test]
    fn sigkill_cancels_pending_jobs_and_signals_the_rest() {
        use JobState::*;
        let jobs = [job(3, Pending, 1, "a", "p"), job(1, Running, 1, "a", "p")];
        let req = |ids: Vec<u32>, signal, batch_only| CancelRequest {
            job_ids: ids,
            signal,
            batch_only,
            exact: true,
        };
        assert_eq!(
            requests(&jobs, Some(9), true),
            vec![req(vec![3], None, true), req(vec![1], Some(9), true)]
        );
        assert_eq!(
            requests(&jobs, Some(15), false),
            vec![req(vec![3, 1], Some(15), false)]
        );
        assert_eq!(
            requests(&jobs, None, false),
            vec![req(vec![3, 1], None, false)]
        );
        assert!(requests(&[], Some(9), false).is_empty());
    }

    #[test]
    fn direct_only_for_plain_ids() {
        assert!(cancel(&["1", "2"]).direct());
        assert!(cancel(&["-b", "-v", "-Q", "1"]).direct());
        assert!(!cancel(&["-s", "TERM", "1"]).direct());
        assert!(!cancel(&["-i", "1"]).direct());
        assert!(!cancel(&["1.0"]).direct());
        assert!(!cancel(&["-u", "x", "1"]).direct());
    }

    #[test]
    fn confirm_reads_answers_until_yes_or_no() {
        let j = job(7, JobState::Pending, 1, "nm", "debug");
        let ask = |input: &str| {
            let mut out = Vec::new();
            let yes = confirm(&j, &mut std::io::Cursor::new(input.as_bytes()), &mut out);
            (yes, String::from_utf8(out).unwrap())
        };
        let prompt = "Cancel job_id=7 name=nm partition=debug [y/n]? ";
        assert_eq!(ask("y\n"), (true, prompt.to_string()));
        assert!(ask("Yes\n").0);
        assert_eq!(ask("N\n"), (false, prompt.to_string()));
        assert_eq!(ask("maybe\n\ny\n"), (true, prompt.repeat(3)));
        assert_eq!(ask(""), (false, format!("{prompt}\n")));
        assert_eq!(ask("x\n"), (false, format!("{}\n", prompt.repeat(2))));
    }

    #[test]
    fn verbose_lines_name_the_action() {
        assert_eq!(
            action_line(4, &cancel(&["4"])),
            "scancel: Terminating job 4"
        );
        assert_eq!(
            action_line(4, &cancel(&["-s", "USR1", "4"])),
            "scancel: Signal 10 to job 4"
        );
        assert_eq!(
            action_line(4, &cancel(&["-b", "-s", "1", "4"])),
            "scancel: Signal 1 to batch job 4"
        );
        assert_eq!(
            action_line(4, &cancel(&["-bf", "4"])),
            "scancel: Terminating full job 4"
        );
        assert_eq!(
            no_match_line(&cancel(&["--me", "-t", "pd", "-p", "x"]).filters, 12),
            "scancel: error: No active jobs match ALL job filters, including: \
             partition=x state=PENDING user_name=12"
        );
    }

    #[test]
    fn outcome_prints_errors_and_fails_only_for_real_refusals() {
        let gone = vec![
            (1, None),
            (2, Some(INVALID_JOB_ID.to_string())),
            (3, Some(ALREADY_DONE.to_string())),
        ];
        let (lines, code) = outcome(&gone, true);
        assert_eq!(code, 0);
        assert_eq!(
            lines,
            vec![
                "scancel: error: Kill job error on job id 2: Invalid job id specified",
                "scancel: error: Kill job error on job id 3: \
                 Job/step already completing or completed",
            ]
        );
        assert_eq!(outcome(&gone, false), (Vec::new(), 0));
        let refused = vec![(4, Some("Job is pending execution".to_string()))];
        let (lines, code) = outcome(&refused, false);
        assert_eq!(code, 1);
        assert_eq!(
            lines,
            vec!["scancel: error: Kill job error on job id 4: Job is pending execution"]
        );
    }

    #[test]
    fn clusters_must_be_local_or_all() {
        assert_eq!(check_clusters("all", "test"), Ok(()));
        assert_eq!(check_clusters("TEST,all", "test"), Ok(()));
        assert_eq!(
            check_clusters("test,other", "test"),
            Err(ScancelError::UnknownCluster {
                name: "other".into()
            })
        );
        assert!(check_clusters("", "test")
            .unwrap_err()
            .to_string()
            .contains("can't be reached now"));
    }
}
