//! `scontrol show job|node|partition` records and the `scontrol ping` line,
//! laid out as Slurm prints them: `Key=Value` tokens in Slurm's order, a
//! new line every few keys (indented three spaces), a blank line after each
//! record, or one line per record with `-o`.
//!
//! Pure: the caller passes the record and `now`. Fetching records and the
//! `show config`/`hostnames` subcommands are not here. Keys canopy has no
//! data for print what a default-configured Slurm (no accounting, no
//! reservations, no power management) prints for them.

use super::squeue::{node_count, used_secs};
use super::time::{fmt_duration_long, fmt_limit_min, fmt_timestamp, LimitStyle};
use super::{fmt_mem_mb, gres_tres, group_name, job_tres, or_null};
use crate::model::part_opts::mem_per_text;
use crate::wire::types::{
    AcctJob, AcctStep, Exclusive, JobInfo, NodeInfo, PartitionInfo, StepKind,
};

/// Slurm's default `SlurmdPort`; `Port=` is only shown for other ports.
const DEFAULT_SLURMD_PORT: u16 = 6818;

/// Collects one record's lines and joins them the way scontrol does.
struct Record {
    lines: Vec<String>,
    one_liner: bool,
}

impl Record {
    fn new(one_liner: bool) -> Self {
        Self {
            lines: Vec::new(),
            one_liner,
        }
    }

    fn line(&mut self, text: impl Into<String>) {
        self.lines.push(text.into());
    }

    /// Continuation lines start with three spaces; a record ends with a
    /// blank line, or with just a newline in one-line mode.
    fn finish(self) -> String {
        let (sep, end) = if self.one_liner {
            (" ", "\n")
        } else {
            ("\n   ", "\n\n")
        };
        let mut out = self.lines.join(sep);
        out.push_str(end);
        out
    }
}

/// `scontrol show job` for one job.
pub fn show_job(j: &JobInfo, now: i64, one_liner: bool) -> String {
    show_job_with(j, now, one_liner, false)
}

/// `scontrol [-d] show job`: `details` adds the per-node CPU ids, memory
/// and GRES.
pub fn show_job_with(j: &JobInfo, now: i64, one_liner: bool, details: bool) -> String {
    let mut r = Record::new(one_liner);
    let group = group_name(j.gid).unwrap_or_else(|| "nobody".to_string());
    let started = j.start_time.is_some();
    let nodes = node_count(j);
    match &j.array {
        Some(a) => r.line(format!(
            "JobId={} ArrayJobId={} ArrayTaskId={} ArrayTaskThrottle={} JobName={}",
            j.job_id,
            a.array_job_id,
            a.task_id,
            a.throttle.unwrap_or(0),
            j.name
        )),
        None => r.line(format!("JobId={} JobName={}", j.job_id, j.name)),
    }
    r.line(format!(
        "UserId={}({}) GroupId={group}({}) MCS_label=N/A",
        j.user, j.uid, j.gid
    ));
    r.line(format!(
        "Priority={} Nice={} Account={} QOS={}",
        j.priority,
        j.nice,
        or_null(&j.account),
        or_null(&j.qos)
    ));
    r.line(format!(
        "JobState={} Reason={} Dependency={}",
        j.state.name(),
        underscore_spaces(&j.reason),
        or_null(&j.dependency)
    ));
    r.line(format!(
        "Requeue={} Restarts={} BatchFlag=1 Reboot=0 ExitCode={}",
        u8::from(!j.no_requeue),
        j.restarts,
        exit_code(j.exit_code)
    ));
    r.line(format!(
        "RunTime={} TimeLimit={} TimeMin=N/A",
        fmt_duration_long(used_secs(j, now)),
        fmt_limit_min(j.time_limit_min, LimitStyle::Scontrol)
    ));
    r.line(format!(
        "SubmitTime={} EligibleTime={}",
        fmt_timestamp(Some(j.submit_time)),
        fmt_timestamp(j.eligible_time)
    ));
    // Without accrual limits Slurm starts accruing age when the job becomes
    // eligible, so the two times coincide.
    r.line(format!("AccrueTime={}", fmt_timestamp(j.eligible_time)));
    r.line(format!(
        "StartTime={} EndTime={} Deadline=N/A",
        fmt_timestamp(j.start_time.or(j.sched_start)),
        end_time(j, now)
    ));
    // The scheduler last looked at the job when it started it (or, for a job
    // that never started, when it was submitted).
    r.line(format!(
        "SuspendTime={} SecsPreSuspend={} LastSchedEval={} Scheduler=Main",
        j.suspend_time
            .map_or_else(|| "None".to_string(), |t| fmt_timestamp(Some(t))),
        j.secs_pre_suspend,
        fmt_timestamp(j.start_time.or(Some(j.submit_time)))
    ));
    r.line(format!("Partition={} AllocNode:Sid=(null):0", j.partition));
    if !j.reservation.is_empty() {
        r.line(format!("Reservation={}", j.reservation));
    }
    r.line(format!(
        "ReqNodeList={} ExcNodeList={}",
        or_null(&j.req_node_list),
        or_null(&j.exc_node_list)
    ));
    if j.sched_nodes.is_empty() {
        r.line(format!("NodeList={}", j.nodes));
    } else {
        // Backfill's planned nodes for a pending job, on the same line.
        r.line(format!(
            "NodeList={} SchedNodeList={}",
            j.nodes, j.sched_nodes
        ));
    }
    if let Some(host) = &j.batch_host {
        r.line(format!("BatchHost={host}"));
    }
    r.line(format!(
        "NumNodes={nodes} NumCPUs={} NumTasks={} CPUs/Task={} ReqB:S:C:T=0:0:*:*",
        j.num_cpus, j.num_tasks, j.cpus_per_task
    ));
    r.line(format!("ReqTRES={}", job_tres(j, &j.req_gres)));
    r.line(format!(
        "AllocTRES={}",
        if started {
            job_tres(j, &j.alloc_gres)
        } else {
            "(null)".into()
        }
    ));
    r.line("Socks/Node=* NtasksPerN:B:S:C=0:0:*:* CoreSpec=*");
    if details && started {
        let gres: Vec<String> = j
            .alloc_gres
            .iter()
            .map(|(name, n)| format!("{name}:{n}"))
            .collect();
        r.line(format!(
            "JOB_GRES={}",
            if gres.is_empty() {
                "(null)".to_string()
            } else {
                gres.join(",")
            }
        ));
        for d in &j.node_detail {
            // Slurm indents these two more than the other lines.
            r.line(format!(
                "  Nodes={} CPU_IDs={} Mem={} GRES={}",
                d.nodes, d.cpu_ids, d.mem_mb, d.gres
            ));
        }
    }
    r.line(format!(
        "MinCPUsNode={} {} MinTmpDiskNode=0",
        j.cpus_per_task,
        match j.mem_per_cpu_mb {
            Some(mb) => format!("MinMemoryCPU={}", fmt_mem_mb(mb)),
            None => format!("MinMemoryNode={}", fmt_mem_mb(j.mem_per_node_mb)),
        }
    ));
    r.line(format!(
        "Features={} DelayBoot=00:00:00",
        or_null(&j.features)
    ));
    r.line(format!(
        "OverSubscribe={} Exclusive={} Contiguous=0 Licenses={} LicensesAlloc={} Network=(null)",
        crate::cli::format::squeue::over_subscribe(j),
        Exclusive::exclusive(j.exclusive),
        or_null(&j.licenses),
        // Held while it runs.
        if j.state == crate::wire::types::JobState::Running {
            or_null(&j.licenses)
        } else {
            "(null)"
        },
    ));
    r.line(format!("Command={}", j.command));
    r.line(format!("SubmitLine={}", j.submit_line));
    r.line(format!("WorkDir={}", j.workdir));
    if !j.comment.is_empty() {
        // Slurm leaves a blank after the comment.
        r.line(format!("Comment={} ", j.comment));
    }
    r.line(format!("StdErr={}", j.stderr));
    r.line(format!("StdIn={}", j.stdin));
    r.line(format!("StdOut={}", j.stdout));
    if !j.tres_per_node.is_empty() {
        r.line(format!("TresPerNode={}", j.tres_per_node));
    }
    r.finish()
}

