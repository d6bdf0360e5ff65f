//! Unit tests for srun: option parsing, the task phrases and task-exit lines Slurm
//! prints, and the block layout of tasks over nodes. Tests that run steps on a cluster
//! are in tests/srun*.rs. Only tests live here; the code under test is in the parent
//! module and its siblings.

use super::*;

fn p(args: &[&str]) -> Result<SrunArgs, OptError> {
    parse(&args.iter().map(|s| s.to_string()).collect::<Vec<_>>())
}

#[test]
fn options_end_at_the_command() {
    let a = p(&[
        "-n4",
        "-N",
        "2",
        "--label",
        "-c2",
        "--mpi=none",
        "hostname",
        "-n",
        "x",
    ])
    .unwrap();
    assert_eq!(
        (a.ntasks, a.nodes, a.cpus_per_task, a.label),
        (Some(4), Some(2), Some(2), true)
    );
    assert_eq!(a.command, vec!["hostname", "-n", "x"]);
    assert!(a.warnings.is_empty());
}

#[test]
fn submitit_invocation_parses() {
    let a = p(&[
        "--unbuffered",
        "--output",
        "/l/%j_%t_log.out",
        "--error",
        "/l/%j_%t_log.err",
        "python",
        "-u",
        "-m",
        "submitit.core._submit",
        "/l",
    ])
    .unwrap();
    assert_eq!(a.output.as_deref(), Some("/l/%j_%t_log.out"));
    assert_eq!(a.error.as_deref(), Some("/l/%j_%t_log.err"));
    assert_eq!(a.command[0], "python");
}

#[test]
fn bad_input_is_refused_with_slurm_messages() {
    assert_eq!(
        p(&["--bogus", "x"]).unwrap_err(),
        OptError {
            message: "srun: unrecognized option '--bogus'\n\
                          Try \"srun --help\" for more information"
                .into(),
            code: 255
        }
    );
    let e = p(&["-n", "x", "true"]).unwrap_err();
    assert!(e.message.contains("Invalid numeric value"), "{e:?}");
    assert!(p(&["-n"])
        .unwrap_err()
        .message
        .contains("requires an argument"));
    assert!(p(&["-l"]).unwrap_err().message.contains("No command given"));
    let a = p(&["--gres=gpu:1", "true"]).unwrap();
    assert_eq!(a.warnings.len(), 1);
    // Option checks as srun 22.05 words them.
    let e = p(&["-b", "garbage", "true"]).unwrap_err();
    assert_eq!(e.code, 255);
    assert!(e
        .message
        .ends_with("srun: error: Invalid --begin specification"));
    assert_eq!(
        p(&["--priority=-3", "true"]).unwrap_err().message,
        "srun: error: Priority must be >= 0"
    );
    assert_eq!(
        p(&["-Ix", "true"]).unwrap_err(),
        OptError {
            message: "srun: error: Invalid numeric value \"x\" for immediate.".into(),
            code: 1
        }
    );
    assert_eq!(
        p(&["-W", "x", "true"]).unwrap_err().message,
        "srun: error: Invalid numeric value \"x\" for --wait."
    );
}

#[test]
fn every_slurm_option_is_known_with_its_argument_kind() {
    // Flags must not swallow the command; valued options must take theirs.
    let a = p(&[
        "--contiguous",
        "-O",
        "--multi-prog",
        "--gpus-per-task",
        "1",
        "-k",
        "--propagate",
        "hostname",
    ])
    .unwrap();
    assert_eq!(a.command, ["hostname"]);
    assert!(a.multi_prog);
    assert_eq!(a.warnings.len(), 5, "{:?}", a.warnings);
    assert_eq!(
        a.warnings[0],
        "srun: warning: option --contiguous is not supported by canopy yet; ignored"
    );
    // salloc has its own table: -K is --kill-command there, and srun's
    // I/O options are not salloc's.
    let args = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let s = parse_options(&args(&["-K", "--bell", "sleep", "1"]), "salloc").unwrap();
    assert!(!s.kill_on_bad_exit);
    assert_eq!(s.command, ["sleep", "1"]);
    let e = parse_options(&args(&["--label", "true"]), "salloc").unwrap_err();
    assert_eq!(
        e.message,
        "salloc: unrecognized option '--label'\nTry \"salloc --help\" for more information"
    );
}

