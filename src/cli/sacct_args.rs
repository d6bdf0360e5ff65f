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
//! silently returning unfiltered rows. Options that change nothing for canopy (`-D`, `-T`,
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
    spec("duplicates", Some('D'), Flag, A::Ignored),
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

    /// `-u`: a comma list of names or uids; `-1` means every user. Either way it replaces
    /// an earlier `-a` (Slurm applies them in order).
    fn add_users(&mut self, list: &str) -> Result<(), SacctArgsError> {
        if list == "-1" {
            self.all_users = true;
            return Ok(());
        }
        self.all_users = false;
        for name in list_items(list) {
            let uid = lookup_uid(name).ok_or_else(|| SacctArgsError::InvalidUser {
                name: name.to_string(),
            })?;
            if !self.uids.contains(&uid) {
                self.uids.push(uid);
            }
        }
        Ok(())
    }

    /// `-s`: long or short state names, any case. States Slurm does not account are
    /// refused as Slurm refuses them; accounted states canopy never produces are noted.
    fn add_states(&mut self, list: &str) -> Result<(), SacctArgsError> {
        self.states_given = true;
        for name in list_items(list) {
            match classify_state(name) {
                StateName::Recorded(state) => {
                    if !self.states.contains(&state) {
                        self.states.push(state);
                    }
                }
                StateName::NeverRecorded(long) => self.never_recorded.push(long.to_string()),
                StateName::NotAccounted => {
                    return Err(SacctArgsError::UnaccountedState {
                        state: name.to_string(),
                    })
                }
                StateName::Unknown => {
                    return Err(SacctArgsError::InvalidState {
                        state: name.to_string(),
                    })
                }
            }
        }
        Ok(())
    }

    /// `-j`: `N`, `N.batch`, `N.extern`, `N.<step>`, comma separated; repeated `-j`s add up.
    fn add_jobs(&mut self, list: &str) -> Result<(), SacctArgsError> {
        for item in list_items(list) {
            let selector = parse_selector(item)?;
            if !self.selectors.contains(&selector) {
                self.selectors.push(selector);
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

    /// Slurm's default window: with `-s` and no `-j`, start defaults to now and end to the
    /// start (jobs in that state at that instant); with neither, start defaults to today's
    /// midnight; with `-j`, start stays at the epoch; end defaults to now.
    fn window<Tz: TimeZone>(&self, now: UnixTime, tz: &Tz) -> (Option<UnixTime>, UnixTime) {
        let mut start = self.start;
        let mut end = self.end;
        if self.states_given {
            if start.is_none() && self.selectors.is_empty() {
                start = Some(now);
            }
            if end.is_none() {
                end = start;
            }
        } else if self.selectors.is_empty() && start.is_none() {
            start = Some(local_midnight(now, tz));
        }
        (start, end.unwrap_or(now))
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

/// The items of a Slurm comma list, empty ones skipped. A list that starts with a quote
/// ends at the matching quote, as Slurm's list reader does.
fn list_items(list: &str) -> impl Iterator<Item = &str> {
    let inner = match list.chars().next() {
        Some(q @ ('"' | '\'')) => {
            let rest = &list[1..];
            rest.split(q).next().unwrap_or(rest)
        }
        _ => list,
    };
    inner.split(',').filter(|item| !item.is_empty())
}

/// Adds a comma list of names, skipping ones already present (ignoring case, as Slurm's
/// list helper does).
fn add_names(into: &mut Vec<String>, list: &str) {
    for item in list_items(list) {
        if !into.iter().any(|n| n.eq_ignore_ascii_case(item)) {
            into.push(item.to_string());
        }
    }
}

/// A user name's uid, or a numeric uid as given.
fn lookup_uid(name: &str) -> Option<u32> {
    nix::unistd::User::from_name(name)
        .ok()
        .flatten()
        .map(|u| u.uid.as_raw())
        .or_else(|| name.parse().ok())
}

/// How Slurm's sacct treats a state name given to `-s`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StateName {
    /// A state canopy records.
    Recorded(JobState),
    /// Accounted by Slurm, but canopy never puts a job in it (its long name).
    NeverRecorded(&'static str),
    /// A real Slurm state (a flag such as COMPLETING) that accounting does not keep.
    NotAccounted,
    Unknown,
}

/// Slurm job states canopy's [`JobState`] lacks: (long name, short name, accounted?).
const OTHER_SLURM_STATES: &[(&str, &str, bool)] = &[
    ("REQUEUED", "RQ", true),
    ("RESIZING", "RS", true),
    ("REVOKED", "RV", true),
    ("STAGE_OUT", "SO", false),
    ("CONFIGURING", "CF", false),
    ("REQUEUE_FED", "RF", false),
    ("REQUEUE_HOLD", "RH", false),
    ("SPECIAL_EXIT", "SE", false),
    ("STOPPED", "ST", false),
    ("RESV_DEL_HOLD", "RD", false),
    ("SIGNALING", "SI", false),
];

fn classify_state(name: &str) -> StateName {
    match JobState::parse(name) {
        // COMPLETING is a flag in Slurm, and accounting does not keep flags.
        Some(JobState::Completing) => StateName::NotAccounted,
        Some(state) => StateName::Recorded(state),
        None => OTHER_SLURM_STATES
            .iter()
            .find(|(long, short, _)| {
                long.eq_ignore_ascii_case(name) || short.eq_ignore_ascii_case(name)
            })
            .map_or(StateName::Unknown, |&(long, _, accounted)| {
                if accounted {
                    StateName::NeverRecorded(long)
                } else {
                    StateName::NotAccounted
                }
            }),
    }
}

/// One `-j` item: `N` or `N_T`, optionally `.batch`, `.extern` or `.<number>`. Het
/// components (`N+i`) are refused: canopy has no het jobs.
fn parse_selector(item: &str) -> Result<StepSelector, SacctArgsError> {
    let bad = || SacctArgsError::BadJobStep {
        spec: item.to_string(),
    };
    let (job, step) = match item.split_once('.') {
        Some((job, step)) => (job, Some(step)),
        None => (item, None),
    };
    if !job.starts_with(|c: char| c.is_ascii_digit()) {
        return Err(bad());
    }
    if job.contains('+') {
        return Err(SacctArgsError::CompositeJobId {
            spec: item.to_string(),
        });
    }
    let (job, task) = match job.split_once('_') {
        Some((job, task)) => (job, Some(task.parse::<u32>().map_err(|_| bad())?)),
        None => (job, None),
    };
    let job_id = job.parse::<u32>().map_err(|_| bad())?;
    let step = step.map(|step| parse_step(step, job)).transpose()?;
    Ok(StepSelector { job_id, task, step })
}

/// The part after `N.`: `batch`, `extern` or a step number. Slurm names only the job part
/// when it complains (it has already cut the text at the dot).
fn parse_step(step: &str, job: &str) -> Result<StepKind, SacctArgsError> {
    match step {
        "batch" => Ok(StepKind::Batch),
        "extern" => Ok(StepKind::Extern),
        n => n
            .parse::<u32>()
            .ok()
            .filter(|_| n.bytes().all(|b| b.is_ascii_digit()))
            .map(StepKind::Numbered)
            .ok_or_else(|| SacctArgsError::BadStep {
                spec: job.to_string(),
            }),
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

/// Midnight starting the local day that contains `now`.
fn local_midnight<Tz: TimeZone>(now: UnixTime, tz: &Tz) -> UnixTime {
    tz.timestamp_opt(now, 0)
        .earliest()
        .and_then(|t| t.date_naive().and_hms_opt(0, 0, 0))
        .and_then(|naive| local_to_unix(naive, tz))
        .unwrap_or(now)
}

/// A local wall-clock time as Unix time. A time skipped by a DST jump is taken an hour
/// later, as `mktime` does; a repeated one resolves to its first occurrence.
fn local_to_unix<Tz: TimeZone>(naive: NaiveDateTime, tz: &Tz) -> Option<UnixTime> {
    tz.from_local_datetime(&naive)
        .earliest()
        .or_else(|| {
            let later = naive.checked_add_signed(Duration::hours(1))?;
            tz.from_local_datetime(&later).earliest()
        })
        .map(|t| t.timestamp())
}

/// Relative-time units after `now+`/`now-`, longest spelling first.
const DELTA_UNITS: &[(&str, i64)] = &[
    ("seconds", 1),
    ("second", 1),
    ("minutes", 60),
    ("minute", 60),
    ("hours", 3600),
    ("hour", 3600),
    ("days", 86_400),
    ("day", 86_400),
    ("weeks", 604_800),
    ("week", 604_800),
];

/// Named times of day.
const NAMED_TIMES: &[(&str, u32)] = &[
    ("midnight", 0),
    ("noon", 12),
    ("elevenses", 11),
    ("fika", 15),
    ("teatime", 16),
];

/// A calendar date as given: (year if given, month 1-12, day 1-31).
type DateParts = (Option<i32>, u32, u32);

/// A wall-clock time: (hour, minute, second).
type ClockParts = (u32, u32, u32);

/// Date and time fields as the parser fills them in (`None` = not given).
#[derive(Debug, Default)]
struct TimeParts {
    date: Option<DateParts>,
    time: Option<ClockParts>,
}

/// Whether an incomplete date names the last such date or the next one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tense {
    /// sacct's `-S`/`-E`: a date without a year is this year unless its
    /// month is still to come (then last year).
    Past,
    /// sbatch's `--begin`: a clock time already gone today means tomorrow,
    /// a date already gone this year means next year.
    Future,
}

/// Parses a Slurm date/time for `-S`/`-E` the way Slurm's `parse_time` does (with
/// `Tense::Past`): a time without a date means today, a date without a year means this
/// year unless that month is still to come (then last year), a date without a time
/// means 00:00. `Ok(None)` when the text names no time at all.
fn parse_time_in<Tz: TimeZone>(
    text: &str,
    now: UnixTime,
    tz: &Tz,
) -> Result<Option<UnixTime>, SacctArgsError> {
    parse_slurm_time(text, now, tz, Tense::Past)
}

/// [`parse_time_in`] with the tense chosen.
pub(crate) fn parse_slurm_time<Tz: TimeZone>(
    text: &str,
    now: UnixTime,
    tz: &Tz,
    tense: Tense,
) -> Result<Option<UnixTime>, SacctArgsError> {
    let err = |pos: usize| SacctArgsError::InvalidTime {
        text: text.to_string(),
        pos,
    };
    if let Some(rest) = strip_prefix_ci(text, "uts") {
        return match rest.parse::<i64>() {
            Ok(secs) if secs >= 1_000_000 => Ok(Some(secs)),
            _ => Err(err(0)),
        };
    }
    let now_local = tz
        .timestamp_opt(now, 0)
        .earliest()
        .map(|t| t.naive_local())
        .ok_or_else(|| err(0))?;
    let bytes = text.as_bytes();
    let mut parts = TimeParts::default();
    let mut pos = 0;
    while let Some(&b) = bytes.get(pos) {
        if b == b'\n' {
            break;
        }
        if b == b' ' || b == b'\t' || b == b'-' || b == b'T' {
            pos += 1;
            continue;
        }
        let rest = text.get(pos..).unwrap_or_default();
        if strip_prefix_ci(rest, "today").is_some() {
            parts.date = Some(date_of(now_local));
            pos += 5;
        } else if strip_prefix_ci(rest, "tomorrow").is_some() {
            let tomorrow = now_local
                .checked_add_days(chrono::Days::new(1))
                .ok_or_else(|| err(pos))?;
            parts.date = Some(date_of(tomorrow));
            pos += 8;
        } else if let Some(&(word, hour)) = NAMED_TIMES
            .iter()
            .find(|(word, _)| strip_prefix_ci(rest, word).is_some())
        {
            parts.time = Some((hour, 0, 0));
            pos += word.len();
        } else if strip_prefix_ci(rest, "now").is_some() {
            let (delta, next) = now_delta(text, pos + 3).map_err(err)?;
            let then = Duration::try_seconds(delta)
                .and_then(|d| now_local.checked_add_signed(d))
                .ok_or_else(|| err(next))?;
            parts.date = Some(date_of(then));
            parts.time = Some((then.hour(), then.minute(), then.second()));
            pos = next;
        } else if !b.is_ascii_digit() {
            return Err(err(pos));
        } else if bytes.get(pos + 1) == Some(&b':') || bytes.get(pos + 2) == Some(&b':') {
            let (time, next) = clock_time(bytes, pos).map_err(err)?;
            parts.time = Some(time);
            pos = next;
        } else {
            let (date, next) = calendar_date(bytes, pos).map_err(err)?;
            parts.date = Some(date);
            pos = next;
        }
    }
    resolve(parts, now_local, tz, tense).map_err(|()| err(text.len()))
}

/// `text` without a case-insensitive ASCII `prefix`, if it starts with one.
fn strip_prefix_ci<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    let head = text.as_bytes().get(..prefix.len())?;
    if head.eq_ignore_ascii_case(prefix.as_bytes()) {
        text.get(prefix.len()..)
    } else {
        None
    }
}

fn date_of(t: NaiveDateTime) -> DateParts {
    (Some(t.year()), t.month(), t.day())
}

/// After `now` at `pos`: blanks, then optionally `+N[unit]` or `-N[unit]` (unit defaults to
/// seconds). Returns the signed delta in seconds and where parsing continues.
fn now_delta(text: &str, mut pos: usize) -> Result<(i64, usize), usize> {
    let bytes = text.as_bytes();
    while matches!(bytes.get(pos), Some(b' ' | b'\t')) {
        pos += 1;
    }
    let sign_pos = pos;
    let sign = match bytes.get(pos) {
        None | Some(b'\n') => return Ok((0, pos)),
        Some(b'+') => 1,
        Some(b'-') => -1,
        Some(_) => return Err(pos),
    };
    pos += 1;
    let mut count: i64 = 0;
    let mut digits = 0;
    while let Some(&b) = bytes.get(pos) {
        if b == b'\n' {
            break;
        }
        if b.is_ascii_whitespace() {
            pos += 1;
            continue;
        }
        let rest = text.get(pos..).unwrap_or_default();
        if let Some(&(unit, scale)) = DELTA_UNITS
            .iter()
            .find(|(unit, _)| strip_prefix_ci(rest, unit).is_some())
        {
            count = count.saturating_mul(scale);
            pos += unit.len();
            break;
        }
        if !b.is_ascii_digit() {
            // Slurm reports the character before the one it could not read.
            return Err(pos - 1);
        }
        count = count.saturating_mul(10).saturating_add(i64::from(b - b'0'));
        digits += 1;
        pos += 1;
    }
    if digits == 0 {
        return Err(sign_pos);
    }
    Ok((sign * count, pos))
}

/// A one- or two-digit number at `pos` (two required when `two`) within `range`, and
/// where parsing continues. Errors carry the position Slurm reports: the offending
/// character, or the start of the number when it is out of range.
fn small_number(
    bytes: &[u8],
    pos: usize,
    range: RangeInclusive<u32>,
    two: bool,
) -> Result<(u32, usize), usize> {
    let digit = |i: usize| {
        bytes
            .get(i)
            .filter(|b| b.is_ascii_digit())
            .map(|b| u32::from(b - b'0'))
    };
    let first = digit(pos).ok_or(pos)?;
    let (value, next) = match digit(pos + 1) {
        Some(second) => (first * 10 + second, pos + 2),
        None if two => return Err(pos + 1),
        None => (first, pos + 1),
    };
    if range.contains(&value) {
        Ok((value, next))
    } else {
        Err(pos)
    }
}

/// `H[H]:MM[:SS] [AM|PM]` at `pos`.
fn clock_time(bytes: &[u8], pos: usize) -> Result<(ClockParts, usize), usize> {
    let (mut hour, mut p) = small_number(bytes, pos, 0..=23, false)?;
    if bytes.get(p) != Some(&b':') {
        return Err(p);
    }
    let (minute, next) = small_number(bytes, p + 1, 0..=59, true)?;
    p = next;
    let mut second = 0;
    if bytes.get(p) == Some(&b':') {
        (second, p) = small_number(bytes, p + 1, 0..=59, true)?;
    }
    while bytes.get(p).is_some_and(u8::is_ascii_whitespace) {
        p += 1;
    }
    let suffix = bytes.get(p..p + 2).map(<[u8]>::to_ascii_lowercase);
    match suffix.as_deref() {
        Some(b"pm") => {
            hour = match hour {
                0..=11 => hour + 12,
                12 => 12,
                _ => return Err(p),
            };
            p += 2;
        }
        Some(b"am") => {
            hour = match hour {
                0..=11 => hour,
                12 => 0,
                _ => return Err(p),
            };
            p += 2;
        }
        _ => {}
    }
    Ok(((hour, minute, second), p))
}

/// `YYYY-MM-DD`, or `MM[/.]DD[[/.]YY]` / `MMDD[YY]`, at `pos`. Months 1-12, days 1-31 (a
/// day past the month's end rolls over, as `mktime` does).
fn calendar_date(bytes: &[u8], pos: usize) -> Result<(DateParts, usize), usize> {
    if bytes.get(pos + 4) == Some(&b'-') && bytes.get(pos + 7) == Some(&b'-') {
        let mut year = 0i32;
        for i in pos..pos + 4 {
            let d = bytes.get(i).filter(|b| b.is_ascii_digit()).ok_or(i)?;
            year = year * 10 + i32::from(d - b'0');
        }
        let (month, p) = small_number(bytes, pos + 5, 1..=12, false)?;
        let (day, p) = small_number(bytes, p + 1, 1..=31, false)?;
        return Ok(((Some(year), month, day), p));
    }
    let (month, mut p) = small_number(bytes, pos, 1..=12, false)?;
    if matches!(bytes.get(p), Some(b'.' | b'/')) {
        p += 1;
    }
    let (day, mut p) = small_number(bytes, p, 1..=31, false)?;
    if matches!(bytes.get(p), Some(b'.' | b'/')) {
        p += 1;
    }
    let mut year = None;
    if bytes.get(p).is_some_and(u8::is_ascii_digit) {
        let (yy, next) = small_number(bytes, p, 0..=99, true)?;
        year = Some(2000 + i32::try_from(yy).map_err(|_| p)?);
        p = next;
    }
    Ok(((year, month, day), p))
}

/// Fills in what was not given and converts to Unix time; `Ok(None)` if nothing was given.
fn resolve<Tz: TimeZone>(
    parts: TimeParts,
    now_local: NaiveDateTime,
    tz: &Tz,
    tense: Tense,
) -> Result<Option<UnixTime>, ()> {
    let clock_only = parts.date.is_none();
    let (date, time) = match (parts.date, parts.time) {
        (None, None) => return Ok(None),
        (Some(date), time) => (date, time.unwrap_or((0, 0, 0))),
        (None, Some(time)) => (date_of(now_local), time),
    };
    let (year, month, day) = date;
    let given_year = year.is_some();
    let year = year.unwrap_or(match tense {
        // A past date without a year: this year, unless its month has not come yet.
        Tense::Past if month > now_local.month() => now_local.year() - 1,
        Tense::Past | Tense::Future => now_local.year(),
    });
    let (hour, minute, second) = time;
    let at = |year: i32, extra_days: u64| {
        NaiveDate::from_ymd_opt(year, month, 1)
            .and_then(|first| {
                first.checked_add_days(chrono::Days::new(u64::from(day - 1) + extra_days))
            })
            .and_then(|d| d.and_hms_opt(hour, minute, second))
    };
    let mut naive = at(year, 0).ok_or(())?;
    if tense == Tense::Future && naive < now_local {
        if clock_only {
            naive = at(year, 1).ok_or(())?;
        } else if !given_year {
            naive = at(year + 1, 0).ok_or(())?;
        }
    }
    local_to_unix(naive, tz).map(Some).ok_or(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::FixedOffset;

    /// 2026-11-21T05:46:40Z, a Saturday.
    const NOW: i64 = 1_795_240_000;

    fn utc() -> FixedOffset {
        FixedOffset::east_opt(0).unwrap()
    }

    #[test]
    fn future_tense_names_the_next_such_time() {
        let next = |text: &str| parse_slurm_time(text, NOW, &utc(), Tense::Future).unwrap();
        // NOW is 05:46:40 on 2026-11-21.
        assert_eq!(next("10:00"), Some(at(2026, 11, 21, 10, 0, 0)));
        assert_eq!(next("05:00"), Some(at(2026, 11, 22, 5, 0, 0)));
        assert_eq!(next("11/01"), Some(at(2027, 11, 1, 0, 0, 0)));
        assert_eq!(next("12/01"), Some(at(2026, 12, 1, 0, 0, 0)));
        assert_eq!(next("2026-01-05T10:00"), Some(at(2026, 1, 5, 10, 0, 0)));
        assert_eq!(next("now+1hour"), Some(NOW + 3600));
        assert_eq!(next("tomorrow"), Some(at(2026, 11, 22, 0, 0, 0)));
        assert!(parse_slurm_time("soonish", NOW, &utc(), Tense::Future).is_err());
    }

    fn at(y: i32, mo: u32, d: u32, h: u32, mi: u32, s: u32) -> i64 {
        utc()
            .with_ymd_and_hms(y, mo, d, h, mi, s)
            .unwrap()
            .timestamp()
    }

    fn run_env(list: &[&str], env: &[(&str, &str)]) -> Result<SacctArgs, SacctArgsError> {
        let argv: Vec<String> = list.iter().map(|s| s.to_string()).collect();
        let env: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        parse_in(&argv, &env, NOW, &utc())
    }

    fn ok(list: &[&str]) -> SacctArgs {
        run_env(list, &[]).unwrap()
    }

    fn err(list: &[&str]) -> SacctArgsError {
        run_env(list, &[]).unwrap_err()
    }

    fn fmt(list: &str) -> SacctFormat {
        SacctFormat::parse(list).unwrap()
    }

    fn time(text: &str) -> Result<Option<i64>, SacctArgsError> {
        parse_time_in(text, NOW, &utc())
    }

    fn bad_time(text: &str, pos: usize) -> SacctArgsError {
        SacctArgsError::InvalidTime {
            text: text.to_string(),
            pos,
        }
    }

    const MIDNIGHT: i64 = 1_795_219_200; // 2026-11-21T00:00:00Z

    #[test]
    fn defaults() {
        let a = ok(&[]);
        assert_eq!(
            a.query,
            AcctQuery {
                start: Some(MIDNIGHT),
                end: Some(NOW),
                ..AcctQuery::default()
            }
        );
        assert!(!a.all_users);
        assert_eq!(a.format, fmt(DEFAULT_FIELDS));
        assert!(a.header && !a.allocations && !a.help_format && !a.noconvert);
        assert_eq!(
            (a.delimiter, a.trailing_delimiter, a.units),
            (None, false, None)
        );
        assert!(a.selectors.is_empty() && a.accounts.is_empty() && a.nodes.is_empty());
    }

    #[test]
    fn every_value_syntax_form() {
        for argv in [
            &["--format=jobid,state"][..],
            &["--format", "jobid,state"],
            &["--fields=jobid,state"],
            &["-ojobid,state"],
            &["-o", "jobid,state"],
            &["--form", "jobid,state"],
        ] {
            assert_eq!(ok(argv).format, fmt("jobid,state"), "{argv:?}");
        }
    }

    #[test]
    fn bundled_short_options() {
        let a = ok(&["-nXPo", "jobid"]);
        assert!(!a.header && a.allocations);
        assert_eq!(a.delimiter.as_deref(), Some("|"));
        assert_eq!(a.format, fmt("jobid"));
        let a = ok(&["-nu", "root"]);
        assert_eq!(a.query.uids, vec![0]);
        assert!(!a.header);
        assert!(ok(&["-t"]).allocations);
    }

    #[test]
    fn jobs_accumulate_across_repeats_and_lists() {
        let a = ok(&[
            "-j",
            "12",
            "--jobs=13,14",
            "-j14",
            "-j",
            "12.batch,15.3,15.extern",
        ]);
        assert_eq!(a.query.job_ids, vec![12, 13, 14, 15]);
        assert_eq!(
            a.selectors,
            vec![
                StepSelector {
                    job_id: 12,
                    task: None,
                    step: None
                },
                StepSelector {
                    job_id: 13,
                    task: None,
                    step: None
                },
                StepSelector {
                    job_id: 14,
                    task: None,
                    step: None
                },
                StepSelector {
                    job_id: 12,
                    task: None,
                    step: Some(StepKind::Batch)
                },
                StepSelector {
                    job_id: 15,
                    task: None,
                    step: Some(StepKind::Numbered(3))
                },
                StepSelector {
                    job_id: 15,
                    task: None,
                    step: Some(StepKind::Extern)
                },
            ]
        );
        // Naming jobs means whoever owns them, and searches from the epoch.
        assert!(a.all_users);
        assert_eq!((a.query.start, a.query.end), (None, Some(NOW)));
    }

    #[test]
    fn step_selection_rules() {
        let id = |job_id| AcctJob {
            job_id,
            ..sample_job()
        };
        let a = ok(&["-j", "12.batch,13,13.0"]);
        assert!(!a.shows_job_row(&id(12)));
        assert!(a.shows_step(&id(12), StepKind::Batch));
        assert!(!a.shows_step(&id(12), StepKind::Numbered(0)));
        assert!(a.shows_job_row(&id(13)) && a.shows_step(&id(13), StepKind::Extern));
        assert!(a.shows_job_row(&id(99)));
    }

    #[test]
    fn array_ids_select_tasks() {
        let task = |job_id, array_job_id, task_id| AcctJob {
            job_id,
            array: Some(crate::wire::types::ArrayTask {
                array_job_id,
                task_id,
                min: 1,
                max: 3,
                count: 3,
                step: 1,
                throttle: None,
            }),
            ..sample_job()
        };
        let whole = ok(&["-j", "20"]);
        assert!(whole.selects(&task(20, 20, 3)) && whole.selects(&task(21, 20, 1)));
        assert!(!whole.selects(&task(31, 30, 1)));
        let one = ok(&["-j", "20_1"]);
        assert_eq!(one.query.job_ids, vec![20]);
        assert!(one.selects(&task(21, 20, 1)) && !one.selects(&task(22, 20, 2)));
        let step = ok(&["-j", "20_1.batch"]);
        assert!(!step.shows_job_row(&task(21, 20, 1)));
        assert!(step.shows_step(&task(21, 20, 1), StepKind::Batch));
        assert!(matches!(
            err(&["-j", "20_x"]),
            SacctArgsError::BadJobStep { .. }
        ));
    }

    #[test]
    fn bad_job_ids() {
        assert_eq!(
            err(&["-j", "abc"]).to_string(),
            "sacct: fatal: Bad job/step specified: abc"
        );
        assert_eq!(
            err(&["-j", "12x"]),
            SacctArgsError::BadJobStep {
                spec: "12x".to_string()
            }
        );
        assert_eq!(
            err(&["-j", "99999999999"]),
            SacctArgsError::BadJobStep {
                spec: "99999999999".to_string()
            }
        );
        assert_eq!(
            err(&["-j", "12.x"]).to_string(),
            "sacct: fatal: Bad step specified: 12"
        );
        assert_eq!(
            err(&["-j", "12."]),
            SacctArgsError::BadStep {
                spec: "12".to_string()
            }
        );
        assert_eq!(
            err(&["-j", "12.99999999999"]),
            SacctArgsError::BadStep {
                spec: "12".to_string()
            }
        );
        assert_eq!(
            err(&["-j", "12+3"]).to_string(),
            "sacct: fatal: heterogeneous job ids are not supported by canopy: 12+3"
        );
        assert_eq!(
            err(&["-j", "12+1"]),
            SacctArgsError::CompositeJobId {
                spec: "12+1".to_string()
            }
        );
    }

    #[test]
    fn users() {
        let a = ok(&["-u", "root,4321", "--user=0", "--uid", "77"]);
        assert_eq!(a.query.uids, vec![0, 4321, 77]);
        assert!(!a.all_users);
        assert_eq!(
            err(&["-u", "no-such-user-canopy"]).to_string(),
            "sacct: error: Invalid user id: no-such-user-canopy"
        );
        let a = ok(&["-u", "-1"]);
        assert!(a.all_users && a.query.uids.is_empty());
        // -a and -u override each other in order.
        let a = ok(&["-a", "-u", "root"]);
        assert!(!a.all_users);
        assert_eq!(a.query.uids, vec![0]);
        let a = ok(&["-u", "root", "--allusers"]);
        assert!(a.all_users && a.query.uids.is_empty());
        // With -j, named users still restrict.
        let a = ok(&["-j", "5", "-u", "root"]);
        assert!(!a.all_users);
        assert_eq!(a.query.uids, vec![0]);
        assert!(ok(&["-N", "n1"]).all_users);
    }

    #[test]
    fn name_partition_and_account_lists() {
        let a = ok(&[
            "--name=a,b",
            "--name",
            "B,c",
            "-r",
            "debug,,gpu",
            "--partition=debug",
            "-A",
            "'phys,chem'",
            "--accounts",
            "bio",
        ]);
        assert_eq!(a.query.names, ["a", "b", "c"]);
        assert_eq!(a.query.partitions, ["debug", "gpu"]);
        assert_eq!(a.accounts, ["phys", "chem", "bio"]);
    }

    #[test]
    fn states() {
        let a = ok(&[
            "-s",
            "cd,COMPLETED,f",
            "--state=Pending,to,OOM,nf,ca,r,s,pr,bf,dl",
        ]);
        assert_eq!(
            a.query.states,
            vec![
                JobState::Completed,
                JobState::Failed,
                JobState::Pending,
                JobState::Timeout,
                JobState::OutOfMemory,
                JobState::NodeFail,
                JobState::Cancelled,
                JobState::Running,
                JobState::Suspended,
                JobState::Preempted,
                JobState::BootFail,
                JobState::Deadline,
            ]
        );
        // States canopy never records drop out when others remain.
        assert_eq!(
            ok(&["-s", "RQ,f,resizing"]).query.states,
            vec![JobState::Failed]
        );
        assert_eq!(
            err(&["-s", "rq,RV"]).to_string(),
            "sacct: error: canopy never records jobs in state REQUEUED,REVOKED, so this query \
             cannot match anything"
        );
        assert_eq!(
            err(&["-s", "CG"]).to_string(),
            "sacct: fatal: job state CG is not supported / accounted"
        );
        assert_eq!(
            err(&["-s", "f,configuring"]),
            SacctArgsError::UnaccountedState {
                state: "configuring".to_string()
            }
        );
        assert_eq!(
            err(&["-s", "bogus"]).to_string(),
            "sacct: fatal: unrecognized job state value 'bogus'"
        );
    }

    #[test]
    fn default_windows() {
        // -s alone: jobs in that state right now.
        let a = ok(&["-s", "R"]);
        assert_eq!((a.query.start, a.query.end), (Some(NOW), Some(NOW)));
        // -s with -j: from the epoch.
        let a = ok(&["-s", "R", "-j", "3"]);
        assert_eq!((a.query.start, a.query.end), (None, Some(NOW)));
        // -s with -S: that instant.
        let a = ok(&["-s", "R", "-S", "2026-11-01"]);
        let first = at(2026, 11, 1, 0, 0, 0);
        assert_eq!((a.query.start, a.query.end), (Some(first), Some(first)));
        // -E alone: from midnight.
        let a = ok(&["-E", "10:00"]);
        assert_eq!(
            (a.query.start, a.query.end),
            (Some(MIDNIGHT), Some(at(2026, 11, 21, 10, 0, 0)))
        );
        // snakemake's status query.
        let a = ok(&["--starttime", "2026-11-19T05:00", "--endtime", "now"]);
        assert_eq!(
            (a.query.start, a.query.end),
            (Some(at(2026, 11, 19, 5, 0, 0)), Some(NOW))
        );
    }

    #[test]
    fn start_after_end_is_refused() {
        let e = err(&["-S", "2026-11-21T06:00", "-E", "2026-11-21T05:00"]);
        assert_eq!(
            e,
            SacctArgsError::StartAfterEnd {
                start: fmt_timestamp(Some(at(2026, 11, 21, 6, 0, 0))),
                end: fmt_timestamp(Some(at(2026, 11, 21, 5, 0, 0))),
            }
        );
        assert_eq!(
            e.to_string(),
            format!(
                "sacct: error: Start time ({}) requested is after end time ({}).",
                fmt_timestamp(Some(at(2026, 11, 21, 6, 0, 0))),
                fmt_timestamp(Some(at(2026, 11, 21, 5, 0, 0)))
            )
        );
    }

    #[test]
    fn time_errors_stop_parsing() {
        assert_eq!(
            err(&["-S", "yesterday", "--bogus"]).to_string(),
            "Invalid time specification (pos=0): yesterday"
        );
        assert_eq!(err(&["--endtime=25:00"]), bad_time("25:00", 0));
    }

    #[test]
    fn field_lists() {
        assert_eq!(ok(&["-b"]).format, fmt(BRIEF_FIELDS));
        assert_eq!(ok(&["--brief"]).format, fmt("jobid,state,exitcode"));
        assert_eq!(ok(&["-l"]).format, fmt(LONG_FIELDS));
        assert_eq!(
            ok(&["-o", "jobid", "-o", "state%20"]).format,
            fmt("jobid,state%20")
        );
        assert_eq!(
            ok(&["-o", "user", "-b"]).format,
            fmt("user,jobid,state,exitcode")
        );
        let env = [("SACCT_FORMAT", "jobid%20,nodelist")];
        assert_eq!(run_env(&[], &env).unwrap().format, fmt("jobid%20,nodelist"));
        assert_eq!(
            run_env(&["-o", "state"], &env).unwrap().format,
            fmt("state")
        );
        assert_eq!(run_env(&["-b"], &env).unwrap().format, fmt(BRIEF_FIELDS));
        assert_eq!(
            err(&["-l", "-o", "jobid"]).to_string(),
            "sacct: fatal: Options -o(--format) and -l(--long) are mutually exclusive. \
             Please remove one and retry."
        );
        assert_eq!(
            err(&["-o", "jobid,bogus"]).to_string(),
            "sacct: error: Invalid field requested: \"bogus\""
        );
        assert_eq!(
            err(&["--format=Allocgres", "--noheader"]).to_string(),
            "sacct: fatal: AllocGRES has been removed, please use AllocTRES"
        );
        assert_eq!(
            run_env(&[], &[("SACCT_FORMAT", "nope")]).unwrap_err(),
            SacctArgsError::Field {
                source: SacctFieldError::InvalidField {
                    spec: "nope".to_string()
                }
            }
        );
    }

    #[test]
    fn parsable_modes_and_delimiters() {
        let a = ok(&["-p"]);
        assert_eq!(
            (a.delimiter.as_deref(), a.trailing_delimiter),
            (Some("|"), true)
        );
        let a = ok(&["--parsable2"]);
        assert_eq!(
            (a.delimiter.as_deref(), a.trailing_delimiter),
            (Some("|"), false)
        );
        let a = ok(&["-P", "-p"]);
        assert!(a.trailing_delimiter);
        let a = ok(&["--delimiter", ";", "-P"]);
        assert_eq!(a.delimiter.as_deref(), Some(";"));
        // Without -p/-P the delimiter changes nothing, as in Slurm.
        assert_eq!(ok(&["--delimiter=;"]).delimiter, None);
    }

    #[test]
    fn units_and_noconvert() {
        assert_eq!(ok(&["--units=g"]).units, Some('G'));
        assert_eq!(ok(&["--units", "Kb"]).units, Some('K'));
        assert!(ok(&["--noconvert"]).noconvert);
        let e = err(&["--units=x"]);
        assert_eq!(
            e.to_string(),
            "sacct: error: Invalid unit type 'x'. Possible options are 'KMGTP'\n\
             sacct: fatal: Invalid unit type"
        );
        assert_eq!(
            err(&["--units="]),
            SacctArgsError::InvalidUnits {
                given: String::new()
            }
        );
    }

    #[test]
    fn node_lists() {
        assert_eq!(ok(&["-N", "n[1-2],x"]).nodes, ["n1", "n2", "x"]);
        // Slurm keeps the first list it was given.
        assert_eq!(ok(&["-N", "a", "--nodelist=b"]).nodes, ["a"]);
        let e = err(&["-N", "n[3-1]"]);
        assert!(matches!(e, SacctArgsError::InvalidNodeList { ref list, .. } if list == "n[3-1]"));
        assert!(e
            .to_string()
            .starts_with("sacct: error: Invalid node list \"n[3-1]\": "));
    }

    #[test]
    fn ignored_options_change_nothing() {
        let plain = ok(&["-X"]);
        let noisy = ok(&[
            "-X",
            "--clusters",
            "all",
            "-M",
            "other",
            "--cluster=x",
            "-D",
            "-T",
            "-q",
            "normal",
            "-L",
            "--local",
            "--federation",
            "-vv",
            "--use-local-uid",
            "--whole-hetjob",
            "--whole-hetjob=no",
        ]);
        assert_eq!(plain, noisy);
        assert!(!plain.expand_arrays);
        assert!(ok(&["-X", "--array"]).expand_arrays);
        assert_eq!(
            err(&["--whole-hetjob=maybe"]).to_string(),
            "sacct: error: Invalid --whole-hetjob value \"maybe\". Valid values: [yes|no]."
        );
    }

    #[test]
    fn unsupported_options_are_named() {
        assert_eq!(
            err(&["--gid", "5"]).to_string(),
            "sacct: error: option --gid is not supported by canopy yet"
        );
        assert_eq!(
            err(&["-g", "5"]),
            SacctArgsError::Unsupported { option: "group" }
        );
        assert_eq!(
            err(&["--json"]),
            SacctArgsError::Unsupported { option: "json" }
        );
        assert_eq!(
            err(&["-B"]),
            SacctArgsError::Unsupported {
                option: "batch-script"
            }
        );
    }

    #[test]
    fn unknown_options_and_arguments() {
        assert_eq!(
            err(&["--bogus"]).to_string(),
            "sacct: unrecognized option '--bogus'"
        );
        assert_eq!(err(&["-Z"]).to_string(), "sacct: invalid option -- 'Z'");
        // snakemake's accidental `sacct -nu <user> -o Account%256 '|' tail -1`.
        assert_eq!(
            err(&["-nu", "root", "-o", "Account%256", "|", "tail", "-1"]),
            SacctArgsError::Syntax(GetoptError::InvalidShort { option: '1' })
        );
        let e = err(&["-X", "|", "tail", "-n"]);
        assert_eq!(
            e,
            SacctArgsError::UnknownArguments {
                args: vec!["|".to_string(), "tail".to_string()]
            }
        );
        assert_eq!(
            e.to_string(),
            "sacct: error: Unknown arguments:\nsacct: error:  |\nsacct: error:  tail"
        );
        // Options after positionals are still read; `--` makes the rest positional.
        assert_eq!(
            err(&["1234", "-X"]),
            SacctArgsError::UnknownArguments {
                args: vec!["1234".to_string()]
            }
        );
        assert_eq!(
            err(&["--", "-X"]),
            SacctArgsError::UnknownArguments {
                args: vec!["-X".to_string()]
            }
        );
        assert_eq!(
            err(&["-"]),
            SacctArgsError::UnknownArguments {
                args: vec!["-".to_string()]
            }
        );
        // Field errors come before leftover arguments.
        assert!(matches!(
            err(&["x", "-o", "zz"]),
            SacctArgsError::Field { .. }
        ));
        assert_eq!(err(&["x"]).exit_code(), 1);
    }

    #[test]
    fn option_argument_errors() {
        assert_eq!(
            err(&["--format"]).to_string(),
            "sacct: option '--format' requires an argument"
        );
        assert_eq!(
            err(&["-o"]).to_string(),
            "sacct: option requires an argument -- 'o'"
        );
        assert_eq!(
            err(&["-Xj"]),
            SacctArgsError::Syntax(GetoptError::MissingShortArgument { option: 'j' })
        );
        assert_eq!(
            err(&["--noheader=1"]).to_string(),
            "sacct: option '--noheader' doesn't allow an argument"
        );
        assert_eq!(
            err(&["--no"]).to_string(),
            "sacct: option '--no' is ambiguous; possibilities: '--nodelist' '--noconvert' \
             '--noheader'"
        );
        assert!(matches!(
            err(&["--sta", "x"]),
            SacctArgsError::Syntax(GetoptError::Ambiguous { .. })
        ));
        assert!(matches!(
            err(&["--=x"]),
            SacctArgsError::Syntax(GetoptError::Unrecognized { .. })
        ));
        // Prefixes shared only by aliases of one option are fine.
        assert!(run_env(&["--clu", "all"], &[]).is_ok());
        assert!(ok(&["--allo"]).allocations);
        assert!(ok(&["--help-f"]).help_format);
    }

    #[test]
    fn help_usage_and_version() {
        let a = ok(&["-e"]);
        assert!(a.help_format);
        assert!(ok(&["--helpformat"]).help_format);
        // The whole command line is still checked first, as in Slurm.
        assert!(matches!(
            err(&["-e", "extra"]),
            SacctArgsError::UnknownArguments { .. }
        ));
        let h = err(&["-h"]);
        assert_eq!(h, SacctArgsError::HelpRequested);
        assert_eq!(h.exit_code(), 0);
        assert!(h.to_string().starts_with("Usage: sacct [OPTIONS...]"));
        // The last help option wins.
        assert!(ok(&["-h", "-e"]).help_format);
        assert_eq!(err(&["-e", "--usage"]), SacctArgsError::UsageRequested);
        assert_eq!(err(&["-U"]).exit_code(), 0);
        assert_eq!(
            err(&["--usage"]).to_string(),
            "Usage: sacct [options]\n\tUse --help for help"
        );
        // -V answers at once, before later problems are seen.
        let v = err(&["-V", "--bogus"]);
        assert_eq!(v, SacctArgsError::VersionRequested);
        assert_eq!(v.exit_code(), 0);
        assert!(v.to_string().starts_with("canopy "));
    }

    #[test]
    fn public_parse_uses_local_time() {
        let argv = vec!["-j".to_string(), "1".to_string()];
        let a = parse(&argv, &[], NOW).unwrap();
        assert_eq!((a.query.start, a.query.end), (None, Some(NOW)));
        let a = parse(&[], &[], NOW).unwrap();
        assert_eq!(a.query.start, Some(local_midnight(NOW, &Local)));
    }

    #[test]
    fn client_side_filters() {
        let job = |id: u32, account: &str, nodes: &str| AcctJob {
            job_id: id,
            account: account.to_string(),
            nodes: nodes.to_string(),
            ..sample_job()
        };
        let a = ok(&["-A", "phys", "-N", "n[1-4]"]);
        assert!(a.selects(&job(1, "PHYS", "n3")));
        assert!(!a.selects(&job(1, "chem", "n3")));
        assert!(!a.selects(&job(1, "phys", "m1")));
        assert!(!a.selects(&job(1, "phys", "")));
        assert!(!a.selects(&job(1, "phys", "bad[")));
        let a = ok(&["-j", "7"]);
        assert!(a.selects(&job(7, "", "")) && !a.selects(&job(8, "", "")));
        assert!(ok(&[]).selects(&job(8, "", "")));
    }

    fn sample_job() -> AcctJob {
        AcctJob {
            job_id: 1,
            name: String::new(),
            user: String::new(),
            uid: 0,
            gid: 0,
            partition: String::new(),
            account: String::new(),
            qos: String::new(),
            cluster: String::new(),
            state: JobState::Completed,
            reason: String::new(),
            exit_code: (0, 0),
            derived_exit_code: (0, 0),
            submit_time: NOW,
            eligible_time: None,
            start_time: None,
            end_time: None,
            time_limit_min: None,
            nodes: String::new(),
            num_nodes: 0,
            req_nodes: 1,
            alloc_cpus: 0,
            req_cpus: 1,
            num_tasks: 1,
            req_mem_mb: 0,
            mem_per_cpu: false,
            workdir: String::new(),
            submit_line: String::new(),
            priority: 0,
            restarts: 0,
            comment: String::new(),
            constraints: String::new(),
            steps: Vec::new(),
            array: None,
        }
    }

    // Error positions in these tests were checked against Slurm 22.05's sacct.
    #[test]
    fn iso_dates_and_times() {
        assert_eq!(time("2024-01-15").unwrap(), Some(at(2024, 1, 15, 0, 0, 0)));
        assert_eq!(
            time("2024-01-15T10:30").unwrap(),
            Some(at(2024, 1, 15, 10, 30, 0))
        );
        assert_eq!(
            time("2024-01-15T10:30:45").unwrap(),
            Some(at(2024, 1, 15, 10, 30, 45))
        );
        assert_eq!(time("2024-1-5").unwrap_err(), bad_time("2024-1-5", 0));
        // Past the month's end rolls over, as mktime does.
        assert_eq!(time("2024-02-31").unwrap(), Some(at(2024, 3, 2, 0, 0, 0)));
        assert_eq!(time("2024-13-01").unwrap_err(), bad_time("2024-13-01", 5));
        assert_eq!(time("2024-12-32").unwrap_err(), bad_time("2024-12-32", 8));
        assert_eq!(time("20x4-01-01").unwrap_err(), bad_time("20x4-01-01", 2));
    }

    #[test]
    fn month_day_forms_pick_a_past_year() {
        assert_eq!(time("01/15").unwrap(), Some(at(2026, 1, 15, 0, 0, 0)));
        assert_eq!(time("11/30").unwrap(), Some(at(2026, 11, 30, 0, 0, 0)));
        assert_eq!(time("12/25").unwrap(), Some(at(2025, 12, 25, 0, 0, 0)));
        assert_eq!(time("01/15/25").unwrap(), Some(at(2025, 1, 15, 0, 0, 0)));
        assert_eq!(time("1.15.25").unwrap(), Some(at(2025, 1, 15, 0, 0, 0)));
        assert_eq!(time("0115").unwrap(), Some(at(2026, 1, 15, 0, 0, 0)));
        assert_eq!(time("011525").unwrap(), Some(at(2025, 1, 15, 0, 0, 0)));
        assert_eq!(
            time("01/15-10:00").unwrap(),
            Some(at(2026, 1, 15, 10, 0, 0))
        );
        assert_eq!(time("13/01").unwrap_err(), bad_time("13/01", 0));
        assert_eq!(time("01/32").unwrap_err(), bad_time("01/32", 3));
        assert_eq!(time("01/").unwrap_err(), bad_time("01/", 3));
        assert_eq!(time("01/15/2").unwrap_err(), bad_time("01/15/2", 7));
    }

    #[test]
    fn clock_times_mean_today() {
        assert_eq!(time("10:00").unwrap(), Some(at(2026, 11, 21, 10, 0, 0)));
        assert_eq!(time("1:02:03").unwrap(), Some(at(2026, 11, 21, 1, 2, 3)));
        assert_eq!(time("3:05pm").unwrap(), Some(at(2026, 11, 21, 15, 5, 0)));
        assert_eq!(time("12:30 PM").unwrap(), Some(at(2026, 11, 21, 12, 30, 0)));
        assert_eq!(time("12:00am").unwrap(), Some(at(2026, 11, 21, 0, 0, 0)));
        assert_eq!(time("13:00pm").unwrap_err(), bad_time("13:00pm", 5));
        assert_eq!(time("13:00am").unwrap_err(), bad_time("13:00am", 5));
        assert_eq!(time("10:5").unwrap_err(), bad_time("10:5", 4));
        assert_eq!(time("10:60").unwrap_err(), bad_time("10:60", 3));
        assert_eq!(time("10:00:61").unwrap_err(), bad_time("10:00:61", 6));
        assert_eq!(time("123:00").unwrap_err(), bad_time("123:00", 3));
    }

    #[test]
    fn words_and_relative_times() {
        assert_eq!(time("now").unwrap(), Some(NOW));
        assert_eq!(time("now-2days").unwrap(), Some(NOW - 2 * 86_400));
        assert_eq!(time("NOW+1HOUR").unwrap(), Some(NOW + 3600));
        assert_eq!(time("now-30").unwrap(), Some(NOW - 30));
        assert_eq!(time("now - 1 week").unwrap(), Some(NOW - 604_800));
        assert_eq!(time("now-90minutes").unwrap(), Some(NOW - 5400));
        assert_eq!(time("now-5second").unwrap(), Some(NOW - 5));
        assert_eq!(time("today").unwrap(), Some(MIDNIGHT));
        assert_eq!(time("midnight").unwrap(), Some(MIDNIGHT));
        assert_eq!(time("noon").unwrap(), Some(at(2026, 11, 21, 12, 0, 0)));
        assert_eq!(time("elevenses").unwrap(), Some(at(2026, 11, 21, 11, 0, 0)));
        assert_eq!(time("fika").unwrap(), Some(at(2026, 11, 21, 15, 0, 0)));
        assert_eq!(time("teatime").unwrap(), Some(at(2026, 11, 21, 16, 0, 0)));
        assert_eq!(time("tomorrow").unwrap(), Some(at(2026, 11, 22, 0, 0, 0)));
        assert_eq!(
            time("tomorrow noon").unwrap(),
            Some(at(2026, 11, 22, 12, 0, 0))
        );
        assert_eq!(time("uts1700000000").unwrap(), Some(1_700_000_000));
        assert_eq!(time("uts5").unwrap_err(), bad_time("uts5", 0));
        assert_eq!(time("UTSx").unwrap_err(), bad_time("UTSx", 0));
        assert_eq!(time("now*2").unwrap_err(), bad_time("now*2", 3));
        assert_eq!(time("now-").unwrap_err(), bad_time("now-", 3));
        assert_eq!(
            time("now-2fortnights").unwrap_err(),
            bad_time("now-2fortnights", 4)
        );
        assert_eq!(
            time("now+99999999999999999weeks").unwrap_err(),
            bad_time("now+99999999999999999weeks", 26)
        );
        assert_eq!(time("bogus").unwrap_err(), bad_time("bogus", 0));
        assert_eq!(time("é").unwrap_err(), bad_time("é", 0));
    }

    #[test]
    fn empty_time_means_unset() {
        assert_eq!(time("").unwrap(), None);
        assert_eq!(time(" T-").unwrap(), None);
        // An empty -S leaves the default start in place.
        assert_eq!(ok(&["-S", ""]).query.start, Some(MIDNIGHT));
    }

    #[test]
    fn unrepresentable_dates_are_errors() {
        assert_eq!(time("9999-12-31").unwrap(), Some(at(9999, 12, 31, 0, 0, 0)));
        let far = "uts9223372036854775807";
        assert_eq!(time(far).unwrap(), Some(i64::MAX));
        assert_eq!(
            parse_time_in("10:00", i64::MAX, &utc()).unwrap_err(),
            bad_time("10:00", 0)
        );
    }

    #[test]
    fn midnight_in_other_zones() {
        let plus2 = FixedOffset::east_opt(2 * 3600).unwrap();
        // 05:46:40Z is 07:46:40 at +02:00; that day began at 22:00Z the day before.
        assert_eq!(local_midnight(NOW, &plus2), MIDNIGHT - 2 * 3600);
        let minus8 = FixedOffset::west_opt(8 * 3600).unwrap();
        // 21:46:40 on the 20th at -08:00.
        assert_eq!(local_midnight(NOW, &minus8), MIDNIGHT - 86_400 + 8 * 3600);
    }
}
