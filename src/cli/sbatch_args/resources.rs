//! The resource-shape options sbatch, srun and salloc share: `--gres`,
//! `-G/--gpus*`, `--cpus-per-gpu`, `--mem-per-gpu`, `--gres-flags`,
//! `-B/--extra-node-info` and the socket/core/thread counts, `--hint`,
//! `--cpu-bind` (srun only), `-m/--distribution` and `--gpu-bind`; their
//! input variables per command; and Slurm's rules across sources (the
//! `--hint` conflicts, the three memory options). The result is a
//! [`ResourceRequest`].
//!
//! Does not: parse binding and distribution grammars (kept as given, checked
//! non-empty; the node side owns them), or know which GRES the cluster has
//! (checked against GresTypes once the configuration is read).

use crate::model::tres::{self, GresFlags, GresRequest, Hint, ResourceRequest};

/// The resource options given by one source.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct ResLayer {
    pub gres: Option<Vec<GresRequest>>,
    pub gpus: Option<GresRequest>,
    pub gpus_per_node: Option<GresRequest>,
    pub gpus_per_task: Option<GresRequest>,
    pub gpus_per_socket: Option<GresRequest>,
    pub cpus_per_gpu: Option<u32>,
    pub mem_per_gpu_mb: Option<u64>,
    pub gres_flags: Option<GresFlags>,
    pub sockets_per_node: Option<u32>,
    pub cores_per_socket: Option<u32>,
    pub threads_per_core: Option<u32>,
    /// `-B` was given (even as `*`): it conflicts with `--hint`.
    pub extra_node_info: bool,
    pub ntasks_per_socket: Option<u32>,
    pub ntasks_per_core: Option<u32>,
    pub hint: Option<Hint>,
    pub cpu_bind: Option<String>,
    pub distribution: Option<String>,
    pub gpu_bind: Option<String>,
}

/// What `--gres=help` and `--hint=help` ask for: print and exit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResHelp {
    Gres,
    Hint,
}

