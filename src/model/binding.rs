//! The user-facing binding options of a job step, as srun takes them:
//! `--cpu-bind`, `-m/--distribution` and `--gpu-bind`. Parsing, printing
//! back (the form Slurm puts in `SLURM_CPU_BIND`, `SLURM_DISTRIBUTION`, ...)
//! and serde, because they travel in launch messages.
//!
//! What a binding *means* on a given node (which CPUs each task gets) is
//! computed in `exec::bind`; this file only owns the grammar. Errors name
//! what was wrong in the words srun uses, so a user who knows Slurm's
//! messages recognises them.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A parse or binding error, worded as Slurm words it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BindError {
    #[error("unrecognized --cpu-bind argument \"{0}\"")]
    UnknownCpuBind(String),
    #[error("missing list for \"--cpu-bind={0}:<list>\"")]
    MissingList(&'static str),
    #[error("Failed to validate number: {value}, the offending character is {ch}")]
    BadNumber { value: String, ch: char },
    #[error("Invalid {kind} multiplier: {value}")]
    BadMultiplier { kind: &'static str, value: String },
    #[error("Invalid --distribution specification: {0}")]
    Distribution(String),
    #[error("Invalid plane size or size not specified")]
    PlaneSize,
    #[error("Invalid --gpu-bind argument: {0}")]
    GpuBind(String),
    /// Rank and locality-domain binding need the whole node (Slurm: lllp_distribution).
    #[error("Entire node must be allocated for {0}")]
    WholeNodeRequired(String),
    /// A map/mask names a CPU the step was not given; `allocated` is Slurm's hex mask of OS ids.
    #[error("CPU binding outside of job step allocation, allocated CPUs are: {allocated}.")]
    OutsideAllocation { allocated: String },
    #[error("only {cpus} CPUs allocated on this node for {tasks} tasks")]
    TooFewCpus { cpus: usize, tasks: usize },
    #[error("CPU {cpu} is not on this node (it has {cpus} CPUs)")]
    NoSuchCpu { cpu: u32, cpus: u32 },
}

/// A set of small non-negative ids (CPUs, GPUs, locality domains), kept
/// sorted and unique. Written as Slurm writes masks: `0x` and hex digits.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(from = "Vec<u32>")]
pub struct IdSet(Vec<u32>);

/// From the wire too: sorted and deduplicated whatever the sender sent.
impl From<Vec<u32>> for IdSet {
    fn from(ids: Vec<u32>) -> Self {
        IdSet::new(ids)
    }
}

/// The most entries a map or mask list may expand to (`1*N`): far more
/// tasks than a node runs, and a bound on what a typo like `0*999999999`
/// can make srun allocate.
pub const MAX_LIST: usize = 1 << 16;
/// The most characters a list may expand to (a 4,096-CPU mask is 1,024).
pub const MAX_EXPANDED: usize = 1 << 18;

impl IdSet {
    pub fn new(mut ids: Vec<u32>) -> Self {
        ids.sort_unstable();
        ids.dedup();
        IdSet(ids)
    }
    pub fn ids(&self) -> &[u32] {
        &self.0
    }
    pub fn contains(&self, id: u32) -> bool {
        self.0.binary_search(&id).is_ok()
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Parses hex digits (an optional `0x` already stripped by the caller
    /// or not): bit N set means id N.
    pub fn from_hex(s: &str) -> Result<Self, BindError> {
        let digits = s
            .strip_prefix("0x")
            .or_else(|| s.strip_prefix("0X"))
            .unwrap_or(s);
        if digits.is_empty() {
            return Err(BindError::BadNumber {
                value: s.to_string(),
                ch: ' ',
            });
        }
        let mut ids = Vec::new();
        for (pos, c) in digits.chars().rev().enumerate() {
            let v = c.to_digit(16).ok_or(BindError::BadNumber {
                value: s.to_string(),
                ch: c,
            })?;
            for bit in 0..4 {
                if v & (1 << bit) != 0 {
                    let id = u32::try_from(pos * 4 + bit).map_err(|_| BindError::BadNumber {
                        value: s.to_string(),
                        ch: c,
                    })?;
                    ids.push(id);
                }
            }
        }
        Ok(IdSet::new(ids))
    }

    /// Slurm's trimmed form (`task_cpuset_to_str`): lowercase, no leading
    /// zeros, `0` when empty. No `0x`.
    pub fn hex_trimmed(&self) -> String {
        let Some(&max) = self.0.last() else {
            return "0".to_string();
        };
        self.hex_digits(max as usize / 4 + 1, false)
    }

    /// Slurm's full-width form (`bit_fmt_hexmask` over a bitmap of `width`
    /// bits): `0x`, uppercase, one digit per 4 bits, leading zeros kept.
    pub fn hex_full(&self, width: usize) -> String {
        let digits = width.div_ceil(4).max(1);
        let need = self.0.last().map_or(1, |&m| m as usize / 4 + 1);
        format!("0x{}", self.hex_digits(digits.max(need), true))
    }

    fn hex_digits(&self, digits: usize, upper: bool) -> String {
        let mut nibbles = vec![0u8; digits];
        for &id in &self.0 {
            let id = id as usize;
            nibbles[id / 4] |= 1 << (id % 4);
        }
        nibbles
            .iter()
            .rev()
            .map(|&n| {
                let c = char::from_digit(u32::from(n), 16).unwrap_or('0');
                if upper {
                    c.to_ascii_uppercase()
                } else {
                    c
                }
            })
            .collect()
    }
}

impl fmt::Display for IdSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "0x{}", self.hex_trimmed())
    }
}

