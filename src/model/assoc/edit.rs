//! Changes to the association database: add, modify and (in
//! `delete.rs`) delete of
//! clusters, accounts, users and QOS, each with Slurm's refusals and the
//! lines sacctmgr prints. Pure: each takes the database and returns the
//! new one (or the refusal); the caller decides whether to keep it (a
//! change not yet confirmed at sacctmgr's prompt is not kept).

use std::collections::BTreeSet;

use super::delete;
use super::request::{AcctRequest, AssocEdit, Entity, Filter, Settings, Verb};
use super::{Account, Assoc, AssocDb, AssocKey, Qos, User, ROOT};

/// What a change printed: its lines for sacctmgr's standard output.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outcome {
    pub lines: Vec<String>,
    /// Whether anything changed (`Nothing new added.` and the like
    /// change nothing, and exit 0 as in Slurm).
    pub changed: bool,
}

/// A refused change: the lines sacctmgr prints on standard error (it
/// exits 1).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", .lines.join("\n"))]
pub struct Refused {
    pub lines: Vec<String>,
}

pub(super) fn refuse<T>(line: impl Into<String>) -> Result<T, Refused> {
    Err(Refused {
        lines: vec![line.into()],
    })
}

pub(super) fn nothing(line: &str) -> Outcome {
    Outcome {
        lines: vec![line.to_string()],
        changed: false,
    }
}

/// Apply `req` to a copy of `db`. `active` lists an association's jobs
/// still pending or running (such associations cannot be removed).
pub fn apply(
    db: &AssocDb,
    req: &AcctRequest,
    active: &dyn Fn(&AssocKey) -> Vec<u32>,
) -> Result<(AssocDb, Outcome), Refused> {
    let mut new = db.clone();
    let out = match (req.verb, req.entity) {
        (Verb::Add, Entity::Cluster) => add_cluster(&mut new, &req.filter, &req.set)?,
        (Verb::Add, Entity::Account) => add_account(&mut new, &req.filter, &req.set)?,
        (Verb::Add, Entity::User) => add_user(&mut new, &req.filter, &req.set)?,
        (Verb::Add, Entity::Qos) => add_qos(&mut new, &req.filter, &req.set)?,
        (Verb::Modify, Entity::Cluster) => modify_cluster(&mut new, &req.filter, &req.set)?,
        (Verb::Modify, Entity::Account) => modify_account(&mut new, &req.filter, &req.set)?,
        (Verb::Modify, Entity::User) => modify_user(&mut new, &req.filter, &req.set)?,
        (Verb::Modify, Entity::Qos) => modify_qos(&mut new, &req.filter, &req.set)?,
        (Verb::Delete, Entity::Cluster) => delete::cluster(&mut new, &req.filter, active)?,
        (Verb::Delete, Entity::Account) => delete::account(&mut new, &req.filter, active)?,
        (Verb::Delete, Entity::User) => delete::user(&mut new, &req.filter, active)?,
        (Verb::Delete, Entity::Qos) => delete::qos(&mut new, &req.filter)?,
    };
    Ok((new, out))
}

pub(super) fn matches(list: &[String], v: &str) -> bool {
    list.is_empty() || list.iter().any(|x| x.eq_ignore_ascii_case(v))
}

/// Every QOS an edit names must exist.
fn check_qos(db: &AssocDb, e: &AssocEdit) -> Result<(), Refused> {
    let mut names: Vec<&String> = e.qos.iter().flat_map(|q| q.names()).collect();
    if let Some(Some(d)) = &e.default_qos {
        names.push(d);
    }
    for n in names {
        if !db.qos.contains_key(n) {
            return refuse(format!(
                " Invalid qos specification: QOS '{n}' does not exist"
            ));
        }
    }
    Ok(())
}

