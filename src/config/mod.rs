//! canopy's configuration: the slurm.conf-syntax file every daemon and command reads, turned
//! into a validated [`Config`] whose errors and warnings name `file:line`.
//!
//! This module owns the meaning of keys: which ones canopy uses, which real Slurm keys it
//! accepts but ignores (one warning each, so a site's existing file still loads), node and
//! partition lines (DEFAULT accumulation, hostlists, per-node address and port lists,
//! DownNodes, NodeSet) and cross-line validation. The lexical rules (comments, quotes,
//! continuations, `Include`) live in `parse`; hostlists and unit formats in [`hostlist`]
//! and [`units`]. It does not resolve host names, open sockets, expand `%n`/`%h` in
//! SlurmdSpoolDir (the node daemon does), or read gres.conf/cgroup.conf.

pub mod hostlist;
mod parse;
pub mod units;

use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::wire::types::PartitionState;
use parse::{Item, Line, Loc, Op};

/// Where the configuration is read from when neither `-f` nor an environment variable says.
pub const DEFAULT_CONF_PATH: &str = "/etc/canopy/slurm.conf";

/// Largest job id Slurm allows (ids above it encode federation bits).
pub const MAX_JOB_ID: u32 = 0x03ff_0000;

/// Longest ClusterName Slurm accepts.
const MAX_CLUSTER_NAME_LEN: usize = 40;

/// Largest value of Slurm's 16-bit timeouts (65534 and 65535 are reserved markers).
const MAX_TIMEOUT_S: u64 = 65_533;

/// The whole validated configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// The main file.
    pub path: PathBuf,
    /// Lower-cased; default `cluster`.
    pub cluster_name: String,
    /// First SlurmctldHost (or the old ControlMachine).
    pub control_host: String,
    /// The `(addr)` part of SlurmctldHost (or ControlAddr), else `control_host`.
    pub control_addr: String,
    /// Default 6817; of a range `6817-6818` the first port.
    pub slurmctld_port: u16,
    /// Default 6818; the port of nodes without their own `Port`.
    pub slurmd_port: u16,
    /// Default 300; 0 disables "not responding" detection.
    pub slurmd_timeout_s: u64,
    /// Relay fan-out, 2..=65533; default 16.
    pub tree_width: u32,
    /// Default /var/spool/canopy.
    pub state_save_location: PathBuf,
    /// Default /var/spool/canopyd; `%n`/`%h` left for the node daemon to expand.
    pub slurmd_spool_dir: String,
    /// Default 10000.
    pub max_job_count: u32,
    /// Default 1.
    pub first_job_id: u32,
    /// Default [`MAX_JOB_ID`].
    pub max_job_id: u32,
    /// Default 300.
    pub min_job_age_s: u64,
    /// Default 30.
    pub kill_wait_s: u32,
    /// Default 10.
    pub message_timeout_s: u32,
    /// 0..=2; default 0.
    pub return_to_service: u8,
    /// `<dir of main file>/slurm.key`: the shared HMAC key.
    pub auth_key_path: PathBuf,
    /// Expanded, in file order; later duplicates dropped with a warning.
    pub nodes: Vec<NodeConf>,
    /// In file order.
    pub partitions: Vec<PartitionConf>,
    /// Non-fatal notes, each `file:line: ...`.
    pub warnings: Vec<String>,
    /// Node name → index into `nodes`, built at load.
    node_by_name: HashMap<String, usize>,
}

/// One node as configured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeConf {
    pub name: String,
    /// NodeAddr, else `hostname`.
    pub addr: String,
    /// NodeHostname, else `name`.
    pub hostname: String,
    /// Port, else SlurmdPort.
    pub port: u16,
    pub cpus: u32,
    pub boards: u32,
    /// All sockets on the node (Boards × SocketsPerBoard when given that way).
    pub sockets: u32,
    pub cores_per_socket: u32,
    pub threads_per_core: u32,
    pub real_memory_mb: u64,
    pub tmp_disk_mb: u64,
    /// Raw Gres string; empty when none.
    pub gres: String,
    pub features: Vec<String>,
    pub weight: u32,
    pub state: ConfNodeState,
    pub reason: Option<String>,
}

/// The states a node may be given in slurm.conf (the controller decides IDLE, ALLOCATED...).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ConfNodeState {
    Unknown,
    Down,
    Drain,
    /// FAIL (FAILING is read as FAIL).
    Fail,
    Future,
    Cloud,
}

impl ConfNodeState {
    pub fn name(self) -> &'static str {
        match self {
            ConfNodeState::Unknown => "UNKNOWN",
            ConfNodeState::Down => "DOWN",
            ConfNodeState::Drain => "DRAIN",
            ConfNodeState::Fail => "FAIL",
            ConfNodeState::Future => "FUTURE",
            ConfNodeState::Cloud => "CLOUD",
        }
    }
}

/// One partition as configured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionConf {
    pub name: String,
    /// Member nodes, each once, in node (file) order, as Slurm's partition bitmaps list them.
    pub nodes: Vec<String>,
    pub default: bool,
    /// Minutes; `None` = UNLIMITED.
    pub max_time_min: Option<u32>,
    /// Minutes; `None` = not set.
    pub default_time_min: Option<u32>,
    /// `None` = UNLIMITED.
    pub max_nodes: Option<u32>,
    pub min_nodes: u32,
    pub state: PartitionState,
}

/// A configuration error at `file:line` (line 0 when it concerns the file as a whole).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub file: PathBuf,
    pub line: usize,
    /// The key the error is about, as written; empty for purely lexical errors.
    pub key: String,
    pub message: String,
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.line == 0 {
            write!(f, "{}: {}", self.file.display(), self.message)
        } else {
            write!(f, "{}:{}: {}", self.file.display(), self.line, self.message)
        }
    }
}

impl std::error::Error for ConfigError {}

impl Config {
    /// Read and validate the file at `path`.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
            file: path.to_path_buf(),
            line: 0,
            key: String::new(),
            message: format!("cannot read {}: {e}", path.display()),
        })?;
        Config::parse_str(&text, path)
    }

    /// Validate `text` as if it were the contents of `path` (Includes are relative to it).
    pub fn parse_str(text: &str, path: &Path) -> Result<Config, ConfigError> {
        let mut builder = Builder::new(path);
        for line in parse::read_lines(text, path)? {
            builder.line(&line)?;
        }
        builder.finish()
    }

    /// The file to read: `-f` if given, then `$CANOPY_CONF`, `$SLURM_CONF`, then
    /// [`DEFAULT_CONF_PATH`]. Empty variables count as unset.
    pub fn locate(explicit: Option<&Path>) -> PathBuf {
        locate_with(explicit, |name| std::env::var_os(name))
    }

    /// Index of the node called `name` in `nodes`.
    pub fn node_index(&self, name: &str) -> Option<usize> {
        self.node_by_name.get(name).copied()
    }

    /// The partition marked `Default=YES`, if any.
    pub fn default_partition(&self) -> Option<&PartitionConf> {
        self.partitions.iter().find(|p| p.default)
    }

    /// How often a node reports in: a third of SlurmdTimeout, so two beats can be lost
    /// before the controller gives up, clamped to [200 ms, 10 s]; 10 s when the timeout is 0.
    pub fn heartbeat_interval(&self) -> Duration {
        const MIN: Duration = Duration::from_millis(200);
        const MAX: Duration = Duration::from_secs(10);
        if self.slurmd_timeout_s == 0 {
            return MAX;
        }
        Duration::from_millis(self.slurmd_timeout_s.saturating_mul(1000) / 3).clamp(MIN, MAX)
    }
}

fn locate_with(explicit: Option<&Path>, var: impl Fn(&str) -> Option<OsString>) -> PathBuf {
    if let Some(path) = explicit {
        return path.to_path_buf();
    }
    ["CANOPY_CONF", "SLURM_CONF"]
        .into_iter()
        .find_map(|name| var(name).filter(|v| !v.is_empty()))
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(DEFAULT_CONF_PATH))
}

