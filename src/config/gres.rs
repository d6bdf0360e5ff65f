//! Generic resources as configured: slurm.conf's node `Gres=` and the
//! `gres.conf` beside slurm.conf, merged per node into the inventory the
//! controller allocates from ([`NodeGres`]: devices with node-local indices,
//! count-only pools, the AutoDetect mode, and per-node problems).
//!
//! Slurm's rules (22.05, `src/common/gres.c`): slurm.conf says how many of
//! each GRES a node has; gres.conf lines say which devices make up that count
//! (files, cores, links). gres.conf lines are taken in order for each
//! slurm.conf item of the same name (and type, when the item has one); a line
//! with more than is needed is cut down, a line left over is ignored with a
//! warning. A node whose slurm.conf count is not met by its gres.conf lines
//! cannot offer what slurm.conf promises: Slurm's controller then marks it
//! invalid ("gres/gpu count reported lower than configured"); here that is a
//! [`NodeGres::problems`] entry the controller turns into a drain reason.
//! Nodes with `AutoDetect=nvml|rsmi|oneapi` are left for the node daemon to
//! complete at registration.
//!
//! Does not: read devices or NVML (the node daemon does), or decide what a job
//! gets (placement does).

use std::collections::{HashMap, HashSet};
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::parse::{self, Item, Loc};
use super::types::{Config, ConfigError};
use super::{hostlist, ConfNodeState};

/// The most devices one gres.conf `File=` may name (Slurm's MAX_GRES_BITMAP).
const MAX_FILES: usize = 1024;

/// GRES names whose units are shares of a device (a count per file), not
/// devices: their File= count may differ from Count=.
const SHARED: &[&str] = &["mps", "shard"];

/// How the node daemon finds GPUs by itself (`AutoDetect=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum AutoDetect {
    /// NVIDIA's management library.
    Nvml,
    /// AMD's ROCm SMI.
    Rsmi,
    /// Intel's oneAPI level zero.
    Oneapi,
    /// Explicitly off (gres.conf only).
    Off,
}

impl AutoDetect {
    pub fn parse(text: &str) -> Option<AutoDetect> {
        Some(match text.trim().to_ascii_lowercase().as_str() {
            "nvml" => AutoDetect::Nvml,
            "rsmi" => AutoDetect::Rsmi,
            "oneapi" => AutoDetect::Oneapi,
            "off" => AutoDetect::Off,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            AutoDetect::Nvml => "nvml",
            AutoDetect::Rsmi => "rsmi",
            AutoDetect::Oneapi => "oneapi",
            AutoDetect::Off => "off",
        }
    }

    /// Whether the node daemon is to look for devices.
    pub fn detects(self) -> bool {
        self != AutoDetect::Off
    }
}

/// gres.conf `Flags=`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GresConfFlags {
    /// `CountOnly`: no device plugin; only the count matters.
    pub count_only: bool,
    /// `one_sharing` / `all_sharing` (mps, shard).
    pub one_sharing: bool,
    pub all_sharing: bool,
    /// Which device-visibility variables tasks get. For `gpu` without any
    /// env flag all four are set, as Slurm does; `no_gpu_env` clears them.
    pub nvidia_env: bool,
    pub amd_env: bool,
    pub intel_env: bool,
    pub opencl_env: bool,
    /// `explicit` (later Slurm): only jobs that name it get it.
    pub explicit: bool,
}

impl GresConfFlags {
    fn any_env(&self) -> bool {
        self.nvidia_env || self.amd_env || self.intel_env || self.opencl_env
    }
}

/// One device a node has: a GPU, or any GRES with `File=`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GresDevice {
    pub name: String,
    pub type_: Option<String>,
    /// Node-local index among this node's devices of the same name, in the
    /// order Slurm numbers them (slurm.conf item order, then gres.conf line
    /// order, then file order); what `IDX:` and SLURM_JOB_GPUS show.
    pub index: u32,
    /// Device file (`/dev/nvidia0`); `None` for a GPU slurm.conf counts but
    /// no gres.conf line names.
    pub file: Option<String>,
    /// `MultipleFiles=`: every file of a device that has several (MIG).
    pub extra_files: Vec<String>,
    /// Abstract core ids local to the device (`Cores=`, or `CPUs=` turned
    /// into cores); `None`: any core.
    pub cores: Option<Vec<u32>>,
    pub links: Option<String>,
    pub flags: GresConfFlags,
}

