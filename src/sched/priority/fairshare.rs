//! Fair share over a tree of associations: Slurm's Fair Tree (the default)
//! and the classic algorithm (`PriorityFlags=NO_FAIR_TREE`).
//!
//! The input is its own small, pure tree ([`ShareTree`]: names, parents,
//! account or user, raw shares) plus each association's decayed raw usage
//! (already including its descendants', as Slurm accrues it); the output is
//! one [`ShareFactors`] per node: what sshare prints and what a job's
//! fair-share factor is. The tree is built by one adapter in the controller
//! core (today from the jobs it knows; later from the association
//! database), so this file knows nothing of jobs or accounts storage.

use std::cmp::Ordering;
use std::collections::HashMap;

use serde::{Deserialize, Serialize};

/// Account (an inner node) or user (a leaf).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum NodeKind {
    Account,
    User,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShareNode {
    pub name: String,
    /// `None` only for the root (index 0).
    pub parent: Option<usize>,
    pub kind: NodeKind,
    pub shares: u32,
}

/// The association tree fair share is computed over; node 0 is `root`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShareTree {
    pub nodes: Vec<ShareNode>,
}

impl Default for ShareTree {
    fn default() -> Self {
        ShareTree::new()
    }
}

impl ShareTree {
    pub fn new() -> ShareTree {
        ShareTree {
            nodes: vec![ShareNode {
                name: "root".into(),
                parent: None,
                kind: NodeKind::Account,
                shares: 1,
            }],
        }
    }

    /// Add a child of `parent`; its index.
    pub fn add(&mut self, parent: usize, name: &str, kind: NodeKind, shares: u32) -> usize {
        self.nodes.push(ShareNode {
            name: name.to_string(),
            parent: Some(parent),
            kind,
            shares,
        });
        self.nodes.len() - 1
    }

    /// The child of `parent` called `name` of `kind`, if any.
    pub fn child(&self, parent: usize, name: &str, kind: NodeKind) -> Option<usize> {
        self.nodes
            .iter()
            .position(|n| n.parent == Some(parent) && n.kind == kind && n.name == name)
    }

    /// Children of each node, in insertion order.
    pub fn children(&self) -> Vec<Vec<usize>> {
        let mut out = vec![Vec::new(); self.nodes.len()];
        for (i, n) in self.nodes.iter().enumerate() {
            if let Some(p) = n.parent {
                out[p].push(i);
            }
        }
        out
    }

    /// The key usage is stored under: the account's name, or
    /// `account/user` for a user (an association is a user in an account).
    pub fn key(&self, i: usize) -> String {
        let n = &self.nodes[i];
        match (n.kind, n.parent) {
            (NodeKind::User, Some(p)) => format!("{}/{}", self.nodes[p].name, n.name),
            _ => n.name.clone(),
        }
    }

    pub fn depth(&self, mut i: usize) -> usize {
        let mut d = 0;
        while let Some(p) = self.nodes[i].parent {
            d += 1;
            i = p;
        }
        d
    }

    /// Nodes in the order sshare lists them: depth first, each account
    /// followed by its children, users before sub-accounts, by name.
    pub fn listing_order(&self) -> Vec<usize> {
        let children = self.children();
        let mut out = Vec::with_capacity(self.nodes.len());
        let mut stack = vec![0usize];
        while let Some(i) = stack.pop() {
            out.push(i);
            let mut kids = children[i].clone();
            kids.sort_by(|&a, &b| {
                let (na, nb) = (&self.nodes[a], &self.nodes[b]);
                let rank = |k| if k == NodeKind::User { 0 } else { 1 };
                rank(na.kind)
                    .cmp(&rank(nb.kind))
                    .then_with(|| na.name.cmp(&nb.name))
            });
            stack.extend(kids.into_iter().rev());
        }
        out
    }
}

/// What fair share makes of one association.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct ShareFactors {
    /// Shares among siblings (Fair Tree), or along the whole path (classic).
    pub norm_shares: f64,
    pub raw_usage: f64,
    /// Usage over the whole cluster's.
    pub norm_usage: f64,
    /// Fair Tree: usage over the parent's; classic: `U_E` of the formula.
    pub effective_usage: f64,
    /// Fair Tree: `S/U` among siblings (∞ without usage); classic: unused (NaN).
    pub level_fs: f64,
    /// The fair-share factor in [0, 1] (users; accounts too under classic).
    pub fairshare: f64,
}

