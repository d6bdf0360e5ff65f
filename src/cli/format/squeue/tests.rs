//! Unit tests for squeue's job table, and the sample jobs (`job`, `sample_jobs`, `T0`)
//! that scontrol's formatter tests reuse. Only tests live here; the code under test is in
//! the parent module.

use super::*;
use crate::cli::format::time::fmt_date_line;

/// Submit time of every sample job; they start a second later.
pub(crate) const T0: i64 = 1_795_232_616;

/// A job with the defaults sbatch --wrap gives on a test cluster.
pub(crate) fn job(id: u32, name: &str, partition: &str, state: JobState) -> JobInfo {
    let running = !matches!(state, JobState::Pending);
    JobInfo {
        job_id: id,
        name: name.to_string(),
        user: "root".to_string(),
        uid: 0,
        gid: 0,
        partition: partition.to_string(),
        state,
        reason: "None".to_string(),
        priority: 4_294_901_760 - id,
        submit_time: T0,
        eligible_time: Some(T0),
        start_time: running.then_some(T0 + 1),
        end_time: None,
        time_limit_min: None,
        nodes: String::new(),
        num_nodes: 1,
        num_cpus: 1,
        num_tasks: 1,
        cpus_per_task: 1,
        mem_per_node_mb: 0,
        exit_code: (0, 0),
        workdir: "/tmp/fmtjobs".to_string(),
        stdout: format!("/tmp/fmtjobs/slurm-{id}.out"),
        stderr: format!("/tmp/fmtjobs/slurm-{id}.out"),
        stdin: "/dev/null".to_string(),
        command: "(null)".to_string(),
        submit_line: format!("sbatch -J {name} --wrap true"),
        batch_host: None,
        restarts: 0,
        req_nodes: 1,
        array: None,
        array_pending: None,
        dependency: String::new(),
        ..JobInfo::default()
    }
}

/// The nine jobs of the reference run on real Slurm (22.05), as seen
/// five seconds after submission.
pub(crate) fn sample_jobs() -> Vec<JobInfo> {
    let finished = |mut j: JobInfo, end: i64, node: &str| {
        j.end_time = Some(end);
        j.nodes = node.to_string();
        j.batch_host = Some(node.to_string());
        j
    };
    let mut sleeper = job(1, "sleeper", "debug", JobState::Running);
    sleeper.nodes = "n[1-2]".to_string();
    sleeper.batch_host = Some("n1".to_string());
    sleeper.num_nodes = 2;
    sleeper.num_cpus = 2;
    sleeper.num_tasks = 2;
    sleeper.req_nodes = 2;
    sleeper.time_limit_min = Some(10);
    sleeper.end_time = Some(T0 + 601);
    let mut long = job(2, "a_very_long_job_name", "long", JobState::Running);
    long.nodes = "n3".to_string();
    long.time_limit_min = Some(1440);
    let mut failer = finished(job(3, "failer", "debug", JobState::Failed), T0 + 1, "n4");
    failer.reason = "NonZeroExitCode".to_string();
    failer.exit_code = (3, 0);
    let okjob = finished(job(4, "okjob", "debug", JobState::Completed), T0 + 1, "n5");
    let mut tout = job(5, "tout", "debug", JobState::Running);
    tout.nodes = "n6".to_string();
    tout.time_limit_min = Some(1);
    let mut big = job(6, "big", "debug", JobState::Pending);
    big.reason = "Resources".to_string();
    big.req_nodes = 6;
    big.num_cpus = 6;
    big.num_tasks = 6;
    let mut held = job(7, "held", "debug", JobState::Pending);
    held.reason = "JobHeldUser".to_string();
    held.priority = 0;
    held.eligible_time = None;
    let mut cancelled = job(8, "cancelme", "debug", JobState::Cancelled);
    cancelled.reason = "Priority".to_string();
    cancelled.priority = 4_294_901_753;
    cancelled.start_time = Some(T0 + 3);
    cancelled.end_time = Some(T0 + 3);
    let mut nobody = job(9, "nobodyjob", "debug", JobState::Pending);
    nobody.user = "nobody".to_string();
    nobody.uid = 65534;
    nobody.gid = 65534;
    nobody.reason = "Priority".to_string();
    nobody.priority = 4_294_901_752;
    nobody.time_limit_min = Some(6);
    nobody.mem_per_node_mb = 100;
    vec![
        sleeper, long, failer, okjob, tout, big, held, cancelled, nobody,
    ]
}

const NOW: i64 = T0 + 5;

fn ts(t: i64) -> String {
    fmt_timestamp(Some(t))
}

