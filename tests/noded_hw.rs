//! `canopy-noded -C` and `-G` as a user runs them: no configuration, a
//! topology faked through hwloc's own HWLOC_SYNTHETIC (and canopy's
//! CANOPY_TOPOLOGY), output in slurmd's format.

use std::process::Command;

fn noded(args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_canopy-noded"));
    cmd.args(args)
        .env_remove("CANOPY_CONF")
        .env_remove("SLURM_CONF")
        .env_remove("HWLOC_XMLFILE")
        .env_remove("CANOPY_TOPOLOGY")
        .env_remove("HWLOC_SYNTHETIC");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("canopy-noded runs")
}

fn node_line(out: &std::process::Output) -> String {
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

#[test]
fn print_config_reports_a_synthetic_topology() {
    let out = noded(
        &["-C", "-N", "sim7"],
        &[("HWLOC_SYNTHETIC", "package:2 core:8 pu:2")],
    );
    let text = node_line(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(
        lines[0].starts_with(
            "NodeName=sim7 CPUs=32 Boards=1 SocketsPerBoard=2 CoresPerSocket=8 ThreadsPerCore=2 RealMemory="
        ),
        "{text}"
    );
    // RealMemory is this machine's RAM in MiB, a plain number.
    let mem = lines[0].rsplit('=').next().unwrap_or("");
    assert!(mem.parse::<u64>().is_ok_and(|m| m > 1), "{text}");
    // UpTime=D-HH:MM:SS
    let up = lines[1].strip_prefix("UpTime=").expect("uptime line");
    let (days, hms) = up.split_once('-').expect("days-");
    assert!(days.parse::<u64>().is_ok(), "{up}");
    assert_eq!(hms.len(), 8, "{up}");
    assert_eq!(hms.split(':').count(), 3, "{up}");
}

#[test]
fn canopy_topology_overrides_like_hwloc_synthetic() {
    let out = noded(
        &["-C", "-N", "x"],
        &[("CANOPY_TOPOLOGY", "package:1 core:4 pu:1")],
    );
    let text = node_line(&out);
    assert!(
        text.starts_with(
            "NodeName=x CPUs=4 Boards=1 SocketsPerBoard=1 CoresPerSocket=4 ThreadsPerCore=1 "
        ),
        "{text}"
    );
}

#[test]
fn print_config_needs_no_configuration_and_defaults_to_the_host_name() {
    let out = noded(&["-C", "-f", "/nonexistent/slurm.conf"], &[]);
    let text = node_line(&out);
    let host = nix::unistd::gethostname().expect("hostname");
    let host = host.to_string_lossy();
    let short = host.split('.').next().unwrap_or_default();
    assert!(
        text.starts_with(&format!("NodeName={short} CPUs=")),
        "{text}"
    );
}

#[test]
fn print_gres_without_gpus_prints_nothing_and_succeeds() {
    let out = noded(&["-G"], &[("HWLOC_SYNTHETIC", "package:1 core:2 pu:1")]);
    assert!(out.status.success());
    assert!(out.stdout.is_empty());
    let err = String::from_utf8_lossy(&out.stderr);
    // A machine with an NVIDIA driver prints one GRES line per GPU.
    for line in err.lines().filter(|l| l.contains("Gres ")) {
        assert!(
            line.starts_with("canopy-noded: Gres Name=gpu Type="),
            "{line}"
        );
    }
}

#[test]
fn a_bad_topology_is_a_clear_error() {
    let out = noded(&["-C"], &[("CANOPY_TOPOLOGY", "nonsense:9")]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cannot read this node's hardware"), "{err}");
}

/// Side by side with the real thing (Debian's slurmd 22.05, which
/// `.ci/run` installs when it can): the node line must be identical for
/// the same synthetic topologies. Ignored: it needs slurmd.
#[test]
#[ignore = "needs Slurm's slurmd (run with --ignored where it is installed)"]
fn print_config_matches_real_slurmd() {
    for syn in [
        "package:2 core:8 pu:2",
        "package:1 core:2 pu:1",
        "package:4 numa:2 core:6 pu:2",
        "package:1 numa:2 core:2 pu:1",
    ] {
        let real = Command::new("slurmd")
            .arg("-C")
            .env("HWLOC_SYNTHETIC", syn)
            .output()
            .expect("slurmd -C runs");
        let ours = noded(&["-C"], &[("HWLOC_SYNTHETIC", syn)]);
        let real = String::from_utf8_lossy(&real.stdout).to_string();
        let ours = node_line(&ours);
        assert_eq!(real.lines().next(), ours.lines().next(), "{syn}");
        assert_eq!(real.lines().count(), ours.lines().count(), "{syn}");
    }
}
