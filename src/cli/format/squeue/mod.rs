//! squeue's job table: the default, `-l`, `-o` (every `%` letter) and `-O`
//! (field names) layouts, the default state filter, the `P,t,-p` sort (or a
//! `-S` list) and the optional `-l` date line, printed exactly as Slurm does.
//!
//! Pure: the caller passes the jobs and `now`. Command-line parsing, job-id,
//! user and partition filters, and talking to the controller live in the
//! squeue command itself, not here. Where a [`JobInfo`] has no data for a
//! column (accounts, QOS, licenses, ...), the column shows what Slurm shows
//! when the value is unset.

use std::cmp::Ordering;

use super::fields::{
    compare_keys, render_line_into, Cell, FieldDef, FieldTable, Item, SortKey, SortSyntax,
};
use super::time::{fmt_elapsed_squeue, fmt_limit_min, fmt_time_left, fmt_timestamp, LimitStyle};
use super::{fmt_mem_mb, group_name, job_tres, or_null, FormatError, FormatWarning};
use crate::wire::types::{Exclusive, JobInfo, JobState};

/// squeue's default layout.
const DEFAULT_FORMAT: &str = "%.18i %.9P %.8j %.8u %.2t %.10M %.6D %R";
/// squeue `-l`.
const LONG_FORMAT: &str = "%.18i %.9P %.8j %.8u %.8T %.10M %.9l %.6D %R";
/// The default sort when `-S` is not given.
const DEFAULT_SORT: &str = "P,t,-p";
/// `squeue --start`: the columns, states and order.
const START_FORMAT: &str = "%.18i %.9P %.8j %.8u %.2t %.19S %.6D %20Y %R";
pub const START_STATES: &str = "PD";
pub const START_SORT: &str = "S";

/// One squeue column. The letter and `-O` name tables below map onto these.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum JobField {
    Account,
    TresPerNode,
    MinCpus,
    MinTmpDisk,
    EndTime,
    Features,
    GroupName,
    OverSubscribe,
    JobIdDisplay,
    Name,
    Comment,
    TimeLimit,
    MinMemory,
    ReqNodes,
    Command,
    PriorityFloat,
    Qos,
    Reason,
    StepOnly,
    StateCompact,
    UserName,
    Reservation,
    Wckey,
    ExcNodes,
    Nice,
    Sct,
    JobId,
    ExecHost,
    Cpus,
    Nodes,
    Dependency,
    ArrayJobId,
    GroupId,
    SocketsPerNode,
    CoresPerSocket,
    ThreadsPerCore,
    ArrayTaskId,
    TimeLeft,
    TimeUsed,
    NodeList,
    Contiguous,
    Partition,
    PriorityInt,
    ReasonList,
    StartTime,
    State,
    Uid,
    SubmitTime,
    Licenses,
    CoreSpec,
    SchedNodes,
    WorkDir,
    // `-O` only.
    Tasks,
    StdOut,
    StdErr,
    StdIn,
    TresAlloc,
    CpusPerTask,
    ExitCode,
    RestartCount,
    EligibleTime,
}