/// The unit masks are widened to (`sockets`, `cores`, `threads`, `ldoms`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum BindUnit {
    Sockets,
    Cores,
    Threads,
    Ldoms,
}

impl BindUnit {
    pub fn name(self) -> &'static str {
        match self {
            BindUnit::Sockets => "sockets",
            BindUnit::Cores => "cores",
            BindUnit::Threads => "threads",
            BindUnit::Ldoms => "ldoms",
        }
    }
}

/// An explicit binding mode. `Rank` is the 22.05 meaning (task N on the
/// node's CPU N); newer Slurm ignores it, canopy keeps it because scripts
/// still pass it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum BindMode {
    None,
    Rank,
    MapCpu(Vec<u32>),
    MaskCpu(Vec<IdSet>),
    RankLdom,
    MapLdom(Vec<u32>),
    MaskLdom(Vec<IdSet>),
}

/// `--cpu-bind`: verbosity, an optional unit and an optional mode; both
/// absent means "not given" and lets auto binding decide.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CpuBind {
    pub verbose: bool,
    pub unit: Option<BindUnit>,
    pub mode: Option<BindMode>,
    /// `one_thread`: use one thread per core when laying tasks out.
    pub one_thread: bool,
}

/// Is what follows a comma a value (so the comma separates list items, not
/// options)? Slurm's rule: starts with a digit, or is all hex digits to the
/// next comma or the end.
fn is_value(rest: &str) -> bool {
    let mut chars = rest.chars();
    match chars.next() {
        Some(c) if c.is_ascii_digit() => return true,
        None => return true,
        _ => {}
    }
    let field = rest.split(',').next().unwrap_or("");
    field.chars().all(|c| c.is_ascii_hexdigit())
}

