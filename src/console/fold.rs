//! Folding `canopy exec` results: equal results from many nodes become one
//! group with its node set (what pdsh + `dshbak -c`, or ClusterShell's `-b`,
//! do), groups merge across subtrees, exit codes are grouped, and `--diff`
//! compares each group with the most common output.
//!
//! Pure: no I/O, no clock. The relays fold their subtree's results with
//! `tree::collect::Collector` (equal results share one `(RankSet, result)`
//! entry); [`Folded`] is the same fold with a hash index, used where the
//! number of distinct results may be large (the controller's report), and
//! its merge is what makes the result independent of the tree's shape
//! (checked by a seeded property test below). Hostlists are compressed with
//! `config::hostlist`.

use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};

use serde::Serialize;

use crate::config::hostlist;
use crate::tree::rankset::RankSet;
use crate::wire::exec::{ExecEnd, ExecGroup, ExecOutput, ExecReport};

/// Distinct results, each once, with the ranks that gave it.
#[derive(Debug, Clone)]
pub struct Folded<R> {
    groups: Vec<(RankSet, R)>,
    /// Hash of a result → indexes into `groups` (collisions compared in full).
    index: HashMap<u64, Vec<usize>>,
}

impl<R> Default for Folded<R> {
    fn default() -> Self {
        Folded {
            groups: Vec::new(),
            index: HashMap::new(),
        }
    }
}

fn hash_of<R: Hash>(r: &R) -> u64 {
    // DefaultHasher::new() has fixed keys: the same order on every run.
    let mut h = DefaultHasher::new();
    r.hash(&mut h);
    h.finish()
}

impl<R: Hash + Eq> Folded<R> {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `ranks` to the group of `result` (a new group if unseen).
    pub fn record(&mut self, ranks: RankSet, result: R) {
        if ranks.is_empty() {
            return;
        }
        let slot = self.index.entry(hash_of(&result)).or_default();
        match slot.iter().find(|&&i| self.groups[i].1 == result) {
            Some(&i) => {
                let set = &mut self.groups[i].0;
                *set = set.union(&ranks);
            }
            None => {
                slot.push(self.groups.len());
                self.groups.push((ranks, result));
            }
        }
    }

    /// Folds every group of `other` into this one.
    pub fn merge(&mut self, other: Folded<R>) {
        for (ranks, result) in other.groups {
            self.record(ranks, result);
        }
    }

    /// Number of distinct results.
    pub fn len(&self) -> usize {
        self.groups.len()
    }

    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }

    /// Every rank with a result.
    pub fn ranks(&self) -> RankSet {
        self.groups
            .iter()
            .fold(RankSet::new(), |acc, (s, _)| acc.union(s))
    }

    /// The groups, largest first; equal sizes by lowest rank. The order
    /// depends only on the groups, not on the order they were recorded in.
    pub fn into_sorted(self) -> Vec<(RankSet, R)> {
        let mut g = self.groups;
        g.sort_by_key(|(s, _)| (std::cmp::Reverse(s.len()), s.iter().next()));
        g
    }
}

/// The root's outcomes of a `canopy exec`, folded: results by output, and
/// the targets with no result by reason.
pub struct ExecFold {
    pub ok: Folded<ExecOutput>,
    pub missing: Folded<String>,
}

/// Folds the outcomes the relay tree returned (already folded per
/// subtree; folding again merges equal results that came up different
/// branches).
pub fn fold_outcomes(
    outcomes: impl IntoIterator<Item = (RankSet, Result<ExecOutput, String>)>,
) -> ExecFold {
    let mut f = ExecFold {
        ok: Folded::new(),
        missing: Folded::new(),
    };
    for (ranks, r) in outcomes {
        match r {
            Ok(out) => f.ok.record(ranks, out),
            Err(why) => f.missing.record(ranks, why),
        }
    }
    f
}

/// Keeps the reply bounded: outputs are kept for the largest groups first
/// until `budget` bytes are used; later groups keep their nodes and exit
/// code but lose their output (`output_dropped`). Returns how many lost it.
pub fn bound_outputs(groups: &mut [ExecGroup], budget: usize) -> u64 {
    let mut used = 0usize;
    let mut dropped = 0;
    for g in groups.iter_mut() {
        let size = g.result.output.len();
        if used + size <= budget {
            used += size;
        } else {
            g.result.cut += size as u64;
            g.result.output = Vec::new();
            g.output_dropped = true;
            dropped += 1;
        }
    }
    dropped
}

