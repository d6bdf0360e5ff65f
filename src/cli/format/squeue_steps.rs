//! `squeue -s`: the running job steps (batch and srun) in Slurm's step
//! layouts: the default `%.15i %.8j %.9P %.8u %.9M %N`, `-o` with the step
//! letters, `-O` with the step field names, and `-S` over step fields.
//! Unknown letters and names are reported as Slurm reports them for steps
//! (`Invalid job step format specification: X`).

use std::cmp::Ordering;

use super::time::{fmt_date_line, fmt_elapsed_squeue, fmt_timestamp};
use super::{
    or_null, parse_long_list, parse_percent, render_line, render_line_into, Cell, FormatError, Item,
};
use crate::wire::types::{AcctJob, AcctStep, JobState, StepKind};

const DEFAULT_FORMAT: &str = "%.15i %.8j %.9P %.8u %.9M %N";
const DEFAULT_SORT: &str = "P,i";

/// One step column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StepField {
    TresPerJob,
    StepId,
    Name,
    TimeLimit,
    UserName,
    Tasks,
    TimeUsed,
    Nodes,
    Partition,
    StartTime,
    Uid,
    JobId,
    Cpus,
    ArrayJobId,
    ArrayTaskId,
    State,
    Cluster,
}

/// `-o` letters, in the order `%all` prints them (Slurm's: a–z, then A–Z).
const LETTERS: &[(char, StepField)] = &[
    ('b', StepField::TresPerJob),
    ('i', StepField::StepId),
    ('j', StepField::Name),
    ('l', StepField::TimeLimit),
    ('u', StepField::UserName),
    ('A', StepField::Tasks),
    ('M', StepField::TimeUsed),
    ('N', StepField::Nodes),
    ('P', StepField::Partition),
    ('S', StepField::StartTime),
    ('U', StepField::Uid),
];

/// `-O` names (case-insensitive).
const NAMES: &[(&str, StepField)] = &[
    ("arrayjobid", StepField::ArrayJobId),
    ("arraytaskid", StepField::ArrayTaskId),
    ("cluster", StepField::Cluster),
    ("jobid", StepField::JobId),
    ("nodes", StepField::Nodes),
    ("numcpus", StepField::Cpus),
    ("numtasks", StepField::Tasks),
    ("partition", StepField::Partition),
    ("starttime", StepField::StartTime),
    ("stepid", StepField::StepId),
    ("stepname", StepField::Name),
    ("stepstate", StepField::State),
    ("timelimit", StepField::TimeLimit),
    ("timeused", StepField::TimeUsed),
    ("tres", StepField::TresPerJob),
    ("userid", StepField::Uid),
    ("username", StepField::UserName),
];

impl StepField {
    fn from_letter(c: char) -> Option<StepField> {
        LETTERS.iter().find(|(l, _)| *l == c).map(|(_, f)| *f)
    }

    fn from_long_name(name: &str) -> Option<StepField> {
        NAMES
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, f)| *f)
    }

    fn title(self) -> &'static str {
        match self {
            StepField::TresPerJob => "TRES_PER_JOB",
            StepField::StepId => "STEPID",
            StepField::Name => "NAME",
            StepField::TimeLimit => "TIME_LIMIT",
            StepField::UserName => "USER",
            StepField::Tasks => "TASKS",
            StepField::TimeUsed => "TIME",
            StepField::Nodes => "NODELIST",
            StepField::Partition => "PARTITION",
            StepField::StartTime => "START_TIME",
            StepField::Uid => "UID",
            StepField::JobId => "JOB_ID",
            StepField::Cpus => "NUM_CPUS",
            StepField::ArrayJobId => "ARRAY_JOB_ID",
            StepField::ArrayTaskId => "ARRAY_TASK_ID",
            StepField::State => "STATE",
            StepField::Cluster => "CLUSTER",
        }
    }

    fn value(self, row: &Row, now: i64) -> Cell {
        let (j, s) = (row.job, row.step);
        match self {
            StepField::TresPerJob => Cell::cut(or_null("")),
            StepField::StepId => Cell::cut(step_id(j.job_id, s.kind)),
            StepField::Name => Cell::cut(s.name.as_str()),
            // canopy's steps run under the job's limit, with none of their own.
            StepField::TimeLimit => Cell::cut("UNLIMITED"),
            StepField::UserName => Cell::cut(j.user.as_str()),
            StepField::Tasks => Cell::cut(s.num_tasks.to_string()),
            StepField::TimeUsed => Cell::cut(fmt_elapsed_squeue(used(s, now))),
            StepField::Nodes => Cell::whole(s.nodes.as_str()),
            StepField::Partition => Cell::cut(j.partition.as_str()),
            StepField::StartTime => Cell::cut(fmt_timestamp(s.start_time)),
            StepField::Uid => Cell::cut(j.uid.to_string()),
            StepField::JobId => Cell::cut(j.job_id.to_string()),
            StepField::Cpus => Cell::cut(s.alloc_cpus.to_string()),
            StepField::ArrayJobId => {
                Cell::cut(j.array.as_ref().map_or(0, |a| a.array_job_id).to_string())
            }
            StepField::ArrayTaskId => Cell::cut(
                j.array
                    .as_ref()
                    .map_or_else(|| "N/A".to_string(), |a| a.task_id.to_string()),
            ),
            StepField::State => Cell::cut(s.state.name()),
            StepField::Cluster => Cell::cut(j.cluster.as_str()),
        }
    }
}

