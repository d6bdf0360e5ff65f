//! The real Slurm keys canopy accepts but does not act on, classified: those whose being
//! ignored changes what Slurm would do (scheduling, limits, accounting, security, power),
//! each with a sentence saying what canopy does instead, and those that cost nothing to
//! ignore (log and pid paths, debug levels, timers of features canopy does not have, plugin
//! paths). The builder records every ignored setting with its value as written
//! ([`IgnoredSetting`]); this module turns those records into the one-line-per-key summary
//! the controller logs at start and on reconfigure and `canopy-ctld --check` prints.
//!
//! N.B. Every key of `keys::UNUSED_*` is classified here exactly once (a test holds the two
//! together). When a key becomes used, it leaves `keys.rs` and its line here is deleted:
//! a one-line change per key.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// One ignored setting, as written in the file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IgnoredSetting {
    /// `""` for a global key, `NodeName` or `PartitionName` for an attribute, or the
    /// list key (`SlurmctldParameters`, `PrologFlags`, ...) one of whose words this is.
    pub section: String,
    /// The key in Slurm's spelling (`OverSubscribe` for the old `Shared`).
    pub key: String,
    /// The value as written.
    pub value: String,
    /// The partition name, or the node line's `NodeName=` value; empty for a global key.
    pub owner: String,
    pub file: PathBuf,
    pub line: usize,
}

impl IgnoredSetting {
    /// `Key=value`, with the owning line's head for node and partition attributes.
    pub fn as_written(&self) -> String {
        match self.section.as_str() {
            "" => format!("{}={}", self.key, self.value),
            "NodeName" | "PartitionName" => format!(
                "{}={} {}={}",
                self.section, self.owner, self.key, self.value
            ),
            // A word of a list key: `SlurmctldParameters enable_configless`.
            list if self.value.is_empty() => format!("{list} {}", self.key),
            list => format!("{list} {}={}", self.key, self.value),
        }
    }
}

/// What ignoring a key does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Impact {
    /// Nothing a user or admin would notice (paths, debug levels, unused timers).
    Harmless,
    /// Slurm would behave differently; the sentence says what canopy does instead.
    Changes(&'static str),
}

struct Changes {
    section: &'static str,
    key: &'static str,
    /// Values (case-insensitive) with which Slurm does nothing either.
    noop: &'static [&'static str],
    instead: &'static str,
}