/// Expands `1*4,2` to `1,1,1,1,2`; `mask` lists take hex digits.
fn expand_list(list: &str, kind: &'static str, mask: bool) -> Result<Vec<String>, BindError> {
    let mut out = Vec::new();
    let mut held = 0usize;
    for tok in list.split(',').filter(|t| !t.is_empty()) {
        let (value, count) = match tok.split_once('*') {
            Some((v, n)) => {
                if let Some(c) = n.chars().find(|c| !c.is_ascii_digit()) {
                    return Err(BindError::BadNumber {
                        value: n.to_string(),
                        ch: c,
                    });
                }
                let count: usize = n.parse().map_err(|_| BindError::BadMultiplier {
                    kind,
                    value: n.to_string(),
                })?;
                if count == 0 || count > MAX_LIST {
                    return Err(BindError::BadMultiplier {
                        kind,
                        value: n.to_string(),
                    });
                }
                (v, count)
            }
            None => (tok, 1),
        };
        let digits = if mask {
            value.strip_prefix("0x").unwrap_or(value)
        } else {
            value
        };
        let bad = if mask {
            digits.chars().find(|c| !c.is_ascii_hexdigit())
        } else {
            digits.chars().find(|c| !c.is_ascii_digit())
        };
        if let Some(ch) = bad {
            return Err(BindError::BadNumber {
                value: value.to_string(),
                ch,
            });
        }
        if digits.is_empty() {
            return Err(BindError::BadNumber {
                value: value.to_string(),
                ch: '*',
            });
        }
        // Bounded by what the expansion holds, not only by entries: a long
        // mask repeated 65,536 times would otherwise be gigabytes.
        let grown = held.saturating_add(digits.len().saturating_mul(count));
        if out.len() + count > MAX_LIST || grown > MAX_EXPANDED {
            return Err(BindError::BadMultiplier {
                kind,
                value: tok.to_string(),
            });
        }
        held = grown;
        out.extend(std::iter::repeat_n(digits.to_string(), count));
    }
    if out.is_empty() {
        return Err(BindError::MissingList(kind));
    }
    Ok(out)
}

/// map lists: decimal, or hex with `0x` (as affinity.c reads them).
fn parse_ids(list: &str, kind: &'static str) -> Result<Vec<u32>, BindError> {
    // Hex items (0x..) are allowed in maps; validate them as masks would be.
    let mut out = Vec::new();
    for tok in list.split(',') {
        if let Some(hex) = tok.strip_prefix("0x") {
            let (hex, count) = match hex.split_once('*') {
                Some((h, n)) => (h, n),
                None => (hex, "1"),
            };
            let v = u32::from_str_radix(hex, 16).map_err(|_| BindError::BadNumber {
                value: tok.to_string(),
                ch: hex.chars().find(|c| !c.is_ascii_hexdigit()).unwrap_or('x'),
            })?;
            let n: usize = count
                .parse()
                .ok()
                .filter(|&n| n > 0 && out.len() + n <= MAX_LIST)
                .ok_or_else(|| BindError::BadMultiplier {
                    kind,
                    value: count.to_string(),
                })?;
            out.extend(std::iter::repeat_n(v, n));
        } else {
            for v in expand_list(tok, kind, false)? {
                out.push(v.parse().map_err(|_| BindError::BadNumber {
                    value: v.clone(),
                    ch: v.chars().next().unwrap_or(' '),
                })?);
            }
        }
    }
    Ok(out)
}

fn parse_masks(list: &str, kind: &'static str) -> Result<Vec<IdSet>, BindError> {
    expand_list(list, kind, true)?
        .iter()
        .map(|m| IdSet::from_hex(m))
        .collect()
}

/// The list after `map_cpu:` / `map_cpu=`; `None` when absent or empty.
fn list_of(tok: &str) -> Option<&str> {
    tok.split_once([':', '='])
        .map(|(_, l)| l)
        .filter(|l| !l.is_empty())
}

