//! Tests of the whole configuration reader: keys, values, node and partition lines,
//! cross-line checks, Includes and the example config, each through `parse_str` or `load`.

use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::types::*;
use crate::wire::types::PartitionState;

const HEAD: &str = "SlurmctldHost=ctl\n";

fn parse(text: &str) -> Result<Config, ConfigError> {
    Config::parse_str(text, Path::new("slurm.conf"))
}

fn ok(body: &str) -> Config {
    parse(&format!("{HEAD}{body}")).unwrap()
}

fn err(body: &str) -> ConfigError {
    parse(&format!("{HEAD}{body}")).unwrap_err()
}

fn node<'a>(cfg: &'a Config, name: &str) -> &'a NodeConf {
    &cfg.nodes[cfg.node_index(name).unwrap()]
}

fn names(cfg: &Config) -> Vec<&str> {
    cfg.nodes.iter().map(|n| n.name.as_str()).collect()
}

fn partition<'a>(cfg: &'a Config, name: &str) -> &'a PartitionConf {
    cfg.partitions.iter().find(|p| p.name == name).unwrap()
}

/// Asserts an error's line, key and message fragment.
fn assert_err(e: &ConfigError, line: usize, key: &str, fragment: &str) {
    assert_eq!((e.line, e.key.as_str()), (line, key), "{e}");
    assert!(e.message.contains(fragment), "{e:?} lacks {fragment:?}");
}

#[test]
fn defaults() {
    let cfg = ok("");
    assert_eq!(cfg.path, Path::new("slurm.conf"));
    assert_eq!(cfg.cluster_name, "cluster");
    assert_eq!(
        (cfg.control_host.as_str(), cfg.control_addr.as_str()),
        ("ctl", "ctl")
    );
    assert_eq!((cfg.slurmctld_port, cfg.slurmd_port), (6817, 6818));
    assert_eq!(cfg.slurmd_timeout_s, 300);
    assert_eq!(cfg.tree_width, 16);
    assert_eq!(cfg.state_save_location, Path::new("/var/spool/canopy"));
    assert_eq!(cfg.slurmd_spool_dir, "/var/spool/canopyd");
    assert_eq!(cfg.max_job_count, 10_000);
    assert_eq!((cfg.first_job_id, cfg.max_job_id), (1, 0x03ff_0000));
    assert_eq!(cfg.min_job_age_s, 300);
    assert_eq!((cfg.kill_wait_s, cfg.message_timeout_s), (30, 10));
    assert_eq!(cfg.return_to_service, 0);
    assert_eq!(cfg.auth_key_path, Path::new("slurm.key"));
    assert!(cfg.nodes.is_empty() && cfg.partitions.is_empty());
    assert!(cfg.warnings.is_empty(), "{:?}", cfg.warnings);
    assert!(cfg.default_partition().is_none());
    let nested = Config::parse_str(HEAD, Path::new("/etc/x/slurm.conf")).unwrap();
    assert_eq!(nested.auth_key_path, Path::new("/etc/x/slurm.key"));
}

#[test]
fn global_keys_case_insensitive() {
    let cfg = ok(
        "clustername=Alpha SLURMCTLDPORT=7000-7001 slurmdport=7100\n\
         SlurmdTimeout=60 treewidth=4 StateSaveLocation=/s SlurmdSpoolDir=/d/%n\n\
         MaxJobCount=50 FirstJobId=100 MaxJobId=5000 MinJobAge=0 KillWait=5\n\
         MessageTimeout=20 ReturnToService=2\n",
    );
    assert_eq!(cfg.cluster_name, "alpha");
    assert_eq!((cfg.slurmctld_port, cfg.slurmd_port), (7000, 7100));
    assert_eq!((cfg.slurmd_timeout_s, cfg.tree_width), (60, 4));
    assert_eq!(cfg.state_save_location, Path::new("/s"));
    assert_eq!(cfg.slurmd_spool_dir, "/d/%n");
    assert_eq!(
        (cfg.max_job_count, cfg.first_job_id, cfg.max_job_id),
        (50, 100, 5000)
    );
    assert_eq!((cfg.min_job_age_s, cfg.kill_wait_s), (0, 5));
    assert_eq!((cfg.message_timeout_s, cfg.return_to_service), (20, 2));
    assert!(cfg.warnings.is_empty(), "{:?}", cfg.warnings);
}

#[test]
fn tree_width_error_matches_the_documented_form() {
    let text = format!("{HEAD}{}TreeWidth=abc\n", "#\n".repeat(10));
    let e = parse(&text).unwrap_err();
    assert_eq!(
        e.to_string(),
        "slurm.conf:12: TreeWidth=abc: expected an integer between 2 and 65533"
    );
    assert_eq!(e.file, Path::new("slurm.conf"));
}

#[test]
fn bad_global_values_name_line_key_value_and_expectation() {
    let cases = [
        ("ClusterName=", "ClusterName", "a name of 1 to 40"),
        (
            "ClusterName=abcdefghijabcdefghijabcdefghijabcdefghijX",
            "ClusterName",
            "a name of 1 to 40",
        ),
        ("SlurmctldPort=6818-6817", "SlurmctldPort", "range LO-HI"),
        ("SlurmctldPort=x", "SlurmctldPort", "range LO-HI"),
        (
            "SlurmdPort=0",
            "SlurmdPort",
            "SlurmdPort=0: expected a port",
        ),
        (
            "SlurmdPort=70000",
            "SlurmdPort",
            "a port between 1 and 65535",
        ),
        (
            "SlurmdTimeout=65534",
            "SlurmdTimeout",
            "seconds between 0 and 65533",
        ),
        (
            "SlurmdTimeout=5m",
            "SlurmdTimeout",
            "seconds between 0 and 65533",
        ),
        ("TreeWidth=1", "TreeWidth", "between 2 and 65533"),
        ("TreeWidth=65534", "TreeWidth", "between 2 and 65533"),
        ("TreeWidth=+4", "TreeWidth", "between 2 and 65533"),
        ("StateSaveLocation=\"\"", "StateSaveLocation", "a directory"),
        ("SlurmdSpoolDir=", "SlurmdSpoolDir", "a directory"),
        ("MaxJobCount=0", "MaxJobCount", "between 1 and 4294967295"),
        ("FirstJobId=0", "FirstJobId", "between 1 and 67043328"),
        ("MaxJobId=67043329", "MaxJobId", "between 1 and 67043328"),
        (
            "MinJobAge=soon",
            "MinJobAge",
            "MinJobAge=soon: expected a number of seconds",
        ),
        ("KillWait=-1", "KillWait", "seconds between 0 and 65533"),
        (
            "MessageTimeout=0",
            "MessageTimeout",
            "seconds between 1 and 65533",
        ),
        ("ReturnToService=3", "ReturnToService", "between 0 and 2"),
        ("SlurmctldHost=a(b", "SlurmctldHost", "host(address)"),
        ("SlurmctldHost=(b)", "SlurmctldHost", "host(address)"),
        ("ControlMachine=", "ControlMachine", "a host name"),
        ("ControlAddr=", "ControlAddr", "an address"),
    ];
    for (line, key, fragment) in cases {
        let e = err(&format!("# comment\n{line}\n"));
        assert_err(&e, 3, key, fragment);
        assert!(e.to_string().starts_with("slurm.conf:3: "), "{e}");
    }
}

#[test]
fn unrecognized_keys_are_errors() {
    let e = err("\nFoo=1\n");
    assert_eq!(e.to_string(), "slurm.conf:3: unrecognized key 'Foo'");
    assert_eq!(e.key, "Foo");
    let e = err("NodeName=n1 Bogus=2\n");
    assert_err(
        &e,
        2,
        "Bogus",
        "unrecognized key 'Bogus' on a NodeName line",
    );
    let e = err("PartitionName=p SlurmdPort=2\n");
    assert_err(&e, 2, "SlurmdPort", "on a PartitionName line");
    let e = err("NodeName=n1\nDownNodes=n1 CPUs=2\n");
    assert_err(&e, 3, "CPUs", "on a DownNodes line");
    let e = err("NodeSet=s Weight=2\n");
    assert_err(&e, 2, "Weight", "on a NodeSet line");
}

