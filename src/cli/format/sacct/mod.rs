//! `sacct` output: turns the accounting records the controller keeps ([`AcctJob`] with its
//! [`AcctStep`]s) into exactly the text Slurm's `sacct` prints, in its fixed-width form
//! (header, dash line, every column followed by one space, `+` marking a cut value) and its
//! parsable forms (`-p`, `-P`, `--delimiter`). This module owns Slurm's field table (names,
//! default widths, the order `-e` lists them in and prefix matching walks them in), the
//! `-o name[%width]` list parser, the per-field values of job and step rows, and Slurm's
//! unit conversion for sizes (`1234K`, `1.50G`, `--units`, `--noconvert`).
//!
//! It does not parse the command line or choose which jobs the controller returns (see
//! `cli::sacct_args`, whose `SacctArgs` implements [`SacctRequest`], the rows and layout
//! asked for, which this module applies to the records it is given);
//! it reads no clock (callers pass `now`) and does no I/O beyond passwd/group look-ups for
//! the User and Group columns.
//!
//! Fields Slurm knows but canopy does not record (disk I/O, energy per node, TRES usage
//! breakdowns, reservations, ...) are accepted and print empty, as Slurm prints a value its
//! database lacks.

use thiserror::Error;

use super::fields::{is_prefix_ci, FieldDef, FieldTable};
use super::group_name;
use super::time::{fmt_duration_long, fmt_timestamp};
use std::collections::HashMap;

use crate::wire::types::{AcctJob, AcctStep, JobState, StepKind, UnixTime};

/// `sacct` with no `-o`, `-b`, `-l` or `SACCT_FORMAT`.
pub const DEFAULT_FIELDS: &str = "jobid,jobname,partition,account,alloccpus,state,exitcode";

/// `sacct -b`.
pub const BRIEF_FIELDS: &str = "jobid,state,exitcode";

/// `sacct -l`.
pub const LONG_FIELDS: &str = "jobid,jobidraw,jobname,partition,maxvmsize,maxvmsizenode,\
maxvmsizetask,avevmsize,maxrss,maxrssnode,maxrsstask,averss,maxpages,maxpagesnode,maxpagestask,\
avepages,mincpu,mincpunode,mincputask,avecpu,ntasks,alloccpus,elapsed,state,exitcode,avecpufreq,\
reqcpufreqmin,reqcpufreqmax,reqcpufreqgov,reqmem,consumedenergy,maxdiskread,maxdiskreadnode,\
maxdiskreadtask,avediskread,maxdiskwrite,maxdiskwritenode,maxdiskwritetask,avediskwrite,reqtres,\
alloctres,tresusageinave,tresusageinmax,tresusageinmaxn,tresusageinmaxt,tresusageinmin,\
tresusageinminn,tresusageinmint,tresusageintot,tresusageoutmax,tresusageoutmaxn,\
tresusageoutmaxt,tresusageoutave,tresusageouttot";

/// `%width` values beyond this are clamped: Slurm reads them with `atoi`, and an absurd
/// width must not make us allocate gigabytes of padding.
const MAX_WIDTH: i32 = 4096;

/// Slurm's "no value" for a 32-bit id. A step row has no group of its own, so Slurm looks
/// up this gid and prints whatever comes back (normally the number itself).
pub(crate) const NO_VAL_ID: u32 = 0xffff_fffe;

/// Why an `-o`/`SACCT_FORMAT` list was refused (Slurm exits 1 without printing anything).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SacctFieldError {
    /// No field name starts with this text.
    #[error("Invalid field requested: \"{spec}\"")]
    InvalidField { spec: String },
    /// A field Slurm removed, named with what replaced it.
    #[error("{name} has been removed, please use {replacement}")]
    Removed {
        name: &'static str,
        replacement: &'static str,
    },
}

impl SacctFieldError {
    /// Slurm's log level for this message (`sacct: <level>: ...`).
    pub fn level(&self) -> &'static str {
        match self {
            SacctFieldError::InvalidField { .. } => "error",
            SacctFieldError::Removed { .. } => "fatal",
        }
    }
}

/// What a column shows. Several Slurm names share one datum (`AllocCPUS` and `NCPUS`);
/// fields canopy does not record are `NotRecorded`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    Account,
    AllocCpus,
    AllocNodes,
    AllocTres,
    AveCpu,
    AveRss,
    Cluster,
    Comment,
    Constraints,
    ConsumedEnergy,
    ConsumedEnergyRaw,
    CpuTime,
    CpuTimeRaw,
    DerivedExitCode,
    Elapsed,
    ElapsedRaw,
    Eligible,
    End,
    ExitCode,
    Gid,
    Group,
    JobId,
    JobIdRaw,
    JobName,
    MaxRss,
    MaxRssNode,
    MaxRssTask,
    MaxVmSize,
    NNodes,
    NodeList,
    NTasks,
    Partition,
    Planned,
    PlannedCpu,
    PlannedCpuRaw,
    Priority,
    Qos,
    Reason,
    ReqCpus,
    ReqMem,
    ReqNodes,
    ReqTres,
    Restarts,
    Start,
    State,
    Submit,
    SubmitLine,
    Suspended,
    SystemCpu,
    Timelimit,
    TimelimitRaw,
    TotalCpu,
    Uid,
    User,
    UserCpu,
    WorkDir,
    NotRecorded,
}

/// One entry of Slurm's table: its default width (negative = left-justified, as Slurm
/// writes it), its name (the header, matched by prefix) and the datum.
const fn def(width: i32, name: &'static str, field: Field) -> FieldDef<Field> {
    FieldDef::new(field, name)
        .name(name)
        .width(width.unsigned_abs() as usize, width >= 0)
}

use Field as F;

