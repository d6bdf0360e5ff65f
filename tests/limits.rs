//! Many users on one cluster, against a live controller: what one user can
//! submit is bounded (string sizes, the script size, a per-user job cap),
//! users may only lower time limits, a job carries its credential's
//! identity (root's `--uid` really runs the job as that user), and
//! `PrivateData` hides other users' jobs and the nodes. Users are played by
//! `nobody` through the real CLI, and by uid 4242 signing frames directly;
//! both need root (to start jobs as another user and to hand nobody a key
//! copy), so without it these fail under CI and are skipped elsewhere.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Output;
use std::sync::Arc;
use std::time::Duration;

use canopy::cli::client::{CliError, Client};
use canopy::wire::auth::{load_key, Authenticator};
use canopy::wire::connection::Connection;
use canopy::wire::messages::{Body, ErrorCode, ErrorReply};
use canopy::wire::types::{JobState, JobSubmit};
use common::{require, Cluster};

const NOBODY: u32 = 65534;
const TOO_LONG: &str = "Pathname of a file, directory or other parameter too long";
const SUBMIT_LIMIT: &str =
    "Job violates accounting/QOS policy (job submit limit, user's size and/or time limits)";

fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn out(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn chmod(p: &Path, mode: u32) {
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn give_to_nobody(p: &Path) {
    let who = Some(nix::unistd::Uid::from_raw(NOBODY));
    nix::unistd::chown(p, who, Some(nix::unistd::Gid::from_raw(NOBODY))).unwrap();
}

/// A home for `nobody` with a configuration including the cluster's and a
/// key copy they can read.
fn nobody_home(c: &Cluster) -> tempfile::TempDir {
    chmod(c.dir.path(), 0o755);
    let home = tempfile::tempdir().unwrap();
    chmod(home.path(), 0o755);
    give_to_nobody(home.path());
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

fn parsable_id(o: &Output) -> u32 {
    assert!(o.status.success(), "sbatch: {}", err(o));
    out(o).trim().parse().unwrap()
}

/// Submit `s` as root straight to the controller, past sbatch's own checks.
fn submit_raw(c: &Cluster, s: JobSubmit) -> Result<u32, ErrorReply> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut client = Client::connect(Some(&c.conf)).await.unwrap();
        match client.call(Body::SubmitJob(Box::new(s))).await {
            Ok(Body::SubmitReply(r)) => Ok(r.job_id),
            Err(CliError::Refused(e)) => Err(e),
            other => panic!("{other:?}"),
        }
    })
}

fn held(name: &str) -> JobSubmit {
    JobSubmit {
        name: name.into(),
        hold: true,
        script: "#!/bin/sh\ntrue\n".into(),
        workdir: "/tmp".into(),
        submit_dir: "/tmp".into(),
        command: "(null)".into(),
        ..Default::default()
    }
}

