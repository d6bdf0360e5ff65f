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
