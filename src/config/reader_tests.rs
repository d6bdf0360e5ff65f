//! One test per rule where Slurm 22.05's reader (read_config.c) gives one spelling of a
//! value precedence over another, derives a value the file leaves out, or corrects one,
//! so canopy reads a site's file to the same values. Each rule was checked against the
//! real slurmctld 22.05 where it logs (its messages are the warnings' text).

use std::path::Path;

use super::types::*;

fn parse(text: &str) -> Result<Config, ConfigError> {
    Config::parse_str(
        &format!("SlurmctldHost=ctl\n{text}"),
        Path::new("slurm.conf"),
    )
}

fn node<'a>(cfg: &'a Config, name: &str) -> &'a NodeConf {
    &cfg.nodes[cfg.node_index(name).unwrap()]
}

#[test]
fn cpus_come_before_procs_whatever_the_order_and_even_from_default() {
    // DeepOps' DGX line: CPUs=256 ... Procs=128 is a 256-CPU node.
    let cfg = parse(
        "NodeName=dgx CPUs=256 Sockets=2 CoresPerSocket=64 ThreadsPerCore=2 Procs=128\n\
         NodeName=b Procs=4 CPUs=8\nNodeName=c Procs=4\n\
         NodeName=DEFAULT CPUs=6\nNodeName=d Procs=2\n",
    )
    .unwrap();
    assert_eq!(node(&cfg, "dgx").cpus, 256);
    assert_eq!(node(&cfg, "b").cpus, 8);
    assert_eq!(node(&cfg, "c").cpus, 4);
    // Slurm reads CPUs of the line, CPUs of DEFAULT, then Procs.
    assert_eq!(node(&cfg, "d").cpus, 6);
    assert!(cfg.warnings.is_empty(), "{:?}", cfg.warnings);
}

#[test]
fn feature_comes_before_features_then_default() {
    let cfg = parse(
        "NodeName=DEFAULT Features=dflt\nNodeName=a Features=x Feature=y\n\
         NodeName=b Features=x\nNodeName=c\n",
    )
    .unwrap();
    assert_eq!(node(&cfg, "a").features, ["y"]);
    assert_eq!(node(&cfg, "b").features, ["x"]);
    assert_eq!(node(&cfg, "c").features, ["dflt"]);
}

#[test]
fn node_line_defaults() {
    let cfg = parse("NodeName=n1\nNodeName=n2 NodeHostname=h2\nNodeName=n3 NodeHostname=h3 NodeAddr=10.0.0.3 Port=7000\n").unwrap();
    let n1 = node(&cfg, "n1");
    assert_eq!(
        (
            n1.cpus,
            n1.sockets,
            n1.cores_per_socket,
            n1.threads_per_core,
            n1.boards
        ),
        (1, 1, 1, 1, 1)
    );
    assert_eq!((n1.real_memory_mb, n1.tmp_disk_mb, n1.weight), (1, 0, 1));
    assert_eq!(
        (n1.hostname.as_str(), n1.addr.as_str(), n1.port),
        ("n1", "n1", 6818)
    );
    // NodeAddr defaults to NodeHostname, not NodeName.
    let n2 = node(&cfg, "n2");
    assert_eq!((n2.hostname.as_str(), n2.addr.as_str()), ("h2", "h2"));
    let n3 = node(&cfg, "n3");
    assert_eq!((n3.addr.as_str(), n3.port), ("10.0.0.3", 7000));
}

#[test]
fn weight_infinite_is_kept_one_below() {
    let cfg = parse("NodeName=n1 Weight=4294967295\nNodeName=n2 Weight=0\n").unwrap();
    assert_eq!(node(&cfg, "n1").weight, 4_294_967_294);
    assert_eq!(node(&cfg, "n2").weight, 0);
}

#[test]
fn sockets_per_board_wins_over_sockets_with_slurms_error() {
    let cfg = parse("NodeName=a Sockets=4 SocketsPerBoard=2 CoresPerSocket=2\n").unwrap();
    let a = node(&cfg, "a");
    assert_eq!((a.sockets, a.cpus), (2, 4));
    assert_eq!(
        cfg.warnings,
        ["slurm.conf:2: NodeNames=a Sockets=# and SocketsPerBoard=# is invalid , using SocketsPerBoard"]
    );
    let cfg = parse("NodeName=b Boards=2 SocketsPerBoard=2 CoresPerSocket=4\n").unwrap();
    let b = node(&cfg, "b");
    assert_eq!((b.boards, b.sockets, b.cpus), (2, 4, 16));
}

