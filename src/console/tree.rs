//! `canopy tree`'s pure core: fold every node's health, as the controller already holds it, into
//! a view that fits a screen at any cluster size.
//!
//! The relays fold reachability upward by change (`tree::health`), so the controller knows each
//! node's state without asking anyone; this module turns that per-node state into per-subtree
//! counts by Slurm state word and into failures grouped by kind and reason, each a hostlist with
//! its age. Subtrees follow the natural layout of `tree::topology` (every subtree is one
//! contiguous rank range), so counting one is a walk over a range, never a message.
//!
//! Bounds: the text view stays within [`MAX_LINES`] lines whatever the node count; what does not
//! fit (healthy subtrees first, then the smallest failure groups) is counted in
//! [`Omitted`] and printed as such, in the JSON too. `--node X` adds the hops from the
//! controller to X and what each hop says of X; the hops' answers are gathered by the shell
//! (`actors::controller::console`) and only compared here.
//!
//! Owns: classification into state words, folding, selection under the line budget, rendering.
//! Does not: read a clock (`now` is passed in), talk to relays, or know how node state is kept.

use std::collections::BTreeMap;
use std::ops::Range;

use serde::{Deserialize, Serialize};

use crate::config::hostlist;
use crate::tree::topology::Topology;

/// Unix seconds.
pub type UnixTime = i64;

/// The text view's line budget (the bar: about 25 lines at 100,000 nodes).
pub const MAX_LINES: usize = 25;
/// Most failure groups printed; the rest are summed in one line.
const MAX_FAILURE_LINES: usize = 8;
/// A hostlist longer than this is cut in the text view (the JSON keeps it whole).
const HOSTLIST_CHARS: usize = 60;

/// What `canopy tree` asks for.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TreeQuery {
    /// Levels of subtrees to list below the controller (0 = none, only totals and failures).
    pub depth: u32,
    /// Only subtrees with an unhealthy node (and only those are descended into).
    pub down: bool,
    /// Show this node's path from the controller and each hop's view of it.
    pub node: Option<String>,
}

/// Facts about one node, as the controller keeps them (the shell fills these in).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeFacts {
    pub name: String,
    /// A deleted dynamic node's rank: no node there.
    pub vacant: bool,
    pub future: bool,
    /// Down, with the reason's text and time.
    pub down: Option<(String, UnixTime)>,
    pub drain: Option<(String, UnixTime)>,
    pub registered: bool,
    pub responding: bool,
    /// Powered up (power saving's `On`); a powered-down node is not expected to answer.
    pub powered: bool,
    /// Powered down or on its way there (Slurm's `~` suffix).
    pub powered_down: bool,
    pub cpus: u32,
    pub alloc_cpus: u32,
    /// When the tree stopped reaching it, if it is unreachable and not yet DOWN.
    pub lost_since: Option<UnixTime>,
    /// The rank it hangs under now (`None`: the controller, or not attached).
    pub attached_to: Option<u32>,
}

/// Why a node counts as unhealthy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum ProblemKind {
    /// DOWN (by an operator, or not responding past SlurmdTimeout).
    Down,
    /// Drained or draining.
    Drain,
    /// The tree does not reach it, and SlurmdTimeout has not yet run out.
    LinkLost,
    /// It has not registered since the controller started.
    Unregistered,
}

impl ProblemKind {
    pub fn word(self) -> &'static str {
        match self {
            ProblemKind::Down => "down",
            ProblemKind::Drain => "drain",
            ProblemKind::LinkLost => "link lost",
            ProblemKind::Unregistered => "not registered",
        }
    }
}

/// A node's place in the view: its state word and, if unhealthy, why and since when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Classified {
    pub state: String,
    pub problem: Option<(ProblemKind, String, Option<UnixTime>)>,
}