/// Slurm's field table, in its order: `-e` prints it in this order and `-o` prefix
/// matching takes the first entry that fits, so the order is behaviour, not style. Each
/// entry's name is also its header; its default width is right-justified unless marked
/// left (Slurm's negative widths).
static FIELDS: FieldTable<Field> = FieldTable {
    defs: &[
        def(10, "Account", F::Account),
        def(15, "AdminComment", F::NotRecorded),
        def(10, "AllocCPUS", F::AllocCpus),
        def(10, "AllocNodes", F::AllocNodes),
        def(10, "AllocTRES", F::AllocTres),
        def(7, "AssocID", F::NotRecorded),
        def(10, "AveCPU", F::AveCpu),
        def(10, "AveCPUFreq", F::NotRecorded),
        def(14, "AveDiskRead", F::NotRecorded),
        def(14, "AveDiskWrite", F::NotRecorded),
        def(10, "AvePages", F::NotRecorded),
        def(10, "AveRSS", F::AveRss),
        def(10, "AveVMSize", F::NotRecorded),
        def(16, "BlockID", F::NotRecorded),
        def(10, "Cluster", F::Cluster),
        def(14, "Comment", F::Comment),
        def(19, "Constraints", F::Constraints),
        def(14, "ConsumedEnergy", F::ConsumedEnergy),
        def(17, "ConsumedEnergyRaw", F::ConsumedEnergyRaw),
        def(19, "Container", F::NotRecorded),
        def(10, "CPUTime", F::CpuTime),
        def(10, "CPUTimeRAW", F::CpuTimeRaw),
        def(-21, "DBIndex", F::NotRecorded),
        def(15, "DerivedExitCode", F::DerivedExitCode),
        def(10, "Elapsed", F::Elapsed),
        def(10, "ElapsedRaw", F::ElapsedRaw),
        def(19, "Eligible", F::Eligible),
        def(19, "End", F::End),
        def(8, "ExitCode", F::ExitCode),
        def(14, "Extra", F::NotRecorded),
        def(8, "FailedNode", F::NotRecorded),
        def(19, "Flags", F::NotRecorded),
        def(6, "GID", F::Gid),
        def(9, "Group", F::Group),
        def(-12, "JobID", F::JobId),
        def(-12, "JobIDRaw", F::JobIdRaw),
        def(10, "JobName", F::JobName),
        def(9, "Layout", F::NotRecorded),
        def(10, "Licenses", F::NotRecorded),
        def(12, "MaxDiskRead", F::NotRecorded),
        def(15, "MaxDiskReadNode", F::NotRecorded),
        def(15, "MaxDiskReadTask", F::NotRecorded),
        def(12, "MaxDiskWrite", F::NotRecorded),
        def(16, "MaxDiskWriteNode", F::NotRecorded),
        def(16, "MaxDiskWriteTask", F::NotRecorded),
        def(8, "MaxPages", F::NotRecorded),
        def(12, "MaxPagesNode", F::NotRecorded),
        def(14, "MaxPagesTask", F::NotRecorded),
        def(10, "MaxRSS", F::MaxRss),
        def(10, "MaxRSSNode", F::MaxRssNode),
        def(10, "MaxRSSTask", F::MaxRssTask),
        def(10, "MaxVMSize", F::MaxVmSize),
        def(14, "MaxVMSizeNode", F::NotRecorded),
        def(14, "MaxVMSizeTask", F::NotRecorded),
        def(12, "McsLabel", F::NotRecorded),
        def(10, "MinCPU", F::NotRecorded),
        def(10, "MinCPUNode", F::NotRecorded),
        def(10, "MinCPUTask", F::NotRecorded),
        def(10, "NCPUS", F::AllocCpus),
        def(8, "NNodes", F::NNodes),
        def(15, "NodeList", F::NodeList),
        def(8, "NTasks", F::NTasks),
        def(10, "Partition", F::Partition),
        def(10, "Planned", F::Planned),
        def(10, "PlannedCPU", F::PlannedCpu),
        def(13, "PlannedCPURAW", F::PlannedCpuRaw),
        def(10, "Priority", F::Priority),
        def(10, "QOS", F::Qos),
        def(6, "QOSRAW", F::NotRecorded),
        def(10, "QOSREQ", F::NotRecorded),
        def(22, "Reason", F::Reason),
        def(10, "ReqCPUFreq", F::NotRecorded),
        def(13, "ReqCPUFreqGov", F::NotRecorded),
        def(13, "ReqCPUFreqMax", F::NotRecorded),
        def(13, "ReqCPUFreqMin", F::NotRecorded),
        def(8, "ReqCPUS", F::ReqCpus),
        def(10, "ReqMem", F::ReqMem),
        def(8, "ReqNodes", F::ReqNodes),
        def(10, "ReqTRES", F::ReqTres),
        def(20, "Reservation", F::NotRecorded),
        def(8, "ReservationId", F::NotRecorded),
        def(8, "Restarts", F::Restarts),
        def(11, "SegmentSize", F::NotRecorded),
        def(14, "SLUID", F::NotRecorded),
        def(19, "Start", F::Start),
        def(10, "State", F::State),
        def(20, "StdErr", F::NotRecorded),
        def(20, "StdIn", F::NotRecorded),
        def(20, "StdOut", F::NotRecorded),
        def(19, "Submit", F::Submit),
        def(20, "SubmitLine", F::SubmitLine),
        def(10, "Suspended", F::Suspended),
        def(15, "SystemComment", F::NotRecorded),
        def(10, "SystemCPU", F::SystemCpu),
        def(10, "Timelimit", F::Timelimit),
        def(10, "TimelimitRaw", F::TimelimitRaw),
        def(10, "TotalCPU", F::TotalCpu),
        def(14, "TRESUsageInAve", F::NotRecorded),
        def(14, "TRESUsageInMax", F::NotRecorded),
        def(18, "TRESUsageInMaxNode", F::NotRecorded),
        def(18, "TRESUsageInMaxTask", F::NotRecorded),
        def(14, "TRESUsageInMin", F::NotRecorded),
        def(18, "TRESUsageInMinNode", F::NotRecorded),
        def(18, "TRESUsageInMinTask", F::NotRecorded),
        def(14, "TRESUsageInTot", F::NotRecorded),
        def(15, "TRESUsageOutAve", F::NotRecorded),
        def(15, "TRESUsageOutMax", F::NotRecorded),
        def(19, "TRESUsageOutMaxNode", F::NotRecorded),
        def(19, "TRESUsageOutMaxTask", F::NotRecorded),
        def(15, "TRESUsageOutMin", F::NotRecorded),
        def(19, "TRESUsageOutMinNode", F::NotRecorded),
        def(19, "TRESUsageOutMinTask", F::NotRecorded),
        def(15, "TRESUsageOutTot", F::NotRecorded),
        def(6, "UID", F::Uid),
        def(9, "User", F::User),
        def(10, "UserCPU", F::UserCpu),
        def(10, "WCKey", F::NotRecorded),
        def(10, "WCKeyID", F::NotRecorded),
        def(20, "WorkDir", F::WorkDir),
    ],
};

