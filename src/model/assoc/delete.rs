//! Removing clusters, accounts, users and QOS: what goes with them (the
//! associations below an account, users left with none), and Slurm's
//! refusals (jobs still active, a user's default account, an
//! association's default QOS).

use std::collections::BTreeSet;

use super::edit::{assoc_object, matches, modified, nothing, refuse, selected, Outcome, Refused};
use super::request::{Entity, Filter};
use super::{AssocDb, AssocKey, ROOT};

fn no_conditions() -> Result<Outcome, Refused> {
    refuse(" No conditions given to remove, not executing.")
}

/// Refuse removing associations that still have jobs.
fn check_active(keys: &[AssocKey], active: &dyn Fn(&AssocKey) -> Vec<u32>) -> Result<(), Refused> {
    let busy: Vec<String> = keys
        .iter()
        .flat_map(|k| {
            active(k).into_iter().map(move |id| {
                format!(
                    "  JobID = {id:<10} C = {:<10} A = {:<10} U = {:<9}",
                    k.cluster, k.account, k.user
                )
            })
        })
        .collect();
    if busy.is_empty() {
        return Ok(());
    }
    let mut lines =
        vec![" Error with request: Job(s) active, cancel job(s) before remove".to_string()];
    lines.extend(busy);
    Err(Refused { lines })
}

/// Remove `keys` and every association below the account ones among them.
fn remove_subtrees(db: &mut AssocDb, keys: &[AssocKey]) -> Vec<AssocKey> {
    let mut gone: BTreeSet<AssocKey> = BTreeSet::new();
    for k in keys {
        gone.insert(k.clone());
        if !k.is_user() {
            gone.extend(subtree(db, k));
        }
    }
    let removed: Vec<AssocKey> = gone.into_iter().collect();
    for k in &removed {
        db.assocs.remove(k);
    }
    removed
}

/// Every association below account association `k`.
fn subtree(db: &AssocDb, k: &AssocKey) -> Vec<AssocKey> {
    let mut out = Vec::new();
    let mut stack = vec![k.account.clone()];
    while let Some(acct) = stack.pop() {
        for (key, a) in &db.assocs {
            if key.cluster != k.cluster {
                continue;
            }
            if key.is_user() && key.account == acct {
                out.push(key.clone());
            } else if !key.is_user() && a.parent.as_deref() == Some(acct.as_str()) {
                out.push(key.clone());
                stack.push(key.account.clone());
            }
        }
        if out.len() > db.assocs.len() {
            break;
        }
    }
    out
}

/// Users whose default account would lose its last association while
/// they keep others (`db` is the database before the removal).
fn check_defaults(db: &AssocDb, removed: &[AssocKey]) -> Result<(), Refused> {
    let mut bad = Vec::new();
    for k in removed.iter().filter(|k| k.is_user()) {
        let Some(u) = db.users.get(&k.user) else {
            continue;
        };
        let left = |o: &&AssocKey| o.user == k.user && !removed.contains(o);
        let keeps_default = db
            .assocs
            .keys()
            .filter(left)
            .any(|o| o.account == u.default_account);
        let keeps_any = db.assocs.keys().any(|o| left(&o));
        if u.default_account == k.account && keeps_any && !keeps_default {
            bad.push(format!("  {}", assoc_object(db, k)));
        }
    }
    if bad.is_empty() {
        return Ok(());
    }
    let mut lines =
        vec![" Error with request: You can not remove the default account of a user".to_string()];
    lines.extend(bad);
    lines.push(" Please either remove the accounts listed above from list and resubmit,\n or change these users' default accounts to remove the account(s).\n Changes Discarded".into());
    Err(Refused { lines })
}

/// Users left without any association are removed with their last one.
fn drop_orphan_users(db: &mut AssocDb) {
    let keep: BTreeSet<String> = db
        .assocs
        .keys()
        .filter(|k| k.is_user())
        .map(|k| k.user.clone())
        .collect();
    db.users.retain(|n, _| keep.contains(n));
}

pub(super) fn cluster(
    db: &mut AssocDb,
    f: &Filter,
    active: &dyn Fn(&AssocKey) -> Vec<u32>,
) -> Result<Outcome, Refused> {
    if f.names.is_empty() {
        return no_conditions();
    }
    let names: Vec<String> = db
        .clusters
        .iter()
        .filter(|c| matches(&f.names, c))
        .cloned()
        .collect();
    if names.is_empty() {
        return Ok(nothing(" Nothing deleted"));
    }
    let keys: Vec<AssocKey> = db
        .assocs
        .keys()
        .filter(|k| names.contains(&k.cluster))
        .cloned()
        .collect();
    check_active(&keys, active)?;
    for k in &keys {
        db.assocs.remove(k);
    }
    for n in &names {
        db.clusters.remove(n);
    }
    drop_orphan_users(db);
    let mut lines = Vec::new();
    modified(" Deleting clusters...", names, &mut lines);
    Ok(Outcome {
        lines,
        changed: true,
    })
}

