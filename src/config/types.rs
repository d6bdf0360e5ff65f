//! The configuration as the rest of canopy sees it: [`Config`], its nodes and partitions,
//! [`ConfigError`], and the questions asked of a loaded configuration (where the file is,
//! which changes need a restart, the heartbeat interval). It does not read or validate
//! files: `build` turns lines into a `Config` and `resolve` checks it across lines.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::hostlist;
use crate::wire::types::PartitionState;

/// Where the configuration is read from when neither `-f` nor an environment variable says.
pub const DEFAULT_CONF_PATH: &str = "/etc/canopy/slurm.conf";

/// Largest job id Slurm allows (ids above it encode federation bits).
pub const MAX_JOB_ID: u32 = 0x03ff_0000;

/// Concurrent connections per daemon listener unless
/// `SlurmctldParameters=conmgr_max_connections` says otherwise: room for every
/// node of a large tree attaching directly plus many clients.
pub const DEFAULT_MAX_CONNECTIONS: u32 = 4096;
/// Where the local signer (canopy-authd) listens unless `AuthInfo=socket=` says.
pub const DEFAULT_AUTH_SOCKET: &str = "/run/canopy/authd.sock";

/// The whole validated configuration.
/// Serialisable so that a reconfiguration travels inside the controller
/// core's command log, as everything a standby replays must.
#[derive(Debug, Clone, Serialize, Deserialize)]
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
    /// `priority/basic` (the default) or `priority/multifactor`.
    pub priority_type: String,
    /// priority/multifactor's keys (weights, decay, flags, billing).
    #[serde(default)]
    pub priority: super::priority::PriorityConf,
    /// The program job mail is sent with (`MailProg`, default `/bin/mail`),
    /// called as `MailProg -s SUBJECT USER`.
    pub mail_prog: PathBuf,
    /// `MailDomain`: appended to mail recipients given without `@`.
    pub mail_domain: Option<String>,
    /// `GresTypes`: the generic resource names jobs may ask for.
    pub gres_types: Vec<String>,
    /// `SelectTypeParameters` (default `CR_Core_Memory`): the allocation
    /// unit and whether memory is consumed.
    pub select_params: crate::model::tres::CrParams,
    /// `ProctrackType=proctrack/cgroup` (Slurm's default): node daemons
    /// track and kill a job's processes by cgroup.
    pub proctrack_cgroup: bool,
    /// `TaskPlugin` (lower case): `task/cgroup` confines to the job's CPUs,
    /// memory and devices per cgroup.conf; `task/affinity` binds tasks.
    pub task_plugins: Vec<String>,
    /// `TaskPluginParam` (e.g. `autobind=cores`).
    pub task_plugin_param: String,
    /// `Licenses`: the license names jobs may ask for.
    pub licenses: Vec<String>,
    /// `Licenses` with their counts (`name:count`, 1 if not given): what
    /// the scheduler hands out.
    #[serde(default)]
    pub license_counts: Vec<(String, u32)>,
    /// `SchedulerParameters=enable_user_top`: users may `scontrol top`
    /// their own jobs (otherwise only operators may).
    pub enable_user_top: bool,
    /// `SchedulerParameters=max_script_size=N`: the largest batch script
    /// accepted, in bytes (Slurm's default 4 MiB).
    pub max_script_size: u64,
    /// `SchedulerParameters=max_submit_jobs_per_user=N`: how many jobs
    /// (each array task counted) one user may have pending or running at
    /// once; `None` (the default, as in Slurm without accounting): no cap.
    pub max_submit_jobs_per_user: Option<u32>,
    /// `SchedulerType` and the scheduling loops' `SchedulerParameters`.
    #[serde(default)]
    pub sched: super::sched::SchedConf,
    /// `PrivateData`: what non-operators may see of others.
    pub private_data: PrivateData,
    /// `AccountingStorageEnforce`: which association and QOS rules bind jobs.
    pub accounting_enforce: AcctEnforce,
    /// `SlurmUser`: the account the controller's helpers (MailProg) run
    /// as when the controller runs as root; `None`: not set.
    pub slurm_user: Option<String>,
    /// `SlurmdParameters=config_overrides`: nodes are taken to have what
    /// slurm.conf says, and a registration reporting less does not drain
    /// them (Slurm's FastSchedule=2; for tests and oversubscribed hosts).
    #[serde(default)]
    pub config_overrides: bool,
    /// `SlurmctldParameters=conmgr_max_connections=N`: connections each
    /// daemon listener serves at once (node links count too); more are
    /// refused with an error frame. canopy applies it to node daemons' listeners too.
    pub max_connections: u32,
    /// `SlurmctldParameters=conmgr_read_timeout=N` (seconds; default
    /// MessageTimeout, as in Slurm): how long an authenticated client
    /// connection may sit idle between requests before the daemon closes it.
    #[serde(default)]
    pub read_timeout_s: Option<u32>,
    /// `SlurmctldParameters=canopy_operators=alice:bob:@hpcops`: users (and
    /// `@groups`) who are operators besides root and SlurmUser, until
    /// associations bring Slurm's AdminLevel. canopy's own parameter.
    #[serde(default)]
    pub operators: Vec<String>,
    /// `SlurmctldParameters=canopy_event_retention=DURATION` (a Slurm duration: `60` minutes,
    /// `7-0` days-hours, ...; default 7 days): how long `canopy events` keeps records on disk.
    /// canopy's own parameter.
    #[serde(default)]
    pub event_retention_s: Option<u64>,
    /// `SlurmctldParameters=rl_enable` and its `rl_*` knobs.
    #[serde(default)]
    pub rate_limit: RateLimitConf,
    /// `Prolog`, `Epilog`, `PrologSlurmctld`, `EpilogSlurmctld`,
    /// `PrologFlags`, `PrologEpilogTimeout` and
    /// `SchedulerParameters=nohold_on_prolog_fail`.
    #[serde(default)]
    pub prolog: PrologConf,
    /// PreemptType, PreemptMode, PreemptExemptTime, PreemptParameters.
    #[serde(default)]
    pub preempt: super::preempt::PreemptConf,
    /// Power saving and cloud nodes (SuspendProgram, ResumeProgram, ...).
    #[serde(default)]
    pub power: super::power::PowerConf,
    /// `<dir of main file>/slurm.key`: the shared HMAC key (the signing
    /// one; `slurm.key.alt` beside it, if present, is also accepted).
    pub auth_key_path: PathBuf,
    /// The local signer's socket (`AuthInfo=socket=PATH`; default
    /// [`DEFAULT_AUTH_SOCKET`]): where commands get their credentials.
    pub auth_socket: PathBuf,
    /// Expanded, in file order; later duplicates dropped with a warning.
    pub nodes: Vec<NodeConf>,
    /// In file order.
    pub partitions: Vec<PartitionConf>,
    /// The global `DefMemPerCPU`/`DefMemPerNode`, `MaxMemPerCPU`/
    /// `MaxMemPerNode`, `DefCpuPerGPU` and `DefMemPerGPU` (a partition's
    /// own values win).
    #[serde(default)]
    pub mem: crate::model::part_opts::MemDefaults,
    /// Every node's generic resources (slurm.conf `Gres=` merged with
    /// gres.conf), index-aligned with `nodes`; see [`Config::node_gres`].
    #[serde(default)]
    pub gres: super::gres::GresConfig,
    /// Non-fatal notes, each `file:line: ...`.
    pub warnings: Vec<String>,
    /// Settings canopy accepts but does not act on, with their values as written (node and
    /// partition attributes once per node line and partition, DEFAULT lines applied); see
    /// [`super::ignored`] for their classification and summary.
    #[serde(default)]
    pub ignored: Vec<super::ignored::IgnoredSetting>,
    /// Every global key the file sets, in Slurm's spelling, with its value as written
    /// (the last one, or `+=` parts joined by commas), in the order first set: what
    /// `scontrol show config` prints for keys it has no value of its own for.
    #[serde(default)]
    pub settings: Vec<(String, String)>,
    /// Backup controllers (`SlurmctldHost` after the first, or the old
    /// `BackupController`/`BackupAddr`) as (host, address); canopy does not run them.
    #[serde(default)]
    pub backup_controllers: Vec<(String, String)>,
    /// Each node's ignored attributes (CoreSpecCount, MemSpecLimit, ...) as written,
    /// DEFAULT applied, index-aligned with `nodes`; see [`Config::node_ignored_attrs`].
    #[serde(default)]
    pub node_ignored: Vec<Vec<(String, String)>>,
    /// Node name → index into `nodes`, built at load.
    pub(super) node_by_name: HashMap<String, usize>,
    /// How many of `nodes` slurm.conf lists; dynamic nodes follow them.
    #[serde(default)]
    pub fixed_nodes: usize,
    /// `MaxNodeCount`: the most nodes, dynamic ones included (`None`: unset, no room
    /// for dynamic nodes; below the file's count it is ignored, as in Slurm).
    #[serde(default)]
    pub max_node_count: Option<u32>,
}

