//! `scontrol`: `show job|node|partition|step|config|hostnames|hostlist|
//! hostlistsorted`, `ping`, `reconfigure`, job control (`hold`, `release`,
//! `top`, `requeue`, `suspend`...) and `update JobId=...|NodeName=...`.
//! Records print in Slurm's `Key=Value` layout (see `format::scontrol`).

use super::client::{CliError, Client};
use super::format::scontrol::{
    ping_line, show_job_with, show_node_with, show_partition, show_step,
};
use crate::config::hostlist;
use crate::wire::messages::{
    AcctQuery, Body, JobQuery, JobUpdate, NodeQuery, NodeUpdate, NodeUpdateState, RequeueKind,
};
use crate::wire::types::{JobInfo, JobState, StepKind};

const USAGE: &str = "Usage: scontrol [-o] <command> [args]
  show job [id] | node [name] | partition [name] | hostnames [list] | hostlist <list> | hostlistsorted <list>
  ping | reconfigure
  top <job_id>[,<job_id>...]
  requeue|requeuehold|suspend|resume <job_id>[,<job_id>...]
  hold|uhold|release <job_id>[,<job_id>...] | jobname=<name>
  update JobId=<id> [TimeLimit=<t>] [Partition=<p>] [NumNodes=<n>] [Name=<n>] [Priority=<n>]
  update NodeName=<nodes> State=DRAIN|DOWN|RESUME|UNDRAIN|IDLE|POWER_UP|POWER_DOWN[_ASAP|_FORCE] [Reason=<text>]
  power up|down [asap|force] <nodes>|ALL
  create reservation StartTime=<t> Duration=<d>|EndTime=<t> Nodes=<list>|NodeCnt=<n>|Licenses=<l> Users=<u>|Accounts=<a> [Flags=<f>] [PartitionName=<p>]
  update ReservationName=<name> [StartTime=...] [Users+=<u>] [Flags-=<f>] ...
  delete ReservationName=<name>
  create NodeName=<nodes> [CPUs=<n>] [RealMemory=<mb>] [Feature=<f>] [Gres=<g>] State=FUTURE|CLOUD
  delete NodeName=<nodes>
  show reservation [name] | licenses [name]";

pub fn run(args: &[String]) -> i32 {
    let mut one_liner = false;
    let mut details = false;
    // `-a`: hidden partitions too (without it, as slurmctld answers,
    // `show partition NAME` of a hidden one finds nothing).
    let mut all = false;
    let mut rest: Vec<&str> = Vec::new();
    for a in args {
        match a.as_str() {
            "-o" | "--oneliner" => one_liner = true,
            "-d" | "--details" => details = true,
            "-a" | "--all" => all = true,
            "-Q" | "--quiet" | "-v" | "--verbose" => {}
            "-h" | "--help" => {
                println!("{USAGE}");
                return 0;
            }
            "-V" | "--version" => {
                println!("canopy {}", env!("CARGO_PKG_VERSION"));
                return 0;
            }
            _ => rest.push(a),
        }
    }
    let Some((cmd, args)) = rest.split_first() else {
        eprintln!("{USAGE}");
        return 1;
    };
    match command(cmd).as_str() {
        "show" => show(args, one_liner, details, all),
        "reconfigure" => reconfigure(),
        "ping" => ping(),
        "power" => power(args),
        "update" => match args.first().and_then(|a| a.split_once('=')) {
            Some((k, _))
                if k.eq_ignore_ascii_case("jobid") || k.eq_ignore_ascii_case("jobname") =>
            {
                update_job(args)
            }
            Some((k, _))
                if k.len() >= 3 && "reservationname".starts_with(&k.to_ascii_lowercase()) =>
            {
                super::scontrol_resv::update(args)
            }
            _ => update(args),
        },
        // `create reservation ...` or `create ReservationName=... ...`
        // (Slurm takes any first word starting "res").
        "create" => match args.first() {
            Some(w) if w.get(..3).is_some_and(|p| p.eq_ignore_ascii_case("res")) => {
                super::scontrol_resv::create(args)
            }
            Some(w) if super::scontrol_node::is_node_key(w) => super::scontrol_node::create(args),
            Some(w) => {
                eprintln!("invalid entity: {w} for keyword: create");
                1
            }
            None => {
                eprintln!("scontrol: error: too few arguments for keyword:create");
                1
            }
        },
        "delete" => match args.first() {
            Some(w) if super::scontrol_node::is_node_key(w) => super::scontrol_node::delete(args),
            _ => super::scontrol_resv::delete(args),
        },
        kind @ ("hold" | "uhold" | "release") => hold(kind, args),
        "top" => top(args),
        kind @ ("requeue" | "requeuehold" | "suspend" | "resume") => control(kind, args),
        "version" => {
            println!("canopy {}", env!("CARGO_PKG_VERSION"));
            0
        }
        other => {
            eprintln!("invalid keyword: {other}");
            1
        }
    }
}

