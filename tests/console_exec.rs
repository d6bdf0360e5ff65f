//! `canopy exec` on a real cluster on loopback: commands run on the nodes
//! through the relay tree (TreeWidth 2, so replies climb through relays),
//! equal results fold into one block with its hostlist, a differing node
//! is shown on its own, exit codes are grouped, a hung command or a hung
//! daemon is named, Ctrl-C keeps what was printed, and an ordinary user
//! may run only where a job of theirs runs.
//!
//! The daemons run as root and the user is made for the test (as in
//! `auth_users.rs`); without root these fail under CI and are skipped
//! elsewhere, saying so (see `common::require`).

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Output;
use std::time::{Duration, Instant};

use canopy::wire::types::JobState;
use common::{as_user, home_for, require, user, Cluster};

/// Node n4 prints something else and exits 3; every other node prints `same`.
const ONE_DIFFERS: &str =
    "if [ \"$SLURMD_NODENAME\" = n4 ]; then echo different; exit 3; fi; echo same";

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn exec(c: &Cluster, args: &[&str]) -> Output {
    c.cli(Path::new("/"), "exec", args)
}

fn root() -> bool {
    require(nix::unistd::Uid::effective().is_root(), "root")
}

#[test]
fn equal_outputs_fold_a_differing_node_stands_apart_and_exit_codes_group() {
    if !root() {
        return;
    }
    let c = Cluster::start(5, 2, 30);

    let o = exec(&c, &["-w", "n[1-5]", "--", "sh", "-c", ONE_DIFFERS]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(3), "largest exit code\n{out}\n{err}");
    assert!(out.contains("n[1-3,5] (4)\n"), "{out}");
    assert_eq!(out.matches("same\n").count(), 1, "folded once:\n{out}");
    assert!(out.contains("n4 (1): exit 3\n"), "{out}");
    assert!(out.contains("different\n"), "{out}");
    assert!(
        out.contains("exit codes: 0: n[1-3,5] (4); 3: n4 (1)\n"),
        "{out}"
    );
    assert!(!out.contains("not finished"), "{out}");

    // The same as JSON: two groups, the larger first, every node counted.
    let o = exec(
        &c,
        &["--json", "-w", "n[1-5]", "--", "sh", "-c", ONE_DIFFERS],
    );
    let (out, err) = text(&o);
    let v: serde_json::Value =
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}\n{err}"));
    assert_eq!(v["targets"], 5);
    assert_eq!(v["groups"].as_array().unwrap().len(), 2, "{out}");
    assert_eq!(v["groups"][0]["nodes"], "n[1-3,5]");
    assert_eq!(v["groups"][0]["output"], "same\n");
    assert_eq!(v["groups"][1]["exit_code"], 3);
    assert_eq!(v["exit_status"], 3);
    assert_eq!(v["not_finished"], "");

    // --diff: the odd node as a diff against the most common output.
    let o = exec(
        &c,
        &["--diff", "-w", "n[1-5]", "--", "sh", "-c", ONE_DIFFERS],
    );
    let (out, _) = text(&o);
    assert!(
        out.contains("n4 (1): exit 3, diff against n[1-3,5]"),
        "{out}"
    );
    assert!(out.contains("- same\n+ different\n"), "{out}");

    // Run as the caller (root here), one line for all five.
    let o = exec(&c, &["-w", "n[1-5]", "id", "-u"]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    assert!(out.contains("n[1-5] (5)\n---"), "{out}");
    assert_eq!(out.matches("0\n").count(), 1, "{out}");

    // Bad input is named.
    let o = exec(&c, &["-w", "n[1-9]", "true"]);
    let (_, err) = text(&o);
    assert!(!o.status.success());
    assert!(err.contains("Invalid node name specified: n6"), "{err}");
    let o = exec(&c, &["-w", "n1", "--timeout", "0", "true"]);
    assert_eq!(o.status.code(), Some(2), "{:?}", text(&o));
    let o = exec(&c, &["-w", "n1", "/no/such/program"]);
    let (out, _) = text(&o);
    assert_eq!(o.status.code(), Some(127), "{out}");
    assert!(out.contains("did not start"), "{out}");

    // A command that ends but leaves something in the background holding
    // its output answers at its own end, not at the time limit.
    let t = Instant::now();
    let o = exec(
        &c,
        &[
            "-w",
            "n[1-2]",
            "--timeout",
            "30",
            "sh",
            "-c",
            "echo left; sleep 60 &",
        ],
    );
    let (out, _) = text(&o);
    assert!(o.status.success(), "{out}");
    assert!(
        out.contains("n[1-2] (2)\n----------------\nleft\n"),
        "{out}"
    );
    assert!(
        t.elapsed() < Duration::from_secs(10),
        "took {:?}",
        t.elapsed()
    );

    // Output beyond the limit is cut, and the report says so.
    let o = exec(
        &c,
        &[
            "-w",
            "n1",
            "--max-output",
            "10",
            "sh",
            "-c",
            "echo 0123456789abcdef",
        ],
    );
    let (out, _) = text(&o);
    assert!(
        out.contains("0123456789\n[output cut: 7 more bytes not kept]"),
        "{out}"
    );
}

