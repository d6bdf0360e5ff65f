//! Golden tests: canopy's output for a scripted cluster state, compared byte
//! for byte with what real Slurm 22.05 printed for the same state. The
//! fixtures in `tests/golden/` were captured from a real Slurm cluster with
//! the same nodes and partitions; `tests/golden/INDEX.md` gives the script,
//! the configuration and each command's exit code.
//!
//! Values that change from run to run (elapsed times, the date line of `-l`,
//! the time stamp of a drain reason) are masked in both texts before they
//! are compared. Everything else — widths, padding, trailing spaces, order,
//! messages, exit codes — must match exactly.

mod common;

use std::path::Path;
use std::process::Output;
use std::time::Duration;

use canopy::wire::types::JobState;
use common::Cluster;

/// How a case's output is made comparable.
#[derive(Clone, Copy, PartialEq)]
enum Mask {
    /// Compared as is.
    Exact,
    /// Elapsed times (`0:03`, `1:00:00`) lose their digits.
    Times,
    /// As `Times`, and the first line (the `-l` date line) is dropped.
    DateLine,
    /// Timestamps (`2026-11-21T08:23:53`) lose their digits, on stdout and
    /// stderr (`sbatch --test-only` prints its estimate on stderr), and so
    /// does the id in `Job N to start`: Slurm numbers a pending array's
    /// tasks only as they start, canopy at submission, so the next free id
    /// differs after the array.
    Stamps,
}

struct Case {
    name: &'static str,
    cmd: &'static str,
    args: &'static [&'static str],
    exit: i32,
    mask: Mask,
}

const fn case(
    name: &'static str,
    cmd: &'static str,
    args: &'static [&'static str],
    exit: i32,
    mask: Mask,
) -> Case {
    Case {
        name,
        cmd,
        args,
        exit,
        mask,
    }
}