// ---------------------------------------------------------------------------------------
// Key tables
// ---------------------------------------------------------------------------------------

/// Global keys canopy uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum GlobalKey {
    ClusterName,
    SlurmctldHost,
    ControlMachine,
    ControlAddr,
    SlurmctldPort,
    SlurmdPort,
    SlurmdTimeout,
    TreeWidth,
    StateSaveLocation,
    SlurmdSpoolDir,
    MaxJobCount,
    FirstJobId,
    MaxJobId,
    MinJobAge,
    KillWait,
    MessageTimeout,
    ReturnToService,
}

const GLOBAL_KEYS: &[(&str, GlobalKey)] = &[
    ("ClusterName", GlobalKey::ClusterName),
    ("SlurmctldHost", GlobalKey::SlurmctldHost),
    ("ControlMachine", GlobalKey::ControlMachine),
    ("ControlAddr", GlobalKey::ControlAddr),
    ("SlurmctldPort", GlobalKey::SlurmctldPort),
    ("SlurmdPort", GlobalKey::SlurmdPort),
    ("SlurmdTimeout", GlobalKey::SlurmdTimeout),
    ("TreeWidth", GlobalKey::TreeWidth),
    ("StateSaveLocation", GlobalKey::StateSaveLocation),
    ("SlurmdSpoolDir", GlobalKey::SlurmdSpoolDir),
    ("MaxJobCount", GlobalKey::MaxJobCount),
    ("FirstJobId", GlobalKey::FirstJobId),
    ("MaxJobId", GlobalKey::MaxJobId),
    ("MinJobAge", GlobalKey::MinJobAge),
    ("KillWait", GlobalKey::KillWait),
    ("MessageTimeout", GlobalKey::MessageTimeout),
    ("ReturnToService", GlobalKey::ReturnToService),
];

/// Real slurm.conf global keys (current and recently retired) that canopy accepts and
/// ignores, so an existing site file loads; each earns one warning.
const UNUSED_GLOBAL_KEYS: &[&str] = &[
    "AccountingStorageBackupHost",
    "AccountingStorageEnforce",
    "AccountingStorageExternalHost",
    "AccountingStorageHost",
    "AccountingStorageLoc",
    "AccountingStorageParameters",
    "AccountingStoragePass",
    "AccountingStoragePort",
    "AccountingStorageTRES",
    "AccountingStorageType",
    "AccountingStorageUser",
    "AccountingStoreFlags",
    "AccountingStoreJobComment",
    "AcctGatherEnergyType",
    "AcctGatherFilesystemType",
    "AcctGatherInfinibandType",
    "AcctGatherInterconnectType",
    "AcctGatherNodeFreq",
    "AcctGatherProfileType",
    "AllowSpecResourcesUsage",
    "AuthAltParameters",
    "AuthAltTypes",
    "AuthInfo",
    "AuthType",
    "BackupAddr",
    "BackupController",
    "BatchStartTimeout",
    "BcastExclude",
    "BcastParameters",
    "BurstBufferParameters",
    "BurstBufferType",
    "CacheGroups",
    "CertgenParameters",
    "CertgenType",
    "CertmgrParameters",
    "CertmgrType",
    "CheckpointType",
    "CliFilterParameters",
    "CliFilterPlugins",
    "CommunicationParameters",
    "CompleteWait",
    "CoreSpecPlugin",
    "CpuFreqDef",
    "CpuFreqGovernors",
    "CredType",
    "CryptoType",
    "DataParserParameters",
    "DebugFlags",
    "DefCPUPerGPU",
    "DefMemPerCPU",
    "DefMemPerGPU",
    "DefMemPerNode",
    "DefaultStorageHost",
    "DefaultStorageLoc",
    "DefaultStoragePass",
    "DefaultStoragePort",
    "DefaultStorageType",
    "DefaultStorageUser",
    "DependencyParameters",
    "DisableRootJobs",
    "EioTimeout",
    "EnforcePartLimits",
    "Epilog",
    "EpilogMsgTime",
    "EpilogSlurmctld",
    "EpilogTimeout",
    "ExtSensorsFreq",
    "ExtSensorsType",
    "FairShareDampeningFactor",
    "FastSchedule",
    "FederationParameters",
    "GetEnvTimeout",
    "GpuFreqDef",
    "GresTypes",
    "GroupUpdateForce",
    "GroupUpdateTime",
    "HashPlugin",
    "HealthCheckInterval",
    "HealthCheckNodeState",
    "HealthCheckProgram",
    "HttpParserType",
    "InactiveLimit",
    "InteractiveStepOptions",
    "JobAcctGatherFrequency",
    "JobAcctGatherParams",
    "JobAcctGatherType",
    "JobCheckpointDir",
    "JobCompHost",
    "JobCompLoc",
    "JobCompParams",
    "JobCompPass",
    "JobCompPort",
    "JobCompType",
    "JobCompUser",
    "JobContainerType",
    "JobCredentialPrivateKey",
    "JobCredentialPublicCertificate",
    "JobFileAppend",
    "JobRequeue",
    "JobSubmitPlugins",
    "KeepAliveTime",
    "KillOnBadExit",
    "LaunchParameters",
    "LaunchType",
    "Licenses",
    "LogTimeFormat",
    "MailDomain",
    "MailProg",
    "MaxArraySize",
    "MaxBatchRequeue",
    "MaxDBDMsgs",
    "MaxMemPerCPU",
    "MaxMemPerNode",
    "MaxNodeCount",
    "MaxStepCount",
    "MaxTasksPerNode",
    "MCSParameters",
    "MCSPlugin",
    "MemLimitEnforce",
    "MpiDefault",
    "MpiParams",
    "NodeFeaturesPlugins",
    "OverTimeLimit",
    "PluginDir",
    "PlugStackConfig",
    "PowerParameters",
    "PowerPlugin",
    "PreemptExemptTime",
    "PreemptMode",
    "PreemptParameters",
    "PreemptType",
    "PrEpParameters",
    "PrEpPlugins",
    "PriorityCalcPeriod",
    "PriorityDecayHalfLife",
    "PriorityFavorSmall",
    "PriorityFlags",
    "PriorityMaxAge",
    "PriorityParameters",
    "PrioritySiteFactorParameters",
    "PrioritySiteFactorPlugin",
    "PriorityType",
    "PriorityUsageResetPeriod",
    "PriorityWeightAge",
    "PriorityWeightAssoc",
    "PriorityWeightFairshare",
    "PriorityWeightJobSize",
    "PriorityWeightPartition",
    "PriorityWeightQOS",
    "PriorityWeightTRES",
    "PrivateData",
    "ProctrackType",
    "Prolog",
    "PrologEpilogTimeout",
    "PrologFlags",
    "PrologSlurmctld",
    "PrologTimeout",
    "PropagatePrioProcess",
    "PropagateResourceLimits",
    "PropagateResourceLimitsExcept",
    "RebootProgram",
    "ReconfigFlags",
    "RequeueExit",
    "RequeueExitHold",
    "ResumeFailProgram",
    "ResumeProgram",
    "ResumeRate",
    "ResumeTimeout",
    "ResvEpilog",
    "ResvOverRun",
    "ResvProlog",
    "RoutePlugin",
    "SallocDefaultCommand",
    "SbcastParameters",
    "SchedulerAuth",
    "SchedulerParameters",
    "SchedulerPort",
    "SchedulerRootFilter",
    "SchedulerTimeSlice",
    "SchedulerType",
    "ScronParameters",
    "SelectType",
    "SelectTypeParameters",
    "SlurmSchedLogFile",
    "SlurmSchedLogLevel",
    "SlurmUser",
    "SlurmctldAddr",
    "SlurmctldDebug",
    "SlurmctldLogFile",
    "SlurmctldParameters",
    "SlurmctldPidFile",
    "SlurmctldPlugstack",
    "SlurmctldPrimaryOffProg",
    "SlurmctldPrimaryOnProg",
    "SlurmctldSyslogDebug",
    "SlurmctldTimeout",
    "SlurmdDebug",
    "SlurmdLogFile",
    "SlurmdParameters",
    "SlurmdPidFile",
    "SlurmdSyslogDebug",
    "SlurmdUser",
    "SrunEpilog",
    "SrunPortRange",
    "SrunProlog",
    "SuspendExcNodes",
    "SuspendExcParts",
    "SuspendExcStates",
    "SuspendProgram",
    "SuspendRate",
    "SuspendTime",
    "SuspendTimeout",
    "SwitchParameters",
    "SwitchType",
    "TaskEpilog",
    "TaskPlugin",
    "TaskPluginParam",
    "TaskProlog",
    "TCPTimeout",
    "TLSParameters",
    "TLSType",
    "TmpFS",
    "TopologyParam",
    "TopologyPlugin",
    "TrackWCKey",
    "UnkillableStepProgram",
    "UnkillableStepTimeout",
    "UrlParserType",
    "UsePAM",
    "VSizeFactor",
    "WaitTime",
    "X11Parameters",
];