#[test]
fn operators_are_refused_on_used_keys_and_tolerated_on_ignored_ones() {
    let e = err("TreeWidth+=2\n");
    assert_err(&e, 2, "TreeWidth", "the '+=' operator is not supported");
    let e = err("NodeName=n1 Features+=gpu\n");
    assert_err(&e, 2, "Features", "'+=' operator");
    let cfg = ok("SlurmctldParameters+=enable_configless\n");
    assert_eq!(cfg.ignored.len(), 1);
}

#[test]
fn restart_only_changes_are_named_and_the_rest_may_be_reconfigured() {
    let base = ok("NodeName=n[1-3] CPUs=2\nPartitionName=p Nodes=ALL\n");
    let same = |body: &str| base.restart_only_changes(&ok(body));
    // Partitions, node sizes and timeouts apply at reconfigure.
    assert!(same(
        "KillWait=5\nNodeName=n[1-3] CPUs=4 RealMemory=2000\n\
         PartitionName=p Nodes=n[1-2] MaxTime=10\nPartitionName=q Nodes=n3\n"
    )
    .is_empty());
    assert_eq!(
        same(
            "TreeWidth=4\nSlurmctldPort=7000\nNodeName=n[1-3] CPUs=2\nPartitionName=p Nodes=ALL\n"
        ),
        ["SlurmctldPort", "TreeWidth"]
    );
    assert_eq!(
        same("NodeName=n[1-4] CPUs=2\nPartitionName=p Nodes=ALL\n"),
        ["the node list (nodes added, removed or reordered)"]
    );
    assert_eq!(
        same("NodeName=n[1-2] CPUs=2\nNodeName=n3 CPUs=2 Port=7777\nPartitionName=p Nodes=ALL\n"),
        ["NodeAddr/NodeHostname/Port of n3"]
    );
}

#[test]
fn scheduler_parameters_read_user_top_and_name_what_is_ignored() {
    let cfg = ok("SchedulerParameters=bf_window=60,enable_user_top,defer\n");
    assert!(cfg.enable_user_top);
    assert_eq!(cfg.sched.bf_window_min, 60);
    assert!(cfg.warnings.is_empty(), "{:?}", cfg.warnings);
    assert_eq!(
        cfg.ignored_summary().changes[0].line(),
        "slurm.conf:2: SchedulerParameters defer is ignored: canopy does not act on it"
    );
    let e = err("SchedulerParameters=bf_resolution=0\n");
    assert_eq!(
        e.message,
        "SchedulerParameters bf_resolution=0: expected an integer between 1 and 3600"
    );
    assert!(!ok("SchedulerType=sched/builtin\n").sched.backfill);
    let cfg = ok("SchedulerParameters=enable_user_top\nSchedulerParameters=disable_user_top\n");
    assert!(!cfg.enable_user_top);
    assert_eq!(cfg.warnings.len(), 1, "{:?}", cfg.warnings);
    assert!(!ok("").enable_user_top);
}

#[test]
fn slurmctld_parameters_read_the_connection_limit() {
    assert_eq!(ok("").max_connections, DEFAULT_MAX_CONNECTIONS);
    let cfg = ok("SlurmctldParameters=enable_configless,conmgr_max_connections=64\n");
    assert_eq!(cfg.max_connections, 64);
    assert_eq!(
        cfg.ignored_summary().changes[0].first,
        "SlurmctldParameters enable_configless"
    );
    // `+=` adds to the list; a later `=` replaces it (back to the default).
    let cfg = ok("SlurmctldParameters=conmgr_max_connections=64\nSlurmctldParameters+=idle_on_node_suspend\n");
    assert_eq!(cfg.max_connections, 64);
    let cfg = ok(
        "SlurmctldParameters=conmgr_max_connections=64\nSlurmctldParameters=idle_on_node_suspend\n",
    );
    assert_eq!(cfg.max_connections, DEFAULT_MAX_CONNECTIONS);
    let e = err("SlurmctldParameters=conmgr_max_connections=0\n");
    assert_err(&e, 2, "SlurmctldParameters", "between 1 and 1000000");
    let e = err("SlurmctldParameters=conmgr_max_connections=lots\n");
    assert_err(&e, 2, "SlurmctldParameters", "conmgr_max_connections=lots");
    let e = err("SlurmctldParameters-=conmgr_max_connections=5\n");
    assert_err(
        &e,
        2,
        "SlurmctldParameters",
        "'-=' operator is not supported",
    );
}

#[test]
fn repeated_scalar_keys_warn_and_the_last_wins() {
    let cfg = ok("TreeWidth=4\nTREEWIDTH=8\n");
    assert_eq!(cfg.tree_width, 8);
    assert_eq!(
        cfg.warnings,
        ["slurm.conf:3: TreeWidth is set again (previously at slurm.conf:2); the last value wins"]
    );
}

#[test]
fn partition_access_lists_and_qos_are_read() {
    let cfg = ok("PartitionName=DEFAULT DenyQos=low\n\
         PartitionName=p Nodes=ALL AllowAccounts=Chem,bio QOS=Part AllowQos=ALL\n\
         PartitionName=q Nodes=ALL DenyAccounts=x DenyQos=high\n");
    let p = &partition(&cfg, "p").access;
    assert_eq!(
        p.allow_accounts.as_deref(),
        Some(&["chem".to_string(), "bio".to_string()][..])
    );
    assert_eq!(
        (p.qos.as_deref(), p.allow_qos.as_ref()),
        (Some("part"), None)
    );
    assert_eq!(p.deny_qos, ["low"]);
    let q = &partition(&cfg, "q").access;
    assert_eq!(
        (q.deny_accounts.as_slice(), q.deny_qos.as_slice()),
        (&["x".to_string()][..], &["high".to_string()][..])
    );
    assert!(cfg.warnings.is_empty(), "{:?}", cfg.warnings);
}

#[test]
fn ignored_keys_are_recorded_once_per_setting_and_summarized_once_per_key() {
    let cfg = ok("SchedulerTimeSlice=30\nschedulertimeslice=60\n\
         SelectType=select/cons_tres\n\
         NodeName=n1 CoreSpecCount=1 State=DOWN\nNodeName=n2 corespeccount=1\n\
         PartitionName=p Nodes=ALL AllocNodes=x DisableRootJobs=YES\n\
         PartitionName=q Nodes=ALL AllocNodes=y\nFrontendName=fe\n");
    assert!(cfg.warnings.is_empty(), "{:?}", cfg.warnings);
    let written: Vec<String> = cfg.ignored.iter().map(|s| s.as_written()).collect();
    assert_eq!(
        written,
        [
            "SchedulerTimeSlice=30",
            "SchedulerTimeSlice=60",
            "SelectType=select/cons_tres",
            "NodeName=n1 CoreSpecCount=1",
            "NodeName=n2 CoreSpecCount=1",
            "PartitionName=p AllocNodes=x",
            "PartitionName=p DisableRootJobs=YES",
            "PartitionName=q AllocNodes=y",
            "FrontendName=fe",
        ]
    );
    let s = cfg.ignored_summary();
    let keys = |v: &[crate::config::Notice]| v.iter().map(|n| n.key.clone()).collect::<Vec<_>>();
    assert_eq!(
        keys(&s.changes),
        [
            "SchedulerTimeSlice",
            "NodeName CoreSpecCount",
            "PartitionName AllocNodes",
            "PartitionName DisableRootJobs",
            "FrontendName"
        ]
    );
    // select/cons_tres is what canopy does anyway.
    assert_eq!(keys(&s.harmless), ["SelectType"]);
    assert_eq!(s.changes[0].count, 2);
    assert_eq!(
        cfg.ignored_value("PartitionName", "p", "disablerootjobs"),
        Some("YES")
    );
    // Ignored attributes do not disturb the ones that are used.
    assert_eq!(node(&cfg, "n1").state, ConfNodeState::Down);
}

