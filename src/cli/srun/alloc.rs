//! Getting and giving back an allocation: finding an enclosing job (`SLURM_JOB_ID`), the
//! allocation request built from [`SrunArgs`], `--test-only`, waiting for the grant
//! (with `--immediate` and Ctrl-C while pending), cancelling a request, releasing the
//! allocation and asking whether a job has ended. salloc shares these.
//!
//! Does not: launch the step or handle its I/O (the parent module and `session` do).

use super::*;

pub(super) fn env_job_id() -> Option<u32> {
    ["SLURM_JOB_ID", "SLURM_JOBID"]
        .iter()
        .find_map(|k| std::env::var(k).ok()?.parse().ok())
}

/// Create an allocation for this srun (or salloc: `prog`) and wait until it
/// runs. `None`: a signal (Ctrl-C) came first and the request was withdrawn.
pub(crate) async fn allocate(
    c: &mut Client,
    a: &SrunArgs,
    cwd: &str,
    prog: &str,
) -> Result<Option<u32>, CliError> {
    let submit = allocation_request(a, cwd);
    let id = match c.call(Body::SubmitJob(Box::new(submit))).await {
        Ok(Body::SubmitReply(r)) => r.job_id,
        Ok(other) => return Err(CliError::Unexpected(other.kind())),
        // Slurm's wording: srun "Unable to allocate resources", salloc
        // "Job submit/allocate failed".
        Err(CliError::Refused(e)) if prog == "salloc" => {
            return Err(CliError::Usage(format!(
                "Job submit/allocate failed: {}",
                e.message
            )))
        }
        Err(CliError::Refused(e)) => {
            return Err(CliError::Usage(format!(
                "Unable to allocate resources: {}",
                e.message
            )))
        }
        Err(e) => return Err(e),
    };
    wait_for_grant(c, a, id, prog).await
}

/// The job an allocation srun or salloc makes is (also for `--test-only`).
pub(super) fn allocation_request(a: &SrunArgs, cwd: &str) -> JobSubmit {
    let uid = nix::unistd::getuid().as_raw();
    let name = a
        .job_name
        .clone()
        .or_else(|| {
            a.command.first().map(|c| {
                std::path::Path::new(c)
                    .file_name()
                    .map(|f| f.to_string_lossy().into_owned())
                    .unwrap_or_else(|| c.clone())
            })
        })
        // Slurm's name for `salloc --no-shell`.
        .unwrap_or_else(|| if a.no_shell { "no-shell" } else { "srun" }.into());
    JobSubmit {
        name,
        partition: a.partition.clone(),
        min_nodes: a.nodes,
        ntasks: a.ntasks,
        cpus_per_task: a.cpus_per_task,
        ntasks_per_node: a.ntasks_per_node,
        mem_per_node_mb: a.mem_mb,
        mem_per_cpu_mb: a.mem_per_cpu_mb.filter(|_| a.mem_mb.is_none()),
        account: a.account.clone(),
        qos: a.qos.clone(),
        constraint: a.constraint.clone(),
        comment: a.comment.clone(),
        exclusive: a.exclusive.then_some(crate::wire::types::Exclusive::Node),
        oversubscribe: a.oversubscribe,
        time_limit_min: a.time_limit_min,
        workdir: cwd.to_string(),
        submit_dir: cwd.to_string(),
        uid,
        gid: nix::unistd::getgid().as_raw(),
        submit_line: std::env::args().collect::<Vec<_>>().join(" "),
        command: a.command.join(" "),
        interactive: true,
        req_nodes: a.nodelist.clone(),
        exc_nodes: a.exclude.clone(),
        hold: a.hold,
        begin_time: a.begin_time,
        dependency: a.dependency.clone(),
        nice: a.nice.unwrap_or(0),
        priority: a.priority,
        signal: a.signal,
        test_only: a.test_only,
        reservation: a.reservation.clone(),
        licenses: a.licenses.clone(),
        mail_type: a.mail_type.unwrap_or(0),
        mail_user: a.mail_user.clone(),
        resources: a.resources.clone(),
        ..Default::default()
    }
}

/// `--test-only`: when and where the allocation would start; nothing is
/// queued (the job id is used up, as in Slurm).
pub(super) async fn test_only(
    c: &mut Client,
    a: &SrunArgs,
    cwd: &str,
    prog: &str,
) -> Result<i32, CliError> {
    let submit = allocation_request(a, cwd);
    match c.call(Body::SubmitJob(Box::new(submit))).await {
        Ok(Body::SubmitReply(crate::wire::messages::SubmitReply {
            job_id,
            will_run: Some(w),
        })) => {
            eprintln!(
                "{prog}: Job {job_id} to start at {} using {} processors on nodes {} in partition {}",
                crate::cli::format::time::fmt_timestamp(Some(w.start_time)),
                w.cpus,
                w.nodes,
                w.partition
            );
            Ok(0)
        }
        Ok(other) => Err(CliError::Unexpected(other.kind())),
        Err(CliError::Refused(e)) => {
            eprintln!("allocation failure: {}", e.message);
            Ok(1)
        }
        Err(e) => Err(e),
    }
}

