//! sinfo's tables: the partition view (default, `-l`, `-s`), the node view
//! (`-N`, `-N -l`), the reasons view (`-R`, `-R -l`), user `-o`/`-O`
//! layouts, and the `-t`/`-p`/`-n` filters, printed exactly as Slurm does.
//!
//! As in Slurm, nodes are grouped into rows by the attributes the layout
//! prints: with `%P` a row per partition, with `%t` a row per state, and so
//! on; rows are sorted by partition order, then state (highest first).
//! Pure: the caller passes partitions, nodes and `now`, with any `-n`
//! hostlist already expanded. Fields canopy does not track (load, free
//! memory, reservations, ...) show Slurm's text for "unset".

use std::cmp::Ordering;

use super::fields::{
    compare_keys, render_line, resolve_auto_widths, Cell, FieldDef, FieldSpec, FieldTable, Item,
    SortSyntax, Width,
};
use super::time::{fmt_limit_min, fmt_timestamp, LimitStyle};
use super::{user_uid, FormatError, FormatWarning};
use crate::config::hostlist;
use crate::wire::types::{NodeBaseState, NodeInfo, PartitionInfo, PartitionState};

/// Narrowest the auto-sized partition and node-name columns get.
const MIN_AUTO_WIDTH: usize = 9;

/// One sinfo column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NodeField {
    Avail,
    FeaturesAct,
    Cpus,
    TmpDisk,
    FreeMem,
    Features,
    Groups,
    OverSubscribe,
    Reservation,
    TimeLimit,
    Memory,
    Hostnames,
    NodeAddr,
    PrioTier,
    Root,
    JobSize,
    StateCompact,
    User,
    Version,
    Weight,
    Sct,
    NodesAi,
    MaxCpusPerNode,
    CpusAiot,
    Nodes,
    Reason,
    NodesAiot,
    Gres,
    Timestamp,
    PrioJobFactor,
    DefaultTime,
    PreemptMode,
    NodeList,
    CpuLoad,
    Partition,
    PartitionName,
    AllocNodes,
    StateLong,
    UserLong,
    Cluster,
    Sockets,
    Cores,
    Threads,
    // `-O` only.
    AllocMem,
    Port,
}