/// A set DefaultQOS must be one of the QOS the association may use.
fn check_default_qos(db: &AssocDb, key: &AssocKey) -> Result<(), Refused> {
    if let Some(d) = db.assocs.get(key).and_then(|a| a.default_qos.clone()) {
        if !db.allowed_qos(key).contains(&d) {
            return refuse(format!(
                " Error with request: Default QOS '{d}' is not in the QOS list of {}",
                assoc_object(db, key)
            ));
        }
    }
    Ok(())
}

/// Apply the association part of an edit to one association;
/// `inherited` is the QOS list it has when it has none of its own (what
/// `QOS+=`/`QOS-=` start from).
fn edit_assoc(a: &mut Assoc, e: &AssocEdit, inherited: BTreeSet<String>) {
    if let Some(s) = e.shares {
        a.shares = s;
    }
    if let Some(p) = e.priority {
        a.priority = p;
    }
    e.limits.apply(&mut a.limits);
    if let Some(q) = &e.qos {
        let mut list = a.qos.clone().unwrap_or(inherited);
        q.apply(&mut list);
        a.qos = Some(list);
    }
    if let Some(d) = &e.default_qos {
        a.default_qos = d.clone();
    }
}

/// `C = cl         A = acct                 U = user` as slurmdbd names an
/// association in its replies.
pub fn assoc_object(db: &AssocDb, k: &AssocKey) -> String {
    if k.is_user() {
        format!(
            "C = {:<10} A = {:<20} U = {:<9}",
            k.cluster, k.account, k.user
        )
    } else {
        match db.assocs.get(k).and_then(|a| a.parent.clone()) {
            Some(p) => format!("C = {:<10} A = {} of {p}", k.cluster, k.account),
            None => format!("C = {:<10} A = {}", k.cluster, k.account),
        }
    }
}

fn clusters_for(db: &AssocDb, f: &Filter) -> Result<Vec<String>, Refused> {
    if f.clusters.is_empty() {
        return Ok(db.clusters.iter().cloned().collect());
    }
    for c in &f.clusters {
        if !db.clusters.contains(c) {
            return refuse(format!(" This cluster {c} doesn't exist.\n        Contact your admin to add it to accounting."));
        }
    }
    Ok(f.clusters.clone())
}

fn add_cluster(db: &mut AssocDb, f: &Filter, s: &Settings) -> Result<Outcome, Refused> {
    if f.names.is_empty() {
        return refuse(" Need name of cluster to add.");
    }
    check_qos(db, &s.assoc)?;
    let mut lines = Vec::new();
    let mut added = Vec::new();
    for name in &f.names {
        if db.clusters.contains(name) {
            lines.push(format!(" This cluster {name} already exists.  Not adding."));
        } else {
            added.push(name.clone());
        }
    }
    if added.is_empty() {
        return Ok(Outcome {
            lines,
            changed: false,
        });
    }
    lines.push(" Adding Cluster(s)".into());
    for name in &added {
        lines.push(format!("  Name           = {name}"));
        db.ensure_cluster(name);
        if let Some(root) = db.assocs.get_mut(&AssocKey::account(name, ROOT)) {
            edit_assoc(root, &s.assoc, BTreeSet::new());
        }
        check_default_qos(db, &AssocKey::account(name, ROOT))?;
    }
    if !s.assoc.is_empty() {
        lines.push(" Setting".into());
        lines.push("  Default Limits:".into());
        s.assoc.lines(&mut lines);
    }
    Ok(Outcome {
        lines,
        changed: true,
    })
}

