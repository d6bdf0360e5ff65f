//! sacct's time window and Slurm's date grammar: for sacct's `-S`/`-E` (and sbatch's and
//! srun's `--begin`) `YYYY-MM-DD[THH:MM[:SS]]`, `MM/DD[/YY]`, `HH:MM[:SS][AM|PM]`,
//! `now[{+|-}N<unit>]`, `today`, `midnight`, `noon`, `teatime`, ... in local time.
//!
//! Owns: turning such text into Unix time, with Slurm's rules for missing years and
//! days ([`Tense`]) and for times a DST change skips or repeats, and the default window
//! sacct applies when `-S`/`-E` are not given (`Builder::window`). Does not: parse the
//! command line or check the window (start after end); the parent module does.

use super::*;

/// Midnight starting the local day that contains `now`.
pub(super) fn local_midnight<Tz: TimeZone>(now: UnixTime, tz: &Tz) -> UnixTime {
    tz.timestamp_opt(now, 0)
        .earliest()
        .and_then(|t| t.date_naive().and_hms_opt(0, 0, 0))
        .and_then(|naive| local_to_unix(naive, tz))
        .unwrap_or(now)
}

/// A local wall-clock time as Unix time. A time skipped by a DST jump is taken an hour
/// later, as `mktime` does; a repeated one resolves to its first occurrence.
pub(super) fn local_to_unix<Tz: TimeZone>(naive: NaiveDateTime, tz: &Tz) -> Option<UnixTime> {
    tz.from_local_datetime(&naive)
        .earliest()
        .or_else(|| {
            let later = naive.checked_add_signed(Duration::hours(1))?;
            tz.from_local_datetime(&later).earliest()
        })
        .map(|t| t.timestamp())
}

/// Relative-time units after `now+`/`now-`, longest spelling first.
pub(super) const DELTA_UNITS: &[(&str, i64)] = &[
    ("seconds", 1),
    ("second", 1),
    ("minutes", 60),
    ("minute", 60),
    ("hours", 3600),
    ("hour", 3600),
    ("days", 86_400),
    ("day", 86_400),
    ("weeks", 604_800),
    ("week", 604_800),
];

/// Named times of day.
pub(super) const NAMED_TIMES: &[(&str, u32)] = &[
    ("midnight", 0),
    ("noon", 12),
    ("elevenses", 11),
    ("fika", 15),
    ("teatime", 16),
];

/// A calendar date as given: (year if given, month 1-12, day 1-31).
pub(super) type DateParts = (Option<i32>, u32, u32);

/// A wall-clock time: (hour, minute, second).
pub(super) type ClockParts = (u32, u32, u32);

/// Date and time fields as the parser fills them in (`None` = not given).
#[derive(Debug, Default)]
pub(super) struct TimeParts {
    date: Option<DateParts>,
    time: Option<ClockParts>,
}

/// Whether an incomplete date names the last such date or the next one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tense {
    /// sacct's `-S`/`-E`: a date without a year is this year unless its
    /// month is still to come (then last year).
    Past,
    /// sbatch's `--begin`: a clock time already gone today means tomorrow,
    /// a date already gone this year means next year.
    Future,
}

/// Parses a Slurm date/time for `-S`/`-E` the way Slurm's `parse_time` does (with
/// `Tense::Past`): a time without a date means today, a date without a year means this
/// year unless that month is still to come (then last year), a date without a time
/// means 00:00. `Ok(None)` when the text names no time at all.
pub(super) fn parse_time_in<Tz: TimeZone>(
    text: &str,
    now: UnixTime,
    tz: &Tz,
) -> Result<Option<UnixTime>, SacctArgsError> {
    parse_slurm_time(text, now, tz, Tense::Past)
}