const fn g(key: &'static str, noop: &'static [&'static str], instead: &'static str) -> Changes {
    Changes {
        section: "",
        key,
        noop,
        instead,
    }
}
const fn n(key: &'static str, instead: &'static str) -> Changes {
    Changes {
        section: "NodeName",
        key,
        noop: &[],
        instead,
    }
}
/// A word of list key `section` (`SlurmctldParameters`, ...).
const fn w(section: &'static str, key: &'static str, instead: &'static str) -> Changes {
    Changes {
        section,
        key,
        noop: &[],
        instead,
    }
}
const fn p(key: &'static str, noop: &'static [&'static str], instead: &'static str) -> Changes {
    Changes {
        section: "PartitionName",
        key,
        noop,
        instead,
    }
}

const NO_ACCT: &str = "canopy keeps job accounting in its own state store (sacct reads it); \
                       nothing is sent to slurmdbd";
const NO_POWER: &str = "this partition's nodes follow the global power-saving settings \
                        (SuspendTime, SuspendTimeout, ResumeTimeout), not its own";
const NO_EXC_STATES: &str =
    "nodes in any state may be powered down for being idle (SuspendExcNodes \
                             and SuspendExcParts still apply)";
const NO_SPEC: &str =
    "no cores or memory are set aside for the system: jobs may use all of the node";

/// Keys whose being ignored changes what Slurm would do.
const CHANGES: &[Changes] = &[
    // -- accounting --
    g(
        "AccountingStorageType",
        &["accounting_storage/none"],
        NO_ACCT,
    ),
    g(
        "AccountingStorageTRES",
        &[],
        "only canopy's own TRES (cpu, mem, node, billing, configured GRES) are recorded",
    ),
    g(
        "AccountingStoreFlags",
        &[],
        "job scripts, environments and comments are not stored for sacct",
    ),
    g(
        "AccountingStoreJobComment",
        &["no"],
        "job comments are not stored for sacct",
    ),
    g(
        "AcctGatherEnergyType",
        &["acct_gather_energy/none"],
        "no energy use is gathered",
    ),
    g(
        "AcctGatherFilesystemType",
        &["acct_gather_filesystem/none"],
        "no filesystem use is gathered",
    ),
    g(
        "AcctGatherInfinibandType",
        &["acct_gather_infiniband/none"],
        "no interconnect use is gathered",
    ),
    g(
        "AcctGatherInterconnectType",
        &["acct_gather_interconnect/none"],
        "no interconnect use is gathered",
    ),
    g(
        "AcctGatherProfileType",
        &["acct_gather_profile/none"],
        "no job profiles (sh5util) are written",
    ),
    g(
        "JobAcctGatherFrequency",
        &[],
        "task usage is sampled at canopy's fixed interval, not this one",
    ),
    g(
        "JobAcctGatherParams",
        &[],
        "no usage-based action (OverMemoryKill, ...) is taken",
    ),
    g(
        "JobCompType",
        &["jobcomp/none"],
        "no job completion log is written (sacct still has every job)",
    ),
    g(
        "TrackWCKey",
        &["no", "0"],
        "workload characterization keys (--wckey) are not tracked",
    ),
    // -- security and identity --
    g(
        "AuthAltTypes",
        &[],
        "only canopy's own credentials are accepted: no JWT (slurmrestd) tokens",
    ),
    g("DisableRootJobs", &["no", "0"], "root may run jobs"),
    g(
        "JobContainerType",
        &["job_container/none"],
        "jobs get no private /tmp or namespaces",
    ),
    g(
        "MCSPlugin",
        &["mcs/none"],
        "no MCS labels: jobs and nodes are not separated by them",
    ),
    g(
        "SlurmdUser",
        &["root", "0"],
        "node daemons run as whoever starts them",
    ),
    g(
        "UsePAM",
        &["0", "no"],
        "tasks are started without a PAM session",
    ),
    // -- scheduling and limits --
    g(
        "CompleteWait",
        &["0"],
        "scheduling does not wait for completing jobs",
    ),
    g(
        "DependencyParameters",
        &[],
        "dependencies follow canopy's defaults (no kill_invalid_depend, ...)",
    ),
    g(
        "EnforcePartLimits",
        &[],
        "partition limits are applied by canopy's fixed rule, not this setting",
    ),
    g(
        "FairShareDampeningFactor",
        &["1"],
        "fair share is not dampened",
    ),
    g(
        "InactiveLimit",
        &["0"],
        "an allocation whose srun/salloc vanished is kept until its time limit",
    ),
    g(
        "JobRequeue",
        &["1"],
        "batch jobs may be requeued (canopy's default)",
    ),
    g(
        "JobSubmitPlugins",
        &[],
        "no job_submit plugin runs: jobs are neither rewritten nor refused by it",
    ),
    g(
        "KillOnBadExit",
        &["0"],
        "a step is not killed when one of its tasks exits non-zero",
    ),
    g(
        "LaunchParameters",
        &[],
        "steps launch with canopy's defaults (no use_interactive_step, ...)",
    ),
    g(
        "MaxBatchRequeue",
        &["5"],
        "batch requeues are not capped at this number",
    ),
    g(
        "MaxStepCount",
        &[],
        "steps per job are not capped at this number",
    ),
    g(
        "MaxTasksPerNode",
        &[],
        "tasks per node are not capped at this number",
    ),
    g(
        "OverTimeLimit",
        &["0"],
        "jobs are stopped at their time limit, with no extra minutes",
    ),
    g(
        "PropagatePrioProcess",
        &["0"],
        "tasks run at the node daemon's scheduling priority",
    ),
    g(
        "PropagateResourceLimits",
        &[],
        "tasks get the node daemon's resource limits, not the submitting shell's",
    ),
    g(
        "PropagateResourceLimitsExcept",
        &[],
        "tasks get the node daemon's resource limits, not the submitting shell's",
    ),
    g("RequeueExit", &[], "no exit code requeues a job"),
    g(
        "RequeueExitHold",
        &[],
        "no exit code requeues and holds a job",
    ),
    g("ResvOverRun", &["0"], "jobs in a reservation end with it"),
    g(
        "SchedulerTimeSlice",
        &["30"],
        "no gang scheduling time slices",
    ),
    g(
        "SelectType",
        &["select/cons_tres", "select/cons_res"],
        "canopy allocates cores, memory and GRES (as select/cons_tres), not whole nodes",
    ),
    g("TopologyParam", &[], "no topology-aware placement"),
    g(
        "TopologyPlugin",
        &["topology/none", "topology/default"],
        "nodes are chosen without regard to switches (topology.conf is not read)",
    ),
    g("VSizeFactor", &["0"], "virtual memory is not limited"),
    g(
        "WaitTime",
        &["0"],
        "a step's other tasks are not ended this long after the first one exits",
    ),
    // -- programs that would run --
    g(
        "BurstBufferType",
        &[],
        "no burst buffer is staged (#BB/#DW directives are not acted on)",
    ),
    g(
        "CliFilterPlugins",
        &[],
        "no cli_filter runs: options reach the controller unfiltered",
    ),
    g(
        "CpuFreqDef",
        &[],
        "CPU frequency is never set: jobs run at the node's governor",
    ),
    g(
        "ExtSensorsType",
        &["ext_sensors/none"],
        "no external sensors are read",
    ),
    g("GpuFreqDef", &[], "GPU frequency is never set"),
    g(
        "HealthCheckProgram",
        &[],
        "no node health check runs: nodes are not drained by one",
    ),
    g(
        "MpiDefault",
        &["none"],
        "srun starts tasks without an MPI plugin (no PMI/PMIx wire-up)",
    ),
    g(
        "NodeFeaturesPlugins",
        &[],
        "node features are never changed at boot",
    ),
    g("PlugStackConfig", &[], "no SPANK plugins are loaded"),
    g("PowerPlugin", &["power/none"], "node power is not capped"),
    g(
        "PrEpPlugins",
        &["prep/script"],
        "only the Prolog/Epilog scripts run as PrEp",
    ),
    g(
        "PrioritySiteFactorPlugin",
        &["site_factor/none"],
        "no site factor adds to job priority",
    ),
    g(
        "RebootProgram",
        &[],
        "nodes are never rebooted by the controller",
    ),
    g(
        "ReconfigFlags",
        &[],
        "reconfigure applies partitions and limits from the file (no KeepPartInfo, ...)",
    ),
    g("ResvEpilog", &[], "nothing runs when a reservation ends"),
    g("ResvProlog", &[], "nothing runs when a reservation starts"),
    g("SallocDefaultCommand", &[], "salloc runs the user's shell"),
    g("ScronParameters", &[], "scrontab is not offered"),
    g("SlurmctldPlugstack", &[], "no slurmctld plugins are loaded"),
    g("SrunEpilog", &[], "srun runs no epilog"),
    g("SrunProlog", &[], "srun runs no prolog"),
    g(
        "SwitchType",
        &["switch/none"],
        "no switch (interconnect) plugin sets up jobs",
    ),
    g("TaskEpilog", &[], "no task epilog runs"),
    g(
        "TaskProlog",
        &[],
        "no task prolog runs (its output does not set the task's environment)",
    ),
    g(
        "UnkillableStepProgram",
        &[],
        "nothing runs when a step's processes cannot be killed",
    ),
    // -- power saving and cloud --
    g("SuspendExcStates", &[], NO_EXC_STATES),
    g(
        "FrontendName",
        &[],
        "no front-end nodes: node daemons run on the compute nodes",
    ),
    g(
        "SlurmctldHost",
        &[],
        "canopy runs one controller: no backup takes over when it fails",
    ),
    g(
        "BackupController",
        &[],
        "canopy runs one controller: no backup takes over when it fails",
    ),
    // -- words of list keys (any other ignored word is named as not acted on) --
    w(
        "SlurmctldParameters",
        "enable_configless",
        "node daemons need their own copy of the configuration: none is served to them",
    ),
    w("PrologFlags", "X11", "no X11 forwarding (srun --x11)"),
    w(
        "PrologFlags",
        "DeferBatch",
        "the batch script waits for every node's Prolog, as canopy always does",
    ),
    // -- node attributes --
    n("CoreSpecCount", NO_SPEC),
    n(
        "CpuBind",
        "tasks are bound per TaskPluginParam, not this node's CpuBind",
    ),
    n("CPUSpecList", NO_SPEC),
    n("MemSpecLimit", NO_SPEC),
    n("RestrictedCoresPerGPU", "GPU jobs may use every core"),
    n("TRESWeights", "the node adds no TRES weights to billing"),
    // -- partition attributes --
    p(
        "AllocNodes",
        &["all"],
        "jobs may be submitted to the partition from any host",
    ),
    p(
        "CpuBind",
        &[],
        "tasks are bound per TaskPluginParam, not this partition's CpuBind",
    ),
    p(
        "DisableRootJobs",
        &["no"],
        "root may run jobs in the partition",
    ),
    p(
        "Exclusive",
        &["no"],
        "jobs share nodes unless they ask for --exclusive",
    ),
    p("ExclusiveTopo", &["no"], "jobs share switches"),
    p(
        "MaxCPUsPerSocket",
        &["unlimited"],
        "jobs in the partition may use every CPU of a socket",
    ),
    p(
        "OverTimeLimit",
        &["0"],
        "jobs are stopped at their time limit, with no extra minutes",
    ),
    p("PowerDownOnIdle", &["no"], NO_POWER),
    p("ResumeTimeout", &[], NO_POWER),
    p(
        "SelectTypeParameters",
        &[],
        "the partition allocates as the global SelectTypeParameters says",
    ),
    p("SuspendTime", &[], NO_POWER),
    p("SuspendTimeout", &[], NO_POWER),
];

/// Ignored keys that cost nothing: log and pid paths, debug levels, timers and parameters
/// of features whose own key already carries the notice, retired keys.
const HARMLESS: &[(&str, &str)] = &[
    ("", "AccountingStorageBackupHost"),
    ("", "AccountingStorageExternalHost"),
    ("", "AccountingStorageHost"),
    ("", "AccountingStorageLoc"),
    ("", "AccountingStorageParameters"),
    ("", "AccountingStoragePass"),
    ("", "AccountingStoragePort"),
    ("", "AccountingStorageUser"),
    ("", "AcctGatherNodeFreq"),
    ("", "AllowSpecResourcesUsage"),
    ("", "AuthAltParameters"),
    ("", "BatchStartTimeout"),
    ("", "BcastExclude"),
    ("", "BcastParameters"),
    ("", "BurstBufferParameters"),
    ("", "CacheGroups"),
    ("", "CertgenParameters"),
    ("", "CertgenType"),
    ("", "CertmgrParameters"),
    ("", "CertmgrType"),
    ("", "CheckpointType"),
    ("", "CliFilterParameters"),
    ("", "CommunicationParameters"),
    ("", "CoreSpecPlugin"),
    ("", "CpuFreqGovernors"),
    ("", "CredType"),
    ("", "CryptoType"),
    ("", "DataParserParameters"),
    ("", "DebugFlags"),
    ("", "DefaultStorageHost"),
    ("", "DefaultStorageLoc"),
    ("", "DefaultStoragePass"),
    ("", "DefaultStoragePort"),
    ("", "DefaultStorageType"),
    ("", "DefaultStorageUser"),
    ("", "EioTimeout"),
    ("", "EpilogMsgTime"),
    ("", "EpilogTimeout"),
    ("", "ExtSensorsFreq"),
    ("", "FederationParameters"),
    ("", "GetEnvTimeout"),
    ("", "GroupUpdateForce"),
    ("", "GroupUpdateTime"),
    ("", "HashPlugin"),
    ("", "HealthCheckInterval"),
    ("", "HealthCheckNodeState"),
    ("", "HttpParserType"),
    ("", "InteractiveStepOptions"),
    ("", "JobAcctGatherType"),
    ("", "JobCheckpointDir"),
    ("", "JobCompHost"),
    ("", "JobCompLoc"),
    ("", "JobCompParams"),
    ("", "JobCompPass"),
    ("", "JobCompPort"),
    ("", "JobCompUser"),
    ("", "JobCredentialPrivateKey"),
    ("", "JobCredentialPublicCertificate"),
    ("", "JobFileAppend"),
    ("", "KeepAliveTime"),
    ("", "LaunchType"),
    ("", "LogTimeFormat"),
    ("", "MaxDBDMsgs"),
    ("", "MCSParameters"),
    ("", "MemLimitEnforce"),
    ("", "MpiParams"),
    ("", "PluginDir"),
    ("", "PowerParameters"),
    ("", "PrEpParameters"),
    ("", "PriorityParameters"),
    ("", "PrioritySiteFactorParameters"),
    ("", "PrologTimeout"),
    ("", "RoutePlugin"),
    ("", "SbcastParameters"),
    ("", "SchedulerAuth"),
    ("", "SchedulerPort"),
    ("", "SchedulerRootFilter"),
    ("", "SlurmSchedLogFile"),
    ("", "SlurmSchedLogLevel"),
    ("", "SlurmctldAddr"),
    ("", "SlurmctldDebug"),
    ("", "SlurmctldLogFile"),
    ("", "SlurmctldPidFile"),
    ("", "SlurmctldPrimaryOffProg"),
    ("", "SlurmctldPrimaryOnProg"),
    ("", "SlurmctldSyslogDebug"),
    ("", "SlurmctldTimeout"),
    ("", "SlurmdDebug"),
    ("", "SlurmdLogFile"),
    ("", "SlurmdPidFile"),
    ("", "SlurmdSyslogDebug"),
    ("", "SrunPortRange"),
    ("", "SwitchParameters"),
    ("", "TCPTimeout"),
    ("", "TLSParameters"),
    ("", "TLSType"),
    ("", "TmpFS"),
    ("", "UnkillableStepTimeout"),
    ("", "UrlParserType"),
    ("", "X11Parameters"),
    ("AuthInfo", "cred_expire"),
    ("AuthInfo", "use_client_ids"),
    ("NodeName", "BcastAddr"),
    ("NodeName", "Topology"),
    ("PartitionName", "Topology"),
];

/// What ignoring `key` (in `section`) set to `value` does.
pub fn classify(section: &str, key: &str, value: &str) -> Impact {
    let same = |a: &str, b: &str| a.eq_ignore_ascii_case(b);
    if let Some(c) = CHANGES
        .iter()
        .find(|c| c.section == section && same(c.key, key))
    {
        let v = value.trim();
        return if c.noop.iter().any(|n| same(n, v)) {
            Impact::Harmless
        } else {
            Impact::Changes(c.instead)
        };
    }
    if HARMLESS.iter().any(|(s, k)| *s == section && same(k, key)) {
        return Impact::Harmless;
    }
    // An ignored key nobody classified: say so rather than call it harmless.
    Impact::Changes("canopy does not act on it")
}

/// One ignored key, however many lines set it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    /// `file:line` of the first line that sets it.
    pub at: String,
    /// The first setting as written (`PartitionName=p OverSubscribe=EXCLUSIVE`).
    pub first: String,
    /// `Key` or `PartitionName Key`: what the notice is about.
    pub key: String,
    /// How many settings (lines, or partitions and node lines) give it.
    pub count: usize,
    pub impact: Impact,
}

impl Notice {
    /// The summary line: `slurm.conf:41: ResumeProgram=/x is ignored: ... instead`.
    pub fn line(&self) -> String {
        let more = match self.count {
            0 | 1 => String::new(),
            n => format!(" (set {n} times)"),
        };
        match self.impact {
            Impact::Changes(instead) => {
                format!("{}: {}{more} is ignored: {instead}", self.at, self.first)
            }
            Impact::Harmless => format!("{}: {}{more} is ignored", self.at, self.first),
        }
    }
}

/// The ignored settings of a configuration, one notice per key, in file order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    /// Keys whose being ignored changes what Slurm would do.
    pub changes: Vec<Notice>,
    /// Keys that cost nothing to ignore.
    pub harmless: Vec<Notice>,
}

