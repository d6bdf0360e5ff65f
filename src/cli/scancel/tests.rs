//! Unit tests for scancel: the command line, job id and signal grammars, the
//! client-side filters, the selection of jobs and steps, and the lines and exit
//! status it reports. Tests that need a running cluster are in tests/scancel.rs.

use super::*;

fn args(words: &[&str]) -> Vec<String> {
    words.iter().map(|s| s.to_string()).collect()
}

fn cancel(words: &[&str]) -> ScancelArgs {
    match parse(&args(words)) {
        Ok(Command::Cancel(a)) => *a,
        other => panic!("{words:?}: {other:?}"),
    }
}

fn error(words: &[&str]) -> ScancelError {
    parse(&args(words)).unwrap_err()
}

fn target(job_id: u32) -> Target {
    Target {
        job_id,
        tasks: None,
        step: None,
    }
}

fn job(job_id: u32, state: JobState, uid: u32, name: &str, partition: &str) -> JobInfo {
    JobInfo {
        job_id,
        name: name.into(),
        user: format!("u{uid}"),
        uid,
        gid: uid,
        partition: partition.into(),
        state,
        reason: "None".into(),
        priority: 1,
        submit_time: 0,
        eligible_time: None,
        start_time: None,
        end_time: None,
        time_limit_min: None,
        nodes: if state == JobState::Pending {
            String::new()
        } else {
            "n[1-2]".into()
        },
        num_nodes: 1,
        num_cpus: 1,
        num_tasks: 1,
        cpus_per_task: 1,
        mem_per_node_mb: 0,
        exit_code: (0, 0),
        workdir: "/".into(),
        stdout: String::new(),
        stderr: String::new(),
        stdin: String::new(),
        command: String::new(),
        submit_line: String::new(),
        batch_host: None,
        restarts: 0,
        req_nodes: 1,
        array: None,
        array_pending: None,
        dependency: String::new(),
        ..JobInfo::default()
    }
}

fn no_file(_: &str) -> std::io::Result<String> {
    Err(std::io::Error::from(std::io::ErrorKind::NotFound))
}

fn selector(words: &[&str]) -> Selector {
    let lookup = |n: &str| (n == "alice").then_some(1000);
    Selector::resolve(&cancel(words).filters, 500, lookup, no_file).unwrap()
}

fn ids(s: &Selection) -> Vec<u32> {
    s.jobs.iter().map(|j| j.job_id).collect()
}

#[test]
fn option_syntax_forms_all_reach_the_same_value() {
    for form in [
        &["--signal=USR1", "5"][..],
        &["--signal", "USR1", "5"],
        &["-sUSR1", "5"],
        &["-s", "USR1", "5"],
        &["5", "--signal", "SIGUSR1"],
        &["5", "-s", "usr1"],
        &["--sig=10", "5"],
    ] {
        let a = cancel(form);
        assert_eq!(a.signal, Some(10), "{form:?}");
        assert_eq!(a.targets, vec![target(5)], "{form:?}");
    }
}

#[test]
fn bundled_flags_and_counted_verbosity() {
    let a = cancel(&["-bfiv", "-vv", "7"]);
    assert!(a.batch && a.full && a.interactive);
    assert_eq!(a.verbosity, 3);
    assert!(!a.batch_only(), "-f overrides -b");
    let a = cancel(&["-vs", "KILL", "7"]);
    assert_eq!((a.verbosity, a.signal), (1, Some(9)));
    // -Q and -v both set Slurm's one verbosity level, the later one winning.
    assert!(cancel(&["-v", "-Q", "7"]).quiet());
    assert_eq!(cancel(&["-Q", "-v", "7"]).verbosity, 0);
    assert!(cancel(&["-b", "7"]).batch_only());
}

#[test]
fn double_dash_ends_options() {
    assert_eq!(cancel(&["--", "8"]).targets, vec![target(8)]);
    assert_eq!(
        error(&["--", "-s"]),
        ScancelError::InvalidJobId { id: "-s".into() }
    );
}