/// Names Slurm rejects by name with a pointer to their replacement (only when nothing in
/// the table matches them as a prefix).
const REMOVED: &[(&str, &str)] = &[("AllocGRES", "AllocTRES"), ("ReqGRES", "ReqTRES")];

/// One output column: an index into [`FIELDS`] and its width (negative = left-justified).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Column {
    field: usize,
    width: i32,
}

/// The columns `sacct` prints, parsed from an `-o`/`SACCT_FORMAT` list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SacctFormat {
    columns: Vec<Column>,
}

impl SacctFormat {
    /// Parses a comma-separated field list the way Slurm does: leading blanks are
    /// skipped, empty entries ignored, names matched case-insensitively as prefixes
    /// against the field table in table order (first fit wins, so `jobid` is `JobID`
    /// and `j` is too), any prefix of `ALL` adds every field, and `name%N` / `name%-N`
    /// sets the width (right / left justified; the text after `%` is read like `atoi`).
    pub fn parse(list: &str) -> Result<Self, SacctFieldError> {
        let mut picks: Vec<(usize, Option<i32>)> = Vec::new();
        for token in list.split(',') {
            let token = token.trim_start_matches(|c: char| c.is_ascii_whitespace());
            if token.is_empty() {
                continue;
            }
            let (name, width) = match token.split_once('%') {
                Some((name, width)) => (name, Some(atoi_width(width))),
                None => (token, None),
            };
            if is_prefix_ci(name, "ALL") {
                picks.extend((0..FIELDS.defs.len()).map(|i| (i, width)));
            } else {
                picks.push((lookup(name)?, width));
            }
        }
        // Slurm stores a `%N` in its shared field table, so the last width given for a
        // field applies to every column showing that field, even earlier ones.
        let mut widths: Vec<i32> = FIELDS.defs.iter().map(signed_width).collect();
        for (index, width) in &picks {
            if let (Some(slot), Some(width)) = (widths.get_mut(*index), width) {
                *slot = *width;
            }
        }
        let columns = picks
            .iter()
            .map(|&(field, _)| Column {
                field,
                width: widths.get(field).copied().unwrap_or_default(),
            })
            .collect();
        Ok(Self { columns })
    }

    fn def(&self, column: &Column) -> Option<&'static FieldDef<Field>> {
        FIELDS.defs.get(column.field)
    }
}

/// The first table entry whose name starts with `name` (ignoring case), or Slurm's error.
fn lookup(name: &str) -> Result<usize, SacctFieldError> {
    if let Some(index) = FIELDS.position_by_prefix(name) {
        return Ok(index);
    }
    match REMOVED
        .iter()
        .find(|(old, _)| old.eq_ignore_ascii_case(name))
    {
        Some(&(old, new)) => Err(SacctFieldError::Removed {
            name: old,
            replacement: new,
        }),
        None => Err(SacctFieldError::InvalidField {
            spec: name.to_string(),
        }),
    }
}

/// A table width as Slurm stores it: negative for a left-justified column.
fn signed_width(def: &FieldDef<Field>) -> i32 {
    let w = i32::try_from(def.width).unwrap_or(MAX_WIDTH);
    if def.right {
        w
    } else {
        -w
    }
}

/// C's `atoi` for a `%width`: optional blanks and sign, then digits up to the first
/// non-digit; nothing numeric reads as 0. Clamped to ±[`MAX_WIDTH`].
fn atoi_width(text: &str) -> i32 {
    let text = text.trim_start_matches(|c: char| c.is_ascii_whitespace());
    let (negative, digits) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    let magnitude = digits
        .bytes()
        .take_while(u8::is_ascii_digit)
        .fold(0i32, |acc, d| {
            acc.saturating_mul(10)
                .saturating_add(i32::from(d - b'0'))
                .min(MAX_WIDTH)
        });
    if negative {
        -magnitude
    } else {
        magnitude
    }
}

/// `sacct -e`: every field name, four to a line, each padded to 19 characters.
pub fn help_format() -> String {
    let mut out = String::new();
    for (i, f) in FIELDS.defs.iter().enumerate() {
        if i % 4 != 0 {
            out.push(' ');
        } else if i > 0 {
            out.push('\n');
        }
        out.push_str(&format!("{:<19}", f.header));
    }
    out.push('\n');
    out
}

/// How sizes are printed: Slurm's default "largest exact unit" (half units count as exact,
/// so 1536M is `1.50G`), `--units=X` (always that unit), or `--noconvert` (as stored).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Conversion {
    units: Option<char>,
    noconvert: bool,
}

