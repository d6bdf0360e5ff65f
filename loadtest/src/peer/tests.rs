//! Unit tests for the peer scenario's pure parts: the plan, ratios and rows, parsing of
//! command output, slurm.conf text, port blocks and process probes. Running both clusters
//! is left to the scenario itself. Only tests live here; the code under test is in the
//! parent module and its siblings.

use super::*;

fn opts() -> PeerOpts {
    PeerOpts {
        canopy_bin: PathBuf::from("/nonexistent/bin"),
        work_dir: std::env::temp_dir(),
        ks: vec![8, 128, 512],
        tree_width: 50,
        submits: 200,
        queued: 2000,
        quick: false,
        leaves: Leaves::Plain,
        canopy_only: false,
        launch_only: false,
        reps: None,
    }
}

fn no_progress() -> impl FnMut(&str) {
    |_: &str| {}
}

#[test]
fn advantage_is_canopy_over_slurm_for_rates_and_inverse_for_times() {
    assert_eq!(advantage(Unit::JobsPerS, 1000.0, 250.0), Some(4.0));
    assert_eq!(advantage(Unit::Ms, 5.0, 50.0), Some(10.0));
    assert_eq!(advantage(Unit::Ms, 0.0, 50.0), None);
    assert_eq!(advantage(Unit::JobsPerS, 10.0, 0.0), None);
    assert_eq!(advantage(Unit::JobsPerS, f64::NAN, 1.0), None);
}

#[test]
fn rows_carry_ratio_or_the_reason_slurm_is_missing() {
    let ok = make_row(
        "squeue_2000_queued".into(),
        Unit::Ms,
        None,
        2.0,
        &Ok(16.0),
        "n".into(),
    );
    assert_eq!(ok.unit, "ms");
    assert_eq!(ok.slurm, Some(16.0));
    assert_eq!(ok.ratio, Some(8.0));
    assert_eq!(ok.note, "n");
    let missing = make_row(
        "launch_8_nodes".into(),
        Unit::JobsPerS,
        Some(8),
        2.0,
        &Err("boom".into()),
        "n".into(),
    );
    assert_eq!(missing.unit, "jobs_per_s");
    assert_eq!(missing.nodes, Some(8));
    assert_eq!(missing.slurm, None);
    assert_eq!(missing.ratio, None);
    assert_eq!(missing.note, "n; slurm not measured: boom");
}

#[test]
fn median_handles_odd_even_and_empty() {
    assert_eq!(median(&mut [3.0, 1.0, 2.0]), Some(2.0));
    assert_eq!(median(&mut [4.0, 1.0, 3.0, 2.0]), Some(2.5));
    assert_eq!(median(&mut []), None);
    assert!(matches!(
        median_of(&mut [], "launch"),
        Err(PeerError::BadOption(m)) if m.contains("launch")
    ));
}

#[test]
fn rate_is_count_over_seconds() {
    assert_eq!(per_second(200, Duration::from_millis(500)), 400.0);
}

#[test]
fn plan_uses_options_or_small_counts_in_quick_mode() {
    let full = Plan::from_opts(&opts()).unwrap();
    assert_eq!(full.ks, vec![8, 128, 512]);
    assert_eq!(full.parallel_submits, 2000);
    assert_eq!(full.queued, 2000);
    let quick = Plan::from_opts(&PeerOpts {
        quick: true,
        ..opts()
    })
    .unwrap();
    assert_eq!(quick.ks, vec![4]);
    assert_eq!(
        (quick.submits, quick.parallel_submits, quick.queued),
        (20, 200, 100)
    );
    assert_eq!(quick.tree_width, 50);
    assert_eq!(launch_reps(128), 3);
    assert_eq!(launch_reps(512), 2);
}

#[test]
fn canopy_only_and_reps_reach_the_plan() {
    let plan = Plan::from_opts(&PeerOpts {
        canopy_only: true,
        launch_only: true,
        reps: Some(5),
        ..opts()
    })
    .unwrap();
    assert!(plan.canopy_only && plan.launch_only);
    assert_eq!(plan.reps, Some(5));
}

