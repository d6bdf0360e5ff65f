//! Trackable resources (TRES) and generic resources (GRES) as jobs ask for
//! them and as the controller hands them out: what `--gres`, `--gpus*`,
//! `--hint` and friends mean, and what an allocation holds on each node
//! (specific CPU ids and GRES indices, not counts).
//!
//! The option grammar follows Slurm's: `--gres=name[[:type]:count],...`
//! (per node) and `--gpus=[type:]count` (per job, task, socket or node).

use serde::{Deserialize, Serialize};

/// One generic resource asked for: `gpu:a100:2`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct GresRequest {
    pub name: String,
    /// A specific type (`a100`), or any type of that name.
    pub type_: Option<String>,
    pub count: u64,
}

impl GresRequest {
    /// `gpu:a100:2` as Slurm prints it in `TresPerNode=gres/gpu:a100:2`,
    /// `squeue -o %b` and job views.
    pub fn text(&self) -> String {
        match &self.type_ {
            Some(t) => format!("{}:{}:{}", self.name, t, self.count),
            None => format!("{}:{}", self.name, self.count),
        }
    }
}

/// A GRES option that Slurm would refuse: the message it prints.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GresSyntax {
    #[error("Invalid generic resource (gres) specification")]
    Invalid,
    #[error("Invalid --{0} specification")]
    BadGpus(&'static str),
}

/// A count with Slurm's optional K/M/G/T/P suffix (powers of 1024).
fn gres_count(text: &str) -> Option<u64> {
    let text = text.trim();
    let (digits, mult) = match text.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let shift = match c.to_ascii_uppercase() {
                'K' => 10,
                'M' => 20,
                'G' => 30,
                'T' => 40,
                'P' => 50,
                _ => return None,
            };
            (&text[..i], 1u64 << shift)
        }
        _ => (text, 1),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse::<u64>().ok()?.checked_mul(mult)
}

fn gres_name_ok(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.')
}

/// One `name[[:type]:count]` item of a `--gres` list (an optional `gres/`
/// prefix, as `--tres-per-node` writes it, is accepted).
pub fn parse_gres_item(item: &str) -> Result<GresRequest, GresSyntax> {
    let item = item.trim();
    let item = item.strip_prefix("gres/").unwrap_or(item);
    let mut parts = item.split(':');
    let name = parts.next().unwrap_or_default();
    let rest: Vec<&str> = parts.collect();
    if !gres_name_ok(name) {
        return Err(GresSyntax::Invalid);
    }
    let (type_, count) = match rest.as_slice() {
        [] => (None, 1),
        // One field: a count when it reads as one, else a type.
        [one] => match gres_count(one) {
            Some(n) => (None, n),
            None if gres_name_ok(one) => (Some(one.to_string()), 1),
            None => return Err(GresSyntax::Invalid),
        },
        [t, n] if gres_name_ok(t) => (
            Some(t.to_string()),
            gres_count(n).ok_or(GresSyntax::Invalid)?,
        ),
        _ => return Err(GresSyntax::Invalid),
    };
    Ok(GresRequest {
        name: name.to_string(),
        type_,
        count,
    })
}

/// A `--gres` list: `gpu:a100:2,nic:1`. `none` clears it (as in Slurm).
pub fn parse_gres(list: &str) -> Result<Vec<GresRequest>, GresSyntax> {
    if list.trim().eq_ignore_ascii_case("none") {
        return Ok(Vec::new());
    }
    let mut out: Vec<GresRequest> = Vec::new();
    for item in list.split(',') {
        let req = parse_gres_item(item)?;
        if out
            .iter()
            .any(|o| o.name == req.name && o.type_ == req.type_)
        {
            return Err(GresSyntax::Invalid);
        }
        out.push(req);
    }
    Ok(out)
}

/// A `--gpus*` value: `[type:]count`. `option` names the flag for the
/// error (`gpus`, `gpus-per-node`, ...).
pub fn parse_gpus(text: &str, option: &'static str) -> Result<GresRequest, GresSyntax> {
    let bad = || GresSyntax::BadGpus(option);
    let text = text.trim();
    let text = text.strip_prefix("gpu:").unwrap_or(text);
    let (type_, count) = match text.rsplit_once(':') {
        Some((t, n)) if gres_name_ok(t) => (Some(t.to_string()), n),
        Some(_) => return Err(bad()),
        None => (None, text),
    };
    let count = gres_count(count).filter(|&n| n > 0).ok_or_else(bad)?;
    Ok(GresRequest {
        name: "gpu".into(),
        type_,
        count,
    })
}

