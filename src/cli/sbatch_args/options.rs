//! sbatch's option table and the getopt-driven parsing of one source: which long and
//! short names exist and what each takes ([`Action`]), splitting a word list into options
//! and the script's place, and recording each option in a [`Layer`] with its value checked.
//!
//! Does not: know where the words came from beyond the [`Source`] tag (the command line,
//! `SBATCH_*` variables and `#SBATCH` directives are gathered in `env` and `script`), or
//! merge sources and fill in defaults (the parent module does).

use super::*;

/// What an option does to a [`Layer`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Action {
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
    Qos,
    Comment,
    Constraint,
    Exclusive,
    /// `-s`/`--oversubscribe`.
    OverSubscribe,
    Requeue,
    NoRequeue,
    Nice,
    Priority,
    MailType,
    MailUser,
    Reservation,
    Licenses,
    /// `--uid`/`--gid`: root's submission on behalf of a user.
    Uid,
    Gid,
    /// `--gres`, `--gpus*`, `-B`, `--hint` and the rest of `resources`.
    Res,
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

pub(super) type OptSpec = getopt::OptSpec<Action>;

/// Every sbatch option canopy recognises (Slurm's set, slurm.md §6.1).
pub(super) static OPTIONS: &[OptSpec] = &[
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
    spec("cores-per-socket", None, Required, A::Res),
    spec("cpu-freq", None, Required, A::Unsupported),
    spec("cpus-per-gpu", None, Required, A::Res),
    spec("deadline", None, Required, A::Unsupported),
    spec("delay-boot", None, Required, A::Unsupported),
    spec("distribution", Some('m'), Required, A::Res),
    spec("exclude", Some('x'), Required, A::Exclude),
    spec("exclusive", None, Optional, A::Exclusive),
    spec("export-file", None, Required, A::Unsupported),
    spec("extra", None, Required, A::Unsupported),
    spec("extra-node-info", Some('B'), Required, A::Res),
    spec("get-user-env", None, Optional, A::Unsupported),
    spec("gid", None, Required, A::Gid),
    spec("gpu-bind", None, Required, A::Res),
    spec("gpu-freq", None, Required, A::Unsupported),
    spec("gpus", Some('G'), Required, A::Res),
    spec("gpus-per-node", None, Required, A::Res),
    spec("gpus-per-socket", None, Required, A::Res),
    spec("gpus-per-task", None, Required, A::Res),
    spec("gres", None, Required, A::Res),
    spec("gres-flags", None, Required, A::Res),
    spec("hint", None, Required, A::Res),
    spec("ignore-pbs", None, Flag, A::Unsupported),
    spec("jobid", None, Required, A::Unsupported),
    spec("licenses", Some('L'), Required, A::Licenses),
    spec("mail-type", None, Required, A::MailType),
    spec("mail-user", None, Required, A::MailUser),
    spec("mcs-label", None, Required, A::Unsupported),
    spec("mem-bind", None, Required, A::Unsupported),
    spec("mem-per-gpu", None, Required, A::Res),
    spec("mincpus", None, Required, A::Unsupported),
    spec("network", None, Required, A::Unsupported),
    spec("nice", None, Optional, A::Nice),
    spec("no-kill", Some('k'), Optional, A::Unsupported),
    spec("no-requeue", None, Flag, A::NoRequeue),
    spec("nodefile", Some('F'), Required, A::Unsupported),
    spec("nodelist", Some('w'), Required, A::Nodelist),
    spec("ntasks-per-core", None, Required, A::Res),
    spec("ntasks-per-gpu", None, Required, A::Unsupported),
    spec("ntasks-per-socket", None, Required, A::Res),
    spec("oom-kill-step", None, Optional, A::Unsupported),
    spec("overcommit", Some('O'), Flag, A::Unsupported),
    spec("oversubscribe", Some('s'), Flag, A::OverSubscribe),
    spec("power", None, Required, A::Unsupported),
    spec("prefer", None, Required, A::Unsupported),
    spec("priority", None, Required, A::Priority),
    spec("profile", None, Required, A::Unsupported),
    spec("propagate", None, Optional, A::Unsupported),
    spec("qos", Some('q'), Required, A::Qos),
    spec("reboot", None, Flag, A::Unsupported),
    spec("requeue", None, Flag, A::Requeue),
    spec("reservation", None, Required, A::Reservation),
    spec("segment", None, Required, A::Unsupported),
    spec("sockets-per-node", None, Required, A::Res),
    spec("spread-job", None, Flag, A::Unsupported),
    spec("stepmgr", None, Flag, A::Unsupported),
    spec("switches", None, Required, A::Unsupported),
    spec("test-only", None, Flag, A::TestOnly),
    spec("thread-spec", None, Required, A::Unsupported),
    spec("threads-per-core", None, Required, A::Res),
    spec("time-min", None, Required, A::Unsupported),
    spec("tmp", None, Required, A::Unsupported),
    spec("tres-bind", None, Required, A::Unsupported),
    spec("tres-per-task", None, Required, A::Unsupported),
    spec("uid", None, Required, A::Uid),
    spec("use-min-nodes", None, Flag, A::Unsupported),
    spec("verbose", Some('v'), Flag, A::Verbose),
    spec("wait", Some('W'), Flag, A::Wait),
    spec("wait-all-nodes", None, Required, A::Unsupported),
    spec("wckey", None, Required, A::Unsupported),
];