/// sinfo's columns: `%` letters in the order `%all` prints them, then the `-O`-only
/// ones. The host-list titles are never cut; `-S` takes every letter.
static FIELDS: FieldTable<NodeField> = FieldTable {
    defs: &[
        FieldDef::new(NodeField::Avail, "AVAIL")
            .letter('a')
            .name("available")
            .sort(),
        FieldDef::new(NodeField::FeaturesAct, "ACTIVE_FEATURES")
            .letter('b')
            .name("features_act")
            .sort(),
        FieldDef::new(NodeField::Cpus, "CPUS")
            .letter('c')
            .name("cpus")
            .sort(),
        FieldDef::new(NodeField::TmpDisk, "TMP_DISK")
            .letter('d')
            .name("disk")
            .sort(),
        FieldDef::new(NodeField::FreeMem, "FREE_MEM")
            .letter('e')
            .name("freemem")
            .sort(),
        FieldDef::new(NodeField::Features, "AVAIL_FEATURES")
            .letter('f')
            .name("features")
            .sort(),
        FieldDef::new(NodeField::Groups, "GROUPS")
            .letter('g')
            .name("groups")
            .sort(),
        FieldDef::new(NodeField::OverSubscribe, "OVERSUBSCRIBE")
            .letter('h')
            .name("oversubscribe")
            .sort(),
        FieldDef::new(NodeField::Reservation, "RESERVATION")
            .letter('i')
            .name("reservation")
            .sort(),
        FieldDef::new(NodeField::TimeLimit, "TIMELIMIT")
            .letter('l')
            .name("time")
            .sort(),
        FieldDef::new(NodeField::Memory, "MEMORY")
            .letter('m')
            .name("memory")
            .sort(),
        FieldDef::new(NodeField::Hostnames, "HOSTNAMES")
            .letter('n')
            .name("nodehost")
            .sort()
            .whole_header(),
        FieldDef::new(NodeField::NodeAddr, "NODE_ADDR")
            .letter('o')
            .name("nodeaddr")
            .sort()
            .whole_header(),
        FieldDef::new(NodeField::PrioTier, "PRIO_TIER")
            .letter('p')
            .name("prioritytier")
            .sort(),
        FieldDef::new(NodeField::Root, "ROOT")
            .letter('r')
            .name("root")
            .sort(),
        FieldDef::new(NodeField::JobSize, "JOB_SIZE")
            .letter('s')
            .name("size")
            .sort(),
        FieldDef::new(NodeField::StateCompact, "STATE")
            .letter('t')
            .name("statecompact")
            .sort(),
        FieldDef::new(NodeField::User, "USER")
            .letter('u')
            .name("user")
            .sort(),
        FieldDef::new(NodeField::Version, "VERSION")
            .letter('v')
            .name("version")
            .sort(),
        FieldDef::new(NodeField::Weight, "WEIGHT")
            .letter('w')
            .name("weight")
            .sort(),
        FieldDef::new(NodeField::Sct, "S:C:T")
            .letter('z')
            .name("socketcorethread")
            .sort(),
        FieldDef::new(NodeField::NodesAi, "NODES(A/I)")
            .letter('A')
            .name("nodeai")
            .sort(),
        FieldDef::new(NodeField::MaxCpusPerNode, "MAX_CPUS_PER_NODE")
            .letter('B')
            .name("maxcpuspernode")
            .sort(),
        FieldDef::new(NodeField::CpusAiot, "CPUS(A/I/O/T)")
            .letter('C')
            .name("cpusstate")
            .sort(),
        FieldDef::new(NodeField::Nodes, "NODES")
            .letter('D')
            .name("nodes")
            .sort(),
        FieldDef::new(NodeField::Reason, "REASON")
            .letter('E')
            .name("reason")
            .sort(),
        FieldDef::new(NodeField::NodesAiot, "NODES(A/I/O/T)")
            .letter('F')
            .name("nodeaiot")
            .sort(),
        FieldDef::new(NodeField::Gres, "GRES")
            .letter('G')
            .name("gres")
            .sort(),
        FieldDef::new(NodeField::Timestamp, "TIMESTAMP")
            .letter('H')
            .name("timestamp")
            .sort(),
        FieldDef::new(NodeField::PrioJobFactor, "PRIO_JOB_FACTOR")
            .letter('I')
            .name("priorityjobfactor")
            .sort(),
        FieldDef::new(NodeField::DefaultTime, "DEFAULTTIME")
            .letter('L')
            .name("defaulttime")
            .sort(),
        FieldDef::new(NodeField::PreemptMode, "PREEMPT_MODE")
            .letter('M')
            .name("preemptmode")
            .sort(),
        FieldDef::new(NodeField::NodeList, "NODELIST")
            .letter('N')
            .name("nodelist")
            .sort()
            .whole_header(),
        FieldDef::new(NodeField::CpuLoad, "CPU_LOAD")
            .letter('O')
            .name("cpusload")
            .sort(),
        FieldDef::new(NodeField::Partition, "PARTITION")
            .letter('P')
            .name("partition")
            .sort(),
        FieldDef::new(NodeField::PartitionName, "PARTITION")
            .letter('R')
            .name("partitionname")
            .sort(),
        FieldDef::new(NodeField::AllocNodes, "ALLOCNODES")
            .letter('S')
            .name("allocnodes")
            .sort(),
        FieldDef::new(NodeField::StateLong, "STATE")
            .letter('T')
            .name("statelong")
            .sort(),
        FieldDef::new(NodeField::UserLong, "USER")
            .letter('U')
            .name("userlong")
            .sort(),
        FieldDef::new(NodeField::Cluster, "CLUSTER")
            .letter('V')
            .name("cluster")
            .sort(),
        FieldDef::new(NodeField::Sockets, "SOCKETS")
            .letter('X')
            .name("sockets")
            .sort(),
        FieldDef::new(NodeField::Cores, "CORES")
            .letter('Y')
            .name("cores")
            .sort(),
        FieldDef::new(NodeField::Threads, "THREADS")
            .letter('Z')
            .name("threads")
            .sort(),
        FieldDef::new(NodeField::AllocMem, "ALLOCMEM")
            .name("allocmem")
            .sort(),
        FieldDef::new(NodeField::Port, "PORT").name("port").sort(),
    ],
};

/// Which attributes split nodes into separate rows (Slurm's match flags).
#[derive(Debug, Default, Clone, Copy)]
struct MatchFlags {
    partition: bool,
    avail: bool,
    max_time: bool,
    default_time: bool,
    job_size: bool,
    hostnames: bool,
    node_addr: bool,
    features: bool,
    features_act: bool,
    gres: bool,
    reason: bool,
    reason_time: bool,
    reason_user: bool,
    state: bool,
    alloc_mem: bool,
    // Only with `-e`:
    cpus: bool,
    sockets: bool,
    cores: bool,
    threads: bool,
    sct: bool,
    memory: bool,
    weight: bool,
    port: bool,
    version: bool,
}

impl MatchFlags {
    fn from_items(items: &[Item<NodeField>]) -> Self {
        let mut m = MatchFlags::default();
        for item in items {
            let Item::Field(f) = item else { continue };
            match f.code {
                NodeField::Partition | NodeField::PartitionName => m.partition = true,
                NodeField::Avail => m.avail = true,
                NodeField::TimeLimit => m.max_time = true,
                NodeField::DefaultTime => m.default_time = true,
                NodeField::JobSize => m.job_size = true,
                NodeField::Hostnames => m.hostnames = true,
                NodeField::NodeAddr => m.node_addr = true,
                NodeField::Features => m.features = true,
                NodeField::FeaturesAct => m.features_act = true,
                NodeField::Gres => m.gres = true,
                NodeField::Reason => m.reason = true,
                NodeField::Timestamp => m.reason_time = true,
                NodeField::User | NodeField::UserLong => m.reason_user = true,
                NodeField::StateCompact | NodeField::StateLong => m.state = true,
                NodeField::AllocMem => m.alloc_mem = true,
                NodeField::Cpus | NodeField::CpusAiot => m.cpus = true,
                NodeField::Sockets => m.sockets = true,
                NodeField::Cores => m.cores = true,
                NodeField::Threads => m.threads = true,
                NodeField::Sct => m.sct = true,
                NodeField::Memory => m.memory = true,
                NodeField::Weight => m.weight = true,
                NodeField::Port => m.port = true,
                NodeField::Version => m.version = true,
                _ => {}
            }
        }
        m
    }
}