/// A GRES that is only a count: `bandwidth:no_consume:4G`, licenses-like
/// resources, or shares of devices (mps, shard).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GresPool {
    pub name: String,
    pub type_: Option<String>,
    pub count: u64,
    /// `no_consume`: every job may use it, none uses it up.
    pub no_consume: bool,
    /// Device files behind the shares (mps/shard with `File=`).
    pub files: Vec<String>,
    pub cores: Option<Vec<u32>>,
    pub flags: GresConfFlags,
}

/// One item of slurm.conf's node `Gres=`: `gpu:a100:4`, `bw:no_consume:4G`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeGresItem {
    pub name: String,
    pub type_: Option<String>,
    pub count: u64,
    pub no_consume: bool,
}

/// Everything one node has, as configured.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeGres {
    /// slurm.conf's `Gres=` for the node, names checked against GresTypes.
    pub configured: Vec<NodeGresItem>,
    pub devices: Vec<GresDevice>,
    pub pools: Vec<GresPool>,
    /// `AutoDetect=` for this node (its own NodeName line, else the global
    /// one); with a detecting value the node daemon fills in GPUs at
    /// registration and GPU counts gres.conf does not cover are not problems.
    pub autodetect: Option<AutoDetect>,
    /// Why this node cannot offer what slurm.conf says (Slurm marks such a
    /// node invalid); the controller makes these a drain reason.
    pub problems: Vec<String>,
}

impl NodeGres {
    /// Whether the node daemon is expected to report GPUs it detects.
    pub fn detects(&self) -> bool {
        self.autodetect.is_some_and(AutoDetect::detects)
    }

    /// Devices of `name` (any type when `type_` is `None`).
    pub fn devices_of<'a>(
        &'a self,
        name: &'a str,
        type_: Option<&'a str>,
    ) -> impl Iterator<Item = &'a GresDevice> + 'a {
        self.devices
            .iter()
            .filter(move |d| d.name == name && type_.is_none_or(|t| d.type_.as_deref() == Some(t)))
    }

    /// How many of `name` (of `type_`, or any) the node has in all.
    pub fn total(&self, name: &str, type_: Option<&str>) -> u64 {
        let pools: u64 = self
            .pools
            .iter()
            .filter(|p| p.name == name && type_.is_none_or(|t| p.type_.as_deref() == Some(t)))
            .map(|p| p.count)
            .sum();
        self.devices_of(name, type_).count() as u64 + pools
    }
}

/// All nodes' GRES, index-aligned with [`Config::nodes`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GresConfig {
    /// The gres.conf read, if there was one.
    pub path: Option<std::path::PathBuf>,
    /// The global `AutoDetect=` line's value.
    pub autodetect: Option<AutoDetect>,
    pub nodes: Vec<NodeGres>,
}

impl Config {
    /// The GRES inventory of the node at `index` in [`Config::nodes`].
    pub fn node_gres(&self, index: usize) -> Option<&NodeGres> {
        self.gres.nodes.get(index)
    }
}

/// Where gres.conf comes from for a load.
pub(super) enum GresSource<'a> {
    /// `gres.conf` in slurm.conf's directory, if it exists.
    Beside,
    /// This text as if it were that file (tests, tools).
    Text(&'a str, &'a Path),
    /// None at all.
    Absent,
}

