//! `salloc` and `sshare` against a live cluster: salloc grants an
//! allocation, runs the command with the job's environment (srun inside it
//! uses the allocation), exits with the command's code and releases the job.

mod common;

use canopy::wire::types::JobState;
use common::Cluster;

#[test]
fn salloc_runs_the_command_in_an_allocation_and_releases_it() {
    let c = Cluster::start(2, 2, 30);
    let w = tempfile::tempdir().unwrap();
    let w = w.path();
    let o = c.cli(
        w,
        "salloc",
        &[
            "-N",
            "2",
            "sh",
            "-c",
            "echo id=$SLURM_JOB_ID nodes=$SLURM_JOB_NODELIST n=$SLURM_NNODES; srun -l hostname | sort; exit 3",
        ],
    );
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{stdout}{stderr}");
    let id: u32 = stdout
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("id="))
        .and_then(|l| l.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no id in {stdout}"));
    assert!(stdout.contains("nodes=n[1-2] n=2"), "{stdout}");
    let host = nix::unistd::gethostname().unwrap();
    let host = host.to_string_lossy();
    assert!(stdout.contains(&format!("0: {host}")), "{stdout}");
    assert!(stdout.contains(&format!("1: {host}")), "{stdout}");
    assert!(
        stderr.contains(&format!("salloc: Granted job allocation {id}")),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!("salloc: Relinquishing job allocation {id}")),
        "{stderr}"
    );
    let job = c.wait_done(id, std::time::Duration::from_secs(20));
    assert_eq!((job.state, job.exit_code), (JobState::Failed, (3, 0)));
    // The step ran inside the allocation: sacct lists it under the job.
    let acct = c.cli(
        w,
        "sacct",
        &["-j", &id.to_string(), "-P", "-n", "-o", "JobID"],
    );
    let acct = String::from_utf8_lossy(&acct.stdout);
    assert_eq!(acct, format!("{id}\n{id}.0\n"));
    // A bad option is refused before anything is allocated.
    let o = c.cli(w, "salloc", &["--nodes=x", "true"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).starts_with("salloc: error: Invalid numeric value"));
}

#[test]
fn sshare_answers_with_the_tree_of_accounts_and_users() {
    let c = Cluster::start(1, 2, 30);
    let w = tempfile::tempdir().unwrap();
    let w = w.path();
    c.sbatch(w, &["--hold", "-A", "chem", "--wrap", "true"]);
    let o = c.cli(w, "sshare", &["-n", "-P", "-o", "account,fairshare"]);
    assert!(o.status.success());
    // root, the job's account, and the caller's own row in it.
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "root|\n chem|\n  chem|1.000000\n"
    );
    let o = c.cli(w, "sshare", &["-a", "-P", "-o", "Account,User,NormShares"]);
    let user = nix::unistd::User::from_uid(nix::unistd::getuid())
        .unwrap()
        .unwrap()
        .name;
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        format!(
            "Account|User|NormShares\nroot||0.000000\n chem||1.000000\n  chem|{user}|1.000000\n"
        )
    );
    let o = c.cli(w, "sshare", &["-o", "nosuch"]);
    assert_eq!(o.status.code(), Some(1));
}

#[test]
fn no_shell_keeps_the_allocation_and_a_revoke_is_reported() {
    let c = Cluster::start(1, 2, 30);
    let w = tempfile::tempdir().unwrap();
    let w = w.path();
    let err = |o: &std::process::Output| String::from_utf8_lossy(&o.stderr).into_owned();

    // --no-shell: granted, and left for steps to use through --jobid.
    let o = c.cli(w, "salloc", &["--no-shell", "-N1"]);
    assert!(o.status.success(), "{o:?}");
    let id: u32 = err(&o)
        .trim()
        .strip_prefix("salloc: Granted job allocation ")
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{o:?}"));
    let job = c.job(id).unwrap();
    assert_eq!(
        (job.state, job.name.as_str()),
        (JobState::Running, "no-shell")
    );
    let o = c.cli(
        w,
        "srun",
        &["--jobid", &id.to_string(), "printenv", "SLURM_JOB_ID"],
    );
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        format!("{id}\n"),
        "{o:?}"
    );
    c.cli(w, "scancel", &[&id.to_string()]);
    c.wait_done(id, std::time::Duration::from_secs(20));

    // Cancelled under a running command: "revoked". Without -K the command
    // runs on; with -K it gets SIGTERM. Nothing is relinquished after.
    for (kill, expect) in [(false, 0), (true, 9)] {
        let mut args = vec!["-N1"];
        if kill {
            args.push("-K");
        }
        let script = format!(
            "trap 'echo got-term; exit 9' TERM; echo $SLURM_JOB_ID > {}/id; \
             for i in $(seq 1 50); do sleep 0.1; done; echo ran-on",
            w.display()
        );
        args.extend(["bash", "-c", &script]);
        let mut child = std::process::Command::new(common::bin("canopy"))
            .arg("salloc")
            .args(&args)
            .current_dir(w)
            .env("CANOPY_CONF", &c.conf)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        c.wait_for(
            std::time::Duration::from_secs(15),
            "salloc's command",
            |_| std::fs::read_to_string(w.join("id")).is_ok_and(|s| s.ends_with('\n')),
        );
        let id = std::fs::read_to_string(w.join("id")).unwrap();
        std::fs::remove_file(w.join("id")).unwrap();
        c.cli(w, "scancel", &[id.trim()]);
        let _ = child.stdin.take();
        let o = child.wait_with_output().unwrap();
        let (so, se) = (String::from_utf8_lossy(&o.stdout), err(&o));
        assert_eq!(o.status.code(), Some(expect), "{so}{se}");
        assert!(
            se.contains(&format!(
                "salloc: Job allocation {} has been revoked.\n",
                id.trim()
            )),
            "{se}"
        );
        assert!(!se.contains("Relinquishing"), "{se}");
        assert_eq!(so, if kill { "got-term\n" } else { "ran-on\n" });
    }
}
