//! Many users on one cluster: nobody but root holds the key, commands get
//! their credentials from the local signer (which names the caller the
//! kernel reports), and the controller refuses every kind of bad credential
//! with its own error and counter.
//!
//! Two unprivileged users are made for the test (`canopy-alice`,
//! `canopy-bob`); that needs root, as CI has: without it these fail under
//! CI and are skipped elsewhere, saying so (see `common::require`).

mod common;

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, SystemTime};

use canopy::config::Config;
use canopy::wire::auth::{Authenticator, Key};
use canopy::wire::connection::Connection;
use canopy::wire::frame;
use canopy::wire::messages::{Body, Header, PROTOCOL_VERSION};
use canopy::wire::types::JobState;
use common::{as_user, bin, gid_of, home_for, require, user, Cluster};
use tokio::io::AsyncWriteExt;

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn users_act_only_as_themselves_and_never_hold_the_key() {
    if !require(nix::unistd::Uid::effective().is_root(), "root") {
        return;
    }
    let alice = user("canopy-alice");
    let bob = user("canopy-bob");
    let carol = user("canopy-carol");
    // Carol is an operator by configuration (until associations arrive).
    let c = Cluster::start_with(
        2,
        2,
        30,
        "SlurmctldParameters=canopy_operators=canopy-carol\n",
    );
    std::fs::set_permissions(c.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let (ha, hb) = (home_for(alice), home_for(bob));
    let (ha, hb) = (ha.path(), hb.path());

    // The key is root's alone.
    let key = c.dir.path().join("slurm.key");
    let o = Command::new("cat")
        .arg(&key)
        .uid(alice)
        .gid(gid_of(alice))
        .output()
        .unwrap();
    assert!(!o.status.success(), "alice read the key: {}", text(&o));
    assert!(text(&o).contains("Permission denied"), "{}", text(&o));

    // Alice's job runs as alice, with credentials from the signer.
    let o = as_user(
        &c,
        alice,
        ha,
        "sbatch",
        &["--parsable", "-o", "out-%j", "--wrap", "id -u"],
    );
    assert!(o.status.success(), "{}", text(&o));
    let mine: u32 = String::from_utf8_lossy(&o.stdout).trim().parse().unwrap();
    assert_eq!(
        c.wait_done(mine, Duration::from_secs(30)).state,
        JobState::Completed
    );
    let out = std::fs::read_to_string(ha.join(format!("out-{mine}"))).unwrap();
    assert_eq!(out.trim(), alice.to_string());
    let o = as_user(&c, alice, ha, "squeue", &["-h", "-o", "%u"]);
    assert!(o.status.success(), "{}", text(&o));

    // Root inside a user namespace is still alice to the signer: the
    // kernel reports her real uid, so a body claiming uid 0 is refused (as
    // slurmctld refuses a job description naming another user), and
    // nothing runs as root. (Where the kernel refuses alice a user
    // namespace, the attack cannot be made at all.)
    let o = Command::new("unshare")
        .args(["-Ur"])
        .arg(bin("canopy"))
        .args(["sbatch", "--parsable", "-o", "ns-%j", "--wrap", "id -u"])
        .current_dir(ha)
        .env("CANOPY_CONF", &c.conf)
        .env("PATH", c.path_env())
        .uid(alice)
        .gid(gid_of(alice))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    if o.status.success() {
        let ns: u32 = String::from_utf8_lossy(&o.stdout).trim().parse().unwrap();
        c.wait_done(ns, Duration::from_secs(30));
        let j = c.job(ns).unwrap();
        assert_eq!(j.uid, alice, "a namespace's root submitted as {}", j.uid);
        let out = std::fs::read_to_string(ha.join(format!("ns-{ns}"))).unwrap();
        assert_eq!(out.trim(), alice.to_string());
    } else {
        let t = text(&o);
        assert!(
            t.contains("Access/permission denied")
                || t.contains("unshare")
                || t.contains("Operation not permitted"),
            "the namespace's submission failed for another reason: {t}"
        );
    }

    // Bob's held job: alice may do nothing to it.
    let o = as_user(
        &c,
        bob,
        hb,
        "sbatch",
        &["--parsable", "-H", "--wrap", "true"],
    );
    assert!(o.status.success(), "{}", text(&o));
    let bobs = String::from_utf8_lossy(&o.stdout).trim().to_string();
    let job_eq = format!("JobId={bobs}");
    let attempts: Vec<Vec<&str>> = vec![
        vec!["scancel", &bobs],
        vec!["scancel", "--signal=USR1", &bobs],
        vec!["scontrol", "hold", &bobs],
        vec!["scontrol", "release", &bobs],
        vec!["scontrol", "update", &job_eq, "TimeLimit=5"],
        vec!["scontrol", "requeue", &bobs],
        vec!["scontrol", "suspend", &bobs],
        vec![
            "scontrol",
            "update",
            "NodeName=n1",
            "State=DRAIN",
            "Reason=mine",
        ],
        vec!["scontrol", "reconfigure"],
    ];
    for a in &attempts {
        let o = as_user(&c, alice, ha, a[0], &a[1..]);
        let t = text(&o);
        assert!(
            t.contains("Access/permission denied") || t.contains("Invalid user id"),
            "alice ran {a:?}: {t}"
        );
    }
    let j = c.job(bobs.parse().unwrap()).unwrap();
    assert_eq!(j.state, JobState::Pending, "bob's job is untouched");
    assert_eq!(c.node("n1").scontrol_state(), "IDLE", "n1 not drained");
    // An operator named in the configuration may.
    let hc = home_for(carol);
    let o = as_user(
        &c,
        carol,
        hc.path(),
        "scontrol",
        &["update", "NodeName=n2", "State=DRAIN", "Reason=carol"],
    );
    assert!(o.status.success(), "carol: {}", text(&o));
    assert!(c.node("n2").drain);
    let o = as_user(
        &c,
        carol,
        hc.path(),
        "scontrol",
        &["update", "NodeName=n2", "State=RESUME"],
    );
    assert!(o.status.success(), "carol: {}", text(&o));
    // But an operator named in the configuration may not submit as root
    // (only root and SlurmUser may, as in Slurm): a frame signed as carol
    // naming uid 0 is refused.
    let conf = Config::load(&c.conf).unwrap();
    let as_carol = std::sync::Arc::new(Authenticator::new(
        canopy::wire::auth::load_key(&c.dir.path().join("slurm.key")).unwrap(),
        carol,
        gid_of(carol),
    ));
    let addr = format!("{}:{}", conf.control_addr, conf.slurmctld_port);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let reply = rt.block_on(async {
        let mut conn = Connection::connect(addr.as_str(), as_carol, 1)
            .await
            .unwrap();
        let s = canopy::wire::types::JobSubmit {
            name: "as-root".into(),
            hold: true,
            script: "#!/bin/sh\nid\n".into(),
            workdir: "/tmp".into(),
            submit_dir: "/tmp".into(),
            uid: 0,
            gid: 0,
            ..Default::default()
        };
        conn.request(&Body::SubmitJob(Box::new(s)))
            .await
            .unwrap()
            .body
    });
    assert!(
        format!("{reply:?}").contains("Access/permission denied"),
        "{reply:?}"
    );
    // So may root.
    let w = c.dir.path();
    let o = c.cli(
        w,
        "scontrol",
        &["update", "NodeName=n1", "State=DRAIN", "Reason=ops"],
    );
    assert!(o.status.success(), "{}", text(&o));
    assert!(c.node("n1").drain);
    let o = c.cli(w, "scancel", &[&bobs]);
    assert!(o.status.success(), "{}", text(&o));
}

/// Each kind of bad credential gets its own error from the controller,
/// and its own counter in sdiag.
#[test]
fn every_bad_credential_is_refused_with_its_own_error() {
    let c = Cluster::start(1, 2, 30);
    let conf = Config::load(&c.conf).unwrap();
    let auth = canopy::daemon::authenticator(&conf).unwrap();
    let addr = format!("{}:{}", conf.control_addr, conf.slurmctld_port);
    let header = |corr| Header {
        version: PROTOCOL_VERSION,
        kind: "Ping".into(),
        corr,
        boot_id: 5,
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    // Send one raw payload on a fresh connection; the reply's text.
    let send = |payload: bytes::Bytes| -> String {
        rt.block_on(async {
            let mut s = tokio::net::TcpStream::connect(&addr).await.unwrap();
            s.write_all(&(payload.len() as u32).to_be_bytes())
                .await
                .unwrap();
            s.write_all(&payload).await.unwrap();
            let mut conn = Connection::new(s, auth.clone(), 9);
            match conn.recv().await {
                Ok(Some(env)) => format!("{:?}", env.body),
                other => format!("{other:?}"),
            }
        })
    };
    let now = SystemTime::now();
    let good = frame::encode_at(&auth, &header(1), &Body::Ping, now).unwrap();
    assert!(send(good.clone()).contains("Pong"));
    // The same frame again.
    let t = send(good);
    assert!(t.contains("replayed"), "{t}");
    // One byte of the credential changed (the signature's last byte sits
    // just before the body).
    let unsigned = frame::encode_unsigned(&header(2), &Body::Ping).unwrap();
    let mut cred = auth.sign_own(&unsigned.digest, now);
    cred.sig[31] ^= 1;
    let t = send(unsigned.sign(&cred).unwrap());
    assert!(t.contains("does not verify"), "{t}");
    // Expired.
    let old = now - Duration::from_secs(600);
    let t = send(frame::encode_at(&auth, &header(3), &Body::Ping, old).unwrap());
    assert!(t.contains("expired"), "{t}");
    // A credential lifted onto another message.
    let first = frame::encode_unsigned(&header(4), &Body::Ping).unwrap();
    let lifted = auth.sign_own(&first.digest, now);
    let other = frame::encode_unsigned(&header(5), &Body::Ping).unwrap();
    let t = send(other.sign(&lifted).unwrap());
    assert!(t.contains("another message"), "{t}");
    // Signed with a key the controller does not hold (a retired one).
    let retired = Authenticator::new(Key::from_bytes(&[42; 32]).unwrap(), 0, 0);
    let t = send(frame::encode_at(&retired, &header(6), &Body::Ping, now).unwrap());
    assert!(t.contains("does not hold"), "{t}");
    // Each counted once under its own name.
    let Body::Stats(s) = c.call(Body::QueryStats) else {
        panic!("no stats");
    };
    let count = |k: &str| {
        s.auth_refused_by
            .iter()
            .find(|(n, _)| n == k)
            .map_or(0, |(_, v)| *v)
    };
    for k in [
        "replayed",
        "bad_signature",
        "expired",
        "wrong_message",
        "unknown_key",
    ] {
        assert_eq!(count(k), 1, "{k}: {:?}", s.auth_refused_by);
    }
    let o = c.cli(c.dir.path(), "sdiag", &[]);
    assert!(text(&o).contains("Credentials refused:"), "{}", text(&o));
}

/// A frame captured before the controller restarted is refused after it
/// (the replay cache did not survive the restart; the start time does).
#[test]
fn a_frame_from_before_a_restart_is_refused() {
    let mut c = Cluster::start(1, 2, 30);
    let conf = Config::load(&c.conf).unwrap();
    let auth = canopy::daemon::authenticator(&conf).unwrap();
    let addr = format!("{}:{}", conf.control_addr, conf.slurmctld_port);
    let header = Header {
        version: PROTOCOL_VERSION,
        kind: "Ping".into(),
        corr: 1,
        boot_id: 5,
    };
    let captured = frame::encode(&auth, &header, &Body::Ping).unwrap();
    // Sent once before the restart: answered.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let send = |payload: &bytes::Bytes| -> String {
        rt.block_on(async {
            let mut s = tokio::net::TcpStream::connect(&addr).await.unwrap();
            s.write_all(&(payload.len() as u32).to_be_bytes())
                .await
                .unwrap();
            s.write_all(payload).await.unwrap();
            let mut conn = Connection::new(s, auth.clone(), 9);
            match conn.recv().await {
                Ok(Some(env)) => format!("{:?}", env.body),
                other => format!("{other:?}"),
            }
        })
    };
    assert!(send(&captured).contains("Pong"));
    c.kill_ctld();
    std::thread::sleep(Duration::from_millis(20));
    c.start_ctld();
    c.wait_for(Duration::from_secs(30), "controller back", |c| {
        c.try_call(Body::Ping).is_some()
    });
    let t = send(&captured);
    assert!(t.contains("before this daemon started"), "{t}");
}

/// A key rotation without stopping anything: the new key is learnt as the
/// alternate, then signs while the old one is still accepted, then the old
/// one is retired; `scontrol reconfigure` takes it to the controller and
/// every node daemon, SIGHUP to the signer. Jobs run at every stage.
#[test]
fn a_key_is_rotated_without_stopping_the_cluster() {
    let c = Cluster::start(2, 2, 30);
    let w = c.dir.path();
    let conf = Config::load(&c.conf).unwrap();
    let addr = format!("{}:{}", conf.control_addr, conf.slurmctld_port);
    let key = w.join("slurm.key");
    let alt = canopy::wire::auth::alternate_key_path(&key);
    let old = canopy::wire::auth::load_key(&key).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    // A Ping signed with `k`, on a fresh connection: the reply's text (the
    // reply may come signed with either key).
    let ping = |k: &Key, other: &Key| -> String {
        let ring = canopy::wire::auth::Keyring {
            signing: k.clone(),
            alternate: Some(other.clone()),
        };
        let a = std::sync::Arc::new(Authenticator::with_keyring(ring, 0, 0));
        rt.block_on(async {
            match Connection::connect(addr.as_str(), a, 3).await {
                Ok(mut conn) => match conn.request(&Body::Ping).await {
                    Ok(env) => format!("{:?}", env.body),
                    Err(e) => e.to_string(),
                },
                Err(e) => e.to_string(),
            }
        })
    };
    let run_job = |what: &str| {
        let id = c.sbatch(w, &["-N", "2", "--wrap", "true"]);
        let j = c.wait_done(id, Duration::from_secs(30));
        assert_eq!(j.state, JobState::Completed, "{what}");
    };
    let reconfigure = |what: &str| {
        let o = c.cli(w, "scontrol", &["reconfigure"]);
        assert!(o.status.success(), "{what}: {}", text(&o));
    };
    let hup_signer = || {
        let pid = c.authd.as_ref().unwrap().id() as i32;
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGHUP,
        )
        .unwrap();
        std::thread::sleep(Duration::from_millis(300));
    };
    run_job("before");

    // 1. Every daemon learns the new key as the alternate.
    canopy::wire::auth::generate_key_file(&alt).unwrap();
    let new = canopy::wire::auth::load_key(&alt).unwrap();
    assert!(ping(&new, &old).contains("does not hold"), "not yet known");
    reconfigure("learn");
    hup_signer();
    assert!(ping(&new, &old).contains("Pong"));
    assert!(ping(&old, &new).contains("Pong"));
    run_job("both keys known");

    // 2. Swap: the new key signs everywhere, the old is still accepted.
    let tmp = w.join("slurm.key.tmp");
    std::fs::rename(&key, &tmp).unwrap();
    std::fs::rename(&alt, &key).unwrap();
    std::fs::rename(&tmp, &alt).unwrap();
    reconfigure("swap");
    hup_signer();
    run_job("signing with the new key");
    let o = c.cli(w, "squeue", &[]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(ping(&old, &new).contains("Pong"));

    // 3. The old key retired.
    std::fs::remove_file(&alt).unwrap();
    reconfigure("retire");
    hup_signer();
    let t = ping(&old, &new);
    assert!(t.contains("does not hold"), "{t}");
    assert!(ping(&new, &old).contains("Pong"));
    run_job("after");
}
