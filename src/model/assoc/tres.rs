//! TRES limit strings as Slurm writes them: `cpu=4,mem=10G,node=2,gres/gpu=1`.
//! Memory is kept in MiB; each other TRES is a plain count. In an edit, a
//! value of `-1` clears that TRES (and a lone `-1` clears them all).

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

/// The TRES with fixed ids, in Slurm's id order (which is also the order
/// it prints them in); `gres/`, `license/` and `bb/` TRES follow by name.
const FIXED: &[&str] = &[
    "cpu", "mem", "energy", "node", "billing", "fs/disk", "vmem", "pages",
];

/// TRES name → limit. Memory (`mem`) in MiB.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tres(pub BTreeMap<String, u64>);

/// An edit to a TRES map: each named TRES set, or (`None`) cleared.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TresEdit {
    /// A lone `-1`: clear every TRES first.
    pub clear_all: bool,
    pub items: Vec<(String, Option<u64>)>,
}

/// A TRES string that does not parse; the text says what was wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct TresError(pub String);

fn known(name: &str) -> bool {
    FIXED.contains(&name)
        || ["gres/", "license/", "bb/"]
            .iter()
            .any(|p| name.strip_prefix(p).is_some_and(|rest| !rest.is_empty()))
}

fn rank(name: &str) -> (usize, &str) {
    match FIXED.iter().position(|f| *f == name) {
        Some(i) => (i, ""),
        None => (FIXED.len(), name),
    }
}

/// A count with an optional `K/M/G/T/P` multiplier (1024-based, as
/// Slurm's TRES strings take them); for `mem` the result is MiB and a bare
/// number is MiB.
fn parse_value(name: &str, text: &str) -> Option<u64> {
    let t = text.trim();
    let end = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, suffix) = t.split_at(end);
    let n: u64 = digits.parse().ok()?;
    let suffix = suffix.to_ascii_uppercase();
    let suffix = suffix.strip_suffix('B').unwrap_or(&suffix);
    if name == "mem" {
        let mult: u64 = match suffix {
            "" | "M" => 1,
            "G" => 1024,
            "T" => 1024 * 1024,
            "P" => 1024 * 1024 * 1024,
            "K" => return Some(n.div_ceil(1024)),
            _ => return None,
        };
        return n.checked_mul(mult);
    }
    let mult: u64 = match suffix {
        "" => 1,
        "K" => 1024,
        "M" => 1024 * 1024,
        "G" => 1024 * 1024 * 1024,
        _ => return None,
    };
    n.checked_mul(mult)
}

impl TresEdit {
    /// Parse `cpu=4,mem=10G,gres/gpu=-1` (or a lone `-1`). Names are
    /// case-insensitive; `gpu` alone is not a TRES (`gres/gpu` is).
    pub fn parse(text: &str) -> Result<TresEdit, TresError> {
        let text = text.trim();
        if text == "-1" {
            return Ok(TresEdit {
                clear_all: true,
                items: Vec::new(),
            });
        }
        let mut items = Vec::new();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let Some((name, value)) = part.split_once('=') else {
                return Err(TresError(format!(
                    "Invalid TRES '{part}': expected name=count (e.g. cpu=4,mem=10G,gres/gpu=2)"
                )));
            };
            let name = name.trim().to_ascii_lowercase();
            if !known(&name) {
                return Err(TresError(format!("Invalid TRES name '{name}' in '{part}'")));
            }
            let v = if value.trim() == "-1" {
                None
            } else {
                Some(parse_value(&name, value).ok_or_else(|| {
                    TresError(format!("Invalid TRES count '{}' for {name}", value.trim()))
                })?)
            };
            items.push((name, v));
        }
        if items.is_empty() {
            return Err(TresError(format!("Invalid TRES string '{text}'")));
        }
        Ok(TresEdit {
            clear_all: false,
            items,
        })
    }

    /// Apply the edit to `t`.
    pub fn apply(&self, t: &mut Tres) {
        if self.clear_all {
            t.0.clear();
        }
        for (name, v) in &self.items {
            match v {
                Some(v) => {
                    t.0.insert(name.clone(), *v);
                }
                None => {
                    t.0.remove(name);
                }
            }
        }
    }
}