/// squeue's columns: `%` letters in the order `%all` prints them (a–z, then A–Z), then
/// the `-O`-only ones. The node-list titles are never cut; `-S` takes the letters
/// marked sortable.
static FIELDS: FieldTable<JobField> = FieldTable {
    defs: &[
        FieldDef::new(JobField::Account, "ACCOUNT")
            .letter('a')
            .name("account"),
        FieldDef::new(JobField::TresPerNode, "TRES_PER_NODE")
            .letter('b')
            .name("tres-per-node"),
        FieldDef::new(JobField::MinCpus, "MIN_CPUS")
            .letter('c')
            .name("mincpus"),
        FieldDef::new(JobField::MinTmpDisk, "MIN_TMP_DISK")
            .letter('d')
            .name("mintmpdisk"),
        FieldDef::new(JobField::EndTime, "END_TIME")
            .letter('e')
            .name("endtime")
            .sort(),
        FieldDef::new(JobField::Features, "FEATURES")
            .letter('f')
            .name("feature"),
        FieldDef::new(JobField::GroupName, "GROUP")
            .letter('g')
            .name("groupname")
            .sort(),
        FieldDef::new(JobField::OverSubscribe, "OVER_SUBSCRIBE")
            .letter('h')
            .name("oversubscribe"),
        FieldDef::new(JobField::JobIdDisplay, "JOBID")
            .letter('i')
            .name("jobarrayid")
            .sort(),
        FieldDef::new(JobField::Name, "NAME")
            .letter('j')
            .name("name")
            .sort(),
        FieldDef::new(JobField::Comment, "COMMENT")
            .letter('k')
            .name("comment"),
        FieldDef::new(JobField::TimeLimit, "TIME_LIMIT")
            .letter('l')
            .name("timelimit")
            .sort(),
        FieldDef::new(JobField::MinMemory, "MIN_MEMORY")
            .letter('m')
            .name("minmemory"),
        FieldDef::new(JobField::ReqNodes, "REQ_NODES")
            .letter('n')
            .name("reqnodes"),
        FieldDef::new(JobField::Command, "COMMAND")
            .letter('o')
            .name("command"),
        FieldDef::new(JobField::PriorityFloat, "PRIORITY")
            .letter('p')
            .name("priority")
            .sort(),
        FieldDef::new(JobField::Qos, "QOS").letter('q').name("qos"),
        FieldDef::new(JobField::Reason, "REASON")
            .letter('r')
            .name("reason")
            .sort(),
        FieldDef::new(JobField::StepOnly, "").letter('s'),
        FieldDef::new(JobField::StateCompact, "ST")
            .letter('t')
            .name("statecompact")
            .sort(),
        FieldDef::new(JobField::UserName, "USER")
            .letter('u')
            .name("username")
            .sort(),
        FieldDef::new(JobField::Reservation, "RESERVATION")
            .letter('v')
            .name("reservation"),
        FieldDef::new(JobField::Wckey, "WCKEY")
            .letter('w')
            .name("wckey"),
        FieldDef::new(JobField::ExcNodes, "EXC_NODES").letter('x'),
        FieldDef::new(JobField::Nice, "NICE")
            .letter('y')
            .name("nice"),
        FieldDef::new(JobField::Sct, "S:C:T")
            .letter('z')
            .name("sct"),
        FieldDef::new(JobField::JobId, "JOBID")
            .letter('A')
            .name("jobid")
            .sort(),
        FieldDef::new(JobField::ExecHost, "EXEC_HOST")
            .letter('B')
            .name("batchhost"),
        FieldDef::new(JobField::Cpus, "CPUS")
            .letter('C')
            .name("numcpus")
            .sort(),
        FieldDef::new(JobField::Nodes, "NODES")
            .letter('D')
            .name("numnodes")
            .sort(),
        FieldDef::new(JobField::Dependency, "DEPENDENCY")
            .letter('E')
            .name("dependency"),
        FieldDef::new(JobField::ArrayJobId, "ARRAY_JOB_ID")
            .letter('F')
            .name("arrayjobid"),
        FieldDef::new(JobField::GroupId, "GROUP")
            .letter('G')
            .name("groupid")
            .sort(),
        FieldDef::new(JobField::SocketsPerNode, "SOCKETS_PER_NODE")
            .letter('H')
            .name("sockets"),
        FieldDef::new(JobField::CoresPerSocket, "CORES_PER_SOCKET")
            .letter('I')
            .name("cores"),
        FieldDef::new(JobField::ThreadsPerCore, "THREADS_PER_CORE")
            .letter('J')
            .name("threads"),
        FieldDef::new(JobField::ArrayTaskId, "ARRAY_TASK_ID")
            .letter('K')
            .name("arraytaskid"),
        FieldDef::new(JobField::TimeLeft, "TIME_LEFT")
            .letter('L')
            .name("timeleft")
            .sort(),
        FieldDef::new(JobField::TimeUsed, "TIME")
            .letter('M')
            .name("timeused")
            .sort(),
        FieldDef::new(JobField::NodeList, "NODELIST")
            .letter('N')
            .name("nodelist")
            .sort()
            .whole_header(),
        FieldDef::new(JobField::Contiguous, "CONTIGUOUS")
            .letter('O')
            .name("contiguous"),
        FieldDef::new(JobField::Partition, "PARTITION")
            .letter('P')
            .name("partition")
            .sort(),
        FieldDef::new(JobField::PriorityInt, "PRIORITY")
            .letter('Q')
            .name("prioritylong")
            .sort(),
        FieldDef::new(JobField::ReasonList, "NODELIST(REASON)")
            .letter('R')
            .name("reasonlist")
            .whole_header(),
        FieldDef::new(JobField::StartTime, "START_TIME")
            .letter('S')
            .name("starttime")
            .sort(),
        FieldDef::new(JobField::State, "STATE")
            .letter('T')
            .name("state")
            .sort(),
        FieldDef::new(JobField::Uid, "UID")
            .letter('U')
            .name("userid")
            .sort(),
        FieldDef::new(JobField::SubmitTime, "SUBMIT_TIME")
            .letter('V')
            .name("submittime")
            .sort(),
        FieldDef::new(JobField::Licenses, "LICENSES")
            .letter('W')
            .name("licenses"),
        FieldDef::new(JobField::CoreSpec, "CORE_SPEC")
            .letter('X')
            .name("corespec"),
        FieldDef::new(JobField::SchedNodes, "SCHEDNODES")
            .letter('Y')
            .name("schednodes")
            .whole_header(),
        FieldDef::new(JobField::WorkDir, "WORK_DIR")
            .letter('Z')
            .name("workdir")
            .sort(),
        FieldDef::new(JobField::Tasks, "TASKS").name("numtasks"),
        FieldDef::new(JobField::StdOut, "STDOUT").name("stdout"),
        FieldDef::new(JobField::StdErr, "STDERR").name("stderr"),
        FieldDef::new(JobField::StdIn, "STDIN").name("stdin"),
        FieldDef::new(JobField::TresAlloc, "TRES_ALLOC").name("tres-alloc"),
        FieldDef::new(JobField::CpusPerTask, "CPUS_PER_TASK").name("cpus-per-task"),
        FieldDef::new(JobField::ExitCode, "EXIT_CODE").name("exit_code"),
        FieldDef::new(JobField::RestartCount, "RESTART_COUNT").name("restartcnt"),
        FieldDef::new(JobField::EligibleTime, "ELIGIBLE_TIME").name("eligibletime"),
    ],
};

