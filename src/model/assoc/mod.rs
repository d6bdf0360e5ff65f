//! The association database: clusters, the account tree under each
//! cluster's `root`, users and their associations (cluster, account,
//! user), and QOS. The controller keeps it itself (no accounting daemon
//! yet); `edit` holds the pure add/modify/delete functions with Slurm's
//! refusals, `request` the serialisable requests sacctmgr sends.

mod delete;
pub mod edit;
pub mod limits;
pub mod qos;
pub mod reason;
pub mod request;
#[cfg(test)]
mod tests;
pub mod tres;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::{Deserialize, Serialize};

pub use limits::{AssocLimits, Edit, LimitsEdit};
pub use qos::{ListEdit, PreemptMode, Qos, QosEdit, QosFlag};
pub use tres::{Tres, TresEdit};

/// The account every cluster's tree hangs from.
pub const ROOT: &str = "root";
/// The QOS that exists from the start, as in Slurm.
pub const NORMAL_QOS: &str = "normal";

/// A user's `AdminLevel`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum AdminLevel {
    #[default]
    None,
    Operator,
    Administrator,
}

impl AdminLevel {
    /// sacctmgr takes `None`, `Operator`, `Admin`/`Administrator`.
    pub fn parse(s: &str) -> Option<AdminLevel> {
        let s = s.trim().to_ascii_lowercase();
        match s.as_str() {
            "none" => Some(AdminLevel::None),
            "operator" | "oper" => Some(AdminLevel::Operator),
            _ if s.len() >= 5 && "administrator".starts_with(&s) => Some(AdminLevel::Administrator),
            _ => None,
        }
    }
}

impl fmt::Display for AdminLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AdminLevel::None => "None",
            AdminLevel::Operator => "Operator",
            AdminLevel::Administrator => "Administrator",
        })
    }
}

/// `Fairshare=`: a number of shares, or `parent` (the association
/// competes as part of its parent).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Shares {
    Raw(u32),
    Parent,
}

impl Default for Shares {
    fn default() -> Shares {
        Shares::Raw(1)
    }
}

impl fmt::Display for Shares {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Shares::Raw(n) => write!(f, "{n}"),
            Shares::Parent => f.write_str("parent"),
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Account {
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub organization: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct User {
    pub name: String,
    pub default_account: String,
    #[serde(default)]
    pub admin_level: AdminLevel,
}

/// Which association: an account's (`user` empty) or a user's in an
/// account, on a cluster. Ordered so a cluster's associations sort
/// together, each account's user rows after the account's own.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct AssocKey {
    pub cluster: String,
    pub account: String,
    pub user: String,
}

impl AssocKey {
    pub fn account(cluster: &str, account: &str) -> AssocKey {
        AssocKey {
            cluster: cluster.to_string(),
            account: account.to_string(),
            user: String::new(),
        }
    }

    pub fn user(cluster: &str, account: &str, user: &str) -> AssocKey {
        AssocKey {
            cluster: cluster.to_string(),
            account: account.to_string(),
            user: user.to_string(),
        }
    }

    pub fn is_user(&self) -> bool {
        !self.user.is_empty()
    }
}

/// One association.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Assoc {
    pub id: u32,
    /// The parent account of an account's association (`None` for
    /// `root`); a user's association hangs from its own account.
    #[serde(default)]
    pub parent: Option<String>,
    #[serde(default)]
    pub shares: Shares,
    #[serde(default)]
    pub priority: Option<u32>,
    #[serde(default)]
    pub limits: AssocLimits,
    /// QOS allowed; `None` inherits the parent's.
    #[serde(default)]
    pub qos: Option<BTreeSet<String>>,
    /// `DefaultQOS`; `None` inherits the parent's.
    #[serde(default)]
    pub default_qos: Option<String>,
}

impl Assoc {
    pub fn new(id: u32, parent: Option<String>) -> Assoc {
        Assoc {
            id,
            parent,
            shares: Shares::default(),
            priority: None,
            limits: AssocLimits::default(),
            qos: None,
            default_qos: None,
        }
    }
}

/// The whole database. Small (accounts and users, not jobs): kept in
/// memory and stored whole on each change.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AssocDb {
    #[serde(default)]
    pub clusters: BTreeSet<String>,
    #[serde(default)]
    pub accounts: BTreeMap<String, Account>,
    #[serde(default)]
    pub users: BTreeMap<String, User>,
    #[serde(default)]
    pub assocs: BTreeMap<AssocKey, Assoc>,
    #[serde(default)]
    pub qos: BTreeMap<String, Qos>,
    #[serde(default)]
    pub next_assoc_id: u32,
    #[serde(default)]
    pub next_qos_id: u32,
}

impl Default for AssocDb {
    /// Empty but for the `normal` QOS (id 1) and the `root` account.
    fn default() -> AssocDb {
        let mut db = AssocDb {
            clusters: BTreeSet::new(),
            accounts: BTreeMap::new(),
            users: BTreeMap::new(),
            assocs: BTreeMap::new(),
            qos: BTreeMap::new(),
            next_assoc_id: 1,
            next_qos_id: 2,
        };
        db.qos.insert(NORMAL_QOS.into(), Qos::new(1, NORMAL_QOS));
        db.accounts.insert(
            ROOT.into(),
            Account {
                name: ROOT.into(),
                description: "default root account".into(),
                organization: ROOT.into(),
            },
        );
        db
    }
}

