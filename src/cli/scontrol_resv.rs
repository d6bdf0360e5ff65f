//! `scontrol create|update|delete reservation`, `scontrol show
//! reservation|licenses`: the argument grammar of Slurm's scontrol
//! (`Key=value`, `Key+=`/`Key-=`, keys abbreviated as far as Slurm allows),
//! the checks it makes before sending, and its replies and errors.

use super::client::{CliError, Client};
use super::format::resv::{show_license, show_reservation};
use crate::wire::messages::Body;
use crate::wire::resv::{ListOp, ResvSpec};

fn call(body: Body) -> Result<Body, CliError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let mut c = Client::connect(None).await?;
        c.call(body).await
    })
}

/// `key` names `full` if it is a case-insensitive prefix at least `min`
/// letters long (Slurm's `strncasecmp(tag, full, MAX(len, min))`).
fn is_key(key: &str, full: &str, min: usize) -> bool {
    key.len() >= min.min(full.len())
        && key.len() <= full.len()
        && full[..key.len()].eq_ignore_ascii_case(key)
}

/// A word Slurm's scontrol passes over: `reservation` (or any `res...`).
fn starts_res(word: &str) -> bool {
    word.get(..3).is_some_and(|p| p.eq_ignore_ascii_case("res"))
}

/// A time as Slurm's scontrol reads `StartTime=`/`EndTime=` (`now`,
/// `now+1hour`, `2026-01-02T10:00`, `16:00`, ...), in local time.
fn parse_time(value: &str, now: i64) -> Option<i64> {
    use crate::cli::sacct_args::{parse_slurm_time, Tense};
    parse_slurm_time(value, now, &chrono::Local, Tense::Future)
        .ok()
        .flatten()
}

/// Parse the arguments of `create`/`update` (`msg` ends each error, as in
/// Slurm: "No reservation created."). Errors are the text to print.
pub fn parse_args(args: &[&str], msg: &str, now: i64) -> Result<ResvSpec, String> {
    let mut spec = ResvSpec::default();
    for &arg in args {
        let Some((tag, val)) = arg.split_once('=') else {
            if starts_res(arg) {
                continue;
            }
            return Err(format!("Unknown parameter {arg}.  {msg}"));
        };
        if tag.is_empty() {
            return Err(format!("Unknown parameter {arg}.  {msg}"));
        }
        let (tag, op) = match tag.as_bytes().last() {
            Some(b'+') => (&tag[..tag.len() - 1], ListOp::Add),
            Some(b'-') => (&tag[..tag.len() - 1], ListOp::Remove),
            _ => (tag, ListOp::Set),
        };
        let bad_count = || format!("Invalid node count {val}");
        if is_key(tag, "ReservationName", 1) {
            spec.name = Some(val.to_string());
        } else if is_key(tag, "Accounts", 1) {
            spec.accounts = Some(val.to_string());
            spec.accounts_op = op;
        } else if is_key(tag, "BurstBuffer", 2) {
            return Err(format!("BurstBuffer is not supported by canopy.  {msg}"));
        } else if is_key(tag, "StartTime", 1) {
            spec.start = Some(
                parse_time(val, now).ok_or_else(|| format!("Invalid start time {arg}.  {msg}"))?,
            );
        } else if is_key(tag, "EndTime", 1) {
            spec.end = Some(
                parse_time(val, now).ok_or_else(|| format!("Invalid end time {arg}.  {msg}"))?,
            );
        } else if is_key(tag, "Duration", 1) {
            let d = crate::config::units::parse_time_limit_min(val)
                .map_err(|_| format!("Invalid duration {arg}.  {msg}"))?;
            spec.duration_min = Some(d);
        } else if is_key(tag, "Flags", 2) {
            spec.flags = Some(val.to_string());
            spec.flags_op = op;
        } else if is_key(tag, "NodeCnt", 5) || is_key(tag, "NodeCount", 5) {
            let n = val
                .split(',')
                .map(|t| t.trim().parse::<u32>())
                .try_fold(0u32, |acc, n| n.map(|n| acc.saturating_add(n)))
                .map_err(|_| bad_count())?;
            spec.node_cnt = Some(n);
        } else if is_key(tag, "CoreCnt", 5)
            || is_key(tag, "CoreCount", 5)
            || is_key(tag, "CPUCnt", 5)
            || is_key(tag, "CPUCount", 5)
        {
            return Err(format!(
                "CoreCnt is not supported by canopy: reservations hold whole nodes.  {msg}"
            ));
        } else if is_key(tag, "Nodes", 5) {
            spec.nodes = Some(val.to_string());
        } else if is_key(tag, "Features", 2) {
            spec.features = Some(val.to_string());
        } else if is_key(tag, "Licenses", 2) {
            spec.licenses = Some(val.to_string());
        } else if is_key(tag, "PartitionName", 1) {
            spec.partition = Some(val.to_string());
        } else if is_key(tag, "TRES", 1) {
            spec.tres = Some(val.to_string());
        } else if is_key(tag, "Users", 1) {
            spec.users = Some(val.to_string());
            spec.users_op = op;
        } else if is_key(tag, "Groups", 1) {
            return Err(format!(
                "Groups is not supported by canopy: use Users or Accounts.  {msg}"
            ));
        } else if is_key(tag, "Watts", 1) {
            return Err(format!("Watts is not supported by canopy.  {msg}"));
        } else if starts_res(tag) {
            continue;
        } else {
            return Err(format!("Unknown parameter {arg}.  {msg}"));
        }
    }
    Ok(spec)
}