#[test]
fn controller_forms() {
    let cfg = parse("SlurmctldHost=head(10.0.0.1)\nSlurmctldHost=head2\n").unwrap();
    assert_eq!(
        (cfg.control_host.as_str(), cfg.control_addr.as_str()),
        ("head", "10.0.0.1")
    );
    // The backup is kept (scontrol show config prints it) and named as not run.
    assert!(cfg.warnings.is_empty(), "{:?}", cfg.warnings);
    assert_eq!(cfg.backup_controllers, [("head2".into(), "head2".into())]);
    assert_eq!(
        cfg.ignored_summary().changes[0].line(),
        "slurm.conf:2: SlurmctldHost=head2 is ignored: canopy runs one controller: \
         no backup takes over when it fails"
    );
    let cfg = parse("ControlMachine=old\nControlAddr=10.1.1.1\n").unwrap();
    assert_eq!(
        (cfg.control_host.as_str(), cfg.control_addr.as_str()),
        ("old", "10.1.1.1")
    );
    let cfg = parse("ControlMachine=old\n").unwrap();
    assert_eq!(cfg.control_addr, "old");
}

#[test]
fn controller_errors() {
    // SlurmctldHost wins over the old spellings, which Slurm ignores with an error.
    let cfg = parse("SlurmctldHost=a\nControlMachine=b\n\nControlAddr=c\n").unwrap();
    assert_eq!(
        (cfg.control_host.as_str(), cfg.control_addr.as_str()),
        ("a", "a")
    );
    assert_eq!(
        cfg.warnings,
        [
            "slurm.conf:2: Ignoring ControlMachine since SlurmctldHost is set.",
            "slurm.conf:4: Ignoring ControlAddr since SlurmctldHost is set."
        ]
    );
    let e = parse("\nControlAddr=b\n").unwrap_err();
    assert_err(&e, 2, "ControlAddr", "needs ControlMachine");
    let e = parse("TreeWidth=4\n").unwrap_err();
    assert_err(&e, 0, "SlurmctldHost", "no SlurmctldHost is set");
    assert!(
        e.to_string().starts_with("slurm.conf: no SlurmctldHost"),
        "{e}"
    );
}

#[test]
fn node_defaults_accumulate_and_lines_override() {
    let cfg = ok("NodeName=DEFAULT CPUs=8 RealMemory=1000 Features=a,b\n\
         NodeName=n[1-2]\n\
         NodeName=DEFAULT RealMemory=2000 Weight=5\n\
         NodeName=n3 CPUs=4 Features=\"\"\n");
    let n1 = node(&cfg, "n1");
    assert_eq!((n1.cpus, n1.real_memory_mb, n1.weight), (8, 1000, 1));
    assert_eq!(n1.features, ["a", "b"]);
    let n3 = node(&cfg, "n3");
    // The second DEFAULT line kept CPUs/Features from the first and changed the rest.
    assert_eq!((n3.cpus, n3.real_memory_mb, n3.weight), (4, 2000, 5));
    assert!(n3.features.is_empty());
    assert_eq!(names(&cfg), ["n1", "n2", "n3"]);
}

#[test]
fn node_attributes() {
    let cfg = ok(
        "NodeName=g1 Procs=16 RealMemory=64G TmpDisk=1T Gres=gpu:a100:4 \
         Feature=gpu,ib Weight=10 State=DRAIN Reason=\"power down\"\n",
    );
    let g1 = node(&cfg, "g1");
    assert_eq!(g1.cpus, 16);
    assert_eq!((g1.real_memory_mb, g1.tmp_disk_mb), (65_536, 1_048_576));
    assert_eq!(g1.gres, "gpu:a100:4");
    assert_eq!(g1.features, ["gpu", "ib"]);
    assert_eq!(g1.weight, 10);
    assert_eq!(g1.state, ConfNodeState::Drain);
    assert_eq!(g1.reason.as_deref(), Some("power down"));
    assert_eq!(
        (g1.addr.as_str(), g1.hostname.as_str(), g1.port),
        ("g1", "g1", 6818)
    );
    let plain = ok("NodeName=p1\n");
    let p1 = node(&plain, "p1");
    assert_eq!((p1.cpus, p1.real_memory_mb, p1.tmp_disk_mb), (1, 1, 0));
    assert_eq!(
        (p1.weight, p1.state, p1.reason.clone()),
        (1, ConfNodeState::Unknown, None)
    );
    assert_eq!(p1.gres, "");
}

#[test]
fn node_states() {
    for (text, state) in [
        ("UNKNOWN", ConfNodeState::Unknown),
        ("down", ConfNodeState::Down),
        ("Drain", ConfNodeState::Drain),
        ("FAIL", ConfNodeState::Fail),
        ("FAILING", ConfNodeState::Fail),
        ("FUTURE", ConfNodeState::Future),
        ("cloud", ConfNodeState::Cloud),
    ] {
        let cfg = ok(&format!("NodeName=n1 State={text}\n"));
        assert_eq!(node(&cfg, "n1").state, state, "{text}");
    }
    assert_eq!(ConfNodeState::Fail.name(), "FAIL");
    let e = err("NodeName=n1 State=IDLE\n");
    assert_err(&e, 2, "State", "State=IDLE: expected CLOUD, DOWN, DRAIN");
    assert!(e.message.contains("never configured IDLE"), "{e}");
    let e = err("NodeName=n1 State=allocated\n");
    assert!(e.message.contains("never configured ALLOCATED"), "{e}");
    let e = err("NodeName=n1 State=sleepy\n");
    assert_err(&e, 2, "State", "State=sleepy: expected CLOUD");
}

#[test]
fn cpu_topology() {
    let cfg = ok("NodeName=a Sockets=2 CoresPerSocket=8 ThreadsPerCore=2\n\
         NodeName=b Boards=2 SocketsPerBoard=2 CoresPerSocket=4\n\
         NodeName=c CPUs=12 CoresPerSocket=6\n\
         NodeName=d CPUs=7 Sockets=2 CoresPerSocket=2\n\
         NodeName=e Sockets=2 CoresPerSocket=4 ThreadsPerCore=2 CPUs=8\n");
    let a = node(&cfg, "a");
    assert_eq!(
        (a.cpus, a.sockets, a.cores_per_socket, a.threads_per_core),
        (32, 2, 8, 2)
    );
    let b = node(&cfg, "b");
    assert_eq!((b.cpus, b.boards, b.sockets), (16, 2, 4));
    let c = node(&cfg, "c");
    assert_eq!((c.cpus, c.sockets), (12, 2));
    // CPUs=7 fits no level of 2 sockets x 2 cores: replaced, with a warning.
    assert_eq!(node(&cfg, "d").cpus, 4);
    assert_eq!(
        cfg.warnings,
        [
            "slurm.conf:5: NodeNames=d CPUs=7 match no Sockets, Sockets*CoresPerSocket or \
             Sockets*CoresPerSocket*ThreadsPerCore. Resetting CPUs to 4."
        ]
    );
    // CPUs may count cores only (hyperthreads not schedulable).
    assert_eq!(node(&cfg, "e").cpus, 8);
}

#[test]
fn cpu_topology_errors() {
    let e = err("NodeName=a Sockets=65535 CoresPerSocket=65535 ThreadsPerCore=2\n");
    assert_err(&e, 2, "CPUs", "the node topology gives 8589672450 CPUs");
    for attr in [
        "CPUs",
        "Boards",
        "Sockets",
        "CoresPerSocket",
        "ThreadsPerCore",
    ] {
        let e = err(&format!("\nNodeName=a {attr}=65536\n"));
        assert_err(&e, 3, attr, "between 0 and 65535");
    }
    let e = err("NodeName=a RealMemory=lots\n");
    assert_err(
        &e,
        2,
        "RealMemory",
        "RealMemory=lots: expected a size in MiB",
    );
    let e = err("NodeName=a RealMemory=99999999999999999T\n");
    assert_err(
        &e,
        2,
        "RealMemory",
        "expected at most 18446744073709551615 MiB",
    );
    let e = err("NodeName=a TmpDisk=1.5G\n");
    assert_err(&e, 2, "TmpDisk", "expected a size in MiB");
    let e = err("NodeName=a Weight=-1\n");
    assert_err(&e, 2, "Weight", "between 0 and 4294967295");
}

