//! Tree edits with Slurm's refusals and messages.

use super::edit::{apply, Outcome, Refused};
use super::request::{AcctRequest, AssocEdit, Entity, Filter, Settings, Verb};
use super::*;

fn db() -> AssocDb {
    let mut d = AssocDb::default();
    d.ensure_cluster("c1");
    d
}

fn req(verb: Verb, entity: Entity, names: &[&str]) -> AcctRequest {
    AcctRequest {
        verb,
        entity,
        filter: Filter {
            names: names.iter().map(|s| s.to_string()).collect(),
            ..Filter::default()
        },
        set: Settings::default(),
    }
}

fn run(d: &mut AssocDb, r: &AcctRequest) -> Result<Outcome, Refused> {
    let (new, out) = apply(d, r, &|_| Vec::new())?;
    *d = new;
    Ok(out)
}

fn add_account(d: &mut AssocDb, name: &str, parent: Option<&str>) {
    let mut r = req(Verb::Add, Entity::Account, &[name]);
    r.set.assoc.parent = parent.map(str::to_string);
    run(d, &r).unwrap();
}

fn add_user(d: &mut AssocDb, name: &str, accounts: &[&str]) -> Result<Outcome, Refused> {
    let mut r = req(Verb::Add, Entity::User, &[name]);
    r.filter.accounts = accounts.iter().map(|s| s.to_string()).collect();
    run(d, &r)
}

#[test]
fn a_new_database_has_normal_and_the_clusters_root() {
    let d = db();
    assert_eq!(d.qos["normal"].id, 1);
    assert!(d.assocs.contains_key(&AssocKey::account("c1", ROOT)));
    assert!(d.user_assoc("c1", ROOT, ROOT).is_some());
    assert_eq!(d.users[ROOT].admin_level, AdminLevel::Administrator);
}

#[test]
fn accounts_and_users_are_added_with_slurms_messages() {
    let mut d = db();
    let mut r = req(Verb::Add, Entity::Account, &["science"]);
    r.set.description = Some("sci".into());
    let out = run(&mut d, &r).unwrap();
    assert_eq!(
        out.lines,
        [
            " Adding Account(s)",
            "  science",
            " Settings",
            "  Description     = sci",
            "  Organization    = Parent/Account Name",
            " Associations",
            "  A = science    C = c1        ",
        ]
    );
    add_account(&mut d, "chem", Some("science"));
    assert_eq!(d.accounts["chem"].organization, "science");
    assert_eq!(d.ancestors("c1", "chem").len(), 3);
    let out = add_user(&mut d, "alice", &["chem"]).unwrap();
    assert_eq!(out.lines[0], " Adding User(s)");
    assert!(out.lines.contains(&" Associations =".to_string()));
    assert!(out
        .lines
        .contains(&"  U = alice     A = chem       C = c1        ".to_string()));
    assert_eq!(d.users["alice"].default_account, "chem");
    // Again: nothing new, exit 0.
    let out = add_user(&mut d, "alice", &["chem"]).unwrap();
    assert_eq!(out.lines, [" Nothing new added."]);
    assert!(!out.changed);
}

#[test]
fn refusals_name_what_is_wrong() {
    let mut d = db();
    let e = add_user(&mut d, "bob", &["nosuch"]).unwrap_err();
    assert!(
        e.lines[0].contains("This account 'nosuch' doesn't exist."),
        "{e:?}"
    );
    let mut r = req(Verb::Add, Entity::Account, &["x"]);
    r.set.assoc.parent = Some("nosuch".into());
    let e = run(&mut d, &r).unwrap_err();
    assert!(e.lines[0].contains("Parent account 'nosuch' doesn't exist on cluster c1"));
    let e = run(&mut d, &req(Verb::Delete, Entity::Account, &["root"])).unwrap_err();
    assert!(e.lines[0].contains("not allowed to remove the root account"));
    let e = run(&mut d, &req(Verb::Delete, Entity::User, &[])).unwrap_err();
    assert!(e.lines[0].contains("No conditions given to remove"));
    let mut r = req(Verb::Add, Entity::Account, &["y"]);
    r.set.assoc.qos = Some(ListEdit::Set(vec!["gold".into()]));
    assert!(run(&mut d, &r).unwrap_err().lines[0].contains("Invalid qos specification"));
}

#[test]
fn a_users_default_account_cannot_be_removed_while_they_keep_others() {
    let mut d = db();
    add_account(&mut d, "a", None);
    add_account(&mut d, "b", None);
    add_user(&mut d, "u", &["a", "b"]).unwrap();
    assert_eq!(d.users["u"].default_account, "a");
    let e = run(&mut d, &req(Verb::Delete, Entity::Account, &["a"])).unwrap_err();
    assert!(e.lines[0].contains("You can not remove the default account of a user"));
    // The other account goes, with the user's association in it.
    let out = run(&mut d, &req(Verb::Delete, Entity::Account, &["b"])).unwrap();
    assert_eq!(out.lines, [" Deleting accounts...", "  b"]);
    assert!(d.user_assoc("c1", "b", "u").is_none());
    // Now `a` is the user's only account: deleting it removes the user too.
    run(&mut d, &req(Verb::Delete, Entity::Account, &["a"])).unwrap();
    assert!(!d.users.contains_key("u"));
    // A default account must be one the user has.
    add_account(&mut d, "c", None);
    add_user(&mut d, "v", &["c"]).unwrap();
    let mut r = req(Verb::Modify, Entity::User, &["v"]);
    r.set.default_account = Some("root".into());
    assert!(run(&mut d, &r).unwrap_err().lines[0].contains("Invalid account"));
}

