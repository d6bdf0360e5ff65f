//! `canopy-ctld --check -f FILE` and `canopy config check`: read a site's configuration
//! the way the daemons do (slurm.conf with its Includes, gres.conf and cgroup.conf beside
//! it, the cluster key) without starting anything, and report whether the controller would
//! start, what it would warn about, which ignored settings change what Slurm would do, and
//! what was read. Reading files is all it does; nothing listens and no state is touched.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::config::cgroup::CgroupConf;
use crate::config::{Config, Summary};

/// The outcome of checking one configuration.
#[derive(Debug)]
pub struct CheckReport {
    pub path: PathBuf,
    /// What stops a daemon from starting, each naming its file (and line).
    pub errors: Vec<String>,
    /// Non-fatal notes of slurm.conf, gres.conf and cgroup.conf.
    pub warnings: Vec<String>,
    /// The ignored settings, one notice per key (empty when slurm.conf did not load).
    pub ignored: Summary,
    /// The short "what was read" line, when slurm.conf loaded.
    pub read: Option<String>,
}

impl CheckReport {
    /// 0 when the controller would start with these files (warnings allowed), else 1.
    pub fn exit_code(&self) -> i32 {
        i32::from(!self.errors.is_empty())
    }

    /// The report as printed: errors, warnings, one line per ignored setting that changes
    /// behaviour, the count of harmless ones (each listed with `verbose`), what was read,
    /// and the verdict.
    pub fn render(&self, verbose: bool) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "checking {}", self.path.display());
        for e in &self.errors {
            let _ = writeln!(out, "error: {e}");
        }
        for w in &self.warnings {
            let _ = writeln!(out, "warning: {w}");
        }
        for n in &self.ignored.changes {
            let _ = writeln!(out, "ignored: {}", n.line());
        }
        let harmless = self.ignored.harmless.len();
        if harmless > 0 {
            let _ = writeln!(
                out,
                "ignored: {harmless} more key{} that change nothing here (paths, debug levels, \
                 timers of absent features){}",
                if harmless == 1 { "" } else { "s" },
                if verbose { ":" } else { "; -v lists them" }
            );
            if verbose {
                for n in &self.ignored.harmless {
                    let _ = writeln!(out, "  {}", n.line());
                }
            }
        }
        if let Some(read) = &self.read {
            let _ = writeln!(out, "read: {read}");
        }
        let changes = self.ignored.changes.len();
        if self.errors.is_empty() {
            let _ = writeln!(
                out,
                "OK: canopy-ctld would start ({} warning{}, {changes} ignored setting{} that \
                 change{} behaviour)",
                self.warnings.len(),
                if self.warnings.len() == 1 { "" } else { "s" },
                if changes == 1 { "" } else { "s" },
                if changes == 1 { "s" } else { "" },
            );
        } else {
            let _ = writeln!(
                out,
                "FAILED: canopy-ctld would not start ({} error{})",
                self.errors.len(),
                if self.errors.len() == 1 { "" } else { "s" }
            );
        }
        out
    }
}

/// Check the configuration at `path` (slurm.conf; gres.conf, cgroup.conf and the key
/// beside it are read as the daemons read them).
pub fn check(path: &Path) -> CheckReport {
    let mut report = CheckReport {
        path: path.to_path_buf(),
        errors: Vec::new(),
        warnings: Vec::new(),
        ignored: Summary::default(),
        read: None,
    };
    let conf = match Config::load(path) {
        Ok(conf) => conf,
        Err(e) => {
            report.errors.push(e.to_string());
            return report;
        }
    };
    report.warnings.extend(conf.warnings.iter().cloned());
    report.ignored = conf.ignored_summary();
    // Node daemons read cgroup.conf at start and refuse a bad one.
    let cgroup_path = CgroupConf::path_beside(path);
    let cgroup = match CgroupConf::load(&cgroup_path) {
        Ok(cg) => {
            report.warnings.extend(cg.warnings.iter().cloned());
            if cg.source.is_some() {
                "read"
            } else {
                "absent (defaults)"
            }
        }
        Err(e) => {
            report.errors.push(e.to_string());
            "bad"
        }
    };
    check_key(&conf, &mut report);
    let cpus: u64 = conf.nodes.iter().map(|n| u64::from(n.cpus)).sum();
    let gres = if conf.gres.path.is_some() {
        "read"
    } else {
        "absent"
    };
    report.read = Some(format!(
        "{} node{} ({cpus} CPUs), {} partition{}{}, gres.conf {gres}, cgroup.conf {cgroup}",
        conf.nodes.len(),
        if conf.nodes.len() == 1 { "" } else { "s" },
        conf.partitions.len(),
        if conf.partitions.len() == 1 { "" } else { "s" },
        conf.default_partition()
            .map(|p| format!(" (default {})", p.name))
            .unwrap_or_default(),
    ));
    report
}

