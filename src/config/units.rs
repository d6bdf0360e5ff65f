//! Slurm's textual units: durations (`1-12:00:00`, `30`, `UNLIMITED`), plain second counts
//! used by slurm.conf timeouts, and memory sizes (`4G`, `3584MB`, bare MiB).
//!
//! Parsing only: formatting durations and sizes for output belongs to the CLI. Callers decide
//! what a zero limit means (`-t 0` is "no limit" for sbatch but a real value elsewhere).

use thiserror::Error;

/// Why a duration, second count or memory size could not be read.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum UnitError {
    #[error(
        "'{text}' is not a duration: expected M, M:S, H:M:S, D-H, D-H:M, D-H:M:S, \
         -1, INFINITE or UNLIMITED"
    )]
    Duration { text: String },
    #[error("'{text}' is not a number of seconds: expected a non-negative integer")]
    Seconds { text: String },
    #[error(
        "'{text}' is not a memory size: expected an integer with an optional K, M, G or T \
         suffix and optional B (bare numbers are MiB)"
    )]
    Memory { text: String },
    #[error("'{text}' is too large: expected at most {limit}")]
    TooLarge { text: String, limit: String },
}

/// Words meaning "no limit" in every Slurm time field.
fn is_unlimited(s: &str) -> bool {
    s == "-1" || s.eq_ignore_ascii_case("INFINITE") || s.eq_ignore_ascii_case("UNLIMITED")
}

/// Parse a Slurm duration into seconds; `None` means unlimited.
///
/// With a `-` the text is days-hours[:minutes[:seconds]]; otherwise three colon fields are
/// hours:minutes:seconds and one or two are minutes[:seconds]. Fields are not range-checked
/// (`90` minutes and `0:90` are accepted, as Slurm does).
pub fn parse_duration_secs(s: &str) -> Result<Option<u64>, UnitError> {
    let text = s.trim();
    if is_unlimited(text) {
        return Ok(None);
    }
    let bad = || UnitError::Duration { text: text.into() };
    let (days, clock) = match text.split_once('-') {
        Some((days, clock)) => (Some(field(days).ok_or_else(bad)?), clock),
        None => (None, text),
    };
    let fields = clock
        .split(':')
        .map(field)
        .collect::<Option<Vec<u64>>>()
        .ok_or_else(bad)?;
    // Multipliers (in seconds) for each field, left to right.
    let scales: &[u64] = match (days.is_some(), fields.len()) {
        (true, 1) => &[3600],
        (true, 2) => &[3600, 60],
        (true, 3) | (false, 3) => &[3600, 60, 1],
        (false, 1) => &[60],
        (false, 2) => &[60, 1],
        _ => return Err(bad()),
    };
    let too_large = || UnitError::TooLarge {
        text: text.into(),
        limit: format!("{} seconds", u64::MAX),
    };
    let mut total = days
        .unwrap_or(0)
        .checked_mul(86_400)
        .ok_or_else(too_large)?;
    for (value, scale) in fields.iter().zip(scales) {
        total = value
            .checked_mul(*scale)
            .and_then(|v| total.checked_add(v))
            .ok_or_else(too_large)?;
    }
    Ok(Some(total))
}

/// One numeric field: ASCII digits only, no sign.
fn field(s: &str) -> Option<u64> {
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
        s.parse().ok()
    } else {
        None
    }
}

/// Parse a Slurm time limit into whole minutes, rounding leftover seconds up (so `0:30` is
/// one minute). `None` means unlimited; `0` is returned as `Some(0)`.
pub fn parse_time_limit_min(s: &str) -> Result<Option<u32>, UnitError> {
    let Some(secs) = parse_duration_secs(s)? else {
        return Ok(None);
    };
    let minutes = secs.div_ceil(60);
    u32::try_from(minutes)
        .map(Some)
        .map_err(|_| UnitError::TooLarge {
            text: s.trim().into(),
            limit: format!("{} minutes", u32::MAX),
        })
}

/// Parse a slurm.conf value given in plain seconds (SlurmdTimeout, MinJobAge, KillWait...).
pub fn parse_secs_plain(s: &str) -> Result<u64, UnitError> {
    let text = s.trim();
    field(text).ok_or_else(|| UnitError::Seconds { text: text.into() })
}

