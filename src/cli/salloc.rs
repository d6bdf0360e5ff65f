//! `salloc`: get an allocation, run a command (or the user's shell) on this
//! host with the job's `SLURM_*` environment, and release the allocation
//! when the command exits, with its exit code (slurm.md §7).
//!
//! Owns the salloc messages, the environment given to the command and the
//! release. Shares option parsing and the allocation request with `srun`,
//! which makes the same kind of allocation. Steps started inside (`srun`)
//! find the job through `SLURM_JOB_ID`.
//!
//! A job cancelled or timed out while the command runs is "revoked": salloc
//! says so and, with `-K`, signals the command; without it the command runs
//! on, as in Slurm.

use std::time::Duration;

use super::client::{CliError, Client};
use super::srun::{allocate, parse_options_env, print_info, release, SrunArgs};
use crate::exec::env::compress_counts;
use crate::wire::messages::{Body, ExitStatus, JobQuery};
use crate::wire::types::JobInfo;

const SALLOC_USAGE: &str = "\
Usage: salloc [-N nodes] [-n ntasks] [-c ncpus] [--ntasks-per-node=n]
              [-p partition] [-t time] [-J name] [-D dir] [-w hosts] [-x hosts]
              [--mem=size] [--mem-per-cpu=size] [-A account] [-C features]
              [--exclusive] [-H] [-b time] [-d dependency] [--nice[=adj]]
              [-I[secs]] [-K[sig]] [--no-shell] [--bell] [command [args...]]
";

const SALLOC_HELP: &str = "\
Usage: salloc [OPTIONS...] [command [args...]]

Get an allocation, run the command (default: your shell) on this host with the
job's SLURM_* environment, and release the allocation when it exits.

  -N, --nodes=n  -n, --ntasks=n  -c, --cpus-per-task=n  --ntasks-per-node=n
  -p, --partition=name  -t, --time=limit  -J, --job-name=name  -D, --chdir=dir
  -w, --nodelist=hosts  -x, --exclude=hosts  --mem=size  --mem-per-cpu=size
  -A, --account=name  -C, --constraint=features  --exclusive  -s, --oversubscribe
  --comment=text
  -H, --hold  -b, --begin=time  -d, --dependency=list  --nice[=adj]
  --priority=n  -I, --immediate[=secs]  --signal=[B:]sig[@secs]  -Q, --quiet
  -K, --kill-command[=sig]  signal the command if the allocation is revoked
  --no-shell  exit once granted, leaving the allocation  --bell  --no-bell
  --gres=list  -G, --gpus=[type:]n  --gpus-per-node=  --gpus-per-task=
  --gpus-per-socket=  --cpus-per-gpu=n  --mem-per-gpu=size  --gres-flags=
  -B S[:C[:T]]  --sockets-per-node=  --cores-per-socket=  --threads-per-core=
  --ntasks-per-socket=  --ntasks-per-core=  --hint=  -m, --distribution=
  --gpu-bind=  (SALLOC_* variables of the same names are read too)
  -h, --help  --usage  -V, --version

Other Slurm salloc options are accepted with a warning and ignored.
";

pub fn run(args: &[String]) -> i32 {
    let env: Vec<(String, String)> = std::env::vars().collect();
    let mut a = match parse_options_env(args, "salloc", &env) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{}", e.message);
            return e.code;
        }
    };
    if let Some(info) = a.info {
        print_info(info, SALLOC_USAGE, SALLOC_HELP);
        return 0;
    }
    for w in &a.warnings {
        eprintln!("{}", w.replacen("srun:", "salloc:", 1));
    }
    if a.command.is_empty() && !a.no_shell {
        a.command = vec![std::env::var("SHELL").unwrap_or_else(|_| "/bin/sh".into())];
    }
    super::block_on(async move {
        match session(a).await {
            Ok(code) => code,
            Err(e) => super::report("salloc", &e),
        }
    })
}