/// sinfo's standard views, chosen by `-s`, `-N` and `-R`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SinfoView {
    /// Plain sinfo: one row per partition and node state.
    Partitions,
    /// `-s`: one row per partition with A/I/O/T node counts.
    Summary,
    /// `-N`: one row per node and partition.
    Nodes,
    /// `-R`: why nodes are down or drained, regardless of partition.
    Reasons,
}

/// How sinfo should select, group and lay out its rows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SinfoFormat {
    items: Vec<Item<NodeField>>,
    /// The view; it decides grouping even with a user `-o`/`-O` layout.
    pub view: SinfoView,
    /// `-h`: no header (and no `-l` date line).
    pub no_header: bool,
    /// `-l`: print the date line before the header.
    pub date_line: bool,
    /// `-e`: only merge nodes whose printed sizes are identical.
    pub exact: bool,
    /// `-t` as typed; `None` = every state (`down,drain` under `-R`).
    pub states: Option<String>,
    /// `-p`: only these partitions.
    pub partitions: Option<Vec<String>>,
    /// `-n`, expanded to node names: only these nodes.
    pub nodes: Option<Vec<String>>,
    /// `-d`: only nodes not responding; `-r`: only responding ones.
    pub dead_only: bool,
    pub responding_only: bool,
    /// `-S`: the user's row order (format letters, `+`/`-`, comma-separated).
    pub sort: Option<String>,
}

impl SinfoFormat {
    /// The built-in layout for `view`, long (`-l`) or not.
    pub fn standard(view: SinfoView, long: bool) -> Self {
        let (format, auto) = match (view, long) {
            (SinfoView::Partitions, false) => {
                ("%P %.5a %.10l %.6D %.6t %N", &[NodeField::Partition][..])
            }
            (SinfoView::Partitions, true) => (
                // Slurm 22.05's columns (23.02 adds RESERVATION before NODELIST).
                "%P %.5a %.10l %.10s %.4r %.8h %.10g %.6D %.11T %N",
                &[NodeField::Partition][..],
            ),
            (SinfoView::Summary, _) => ("%P %.5a %.10l %.16F %N", &[NodeField::Partition][..]),
            // N.B. Slurm's man page says `%#P`/`%.4c` here; real output is
            // right-justified partitions and left-justified CPUs.
            (SinfoView::Nodes, false) => (
                "%N %.6D %.P %6t",
                &[NodeField::NodeList, NodeField::Partition][..],
            ),
            (SinfoView::Nodes, true) => (
                "%N %.6D %.P %.11T %4c %.8z %.6m %.8d %.6w %.8f %20E",
                &[NodeField::NodeList, NodeField::Partition][..],
            ),
            (SinfoView::Reasons, false) => ("%20E %9u %19H %N", &[][..]),
            (SinfoView::Reasons, true) => ("%20E %12U %19H %6t %N", &[][..]),
        };
        let items = FIELDS
            .parse_format(format, false)
            .items
            .into_iter()
            .map(|item| auto_size(item, auto))
            .collect();
        Self {
            // `-s -l` prints no date line.
            date_line: long && view != SinfoView::Summary,
            ..Self::from_items(view, items)
        }
    }

    /// `sinfo -o FORMAT` (`%all` included). Unknown letters are echoed in
    /// the output and returned as warnings for stderr.
    pub fn user_format(view: SinfoView, format: &str) -> (Self, Vec<FormatWarning>) {
        let parsed = if format.eq_ignore_ascii_case("%all") {
            FIELDS.parse_format(&all_format(), true)
        } else {
            FIELDS.parse_format(format, false)
        };
        (
            Self::from_items(view, parsed.items),
            node_warnings(parsed.bad_specs),
        )
    }

    /// `sinfo -O name[:[.]width],...`. Unknown names are dropped and
    /// returned as warnings.
    pub fn field_list(view: SinfoView, list: &str) -> (Self, Vec<FormatWarning>) {
        let parsed = FIELDS.parse_list(list);
        (
            Self::from_items(view, parsed.items),
            node_warnings(parsed.bad_specs),
        )
    }

    fn from_items(view: SinfoView, items: Vec<Item<NodeField>>) -> Self {
        Self {
            items,
            view,
            no_header: false,
            date_line: false,
            exact: false,
            states: None,
            partitions: None,
            nodes: None,
            dead_only: false,
            responding_only: false,
            sort: None,
        }
    }
}

