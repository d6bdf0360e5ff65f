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
//!
//! This module owns the result types, the merge of the three sources and the
//! [`JobSubmit`] built from them; the option table is in `options`, the value
//! grammars in `values`, the script and its directives in `script`, and the
//! `SBATCH_*` variables and `--export` in `env`.

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

mod env;
mod options;
mod resources;
mod script;
mod values;

use env::*;
use options::*;
use script::*;
use values::*;

pub(crate) use env::export_env;
pub(crate) use resources::{
    apply_res, gres_help, option_env, request_names, resolve as resolve_resources, settle_memory,
    MemKinds, ResHelp, ResLayer, HINT_HELP, RES_OPTIONS, SALLOC_ENV, SRUN_ENV,
};
pub(crate) use values::{check_gres, parse_nice, parse_priority, parse_warn_signal};

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
    /// be in slurm.conf's `GresTypes` (checked once the config is read). The
    /// request itself is `submit.resources`.
    pub gres: Vec<String>,
    /// `-M`: the clusters named (this one, or `all`).
    pub clusters: Option<String>,
    /// Complete `sbatch: ...` lines for stderr.
    pub warnings: Vec<String>,
    /// `--uid` and `--gid` as given (root only; the caller resolves the
    /// names, since a passwd lookup is I/O).
    pub run_as: (Option<String>, Option<String>),
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
    #[error(
        "sbatch: fatal: SLURM_MEM_PER_CPU, SLURM_MEM_PER_GPU, and SLURM_MEM_PER_NODE are \
         mutually exclusive."
    )]
    EnvMemoryConflict,
    /// A resource option's value refused (`--gres`, `--gpus*`, `-B`,
    /// `--hint`...): the text after `sbatch: `.
    #[error("sbatch: {0}")]
    Resource(String),
    /// `--gres=help` / `--hint=help`: not a failure; print to stdout and
    /// exit 0 (`--gres=help` lists GresTypes, which the caller knows).
    #[error("{}", match .0 { ResHelp::Hint => HINT_HELP.to_string(), ResHelp::Gres => gres_help(&[]) })]
    ResourceHelp(ResHelp),
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
    #[error("sbatch: error: --{option} only permitted by root user")]
    RootOnly { option: &'static str },
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
            | SbatchError::VersionRequested
            | SbatchError::ResourceHelp(_) => 0,
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
      --mem-per-gpu=size      memory per allocated GPU
      --gres=list             generic resources per node (name[[:type]:count],...;
                              --gres=help lists them)
  -G, --gpus=[type:]n         GPUs for the whole job
      --gpus-per-node=[type:]n, --gpus-per-task=[type:]n, --gpus-per-socket=[type:]n
      --cpus-per-gpu=n        CPUs per allocated GPU
      --gres-flags=enforce-binding|disable-binding
  -B, --extra-node-info=S[:C[:T]]  sockets, cores, threads per node (* = any)
      --sockets-per-node=n, --cores-per-socket=n, --threads-per-core=n
      --ntasks-per-socket=n, --ntasks-per-core=n
      --hint=compute_bound|memory_bound|[no]multithread  (--hint=help)
  -m, --distribution=spec     task distribution (for the job's steps)
      --gpu-bind=spec         how tasks are bound to GPUs
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
  -q, --qos=name              quality of service to run under
      --comment=text          a comment kept with the job
  -C, --constraint=features   nodes with these features (a&b, a|b, [a|b])
      --exclusive[=user|mcs]  whole nodes, shared with no other job
  -s, --oversubscribe         share CPUs with other jobs (OverSubscribe=YES)
      --requeue, --no-requeue whether the job may be requeued
      --nice[=adj]            lower the job's priority by adj (default 100)
      --priority=n|TOP        fixed priority (operators only)
      --mail-type=list        mail on BEGIN, END, FAIL, ALL (MailProg)
      --mail-user=user        who gets it (default: you)
  -Q, --quiet                 print nothing on success
  -h, --help / -u, --usage / -V, --version

Other Slurm sbatch options are accepted with a warning and ignored.";

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
    qos: Option<String>,
    comment: Option<String>,
    constraint: Option<String>,
    exclusive: Option<Exclusive>,
    /// `-s` (true) or `--exclusive` (false): the later of the two wins,
    /// as both set Slurm's one `shared` field.
    oversubscribe: Option<bool>,
    /// `--requeue` (true) or `--no-requeue` (false).
    requeue: Option<bool>,
    nice: Option<i32>,
    priority: Option<u32>,
    mail_type: Option<u32>,
    mail_user: Option<String>,
    reservation: Option<String>,
    licenses: Option<String>,
    /// The resource-shape options (`--gres`, `--gpus*`, `-B`, `--hint`...).
    res: ResLayer,
    /// `-v`: show the notes Slurm shows only when verbose.
    verbose: bool,
    clusters: Option<String>,
    uid: Option<String>,
    gid: Option<String>,
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
            qos: self.qos.or(lower.qos),
            comment: self.comment.or(lower.comment),
            constraint: self.constraint.or(lower.constraint),
            // `-s` here overrides a lower layer's `--exclusive`.
            exclusive: if self.oversubscribe == Some(true) {
                None
            } else {
                self.exclusive.or(lower.exclusive)
            },
            oversubscribe: self.oversubscribe.or(lower.oversubscribe),
            requeue: self.requeue.or(lower.requeue),
            nice: self.nice.or(lower.nice),
            priority: self.priority.or(lower.priority),
            mail_type: self.mail_type.or(lower.mail_type),
            mail_user: self.mail_user.or(lower.mail_user),
            reservation: self.reservation.or(lower.reservation),
            licenses: self.licenses.or(lower.licenses),
            res: self.res.over(lower.res),
            verbose: self.verbose || lower.verbose,
            clusters: self.clusters.or(lower.clusters),
            uid: self.uid.or(lower.uid),
            gid: self.gid.or(lower.gid),
        }
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
    let mut dir = script_layer(&script, &mut warnings)?;
    let mut env = env_layer(ctx, &mut warnings)?;
    let (mem, mem_per_cpu, mem_from_cli) = resolve_memory(&cmd, &env, &dir)?;
    let verbose = cmd.verbose || env.verbose || dir.verbose;
    let (resources, note) = resources::resolve(
        std::mem::take(&mut cmd.res),
        std::mem::take(&mut env.res),
        std::mem::take(&mut dir.res),
        mem_from_cli,
        "sbatch",
    );
    if let Some(note) = note.filter(|_| verbose) {
        warnings.push(note);
    }
    let opts = cmd.over(env).over(dir);
    let (parsable, quiet, wait) = (opts.parsable, opts.quiet, opts.wait);
    let gres = request_names(&resources);
    let clusters = opts.clusters.clone();
    // Only root may submit as someone else, as in Slurm (which checks the
    // real uid the same way; the controller checks the credential again).
    for (option, given) in [("uid", &opts.uid), ("gid", &opts.gid)] {
        if given.is_some() && ctx.uid != 0 {
            return Err(SbatchError::RootOnly { option });
        }
    }
    let run_as = (opts.uid.clone(), opts.gid.clone());
    Ok(Submission {
        submit: build_submit(opts, (mem, mem_per_cpu), resources, script, args, ctx),
        parsable,
        quiet,
        wait,
        gres,
        clusters,
        warnings,
        run_as,
    })
}

/// Fill in the defaults and assemble the request.
fn build_submit(
    opts: Layer,
    (mem, mem_per_cpu): (Option<u64>, Option<u64>),
    resources: crate::model::tres::ResourceRequest,
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
        env: {
            // What was asked is echoed to the job as Slurm's sbatch does
            // (SLURM_* pass any --export).
            let mut env = export_env(opts.export.as_deref(), &ctx.env);
            for (k, v) in option_env(&resources, true) {
                set_var(&mut env, &k, &v);
            }
            env
        },
        hold: opts.hold,
        user: ctx.user.clone(),
        uid: ctx.uid,
        gid: ctx.gid,
        group: String::new(),
        groups: Vec::new(),
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
        qos: opts.qos,
        comment: opts.comment,
        constraint: opts.constraint,
        exclusive: opts.exclusive,
        oversubscribe: opts.oversubscribe == Some(true),
        no_requeue: opts.requeue == Some(false),
        nice: opts.nice.unwrap_or(0),
        priority: opts.priority,
        mail_type: opts.mail_type.unwrap_or(0),
        mail_user: opts.mail_user,
        reservation: opts.reservation,
        licenses: opts.licenses,
        resources,
        script: script.text,
    }
}

#[cfg(test)]
mod tests;