/// The same bound in a relay's reply upward: `canopy exec` outputs are
/// kept in order until `budget` bytes; later ones are emptied and their
/// bytes counted as cut (the client says so). Returns how many were emptied.
pub fn bound_exec_replies(outcomes: &mut [crate::wire::messages::Outcome], budget: usize) -> u64 {
    use crate::wire::messages::NodeReply;
    let mut used = 0usize;
    let mut dropped = 0;
    for o in outcomes.iter_mut() {
        if let Ok(NodeReply::Exec(out)) = &mut o.result {
            let size = out.output.len();
            if used + size <= budget {
                used += size;
            } else {
                out.cut += size as u64;
                out.output = Vec::new();
                dropped += 1;
            }
        }
    }
    dropped
}

/// Nodes that ended with one exit code.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ExitCodeGroup {
    pub code: i32,
    pub nodes: String,
    pub count: u64,
}

/// The report's groups by exit code, lowest code first.
pub fn exit_codes(report: &ExecReport) -> Vec<ExitCodeGroup> {
    let mut by: std::collections::BTreeMap<i32, (Vec<String>, u64)> = Default::default();
    for g in &report.groups {
        let e = by.entry(g.result.code).or_default();
        e.0.push(g.nodes.clone());
        e.1 += g.count;
    }
    by.into_iter()
        .map(|(code, (lists, count))| ExitCodeGroup {
            code,
            nodes: join_hostlists(&lists),
            count,
        })
        .collect()
}

/// One hostlist for several: expanded and compressed again, sorted; a list
/// that does not parse is kept as it is.
pub fn join_hostlists(lists: &[String]) -> String {
    if lists.len() == 1 {
        return lists[0].clone();
    }
    let mut names = Vec::new();
    for l in lists {
        match hostlist::expand(l) {
            Ok(n) => names.extend(n),
            Err(_) => names.push(l.clone()),
        }
    }
    hostlist::compress_sorted(&names)
}

/// `canopy exec`'s own exit status: the largest remote exit code, and at
/// least 1 when some node gave no result (so a script notices).
pub fn exit_status(report: &ExecReport) -> i32 {
    let worst = report
        .groups
        .iter()
        .map(|g| g.result.code)
        .max()
        .unwrap_or(0);
    let worst = if report.missing.is_empty() {
        worst
    } else {
        worst.max(1)
    };
    worst.clamp(0, 255)
}

/// Index of the most common result (the one `--diff` compares with): the
/// largest group, the first of equal ones.
pub fn reference(report: &ExecReport) -> Option<usize> {
    let mut best: Option<usize> = None;
    for (i, g) in report.groups.iter().enumerate() {
        if best.is_none_or(|b| g.count > report.groups[b].count) {
            best = Some(i);
        }
    }
    best
}

/// One line of a diff.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum DiffLine {
    Same(String),
    /// In the reference, not in this group.
    Removed(String),
    /// In this group, not in the reference.
    Added(String),
}

/// Largest `lines(a) × lines(b)` table diffed; beyond it `line_diff` gives
/// up (outputs are bounded per node, but a 16 KiB output can be 16,000 lines).
pub const MAX_DIFF_CELLS: usize = 4_000_000;

