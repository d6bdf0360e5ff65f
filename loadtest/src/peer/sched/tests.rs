//! Unit tests for the backfill comparison's pure parts: the plan, the shared
//! SchedulerParameters, the seeded job list, reading sdiag (Slurm's text and
//! canopy's renderer), the cycle window, and the rows. Running both clusters is the
//! ignored smoke test at the end.

use rand::rngs::StdRng;
use rand::SeedableRng;

use super::*;

fn opts() -> SchedOpts {
    SchedOpts {
        canopy_bin: PathBuf::from("/nonexistent/bin"),
        work_dir: std::env::temp_dir(),
        nodes: 64,
        pending: 2000,
        cycles: 5,
        bf_interval: 10,
        tree_width: 50,
        seed: 1,
        quick: false,
        canopy_only: false,
    }
}

fn plan() -> SchedPlan {
    SchedPlan::from_opts(&opts()).unwrap()
}

#[test]
fn plan_uses_options_or_small_sizes_in_quick_mode() {
    let p = plan();
    assert_eq!(
        (p.nodes, p.pending, p.cycles, p.bf_interval),
        (64, 2000, 5, 10)
    );
    let q = SchedPlan::from_opts(&SchedOpts {
        quick: true,
        canopy_only: true,
        ..opts()
    })
    .unwrap();
    assert_eq!(
        (q.nodes, q.pending, q.cycles, q.bf_interval),
        (8, 200, 2, 2)
    );
    assert!(q.canopy_only);
}

#[test]
fn plan_rejects_unusable_options_naming_them() {
    for (bad, word) in [
        (SchedOpts { nodes: 0, ..opts() }, "nodes"),
        (
            SchedOpts {
                pending: 0,
                ..opts()
            },
            "pending",
        ),
        (
            SchedOpts {
                cycles: 0,
                ..opts()
            },
            "cycles",
        ),
        (
            SchedOpts {
                tree_width: 1,
                ..opts()
            },
            "tree_width",
        ),
        (
            SchedOpts {
                bf_interval: 0,
                ..opts()
            },
            "bf_interval",
        ),
        (
            SchedOpts {
                bf_interval: 10_801,
                ..opts()
            },
            "bf_interval",
        ),
        (
            SchedOpts {
                nodes: 9000,
                ..opts()
            },
            "nodes",
        ),
        (
            SchedOpts {
                pending: 1_000_000,
                ..opts()
            },
            "pending",
        ),
    ] {
        match SchedPlan::from_opts(&bad) {
            Err(PeerError::BadOption(m)) => assert!(m.contains(word), "{m}"),
            other => panic!("{word}: {other:?}"),
        }
    }
}

#[test]
fn both_systems_get_parameters_that_examine_and_plan_every_job() {
    let p = plan();
    assert_eq!(
        scheduler_parameters(&p),
        "bf_interval=10,bf_window=2880,bf_resolution=60,bf_max_job_test=3000,\
         bf_continue,bf_max_time=3600"
    );
    let extra = extra_conf(&p);
    assert!(extra.starts_with("PriorityType=priority/basic\nSchedulerParameters=bf_interval=10,"));
    // The same text in both configs.
    let slurm = slurm_conf(&SlurmSpec {
        dir: Path::new("/w"),
        hostname: "vm",
        ctld_port: 24000,
        node_base_port: 24001,
        nodes: 64,
        tree_width: 50,
        leaves: Leaves::Plain,
        extra: &extra,
    });
    let canopy = sim_conf(&SimSpec {
        dir: Path::new("/w"),
        ctld_port: 7000,
        node_port: 7001,
        nodes: 64,
        tree_width: 50,
        extra: &extra,
    });
    for conf in [&slurm, &canopy] {
        assert!(conf.contains(&extra), "{conf}");
        assert_eq!(conf.matches("SchedulerParameters=").count(), 1, "{conf}");
        assert!(conf.contains("SchedulerType=sched/backfill\n"), "{conf}");
    }
    // The window covers the longest fill limit plus the longest pending one.
    assert_eq!(FILL_MINUTES.1 + PENDING_MINUTES.1, 2880);
}

