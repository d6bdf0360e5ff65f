//! `squeue -s`: the running job steps (batch and srun) in Slurm's step
//! layouts: the default `%.15i %.8j %.9P %.8u %.9M %N`, `-o` with the step
//! letters, `-O` with the step field names, and `-S` over step fields.
//! Unknown letters and names are reported as Slurm reports them for steps
//! (`Invalid job step format specification: X`).

use std::cmp::Ordering;

use super::fields::{compare_keys, render_line_into, Cell, FieldDef, FieldTable, Item, SortSyntax};
use super::time::{fmt_elapsed_squeue, fmt_timestamp};
use super::{or_null, FormatError};
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

/// The step columns: `-o` letters in the order `%all` prints them (Slurm's: a–z, then
/// A–Z), then the `-O`-only ones. `-S` takes every letter but `b`.
static FIELDS: FieldTable<StepField> = FieldTable {
    defs: &[
        FieldDef::new(StepField::TresPerJob, "TRES_PER_JOB")
            .letter('b')
            .name("tres"),
        FieldDef::new(StepField::StepId, "STEPID")
            .letter('i')
            .name("stepid")
            .sort(),
        FieldDef::new(StepField::Name, "NAME")
            .letter('j')
            .name("stepname")
            .sort(),
        FieldDef::new(StepField::TimeLimit, "TIME_LIMIT")
            .letter('l')
            .name("timelimit")
            .sort(),
        FieldDef::new(StepField::UserName, "USER")
            .letter('u')
            .name("username")
            .sort(),
        FieldDef::new(StepField::Tasks, "TASKS")
            .letter('A')
            .name("numtasks")
            .sort(),
        FieldDef::new(StepField::TimeUsed, "TIME")
            .letter('M')
            .name("timeused")
            .sort(),
        FieldDef::new(StepField::Nodes, "NODELIST")
            .letter('N')
            .name("nodes")
            .sort()
            .whole_header(),
        FieldDef::new(StepField::Partition, "PARTITION")
            .letter('P')
            .name("partition")
            .sort(),
        FieldDef::new(StepField::StartTime, "START_TIME")
            .letter('S')
            .name("starttime")
            .sort(),
        FieldDef::new(StepField::Uid, "UID")
            .letter('U')
            .name("userid")
            .sort(),
        FieldDef::new(StepField::JobId, "JOB_ID")
            .name("jobid")
            .sort(),
        FieldDef::new(StepField::Cpus, "NUM_CPUS")
            .name("numcpus")
            .sort(),
        FieldDef::new(StepField::ArrayJobId, "ARRAY_JOB_ID")
            .name("arrayjobid")
            .sort(),
        FieldDef::new(StepField::ArrayTaskId, "ARRAY_TASK_ID")
            .name("arraytaskid")
            .sort(),
        FieldDef::new(StepField::State, "STATE")
            .name("stepstate")
            .sort(),
        FieldDef::new(StepField::Cluster, "CLUSTER")
            .name("cluster")
            .sort(),
    ],
};

impl StepField {
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
        Self::from_items(FIELDS.parse_format(DEFAULT_FORMAT, false).items)
    }

    /// `-o FORMAT` (`%all` included); the letters steps lack, as warnings.
    pub fn user_format(format: &str) -> (Self, Vec<String>) {
        let parsed = if format.eq_ignore_ascii_case("%all") {
            // N.B. Slurm's step `%all` ends in a `|` too.
            let all: Vec<String> = FIELDS.letters().map(|c| format!("%{c}")).collect();
            FIELDS.parse_format(&format!("{}|", all.join("|")), true)
        } else {
            FIELDS.parse_format(format, false)
        };
        (Self::from_items(parsed.items), warnings(parsed.bad_specs))
    }

    /// `-O name[:[.]width],...`; unknown names dropped, as warnings.
    pub fn field_list(list: &str) -> (Self, Vec<String>) {
        let parsed = FIELDS.parse_list(list);
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
    let keys = FIELDS.parse_sort(
        opts.sort.as_deref().unwrap_or(DEFAULT_SORT),
        SortSyntax::Plain,
    );
    rows.sort_by(|a, b| compare_keys(&keys, a, b, |k, a, b| compare_by(k.code, a, b, now)));
    let mut out = String::new();
    if !opts.no_header {
        FIELDS.push_heading(&mut out, &opts.items, opts.date_line, now)?;
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
            usage: Default::default(),
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