/// Unit letters by power of 1024; index 0 (bytes, plain counts) has no letter.
const UNIT_LETTERS: [&str; 6] = ["", "K", "M", "G", "T", "P"];
const UNIT_MEGA: usize = 2;

/// A count in unit `orig` (0 = none, 1 = K, 2 = M, ...) as Slurm's `convert_num_unit`
/// prints it: `0` for zero, a whole number with its unit letter when exact, else two
/// decimals.
fn convert_num(value: u64, orig: usize, conv: Conversion) -> String {
    if value == 0 {
        return "0".to_string();
    }
    // f64 as in Slurm: the values are sizes and counts, far below 2^53 in practice.
    let mut num = value as f64;
    let mut unit = orig;
    if let Some(target) = conv.units.and_then(unit_index) {
        while unit > target {
            num *= 1024.0;
            unit -= 1;
        }
        while unit < target {
            num /= 1024.0;
            unit += 1;
        }
    } else if !conv.noconvert {
        while num >= 1024.0 && (num as u64) % 512 == 0 {
            num /= 1024.0;
            unit += 1;
        }
    }
    let letter = UNIT_LETTERS.get(unit).copied().unwrap_or("?");
    if num.fract() == 0.0 {
        format!("{}{letter}", num as u64)
    } else {
        format!("{num:.2}{letter}")
    }
}

/// The unit index of a `--units` letter.
fn unit_index(letter: char) -> Option<usize> {
    UNIT_LETTERS
        .iter()
        .position(|u| u.eq_ignore_ascii_case(letter.encode_utf8(&mut [0; 4])))
        .filter(|&i| i > 0)
}

/// One cell before layout. The kinds differ in how Slurm fits them: text is cut with a
/// trailing `+`, dates are cut silently, numbers and durations are never cut.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Value {
    Text(String),
    Count(Option<u64>),
    Date(Option<UnixTime>),
    Duration(Option<u64>),
}

/// Which record a row shows.
#[derive(Clone, Copy)]
enum Row<'a> {
    /// A job; for the pending tasks of an array shown as one row, the
    /// indices it stands for (`1-4%1`).
    Job(&'a AcctJob, Option<&'a str>),
    Step(&'a AcctJob, &'a AcctStep),
}

/// Everything a cell may depend on besides its row.
#[derive(Clone, Copy)]
struct Ctx {
    now: UnixTime,
    conv: Conversion,
}

/// How the lines are laid out.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Layout {
    /// Padded columns, each followed by one space.
    Fixed,
    /// Raw values joined by `delimiter`; `trailing` adds it after the last one too (`-p`).
    Parsable { delimiter: String, trailing: bool },
}

/// What [`render`] is asked for: the layout and which rows to print. The sacct command
/// line (`cli::sacct_args::SacctArgs`) implements it; a trait rather than that type, so
/// this module does not depend on the parser that depends on its field table.
pub trait SacctRequest {
    /// The columns.
    fn format(&self) -> &SacctFormat;
    /// False with `-n`: no header lines.
    fn header(&self) -> bool;
    /// `Some` in parsable mode (`-p`/`-P`): the delimiter.
    fn delimiter(&self) -> Option<&str>;
    /// `-p`: the delimiter also follows the last field.
    fn trailing_delimiter(&self) -> bool;
    /// `--units`: every size in this unit.
    fn units(&self) -> Option<char>;
    /// `--noconvert`: sizes in the unit they are stored in.
    fn noconvert(&self) -> bool;
    /// `-X`: job rows only.
    fn allocations(&self) -> bool;
    /// `--array`: one row per pending array task.
    fn expand_arrays(&self) -> bool;
    /// Whether `job` belongs in the output at all.
    fn selects(&self, job: &AcctJob) -> bool;
    /// Whether the job's own row is printed.
    fn shows_job_row(&self, job: &AcctJob) -> bool;
    /// Whether a step row is printed (before `-X`).
    fn shows_step(&self, job: &AcctJob, step: StepKind) -> bool;
}

/// Renders `sacct` output for `jobs` (those the controller returned for the query):
/// optional header, then each job the client-side filters keep, in submit order, followed
/// (unless `-X`) by its steps `N.batch`, `N.extern`, `N.0`, ...
pub fn render(jobs: &[AcctJob], args: &impl SacctRequest, now: UnixTime) -> String {
    let layout = match args.delimiter() {
        Some(delimiter) => Layout::Parsable {
            delimiter: delimiter.to_string(),
            trailing: args.trailing_delimiter(),
        },
        None => Layout::Fixed,
    };
    let ctx = Ctx {
        now,
        conv: Conversion {
            units: args.units(),
            noconvert: args.noconvert(),
        },
    };
    let format = args.format();
    let mut out = String::new();
    if args.header() {
        header(format, &layout, &mut out);
    }
    let mut selected: Vec<&AcctJob> = jobs.iter().filter(|j| args.selects(j)).collect();
    // Array tasks in index order under their array id, as Slurm lists them.
    selected.sort_by_key(|j| {
        let (id, task) = j
            .array
            .map_or((j.job_id, 0), |a| (a.array_job_id, a.task_id));
        (j.submit_time, id, task)
    });
    let sets = if args.expand_arrays() {
        HashMap::new()
    } else {
        group_pending_arrays(&mut selected)
    };
    for job in selected {
        if args.shows_job_row(job) {
            // A requeued job's earlier runs (-D) share its id, not its set.
            let set = sets
                .get(&job.job_id)
                .filter(|_| job.state == JobState::Pending)
                .map(String::as_str);
            line(format, &layout, Row::Job(job, set), ctx, &mut out);
        }
        if args.allocations() {
            continue;
        }
        let mut steps: Vec<&AcctStep> = job
            .steps
            .iter()
            .filter(|s| args.shows_step(job, s.kind))
            .collect();
        steps.sort_by_key(|s| step_order(s.kind));
        for step in steps {
            line(format, &layout, Row::Step(job, step), ctx, &mut out);
        }
    }
    out
}