#[test]
fn plan_rejects_unusable_options() {
    for bad in [
        PeerOpts {
            tree_width: 1,
            ..opts()
        },
        PeerOpts {
            submits: 0,
            ..opts()
        },
        PeerOpts {
            queued: 0,
            ..opts()
        },
        PeerOpts {
            ks: vec![],
            ..opts()
        },
        PeerOpts {
            ks: vec![8, 0],
            ..opts()
        },
        PeerOpts {
            reps: Some(0),
            ..opts()
        },
    ] {
        assert!(matches!(
            Plan::from_opts(&bad),
            Err(PeerError::BadOption(_))
        ));
    }
}

#[test]
fn run_rejects_bad_options_and_missing_binaries_before_touching_slurm() {
    let mut p = no_progress();
    let bad = PeerOpts {
        ks: vec![],
        ..opts()
    };
    assert!(matches!(run(&bad, &mut p), Err(PeerError::BadOption(_))));
    match run(&opts(), &mut p) {
        Err(PeerError::MissingBinary { path }) => {
            assert_eq!(path, PathBuf::from("/nonexistent/bin/canopy"))
        }
        other => panic!("expected MissingBinary, got {other:?}"),
    }
}

#[test]
fn quick_mode_reports_missing_slurm_without_installing() {
    let mut lines = Vec::new();
    let r = ensure_slurm_installed(&["/nonexistent/slurmd", "/"], true, &mut |l: &str| {
        lines.push(l.to_string())
    });
    match r {
        Err(PeerError::SlurmUnavailable(why)) => {
            assert!(why.contains("/nonexistent/slurmd"), "{why}");
            assert!(!why.contains("/,"), "{why}");
        }
        other => panic!("expected SlurmUnavailable, got {other:?}"),
    }
    assert!(lines.is_empty());
    assert!(ensure_slurm_installed(&["/"], true, &mut no_progress()).is_ok());
}

#[test]
fn parses_cluster_up_output() {
    let out = "export CANOPY_CONF=/tmp/c/slurm.conf PATH=/tmp/c/bin:$PATH\n";
    assert_eq!(
        parse_canopy_conf(out),
        Some(PathBuf::from("/tmp/c/slurm.conf"))
    );
    let noisy = "starting\n  export PATH=/x:$PATH CANOPY_CONF=/d/slurm.conf\n";
    assert_eq!(
        parse_canopy_conf(noisy),
        Some(PathBuf::from("/d/slurm.conf"))
    );
    assert_eq!(parse_canopy_conf("CANOPY_CONF=/a\n"), None);
    assert_eq!(parse_canopy_conf("export CANOPY_CONF= PATH=/x\n"), None);
    match canopy_conf_from("canopy cluster up", "nothing useful") {
        Err(PeerError::Parse { command, output }) => {
            assert_eq!(command, "canopy cluster up");
            assert_eq!(output, "nothing useful");
        }
        other => panic!("expected Parse, got {other:?}"),
    }
}

#[test]
fn parses_job_ids_and_listings() {
    assert_eq!(parse_job_id("42\n"), Some(42));
    assert_eq!(parse_job_id("42;peer\n"), Some(42));
    assert_eq!(parse_job_id("Submitted batch job 42\n"), None);
    assert_eq!(parse_job_id(""), None);
    let listing = "JOBID PARTITION NAME\n 1 debug wrap\n 2 debug wrap\n\n";
    assert_eq!(count_job_lines(listing), 2);
    assert_eq!(count_job_lines("JOBID PARTITION NAME\n"), 0);
    assert!(check_listed("squeue", 2, 2).is_ok());
    assert!(matches!(
        check_listed("squeue", 2000, 1999),
        Err(PeerError::Mismatch {
            expected: 2000,
            found: 1999,
            ..
        })
    ));
}