/// NodeName attributes canopy uses (aliases map to the same attribute).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum NodeAttr {
    Cpus,
    Boards,
    Sockets,
    SocketsPerBoard,
    CoresPerSocket,
    ThreadsPerCore,
    RealMemory,
    TmpDisk,
    Gres,
    Features,
    Weight,
    State,
    Reason,
    NodeAddr,
    NodeHostname,
    Port,
}

const NODE_ATTRS: &[(&str, NodeAttr)] = &[
    ("CPUs", NodeAttr::Cpus),
    ("Procs", NodeAttr::Cpus),
    ("Boards", NodeAttr::Boards),
    ("Sockets", NodeAttr::Sockets),
    ("SocketsPerBoard", NodeAttr::SocketsPerBoard),
    ("CoresPerSocket", NodeAttr::CoresPerSocket),
    ("ThreadsPerCore", NodeAttr::ThreadsPerCore),
    ("RealMemory", NodeAttr::RealMemory),
    ("TmpDisk", NodeAttr::TmpDisk),
    ("Gres", NodeAttr::Gres),
    ("Features", NodeAttr::Features),
    ("Feature", NodeAttr::Features),
    ("Weight", NodeAttr::Weight),
    ("State", NodeAttr::State),
    ("Reason", NodeAttr::Reason),
    ("NodeAddr", NodeAttr::NodeAddr),
    ("NodeHostname", NodeAttr::NodeHostname),
    ("Port", NodeAttr::Port),
];

const UNUSED_NODE_ATTRS: &[&str] = &[
    "BcastAddr",
    "CoreSpecCount",
    "CpuBind",
    "CPUSpecList",
    "MemSpecLimit",
    "RestrictedCoresPerGPU",
    "Topology",
    "TRESWeights",
];

/// PartitionName attributes canopy uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum PartAttr {
    Nodes,
    Default,
    MaxTime,
    DefaultTime,
    MaxNodes,
    MinNodes,
    State,
}

const PART_ATTRS: &[(&str, PartAttr)] = &[
    ("Nodes", PartAttr::Nodes),
    ("Default", PartAttr::Default),
    ("MaxTime", PartAttr::MaxTime),
    ("DefaultTime", PartAttr::DefaultTime),
    ("MaxNodes", PartAttr::MaxNodes),
    ("MinNodes", PartAttr::MinNodes),
    ("State", PartAttr::State),
];

const UNUSED_PART_ATTRS: &[&str] = &[
    "AllocNodes",
    "AllowAccounts",
    "AllowGroups",
    "AllowQos",
    "Alternate",
    "CpuBind",
    "DefCPUPerGPU",
    "DefMemPerCPU",
    "DefMemPerGPU",
    "DefMemPerNode",
    "DenyAccounts",
    "DenyQos",
    "DisableRootJobs",
    "Exclusive",
    "ExclusiveTopo",
    "ExclusiveUser",
    "GraceTime",
    "Hidden",
    "LLN",
    "MaxCPUsPerNode",
    "MaxCPUsPerSocket",
    "MaxMemPerCPU",
    "MaxMemPerNode",
    "OverSubscribe",
    "OverTimeLimit",
    "PowerDownOnIdle",
    "PreemptMode",
    "Priority",
    "PriorityJobFactor",
    "PriorityTier",
    "QOS",
    "ReqResv",
    "ResumeTimeout",
    "RootOnly",
    "SelectTypeParameters",
    "Shared",
    "SuspendTime",
    "SuspendTimeout",
    "Topology",
    "TRESBillingWeights",
];

/// Attributes of `DownNodes=` and `NodeSet=` lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum SetAttr {
    State,
    Reason,
    Nodes,
    Feature,
}

const DOWN_ATTRS: &[(&str, SetAttr)] = &[("State", SetAttr::State), ("Reason", SetAttr::Reason)];

const NODESET_ATTRS: &[(&str, SetAttr)] = &[
    ("Nodes", SetAttr::Nodes),
    ("Feature", SetAttr::Feature),
    ("Features", SetAttr::Feature),
];

