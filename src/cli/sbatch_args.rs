//! What `sbatch` was asked to do: its command line, the `SBATCH_*` input
//! variables and the script's `#SBATCH` directives, merged into one
//! [`JobSubmit`] (slurm.md §6, clients.md §8.1).
//!
//! Owns: Slurm's option syntax (`--k=v`, `--k v`, `-kv`, `-k v`, bundled
//! flags, unique long prefixes, `--` and "options end at the script"),
//! loading the script (file, standard input or `--wrap`) and the checks Slurm
//! makes on it, the directive scan, precedence (command line > environment >
//! directives), `--export` filtering and the defaults the CLI fills in.
//!
//! Does not: talk to the controller, print anything, or judge a request
//! against partitions and limits (the controller does). Errors and warnings
//! come back fully formatted (`sbatch: error: ...`), ready for stderr.
//!
//! Options Slurm knows but canopy does not implement yet are accepted (their
//! values consumed) with a warning, so scripts written for Slurm still submit.
//! Conventions in the result: `time_limit_min` is `None` when no limit was
//! asked for (partition default) and `Some(0)` for "no limit" (`-t 0`,
//! `INFINITE`, `UNLIMITED`); `mem_per_node_mb == Some(0)` means the whole node.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use thiserror::Error;

use crate::config::units;
use crate::sched::array;
use crate::wire::types::{ArraySpec, Exclusive, JobSubmit, SignalSpec, UnixTime};

use super::getopt::{self, spec, Ambiguity, ArgKind, GetoptError, Word};
use Action as A;
use ArgKind::{Flag, Optional, Required};

/// Facts about the submitting process that the parser needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubmitContext {
    /// Current directory (absolute).
    pub cwd: PathBuf,
    /// The caller's environment.
    pub env: Vec<(String, String)>,
    pub user: String,
    pub uid: u32,
    pub gid: u32,
    /// This host's name (SLURM_SUBMIT_HOST).
    pub host: String,
    /// Program name as invoked, for the submit line.
    pub argv0: String,
}

/// A parsed submission plus how `sbatch` should report it.
#[derive(Debug, Clone, PartialEq)]
pub struct Submission {
    pub submit: JobSubmit,
    /// `--parsable`: print only the job id.
    pub parsable: bool,
    /// `-Q`: print nothing on success.
    pub quiet: bool,
    /// `-W`: wait for the job to end and exit with its exit code.
    pub wait: bool,
    /// Generic resources asked for (`--gres`, `--gpus*`), by name: each must
    /// be in slurm.conf's `GresTypes` (checked once the config is read).
    pub gres: Vec<String>,
    /// `-M`: the clusters named (this one, or `all`).
    pub clusters: Option<String>,
    /// Complete `sbatch: ...` lines for stderr.
    pub warnings: Vec<String>,
}

/// Why no submission was produced. `Display` gives the complete text to
/// print (one or more lines, Slurm's wording where Slurm has one).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SbatchError {
    /// A getopt syntax problem (unknown, ambiguous or incomplete option).
    #[error("{}\n{TRY_HELP}", .0.message("sbatch"))]
    Syntax(#[from] GetoptError),
    #[error("sbatch: error: Invalid numeric value \"{value}\" for --{option}.")]
    InvalidNumber { option: &'static str, value: String },
    #[error("sbatch: error: Invalid --signal specification: {value}")]
    InvalidSignal { value: String },
    #[error("sbatch: error: Invalid job array specification \"{value}\": {why}")]
    InvalidArray { value: String, why: String },
    #[error("sbatch: error: Invalid time specification {value}")]
    InvalidBegin { value: String },
    #[error("sbatch: error: Invalid --{option} specification \"{value}\": expected yes or no")]
    InvalidChoice { option: &'static str, value: String },
    #[error("sbatch: error: \"{value}\" is not a valid node count")]
    InvalidNodeCount { value: String },
    #[error("sbatch: error: Maximum node count {max} is less than minimum node count {min}")]
    NodeRange { min: u32, max: u32 },
    #[error("sbatch: error: Invalid --time specification")]
    InvalidTime { value: String },
    #[error("sbatch: error: Invalid --{option} specification")]
    InvalidMemory { option: &'static str, value: String },
    #[error("sbatch: fatal: --mem, --mem-per-cpu, and --mem-per-gpu are mutually exclusive.")]
    MemoryConflict,
    #[error("sbatch: fatal: SBATCH_MEM_PER_CPU and SBATCH_MEM_PER_NODE are mutually exclusive.")]
    EnvMemoryConflict,
    #[error("sbatch: error: Script arguments not permitted with --wrap option")]
    WrapWithScriptArgs,
    #[error(
        "sbatch: error: no batch script: name a script file, use --wrap, \
         or pass the script on standard input"
    )]
    NoScript,
    #[error("sbatch: error: Unable to open file {path}: {reason}")]
    ScriptUnreadable { path: String, reason: String },
    #[error("sbatch: error: Batch script {path} is not valid UTF-8 text")]
    ScriptNotUtf8 { path: String },
    #[error("sbatch: error: Batch script is empty!")]
    EmptyScript,
    #[error("sbatch: error: Batch script contains only whitespace!")]
    BlankScript,
    #[error(
        "sbatch: error: This does not look like a batch script.  The first\n\
         sbatch: error: line must start with #! followed by the path to an interpreter.\n\
         sbatch: error: For instance: #!/bin/sh"
    )]
    MissingShebang,
    #[error(
        "sbatch: error: The Slurm controller does not allow scripts that\n\
         sbatch: error: contain a NULL character '\\0'."
    )]
    NulInScript,
    #[error(
        "sbatch: error: Batch script contains DOS line breaks (\\r\\n)\n\
         sbatch: error: instead of expected UNIX line breaks (\\n)."
    )]
    DosLineBreaks,
    #[error("sbatch: fatal: {file}: line {line}: Unmatched `{quote}` in [{text}]")]
    UnmatchedQuote {
        file: String,
        line: usize,
        quote: char,
        text: String,
    },
    #[error("sbatch: fatal: {file}: line {line}: cannot split directive [{text}]")]
    DirectiveSyntax {
        file: String,
        line: usize,
        text: String,
    },
    #[error("sbatch: error: Invalid --exclusive specification")]
    InvalidExclusive,
    #[error("sbatch: error: Invalid --nice value, out of range (+/- 2147483645)")]
    InvalidNice,
    #[error("sbatch: error: Priority must be >= 0")]
    NegativePriority,
    #[error("sbatch: error: Priority must be < 4294967294")]
    PriorityTooLarge,
    #[error("sbatch: error: heterogeneous jobs ({marker}) are not supported by canopy yet")]
    HetJobUnsupported { marker: String },
    /// `-h/--help`: not a failure; print to stdout and exit 0.
    #[error("sbatch: error: Invalid --mail-type specification")]
    InvalidMailType,
    #[error("{HELP_TEXT}")]
    HelpRequested,
    /// `-u/--usage`: not a failure; print to stdout and exit 0.
    #[error("{USAGE_TEXT}")]
    UsageRequested,
    /// `-V/--version`: not a failure; print to stdout and exit 0.
    #[error("{VERSION_TEXT}")]
    VersionRequested,
}

impl SbatchError {
    /// Exit status for the `sbatch` process: 0 for help/usage/version, 255
    /// for an option getopt cannot read (Slurm's sbatch exits -1 there), else 1.
    pub fn exit_code(&self) -> i32 {
        match self {
            SbatchError::HelpRequested
            | SbatchError::UsageRequested
            | SbatchError::VersionRequested => 0,
            SbatchError::Syntax(_)
            | SbatchError::InvalidExclusive
            | SbatchError::InvalidNice
            | SbatchError::InvalidMailType
            | SbatchError::NegativePriority
            | SbatchError::PriorityTooLarge => 255,
            _ => 1,
        }
    }
}

const TRY_HELP: &str = "Try \"sbatch --help\" for more information";

const VERSION_TEXT: &str = concat!("canopy ", env!("CARGO_PKG_VERSION"));

const USAGE_TEXT: &str = "Usage: sbatch [-J name] [-p partition] [-N nodes[-max]] [-n ntasks] \
[-c ncpus] [--mem=size | --mem-per-cpu=size] [-t time] [-o file] [-e file] [-i file] [-D dir] \
[--export=vars] [--parsable] [-H] [-Q] [--wrap=command | script [args...]]";

const HELP_TEXT: &str = "\
Usage: sbatch [OPTIONS...] [script [args...]]

Submit a batch script. The script is the named file, the text on standard
input when no file is named, or a one-line command given with --wrap.
#SBATCH lines at the top of the script are read as options; SBATCH_*
variables override them and the command line overrides both.

  -J, --job-name=name         job name (default: the script's file name)
  -p, --partition=name        partition to run in
  -N, --nodes=min[-max]       number of nodes
  -n, --ntasks=n              number of tasks
  -c, --cpus-per-task=n       CPUs per task
      --ntasks-per-node=n     tasks per node
      --mem=size              memory per node (K/M/G/T; 0 = whole node)
      --mem-per-cpu=size      memory per allocated CPU
  -t, --time=limit            time limit (minutes, [D-]H:M:S, UNLIMITED)
  -o, --output=pattern        standard output file (default slurm-%j.out)
  -e, --error=pattern         standard error file (default: with output)
  -i, --input=pattern         standard input file (default /dev/null)
  -D, --chdir=dir             working directory of the script
      --export=ALL|NONE|vars  environment passed to the job
      --wrap=command          run command under /bin/sh, no script file
      --parsable              print only the job id
  -H, --hold                  submit held (priority 0)
  -A, --account=name          account to charge (shown, lower-cased)
      --comment=text          a comment kept with the job
  -C, --constraint=features   nodes with these features (a&b, a|b, [a|b])
      --exclusive[=user|mcs]  whole nodes, shared with no other job
      --requeue, --no-requeue whether the job may be requeued
      --nice[=adj]            lower the job's priority by adj (default 100)
      --priority=n|TOP        fixed priority (operators only)
      --mail-type=list        mail on BEGIN, END, FAIL, ALL (MailProg)
      --mail-user=user        who gets it (default: you)
  -Q, --quiet                 print nothing on success
  -h, --help / -u, --usage / -V, --version

Other Slurm sbatch options are accepted with a warning and ignored.";

/// What an option does to a [`Layer`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    JobName,
    Partition,
    Nodes,
    Ntasks,
    CpusPerTask,
    NtasksPerNode,
    Mem,
    MemPerCpu,
    Time,
    Output,
    Error,
    Input,
    Chdir,
    Wrap,
    Export,
    Parsable,
    Wait,
    Hold,
    Quiet,
    OpenMode,
    Array,
    Signal,
    Dependency,
    KillOnInvalidDep,
    Nodelist,
    Exclude,
    TestOnly,
    Account,
    Comment,
    Constraint,
    Exclusive,
    Requeue,
    NoRequeue,
    Nice,
    Priority,
    MailType,
    MailUser,
    Reservation,
    Licenses,
    /// `--gres`, `--gpus*`: the names are checked, the request not acted on.
    Gres,
    /// `-M`: must name this cluster; the job id is then printed with it.
    Clusters,
    /// `-v`: Slurm's debug chatter; canopy's sbatch has none to add.
    Verbose,
    Help,
    Usage,
    Version,
    /// Known to Slurm, not implemented by canopy: warn and ignore.
    Begin,
    Unsupported,
}

type OptSpec = getopt::OptSpec<Action>;

