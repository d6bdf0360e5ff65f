//! The Slurm commands as users run them, against a live cluster: exact
//! output of squeue, sinfo and scontrol, their errors and exit codes.

mod common;

use std::time::Duration;

use canopy::wire::types::JobState;
use common::Cluster;

fn text(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn err(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn slurm_commands_print_slurm_formats() {
    let c = Cluster::start(3, 2, 30);
    let w = tempfile::tempdir().unwrap();
    let w = w.path();
    let held = c.sbatch(w, &["--hold", "-J", "waiting", "--wrap", "true"]);
    let run = c.sbatch(
        w,
        &["-N", "2", "-c", "2", "-J", "busy", "--wrap", "sleep 30"],
    );
    c.wait_for(Duration::from_secs(10), "job running", |c| {
        c.job(run).is_some_and(|j| j.state == JobState::Running)
    });

    let o = c.cli(w, "squeue", &[]);
    assert!(o.status.success(), "{}", err(&o));
    let out = text(&o);
    let mut lines = out.lines();
    assert_eq!(
        lines.next().unwrap(),
        "             JOBID PARTITION     NAME     USER ST       TIME  NODES NODELIST(REASON)"
    );
    let user = nix::unistd::User::from_uid(nix::unistd::getuid())
        .unwrap()
        .unwrap()
        .name;
    let user8: String = user.chars().take(8).collect();
    assert_eq!(
        lines.next().unwrap(),
        format!("{held:>18}     debug  waiting {user8:>8} PD       0:00      1 (JobHeldUser)")
    );
    let row = lines.next().unwrap();
    assert!(
        row.starts_with(&format!("{run:>18}     debug     busy {user8:>8}  R ")),
        "{row}"
    );
    assert!(row.ends_with("      2 n[1-2]"), "{row}");

    let o = c.cli(w, "squeue", &["-h", "-t", "PD", "-o", "%i|%j|%T|%r"]);
    assert_eq!(text(&o), format!("{held}|waiting|PENDING|JobHeldUser\n"));
    let o = c.cli(w, "squeue", &["-j", "99999"]);
    assert!(!o.status.success());
    assert!(err(&o).contains("slurm_load_jobs error: Invalid job id specified"));

    let o = c.cli(w, "sinfo", &[]);
    assert_eq!(
        text(&o),
        "PARTITION AVAIL  TIMELIMIT  NODES  STATE NODELIST\n\
         debug*       up    1:00:00      2  alloc n[1-2]\n\
         debug*       up    1:00:00      1   idle n3\n\
         short        up       5:00      2  alloc n[1-2]\n"
    );

    let o = c.cli(w, "scontrol", &["show", "node", "n3"]);
    let out = text(&o);
    assert!(out.starts_with("NodeName=n3 "), "{out}");
    assert!(out.contains("   State=IDLE ThreadsPerCore=1"), "{out}");
    let o = c.cli(w, "scontrol", &["show", "job", &run.to_string()]);
    let out = text(&o);
    assert!(
        out.starts_with(&format!("JobId={run} JobName=busy\n")),
        "{out}"
    );
    assert!(
        out.contains("   JobState=RUNNING Reason=None Dependency=(null)\n"),
        "{out}"
    );
    assert!(out.contains("   NodeList=n[1-2]\n"), "{out}");
    let o = c.cli(w, "scontrol", &["show", "job", "99999"]);
    assert!(!o.status.success());
    let o = c.cli(w, "scontrol", &["ping"]);
    assert_eq!(text(&o), "Slurmctld(primary) at localhost is UP\n");
    let o = c.cli(w, "scontrol", &["show", "hostnames", "n[1-3]"]);
    assert_eq!(text(&o), "n1\nn2\nn3\n");

    let o = c.cli(w, "scontrol", &["update", "NodeName=n3", "State=DRAIN"]);
    assert!(!o.status.success());
    assert!(err(&o)
        .contains("You must specify a reason when DOWNING or DRAINING a node. Request denied"));
    let o = c.cli(
        w,
        "scontrol",
        &["update", "NodeName=n3", "State=DRAIN", "Reason=disk swap"],
    );
    assert!(o.status.success(), "{}", err(&o));
    let o = c.cli(w, "sinfo", &["-R", "-h", "-o", "%E|%N"]);
    assert_eq!(text(&o), "disk swap|n3\n");
    let o = c.cli(w, "scontrol", &["update", "NodeName=n3", "State=RESUME"]);
    assert!(o.status.success());
    let o = c.cli(
        w,
        "sinfo",
        &["-h", "-p", "debug", "-t", "idle", "-o", "%D %t %N"],
    );
    assert_eq!(text(&o), "1 idle n3\n");

    let o = c.cli(w, "status", &[]);
    let out = text(&o);
    assert!(out.contains("controller localhost (TreeWidth=2)"), "{out}");
    assert!(out.contains("RELAY TREE"), "{out}");
    assert!(out.contains("\n  n1\n    n2\n"), "{out}");
}

#[test]
fn bad_options_are_rejected_with_slurm_messages() {
    let c = Cluster::start(1, 2, 30);
    let w = tempfile::tempdir().unwrap();
    let o = c.cli(w.path(), "sbatch", &["--bogus", "--wrap", "true"]);
    assert!(!o.status.success());
    assert!(
        err(&o).contains("unrecognized option '--bogus'"),
        "{}",
        err(&o)
    );
    let o = c.cli(w.path(), "sbatch", &["-N", "x", "--wrap", "true"]);
    assert!(!o.status.success());
    let o = c.cli(w.path(), "squeue", &["-t", "NOPE"]);
    assert!(!o.status.success());
    let o = c.cli(w.path(), "scancel", &["abc"]);
    assert!(!o.status.success());
    assert!(err(&o).contains("Invalid job id abc"));
    // Unknown job ids: exit 0 and, unless -v, silence (Slurm 22.05's behaviour).
    let o = c.cli(w.path(), "scancel", &["424242"]);
    assert!(o.status.success());
    assert_eq!(err(&o), "");
    let o = c.cli(w.path(), "scancel", &["-v", "424242"]);
    assert!(o.status.success());
    assert!(err(&o).contains("Kill job error on job id 424242: Invalid job id specified"));
}

#[test]
fn scontrol_holds_releases_and_updates_pending_jobs() {
    let c = Cluster::start(2, 2, 30);
    let w = tempfile::tempdir().unwrap();
    let w = w.path();
    let id = c.sbatch(w, &["--hold", "-J", "first", "--wrap", "true"]);
    let ids = id.to_string();
    // Held by the user at submission; root's hold makes it an admin hold.
    assert_eq!(c.job(id).unwrap().reason, "JobHeldUser");
    assert!(c.cli(w, "scontrol", &["hold", &ids]).status.success());
    assert_eq!(c.job(id).unwrap().reason, "JobHeldAdmin");
    // Updates: validated like submissions.
    let o = c.cli(
        w,
        "scontrol",
        &["update", &format!("JobId={id}"), "Partition=nope"],
    );
    assert!(!o.status.success());
    assert!(
        err(&o).contains("Invalid partition name specified"),
        "{}",
        err(&o)
    );
    let o = c.cli(
        w,
        "scontrol",
        &[
            "update",
            &format!("JobId={id}"),
            "TimeLimit=3",
            "Name=second",
            "Partition=short",
        ],
    );
    assert!(o.status.success(), "{}", err(&o));
    let j = c.job(id).unwrap();
    assert_eq!(
        (j.name.as_str(), j.partition.as_str(), j.time_limit_min),
        ("second", "short", Some(3))
    );
    // Release by name; the job then runs to completion.
    assert!(c
        .cli(w, "scontrol", &["release", "jobname=second"])
        .status
        .success());
    assert_eq!(
        c.wait_done(id, Duration::from_secs(10)).state,
        JobState::Completed
    );
    // Finished jobs cannot be changed; unknown ids are errors.
    let o = c.cli(w, "scontrol", &["hold", &ids]);
    assert!(!o.status.success());
    assert!(
        err(&o).contains("already completing or completed"),
        "{}",
        err(&o)
    );
    let o = c.cli(w, "scontrol", &["release", "99999"]);
    assert!(err(&o).contains("Invalid job id specified"));

    // sdiag reports what happened, in the layout monitoring tools parse.
    let o = c.cli(w, "sdiag", &[]);
    assert!(o.status.success());
    let out = text(&o);
    assert!(out.contains("Jobs submitted: 1\n"), "{out}");
    assert!(out.contains("Jobs completed: 1\n"), "{out}");
    assert!(out.contains("Server thread count:  1\n"), "{out}");
    assert!(out.contains("\tSubmitJob "), "{out}");
}

#[test]
fn users_cancel_their_own_jobs_and_are_refused_others_per_job() {
    use canopy::wire::auth::{load_key, Authenticator};
    use canopy::wire::connection::Connection;
    use canopy::wire::messages::{Body, CancelRequest};
    use std::sync::Arc;

    let c = Cluster::start(1, 2, 30);
    let w = tempfile::tempdir().unwrap();
    let mine = c.sbatch(w.path(), &["--hold", "--wrap", "true"]);
    // A second user, 4242, signing with the cluster key as a local signer would vouch.
    let key = load_key(&c.dir.path().join("slurm.key")).unwrap();
    let user = Arc::new(Authenticator::new(key, 4242, 4242));
    let conf = canopy::config::Config::load(&c.conf).unwrap();
    let addr = format!("{}:{}", conf.control_addr, conf.slurmctld_port);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (theirs, reply) = rt.block_on(async {
        let mut conn = Connection::connect(addr.as_str(), user, 1).await.unwrap();
        let submit = canopy::wire::types::JobSubmit {
            name: "theirs".into(),
            hold: true,
            script: "#!/bin/sh\ntrue\n".into(),
            workdir: "/tmp".into(),
            uid: 4242,
            gid: 4242,
            ..Default::default()
        };
        let theirs = match conn
            .request(&Body::SubmitJob(Box::new(submit)))
            .await
            .unwrap()
            .body
        {
            Body::SubmitReply(r) => r.job_id,
            other => panic!("{other:?}"),
        };
        let req = CancelRequest {
            job_ids: vec![theirs, mine],
            signal: None,
            batch_only: false,
            exact: false,
        };
        (
            theirs,
            conn.request(&Body::CancelJobs(req)).await.unwrap().body,
        )
    });
    let Body::CancelReply(r) = reply else {
        panic!("{reply:?}")
    };
    let result = |id| {
        r.results
            .iter()
            .find(|(j, _)| *j == id)
            .map(|(_, e)| e.clone())
    };
    assert_eq!(result(theirs), Some(None), "own job cancelled");
    assert_eq!(
        result(mine),
        Some(Some("Access/permission denied".to_string()))
    );
    assert_eq!(c.job(theirs).unwrap().state, JobState::Cancelled);
    assert_eq!(c.job(mine).unwrap().state, JobState::Pending);
}

#[test]
fn begin_time_defers_a_job_until_it_comes() {
    let c = Cluster::start(1, 2, 30);
    let w = tempfile::tempdir().unwrap();
    let w = w.path();
    let later = c.sbatch(w, &["--begin=now+3", "--wrap", "true"]);
    let now = c.sbatch(w, &["--wrap", "true"]);
    // The deferred job holds no place in line: the one behind it runs first.
    assert_eq!(
        c.wait_done(now, Duration::from_secs(20)).state,
        JobState::Completed
    );
    let o = c.cli(
        w,
        "squeue",
        &["-j", &later.to_string(), "-h", "-o", "%i %T %r"],
    );
    assert_eq!(text(&o), format!("{later} PENDING BeginTime\n"));
    let j = c.job(later).unwrap();
    assert!(j.eligible_time.unwrap() > j.submit_time, "{j:?}");
    assert_eq!(
        c.wait_done(later, Duration::from_secs(20)).state,
        JobState::Completed
    );
    let o = c.cli(w, "sbatch", &["--begin=yesterday-ish", "--wrap", "true"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        err(&o),
        "sbatch: error: Invalid time specification yesterday-ish\n"
    );
}

#[test]
fn scontrol_reconfigure_applies_a_reread_slurm_conf_or_changes_nothing() {
    let c = Cluster::start(2, 2, 30);
    let w = tempfile::tempdir().unwrap();
    let w = w.path();
    let original = std::fs::read_to_string(&c.conf).unwrap();
    let part = |name: &str| {
        let o = c.cli(w, "scontrol", &["show", "partition", name, "-o"]);
        format!("{}{}", text(&o), err(&o))
    };
    // A job pending in `short` (held) must survive every reconfigure below.
    let held = c.sbatch(w, &["-p", "short", "--hold", "--wrap", "true"]);

    // Partitions change and a new one appears; KillWait changes too. The
    // command is silent on success, as Slurm's is, and `reconfig` is enough.
    let edited = original
        .replace("MaxTime=5 MaxNodes=2", "MaxTime=7 MaxNodes=2")
        .replace("KillWait=2", "KillWait=3")
        + "PartitionName=extra Nodes=n2 MaxTime=3 State=UP\n";
    std::fs::write(&c.conf, &edited).unwrap();
    let o = c.cli(w, "scontrol", &["reconfig"]);
    assert!(
        o.status.success() && o.stdout.is_empty() && o.stderr.is_empty(),
        "{o:?}"
    );
    assert!(
        part("short").contains("MaxTime=00:07:00"),
        "{}",
        part("short")
    );
    assert!(part("extra").contains("Nodes=n2"), "{}", part("extra"));
    let id = c.sbatch(
        w,
        &[
            "-p",
            "extra",
            "--wrap",
            "echo $SLURM_JOB_PARTITION $SLURMD_NODENAME",
        ],
    );
    c.wait_done(id, Duration::from_secs(30));
    assert_eq!(
        std::fs::read_to_string(w.join(format!("slurm-{id}.out"))).unwrap(),
        "extra n2\n"
    );
    // The new limit is enforced at submission.
    let o = c.cli(w, "sbatch", &["-p", "extra", "-t", "4", "--wrap", "true"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        err(&o).contains("Requested time limit is invalid"),
        "{}",
        err(&o)
    );

    // Removing a partition that still has a job is refused whole.
    std::fs::write(
        &c.conf,
        edited
            .lines()
            .filter(|l| !l.starts_with("PartitionName=short"))
            .fold(String::new(), |acc, l| acc + l + "\n"),
    )
    .unwrap();
    let o = c.cli(w, "scontrol", &["reconfigure"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        err(&o),
        "slurm_reconfigure error: partition short was removed but still has 1 active job(s); \
         nothing was changed\n"
    );
    assert!(part("extra").contains("Nodes=n2"));

    // What only a restart can apply is named and refused.
    std::fs::write(&c.conf, edited.replace("TreeWidth=2", "TreeWidth=3")).unwrap();
    let o = c.cli(w, "scontrol", &["reconfigure"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        err(&o).starts_with("slurm_reconfigure error: TreeWidth changed"),
        "{}",
        err(&o)
    );

    // A file with a bad line is refused by the controller too (asked over
    // the wire: the CLI itself would stop at the same line first).
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut client = rt
        .block_on(canopy::cli::client::Client::connect(Some(&c.conf)))
        .unwrap();
    std::fs::write(&c.conf, format!("{edited}BogusKey=1\n")).unwrap();
    match rt.block_on(client.call(canopy::wire::messages::Body::Reconfigure)) {
        Err(canopy::cli::client::CliError::Refused(e)) => assert!(
            e.message.ends_with("unrecognized key 'BogusKey'"),
            "{}",
            e.message
        ),
        other => panic!("expected a refusal, got {other:?}"),
    }
    // After all the refusals the last good configuration still serves.
    std::fs::write(&c.conf, &edited).unwrap();
    assert!(part("short").contains("MaxTime=00:07:00"));
    assert_eq!(c.job(held).unwrap().state, JobState::Pending);
    ok_release_and_finish(&c, w, held);
}

fn ok_release_and_finish(c: &Cluster, w: &std::path::Path, id: u32) {
    let o = c.cli(w, "scontrol", &["release", &id.to_string()]);
    assert!(o.status.success(), "{}", err(&o));
    let j = c.wait_done(id, Duration::from_secs(30));
    assert_eq!(j.state, JobState::Completed);
}

/// Read `cmd args` (which repeats forever) until `blocks` listings have come,
/// then stop it; the listings, each ending in its blank line.
fn repeated(c: &Cluster, w: &std::path::Path, cmd: &str, args: &[&str], blocks: usize) -> String {
    use std::io::BufRead;
    let mut child = std::process::Command::new(common::bin("canopy"))
        .arg(cmd)
        .args(args)
        .current_dir(w)
        .env("CANOPY_CONF", &c.conf)
        .env_remove("SQUEUE_FORMAT")
        .env_remove("SINFO_FORMAT")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = String::new();
    let mut seen = 0;
    for line in std::io::BufReader::new(child.stdout.take().unwrap()).lines() {
        let line = line.unwrap();
        seen += usize::from(line.is_empty());
        out.push_str(&line);
        out.push('\n');
        if seen == blocks {
            break;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    out
}

#[test]
fn iterate_lists_again_with_the_date_line_until_stopped() {
    let c = Cluster::start(2, 2, 30);
    let w = tempfile::tempdir().unwrap();
    let w = w.path();
    let held = c.sbatch(w, &["--hold", "--wrap", "true"]);
    let out = repeated(&c, w, "squeue", &["-i", "1", "-o", "%i %t"], 2);
    let blocks: Vec<&str> = out.split_terminator("\n\n").collect();
    assert_eq!(blocks.len(), 2, "{out}");
    for b in blocks {
        let lines: Vec<&str> = b.lines().collect();
        // `Sat Nov 21 10:00:00 2026`, as -l prints it, then the listing.
        assert!(
            chrono::NaiveDateTime::parse_from_str(lines[0], "%a %b %e %H:%M:%S %Y").is_ok(),
            "{out}"
        );
        assert_eq!(
            lines[1..],
            ["JOBID ST".to_string(), format!("{held} PD")],
            "{out}"
        );
    }
    // -h: no header and no date line; sinfo repeats the same way.
    let out = repeated(&c, w, "squeue", &["-h", "-i", "1", "-o", "%i"], 2);
    assert_eq!(out, format!("{held}\n\n{held}\n\n"));
    let out = repeated(&c, w, "sinfo", &["-h", "-i", "1", "-o", "%D %t"], 2);
    assert_eq!(out, "2 idle\n\n2 idle\n\n");
    for cmd in ["squeue", "sinfo"] {
        let o = c.cli(w, cmd, &["-i", "0"]);
        assert_eq!(o.status.code(), Some(1));
        assert_eq!(err(&o), format!("{cmd}: error: --iterate=0\n\n"));
    }
}

#[test]
fn cluster_filter_sort_and_single_cluster_options() {
    // Nodes with room for a 2G job.
    let c = Cluster::start_with(3, 2, 30, "NodeName=DEFAULT CPUs=2 RealMemory=4096\n");
    let w = tempfile::tempdir().unwrap();
    let w = w.path();
    let mem = c.sbatch(w, &["--hold", "--mem=2G", "--wrap", "true"]);
    let run = c.sbatch(w, &["-N2", "--wrap", "sleep 60"]);
    c.wait_for(Duration::from_secs(10), "job running", |c| {
        c.job(run).is_some_and(|j| j.state == JobState::Running)
    });

    // -M: this cluster by name gets Slurm's CLUSTER line; another is refused.
    let o = c.cli(w, "squeue", &["-M", "test", "-h", "-o", "%i"]);
    assert_eq!(text(&o), format!("CLUSTER: test\n{mem}\n{run}\n"));
    let o = c.cli(w, "sinfo", &["--clusters=all", "-h", "-o", "%D %t"]);
    assert_eq!(text(&o), "CLUSTER: test\n2 mix\n1 idle\n");
    let o = c.cli(w, "squeue", &["-M", "other"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        err(&o),
        "squeue: error: 'other' can't be reached now, or it is an invalid entry for \
         --cluster.  Use 'sacctmgr list clusters' to see available clusters.\n"
    );

    // sbatch -M: the job id comes with the cluster's name.
    let o = c.cli(w, "sbatch", &["-M", "test", "--hold", "--wrap", "true"]);
    let said = text(&o);
    assert!(
        said.starts_with("Submitted batch job ") && said.ends_with(" on cluster test\n"),
        "{said}"
    );
    let o = c.cli(
        w,
        "sbatch",
        &["--clusters=test", "--parsable", "--hold", "--wrap", "true"],
    );
    assert!(text(&o).trim_end().ends_with(";test"), "{}", text(&o));
    let o = c.cli(w, "sbatch", &["-M", "other", "--wrap", "true"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        err(&o).starts_with("sbatch: error: 'other' can't be reached now"),
        "{}",
        err(&o)
    );
    for id in text(&c.cli(w, "squeue", &["-h", "-t", "PD", "-o", "%i"])).lines() {
        if id != mem.to_string() {
            c.cli(w, "scancel", &[id]);
        }
    }

    // No job has a QOS, reservation or license: naming one matches none.
    for f in [["-q", "normal"], ["-R", "maint"], ["-L", "matlab"]] {
        let o = c.cli(w, "squeue", &[f[0], f[1], "-h"]);
        assert_eq!((text(&o), err(&o)), (String::new(), String::new()), "{f:?}");
    }
    // --noconvert: memory as stored.
    let o = c.cli(w, "squeue", &["--noconvert", "-h", "-o", "%i %m"]);
    assert_eq!(text(&o), format!("{mem} 2048M\n{run} 0\n"));
    let o = c.cli(w, "squeue", &["-h", "-o", "%i %m"]);
    assert_eq!(text(&o), format!("{mem} 2G\n{run} 0\n"));
    // Single-cluster no-ops: accepted silently, output unchanged.
    // (No TIME column: a running job's may tick between the two calls.)
    let fields = "%i %P %j %u %t %D %R";
    let plain = c.cli(w, "squeue", &["-h", "-o", fields]);
    let o = c.cli(
        w,
        "squeue",
        &[
            "-h",
            "-o",
            fields,
            "--hide",
            "--local",
            "--sibling",
            "--federation",
            "-P",
            "--array-unique",
        ],
    );
    assert_eq!((text(&o), err(&o)), (text(&plain), String::new()));

    // sinfo -S: fields ascending or (-) descending, in order of importance.
    let o = c.cli(w, "sinfo", &["-N", "-h", "-S", "-N", "-o", "%N"]);
    // (n1 and n2 are also in partition short.)
    assert_eq!(text(&o), "n3\nn2\nn2\nn1\nn1\n");
    let o = c.cli(w, "sinfo", &["-N", "-h", "-S", "t,-N", "-o", "%N %t"]);
    assert_eq!(text(&o), "n3 idle\nn2 mix\nn2 mix\nn1 mix\nn1 mix\n");
    let o = c.cli(w, "sinfo", &["-h", "-S", "+D", "-o", "%D %t"]);
    assert_eq!(text(&o), "1 idle\n2 mix\n");
    let o = c.cli(w, "sinfo", &["-T"]);
    assert_eq!(text(&o), "No reservations in the system\n");
}

#[test]
fn reservations_licenses_and_gres_are_checked_as_slurm_does() {
    let c = Cluster::start_with(1, 2, 30, "Licenses=matlab:2,fluent\n");
    let w = tempfile::tempdir().unwrap();
    let w = w.path();
    let refused = |cmd: &str, args: &[&str], expect: &str| {
        let o = c.cli(w, cmd, args);
        assert_eq!(o.status.code(), Some(1), "{cmd} {args:?}");
        assert!(err(&o).ends_with(expect), "{cmd} {args:?}: {}", err(&o));
    };
    // There are no reservations: any name is refused by the controller.
    refused(
        "sbatch",
        &["--reservation=maint", "--wrap", "true"],
        "sbatch: error: Batch job submission failed: Requested reservation is invalid\n",
    );
    refused(
        "srun",
        &["--reservation", "maint", "true"],
        "srun: error: Unable to allocate resources: Requested reservation is invalid\n",
    );
    // Licenses: configured names only.
    refused(
        "sbatch",
        &["-L", "matlab:1,abaqus", "--wrap", "true"],
        "sbatch: error: Batch job submission failed: Invalid license specification\n",
    );
    let id = c.sbatch(w, &["--hold", "-L", "matlab:1,fluent", "--wrap", "true"]);
    assert!(c.job(id).is_some());
    // No GresTypes: a GPU request is refused before anything is sent.
    for args in [
        &["--gres=gpu:1", "--wrap", "true"][..],
        &["--gpus-per-node=2", "--wrap", "true"][..],
    ] {
        refused(
            "sbatch",
            args,
            "sbatch: error: Invalid generic resource (gres) specification\n",
        );
    }
    refused(
        "salloc",
        &["--gpus=1", "true"],
        "salloc: error: Invalid generic resource (gres) specification\n",
    );
    let o = c.cli(w, "scontrol", &["show", "res"]);
    assert_eq!(
        (o.status.code(), text(&o)),
        (Some(0), "No reservations in the system\n".into())
    );
    let o = c.cli(w, "scontrol", &["show", "reservation", "maint"]);
    assert_eq!(
        (o.status.code(), text(&o)),
        (Some(1), "Reservation maint not found\n".into())
    );
    let o = c.cli(w, "scontrol", &["show", "config"]);
    assert!(text(&o).contains("\nGresTypes               = (null)\n"));
    assert!(text(&o).contains("\nLicenses                = matlab,fluent\n"));
}