/// Wait until allocation `id` runs; `None` if it was withdrawn (`-I`, a
/// signal).
pub(super) async fn wait_for_grant(
    c: &mut Client,
    a: &SrunArgs,
    id: u32,
    prog: &str,
) -> Result<Option<u32>, CliError> {
    if a.hold && !a.quiet {
        eprintln!("{prog}: Job is in held state, pending scheduler release");
    }
    let mut said = false;
    let give_up_at = a
        .immediate
        .map(|s| Instant::now() + Duration::from_secs(u64::from(s)));
    let mut signals = catch_signals(&[]);
    // Start fast (an idle cluster grants at once), back off for a busy one.
    let mut delay = Duration::from_millis(1);
    loop {
        let q = Body::QueryJobs(JobQuery {
            job_ids: vec![id],
            include_finished: true,
            brief: false,
        });
        let state = match c.call(q).await? {
            Body::Jobs(j) => j.rows().first().map(|j| j.state),
            other => return Err(CliError::Unexpected(other.kind())),
        };
        match state {
            Some(JobState::Running) => {
                if said && !a.quiet {
                    eprintln!("{prog}: job {id} has been allocated resources");
                }
                return Ok(Some(id));
            }
            Some(JobState::Pending) if give_up_at.is_some_and(|t| Instant::now() >= t) => {
                // -I: not granted in time; withdraw the request. The
                // controller scheduled it before answering the first query.
                cancel_request(c, id).await;
                let why = "Unable to allocate resources: Requested nodes are busy";
                if prog == "salloc" {
                    eprintln!("salloc: error: {why}");
                    eprintln!("salloc: Job allocation {id} has been revoked.");
                    return Ok(None);
                }
                return Err(CliError::Usage(why.into()));
            }
            Some(JobState::Pending) => {
                if !said && !a.quiet {
                    if prog == "salloc" {
                        eprintln!("salloc: Pending job allocation {id}");
                    }
                    eprintln!("{prog}: job {id} queued and waiting for resources");
                }
                said = true;
            }
            _ => {
                return Err(CliError::Usage(format!(
                    "job {id} ended before its allocation was granted"
                )))
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(delay) => {}
            Some(sig) = signals.recv() => {
                if matches!(sig, libc_sig::SIGCONT | libc_sig::SIGTSTP) {
                    continue;
                }
                // Withdraw the request rather than leave a job nobody will use.
                cancel_request(c, id).await;
                if prog == "salloc" {
                    eprintln!("salloc: Job allocation {id} has been revoked.");
                    eprintln!("salloc: Job aborted due to signal");
                } else {
                    eprintln!("srun: Job allocation {id} has been revoked");
                    eprintln!("srun: Force Terminated JobId={id}");
                }
                return Ok(None);
            }
        }
        delay = (delay * 2).min(Duration::from_millis(200));
    }
}

/// Withdraw an allocation request nobody will use.
pub(super) async fn cancel_request(c: &mut Client, id: u32) {
    let cancel = Body::CancelJobs(crate::wire::messages::CancelRequest {
        job_ids: vec![id],
        signal: None,
        batch_only: false,
        exact: true,
    });
    let _ = c.call(cancel).await;
}

pub(crate) async fn release(
    c: &mut Client,
    job_id: u32,
    step_id: u32,
    exit: ExitStatus,
    start_time: i64,
) {
    let done = StepComplete {
        job_id,
        step_id,
        exit,
        start_time,
        release: true,
    };
    let _ = c.call(Body::StepComplete(done)).await;
}

/// True once the controller no longer runs `job_id`. A failed query (the
/// controller restarted, say) answers no, and the next call goes over a new
/// connection.
pub(crate) async fn job_ended(c: &mut Client, job_id: u32) -> bool {
    let q = Body::QueryJobs(JobQuery {
        job_ids: vec![job_id],
        include_finished: true,
        brief: true,
    });
    match c.call(q).await {
        Ok(Body::Jobs(j)) => j
            .into_rows()
            .first()
            .is_none_or(|j| j.state.is_finished() || j.state == JobState::Completing),
        Ok(_) => false,
        Err(_) => {
            if let Ok(fresh) = Client::connect(None).await {
                *c = fresh;
            }
            false
        }
    }
}