#[test]
fn counts_only_responding_idle_nodes() {
    assert_eq!(idle_nodes("4 idle\n"), 4);
    assert_eq!(idle_nodes("300 idle\n12 idle*\n200 unk*\n"), 300);
    assert_eq!(idle_nodes("2 idle\n3 idle\n"), 5);
    assert_eq!(idle_nodes("garbage\n\n"), 0);
}

#[test]
fn slurm_conf_keeps_everything_in_its_dir_and_lists_k_nodes() {
    let dir = Path::new("/w/slurm-launch-k128");
    let conf = slurm_conf(&SlurmSpec {
        dir,
        hostname: "vm",
        ctld_port: 24000,
        node_base_port: 24001,
        nodes: 128,
        tree_width: 50,
        leaves: Leaves::Plain,
        extra: "",
    });
    for line in [
            "SlurmctldHost=vm(127.0.0.1)",
            "SlurmctldPort=24000",
            "TreeWidth=50",
            "StateSaveLocation=/w/slurm-launch-k128/state",
            "SlurmdSpoolDir=/w/slurm-launch-k128/spool/%n",
            "SlurmdPidFile=/w/slurm-launch-k128/run/slurmd-%n.pid",
            "SlurmctldLogFile=/w/slurm-launch-k128/log/slurmctld.log",
            "NodeName=n[1-128] NodeHostname=vm NodeAddr=127.0.0.1 Port=[24001-24128] CPUs=2 RealMemory=1000 State=UNKNOWN",
            "PartitionName=debug Nodes=n[1-128] Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES",
        ] {
            assert!(conf.lines().any(|l| l == line), "missing {line:?} in\n{conf}");
        }
    // Every absolute path is private to the run.
    for l in conf.lines().filter(|l| l.contains("=/")) {
        assert!(l.contains("=/w/slurm-launch-k128/"), "{l}");
    }
    let one = slurm_conf(&SlurmSpec {
        dir,
        hostname: "vm",
        ctld_port: 24000,
        node_base_port: 24001,
        nodes: 1,
        tree_width: 16,
        leaves: Leaves::Plain,
        extra: "",
    });
    assert!(one.contains("NodeName=n1 NodeHostname=vm NodeAddr=127.0.0.1 Port=24001 "));
    assert!(one.contains("PartitionName=debug Nodes=n1 "));
    assert!(one.contains("TreeWidth=16\n"));
}

#[test]
fn leaves_are_stated_on_both_sides_and_confined_adds_cgroup_conf() {
    let spec = |leaves| SlurmSpec {
        dir: Path::new("/w/x"),
        hostname: "vm",
        ctld_port: 24000,
        node_base_port: 24001,
        nodes: 8,
        tree_width: 50,
        leaves,
        extra: "",
    };
    let plain = slurm_conf(&spec(Leaves::Plain));
    for line in ["ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none"] {
        assert!(
            plain.lines().any(|l| l == line),
            "missing {line:?} in\n{plain}"
        );
    }
    assert_eq!(Leaves::Plain.cgroup_conf(), None);
    let confined = slurm_conf(&spec(Leaves::Confined));
    for line in [
        "ProctrackType=proctrack/cgroup",
        "TaskPlugin=task/cgroup,task/affinity",
    ] {
        assert!(
            confined.lines().any(|l| l == line),
            "missing {line:?} in\n{confined}"
        );
    }
    // Each key once: the leaf lines replace the old fixed ones, not add to them.
    for conf in [&plain, &confined] {
        for key in ["ProctrackType=", "TaskPlugin="] {
            assert_eq!(
                conf.lines().filter(|l| l.starts_with(key)).count(),
                1,
                "{conf}"
            );
        }
    }
    let cg = Leaves::Confined.cgroup_conf().unwrap();
    for line in [
        "CgroupPlugin=cgroup/v1",
        "ConstrainCores=yes",
        "ConstrainRAMSpace=yes",
    ] {
        assert!(cg.lines().any(|l| l == line), "missing {line:?} in\n{cg}");
    }
}