#[test]
fn default_table_matches_slurm() {
    let out = render(&sample_jobs(), &SqueueFormat::default_format(), NOW).unwrap();
    assert_eq!(
        out,
        "             JOBID PARTITION     NAME     USER ST       TIME  NODES NODELIST(REASON)\n\
             \x20                6     debug      big     root PD       0:00      6 (Resources)\n\
             \x20                9     debug nobodyjo   nobody PD       0:00      1 (Priority)\n\
             \x20                7     debug     held     root PD       0:00      1 (JobHeldUser)\n\
             \x20                1     debug  sleeper     root  R       0:04      2 n[1-2]\n\
             \x20                5     debug     tout     root  R       0:04      1 n6\n\
             \x20                2      long a_very_l     root  R       0:04      1 n3\n"
    );
}

#[test]
fn long_table_has_date_line_and_limits() {
    let out = render(&sample_jobs(), &SqueueFormat::long_format(), NOW).unwrap();
    let expected = format!(
            "{}\n\
             \x20            JOBID PARTITION     NAME     USER    STATE       TIME TIME_LIMI  NODES NODELIST(REASON)\n\
             \x20                6     debug      big     root  PENDING       0:00 UNLIMITED      6 (Resources)\n\
             \x20                9     debug nobodyjo   nobody  PENDING       0:00      6:00      1 (Priority)\n\
             \x20                7     debug     held     root  PENDING       0:00 UNLIMITED      1 (JobHeldUser)\n\
             \x20                1     debug  sleeper     root  RUNNING       0:04     10:00      2 n[1-2]\n\
             \x20                5     debug     tout     root  RUNNING       0:04      1:00      1 n6\n\
             \x20                2      long a_very_l     root  RUNNING       0:04 1-00:00:00      1 n3\n",
            fmt_date_line(NOW).unwrap()
        );
    assert_eq!(out, expected);
}

#[test]
fn no_header_drops_header_and_date_line() {
    let mut fmt = SqueueFormat::long_format();
    fmt.no_header = true;
    let out = render(&sample_jobs(), &fmt, NOW).unwrap();
    assert_eq!(out.lines().count(), 6);
    assert!(out.starts_with("                 6     debug"));
}

#[test]
fn all_states_sorted_by_partition_state_priority() {
    let mut fmt = SqueueFormat::default_format();
    fmt.states = Some("all".to_string());
    let out = render(&sample_jobs(), &fmt, NOW).unwrap();
    let body: Vec<&str> = out.lines().skip(1).collect();
    assert_eq!(
        body[..3],
        [
            "                 8     debug cancelme     root CA       0:00      1 ",
            "                 4     debug    okjob     root CD       0:00      1 n5",
            "                 3     debug   failer     root  F       0:00      1 (NonZeroExitCode)",
        ]
    );
    let ids: Vec<&str> = body
        .iter()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(ids, ["8", "4", "3", "6", "9", "7", "1", "5", "2"]);
}

#[test]
fn state_filter_accepts_codes_names_and_flag_states() {
    let jobs = sample_jobs();
    let ids = |list: &str| -> Vec<u32> {
        filter_states(&jobs, Some(list))
            .unwrap()
            .iter()
            .map(|j| j.job_id)
            .collect()
    };
    assert_eq!(ids("pd"), [6, 7, 9]);
    assert_eq!(ids("PENDING,cd"), [4, 6, 7, 9]);
    assert_eq!(ids("CF,requeued"), Vec::<u32>::new());
    assert_eq!(ids("ALL").len(), 9);
    let default: Vec<u32> = filter_states(&jobs, None)
        .unwrap()
        .iter()
        .map(|j| j.job_id)
        .collect();
    assert_eq!(default, [1, 2, 5, 6, 7, 9]);
}

#[test]
fn unknown_state_is_an_error() {
    let err = filter_states(&sample_jobs(), Some("PD,foo")).unwrap_err();
    assert_eq!(
        err,
        FormatError::InvalidJobState {
            state: "foo".to_string()
        }
    );
    let mut fmt = SqueueFormat::default_format();
    fmt.states = Some("bogus".to_string());
    assert!(render(&sample_jobs(), &fmt, NOW).is_err());
}