#[test]
fn every_filter_option_is_recorded() {
    let a = cancel(&[
        "-u",
        "alice,7",
        "-t",
        "pd",
        "-p",
        "debug",
        "-n",
        "x",
        "-w",
        "n[1-2]",
        "-A",
        "ACC",
        "-q",
        "Normal",
        "-R",
        "r1",
        "--wckey=w",
    ]);
    let f = a.filters;
    assert_eq!(f.users, Some(Users::Listed("alice,7".into())));
    assert_eq!(f.state, Some(JobState::Pending));
    assert_eq!(f.partition.as_deref(), Some("debug"));
    assert_eq!(f.name.as_deref(), Some("x"));
    assert_eq!(f.nodelist.as_deref(), Some("n[1-2]"));
    assert_eq!(f.account.as_deref(), Some("acc"));
    assert_eq!(f.qos.as_deref(), Some("normal"));
    assert_eq!(f.reservation.as_deref(), Some("r1"));
    assert_eq!(f.wckey.as_deref(), Some("w"));
    assert!(a.targets.is_empty());
    // Long spellings, and the later of --me / -u wins.
    let f = cancel(&["--jobname=j", "--user=bob", "--me", "--state=RUNNING"]).filters;
    assert_eq!(f.name.as_deref(), Some("j"));
    assert_eq!(f.users, Some(Users::Me));
    assert_eq!(f.state, Some(JobState::Running));
    assert_eq!(
        cancel(&["--me", "-u", "bob"]).filters.users,
        Some(Users::Listed("bob".into()))
    );
    assert_eq!(cancel(&["--name", "y"]).filters.name.as_deref(), Some("y"));
    assert_eq!(
        cancel(&["--state", "S"]).filters.state,
        Some(JobState::Suspended)
    );
}

#[test]
fn clusters_and_ignored_options() {
    let a = cancel(&[
        "--clusters=all",
        "-H",
        "--cron",
        "--hurry",
        "--sibling",
        "c2",
        "1",
    ]);
    assert_eq!(a.clusters.as_deref(), Some("all"));
    assert_eq!(a.ignored, vec!["hurry", "cron", "sibling"]);
    assert_eq!(cancel(&["-M", "x", "1"]).clusters.as_deref(), Some("x"));
    assert_eq!(cancel(&["--clu", "y", "1"]).clusters.as_deref(), Some("y"));
    assert_eq!(cancel(&["--ctld", "1"]).ignored, vec!["ctld"]);
}

#[test]
fn help_usage_version_stop_parsing_in_argv_order() {
    assert_eq!(parse(&args(&["--help"])), Ok(Command::Help));
    assert_eq!(parse(&args(&["-h", "--bogus"])), Ok(Command::Help));
    assert_eq!(parse(&args(&["abc", "--usage"])), Ok(Command::Usage));
    assert_eq!(parse(&args(&["-V"])), Ok(Command::Version));
    assert_eq!(parse(&args(&["-vV"])), Ok(Command::Version));
    assert_eq!(
        error(&["--bogus", "--help"]),
        ScancelError::Syntax(GetoptError::Unrecognized {
            option: "bogus".into()
        })
    );
}

#[test]
fn option_errors_use_getopt_wording() {
    let e = error(&["--bogus", "1"]);
    assert_eq!(
        e.to_string(),
        "scancel: unrecognized option '--bogus'\nTry \"scancel --help\" for more information"
    );
    assert_eq!(
        error(&["-z", "1"]),
        ScancelError::Syntax(GetoptError::InvalidShort { option: 'z' })
    );
    assert_eq!(
        error(&["-vz", "1"]),
        ScancelError::Syntax(GetoptError::InvalidShort { option: 'z' })
    );
    assert_eq!(
        error(&["1", "--signal"]),
        ScancelError::Syntax(GetoptError::MissingLongArgument { option: "signal" })
    );
    assert_eq!(
        error(&["1", "-s"]),
        ScancelError::Syntax(GetoptError::MissingShortArgument { option: 's' })
    );
    assert_eq!(
        error(&["--batch=yes", "1"]),
        ScancelError::Syntax(GetoptError::UnexpectedArgument { option: "batch" })
    );
    let e = error(&["--s=9", "1"]);
    assert_eq!(
        e,
        ScancelError::Syntax(GetoptError::Ambiguous {
            option: "s".into(),
            candidates: "'--signal' '--state' '--sibling'".into()
        })
    );
    assert!(e.to_string().contains("is ambiguous"));
    assert_eq!(
        error(&["--=x"]),
        ScancelError::Syntax(GetoptError::Unrecognized { option: "".into() })
    );
}