/// [`parse_time_in`] with the tense chosen.
pub(crate) fn parse_slurm_time<Tz: TimeZone>(
    text: &str,
    now: UnixTime,
    tz: &Tz,
    tense: Tense,
) -> Result<Option<UnixTime>, SacctArgsError> {
    let err = |pos: usize| SacctArgsError::InvalidTime {
        text: text.to_string(),
        pos,
    };
    if let Some(rest) = strip_prefix_ci(text, "uts") {
        return match rest.parse::<i64>() {
            Ok(secs) if secs >= 1_000_000 => Ok(Some(secs)),
            _ => Err(err(0)),
        };
    }
    let now_local = tz
        .timestamp_opt(now, 0)
        .earliest()
        .map(|t| t.naive_local())
        .ok_or_else(|| err(0))?;
    let bytes = text.as_bytes();
    let mut parts = TimeParts::default();
    let mut pos = 0;
    while let Some(&b) = bytes.get(pos) {
        if b == b'\n' {
            break;
        }
        if b == b' ' || b == b'\t' || b == b'-' || b == b'T' {
            pos += 1;
            continue;
        }
        let rest = text.get(pos..).unwrap_or_default();
        if strip_prefix_ci(rest, "today").is_some() {
            parts.date = Some(date_of(now_local));
            pos += 5;
        } else if strip_prefix_ci(rest, "tomorrow").is_some() {
            let tomorrow = now_local
                .checked_add_days(chrono::Days::new(1))
                .ok_or_else(|| err(pos))?;
            parts.date = Some(date_of(tomorrow));
            pos += 8;
        } else if let Some(&(word, hour)) = NAMED_TIMES
            .iter()
            .find(|(word, _)| strip_prefix_ci(rest, word).is_some())
        {
            parts.time = Some((hour, 0, 0));
            pos += word.len();
        } else if strip_prefix_ci(rest, "now").is_some() {
            let (delta, next) = now_delta(text, pos + 3).map_err(err)?;
            let then = Duration::try_seconds(delta)
                .and_then(|d| now_local.checked_add_signed(d))
                .ok_or_else(|| err(next))?;
            parts.date = Some(date_of(then));
            parts.time = Some((then.hour(), then.minute(), then.second()));
            pos = next;
        } else if !b.is_ascii_digit() {
            return Err(err(pos));
        } else if bytes.get(pos + 1) == Some(&b':') || bytes.get(pos + 2) == Some(&b':') {
            let (time, next) = clock_time(bytes, pos).map_err(err)?;
            parts.time = Some(time);
            pos = next;
        } else {
            let (date, next) = calendar_date(bytes, pos).map_err(err)?;
            parts.date = Some(date);
            pos = next;
        }
    }
    resolve(parts, now_local, tz, tense).map_err(|()| err(text.len()))
}

/// `text` without a case-insensitive ASCII `prefix`, if it starts with one.
pub(super) fn strip_prefix_ci<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    let head = text.as_bytes().get(..prefix.len())?;
    if head.eq_ignore_ascii_case(prefix.as_bytes()) {
        text.get(prefix.len()..)
    } else {
        None
    }
}

pub(super) fn date_of(t: NaiveDateTime) -> DateParts {
    (Some(t.year()), t.month(), t.day())
}

/// After `now` at `pos`: blanks, then optionally `+N[unit]` or `-N[unit]` (unit defaults to
/// seconds). Returns the signed delta in seconds and where parsing continues.
pub(super) fn now_delta(text: &str, mut pos: usize) -> Result<(i64, usize), usize> {
    let bytes = text.as_bytes();
    while matches!(bytes.get(pos), Some(b' ' | b'\t')) {
        pos += 1;
    }
    let sign_pos = pos;
    let sign = match bytes.get(pos) {
        None | Some(b'\n') => return Ok((0, pos)),
        Some(b'+') => 1,
        Some(b'-') => -1,
        Some(_) => return Err(pos),
    };
    pos += 1;
    let mut count: i64 = 0;
    let mut digits = 0;
    while let Some(&b) = bytes.get(pos) {
        if b == b'\n' {
            break;
        }
        if b.is_ascii_whitespace() {
            pos += 1;
            continue;
        }
        let rest = text.get(pos..).unwrap_or_default();
        if let Some(&(unit, scale)) = DELTA_UNITS
            .iter()
            .find(|(unit, _)| strip_prefix_ci(rest, unit).is_some())
        {
            count = count.saturating_mul(scale);
            pos += unit.len();
            break;
        }
        if !b.is_ascii_digit() {
            // Slurm reports the character before the one it could not read.
            return Err(pos - 1);
        }
        count = count.saturating_mul(10).saturating_add(i64::from(b - b'0'));
        digits += 1;
        pos += 1;
    }
    if digits == 0 {
        return Err(sign_pos);
    }
    Ok((sign * count, pos))
}

/// A one- or two-digit number at `pos` (two required when `two`) within `range`, and
/// where parsing continues. Errors carry the position Slurm reports: the offending
/// character, or the start of the number when it is out of range.
pub(super) fn small_number(
    bytes: &[u8],
    pos: usize,
    range: RangeInclusive<u32>,
    two: bool,
) -> Result<(u32, usize), usize> {
    let digit = |i: usize| {
        bytes
            .get(i)
            .filter(|b| b.is_ascii_digit())
            .map(|b| u32::from(b - b'0'))
    };
    let first = digit(pos).ok_or(pos)?;
    let (value, next) = match digit(pos + 1) {
        Some(second) => (first * 10 + second, pos + 2),
        None if two => return Err(pos + 1),
        None => (first, pos + 1),
    };
    if range.contains(&value) {
        Ok((value, next))
    } else {
        Err(pos)
    }
}