/// Without `--array`, the pending tasks of an array are one row
/// (`5_[1-4%1]`), where the lowest index is; the others are dropped from
/// `jobs`. Returns that row's job id → its index set.
fn group_pending_arrays(jobs: &mut Vec<&AcctJob>) -> HashMap<u32, String> {
    let mut tasks: HashMap<u32, Vec<(u32, u32)>> = HashMap::new();
    for j in jobs.iter() {
        if let Some(a) = j.array.filter(|_| j.state == JobState::Pending) {
            tasks
                .entry(a.array_job_id)
                .or_default()
                .push((a.task_id, j.job_id));
        }
    }
    let mut sets = HashMap::new();
    let mut dropped = std::collections::HashSet::new();
    for group in tasks.values_mut().filter(|g| g.len() > 1) {
        group.sort_unstable();
        let indices: Vec<u32> = group.iter().map(|t| t.0).collect();
        let throttle = jobs
            .iter()
            .find(|j| j.job_id == group[0].1)
            .and_then(|j| j.array)
            .and_then(|a| a.throttle);
        let mut set = crate::sched::array::compress(&indices);
        if let Some(t) = throttle {
            set.push_str(&format!("%{t}"));
        }
        sets.insert(group[0].1, set);
        dropped.extend(group.iter().skip(1).map(|t| t.1));
    }
    if !dropped.is_empty() {
        jobs.retain(|j| !dropped.contains(&j.job_id));
    }
    sets
}

/// Slurm lists steps by their numeric step id, in which `batch` and `extern` are small
/// negative numbers: `.batch`, `.extern`, `.0`, `.1`, ...
fn step_order(kind: StepKind) -> i64 {
    match kind {
        StepKind::Batch => -5,
        StepKind::Extern => -4,
        StepKind::Numbered(n) => i64::from(n),
    }
}

/// The header line (and, in fixed layout, the dash line under it).
fn header(format: &SacctFormat, layout: &Layout, out: &mut String) {
    let count = format.columns.len();
    for (i, column) in format.columns.iter().enumerate() {
        let name = format.def(column).map_or("", |d| d.header);
        match layout {
            Layout::Fixed => {
                out.push_str(&pad(&cut(name, abs_width(column.width)), column.width));
                out.push(' ');
            }
            Layout::Parsable { .. } => {
                out.push_str(name);
                push_delimiter(layout, i + 1 == count, out);
            }
        }
    }
    out.push('\n');
    if *layout == Layout::Fixed {
        for column in &format.columns {
            out.push_str(&"-".repeat(abs_width(column.width)));
            out.push(' ');
        }
        out.push('\n');
    }
}

/// One job or step line.
fn line(format: &SacctFormat, layout: &Layout, row: Row<'_>, ctx: Ctx, out: &mut String) {
    let count = format.columns.len();
    for (i, column) in format.columns.iter().enumerate() {
        let field = format.def(column).map_or(F::NotRecorded, |d| d.code);
        let value = value(field, row, ctx);
        match layout {
            Layout::Fixed => {
                out.push_str(&fixed_cell(&value, column.width));
                out.push(' ');
            }
            Layout::Parsable { .. } => {
                out.push_str(&raw_cell(&value));
                push_delimiter(layout, i + 1 == count, out);
            }
        }
    }
    out.push('\n');
}

/// After a parsable field: the delimiter, except after the last field with `-P`.
fn push_delimiter(layout: &Layout, last: bool, out: &mut String) {
    if let Layout::Parsable {
        delimiter,
        trailing,
    } = layout
    {
        if *trailing || !last {
            out.push_str(delimiter);
        }
    }
}

/// A value fitted to a fixed-width column.
fn fixed_cell(value: &Value, width: i32) -> String {
    let w = abs_width(width);
    match value {
        Value::Text(text) => pad(&cut_with_plus(text, w), width),
        Value::Date(t) => pad(&cut(&fmt_timestamp(*t), w), width),
        Value::Count(Some(n)) => pad(&n.to_string(), width),
        Value::Duration(Some(secs)) => pad(&fmt_duration_long(*secs), width),
        Value::Count(None) | Value::Duration(None) => pad(" ", width),
    }
}

/// A value as `-p`/`-P` print it: whole, unpadded, empty when unset.
fn raw_cell(value: &Value) -> String {
    match value {
        Value::Text(text) => text.clone(),
        Value::Date(t) => fmt_timestamp(*t),
        Value::Count(n) => n.map(|n| n.to_string()).unwrap_or_default(),
        Value::Duration(secs) => secs.map(fmt_duration_long).unwrap_or_default(),
    }
}

fn abs_width(width: i32) -> usize {
    usize::try_from(width.unsigned_abs()).unwrap_or(usize::MAX)
}

/// Right-justifies for a positive width, left-justifies for a negative one.
fn pad(text: &str, width: i32) -> String {
    let w = abs_width(width);
    if width >= 0 {
        format!("{text:>w$}")
    } else {
        format!("{text:<w$}")
    }
}

/// The first `w` characters.
fn cut(text: &str, w: usize) -> String {
    text.chars().take(w).collect()
}

/// Slurm's text truncation: a value longer than the column keeps `w - 1` characters
/// and a `+` (`CANCELLED+`, `715219_23.b+`).
fn cut_with_plus(text: &str, w: usize) -> String {
    if w == 0 {
        return String::new();
    }
    if text.chars().count() <= w {
        return text.to_string();
    }
    let mut cut: String = text.chars().take(w - 1).collect();
    cut.push('+');
    cut
}