fn add_account(db: &mut AssocDb, f: &Filter, s: &Settings) -> Result<Outcome, Refused> {
    if f.names.is_empty() {
        return refuse(" Need name of account to add.");
    }
    if f.names.iter().any(|n| n.is_empty()) {
        return refuse(" No blank names are allowed when adding.");
    }
    check_qos(db, &s.assoc)?;
    let clusters = clusters_for(db, f)?;
    if clusters.is_empty() {
        return refuse(
            "  Can't add accounts, no cluster defined yet.\n Please contact your administrator.",
        );
    }
    let parent = s.assoc.parent.clone().unwrap_or_else(|| ROOT.to_string());
    let mut new_accounts = Vec::new();
    let mut assoc_lines = Vec::new();
    let mut errors = Vec::new();
    for name in &f.names {
        if !db.accounts.contains_key(name) {
            let organization = match &s.organization {
                Some(o) => o.clone(),
                None if parent != ROOT => parent.clone(),
                None => name.clone(),
            };
            db.accounts.insert(
                name.clone(),
                Account {
                    name: name.clone(),
                    description: s.description.clone().unwrap_or_else(|| name.clone()),
                    organization,
                },
            );
            new_accounts.push(name.clone());
        }
        for c in &clusters {
            if db.assocs.contains_key(&AssocKey::account(c, name)) {
                continue;
            }
            if !db.assocs.contains_key(&AssocKey::account(c, &parent)) || parent == *name {
                errors.push(format!(
                    " Parent account '{parent}' doesn't exist on cluster {c}\n        Contact your admin to add this account."
                ));
                continue;
            }
            let mut a = Assoc::new(db.take_assoc_id(), Some(parent.clone()));
            let mut e = s.assoc.clone();
            e.parent = None;
            edit_assoc(&mut a, &e, db.allowed_qos(&AssocKey::account(c, &parent)));
            let key = AssocKey::account(c, name);
            db.assocs.insert(key.clone(), a);
            check_default_qos(db, &key)?;
            assoc_lines.push(format!("  A = {:<10.10} C = {:<10.10}", name, c));
        }
    }
    if !errors.is_empty() {
        return Err(Refused { lines: errors });
    }
    if new_accounts.is_empty() && assoc_lines.is_empty() {
        return Ok(nothing(" Nothing new added."));
    }
    let mut lines = Vec::new();
    if !new_accounts.is_empty() {
        lines.push(" Adding Account(s)".into());
        lines.extend(new_accounts.iter().map(|n| format!("  {n}")));
        lines.push(" Settings".into());
        lines.push(format!(
            "  Description     = {}",
            s.description.as_deref().unwrap_or("Account Name")
        ));
        lines.push(format!(
            "  Organization    = {}",
            s.organization.as_deref().unwrap_or("Parent/Account Name")
        ));
    }
    if !assoc_lines.is_empty() {
        lines.push(" Associations".into());
        lines.extend(assoc_lines);
    }
    if !s.assoc.is_empty() {
        lines.push(" Settings".into());
        s.assoc.lines(&mut lines);
    }
    Ok(Outcome {
        lines,
        changed: true,
    })
}

fn no_account(a: &str) -> String {
    format!(" This account '{a}' doesn't exist.\n        Contact your admin to add this account.")
}