/// Slurm's compact state word (`sinfo %t`: idle, mix, alloc, drng, drain, down, unk, futr), with
/// `*` for not responding and `~` for powered down, and the problem it stands for.
pub fn classify(f: &NodeFacts) -> Classified {
    let busy = f.alloc_cpus > 0;
    let word = if f.future {
        "futr"
    } else if f.drain.is_some() && busy {
        "drng"
    } else if f.drain.is_some() {
        "drain"
    } else if f.down.is_some() {
        "down"
    } else if !f.registered && f.powered {
        "unk"
    } else if !busy {
        "idle"
    } else if f.alloc_cpus >= f.cpus {
        "alloc"
    } else {
        "mix"
    };
    let not_responding = f.powered && !f.responding && !f.future;
    let suffix = if f.powered_down {
        "~"
    } else if not_responding {
        "*"
    } else {
        ""
    };
    let problem = if f.future {
        None
    } else if let Some((why, at)) = &f.down {
        Some((ProblemKind::Down, why.clone(), Some(*at)))
    } else if let Some((why, at)) = &f.drain {
        Some((ProblemKind::Drain, why.clone(), Some(*at)))
    } else if not_responding && f.registered {
        Some((ProblemKind::LinkLost, String::new(), f.lost_since))
    } else if not_responding {
        Some((ProblemKind::Unregistered, String::new(), f.lost_since))
    } else {
        None
    };
    Classified {
        state: format!("{word}{suffix}"),
        problem,
    }
}

/// Nodes in one state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateCount {
    pub state: String,
    pub nodes: u64,
}

/// One subtree of the natural layout, counted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubtreeSummary {
    /// 1 for a direct child of the controller.
    pub level: u32,
    /// The relay heading it.
    pub head: String,
    /// Every node in it, as a hostlist.
    pub hostlist: String,
    pub nodes: u64,
    pub unhealthy: u64,
    /// Nodes of it that hang under a relay other than their natural parent now.
    pub reattached: u64,
    pub counts: Vec<StateCount>,
}

/// Unhealthy nodes sharing a kind and a reason.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailureGroup {
    pub kind: ProblemKind,
    /// The reason text (empty when the kind says it all).
    pub reason: String,
    pub hostlist: String,
    pub nodes: u64,
    /// When the oldest and newest of them got here (unknown for some kinds).
    pub oldest: Option<UnixTime>,
    pub newest: Option<UnixTime>,
}

/// What the view left out, so that no one mistakes a bounded view for the whole cluster.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Omitted {
    /// Subtrees not listed for lack of room, and the nodes and unhealthy nodes in them.
    pub subtrees: u64,
    pub subtree_nodes: u64,
    pub subtree_unhealthy: u64,
    /// Healthy subtrees skipped by `--down`.
    pub healthy_subtrees: u64,
    /// Failure groups not listed, and their nodes.
    pub failure_groups: u64,
    pub failure_nodes: u64,
    /// Hops that did not answer about `--node` in time.
    pub hops_unanswered: u64,
}

/// What one hop (a relay, or the node itself) says of the node asked about.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HopReport {
    /// The answering daemon's rank.
    pub me: u32,
    /// It has a direct link to the node asked about.
    pub linked: bool,
    /// The node asked about is in its live set (reachable through it, or itself).
    pub reaches: bool,
    /// Its own parent now (`None`: the controller, or no parent link).
    pub upstream_rank: Option<u32>,
    /// Whether its own parent link is up.
    pub upstream_up: bool,
    /// Asked on its own listener, not through the tree (the tree did not reach it).
    #[serde(default)]
    pub direct: bool,
}

/// One hop's line under `--node`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HopLine {
    /// "controller" or a node name.
    pub hop: String,
    /// On the natural path, the path it hangs on now, or both.
    pub natural: bool,
    pub current: bool,
    /// What the hop says, in a few words ("link up", "no link", "no answer: ...").
    pub says: String,
}

/// `--node X`: X's place, the hops to it and their views; `disputed` when the two ends of X's
/// link disagree (the parent has lost it, X says it is connected, or the other way round).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodePath {
    pub node: String,
    pub rank: u32,
    pub state: String,
    pub depth: u32,
    pub hops: Vec<HopLine>,
    pub disputed: Option<String>,
}

/// The whole answer to `canopy tree`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TreeReport {
    pub now: UnixTime,
    pub tree_width: u32,
    pub tree_depth: u32,
    pub nodes: u64,
    pub unhealthy: u64,
    pub reattached: u64,
    pub counts: Vec<StateCount>,
    pub subtrees: Vec<SubtreeSummary>,
    pub failures: Vec<FailureGroup>,
    pub omitted: Omitted,
    pub path: Option<NodePath>,
}

/// Per-rank classification, computed once per request.
struct Rows<'a> {
    facts: &'a [NodeFacts],
    classes: Vec<Option<Classified>>,
}

impl<'a> Rows<'a> {
    fn new(facts: &'a [NodeFacts]) -> Self {
        let classes = facts
            .iter()
            .map(|f| (!f.vacant).then(|| classify(f)))
            .collect();
        Rows { facts, classes }
    }

