//! The value grammars of sbatch's options: node counts and ranges, time limits, memory
//! sizes, `--begin`, `--signal`, `--nice`, `--priority`, `--exclusive`, `--open-mode`,
//! `--gres`/`--gpus` names, output paths, and the rule for memory options given by more
//! than one source. Each returns the value or Slurm's formatted error.
//!
//! Does not: know option names or sources (`options` does), or build the request.

use super::*;

/// `--begin`: any time Slurm's parser reads, in local time; an incomplete
/// date means the next one to come.
pub(super) fn parse_begin(value: &str) -> Result<UnixTime, SbatchError> {
    use crate::cli::sacct_args::{parse_slurm_time, Tense};
    let now = chrono::Utc::now().timestamp();
    match parse_slurm_time(value, now, &chrono::Local, Tense::Future) {
        Ok(Some(t)) => Ok(t),
        _ => Err(SbatchError::InvalidBegin {
            value: value.to_string(),
        }),
    }
}

/// The error for a generic resource the cluster does not define, as
/// Slurm's commands give it (before anything is submitted).
pub(crate) fn check_gres(asked: &[String], defined: &[String]) -> Result<(), String> {
    match asked.iter().find(|g| !defined.contains(g)) {
        Some(_) => Err("Invalid generic resource (gres) specification".into()),
        None => Ok(()),
    }
}

/// `--exclusive[=user|mcs]`; a bare `--exclusive` is whole nodes.
pub(super) fn parse_exclusive(value: Option<&str>) -> Result<Exclusive, SbatchError> {
    match value.map(str::to_ascii_lowercase).as_deref() {
        None | Some("") => Ok(Exclusive::Node),
        Some("user") => Ok(Exclusive::User),
        Some("mcs") => Ok(Exclusive::Mcs),
        Some(_) => Err(SbatchError::InvalidExclusive),
    }
}

/// `--nice[=adj]`: a bare `--nice` is 100. The value is read as C's atoi
/// reads it (Slurm's sbatch does), so junk is 0; the range is Slurm's.
pub(crate) fn parse_nice(value: Option<&str>) -> Result<i32, SbatchError> {
    const LIMIT: i64 = 2_147_483_645;
    let Some(v) = value else {
        return Ok(100);
    };
    let n = atoi(v);
    if n.abs() > LIMIT {
        return Err(SbatchError::InvalidNice);
    }
    Ok(n as i32)
}

/// `--priority=N|TOP`: `TOP` is the highest priority an operator can give.
pub(crate) fn parse_priority(v: &str) -> Result<u32, SbatchError> {
    if v.eq_ignore_ascii_case("top") {
        return Ok(u32::MAX - 1);
    }
    let n = atoi(v);
    if n < 0 {
        return Err(SbatchError::NegativePriority);
    }
    u32::try_from(n)
        .ok()
        .filter(|&p| p < u32::MAX - 1)
        .ok_or(SbatchError::PriorityTooLarge)
}

/// C's `atoi`/`strtoll` reading: optional blanks and sign, then digits up to
/// the first non-digit; nothing readable is 0. Saturates instead of wrapping.
pub(super) fn atoi(text: &str) -> i64 {
    let t = text.trim_start();
    let (sign, digits) = match t.strip_prefix('-') {
        Some(rest) => (-1, rest),
        None => (1, t.strip_prefix('+').unwrap_or(t)),
    };
    let mut n: i64 = 0;
    for c in digits.chars().map_while(|c| c.to_digit(10)) {
        n = n.saturating_mul(10).saturating_add(i64::from(c));
    }
    sign * n
}

/// `--open-mode=append|truncate`: true for append. Slurm looks only at the
/// first letter, and a bad value is reported and ignored (truncate).
pub(super) fn parse_open_mode(value: &str, warnings: &mut Vec<String>) -> bool {
    match value.chars().next() {
        Some('a' | 'A') => true,
        Some('t' | 'T') => false,
        _ => {
            push_once(
                warnings,
                format!("sbatch: error: Invalid --open-mode argument: {value}. Ignored"),
            );
            false
        }
    }
}

pub(super) fn push_once(warnings: &mut Vec<String>, line: String) {
    if !warnings.contains(&line) {
        warnings.push(line);
    }
}

/// A count that must be a positive decimal integer.
pub(super) fn parse_positive(option: &'static str, value: &str) -> Result<u32, SbatchError> {
    value
        .parse::<u32>()
        .ok()
        .filter(|&n| n > 0)
        .ok_or_else(|| SbatchError::InvalidNumber {
            option,
            value: value.to_string(),
        })
}