impl JobField {
    /// The value for `j`. Node lists and elapsed times are never cut by a
    /// right-justified column; everything else (`UNLIMITED` included) is.
    fn value(self, j: &JobInfo, now: i64) -> Cell {
        let limit = |limit_min: Option<u32>| match limit_min {
            None => Cell::cut(fmt_limit_min(None, LimitStyle::Squeue)),
            Some(_) => Cell::whole(fmt_limit_min(limit_min, LimitStyle::Squeue)),
        };
        match self {
            JobField::NodeList | JobField::SchedNodes => Cell::whole(self.text(j, now)),
            JobField::TimeUsed => Cell::whole(self.text(j, now)),
            JobField::TimeLimit => limit(j.time_limit_min),
            JobField::TimeLeft => match (j.state, j.time_limit_min) {
                (JobState::Pending, limit_min) => limit(limit_min),
                (_, None) => Cell::cut(self.text(j, now)),
                (_, Some(_)) => Cell::whole(self.text(j, now)),
            },
            JobField::ReasonList if !shows_reason(j) => Cell::whole(self.text(j, now)),
            _ => Cell::cut(self.text(j, now)),
        }
    }

    fn text(self, j: &JobInfo, now: i64) -> String {
        use JobField::*;
        match self {
            Account => or_null(&j.account).to_string(),
            Qos => or_null(&j.qos).to_string(),
            Features => or_null(&j.features).to_string(),
            Comment => or_null(&j.comment).to_string(),
            Dependency => or_null(&j.dependency).to_string(),
            // Data canopy does not keep: Slurm's text for "unset".
            Reservation => or_null(&j.reservation).to_string(),
            Licenses => or_null(&j.licenses).to_string(),
            Wckey => "(null)".to_string(),
            // The nodes backfill planned for a pending job.
            SchedNodes => or_null(&j.sched_nodes).to_string(),
            TresPerNode if !j.tres_per_node.is_empty() => j.tres_per_node.clone(),
            TresPerNode | CoreSpec => "N/A".to_string(),
            ArrayTaskId => match (&j.array_pending, &j.array) {
                (Some(set), _) => set.clone(),
                (None, Some(a)) => a.task_id.to_string(),
                (None, None) => "N/A".to_string(),
            },
            Nice => j.nice.to_string(),
            MinTmpDisk | Contiguous => "0".to_string(),
            ReqNodes => j.req_node_list.clone(),
            ExcNodes => j.exc_node_list.clone(),
            StepOnly => String::new(),
            OverSubscribe => over_subscribe(j).to_string(),
            Sct => "*:*:*".to_string(),
            SocketsPerNode | CoresPerSocket | ThreadsPerCore => "*".to_string(),
            Command => j.command.clone(),
            MinCpus | CpusPerTask => j.cpus_per_task.to_string(),
            EndTime => fmt_squeue_time(j.end_time),
            // A pending job shows its planned start, once backfill has one.
            StartTime => fmt_squeue_time(j.start_time.or(j.sched_start)),
            SubmitTime => fmt_squeue_time(Some(j.submit_time)),
            EligibleTime => fmt_squeue_time(j.eligible_time),
            GroupName => group_name(j.gid).unwrap_or_else(|| j.gid.to_string()),
            GroupId => j.gid.to_string(),
            JobIdDisplay => display_id(j),
            JobId => j.job_id.to_string(),
            ArrayJobId => j.array.map_or(j.job_id, |a| a.array_job_id).to_string(),
            Name => j.name.clone(),
            TimeLimit => fmt_limit_min(j.time_limit_min, LimitStyle::Squeue),
            MinMemory => fmt_mem_mb(j.mem_per_node_mb),
            PriorityFloat => format!("{:.14}", f64::from(j.priority) / f64::from(u32::MAX)),
            PriorityInt => j.priority.to_string(),
            Reason => j.reason.clone(),
            StateCompact => j.state.code().to_string(),
            State => j.state.name().to_string(),
            UserName => j.user.clone(),
            Uid => j.uid.to_string(),
            ExecHost => j.batch_host.clone().unwrap_or_else(|| "n/a".to_string()),
            Cpus => j.num_cpus.to_string(),
            Nodes => node_count(j).to_string(),
            TimeLeft => match j.state {
                JobState::Pending => fmt_limit_min(j.time_limit_min, LimitStyle::Squeue),
                _ => fmt_time_left(j.time_limit_min, used_secs(j, now)),
            },
            TimeUsed => fmt_elapsed_squeue(used_secs(j, now)),
            NodeList => j.nodes.clone(),
            Partition => j.partition.clone(),
            ReasonList => reason_or_nodes(j),
            WorkDir => j.workdir.clone(),
            Tasks => j.num_tasks.to_string(),
            StdOut => j.stdout.clone(),
            StdErr => j.stderr.clone(),
            StdIn => j.stdin.clone(),
            // What the job holds once started, what it asks for before.
            TresAlloc if j.start_time.is_some() => job_tres(j, &j.alloc_gres),
            TresAlloc => job_tres(j, &j.req_gres),
            ExitCode => wait_status(j.exit_code).to_string(),
            RestartCount => j.restarts.to_string(),
        }
    }
}

