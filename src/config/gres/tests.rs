//! gres.conf and node `Gres=` merged into per-node inventories, with fixtures
//! written for these tests (and, ignored by default, the real sites' files).

use super::*;
use std::path::PathBuf;

const BASE: &str = "ClusterName=t\nSlurmctldHost=c0\n";

fn load(slurm: &str, gres: Option<&str>) -> Result<Config, ConfigError> {
    let text = format!("{BASE}{slurm}");
    Config::parse_str_with_gres(
        &text,
        Path::new("/x/slurm.conf"),
        gres.map(|g| (g, Path::new("/x/gres.conf"))),
    )
}

fn node<'a>(cfg: &'a Config, name: &str) -> &'a NodeGres {
    let i = cfg.node_index(name).expect("node exists");
    cfg.node_gres(i).expect("gres for every node")
}

fn files(g: &NodeGres) -> Vec<(u32, Option<&str>, Option<&str>)> {
    g.devices
        .iter()
        .map(|d| (d.index, d.type_.as_deref(), d.file.as_deref()))
        .collect()
}

#[test]
fn node_gres_values_read_as_slurm_reads_them() {
    let items = parse_node_gres("gpu:a100:4,bandwidth:no_consume:4G,nic,gpu:tesla").unwrap();
    let got: Vec<(&str, Option<&str>, u64, bool)> = items
        .iter()
        .map(|i| (i.name.as_str(), i.type_.as_deref(), i.count, i.no_consume))
        .collect();
    assert_eq!(
        got,
        [
            ("gpu", Some("a100"), 4, false),
            ("bandwidth", None, 4 << 30, true),
            ("nic", None, 1, false),
            ("gpu", Some("tesla"), 1, false),
        ]
    );
    assert_eq!(parse_node_gres("").unwrap(), []);
    assert_eq!(parse_node_gres("gpu:2(S:0-1)").unwrap()[0].count, 2);
    for bad in ["gpu:a:b:c", "gpu:2X", ":2", "gpu:a100:"] {
        assert_eq!(
            parse_node_gres(bad).unwrap_err(),
            format!("Bad GRES configuration: {bad}"),
            "{bad}"
        );
    }
}

#[test]
fn bad_node_gres_is_an_error_at_its_line() {
    let err = load("GresTypes=gpu\nNodeName=n1 Gres=gpu:x:y:z\n", None).unwrap_err();
    assert_eq!((err.line, err.key.as_str()), (4, "Gres"));
    assert!(
        err.message.contains("Bad GRES configuration: gpu:x:y:z"),
        "{err}"
    );
}

#[test]
fn node_gres_names_outside_gres_types_are_dropped_with_slurms_error() {
    let cfg = load("GresTypes=gpu\nNodeName=n[1-3] Gres=gpu:2,fpga:1\n", None).unwrap();
    let g = node(&cfg, "n1");
    assert_eq!(g.configured.len(), 1);
    // One warning for the line, naming its nodes.
    let w: Vec<&String> = cfg.warnings.iter().filter(|w| w.contains("fpga")).collect();
    assert_eq!(
        w,
        ["/x/slurm.conf:4: Invalid GRES configured on node n[1-3]: fpga (not in GresTypes); ignored"]
    );
}

#[test]
fn slurm_conf_alone_gives_count_only_gres_and_indexed_gpus() {
    let cfg = load(
        "GresTypes=gpu,bandwidth\nNodeName=n1 Gres=gpu:2,bandwidth:no_consume:4G\n",
        None,
    )
    .unwrap();
    let g = node(&cfg, "n1");
    assert_eq!(files(g), [(0, None, None), (1, None, None)]);
    assert_eq!(g.pools.len(), 1);
    let p = &g.pools[0];
    assert_eq!(
        (p.name.as_str(), p.count, p.no_consume),
        ("bandwidth", 4 << 30, true)
    );
    assert!(g.problems.is_empty());
    assert!(cfg.gres.path.is_none());
    assert_eq!(g.total("gpu", None), 2);
}

