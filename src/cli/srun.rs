//! `srun`: run a parallel step. Inside an allocation (found through
//! `SLURM_JOB_ID`/`SLURM_JOBID` alone) it launches a step of that job;
//! outside one it first creates an allocation, runs the step in it, and
//! releases it. Task output is streamed back as it is produced: node daemons
//! connect to a listener srun opens, and report every task's exit status.

use std::collections::HashMap;
use std::io::Write;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::mpsc;

use super::client::{CliError, Client};
use super::getopt::{
    self, spec, Ambiguity,
    ArgKind::{Flag, Optional, Required},
    OptSpec, Word,
};
use crate::wire::connection::Connection;
use crate::wire::messages::{
    Body, ExitStatus, JobQuery, StepComplete, StepLaunched, StepRequest, TaskOutput,
};
use crate::wire::types::{JobState, JobSubmit};

/// What srun was asked to do.
#[derive(Debug, Default, PartialEq)]
pub struct SrunArgs {
    pub ntasks: Option<u32>,
    pub nodes: Option<u32>,
    pub ntasks_per_node: Option<u32>,
    pub cpus_per_task: Option<u32>,
    pub label: bool,
    pub output: Option<String>,
    pub error: Option<String>,
    pub job_name: Option<String>,
    pub partition: Option<String>,
    pub time_limit_min: Option<u32>,
    pub mem_mb: Option<u64>,
    pub chdir: Option<String>,
    pub quiet: bool,
    pub command: Vec<String>,
    pub warnings: Vec<String>,
}

/// srun's options; the action is the long name (see `set`).
static OPTIONS: &[OptSpec<&str>] = &[
    spec("ntasks", Some('n'), Required, "ntasks"),
    spec("nodes", Some('N'), Required, "nodes"),
    spec("ntasks-per-node", None, Required, "ntasks-per-node"),
    spec("cpus-per-task", Some('c'), Required, "cpus-per-task"),
    spec("output", Some('o'), Required, "output"),
    spec("error", Some('e'), Required, "error"),
    spec("job-name", Some('J'), Required, "job-name"),
    spec("partition", Some('p'), Required, "partition"),
    spec("time", Some('t'), Required, "time"),
    spec("mem", None, Required, "mem"),
    spec("chdir", Some('D'), Required, "chdir"),
    spec("label", Some('l'), Flag, "label"),
    spec("unbuffered", Some('u'), Flag, "unbuffered"),
    spec("quiet", Some('Q'), Flag, "quiet"),
    spec("verbose", Some('v'), Flag, "verbose"),
    // Accepted so scripts keep working; they change nothing in canopy yet.
    spec("mpi", None, Required, "mpi"),
    spec("cpu-bind", None, Required, "cpu-bind"),
    spec("export", None, Required, "export"),
    spec("nodelist", Some('w'), Required, "nodelist"),
    spec("exclude", Some('x'), Required, "exclude"),
    spec("account", Some('A'), Required, "account"),
    spec("qos", Some('q'), Required, "qos"),
    spec("gres", None, Required, "gres"),
    spec("gpus", Some('G'), Required, "gpus"),
    spec("distribution", Some('m'), Required, "distribution"),
    spec("mem-per-cpu", None, Required, "mem-per-cpu"),
    spec("input", Some('i'), Required, "input"),
    spec("kill-on-bad-exit", Some('K'), Optional, "kill-on-bad-exit"),
    spec("signal", None, Required, "signal"),
    spec("constraint", Some('C'), Required, "constraint"),
    spec("exclusive", None, Optional, "exclusive"),
    spec("overlap", None, Flag, "overlap"),
    spec("exact", None, Flag, "exact"),
    spec("pty", None, Flag, "pty"),
];

/// Options canopy honours; the rest of OPTIONS only warn.
const HONOURED: &[&str] = &[
    "ntasks",
    "nodes",
    "ntasks-per-node",
    "cpus-per-task",
    "output",
    "error",
    "job-name",
    "partition",
    "time",
    "mem",
    "chdir",
    "label",
    "unbuffered",
    "quiet",
    "verbose",
    "mpi",
    "cpu-bind",
    "exclusive",
    "overlap",
    "exact",
];

fn num<T: std::str::FromStr>(opt: &str, v: &str) -> Result<T, String> {
    v.parse()
        .map_err(|_| format!("srun: error: Invalid numeric value \"{v}\" for --{opt}."))
}

