//! The environment: the `SBATCH_*` input variables and the options they stand for (the
//! middle layer of Slurm's precedence: command line > environment > directives), and the
//! job's environment under `--export`.
//!
//! Does not: parse option values (`options` and `values` do) or merge the layers (the
//! parent module does).

use super::*;

/// `SBATCH_*` input variables and the option each stands for.
pub(super) const ENV_OPTIONS: &[(&str, &str)] = &[
    ("SBATCH_JOB_NAME", "job-name"),
    ("SBATCH_PARTITION", "partition"),
    ("SBATCH_TIMELIMIT", "time"),
    ("SBATCH_MEM_PER_NODE", "mem"),
    ("SBATCH_MEM_PER_CPU", "mem-per-cpu"),
    ("SBATCH_EXPORT", "export"),
    ("SBATCH_OUTPUT", "output"),
    ("SBATCH_ERROR", "error"),
    ("SBATCH_INPUT", "input"),
    ("SBATCH_OPEN_MODE", "open-mode"),
    ("SBATCH_ACCOUNT", "account"),
    ("SBATCH_ARRAY_INX", "array"),
    ("SBATCH_CLUSTERS", "clusters"),
    ("SBATCH_CONSTRAINT", "constraint"),
    ("SBATCH_EXCLUSIVE", "exclusive"),
    ("SBATCH_GPUS", "gpus"),
    ("SBATCH_GRES", "gres"),
    ("SBATCH_NO_REQUEUE", "no-requeue"),
    ("SBATCH_QOS", "qos"),
    ("SBATCH_REQUEUE", "requeue"),
    ("SBATCH_RESERVATION", "reservation"),
    ("SBATCH_SIGNAL", "signal"),
    ("SBATCH_WAIT", "wait"),
    ("SBATCH_WCKEY", "wckey"),
];

/// The options set by `SBATCH_*` variables (empty values count as unset).
pub(super) fn env_layer(
    ctx: &SubmitContext,
    warnings: &mut Vec<String>,
) -> Result<Layer, SbatchError> {
    let mut layer = Layer::default();
    for &(var, long) in ENV_OPTIONS.iter().chain(super::resources::SBATCH_ENV) {
        let Some(value) = lookup(&ctx.env, var).filter(|v| !v.is_empty()) else {
            continue;
        };
        let spec = find_long(long)?;
        let value = (spec.arg != Flag).then_some(value);
        apply(&mut layer, spec, value, Source::Env(var), warnings)?;
    }
    Ok(layer)
}

pub(super) fn lookup<'a>(env: &'a [(String, String)], key: &str) -> Option<&'a str> {
    env.iter()
        .rev()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

/// The job's environment under `--export` (default `ALL`). `SLURM_*`
/// variables always pass; `NONE`/`NIL` pass nothing else; a list passes the
/// named variables (`VAR` takes the caller's value, `VAR=value` sets one),
/// on top of everything when the list includes `ALL`.
pub(crate) fn export_env(spec: Option<&str>, caller: &[(String, String)]) -> Vec<(String, String)> {
    let items = export_items(spec.unwrap_or("ALL"));
    let all = items.iter().any(|i| i.eq_ignore_ascii_case("ALL"));
    let mut env: Vec<(String, String)> = caller
        .iter()
        .filter(|(k, _)| all || k.starts_with("SLURM_"))
        .cloned()
        .collect();
    for item in &items {
        if ["ALL", "NONE", "NIL"]
            .iter()
            .any(|kw| item.eq_ignore_ascii_case(kw))
        {
            continue;
        }
        let (key, value) = match item.split_once('=') {
            Some((k, v)) => (k, Some(v)),
            None => (item.as_str(), lookup(caller, item)),
        };
        if let Some(value) = value {
            set_var(&mut env, key, value);
        }
    }
    env
}

/// Split an `--export` list on commas. A piece that does not start a new
/// variable (`NAME` or `NAME=...`) continues the previous value, so
/// `A=x,y,B=1` gives `A=x,y` and `B=1`.
pub(super) fn export_items(spec: &str) -> Vec<String> {
    let mut items: Vec<String> = Vec::new();
    for piece in spec.split(',') {
        let name = piece.split_once('=').map_or(piece, |(n, _)| n);
        match items.last_mut() {
            Some(prev) if !is_var_name(name) && prev.contains('=') => {
                prev.push(',');
                prev.push_str(piece);
            }
            _ if piece.is_empty() => {}
            _ => items.push(piece.to_string()),
        }
    }
    items
}

pub(super) fn is_var_name(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
}

pub(super) fn set_var(env: &mut Vec<(String, String)>, key: &str, value: &str) {
    match env.iter_mut().find(|(k, _)| k == key) {
        Some(slot) => slot.1 = value.to_string(),
        None => env.push((key.to_string(), value.to_string())),
    }
}
