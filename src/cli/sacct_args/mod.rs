//! What `sacct` was asked to do: its command line and `SACCT_FORMAT`, turned into an
//! [`AcctQuery`] for the controller plus everything the formatter needs ([`SacctArgs`]),
//! following Slurm's sacct (slurm.md §12, clients.md §8.4).
//!
//! Owns: getopt-style option syntax (`--k=v`, `--k v`, `-kv`, `-k v`, bundled flags,
//! unique long prefixes, options after positionals, `--`), the `-j`/`-u`/`-s` list
//! grammars, Slurm's date grammar for `-S`/`-E` (`YYYY-MM-DD[THH:MM[:SS]]`, `MM/DD[/YY]`,
//! `HH:MM[:SS][AM|PM]`, `now[{+|-}N<unit>]`, `today`, `midnight`, `noon`, `teatime`, ...)
//! in local time, the default time window, the all-users rules, building the field list
//! (`-o` accumulates, then `-b`/`-l`, else `SACCT_FORMAT`, else the default) and the
//! client-side filters the query cannot carry (`-A`, `-N`, `-j N.step`).
//!
//! Does not: talk to the controller, print anything, or decide the caller's own uid (when
//! `all_users` is false and `query.uids` is empty, the CLI restricts to the caller unless it
//! is root, as Slurm does). Errors come back fully formatted (`sacct: error: ...`), ready
//! for stderr; `-h`, `--usage` and `-V` come back as errors with exit code 0.
//!
//! Options Slurm has that canopy cannot honour yet (filters on data it does not record,
//! `--json`, job scripts) are refused with a message naming the option, rather than
//! silently returning unfiltered rows. Options that change nothing for canopy (`-T`,
//! `-M`, `-q`, `--array`, `-L`, `-v`, ...) are accepted and ignored.

use std::ops::RangeInclusive;

use chrono::{Datelike, Duration, Local, NaiveDate, NaiveDateTime, TimeZone, Timelike};
use thiserror::Error;

use super::format::sacct::{
    SacctFieldError, SacctFormat, SacctRequest, BRIEF_FIELDS, DEFAULT_FIELDS, LONG_FIELDS,
};
use super::format::time::fmt_timestamp;
use crate::config::hostlist;
use crate::wire::messages::AcctQuery;
use crate::wire::types::{AcctJob, JobState, StepKind, UnixTime};

use super::getopt::{self, spec, Ambiguity, ArgKind, GetoptError, Word};
use Action as A;
use ArgKind::{Flag, Optional, Required};

mod dates;
mod lists;

use dates::*;
pub(crate) use dates::{parse_slurm_time, Tense};
use lists::*;

/// A parsed `sacct` command line.
#[derive(Debug, Clone, PartialEq)]
pub struct SacctArgs {
    /// What to ask the controller for: ids (`-j`, steps stripped), users (`-u`), names
    /// (`--name`), partitions (`-r`), states (`-s`) and the time window (`-S`/`-E` or
    /// Slurm's defaults; `start: None` = since the epoch).
    pub query: AcctQuery,
    /// `-a`/`--allusers`/`-u -1`, or implied by `-j`/`-N` without `-u`.
    pub all_users: bool,
    /// The columns: `-o`/`--format` (accumulating), `-b`, `-l`, `SACCT_FORMAT` or the default.
    pub format: SacctFormat,
    /// `-X`: job rows only.
    pub allocations: bool,
    /// `--array`: one row per pending array task instead of one per array.
    pub expand_arrays: bool,
    /// False with `-n`/`--noheader`.
    pub header: bool,
    /// `Some` in parsable mode (`-p`/`-P`): `--delimiter` or `|`. Slurm ignores
    /// `--delimiter` without `-p`/`-P`, and so does this.
    pub delimiter: Option<String>,
    /// `-p`: the delimiter also follows the last field.
    pub trailing_delimiter: bool,
    /// `-e`/`--helpformat`: print `format::sacct::help_format()` and exit 0.
    pub help_format: bool,
    /// `--units=K|M|G|T|P` (upper case): print every size in that unit.
    pub units: Option<char>,
    /// `--noconvert`: print sizes in the unit they are stored in (`--units` wins).
    pub noconvert: bool,
    /// `-j` entries as given, steps included (`N.batch` selects only that step row).
    pub selectors: Vec<StepSelector>,
    /// `-A`/`--accounts`: only jobs charged to these accounts (empty = any).
    pub accounts: Vec<String>,
    /// `-N`/`--nodelist`, expanded: only jobs that ran on one of these nodes (empty = any).
    pub nodes: Vec<String>,
}