/// Fold `settings` into one notice per (section, key). A key is behaviour-changing if any
/// of its settings is (e.g. one partition `OverSubscribe=EXCLUSIVE` among several `NO`).
pub fn summarize(settings: &[IgnoredSetting]) -> Summary {
    let mut by_key: BTreeMap<(String, String), usize> = BTreeMap::new();
    let mut notices: Vec<Notice> = Vec::new();
    // Where each notice's setting sits: (file in the order files came, line).
    let mut files: Vec<&std::path::Path> = Vec::new();
    let mut places: Vec<(usize, usize)> = Vec::new();
    for s in settings {
        let rank = files
            .iter()
            .position(|f| *f == s.file.as_path())
            .unwrap_or_else(|| {
                files.push(&s.file);
                files.len() - 1
            });
        let impact = classify(&s.section, &s.key, &s.value);
        let id = (s.section.clone(), s.key.to_ascii_lowercase());
        if let Some(&i) = by_key.get(&id) {
            let notice = &mut notices[i];
            notice.count += 1;
            // The first behaviour-changing setting is the one worth showing.
            if notice.impact == Impact::Harmless && impact != Impact::Harmless {
                notice.impact = impact;
                notice.at = format!("{}:{}", s.file.display(), s.line);
                notice.first = s.as_written();
                places[i] = (rank, s.line);
            }
            continue;
        }
        by_key.insert(id, notices.len());
        places.push((rank, s.line));
        notices.push(Notice {
            at: format!("{}:{}", s.file.display(), s.line),
            first: s.as_written(),
            key: if s.section.is_empty() {
                s.key.clone()
            } else {
                format!("{} {}", s.section, s.key)
            },
            count: 1,
            impact,
        });
    }
    // Settings resolved once the whole file was read (backup controllers) were recorded
    // last; they are shown at their line.
    let mut order: Vec<usize> = (0..notices.len()).collect();
    order.sort_by_key(|&i| places[i]);
    let mut slots: Vec<Option<Notice>> = notices.into_iter().map(Some).collect();
    let notices: Vec<Notice> = order.iter().filter_map(|&i| slots[i].take()).collect();
    let (changes, harmless) = notices
        .into_iter()
        .partition(|n| n.impact != Impact::Harmless);
    Summary { changes, harmless }
}