/// scontrol replaces white space in reasons so each token stays one word.
fn underscore_spaces(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_whitespace() { '_' } else { c })
        .collect()
}

/// `code:signal`, as Slurm derives it from the wait status: a job killed by a
/// signal shows exit code 0.
fn exit_code((code, signal): (i32, i32)) -> String {
    let signal = signal & 0x7f;
    if signal != 0 {
        format!("0:{signal}")
    } else {
        format!("{}:0", code & 0xff)
    }
}

/// A running job with no limit has no meaningful end yet: `Unknown`.
fn end_time(j: &JobInfo, now: i64) -> String {
    // A planned start ends a time limit later (Slurm's estimate too).
    if let (None, Some(start), Some(limit)) = (j.start_time, j.sched_start, j.time_limit_min) {
        return fmt_timestamp(Some(start + i64::from(limit) * 60));
    }
    match j.end_time {
        Some(end) if j.time_limit_min.is_none() && end > now => "Unknown".to_string(),
        end => fmt_timestamp(end),
    }
}

/// `scontrol show node` for one node. Nothing in a node record is relative
/// to the present, so `now` goes unused; it keeps the `show_*` calls alike.
pub fn show_node(n: &NodeInfo, now: i64, one_liner: bool) -> String {
    show_node_with(n, now, one_liner, false)
}

/// `scontrol [-d] show node`: `details` adds `GresDrain=` and `GresUsed=`.
pub fn show_node_with(n: &NodeInfo, _now: i64, one_liner: bool, details: bool) -> String {
    let mut r = Record::new(one_liner);
    let features = if n.features.is_empty() {
        "(null)".to_string()
    } else {
        n.features.join(",")
    };
    // N.B. Slurm leaves a trailing space on the first and `Partitions=` lines.
    r.line(format!(
        "NodeName={} CoresPerSocket={} ",
        n.name, n.cores_per_socket
    ));
    r.line(format!(
        "CPUAlloc={} CPUEfctv={} CPUTot={} CPULoad=N/A",
        n.alloc_cpus, n.cpus, n.cpus
    ));
    r.line(format!("AvailableFeatures={features}"));
    r.line(format!("ActiveFeatures={features}"));
    r.line(format!("Gres={}", or_null(&n.gres)));
    if details && !n.gres.is_empty() {
        r.line("GresDrain=N/A");
        r.line(format!("GresUsed={}", n.gres_used));
    }
    let mut addr = format!("NodeAddr={} NodeHostName={}", n.addr, n.hostname);
    if n.port != DEFAULT_SLURMD_PORT {
        addr.push_str(&format!(" Port={}", n.port));
    }
    if !n.version.is_empty() {
        addr.push_str(&format!(" Version={}", n.version));
    }
    r.line(addr);
    r.line(format!(
        "RealMemory={} AllocMem={} FreeMem=N/A Sockets={} Boards={}",
        n.real_memory_mb, n.alloc_mem_mb, n.sockets, n.boards
    ));
    // Slurm's specialization line, only when the node sets one: what the file says,
    // though canopy sets nothing aside (the summary of ignored settings names that).
    let spec: Vec<String> = ["CoreSpecCount", "CPUSpecList", "MemSpecLimit"]
        .iter()
        .filter_map(|k| {
            let (_, v) = n
                .ignored_attrs
                .iter()
                .find(|(a, _)| a.eq_ignore_ascii_case(k))?;
            Some(format!("{k}={v}"))
        })
        .collect();
    if !spec.is_empty() {
        r.line(spec.join(" "));
    }
    r.line(format!(
        "State={} ThreadsPerCore={} TmpDisk={} Weight={} Owner=N/A MCS_label=N/A",
        n.scontrol_state(),
        n.threads_per_core,
        n.tmp_disk_mb,
        n.weight
    ));
    if !n.partitions.is_empty() {
        r.line(format!("Partitions={} ", n.partitions.join(",")));
    }
    r.line(format!(
        "BootTime={} SlurmdStartTime={}",
        time_or_none(n.boot_time),
        time_or_none(n.slurmd_start_time)
    ));
    r.line(format!(
        "LastBusyTime={} ResumeAfterTime=None",
        fmt_timestamp(n.last_busy)
    ));
    r.line(format!(
        "CfgTRES=cpu={},mem={},billing={}{}",
        n.cpus,
        fmt_mem_mb(n.real_memory_mb),
        n.cpus,
        gres_tres(&n.cfg_gres)
    ));
    r.line(format!("AllocTRES={}", node_alloc_tres(n)));
    r.line("CurrentWatts=0 AveWatts=0");
    if let Some(reason) = n.reason.as_deref().filter(|s| !s.is_empty()) {
        r.line(match n.reason_time {
            Some(t) => format!(
                "Reason={reason} [{}@{}]",
                n.reason_user.as_deref().unwrap_or("(null)"),
                fmt_timestamp(Some(t))
            ),
            None => format!("Reason={reason}"),
        });
    }
    r.finish()
}

/// Boot times the node never reported print `None`.
fn time_or_none(t: Option<i64>) -> String {
    t.map_or_else(|| "None".to_string(), |t| fmt_timestamp(Some(t)))
}

