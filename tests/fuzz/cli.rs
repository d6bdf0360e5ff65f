//! sbatch's parser (command line, `SBATCH_*` variables and `#SBATCH` directives, through
//! `parse_submission`) and srun's option parser (`srun::parse`).

use std::path::PathBuf;

use canopy::cli::sbatch_args::{parse_submission, SubmitContext};
use canopy::cli::srun;
use proptest::collection::vec;
use proptest::prelude::*;

use crate::support;

const SBATCH_OPTIONS: &[&str] = &[
    "job-name",
    "partition",
    "nodes",
    "ntasks",
    "cpus-per-task",
    "ntasks-per-node",
    "mem",
    "mem-per-cpu",
    "time",
    "output",
    "error",
    "input",
    "chdir",
    "wrap",
    "export",
    "parsable",
    "hold",
    "quiet",
    "open-mode",
    "array",
    "signal",
    "dependency",
    "kill-on-invalid-dep",
    "help",
    "usage",
    "version",
    "account",
    "begin",
    "clusters",
    "comment",
    "constraint",
    "exclude",
    "exclusive",
    "gpus",
    "gres",
    "licenses",
    "mail-type",
    "mail-user",
    "nice",
    "no-requeue",
    "nodelist",
    "priority",
    "qos",
    "requeue",
    "reservation",
    "test-only",
    "verbose",
    "wait",
    "mem-per-gpu",
    "gpus-per-node",
    "gpus-per-task",
    "gpus-per-socket",
    "cpus-per-gpu",
    "gres-flags",
    "extra-node-info",
    "hint",
    "threads-per-core",
    "ntasks-per-core",
    "gpu-bind",
    "hetjob",
    "n",
    "no",
];
const SBATCH_SHORT: &str = "JpNnctoeiDHQadhuVAbMCxGLkFwqvWs";

const SRUN_OPTIONS: &[&str] = &[
    "account",
    "chdir",
    "cpus-per-task",
    "dependency",
    "exclude",
    "exclusive",
    "gres",
    "help",
    "hold",
    "immediate",
    "job-name",
    "label",
    "mem",
    "mem-per-cpu",
    "multi-prog",
    "nodelist",
    "nodes",
    "ntasks",
    "ntasks-per-node",
    "output",
    "error",
    "input",
    "open-mode",
    "overlap",
    "partition",
    "pty",
    "quiet",
    "relative",
    "signal",
    "test-only",
    "time",
    "unbuffered",
    "usage",
    "verbose",
    "version",
    "wait",
    "jobid",
    "kill-on-bad-exit",
    "het-group",
    "export",
    "distribution",
    "no-allocate",
    "cpu-bind",
    "gpus",
    "gpus-per-task",
    "cpus-per-gpu",
    "mem-per-gpu",
    "gres-flags",
    "extra-node-info",
    "hint",
    "threads-per-core",
    "ntasks-per-core",
    "gpu-bind",
];
const SRUN_SHORT: &str = "ADcdxJlnNopeitIKWuvVwHQrXZmkMs";

/// Option values, good and bad: numbers at and past every integer width, times, memory
/// sizes, arrays, signals, dependencies, hostlists, quoting and odd characters.
const VALUES: &[&str] = &[
    "",
    "0",
    "1",
    "2",
    "4",
    "-1",
    "+1",
    "07",
    "0x10",
    "1.5",
    "4294967295",
    "4294967296",
    "18446744073709551616",
    "99999999999999999999999",
    "1-2",
    "2-1",
    "1-",
    "-",
    "1:2:3",
    "*:4",
    "a100:2",
    "gpu:a100:2,nic",
    "help",
    "nomultithread",
    "enforce-binding",
    "1-00:00:00",
    "10:00",
    "60:61",
    "UNLIMITED",
    "infinite",
    "4G",
    "4096",
    "1T",
    "16777216T",
    "0K",
    "1-10%2",
    "0-4294967295",
    "1,3,5-7:2",
    "[1-4]",
    "USR1@60",
    "B:TERM@1",
    "SIGKILL",
    "99@99",
    "afterok:1:2",
    "afterany:1?afterok:2",
    "singleton",
    "n[1-4]",
    "n[1-999999999999]",
    "ALL",
    "NONE",
    "yes",
    "no",
    "BEGIN,END",
    "a@b",
    "append",
    "truncate",
    "%j.out",
    "%A_%a",
    "now+1hour",
    "2030-01-01T00:00:00",
    "é",
    "a b",
    "\"",
    "'",
    "\\",
    "#",
    "--",
    "=",
    "a\u{0}b",
    "gpu:2",
    "gpu:tesla:1",
];

fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => proptest::sample::select(VALUES).prop_map(str::to_owned),
        1 => any::<i64>().prop_map(|n| n.to_string()),
        // No '/': a word that ends up as the script's name is looked up as a file, and
        // only relative names (under a directory that does not exist) are safe to try.
        1 => "[ -.0-~]{0,8}",
    ]
}

