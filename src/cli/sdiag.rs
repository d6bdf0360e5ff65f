//! `sdiag`: the controller's statistics in Slurm's layout (the sections whose
//! keys monitoring tools such as prometheus-slurm-exporter parse).
//!
//! canopy's controller is one event loop, so "Server thread count" is 1, and
//! it has no agent queue (fan-outs go through the relay actor). The
//! backfill section comes from the backfill pass's counters (cycle times
//! measured by the controller around each pass). The connection lines
//! (open, peak, limit, refused at the limit) are canopy's, in the same
//! layout.

use super::client::Client;
use crate::wire::messages::{BackfillDiag, Body, CtldStats};

fn stamp(t: i64) -> String {
    use chrono::TimeZone;
    match chrono::Local.timestamp_opt(t, 0).single() {
        Some(d) => format!("{} ({t})", d.format("%a %b %d %H:%M:%S %Y")),
        None => format!("({t})"),
    }
}

/// The report for `s`.
pub fn render(s: &CtldStats) -> String {
    let mut o = String::new();
    let line = "*******************************************************\n";
    o.push_str(line);
    o.push_str(&format!("sdiag output at {}\n", stamp(s.now)));
    o.push_str(&format!("Data since      {}\n", stamp(s.started)));
    o.push_str(line);
    o.push_str("Server thread count:  1\n");
    o.push_str("Agent queue size:     0\n");
    o.push_str("Agent count:          0\n");
    o.push_str("Agent thread count:   0\n");
    o.push_str("DBD Agent queue size: 0\n");
    // The controller port's connection limit (SlurmctldParameters=
    // conmgr_max_connections); Slurm-style keys, one per line. A limit of 0
    // means a controller too old to report them: no lines rather than zeros.
    if s.connections_max > 0 {
        let c = [
            ("Connections:", s.connections_current),
            ("Connections peak:", s.connections_peak),
            ("Connections limit:", s.connections_max),
            ("Connections refused:", s.connections_refused),
            // Bad peers (issue 14): counted here, logged at most once per
            // interval per kind.
            ("Bad frames:", s.bad_frames),
            ("Auth rejected:", s.auth_rejected),
            ("Auth timeouts:", s.auth_timeouts),
            ("Idle closed:", s.idle_closed),
            ("Not daemon refused:", s.not_daemon),
            ("Pre-auth refused:", s.preauth_refused),
        ];
        for (key, value) in c {
            o.push_str(&format!("{key:<21} {value}\n"));
        }
    }
    // Credential refusals by reason (canopy's own lines; Slurm's sdiag has
    // no equivalent, MUNGE logs them instead).
    if !s.auth_refused_by.is_empty() {
        o.push_str("Credentials refused:\n");
        for (why, n) in &s.auth_refused_by {
            o.push_str(&format!("\t{why:<18} {n}\n"));
        }
    }
    o.push('\n');
    o.push_str(&format!("Jobs submitted: {}\n", s.jobs_submitted));
    o.push_str(&format!("Jobs started:   {}\n", s.jobs_started));
    o.push_str(&format!("Jobs completed: {}\n", s.jobs_completed));
    o.push_str(&format!("Jobs canceled:  {}\n", s.jobs_cancelled));
    o.push_str(&format!("Jobs failed:    {}\n\n", s.jobs_failed));
    o.push_str(&format!("Job states ts:  {}\n", stamp(s.now)));
    o.push_str(&format!("Jobs pending:   {}\n", s.jobs_pending));
    o.push_str(&format!("Jobs running:   {}\n\n", s.jobs_running));
    let mean = s.sched_total_us.checked_div(s.sched_cycles).unwrap_or(0);
    let minutes = ((s.now - s.started).max(1) as u64).div_ceil(60);
    o.push_str("Main schedule statistics (microseconds):\n");
    o.push_str(&format!("\tLast cycle:   {}\n", s.sched_last_us));
    o.push_str(&format!("\tMax cycle:    {}\n", s.sched_max_us));
    o.push_str(&format!("\tTotal cycles: {}\n", s.sched_cycles));
    o.push_str(&format!("\tMean cycle:   {mean}\n"));
    o.push_str(&format!(
        "\tCycles per minute: {}\n",
        s.sched_cycles / minutes
    ));
    o.push_str(&format!("\tLast queue length: {}\n\n", s.jobs_pending));
    backfill_section(&mut o, &s.backfill);
    o.push_str("Remote Procedure Call statistics by message type\n");
    let mut kinds: Vec<_> = s
        .by_kind
        .iter()
        .filter(|k| k.total_us > 0 || k.count > 0)
        .collect();
    kinds.sort_by(|a, b| b.count.cmp(&a.count).then(a.kind.cmp(&b.kind)));
    for k in kinds {
        let ave = k.total_us.checked_div(k.count).unwrap_or(0);
        o.push_str(&format!(
            "\t{:<24} count:{:<8} ave_time:{:<8} total_time:{}\n",
            k.kind, k.count, ave, k.total_us
        ));
    }
    if s.rl_enabled {
        o.push_str("\nRemote Procedure Call rate limiting (rl_enable)\n");
        o.push_str(&format!(
            "\tBucket size: {}  Refill rate: {}  Refill period: {}\n",
            s.rl_bucket_size, s.rl_refill_rate, s.rl_refill_period
        ));
        o.push_str(&format!(
            "\tUsers tracked: {} (table size {})\n",
            s.rl_users, s.rl_table_size
        ));
        o.push_str(&format!("\tRPCs limited: {}\n", s.rl_limited));
        o.push_str(&format!(
            "\tRPCs not limited, table full: {}\n",
            s.rl_table_full
        ));
        for (uid, count) in &s.rl_top {
            o.push_str(&format!("\tuid={uid:<10} limited:{count}\n"));
        }
    }
    o
}

