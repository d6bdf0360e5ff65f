//! sacctmgr's command grammar: `VERB ENTITY [names] [where COND...]
//! [set VALUE...]`, words `Key=value` (or `Key+=v`, `Key-=v` for lists),
//! keys matched case-insensitively by Slurm's shortest prefixes, `-1`
//! clearing a limit. Turns the words into a change request or a query.

use crate::config::units;
use crate::model::assoc::request::{AcctRequest, AssocEdit, Entity, Filter, Settings, Verb};
use crate::model::assoc::{AdminLevel, ListEdit, PreemptMode, QosFlag, Shares, TresEdit};

/// What the words ask for.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    Change(Box<AcctRequest>),
    Show(Show),
}

/// `show|list ENTITY ...`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Show {
    pub entity: ShowEntity,
    pub filter: Filter,
    /// `User=` in `show assoc where user=...`.
    pub users: Vec<String>,
    pub format: Vec<String>,
    pub with_assoc: bool,
    pub tree: bool,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ShowEntity {
    #[default]
    Association,
    Account,
    Cluster,
    Qos,
    User,
}

/// A word sacctmgr cannot use; the text is what it prints.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bad(pub String);

fn bad<T>(msg: impl Into<String>) -> Result<T, Bad> {
    Err(Bad(msg.into()))
}

/// Does `word` name `full`: a case-insensitive prefix at least `min` long
/// (Slurm's `strncasecmp(full, word, MAX(len, min))`).
pub fn is_key(word: &str, full: &str, min: usize) -> bool {
    let w = word.to_ascii_lowercase();
    let f = full.to_ascii_lowercase();
    (w.len() >= min && f.starts_with(&w)) || w == f
}

fn verb_of(word: &str) -> Option<Result<Verb, ()>> {
    if is_key(word, "add", 3) || is_key(word, "create", 3) {
        Some(Ok(Verb::Add))
    } else if is_key(word, "modify", 1) || is_key(word, "update", 1) {
        Some(Ok(Verb::Modify))
    } else if is_key(word, "delete", 3) || is_key(word, "remove", 3) {
        Some(Ok(Verb::Delete))
    } else if is_key(word, "show", 3) || is_key(word, "list", 3) {
        Some(Err(()))
    } else {
        None
    }
}

fn entity_of(word: &str) -> Option<ShowEntity> {
    if is_key(word, "accounts", 1) || is_key(word, "acct", 4) {
        Some(ShowEntity::Account)
    } else if is_key(word, "associations", 2) {
        Some(ShowEntity::Association)
    } else if is_key(word, "clusters", 2) {
        Some(ShowEntity::Cluster)
    } else if is_key(word, "qos", 1) {
        Some(ShowEntity::Qos)
    } else if is_key(word, "users", 1) {
        Some(ShowEntity::User)
    } else {
        None
    }
}

/// `Key`, `op` (`=`, `+=`, `-=`) and value of a `Key=value` word.
fn split(word: &str) -> Option<(&str, &str, &str)> {
    let eq = word.find('=')?;
    let (key, op) = match word[..eq].strip_suffix('+') {
        Some(k) => (k, "+="),
        None => match word[..eq].strip_suffix('-') {
            Some(k) => (k, "-="),
            None => (&word[..eq], "="),
        },
    };
    Some((key, op, &word[eq + 1..]))
}

fn names(v: &str) -> Vec<String> {
    v.split(',')
        .map(|s| s.trim().to_lowercase())
        .filter(|s| !s.is_empty())
        .collect()
}