impl CpuBind {
    /// Parses `--cpu-bind` (case-insensitive, as srun).
    pub fn parse(arg: &str) -> Result<Self, BindError> {
        // Commas not followed by a value separate options; the others
        // separate list items and stay with their map/mask.
        let mut toks = Vec::new();
        let mut start = 0;
        for (i, c) in arg.char_indices() {
            if c == ',' && !is_value(&arg[i + 1..]) {
                toks.push(&arg[start..i]);
                start = i + 1;
            }
        }
        toks.push(&arg[start..]);
        let mut b = CpuBind::default();
        for tok in toks {
            let low = tok.to_ascii_lowercase();
            let word = low.split([':', '=']).next().unwrap_or("");
            match word {
                "q" | "quiet" => b.verbose = false,
                "v" | "verbose" => b.verbose = true,
                "one_thread" => b.one_thread = true,
                "no" | "none" => b.mode = Some(BindMode::None),
                "rank" => b.mode = Some(BindMode::Rank),
                "rank_ldom" => b.mode = Some(BindMode::RankLdom),
                "map_cpu" | "mapcpu" => {
                    let list = list_of(tok).ok_or(BindError::MissingList("map_cpu"))?;
                    b.mode = Some(BindMode::MapCpu(parse_ids(list, "map_cpu")?));
                }
                "mask_cpu" | "maskcpu" => {
                    let list = list_of(tok).ok_or(BindError::MissingList("mask_cpu"))?;
                    b.mode = Some(BindMode::MaskCpu(parse_masks(list, "mask_cpu")?));
                }
                "map_ldom" | "mapldom" => {
                    let list = list_of(tok).ok_or(BindError::MissingList("map_ldom"))?;
                    b.mode = Some(BindMode::MapLdom(parse_ids(list, "map_ldom")?));
                }
                "mask_ldom" | "maskldom" => {
                    let list = list_of(tok).ok_or(BindError::MissingList("mask_ldom"))?;
                    b.mode = Some(BindMode::MaskLdom(parse_masks(list, "mask_ldom")?));
                }
                "socket" | "sockets" => b.unit = Some(BindUnit::Sockets),
                "core" | "cores" => b.unit = Some(BindUnit::Cores),
                "thread" | "threads" => b.unit = Some(BindUnit::Threads),
                "ldom" | "ldoms" => b.unit = Some(BindUnit::Ldoms),
                _ => return Err(BindError::UnknownCpuBind(tok.to_string())),
            }
        }
        Ok(b)
    }

    /// Was a binding asked for at all (anything beyond verbosity)?
    pub fn is_set(&self) -> bool {
        self.unit.is_some() || self.mode.is_some()
    }
}

fn join<T: fmt::Display>(items: &[T]) -> String {
    items
        .iter()
        .map(|i| i.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

impl fmt::Display for BindMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BindMode::None => write!(f, "none"),
            BindMode::Rank => write!(f, "rank"),
            BindMode::RankLdom => write!(f, "rank_ldom"),
            BindMode::MapCpu(l) => write!(f, "map_cpu:{}", join(l)),
            BindMode::MaskCpu(l) => write!(f, "mask_cpu:{}", join(l)),
            BindMode::MapLdom(l) => write!(f, "map_ldom:{}", join(l)),
            BindMode::MaskLdom(l) => write!(f, "mask_ldom:{}", join(l)),
        }
    }
}

impl fmt::Display for CpuBind {
    /// The form srun exports in SLURM_CPU_BIND: verbosity first.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.verbose { "verbose" } else { "quiet" })?;
        if self.one_thread {
            f.write_str(",one_thread")?;
        }
        if let Some(u) = self.unit {
            write!(f, ",{}", u.name())?;
        }
        if let Some(m) = &self.mode {
            write!(f, ",{m}")?;
        }
        Ok(())
    }
}

/// How tasks go to nodes (the first field of `-m`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum NodeDist {
    Block,
    Cyclic,
    Plane(u32),
    Arbitrary,
}

/// How a node's CPUs are dealt to its tasks (second and third fields).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum SocketDist {
    Block,
    Cyclic,
    /// "full cyclic": the next CPU of each task comes from the next socket.
    Fcyclic,
}

impl SocketDist {
    fn name(self) -> &'static str {
        match self {
            SocketDist::Block => "block",
            SocketDist::Cyclic => "cyclic",
            SocketDist::Fcyclic => "fcyclic",
        }
    }
    fn parse(s: &str) -> Option<Self> {
        match s.to_ascii_lowercase().as_str() {
            "block" => Some(SocketDist::Block),
            "cyclic" => Some(SocketDist::Cyclic),
            "fcyclic" => Some(SocketDist::Fcyclic),
            _ => None,
        }
    }
}