/// Every sbatch option canopy recognises (Slurm's set, slurm.md §6.1).
static OPTIONS: &[OptSpec] = &[
    // Implemented.
    spec("job-name", Some('J'), Required, A::JobName),
    spec("partition", Some('p'), Required, A::Partition),
    spec("nodes", Some('N'), Required, A::Nodes),
    spec("ntasks", Some('n'), Required, A::Ntasks),
    spec("cpus-per-task", Some('c'), Required, A::CpusPerTask),
    spec("ntasks-per-node", None, Required, A::NtasksPerNode),
    spec("mem", None, Required, A::Mem),
    spec("mem-per-cpu", None, Required, A::MemPerCpu),
    spec("time", Some('t'), Required, A::Time),
    spec("output", Some('o'), Required, A::Output),
    spec("error", Some('e'), Required, A::Error),
    spec("input", Some('i'), Required, A::Input),
    spec("chdir", Some('D'), Required, A::Chdir),
    spec("wrap", None, Required, A::Wrap),
    spec("export", None, Required, A::Export),
    spec("parsable", None, Flag, A::Parsable),
    spec("hold", Some('H'), Flag, A::Hold),
    spec("quiet", Some('Q'), Flag, A::Quiet),
    spec("open-mode", None, Required, A::OpenMode),
    spec("array", Some('a'), Required, A::Array),
    spec("signal", None, Required, A::Signal),
    spec("dependency", Some('d'), Required, A::Dependency),
    spec("kill-on-invalid-dep", None, Required, A::KillOnInvalidDep),
    spec("help", Some('h'), Flag, A::Help),
    spec("usage", Some('u'), Flag, A::Usage),
    spec("version", Some('V'), Flag, A::Version),
    // Known but not implemented yet: values are consumed, then ignored.
    spec("account", Some('A'), Required, A::Account),
    spec("acctg-freq", None, Required, A::Unsupported),
    spec("batch", None, Required, A::Unsupported),
    spec("bb", None, Required, A::Unsupported),
    spec("bbf", None, Required, A::Unsupported),
    spec("begin", Some('b'), Required, A::Begin),
    spec("cluster-constraint", None, Required, A::Unsupported),
    spec("clusters", Some('M'), Required, A::Clusters),
    spec("comment", None, Required, A::Comment),
    spec("constraint", Some('C'), Required, A::Constraint),
    spec("container", None, Required, A::Unsupported),
    spec("container-id", None, Required, A::Unsupported),
    spec("contiguous", None, Flag, A::Unsupported),
    spec("core-spec", Some('S'), Required, A::Unsupported),
    spec("cores-per-socket", None, Required, A::Unsupported),
    spec("cpu-freq", None, Required, A::Unsupported),
    spec("cpus-per-gpu", None, Required, A::Unsupported),
    spec("deadline", None, Required, A::Unsupported),
    spec("delay-boot", None, Required, A::Unsupported),
    spec("distribution", Some('m'), Required, A::Unsupported),
    spec("exclude", Some('x'), Required, A::Exclude),
    spec("exclusive", None, Optional, A::Exclusive),
    spec("export-file", None, Required, A::Unsupported),
    spec("extra", None, Required, A::Unsupported),
    spec("extra-node-info", Some('B'), Required, A::Unsupported),
    spec("get-user-env", None, Optional, A::Unsupported),
    spec("gid", None, Required, A::Unsupported),
    spec("gpu-bind", None, Required, A::Unsupported),
    spec("gpu-freq", None, Required, A::Unsupported),
    spec("gpus", Some('G'), Required, A::Gres),
    spec("gpus-per-node", None, Required, A::Gres),
    spec("gpus-per-socket", None, Required, A::Gres),
    spec("gpus-per-task", None, Required, A::Gres),
    spec("gres", None, Required, A::Gres),
    spec("gres-flags", None, Required, A::Unsupported),
    spec("hint", None, Required, A::Unsupported),
    spec("ignore-pbs", None, Flag, A::Unsupported),
    spec("jobid", None, Required, A::Unsupported),
    spec("licenses", Some('L'), Required, A::Licenses),
    spec("mail-type", None, Required, A::MailType),
    spec("mail-user", None, Required, A::MailUser),
    spec("mcs-label", None, Required, A::Unsupported),
    spec("mem-bind", None, Required, A::Unsupported),
    spec("mem-per-gpu", None, Required, A::Unsupported),
    spec("mincpus", None, Required, A::Unsupported),
    spec("network", None, Required, A::Unsupported),
    spec("nice", None, Optional, A::Nice),
    spec("no-kill", Some('k'), Optional, A::Unsupported),
    spec("no-requeue", None, Flag, A::NoRequeue),
    spec("nodefile", Some('F'), Required, A::Unsupported),
    spec("nodelist", Some('w'), Required, A::Nodelist),
    spec("ntasks-per-core", None, Required, A::Unsupported),
    spec("ntasks-per-gpu", None, Required, A::Unsupported),
    spec("ntasks-per-socket", None, Required, A::Unsupported),
    spec("oom-kill-step", None, Optional, A::Unsupported),
    spec("overcommit", Some('O'), Flag, A::Unsupported),
    spec("oversubscribe", Some('s'), Flag, A::Unsupported),
    spec("power", None, Required, A::Unsupported),
    spec("prefer", None, Required, A::Unsupported),
    spec("priority", None, Required, A::Priority),
    spec("profile", None, Required, A::Unsupported),
    spec("propagate", None, Optional, A::Unsupported),
    spec("qos", Some('q'), Required, A::Unsupported),
    spec("reboot", None, Flag, A::Unsupported),
    spec("requeue", None, Flag, A::Requeue),
    spec("reservation", None, Required, A::Reservation),
    spec("segment", None, Required, A::Unsupported),
    spec("sockets-per-node", None, Required, A::Unsupported),
    spec("spread-job", None, Flag, A::Unsupported),
    spec("stepmgr", None, Flag, A::Unsupported),
    spec("switches", None, Required, A::Unsupported),
    spec("test-only", None, Flag, A::TestOnly),
    spec("thread-spec", None, Required, A::Unsupported),
    spec("threads-per-core", None, Required, A::Unsupported),
    spec("time-min", None, Required, A::Unsupported),
    spec("tmp", None, Required, A::Unsupported),
    spec("tres-bind", None, Required, A::Unsupported),
    spec("tres-per-task", None, Required, A::Unsupported),
    spec("uid", None, Required, A::Unsupported),
    spec("use-min-nodes", None, Flag, A::Unsupported),
    spec("verbose", Some('v'), Flag, A::Verbose),
    spec("wait", Some('W'), Flag, A::Wait),
    spec("wait-all-nodes", None, Required, A::Unsupported),
    spec("wckey", None, Required, A::Unsupported),
];

/// `SBATCH_*` input variables and the option each stands for.
const ENV_OPTIONS: &[(&str, &str)] = &[
    ("SBATCH_JOB_NAME", "job-name"),
    ("SBATCH_PARTITION", "partition"),
    ("SBATCH_TIMELIMIT", "time"),
    ("SBATCH_MEM_PER_NODE", "mem"),
    ("SBATCH_MEM_PER_CPU", "mem-per-cpu"),
    ("SBATCH_EXPORT", "export"),
    ("SBATCH_OUTPUT", "output"),
    ("SBATCH_ERROR", "error"),
    ("SBATCH_INPUT", "input"),
    ("SBATCH_OPEN_MODE", "open-mode"),
    ("SBATCH_ACCOUNT", "account"),
    ("SBATCH_ARRAY_INX", "array"),
    ("SBATCH_CLUSTERS", "clusters"),
    ("SBATCH_CONSTRAINT", "constraint"),
    ("SBATCH_EXCLUSIVE", "exclusive"),
    ("SBATCH_GPUS", "gpus"),
    ("SBATCH_GRES", "gres"),
    ("SBATCH_NO_REQUEUE", "no-requeue"),
    ("SBATCH_QOS", "qos"),
    ("SBATCH_REQUEUE", "requeue"),
    ("SBATCH_RESERVATION", "reservation"),
    ("SBATCH_SIGNAL", "signal"),
    ("SBATCH_WAIT", "wait"),
    ("SBATCH_WCKEY", "wckey"),
];

/// Where an option came from (for warnings, and because help/version only
/// mean something on the command line).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    CommandLine,
    Script,
    Env(&'static str),
}

/// One option occurrence, as getopt would report it.
type Given = getopt::Given<Action>;

/// Parse the parsable part of `args`: the options, and the index where the
/// script path (first non-option, or the word after `--`) begins.
fn split_options(args: &[String]) -> Result<(Vec<Given>, usize), SbatchError> {
    let mut given = Vec::new();
    let mut i = 0;
    loop {
        match getopt::read_word(OPTIONS, args, i, Ambiguity::Error) {
            Word::EndOfOptions => return Ok((given, i + 1)),
            Word::Positional => return Ok((given, i.min(args.len()))),
            Word::Options {
                given: read,
                problem,
                next,
            } => {
                if let Some(p) = problem {
                    return Err(p.into());
                }
                given.extend(read);
                i = next;
            }
        }
    }
}

/// Exact long name, else a unique prefix of one (as getopt_long allows).
fn find_long(name: &str) -> Result<&'static OptSpec, SbatchError> {
    Ok(getopt::find_long(OPTIONS, name, Ambiguity::Error)?)
}

/// The options from one source (command line, environment or directives).
#[derive(Debug, Default)]
struct Layer {
    job_name: Option<String>,
    partition: Option<String>,
    /// (min, max); a single count sets both, as in Slurm.
    nodes: Option<(u32, u32)>,
    ntasks: Option<u32>,
    cpus_per_task: Option<u32>,
    ntasks_per_node: Option<u32>,
    mem_mb: Option<u64>,
    mem_per_cpu_mb: Option<u64>,
    /// `Some(0)` = no limit.
    time_limit_min: Option<u32>,
    output: Option<String>,
    error: Option<String>,
    input: Option<String>,
    chdir: Option<String>,
    wrap: Option<String>,
    export: Option<String>,
    parsable: bool,
    hold: bool,
    quiet: bool,
    wait: bool,
    array: Option<ArraySpec>,
    signal: Option<SignalSpec>,
    open_append: Option<bool>,
    begin_time: Option<UnixTime>,
    dependency: Option<String>,
    kill_on_invalid_dep: Option<bool>,
    nodelist: Option<String>,
    exclude: Option<String>,
    test_only: bool,
    account: Option<String>,
    comment: Option<String>,
    constraint: Option<String>,
    exclusive: Option<Exclusive>,
    /// `--requeue` (true) or `--no-requeue` (false).
    requeue: Option<bool>,
    nice: Option<i32>,
    priority: Option<u32>,
    mail_type: Option<u32>,
    mail_user: Option<String>,
    reservation: Option<String>,
    licenses: Option<String>,
    gres: Option<Vec<String>>,
    clusters: Option<String>,
}

