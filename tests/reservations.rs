//! Advance reservations and licenses on real daemons: a MAINT reservation
//! keeps other jobs off its node and takes its own, a user it does not name
//! is refused, licenses hold a job back until one is free, and
//! reservations outlive a controller restart; the views print them as
//! Slurm does.

mod common;

use std::time::Duration;

use common::Cluster;

fn text(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn err(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

const WAIT: Duration = Duration::from_secs(30);

#[test]
fn reservations_steer_jobs_and_survive_a_restart() {
    let mut c = Cluster::start(2, 2, 30);
    let w = tempfile::tempdir().unwrap();
    let w = w.path();
    let o = c.cli(
        w,
        "scontrol",
        &[
            "create",
            "reservation",
            "ReservationName=maint",
            "StartTime=now",
            "Duration=1:00:00",
            "Nodes=n1",
            "Users=root",
            "Flags=MAINT",
        ],
    );
    assert_eq!(
        (o.status.code(), text(&o), err(&o)),
        (
            Some(0),
            "Reservation created: maint\n".into(),
            String::new()
        )
    );
    // A job without it avoids n1; one with it runs there.
    let outside = c.sbatch(w, &["-N1", "--exclusive", "--wrap", "sleep 30"]);
    let inside = c.sbatch(w, &["--reservation=maint", "--wrap", "sleep 30"]);
    c.wait_for(WAIT, "both jobs running", |c| {
        [outside, inside]
            .iter()
            .all(|&id| c.job(id).is_some_and(|j| !j.nodes.is_empty()))
    });
    assert_eq!(c.job(outside).unwrap().nodes, "n2");
    assert_eq!(c.job(inside).unwrap().nodes, "n1");
    let o = c.cli(w, "squeue", &["-h", "-j", &inside.to_string(), "-o", "%v"]);
    assert_eq!(text(&o), "maint\n");
    let o = c.cli(w, "scontrol", &["show", "job", &inside.to_string()]);
    assert!(
        text(&o).contains("\n   Reservation=maint\n"),
        "{}",
        text(&o)
    );
    // A third job has no node left to it outside the reservation.
    let third = c.sbatch(w, &["-N1", "--exclusive", "--wrap", "true"]);
    c.wait_for(WAIT, "the third job to wait", |c| {
        c.job(third)
            .is_some_and(|j| j.reason == "Resources" || j.reason.starts_with("ReqNodeNotAvail"))
    });
    // A user the reservation does not name is refused at submit.
    let o = c.cli(
        w,
        "scontrol",
        &[
            "create",
            "res",
            "ReservationName=others",
            "StartTime=now",
            "Duration=10",
            "NodeCnt=1",
            "Users=nobody",
            "Flags=IGNORE_JOBS,OVERLAP",
        ],
    );
    assert_eq!(text(&o), "Reservation created: others\n", "{}", err(&o));
    let o = c.cli(w, "sbatch", &["--reservation=others", "--wrap", "true"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        err(&o),
        "sbatch: error: Batch job submission failed: Access denied to requested reservation\n"
    );
    let o = c.cli(
        w,
        "scontrol",
        &[
            "create",
            "res",
            "StartTime=now",
            "Duration=10",
            "Nodes=n2",
            "Users=no_such_user_x",
        ],
    );
    assert_eq!(
        (o.status.code(), err(&o)),
        (
            Some(1),
            "Error creating the reservation: Invalid user id\n".into()
        )
    );
    // The node shows the reservation as Slurm shows it.
    let o = c.cli(w, "scontrol", &["show", "node", "n1"]);
    assert!(
        text(&o).contains("State=MIXED+MAINT+RESERVED ")
            || text(&o).contains("State=ALLOCATED+MAINT+RESERVED "),
        "{}",
        text(&o)
    );
    // Views: scontrol show reservation, sinfo -T.
    let o = c.cli(w, "scontrol", &["show", "reservation", "maint"]);
    let shown = text(&o);
    assert!(
        shown.starts_with("ReservationName=maint StartTime="),
        "{shown}"
    );
    assert!(shown.contains(" Duration=01:00:00\n   Nodes=n1 NodeCnt=1 CoreCnt=2 Features=(null) PartitionName=(null) Flags=MAINT,SPEC_NODES\n   TRES=cpu=2\n   Users=root Groups=(null) Accounts=(null) Licenses=(null) State=ACTIVE BurstBuffer=(null) Watts=n/a\n   MaxStartDelay=(null)\n\n"), "{shown}");
    let o = c.cli(w, "sinfo", &["-T"]);
    let lines: Vec<String> = text(&o).lines().map(str::to_string).collect();
    assert_eq!(
        lines[0],
        "RESV_NAME     STATE           START_TIME             END_TIME     DURATION  NODELIST"
    );
    assert!(lines[1].starts_with("maint        ACTIVE  "), "{lines:?}");
    assert!(lines[1].ends_with("     01:00:00  n1"), "{lines:?}");
    assert!(lines[2].starts_with("others       ACTIVE  "), "{lines:?}");
    // A restart keeps them.
    c.kill_ctld();
    c.start_ctld();
    c.wait_for(WAIT, "the reservations back", |c| {
        matches!(
            c.try_call(canopy::wire::messages::Body::QueryResv),
            Some(canopy::wire::messages::Body::Reservations(r)) if r.len() == 2
        )
    });
    let o = c.cli(w, "scontrol", &["show", "res", "maint", "-o"]);
    assert!(
        text(&o).starts_with("ReservationName=maint "),
        "{}",
        text(&o)
    );
    // Busy: deleting a reservation a job runs in.
    let o = c.cli(w, "scontrol", &["delete", "ReservationName=maint"]);
    assert_eq!(
        err(&o),
        "delete_reservation ReservationName=maint: Requested reservation is in use\n"
    );
    let o = c.cli(w, "scontrol", &["delete", "ReservationName=others"]);
    assert_eq!((o.status.code(), err(&o)), (Some(0), String::new()));
    let o = c.cli(
        w,
        "scontrol",
        &["update", "ReservationName=maint", "Users+=nobody"],
    );
    assert_eq!(text(&o), "Reservation updated.\n", "{}", err(&o));
    let o = c.cli(w, "scontrol", &["show", "res", "-o"]);
    assert!(text(&o).contains(" Users=root,nobody "), "{}", text(&o));
}

#[test]
fn a_job_short_of_licenses_waits_for_one() {
    let c = Cluster::start_with(2, 2, 30, "Licenses=fluent:1\n");
    let w = tempfile::tempdir().unwrap();
    let w = w.path();
    let first = c.sbatch(w, &["-L", "fluent", "--wrap", "sleep 3"]);
    let second = c.sbatch(w, &["-L", "fluent:1", "--wrap", "true"]);
    c.wait_for(WAIT, "the first job running", |c| {
        c.job(first).is_some_and(|j| !j.nodes.is_empty())
    });
    c.wait_for(WAIT, "the second waiting for a license", |c| {
        c.job(second).is_some_and(|j| j.reason == "Licenses")
    });
    let o = c.cli(
        w,
        "squeue",
        &["-h", "-j", &second.to_string(), "-o", "%W %r"],
    );
    assert_eq!(text(&o), "fluent:1 Licenses\n");
    let o = c.cli(w, "scontrol", &["show", "licenses"]);
    assert_eq!(
        text(&o),
        "LicenseName=fluent\n    Total=1 Used=1 Free=0 Reserved=0 Remote=no\n"
    );
    let done = c.wait_done(second, WAIT);
    let first_done = c.job(first).unwrap();
    assert!(
        done.start_time >= first_done.end_time,
        "{:?} vs {:?}",
        done.start_time,
        first_done.end_time
    );
    let o = c.cli(w, "sbatch", &["-L", "fluent:2", "--wrap", "true"]);
    assert_eq!(
        err(&o),
        "sbatch: error: Batch job submission failed: Invalid license specification\n"
    );
}