/// The entry of `table` whose name matches `key` case-insensitively.
fn lookup<T: Copy>(table: &[(&'static str, T)], key: &str) -> Option<(&'static str, T)> {
    table
        .iter()
        .copied()
        .find(|(name, _)| name.eq_ignore_ascii_case(key))
}

fn lookup_name(table: &[&'static str], key: &str) -> Option<&'static str> {
    table
        .iter()
        .copied()
        .find(|name| name.eq_ignore_ascii_case(key))
}

// ---------------------------------------------------------------------------------------
// Value readers: each error names the key and value as written and what was expected.
// ---------------------------------------------------------------------------------------

fn bad_value(loc: &Loc, item: &Item, expected: impl std::fmt::Display) -> ConfigError {
    loc.error(
        &item.key,
        format!("{}={}: expected {expected}", item.key, item.value),
    )
}

/// Keys canopy uses take a plain `=`; `+=` and friends only make sense for ignored ones.
fn require_set(loc: &Loc, item: &Item) -> Result<(), ConfigError> {
    match item.op {
        Op::Set => Ok(()),
        op => Err(loc.error(
            &item.key,
            format!(
                "{}{}{}: the '{}' operator is not supported for {}; use '='",
                item.key,
                op.text(),
                item.value,
                op.text(),
                item.key
            ),
        )),
    }
}

fn digits(text: &str) -> Option<u64> {
    let ok = !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit());
    ok.then(|| text.parse().ok()).flatten()
}

fn int_in<T: TryFrom<u64>>(loc: &Loc, item: &Item, min: u64, max: u64) -> Result<T, ConfigError> {
    digits(item.value.trim())
        .filter(|n| (min..=max).contains(n))
        .and_then(|n| T::try_from(n).ok())
        .ok_or_else(|| {
            bad_value(
                loc,
                item,
                format_args!("an integer between {min} and {max}"),
            )
        })
}

fn secs_in<T: TryFrom<u64>>(loc: &Loc, item: &Item, min: u64, max: u64) -> Result<T, ConfigError> {
    units::parse_secs_plain(&item.value)
        .ok()
        .filter(|n| (min..=max).contains(n))
        .and_then(|n| T::try_from(n).ok())
        .ok_or_else(|| {
            bad_value(
                loc,
                item,
                format_args!("a number of seconds between {min} and {max}"),
            )
        })
}

fn mem_mb(loc: &Loc, item: &Item) -> Result<u64, ConfigError> {
    units::parse_mem_mb(&item.value).map_err(|e| bad_value(loc, item, format_args!("MiB ({e})")))
}

fn time_limit(loc: &Loc, item: &Item) -> Result<Option<u32>, ConfigError> {
    units::parse_time_limit_min(&item.value).map_err(|e| {
        bad_value(
            loc,
            item,
            format_args!("a time limit such as 30, 1:00:00, 2-0 or UNLIMITED ({e})"),
        )
    })
}

fn yes_no(loc: &Loc, item: &Item) -> Result<bool, ConfigError> {
    match item.value.trim().to_ascii_uppercase().as_str() {
        "YES" | "TRUE" | "UP" | "1" => Ok(true),
        "NO" | "FALSE" | "DOWN" | "0" => Ok(false),
        _ => Err(bad_value(loc, item, "YES or NO")),
    }
}

fn non_empty(loc: &Loc, item: &Item, what: &str) -> Result<String, ConfigError> {
    let value = item.value.trim();
    if value.is_empty() {
        return Err(bad_value(loc, item, what));
    }
    Ok(value.to_string())
}

fn port_number(text: &str) -> Option<u16> {
    digits(text)
        .and_then(|n| u16::try_from(n).ok())
        .filter(|&p| p != 0)
}

fn port(loc: &Loc, item: &Item) -> Result<u16, ConfigError> {
    port_number(item.value.trim()).ok_or_else(|| bad_value(loc, item, "a port between 1 and 65535"))
}

/// SlurmctldPort: a port or a range `LO-HI`, of which canopy listens on the first.
fn ctld_port(loc: &Loc, item: &Item) -> Result<u16, ConfigError> {
    let value = item.value.trim();
    let (lo, hi) = value.split_once('-').unwrap_or((value, value));
    match (port_number(lo), port_number(hi)) {
        (Some(lo), Some(hi)) if lo <= hi => Ok(lo),
        _ => Err(bad_value(
            loc,
            item,
            "a port between 1 and 65535 or a range LO-HI",
        )),
    }
}

fn cluster_name(loc: &Loc, item: &Item) -> Result<String, ConfigError> {
    let name = item.value.trim();
    if name.is_empty() || name.len() > MAX_CLUSTER_NAME_LEN {
        return Err(bad_value(
            loc,
            item,
            format_args!("a name of 1 to {MAX_CLUSTER_NAME_LEN} characters"),
        ));
    }
    Ok(name.to_ascii_lowercase())
}

/// `host` or `host(addr)`.
fn ctld_host(loc: &Loc, item: &Item) -> Result<(String, String), ConfigError> {
    let value = item.value.trim();
    let parsed = match value.split_once('(') {
        Some((host, rest)) => rest.strip_suffix(')').map(|addr| (host, addr)),
        None => Some((value, value)),
    };
    let valid = |s: &str| !s.is_empty() && !s.contains(['(', ')']);
    match parsed {
        Some((host, addr)) if valid(host) && valid(addr) => Ok((host.into(), addr.into())),
        _ => Err(bad_value(loc, item, "a host name or host(address)")),
    }
}

fn comma_list(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect()
}

/// A hostlist-valued attribute: its text as written and its expansion.
#[derive(Debug, Clone)]
struct Listed<T> {
    raw: String,
    values: Vec<T>,
}

fn host_names(loc: &Loc, item: &Item) -> Result<Listed<String>, ConfigError> {
    let values = hostlist::expand(&item.value)
        .map_err(|e| bad_value(loc, item, format_args!("a hostlist ({e})")))?;
    if values.is_empty() {
        return Err(bad_value(loc, item, "a name or hostlist"));
    }
    Ok(Listed {
        raw: item.value.clone(),
        values,
    })
}

/// `Port=17001`, `Port=17001,17003`, `Port=[20001-20008]` or `Port=20001-20008`.
fn port_list(loc: &Loc, item: &Item) -> Result<Listed<u16>, ConfigError> {
    let value = item.value.trim();
    let expr = if value.contains('-') && !value.contains('[') {
        format!("[{value}]")
    } else {
        value.to_string()
    };
    let bad = || {
        bad_value(
            loc,
            item,
            "a port (1-65535), a comma list or a range such as [20001-20008]",
        )
    };
    let texts = hostlist::expand(&expr).map_err(|_| bad())?;
    let values = texts
        .iter()
        .map(|t| port_number(t))
        .collect::<Option<Vec<u16>>>()
        .filter(|v| !v.is_empty())
        .ok_or_else(bad)?;
    Ok(Listed {
        raw: item.value.clone(),
        values,
    })
}

const CONF_STATES: &str = "CLOUD, DOWN, DRAIN, FAIL, FAILING, FUTURE or UNKNOWN";

fn conf_node_state(loc: &Loc, item: &Item) -> Result<ConfNodeState, ConfigError> {
    let upper = item.value.trim().to_ascii_uppercase();
    Ok(match upper.as_str() {
        "UNKNOWN" => ConfNodeState::Unknown,
        "DOWN" => ConfNodeState::Down,
        "DRAIN" => ConfNodeState::Drain,
        "FAIL" | "FAILING" => ConfNodeState::Fail,
        "FUTURE" => ConfNodeState::Future,
        "CLOUD" => ConfNodeState::Cloud,
        "IDLE" | "ALLOCATED" | "ALLOC" | "MIXED" | "COMPLETING" => {
            return Err(bad_value(
                loc,
                item,
                format_args!(
                    "{CONF_STATES} (a node is never configured {upper}: \
                     the controller derives that from running jobs)"
                ),
            ))
        }
        _ => return Err(bad_value(loc, item, CONF_STATES)),
    })
}

fn partition_state(loc: &Loc, item: &Item) -> Result<PartitionState, ConfigError> {
    Ok(match item.value.trim().to_ascii_uppercase().as_str() {
        "UP" => PartitionState::Up,
        "DOWN" => PartitionState::Down,
        "DRAIN" => PartitionState::Drain,
        "INACTIVE" => PartitionState::Inactive,
        _ => return Err(bad_value(loc, item, "UP, DOWN, DRAIN or INACTIVE")),
    })
}

// ---------------------------------------------------------------------------------------
// Line specs: typed attribute values, merged over DEFAULT lines.
// ---------------------------------------------------------------------------------------

/// Attributes given on one NodeName line (or accumulated from DEFAULT lines).
#[derive(Debug, Clone, Default)]
struct NodeSpec {
    cpus: Option<u32>,
    boards: Option<u32>,
    sockets: Option<u32>,
    sockets_per_board: Option<u32>,
    cores: Option<u32>,
    threads: Option<u32>,
    real_memory_mb: Option<u64>,
    tmp_disk_mb: Option<u64>,
    gres: Option<String>,
    features: Option<Vec<String>>,
    weight: Option<u32>,
    state: Option<ConfNodeState>,
    reason: Option<String>,
    addr: Option<Listed<String>>,
    hostname: Option<Listed<String>>,
    port: Option<Listed<u16>>,
}

impl NodeSpec {
    /// `self`'s values, falling back to `base` for those not given.
    fn over(self, base: &NodeSpec) -> NodeSpec {
        NodeSpec {
            cpus: self.cpus.or(base.cpus),
            boards: self.boards.or(base.boards),
            sockets: self.sockets.or(base.sockets),
            sockets_per_board: self.sockets_per_board.or(base.sockets_per_board),
            cores: self.cores.or(base.cores),
            threads: self.threads.or(base.threads),
            real_memory_mb: self.real_memory_mb.or(base.real_memory_mb),
            tmp_disk_mb: self.tmp_disk_mb.or(base.tmp_disk_mb),
            gres: self.gres.or_else(|| base.gres.clone()),
            features: self.features.or_else(|| base.features.clone()),
            weight: self.weight.or(base.weight),
            state: self.state.or(base.state),
            reason: self.reason.or_else(|| base.reason.clone()),
            addr: self.addr.or_else(|| base.addr.clone()),
            hostname: self.hostname.or_else(|| base.hostname.clone()),
            port: self.port.or_else(|| base.port.clone()),
        }
    }
}

/// Attributes given on one PartitionName line (or accumulated from DEFAULT lines).
#[derive(Debug, Clone, Default)]
struct PartSpec {
    nodes: Option<Listed<String>>,
    default: Option<bool>,
    max_time: Option<Option<u32>>,
    default_time: Option<Option<u32>>,
    max_nodes: Option<Option<u32>>,
    min_nodes: Option<u32>,
    state: Option<PartitionState>,
}

impl PartSpec {
    fn over(self, base: &PartSpec) -> PartSpec {
        PartSpec {
            nodes: self.nodes.or_else(|| base.nodes.clone()),
            default: self.default.or(base.default),
            max_time: self.max_time.or(base.max_time),
            default_time: self.default_time.or(base.default_time),
            max_nodes: self.max_nodes.or(base.max_nodes),
            min_nodes: self.min_nodes.or(base.min_nodes),
            state: self.state.or(base.state),
        }
    }
}

/// CPU topology of one node line after defaults and inference.
struct Topology {
    cpus: u32,
    boards: u32,
    sockets: u32,
    cores: u32,
    threads: u32,
}

/// A partition whose node list is resolved once every node is known.
struct PendingPartition {
    conf: PartitionConf,
    nodes: Option<Listed<String>>,
    loc: Loc,
}

struct PendingDown {
    names: Listed<String>,
    state: ConfNodeState,
    reason: Option<String>,
    loc: Loc,
}

struct PendingNodeSet {
    name: String,
    nodes: Option<Listed<String>>,
    feature: Option<String>,
    loc: Loc,
}

// ---------------------------------------------------------------------------------------
// Builder: applies logical lines in order, then validates across lines.
// ---------------------------------------------------------------------------------------

struct Builder {
    cfg: Config,
    /// Where each scalar key was last set, to warn when it is set again.
    set_at: HashMap<GlobalKey, Loc>,
    /// (section, key) pairs already warned about as unused.
    warned_unused: HashSet<(&'static str, &'static str)>,
    node_defaults: NodeSpec,
    part_defaults: PartSpec,
    /// Per node: where it was defined and its own Port, if any.
    node_origin: Vec<(Loc, Option<u16>)>,
    partitions: Vec<PendingPartition>,
    down: Vec<PendingDown>,
    nodesets: Vec<PendingNodeSet>,
    ctld_host: Option<(String, String, Loc)>,
    control_machine: Option<(String, Loc)>,
    control_addr: Option<(String, Loc)>,
}

impl Builder {
    fn new(path: &Path) -> Builder {
        let dir = path.parent().unwrap_or(Path::new(""));
        Builder {
            cfg: Config {
                path: path.to_path_buf(),
                cluster_name: "cluster".into(),
                control_host: String::new(),
                control_addr: String::new(),
                slurmctld_port: 6817,
                slurmd_port: 6818,
                slurmd_timeout_s: 300,
                tree_width: 16,
                state_save_location: PathBuf::from("/var/spool/canopy"),
                slurmd_spool_dir: "/var/spool/canopyd".into(),
                max_job_count: 10_000,
                first_job_id: 1,
                max_job_id: MAX_JOB_ID,
                min_job_age_s: 300,
                kill_wait_s: 30,
                message_timeout_s: 10,
                return_to_service: 0,
                auth_key_path: dir.join("slurm.key"),
                nodes: Vec::new(),
                partitions: Vec::new(),
                warnings: Vec::new(),
                node_by_name: HashMap::new(),
            },
            set_at: HashMap::new(),
            warned_unused: HashSet::new(),
            node_defaults: NodeSpec::default(),
            part_defaults: PartSpec::default(),
            node_origin: Vec::new(),
            partitions: Vec::new(),
            down: Vec::new(),
            nodesets: Vec::new(),
            ctld_host: None,
            control_machine: None,
            control_addr: None,
        }
    }

    fn warn(&mut self, loc: &Loc, message: impl std::fmt::Display) {
        self.cfg.warnings.push(format!("{loc}: {message}"));
    }

    /// One warning per ignored key per section, however often it appears.
    fn warn_unused(&mut self, loc: &Loc, section: &'static str, key: &'static str) {
        if self.warned_unused.insert((section, key)) {
            let what = if section.is_empty() {
                key.to_string()
            } else {
                format!("{section} attribute {key}")
            };
            self.warn(
                loc,
                format_args!("{what} is not used by canopy yet; ignored"),
            );
        }
    }

    /// Apply one logical line. Record keys (NodeName=, PartitionName=...) take the rest of
    /// the line as their attributes; any other key is a global setting.
    fn line(&mut self, line: &Line) -> Result<(), ConfigError> {
        let loc = &line.loc;
        for (i, item) in line.items.iter().enumerate() {
            let rest = line.items.get(i + 1..).unwrap_or_default();
            match item.key.to_ascii_lowercase().as_str() {
                "nodename" => return self.node_line(loc, item, rest),
                "partitionname" => return self.partition_line(loc, item, rest),
                "downnodes" => return self.down_line(loc, item, rest),
                "nodeset" => return self.nodeset_line(loc, item, rest),
                "frontendname" => {
                    self.warn_unused(loc, "", "FrontendName");
                    return Ok(());
                }
                _ => self.global(loc, item)?,
            }
        }
        Ok(())
    }

    fn global(&mut self, loc: &Loc, item: &Item) -> Result<(), ConfigError> {
        let Some((name, key)) = lookup(GLOBAL_KEYS, &item.key) else {
            return match lookup_name(UNUSED_GLOBAL_KEYS, &item.key) {
                Some(name) => {
                    self.warn_unused(loc, "", name);
                    Ok(())
                }
                None => Err(loc.error(&item.key, format!("unrecognized key '{}'", item.key))),
            };
        };
        require_set(loc, item)?;
        let cfg = &mut self.cfg;
        match key {
            GlobalKey::ClusterName => cfg.cluster_name = cluster_name(loc, item)?,
            GlobalKey::SlurmctldHost => return self.slurmctld_host(loc, item),
            GlobalKey::ControlMachine => {
                self.control_machine = Some((non_empty(loc, item, "a host name")?, loc.clone()))
            }
            GlobalKey::ControlAddr => {
                self.control_addr = Some((non_empty(loc, item, "an address")?, loc.clone()))
            }
            GlobalKey::SlurmctldPort => cfg.slurmctld_port = ctld_port(loc, item)?,
            GlobalKey::SlurmdPort => cfg.slurmd_port = port(loc, item)?,
            GlobalKey::SlurmdTimeout => {
                cfg.slurmd_timeout_s = secs_in(loc, item, 0, MAX_TIMEOUT_S)?
            }
            GlobalKey::TreeWidth => cfg.tree_width = int_in(loc, item, 2, 65_533)?,
            GlobalKey::StateSaveLocation => {
                cfg.state_save_location = non_empty(loc, item, "a directory")?.into()
            }
            GlobalKey::SlurmdSpoolDir => {
                cfg.slurmd_spool_dir = non_empty(loc, item, "a directory")?
            }
            GlobalKey::MaxJobCount => cfg.max_job_count = int_in(loc, item, 1, u32::MAX.into())?,
            GlobalKey::FirstJobId => cfg.first_job_id = int_in(loc, item, 1, MAX_JOB_ID.into())?,
            GlobalKey::MaxJobId => cfg.max_job_id = int_in(loc, item, 1, MAX_JOB_ID.into())?,
            GlobalKey::MinJobAge => cfg.min_job_age_s = secs_in(loc, item, 0, u64::MAX)?,
            GlobalKey::KillWait => cfg.kill_wait_s = secs_in(loc, item, 0, MAX_TIMEOUT_S)?,
            GlobalKey::MessageTimeout => {
                cfg.message_timeout_s = secs_in(loc, item, 1, MAX_TIMEOUT_S)?
            }
            GlobalKey::ReturnToService => cfg.return_to_service = int_in(loc, item, 0, 2)?,
        }
        if let Some(previous) = self.set_at.insert(key, loc.clone()) {
            self.warn(
                loc,
                format_args!("{name} is set again (previously at {previous}); the last value wins"),
            );
        }
        Ok(())
    }

    /// The first SlurmctldHost is the controller; later ones would be backups.
    fn slurmctld_host(&mut self, loc: &Loc, item: &Item) -> Result<(), ConfigError> {
        let (host, addr) = ctld_host(loc, item)?;
        if self.ctld_host.is_some() {
            self.warn(
                loc,
                format_args!("backup controller {host} is not used by canopy yet; ignored"),
            );
        } else {
            self.ctld_host = Some((host, addr, loc.clone()));
        }
        Ok(())
    }

    /// Resolve an attribute key against a section's tables: `Some` for a used attribute,
    /// `None` (after a warning) for a known ignored one, an error for anything else.
    fn attribute<A: Copy>(
        &mut self,
        loc: &Loc,
        section: &'static str,
        used: &[(&'static str, A)],
        unused: &[&'static str],
        item: &Item,
    ) -> Result<Option<A>, ConfigError> {
        if let Some((_, attr)) = lookup(used, &item.key) {
            require_set(loc, item)?;
            return Ok(Some(attr));
        }
        match lookup_name(unused, &item.key) {
            Some(name) => {
                self.warn_unused(loc, section, name);
                Ok(None)
            }
            None => Err(loc.error(
                &item.key,
                format!("unrecognized key '{}' on a {section} line", item.key),
            )),
        }
    }

    fn warn_repeated(&mut self, loc: &Loc, item: &Item) {
        self.warn(
            loc,
            format_args!(
                "{} is given more than once on this line; the last value wins",
                item.key
            ),
        );
    }

    fn node_spec(&mut self, loc: &Loc, attrs: &[Item]) -> Result<NodeSpec, ConfigError> {
        let mut spec = NodeSpec::default();
        let mut seen = HashSet::new();
        for item in attrs {
            let Some(attr) =
                self.attribute(loc, "NodeName", NODE_ATTRS, UNUSED_NODE_ATTRS, item)?
            else {
                continue;
            };
            if !seen.insert(attr) {
                self.warn_repeated(loc, item);
            }
            let count = |item| int_in::<u32>(loc, item, 1, u16::MAX.into());
            match attr {
                NodeAttr::Cpus => spec.cpus = Some(count(item)?),
                NodeAttr::Boards => spec.boards = Some(count(item)?),
                NodeAttr::Sockets => spec.sockets = Some(count(item)?),
                NodeAttr::SocketsPerBoard => spec.sockets_per_board = Some(count(item)?),
                NodeAttr::CoresPerSocket => spec.cores = Some(count(item)?),
                NodeAttr::ThreadsPerCore => spec.threads = Some(count(item)?),
                NodeAttr::RealMemory => spec.real_memory_mb = Some(mem_mb(loc, item)?),
                NodeAttr::TmpDisk => spec.tmp_disk_mb = Some(mem_mb(loc, item)?),
                NodeAttr::Gres => spec.gres = Some(item.value.trim().to_string()),
                NodeAttr::Features => spec.features = Some(comma_list(&item.value)),
                NodeAttr::Weight => spec.weight = Some(int_in(loc, item, 0, u32::MAX.into())?),
                NodeAttr::State => spec.state = Some(conf_node_state(loc, item)?),
                NodeAttr::Reason => spec.reason = Some(item.value.clone()),
                NodeAttr::NodeAddr => spec.addr = Some(host_names(loc, item)?),
                NodeAttr::NodeHostname => spec.hostname = Some(host_names(loc, item)?),
                NodeAttr::Port => spec.port = Some(port_list(loc, item)?),
            }
        }
        Ok(spec)
    }

    fn node_line(&mut self, loc: &Loc, head: &Item, attrs: &[Item]) -> Result<(), ConfigError> {
        require_set(loc, head)?;
        let spec = self.node_spec(loc, attrs)?;
        let value = head.value.trim();
        if value.eq_ignore_ascii_case("DEFAULT") {
            // Addresses are per node by nature; Slurm refuses them on DEFAULT lines too.
            let per_node = [
                ("NodeAddr", spec.addr.is_some()),
                ("NodeHostname", spec.hostname.is_some()),
            ];
            if let Some((key, _)) = per_node.into_iter().find(|(_, given)| *given) {
                return Err(loc.error(key, format!("{key} is not allowed with NodeName=DEFAULT")));
            }
            self.node_defaults = spec.over(&self.node_defaults);
            return Ok(());
        }
        if value.eq_ignore_ascii_case("ALL") {
            return Err(loc.error(
                &head.key,
                format!(
                    "{}={value}: ALL is reserved (it means every node in a partition's Nodes=)",
                    head.key
                ),
            ));
        }
        let names = host_names(loc, head)?.values;
        let spec = spec.over(&self.node_defaults);
        let topology = self.topology(loc, &spec)?;
        let hostnames = per_node(
            loc,
            head,
            "NodeHostname",
            spec.hostname.as_ref(),
            names.len(),
        )?;
        let addrs = per_node(loc, head, "NodeAddr", spec.addr.as_ref(), names.len())?;
        let ports = per_node(loc, head, "Port", spec.port.as_ref(), names.len())?;
        let features = spec.features.unwrap_or_default();
        let reason = spec.reason.filter(|r| !r.is_empty());
        for (i, name) in names.into_iter().enumerate() {
            if let Some(&first) = self.cfg.node_by_name.get(&name) {
                let first_loc = self.node_origin.get(first).map(|(l, _)| l.to_string());
                self.warn(
                    loc,
                    format_args!(
                        "node {name} is already defined at {}; this definition is ignored",
                        first_loc.unwrap_or_default()
                    ),
                );
                continue;
            }
            let hostname = pick(hostnames, i).unwrap_or(&name).clone();
            let addr = pick(addrs, i).unwrap_or(&hostname).clone();
            let node = NodeConf {
                addr,
                hostname,
                port: 0, // filled from SlurmdPort once the whole file is read
                cpus: topology.cpus,
                boards: topology.boards,
                sockets: topology.sockets,
                cores_per_socket: topology.cores,
                threads_per_core: topology.threads,
                real_memory_mb: spec.real_memory_mb.unwrap_or(1),
                tmp_disk_mb: spec.tmp_disk_mb.unwrap_or(0),
                gres: spec.gres.clone().unwrap_or_default(),
                features: features.clone(),
                weight: spec.weight.unwrap_or(1),
                state: spec.state.unwrap_or(ConfNodeState::Unknown),
                reason: reason.clone(),
                name: name.clone(),
            };
            self.cfg.node_by_name.insert(name, self.cfg.nodes.len());
            self.cfg.nodes.push(node);
            self.node_origin
                .push((loc.clone(), pick(ports, i).copied()));
        }
        Ok(())
    }

    /// Sockets and CPUs as Slurm derives them: Sockets counts every socket on the node
    /// (Boards × SocketsPerBoard when given that way, else inferred from CPUs, else one per
    /// board); CPUs defaults to Sockets × CoresPerSocket × ThreadsPerCore, and a CPUs value
    /// matching no level of the topology is replaced (with a warning), as slurmctld does.
    fn topology(&mut self, loc: &Loc, spec: &NodeSpec) -> Result<Topology, ConfigError> {
        let boards = spec.boards.unwrap_or(1);
        let cores = spec.cores.unwrap_or(1);
        let threads = spec.threads.unwrap_or(1);
        let per_socket = u64::from(cores) * u64::from(threads);
        let sockets: u64 = match (spec.sockets, spec.sockets_per_board) {
            (Some(_), Some(_)) => {
                return Err(loc.error(
                    "SocketsPerBoard",
                    "Sockets and SocketsPerBoard are mutually exclusive \
                     (Sockets counts every socket on the node)",
                ))
            }
            (Some(sockets), None) => sockets.into(),
            (None, Some(per_board)) => u64::from(boards) * u64::from(per_board),
            (None, None) => match spec.cpus.map(u64::from) {
                Some(cpus) if cpus >= per_socket && cpus % per_socket == 0 => cpus / per_socket,
                _ => boards.into(),
            },
        };
        if sockets < u64::from(boards) {
            return Err(loc.error(
                "Sockets",
                format!("Sockets={sockets} is fewer than Boards={boards}"),
            ));
        }
        let full = sockets * per_socket;
        let cpus = match spec.cpus.map(u64::from) {
            None => full,
            Some(cpus) if [sockets, sockets * u64::from(cores), full].contains(&cpus) => cpus,
            Some(cpus) => {
                self.warn(
                    loc,
                    format_args!(
                        "CPUs={cpus} matches neither Sockets, Sockets*CoresPerSocket nor \
                         Sockets*CoresPerSocket*ThreadsPerCore; using {full}"
                    ),
                );
                full
            }
        };
        let too_big = |what: &str, n: u64| {
            loc.error(
                "CPUs",
                format!(
                    "the node topology gives {n} {what}; at most {} fit",
                    u32::MAX
                ),
            )
        };
        Ok(Topology {
            cpus: u32::try_from(cpus).map_err(|_| too_big("CPUs", cpus))?,
            boards,
            sockets: u32::try_from(sockets).map_err(|_| too_big("sockets", sockets))?,
            cores,
            threads,
        })
    }

    fn partition_line(
        &mut self,
        loc: &Loc,
        head: &Item,
        attrs: &[Item],
    ) -> Result<(), ConfigError> {
        require_set(loc, head)?;
        let mut spec = PartSpec::default();
        let mut seen = HashSet::new();
        for item in attrs {
            let Some(attr) =
                self.attribute(loc, "PartitionName", PART_ATTRS, UNUSED_PART_ATTRS, item)?
            else {
                continue;
            };
            if !seen.insert(attr) {
                self.warn_repeated(loc, item);
            }
            match attr {
                PartAttr::Nodes => spec.nodes = Some(partition_nodes(loc, item)?),
                PartAttr::Default => spec.default = Some(yes_no(loc, item)?),
                PartAttr::MaxTime => spec.max_time = Some(time_limit(loc, item)?),
                PartAttr::DefaultTime if item.value.trim().eq_ignore_ascii_case("NONE") => {
                    spec.default_time = Some(None)
                }
                PartAttr::DefaultTime => spec.default_time = Some(time_limit(loc, item)?),
                PartAttr::MaxNodes => spec.max_nodes = Some(max_nodes(loc, item)?),
                PartAttr::MinNodes => spec.min_nodes = Some(int_in(loc, item, 0, u32::MAX.into())?),
                PartAttr::State => spec.state = Some(partition_state(loc, item)?),
            }
        }
        let name = head.value.trim();
        if name.eq_ignore_ascii_case("DEFAULT") {
            self.part_defaults = spec.over(&self.part_defaults);
            return Ok(());
        }
        if name.is_empty() {
            return Err(bad_value(loc, head, "a partition name"));
        }
        if let Some(first) = self.partitions.iter().find(|p| p.conf.name == name) {
            return Err(loc.error(
                &head.key,
                format!("partition {name} is already defined at {}", first.loc),
            ));
        }
        let spec = spec.over(&self.part_defaults);
        self.partitions.push(PendingPartition {
            conf: PartitionConf {
                name: name.to_string(),
                nodes: Vec::new(),
                default: spec.default.unwrap_or(false),
                max_time_min: spec.max_time.unwrap_or(None),
                default_time_min: spec.default_time.unwrap_or(None),
                max_nodes: spec.max_nodes.unwrap_or(None),
                min_nodes: spec.min_nodes.unwrap_or(0),
                state: spec.state.unwrap_or(PartitionState::Up),
            },
            nodes: spec.nodes,
            loc: loc.clone(),
        });
        Ok(())
    }

    fn down_line(&mut self, loc: &Loc, head: &Item, attrs: &[Item]) -> Result<(), ConfigError> {
        require_set(loc, head)?;
        let names = host_names(loc, head)?;
        let mut state = ConfNodeState::Down;
        let mut reason = None;
        for item in attrs {
            match self.attribute(loc, "DownNodes", DOWN_ATTRS, &[], item)? {
                Some(SetAttr::State) => state = down_state(loc, item)?,
                Some(SetAttr::Reason) => reason = Some(item.value.clone()),
                _ => return Err(loc.error(&item.key, "unexpected DownNodes attribute")),
            }
        }
        self.down.push(PendingDown {
            names,
            state,
            reason: reason.filter(|r| !r.is_empty()),
            loc: loc.clone(),
        });
        Ok(())
    }

    fn nodeset_line(&mut self, loc: &Loc, head: &Item, attrs: &[Item]) -> Result<(), ConfigError> {
        require_set(loc, head)?;
        let name = non_empty(loc, head, "a node set name")?;
        if let Some(first) = self.nodesets.iter().find(|s| s.name == name) {
            return Err(loc.error(
                &head.key,
                format!("node set {name} is already defined at {}", first.loc),
            ));
        }
        let mut set = PendingNodeSet {
            name,
            nodes: None,
            feature: None,
            loc: loc.clone(),
        };
        for item in attrs {
            match self.attribute(loc, "NodeSet", NODESET_ATTRS, &[], item)? {
                Some(SetAttr::Nodes) => set.nodes = Some(host_names(loc, item)?),
                Some(SetAttr::Feature) => set.feature = Some(non_empty(loc, item, "a feature")?),
                _ => return Err(loc.error(&item.key, "unexpected NodeSet attribute")),
            }
        }
        if set.nodes.is_none() && set.feature.is_none() {
            return Err(loc.error(
                &head.key,
                format!("NodeSet={}: expected Nodes= or Feature=", set.name),
            ));
        }
        self.nodesets.push(set);
        Ok(())
    }

    // -- whole-file validation ----------------------------------------------------------

    fn finish(mut self) -> Result<Config, ConfigError> {
        self.resolve_controller()?;
        self.check_job_ids()?;
        self.assign_ports()?;
        let sets = self.resolve_nodesets()?;
        self.apply_down_nodes()?;
        self.resolve_partitions(&sets)?;
        Ok(self.cfg)
    }

    fn resolve_controller(&mut self) -> Result<(), ConfigError> {
        let old = self.control_machine.take();
        let old_addr = self.control_addr.take();
        match (self.ctld_host.take(), old, old_addr) {
            (Some(_), Some((_, loc)), _) | (Some(_), None, Some((_, loc))) => Err(loc.error(
                "ControlMachine",
                "ControlMachine/ControlAddr cannot be combined with SlurmctldHost \
                 (they are its old spelling); keep only SlurmctldHost",
            )),
            (Some((host, addr, _)), None, None) => {
                self.cfg.control_host = host;
                self.cfg.control_addr = addr;
                Ok(())
            }
            (None, Some((host, _)), addr) => {
                self.cfg.control_addr = addr.map(|(a, _)| a).unwrap_or_else(|| host.clone());
                self.cfg.control_host = host;
                Ok(())
            }
            (None, None, addr) => Err(ConfigError {
                file: self.cfg.path.clone(),
                line: addr.map(|(_, loc)| loc.line).unwrap_or(0),
                key: "SlurmctldHost".into(),
                message: "no SlurmctldHost is set: expected SlurmctldHost=<host> or \
                          SlurmctldHost=<host>(<address>)"
                    .into(),
            }),
        }
    }

    fn check_job_ids(&self) -> Result<(), ConfigError> {
        let (first, max) = (self.cfg.first_job_id, self.cfg.max_job_id);
        if first < max {
            return Ok(());
        }
        let loc = self
            .set_at
            .get(&GlobalKey::FirstJobId)
            .or_else(|| self.set_at.get(&GlobalKey::MaxJobId));
        let message = format!("FirstJobId={first} must be below MaxJobId={max}");
        Err(match loc {
            Some(loc) => loc.error("FirstJobId", message),
            None => ConfigError {
                file: self.cfg.path.clone(),
                line: 0,
                key: "FirstJobId".into(),
                message,
            },
        })
    }

    /// Give port-less nodes SlurmdPort (which may appear anywhere in the file), then insist
    /// that no two nodes share an address and port: their daemons could not both listen.
    fn assign_ports(&mut self) -> Result<(), ConfigError> {
        let mut owner: HashMap<(String, u16), usize> = HashMap::new();
        for (i, (node, (loc, port))) in self.cfg.nodes.iter_mut().zip(&self.node_origin).enumerate()
        {
            node.port = port.unwrap_or(self.cfg.slurmd_port);
            if let Some(&other) = owner.get(&(node.addr.clone(), node.port)) {
                let other_name = self.cfg.node_by_name.iter().find(|(_, &j)| j == other);
                return Err(loc.error(
                    "Port",
                    format!(
                        "nodes {} and {} both use {}:{}; give each node its own NodeAddr or Port",
                        other_name.map(|(n, _)| n.as_str()).unwrap_or("?"),
                        node.name,
                        node.addr,
                        node.port
                    ),
                ));
            }
            owner.insert((node.addr.clone(), node.port), i);
        }
        Ok(())
    }

    fn resolve_nodesets(&self) -> Result<HashMap<String, Vec<usize>>, ConfigError> {
        let mut sets = HashMap::new();
        for set in &self.nodesets {
            let mut members = Vec::new();
            if let Some(nodes) = &set.nodes {
                for name in &nodes.values {
                    members.push(self.defined(&set.loc, "Nodes", "NodeSet", &nodes.raw, name)?);
                }
            }
            if let Some(feature) = &set.feature {
                let having = self.cfg.nodes.iter().enumerate();
                members.extend(
                    having
                        .filter(|(_, n)| n.features.iter().any(|f| f == feature))
                        .map(|(i, _)| i),
                );
            }
            sets.insert(set.name.clone(), members);
        }
        Ok(sets)
    }

    /// The index of node `name`, or an error naming the line that referred to it.
    fn defined(
        &self,
        loc: &Loc,
        key: &str,
        line_kind: &str,
        raw: &str,
        name: &str,
    ) -> Result<usize, ConfigError> {
        self.cfg.node_by_name.get(name).copied().ok_or_else(|| {
            loc.error(
                key,
                format!("{line_kind} {key}={raw}: node '{name}' is not defined"),
            )
        })
    }

    fn apply_down_nodes(&mut self) -> Result<(), ConfigError> {
        for down in &self.down {
            for name in &down.names.values {
                let i = self.defined(&down.loc, "DownNodes", "", &down.names.raw, name)?;
                if let Some(node) = self.cfg.nodes.get_mut(i) {
                    node.state = down.state;
                    if down.reason.is_some() {
                        node.reason.clone_from(&down.reason);
                    }
                }
            }
        }
        Ok(())
    }

    fn resolve_partitions(
        &mut self,
        sets: &HashMap<String, Vec<usize>>,
    ) -> Result<(), ConfigError> {
        let mut default_at: Option<(String, Loc)> = None;
        for pending in std::mem::take(&mut self.partitions) {
            let PendingPartition {
                mut conf,
                nodes,
                loc,
            } = pending;
            if let Some(nodes) = &nodes {
                conf.nodes = self.partition_members(&loc, &conf.name, nodes, sets)?;
            }
            if conf.default {
                if let Some((first, first_loc)) = &default_at {
                    return Err(loc.error(
                        "Default",
                        format!(
                            "partition {} is Default=YES but so is {first} (at {first_loc}); \
                             only one partition can be the default",
                            conf.name
                        ),
                    ));
                }
                default_at = Some((conf.name.clone(), loc.clone()));
            }
            if let Some(max) = conf.max_nodes.filter(|&max| conf.min_nodes > max) {
                return Err(loc.error(
                    "MinNodes",
                    format!(
                        "partition {}: MinNodes={} exceeds MaxNodes={max}",
                        conf.name, conf.min_nodes
                    ),
                ));
            }
            if let (Some(default), Some(max)) = (conf.default_time_min, conf.max_time_min) {
                if default > max {
                    self.warn(
                        &loc,
                        format_args!(
                            "partition {}: DefaultTime ({default} min) exceeds MaxTime \
                             ({max} min); DefaultTime ignored",
                            conf.name
                        ),
                    );
                    conf.default_time_min = None;
                }
            }
            self.cfg.partitions.push(conf);
        }
        Ok(())
    }

    /// Members of a partition's `Nodes=`: `ALL`, node set names and hostlists, each node
    /// once, in node order.
    fn partition_members(
        &self,
        loc: &Loc,
        partition: &str,
        nodes: &Listed<String>,
        sets: &HashMap<String, Vec<usize>>,
    ) -> Result<Vec<String>, ConfigError> {
        let mut member = vec![false; self.cfg.nodes.len()];
        let mut mark = |i: usize| {
            if let Some(m) = member.get_mut(i) {
                *m = true;
            }
        };
        for name in &nodes.values {
            if name.eq_ignore_ascii_case("ALL") {
                (0..self.cfg.nodes.len()).for_each(&mut mark);
            } else if let Some(set) = sets.get(name) {
                set.iter().copied().for_each(&mut mark);
            } else {
                let kind = format!("PartitionName={partition}");
                mark(self.defined(loc, "Nodes", &kind, &nodes.raw, name)?);
            }
        }
        Ok(self
            .cfg
            .nodes
            .iter()
            .zip(member)
            .filter(|(_, m)| *m)
            .map(|(n, _)| n.name.clone())
            .collect())
    }
}

/// Partition `Nodes=`: a hostlist (possibly naming `ALL` or node sets); `""` means none.
fn partition_nodes(loc: &Loc, item: &Item) -> Result<Listed<String>, ConfigError> {
    let values = hostlist::expand(&item.value).map_err(|e| {
        bad_value(
            loc,
            item,
            format_args!("ALL, node set names or a hostlist ({e})"),
        )
    })?;
    Ok(Listed {
        raw: item.value.clone(),
        values,
    })
}

fn max_nodes(loc: &Loc, item: &Item) -> Result<Option<u32>, ConfigError> {
    let value = item.value.trim();
    if value.eq_ignore_ascii_case("UNLIMITED") || value.eq_ignore_ascii_case("INFINITE") {
        return Ok(None);
    }
    digits(value)
        .and_then(|n| u32::try_from(n).ok())
        .map(Some)
        .ok_or_else(|| bad_value(loc, item, "an integer or UNLIMITED"))
}

fn down_state(loc: &Loc, item: &Item) -> Result<ConfNodeState, ConfigError> {
    match conf_node_state(loc, item) {
        Ok(ConfNodeState::Unknown | ConfNodeState::Cloud) | Err(_) => {
            Err(bad_value(loc, item, "DOWN, DRAIN, FAIL, FAILING or FUTURE"))
        }
        state => state,
    }
}

/// A per-node attribute list must hold one value (shared by all) or one per node.
fn per_node<'a, T>(
    loc: &Loc,
    head: &Item,
    key: &str,
    list: Option<&'a Listed<T>>,
    count: usize,
) -> Result<Option<&'a [T]>, ConfigError> {
    let Some(list) = list else {
        return Ok(None);
    };
    let len = list.values.len();
    if len != 1 && len != count {
        return Err(loc.error(
            key,
            format!(
                "{key}={} gives {len} values for the {count} nodes of {}={}; expected 1 or {count}",
                list.raw, head.key, head.value
            ),
        ));
    }
    Ok(Some(&list.values))
}

/// Value `i` of a per-node list, or its single shared value.
fn pick<T>(list: Option<&[T]>, i: usize) -> Option<&T> {
    match list? {
        [one] => Some(one),
        all => all.get(i),
    }
}