impl Layer {
    /// Field by field, `self` wins over `lower`; flags add up.
    fn over(self, lower: Layer) -> Layer {
        Layer {
            job_name: self.job_name.or(lower.job_name),
            partition: self.partition.or(lower.partition),
            nodes: self.nodes.or(lower.nodes),
            ntasks: self.ntasks.or(lower.ntasks),
            cpus_per_task: self.cpus_per_task.or(lower.cpus_per_task),
            ntasks_per_node: self.ntasks_per_node.or(lower.ntasks_per_node),
            mem_mb: self.mem_mb.or(lower.mem_mb),
            mem_per_cpu_mb: self.mem_per_cpu_mb.or(lower.mem_per_cpu_mb),
            time_limit_min: self.time_limit_min.or(lower.time_limit_min),
            output: self.output.or(lower.output),
            error: self.error.or(lower.error),
            input: self.input.or(lower.input),
            chdir: self.chdir.or(lower.chdir),
            wrap: self.wrap.or(lower.wrap),
            export: self.export.or(lower.export),
            parsable: self.parsable || lower.parsable,
            hold: self.hold || lower.hold,
            quiet: self.quiet || lower.quiet,
            wait: self.wait || lower.wait,
            array: self.array.or(lower.array),
            signal: self.signal.or(lower.signal),
            open_append: self.open_append.or(lower.open_append),
            begin_time: self.begin_time.or(lower.begin_time),
            dependency: self.dependency.or(lower.dependency),
            kill_on_invalid_dep: self.kill_on_invalid_dep.or(lower.kill_on_invalid_dep),
            nodelist: self.nodelist.or(lower.nodelist),
            exclude: self.exclude.or(lower.exclude),
            test_only: self.test_only || lower.test_only,
            account: self.account.or(lower.account),
            comment: self.comment.or(lower.comment),
            constraint: self.constraint.or(lower.constraint),
            exclusive: self.exclusive.or(lower.exclusive),
            requeue: self.requeue.or(lower.requeue),
            nice: self.nice.or(lower.nice),
            priority: self.priority.or(lower.priority),
            mail_type: self.mail_type.or(lower.mail_type),
            mail_user: self.mail_user.or(lower.mail_user),
            reservation: self.reservation.or(lower.reservation),
            licenses: self.licenses.or(lower.licenses),
            gres: self.gres.or(lower.gres),
            clusters: self.clusters.or(lower.clusters),
        }
    }
}

/// `--begin`: any time Slurm's parser reads, in local time; an incomplete
/// date means the next one to come.
fn parse_begin(value: &str) -> Result<UnixTime, SbatchError> {
    use super::sacct_args::{parse_slurm_time, Tense};
    let now = chrono::Utc::now().timestamp();
    match parse_slurm_time(value, now, &chrono::Local, Tense::Future) {
        Ok(Some(t)) => Ok(t),
        _ => Err(SbatchError::InvalidBegin {
            value: value.to_string(),
        }),
    }
}

/// Record one option in `layer`, validating its value.
fn apply(
    layer: &mut Layer,
    spec: &'static OptSpec,
    value: Option<&str>,
    source: Source,
    warnings: &mut Vec<String>,
) -> Result<(), SbatchError> {
    // The splitter guarantees a value for Required options.
    let v = value.unwrap_or_default();
    match spec.action {
        A::JobName => layer.job_name = Some(v.to_string()),
        A::Partition => layer.partition = Some(v.to_string()),
        A::Nodes => layer.nodes = Some(parse_nodes(v)?),
        A::Ntasks => layer.ntasks = Some(parse_positive(spec.long, v)?),
        A::CpusPerTask => layer.cpus_per_task = Some(parse_positive(spec.long, v)?),
        A::NtasksPerNode => layer.ntasks_per_node = Some(parse_positive(spec.long, v)?),
        A::Mem => layer.mem_mb = Some(parse_memory(spec.long, v)?),
        A::MemPerCpu => layer.mem_per_cpu_mb = Some(parse_memory(spec.long, v)?),
        A::Time => layer.time_limit_min = Some(parse_time(v)?),
        A::Output => layer.output = Some(stream_path(v)),
        A::Error => layer.error = Some(stream_path(v)),
        A::Input => layer.input = Some(stream_path(v)),
        A::Chdir => layer.chdir = Some(v.to_string()),
        A::Wrap => layer.wrap = Some(v.to_string()),
        A::Export => layer.export = Some(v.to_string()),
        A::Parsable => layer.parsable = true,
        A::Hold => layer.hold = true,
        A::Quiet => layer.quiet = true,
        A::Wait => layer.wait = true,
        A::OpenMode => layer.open_append = Some(parse_open_mode(v, warnings)),
        A::Begin => layer.begin_time = Some(parse_begin(v)?),
        A::Nodelist => layer.nodelist = Some(v.to_string()),
        A::Exclude => layer.exclude = Some(v.to_string()),
        A::TestOnly => layer.test_only = true,
        A::Account => layer.account = Some(v.to_string()),
        A::Comment => layer.comment = Some(v.to_string()),
        A::MailType => {
            layer.mail_type =
                Some(crate::mail::parse_mail_type(v).ok_or(SbatchError::InvalidMailType)?)
        }
        A::MailUser => layer.mail_user = Some(v.to_string()),
        A::Reservation => layer.reservation = Some(v.to_string()),
        A::Clusters => layer.clusters = Some(v.to_string()),
        A::Verbose => {}
        A::Licenses => layer.licenses = Some(v.to_string()),
        A::Gres => {
            let names = gres_names(spec.long, v);
            layer.gres.get_or_insert_with(Vec::new).extend(names);
            warn_unsupported(spec.long, source, warnings);
        }
        A::Constraint => layer.constraint = Some(v.to_string()),
        A::Exclusive => layer.exclusive = Some(parse_exclusive(value)?),
        A::Requeue => layer.requeue = Some(true),
        A::NoRequeue => layer.requeue = Some(false),
        A::Nice => layer.nice = Some(parse_nice(value)?),
        A::Priority => layer.priority = Some(parse_priority(v)?),
        A::Array => {
            layer.array = Some(array::parse(v).map_err(|e| SbatchError::InvalidArray {
                value: v.to_string(),
                why: e.to_string(),
            })?)
        }
        A::Dependency => layer.dependency = Some(v.to_string()),
        A::Signal => layer.signal = Some(parse_warn_signal(v)?),
        A::KillOnInvalidDep => {
            layer.kill_on_invalid_dep = Some(match v.to_ascii_lowercase().as_str() {
                "yes" => true,
                "no" => false,
                _ => {
                    return Err(SbatchError::InvalidChoice {
                        option: spec.long,
                        value: v.to_string(),
                    })
                }
            })
        }
        A::Help | A::Usage | A::Version => return informational(spec.action, source),
        A::Unsupported => warn_unsupported(spec.long, source, warnings),
    }
    Ok(())
}

/// Help, usage and version only act on the command line; Slurm reads them
/// nowhere else, so elsewhere they are simply ignored.
fn informational(action: Action, source: Source) -> Result<(), SbatchError> {
    match (source, action) {
        (Source::CommandLine, A::Help) => Err(SbatchError::HelpRequested),
        (Source::CommandLine, A::Usage) => Err(SbatchError::UsageRequested),
        (Source::CommandLine, A::Version) => Err(SbatchError::VersionRequested),
        _ => Ok(()),
    }
}

/// The generic resource names an option asks for: `--gres=gpu:2,nic`
/// (`name[:type][:count]` each, `gres/` prefix allowed); the `--gpus*`
/// options ask for `gpu`.
pub(crate) fn gres_names(option: &str, value: &str) -> Vec<String> {
    if option != "gres" {
        return vec!["gpu".to_string()];
    }
    value
        .split(',')
        .map(|g| g.trim().trim_start_matches("gres/"))
        .filter(|g| !g.is_empty() && *g != "none")
        .map(|g| g.split(':').next().unwrap_or_default().to_string())
        .collect()
}

/// The error for a generic resource the cluster does not define, as
/// Slurm's commands give it (before anything is submitted).
pub(crate) fn check_gres(asked: &[String], defined: &[String]) -> Result<(), String> {
    match asked.iter().find(|g| !defined.contains(g)) {
        Some(_) => Err("Invalid generic resource (gres) specification".into()),
        None => Ok(()),
    }
}

fn warn_unsupported(long: &str, source: Source, warnings: &mut Vec<String>) {
    let origin = match source {
        Source::Env(var) => format!(" (set by {var})"),
        Source::CommandLine | Source::Script => String::new(),
    };
    push_once(
        warnings,
        format!("{}{origin}", super::unsupported_option("sbatch", long)),
    );
}

/// `--exclusive[=user|mcs]`; a bare `--exclusive` is whole nodes.
fn parse_exclusive(value: Option<&str>) -> Result<Exclusive, SbatchError> {
    match value.map(str::to_ascii_lowercase).as_deref() {
        None | Some("") => Ok(Exclusive::Node),
        Some("user") => Ok(Exclusive::User),
        Some("mcs") => Ok(Exclusive::Mcs),
        Some(_) => Err(SbatchError::InvalidExclusive),
    }
}

/// `--nice[=adj]`: a bare `--nice` is 100. The value is read as C's atoi
/// reads it (Slurm's sbatch does), so junk is 0; the range is Slurm's.
pub(crate) fn parse_nice(value: Option<&str>) -> Result<i32, SbatchError> {
    const LIMIT: i64 = 2_147_483_645;
    let Some(v) = value else {
        return Ok(100);
    };
    let n = atoi(v);
    if n.abs() > LIMIT {
        return Err(SbatchError::InvalidNice);
    }
    Ok(n as i32)
}

/// `--priority=N|TOP`: `TOP` is the highest priority an operator can give.
pub(crate) fn parse_priority(v: &str) -> Result<u32, SbatchError> {
    if v.eq_ignore_ascii_case("top") {
        return Ok(u32::MAX - 1);
    }
    let n = atoi(v);
    if n < 0 {
        return Err(SbatchError::NegativePriority);
    }
    u32::try_from(n)
        .ok()
        .filter(|&p| p < u32::MAX - 1)
        .ok_or(SbatchError::PriorityTooLarge)
}

/// C's `atoi`/`strtoll` reading: optional blanks and sign, then digits up to
/// the first non-digit; nothing readable is 0. Saturates instead of wrapping.
fn atoi(text: &str) -> i64 {
    let t = text.trim_start();
    let (sign, digits) = match t.strip_prefix('-') {
        Some(rest) => (-1, rest),
        None => (1, t.strip_prefix('+').unwrap_or(t)),
    };
    let mut n: i64 = 0;
    for c in digits.chars().map_while(|c| c.to_digit(10)) {
        n = n.saturating_mul(10).saturating_add(i64::from(c));
    }
    sign * n
}

/// `--open-mode=append|truncate`: true for append. Slurm looks only at the
/// first letter, and a bad value is reported and ignored (truncate).
fn parse_open_mode(value: &str, warnings: &mut Vec<String>) -> bool {
    match value.chars().next() {
        Some('a' | 'A') => true,
        Some('t' | 'T') => false,
        _ => {
            push_once(
                warnings,
                format!("sbatch: error: Invalid --open-mode argument: {value}. Ignored"),
            );
            false
        }
    }
}

fn push_once(warnings: &mut Vec<String>, line: String) {
    if !warnings.contains(&line) {
        warnings.push(line);
    }
}

/// A count that must be a positive decimal integer.
fn parse_positive(option: &'static str, value: &str) -> Result<u32, SbatchError> {
    value
        .parse::<u32>()
        .ok()
        .filter(|&n| n > 0)
        .ok_or_else(|| SbatchError::InvalidNumber {
            option,
            value: value.to_string(),
        })
}