/// The default layouts size their partition (and, under `-N`, node-name)
/// columns to the longest value.
fn auto_size(item: Item<NodeField>, auto: &[NodeField]) -> Item<NodeField> {
    match item {
        Item::Field(f) if auto.contains(&f.code) => Item::Field(FieldSpec {
            width: Width::Auto(MIN_AUTO_WIDTH),
            ..f
        }),
        other => other,
    }
}

/// `%all`: lower-case letters `|`-separated, then upper-case ones each
/// followed by a space, exactly as Slurm builds it.
fn all_format() -> String {
    let mut format = String::new();
    for (i, c) in FIELDS.letters().enumerate() {
        if i > 0 {
            format.push('|');
        }
        format.push('%');
        format.push(c);
        if c.is_ascii_uppercase() {
            format.push(' ');
        }
    }
    format
}

fn node_warnings(specs: Vec<String>) -> Vec<FormatWarning> {
    specs
        .into_iter()
        .map(|spec| FormatWarning::InvalidNodeField { spec })
        .collect()
}

/// The numeric node state Slurm sorts rows by: base state plus flag bits.
fn raw_state(n: &NodeInfo) -> u32 {
    let base = match n.base {
        NodeBaseState::Unknown => 0,
        NodeBaseState::Down => 1,
        NodeBaseState::Idle => 2,
        NodeBaseState::Allocated => 3,
        NodeBaseState::Mixed => 5,
        NodeBaseState::Future => 6,
    };
    base | if n.drain { 0x200 } else { 0 }
        | if n.not_responding { 0x800 } else { 0 }
        | if n.reserved { 0x8000 } else { 0 }
        | if n.maint { 0x40000 } else { 0 }
}

fn busy(n: &NodeInfo) -> bool {
    matches!(n.base, NodeBaseState::Allocated | NodeBaseState::Mixed)
}

/// `%t`: `idle`, `mix`, `alloc`, `drng`, `drain`, `down*`, ...
pub fn state_compact(n: &NodeInfo) -> String {
    if let Some(word) = reserved_word(n, false) {
        return with_suffix(word, n);
    }
    let word = match (n.drain, busy(n), n.base) {
        (true, true, _) => "drng",
        (true, false, _) => "drain",
        (false, _, NodeBaseState::Unknown) => "unk",
        (false, _, NodeBaseState::Idle) => "idle",
        (false, _, NodeBaseState::Allocated) => "alloc",
        (false, _, NodeBaseState::Mixed) => "mix",
        (false, _, NodeBaseState::Down) => "down",
        (false, _, NodeBaseState::Future) => "futr",
    };
    with_suffix(word, n)
}

/// `%T`: `idle`, `mixed`, `allocated`, `draining`, `drained`, `down*`, ...
pub fn state_long(n: &NodeInfo) -> String {
    if let Some(word) = reserved_word(n, true) {
        return with_suffix(word, n);
    }
    let word = match (n.drain, busy(n)) {
        (true, true) => "draining",
        (true, false) => "drained",
        (false, _) => match n.base {
            NodeBaseState::Unknown => "unknown",
            NodeBaseState::Idle => "idle",
            NodeBaseState::Allocated => "allocated",
            NodeBaseState::Mixed => "mixed",
            NodeBaseState::Down => "down",
            NodeBaseState::Future => "future",
        },
    };
    with_suffix(word, n)
}

/// A node in an active reservation, as Slurm names it when nothing else
/// about it says more: `maint` (a MAINT one, unless the node is drained,
/// busy or down), `resv` (idle and reserved).
fn reserved_word(n: &NodeInfo, long: bool) -> Option<&'static str> {
    let quiet = !n.drain && !busy(n) && n.base != NodeBaseState::Down;
    match (
        n.maint && quiet,
        n.reserved && quiet && n.base == NodeBaseState::Idle,
    ) {
        (true, _) => Some("maint"),
        (false, true) => Some(if long { "reserved" } else { "resv" }),
        _ => None,
    }
}

/// The one suffix character a state carries, in Slurm's precedence: `$`
/// maintenance, `#` powering up, `%` powering down, `~` powered down, `!`
/// power-down pending, `*` not responding.
fn with_suffix(word: &str, n: &NodeInfo) -> String {
    // `$`: in a MAINT reservation, where the word does not say so already
    // (a busy, drained or down node), ahead of `*` as in Slurm.
    let p = n.power;
    if n.maint && word != "maint" {
        format!("{word}$")
    } else if p.powering_up {
        format!("{word}#")
    } else if p.powering_down {
        format!("{word}%")
    } else if p.powered_down {
        format!("{word}~")
    } else if p.power_down {
        format!("{word}!")
    } else if n.not_responding {
        format!("{word}*")
    } else {
        word.to_string()
    }
}

/// One `-t` entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StateSel {
    Base(NodeBaseState),
    /// Any node with the drain flag.
    Drain,
    Draining,
    Drained,
    NoRespond,
    /// In an active reservation.
    Reserved,
    /// In an active MAINT reservation.
    Maint,
    Cloud,
    PoweredDown,
    PoweringDown,
    PoweringUp,
    PowerDown,
    /// A Slurm state canopy nodes never have (completing, fail, reboot, ...).
    Never,
}