/// `-m/--distribution=<node>[:<socket>[:<core>]][,Pack|NoPack]`.
/// `socket`/`core` are `None` when not given (Slurm's default is cyclic
/// at socket level, and the core level inherits the socket level).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Distribution {
    /// `None`: not given (`SLURM_DIST_UNKNOWN`; the controller's default, block).
    pub node: Option<NodeDist>,
    pub socket: Option<SocketDist>,
    pub core: Option<SocketDist>,
    /// `Some(true)` for Pack, `Some(false)` for NoPack.
    pub pack: Option<bool>,
}

impl Distribution {
    pub fn parse(arg: &str) -> Result<Self, BindError> {
        let bad = || BindError::Distribution(arg.to_string());
        let low = arg.to_ascii_lowercase();
        if let Some(rest) = low.strip_prefix("plane") {
            // Plane takes no socket or core part.
            let size = rest.strip_prefix('=').ok_or(BindError::PlaneSize)?;
            let n: u32 = size.parse().map_err(|_| BindError::PlaneSize)?;
            if n == 0 || n > i32::MAX as u32 {
                return Err(BindError::PlaneSize);
            }
            return Ok(Distribution {
                node: Some(NodeDist::Plane(n)),
                ..Default::default()
            });
        }
        let (base, flag) = match low.split_once(',') {
            Some((b, f)) => (b, Some(f)),
            None => (low.as_str(), None),
        };
        let mut d = Distribution::default();
        if let Some(f) = flag {
            d.pack = match f {
                "pack" => Some(true),
                "nopack" => Some(false),
                _ => return Err(bad()),
            };
        }
        if base.is_empty() {
            return Err(bad());
        }
        let parts: Vec<&str> = base.split(':').collect();
        if parts.len() > 3 {
            return Err(bad());
        }
        // A lone Pack/NoPack is allowed.
        if parts.len() == 1 && flag.is_none() {
            match parts[0] {
                "pack" => {
                    d.pack = Some(true);
                    return Ok(d);
                }
                "nopack" => {
                    d.pack = Some(false);
                    return Ok(d);
                }
                _ => {}
            }
        }
        d.node = Some(match parts[0] {
            "block" | "*" => NodeDist::Block,
            "cyclic" => NodeDist::Cyclic,
            "arbitrary" | "hostfile" if parts.len() == 1 => NodeDist::Arbitrary,
            _ => return Err(bad()),
        });
        if let Some(s) = parts.get(1) {
            d.socket = Some(if *s == "*" {
                SocketDist::Cyclic
            } else {
                SocketDist::parse(s).ok_or_else(bad)?
            });
        }
        if let Some(c) = parts.get(2) {
            d.core = Some(if *c == "*" {
                d.socket.unwrap_or(SocketDist::Cyclic)
            } else {
                SocketDist::parse(c).ok_or_else(bad)?
            });
        }
        Ok(d)
    }

    /// The socket-level distribution that lays CPUs out for tasks: as
    /// task/affinity decides it, plane and `*:block` are block, `*:fcyclic`
    /// is fcyclic, anything else (including no `-m`) is cyclic.
    pub fn socket_level(&self) -> SocketDist {
        if matches!(self.node, Some(NodeDist::Plane(_))) {
            return SocketDist::Block;
        }
        self.socket.unwrap_or(SocketDist::Cyclic)
    }
}

impl fmt::Display for Distribution {
    /// As SLURM_DISTRIBUTION shows it (`block`, `cyclic:fcyclic`, `plane`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = match self.node {
            None => String::new(),
            Some(NodeDist::Block) => "block".into(),
            Some(NodeDist::Cyclic) => "cyclic".into(),
            Some(NodeDist::Plane(_)) => "plane".into(),
            Some(NodeDist::Arbitrary) => "arbitrary".into(),
        };
        if let Some(sd) = self.socket {
            s.push(':');
            s.push_str(sd.name());
        }
        if let Some(cd) = self.core {
            s.push(':');
            s.push_str(cd.name());
        }
        match self.pack {
            Some(true) if s.is_empty() => s.push_str("Pack"),
            Some(false) if s.is_empty() => s.push_str("NoPack"),
            Some(true) => s.push_str(",Pack"),
            Some(false) => s.push_str(",NoPack"),
            None => {}
        }
        if s.is_empty() {
            s.push_str("unknown");
        }
        f.write_str(&s)
    }
}