/// The checks scontrol makes before it sends a create.
pub fn check_create(spec: &ResvSpec) -> Result<(), String> {
    const NO: &str = "No reservation created.";
    let Some(start) = spec.start else {
        return Err(format!("A start time must be given.  {NO}"));
    };
    if spec.end.is_none() && spec.duration_min.is_none() {
        return Err(format!("An end time or duration must be given.  {NO}"));
    }
    if let (Some(end), Some(Some(d))) = (spec.end, spec.duration_min) {
        if start + i64::from(d) * 60 != end {
            return Err(format!(
                "StartTime + Duration does not equal EndTime.  {NO}"
            ));
        }
    }
    if spec.end.is_some_and(|e| start > e) {
        return Err(format!("Start time cannot be after end time.  {NO}"));
    }
    let none = |v: &Option<String>| v.as_deref().is_none_or(str::is_empty);
    if none(&spec.nodes)
        && spec.node_cnt.is_none()
        && none(&spec.licenses)
        && none(&spec.tres)
        && spec.partition.is_none()
    {
        return Err(format!(
            "CoreCnt, Nodes, NodeCnt, BurstBuffer, Licenses or Watts must be specified.  {NO}"
        ));
    }
    if none(&spec.users) && none(&spec.accounts) {
        return Err(format!(
            "Either Users/Groups and/or Accounts must be specified.  {NO}"
        ));
    }
    Ok(())
}

fn refusal(e: CliError) -> String {
    match e {
        CliError::Refused(e) => e.message,
        other => other.to_string(),
    }
}

/// `scontrol create reservation ...`.
pub fn create(args: &[&str]) -> i32 {
    let now = chrono::Utc::now().timestamp();
    let spec = match parse_args(args, "No reservation created.", now).and_then(|s| {
        check_create(&s)?;
        Ok(s)
    }) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("scontrol: error: {e}");
            return 1;
        }
    };
    match call(Body::CreateResv(spec)) {
        Ok(Body::ResvCreated(name)) => {
            println!("Reservation created: {name}");
            0
        }
        Ok(Body::Error(e)) => {
            eprintln!("Error creating the reservation: {}", e.message);
            1
        }
        Ok(other) => {
            eprintln!(
                "Error creating the reservation: unexpected reply {}",
                other.kind()
            );
            1
        }
        Err(e) => {
            eprintln!("Error creating the reservation: {}", refusal(e));
            1
        }
    }
}

