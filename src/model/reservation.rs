//! Advance reservations as `scontrol create reservation` makes them: a
//! window of time (`StartTime=`, `EndTime=`/`Duration=`), a set of nodes
//! (`Nodes=`, or `NodeCnt=` picked from a partition), who may use it
//! (`Users=`, `Accounts=`, each either a list or `-`-prefixed "all but"),
//! `Flags=` and `Licenses=`; and the licenses jobs ask for (`-L`).
//!
//! Plain data and the rules that belong to it (parsing flags and lists,
//! whether a user may use a reservation, rolling a recurring one forward,
//! whether a reservation covers a node in a window). Times are Unix seconds
//! handed in by the caller: nothing here reads a clock.

use serde::{Deserialize, Serialize};

use super::time::UnixTime;

/// Slurm's length for `Duration=UNLIMITED`: a year from the start.
pub const UNLIMITED_SECS: i64 = 365 * 86_400;

/// `PURGE_COMP` without a time: five minutes idle.
pub const DEFAULT_PURGE_SECS: u64 = 300;

/// One `Flags=` word canopy knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum ResvFlag {
    /// Maintenance: nodes show MAINT; may overlap other reservations; made
    /// over busy nodes.
    Maint,
    /// Jobs of the reservation may start before it, and use nodes in and
    /// out of it.
    Flex,
    /// May share nodes with other reservations.
    Overlap,
    /// Made even over nodes running jobs.
    IgnoreJobs,
    Hourly,
    Daily,
    Weekday,
    Weekend,
    Weekly,
    /// The nodes were named (`Nodes=`), not counted.
    SpecNodes,
    /// Licenses only: jobs outside it may use any node (Slurm's
    /// `LICENSE_ONLY`, shown `ANY_NODES`).
    AnyNodes,
    /// Nodes never change once picked (`STATIC_ALLOC`, shown `STATIC`).
    StaticNodes,
    /// Every node of `PartitionName=` (`Nodes=ALL` with a partition).
    PartNodes,
    /// Deleted once idle for that long (seconds) after it started.
    PurgeComp,
    /// When it ends, its pending jobs stay eligible outside it instead of
    /// being held.
    NoHoldJobsAfterEnd,
}

/// Each flag with the word `scontrol show reservation` prints, in Slurm's order.
const FLAG_WORDS: &[(ResvFlag, &str)] = &[
    (ResvFlag::Maint, "MAINT"),
    (ResvFlag::Flex, "FLEX"),
    (ResvFlag::Overlap, "OVERLAP"),
    (ResvFlag::IgnoreJobs, "IGNORE_JOBS"),
    (ResvFlag::Hourly, "HOURLY"),
    (ResvFlag::Daily, "DAILY"),
    (ResvFlag::Weekday, "WEEKDAY"),
    (ResvFlag::Weekend, "WEEKEND"),
    (ResvFlag::Weekly, "WEEKLY"),
    (ResvFlag::SpecNodes, "SPEC_NODES"),
    (ResvFlag::AnyNodes, "ANY_NODES"),
    (ResvFlag::StaticNodes, "STATIC"),
    (ResvFlag::PartNodes, "PART_NODES"),
    (ResvFlag::PurgeComp, "PURGE_COMP"),
    (ResvFlag::NoHoldJobsAfterEnd, "NO_HOLD_JOBS_AFTER_END"),
];

/// What went wrong with a reservation request, in Slurm's words where
/// Slurm has them.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResvError {
    #[error("Invalid reservation flag: {0}")]
    BadFlag(String),
    #[error("Reservation flag {0} is not supported by canopy")]
    Unsupported(String),
    #[error("Invalid license specification")]
    BadLicenses,
    #[error("Invalid user id")]
    BadUsers,
    #[error("Invalid account or account/partition combination specified")]
    BadAccounts,
    #[error("TRES type '{0}' not supported with reservations")]
    BadTres(String),
    #[error("Invalid PURGE_COMP time {0}")]
    BadPurge(String),
}