fn usage_of(tree: &ShareTree, usage: &HashMap<String, f64>, i: usize) -> f64 {
    usage.get(&tree.key(i)).copied().unwrap_or(0.0).max(0.0)
}

/// Sum of the raw shares of `i` and its siblings.
fn level_shares(tree: &ShareTree, children: &[Vec<usize>], i: usize) -> f64 {
    match tree.nodes[i].parent {
        Some(p) => children[p]
            .iter()
            .map(|&c| f64::from(tree.nodes[c].shares))
            .sum(),
        None => f64::from(tree.nodes[i].shares),
    }
}

/// Fair Tree: each level's `LevelFS = S/U`, then a depth-first walk over
/// siblings sorted by it ranks every user; `fairshare = rank / users`, so
/// the best-served-least user gets 1.0. Siblings that tie share a rank
/// (users) or have their children ranked together (accounts).
pub fn fair_tree(tree: &ShareTree, usage: &HashMap<String, f64>) -> Vec<ShareFactors> {
    let children = tree.children();
    let n = tree.nodes.len();
    let raw: Vec<f64> = (0..n).map(|i| usage_of(tree, usage, i)).collect();
    let total = raw[0];
    let mut out = vec![ShareFactors::default(); n];
    for i in 0..n {
        let f = &mut out[i];
        f.raw_usage = raw[i];
        f.norm_usage = if total > 0.0 { raw[i] / total } else { 0.0 };
        let Some(p) = tree.nodes[i].parent else {
            f.effective_usage = 1.0;
            f.level_fs = f64::NAN;
            continue;
        };
        let ls = level_shares(tree, &children, i);
        f.norm_shares = if ls > 0.0 {
            f64::from(tree.nodes[i].shares) / ls
        } else {
            0.0
        };
        f.effective_usage = if raw[p] > 0.0 { raw[i] / raw[p] } else { 0.0 };
        f.level_fs = if f.norm_shares == 0.0 {
            0.0
        } else if f.effective_usage == 0.0 {
            f64::INFINITY
        } else {
            f.norm_shares / f.effective_usage
        };
    }
    let users = tree
        .nodes
        .iter()
        .filter(|n| n.kind == NodeKind::User)
        .count();
    let mut rank = users;
    let mut not_tied = users;
    rank_level(
        tree,
        &children,
        &mut out,
        children[0].clone(),
        &mut rank,
        &mut not_tied,
        users,
    );
    out
}

/// Highest LevelFS first; equal ones by name, so the walk is deterministic.
fn by_level_fs(tree: &ShareTree, f: &[ShareFactors], a: usize, b: usize) -> Ordering {
    f[b].level_fs
        .partial_cmp(&f[a].level_fs)
        .unwrap_or(Ordering::Equal)
        .then_with(|| tree.nodes[a].name.cmp(&tree.nodes[b].name))
}

fn rank_level(
    tree: &ShareTree,
    children: &[Vec<usize>],
    out: &mut [ShareFactors],
    mut siblings: Vec<usize>,
    rank: &mut usize,
    not_tied: &mut usize,
    users: usize,
) {
    siblings.sort_by(|&a, &b| by_level_fs(tree, out, a, b));
    // The LevelFS of the user just ranked at this level: a user that ties
    // with it shares its rank. (A tie with an account sibling does not
    // count: the rank left by that account's subtree is not this level's.)
    let mut prev_user: Option<f64> = None;
    let mut i = 0;
    while i < siblings.len() {
        let s = siblings[i];
        let lfs = out[s].level_fs;
        let tied = prev_user == Some(lfs);
        prev_user = (tree.nodes[s].kind == NodeKind::User).then_some(lfs);
        match tree.nodes[s].kind {
            NodeKind::User => {
                if !tied {
                    *rank = *not_tied;
                }
                out[s].fairshare = if users > 0 {
                    *rank as f64 / users as f64
                } else {
                    0.0
                };
                *not_tied = not_tied.saturating_sub(1);
                i += 1;
            }
            NodeKind::Account => {
                // Accounts that tie with this one: their children are
                // ranked together, as one level.
                let mut merged = children[s].clone();
                let mut j = i + 1;
                while j < siblings.len()
                    && tree.nodes[siblings[j]].kind == NodeKind::Account
                    && out[siblings[j]].level_fs == lfs
                {
                    merged.extend(children[siblings[j]].iter().copied());
                    j += 1;
                }
                rank_level(tree, children, out, merged, rank, not_tied, users);
                i = j;
            }
        }
    }
}