/// What is allocated on the node right now; empty when nothing is.
fn node_alloc_tres(n: &NodeInfo) -> String {
    let mut parts = Vec::new();
    if n.alloc_cpus > 0 {
        parts.push(format!("cpu={}", n.alloc_cpus));
    }
    if n.alloc_mem_mb > 0 {
        parts.push(format!("mem={}", fmt_mem_mb(n.alloc_mem_mb)));
    }
    parts.extend(n.alloc_gres.iter().map(|(g, c)| format!("gres/{g}={c}")));
    parts.join(",")
}

/// `scontrol show partition` for one partition.
/// One running step, as `scontrol show step` prints it. The batch step
/// has no CPUs or TRES of its own there; srun steps carry the job's
/// memory per node on their nodes. Steps have no time limit of their own.
pub fn show_step(job: &AcctJob, step: &AcctStep, one_liner: bool) -> String {
    let mut r = Record::new(one_liner);
    let id = match step.kind {
        StepKind::Batch => "batch".to_string(),
        StepKind::Extern => "extern".to_string(),
        StepKind::Numbered(n) => n.to_string(),
    };
    let numbered = matches!(step.kind, StepKind::Numbered(_));
    r.line(format!(
        "StepId={}.{id} UserId={} StartTime={} TimeLimit=UNLIMITED",
        job.job_id,
        job.uid,
        fmt_timestamp(step.start_time)
    ));
    r.line(format!(
        "State={} Partition={} NodeList={}",
        step.state.name(),
        job.partition,
        step.nodes
    ));
    let cpus = if numbered { step.alloc_cpus } else { 0 };
    r.line(format!(
        "Nodes={} CPUs={cpus} Tasks={} Name={} Network=(null)",
        step.num_nodes, step.num_tasks, step.name
    ));
    let tres = if numbered {
        let mem = match (job.req_mem_mb, job.mem_per_cpu) {
            (0, _) => 0,
            (m, true) => m * u64::from(step.alloc_cpus),
            (m, false) => m * u64::from(step.num_nodes),
        };
        let mem = if mem > 0 {
            format!(",mem={}", fmt_mem_mb(mem))
        } else {
            String::new()
        };
        format!("cpu={cpus}{mem},node={}", step.num_nodes)
    } else {
        "(null)".to_string()
    };
    r.line(format!("TRES={tres}"));
    r.line("ResvPorts=(null)");
    r.line(if numbered {
        "CPUFreqReq=Default Dist=Block"
    } else {
        "CPUFreqReq=Default"
    });
    if step.srun_host.is_empty() {
        r.line("SrunHost:Pid=(null):0");
    } else {
        r.line(format!("SrunHost:Pid={}:{}", step.srun_host, step.srun_pid));
    }
    r.finish()
}

pub fn show_partition(p: &PartitionInfo, one_liner: bool) -> String {
    let mut r = Record::new(one_liner);
    let yes_no = |b: bool| if b { "YES" } else { "NO" };
    r.line(format!("PartitionName={}", p.name));
    // A partition lists its allowed accounts (QOS), else its denied ones.
    let a = &p.access;
    let access = |allow: &Option<Vec<String>>, deny: &[String], what: &str| match (allow, deny) {
        (Some(v), _) => format!("Allow{what}={}", v.join(",")),
        (None, d) if !d.is_empty() => format!("Deny{what}={}", d.join(",")),
        _ => format!("Allow{what}=ALL"),
    };
    let o = &p.opts;
    r.line(format!(
        "AllowGroups={} {} {}",
        o.allow_groups
            .as_ref()
            .map_or_else(|| "ALL".to_string(), |g| g.join(",")),
        access(&a.allow_accounts, &a.deny_accounts, "Accounts"),
        access(&a.allow_qos, &a.deny_qos, "Qos")
    ));
    // slurmctld prints `Alternate=` only when one is set.
    r.line(format!(
        "AllocNodes=ALL{} Default={} QoS={}",
        o.alternate
            .as_ref()
            .map_or_else(String::new, |alt| format!(" Alternate={alt}")),
        yes_no(p.default),
        a.qos.as_deref().unwrap_or("N/A")
    ));
    r.line(format!(
        "DefaultTime={} DisableRootJobs=NO ExclusiveUser={} GraceTime={} Hidden={}",
        p.default_time_min.map_or_else(
            || "NONE".to_string(),
            |m| fmt_limit_min(Some(m), LimitStyle::Scontrol)
        ),
        yes_no(o.exclusive_user),
        p.preempt.grace_s,
        yes_no(o.hidden)
    ));
    r.line(format!(
        "MaxNodes={} MaxTime={} MinNodes={} LLN={} MaxCPUsPerNode={}",
        p.max_nodes
            .map_or_else(|| "UNLIMITED".to_string(), |n| n.to_string()),
        fmt_limit_min(p.max_time_min, LimitStyle::Scontrol),
        p.min_nodes,
        yes_no(o.lln),
        o.max_cpus_per_node
            .map_or_else(|| "UNLIMITED".to_string(), |n| n.to_string())
    ));
    r.line(format!("Nodes={}", or_null(&p.nodes)));
    r.line(format!(
        "PriorityJobFactor={} PriorityTier={} RootOnly={} ReqResv={} OverSubscribe={}",
        p.priority_job_factor,
        p.priority_tier,
        yes_no(o.root_only),
        yes_no(o.req_resv),
        o.oversubscribe.name()
    ));
    r.line(format!("OverTimeLimit=NONE PreemptMode={}", p.preempt_mode));
    r.line(format!(
        "State={} TotalCPUs={} TotalNodes={} SelectTypeParameters=NONE",
        p.state.name(),
        p.total_cpus,
        p.total_nodes
    ));
    // The partition's own values, as slurmctld prints them (the global
    // ones apply to jobs where these are unset, but are shown by
    // `scontrol show config`).
    r.line(format!("JobDefaults={}", o.mem.job_defaults_text()));
    r.line(format!(
        "{} {}",
        mem_per_text("Def", o.mem.def_mem),
        mem_per_text("Max", o.mem.max_mem)
    ));
    r.line(if p.total_nodes == 0 {
        "TRES=(null)".to_string()
    } else {
        let mem = match p.total_mem_mb {
            0 => String::new(),
            mb => format!("mem={},", fmt_mem_mb(mb)),
        };
        format!(
            "TRES=cpu={},{mem}node={},billing={}",
            p.total_cpus, p.total_nodes, p.total_cpus
        )
    });
    r.finish()
}