/// Slurm's `--hint=help` text.
pub const HINT_HELP: &str = "\
Application hint options:
    --hint=             Bind tasks according to application hints
        compute_bound   use all cores in each socket
        memory_bound    use only one core in each socket
        [no]multithread [don't] use extra threads with in-core multi-threading
        help            show this help message";

/// `--gres=help`: Slurm lists the GRES plugins configured (GresTypes); the
/// types are only known to the controller, so none are shown.
pub fn gres_help(gres_types: &[String]) -> String {
    let mut out = String::from("Valid gres options are:");
    for name in gres_types {
        out.push('\n');
        out.push_str(name);
        out.push_str("[[:type]:count]");
    }
    out
}

/// The long names this module handles.
pub(crate) const RES_OPTIONS: &[&str] = &[
    "gres",
    "gpus",
    "gpus-per-node",
    "gpus-per-task",
    "gpus-per-socket",
    "cpus-per-gpu",
    "mem-per-gpu",
    "gres-flags",
    "extra-node-info",
    "sockets-per-node",
    "cores-per-socket",
    "threads-per-core",
    "ntasks-per-socket",
    "ntasks-per-core",
    "hint",
    "cpu-bind",
    "distribution",
    "gpu-bind",
];

/// `SBATCH_*` variables for these options (sbatch 22.05's env table).
pub(crate) const SBATCH_ENV: &[(&str, &str)] = &[
    ("SBATCH_CPUS_PER_GPU", "cpus-per-gpu"),
    ("SBATCH_DISTRIBUTION", "distribution"),
    ("SBATCH_GPU_BIND", "gpu-bind"),
    ("SBATCH_GPUS_PER_NODE", "gpus-per-node"),
    ("SBATCH_GPUS_PER_SOCKET", "gpus-per-socket"),
    ("SBATCH_GPUS_PER_TASK", "gpus-per-task"),
    ("SBATCH_GRES_FLAGS", "gres-flags"),
    // Both spellings; SBATCH_HINT is read after SLURM_HINT and wins.
    ("SLURM_HINT", "hint"),
    ("SBATCH_HINT", "hint"),
    ("SBATCH_MEM_PER_GPU", "mem-per-gpu"),
    ("SBATCH_THREADS_PER_CORE", "threads-per-core"),
];

/// srun's `SLURM_*` variables for these options. Inside a job they carry
/// what the job asked for (sbatch and salloc set them in its environment),
/// which is how a step inherits it.
pub(crate) const SRUN_ENV: &[(&str, &str)] = &[
    ("SLURM_CPU_BIND", "cpu-bind"),
    ("SLURM_CPUS_PER_GPU", "cpus-per-gpu"),
    ("SLURM_DISTRIBUTION", "distribution"),
    ("SLURM_GPUS", "gpus"),
    ("SLURM_GPU_BIND", "gpu-bind"),
    ("SLURM_GPUS_PER_NODE", "gpus-per-node"),
    ("SLURM_GPUS_PER_SOCKET", "gpus-per-socket"),
    ("SLURM_GPUS_PER_TASK", "gpus-per-task"),
    ("SLURM_GRES", "gres"),
    ("SLURM_GRES_FLAGS", "gres-flags"),
    ("SLURM_HINT", "hint"),
    ("SLURM_MEM_PER_GPU", "mem-per-gpu"),
    ("SLURM_NCORES_PER_SOCKET", "cores-per-socket"),
    ("SLURM_NSOCKETS_PER_NODE", "sockets-per-node"),
    ("SLURM_THREADS_PER_CORE", "threads-per-core"),
];

/// salloc's `SALLOC_*` variables for these options (and `SLURM_HINT`).
pub(crate) const SALLOC_ENV: &[(&str, &str)] = &[
    ("SALLOC_CPUS_PER_GPU", "cpus-per-gpu"),
    ("SALLOC_GPUS", "gpus"),
    ("SALLOC_GPU_BIND", "gpu-bind"),
    ("SALLOC_GPUS_PER_NODE", "gpus-per-node"),
    ("SALLOC_GPUS_PER_SOCKET", "gpus-per-socket"),
    ("SALLOC_GPUS_PER_TASK", "gpus-per-task"),
    ("SALLOC_GRES", "gres"),
    ("SALLOC_GRES_FLAGS", "gres-flags"),
    ("SALLOC_HINT", "hint"),
    ("SLURM_HINT", "hint"),
    ("SALLOC_MEM_PER_GPU", "mem-per-gpu"),
    ("SALLOC_THREADS_PER_CORE", "threads-per-core"),
];

fn positive(option: &str, value: &str) -> Result<u32, String> {
    value
        .trim()
        .parse::<u32>()
        .ok()
        .filter(|&n| n > 0)
        .ok_or_else(|| format!("error: Invalid numeric value \"{value}\" for --{option}."))
}

/// One `-B` field: `N`, `min-max` (the minimum counts), or `*` (any).
fn node_info_field(field: &str, which: &str) -> Result<Option<u32>, String> {
    let field = field.trim();
    if field == "*" || field.is_empty() {
        return Ok(None);
    }
    let min = field.split('-').next().unwrap_or(field);
    let bad = || format!("error: Invalid numeric value \"{field}\" for {which} arg of -B.");
    let n: u32 = min.parse().map_err(|_| bad())?;
    if let Some((_, max)) = field.split_once('-') {
        let m: u32 = max.parse().map_err(|_| bad())?;
        if m == 0 || m < n {
            return Err(bad());
        }
    }
    Ok(Some(n).filter(|&n| n > 0))
}

/// `--hint`: Slurm takes a comma list; the last word decides here (the
/// request carries one hint).
fn parse_hint(value: &str) -> Result<Option<Hint>, String> {
    let mut hint = None;
    for word in value.split(',').map(str::trim).filter(|w| !w.is_empty()) {
        if word.eq_ignore_ascii_case("help") {
            return Ok(None);
        }
        hint = Some(Hint::parse(word).ok_or_else(|| {
            format!("error: unrecognized --hint argument \"{word}\", see --hint=help")
        })?);
    }
    hint.map(Some)
        .ok_or_else(|| format!("error: unrecognized --hint argument \"{value}\", see --hint=help"))
}

/// Record option `long` (one of [`RES_OPTIONS`]) with `value`. The error is
/// the text after `prog: ` (`error: ...`). `Ok(Some(_))`: print help, exit.
pub(crate) fn apply_res(
    r: &mut ResLayer,
    long: &str,
    value: &str,
) -> Result<Option<ResHelp>, String> {
    let gpus =
        |option: &'static str| tres::parse_gpus(value, option).map_err(|e| format!("error: {e}"));
    let not_empty = |option: &str| {
        let v = value.trim();
        if v.is_empty() {
            Err(format!("error: Invalid --{option} specification"))
        } else {
            Ok(v.to_string())
        }
    };
    match long {
        "gres" => {
            if ["help", "list"]
                .iter()
                .any(|h| value.trim().eq_ignore_ascii_case(h))
            {
                return Ok(Some(ResHelp::Gres));
            }
            r.gres = Some(tres::parse_gres(value).map_err(|e| format!("error: {e}"))?);
        }
        "gpus" => r.gpus = Some(gpus("gpus")?),
        "gpus-per-node" => r.gpus_per_node = Some(gpus("gpus-per-node")?),
        "gpus-per-task" => r.gpus_per_task = Some(gpus("gpus-per-task")?),
        "gpus-per-socket" => r.gpus_per_socket = Some(gpus("gpus-per-socket")?),
        "cpus-per-gpu" => r.cpus_per_gpu = Some(positive(long, value)?),
        "mem-per-gpu" => {
            r.mem_per_gpu_mb = Some(
                crate::config::units::parse_mem_mb(value)
                    .map_err(|_| "error: Invalid --mem-per-gpu specification".to_string())?,
            )
        }
        "gres-flags" => {
            r.gres_flags = Some(
                GresFlags::parse(value)
                    .ok_or_else(|| "error: Invalid --gres-flags specification".to_string())?,
            )
        }
        "extra-node-info" => {
            let fields: Vec<&str> = value.split(':').collect();
            if fields.len() > 3 || value.trim().is_empty() {
                return Err("error: Invalid --extra-node-info specification".into());
            }
            let names = ["first", "second", "third"];
            let mut got = [None; 3];
            for (i, f) in fields.iter().enumerate() {
                got[i] = node_info_field(f, names[i])?;
            }
            r.sockets_per_node = got[0];
            r.cores_per_socket = got[1];
            r.threads_per_core = got[2];
            r.extra_node_info = true;
        }
        "sockets-per-node" => r.sockets_per_node = Some(positive(long, value)?),
        "cores-per-socket" => r.cores_per_socket = Some(positive(long, value)?),
        "threads-per-core" => r.threads_per_core = Some(positive(long, value)?),
        "ntasks-per-socket" => r.ntasks_per_socket = Some(positive(long, value)?),
        "ntasks-per-core" => r.ntasks_per_core = Some(positive(long, value)?),
        "hint" => match parse_hint(value)? {
            None => return Ok(Some(ResHelp::Hint)),
            h => r.hint = h,
        },
        // Read here with the nodes' own parsers, so a bad value is the
        // client's error with Slurm's words, not a failed launch.
        "cpu-bind" => {
            let v = not_empty(long)?;
            crate::model::binding::CpuBind::parse(&v).map_err(|e| format!("error: {e}"))?;
            r.cpu_bind = Some(v)
        }
        "distribution" => {
            let v = not_empty(long)?;
            crate::model::binding::Distribution::parse(&v).map_err(|e| format!("error: {e}"))?;
            r.distribution = Some(v)
        }
        "gpu-bind" => {
            let v = not_empty(long)
                .map_err(|_| format!("error: Invalid --gpu-bind argument: {value}"))?;
            crate::model::binding::GpuBind::parse(&v).map_err(|e| format!("error: {e}"))?;
            r.gpu_bind = Some(v)
        }
        _ => {}
    }
    Ok(None)
}

impl ResLayer {
    /// Field by field, `self` wins over `lower`.
    pub(crate) fn over(self, lower: ResLayer) -> ResLayer {
        ResLayer {
            gres: self.gres.or(lower.gres),
            gpus: self.gpus.or(lower.gpus),
            gpus_per_node: self.gpus_per_node.or(lower.gpus_per_node),
            gpus_per_task: self.gpus_per_task.or(lower.gpus_per_task),
            gpus_per_socket: self.gpus_per_socket.or(lower.gpus_per_socket),
            cpus_per_gpu: self.cpus_per_gpu.or(lower.cpus_per_gpu),
            mem_per_gpu_mb: self.mem_per_gpu_mb.or(lower.mem_per_gpu_mb),
            gres_flags: self.gres_flags.or(lower.gres_flags),
            sockets_per_node: self.sockets_per_node.or(lower.sockets_per_node),
            cores_per_socket: self.cores_per_socket.or(lower.cores_per_socket),
            threads_per_core: self.threads_per_core.or(lower.threads_per_core),
            extra_node_info: self.extra_node_info || lower.extra_node_info,
            ntasks_per_socket: self.ntasks_per_socket.or(lower.ntasks_per_socket),
            ntasks_per_core: self.ntasks_per_core.or(lower.ntasks_per_core),
            hint: self.hint.or(lower.hint),
            cpu_bind: self.cpu_bind.or(lower.cpu_bind),
            distribution: self.distribution.or(lower.distribution),
            gpu_bind: self.gpu_bind.or(lower.gpu_bind),
        }
    }

    /// Options `--hint` cannot be combined with: `--ntasks-per-core`,
    /// `--threads-per-core`, `-B`, and a `--cpu-bind` other than `verbose`.
    fn hint_rivals(&self) -> bool {
        self.ntasks_per_core.is_some()
            || self.threads_per_core.is_some()
            || self.extra_node_info
            || self
                .cpu_bind
                .as_deref()
                .is_some_and(|b| !b.eq_ignore_ascii_case("verbose"))
    }

    fn clear_hint_rivals(&mut self) {
        self.ntasks_per_core = None;
        self.threads_per_core = None;
        // Slurm resets -B's fields whole.
        if self.extra_node_info {
            self.sockets_per_node = None;
            self.cores_per_socket = None;
        }
        self.extra_node_info = false;
        self.cpu_bind = None;
    }
}

/// Apply `--hint`'s rules (Slurm's `validate_hint_option`) to the three
/// layers; the command line and script directives count as one level (Slurm
/// reads both as options), the environment as the other. `--hint` with a
/// rival on the same level is ignored (with a note, which Slurm prints only
/// when verbose); one given on the command line drops the other's
/// environment value.
fn settle_hint(
    cmd: &mut ResLayer,
    env: &mut ResLayer,
    dir: &mut ResLayer,
    prog: &str,
) -> Option<String> {
    let cli = cmd.clone().over(dir.clone());
    let note = |tail: &str, what: &str| {
        format!(
            "{prog}: Following options are mutually exclusive with --hint: \
             --ntasks-per-core, --threads-per-core, -B and --cpu-bind{tail}. Ignoring {what}."
        )
    };
    if cli.hint.is_some() && cli.hint_rivals() {
        for l in [cmd, env, dir] {
            l.hint = None;
        }
        return Some(note(" (other then --cpu-bind=verbose)", "--hint"));
    }
    if cli.hint.is_some() {
        env.clear_hint_rivals();
    } else if cli.hint_rivals() {
        env.hint = None;
    } else if env.hint.is_some() && env.hint_rivals() {
        env.hint = None;
        return Some(note(
            ", but more than one set by environment variables",
            "SLURM_HINT",
        ));
    }
    None
}

/// The memory option kinds given by one level (command line, environment).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct MemKinds {
    pub mem: bool,
    pub per_cpu: bool,
    pub per_gpu: bool,
}

