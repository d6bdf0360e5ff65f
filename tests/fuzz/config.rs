//! The slurm.conf reader (`Config::parse_str`): arbitrary text built from its syntax,
//! and mutations of valid files. Errors must name a line of the text (line 0 only for
//! the whole-file checks). gres.conf (`Config::parse_str_with_gres`): arbitrary text
//! from its keys, whose errors name a gres.conf line and whose inventories number
//! each node's devices 0, 1, 2... per name. canopy has no cgroup.conf reader to fuzz.

use std::path::Path;

use canopy::config::{Config, ConfigError};
use proptest::collection::vec;
use proptest::prelude::*;

use crate::support;

/// A directory that does not exist, so relative `Include`s fail instead of reading.
const PATH: &str = "/nonexistent/canopy-fuzz/slurm.conf";

/// Keys whose errors may concern the file as a whole (line 0).
const WHOLE_FILE_KEYS: &[&str] = &["SlurmctldHost", "FirstJobId"];

const VALID: &[&str] = &[
    include_str!("../../config/slurm.conf"),
    "SlurmctldHost=ctl\nNodeName=n[1-4] CPUs=2\nPartitionName=p Nodes=ALL Default=YES\n",
    "ClusterName=c\nControlMachine=head\nControlAddr=10.0.0.1\nSlurmdPort=7000\n\
     NodeName=DEFAULT RealMemory=1000 Feature=a,b\nNodeName=gpu[01-16] CPUs=8 \
     NodeAddr=10.1.0.[1-16] Port=[7001-7016] State=UNKNOWN\n\
     NodeSet=gpus Feature=a\nDownNodes=gpu03 State=DOWN Reason=\"bad fan\"\n\
     PartitionName=DEFAULT MaxTime=UNLIMITED\nPartitionName=g Nodes=gpus MaxNodes=4 \
     DefaultTime=1-00:00:00 State=UP\nFirstJobId=10 MaxJobId=999999\nMinJobAge=0 \
     TreeWidth=2 # trailing comment\nSelectType=select/cons_tres\nGresTypes=gpu\n",
];

const TOKENS: &[&str] = &[
    "SlurmctldHost",
    "ControlMachine",
    "ControlAddr",
    "ClusterName",
    "NodeName",
    "NodeAddr",
    "NodeHostname",
    "Port",
    "PartitionName",
    "Nodes",
    "Default",
    "State",
    "CPUs",
    "RealMemory",
    "MaxTime",
    "DefaultTime",
    "MaxNodes",
    "MinNodes",
    "TreeWidth",
    "SlurmdTimeout",
    "SlurmctldPort",
    "SlurmdPort",
    "FirstJobId",
    "MaxJobId",
    "MaxJobCount",
    "MinJobAge",
    "KillWait",
    "DownNodes",
    "NodeSet",
    "Feature",
    "Features",
    "Reason",
    "ReturnToService",
    "StateSaveLocation",
    "SlurmdSpoolDir",
    "GresTypes",
    "Include",
    "include",
    "DEFAULT",
    "ALL",
    "YES",
    "NO",
    "UP",
    "DOWN",
    "DRAIN",
    "IDLE",
    "UNKNOWN",
    "INACTIVE",
    "UNLIMITED",
    "INFINITE",
    "=",
    "+=",
    "-=",
    " ",
    " ",
    " ",
    "\t",
    "\n",
    "\n",
    "\\\n",
    "\\",
    "#",
    "\"",
    "'",
    ",",
    "[",
    "]",
    "-",
    ":",
    "(",
    ")",
    "%c",
    "%n",
    "n",
    "n[1-4]",
    "n[1-999999999999]",
    "n[01-10]",
    "n[1-65536]",
    "n[1-3],m[2-5]",
    "[1-4]",
    "[7001-7004]",
    "127.0.0.1",
    "10.0.0.[1-300]",
    "0",
    "1",
    "2",
    "16",
    "65535",
    "65536",
    "4294967295",
    "4294967296",
    "18446744073709551615",
    "99999999999999999999999",
    "-1",
    "1:00:00",
    "2-00:00:00",
    "60:60",
    "1-",
    "4G",
    "1T",
    "16777216T",
    "/nonexistent/x",
    "sub.conf",
    "é",
    "\u{0}",
];