/// Names as typed (users keep their case, as in Slurm).
fn raw_names(v: &str) -> Vec<String> {
    v.split(',')
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

fn count(key: &str, v: &str) -> Result<Option<u32>, Bad> {
    let v = v.trim();
    if v == "-1" || v.eq_ignore_ascii_case("none") || v.eq_ignore_ascii_case("unlimited") {
        return Ok(None);
    }
    v.parse::<u32>()
        .map(Some)
        .or_else(|_| bad(format!(" Bad {key} value: {v}")))
}

fn minutes(key: &str, v: &str) -> Result<Option<u32>, Bad> {
    let v = v.trim();
    if v == "-1" {
        return Ok(None);
    }
    match units::parse_time_limit_min(v) {
        Ok(m) => Ok(m),
        Err(_) => bad(format!(" Bad {key} time format: {v}")),
    }
}

/// A time in seconds, read as sacctmgr's `time_str2secs` does:
/// `days-hours[:minutes[:seconds]]`, `hours:minutes:seconds`,
/// `minutes:seconds` or `minutes`. `-1`, `INFINITE` and `UNLIMITED`
/// clear it (`Some(None)`); `None`: not a time.
/// Seconds in days, hours, minutes and seconds; `None` past u64 (a user's
/// huge number is refused, never wrapped).
fn hms(d: u64, h: u64, m: u64, s: u64) -> Option<u64> {
    d.checked_mul(86400)?
        .checked_add(h.checked_mul(3600)?)?
        .checked_add(m.checked_mul(60)?)?
        .checked_add(s)
}

fn exempt_secs(v: &str) -> Option<Option<u32>> {
    let v = v.trim();
    if v == "-1" || v.eq_ignore_ascii_case("infinite") || v.eq_ignore_ascii_case("unlimited") {
        return Some(None);
    }
    let num = |t: &str| -> Option<u64> {
        (!t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()))
            .then(|| t.parse().ok())
            .flatten()
    };
    let (days, rest) = match v.split_once('-') {
        Some((d, r)) => (num(d)?, Some(r)),
        None => (0, None),
    };
    let secs = match rest {
        Some(r) => {
            let mut parts = r.split(':');
            let h = parts.next().map_or(Some(0), num)?;
            let m = parts.next().map_or(Some(0), num)?;
            let s = parts.next().map_or(Some(0), num)?;
            if parts.next().is_some() {
                return None;
            }
            hms(days, h, m, s)?
        }
        None => {
            let parts: Vec<u64> = v.split(':').map(num).collect::<Option<_>>()?;
            match parts[..] {
                [m] => hms(0, 0, m, 0)?,
                [m, s] => hms(0, 0, m, s)?,
                [h, m, s] => hms(0, h, m, s)?,
                _ => return None,
            }
        }
    };
    u32::try_from(secs).ok().map(Some)
}

fn tres(key: &str, v: &str) -> Result<TresEdit, Bad> {
    TresEdit::parse(v).map_err(|e| Bad(format!(" Bad {key} value: {}", e.0)))
}

fn list_edit(op: &str, v: Vec<String>) -> ListEdit {
    match op {
        "+=" => ListEdit::Add(v),
        "-=" => ListEdit::Remove(v),
        _ => ListEdit::Set(v),
    }
}

/// One TRES limit given the old way (`GrpCPUs=4`, `MaxNodes=2`).
fn one_tres(name: &str, key: &str, v: &str) -> Result<TresEdit, Bad> {
    let n = count(key, v)?;
    Ok(TresEdit {
        clear_all: false,
        items: vec![(name.to_string(), n.map(u64::from))],
    })
}

/// An association setting; `Ok(false)` when the key is not one.
fn assoc_setting(e: &mut AssocEdit, key: &str, op: &str, v: &str) -> Result<bool, Bad> {
    let l = &mut e.limits;
    if is_key(key, "DefaultQOS", 8) {
        e.default_qos = Some(if v.trim() == "-1" || v.trim().is_empty() {
            None
        } else {
            Some(v.trim().to_lowercase())
        });
    } else if is_key(key, "FairShare", 1) || is_key(key, "Shares", 1) {
        e.shares = Some(if v.eq_ignore_ascii_case("parent") {
            Shares::Parent
        } else {
            Shares::Raw(count(key, v)?.unwrap_or(1))
        });
    } else if is_key(key, "GrpCpus", 7) {
        l.grp_tres = Some(one_tres("cpu", key, v)?);
    } else if is_key(key, "GrpJobs", 4) && !is_key(key, "GrpJobsAccrue", 8) {
        l.grp_jobs = Some(count(key, v)?);
    } else if is_key(key, "GrpMemory", 4) {
        l.grp_tres = Some(one_tres("mem", key, v)?);
    } else if is_key(key, "GrpNodes", 4) {
        l.grp_tres = Some(one_tres("node", key, v)?);
    } else if is_key(key, "GrpSubmitJobs", 4) {
        l.grp_submit_jobs = Some(count(key, v)?);
    } else if is_key(key, "GrpCPUMins", 7) {
        l.grp_tres_mins = Some(one_tres("cpu", key, v)?);
    } else if is_key(key, "GrpTRESMins", 8) {
        l.grp_tres_mins = Some(tres(key, v)?);
    } else if is_key(key, "GrpTRES", 7) {
        l.grp_tres = Some(tres(key, v)?);
    } else if is_key(key, "GrpWall", 4) {
        l.grp_wall = Some(minutes(key, v)?);
    } else if is_key(key, "MaxCpusPerJob", 7) {
        l.max_tres_per_job = Some(one_tres("cpu", key, v)?);
    } else if is_key(key, "MaxJobs", 4) && !is_key(key, "MaxJobsAccrue", 8) {
        l.max_jobs = Some(count(key, v)?);
    } else if is_key(key, "MaxNodesPerJob", 4) {
        l.max_tres_per_job = Some(one_tres("node", key, v)?);
    } else if is_key(key, "MaxSubmitJobs", 4) {
        l.max_submit_jobs = Some(count(key, v)?);
    } else if is_key(key, "MaxTRESPerNode", 11) {
        l.max_tres_per_node = Some(tres(key, v)?);
    } else if is_key(key, "MaxTRESPerJob", 7) {
        l.max_tres_per_job = Some(tres(key, v)?);
    } else if is_key(key, "MaxWallDurationPerJob", 4) {
        l.max_wall = Some(minutes(key, v)?);
    } else if is_key(key, "Parent", 6) {
        e.parent = Some(v.trim().to_lowercase());
    } else if is_key(key, "Priority", 3) {
        e.priority = Some(count(key, v)?);
    } else if is_key(key, "QosLevel", 1) {
        e.qos = Some(list_edit(op, names(v)));
    } else {
        return Ok(false);
    }
    Ok(true)
}