pub(super) fn account(
    db: &mut AssocDb,
    f: &Filter,
    active: &dyn Fn(&AssocKey) -> Vec<u32>,
) -> Result<Outcome, Refused> {
    if f.names.is_empty() && f.parents.is_empty() && f.clusters.is_empty() {
        return no_conditions();
    }
    if f.names.iter().any(|n| n == ROOT) {
        return refuse(
            " You are not allowed to remove the root account.\n Use remove cluster instead.",
        );
    }
    let keys = selected(db, Entity::Account, f);
    if keys.is_empty() {
        return Ok(nothing(" Nothing deleted"));
    }
    let objects: Vec<String> = keys.iter().map(|k| assoc_object(db, k)).collect();
    let mut trial = db.clone();
    let removed = remove_subtrees(&mut trial, &keys);
    check_active(&removed, active)?;
    check_defaults(db, &removed)?;
    *db = trial;
    // An account with no association left on any cluster is gone too
    // (`delete account` without `cluster=`).
    let mut accounts_gone = Vec::new();
    for k in &keys {
        if !db.assocs.keys().any(|o| o.account == k.account)
            && db.accounts.remove(&k.account).is_some()
        {
            accounts_gone.push(k.account.clone());
        }
    }
    drop_orphan_users(db);
    let mut lines = Vec::new();
    if f.clusters.is_empty() {
        modified(" Deleting accounts...", accounts_gone, &mut lines);
    } else {
        modified(" Deleting account associations...", objects, &mut lines);
    }
    Ok(Outcome {
        lines,
        changed: true,
    })
}

pub(super) fn user(
    db: &mut AssocDb,
    f: &Filter,
    active: &dyn Fn(&AssocKey) -> Vec<u32>,
) -> Result<Outcome, Refused> {
    if f.names.is_empty() && f.accounts.is_empty() && f.clusters.is_empty() {
        return no_conditions();
    }
    let keys = selected(db, Entity::User, f);
    if keys.is_empty() {
        return Ok(nothing(" Nothing deleted"));
    }
    check_active(&keys, active)?;
    let whole_users = f.accounts.is_empty() && f.clusters.is_empty();
    if !whole_users {
        check_defaults(db, &keys)?;
    }
    let objects: Vec<String> = keys.iter().map(|k| assoc_object(db, k)).collect();
    for k in &keys {
        db.assocs.remove(k);
    }
    let before: BTreeSet<String> = db.users.keys().cloned().collect();
    drop_orphan_users(db);
    let mut lines = Vec::new();
    if whole_users {
        let gone: Vec<String> = before
            .into_iter()
            .filter(|u| !db.users.contains_key(u))
            .collect();
        modified(" Deleting users...", gone, &mut lines);
    } else {
        modified(" Deleting user associations...", objects, &mut lines);
    }
    Ok(Outcome {
        lines,
        changed: true,
    })
}

pub(super) fn qos(db: &mut AssocDb, f: &Filter) -> Result<Outcome, Refused> {
    if f.names.is_empty() {
        return no_conditions();
    }
    let names: Vec<String> = db
        .qos
        .keys()
        .filter(|n| matches(&f.names, n))
        .cloned()
        .collect();
    if names.is_empty() {
        return Ok(nothing(" Nothing deleted"));
    }
    let defaults: Vec<String> = db
        .assocs
        .iter()
        .filter(|(_, a)| a.default_qos.as_ref().is_some_and(|d| names.contains(d)))
        .map(|(k, a)| {
            format!(
                "  {} DefQOS = {}",
                assoc_object(db, k),
                a.default_qos.clone().unwrap_or_default()
            )
        })
        .collect();
    if !defaults.is_empty() {
        let mut lines = vec![
            " Error with request: Can not remove the default qos of an association".to_string(),
        ];
        lines.extend(defaults);
        lines.push(" Please either remove the qos' listed above from list and resubmit,\n or change the default qos to remove the qos.\n Changes Discarded".into());
        return Err(Refused { lines });
    }
    for n in &names {
        db.qos.remove(n);
    }
    // Nothing may keep naming a QOS that is gone.
    for a in db.assocs.values_mut() {
        if let Some(q) = &mut a.qos {
            q.retain(|x| !names.contains(x));
        }
    }
    for q in db.qos.values_mut() {
        q.preempt.retain(|x| !names.contains(x));
    }
    let mut lines = Vec::new();
    modified(" Deleting QOS(s)...", names, &mut lines);
    Ok(Outcome {
        lines,
        changed: true,
    })
}