fn set(a: &mut SrunArgs, opt: &str, v: Option<&str>) -> Result<(), String> {
    let v = v.unwrap_or_default();
    match opt {
        "ntasks" => a.ntasks = Some(num(opt, v)?),
        // min[-max]: canopy uses the minimum.
        "nodes" => a.nodes = Some(num(opt, v.split('-').next().unwrap_or(v))?),
        "ntasks-per-node" => a.ntasks_per_node = Some(num(opt, v)?),
        "cpus-per-task" => a.cpus_per_task = Some(num(opt, v)?),
        "output" => a.output = Some(v.to_string()),
        "error" => a.error = Some(v.to_string()),
        "job-name" => a.job_name = Some(v.to_string()),
        "partition" => a.partition = Some(v.to_string()),
        "time" => {
            a.time_limit_min = match crate::config::units::parse_time_limit_min(v) {
                Ok(Some(m)) => Some(m),
                Ok(None) => Some(0),
                Err(_) => return Err("srun: error: Invalid --time specification".into()),
            }
        }
        "mem" => {
            a.mem_mb = Some(
                crate::config::units::parse_mem_mb(v)
                    .map_err(|_| "srun: error: Invalid --mem specification".to_string())?,
            )
        }
        "chdir" => a.chdir = Some(v.to_string()),
        "label" => a.label = true,
        "quiet" => a.quiet = true,
        _ if !HONOURED.contains(&opt) => a.warnings.push(super::unsupported_option("srun", opt)),
        _ => {}
    }
    Ok(())
}

/// Parse srun's command line: options (`--k=v`, `--k v`, `-kv`, `-k v`,
/// unique prefixes) up to the first non-option, which starts the command.
pub fn parse(args: &[String]) -> Result<SrunArgs, String> {
    let a = parse_options(args)?;
    if a.command.is_empty() {
        return Err("srun: fatal: No command given to execute.".into());
    }
    Ok(a)
}

/// The options and the command (possibly empty: salloc runs a shell then).
pub(crate) fn parse_options(args: &[String]) -> Result<SrunArgs, String> {
    let mut a = SrunArgs::default();
    let mut i = 0;
    loop {
        match getopt::read_word(OPTIONS, args, i, Ambiguity::Error) {
            Word::EndOfOptions => {
                i += 1;
                break;
            }
            Word::Positional => break,
            Word::Options {
                given,
                problem,
                next,
            } => {
                for g in given {
                    set(&mut a, g.spec.action, g.value.as_deref())?;
                }
                if let Some(p) = problem {
                    return Err(p.message("srun"));
                }
                i = next;
            }
        }
    }
    a.command = args[i.min(args.len())..].to_vec();
    Ok(a)
}

pub fn run(args: &[String]) -> i32 {
    let a = match parse(args) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return 1;
        }
    };
    for w in &a.warnings {
        eprintln!("{w}");
    }
    super::block_on(async move {
        match step(a).await {
            Ok(code) => code,
            Err(e) => super::report("srun", &e),
        }
    })
}

fn env_job_id() -> Option<u32> {
    ["SLURM_JOB_ID", "SLURM_JOBID"]
        .iter()
        .find_map(|k| std::env::var(k).ok()?.parse().ok())
}

/// Create an allocation for this srun (or salloc: `prog`) and wait until it runs.
pub(crate) async fn allocate(
    c: &mut Client,
    a: &SrunArgs,
    cwd: &str,
    prog: &str,
) -> Result<u32, CliError> {
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
        .unwrap_or_else(|| "srun".into());
    let submit = JobSubmit {
        name,
        partition: a.partition.clone(),
        min_nodes: a.nodes,
        ntasks: a.ntasks,
        cpus_per_task: a.cpus_per_task,
        ntasks_per_node: a.ntasks_per_node,
        mem_per_node_mb: a.mem_mb,
        time_limit_min: a.time_limit_min,
        workdir: cwd.to_string(),
        submit_dir: cwd.to_string(),
        uid,
        gid: nix::unistd::getgid().as_raw(),
        submit_line: std::env::args().collect::<Vec<_>>().join(" "),
        command: a.command.join(" "),
        interactive: true,
        ..Default::default()
    };
    let id = match c.call(Body::SubmitJob(Box::new(submit))).await? {
        Body::SubmitReply(r) => r.job_id,
        other => return Err(CliError::Unexpected(other.kind())),
    };
    let mut said = false;
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
                return Ok(id);
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
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(Duration::from_millis(200));
    }
}