/// A QOS setting; `Ok(false)` when the key is not one.
fn qos_setting(s: &mut Settings, key: &str, op: &str, v: &str) -> Result<bool, Bad> {
    let q = &mut s.qos;
    if is_key(key, "Description", 1) {
        s.description = Some(v.to_string());
    } else if is_key(key, "Flags", 2) {
        let mut flags = Vec::new();
        for f in v.split(',').map(str::trim).filter(|f| !f.is_empty()) {
            if f == "-1" {
                continue;
            }
            match QosFlag::parse(f) {
                Some(x) => flags.push(x),
                None => return bad(format!(" Unknown QOS flag used in:\n  '{v}'\n Valid QOS flags are\n  DenyOnLimit,EnforceUsageThreshold,NoReserve,PartitionMaxNodes,PartitionMinNodes,OverPartQOS,PartitionTimeLimit,RequiresReservation,NoDecay,UsageFactorSafe")),
            }
        }
        let names = flags.iter().map(|f| f.name().to_string()).collect();
        q.flags = Some((list_edit(op, names), flags));
    } else if is_key(key, "GraceTime", 3) {
        // Seconds, as a plain number.
        q.grace_time = Some(count(key, v)?);
    } else if is_key(key, "GrpJobs", 4) && !is_key(key, "GrpJobsAccrue", 8) {
        q.grp_jobs = Some(count(key, v)?);
    } else if is_key(key, "GrpSubmitJobs", 4) {
        q.grp_submit_jobs = Some(count(key, v)?);
    } else if is_key(key, "GrpCPUMins", 7) {
        q.grp_tres_mins = Some(one_tres("cpu", key, v)?);
    } else if is_key(key, "GrpTRESMins", 8) {
        q.grp_tres_mins = Some(tres(key, v)?);
    } else if is_key(key, "GrpTRES", 7) {
        q.grp_tres = Some(tres(key, v)?);
    } else if is_key(key, "GrpWall", 4) {
        q.grp_wall = Some(minutes(key, v)?);
    } else if is_key(key, "MaxJobsPerUser", 11) || is_key(key, "MaxJobsPU", 9) {
        q.max_jobs_per_user = Some(count(key, v)?);
    } else if is_key(key, "MaxSubmitJobsPerUser", 10)
        || is_key(key, "MaxSubmitJobsPU", 10)
        || is_key(key, "MaxSubmitPU", 6)
    {
        q.max_submit_jobs_per_user = Some(count(key, v)?);
    } else if is_key(key, "MaxTRESPerUser", 11) || is_key(key, "MaxTRESPU", 9) {
        q.max_tres_per_user = Some(tres(key, v)?);
    } else if is_key(key, "MaxTRESPerNode", 11) {
        q.max_tres_per_node = Some(tres(key, v)?);
    } else if is_key(key, "MaxTRESPerJob", 7) {
        q.max_tres_per_job = Some(tres(key, v)?);
    } else if is_key(key, "MaxWallDurationPerJob", 4) {
        q.max_wall = Some(minutes(key, v)?);
    } else if is_key(key, "PreemptExemptTime", 8) {
        q.preempt_exempt_time = Some(
            exempt_secs(v)
                .ok_or_else(|| Bad(format!(" Bad PreemptExemptTime format: {key}={v}")))?,
        );
    } else if is_key(key, "PreemptMode", 8) {
        q.preempt_mode =
            Some(PreemptMode::parse(v).ok_or_else(|| Bad(format!(" Bad PreemptMode value: {v}")))?);
    } else if is_key(key, "Preempt", 7) {
        q.preempt = Some(list_edit(op, names(v)));
    } else if is_key(key, "Priority", 3) {
        q.priority = Some(count(key, v)?);
    } else if is_key(key, "UsageFactor", 6) {
        let f = if v.trim() == "-1" {
            None
        } else {
            match v.trim().parse::<f64>() {
                Ok(f) if f >= 0.0 => Some(f),
                _ => return bad(format!(" Bad UsageFactor value: {v}")),
            }
        };
        q.usage_factor = Some(f);
    } else {
        return Ok(false);
    }
    Ok(true)
}

