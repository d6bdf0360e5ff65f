//! Reservations and licenses as Slurm's commands print them: `scontrol
//! show reservation` (Key=Value records), `sinfo -T` (a fixed table) and
//! `scontrol show licenses`.

use crate::model::reservation::{fmt_licenses, Reservation};
use crate::model::time::{fmt_duration_long, fmt_timestamp, UnixTime};
use crate::wire::resv::LicenseInfo;

/// `State=`: ACTIVE from its start until its end, INACTIVE otherwise.
pub fn state_word(r: &Reservation, now: UnixTime) -> &'static str {
    if r.active(now) {
        "ACTIVE"
    } else {
        "INACTIVE"
    }
}

fn or_null(s: &str) -> &str {
    super::or_null(s)
}

/// One reservation in `scontrol show reservation`'s layout; `one_liner`
/// puts it on one line (`-o`). Multi-line records end with a blank line.
pub fn show_reservation(r: &Reservation, now: UnixTime, one_liner: bool) -> String {
    let lines = [
        format!(
            "ReservationName={} StartTime={} EndTime={} Duration={}",
            r.name,
            fmt_timestamp(Some(r.start)),
            fmt_timestamp(Some(r.end)),
            fmt_duration_long((r.end - r.start).max(0) as u64),
        ),
        format!(
            "Nodes={} NodeCnt={} CoreCnt={} Features={} PartitionName={} Flags={}",
            or_null(&r.node_list),
            r.ranks.len(),
            r.cpus,
            or_null(r.features.as_deref().unwrap_or("")),
            or_null(r.partition.as_deref().unwrap_or("")),
            r.flags_shown(),
        ),
        format!("TRES={}", r.tres_shown()),
        format!(
            "Users={} Groups=(null) Accounts={} Licenses={} State={} BurstBuffer=(null) Watts=n/a",
            r.users.shown(),
            r.accounts.shown(),
            fmt_licenses(&r.licenses),
            state_word(r, now),
        ),
        "MaxStartDelay=(null)".to_string(),
    ];
    if one_liner {
        format!("{}\n", lines.join(" "))
    } else {
        format!("{}\n\n", lines.join("\n   "))
    }
}

/// `sinfo -T`: RESV_NAME STATE START_TIME END_TIME DURATION NODELIST; the
/// name column as wide as the longest name (at least the header's).
pub fn sinfo_reservations(list: &[Reservation], now: UnixTime) -> String {
    let w = list
        .iter()
        .map(|r| r.name.len())
        .max()
        .unwrap_or(0)
        .max("RESV_NAME".len());
    let mut out = format!(
        "{:<w$}  {:>8}  {:>19}  {:>19}  {:>11}  {}\n",
        "RESV_NAME", "STATE", "START_TIME", "END_TIME", "DURATION", "NODELIST"
    );
    for r in list {
        out.push_str(&format!(
            "{:<w$}  {:>8}  {:>19}  {:>19}  {:>11}  {}\n",
            r.name,
            state_word(r, now),
            fmt_timestamp(Some(r.start)),
            fmt_timestamp(Some(r.end)),
            fmt_duration_long((r.end - r.start).max(0) as u64),
            r.node_list,
        ));
    }
    out
}

/// One license in `scontrol show licenses`' layout.
pub fn show_license(l: &LicenseInfo, one_liner: bool) -> String {
    let free = l.total.saturating_sub(l.used).saturating_sub(l.reserved);
    let sep = if one_liner { " " } else { "\n    " };
    format!(
        "LicenseName={}{sep}Total={} Used={} Free={} Reserved={} Remote=no\n",
        l.name, l.total, l.used, free, l.reserved
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::reservation::{AccessList, ResvFlag};

    fn sample() -> Reservation {
        Reservation {
            name: "maint".into(),
            start: 1_000_000,
            end: 1_003_600,
            ranks: vec![0],
            node_list: "n1".into(),
            cpus: 2,
            partition: None,
            features: None,
            users: AccessList {
                names: vec!["root".into()],
                deny: false,
            },
            accounts: AccessList::default(),
            flags: vec![ResvFlag::Maint, ResvFlag::SpecNodes],
            purge_secs: None,
            licenses: vec![],
        }
    }

    #[test]
    fn a_reservation_prints_in_slurms_layout() {
        let r = sample();
        let text = show_reservation(&r, 1_000_010, false);
        let start = fmt_timestamp(Some(1_000_000));
        let end = fmt_timestamp(Some(1_003_600));
        assert_eq!(
            text,
            format!(
                "ReservationName=maint StartTime={start} EndTime={end} Duration=01:00:00\n   \
                 Nodes=n1 NodeCnt=1 CoreCnt=2 Features=(null) PartitionName=(null) Flags=MAINT,SPEC_NODES\n   \
                 TRES=cpu=2\n   \
                 Users=root Groups=(null) Accounts=(null) Licenses=(null) State=ACTIVE BurstBuffer=(null) Watts=n/a\n   \
                 MaxStartDelay=(null)\n\n"
            )
        );
        let one = show_reservation(&r, 999_999, true);
        assert!(one.ends_with("State=INACTIVE BurstBuffer=(null) Watts=n/a MaxStartDelay=(null)\n"));
        assert_eq!(one.lines().count(), 1);
    }

    #[test]
    fn sinfo_t_lines_up_as_slurm_does() {
        let mut r = sample();
        r.end = r.start + 365 * 86_400;
        let text = sinfo_reservations(&[r], 1_000_010);
        let mut lines = text.lines();
        assert_eq!(
            lines.next(),
            Some("RESV_NAME     STATE           START_TIME             END_TIME     DURATION  NODELIST")
        );
        let row = lines.next().unwrap();
        assert!(row.starts_with("maint        ACTIVE  "), "{row}");
        assert!(row.ends_with("  365-00:00:00  n1"), "{row}");
        // A longer name widens its column.
        let mut long = sample();
        long.name = "maintenance_window".into();
        let text = sinfo_reservations(&[long], 1_000_010);
        assert!(text.starts_with("RESV_NAME              STATE  "), "{text}");
        assert!(text.contains("\nmaintenance_window    ACTIVE  "), "{text}");
    }

    #[test]
    fn licenses_print_with_free_and_reserved() {
        let l = LicenseInfo {
            name: "fluent".into(),
            total: 4,
            used: 1,
            reserved: 2,
        };
        assert_eq!(
            show_license(&l, false),
            "LicenseName=fluent\n    Total=4 Used=1 Free=1 Reserved=2 Remote=no\n"
        );
        assert_eq!(
            show_license(&l, true),
            "LicenseName=fluent Total=4 Used=1 Free=1 Reserved=2 Remote=no\n"
        );
    }
}