/// The commands, in the order Slurm tries them: a word names the first
/// command it is a prefix of, if it has at least three letters (`sho`,
/// `reconfig`), as in Slurm's scontrol.
const COMMANDS: &[&str] = &[
    "show",
    "ping",
    "update",
    "hold",
    "uhold",
    "release",
    "top",
    "requeue",
    "requeuehold",
    "suspend",
    "resume",
    "reconfigure",
    "version",
    "create",
    "delete",
    "power",
];

fn command(word: &str) -> String {
    let w = word.to_ascii_lowercase();
    if COMMANDS.contains(&w.as_str()) || w.len() < 3 {
        return w;
    }
    match COMMANDS.iter().find(|c| c.starts_with(&w)) {
        Some(c) => c.to_string(),
        None => w,
    }
}

/// `reconfigure`: the controller re-reads slurm.conf and applies it. Silent
/// on success, as in Slurm; a file it cannot use changes nothing.
fn reconfigure() -> i32 {
    match call(Body::Reconfigure) {
        Ok(Body::Ok) => 0,
        Ok(Body::Error(e)) => {
            eprintln!("slurm_reconfigure error: {}", e.message);
            1
        }
        Ok(b) => {
            eprintln!("slurm_reconfigure error: unexpected reply {}", b.kind());
            1
        }
        Err(e) => {
            eprintln!("slurm_reconfigure error: {e}");
            1
        }
    }
}

fn call(body: Body) -> Result<Body, CliError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let mut c = Client::connect(None).await?;
        c.call(body).await
    })
}

/// `scontrol show step [JOB[.STEP]]`: the running steps, from the
/// accounting view (which has the batch step and every srun step).
fn show_steps(target: Option<&str>, one_liner: bool) -> i32 {
    // 22.05 reads a step that is not a number (`2.batch`) as step 0.
    let (job, step) = match target.map(|t| t.split_once('.').unwrap_or((t, ""))) {
        None => (None, None),
        Some((j, s)) => match j.parse::<u32>() {
            Ok(j) if s.is_empty() => (Some(j), None),
            Ok(j) => (Some(j), Some(s.parse::<u32>().unwrap_or(0))),
            Err(_) => {
                eprintln!("Invalid job id specified");
                return 1;
            }
        },
    };
    let q = AcctQuery {
        job_ids: job.into_iter().collect(),
        states: if job.is_none() {
            vec![JobState::Running, JobState::Suspended]
        } else {
            Vec::new()
        },
        ..AcctQuery::default()
    };
    let jobs = match call(Body::QueryAcct(q)) {
        Ok(Body::Acct(jobs)) => jobs,
        r => return fail("slurm_get_job_steps error", r),
    };
    if job.is_some() && jobs.is_empty() {
        eprintln!("slurm_get_job_steps error: Invalid job id specified");
        return 1;
    }
    let mut shown = 0;
    for j in &jobs {
        for s in j.steps.iter().filter(|s| {
            matches!(s.state, JobState::Running | JobState::Suspended)
                && step.is_none_or(|n| s.kind == StepKind::Numbered(n))
        }) {
            print!("{}", show_step(j, s, one_liner));
            shown += 1;
        }
    }
    if shown > 0 {
        return 0;
    }
    match (job, step) {
        (None, _) => {
            println!("No job steps in the system");
            0
        }
        (Some(j), s) => {
            let s = s.map(|s| s.to_string()).unwrap_or_default();
            println!("Job step {j}.{s} not found");
            1
        }
    }
}

