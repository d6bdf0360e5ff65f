//! `squeue`: list jobs in Slurm's formats (`-o`, `-O`, `-l`, `-h`), filtered by
//! id, user, name, partition, node and state. Layout lives in `format::squeue`.

use clap::Parser;

use super::client::{CliError, Client};
use super::format::squeue::{group_pending_arrays, render, SqueueFormat};
use crate::config::hostlist;
use crate::wire::messages::{Body, JobQuery};
use crate::wire::types::JobInfo;

#[derive(Parser, Debug)]
#[command(name = "squeue", disable_help_flag = true, disable_version_flag = true)]
struct Args {
    #[arg(short = 'o', long = "format")]
    format: Option<String>,
    #[arg(short = 'O', long = "Format")]
    format_long: Option<String>,
    #[arg(short = 'h', long = "noheader")]
    noheader: bool,
    #[arg(short = 'l', long = "long")]
    long: bool,
    #[arg(short = 't', long = "states")]
    states: Option<String>,
    #[arg(short = 'u', long = "user")]
    user: Option<String>,
    #[arg(long = "me")]
    me: bool,
    #[arg(short = 'j', long = "jobs")]
    jobs: Option<String>,
    #[arg(short = 'n', long = "name")]
    name: Option<String>,
    #[arg(short = 'p', long = "partition")]
    partition: Option<String>,
    #[arg(short = 'w', long = "nodelist")]
    nodelist: Option<String>,
    #[arg(short = 'S', long = "sort")]
    sort: Option<String>,
    /// Accepted for compatibility: hidden partitions are not implemented yet.
    #[arg(short = 'a', long = "all")]
    all: bool,
    /// One line per array task, pending ones included.
    #[arg(short = 'r', long = "array")]
    array: bool,
    #[arg(short = 'v', long = "verbose", action = clap::ArgAction::Count)]
    verbose: u8,
    #[arg(long = "help")]
    help: bool,
    #[arg(short = 'V', long = "version")]
    version: bool,
}