fn token() -> impl Strategy<Value = String> {
    prop_oneof![
        8 => proptest::sample::select(TOKENS).prop_map(str::to_owned),
        1 => "[ -~]{0,6}",
        1 => any::<u64>().prop_map(|n| n.to_string()),
    ]
}

fn line_count(text: &str) -> usize {
    text.split('\n').count()
}

/// The location property shared by both targets.
fn check_error(text: &str, err: &ConfigError) -> Result<(), TestCaseError> {
    prop_assert_eq!(err.file.as_path(), Path::new(PATH));
    prop_assert!(!err.message.is_empty());
    prop_assert!(
        err.line <= line_count(text),
        "line {} of a {}-line text: {}",
        err.line,
        line_count(text),
        err
    );
    if err.line == 0 {
        prop_assert!(
            WHOLE_FILE_KEYS.contains(&err.key.as_str()),
            "no line named: {:?}",
            err
        );
    } else {
        let shown = err.to_string();
        prop_assert!(
            shown.starts_with(&format!("{PATH}:{}: ", err.line)),
            "{}",
            shown
        );
    }
    Ok(())
}

#[test]
fn fuzz_config_arbitrary_text() {
    let text = vec(token(), 0..80).prop_map(support::joined);
    support::run("config_arbitrary_text", 800, text, |text| {
        if let Err(err) = Config::parse_str(&text, Path::new(PATH)) {
            check_error(&text, &err)?;
        }
        Ok(())
    });
}

/// One change to a valid file.
#[derive(Debug, Clone)]
enum Change {
    DeleteLine(usize),
    DuplicateLine(usize),
    SwapLines(usize, usize),
    /// Inserts a token at a character position.
    InsertAt(usize, String),
    /// Replaces the value after the n-th `=` with a token.
    ReplaceValue(usize, String),
    DeleteChars(usize, usize),
    AppendLine(Vec<String>),
}

fn change() -> impl Strategy<Value = Change> {
    prop_oneof![
        any::<usize>().prop_map(Change::DeleteLine),
        any::<usize>().prop_map(Change::DuplicateLine),
        any::<(usize, usize)>().prop_map(|(a, b)| Change::SwapLines(a, b)),
        (any::<usize>(), token()).prop_map(|(at, t)| Change::InsertAt(at, t)),
        (any::<usize>(), token()).prop_map(|(at, t)| Change::ReplaceValue(at, t)),
        (any::<usize>(), 1usize..6).prop_map(|(at, n)| Change::DeleteChars(at, n)),
        vec(token(), 1..10).prop_map(Change::AppendLine),
    ]
}

fn apply(text: &str, change: &Change) -> String {
    let mut lines: Vec<String> = text.split('\n').map(str::to_owned).collect();
    let n = lines.len();
    // Positions are char boundaries, so that slicing below cannot panic.
    let boundaries: Vec<usize> = text
        .char_indices()
        .map(|(i, _)| i)
        .chain([text.len()])
        .collect();
    let pick = |at: usize| boundaries[at % boundaries.len()];
    match change {
        Change::DeleteLine(i) => {
            lines.remove(i % n);
        }
        Change::DuplicateLine(i) => {
            let line = lines[i % n].clone();
            lines.insert(i % n, line);
        }
        Change::SwapLines(a, b) => lines.swap(a % n, b % n),
        Change::InsertAt(at, token) => {
            let at = pick(*at);
            return format!("{}{token}{}", &text[..at], &text[at..]);
        }
        Change::ReplaceValue(which, token) => {
            let equals: Vec<usize> = text.match_indices('=').map(|(i, _)| i + 1).collect();
            if equals.is_empty() {
                return text.to_owned();
            }
            let start = equals[which % equals.len()];
            let end = text[start..]
                .find([' ', '\n', '\t'])
                .map_or(text.len(), |e| start + e);
            return format!("{}{token}{}", &text[..start], &text[end..]);
        }
        Change::DeleteChars(at, count) => {
            let start = pick(*at);
            let end = text[start..]
                .char_indices()
                .nth(*count)
                .map_or(text.len(), |(i, _)| start + i);
            return format!("{}{}", &text[..start], &text[end..]);
        }
        Change::AppendLine(tokens) => lines.push(tokens.concat()),
    }
    lines.join("\n")
}