/// The value of `field` for one row.
fn value(field: Field, row: Row<'_>, ctx: Ctx) -> Value {
    let job = match row {
        Row::Job(job, _) | Row::Step(job, _) => job,
    };
    let step = match row {
        Row::Job(..) => None,
        Row::Step(_, step) => Some(step),
    };
    match field {
        F::Account => Value::Text(job.account.clone()),
        F::Cluster => Value::Text(job.cluster.clone()),
        F::AllocCpus => Value::Count(Some(u64::from(row_cpus(row)))),
        F::AllocNodes => Value::Text(convert_num(
            u64::from(row_nodes(row)),
            0,
            Conversion {
                units: None,
                ..ctx.conv
            },
        )),
        F::AllocTres => Value::Text(alloc_tres(row, ctx.conv)),
        F::ReqTres => Value::Text(match step {
            None => req_tres(job, ctx.conv),
            Some(_) => String::new(),
        }),
        F::AveCpu => Value::Text(match step {
            Some(s) => {
                let tasks = u64::from(s.num_tasks.max(1));
                // Slurm prints the per-task average in whole seconds.
                let total = s.user_cpu_ms.saturating_add(s.system_cpu_ms);
                cpu_time_text(total / tasks / 1000 * 1000)
            }
            None => String::new(),
        }),
        F::Comment => job_text(step, &job.comment),
        F::Constraints => job_text(step, &job.constraints),
        F::ConsumedEnergy => Value::Text("0".to_string()),
        F::ConsumedEnergyRaw => Value::Count(Some(0)),
        F::CpuTime => Value::Duration(Some(cpu_time_secs(row, ctx.now))),
        F::CpuTimeRaw => Value::Count(Some(cpu_time_secs(row, ctx.now))),
        F::Elapsed => Value::Duration(Some(elapsed_secs(row, ctx.now))),
        F::ElapsedRaw => Value::Count(Some(elapsed_secs(row, ctx.now))),
        F::DerivedExitCode => Value::Text(match step {
            None => format!("{}:{}", job.derived_exit_code.0, job.derived_exit_code.1),
            Some(_) => String::new(),
        }),
        F::ExitCode => {
            let (code, signal) = step.map_or(job.exit_code, |s| s.exit_code);
            // Slurm folds shell-style "128 + n" codes back to n.
            let code = if code >= 128 { code - 128 } else { code };
            Value::Text(format!("{code}:{signal}"))
        }
        F::Eligible => Value::Date(match step {
            None => job.eligible_time,
            Some(s) => s.start_time,
        }),
        F::Submit => Value::Date(match step {
            None => Some(job.submit_time),
            Some(s) => s.start_time,
        }),
        F::Start => Value::Date(step.map_or(job.start_time, |s| s.start_time)),
        F::End => Value::Date(match step {
            None => job.end_time,
            Some(s) => s.end_time.or(job.end_time),
        }),
        F::Gid => Value::Count(match step {
            None => Some(u64::from(job.gid)),
            Some(_) => None,
        }),
        F::Group => {
            let gid = step.map_or(job.gid, |_| NO_VAL_ID);
            Value::Text(group_name(gid).unwrap_or_else(|| gid.to_string()))
        }
        F::Uid => Value::Count(match step {
            None => Some(u64::from(job.uid)),
            Some(_) => None,
        }),
        F::User => Value::Text(match step {
            None if job.user.is_empty() => user_name(job.uid),
            None => job.user.clone(),
            Some(_) => String::new(),
        }),
        F::JobIdRaw => Value::Text(match (step, row) {
            (None, Row::Job(_, Some(_))) => {
                job.array.map_or(job.job_id, |a| a.array_job_id).to_string()
            }
            (None, _) => job.job_id.to_string(),
            (Some(s), _) => format!("{}.{}", job.job_id, step_suffix(s.kind)),
        }),
        F::JobId => {
            let id = match (job.array, row) {
                (Some(a), Row::Job(_, Some(set))) => format!("{}_[{set}]", a.array_job_id),
                (Some(a), _) => format!("{}_{}", a.array_job_id, a.task_id),
                (None, _) => job.job_id.to_string(),
            };
            Value::Text(match step {
                None => id,
                Some(s) => format!("{id}.{}", step_suffix(s.kind)),
            })
        }
        F::JobName => Value::Text(step.map_or(&job.name, |s| &s.name).clone()),
        F::MaxRss => Value::Text(step_size(step.map(|s| s.max_rss_kb), ctx.conv)),
        F::MaxVmSize => Value::Text(step_size(step.map(|s| s.max_vmsize_kb), ctx.conv)),
        // Measured steps only (a node's report, or the batch step's cgroup).
        F::AveRss => Value::Text(step_size(
            step.filter(|s| s.usage.nodes > 0)
                .map(|s| s.usage.ave_rss_kb()),
            ctx.conv,
        )),
        F::MaxRssNode => Value::Text(
            step.filter(|s| s.usage.nodes > 0)
                .map(|s| s.usage.max_rss_node.clone())
                .unwrap_or_default(),
        ),
        F::MaxRssTask => Value::Count(
            step.filter(|s| s.usage.nodes > 0)
                .and_then(|s| s.usage.max_rss_task)
                .map(u64::from),
        ),
        F::NNodes => Value::Count(Some(u64::from(match step {
            None if job.num_nodes == 0 => job.req_nodes.max(1),
            None => job.num_nodes,
            Some(s) => s.num_nodes,
        }))),
        F::NodeList => Value::Text(match step {
            // Slurm records a job that never got nodes with this literal text.
            None if job.nodes.is_empty() => "None assigned".to_string(),
            None => job.nodes.clone(),
            Some(s) => s.nodes.clone(),
        }),
        F::NTasks => Value::Count(step.map(|s| u64::from(s.num_tasks))),
        F::Partition => job_text(step, &job.partition),
        F::Planned => Value::Duration(planned(step, job, ctx.now)),
        F::PlannedCpu => Value::Duration(planned_cpu(step, job, ctx.now)),
        F::PlannedCpuRaw => Value::Count(planned_cpu(step, job, ctx.now)),
        F::Priority => Value::Count(match step {
            None => Some(u64::from(job.priority)),
            Some(_) => None,
        }),
        F::Qos => job_text(step, &job.qos),
        F::Reason => job_text(step, &job.reason),
        F::ReqCpus => Value::Count(Some(u64::from(match step {
            None => job.req_cpus,
            Some(_) => row_cpus(row),
        }))),
        F::ReqMem => Value::Text(match step {
            None => convert_num(req_mem_mb(job), UNIT_MEGA, ctx.conv),
            Some(_) => String::new(),
        }),
        F::ReqNodes => Value::Text(convert_num(
            u64::from(match step {
                None => job.req_nodes.max(1),
                Some(s) => s.num_nodes,
            }),
            0,
            ctx.conv,
        )),
        F::Restarts => Value::Count(match step {
            None => Some(u64::from(job.restarts)),
            Some(_) => None,
        }),
        F::State => Value::Text(step.map_or(job.state, |s| s.state).name().to_string()),
        F::SubmitLine => job_text(step, &job.submit_line),
        // The job's time suspended; its steps show the same, as sacct does.
        F::Suspended => Value::Duration(Some(job.suspended_secs)),
        F::SystemCpu => Value::Text(cpu_time_text(cpu_ms(row, |s| s.system_cpu_ms))),
        F::UserCpu => Value::Text(cpu_time_text(cpu_ms(row, |s| s.user_cpu_ms))),
        F::TotalCpu => Value::Text(cpu_time_text(cpu_ms(row, |s| {
            s.user_cpu_ms.saturating_add(s.system_cpu_ms)
        }))),
        F::Timelimit => Value::Text(match (step, job.time_limit_min) {
            (Some(_), _) | (None, Some(0)) => String::new(),
            (None, None) => "UNLIMITED".to_string(),
            (None, Some(m)) => fmt_duration_long(u64::from(m) * 60),
        }),
        F::TimelimitRaw => Value::Text(match (step, job.time_limit_min) {
            (Some(_), _) | (None, Some(0)) => String::new(),
            (None, None) => "UNLIMITED".to_string(),
            (None, Some(m)) => m.to_string(),
        }),
        F::WorkDir => job_text(step, &job.workdir),
        F::NotRecorded => Value::Text(String::new()),
    }
}

