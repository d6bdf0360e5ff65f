//! Real Slurm client libraries, unmodified, against a live canopy cluster.
//! Needs python3 with `simple_slurm` / `submitit` / `snakemake` and its
//! slurm executor plugin (`.ci/run` installs them), and the shared smoke
//! scripts. Where one is missing a test fails under CI (`CI` set) and
//! otherwise prints `SKIPPED: <test>: <why>` (see `common::require`). The
//! Prometheus exporter's test is `#[ignore]`d: its Go modules cannot be
//! fetched on these machines.

mod common;

use std::path::PathBuf;
use std::process::Command;

use common::{outside_material, require, Cluster};

fn python_has(module: &str) -> bool {
    Command::new("python3")
        .args(["-c", &format!("import {module}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

fn run_python(c: &Cluster, dir: &std::path::Path, script: &std::path::Path) -> String {
    let out = Command::new("python3")
        .arg(script)
        .current_dir(dir)
        .env("CANOPY_CONF", &c.conf)
        .env("PATH", c.path_env())
        .output()
        .unwrap();
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{} failed:\n{all}", script.display());
    all
}

/// The shared smoke script (outside this repository; absent in some checkouts).
fn shared_smoke(name: &str) -> Option<PathBuf> {
    let dir = std::env::var_os("CANOPY_SMOKE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/smoke"));
    let p = dir.join(name);
    p.exists().then_some(p)
}

#[test]
fn simple_slurm_runs_unmodified() {
    let script = shared_smoke("smoke_simple_slurm.py");
    if !outside_material(
        script.is_some(),
        "the shared smoke_simple_slurm.py (set CANOPY_SMOKE_DIR)",
    ) || !require(python_has("simple_slurm"), "python3 with simple_slurm")
    {
        return;
    }
    let Some(script) = script else { return };
    let c = Cluster::start(3, 2, 30);
    let w = tempfile::tempdir().unwrap();
    let out = run_python(&c, w.path(), &script);
    assert!(out.contains("simple_slurm ok"), "{out}");
}

/// submitit's single job, array, two-task job and cancellation; used when
/// the shared acceptance script is not there.
const SUBMITIT: &str = r#"
import submitit, time
def add(a, b):
    env = submitit.JobEnvironment()
    return a + b, env.job_id, env.global_rank, env.num_tasks
ex = submitit.AutoExecutor(folder="logs/%j")
assert ex.cluster == "slurm", ex.cluster
ex.update_parameters(timeout_min=2, slurm_job_name="smoke")
job = ex.submit(add, 2, 3)
res = job.result()
assert res[0] == 5 and res[1] == job.job_id, res
jobs = ex.map_array(add, [1, 2, 3], [10, 20, 30])
assert [j.result()[0] for j in jobs] == [11, 22, 33]
assert [j.result()[1] for j in jobs] == [j.job_id for j in jobs]
assert all("_" in j.job_id for j in jobs), [j.job_id for j in jobs]
ex.update_parameters(tasks_per_node=2)
out = ex.submit(add, 1, 1).results()
assert sorted(r[2] for r in out) == [0, 1] and all(r[3] == 2 for r in out), out
ex.update_parameters(tasks_per_node=1)
cj = ex.submit(time.sleep, 120)
time.sleep(3)
cj.cancel()
t0 = time.time()
while not cj.done(force_check=True):
    time.sleep(1)
    assert time.time() - t0 < 60, "cancelled job never reported done"
assert cj.state == "CANCELLED", cj.state
print("submitit ok")
"#;

#[test]
fn submitit_runs_unmodified() {
    if !require(python_has("submitit"), "python3 with submitit") {
        return;
    }
    let c = Cluster::start(3, 2, 30);
    let w = tempfile::tempdir().unwrap();
    match shared_smoke("smoke_submitit.py") {
        Some(script) => {
            let out = run_python(&c, w.path(), &script);
            for part in ["single ok", "array ok", "multitask ok", "cancel ok"] {
                assert!(out.contains(part), "{part} missing:\n{out}");
            }
        }
        None => {
            let script = w.path().join("smoke_submitit.py");
            std::fs::write(&script, SUBMITIT).unwrap();
            let out = run_python(&c, w.path(), &script);
            assert!(out.contains("submitit ok"), "{out}");
        }
    }
}

/// snakemake-executor-plugin-slurm through the shared acceptance script:
/// once with sacct for status (the default), once with squeue.
#[test]
fn snakemake_runs_unmodified() {
    let script = shared_smoke("smoke_snakemake.sh");
    let snakemake = Command::new("snakemake")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !outside_material(
        script.is_some(),
        "the shared smoke_snakemake.sh (set CANOPY_SMOKE_DIR)",
    ) || !require(snakemake, "the snakemake command")
        || !require(
            python_has("snakemake_executor_plugin_slurm"),
            "python3 with snakemake-executor-plugin-slurm",
        )
    {
        return;
    }
    let Some(script) = script else { return };
    let c = Cluster::start(3, 2, 30);
    for extra in [&[][..], &["--slurm-status-command", "squeue"]] {
        let w = tempfile::tempdir().unwrap();
        let out = Command::new("bash")
            .arg(&script)
            .args(extra)
            .current_dir(w.path())
            .env("CANOPY_CONF", &c.conf)
            .env("PATH", c.path_env())
            .output()
            .unwrap();
        let all = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "snakemake {extra:?} failed:\n{all}");
        assert!(all.contains("snakemake ok"), "{all}");
    }
}

/// vpenso's prometheus-slurm-exporter (v0.20): it runs squeue, sinfo, sdiag
/// and sshare and exits if any fails or prints what it cannot parse. It
/// needs Go to build, and its modules from the network, which these machines
/// cannot reach: so it runs only when asked for, with the exporter named in
/// `EXPORTER` (or on `PATH`).
#[test]
#[ignore = "needs prometheus-slurm-exporter, whose Go modules cannot be fetched here; set EXPORTER=path and run with --ignored"]
fn prometheus_exporter_runs_unmodified() {
    let script = shared_smoke("smoke_exporter.sh");
    if !require(
        script.is_some(),
        "the shared smoke_exporter.sh (set CANOPY_SMOKE_DIR)",
    ) {
        return;
    }
    let Some(script) = script else { return };
    let exporter = std::env::var_os("EXPORTER")
        .map(PathBuf::from)
        .filter(|p| p.exists())
        .or_else(|| {
            Command::new("sh")
                .args(["-c", "command -v prometheus-slurm-exporter"])
                .output()
                .ok()
                .filter(|o| o.status.success())
                .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()))
        });
    let curl = Command::new("curl").arg("--version").output().is_ok();
    if !require(
        exporter.is_some(),
        "prometheus-slurm-exporter (set EXPORTER=/path/to/it)",
    ) || !require(curl, "curl")
    {
        return;
    }
    let Some(exporter) = exporter else { return };
    let c = Cluster::start(3, 2, 30);
    let w = tempfile::tempdir().unwrap();
    let out = Command::new("bash")
        .arg(&script)
        .current_dir(w.path())
        .env("CANOPY_CONF", &c.conf)
        .env("PATH", c.path_env())
        .env("EXPORTER", &exporter)
        .output()
        .unwrap();
    let all = format!(
        "{}{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        std::fs::read_to_string(w.path().join("exporter.log")).unwrap_or_default()
    );
    assert!(out.status.success(), "exporter smoke failed:\n{all}");
    assert!(all.contains("exporter ok"), "{all}");
}
