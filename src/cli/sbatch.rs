//! `sbatch`: parse options and the script (see `sbatch_args`), submit, print
//! `Submitted batch job N` (or just `N` with `--parsable`).

use std::io::Read;

use super::client::{CliError, Client};
use super::sbatch_args::{parse_submission, SbatchError, SubmitContext};
use crate::wire::messages::{Body, JobQuery, SubmitReply};

pub fn run(args: &[String]) -> i32 {
    let ctx = match context() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("sbatch: error: {e}");
            return 1;
        }
    };
    // Ask the parser first; only if it finds no script (no path, no --wrap)
    // is the script read from stdin, as sbatch does.
    let parsed = match parse_submission(args, None, &ctx) {
        Err(SbatchError::NoScript) => {
            let mut text = String::new();
            if let Err(e) = std::io::stdin().read_to_string(&mut text) {
                eprintln!("sbatch: error: cannot read script from stdin: {e}");
                return 1;
            }
            parse_submission(args, Some(text), &ctx)
        }
        other => other,
    };
    let mut sub = match parsed {
        Ok(s) => s,
        // Slurm lists the GRES plugins configured (GresTypes).
        Err(SbatchError::ResourceHelp(super::sbatch_args::ResHelp::Gres)) => {
            let types = crate::config::Config::load(&crate::config::Config::locate(None))
                .map(|c| c.gres_types)
                .unwrap_or_default();
            println!("{}", super::sbatch_args::gres_help(&types));
            return 0;
        }
        Err(e) if e.exit_code() == 0 => {
            println!("{e}");
            return 0;
        }
        Err(e) => {
            eprintln!("{e}");
            return e.exit_code();
        }
    };
    for w in &sub.warnings {
        eprintln!("{w}");
    }
    if let Err(e) = run_as(&mut sub.submit, &sub.run_as) {
        eprintln!("sbatch: error: {e}");
        return 1;
    }
    let test_only = sub.submit.test_only;
    let gres = sub.gres.clone();
    let clusters = sub.clusters.clone();
    super::block_on(async move {
        let mut on_cluster = None;
        let reply = async {
            let mut c = Client::connect(None).await?;
            super::sbatch_args::check_gres(&gres, &c.conf.gres_types).map_err(CliError::Usage)?;
            if let Some(list) = &clusters {
                super::check_clusters(list, &c.conf.cluster_name).map_err(CliError::Usage)?;
                // With -M, Slurm names the cluster the job went to.
                on_cluster = Some(c.conf.cluster_name.clone());
            }
            // Refused here, before a large script or name travels: the
            // controller would refuse it with the same words.
            crate::policy::limits::check_submit(&sub.submit, c.conf.max_script_size)
                .map_err(CliError::Refused)?;
            let r = c.call(Body::SubmitJob(Box::new(sub.submit))).await?;
            Ok::<_, CliError>((c, r))
        }
        .await;
        let (mut client, job_id) = match reply {
            Ok((
                _,
                Body::SubmitReply(SubmitReply {
                    job_id,
                    will_run: Some(w),
                }),
            )) => {
                // Slurm prints the estimate on stderr and nothing on stdout.
                eprintln!(
                    "sbatch: Job {job_id} to start at {} using {} processors on nodes {} in partition {}",
                    super::format::time::fmt_timestamp(Some(w.start_time)),
                    w.cpus,
                    w.nodes,
                    w.partition
                );
                return 0;
            }
            Ok((c, Body::SubmitReply(r))) => (c, r.job_id),
            Ok((_, other)) => {
                eprintln!("sbatch: error: unexpected reply {}", other.kind());
                return 1;
            }
            Err(CliError::Refused(e)) if test_only => {
                eprintln!("allocation failure: {}", e.message);
                return 1;
            }
            Err(CliError::Refused(e)) => {
                eprintln!("sbatch: error: Batch job submission failed: {}", e.message);
                return 1;
            }
            Err(e) => return super::report("sbatch", &e),
        };
        match (sub.quiet, sub.parsable, on_cluster) {
            (true, _, _) => {}
            (_, true, None) => println!("{job_id}"),
            (_, true, Some(c)) => println!("{job_id};{c}"),
            (_, false, None) => println!("Submitted batch job {job_id}"),
            (_, false, Some(c)) => println!("Submitted batch job {job_id} on cluster {c}"),
        }
        if sub.wait {
            return wait_for(&mut client, job_id).await;
        }
        0
    })
}

/// `-W`: poll until the job ends; exit with its exit code (Slurm's behaviour).
async fn wait_for(client: &mut Client, job_id: u32) -> i32 {
    let mut delay = std::time::Duration::from_millis(2);
    loop {
        let q = Body::QueryJobs(JobQuery {
            job_ids: vec![job_id],
            include_finished: true,
            brief: false,
        });
        match client.call(q).await {
            Ok(Body::Jobs(jobs)) => match jobs.into_rows().first() {
                Some(j) if j.state.is_finished() => {
                    return if j.exit_code.1 != 0 {
                        128 + j.exit_code.1
                    } else {
                        j.exit_code.0
                    };
                }
                Some(_) => {}
                None => {
                    eprintln!("sbatch: error: job {job_id} disappeared");
                    return 1;
                }
            },
            Ok(other) => {
                eprintln!("sbatch: error: unexpected reply {}", other.kind());
                return 1;
            }
            Err(e) => return super::report("sbatch", &e),
        }
        tokio::time::sleep(delay).await;
        // Start fast (short jobs), back off to a gentle poll for long ones.
        delay = (delay * 2).min(std::time::Duration::from_millis(500));
    }
}

/// Root's `--uid`/`--gid` (the parser has refused them to anyone else):
/// the job runs as that user, with that group or, without `--gid`, the
/// user's primary group, as Slurm's sbatch does. Names or numbers.
fn run_as(
    submit: &mut crate::model::job::JobSubmit,
    (uid, gid): &(Option<String>, Option<String>),
) -> Result<(), String> {
    use nix::unistd::{Gid, Group, Uid, User};
    if let Some(spec) = uid {
        let user = match spec.parse::<u32>() {
            Ok(n) => User::from_uid(Uid::from_raw(n)).ok().flatten(),
            Err(_) => User::from_name(spec).ok().flatten(),
        };
        let user = user.ok_or("Invalid --uid specification")?;
        submit.uid = user.uid.as_raw();
        submit.gid = user.gid.as_raw();
        submit.user = user.name;
    }
    if let Some(spec) = gid {
        let group = match spec.parse::<u32>() {
            Ok(n) => Group::from_gid(Gid::from_raw(n))
                .ok()
                .flatten()
                .map(|g| g.gid),
            Err(_) => Group::from_name(spec).ok().flatten().map(|g| g.gid),
        };
        submit.gid = group.ok_or("Invalid --gid specification")?.as_raw();
    }
    Ok(())
}

fn context() -> Result<SubmitContext, std::io::Error> {
    let cwd = std::env::current_dir()?;
    let uid = nix::unistd::getuid();
    let gid = nix::unistd::getgid();
    // The controller names the user from the credential's uid; a passwd
    // lookup here would only cost every submission time.
    let user = String::new();
    let host = nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_else(|| "localhost".into());
    Ok(SubmitContext {
        cwd,
        env: std::env::vars().collect(),
        user,
        uid: uid.as_raw(),
        gid: gid.as_raw(),
        host,
        argv0: "sbatch".into(),
    })
}