/// `%i`: `N`, `A_T` for an array task, `A_[set]` for grouped pending tasks.
pub fn display_id(j: &JobInfo) -> String {
    match (&j.array, &j.array_pending) {
        (Some(a), Some(set)) => format!("{}_[{set}]", a.array_job_id),
        (Some(a), None) => format!("{}_{}", a.array_job_id, a.task_id),
        (None, _) => j.job_id.to_string(),
    }
}

/// Without `-r`, the pending tasks of each array share one record standing
/// for all of them (`A_[1-5%2]`), placed where the lowest index is.
pub fn group_pending_arrays(mut jobs: Vec<JobInfo>) -> Vec<JobInfo> {
    use std::collections::hash_map::Entry;
    // Array id → (the row that stands for the group, the indices it stands for).
    let mut groups: std::collections::HashMap<u32, (usize, Vec<u32>)> =
        std::collections::HashMap::new();
    // Grouped in place: the rows are large, and most listings have no arrays.
    let mut keep = vec![true; jobs.len()];
    for (row, j) in jobs.iter().enumerate() {
        let Some(a) = j.array.filter(|_| j.state == JobState::Pending) else {
            continue;
        };
        match groups.entry(a.array_job_id) {
            Entry::Occupied(mut e) => {
                e.get_mut().1.push(a.task_id);
                keep[row] = false;
            }
            Entry::Vacant(e) => {
                e.insert((row, vec![a.task_id]));
            }
        }
    }
    for (at, mut tasks) in groups.into_values() {
        let Some(row) = jobs.get_mut(at) else {
            continue;
        };
        tasks.sort_unstable();
        if let (Some(a), Some(&lowest)) = (row.array.as_mut(), tasks.first()) {
            a.task_id = lowest;
            let mut set = crate::sched::array::compress(&tasks);
            if let Some(t) = a.throttle {
                set.push_str(&format!("%{t}"));
            }
            // A lone task keeps its plain `A_T` form.
            if tasks.len() > 1 {
                row.array_pending = Some(set);
            }
        }
    }
    if keep.contains(&false) {
        let mut keep = keep.into_iter();
        jobs.retain(|_| keep.next().unwrap_or(true));
    }
    jobs
}