/// `--signal=[{R|B}:]SIG[@secs]` (60 s when no time is given). `R:` (may
/// overlap a reservation) means nothing without reservations.
pub(crate) fn parse_warn_signal(value: &str) -> Result<SignalSpec, SbatchError> {
    let bad = || SbatchError::InvalidSignal {
        value: value.to_string(),
    };
    let (flags, rest) = match value.split_once(':') {
        Some((f, r)) if !f.is_empty() && f.chars().all(|c| matches!(c, 'B' | 'R' | 'b' | 'r')) => {
            (f, r)
        }
        Some(_) => return Err(bad()),
        None => ("", value),
    };
    let (sig, secs) = match rest.split_once('@') {
        Some((s, t)) => (s, t.parse::<u32>().map_err(|_| bad())?),
        None => (rest, 60),
    };
    if secs > 0xffff {
        return Err(bad());
    }
    let signal = super::scancel::parse_signal(sig).ok_or_else(bad)?;
    Ok(SignalSpec {
        signal,
        secs,
        batch_only: flags.contains(['B', 'b']),
    })
}

/// `-N`: `n`, `min-max` or `-max` (minimum 1); counts may end in k/K
/// (×1024) or m/M (×1024²), as in Slurm.
fn parse_nodes(arg: &str) -> Result<(u32, u32), SbatchError> {
    let (min, max) = match arg.split_once('-') {
        Some((lo, hi)) => {
            let min = if lo.trim().is_empty() {
                1
            } else {
                node_count(lo)?.max(1)
            };
            (min, node_count(hi)?)
        }
        None => {
            let n = node_count(arg)?;
            if n == 0 {
                return Err(SbatchError::InvalidNodeCount {
                    value: arg.to_string(),
                });
            }
            (n, n)
        }
    };
    if max < min {
        return Err(SbatchError::NodeRange { min, max });
    }
    Ok((min, max))
}

fn node_count(text: &str) -> Result<u32, SbatchError> {
    let invalid = || SbatchError::InvalidNodeCount {
        value: text.to_string(),
    };
    let t = text.trim();
    let digits_end = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, suffix) = t.split_at(digits_end);
    let n: u32 = digits.parse().map_err(|_| invalid())?;
    let factor: u32 = match suffix {
        "" => 1,
        "k" | "K" => 1024,
        "m" | "M" => 1024 * 1024,
        _ => return Err(invalid()),
    };
    n.checked_mul(factor).ok_or_else(invalid)
}

/// `-t`: minutes, with `Some(0)` standing for "no limit".
fn parse_time(value: &str) -> Result<u32, SbatchError> {
    match units::parse_time_limit_min(value) {
        Ok(Some(minutes)) => Ok(minutes),
        Ok(None) => Ok(0),
        Err(_) => Err(SbatchError::InvalidTime {
            value: value.to_string(),
        }),
    }
}

fn parse_memory(option: &'static str, value: &str) -> Result<u64, SbatchError> {
    units::parse_mem_mb(value).map_err(|_| SbatchError::InvalidMemory {
        option,
        value: value.to_string(),
    })
}

/// `-o/-e/-i none` means /dev/null (any case), as in Slurm.
fn stream_path(value: &str) -> String {
    if value.eq_ignore_ascii_case("none") {
        "/dev/null".to_string()
    } else {
        value.to_string()
    }
}

/// Memory options across sources. Two kinds given by the command line and
/// the script together is an error, as is two kinds from the environment;
/// otherwise what the command line or script gives replaces the
/// environment's (Slurm's rule). Returns (per node, per CPU).
fn resolve_memory(
    cmd: &Layer,
    env: &Layer,
    dir: &Layer,
) -> Result<(Option<u64>, Option<u64>), SbatchError> {
    let cli_mem = cmd.mem_mb.or(dir.mem_mb);
    let cli_per_cpu = cmd.mem_per_cpu_mb.or(dir.mem_per_cpu_mb);
    if cli_mem.is_some() && cli_per_cpu.is_some() {
        return Err(SbatchError::MemoryConflict);
    }
    if env.mem_mb.is_some() && env.mem_per_cpu_mb.is_some() {
        return Err(SbatchError::EnvMemoryConflict);
    }
    if cli_mem.is_some() || cli_per_cpu.is_some() {
        Ok((cli_mem, cli_per_cpu))
    } else {
        Ok((env.mem_mb, env.mem_per_cpu_mb))
    }
}

/// Where the script text came from.
#[derive(Debug)]
enum Origin {
    File { given: String, absolute: PathBuf },
    Stdin,
    Wrap,
}

#[derive(Debug)]
struct Script {
    text: String,
    origin: Origin,
    args: Vec<String>,
}

impl Script {
    /// How error messages name the script.
    fn label(&self) -> &str {
        match &self.origin {
            Origin::File { given, .. } => given,
            Origin::Stdin => "(stdin)",
            Origin::Wrap => "(wrap)",
        }
    }

    fn default_job_name(&self) -> String {
        match &self.origin {
            Origin::File { given, .. } => Path::new(given)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| given.clone()),
            Origin::Stdin => "sbatch".to_string(),
            Origin::Wrap => "wrap".to_string(),
        }
    }

    /// scontrol's `Command=`.
    fn command(&self) -> String {
        match &self.origin {
            Origin::File { absolute, .. } => absolute.to_string_lossy().into_owned(),
            Origin::Stdin | Origin::Wrap => "(null)".to_string(),
        }
    }
}

/// Pick the script: `--wrap`, else the first positional word, else stdin.
fn load_script(
    cmd: &Layer,
    positional: &[String],
    stdin_script: Option<String>,
    ctx: &SubmitContext,
) -> Result<Script, SbatchError> {
    if let Some(command) = &cmd.wrap {
        if !positional.is_empty() {
            return Err(SbatchError::WrapWithScriptArgs);
        }
        return Ok(Script {
            text: wrap_script(command),
            origin: Origin::Wrap,
            args: Vec::new(),
        });
    }
    let Some((given, args)) = positional.split_first() else {
        let text = stdin_script.ok_or(SbatchError::NoScript)?;
        return Ok(Script {
            text,
            origin: Origin::Stdin,
            args: Vec::new(),
        });
    };
    if given == ":" {
        return Err(SbatchError::HetJobUnsupported {
            marker: "':'".to_string(),
        });
    }
    let (absolute, bytes) = read_script_file(given, ctx)?;
    let text = String::from_utf8(bytes).map_err(|_| SbatchError::ScriptNotUtf8 {
        path: given.clone(),
    })?;
    Ok(Script {
        text,
        origin: Origin::File {
            given: given.clone(),
            absolute,
        },
        args: args.to_vec(),
    })
}

/// The script Slurm builds around a `--wrap` command.
fn wrap_script(command: &str) -> String {
    format!("#!/bin/sh\n# Written by sbatch --wrap.\n\n{command}\n")
}

/// Read the script named `given`: relative to the current directory first
/// and, for a bare file name not found there, along the caller's PATH (as
/// Slurm does). N.B. Slurm checks PATH before the current directory; canopy
/// prefers the file the user can see in front of them.
fn read_script_file(given: &str, ctx: &SubmitContext) -> Result<(PathBuf, Vec<u8>), SbatchError> {
    let local = absolute_path(&ctx.cwd, given);
    let first_error = match fs::read(&local) {
        Ok(bytes) => return Ok((local, bytes)),
        Err(e) => e,
    };
    if first_error.kind() == io::ErrorKind::NotFound && !given.contains('/') {
        for dir in path_dirs(ctx) {
            let candidate = absolute_path(&ctx.cwd, &dir).join(given);
            if let Ok(bytes) = fs::read(&candidate) {
                return Ok((candidate, bytes));
            }
        }
    }
    Err(SbatchError::ScriptUnreadable {
        path: given.to_string(),
        reason: first_error.to_string(),
    })
}