/// The prolog and epilog scripts and how they run (see `exec::prolog`
/// for the node side, `ctld::prolog` for the controller's decisions).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PrologConf {
    /// `Prolog`: a path or a glob (`/etc/slurm/prolog.d/*`), run by each
    /// node daemon as its own user (root) before the job's first process.
    pub prolog: Option<String>,
    /// `Epilog`: the same, run on every node of the job once it is over there.
    pub epilog: Option<String>,
    /// `PrologSlurmctld`: a path (no glob, as in Slurm 22.05), run by the
    /// controller as its own user at allocation.
    pub prolog_slurmctld: Option<String>,
    /// `EpilogSlurmctld`: run by the controller once the job is over.
    pub epilog_slurmctld: Option<String>,
    /// `PrologFlags=Alloc` (or `Contain`/`X11`, which imply it): the Prolog
    /// runs on every node at allocation, before the batch script starts.
    pub alloc: bool,
    /// `PrologFlags=Contain` (the extern step is the cgroup helper's business).
    pub contain: bool,
    /// `PrologFlags=Serial`: a node runs its prologs and epilogs one at a time.
    pub serial: bool,
    /// `PrologFlags=NoHold` (only changes salloc's wait in Slurm; accepted).
    pub no_hold: bool,
    /// `PrologEpilogTimeout` in seconds; `None` waits for ever (Slurm's default).
    pub timeout_s: Option<u32>,
    /// `SchedulerParameters=nohold_on_prolog_fail`: a job whose Prolog
    /// failed is requeued without the hold.
    pub nohold_on_fail: bool,
}