/// A job-only text field: the job's value on its own row, empty on step rows.
fn job_text(step: Option<&AcctStep>, text: &str) -> Value {
    Value::Text(match step {
        None => text.to_string(),
        Some(_) => String::new(),
    })
}

/// `batch`, `extern` or the step number, as it follows `N.` in a step id.
fn step_suffix(kind: StepKind) -> String {
    match kind {
        StepKind::Batch => "batch".to_string(),
        StepKind::Extern => "extern".to_string(),
        StepKind::Numbered(n) => n.to_string(),
    }
}

/// CPUs of the row: the job's allocation, or the step's (falling back to the job's when
/// the step recorded none, as Slurm does).
fn row_cpus(row: Row<'_>) -> u32 {
    match row {
        Row::Job(job, _) => job.alloc_cpus,
        Row::Step(job, step) if step.alloc_cpus == 0 => job.alloc_cpus,
        Row::Step(_, step) => step.alloc_cpus,
    }
}

/// Nodes allocated to the row (0 for a job that never started).
fn row_nodes(row: Row<'_>) -> u32 {
    match row {
        Row::Job(job, _) => job.num_nodes,
        Row::Step(_, step) => step.num_nodes,
    }
}

/// A timestamp Slurm treats as set (0 means "never").
fn set_time(t: Option<UnixTime>) -> Option<UnixTime> {
    t.filter(|&t| t > 0)
}

/// Seconds between two times, 0 if the end is not after the start.
fn secs_between(from: UnixTime, to: UnixTime) -> u64 {
    u64::try_from(to.saturating_sub(from)).unwrap_or(0)
}

/// Wall time of the row: from start to end (or to `now` while running), 0 if it never
/// started. A step with no end of its own ends with its job, as Slurm fills it in.
fn elapsed_secs(row: Row<'_>, now: UnixTime) -> u64 {
    // Time the job spent suspended is not run time (slurmdbd subtracts
    // it too); canopy keeps it for the job, not per step.
    let (start, end, suspended) = match row {
        Row::Job(job, _) => (job.start_time, job.end_time, job.suspended_secs),
        Row::Step(job, step) => (step.start_time, step.end_time.or(job.end_time), 0),
    };
    match set_time(start) {
        Some(start) => secs_between(start, set_time(end).unwrap_or(now)).saturating_sub(suspended),
        None => 0,
    }
}

/// CPUTime: elapsed seconds times the row's CPUs.
fn cpu_time_secs(row: Row<'_>, now: UnixTime) -> u64 {
    elapsed_secs(row, now).saturating_mul(u64::from(row_cpus(row)))
}

/// Planned: how long the job waited from eligible to start (or to its end, if it ended
/// without starting, or to `now` while it still waits). Job rows only.
fn planned(step: Option<&AcctStep>, job: &AcctJob, now: UnixTime) -> Option<u64> {
    if step.is_some() {
        return None;
    }
    let Some(eligible) = set_time(job.eligible_time) else {
        return Some(0);
    };
    let until = set_time(job.start_time)
        .or(set_time(job.end_time))
        .unwrap_or(now);
    Some(secs_between(eligible, until))
}