/// `scontrol update ReservationName=NAME ...`.
pub fn update(args: &[&str]) -> i32 {
    let now = chrono::Utc::now().timestamp();
    let spec = match parse_args(args, "No reservation update.", now) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("scontrol: error: {e}");
            return 1;
        }
    };
    if spec.name.is_none() {
        eprintln!("scontrol: error: Reservation must be given.  No reservation update.");
        return 1;
    }
    match call(Body::UpdateResv(spec)) {
        Ok(Body::Ok) => {
            println!("Reservation updated.");
            0
        }
        Ok(Body::Error(e)) => {
            eprintln!("Error updating the reservation: {}", e.message);
            1
        }
        Ok(other) => {
            eprintln!(
                "Error updating the reservation: unexpected reply {}",
                other.kind()
            );
            1
        }
        Err(e) => {
            eprintln!("Error updating the reservation: {}", refusal(e));
            1
        }
    }
}

/// `scontrol delete ReservationName=NAME` (also `delete reservation NAME`
/// and `delete reservation=NAME`). Silent on success, as in Slurm.
pub fn delete(args: &[&str]) -> i32 {
    let (arg, name) = match args {
        [word, name] if is_key(word, "ReservationName", 3) && !word.contains('=') => {
            (format!("ReservationName={name}"), name.to_string())
        }
        [one] => match one.split_once('=') {
            Some((k, v)) if is_key(k, "ReservationName", 3) => (one.to_string(), v.to_string()),
            _ => {
                eprintln!("scontrol: error: Invalid deletion entity: {one}");
                return 1;
            }
        },
        _ => {
            eprintln!("scontrol: error: too few arguments for keyword:delete");
            return 1;
        }
    };
    match call(Body::DeleteResv(name)) {
        Ok(Body::Ok) => 0,
        Ok(Body::Error(e)) => {
            eprintln!("delete_reservation {arg}: {}", e.message);
            1
        }
        Ok(other) => {
            eprintln!(
                "delete_reservation {arg}: unexpected reply {}",
                other.kind()
            );
            1
        }
        Err(e) => {
            eprintln!("delete_reservation {arg}: {}", refusal(e));
            1
        }
    }
}

/// `scontrol show reservation [NAME]`.
pub fn show(target: Option<&str>, one_liner: bool) -> i32 {
    let now = chrono::Utc::now().timestamp();
    let list = match call(Body::QueryResv) {
        Ok(Body::Reservations(l)) => l,
        Ok(other) => {
            eprintln!(
                "slurm_load_reservations error: unexpected reply {}",
                other.kind()
            );
            return 1;
        }
        Err(e) => {
            eprintln!("slurm_load_reservations error: {}", refusal(e));
            return 1;
        }
    };
    let shown: Vec<_> = list
        .iter()
        .filter(|r| target.is_none_or(|t| r.name == t))
        .collect();
    if shown.is_empty() {
        match target {
            None => println!("No reservations in the system"),
            Some(name) => {
                println!("Reservation {name} not found");
                return 1;
            }
        }
        return 0;
    }
    for r in shown {
        print!("{}", show_reservation(r, now, one_liner));
    }
    0
}

