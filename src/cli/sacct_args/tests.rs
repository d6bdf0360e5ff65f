//! Unit tests for sacct's command line: option syntax, the list grammars, the date
//! grammar and default time window, and the field list chosen. Only tests live here;
//! the code under test is in the parent module and `dates`.

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
        ok(&["-s", "RV,f,resizing"]).query.states,
        vec![JobState::Failed]
    );
    assert_eq!(
        err(&["-s", "rs,RV"]).to_string(),
        "sacct: error: canopy never records jobs in state RESIZING,REVOKED, so this query \
             cannot match anything"
    );
    // A requeued job's earlier runs are recorded REQUEUED (seen with -D).
    assert_eq!(ok(&["-s", "RQ"]).query.states, vec![JobState::Requeued]);
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
    // -D asks for a requeued job's earlier runs too.
    assert!(!plain.query.duplicates);
    assert!(ok(&["-D"]).query.duplicates);
    assert!(ok(&["--duplicates"]).query.duplicates);
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
        earlier_runs: Vec::new(),
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
        req_gres: Vec::new(),
        alloc_gres: Vec::new(),
        suspended_secs: 0,
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