    fn summarize(
        &self,
        topo: &Topology,
        level: u32,
        head: u32,
        range: Range<u32>,
    ) -> SubtreeSummary {
        let mut counts: BTreeMap<&str, u64> = BTreeMap::new();
        let mut names = Vec::new();
        let (mut unhealthy, mut reattached) = (0, 0);
        let end = (range.end as usize).min(self.classes.len());
        for rank in (range.start as usize)..end {
            let Some(c) = &self.classes[rank] else {
                continue;
            };
            *counts.entry(c.state.as_str()).or_default() += 1;
            names.push(self.facts[rank].name.as_str());
            unhealthy += u64::from(c.problem.is_some());
            reattached += u64::from(self.reattached(topo, rank as u32));
        }
        SubtreeSummary {
            level,
            head: self.name(head),
            hostlist: hostlist::compress(&names),
            nodes: names.len() as u64,
            unhealthy,
            reattached,
            counts: sorted_counts(counts),
        }
    }

    /// Live, and hanging under someone other than its natural parent.
    fn reattached(&self, topo: &Topology, rank: u32) -> bool {
        let f = &self.facts[rank as usize];
        f.responding && f.registered && f.attached_to != topo.parent(rank)
    }

    fn name(&self, rank: u32) -> String {
        self.facts
            .get(rank as usize)
            .map(|f| f.name.clone())
            .unwrap_or_else(|| format!("rank {rank}"))
    }
}

fn sorted_counts(counts: BTreeMap<&str, u64>) -> Vec<StateCount> {
    let mut v: Vec<StateCount> = counts
        .into_iter()
        .map(|(s, n)| StateCount {
            state: s.to_string(),
            nodes: n,
        })
        .collect();
    // Most common first; ties by name so the order is stable.
    v.sort_by(|a, b| b.nodes.cmp(&a.nodes).then_with(|| a.state.cmp(&b.state)));
    v
}

/// One failure group while it is gathered: its node names, oldest and newest times.
type Gathered<'a> = (Vec<&'a str>, Option<UnixTime>, Option<UnixTime>);

/// Build the report for `query` from every rank's facts (`facts[rank]`), within the line budget.
/// `hops` are the answers gathered for `--node` (see [`node_path`]); ignored without it.
pub fn build(
    topo: &Topology,
    facts: &[NodeFacts],
    query: &TreeQuery,
    now: UnixTime,
    hops: &[(u32, Result<HopReport, String>)],
) -> TreeReport {
    let rows = Rows::new(facts);
    let mut report = TreeReport {
        now,
        tree_width: topo.width(),
        tree_depth: topo.max_depth(),
        ..Default::default()
    };
    let mut counts: BTreeMap<&str, u64> = BTreeMap::new();
    let mut groups: BTreeMap<(ProblemKind, &str), Gathered<'_>> = BTreeMap::new();
    for (rank, c) in rows.classes.iter().enumerate() {
        let Some(c) = c else { continue };
        report.nodes += 1;
        *counts.entry(c.state.as_str()).or_default() += 1;
        report.reattached += u64::from(rows.reattached(topo, rank as u32));
        if let Some((kind, reason, since)) = &c.problem {
            report.unhealthy += 1;
            let g = groups.entry((*kind, reason.as_str())).or_default();
            g.0.push(facts[rank].name.as_str());
            if let Some(t) = since {
                g.1 = Some(g.1.map_or(*t, |o: i64| o.min(*t)));
                g.2 = Some(g.2.map_or(*t, |o: i64| o.max(*t)));
            }
        }
    }
    report.counts = sorted_counts(counts);
    let mut failures: Vec<FailureGroup> = groups
        .into_iter()
        .map(|((kind, reason), (names, oldest, newest))| FailureGroup {
            kind,
            reason: reason.to_string(),
            hostlist: hostlist::compress(&names),
            nodes: names.len() as u64,
            oldest,
            newest,
        })
        .collect();
    failures.sort_by(|a, b| b.nodes.cmp(&a.nodes).then_with(|| a.kind.cmp(&b.kind)));
    if failures.len() > MAX_FAILURE_LINES {
        for g in failures.drain(MAX_FAILURE_LINES..) {
            report.omitted.failure_groups += 1;
            report.omitted.failure_nodes += g.nodes;
        }
    }
    report.failures = failures;

    // Subtrees, preorder, down to the asked depth.
    let mut listed = Vec::new();
    let mut stack: Vec<(u32, u32)> = topo
        .children(None)
        .into_iter()
        .rev()
        .map(|c| (1, c))
        .collect();
    while let Some((level, head)) = stack.pop() {
        if level > query.depth {
            continue;
        }
        let s = rows.summarize(topo, level, head, topo.subtree(head));
        if s.nodes == 0 {
            continue;
        }
        if query.down && s.unhealthy == 0 {
            report.omitted.healthy_subtrees += 1;
            continue;
        }
        if level < query.depth {
            stack.extend(
                topo.children(Some(head))
                    .into_iter()
                    .rev()
                    .map(|c| (level + 1, c)),
            );
        }
        listed.push(s);
    }
    // Room left after the summary line, the failures and their headers.
    let failure_lines = report.failures.len()
        + usize::from(report.omitted.failure_groups > 0)
        + usize::from(!report.failures.is_empty());
    let room = MAX_LINES.saturating_sub(1 + failure_lines + 2);
    if listed.len() > room {
        // Keep the unhealthy subtrees first (they are what an operator looks for), then the
        // healthy ones in order, and count the rest.
        let mut keep = vec![false; listed.len()];
        let mut left = room;
        for pass in [true, false] {
            for (i, s) in listed.iter().enumerate() {
                if left > 0 && !keep[i] && (s.unhealthy > 0) == pass {
                    keep[i] = true;
                    left -= 1;
                }
            }
        }
        let mut kept = Vec::with_capacity(room);
        // Preorder: a subtree below one already counted as omitted adds no nodes of its own.
        let mut inside: Option<u32> = None;
        for (s, k) in listed.into_iter().zip(keep) {
            if inside.is_some_and(|l| s.level <= l) {
                inside = None;
            }
            if k {
                kept.push(s);
                continue;
            }
            report.omitted.subtrees += 1;
            if inside.is_none() {
                report.omitted.subtree_nodes += s.nodes;
                report.omitted.subtree_unhealthy += s.unhealthy;
                inside = Some(s.level);
            }
        }
        listed = kept;
    }
    report.subtrees = listed;
    if let Some(name) = &query.node {
        if let Some(rank) = facts.iter().position(|f| !f.vacant && &f.name == name) {
            let path = node_path(topo, &rows, rank as u32, hops);
            report.omitted.hops_unanswered = path
                .hops
                .iter()
                .filter(|h| h.says.starts_with("no answer"))
                .count() as u64;
            report.path = Some(path);
        }
    }
    report
}

