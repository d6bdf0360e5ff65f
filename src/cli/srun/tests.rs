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
    assert!(a.warnings.is_empty());
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
    // --gpus-per-task is honoured now (resources): four warnings.
    assert_eq!(a.warnings.len(), 4, "{:?}", a.warnings);
    assert_eq!(
        a.warnings[0],
        "srun: warning: option --contiguous is not supported by canopy yet; ignored"
    );
    // salloc has its own table: -K is --kill-command there, and srun's
    // I/O options are not salloc's.
    let args = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let s = parse_options_env(&args(&["-K", "--bell", "sleep", "1"]), "salloc", &[]).unwrap();
    assert!(!s.kill_on_bad_exit);
    assert_eq!(s.command, ["sleep", "1"]);
    let e = parse_options_env(&args(&["--label", "true"]), "salloc", &[]).unwrap_err();
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

// -- resource options ----------------------------------------------------------

fn pe(args: &[&str], env: &[(&str, &str)]) -> Result<SrunArgs, OptError> {
    let env: Vec<(String, String)> = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    parse_env(
        &args.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
        &env,
    )
}

#[test]
fn resource_options_reach_the_request() {
    use crate::model::tres::{GresFlags, Hint};
    let a = p(&[
        "--gres=gpu:a100:1",
        "--gpus-per-task=1",
        "--cpus-per-gpu=4",
        "--mem-per-gpu=1G",
        "--gres-flags=disable-binding",
        "--hint=memory_bound",
        "--cpu-bind=verbose",
        "-m",
        "cyclic",
        "--gpu-bind=closest",
        "--ntasks-per-socket=1",
        "true",
    ])
    .unwrap();
    let r = &a.resources;
    assert_eq!(r.gres[0].type_.as_deref(), Some("a100"));
    assert_eq!(r.gpus_per_task.as_ref().map(|g| g.count), Some(1));
    assert_eq!(
        (r.cpus_per_gpu, r.mem_per_gpu_mb, r.gres_flags, r.hint),
        (
            Some(4),
            Some(1024),
            Some(GresFlags::DisableBinding),
            Some(Hint::MemoryBound)
        )
    );
    // --cpu-bind=verbose is no rival of --hint.
    assert_eq!(r.cpu_bind.as_deref(), Some("verbose"));
    assert_eq!(r.distribution.as_deref(), Some("cyclic"));
    assert_eq!(r.gpu_bind.as_deref(), Some("closest"));
    assert_eq!(r.ntasks_per_socket, Some(1));
    assert!(a.warnings.is_empty(), "{:?}", a.warnings);
    let a = p(&["-B", "1:2:1", "true"]).unwrap();
    assert_eq!(
        (
            a.resources.sockets_per_node,
            a.resources.cores_per_socket,
            a.resources.threads_per_core
        ),
        (Some(1), Some(2), Some(1))
    );
}

#[test]
fn threads_per_core_binds_to_threads_by_default() {
    let r = p(&["--threads-per-core=1", "true"]).unwrap().resources;
    assert_eq!(r.cpu_bind.as_deref(), Some("threads"));
    let r = p(&["--threads-per-core=1", "--cpu-bind=verbose", "true"])
        .unwrap()
        .resources;
    assert_eq!(r.cpu_bind.as_deref(), Some("threads,verbose"));
    let r = p(&["--threads-per-core=1", "--cpu-bind=cores", "true"])
        .unwrap()
        .resources;
    assert_eq!(r.cpu_bind.as_deref(), Some("cores"));
    // salloc has no binding of its own.
    let s = parse_options_env(&["--threads-per-core=1".to_string()], "salloc", &[]).unwrap();
    assert_eq!(s.resources.cpu_bind, None);
}

