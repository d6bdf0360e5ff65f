//! Sending scancel's requests and reporting them: `-i` confirmation, `-M` checked
//! against this cluster, the controller round trips for jobs and steps, and every line and
//! exit status Slurm's scancel gives for them (`-v`, `-Q`, unknown and finished jobs,
//! steps of pending or missing jobs).
//!
//! Does not: parse options or decide which jobs match (the parent module and `select` do).

use super::*;

/// Asks about one job on `out` and reads the answer from `input`: `y` or `n` (either
/// case) decides, anything else asks again, end of input means no.
pub(super) fn confirm(job: &JobInfo, input: &mut impl BufRead, out: &mut impl Write) -> bool {
    loop {
        // A prompt that cannot be shown still gets its answer read.
        let _ = write!(
            out,
            "Cancel job_id={} name={} partition={} [y/n]? ",
            job.job_id, job.name, job.partition
        );
        let _ = out.flush();
        let mut line = String::new();
        if matches!(input.read_line(&mut line), Ok(0) | Err(_)) {
            let _ = writeln!(out);
            return false;
        }
        match line.chars().next() {
            Some('y' | 'Y') => return true,
            Some('n' | 'N') => return false,
            _ => {}
        }
    }
}

/// `-v`: what is about to happen to one job, as Slurm words it.
pub(super) fn action_line(job_id: impl std::fmt::Display, a: &ScancelArgs) -> String {
    let kind = match (a.full, a.batch) {
        (true, _) => "full ",
        (false, true) => "batch ",
        (false, false) => "",
    };
    match a.signal {
        None => format!("scancel: Terminating {kind}job {job_id}"),
        Some(sig) => format!("scancel: Signal {sig} to {kind}job {job_id}"),
    }
}

pub(super) fn missing_line(t: &Target) -> String {
    match t.step {
        None => format!("scancel: error: Kill job error on job id {t}: {INVALID_JOB_ID}"),
        Some(_) => format!("scancel: error: Kill job error on job step id {t}: {INVALID_JOB_ID}"),
    }
}

/// `-v` when the filters select nothing: the filters, as Slurm lists them.
pub(super) fn no_match_line(f: &Filters, me: u32) -> String {
    let users = f.users.as_ref().map(|u| match u {
        Users::Me => me.to_string(),
        Users::Listed(list) => list.clone(),
    });
    let parts = [
        ("account", f.account.clone()),
        ("job_name", f.name.clone()),
        ("nodelist", f.nodelist.clone()),
        ("partition", f.partition.clone()),
        ("qos", f.qos.clone()),
        ("reservation", f.reservation.clone()),
        ("state", f.state.map(|s| s.name().to_string())),
        ("user_name", users),
        ("wckey", f.wckey.clone()),
    ];
    let listed: Vec<String> = parts
        .into_iter()
        .filter_map(|(key, value)| value.map(|v| format!("{key}={v}")))
        .collect();
    format!(
        "scancel: error: No active jobs match ALL job filters, including: {}",
        listed.join(" ")
    )
}

/// Error lines for the controller's per-job answers, and the exit status: 0 unless a job
/// was refused for a reason other than being unknown or finished. Like Slurm 22.05,
/// an unknown or finished job is only reported when `verbose`.
pub(super) fn outcome(results: &[(u32, Option<String>)], verbose: bool) -> (Vec<String>, i32) {
    let mut lines = Vec::new();
    let mut code = 0;
    for (id, err) in results {
        let Some(msg) = err else { continue };
        let gone = msg == INVALID_JOB_ID || msg == ALREADY_DONE;
        if !gone {
            code = 1;
        }
        if verbose || !gone {
            lines.push(format!(
                "scancel: error: Kill job error on job id {id}: {msg}"
            ));
        }
    }
    (lines, code)
}

/// `-M`: every name must be `all` or this cluster.
pub(super) fn check_clusters(list: &str, local: &str) -> Result<(), ScancelError> {
    match list
        .split(',')
        .find(|c| !c.eq_ignore_ascii_case("all") && !c.eq_ignore_ascii_case(local))
    {
        Some(bad) => Err(ScancelError::UnknownCluster {
            name: bad.to_string(),
        }),
        None => Ok(()),
    }
}