/// `scontrol show licenses [NAME]`.
pub fn show_licenses(target: Option<&str>, one_liner: bool) -> i32 {
    let list = match call(Body::QueryLicenses) {
        Ok(Body::Licenses(l)) => l,
        Ok(other) => {
            eprintln!(
                "slurm_load_licenses error: unexpected reply {}",
                other.kind()
            );
            return 1;
        }
        Err(e) => {
            eprintln!("slurm_load_licenses error: {}", refusal(e));
            return 1;
        }
    };
    if list.is_empty() {
        println!("No licenses configured in Slurm.");
        return 0;
    }
    let shown: Vec<_> = list
        .iter()
        .filter(|l| target.is_none_or(|t| l.name == t))
        .collect();
    if shown.is_empty() {
        println!("License {} not found", target.unwrap_or_default());
        return 1;
    }
    for l in shown {
        print!("{}", show_license(l, one_liner));
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_800_000_000;
    const NO: &str = "No reservation created.";

    #[test]
    fn keys_abbreviate_as_slurm_allows() {
        let s = parse_args(
            &[
                "reservation",
                "res=r1",
                "st=now",
                "dur=1:00:00",
                "nodes=n[1-2]",
                "fl=MAINT,IGNORE_JOBS",
                "user=root",
                "acc+=phys",
                "part=p",
                "lic=fluent:1",
            ],
            NO,
            NOW,
        )
        .unwrap();
        assert_eq!(s.name.as_deref(), Some("r1"));
        assert_eq!(s.start, Some(NOW));
        assert_eq!(s.duration_min, Some(Some(60)));
        assert_eq!(s.nodes.as_deref(), Some("n[1-2]"));
        assert_eq!(s.flags.as_deref(), Some("MAINT,IGNORE_JOBS"));
        assert_eq!(s.users.as_deref(), Some("root"));
        assert_eq!(
            (s.accounts.as_deref(), s.accounts_op),
            (Some("phys"), ListOp::Add)
        );
        assert_eq!(s.partition.as_deref(), Some("p"));
        assert_eq!(s.licenses.as_deref(), Some("fluent:1"));
        // Any text is refused, never a panic on a character boundary.
        assert!(parse_args(&["éé=1"], NO, NOW).is_err());
        assert!(parse_args(&["é"], NO, NOW).is_err());
        // `Node=` is too short for Nodes (5 letters needed).
        assert_eq!(
            parse_args(&["node=n1"], NO, NOW).unwrap_err(),
            format!("Unknown parameter node=n1.  {NO}")
        );
    }

    #[test]
    fn times_and_durations_use_slurms_grammar() {
        let s = parse_args(
            &["starttime=now+1hour", "duration=UNLIMITED", "nodecnt=2"],
            NO,
            NOW,
        )
        .unwrap();
        assert_eq!(s.start, Some(NOW + 3600));
        assert_eq!(s.duration_min, Some(None));
        assert_eq!(s.node_cnt, Some(2));
        let s = parse_args(&["duration=1-00:00:00"], NO, NOW).unwrap();
        assert_eq!(s.duration_min, Some(Some(1440)));
        assert_eq!(
            parse_args(&["StartTime=whenever"], NO, NOW).unwrap_err(),
            format!("Invalid start time StartTime=whenever.  {NO}")
        );
        assert_eq!(
            parse_args(&["Duration=x"], NO, NOW).unwrap_err(),
            format!("Invalid duration Duration=x.  {NO}")
        );
        assert_eq!(
            parse_args(&["NodeCnt=two"], NO, NOW).unwrap_err(),
            "Invalid node count two"
        );
    }

    #[test]
    fn create_needs_what_scontrol_asks_for() {
        let base = |extra: &[&str]| {
            let mut a = vec!["StartTime=now", "Duration=10", "Nodes=n1", "Users=root"];
            a.retain(|x| {
                !extra
                    .iter()
                    .any(|e| x.starts_with(e.split('=').next().unwrap()))
            });
            a.extend(
                extra
                    .iter()
                    .filter(|e| e.contains('=') && !e.ends_with('=')),
            );
            check_create(&parse_args(&a, NO, NOW).unwrap())
        };
        assert_eq!(base(&[]), Ok(()));
        assert_eq!(
            base(&["StartTime="]).unwrap_err(),
            format!("A start time must be given.  {NO}")
        );
        assert_eq!(
            base(&["Duration="]).unwrap_err(),
            format!("An end time or duration must be given.  {NO}")
        );
        assert_eq!(
            base(&["Users="]).unwrap_err(),
            format!("Either Users/Groups and/or Accounts must be specified.  {NO}")
        );
        assert!(base(&["Nodes="])
            .unwrap_err()
            .starts_with("CoreCnt, Nodes, NodeCnt"));
        let s = parse_args(
            &[
                "StartTime=now",
                "Duration=10",
                "EndTime=now+1hour",
                "Nodes=n1",
                "Users=root",
            ],
            NO,
            NOW,
        )
        .unwrap();
        assert_eq!(
            check_create(&s).unwrap_err(),
            format!("StartTime + Duration does not equal EndTime.  {NO}")
        );
    }
}
