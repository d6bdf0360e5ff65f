//! Time as canopy records and shows it. Every decision in the controller
//! core takes `now` as a [`UnixTime`] (whole seconds since the epoch); only
//! the shells read a clock. Durations, time limits and timestamps are shown
//! as Slurm shows them: `M:SS`/`H:MM:SS`/`D-HH:MM:SS` (squeue, sinfo),
//! `HH:MM:SS`/`D-HH:MM:SS` (scontrol, mail subjects), `UNLIMITED`/`infinite`,
//! and local-time `YYYY-MM-DDTHH:MM:SS` stamps.
//!
//! Pure functions of their arguments (the time zone is the process's local
//! one, as in Slurm); parsing of user-typed durations lives in the config
//! module, not here.

use chrono::{Local, TimeZone};

/// Unix time in whole seconds.
pub type UnixTime = i64;

/// Which command's conventions a time limit follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimitStyle {
    /// squeue `%l`: `UNLIMITED`, else `M:SS`/`H:MM:SS`/`D-HH:MM:SS`.
    Squeue,
    /// sinfo `%l`: `infinite`, else the squeue form.
    Sinfo,
    /// scontrol `TimeLimit=`/`MaxTime=`: `UNLIMITED`, else `HH:MM:SS`/`D-HH:MM:SS`.
    Scontrol,
}

const MINUTE: u64 = 60;
const HOUR: u64 = 60 * MINUTE;
const DAY: u64 = 24 * HOUR;

/// Elapsed time the squeue/sinfo way: `0:05`, `12:34`, `1:02:03`, `2-03:04:05`.
pub fn fmt_elapsed_squeue(secs: u64) -> String {
    let (days, hours, minutes, seconds) = split(secs);
    if days > 0 {
        format!("{days}-{hours:02}:{minutes:02}:{seconds:02}")
    } else if hours > 0 {
        format!("{hours}:{minutes:02}:{seconds:02}")
    } else {
        format!("{minutes}:{seconds:02}")
    }
}

/// A duration the scontrol way: `00:00:21`, `1-00:00:00`.
pub fn fmt_duration_long(secs: u64) -> String {
    let (days, hours, minutes, seconds) = split(secs);
    if days > 0 {
        format!("{days}-{hours:02}:{minutes:02}:{seconds:02}")
    } else {
        format!("{hours:02}:{minutes:02}:{seconds:02}")
    }
}

/// A time limit in minutes (`None` = no limit) in the given command's style.
pub fn fmt_limit_min(limit_min: Option<u32>, style: LimitStyle) -> String {
    match (limit_min, style) {
        (None, LimitStyle::Sinfo) => "infinite".to_string(),
        (None, _) => "UNLIMITED".to_string(),
        (Some(m), LimitStyle::Scontrol) => fmt_duration_long(u64::from(m) * MINUTE),
        (Some(m), _) => fmt_elapsed_squeue(u64::from(m) * MINUTE),
    }
}

/// squeue `%L`: the limit minus the time used; `UNLIMITED` without a limit and
/// `INVALID` once the job has run past it.
pub fn fmt_time_left(limit_min: Option<u32>, used_secs: u64) -> String {
    match limit_min {
        None => "UNLIMITED".to_string(),
        Some(m) => match (u64::from(m) * MINUTE).checked_sub(used_secs) {
            Some(left) => fmt_elapsed_squeue(left),
            None => "INVALID".to_string(),
        },
    }
}

/// A timestamp in local time, `YYYY-MM-DDTHH:MM:SS`. Like Slurm, an unset time
/// (and the epoch, Slurm's "unset") prints `Unknown`, as does a time too far
/// out for the calendar.
pub fn fmt_timestamp(t: Option<i64>) -> String {
    fmt_timestamp_in(t, &Local)
}

/// The date line squeue/sinfo `-l` print first: `Sat Nov 21 05:43:45 2026`,
/// day of month zero-padded (`Thu Jan 01 ...`). `None` if `now` is not a
/// representable time.
pub fn fmt_date_line(now: i64) -> Option<String> {
    fmt_date_line_in(now, &Local)
}

fn fmt_timestamp_in<Tz: TimeZone>(t: Option<i64>, tz: &Tz) -> String
where
    Tz::Offset: std::fmt::Display,
{
    t.filter(|&secs| secs != 0)
        .and_then(|secs| tz.timestamp_opt(secs, 0).earliest())
        .map(|dt| dt.format("%Y-%m-%dT%H:%M:%S").to_string())
        .unwrap_or_else(|| "Unknown".to_string())
}

fn fmt_date_line_in<Tz: TimeZone>(now: i64, tz: &Tz) -> Option<String>
where
    Tz::Offset: std::fmt::Display,
{
    tz.timestamp_opt(now, 0)
        .earliest()
        .map(|dt| dt.format("%a %b %d %H:%M:%S %Y").to_string())
}

