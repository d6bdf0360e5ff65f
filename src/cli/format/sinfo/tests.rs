//! Unit tests for sinfo's tables: the partition, node and reasons views, grouping and
//! summaries, `-o`/`-O` field lists, and the state filters and suffixes, as Slurm prints
//! them. Only tests live here; the code under test is in the parent module.

use super::*;
use crate::cli::format::time::fmt_date_line;

/// When the reasons were set in the reference run.
const REASON_AT: i64 = 1_795_232_624;
const NOW: i64 = REASON_AT + 337;

fn node(name: &str, base: NodeBaseState, alloc_cpus: u32) -> NodeInfo {
    NodeInfo {
        name: name.to_string(),
        addr: "127.0.0.1".to_string(),
        hostname: "vm".to_string(),
        port: 20001,
        base,
        drain: false,
        not_responding: false,
        rank: 0,
        attached_to: None,
        cpus: 2,
        sockets: 2,
        cores_per_socket: 1,
        threads_per_core: 1,
        real_memory_mb: 1000,
        alloc_cpus,
        alloc_mem_mb: if alloc_cpus > 0 { 1000 } else { 0 },
        features: Vec::new(),
        gres: String::new(),
        weight: 1,
        partitions: Vec::new(),
        reason: None,
        reason_user: None,
        reason_time: None,
        boot_time: None,
        slurmd_start_time: None,
        last_busy: None,
        version: "22.05.8".to_string(),
        cfg_gres: Vec::new(),
        alloc_gres: Vec::new(),
        gres_used: String::new(),
        invalid_reg: false,
        reserved: false,
        maint: false,
        boards: 1,
        tmp_disk_mb: 0,
        ignored_attrs: Vec::new(),
        power: Default::default(),
        dynamic: false,
    }
}

fn drained(mut n: NodeInfo, reason: &str) -> NodeInfo {
    n.drain = true;
    n.reason = Some(reason.to_string());
    n.reason_user = Some("root".to_string());
    n.reason_time = Some(REASON_AT);
    n
}

/// n1..n6 of the reference run: n2 draining, n4 drained and not
/// responding, n5 idle, the rest mixed.
fn sample_nodes() -> Vec<NodeInfo> {
    let mut n4 = drained(node("n4", NodeBaseState::Idle, 0), "disk bad");
    n4.not_responding = true;
    let mut n6 = node("n6", NodeBaseState::Mixed, 1);
    n6.alloc_mem_mb = 100;
    vec![
        node("n1", NodeBaseState::Mixed, 1),
        drained(node("n2", NodeBaseState::Mixed, 1), "maint window"),
        node("n3", NodeBaseState::Mixed, 1),
        n4,
        node("n5", NodeBaseState::Idle, 0),
        n6,
    ]
}

fn part(name: &str, nodes: &[&str], max_time: Option<u32>, state: PartitionState) -> PartitionInfo {
    PartitionInfo {
        name: name.to_string(),
        default: false,
        state,
        max_time_min: max_time,
        default_time_min: None,
        max_nodes: None,
        min_nodes: 1,
        nodes: hostlist::compress(nodes),
        node_names: nodes.iter().map(|s| s.to_string()).collect(),
        total_cpus: 2 * nodes.len() as u32,
        total_nodes: nodes.len() as u32,
        total_mem_mb: 0,
        preempt: Default::default(),
        preempt_mode: "OFF".into(),
        priority_job_factor: 1,
        priority_tier: 1,
        access: Default::default(),
        opts: Default::default(),
        hidden: false,
    }
}

fn sample_parts() -> Vec<PartitionInfo> {
    let mut debug = part(
        "debug",
        &["n1", "n2", "n3", "n4", "n5", "n6"],
        None,
        PartitionState::Up,
    );
    debug.default = true;
    debug.min_nodes = 0;
    let mut long = part(
        "long",
        &["n3", "n4", "n5", "n6"],
        Some(2880),
        PartitionState::Up,
    );
    long.default_time_min = Some(60);
    vec![
        debug,
        long,
        part(
            "verylongpartitionname",
            &["n5", "n6"],
            Some(30),
            PartitionState::Down,
        ),
        part("gpu", &["n6"], Some(90), PartitionState::Drain),
        part("off", &["n1"], None, PartitionState::Inactive),
        part("empty", &[], None, PartitionState::Up),
    ]
}