pub fn run(args: &[String]) -> i32 {
    let argv = std::iter::once("squeue".to_string()).chain(args.iter().cloned());
    let a = match Args::try_parse_from(argv) {
        Ok(a) => a,
        Err(e) => {
            eprintln!(
                "squeue: {}",
                e.to_string().trim_start_matches("error: ").trim_end()
            );
            eprintln!("Try \"squeue --help\" for more information");
            return 1;
        }
    };
    if a.help {
        println!("Usage: squeue [-h] [-l] [-a] [-j jobs] [-n names] [-p partitions] [-t states] [-u users] [--me] [-w nodes] [-o format] [-O fields] [-S sort]");
        return 0;
    }
    if a.version {
        println!("canopy {}", env!("CARGO_PKG_VERSION"));
        return 0;
    }
    if a.long && a.format.is_some() {
        eprintln!("squeue: fatal: Options -o(--format) and -l(--long) are mutually exclusive. Please remove one and retry.");
        return 1;
    }
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let (mut fmt, warnings) = match (
        a.format.clone().or_else(|| env("SQUEUE_FORMAT")),
        a.format_long.clone().or_else(|| env("SQUEUE_FORMAT2")),
    ) {
        (Some(f), _) if !a.long => SqueueFormat::user_format(&f),
        (None, Some(f)) if !a.long => SqueueFormat::field_list(&f),
        _ if a.long => (SqueueFormat::long_format(), vec![]),
        _ => (SqueueFormat::default_format(), vec![]),
    };
    for w in warnings {
        eprintln!("squeue: error: {w}");
    }
    fmt.no_header = a.noheader;
    fmt.sort = a.sort.clone().or_else(|| env("SQUEUE_SORT"));
    fmt.states = a.states.clone().or_else(|| env("SQUEUE_STATES"));
    let ids = match parse_ids(a.jobs.as_deref()) {
        Ok(ids) => ids,
        Err(e) => {
            eprintln!("squeue: error: {e}");
            return 1;
        }
    };
    let users = match user_filter(&a, env("SQUEUE_USERS")) {
        Ok(u) => u,
        Err(e) => {
            eprintln!("squeue: error: {e}");
            return 1;
        }
    };
    let nodes = match a.nodelist.as_deref().map(hostlist::expand).transpose() {
        Ok(n) => n,
        Err(e) => {
            eprintln!(
                "squeue: error: Invalid node name {}: {e}",
                a.nodelist.unwrap_or_default()
            );
            return 1;
        }
    };
    super::block_on(async move {
        let q = JobQuery {
            job_ids: ids.iter().map(|&(id, _)| id).collect(),
            include_finished: true,
            brief: !fmt.needs_detail(),
        };
        let r = async {
            let mut c = Client::connect(None).await?;
            c.call(Body::QueryJobs(q)).await
        }
        .await;
        let jobs = match r {
            Ok(Body::Jobs(j)) => j.into_rows(),
            Ok(other) => {
                eprintln!("squeue: error: unexpected reply {}", other.kind());
                return 1;
            }
            Err(CliError::Refused(e)) => {
                eprintln!("slurm_load_jobs error: {}", e.message);
                return 1;
            }
            Err(e) => {
                eprintln!("slurm_load_jobs error: {e}");
                return 1;
            }
        };
        if !ids.is_empty() && jobs.is_empty() {
            eprintln!("slurm_load_jobs error: Invalid job id specified");
            return 1;
        }
        let names: Option<Vec<&str>> = a.name.as_deref().map(|n| n.split(',').collect());
        let parts: Option<Vec<&str>> = a.partition.as_deref().map(|p| p.split(',').collect());
        let shown: Vec<JobInfo> = jobs
            .into_iter()
            .filter(|j| {
                ids.is_empty()
                    || ids
                        .iter()
                        .any(|&(id, task)| super::names_job(id, task, j.job_id, j.array))
            })
            .filter(|j| users.as_ref().is_none_or(|u| u.contains(&j.uid)))
            .filter(|j| names.as_ref().is_none_or(|n| n.contains(&j.name.as_str())))
            .filter(|j| {
                parts
                    .as_ref()
                    .is_none_or(|p| p.contains(&j.partition.as_str()))
            })
            .filter(|j| {
                nodes.as_ref().is_none_or(|want| {
                    hostlist::expand(&j.nodes)
                        .map(|have| have.iter().any(|h| want.contains(h)))
                        .unwrap_or(false)
                })
            })
            .collect();
        let array_env = env("SQUEUE_ARRAY").is_some();
        let shown = if a.array || array_env {
            shown
        } else {
            group_pending_arrays(shown)
        };
        // With explicit ids, finished jobs are shown too (as Slurm does within MinJobAge).
        let mut fmt = fmt;
        if !ids.is_empty() && fmt.states.is_none() {
            fmt.states = Some("all".into());
        }
        match render(&shown, &fmt, chrono::Utc::now().timestamp()) {
            Ok(text) => {
                print!("{text}");
                0
            }
            Err(e) => {
                eprintln!("squeue: error: {e}");
                1
            }
        }
    })
}

/// `-j` items: `N` (a job, or every task of array N) or `N_T` (one task).
fn parse_ids(list: Option<&str>) -> Result<Vec<(u32, Option<u32>)>, String> {
    let Some(list) = list else {
        return Ok(Vec::new());
    };
    let bad = |s: &str| format!("Invalid job id: {s}");
    list.split(',')
        .filter(|s| !s.is_empty())
        .map(|s| match s.split_once('_') {
            Some((job, task)) => Ok((
                job.parse::<u32>().map_err(|_| bad(s))?,
                Some(task.parse::<u32>().map_err(|_| bad(s))?),
            )),
            None => Ok((s.parse::<u32>().map_err(|_| bad(s))?, None)),
        })
        .collect()
}

/// `-u a,b` (names or uids) and `--me` → the uids to keep.
fn user_filter(a: &Args, env_users: Option<String>) -> Result<Option<Vec<u32>>, String> {
    let mut uids = Vec::new();
    if a.me {
        uids.push(nix::unistd::getuid().as_raw());
    }
    if let Some(list) = a.user.clone().or(env_users) {
        for u in list.split(',').filter(|s| !s.is_empty()) {
            let uid = match u.parse::<u32>() {
                Ok(n) => n,
                Err(_) => nix::unistd::User::from_name(u)
                    .ok()
                    .flatten()
                    .map(|x| x.uid.as_raw())
                    .ok_or_else(|| format!("Invalid user: {u}"))?,
            };
            uids.push(uid);
        }
    }
    Ok((!uids.is_empty()).then_some(uids))
}