/// `--hint`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Hint {
    ComputeBound,
    MemoryBound,
    Multithread,
    Nomultithread,
}

impl Hint {
    pub fn parse(text: &str) -> Option<Hint> {
        Some(match text.trim().to_ascii_lowercase().as_str() {
            "compute_bound" => Hint::ComputeBound,
            "memory_bound" => Hint::MemoryBound,
            "multithread" => Hint::Multithread,
            "nomultithread" => Hint::Nomultithread,
            _ => return None,
        })
    }
    pub fn name(self) -> &'static str {
        match self {
            Hint::ComputeBound => "compute_bound",
            Hint::MemoryBound => "memory_bound",
            Hint::Multithread => "multithread",
            Hint::Nomultithread => "nomultithread",
        }
    }
}

/// `--gres-flags`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum GresFlags {
    /// Only cores local to the allocated GRES may be used.
    EnforceBinding,
    /// Any cores, whatever the GRES's `Cores=`.
    DisableBinding,
}

impl GresFlags {
    pub fn parse(text: &str) -> Option<GresFlags> {
        match text.trim().to_ascii_lowercase().as_str() {
            "enforce-binding" => Some(GresFlags::EnforceBinding),
            "disable-binding" => Some(GresFlags::DisableBinding),
            _ => None,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            GresFlags::EnforceBinding => "enforce-binding",
            GresFlags::DisableBinding => "disable-binding",
        }
    }
}

/// What a job (or step) asks for beyond CPUs, tasks and memory: GRES,
/// GPUs, socket/core/thread shape, and how its tasks are bound. Every field
/// is optional; an empty request is the plain CPU job canopy ran before.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ResourceRequest {
    /// `--gres`: per node.
    pub gres: Vec<GresRequest>,
    /// `--gres=none`: a step takes none of its job's GRES (without it, a
    /// step that names none gets them all).
    pub gres_none: bool,
    /// `-G/--gpus`: for the whole job.
    pub gpus: Option<GresRequest>,
    pub gpus_per_node: Option<GresRequest>,
    pub gpus_per_task: Option<GresRequest>,
    pub gpus_per_socket: Option<GresRequest>,
    pub cpus_per_gpu: Option<u32>,
    pub mem_per_gpu_mb: Option<u64>,
    pub gres_flags: Option<GresFlags>,
    /// `-B S[:C[:T]]` / `--sockets-per-node`.
    pub sockets_per_node: Option<u32>,
    /// `--cores-per-socket`.
    pub cores_per_socket: Option<u32>,
    /// `--threads-per-core`.
    pub threads_per_core: Option<u32>,
    pub ntasks_per_socket: Option<u32>,
    pub ntasks_per_core: Option<u32>,
    pub hint: Option<Hint>,
    /// `--cpu-bind`, `-m/--distribution`, `--gpu-bind` as given (checked
    /// by the client; applied on the nodes).
    pub cpu_bind: Option<String>,
    pub distribution: Option<String>,
    pub gpu_bind: Option<String>,
}

impl ResourceRequest {
    /// Anything GPU-shaped asked for.
    pub fn wants_gpus(&self) -> bool {
        self.gpus.is_some()
            || self.gpus_per_node.is_some()
            || self.gpus_per_task.is_some()
            || self.gpus_per_socket.is_some()
            || self.gres.iter().any(|g| g.name == "gpu")
    }

    /// The threads of each core a task may use: one with
    /// `--hint=nomultithread` (or `compute_bound`'s one task per core) or
    /// `--threads-per-core=1`, else all of them.
    pub fn usable_threads(&self, threads_per_core: u32) -> u32 {
        let t = threads_per_core.max(1);
        let t = match self.hint {
            Some(Hint::Nomultithread) => 1,
            _ => t,
        };
        match self.threads_per_core {
            Some(n) if n > 0 => t.min(n),
            _ => t,
        }
    }

    /// `TresPerNode=` / `squeue -o %b`: `gres/gpu:a100:2,gres/nic:1`, or
    /// `N/A` when none is asked per node.
    pub fn tres_per_node(&self) -> Option<String> {
        let mut items: Vec<String> = self
            .gres
            .iter()
            .map(|g| format!("gres/{}", g.text()))
            .collect();
        if let Some(g) = &self.gpus_per_node {
            items.push(format!("gres/{}", g.text()));
        }
        (!items.is_empty()).then(|| items.join(","))
    }
}

/// GRES held on one node by a job or step: indices for resources that have
/// them (GPUs and anything with `File=`), a plain count for the rest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GresAlloc {
    pub name: String,
    pub type_: Option<String>,
    /// Node-local indices, ascending; empty for count-only GRES.
    pub indices: Vec<u32>,
    pub count: u64,
}