#[test]
fn file_ranges_give_devices_and_count_defaults_to_the_files() {
    let cfg = load(
        "GresTypes=gpu\nNodeName=g[1-2] CPUs=8 Gres=gpu:4\nNodeName=c1 CPUs=8\n",
        Some("NodeName=g[1-2] Name=gpu File=/dev/nvidia[0-3]\n"),
    )
    .unwrap();
    for n in ["g1", "g2"] {
        let g = node(&cfg, n);
        assert_eq!(
            files(g),
            [
                (0, None, Some("/dev/nvidia0")),
                (1, None, Some("/dev/nvidia1")),
                (2, None, Some("/dev/nvidia2")),
                (3, None, Some("/dev/nvidia3")),
            ]
        );
        assert!(g.problems.is_empty(), "{:?}", g.problems);
        // No Flags: a GPU gets every env variable, as in Slurm.
        assert!(g.devices[0].flags.nvidia_env && g.devices[0].flags.opencl_env);
    }
    assert!(node(&cfg, "c1").devices.is_empty());
    assert_eq!(cfg.gres.path, Some(PathBuf::from("/x/gres.conf")));
}

#[test]
fn typed_gpus_on_two_sockets_keep_their_cores_and_slurm_conf_order() {
    let cfg = load(
        "GresTypes=gpu\nNodeName=n1 Sockets=2 CoresPerSocket=8 ThreadsPerCore=2 \
         Gres=gpu:v100:2,gpu:a100:2\n",
        Some(
            "# two sockets, one type each\n\
             NodeName=n1 Name=gpu Type=a100 File=/dev/nvidia[0-1] Cores=0-7\n\
             nodename=n1 name=gpu type=v100 file=/dev/nvidia[2-3] cores=8-15 Links=-1,0\n",
        ),
    )
    .unwrap();
    let g = node(&cfg, "n1");
    // Indices follow slurm.conf's items (v100 first), then gres.conf order.
    assert_eq!(
        files(g),
        [
            (0, Some("v100"), Some("/dev/nvidia2")),
            (1, Some("v100"), Some("/dev/nvidia3")),
            (2, Some("a100"), Some("/dev/nvidia0")),
            (3, Some("a100"), Some("/dev/nvidia1")),
        ]
    );
    assert_eq!(g.devices[0].cores, Some((8..16).collect()));
    assert_eq!(g.devices[0].links.as_deref(), Some("-1,0"));
    assert_eq!(g.devices[2].cores, Some((0..8).collect()));
    assert_eq!(g.devices_of("gpu", Some("a100")).count(), 2);
}

#[test]
fn cpus_are_turned_into_cores() {
    let cfg = load(
        "GresTypes=gpu\nNodeName=n1 Sockets=2 CoresPerSocket=4 ThreadsPerCore=2 Gres=gpu:1\n",
        Some("Name=gpu File=/dev/nvidia0 CPUs=0-7\n"),
    )
    .unwrap();
    assert_eq!(node(&cfg, "n1").devices[0].cores, Some(vec![0, 1, 2, 3]));
}

#[test]
fn cores_beyond_the_node_are_a_node_problem() {
    let cfg = load(
        "GresTypes=gpu\nNodeName=n1 Sockets=1 CoresPerSocket=4 Gres=gpu:1\n",
        Some("Name=gpu File=/dev/nvidia0 Cores=0-15\n"),
    )
    .unwrap();
    let g = node(&cfg, "n1");
    assert!(
        g.problems
            .iter()
            .any(|p| p.contains("Invalid GRES data for gpu, Cores=0-15 (only 4 cores")),
        "{:?}",
        g.problems
    );
}

#[test]
fn fewer_files_than_slurm_conf_counts_is_a_node_problem() {
    let cfg = load(
        "GresTypes=gpu\nNodeName=n[1-2] Gres=gpu:4\n",
        Some("Name=gpu File=/dev/nvidia[0-1]\n"),
    )
    .unwrap();
    let g = node(&cfg, "n1");
    assert_eq!(g.devices.len(), 2);
    assert_eq!(
        g.problems,
        ["gres/gpu count reported lower than configured (2 < 4)"]
    );
}