/// Every fixture whose state the script below reproduces. (Job ids agree
/// with Slurm's up to the array; `--test-only` comes last because it uses up
/// ids, and the fixtures taken after it are not replayed.)
const CASES: &[Case] = &[
    case("squeue_default", "squeue", &[], 0, Mask::Times),
    case("squeue_a", "squeue", &["-a"], 0, Mask::Times),
    case("squeue_r", "squeue", &["-r"], 0, Mask::Times),
    case("squeue_l", "squeue", &["-l"], 0, Mask::DateLine),
    case("squeue_h", "squeue", &["-h"], 0, Mask::Times),
    case(
        "squeue_o_custom1",
        "squeue",
        &["-o", "%.18i %.9P %.8j %.8u %.2t %.10M %.6D %R"],
        0,
        Mask::Times,
    ),
    case(
        "squeue_o_pipes",
        "squeue",
        &["-o", "%i|%T|%r|%D|%C"],
        0,
        Mask::Exact,
    ),
    case(
        "squeue_o_literal",
        "squeue",
        &["-o", "id=%i name=%j"],
        0,
        Mask::Exact,
    ),
    case(
        "squeue_O_1",
        "squeue",
        &["-O", "JobID,Name:20,State,NumNodes"],
        0,
        Mask::Exact,
    ),
    case(
        "squeue_O_2",
        "squeue",
        &["-O", "jobid:.10,partition,username"],
        0,
        Mask::Exact,
    ),
    case("squeue_t_all", "squeue", &["-t", "all"], 0, Mask::Times),
    case("squeue_t_PD", "squeue", &["-t", "PD"], 0, Mask::Times),
    case(
        "squeue_t_R_h_o",
        "squeue",
        &["-t", "R", "-h", "-o", "%i"],
        0,
        Mask::Exact,
    ),
    case("squeue_j_run1", "squeue", &["-j", "2"], 0, Mask::Times),
    case("squeue_j_bogus", "squeue", &["-j", "99999"], 1, Mask::Exact),
    case("squeue_S_desc_i", "squeue", &["-S", "-i"], 0, Mask::Times),
    case("squeue_S_P_name", "squeue", &["-S", "P,j"], 0, Mask::Times),
    case("squeue_start", "squeue", &["--start"], 0, Mask::Exact),
    case(
        "squeue_bogus_opt",
        "squeue",
        &["--bogus-option"],
        1,
        Mask::Exact,
    ),
    case(
        "squeue_t_bad",
        "squeue",
        &["-t", "NOTASTATE"],
        1,
        Mask::Exact,
    ),
    case("sinfo_default", "sinfo", &[], 0, Mask::Exact),
    case("sinfo_N", "sinfo", &["-N"], 0, Mask::Exact),
    case("sinfo_l", "sinfo", &["-l"], 0, Mask::DateLine),
    case("sinfo_N_l", "sinfo", &["-N", "-l"], 0, Mask::DateLine),
    case("sinfo_s", "sinfo", &["-s"], 0, Mask::Exact),
    case("sinfo_h", "sinfo", &["-h"], 0, Mask::Exact),
    case(
        "sinfo_o_custom1",
        "sinfo",
        &["-o", "%P %a %l %D %t %N"],
        0,
        Mask::Exact,
    ),
    case(
        "sinfo_o_custom2",
        "sinfo",
        &["-o", "%20N %10c %10m %25f %10G"],
        0,
        Mask::Exact,
    ),
    case(
        "sinfo_O_1",
        "sinfo",
        &["-O", "NodeList,CPUs,Memory,StateLong"],
        0,
        Mask::Exact,
    ),
    case("sinfo_t_idle", "sinfo", &["-t", "idle"], 0, Mask::Exact),
    case("sinfo_p_short", "sinfo", &["-p", "short"], 0, Mask::Exact),
    case(
        "sinfo_bogus_opt",
        "sinfo",
        &["--bogus-option"],
        1,
        Mask::Exact,
    ),
    case(
        "scontrol_show_partition",
        "scontrol",
        &["show", "partition"],
        0,
        Mask::Exact,
    ),
    case(
        "scontrol_show_partition_short",
        "scontrol",
        &["show", "partition", "short"],
        0,
        Mask::Exact,
    ),
    case(
        "scontrol_show_hostnames",
        "scontrol",
        &["show", "hostnames", "n[1-3]"],
        0,
        Mask::Exact,
    ),
    case(
        "scontrol_show_hostlist",
        "scontrol",
        &["show", "hostlist", "n1,n2,n3"],
        0,
        Mask::Exact,
    ),
    case(
        "scontrol_show_job_bogus",
        "scontrol",
        &["show", "job", "99999"],
        1,
        Mask::Exact,
    ),
    case(
        "scontrol_hold_bogus",
        "scontrol",
        &["hold", "99999"],
        1,
        Mask::Exact,
    ),
    case(
        "scontrol_top_held1",
        "scontrol",
        &["top", "1"],
        1,
        Mask::Exact,
    ),
    case("scontrol_bogus", "scontrol", &["bogus"], 1, Mask::Exact),
    case("scancel_bogus_id", "scancel", &["99999"], 0, Mask::Exact),
    case("scancel_bogus_opt", "scancel", &["--bogus"], 1, Mask::Exact),
    case(
        "sbatch_bogus_opt",
        "sbatch",
        &["--bogus-option", "--wrap", "true"],
        255,
        Mask::Exact,
    ),
    case("sbatch_no_script", "sbatch", &[], 1, Mask::Exact),
    case("sprio_basic", "sprio", &[], 1, Mask::Exact),
    case("sprio_basic_l", "sprio", &["-l"], 1, Mask::Exact),
    case(
        "scontrol_show_step_run1",
        "scontrol",
        &["show", "step", "2"],
        0,
        Mask::Stamps,
    ),
    case(
        "scontrol_show_step_run1_batch",
        "scontrol",
        &["show", "step", "2.batch"],
        1,
        Mask::Exact,
    ),
    case(
        "sbatch_test_only",
        "sbatch",
        &["--test-only", "--wrap", "true"],
        0,
        Mask::Stamps,
    ),
    case(
        "sbatch_test_only_N9",
        "sbatch",
        &["--test-only", "-N", "9", "--wrap", "true"],
        1,
        Mask::Exact,
    ),
];

/// `sbatch: Job 6 to start` becomes `sbatch: Job # to start`.
fn mask_will_run_id(text: &str) -> String {
    text.lines()
        .map(|l| {
            match l
                .strip_prefix("sbatch: Job ")
                .and_then(|r| r.split_once(" to start "))
            {
                Some((id, rest)) if id.bytes().all(|b| b.is_ascii_digit()) => {
                    format!("sbatch: Job # to start {rest}\n")
                }
                _ => format!("{l}\n"),
            }
        })
        .collect()
}

/// Digits of `YYYY-MM-DDTHH:MM:SS` timestamps become `#`.
fn mask_stamps(text: &str) -> String {
    let b = text.as_bytes();
    let shape = b"dddd-dd-ddTdd:dd:dd";
    let fits = |at: usize| {
        b.len() >= at + shape.len()
            && shape.iter().zip(&b[at..]).all(|(&want, &c)| {
                if want == b'd' {
                    c.is_ascii_digit()
                } else {
                    c == want
                }
            })
    };
    let mut out = b.to_vec();
    let mut i = 0;
    while i < b.len() {
        if fits(i) {
            for (k, &want) in shape.iter().enumerate() {
                if want == b'd' {
                    out[i + k] = b'#';
                }
            }
            i += shape.len();
        } else {
            i += 1;
        }
    }
    String::from_utf8(out).unwrap_or_default()
}