#[test]
fn what_one_user_submits_is_bounded_and_their_identity_is_the_credentials() {
    if !require(nix::unistd::Uid::effective().is_root(), "root") {
        return;
    }
    let c = Cluster::start_with(
        1,
        2,
        30,
        "SchedulerParameters=max_script_size=2000,max_submit_jobs_per_user=3\n\
         PrivateData=jobs,nodes\n",
    );
    let home = nobody_home(&c);
    let home = home.path();
    let w = tempfile::tempdir().unwrap();
    let w = w.path();

    // 1. Strings: sbatch refuses before sending, the controller refuses a
    // client that does not, and scontrol update is held to the same bound.
    let long = "x".repeat(1100);
    let o = c.cli(w, "sbatch", &["-J", &long, "--wrap", "true"]);
    assert!(!o.status.success());
    assert_eq!(
        err(&o),
        format!(
            "sbatch: error: Batch job submission failed: {TOO_LONG} \
             (--job-name is 1100 bytes; the limit is 1024)\n"
        )
    );
    let e = submit_raw(&c, held(&"n".repeat(1 << 20))).unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidRequest);
    assert!(e.message.starts_with(TOO_LONG) && e.message.contains("--job-name"));
    let mut comment = held("c");
    comment.comment = Some("c".repeat(5000));
    assert!(submit_raw(&c, comment)
        .unwrap_err()
        .message
        .contains("--comment is 5000 bytes"));
    let mine = c.sbatch(w, &["--hold", "-J", "mine", "--wrap", "true"]);
    let o = c.cli(
        w,
        "scontrol",
        &["update", &format!("JobId={mine}"), &format!("Name={long}")],
    );
    assert!(!o.status.success());
    assert_eq!(
        err(&o),
        format!("Job {mine}: {TOO_LONG} (Name is 1100 bytes; the limit is 1024)\n")
    );
    assert_eq!(c.job(mine).unwrap().name, "mine");

    // 2. The script: max_script_size, early in sbatch and in the controller.
    let script = w.join("big.sh");
    std::fs::write(&script, format!("#!/bin/sh\n{}\ntrue\n", "#".repeat(2990))).unwrap();
    let o = c.cli(w, "sbatch", &[script.to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(
        err(&o).contains(&format!(
            "{TOO_LONG} (batch script is 3006 bytes; the limit is 2000)"
        )),
        "{}",
        err(&o)
    );
    let mut big = held("big");
    big.script = format!("#!/bin/sh\n{}", "#".repeat(5000));
    assert!(submit_raw(&c, big)
        .unwrap_err()
        .message
        .contains("batch script is 5010 bytes"));

    // --mail-user that MailProg could read as an option is refused.
    let o = c.cli(
        w,
        "sbatch",
        &["--mail-user=-oProxyCommand=x", "--wrap", "true"],
    );
    assert!(!o.status.success());
    assert!(err(&o).contains("Invalid --mail-user"), "{}", err(&o));

    // 5. Root's --uid runs the job as that user, really.
    let o = c.cli(
        home,
        "sbatch",
        &[
            "--parsable",
            "--uid=nobody",
            "-o",
            "who-%j.out",
            "--wrap",
            "id -u; id -g",
        ],
    );
    let as_nobody_job = parsable_id(&o);
    let done = c.wait_done(as_nobody_job, Duration::from_secs(30));
    assert_eq!(done.state, JobState::Completed);
    assert_eq!(done.uid, NOBODY);
    assert_eq!(
        std::fs::read_to_string(home.join(format!("who-{as_nobody_job}.out"))).unwrap(),
        "65534\n65534\n"
    );
    // Anyone else is refused --uid and --gid, as by Slurm's sbatch.
    for opt in ["--uid=root", "--gid=root"] {
        let o = as_nobody(&c, home, "sbatch", &[opt, "--wrap", "true"]);
        assert!(!o.status.success());
        let name = &opt[2..5];
        assert_eq!(
            err(&o),
            format!("sbatch: error: --{name} only permitted by root user\n")
        );
    }
    // A body claiming another group than the credential's is refused.
    let key = load_key(&c.dir.path().join("slurm.key")).unwrap();
    let user = Arc::new(Authenticator::new(key, 4242, 4242));
    let conf = canopy::config::Config::load(&c.conf).unwrap();
    let addr = format!("{}:{}", conf.control_addr, conf.slurmctld_port);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let forged = rt.block_on(async {
        let mut conn = Connection::connect(addr.as_str(), user, 1).await.unwrap();
        let mut s = held("forged");
        s.uid = 4242;
        s.gid = 0;
        conn.request(&Body::SubmitJob(Box::new(s)))
            .await
            .unwrap()
            .body
    });
    match forged {
        Body::Error(e) => {
            assert_eq!(e.code, ErrorCode::PermissionDenied);
            assert_eq!(e.message, "Access/permission denied");
        }
        other => panic!("forged gid accepted: {other:?}"),
    }

    // 3. The per-user cap: three of nobody's jobs, array tasks counted.
    let mut ids = Vec::new();
    for _ in 0..3 {
        let o = as_nobody(
            &c,
            home,
            "sbatch",
            &["--parsable", "--hold", "-t", "10", "--wrap", "true"],
        );
        ids.push(parsable_id(&o));
    }
    for extra in [
        &["--wrap", "true"][..],
        &["--array=1-2", "--wrap", "true"][..],
    ] {
        let mut args = vec!["--hold"];
        args.extend_from_slice(extra);
        let o = as_nobody(&c, home, "sbatch", &args);
        assert!(!o.status.success());
        assert_eq!(
            err(&o),
            format!("sbatch: error: Batch job submission failed: {SUBMIT_LIMIT}\n")
        );
    }
    // Root is not capped, and others are not held back by nobody's jobs.
    c.sbatch(w, &["--hold", "--wrap", "true"]);

    // 4. Time limits: nobody may lower theirs, not raise it; root may.
    let first = ids[0].to_string();
    let job_arg = format!("JobId={first}");
    let o = as_nobody(&c, home, "scontrol", &["update", &job_arg, "TimeLimit=20"]);
    assert!(!o.status.success());
    assert_eq!(err(&o), format!("Job {first}: Access/permission denied\n"));
    let o = as_nobody(
        &c,
        home,
        "scontrol",
        &["update", &job_arg, "TimeLimit=UNLIMITED"],
    );
    assert!(!o.status.success());
    let o = as_nobody(&c, home, "scontrol", &["update", &job_arg, "TimeLimit=5"]);
    assert!(o.status.success(), "{}", err(&o));
    assert_eq!(c.job(ids[0]).unwrap().time_limit_min, Some(5));
    let o = c.cli(w, "scontrol", &["update", &job_arg, "TimeLimit=30"]);
    assert!(o.status.success(), "{}", err(&o));
    assert_eq!(c.job(ids[0]).unwrap().time_limit_min, Some(30));

    // 6. PrivateData=jobs,nodes: nobody sees only their own jobs, and no
    // nodes; root sees everything.
    let o = as_nobody(&c, home, "squeue", &["-h", "-o", "%i"]);
    assert!(o.status.success(), "{}", err(&o));
    let mut seen: Vec<u32> = out(&o).lines().map(|l| l.trim().parse().unwrap()).collect();
    seen.sort_unstable();
    assert_eq!(seen, ids);
    let o = as_nobody(&c, home, "scontrol", &["show", "job", &mine.to_string()]);
    assert!(!o.status.success());
    assert!(err(&o).contains("Invalid job id specified"), "{}", err(&o));
    let o = as_nobody(&c, home, "sinfo", &["-h", "-N"]);
    assert!(!out(&o).contains("n1"), "{}", out(&o));
    let o = c.cli(w, "squeue", &["-h", "-o", "%i"]);
    let listed = out(&o);
    let all: Vec<&str> = listed.lines().map(str::trim).collect();
    assert!(all.contains(&mine.to_string().as_str()) && all.contains(&first.as_str()));
    let o = c.cli(w, "sinfo", &["-h", "-N"]);
    assert!(out(&o).contains("n1"), "{}", out(&o));
    // `canopy status` keeps the same secrets.
    let o = as_nobody(&c, home, "status", &[]);
    assert!(o.status.success(), "{}", err(&o));
    assert!(!out(&o).contains("n1"), "{}", out(&o));
    let o = c.cli(w, "status", &[]);
    assert!(out(&o).contains("n1"), "{}", out(&o));
}