/// The cluster key every daemon signs with: missing, unreadable or too open, the
/// controller will not start. One the checker may not read (it runs as another user) is
/// a warning only: the daemon's user may well read it.
fn check_key(conf: &Config, report: &mut CheckReport) {
    use crate::wire::auth::{load_keyring, AuthError};
    match load_keyring(&conf.auth_key_path) {
        Ok(_) => {}
        Err(AuthError::KeyFileIo { source, path, .. })
            if source.kind() == std::io::ErrorKind::PermissionDenied =>
        {
            report.warnings.push(format!(
                "{}: cannot read the cluster key as this user; check it as the daemons' user",
                path.display()
            ));
        }
        Err(AuthError::KeyFileIo { source, path, .. })
            if source.kind() == std::io::ErrorKind::NotFound =>
        {
            report.errors.push(format!(
                "{}: no cluster key: every daemon signs with it (create 32 random bytes there, \
                 mode 0600, and copy it to every node)",
                path.display()
            ));
        }
        Err(e) => report.errors.push(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// A cloud site's files: CLOUD nodes in an Include, power saving, a NodeSet by
    /// Feature, the old Shared, DefMemPerCPU, a second SlurmctldHost, log paths.
    const CLOUD_SITE: &str = "ClusterName=cloudy\nSlurmctldHost=head\nSlurmctldHost=head2\n\
        SlurmctldLogFile=/var/log/slurmctld.log\nSlurmctldPidFile=/run/slurmctld.pid\n\
        SwitchType=switch/none\nSuspendProgram=/opt/suspend.sh\nResumeProgram=/opt/resume.sh\n\
        SuspendTime=300\nResumeRate=0\nGresTypes=gpu\ninclude nodes.conf\n\
        PartitionName=compute Nodes=cpuset Default=YES Shared=EXCLUSIVE DefMemPerCPU=1000\n";
    const NODES: &str = "NodeName=c-[1-4] CPUs=4 Features=cpu State=CLOUD\n\
        NodeName=g-1 CPUs=8 Gres=gpu:2 State=CLOUD\nNodeSet=cpuset Feature=cpu\n";

    fn site(dir: &Path, slurm: &str, key: bool) -> PathBuf {
        let main = dir.join("slurm.conf");
        std::fs::write(&main, slurm).unwrap();
        std::fs::write(dir.join("nodes.conf"), NODES).unwrap();
        std::fs::write(dir.join("gres.conf"), "NodeName=g-1 Name=gpu Count=2\n").unwrap();
        std::fs::write(dir.join("cgroup.conf"), "ConstrainCores=yes\n").unwrap();
        if key {
            let k = dir.join("slurm.key");
            std::fs::write(&k, [7u8; 32]).unwrap();
            std::fs::set_permissions(&k, std::fs::Permissions::from_mode(0o600)).unwrap();
        }
        main
    }

    #[test]
    fn a_cloud_site_would_start_and_its_ignored_settings_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let report = check(&site(dir.path(), CLOUD_SITE, true));
        assert_eq!(report.exit_code(), 0, "{report:#?}");
        let text = report.render(false);
        let f = |line: usize| format!("{}:{line}", dir.path().join("slurm.conf").display());
        for expected in [
            format!("ignored: {}: SlurmctldHost=head2 is ignored: canopy runs one controller", f(3)),
            "ignored: 3 more keys that change nothing here".to_string(),
            "read: 5 nodes (24 CPUs), 1 partition (default compute), gres.conf read, cgroup.conf read\n".into(),
            "OK: canopy-ctld would start (0 warnings, 1 ignored setting that changes behaviour)\n".into(),
        ] {
            assert!(text.contains(&expected), "{expected:?} missing from\n{text}");
        }
        // The harmless ones are listed only on request.
        assert!(!text.contains("SlurmctldLogFile"), "{text}");
        assert!(report.render(true).contains(&format!(
            "  {}: SlurmctldLogFile=/var/log/slurmctld.log is ignored\n",
            f(4)
        )));
    }

    #[test]
    fn errors_in_any_file_or_a_missing_key_would_stop_the_controller() {
        let dir = tempfile::tempdir().unwrap();
        let main = site(dir.path(), CLOUD_SITE, false);
        let report = check(&main);
        assert_eq!(report.exit_code(), 1);
        assert!(
            report.errors[0].contains("slurm.key: no cluster key"),
            "{:?}",
            report.errors
        );
        assert!(report
            .render(false)
            .ends_with("FAILED: canopy-ctld would not start (1 error)\n"));
        // A bad value in slurm.conf: the error names file:line, nothing else is read.
        let main = site(
            dir.path(),
            &format!("{CLOUD_SITE}FastSchedule=banana\n"),
            true,
        );
        let report = check(&main);
        assert_eq!(report.exit_code(), 1);
        assert_eq!(
            report.errors,
            [format!(
                "{}:14: FastSchedule=banana: expected 0, 1 or 2",
                main.display()
            )]
        );
        assert!(report.read.is_none());
        // A bad cgroup.conf stops the node daemons.
        let main = site(dir.path(), CLOUD_SITE, true);
        std::fs::write(dir.path().join("cgroup.conf"), "ConstrainCores=maybe\n").unwrap();
        let report = check(&main);
        assert_eq!(report.exit_code(), 1, "{report:#?}");
        assert!(
            report.errors[0].contains("cgroup.conf:1"),
            "{:?}",
            report.errors
        );
    }
}