async fn session(a: SrunArgs) -> Result<i32, CliError> {
    let mut c = Client::connect(None).await?;
    let cwd = match &a.chdir {
        Some(d) => d.clone(),
        None => std::env::current_dir()?.display().to_string(),
    };
    let gres = super::sbatch_args::request_names(&a.resources);
    if let Err(e) = super::sbatch_args::check_gres(&gres, &c.conf.gres_types) {
        eprintln!("salloc: error: {e}");
        return Ok(1);
    }
    if let Some(Err(e)) = a
        .clusters
        .as_deref()
        .map(|l| super::check_clusters(l, &c.conf.cluster_name))
    {
        eprintln!("salloc: error: {e}");
        return Ok(1);
    }
    let start_time = chrono::Utc::now().timestamp();
    let Some(id) = allocate(&mut c, &a, &cwd, "salloc").await? else {
        return Ok(1);
    };
    if !a.quiet {
        eprintln!("salloc: Granted job allocation {id}");
    }
    if a.bell == Some(true) {
        // --bell: the terminal's bell, for whoever stopped watching.
        eprint!("\x07");
    }
    if a.no_shell {
        // The allocation stays until it is cancelled or times out; steps
        // use it through --jobid or SLURM_JOB_ID.
        return Ok(0);
    }
    let job = match c
        .call(Body::QueryJobs(JobQuery {
            job_ids: vec![id],
            include_finished: true,
            brief: false,
        }))
        .await?
    {
        Body::Jobs(j) => j.into_rows().into_iter().find(|j| j.job_id == id),
        other => return Err(CliError::Unexpected(other.kind())),
    };
    let env = job
        .map(|j| job_env(&j, &a, &c.conf.cluster_name, &cwd))
        .unwrap_or_default();
    // The terminal's Ctrl-C is for the command; salloc itself stays to
    // release the allocation, as Slurm's does.
    // SAFETY: setting a signal disposition to SIG_IGN runs no handler code.
    unsafe {
        let _ = nix::sys::signal::signal(
            nix::sys::signal::Signal::SIGINT,
            nix::sys::signal::SigHandler::SigIgn,
        );
    }
    let mut cmd = tokio::process::Command::new(&a.command[0]);
    cmd.args(&a.command[1..]).current_dir(&cwd).envs(env);
    // SAFETY: resetting a disposition is async-signal-safe. An ignored
    // signal would stay ignored across exec: Ctrl-C must reach the command.
    unsafe {
        cmd.pre_exec(|| {
            nix::sys::signal::signal(
                nix::sys::signal::Signal::SIGINT,
                nix::sys::signal::SigHandler::SigDfl,
            )
            .map(drop)
            .map_err(std::io::Error::from)
        });
    }
    let child = cmd.spawn();
    let (status, revoked) = match child {
        Ok(child) => watch(&mut c, id, child, a.kill_command).await,
        Err(e) => (Err(e), false),
    };
    let (code, exit) = match status {
        Ok(s) => {
            use std::os::unix::process::ExitStatusExt;
            let signal = s.signal().unwrap_or(0);
            let code = s.code().unwrap_or(128 + signal);
            (
                code,
                ExitStatus {
                    code: s.code().unwrap_or(0),
                    signal,
                },
            )
        }
        Err(e) => {
            eprintln!("salloc: error: cannot run {}: {e}", a.command[0]);
            (1, ExitStatus { code: 1, signal: 0 })
        }
    };
    if revoked {
        // Already over: nothing to relinquish.
        return Ok(code);
    }
    if !a.quiet {
        eprintln!("salloc: Relinquishing job allocation {id}");
    }
    // No step ran under this id: release names one that does not exist.
    release(&mut c, id, u32::MAX, exit, start_time).await;
    Ok(code)
}

/// How often salloc checks that its allocation still stands.
const REVOKE_CHECK: Duration = Duration::from_secs(2);

/// Wait for the command, watching the allocation meanwhile: once the job
/// has ended (cancelled, timed out), say it was revoked and, with `-K`,
/// signal the command. Returns its status and whether that happened.
async fn watch(
    c: &mut Client,
    id: u32,
    mut child: tokio::process::Child,
    kill_command: Option<i32>,
) -> (std::io::Result<std::process::ExitStatus>, bool) {
    let mut check = tokio::time::interval(REVOKE_CHECK);
    check.tick().await;
    let mut revoked = false;
    loop {
        tokio::select! {
            status = child.wait() => return (status, revoked),
            _ = check.tick(), if !revoked => {
                if !super::srun::job_ended(c, id).await {
                    continue;
                }
                revoked = true;
                eprintln!("salloc: Job allocation {id} has been revoked.");
                let target = kill_command
                    .and_then(|s| nix::sys::signal::Signal::try_from(s).ok())
                    .zip(child.id());
                if let Some((sig, pid)) = target {
                    let _ = nix::sys::signal::kill(
                        nix::unistd::Pid::from_raw(pid as i32),
                        sig,
                    );
                }
            }
        }
    }
}

/// The job variables salloc gives its command (Slurm's set for an
/// allocation; per-task variables come from srun steps).
fn job_env(j: &JobInfo, a: &SrunArgs, cluster: &str, cwd: &str) -> Vec<(String, String)> {
    let nodes = j.num_nodes.max(1);
    // JobInfo has the total only; canopy allocates evenly in practice.
    let per_node = vec![j.num_cpus / nodes; nodes as usize];
    let host = nix::unistd::gethostname()
        .map(|h| h.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut v: Vec<(String, String)> = vec![
        ("SLURM_JOB_ID".into(), j.job_id.to_string()),
        ("SLURM_JOBID".into(), j.job_id.to_string()),
        ("SLURM_JOB_NAME".into(), j.name.clone()),
        ("SLURM_JOB_NODELIST".into(), j.nodes.clone()),
        ("SLURM_NODELIST".into(), j.nodes.clone()),
        ("SLURM_JOB_NUM_NODES".into(), nodes.to_string()),
        ("SLURM_NNODES".into(), nodes.to_string()),
        ("SLURM_JOB_PARTITION".into(), j.partition.clone()),
        ("SLURM_JOB_CPUS_PER_NODE".into(), compress_counts(&per_node)),
        ("SLURM_CLUSTER_NAME".into(), cluster.to_string()),
        ("SLURM_SUBMIT_DIR".into(), cwd.to_string()),
        ("SLURM_SUBMIT_HOST".into(), host),
    ];
    if a.ntasks.is_some() || a.ntasks_per_node.is_some() {
        v.push(("SLURM_NTASKS".into(), j.num_tasks.to_string()));
        v.push(("SLURM_NPROCS".into(), j.num_tasks.to_string()));
    }
    if let Some(c) = a.cpus_per_task {
        v.push(("SLURM_CPUS_PER_TASK".into(), c.to_string()));
    }
    // What was asked, for the steps srun starts in the allocation to
    // inherit (Slurm's salloc sets the same).
    v.extend(super::sbatch_args::option_env(&a.resources, false));
    v
}