/// One slurm.conf `Gres=` value: `name[:type][:no_consume][:count]`, comma
/// separated, each count with an optional K/M/G/T/P suffix; empty (or `""`)
/// means none. The error is Slurm's "Bad GRES configuration" for the item.
pub fn parse_node_gres(text: &str) -> Result<Vec<NodeGresItem>, String> {
    let mut out: Vec<NodeGresItem> = Vec::new();
    for item in text.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let bad = || format!("Bad GRES configuration: {item}");
        // `gpu:2(S:0-1)`: the socket part is an old form; Slurm ignores it.
        let body = item.split('(').next().unwrap_or(item);
        let mut parts: Vec<&str> = body.split(':').collect();
        let name = parts.remove(0);
        if !name_ok(name) {
            return Err(bad());
        }
        let mut no_consume = false;
        parts.retain(|p| {
            let nc = p.eq_ignore_ascii_case("no_consume");
            no_consume |= nc;
            !nc
        });
        let (type_, count) = match parts.as_slice() {
            [] => (None, 1),
            [one] => match suffixed(one) {
                Some(n) => (None, n),
                // A type and no count means one (Slurm: "gpu:tesla"); a
                // field starting with a digit is a count, as Slurm reads it.
                None if name_ok(one) && !one.starts_with(|c: char| c.is_ascii_digit()) => {
                    (Some(one.to_string()), 1)
                }
                None => return Err(bad()),
            },
            [t, n] if name_ok(t) => (Some(t.to_string()), suffixed(n).ok_or_else(bad)?),
            _ => return Err(bad()),
        };
        out.push(NodeGresItem {
            name: name.to_string(),
            type_,
            count,
            no_consume,
        });
    }
    Ok(out)
}

fn name_ok(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

/// `4`, `4K`, `4G`: powers of 1024, as Slurm's suffix_mult.
fn suffixed(text: &str) -> Option<u64> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, suffix) = text.split_at(split);
    if digits.is_empty() {
        return None;
    }
    let shift = match suffix.to_ascii_uppercase().as_str() {
        "" => 0,
        "K" => 10,
        "M" => 20,
        "G" => 30,
        "T" => 40,
        "P" => 50,
        _ => return None,
    };
    digits.parse::<u64>().ok()?.checked_mul(1u64 << shift)
}

/// One gres.conf line, read and checked on its own.
#[derive(Debug, Clone)]
struct ConfLine {
    loc: Loc,
    /// `NodeName=` expanded; `None`: every node. A set: every node of a
    /// large cluster asks whether it is named.
    nodes: Option<HashSet<String>>,
    name: String,
    type_: Option<String>,
    files: Vec<String>,
    multiple_files: bool,
    count: u64,
    cores: Option<Vec<u32>>,
    /// `CPUs=` (deprecated): CPU ids, turned into cores per node.
    cpus: Option<Vec<u32>>,
    links: Option<String>,
    flags: GresConfFlags,
    /// Whether Flags= set env flags (or no_gpu_env) explicitly.
    env_given: bool,
}

/// gres.conf parsed: its lines and AutoDetect settings.
#[derive(Debug, Default)]
struct GresFile {
    lines: Vec<ConfLine>,
    global_autodetect: Option<AutoDetect>,
    /// `NodeName=... AutoDetect=...`: per-node settings, in file order.
    node_autodetect: Vec<(HashSet<String>, AutoDetect, Loc)>,
    warnings: Vec<String>,
}

const KEYS: &[&str] = &[
    "NodeName",
    "Name",
    "Type",
    "File",
    "Files",
    "MultipleFiles",
    "Count",
    "Cores",
    "CPUs",
    "Links",
    "Link",
    "Flags",
    "AutoDetect",
];

fn get<'a>(items: &'a [Item], key: &str) -> Option<&'a Item> {
    items.iter().rev().find(|i| i.key.eq_ignore_ascii_case(key))
}

fn read_file(text: &str, path: &Path, gres_types: &[String]) -> Result<GresFile, ConfigError> {
    let mut out = GresFile::default();
    for line in parse::read_lines(text, path)? {
        read_line(&line.loc, &line.items, gres_types, &mut out)?;
    }
    Ok(out)
}