#[test]
fn addresses_hostnames_and_ports_per_node() {
    let cfg = ok(
        "NodeName=n[1-3] NodeHostname=h[1-3] NodeAddr=10.0.0.[1-3] Port=[20001-20003]\n\
         NodeName=m[1-2] NodeAddr=127.0.0.1 Port=21001-21002\n\
         NodeName=k[1-2] NodeHostname=kh[1-2]\n\
         NodeName=DEFAULT Port=22000\nNodeName=j1\n",
    );
    let n2 = node(&cfg, "n2");
    assert_eq!(
        (n2.hostname.as_str(), n2.addr.as_str(), n2.port),
        ("h2", "10.0.0.2", 20002)
    );
    let m2 = node(&cfg, "m2");
    assert_eq!((m2.addr.as_str(), m2.port), ("127.0.0.1", 21002));
    let k2 = node(&cfg, "k2");
    // NodeAddr falls back to NodeHostname, not to the node name.
    assert_eq!(
        (k2.hostname.as_str(), k2.addr.as_str(), k2.port),
        ("kh2", "kh2", 6818)
    );
    assert_eq!(node(&cfg, "j1").port, 22000);
}

#[test]
fn slurmd_port_applies_wherever_it_appears() {
    let cfg = ok("NodeName=n1\nSlurmdPort=7777\n");
    assert_eq!(node(&cfg, "n1").port, 7777);
}

#[test]
fn per_node_list_errors() {
    let e = err("\nNodeName=n[1-4] Port=[1-3]\n");
    assert_err(
        &e,
        3,
        "Port",
        "Port=[1-3] gives 3 values for the 4 nodes of NodeName=n[1-4]; expected 1 or 4",
    );
    let e = err("NodeName=n[1-2] NodeAddr=a,b,c\n");
    assert_err(&e, 2, "NodeAddr", "gives 3 values for the 2 nodes");
    let e = err("NodeName=n[1-2] NodeHostname=h[1-3]\n");
    assert_err(&e, 2, "NodeHostname", "gives 3 values");
    let e = err("NodeName=DEFAULT Port=[1-3]\nNodeName=n[1-2]\n");
    assert_err(&e, 3, "Port", "gives 3 values for the 2 nodes");
    let e = err("NodeName=n1 Port=0\n");
    assert_err(&e, 2, "Port", "Port=0: expected a port");
    let e = err("NodeName=n1 Port=[5-3]\n");
    assert_err(&e, 2, "Port", "expected a port");
    let e = err("NodeName=n1 Port=abc\n");
    assert_err(&e, 2, "Port", "expected a port");
    let e = err("NodeName=n1 NodeAddr=a[1-\n");
    assert_err(&e, 2, "NodeAddr", "NodeAddr=a[1-: expected a hostlist");
    let e = err("NodeName=DEFAULT NodeAddr=x\n");
    assert_err(&e, 2, "NodeAddr", "not allowed with NodeName=DEFAULT");
    let e = err("NodeName=DEFAULT NodeHostname=x\n");
    assert_err(&e, 2, "NodeHostname", "not allowed with NodeName=DEFAULT");
}

#[test]
fn node_name_errors_and_duplicates() {
    let e = err("NodeName=all\n");
    assert_err(&e, 2, "NodeName", "ALL is reserved");
    let e = err("\n\nNodeName=n[1-\n");
    assert_err(&e, 4, "NodeName", "NodeName=n[1-: expected a hostlist");
    assert!(e.message.contains("no matching ']'"), "{e}");
    let e = err("NodeName=\n");
    assert_err(&e, 2, "NodeName", "a name or hostlist");
    let cfg = ok("NodeName=n[1-2] CPUs=2\nNodeName=n2,n3 CPUs=4\n");
    assert_eq!(names(&cfg), ["n1", "n2", "n3"]);
    assert_eq!(node(&cfg, "n2").cpus, 2);
    assert_eq!(
        cfg.warnings,
        ["slurm.conf:3: node n2 is already defined at slurm.conf:2; this definition is ignored"]
    );
    assert_eq!(cfg.node_index("n3"), Some(2));
    assert_eq!(cfg.node_index("n4"), None);
}

#[test]
fn repeated_attribute_on_one_line_warns() {
    let cfg = ok("NodeName=n1 CPUs=2 CPUs=4\n");
    assert_eq!(node(&cfg, "n1").cpus, 4);
    assert_eq!(
        cfg.warnings,
        ["slurm.conf:2: CPUs is given more than once on this line; the last value wins"]
    );
}

#[test]
fn shared_address_and_port_is_an_error() {
    let e = err("NodeName=a NodeAddr=10.0.0.1\n\nNodeName=b NodeAddr=10.0.0.1\n");
    assert_err(&e, 4, "Port", "nodes a and b both use 10.0.0.1:6818");
    let cfg = ok("NodeName=a NodeAddr=10.0.0.1 Port=1\nNodeName=b NodeAddr=10.0.0.1 Port=2\n");
    assert_eq!(cfg.nodes.len(), 2);
}

#[test]
fn down_nodes_lines() {
    let cfg = ok(
        "NodeName=n[1-4] Reason=orig\nDownNodes=n[1-2] Reason=\"bad psu\"\n\
         DownNodes=n3 State=DRAIN\nDownNodes=n4 State=FUTURE Reason=\"\"\n",
    );
    let n1 = node(&cfg, "n1");
    assert_eq!(
        (n1.state, n1.reason.as_deref()),
        (ConfNodeState::Down, Some("bad psu"))
    );
    let n3 = node(&cfg, "n3");
    assert_eq!(
        (n3.state, n3.reason.as_deref()),
        (ConfNodeState::Drain, Some("orig"))
    );
    assert_eq!(node(&cfg, "n4").state, ConfNodeState::Future);
    // As slurmctld: an undefined node is skipped, UNKNOWN (or IDLE) leaves the state
    // and sets the reason, a bad state skips the line; each with Slurm's error.
    let cfg = ok("NodeName=n1 State=DRAIN\nDownNodes=n[1-2]\n");
    assert_eq!(node(&cfg, "n1").state, ConfNodeState::Down);
    assert_eq!(
        cfg.warnings,
        ["slurm.conf:3: DownNode \"n2\" does not exist!"]
    );
    let cfg = ok("NodeName=n1 State=DRAIN\nDownNodes=n1 State=UNKNOWN Reason=why\n");
    let n1 = node(&cfg, "n1");
    assert_eq!(
        (n1.state, n1.reason.as_deref()),
        (ConfNodeState::Drain, Some("why"))
    );
    let cfg = ok("NodeName=n1\nDownNodes=n1 State=IDLE\n");
    assert_eq!(node(&cfg, "n1").state, ConfNodeState::Unknown);
    let cfg = ok("NodeName=n1\nDownNodes=n1 State=bogus Reason=x\n");
    assert_eq!(node(&cfg, "n1").reason, None);
    assert_eq!(cfg.warnings, ["slurm.conf:3: Invalid State \"bogus\""]);
}

#[test]
fn node_sets_in_partitions() {
    let cfg = ok("NodeName=n[1-4]\nNodeName=g[1-2] Features=gpu\n\
         NodeSet=gpus Feature=gpu\nNodeSet=pair Nodes=n[3-4]\n\
         PartitionName=p Nodes=gpus,pair\n");
    assert_eq!(partition(&cfg, "p").nodes, ["n3", "n4", "g1", "g2"]);
    // `NodeSet= Nodes=n1` would read "Nodes=n1" as the name (blanks after '=' are
    // skipped, as in Slurm), so an empty name has to be quoted.
    let e = err("NodeSet=\"\" Nodes=n1\n");
    assert_err(&e, 2, "NodeSet", "NodeSet=: expected a node set name");
    let e = err("NodeSet=s\n");
    assert_err(&e, 2, "NodeSet", "expected Nodes= or Feature=");
    let e = err("NodeName=n1\nNodeSet=s Nodes=n1\nNodeSet=s Nodes=n1\n");
    assert_err(
        &e,
        4,
        "NodeSet",
        "node set s is already defined at slurm.conf:3",
    );
    let e = err("NodeSet=s Nodes=x1\n");
    assert_err(
        &e,
        2,
        "Nodes",
        "NodeSet=s Nodes=x1: node 'x1' is not defined",
    );
}