#[test]
fn sockets_are_inferred_from_cpus_by_whole_division() {
    // CPUs=10 over 4 cores a socket: 2 sockets, then CPUs fits no level and becomes 8.
    let cfg = parse(
        "NodeName=a CPUs=10 CoresPerSocket=4\nNodeName=b CPUs=12 CoresPerSocket=4\n\
                     NodeName=c CPUs=2 CoresPerSocket=4\n",
    )
    .unwrap();
    let a = node(&cfg, "a");
    assert_eq!((a.sockets, a.cpus), (2, 8));
    let b = node(&cfg, "b");
    assert_eq!((b.sockets, b.cpus), (3, 12));
    // Never fewer than one socket.
    let c = node(&cfg, "c");
    assert_eq!((c.sockets, c.cpus), (1, 4));
    assert_eq!(cfg.warnings.len(), 2, "{:?}", cfg.warnings);
    assert!(cfg.warnings[0].starts_with("slurm.conf:2: NodeNames=a CPUs=10 match no Sockets"));
}

#[test]
fn boards_above_sockets_are_reset_to_one() {
    let cfg = parse("NodeName=a Boards=2 Sockets=1 CoresPerSocket=2\n").unwrap();
    let a = node(&cfg, "a");
    assert_eq!((a.boards, a.sockets, a.cpus), (1, 1, 2));
    assert_eq!(
        cfg.warnings,
        ["slurm.conf:2: NodeNames=a Sockets(1) < Boards(2) resetting Boards=1"]
    );
}

#[test]
fn zero_counts_are_reset_to_one_with_slurms_error() {
    for attr in [
        "CPUs",
        "Boards",
        "Sockets",
        "SocketsPerBoard",
        "CoresPerSocket",
        "ThreadsPerCore",
    ] {
        let cfg = parse(&format!("NodeName=a {attr}=0\n")).unwrap();
        let a = node(&cfg, "a");
        assert_eq!((a.cpus, a.sockets, a.boards), (1, 1, 1), "{attr}");
        assert_eq!(
            cfg.warnings,
            [format!(
                "slurm.conf:2: NodeNames=a {attr}=0 is invalid, reset to 1"
            )]
        );
    }
}

#[test]
fn old_controller_keys_with_backup() {
    let cfg = parse_raw(
        "ControlMachine=head\nControlAddr=10.0.0.1\nBackupController=head2\nBackupAddr=10.0.0.2\n",
    );
    assert_eq!(
        (cfg.control_host.as_str(), cfg.control_addr.as_str()),
        ("head", "10.0.0.1")
    );
    assert_eq!(
        cfg.backup_controllers,
        [("head2".into(), "10.0.0.2".into())]
    );
    assert_eq!(
        cfg.ignored_summary().changes[0].first,
        "BackupController=head2"
    );
    let e = Config::parse_str(
        "ControlMachine=head\nBackupAddr=10.0.0.2\n",
        Path::new("slurm.conf"),
    )
    .unwrap_err();
    assert_eq!((e.line, e.key.as_str()), (2, "BackupAddr"));
    assert_eq!(e.message, "BackupAddr specified without BackupController");
    let e = Config::parse_str("ControlMachine=a,b\n", Path::new("slurm.conf")).unwrap_err();
    assert_eq!(
        e.message,
        "ControlMachine has multiple host names, so ControlAddr must be specified."
    );
    let e = Config::parse_str(
        "SlurmctldHost=a\nSlurmctldHost=a(10.0.0.1)\n",
        Path::new("slurm.conf"),
    )
    .unwrap_err();
    assert_eq!(
        (e.line, e.message.as_str()),
        (2, "Duplicate SlurmctldHost records: a")
    );
    // A second SlurmctldHost is a backup, shown as host(addr).
    let cfg = parse_raw("SlurmctldHost=a\nSlurmctldHost=b(10.0.0.9)\nBackupController=c\n");
    assert_eq!(cfg.backup_controllers, [("b".into(), "10.0.0.9".into())]);
    assert_eq!(
        cfg.warnings,
        ["slurm.conf:3: Ignoring BackupController since SlurmctldHost is set."]
    );
}

fn parse_raw(text: &str) -> Config {
    Config::parse_str(text, Path::new("slurm.conf")).unwrap()
}

#[test]
fn shared_is_the_old_oversubscribe_and_yields_to_it() {
    let cfg = parse(
        "NodeName=n1\nPartitionName=a Nodes=n1 Shared=EXCLUSIVE\n\
         PartitionName=b Nodes=n1 Shared=YES OverSubscribe=FORCE:2\n\
         PartitionName=DEFAULT OverSubscribe=NO\nPartitionName=c Nodes=n1 Shared=YES:4\n",
    )
    .unwrap();
    use crate::model::part_opts::OverSubscribe;
    let over = |p: &str| {
        cfg.partitions
            .iter()
            .find(|x| x.name == p)
            .map(|x| x.opts.oversubscribe)
    };
    assert_eq!(over("a"), Some(OverSubscribe::Exclusive));
    assert_eq!(over("b"), Some(OverSubscribe::Force(2)));
    // OverSubscribe of DEFAULT comes before Shared of the line, as in Slurm.
    assert_eq!(over("c"), Some(OverSubscribe::No));
    assert!(cfg.ignored.iter().all(|s| s.key != "Shared"));
}