fn read_line(
    loc: &Loc,
    items: &[Item],
    gres_types: &[String],
    out: &mut GresFile,
) -> Result<(), ConfigError> {
    for item in items {
        if !KEYS.iter().any(|k| k.eq_ignore_ascii_case(&item.key)) {
            out.warnings.push(format!(
                "{loc}: gres.conf key {} is not known; ignored",
                item.key
            ));
        }
    }
    let bad = |item: &Item, what: String| {
        loc.error(&item.key, format!("{}={}: {what}", item.key, item.value))
    };
    let nodes: Option<HashSet<String>> = match get(items, "NodeName") {
        Some(i) => Some(
            hostlist::expand(&i.value)
                .map_err(|e| bad(i, format!("expected a hostlist ({e})")))?
                .into_iter()
                .collect(),
        ),
        None => None,
    };
    if let Some(i) = get(items, "AutoDetect") {
        let mode = AutoDetect::parse(&i.value);
        match (mode, &nodes) {
            (None, _) => out.warnings.push(format!(
                "{loc}: unknown autodetect flag '{}' (expected nvml, rsmi, oneapi or off); ignored",
                i.value
            )),
            (Some(m), Some(n)) => out.node_autodetect.push((n.clone(), m, loc.clone())),
            // Slurm: a global AutoDetect line only counts when it carries
            // nothing else; with Name= and no NodeName it needs NodeName.
            (Some(m), None) if get(items, "Name").is_none() => {
                out.global_autodetect = Some(m);
            }
            (Some(_), None) => out.warnings.push(format!(
                "{loc}: In-line AutoDetect requires NodeName to take effect; ignored"
            )),
        }
    }
    let Some(name_item) = get(items, "Name") else {
        if get(items, "AutoDetect").is_none() {
            out.warnings.push(format!(
                "{loc}: Invalid GRES data, no type name (Name= missing); line ignored"
            ));
        }
        return Ok(());
    };
    let name = name_item.value.trim().to_string();
    if !name_ok(&name) {
        return Err(bad(name_item, "expected a GRES name".into()));
    }
    if !gres_types.iter().any(|t| t.eq_ignore_ascii_case(&name)) {
        // Slurm's node daemon logs this and goes on without the line.
        out.warnings.push(format!(
            "{loc}: Ignoring gres.conf record, invalid name: {name} (not in slurm.conf GresTypes)"
        ));
        return Ok(());
    }
    let type_ = get(items, "Type")
        .map(|i| i.value.trim().to_string())
        .filter(|t| !t.is_empty());
    let file_item = get(items, "File").or_else(|| get(items, "Files"));
    let multi_item = get(items, "MultipleFiles");
    if let (Some(_), Some(m)) = (file_item, multi_item) {
        return Err(bad(
            m,
            "File and MultipleFiles options are mutually exclusive".into(),
        ));
    }
    let expand_files = |i: &Item| -> Result<Vec<String>, ConfigError> {
        let files =
            hostlist::expand(&i.value).map_err(|e| bad(i, format!("can't parse File ({e})")))?;
        if files.is_empty() {
            return Err(bad(i, "expected one or more device files".into()));
        }
        if files.len() > MAX_FILES {
            return Err(bad(i, format!("more than {MAX_FILES} files")));
        }
        Ok(files)
    };
    let (files, multiple_files) = match (file_item, multi_item) {
        (Some(i), _) => (expand_files(i)?, false),
        (None, Some(m)) => {
            let files = expand_files(m)?;
            if files.len() < 2 {
                return Err(bad(
                    m,
                    "MultipleFiles does not contain multiple files. Use File instead".into(),
                ));
            }
            (files, true)
        }
        (None, None) => (Vec::new(), false),
    };
    let shared = SHARED.iter().any(|s| s.eq_ignore_ascii_case(&name));
    // One device per file (a MultipleFiles line is one device).
    let from_files = match (files.is_empty(), multiple_files) {
        (true, _) => None,
        (false, true) => Some(1),
        (false, false) => Some(files.len() as u64),
    };
    let count = match get(items, "Count") {
        Some(i) => {
            let n = suffixed(&i.value)
                .ok_or_else(|| bad(i, format!("Invalid GRES record for {name}, invalid count")))?;
            if let Some(f) = from_files {
                if f != n && !shared {
                    return Err(bad(
                        i,
                        format!(
                            "Invalid GRES record for {name}, count does not match File value \
                             ({f} file{})",
                            if f == 1 { "" } else { "s" }
                        ),
                    ));
                }
            }
            n
        }
        None => from_files.unwrap_or(1),
    };
    let ids = |key: &str| -> Result<Option<Vec<u32>>, ConfigError> {
        match get(items, key) {
            None => Ok(None),
            Some(i) => crate::model::tres::parse_ranges(&i.value)
                .map(Some)
                .ok_or_else(|| bad(i, "expected id ranges such as 0-15,32".into())),
        }
    };
    let cores = ids("Cores")?;
    let cpus = if cores.is_none() { ids("CPUs")? } else { None };
    let links = match get(items, "Links").or_else(|| get(items, "Link")) {
        Some(i) if links_ok(&i.value) => Some(i.value.trim().to_string()),
        Some(i) => {
            out.warnings.push(format!(
                "{loc}: gres.conf: Ignoring invalid Links={} for Name={name}",
                i.value
            ));
            None
        }
        None => None,
    };
    let (flags, env_given) = match get(items, "Flags") {
        Some(i) => parse_flags(loc, i, &name, type_.as_deref(), &mut out.warnings)?,
        None => (GresConfFlags::default(), false),
    };
    out.lines.push(ConfLine {
        loc: loc.clone(),
        nodes,
        name,
        type_,
        files,
        multiple_files,
        count,
        cores,
        cpus,
        links,
        flags,
        env_given,
    });
    Ok(())
}