/// Base states in Slurm's numbering order (prefix matches try them first);
/// index 4 is Slurm's unused ERROR slot.
const BASE_NAMES: &[(&str, &str, Option<NodeBaseState>)] = &[
    ("UNK", "UNKNOWN", Some(NodeBaseState::Unknown)),
    ("DOWN", "DOWN", Some(NodeBaseState::Down)),
    ("IDLE", "IDLE", Some(NodeBaseState::Idle)),
    ("ALLOC", "ALLOCATED", Some(NodeBaseState::Allocated)),
    ("ERR", "ERROR", None),
    ("MIX", "MIXED", Some(NodeBaseState::Mixed)),
    ("FUTR", "FUTURE", Some(NodeBaseState::Future)),
];

/// Flag names after the base states, in the order Slurm tries them.
const FLAG_NAMES: &[(&str, StateSel)] = &[
    ("DRAIN", StateSel::Drain),
    ("DRAINED", StateSel::Drained),
    ("DRAINING", StateSel::Draining),
    ("DRNG", StateSel::Draining),
    ("RESV", StateSel::Reserved),
    ("RESERVED", StateSel::Reserved),
    ("PERFCTRS", StateSel::Never),
    ("NPC", StateSel::Never),
    ("COMP", StateSel::Never),
    ("COMPLETING", StateSel::Never),
    ("NO_RESPOND", StateSel::NoRespond),
    ("POWERED_DOWN", StateSel::PoweredDown),
    ("POWERING_DOWN", StateSel::PoweringDown),
    ("POWER_DOWN", StateSel::PowerDown),
    ("POWERING_UP", StateSel::PoweringUp),
    ("POWER_UP", StateSel::PoweringUp),
    ("FAIL", StateSel::Never),
    ("MAINT", StateSel::Maint),
    ("REBOOT", StateSel::Never),
    ("CLOUD", StateSel::Cloud),
];

/// Slurm compares the typed name against the first letters of each state
/// name, case-insensitively: `al` selects ALLOCATED.
fn starts_with_ci(state_name: &str, typed: &str) -> bool {
    state_name.len() >= typed.len()
        && state_name
            .get(..typed.len())
            .is_some_and(|head| head.eq_ignore_ascii_case(typed))
}

fn parse_state(typed: &str) -> Option<StateSel> {
    let base = BASE_NAMES
        .iter()
        .find(|(short, long, _)| starts_with_ci(short, typed) || starts_with_ci(long, typed));
    if let Some((_, _, state)) = base {
        return Some(state.map_or(StateSel::Never, StateSel::Base));
    }
    FLAG_NAMES
        .iter()
        .find(|(name, _)| starts_with_ci(name, typed))
        .map(|&(_, sel)| sel)
}

/// `None` = every state.
fn parse_state_list(list: &str) -> Result<Option<Vec<StateSel>>, FormatError> {
    let mut wanted = Vec::new();
    for typed in list.split(',').filter(|s| !s.is_empty()) {
        if typed.eq_ignore_ascii_case("all") {
            return Ok(None);
        }
        match parse_state(typed) {
            Some(sel) => wanted.push(sel),
            None => {
                return Err(FormatError::InvalidNodeState {
                    state: typed.to_string(),
                })
            }
        }
    }
    Ok(Some(wanted))
}

fn state_matches(sel: StateSel, n: &NodeInfo) -> bool {
    match sel {
        StateSel::Drain => n.drain,
        StateSel::Draining => n.drain && busy(n),
        StateSel::Drained => n.drain && !busy(n),
        StateSel::NoRespond => n.not_responding,
        StateSel::Reserved => n.reserved,
        StateSel::Maint => n.maint,
        StateSel::Cloud => n.power.cloud,
        StateSel::PoweredDown => n.power.powered_down,
        StateSel::PoweringDown => n.power.powering_down,
        StateSel::PoweringUp => n.power.powering_up,
        StateSel::PowerDown => n.power.power_down,
        StateSel::Never => false,
        // "alloc" means "has CPUs allocated", so mixed nodes count too.
        StateSel::Base(NodeBaseState::Allocated) => n.alloc_cpus > 0 || busy(n),
        // A base state matches whatever flags the node carries: a drained
        // idle node is listed by `-t idle` (as real Slurm 22.05 does, though it
        // prints it as "drain").
        StateSel::Base(base) => n.base == base,
    }
}

/// A row in the making: a partition (none only when merged across them) and
/// the nodes grouped under it.
struct Group<'a> {
    part: Option<(usize, &'a PartitionInfo)>,
    nodes: Vec<&'a NodeInfo>,
}

impl Group<'_> {
    fn first(&self) -> Option<&NodeInfo> {
        self.nodes.first().copied()
    }
}

