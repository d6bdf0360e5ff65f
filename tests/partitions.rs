//! Partition settings against a live controller, through the real CLI:
//! refusals at submission and on `scontrol update` (AllowGroups, RootOnly,
//! ReqResv, MaxMemPerCPU), hidden partitions (Hidden, or an AllowGroups
//! leaving the user out) and their jobs in sinfo,
//! squeue and `scontrol show partition`, `OverSubscribe=EXCLUSIVE` giving
//! whole nodes, memory defaults in `scontrol show job`, a drained
//! partition's Alternate, and all of it the same after a controller
//! restart. A user is played by `nobody`, so the test needs root (to run
//! commands as them and start their jobs); without it it is skipped.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Output;
use std::time::Duration;

use common::{require, Cluster};

const NOBODY: u32 = 65534;
const GROUP_DENIED: &str = "User's group not permitted to use this partition";
const ACCESS_DENIED: &str = "Access/permission denied";
const TASK_MEMORY: &str = "Memory required by task is not available";

const PARTITIONS: &str = "DefMemPerCPU=100\n\
    PartitionName=hid Nodes=n3 Hidden=YES\n\
    PartitionName=staff Nodes=ALL AllowGroups=root\n\
    PartitionName=open Nodes=ALL AllowGroups=nogroup,root\n\
    PartitionName=excl Nodes=n[1-2] OverSubscribe=EXCLUSIVE\n\
    PartitionName=mem Nodes=ALL DefMemPerNode=150 MaxMemPerCPU=200\n\
    PartitionName=admin Nodes=ALL RootOnly=YES\n\
    PartitionName=resv Nodes=ALL ReqResv=YES\n\
    PartitionName=closed Nodes=ALL State=DRAIN Alternate=open\n";

fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn out(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A home for `nobody` with a configuration including the cluster's.
fn nobody_home(c: &Cluster) -> tempfile::TempDir {
    let open =
        |p: &Path| std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
    open(c.dir.path());
    let home = tempfile::tempdir().unwrap();
    open(home.path());
    let who = Some(nix::unistd::Uid::from_raw(NOBODY));
    nix::unistd::chown(home.path(), who, Some(nix::unistd::Gid::from_raw(NOBODY))).unwrap();
    std::fs::write(
        home.path().join("slurm.conf"),
        format!("Include {}\n", c.conf.display()),
    )
    .unwrap();
    home
}

fn as_nobody(c: &Cluster, home: &Path, cmd: &str, args: &[&str]) -> Output {
    common::run_as(
        c,
        (NOBODY, NOBODY),
        home,
        &home.join("slurm.conf"),
        cmd,
        args,
    )
}

#[track_caller]
fn submitted(o: &Output) -> u32 {
    assert!(o.status.success(), "sbatch: {}", err(o));
    out(o).trim().parse().unwrap()
}

#[track_caller]
fn refused(o: &Output, words: &str) {
    assert!(!o.status.success(), "accepted: {}", out(o));
    assert!(
        err(o).contains(&format!("Batch job submission failed: {words}")),
        "{}",
        err(o)
    );
}

fn show_job(c: &Cluster, id: u32) -> String {
    let o = c.cli(c.dir.path(), "scontrol", &["show", "job", &id.to_string()]);
    assert!(o.status.success(), "{}", err(&o));
    out(&o)
}

fn listed_partitions(o: &Output) -> Vec<String> {
    assert!(o.status.success(), "{}", err(o));
    out(o)
        .lines()
        .map(|l| l.trim().trim_end_matches('*').to_string())
        .collect()
}

#[test]
fn partitions_refuse_hide_share_and_default_as_configured() {
    if !require(nix::unistd::geteuid().is_root(), "root (to act as nobody)") {
        return;
    }
    let mut c = Cluster::start_with(3, 16, 30, PARTITIONS);
    let home = nobody_home(&c);
    let h = home.path();
    let nobody_sbatch = |c: &Cluster, part: &str, more: &[&str]| {
        let mut args = vec!["--parsable", "-p", part];
        args.extend_from_slice(more);
        args.extend_from_slice(&["--wrap", "sleep 300"]);
        as_nobody(c, h, "sbatch", &args)
    };

    // Who may use a partition, with slurmctld's words.
    refused(&nobody_sbatch(&c, "staff", &[]), GROUP_DENIED);
    refused(&nobody_sbatch(&c, "admin", &[]), ACCESS_DENIED);
    refused(&nobody_sbatch(&c, "resv", &[]), ACCESS_DENIED);
    refused(&nobody_sbatch(&c, "mem", &["--mem=1000"]), TASK_MEMORY);
    let mine = submitted(&nobody_sbatch(&c, "open", &[]));
    // Root passes RootOnly and AllowGroups.
    let root_job = c.sbatch(
        c.dir.path(),
        &["-p", "admin", "-w", "n3", "--wrap", "sleep 300"],
    );
    let staff_job = c.sbatch(c.dir.path(), &["-p", "staff", "--hold", "--wrap", "true"]);
    // An update into a partition is held to the same rules.
    let held = submitted(&nobody_sbatch(&c, "open", &["--hold"]));
    let o = as_nobody(
        &c,
        h,
        "scontrol",
        &["update", &format!("JobId={held}"), "Partition=staff"],
    );
    assert!(!o.status.success(), "moved: {}", out(&o));
    assert!(err(&o).contains(GROUP_DENIED), "{}", err(&o));
    assert_eq!(c.job(held).unwrap().partition, "open");

    // A drained partition hands new jobs to its Alternate.
    let diverted = submitted(&nobody_sbatch(&c, "closed", &["--hold"]));
    assert_eq!(c.job(diverted).unwrap().partition, "open");

    // Memory: the partition's default, else the cluster's; MaxMemPerCPU
    // gives a job more CPUs and less memory per CPU.
    let per_node = submitted(&nobody_sbatch(&c, "mem", &["--hold"]));
    assert!(
        show_job(&c, per_node).contains("MinCPUsNode=1 MinMemoryNode=150M "),
        "{}",
        show_job(&c, per_node)
    );
    let per_cpu = submitted(&nobody_sbatch(&c, "open", &["--hold"]));
    assert!(show_job(&c, per_cpu).contains(" MinMemoryCPU=100M "));
    let raised = submitted(&nobody_sbatch(&c, "mem", &["--hold", "--mem-per-cpu=300"]));
    assert!(
        show_job(&c, raised).contains("MinCPUsNode=2 MinMemoryCPU=150M "),
        "{}",
        show_job(&c, raised)
    );

    // Hidden: not listed for a user without -a (or -p), listed for root.
    let user_sinfo = |c: &Cluster, args: &[&str]| {
        let mut all = vec!["-h", "-o", "%P"];
        all.extend_from_slice(args);
        listed_partitions(&as_nobody(c, h, "sinfo", &all))
    };
    assert!(!user_sinfo(&c, &[]).contains(&"hid".to_string()));
    assert!(user_sinfo(&c, &[]).contains(&"open".to_string()));
    // A partition whose AllowGroups leaves the user out is hidden from them too.
    assert!(!user_sinfo(&c, &[]).contains(&"staff".to_string()));
    assert!(user_sinfo(&c, &["-a"]).contains(&"staff".to_string()));
    assert!(user_sinfo(&c, &["-a"]).contains(&"hid".to_string()));
    assert_eq!(user_sinfo(&c, &["-p", "hid"]), ["hid"]);
    let root_sinfo = c.cli(c.dir.path(), "sinfo", &["-h", "-o", "%P"]);
    assert!(listed_partitions(&root_sinfo).contains(&"hid".to_string()));
    let o = as_nobody(&c, h, "scontrol", &["show", "partition", "hid"]);
    assert!(!o.status.success());
    assert!(err(&o).contains("Partition hid not found"), "{}", err(&o));
    let o = as_nobody(&c, h, "scontrol", &["-a", "show", "partition", "hid"]);
    assert!(out(&o).contains(" Hidden=YES\n"), "{}", out(&o));
    let hidden_job = c.sbatch(c.dir.path(), &["-p", "hid", "--hold", "--wrap", "true"]);
    let user_squeue = |c: &Cluster, args: &[&str]| {
        let mut all = vec!["-h", "-o", "%i"];
        all.extend_from_slice(args);
        let o = as_nobody(c, h, "squeue", &all);
        assert!(o.status.success(), "{}", err(&o));
        out(&o)
            .lines()
            .map(|l| l.trim().parse::<u32>().unwrap())
            .collect::<Vec<_>>()
    };
    assert!(!user_squeue(&c, &[]).contains(&hidden_job));
    assert!(!user_squeue(&c, &[]).contains(&staff_job));
    assert!(user_squeue(&c, &["-a"]).contains(&staff_job));
    assert!(user_squeue(&c, &[]).contains(&mine));
    assert!(user_squeue(&c, &["-a"]).contains(&hidden_job));
    assert!(user_squeue(&c, &["-j", &hidden_job.to_string()]).contains(&hidden_job));

    // What scontrol and sinfo show is what the file says.
    let o = c.cli(c.dir.path(), "scontrol", &["show", "partition", "excl"]);
    assert!(
        out(&o).contains(" OverSubscribe=EXCLUSIVE\n"),
        "{}",
        out(&o)
    );
    let o = c.cli(c.dir.path(), "scontrol", &["show", "partition", "staff"]);
    assert!(out(&o).contains("\n   AllowGroups=root "), "{}", out(&o));
    let o = c.cli(c.dir.path(), "scontrol", &["show", "partition", "mem"]);
    assert!(
        out(&o).contains("\n   DefMemPerNode=150 MaxMemPerCPU=200\n"),
        "{}",
        out(&o)
    );
    let o = c.cli(
        c.dir.path(),
        "sinfo",
        &["-h", "-p", "excl,staff", "-o", "%P %h %g"],
    );
    assert_eq!(out(&o), "staff NO root\nexcl EXCLUSIVE all\n");

    // OverSubscribe=EXCLUSIVE: each one-CPU job holds a whole node.
    for id in [mine, root_job] {
        c.wait_for(Duration::from_secs(30), "jobs running", |c| {
            c.job(id)
                .is_some_and(|j| j.num_cpus > 0 && !j.nodes.is_empty())
        });
    }
    let busy_on = |c: &Cluster, id: u32| c.job(id).map(|j| j.nodes).unwrap_or_default();
    let a = submitted(&nobody_sbatch(&c, "excl", &["-n1"]));
    let b = submitted(&nobody_sbatch(&c, "excl", &["-n1"]));
    let cjob = submitted(&nobody_sbatch(&c, "excl", &["-n1"]));
    // n1 or n2 may hold `mine` (2 CPUs, one used): an exclusive job
    // waits for an empty node, so cancel it first.
    let o = c.cli(c.dir.path(), "scancel", &[&mine.to_string()]);
    assert!(o.status.success(), "{}", err(&o));
    c.wait_for(Duration::from_secs(30), "two exclusive jobs running", |c| {
        [a, b, cjob]
            .iter()
            .filter(|&&id| c.job(id).is_some_and(|j| !j.nodes.is_empty()))
            .count()
            == 2
    });
    let running: Vec<_> = [a, b, cjob]
        .into_iter()
        .filter_map(|id| c.job(id).filter(|j| !j.nodes.is_empty()))
        .collect();
    assert_ne!(running[0].nodes, running[1].nodes);
    assert!(running.iter().all(|j| j.num_cpus == 2), "whole nodes");
    let waiting = [a, b, cjob]
        .into_iter()
        .find(|&id| busy_on(&c, id).is_empty())
        .unwrap();
    assert!(show_job(&c, waiting).contains("JobState=PENDING"));
    assert!(show_job(&c, waiting).contains(" OverSubscribe=NO "));

    // A restarted controller reads the same file and keeps its jobs' values.
    c.kill_ctld();
    c.start_ctld();
    c.wait_for(Duration::from_secs(30), "controller back", |c| {
        c.job(raised).is_some()
    });
    assert!(show_job(&c, raised).contains("MinCPUsNode=2 MinMemoryCPU=150M "));
    assert!(!user_sinfo(&c, &[]).contains(&"hid".to_string()));
    assert!(!user_squeue(&c, &[]).contains(&hidden_job));
    refused(&nobody_sbatch(&c, "staff", &[]), GROUP_DENIED);
}

/// `MaxCPUsPerNode` counts all of the partition's jobs on a node together: on a two-CPU node
/// capped at one, a second job of the partition waits while another partition's job takes the
/// other CPU; the first job's end lets the second start.
#[test]
fn max_cpus_per_node_holds_the_partitions_jobs_together() {
    let extra = "PartitionName=capped Nodes=n1 MaxCPUsPerNode=1\n";
    let c = Cluster::start_with(1, 2, 30, extra);
    let cwd = c.dir.path().to_path_buf();
    let state = |id: u32| c.job(id).map(|j| j.state.name().to_string());
    let first = c.sbatch(&cwd, &["-p", "capped", "--wrap", "sleep 300"]);
    c.wait_for(Duration::from_secs(30), "the first job running", |_| {
        state(first).as_deref() == Some("RUNNING")
    });
    let second = c.sbatch(&cwd, &["-p", "capped", "--wrap", "sleep 300"]);
    let other = c.sbatch(&cwd, &["-p", "debug", "--wrap", "sleep 300"]);
    c.wait_for(
        Duration::from_secs(30),
        "the other partition's job running",
        |_| state(other).as_deref() == Some("RUNNING"),
    );
    assert_eq!(state(second).as_deref(), Some("PENDING"));
    assert_eq!(c.node("n1").alloc_cpus, 2);
    let o = c.cli(&cwd, "scancel", &[&first.to_string(), &other.to_string()]);
    assert!(o.status.success(), "{}", err(&o));
    c.wait_for(Duration::from_secs(30), "the second job running", |_| {
        state(second).as_deref() == Some("RUNNING")
    });
    let o = c.cli(&cwd, "scancel", &[&second.to_string()]);
    assert!(o.status.success(), "{}", err(&o));
}