/// Classic fair share: `F = 2^(-U_E/S)` with `S` the product of the
/// shares normalised among siblings along the path, and `U_E = U +
/// (U_E(parent) - U) * shares/level_shares` (the parent's effective usage
/// is the node's own normalised usage directly under root).
pub fn classic(tree: &ShareTree, usage: &HashMap<String, f64>) -> Vec<ShareFactors> {
    let children = tree.children();
    let n = tree.nodes.len();
    let raw: Vec<f64> = (0..n).map(|i| usage_of(tree, usage, i)).collect();
    let total = raw[0];
    let mut out = vec![ShareFactors::default(); n];
    // Parents come before children (`add` needs the parent's index).
    for i in 0..n {
        let norm_usage = if total > 0.0 { raw[i] / total } else { 0.0 };
        let (norm_shares, effective) = match tree.nodes[i].parent {
            None => (1.0, 1.0),
            Some(p) => {
                let ls = level_shares(tree, &children, i);
                let own = if ls > 0.0 {
                    f64::from(tree.nodes[i].shares) / ls
                } else {
                    0.0
                };
                let s = out[p].norm_shares * own;
                let e = if tree.nodes[p].parent.is_none() {
                    norm_usage
                } else {
                    norm_usage + (out[p].effective_usage - norm_usage) * own
                };
                (s, e)
            }
        };
        out[i] = ShareFactors {
            norm_shares,
            raw_usage: raw[i],
            norm_usage,
            effective_usage: effective,
            level_fs: f64::NAN,
            fairshare: classic_factor(effective, norm_shares),
        };
    }
    out
}