#[test]
fn exporter_formats_keep_leading_space_and_literals() {
    let (mut fmt, warnings) = SqueueFormat::user_format(" %A,%T,%r");
    assert!(warnings.is_empty());
    fmt.no_header = true;
    fmt.states = Some("all".to_string());
    let out = render(&sample_jobs(), &fmt, NOW).unwrap();
    assert!(
        out.starts_with(" 8,CANCELLED,Priority\n 4,COMPLETED,None\n 3,FAILED,NonZeroExitCode\n")
    );
    let (mut fmt, _) = SqueueFormat::user_format("%A|%a|%T|%C");
    fmt.no_header = true;
    let out = render(&sample_jobs(), &fmt, NOW).unwrap();
    assert_eq!(out.lines().next(), Some("6|(null)|PENDING|6"));
    let (fmt, _) = SqueueFormat::user_format(" %A,%T,%r");
    let out = render(&sample_jobs(), &fmt, NOW).unwrap();
    assert_eq!(out.lines().next(), Some(" JOBID,STATE,REASON"));
}

#[test]
fn widths_truncate_values_and_headers() {
    let (mut fmt, _) = SqueueFormat::user_format("%.3i %2j %5P|%3R|");
    fmt.states = Some("all".to_string());
    let out = render(&sample_jobs(), &fmt, NOW).unwrap();
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "JOB NA PARTI|NOD|");
    assert_eq!(lines[1], "  8 ca debug|   |");
    assert_eq!(lines[3], "  3 fa debug|(No|");
    assert_eq!(lines[9], "  2 a_ long |n3 |");
}

#[test]
fn right_justified_columns_keep_node_lists_and_times_whole() {
    let (mut fmt, _) = SqueueFormat::user_format("%.2l|%.2L|%.2M|%.2N|%.2R|%.2Y|%.2e|%.2i");
    fmt.states = Some("pd,r".to_string());
    let out = render(&sample_jobs(), &fmt, NOW).unwrap();
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[0],
        "TI|TI|TI|NODELIST|NODELIST(REASON)|SCHEDNODES|EN|JO"
    );
    assert_eq!(lines[1], "UN|UN|0:00|  |(R|(null)|N/| 6");
    assert_eq!(lines[2], "6:00|6:00|0:00|  |(P|(null)|N/| 9");
    assert_eq!(lines[4], "10:00|9:56|0:04|n[1-2]|n[1-2]|(null)|20| 1");
}

#[test]
fn invalid_letter_is_echoed_with_a_warning() {
    let (mut fmt, warnings) = SqueueFormat::user_format("%_|%i");
    assert_eq!(
        warnings,
        [FormatWarning::InvalidJobField {
            spec: "_".to_string()
        }]
    );
    fmt.states = Some("pd".to_string());
    let out = render(&sample_jobs(), &fmt, NOW).unwrap();
    assert_eq!(out, "%_|JOBID\n%_|6\n%_|9\n%_|7\n");
}

#[test]
fn empty_format_prints_empty_lines() {
    let (fmt, warnings) = SqueueFormat::user_format("");
    assert!(warnings.is_empty());
    assert_eq!(render(&sample_jobs(), &fmt, NOW).unwrap(), "\n".repeat(7));
}

#[test]
fn field_list_widths_suffixes_and_unknown_names() {
    let (mut fmt, warnings) = SqueueFormat::field_list("JobID,Name:5,State:.9,Reason,Foo");
    assert_eq!(
        warnings,
        [FormatWarning::InvalidJobField {
            spec: "Foo".to_string()
        }]
    );
    fmt.states = Some("all".to_string());
    let out = render(&sample_jobs(), &fmt, NOW).unwrap();
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[0],
        "JOBID               NAME     STATEREASON              "
    );
    assert_eq!(
        lines[1],
        "8                   canceCANCELLEDPriority            "
    );
    assert_eq!(
        lines[3],
        "3                   faile   FAILEDNonZeroExitCode     "
    );
    let (fmt, _) = SqueueFormat::field_list("JobID:3 ,StateCompact: ,ReasonList:.12");
    let out = render(&sample_jobs(), &fmt, NOW).unwrap();
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "JOB ST NODELIST(REASON)");
    assert_eq!(lines[2], "9   PD   (Priority)");
    assert_eq!(lines[4], "1   R       n[1-2]");
}

