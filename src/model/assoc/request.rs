//! What `sacctmgr` asks the controller to change: serialisable, so the
//! core's command log replays it.

use serde::{Deserialize, Serialize};

use super::limits::{Edit, LimitsEdit};
use super::qos::{ListEdit, QosEdit};
use super::{AdminLevel, Shares};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Verb {
    Add,
    Modify,
    Delete,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Entity {
    Cluster,
    Account,
    User,
    Qos,
}

impl Entity {
    /// The plural sacctmgr's messages use (`Problem adding accounts`).
    pub fn plural(self) -> &'static str {
        match self {
            Entity::Cluster => "clusters",
            Entity::Account => "accounts",
            Entity::User => "users",
            Entity::Qos => "QOS",
        }
    }
}

/// Which records (`where ...`, or the names given to `add`). Empty lists
/// match everything.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Filter {
    pub names: Vec<String>,
    pub clusters: Vec<String>,
    /// `Account=` (for users: the associations' accounts).
    pub accounts: Vec<String>,
    /// `Parent=` in a `where` of accounts.
    pub parents: Vec<String>,
}

/// Association fields an add or modify sets.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AssocEdit {
    pub shares: Option<Shares>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "super::limits::double_option"
    )]
    pub priority: Edit<u32>,
    pub limits: LimitsEdit,
    pub qos: Option<ListEdit>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "super::limits::double_option"
    )]
    pub default_qos: Edit<String>,
    /// `Parent=`: an account's parent (add), or where it moves (modify).
    pub parent: Option<String>,
}

impl AssocEdit {
    pub fn is_empty(&self) -> bool {
        *self == AssocEdit::default()
    }

    /// sacctmgr's settings lines for the association part.
    pub fn lines(&self, out: &mut Vec<String>) {
        match self.shares {
            Some(Shares::Parent) => out.push("  Fairshare     = parent".into()),
            Some(Shares::Raw(n)) => out.push(format!("  Fairshare     = {n}")),
            None => {}
        }
        self.limits.lines(out);
        if let Some(p) = &self.parent {
            out.push(format!("  Parent        = {p}"));
        }
        match self.priority {
            Some(None) => out.push("  Priority      = NONE".into()),
            Some(Some(p)) => out.push(format!("  Priority      = {p}")),
            None => {}
        }
        if let Some(q) = &self.qos {
            out.push(format!("  QOS           = {}", q.text()));
        }
        match &self.default_qos {
            Some(None) => out.push("  DefQOS        = NONE".into()),
            Some(Some(q)) => out.push(format!("  DefQOS        = {q}")),
            None => {}
        }
    }
}

/// Everything an add or modify may set.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    pub description: Option<String>,
    pub organization: Option<String>,
    pub default_account: Option<String>,
    pub admin_level: Option<AdminLevel>,
    pub assoc: AssocEdit,
    pub qos: QosEdit,
}

/// One sacctmgr change.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AcctRequest {
    pub verb: Verb,
    pub entity: Entity,
    pub filter: Filter,
    pub set: Settings,
}