fn show(opts: &SinfoFormat) -> String {
    render(&sample_parts(), &sample_nodes(), opts, NOW).unwrap()
}

fn user(view: SinfoView, format: &str, no_header: bool) -> SinfoFormat {
    let (mut opts, warnings) = SinfoFormat::user_format(view, format);
    assert!(warnings.is_empty());
    opts.no_header = no_header;
    opts
}

#[test]
fn default_view_groups_partitions_by_state() {
    assert_eq!(
        show(&SinfoFormat::standard(SinfoView::Partitions, false)),
        "PARTITION             AVAIL  TIMELIMIT  NODES  STATE NODELIST\n\
             debug*                   up   infinite      1 drain* n4\n\
             debug*                   up   infinite      1   drng n2\n\
             debug*                   up   infinite      3    mix n[1,3,6]\n\
             debug*                   up   infinite      1   idle n5\n\
             long                     up 2-00:00:00      1 drain* n4\n\
             long                     up 2-00:00:00      2    mix n[3,6]\n\
             long                     up 2-00:00:00      1   idle n5\n\
             verylongpartitionname  down      30:00      1    mix n6\n\
             verylongpartitionname  down      30:00      1   idle n5\n\
             gpu                   drain    1:30:00      1    mix n6\n\
             off                   inact   infinite      1    mix n1\n\
             empty                    up   infinite      0    n/a \n"
    );
}

#[test]
fn partition_column_is_at_least_nine_wide() {
    let mut opts = SinfoFormat::standard(SinfoView::Partitions, false);
    opts.partitions = Some(vec!["long".to_string(), "gpu".to_string()]);
    assert_eq!(
        show(&opts),
        "PARTITION AVAIL  TIMELIMIT  NODES  STATE NODELIST\n\
             long         up 2-00:00:00      1 drain* n4\n\
             long         up 2-00:00:00      2    mix n[3,6]\n\
             long         up 2-00:00:00      1   idle n5\n\
             gpu       drain    1:30:00      1    mix n6\n"
    );
}

#[test]
fn summary_counts_allocated_idle_other() {
    assert_eq!(
        show(&SinfoFormat::standard(SinfoView::Summary, false)),
        "PARTITION             AVAIL  TIMELIMIT   NODES(A/I/O/T) NODELIST\n\
             debug*                   up   infinite          4/1/1/6 n[1-6]\n\
             long                     up 2-00:00:00          2/1/1/4 n[3-6]\n\
             verylongpartitionname  down      30:00          1/1/0/2 n[5-6]\n\
             gpu                   drain    1:30:00          1/0/0/1 n6\n\
             off                   inact   infinite          1/0/0/1 n1\n\
             empty                    up   infinite          0/0/0/0 \n"
    );
}

#[test]
fn long_summary_has_no_date_line() {
    let long = show(&SinfoFormat::standard(SinfoView::Summary, true));
    assert_eq!(
        long,
        show(&SinfoFormat::standard(SinfoView::Summary, false))
    );
}

#[test]
fn long_view_has_date_line_and_long_states() {
    let out = show(&SinfoFormat::standard(SinfoView::Partitions, true));
    let expected = format!(
            "{}\n\
             PARTITION             AVAIL  TIMELIMIT   JOB_SIZE ROOT OVERSUBS     GROUPS  NODES       STATE NODELIST\n\
             debug*                   up   infinite 1-infinite   no       NO        all      1    drained* n4\n\
             debug*                   up   infinite 1-infinite   no       NO        all      1    draining n2\n\
             debug*                   up   infinite 1-infinite   no       NO        all      3       mixed n[1,3,6]\n\
             debug*                   up   infinite 1-infinite   no       NO        all      1        idle n5\n\
             long                     up 2-00:00:00 1-infinite   no       NO        all      1    drained* n4\n\
             long                     up 2-00:00:00 1-infinite   no       NO        all      2       mixed n[3,6]\n\
             long                     up 2-00:00:00 1-infinite   no       NO        all      1        idle n5\n\
             verylongpartitionname  down      30:00 1-infinite   no       NO        all      1       mixed n6\n\
             verylongpartitionname  down      30:00 1-infinite   no       NO        all      1        idle n5\n\
             gpu                   drain    1:30:00 1-infinite   no       NO        all      1       mixed n6\n\
             off                   inact   infinite 1-infinite   no       NO        all      1       mixed n1\n\
             empty                    up   infinite 1-infinite   no       NO        all      0         n/a \n",
            fmt_date_line(NOW).unwrap()
        );
    assert_eq!(out, expected);
}