fn path_dirs(ctx: &SubmitContext) -> Vec<String> {
    lookup(&ctx.env, "PATH")
        .map(|p| {
            p.split(':')
                .filter(|d| !d.is_empty())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// `cwd/path` (or `path` if absolute) without `.` components. `..` is kept:
/// resolving it lexically would be wrong across symlinks.
fn absolute_path(cwd: &Path, path: &str) -> PathBuf {
    cwd.join(path).components().collect()
}

/// The checks Slurm makes before submitting a script, in its order.
fn check_script(text: &str) -> Result<(), SbatchError> {
    if text.is_empty() {
        return Err(SbatchError::EmptyScript);
    }
    if text.trim().is_empty() {
        return Err(SbatchError::BlankScript);
    }
    if !text.starts_with("#!") {
        return Err(SbatchError::MissingShebang);
    }
    if text.contains('\0') {
        return Err(SbatchError::NulInScript);
    }
    if text.contains("\r\n") {
        return Err(SbatchError::DosLineBreaks);
    }
    Ok(())
}

/// Collect the words of the script's `#SBATCH` (and legacy `#SLURM`)
/// directives, in order, up to the first command line.
fn directive_words(
    script: &Script,
    warnings: &mut Vec<String>,
) -> Result<Vec<String>, SbatchError> {
    let mut words = Vec::new();
    for (index, line) in script.text.split('\n').enumerate() {
        let rest = if let Some(rest) = line.strip_prefix("#SBATCH") {
            rest
        } else if let Some(rest) = line.strip_prefix("#SLURM") {
            push_once(
                warnings,
                "sbatch: error: Change from #SLURM to #SBATCH in your script and verify \
                 the options are valid in sbatch"
                    .to_string(),
            );
            rest
        } else {
            match line.trim_start().chars().next() {
                None | Some('#') => continue,
                Some(_) => break,
            }
        };
        let line_words = split_directive(rest, script.label(), index + 1, line)?;
        if let Some(marker) = line_words
            .iter()
            .find(|w| w.eq_ignore_ascii_case("hetjob") || w.eq_ignore_ascii_case("packjob"))
        {
            return Err(SbatchError::HetJobUnsupported {
                marker: format!("#SBATCH {marker}"),
            });
        }
        words.extend(line_words);
    }
    Ok(words)
}

/// Split the text after `#SBATCH` like a shell would, ending it at the first
/// `#` that is neither quoted nor escaped (even inside a word, as Slurm does).
fn split_directive(
    rest: &str,
    file: &str,
    line_no: usize,
    line: &str,
) -> Result<Vec<String>, SbatchError> {
    let mut quote: Option<char> = None;
    let mut escaped = false;
    let mut end = rest.len();
    for (i, c) in rest.char_indices() {
        if escaped {
            escaped = false;
            continue;
        }
        match (quote, c) {
            (Some('\''), '\'') | (Some('"'), '"') => quote = None,
            (Some('"'), '\\') | (None, '\\') => escaped = true,
            (Some(_), _) => {}
            (None, '\'' | '"') => quote = Some(c),
            (None, '#') => {
                end = i;
                break;
            }
            (None, _) => {}
        }
    }
    if let Some(quote) = quote {
        return Err(SbatchError::UnmatchedQuote {
            file: file.to_string(),
            line: line_no,
            quote,
            text: line.to_string(),
        });
    }
    shlex::split(&rest[..end]).ok_or_else(|| SbatchError::DirectiveSyntax {
        file: file.to_string(),
        line: line_no,
        text: line.to_string(),
    })
}

/// The directives' options. Like Slurm, parsing stops at the first word that
/// is not an option; canopy says so instead of dropping the rest silently.
fn script_layer(script: &Script, warnings: &mut Vec<String>) -> Result<Layer, SbatchError> {
    let words = directive_words(script, warnings)?;
    let (given, stop) = split_options(&words)?;
    if let Some(stray) = words.get(stop) {
        warnings.push(format!(
            "sbatch: warning: #SBATCH directives from '{stray}' on are ignored: \
             '{stray}' is not an option"
        ));
    }
    let mut layer = Layer::default();
    for g in &given {
        apply(
            &mut layer,
            g.spec,
            g.value.as_deref(),
            Source::Script,
            warnings,
        )?;
    }
    if layer.wrap.is_some() {
        warnings.push("sbatch: warning: --wrap in a batch script is ignored".to_string());
    }
    Ok(layer)
}

/// The options set by `SBATCH_*` variables (empty values count as unset).
fn env_layer(ctx: &SubmitContext, warnings: &mut Vec<String>) -> Result<Layer, SbatchError> {
    let mut layer = Layer::default();
    for &(var, long) in ENV_OPTIONS {
        let Some(value) = lookup(&ctx.env, var).filter(|v| !v.is_empty()) else {
            continue;
        };
        let spec = find_long(long)?;
        let value = (spec.arg != Flag).then_some(value);
        apply(&mut layer, spec, value, Source::Env(var), warnings)?;
    }
    Ok(layer)
}

fn lookup<'a>(env: &'a [(String, String)], key: &str) -> Option<&'a str> {
    env.iter()
        .rev()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

/// The job's environment under `--export` (default `ALL`). `SLURM_*`
/// variables always pass; `NONE`/`NIL` pass nothing else; a list passes the
/// named variables (`VAR` takes the caller's value, `VAR=value` sets one),
/// on top of everything when the list includes `ALL`.
pub(crate) fn export_env(spec: Option<&str>, caller: &[(String, String)]) -> Vec<(String, String)> {
    let items = export_items(spec.unwrap_or("ALL"));
    let all = items.iter().any(|i| i.eq_ignore_ascii_case("ALL"));
    let mut env: Vec<(String, String)> = caller
        .iter()
        .filter(|(k, _)| all || k.starts_with("SLURM_"))
        .cloned()
        .collect();
    for item in &items {
        if ["ALL", "NONE", "NIL"]
            .iter()
            .any(|kw| item.eq_ignore_ascii_case(kw))
        {
            continue;
        }
        let (key, value) = match item.split_once('=') {
            Some((k, v)) => (k, Some(v)),
            None => (item.as_str(), lookup(caller, item)),
        };
        if let Some(value) = value {
            set_var(&mut env, key, value);
        }
    }
    env
}

/// Split an `--export` list on commas. A piece that does not start a new
/// variable (`NAME` or `NAME=...`) continues the previous value, so
/// `A=x,y,B=1` gives `A=x,y` and `B=1`.
fn export_items(spec: &str) -> Vec<String> {
    let mut items: Vec<String> = Vec::new();
    for piece in spec.split(',') {
        let name = piece.split_once('=').map_or(piece, |(n, _)| n);
        match items.last_mut() {
            Some(prev) if !is_var_name(name) && prev.contains('=') => {
                prev.push(',');
                prev.push_str(piece);
            }
            _ if piece.is_empty() => {}
            _ => items.push(piece.to_string()),
        }
    }
    items
}

fn is_var_name(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
}

fn set_var(env: &mut Vec<(String, String)>, key: &str, value: &str) {
    match env.iter_mut().find(|(k, _)| k == key) {
        Some(slot) => slot.1 = value.to_string(),
        None => env.push((key.to_string(), value.to_string())),
    }
}

/// Parse an `sbatch` invocation. `args` excludes the program name;
/// `stdin_script` is the script read from standard input, used only when no
/// script file and no `--wrap` is given.
///
/// The caller should not read standard input up front: call with `None`
/// first and, on [`SbatchError::NoScript`], read stdin and call again.
pub fn parse_submission(
    args: &[String],
    stdin_script: Option<String>,
    ctx: &SubmitContext,
) -> Result<Submission, SbatchError> {
    let mut warnings = Vec::new();
    let (given, script_at) = split_options(args)?;
    let mut cmd = Layer::default();
    for g in &given {
        apply(
            &mut cmd,
            g.spec,
            g.value.as_deref(),
            Source::CommandLine,
            &mut warnings,
        )?;
    }
    let positional = args.get(script_at..).unwrap_or_default();
    let script = load_script(&cmd, positional, stdin_script, ctx)?;
    check_script(&script.text)?;
    let dir = script_layer(&script, &mut warnings)?;
    let env = env_layer(ctx, &mut warnings)?;
    let (mem, mem_per_cpu) = resolve_memory(&cmd, &env, &dir)?;
    let opts = cmd.over(env).over(dir);
    let (parsable, quiet, wait) = (opts.parsable, opts.quiet, opts.wait);
    let gres = opts.gres.clone().unwrap_or_default();
    let clusters = opts.clusters.clone();
    Ok(Submission {
        submit: build_submit(opts, (mem, mem_per_cpu), script, args, ctx),
        parsable,
        quiet,
        wait,
        gres,
        clusters,
        warnings,
    })
}

/// Fill in the defaults and assemble the request.
fn build_submit(
    opts: Layer,
    (mem, mem_per_cpu): (Option<u64>, Option<u64>),
    script: Script,
    args: &[String],
    ctx: &SubmitContext,
) -> JobSubmit {
    let cwd = ctx.cwd.to_string_lossy().into_owned();
    let workdir = opts
        .chdir
        .as_deref()
        .map(|d| absolute_path(&ctx.cwd, d).to_string_lossy().into_owned())
        .unwrap_or_else(|| cwd.clone());
    let submit_line = std::iter::once(ctx.argv0.as_str())
        .chain(args.iter().map(String::as_str))
        .collect::<Vec<_>>()
        .join(" ");
    JobSubmit {
        name: opts.job_name.unwrap_or_else(|| script.default_job_name()),
        partition: opts.partition,
        min_nodes: opts.nodes.map(|(min, _)| min),
        max_nodes: opts.nodes.map(|(_, max)| max),
        ntasks: opts.ntasks,
        cpus_per_task: opts.cpus_per_task,
        ntasks_per_node: opts.ntasks_per_node,
        mem_per_node_mb: mem,
        mem_per_cpu_mb: mem_per_cpu,
        time_limit_min: opts.time_limit_min,
        stdout: opts.output,
        stderr: opts.error,
        stdin: opts.input,
        workdir,
        submit_dir: cwd,
        submit_host: ctx.host.clone(),
        command: script.command(),
        env: export_env(opts.export.as_deref(), &ctx.env),
        hold: opts.hold,
        user: ctx.user.clone(),
        uid: ctx.uid,
        gid: ctx.gid,
        group: String::new(),
        submit_line,
        script_args: script.args,
        interactive: false,
        array: opts.array,
        dependency: opts.dependency,
        kill_on_invalid_dep: opts.kill_on_invalid_dep,
        signal: opts.signal,
        open_append: opts.open_append.unwrap_or(false),
        begin_time: opts.begin_time,
        req_nodes: opts.nodelist,
        exc_nodes: opts.exclude,
        test_only: opts.test_only,
        account: opts.account,
        comment: opts.comment,
        constraint: opts.constraint,
        exclusive: opts.exclusive,
        no_requeue: opts.requeue == Some(false),
        nice: opts.nice.unwrap_or(0),
        priority: opts.priority,
        mail_type: opts.mail_type.unwrap_or(0),
        mail_user: opts.mail_user,
        reservation: opts.reservation,
        licenses: opts.licenses,
        script: script.text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCRIPT: &str = "#!/bin/sh\necho hi\n";

    struct Fixture {
        dir: tempfile::TempDir,
        ctx: SubmitContext,
    }

    fn fixture() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let ctx = SubmitContext {
            cwd: dir.path().to_path_buf(),
            env: vars(&[
                ("PATH", "/usr/bin:/bin"),
                ("HOME", "/home/alice"),
                ("SLURM_CONF", "/etc/slurm.conf"),
            ]),
            user: "alice".to_string(),
            uid: 1000,
            gid: 100,
            host: "login1".to_string(),
            argv0: "sbatch".to_string(),
        };
        Fixture { dir, ctx }
    }

    fn vars(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn argv(args: &[&str]) -> Vec<String> {
        args.iter().map(|a| a.to_string()).collect()
    }

    impl Fixture {
        fn write(&self, name: &str, text: &str) {
            let path = self.dir.path().join(name);
            if let Some(parent) = path.parent() {
                fs::create_dir_all(parent).unwrap();
            }
            fs::write(path, text).unwrap();
        }

        fn env(mut self, key: &str, value: &str) -> Self {
            self.ctx.env.push((key.to_string(), value.to_string()));
            self
        }

        fn run(&self, args: &[&str]) -> Result<Submission, SbatchError> {
            parse_submission(&argv(args), None, &self.ctx)
        }

        fn ok(&self, args: &[&str]) -> Submission {
            self.run(args).unwrap()
        }

        fn err(&self, args: &[&str]) -> SbatchError {
            self.run(args).unwrap_err()
        }

        /// Submit `job.sh` holding `text`, with `args` before it.
        fn script(&self, text: &str, args: &[&str]) -> Result<Submission, SbatchError> {
            self.write("job.sh", text);
            let mut all = args.to_vec();
            all.push("job.sh");
            self.run(&all)
        }

        fn cwd(&self) -> String {
            self.dir.path().to_string_lossy().into_owned()
        }
    }

    fn unsupported(option: &str) -> String {
        format!("sbatch: warning: option --{option} is not supported by canopy yet; ignored")
    }

    // ---- option syntax ------------------------------------------------

    #[test]
    fn node_choice_and_test_only_from_options_and_directives() {
        let f = fixture();
        let s = f
            .script(
                "#!/bin/sh\n#SBATCH -x n[3-4]\n#SBATCH --test-only\ntrue\n",
                &["-w", "n1,n2"],
            )
            .unwrap();
        assert_eq!(s.submit.req_nodes.as_deref(), Some("n1,n2"));
        assert_eq!(s.submit.exc_nodes.as_deref(), Some("n[3-4]"));
        assert!(s.submit.test_only);
        assert!(s.warnings.is_empty(), "{:?}", s.warnings);
        let s = f.ok(&["--nodelist=n5", "--wrap", "true"]);
        assert_eq!(s.submit.req_nodes.as_deref(), Some("n5"));
        assert!(!s.submit.test_only);
    }

    #[test]
    fn every_value_syntax_form() {
        let f = fixture();
        f.write("job.sh", SCRIPT);
        let s = f
            .ok(&[
                "--job-name=train",
                "--partition",
                "gpu",
                "-N2-4",
                "-n",
                "8",
                "-c4",
                "--ntasks-per-node=2",
                "--mem",
                "4G",
                "-t",
                "1-00:00:00",
                "-oout-%j.log",
                "-e",
                "err-%j.log",
                "--input=in.txt",
                "-D",
                "run",
                "job.sh",
            ])
            .submit;
        assert_eq!(s.name, "train");
        assert_eq!(s.partition.as_deref(), Some("gpu"));
        assert_eq!((s.min_nodes, s.max_nodes), (Some(2), Some(4)));
        assert_eq!(s.ntasks, Some(8));
        assert_eq!(s.cpus_per_task, Some(4));
        assert_eq!(s.ntasks_per_node, Some(2));
        assert_eq!(s.mem_per_node_mb, Some(4096));
        assert_eq!(s.mem_per_cpu_mb, None);
        assert_eq!(s.time_limit_min, Some(1440));
        assert_eq!(s.stdout.as_deref(), Some("out-%j.log"));
        assert_eq!(s.stderr.as_deref(), Some("err-%j.log"));
        assert_eq!(s.stdin.as_deref(), Some("in.txt"));
        assert_eq!(s.workdir, format!("{}/run", f.cwd()));
        assert!(!s.hold);
    }

    #[test]
    fn bundled_short_flags_and_values() {
        let f = fixture();
        f.write("job.sh", SCRIPT);
        let sub = f.ok(&["-HQJname", "job.sh"]);
        assert!(sub.submit.hold);
        assert!(sub.quiet);
        assert_eq!(sub.submit.name, "name");
        let sub = f.ok(&["-HJ", "spaced", "job.sh"]);
        assert!(sub.submit.hold);
        assert_eq!(sub.submit.name, "spaced");
    }

    #[test]
    fn options_after_the_script_are_script_arguments() {
        let f = fixture();
        f.write("job.sh", SCRIPT);
        let s = f
            .ok(&["-J", "a", "job.sh", "-N", "3", "--bogus", "x"])
            .submit;
        assert_eq!(s.script_args, argv(&["-N", "3", "--bogus", "x"]));
        assert_eq!(s.min_nodes, None);
        assert_eq!(s.name, "a");
    }

    #[test]
    fn double_dash_ends_options() {
        let f = fixture();
        f.write("-odd.sh", SCRIPT);
        let s = f.ok(&["-J", "a", "--", "-odd.sh", "-N", "2"]).submit;
        assert_eq!(s.command, format!("{}/-odd.sh", f.cwd()));
        assert_eq!(s.script_args, argv(&["-N", "2"]));
    }

    #[test]
    fn unique_long_prefixes() {
        let f = fixture();
        f.write("job.sh", SCRIPT);
        let sub = f.ok(&["--job-n=short", "--parsa", "--cpus-per-t", "2", "job.sh"]);
        assert_eq!(sub.submit.name, "short");
        assert!(sub.parsable);
        assert_eq!(sub.submit.cpus_per_task, Some(2));
        // An exact name wins over longer names it prefixes.
        assert_eq!(
            f.ok(&["--mem=1G", "job.sh"]).submit.mem_per_node_mb,
            Some(1024)
        );
    }

    #[test]
    fn ambiguous_prefix() {
        let e = fixture().err(&["--mem-per=1G", "job.sh"]);
        assert_eq!(
            e.to_string(),
            "sbatch: option '--mem-per' is ambiguous; possibilities: '--mem-per-cpu' \
             '--mem-per-gpu'\nTry \"sbatch --help\" for more information"
        );
    }

    #[test]
    fn unrecognized_options() {
        let f = fixture();
        let e = f.err(&["--foo", "job.sh"]);
        assert_eq!(
            e.to_string(),
            "sbatch: unrecognized option '--foo'\nTry \"sbatch --help\" for more information"
        );
        assert_eq!(e.exit_code(), 255);
        assert_eq!(
            f.err(&["--=x"]),
            SbatchError::Syntax(GetoptError::Unrecognized {
                option: String::new()
            })
        );
        assert_eq!(
            f.err(&["-Hz", "job.sh"]).to_string(),
            "sbatch: invalid option -- 'z'\nTry \"sbatch --help\" for more information"
        );
    }

    #[test]
    fn missing_and_unexpected_arguments() {
        let f = fixture();
        assert_eq!(
            f.err(&["--job-name"]).to_string(),
            "sbatch: option '--job-name' requires an argument\n\
             Try \"sbatch --help\" for more information"
        );
        assert_eq!(
            f.err(&["-J"]).to_string(),
            "sbatch: option requires an argument -- 'J'\n\
             Try \"sbatch --help\" for more information"
        );
        assert_eq!(
            f.err(&["--parsable=yes", "job.sh"]).to_string(),
            "sbatch: option '--parsable' doesn't allow an argument\n\
             Try \"sbatch --help\" for more information"
        );
    }

    #[test]
    fn invalid_numbers() {
        let f = fixture();
        assert_eq!(
            f.err(&["-n", "x", "job.sh"]).to_string(),
            "sbatch: error: Invalid numeric value \"x\" for --ntasks."
        );
        assert_eq!(
            f.err(&["-c", "0", "job.sh"]),
            SbatchError::InvalidNumber {
                option: "cpus-per-task",
                value: "0".to_string()
            }
        );
        assert_eq!(
            f.err(&["--ntasks-per-node=-1", "job.sh"]),
            SbatchError::InvalidNumber {
                option: "ntasks-per-node",
                value: "-1".to_string()
            }
        );
    }

    #[test]
    fn node_counts() {
        let f = fixture();
        f.write("job.sh", SCRIPT);
        let nodes = |arg: &str| {
            let s = f.ok(&["-N", arg, "job.sh"]).submit;
            (s.min_nodes.unwrap(), s.max_nodes.unwrap())
        };
        assert_eq!(nodes("3"), (3, 3));
        assert_eq!(nodes("2-4"), (2, 4));
        assert_eq!(nodes("-5"), (1, 5));
        assert_eq!(nodes("0-2"), (1, 2));
        assert_eq!(nodes("1k"), (1024, 1024));
        assert_eq!(nodes("1-2K"), (1, 2048));
        assert_eq!(
            f.err(&["-N", "x", "job.sh"]).to_string(),
            "sbatch: error: \"x\" is not a valid node count"
        );
        assert_eq!(
            f.err(&["-N", "4-2", "job.sh"]).to_string(),
            "sbatch: error: Maximum node count 2 is less than minimum node count 4"
        );
        assert_eq!(
            f.err(&["-N", "0", "job.sh"]),
            SbatchError::InvalidNodeCount {
                value: "0".to_string()
            }
        );
        assert_eq!(
            f.err(&["-N", "2-", "job.sh"]),
            SbatchError::InvalidNodeCount {
                value: String::new()
            }
        );
        assert_eq!(
            f.err(&["-N", "5000000M", "job.sh"]),
            SbatchError::InvalidNodeCount {
                value: "5000000M".to_string()
            }
        );
    }

    #[test]
    fn time_limits() {
        let f = fixture();
        f.write("job.sh", SCRIPT);
        let limit = |arg: &str| f.ok(&["-t", arg, "job.sh"]).submit.time_limit_min;
        assert_eq!(f.ok(&["job.sh"]).submit.time_limit_min, None);
        assert_eq!(limit("0"), Some(0));
        assert_eq!(limit("UNLIMITED"), Some(0));
        assert_eq!(limit("infinite"), Some(0));
        assert_eq!(limit("90"), Some(90));
        assert_eq!(limit("1:30"), Some(2));
        assert_eq!(limit("0:2:0"), Some(2));
        assert_eq!(limit("1-2"), Some(1560));
        let e = f.err(&["--time=soon", "job.sh"]);
        assert_eq!(e.to_string(), "sbatch: error: Invalid --time specification");
        assert_eq!(
            e,
            SbatchError::InvalidTime {
                value: "soon".to_string()
            }
        );
    }

    #[test]
    fn memory_sizes() {
        let f = fixture();
        f.write("job.sh", SCRIPT);
        let s = f.ok(&["--mem=4GB", "job.sh"]).submit;
        assert_eq!(s.mem_per_node_mb, Some(4096));
        assert_eq!(f.ok(&["--mem=0", "job.sh"]).submit.mem_per_node_mb, Some(0));
        let s = f.ok(&["--mem-per-cpu=512", "job.sh"]).submit;
        assert_eq!((s.mem_per_node_mb, s.mem_per_cpu_mb), (None, Some(512)));
        assert_eq!(
            f.err(&["--mem=4X", "job.sh"]).to_string(),
            "sbatch: error: Invalid --mem specification"
        );
        assert_eq!(
            f.err(&["--mem-per-cpu", "lots", "job.sh"]),
            SbatchError::InvalidMemory {
                option: "mem-per-cpu",
                value: "lots".to_string()
            }
        );
    }

    #[test]
    fn memory_options_are_exclusive() {
        let f = fixture();
        f.write("job.sh", SCRIPT);
        let e = f.err(&["--mem=1G", "--mem-per-cpu=1G", "job.sh"]);
        assert_eq!(
            e.to_string(),
            "sbatch: fatal: --mem, --mem-per-cpu, and --mem-per-gpu are mutually exclusive."
        );
        // The command line and the script count together.
        let e = f
            .script("#!/bin/sh\n#SBATCH --mem-per-cpu=1G\n", &["--mem=2G"])
            .unwrap_err();
        assert_eq!(e, SbatchError::MemoryConflict);
        let both = fixture()
            .env("SBATCH_MEM_PER_NODE", "1G")
            .env("SBATCH_MEM_PER_CPU", "1G");
        both.write("job.sh", SCRIPT);
        assert_eq!(
            both.err(&["job.sh"]).to_string(),
            "sbatch: fatal: SBATCH_MEM_PER_CPU and SBATCH_MEM_PER_NODE are mutually exclusive."
        );
        // A command-line kind replaces the environment's other kind.
        let env = fixture().env("SBATCH_MEM_PER_CPU", "1G");
        env.write("job.sh", SCRIPT);
        let s = env.ok(&["--mem=2G", "job.sh"]).submit;
        assert_eq!((s.mem_per_node_mb, s.mem_per_cpu_mb), (Some(2048), None));
        let s = env.ok(&["job.sh"]).submit;
        assert_eq!((s.mem_per_node_mb, s.mem_per_cpu_mb), (None, Some(1024)));
    }

    #[test]
    fn unsupported_options_warn_and_consume_values() {
        let f = fixture();
        f.write("job.sh", SCRIPT);
        let sub = f.ok(&[
            "--gres",
            "gpu:1",
            "--exclusive",
            "-A",
            "acct",
            "-kv",
            "--exclusive=user",
            "--requeue",
            "job.sh",
        ]);
        assert_eq!(
            sub.warnings,
            vec![unsupported("gres"), unsupported("no-kill")]
        );
        assert_eq!(sub.submit.command, format!("{}/job.sh", f.cwd()));
        assert!(sub.submit.script_args.is_empty());
        // The implemented ones in the same line took their values.
        assert_eq!(sub.submit.account.as_deref(), Some("acct"));
        assert_eq!(sub.submit.exclusive, Some(Exclusive::User));
        assert!(!sub.submit.no_requeue);
    }

    #[test]
    fn job_attributes_and_their_errors() {
        let f = fixture();
        f.write("job.sh", SCRIPT);
        let s = f
            .ok(&[
                "--comment=rule_a b",
                "-C",
                "fast,big",
                "--exclusive",
                "--no-requeue",
                "--nice",
                "--priority=TOP",
                "job.sh",
            ])
            .submit;
        assert_eq!(s.comment.as_deref(), Some("rule_a b"));
        assert_eq!(s.constraint.as_deref(), Some("fast,big"));
        assert_eq!(s.exclusive, Some(Exclusive::Node));
        assert!(s.no_requeue);
        assert_eq!((s.nice, s.priority), (100, Some(u32::MAX - 1)));
        let s = f.ok(&["--nice=-5", "--priority=7", "job.sh"]).submit;
        assert_eq!((s.nice, s.priority), (-5, Some(7)));
        // Slurm reads these numbers as atoi does: junk is 0.
        let s = f.ok(&["--nice=abc", "--priority=x", "job.sh"]).submit;
        assert_eq!((s.nice, s.priority), (0, Some(0)));
        for (args, text) in [
            (
                &["--exclusive=bogus", "job.sh"][..],
                "sbatch: error: Invalid --exclusive specification",
            ),
            (
                &["--nice=99999999999", "job.sh"][..],
                "sbatch: error: Invalid --nice value, out of range (+/- 2147483645)",
            ),
            (
                &["--priority=-1", "job.sh"][..],
                "sbatch: error: Priority must be >= 0",
            ),
        ] {
            let e = f.err(args);
            assert_eq!(e.to_string(), text);
            assert_eq!(e.exit_code(), 255);
        }
    }

    #[test]
    fn open_mode_appends_or_truncates() {
        let f = fixture();
        f.write("job.sh", SCRIPT);
        let sub = f.ok(&["--open-mode=append", "job.sh"]);
        assert!(sub.warnings.is_empty() && sub.submit.open_append);
        let sub = f.ok(&["--open-mode=t", "job.sh"]);
        assert!(!sub.submit.open_append);
        let sub = f.ok(&["--open-mode=bogus", "job.sh"]);
        assert!(!sub.submit.open_append);
        assert_eq!(
            sub.warnings,
            vec!["sbatch: error: Invalid --open-mode argument: bogus. Ignored".to_string()]
        );
    }

    #[test]
    fn help_usage_and_version() {
        let f = fixture();
        let help = f.err(&["--help"]);
        assert_eq!(help, SbatchError::HelpRequested);
        assert_eq!(help.exit_code(), 0);
        assert!(help.to_string().starts_with("Usage: sbatch"));
        assert!(help.to_string().contains("--mem-per-cpu"));
        assert_eq!(f.err(&["-h", "job.sh"]), SbatchError::HelpRequested);
        let usage = f.err(&["--usage"]);
        assert_eq!(usage.exit_code(), 0);
        assert!(usage.to_string().starts_with("Usage: sbatch [-J name]"));
        let version = f.err(&["-V"]);
        assert_eq!(version.exit_code(), 0);
        assert_eq!(
            version.to_string(),
            format!("canopy {}", env!("CARGO_PKG_VERSION"))
        );
        // Only the command line asks for help; a directive is ignored.
        let sub = f.script("#!/bin/sh\n#SBATCH --help\n#SBATCH -J ok\n", &[]);
        assert_eq!(sub.unwrap().submit.name, "ok");
    }

    // ---- the script ---------------------------------------------------

    #[test]
    fn script_checks() {
        let f = fixture();
        assert_eq!(f.script("", &[]).unwrap_err(), SbatchError::EmptyScript);
        assert_eq!(
            f.script("  \n\t\n", &[]).unwrap_err().to_string(),
            "sbatch: error: Batch script contains only whitespace!"
        );
        assert_eq!(
            f.script("echo hi\n", &[]).unwrap_err().to_string(),
            "sbatch: error: This does not look like a batch script.  The first\n\
             sbatch: error: line must start with #! followed by the path to an interpreter.\n\
             sbatch: error: For instance: #!/bin/sh"
        );
        assert_eq!(
            f.script("#!/bin/sh\necho \0\n", &[])
                .unwrap_err()
                .to_string(),
            "sbatch: error: The Slurm controller does not allow scripts that\n\
             sbatch: error: contain a NULL character '\\0'."
        );
        assert_eq!(
            f.script("#!/bin/sh\r\necho hi\r\n", &[])
                .unwrap_err()
                .to_string(),
            "sbatch: error: Batch script contains DOS line breaks (\\r\\n)\n\
             sbatch: error: instead of expected UNIX line breaks (\\n)."
        );
    }

    #[test]
    fn unreadable_scripts() {
        let f = fixture();
        let e = f.err(&["nope.sh"]);
        assert!(
            e.to_string()
                .starts_with("sbatch: error: Unable to open file nope.sh: "),
            "{e}"
        );
        fs::write(f.dir.path().join("bin.sh"), b"#!/bin/sh\n\xff\xfe\n").unwrap();
        assert_eq!(
            f.err(&["bin.sh"]).to_string(),
            "sbatch: error: Batch script bin.sh is not valid UTF-8 text"
        );
    }

    #[test]
    fn bare_script_name_is_found_on_path() {
        let tools = tempfile::tempdir().unwrap();
        fs::write(tools.path().join("tool.sh"), SCRIPT).unwrap();
        let path = format!("/nonexistent:{}", tools.path().display());
        let f = fixture().env("PATH", &path);
        let s = f.ok(&["tool.sh"]).submit;
        assert_eq!(s.command, tools.path().join("tool.sh").to_string_lossy());
        assert_eq!(s.name, "tool.sh");
        // A name with a slash is only looked up from the current directory.
        assert!(matches!(
            f.err(&["./tool.sh"]),
            SbatchError::ScriptUnreadable { .. }
        ));
    }

    #[test]
    fn script_file_defaults() {
        let f = fixture();
        f.write("sub/job.sh", SCRIPT);
        let sub = f.ok(&["-J", "a", "./sub/job.sh", "x", "y"]);
        let s = sub.submit;
        assert_eq!(s.command, format!("{}/sub/job.sh", f.cwd()));
        assert_eq!(s.script, SCRIPT);
        assert_eq!(s.workdir, f.cwd());
        assert_eq!(s.submit_dir, f.cwd());
        assert_eq!(s.submit_host, "login1");
        assert_eq!((s.user.as_str(), s.uid, s.gid), ("alice", 1000, 100));
        assert_eq!(s.submit_line, "sbatch -J a ./sub/job.sh x y");
        assert_eq!(s.script_args, argv(&["x", "y"]));
        assert_eq!((s.stdout, s.stderr, s.stdin), (None, None, None));
        assert!(!sub.parsable && !sub.quiet && sub.warnings.is_empty());
        // The job name defaults to the script's file name.
        assert_eq!(f.ok(&["sub/job.sh"]).submit.name, "job.sh");
    }

    #[test]
    fn working_directory() {
        let f = fixture();
        f.write("job.sh", SCRIPT);
        assert_eq!(
            f.ok(&["-D", "/scratch/x", "job.sh"]).submit.workdir,
            "/scratch/x"
        );
        assert_eq!(
            f.ok(&["--chdir=./a/./b/", "job.sh"]).submit.workdir,
            format!("{}/a/b", f.cwd())
        );
    }

    #[test]
    fn stream_none_means_dev_null() {
        let f = fixture();
        f.write("job.sh", SCRIPT);
        let s = f
            .ok(&["-o", "none", "-e", "NONE", "-i", "None", "job.sh"])
            .submit;
        assert_eq!(s.stdout.as_deref(), Some("/dev/null"));
        assert_eq!(s.stderr.as_deref(), Some("/dev/null"));
        assert_eq!(s.stdin.as_deref(), Some("/dev/null"));
    }

    #[test]
    fn wrap_builds_a_script() {
        let f = fixture();
        let s = f.ok(&["--wrap=echo \"$HOME\" && true"]).submit;
        assert_eq!(
            s.script,
            "#!/bin/sh\n# Written by sbatch --wrap.\n\necho \"$HOME\" && true\n"
        );
        assert_eq!(s.name, "wrap");
        assert_eq!(s.command, "(null)");
        assert!(s.script_args.is_empty());
        assert_eq!(f.ok(&["-J", "w", "--wrap", "true"]).submit.name, "w");
        let e = f.err(&["--wrap", "true", "job.sh"]);
        assert_eq!(
            e.to_string(),
            "sbatch: error: Script arguments not permitted with --wrap option"
        );
    }

    #[test]
    fn stdin_script() {
        let f = fixture();
        let e = f.err(&["--parsable"]);
        assert_eq!(e, SbatchError::NoScript);
        assert_eq!(e.exit_code(), 1);
        let text = "#!/bin/bash\n#SBATCH -J from-stdin\n#SBATCH --parsable\necho hi\n";
        let sub = parse_submission(&argv(&["-N", "1"]), Some(text.to_string()), &f.ctx).unwrap();
        assert_eq!(sub.submit.name, "from-stdin");
        assert_eq!(sub.submit.command, "(null)");
        assert_eq!(sub.submit.script, text);
        assert!(sub.parsable);
        let plain = parse_submission(&[], Some(SCRIPT.to_string()), &f.ctx).unwrap();
        assert_eq!(plain.submit.name, "sbatch");
        // A named file wins over standard input.
        f.write("job.sh", SCRIPT);
        let sub = parse_submission(&argv(&["job.sh"]), Some(text.to_string()), &f.ctx).unwrap();
        assert_eq!(sub.submit.name, "job.sh");
        // Standard input gets the same checks as a file.
        let e = parse_submission(&[], Some("echo\n".to_string()), &f.ctx).unwrap_err();
        assert_eq!(e, SbatchError::MissingShebang);
    }

    // ---- directives ---------------------------------------------------

    #[test]
    fn simple_slurm_padded_directives() {
        let f = fixture();
        let text = "#!/bin/sh\n\n#SBATCH --array               0-2\n\
                    #SBATCH --job-name            n\n\
                    #SBATCH --output              o_%j.out\n\
                    #SBATCH --parsable   \n\necho hi\n";
        let sub = f.script(text, &[]).unwrap();
        assert!(sub.parsable);
        assert_eq!(sub.submit.name, "n");
        assert_eq!(sub.submit.stdout.as_deref(), Some("o_%j.out"));
        assert!(sub.warnings.is_empty(), "{:?}", sub.warnings);
        let array = sub.submit.array.unwrap();
        assert_eq!((array.indices, array.throttle), (vec![0, 1, 2], None));
    }

    #[test]
    fn arrays_and_dependencies() {
        let f = fixture();
        f.write("job.sh", SCRIPT);
        let sub = f.ok(&["-a", "1-7:2%2", "-d", "afterok:5", "job.sh"]);
        let array = sub.submit.array.unwrap();
        assert_eq!(array.indices, vec![1, 3, 5, 7]);
        assert_eq!((array.step, array.throttle), (2, Some(2)));
        assert_eq!(sub.submit.dependency.as_deref(), Some("afterok:5"));
        let sub = f.ok(&["--kill-on-invalid-dep=yes", "job.sh"]);
        assert_eq!(sub.submit.kill_on_invalid_dep, Some(true));
        let sig = |v: &str| parse_warn_signal(v);
        assert_eq!(
            sig("USR2@90"),
            Ok(SignalSpec {
                signal: 12,
                secs: 90,
                batch_only: false
            })
        );
        assert_eq!(
            sig("B:TERM").map(|s| (s.signal, s.secs, s.batch_only)),
            Ok((15, 60, true))
        );
        assert_eq!(sig("R:10@5").map(|s| (s.signal, s.secs)), Ok((10, 5)));
        for bad in ["USR9@1", "USR1@x", "X:USR1", "USR1@99999999", ""] {
            assert!(sig(bad).is_err(), "{bad}");
        }
        let e = parse_submission(&argv(&["--array=3-1", "job.sh"]), None, &f.ctx).unwrap_err();
        assert_eq!(
            e.to_string(),
            "sbatch: error: Invalid job array specification \"3-1\": \
             invalid --array range \"3-1\": the end is below the start"
        );
        let e = parse_submission(
            &argv(&["--kill-on-invalid-dep=maybe", "job.sh"]),
            None,
            &f.ctx,
        )
        .unwrap_err();
        assert!(matches!(e, SbatchError::InvalidChoice { .. }));
    }

    #[test]
    fn submitit_directives() {
        let f = fixture();
        let text = "#!/bin/bash\n\n# Parameters\n\
                    #SBATCH --error=/abs/logs/%j/%j_0_log.err\n\
                    #SBATCH --job-name=smoke\n\
                    #SBATCH --nodes=1\n\
                    #SBATCH --open-mode=append\n\
                    #SBATCH --output=/abs/logs/%j/%j_0_log.out\n\
                    #SBATCH --signal=USR2@90\n\
                    #SBATCH --time=2\n\
                    #SBATCH --wckey=submitit\n\n# command\nexport X=1\n";
        let sub = f.script(text, &[]).unwrap();
        let s = &sub.submit;
        assert_eq!(s.name, "smoke");
        assert_eq!((s.min_nodes, s.max_nodes), (Some(1), Some(1)));
        assert_eq!(s.time_limit_min, Some(2));
        assert_eq!(s.stderr.as_deref(), Some("/abs/logs/%j/%j_0_log.err"));
        assert_eq!(s.stdout.as_deref(), Some("/abs/logs/%j/%j_0_log.out"));
        assert!(s.open_append);
        assert_eq!(s.signal.map(|x| (x.signal, x.secs)), Some((12, 90)));
        assert_eq!(sub.warnings, vec![unsupported("wckey")]);
        assert!(!sub.parsable);
    }

    #[test]
    fn directive_quotes_and_comments() {
        let f = fixture();
        let name = |line: &str| {
            let text = format!("#!/bin/sh\n{line}\ntrue\n");
            f.script(&text, &[]).unwrap().submit.name
        };
        assert_eq!(name("#SBATCH --job-name='a b'"), "a b");
        assert_eq!(name("#SBATCH -J \"x y\""), "x y");
        assert_eq!(name("#SBATCH -J plain # trailing comment"), "plain");
        assert_eq!(name("#SBATCH -J cut#here"), "cut");
        assert_eq!(name("#SBATCH -J 'keep#this'"), "keep#this");
        assert_eq!(name("#SBATCH -J a\\#b"), "a#b");
        assert_eq!(name("#SBATCH -J \"say \\\"hi\\\"\""), "say \"hi\"");
        assert_eq!(name("#SBATCH\t-J\ttabs"), "tabs");
    }

    #[test]
    fn directive_scan_rules() {
        let f = fixture();
        let text = "#!/bin/sh\n\
                    #SBATCH -J first\n\
                    \n\
                    # a comment\n\
                    \x20   # an indented comment\n\
                    \x20#SBATCH -J indented-is-not-a-directive\n\
                    #sbatch -J lowercase-is-not-either\n\
                    #SBATCH -p part\n\
                    #SBATCH -J second\n\
                    echo start\n\
                    #SBATCH -J after-the-first-command\n";
        let s = f.script(text, &[]).unwrap().submit;
        // Later directives override earlier ones; the scan stops at `echo`.
        assert_eq!(s.name, "second");
        assert_eq!(s.partition.as_deref(), Some("part"));
    }

    #[test]
    fn legacy_slurm_directive() {
        let f = fixture();
        let sub = f
            .script("#!/bin/sh\n#SLURM -J legacy\n#SLURM -p p\n", &[])
            .unwrap();
        assert_eq!(sub.submit.name, "legacy");
        assert_eq!(
            sub.warnings,
            vec![
                "sbatch: error: Change from #SLURM to #SBATCH in your script and verify the \
                 options are valid in sbatch"
                    .to_string()
            ]
        );
    }

    #[test]
    fn directive_syntax_errors() {
        let f = fixture();
        assert_eq!(
            f.script("#!/bin/sh\n#SBATCH -J 'oops\n", &[])
                .unwrap_err()
                .to_string(),
            "sbatch: fatal: job.sh: line 2: Unmatched `'` in [#SBATCH -J 'oops]"
        );
        assert_eq!(
            f.script("#!/bin/sh\n\n#SBATCH -J \"oops\n", &[])
                .unwrap_err(),
            SbatchError::UnmatchedQuote {
                file: "job.sh".to_string(),
                line: 3,
                quote: '"',
                text: "#SBATCH -J \"oops".to_string()
            }
        );
        assert_eq!(
            f.script("#!/bin/sh\n#SBATCH -J foo\\\n", &[])
                .unwrap_err()
                .to_string(),
            "sbatch: fatal: job.sh: line 2: cannot split directive [#SBATCH -J foo\\]"
        );
        let e = parse_submission(&[], Some("#!/bin/sh\n#SBATCH -J 'x\n".to_string()), &f.ctx);
        assert!(matches!(
            e,
            Err(SbatchError::UnmatchedQuote { ref file, .. }) if file == "(stdin)"
        ));
    }

    #[test]
    fn directive_value_errors() {
        let f = fixture();
        assert_eq!(
            f.script("#!/bin/sh\n#SBATCH --nodes=x\n", &[]).unwrap_err(),
            SbatchError::InvalidNodeCount {
                value: "x".to_string()
            }
        );
        assert_eq!(
            f.script("#!/bin/sh\n#SBATCH --bogus\n", &[]).unwrap_err(),
            SbatchError::Syntax(GetoptError::Unrecognized {
                option: "bogus".to_string()
            })
        );
    }

    #[test]
    fn directive_stray_word_stops_option_parsing() {
        let f = fixture();
        let sub = f
            .script("#!/bin/sh\n#SBATCH -J a\n#SBATCH stray -N 3\n", &[])
            .unwrap();
        assert_eq!(sub.submit.name, "a");
        assert_eq!(sub.submit.min_nodes, None);
        assert_eq!(
            sub.warnings,
            vec![
                "sbatch: warning: #SBATCH directives from 'stray' on are ignored: 'stray' is \
                 not an option"
                    .to_string()
            ]
        );
    }

    #[test]
    fn directive_wrap_is_ignored() {
        let f = fixture();
        let sub = f
            .script("#!/bin/sh\n#SBATCH --wrap=hostname\n", &[])
            .unwrap();
        assert_eq!(sub.submit.script, "#!/bin/sh\n#SBATCH --wrap=hostname\n");
        assert_eq!(
            sub.warnings,
            vec!["sbatch: warning: --wrap in a batch script is ignored".to_string()]
        );
    }

    #[test]
    fn heterogeneous_jobs_are_refused() {
        let f = fixture();
        let e = f
            .script("#!/bin/sh\n#SBATCH -N1\n#SBATCH hetjob\n#SBATCH -N2\n", &[])
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "sbatch: error: heterogeneous jobs (#SBATCH hetjob) are not supported by canopy yet"
        );
        assert_eq!(
            f.err(&["-N1", ":", "-N2", "job.sh"]),
            SbatchError::HetJobUnsupported {
                marker: "':'".to_string()
            }
        );
    }

    // ---- precedence and environment -----------------------------------

    #[test]
    fn command_line_over_env_over_directives() {
        let f = fixture()
            .env("SBATCH_JOB_NAME", "from-env")
            .env("SBATCH_TIMELIMIT", "20")
            .env("SBATCH_PARTITION", "");
        let text = "#!/bin/sh\n#SBATCH -J from-script\n#SBATCH -p script-part\n\
                    #SBATCH -t 10\n#SBATCH -o script.out\n";
        let s = f.script(text, &["-J", "from-cli"]).unwrap().submit;
        assert_eq!(s.name, "from-cli");
        assert_eq!(s.time_limit_min, Some(20));
        // An empty variable counts as unset.
        assert_eq!(s.partition.as_deref(), Some("script-part"));
        assert_eq!(s.stdout.as_deref(), Some("script.out"));
        let s = f.script(text, &[]).unwrap().submit;
        assert_eq!(s.name, "from-env");
        let s = f.script(text, &["-t", "5"]).unwrap().submit;
        assert_eq!(s.time_limit_min, Some(5));
    }

    #[test]
    fn env_options_warn_and_validate() {
        let f = fixture()
            .env("SBATCH_ACCOUNT", "proj")
            .env("SBATCH_NO_REQUEUE", "1")
            .env("SBATCH_GRES", "gpu:1");
        f.write("job.sh", SCRIPT);
        let sub = f.ok(&["job.sh"]);
        assert_eq!(
            sub.warnings,
            vec![format!("{} (set by SBATCH_GRES)", unsupported("gres"))]
        );
        assert_eq!(sub.submit.account.as_deref(), Some("proj"));
        assert!(sub.submit.no_requeue);
        let bad = fixture().env("SBATCH_TIMELIMIT", "later");
        bad.write("job.sh", SCRIPT);
        assert!(matches!(
            bad.err(&["job.sh"]),
            SbatchError::InvalidTime { .. }
        ));
    }

    #[test]
    fn every_env_variable_names_a_known_option() {
        for (var, long) in ENV_OPTIONS {
            let spec = find_long(long).unwrap();
            assert_eq!(spec.long, *long, "{var} names a prefix, not an option");
        }
    }

    #[test]
    fn option_table_has_no_duplicates() {
        for (i, a) in OPTIONS.iter().enumerate() {
            for b in &OPTIONS[i + 1..] {
                assert_ne!(a.long, b.long);
                assert!(a.short.is_none() || a.short != b.short, "{}", a.long);
            }
        }
    }

    // ---- --export -----------------------------------------------------

    fn caller_env() -> Vec<(String, String)> {
        vars(&[
            ("PATH", "/usr/bin"),
            ("HOME", "/home/alice"),
            ("FOO", "foo"),
            ("SLURM_CONF", "/etc/slurm.conf"),
        ])
    }

    #[test]
    fn export_all_is_the_default() {
        assert_eq!(export_env(None, &caller_env()), caller_env());
        assert_eq!(export_env(Some("ALL"), &caller_env()), caller_env());
        let f = fixture();
        f.write("job.sh", SCRIPT);
        assert_eq!(f.ok(&["job.sh"]).submit.env, f.ctx.env);
    }

    #[test]
    fn export_none_keeps_only_slurm_variables() {
        let only_slurm = vars(&[("SLURM_CONF", "/etc/slurm.conf")]);
        assert_eq!(export_env(Some("NONE"), &caller_env()), only_slurm);
        assert_eq!(export_env(Some("nil"), &caller_env()), only_slurm);
        assert_eq!(export_env(Some(""), &caller_env()), only_slurm);
    }

    #[test]
    fn export_lists() {
        assert_eq!(
            export_env(Some("FOO,BAR=2,MISSING"), &caller_env()),
            vars(&[
                ("SLURM_CONF", "/etc/slurm.conf"),
                ("FOO", "foo"),
                ("BAR", "2")
            ])
        );
        assert_eq!(
            export_env(Some("ALL,HOME=/tmp/h,NEW=1"), &caller_env()),
            vars(&[
                ("PATH", "/usr/bin"),
                ("HOME", "/tmp/h"),
                ("FOO", "foo"),
                ("SLURM_CONF", "/etc/slurm.conf"),
                ("NEW", "1"),
            ])
        );
        // A comma inside a value stays in it.
        assert_eq!(
            export_env(Some("NONE,A=x,y z,B=1"), &[]),
            vars(&[("A", "x,y z"), ("B", "1")])
        );
    }

    #[test]
    fn export_from_option_and_env() {
        let f = fixture();
        f.write("job.sh", SCRIPT);
        let s = f.ok(&["--export=NONE", "job.sh"]).submit;
        assert_eq!(s.env, vars(&[("SLURM_CONF", "/etc/slurm.conf")]));
        let f = fixture().env("SBATCH_EXPORT", "HOME");
        f.write("job.sh", SCRIPT);
        let s = f.ok(&["job.sh"]).submit;
        assert_eq!(
            s.env,
            vars(&[("SLURM_CONF", "/etc/slurm.conf"), ("HOME", "/home/alice")])
        );
    }
}
