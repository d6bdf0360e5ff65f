//! canopy-loadtest: drives a real canopy controller with many clients and
//! thousands of simulated node daemons (production code with a sleeping
//! executor), and real Slurm side by side (`peer`). Prints a table, or one
//! JSON object per measured configuration with `--json`.

mod harness;
mod peer;
mod report;
mod scenarios;

use std::time::Duration;

use anyhow::{bail, Result};
use clap::{Args, Parser, Subcommand};

use report::Row;
use scenarios::rpc::Mix;

#[derive(Parser)]
#[command(
    name = "canopy-loadtest",
    version,
    about = "Load tests for canopy (and real Slurm side by side)"
)]
struct Cli {
    #[command(subcommand)]
    scenario: Scenario,
    /// One JSON object per measured configuration on stdout (progress stays on stderr).
    #[arg(long, global = true)]
    json: bool,
    /// Small sizes and short runs (the CI smoke test): correctness, not timing.
    #[arg(long, global = true)]
    quick: bool,
}

#[derive(Args, Clone)]
struct Topo {
    /// Node counts to measure (comma list).
    #[arg(long, value_delimiter = ',')]
    nodes: Option<Vec<u32>>,
    /// TreeWidth values to measure (comma list).
    #[arg(long = "tree-width", value_delimiter = ',')]
    tree_width: Option<Vec<u32>>,
}

