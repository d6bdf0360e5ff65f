//! priority/multifactor on real daemons: after one account has used the
//! cluster, another account's job submitted later starts first; sprio and
//! sshare show the factors and the usage; and the usage survives a
//! controller restart.

mod common;

use std::time::Duration;

use canopy::wire::types::JobState;
use common::Cluster;

const CONF: &str = "PriorityType=priority/multifactor\nPriorityWeightFairshare=10000\n\
                    PriorityWeightAge=10\nPriorityDecayHalfLife=1-0\n";

fn text(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn fair_share_starts_the_unused_accounts_job_first_and_usage_survives_a_restart() {
    let mut c = Cluster::start_with(1, 2, 30, CONF);
    let w = tempfile::tempdir().unwrap();
    let w = w.path();
    let long = Duration::from_secs(60);

    // chem uses the whole node for a few seconds.
    let used = c.sbatch(w, &["-A", "chem", "-n2", "--wrap", "sleep 2"]);
    let done = c.wait_done(used, long);
    assert_eq!(done.state, JobState::Completed);

    // A blocker holds the node while chem, then phys, submit.
    let blocker = c.sbatch(w, &["-A", "bio", "-n2", "--wrap", "sleep 4"]);
    c.wait_for(long, "the blocker to run", |c| {
        c.job(blocker).is_some_and(|j| j.state == JobState::Running)
    });
    let chem = c.sbatch(w, &["-A", "chem", "-n2", "--wrap", "true"]);
    let phys = c.sbatch(w, &["-A", "phys", "-n2", "--wrap", "sleep 1"]);

    // sprio: the FAIRSHARE column is there, and phys's job ranks higher.
    let o = c.cli(w, "sprio", &[]);
    assert!(o.status.success(), "{o:?}");
    let out = text(&o);
    assert!(
        out.starts_with("          JOBID PARTITION   PRIORITY       SITE        AGE  FAIRSHARE\n"),
        "{out}"
    );
    let o = c.cli(w, "sprio", &["-h", "-o", "%i %Y %F"]);
    let prio: Vec<(u32, u32, u32)> = text(&o)
        .lines()
        .map(|l| {
            let v: Vec<u32> = l.split_whitespace().map(|x| x.parse().unwrap()).collect();
            (v[0], v[1], v[2])
        })
        .collect();
    assert_eq!(prio.len(), 2, "{prio:?}");
    let of = |id| prio.iter().find(|p| p.0 == id).copied().unwrap();
    assert!(of(phys).1 > of(chem).1, "{prio:?}");
    assert!(of(phys).2 > of(chem).2, "{prio:?}");
    let o = c.cli(w, "sprio", &["-w"]);
    assert_eq!(
        text(&o).lines().nth(1).unwrap(),
        "        Weights                               1         10      10000"
    );

    // phys's job, submitted later, starts before chem's.
    let p = c.wait_done(phys, long);
    let q = c.wait_done(chem, long);
    let (ps, qs) = (p.start_time.unwrap(), q.start_time.unwrap());
    assert!(ps <= qs, "phys started at {ps}, chem at {qs}");
    assert!(
        q.start_time >= p.end_time,
        "chem waited for phys: {q:?} {p:?}"
    );

    // sshare: chem has used the cluster, phys less (it ran a shorter job).
    let user = nix::unistd::User::from_uid(nix::unistd::getuid())
        .unwrap()
        .unwrap()
        .name;
    let o = c.cli(
        w,
        "sshare",
        &["-a", "-P", "-o", "Account,User,RawUsage,FairShare"],
    );
    assert!(o.status.success(), "{o:?}");
    let rows = text(&o);
    let row = |acct: &str| -> (u64, f64) {
        let line = rows
            .lines()
            .find(|l| l.starts_with(&format!("  {acct}|{user}|")))
            .unwrap_or_else(|| panic!("no row for {acct}:\n{rows}"));
        let v: Vec<&str> = line.split('|').collect();
        (v[2].parse().unwrap(), v[3].parse().unwrap())
    };
    let (chem_usage, _) = row("chem");
    // 2 CPUs × about 2 s, a little decayed (and printed truncated).
    assert!(chem_usage >= 2, "{rows}");
    assert!(
        rows.starts_with("Account|User|RawUsage|FairShare\nroot||"),
        "{rows}"
    );
    let o = c.cli(w, "sshare", &["-l"]);
    let header = text(&o).lines().next().unwrap().to_string();
    assert_eq!(
        header,
        "             Account       User  RawShares  NormShares    RawUsage   NormUsage  EffectvUsage  FairShare    LevelFS                    GrpTRESMins                    TRESRunMins "
    );

    // A controller restart keeps the usage (the last calculation or job
    // end stored it; the restart reads it back).
    let before = row("chem").0;
    c.kill_ctld();
    c.start_ctld();
    c.wait_for(long, "the controller back", |c| c.job(chem).is_some());
    let o = c.cli(
        w,
        "sshare",
        &["-a", "-P", "-o", "Account,User,RawUsage,FairShare"],
    );
    let rows = text(&o);
    let after: u64 = rows
        .lines()
        .find(|l| l.starts_with(&format!("  chem|{user}|")))
        .and_then(|l| l.split('|').nth(2))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{rows}"));
    // It may have decayed a little (a one-day half-life), never gone.
    assert!(
        after + 1 >= before && after > 0,
        "{before} → {after}\n{rows}"
    );
}

#[test]
fn sprio_refuses_under_basic() {
    let c = Cluster::start(1, 2, 30);
    let w = tempfile::tempdir().unwrap();
    let o = c.cli(w.path(), "sprio", &[]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        "You are not running a supported priority plugin\n(priority/basic).\n\
         Only 'priority/multifactor' is supported.\n"
    );
}