/// Where an option came from (for warnings, and because help/version only
/// mean something on the command line).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Source {
    CommandLine,
    Script,
    Env(&'static str),
}

/// One option occurrence, as getopt would report it.
pub(super) type Given = getopt::Given<Action>;

/// Parse the parsable part of `args`: the options, and the index where the
/// script path (first non-option, or the word after `--`) begins.
pub(super) fn split_options(args: &[String]) -> Result<(Vec<Given>, usize), SbatchError> {
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
pub(super) fn find_long(name: &str) -> Result<&'static OptSpec, SbatchError> {
    Ok(getopt::find_long(OPTIONS, name, Ambiguity::Error)?)
}

/// Record one option in `layer`, validating its value.
pub(super) fn apply(
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
        A::Qos => layer.qos = Some(v.to_string()),
        A::Comment => layer.comment = Some(v.to_string()),
        A::MailType => {
            layer.mail_type =
                Some(crate::mail::parse_mail_type(v).ok_or(SbatchError::InvalidMailType)?)
        }
        A::MailUser => layer.mail_user = Some(v.to_string()),
        A::Uid => layer.uid = Some(v.to_string()),
        A::Gid => layer.gid = Some(v.to_string()),
        A::Reservation => layer.reservation = Some(v.to_string()),
        A::Clusters => layer.clusters = Some(v.to_string()),
        A::Verbose => layer.verbose = true,
        A::Licenses => layer.licenses = Some(v.to_string()),
        A::Res => {
            // Help is printed wherever it is asked for, as in Slurm.
            if let Some(help) =
                apply_res(&mut layer.res, spec.long, v).map_err(SbatchError::Resource)?
            {
                return Err(SbatchError::ResourceHelp(help));
            }
        }
        A::Constraint => layer.constraint = Some(v.to_string()),
        A::Exclusive => {
            layer.exclusive = Some(parse_exclusive(value)?);
            layer.oversubscribe = Some(false);
        }
        A::OverSubscribe => {
            layer.exclusive = None;
            layer.oversubscribe = Some(true);
        }
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
pub(super) fn informational(action: Action, source: Source) -> Result<(), SbatchError> {
    match (source, action) {
        (Source::CommandLine, A::Help) => Err(SbatchError::HelpRequested),
        (Source::CommandLine, A::Usage) => Err(SbatchError::UsageRequested),
        (Source::CommandLine, A::Version) => Err(SbatchError::VersionRequested),
        _ => Ok(()),
    }
}

pub(super) fn warn_unsupported(long: &str, source: Source, warnings: &mut Vec<String>) {
    let origin = match source {
        Source::Env(var) => format!(" (set by {var})"),
        Source::CommandLine | Source::Script => String::new(),
    };
    push_once(
        warnings,
        format!("{}{origin}", crate::cli::unsupported_option("sbatch", long)),
    );
}