#[test]
fn allocation_step_and_informational_options() {
    let a = p(&[
        "-H",
        "-b",
        "now+60",
        "-d",
        "afterok:5",
        "--nice",
        "--priority=7",
        "-I",
        "-K",
        "-W",
        "3",
        "true",
    ])
    .unwrap();
    assert!(a.warnings.is_empty(), "{:?}", a.warnings);
    assert!(a.hold && a.kill_on_bad_exit);
    let now = chrono::Utc::now().timestamp();
    assert!((now + 55..=now + 65).contains(&a.begin_time.unwrap()));
    assert_eq!(a.dependency.as_deref(), Some("afterok:5"));
    assert_eq!((a.nice, a.priority), (Some(100), Some(7)));
    assert_eq!((a.immediate, a.wait_s), (Some(0), Some(3)));
    assert_eq!(p(&["-I5", "true"]).unwrap().immediate, Some(5));
    assert!(
        !p(&["--kill-on-bad-exit=0", "true"])
            .unwrap()
            .kill_on_bad_exit
    );
    assert_eq!(p(&["-W0", "true"]).unwrap().wait_s, None);
    // --help needs no command, and wins over what else is given.
    assert_eq!(p(&["--help"]).unwrap().info, Some(Info::Help));
    assert_eq!(p(&["-V", "-n2"]).unwrap().info, Some(Info::Version));
    assert_eq!(p(&["--usage"]).unwrap().info, Some(Info::Usage));
}

#[test]
fn allocation_and_environment_options_are_kept() {
    let a = p(&[
        "-A",
        "proj",
        "-C",
        "fast",
        "--exclusive",
        "--mem-per-cpu=2G",
        "--comment=c",
        "--export=NONE",
        "true",
    ])
    .unwrap();
    assert!(a.warnings.is_empty(), "{:?}", a.warnings);
    assert_eq!(a.account.as_deref(), Some("proj"));
    assert_eq!(a.constraint.as_deref(), Some("fast"));
    assert!(a.exclusive);
    assert_eq!(a.mem_per_cpu_mb, Some(2048));
    assert_eq!(a.comment.as_deref(), Some("c"));
    assert_eq!(a.export.as_deref(), Some("NONE"));
}

#[test]
fn input_node_and_interrupt_options() {
    let a = p(&["-w", "n[1-2]", "-x", "n3", "-i", "0", "-X", "cat"]).unwrap();
    assert_eq!(a.nodelist.as_deref(), Some("n[1-2]"));
    assert_eq!(a.exclude.as_deref(), Some("n3"));
    assert_eq!(a.input, Input::Task(0));
    assert!(a.disable_status && a.warnings.is_empty());
    assert_eq!(p(&["--input=none", "cat"]).unwrap().input, Input::None);
    assert_eq!(p(&["-i", "all", "cat"]).unwrap().input, Input::All);
    assert_eq!(
        p(&["-i", "in.txt", "cat"]).unwrap().input,
        Input::File("in.txt".into())
    );
    assert_eq!(
        p(&["-i", "in.%t", "cat"]).unwrap().input,
        Input::Pattern("in.%t".into())
    );
    assert_eq!(p(&["cat"]).unwrap().input, Input::All);
    assert!(
        p(&["--quit-on-interrupt", "cat"])
            .unwrap()
            .quit_on_interrupt
    );
}

#[test]
fn task_ranks_read_as_slurm_writes_them() {
    assert_eq!(tasks_phrase(&[3]), "task 3");
    assert_eq!(tasks_phrase(&[0, 1]), "tasks 0-1");
    assert_eq!(tasks_phrase(&[0, 1, 2, 5, 7, 8]), "tasks 0-2,5,7-8");
}

#[test]
fn exits_are_reported_per_node_and_status() {
    let node_of: HashMap<u32, String> = [(0, "n1"), (1, "n1"), (2, "n2")]
        .into_iter()
        .map(|(t, n)| (t, n.to_string()))
        .collect();
    let mut exits = vec![
        (1, ExitStatus { code: 3, signal: 0 }),
        (0, ExitStatus { code: 3, signal: 0 }),
        (2, ExitStatus { code: 0, signal: 0 }),
    ];
    exits.push((3, ExitStatus { code: 0, signal: 9 }));
    assert_eq!(
        exit_lines(&mut exits, &node_of),
        [
            "srun: error: n1: tasks 0-1: Exited with exit code 3",
            "srun: error: ?: task 3: Killed"
        ]
    );
    assert!(exits.is_empty());
    assert_eq!(
        exit_message(&ExitStatus { code: 0, signal: 9 }).as_deref(),
        Some("Killed")
    );
    assert_eq!(exit_message(&ExitStatus::default()), None);
}