/// squeue prints unset times as `N/A` (scontrol says `Unknown`).
fn fmt_squeue_time(t: Option<i64>) -> String {
    match t {
        Some(secs) if secs != 0 => fmt_timestamp(Some(secs)),
        _ => "N/A".to_string(),
    }
}

/// Seconds the job has run: none while pending, up to `now` while it runs,
/// up to its end once it has one; time spent suspended does not count
/// (a suspended job shows what it ran before, as Slurm's `SecsPreSuspend`).
pub(crate) fn used_secs(j: &JobInfo, now: i64) -> u64 {
    let Some(start) = j.start_time else {
        return 0;
    };
    let end = match j.state {
        JobState::Pending => return 0,
        JobState::Suspended => return j.secs_pre_suspend,
        JobState::Running => now,
        _ => j.end_time.unwrap_or(now),
    };
    u64::try_from(end.saturating_sub(start))
        .unwrap_or(0)
        .saturating_sub(j.suspended_secs)
}

/// `%D`: a pending job shows the node count it asked for.
pub(crate) fn node_count(j: &JobInfo) -> u32 {
    match j.state {
        JobState::Pending => j.req_nodes.max(j.num_nodes),
        _ => j.num_nodes,
    }
}

/// `%R` shows the reason for jobs that are waiting or that ended badly.
fn shows_reason(j: &JobInfo) -> bool {
    matches!(
        j.state,
        JobState::Pending
            | JobState::Failed
            | JobState::Timeout
            | JobState::OutOfMemory
            | JobState::Deadline
    )
}

/// `%R`: `(reason)` or the nodes (empty for a job that never ran).
fn reason_or_nodes(j: &JobInfo) -> String {
    if shows_reason(j) {
        format!("({})", j.reason)
    } else {
        j.nodes.clone()
    }
}

/// The exit status packed the way `wait()` reports it (what `exit_code` shows).
fn wait_status((code, signal): (i32, i32)) -> i32 {
    ((code & 0xff) << 8) | (signal & 0x7f)
}

/// States the job-state list may name that canopy jobs never enter (flag
/// states in Slurm); accepted so `-t` behaves as in Slurm, matching nothing.
const FLAG_STATES: &[(&str, &str)] = &[
    ("RESIZING", "RS"),
    ("REQUEUED", "RQ"),
    ("REQUEUE_FED", "RF"),
    ("REQUEUE_HOLD", "RH"),
    ("SPECIAL_EXIT", "SE"),
    ("STOPPED", "ST"),
    ("REVOKED", "RV"),
    ("RESV_DEL_HOLD", "RD"),
    ("SIGNALING", "SI"),
    ("STAGE_OUT", "SO"),
];

/// squeue's states when no `-t` is given: PD, R, S, CG, CF (and SO).
const DEFAULT_STATES: &[JobState] = &[
    JobState::Pending,
    JobState::Running,
    JobState::Suspended,
    JobState::Completing,
    JobState::Configuring,
];

/// Keeps the jobs whose state is in `states` (squeue `-t`: a comma list of
/// long or compact names, any case, or `all`); `None` means squeue's default
/// set. An unknown name is an error, as in Slurm.
pub fn filter_states<'a>(
    jobs: &'a [JobInfo],
    states: Option<&str>,
) -> Result<Vec<&'a JobInfo>, FormatError> {
    let wanted: Option<Vec<JobState>> = match states {
        None => Some(DEFAULT_STATES.to_vec()),
        Some(list) => parse_state_list(list)?,
    };
    Ok(jobs
        .iter()
        .filter(|j| wanted.as_ref().is_none_or(|w| w.contains(&j.state)))
        .collect())
}