/// A line diff of `b` against `a` (longest common subsequence); `None` when
/// they are too large to compare. Written here rather than taken from a
/// crate: it is thirty lines over bounded input, and it keeps the
/// dependency list short.
pub fn line_diff(a: &str, b: &str) -> Option<Vec<DiffLine>> {
    let a: Vec<&str> = a.lines().collect();
    let b: Vec<&str> = b.lines().collect();
    let (n, m) = (a.len(), b.len());
    if n.saturating_mul(m) > MAX_DIFF_CELLS {
        return None;
    }
    // lcs[i][j]: the longest common subsequence of a[i..] and b[j..].
    let w = m + 1;
    let mut lcs = vec![0u32; (n + 1) * w];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i * w + j] = if a[i] == b[j] {
                lcs[(i + 1) * w + j + 1] + 1
            } else {
                lcs[(i + 1) * w + j].max(lcs[i * w + j + 1])
            };
        }
    }
    let (mut i, mut j) = (0, 0);
    let mut out = Vec::with_capacity(n.max(m));
    while i < n || j < m {
        if i < n && j < m && a[i] == b[j] {
            out.push(DiffLine::Same(a[i].to_string()));
            i += 1;
            j += 1;
        } else if i < n && (j == m || lcs[(i + 1) * w + j] >= lcs[i * w + j + 1]) {
            // Removals before additions, as diff(1) prints a change.
            out.push(DiffLine::Removed(a[i].to_string()));
            i += 1;
        } else {
            out.push(DiffLine::Added(b[j].to_string()));
            j += 1;
        }
    }
    Some(out)
}

/// How a group's command ended, in words (after its node list).
fn ending(r: &ExecOutput) -> String {
    match &r.end {
        ExecEnd::Exited if r.code == 0 => String::new(),
        ExecEnd::Exited => format!("exit {}", r.code),
        ExecEnd::Signalled(s) => format!("killed by signal {s}"),
        ExecEnd::TimedOut => "timed out (killed at the time limit)".into(),
        ExecEnd::Interrupted => "interrupted (not finished)".into(),
        ExecEnd::NotStarted => format!("did not start (exit {})", r.code),
    }
}

fn header(out: &mut String, g: &ExecGroup, extra: &str) {
    let mut what = ending(&g.result);
    if !extra.is_empty() {
        if !what.is_empty() {
            what.push_str(", ");
        }
        what.push_str(extra);
    }
    let rule = "-".repeat(16);
    out.push_str(&rule);
    out.push('\n');
    out.push_str(&format!("{} ({})", g.nodes, g.count));
    if !what.is_empty() {
        out.push_str(": ");
        out.push_str(&what);
    }
    out.push('\n');
    out.push_str(&rule);
    out.push('\n');
}

fn body(out: &mut String, g: &ExecGroup) {
    let text = String::from_utf8_lossy(&g.result.output);
    out.push_str(&text);
    if !text.is_empty() && !text.ends_with('\n') {
        out.push('\n');
    }
    if g.output_dropped {
        out.push_str("[output left out: the reply was at its size limit]\n");
    } else if g.result.cut > 0 {
        out.push_str(&format!(
            "[output cut: {} more bytes not kept]\n",
            g.result.cut
        ));
    }
}

/// The report as text: one block per distinct result (largest first), or
/// with `diff` each group after the first as a diff against the most common
/// output; then the exit codes, the nodes with no result, and what was left out.
pub fn render(report: &ExecReport, diff: bool) -> String {
    let mut out = String::new();
    let refi = reference(report);
    let mut order: Vec<usize> = (0..report.groups.len()).collect();
    if let Some(r) = refi {
        order.retain(|&i| i != r);
        order.insert(0, r);
    }
    for i in order {
        let g = &report.groups[i];
        let against = refi.filter(|&r| diff && r != i).map(|r| &report.groups[r]);
        match against {
            None => {
                header(&mut out, g, "");
                body(&mut out, g);
            }
            Some(base) => {
                let a = String::from_utf8_lossy(&base.result.output);
                let b = String::from_utf8_lossy(&g.result.output);
                match line_diff(&a, &b) {
                    Some(lines) if !g.output_dropped && !base.output_dropped => {
                        header(&mut out, g, &format!("diff against {}", base.nodes));
                        for l in lines {
                            match l {
                                DiffLine::Same(t) => out.push_str(&format!("  {t}\n")),
                                DiffLine::Removed(t) => out.push_str(&format!("- {t}\n")),
                                DiffLine::Added(t) => out.push_str(&format!("+ {t}\n")),
                            }
                        }
                        if g.result.cut > 0 {
                            out.push_str(&format!(
                                "[output cut: {} more bytes not kept]\n",
                                g.result.cut
                            ));
                        }
                    }
                    _ => {
                        header(&mut out, g, "too large to diff");
                        body(&mut out, g);
                    }
                }
            }
        }
    }
    let codes = exit_codes(report);
    if !codes.is_empty() {
        let parts: Vec<String> = codes
            .iter()
            .map(|c| format!("{}: {} ({})", c.code, c.nodes, c.count))
            .collect();
        out.push_str(&format!("exit codes: {}\n", parts.join("; ")));
    }
    for (nodes, why) in &report.missing {
        out.push_str(&format!("no result from {nodes}: {why}\n"));
    }
    let unfinished: Vec<String> = report
        .groups
        .iter()
        .filter(|g| !g.result.end.finished() && g.result.end != ExecEnd::NotStarted)
        .map(|g| g.nodes.clone())
        .chain(report.missing.iter().map(|(n, _)| n.clone()))
        .collect();
    if !unfinished.is_empty() {
        out.push_str(&format!("not finished: {}\n", join_hostlists(&unfinished)));
    }
    if report.outputs_dropped > 0 {
        out.push_str(&format!(
            "{} group(s) shown without their output: the reply was at its size limit\n",
            report.outputs_dropped
        ));
    }
    out
}