/// `--signal=[{R|B}:]SIG[@secs]` (60 s when no time is given). `R:` (may
/// overlap a reservation) is accepted but not kept: such a job still does
/// not start where its time limit would reach a reservation.
pub(crate) fn parse_warn_signal(value: &str) -> Result<SignalSpec, SbatchError> {
    let bad = || SbatchError::InvalidSignal {
        value: value.to_string(),
    };
    let (flags, rest) = match value.split_once(':') {
        Some((f, r)) if !f.is_empty() && f.chars().all(|c| matches!(c, 'B' | 'R' | 'b' | 'r')) => {
            (f, r)
        }
        Some(_) => return Err(bad()),
        None => ("", value),
    };
    let (sig, secs) = match rest.split_once('@') {
        Some((s, t)) => (s, t.parse::<u32>().map_err(|_| bad())?),
        None => (rest, 60),
    };
    if secs > 0xffff {
        return Err(bad());
    }
    let signal = crate::cli::scancel::parse_signal(sig).ok_or_else(bad)?;
    Ok(SignalSpec {
        signal,
        secs,
        batch_only: flags.contains(['B', 'b']),
    })
}

/// `-N`: `n`, `min-max` or `-max` (minimum 1); counts may end in k/K
/// (×1024) or m/M (×1024²), as in Slurm.
pub(super) fn parse_nodes(arg: &str) -> Result<(u32, u32), SbatchError> {
    let (min, max) = match arg.split_once('-') {
        Some((lo, hi)) => {
            let min = if lo.trim().is_empty() {
                1
            } else {
                node_count(lo)?.max(1)
            };
            (min, node_count(hi)?)
        }
        None => {
            let n = node_count(arg)?;
            if n == 0 {
                return Err(SbatchError::InvalidNodeCount {
                    value: arg.to_string(),
                });
            }
            (n, n)
        }
    };
    if max < min {
        return Err(SbatchError::NodeRange { min, max });
    }
    Ok((min, max))
}

pub(super) fn node_count(text: &str) -> Result<u32, SbatchError> {
    let invalid = || SbatchError::InvalidNodeCount {
        value: text.to_string(),
    };
    let t = text.trim();
    let digits_end = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, suffix) = t.split_at(digits_end);
    let n: u32 = digits.parse().map_err(|_| invalid())?;
    let factor: u32 = match suffix {
        "" => 1,
        "k" | "K" => 1024,
        "m" | "M" => 1024 * 1024,
        _ => return Err(invalid()),
    };
    n.checked_mul(factor).ok_or_else(invalid)
}

/// `-t`: minutes, with `Some(0)` standing for "no limit".
pub(super) fn parse_time(value: &str) -> Result<u32, SbatchError> {
    match units::parse_time_limit_min(value) {
        Ok(Some(minutes)) => Ok(minutes),
        Ok(None) => Ok(0),
        Err(_) => Err(SbatchError::InvalidTime {
            value: value.to_string(),
        }),
    }
}

pub(super) fn parse_memory(option: &'static str, value: &str) -> Result<u64, SbatchError> {
    units::parse_mem_mb(value).map_err(|_| SbatchError::InvalidMemory {
        option,
        value: value.to_string(),
    })
}

/// `-o/-e/-i none` means /dev/null (any case), as in Slurm.
pub(super) fn stream_path(value: &str) -> String {
    if value.eq_ignore_ascii_case("none") {
        "/dev/null".to_string()
    } else {
        value.to_string()
    }
}

/// Memory options across sources (Slurm's rule, see
/// [`super::resources::settle_memory`]): the command line and the script
/// count as one level, the environment as the other. Returns (per node, per
/// CPU, whether the command line's or script's values stand).
pub(super) fn resolve_memory(
    cmd: &Layer,
    env: &Layer,
    dir: &Layer,
) -> Result<(Option<u64>, Option<u64>, bool), SbatchError> {
    let cli_mem = cmd.mem_mb.or(dir.mem_mb);
    let cli_per_cpu = cmd.mem_per_cpu_mb.or(dir.mem_per_cpu_mb);
    let cli = MemKinds {
        mem: cli_mem.is_some(),
        per_cpu: cli_per_cpu.is_some(),
        per_gpu: cmd.res.mem_per_gpu_mb.or(dir.res.mem_per_gpu_mb).is_some(),
    };
    let envk = MemKinds {
        mem: env.mem_mb.is_some(),
        per_cpu: env.mem_per_cpu_mb.is_some(),
        per_gpu: env.res.mem_per_gpu_mb.is_some(),
    };
    match settle_memory(cli, envk) {
        Err(_) if cli != MemKinds::default() => Err(SbatchError::MemoryConflict),
        Err(_) => Err(SbatchError::EnvMemoryConflict),
        Ok(true) => Ok((cli_mem, cli_per_cpu, true)),
        Ok(false) => Ok((env.mem_mb, env.mem_per_cpu_mb, false)),
    }
}