/// The ranks `--node X` asks: every relay on X's natural path and on the path it hangs on now,
/// and X itself.
pub fn hops_to_ask(topo: &Topology, facts: &[NodeFacts], rank: u32) -> Vec<u32> {
    let mut v = topo.ancestors(rank);
    v.extend(current_chain(facts, rank));
    v.push(rank);
    v.sort_unstable();
    v.dedup();
    v
}

/// The relays X hangs under now, nearest first, by following `attached_to` (bounded, in case
/// the reported links ever form a loop while they are changing).
fn current_chain(facts: &[NodeFacts], rank: u32) -> Vec<u32> {
    let mut chain = Vec::new();
    let mut at = facts.get(rank as usize).and_then(|f| f.attached_to);
    while let Some(r) = at {
        if chain.contains(&r) || chain.len() > 64 {
            break;
        }
        chain.push(r);
        at = facts.get(r as usize).and_then(|f| f.attached_to);
    }
    chain
}

fn node_path(
    topo: &Topology,
    rows: &Rows<'_>,
    rank: u32,
    hops: &[(u32, Result<HopReport, String>)],
) -> NodePath {
    let facts = rows.facts;
    let f = &facts[rank as usize];
    let state = rows.classes[rank as usize]
        .as_ref()
        .map(|c| c.state.clone())
        .unwrap_or_default();
    let natural: Vec<u32> = {
        let mut a = topo.ancestors(rank);
        a.reverse();
        a
    };
    let current: Vec<u32> = {
        let mut c = current_chain(facts, rank);
        c.reverse();
        c
    };
    let answer = |r: u32| hops.iter().find(|(h, _)| *h == r).map(|(_, a)| a);
    let mut lines = vec![HopLine {
        hop: "controller".into(),
        natural: true,
        current: true,
        says: if f.responding {
            format!("reachable, {state}")
        } else {
            format!("not reachable, {state}")
        },
    }];
    let mut relays: Vec<u32> = natural.iter().chain(current.iter()).copied().collect();
    relays.sort_by_key(|r| (topo.depth(*r), *r));
    relays.dedup();
    for r in relays {
        let says = match answer(r) {
            Some(Ok(h)) if h.linked => "link to it up".to_string(),
            Some(Ok(h)) if h.reaches => "reaches it through a child".to_string(),
            Some(Ok(_)) => "no link to it".to_string(),
            Some(Err(e)) => format!("no answer: {e}"),
            None => "no answer: not asked".to_string(),
        };
        lines.push(HopLine {
            hop: rows.name(r),
            natural: natural.contains(&r),
            current: current.contains(&r),
            says,
        });
    }
    let own = answer(rank);
    let parent_now = f.attached_to;
    lines.push(HopLine {
        hop: format!("{} (itself)", f.name),
        natural: true,
        current: true,
        says: match own {
            Some(Ok(h)) if h.upstream_up => format!(
                "connected to {}{}",
                h.upstream_rank
                    .map(|p| rows.name(p))
                    .unwrap_or_else(|| "the controller".into()),
                if h.direct { " (asked directly)" } else { "" }
            ),
            Some(Ok(h)) => format!(
                "no parent link{}",
                if h.direct { " (asked directly)" } else { "" }
            ),
            Some(Err(e)) => format!("no answer: {e}"),
            None => "no answer: not asked".into(),
        },
    });
    // The two ends of X's link: the parent's view (or the controller's, for a top-level node)
    // against X's own.
    let parent_view = |p: Option<u32>| -> Option<bool> {
        match p {
            None => Some(f.responding),
            Some(p) => match answer(p) {
                Some(Ok(h)) => Some(h.linked),
                _ => None,
            },
        }
    };
    let disputed = match own {
        Some(Ok(h)) if h.upstream_up => match parent_view(h.upstream_rank) {
            Some(false) => Some(format!(
                "{} says it is connected to {}, which has no link to it",
                f.name,
                h.upstream_rank
                    .map(|p| rows.name(p))
                    .unwrap_or_else(|| "the controller".into())
            )),
            _ => None,
        },
        Some(Ok(_)) if parent_view(parent_now) == Some(true) && f.responding => Some(format!(
            "{} says it has no parent link, but {} still counts it as linked",
            f.name,
            parent_now
                .map(|p| rows.name(p))
                .unwrap_or_else(|| "the controller".into())
        )),
        Some(Err(_)) if f.responding => Some(format!(
            "the controller counts {} as reachable, but it did not answer through the tree",
            f.name
        )),
        _ => None,
    };
    NodePath {
        node: f.name.clone(),
        rank,
        state,
        depth: topo.depth(rank),
        hops: lines,
        disputed,
    }
}