#[test]
fn node_view_one_row_per_node_and_partition() {
    // Slurm's order among one node's partitions is unspecified; canopy
    // keeps partition order.
    assert_eq!(
        show(&SinfoFormat::standard(SinfoView::Nodes, false)),
        "NODELIST   NODES             PARTITION STATE \n\
             n1             1                debug* mix   \n\
             n1             1                   off mix   \n\
             n2             1                debug* drng  \n\
             n3             1                debug* mix   \n\
             n3             1                  long mix   \n\
             n4             1                debug* drain*\n\
             n4             1                  long drain*\n\
             n5             1                debug* idle  \n\
             n5             1                  long idle  \n\
             n5             1 verylongpartitionname idle  \n\
             n6             1                debug* mix   \n\
             n6             1                  long mix   \n\
             n6             1 verylongpartitionname mix   \n\
             n6             1                   gpu mix   \n"
    );
}

#[test]
fn dead_and_responding_select_by_the_no_respond_flag() {
    let names = |opts: &SinfoFormat| -> Vec<String> {
        let mut v: Vec<String> = show(opts)
            .lines()
            .skip(1)
            .map(|l| l.split_whitespace().next().unwrap_or_default().to_string())
            .collect();
        v.dedup();
        v
    };
    let mut opts = SinfoFormat::standard(SinfoView::Nodes, false);
    opts.dead_only = true;
    assert_eq!(names(&opts), ["n4"]);
    opts.dead_only = false;
    opts.responding_only = true;
    let alive = names(&opts);
    assert!(
        !alive.contains(&"n4".to_string()) && alive.len() > 3,
        "{alive:?}"
    );
}

#[test]
fn node_long_view() {
    let mut opts = SinfoFormat::standard(SinfoView::Nodes, true);
    opts.nodes = Some(vec!["n2".to_string(), "n4".to_string()]);
    let expected = format!(
            "{}\n\
             NODELIST   NODES PARTITION       STATE CPUS    S:C:T MEMORY TMP_DISK WEIGHT AVAIL_FE REASON              \n\
             n2             1    debug*    draining 2       2:1:1   1000        0      1   (null) maint window        \n\
             n4             1    debug*    drained* 2       2:1:1   1000        0      1   (null) disk bad            \n\
             n4             1      long    drained* 2       2:1:1   1000        0      1   (null) disk bad            \n",
            fmt_date_line(NOW).unwrap()
        );
    assert_eq!(show(&opts), expected);
}

#[test]
fn reasons_views() {
    let reason_at = fmt_timestamp(Some(REASON_AT));
    assert_eq!(
        show(&SinfoFormat::standard(SinfoView::Reasons, false)),
        format!(
            "REASON               USER      TIMESTAMP           NODELIST\n\
                 disk bad             root      {reason_at} n4\n\
                 maint window         root      {reason_at} n2\n"
        )
    );
    let mut long = SinfoFormat::standard(SinfoView::Reasons, true);
    long.no_header = true;
    assert_eq!(
        show(&long),
        format!(
            "disk bad             root(0)      {reason_at} drain* n4\n\
                 maint window         root(0)      {reason_at} drng   n2\n"
        )
    );
}

#[test]
fn reasons_merge_nodes_across_partitions() {
    let mut nodes = sample_nodes();
    nodes[4] = drained(node("n5", NodeBaseState::Idle, 0), "disk bad");
    nodes[4].not_responding = true;
    let mut opts = SinfoFormat::standard(SinfoView::Reasons, false);
    opts.no_header = true;
    let out = render(&sample_parts(), &nodes, &opts, NOW).unwrap();
    let reason_at = fmt_timestamp(Some(REASON_AT));
    assert_eq!(
        out,
        format!(
            "disk bad             root      {reason_at} n[4-5]\n\
                 maint window         root      {reason_at} n2\n"
        )
    );
}