#[test]
fn canopy_reads_both_leaf_settings() {
    // The same lines go into canopy's slurm.conf: its reader must take them, and make
    // of them what Slurm does.
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("slurm.conf");
    for (leaves, cgroup, tasks) in [
        (Leaves::Plain, false, vec![]),
        (
            Leaves::Confined,
            true,
            vec!["task/cgroup".to_string(), "task/affinity".to_string()],
        ),
    ] {
        let text = format!(
            "ClusterName=c\nSlurmctldHost=localhost(127.0.0.1)\n{}\
             NodeName=n1 CPUs=2\nPartitionName=p Nodes=ALL\n",
            leaves.slurm_conf_lines()
        );
        fs::write(&conf, text).unwrap();
        let c = ::canopy::config::Config::load(&conf).unwrap();
        assert_eq!(c.proctrack_cgroup, cgroup, "{leaves:?}");
        let mut got = c.task_plugins.clone();
        got.retain(|p| p != "task/none");
        assert_eq!(got, tasks, "{leaves:?}");
    }
    let cg = dir.path().join("cgroup.conf");
    fs::write(&cg, Leaves::Confined.cgroup_conf().unwrap()).unwrap();
    let parsed = ::canopy::config::cgroup::CgroupConf::load(&cg).unwrap();
    assert!(
        parsed.constrain_cores && parsed.constrain_ram_space,
        "{parsed:?}"
    );
    assert!(parsed.warnings.is_empty(), "{:?}", parsed.warnings);
}

#[test]
fn port_block_skips_past_busy_ports() {
    let busy = [100u16, 105];
    let free = |p: u16| !busy.contains(&p);
    assert_eq!(find_port_block(3, 100, 120, &free), Some(101));
    assert_eq!(find_port_block(5, 100, 120, &free), Some(106));
    assert_eq!(find_port_block(1, 100, 100, &free), None);
    assert_eq!(find_port_block(16, 100, 120, &free), None);
    assert_eq!(find_port_block(15, 100, 120, &free), Some(106));
}

#[test]
fn proc_state_reads_past_odd_command_names() {
    assert_eq!(proc_state("123 (slurmd) S 1 2"), Some('S'));
    assert_eq!(proc_state("9 (a) b) (c) Z 1"), Some('Z'));
    assert_eq!(proc_state("no parens"), None);
    assert!(alive(std::process::id() as i32, None));
    assert!(!alive(
        std::process::id() as i32,
        Some("no-such-needle-xyz")
    ));
    assert!(!alive(-5, None));
}

#[test]
fn clients_aim_at_their_own_cluster() {
    let slurm = Client::Slurm {
        conf: PathBuf::from("/w/s.conf"),
        dir: PathBuf::from("/w/s"),
    };
    let cmd = slurm.launch_command(128);
    assert_eq!(describe(&cmd), "/usr/bin/srun -N 128 true");
    assert_eq!(cmd.get_current_dir(), Some(Path::new("/w/s")));
    assert!(cmd
        .get_envs()
        .any(|(k, v)| k == "SLURM_CONF" && v == Some("/w/s.conf".as_ref())));
    let canopy = Client::Canopy {
        exe: PathBuf::from("/b/canopy"),
        conf: PathBuf::from("/w/c.conf"),
        dir: PathBuf::from("/w/c"),
    };
    let cmd = canopy.launch_command(4);
    assert_eq!(describe(&cmd), "/b/canopy srun -N 4 true");
    assert_eq!(cmd.get_current_dir(), Some(Path::new("/w/c")));
    assert!(cmd
        .get_envs()
        .any(|(k, v)| k == "CANOPY_CONF" && v == Some("/w/c.conf".as_ref())));
    assert_eq!(describe(&canopy.command("squeue")), "/b/canopy squeue");
}