/// What `--gpu-bind` asks for.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum GpuBindKind {
    /// GPUs whose CPU affinity meets the task's CPUs.
    Closest,
    /// Like closest, but one GPU per task; N tasks share each GPU.
    Single(u32),
    /// N GPUs per task.
    PerTask(u32),
    MapGpu(Vec<u32>),
    MaskGpu(Vec<IdSet>),
    /// Every task sees every GPU allocated on its node.
    #[default]
    None,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct GpuBind {
    pub verbose: bool,
    pub kind: GpuBindKind,
}

impl GpuBind {
    /// Parses `--gpu-bind=[verbose,]{closest|single:N|per_task:N|map_gpu:L|mask_gpu:L|none}`
    /// (the newer `map:`/`mask:` spellings too).
    pub fn parse(arg: &str) -> Result<Self, BindError> {
        let bad = || BindError::GpuBind(arg.to_string());
        let low = arg.to_ascii_lowercase();
        let (verbose, rest) = match low.strip_prefix("verbose,") {
            Some(r) => (true, r),
            None => (false, low.as_str()),
        };
        let num = |s: &str| -> Result<u32, BindError> { s.parse().map_err(|_| bad()) };
        let kind = if rest == "closest" {
            GpuBindKind::Closest
        } else if rest == "none" {
            GpuBindKind::None
        } else if let Some(n) = rest.strip_prefix("single:") {
            GpuBindKind::Single(num(n)?.max(1))
        } else if let Some(n) = rest.strip_prefix("per_task:") {
            GpuBindKind::PerTask(num(n)?)
        } else if let Some(l) = rest
            .strip_prefix("map_gpu:")
            .or_else(|| rest.strip_prefix("map:"))
        {
            GpuBindKind::MapGpu(parse_ids(l, "map_gpu").map_err(|_| bad())?)
        } else if let Some(l) = rest
            .strip_prefix("mask_gpu:")
            .or_else(|| rest.strip_prefix("mask:"))
        {
            GpuBindKind::MaskGpu(parse_gpu_masks(l).ok_or_else(bad)?)
        } else {
            return Err(bad());
        };
        Ok(GpuBind { verbose, kind })
    }
}

/// `mask_gpu` entries as slurmstepd reads them (strtol base 0): `0x..` is
/// hex, a leading `0` octal, anything else decimal, so `mask_gpu:10` is
/// GPUs 1 and 3, not GPU 4. `*N` repeats an entry for N tasks.
fn parse_gpu_masks(list: &str) -> Option<Vec<IdSet>> {
    let mut out = Vec::new();
    for tok in list.split(',') {
        let (v, n) = match tok.split_once('*') {
            Some((v, n)) => (v, n.parse::<usize>().ok()?.max(1)),
            None => (tok, 1),
        };
        if out.len() + n > MAX_LIST {
            return None;
        }
        let bits = if let Some(h) = v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
            u64::from_str_radix(h, 16).ok()?
        } else if v.len() > 1 && v.starts_with('0') {
            u64::from_str_radix(&v[1..], 8).ok()?
        } else {
            v.parse::<u64>().ok()?
        };
        if bits == 0 {
            return None;
        }
        let set = IdSet::new((0..64).filter(|b| bits & (1 << b) != 0).collect());
        out.extend(std::iter::repeat_n(set, n));
    }
    (!out.is_empty()).then_some(out)
}