/// canopy's percentiles beside Slurm's averages: a section of its own, after
/// every Slurm section, whose lines carry no `ave_time:` (so parsers of the
/// RPC lines above, which match on it, do not pick these up).
pub fn render_latency(l: &crate::console::latency::LatencyReport) -> String {
    let mut o = String::new();
    if l.by_kind.is_empty() {
        return o;
    }
    o.push_str("\nRemote Procedure Call latency percentiles by message type (microseconds)\n");
    let mut rows: Vec<_> = l.by_kind.iter().collect();
    rows.sort_by(|a, b| b.count.cmp(&a.count).then(a.key.cmp(&b.key)));
    for r in rows {
        o.push_str(&format!(
            "\t{:<24} count:{:<8} p50:{:<8} p99:{:<8} p99.9:{:<8} max:{}\n",
            r.key, r.count, r.p50_us, r.p99_us, r.p999_us, r.max_us
        ));
    }
    o
}

/// Slurm 22.05's "Backfilling stats": the means only once a cycle ran.
/// canopy has no `sdiag -r`, so "since last stats cycle start" is since
/// the controller started, and it has no heterogeneous jobs.
fn backfill_section(o: &mut String, b: &BackfillDiag) {
    let mean = |sum: u64| sum.checked_div(b.cycles).unwrap_or(0);
    o.push_str("Backfilling stats\n");
    o.push_str(&format!(
        "\tTotal backfilled jobs (since last slurm start): {}\n",
        b.backfilled
    ));
    o.push_str(&format!(
        "\tTotal backfilled jobs (since last stats cycle start): {}\n",
        b.backfilled
    ));
    o.push_str("\tTotal backfilled heterogeneous job components: 0\n");
    o.push_str(&format!("\tTotal cycles: {}\n", b.cycles));
    match b.last_cycle_when.filter(|&t| t > 0) {
        Some(t) => o.push_str(&format!("\tLast cycle when: {}\n", stamp(t))),
        None => o.push_str("\tLast cycle when: N/A\n"),
    }
    o.push_str(&format!("\tLast cycle: {}\n", b.last_us));
    o.push_str(&format!("\tMax cycle:  {}\n", b.max_us));
    if b.cycles > 0 {
        o.push_str(&format!("\tMean cycle: {}\n", mean(b.total_us)));
    }
    o.push_str(&format!("\tLast depth cycle: {}\n", b.last_depth));
    o.push_str(&format!(
        "\tLast depth cycle (try sched): {}\n",
        b.last_depth_try
    ));
    if b.cycles > 0 {
        o.push_str(&format!("\tDepth Mean: {}\n", mean(b.depth_sum)));
        o.push_str(&format!(
            "\tDepth Mean (try depth): {}\n",
            mean(b.depth_try_sum)
        ));
    }
    o.push_str(&format!("\tLast queue length: {}\n", b.last_queue_len));
    if b.cycles > 0 {
        o.push_str(&format!("\tQueue length mean: {}\n", mean(b.queue_len_sum)));
    }
    o.push_str(&format!("\tLast table size: {}\n", b.last_table_size));
    if b.cycles > 0 {
        o.push_str(&format!("\tMean table size: {}\n", mean(b.table_size_sum)));
    }
    o.push('\n');
}