fn show(args: &[&str], one_liner: bool, details: bool, all: bool) -> i32 {
    let Some(entity) = args.first() else {
        eprintln!(
            "scontrol: error: show what? (job, node, partition, config, hostnames, hostlist)"
        );
        return 1;
    };
    let target = args.get(1).copied();
    let now = chrono::Utc::now().timestamp();
    match entity.to_ascii_lowercase().as_str() {
        "job" | "jobs" => {
            let ids = match target.map(|t| t.parse::<u32>()) {
                None => vec![],
                Some(Ok(id)) => vec![id],
                Some(Err(_)) => {
                    eprintln!("Invalid job id specified");
                    return 1;
                }
            };
            let q = JobQuery {
                job_ids: ids.clone(),
                include_finished: true,
                brief: false,
            };
            match call(Body::QueryJobs(q)) {
                Ok(Body::Jobs(jobs)) => {
                    let jobs = jobs.into_rows();
                    if jobs.is_empty() {
                        if ids.is_empty() {
                            println!("No jobs in the system");
                            return 0;
                        }
                        eprintln!("slurm_load_jobs error: Invalid job id specified");
                        return 1;
                    }
                    for j in &jobs {
                        print!("{}", show_job_with(j, now, one_liner, details));
                    }
                    0
                }
                r => fail("slurm_load_jobs error", r),
            }
        }
        "node" | "nodes" => {
            let names = match target.map(hostlist::expand).transpose() {
                Ok(n) => n.unwrap_or_default(),
                Err(e) => {
                    eprintln!("Invalid node name specified: {e}");
                    return 1;
                }
            };
            match call(Body::QueryNodes(NodeQuery {
                names: names.clone(),
            })) {
                Ok(Body::Nodes(nodes)) => {
                    if nodes.is_empty() && !names.is_empty() {
                        eprintln!("Node {} not found", target.unwrap_or_default());
                        return 1;
                    }
                    for n in &nodes {
                        print!("{}", show_node_with(n, now, one_liner, details));
                    }
                    0
                }
                r => fail("slurm_load_node error", r),
            }
        }
        "partition" | "partitions" => match call(Body::QueryPartitions) {
            Ok(Body::Partitions(parts)) => {
                let shown: Vec<_> = parts
                    .iter()
                    .filter(|p| target.is_none_or(|t| p.name == t))
                    .filter(|p| all || !p.hidden)
                    .collect();
                if shown.is_empty() && target.is_some() {
                    eprintln!("Partition {} not found", target.unwrap_or_default());
                    return 1;
                }
                for p in shown {
                    print!("{}", show_partition(p, one_liner));
                }
                0
            }
            r => fail("slurm_load_partitions error", r),
        },
        "step" | "steps" => show_steps(target, one_liner),
        "hostnames" => {
            let expr = target
                .map(str::to_string)
                .or_else(|| std::env::var("SLURM_JOB_NODELIST").ok());
            let Some(expr) = expr else {
                eprintln!("scontrol: error: host list is empty");
                return 1;
            };
            match hostlist::expand(&expr) {
                Ok(names) => {
                    for n in names {
                        println!("{n}");
                    }
                    0
                }
                Err(e) => {
                    eprintln!("scontrol: error: Invalid hostlist: {e}");
                    1
                }
            }
        }
        kind @ ("hostlist" | "hostlistsorted") => {
            let Some(expr) = target else {
                eprintln!("scontrol: error: hostlist requires a list of hosts");
                return 1;
            };
            match hostlist::expand(expr) {
                Ok(names) => {
                    if kind == "hostlist" {
                        println!("{}", hostlist::compress(&names));
                    } else {
                        println!("{}", hostlist::compress_sorted(&names));
                    }
                    0
                }
                Err(e) => {
                    eprintln!("scontrol: error: Invalid hostlist: {e}");
                    1
                }
            }
        }
        "config" => match Client::connect_config(None) {
            Ok(conf) => {
                print!("{}", super::format::scontrol::show_config(&conf, now));
                0
            }
            Err(e) => {
                eprintln!("scontrol: error: {e}");
                1
            }
        },
        e if e.len() >= 3 && "reservations".starts_with(e) => {
            super::scontrol_resv::show(target, one_liner)
        }
        e if e.len() >= 3 && "licenses".starts_with(e) => {
            super::scontrol_resv::show_licenses(target, one_liner)
        }
        other => {
            eprintln!("invalid entity: {other} for keyword: show");
            1
        }
    }
}

