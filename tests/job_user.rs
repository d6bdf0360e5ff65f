//! Jobs act with their user's rights on the nodes, not the node daemon's.
//!
//! The daemons run as root here (as on a real site); the jobs are submitted
//! by `nobody` through the real CLI. A user must not get root to create,
//! truncate or read a file they could not touch themselves. These checks need
//! root to start jobs as another user: without it they fail under CI (`CI`
//! set) and are skipped elsewhere, saying so (see `common::require`).

mod common;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::Output;
use std::time::Duration;

use canopy::wire::types::JobState;
use common::{require, Cluster};

const NOBODY: u32 = 65534;

/// Run a canopy command as `nobody`, with a configuration of their own (the
/// cluster's, included); their credentials come from the local signer.
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

fn submit(c: &Cluster, home: &Path, args: &[&str]) -> u32 {
    let mut all = vec!["--parsable"];
    all.extend_from_slice(args);
    let out = as_nobody(c, home, "sbatch", &all);
    assert!(
        out.status.success(),
        "sbatch as nobody: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

fn chmod(p: &Path, mode: u32) {
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn give_to_nobody(p: &Path) {
    let who = Some(nix::unistd::Uid::from_raw(NOBODY));
    nix::unistd::chown(p, who, Some(nix::unistd::Gid::from_raw(NOBODY))).unwrap();
}

#[test]
fn jobs_open_their_files_and_run_as_their_user() {
    // Starting jobs as another user needs root.
    if !require(nix::unistd::Uid::effective().is_root(), "root") {
        return;
    }
    let c = Cluster::start(2, 2, 30);
    // The spool and the command links live in the cluster directory.
    chmod(c.dir.path(), 0o755);
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    chmod(home, 0o755);
    give_to_nobody(home);
    std::fs::write(
        home.join("slurm.conf"),
        format!("Include {}\n", c.conf.display()),
    )
    .unwrap();
    // No key: nobody's commands get their credentials from the signer.

    // Root's private directory, with a file in it that must survive.
    let private = tempfile::tempdir().unwrap();
    let private = private.path();
    chmod(private, 0o700);
    let secret = private.join("secret");
    std::fs::write(&secret, "keep\n").unwrap();

    // A job runs as its user, and its output belongs to them.
    let ok = submit(&c, home, &["-o", "who-%j.out", "--wrap", "id -u; id -g"]);
    assert_eq!(
        c.wait_done(ok, Duration::from_secs(30)).state,
        JobState::Completed
    );
    let out = home.join(format!("who-{ok}.out"));
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "65534\n65534\n");
    assert_eq!(std::fs::metadata(&out).unwrap().uid(), NOBODY);

    // Output into a place only root may write: refused, nothing touched.
    let truncate = submit(
        &c,
        home,
        &["-o", &secret.to_string_lossy(), "--wrap", "true"],
    );
    let create = format!("{}/made/x.out", private.display());
    let mkdir = submit(&c, home, &["-o", &create, "--wrap", "true"]);
    let err = submit(
        &c,
        home,
        &["-e", &secret.to_string_lossy(), "--wrap", "true"],
    );
    // Input the user may not read.
    let read = submit(
        &c,
        home,
        &["-i", &secret.to_string_lossy(), "--wrap", "cat"],
    );
    for id in [truncate, mkdir, err, read] {
        assert_eq!(
            c.wait_done(id, Duration::from_secs(30)).state,
            JobState::Failed,
            "job {id}"
        );
    }
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "keep\n");
    assert!(!private.join("made").exists());
    // A job that could not start leaves no spool directory behind.
    for id in [truncate, mkdir, err, read] {
        for n in ["n1", "n2"] {
            let spool = c
                .dir
                .path()
                .join("spool")
                .join(n)
                .join(format!("job{id:05}"));
            assert!(!spool.exists(), "{}", spool.display());
        }
    }

    // A working directory the user cannot enter: slurmstepd's note, then /tmp.
    let cd = submit(
        &c,
        home,
        &[
            "-D",
            &private.to_string_lossy(),
            "-o",
            &home.join("cd.out").to_string_lossy(),
            "--wrap",
            "pwd",
        ],
    );
    let done = c.wait_done(cd, Duration::from_secs(30));
    assert_eq!(done.state, JobState::Completed);
    let text = std::fs::read_to_string(home.join("cd.out")).unwrap();
    assert_eq!(
        text,
        format!(
            "slurmstepd-{}: error: couldn't chdir to `{}': Permission denied: going to /tmp instead\n/tmp\n",
            done.nodes,
            private.display()
        )
    );

    // srun's tasks: run as the user on every node; their files likewise.
    let o = as_nobody(&c, home, "srun", &["-N2", "-l", "id", "-u"]);
    assert!(o.status.success(), "{o:?}");
    let mut lines: Vec<String> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(String::from)
        .collect();
    lines.sort();
    assert_eq!(lines, ["0: 65534", "1: 65534"]);
    let o = as_nobody(&c, home, "srun", &["-D", &private.to_string_lossy(), "pwd"]);
    assert_eq!(String::from_utf8_lossy(&o.stdout), "/tmp\n", "{o:?}");
    assert!(
        String::from_utf8_lossy(&o.stderr).contains(&format!(
            "slurmstepd-n1: error: couldn't chdir to `{}': Permission denied: going to /tmp instead",
            private.display()
        )),
        "{o:?}"
    );
    let pattern = format!("{}/task-%t", private.display());
    let o = as_nobody(&c, home, "srun", &["-N2", "-o", &pattern, "true"]);
    assert!(!o.status.success(), "{o:?}");
    assert!(!private.join("task-0").exists() && !private.join("task-1").exists());
}