/// `AccountingStorageEnforce`'s flags that canopy acts on. `limits` and
/// `qos` imply `associations`; `safe` implies `limits`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AcctEnforce {
    /// A job needs an association (user in the account it names or its
    /// default account).
    pub associations: bool,
    /// Association and QOS limits hold jobs (and refuse at submit).
    pub limits: bool,
    /// The job's QOS must be one its association may use.
    pub qos: bool,
    /// `safe`: a job starts only if it can run to its time limit inside
    /// `GrpTRESMins`/`GrpWall`, and running jobs are never stopped by them.
    pub safe: bool,
}

/// `PrivateData`'s flags: what a non-operator is kept from seeing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PrivateData {
    /// Other users' jobs (squeue, scontrol show job, sacct, sshare).
    pub jobs: bool,
    /// Node state (sinfo, scontrol show node).
    pub nodes: bool,
    /// Partition state (sinfo, scontrol show partition).
    pub partitions: bool,
    /// Reservations (canopy has none to show).
    pub reservations: bool,
    /// Other users' usage (sshare).
    pub usage: bool,
    /// Other users' records (sshare's user rows).
    pub users: bool,
    /// `cloud`: powered-down cloud nodes are shown (without it Slurm hides
    /// them from sinfo and scontrol, even from root).
    #[serde(default)]
    pub cloud: bool,
}

/// Slurm's default `max_script_size`: 4 MiB.
pub const DEFAULT_MAX_SCRIPT_SIZE: u64 = 4 * 1024 * 1024;
/// The largest `max_script_size` Slurm accepts (512 MiB).
pub const MAX_SCRIPT_SIZE_LIMIT: u64 = 512 * 1024 * 1024;

/// Per-user RPC rate limiting, as Slurm's `SlurmctldParameters=rl_*`: a
/// token bucket per uid, holding `bucket_size` tokens, refilled with
/// `refill_rate` tokens every `refill_period_s` seconds; each client RPC
/// takes one. Defaults are Slurm's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RateLimitConf {
    /// `rl_enable`.
    pub enabled: bool,
    /// `rl_bucket_size` (default 30).
    pub bucket_size: u32,
    /// `rl_refill_rate` (default 2).
    pub refill_rate: u32,
    /// `rl_refill_period` (default 1 s).
    pub refill_period_s: u32,
    /// `rl_table_size` (default 8192): users tracked at once.
    pub table_size: u32,
    /// `rl_log_freq` (default 0 = every limited RPC is logged; -1 = none;
    /// N = at most one line per user every N seconds).
    pub log_freq_s: i32,
}