fn fail(what: &str, r: Result<Body, CliError>) -> i32 {
    match r {
        Ok(b) => eprintln!("{what}: unexpected reply {}", b.kind()),
        Err(e) => eprintln!("{what}: {e}"),
    }
    1
}

fn ping() -> i32 {
    let host = Client::connect_config(None)
        .map(|c| c.control_host.clone())
        .unwrap_or_else(|_| "(unknown)".into());
    let up = matches!(call(Body::Ping), Ok(Body::Pong(_)));
    println!("{}", ping_line(&host, up));
    i32::from(!up)
}

/// `power {up|down} [asap|force] {ALL|NODELIST} [Reason=<text>]` (Slurm
/// 23.02's spelling of `update NodeName=... State=POWER_UP|POWER_DOWN...`).
fn power(args: &[&str]) -> i32 {
    let state = match power_state(args) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("scontrol: error: {e}");
            return 1;
        }
    };
    let (state, nodes, reason) = state;
    let nodes = if nodes.eq_ignore_ascii_case("all") {
        match call(Body::QueryNodes(NodeQuery::default())) {
            Ok(Body::Nodes(list)) => {
                let names: Vec<&str> = list.iter().map(|n| n.name.as_str()).collect();
                hostlist::compress(&names)
            }
            r => return fail("slurm_load_node error", r),
        }
    } else {
        nodes
    };
    match call(Body::UpdateNodes(NodeUpdate {
        nodes,
        state: Some(state),
        reason,
    })) {
        Ok(_) => 0,
        Err(CliError::Refused(e)) => {
            eprintln!("slurm_update error: {}", e.message);
            1
        }
        Err(e) => {
            eprintln!("scontrol: error: {e}");
            1
        }
    }
}

/// The state, node list and reason of `power ...`.
fn power_state(args: &[&str]) -> Result<(NodeUpdateState, String, Option<String>), String> {
    let mut it = args.iter().copied().peekable();
    let dir = it.next().unwrap_or_default().to_ascii_lowercase();
    let up = match dir.as_str() {
        "up" => true,
        "down" => false,
        _ => return Err(format!("power: expected up or down, not '{dir}'")),
    };
    let mut state = if up {
        NodeUpdateState::PowerUp
    } else {
        NodeUpdateState::PowerDown
    };
    if !up {
        match it.peek().map(|s| s.to_ascii_lowercase()) {
            Some(m) if m == "asap" => {
                state = NodeUpdateState::PowerDownAsap;
                it.next();
            }
            Some(m) if m == "force" => {
                state = NodeUpdateState::PowerDownForce;
                it.next();
            }
            _ => {}
        }
    }
    let nodes = it
        .next()
        .ok_or_else(|| "power: no nodes given (a node list or ALL)".to_string())?
        .to_string();
    let mut reason = None;
    for a in it {
        match a.split_once('=') {
            Some((k, v)) if k.eq_ignore_ascii_case("reason") => {
                reason = Some(v.trim_matches('"').to_string())
            }
            _ => return Err(format!("power: unexpected '{a}'")),
        }
    }
    Ok((state, nodes, reason))
}