/// `Links=-1,16,16,0`: one entry per GPU, exactly one `-1` (the device
/// itself), each between -2 and Slurm's GRES_MAX_LINK.
fn links_ok(text: &str) -> bool {
    let mut selves = 0;
    for tok in text.split(',') {
        match tok.trim().parse::<i64>() {
            Ok(-1) => selves += 1,
            Ok(v) if (-2..=1023).contains(&v) => {}
            _ => return false,
        }
    }
    selves == 1
}

fn parse_flags(
    loc: &Loc,
    item: &Item,
    name: &str,
    type_: Option<&str>,
    warnings: &mut Vec<String>,
) -> Result<(GresConfFlags, bool), ConfigError> {
    let mut f = GresConfFlags::default();
    let mut no_gpu_env = false;
    for tok in item
        .value
        .split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
    {
        match tok.to_ascii_lowercase().as_str() {
            "countonly" => f.count_only = true,
            "one_sharing" => f.one_sharing = true,
            "all_sharing" => f.all_sharing = true,
            "nvidia_gpu_env" => f.nvidia_env = true,
            "amd_gpu_env" => f.amd_env = true,
            "intel_gpu_env" => f.intel_env = true,
            "opencl_env" => f.opencl_env = true,
            "no_gpu_env" => no_gpu_env = true,
            "explicit" => f.explicit = true,
            _ => warnings.push(format!(
                "{loc}: gres.conf Flags: unknown flag '{tok}' for Name={name}; ignored"
            )),
        }
    }
    if no_gpu_env && f.any_env() {
        return Err(loc.error(
            &item.key,
            format!(
                "Invalid GRES record name={name} type={}: Flags ({}) contains \"no_gpu_env\", \
                 which must be mutually exclusive to all other GRES env flags",
                type_.unwrap_or("(null)"),
                item.value
            ),
        ));
    }
    Ok((f, no_gpu_env || f.any_env()))
}