impl AssocDb {
    /// Add cluster `name` with its `root` association (and root's user
    /// association for `root`, as slurmdbd makes them), unless it exists.
    pub fn ensure_cluster(&mut self, name: &str) -> bool {
        if !self.clusters.insert(name.to_string()) {
            return false;
        }
        let mut root = Assoc::new(self.take_assoc_id(), None);
        root.qos = Some([NORMAL_QOS.to_string()].into_iter().collect());
        self.assocs.insert(AssocKey::account(name, ROOT), root);
        let id = self.take_assoc_id();
        self.assocs
            .insert(AssocKey::user(name, ROOT, ROOT), Assoc::new(id, None));
        self.users.entry(ROOT.into()).or_insert_with(|| User {
            name: ROOT.into(),
            default_account: ROOT.into(),
            admin_level: AdminLevel::Administrator,
        });
        true
    }

    pub(crate) fn take_assoc_id(&mut self) -> u32 {
        let id = self.next_assoc_id.max(1);
        self.next_assoc_id = id + 1;
        id
    }

    /// Whether any association or QOS sets a limit that can hold a
    /// running job back (a pass skips counting when none does).
    pub fn has_run_limits(&self) -> bool {
        let tres = |t: &Tres| !t.is_empty();
        self.assocs.values().any(|a| {
            let l = &a.limits;
            tres(&l.grp_tres)
                || tres(&l.max_tres_per_job)
                || tres(&l.max_tres_per_node)
                || l.grp_jobs.is_some()
                || l.max_jobs.is_some()
                || l.max_wall.is_some()
                || tres(&l.grp_tres_mins)
                || l.grp_wall.is_some()
        }) || self.qos.values().any(|q| {
            tres(&q.grp_tres)
                || tres(&q.max_tres_per_job)
                || tres(&q.max_tres_per_node)
                || tres(&q.max_tres_per_user)
                || q.grp_jobs.is_some()
                || q.max_jobs_per_user.is_some()
                || q.max_wall.is_some()
                || tres(&q.grp_tres_mins)
                || q.grp_wall.is_some()
        })
    }

    /// The association `user` has in `account` on `cluster`.
    pub fn user_assoc(&self, cluster: &str, account: &str, user: &str) -> Option<&Assoc> {
        self.assocs.get(&AssocKey::user(cluster, account, user))
    }

    /// The account-association chain above a user association (or from
    /// an account's association), nearest first, ending at `root`.
    pub fn ancestors(&self, cluster: &str, account: &str) -> Vec<(&AssocKey, &Assoc)> {
        let mut out = Vec::new();
        let mut next = Some(account.to_string());
        while let Some(acct) = next {
            let Some((k, a)) = self
                .assocs
                .get_key_value(&AssocKey::account(cluster, &acct))
            else {
                break;
            };
            if out.len() > self.assocs.len() {
                break; // a cycle cannot be built by `edit`, but never loop
            }
            next = a.parent.clone();
            out.push((k, a));
        }
        out
    }

    /// The QOS a user association may use: its own list, else the nearest
    /// ancestor's.
    pub fn allowed_qos(&self, key: &AssocKey) -> BTreeSet<String> {
        if let Some(q) = self.assocs.get(key).and_then(|a| a.qos.clone()) {
            return q;
        }
        self.ancestors(&key.cluster, &key.account)
            .into_iter()
            .find_map(|(_, a)| a.qos.clone())
            .unwrap_or_default()
    }

    /// The association's `DefaultQOS`, own or inherited.
    pub fn default_qos(&self, key: &AssocKey) -> Option<String> {
        if let Some(q) = self.assocs.get(key).and_then(|a| a.default_qos.clone()) {
            return Some(q);
        }
        self.ancestors(&key.cluster, &key.account)
            .into_iter()
            .find_map(|(_, a)| a.default_qos.clone())
    }

    /// Child accounts of `account` on `cluster`.
    pub fn children(&self, cluster: &str, account: &str) -> Vec<&str> {
        self.assocs
            .iter()
            .filter(|(k, a)| {
                k.cluster == cluster && !k.is_user() && a.parent.as_deref() == Some(account)
            })
            .map(|(k, _)| k.account.as_str())
            .collect()
    }

    /// The associations of `cluster` in tree order (each account, then
    /// its users, then its child accounts, depth first) with their depth.
    pub fn tree(&self, cluster: &str) -> Vec<(&AssocKey, &Assoc, usize)> {
        let mut out = Vec::new();
        self.walk(cluster, ROOT, 0, &mut out);
        out
    }

    fn walk<'a>(
        &'a self,
        cluster: &str,
        account: &str,
        depth: usize,
        out: &mut Vec<(&'a AssocKey, &'a Assoc, usize)>,
    ) {
        if depth > self.assocs.len() {
            return;
        }
        let Some((k, a)) = self
            .assocs
            .get_key_value(&AssocKey::account(cluster, account))
        else {
            return;
        };
        out.push((k, a, depth));
        for (uk, ua) in self
            .assocs
            .range(AssocKey::account(cluster, account)..)
            .skip(1)
            .take_while(|(k, _)| k.cluster == cluster && k.account == account)
        {
            out.push((uk, ua, depth + 1));
        }
        let mut kids = self.children(cluster, account);
        kids.sort_unstable();
        for c in kids {
            self.walk(cluster, c, depth + 1, out);
        }
    }
}