#[test]
fn bounded_runs_report_failure_timeout_and_spawn_errors() {
    let out = run_ok(Command::new("echo").arg("hi"), Duration::from_secs(10)).unwrap();
    assert_eq!(out.stdout, b"hi\n");
    match run_ok(
        Command::new("sh").args(["-c", "echo oops >&2; exit 3"]),
        Duration::from_secs(10),
    ) {
        Err(PeerError::Command { status, stderr, .. }) => {
            assert!(status.contains('3'), "{status}");
            assert_eq!(stderr, "oops");
        }
        other => panic!("expected Command, got {other:?}"),
    }
    let started = Instant::now();
    match run_bounded(Command::new("sleep").arg("20"), Duration::from_millis(200)) {
        Err(PeerError::Timeout { what, .. }) => assert_eq!(what, "`sleep 20`"),
        other => panic!("expected Timeout, got {other:?}"),
    }
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(matches!(
        run_bounded(
            &mut Command::new("/nonexistent/tool"),
            Duration::from_secs(1)
        ),
        Err(PeerError::Spawn { .. })
    ));
    let ms = timed_ok(&mut Command::new("true"), Duration::from_secs(10)).unwrap();
    assert!(ms > 0.0 && ms < 10_000.0);
}

#[test]
fn io_errors_name_the_path() {
    let p = Path::new("/nonexistent/dir/slurm.conf");
    match write_file(p, "x") {
        Err(e @ PeerError::Io { .. }) => {
            assert!(e.to_string().contains("/nonexistent/dir/slurm.conf"))
        }
        other => panic!("expected Io, got {other:?}"),
    }
}

#[test]
fn deadlines_and_tails() {
    assert!(check_deadline(Instant::now() + Duration::from_secs(5), "x").is_ok());
    let past = Instant::now() - Duration::from_millis(1);
    assert!(matches!(
        check_deadline(past, "loop"),
        Err(PeerError::Timeout { what, .. }) if what == "loop"
    ));
    let text = (1..=10).map(|i| format!("l{i}\n")).collect::<String>();
    assert_eq!(tail_text(&text), "l5 | l6 | l7 | l8 | l9 | l10");
    assert!(log_tail(Path::new("/nonexistent/log")).contains("unreadable"));
}