impl super::Config {
    /// The value as written of ignored `key` of partition `partition` or of the node line
    /// whose `NodeName=` is `owner` (`section` `PartitionName` or `NodeName`), DEFAULT
    /// lines applied and `Shared` read as `OverSubscribe`: for `scontrol show` to print
    /// what the file says, and for code that comes to act on the key.
    pub fn ignored_value(&self, section: &str, owner: &str, key: &str) -> Option<&str> {
        self.ignored
            .iter()
            .find(|s| s.section == section && s.owner == owner && s.key.eq_ignore_ascii_case(key))
            .map(|s| s.value.as_str())
    }

    /// The ignored attributes of the node at `index` in `nodes`, as written.
    pub fn node_ignored_attrs(&self, index: usize) -> &[(String, String)] {
        self.node_ignored.get(index).map_or(&[], Vec::as_slice)
    }

    /// One notice per ignored key this configuration sets.
    pub fn ignored_summary(&self) -> Summary {
        summarize(&self.ignored)
    }

    /// Log what loading this configuration found, as the controller does at start and on
    /// reconfigure: each warning, one warn line per ignored key that changes behaviour,
    /// and one line naming the harmless ignored keys.
    pub fn log_load_notes(&self) {
        for w in &self.warnings {
            tracing::warn!("{w}");
        }
        let summary = self.ignored_summary();
        for n in &summary.changes {
            tracing::warn!(key = %n.key, "{}", n.line());
        }
        if !summary.harmless.is_empty() {
            let keys: Vec<&str> = summary.harmless.iter().map(|n| n.key.as_str()).collect();
            tracing::info!(
                count = keys.len(),
                "ignored keys that change nothing here: {}",
                keys.join(", ")
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::keys::{UNUSED_GLOBAL_KEYS, UNUSED_NODE_ATTRS, UNUSED_PART_ATTRS};
    use super::*;

    fn classified(section: &str, key: &str) -> usize {
        let c = CHANGES
            .iter()
            .filter(|c| c.section == section && c.key.eq_ignore_ascii_case(key))
            .count();
        let h = HARMLESS
            .iter()
            .filter(|(s, k)| *s == section && k.eq_ignore_ascii_case(key))
            .count();
        c + h
    }

    /// Keys read by canopy but kept in the table: ones whose ignoring is reported by the
    /// builder under another name.
    const NOT_IN_UNUSED: &[(&str, &str)] = &[
        ("", "SlurmctldHost"),
        ("", "BackupController"),
        ("", "FrontendName"),
        ("NodeName", "State"),
    ];

    #[test]
    fn every_ignored_key_is_classified_exactly_once() {
        let tables: [(&str, &[&str]); 3] = [
            ("", UNUSED_GLOBAL_KEYS),
            ("NodeName", UNUSED_NODE_ATTRS),
            ("PartitionName", UNUSED_PART_ATTRS),
        ];
        for (section, keys) in tables {
            for key in keys {
                // `Shared` is read as OverSubscribe, which carries its class.
                if section == "PartitionName" && *key == "Shared" {
                    continue;
                }
                assert_eq!(
                    classified(section, key),
                    1,
                    "{section} {key}: classify it in config/ignored.rs (CHANGES or HARMLESS)"
                );
            }
        }
        // And nothing classified is a key canopy now uses: delete its line when it is.
        let ignored = |section: &str, key: &str| {
            tables
                .iter()
                .any(|(s, keys)| *s == section && keys.iter().any(|k| k.eq_ignore_ascii_case(key)))
                || NOT_IN_UNUSED.contains(&(section, key))
        };
        let listed = |section: &str| !matches!(section, "" | "NodeName" | "PartitionName");
        for c in CHANGES.iter().filter(|c| !listed(c.section)) {
            assert!(
                ignored(c.section, c.key),
                "{} {} is no longer ignored: delete its line from CHANGES",
                c.section,
                c.key
            );
        }
        for (s, k) in HARMLESS.iter().filter(|(s, _)| !listed(s)) {
            assert!(
                ignored(s, k),
                "{s} {k} is no longer ignored: delete its line from HARMLESS"
            );
        }
    }

    #[test]
    fn noop_values_are_harmless_and_others_are_not() {
        assert_eq!(classify("", "SwitchType", "switch/none"), Impact::Harmless);
        assert!(matches!(
            classify("", "SwitchType", "switch/hpe_slingshot"),
            Impact::Changes(_)
        ));
        assert_eq!(
            classify("", "SlurmctldLogFile", "/var/log/x"),
            Impact::Harmless
        );
        assert_eq!(
            classify("PartitionName", "DisableRootJobs", "no"),
            Impact::Harmless
        );
        assert!(matches!(
            classify("PartitionName", "DisableRootJobs", "YES"),
            Impact::Changes(_)
        ));
        // Unclassified keys are never called harmless.
        assert!(matches!(classify("", "NoSuchKey", "1"), Impact::Changes(_)));
    }

    fn setting(section: &str, key: &str, value: &str, owner: &str, line: usize) -> IgnoredSetting {
        IgnoredSetting {
            section: section.into(),
            key: key.into(),
            value: value.into(),
            owner: owner.into(),
            file: "slurm.conf".into(),
            line,
        }
    }

    #[test]
    fn one_notice_per_key_with_the_first_behaviour_changing_setting() {
        let s = summarize(&[
            setting("", "SlurmctldPidFile", "/run/x.pid", "", 3),
            setting("PartitionName", "DisableRootJobs", "NO", "a", 10),
            setting("PartitionName", "DisableRootJobs", "YES", "b", 11),
            setting("", "HealthCheckProgram", "/bin/check", "", 4),
            setting("", "HealthCheckProgram", "/bin/check2", "", 5),
        ]);
        assert_eq!(
            s.changes.iter().map(Notice::line).collect::<Vec<_>>(),
            [
                "slurm.conf:4: HealthCheckProgram=/bin/check (set 2 times) is ignored: \
                 no node health check runs: nodes are not drained by one",
                "slurm.conf:11: PartitionName=b DisableRootJobs=YES (set 2 times) is ignored: \
                 root may run jobs in the partition",
            ]
        );
        assert_eq!(s.harmless.len(), 1);
        assert_eq!(s.harmless[0].key, "SlurmctldPidFile");
    }
}