#[test]
fn job_id_forms() {
    assert_eq!(
        cancel(&["1,2", "3"]).targets,
        vec![target(1), target(2), target(3)]
    );
    let arr = |job_id, tasks: Option<Vec<u32>>| Target {
        job_id,
        tasks,
        step: None,
    };
    assert_eq!(
        cancel(&["7_1", "7_[1-3,5],8_*"]).targets,
        vec![
            arr(7, Some(vec![1])),
            arr(7, Some(vec![1, 2, 3, 5])),
            arr(8, None)
        ]
    );
    assert_eq!(arr(7, Some(vec![1, 2, 3])).to_string(), "7_[1-3]");
    assert_eq!(arr(7, Some(vec![4])).to_string(), "7_4");
    assert_eq!(
        cancel(&["4.0", "5.12"]).targets,
        vec![
            Target {
                job_id: 4,
                tasks: None,
                step: Some(0),
            },
            Target {
                job_id: 5,
                tasks: None,
                step: Some(12),
            }
        ]
    );
    for (word, reported) in [
        ("abc", "abc"),
        ("0", "0"),
        ("", ""),
        ("12x,3", "12x,3"),
        ("1,abc", "abc"),
        ("1,,2", ",2"),
        ("1,", ""),
        ("7_x", "7_x"),
        ("7_[1-3", "7_[1-3"),
        ("7_[3-1]", "7_[3-1]"),
        ("7_[1-3%2]", "7_[1-3%2]"),
        ("7+1", "7+1"),
        ("7.batch", "7.batch"),
        ("7.", "7."),
        ("+7", "+7"),
        ("99999999999", "99999999999"),
    ] {
        let e = error(&[word]);
        assert_eq!(
            e,
            ScancelError::InvalidJobId {
                id: reported.into()
            },
            "{word:?}"
        );
        assert_eq!(
            e.to_string(),
            format!("scancel: error: Invalid job id {reported}")
        );
    }
}

#[test]
fn nothing_to_act_on_is_an_error() {
    let e = error(&[]);
    assert_eq!(e, ScancelError::NoJobIdentification);
    assert_eq!(
        e.to_string(),
        "scancel: error: No job identification provided"
    );
    assert_eq!(error(&["-v", "-s", "9"]), ScancelError::NoJobIdentification);
    // Any filter is enough.
    assert!(cancel(&["--me"]).targets.is_empty());
    assert!(cancel(&["--wckey", "w"]).filters.any());
}

#[test]
fn bad_signal_and_state_values() {
    let e = error(&["-s", "BOGUS", "1"]);
    assert_eq!(e.to_string(), "Unknown job signal: BOGUS");
    assert_eq!(
        error(&["-t", "NOPE"]).to_string(),
        "Invalid job state specified: NOPE\n\
             Valid job states are PENDING, RUNNING, and SUSPENDED"
    );
    // A real state that is never active is accepted (it just matches nothing).
    assert_eq!(
        cancel(&["-t", "cd"]).filters.state,
        Some(JobState::Completed)
    );
}