/// Fill in `cfg.gres` from the nodes' `Gres=` and gres.conf. `origins[i]`
/// is where node `i` was defined (for warnings).
pub(super) fn resolve(
    cfg: &mut Config,
    origins: &[Loc],
    source: GresSource<'_>,
) -> Result<(), ConfigError> {
    let beside;
    let (text, path) = match source {
        GresSource::Absent => (None, None),
        GresSource::Text(t, p) => (Some(t.to_string()), Some(p.to_path_buf())),
        GresSource::Beside => {
            beside = cfg.path.parent().unwrap_or(Path::new("")).join("gres.conf");
            match std::fs::read_to_string(&beside) {
                Ok(t) => (Some(t), Some(beside.clone())),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => (None, None),
                // Commands read the configuration too, as any user; a
                // gres.conf only root may read (Slurm's clients never read
                // it) must not stop them. The inventory is then slurm.conf's.
                Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                    cfg.warnings.push(format!(
                        "{}: cannot read ({e}); GRES as slurm.conf alone gives them",
                        beside.display()
                    ));
                    (None, None)
                }
                Err(e) => {
                    return Err(ConfigError {
                        file: beside.clone(),
                        line: 0,
                        key: String::new(),
                        message: format!("cannot read {}: {e}", beside.display()),
                    })
                }
            }
        }
    };
    let file = match (&text, &path) {
        (Some(t), Some(p)) => read_file(t, p, &cfg.gres_types)?,
        _ => GresFile::default(),
    };
    let mut warnings = file.warnings.clone();
    let mut nodes = Vec::with_capacity(cfg.nodes.len());
    // Lines naming nodes explicitly whose records some node did not use:
    // line index -> (leftover description, nodes).
    let mut unused: HashMap<usize, Vec<(String, String)>> = HashMap::new();
    // (where the node was defined, GRES name) -> nodes, for one warning per
    // line as Slurm gives one per NodeName line.
    let mut rejected: Vec<(String, String, Vec<String>)> = Vec::new();
    for (i, node) in cfg.nodes.iter().enumerate() {
        let (configured, unknown) = node_items(cfg, node);
        let at = origins.get(i).map(|l| l.to_string()).unwrap_or_default();
        for name in unknown {
            match rejected.iter_mut().find(|(a, n, _)| *a == at && *n == name) {
                Some((_, _, nodes)) => nodes.push(node.name.clone()),
                None => rejected.push((at.clone(), name, vec![node.name.clone()])),
            }
        }
        let local: Vec<AutoDetect> = file
            .node_autodetect
            .iter()
            .filter(|(names, _, _)| names.contains(&node.name))
            .map(|(_, m, _)| *m)
            .collect();
        let autodetect = local.first().copied().or(file.global_autodetect);
        let mut g = NodeGres {
            configured,
            autodetect,
            ..NodeGres::default()
        };
        // Slurm's node daemon refuses to start on this.
        if local.iter().any(|m| Some(*m) != autodetect) {
            g.problems.push(
                "gres.conf: duplicate node-local AutoDetect specification does not match the first"
                    .into(),
            );
        }
        merge_node(node, &file.lines, &mut g, &mut unused);
        if node.state == ConfNodeState::Cloud && g.detects() {
            g.problems.push(format!(
                "Cannot use AutoDetect on cloud node \"{}\"",
                node.name
            ));
        }
        nodes.push(g);
    }
    for (at, name, ns) in rejected {
        warnings.push(format!(
            "{at}: Invalid GRES configured on node {}: {name} (not in GresTypes); ignored",
            hostlist::compress(&ns)
        ));
    }
    let mut leftover: Vec<_> = unused.into_iter().collect();
    leftover.sort_by_key(|(line, _)| *line);
    for (line, entries) in leftover {
        let mut by_what: Vec<(String, Vec<String>)> = Vec::new();
        for (what, node) in entries {
            match by_what.iter_mut().find(|(w, _)| *w == what) {
                Some((_, ns)) => ns.push(node),
                None => by_what.push((what, vec![node])),
            }
        }
        for (what, ns) in by_what {
            warnings.push(format!(
                "{}: A line in gres.conf for GRES {what} than expected in slurm.conf \
                 (nodes {}). Ignoring extra GRES.",
                file.lines[line].loc,
                hostlist::compress(&ns)
            ));
        }
    }
    cfg.warnings.extend(warnings);
    cfg.gres = GresConfig {
        path: text.and(path),
        autodetect: file.global_autodetect,
        nodes,
    };
    Ok(())
}

/// A node's slurm.conf `Gres=` items whose names are in GresTypes, and the
/// names of those that are not (Slurm's controller drops them with an error).
fn node_items(cfg: &Config, node: &super::NodeConf) -> (Vec<NodeGresItem>, Vec<String>) {
    // build.rs has checked the syntax, so this cannot fail; were it to, the
    // node simply has no GRES rather than the configuration failing.
    let items = parse_node_gres(&node.gres).unwrap_or_default();
    let (known, unknown): (Vec<_>, Vec<_>) = items.into_iter().partition(|it| {
        cfg.gres_types
            .iter()
            .any(|t| t.eq_ignore_ascii_case(&it.name))
    });
    (known, unknown.into_iter().map(|it| it.name).collect())
}

/// A gres.conf record as consumed for one node: what is left of it.
struct Record<'a> {
    line: usize,
    conf: &'a ConfLine,
    /// Files (devices) not yet given to a slurm.conf item.
    files: Vec<String>,
    /// Count not yet given.
    count: u64,
    flags: GresConfFlags,
    cores: Option<Vec<u32>>,
}