fn part_matches(g: &Group, idx: usize, p: &PartitionInfo, m: &MatchFlags, view: SinfoView) -> bool {
    if view == SinfoView::Reasons {
        return true;
    }
    let Some((gidx, gp)) = g.part else {
        return false;
    };
    if gidx == idx {
        return true;
    }
    !(m.partition && gp.name != p.name
        || m.avail && gp.state != p.state
        || m.max_time && gp.max_time_min != p.max_time_min
        || m.default_time && gp.default_time_min != p.default_time_min
        || m.job_size && (gp.min_nodes != p.min_nodes || gp.max_nodes != p.max_nodes))
}

fn node_matches(g: &Group, n: &NodeInfo, m: &MatchFlags, view: SinfoView, exact: bool) -> bool {
    let Some(f) = g.first() else {
        return true;
    };
    if view == SinfoView::Nodes {
        return false;
    }
    let differs = m.hostnames && !g.nodes.iter().any(|o| o.hostname == n.hostname)
        || m.node_addr && !g.nodes.iter().any(|o| o.addr == n.addr)
        || (m.features || m.features_act) && f.features != n.features
        || m.gres && f.gres != n.gres
        || m.reason && f.reason != n.reason
        || m.reason_time && f.reason_time != n.reason_time
        || m.reason_user && f.reason_user != n.reason_user
        || m.state && state_long(f) != state_long(n)
        || m.alloc_mem && f.alloc_mem_mb != n.alloc_mem_mb;
    let size_differs = exact
        && (m.cpus && f.cpus != n.cpus
            || (m.sockets || m.sct) && f.sockets != n.sockets
            || (m.cores || m.sct) && f.cores_per_socket != n.cores_per_socket
            || (m.threads || m.sct) && f.threads_per_core != n.threads_per_core
            || m.memory && f.real_memory_mb != n.real_memory_mb
            || m.weight && f.weight != n.weight
            || m.port && f.port != n.port
            || m.version && f.version != n.version);
    !(differs || size_differs)
}

/// Node names in hostlist order: by prefix, then numeric suffix.
fn natural_key(name: &str) -> (&str, u128, usize) {
    let digits = name.len() - name.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    let (prefix, number) = name.split_at(name.len() - digits);
    (prefix, number.parse().unwrap_or(0), digits)
}

fn compressed<'a>(names: impl Iterator<Item = &'a str>) -> String {
    let mut names: Vec<&str> = names.collect();
    names.sort_by(|a, b| natural_key(a).cmp(&natural_key(b)));
    names.dedup();
    hostlist::compress(&names)
}

/// Builds the rows: every selected partition's nodes that pass the filters,
/// merged into the first row they match (Slurm's `_insert_node_ptr`).
fn build_groups<'a>(
    parts: &'a [PartitionInfo],
    nodes: &'a [NodeInfo],
    opts: &SinfoFormat,
    m: &MatchFlags,
) -> Result<Vec<Group<'a>>, FormatError> {
    let states = match (&opts.states, opts.view) {
        (Some(list), _) => parse_state_list(list)?,
        (None, SinfoView::Reasons) => {
            Some(vec![StateSel::Base(NodeBaseState::Down), StateSel::Drain])
        }
        (None, _) => None,
    };
    let shown = |n: &NodeInfo| {
        !(opts.dead_only && !n.not_responding || opts.responding_only && n.not_responding)
            && opts
                .nodes
                .as_ref()
                .is_none_or(|names| names.contains(&n.name))
            && states
                .as_ref()
                .is_none_or(|sels| sels.iter().any(|&s| state_matches(s, n)))
    };
    let selected: Vec<(usize, &PartitionInfo)> = parts
        .iter()
        .enumerate()
        .filter(|(_, p)| {
            opts.partitions
                .as_ref()
                .is_none_or(|names| names.contains(&p.name))
        })
        .collect();
    let mut groups: Vec<Group> = Vec::new();
    // Slurm lists every partition, even one with no (matching) nodes.
    if opts.view != SinfoView::Nodes && m.partition {
        groups.extend(selected.iter().map(|&part| Group {
            part: Some(part),
            nodes: Vec::new(),
        }));
    }
    for &(idx, part) in &selected {
        for name in &part.node_names {
            let Some(node) = nodes.iter().find(|n| &n.name == name).filter(|n| shown(n)) else {
                continue;
            };
            let found = groups.iter_mut().find(|g| {
                part_matches(g, idx, part, m, opts.view)
                    && node_matches(g, node, m, opts.view, opts.exact)
            });
            match found {
                Some(g) if g.nodes.iter().any(|o| o.name == node.name) => {}
                Some(g) => g.nodes.push(node),
                None => groups.push(Group {
                    part: Some((idx, part)),
                    nodes: vec![node],
                }),
            }
        }
    }
    Ok(groups)
}

/// Partition order, then state (highest first); `-N` sorts by node name.
fn sort_groups(groups: &mut [Group], view: SinfoView) {
    let part_idx = |g: &Group| g.part.map_or(usize::MAX, |(i, _)| i);
    let state = |g: &Group| g.first().map_or(0, raw_state);
    groups.sort_by(|a, b| {
        let by_node = if view == SinfoView::Nodes {
            match (a.first(), b.first()) {
                (Some(x), Some(y)) => natural_key(&x.name).cmp(&natural_key(&y.name)),
                _ => Ordering::Equal,
            }
        } else {
            Ordering::Equal
        };
        by_node
            .then(part_idx(a).cmp(&part_idx(b)))
            .then(state(b).cmp(&state(a)))
    });
}