#[test]
fn signal_names_and_numbers() {
    assert_eq!(parse_signal("SIGTERM"), Some(15));
    assert_eq!(parse_signal("usr2"), Some(12));
    assert_eq!(parse_signal("SigKill"), Some(9));
    assert_eq!(parse_signal("9"), Some(9));
    assert_eq!(parse_signal("64"), Some(64));
    assert_eq!(parse_signal("winch"), Some(28));
    assert_eq!(parse_signal("SIGSYS"), Some(31));
    assert_eq!(parse_signal("PWR"), Some(30));
    assert_eq!(parse_signal("iot"), Some(6));
    assert_eq!(parse_signal("SIGCLD"), Some(17));
    assert_eq!(parse_signal("poll"), Some(29));
    assert_eq!(parse_signal("RTMIN"), Some(34));
    assert_eq!(parse_signal("SIGRTMIN+2"), Some(36));
    assert_eq!(parse_signal("rtmax-1"), Some(63));
    assert_eq!(parse_signal("RTMAX"), Some(64));
    for bad in [
        "0",
        "65",
        "-1",
        "BOGUS",
        "",
        "SIG",
        "SIGSIGTERM",
        "RTMIN+31",
        "RTMIN-1",
    ] {
        assert_eq!(parse_signal(bad), None, "{bad:?}");
    }
}

#[test]
fn resolve_looks_up_users_and_nodes() {
    let lookup = |n: &str| (n == "alice").then_some(1000);
    let s = Selector::resolve(&cancel(&["-u", "alice,42"]).filters, 5, lookup, no_file);
    assert_eq!(s.unwrap().uids, Some(vec![1000, 42]));
    let s = Selector::resolve(&cancel(&["--me"]).filters, 5, lookup, no_file).unwrap();
    assert_eq!(s.uids, Some(vec![5]));
    for (list, bad) in [("alice,nobody_here", "nobody_here"), ("", ""), (",", ",")] {
        let e = Selector::resolve(&cancel(&["-u", list]).filters, 5, lookup, no_file);
        assert_eq!(e, Err(ScancelError::InvalidUser { name: bad.into() }));
    }
    let s = Selector::resolve(&cancel(&["-w", "n[1-3]"]).filters, 5, lookup, no_file);
    assert_eq!(
        s.unwrap().nodes,
        Some(vec!["n1".into(), "n2".into(), "n3".into()])
    );
    let e = Selector::resolve(&cancel(&["-w", "n[3-1]"]).filters, 5, lookup, no_file);
    assert!(
        matches!(e, Err(ScancelError::InvalidNodeList { .. })),
        "{e:?}"
    );
    // A path is a file of names.
    let file = |p: &str| {
        assert_eq!(p, "/tmp/hosts");
        Ok("n4\nn[5-6]\n".to_string())
    };
    let s = Selector::resolve(&cancel(&["-w", "/tmp/hosts"]).filters, 5, lookup, file);
    assert_eq!(
        s.unwrap().nodes,
        Some(vec!["n4".into(), "n5".into(), "n6".into()])
    );
    let e = Selector::resolve(&cancel(&["-w", "./nope"]).filters, 5, lookup, no_file);
    assert!(
        matches!(&e, Err(ScancelError::NodeListFile { path, .. }) if path == "./nope"),
        "{e:?}"
    );
}

#[test]
fn each_filter_matches_only_its_jobs() {
    use JobState::*;
    let a = job(1, Pending, 1000, "alpha", "debug");
    let mut b = job(2, Running, 1000, "beta", "short");
    b.reservation = "maint".into();
    let c = job(3, Suspended, 42, "alpha", "short");
    let all = [&a, &b, &c];
    let pass = |words: &[&str]| -> Vec<u32> {
        let s = selector(words);
        all.iter()
            .filter(|j| s.matches(j))
            .map(|j| j.job_id)
            .collect()
    };
    assert_eq!(pass(&["-u", "alice"]), vec![1, 2]);
    assert_eq!(pass(&["-u", "42,alice"]), vec![1, 2, 3]);
    assert_eq!(pass(&["--me"]), Vec::<u32>::new());
    assert_eq!(pass(&["-t", "PENDING"]), vec![1]);
    assert_eq!(pass(&["-t", "r"]), vec![2]);
    assert_eq!(pass(&["-t", "suspended"]), vec![3]);
    assert_eq!(pass(&["-p", "short"]), vec![2, 3]);
    assert_eq!(pass(&["-n", "alpha"]), vec![1, 3]);
    assert_eq!(pass(&["-n", "Alpha"]), Vec::<u32>::new());
    assert_eq!(pass(&["-w", "n2,n9"]), vec![2, 3]);
    assert_eq!(pass(&["-w", "n9"]), Vec::<u32>::new());
    assert_eq!(pass(&["-q", "NORMAL"]), vec![1, 2, 3]);
    assert_eq!(pass(&["-q", "high"]), Vec::<u32>::new());
    assert_eq!(pass(&["-A", "acct"]), Vec::<u32>::new());
    assert_eq!(pass(&["-R", "maint"]), vec![2]);
    assert_eq!(pass(&["-R", "other"]), Vec::<u32>::new());
    assert_eq!(pass(&["--wckey", "submitit"]), Vec::<u32>::new());
    // Combined with AND.
    assert_eq!(pass(&["-n", "alpha", "-p", "short"]), vec![3]);
    assert_eq!(pass(&["-n", "alpha", "-u", "alice", "-t", "PD"]), vec![1]);
}