impl fmt::Display for GpuBind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.verbose {
            f.write_str("verbose,")?;
        }
        match &self.kind {
            GpuBindKind::Closest => write!(f, "closest"),
            GpuBindKind::None => write!(f, "none"),
            GpuBindKind::Single(n) => write!(f, "single:{n}"),
            GpuBindKind::PerTask(n) => write!(f, "per_task:{n}"),
            GpuBindKind::MapGpu(l) => write!(f, "map_gpu:{}", join(l)),
            GpuBindKind::MaskGpu(l) => write!(f, "mask_gpu:{}", join(l)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_bind_words() {
        let b = CpuBind::parse("verbose,cores").unwrap();
        assert!(b.verbose);
        assert_eq!(b.unit, Some(BindUnit::Cores));
        assert_eq!(b.mode, None);
        assert_eq!(b.to_string(), "verbose,cores");
        assert_eq!(CpuBind::parse("none").unwrap().mode, Some(BindMode::None));
        assert_eq!(
            CpuBind::parse("Sockets").unwrap().unit,
            Some(BindUnit::Sockets)
        );
        assert_eq!(CpuBind::parse("ldoms").unwrap().unit, Some(BindUnit::Ldoms));
        assert_eq!(
            CpuBind::parse("rank_ldom").unwrap().mode,
            Some(BindMode::RankLdom)
        );
        assert_eq!(
            CpuBind::parse("q,threads").unwrap().to_string(),
            "quiet,threads"
        );
    }

    #[test]
    fn cpu_bind_lists_keep_their_commas() {
        let b = CpuBind::parse("verbose,map_cpu:0,16,1*2").unwrap();
        assert_eq!(b.mode, Some(BindMode::MapCpu(vec![0, 16, 1, 1])));
        assert!(b.verbose);
        let b = CpuBind::parse("mask_cpu:0x3,c,0x30000*2,verbose").unwrap();
        let Some(BindMode::MaskCpu(m)) = &b.mode else {
            panic!("{b:?}")
        };
        assert_eq!(m[0].ids(), &[0, 1]);
        assert_eq!(m[1].ids(), &[2, 3]);
        assert_eq!(m[2].ids(), &[16, 17]);
        assert_eq!(m[3], m[2]);
        assert!(b.verbose);
        assert_eq!(b.to_string(), "verbose,mask_cpu:0x3,0xc,0x30000,0x30000");
        assert_eq!(
            CpuBind::parse("map_ldom=1,0").unwrap().mode,
            Some(BindMode::MapLdom(vec![1, 0]))
        );
    }

    #[test]
    fn cpu_bind_errors_in_slurms_words() {
        assert_eq!(
            CpuBind::parse("cores,bogus").unwrap_err().to_string(),
            "unrecognized --cpu-bind argument \"bogus\""
        );
        assert_eq!(
            CpuBind::parse("map_cpu").unwrap_err().to_string(),
            "missing list for \"--cpu-bind=map_cpu:<list>\""
        );
        assert_eq!(
            CpuBind::parse("mask_cpu:").unwrap_err().to_string(),
            "missing list for \"--cpu-bind=mask_cpu:<list>\""
        );
        assert_eq!(
            CpuBind::parse("map_cpu:1,2x").unwrap_err().to_string(),
            "Failed to validate number: 2x, the offending character is x"
        );
        assert_eq!(
            CpuBind::parse("map_cpu:1*0").unwrap_err().to_string(),
            "Invalid map_cpu multiplier: 0"
        );
        // A list cannot expand without bound.
        assert!(CpuBind::parse("map_cpu:0*999999999").is_err());
        assert!(CpuBind::parse("map_cpu:0x1*999999999").is_err());
        assert!(CpuBind::parse("mask_cpu:3*40000,3*40000").is_err());
        assert!(GpuBind::parse("mask_gpu:3*999999999").is_err());
    }

    #[test]
    fn distribution_forms() {
        let d = Distribution::parse("block:cyclic").unwrap();
        assert_eq!(d.node, Some(NodeDist::Block));
        assert_eq!(d.socket, Some(SocketDist::Cyclic));
        assert_eq!(d.to_string(), "block:cyclic");
        let d = Distribution::parse("cyclic:fcyclic:block").unwrap();
        assert_eq!(d.socket_level(), SocketDist::Fcyclic);
        assert_eq!(d.core, Some(SocketDist::Block));
        let d = Distribution::parse("*:*:*").unwrap();
        assert_eq!(d.to_string(), "block:cyclic:cyclic");
        let d = Distribution::parse("plane=4").unwrap();
        assert_eq!(d.node, Some(NodeDist::Plane(4)));
        assert_eq!(d.socket_level(), SocketDist::Block);
        assert_eq!(Distribution::parse("block,Pack").unwrap().pack, Some(true));
        assert_eq!(Distribution::parse("nopack").unwrap().pack, Some(false));
        assert_eq!(
            Distribution::parse("arbitrary").unwrap().node,
            Some(NodeDist::Arbitrary)
        );
        assert_eq!(Distribution::default().socket_level(), SocketDist::Cyclic);
        assert_eq!(
            Distribution::parse("block:diagonal")
                .unwrap_err()
                .to_string(),
            "Invalid --distribution specification: block:diagonal"
        );
        assert_eq!(
            Distribution::parse("plane").unwrap_err(),
            BindError::PlaneSize
        );
        assert_eq!(
            Distribution::parse("plane=0").unwrap_err(),
            BindError::PlaneSize
        );
        assert!(Distribution::parse("block:block:block:block").is_err());
    }

    #[test]
    fn gpu_bind_forms() {
        assert_eq!(
            GpuBind::parse("closest").unwrap().kind,
            GpuBindKind::Closest
        );
        let g = GpuBind::parse("verbose,single:2").unwrap();
        assert!(g.verbose);
        assert_eq!(g.kind, GpuBindKind::Single(2));
        assert_eq!(g.to_string(), "verbose,single:2");
        assert_eq!(
            GpuBind::parse("map_gpu:0,1*2").unwrap().kind,
            GpuBindKind::MapGpu(vec![0, 1, 1])
        );
        assert_eq!(
            GpuBind::parse("mask:0x3").unwrap().to_string(),
            "mask_gpu:0x3"
        );
        assert_eq!(
            GpuBind::parse("nearest").unwrap_err().to_string(),
            "Invalid --gpu-bind argument: nearest"
        );
        assert!(GpuBind::parse("single:x").is_err());
        // strtol base 0, as slurmstepd: decimal unless 0x (or a leading 0).
        let GpuBindKind::MaskGpu(m) = GpuBind::parse("mask_gpu:10,0x10,010*2").unwrap().kind else {
            panic!()
        };
        assert_eq!(m[0].ids(), &[1, 3]);
        assert_eq!(m[1].ids(), &[4]);
        assert_eq!(m[2].ids(), &[3]);
        assert_eq!(m.len(), 4);
    }

    #[test]
    fn hex_forms() {
        let s = IdSet::new(vec![0, 1, 17]);
        assert_eq!(s.hex_trimmed(), "20003");
        assert_eq!(s.hex_full(32), "0x00020003");
        assert_eq!(IdSet::new(vec![2, 3]).hex_full(32), "0x0000000C");
        assert_eq!(IdSet::default().hex_trimmed(), "0");
        assert_eq!(IdSet::from_hex("0xF0").unwrap().ids(), &[4, 5, 6, 7]);
    }

    #[test]
    fn serde_round_trip() {
        let b = CpuBind::parse("verbose,cores,mask_cpu:0x3").unwrap();
        let bytes = rmp_serde::to_vec_named(&b).unwrap();
        let back: CpuBind = rmp_serde::from_slice(&bytes).unwrap();
        assert_eq!(back, b);
        // An unsorted set from the wire is put in order.
        let bytes = rmp_serde::to_vec(&vec![5u32, 1, 5]).unwrap();
        let s: IdSet = rmp_serde::from_slice(&bytes).unwrap();
        assert_eq!(s.ids(), &[1, 5]);
    }
}