/// `HH:MM:SS`, or `D-HH:MM:SS` past a day (Slurm's elapsed-time form).
pub fn age(secs: i64) -> String {
    let s = secs.max(0);
    let (d, h, m, s) = (s / 86_400, s / 3600 % 24, s / 60 % 60, s % 60);
    if d > 0 {
        format!("{d}-{h:02}:{m:02}:{s:02}")
    } else {
        format!("{h:02}:{m:02}:{s:02}")
    }
}

fn cut(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let head: String = text.chars().take(max.saturating_sub(3)).collect();
    format!("{head}...")
}

fn counts_text(counts: &[StateCount]) -> String {
    counts
        .iter()
        .map(|c| format!("{} {}", c.state, c.nodes))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The text view. Without `--node` it is at most [`MAX_LINES`] lines.
pub fn render(r: &TreeReport) -> String {
    let mut out = format!(
        "{} nodes, {} levels, TreeWidth={}: {}{}\n",
        r.nodes,
        r.tree_depth,
        r.tree_width,
        counts_text(&r.counts),
        if r.reattached > 0 {
            format!(" ({} re-attached)", r.reattached)
        } else {
            String::new()
        }
    );
    if !r.subtrees.is_empty() || r.omitted.subtrees > 0 || r.omitted.healthy_subtrees > 0 {
        out.push_str(&format!(
            "{:<22} {:>7} {:>7}  STATES\n",
            "SUBTREE (HEAD)", "NODES", "BAD"
        ));
        for s in &r.subtrees {
            let label = format!(
                "{}{}",
                "  ".repeat(s.level.saturating_sub(1) as usize),
                s.head
            );
            out.push_str(&format!(
                "{:<22} {:>7} {:>7}  {}{}\n",
                cut(&label, 22),
                s.nodes,
                s.unhealthy,
                counts_text(&s.counts),
                if s.reattached > 0 {
                    format!(" ({} re-attached)", s.reattached)
                } else {
                    String::new()
                }
            ));
        }
        let o = &r.omitted;
        if o.subtrees > 0 || o.healthy_subtrees > 0 {
            let mut parts = Vec::new();
            if o.subtrees > 0 {
                parts.push(format!(
                    "{} more subtrees not shown ({} nodes, {} unhealthy)",
                    o.subtrees, o.subtree_nodes, o.subtree_unhealthy
                ));
            }
            if o.healthy_subtrees > 0 {
                parts.push(format!("{} healthy subtrees hidden", o.healthy_subtrees));
            }
            out.push_str(&format!("... {}\n", parts.join("; ")));
        }
    }
    if r.failures.is_empty() {
        if r.unhealthy == 0 {
            out.push_str("no unhealthy nodes\n");
        }
    } else {
        out.push_str(&format!(
            "UNHEALTHY: {} nodes in {} groups\n",
            r.unhealthy,
            r.failures.len() as u64 + r.omitted.failure_groups
        ));
        for g in &r.failures {
            out.push_str(&format!("{}\n", failure_line(g, r.now)));
        }
        if r.omitted.failure_groups > 0 {
            out.push_str(&format!(
                "... {} more groups not shown ({} nodes; --json lists them)\n",
                r.omitted.failure_groups, r.omitted.failure_nodes
            ));
        }
    }
    if let Some(p) = &r.path {
        out.push_str(&render_path(p));
    }
    out
}

/// `n[1203-1240] down: Not responding 00:03:12` (the age of the oldest; the newest's too when
/// they differ).
pub fn failure_line(g: &FailureGroup, now: UnixTime) -> String {
    let what = if g.reason.is_empty() {
        g.kind.word().to_string()
    } else {
        format!("{}: {}", g.kind.word(), g.reason)
    };
    let when = match (g.oldest, g.newest) {
        (Some(o), Some(n)) if o != n => format!(" {}..{}", age(now - o), age(now - n)),
        (Some(o), _) => format!(" {}", age(now - o)),
        _ => String::new(),
    };
    let count = if g.nodes > 1 {
        format!(" ({} nodes)", g.nodes)
    } else {
        String::new()
    };
    format!("{} {what}{when}{count}", cut(&g.hostlist, HOSTLIST_CHARS))
}

fn render_path(p: &NodePath) -> String {
    let mut out = format!(
        "NODE {} (rank {}, depth {}): {}\n",
        p.node, p.rank, p.depth, p.state
    );
    for h in &p.hops {
        let place = match (h.natural, h.current) {
            (true, true) => "",
            (true, false) => " [natural parent; it hangs elsewhere now]",
            (false, true) => " [adopted it]",
            (false, false) => "",
        };
        out.push_str(&format!("  {:<24} {}{}\n", h.hop, h.says, place));
    }
    if let Some(d) = &p.disputed {
        out.push_str(&format!("  DISPUTED: {d}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn up(name: &str, parent: Option<u32>) -> NodeFacts {
        NodeFacts {
            name: name.into(),
            registered: true,
            responding: true,
            powered: true,
            cpus: 4,
            attached_to: parent,
            ..Default::default()
        }
    }

    /// A cluster of `n` healthy nodes `n[0..n)`, each on its natural parent.
    fn cluster(topo: &Topology) -> Vec<NodeFacts> {
        (0..topo.len())
            .map(|r| up(&format!("n{r:05}"), topo.parent(r)))
            .collect()
    }

    #[test]
    fn classify_uses_slurm_words() {
        let mut f = up("a", None);
        assert_eq!(classify(&f).state, "idle");
        f.alloc_cpus = 2;
        assert_eq!(classify(&f).state, "mix");
        f.alloc_cpus = 4;
        assert_eq!(classify(&f).state, "alloc");
        f.drain = Some(("fan".into(), 5));
        let c = classify(&f);
        assert_eq!(c.state, "drng");
        assert_eq!(c.problem, Some((ProblemKind::Drain, "fan".into(), Some(5))));
        f.alloc_cpus = 0;
        assert_eq!(classify(&f).state, "drain");
        f.drain = None;
        f.responding = false;
        f.lost_since = Some(9);
        let c = classify(&f);
        assert_eq!(c.state, "idle*");
        assert_eq!(
            c.problem,
            Some((ProblemKind::LinkLost, String::new(), Some(9)))
        );
        f.down = Some(("Not responding".into(), 70));
        let c = classify(&f);
        assert_eq!(c.state, "down*");
        assert_eq!(c.problem.map(|p| p.0), Some(ProblemKind::Down));
        let mut g = up("b", None);
        g.registered = false;
        g.responding = false;
        assert_eq!(classify(&g).state, "unk*");
        g.powered = false;
        g.powered_down = true;
        assert_eq!(classify(&g).state, "idle~");
        assert_eq!(classify(&g).problem, None, "powered down is not a failure");
        g.future = true;
        assert_eq!(classify(&g).state, "futr~");
    }

    /// Oracle: every node is counted exactly once at each level, and groups partition the
    /// unhealthy nodes.
    #[test]
    fn counts_and_groups_cover_every_node_once() {
        let topo = Topology::new(1000, 4).unwrap();
        let mut facts = cluster(&topo);
        for r in (100..140).chain([7, 501]) {
            facts[r].responding = false;
            facts[r].down = Some(("Not responding".into(), 100 + r as i64));
        }
        for f in &mut facts[600..610] {
            f.drain = Some(("bad dimm".into(), 50));
        }
        facts[900].responding = false;
        facts[900].lost_since = Some(400);
        let q = TreeQuery {
            depth: 2,
            ..Default::default()
        };
        let r = build(&topo, &facts, &q, 1000, &[]);
        assert_eq!(r.nodes, 1000);
        assert_eq!(r.unhealthy, 42 + 10 + 1);
        let total: u64 = r.counts.iter().map(|c| c.nodes).sum();
        assert_eq!(total, 1000);
        let level1: u64 = r
            .subtrees
            .iter()
            .filter(|s| s.level == 1)
            .map(|s| s.nodes)
            .sum();
        assert_eq!(level1, 1000, "level-1 subtrees partition the cluster");
        let bad1: u64 = r
            .subtrees
            .iter()
            .filter(|s| s.level == 1)
            .map(|s| s.unhealthy)
            .sum();
        assert_eq!(bad1, r.unhealthy);
        assert_eq!(r.failures.len(), 3);
        assert_eq!(r.failures[0].kind, ProblemKind::Down);
        assert_eq!(r.failures[0].nodes, 42);
        assert_eq!(r.failures[0].hostlist, "n[00007,00100-00139,00501]");
        assert_eq!(r.failures[0].oldest, Some(107));
        assert_eq!(r.failures[0].newest, Some(601));
        assert_eq!(r.failures[1].hostlist, "n[00600-00609]");
        assert_eq!(r.failures[2].kind, ProblemKind::LinkLost);
        assert_eq!(
            failure_line(&r.failures[2], 1000),
            "n00900 link lost 00:10:00"
        );
        assert_eq!(
            failure_line(&r.failures[1], 1000),
            "n[00600-00609] drain: bad dimm 00:15:50 (10 nodes)"
        );
    }

    #[test]
    fn a_big_cluster_fits_the_line_budget_and_says_what_it_left_out() {
        let topo = Topology::new(100_000, 16).unwrap();
        let mut facts = cluster(&topo);
        // 1% down in 3 reasons, scattered, plus 12 small one-off reasons.
        for r in (0..100_000u32).step_by(100) {
            let f = &mut facts[r as usize];
            let reason = ["Not responding", "bad fan", "memory errors"][(r / 100 % 3) as usize];
            f.down = Some((reason.into(), 10));
        }
        for i in 0..12 {
            facts[50 + i].drain = Some((format!("ticket {i}"), 20));
        }
        for depth in [0, 1, 2, 5] {
            for down in [false, true] {
                let q = TreeQuery {
                    depth,
                    down,
                    node: None,
                };
                let r = build(&topo, &facts, &q, 100, &[]);
                let text = render(&r);
                let lines = text.lines().count();
                assert!(
                    lines <= MAX_LINES,
                    "depth {depth} down {down}: {lines} lines\n{text}"
                );
                assert_eq!(r.unhealthy, 1012);
                let shown: u64 = r.failures.iter().map(|g| g.nodes).sum();
                assert_eq!(
                    shown + r.omitted.failure_nodes,
                    1012,
                    "groups account for all"
                );
                assert!(text.contains("more groups not shown"), "{text}");
                if depth >= 2 {
                    assert!(r.omitted.subtrees > 0, "depth {depth}: {text}");
                    assert!(text.contains("more subtrees not shown"), "{text}");
                }
            }
        }
    }

    #[test]
    fn down_lists_only_unhealthy_subtrees() {
        let topo = Topology::new(200, 4).unwrap();
        let mut facts = cluster(&topo);
        facts[120].drain = Some(("x".into(), 0));
        let q = TreeQuery {
            depth: 3,
            down: true,
            node: None,
        };
        let r = build(&topo, &facts, &q, 0, &[]);
        assert!(!r.subtrees.is_empty());
        assert!(r.subtrees.iter().all(|s| s.unhealthy == 1));
        // One subtree per level on the way down to 120, and the healthy ones at level 1 and
        // below them counted, not listed.
        let levels: Vec<u32> = r.subtrees.iter().map(|s| s.level).collect();
        assert_eq!(levels, (1..=levels.len() as u32).collect::<Vec<_>>());
        assert!(r.omitted.healthy_subtrees >= 3);
        assert!(render(&r).contains("healthy subtrees hidden"));
    }

    #[test]
    fn reattached_nodes_are_counted() {
        let topo = Topology::new(40, 3).unwrap();
        let mut facts = cluster(&topo);
        // Relay 0 is gone; its children hang directly under the controller.
        facts[0].responding = false;
        facts[0].lost_since = Some(1);
        for c in topo.children(Some(0)) {
            facts[c as usize].attached_to = None;
        }
        let r = build(
            &topo,
            &facts,
            &TreeQuery {
                depth: 1,
                ..Default::default()
            },
            5,
            &[],
        );
        assert_eq!(r.reattached, 3);
        assert_eq!(r.subtrees[0].reattached, 3);
        assert_eq!(r.subtrees[0].unhealthy, 1);
        assert!(render(&r).contains("(3 re-attached)"));
    }

    #[test]
    fn node_path_shows_both_sides_when_they_disagree() {
        let topo = Topology::new(400, 4).unwrap();
        let mut facts = cluster(&topo);
        let x = 399u32;
        let anc = topo.ancestors(x);
        assert!(anc.len() >= 3);
        let parent = anc[0];
        // The parent lost X (so the controller marked it unreachable); X says it is connected.
        facts[x as usize].responding = false;
        facts[x as usize].lost_since = Some(10);
        let mut hops: Vec<(u32, Result<HopReport, String>)> = anc
            .iter()
            .map(|&a| {
                (
                    a,
                    Ok(HopReport {
                        me: a,
                        linked: false,
                        reaches: a != parent,
                        upstream_rank: topo.parent(a),
                        upstream_up: true,
                        direct: false,
                    }),
                )
            })
            .collect();
        hops.push((
            x,
            Ok(HopReport {
                me: x,
                linked: false,
                reaches: true,
                upstream_rank: Some(parent),
                upstream_up: true,
                direct: true,
            }),
        ));
        let asked = hops_to_ask(&topo, &facts, x);
        let mut want = anc.clone();
        want.push(x);
        want.sort_unstable();
        assert_eq!(asked, want);
        let q = TreeQuery {
            node: Some(facts[x as usize].name.clone()),
            ..Default::default()
        };
        let r = build(&topo, &facts, &q, 20, &hops);
        let p = r.path.expect("path");
        assert_eq!(
            p.hops.len(),
            anc.len() + 2,
            "controller, each relay, the node"
        );
        assert_eq!(p.hops[0].hop, "controller");
        assert!(p.hops[0].says.starts_with("not reachable"));
        assert_eq!(p.hops[anc.len()].says, "no link to it");
        assert!(p.hops.last().unwrap().says.starts_with("connected to"));
        assert!(p.hops.last().unwrap().says.ends_with("(asked directly)"));
        assert!(p.disputed.as_deref().unwrap().contains("has no link to it"));
        assert!(render_path(&p).contains("DISPUTED"));

        // Everyone agrees: no dispute; an unanswered hop is counted.
        let mut facts2 = cluster(&topo);
        facts2[x as usize].responding = true;
        let mut hops2 = hops.clone();
        for h in hops2.iter_mut() {
            if h.0 == parent {
                h.1 = Ok(HopReport {
                    me: parent,
                    linked: true,
                    reaches: true,
                    upstream_rank: topo.parent(parent),
                    upstream_up: true,
                    direct: false,
                });
            }
            if h.0 == anc[2] {
                h.1 = Err("timed out".into());
            }
        }
        let r = build(&topo, &facts2, &q, 20, &hops2);
        let p = r.path.unwrap();
        assert_eq!(p.disputed, None);
        assert_eq!(r.omitted.hops_unanswered, 1);
    }

    #[test]
    fn ages_read_like_slurm_elapsed_times() {
        assert_eq!(age(192), "00:03:12");
        assert_eq!(age(90_061), "1-01:01:01");
        assert_eq!(age(-5), "00:00:00");
    }
}