/// Flags as asked: set outright, or added to / taken from the current ones
/// (`Flags+=`/`Flags-=`, or `-WORD` entries).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FlagChange {
    pub add: Vec<ResvFlag>,
    pub remove: Vec<ResvFlag>,
    /// `PURGE_COMP=<time>` as typed (the controller reads the time).
    pub purge_time: Option<String>,
}

/// Parse a `Flags=` value: comma-separated words (any case, Slurm's
/// aliases), each optionally `-` (remove) or `+` (add) prefixed.
pub fn parse_flags(text: &str) -> Result<FlagChange, ResvError> {
    let mut out = FlagChange::default();
    for raw in text.split(',').map(str::trim).filter(|w| !w.is_empty()) {
        let (remove, word) = match raw.as_bytes().first() {
            Some(b'-') => (true, &raw[1..]),
            Some(b'+') => (false, &raw[1..]),
            _ => (false, raw),
        };
        let (word, value) = match word.split_once('=') {
            Some((w, v)) => (w, Some(v)),
            None => (word, None),
        };
        let upper = word.to_ascii_uppercase();
        let flag = match upper.as_str() {
            "MAINT" => ResvFlag::Maint,
            "FLEX" => ResvFlag::Flex,
            "OVERLAP" => ResvFlag::Overlap,
            "IGNORE_JOBS" => ResvFlag::IgnoreJobs,
            "HOURLY" => ResvFlag::Hourly,
            "DAILY" => ResvFlag::Daily,
            "WEEKDAY" => ResvFlag::Weekday,
            "WEEKEND" => ResvFlag::Weekend,
            "WEEKLY" => ResvFlag::Weekly,
            "SPEC_NODES" => ResvFlag::SpecNodes,
            "ANY_NODES" | "LICENSE_ONLY" => ResvFlag::AnyNodes,
            "STATIC_ALLOC" | "STATIC_NODES" | "STATIC" => ResvFlag::StaticNodes,
            "PART_NODES" => ResvFlag::PartNodes,
            "PURGE_COMP" => ResvFlag::PurgeComp,
            "NO_HOLD_JOBS_AFTER_END" | "NO_HOLD_JOBS_AFTER" => ResvFlag::NoHoldJobsAfterEnd,
            // Slurm's flags that need what canopy does not keep (core-level
            // reservations, node replacement, floating windows, magnetic
            // jobs): refused by name rather than silently ignored.
            "REPLACE" | "REPLACE_DOWN" | "FIRST_CORES" | "TIME_FLOAT" | "MAGNETIC" | "NO_MAINT"
            | "NO_FLEX" | "NO_HOURLY" | "NO_DAILY" | "NO_WEEKLY" | "NO_WEEKDAY" | "NO_WEEKEND"
            | "ALL_NODES" | "DAILY_WEEKLY" | "USER_DELETE" | "NO_USER_DELETE" => {
                return Err(ResvError::Unsupported(upper))
            }
            _ => return Err(ResvError::BadFlag(raw.to_string())),
        };
        if let Some(v) = value {
            if flag != ResvFlag::PurgeComp {
                return Err(ResvError::BadFlag(raw.to_string()));
            }
            out.purge_time = Some(v.to_string());
        }
        if remove {
            out.remove.push(flag);
        } else {
            out.add.push(flag);
        }
    }
    Ok(out)
}

/// `Users=` or `Accounts=`: names allowed, or (`deny`) every name but these.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccessList {
    pub names: Vec<String>,
    #[serde(default)]
    pub deny: bool,
}

impl AccessList {
    /// `a,b` (only these) or `-a,-b` (all but these); a mix is refused by
    /// the caller with `bad`.
    pub fn parse(text: &str, bad: ResvError) -> Result<AccessList, ResvError> {
        let items: Vec<&str> = text
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect();
        let denied = items.iter().filter(|s| s.starts_with('-')).count();
        if denied != 0 && denied != items.len() {
            return Err(bad);
        }
        let names: Vec<String> = items
            .iter()
            .map(|s| s.trim_start_matches(['-', '+']).to_string())
            .collect();
        if names.iter().any(|n| n.is_empty()) {
            return Err(bad);
        }
        Ok(AccessList {
            names,
            deny: denied != 0,
        })
    }