#[test]
fn the_canopy_config_names_every_simulated_node_at_its_address() {
    let conf = sim_conf(&SimSpec {
        dir: Path::new("/w/c"),
        ctld_port: 7000,
        node_port: 7001,
        nodes: 300,
        tree_width: 16,
        extra: "",
    });
    for line in [
        "SlurmctldPort=7000\n",
        "AuthInfo=socket=/w/c/authd.sock\n",
        "StateSaveLocation=/w/c/state\n",
        "TreeWidth=16\n",
        "NodeName=DEFAULT CPUs=2 RealMemory=1000 Port=7001 State=UNKNOWN\n",
        "NodeName=n1 NodeAddr=127.1.0.0\n",
        "NodeName=n300 NodeAddr=127.1.1.43\n",
        "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP\n",
    ] {
        assert!(conf.contains(line), "missing {line:?}");
    }
    assert_eq!(conf.matches("NodeAddr=").count(), 300);
    // canopy reads it.
    let dir = tempfile::tempdir().unwrap();
    let text = sim_conf(&SimSpec {
        dir: dir.path(),
        ctld_port: 7000,
        node_port: 7001,
        nodes: 20,
        tree_width: 4,
        extra: &extra_conf(&plan()),
    });
    let path = dir.path().join("slurm.conf");
    fs::write(&path, text).unwrap();
    let c = ::canopy::config::Config::load(&path).unwrap();
    assert_eq!(c.nodes.len(), 20);
    assert_eq!(c.sched.bf_max_job_test, 3000);
    assert_eq!(c.sched.bf_window_min, 2880);
    assert_eq!(c.sched.bf_interval_s, Some(10));
    assert!(c.sched.backfill && c.sched.bf_continue);
}

#[test]
fn the_fill_covers_every_node_exactly_with_spread_limits() {
    for seed in [1, 2, 3] {
        for nodes in [1, 7, 16, 64, 1024] {
            eprintln!("seed {seed}, nodes {nodes}");
            let mut rng = StdRng::seed_from_u64(seed);
            let fill = fill_jobs(nodes, &mut rng);
            assert_eq!(fill.iter().map(|s| s.nodes).sum::<u32>(), nodes);
            for s in &fill {
                assert!((1..=FILL_MAX_WIDTH).contains(&s.nodes), "{s:?}");
                assert!((FILL_MINUTES.0..=FILL_MINUTES.1).contains(&s.minutes));
            }
        }
    }
    let mut rng = StdRng::seed_from_u64(1);
    let fill = fill_jobs(1024, &mut rng);
    let mut ends: Vec<u32> = fill.iter().map(|s| s.minutes).collect();
    ends.sort_unstable();
    ends.dedup();
    assert!(ends.len() > 100, "only {} distinct end times", ends.len());
}

#[test]
fn pending_jobs_mix_widths_and_limits() {
    let mut rng = StdRng::seed_from_u64(5);
    let jobs = pending_jobs(5000, 64, &mut rng);
    assert_eq!(jobs.len(), 5000);
    assert!(jobs.iter().all(|s| (1..=16).contains(&s.nodes)));
    assert!(jobs
        .iter()
        .all(|s| (PENDING_MINUTES.0..=PENDING_MINUTES.1).contains(&s.minutes)));
    let ones = jobs.iter().filter(|s| s.nodes == 1).count();
    assert!((2000..3000).contains(&ones), "{ones} one-node jobs");
    assert!(jobs.iter().any(|s| s.nodes == 16));
    assert!(jobs.iter().any(|s| s.minutes <= 5));
    assert!(jobs.iter().any(|s| s.minutes >= 1000));
    // A cluster too small for wide jobs gets one-node jobs only.
    let small = pending_jobs(100, 4, &mut rng);
    assert!(small.iter().all(|s| s.nodes == 1));
}

#[test]
fn the_workload_replays_from_its_seed() {
    assert_eq!(workload(64, 500, 9), workload(64, 500, 9));
    assert_ne!(workload(64, 500, 9).1, workload(64, 500, 10).1);
}

#[test]
fn a_shape_is_the_same_sbatch_line_on_both_systems() {
    let s = Shape {
        nodes: 4,
        minutes: 90,
    };
    assert_eq!(
        s.sbatch_args("bf7").join(" "),
        "--parsable -J bf7 -N 4 --exclusive -t 90 -o /dev/null --wrap sleep 5400"
    );
}

/// What Slurm 22.05's sdiag prints in the middle of a cycle (layout of sdiag.c).
const SLURM_SDIAG: &str = "\
*******************************************************
sdiag output at Thu Nov 26 17:00:00 2026 (1795712400)
Data since      Thu Nov 26 16:00:00 2026 (1795708800)
*******************************************************
Server thread count:  3

Main schedule statistics (microseconds):
\tLast cycle:   1200
\tMax cycle:    9000
\tTotal cycles: 40
\tMean cycle:   800

Backfilling stats (WARNING: data obtained in the middle of backfilling execution.)
\tTotal backfilled jobs (since last slurm start): 3
\tTotal backfilled jobs (since last stats cycle start): 3
\tTotal backfilled heterogeneous job components: 0
\tTotal cycles: 12
\tLast cycle when: Thu Nov 26 16:59:50 2026 (1795712390)
\tLast cycle: 250000
\tMax cycle:  400000
\tMean cycle: 200000
\tLast depth cycle: 2000
\tLast depth cycle (try sched): 1500
\tDepth Mean: 1800
\tDepth Mean (try depth): 1400
\tLast queue length: 2000
\tQueue length mean: 1900
\tLast table size: 37
\tMean table size: 30