pub fn run(args: &[String]) -> i32 {
    if let Some(a) = args.iter().find(|a| !matches!(a.as_str(), "-a" | "--all")) {
        if a == "-h" || a == "--help" {
            println!("Usage: sdiag [-a]");
            return 0;
        }
        eprintln!("sdiag: unrecognized option '{a}'");
        return 1;
    }
    super::block_on(async {
        let r = async {
            let mut c = Client::connect(None).await?;
            let stats = c.call(Body::QueryStats).await?;
            // The percentiles are a second request, so a controller without
            // them still gets Slurm's report (and nothing more).
            let lat = super::stats::fetch(&mut c, false).await.ok().flatten();
            Ok::<_, super::client::CliError>((stats, lat))
        }
        .await;
        match r {
            Ok((Body::Stats(s), lat)) => {
                print!("{}", render(&s));
                if let Some(l) = lat {
                    print!("{}", render_latency(&l));
                }
                0
            }
            Ok((other, _)) => {
                eprintln!("sdiag: error: unexpected reply {}", other.kind());
                1
            }
            Err(e) => super::report("sdiag", &e),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::messages::KindStat;

    #[test]
    fn keys_monitoring_tools_parse_are_present() {
        let s = CtldStats {
            started: 1_000_000,
            now: 1_000_600,
            jobs_submitted: 5,
            connections_current: 2,
            connections_peak: 9,
            connections_max: 64,
            connections_refused: 3,
            not_daemon: 4,
            rl_enabled: true,
            rl_bucket_size: 30,
            rl_refill_rate: 2,
            rl_refill_period: 1,
            rl_table_size: 8192,
            rl_users: 2,
            rl_limited: 7,
            rl_top: vec![(1000, 7)],
            sched_cycles: 10,
            sched_last_us: 40,
            sched_max_us: 900,
            sched_total_us: 1000,
            by_kind: vec![KindStat {
                kind: "SubmitJob".into(),
                count: 4,
                bytes: 100,
                total_us: 400,
            }],
            ..Default::default()
        };
        let out = render(&s);
        for key in [
            "Server thread count:  1\n",
            "Agent queue size:     0\n",
            "DBD Agent queue size: 0\n",
            "Jobs submitted: 5\n",
            "\tLast cycle:   40\n",
            "\tMean cycle:   100\n",
            "\tCycles per minute: 1\n",
            "\tTotal backfilled jobs (since last slurm start): 0\n",
            "\tLast cycle when: N/A\n",
            "\tTotal backfilled heterogeneous job components: 0\n",
            "Connections:          2\n",
            "Connections peak:     9\n",
            "Connections limit:    64\n",
            "Connections refused:  3\n",
            "Not daemon refused:   4\n",
            "Pre-auth refused:     0\n\n",
            "\tRPCs limited: 7\n",
            "\tuid=1000       limited:7\n",
        ] {
            assert!(out.contains(key), "missing {key:?} in\n{out}");
        }
        assert!(
            out.contains(
                "\tSubmitJob                count:4        ave_time:100      total_time:400\n"
            ),
            "{out}"
        );
    }

    #[test]
    fn the_backfill_section_reports_the_passes_as_slurm_prints_them() {
        let s = CtldStats {
            backfill: BackfillDiag {
                backfilled: 7,
                cycles: 2,
                last_cycle_when: Some(1_700_000_000),
                last_us: 1500,
                max_us: 2500,
                total_us: 4000,
                last_depth: 40,
                last_depth_try: 30,
                depth_sum: 60,
                depth_try_sum: 50,
                last_queue_len: 41,
                queue_len_sum: 81,
                last_table_size: 12,
                table_size_sum: 20,
            },
            ..Default::default()
        };
        let out = render(&s);
        let start = out.find("Backfilling stats\n").unwrap();
        let section = &out[start..];
        let section = &section[..section.find("\n\n").unwrap() + 1];
        let when = section
            .lines()
            .find(|l| l.starts_with("\tLast cycle when: "))
            .unwrap();
        assert!(when.ends_with(" (1700000000)"), "{when}");
        let expected = format!(
            "Backfilling stats\n\
             \tTotal backfilled jobs (since last slurm start): 7\n\
             \tTotal backfilled jobs (since last stats cycle start): 7\n\
             \tTotal backfilled heterogeneous job components: 0\n\
             \tTotal cycles: 2\n\
             {when}\n\
             \tLast cycle: 1500\n\
             \tMax cycle:  2500\n\
             \tMean cycle: 2000\n\
             \tLast depth cycle: 40\n\
             \tLast depth cycle (try sched): 30\n\
             \tDepth Mean: 30\n\
             \tDepth Mean (try depth): 25\n\
             \tLast queue length: 41\n\
             \tQueue length mean: 40\n\
             \tLast table size: 12\n\
             \tMean table size: 10\n"
        );
        assert_eq!(section, expected);
        // Before any cycle: no means, and no time for the last one.
        let out = render(&CtldStats::default());
        assert!(
            out.contains(
                "\tLast cycle when: N/A\n\tLast cycle: 0\n\tMax cycle:  0\n\tLast depth cycle: 0\n"
            ),
            "{out}"
        );
        assert!(!out.contains("Depth Mean"), "{out}");
    }

    #[test]
    fn stats_from_a_controller_without_connection_counters_decode_as_zero() {
        // What an N-1 controller sends: the same map without the new keys.
        let mut older = serde_json::to_value(CtldStats {
            jobs_submitted: 5,
            ..Default::default()
        })
        .unwrap();
        if let Some(map) = older.as_object_mut() {
            map.retain(|k, _| !k.starts_with("connections_"));
            assert!(map.contains_key("jobs_submitted"));
        }
        let bytes = rmp_serde::to_vec_named(&older).unwrap();
        let s: CtldStats = rmp_serde::from_slice(&bytes).unwrap();
        assert_eq!((s.jobs_submitted, s.connections_refused), (5, 0));
        // Nothing is claimed about connections such a controller did not count.
        let out = render(&s);
        assert!(!out.contains("Connections"), "{out}");
        assert!(
            out.contains("DBD Agent queue size: 0\n\nJobs submitted: 5\n"),
            "{out}"
        );
    }
}