/// One command-line word or option with its value, in each spelling getopt accepts.
fn words(long: &'static [&'static str], short: &'static str) -> impl Strategy<Value = Vec<String>> {
    let shorts: Vec<char> = short.chars().collect();
    prop_oneof![
        3 => (proptest::sample::select(long), value())
            .prop_map(|(o, v)| vec![format!("--{o}={v}")]),
        2 => (proptest::sample::select(long), value())
            .prop_map(|(o, v)| vec![format!("--{o}"), v]),
        1 => proptest::sample::select(long).prop_map(|o| vec![format!("--{o}")]),
        2 => (proptest::sample::select(shorts.clone()), value())
            .prop_map(|(c, v)| vec![format!("-{c}{v}")]),
        1 => (proptest::sample::select(shorts), value())
            .prop_map(|(c, v)| vec![format!("-{c}"), v]),
        1 => value().prop_map(|v| vec![v]),
    ]
}

fn args(long: &'static [&'static str], short: &'static str) -> impl Strategy<Value = Vec<String>> {
    vec(words(long, short), 0..8).prop_map(|w| w.concat())
}

fn ctx(env: Vec<(String, String)>) -> SubmitContext {
    SubmitContext {
        cwd: PathBuf::from("/nonexistent/canopy-fuzz"),
        env,
        user: "fuzz".into(),
        uid: 1000,
        gid: 1000,
        host: "h".into(),
        argv0: "sbatch".into(),
    }
}

/// A `#SBATCH` line: options as they would be written, or arbitrary text after it.
fn directive() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => words(SBATCH_OPTIONS, SBATCH_SHORT).prop_map(|w| format!("#SBATCH {}", w.join(" "))),
        1 => any::<String>().prop_map(|s| format!("#SBATCH{s}")),
        1 => "[ -~]{0,30}".prop_map(|s| format!("#SBATCH {s}")),
        1 => "[ -~]{0,30}".prop_map(|s| format!("#SLURM {s}")),
        1 => proptest::sample::select(&["", "# comment", "  ", "echo hi", "#!/bin/sh"][..])
            .prop_map(str::to_owned),
    ]
}

fn script() -> impl Strategy<Value = Option<String>> {
    let text = (
        proptest::sample::select(&["#!/bin/sh\n", "#!/bin/bash\r\n", "", " \n", "echo\n"][..]),
        vec(directive(), 0..8),
    )
        .prop_map(|(head, lines)| format!("{head}{}\n", lines.join("\n")));
    prop_oneof![4 => text.prop_map(Some), 1 => Just(None)]
}

fn sbatch_env() -> impl Strategy<Value = Vec<(String, String)>> {
    let name = proptest::sample::select(
        &[
            "SBATCH_JOB_NAME",
            "SBATCH_PARTITION",
            "SBATCH_TIMELIMIT",
            "SBATCH_MEM_PER_NODE",
            "SBATCH_MEM_PER_CPU",
            "SBATCH_EXPORT",
            "SBATCH_ARRAY_INX",
            "SBATCH_SIGNAL",
            "SBATCH_EXCLUSIVE",
            "SBATCH_REQUEUE",
            "SBATCH_WAIT",
            "SBATCH_OPEN_MODE",
            "SBATCH_GPUS_PER_NODE",
            "SBATCH_MEM_PER_GPU",
            "SBATCH_HINT",
            "SBATCH_THREADS_PER_CORE",
            "SLURM_CONF",
            "HOME",
        ][..],
    );
    vec((name.prop_map(str::to_owned), value()), 0..3)
}

#[test]
fn fuzz_sbatch_parser() {
    let input = (args(SBATCH_OPTIONS, SBATCH_SHORT), script(), sbatch_env());
    support::run("sbatch_parser", 800, input, |(args, script, env)| {
        match parse_submission(&args, script, &ctx(env)) {
            Ok(submission) => {
                prop_assert!(!submission.submit.script.is_empty());
            }
            Err(err) => {
                prop_assert!(!err.to_string().is_empty());
                let _ = err.exit_code();
            }
        }
        Ok(())
    });
}

#[test]
fn fuzz_sbatch_directive_text() {
    // Arbitrary text after `#SBATCH`, with quotes, escapes and comments, on a script
    // that is otherwise valid.
    let line = prop_oneof![
        any::<String>(),
        vec(
            proptest::sample::select(
                &[
                    "'",
                    "\"",
                    "\\",
                    "#",
                    " ",
                    "-",
                    "--",
                    "=",
                    "a",
                    "--job-name",
                    "-J",
                    "é"
                ][..]
            ),
            0..24
        )
        .prop_map(|t| t.concat()),
    ];
    support::run("sbatch_directive_text", 800, vec(line, 1..4), |lines| {
        let script = format!(
            "#!/bin/sh\n{}\necho done\n",
            lines
                .iter()
                .map(|l| format!("#SBATCH{l}"))
                .collect::<Vec<_>>()
                .join("\n")
        );
        if let Err(err) = parse_submission(&[], Some(script), &ctx(Vec::new())) {
            prop_assert!(!err.to_string().is_empty());
        }
        Ok(())
    });
}

#[test]
fn fuzz_srun_parser() {
    let input = (args(SRUN_OPTIONS, SRUN_SHORT), vec(any::<String>(), 0..3));
    support::run("srun_parser", 800, input, |(mut args, tail)| {
        args.extend(tail);
        if let Err(err) = srun::parse(&args) {
            prop_assert!(!err.message.is_empty());
        }
        Ok(())
    });
}