fn split(secs: u64) -> (u64, u64, u64, u64) {
    (
        secs / DAY,
        (secs % DAY) / HOUR,
        (secs % HOUR) / MINUTE,
        secs % MINUTE,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::FixedOffset;

    #[test]
    fn squeue_elapsed_forms() {
        assert_eq!(fmt_elapsed_squeue(0), "0:00");
        assert_eq!(fmt_elapsed_squeue(21), "0:21");
        assert_eq!(fmt_elapsed_squeue(84), "1:24");
        assert_eq!(fmt_elapsed_squeue(600), "10:00");
        assert_eq!(fmt_elapsed_squeue(3599), "59:59");
        assert_eq!(fmt_elapsed_squeue(3600), "1:00:00");
        assert_eq!(fmt_elapsed_squeue(5400), "1:30:00");
        assert_eq!(fmt_elapsed_squeue(86_399), "23:59:59");
        assert_eq!(fmt_elapsed_squeue(86_400), "1-00:00:00");
        assert_eq!(
            fmt_elapsed_squeue(2 * 86_400 + 3 * 3600 + 4 * 60 + 5),
            "2-03:04:05"
        );
    }

    #[test]
    fn scontrol_duration_forms() {
        assert_eq!(fmt_duration_long(0), "00:00:00");
        assert_eq!(fmt_duration_long(21), "00:00:21");
        assert_eq!(fmt_duration_long(600), "00:10:00");
        assert_eq!(fmt_duration_long(86_399), "23:59:59");
        assert_eq!(fmt_duration_long(86_400), "1-00:00:00");
        assert_eq!(fmt_duration_long(12 * 86_400 + 5), "12-00:00:05");
    }

    #[test]
    fn limits_per_command() {
        assert_eq!(fmt_limit_min(None, LimitStyle::Squeue), "UNLIMITED");
        assert_eq!(fmt_limit_min(None, LimitStyle::Scontrol), "UNLIMITED");
        assert_eq!(fmt_limit_min(None, LimitStyle::Sinfo), "infinite");
        assert_eq!(fmt_limit_min(Some(1), LimitStyle::Squeue), "1:00");
        assert_eq!(fmt_limit_min(Some(6), LimitStyle::Squeue), "6:00");
        assert_eq!(fmt_limit_min(Some(60), LimitStyle::Squeue), "1:00:00");
        assert_eq!(fmt_limit_min(Some(1440), LimitStyle::Squeue), "1-00:00:00");
        assert_eq!(fmt_limit_min(Some(30), LimitStyle::Sinfo), "30:00");
        assert_eq!(fmt_limit_min(Some(90), LimitStyle::Sinfo), "1:30:00");
        assert_eq!(fmt_limit_min(Some(2880), LimitStyle::Sinfo), "2-00:00:00");
        assert_eq!(fmt_limit_min(Some(10), LimitStyle::Scontrol), "00:10:00");
        assert_eq!(
            fmt_limit_min(Some(2880), LimitStyle::Scontrol),
            "2-00:00:00"
        );
    }

    #[test]
    fn time_left() {
        assert_eq!(fmt_time_left(None, 50), "UNLIMITED");
        assert_eq!(fmt_time_left(Some(10), 108), "8:12");
        assert_eq!(fmt_time_left(Some(1440), 108), "23:58:12");
        assert_eq!(fmt_time_left(Some(1), 60), "0:00");
        assert_eq!(fmt_time_left(Some(1), 84), "INVALID");
    }

    #[test]
    fn timestamps_in_a_fixed_zone() {
        let utc = FixedOffset::east_opt(0).unwrap();
        let plus2 = FixedOffset::east_opt(2 * 3600).unwrap();
        let t = 1_795_240_000; // 2026-11-21T05:46:40Z
        assert_eq!(fmt_timestamp_in(Some(t), &utc), "2026-11-21T05:46:40");
        assert_eq!(fmt_timestamp_in(Some(t), &plus2), "2026-11-21T07:46:40");
        assert_eq!(fmt_timestamp_in(None, &utc), "Unknown");
        assert_eq!(fmt_timestamp_in(Some(0), &utc), "Unknown");
        assert_eq!(fmt_timestamp_in(Some(i64::MAX), &utc), "Unknown");
    }

    #[test]
    fn date_line_zero_pads_day() {
        let utc = FixedOffset::east_opt(0).unwrap();
        assert_eq!(
            fmt_date_line_in(1_795_240_000, &utc).as_deref(),
            Some("Sat Nov 21 05:46:40 2026")
        );
        // 2026-11-01T10:00:00Z
        assert_eq!(
            fmt_date_line_in(1_793_527_200, &utc).as_deref(),
            Some("Sun Nov 01 10:00:00 2026")
        );
        assert_eq!(fmt_date_line_in(i64::MAX, &utc), None);
    }

    #[test]
    fn local_wrappers_agree_with_chrono_local() {
        let t = 1_795_240_000;
        let expect = Local
            .timestamp_opt(t, 0)
            .unwrap()
            .format("%Y-%m-%dT%H:%M:%S")
            .to_string();
        assert_eq!(fmt_timestamp(Some(t)), expect);
        let expect = Local
            .timestamp_opt(t, 0)
            .unwrap()
            .format("%a %b %d %H:%M:%S %Y")
            .to_string();
        assert_eq!(fmt_date_line(t), Some(expect));
    }
}