/// `H[H]:MM[:SS] [AM|PM]` at `pos`.
pub(super) fn clock_time(bytes: &[u8], pos: usize) -> Result<(ClockParts, usize), usize> {
    let (mut hour, mut p) = small_number(bytes, pos, 0..=23, false)?;
    if bytes.get(p) != Some(&b':') {
        return Err(p);
    }
    let (minute, next) = small_number(bytes, p + 1, 0..=59, true)?;
    p = next;
    let mut second = 0;
    if bytes.get(p) == Some(&b':') {
        (second, p) = small_number(bytes, p + 1, 0..=59, true)?;
    }
    while bytes.get(p).is_some_and(u8::is_ascii_whitespace) {
        p += 1;
    }
    let suffix = bytes.get(p..p + 2).map(<[u8]>::to_ascii_lowercase);
    match suffix.as_deref() {
        Some(b"pm") => {
            hour = match hour {
                0..=11 => hour + 12,
                12 => 12,
                _ => return Err(p),
            };
            p += 2;
        }
        Some(b"am") => {
            hour = match hour {
                0..=11 => hour,
                12 => 0,
                _ => return Err(p),
            };
            p += 2;
        }
        _ => {}
    }
    Ok(((hour, minute, second), p))
}

/// `YYYY-MM-DD`, or `MM[/.]DD[[/.]YY]` / `MMDD[YY]`, at `pos`. Months 1-12, days 1-31 (a
/// day past the month's end rolls over, as `mktime` does).
pub(super) fn calendar_date(bytes: &[u8], pos: usize) -> Result<(DateParts, usize), usize> {
    if bytes.get(pos + 4) == Some(&b'-') && bytes.get(pos + 7) == Some(&b'-') {
        let mut year = 0i32;
        for i in pos..pos + 4 {
            let d = bytes.get(i).filter(|b| b.is_ascii_digit()).ok_or(i)?;
            year = year * 10 + i32::from(d - b'0');
        }
        let (month, p) = small_number(bytes, pos + 5, 1..=12, false)?;
        let (day, p) = small_number(bytes, p + 1, 1..=31, false)?;
        return Ok(((Some(year), month, day), p));
    }
    let (month, mut p) = small_number(bytes, pos, 1..=12, false)?;
    if matches!(bytes.get(p), Some(b'.' | b'/')) {
        p += 1;
    }
    let (day, mut p) = small_number(bytes, p, 1..=31, false)?;
    if matches!(bytes.get(p), Some(b'.' | b'/')) {
        p += 1;
    }
    let mut year = None;
    if bytes.get(p).is_some_and(u8::is_ascii_digit) {
        let (yy, next) = small_number(bytes, p, 0..=99, true)?;
        year = Some(2000 + i32::try_from(yy).map_err(|_| p)?);
        p = next;
    }
    Ok(((year, month, day), p))
}

/// Fills in what was not given and converts to Unix time; `Ok(None)` if nothing was given.
pub(super) fn resolve<Tz: TimeZone>(
    parts: TimeParts,
    now_local: NaiveDateTime,
    tz: &Tz,
    tense: Tense,
) -> Result<Option<UnixTime>, ()> {
    let clock_only = parts.date.is_none();
    let (date, time) = match (parts.date, parts.time) {
        (None, None) => return Ok(None),
        (Some(date), time) => (date, time.unwrap_or((0, 0, 0))),
        (None, Some(time)) => (date_of(now_local), time),
    };
    let (year, month, day) = date;
    let given_year = year.is_some();
    let year = year.unwrap_or(match tense {
        // A past date without a year: this year, unless its month has not come yet.
        Tense::Past if month > now_local.month() => now_local.year() - 1,
        Tense::Past | Tense::Future => now_local.year(),
    });
    let (hour, minute, second) = time;
    let at = |year: i32, extra_days: u64| {
        NaiveDate::from_ymd_opt(year, month, 1)
            .and_then(|first| {
                first.checked_add_days(chrono::Days::new(u64::from(day - 1) + extra_days))
            })
            .and_then(|d| d.and_hms_opt(hour, minute, second))
    };
    let mut naive = at(year, 0).ok_or(())?;
    if tense == Tense::Future && naive < now_local {
        if clock_only {
            naive = at(year, 1).ok_or(())?;
        } else if !given_year {
            naive = at(year + 1, 0).ok_or(())?;
        }
    }
    local_to_unix(naive, tz).map(Some).ok_or(())
}

impl Builder {
    /// Slurm's default window: with `-s` and no `-j`, start defaults to now and end to the
    /// start (jobs in that state at that instant); with neither, start defaults to today's
    /// midnight; with `-j`, start stays at the epoch; end defaults to now.
    pub(super) fn window<Tz: TimeZone>(
        &self,
        now: UnixTime,
        tz: &Tz,
    ) -> (Option<UnixTime>, UnixTime) {
        let mut start = self.start;
        let mut end = self.end;
        if self.states_given {
            if start.is_none() && self.selectors.is_empty() {
                start = Some(now);
            }
            if end.is_none() {
                end = start;
            }
        } else if self.selectors.is_empty() && start.is_none() {
            start = Some(local_midnight(now, tz));
        }
        (start, end.unwrap_or(now))
    }
}