/// `-S +P,-m`: order rows by these fields, each ascending (`+`, the
/// default) or descending (`-`), the first key deciding most. `#P` is the
/// partitions' slurm.conf order, which is already the default. Numbers
/// compare as numbers; letters sinfo does not know are skipped, as Slurm's
/// sinfo skips them.
fn user_sort(groups: &mut [Group], spec: &str) {
    let keys = FIELDS.parse_sort(spec, SortSyntax::Sinfo);
    let part_idx = |g: &Group| g.part.map_or(usize::MAX, |(i, _)| i);
    groups.sort_by(|a, b| {
        compare_keys(&keys, a, b, |k, a, b| {
            if k.conf_order && k.code == NodeField::Partition {
                part_idx(a).cmp(&part_idx(b))
            } else {
                let (x, y) = (text(k.code, a, 0), text(k.code, b, 0));
                match (x.trim().parse::<f64>(), y.trim().parse::<f64>()) {
                    (Ok(p), Ok(q)) => p.partial_cmp(&q).unwrap_or(Ordering::Equal),
                    _ => natural_key(&x).cmp(&natural_key(&y)),
                }
            }
        })
    });
}

/// Allocated / idle / other node and CPU counts, as `%A`, `%F` and `%C`
/// report them: drained or down nodes (and their idle CPUs) are "other".
#[derive(Debug, Default)]
struct Counts {
    nodes_alloc: u32,
    nodes_idle: u32,
    nodes_other: u32,
    cpus_alloc: u32,
    cpus_idle: u32,
    cpus_other: u32,
    cpus_total: u32,
}

fn counts(g: &Group) -> Counts {
    let mut c = Counts::default();
    for n in &g.nodes {
        let unavailable = n.drain || n.base == NodeBaseState::Down;
        if busy(n) {
            c.nodes_alloc += 1;
        } else if unavailable {
            c.nodes_other += 1;
        } else {
            c.nodes_idle += 1;
        }
        let free = n.cpus.saturating_sub(n.alloc_cpus);
        c.cpus_alloc = c.cpus_alloc.saturating_add(n.alloc_cpus);
        c.cpus_total = c.cpus_total.saturating_add(n.cpus);
        if unavailable {
            c.cpus_other = c.cpus_other.saturating_add(free);
        } else {
            c.cpus_idle = c.cpus_idle.saturating_add(free);
        }
    }
    c
}

/// Smallest value, with `+` when the row's nodes differ (`250+`).
fn min_plus<T: Ord + Copy + std::fmt::Display>(
    g: &Group,
    value: impl Fn(&NodeInfo) -> T,
) -> String {
    let min = g.nodes.iter().map(|n| value(n)).min();
    let max = g.nodes.iter().map(|n| value(n)).max();
    match (min, max) {
        (Some(lo), Some(hi)) if lo != hi => format!("{lo}+"),
        (Some(lo), _) => lo.to_string(),
        (None, _) => "0".to_string(),
    }
}

fn first_or(g: &Group, value: impl Fn(&NodeInfo) -> Option<String>, unset: &str) -> String {
    g.first()
        .and_then(value)
        .unwrap_or_else(|| unset.to_string())
}

fn non_empty(text: &str) -> Option<String> {
    (!text.is_empty()).then(|| text.to_string())
}

/// `%P`: the name, with `*` on the default partition kept inside the width.
fn partition_cell(p: &PartitionInfo, width: usize) -> String {
    if !p.default {
        return p.name.clone();
    }
    if width == 0 || p.name.chars().count() < width {
        format!("{}*", p.name)
    } else {
        let cut: String = p.name.chars().take(width - 1).collect();
        format!("{cut}*")
    }
}

fn job_size(p: &PartitionInfo) -> String {
    let min = p.min_nodes.max(1);
    match p.max_nodes {
        None => format!("{min}-infinite"),
        Some(max) if max == min => min.to_string(),
        Some(max) => format!("{min}-{max}"),
    }
}