/// One `scontrol ping` line for the primary controller.
/// `scontrol show config`: the date line, then `Key<pad to 23> = value`
/// for the settings canopy honours and every other key the file sets (as
/// written, whether canopy acts on it or not), in Slurm's alphabetical order.
/// The values are what the config file says.
pub fn show_config(conf: &crate::config::Config, now: i64) -> String {
    let secs = |s: u64| format!("{s} sec");
    let ctld_host = if conf.control_addr.is_empty() || conf.control_addr == conf.control_host {
        conf.control_host.clone()
    } else {
        format!("{}({})", conf.control_host, conf.control_addr)
    };
    let mut rows: Vec<(&str, String)> = vec![
        // What the file says, though canopy signs with its own signer whatever it says
        // (the summary of ignored settings names that); canopy's own name when unset.
        (
            "AuthType",
            configured(conf, "AuthType").unwrap_or_else(|| "auth/canopy-hmac".into()),
        ),
        ("ClusterName", conf.cluster_name.clone()),
        config_mem("Def", conf.mem.def_mem),
        ("FirstJobId", conf.first_job_id.to_string()),
        (
            "GresTypes",
            super::or_null(&conf.gres_types.join(",")).into(),
        ),
        ("KillWait", secs(u64::from(conf.kill_wait_s))),
        ("Licenses", super::or_null(&conf.licenses.join(",")).into()),
        (
            "MailDomain",
            super::or_null(conf.mail_domain.as_deref().unwrap_or_default()).into(),
        ),
        ("MailProg", conf.mail_prog.display().to_string()),
        ("MaxArraySize", conf.max_array_size.to_string()),
        ("MaxJobCount", conf.max_job_count.to_string()),
        ("MaxJobId", conf.max_job_id.to_string()),
        config_mem("Max", conf.mem.max_mem),
        ("MessageTimeout", secs(u64::from(conf.message_timeout_s))),
        ("MinJobAge", secs(conf.min_job_age_s)),
        ("PreemptExemptTime", {
            let s = conf
                .preempt
                .exempt_time_s
                .unwrap_or(0)
                .min(99 * 3600 + 3599);
            format!("{:02}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
        }),
        ("PreemptMode", conf.preempt.mode.name()),
        ("PreemptType", conf.preempt.kind.name().into()),
        ("ReturnToService", conf.return_to_service.to_string()),
        ("SLURM_CONF", conf.path.display().to_string()),
        ("SLURM_VERSION", env!("CARGO_PKG_VERSION").to_string()),
        (
            "SchedulerType",
            if conf.sched.backfill {
                "sched/backfill"
            } else {
                "sched/builtin"
            }
            .into(),
        ),
        ("SlurmctldHost[0]", ctld_host),
        // A range as written (canopy listens on its first port).
        (
            "SlurmctldPort",
            configured(conf, "SlurmctldPort").unwrap_or_else(|| conf.slurmctld_port.to_string()),
        ),
        ("SlurmdPort", conf.slurmd_port.to_string()),
        ("SlurmdSpoolDir", conf.slurmd_spool_dir.clone()),
        ("SlurmdTimeout", secs(conf.slurmd_timeout_s)),
        (
            "StateSaveLocation",
            conf.state_save_location.display().to_string(),
        ),
        ("TreeWidth", conf.tree_width.to_string()),
    ];
    for (i, (host, addr)) in conf.backup_controllers.iter().enumerate() {
        let name = ["SlurmctldHost[1]", "SlurmctldHost[2]", "SlurmctldHost[3]"]
            .get(i)
            .copied()
            .unwrap_or("SlurmctldHost[n]");
        let value = if addr == host {
            host.clone()
        } else {
            format!("{host}({addr})")
        };
        rows.push((name, value));
    }
    // Every other key the file sets, as written: canopy prints no default in place of a
    // value it was given, whether it acts on the key or not.
    for (key, value) in &conf.settings {
        let shown = rows
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case(key) || k.starts_with(&format!("{key}[")));
        if shown || SHOWN_ELSEWHERE.iter().any(|k| k.eq_ignore_ascii_case(key)) {
            continue;
        }
        // The priority block below prints its keys as Slurm does.
        if key.to_ascii_lowercase().starts_with("priority") {
            continue;
        }
        rows.push((key.as_str(), config_value(key, value)));
    }
    rows.sort_by_key(|(k, _)| k.to_ascii_lowercase());
    // The priority block sits where Slurm prints it, in its own order.
    let at = rows
        .iter()
        .position(|(k, _)| k.to_ascii_lowercase().as_str() > "priority")
        .unwrap_or(rows.len());
    rows.splice(at..at, priority_rows(conf));
    let mut out = format!(
        "Configuration data as of {}\n",
        super::time::fmt_timestamp(Some(now))
    );
    for (k, v) in rows {
        out.push_str(&format!("{k:<23} = {v}\n"));
    }
    out
}

/// Keys printed under another name: the old spellings of SlurmctldHost.
const SHOWN_ELSEWHERE: &[&str] = &[
    "ControlMachine",
    "ControlAddr",
    "BackupController",
    "BackupAddr",
];

/// The value the file gives `key`, if it sets it.
fn configured(conf: &crate::config::Config, key: &str) -> Option<String> {
    conf.settings
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(key))
        .map(|(_, v)| v.clone())
}

/// A configured value as `scontrol show config` prints it: empty as `(null)`, plain
/// seconds of Slurm's timers with their unit.
fn config_value(key: &str, value: &str) -> String {
    const SECONDS: &[&str] = &[
        "BatchStartTimeout",
        "CompleteWait",
        "GetEnvTimeout",
        "HealthCheckInterval",
        "InactiveLimit",
        "ResumeTimeout",
        "SlurmctldTimeout",
        "SuspendTime",
        "SuspendTimeout",
        "TCPTimeout",
        "UnkillableStepTimeout",
        "WaitTime",
    ];
    if value.is_empty() {
        return "(null)".into();
    }
    let plain_number = value.bytes().all(|b| b.is_ascii_digit());
    if plain_number && SECONDS.iter().any(|k| k.eq_ignore_ascii_case(key)) {
        return format!("{value} sec");
    }
    value.to_string()
}

/// `DefMemPerCPU = 100` / `MaxMemPerNode = UNLIMITED` as `show config`
/// prints them (one of each pair).
fn config_mem(
    prefix: &'static str,
    m: Option<crate::model::part_opts::MemPer>,
) -> (&'static str, String) {
    use crate::model::part_opts::MemPer;
    let key = |per_cpu: bool| match (prefix, per_cpu) {
        ("Def", true) => "DefMemPerCPU",
        ("Def", false) => "DefMemPerNode",
        (_, true) => "MaxMemPerCPU",
        (_, false) => "MaxMemPerNode",
    };
    match m {
        Some(MemPer::Cpu(mb)) => (key(true), mb.to_string()),
        Some(MemPer::Node(mb)) => (key(false), mb.to_string()),
        None => (key(false), "UNLIMITED".into()),
    }
}