/// One `-j` entry: a job (or array task), and optionally one of its steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepSelector {
    /// A job id, or an array id (every task of the array).
    pub job_id: u32,
    /// `N_T`: only task T of array N.
    pub task: Option<u32>,
    /// `None` selects the whole job (its row and all its steps).
    pub step: Option<StepKind>,
}

impl StepSelector {
    fn names(&self, job: &AcctJob) -> bool {
        super::names_job(self.job_id, self.task, job.job_id, job.array)
    }
}

impl SacctArgs {
    /// Whether `job` belongs in the output: the filters the controller query cannot
    /// express (`-A`, `-N`), and the `-j` ids again, so extra records never leak through.
    pub fn selects(&self, job: &AcctJob) -> bool {
        let id_ok = self.selectors.is_empty() || self.selectors.iter().any(|s| s.names(job));
        let account_ok = self.accounts.is_empty()
            || self
                .accounts
                .iter()
                .any(|a| a.eq_ignore_ascii_case(&job.account));
        id_ok && account_ok && (self.nodes.is_empty() || self.ran_on_selected_node(job))
    }

    fn ran_on_selected_node(&self, job: &AcctJob) -> bool {
        hostlist::expand(&job.nodes)
            .map(|names| names.iter().any(|n| self.nodes.contains(n)))
            .unwrap_or(false)
    }

    /// Whether the job's own row is printed: yes unless `-j` named only steps of it
    /// (`sacct -j 7.batch` prints just the `7.batch` row).
    pub fn shows_job_row(&self, job: &AcctJob) -> bool {
        let mut mine = self.selectors.iter().filter(|s| s.names(job)).peekable();
        mine.peek().is_none() || mine.any(|s| s.step.is_none())
    }

    /// Whether a step row is printed (before `-X`, which hides them all).
    pub fn shows_step(&self, job: &AcctJob, step: StepKind) -> bool {
        self.shows_job_row(job)
            || self
                .selectors
                .iter()
                .any(|s| s.names(job) && s.step == Some(step))
    }
}

/// The renderer reads the command line through this trait (it cannot name `SacctArgs`
/// without a module cycle); every answer is a field or method above.
impl SacctRequest for SacctArgs {
    fn format(&self) -> &SacctFormat {
        &self.format
    }
    fn header(&self) -> bool {
        self.header
    }
    fn delimiter(&self) -> Option<&str> {
        self.delimiter.as_deref()
    }
    fn trailing_delimiter(&self) -> bool {
        self.trailing_delimiter
    }
    fn units(&self) -> Option<char> {
        self.units
    }
    fn noconvert(&self) -> bool {
        self.noconvert
    }
    fn allocations(&self) -> bool {
        self.allocations
    }
    fn expand_arrays(&self) -> bool {
        self.expand_arrays
    }
    fn selects(&self, job: &AcctJob) -> bool {
        SacctArgs::selects(self, job)
    }
    fn shows_job_row(&self, job: &AcctJob) -> bool {
        SacctArgs::shows_job_row(self, job)
    }
    fn shows_step(&self, job: &AcctJob, step: StepKind) -> bool {
        SacctArgs::shows_step(self, job, step)
    }
}

