//! Power saving with real daemons on loopback: two `State=CLOUD` nodes
//! start powered down (`idle~`); a job on them runs ResumeProgram (a script
//! that starts a real canopy-noded per node of its argv\[1\] host list) and
//! is CONFIGURING until they register, then runs; idle past SuspendTime,
//! they are powered down through SuspendProgram (a script that stops those
//! daemons); a node whose daemon never comes is DOWN after ResumeTimeout
//! (`down~`, "ResumeTimeout reached"), ResumeFailProgram runs and the job is
//! requeued; and the power states survive a controller restart.

mod common;

use std::path::Path;
use std::time::Duration;

use canopy::model::state::JobState;
use common::{bin, Cluster};

/// Kills the daemons the scripts started (their pids are in `pid.NODE`).
struct Started<'a>(&'a Path);

impl Drop for Started<'_> {
    fn drop(&mut self) {
        for name in ["n2", "n3"] {
            if let Ok(pid) = std::fs::read_to_string(self.0.join(format!("pid.{name}"))) {
                if let Ok(pid) = pid.trim().parse::<i32>() {
                    let _ = nix::sys::signal::kill(
                        nix::unistd::Pid::from_raw(pid),
                        nix::sys::signal::Signal::SIGKILL,
                    );
                }
            }
        }
    }
}

fn write_script(path: &Path, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn power_log(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("power.log")).unwrap_or_default()
}