#[test]
fn a_hung_command_and_a_hung_daemon_are_named_with_partial_output() {
    if !root() {
        return;
    }
    let mut c = Cluster::start(5, 2, 30);
    // n5 (the last rank, a leaf) stops answering: its daemon is frozen.
    let n5 = c.noded["n5"].id() as i32;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(n5),
        nix::sys::signal::Signal::SIGSTOP,
    )
    .unwrap();
    let script = "if [ \"$SLURMD_NODENAME\" = n2 ]; then echo started; sleep 30; fi; echo done";
    let t = Instant::now();
    let o = exec(&c, &["-w", "n[1-5]", "--timeout", "1", "sh", "-c", script]);
    let took = t.elapsed();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(n5),
        nix::sys::signal::Signal::SIGCONT,
    )
    .unwrap();
    let (out, err) = text(&o);
    assert!(took < Duration::from_secs(15), "took {took:?}");
    assert!(out.contains("n[1,3-4] (3)\n"), "{out}\n{err}");
    assert!(out.contains("n2 (1): timed out"), "{out}");
    assert!(out.contains("started\n"), "what it printed is kept:\n{out}");
    assert!(out.contains("no result from n5: timed out"), "{out}");
    assert!(out.contains("not finished: n[2,5]"), "{out}");
    assert_eq!(o.status.code(), Some(137), "{out}");

    // A node whose daemon is gone fails at once (its link is lost), named,
    // well before the time limit.
    c.kill_node("n4");
    std::thread::sleep(Duration::from_millis(300));
    let t = Instant::now();
    let o = exec(&c, &["-w", "n[1-4]", "--timeout", "20", "true"]);
    let (out, err) = text(&o);
    assert!(
        t.elapsed() < Duration::from_secs(10),
        "took {:?}",
        t.elapsed()
    );
    assert!(out.contains("n[1-3] (3)\n"), "{out}\n{err}");
    assert!(out.contains("no result from n4: "), "{out}");
    assert!(!out.contains("no result from n4: timed out"), "{out}");
    assert!(out.contains("not finished: n4"), "{out}");
    assert_eq!(o.status.code(), Some(1), "a node with no result: {out}");
}