/// Parse sacctmgr's words (after its options).
pub fn parse(words: &[String]) -> Result<Command, Bad> {
    let Some(first) = words.first() else {
        return bad("no input");
    };
    let verb = match verb_of(first) {
        Some(v) => v,
        None => return bad(format!("Invalid keyword: {first}")),
    };
    let Some(ent_word) = words.get(1) else {
        return bad(no_entity(verb));
    };
    let Some(entity) = entity_of(ent_word) else {
        return bad(no_entity(verb));
    };
    let rest = &words[2..];
    match verb {
        Err(()) => show(entity, rest).map(Command::Show),
        Ok(verb) => {
            let entity = match entity {
                ShowEntity::Account => Entity::Account,
                ShowEntity::Cluster => Entity::Cluster,
                ShowEntity::Qos => Entity::Qos,
                ShowEntity::User => Entity::User,
                ShowEntity::Association => return bad(no_entity(Ok(verb))),
            };
            change(verb, entity, rest).map(|r| Command::Change(Box::new(r)))
        }
    }
}

fn no_entity(verb: Result<Verb, ()>) -> String {
    let (what, list) = match verb {
        Ok(Verb::Add) => ("add", "\"Account\", \"Cluster\", \"QOS\", or \"User\""),
        Ok(Verb::Modify) => ("modify", "\"Account\", \"Cluster\", \"QOS\", or \"User\""),
        Ok(Verb::Delete) => ("delete", "\"Account\", \"Cluster\", \"QOS\", or \"User\""),
        Err(()) => (
            "list",
            "\"Account\", \"Association\", \"Cluster\", \"QOS\", or \"User\"",
        ),
    };
    format!("No valid entity in {what} command\nInput line must include {list}")
}

/// Where a word goes: the `where` part (conditions), or the `set` part.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Part {
    Cond,
    Set,
}

fn change(verb: Verb, entity: Entity, words: &[String]) -> Result<AcctRequest, Bad> {
    let mut filter = Filter::default();
    let mut set = Settings::default();
    // `add` takes everything as settings; modify and delete as
    // conditions until `set`.
    let mut part = if verb == Verb::Add {
        Part::Set
    } else {
        Part::Cond
    };
    for w in words {
        if is_key(w, "where", 5) {
            part = Part::Cond;
            continue;
        }
        if is_key(w, "set", 3) {
            if verb == Verb::Delete {
                return bad(" Unknown option: set");
            }
            part = Part::Set;
            continue;
        }
        let Some((key, op, v)) = split(w) else {
            // A bare word is a name.
            match entity {
                Entity::User => filter.names.extend(raw_names(w)),
                _ => filter.names.extend(names(w)),
            }
            continue;
        };
        // Keys naming records are conditions in either part of an add.
        let is_cond = part == Part::Cond || verb == Verb::Add;
        if is_cond && is_name_key(entity, key) {
            match entity {
                Entity::User => filter.names.extend(raw_names(v)),
                _ => filter.names.extend(names(v)),
            }
        } else if is_cond && is_key(key, "Clusters", 1) {
            filter.clusters.extend(names(v));
        } else if is_cond && entity == Entity::User && is_key(key, "Accounts", 2) {
            filter.accounts.extend(names(v));
        } else if part == Part::Cond
            && verb != Verb::Add
            && entity == Entity::Account
            && is_key(key, "Parent", 6)
        {
            filter.parents.extend(names(v));
        } else if part == Part::Set || verb == Verb::Add {
            if !setting(entity, &mut set, key, op, v)? {
                return bad(format!(
                    " Unknown option: {w}\n Use keyword 'where' to modify condition"
                ));
            }
        } else {
            return bad(format!(
                " Unknown condition: {w}\n Use keyword 'set' to modify value"
            ));
        }
    }
    Ok(AcctRequest {
        verb,
        entity,
        filter,
        set,
    })
}

