//! Job arrays: the `--array` syntax and the compact index-set form squeue,
//! sacct and scontrol print (`0-15%4`, `1,3,5`, `1-7:2`).
//!
//! Owns parsing a spec into sorted unique indices and writing indices back
//! out. Does not: assign job ids or schedule tasks (the controller and
//! [`super::table`] do), or check MaxArraySize (the controller's limit).
//! Written here rather than taken from a crate: no published crate speaks
//! Slurm's array grammar, and it is a few dozen lines.

use thiserror::Error;

use crate::model::job::ArraySpec;

/// Far above any MaxArraySize Slurm allows (4,000,001), so a typo like
/// `0-4000000000` is refused before it allocates anything.
const MAX_INDEX: u32 = 4_000_000;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ArrayError {
    #[error("empty --array specification")]
    Empty,
    #[error("invalid --array element \"{0}\": expected N, N-M or N-M:S")]
    Element(String),
    #[error("invalid --array range \"{0}\": the end is below the start")]
    Reversed(String),
    #[error("invalid --array step in \"{0}\": the step must be at least 1")]
    Step(String),
    #[error("invalid --array throttle \"{0}\": expected %N with N a number")]
    Throttle(String),
    #[error("--array index {0} is larger than canopy accepts ({MAX_INDEX})")]
    TooLarge(u32),
}

/// Parse `a-b[:s][,c...][%max]`.
pub fn parse(spec: &str) -> Result<ArraySpec, ArrayError> {
    let (list, throttle) = match spec.split_once('%') {
        Some((l, t)) => {
            let n = t
                .trim()
                .parse::<u32>()
                .map_err(|_| ArrayError::Throttle(t.to_string()))?;
            // `%0` means "no limit" in Slurm.
            (l, (n > 0).then_some(n))
        }
        None => (spec, None),
    };
    let mut indices = Vec::new();
    let mut steps = Vec::new();
    for elem in list.split(',') {
        let elem = elem.trim();
        if elem.is_empty() {
            return Err(if list.trim().is_empty() {
                ArrayError::Empty
            } else {
                ArrayError::Element(spec.to_string())
            });
        }
        let (range, step) = match elem.split_once(':') {
            Some((r, s)) => {
                let s: u32 = s.parse().map_err(|_| ArrayError::Element(elem.into()))?;
                if s == 0 {
                    return Err(ArrayError::Step(elem.into()));
                }
                (r, s)
            }
            None => (elem, 1),
        };
        let (lo, hi) = match range.split_once('-') {
            Some((a, b)) => (index(a, elem)?, index(b, elem)?),
            None => {
                let i = index(range, elem)?;
                (i, i)
            }
        };
        if hi < lo {
            return Err(ArrayError::Reversed(elem.into()));
        }
        if lo != hi {
            steps.push(step);
        }
        indices.extend((lo..=hi).step_by(step as usize));
    }
    indices.sort_unstable();
    indices.dedup();
    // SLURM_ARRAY_TASK_STEP: the one step given, else 1.
    steps.dedup();
    let step = match steps.as_slice() {
        [s] => *s,
        _ => 1,
    };
    Ok(ArraySpec {
        indices,
        step,
        throttle,
    })
}

fn index(text: &str, elem: &str) -> Result<u32, ArrayError> {
    let t = text.trim();
    if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) {
        return Err(ArrayError::Element(elem.to_string()));
    }
    let n: u32 = t.parse().map_err(|_| ArrayError::TooLarge(u32::MAX))?;
    if n > MAX_INDEX {
        return Err(ArrayError::TooLarge(n));
    }
    Ok(n)
}

/// Sorted indices in Slurm's compact form: runs become `a-b`, evenly spaced
/// runs of three or more become `a-b:s`, the rest are listed (`0-3,7,9-15:2`).
pub fn compress(indices: &[u32]) -> String {
    let mut out = String::new();
    let mut i = 0;
    while i < indices.len() {
        let start = indices[i];
        let step = indices.get(i + 1).map(|n| n - start);
        // Extend while the spacing stays the same.
        let mut j = i;
        if let Some(s) = step {
            while j + 1 < indices.len() && indices[j + 1] - indices[j] == s {
                j += 1;
            }
        }
        let len = j - i + 1;
        if !out.is_empty() {
            out.push(',');
        }
        match step {
            Some(1) if len >= 2 => {
                out.push_str(&format!("{start}-{}", indices[j]));
                i = j + 1;
            }
            Some(s) if len >= 3 => {
                out.push_str(&format!("{start}-{}:{s}", indices[j]));
                i = j + 1;
            }
            _ => {
                out.push_str(&start.to_string());
                i += 1;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn idx(s: &str) -> Vec<u32> {
        parse(s).unwrap().indices
    }

    #[test]
    fn ranges_lists_steps_and_throttles() {
        assert_eq!(idx("0-3"), vec![0, 1, 2, 3]);
        assert_eq!(idx("1,3,5"), vec![1, 3, 5]);
        assert_eq!(idx("1-7:2"), vec![1, 3, 5, 7]);
        assert_eq!(idx("5,1-2,2"), vec![1, 2, 5]);
        let s = parse("0-15%4").unwrap();
        assert_eq!((s.indices.len(), s.throttle, s.step), (16, Some(4), 1));
        assert_eq!(parse("0-2%0").unwrap().throttle, None);
        assert_eq!(parse("1-9:3").unwrap().step, 3);
        assert_eq!(parse("7").unwrap().step, 1);
    }

    #[test]
    fn bad_specs_name_the_problem() {
        assert_eq!(parse(""), Err(ArrayError::Empty));
        assert_eq!(parse("%3"), Err(ArrayError::Empty));
        assert_eq!(parse("1,,2"), Err(ArrayError::Element("1,,2".into())));
        assert_eq!(parse("a-3"), Err(ArrayError::Element("a-3".into())));
        assert_eq!(parse("-3"), Err(ArrayError::Element("-3".into())));
        assert_eq!(parse("5-2"), Err(ArrayError::Reversed("5-2".into())));
        assert_eq!(parse("1-5:0"), Err(ArrayError::Step("1-5:0".into())));
        assert_eq!(parse("1-5:x"), Err(ArrayError::Element("1-5:x".into())));
        assert_eq!(parse("1-5%x"), Err(ArrayError::Throttle("x".into())));
        assert_eq!(parse("0-5000000"), Err(ArrayError::TooLarge(5_000_000)));
        assert!(parse("99999999999").is_err());
    }

    #[test]
    fn compress_writes_slurms_compact_form() {
        assert_eq!(compress(&[0, 1, 2, 3]), "0-3");
        assert_eq!(compress(&[1, 3, 5, 7]), "1-7:2");
        assert_eq!(compress(&[1, 3]), "1,3");
        assert_eq!(compress(&[0, 1, 2, 3, 7, 9, 11, 13, 15]), "0-3,7-15:2");
        assert_eq!(compress(&[4]), "4");
        assert_eq!(compress(&[]), "");
        assert_eq!(compress(&idx("1-7:2")), "1-7:2");
    }
}