fn add_user(db: &mut AssocDb, f: &Filter, s: &Settings) -> Result<Outcome, Refused> {
    if f.names.is_empty() {
        return refuse(" Need name of user to add.");
    }
    if f.names.iter().any(|n| n.is_empty()) {
        return refuse(" No blank names are allowed when adding.");
    }
    let mut accounts = f.accounts.clone();
    if accounts.is_empty() {
        match &s.default_account {
            Some(d) => accounts.push(d.clone()),
            None => return refuse(" Need name of account to add user to."),
        }
    }
    check_qos(db, &s.assoc)?;
    let clusters = clusters_for(db, f)?;
    let mut errors = Vec::new();
    for a in accounts.iter().chain(s.default_account.iter()) {
        if !db.accounts.contains_key(a) {
            errors.push(no_account(a));
        }
    }
    if !errors.is_empty() {
        errors.dedup();
        return Err(Refused { lines: errors });
    }
    let mut new_users = Vec::new();
    let mut assoc_lines = Vec::new();
    for name in &f.names {
        if !db.users.contains_key(name) {
            let default_account = s
                .default_account
                .clone()
                .unwrap_or_else(|| accounts[0].clone());
            db.users.insert(
                name.clone(),
                User {
                    name: name.clone(),
                    default_account,
                    admin_level: s.admin_level.unwrap_or_default(),
                },
            );
            new_users.push(name.clone());
        }
        for a in &accounts {
            for c in &clusters {
                if !db.assocs.contains_key(&AssocKey::account(c, a)) {
                    errors.push(format!(
                        " This account '{a}' doesn't exist on cluster {c}\n        Contact your admin to add this account."
                    ));
                    continue;
                }
                let key = AssocKey::user(c, a, name);
                if db.assocs.contains_key(&key) {
                    continue;
                }
                let mut assoc = Assoc::new(db.take_assoc_id(), None);
                edit_assoc(
                    &mut assoc,
                    &s.assoc,
                    db.allowed_qos(&AssocKey::account(c, a)),
                );
                db.assocs.insert(key.clone(), assoc);
                check_default_qos(db, &key)?;
                assoc_lines.push(format!(
                    "  U = {:<9.9} A = {:<10.10} C = {:<10.10}",
                    name, a, c
                ));
            }
        }
    }
    if !errors.is_empty() {
        return Err(Refused { lines: errors });
    }
    if new_users.is_empty() && assoc_lines.is_empty() {
        return Ok(nothing(" Nothing new added."));
    }
    if assoc_lines.is_empty() {
        return refuse(" No associations or wckeys created.");
    }
    let mut lines = Vec::new();
    if !new_users.is_empty() {
        lines.push(" Adding User(s)".into());
        lines.extend(new_users.iter().map(|n| format!("  {n}")));
        if s.default_account.is_some() || s.admin_level.is_some() {
            lines.push(" Settings =".into());
        }
        if let Some(d) = &s.default_account {
            lines.push(format!("  Default Account = {d}"));
        }
        if let Some(l) = s.admin_level {
            lines.push(format!("  Admin Level     = {l}"));
        }
    }
    lines.push(" Associations =".into());
    lines.extend(assoc_lines);
    if !s.assoc.is_empty() {
        lines.push(" Non Default Settings".into());
        s.assoc.lines(&mut lines);
    }
    Ok(Outcome {
        lines,
        changed: true,
    })
}

fn add_qos(db: &mut AssocDb, f: &Filter, s: &Settings) -> Result<Outcome, Refused> {
    if f.names.is_empty() {
        return refuse(" Need name of qos to add.");
    }
    if let Some(p) = &s.qos.preempt {
        for n in p.names() {
            if !db.qos.contains_key(n) && !f.names.contains(n) {
                return refuse(format!(
                    " Invalid qos specification: QOS '{n}' does not exist"
                ));
            }
        }
    }
    let mut added = Vec::new();
    for name in &f.names {
        if db.qos.contains_key(name) {
            continue;
        }
        let id = db.next_qos_id.max(2);
        db.next_qos_id = id + 1;
        let mut q = Qos::new(id, name);
        q.description = s.description.clone().unwrap_or_else(|| name.clone());
        s.qos.apply(&mut q);
        db.qos.insert(name.clone(), q);
        added.push(name.clone());
    }
    if added.is_empty() {
        return Ok(nothing(" Nothing new added."));
    }
    let mut lines = vec![" Adding QOS(s)".to_string()];
    lines.extend(added.iter().map(|n| format!("  {n}")));
    lines.push(" Settings".into());
    lines.push(format!(
        "  Description    = {}",
        s.description.as_deref().unwrap_or("QOS Name")
    ));
    let mut rest = s.qos.clone();
    rest.description = None;
    rest.lines(&mut lines);
    Ok(Outcome {
        lines,
        changed: true,
    })
}