/// `update NodeName=<list> State=<s> [Reason=<text>]` (keys case-insensitive;
/// the reason may be several words, as when a shell passed `Reason="a b"`).
fn update(args: &[&str]) -> i32 {
    let mut nodes = None;
    let mut state = None;
    let mut reason: Option<String> = None;
    for a in args {
        let Some((k, v)) = a.split_once('=') else {
            if let Some(r) = reason.as_mut() {
                r.push(' ');
                r.push_str(a);
                continue;
            }
            eprintln!("scontrol: error: Invalid input: {a}\nRequest aborted");
            return 1;
        };
        match k.to_ascii_lowercase().as_str() {
            "nodename" => nodes = Some(v.to_string()),
            "state" => {
                state = Some(match v.to_ascii_uppercase().as_str() {
                    "DRAIN" => NodeUpdateState::Drain,
                    "DOWN" => NodeUpdateState::Down,
                    "RESUME" => NodeUpdateState::Resume,
                    "UNDRAIN" => NodeUpdateState::Undrain,
                    "IDLE" => NodeUpdateState::Idle,
                    "POWER_DOWN" => NodeUpdateState::PowerDown,
                    "POWER_DOWN_ASAP" => NodeUpdateState::PowerDownAsap,
                    "POWER_DOWN_FORCE" => NodeUpdateState::PowerDownForce,
                    "POWER_UP" => NodeUpdateState::PowerUp,
                    other => {
                        eprintln!("scontrol: error: Invalid node state specified: {other}");
                        return 1;
                    }
                })
            }
            "reason" => reason = Some(v.trim_matches('"').to_string()),
            other => {
                eprintln!("scontrol: error: Update of this parameter is not supported: {other}={v}\nRequest aborted");
                return 1;
            }
        }
    }
    let Some(nodes) = nodes else {
        eprintln!("scontrol: error: No valid entity in update command\nInput line must include \"NodeName\"");
        return 1;
    };
    if matches!(state, Some(NodeUpdateState::Drain | NodeUpdateState::Down)) && reason.is_none() {
        eprintln!("You must specify a reason when DOWNING or DRAINING a node. Request denied");
        return 1;
    }
    match call(Body::UpdateNodes(NodeUpdate {
        nodes,
        state,
        reason,
    })) {
        Ok(_) => 0,
        Err(CliError::Refused(e)) => {
            eprintln!("slurm_update error: {}", e.message);
            1
        }
        Err(e) => {
            eprintln!("slurm_update error: {e}");
            1
        }
    }
}