fn merge_node(
    node: &super::NodeConf,
    lines: &[ConfLine],
    g: &mut NodeGres,
    unused: &mut HashMap<usize, Vec<(String, String)>>,
) {
    let total_cores = node.sockets.saturating_mul(node.cores_per_socket);
    let threads = node.threads_per_core.max(1);
    let mut records: Vec<Record> = Vec::new();
    // Env flags carry over from one line to the next of the same name, as
    // in Slurm; a gpu line without any gets all of them.
    let mut prev_env: Option<(String, GresConfFlags)> = None;
    for (li, l) in lines.iter().enumerate() {
        if l.nodes.as_ref().is_some_and(|n| !n.contains(&node.name)) {
            continue;
        }
        let mut flags = l.flags;
        match &prev_env {
            Some((n, f)) if !l.env_given && n.eq_ignore_ascii_case(&l.name) => {
                flags.nvidia_env = f.nvidia_env;
                flags.amd_env = f.amd_env;
                flags.intel_env = f.intel_env;
                flags.opencl_env = f.opencl_env;
            }
            _ if !l.env_given && l.name.eq_ignore_ascii_case("gpu") => {
                flags.nvidia_env = true;
                flags.amd_env = true;
                flags.intel_env = true;
                flags.opencl_env = true;
            }
            _ => {}
        }
        if l.env_given || l.name.eq_ignore_ascii_case("gpu") {
            if let Some((n, f)) = &prev_env {
                if l.env_given
                    && n.eq_ignore_ascii_case(&l.name)
                    && (f.nvidia_env, f.amd_env, f.intel_env, f.opencl_env)
                        != (
                            flags.nvidia_env,
                            flags.amd_env,
                            flags.intel_env,
                            flags.opencl_env,
                        )
                {
                    g.problems.push(format!(
                        "{}: Invalid GRES record name={}: Flags does not match env flags \
                         for previous GRES of same node and name",
                        l.loc, l.name
                    ));
                }
            }
            prev_env = Some((l.name.clone(), flags));
        }
        let cores = match (&l.cores, &l.cpus) {
            (Some(c), _) => Some(c.clone()),
            // Abstract CPU ids run core by core, `threads` to a core.
            (None, Some(cpus)) => {
                let mut c: Vec<u32> = cpus.iter().map(|id| id / threads).collect();
                c.dedup();
                Some(c)
            }
            (None, None) => None,
        };
        if let Some(c) = &cores {
            if c.last().is_some_and(|&max| max >= total_cores) {
                let key = if l.cores.is_some() { "Cores" } else { "CPUs" };
                g.problems.push(format!(
                    "{}: Invalid GRES data for {}, {key}={} (only {total_cores} cores are available)",
                    l.loc,
                    l.name,
                    crate::model::tres::ranges(c)
                ));
                continue;
            }
        }
        records.push(Record {
            line: li,
            conf: l,
            files: l.files.clone(),
            count: l.count,
            flags,
            cores,
        });
    }
    check_consistency(&records, g);
    let mut next_index: HashMap<String, u32> = HashMap::new();
    let detects = g.detects();
    for item in g.configured.clone() {
        let mut need = item.count;
        let mut got = 0u64;
        for r in records.iter_mut().filter(|r| {
            r.conf.name.eq_ignore_ascii_case(&item.name)
                && r.count > 0
                && match &item.type_ {
                    Some(t) => r
                        .conf
                        .type_
                        .as_deref()
                        .is_some_and(|rt| rt.eq_ignore_ascii_case(t)),
                    None => true,
                }
        }) {
            if need == 0 {
                break;
            }
            let take = need.min(r.count);
            // An untyped slurm.conf item makes the devices untyped (Slurm
            // clears the gres.conf Type when matching an untyped item).
            let type_ = item.type_.clone();
            if is_device(&item.name, r) {
                let per_device = if r.conf.multiple_files {
                    r.files.len()
                } else {
                    1
                };
                for _ in 0..take {
                    let idx = next_index.entry(item.name.clone()).or_insert(0);
                    let mut files: Vec<String> =
                        r.files.drain(..per_device.min(r.files.len())).collect();
                    let file = (!files.is_empty()).then(|| files.remove(0));
                    g.devices.push(GresDevice {
                        name: item.name.clone(),
                        type_: type_.clone(),
                        index: *idx,
                        file,
                        extra_files: files,
                        cores: r.cores.clone(),
                        links: r.conf.links.clone(),
                        flags: r.flags,
                    });
                    *idx += 1;
                }
            } else {
                g.pools.push(GresPool {
                    name: item.name.clone(),
                    type_,
                    count: take,
                    no_consume: item.no_consume,
                    files: std::mem::take(&mut r.files),
                    cores: r.cores.clone(),
                    flags: r.flags,
                });
            }
            r.count -= take;
            need -= take;
            got += take;
        }
        if need == 0 {
            continue;
        }
        let described = match &item.type_ {
            Some(t) => format!("{}:{t}", item.name),
            None => item.name.clone(),
        };
        let file_backed = records
            .iter()
            .any(|r| r.conf.name.eq_ignore_ascii_case(&item.name) && !r.conf.files.is_empty());
        let gpu = item.name.eq_ignore_ascii_case("gpu");
        if gpu && detects {
            // The node daemon reports what it finds; the controller merges.
            continue;
        }
        if file_backed {
            g.problems.push(format!(
                "gres/{described} count reported lower than configured ({got} < {})",
                item.count
            ));
            continue;
        }
        // No gres.conf line: count-only, as Slurm without gres.conf. GPUs
        // still get indices (jobs see IDX and SLURM_JOB_GPUS).
        if gpu && need <= MAX_FILES as u64 {
            for _ in 0..need {
                let idx = next_index.entry(item.name.clone()).or_insert(0);
                g.devices.push(GresDevice {
                    name: item.name.clone(),
                    type_: item.type_.clone(),
                    index: *idx,
                    file: None,
                    extra_files: Vec::new(),
                    cores: None,
                    links: None,
                    flags: GresConfFlags {
                        nvidia_env: true,
                        amd_env: true,
                        intel_env: true,
                        opencl_env: true,
                        ..GresConfFlags::default()
                    },
                });
                *idx += 1;
            }
        } else {
            g.pools.push(GresPool {
                name: item.name.clone(),
                type_: item.type_.clone(),
                count: need,
                no_consume: item.no_consume,
                files: Vec::new(),
                cores: None,
                flags: GresConfFlags::default(),
            });
        }
    }
    for r in &records {
        // Left over: more than slurm.conf asks for. Only lines that name
        // nodes explicitly are reported (a line for every node is expected
        // to go unused on nodes without that GRES).
        if r.count > 0 && r.conf.nodes.is_some() {
            let what = match &r.conf.type_ {
                Some(t) => format!("{}:{t} has {} more configured", r.conf.name, r.count),
                None => format!("{} has {} more configured", r.conf.name, r.count),
            };
            unused
                .entry(r.line)
                .or_default()
                .push((what, node.name.clone()));
        }
    }
}