#[test]
fn partitions() {
    let cfg = ok("NodeName=n[1-6]\n\
         PartitionName=DEFAULT MaxTime=30 State=DOWN\n\
         PartitionName=DEFAULT MaxNodes=4\n\
         PartitionName=short Nodes=n[4-6],n1,n4 Default=YES DefaultTime=5\n\
         PartitionName=long Nodes=ALL MaxTime=UNLIMITED MaxNodes=unlimited MinNodes=2 \
         State=UP DefaultTime=NONE\n\
         PartitionName=empty Nodes=\"\" State=INACTIVE MaxTime=1-0 DefaultTime=0:30\n\
         PartitionName=drained State=drain Default=no\n");
    let short = partition(&cfg, "short");
    // Each node once, in node order, whatever the order in Nodes=.
    assert_eq!(short.nodes, ["n1", "n4", "n5", "n6"]);
    assert!(short.default);
    assert_eq!(
        (short.max_time_min, short.default_time_min),
        (Some(30), Some(5))
    );
    assert_eq!((short.max_nodes, short.min_nodes), (Some(4), 0));
    assert_eq!(short.state, PartitionState::Down);
    let long = partition(&cfg, "long");
    assert_eq!(long.nodes.len(), 6);
    assert_eq!((long.max_time_min, long.default_time_min), (None, None));
    assert_eq!(
        (long.max_nodes, long.min_nodes, long.state),
        (None, 2, PartitionState::Up)
    );
    let empty = partition(&cfg, "empty");
    assert!(empty.nodes.is_empty());
    assert_eq!(
        (empty.max_time_min, empty.default_time_min),
        (Some(1440), Some(1))
    );
    assert_eq!(empty.state, PartitionState::Inactive);
    assert_eq!(partition(&cfg, "drained").state, PartitionState::Drain);
    assert_eq!(cfg.default_partition().unwrap().name, "short");
    let order: Vec<&str> = cfg.partitions.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(order, ["short", "long", "empty", "drained"]);
    assert!(cfg.warnings.is_empty(), "{:?}", cfg.warnings);
}

#[test]
fn partition_errors() {
    let e = err("NodeName=n[1-2]\n\nPartitionName=p Nodes=n[1-3]\n");
    assert_err(
        &e,
        4,
        "Nodes",
        "PartitionName=p Nodes=n[1-3]: node 'n3' is not defined",
    );
    let e = err("PartitionName=a Default=YES\nPartitionName=b Default=YES\n");
    assert_err(
        &e,
        3,
        "Default",
        "partition b is Default=YES but so is a (at slurm.conf:2)",
    );
    let e = err("PartitionName=a\nPartitionName=a\n");
    assert_err(
        &e,
        3,
        "PartitionName",
        "partition a is already defined at slurm.conf:2",
    );
    let e = err("PartitionName=a MinNodes=5 MaxNodes=4\n");
    assert_err(&e, 2, "MinNodes", "MinNodes=5 exceeds MaxNodes=4");
    let e = err("PartitionName=\n");
    assert_err(&e, 2, "PartitionName", "a partition name");
    let cases = [
        (
            "Default=maybe",
            "Default",
            "Default=maybe: expected YES or NO",
        ),
        (
            "MaxTime=soon",
            "MaxTime",
            "MaxTime=soon: expected a time limit",
        ),
        (
            "DefaultTime=1:2:3:4",
            "DefaultTime",
            "expected a time limit: M, M:S",
        ),
        (
            "MaxTime=99999999999",
            "MaxTime",
            "expected at most 4294967295 minutes",
        ),
        ("MaxNodes=many", "MaxNodes", "an integer or UNLIMITED"),
        ("MinNodes=-1", "MinNodes", "between 0 and 4294967295"),
        (
            "State=OPEN",
            "State",
            "State=OPEN: expected UP, DOWN, DRAIN or INACTIVE",
        ),
        ("Nodes=n[1", "Nodes", "ALL, node set names or a hostlist"),
    ];
    for (attr, key, fragment) in cases {
        let e = err(&format!("\nPartitionName=p {attr}\n"));
        assert_err(&e, 3, key, fragment);
    }
}

#[test]
fn default_time_above_max_time_is_dropped_with_a_warning() {
    let cfg = ok("PartitionName=p MaxTime=10 DefaultTime=20\n");
    assert_eq!(partition(&cfg, "p").default_time_min, None);
    assert_eq!(
        cfg.warnings,
        [
            "slurm.conf:2: partition p: DefaultTime (20 min) exceeds MaxTime (10 min); \
          DefaultTime ignored"
        ]
    );
}

#[test]
fn first_job_id_must_be_below_max_job_id() {
    let e = err("MaxJobId=100\nFirstJobId=100\n");
    assert_err(
        &e,
        3,
        "FirstJobId",
        "FirstJobId=100 must be below MaxJobId=100",
    );
    let e = err("\nMaxJobId=1\n");
    assert_err(&e, 3, "FirstJobId", "must be below MaxJobId=1");
}

#[test]
fn comments_escapes_quotes_and_crlf() {
    let text = "SlurmctldHost=ctl # the controller\r\n\
         # a whole-line comment\r\n\
         NodeName=n1 Reason=\"power down\" # trailing\r\n\
         NodeName=n2 Reason=rack\\#4 Gres=\"\"\r\n\
         NodeName=n3 Reason=two\\ words\r\n";
    let cfg = parse(text).unwrap();
    assert_eq!(node(&cfg, "n1").reason.as_deref(), Some("power down"));
    assert_eq!(node(&cfg, "n2").reason.as_deref(), Some("rack#4"));
    assert_eq!(node(&cfg, "n3").reason.as_deref(), Some("two words"));
    let e = err("NodeName=n1 Reason=\"a # b\"\n");
    assert_err(&e, 2, "Reason", "unterminated quote");
}

#[test]
fn continued_lines_report_their_first_line() {
    let cfg = ok("NodeName=n[1-2] \\\n   CPUs=4 \\\n   RealMemory=100\n");
    assert_eq!(
        (node(&cfg, "n2").cpus, node(&cfg, "n2").real_memory_mb),
        (4, 100)
    );
    let e = err("\nNodeName=n1 \\\n  CPUs=2 \\\n  Weight=heavy\nTreeWidth=4\n");
    assert_err(&e, 3, "Weight", "Weight=heavy");
    let e = err("NodeName=n1 \\\n  lonely\n");
    assert_err(&e, 2, "lonely", "'lonely' is not a Key=Value pair");
}

#[test]
fn globals_before_a_record_key_share_its_line() {
    let cfg = ok("TreeWidth=5 NodeName=n1 CPUs=2\n");
    assert_eq!(cfg.tree_width, 5);
    assert_eq!(node(&cfg, "n1").cpus, 2);
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(&path, text).unwrap();
    path
}

#[test]
fn include_is_relative_to_the_including_file_and_expands_cluster_name() {
    let dir = tempfile::tempdir().unwrap();
    let main = write(
        dir.path(),
        "slurm.conf",
        "SlurmctldHost=ctl\nClusterName=Alpha\nInclude conf.d/%c-nodes.conf\nTreeWidth=3\n",
    );
    write(
        dir.path(),
        "conf.d/Alpha-nodes.conf",
        "NodeName=n[1-2]\nInclude parts.conf\n",
    );
    write(
        dir.path(),
        "conf.d/parts.conf",
        "PartitionName=p Nodes=ALL Default=YES\n",
    );
    let cfg = Config::load(&main).unwrap();
    assert_eq!(cfg.cluster_name, "alpha");
    assert_eq!(names(&cfg), ["n1", "n2"]);
    assert_eq!(cfg.default_partition().unwrap().nodes, ["n1", "n2"]);
    assert_eq!(cfg.tree_width, 3);
    assert_eq!(cfg.auth_key_path, dir.path().join("slurm.key"));
}