/// Why no [`SacctArgs`] came out. `Display` is the complete text for stderr (Slurm's
/// wording where Slurm has one); [`SacctArgsError::exit_code`] is the status to exit with.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SacctArgsError {
    /// A getopt syntax problem (unknown, ambiguous or incomplete option).
    #[error("{}", .0.message("sacct"))]
    Syntax(#[from] GetoptError),
    #[error("{}", unknown_arguments_text(.args))]
    UnknownArguments { args: Vec<String> },
    /// Slurm prints this one bare, without the `sacct:` prefix; `pos` is where its parser
    /// gave up (the positions in the tests match Slurm 22.05's).
    #[error("Invalid time specification (pos={pos}): {text}")]
    InvalidTime { text: String, pos: usize },
    #[error("sacct: error: Start time ({start}) requested is after end time ({end}).")]
    StartAfterEnd { start: String, end: String },
    #[error("sacct: error: Invalid user id: {name}")]
    InvalidUser { name: String },
    #[error("sacct: fatal: unrecognized job state value '{state}'")]
    InvalidState { state: String },
    #[error("sacct: fatal: job state {state} is not supported / accounted")]
    UnaccountedState { state: String },
    #[error(
        "sacct: error: canopy never records jobs in state {states}, so this query \
         cannot match anything"
    )]
    StatesNeverRecorded { states: String },
    #[error("sacct: fatal: Bad job/step specified: {spec}")]
    BadJobStep { spec: String },
    #[error("sacct: fatal: Bad step specified: {spec}")]
    BadStep { spec: String },
    #[error("sacct: fatal: heterogeneous job ids are not supported by canopy: {spec}")]
    CompositeJobId { spec: String },
    #[error(
        "sacct: error: Invalid unit type '{given}'. Possible options are 'KMGTP'\n\
         sacct: fatal: Invalid unit type"
    )]
    InvalidUnits { given: String },
    #[error("sacct: error: Invalid --whole-hetjob value \"{value}\". Valid values: [yes|no].")]
    InvalidWholeHetjob { value: String },
    #[error("sacct: error: Invalid node list \"{list}\": {reason}")]
    InvalidNodeList { list: String, reason: String },
    #[error(
        "sacct: fatal: Options -o(--format) and -l(--long) are mutually exclusive. \
         Please remove one and retry."
    )]
    LongWithFormat,
    #[error("sacct: {}: {source}", source.level())]
    Field { source: SacctFieldError },
    #[error("sacct: error: option --{option} is not supported by canopy yet")]
    Unsupported { option: &'static str },
    /// `-h/--help`: not a failure; print to stdout and exit 0.
    #[error("{HELP_TEXT}")]
    HelpRequested,
    /// `--usage`: not a failure; print to stdout and exit 0.
    #[error("{USAGE_TEXT}")]
    UsageRequested,
    /// `-V/--version`: not a failure; print to stdout and exit 0.
    #[error("{VERSION_TEXT}")]
    VersionRequested,
}

impl SacctArgsError {
    /// Exit status for the `sacct` process: 0 for help/usage/version, else 1.
    pub fn exit_code(&self) -> i32 {
        match self {
            SacctArgsError::HelpRequested
            | SacctArgsError::UsageRequested
            | SacctArgsError::VersionRequested => 0,
            _ => 1,
        }
    }
}

/// Slurm reports leftover positional words one per line, each after a space.
fn unknown_arguments_text(args: &[String]) -> String {
    std::iter::once("sacct: error: Unknown arguments:".to_string())
        .chain(args.iter().map(|a| format!("sacct: error:  {a}")))
        .collect::<Vec<_>>()
        .join("\n")
}

const VERSION_TEXT: &str = concat!("canopy ", env!("CARGO_PKG_VERSION"));

const USAGE_TEXT: &str = "Usage: sacct [options]\n\tUse --help for help";

const HELP_TEXT: &str = "\
Usage: sacct [OPTIONS...]