pub(super) async fn execute(a: ScancelArgs, selector: Selector, me: u32) -> i32 {
    let mut c = match Client::connect(None).await {
        Ok(c) => c,
        Err(e) => return crate::cli::report("scancel", &e),
    };
    if let Some(list) = &a.clusters {
        if let Err(e) = check_clusters(list, &c.conf.cluster_name) {
            eprintln!("{e}");
            return 1;
        }
    }
    let mut code = 0;
    let requests = if a.direct() {
        vec![CancelRequest {
            job_ids: a.targets.iter().map(|t| t.job_id).collect(),
            signal: None,
            batch_only: a.batch_only(),
            exact: false,
        }]
    } else {
        let query = JobQuery {
            job_ids: a.targets.iter().map(|t| t.job_id).collect(),
            include_finished: true,
            brief: false,
        };
        let jobs = match c.call(Body::QueryJobs(query)).await {
            Ok(Body::Jobs(jobs)) => jobs.into_rows(),
            Ok(other) => return unexpected(&other),
            Err(e) => return crate::cli::report("scancel", &e),
        };
        let picked = select(&a.targets, &selector, &jobs);
        // Slurm 22.05 says nothing about a job that is not there unless
        // asked to be verbose (and exits 0 either way); a step of one is
        // always reported, and fails the command.
        for t in &picked.missing {
            if a.verbosity > 0 {
                eprintln!("{}", action_line(t, &a));
            }
            if t.step.is_some() {
                if !a.quiet() {
                    eprintln!("{}", missing_line(t));
                }
                code = 1;
            } else if a.verbosity > 0 {
                eprintln!("{}", missing_line(t));
            }
        }
        for &(job_id, step_id) in &picked.steps {
            code = code.max(cancel_step(&mut c, &a, job_id, step_id).await);
        }
        if picked.jobs.is_empty() && a.targets.is_empty() && a.verbosity > 0 {
            eprintln!("{}", no_match_line(&a.filters, me));
        }
        let jobs = if a.interactive {
            let (mut input, mut out) = (std::io::stdin().lock(), std::io::stdout());
            picked
                .jobs
                .into_iter()
                .filter(|j| confirm(j, &mut input, &mut out))
                .collect()
        } else {
            picked.jobs
        };
        requests(&jobs, a.signal, a.batch_only())
    };
    for req in requests {
        if a.verbosity > 0 {
            for id in &req.job_ids {
                eprintln!("{}", action_line(*id, &a));
            }
        }
        match c.call(Body::CancelJobs(req)).await {
            Ok(Body::CancelReply(reply)) => {
                let (lines, rc) = outcome(&reply.results, a.verbosity > 0);
                for line in lines {
                    eprintln!("{line}");
                }
                code = code.max(rc);
            }
            Ok(other) => return unexpected(&other),
            Err(e) => return crate::cli::report("scancel", &e),
        }
    }
    code
}

/// Cancel or signal step `job_id.step_id`; returns the exit status it calls for.
pub(super) async fn cancel_step(c: &mut Client, a: &ScancelArgs, job_id: u32, step_id: u32) -> i32 {
    if a.verbosity > 0 {
        eprintln!("{}", step_action_line(job_id, step_id, a.signal));
    }
    let req = StepCancel {
        job_id,
        step_id,
        signal: a.signal,
        terminate: false,
    };
    let msg = match c.call(Body::CancelStep(req)).await {
        Ok(Body::CancelReply(r)) => r.results.into_iter().find_map(|(_, e)| e),
        Ok(other) => return unexpected(&other),
        Err(e) => return crate::cli::report("scancel", &e),
    };
    let Some(msg) = msg else { return 0 };
    let (line, code) = step_error(job_id, step_id, &msg);
    if !a.quiet() {
        eprintln!("{line}");
    }
    code
}

/// `-v`: Slurm's line before acting on a step.
pub(super) fn step_action_line(job_id: u32, step_id: u32, signal: Option<i32>) -> String {
    match signal {
        None => format!("scancel: Terminating step {job_id}.{step_id}"),
        Some(sig) => format!("scancel: Signal {sig} to step {job_id}.{step_id}"),
    }
}

/// The error line and exit status for a refused step cancel. Slurm 22.05
/// names only the job when the step is not there, and exits with its error
/// number's low byte (ESLURM_INVALID_JOB_ID, 2017: 225).
pub(super) fn step_error(job_id: u32, step_id: u32, msg: &str) -> (String, i32) {
    if msg == INVALID_JOB_ID {
        (
            format!("scancel: error: Kill job error on job step id {job_id}: {msg}"),
            2017 & 0xff,
        )
    } else {
        (
            format!("scancel: error: Kill job error on job step id {job_id}.{step_id}: {msg}"),
            1,
        )
    }
}

pub(super) fn unexpected(body: &Body) -> i32 {
    eprintln!("scancel: error: unexpected reply {}", body.kind());
    1
}