/// `None` = all states.
fn parse_state_list(list: &str) -> Result<Option<Vec<JobState>>, FormatError> {
    let mut wanted = Vec::new();
    for name in list.split(',').filter(|s| !s.is_empty()) {
        if name.eq_ignore_ascii_case("all") {
            return Ok(None);
        }
        match JobState::parse(name) {
            Some(state) => wanted.push(state),
            None if FLAG_STATES.iter().any(|(long, code)| {
                long.eq_ignore_ascii_case(name) || code.eq_ignore_ascii_case(name)
            }) => {}
            None => {
                return Err(FormatError::InvalidJobState {
                    state: name.to_string(),
                })
            }
        }
    }
    Ok(Some(wanted))
}

/// `-S` as given, or squeue's default order.
fn sort_keys(spec: Option<&str>) -> Vec<SortKey<JobField>> {
    FIELDS.parse_sort(spec.unwrap_or(DEFAULT_SORT), SortSyntax::Plain)
}

fn compare_by(field: JobField, a: &JobInfo, b: &JobInfo, now: i64) -> Ordering {
    use JobField::*;
    let limit = |j: &JobInfo| j.time_limit_min.map_or(u64::MAX, u64::from);
    let left = |j: &JobInfo| {
        j.time_limit_min.map_or(i128::MAX, |m| {
            i128::from(m) * 60 - i128::from(used_secs(j, now))
        })
    };
    match field {
        JobIdDisplay => display_key(a).cmp(&display_key(b)),
        JobId => a.job_id.cmp(&b.job_id),
        Name => a.name.cmp(&b.name),
        UserName => a.user.cmp(&b.user),
        Uid => a.uid.cmp(&b.uid),
        GroupId | GroupName => a.gid.cmp(&b.gid),
        Partition => a.partition.cmp(&b.partition),
        StateCompact => a.state.code().cmp(b.state.code()),
        State => a.state.name().cmp(b.state.name()),
        PriorityFloat | PriorityInt => a.priority.cmp(&b.priority),
        TimeUsed => used_secs(a, now).cmp(&used_secs(b, now)),
        TimeLimit => limit(a).cmp(&limit(b)),
        TimeLeft => left(a).cmp(&left(b)),
        Nodes => node_count(a).cmp(&node_count(b)),
        Cpus => a.num_cpus.cmp(&b.num_cpus),
        SubmitTime => a.submit_time.cmp(&b.submit_time),
        StartTime => expected_start(a).cmp(&expected_start(b)),
        EndTime => a.end_time.cmp(&b.end_time),
        NodeList => a.nodes.cmp(&b.nodes),
        Reason => a.reason.cmp(&b.reason),
        WorkDir => a.workdir.cmp(&b.workdir),
        _ => Ordering::Equal,
    }
}

/// When a job starts or started; a pending job with no estimate yet goes
/// by when it was submitted, earliest first (as Slurm orders `--start`).
fn expected_start(j: &JobInfo) -> (i64, (u32, u32)) {
    (
        j.start_time.or(j.sched_start).unwrap_or(j.submit_time),
        display_key(j),
    )
}

/// Array tasks sort by (array id, index), others by id.
fn display_key(j: &JobInfo) -> (u32, u32) {
    j.array
        .map_or((j.job_id, 0), |a| (a.array_job_id, a.task_id))
}

/// Sorts by the keys in order; ties (Slurm leaves them to `qsort`) go by job id.
fn sort_jobs(jobs: &mut [&JobInfo], keys: &[SortKey<JobField>], now: i64) {
    // Unstable is enough (the tie-break makes the order total) and needs no
    // scratch buffer.
    jobs.sort_unstable_by(|a, b| {
        compare_keys(keys, *a, *b, |k, a, b| compare_by(k.code, a, b, now)).then_with(|| {
            // Ties: newest job first (Slurm's controller lists jobs that
            // way and its sort keeps that order), an array's tasks by index.
            let ((job_a, task_a), (job_b, task_b)) = (display_key(a), display_key(b));
            job_b.cmp(&job_a).then(task_a.cmp(&task_b))
        })
    });
}

/// How squeue should lay out its table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SqueueFormat {
    items: Vec<Item<JobField>>,
    /// `-h`: no header line (and no `-l` date line).
    pub no_header: bool,
    /// `-l`: print the `ctime` date line before the header.
    pub date_line: bool,
    /// `-S` as typed; `None` sorts by `P,t,-p`.
    pub sort: Option<String>,
    /// `-t` as typed; `None` shows PD, R, S, CG and SO jobs.
    pub states: Option<String>,
    /// `--noconvert`: memory sizes in MB, as stored (`2048M`, not `2G`).
    pub noconvert: bool,
}