Latency for 1000 calls to gettimeofday(): 20 microseconds
";

#[test]
fn slurms_backfill_section_is_read_not_its_main_one() {
    let b = parse_backfill(SLURM_SDIAG).unwrap();
    assert_eq!(
        b,
        Backfill {
            backfilled: 3,
            cycles: 12,
            last_us: 250_000,
            max_us: 400_000,
            mean_us: Some(200_000),
            last_depth: 2000,
            last_depth_try: 1500,
            depth_mean: Some(1800),
            depth_try_mean: Some(1400),
            last_queue_len: 2000,
            queue_len_mean: Some(1900),
            last_table_size: 37,
        }
    );
}

#[test]
fn canopys_sdiag_reads_the_same_way() {
    let stats = ::canopy::wire::messages::CtldStats {
        backfill: ::canopy::wire::messages::BackfillDiag {
            backfilled: 7,
            cycles: 4,
            last_cycle_when: Some(1_700_000_000),
            last_us: 1500,
            max_us: 2500,
            total_us: 6000,
            last_depth: 40,
            last_depth_try: 30,
            depth_sum: 160,
            depth_try_sum: 100,
            last_queue_len: 41,
            queue_len_sum: 164,
            last_table_size: 12,
            table_size_sum: 40,
        },
        ..Default::default()
    };
    let b = parse_backfill(&::canopy::cli::sdiag::render(&stats)).unwrap();
    assert_eq!(
        (b.backfilled, b.cycles, b.last_us, b.max_us, b.mean_us),
        (7, 4, 1500, 2500, Some(1500))
    );
    assert_eq!(
        (
            b.last_depth,
            b.last_depth_try,
            b.depth_mean,
            b.depth_try_mean
        ),
        (40, 30, Some(40), Some(25))
    );
    assert_eq!((b.last_queue_len, b.queue_len_mean), (41, Some(41)));
    // Before the first cycle: no means.
    let b = parse_backfill(&::canopy::cli::sdiag::render(&Default::default())).unwrap();
    assert_eq!((b.cycles, b.mean_us, b.depth_mean), (0, None, None));
}

#[test]
fn broken_sdiag_output_is_named() {
    assert_eq!(
        parse_backfill("Main schedule statistics\n").unwrap_err(),
        "no \"Backfilling stats\" section"
    );
    assert_eq!(
        parse_backfill("Backfilling stats\n\tTotal cycles: x\n").unwrap_err(),
        "\"Total cycles\": expected a number, found \"x\""
    );
    assert_eq!(
        parse_backfill("Backfilling stats\n\tTotal cycles: 1\n\tLast cycle: 2\n").unwrap_err(),
        "no \"Max cycle\" line in the backfill section"
    );
}

fn reading(cycles: u64, last_us: u64, depth: u64, mean_us: u64, depth_mean: u64) -> Backfill {
    Backfill {
        cycles,
        last_us,
        max_us: last_us,
        mean_us: Some(mean_us),
        last_depth: depth,
        last_depth_try: depth / 2,
        depth_mean: Some(depth_mean),
        depth_try_mean: Some(depth_mean / 2),
        last_queue_len: depth,
        queue_len_mean: Some(depth_mean),
        ..Default::default()
    }
}

#[test]
fn a_window_of_cycles_seen_one_by_one_uses_each_cycles_own_figures() {
    let mut w = Window::new(reading(10, 5, 1, 5, 1));
    assert_eq!(w.summary(), None);
    w.observe(reading(10, 5, 1, 5, 1)).unwrap();
    w.observe(reading(11, 1000, 2000, 0, 0)).unwrap();
    w.observe(reading(11, 1000, 2000, 0, 0)).unwrap();
    w.observe(reading(12, 3000, 2000, 0, 0)).unwrap();
    assert_eq!(w.len(), 2);
    let s = w.summary().unwrap();
    assert_eq!(s.cycles, 2);
    assert_eq!(s.mean_us, 2000.0);
    assert_eq!(s.max_us, Some(3000));
    assert_eq!(s.depth_mean, 2000.0);
    assert_eq!(s.depth_try_mean, 1000.0);
    assert_eq!(s.queue_len_mean, 2000.0);
    // 4000 jobs in 4000 us.
    assert_eq!(s.examined_per_s, 1_000_000.0);
    assert!(!s.from_sums);
}