#[test]
fn select_without_ids_takes_every_active_job_pending_first() {
    use JobState::*;
    let jobs = [
        job(1, Running, 1, "a", "p"),
        job(2, Completed, 1, "a", "p"),
        job(3, Pending, 1, "a", "p"),
        job(4, Completing, 1, "a", "p"),
        job(5, Suspended, 1, "a", "p"),
        job(6, Pending, 1, "b", "p"),
    ];
    let s = select(&[], &selector(&["-n", "a"]), &jobs);
    assert_eq!(ids(&s), vec![3, 1, 5]);
    assert!(s.missing.is_empty());
    let s = select(&[], &selector(&["-n", "nothing"]), &jobs);
    assert_eq!(s, Selection::default());
}

#[test]
fn select_with_ids_reports_missing_ones_and_keeps_filters() {
    use JobState::*;
    let jobs = [
        job(1, Running, 1, "a", "p"),
        job(2, Completed, 1, "a", "p"),
        job(3, Pending, 1, "a", "p"),
        job(4, Running, 1, "b", "p"),
    ];
    let step = |job_id, s| Target {
        job_id,
        step: Some(s),
        tasks: None,
    };
    let targets = [
        target(1),
        target(2),
        target(9),
        target(4),
        target(1),
        step(1, 0),
        step(3, 0),
        step(9, 1),
        target(3),
    ];
    let s = select(&targets, &selector(&["-n", "a"]), &jobs);
    // 4 is filtered out silently, 1 is taken once, pending 3 goes first.
    assert_eq!(ids(&s), vec![3, 1]);
    // Finished 2 and unknown 9 are missing, with their steps; the step of
    // running 1 is acted on, the step of pending 3 passed over.
    assert_eq!(s.missing, vec![target(2), target(9), step(9, 1)]);
    assert_eq!(s.steps, vec![(1, 0)]);
    // A step of a job the filters leave out is left out too.
    let s = select(&[step(4, 0)], &selector(&["-n", "a"]), &jobs);
    assert_eq!((s.steps.len(), s.missing.len()), (0, 0));
    assert_eq!(
        missing_line(&target(2)),
        "scancel: error: Kill job error on job id 2: Invalid job id specified"
    );
    assert_eq!(
        missing_line(&step(9, 1)),
        "scancel: error: Kill job error on job step id 9.1: Invalid job id specified"
    );
    // A running job without that step: Slurm names the job alone, and
    // exits with its error number's low byte.
    assert_eq!(
        step_error(1, 7, INVALID_JOB_ID),
        (
            "scancel: error: Kill job error on job step id 1: Invalid job id specified".into(),
            225
        )
    );
    assert_eq!(
        step_action_line(1, 0, Some(10)),
        "scancel: Signal 10 to step 1.0"
    );
}

