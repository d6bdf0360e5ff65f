//! Associations and QOS on real daemons: sacctmgr's changes and views in
//! each output mode, the commit prompt, what AccountingStorageEnforce
//! refuses at submit, default accounts, a GrpJobs limit holding a job
//! with Slurm's reason until the first ends, and the database surviving
//! a controller restart.
//!
//! The test that submits as an ordinary user makes one
//! (`canopy-assoc`); that needs root, as CI has (see `common::require`).

mod common;

use std::path::Path;
use std::process::Output;
use std::time::Duration;

use common::{gid_of, require, user, Cluster};

const ENFORCE: &str = "AccountingStorageEnforce=associations,limits,qos\n";

fn out(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn ok(c: &Cluster, dir: &Path, args: &[&str]) -> String {
    let o = c.cli(dir, "sacctmgr", args);
    assert!(
        o.status.success(),
        "sacctmgr {args:?}: {}{}",
        out(&o),
        err(&o)
    );
    out(&o)
}

#[test]
fn sacctmgr_adds_modifies_shows_and_deletes_in_every_output_mode() {
    let c = Cluster::start_with(1, 2, 30, ENFORCE);
    let d = c.dir.path();
    let added = ok(
        &c,
        d,
        &[
            "-i",
            "add",
            "account",
            "science",
            "Description=sci",
            "Organization=lab",
        ],
    );
    assert_eq!(
        added,
        " Adding Account(s)\n  science\n Settings\n  Description     = sci\n  Organization    = lab\n Associations\n  A = science    C = test      \n"
    );
    let added = ok(
        &c,
        d,
        &[
            "-i",
            "add",
            "account",
            "chem",
            "parent=science",
            "fairshare=30",
            "GrpJobs=4",
            "GrpTRES=cpu=8,mem=2G",
        ],
    );
    assert!(added.contains(" Settings\n  Fairshare     = 30\n  GrpJobs       = 4\n  GrpTRES       = cpu=8,mem=2G\n  Parent        = science\n"), "{added}");
    // The same again: nothing to do, exit 0.
    assert_eq!(
        ok(&c, d, &["-i", "add", "account", "chem"]),
        " Nothing new added.\n"
    );

    // The default table: right-aligned columns under dashes.
    let table = ok(&c, d, &["show", "account"]);
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(
        lines[0],
        "   Account                Descr                  Org "
    );
    assert_eq!(
        lines[1],
        "---------- -------------------- -------------------- "
    );
    assert!(
        lines.contains(&"      chem                 chem              science "),
        "{table}"
    );
    assert!(
        lines.contains(&"   science                  sci                  lab "),
        "{table}"
    );
    // -P: no trailing bar; -p: one; -n: no header.
    let p2 = ok(
        &c,
        d,
        &[
            "-n",
            "-P",
            "show",
            "assoc",
            "format=account,parentname,share,grpjobs,grptres",
            "where",
            "account=chem",
        ],
    );
    assert_eq!(p2, "chem|science|30|4|cpu=8,mem=2G\n");
    let p1 = ok(
        &c,
        d,
        &["-p", "show", "qos", "format=name,priority,maxwall"],
    );
    assert_eq!(p1, "Name|Priority|MaxWall|\nnormal|0||\n");

    // Modify: where ... set ..., and -1 clears.
    let m = ok(
        &c,
        d,
        &[
            "-i",
            "modify",
            "account",
            "where",
            "name=chem",
            "set",
            "GrpJobs=-1",
            "MaxWall=1:00:00",
        ],
    );
    assert_eq!(
        m,
        " Modified account associations...\n  C = test       A = chem of science\n"
    );
    let p2 = ok(
        &c,
        d,
        &[
            "-n",
            "-P",
            "show",
            "assoc",
            "where",
            "account=chem",
            "format=grpjobs,maxwall",
        ],
    );
    assert_eq!(p2, "|01:00:00\n");

    // A QOS, a user with it, and the tree view.
    ok(
        &c,
        d,
        &[
            "-i",
            "add",
            "qos",
            "high",
            "Priority=100",
            "MaxJobsPerUser=2",
            "Flags=DenyOnLimit",
        ],
    );
    let q = ok(
        &c,
        d,
        &[
            "-n",
            "-P",
            "show",
            "qos",
            "high",
            "format=name,priority,maxjobspu,flags",
        ],
    );
    assert_eq!(q, "high|100|2|DenyOnLimit\n");
    let u = ok(
        &c,
        d,
        &[
            "-i",
            "add",
            "user",
            "root",
            "account=chem",
            "qos=normal,high",
        ],
    );
    assert!(
        u.contains(" Associations =\n  U = root      A = chem       C = test      \n"),
        "{u}"
    );
    let tree = ok(
        &c,
        d,
        &[
            "-n",
            "-P",
            "show",
            "assoc",
            "tree",
            "format=account,user,qos",
        ],
    );
    assert!(
        tree.contains("  chem||normal\n   chem|root|high,normal\n"),
        "{tree}"
    );
    let users = ok(&c, d, &["-P", "show", "user"]);
    assert_eq!(users, "User|Def Acct|Admin\nroot|root|Administrator\n");

    // Without -i: the change is shown, then asked about; no commits nothing.
    let o = c.cli_with_input(d, "sacctmgr", &["add", "account", "bio"], "n\n");
    assert!(o.status.success(), "{}", err(&o));
    let text = out(&o);
    assert!(text.contains(" Adding Account(s)\n  bio\n"), "{text}");
    assert!(text.contains("Would you like to commit changes? (You have 30 seconds to decide)\n(N/y): \n Changes Discarded\n"), "{text}");
    assert_eq!(ok(&c, d, &["-n", "-P", "show", "account", "bio"]), "");
    let o = c.cli_with_input(d, "sacctmgr", &["add", "account", "bio"], "y\n");
    assert!(o.status.success(), "{}", err(&o));
    assert_eq!(
        ok(
            &c,
            d,
            &["-n", "-P", "show", "account", "bio", "format=account"]
        ),
        "bio\n"
    );

    // Delete, and Slurm's refusals (exit 1, on stderr).
    assert_eq!(
        ok(&c, d, &["-i", "delete", "account", "bio"]),
        " Deleting accounts...\n  bio\n"
    );
    let o = c.cli(d, "sacctmgr", &["-i", "delete", "account", "root"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        err(&o).contains("You are not allowed to remove the root account."),
        "{}",
        err(&o)
    );
    let o = c.cli(
        d,
        "sacctmgr",
        &["-i", "add", "user", "nobody", "account=nosuch"],
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(
        err(&o).contains(" This account 'nosuch' doesn't exist."),
        "{}",
        err(&o)
    );
    let o = c.cli(d, "sacctmgr", &["-i", "add", "frobnicate"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        err(&o).starts_with("No valid entity in add command"),
        "{}",
        err(&o)
    );
}

#[test]
fn enforcement_refuses_jobs_without_an_association_and_applies_default_accounts() {
    if !require(nix::unistd::Uid::effective().is_root(), "root") {
        return;
    }
    let name = "canopy-assoc";
    let uid = user(name);
    let c = Cluster::start_with(1, 2, 30, ENFORCE);
    let home = tempfile::tempdir().unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(home.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    }
    let as_user = |cmd: &str, args: &[&str]| {
        common::run_as(&c, (uid, gid_of(uid)), home.path(), &c.conf, cmd, args)
    };
    let sbatch = ["--parsable", "-o", "/dev/null", "--wrap", "true"];
    // No association at all.
    let o = as_user("sbatch", &sbatch);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        err(&o).contains("Invalid account or account/partition combination specified"),
        "{}",
        err(&o)
    );
    // A user may not change the database.
    let o = as_user("sacctmgr", &["-i", "add", "account", "mine"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        err(&o),
        " Problem adding accounts: Access/permission denied\n"
    );

    let d = c.dir.path();
    ok(&c, d, &["-i", "add", "account", "proj"]);
    ok(&c, d, &["-i", "add", "account", "other"]);
    ok(&c, d, &["-i", "add", "qos", "high"]);
    ok(&c, d, &["-i", "add", "user", name, "account=proj"]);
    // Now it runs, charged to the default account, under `normal`.
    let o = as_user("sbatch", &sbatch);
    assert!(o.status.success(), "{}", err(&o));
    let id: u32 = out(&o).trim().parse().unwrap();
    let j = c.job(id).unwrap();
    assert_eq!((j.account.as_str(), j.qos.as_str()), ("proj", "normal"));
    let sq = c.cli(
        d,
        "squeue",
        &["-h", "-t", "all", "-j", &id.to_string(), "-o", "%a %q"],
    );
    assert_eq!(out(&sq), "proj normal\n");
    let sc = c.cli(d, "scontrol", &["show", "job", &id.to_string()]);
    assert!(out(&sc).contains("Account=proj QOS=normal"), "{}", out(&sc));
    // An account it has no association in; a QOS it may not use.
    let o = as_user("sbatch", &["-A", "other", "--wrap", "true"]);
    assert!(
        err(&o).contains("Invalid account or account/partition combination specified"),
        "{}",
        err(&o)
    );
    let o = as_user("sbatch", &["-q", "high", "--wrap", "true"]);
    assert!(err(&o).contains("Invalid qos specification"), "{}", err(&o));
    // Once allowed, it is.
    ok(&c, d, &["-i", "modify", "user", name, "set", "qos+=high"]);
    let o = as_user(
        "sbatch",
        &[
            "--parsable",
            "-o",
            "/dev/null",
            "-q",
            "high",
            "--wrap",
            "true",
        ],
    );
    assert!(o.status.success(), "{}", err(&o));
    // A submit limit refuses with Slurm's words.
    ok(
        &c,
        d,
        &["-i", "modify", "user", name, "set", "MaxSubmitJobs=0"],
    );
    let o = as_user("sbatch", &sbatch);
    assert!(
        err(&o).contains(
            "Job violates accounting/QOS policy (job submit limit, user's size and/or time limits)"
        ),
        "{}",
        err(&o)
    );
    // An AdminLevel=Operator user may change the database.
    ok(
        &c,
        d,
        &["-i", "modify", "user", name, "set", "AdminLevel=Operator"],
    );
    let o = as_user("sacctmgr", &["-i", "add", "account", "mine"]);
    assert!(o.status.success(), "{}", err(&o));
}

#[test]
fn a_grpjobs_limit_holds_the_second_job_until_the_first_ends_and_survives_a_restart() {
    let mut c = Cluster::start_with(1, 2, 30, ENFORCE);
    let d = c.dir.path().to_path_buf();
    ok(&c, &d, &["-i", "add", "account", "g", "GrpJobs=1"]);
    ok(&c, &d, &["-i", "add", "user", "root", "account=g"]);
    let run = |secs: u32| {
        c.sbatch(
            &d,
            &[
                "-A",
                "g",
                "-o",
                "/dev/null",
                "--wrap",
                &format!("sleep {secs}"),
            ],
        )
    };
    let first = run(4);
    let second = run(1);
    c.wait_for(Duration::from_secs(20), "the first job running", |c| {
        c.job(first)
            .is_some_and(|j| j.state == canopy::wire::types::JobState::Running)
    });
    c.wait_for(Duration::from_secs(10), "the second held by GrpJobs", |c| {
        c.job(second)
            .is_some_and(|j| j.reason == "AssocGrpJobsLimit")
    });
    let r = c.cli(
        &d,
        "squeue",
        &["-h", "-j", &second.to_string(), "-o", "%T %r"],
    );
    assert_eq!(out(&r), "PENDING AssocGrpJobsLimit\n");

    // A restart keeps the database, and counts the running job again.
    c.kill_ctld();
    c.start_ctld();
    c.wait_for(Duration::from_secs(30), "the controller back", |c| {
        c.job(first).is_some()
    });
    let shown = ok(
        &c,
        &d,
        &[
            "-n",
            "-P",
            "show",
            "assoc",
            "where",
            "account=g",
            "user=",
            "format=account,grpjobs",
        ],
    );
    assert!(shown.starts_with("g|1\n"), "{shown}");
    if c.job(first)
        .is_some_and(|j| j.state == canopy::wire::types::JobState::Running)
    {
        c.wait_for(Duration::from_secs(10), "the second still held", |c| {
            c.job(second)
                .is_some_and(|j| j.reason == "AssocGrpJobsLimit")
        });
    }
    // When the first ends, the second starts.
    c.wait_done(first, Duration::from_secs(30));
    let done = c.wait_done(second, Duration::from_secs(30));
    assert_eq!(done.state, canopy::wire::types::JobState::Completed);
}