#[test]
fn a_missed_cycle_takes_the_means_from_the_printed_sums() {
    // 10 cycles of mean 100 us and depth 10; then 2 more in one step, totals
    // 1000 + 5000 us and 100 + 4000 jobs.
    let mut w = Window::new(reading(10, 100, 10, 100, 10));
    w.observe(reading(12, 3000, 2000, 500, 341)).unwrap();
    assert_eq!(w.missed, 2);
    let s = w.summary().unwrap();
    assert!(s.from_sums);
    assert_eq!(s.cycles, 2);
    assert_eq!(s.mean_us, 2500.0);
    assert_eq!(s.max_us, None);
    assert_eq!(s.depth_mean, (341.0 * 12.0 - 100.0) / 2.0);
    // Cycles never go back.
    assert!(w.observe(reading(3, 1, 1, 1, 1)).is_err());
}

#[test]
fn sinfo_and_proc_status_are_read() {
    assert_eq!(
        nodes_in_state("60 alloc\n4 idle\n2 alloc\n1 mix\n", "alloc"),
        62
    );
    assert_eq!(nodes_in_state("", "alloc"), 0);
    let status = "Name:\tslurmctld\nVmHWM:\t  204800 kB\nVmRSS:\t  102400 kB\n";
    assert_eq!(status_kib(status, "VmRSS:"), 102_400.0);
    assert_eq!(status_kib(status, "VmHWM:"), 204_800.0);
    assert_eq!(status_kib(status, "VmSwap:"), 0.0);
    let (rss, peak) = memory_mib(std::process::id() as i32);
    assert!(rss > 0.0 && peak >= rss, "{rss} {peak}");
}

fn figures(mean_us: f64, depth: f64) -> Figures {
    Figures {
        window: Summary {
            cycles: 5,
            mean_us,
            max_us: Some((mean_us * 2.0) as u64),
            depth_mean: depth,
            depth_try_mean: depth,
            queue_len_mean: depth,
            examined_per_s: depth * 1e6 / mean_us,
            from_sums: false,
        },
        end: Backfill {
            backfilled: 0,
            max_us: 1,
            last_table_size: 40,
            ..Default::default()
        },
        backfilled: 0,
        rss_mib: 50.0,
        peak_rss_mib: 60.0,
        submit_per_s: 500.0,
    }
}

#[test]
fn rows_put_both_systems_side_by_side_with_canopys_advantage() {
    let p = plan();
    let rows = rows(&p, &figures(1000.0, 2000.0), &Ok(figures(50_000.0, 2000.0)));
    let metric = |m: &str| rows.iter().find(|r| r.metric == m).unwrap();
    let mean = metric("bf_cycle_mean_us");
    assert_eq!(
        (mean.canopy, mean.slurm, mean.ratio),
        (1000.0, Some(50_000.0), Some(50.0))
    );
    assert_eq!(mean.unit, "us");
    assert_eq!(mean.nodes, Some(64));
    assert!(mean
        .note
        .contains("5 cycles over 2000 pending jobs on 64 full nodes"));
    assert_eq!(metric("bf_depth_mean").ratio, Some(1.0));
    assert_eq!(metric("bf_examined_per_s").ratio, Some(50.0));
    assert_eq!(metric("ctld_rss_mib").unit, "MiB");
    // Without Slurm, every row says why.
    let alone = super::rows(&p, &figures(1000.0, 2000.0), &Err("--canopy-only".into()));
    assert!(alone
        .iter()
        .all(|r| r.slurm.is_none() && r.note.ends_with("slurm not measured: --canopy-only")));
    assert_eq!(alone.len(), 13);
    assert_eq!(metric("bf_table_size").ratio, Some(1.0));
    assert_eq!(metric("bf_table_size").unit, "records");
}

#[test]
#[ignore = "needs root, Slurm 22.05 and canopy binaries (CANOPY_BIN)"]
fn quick_backfill_comparison_reads_both_sdiags() {
    let bin = std::env::var_os("CANOPY_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/release"));
    let o = SchedOpts {
        canopy_bin: bin,
        quick: true,
        ..opts()
    };
    let run = match run_sched(&o, &mut |l: &str| eprintln!("{l}")) {
        Err(PeerError::SlurmUnavailable(_)) => return,
        other => other.unwrap(),
    };
    assert_eq!((run.nodes, run.pending), (8, 200));
    let metric = |m: &str| run.rows.iter().find(|r| r.metric == m).unwrap();
    for m in ["bf_cycle_mean_us", "bf_depth_mean", "bf_queue_len_mean"] {
        let r = metric(m);
        assert!(r.canopy > 0.0, "{r:?}");
        assert!(r.slurm.is_some_and(|s| s > 0.0), "{r:?}");
    }
    // Both examined the whole queue in every measured cycle.
    assert_eq!(metric("bf_queue_len_mean").canopy, 200.0);
    assert_eq!(metric("bf_queue_len_mean").slurm, Some(200.0));
}