#[derive(Subcommand)]
enum Scenario {
    /// Idle cluster: controller messages, bytes, CPU and RSS spent on liveness.
    Heartbeat {
        #[command(flatten)]
        topo: Topo,
        /// Heartbeat intervals to measure over.
        #[arg(long, default_value_t = 5)]
        intervals: u32,
        #[arg(long = "slurmd-timeout", default_value_t = 6)]
        slurmd_timeout: u32,
    },
    /// Broadcast a no-op to all nodes; latency percentiles; then 1% of relays killed mid-run.
    Fanout {
        #[command(flatten)]
        topo: Topo,
        #[arg(long, default_value_t = 30)]
        rounds: u32,
    },
    /// Dynamic nodes (canopy-noded -Z) join at once: time until all are IDLE, then a job over all.
    Dynamic {
        /// Nodes slurm.conf lists, started first.
        #[arg(long, default_value_t = 0)]
        listed: u32,
        /// Dynamic node counts to measure (comma list).
        #[arg(long, value_delimiter = ',', default_value = "1000")]
        dynamic: Vec<u32>,
        #[arg(long = "tree-width", value_delimiter = ',', default_value = "32")]
        tree_width: Vec<u32>,
    },
    /// All nodes start at once; then 100 leaves and one relay die.
    Storm {
        #[command(flatten)]
        topo: Topo,
        #[arg(long, default_value_t = 100)]
        leaves: u32,
        #[arg(long = "slurmd-timeout", default_value_t = 6)]
        slurmd_timeout: u32,
    },
    /// Concurrent wire-protocol clients: query/submit mixes, closed and open loop.
    Rpc {
        #[arg(long, default_value_t = 32)]
        clients: u32,
        /// Seconds per measurement.
        #[arg(long, default_value_t = 5)]
        duration: u64,
        #[arg(long = "query-rate", default_value_t = 30000)]
        query_rate: u32,
        #[arg(long = "submit-rate", default_value_t = 10000)]
        submit_rate: u32,
        #[arg(long, default_value_t = 1000)]
        preload: u32,
    },
    /// Short jobs end to end on simulated nodes: jobs completed per second.
    Throughput {
        #[command(flatten)]
        topo: Topo,
        #[arg(long, default_value_t = 20000)]
        jobs: u32,
        #[arg(long, default_value_t = 16)]
        clients: u32,
    },
    /// Controller RSS with many nodes and a deep pending queue.
    Memory {
        #[command(flatten)]
        topo: Topo,
        #[arg(long, default_value_t = 100000)]
        jobs: u32,
        #[arg(long, default_value_t = 16)]
        clients: u32,
    },
    /// Credentials per second: canopy-authd against MUNGE's remunge, same machine.
    Signer {
        /// Seconds per measurement.
        #[arg(long, default_value_t = 5)]
        duration: u64,
        /// Client thread counts to measure (comma list).
        #[arg(long, value_delimiter = ',', default_values_t = [1u32, 2])]
        threads: Vec<u32>,
    },
    /// Power saving: a power-up storm of cloud nodes (real daemons), and
    /// the controller's work per heartbeat interval with 0% and 50% of the
    /// nodes powered down (the core in virtual time).
    Power {
        /// Cloud nodes powered up at once by one job (0: skip).
        #[arg(long = "storm-nodes", default_value_t = 1000)]
        storm_nodes: u32,
        #[arg(long = "tree-width", default_value_t = 32)]
        tree_width: u32,
        /// Nodes for the per-interval measurement (0: skip).
        #[arg(long = "interval-nodes", default_value_t = 10000)]
        interval_nodes: u32,
        /// Heartbeat intervals measured per configuration (medians reported).
        #[arg(long, default_value_t = 200)]
        rounds: u32,
    },
    /// priority/multifactor in the core, in virtual time: one calculation
    /// over every pending job, a submission, a job's end, sshare, sprio.
    Prio {
        #[arg(long, default_value_t = 10000)]
        nodes: u32,
        #[arg(long, default_value_t = 100000)]
        jobs: u32,
        #[arg(long, default_value_t = 1000)]
        users: u32,
        #[arg(long, default_value_t = 50)]
        accounts: u32,
        #[arg(long, default_value_t = 5)]
        rounds: u32,
    },
    /// Node-side launch set-up and teardown with cgroups and binding, against a plain node.
    Leaf {
        /// Set-ups and teardowns timed (half as many fork+exec pairs).
        #[arg(long, default_value_t = 2000)]
        iterations: u32,
        /// Tasks of the step on the node.
        #[arg(long, default_value_t = 2)]
        tasks: u32,
    },
    /// An SWF job trace (or a seeded generated one) through the controller core in
    /// virtual time: utilization, waits and bounded slowdown per scheduler.
    Replay {
        /// A Standard Workload Format file; without one, a trace is generated.
        trace: Option<std::path::PathBuf>,
        /// Jobs of the generated trace.
        #[arg(long, default_value_t = 20000)]
        jobs: u32,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        #[arg(long, default_value_t = 128)]
        nodes: u32,
        /// Cores per node.
        #[arg(long, default_value_t = 32)]
        cores: u32,
        /// Offered load of the generated trace.
        #[arg(long, default_value_t = 0.9)]
        load: f64,
        /// SchedulerType values to compare (comma list).
        #[arg(long, value_delimiter = ',', default_values_t = ["sched/builtin".to_string(), "sched/backfill".to_string()])]
        schedulers: Vec<String>,
    },
    /// What the reservation and license gates cost a scheduling pass (in process).
    ResvGate {
        #[arg(long, default_value_t = 10000)]
        nodes: u32,
        #[arg(long, default_value_t = 100000)]
        jobs: u32,
        #[arg(long, default_value_t = 50)]
        reservations: u32,
        #[arg(long, default_value_t = 20)]
        passes: u32,
    },
    /// The scheduling passes in process: a full backfill pass over a full
    /// cluster and a deep queue, and the quick pass run on each event.
    Sched {
        #[arg(long, default_value_t = 10000)]
        nodes: u32,
        #[arg(long, default_value_t = 100000)]
        pending: u32,
        #[arg(long, default_value_t = 1000)]
        users: u32,
        #[arg(long, default_value_t = 50)]
        accounts: u32,
        /// `bf_max_job_test`: jobs that may plan a future start (every job
        /// is still tried for an immediate one).
        #[arg(long = "reserve-depth", default_value_t = 1000)]
        reserve_depth: u32,
        /// Advance reservations the backfill pass plans around (half active,
        /// half starting within a day; a fiftieth of the jobs ask for one).
        #[arg(long = "advance-reservations", default_value_t = 0)]
        advance_reservations: u32,
        /// Full backfill passes timed, each on a fresh copy of the state.
        #[arg(long, default_value_t = 7)]
        passes: u32,
        /// Quick passes timed, each after a completion or a submit.
        #[arg(long = "quick-passes", default_value_t = 2000)]
        quick_passes: u32,
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
    /// The same user-visible operations against real Slurm (Debian packages) and canopy.
    Peer {
        /// Node counts for the K-node launch test.
        #[arg(long, value_delimiter = ',', default_values_t = [8u32, 128, 512])]
        ks: Vec<u32>,
        #[arg(long = "tree-width", default_value_t = 50)]
        tree_width: u32,
        #[arg(long, default_value_t = 200)]
        submits: u32,
        #[arg(long, default_value_t = 2000)]
        queued: u32,
        /// Both systems with proctrack/cgroup, task/cgroup,task/affinity and a cgroup.conf
        /// (default: proctrack/linuxproc and task/none on both).
        #[arg(long)]
        confined: bool,
        /// Canopy alone: no Slurm cluster (before/after figures of a canopy change).
        #[arg(long = "canopy-only")]
        canopy_only: bool,
        /// Only the `srun -N K` launch rows (no sbatch or squeue measurements).
        #[arg(long = "launch-only")]
        launch_only: bool,
        /// Timed launches per K (default 3, 2 at K >= 512).
        #[arg(long)]
        reps: Option<u32>,
    },
    /// Backfill on real Slurm and on canopy, side by side from each one's own sdiag:
    /// N nodes filled with long jobs, M pending jobs of mixed shapes.
    PeerSched {
        /// Nodes: slurmd processes for Slurm, simulated node daemons for canopy.
        #[arg(long, default_value_t = 64)]
        nodes: u32,
        /// Pending jobs queued behind the fill.
        #[arg(long, default_value_t = 2000)]
        pending: u32,
        /// Backfill cycles measured once the queue is full.
        #[arg(long, default_value_t = 5)]
        cycles: u32,
        /// SchedulerParameters bf_interval, seconds (both systems).
        #[arg(long = "bf-interval", default_value_t = 10)]
        bf_interval: u32,
        #[arg(long = "tree-width", default_value_t = 50)]
        tree_width: u32,
        /// Seed of the job list.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Canopy alone: no Slurm cluster.
        #[arg(long = "canopy-only")]
        canopy_only: bool,
        /// Directory of the canopy binaries to measure (default: this binary's own).
        #[arg(long = "canopy-bin")]
        canopy_bin: Option<std::path::PathBuf>,
    },
    /// The operator console's cost: controller CPU idle before and after
    /// `canopy top` is used, and `canopy top`'s latency and line count.
    ConsoleIdle {
        #[command(flatten)]
        topo: Topo,
        /// Heartbeat intervals per idle window.
        #[arg(long, default_value_t = 5)]
        intervals: u32,
        /// `canopy top` samples while watching.
        #[arg(long, default_value_t = 10)]
        samples: u32,
        #[arg(long = "slurmd-timeout", default_value_t = 6)]
        slurmd_timeout: u32,
    },
    /// `canopy exec` of a no-op on every simulated node: one folded line expected (goal <= 1 s).
    ConsoleExec {
        #[command(flatten)]
        topo: Topo,
        #[arg(long, default_value_t = 10)]
        rounds: u32,
        /// Seconds the controller is watched idle before and after the runs.
        #[arg(long = "idle-secs", default_value_t = 5)]
        idle_secs: u64,
        /// Also run `hostname` (every node's output differs: the folding's worst case).
        #[arg(long)]
        distinct: bool,
    },
    /// `canopy tree` at scale: ~1% of nodes unhealthy in three reasons; latency and lines.
    ConsoleTree {
        #[command(flatten)]
        topo: Topo,
        /// Tree views asked per view kind.
        #[arg(long, default_value_t = 20)]
        rounds: u32,
        /// Seed choosing the unhealthy nodes (printed; the same seed replays).
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
    /// The console: ping one node at the deepest level (every hop shown),
    /// ping every node, and trace a real broadcast through the relays.
    ConsolePing {
        #[command(flatten)]
        topo: Topo,
        #[arg(long, default_value_t = 20)]
        rounds: u32,
    },
}

fn pick(v: &Option<Vec<u32>>, default: &[u32], quick: &[u32]) -> Result<Vec<u32>> {
    let out = match v {
        Some(v) if !v.is_empty() => v.clone(),
        _ if quick.is_empty() => default.to_vec(),
        _ => quick.to_vec(),
    };
    if out.contains(&0) {
        bail!("node counts and tree widths must be positive");
    }
    Ok(out)
}

fn widths(t: &Topo, default: &[u32], quick: bool) -> Result<Vec<u32>> {
    let w = pick(&t.tree_width, default, if quick { &[8] } else { &[] })?;
    if let Some(bad) = w.iter().find(|&&w| w < 2) {
        bail!("--tree-width must be at least 2 (got {bad})");
    }
    Ok(w)
}

fn nodes(t: &Topo, default: &[u32], quick: bool) -> Result<Vec<u32>> {
    let n = pick(&t.nodes, default, if quick { &[200] } else { &[] })?;
    // 127.1.0.0 – 127.255.255.255 holds the simulated nodes' addresses.
    if let Some(bad) = n.iter().find(|&&n| n > 254 * 65536) {
        bail!("--nodes {bad} exceeds the loopback addresses available for simulated nodes");
    }
    Ok(n)
}

fn run(cli: &Cli, progress: &mut dyn FnMut(&str)) -> Result<Vec<Row>> {
    let q = cli.quick;
    match &cli.scenario {
        Scenario::PeerSched {
            nodes,
            pending,
            cycles,
            bf_interval,
            tree_width,
            seed,
            canopy_only,
            canopy_bin,
        } => {
            // Kept on failure (the clusters' logs), removed after a clean run.
            let work = tempfile::Builder::new()
                .prefix("canopy-peer-sched")
                .tempdir()?;
            let opts = peer::SchedOpts {
                canopy_bin: match canopy_bin {
                    Some(d) => d.clone(),
                    None => harness::bin_dir()?,
                },
                work_dir: work.path().to_path_buf(),
                nodes: *nodes,
                pending: *pending,
                cycles: *cycles,
                bf_interval: *bf_interval,
                tree_width: *tree_width,
                seed: *seed,
                quick: q,
                canopy_only: *canopy_only,
            };
            let rows = peer_sched(&opts, progress);
            if rows.is_err() {
                let _ = work.keep();
            }
            rows
        }
        Scenario::Heartbeat {
            topo,
            intervals,
            slurmd_timeout,
        } => scenarios::heartbeat::run(
            &scenarios::heartbeat::Opts {
                nodes: nodes(topo, &[1000, 10000, 50000], q)?,
                widths: widths(topo, &[16, 32, 64], q)?,
                intervals: if q { 2 } else { (*intervals).max(1) },
                slurmd_timeout: if q { 3 } else { *slurmd_timeout },
            },
            progress,
        ),
        Scenario::Fanout { topo, rounds } => scenarios::fanout::run(
            &scenarios::fanout::Opts {
                nodes: nodes(topo, &[1000, 10000, 50000], q)?,
                widths: widths(topo, &[16, 32, 64], q)?,
                rounds: if q { 6 } else { (*rounds).max(2) },
                budget: Duration::from_secs(10),
            },
            progress,
        ),
        Scenario::Dynamic {
            listed,
            dynamic,
            tree_width,
        } => scenarios::dynamic::run(
            &scenarios::dynamic::Opts {
                listed: *listed,
                dynamic: if q { vec![50] } else { dynamic.clone() },
                widths: tree_width.clone(),
            },
            progress,
        ),
        Scenario::ConsoleTree { topo, rounds, seed } => scenarios::console_tree::run(
            &scenarios::console_tree::Opts {
                nodes: nodes(topo, &[100_000], q)?,
                widths: widths(topo, &[16], q)?,
                rounds: if q { 3 } else { (*rounds).max(1) },
                seed: *seed,
            },
            progress,
        ),
        Scenario::Storm {
            topo,
            leaves,
            slurmd_timeout,
        } => scenarios::storm::run(
            &scenarios::storm::Opts {
                nodes: nodes(topo, &[10000], q)?,
                widths: widths(topo, &[32], q)?,
                leaves: if q { 10 } else { *leaves },
                slurmd_timeout: if q { 3 } else { (*slurmd_timeout).max(1) },
            },
            progress,
        ),
        Scenario::Signer { duration, threads } => scenarios::signer::run(
            &scenarios::signer::Opts {
                duration: Duration::from_secs(if q { 1 } else { (*duration).max(1) }),
                threads: threads.clone(),
            },
            progress,
        ),
        Scenario::Rpc {
            clients,
            duration,
            query_rate,
            submit_rate,
            preload,
        } => scenarios::rpc::run(
            &scenarios::rpc::Opts {
                clients: if q { 4 } else { *clients },
                duration: Duration::from_secs(if q { 1 } else { (*duration).max(1) }),
                mixes: vec![Mix::Query, Mix::Submit, Mix::Mixed],
                query_rate: if q { 500 } else { *query_rate },
                submit_rate: if q { 200 } else { *submit_rate },
                preload: if q { 50 } else { *preload },
            },
            progress,
        ),
        Scenario::Throughput {
            topo,
            jobs,
            clients,
        } => {
            let n = nodes(topo, &[1000], q)?;
            let w = widths(topo, &[32], q)?;
            scenarios::throughput::run(
                &scenarios::throughput::Opts {
                    nodes: n[0],
                    tree_width: w[0],
                    jobs: if q { 500 } else { *jobs },
                    clients: if q { 4 } else { *clients },
                },
                progress,
            )
        }
        Scenario::Memory {
            topo,
            jobs,
            clients,
        } => {
            let n = nodes(topo, &[10000], q)?;
            let w = widths(topo, &[32], q)?;
            scenarios::memory::run(
                &scenarios::memory::Opts {
                    nodes: n[0],
                    tree_width: w[0],
                    jobs: if q { 2000 } else { *jobs },
                    clients: if q { 4 } else { *clients },
                },
                progress,
            )
        }
        Scenario::Sched {
            nodes,
            pending,
            users,
            accounts,
            reserve_depth,
            advance_reservations,
            passes,
            quick_passes,
            seed,
        } => {
            if *nodes == 0 || *users == 0 || *accounts == 0 {
                bail!("--nodes, --users and --accounts must be positive");
            }
            scenarios::sched::run(
                &scenarios::sched::Opts {
                    nodes: if q { 500 } else { *nodes },
                    pending: if q { 5000 } else { *pending },
                    users: *users,
                    accounts: *accounts,
                    reserve_depth: (*reserve_depth).max(1),
                    advance_reservations: *advance_reservations,
                    passes: if q { 2 } else { (*passes).max(1) },
                    quick: if q { 100 } else { *quick_passes },
                    seed: *seed,
                },
                progress,
            )
        }
        Scenario::Power {
            storm_nodes,
            tree_width,
            interval_nodes,
            rounds,
        } => scenarios::power::run(
            &scenarios::power::Opts {
                storm_nodes: if q { 50 } else { *storm_nodes },
                tree_width: (*tree_width).max(2),
                interval_nodes: if q { 1000 } else { *interval_nodes },
                rounds: if q { 3 } else { *rounds },
            },
            progress,
        ),
        Scenario::Prio {
            nodes,
            jobs,
            users,
            accounts,
            rounds,
        } => scenarios::prio::run(
            &scenarios::prio::Opts {
                nodes: if q { 100 } else { *nodes },
                jobs: if q { 2000 } else { *jobs },
                users: if q { 50 } else { *users },
                accounts: if q { 5 } else { *accounts },
                rounds: if q { 1 } else { *rounds },
            },
            progress,
        ),
        Scenario::Leaf { iterations, tasks } => scenarios::leaf::run(
            &scenarios::leaf::Opts {
                iterations: if q { 50 } else { (*iterations).max(1) },
                tasks: (*tasks).max(1),
            },
            progress,
        ),
        Scenario::Replay {
            trace,
            jobs,
            seed,
            nodes,
            cores,
            load,
            schedulers,
        } => {
            if *nodes == 0 || *cores == 0 {
                bail!("--nodes and --cores must be positive");
            }
            scenarios::replay::run(
                &scenarios::replay::Opts {
                    trace: trace.clone(),
                    jobs: if q { 500 } else { (*jobs).max(1) },
                    seed: *seed,
                    nodes: if q { 16 } else { *nodes },
                    cores: *cores,
                    load: *load,
                    schedulers: schedulers.clone(),
                },
                progress,
            )
        }
        Scenario::ResvGate {
            nodes,
            jobs,
            reservations,
            passes,
        } => scenarios::resv::run(
            &scenarios::resv::Opts {
                nodes: if q { 100 } else { (*nodes).max(1) },
                jobs: if q { 1000 } else { *jobs },
                reservations: if q { 5 } else { *reservations },
                passes: if q { 2 } else { (*passes).max(1) },
            },
            progress,
        ),
        Scenario::Peer {
            ks,
            tree_width,
            submits,
            queued,
            confined,
            canopy_only,
            launch_only,
            reps,
        } => {
            if *tree_width < 2 {
                bail!("--tree-width must be at least 2");
            }
            let work = tempfile::Builder::new().prefix("canopy-peer").tempdir()?;
            let opts = peer::PeerOpts {
                canopy_bin: harness::bin_dir()?,
                work_dir: work.path().to_path_buf(),
                ks: ks.clone(),
                tree_width: *tree_width,
                submits: *submits,
                queued: *queued,
                quick: q,
                leaves: if *confined {
                    peer::Leaves::Confined
                } else {
                    peer::Leaves::Plain
                },
                canopy_only: *canopy_only,
                launch_only: *launch_only,
                reps: *reps,
            };
            match peer::run(&opts, progress) {
                Ok(rows) => Ok(rows
                    .into_iter()
                    .map(|r| {
                        let mut row = Row::new("peer")
                            .set("metric", r.metric)
                            .set("unit", r.unit)
                            .set("tree_width", *tree_width)
                            .set("leaves", opts.leaves.name());
                        if let Some(n) = r.nodes {
                            row = row.set("nodes", n);
                        }
                        row = row.num("canopy", r.canopy);
                        row = match r.slurm {
                            Some(s) => row.num("slurm", s),
                            None => row.set("slurm", serde_json::Value::Null),
                        };
                        row = match r.ratio {
                            Some(x) => row.num("ratio", x),
                            None => row.set("ratio", serde_json::Value::Null),
                        };
                        row.set("note", r.note)
                    })
                    .collect()),
                // Only a missing Slurm is a skip; canopy failing is an error.
                Err(e @ peer::PeerError::SlurmUnavailable(_)) => {
                    progress(&format!("peer: skipped: {e}"));
                    Ok(vec![Row::new("peer")
                        .set("skipped", true)
                        .set("note", e.to_string())])
                }
                // The run leaves a failed cluster's logs in its directory; keep them.
                Err(e) => {
                    let kept = work.keep();
                    Err(anyhow::Error::from(e).context(format!("logs kept in {}", kept.display())))
                }
            }
        }
        Scenario::ConsoleIdle {
            topo,
            intervals,
            samples,
            slurmd_timeout,
        } => scenarios::console::run(
            &scenarios::console::Opts {
                nodes: nodes(topo, &[10000], q)?,
                widths: widths(topo, &[16], q)?,
                intervals: if q { 1 } else { (*intervals).max(1) },
                samples: if q { 3 } else { *samples },
                refresh: Duration::from_secs(1),
                slurmd_timeout: if q { 3 } else { *slurmd_timeout },
            },
            progress,
        ),
        Scenario::ConsoleExec {
            topo,
            rounds,
            idle_secs,
            distinct,
        } => scenarios::console_exec::run(
            &scenarios::console_exec::Opts {
                nodes: nodes(topo, &[10000], q)?,
                widths: widths(topo, &[32], q)?,
                rounds: if q { 3 } else { (*rounds).max(1) },
                idle: Duration::from_secs(if q { 1 } else { (*idle_secs).max(1) }),
                // The smoke test checks the worst case's line count too.
                distinct: *distinct || q,
            },
            progress,
        ),
        Scenario::ConsolePing { topo, rounds } => scenarios::console_ping::run(
            &scenarios::console_ping::Opts {
                nodes: nodes(topo, &[10000], q)?,
                widths: widths(topo, &[10], q)?,
                rounds: if q { 3 } else { (*rounds).max(1) },
            },
            progress,
        ),
    }
}

/// `peer-sched`: one row per figure, the set-up on each.
fn peer_sched(opts: &peer::SchedOpts, progress: &mut dyn FnMut(&str)) -> Result<Vec<Row>> {
    let run = match peer::run_sched(opts, progress) {
        Ok(run) => run,
        // Only a missing Slurm is a skip; canopy failing is an error.
        Err(e @ peer::PeerError::SlurmUnavailable(_)) => {
            progress(&format!("peer-sched: skipped: {e}"));
            return Ok(vec![Row::new("peer-sched")
                .set("skipped", true)
                .set("note", e.to_string())]);
        }
        Err(e) => {
            return Err(anyhow::Error::from(e)
                .context(format!("logs kept under {}", opts.work_dir.display())))
        }
    };
    progress(&format!(
        "canopy: {}; slurm: {}; SchedulerParameters={}",
        run.canopy_nodes, run.slurm_nodes, run.scheduler_parameters
    ));
    // The set-up in the same columns, so that a table or a JSON line says what ran
    // the nodes and how both schedulers were configured.
    let setup = Row::new("peer-sched")
        .set("metric", "node_daemons")
        .set("unit", "-")
        .set("nodes", run.nodes)
        .set("pending", run.pending)
        .set("canopy", run.canopy_nodes.clone())
        .set("slurm", run.slurm_nodes.clone())
        .set("ratio", serde_json::Value::Null)
        .set(
            "note",
            format!(
                "both: SchedulerType=sched/backfill PriorityType=priority/basic SchedulerParameters={}",
                run.scheduler_parameters
            ),
        );
    let rows = run.rows.into_iter().map(|r| {
        let row = Row::new("peer-sched")
            .set("metric", r.metric)
            .set("unit", r.unit)
            .set("nodes", run.nodes)
            .set("pending", run.pending)
            .num("canopy", r.canopy);
        let row = match r.slurm {
            Some(s) => row.num("slurm", s),
            None => row.set("slurm", serde_json::Value::Null),
        };
        let row = match r.ratio {
            Some(x) => row.num("ratio", x),
            None => row.set("ratio", serde_json::Value::Null),
        };
        row.set("note", r.note)
    });
    Ok(std::iter::once(setup).chain(rows).collect())
}

fn main() {
    let cli = Cli::parse();
    let mut progress = |line: &str| eprintln!("loadtest: {line}");
    match run(&cli, &mut progress) {
        Ok(rows) => {
            if cli.json {
                for r in &rows {
                    println!("{}", r.json());
                }
            } else {
                print!("{}", report::table(&rows));
            }
        }
        Err(e) => {
            eprintln!("canopy-loadtest: error: {e:#}");
            std::process::exit(1);
        }
    }
}