/// `2^(-U_E/S)`; no shares → 0.
pub fn classic_factor(effective_usage: f64, norm_shares: f64) -> f64 {
    if norm_shares <= 0.0 {
        0.0
    } else {
        2f64.powf(-(effective_usage / norm_shares))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    /// root → {a (shares 3): u1, u2; b (shares 1): u3}.
    fn sample() -> (ShareTree, [usize; 5]) {
        let mut t = ShareTree::new();
        let a = t.add(0, "a", NodeKind::Account, 3);
        let b = t.add(0, "b", NodeKind::Account, 1);
        let u1 = t.add(a, "u1", NodeKind::User, 1);
        let u2 = t.add(a, "u2", NodeKind::User, 1);
        let u3 = t.add(b, "u3", NodeKind::User, 1);
        (t, [a, b, u1, u2, u3])
    }

    fn usage(pairs: &[(&str, f64)]) -> HashMap<String, f64> {
        pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    #[test]
    fn fair_tree_levels_and_ranks_by_hand() {
        let (t, [a, b, u1, u2, u3]) = sample();
        // a used 60 of 100 (u1 all of it), b 40 (u3).
        let u = usage(&[
            ("root", 100.0),
            ("a", 60.0),
            ("b", 40.0),
            ("a/u1", 60.0),
            ("b/u3", 40.0),
        ]);
        let f = fair_tree(&t, &u);
        // a: S = 0.75, U = 0.6 → 1.25; b: S = 0.25, U = 0.4 → 0.625.
        assert!(close(f[a].level_fs, 1.25) && close(f[b].level_fs, 0.625));
        assert!(close(f[a].norm_shares, 0.75) && close(f[a].effective_usage, 0.6));
        // Under a: u2 has no usage (∞) before u1 (0.5/1.0); then u3.
        assert!(f[u2].level_fs.is_infinite() && close(f[u1].level_fs, 0.5));
        assert!(close(f[u2].fairshare, 1.0));
        assert!(close(f[u1].fairshare, 2.0 / 3.0));
        assert!(close(f[u3].fairshare, 1.0 / 3.0));
        assert!(close(f[u3].norm_usage, 0.4));
    }

    #[test]
    fn fair_tree_ties_share_a_rank() {
        let (t, [_, _, u1, u2, u3]) = sample();
        let f = fair_tree(&t, &HashMap::new());
        // No usage at all: a and b tie at ∞, so all three users rank
        // together and all tie at the top.
        for u in [u1, u2, u3] {
            assert!(close(f[u].fairshare, 1.0), "{:?}", f[u]);
        }
    }

    #[test]
    fn classic_matches_the_formula_by_hand() {
        let (t, [a, _, u1, u2, u3]) = sample();
        let u = usage(&[
            ("root", 100.0),
            ("a", 60.0),
            ("b", 40.0),
            ("a/u1", 60.0),
            ("b/u3", 40.0),
        ]);
        let f = classic(&t, &u);
        // S(u1) = 0.75 * 0.5; U_E(a) = 0.6; U_E(u1) = 0.6 + (0.6-0.6)*0.5.
        assert!(close(f[a].effective_usage, 0.6));
        assert!(close(f[u1].norm_shares, 0.375));
        assert!(close(f[u1].effective_usage, 0.6));
        assert!(close(f[u1].fairshare, 2f64.powf(-0.6 / 0.375)));
        // u2: U = 0, U_E = 0 + (0.6 - 0)*0.5 = 0.3.
        assert!(close(f[u2].effective_usage, 0.3));
        assert!(close(f[u2].fairshare, 2f64.powf(-0.3 / 0.375)));
        // u3: alone under b: U_E = 0.4 + (0.4-0.4)*1.
        assert!(close(f[u3].fairshare, 2f64.powf(-0.4 / 0.25)));
        // No usage: exactly 1.
        let f = classic(&t, &HashMap::new());
        assert!(close(f[u1].fairshare, 1.0));
    }

    /// The Fair Tree property: if account A has a higher LevelFS than its
    /// sibling B, every user under A ranks above every user under B.
    #[test]
    fn fair_tree_property_accounts_order_their_users() {
        let seed: u64 = std::env::var("FAIRTREE_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(rand::random);
        println!("fair tree property seed: {seed} (replay with FAIRTREE_SEED={seed})");
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        for round in 0..200 {
            let mut t = ShareTree::new();
            let mut u = HashMap::new();
            let mut accounts = vec![0usize];
            let n_accounts = rng.gen_range(2..8);
            for k in 0..n_accounts {
                let parent = accounts[rng.gen_range(0..accounts.len())];
                let a = t.add(
                    parent,
                    &format!("a{k}"),
                    NodeKind::Account,
                    rng.gen_range(0..5),
                );
                accounts.push(a);
            }
            for k in 0..rng.gen_range(1..20) {
                let parent = accounts[rng.gen_range(0..accounts.len())];
                let user = t.add(
                    parent,
                    &format!("u{k}"),
                    NodeKind::User,
                    rng.gen_range(0..5),
                );
                if rng.gen_bool(0.8) {
                    // Usage propagates to every ancestor, as it accrues.
                    let amount = f64::from(rng.gen_range(0..1000u32));
                    let mut i = user;
                    loop {
                        *u.entry(t.key(i)).or_insert(0.0) += amount;
                        match t.nodes[i].parent {
                            Some(p) => i = p,
                            None => break,
                        }
                    }
                }
            }
            let f = fair_tree(&t, &u);
            let children = t.children();
            let users_under = |a: usize| -> Vec<usize> {
                let mut out = Vec::new();
                let mut stack = vec![a];
                while let Some(i) = stack.pop() {
                    if t.nodes[i].kind == NodeKind::User {
                        out.push(i);
                    }
                    stack.extend(children[i].iter().copied());
                }
                out
            };
            for kids in &children {
                for &x in kids {
                    for &y in kids {
                        let (nx, ny) = (&t.nodes[x], &t.nodes[y]);
                        if nx.kind != NodeKind::Account
                            || ny.kind != NodeKind::Account
                            || f[x].level_fs <= f[y].level_fs
                        {
                            continue;
                        }
                        for ux in users_under(x) {
                            for uy in users_under(y) {
                                assert!(
                                    f[ux].fairshare > f[uy].fairshare,
                                    "seed {seed} round {round}: {} (LevelFS {}) under {} must outrank {} under {} (LevelFS {})",
                                    t.nodes[ux].name, f[x].level_fs, nx.name, t.nodes[uy].name, ny.name, f[y].level_fs
                                );
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn listing_order_is_depth_first_users_first() {
        let (t, _) = sample();
        let names: Vec<String> = t.listing_order().iter().map(|&i| t.key(i)).collect();
        assert_eq!(names, ["root", "a", "a/u1", "a/u2", "b", "b/u3"]);
        assert_eq!(t.depth(4), 2);
    }
}