/// Run the step; returns srun's exit code.
async fn step(a: SrunArgs) -> Result<i32, CliError> {
    let mut c = Client::connect(None).await?;
    let cwd = match &a.chdir {
        Some(d) => d.clone(),
        None => std::env::current_dir()?.display().to_string(),
    };
    let (job_id, own_allocation) = match env_job_id() {
        Some(id) => (id, false),
        None => (allocate(&mut c, &a, &cwd, "srun").await?, true),
    };
    let ip = c
        .local_ip()
        .unwrap_or(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST));
    let listener = TcpListener::bind((ip, 0)).await?;
    let io_addr = listener.local_addr()?.to_string();
    let token: u64 = rand::random();
    let start_time = chrono::Utc::now().timestamp();
    let req = StepRequest {
        job_id,
        nodes: a.nodes,
        ntasks: a.ntasks,
        ntasks_per_node: a.ntasks_per_node,
        cpus_per_task: a.cpus_per_task,
        name: a
            .command
            .first()
            .map(|c| c.rsplit('/').next().unwrap_or(c).to_string())
            .unwrap_or_default(),
        argv: a.command.clone(),
        env: std::env::vars().collect(),
        cwd,
        io_addr,
        io_token: token,
        stdout: a.output.clone(),
        stderr: a.error.clone(),
    };
    let launched = match c.call(Body::LaunchStep(Box::new(req))).await {
        Ok(Body::StepLaunched(l)) => l,
        Ok(other) => return Err(CliError::Unexpected(other.kind())),
        Err(CliError::Refused(e)) => {
            eprintln!("srun: error: {}", e.message);
            if own_allocation {
                release(
                    &mut c,
                    job_id,
                    0,
                    ExitStatus { code: 1, signal: 0 },
                    start_time,
                )
                .await;
            }
            return Ok(1);
        }
        Err(e) => return Err(e),
    };
    let exit = collect(listener, &launched, token, a.label, &mut c).await;
    let done = StepComplete {
        job_id,
        step_id: launched.step_id,
        exit: exit.worst,
        start_time,
        release: own_allocation,
    };
    let _ = c.call(Body::StepComplete(done)).await;
    Ok(exit.code)
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

enum Event {
    Hello { node: String, tasks: Vec<u32> },
    Output(TaskOutput),
    Exit { task: u32, status: ExitStatus },
    Closed,
}

/// True once the controller no longer runs `job_id` (or cannot say so).
async fn job_ended(c: &mut Client, job_id: u32) -> bool {
    let q = Body::QueryJobs(JobQuery {
        job_ids: vec![job_id],
        include_finished: true,
        brief: false,
    });
    match c.call(q).await {
        Ok(Body::Jobs(j)) => j
            .into_rows()
            .first()
            .is_none_or(|j| j.state.is_finished() || j.state == JobState::Completing),
        _ => false,
    }
}

struct StepExit {
    /// srun's own exit code: the highest task exit code (128+signal if killed).
    code: i32,
    /// The task status recorded for accounting.
    worst: ExitStatus,
}