impl GresAlloc {
    /// `gpu:a100:2(IDX:0-1)` as `scontrol show job -d` prints it.
    pub fn detail(&self) -> String {
        let head = match &self.type_ {
            Some(t) => format!("{}:{}:{}", self.name, t, self.count),
            None => format!("{}:{}", self.name, self.count),
        };
        if self.indices.is_empty() {
            head
        } else {
            format!("{head}(IDX:{})", ranges(&self.indices))
        }
    }
}

/// GRES units held, summed by name over every node (`gres/gpu=4` in TRES
/// lists), in name order.
pub fn gres_totals(per_node: &[Vec<GresAlloc>]) -> Vec<(String, u64)> {
    let mut out: std::collections::BTreeMap<String, u64> = Default::default();
    for g in per_node.iter().flatten() {
        let e = out.entry(g.name.clone()).or_default();
        *e = e.saturating_add(g.count);
    }
    out.into_iter().collect()
}

/// The GRES a request asks for in all, by name (`ReqTRES`): per-node
/// counts times `nodes`, per-task counts times `tasks`, job totals once.
pub fn gres_requested(r: &ResourceRequest, nodes: u32, tasks: u32) -> Vec<(String, u64)> {
    let mut out: std::collections::BTreeMap<String, u64> = Default::default();
    let mut add = |g: &GresRequest, times: u32| {
        let e = out.entry(g.name.clone()).or_default();
        *e = e.saturating_add(g.count.saturating_mul(u64::from(times)));
    };
    for g in &r.gres {
        add(g, nodes);
    }
    if let Some(g) = &r.gpus_per_node {
        add(g, nodes);
    }
    if let Some(g) = &r.gpus_per_task {
        add(g, tasks);
    }
    if let Some(g) = &r.gpus_per_socket {
        add(
            g,
            nodes.saturating_mul(r.sockets_per_node.unwrap_or(1).max(1)),
        );
    }
    if let Some(g) = &r.gpus {
        add(g, 1);
    }
    out.into_iter().collect()
}

/// `0-3,6,8-9`: sorted ids as Slurm prints bitmaps.
pub fn ranges(ids: &[u32]) -> String {
    let mut out = String::new();
    let mut i = 0;
    while i < ids.len() {
        let start = ids[i];
        let mut end = start;
        while i + 1 < ids.len() && ids[i + 1] == end + 1 {
            i += 1;
            end = ids[i];
        }
        if !out.is_empty() {
            out.push(',');
        }
        if start == end {
            out.push_str(&start.to_string());
        } else {
            out.push_str(&format!("{start}-{end}"));
        }
        i += 1;
    }
    out
}

/// Parse `0-3,6` back into ids (gres.conf `Cores=`, `CPU_IDs=`).
pub fn parse_ranges(text: &str) -> Option<Vec<u32>> {
    let mut out = Vec::new();
    for part in text.split(',') {
        let part = part.trim();
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (u32, u32) = (a.trim().parse().ok()?, b.trim().parse().ok()?);
                if a > b || b - a > 1 << 20 {
                    return None;
                }
                out.extend(a..=b);
            }
            None => out.push(part.parse().ok()?),
        }
    }
    out.sort_unstable();
    out.dedup();
    Some(out)
}

/// What the allocation unit is (`SelectTypeParameters`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum CrUnit {
    /// `CR_CPU`: single hardware threads.
    Cpu,
    /// `CR_Core` (the default): whole cores; a job holds every thread of
    /// its cores, and counts them as its CPUs.
    #[default]
    Core,
    /// `CR_Socket`: whole sockets.
    Socket,
}

/// `SelectTypeParameters`, as far as placement reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CrParams {
    pub unit: CrUnit,
    /// `_Memory`: memory is consumed. Without it, memory only filters
    /// nodes (a job never waits for another's memory).
    pub memory: bool,
    /// `CR_ONE_TASK_PER_CORE`.
    pub one_task_per_core: bool,
    /// `CR_LLN`: every partition places jobs on its least loaded nodes.
    #[serde(default)]
    pub lln: bool,
}

impl Default for CrParams {
    fn default() -> Self {
        CrParams {
            unit: CrUnit::Core,
            memory: true,
            one_task_per_core: false,
            lln: false,
        }
    }
}