#[test]
fn fuzz_config_mutated_valid_files() {
    for base in VALID {
        let parsed = Config::parse_str(base, Path::new(PATH));
        assert!(parsed.is_ok(), "base config must parse: {parsed:?}");
    }
    let input = (any::<usize>(), vec(change(), 1..4));
    support::run(
        "config_mutated_valid_files",
        800,
        input,
        |(which, changes)| {
            let mut text = VALID[which % VALID.len()].to_owned();
            for change in &changes {
                text = apply(&text, change);
            }
            if let Err(err) = Config::parse_str(&text, Path::new(PATH)) {
                check_error(&text, &err)?;
            }
            Ok(())
        },
    );
}

const GRES_PATH: &str = "/nonexistent/canopy-fuzz/gres.conf";

const GRES_SLURM_CONF: &str = "SlurmctldHost=ctl\nGresTypes=gpu,mps,bandwidth\n\
     NodeName=n[1-2] Sockets=2 CoresPerSocket=4 ThreadsPerCore=2 \
     Gres=gpu:a100:2,gpu:2,mps:100,bandwidth:no_consume:4G\n\
     NodeName=n3 CPUs=4 Gres=gpu:1\nPartitionName=p Nodes=ALL\n";

const GRES_TOKENS: &[&str] = &[
    "NodeName",
    "Name",
    "Type",
    "File",
    "MultipleFiles",
    "Count",
    "Cores",
    "CPUs",
    "Links",
    "Flags",
    "AutoDetect",
    "=",
    "\n",
    " ",
    ",",
    ":",
    "[",
    "]",
    "-",
    "n1",
    "n[1-2]",
    "n3",
    "gpu",
    "mps",
    "bandwidth",
    "fpga",
    "a100",
    "/dev/nvidia",
    "/dev/nvidia[0-3]",
    "0-7",
    "0-99",
    "-1,0",
    "nvml",
    "off",
    "CountOnly",
    "no_gpu_env",
    "nvidia_gpu_env",
    "4G",
    "2",
    "#",
    "\\",
    "\"",
];

#[test]
fn fuzz_gres_conf_text() {
    let piece = prop_oneof![
        8 => proptest::sample::select(GRES_TOKENS).prop_map(str::to_owned),
        1 => "[ -~]{0,6}",
        1 => any::<u32>().prop_map(|n| n.to_string()),
    ];
    let text = vec(piece, 0..60).prop_map(|t| t.concat());
    support::run("gres_conf_text", 800, text, |text| {
        match Config::parse_str_with_gres(
            GRES_SLURM_CONF,
            Path::new(PATH),
            Some((&text, Path::new(GRES_PATH))),
        ) {
            Err(err) => {
                prop_assert_eq!(err.file.as_path(), Path::new(GRES_PATH));
                prop_assert!(err.line >= 1 && err.line <= line_count(&text), "{}", err);
                prop_assert!(!err.message.is_empty());
            }
            Ok(cfg) => {
                prop_assert_eq!(cfg.gres.nodes.len(), cfg.nodes.len());
                for g in &cfg.gres.nodes {
                    for name in ["gpu", "mps", "bandwidth"] {
                        let idx: Vec<u32> = g
                            .devices
                            .iter()
                            .filter(|d| d.name == name)
                            .map(|d| d.index)
                            .collect();
                        prop_assert_eq!(idx.clone(), (0..idx.len() as u32).collect::<Vec<_>>());
                    }
                }
            }
        }
        Ok(())
    });
}