/// The text of one cell; every sinfo value may be cut to its column.
fn text(field: NodeField, g: &Group, width: usize) -> String {
    use NodeField::*;
    let part = g.part.map(|(_, p)| p);
    let c = || counts(g);
    match field {
        Avail => part
            .map_or("n/a", |p| match p.state {
                PartitionState::Up => "up",
                PartitionState::Down => "down",
                PartitionState::Drain => "drain",
                PartitionState::Inactive => "inactive",
            })
            .to_string(),
        FeaturesAct | Features => first_or(g, |n| non_empty(&n.features.join(",")), "(null)"),
        Cpus => min_plus(g, |n| n.cpus),
        TmpDisk => "0".to_string(),
        FreeMem | CpuLoad | Cluster => "N/A".to_string(),
        Groups => part
            .and_then(|p| p.opts.allow_groups.as_ref())
            .map_or_else(|| "all".to_string(), |g| g.join(",")),
        AllocNodes => "all".to_string(),
        OverSubscribe => part.map_or("NO".to_string(), |p| p.opts.oversubscribe.name()),
        Reservation => String::new(),
        TimeLimit => part.map_or("n/a".to_string(), |p| {
            fmt_limit_min(p.max_time_min, LimitStyle::Sinfo)
        }),
        DefaultTime => part
            .and_then(|p| p.default_time_min)
            .map_or("n/a".to_string(), |m| {
                fmt_limit_min(Some(m), LimitStyle::Sinfo)
            }),
        Memory => min_plus(g, |n| n.real_memory_mb),
        Hostnames => compressed(g.nodes.iter().map(|n| n.hostname.as_str())),
        NodeAddr => compressed(g.nodes.iter().map(|n| n.addr.as_str())),
        NodeList => compressed(g.nodes.iter().map(|n| n.name.as_str())),
        PrioTier => part.map_or(1, |p| p.priority_tier).to_string(),
        PrioJobFactor => part.map_or(1, |p| p.priority_job_factor).to_string(),
        Root => if part.is_some_and(|p| p.opts.root_only) {
            "yes"
        } else {
            "no"
        }
        .to_string(),
        JobSize => part.map_or("n/a".to_string(), job_size),
        StateCompact => g.first().map_or("n/a".to_string(), state_compact),
        StateLong => g.first().map_or("n/a".to_string(), state_long),
        User => first_or(g, |n| n.reason_user.clone(), "Unknown"),
        UserLong => first_or(
            g,
            |n| {
                n.reason_user.as_ref().map(|u| match user_uid(u) {
                    Some(uid) => format!("{u}({uid})"),
                    None => u.clone(),
                })
            },
            "Unknown",
        ),
        Version => first_or(g, |n| non_empty(&n.version), "N/A"),
        Weight => min_plus(g, |n| n.weight),
        Sct => format!(
            "{}:{}:{}",
            min_plus(g, |n| n.sockets),
            min_plus(g, |n| n.cores_per_socket),
            min_plus(g, |n| n.threads_per_core)
        ),
        Sockets => min_plus(g, |n| n.sockets),
        Cores => min_plus(g, |n| n.cores_per_socket),
        Threads => min_plus(g, |n| n.threads_per_core),
        NodesAi => {
            let c = c();
            format!("{}/{}", c.nodes_alloc, c.nodes_idle)
        }
        NodesAiot => {
            let c = c();
            format!(
                "{}/{}/{}/{}",
                c.nodes_alloc,
                c.nodes_idle,
                c.nodes_other,
                g.nodes.len()
            )
        }
        CpusAiot => {
            let c = c();
            format!(
                "{}/{}/{}/{}",
                c.cpus_alloc, c.cpus_idle, c.cpus_other, c.cpus_total
            )
        }
        MaxCpusPerNode => "UNLIMITED".to_string(),
        Nodes => g.nodes.len().to_string(),
        Reason => first_or(g, |n| n.reason.clone().filter(|r| !r.is_empty()), "none"),
        Gres => first_or(g, |n| non_empty(&n.gres), "(null)"),
        Timestamp => first_or(
            g,
            |n| n.reason_time.map(|t| fmt_timestamp(Some(t))),
            "Unknown",
        ),
        PreemptMode => "OFF".to_string(),
        Partition => part.map_or("n/a".to_string(), |p| partition_cell(p, width)),
        PartitionName => part.map_or("n/a".to_string(), |p| p.name.clone()),
        AllocMem => first_or(g, |n| Some(n.alloc_mem_mb.to_string()), "0"),
        Port => first_or(g, |n| Some(n.port.to_string()), "0"),
    }
}

/// The longest value an auto-sized column will hold.
fn longest(field: NodeField, groups: &[Group]) -> usize {
    groups
        .iter()
        .map(|g| match field {
            NodeField::Partition => g
                .part
                .map_or(0, |(_, p)| p.name.chars().count() + usize::from(p.default)),
            _ => text(field, g, 0).chars().count(),
        })
        .max()
        .unwrap_or(0)
}

/// Renders sinfo's output: filters, grouping, sort, optional date line,
/// header, and one newline-terminated line per row.
pub fn render(
    parts: &[PartitionInfo],
    nodes: &[NodeInfo],
    opts: &SinfoFormat,
    now: i64,
) -> Result<String, FormatError> {
    let flags = MatchFlags::from_items(&opts.items);
    let mut groups = build_groups(parts, nodes, opts, &flags)?;
    sort_groups(&mut groups, opts.view);
    if let Some(spec) = &opts.sort {
        user_sort(&mut groups, spec);
    }
    let items = resolve_auto_widths(&opts.items, |f| longest(f, &groups));
    let mut out = String::new();
    if !opts.no_header {
        FIELDS.push_heading(&mut out, &items, opts.date_line, now)?;
    }
    for g in &groups {
        out.push_str(&render_line(&items, |f, width| {
            Cell::cut(text(f, g, width))
        }));
        out.push('\n');
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