#[test]
fn cloud_nodes_power_up_for_a_job_and_down_when_idle() {
    let mut c = Cluster::configure(
        3,
        16,
        10,
        "SuspendProgram={dir}/suspend.sh\nResumeProgram={dir}/resume.sh\n\
         ResumeFailProgram={dir}/resume_fail.sh\nSuspendTime=3\nSuspendTimeout=2\n\
         ResumeTimeout=8\nSuspendExcNodes=n1\nPrivateData=cloud\n\
         SlurmctldParameters=idle_on_node_suspend,power_save_interval=1,cloud_reg_addrs\n",
        // n2 listens on another loopback address than the one its link to
        // the controller comes from: its NodeAddr follows its registration.
        &["", "State=CLOUD NodeAddr=127.0.0.3", "State=CLOUD"],
    );
    let dir = c.dir.path().to_path_buf();
    let _started = Started(&dir);
    let text = std::fs::read_to_string(&c.conf)
        .unwrap()
        .replace("{dir}", &dir.display().to_string());
    std::fs::write(&c.conf, text).unwrap();
    let (canopy, noded, conf) = (
        bin("canopy").display().to_string(),
        bin("canopy-noded").display().to_string(),
        c.conf.display().to_string(),
    );
    let d = dir.display();
    // As a cloud plugin's ResumeProgram: start each node of argv[1] (here a
    // real node daemon on loopback), except those the test marks broken.
    write_script(
        &dir.join("resume.sh"),
        &format!(
            "#!/bin/sh\ncp \"$SLURM_RESUME_FILE\" {d}/resume.json\n\
             echo \"resume $1\" >> {d}/power.log\n\
             for n in $(CANOPY_CONF={conf} {canopy} scontrol show hostnames \"$1\"); do\n\
               grep -qx \"$n\" {d}/broken 2>/dev/null && continue\n\
               CANOPY_LOG=debug {noded} -f {conf} -N \"$n\" >> {d}/log/$n.log 2>&1 &\n\
               echo $! > {d}/pid.$n\n\
             done\n"
        ),
    );
    write_script(
        &dir.join("suspend.sh"),
        &format!(
            "#!/bin/sh\necho \"suspend $1\" >> {d}/power.log\n\
             for n in $(CANOPY_CONF={conf} {canopy} scontrol show hostnames \"$1\"); do\n\
               [ -f {d}/pid.$n ] && kill $(cat {d}/pid.$n) && rm -f {d}/pid.$n\n\
             done\nexit 0\n"
        ),
    );
    write_script(
        &dir.join("resume_fail.sh"),
        &format!("#!/bin/sh\necho \"resume_fail $1\" >> {d}/power.log\n"),
    );
    c.start_authd();
    c.start_ctld();
    c.start_node("n1");
    let state = |c: &Cluster, name: &str| {
        c.nodes_info()
            .into_iter()
            .find(|n| n.name == name)
            .map(|n| n.scontrol_state())
            .unwrap_or_default()
    };
    c.wait_for(Duration::from_secs(60), "n1 IDLE", |c| {
        state(c, "n1") == "IDLE"
    });
    // Cloud nodes start powered down, not "not responding".
    assert_eq!(state(&c, "n2"), "IDLE+CLOUD+POWERED_DOWN");
    assert_eq!(c.node("n2").addr, "127.0.0.3");
    let out = c.cli(&dir, "sinfo", &["-N", "-h", "-o", "%N %t"]);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        text.contains("n2 idle~") && text.contains("n3 idle~"),
        "{text}"
    );

    // A job on them powers them up; it is CONFIGURING until they register.
    let script = dir.join("job.sh");
    std::fs::write(
        &script,
        format!("#!/bin/sh\necho ran on $SLURM_JOB_NODELIST > {d}/job.out\n"),
    )
    .unwrap();
    let id = c.sbatch(
        &dir,
        &[
            "-N2",
            "-w",
            "n[2-3]",
            "-o",
            "/dev/null",
            script.to_str().unwrap(),
        ],
    );
    c.wait_for(Duration::from_secs(30), "ResumeProgram run", |_| {
        power_log(&dir).contains("resume n[2-3]")
    });
    let json = std::fs::read_to_string(dir.join("resume.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["all_nodes_resume"], "n[2-3]");
    assert_eq!(v["jobs"][0]["job_id"], id);
    c.wait_for(Duration::from_secs(60), "the job ran", |c| {
        c.job(id).is_some_and(|j| j.state == JobState::Completed)
    });
    let out = std::fs::read_to_string(dir.join("job.out")).unwrap();
    assert_eq!(out.trim(), "ran on n[2-3]");
    assert!(!state(&c, "n2").contains("POWER"), "{}", state(&c, "n2"));
    assert_eq!(
        c.node("n2").addr,
        "127.0.0.1",
        "NodeAddr from the registration"
    );

    // Idle past SuspendTime: SuspendProgram stops them; n1 is excluded.
    c.wait_for(Duration::from_secs(60), "n[2-3] powered down", |c| {
        state(c, "n2") == "IDLE+CLOUD+POWERED_DOWN" && state(c, "n3") == "IDLE+CLOUD+POWERED_DOWN"
    });
    assert!(
        power_log(&dir).contains("suspend n[2-3]"),
        "{}",
        power_log(&dir)
    );
    assert!(!power_log(&dir).contains("suspend n1"));
    assert_eq!(state(&c, "n1"), "IDLE");

    // A node that never comes: DOWN after ResumeTimeout, the job requeued.
    std::fs::write(dir.join("broken"), "n3\n").unwrap();
    let id2 = c.sbatch(
        &dir,
        &["-w", "n3", "-o", "/dev/null", script.to_str().unwrap()],
    );
    c.wait_for(
        Duration::from_secs(60),
        "n3 DOWN after ResumeTimeout",
        |c| state(c, "n3") == "DOWN+CLOUD+POWERED_DOWN",
    );
    assert_eq!(
        c.node("n3").reason.as_deref(),
        Some("ResumeTimeout reached")
    );
    c.wait_for(Duration::from_secs(30), "ResumeFailProgram run", |_| {
        power_log(&dir).contains("resume_fail n3")
    });
    c.wait_for(Duration::from_secs(30), "the job requeued", |c| {
        c.job(id2)
            .is_some_and(|j| j.restarts == 1 && j.state == JobState::Pending)
    });
    let out = c.cli(&dir, "sinfo", &["-N", "-h", "-o", "%N %t"]);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(text.contains("n3 down~"), "{text}");

    // An operator powers a node up, then down at once.
    let out = c.cli(&dir, "scontrol", &["power", "up", "n2"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    c.wait_for(Duration::from_secs(60), "n2 powered up by hand", |c| {
        state(c, "n2") == "IDLE+CLOUD"
    });
    let out = c.cli(
        &dir,
        "scontrol",
        &["update", "NodeName=n2", "State=POWER_DOWN_FORCE"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    c.wait_for(Duration::from_secs(60), "n2 powered down by hand", |c| {
        state(c, "n2") == "IDLE+CLOUD+POWERED_DOWN"
    });
    assert_eq!(
        power_log(&dir).matches("suspend n2").count(),
        1,
        "{}",
        power_log(&dir)
    );
    let out = c.cli(&dir, "scontrol", &["power", "sideways", "n2"]);
    assert!(!out.status.success());

    // The power states survive a restart of the controller.
    c.kill_ctld();
    c.start_ctld();
    c.wait_for(Duration::from_secs(60), "the controller back", |c| {
        !c.nodes_info().is_empty()
    });
    assert_eq!(state(&c, "n3"), "DOWN+CLOUD+POWERED_DOWN");
    assert_eq!(state(&c, "n2"), "IDLE+CLOUD+POWERED_DOWN");
}