/// The associations a modify or delete of `entity` selects.
pub(super) fn selected(db: &AssocDb, entity: Entity, f: &Filter) -> Vec<AssocKey> {
    db.assocs
        .iter()
        .filter(|(k, a)| {
            matches(&f.clusters, &k.cluster)
                && match entity {
                    Entity::Account => {
                        !k.is_user()
                            && matches(&f.names, &k.account)
                            && (f.parents.is_empty()
                                || a.parent.as_deref().is_some_and(|p| matches(&f.parents, p)))
                    }
                    Entity::User => {
                        k.is_user()
                            && matches(&f.names, &k.user)
                            && matches(&f.accounts, &k.account)
                    }
                    Entity::Cluster => {
                        !k.is_user() && k.account == ROOT && matches(&f.names, &k.cluster)
                    }
                    Entity::Qos => false,
                }
        })
        .map(|(k, _)| k.clone())
        .collect()
}

pub(super) fn modified(header: &str, objects: Vec<String>, lines: &mut Vec<String>) {
    lines.push(header.into());
    lines.extend(objects.into_iter().map(|o| format!("  {o}")));
}

/// Apply the association part of a modify to `keys`, checking the result.
fn modify_assocs(
    db: &mut AssocDb,
    keys: &[AssocKey],
    e: &AssocEdit,
) -> Result<Vec<String>, Refused> {
    check_qos(db, e)?;
    let mut objects = Vec::new();
    for k in keys {
        if let Some(p) = &e.parent {
            move_parent(db, k, p)?;
        }
        let inherited = db.allowed_qos(k);
        if let Some(a) = db.assocs.get_mut(k) {
            let mut e = e.clone();
            e.parent = None;
            edit_assoc(a, &e, inherited);
        }
        check_default_qos(db, k)?;
        objects.push(assoc_object(db, k));
    }
    Ok(objects)
}

/// Move an account's association under `parent` (same cluster).
fn move_parent(db: &mut AssocDb, k: &AssocKey, parent: &str) -> Result<(), Refused> {
    if k.is_user() || k.account == ROOT {
        return refuse(" Error with request: Only accounts can move to a new parent");
    }
    if !db
        .assocs
        .contains_key(&AssocKey::account(&k.cluster, parent))
    {
        return refuse(format!(
            " Error with request: Invalid parent account specified\n Parent account '{parent}' doesn't exist on cluster {}",
            k.cluster
        ));
    }
    // The new parent may not be the account itself or one below it.
    if db
        .ancestors(&k.cluster, parent)
        .iter()
        .any(|(a, _)| a.account == k.account)
    {
        return refuse(format!(
            " Error with request: You can't make an account be a child of it's self ({} under {parent})",
            k.account
        ));
    }
    if let Some(a) = db.assocs.get_mut(k) {
        a.parent = Some(parent.to_string());
    }
    Ok(())
}

fn no_set(s: &Settings) -> bool {
    *s == Settings::default()
}

fn modify_cluster(db: &mut AssocDb, f: &Filter, s: &Settings) -> Result<Outcome, Refused> {
    if no_set(s) {
        return refuse(" You didn't give me anything to set");
    }
    let keys = selected(db, Entity::Cluster, f);
    if keys.is_empty() {
        return Ok(nothing(" Nothing modified"));
    }
    modify_assocs(db, &keys, &s.assoc)?;
    let mut lines = vec![" Setting".to_string(), "  Default Limits:".to_string()];
    s.assoc.lines(&mut lines);
    let names: Vec<String> = keys.iter().map(|k| k.cluster.clone()).collect();
    modified(
        " Modified cluster defaults for associations...",
        names,
        &mut lines,
    );
    Ok(Outcome {
        lines,
        changed: true,
    })
}