/// PlannedCPU: the wait (eligible to start, or to `now`) times the CPUs requested.
fn planned_cpu(step: Option<&AcctStep>, job: &AcctJob, now: UnixTime) -> Option<u64> {
    if step.is_some() {
        return None;
    }
    let Some(eligible) = set_time(job.eligible_time) else {
        return Some(0);
    };
    let until = set_time(job.start_time).unwrap_or(now);
    Some(secs_between(eligible, until).saturating_mul(u64::from(job.req_cpus)))
}

/// CPU time of the row in milliseconds: the step's own, or for a job the sum over its
/// finished steps (Slurm adds up only steps that have ended).
fn cpu_ms(row: Row<'_>, of: impl Fn(&AcctStep) -> u64) -> u64 {
    match row {
        Row::Step(_, step) => of(step),
        Row::Job(job, _) => job
            .steps
            .iter()
            .filter(|s| s.state.is_finished())
            .map(&of)
            .fold(0, u64::saturating_add),
    }
}

/// CPU times as Slurm prints them: `D-HH:MM:SS`, `HH:MM:SS`, `MM:SS.mmm` when under an
/// hour with a fractional second, else `00:MM:SS`.
fn cpu_time_text(ms: u64) -> String {
    let secs = ms / 1000;
    let millis = ms % 1000;
    let (days, hours, minutes, seconds) = (
        secs / 86_400,
        (secs / 3600) % 24,
        (secs / 60) % 60,
        secs % 60,
    );
    if days > 0 {
        format!("{days}-{hours:02}:{minutes:02}:{seconds:02}")
    } else if hours > 0 {
        format!("{hours:02}:{minutes:02}:{seconds:02}")
    } else if millis > 0 {
        format!("{minutes:02}:{seconds:02}.{millis:03}")
    } else {
        format!("00:{minutes:02}:{seconds:02}")
    }
}

/// MaxRSS/MaxVMSize: step rows only, empty when not measured (0); Slurm stores bytes.
fn step_size(kib: Option<u64>, conv: Conversion) -> String {
    match kib {
        Some(kib) if kib > 0 => convert_num(kib.saturating_mul(1024), 0, conv),
        _ => String::new(),
    }
}

/// Job memory in MiB for a given node and CPU count: per CPU or per node, as requested.
fn job_mem_mb(job: &AcctJob, nodes: u32, cpus: u32) -> u64 {
    let count = if job.mem_per_cpu { cpus } else { nodes };
    job.req_mem_mb.saturating_mul(u64::from(count))
}

/// ReqMem: the job's whole memory request (Slurm ≥ 21.08 prints the total, no `n`/`c`).
fn req_mem_mb(job: &AcctJob) -> u64 {
    job_mem_mb(job, job.req_nodes.max(1), job.req_cpus)
}

/// The TRES canopy tracks for one row.
struct Tres {
    cpus: u32,
    /// Jobs (and their `extern` step) carry billing, which defaults to the CPU count.
    billing: bool,
    mem_mb: u64,
    nodes: u32,
    /// `gres/gpu=2` entries, by name.
    gres: Vec<(String, u64)>,
}

impl Tres {
    /// The list sorted by name, as sacct prints it (`billing=4,cpu=4,mem=16G,node=1`);
    /// memory carries its unit and is left out when zero.
    fn text(&self, conv: Conversion) -> String {
        let mut parts: Vec<(&str, String)> = Vec::new();
        if self.billing {
            parts.push(("billing", self.cpus.to_string()));
        }
        parts.push(("cpu", self.cpus.to_string()));
        if self.mem_mb > 0 {
            parts.push(("mem", convert_num(self.mem_mb, UNIT_MEGA, conv)));
        }
        parts.push(("node", self.nodes.to_string()));
        let gres: Vec<(String, String)> = self
            .gres
            .iter()
            .filter(|(_, n)| *n > 0)
            .map(|(g, n)| (format!("gres/{g}"), n.to_string()))
            .collect();
        let mut parts: Vec<(&str, String)> = parts
            .into_iter()
            .chain(gres.iter().map(|(k, v)| (k.as_str(), v.clone())))
            .collect();
        parts.sort_by_key(|(name, _)| *name);
        parts
            .iter()
            .map(|(name, value)| format!("{name}={value}"))
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// ReqTRES of a job: what it asked for.
fn req_tres(job: &AcctJob, conv: Conversion) -> String {
    Tres {
        cpus: job.req_cpus,
        billing: true,
        mem_mb: req_mem_mb(job),
        nodes: job.req_nodes.max(1),
        gres: job.req_gres.clone(),
    }
    .text(conv)
}

/// AllocTRES: empty until the job starts; a job's own allocation, the `extern` step's
/// copy of it, or a step's share (batch and srun steps carry no billing).
fn alloc_tres(row: Row<'_>, conv: Conversion) -> String {
    let job = match row {
        Row::Job(job, _) | Row::Step(job, _) => job,
    };
    let job_tres = Tres {
        cpus: job.alloc_cpus,
        billing: true,
        mem_mb: job_mem_mb(job, job.num_nodes, job.alloc_cpus),
        nodes: job.num_nodes,
        gres: job.alloc_gres.clone(),
    };
    match row {
        Row::Job(..) if set_time(job.start_time).is_none() => String::new(),
        Row::Job(..) => job_tres.text(conv),
        Row::Step(_, step) if step.kind == StepKind::Extern => job_tres.text(conv),
        Row::Step(_, step) => {
            let cpus = row_cpus(row);
            Tres {
                cpus,
                billing: false,
                mem_mb: job_mem_mb(job, step.num_nodes, cpus),
                nodes: step.num_nodes,
                gres: Vec::new(),
            }
            .text(conv)
        }
    }
}

/// The login name for `uid`, or the number when the system has none (Slurm's
/// `uid_to_string` does the same).
fn user_name(uid: u32) -> String {
    nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
        .ok()
        .flatten()
        .map(|u| u.name)
        .unwrap_or_else(|| uid.to_string())
}

#[cfg(test)]
mod tests;