/// `scontrol show config`'s priority lines, as Slurm 22.05 prints them:
/// the multifactor settings only under priority/multifactor.
fn priority_rows(conf: &crate::config::Config) -> Vec<(&'static str, String)> {
    let p = &conf.priority;
    // `7-00:00:00`, or `00:05:00` under a day.
    let span = |s: u64| {
        let (d, h, m, s) = (s / 86_400, s / 3600 % 24, s / 60 % 60, s % 60);
        if d > 0 {
            format!("{d}-{h:02}:{m:02}:{s:02}")
        } else {
            format!("{h:02}:{m:02}:{s:02}")
        }
    };
    let mut rows = vec![
        ("PriorityParameters", "(null)".to_string()),
        ("PrioritySiteFactorParameters", "(null)".into()),
        ("PrioritySiteFactorPlugin", "(null)".into()),
    ];
    if conf.priority_type != "priority/multifactor" {
        rows.push(("PriorityType", conf.priority_type.clone()));
        return rows;
    }
    let tres = p
        .weight_tres
        .iter()
        .map(|(n, w)| format!("{n}={w}"))
        .collect::<Vec<_>>()
        .join(",");
    rows.extend([
        ("PriorityDecayHalfLife", span(p.decay_half_life_s)),
        ("PriorityCalcPeriod", span(p.calc_period_s)),
        (
            "PriorityFavorSmall",
            if p.favor_small { "Yes" } else { "No" }.into(),
        ),
        ("PriorityFlags", p.flags.text()),
        ("PriorityMaxAge", span(p.max_age_s)),
        ("PriorityUsageResetPeriod", p.usage_reset.name().into()),
        ("PriorityType", conf.priority_type.clone()),
        ("PriorityWeightAge", p.weight_age.to_string()),
        ("PriorityWeightAssoc", p.weight_assoc.to_string()),
        ("PriorityWeightFairShare", p.weight_fairshare.to_string()),
        ("PriorityWeightJobSize", p.weight_job_size.to_string()),
        ("PriorityWeightPartition", p.weight_partition.to_string()),
        ("PriorityWeightQOS", p.weight_qos.to_string()),
        ("PriorityWeightTRES", super::or_null(&tres).into()),
    ]);
    rows
}