impl MemKinds {
    fn count(self) -> usize {
        usize::from(self.mem) + usize::from(self.per_cpu) + usize::from(self.per_gpu)
    }
}

/// Slurm's rule for `--mem`, `--mem-per-cpu` and `--mem-per-gpu`: two on
/// the command line is fatal; one there drops the environment's others; two
/// in the environment alone is fatal. Returns which level's values stand
/// (`true`: the command line's), or the fatal text after `prog: `.
pub(crate) fn settle_memory(cli: MemKinds, env: MemKinds) -> Result<bool, String> {
    if cli.count() > 1 {
        return Err(
            "fatal: --mem, --mem-per-cpu, and --mem-per-gpu are mutually exclusive.".into(),
        );
    }
    if cli.count() == 1 {
        return Ok(true);
    }
    if env.count() > 1 {
        return Err(
            "fatal: SLURM_MEM_PER_CPU, SLURM_MEM_PER_GPU, and SLURM_MEM_PER_NODE \
                    are mutually exclusive."
                .into(),
        );
    }
    Ok(false)
}

/// Merge the three sources' resource options (command line, then the
/// environment, then script directives) by Slurm's rules into the request,
/// with the note of the `--hint` rule when it dropped something.
/// `mem_from_cli` (from [`settle_memory`]) says whether the command line's
/// (or script's) `--mem-per-gpu` stands, else the environment's.
pub(crate) fn resolve(
    mut cmd: ResLayer,
    mut env: ResLayer,
    mut dir: ResLayer,
    mem_from_cli: bool,
    prog: &str,
) -> (ResourceRequest, Option<String>) {
    let note = settle_hint(&mut cmd, &mut env, &mut dir, prog);
    let mem_per_gpu_mb = if mem_from_cli {
        cmd.mem_per_gpu_mb.or(dir.mem_per_gpu_mb)
    } else {
        env.mem_per_gpu_mb
    };
    let r = cmd.over(env).over(dir);
    let req = ResourceRequest {
        gres_none: r.gres.as_ref().is_some_and(Vec::is_empty),
        gres: r.gres.unwrap_or_default(),
        gpus: r.gpus,
        gpus_per_node: r.gpus_per_node,
        gpus_per_task: r.gpus_per_task,
        gpus_per_socket: r.gpus_per_socket,
        cpus_per_gpu: r.cpus_per_gpu,
        mem_per_gpu_mb,
        gres_flags: r.gres_flags,
        sockets_per_node: r.sockets_per_node,
        cores_per_socket: r.cores_per_socket,
        threads_per_core: r.threads_per_core,
        ntasks_per_socket: r.ntasks_per_socket,
        ntasks_per_core: r.ntasks_per_core,
        hint: r.hint,
        cpu_bind: r.cpu_bind,
        distribution: r.distribution,
        gpu_bind: r.gpu_bind,
    };
    (req, note)
}