#[test]
fn types_that_disagree_are_a_node_problem_and_the_line_is_left_over() {
    let cfg = load(
        "GresTypes=gpu\nNodeName=n1 Gres=gpu:a100:2\n",
        Some("NodeName=n1 Name=gpu Type=v100 File=/dev/nvidia[0-1]\n"),
    )
    .unwrap();
    let g = node(&cfg, "n1");
    assert!(g.devices.is_empty());
    assert_eq!(
        g.problems,
        ["gres/gpu:a100 count reported lower than configured (0 < 2)"]
    );
    assert!(
        cfg.warnings.iter().any(|w| w.starts_with(
            "/x/gres.conf:1: A line in gres.conf for GRES gpu:v100 has 2 more configured"
        )),
        "{:?}",
        cfg.warnings
    );
}

#[test]
fn more_files_than_needed_are_cut_and_reported() {
    let cfg = load(
        "GresTypes=gpu\nNodeName=n1 Gres=gpu:2\n",
        Some("NodeName=n1 Name=gpu File=/dev/nvidia[0-3]\n"),
    )
    .unwrap();
    let g = node(&cfg, "n1");
    assert_eq!(g.devices.len(), 2);
    assert!(g.problems.is_empty());
    assert!(cfg
        .warnings
        .iter()
        .any(|w| w.contains("gpu has 2 more configured")));
}

#[test]
fn autodetect_global_and_per_node() {
    let cfg = load(
        "GresTypes=gpu\nNodeName=n[1-3] Gres=gpu:4\n",
        Some(
            "AutoDetect=nvml\n\
             NodeName=n3 AutoDetect=off Name=gpu File=/dev/nvidia[0-3]\n",
        ),
    )
    .unwrap();
    assert_eq!(cfg.gres.autodetect, Some(AutoDetect::Nvml));
    let n1 = node(&cfg, "n1");
    assert!(n1.detects());
    // Left for the node daemon to find: no devices yet, and no problem.
    assert!(n1.devices.is_empty() && n1.problems.is_empty());
    let n3 = node(&cfg, "n3");
    assert_eq!(n3.autodetect, Some(AutoDetect::Off));
    assert_eq!(n3.devices.len(), 4);
    let twice = load(
        "GresTypes=gpu\nNodeName=n1 Gres=gpu:1\n",
        Some("NodeName=n1 AutoDetect=off\nNodeName=n1 AutoDetect=nvml\n"),
    )
    .unwrap();
    assert_eq!(
        node(&twice, "n1").problems,
        ["gres.conf: duplicate node-local AutoDetect specification does not match the first"]
    );
}

#[test]
fn autodetect_with_a_type_line_for_every_node() {
    // giovtorres-docker's shape: detection plus a type for all nodes.
    let cfg = load(
        "GresTypes=gpu\nNodeName=n1 Gres=gpu:nvidia:1\n",
        Some("AutoDetect=nvml\nName=gpu Type=nvidia\n"),
    )
    .unwrap();
    let g = node(&cfg, "n1");
    assert!(g.problems.is_empty(), "{:?}", g.problems);
    assert_eq!(files(g), [(0, Some("nvidia"), None)]);
}

#[test]
fn count_only_resources_in_gres_conf() {
    let cfg = load(
        "GresTypes=bandwidth,mps,gpu\nNodeName=n1 Gres=bandwidth:no_consume:4G,gpu:1,mps:200\n",
        Some(
            "Name=bandwidth Count=4G\n\
             Name=gpu File=/dev/nvidia0\n\
             Name=mps Count=200 File=/dev/nvidia0\n",
        ),
    )
    .unwrap();
    let g = node(&cfg, "n1");
    assert!(g.problems.is_empty(), "{:?}", g.problems);
    let pools: Vec<(&str, u64, bool)> = g
        .pools
        .iter()
        .map(|p| (p.name.as_str(), p.count, p.no_consume))
        .collect();
    assert_eq!(pools, [("bandwidth", 4 << 30, true), ("mps", 200, false)]);
    assert_eq!(g.pools[1].files, ["/dev/nvidia0"]);
    assert_eq!(g.devices.len(), 1);
}