/// `12.0`, `12.batch`, `12.extern`.
fn step_id(job_id: u32, kind: StepKind) -> String {
    match kind {
        StepKind::Batch => format!("{job_id}.batch"),
        StepKind::Extern => format!("{job_id}.extern"),
        StepKind::Numbered(n) => format!("{job_id}.{n}"),
    }
}

/// Slurm's numbering for sorting: srun steps first, then extern and batch.
fn step_number(kind: StepKind) -> u32 {
    match kind {
        StepKind::Numbered(n) => n,
        StepKind::Batch => 0xFFFF_FFFB,
        StepKind::Extern => 0xFFFF_FFFC,
    }
}

fn used(s: &AcctStep, now: i64) -> u64 {
    s.start_time
        .map_or(0, |t| u64::try_from(now - t).unwrap_or(0))
}

/// One step with its job.
struct Row<'a> {
    job: &'a AcctJob,
    step: &'a AcctStep,
}

/// A `-S` key.
struct SortKey {
    field: StepField,
    descending: bool,
}

fn parse_sort(spec: &str) -> Vec<SortKey> {
    spec.split(',')
        .filter_map(|key| {
            let (descending, letter) = match key.strip_prefix('-') {
                Some(rest) => (true, rest),
                None => (false, key.strip_prefix('+').unwrap_or(key)),
            };
            let mut chars = letter.chars();
            match (chars.next(), chars.next()) {
                (Some(c), None) => StepField::from_letter(c)
                    .filter(|f| *f != StepField::TresPerJob)
                    .map(|field| SortKey { field, descending }),
                _ => None,
            }
        })
        .collect()
}

fn compare_by(field: StepField, a: &Row, b: &Row, now: i64) -> Ordering {
    match field {
        StepField::StepId => {
            (a.job.job_id, step_number(a.step.kind)).cmp(&(b.job.job_id, step_number(b.step.kind)))
        }
        StepField::Name => a.step.name.cmp(&b.step.name),
        StepField::UserName => a.job.user.cmp(&b.job.user),
        StepField::Uid => a.job.uid.cmp(&b.job.uid),
        StepField::Tasks => a.step.num_tasks.cmp(&b.step.num_tasks),
        StepField::TimeUsed => used(a.step, now).cmp(&used(b.step, now)),
        StepField::Nodes => a.step.nodes.cmp(&b.step.nodes),
        StepField::Partition => a.job.partition.cmp(&b.job.partition),
        StepField::StartTime => a.step.start_time.cmp(&b.step.start_time),
        _ => Ordering::Equal,
    }
}

/// How `squeue -s` lays out and orders its rows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepFormat {
    items: Vec<Item<StepField>>,
    /// `-h`: no header (and no date line).
    pub no_header: bool,
    /// `-l` or `-i`: the date line before the header.
    pub date_line: bool,
    /// `-S` as typed; `None` sorts by `P,i`.
    pub sort: Option<String>,
}

impl StepFormat {
    pub fn default_format() -> Self {
        Self::from_items(parse_percent(DEFAULT_FORMAT, StepField::from_letter, false).items)
    }

    /// `-o FORMAT` (`%all` included); the letters steps lack, as warnings.
    pub fn user_format(format: &str) -> (Self, Vec<String>) {
        let parsed = if format.eq_ignore_ascii_case("%all") {
            let all: Vec<String> = LETTERS.iter().map(|(c, _)| format!("%{c}")).collect();
            parse_percent(&format!("{}|", all.join("|")), StepField::from_letter, true)
        } else {
            parse_percent(format, StepField::from_letter, false)
        };
        (Self::from_items(parsed.items), warnings(parsed.bad_specs))
    }

    /// `-O name[:[.]width],...`; unknown names dropped, as warnings.
    pub fn field_list(list: &str) -> (Self, Vec<String>) {
        let parsed = parse_long_list(list, StepField::from_long_name);
        (Self::from_items(parsed.items), warnings(parsed.bad_specs))
    }

    fn from_items(items: Vec<Item<StepField>>) -> Self {
        Self {
            items,
            no_header: false,
            date_line: false,
            sort: None,
        }
    }
}

fn warnings(specs: Vec<String>) -> Vec<String> {
    specs
        .into_iter()
        .map(|s| format!("Invalid job step format specification: {s}"))
        .collect()
}