#[test]
fn sigkill_cancels_pending_jobs_and_signals_the_rest() {
    use JobState::*;
    let jobs = [job(3, Pending, 1, "a", "p"), job(1, Running, 1, "a", "p")];
    let req = |ids: Vec<u32>, signal, batch_only| CancelRequest {
        job_ids: ids,
        signal,
        batch_only,
        exact: true,
    };
    assert_eq!(
        requests(&jobs, Some(9), true),
        vec![req(vec![3], None, true), req(vec![1], Some(9), true)]
    );
    assert_eq!(
        requests(&jobs, Some(15), false),
        vec![req(vec![3, 1], Some(15), false)]
    );
    assert_eq!(
        requests(&jobs, None, false),
        vec![req(vec![3, 1], None, false)]
    );
    assert!(requests(&[], Some(9), false).is_empty());
}

#[test]
fn direct_only_for_plain_ids() {
    assert!(cancel(&["1", "2"]).direct());
    assert!(cancel(&["-b", "-v", "-Q", "1"]).direct());
    assert!(!cancel(&["-s", "TERM", "1"]).direct());
    assert!(!cancel(&["-i", "1"]).direct());
    assert!(!cancel(&["1.0"]).direct());
    assert!(!cancel(&["-u", "x", "1"]).direct());
}

#[test]
fn confirm_reads_answers_until_yes_or_no() {
    let j = job(7, JobState::Pending, 1, "nm", "debug");
    let ask = |input: &str| {
        let mut out = Vec::new();
        let yes = confirm(&j, &mut std::io::Cursor::new(input.as_bytes()), &mut out);
        (yes, String::from_utf8(out).unwrap())
    };
    let prompt = "Cancel job_id=7 name=nm partition=debug [y/n]? ";
    assert_eq!(ask("y\n"), (true, prompt.to_string()));
    assert!(ask("Yes\n").0);
    assert_eq!(ask("N\n"), (false, prompt.to_string()));
    assert_eq!(ask("maybe\n\ny\n"), (true, prompt.repeat(3)));
    assert_eq!(ask(""), (false, format!("{prompt}\n")));
    assert_eq!(ask("x\n"), (false, format!("{}\n", prompt.repeat(2))));
}

#[test]
fn verbose_lines_name_the_action() {
    assert_eq!(
        action_line(4, &cancel(&["4"])),
        "scancel: Terminating job 4"
    );
    assert_eq!(
        action_line(4, &cancel(&["-s", "USR1", "4"])),
        "scancel: Signal 10 to job 4"
    );
    assert_eq!(
        action_line(4, &cancel(&["-b", "-s", "1", "4"])),
        "scancel: Signal 1 to batch job 4"
    );
    assert_eq!(
        action_line(4, &cancel(&["-bf", "4"])),
        "scancel: Terminating full job 4"
    );
    assert_eq!(
        no_match_line(&cancel(&["--me", "-t", "pd", "-p", "x"]).filters, 12),
        "scancel: error: No active jobs match ALL job filters, including: \
             partition=x state=PENDING user_name=12"
    );
}

#[test]
fn outcome_prints_errors_and_fails_only_for_real_refusals() {
    let gone = vec![
        (1, None),
        (2, Some(INVALID_JOB_ID.to_string())),
        (3, Some(ALREADY_DONE.to_string())),
    ];
    let (lines, code) = outcome(&gone, true);
    assert_eq!(code, 0);
    assert_eq!(
        lines,
        vec![
            "scancel: error: Kill job error on job id 2: Invalid job id specified",
            "scancel: error: Kill job error on job id 3: \
                 Job/step already completing or completed",
        ]
    );
    assert_eq!(outcome(&gone, false), (Vec::new(), 0));
    let refused = vec![(4, Some("Job is pending execution".to_string()))];
    let (lines, code) = outcome(&refused, false);
    assert_eq!(code, 1);
    assert_eq!(
        lines,
        vec!["scancel: error: Kill job error on job id 4: Job is pending execution"]
    );
}

#[test]
fn clusters_must_be_local_or_all() {
    assert_eq!(check_clusters("all", "test"), Ok(()));
    assert_eq!(check_clusters("TEST,all", "test"), Ok(()));
    assert_eq!(
        check_clusters("test,other", "test"),
        Err(ScancelError::UnknownCluster {
            name: "other".into()
        })
    );
    assert!(check_clusters("", "test")
        .unwrap_err()
        .to_string()
        .contains("can't be reached now"));
}