#[test]
fn every_letter_of_percent_all() {
    let (mut fmt, warnings) = SqueueFormat::user_format("%all");
    assert!(warnings.is_empty());
    fmt.states = Some("r".to_string());
    let now = T0 + 22;
    let out = render(&sample_jobs(), &fmt, now).unwrap();
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
            lines[0],
            "ACCOUNT|TRES_PER_NODE|MIN_CPUS|MIN_TMP_DISK|END_TIME|FEATURES|GROUP|OVER_SUBSCRIBE|JOBID|NAME|\
             COMMENT|TIME_LIMIT|MIN_MEMORY|REQ_NODES|COMMAND|PRIORITY|QOS|REASON||ST|USER|RESERVATION|WCKEY|\
             EXC_NODES|NICE|S:C:T|JOBID|EXEC_HOST|CPUS|NODES|DEPENDENCY|ARRAY_JOB_ID|GROUP|SOCKETS_PER_NODE|\
             CORES_PER_SOCKET|THREADS_PER_CORE|ARRAY_TASK_ID|TIME_LEFT|TIME|NODELIST|CONTIGUOUS|PARTITION|\
             PRIORITY|NODELIST(REASON)|START_TIME|STATE|UID|SUBMIT_TIME|LICENSES|CORE_SPEC|SCHEDNODES|WORK_DIR"
        );
    let expected = format!(
            "(null)|N/A|1|0|{}|(null)|root|OK|1|sleeper|(null)|10:00|0||(null)|0.99998474121093|(null)|None||R|\
             root|(null)|(null)||0|*:*:*|1|n1|2|2|(null)|1|0|*|*|*|N/A|9:39|0:21|n[1-2]|0|debug|4294901759|\
             n[1-2]|{}|RUNNING|0|{}|(null)|N/A|(null)|/tmp/fmtjobs",
            ts(T0 + 601),
            ts(T0 + 1),
            ts(T0)
        );
    assert_eq!(lines[1], expected);
}

#[test]
fn times_left_used_and_unset() {
    let (mut fmt, _) = SqueueFormat::user_format("%i|%L|%l|%e|%M|%S|%B|%D|%m|%p");
    fmt.states = Some("all".to_string());
    let mut jobs = sample_jobs();
    // The time-limited job has now run past its limit.
    jobs[4].state = JobState::Timeout;
    jobs[4].reason = "TimeLimit".to_string();
    jobs[4].end_time = Some(T0 + 85);
    let out = render(&jobs, &fmt, T0 + 109).unwrap();
    let line = |id: &str| {
        out.lines()
            .find(|l| l.starts_with(&format!("{id}|")))
            .unwrap()
            .to_string()
    };
    assert_eq!(
        line("6"),
        "6|UNLIMITED|UNLIMITED|N/A|0:00|N/A|n/a|6|0|0.99998474004678"
    );
    assert_eq!(
        line("9"),
        "9|6:00|6:00|N/A|0:00|N/A|n/a|1|100M|0.99998473958112"
    );
    assert_eq!(
        line("7"),
        "7|UNLIMITED|UNLIMITED|N/A|0:00|N/A|n/a|1|0|0.00000000000000"
    );
    assert_eq!(
        line("5"),
        format!(
            "5|INVALID|1:00|{}|1:24|{}|n/a|1|0|0.99998474027961",
            ts(T0 + 85),
            ts(T0 + 1)
        )
    );
    assert_eq!(
        line("2"),
        format!(
            "2|23:58:12|1-00:00:00|N/A|1:48|{}|n/a|1|0|0.99998474097810",
            ts(T0 + 1)
        )
    );
    assert_eq!(
        line("4"),
        format!(
            "4|UNLIMITED|UNLIMITED|{}|0:00|{}|n5|1|0|0.99998474051244",
            ts(T0 + 1),
            ts(T0 + 1)
        )
    );
}

#[test]
fn reason_shown_for_bad_endings_nodes_otherwise() {
    let mut j = job(20, "x", "debug", JobState::NodeFail);
    j.nodes = "n7".to_string();
    j.reason = "NodeDown".to_string();
    assert_eq!(reason_or_nodes(&j), "n7");
    for state in [
        JobState::OutOfMemory,
        JobState::Deadline,
        JobState::Timeout,
        JobState::Failed,
    ] {
        j.state = state;
        assert_eq!(reason_or_nodes(&j), "(NodeDown)");
    }
}

#[test]
fn group_name_falls_back_to_gid() {
    let (mut fmt, _) = SqueueFormat::user_format("%g|%G|%U|%u");
    fmt.no_header = true;
    let mut j = job(30, "x", "debug", JobState::Running);
    assert_eq!(
        render(std::slice::from_ref(&j), &fmt, NOW).unwrap(),
        "root|0|0|root\n"
    );
    j.gid = 4_242_424;
    assert_eq!(render(&[j], &fmt, NOW).unwrap(), "4242424|4242424|0|root\n");
}