#[test]
fn ctrl_c_prints_what_was_gathered_and_names_the_unfinished_nodes() {
    if !root() {
        return;
    }
    let c = Cluster::start(3, 2, 30);
    let mut child = c.spawn_cli(
        Path::new("/"),
        "exec",
        &[
            "-w",
            "n[1-3]",
            "--timeout",
            "60",
            "sh",
            "-c",
            "echo begun; sleep 60",
        ],
    );
    // Give the command time to start everywhere and print.
    std::thread::sleep(Duration::from_secs(2));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let t = Instant::now();
    while child.try_wait().unwrap().is_none() && t.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        child.try_wait().unwrap().is_some(),
        "canopy exec still running 20 s after Ctrl-C"
    );
    let o = child.wait_with_output().unwrap();
    let (out, err) = text(&o);
    assert!(err.contains("interrupted"), "{err}");
    assert!(out.contains("n[1-3] (3): interrupted"), "{out}\n{err}");
    assert!(out.contains("begun\n"), "{out}");
    assert!(out.contains("not finished: n[1-3]"), "{out}");
    assert!(o.status.code().unwrap_or(0) >= 130, "{:?}", o.status);
}

#[test]
fn ordinary_users_run_only_on_nodes_running_their_jobs() {
    if !root() {
        return;
    }
    let dave = user("canopy-dave");
    let erin = user("canopy-erin");
    let c = Cluster::start(3, 2, 30);
    std::fs::set_permissions(c.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let (hd, he) = (home_for(dave), home_for(erin));
    let (hd, he) = (hd.path(), he.path());

    let o = as_user(
        &c,
        dave,
        hd,
        "sbatch",
        &[
            "--parsable",
            "-w",
            "n2",
            "-o",
            "/dev/null",
            "--wrap",
            "sleep 120",
        ],
    );
    assert!(o.status.success(), "{:?}", text(&o));
    let job: u32 = String::from_utf8_lossy(&o.stdout).trim().parse().unwrap();
    c.wait_for(Duration::from_secs(30), "dave's job running", |c| {
        c.job(job).is_some_and(|j| j.state == JobState::Running)
    });

    // On the node of his job: runs, as dave.
    let o = as_user(&c, dave, hd, "exec", &["-w", "n2", "id", "-u"]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    assert!(
        out.contains(&format!("n2 (1)\n----------------\n{dave}\n")),
        "{out}"
    );

    // Entered as dave, not as the daemon (a root-squashed home refuses
    // root): his passwd home does not exist here, so he starts at /, not in
    // the daemon's working directory.
    let o = as_user(&c, dave, hd, "exec", &["-w", "n2", "pwd"]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    assert!(out.contains("n2 (1)\n----------------\n/\n"), "{out}");

    // Beyond it: refused before anything runs, naming the nodes.
    let o = as_user(&c, dave, hd, "exec", &["-w", "n[1-3]", "id", "-u"]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}\n{err}");
    assert!(err.contains("no running job on n[1,3]"), "{err}");
    assert!(out.is_empty(), "{out}");

    // Another user with no job: refused everywhere, even on dave's node.
    let o = as_user(&c, erin, he, "exec", &["-w", "n2", "id", "-u"]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!("uid {erin} has no running job on n2")),
        "{err}"
    );

    // Erin cannot stop dave's run either: an interrupt names a run by its
    // token, and a node stops only its owner's (checked in exec::remote).
    let o = c.cli(Path::new("/"), "scancel", &[&job.to_string()]);
    assert!(o.status.success(), "{:?}", text(&o));
}

fn cgroups_ready() -> bool {
    let root = nix::unistd::Uid::effective().is_root();
    let mounted = ["freezer", "memory", "cpuset"].iter().all(|c| {
        Path::new("/sys/fs/cgroup")
            .join(c)
            .join("cgroup.procs")
            .exists()
    });
    require(root && mounted, "root and cgroup v1 at /sys/fs/cgroup")
}

/// As pam_slurm_adopt places an ssh session: an ordinary user's command
/// runs in their job's `extern` step, so the job's limits bind it, and
/// what it leaves behind is killed when the run ends. Root is not adopted.
#[test]
fn an_ordinary_users_command_runs_in_their_jobs_cgroup_and_leaves_nothing() {
    if !cgroups_ready() {
        return;
    }
    let frank = user("canopy-frank");
    let c = Cluster::start_with_files(
        2,
        2,
        30,
        "ProctrackType=proctrack/cgroup\nTaskPlugin=task/cgroup\n",
        &[],
        &[],
    );
    std::fs::set_permissions(c.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let hf = home_for(frank);
    let hf = hf.path();
    let o = as_user(
        &c,
        frank,
        hf,
        "sbatch",
        &[
            "--parsable",
            "-w",
            "n1",
            "-o",
            "/dev/null",
            "--wrap",
            "sleep 120",
        ],
    );
    assert!(o.status.success(), "{:?}", text(&o));
    let job: u32 = String::from_utf8_lossy(&o.stdout).trim().parse().unwrap();
    c.wait_for(Duration::from_secs(30), "frank's job running", |c| {
        c.job(job).is_some_and(|j| j.state == JobState::Running)
    });

    let pidfile = hf.join("left.pid");
    let script = format!(
        "cat /proc/self/cgroup; setsid sh -c 'sleep 300 >/dev/null 2>&1 & echo $! > {}'",
        pidfile.display()
    );
    let o = as_user(
        &c,
        frank,
        hf,
        "exec",
        &["-w", "n1", "--", "sh", "-c", &script],
    );
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    let inside = format!("/uid_{frank}/job_{job}/step_extern\n");
    assert!(
        out.lines()
            .any(|l| l.contains(":freezer:") && l.ends_with(&inside[..inside.len() - 1])),
        "not in job {job}'s extern step:\n{out}"
    );
    let pid: i32 = std::fs::read_to_string(&pidfile)
        .unwrap_or_default()
        .trim()
        .parse()
        .expect("the command left a daemon and wrote its pid");
    c.wait_for(
        Duration::from_secs(15),
        "the left-behind daemon killed",
        |_| !common::alive(pid),
    );

    // Root's command is not placed in anyone's job.
    let o = exec(&c, &["-w", "n1", "cat", "/proc/self/cgroup"]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    assert!(!out.contains("step_extern"), "{out}");

    let o = c.cli(Path::new("/"), "scancel", &[&job.to_string()]);
    assert!(o.status.success(), "{:?}", text(&o));
}

/// Distinct large outputs are bounded on the way up, the root's own
/// fan-out included: six nodes' megabyte each do not all come back, and
/// the ones left out are counted as cut.
#[test]
fn distinct_large_outputs_are_bounded_at_the_relays() {
    if !root() {
        return;
    }
    let c = Cluster::start(6, 2, 30);
    let o = exec(
        &c,
        &[
            "--json",
            "--max-output",
            "1000000",
            "-w",
            "n[1-6]",
            "--",
            "sh",
            "-c",
            "head -c 500000 /dev/urandom | od -An -tx1 -v | tr -d ' \\n' | head -c 1000000",
        ],
    );
    let (out, err) = text(&o);
    let v: serde_json::Value = serde_json::from_str(&out)
        .unwrap_or_else(|e| panic!("{e}: {}\n{err}", &out[..out.len().min(500)]));
    let groups = v["groups"].as_array().expect("groups");
    let kept: usize = groups
        .iter()
        .map(|g| g["output"].as_str().map_or(0, str::len))
        .sum();
    // Emptied outputs with equal cuts fold into one group: per node.
    let cut: u64 = groups
        .iter()
        .map(|g| g["cut"].as_u64().unwrap_or(0) * g["count"].as_u64().unwrap_or(0))
        .sum();
    assert_eq!(v["targets"], 6);
    assert!(
        kept <= 4 << 20,
        "{kept} bytes of output came back (a relay keeps 4 MiB)"
    );
    assert!(
        kept as u64 + cut >= 6_000_000,
        "every byte kept or counted: {kept} + {cut}: {:?} missing {}",
        groups
            .iter()
            .map(|g| (
                g["nodes"].clone(),
                g["output"].as_str().map_or(0, str::len),
                g["cut"].clone()
            ))
            .collect::<Vec<_>>(),
        v["not_finished"]
    );
}