/// Job ids from `12,13 14`, `7_3` (one array task) or `jobname=<name>`
/// (every active job of that name). The flag says the ids are exact (see
/// [`JobUpdate::exact`]): with any `A_T` in the list, the client resolves
/// every id itself.
fn job_ids(args: &[&str]) -> Result<(Vec<u32>, bool), String> {
    let mut ids = Vec::new();
    let mut named: Vec<(u32, Option<u32>, String)> = Vec::new();
    for a in args {
        if let Some((k, name)) = a.split_once('=') {
            if !k.eq_ignore_ascii_case("jobname") {
                return Err(format!("Invalid job id specified: {a}"));
            }
            ids.extend(
                query_jobs(Vec::new())?
                    .iter()
                    .filter(|j| j.name == name && !j.state.is_finished())
                    .map(|j| j.job_id),
            );
            continue;
        }
        for part in a.split(',').filter(|p| !p.is_empty()) {
            let bad = || format!("Invalid job id specified: {part}");
            let (job, task) = match part.split_once('_') {
                Some((job, task)) => (job, Some(task.parse::<u32>().map_err(|_| bad())?)),
                None => (part, None),
            };
            named.push((job.parse().map_err(|_| bad())?, task, part.to_string()));
        }
    }
    if named.iter().all(|(_, task, _)| task.is_none()) {
        ids.extend(named.iter().map(|(id, _, _)| *id));
        return Ok((ids, false));
    }
    let jobs = query_jobs(named.iter().map(|(id, _, _)| *id).collect())?;
    for (job, task, text) in &named {
        let before = ids.len();
        ids.extend(
            jobs.iter()
                .filter(|j| super::names_job(*job, *task, j.job_id, j.array))
                .map(|j| j.job_id),
        );
        if ids.len() == before {
            return Err(format!("Invalid job id specified: {text}"));
        }
    }
    Ok((ids, true))
}

/// The controller's records for `ids` (all jobs when empty).
fn query_jobs(ids: Vec<u32>) -> Result<Vec<JobInfo>, String> {
    let q = JobQuery {
        job_ids: ids,
        include_finished: true,
        brief: true,
    };
    match call(Body::QueryJobs(q)) {
        Ok(Body::Jobs(j)) => Ok(j.into_rows()),
        Ok(b) => Err(format!("unexpected reply {}", b.kind())),
        Err(e) => Err(e.to_string()),
    }
}

/// The ids a job-control command names; `None` (after saying why) if there
/// are none or they cannot be read.
fn listed_ids(args: &[&str]) -> Option<(Vec<u32>, bool)> {
    match job_ids(args) {
        Ok((ids, exact)) if !ids.is_empty() => Some((ids, exact)),
        Ok(_) => {
            eprintln!("Invalid job id specified");
            None
        }
        Err(e) => {
            eprintln!("{e}");
            None
        }
    }
}

/// How Slurm 22.05 words a job a command could not act on.
#[derive(Clone, Copy)]
enum Refusal {
    /// `Job 12: <reason>` (update).
    JobColon,
    /// `<reason> for job 12` (top, requeue, suspend, resume; checked
    /// against 22.05).
    ForJob,
    /// `<reason> for job 12` per job, then `<call> error: <last reason>`
    /// (hold, uhold, release).
    ForJobThenSummary,
}

/// Send `u`; print each refused job as `style` says, and failures of the
/// request itself under the name of Slurm's library `call`.
fn send_update(u: JobUpdate, call_name: &str, style: Refusal) -> i32 {
    match call(Body::UpdateJobs(u)) {
        Ok(Body::UpdateJobsReply(r)) => {
            let mut last = None;
            for (id, err) in r.results {
                if let Some(msg) = err {
                    match style {
                        Refusal::JobColon => eprintln!("Job {id}: {msg}"),
                        Refusal::ForJob | Refusal::ForJobThenSummary => {
                            eprintln!("{msg} for job {id}")
                        }
                    }
                    last = Some(msg);
                }
            }
            match (last, style) {
                (None, _) => 0,
                (Some(msg), Refusal::ForJobThenSummary) => {
                    eprintln!("{call_name} error: {msg}");
                    1
                }
                (Some(_), _) => 1,
            }
        }
        Ok(b) => {
            eprintln!("{call_name} error: unexpected reply {}", b.kind());
            1
        }
        Err(e) => {
            eprintln!("{call_name} error: {e}");
            1
        }
    }
}