impl SqueueFormat {
    /// Plain `squeue`.
    pub fn default_format() -> Self {
        Self::from_items(FIELDS.parse_format(DEFAULT_FORMAT, false).items)
    }

    /// `squeue --start`: expected start times of pending jobs.
    pub fn start_format() -> Self {
        Self::from_items(FIELDS.parse_format(START_FORMAT, false).items)
    }

    /// `squeue -l`: the long columns and the date line.
    pub fn long_format() -> Self {
        Self {
            date_line: true,
            ..Self::from_items(FIELDS.parse_format(LONG_FORMAT, false).items)
        }
    }

    /// `squeue -o FORMAT` (`%all` included). Unknown letters are echoed in
    /// the output and returned as warnings for stderr.
    pub fn user_format(format: &str) -> (Self, Vec<FormatWarning>) {
        let parsed = if format.eq_ignore_ascii_case("%all") {
            FIELDS.parse_format(&all_format(), true)
        } else {
            FIELDS.parse_format(format, false)
        };
        (
            Self::from_items(parsed.items),
            job_warnings(parsed.bad_specs),
        )
    }

    /// `squeue -O name[:[.]width],...`. Unknown names are dropped and
    /// returned as warnings.
    pub fn field_list(list: &str) -> (Self, Vec<FormatWarning>) {
        let parsed = FIELDS.parse_list(list);
        (
            Self::from_items(parsed.items),
            job_warnings(parsed.bad_specs),
        )
    }

    /// Whether any column or sort key shows a job's paths or command; if
    /// not, squeue asks the controller for brief records.
    pub fn needs_detail(&self) -> bool {
        let detailed = |f: JobField| {
            matches!(
                f,
                JobField::Command
                    | JobField::WorkDir
                    | JobField::StdOut
                    | JobField::StdErr
                    | JobField::StdIn
            )
        };
        let shown = self.items.iter().any(|item| match item {
            Item::Field(spec) => detailed(spec.code),
            Item::Literal(_) => false,
        });
        let sorted = sort_keys(self.sort.as_deref())
            .iter()
            .any(|k| detailed(k.code));
        shown || sorted
    }

    fn from_items(items: Vec<Item<JobField>>) -> Self {
        Self {
            items,
            no_header: false,
            date_line: false,
            sort: None,
            states: None,
            noconvert: false,
        }
    }
}

/// `%all`: every letter, `|`-separated.
fn all_format() -> String {
    FIELDS
        .letters()
        .map(|c| format!("%{c}"))
        .collect::<Vec<_>>()
        .join("|")
}

fn job_warnings(specs: Vec<String>) -> Vec<FormatWarning> {
    specs
        .into_iter()
        .map(|spec| FormatWarning::InvalidJobField { spec })
        .collect()
}

/// Renders squeue's output for `jobs` (already narrowed by the caller's
/// id/user/partition filters): state filter, sort, optional date line,
/// header, one line per job, each ending in a newline.
pub fn render(jobs: &[JobInfo], opts: &SqueueFormat, now: i64) -> Result<String, FormatError> {
    let mut shown = filter_states(jobs, opts.states.as_deref())?;
    sort_jobs(&mut shown, &sort_keys(opts.sort.as_deref()), now);
    let mut out = String::new();
    if !opts.no_header {
        FIELDS.push_heading(&mut out, &opts.items, opts.date_line, now)?;
    }
    // Lines run about 90 bytes; reserving up front saves the regrowth copies.
    out.reserve(shown.len() * 96);
    for job in shown {
        render_line_into(&mut out, &opts.items, |f, _| match f {
            JobField::MinMemory if opts.noconvert && job.mem_per_node_mb > 0 => {
                Cell::cut(format!("{}M", job.mem_per_node_mb))
            }
            _ => f.value(job, now),
        });
        out.push('\n');
    }
    Ok(out)
}

#[cfg(test)]
pub(crate) mod tests;

/// squeue's `%h` and scontrol's `OverSubscribe=`: the controller's word,
/// or (from a controller that does not send it) what `--exclusive` says.
pub fn over_subscribe(j: &JobInfo) -> &str {
    if j.over_subscribe.is_empty() {
        Exclusive::oversubscribe(j.exclusive, false, None)
    } else {
        &j.over_subscribe
    }
}