#[test]
fn accounts_with_jobs_are_not_removed() {
    let mut d = db();
    add_account(&mut d, "a", None);
    add_user(&mut d, "u", &["a"]).unwrap();
    let busy = |k: &AssocKey| if k.user == "u" { vec![7] } else { vec![] };
    let e = apply(&d, &req(Verb::Delete, Entity::Account, &["a"]), &busy).unwrap_err();
    assert_eq!(
        e.lines[0],
        " Error with request: Job(s) active, cancel job(s) before remove"
    );
    assert!(e.lines[1].contains("JobID = 7"));
}

#[test]
fn modify_moves_sets_limits_and_refuses_cycles() {
    let mut d = db();
    add_account(&mut d, "a", None);
    add_account(&mut d, "b", Some("a"));
    let mut r = req(Verb::Modify, Entity::Account, &["a"]);
    r.set.assoc.parent = Some("b".into());
    assert!(run(&mut d, &r).unwrap_err().lines[0].contains("child of it's self"));
    let mut r = req(Verb::Modify, Entity::Account, &["b"]);
    r.set.assoc = AssocEdit {
        parent: Some("root".into()),
        ..AssocEdit::default()
    };
    r.set.assoc.limits.grp_jobs = Some(Some(3));
    let out = run(&mut d, &r).unwrap();
    assert_eq!(out.lines[0], " Modified account associations...");
    assert_eq!(out.lines[1], "  C = c1         A = b of root");
    let b = &d.assocs[&AssocKey::account("c1", "b")];
    assert_eq!(b.limits.grp_jobs, Some(3));
    // `-1` clears.
    let mut r = req(Verb::Modify, Entity::Account, &["b"]);
    r.set.assoc.limits.grp_jobs = Some(None);
    run(&mut d, &r).unwrap();
    assert_eq!(
        d.assocs[&AssocKey::account("c1", "b")].limits.grp_jobs,
        None
    );
}

#[test]
fn qos_lists_default_qos_and_deletes() {
    let mut d = db();
    let mut r = req(Verb::Add, Entity::Qos, &["high"]);
    r.set.qos.priority = Some(Some(100));
    let out = run(&mut d, &r).unwrap();
    assert_eq!(out.lines[..3], [" Adding QOS(s)", "  high", " Settings"]);
    assert_eq!(d.qos["high"].id, 2);
    add_account(&mut d, "a", None);
    add_user(&mut d, "u", &["a"]).unwrap();
    let key = AssocKey::user("c1", "a", "u");
    assert_eq!(
        d.allowed_qos(&key).into_iter().collect::<Vec<_>>(),
        ["normal"]
    );
    let mut r = req(Verb::Modify, Entity::Account, &["a"]);
    r.set.assoc.qos = Some(ListEdit::Add(vec!["high".into()]));
    r.set.assoc.default_qos = Some(Some("high".into()));
    run(&mut d, &r).unwrap();
    assert_eq!(d.allowed_qos(&key).len(), 2);
    assert_eq!(d.default_qos(&key).as_deref(), Some("high"));
    // A default QOS outside the list is refused.
    let mut r = req(Verb::Modify, Entity::Account, &["a"]);
    r.set.assoc.qos = Some(ListEdit::Remove(vec!["high".into()]));
    assert!(run(&mut d, &r).is_err());
    // The default QOS of an association cannot be deleted.
    let e = run(&mut d, &req(Verb::Delete, Entity::Qos, &["high"])).unwrap_err();
    assert!(e.lines[0].contains("default qos"));
}

#[test]
fn the_tree_lists_accounts_then_their_users_then_sub_accounts() {
    let mut d = db();
    add_account(&mut d, "b", None);
    add_account(&mut d, "a", Some("b"));
    add_user(&mut d, "u", &["b"]).unwrap();
    let order: Vec<(String, String, usize)> = d
        .tree("c1")
        .into_iter()
        .map(|(k, _, depth)| (k.account.clone(), k.user.clone(), depth))
        .collect();
    let s = |a: &str, u: &str, n| (a.to_string(), u.to_string(), n);
    assert_eq!(
        order,
        [
            s("root", "", 0),
            s("root", "root", 1),
            s("b", "", 1),
            s("b", "u", 2),
            s("a", "", 2)
        ]
    );
}

/// `-1` (clear) is not lost on the wire: serde alone reads a stored
/// `Some(None)` back as `None`.
#[test]
fn a_clear_survives_the_wire() {
    let mut r = req(Verb::Modify, Entity::Account, &["a"]);
    r.set.assoc.limits.grp_jobs = Some(None);
    r.set.assoc.default_qos = Some(None);
    r.set.qos.priority = Some(Some(3));
    r.set.qos.max_wall = Some(None);
    let bytes = rmp_serde::to_vec_named(&r).unwrap();
    let back: AcctRequest = rmp_serde::from_slice(&bytes).unwrap();
    assert_eq!(back, r);
}