/// Print task output as it arrives and gather every task's exit.
async fn collect(
    listener: TcpListener,
    l: &StepLaunched,
    token: u64,
    label: bool,
    ctl: &mut Client,
) -> StepExit {
    let ntasks: u32 = l.tasks_per_node.iter().sum();
    let width = ntasks.saturating_sub(1).to_string().len();
    let (tx, mut rx) = mpsc::channel::<Event>(1024);
    let auth =
        match Client::connect_config(None).and_then(|c| Ok(crate::daemon::authenticator(&c)?)) {
            Ok(a) => a,
            Err(e) => {
                eprintln!("srun: error: {e}");
                return StepExit {
                    code: 1,
                    worst: ExitStatus { code: 1, signal: 0 },
                };
            }
        };
    let (job_id, step_id) = (l.job_id, l.step_id);
    let accept = tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let mut conn = Connection::new(stream, auth.clone(), 0);
            let tx = tx.clone();
            tokio::spawn(async move {
                // The first frame must name this step and carry its token.
                let ok = matches!(conn.recv().await, Ok(Some(env))
                    if matches!(&env.body, Body::StepIoHello(h)
                        if h.token == token && h.job_id == job_id && h.step_id == step_id
                            && tx.send(Event::Hello { node: h.node.clone(), tasks: h.tasks.clone() }).await.is_ok()));
                if !ok {
                    return;
                }
                while let Ok(Some(env)) = conn.recv().await {
                    let ev = match env.body {
                        Body::TaskOutput(o) => Event::Output(o),
                        Body::TaskExit { task, status } => Event::Exit { task, status },
                        _ => continue,
                    };
                    if tx.send(ev).await.is_err() {
                        return;
                    }
                }
                let _ = tx.send(Event::Closed).await;
            });
        }
    });
    let mut node_of: HashMap<u32, String> = HashMap::new();
    let mut partial: HashMap<(u32, bool), Vec<u8>> = HashMap::new();
    let mut exits: HashMap<u32, ExitStatus> = HashMap::new();
    let (mut links, mut closed) = (0usize, 0usize);
    let nodes = l.tasks_per_node.len();
    let write = |stderr: bool, bytes: &[u8]| {
        if stderr {
            let _ = std::io::stderr().write_all(bytes);
        } else {
            let mut o = std::io::stdout();
            let _ = o.write_all(bytes);
            let _ = o.flush();
        }
    };
    // A node that cannot reach us (or dies) would leave us waiting forever:
    // check now and then that the job itself is still running.
    let mut check = tokio::time::interval(Duration::from_secs(5));
    check.tick().await;
    while exits.len() < ntasks as usize {
        // Every node reported and all links are gone: nothing more can come.
        if links == nodes && closed == nodes {
            break;
        }
        let ev = tokio::select! {
            ev = rx.recv() => ev,
            _ = check.tick() => {
                if job_ended(ctl, l.job_id).await {
                    eprintln!("srun: error: job {} ended before every task reported", l.job_id);
                    break;
                }
                continue;
            }
        };
        let Some(ev) = ev else { break };
        match ev {
            Event::Hello { node, tasks } => {
                links += 1;
                for t in tasks {
                    node_of.insert(t, node.clone());
                }
            }
            Event::Closed => closed += 1,
            Event::Output(o) if label => {
                // -l: prefix every complete line with the task rank.
                let buf = partial.entry((o.task, o.stderr)).or_default();
                buf.extend_from_slice(&o.data);
                while let Some(nl) = buf.iter().position(|&b| b == b'\n') {
                    let line: Vec<u8> = buf.drain(..=nl).collect();
                    let mut out = format!("{:>width$}: ", o.task).into_bytes();
                    out.extend_from_slice(&line);
                    write(o.stderr, &out);
                }
            }
            Event::Output(o) => write(o.stderr, &o.data),
            Event::Exit { task, status } => {
                exits.insert(task, status);
            }
        }
    }
    accept.abort();
    for ((task, stderr), rest) in partial {
        if !rest.is_empty() {
            let mut out = format!("{task:>width$}: ").into_bytes();
            out.extend_from_slice(&rest);
            write(stderr, &out);
        }
    }
    let mut code = 0;
    let mut worst = ExitStatus::default();
    let mut tasks: Vec<_> = exits.iter().collect();
    tasks.sort_by_key(|(t, _)| **t);
    for (task, s) in tasks {
        let node = node_of.get(task).map(String::as_str).unwrap_or("?");
        let c = if s.signal != 0 {
            128 + s.signal
        } else {
            s.code
        };
        if s.signal != 0 {
            eprintln!(
                "srun: error: {node}: task {task}: {}",
                crate::actors::step::signal_name(s.signal)
            );
        } else if s.code != 0 {
            eprintln!(
                "srun: error: {node}: task {task}: Exited with exit code {}",
                s.code
            );
        }
        if c > code {
            code = c;
            worst = *s;
        }
    }
    if exits.len() < ntasks as usize {
        eprintln!(
            "srun: error: {} of {ntasks} tasks did not report an exit status",
            ntasks as usize - exits.len()
        );
        code = code.max(1);
        worst = ExitStatus { code: 1, signal: 0 };
    }
    StepExit { code, worst }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(args: &[&str]) -> Result<SrunArgs, String> {
        parse(&args.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn options_end_at_the_command() {
        let a = p(&[
            "-n4",
            "-N",
            "2",
            "--label",
            "-c2",
            "--mpi=none",
            "hostname",
            "-n",
            "x",
        ])
        .unwrap();
        assert_eq!(
            (a.ntasks, a.nodes, a.cpus_per_task, a.label),
            (Some(4), Some(2), Some(2), true)
        );
        assert_eq!(a.command, vec!["hostname", "-n", "x"]);
        assert!(a.warnings.is_empty());
    }

    #[test]
    fn submitit_invocation_parses() {
        let a = p(&[
            "--unbuffered",
            "--output",
            "/l/%j_%t_log.out",
            "--error",
            "/l/%j_%t_log.err",
            "python",
            "-u",
            "-m",
            "submitit.core._submit",
            "/l",
        ])
        .unwrap();
        assert_eq!(a.output.as_deref(), Some("/l/%j_%t_log.out"));
        assert_eq!(a.error.as_deref(), Some("/l/%j_%t_log.err"));
        assert_eq!(a.command[0], "python");
    }

    #[test]
    fn bad_input_is_refused_with_slurm_messages() {
        assert!(p(&["--bogus", "x"])
            .unwrap_err()
            .contains("unrecognized option '--bogus'"));
        assert!(p(&["-n", "x", "true"])
            .unwrap_err()
            .contains("Invalid numeric value"));
        assert!(p(&["-n"]).unwrap_err().contains("requires an argument"));
        assert!(p(&["-l"]).unwrap_err().contains("No command given"));
        let a = p(&["--gres=gpu:1", "true"]).unwrap();
        assert_eq!(a.warnings.len(), 1);
    }

    #[test]
    fn layout_blocks_tasks_over_nodes() {
        use crate::actors::controller::step_layout;
        assert_eq!(step_layout(5, 2), vec![3, 2]);
        assert_eq!(step_layout(2, 4), vec![1, 1]);
        assert_eq!(step_layout(4, 4), vec![1, 1, 1, 1]);
    }
}