/// Devices get indices: GPUs and anything file-backed, except shares.
fn is_device(name: &str, r: &Record) -> bool {
    let shared = SHARED.iter().any(|s| s.eq_ignore_ascii_case(name));
    !shared && (!r.conf.files.is_empty() || name.eq_ignore_ascii_case("gpu"))
}

/// Slurm's node daemon refuses to start when one name's lines mix File= and
/// no File=, or Type= and no Type=, or repeat an untyped file-less line.
fn check_consistency(records: &[Record], g: &mut NodeGres) {
    let mut seen: Vec<&str> = Vec::new();
    for r in records {
        let name = r.conf.name.as_str();
        if seen.iter().any(|s| s.eq_ignore_ascii_case(name)) {
            continue;
        }
        seen.push(name);
        let same: Vec<&Record> = records
            .iter()
            .filter(|o| o.conf.name.eq_ignore_ascii_case(name))
            .collect();
        let files = same.iter().filter(|o| !o.conf.files.is_empty()).count();
        let types = same.iter().filter(|o| o.conf.type_.is_some()).count();
        if files != 0 && files != same.len() {
            g.problems.push(format!(
                "gres.conf for {name}, some records have \"File\" specification while others do not"
            ));
        }
        if types != 0 && types != same.len() {
            g.problems.push(format!(
                "gres.conf for {name}, some records have \"Type=\" specification while others do not"
            ));
        }
        if files == 0 && types == 0 && same.len() > 1 {
            g.problems
                .push(format!("gres.conf duplicate records for {name}"));
        }
    }
}

#[cfg(test)]
mod tests;