Show accounting records of jobs and their steps.

  -a, --allusers            jobs of every user (default: your own)
  -A, --accounts=list       only jobs charged to these accounts
  -b, --brief               same as --format=jobid,state,exitcode
  -e, --helpformat          list the fields --format accepts
  -E, --endtime=time        jobs active before this time (default: now)
  -j, --jobs=job[.step],... only these jobs (or steps); repeatable
  -l, --long                many fields at once
  -n, --noheader            no header lines
  -N, --nodelist=hosts      only jobs that ran on these nodes
      --name=list           only jobs with these names
      --noconvert           print sizes in the unit they are stored in
  -o, --format=f[%w],...    fields to print (case-insensitive prefixes)
  -p, --parsable            '|' after every field
  -P, --parsable2           '|' between fields
      --delimiter=text      separator for -p/-P instead of '|'
  -r, --partition=list      only jobs in these partitions
  -s, --state=list          only jobs in these states (long or short names)
  -S, --starttime=time      jobs active after this time (default: midnight)
  -u, --user=list           only jobs of these users (names or uids)
      --units=K|M|G|T|P     print sizes in this unit
  -X, --allocations         job rows only, no steps
  -h, --help / --usage / -V, --version

Times: YYYY-MM-DD[THH:MM[:SS]], MM/DD[/YY], HH:MM[:SS][AM|PM],
now[{+|-}N[seconds|minutes|hours|days|weeks]], today, midnight, noon.";

/// What an option does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    AllUsers,
    Accounts,
    Allocations,
    Array,
    Brief,
    Delimiter,
    EndTime,
    Format,
    Help,
    HelpFormat,
    Jobs,
    Long,
    Name,
    NoConvert,
    NoHeader,
    NodeList,
    Parsable,
    Parsable2,
    Partition,
    StartTime,
    State,
    Units,
    Usage,
    User,
    Version,
    WholeHetjob,
    /// `-D`: every run of a requeued job.
    Duplicates,
    /// Changes nothing for canopy: accepted (value consumed) and ignored.
    Ignored,
    /// A Slurm option canopy cannot honour yet: refused by name.
    Unsupported,
}

type OptSpec = getopt::OptSpec<Action>;

/// Every option Slurm's sacct knows (its getopt tables), and what canopy does with it.
/// Long aliases carry their short letter even where getopt has no such short option of
/// their own (`--cluster`, `--uid`, ...): getopt treats long names with the same letter as
/// one option when a prefix matches several, and short lookups take the first entry.
static OPTIONS: &[OptSpec] = &[
    spec("allusers", Some('a'), Flag, A::AllUsers),
    spec("accounts", Some('A'), Required, A::Accounts),
    spec("allocations", Some('X'), Flag, A::Allocations),
    spec("", Some('t'), Flag, A::Allocations),
    spec("brief", Some('b'), Flag, A::Brief),
    spec("delimiter", None, Required, A::Delimiter),
    spec("helpformat", Some('e'), Flag, A::HelpFormat),
    spec("help-fields", Some('e'), Flag, A::HelpFormat),
    spec("endtime", Some('E'), Required, A::EndTime),
    spec("help", Some('h'), Flag, A::Help),
    spec("name", None, Required, A::Name),
    spec("jobs", Some('j'), Required, A::Jobs),
    spec("long", Some('l'), Flag, A::Long),
    spec("nodelist", Some('N'), Required, A::NodeList),
    spec("noconvert", None, Flag, A::NoConvert),
    spec("units", None, Required, A::Units),
    spec("noheader", Some('n'), Flag, A::NoHeader),
    spec("fields", Some('o'), Required, A::Format),
    spec("format", Some('o'), Required, A::Format),
    spec("parsable", Some('p'), Flag, A::Parsable),
    spec("parsable2", Some('P'), Flag, A::Parsable2),
    spec("partition", Some('r'), Required, A::Partition),
    spec("state", Some('s'), Required, A::State),
    spec("starttime", Some('S'), Required, A::StartTime),
    spec("uid", Some('u'), Required, A::User),
    spec("user", Some('u'), Required, A::User),
    spec("usage", Some('U'), Flag, A::Usage),
    spec("version", Some('V'), Flag, A::Version),
    spec("whole-hetjob", None, Optional, A::WholeHetjob),
    // Nothing to do in canopy: one cluster, no federation, no duplicate ids, no
    // truncation of times needed, no QOS enforcement.
    spec("allclusters", Some('L'), Flag, A::Ignored),
    spec("array", None, Flag, A::Array),
    spec("cluster", Some('M'), Required, A::Ignored),
    spec("clusters", Some('M'), Required, A::Ignored),
    spec("duplicates", Some('D'), Flag, A::Duplicates),
    spec("federation", None, Flag, A::Ignored),
    spec("local", None, Flag, A::Ignored),
    spec("qos", Some('q'), Required, A::Ignored),
    spec("truncate", Some('T'), Flag, A::Ignored),
    spec("use-local-uid", None, Flag, A::Ignored),
    spec("verbose", Some('v'), Flag, A::Ignored),
    // Filters and outputs canopy has no data for yet.
    spec("associations", Some('x'), Required, A::Unsupported),
    spec("batch-script", Some('B'), Flag, A::Unsupported),
    spec("completion", Some('c'), Flag, A::Unsupported),
    spec("constraints", Some('C'), Required, A::Unsupported),
    spec("env-vars", None, Flag, A::Unsupported),
    spec("file", Some('f'), Required, A::Unsupported),
    spec("flags", Some('F'), Required, A::Unsupported),
    spec("group", Some('g'), Required, A::Unsupported),
    spec("gid", Some('g'), Required, A::Unsupported),
    spec("json", None, Flag, A::Unsupported),
    spec("ncpus", Some('I'), Required, A::Unsupported),
    spec("nnodes", Some('i'), Required, A::Unsupported),
    spec("reason", Some('R'), Required, A::Unsupported),
    spec("timelimit-max", Some('K'), Required, A::Unsupported),
    spec("timelimit-min", Some('k'), Required, A::Unsupported),
    spec("wckeys", Some('W'), Required, A::Unsupported),
    spec("yaml", None, Flag, A::Unsupported),
];