#[test]
fn recorded_pids_reads_pid_files() {
    let dir = std::env::temp_dir().join(format!("peer-test-pids-{}", std::process::id()));
    fs::create_dir_all(dir.join("pids")).unwrap();
    fs::write(dir.join("pids/ctld.pid"), "123\n").unwrap();
    fs::write(dir.join("pids/n1.pid"), "junk").unwrap();
    assert_eq!(recorded_pids(&dir), vec![123]);
    assert!(recorded_pids(&dir.join("none")).is_empty());
    assert!(wait_gone(&[-7], Duration::from_millis(10)));
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn environ_matching_is_exact() {
    let env = b"PATH=/bin\0SLURM_CONF=/w/a/slurm.conf\0HOME=/root\0";
    assert!(environ_has(env, b"SLURM_CONF=/w/a/slurm.conf"));
    assert!(!environ_has(env, b"SLURM_CONF=/w/a"));
    assert!(!environ_has(env, b"SLURM_CONF=/w/a/slurm.conf.old"));
    assert!(our_stepds(Path::new("/nonexistent/slurm.conf")).is_empty());
}

#[test]
fn job_processes_are_found_by_their_clusters_slurm_conf() {
    let conf =
        std::env::temp_dir().join(format!("peer-test-jobs-{}/slurm.conf", std::process::id()));
    let mut script = Command::new("sleep")
        .arg("30")
        .env("SLURM_CONF", &conf)
        .spawn()
        .unwrap();
    let pid = script.id() as i32;
    assert!(wait_until(Duration::from_secs(5), || our_job_processes(
        &conf
    ) == [pid]));
    assert!(our_job_processes(&conf.with_file_name("other.conf")).is_empty());
    script.kill().unwrap();
    script.wait().unwrap();
    assert!(our_job_processes(&conf).is_empty());
}

#[test]
fn wait_until_reports_whether_the_condition_held() {
    let mut calls = 0;
    assert!(wait_until(Duration::from_secs(5), || {
        calls += 1;
        calls == 3
    }));
    assert!(!wait_until(Duration::from_millis(60), || false));
}

#[test]
fn slurm_failures_become_notes_and_skip_later_phases() {
    let mut failed = None;
    let mut lines = Vec::new();
    let mut progress = |l: &str| lines.push(l.to_string());
    let ok: Result<u32, String> = slurm_phase(&mut failed, &mut progress, |_| Ok(7));
    assert_eq!(ok, Ok(7));
    let bad: Result<u32, String> = slurm_phase(&mut failed, &mut progress, |_| {
        Err(PeerError::SlurmUnavailable("no munged".into()))
    });
    assert_eq!(
        bad,
        Err("real Slurm is not available: no munged".to_string())
    );
    let mut ran = false;
    let skipped: Result<u32, String> = slurm_phase(&mut failed, &mut progress, |_| {
        ran = true;
        Ok(1)
    });
    assert!(!ran);
    assert!(skipped
        .unwrap_err()
        .starts_with("skipped after an earlier failure"));
    assert_eq!(
        lines,
        ["slurm: not measured: real Slurm is not available: no munged"]
    );
}

#[test]
fn a_daemon_that_exits_during_start_up_is_reported() {
    let dir = std::env::temp_dir().join(format!("peer-test-died-{}", std::process::id()));
    let child = Command::new("sh").args(["-c", "exit 2"]).spawn().unwrap();
    let mut cluster = SlurmCluster {
        conf: dir.join("slurm.conf"),
        dir,
        daemons: vec![("n3".to_string(), child)],
    };
    assert!(wait_until(Duration::from_secs(10), || cluster
        .check_daemons()
        .is_err_and(|e| matches!(
            &e,
            PeerError::Died { what, status, log }
                if what == "n3" && status.contains('2') && log.contains("slurmd-n3.log")
        ))));
    assert!(cluster.daemons.is_empty());
    assert!(cluster.stop(false).is_ok());
}

#[test]
fn error_messages_name_what_went_wrong() {
    let e = PeerError::NoPorts {
        count: 513,
        lo: PORT_LO,
        hi: PORT_HI,
    };
    assert_eq!(
        e.to_string(),
        "no free block of 513 TCP ports between 24000 and 32700"
    );
    let e = PeerError::Timeout {
        what: "slurm in /w".into(),
        limit_s: 90,
        last: "3 of 8 nodes idle".into(),
    };
    assert_eq!(
        e.to_string(),
        "slurm in /w: gave up after 90 s (3 of 8 nodes idle)"
    );
}

#[test]
#[ignore = "needs root, Slurm 22.05 and canopy binaries (CANOPY_BIN)"]
fn quick_run_produces_every_row_kind() {
    let bin = std::env::var_os("CANOPY_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/release"));
    let o = PeerOpts {
        canopy_bin: bin,
        quick: true,
        ..opts()
    };
    let started = Instant::now();
    let rows = match run(&o, &mut no_progress()) {
        Err(PeerError::SlurmUnavailable(_)) => return,
        other => other.unwrap(),
    };
    assert!(started.elapsed() < Duration::from_secs(60));
    let metrics: Vec<&str> = rows.iter().map(|r| r.metric.as_str()).collect();
    assert_eq!(
        metrics,
        [
            "sbatch_1_client",
            "sbatch_8_clients",
            "squeue_100_queued",
            "launch_4_nodes"
        ]
    );
    for r in &rows {
        assert!(r.canopy > 0.0, "{r:?}");
        assert_eq!(r.ratio.is_some(), r.slurm.is_some(), "{r:?}");
    }
}

#[test]
fn node_and_port_lists() {
    assert_eq!(node_list(1), "n1");
    assert_eq!(node_list(512), "n[1-512]");
    assert_eq!(port_list(24001, 1), "24001");
    assert_eq!(port_list(24001, 512), "[24001-24512]");
}
