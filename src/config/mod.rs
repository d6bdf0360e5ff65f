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

/// Concurrent connections per daemon listener unless
/// `SlurmctldParameters=conmgr_max_connections` says otherwise: room for every
/// node of a large tree attaching directly plus many clients.
pub const DEFAULT_MAX_CONNECTIONS: u32 = 4096;
/// Largest `conmgr_max_connections` accepted (each connection costs a descriptor).
const MAX_CONNECTIONS: u64 = 1_000_000;

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
    /// Default 1001: array indices run 0..MaxArraySize-1; 0 disables arrays.
    pub max_array_size: u32,
    /// Default 30.
    pub kill_wait_s: u32,
    /// Default 10.
    pub message_timeout_s: u32,
    /// 0..=2; default 0.
    pub return_to_service: u8,
    /// `priority/basic` (the default) or `priority/multifactor`; sprio
    /// reads it. canopy computes no priority factors yet.
    pub priority_type: String,
    /// The program job mail is sent with (`MailProg`, default `/bin/mail`),
    /// called as `MailProg -s SUBJECT USER`.
    pub mail_prog: PathBuf,
    /// `MailDomain`: appended to mail recipients given without `@`.
    pub mail_domain: Option<String>,
    /// `GresTypes`: the generic resource names jobs may ask for.
    pub gres_types: Vec<String>,
    /// `Licenses`: the license names jobs may ask for (counts not kept:
    /// canopy does not schedule by licenses yet).
    pub licenses: Vec<String>,
    /// `SchedulerParameters=enable_user_top`: users may `scontrol top`
    /// their own jobs (otherwise only operators may).
    pub enable_user_top: bool,
    /// `SlurmctldParameters=conmgr_max_connections=N`: connections each
    /// daemon listener serves at once (node links count too); more are
    /// refused with an error frame. canopy applies it to node daemons' listeners too.
    pub max_connections: u32,
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

    /// What differs between this configuration and `new` that only a
    /// restart can apply: where the daemons listen and store state, the
    /// relay tree's shape, and the node set (names, order, addresses), on
    /// which every node rank and every link depends. Empty if `new` can be
    /// applied by `scontrol reconfigure`.
    pub fn restart_only_changes(&self, new: &Config) -> Vec<String> {
        let mut changed = Vec::new();
        let mut differs = |what: &str, d: bool| {
            if d {
                changed.push(what.to_string());
            }
        };
        differs("ClusterName", self.cluster_name != new.cluster_name);
        differs(
            "SlurmctldHost",
            (&self.control_host, &self.control_addr) != (&new.control_host, &new.control_addr),
        );
        differs("SlurmctldPort", self.slurmctld_port != new.slurmctld_port);
        differs(
            "StateSaveLocation",
            self.state_save_location != new.state_save_location,
        );
        differs(
            "SlurmdSpoolDir",
            self.slurmd_spool_dir != new.slurmd_spool_dir,
        );
        differs("TreeWidth", self.tree_width != new.tree_width);
        // Listeners are sized at start.
        differs(
            "SlurmctldParameters conmgr_max_connections",
            self.max_connections != new.max_connections,
        );
        let names = |c: &Config| c.nodes.iter().map(|n| n.name.clone()).collect::<Vec<_>>();
        if names(self) != names(new) {
            differs("the node list (nodes added, removed or reordered)", true);
        } else {
            let moved: Vec<&str> = self
                .nodes
                .iter()
                .zip(&new.nodes)
                .filter(|(a, b)| (&a.addr, &a.hostname, a.port) != (&b.addr, &b.hostname, b.port))
                .map(|(a, _)| a.name.as_str())
                .collect();
            differs(
                &format!(
                    "NodeAddr/NodeHostname/Port of {}",
                    hostlist::compress(&moved)
                ),
                !moved.is_empty(),
            );
        }
        changed
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
    MaxArraySize,
    KillWait,
    MessageTimeout,
    ReturnToService,
    PriorityType,
    SchedulerParameters,
    SlurmctldParameters,
    MailProg,
    MailDomain,
    GresTypes,
    Licenses,
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
    ("MaxArraySize", GlobalKey::MaxArraySize),
    ("KillWait", GlobalKey::KillWait),
    ("MessageTimeout", GlobalKey::MessageTimeout),
    ("ReturnToService", GlobalKey::ReturnToService),
    ("PriorityType", GlobalKey::PriorityType),
    ("SchedulerParameters", GlobalKey::SchedulerParameters),
    ("SlurmctldParameters", GlobalKey::SlurmctldParameters),
    ("MailProg", GlobalKey::MailProg),
    ("MailDomain", GlobalKey::MailDomain),
    ("GresTypes", GlobalKey::GresTypes),
    ("Licenses", GlobalKey::Licenses),
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
    "LogTimeFormat",
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

/// Attributes of `DownNodes=` lines.
#[derive(Debug, Clone, Copy)]
enum DownAttr {
    State,
    Reason,
}

const DOWN_ATTRS: &[(&str, DownAttr)] = &[("State", DownAttr::State), ("Reason", DownAttr::Reason)];

/// Attributes of `NodeSet=` lines.
#[derive(Debug, Clone, Copy)]
enum SetAttr {
    Nodes,
    Feature,
}

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

/// A unit parse failure as "expected ...": the bound when too large, else `expected`.
fn unit_error(loc: &Loc, item: &Item, error: units::UnitError, expected: &str) -> ConfigError {
    match error {
        units::UnitError::TooLarge { limit, .. } => {
            bad_value(loc, item, format_args!("at most {limit}"))
        }
        _ => bad_value(loc, item, expected),
    }
}

fn mem_mb(loc: &Loc, item: &Item) -> Result<u64, ConfigError> {
    units::parse_mem_mb(&item.value).map_err(|e| {
        unit_error(
            loc,
            item,
            e,
            "a size in MiB, optionally with a K, M, G or T suffix",
        )
    })
}

fn time_limit(loc: &Loc, item: &Item) -> Result<Option<u32>, ConfigError> {
    units::parse_time_limit_min(&item.value).map_err(|e| {
        unit_error(
            loc,
            item,
            e,
            "a time limit: M, M:S, H:M:S, D-H, D-H:M, D-H:M:S or UNLIMITED",
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

/// A comma-separated list, blanks and empty entries dropped.
fn name_list(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(str::to_string)
        .collect()
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
                max_array_size: 1001,
                kill_wait_s: 30,
                message_timeout_s: 10,
                return_to_service: 0,
                priority_type: "priority/basic".into(),
                mail_prog: PathBuf::from("/bin/mail"),
                mail_domain: None,
                gres_types: Vec::new(),
                licenses: Vec::new(),
                enable_user_top: false,
                max_connections: DEFAULT_MAX_CONNECTIONS,
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

    /// `SchedulerParameters`: a comma list, of which canopy reads the
    /// `scontrol top` switches; the rest earn one warning naming them. (A
    /// repeated line warns and replaces the earlier one, as for any scalar.)
    fn scheduler_parameters(&mut self, loc: &Loc, item: &Item) {
        let mut ignored = Vec::new();
        self.cfg.enable_user_top = false;
        for p in item
            .value
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
        {
            match p.to_ascii_lowercase().as_str() {
                "enable_user_top" => self.cfg.enable_user_top = true,
                "disable_user_top" => self.cfg.enable_user_top = false,
                _ => ignored.push(p.split('=').next().unwrap_or(p).to_string()),
            }
        }
        if !ignored.is_empty() {
            self.warn(
                loc,
                format_args!(
                    "SchedulerParameters {} not used by canopy yet; ignored",
                    if ignored.len() == 1 {
                        format!("{} is", ignored[0])
                    } else {
                        format!("{} are", ignored.join(", "))
                    }
                ),
            );
        }
    }

    /// `SlurmctldParameters`: a comma list, of which canopy reads
    /// `conmgr_max_connections=N`; the rest earn one warning naming them.
    /// `=` replaces earlier lines, `+=` adds to them.
    fn slurmctld_parameters(&mut self, loc: &Loc, item: &Item) -> Result<(), ConfigError> {
        match item.op {
            Op::Set => self.cfg.max_connections = DEFAULT_MAX_CONNECTIONS,
            Op::Add => {}
            _ => return require_set(loc, item),
        }
        let mut ignored = Vec::new();
        for p in item
            .value
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
        {
            let (name, value) = p.split_once('=').unwrap_or((p, ""));
            if name.eq_ignore_ascii_case("conmgr_max_connections") {
                self.cfg.max_connections = digits(value.trim())
                    .filter(|n| (1..=MAX_CONNECTIONS).contains(n))
                    .and_then(|n| u32::try_from(n).ok())
                    .ok_or_else(|| {
                        loc.error(
                            &item.key,
                            format!(
                                "SlurmctldParameters {p}: expected an integer between 1 and {MAX_CONNECTIONS}"
                            ),
                        )
                    })?;
            } else {
                ignored.push(name.to_string());
            }
        }
        if !ignored.is_empty() {
            self.warn(
                loc,
                format_args!(
                    "SlurmctldParameters {} not used by canopy yet; ignored",
                    if ignored.len() == 1 {
                        format!("{} is", ignored[0])
                    } else {
                        format!("{} are", ignored.join(", "))
                    }
                ),
            );
        }
        Ok(())
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
        // A list key: `+=` adds to it, as in Slurm.
        if key == GlobalKey::SlurmctldParameters {
            return self.slurmctld_parameters(loc, item);
        }
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
            GlobalKey::MailProg => cfg.mail_prog = non_empty(loc, item, "a program")?.into(),
            GlobalKey::MailDomain => cfg.mail_domain = Some(non_empty(loc, item, "a domain")?),
            GlobalKey::GresTypes => cfg.gres_types = name_list(&item.value),
            // `name[:count]` or `name[*count]` entries; the names are kept.
            GlobalKey::Licenses => {
                cfg.licenses = name_list(&item.value)
                    .into_iter()
                    .map(|l| l.split([':', '*']).next().unwrap_or_default().to_string())
                    .collect()
            }
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
            GlobalKey::MaxArraySize => cfg.max_array_size = int_in(loc, item, 0, 4_000_001)?,
            GlobalKey::KillWait => cfg.kill_wait_s = secs_in(loc, item, 0, MAX_TIMEOUT_S)?,
            GlobalKey::MessageTimeout => {
                cfg.message_timeout_s = secs_in(loc, item, 1, MAX_TIMEOUT_S)?
            }
            GlobalKey::ReturnToService => cfg.return_to_service = int_in(loc, item, 0, 2)?,
            GlobalKey::PriorityType => match item.value.as_str() {
                v @ ("priority/basic" | "priority/multifactor") => cfg.priority_type = v.into(),
                _ => {
                    return Err(bad_value(
                        loc,
                        item,
                        "priority/basic or priority/multifactor",
                    ))
                }
            },
            GlobalKey::SchedulerParameters => self.scheduler_parameters(loc, item),
            // Handled before `require_set`.
            GlobalKey::SlurmctldParameters => {}
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
            let count = |item: &Item| int_in::<u32>(loc, item, 1, u16::MAX.into());
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
            let Some(attr) = self.attribute(loc, "DownNodes", DOWN_ATTRS, &[], item)? else {
                continue;
            };
            match attr {
                DownAttr::State => state = down_state(loc, item)?,
                DownAttr::Reason => reason = Some(item.value.clone()),
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
            let Some(attr) = self.attribute(loc, "NodeSet", NODESET_ATTRS, &[], item)? else {
                continue;
            };
            match attr {
                SetAttr::Nodes => set.nodes = Some(host_names(loc, item)?),
                SetAttr::Feature => set.feature = Some(non_empty(loc, item, "a feature")?),
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
            (None, None, Some((_, loc))) => Err(loc.error(
                "ControlAddr",
                "ControlAddr needs ControlMachine (better: SlurmctldHost=<host>(<address>))",
            )),
            (None, None, None) => Err(ConfigError {
                file: self.cfg.path.clone(),
                line: 0,
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
        let mut owner: HashMap<(&str, u16), &str> = HashMap::new();
        let default_port = self.cfg.slurmd_port;
        for (node, (_, port)) in self.cfg.nodes.iter_mut().zip(&self.node_origin) {
            node.port = port.unwrap_or(default_port);
        }
        for (node, (loc, _)) in self.cfg.nodes.iter().zip(&self.node_origin) {
            if let Some(other) = owner.insert((&node.addr, node.port), &node.name) {
                return Err(loc.error(
                    "Port",
                    format!(
                        "nodes {other} and {} both use {}:{}; give each node its own NodeAddr or Port",
                        node.name, node.addr, node.port
                    ),
                ));
            }
        }
        Ok(())
    }

    fn resolve_nodesets(&self) -> Result<HashMap<String, Vec<usize>>, ConfigError> {
        let mut sets = HashMap::new();
        for set in &self.nodesets {
            let mut members = Vec::new();
            if let Some(nodes) = &set.nodes {
                let context = format!("NodeSet={} Nodes={}", set.name, nodes.raw);
                for name in &nodes.values {
                    members.push(self.defined(&set.loc, "Nodes", &context, name)?);
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

    /// The index of node `name`, or an error naming the text that referred to it.
    fn defined(
        &self,
        loc: &Loc,
        key: &str,
        context: &str,
        name: &str,
    ) -> Result<usize, ConfigError> {
        self.cfg
            .node_by_name
            .get(name)
            .copied()
            .ok_or_else(|| loc.error(key, format!("{context}: node '{name}' is not defined")))
    }

    fn apply_down_nodes(&mut self) -> Result<(), ConfigError> {
        for down in &self.down {
            let context = format!("DownNodes={}", down.names.raw);
            for name in &down.names.values {
                let i = self.defined(&down.loc, "DownNodes", &context, name)?;
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
        let context = format!("PartitionName={partition} Nodes={}", nodes.raw);
        for name in &nodes.values {
            if name.eq_ignore_ascii_case("ALL") {
                (0..self.cfg.nodes.len()).for_each(&mut mark);
            } else if let Some(set) = sets.get(name) {
                set.iter().copied().for_each(&mut mark);
            } else {
                mark(self.defined(loc, "Nodes", &context, name)?);
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    const HEAD: &str = "SlurmctldHost=ctl\n";

    fn parse(text: &str) -> Result<Config, ConfigError> {
        Config::parse_str(text, Path::new("slurm.conf"))
    }

    fn ok(body: &str) -> Config {
        parse(&format!("{HEAD}{body}")).unwrap()
    }

    fn err(body: &str) -> ConfigError {
        parse(&format!("{HEAD}{body}")).unwrap_err()
    }

    fn node<'a>(cfg: &'a Config, name: &str) -> &'a NodeConf {
        &cfg.nodes[cfg.node_index(name).unwrap()]
    }

    fn names(cfg: &Config) -> Vec<&str> {
        cfg.nodes.iter().map(|n| n.name.as_str()).collect()
    }

    fn partition<'a>(cfg: &'a Config, name: &str) -> &'a PartitionConf {
        cfg.partitions.iter().find(|p| p.name == name).unwrap()
    }

    /// Asserts an error's line, key and message fragment.
    fn assert_err(e: &ConfigError, line: usize, key: &str, fragment: &str) {
        assert_eq!((e.line, e.key.as_str()), (line, key), "{e}");
        assert!(e.message.contains(fragment), "{e:?} lacks {fragment:?}");
    }

    #[test]
    fn defaults() {
        let cfg = ok("");
        assert_eq!(cfg.path, Path::new("slurm.conf"));
        assert_eq!(cfg.cluster_name, "cluster");
        assert_eq!(
            (cfg.control_host.as_str(), cfg.control_addr.as_str()),
            ("ctl", "ctl")
        );
        assert_eq!((cfg.slurmctld_port, cfg.slurmd_port), (6817, 6818));
        assert_eq!(cfg.slurmd_timeout_s, 300);
        assert_eq!(cfg.tree_width, 16);
        assert_eq!(cfg.state_save_location, Path::new("/var/spool/canopy"));
        assert_eq!(cfg.slurmd_spool_dir, "/var/spool/canopyd");
        assert_eq!(cfg.max_job_count, 10_000);
        assert_eq!((cfg.first_job_id, cfg.max_job_id), (1, 0x03ff_0000));
        assert_eq!(cfg.min_job_age_s, 300);
        assert_eq!((cfg.kill_wait_s, cfg.message_timeout_s), (30, 10));
        assert_eq!(cfg.return_to_service, 0);
        assert_eq!(cfg.auth_key_path, Path::new("slurm.key"));
        assert!(cfg.nodes.is_empty() && cfg.partitions.is_empty());
        assert!(cfg.warnings.is_empty(), "{:?}", cfg.warnings);
        assert!(cfg.default_partition().is_none());
        let nested = Config::parse_str(HEAD, Path::new("/etc/x/slurm.conf")).unwrap();
        assert_eq!(nested.auth_key_path, Path::new("/etc/x/slurm.key"));
    }

    #[test]
    fn global_keys_case_insensitive() {
        let cfg = ok(
            "clustername=Alpha SLURMCTLDPORT=7000-7001 slurmdport=7100\n\
             SlurmdTimeout=60 treewidth=4 StateSaveLocation=/s SlurmdSpoolDir=/d/%n\n\
             MaxJobCount=50 FirstJobId=100 MaxJobId=5000 MinJobAge=0 KillWait=5\n\
             MessageTimeout=20 ReturnToService=2\n",
        );
        assert_eq!(cfg.cluster_name, "alpha");
        assert_eq!((cfg.slurmctld_port, cfg.slurmd_port), (7000, 7100));
        assert_eq!((cfg.slurmd_timeout_s, cfg.tree_width), (60, 4));
        assert_eq!(cfg.state_save_location, Path::new("/s"));
        assert_eq!(cfg.slurmd_spool_dir, "/d/%n");
        assert_eq!(
            (cfg.max_job_count, cfg.first_job_id, cfg.max_job_id),
            (50, 100, 5000)
        );
        assert_eq!((cfg.min_job_age_s, cfg.kill_wait_s), (0, 5));
        assert_eq!((cfg.message_timeout_s, cfg.return_to_service), (20, 2));
        assert!(cfg.warnings.is_empty(), "{:?}", cfg.warnings);
    }

    #[test]
    fn tree_width_error_matches_the_documented_form() {
        let text = format!("{HEAD}{}TreeWidth=abc\n", "#\n".repeat(10));
        let e = parse(&text).unwrap_err();
        assert_eq!(
            e.to_string(),
            "slurm.conf:12: TreeWidth=abc: expected an integer between 2 and 65533"
        );
        assert_eq!(e.file, Path::new("slurm.conf"));
    }

    #[test]
    fn bad_global_values_name_line_key_value_and_expectation() {
        let cases = [
            ("ClusterName=", "ClusterName", "a name of 1 to 40"),
            (
                "ClusterName=abcdefghijabcdefghijabcdefghijabcdefghijX",
                "ClusterName",
                "a name of 1 to 40",
            ),
            ("SlurmctldPort=6818-6817", "SlurmctldPort", "range LO-HI"),
            ("SlurmctldPort=x", "SlurmctldPort", "range LO-HI"),
            (
                "SlurmdPort=0",
                "SlurmdPort",
                "SlurmdPort=0: expected a port",
            ),
            (
                "SlurmdPort=70000",
                "SlurmdPort",
                "a port between 1 and 65535",
            ),
            (
                "SlurmdTimeout=65534",
                "SlurmdTimeout",
                "seconds between 0 and 65533",
            ),
            (
                "SlurmdTimeout=5m",
                "SlurmdTimeout",
                "seconds between 0 and 65533",
            ),
            ("TreeWidth=1", "TreeWidth", "between 2 and 65533"),
            ("TreeWidth=65534", "TreeWidth", "between 2 and 65533"),
            ("TreeWidth=+4", "TreeWidth", "between 2 and 65533"),
            ("StateSaveLocation=\"\"", "StateSaveLocation", "a directory"),
            ("SlurmdSpoolDir=", "SlurmdSpoolDir", "a directory"),
            ("MaxJobCount=0", "MaxJobCount", "between 1 and 4294967295"),
            ("FirstJobId=0", "FirstJobId", "between 1 and 67043328"),
            ("MaxJobId=67043329", "MaxJobId", "between 1 and 67043328"),
            (
                "MinJobAge=soon",
                "MinJobAge",
                "MinJobAge=soon: expected a number of seconds",
            ),
            ("KillWait=-1", "KillWait", "seconds between 0 and 65533"),
            (
                "MessageTimeout=0",
                "MessageTimeout",
                "seconds between 1 and 65533",
            ),
            ("ReturnToService=3", "ReturnToService", "between 0 and 2"),
            ("SlurmctldHost=a(b", "SlurmctldHost", "host(address)"),
            ("SlurmctldHost=(b)", "SlurmctldHost", "host(address)"),
            ("ControlMachine=", "ControlMachine", "a host name"),
            ("ControlAddr=", "ControlAddr", "an address"),
        ];
        for (line, key, fragment) in cases {
            let e = err(&format!("# comment\n{line}\n"));
            assert_err(&e, 3, key, fragment);
            assert!(e.to_string().starts_with("slurm.conf:3: "), "{e}");
        }
    }

    #[test]
    fn unrecognized_keys_are_errors() {
        let e = err("\nFoo=1\n");
        assert_eq!(e.to_string(), "slurm.conf:3: unrecognized key 'Foo'");
        assert_eq!(e.key, "Foo");
        let e = err("NodeName=n1 Bogus=2\n");
        assert_err(
            &e,
            2,
            "Bogus",
            "unrecognized key 'Bogus' on a NodeName line",
        );
        let e = err("PartitionName=p SlurmdPort=2\n");
        assert_err(&e, 2, "SlurmdPort", "on a PartitionName line");
        let e = err("NodeName=n1\nDownNodes=n1 CPUs=2\n");
        assert_err(&e, 3, "CPUs", "on a DownNodes line");
        let e = err("NodeSet=s Weight=2\n");
        assert_err(&e, 2, "Weight", "on a NodeSet line");
    }

    #[test]
    fn operators_are_refused_on_used_keys_and_tolerated_on_ignored_ones() {
        let e = err("TreeWidth+=2\n");
        assert_err(&e, 2, "TreeWidth", "the '+=' operator is not supported");
        let e = err("NodeName=n1 Features+=gpu\n");
        assert_err(&e, 2, "Features", "'+=' operator");
        let cfg = ok("SlurmctldParameters+=idle_on_node_suspend\n");
        assert_eq!(cfg.warnings.len(), 1);
    }

    #[test]
    fn restart_only_changes_are_named_and_the_rest_may_be_reconfigured() {
        let base = ok("NodeName=n[1-3] CPUs=2\nPartitionName=p Nodes=ALL\n");
        let same = |body: &str| base.restart_only_changes(&ok(body));
        // Partitions, node sizes and timeouts apply at reconfigure.
        assert!(same(
            "KillWait=5\nNodeName=n[1-3] CPUs=4 RealMemory=2000\n\
             PartitionName=p Nodes=n[1-2] MaxTime=10\nPartitionName=q Nodes=n3\n"
        )
        .is_empty());
        assert_eq!(
            same("TreeWidth=4\nSlurmctldPort=7000\nNodeName=n[1-3] CPUs=2\nPartitionName=p Nodes=ALL\n"),
            ["SlurmctldPort", "TreeWidth"]
        );
        assert_eq!(
            same("NodeName=n[1-4] CPUs=2\nPartitionName=p Nodes=ALL\n"),
            ["the node list (nodes added, removed or reordered)"]
        );
        assert_eq!(
            same(
                "NodeName=n[1-2] CPUs=2\nNodeName=n3 CPUs=2 Port=7777\nPartitionName=p Nodes=ALL\n"
            ),
            ["NodeAddr/NodeHostname/Port of n3"]
        );
    }

    #[test]
    fn scheduler_parameters_read_user_top_and_name_what_is_ignored() {
        let cfg = ok("SchedulerParameters=bf_window=60,enable_user_top\n");
        assert!(cfg.enable_user_top);
        assert_eq!(
            cfg.warnings,
            ["slurm.conf:2: SchedulerParameters bf_window is not used by canopy yet; ignored"]
        );
        let cfg = ok("SchedulerParameters=enable_user_top\nSchedulerParameters=disable_user_top\n");
        assert!(!cfg.enable_user_top);
        assert_eq!(cfg.warnings.len(), 1, "{:?}", cfg.warnings);
        assert!(!ok("").enable_user_top);
    }

    #[test]
    fn slurmctld_parameters_read_the_connection_limit() {
        assert_eq!(ok("").max_connections, DEFAULT_MAX_CONNECTIONS);
        let cfg = ok(
            "SlurmctldParameters=enable_configless,conmgr_max_connections=64
",
        );
        assert_eq!(cfg.max_connections, 64);
        assert_eq!(
            cfg.warnings,
            ["slurm.conf:2: SlurmctldParameters enable_configless is not used by canopy yet; ignored"]
        );
        // `+=` adds to the list; a later `=` replaces it (back to the default).
        let cfg = ok("SlurmctldParameters=conmgr_max_connections=64
SlurmctldParameters+=idle_on_node_suspend
");
        assert_eq!(cfg.max_connections, 64);
        let cfg = ok("SlurmctldParameters=conmgr_max_connections=64
SlurmctldParameters=idle_on_node_suspend
");
        assert_eq!(cfg.max_connections, DEFAULT_MAX_CONNECTIONS);
        let e = err("SlurmctldParameters=conmgr_max_connections=0
");
        assert_err(&e, 2, "SlurmctldParameters", "between 1 and 1000000");
        let e = err("SlurmctldParameters=conmgr_max_connections=lots
");
        assert_err(&e, 2, "SlurmctldParameters", "conmgr_max_connections=lots");
        let e = err("SlurmctldParameters-=conmgr_max_connections=5
");
        assert_err(
            &e,
            2,
            "SlurmctldParameters",
            "'-=' operator is not supported",
        );
    }

    #[test]
    fn repeated_scalar_keys_warn_and_the_last_wins() {
        let cfg = ok("TreeWidth=4\nTREEWIDTH=8\n");
        assert_eq!(cfg.tree_width, 8);
        assert_eq!(
            cfg.warnings,
            ["slurm.conf:3: TreeWidth is set again (previously at slurm.conf:2); the last value wins"]
        );
    }

    #[test]
    fn ignored_keys_warn_once_each() {
        let cfg = ok(
            "SchedulerType=sched/backfill\nschedulertype=sched/builtin\n\
             SelectType=select/cons_tres\n\
             NodeName=n1 CoreSpecCount=1 State=DOWN\nNodeName=n2 corespeccount=1\n\
             PartitionName=p Nodes=ALL AllowGroups=x QOS=normal\n\
             PartitionName=q Nodes=ALL AllowGroups=y\nFrontendName=fe\n",
        );
        assert_eq!(
            cfg.warnings,
            [
                "slurm.conf:2: SchedulerType is not used by canopy yet; ignored",
                "slurm.conf:4: SelectType is not used by canopy yet; ignored",
                "slurm.conf:5: NodeName attribute CoreSpecCount is not used by canopy yet; ignored",
                "slurm.conf:7: PartitionName attribute AllowGroups is not used by canopy yet; ignored",
                "slurm.conf:7: PartitionName attribute QOS is not used by canopy yet; ignored",
                "slurm.conf:9: FrontendName is not used by canopy yet; ignored",
            ]
        );
        // Ignored attributes do not disturb the ones that are used.
        assert_eq!(node(&cfg, "n1").state, ConfNodeState::Down);
    }

    #[test]
    fn controller_forms() {
        let cfg = parse("SlurmctldHost=head(10.0.0.1)\nSlurmctldHost=head2\n").unwrap();
        assert_eq!(
            (cfg.control_host.as_str(), cfg.control_addr.as_str()),
            ("head", "10.0.0.1")
        );
        assert_eq!(
            cfg.warnings,
            ["slurm.conf:2: backup controller head2 is not used by canopy yet; ignored"]
        );
        let cfg = parse("ControlMachine=old\nControlAddr=10.1.1.1\n").unwrap();
        assert_eq!(
            (cfg.control_host.as_str(), cfg.control_addr.as_str()),
            ("old", "10.1.1.1")
        );
        let cfg = parse("ControlMachine=old\n").unwrap();
        assert_eq!(cfg.control_addr, "old");
    }

    #[test]
    fn controller_errors() {
        let e = parse("SlurmctldHost=a\nControlMachine=b\n").unwrap_err();
        assert_err(
            &e,
            2,
            "ControlMachine",
            "cannot be combined with SlurmctldHost",
        );
        let e = parse("SlurmctldHost=a\n\nControlAddr=b\n").unwrap_err();
        assert_err(&e, 3, "ControlMachine", "cannot be combined");
        let e = parse("\nControlAddr=b\n").unwrap_err();
        assert_err(&e, 2, "ControlAddr", "needs ControlMachine");
        let e = parse("TreeWidth=4\n").unwrap_err();
        assert_err(&e, 0, "SlurmctldHost", "no SlurmctldHost is set");
        assert!(
            e.to_string().starts_with("slurm.conf: no SlurmctldHost"),
            "{e}"
        );
    }

    #[test]
    fn node_defaults_accumulate_and_lines_override() {
        let cfg = ok("NodeName=DEFAULT CPUs=8 RealMemory=1000 Features=a,b\n\
             NodeName=n[1-2]\n\
             NodeName=DEFAULT RealMemory=2000 Weight=5\n\
             NodeName=n3 CPUs=4 Features=\"\"\n");
        let n1 = node(&cfg, "n1");
        assert_eq!((n1.cpus, n1.real_memory_mb, n1.weight), (8, 1000, 1));
        assert_eq!(n1.features, ["a", "b"]);
        let n3 = node(&cfg, "n3");
        // The second DEFAULT line kept CPUs/Features from the first and changed the rest.
        assert_eq!((n3.cpus, n3.real_memory_mb, n3.weight), (4, 2000, 5));
        assert!(n3.features.is_empty());
        assert_eq!(names(&cfg), ["n1", "n2", "n3"]);
    }

    #[test]
    fn node_attributes() {
        let cfg = ok(
            "NodeName=g1 Procs=16 RealMemory=64G TmpDisk=1T Gres=gpu:a100:4 \
             Feature=gpu,ib Weight=10 State=DRAIN Reason=\"power down\"\n",
        );
        let g1 = node(&cfg, "g1");
        assert_eq!(g1.cpus, 16);
        assert_eq!((g1.real_memory_mb, g1.tmp_disk_mb), (65_536, 1_048_576));
        assert_eq!(g1.gres, "gpu:a100:4");
        assert_eq!(g1.features, ["gpu", "ib"]);
        assert_eq!(g1.weight, 10);
        assert_eq!(g1.state, ConfNodeState::Drain);
        assert_eq!(g1.reason.as_deref(), Some("power down"));
        assert_eq!(
            (g1.addr.as_str(), g1.hostname.as_str(), g1.port),
            ("g1", "g1", 6818)
        );
        let plain = ok("NodeName=p1\n");
        let p1 = node(&plain, "p1");
        assert_eq!((p1.cpus, p1.real_memory_mb, p1.tmp_disk_mb), (1, 1, 0));
        assert_eq!(
            (p1.weight, p1.state, p1.reason.clone()),
            (1, ConfNodeState::Unknown, None)
        );
        assert_eq!(p1.gres, "");
    }

    #[test]
    fn node_states() {
        for (text, state) in [
            ("UNKNOWN", ConfNodeState::Unknown),
            ("down", ConfNodeState::Down),
            ("Drain", ConfNodeState::Drain),
            ("FAIL", ConfNodeState::Fail),
            ("FAILING", ConfNodeState::Fail),
            ("FUTURE", ConfNodeState::Future),
            ("cloud", ConfNodeState::Cloud),
        ] {
            let cfg = ok(&format!("NodeName=n1 State={text}\n"));
            assert_eq!(node(&cfg, "n1").state, state, "{text}");
        }
        assert_eq!(ConfNodeState::Fail.name(), "FAIL");
        let e = err("NodeName=n1 State=IDLE\n");
        assert_err(&e, 2, "State", "State=IDLE: expected CLOUD, DOWN, DRAIN");
        assert!(e.message.contains("never configured IDLE"), "{e}");
        let e = err("NodeName=n1 State=allocated\n");
        assert!(e.message.contains("never configured ALLOCATED"), "{e}");
        let e = err("NodeName=n1 State=sleepy\n");
        assert_err(&e, 2, "State", "State=sleepy: expected CLOUD");
    }

    #[test]
    fn cpu_topology() {
        let cfg = ok("NodeName=a Sockets=2 CoresPerSocket=8 ThreadsPerCore=2\n\
             NodeName=b Boards=2 SocketsPerBoard=2 CoresPerSocket=4\n\
             NodeName=c CPUs=12 CoresPerSocket=6\n\
             NodeName=d CPUs=7 Sockets=2 CoresPerSocket=2\n\
             NodeName=e Sockets=2 CoresPerSocket=4 ThreadsPerCore=2 CPUs=8\n");
        let a = node(&cfg, "a");
        assert_eq!(
            (a.cpus, a.sockets, a.cores_per_socket, a.threads_per_core),
            (32, 2, 8, 2)
        );
        let b = node(&cfg, "b");
        assert_eq!((b.cpus, b.boards, b.sockets), (16, 2, 4));
        let c = node(&cfg, "c");
        assert_eq!((c.cpus, c.sockets), (12, 2));
        // CPUs=7 fits no level of 2 sockets x 2 cores: replaced, with a warning.
        assert_eq!(node(&cfg, "d").cpus, 4);
        assert_eq!(
            cfg.warnings,
            [
                "slurm.conf:5: CPUs=7 matches neither Sockets, Sockets*CoresPerSocket nor \
              Sockets*CoresPerSocket*ThreadsPerCore; using 4"
            ]
        );
        // CPUs may count cores only (hyperthreads not schedulable).
        assert_eq!(node(&cfg, "e").cpus, 8);
    }

    #[test]
    fn cpu_topology_errors() {
        let e = err("NodeName=a Sockets=2 SocketsPerBoard=1\n");
        assert_err(&e, 2, "SocketsPerBoard", "mutually exclusive");
        let e = err("NodeName=a Sockets=65535 CoresPerSocket=65535 ThreadsPerCore=2\n");
        assert_err(&e, 2, "CPUs", "the node topology gives 8589672450 CPUs");
        let e = err("NodeName=a Boards=4 Sockets=2\n");
        assert_err(&e, 2, "Sockets", "Sockets=2 is fewer than Boards=4");
        for attr in [
            "CPUs",
            "Boards",
            "Sockets",
            "CoresPerSocket",
            "ThreadsPerCore",
        ] {
            let e = err(&format!("\nNodeName=a {attr}=0\n"));
            assert_err(&e, 3, attr, "between 1 and 65535");
        }
        let e = err("NodeName=a RealMemory=lots\n");
        assert_err(
            &e,
            2,
            "RealMemory",
            "RealMemory=lots: expected a size in MiB",
        );
        let e = err("NodeName=a RealMemory=99999999999999999T\n");
        assert_err(
            &e,
            2,
            "RealMemory",
            "expected at most 18446744073709551615 MiB",
        );
        let e = err("NodeName=a TmpDisk=1.5G\n");
        assert_err(&e, 2, "TmpDisk", "expected a size in MiB");
        let e = err("NodeName=a Weight=-1\n");
        assert_err(&e, 2, "Weight", "between 0 and 4294967295");
    }

    #[test]
    fn addresses_hostnames_and_ports_per_node() {
        let cfg = ok(
            "NodeName=n[1-3] NodeHostname=h[1-3] NodeAddr=10.0.0.[1-3] Port=[20001-20003]\n\
             NodeName=m[1-2] NodeAddr=127.0.0.1 Port=21001-21002\n\
             NodeName=k[1-2] NodeHostname=kh[1-2]\n\
             NodeName=DEFAULT Port=22000\nNodeName=j1\n",
        );
        let n2 = node(&cfg, "n2");
        assert_eq!(
            (n2.hostname.as_str(), n2.addr.as_str(), n2.port),
            ("h2", "10.0.0.2", 20002)
        );
        let m2 = node(&cfg, "m2");
        assert_eq!((m2.addr.as_str(), m2.port), ("127.0.0.1", 21002));
        let k2 = node(&cfg, "k2");
        // NodeAddr falls back to NodeHostname, not to the node name.
        assert_eq!(
            (k2.hostname.as_str(), k2.addr.as_str(), k2.port),
            ("kh2", "kh2", 6818)
        );
        assert_eq!(node(&cfg, "j1").port, 22000);
    }

    #[test]
    fn slurmd_port_applies_wherever_it_appears() {
        let cfg = ok("NodeName=n1\nSlurmdPort=7777\n");
        assert_eq!(node(&cfg, "n1").port, 7777);
    }

    #[test]
    fn per_node_list_errors() {
        let e = err("\nNodeName=n[1-4] Port=[1-3]\n");
        assert_err(
            &e,
            3,
            "Port",
            "Port=[1-3] gives 3 values for the 4 nodes of NodeName=n[1-4]; expected 1 or 4",
        );
        let e = err("NodeName=n[1-2] NodeAddr=a,b,c\n");
        assert_err(&e, 2, "NodeAddr", "gives 3 values for the 2 nodes");
        let e = err("NodeName=n[1-2] NodeHostname=h[1-3]\n");
        assert_err(&e, 2, "NodeHostname", "gives 3 values");
        let e = err("NodeName=DEFAULT Port=[1-3]\nNodeName=n[1-2]\n");
        assert_err(&e, 3, "Port", "gives 3 values for the 2 nodes");
        let e = err("NodeName=n1 Port=0\n");
        assert_err(&e, 2, "Port", "Port=0: expected a port");
        let e = err("NodeName=n1 Port=[5-3]\n");
        assert_err(&e, 2, "Port", "expected a port");
        let e = err("NodeName=n1 Port=abc\n");
        assert_err(&e, 2, "Port", "expected a port");
        let e = err("NodeName=n1 NodeAddr=a[1-\n");
        assert_err(&e, 2, "NodeAddr", "NodeAddr=a[1-: expected a hostlist");
        let e = err("NodeName=DEFAULT NodeAddr=x\n");
        assert_err(&e, 2, "NodeAddr", "not allowed with NodeName=DEFAULT");
        let e = err("NodeName=DEFAULT NodeHostname=x\n");
        assert_err(&e, 2, "NodeHostname", "not allowed with NodeName=DEFAULT");
    }

    #[test]
    fn node_name_errors_and_duplicates() {
        let e = err("NodeName=all\n");
        assert_err(&e, 2, "NodeName", "ALL is reserved");
        let e = err("\n\nNodeName=n[1-\n");
        assert_err(&e, 4, "NodeName", "NodeName=n[1-: expected a hostlist");
        assert!(e.message.contains("no matching ']'"), "{e}");
        let e = err("NodeName=\n");
        assert_err(&e, 2, "NodeName", "a name or hostlist");
        let cfg = ok("NodeName=n[1-2] CPUs=2\nNodeName=n2,n3 CPUs=4\n");
        assert_eq!(names(&cfg), ["n1", "n2", "n3"]);
        assert_eq!(node(&cfg, "n2").cpus, 2);
        assert_eq!(
            cfg.warnings,
            ["slurm.conf:3: node n2 is already defined at slurm.conf:2; this definition is ignored"]
        );
        assert_eq!(cfg.node_index("n3"), Some(2));
        assert_eq!(cfg.node_index("n4"), None);
    }

    #[test]
    fn repeated_attribute_on_one_line_warns() {
        let cfg = ok("NodeName=n1 CPUs=2 Procs=4\n");
        assert_eq!(node(&cfg, "n1").cpus, 4);
        assert_eq!(
            cfg.warnings,
            ["slurm.conf:2: Procs is given more than once on this line; the last value wins"]
        );
    }

    #[test]
    fn shared_address_and_port_is_an_error() {
        let e = err("NodeName=a NodeAddr=10.0.0.1\n\nNodeName=b NodeAddr=10.0.0.1\n");
        assert_err(&e, 4, "Port", "nodes a and b both use 10.0.0.1:6818");
        let cfg = ok("NodeName=a NodeAddr=10.0.0.1 Port=1\nNodeName=b NodeAddr=10.0.0.1 Port=2\n");
        assert_eq!(cfg.nodes.len(), 2);
    }

    #[test]
    fn down_nodes_lines() {
        let cfg = ok(
            "NodeName=n[1-4] Reason=orig\nDownNodes=n[1-2] Reason=\"bad psu\"\n\
             DownNodes=n3 State=DRAIN\nDownNodes=n4 State=FUTURE Reason=\"\"\n",
        );
        let n1 = node(&cfg, "n1");
        assert_eq!(
            (n1.state, n1.reason.as_deref()),
            (ConfNodeState::Down, Some("bad psu"))
        );
        let n3 = node(&cfg, "n3");
        assert_eq!(
            (n3.state, n3.reason.as_deref()),
            (ConfNodeState::Drain, Some("orig"))
        );
        assert_eq!(node(&cfg, "n4").state, ConfNodeState::Future);
        let e = err("NodeName=n1\nDownNodes=n[1-2]\n");
        assert_err(
            &e,
            3,
            "DownNodes",
            "DownNodes=n[1-2]: node 'n2' is not defined",
        );
        let e = err("NodeName=n1\nDownNodes=n1 State=UNKNOWN\n");
        assert_err(
            &e,
            3,
            "State",
            "expected DOWN, DRAIN, FAIL, FAILING or FUTURE",
        );
        let e = err("NodeName=n1\nDownNodes=n1 State=IDLE\n");
        assert_err(&e, 3, "State", "expected DOWN, DRAIN");
    }

    #[test]
    fn node_sets_in_partitions() {
        let cfg = ok("NodeName=n[1-4]\nNodeName=g[1-2] Features=gpu\n\
             NodeSet=gpus Feature=gpu\nNodeSet=pair Nodes=n[3-4]\n\
             PartitionName=p Nodes=gpus,pair\n");
        assert_eq!(partition(&cfg, "p").nodes, ["n3", "n4", "g1", "g2"]);
        // `NodeSet= Nodes=n1` would read "Nodes=n1" as the name (blanks after '=' are
        // skipped, as in Slurm), so an empty name has to be quoted.
        let e = err("NodeSet=\"\" Nodes=n1\n");
        assert_err(&e, 2, "NodeSet", "NodeSet=: expected a node set name");
        let e = err("NodeSet=s\n");
        assert_err(&e, 2, "NodeSet", "expected Nodes= or Feature=");
        let e = err("NodeName=n1\nNodeSet=s Nodes=n1\nNodeSet=s Nodes=n1\n");
        assert_err(
            &e,
            4,
            "NodeSet",
            "node set s is already defined at slurm.conf:3",
        );
        let e = err("NodeSet=s Nodes=x1\n");
        assert_err(
            &e,
            2,
            "Nodes",
            "NodeSet=s Nodes=x1: node 'x1' is not defined",
        );
    }

    #[test]
    fn partitions() {
        let cfg = ok("NodeName=n[1-6]\n\
             PartitionName=DEFAULT MaxTime=30 State=DOWN\n\
             PartitionName=DEFAULT MaxNodes=4\n\
             PartitionName=short Nodes=n[4-6],n1,n4 Default=YES DefaultTime=5\n\
             PartitionName=long Nodes=ALL MaxTime=UNLIMITED MaxNodes=unlimited MinNodes=2 \
             State=UP DefaultTime=NONE\n\
             PartitionName=empty Nodes=\"\" State=INACTIVE MaxTime=1-0 DefaultTime=0:30\n\
             PartitionName=drained State=drain Default=no\n");
        let short = partition(&cfg, "short");
        // Each node once, in node order, whatever the order in Nodes=.
        assert_eq!(short.nodes, ["n1", "n4", "n5", "n6"]);
        assert!(short.default);
        assert_eq!(
            (short.max_time_min, short.default_time_min),
            (Some(30), Some(5))
        );
        assert_eq!((short.max_nodes, short.min_nodes), (Some(4), 0));
        assert_eq!(short.state, PartitionState::Down);
        let long = partition(&cfg, "long");
        assert_eq!(long.nodes.len(), 6);
        assert_eq!((long.max_time_min, long.default_time_min), (None, None));
        assert_eq!(
            (long.max_nodes, long.min_nodes, long.state),
            (None, 2, PartitionState::Up)
        );
        let empty = partition(&cfg, "empty");
        assert!(empty.nodes.is_empty());
        assert_eq!(
            (empty.max_time_min, empty.default_time_min),
            (Some(1440), Some(1))
        );
        assert_eq!(empty.state, PartitionState::Inactive);
        assert_eq!(partition(&cfg, "drained").state, PartitionState::Drain);
        assert_eq!(cfg.default_partition().unwrap().name, "short");
        let order: Vec<&str> = cfg.partitions.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(order, ["short", "long", "empty", "drained"]);
        assert!(cfg.warnings.is_empty(), "{:?}", cfg.warnings);
    }

    #[test]
    fn partition_errors() {
        let e = err("NodeName=n[1-2]\n\nPartitionName=p Nodes=n[1-3]\n");
        assert_err(
            &e,
            4,
            "Nodes",
            "PartitionName=p Nodes=n[1-3]: node 'n3' is not defined",
        );
        let e = err("PartitionName=a Default=YES\nPartitionName=b Default=YES\n");
        assert_err(
            &e,
            3,
            "Default",
            "partition b is Default=YES but so is a (at slurm.conf:2)",
        );
        let e = err("PartitionName=a\nPartitionName=a\n");
        assert_err(
            &e,
            3,
            "PartitionName",
            "partition a is already defined at slurm.conf:2",
        );
        let e = err("PartitionName=a MinNodes=5 MaxNodes=4\n");
        assert_err(&e, 2, "MinNodes", "MinNodes=5 exceeds MaxNodes=4");
        let e = err("PartitionName=\n");
        assert_err(&e, 2, "PartitionName", "a partition name");
        let cases = [
            (
                "Default=maybe",
                "Default",
                "Default=maybe: expected YES or NO",
            ),
            (
                "MaxTime=soon",
                "MaxTime",
                "MaxTime=soon: expected a time limit",
            ),
            (
                "DefaultTime=1:2:3:4",
                "DefaultTime",
                "expected a time limit: M, M:S",
            ),
            (
                "MaxTime=99999999999",
                "MaxTime",
                "expected at most 4294967295 minutes",
            ),
            ("MaxNodes=many", "MaxNodes", "an integer or UNLIMITED"),
            ("MinNodes=-1", "MinNodes", "between 0 and 4294967295"),
            (
                "State=OPEN",
                "State",
                "State=OPEN: expected UP, DOWN, DRAIN or INACTIVE",
            ),
            ("Nodes=n[1", "Nodes", "ALL, node set names or a hostlist"),
        ];
        for (attr, key, fragment) in cases {
            let e = err(&format!("\nPartitionName=p {attr}\n"));
            assert_err(&e, 3, key, fragment);
        }
    }

    #[test]
    fn default_time_above_max_time_is_dropped_with_a_warning() {
        let cfg = ok("PartitionName=p MaxTime=10 DefaultTime=20\n");
        assert_eq!(partition(&cfg, "p").default_time_min, None);
        assert_eq!(
            cfg.warnings,
            [
                "slurm.conf:2: partition p: DefaultTime (20 min) exceeds MaxTime (10 min); \
              DefaultTime ignored"
            ]
        );
    }

    #[test]
    fn first_job_id_must_be_below_max_job_id() {
        let e = err("MaxJobId=100\nFirstJobId=100\n");
        assert_err(
            &e,
            3,
            "FirstJobId",
            "FirstJobId=100 must be below MaxJobId=100",
        );
        let e = err("\nMaxJobId=1\n");
        assert_err(&e, 3, "FirstJobId", "must be below MaxJobId=1");
    }

    #[test]
    fn comments_escapes_quotes_and_crlf() {
        let text = "SlurmctldHost=ctl # the controller\r\n\
             # a whole-line comment\r\n\
             NodeName=n1 Reason=\"power down\" # trailing\r\n\
             NodeName=n2 Reason=rack\\#4 Gres=\"\"\r\n\
             NodeName=n3 Reason=two\\ words\r\n";
        let cfg = parse(text).unwrap();
        assert_eq!(node(&cfg, "n1").reason.as_deref(), Some("power down"));
        assert_eq!(node(&cfg, "n2").reason.as_deref(), Some("rack#4"));
        assert_eq!(node(&cfg, "n3").reason.as_deref(), Some("two words"));
        let e = err("NodeName=n1 Reason=\"a # b\"\n");
        assert_err(&e, 2, "Reason", "unterminated quote");
    }

    #[test]
    fn continued_lines_report_their_first_line() {
        let cfg = ok("NodeName=n[1-2] \\\n   CPUs=4 \\\n   RealMemory=100\n");
        assert_eq!(
            (node(&cfg, "n2").cpus, node(&cfg, "n2").real_memory_mb),
            (4, 100)
        );
        let e = err("\nNodeName=n1 \\\n  CPUs=2 \\\n  Weight=heavy\nTreeWidth=4\n");
        assert_err(&e, 3, "Weight", "Weight=heavy");
        let e = err("NodeName=n1 \\\n  lonely\n");
        assert_err(&e, 2, "lonely", "'lonely' is not a Key=Value pair");
    }

    #[test]
    fn globals_before_a_record_key_share_its_line() {
        let cfg = ok("TreeWidth=5 NodeName=n1 CPUs=2\n");
        assert_eq!(cfg.tree_width, 5);
        assert_eq!(node(&cfg, "n1").cpus, 2);
    }

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let path = dir.join(name);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn include_is_relative_to_the_including_file_and_expands_cluster_name() {
        let dir = tempfile::tempdir().unwrap();
        let main = write(
            dir.path(),
            "slurm.conf",
            "SlurmctldHost=ctl\nClusterName=Alpha\nInclude conf.d/%c-nodes.conf\nTreeWidth=3\n",
        );
        write(
            dir.path(),
            "conf.d/Alpha-nodes.conf",
            "NodeName=n[1-2]\nInclude parts.conf\n",
        );
        write(
            dir.path(),
            "conf.d/parts.conf",
            "PartitionName=p Nodes=ALL Default=YES\n",
        );
        let cfg = Config::load(&main).unwrap();
        assert_eq!(cfg.cluster_name, "alpha");
        assert_eq!(names(&cfg), ["n1", "n2"]);
        assert_eq!(cfg.default_partition().unwrap().nodes, ["n1", "n2"]);
        assert_eq!(cfg.tree_width, 3);
        assert_eq!(cfg.auth_key_path, dir.path().join("slurm.key"));
    }

    #[test]
    fn errors_inside_included_files_name_that_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let main = write(
            dir.path(),
            "slurm.conf",
            "SlurmctldHost=ctl\nInclude nodes.conf\n",
        );
        let nodes = write(
            dir.path(),
            "nodes.conf",
            "# nodes\n\nNodeName=n1 \\\n CPUs=x\n",
        );
        let e = Config::load(&main).unwrap_err();
        assert_eq!(
            (e.file.as_path(), e.line, e.key.as_str()),
            (nodes.as_path(), 3, "CPUs")
        );
        assert_eq!(
            e.to_string(),
            format!(
                "{}:3: CPUs=x: expected an integer between 1 and 65535",
                nodes.display()
            )
        );
        // Warnings from included files carry their location too.
        fs::write(&nodes, "NodeName=n1\nSchedulerType=x\n").unwrap();
        let cfg = Config::load(&main).unwrap();
        assert_eq!(
            cfg.warnings,
            [format!(
                "{}:2: SchedulerType is not used by canopy yet; ignored",
                nodes.display()
            )]
        );
    }

    #[test]
    fn include_cycles_depth_and_missing_files() {
        let dir = tempfile::tempdir().unwrap();
        let main = write(
            dir.path(),
            "slurm.conf",
            "SlurmctldHost=ctl\nInclude a.conf\n",
        );
        let a = write(dir.path(), "a.conf", "\nInclude slurm.conf\n");
        let e = Config::load(&main).unwrap_err();
        assert_eq!(
            (e.file.as_path(), e.line, e.key.as_str()),
            (a.as_path(), 2, "Include")
        );
        assert!(e.message.contains("include cycle"), "{e}");

        // A chain of distinct files deeper than the limit.
        for i in 0..20 {
            write(
                dir.path(),
                &format!("d{i}.conf"),
                &format!("Include d{}.conf\n", i + 1),
            );
        }
        fs::write(&a, "Include d0.conf\n").unwrap();
        let e = Config::load(&main).unwrap_err();
        assert!(e.message.contains("nest deeper than 16"), "{e}");

        fs::write(&a, "Include missing.conf\n").unwrap();
        let e = Config::load(&main).unwrap_err();
        assert_eq!((e.file.as_path(), e.line), (a.as_path(), 1));
        assert!(e.message.contains("missing.conf: cannot read"), "{e}");
    }

    #[test]
    fn load_of_a_missing_file_names_the_path() {
        let e = Config::load(Path::new("/nonexistent/canopy.conf")).unwrap_err();
        assert_eq!(
            (e.line, e.file.as_path()),
            (0, Path::new("/nonexistent/canopy.conf"))
        );
        assert!(
            e.to_string()
                .starts_with("/nonexistent/canopy.conf: cannot read /nonexistent/canopy.conf:"),
            "{e}"
        );
    }

    #[test]
    fn example_config_loads_from_a_copy() {
        let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/slurm.conf");
        let dir = tempfile::tempdir().unwrap();
        let copy = dir.path().join("slurm.conf");
        fs::copy(&example, &copy).unwrap();
        let cfg = Config::load(&copy).unwrap();
        assert!(cfg.warnings.is_empty(), "{:?}", cfg.warnings);
        assert_eq!(cfg.nodes.len(), 8);
        assert_eq!(cfg.tree_width, 3);
        for (i, n) in cfg.nodes.iter().enumerate() {
            assert_eq!(n.name, format!("n{}", i + 1));
            assert_eq!((n.addr.as_str(), n.port), ("127.0.0.1", 17001 + i as u16));
        }
        assert_eq!(cfg.partitions.len(), 2);
        let default = cfg.default_partition().unwrap();
        assert_eq!(default.nodes, ["n1", "n2", "n3", "n4"]);
        assert!(cfg
            .partitions
            .iter()
            .any(|p| !p.default && p.nodes.len() == 8));
    }

    /// A production-style file: many keys canopy ignores, several partitions.
    const SITE: &str = r#"
# Example site configuration
ClusterName=Hydra
SlurmctldHost=hydra-head(10.10.0.1)
SlurmctldHost=hydra-head2(10.10.0.2)
AuthType=auth/munge
CryptoType=crypto/munge
MpiDefault=pmix
ProctrackType=proctrack/cgroup
ReturnToService=1
SlurmctldPidFile=/var/run/slurmctld.pid
SlurmctldPort=6817-6818
SlurmdPidFile=/var/run/slurmd.pid
SlurmdPort=6818
SlurmdSpoolDir=/var/spool/slurmd
SlurmUser=slurm
StateSaveLocation=/var/spool/slurmctld
SwitchType=switch/none
TaskPlugin=task/affinity,task/cgroup
InactiveLimit=0
KillWait=30
MinJobAge=300
SlurmctldTimeout=120
SlurmdTimeout=300
Waittime=0
SchedulerType=sched/backfill
SchedulerParameters=bf_window=4320,bf_resolution=600,default_queue_depth=200
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
PriorityType=priority/multifactor
PriorityDecayHalfLife=7-0
PriorityWeightFairshare=10000
PriorityWeightAge=1000
PriorityWeightTRES=CPU=1000,Mem=2000,GRES/gpu=3000
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=dbd
AccountingStorageEnforce=associations,limits,qos
AccountingStorageTRES=gres/gpu
JobCompType=jobcomp/none
JobAcctGatherFrequency=30
JobAcctGatherType=jobacct_gather/cgroup
SlurmctldDebug=info
SlurmctldLogFile=/var/log/slurmctld.log
SlurmdDebug=info
SlurmdLogFile=/var/log/slurmd.log
GresTypes=gpu
PrologFlags=Alloc,Contain
Prolog=/etc/slurm/prolog.d/*
Epilog=/etc/slurm/epilog.d/*
HealthCheckProgram=/usr/sbin/nhc
HealthCheckInterval=300
DefMemPerCPU=2048
MaxArraySize=10001
MaxJobCount=50000
TreeWidth=32
FastSchedule=1

NodeName=DEFAULT Sockets=2 CoresPerSocket=16 ThreadsPerCore=2 RealMemory=191000 \
    TmpDisk=400000 State=UNKNOWN
NodeName=cpu[001-128] Weight=10
NodeName=gpu[01-08] Gres=gpu:a100:4 Features=gpu,a100 Weight=50 CoreSpecCount=2 \
    MemSpecLimit=4096
NodeName=bigmem[1-2] RealMemory=1500000 Features=bigmem

DownNodes=cpu[120-128] State=DRAIN Reason="awaiting firmware"
NodeSet=gpunodes Feature=gpu

PartitionName=DEFAULT State=UP OverSubscribe=NO
PartitionName=cpu Nodes=cpu[001-128] Default=YES MaxTime=2-00:00:00 DefaultTime=1:00:00 \
    PriorityTier=1 AllowAccounts=ALL
PartitionName=gpu Nodes=gpunodes MaxTime=1-00:00:00 TRESBillingWeights="CPU=1.0,Mem=0.25G,GRES/gpu=8"
PartitionName=bigmem Nodes=bigmem[1-2] MaxTime=7-0 MaxNodes=1 QOS=bigmem
PartitionName=debug Nodes=ALL MaxTime=30 MaxNodes=2 PriorityTier=10 Hidden=NO
"#;

    #[test]
    fn realistic_site_file_parses_with_warnings() {
        let cfg = parse(SITE).unwrap();
        assert_eq!(cfg.cluster_name, "hydra");
        assert_eq!(
            (cfg.control_host.as_str(), cfg.control_addr.as_str()),
            ("hydra-head", "10.10.0.1")
        );
        assert_eq!(
            (cfg.slurmctld_port, cfg.tree_width, cfg.max_job_count),
            (6817, 32, 50_000)
        );
        assert_eq!(cfg.nodes.len(), 138);
        let gpu = node(&cfg, "gpu03");
        assert_eq!(
            (gpu.cpus, gpu.real_memory_mb, gpu.gres.as_str()),
            (64, 191_000, "gpu:a100:4")
        );
        assert_eq!(node(&cfg, "bigmem2").real_memory_mb, 1_500_000);
        let drained = node(&cfg, "cpu125");
        assert_eq!(drained.state, ConfNodeState::Drain);
        assert_eq!(drained.reason.as_deref(), Some("awaiting firmware"));
        assert_eq!(node(&cfg, "cpu119").state, ConfNodeState::Unknown);
        assert_eq!(partition(&cfg, "gpu").nodes.len(), 8);
        assert_eq!(partition(&cfg, "debug").nodes.len(), 138);
        assert_eq!(cfg.default_partition().unwrap().name, "cpu");
        assert_eq!(partition(&cfg, "bigmem").max_time_min, Some(7 * 1440));
        // One warning per ignored key (47: PriorityType and GresTypes are
        // read) plus the backup controller, each naming its line.
        assert_eq!(cfg.warnings.len(), 47, "{:#?}", cfg.warnings);
        assert_eq!(cfg.gres_types, ["gpu"]);
        assert_eq!(cfg.priority_type, "priority/multifactor");
        assert!(cfg
            .warnings
            .iter()
            .all(|w| w.ends_with("not used by canopy yet; ignored")));
        assert!(cfg.warnings.contains(
            &"slurm.conf:27: SchedulerParameters bf_window, bf_resolution, default_queue_depth are not used by canopy yet; ignored".to_string()
        ));
        assert!(cfg.warnings.contains(
            &"slurm.conf:61: NodeName attribute CoreSpecCount is not used by canopy yet; ignored"
                .to_string()
        ));
    }

    #[test]
    fn heartbeat_interval_is_a_third_of_the_timeout_clamped() {
        let mut cfg = ok("");
        for (timeout, want) in [
            (0, Duration::from_secs(10)),
            (1, Duration::from_millis(333)),
            (3, Duration::from_secs(1)),
            (30, Duration::from_secs(10)),
            (300, Duration::from_secs(10)),
        ] {
            cfg.slurmd_timeout_s = timeout;
            assert_eq!(cfg.heartbeat_interval(), want, "{timeout}");
        }
    }

    #[test]
    fn locate_precedence() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| OsString::from(v))
            }
        };
        let both: &[(&str, &str)] = &[("CANOPY_CONF", "/c"), ("SLURM_CONF", "/s")];
        assert_eq!(
            locate_with(Some(Path::new("/f")), env(both)),
            Path::new("/f")
        );
        assert_eq!(locate_with(None, env(both)), Path::new("/c"));
        assert_eq!(
            locate_with(None, env(&[("CANOPY_CONF", ""), ("SLURM_CONF", "/s")])),
            Path::new("/s")
        );
        assert_eq!(locate_with(None, env(&[])), Path::new(DEFAULT_CONF_PATH));
        assert_eq!(Config::locate(Some(Path::new("/x"))), Path::new("/x"));
    }
}