impl CrParams {
    /// Read `SelectTypeParameters=CR_Core_Memory,CR_ONE_TASK_PER_CORE`.
    /// Unknown words are left to the config reader to name.
    pub fn parse(text: &str) -> Result<CrParams, String> {
        let mut p = CrParams {
            unit: CrUnit::Core,
            memory: false,
            one_task_per_core: false,
            lln: false,
        };
        let mut unit = false;
        for word in text.split(',').map(str::trim).filter(|w| !w.is_empty()) {
            let (u, m) = match word.to_ascii_uppercase().as_str() {
                "CR_CPU" => (CrUnit::Cpu, false),
                "CR_CPU_MEMORY" => (CrUnit::Cpu, true),
                "CR_CORE" => (CrUnit::Core, false),
                "CR_CORE_MEMORY" => (CrUnit::Core, true),
                "CR_SOCKET" => (CrUnit::Socket, false),
                "CR_SOCKET_MEMORY" => (CrUnit::Socket, true),
                "CR_MEMORY" => {
                    p.memory = true;
                    continue;
                }
                "CR_ONE_TASK_PER_CORE" => {
                    p.one_task_per_core = true;
                    continue;
                }
                // Placement hints canopy's packing already follows, or
                // does not offer; the reader names them.
                "CR_LLN" => {
                    p.lln = true;
                    continue;
                }
                "CR_CORE_DEFAULT_DIST_BLOCK" | "CR_PACK_NODES" => continue,
                _ => return Err(format!("unknown SelectTypeParameters value {word:?}")),
            };
            if unit {
                return Err("more than one of CR_CPU, CR_Core, CR_Socket".into());
            }
            unit = true;
            p.unit = u;
            p.memory |= m;
        }
        if !unit && !p.memory && !p.one_task_per_core {
            return Ok(CrParams {
                lln: p.lln,
                ..CrParams::default()
            });
        }
        Ok(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn g(name: &str, t: Option<&str>, count: u64) -> GresRequest {
        GresRequest {
            name: name.into(),
            type_: t.map(str::to_string),
            count,
        }
    }

    #[test]
    fn gres_lists_read_as_slurm_reads_them() {
        assert_eq!(parse_gres("gpu").unwrap(), vec![g("gpu", None, 1)]);
        assert_eq!(parse_gres("gpu:2").unwrap(), vec![g("gpu", None, 2)]);
        assert_eq!(
            parse_gres("gpu:a100:2,nic:1").unwrap(),
            vec![g("gpu", Some("a100"), 2), g("nic", None, 1)]
        );
        assert_eq!(
            parse_gres("gpu:a100").unwrap(),
            vec![g("gpu", Some("a100"), 1)]
        );
        assert_eq!(parse_gres("gres/gpu:4").unwrap(), vec![g("gpu", None, 4)]);
        assert_eq!(parse_gres("bw:2K").unwrap(), vec![g("bw", None, 2048)]);
        assert_eq!(parse_gres("none").unwrap(), vec![]);
        for bad in [
            "",
            "gpu:a:b:c",
            "gpu:a100:2x",
            ":2",
            "gpu,gpu:2",
            "gpu:a100:",
            "g pu",
        ] {
            assert_eq!(parse_gres(bad), Err(GresSyntax::Invalid), "{bad:?}");
        }
    }

    #[test]
    fn gpu_counts_take_an_optional_type() {
        assert_eq!(parse_gpus("2", "gpus").unwrap(), g("gpu", None, 2));
        assert_eq!(
            parse_gpus("a100:2", "gpus").unwrap(),
            g("gpu", Some("a100"), 2)
        );
        assert_eq!(
            parse_gpus("0", "gpus-per-task").unwrap_err().to_string(),
            "Invalid --gpus-per-task specification"
        );
        assert!(parse_gpus("a100", "gpus").is_err());
    }

    #[test]
    fn ranges_round_trip() {
        assert_eq!(ranges(&[0, 1, 2, 3, 6, 8, 9]), "0-3,6,8-9");
        assert_eq!(ranges(&[]), "");
        assert_eq!(
            parse_ranges("0-3,6,8-9").unwrap(),
            vec![0, 1, 2, 3, 6, 8, 9]
        );
        assert!(parse_ranges("3-1").is_none());
        assert!(parse_ranges("x").is_none());
        let a = GresAlloc {
            name: "gpu".into(),
            type_: Some("a100".into()),
            indices: vec![0, 1],
            count: 2,
        };
        assert_eq!(a.detail(), "gpu:a100:2(IDX:0-1)");
    }

    #[test]
    fn hint_and_threads_limit_usable_threads() {
        let mut r = ResourceRequest::default();
        assert_eq!(r.usable_threads(2), 2);
        r.hint = Some(Hint::Nomultithread);
        assert_eq!(r.usable_threads(2), 1);
        r.hint = None;
        r.threads_per_core = Some(1);
        assert_eq!(r.usable_threads(4), 1);
    }
}