/// Parse a memory size into MiB: an integer, then optionally `K`, `M`, `G` or `T` (any
/// case), then optionally `B`. A bare number is MiB; kibibytes round up to a whole MiB.
pub fn parse_mem_mb(s: &str) -> Result<u64, UnitError> {
    let text = s.trim();
    let bad = || UnitError::Memory { text: text.into() };
    let digits_end = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, suffix) = text.split_at(digits_end);
    let value = field(digits).ok_or_else(bad)?;
    let unit = suffix
        .strip_suffix(['B', 'b'])
        // A lone `B` would read as bytes to a human but MiB to the grammar: refuse it.
        .filter(|unit| !unit.is_empty())
        .unwrap_or(suffix);
    let too_large = || UnitError::TooLarge {
        text: text.into(),
        limit: format!("{} MiB", u64::MAX),
    };
    match unit.to_ascii_uppercase().as_str() {
        "" | "M" => Ok(value),
        "K" => Ok(value.div_ceil(1024)),
        "G" => value.checked_mul(1024).ok_or_else(too_large),
        "T" => value.checked_mul(1024 * 1024).ok_or_else(too_large),
        _ => Err(bad()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duration_forms() {
        let cases = [
            ("30", 30 * 60),
            ("30:15", 30 * 60 + 15),
            ("2:30:15", 2 * 3600 + 30 * 60 + 15),
            ("1-2", 86_400 + 2 * 3600),
            ("1-2:30", 86_400 + 2 * 3600 + 30 * 60),
            ("1-2:30:15", 86_400 + 2 * 3600 + 30 * 60 + 15),
            ("0", 0),
            ("90", 90 * 60),
            (" 7-0 ", 7 * 86_400),
            ("0:90", 90),
        ];
        for (text, secs) in cases {
            assert_eq!(parse_duration_secs(text), Ok(Some(secs)), "{text}");
        }
    }

    #[test]
    fn unlimited_words_in_any_case() {
        for text in ["-1", "INFINITE", "infinite", "Unlimited", "UNLIMITED"] {
            assert_eq!(parse_duration_secs(text), Ok(None), "{text}");
            assert_eq!(parse_time_limit_min(text), Ok(None), "{text}");
        }
    }

    #[test]
    fn malformed_durations_are_errors_naming_the_text() {
        for text in [
            "",
            "abc",
            "1:2:3:4",
            "1-2:3:4:5",
            "-5",
            "1-",
            "1--2",
            ":5",
            "5:",
            "1.5",
            "+3",
            "1-a",
            "x-1",
        ] {
            let err = parse_duration_secs(text).unwrap_err();
            assert_eq!(
                err,
                UnitError::Duration {
                    text: text.trim().into()
                },
                "{text}"
            );
            assert!(err.to_string().contains("expected M, M:S"));
        }
    }

    #[test]
    fn overflowing_durations_are_errors() {
        let err = parse_duration_secs("99999999999999999-0").unwrap_err();
        assert!(matches!(err, UnitError::TooLarge { .. }), "{err:?}");
        let err = parse_duration_secs("999999999999999999").unwrap_err();
        assert!(matches!(err, UnitError::TooLarge { .. }), "{err:?}");
        let err = parse_duration_secs("1:999999999999999999:0").unwrap_err();
        assert!(matches!(err, UnitError::TooLarge { .. }), "{err:?}");
    }

    #[test]
    fn time_limits_round_seconds_up() {
        assert_eq!(parse_time_limit_min("0"), Ok(Some(0)));
        assert_eq!(parse_time_limit_min("0:01"), Ok(Some(1)));
        assert_eq!(parse_time_limit_min("10:00"), Ok(Some(10)));
        assert_eq!(parse_time_limit_min("10:59"), Ok(Some(11)));
        assert_eq!(parse_time_limit_min("1-0"), Ok(Some(1440)));
        assert_eq!(parse_time_limit_min("1:00:01"), Ok(Some(61)));
        assert!(parse_time_limit_min("bad").is_err());
        let err = parse_time_limit_min("99999999999").unwrap_err();
        assert!(
            matches!(&err, UnitError::TooLarge { limit, .. } if limit.contains("minutes")),
            "{err:?}"
        );
    }

    #[test]
    fn plain_seconds() {
        assert_eq!(parse_secs_plain("300"), Ok(300));
        assert_eq!(parse_secs_plain(" 0 "), Ok(0));
        for text in ["", "5m", "-1", "1:00", "99999999999999999999"] {
            assert_eq!(
                parse_secs_plain(text),
                Err(UnitError::Seconds { text: text.into() }),
                "{text}"
            );
        }
    }

    #[test]
    fn memory_sizes() {
        let cases = [
            ("100", 100),
            ("4G", 4096),
            ("4GB", 4096),
            ("4gb", 4096),
            ("3584MB", 3584),
            ("3584m", 3584),
            ("1T", 1024 * 1024),
            ("1tb", 1024 * 1024),
            ("1K", 1),
            ("1024K", 1),
            ("1025kB", 2),
            ("0", 0),
        ];
        for (text, mb) in cases {
            assert_eq!(parse_mem_mb(text), Ok(mb), "{text}");
        }
    }

    #[test]
    fn malformed_memory_sizes_are_errors_naming_the_text() {
        for text in ["", "G", "4X", "1.5G", "100B", "4GBB", "-4", "4 G"] {
            let err = parse_mem_mb(text).unwrap_err();
            assert_eq!(err, UnitError::Memory { text: text.into() }, "{text}");
            assert!(err.to_string().contains("optional K, M, G or T"));
        }
        let err = parse_mem_mb("99999999999999999T").unwrap_err();
        assert!(matches!(err, UnitError::TooLarge { .. }), "{err:?}");
    }
}