fn is_name_key(entity: Entity, key: &str) -> bool {
    is_key(key, "Names", 1)
        || match entity {
            Entity::User => is_key(key, "Users", 1),
            Entity::Account => is_key(key, "Accounts", 2) || is_key(key, "Acct", 4),
            Entity::Cluster => false,
            Entity::Qos => is_key(key, "QOS", 1) && !is_key(key, "QosLevel", 4),
        }
}

fn setting(entity: Entity, s: &mut Settings, key: &str, op: &str, v: &str) -> Result<bool, Bad> {
    match entity {
        Entity::Qos => qos_setting(s, key, op, v),
        Entity::Account if is_key(key, "Description", 1) => {
            s.description = Some(v.to_string());
            Ok(true)
        }
        Entity::Account if is_key(key, "Organization", 1) => {
            s.organization = Some(v.to_string());
            Ok(true)
        }
        Entity::User if is_key(key, "DefaultAccount", 3) => {
            s.default_account = Some(v.trim().to_lowercase());
            Ok(true)
        }
        Entity::User if is_key(key, "AdminLevel", 2) => {
            s.admin_level = Some(
                AdminLevel::parse(v).ok_or_else(|| Bad(format!(" Bad AdminLevel value: {v}")))?,
            );
            Ok(true)
        }
        _ => assoc_setting(&mut s.assoc, key, op, v),
    }
}