#[test]
fn steps_inherit_the_jobs_requests_through_the_environment() {
    use crate::model::tres::Hint;
    let env = [
        ("SLURM_GPUS_PER_NODE", "a100:2"),
        ("SLURM_GPUS", "4"),
        ("SLURM_GPUS_PER_TASK", "1"),
        ("SLURM_GPUS_PER_SOCKET", "1"),
        ("SLURM_CPUS_PER_GPU", "6"),
        ("SLURM_MEM_PER_GPU", "2048"),
        ("SLURM_GRES", "gpu:2"),
        ("SLURM_GRES_FLAGS", "enforce-binding"),
        ("SLURM_HINT", "nomultithread"),
        ("SLURM_DISTRIBUTION", "block"),
        ("SLURM_GPU_BIND", "closest"),
        ("SLURM_CPU_BIND", "verbose"),
        ("SLURM_NSOCKETS_PER_NODE", "2"),
        ("SLURM_NCORES_PER_SOCKET", "4"),
    ];
    let r = pe(&["true"], &env).unwrap().resources;
    assert_eq!(
        r.gpus_per_node.as_ref().and_then(|g| g.type_.as_deref()),
        Some("a100")
    );
    assert_eq!(r.gpus.as_ref().map(|g| g.count), Some(4));
    assert_eq!((r.cpus_per_gpu, r.mem_per_gpu_mb), (Some(6), Some(2048)));
    assert_eq!(r.gres.len(), 1);
    assert_eq!(r.hint, Some(Hint::Nomultithread));
    assert_eq!((r.sockets_per_node, r.cores_per_socket), (Some(2), Some(4)));
    assert_eq!(r.distribution.as_deref(), Some("block"));
    // The command line wins; --mem on it drops SLURM_MEM_PER_GPU.
    let a = pe(&["--gpus-per-node=1", "--mem=1G", "true"], &env).unwrap();
    assert_eq!(a.resources.gpus_per_node.as_ref().map(|g| g.count), Some(1));
    assert_eq!(a.resources.mem_per_gpu_mb, None);
    // A rival on the command line drops SLURM_HINT.
    let r = pe(&["--ntasks-per-core=1", "true"], &env)
        .unwrap()
        .resources;
    assert_eq!(r.hint, None);
    // salloc reads SALLOC_* (and SLURM_HINT), not srun's SLURM_GPUS.
    let env = vars(&[
        ("SALLOC_GPUS", "3"),
        ("SLURM_GPUS", "9"),
        ("SLURM_HINT", "multithread"),
    ]);
    let s = parse_options_env(&[], "salloc", &env).unwrap();
    assert_eq!(s.resources.gpus.as_ref().map(|g| g.count), Some(3));
    assert_eq!(s.resources.hint, Some(Hint::Multithread));
}

fn vars(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn resource_refusals_name_the_option() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["--gres=gpu:1:2:3"],
            "srun: error: Invalid generic resource (gres) specification",
        ),
        (&["-G", "0"], "srun: error: Invalid --gpus specification"),
        (
            &["--gres-flags=x"],
            "srun: error: Invalid --gres-flags specification",
        ),
        (
            &["--hint=x"],
            "srun: error: unrecognized --hint argument \"x\", see --hint=help",
        ),
        (
            &["-B", "2:x"],
            "srun: error: Invalid numeric value \"x\" for second arg of -B.",
        ),
        (
            &["--cpu-bind="],
            "srun: error: Invalid --cpu-bind specification",
        ),
        (
            &["--cores-per-socket=0"],
            "srun: error: Invalid numeric value \"0\" for --cores-per-socket.",
        ),
    ];
    for (args, want) in cases {
        let mut all = args.to_vec();
        all.push("true");
        assert_eq!(p(&all).unwrap_err().message, *want, "{args:?}");
    }
    let e = p(&["--mem-per-cpu=1G", "--mem-per-gpu=1G", "true"]).unwrap_err();
    assert_eq!(
        (e.message.as_str(), e.code),
        (
            "srun: fatal: --mem, --mem-per-cpu, and --mem-per-gpu are mutually exclusive.",
            255
        )
    );
    let e = pe(&["true"], &[("SLURM_GRES_FLAGS", "nope")]).unwrap_err();
    assert_eq!(e.message, "srun: error: Invalid --gres-flags specification");
    let e = parse_options_env(&["--gres-flags=x".to_string()], "salloc", &[]).unwrap_err();
    assert_eq!(
        e.message,
        "salloc: error: Invalid --gres-flags specification"
    );
}

#[test]
fn gres_and_hint_help_are_informational() {
    use crate::cli::sbatch_args::ResHelp;
    assert_eq!(
        p(&["--hint=help"]).unwrap().info,
        Some(Info::Resource(ResHelp::Hint))
    );
    assert_eq!(
        p(&["--gres=list"]).unwrap().info,
        Some(Info::Resource(ResHelp::Gres))
    );
    // In the environment, help is not a request.
    assert_eq!(pe(&["true"], &[("SLURM_HINT", "help")]).unwrap().info, None);
}

#[test]
fn oversubscribe_is_kept_and_the_later_of_it_and_exclusive_wins() {
    let a = p(&["-s", "true"]).unwrap();
    assert!(a.warnings.is_empty(), "{:?}", a.warnings);
    assert!(a.oversubscribe && !a.exclusive);
    let a = p(&["--exclusive", "--oversubscribe", "true"]).unwrap();
    assert!(a.oversubscribe && !a.exclusive);
    let a = p(&["-s", "--exclusive", "true"]).unwrap();
    assert!(!a.oversubscribe && a.exclusive);
}