impl fmt::Display for TresEdit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.clear_all {
            return f.write_str("-1");
        }
        let mut first = true;
        for (name, v) in &self.items {
            if !first {
                f.write_str(",")?;
            }
            first = false;
            match v {
                Some(v) => write!(f, "{name}={}", fmt_value(name, *v))?,
                None => write!(f, "{name}=-1")?,
            }
        }
        Ok(())
    }
}

/// `mem` the way sacctmgr prints it: in the largest unit that divides
/// it exactly (`10G`, `1500M`).
fn fmt_value(name: &str, v: u64) -> String {
    if name != "mem" {
        return v.to_string();
    }
    let mut v = v;
    let mut unit = 0;
    const UNITS: [char; 4] = ['M', 'G', 'T', 'P'];
    while v != 0 && v % 1024 == 0 && unit + 1 < UNITS.len() {
        v /= 1024;
        unit += 1;
    }
    format!("{v}{}", UNITS[unit])
}

impl Tres {
    pub fn get(&self, name: &str) -> Option<u64> {
        self.0.get(name).copied()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Names in Slurm's order.
    fn ordered(&self) -> Vec<(&String, &u64)> {
        let mut v: Vec<_> = self.0.iter().collect();
        v.sort_by(|a, b| rank(a.0).cmp(&rank(b.0)));
        v
    }
}

impl Tres {
    /// `name=count` in Slurm's order with plain numbers (memory in MiB),
    /// as sshare prints a TRES array: `cpu=100,mem=10240`.
    pub fn plain(&self) -> String {
        self.ordered()
            .into_iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Every TRES Slurm counts by default (`cpu`, `mem`, `energy`,
    /// `node`, `billing`, `fs/disk`, `vmem`, `pages`), then `extra` ones
    /// (`gres/gpu`), each with its value here or 0: sshare's GrpTRESRaw
    /// and TRESRunMins.
    pub fn full(&self, extra: &[String]) -> String {
        FIXED
            .iter()
            .copied()
            .chain(
                extra
                    .iter()
                    .map(String::as_str)
                    .filter(|e| !FIXED.contains(e)),
            )
            .map(|k| format!("{k}={}", self.get(k).unwrap_or(0)))
            .collect::<Vec<_>>()
            .join(",")
    }
}

impl fmt::Display for Tres {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (name, v)) in self.ordered().into_iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{name}={}", fmt_value(name, *v))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints_in_slurms_order_and_units() {
        let e = TresEdit::parse("gres/gpu=1,Mem=10G,node=2,cpu=4,billing=9").unwrap();
        let mut t = Tres::default();
        e.apply(&mut t);
        assert_eq!(t.to_string(), "cpu=4,mem=10G,node=2,billing=9,gres/gpu=1");
        assert_eq!(t.get("mem"), Some(10240));
        TresEdit::parse("mem=1500,cpu=-1").unwrap().apply(&mut t);
        assert_eq!(t.to_string(), "mem=1500M,node=2,billing=9,gres/gpu=1");
        TresEdit::parse("-1").unwrap().apply(&mut t);
        assert!(t.is_empty());
    }

    #[test]
    fn bad_strings_say_what_is_wrong() {
        assert!(TresEdit::parse("gpu=1").unwrap_err().0.contains("'gpu'"));
        assert!(TresEdit::parse("cpu").unwrap_err().0.contains("name=count"));
        assert!(TresEdit::parse("cpu=x").unwrap_err().0.contains("'x'"));
        assert!(TresEdit::parse("mem=3Q").is_err());
        assert!(TresEdit::parse("").is_err());
    }
}