fn show(entity: ShowEntity, words: &[String]) -> Result<Show, Bad> {
    let mut s = Show {
        entity,
        ..Show::default()
    };
    for w in words {
        if is_key(w, "where", 5) {
            continue;
        }
        if is_key(w, "withassoc", 5) {
            s.with_assoc = true;
            continue;
        }
        if is_key(w, "tree", 4) {
            s.tree = true;
            continue;
        }
        if is_key(w, "withdeleted", 5)
            || is_key(w, "withcoordinator", 5)
            || is_key(w, "withsubaccounts", 5)
            || is_key(w, "onlydefaults", 5)
        {
            continue;
        }
        let Some((key, _, v)) = split(w) else {
            match entity {
                ShowEntity::User => s.filter.names.extend(raw_names(w)),
                ShowEntity::Association => s.filter.accounts.extend(names(w)),
                _ => s.filter.names.extend(names(w)),
            }
            continue;
        };
        if is_key(key, "Format", 1) {
            s.format.extend(
                v.split(',')
                    .map(str::trim)
                    .filter(|f| !f.is_empty())
                    .map(str::to_string),
            );
        } else if is_key(key, "Clusters", 1) {
            s.filter.clusters.extend(names(v));
        } else if is_key(key, "Names", 1) {
            match entity {
                ShowEntity::User => s.filter.names.extend(raw_names(v)),
                _ => s.filter.names.extend(names(v)),
            }
        } else if is_key(key, "Users", 1) {
            match entity {
                ShowEntity::User => s.filter.names.extend(raw_names(v)),
                _ => s.users.extend(raw_names(v)),
            }
        } else if is_key(key, "Accounts", 2) || is_key(key, "Acct", 4) {
            match entity {
                ShowEntity::Account => s.filter.names.extend(names(v)),
                _ => s.filter.accounts.extend(names(v)),
            }
        } else if is_key(key, "Parent", 6) {
            s.filter.parents.extend(names(v));
        } else if entity == ShowEntity::Qos && is_key(key, "QOS", 1) {
            s.filter.names.extend(names(v));
        } else {
            return bad(format!(" Unknown condition: {w}"));
        }
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    fn change_of(s: &str) -> AcctRequest {
        match parse(&words(s)).unwrap() {
            Command::Change(r) => *r,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn add_account_with_parent_and_limits() {
        let r = change_of("add account Chem,bio parent=science fairshare=30 GrpTRES=cpu=4,mem=10G MaxWall=30:00 cluster=c1");
        assert_eq!((r.verb, r.entity), (Verb::Add, Entity::Account));
        assert_eq!(r.filter.names, ["chem", "bio"]);
        assert_eq!(r.filter.clusters, ["c1"]);
        assert_eq!(r.set.assoc.parent.as_deref(), Some("science"));
        assert_eq!(r.set.assoc.shares, Some(Shares::Raw(30)));
        assert_eq!(r.set.assoc.limits.max_wall, Some(Some(30)));
        assert_eq!(
            r.set.assoc.limits.grp_tres.as_ref().unwrap().to_string(),
            "cpu=4,mem=10G"
        );
    }

    #[test]
    fn modify_where_set_and_list_edits() {
        let r = change_of(
            "modify user where name=alice account=chem set MaxJobs=-1 qos+=high DefaultQOS=high",
        );
        assert_eq!(r.verb, Verb::Modify);
        assert_eq!(r.filter.names, ["alice"]);
        assert_eq!(r.filter.accounts, ["chem"]);
        assert_eq!(r.set.assoc.limits.max_jobs, Some(None));
        assert_eq!(r.set.assoc.qos, Some(ListEdit::Add(vec!["high".into()])));
        assert_eq!(r.set.assoc.default_qos, Some(Some("high".into())));
        // Conditions before `set` without `where`.
        let r = change_of("modify account chem set GrpJobs=2");
        assert_eq!(r.filter.names, ["chem"]);
        assert_eq!(r.set.assoc.limits.grp_jobs, Some(Some(2)));
        // A value where a condition belongs says so.
        assert!(parse(&words("modify user alice GrpJobs=2"))
            .unwrap_err()
            .0
            .contains("Unknown condition"));
    }

    #[test]
    fn qos_settings_and_shows() {
        let r = change_of("add qos high Priority=100 MaxWall=1-0 Flags=DenyOnLimit,NoReserve Preempt=normal MaxJobsPU=2 GraceTime=60");
        assert_eq!(r.set.qos.priority, Some(Some(100)));
        assert_eq!(r.set.qos.max_wall, Some(Some(1440)));
        assert_eq!(r.set.qos.max_jobs_per_user, Some(Some(2)));
        assert_eq!(r.set.qos.grace_time, Some(Some(60)));
        let r = change_of("modify qos high set PreemptExemptTime=1-0:10 PreemptMode=suspend");
        assert_eq!(r.set.qos.preempt_exempt_time, Some(Some(86400 + 600)));
        assert_eq!(exempt_secs("10"), Some(Some(600)));
        assert_eq!(exempt_secs("1:30"), Some(Some(90)));
        assert_eq!(exempt_secs("01:00:05"), Some(Some(3605)));
        assert_eq!(exempt_secs("-1"), Some(None));
        assert_eq!(exempt_secs("soon"), None);
        // Too large for the arithmetic: refused, not wrapped (nor a panic).
        assert_eq!(exempt_secs("99999999999999999-00:00:00"), None);
        assert_eq!(exempt_secs("99999999999999999999"), None);
        assert_eq!(exempt_secs("9999999999999999:0:0"), None);
        assert!(parse(&words("add qos x Flags=Bogus")).is_err());
        // GrpTRESMins (and the old GrpCPUMins) on a QOS and an account.
        let r = change_of("modify qos high set GrpTRESMins=cpu=600,gres/gpu=60 GrpWall=2:00:00");
        assert_eq!(
            r.set.qos.grp_tres_mins.as_ref().unwrap().to_string(),
            "cpu=600,gres/gpu=60"
        );
        assert_eq!(r.set.qos.grp_wall, Some(Some(120)));
        let r = change_of("modify qos high set GrpCPUMins=-1");
        assert_eq!(
            r.set.qos.grp_tres_mins.as_ref().unwrap().to_string(),
            "cpu=-1"
        );
        let r = change_of("modify account chem set GrpCPUMins=90");
        assert_eq!(
            r.set
                .assoc
                .limits
                .grp_tres_mins
                .as_ref()
                .unwrap()
                .to_string(),
            "cpu=90"
        );
        match parse(&words(
            "show assoc where user=alice format=account,user tree",
        ))
        .unwrap()
        {
            Command::Show(s) => {
                assert_eq!(s.entity, ShowEntity::Association);
                assert_eq!(s.users, ["alice"]);
                assert_eq!(s.format, ["account", "user"]);
                assert!(s.tree);
            }
            other => panic!("{other:?}"),
        }
        assert!(parse(&words("add association x"))
            .unwrap_err()
            .0
            .starts_with("No valid entity in add command"));
    }
}