#[test]
fn deny_lists_beside_allow_lists_are_dropped() {
    let cfg = parse(
        "NodeName=n1\nPartitionName=p Nodes=n1 AllowAccounts=a DenyAccounts=b \
         AllowQos=q DenyQos=r\nPartitionName=o Nodes=n1 AllowAccounts=ALL DenyAccounts=b\n",
    )
    .unwrap();
    let p = &cfg.partitions[0].access;
    assert!(p.deny_accounts.is_empty() && p.deny_qos.is_empty());
    assert_eq!(p.allow_accounts.as_deref(), Some(&["a".to_string()][..]));
    // ALL is no list: the deny list stands.
    assert_eq!(cfg.partitions[1].access.deny_accounts, ["b"]);
    assert_eq!(
        cfg.warnings,
        [
            "slurm.conf:3: partition p: Both AllowAccounts and DenyAccounts are defined, DenyAccounts will be ignored",
            "slurm.conf:3: partition p: Both AllowQos and DenyQos are defined, DenyQos will be ignored",
        ]
    );
}

/// Slurm 22.05 refuses FastSchedule=0 and 2; canopy loads files written for
/// older Slurm, with a warning naming what it does instead.
#[test]
fn fast_schedule_is_read_as_what_replaced_it() {
    let cfg = parse("FastSchedule=1\n").unwrap();
    assert_eq!(
        cfg.warnings,
        ["slurm.conf:2: Ignoring obsolete FastSchedule=1 option. Please remove from your configuration."]
    );
    assert!(!cfg.config_overrides);
    let cfg = parse("FastSchedule=2\n").unwrap();
    assert!(cfg.config_overrides);
    assert!(
        cfg.warnings[0].contains("read as SlurmdParameters=config_overrides"),
        "{:?}",
        cfg.warnings
    );
    let cfg = parse("FastSchedule=0\n").unwrap();
    assert!(!cfg.config_overrides);
    assert!(
        cfg.warnings[0].contains("FastSchedule=0 was removed")
            && cfg.warnings[0].contains("drained"),
        "{:?}",
        cfg.warnings
    );
}

#[test]
fn plugins_named_without_their_type() {
    let cfg =
        parse("TaskPlugin=affinity,cgroup\nProctrackType=linuxproc\nPriorityType=multifactor\n")
            .unwrap();
    assert_eq!(cfg.task_plugins, ["task/affinity", "task/cgroup"]);
    assert!(!cfg.proctrack_cgroup);
    assert_eq!(cfg.priority_type, "priority/multifactor");
}

#[test]
fn every_global_setting_is_kept_as_written_for_show_config() {
    let cfg = parse(
        "SlurmctldParameters=enable_configless\nSlurmctldParameters+=idle_on_node_suspend\n\
         suspendtime=300\nSuspendTime=600\n",
    )
    .unwrap();
    let get = |k: &str| {
        cfg.settings
            .iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.as_str())
    };
    assert_eq!(get("SlurmctldHost"), Some("ctl"));
    assert_eq!(
        get("SlurmctldParameters"),
        Some("enable_configless,idle_on_node_suspend")
    );
    // Slurm's spelling, the last value.
    assert_eq!(get("SuspendTime"), Some("600"));
}

#[test]
fn ignored_node_attributes_are_kept_per_node_for_show_node() {
    let cfg = parse(
        "NodeName=DEFAULT CoreSpecCount=2\nNodeName=a[1-2] MemSpecLimit=1024 Boards=1 TmpDisk=100\n\
         NodeName=b CoreSpecCount=4\n",
    )
    .unwrap();
    let attrs = |n: &str| cfg.node_ignored_attrs(cfg.node_index(n).unwrap()).to_vec();
    let pair = |k: &str, v: &str| (k.to_string(), v.to_string());
    assert_eq!(
        attrs("a2"),
        [pair("CoreSpecCount", "2"), pair("MemSpecLimit", "1024")]
    );
    assert_eq!(attrs("b"), [pair("CoreSpecCount", "4")]);
    assert_eq!(node(&cfg, "a1").tmp_disk_mb, 100);
}

#[test]
fn a_list_key_set_again_replaces_its_ignored_words() {
    let cfg = parse("SchedulerParameters=defer\nSchedulerParameters=salloc_wait_nodes\n").unwrap();
    let words: Vec<String> = cfg.ignored.iter().map(|s| s.as_written()).collect();
    assert_eq!(words, ["SchedulerParameters salloc_wait_nodes"]);
    let cfg = parse(
        "SlurmctldParameters=enable_configless\nSlurmctldParameters+=cloud_dns,user_resv_delete\n",
    )
    .unwrap();
    // cloud_dns is read (power saving); the other two are kept as ignored.
    assert_eq!(cfg.ignored.len(), 2);
}
