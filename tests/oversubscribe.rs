//! CPUs shared between jobs against a live controller, through the real
//! CLI: `OverSubscribe=YES:2` shares a one-CPU node between two jobs that
//! ask `-s` (a third waits, a job without `-s` does not share),
//! `FORCE:2` shares without asking, `--exclusive` never shares, what
//! `scontrol show job`/`squeue %h`/`scontrol show node` say, and the same
//! shares after a controller restart.

mod common;

use std::process::Output;
use std::time::Duration;

use canopy::wire::types::JobState;
use common::Cluster;

const PARTITIONS: &str = "NodeName=DEFAULT CPUs=1 RealMemory=1000\n\
    PartitionName=yes Nodes=n1 OverSubscribe=YES:2\n\
    PartitionName=force Nodes=n2 OverSubscribe=FORCE:2\n\
    PartitionName=yes3 Nodes=n3 OverSubscribe=YES:2\n";

const LIMIT: Duration = Duration::from_secs(30);

fn out(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn submit(c: &Cluster, part: &str, more: &[&str]) -> u32 {
    let mut args = vec!["-p", part];
    args.extend_from_slice(more);
    args.extend_from_slice(&["--wrap", "sleep 300"]);
    c.sbatch(c.dir.path(), &args)
}

fn running(c: &Cluster, id: u32) -> bool {
    c.job(id).is_some_and(|j| j.state == JobState::Running)
}

/// Pending because the scheduler looked and found no room.
fn waits_for_resources(c: &Cluster, id: u32) -> bool {
    c.job(id)
        .is_some_and(|j| j.state == JobState::Pending && j.reason == "Resources")
}

fn show_job(c: &Cluster, id: u32) -> String {
    out(&c.cli(c.dir.path(), "scontrol", &["show", "job", &id.to_string()]))
}

fn cancel(c: &Cluster, id: u32) {
    let o = c.cli(c.dir.path(), "scancel", &[&id.to_string()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn jobs_share_cpus_as_the_partition_and_the_job_allow() {
    let mut c = Cluster::start_with(3, 16, 30, PARTITIONS);

    // YES:2 on one CPU: two -s jobs run on it together, a third waits.
    let a = submit(&c, "yes", &["-s"]);
    c.wait_for(LIMIT, "first sharer running", |c| running(c, a));
    let b = submit(&c, "yes", &["--oversubscribe"]);
    c.wait_for(LIMIT, "second sharer running", |c| running(c, b));
    assert_eq!(c.job(b).unwrap().nodes, "n1");
    let d = submit(&c, "yes", &["-s"]);
    c.wait_for(LIMIT, "third sharer waiting", |c| waits_for_resources(c, d));
    // The node's one CPU is allocated once, however many jobs hold it.
    let n1 = c.node("n1");
    assert_eq!(
        (n1.alloc_cpus, n1.scontrol_state()),
        (1, "ALLOCATED".into())
    );
    let node = out(&c.cli(c.dir.path(), "scontrol", &["show", "node", "n1"]));
    assert!(node.contains("CPUAlloc=1 CPUEfctv=1 CPUTot=1 "), "{node}");
    assert!(show_job(&c, a).contains(" OverSubscribe=YES "));

    // A job that does not ask -s keeps off a sharer's CPU.
    let s3 = submit(&c, "yes3", &["-s"]);
    c.wait_for(LIMIT, "sharer on n3 running", |c| running(c, s3));
    let solo = submit(&c, "yes3", &[]);
    c.wait_for(LIMIT, "job without -s waiting", |c| {
        waits_for_resources(c, solo)
    });
    assert!(show_job(&c, solo).contains(" OverSubscribe=OK "));

    // FORCE:2: every job shares, without asking.
    let f1 = submit(&c, "force", &[]);
    let f2 = submit(&c, "force", &[]);
    c.wait_for(LIMIT, "two forced sharers running", |c| {
        running(c, f1) && running(c, f2)
    });
    let f3 = submit(&c, "force", &[]);
    c.wait_for(LIMIT, "third forced job waiting", |c| {
        waits_for_resources(c, f3)
    });
    let o = c.cli(
        c.dir.path(),
        "squeue",
        &["-h", "-p", "force", "-o", "%i %h %T"],
    );
    let mut lines: Vec<String> = out(&o).lines().map(str::to_string).collect();
    lines.sort();
    let mut want = vec![
        format!("{f1} YES RUNNING"),
        format!("{f2} YES RUNNING"),
        format!("{f3} YES PENDING"),
    ];
    want.sort();
    assert_eq!(lines, want);

    // A restarted controller rebuilds the same shares from the jobs it kept.
    c.kill_ctld();
    c.start_ctld();
    c.wait_for(LIMIT, "controller back with its jobs", |c| {
        running(c, a) && running(c, b) && running(c, f1) && running(c, f2)
    });
    c.wait_for(LIMIT, "the third sharer still waiting", |c| {
        waits_for_resources(c, d)
    });
    assert_eq!(c.node("n1").alloc_cpus, 1);
    // One sharer leaves: the waiting one takes its share.
    cancel(&c, b);
    c.wait_for(LIMIT, "waiting sharer running", |c| running(c, d));
    assert!(running(&c, a));

    // --exclusive never shares, not even in a FORCE partition.
    for id in [f1, f2, f3] {
        cancel(&c, id);
    }
    c.wait_for(LIMIT, "n2 idle", |c| c.node("n2").alloc_cpus == 0);
    let x = submit(&c, "force", &["--exclusive"]);
    c.wait_for(LIMIT, "exclusive job running", |c| running(c, x));
    let after = submit(&c, "force", &[]);
    c.wait_for(LIMIT, "sharer behind the exclusive job waiting", |c| {
        waits_for_resources(c, after)
    });
    assert!(show_job(&c, x).contains(" OverSubscribe=NO "));
    assert!(show_job(&c, after).contains(" OverSubscribe=YES "));
}