    /// `Users+=a,b` / `Users-=a`: add or take away names.
    pub fn edit(&mut self, text: &str, add: bool) {
        for n in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let n = n.trim_start_matches(['-', '+']).to_string();
            if add {
                if !self.names.contains(&n) {
                    self.names.push(n);
                }
            } else {
                self.names.retain(|x| *x != n);
            }
        }
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// Whether `name` passes this list (an empty list passes nobody).
    pub fn admits(&self, name: &str) -> bool {
        let listed = self.names.iter().any(|n| n == name);
        if self.deny {
            !listed
        } else {
            listed
        }
    }

    /// As `scontrol show reservation` prints it: `a,b`, `-a,-b`, or `(null)`.
    pub fn shown(&self) -> String {
        if self.names.is_empty() {
            return "(null)".into();
        }
        let prefix = if self.deny { "-" } else { "" };
        self.names
            .iter()
            .map(|n| format!("{prefix}{n}"))
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// Licenses as `name[:count]` or `name[*count]`, comma-separated (count 1
/// if not given). `|` (any one of) is refused: a job holds one fixed set.
pub fn parse_licenses(text: &str) -> Result<Vec<(String, u32)>, ResvError> {
    let mut out: Vec<(String, u32)> = Vec::new();
    if text.contains('|') {
        return Err(ResvError::BadLicenses);
    }
    for item in text.split(',').map(str::trim) {
        let (name, count) = match item.split_once([':', '*']) {
            Some((n, c)) => (n.trim(), c.trim().parse::<u32>().ok()),
            None => (item, Some(1)),
        };
        let count = count.ok_or(ResvError::BadLicenses)?;
        if name.is_empty() || count == 0 {
            return Err(ResvError::BadLicenses);
        }
        match out.iter_mut().find(|(n, _)| n == name) {
            Some((_, c)) => *c = c.saturating_add(count),
            None => out.push((name.to_string(), count)),
        }
    }
    Ok(out)
}

/// Licenses as Slurm prints them: `a:2,b:1`, or `(null)`.
pub fn fmt_licenses(l: &[(String, u32)]) -> String {
    if l.is_empty() {
        return "(null)".into();
    }
    l.iter()
        .map(|(n, c)| format!("{n}:{c}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// A reservation as the controller keeps (and stores) it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reservation {
    pub name: String,
    pub start: UnixTime,
    pub end: UnixTime,
    /// Node ranks, ascending.
    #[serde(default)]
    pub ranks: Vec<u32>,
    /// The same nodes as a Slurm host list (`n[1-3]`), for views.
    #[serde(default)]
    pub node_list: String,
    /// CPUs on those nodes (`CoreCnt=`, and `TRES=cpu=`).
    #[serde(default)]
    pub cpus: u32,
    #[serde(default)]
    pub partition: Option<String>,
    #[serde(default)]
    pub features: Option<String>,
    #[serde(default)]
    pub users: AccessList,
    #[serde(default)]
    pub accounts: AccessList,
    #[serde(default)]
    pub flags: Vec<ResvFlag>,
    /// `PURGE_COMP=<time>` (seconds); `None`: the default.
    #[serde(default)]
    pub purge_secs: Option<u64>,
    #[serde(default)]
    pub licenses: Vec<(String, u32)>,
}

impl Reservation {
    pub fn has(&self, f: ResvFlag) -> bool {
        self.flags.contains(&f)
    }

    /// Set or clear `f`, keeping the list in Slurm's order.
    pub fn set_flag(&mut self, f: ResvFlag, on: bool) {
        self.flags.retain(|&x| x != f);
        if on {
            self.flags.push(f);
            self.flags.sort();
        }
    }

    /// Active at `now`: started and not yet over.
    pub fn active(&self, now: UnixTime) -> bool {
        self.start <= now && now < self.end
    }

    /// Its window meets `[from, to)`.
    pub fn overlaps(&self, from: UnixTime, to: UnixTime) -> bool {
        self.start < to && from < self.end
    }

    /// Whether a job of `user` under `account` may use it: Slurm lets a
    /// job in when either list admits it (and a `-` list denies).
    pub fn allows(&self, user: &str, account: Option<&str>) -> bool {
        let by_user = !self.users.is_empty() && self.users.admits(user);
        let by_account =
            !self.accounts.is_empty() && account.is_some_and(|a| self.accounts.admits(a));
        let denied = (self.users.deny && !self.users.admits(user))
            || (self.accounts.deny && account.is_some_and(|a| !self.accounts.admits(a)));
        (by_user || by_account) && !denied
    }

    /// Keeps its nodes from jobs outside it (a licenses-only one does not).
    pub fn holds_nodes(&self) -> bool {
        !self.has(ResvFlag::AnyNodes) && !self.ranks.is_empty()
    }

    /// The recurrence period, for `HOURLY`/`DAILY`/`WEEKLY` (`WEEKDAY` and
    /// `WEEKEND` step a day at a time and skip days).
    fn step_secs(&self) -> Option<i64> {
        if self.has(ResvFlag::Hourly) {
            Some(3600)
        } else if self.has(ResvFlag::Daily)
            || self.has(ResvFlag::Weekday)
            || self.has(ResvFlag::Weekend)
        {
            Some(86_400)
        } else if self.has(ResvFlag::Weekly) {
            Some(7 * 86_400)
        } else {
            None
        }
    }

    pub fn recurring(&self) -> bool {
        self.step_secs().is_some()
    }

    /// A recurring reservation that has ended by `now` moves to its next
    /// window (the first one not yet over whose day the flag allows).
    /// Returns whether it moved; a one-off one never does.
    pub fn roll_forward(&mut self, now: UnixTime) -> bool {
        let Some(step) = self.step_secs() else {
            return false;
        };
        let mut moved = false;
        // Bounded: a week of days covers every weekday rule.
        let mut guard = 0u32;
        while (self.end <= now || !self.day_allowed()) && guard < 1_000_000 {
            self.start += step;
            self.end += step;
            moved = true;
            guard += 1;
        }
        moved
    }

    /// Its windows `[start, end)` from the current one on, through the first
    /// that starts at or after `until` (a one-off one has only its own).
    /// A plan that starts a job by `until` and keeps it off every window
    /// listed keeps it off every later one too: a run that reached a later
    /// window would cross the last one listed on its way.
    pub fn occurrences(&self, until: UnixTime) -> Vec<(UnixTime, UnixTime)> {
        let mut out = vec![(self.start, self.end)];
        if !self.recurring() {
            return out;
        }
        let mut next = self.clone();
        // Bounded: an hourly one over a year's window is 8,760 windows.
        while next.start < until && out.len() < 10_000 {
            let end = next.end;
            if !next.roll_forward(end) {
                break;
            }
            out.push((next.start, next.end));
        }
        out
    }

    /// Whether its start falls on a day its flag allows (local time, as
    /// Slurm's weekday rules are).
    fn day_allowed(&self) -> bool {
        use chrono::{Datelike, TimeZone, Weekday};
        let weekend = chrono::Local
            .timestamp_opt(self.start, 0)
            .earliest()
            .map(|t| matches!(t.weekday(), Weekday::Sat | Weekday::Sun))
            .unwrap_or(false);
        if self.has(ResvFlag::Weekday) {
            !weekend
        } else if self.has(ResvFlag::Weekend) {
            weekend
        } else {
            true
        }
    }

    /// `Flags=` as Slurm prints it (`MAINT,SPEC_NODES`), `(null)` if none.
    pub fn flags_shown(&self) -> String {
        let words: Vec<String> = FLAG_WORDS
            .iter()
            .filter(|(f, _)| self.has(*f))
            .map(|(f, w)| match f {
                ResvFlag::PurgeComp => {
                    let s = self.purge_secs.unwrap_or(DEFAULT_PURGE_SECS);
                    format!("{w}={}", super::time::fmt_duration_long(s))
                }
                _ => w.to_string(),
            })
            .collect();
        if words.is_empty() {
            "(null)".into()
        } else {
            words.join(",")
        }
    }

    /// `TRES=` as Slurm prints it: `cpu=N` (and licenses), `(null)` if none.
    pub fn tres_shown(&self) -> String {
        let mut parts = Vec::new();
        if self.cpus > 0 {
            parts.push(format!("cpu={}", self.cpus));
        }
        parts.extend(
            self.licenses
                .iter()
                .map(|(n, c)| format!("license/{n}={c}")),
        );
        if parts.is_empty() {
            "(null)".into()
        } else {
            parts.join(",")
        }
    }
}

/// What `TRES=` asks for: a node count, and licenses by name.
pub type TresAsk = (Option<u32>, Vec<(String, u32)>);

/// `TRES=` on the command line: `node=N`, `cpu=N` (refused: canopy
/// reserves whole nodes), `license/NAME=N`. Returns the node count and
/// licenses it asks for.
pub fn parse_tres(text: &str) -> Result<TresAsk, ResvError> {
    let mut nodes = None;
    let mut lic = Vec::new();
    for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (key, value) = item
            .split_once('=')
            .ok_or_else(|| ResvError::BadTres(item.to_string()))?;
        let count: u32 = value
            .trim()
            .parse()
            .map_err(|_| ResvError::BadTres(item.to_string()))?;
        let key_l = key.trim().to_ascii_lowercase();
        if key_l == "node" {
            nodes = Some(count);
        } else if let Some(name) = key.trim().strip_prefix("license/") {
            lic.push((name.to_string(), count));
        } else {
            return Err(ResvError::BadTres(key.trim().to_string()));
        }
    }
    Ok((nodes, lic))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resv(flags: &[ResvFlag]) -> Reservation {
        Reservation {
            name: "r".into(),
            start: 1000,
            end: 2000,
            ranks: vec![1, 3],
            node_list: "n[2,4]".into(),
            cpus: 4,
            partition: None,
            features: None,
            users: AccessList {
                names: vec!["alice".into()],
                deny: false,
            },
            accounts: AccessList::default(),
            flags: flags.to_vec(),
            purge_secs: None,
            licenses: vec![],
        }
    }

    #[test]
    fn flags_parse_with_aliases_signs_and_purge_time() {
        let f = parse_flags("maint,IGNORE_JOBS,-flex,static_alloc,PURGE_COMP=10:00").unwrap();
        assert_eq!(
            f.add,
            vec![
                ResvFlag::Maint,
                ResvFlag::IgnoreJobs,
                ResvFlag::StaticNodes,
                ResvFlag::PurgeComp
            ]
        );
        assert_eq!(f.remove, vec![ResvFlag::Flex]);
        assert_eq!(f.purge_time.as_deref(), Some("10:00"));
        assert_eq!(
            parse_flags("REPLACE").unwrap_err().to_string(),
            "Reservation flag REPLACE is not supported by canopy"
        );
        assert_eq!(
            parse_flags("bogus").unwrap_err().to_string(),
            "Invalid reservation flag: bogus"
        );
        assert!(parse_flags("MAINT=3").is_err());
    }

    #[test]
    fn flags_print_in_slurms_order() {
        let mut r = resv(&[]);
        assert_eq!(r.flags_shown(), "(null)");
        r.set_flag(ResvFlag::SpecNodes, true);
        r.set_flag(ResvFlag::Maint, true);
        r.set_flag(ResvFlag::PurgeComp, true);
        r.purge_secs = Some(300);
        assert_eq!(r.flags_shown(), "MAINT,SPEC_NODES,PURGE_COMP=00:05:00");
        r.set_flag(ResvFlag::Maint, false);
        assert_eq!(r.flags_shown(), "SPEC_NODES,PURGE_COMP=00:05:00");
    }

    #[test]
    fn access_lists_allow_deny_and_refuse_mixes() {
        let l = AccessList::parse("a,b", ResvError::BadUsers).unwrap();
        assert!(l.admits("a") && !l.admits("c"));
        assert_eq!(l.shown(), "a,b");
        let d = AccessList::parse("-a,-b", ResvError::BadUsers).unwrap();
        assert!(!d.admits("a") && d.admits("c"));
        assert_eq!(d.shown(), "-a,-b");
        assert_eq!(
            AccessList::parse("a,-b", ResvError::BadUsers),
            Err(ResvError::BadUsers)
        );
        let mut e = l.clone();
        e.edit("c", true);
        e.edit("a", false);
        assert_eq!(e.names, vec!["b", "c"]);
    }

    #[test]
    fn users_or_accounts_admit_a_job() {
        let mut r = resv(&[]);
        assert!(r.allows("alice", None));
        assert!(!r.allows("bob", Some("phys")));
        r.accounts = AccessList::parse("phys", ResvError::BadAccounts).unwrap();
        assert!(r.allows("bob", Some("phys")));
        r.users = AccessList::parse("-bob", ResvError::BadUsers).unwrap();
        assert!(!r.allows("bob", Some("phys")));
        assert!(r.allows("carol", Some("chem")));
    }

    #[test]
    fn licenses_parse_counts_and_refuse_junk() {
        assert_eq!(
            parse_licenses("fluent,matlab:3,ansys*2,fluent:1").unwrap(),
            vec![
                ("fluent".to_string(), 2),
                ("matlab".to_string(), 3),
                ("ansys".to_string(), 2)
            ]
        );
        for bad in ["", "a:", "a:x", ":3", "a:0", "a|b"] {
            assert_eq!(parse_licenses(bad), Err(ResvError::BadLicenses), "{bad}");
        }
        assert_eq!(fmt_licenses(&[("a".into(), 2)]), "a:2");
        assert_eq!(fmt_licenses(&[]), "(null)");
    }

    #[test]
    fn tres_gives_node_counts_and_licenses() {
        assert_eq!(
            parse_tres("node=2,license/fluent=1").unwrap(),
            (Some(2), vec![("fluent".to_string(), 1)])
        );
        assert!(parse_tres("cpu=4").is_err());
        assert!(parse_tres("node").is_err());
    }

    #[test]
    fn daily_reservations_roll_forward_past_now_and_one_offs_do_not() {
        let mut r = resv(&[ResvFlag::Daily]);
        assert!(!r.roll_forward(1500));
        assert!(r.roll_forward(2000 + 3 * 86_400));
        assert_eq!(r.start, 1000 + 4 * 86_400);
        assert_eq!(r.end - r.start, 1000);
        let mut once = resv(&[]);
        assert!(!once.roll_forward(10_000));
        assert_eq!(once.start, 1000);
    }

    #[test]
    fn occurrences_run_through_the_first_window_past_the_horizon() {
        let once = resv(&[]);
        assert_eq!(once.occurrences(1_000_000), vec![(1000, 2000)]);
        let daily = resv(&[ResvFlag::Daily]);
        // Up to 2.5 days on: today's, tomorrow's, and the one after (the
        // first to start past the horizon).
        let day = 86_400;
        assert_eq!(
            daily.occurrences(1000 + 2 * day + day / 2),
            vec![
                (1000, 2000),
                (1000 + day, 2000 + day),
                (1000 + 2 * day, 2000 + 2 * day),
                (1000 + 3 * day, 2000 + 3 * day)
            ]
        );
        // A horizon before its start: its own window only.
        assert_eq!(daily.occurrences(500), vec![(1000, 2000)]);
        let weekly = resv(&[ResvFlag::Weekly]);
        assert_eq!(
            weekly.occurrences(1000 + day),
            vec![(1000, 2000), (1000 + 7 * day, 2000 + 7 * day)]
        );
    }

    #[test]
    fn weekday_reservations_skip_weekends() {
        use chrono::{Datelike, TimeZone, Weekday};
        let mut r = resv(&[ResvFlag::Weekday]);
        for _ in 0..10 {
            let now = r.end;
            assert!(r.roll_forward(now));
            let day = chrono::Local
                .timestamp_opt(r.start, 0)
                .earliest()
                .unwrap()
                .weekday();
            assert!(!matches!(day, Weekday::Sat | Weekday::Sun), "{day}");
        }
        let mut w = resv(&[ResvFlag::Weekend]);
        w.roll_forward(w.end);
        let day = chrono::Local
            .timestamp_opt(w.start, 0)
            .earliest()
            .unwrap()
            .weekday();
        assert!(matches!(day, Weekday::Sat | Weekday::Sun), "{day}");
    }
}