/// The running steps of `jobs` that `keep` accepts, as squeue prints them.
pub fn render(
    jobs: &[AcctJob],
    keep: impl Fn(&AcctJob, &AcctStep) -> bool,
    opts: &StepFormat,
    now: i64,
) -> Result<String, FormatError> {
    let mut rows: Vec<Row> = jobs
        .iter()
        .flat_map(|job| job.steps.iter().map(move |step| Row { job, step }))
        .filter(|r| matches!(r.step.state, JobState::Running | JobState::Suspended))
        .filter(|r| keep(r.job, r.step))
        .collect();
    let keys = parse_sort(opts.sort.as_deref().unwrap_or(DEFAULT_SORT));
    rows.sort_by(|a, b| {
        keys.iter()
            .map(|k| {
                let o = compare_by(k.field, a, b, now);
                if k.descending {
                    o.reverse()
                } else {
                    o
                }
            })
            .find(|o| o.is_ne())
            .unwrap_or(Ordering::Equal)
    });
    let mut out = String::new();
    if !opts.no_header {
        if opts.date_line {
            let date = fmt_date_line(now).ok_or(FormatError::TimeOutOfRange { secs: now })?;
            out.push_str(&date);
            out.push('\n');
        }
        out.push_str(&render_line(&opts.items, |f, _| match f {
            StepField::Nodes => Cell::whole(f.title()),
            _ => Cell::cut(f.title()),
        }));
        out.push('\n');
    }
    for row in &rows {
        render_line_into(&mut out, &opts.items, |f, _| f.value(row, now));
        out.push('\n');
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::types::{AcctJob, AcctStep};

    const NOW: i64 = 1_800_000_000;

    fn step(kind: StepKind, name: &str, state: JobState) -> AcctStep {
        AcctStep {
            kind,
            name: name.into(),
            state,
            exit_code: (0, 0),
            start_time: Some(NOW - 75),
            end_time: None,
            nodes: "n[1-2]".into(),
            num_nodes: 2,
            num_tasks: 4,
            alloc_cpus: 4,
            max_rss_kb: 0,
            max_vmsize_kb: 0,
            user_cpu_ms: 0,
            system_cpu_ms: 0,
            srun_host: String::new(),
            srun_pid: 0,
        }
    }

    fn job(id: u32, partition: &str, steps: Vec<AcctStep>) -> AcctJob {
        AcctJob {
            job_id: id,
            name: "job".into(),
            user: "alice".into(),
            uid: 1000,
            partition: partition.into(),
            state: JobState::Running,
            steps,
            ..AcctJob::default()
        }
    }

    fn jobs() -> Vec<AcctJob> {
        vec![
            job(
                7,
                "debug",
                vec![
                    step(StepKind::Batch, "batch", JobState::Running),
                    step(StepKind::Numbered(0), "hostname", JobState::Completed),
                    step(StepKind::Numbered(1), "a_very_long_name", JobState::Running),
                ],
            ),
            job(
                3,
                "long",
                vec![step(StepKind::Numbered(0), "sleep", JobState::Running)],
            ),
        ]
    }

    #[test]
    fn default_layout_lists_running_steps_by_partition_then_id() {
        let out = render(&jobs(), |_, _| true, &StepFormat::default_format(), NOW).unwrap();
        assert_eq!(
            out,
            "         STEPID     NAME PARTITION     USER      TIME NODELIST\n\
             \x20           7.1 a_very_l     debug    alice      1:15 n[1-2]\n\
             \x20       7.batch    batch     debug    alice      1:15 n[1-2]\n\
             \x20           3.0    sleep      long    alice      1:15 n[1-2]\n"
        );
    }

    #[test]
    fn user_layouts_filters_and_sorting() {
        let (fmt, warn) = StepFormat::user_format("%i|%A|%l|%U|%t");
        assert_eq!(warn, ["Invalid job step format specification: t"]);
        let mut fmt = fmt;
        fmt.no_header = true;
        fmt.sort = Some("-i".into());
        let out = render(&jobs(), |j, _| j.job_id == 7, &fmt, NOW).unwrap();
        assert_eq!(
            out,
            "7.batch|4|UNLIMITED|1000|%t\n7.1|4|UNLIMITED|1000|%t\n"
        );
        let (fmt, warn) = StepFormat::field_list("stepid:8,stepname:6,state,numtasks:.3");
        assert_eq!(warn, ["Invalid job step format specification: state"]);
        let out = render(&jobs(), |j, _| j.job_id == 3, &fmt, NOW).unwrap();
        assert_eq!(out, "STEPID  NAME  TAS\n3.0     sleep   4\n");
        let (fmt, _) = StepFormat::user_format("%all");
        let out = render(&jobs(), |j, _| j.job_id == 3, &fmt, NOW).unwrap();
        assert_eq!(
            out.lines().next().unwrap(),
            "TRES_PER_JOB|STEPID|NAME|TIME_LIMIT|USER|TASKS|TIME|NODELIST|PARTITION|START_TIME|UID|"
        );
    }
}
