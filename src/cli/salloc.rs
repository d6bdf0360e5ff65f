//! `salloc`: get an allocation, run a command (or the user's shell) on this
//! host with the job's `SLURM_*` environment, and release the allocation
//! when the command exits, with its exit code (slurm.md §7).
//!
//! Owns the salloc messages, the environment given to the command and the
//! release. Shares option parsing and the allocation request with `srun`,
//! which makes the same kind of allocation. Steps started inside (`srun`)
//! find the job through `SLURM_JOB_ID`.
//!
//! Not done: a job cancelled or timed out while the command runs does not
//! stop the command (Slurm's "Job allocation N has been revoked").

use std::process::Command;

use super::client::{CliError, Client};
use super::srun::{allocate, parse_options, print_info, release, SrunArgs};
use crate::exec::env::compress_counts;
use crate::wire::messages::{Body, ExitStatus, JobQuery};
use crate::wire::types::JobInfo;

const SALLOC_USAGE: &str = "\
Usage: salloc [-N nodes] [-n ntasks] [-c ncpus] [--ntasks-per-node=n]
              [-p partition] [-t time] [-J name] [-D dir] [-w hosts] [-x hosts]
              [--mem=size] [--mem-per-cpu=size] [-A account] [-C features]
              [--exclusive] [-H] [-b time] [-d dependency] [--nice[=adj]]
              [-I[secs]] [command [args...]]
";

const SALLOC_HELP: &str = "\
Usage: salloc [OPTIONS...] [command [args...]]

Get an allocation, run the command (default: your shell) on this host with the
job's SLURM_* environment, and release the allocation when it exits.

  -N, --nodes=n  -n, --ntasks=n  -c, --cpus-per-task=n  --ntasks-per-node=n
  -p, --partition=name  -t, --time=limit  -J, --job-name=name  -D, --chdir=dir
  -w, --nodelist=hosts  -x, --exclude=hosts  --mem=size  --mem-per-cpu=size
  -A, --account=name  -C, --constraint=features  --exclusive  --comment=text
  -H, --hold  -b, --begin=time  -d, --dependency=list  --nice[=adj]
  --priority=n  -I, --immediate[=secs]  -Q, --quiet
  -h, --help  --usage  -V, --version

Other Slurm salloc options are accepted with a warning and ignored.
";

pub fn run(args: &[String]) -> i32 {
    let mut a = match parse_options(args, "salloc") {
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
    if a.command.is_empty() {
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
    let start_time = chrono::Utc::now().timestamp();
    let Some(id) = allocate(&mut c, &a, &cwd, "salloc").await? else {
        return Ok(1);
    };
    if !a.quiet {
        eprintln!("salloc: Granted job allocation {id}");
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
    let status = Command::new(&a.command[0])
        .args(&a.command[1..])
        .current_dir(&cwd)
        .envs(env)
        .status();
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
    if !a.quiet {
        eprintln!("salloc: Relinquishing job allocation {id}");
    }
    // No step ran under this id: release names one that does not exist.
    release(&mut c, id, u32::MAX, exit, start_time).await;
    Ok(code)
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
    v
}