#[test]
fn multiple_files_make_one_device() {
    let cfg = load(
        "GresTypes=gpu\nNodeName=n1 Gres=gpu:1\n",
        Some("Name=gpu MultipleFiles=/dev/nvidia0,/dev/nvidia-caps/nvidia-cap21\n"),
    )
    .unwrap();
    let d = &node(&cfg, "n1").devices[0];
    assert_eq!(d.file.as_deref(), Some("/dev/nvidia0"));
    assert_eq!(d.extra_files, ["/dev/nvidia-caps/nvidia-cap21"]);
}

#[test]
fn flags_are_read_and_env_flags_carry_to_the_next_line() {
    let cfg = load(
        "GresTypes=gpu\nNodeName=n1 Gres=gpu:2\n",
        Some(
            "Name=gpu File=/dev/nvidia0 Flags=nvidia_gpu_env,CountOnly\n\
             Name=gpu File=/dev/nvidia1\n",
        ),
    )
    .unwrap();
    let g = node(&cfg, "n1");
    assert!(g.devices[0].flags.count_only);
    let second = g.devices[1].flags;
    assert!(second.nvidia_env && !second.amd_env && !second.count_only);
}

#[test]
fn malformed_lines_are_errors_naming_file_and_line() {
    let cases = [
        (
            "Name=gpu File=/dev/nvidia[0-1] Count=3\n",
            "Count",
            "count does not match File value",
        ),
        ("Name=gpu Count=lots\n", "Count", "invalid count"),
        (
            "Name=gpu File=/dev/nvidia0 MultipleFiles=/dev/a,/dev/b\n",
            "MultipleFiles",
            "mutually exclusive",
        ),
        (
            "Name=gpu MultipleFiles=/dev/a\n",
            "MultipleFiles",
            "does not contain multiple files",
        ),
        (
            "Name=gpu File=/dev/nvidia[0-1 \n",
            "File",
            "can't parse File",
        ),
        ("Name=gpu Cores=3-1\n", "Cores", "id ranges"),
        (
            "Name=gpu Flags=no_gpu_env,amd_gpu_env\n",
            "Flags",
            "no_gpu_env",
        ),
    ];
    for (text, key, want) in cases {
        let gres = format!("# comment\n\n{text}");
        let err = load("GresTypes=gpu\nNodeName=n1 Gres=gpu:1\n", Some(&gres)).unwrap_err();
        assert_eq!(err.file, PathBuf::from("/x/gres.conf"), "{text}");
        assert_eq!((err.line, err.key.as_str()), (3, key), "{text}: {err}");
        assert!(err.message.contains(want), "{text}: {err}");
        assert!(err.to_string().starts_with("/x/gres.conf:3: "), "{err}");
    }
}

#[test]
fn unknown_keys_names_and_autodetect_values_warn() {
    let cfg = load(
        "GresTypes=gpu\nNodeName=n1 Gres=gpu:1\n",
        Some(
            "Name=gpu File=/dev/nvidia0 Colour=red\n\
             Name=fpga Count=1\n\
             AutoDetect=magic\n\
             Type=a100\n",
        ),
    )
    .unwrap();
    let w = cfg.warnings.join("\n");
    assert!(
        w.contains("/x/gres.conf:1: gres.conf key Colour is not known"),
        "{w}"
    );
    assert!(
        w.contains("/x/gres.conf:2: Ignoring gres.conf record, invalid name: fpga"),
        "{w}"
    );
    assert!(
        w.contains("/x/gres.conf:3: unknown autodetect flag 'magic'"),
        "{w}"
    );
    assert!(
        w.contains("/x/gres.conf:4: Invalid GRES data, no type name"),
        "{w}"
    );
}

