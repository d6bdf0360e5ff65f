//! Checking a site's configuration without starting anything (`canopy-ctld --check`,
//! `canopy config check`), on fixtures written here with the features real sites use and
//! on the fifteen real sites' files when they are at hand; and the controller's one
//! summary line per ignored setting that changes behaviour, at start and on reconfigure.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use common::{bin, outside_material, Cluster};

fn run(cmd: &str, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(bin(cmd));
    c.args(args)
        .env_remove("CANOPY_CONF")
        .env_remove("SLURM_CONF");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

fn text(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A site as DeepOps, OpenHPC and the cloud images write theirs: spaces around `=`,
/// lower-case keys, an Include, CLOUD nodes selected by a NodeSet Feature, a DGX line
/// with both CPUs and Procs, the old ControlMachine and BackupController, the old
/// Shared, DefMemPerCPU, power saving, a partition DEFAULT line, pid and log paths.
fn site(dir: &Path) -> PathBuf {
    let main = dir.join("slurm.conf");
    std::fs::write(
        &main,
        format!(
            "ClusterName = fixture\nControlMachine=head\nControlAddr=127.0.0.1\n\
             BackupController=head2\nStateSaveLocation={0}/state\nSlurmdSpoolDir={0}/spool\n\
             SlurmctldPidFile=/run/slurmctld.pid\nslurmctldlogfile=/var/log/slurmctld.log\n\
             MpiDefault=none\nSwitchType=switch/none\nGresTypes=gpu\n\
             SuspendProgram=/opt/suspend\nResumeProgram=/opt/resume\nSuspendTime=600\n\
             TaskPlugin=affinity,cgroup\nDefMemPerCPU=2000\nHealthCheckProgram=/opt/check\n\
             include nodes.conf\n\
             PartitionName=DEFAULT MaxTime=1-0 State=UP\n\
             PartitionName=batch Nodes=dgx[01-02],cpu01 Default=YES Shared=EXCLUSIVE AllocNodes=head\n\
             PartitionName=cloud Nodes=cloudset OverSubscribe=NO\n",
            dir.display()
        ),
    )
    .unwrap();
    std::fs::write(
        dir.join("nodes.conf"),
        "NodeName=dgx[01-02] Gres=gpu:8 CPUs=256 Sockets=2 CoresPerSocket=64 \
         ThreadsPerCore=2 Procs=128 RealMemory=1031891\n\
         NodeName=cpu01 CPUs=64 Sockets=2 CoresPerSocket=16 ThreadsPerCore=2 Procs=32\n\
         Nodename=c-[1-4] CPUs=4 Feature=cloud STATE=CLOUD\nNodeset=cloudset Feature=cloud\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("gres.conf"),
        "NodeName=dgx[01-02] Name=gpu Count=8\n",
    )
    .unwrap();
    std::fs::write(dir.join("cgroup.conf"), "ConstrainCores=yes\n").unwrap();
    canopy::wire::auth::generate_key_file(&dir.join("slurm.key")).unwrap();
    main
}

#[test]
fn both_checkers_validate_a_site_without_starting_anything() {
    let dir = tempfile::tempdir().unwrap();
    let main = site(dir.path());
    let file = main.display().to_string();
    let o = run("canopy-ctld", &["--check", "-f", &file], &[]);
    let out = text(&o);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let at = |line: usize| format!("{file}:{line}");
    for expected in [
        format!("checking {file}\n"),
        format!(
            "ignored: {}: BackupController=head2 is ignored: canopy runs one controller: \
             no backup takes over when it fails\n",
            at(4)
        ),
        format!("ignored: {}: HealthCheckProgram=/opt/check is ignored: no node health check", at(17)),
        format!(
            "ignored: {}: PartitionName=batch AllocNodes=head is ignored: jobs may be submitted",
            at(20)
        ),
        // 256 CPUs for each DGX (CPUs before Procs), 64 for cpu01, 4 for each cloud node.
        "read: 7 nodes (592 CPUs), 2 partitions (default batch), gres.conf read, cgroup.conf read\n"
            .into(),
        "OK: canopy-ctld would start (0 warnings, 3 ignored settings that change behaviour)\n"
            .into(),
    ] {
        assert!(out.contains(&expected), "{expected:?} missing from\n{out}");
    }
    // MpiDefault=none and SwitchType=switch/none change nothing: counted, listed with -v.
    assert!(
        out.contains("ignored: 4 more keys that change nothing here"),
        "{out}"
    );
    assert!(!out.contains("SwitchType"), "{out}");
    // Nothing was started: no state directory, no spool.
    assert!(!dir.path().join("state").exists() && !dir.path().join("spool").exists());

    // The operator console gives the same report, finding the file as commands do.
    let o = run(
        "canopy",
        &["config", "check", "-v"],
        &[("CANOPY_CONF", &file)],
    );
    let verbose = text(&o);
    assert_eq!(o.status.code(), Some(0), "{verbose}");
    assert!(
        verbose.contains(&format!(
            "  {}: SwitchType=switch/none is ignored\n",
            at(10)
        )),
        "{verbose}"
    );
    let o = run("canopy", &["config", "check", "-f", &file], &[]);
    assert_eq!(text(&o), out);
}

#[test]
fn a_configuration_that_would_not_start_exits_1_naming_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let main = site(dir.path());
    let nodes = dir.path().join("nodes.conf");
    let mut bad = std::fs::read_to_string(&nodes).unwrap();
    bad.push_str("NodeName=x State=IDLE\n");
    std::fs::write(&nodes, bad).unwrap();
    let file = main.display().to_string();
    for (cmd, args) in [
        ("canopy-ctld", vec!["--check", "-f", file.as_str()]),
        ("canopy", vec!["config", "check", "-f", file.as_str()]),
    ] {
        let o = run(cmd, &args, &[]);
        let out = text(&o);
        assert_eq!(o.status.code(), Some(1), "{cmd}: {out}");
        assert!(
            out.contains(&format!(
                "error: {}:5: State=IDLE: expected CLOUD, DOWN, DRAIN",
                nodes.display()
            )),
            "{out}"
        );
        assert!(
            out.ends_with("FAILED: canopy-ctld would not start (1 error)\n"),
            "{out}"
        );
    }
    // A usage error is neither.
    let o = run("canopy", &["config", "frobnicate"], &[]);
    assert_eq!(o.status.code(), Some(2));
}

/// The real sites' files (../shared/site-confs, outside this repository): each directory
/// copied with a cluster key, then checked: every file would start, with its nodes. Two
/// set FastSchedule=2, which Slurm 22.05 refuses; canopy reads it as config_overrides and
/// says so.
#[test]
fn the_fifteen_site_configurations_check_as_slurm_22_05_reads_them() {
    let root = std::env::var_os("CANOPY_SITE_CONFS")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/site-confs"));
    if !outside_material(
        root.is_dir(),
        "the site configurations (../shared/site-confs)",
    ) {
        return;
    }
    // (site, nodes Slurm lists, whether it sets FastSchedule=2)
    let expected: &[(&str, usize, bool)] = &[
        ("aws-pcluster", 35, false),
        ("azure-cyclecloud", 70, false),
        ("cc-docker-fritz", 1, false),
        ("deepops", 3, false),
        ("firehpc", 44, false),
        ("galaxy-ansible", 10, false),
        ("giovtorres-docker", 0, false),
        ("gsi-vega", 8, true),
        ("mknoxnv-dgx", 1, false),
        ("nstda-tara", 10, true),
        ("ohpc-dist", 4, false),
        ("schedmd-example", 32, false),
        ("slurm-gcp", 14, false),
        ("stackhpc-openhpc", 9, false),
        ("ucmerced-elcapitan", 51, false),
    ];
    let work = tempfile::tempdir().unwrap();
    for &(site, n, fast_schedule) in expected {
        let copy = work.path().join(site);
        let status = Command::new("cp")
            .arg("-r")
            .arg(root.join(site))
            .arg(&copy)
            .status()
            .unwrap();
        assert!(status.success());
        canopy::wire::auth::generate_key_file(&copy.join("slurm.key")).unwrap();
        let file = copy.join("slurm.conf").display().to_string();
        let o = run("canopy-ctld", &["--check", "-f", &file], &[]);
        let out = text(&o);
        let count = |prefix: &str| out.lines().filter(|l| l.starts_with(prefix)).count();
        eprintln!(
            "{site:<20} exit {:?}: {} errors, {} warnings, {} behaviour-changing ignored keys; {}",
            o.status.code(),
            count("error:"),
            count("warning:"),
            count("ignored: ") - usize::from(out.contains("more key")),
            out.lines()
                .find(|l| l.starts_with("ignored: ") && l.contains("more key"))
                .unwrap_or("no harmless ones"),
        );
        assert_eq!(o.status.code(), Some(0), "{site}:\n{out}");
        let read = format!("read: {n} node{}", if n == 1 { " " } else { "s " });
        assert!(out.contains(&read), "{site}: {read:?} missing from\n{out}");
        assert_eq!(
            out.contains("read as SlurmdParameters=config_overrides"),
            fast_schedule,
            "{site}:\n{out}"
        );
    }
    // DeepOps' DGX lines give CPUs=256 and Procs=128: Slurm reads 256.
    let deepops = work.path().join("deepops/slurm.conf").display().to_string();
    let out = text(&run("canopy-ctld", &["--check", "-f", &deepops], &[]));
    assert!(out.contains("read: 3 nodes (576 CPUs)"), "{out}");
}

/// The controller logs one warn line per ignored setting that changes behaviour, with
/// its file:line and what canopy does instead, and one line for the harmless ones; a
/// reconfigure logs them again for the file as it now is.
#[test]
fn ctld_names_each_ignored_setting_once_at_start_and_on_reconfigure() {
    let mut c = Cluster::configure(
        1,
        16,
        30,
        "HealthCheckProgram=/opt/check\nHealthCheckProgram=/opt/check2\n\
         SlurmctldLogFile=/var/log/slurmctld.log\n",
        // DEFAULT's CPUs=2 comes before the line's Procs, as in Slurm.
        &["Procs=8 CoreSpecCount=1 TmpDisk=64"],
    );
    c.start_authd();
    c.start_ctld();
    c.wait_for(Duration::from_secs(30), "the controller listening", |c| {
        c.log_text("ctld").contains("canopy-ctld listening")
    });
    let log = c.log_text("ctld");
    let conf = c.conf.display().to_string();
    let suspend: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("HealthCheckProgram"))
        .collect();
    assert_eq!(suspend.len(), 1, "{log}");
    assert!(suspend[0].contains("WARN"), "{log}");
    assert!(
        suspend[0].contains(&format!(
            "{conf}:14: HealthCheckProgram=/opt/check (set 2 times) is ignored: no node health check"
        )),
        "{log}"
    );
    assert!(
        log.contains("ignored keys that change nothing here: SlurmctldLogFile"),
        "{log}"
    );
    // scontrol show node prints what the file says.
    let o = c.cli(c.dir.path(), "scontrol", &["show", "node", "n1"]);
    let node = String::from_utf8_lossy(&o.stdout);
    assert!(node.contains(" CPUTot=2 "), "{node}");
    assert!(node.contains("\n   CoreSpecCount=1\n"), "{node}");
    assert!(node.contains(" TmpDisk=64 "), "{node}");
    let mut text = std::fs::read_to_string(&c.conf).unwrap();
    text.push_str("JobCompType=jobcomp/filetxt\n");
    std::fs::write(&c.conf, text).unwrap();
    let o = c.cli(c.dir.path(), "scontrol", &["reconfigure"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    c.wait_for(Duration::from_secs(30), "the reconfigure's notes", |c| {
        c.log_text("ctld")
            .contains("JobCompType=jobcomp/filetxt is ignored")
    });
    let log = c.log_text("ctld");
    assert_eq!(
        log.matches("HealthCheckProgram=/opt/check (set 2 times)")
            .count(),
        2,
        "{log}"
    );
}