/// One option occurrence, as getopt would report it.
type Given = getopt::Given<Action>;

impl Given {
    fn value(&self) -> &str {
        self.value.as_deref().unwrap_or_default()
    }
}

/// Parses `sacct`'s arguments (without argv[0]) and environment, evaluating times in the
/// local time zone relative to `now`.
pub fn parse(
    args: &[String],
    env: &[(String, String)],
    now: UnixTime,
) -> Result<SacctArgs, SacctArgsError> {
    parse_in(args, env, now, &Local)
}

/// [`parse`] in a given time zone.
fn parse_in<Tz: TimeZone>(
    args: &[String],
    env: &[(String, String)],
    now: UnixTime,
    tz: &Tz,
) -> Result<SacctArgs, SacctArgsError> {
    let mut builder = Builder::new();
    let mut positionals = Vec::new();
    let mut i = 0;
    // Like GNU getopt: options anywhere, each applied as soon as it is read (so the first
    // problem in argv order is the one reported), non-options collected, `--` ends options.
    while let Some(arg) = args.get(i) {
        if arg == "--" {
            positionals.extend(args.iter().skip(i + 1).cloned());
            break;
        }
        match getopt::read_word(OPTIONS, args, i, Ambiguity::SameAction) {
            Word::Options {
                given,
                problem,
                next,
            } => {
                for g in given {
                    builder.apply(g, now, tz)?;
                }
                if let Some(problem) = problem {
                    return Err(problem.into());
                }
                i = next;
            }
            Word::EndOfOptions | Word::Positional => {
                positionals.push(arg.clone());
                i += 1;
            }
        }
    }
    builder.finish(&positionals, env, now, tz)
}

/// Which help was asked for last (`-e`, `-h` and `--usage` override each other).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum HelpKind {
    Fields,
    Full,
    Usage,
}