#[test]
fn mixed_file_and_fileless_lines_are_a_node_problem() {
    let cfg = load(
        "GresTypes=gpu\nNodeName=n1 Gres=gpu:2\n",
        Some("Name=gpu File=/dev/nvidia0\nName=gpu Count=1\n"),
    )
    .unwrap();
    assert!(node(&cfg, "n1")
        .problems
        .iter()
        .any(|p| p.contains("some records have \"File\" specification while others do not")));
}

#[test]
fn gres_conf_is_read_beside_slurm_conf() {
    let dir = std::env::temp_dir().join(format!("canopy-gres-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let slurm = dir.join("slurm.conf");
    std::fs::write(
        &slurm,
        format!("{BASE}GresTypes=gpu\nNodeName=n1 Gres=gpu:2\n"),
    )
    .unwrap();
    let without = Config::load(&slurm).unwrap();
    assert!(without.gres.path.is_none());
    std::fs::write(dir.join("gres.conf"), "Name=gpu File=/dev/nvidia[0-1]\n").unwrap();
    let with = Config::load(&slurm).unwrap();
    assert_eq!(with.gres.path, Some(dir.join("gres.conf")));
    assert_eq!(
        with.node_gres(0).unwrap().devices[1].file.as_deref(),
        Some("/dev/nvidia1")
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// Every slurm.conf under ../shared/site-confs that has a gres.conf beside
/// it loads, and its GPU nodes get devices or AutoDetect.
#[test]
#[ignore = "needs ../shared/site-confs (not in the repository); run with --ignored where it exists"]
fn site_confs_with_gres_load() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/site-confs");
    assert!(root.is_dir(), "{} is missing", root.display());
    let mut checked = 0;
    let mut stack = vec![root];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let p = entry.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.file_name().is_some_and(|n| n == "gres.conf")
                && dir.join("slurm.conf").exists()
            {
                let cfg = Config::load(&dir.join("slurm.conf"))
                    .unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
                assert_eq!(cfg.gres.nodes.len(), cfg.nodes.len());
                for (n, g) in cfg.nodes.iter().zip(&cfg.gres.nodes) {
                    assert!(
                        g.problems.is_empty(),
                        "{}: {}: {:?}",
                        dir.display(),
                        n.name,
                        g.problems
                    );
                    // Every GPU slurm.conf promises is a device, or the node
                    // daemon is to detect them.
                    let promised: u64 = g
                        .configured
                        .iter()
                        .filter(|i| i.name == "gpu")
                        .map(|i| i.count)
                        .sum();
                    let have = g.total("gpu", None);
                    assert!(
                        g.detects() || have == promised,
                        "{}: {}: {have} of {promised}",
                        dir.display(),
                        n.name
                    );
                }
                let devices: usize = cfg.gres.nodes.iter().map(|g| g.devices.len()).sum();
                eprintln!("{}: {devices} devices", dir.display());
                checked += 1;
            }
        }
    }
    assert!(checked > 0, "no slurm.conf + gres.conf pair found");
}

#[test]
fn a_large_cluster_merges_quickly() {
    // 8192 GPU nodes named by one gres.conf line: each node's lookup is a
    // set probe, not a scan of the line's nodes.
    let cfg = load(
        "GresTypes=gpu\nNodeName=g[1-8192] Sockets=2 CoresPerSocket=16 Gres=gpu:a100:8\n",
        Some(
            "NodeName=g[1-8192] Name=gpu Type=a100 File=/dev/nvidia[0-3] Cores=0-15\n\
             NodeName=g[1-8192] Name=gpu Type=a100 File=/dev/nvidia[4-7] Cores=16-31\n",
        ),
    )
    .unwrap();
    assert_eq!(cfg.gres.nodes.len(), 8192);
    assert!(cfg
        .gres
        .nodes
        .iter()
        .all(|g| g.devices.len() == 8 && g.problems.is_empty()));
}
