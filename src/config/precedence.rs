//! Where Slurm's reader gives one spelling of a setting precedence over another, or drops
//! one of two settings that contradict each other, and canopy must do the same: the
//! controller's host (`SlurmctldHost` before the old `ControlMachine`/`ControlAddr`/
//! `BackupController`/`BackupAddr`), a partition's `OverSubscribe` before its old name
//! `Shared`, and `DenyAccounts`/`DenyQos` dropped beside `AllowAccounts`/`AllowQos`. Node
//! lines' `CPUs`/`Procs` and `Feature`/`Features` are settled in `build` and `topology`.

use super::build::{Builder, PartSpec};
use super::parse::Loc;
use super::types::ConfigError;

impl Builder {
    /// The controller and its backups, as Slurm 22.05's `_load_slurmctld_host`: with any
    /// SlurmctldHost line the old keys are ignored (a warning each, Slurm's words);
    /// without one, ControlMachine (or an error) and BackupController. Backups are kept
    /// for `scontrol show config` and named in the summary of ignored keys.
    pub(super) fn resolve_controller(&mut self) -> Result<(), ConfigError> {
        let old = [
            ("ControlMachine", self.control_machine.take()),
            ("ControlAddr", self.control_addr.take()),
            ("BackupController", self.backup_controller.take()),
            ("BackupAddr", self.backup_addr.take()),
        ];
        let hosts = std::mem::take(&mut self.ctld_hosts);
        // (host, address, where, the key it came from)
        let mut all: Vec<(String, String, Loc, &str)> = Vec::new();
        if !hosts.is_empty() {
            for (key, value) in &old {
                if let Some((_, loc)) = value {
                    self.warn(
                        loc,
                        format_args!("Ignoring {key} since SlurmctldHost is set."),
                    );
                }
            }
            all.extend(
                hosts
                    .into_iter()
                    .map(|(h, a, l)| (h, a, l, "SlurmctldHost")),
            );
        } else {
            let [(_, machine), (_, addr), (_, backup), (_, backup_addr)] = old;
            let Some((host, loc)) = machine else {
                let stray = [("ControlAddr", addr), ("BackupController", backup)]
                    .into_iter()
                    .find_map(|(k, v)| v.map(|(_, l)| (k, l)));
                return Err(match stray {
                    Some((key, loc)) => loc.error(
                        key,
                        format!(
                            "{key} needs ControlMachine (better: \
                             SlurmctldHost=<host>(<address>))"
                        ),
                    ),
                    None => ConfigError {
                        file: self.cfg.path.clone(),
                        line: 0,
                        key: "SlurmctldHost".into(),
                        message: "no SlurmctldHost is set: expected SlurmctldHost=<host> or \
                                  SlurmctldHost=<host>(<address>)"
                            .into(),
                    },
                });
            };
            if addr.is_none() && host.contains(',') {
                return Err(loc.error(
                    "ControlMachine",
                    "ControlMachine has multiple host names, so ControlAddr must be specified.",
                ));
            }
            let address = addr.map(|(a, _)| a).unwrap_or_else(|| host.clone());
            all.push((host, address, loc, "ControlMachine"));
            match (backup, backup_addr) {
                (Some((b, l)), a) => {
                    let address = a.map(|(a, _)| a).unwrap_or_else(|| b.clone());
                    all.push((b, address, l, "BackupController"));
                }
                (None, Some((_, l))) => {
                    return Err(l.error(
                        "BackupAddr",
                        "BackupAddr specified without BackupController",
                    ))
                }
                (None, None) => {}
            }
        }
        for (i, (host, _, loc, key)) in all.iter().enumerate() {
            if all[..i].iter().any(|(h, ..)| h == host) {
                return Err(loc.error(key, format!("Duplicate SlurmctldHost records: {host}")));
            }
        }
        let mut all = all.into_iter();
        if let Some((host, addr, _, _)) = all.next() {
            self.cfg.control_host = host;
            self.cfg.control_addr = addr;
        }
        for (host, addr, loc, key) in all {
            let written = if key == "SlurmctldHost" && addr != host {
                format!("{host}({addr})")
            } else {
                host.clone()
            };
            self.record_ignored(&loc, "", key, &written, "");
            self.cfg.backup_controllers.push((host, addr));
        }
        Ok(())
    }

    /// A partition's settings after its DEFAULT line is applied: `OverSubscribe` (line,
    /// then DEFAULT) before `Shared` (line, then DEFAULT), kept under the new name; a deny
    /// list beside an allow list is dropped with Slurm's error, as Slurm drops it.
    pub(super) fn part_aliases_and_conflicts(
        &mut self,
        loc: &Loc,
        name: &str,
        spec: &mut PartSpec,
    ) {
        if let Some(shared) = spec.unread.remove("Shared") {
            spec.unread.entry("OverSubscribe").or_insert(shared);
        }
        let access = &mut spec.access;
        let mut dropped = Vec::new();
        if access.allow_accounts.is_some() && !access.deny_accounts.is_empty() {
            access.deny_accounts.clear();
            dropped.push(
                "Both AllowAccounts and DenyAccounts are defined, DenyAccounts will be ignored",
            );
        }
        if access.allow_qos.is_some() && !access.deny_qos.is_empty() {
            access.deny_qos.clear();
            dropped.push("Both AllowQos and DenyQos are defined, DenyQos will be ignored");
        }
        for d in dropped {
            self.warn(loc, format_args!("partition {name}: {d}"));
        }
    }
}