/// `requeue`, `requeuehold`, `suspend` and `resume` on a list of ids.
/// Options Slurm allows after `requeue` (`Incomplete`, `State=SpecialExit`)
/// are accepted; canopy requeues whatever state the job is in.
fn control(kind: &str, args: &[&str]) -> i32 {
    let ids: Vec<&str> = args
        .iter()
        .copied()
        .filter(|a| !a.eq_ignore_ascii_case("incomplete") && !a.contains('='))
        .collect();
    let Some((ids, exact)) = listed_ids(&ids) else {
        return 1;
    };
    let mut u = JobUpdate {
        job_ids: ids,
        exact,
        ..Default::default()
    };
    match kind {
        "requeue" => u.requeue = Some(RequeueKind::Requeue),
        "requeuehold" => u.requeue = Some(RequeueKind::Hold),
        "suspend" => u.suspend = Some(true),
        _ => u.suspend = Some(false),
    }
    send_update(u, "slurm_update", Refusal::ForJob)
}

/// `hold`, `uhold` and `release`. Failures are worded as Slurm 22.05 words
/// them: one line per job, then a summary under the name of the library call
/// (which, for these three, is slurm_suspend's).
fn hold(kind: &str, args: &[&str]) -> i32 {
    let Some((ids, exact)) = listed_ids(args) else {
        return 1;
    };
    let u = JobUpdate {
        job_ids: ids,
        hold: Some(kind != "release"),
        user_hold: kind == "uhold",
        exact,
        ..Default::default()
    };
    send_update(u, "slurm_suspend", Refusal::ForJobThenSummary)
}

/// `top`: move the jobs ahead of their owner's other pending jobs in the
/// same partition. Success prints nothing; each refused job gets Slurm's
/// `<reason> for job <id>` line.
fn top(args: &[&str]) -> i32 {
    let Some((ids, exact)) = listed_ids(args) else {
        return 1;
    };
    let u = JobUpdate {
        job_ids: ids,
        exact,
        top: true,
        ..Default::default()
    };
    send_update(u, "slurm_top_job", Refusal::ForJob)
}

/// `update JobId=<id>[,<id>] Key=Value ...`.
fn update_job(args: &[&str]) -> i32 {
    let mut u = JobUpdate::default();
    for a in args {
        let Some((k, v)) = a.split_once('=') else {
            eprintln!("scontrol: error: Invalid input: {a}\nRequest aborted");
            return 1;
        };
        let bad = |what: &str| {
            eprintln!("scontrol: error: Invalid {what} specification: {v}");
            1
        };
        match k.to_ascii_lowercase().as_str() {
            "jobid" => match job_ids(&[v]) {
                Ok((ids, exact)) => {
                    u.job_ids.extend(ids);
                    u.exact |= exact;
                }
                Err(e) => {
                    eprintln!("{e}");
                    return 1;
                }
            },
            "jobname" => match job_ids(&[a]) {
                Ok((ids, _)) => u.job_ids.extend(ids),
                Err(e) => {
                    eprintln!("{e}");
                    return 1;
                }
            },
            "timelimit" => match crate::config::units::parse_time_limit_min(v) {
                Ok(Some(m)) => u.time_limit_min = Some(m.max(1)),
                Ok(None) => u.time_limit_min = Some(0),
                Err(_) => return bad("time limit"),
            },
            "partition" => u.partition = Some(v.to_string()),
            "numnodes" | "reqnodes" => match v.split('-').next().and_then(|n| n.parse().ok()) {
                Some(n) if n > 0 => u.num_nodes = Some(n),
                _ => return bad("node count"),
            },
            "name" => u.name = Some(v.to_string()),
            "priority" => match v.parse() {
                Ok(p) => u.priority = Some(p),
                Err(_) => return bad("priority"),
            },
            other => {
                eprintln!("scontrol: error: Update of this parameter is not supported: {other}={v}\nRequest aborted");
                return 1;
            }
        }
    }
    if u.job_ids.is_empty() {
        eprintln!("Invalid job id specified");
        return 1;
    }
    send_update(u, "slurm_update", Refusal::JobColon)
}