#[test]
fn exporter_queries() {
    assert_eq!(
        show(&user(SinfoView::Partitions, "%D|%T|%b", true)),
        "1|drained*|(null)\n1|draining|(null)\n3|mixed|(null)\n1|idle|(null)\n"
    );
    assert_eq!(
        show(&user(SinfoView::Partitions, " %C", true)),
        " 4/5/3/12\n"
    );
    assert_eq!(
            show(&user(SinfoView::Partitions, "%R,%C", true)),
            "debug,4/5/3/12\nlong,2/4/2/8\nverylongpartitionname,1/3/0/4\ngpu,1/1/0/2\noff,1/1/0/2\nempty,0/0/0/0\n"
        );
    assert_eq!(
        show(&user(SinfoView::Partitions, "%D,%T", true)),
        "1,drained*\n1,draining\n3,mixed\n1,idle\n"
    );
    assert_eq!(
        show(&user(SinfoView::Partitions, "%P", false))
            .lines()
            .nth(1),
        Some("debug*")
    );
}

#[test]
fn exporter_node_field_list() {
    let (mut opts, warnings) = SinfoFormat::field_list(
        SinfoView::Nodes,
        "NodeList,AllocMem,Memory,CPUsState,StateLong",
    );
    assert!(warnings.is_empty());
    opts.no_header = true;
    opts.nodes = Some(vec!["n1".to_string(), "n4".to_string()]);
    assert_eq!(
            show(&opts),
            "n1                  1000                1000                1/1/0/2             mixed               \n\
             n1                  1000                1000                1/1/0/2             mixed               \n\
             n4                  0                   1000                0/0/2/2             drained*            \n\
             n4                  0                   1000                0/0/2/2             drained*            \n"
        );
    let (opts, _) = SinfoFormat::field_list(
        SinfoView::Nodes,
        "NodeList: ,AllocMem: ,Memory: ,CPUsState: ,StateLong:",
    );
    assert_eq!(
        show(&opts).lines().nth(1),
        Some("n1 1000 1000 1/1/0/2 mixed")
    );
}

#[test]
fn field_list_partition_star_and_unknown_names() {
    let (opts, warnings) = SinfoFormat::field_list(
        SinfoView::Partitions,
        "Partition:5,StateLong:.8 ,NodeList,Bogus",
    );
    assert_eq!(
        warnings,
        [FormatWarning::InvalidNodeField {
            spec: "Bogus".to_string()
        }]
    );
    let out = show(&opts);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "PARTI   STATE NODELIST            ");
    assert_eq!(lines[1], "debu*drained* n4                  ");
    assert_eq!(lines[2], "debu*draining n2                  ");
    assert_eq!(lines[12], "empty     n/a                     ");
}

#[test]
fn state_filter() {
    let mut opts = user(SinfoView::Partitions, "%P %t %N", false);
    opts.states = Some("idle,drain".to_string());
    assert_eq!(
        show(&opts),
        "PARTITION STATE NODELIST\n\
             debug* drain* n4\n\
             debug* drng n2\n\
             debug* idle n5\n\
             long drain* n4\n\
             long idle n5\n\
             verylongpartitionname idle n5\n\
             gpu n/a \n\
             off n/a \n\
             empty n/a \n"
    );
    let only = |states: &str| {
        let mut opts = user(SinfoView::Partitions, "%N", true);
        opts.states = Some(states.to_string());
        show(&opts).lines().next().unwrap_or_default().to_string()
    };
    assert_eq!(only("al"), "n[1-3,6]");
    // A draining node still has its base state (n2 is mixed).
    assert_eq!(only("MIX"), "n[1-3,6]");
    assert_eq!(only("drng"), "n2");
    assert_eq!(only("drained"), "n4");
    assert_eq!(only("no_respond"), "n4");
    // n4 is drained but idle underneath.
    assert_eq!(only("idle"), "n[4-5]");
    assert_eq!(only("down,maint"), "");
    let mut nodes = sample_nodes();
    nodes[3].base = NodeBaseState::Down;
    let mut opts = user(SinfoView::Partitions, "%N %t", true);
    opts.states = Some("down".to_string());
    let out = render(&sample_parts(), &nodes, &opts, NOW).unwrap();
    assert_eq!(out, "n4 drain*\n");
    assert_eq!(only("all"), "n[1-6]");
}