#[test]
fn errors_inside_included_files_name_that_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let main = write(
        dir.path(),
        "slurm.conf",
        "SlurmctldHost=ctl\nInclude nodes.conf\n",
    );
    let nodes = write(
        dir.path(),
        "nodes.conf",
        "# nodes\n\nNodeName=n1 \\\n CPUs=x\n",
    );
    let e = Config::load(&main).unwrap_err();
    assert_eq!(
        (e.file.as_path(), e.line, e.key.as_str()),
        (nodes.as_path(), 3, "CPUs")
    );
    assert_eq!(
        e.to_string(),
        format!(
            "{}:3: CPUs=x: expected an integer between 0 and 65535",
            nodes.display()
        )
    );
    // Warnings from included files carry their location too.
    fs::write(&nodes, "NodeName=n1\nSchedulerTimeSlice=x\n").unwrap();
    let cfg = Config::load(&main).unwrap();
    assert!(cfg.warnings.is_empty(), "{:?}", cfg.warnings);
    assert_eq!(
        cfg.ignored_summary().changes[0].line(),
        format!(
            "{}:2: SchedulerTimeSlice=x is ignored: no gang scheduling time slices",
            nodes.display()
        )
    );
}

#[test]
fn include_cycles_depth_and_missing_files() {
    let dir = tempfile::tempdir().unwrap();
    let main = write(
        dir.path(),
        "slurm.conf",
        "SlurmctldHost=ctl\nInclude a.conf\n",
    );
    let a = write(dir.path(), "a.conf", "\nInclude slurm.conf\n");
    let e = Config::load(&main).unwrap_err();
    assert_eq!(
        (e.file.as_path(), e.line, e.key.as_str()),
        (a.as_path(), 2, "Include")
    );
    assert!(e.message.contains("include cycle"), "{e}");

    // A chain of distinct files deeper than the limit.
    for i in 0..20 {
        write(
            dir.path(),
            &format!("d{i}.conf"),
            &format!("Include d{}.conf\n", i + 1),
        );
    }
    fs::write(&a, "Include d0.conf\n").unwrap();
    let e = Config::load(&main).unwrap_err();
    assert!(e.message.contains("nest deeper than 16"), "{e}");

    fs::write(&a, "Include missing.conf\n").unwrap();
    let e = Config::load(&main).unwrap_err();
    assert_eq!((e.file.as_path(), e.line), (a.as_path(), 1));
    assert!(e.message.contains("missing.conf: cannot read"), "{e}");
}

#[test]
fn load_of_a_missing_file_names_the_path() {
    let e = Config::load(Path::new("/nonexistent/canopy.conf")).unwrap_err();
    assert_eq!(
        (e.line, e.file.as_path()),
        (0, Path::new("/nonexistent/canopy.conf"))
    );
    assert!(
        e.to_string()
            .starts_with("/nonexistent/canopy.conf: cannot read /nonexistent/canopy.conf:"),
        "{e}"
    );
}

#[test]
fn example_config_loads_from_a_copy() {
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/slurm.conf");
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("slurm.conf");
    fs::copy(&example, &copy).unwrap();
    let cfg = Config::load(&copy).unwrap();
    assert!(cfg.warnings.is_empty(), "{:?}", cfg.warnings);
    assert_eq!(cfg.nodes.len(), 8);
    assert_eq!(cfg.tree_width, 3);
    for (i, n) in cfg.nodes.iter().enumerate() {
        assert_eq!(n.name, format!("n{}", i + 1));
        assert_eq!((n.addr.as_str(), n.port), ("127.0.0.1", 17001 + i as u16));
    }
    assert_eq!(cfg.partitions.len(), 2);
    let default = cfg.default_partition().unwrap();
    assert_eq!(default.nodes, ["n1", "n2", "n3", "n4"]);
    assert!(cfg
        .partitions
        .iter()
        .any(|p| !p.default && p.nodes.len() == 8));
}