impl Default for RateLimitConf {
    fn default() -> Self {
        RateLimitConf {
            enabled: false,
            bucket_size: 30,
            refill_rate: 2,
            refill_period_s: 1,
            table_size: 8192,
            log_freq_s: 0,
        }
    }
}

impl Config {
    /// How long an idle authenticated client connection is kept open.
    pub fn read_timeout(&self) -> std::time::Duration {
        std::time::Duration::from_secs(u64::from(
            self.read_timeout_s.unwrap_or(self.message_timeout_s).max(1),
        ))
    }
}

/// One node as configured.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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
    /// Raw Gres string as written (syntax checked); empty when none. The
    /// parsed, checked inventory is [`Config::node_gres`].
    pub gres: String,
    pub features: Vec<String>,
    pub weight: u32,
    pub state: ConfNodeState,
    pub reason: Option<String>,
    /// Not in slurm.conf: created by `canopy-noded -Z` or `scontrol create node`
    /// (Slurm's DYNAMIC_NORM); see `config::dynamic`.
    #[serde(default)]
    pub dynamic: bool,
    /// A deleted dynamic node's rank, free for the next one: it is in no partition
    /// and no name lookup, and no view shows it. Ranks are never shifted, so the
    /// relay tree never re-ranks a node.
    #[serde(default)]
    pub vacant: bool,
}

/// The states a node may be given in slurm.conf (the controller decides IDLE, ALLOCATED...).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
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
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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
    /// PriorityTier, PreemptMode and GraceTime.
    #[serde(default)]
    pub preempt: super::preempt::PartPreempt,
    /// `AllowAccounts`, `DenyAccounts`, `AllowQos`, `DenyQos`, `QOS`.
    #[serde(default)]
    pub access: PartitionAccess,
    /// Hidden, AllowGroups, OverSubscribe, memory defaults and limits, ...
    #[serde(default)]
    pub opts: crate::model::part_opts::PartOpts,
    /// Which dynamic nodes join this partition when they are created.
    #[serde(default)]
    pub dynamic_join: DynamicJoin,
}

/// A partition's rule for dynamic nodes, from its `Nodes=`: `ALL` takes every one, and a
/// `NodeSet` with `Feature=` takes those created with that feature.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DynamicJoin {
    pub all: bool,
    pub features: Vec<String>,
}

impl DynamicJoin {
    pub fn takes(&self, node: &NodeConf) -> bool {
        self.all || node.features.iter().any(|f| self.features.contains(f))
    }
}

pub use crate::model::partition::PartitionAccess;

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
        // The relay tree's room for dynamic nodes is laid out at start (as slurmctld
        // sizes its node table).
        differs("MaxNodeCount", self.max_node_count != new.max_node_count);
        // Listeners are sized at start.
        differs(
            "SlurmctldParameters conmgr_max_connections",
            self.max_connections != new.max_connections,
        );
        // Connection tasks and the rate limiter take these at start.
        differs(
            "SlurmctldParameters conmgr_read_timeout",
            self.read_timeout_s != new.read_timeout_s,
        );
        differs(
            "SlurmctldParameters rl_enable/rl_*",
            self.rate_limit != new.rate_limit,
        );
        differs("SlurmUser", self.slurm_user != new.slurm_user);
        differs(
            "SlurmctldParameters canopy_operators",
            self.operators != new.operators,
        );
        // The event log is opened with its retention at start.
        differs(
            "SlurmctldParameters canopy_event_retention",
            self.event_retention_s != new.event_retention_s,
        );
        // The file's nodes; dynamic ones follow them and are carried over.
        let names = |c: &Config| {
            let file = c.nodes.iter().take(c.fixed_nodes);
            file.map(|n| n.name.clone()).collect::<Vec<_>>()
        };
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

pub(super) fn locate_with(
    explicit: Option<&Path>,
    var: impl Fn(&str) -> Option<OsString>,
) -> PathBuf {
    if let Some(path) = explicit {
        return path.to_path_buf();
    }
    ["CANOPY_CONF", "SLURM_CONF"]
        .into_iter()
        .find_map(|name| var(name).filter(|v| !v.is_empty()))
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(DEFAULT_CONF_PATH))
}