#[test]
fn bad_state_is_an_error() {
    let mut opts = SinfoFormat::standard(SinfoView::Partitions, false);
    opts.states = Some("idle,foo".to_string());
    let err = render(&sample_parts(), &sample_nodes(), &opts, NOW).unwrap_err();
    assert_eq!(
        err,
        FormatError::InvalidNodeState {
            state: "foo".to_string()
        }
    );
}

#[test]
fn invalid_letter_echoed_and_widths_cut() {
    let (opts, warnings) =
        SinfoFormat::user_format(SinfoView::Partitions, "%Q|%.3P|%3N|%.4t|%2T|%.2n");
    assert_eq!(
        warnings,
        [FormatWarning::InvalidNodeField {
            spec: "Q".to_string()
        }]
    );
    let out = show(&opts);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "%Q|PAR|NOD|STAT|ST|HOSTNAMES");
    assert_eq!(lines[1], "%Q|de*|n4 |drai|dr|vm");
    assert_eq!(lines[3], "%Q|de*|n[1| mix|mi|vm");
    let (opts, _) = SinfoFormat::user_format(SinfoView::Partitions, "%1P|%.2N");
    // No state or partition column: one row holding every node.
    assert_eq!(show(&opts).lines().nth(1), Some("*|n["));
}

#[test]
fn all_letters() {
    let (mut opts, warnings) = SinfoFormat::user_format(SinfoView::Partitions, "%all");
    assert!(warnings.is_empty());
    opts.partitions = Some(vec!["gpu".to_string()]);
    let out = show(&opts);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
            lines[0],
            "AVAIL|ACTIVE_FEATURES|CPUS|TMP_DISK|FREE_MEM|AVAIL_FEATURES|GROUPS|OVERSUBSCRIBE|RESERVATION|\
             TIMELIMIT|MEMORY|HOSTNAMES|NODE_ADDR|PRIO_TIER|ROOT|JOB_SIZE|STATE|USER|VERSION|WEIGHT|S:C:T|\
             NODES(A/I) |MAX_CPUS_PER_NODE |CPUS(A/I/O/T) |NODES |REASON |NODES(A/I/O/T) |GRES |TIMESTAMP |\
             PRIO_JOB_FACTOR |DEFAULTTIME |PREEMPT_MODE |NODELIST |CPU_LOAD |PARTITION |PARTITION |ALLOCNODES |\
             STATE |USER |CLUSTER |SOCKETS |CORES |THREADS "
        );
    assert_eq!(
            lines[1],
            "drain|(null)|2|0|N/A|(null)|all|NO||1:30:00|1000|vm|127.0.0.1|1|no|1-infinite|mix|Unknown|22.05.8|1|\
             2:1:1|1/0 |UNLIMITED |1/1/0/2 |1 |none |1/0/0/1 |(null) |Unknown |1 |n/a |OFF |n6 |N/A |gpu |gpu |\
             all |mixed |Unknown |N/A |2 |1 |1 "
        );
}

#[test]
fn exact_splits_rows_by_size_otherwise_plus() {
    let mut nodes = sample_nodes();
    nodes[5].real_memory_mb = 2000;
    nodes[5].cpus = 4;
    let opts = user(SinfoView::Partitions, "%P %t %c %m %N", true);
    let out = render(&sample_parts(), &nodes, &opts, NOW).unwrap();
    assert_eq!(out.lines().nth(2), Some("debug* mix 2+ 1000+ n[1,3,6]"));
    let mut exact = opts.clone();
    exact.exact = true;
    let out = render(&sample_parts(), &nodes, &exact, NOW).unwrap();
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[2], "debug* mix 2 1000 n[1,3]");
    assert_eq!(lines[3], "debug* mix 4 2000 n6");
}

