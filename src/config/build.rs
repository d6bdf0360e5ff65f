//! Building a configuration: reading each logical line (see `parse`) into the [`Config`]
//! under construction, in file order. Global keys set fields, NodeName and PartitionName
//! lines merge over their DEFAULT lines, DownNodes and NodeSet lines are kept for later;
//! every value is checked here, and its error names the key and value as written and
//! what was expected. Checks that need the whole file (the controller, ports, node sets,
//! partition members) are `resolve`'s.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use super::gres::GresSource;
use super::keys::*;
use super::parse::{self, Item, Line, Loc, Op};
use super::types::{
    ConfNodeState, Config, ConfigError, NodeConf, PartitionConf, PrivateData, RateLimitConf,
    DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_SCRIPT_SIZE, MAX_JOB_ID, MAX_SCRIPT_SIZE_LIMIT,
};
use super::{hostlist, units};
use crate::wire::types::PartitionState;

/// Longest ClusterName Slurm accepts.
const MAX_CLUSTER_NAME_LEN: usize = 40;
/// Largest `conmgr_max_connections` accepted (each connection costs a descriptor).
const MAX_CONNECTIONS: u64 = 1_000_000;

/// Largest value of Slurm's 16-bit timeouts (65534 and 65535 are reserved markers).
const MAX_TIMEOUT_S: u64 = 65_533;

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
    /// The gres.conf beside `path` is read too, if it exists.
    pub fn parse_str(text: &str, path: &Path) -> Result<Config, ConfigError> {
        Config::parse_with(text, path, GresSource::Beside)
    }

    /// Validate `text` as slurm.conf and `gres` as the gres.conf at
    /// `gres_path` (`None`: no gres.conf), reading no other file but Includes.
    pub fn parse_str_with_gres(
        text: &str,
        path: &Path,
        gres: Option<(&str, &Path)>,
    ) -> Result<Config, ConfigError> {
        let source = match gres {
            Some((t, p)) => GresSource::Text(t, p),
            None => GresSource::Absent,
        };
        Config::parse_with(text, path, source)
    }

    fn parse_with(text: &str, path: &Path, gres: GresSource<'_>) -> Result<Config, ConfigError> {
        let mut builder = Builder::new(path);
        for line in parse::read_lines(text, path)? {
            builder.line(&line)?;
        }
        builder.finish(gres)
    }
}

pub(super) fn bad_value(loc: &Loc, item: &Item, expected: impl std::fmt::Display) -> ConfigError {
    loc.error(
        &item.key,
        format!("{}={}: expected {expected}", item.key, item.value),
    )
}

/// Keys canopy uses take a plain `=`; `+=` and friends only make sense for ignored ones.
pub(super) fn require_set(loc: &Loc, item: &Item) -> Result<(), ConfigError> {
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

pub(super) fn digits(text: &str) -> Option<u64> {
    let ok = !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit());
    ok.then(|| text.parse().ok()).flatten()
}