#[test]
fn field_list_extras() {
    let (mut fmt, _) = SqueueFormat::field_list(
        "JobID:3 ,exit_code:4 ,tres-alloc:35 ,NumTasks:2 ,STDIN: ,RestartCnt: ,cpus-per-task:",
    );
    fmt.no_header = true;
    fmt.states = Some("all".to_string());
    let mut jobs = sample_jobs();
    jobs[0].mem_per_node_mb = 1000;
    jobs[0].restarts = 2;
    let out = render(&jobs[..3], &fmt, NOW).unwrap();
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[0],
        "3   768  cpu=1,node=1,billing=1              1  /dev/null 0 1"
    );
    assert_eq!(
        lines[1],
        "1   0    cpu=2,mem=2000M,node=2,billing=2    2  /dev/null 2 1"
    );
}

#[test]
fn sort_keys_from_dash_s() {
    let mut fmt = SqueueFormat::default_format();
    fmt.states = Some("all".to_string());
    fmt.no_header = true;
    let ids = |fmt: &SqueueFormat| -> Vec<String> {
        render(&sample_jobs(), fmt, NOW)
            .unwrap()
            .lines()
            .filter_map(|l| l.split_whitespace().next().map(String::from))
            .collect()
    };
    fmt.sort = Some("-i".to_string());
    assert_eq!(ids(&fmt), ["9", "8", "7", "6", "5", "4", "3", "2", "1"]);
    fmt.sort = Some("+j".to_string());
    assert_eq!(ids(&fmt), ["2", "6", "8", "3", "7", "9", "4", "1", "5"]);
    // Unknown keys are ignored; ties go newest job first, as in Slurm.
    fmt.sort = Some("z,-D".to_string());
    assert_eq!(ids(&fmt), ["6", "1", "9", "8", "7", "5", "4", "3", "2"]);
}

#[test]
fn date_line_out_of_range_is_an_error() {
    let err = render(&sample_jobs(), &SqueueFormat::long_format(), i64::MAX).unwrap_err();
    assert_eq!(err, FormatError::TimeOutOfRange { secs: i64::MAX });
}

#[test]
fn start_format_shows_planned_starts_and_nodes() {
    let mut planned = job(7, "wide", "debug", JobState::Pending);
    planned.reason = "Resources".into();
    planned.sched_start = Some(T0 + 600);
    planned.sched_nodes = "n[1-2]".into();
    planned.num_nodes = 2;
    let mut unplanned = job(8, "later", "debug", JobState::Pending);
    unplanned.reason = "Priority".into();
    let mut fmt = SqueueFormat::start_format();
    fmt.sort = Some(super::START_SORT.into());
    let out = render(&[unplanned, planned], &fmt, NOW).unwrap();
    // Sorted by start: the job without a plan goes by its submit time.
    let start = crate::cli::format::time::fmt_timestamp(Some(T0 + 600));
    let expected = format!(
        "             JOBID PARTITION     NAME     USER ST          START_TIME  NODES SCHEDNODES           NODELIST(REASON)\n\
         \x20                8     debug    later     root PD                 N/A      1 (null)               (Priority)\n\
         \x20                7     debug     wide     root PD {start:>19}      2 n[1-2]               (Resources)\n"
    );
    assert_eq!(out, expected);
}

/// Time suspended does not count as run time: a suspended job shows what
/// it ran before (`SecsPreSuspend`), a resumed one its running time only.
#[test]
fn used_time_leaves_out_time_suspended() {
    let mut j = job(1, "s", "p", JobState::Suspended);
    j.start_time = Some(T0);
    j.secs_pre_suspend = 30;
    j.suspend_time = Some(T0 + 30);
    assert_eq!(used_secs(&j, T0 + 500), 30);
    j.state = JobState::Running;
    j.suspend_time = Some(T0 + 130);
    j.suspended_secs = 100;
    assert_eq!(used_secs(&j, T0 + 200), 100);
    j.state = JobState::Cancelled;
    j.end_time = Some(T0 + 300);
    assert_eq!(used_secs(&j, T0 + 900), 200);
}

#[test]
fn over_subscribe_is_the_controllers_word() {
    let (fmt, _) = SqueueFormat::user_format("%i %h");
    let mut jobs = sample_jobs();
    jobs.truncate(1);
    jobs[0].over_subscribe = "YES".into();
    let out = render(&jobs, &fmt, NOW).unwrap();
    assert_eq!(
        out.lines()
            .nth(1)
            .map(str::split_whitespace)
            .unwrap()
            .nth(1),
        Some("YES")
    );
    // From a controller that does not send it: what --exclusive says.
    jobs[0].over_subscribe.clear();
    jobs[0].exclusive = Some(Exclusive::User);
    let out = render(&jobs, &fmt, NOW).unwrap();
    assert_eq!(
        out.lines()
            .nth(1)
            .map(str::split_whitespace)
            .unwrap()
            .nth(1),
        Some("USER")
    );
}