/// Options applied so far.
#[derive(Debug)]
struct Builder {
    duplicates: bool,
    all_users: bool,
    uids: Vec<u32>,
    accounts: Vec<String>,
    names: Vec<String>,
    partitions: Vec<String>,
    /// `-s` was given (even if every state named is one canopy never records).
    states_given: bool,
    states: Vec<JobState>,
    never_recorded: Vec<String>,
    selectors: Vec<StepSelector>,
    start: Option<UnixTime>,
    end: Option<UnixTime>,
    /// `-o` values, each followed by a comma, in order.
    field_list: Option<String>,
    brief: bool,
    long: bool,
    header: bool,
    /// `Some(trailing)` once `-p` (true) or `-P` (false) is given; the last one wins.
    parsable: Option<bool>,
    delimiter: Option<String>,
    help: Option<HelpKind>,
    units: Option<char>,
    noconvert: bool,
    allocations: bool,
    expand_arrays: bool,
    nodes: Option<Vec<String>>,
}

impl Builder {
    fn new() -> Self {
        Self {
            duplicates: false,
            all_users: false,
            uids: Vec::new(),
            accounts: Vec::new(),
            names: Vec::new(),
            partitions: Vec::new(),
            states_given: false,
            states: Vec::new(),
            never_recorded: Vec::new(),
            selectors: Vec::new(),
            start: None,
            end: None,
            field_list: None,
            brief: false,
            long: false,
            header: true,
            parsable: None,
            delimiter: None,
            help: None,
            units: None,
            noconvert: false,
            allocations: false,
            expand_arrays: false,
            nodes: None,
        }
    }

    fn apply<Tz: TimeZone>(
        &mut self,
        given: Given,
        now: UnixTime,
        tz: &Tz,
    ) -> Result<(), SacctArgsError> {
        let value = given.value();
        match given.spec.action {
            A::AllUsers => self.all_users = true,
            A::Duplicates => self.duplicates = true,
            A::Accounts => add_names(&mut self.accounts, value),
            A::Allocations => self.allocations = true,
            A::Array => self.expand_arrays = true,
            A::Brief => self.brief = true,
            A::Delimiter => self.delimiter = Some(value.to_string()),
            A::EndTime => self.end = parse_time_in(value, now, tz)?,
            A::StartTime => self.start = parse_time_in(value, now, tz)?,
            A::Format => {
                let list = self.field_list.get_or_insert_with(String::new);
                list.push_str(value);
                list.push(',');
            }
            A::Help => self.help = Some(HelpKind::Full),
            A::HelpFormat => self.help = Some(HelpKind::Fields),
            A::Usage => self.help = Some(HelpKind::Usage),
            A::Version => return Err(SacctArgsError::VersionRequested),
            A::Jobs => self.add_jobs(value)?,
            A::Long => self.long = true,
            A::Name => add_names(&mut self.names, value),
            A::NoConvert => self.noconvert = true,
            A::NoHeader => self.header = false,
            // Slurm keeps the first node list (and complains about later ones).
            A::NodeList if self.nodes.is_some() => {}
            A::NodeList => {
                let names =
                    hostlist::expand(value).map_err(|e| SacctArgsError::InvalidNodeList {
                        list: value.to_string(),
                        reason: e.to_string(),
                    })?;
                self.nodes = Some(names);
            }
            A::Parsable => self.parsable = Some(true),
            A::Parsable2 => self.parsable = Some(false),
            A::Partition => add_names(&mut self.partitions, value),
            A::State => self.add_states(value)?,
            A::Units => self.units = Some(parse_units(value)?),
            A::User => self.add_users(value)?,
            A::WholeHetjob => check_whole_hetjob(given.value.as_deref())?,
            A::Ignored => {}
            A::Unsupported => {
                return Err(SacctArgsError::Unsupported {
                    option: given.spec.long,
                })
            }
        }
        Ok(())
    }