/// A production-style file: many keys canopy ignores, several partitions.
const SITE: &str = r#"
# Example site configuration
ClusterName=Hydra
SlurmctldHost=hydra-head(10.10.0.1)
SlurmctldHost=hydra-head2(10.10.0.2)
AuthType=auth/munge
CryptoType=crypto/munge
MpiDefault=pmix
ProctrackType=proctrack/cgroup
ReturnToService=1
SlurmctldPidFile=/var/run/slurmctld.pid
SlurmctldPort=6817-6818
SlurmdPidFile=/var/run/slurmd.pid
SlurmdPort=6818
SlurmdSpoolDir=/var/spool/slurmd
SlurmUser=slurm
StateSaveLocation=/var/spool/slurmctld
SwitchType=switch/none
TaskPlugin=task/affinity,task/cgroup
InactiveLimit=0
KillWait=30
MinJobAge=300
SlurmctldTimeout=120
SlurmdTimeout=300
Waittime=0
SchedulerType=sched/backfill
SchedulerParameters=bf_window=4320,bf_resolution=600,default_queue_depth=200
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
PriorityType=priority/multifactor
PriorityDecayHalfLife=7-0
PriorityWeightFairshare=10000
PriorityWeightAge=1000
PriorityWeightTRES=CPU=1000,Mem=2000,GRES/gpu=3000
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=dbd
AccountingStorageEnforce=associations,limits,qos
AccountingStorageTRES=gres/gpu
JobCompType=jobcomp/none
JobAcctGatherFrequency=30
JobAcctGatherType=jobacct_gather/cgroup
SlurmctldDebug=info
SlurmctldLogFile=/var/log/slurmctld.log
SlurmdDebug=info
SlurmdLogFile=/var/log/slurmd.log
GresTypes=gpu
PrologFlags=Alloc,Contain
Prolog=/etc/slurm/prolog.d/*
Epilog=/etc/slurm/epilog.d/*
HealthCheckProgram=/usr/sbin/nhc
HealthCheckInterval=300
DefMemPerCPU=2048
MaxArraySize=10001
MaxJobCount=50000
TreeWidth=32
FastSchedule=1

NodeName=DEFAULT Sockets=2 CoresPerSocket=16 ThreadsPerCore=2 RealMemory=191000 \
TmpDisk=400000 State=UNKNOWN
NodeName=cpu[001-128] Weight=10
NodeName=gpu[01-08] Gres=gpu:a100:4 Features=gpu,a100 Weight=50 CoreSpecCount=2 \
MemSpecLimit=4096
NodeName=bigmem[1-2] RealMemory=1500000 Features=bigmem

DownNodes=cpu[120-128] State=DRAIN Reason="awaiting firmware"
NodeSet=gpunodes Feature=gpu

PartitionName=DEFAULT State=UP OverSubscribe=NO
PartitionName=cpu Nodes=cpu[001-128] Default=YES MaxTime=2-00:00:00 DefaultTime=1:00:00 \
PriorityTier=1 AllowAccounts=ALL
PartitionName=gpu Nodes=gpunodes MaxTime=1-00:00:00 TRESBillingWeights="CPU=1.0,Mem=0.25G,GRES/gpu=8"
PartitionName=bigmem Nodes=bigmem[1-2] MaxTime=7-0 MaxNodes=1 QOS=bigmem
PartitionName=debug Nodes=ALL MaxTime=30 MaxNodes=2 PriorityTier=10 Hidden=NO
"#;

#[test]
fn realistic_site_file_parses_with_warnings() {
    let cfg = parse(SITE).unwrap();
    assert_eq!(cfg.cluster_name, "hydra");
    assert_eq!(
        (cfg.control_host.as_str(), cfg.control_addr.as_str()),
        ("hydra-head", "10.10.0.1")
    );
    assert_eq!(
        (cfg.slurmctld_port, cfg.tree_width, cfg.max_job_count),
        (6817, 32, 50_000)
    );
    assert_eq!(cfg.nodes.len(), 138);
    let gpu = node(&cfg, "gpu03");
    assert_eq!(
        (gpu.cpus, gpu.real_memory_mb, gpu.gres.as_str()),
        (64, 191_000, "gpu:a100:4")
    );
    assert_eq!(node(&cfg, "bigmem2").real_memory_mb, 1_500_000);
    let drained = node(&cfg, "cpu125");
    assert_eq!(drained.state, ConfNodeState::Drain);
    assert_eq!(drained.reason.as_deref(), Some("awaiting firmware"));
    assert_eq!(node(&cfg, "cpu119").state, ConfNodeState::Unknown);
    assert_eq!(partition(&cfg, "gpu").nodes.len(), 8);
    assert_eq!(partition(&cfg, "debug").nodes.len(), 138);
    assert_eq!(cfg.default_partition().unwrap().name, "cpu");
    assert_eq!(partition(&cfg, "bigmem").max_time_min, Some(7 * 1440));
    // Warnings only for what canopy reads differently (AuthType, FastSchedule=1, as
    // Slurm 22.05 warns); the ignored keys (PriorityType, GresTypes,
    // SelectTypeParameters, ProctrackType, TaskPlugin, SlurmUser, Prolog, Epilog,
    // PrologFlags, the Priority* keys, PriorityTier, TRESBillingWeights,
    // AccountingStorageEnforce, the partitions' QOS, AllowAccounts, OverSubscribe and
    // Hidden, DefMemPerCPU, SchedulerType and SchedulerParameters are read), the backup
    // controller among them, are recorded.
    assert_eq!(cfg.warnings.len(), 2, "{:#?}", cfg.warnings);
    let summary = cfg.ignored_summary();
    assert_eq!(
        summary.changes.len() + summary.harmless.len(),
        24,
        "{summary:#?}"
    );
    assert_eq!(cfg.priority.weight_fairshare, 10_000);
    assert_eq!(cfg.priority.partition("debug").tier, 10);
    assert_eq!(cfg.priority.billing_for("gpu").len(), 3);
    assert!(cfg.accounting_enforce.associations && cfg.accounting_enforce.limits);
    assert!(cfg.accounting_enforce.qos && !cfg.accounting_enforce.safe);
    assert_eq!(
        (
            cfg.sched.bf_window_min,
            cfg.sched.bf_resolution_s,
            cfg.sched.default_queue_depth
        ),
        (4320, 600, 200)
    );
    assert_eq!(cfg.select_params, crate::model::tres::CrParams::default());
    assert_eq!(cfg.task_plugins, ["task/affinity", "task/cgroup"]);
    assert_eq!(cfg.prolog.prolog.as_deref(), Some("/etc/slurm/prolog.d/*"));
    assert_eq!(cfg.prolog.epilog.as_deref(), Some("/etc/slurm/epilog.d/*"));
    assert!(cfg.prolog.alloc && cfg.prolog.contain && !cfg.prolog.serial);
    assert_eq!(cfg.prolog.timeout_s, None);
    assert_eq!(cfg.slurm_user.as_deref(), Some("slurm"));
    assert_eq!(cfg.gres_types, ["gpu"]);
    assert_eq!(cfg.priority_type, "priority/multifactor");
    // AuthType=auth/munge says what canopy does instead.
    assert!(cfg.warnings[0].contains("AuthType=auth/munge: canopy signs with its own local signer"));
    assert!(summary.changes.iter().any(|n| n.at == "slurm.conf:61"
        && n.first.starts_with("NodeName=")
        && n.first.ends_with(" CoreSpecCount=2")));
}

#[test]
fn scheduler_parameters_bound_scripts_and_submissions_per_user() {
    let cfg = ok("");
    assert_eq!(cfg.max_script_size, 4 * 1024 * 1024);
    assert_eq!(cfg.max_submit_jobs_per_user, None);
    let cfg = ok(
        "SchedulerParameters=max_script_size=1000,max_submit_jobs_per_user=50,enable_user_top\n",
    );
    assert_eq!(cfg.max_script_size, 1000);
    assert_eq!(cfg.max_submit_jobs_per_user, Some(50));
    assert!(cfg.enable_user_top);
    assert!(cfg.warnings.is_empty(), "{:?}", cfg.warnings);
    for bad in [
        "max_script_size=0",
        "max_script_size=536870913",
        "max_script_size=4M",
        "max_submit_jobs_per_user=0",
        "max_submit_jobs_per_user=",
    ] {
        let e = err(&format!("SchedulerParameters={bad}\n"));
        assert!(e.to_string().contains(bad), "{bad}: {e}");
    }
}

#[test]
fn private_data_is_read_word_by_word() {
    let cfg = ok("");
    assert_eq!(cfg.private_data, PrivateData::default());
    let cfg = ok("PrivateData=jobs,Nodes,usage\n");
    assert!(cfg.private_data.jobs && cfg.private_data.nodes && cfg.private_data.usage);
    assert!(!cfg.private_data.partitions && !cfg.private_data.users);
    assert!(cfg.warnings.is_empty(), "{:?}", cfg.warnings);
    let all = ok("PrivateData=all\n").private_data;
    assert!(all.jobs && all.nodes && all.partitions && all.reservations && all.usage && all.users);
    let cfg = ok("PrivateData=jobs,accounts,events\n");
    assert!(cfg.private_data.jobs);
    let words: Vec<String> = cfg.ignored.iter().map(|s| s.as_written()).collect();
    assert_eq!(words, ["PrivateData accounts", "PrivateData events"]);
    assert_eq!(ok("SlurmUser=slurm\n").slurm_user.as_deref(), Some("slurm"));
}

#[test]
fn heartbeat_interval_is_a_third_of_the_timeout_clamped() {
    let mut cfg = ok("");
    for (timeout, want) in [
        (0, Duration::from_secs(10)),
        (1, Duration::from_millis(333)),
        (3, Duration::from_secs(1)),
        (30, Duration::from_secs(10)),
        (300, Duration::from_secs(10)),
    ] {
        cfg.slurmd_timeout_s = timeout;
        assert_eq!(cfg.heartbeat_interval(), want, "{timeout}");
    }
}

#[test]
fn locate_precedence() {
    let env = |pairs: &'static [(&'static str, &'static str)]| {
        move |name: &str| {
            pairs
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| OsString::from(v))
        }
    };
    let both: &[(&str, &str)] = &[("CANOPY_CONF", "/c"), ("SLURM_CONF", "/s")];
    assert_eq!(
        locate_with(Some(Path::new("/f")), env(both)),
        Path::new("/f")
    );
    assert_eq!(locate_with(None, env(both)), Path::new("/c"));
    assert_eq!(
        locate_with(None, env(&[("CANOPY_CONF", ""), ("SLURM_CONF", "/s")])),
        Path::new("/s")
    );
    assert_eq!(locate_with(None, env(&[])), Path::new(DEFAULT_CONF_PATH));
    assert_eq!(Config::locate(Some(Path::new("/x"))), Path::new("/x"));
}

#[test]
fn slurmctld_parameters_read_rate_limits_and_the_read_timeout() {
    let cfg = ok("MessageTimeout=20\n");
    assert_eq!(cfg.rate_limit, RateLimitConf::default());
    assert!(!cfg.rate_limit.enabled);
    // conmgr_read_timeout defaults to MessageTimeout, as in Slurm.
    assert_eq!(cfg.read_timeout(), std::time::Duration::from_secs(20));
    let cfg = ok("SlurmctldParameters=rl_enable,rl_bucket_size=5,rl_refill_rate=3,rl_refill_period=2,rl_table_size=16,rl_log_freq=-1,conmgr_read_timeout=7\nSlurmUser=slurm\n");
    assert_eq!(
        cfg.rate_limit,
        RateLimitConf {
            enabled: true,
            bucket_size: 5,
            refill_rate: 3,
            refill_period_s: 2,
            table_size: 16,
            log_freq_s: -1,
        }
    );
    assert_eq!(cfg.read_timeout(), std::time::Duration::from_secs(7));
    assert_eq!(cfg.slurm_user.as_deref(), Some("slurm"));
    assert!(cfg.warnings.is_empty(), "{:?}", cfg.warnings);
    // A later `=` replaces the list: back to the defaults.
    let cfg = ok("SlurmctldParameters=rl_enable\nSlurmctldParameters=enable_configless\n");
    assert!(!cfg.rate_limit.enabled);
    let e = err("SlurmctldParameters=rl_enable,rl_bucket_size=0\n");
    assert_err(&e, 2, "SlurmctldParameters", "rl_bucket_size=0");
    let e = err("SlurmctldParameters=rl_log_freq=often\n");
    assert_err(&e, 2, "SlurmctldParameters", "rl_log_freq=often");
}

#[test]
fn canopy_operators_are_read_from_slurmctld_parameters() {
    let cfg = parse(
        "SlurmctldHost=h\nSlurmctldParameters=rl_enable,canopy_operators=alice:@hpcops\n\
         NodeName=n1 CPUs=1\nPartitionName=p Nodes=n1\n",
    )
    .unwrap();
    assert_eq!(cfg.operators, ["alice", "@hpcops"]);
    assert!(cfg.rate_limit.enabled);
    let err = parse("SlurmctldHost=h\nSlurmctldParameters=canopy_operators=\nNodeName=n1 CPUs=1\n")
        .unwrap_err();
    assert!(err.to_string().contains("user names or @groups"), "{err}");
}

#[test]
fn prolog_keys_are_read() {
    let base = "SlurmctldHost=h\nNodeName=n1 CPUs=1\nPartitionName=p Nodes=n1\n";
    let cfg = parse(&format!(
        "{base}Prolog=/etc/slurm/prolog.d/*\nEpilog=/e\nPrologSlurmctld=/pc\nEpilogSlurmctld=/ec\n\
         PrologFlags=contain,Serial,NoHold\nPrologEpilogTimeout=30\n\
         SchedulerParameters=nohold_on_prolog_fail\n"
    ))
    .unwrap();
    let p = &cfg.prolog;
    assert_eq!(p.prolog.as_deref(), Some("/etc/slurm/prolog.d/*"));
    assert_eq!(p.epilog.as_deref(), Some("/e"));
    assert_eq!(p.prolog_slurmctld.as_deref(), Some("/pc"));
    assert_eq!(p.epilog_slurmctld.as_deref(), Some("/ec"));
    // Contain implies Alloc, as in Slurm.
    assert!(p.alloc && p.contain && p.serial && p.no_hold);
    assert_eq!(p.timeout_s, Some(30));
    assert!(p.nohold_on_fail);
    assert!(cfg.warnings.is_empty(), "{:?}", cfg.warnings);
    // X11 implies Contain and Alloc (and is itself not used yet).
    let cfg = parse(&format!("{base}PrologFlags=X11\n")).unwrap();
    assert!(cfg.prolog.alloc && cfg.prolog.contain);
    assert_eq!(
        cfg.ignored_summary().changes[0].line(),
        "slurm.conf:4: PrologFlags X11 is ignored: no X11 forwarding (srun --x11)"
    );
    let err = parse(&format!("{base}PrologFlags=Alloc,Sometimes\n")).unwrap_err();
    assert!(
        err.to_string().contains("unknown flag 'Sometimes'"),
        "{err}"
    );
    let err = parse(&format!("{base}PrologEpilogTimeout=soon\n")).unwrap_err();
    assert!(err.to_string().contains("PrologEpilogTimeout"), "{err}");
}

#[test]
fn slurmd_parameters_read_config_overrides() {
    assert!(!ok("").config_overrides);
    let cfg = ok("SlurmdParameters=shutdown_on_reboot,config_overrides\n");
    assert!(cfg.config_overrides);
    let words: Vec<String> = cfg.ignored.iter().map(|s| s.as_written()).collect();
    assert_eq!(words, ["SlurmdParameters shutdown_on_reboot"]);
    // A later line replaces the list, as the last value of a key wins.
    let cfg = ok("SlurmdParameters=config_overrides\nSlurmdParameters=l3cache_as_socket\n");
    assert!(!cfg.config_overrides);
    // An empty list is none (how a test leaves its harness's default out).
    let cfg = ok("SlurmdParameters=\n");
    assert!(!cfg.config_overrides && cfg.warnings.is_empty());
}

#[test]
fn preemption_keys_are_read_and_checked_together() {
    use crate::config::preempt::{PreemptAction, PreemptKind};
    let cfg = ok("PreemptType=preempt/partition_prio\nPreemptMode=requeue\n\
                  PreemptExemptTime=1:00:00\nPreemptParameters=youngest_first,reorder_count=3\n\
                  NodeName=n1\nPartitionName=DEFAULT GraceTime=30\n\
                  PartitionName=low Nodes=n1 PreemptMode=CANCEL\n\
                  PartitionName=high Nodes=n1 PriorityTier=5 GraceTime=0\n");
    assert_eq!(cfg.preempt.kind, PreemptKind::PartitionPrio);
    assert_eq!(cfg.preempt.mode.action, PreemptAction::Requeue);
    assert_eq!(cfg.preempt.exempt_time_s, Some(3600));
    assert!(cfg.preempt.youngest_first && !cfg.preempt.strict_order);
    assert_eq!(cfg.preempt.reorder_count, 3);
    let low = &partition(&cfg, "low").preempt;
    assert_eq!(low.grace_s, 30, "DEFAULT's GraceTime");
    assert_eq!(low.mode.map(|m| m.action), Some(PreemptAction::Cancel));
    let high = &partition(&cfg, "high").preempt;
    assert_eq!((high.grace_s, high.mode), (0, None));
    assert_eq!(cfg.priority.partition("high").tier, 5);
    // Unset: no preemption, Slurm's defaults.
    let plain = ok("");
    assert!(!plain.preempt.enabled());
    assert_eq!(plain.preempt.reorder_count, 1);

    let e = err("PreemptMode=KILL\n");
    assert_err(
        &e,
        2,
        "PreemptMode",
        "PreemptMode=KILL: expected one of OFF, CANCEL",
    );
    let e = err("PreemptType=preempt/fancy\n");
    assert_err(
        &e,
        2,
        "PreemptType",
        "expected preempt/none, preempt/partition_prio",
    );
    let e = err("PreemptType=preempt/partition_prio\n");
    assert_err(
        &e,
        2,
        "PreemptType",
        "PreemptType and PreemptMode values incompatible",
    );
    let e = err("PreemptType=preempt/partition_prio\nPreemptMode=SUSPEND\n");
    assert_err(
        &e,
        3,
        "PreemptMode",
        "PreemptMode=SUSPEND requires GANG too",
    );
    let e = err("PreemptParameters=reorder_count=9\n");
    assert_err(
        &e,
        2,
        "PreemptParameters",
        "reorder_count=9: expected an integer between 0 and 5",
    );
    let e = err("NodeName=n1\nPartitionName=p Nodes=n1 PreemptMode=often\n");
    assert_err(&e, 3, "PreemptMode", "PreemptMode=often");
}

#[test]
fn canopy_event_retention_is_a_slurm_duration() {
    let conf = |p: &str| {
        parse(&format!(
            "SlurmctldHost=h\nSlurmctldParameters={p}\nNodeName=n1 CPUs=1\nPartitionName=p Nodes=n1\n"
        ))
    };
    assert_eq!(conf("rl_enable").unwrap().event_retention_s, None);
    assert_eq!(
        conf("canopy_event_retention=2-0")
            .unwrap()
            .event_retention_s,
        Some(2 * 86_400)
    );
    assert_eq!(
        conf("canopy_event_retention=90").unwrap().event_retention_s,
        Some(90 * 60),
        "a bare number is minutes, as in slurm.conf"
    );
    for bad in [
        "canopy_event_retention=",
        "canopy_event_retention=soon",
        "canopy_event_retention=0",
    ] {
        let err = conf(bad).unwrap_err();
        assert!(
            err.to_string().contains("canopy_event_retention"),
            "{bad}: {err}"
        );
    }
}