fn modify_account(db: &mut AssocDb, f: &Filter, s: &Settings) -> Result<Outcome, Refused> {
    if no_set(s) {
        return refuse(" You didn't give me anything to set");
    }
    let mut lines = Vec::new();
    let mut changed = false;
    if s.description.is_some() || s.organization.is_some() {
        let names: Vec<String> = db
            .accounts
            .keys()
            .filter(|n| matches(&f.names, n))
            .filter(|n| {
                f.parents.is_empty()
                    || selected(db, Entity::Account, f)
                        .iter()
                        .any(|k| &k.account == *n)
            })
            .cloned()
            .collect();
        if names.is_empty() {
            lines.push(" Nothing modified".into());
        } else {
            for n in &names {
                if let Some(a) = db.accounts.get_mut(n) {
                    if let Some(d) = &s.description {
                        a.description = d.clone();
                    }
                    if let Some(o) = &s.organization {
                        a.organization = o.clone();
                    }
                }
            }
            modified(" Modified accounts...", names, &mut lines);
            changed = true;
        }
    }
    if !s.assoc.is_empty() {
        let keys = selected(db, Entity::Account, f);
        if keys.is_empty() {
            lines.push(" Nothing modified".into());
        } else {
            let objects = modify_assocs(db, &keys, &s.assoc)?;
            modified(" Modified account associations...", objects, &mut lines);
            changed = true;
        }
    }
    Ok(Outcome { lines, changed })
}

fn modify_user(db: &mut AssocDb, f: &Filter, s: &Settings) -> Result<Outcome, Refused> {
    if no_set(s) {
        return refuse(" You didn't give me anything to set");
    }
    let mut lines = Vec::new();
    let mut changed = false;
    if s.default_account.is_some() || s.admin_level.is_some() {
        let names: Vec<String> = db
            .users
            .keys()
            .filter(|n| matches(&f.names, n))
            .filter(|n| {
                f.accounts.is_empty()
                    || db
                        .assocs
                        .keys()
                        .any(|k| &k.user == *n && matches(&f.accounts, &k.account))
            })
            .cloned()
            .collect();
        if let Some(d) = &s.default_account {
            for n in &names {
                if !db.assocs.keys().any(|k| &k.user == n && &k.account == d) {
                    return refuse(format!(
                        " Error with request: Invalid account or account/partition combination specified\n If you are changing a users default account make sure they have an association with that account ({n} has none in {d})."
                    ));
                }
            }
        }
        if names.is_empty() {
            lines.push(" Nothing modified".into());
        } else {
            for n in &names {
                if let Some(u) = db.users.get_mut(n) {
                    if let Some(d) = &s.default_account {
                        u.default_account = d.clone();
                    }
                    if let Some(l) = s.admin_level {
                        u.admin_level = l;
                    }
                }
            }
            modified(" Modified users...", names, &mut lines);
            changed = true;
        }
    }
    if !s.assoc.is_empty() {
        if s.assoc.parent.is_some() {
            return refuse(" Error with request: Only accounts can move to a new parent");
        }
        let keys = selected(db, Entity::User, f);
        if keys.is_empty() {
            lines.push(" Nothing modified".into());
        } else {
            let objects = modify_assocs(db, &keys, &s.assoc)?;
            modified(" Modified user associations...", objects, &mut lines);
            changed = true;
        }
    }
    Ok(Outcome { lines, changed })
}

fn modify_qos(db: &mut AssocDb, f: &Filter, s: &Settings) -> Result<Outcome, Refused> {
    if s.qos.is_empty() && s.description.is_none() {
        return refuse(" You didn't give me anything to set");
    }
    if let Some(p) = &s.qos.preempt {
        for n in p.names() {
            if !db.qos.contains_key(n) {
                return refuse(format!(
                    " Invalid qos specification: QOS '{n}' does not exist"
                ));
            }
        }
    }
    let names: Vec<String> = db
        .qos
        .keys()
        .filter(|n| matches(&f.names, n))
        .cloned()
        .collect();
    if names.is_empty() {
        return Ok(nothing(" Nothing modified"));
    }
    for n in &names {
        if let Some(q) = db.qos.get_mut(n) {
            if let Some(d) = &s.description {
                q.description = d.clone();
            }
            s.qos.apply(q);
            if q.preempt.contains(n) {
                return refuse(format!(
                    " Error with request: QOS {n} can not preempt itself"
                ));
            }
        }
    }
    let mut lines = Vec::new();
    modified(" Modified qos...", names, &mut lines);
    Ok(Outcome {
        lines,
        changed: true,
    })
}