    fn finish<Tz: TimeZone>(
        self,
        positionals: &[String],
        env: &[(String, String)],
        now: UnixTime,
        tz: &Tz,
    ) -> Result<SacctArgs, SacctArgsError> {
        if self.states_given && self.states.is_empty() && !self.never_recorded.is_empty() {
            return Err(SacctArgsError::StatesNeverRecorded {
                states: self.never_recorded.join(","),
            });
        }
        if self.long && self.field_list.is_some() {
            return Err(SacctArgsError::LongWithFormat);
        }
        let (start, end) = self.window(now, tz);
        if let Some(start) = start.filter(|&s| s > end) {
            return Err(SacctArgsError::StartAfterEnd {
                start: fmt_timestamp(Some(start)),
                end: fmt_timestamp(Some(end)),
            });
        }
        let format = SacctFormat::parse(&self.field_list_text(env))
            .map_err(|source| SacctArgsError::Field { source })?;
        if !positionals.is_empty() {
            return Err(SacctArgsError::UnknownArguments {
                args: positionals.to_vec(),
            });
        }
        match self.help {
            Some(HelpKind::Full) => return Err(SacctArgsError::HelpRequested),
            Some(HelpKind::Usage) => return Err(SacctArgsError::UsageRequested),
            Some(HelpKind::Fields) | None => {}
        }
        // Naming jobs or nodes means "whoever ran them", unless users were named too.
        let all_users = self.all_users
            || (self.uids.is_empty() && (!self.selectors.is_empty() || self.nodes.is_some()));
        let mut job_ids: Vec<u32> = Vec::new();
        for selector in &self.selectors {
            if !job_ids.contains(&selector.job_id) {
                job_ids.push(selector.job_id);
            }
        }
        Ok(SacctArgs {
            query: AcctQuery {
                job_ids,
                uids: if all_users { Vec::new() } else { self.uids },
                names: self.names,
                partitions: self.partitions,
                states: self.states,
                start,
                end: Some(end),
                duplicates: self.duplicates,
            },
            all_users,
            format,
            allocations: self.allocations,
            expand_arrays: self.expand_arrays,
            header: self.header,
            delimiter: self
                .parsable
                .map(|_| self.delimiter.unwrap_or_else(|| "|".to_string())),
            trailing_delimiter: self.parsable == Some(true),
            help_format: self.help == Some(HelpKind::Fields),
            units: self.units,
            noconvert: self.noconvert,
            selectors: self.selectors,
            accounts: self.accounts,
            nodes: self.nodes.unwrap_or_default(),
        })
    }

    /// The field list: every `-o`, then `-b`'s and `-l`'s fields; with none of those,
    /// `SACCT_FORMAT` or the default.
    fn field_list_text(&self, env: &[(String, String)]) -> String {
        let mut list = self.field_list.clone().unwrap_or_default();
        if self.brief {
            list.push_str(BRIEF_FIELDS);
            list.push(',');
        }
        if self.long {
            list.push_str(LONG_FIELDS);
            list.push(',');
        }
        if self.field_list.is_none() && !self.brief && !self.long {
            let env_format = env
                .iter()
                .find(|(k, _)| k == "SACCT_FORMAT")
                .map(|(_, v)| v.as_str());
            list.push_str(env_format.unwrap_or(DEFAULT_FIELDS));
        }
        list
    }
}

/// `--units`: Slurm looks only at the first character.
fn parse_units(value: &str) -> Result<char, SacctArgsError> {
    value
        .chars()
        .next()
        .map(|c| c.to_ascii_uppercase())
        .filter(|c| "KMGTP".contains(*c))
        .ok_or_else(|| SacctArgsError::InvalidUnits {
            given: value.chars().next().map(String::from).unwrap_or_default(),
        })
}

/// `--whole-hetjob[=yes|no]`: validated like Slurm, otherwise irrelevant to canopy.
fn check_whole_hetjob(value: Option<&str>) -> Result<(), SacctArgsError> {
    match value {
        None => Ok(()),
        Some(v)
            if ["yes", "y", "no", "n"]
                .iter()
                .any(|ok| ok.eq_ignore_ascii_case(v)) =>
        {
            Ok(())
        }
        Some(v) => Err(SacctArgsError::InvalidWholeHetjob {
            value: v.to_string(),
        }),
    }
}

#[cfg(test)]
mod tests;