#[test]
fn states_and_suffixes() {
    let mut n = node("x1", NodeBaseState::Idle, 0);
    assert_eq!(
        (state_compact(&n), state_long(&n)),
        ("idle".to_string(), "idle".to_string())
    );
    n.not_responding = true;
    assert_eq!(
        (state_compact(&n), state_long(&n)),
        ("idle*".to_string(), "idle*".to_string())
    );
    n.base = NodeBaseState::Down;
    assert_eq!(state_compact(&n), "down*");
    n.drain = true;
    assert_eq!(
        (state_compact(&n), state_long(&n)),
        ("drain*".to_string(), "drained*".to_string())
    );
    n.base = NodeBaseState::Allocated;
    n.not_responding = false;
    assert_eq!(
        (state_compact(&n), state_long(&n)),
        ("drng".to_string(), "draining".to_string())
    );
    n.drain = false;
    assert_eq!(
        (state_compact(&n), state_long(&n)),
        ("alloc".to_string(), "allocated".to_string())
    );
    n.base = NodeBaseState::Future;
    assert_eq!(
        (state_compact(&n), state_long(&n)),
        ("futr".to_string(), "future".to_string())
    );
    n.base = NodeBaseState::Unknown;
    assert_eq!(
        (state_compact(&n), state_long(&n)),
        ("unk".to_string(), "unknown".to_string())
    );
}

#[test]
fn job_size_and_default_time() {
    let opts = user(SinfoView::Partitions, "%R %s %L", true);
    let mut parts = sample_parts();
    parts[2].max_nodes = Some(1);
    parts[3].max_nodes = Some(4);
    let out = render(&parts, &sample_nodes(), &opts, NOW).unwrap();
    assert_eq!(
        out,
        "debug 1-infinite n/a\nlong 1-infinite 1:00:00\nverylongpartitionname 1 n/a\ngpu 1-4 n/a\n\
             off 1-infinite n/a\nempty 1-infinite n/a\n"
    );
}

#[test]
fn date_line_out_of_range_is_an_error() {
    let opts = SinfoFormat::standard(SinfoView::Partitions, true);
    let err = render(&sample_parts(), &sample_nodes(), &opts, i64::MAX).unwrap_err();
    assert_eq!(err, FormatError::TimeOutOfRange { secs: i64::MAX });
}

#[test]
fn reserved_and_maintenance_nodes_are_named_as_slurm_names_them() {
    let mut n = node("x1", NodeBaseState::Idle, 0);
    n.reserved = true;
    assert_eq!(
        (state_compact(&n), state_long(&n)),
        ("resv".into(), "reserved".into())
    );
    assert_eq!(n.scontrol_state(), "IDLE+RESERVED");
    n.maint = true;
    assert_eq!(
        (state_compact(&n), state_long(&n)),
        ("maint".into(), "maint".into())
    );
    assert_eq!(n.scontrol_state(), "IDLE+MAINT+RESERVED");
    n.not_responding = true;
    assert_eq!(state_compact(&n), "maint*");
    n.not_responding = false;
    n.base = NodeBaseState::Mixed;
    n.alloc_cpus = 1;
    assert_eq!(
        (state_compact(&n), state_long(&n)),
        ("mix$".into(), "mixed$".into())
    );
    n.maint = false;
    assert_eq!(
        (state_compact(&n), state_long(&n)),
        ("mix".into(), "mixed".into())
    );
    // `-t resv` / `-t maint` select them.
    let mut other = node("x2", NodeBaseState::Idle, 0);
    let fmt = SinfoFormat {
        states: Some("resv".into()),
        ..user(SinfoView::Nodes, "%N", true)
    };
    let parts = vec![part("p", &["x1", "x2"], None, PartitionState::Up)];
    let out = render(&parts, &[n.clone(), other.clone()], &fmt, 0).unwrap();
    assert_eq!(out, "x1\n");
    other.maint = true;
    other.reserved = true;
    let fmt = SinfoFormat {
        states: Some("maint".into()),
        ..user(SinfoView::Nodes, "%N", true)
    };
    assert_eq!(render(&parts, &[n, other], &fmt, 0).unwrap(), "x2\n");
}