pub(super) fn int_in<T: TryFrom<u64>>(
    loc: &Loc,
    item: &Item,
    min: u64,
    max: u64,
) -> Result<T, ConfigError> {
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

pub(super) fn secs_in<T: TryFrom<u64>>(
    loc: &Loc,
    item: &Item,
    min: u64,
    max: u64,
) -> Result<T, ConfigError> {
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
pub(super) fn unit_error(
    loc: &Loc,
    item: &Item,
    error: units::UnitError,
    expected: &str,
) -> ConfigError {
    match error {
        units::UnitError::TooLarge { limit, .. } => {
            bad_value(loc, item, format_args!("at most {limit}"))
        }
        _ => bad_value(loc, item, expected),
    }
}

pub(super) fn mem_mb(loc: &Loc, item: &Item) -> Result<u64, ConfigError> {
    units::parse_mem_mb(&item.value).map_err(|e| {
        unit_error(
            loc,
            item,
            e,
            "a size in MiB, optionally with a K, M, G or T suffix",
        )
    })
}

pub(super) fn time_limit(loc: &Loc, item: &Item) -> Result<Option<u32>, ConfigError> {
    units::parse_time_limit_min(&item.value).map_err(|e| {
        unit_error(
            loc,
            item,
            e,
            "a time limit: M, M:S, H:M:S, D-H, D-H:M, D-H:M:S or UNLIMITED",
        )
    })
}

pub(super) fn yes_no(loc: &Loc, item: &Item) -> Result<bool, ConfigError> {
    match item.value.trim().to_ascii_uppercase().as_str() {
        "YES" | "TRUE" | "UP" | "1" => Ok(true),
        "NO" | "FALSE" | "DOWN" | "0" => Ok(false),
        _ => Err(bad_value(loc, item, "YES or NO")),
    }
}

/// A comma-separated list, blanks and empty entries dropped.
pub(super) fn name_list(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(str::to_string)
        .collect()
}

pub(super) fn non_empty(loc: &Loc, item: &Item, what: &str) -> Result<String, ConfigError> {
    let value = item.value.trim();
    if value.is_empty() {
        return Err(bad_value(loc, item, what));
    }
    Ok(value.to_string())
}

pub(super) fn port_number(text: &str) -> Option<u16> {
    digits(text)
        .and_then(|n| u16::try_from(n).ok())
        .filter(|&p| p != 0)
}

pub(super) fn port(loc: &Loc, item: &Item) -> Result<u16, ConfigError> {
    port_number(item.value.trim()).ok_or_else(|| bad_value(loc, item, "a port between 1 and 65535"))
}

/// SlurmctldPort: a port or a range `LO-HI`, of which canopy listens on the first.
pub(super) fn ctld_port(loc: &Loc, item: &Item) -> Result<u16, ConfigError> {
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

pub(super) fn cluster_name(loc: &Loc, item: &Item) -> Result<String, ConfigError> {
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
pub(super) fn ctld_host(loc: &Loc, item: &Item) -> Result<(String, String), ConfigError> {
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

/// A comma list of plugin names, each given the `prefix/` type it lacks.
pub(super) fn plugin_names(prefix: &str, value: &str) -> String {
    value
        .split(',')
        .map(str::trim)
        .map(|name| {
            if name.is_empty() || name.contains('/') {
                name.to_string()
            } else {
                format!("{prefix}/{name}")
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

pub(super) fn comma_list(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect()
}

/// A hostlist-valued attribute: its text as written and its expansion.
#[derive(Debug, Clone)]
pub(super) struct Listed<T> {
    pub(super) raw: String,
    pub(super) values: Vec<T>,
}

pub(super) fn host_names(loc: &Loc, item: &Item) -> Result<Listed<String>, ConfigError> {
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
pub(super) fn port_list(loc: &Loc, item: &Item) -> Result<Listed<u16>, ConfigError> {
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

pub(super) const CONF_STATES: &str = "CLOUD, DOWN, DRAIN, FAIL, FAILING, FUTURE or UNKNOWN";

pub(super) fn conf_node_state(loc: &Loc, item: &Item) -> Result<ConfNodeState, ConfigError> {
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

pub(super) fn partition_state(loc: &Loc, item: &Item) -> Result<PartitionState, ConfigError> {
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
pub(super) struct NodeSpec {
    pub(super) cpus: Option<u32>,
    /// `Procs`: used only where neither the line nor DEFAULT gives `CPUs`, as in Slurm.
    pub(super) procs: Option<u32>,
    pub(super) boards: Option<u32>,
    pub(super) sockets: Option<u32>,
    pub(super) sockets_per_board: Option<u32>,
    pub(super) cores: Option<u32>,
    pub(super) threads: Option<u32>,
    pub(super) real_memory_mb: Option<u64>,
    pub(super) tmp_disk_mb: Option<u64>,
    pub(super) gres: Option<String>,
    pub(super) features: Option<Vec<String>>,
    /// `Feature`: read before `Features` of the same line (see `node_line`).
    pub(super) feature: Option<Vec<String>>,
    pub(super) weight: Option<u32>,
    pub(super) state: Option<ConfNodeState>,
    pub(super) reason: Option<String>,
    pub(super) addr: Option<Listed<String>>,
    pub(super) hostname: Option<Listed<String>>,
    pub(super) port: Option<Listed<u16>>,
    /// Ignored attributes, by Slurm's spelling: value as written and where.
    pub(super) unread: Unread,
}

/// Ignored attributes of a node or partition line, by Slurm's spelling.
pub(super) type Unread = std::collections::BTreeMap<&'static str, (String, Loc)>;

/// `mine` over `base`, key by key, as Slurm merges a line over its DEFAULT line.
pub(super) fn unread_over(mut mine: Unread, base: &Unread) -> Unread {
    for (k, v) in base {
        mine.entry(k).or_insert_with(|| v.clone());
    }
    mine
}

impl NodeSpec {
    /// `self`'s values, falling back to `base` for those not given.
    pub(super) fn over(self, base: &NodeSpec) -> NodeSpec {
        NodeSpec {
            cpus: self.cpus.or(base.cpus),
            procs: self.procs.or(base.procs),
            boards: self.boards.or(base.boards),
            sockets: self.sockets.or(base.sockets),
            sockets_per_board: self.sockets_per_board.or(base.sockets_per_board),
            cores: self.cores.or(base.cores),
            threads: self.threads.or(base.threads),
            real_memory_mb: self.real_memory_mb.or(base.real_memory_mb),
            tmp_disk_mb: self.tmp_disk_mb.or(base.tmp_disk_mb),
            gres: self.gres.or_else(|| base.gres.clone()),
            features: self.features.or_else(|| base.features.clone()),
            feature: self.feature.or_else(|| base.feature.clone()),
            weight: self.weight.or(base.weight),
            state: self.state.or(base.state),
            reason: self.reason.or_else(|| base.reason.clone()),
            addr: self.addr.or_else(|| base.addr.clone()),
            hostname: self.hostname.or_else(|| base.hostname.clone()),
            port: self.port.or_else(|| base.port.clone()),
            unread: unread_over(self.unread, &base.unread),
        }
    }
}

/// Attributes given on one PartitionName line (or accumulated from DEFAULT lines).
#[derive(Debug, Clone, Default)]
pub(super) struct PartSpec {
    pub(super) nodes: Option<Listed<String>>,
    pub(super) default: Option<bool>,
    pub(super) max_time: Option<Option<u32>>,
    pub(super) default_time: Option<Option<u32>>,
    pub(super) max_nodes: Option<Option<u32>>,
    pub(super) min_nodes: Option<u32>,
    pub(super) state: Option<PartitionState>,
    pub(super) preempt_mode: Option<crate::config::preempt::PreemptMode>,
    pub(super) grace_s: Option<u32>,
    pub(super) access: super::types::PartitionAccess,
    pub(super) unread: Unread,
    pub(super) opts: super::partopts::PartOptsSpec,
}

impl PartSpec {
    pub(super) fn over(self, base: &PartSpec) -> PartSpec {
        PartSpec {
            nodes: self.nodes.or_else(|| base.nodes.clone()),
            default: self.default.or(base.default),
            max_time: self.max_time.or(base.max_time),
            default_time: self.default_time.or(base.default_time),
            max_nodes: self.max_nodes.or(base.max_nodes),
            min_nodes: self.min_nodes.or(base.min_nodes),
            state: self.state.or(base.state),
            preempt_mode: self.preempt_mode.or(base.preempt_mode),
            grace_s: self.grace_s.or(base.grace_s),
            access: access_over(self.access, &base.access),
            unread: unread_over(self.unread, &base.unread),
            opts: self.opts.over(&base.opts),
        }
    }
}

/// A partition line's access lists over `PartitionName=DEFAULT`'s.
fn access_over(
    mine: super::types::PartitionAccess,
    base: &super::types::PartitionAccess,
) -> super::types::PartitionAccess {
    super::types::PartitionAccess {
        allow_accounts: mine.allow_accounts.or_else(|| base.allow_accounts.clone()),
        deny_accounts: if mine.deny_accounts.is_empty() {
            base.deny_accounts.clone()
        } else {
            mine.deny_accounts
        },
        allow_qos: mine.allow_qos.or_else(|| base.allow_qos.clone()),
        deny_qos: if mine.deny_qos.is_empty() {
            base.deny_qos.clone()
        } else {
            mine.deny_qos
        },
        qos: mine.qos.or_else(|| base.qos.clone()),
    }
}

/// A comma list of names, lower-cased; `ALL` (or empty) is `None`.
fn access_names(value: &str) -> Option<Vec<String>> {
    let v: Vec<String> = value
        .split(',')
        .map(|s| s.trim().to_lowercase())
        .filter(|s| !s.is_empty())
        .collect();
    (!v.is_empty() && !v.iter().any(|s| s == "all")).then_some(v)
}

/// CPU topology of one node line after defaults and inference.
pub(super) struct Topology {
    pub(super) cpus: u32,
    pub(super) boards: u32,
    pub(super) sockets: u32,
    pub(super) cores: u32,
    pub(super) threads: u32,
}

/// A partition whose node list is resolved once every node is known.
pub(super) struct PendingPartition {
    pub(super) conf: PartitionConf,
    pub(super) nodes: Option<Listed<String>>,
    pub(super) loc: Loc,
}

pub(super) struct PendingDown {
    pub(super) names: Listed<String>,
    /// `None`: the line sets only a reason.
    pub(super) state: Option<ConfNodeState>,
    pub(super) reason: Option<String>,
    pub(super) loc: Loc,
}

pub(super) struct PendingNodeSet {
    pub(super) name: String,
    pub(super) nodes: Option<Listed<String>>,
    pub(super) feature: Option<String>,
    pub(super) loc: Loc,
}

// ---------------------------------------------------------------------------------------
// Builder: applies logical lines in order, then validates across lines.
// ---------------------------------------------------------------------------------------

pub(super) struct Builder {
    pub(super) cfg: Config,
    /// Where each scalar key was last set, to warn when it is set again.
    pub(super) set_at: HashMap<GlobalKey, Loc>,
    pub(super) node_defaults: NodeSpec,
    pub(super) part_defaults: PartSpec,
    /// Per node: where it was defined and its own Port, if any.
    pub(super) node_origin: Vec<(Loc, Option<u16>)>,
    pub(super) partitions: Vec<PendingPartition>,
    pub(super) down: Vec<PendingDown>,
    pub(super) nodesets: Vec<PendingNodeSet>,
    /// Every SlurmctldHost line: the first is the controller, the rest backups.
    pub(super) ctld_hosts: Vec<(String, String, Loc)>,
    pub(super) control_machine: Option<(String, Loc)>,
    pub(super) control_addr: Option<(String, Loc)>,
    pub(super) backup_controller: Option<(String, Loc)>,
    pub(super) backup_addr: Option<(String, Loc)>,
}

impl Builder {
    pub(super) fn new(path: &Path) -> Builder {
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
                priority: Default::default(),
                mail_prog: PathBuf::from("/bin/mail"),
                mail_domain: None,
                gres_types: Vec::new(),
                select_params: Default::default(),
                proctrack_cgroup: true,
                task_plugins: Vec::new(),
                task_plugin_param: String::new(),
                licenses: Vec::new(),
                license_counts: Vec::new(),
                enable_user_top: false,
                sched: Default::default(),
                max_script_size: DEFAULT_MAX_SCRIPT_SIZE,
                max_submit_jobs_per_user: None,
                private_data: PrivateData::default(),
                accounting_enforce: Default::default(),
                slurm_user: None,
                config_overrides: false,
                max_connections: DEFAULT_MAX_CONNECTIONS,
                read_timeout_s: None,
                operators: Vec::new(),
                event_retention_s: None,
                rate_limit: RateLimitConf::default(),
                prolog: Default::default(),
                preempt: Default::default(),
                power: Default::default(),
                auth_key_path: dir.join("slurm.key"),
                auth_socket: PathBuf::from(super::types::DEFAULT_AUTH_SOCKET),
                nodes: Vec::new(),
                partitions: Vec::new(),
                mem: Default::default(),
                gres: Default::default(),
                warnings: Vec::new(),
                ignored: Vec::new(),
                settings: Vec::new(),
                backup_controllers: Vec::new(),
                node_ignored: Vec::new(),
                node_by_name: HashMap::new(),
                fixed_nodes: 0,
                max_node_count: None,
            },
            set_at: HashMap::new(),
            node_defaults: NodeSpec::default(),
            part_defaults: PartSpec::default(),
            node_origin: Vec::new(),
            partitions: Vec::new(),
            down: Vec::new(),
            nodesets: Vec::new(),
            ctld_hosts: Vec::new(),
            control_machine: None,
            control_addr: None,
            backup_controller: None,
            backup_addr: None,
        }
    }

    pub(super) fn warn(&mut self, loc: &Loc, message: impl std::fmt::Display) {
        self.cfg.warnings.push(format!("{loc}: {message}"));
    }

    /// Keep an ignored setting, value as written, for the summary and for `scontrol show`.
    pub(super) fn record_ignored(
        &mut self,
        loc: &Loc,
        section: &str,
        key: &str,
        value: &str,
        owner: &str,
    ) {
        self.cfg.ignored.push(super::ignored::IgnoredSetting {
            section: section.into(),
            key: key.into(),
            value: value.into(),
            owner: owner.into(),
            file: loc.file.to_path_buf(),
            line: loc.line,
        });
    }

    /// Record the words of list key `key` (`SchedulerParameters`, ...) canopy does not act
    /// on, each `name[=value]` as written.
    pub(super) fn record_words(&mut self, loc: &Loc, key: &str, words: &[String]) {
        for word in words {
            let (name, value) = word.split_once('=').unwrap_or((word, ""));
            self.record_ignored(loc, key, name.trim(), value.trim(), "");
        }
    }

    /// Record the ignored attributes of one node line or partition (DEFAULT applied).
    pub(super) fn record_unread(&mut self, section: &str, owner: &str, unread: &Unread) {
        for (key, (value, loc)) in unread {
            self.record_ignored(loc, section, key, value, owner);
        }
    }

    /// Remember a global key's value as written, for `scontrol show config`.
    pub(super) fn note_setting(&mut self, name: &str, item: &Item) {
        let value = item.value.trim();
        // A list key set again with `=` replaces its words: so do its ignored ones.
        if item.op == Op::Set {
            self.cfg
                .ignored
                .retain(|s| !s.section.eq_ignore_ascii_case(name));
        }
        match self
            .cfg
            .settings
            .iter_mut()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
        {
            Some((_, v)) if item.op == Op::Add && !v.is_empty() => {
                v.push(',');
                v.push_str(value);
            }
            Some((_, v)) => *v = value.to_string(),
            None => self
                .cfg
                .settings
                .push((name.to_string(), value.to_string())),
        }
    }

    /// `AuthInfo=socket=PATH[,...]`: where the local signer listens.
    /// Other options (MUNGE's `cred_expire`, ...) do not apply to canopy's
    /// signer and are named in one warning.
    pub(super) fn auth_info(&mut self, loc: &Loc, item: &Item) -> Result<(), ConfigError> {
        let mut ignored = Vec::new();
        for p in item
            .value
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
        {
            match p.split_once('=') {
                Some((k, v)) if k.eq_ignore_ascii_case("socket") => {
                    if !v.starts_with('/') {
                        return Err(bad_value(loc, item, "socket=PATH with an absolute PATH"));
                    }
                    self.cfg.auth_socket = PathBuf::from(v);
                }
                _ => ignored.push(p.to_string()),
            }
        }
        self.record_words(loc, "AuthInfo", &ignored);
        Ok(())
    }

    /// `SchedulerParameters`: a comma list, of which canopy reads the
    /// `scontrol top` switches, `max_script_size=N` and
    /// `max_submit_jobs_per_user=N`; the rest are kept with the ignored settings (`ignored`).
    /// (A repeated line warns and replaces the earlier one, as for any
    /// scalar.)
    pub(super) fn scheduler_parameters(
        &mut self,
        loc: &Loc,
        item: &Item,
    ) -> Result<(), ConfigError> {
        let mut ignored = Vec::new();
        self.cfg.enable_user_top = false;
        self.cfg.max_script_size = DEFAULT_MAX_SCRIPT_SIZE;
        self.cfg.max_submit_jobs_per_user = None;
        self.cfg.prolog.nohold_on_fail = false;
        let backfill = self.cfg.sched.backfill;
        self.cfg.sched = crate::config::SchedConf {
            backfill,
            ..Default::default()
        };
        for p in item
            .value
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
        {
            let (name, value) = p.split_once('=').unwrap_or((p, ""));
            let number = |min: u64, max: u64| {
                digits(value.trim())
                    .filter(|n| (min..=max).contains(n))
                    .ok_or_else(|| {
                        loc.error(
                            &item.key,
                            format!(
                                "SchedulerParameters {p}: expected an integer between {min} and {max}"
                            ),
                        )
                    })
            };
            // Slurm 22.05's preemption words (`preempt.rs`).
            if let Some(r) = super::preempt::scheduler_param(&mut self.cfg.preempt, name, value) {
                r.map_err(|e| loc.error(&item.key, e))?;
                continue;
            }
            // The scheduling loops' own parameters (`sched.rs`).
            if let Some(r) = self.cfg.sched.param(name, value) {
                r.map_err(|e| loc.error(&item.key, e))?;
                continue;
            }
            match name.to_ascii_lowercase().as_str() {
                "enable_user_top" => self.cfg.enable_user_top = true,
                "nohold_on_prolog_fail" => self.cfg.prolog.nohold_on_fail = true,
                "disable_user_top" => self.cfg.enable_user_top = false,
                "max_script_size" => {
                    self.cfg.max_script_size = number(1, MAX_SCRIPT_SIZE_LIMIT)?;
                }
                "max_submit_jobs_per_user" => {
                    let n = number(1, u32::MAX.into())?;
                    self.cfg.max_submit_jobs_per_user = u32::try_from(n).ok();
                }
                _ => ignored.push(p.to_string()),
            }
        }
        self.record_words(loc, "SchedulerParameters", &ignored);
        Ok(())
    }

    /// `PrologFlags`: a comma list. `Contain` and `X11` imply `Alloc`, as in
    /// Slurm; `DeferBatch` and `ForceRequeueOnFail` are accepted and
    /// warning (canopy's Alloc already waits for every node); an unknown
    /// flag is an error, as slurmctld refuses to start with one.
    pub(super) fn prolog_flags(&mut self, loc: &Loc, item: &Item) -> Result<(), ConfigError> {
        // A repeated line replaces the flags, as for any scalar key.
        let mut flags = self.cfg.prolog.clone();
        flags.alloc = false;
        flags.contain = false;
        flags.serial = false;
        flags.no_hold = false;
        let mut ignored = Vec::new();
        for f in item
            .value
            .split(',')
            .map(str::trim)
            .filter(|f| !f.is_empty())
        {
            match f.to_ascii_lowercase().as_str() {
                "alloc" => flags.alloc = true,
                "contain" => {
                    flags.contain = true;
                    flags.alloc = true;
                }
                "x11" => {
                    flags.contain = true;
                    flags.alloc = true;
                    ignored.push(f.to_string());
                }
                "serial" => flags.serial = true,
                "nohold" => flags.no_hold = true,
                "deferbatch" | "forcerequeueonfail" | "runinjob" => ignored.push(f.to_string()),
                _ => {
                    return Err(loc.error(
                        &item.key,
                        format!("PrologFlags: unknown flag '{f}' (expected Alloc, Contain, DeferBatch, ForceRequeueOnFail, NoHold, RunInJob, Serial or X11)"),
                    ))
                }
            }
        }
        self.record_words(loc, "PrologFlags", &ignored);
        self.cfg.prolog = flags;
        Ok(())
    }

    /// `AccountingStorageEnforce=associations,limits,qos,safe,...`.
    pub(super) fn accounting_enforce(&mut self, loc: &Loc, item: &Item) {
        let mut e = super::types::AcctEnforce::default();
        let mut ignored = Vec::new();
        for word in item
            .value
            .split(',')
            .map(str::trim)
            .filter(|w| !w.is_empty())
        {
            match word.to_ascii_lowercase().as_str() {
                "associations" => e.associations = true,
                "limits" => e.limits = true,
                "qos" => e.qos = true,
                "safe" => e.safe = true,
                "all" => (e.limits, e.qos, e.safe) = (true, true, true),
                "none" | "0" => e = Default::default(),
                _ => ignored.push(word.to_string()),
            }
        }
        e.limits |= e.safe;
        e.associations |= e.limits || e.qos;
        self.cfg.accounting_enforce = e;
        self.record_words(loc, "AccountingStorageEnforce", &ignored);
    }

    /// `PrivateData`: a comma list of what users may not see of others.
    /// `accounts` and `events` concern what canopy does not have yet (sacctmgr,
    /// an event log) and are kept with the ignored settings; an unknown word is
    /// kept so too (Slurm skips it silently).
    pub(super) fn private_data(&mut self, loc: &Loc, item: &Item) {
        let mut pd = PrivateData::default();
        let mut ignored = Vec::new();
        for word in item
            .value
            .split(',')
            .map(str::trim)
            .filter(|w| !w.is_empty())
        {
            match word.to_ascii_lowercase().as_str() {
                "jobs" => pd.jobs = true,
                "nodes" => pd.nodes = true,
                "partitions" => pd.partitions = true,
                "reservations" => pd.reservations = true,
                "usage" => pd.usage = true,
                "users" => pd.users = true,
                "cloud" => pd.cloud = true,
                "all" => {
                    pd = PrivateData {
                        jobs: true,
                        nodes: true,
                        partitions: true,
                        reservations: true,
                        usage: true,
                        users: true,
                        cloud: true,
                    }
                }
                _ => ignored.push(word.to_string()),
            }
        }
        self.cfg.private_data = pd;
        self.record_words(loc, "PrivateData", &ignored);
    }

    /// `SlurmctldParameters`: a comma list, of which canopy reads
    /// `conmgr_max_connections=N`; the rest are kept with the ignored settings (`ignored`).
    /// `=` replaces earlier lines, `+=` adds to them.
    fn slurmctld_parameters(&mut self, loc: &Loc, item: &Item) -> Result<(), ConfigError> {
        match item.op {
            Op::Set => {
                self.cfg.max_connections = DEFAULT_MAX_CONNECTIONS;
                self.cfg.read_timeout_s = None;
                self.cfg.rate_limit = RateLimitConf::default();
                self.cfg.operators.clear();
                self.cfg.event_retention_s = None;
                self.cfg.power.reset_ctld_params();
            }
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
            } else if name.eq_ignore_ascii_case("canopy_operators") {
                let names: Vec<String> = value
                    .split(':')
                    .map(str::trim)
                    .filter(|n| !n.is_empty())
                    .map(str::to_string)
                    .collect();
                if names.is_empty() || names.iter().any(|n| n == "@") {
                    return Err(loc.error(
                        &item.key,
                        format!(
                            "SlurmctldParameters {p}: expected user names or @groups, separated by ':'"
                        ),
                    ));
                }
                self.cfg.operators.extend(names);
            } else if name.eq_ignore_ascii_case("canopy_event_retention") {
                let secs = units::parse_duration_secs(value)
                    .ok()
                    .flatten()
                    .filter(|s| *s > 0)
                    .ok_or_else(|| {
                        loc.error(
                            &item.key,
                            format!(
                                "SlurmctldParameters {p}: expected a duration such as 60 (minutes) or 7-0 (days-hours), more than zero"
                            ),
                        )
                    })?;
                self.cfg.event_retention_s = Some(secs);
            } else if !self.rate_limit_parameter(loc, item, p, name, value)?
                && !self.power_parameter(loc, item, p, name, value)?
            {
                ignored.push(p.to_string());
            }
        }
        self.record_words(loc, "SlurmctldParameters", &ignored);
        Ok(())
    }

    /// `SlurmdParameters`: a comma list, of which canopy reads
    /// `config_overrides`; the rest are kept with the ignored settings (`ignored`).
    fn slurmd_parameters(&mut self, loc: &Loc, item: &Item) {
        self.cfg.config_overrides = false;
        let mut ignored = Vec::new();
        for p in item
            .value
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
        {
            if p.eq_ignore_ascii_case("config_overrides") {
                self.cfg.config_overrides = true;
            } else {
                ignored.push(p.to_string());
            }
        }
        self.record_words(loc, "SlurmdParameters", &ignored);
    }

    /// One of `conmgr_read_timeout=N`, `rl_enable` and the `rl_*` knobs, or
    /// false when `name` is none of them. Values are checked here (Slurm
    /// falls back to the default on a bad one; an error names it instead).
    fn rate_limit_parameter(
        &mut self,
        loc: &Loc,
        item: &Item,
        p: &str,
        name: &str,
        value: &str,
    ) -> Result<bool, ConfigError> {
        let name = name.to_ascii_lowercase();
        let bad = |what: &str| {
            loc.error(
                &item.key,
                format!("SlurmctldParameters {p}: expected {what}"),
            )
        };
        let int = |min: u64, max: u64| {
            digits(value.trim())
                .filter(|n| (min..=max).contains(n))
                .and_then(|n| u32::try_from(n).ok())
                .ok_or_else(|| bad(&format!("an integer between {min} and {max}")))
        };
        let rl = &mut self.cfg.rate_limit;
        match name.as_str() {
            "conmgr_read_timeout" => {
                self.cfg.read_timeout_s = Some(int(1, MAX_TIMEOUT_S)?);
            }
            "rl_enable" => {
                if !value.is_empty() {
                    return Err(bad("no value (rl_enable)"));
                }
                rl.enabled = true;
            }
            "rl_bucket_size" => rl.bucket_size = int(1, 1_000_000_000)?,
            "rl_refill_rate" => rl.refill_rate = int(1, 1_000_000_000)?,
            "rl_refill_period" => rl.refill_period_s = int(1, MAX_TIMEOUT_S)?,
            "rl_table_size" => rl.table_size = int(1, 10_000_000)?,
            "rl_log_freq" => {
                rl.log_freq_s = match value.trim() {
                    "-1" => -1,
                    v => digits(v)
                        .and_then(|n| i32::try_from(n).ok())
                        .ok_or_else(|| bad("-1 or a number of seconds"))?,
                }
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Apply one logical line. Record keys (NodeName=, PartitionName=...) take the rest of
    /// the line as their attributes; any other key is a global setting.
    pub(super) fn line(&mut self, line: &Line) -> Result<(), ConfigError> {
        let loc = &line.loc;
        for (i, item) in line.items.iter().enumerate() {
            let rest = line.items.get(i + 1..).unwrap_or_default();
            match item.key.to_ascii_lowercase().as_str() {
                "nodename" => return self.node_line(loc, item, rest),
                "partitionname" => return self.partition_line(loc, item, rest),
                "downnodes" => return self.down_line(loc, item, rest),
                "nodeset" => return self.nodeset_line(loc, item, rest),
                "frontendname" => {
                    self.record_ignored(loc, "", "FrontendName", &item.value, "");
                    return Ok(());
                }
                _ => self.global(loc, item)?,
            }
        }
        Ok(())
    }

    pub(super) fn global(&mut self, loc: &Loc, item: &Item) -> Result<(), ConfigError> {
        let spelling = lookup(GLOBAL_KEYS, &item.key)
            .map(|(name, _)| name)
            .or_else(|| lookup_name(UNUSED_GLOBAL_KEYS, &item.key))
            .or_else(|| lookup_name(super::power::KEYS, &item.key))
            .or_else(|| lookup_name(super::partopts::MEM_KEYS, &item.key));
        self.note_setting(spelling.unwrap_or(&item.key), item);
        if let Some(done) = self.priority_key(loc, item) {
            return done;
        }
        if let Some(done) = self.mem_key(loc, item) {
            return done;
        }
        if let Some(done) = self.power_key(loc, item) {
            return done;
        }
        let Some((name, key)) = lookup(GLOBAL_KEYS, &item.key) else {
            return match lookup_name(UNUSED_GLOBAL_KEYS, &item.key) {
                Some(name) => {
                    self.record_ignored(loc, "", name, &item.value, "");
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
        // A plugin named without its type (`TaskPlugin=affinity,cgroup`) is that type's,
        // as Slurm's plugin loader reads it.
        let prefix = match key {
            GlobalKey::ProctrackType => Some("proctrack"),
            GlobalKey::TaskPlugin => Some("task"),
            GlobalKey::SchedulerType => Some("sched"),
            GlobalKey::PriorityType => Some("priority"),
            GlobalKey::PreemptType => Some("preempt"),
            GlobalKey::AuthType => Some("auth"),
            _ => None,
        };
        let typed;
        let item = match prefix {
            Some(prefix) => {
                typed = Item {
                    value: plugin_names(prefix, &item.value),
                    ..item.clone()
                };
                &typed
            }
            None => item,
        };
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
            GlobalKey::BackupController => {
                self.backup_controller = Some((non_empty(loc, item, "a host name")?, loc.clone()))
            }
            GlobalKey::BackupAddr => {
                self.backup_addr = Some((non_empty(loc, item, "an address")?, loc.clone()))
            }
            GlobalKey::SlurmctldPort => cfg.slurmctld_port = ctld_port(loc, item)?,
            GlobalKey::SlurmdPort => cfg.slurmd_port = port(loc, item)?,
            GlobalKey::SlurmdTimeout => {
                cfg.slurmd_timeout_s = secs_in(loc, item, 0, MAX_TIMEOUT_S)?
            }
            GlobalKey::TreeWidth => cfg.tree_width = int_in(loc, item, 2, 65_533)?,
            GlobalKey::MailProg => cfg.mail_prog = non_empty(loc, item, "a program")?.into(),
            GlobalKey::SlurmUser => cfg.slurm_user = Some(non_empty(loc, item, "a user name")?),
            GlobalKey::MailDomain => cfg.mail_domain = Some(non_empty(loc, item, "a domain")?),
            GlobalKey::GresTypes => cfg.gres_types = name_list(&item.value),
            GlobalKey::ProctrackType => {
                let v = item.value.trim().to_ascii_lowercase();
                cfg.proctrack_cgroup = match v.as_str() {
                    "proctrack/cgroup" => true,
                    "proctrack/linuxproc" | "proctrack/pgid" => false,
                    _ => {
                        return Err(loc.error(
                            "ProctrackType",
                            "expected proctrack/cgroup, proctrack/linuxproc or proctrack/pgid",
                        ))
                    }
                }
            }
            GlobalKey::TaskPlugin => {
                let plugins = name_list(&item.value.to_ascii_lowercase());
                for p in &plugins {
                    if !["task/none", "task/affinity", "task/cgroup"].contains(&p.as_str()) {
                        return Err(loc.error(
                            "TaskPlugin",
                            format!("unknown task plugin {p:?} (task/affinity, task/cgroup or task/none)"),
                        ));
                    }
                }
                cfg.task_plugins = plugins;
            }
            GlobalKey::TaskPluginParam => cfg.task_plugin_param = item.value.trim().to_string(),
            GlobalKey::SelectTypeParameters => {
                cfg.select_params = crate::model::tres::CrParams::parse(&item.value)
                    .map_err(|e| loc.error("SelectTypeParameters", e))?
            }
            // `name[:count]` or `name[*count]` entries; the names are kept.
            GlobalKey::Licenses => {
                cfg.licenses = name_list(&item.value)
                    .into_iter()
                    .map(|l| l.split([':', '*']).next().unwrap_or_default().to_string())
                    .collect();
                cfg.license_counts = crate::model::reservation::parse_licenses(&item.value)
                    .map_err(|_| {
                        loc.error("Licenses", "expected name[:count],... (counts above 0)")
                    })?;
            }
            GlobalKey::StateSaveLocation => {
                cfg.state_save_location = non_empty(loc, item, "a directory")?.into()
            }
            GlobalKey::SlurmdSpoolDir => {
                cfg.slurmd_spool_dir = non_empty(loc, item, "a directory")?
            }
            GlobalKey::MaxJobCount => cfg.max_job_count = int_in(loc, item, 1, u32::MAX.into())?,
            GlobalKey::MaxNodeCount => {
                cfg.max_node_count = Some(int_in(loc, item, 1, u32::MAX.into())?)
            }
            GlobalKey::FirstJobId => cfg.first_job_id = int_in(loc, item, 1, MAX_JOB_ID.into())?,
            GlobalKey::MaxJobId => cfg.max_job_id = int_in(loc, item, 1, MAX_JOB_ID.into())?,
            GlobalKey::MinJobAge => cfg.min_job_age_s = secs_in(loc, item, 0, u64::MAX)?,
            GlobalKey::MaxArraySize => cfg.max_array_size = int_in(loc, item, 0, 4_000_001)?,
            GlobalKey::KillWait => cfg.kill_wait_s = secs_in(loc, item, 0, MAX_TIMEOUT_S)?,
            GlobalKey::MessageTimeout => {
                cfg.message_timeout_s = secs_in(loc, item, 1, MAX_TIMEOUT_S)?
            }
            GlobalKey::ReturnToService => cfg.return_to_service = int_in(loc, item, 0, 2)?,
            GlobalKey::SchedulerType => cfg
                .sched
                .scheduler_type(&item.value)
                .map_err(|e| loc.error(&item.key, e))?,
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
            GlobalKey::SchedulerParameters => self.scheduler_parameters(loc, item)?,
            GlobalKey::PreemptType => {
                use crate::config::preempt::PreemptKind;
                cfg.preempt.kind = match item.value.trim() {
                    "preempt/none" => PreemptKind::None,
                    "preempt/partition_prio" => PreemptKind::PartitionPrio,
                    "preempt/qos" => PreemptKind::Qos,
                    _ => {
                        return Err(bad_value(
                            loc,
                            item,
                            "preempt/none, preempt/partition_prio or preempt/qos",
                        ))
                    }
                }
            }
            GlobalKey::PreemptMode => cfg.preempt.mode = super::preempt::preempt_mode(loc, item)?,
            GlobalKey::PreemptExemptTime => {
                cfg.preempt.exempt_time_s = if item.value.trim() == "-1" {
                    None
                } else {
                    // A time limit's grammar; UNLIMITED exempts every job.
                    Some(time_limit(loc, item)?.map_or(u64::MAX, |m| u64::from(m) * 60))
                }
            }
            GlobalKey::PreemptParameters => self.preempt_parameters(loc, item)?,
            GlobalKey::Prolog => cfg.prolog.prolog = Some(non_empty(loc, item, "a program")?),
            GlobalKey::Epilog => cfg.prolog.epilog = Some(non_empty(loc, item, "a program")?),
            GlobalKey::PrologSlurmctld => {
                cfg.prolog.prolog_slurmctld = Some(non_empty(loc, item, "a program")?)
            }
            GlobalKey::EpilogSlurmctld => {
                cfg.prolog.epilog_slurmctld = Some(non_empty(loc, item, "a program")?)
            }
            GlobalKey::PrologFlags => self.prolog_flags(loc, item)?,
            GlobalKey::PrologEpilogTimeout => {
                cfg.prolog.timeout_s = Some(secs_in(loc, item, 0, MAX_TIMEOUT_S)?)
            }
            GlobalKey::PrivateData => self.private_data(loc, item),
            GlobalKey::AccountingStorageEnforce => self.accounting_enforce(loc, item),
            GlobalKey::AuthType => match item.value.as_str() {
                "auth/canopy" | "auth/slurm" | "auth/munge" => {
                    if item.value != "auth/canopy" {
                        self.warn(
                            loc,
                            format_args!(
                                "AuthType={}: canopy signs with its own local signer \
                                 (canopy-authd, like auth/slurm's sackd), not {}",
                                item.value, item.value
                            ),
                        );
                    }
                }
                _ => {
                    return Err(bad_value(
                        loc,
                        item,
                        "auth/canopy, auth/slurm or auth/munge",
                    ))
                }
            },
            GlobalKey::AuthInfo => self.auth_info(loc, item)?,
            GlobalKey::SlurmdParameters => self.slurmd_parameters(loc, item),
            // Handled before `require_set`.
            GlobalKey::SlurmctldParameters => {}
            // Slurm 22.05 ignores 1 with an error and refuses 0 and 2. Files
            // written for older Slurm still set them, and a site moving to canopy
            // should not have to edit its file first: 2 is read as what replaced
            // it, 0 as 1, each with a warning that says so.
            GlobalKey::FastSchedule => match item.value.trim() {
                "1" => self.warn(
                    loc,
                    "Ignoring obsolete FastSchedule=1 option. Please remove from your configuration.",
                ),
                "2" => {
                    self.cfg.config_overrides = true;
                    self.warn(
                        loc,
                        "FastSchedule=2 was removed in Slurm 20.11 (slurmctld 22.05 refuses \
                         it); read as SlurmdParameters=config_overrides, which replaced it: \
                         nodes are scheduled by their slurm.conf lines even where their \
                         hardware is smaller",
                    )
                }
                "0" => self.warn(
                    loc,
                    format_args!(
                        "FastSchedule={} was removed in Slurm 20.11 (slurmctld 22.05 refuses \
                         it); ignored: nodes are scheduled by their slurm.conf lines, and one \
                         whose hardware is smaller is drained, as with FastSchedule=1",
                        item.value.trim()
                    ),
                ),
                _ => return Err(bad_value(loc, item, "0, 1 or 2")),
            },
        }
        if let Some(previous) = self.set_at.insert(key, loc.clone()) {
            self.warn(
                loc,
                format_args!("{name} is set again (previously at {previous}); the last value wins"),
            );
        }
        Ok(())
    }

    /// The first SlurmctldHost is the controller; later ones are backups (kept, shown by
    /// `scontrol show config`, not run: see `resolve_controller`).
    pub(super) fn slurmctld_host(&mut self, loc: &Loc, item: &Item) -> Result<(), ConfigError> {
        let (host, addr) = ctld_host(loc, item)?;
        self.ctld_hosts.push((host, addr, loc.clone()));
        Ok(())
    }

    /// Resolve an attribute key against a section's tables: `Some` for a used attribute,
    /// `None` for a known ignored one (kept in `unread`, value as written), an error for
    /// anything else.
    pub(super) fn attribute<A: Copy>(
        &mut self,
        loc: &Loc,
        section: &'static str,
        used: &[(&'static str, A)],
        unused: &[&'static str],
        item: &Item,
        unread: &mut Unread,
    ) -> Result<Option<A>, ConfigError> {
        if let Some((_, attr)) = lookup(used, &item.key) {
            require_set(loc, item)?;
            return Ok(Some(attr));
        }
        match lookup_name(unused, &item.key) {
            Some(name) => {
                if unread
                    .insert(name, (item.value.trim().to_string(), loc.clone()))
                    .is_some()
                {
                    self.warn_repeated(loc, item);
                }
                Ok(None)
            }
            None => Err(loc.error(
                &item.key,
                format!("unrecognized key '{}' on a {section} line", item.key),
            )),
        }
    }

    pub(super) fn warn_repeated(&mut self, loc: &Loc, item: &Item) {
        self.warn(
            loc,
            format_args!(
                "{} is given more than once on this line; the last value wins",
                item.key
            ),
        );
    }

    pub(super) fn node_spec(&mut self, loc: &Loc, attrs: &[Item]) -> Result<NodeSpec, ConfigError> {
        let mut spec = NodeSpec::default();
        let mut seen = HashSet::new();
        for item in attrs {
            let Some(attr) = self.attribute(
                loc,
                "NodeName",
                NODE_ATTRS,
                UNUSED_NODE_ATTRS,
                item,
                &mut spec.unread,
            )?
            else {
                continue;
            };
            if !seen.insert(attr) {
                self.warn_repeated(loc, item);
            }
            // 0 is read and reset to 1 with a warning, as Slurm does (see `topology`).
            let count = |item: &Item| int_in::<u32>(loc, item, 0, u16::MAX.into());
            match attr {
                NodeAttr::Cpus => spec.cpus = Some(count(item)?),
                NodeAttr::Procs => spec.procs = Some(count(item)?),
                NodeAttr::Boards => spec.boards = Some(count(item)?),
                NodeAttr::Sockets => spec.sockets = Some(count(item)?),
                NodeAttr::SocketsPerBoard => spec.sockets_per_board = Some(count(item)?),
                NodeAttr::CoresPerSocket => spec.cores = Some(count(item)?),
                NodeAttr::ThreadsPerCore => spec.threads = Some(count(item)?),
                NodeAttr::RealMemory => spec.real_memory_mb = Some(mem_mb(loc, item)?),
                NodeAttr::TmpDisk => spec.tmp_disk_mb = Some(mem_mb(loc, item)?),
                NodeAttr::Gres => {
                    // Checked here, where the line is known; names are
                    // checked against GresTypes once the whole file is read.
                    let value = item.value.trim();
                    super::gres::parse_node_gres(value).map_err(|e| {
                        loc.error(&item.key, format!("{}={}: {e}", item.key, item.value))
                    })?;
                    spec.gres = Some(value.to_string());
                }
                NodeAttr::Features => spec.features = Some(comma_list(&item.value)),
                NodeAttr::Feature => spec.feature = Some(comma_list(&item.value)),
                // INFINITE (2^32-1) is kept one below, as Slurm keeps it.
                NodeAttr::Weight => {
                    let w: u32 = int_in(loc, item, 0, u32::MAX.into())?;
                    spec.weight = Some(w.min(u32::MAX - 1))
                }
                NodeAttr::State => spec.state = Some(conf_node_state(loc, item)?),
                NodeAttr::Reason => spec.reason = Some(item.value.clone()),
                NodeAttr::NodeAddr => spec.addr = Some(host_names(loc, item)?),
                NodeAttr::NodeHostname => spec.hostname = Some(host_names(loc, item)?),
                NodeAttr::Port => spec.port = Some(port_list(loc, item)?),
            }
        }
        Ok(spec)
    }

    pub(super) fn node_line(
        &mut self,
        loc: &Loc,
        head: &Item,
        attrs: &[Item],
    ) -> Result<(), ConfigError> {
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
        // Slurm reads Feature, then Features, of the line, then of DEFAULT.
        let features = (spec.feature.clone())
            .or_else(|| spec.features.clone())
            .or_else(|| self.node_defaults.feature.clone())
            .or_else(|| self.node_defaults.features.clone())
            .unwrap_or_default();
        let spec = spec.over(&self.node_defaults);
        self.record_unread("NodeName", value, &spec.unread);
        let topology = self.topology(loc, head, &spec)?;
        let hostnames = per_node(
            loc,
            head,
            "NodeHostname",
            spec.hostname.as_ref(),
            names.len(),
        )?;
        let addrs = per_node(loc, head, "NodeAddr", spec.addr.as_ref(), names.len())?;
        let ports = per_node(loc, head, "Port", spec.port.as_ref(), names.len())?;
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
                dynamic: false,
                vacant: false,
            };
            self.cfg.node_by_name.insert(name, self.cfg.nodes.len());
            self.cfg.nodes.push(node);
            self.cfg.node_ignored.push(
                spec.unread
                    .iter()
                    .map(|(k, (v, _))| (k.to_string(), v.clone()))
                    .collect(),
            );
            self.node_origin
                .push((loc.clone(), pick(ports, i).copied()));
        }
        Ok(())
    }

    pub(super) fn partition_line(
        &mut self,
        loc: &Loc,
        head: &Item,
        attrs: &[Item],
    ) -> Result<(), ConfigError> {
        require_set(loc, head)?;
        let mut spec = PartSpec::default();
        let mut seen = HashSet::new();
        for item in attrs {
            if let Some(done) = self.partition_priority(loc, &head.value, item) {
                done?;
                continue;
            }
            if let Some(done) = self.partition_opt(loc, item, &mut spec.opts) {
                done?;
                continue;
            }
            let Some(attr) = self.attribute(
                loc,
                "PartitionName",
                PART_ATTRS,
                UNUSED_PART_ATTRS,
                item,
                &mut spec.unread,
            )?
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
                PartAttr::PreemptMode => {
                    spec.preempt_mode = Some(super::preempt::preempt_mode(loc, item)?)
                }
                PartAttr::GraceTime => spec.grace_s = Some(int_in(loc, item, 0, u32::MAX.into())?),
                PartAttr::AllowAccounts => spec.access.allow_accounts = access_names(&item.value),
                PartAttr::DenyAccounts => {
                    spec.access.deny_accounts = access_names(&item.value).unwrap_or_default()
                }
                PartAttr::AllowQos => spec.access.allow_qos = access_names(&item.value),
                PartAttr::DenyQos => {
                    spec.access.deny_qos = access_names(&item.value).unwrap_or_default()
                }
                PartAttr::Qos => {
                    spec.access.qos =
                        Some(item.value.trim().to_lowercase()).filter(|q| !q.is_empty())
                }
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
        let mut spec = spec.over(&self.part_defaults);
        self.part_aliases_and_conflicts(loc, name, &mut spec);
        self.record_unread("PartitionName", name, &spec.unread);
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
                preempt: crate::config::preempt::PartPreempt {
                    mode: spec.preempt_mode,
                    grace_s: spec.grace_s.unwrap_or(0),
                },
                access: spec.access,
                opts: spec.opts.finish(),
                dynamic_join: Default::default(),
            },
            nodes: spec.nodes,
            loc: loc.clone(),
        });
        Ok(())
    }

    pub(super) fn down_line(
        &mut self,
        loc: &Loc,
        head: &Item,
        attrs: &[Item],
    ) -> Result<(), ConfigError> {
        require_set(loc, head)?;
        let names = host_names(loc, head)?;
        let mut state = Some(ConfNodeState::Down);
        let mut reason = None;
        for item in attrs {
            let Some(attr) =
                self.attribute(loc, "DownNodes", DOWN_ATTRS, &[], item, &mut Unread::new())?
            else {
                continue;
            };
            match attr {
                DownAttr::State => match down_state(&item.value) {
                    Ok(s) => state = s,
                    // Slurm logs it and skips the line.
                    Err(()) => {
                        self.warn(loc, format_args!("Invalid State \"{}\"", item.value.trim()));
                        return Ok(());
                    }
                },
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

    pub(super) fn nodeset_line(
        &mut self,
        loc: &Loc,
        head: &Item,
        attrs: &[Item],
    ) -> Result<(), ConfigError> {
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
            let Some(attr) =
                self.attribute(loc, "NodeSet", NODESET_ATTRS, &[], item, &mut Unread::new())?
            else {
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
}

/// Partition `Nodes=`: a hostlist (possibly naming `ALL` or node sets); `""` means none.
pub(super) fn partition_nodes(loc: &Loc, item: &Item) -> Result<Listed<String>, ConfigError> {
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

pub(super) fn max_nodes(loc: &Loc, item: &Item) -> Result<Option<u32>, ConfigError> {
    let value = item.value.trim();
    if value.eq_ignore_ascii_case("UNLIMITED") || value.eq_ignore_ascii_case("INFINITE") {
        return Ok(None);
    }
    digits(value)
        .and_then(|n| u32::try_from(n).ok())
        .map(Some)
        .ok_or_else(|| bad_value(loc, item, "an integer or UNLIMITED"))
}

/// A DownNodes line's State, as Slurm reads it: any node state name; UNKNOWN and the
/// states only running jobs make (IDLE, ALLOCATED, ...) leave the node's state alone
/// (`None`), since canopy starts every node UNKNOWN until it registers.
pub(super) fn down_state(value: &str) -> Result<Option<ConfNodeState>, ()> {
    Ok(Some(match value.trim().to_ascii_uppercase().as_str() {
        "DOWN" => ConfNodeState::Down,
        "DRAIN" => ConfNodeState::Drain,
        "FAIL" | "FAILING" => ConfNodeState::Fail,
        "FUTURE" => ConfNodeState::Future,
        "CLOUD" => ConfNodeState::Cloud,
        "UNKNOWN" | "IDLE" | "ALLOCATED" | "ALLOC" | "MIXED" | "COMPLETING" => return Ok(None),
        _ => return Err(()),
    }))
}

/// A per-node attribute list must hold one value (shared by all) or one per node.
pub(super) fn per_node<'a, T>(
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
pub(super) fn pick<T>(list: Option<&[T]>, i: usize) -> Option<&T> {
    match list? {
        [one] => Some(one),
        all => all.get(i),
    }
}
