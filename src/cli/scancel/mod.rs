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
//! - Jobs have no wckey and run under QOS `normal`: `--wckey` matches only the empty
//!   value, `-q` matches `normal`. `-A` matches the job's account, `-R` its reservation.
//! - Unknown and finished jobs: the error line is printed (unless `-Q`) and the exit
//!   status stays 0, which the client libraries calling scancel rely on.
//! - `-M/--clusters` accepts `all` and the local ClusterName; it always acts locally.
//! - `-i` takes end of input as "no" (Slurm would ask again forever).
//! - `-u` takes a comma list of names or uids; `-h` is `--help`.
//! - `--hurry`, `--cron`, `--ctld` and `--sibling` are accepted with a warning and ignored.
//!
//! This module owns the command line, the job id and signal grammars and the entry
//! point; the filters are applied in `select`, requests sent and reported in `send`.

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

mod select;
mod send;

use select::*;
pub use select::{requests, select, Selection, Selector};
use send::*;

/// The QOS of a job the controller names none for (no accounting database).
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

#[cfg(test)]
mod tests;