pub fn ping_line(host: &str, up: bool) -> String {
    format!(
        "Slurmctld(primary) at {host} is {}",
        if up { "UP" } else { "DOWN" }
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::format::squeue::tests::{job, sample_jobs, T0};
    use crate::wire::types::{JobState, NodeBaseState, PartitionState};

    /// The priority lines of the golden capture's `scontrol show config`
    /// (tests/golden/INDEX.md), byte for byte.
    #[test]
    fn show_config_prints_slurms_priority_block() {
        let text = "ClusterName=t\nSlurmctldHost=c(127.0.0.1)\nNodeName=n1 CPUs=2\n\
                    PartitionName=p Nodes=n1\nPriorityType=priority/multifactor\n\
                    PriorityWeightAge=1000\nPriorityWeightJobSize=100\nPriorityWeightPartition=1000\n";
        let conf =
            crate::config::Config::parse_str(text, std::path::Path::new("/x/slurm.conf")).unwrap();
        let out = show_config(&conf, 0);
        let prio: Vec<&str> = out
            .lines()
            .filter(|l| l.to_ascii_lowercase().contains("priority"))
            .collect();
        let golden = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/golden/INDEX.md"
        ))
        .unwrap();
        let start = golden.find("PriorityParameters      = (null)").unwrap();
        let block: Vec<&str> = golden[start..]
            .lines()
            .take_while(|l| !l.starts_with("```"))
            .collect();
        assert_eq!(prio, block);
    }

    /// Keys canopy ignores print what the file says, never a default; so do keys it
    /// reads but has no row of its own for, and backup controllers.
    #[test]
    fn show_config_prints_configured_values_of_every_key() {
        let text = "ClusterName=t\nSlurmctldHost=c(127.0.0.1)\nSlurmctldHost=d\n\
                    AuthType=auth/munge\nSuspendTime=600\nSwitchType=switch/none\n\
                    SlurmctldPort=6820-6829\n\
                    SlurmUser=slurm\nLaunchParameters=\nNodeName=n1 CPUs=2\n\
                    PartitionName=p Nodes=n1\n";
        let conf =
            crate::config::Config::parse_str(text, std::path::Path::new("/x/slurm.conf")).unwrap();
        let out = show_config(&conf, 0);
        for line in [
            "AuthType                = auth/munge\n",
            "LaunchParameters        = (null)\n",
            "SlurmctldHost[0]        = c(127.0.0.1)\n",
            "SlurmctldHost[1]        = d\n",
            "SlurmctldPort           = 6820-6829\n",
            "SlurmUser               = slurm\n",
            "SuspendTime             = 600 sec\n",
            "SwitchType              = switch/none\n",
        ] {
            assert!(out.contains(line), "{line:?} missing from\n{out}");
        }
        assert_eq!(out.matches("SlurmctldHost").count(), 2, "{out}");
        // Slurm's alphabetical order, the priority block at its place.
        let keys: Vec<&str> = out
            .lines()
            .skip(1)
            .map(|l| l.split(' ').next().unwrap())
            .collect();
        let at = |k: &str| keys.iter().position(|x| *x == k).unwrap();
        assert!(at("LaunchParameters") < at("PriorityParameters"));
        assert!(at("PriorityType") < at("ReturnToService"));
        assert!(at("SuspendTime") < at("SwitchType"));
    }

    /// The global memory keys as configured, UNLIMITED when not.
    #[test]
    fn show_config_prints_the_memory_keys() {
        let base = "ClusterName=t\nSlurmctldHost=c\nNodeName=n1 CPUs=2\nPartitionName=p Nodes=n1\n";
        let show = |extra: &str| {
            let conf = crate::config::Config::parse_str(
                &format!("{base}{extra}"),
                std::path::Path::new("/x/slurm.conf"),
            )
            .unwrap();
            show_config(&conf, 0)
        };
        let plain = show("");
        assert!(
            plain.contains("\nDefMemPerNode           = UNLIMITED\n"),
            "{plain}"
        );
        assert!(
            plain.contains("\nMaxMemPerNode           = UNLIMITED\n"),
            "{plain}"
        );
        let set = show("DefMemPerCPU=512\nMaxMemPerNode=4096\n");
        assert!(set.contains("\nDefMemPerCPU            = 512\n"), "{set}");
        assert!(set.contains("\nMaxMemPerNode           = 4096\n"), "{set}");
    }

    fn ts(t: i64) -> String {
        fmt_timestamp(Some(t))
    }

    #[test]
    fn running_job_record() {
        let mut j = sample_jobs().remove(0);
        j.mem_per_node_mb = 1000;
        j.submit_line = "sbatch -J sleeper -N2 -t 10 --wrap sleep 1000".to_string();
        let expected = format!(
            "JobId=1 JobName=sleeper\n\
             \x20  UserId=root(0) GroupId=root(0) MCS_label=N/A\n\
             \x20  Priority=4294901759 Nice=0 Account=(null) QOS=(null)\n\
             \x20  JobState=RUNNING Reason=None Dependency=(null)\n\
             \x20  Requeue=1 Restarts=0 BatchFlag=1 Reboot=0 ExitCode=0:0\n\
             \x20  RunTime=00:00:21 TimeLimit=00:10:00 TimeMin=N/A\n\
             \x20  SubmitTime={submit} EligibleTime={submit}\n\
             \x20  AccrueTime={submit}\n\
             \x20  StartTime={start} EndTime={end} Deadline=N/A\n\
             \x20  SuspendTime=None SecsPreSuspend=0 LastSchedEval={start} Scheduler=Main\n\
             \x20  Partition=debug AllocNode:Sid=(null):0\n\
             \x20  ReqNodeList=(null) ExcNodeList=(null)\n\
             \x20  NodeList=n[1-2]\n\
             \x20  BatchHost=n1\n\
             \x20  NumNodes=2 NumCPUs=2 NumTasks=2 CPUs/Task=1 ReqB:S:C:T=0:0:*:*\n\
             \x20  ReqTRES=cpu=2,mem=2000M,node=2,billing=2\n\
             \x20  AllocTRES=cpu=2,mem=2000M,node=2,billing=2\n\
             \x20  Socks/Node=* NtasksPerN:B:S:C=0:0:*:* CoreSpec=*\n\
             \x20  MinCPUsNode=1 MinMemoryNode=1000M MinTmpDiskNode=0\n\
             \x20  Features=(null) DelayBoot=00:00:00\n\
             \x20  OverSubscribe=OK Exclusive=NO Contiguous=0 Licenses=(null) LicensesAlloc=(null) Network=(null)\n\
             \x20  Command=(null)\n\
             \x20  SubmitLine=sbatch -J sleeper -N2 -t 10 --wrap sleep 1000\n\
             \x20  WorkDir=/tmp/fmtjobs\n\
             \x20  StdErr=/tmp/fmtjobs/slurm-1.out\n\
             \x20  StdIn=/dev/null\n\
             \x20  StdOut=/tmp/fmtjobs/slurm-1.out\n\n",
            submit = ts(T0),
            start = ts(T0 + 1),
            end = ts(T0 + 601),
        );
        assert_eq!(show_job(&j, T0 + 22, false), expected);
    }

    #[test]
    fn a_pending_job_shows_its_planned_start_and_nodes() {
        let mut j = job(7, "wide", "debug", JobState::Pending);
        j.reason = "Resources".into();
        j.time_limit_min = Some(60);
        j.sched_start = Some(T0 + 600);
        j.sched_nodes = "n[1-2]".into();
        let out = show_job(&j, T0 + 22, false);
        assert!(
            out.contains(&format!(
                "   StartTime={} EndTime={} Deadline=N/A\n",
                ts(T0 + 600),
                ts(T0 + 600 + 3600)
            )),
            "{out}"
        );
        assert!(out.contains("   NodeList= SchedNodeList=n[1-2]\n"), "{out}");
        // Without a plan: no estimate, no SchedNodeList.
        j.sched_start = None;
        j.sched_nodes.clear();
        let out = show_job(&j, T0 + 22, false);
        assert!(
            out.contains("   StartTime=Unknown EndTime=Unknown Deadline=N/A\n"),
            "{out}"
        );
        assert!(out.contains("   NodeList=\n"), "{out}");
    }

    #[test]
    fn one_liner_job_record() {
        let j = sample_jobs().remove(0);
        let out = show_job(&j, T0 + 22, true);
        assert!(out.starts_with(
            "JobId=1 JobName=sleeper UserId=root(0) GroupId=root(0) MCS_label=N/A Priority="
        ));
        assert!(out.ends_with(" StdIn=/dev/null StdOut=/tmp/fmtjobs/slurm-1.out\n"));
        assert_eq!(out.lines().count(), 1);
        assert_eq!(
            out,
            show_job(&j, T0 + 22, false)
                .trim_end()
                .replace("\n   ", " ")
                + "\n"
        );
    }

    #[test]
    fn held_pending_job_shows_unknown_times() {
        let jobs = sample_jobs();
        let held = jobs.iter().find(|j| j.job_id == 7).unwrap();
        let out = show_job(held, T0 + 5, false);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[2], "   Priority=0 Nice=0 Account=(null) QOS=(null)");
        assert_eq!(
            lines[3],
            "   JobState=PENDING Reason=JobHeldUser Dependency=(null)"
        );
        assert_eq!(
            lines[5],
            "   RunTime=00:00:00 TimeLimit=UNLIMITED TimeMin=N/A"
        );
        assert_eq!(
            lines[6],
            format!("   SubmitTime={} EligibleTime=Unknown", ts(T0))
        );
        assert_eq!(lines[7], "   AccrueTime=Unknown");
        assert_eq!(
            lines[8],
            "   StartTime=Unknown EndTime=Unknown Deadline=N/A"
        );
        assert_eq!(lines[12], "   NodeList=");
        assert_eq!(
            lines[13],
            "   NumNodes=1 NumCPUs=1 NumTasks=1 CPUs/Task=1 ReqB:S:C:T=0:0:*:*"
        );
        assert_eq!(lines[14], "   ReqTRES=cpu=1,node=1,billing=1");
        assert_eq!(lines[15], "   AllocTRES=(null)");
    }

    #[test]
    fn finished_jobs_exit_codes_and_reasons() {
        let jobs = sample_jobs();
        let failer = jobs.iter().find(|j| j.job_id == 3).unwrap();
        let out = show_job(failer, T0 + 100, false);
        assert!(out.contains("\n   JobState=FAILED Reason=NonZeroExitCode Dependency=(null)\n"));
        assert!(out.contains(" ExitCode=3:0\n"));
        assert!(out.contains("\n   RunTime=00:00:00 TimeLimit=UNLIMITED TimeMin=N/A\n"));
        assert!(out.contains(&format!(
            "\n   StartTime={t} EndTime={t} Deadline=N/A\n",
            t = ts(T0 + 1)
        )));
        let mut tout = job(5, "tout", "debug", JobState::Timeout);
        tout.exit_code = (0, 15);
        tout.end_time = Some(T0 + 85);
        tout.time_limit_min = Some(1);
        tout.reason = "TimeLimit".to_string();
        let out = show_job(&tout, T0 + 200, false);
        assert!(out.contains(" ExitCode=0:15\n"));
        assert!(out.contains("\n   RunTime=00:01:24 TimeLimit=00:01:00 TimeMin=N/A\n"));
        tout.reason = "Nodes required for job are DOWN".to_string();
        assert!(show_job(&tout, T0, true).contains(" Reason=Nodes_required_for_job_are_DOWN "));
    }

    #[test]
    fn exit_code_from_signal_or_status() {
        assert_eq!(exit_code((0, 0)), "0:0");
        assert_eq!(exit_code((3, 0)), "3:0");
        assert_eq!(exit_code((0, 9)), "0:9");
        assert_eq!(exit_code((137, 9)), "0:9");
        assert_eq!(exit_code((-1, 0)), "255:0");
    }

    #[test]
    fn unlimited_running_job_has_unknown_end() {
        let mut j = job(40, "inf", "debug", JobState::Running);
        j.end_time = Some(T0 + 365 * 86_400);
        assert!(show_job(&j, T0 + 10, false)
            .contains(&format!("StartTime={} EndTime=Unknown ", ts(T0 + 1))));
        j.end_time = None;
        assert!(show_job(&j, T0 + 10, false).contains(" EndTime=Unknown Deadline=N/A"));
    }

    #[test]
    fn unknown_group_prints_nobody() {
        let mut j = job(41, "g", "debug", JobState::Pending);
        j.gid = 4_242_424;
        assert!(show_job(&j, T0, false)
            .contains("UserId=root(0) GroupId=nobody(4242424) MCS_label=N/A"));
    }

    fn sample_node() -> NodeInfo {
        NodeInfo {
            name: "n2".to_string(),
            addr: "127.0.0.1".to_string(),
            hostname: "vm".to_string(),
            port: 20002,
            base: NodeBaseState::Mixed,
            drain: true,
            not_responding: false,
            rank: 1,
            attached_to: None,
            cpus: 2,
            sockets: 2,
            cores_per_socket: 1,
            threads_per_core: 1,
            real_memory_mb: 1000,
            alloc_cpus: 1,
            alloc_mem_mb: 1000,
            features: Vec::new(),
            gres: String::new(),
            weight: 1,
            partitions: vec!["debug".to_string()],
            reason: Some("maint window".to_string()),
            reason_user: Some("root".to_string()),
            reason_time: Some(T0 + 8),
            boot_time: Some(T0 - 256),
            slurmd_start_time: Some(T0 - 5),
            last_busy: Some(T0 - 5),
            version: "22.05.8".to_string(),
            cfg_gres: Vec::new(),
            alloc_gres: Vec::new(),
            gres_used: String::new(),
            invalid_reg: false,
            reserved: false,
            maint: false,
            boards: 1,
            tmp_disk_mb: 0,
            ignored_attrs: Vec::new(),
            power: Default::default(),
            dynamic: false,
        }
    }

    /// Boards, TmpDisk and the specialization line print what slurm.conf says.
    #[test]
    fn node_record_prints_configured_boards_tmp_disk_and_specialization() {
        let mut n = sample_node();
        n.boards = 2;
        n.tmp_disk_mb = 4096;
        n.ignored_attrs = vec![
            ("CoreSpecCount".into(), "2".into()),
            ("MemSpecLimit".into(), "2048".into()),
            ("CpuBind".into(), "cores".into()),
        ];
        let out = show_node(&n, T0, false);
        assert!(
            out.contains(
                "   RealMemory=1000 AllocMem=1000 FreeMem=N/A Sockets=2 Boards=2\n\
                 \x20  CoreSpecCount=2 MemSpecLimit=2048\n\
                 \x20  State=MIXED+DRAIN ThreadsPerCore=1 TmpDisk=4096 Weight=1"
            ),
            "{out}"
        );
        // Without them, no specialization line.
        assert!(!show_node(&sample_node(), T0, false).contains("SpecCount"));
    }

    #[test]
    fn node_record() {
        let expected = format!(
            "NodeName=n2 CoresPerSocket=1 \n\
             \x20  CPUAlloc=1 CPUEfctv=2 CPUTot=2 CPULoad=N/A\n\
             \x20  AvailableFeatures=(null)\n\
             \x20  ActiveFeatures=(null)\n\
             \x20  Gres=(null)\n\
             \x20  NodeAddr=127.0.0.1 NodeHostName=vm Port=20002 Version=22.05.8\n\
             \x20  RealMemory=1000 AllocMem=1000 FreeMem=N/A Sockets=2 Boards=1\n\
             \x20  State=MIXED+DRAIN ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A\n\
             \x20  Partitions=debug \n\
             \x20  BootTime={boot} SlurmdStartTime={slurmd}\n\
             \x20  LastBusyTime={slurmd} ResumeAfterTime=None\n\
             \x20  CfgTRES=cpu=2,mem=1000M,billing=2\n\
             \x20  AllocTRES=cpu=1,mem=1000M\n\
             \x20  CurrentWatts=0 AveWatts=0\n\
             \x20  Reason=maint window [root@{reason}]\n\n",
            boot = ts(T0 - 256),
            slurmd = ts(T0 - 5),
            reason = ts(T0 + 8),
        );
        assert_eq!(show_node(&sample_node(), T0 + 10, false), expected);
    }

    #[test]
    fn bare_node_record_and_one_liner() {
        let mut n = sample_node();
        n.port = DEFAULT_SLURMD_PORT;
        n.version = String::new();
        n.drain = false;
        n.not_responding = true;
        n.base = NodeBaseState::Down;
        n.alloc_cpus = 0;
        n.alloc_mem_mb = 0;
        n.reason = Some("Not responding".to_string());
        n.reason_user = Some("slurm".to_string());
        n.boot_time = None;
        n.slurmd_start_time = None;
        n.last_busy = None;
        n.partitions.clear();
        n.features = vec!["gpu".to_string(), "a100".to_string()];
        n.gres = "gpu:4".to_string();
        n.real_memory_mb = 512_000;
        let out = show_node(&n, T0, true);
        assert_eq!(
            out,
            format!(
                "NodeName=n2 CoresPerSocket=1  CPUAlloc=0 CPUEfctv=2 CPUTot=2 CPULoad=N/A \
                 AvailableFeatures=gpu,a100 ActiveFeatures=gpu,a100 Gres=gpu:4 NodeAddr=127.0.0.1 NodeHostName=vm \
                 RealMemory=512000 AllocMem=0 FreeMem=N/A Sockets=2 Boards=1 \
                 State=DOWN+NOT_RESPONDING ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A \
                 BootTime=None SlurmdStartTime=None LastBusyTime=Unknown ResumeAfterTime=None \
                 CfgTRES=cpu=2,mem=500G,billing=2 AllocTRES= CurrentWatts=0 AveWatts=0 \
                 Reason=Not responding [slurm@{}]\n",
                ts(T0 + 8)
            )
        );
        n.reason_time = None;
        assert!(show_node(&n, T0, false)
            .ends_with("\n   CurrentWatts=0 AveWatts=0\n   Reason=Not responding\n\n"));
        n.reason = None;
        assert!(show_node(&n, T0, false).ends_with("\n   CurrentWatts=0 AveWatts=0\n\n"));
    }

    fn sample_partition() -> PartitionInfo {
        PartitionInfo {
            name: "long".to_string(),
            default: false,
            state: PartitionState::Up,
            max_time_min: Some(2880),
            default_time_min: Some(60),
            max_nodes: None,
            min_nodes: 1,
            nodes: "n[3-6]".to_string(),
            node_names: vec!["n3".into(), "n4".into(), "n5".into(), "n6".into()],
            total_cpus: 8,
            total_nodes: 4,
            total_mem_mb: 4000,
            preempt: Default::default(),
            preempt_mode: "OFF".into(),
            priority_job_factor: 1,
            priority_tier: 1,
            access: Default::default(),
            opts: Default::default(),
            hidden: false,
        }
    }

    /// Every PartOpts setting where Slurm prints it.
    #[test]
    fn partition_settings_lines() {
        use crate::model::part_opts::{MemPer, OverSubscribe};
        let mut p = sample_partition();
        p.opts.hidden = true;
        p.opts.allow_groups = Some(vec!["bio".into(), "chem".into()]);
        p.opts.alternate = Some("short".into());
        p.opts.exclusive_user = true;
        p.opts.lln = true;
        p.opts.max_cpus_per_node = Some(2);
        p.opts.root_only = true;
        p.opts.req_resv = true;
        p.opts.oversubscribe = OverSubscribe::Force(3);
        p.opts.mem.def_mem = Some(MemPer::Cpu(512));
        p.opts.mem.max_mem = Some(MemPer::Node(4000));
        p.opts.mem.def_cpu_per_gpu = Some(4);
        let text = show_partition(&p, false);
        for want in [
            "\n   AllowGroups=bio,chem AllowAccounts=ALL AllowQos=ALL\n",
            "\n   AllocNodes=ALL Alternate=short Default=NO QoS=N/A\n",
            "\n   DefaultTime=01:00:00 DisableRootJobs=NO ExclusiveUser=YES GraceTime=0 Hidden=YES\n",
            "\n   MaxNodes=UNLIMITED MaxTime=2-00:00:00 MinNodes=1 LLN=YES MaxCPUsPerNode=2\n",
            "\n   PriorityJobFactor=1 PriorityTier=1 RootOnly=YES ReqResv=YES OverSubscribe=FORCE:3\n",
            "\n   JobDefaults=DefCpuPerGPU=4\n   DefMemPerCPU=512 MaxMemPerNode=4000\n",
        ] {
            assert!(text.contains(want), "{want:?} not in {text}");
        }
    }

    /// A partition's access lists and QOS, as scontrol shows them.
    #[test]
    fn partition_access_lines() {
        let mut p = sample_partition();
        p.access.allow_accounts = Some(vec!["chem".into(), "bio".into()]);
        p.access.deny_qos = vec!["low".into()];
        p.access.qos = Some("part".into());
        let text = show_partition(&p, false);
        assert!(text.contains("\n   AllowGroups=ALL AllowAccounts=chem,bio DenyQos=low\n   AllocNodes=ALL Default=NO QoS=part\n"), "{text}");
    }

    #[test]
    fn partition_record() {
        assert_eq!(
            show_partition(&sample_partition(), false),
            "PartitionName=long\n\
             \x20  AllowGroups=ALL AllowAccounts=ALL AllowQos=ALL\n\
             \x20  AllocNodes=ALL Default=NO QoS=N/A\n\
             \x20  DefaultTime=01:00:00 DisableRootJobs=NO ExclusiveUser=NO GraceTime=0 Hidden=NO\n\
             \x20  MaxNodes=UNLIMITED MaxTime=2-00:00:00 MinNodes=1 LLN=NO MaxCPUsPerNode=UNLIMITED\n\
             \x20  Nodes=n[3-6]\n\
             \x20  PriorityJobFactor=1 PriorityTier=1 RootOnly=NO ReqResv=NO OverSubscribe=NO\n\
             \x20  OverTimeLimit=NONE PreemptMode=OFF\n\
             \x20  State=UP TotalCPUs=8 TotalNodes=4 SelectTypeParameters=NONE\n\
             \x20  JobDefaults=(null)\n\
             \x20  DefMemPerNode=UNLIMITED MaxMemPerNode=UNLIMITED\n\
             \x20  TRES=cpu=8,mem=4000M,node=4,billing=8\n\n"
        );
    }

    #[test]
    fn empty_default_partition_one_liner() {
        let mut p = sample_partition();
        p.name = "empty".to_string();
        p.default = true;
        p.state = PartitionState::Inactive;
        p.max_time_min = None;
        p.default_time_min = None;
        p.max_nodes = Some(4);
        p.nodes = String::new();
        p.node_names.clear();
        p.total_cpus = 0;
        p.total_nodes = 0;
        assert_eq!(
            show_partition(&p, true),
            "PartitionName=empty AllowGroups=ALL AllowAccounts=ALL AllowQos=ALL AllocNodes=ALL Default=YES QoS=N/A \
             DefaultTime=NONE DisableRootJobs=NO ExclusiveUser=NO GraceTime=0 Hidden=NO MaxNodes=4 MaxTime=UNLIMITED \
             MinNodes=1 LLN=NO MaxCPUsPerNode=UNLIMITED Nodes=(null) PriorityJobFactor=1 \
             PriorityTier=1 RootOnly=NO ReqResv=NO OverSubscribe=NO OverTimeLimit=NONE PreemptMode=OFF \
             State=INACTIVE TotalCPUs=0 TotalNodes=0 SelectTypeParameters=NONE JobDefaults=(null) \
             DefMemPerNode=UNLIMITED MaxMemPerNode=UNLIMITED TRES=(null)\n"
        );
    }

    #[test]
    fn ping_lines() {
        assert_eq!(ping_line("vm", true), "Slurmctld(primary) at vm is UP");
        assert_eq!(
            ping_line("ctl-1", false),
            "Slurmctld(primary) at ctl-1 is DOWN"
        );
    }
}