/// `canopy exec --json`: the report with everything the text shows.
#[derive(Debug, Serialize)]
pub struct ExecJson {
    pub targets: u64,
    pub groups: Vec<GroupJson>,
    pub exit_codes: Vec<ExitCodeGroup>,
    /// Nodes with no result and why.
    pub missing: Vec<MissingJson>,
    /// Nodes whose command did not run to its end (timed out, interrupted,
    /// or no result at all).
    pub not_finished: String,
    pub outputs_dropped: u64,
    pub elapsed_ms: u64,
    pub exit_status: i32,
}

#[derive(Debug, Serialize)]
pub struct GroupJson {
    pub nodes: String,
    pub count: u64,
    pub exit_code: i32,
    /// exited, signalled, timed_out, interrupted, not_started
    pub end: &'static str,
    pub output: String,
    /// Bytes not kept.
    pub cut: u64,
    pub output_dropped: bool,
    /// Against the most common output (`--diff`); absent for that group.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diff: Option<Vec<DiffLine>>,
}

#[derive(Debug, Serialize)]
pub struct MissingJson {
    pub nodes: String,
    pub reason: String,
}

pub fn to_json(report: &ExecReport, diff: bool) -> ExecJson {
    let refi = reference(report);
    let groups = report
        .groups
        .iter()
        .enumerate()
        .map(|(i, g)| GroupJson {
            nodes: g.nodes.clone(),
            count: g.count,
            exit_code: g.result.code,
            end: match g.result.end {
                ExecEnd::Exited => "exited",
                ExecEnd::Signalled(_) => "signalled",
                ExecEnd::TimedOut => "timed_out",
                ExecEnd::Interrupted => "interrupted",
                ExecEnd::NotStarted => "not_started",
            },
            output: String::from_utf8_lossy(&g.result.output).into_owned(),
            cut: g.result.cut,
            output_dropped: g.output_dropped,
            diff: refi.filter(|&r| diff && r != i).and_then(|r| {
                line_diff(
                    &String::from_utf8_lossy(&report.groups[r].result.output),
                    &String::from_utf8_lossy(&g.result.output),
                )
            }),
        })
        .collect();
    let unfinished: Vec<String> = report
        .groups
        .iter()
        .filter(|g| !g.result.end.finished() && g.result.end != ExecEnd::NotStarted)
        .map(|g| g.nodes.clone())
        .chain(report.missing.iter().map(|(n, _)| n.clone()))
        .collect();
    ExecJson {
        targets: report.targets,
        groups,
        exit_codes: exit_codes(report),
        missing: report
            .missing
            .iter()
            .map(|(n, r)| MissingJson {
                nodes: n.clone(),
                reason: r.clone(),
            })
            .collect(),
        not_finished: if unfinished.is_empty() {
            String::new()
        } else {
            join_hostlists(&unfinished)
        },
        outputs_dropped: report.outputs_dropped,
        elapsed_ms: report.elapsed_ms,
        exit_status: exit_status(report),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tree::test_rng::Lcg;

    fn out(text: &str, code: i32) -> ExecOutput {
        ExecOutput {
            output: text.as_bytes().to_vec(),
            code,
            end: ExecEnd::Exited,
            cut: 0,
        }
    }

    fn group(nodes: &str, count: u64, text: &str, code: i32) -> ExecGroup {
        ExecGroup {
            nodes: nodes.into(),
            count,
            result: out(text, code),
            output_dropped: false,
        }
    }

    #[test]
    fn ten_thousand_equal_results_fold_into_one_group() {
        let mut f = Folded::new();
        for r in (0..10_000).rev() {
            f.record(RankSet::from_ranks([r]), out("ok\n", 0));
        }
        assert_eq!(
            f.into_sorted(),
            vec![(RankSet::from_range(0..10_000), out("ok\n", 0))]
        );
    }

    #[test]
    fn a_different_output_or_exit_code_is_its_own_group() {
        let mut f = Folded::new();
        f.record(RankSet::from_range(0..8), out("same\n", 0));
        f.record(RankSet::from_ranks([8]), out("same\n", 1));
        f.record(RankSet::from_ranks([9]), out("other\n", 0));
        f.record(RankSet::from_ranks([10]), out("same\n", 0));
        let g = f.into_sorted();
        assert_eq!(g.len(), 3);
        assert_eq!(
            g[0].0,
            RankSet::from_range(0..8).union(&RankSet::from_ranks([10]))
        );
        assert_eq!(g[1], (RankSet::from_ranks([8]), out("same\n", 1)));
        assert_eq!(g[2], (RankSet::from_ranks([9]), out("other\n", 0)));
    }

    #[test]
    fn a_hash_collision_still_compares_results_in_full() {
        // Two results in one bucket (forced by recording both under the
        // same index entry) must stay apart.
        let mut f: Folded<ExecOutput> = Folded::new();
        f.record(RankSet::from_ranks([0]), out("a", 0));
        let h = hash_of(&out("a", 0));
        let idx = f.index.remove(&h).unwrap();
        f.index.insert(hash_of(&out("b", 0)), idx);
        f.record(RankSet::from_ranks([1]), out("b", 0));
        assert_eq!(f.len(), 2, "b is not a");
    }

    #[test]
    fn exit_codes_join_groups_and_exit_status_is_the_largest() {
        let report = ExecReport {
            targets: 10,
            groups: vec![
                group("n[1-6]", 6, "same\n", 0),
                group("n7", 1, "other\n", 0),
                group("n[8-9]", 2, "bad\n", 3),
            ],
            missing: vec![],
            outputs_dropped: 0,
            elapsed_ms: 1,
        };
        assert_eq!(
            exit_codes(&report),
            vec![
                ExitCodeGroup {
                    code: 0,
                    nodes: "n[1-7]".into(),
                    count: 7
                },
                ExitCodeGroup {
                    code: 3,
                    nodes: "n[8-9]".into(),
                    count: 2
                },
            ]
        );
        assert_eq!(exit_status(&report), 3);
        let mut all_ok = report.clone();
        all_ok.groups.truncate(2);
        assert_eq!(exit_status(&all_ok), 0);
        all_ok.missing.push(("n10".into(), "timed out".into()));
        assert_eq!(
            exit_status(&all_ok),
            1,
            "a node with no result is a failure"
        );
    }

    #[test]
    fn render_folds_and_names_what_did_not_finish() {
        let mut late = group("n4", 1, "partial\n", 137);
        late.result.end = ExecEnd::TimedOut;
        let report = ExecReport {
            targets: 5,
            groups: vec![group("n[1-3]", 3, "same\n", 0), late],
            missing: vec![("n5".into(), "node is not reachable".into())],
            outputs_dropped: 0,
            elapsed_ms: 3,
        };
        let text = render(&report, false);
        assert!(text.contains("n[1-3] (3)\n"), "{text}");
        assert_eq!(text.matches("same\n").count(), 1, "{text}");
        assert!(text.contains("n4 (1): timed out"), "{text}");
        assert!(
            text.contains("exit codes: 0: n[1-3] (3); 137: n4 (1)"),
            "{text}"
        );
        assert!(
            text.contains("no result from n5: node is not reachable"),
            "{text}"
        );
        assert!(text.contains("not finished: n[4-5]"), "{text}");
    }

    #[test]
    fn render_diff_compares_with_the_most_common_output() {
        let report = ExecReport {
            targets: 4,
            groups: vec![
                group("n4", 1, "a\nX\nc\n", 2),
                group("n[1-3]", 3, "a\nb\nc\n", 0),
            ],
            ..Default::default()
        };
        let text = render(&report, true);
        // The reference is printed first, in full, even though it came second.
        let first = text.find("n[1-3] (3)").unwrap();
        let second = text.find("n4 (1): exit 2, diff against n[1-3]").unwrap();
        assert!(first < second, "{text}");
        assert!(text.contains("  a\n- b\n+ X\n  c\n"), "{text}");
    }

    #[test]
    fn bound_outputs_keeps_the_largest_groups_output() {
        let mut groups = vec![
            group("n[1-5]", 5, "aaaa", 0),
            group("n6", 1, "bbbb", 0),
            group("n7", 1, "cc", 0),
        ];
        assert_eq!(bound_outputs(&mut groups, 6), 1);
        assert!(!groups[0].output_dropped);
        assert!(groups[1].output_dropped && groups[1].result.output.is_empty());
        assert_eq!(groups[1].result.cut, 4);
        assert!(
            !groups[2].output_dropped,
            "a smaller later output still fits"
        );
        let text = render(
            &ExecReport {
                groups: groups.clone(),
                outputs_dropped: 1,
                ..Default::default()
            },
            false,
        );
        assert!(text.contains("[output left out"), "{text}");
        assert!(
            text.contains("1 group(s) shown without their output"),
            "{text}"
        );
    }

    #[test]
    fn bound_exec_replies_empties_outputs_past_the_budget() {
        use crate::wire::messages::{NodeReply, Outcome};
        let mut v = vec![
            Outcome {
                ranks: RankSet::from_ranks([0]),
                result: Ok(NodeReply::Exec(out("12345", 0))),
            },
            Outcome {
                ranks: RankSet::from_ranks([1]),
                result: Err("timed out".into()),
            },
            Outcome {
                ranks: RankSet::from_ranks([2]),
                result: Ok(NodeReply::Exec(out("678", 0))),
            },
        ];
        assert_eq!(bound_exec_replies(&mut v, 6), 1);
        assert_eq!(v[0].result, Ok(NodeReply::Exec(out("12345", 0))));
        let Ok(NodeReply::Exec(o)) = &v[2].result else {
            panic!("kept its kind")
        };
        assert!(o.output.is_empty());
        assert_eq!(o.cut, 3);
    }

    #[test]
    fn line_diff_edge_cases() {
        assert_eq!(line_diff("", ""), Some(vec![]));
        assert_eq!(
            line_diff("", "x\n"),
            Some(vec![DiffLine::Added("x".into())])
        );
        assert_eq!(
            line_diff("x\n", ""),
            Some(vec![DiffLine::Removed("x".into())])
        );
        let big = "l\n".repeat(3000);
        assert_eq!(line_diff(&big, &big), None, "too large to compare");
    }

    /// Applying a diff to `a` gives `b`, and no common line is reported
    /// as removed and added again needlessly (the Same lines are an LCS).
    #[test]
    fn line_diff_reconstructs_both_sides_seeded() {
        let seed = std::env::var("CANOPY_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0x5eed_d1ff_u64);
        eprintln!("line_diff property seed {seed} (CANOPY_SEED replays it)");
        let mut rng = Lcg::new(seed);
        for case in 0..300 {
            let mk = |rng: &mut Lcg| -> String {
                let n = rng.below(12);
                (0..n).map(|_| format!("{}\n", rng.below(4))).collect()
            };
            let (a, b) = (mk(&mut rng), mk(&mut rng));
            let d = line_diff(&a, &b).unwrap();
            let left: String = d
                .iter()
                .filter_map(|l| match l {
                    DiffLine::Same(t) | DiffLine::Removed(t) => Some(format!("{t}\n")),
                    DiffLine::Added(_) => None,
                })
                .collect();
            let right: String = d
                .iter()
                .filter_map(|l| match l {
                    DiffLine::Same(t) | DiffLine::Added(t) => Some(format!("{t}\n")),
                    DiffLine::Removed(_) => None,
                })
                .collect();
            assert_eq!(left, a, "seed {seed} case {case}");
            assert_eq!(right, b, "seed {seed} case {case}");
            let same = d.iter().filter(|l| matches!(l, DiffLine::Same(_))).count();
            assert_eq!(same, lcs_oracle(&a, &b), "seed {seed} case {case}");
        }
    }

    /// Brute-force LCS length by recursion (small inputs only).
    fn lcs_oracle(a: &str, b: &str) -> usize {
        fn go(a: &[&str], b: &[&str]) -> usize {
            match (a.split_first(), b.split_first()) {
                (Some((x, ra)), Some((y, rb))) if x == y => 1 + go(ra, rb),
                (Some((_, ra)), Some((_, rb))) => go(ra, b).max(go(a, rb)),
                _ => 0,
            }
        }
        let a: Vec<&str> = a.lines().collect();
        let b: Vec<&str> = b.lines().collect();
        go(&a, &b)
    }

    /// Folding per subtree and merging the subtrees in any order gives the
    /// same groups as folding every node's result flat: what reaches the
    /// client does not depend on the tree's shape or on arrival order.
    #[test]
    fn folding_is_independent_of_tree_shape_seeded() {
        let seed = std::env::var("CANOPY_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0xf01d_u64);
        eprintln!("fold property seed {seed} (CANOPY_SEED replays it)");
        let mut rng = Lcg::new(seed);
        for case in 0..200 {
            let n = 1 + rng.below(300);
            let distinct = 1 + rng.below(6);
            let per_node: Vec<ExecOutput> = (0..n)
                .map(|_| {
                    let k = rng.below(distinct);
                    out(&format!("line {k}\n"), (k % 3) as i32)
                })
                .collect();
            let mut flat = Folded::new();
            for (r, o) in per_node.iter().enumerate() {
                flat.record(RankSet::from_ranks([r as u32]), o.clone());
            }
            // Random subtrees: cut the ranks into runs, fold each, then
            // merge the runs' folds in a random order, two levels deep.
            let mut subtrees: Vec<Folded<ExecOutput>> = Vec::new();
            let mut start = 0u32;
            while start < n {
                let len = 1 + rng.below(n - start);
                let mut f = Folded::new();
                for r in start..start + len {
                    f.record(RankSet::from_ranks([r]), per_node[r as usize].clone());
                }
                subtrees.push(f);
                start += len;
            }
            let mut mids: Vec<Folded<ExecOutput>> = Vec::new();
            while !subtrees.is_empty() {
                let i = rng.below(subtrees.len() as u32) as usize;
                let f = subtrees.swap_remove(i);
                if mids.is_empty() || rng.chance(40) {
                    mids.push(f);
                } else {
                    let j = rng.below(mids.len() as u32) as usize;
                    mids[j].merge(f);
                }
            }
            let mut root = Folded::new();
            while let Some(f) = mids.pop() {
                root.merge(f);
            }
            assert_eq!(
                root.ranks(),
                RankSet::from_range(0..n),
                "seed {seed} case {case}"
            );
            let expected_groups = per_node
                .iter()
                .collect::<std::collections::HashSet<_>>()
                .len();
            assert_eq!(root.len(), expected_groups, "seed {seed} case {case}");
            assert_eq!(
                root.into_sorted(),
                flat.into_sorted(),
                "seed {seed} case {case}"
            );
        }
    }

    #[test]
    fn fold_outcomes_separates_results_from_missing_nodes() {
        let f = fold_outcomes(vec![
            (RankSet::from_range(0..4), Ok(out("x", 0))),
            (RankSet::from_range(4..6), Err("timed out".to_string())),
            (RankSet::from_range(6..8), Ok(out("x", 0))),
        ]);
        assert_eq!(
            f.ok.into_sorted(),
            vec![(
                RankSet::from_range(0..4).union(&RankSet::from_range(6..8)),
                out("x", 0)
            )]
        );
        assert_eq!(
            f.missing.into_sorted(),
            vec![(RankSet::from_range(4..6), "timed out".to_string())]
        );
    }
}