/// `[type:]count`, as a `--gpus*` option is written.
fn gpus_text(g: &GresRequest) -> String {
    match &g.type_ {
        Some(t) => format!("{t}:{}", g.count),
        None => g.count.to_string(),
    }
}

/// The variables sbatch puts in the job's environment and salloc in its
/// command's for what was asked (Slurm 22.05's `set_env_from_opts`, plus
/// sbatch's and salloc's task-shape echoes). srun inside the job reads the
/// GPU ones back ([`SRUN_ENV`]): that is how a step inherits the job's
/// request. `batch`: sbatch (which also echoes `-m` and
/// `--threads-per-core`).
pub(crate) fn option_env(r: &ResourceRequest, batch: bool) -> Vec<(String, String)> {
    let mut v: Vec<(&str, String)> = Vec::new();
    if let Some(n) = r.cpus_per_gpu {
        v.push(("SLURM_CPUS_PER_GPU", n.to_string()));
    }
    if let Some(g) = &r.gpus {
        v.push(("SLURM_GPUS", gpus_text(g)));
    }
    if let Some(b) = &r.gpu_bind {
        v.push(("SLURM_GPU_BIND", b.clone()));
    }
    for (var, g) in [
        ("SLURM_GPUS_PER_NODE", &r.gpus_per_node),
        ("SLURM_GPUS_PER_SOCKET", &r.gpus_per_socket),
        ("SLURM_GPUS_PER_TASK", &r.gpus_per_task),
    ] {
        if let Some(g) = g {
            v.push((var, gpus_text(g)));
        }
    }
    if let Some(mb) = r.mem_per_gpu_mb {
        v.push(("SLURM_MEM_PER_GPU", mb.to_string()));
    }
    if let Some(n) = r.ntasks_per_core {
        v.push(("SLURM_NTASKS_PER_CORE", n.to_string()));
    }
    if let Some(n) = r.ntasks_per_socket {
        v.push(("SLURM_NTASKS_PER_SOCKET", n.to_string()));
    }
    if batch {
        if let Some(d) = &r.distribution {
            v.push(("SLURM_DISTRIBUTION", d.clone()));
        }
        if let Some(n) = r.threads_per_core {
            v.push(("SLURM_THREADS_PER_CORE", n.to_string()));
        }
    }
    v.into_iter().map(|(k, val)| (k.to_string(), val)).collect()
}

/// The GRES names a request asks for, to check against GresTypes.
pub(crate) fn request_names(r: &ResourceRequest) -> Vec<String> {
    let mut names: Vec<String> = r.gres.iter().map(|g| g.name.clone()).collect();
    if r.gpus.is_some()
        || r.gpus_per_node.is_some()
        || r.gpus_per_task.is_some()
        || r.gpus_per_socket.is_some()
    {
        names.push("gpu".into());
    }
    let mut seen = Vec::new();
    names.retain(|n| {
        let first = !seen.contains(n);
        seen.push(n.clone());
        first
    });
    names
}