/// Digits of elapsed-time tokens (`0:03`, `1:00:00`, `1-00:00:00`) become
/// `#`, keeping every width.
fn mask_times(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut token = String::new();
    let flush = |token: &mut String, out: &mut String| {
        let is_time = token.contains(':')
            && token
                .chars()
                .all(|c| c.is_ascii_digit() || c == ':' || c == '-');
        if is_time {
            out.extend(
                token
                    .chars()
                    .map(|c| if c.is_ascii_digit() { '#' } else { c }),
            );
        } else {
            out.push_str(token);
        }
        token.clear();
    };
    for c in text.chars() {
        if c.is_whitespace() || c == '|' {
            flush(&mut token, &mut out);
            out.push(c);
        } else {
            token.push(c);
        }
    }
    flush(&mut token, &mut out);
    out
}

fn masked(text: &str, mask: Mask) -> String {
    match mask {
        Mask::Exact => text.to_string(),
        Mask::Times => mask_times(text),
        Mask::DateLine => mask_times(text.split_once('\n').map_or("", |(_, rest)| rest)),
        Mask::Stamps => mask_stamps(&mask_will_run_id(text)),
    }
}

fn fixture(name: &str, ext: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(format!("{name}.{ext}"));
    std::fs::read_to_string(path).unwrap_or_default()
}

fn run(c: &Cluster, cwd: &Path, case: &Case) -> Output {
    c.cli(cwd, case.cmd, case.args)
}

/// The differences between one case's output and its fixture, if any.
fn compare(case: &Case, out: &Output) -> Option<String> {
    let mut problems = Vec::new();
    let want_out = masked(&fixture(case.name, "out"), case.mask);
    let got_out = masked(&String::from_utf8_lossy(&out.stdout), case.mask);
    if want_out != got_out {
        problems.push(format!(
            "stdout differs\n--- slurm\n{want_out}--- canopy\n{got_out}---"
        ));
    }
    let err_mask = if case.mask == Mask::Stamps {
        Mask::Stamps
    } else {
        Mask::Exact
    };
    let want_err = masked(&fixture(case.name, "err"), err_mask);
    let got_err = masked(&String::from_utf8_lossy(&out.stderr), err_mask);
    if want_err != got_err {
        problems.push(format!(
            "stderr differs\n--- slurm\n{want_err}--- canopy\n{got_err}---"
        ));
    }
    let code = out.status.code().unwrap_or(-1);
    if code != case.exit {
        problems.push(format!("exit {code}, Slurm's is {}", case.exit));
    }
    (!problems.is_empty()).then(|| {
        format!(
            "== {} ({} {})\n{}",
            case.name,
            case.cmd,
            case.args.join(" "),
            problems.join("\n")
        )
    })
}

/// INDEX.md's state script, steps 1-6.
fn build_state(c: &Cluster, w: &Path) {
    let held1 = c.sbatch(w, &["-J", "held1", "--hold", "--wrap", "true"]);
    let run1 = c.sbatch(w, &["-J", "run1", "-N1", "--wrap", "sleep 600"]);
    let run2 = c.sbatch(
        w,
        &[
            "-J",
            "run2",
            "-p",
            "short",
            "-N2",
            "-t",
            "3",
            "--wrap",
            "sleep 600",
        ],
    );
    c.wait_for(Duration::from_secs(20), "run1 and run2 running", |c| {
        [run1, run2]
            .iter()
            .all(|&id| c.job(id).is_some_and(|j| j.state == JobState::Running))
    });
    let done1 = c.sbatch(w, &["-J", "done1", "--wrap", "true"]);
    let done = c.wait_done(done1, Duration::from_secs(30));
    assert_eq!(done.state, JobState::Completed);
    let arr = c.sbatch(
        w,
        &["-J", "arr", "--array=1-4%1", "--hold", "--wrap", "true"],
    );
    assert_eq!((held1, run1, run2, done1, arr), (1, 2, 3, 4, 5));
    let drain = c.cli(
        w,
        "scontrol",
        &["update", "NodeName=n4", "State=DRAIN", "Reason=maintenance"],
    );
    assert!(drain.status.success(), "{:?}", drain);
}

#[test]
fn outputs_match_real_slurm() {
    let c = Cluster::start(4, 50, 300);
    let w = tempfile::tempdir().unwrap();
    build_state(&c, w.path());
    let failures: Vec<String> = CASES
        .iter()
        .filter_map(|case| compare(case, &run(&c, w.path(), case)))
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} commands differ from real Slurm:\n\n{}",
        failures.len(),
        CASES.len(),
        failures.join("\n\n")
    );
}

#[test]
fn time_masking_keeps_widths_and_other_text() {
    assert_eq!(
        mask_times("  R       0:03      1 n1\n"),
        "  R       #:##      1 n1\n"
    );
    assert_eq!(mask_times("1-00:00:00|RUNNING"), "#-##:##:##|RUNNING");
    assert_eq!(mask_times("n[1-2] job-1"), "n[1-2] job-1");
    assert_eq!(masked("Sat Nov 21\nA 0:01\n", Mask::DateLine), "A #:##\n");
    assert_eq!(
        mask_stamps("Job 6 to start at 2026-11-21T08:23:53 using"),
        "Job 6 to start at ####-##-##T##:##:## using"
    );
}
