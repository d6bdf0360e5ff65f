//! Unit tests for sbatch's request: option syntax, value grammars, directive scanning,
//! precedence between command line, environment and directives, `--export`, and the
//! `JobSubmit` built. Only tests live here; the code under test is in the parent module
//! and its siblings.

use super::*;

const SCRIPT: &str = "#!/bin/sh\necho hi\n";

struct Fixture {
    dir: tempfile::TempDir,
    ctx: SubmitContext,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let ctx = SubmitContext {
        cwd: dir.path().to_path_buf(),
        env: vars(&[
            ("PATH", "/usr/bin:/bin"),
            ("HOME", "/home/alice"),
            ("SLURM_CONF", "/etc/slurm.conf"),
        ]),
        user: "alice".to_string(),
        uid: 1000,
        gid: 100,
        host: "login1".to_string(),
        argv0: "sbatch".to_string(),
    };
    Fixture { dir, ctx }
}

fn vars(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn argv(args: &[&str]) -> Vec<String> {
    args.iter().map(|a| a.to_string()).collect()
}

impl Fixture {
    fn write(&self, name: &str, text: &str) {
        let path = self.dir.path().join(name);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).unwrap();
        }
        fs::write(path, text).unwrap();
    }

    fn env(mut self, key: &str, value: &str) -> Self {
        self.ctx.env.push((key.to_string(), value.to_string()));
        self
    }

    fn run(&self, args: &[&str]) -> Result<Submission, SbatchError> {
        parse_submission(&argv(args), None, &self.ctx)
    }

    fn ok(&self, args: &[&str]) -> Submission {
        self.run(args).unwrap()
    }

    fn err(&self, args: &[&str]) -> SbatchError {
        self.run(args).unwrap_err()
    }

    /// Submit `job.sh` holding `text`, with `args` before it.
    fn script(&self, text: &str, args: &[&str]) -> Result<Submission, SbatchError> {
        self.write("job.sh", text);
        let mut all = args.to_vec();
        all.push("job.sh");
        self.run(&all)
    }

    fn cwd(&self) -> String {
        self.dir.path().to_string_lossy().into_owned()
    }
}

fn unsupported(option: &str) -> String {
    format!("sbatch: warning: option --{option} is not supported by canopy yet; ignored")
}

// ---- option syntax ------------------------------------------------

#[test]
fn node_choice_and_test_only_from_options_and_directives() {
    let f = fixture();
    let s = f
        .script(
            "#!/bin/sh\n#SBATCH -x n[3-4]\n#SBATCH --test-only\ntrue\n",
            &["-w", "n1,n2"],
        )
        .unwrap();
    assert_eq!(s.submit.req_nodes.as_deref(), Some("n1,n2"));
    assert_eq!(s.submit.exc_nodes.as_deref(), Some("n[3-4]"));
    assert!(s.submit.test_only);
    assert!(s.warnings.is_empty(), "{:?}", s.warnings);
    let s = f.ok(&["--nodelist=n5", "--wrap", "true"]);
    assert_eq!(s.submit.req_nodes.as_deref(), Some("n5"));
    assert!(!s.submit.test_only);
}

#[test]
fn every_value_syntax_form() {
    let f = fixture();
    f.write("job.sh", SCRIPT);
    let s = f
        .ok(&[
            "--job-name=train",
            "--partition",
            "gpu",
            "-N2-4",
            "-n",
            "8",
            "-c4",
            "--ntasks-per-node=2",
            "--mem",
            "4G",
            "-t",
            "1-00:00:00",
            "-oout-%j.log",
            "-e",
            "err-%j.log",
            "--input=in.txt",
            "-D",
            "run",
            "job.sh",
        ])
        .submit;
    assert_eq!(s.name, "train");
    assert_eq!(s.partition.as_deref(), Some("gpu"));
    assert_eq!((s.min_nodes, s.max_nodes), (Some(2), Some(4)));
    assert_eq!(s.ntasks, Some(8));
    assert_eq!(s.cpus_per_task, Some(4));
    assert_eq!(s.ntasks_per_node, Some(2));
    assert_eq!(s.mem_per_node_mb, Some(4096));
    assert_eq!(s.mem_per_cpu_mb, None);
    assert_eq!(s.time_limit_min, Some(1440));
    assert_eq!(s.stdout.as_deref(), Some("out-%j.log"));
    assert_eq!(s.stderr.as_deref(), Some("err-%j.log"));
    assert_eq!(s.stdin.as_deref(), Some("in.txt"));
    assert_eq!(s.workdir, format!("{}/run", f.cwd()));
    assert!(!s.hold);
}

#[test]
fn bundled_short_flags_and_values() {
    let f = fixture();
    f.write("job.sh", SCRIPT);
    let sub = f.ok(&["-HQJname", "job.sh"]);
    assert!(sub.submit.hold);
    assert!(sub.quiet);
    assert_eq!(sub.submit.name, "name");
    let sub = f.ok(&["-HJ", "spaced", "job.sh"]);
    assert!(sub.submit.hold);
    assert_eq!(sub.submit.name, "spaced");
}

#[test]
fn options_after_the_script_are_script_arguments() {
    let f = fixture();
    f.write("job.sh", SCRIPT);
    let s = f
        .ok(&["-J", "a", "job.sh", "-N", "3", "--bogus", "x"])
        .submit;
    assert_eq!(s.script_args, argv(&["-N", "3", "--bogus", "x"]));
    assert_eq!(s.min_nodes, None);
    assert_eq!(s.name, "a");
}

#[test]
fn double_dash_ends_options() {
    let f = fixture();
    f.write("-odd.sh", SCRIPT);
    let s = f.ok(&["-J", "a", "--", "-odd.sh", "-N", "2"]).submit;
    assert_eq!(s.command, format!("{}/-odd.sh", f.cwd()));
    assert_eq!(s.script_args, argv(&["-N", "2"]));
}

#[test]
fn unique_long_prefixes() {
    let f = fixture();
    f.write("job.sh", SCRIPT);
    let sub = f.ok(&["--job-n=short", "--parsa", "--cpus-per-t", "2", "job.sh"]);
    assert_eq!(sub.submit.name, "short");
    assert!(sub.parsable);
    assert_eq!(sub.submit.cpus_per_task, Some(2));
    // An exact name wins over longer names it prefixes.
    assert_eq!(
        f.ok(&["--mem=1G", "job.sh"]).submit.mem_per_node_mb,
        Some(1024)
    );
}

#[test]
fn ambiguous_prefix() {
    let e = fixture().err(&["--mem-per=1G", "job.sh"]);
    assert_eq!(
        e.to_string(),
        "sbatch: option '--mem-per' is ambiguous; possibilities: '--mem-per-cpu' \
             '--mem-per-gpu'\nTry \"sbatch --help\" for more information"
    );
}

#[test]
fn unrecognized_options() {
    let f = fixture();
    let e = f.err(&["--foo", "job.sh"]);
    assert_eq!(
        e.to_string(),
        "sbatch: unrecognized option '--foo'\nTry \"sbatch --help\" for more information"
    );
    assert_eq!(e.exit_code(), 255);
    assert_eq!(
        f.err(&["--=x"]),
        SbatchError::Syntax(GetoptError::Unrecognized {
            option: String::new()
        })
    );
    assert_eq!(
        f.err(&["-Hz", "job.sh"]).to_string(),
        "sbatch: invalid option -- 'z'\nTry \"sbatch --help\" for more information"
    );
}

#[test]
fn missing_and_unexpected_arguments() {
    let f = fixture();
    assert_eq!(
        f.err(&["--job-name"]).to_string(),
        "sbatch: option '--job-name' requires an argument\n\
             Try \"sbatch --help\" for more information"
    );
    assert_eq!(
        f.err(&["-J"]).to_string(),
        "sbatch: option requires an argument -- 'J'\n\
             Try \"sbatch --help\" for more information"
    );
    assert_eq!(
        f.err(&["--parsable=yes", "job.sh"]).to_string(),
        "sbatch: option '--parsable' doesn't allow an argument\n\
             Try \"sbatch --help\" for more information"
    );
}

#[test]
fn invalid_numbers() {
    let f = fixture();
    assert_eq!(
        f.err(&["-n", "x", "job.sh"]).to_string(),
        "sbatch: error: Invalid numeric value \"x\" for --ntasks."
    );
    assert_eq!(
        f.err(&["-c", "0", "job.sh"]),
        SbatchError::InvalidNumber {
            option: "cpus-per-task",
            value: "0".to_string()
        }
    );
    assert_eq!(
        f.err(&["--ntasks-per-node=-1", "job.sh"]),
        SbatchError::InvalidNumber {
            option: "ntasks-per-node",
            value: "-1".to_string()
        }
    );
}

#[test]
fn node_counts() {
    let f = fixture();
    f.write("job.sh", SCRIPT);
    let nodes = |arg: &str| {
        let s = f.ok(&["-N", arg, "job.sh"]).submit;
        (s.min_nodes.unwrap(), s.max_nodes.unwrap())
    };
    assert_eq!(nodes("3"), (3, 3));
    assert_eq!(nodes("2-4"), (2, 4));
    assert_eq!(nodes("-5"), (1, 5));
    assert_eq!(nodes("0-2"), (1, 2));
    assert_eq!(nodes("1k"), (1024, 1024));
    assert_eq!(nodes("1-2K"), (1, 2048));
    assert_eq!(
        f.err(&["-N", "x", "job.sh"]).to_string(),
        "sbatch: error: \"x\" is not a valid node count"
    );
    assert_eq!(
        f.err(&["-N", "4-2", "job.sh"]).to_string(),
        "sbatch: error: Maximum node count 2 is less than minimum node count 4"
    );
    assert_eq!(
        f.err(&["-N", "0", "job.sh"]),
        SbatchError::InvalidNodeCount {
            value: "0".to_string()
        }
    );
    assert_eq!(
        f.err(&["-N", "2-", "job.sh"]),
        SbatchError::InvalidNodeCount {
            value: String::new()
        }
    );
    assert_eq!(
        f.err(&["-N", "5000000M", "job.sh"]),
        SbatchError::InvalidNodeCount {
            value: "5000000M".to_string()
        }
    );
}

#[test]
fn time_limits() {
    let f = fixture();
    f.write("job.sh", SCRIPT);
    let limit = |arg: &str| f.ok(&["-t", arg, "job.sh"]).submit.time_limit_min;
    assert_eq!(f.ok(&["job.sh"]).submit.time_limit_min, None);
    assert_eq!(limit("0"), Some(0));
    assert_eq!(limit("UNLIMITED"), Some(0));
    assert_eq!(limit("infinite"), Some(0));
    assert_eq!(limit("90"), Some(90));
    assert_eq!(limit("1:30"), Some(2));
    assert_eq!(limit("0:2:0"), Some(2));
    assert_eq!(limit("1-2"), Some(1560));
    let e = f.err(&["--time=soon", "job.sh"]);
    assert_eq!(e.to_string(), "sbatch: error: Invalid --time specification");
    assert_eq!(
        e,
        SbatchError::InvalidTime {
            value: "soon".to_string()
        }
    );
}

#[test]
fn memory_sizes() {
    let f = fixture();
    f.write("job.sh", SCRIPT);
    let s = f.ok(&["--mem=4GB", "job.sh"]).submit;
    assert_eq!(s.mem_per_node_mb, Some(4096));
    assert_eq!(f.ok(&["--mem=0", "job.sh"]).submit.mem_per_node_mb, Some(0));
    let s = f.ok(&["--mem-per-cpu=512", "job.sh"]).submit;
    assert_eq!((s.mem_per_node_mb, s.mem_per_cpu_mb), (None, Some(512)));
    assert_eq!(
        f.err(&["--mem=4X", "job.sh"]).to_string(),
        "sbatch: error: Invalid --mem specification"
    );
    assert_eq!(
        f.err(&["--mem-per-cpu", "lots", "job.sh"]),
        SbatchError::InvalidMemory {
            option: "mem-per-cpu",
            value: "lots".to_string()
        }
    );
}

#[test]
fn memory_options_are_exclusive() {
    let f = fixture();
    f.write("job.sh", SCRIPT);
    let e = f.err(&["--mem=1G", "--mem-per-cpu=1G", "job.sh"]);
    assert_eq!(
        e.to_string(),
        "sbatch: fatal: --mem, --mem-per-cpu, and --mem-per-gpu are mutually exclusive."
    );
    // The command line and the script count together.
    let e = f
        .script("#!/bin/sh\n#SBATCH --mem-per-cpu=1G\n", &["--mem=2G"])
        .unwrap_err();
    assert_eq!(e, SbatchError::MemoryConflict);
    let both = fixture()
        .env("SBATCH_MEM_PER_NODE", "1G")
        .env("SBATCH_MEM_PER_CPU", "1G");
    both.write("job.sh", SCRIPT);
    assert_eq!(
        both.err(&["job.sh"]).to_string(),
        "sbatch: fatal: SLURM_MEM_PER_CPU, SLURM_MEM_PER_GPU, and SLURM_MEM_PER_NODE are \
         mutually exclusive."
    );
    // A command-line kind replaces the environment's other kind.
    let env = fixture().env("SBATCH_MEM_PER_CPU", "1G");
    env.write("job.sh", SCRIPT);
    let s = env.ok(&["--mem=2G", "job.sh"]).submit;
    assert_eq!((s.mem_per_node_mb, s.mem_per_cpu_mb), (Some(2048), None));
    let s = env.ok(&["job.sh"]).submit;
    assert_eq!((s.mem_per_node_mb, s.mem_per_cpu_mb), (None, Some(1024)));
}

#[test]
fn unsupported_options_warn_and_consume_values() {
    let f = fixture();
    f.write("job.sh", SCRIPT);
    let sub = f.ok(&[
        "--gres",
        "gpu:1",
        "--exclusive",
        "-A",
        "acct",
        "-kv",
        "--exclusive=user",
        "--requeue",
        "job.sh",
    ]);
    // --gres is honoured now (submit.resources).
    assert_eq!(sub.warnings, vec![unsupported("no-kill")]);
    assert_eq!(sub.submit.resources.gres.len(), 1);
    assert_eq!(sub.submit.command, format!("{}/job.sh", f.cwd()));
    assert!(sub.submit.script_args.is_empty());
    // The implemented ones in the same line took their values.
    assert_eq!(sub.submit.account.as_deref(), Some("acct"));
    assert_eq!(sub.submit.exclusive, Some(Exclusive::User));
    assert!(!sub.submit.no_requeue);
}

#[test]
fn job_attributes_and_their_errors() {
    let f = fixture();
    f.write("job.sh", SCRIPT);
    let s = f
        .ok(&[
            "--comment=rule_a b",
            "-C",
            "fast,big",
            "--exclusive",
            "--no-requeue",
            "--nice",
            "--priority=TOP",
            "job.sh",
        ])
        .submit;
    assert_eq!(s.comment.as_deref(), Some("rule_a b"));
    assert_eq!(s.constraint.as_deref(), Some("fast,big"));
    assert_eq!(s.exclusive, Some(Exclusive::Node));
    assert!(s.no_requeue);
    assert_eq!((s.nice, s.priority), (100, Some(u32::MAX - 1)));
    let s = f.ok(&["--nice=-5", "--priority=7", "job.sh"]).submit;
    assert_eq!((s.nice, s.priority), (-5, Some(7)));
    // Slurm reads these numbers as atoi does: junk is 0.
    let s = f.ok(&["--nice=abc", "--priority=x", "job.sh"]).submit;
    assert_eq!((s.nice, s.priority), (0, Some(0)));
    for (args, text) in [
        (
            &["--exclusive=bogus", "job.sh"][..],
            "sbatch: error: Invalid --exclusive specification",
        ),
        (
            &["--nice=99999999999", "job.sh"][..],
            "sbatch: error: Invalid --nice value, out of range (+/- 2147483645)",
        ),
        (
            &["--priority=-1", "job.sh"][..],
            "sbatch: error: Priority must be >= 0",
        ),
    ] {
        let e = f.err(args);
        assert_eq!(e.to_string(), text);
        assert_eq!(e.exit_code(), 255);
    }
}

#[test]
fn open_mode_appends_or_truncates() {
    let f = fixture();
    f.write("job.sh", SCRIPT);
    let sub = f.ok(&["--open-mode=append", "job.sh"]);
    assert!(sub.warnings.is_empty() && sub.submit.open_append);
    let sub = f.ok(&["--open-mode=t", "job.sh"]);
    assert!(!sub.submit.open_append);
    let sub = f.ok(&["--open-mode=bogus", "job.sh"]);
    assert!(!sub.submit.open_append);
    assert_eq!(
        sub.warnings,
        vec!["sbatch: error: Invalid --open-mode argument: bogus. Ignored".to_string()]
    );
}

#[test]
fn help_usage_and_version() {
    let f = fixture();
    let help = f.err(&["--help"]);
    assert_eq!(help, SbatchError::HelpRequested);
    assert_eq!(help.exit_code(), 0);
    assert!(help.to_string().starts_with("Usage: sbatch"));
    assert!(help.to_string().contains("--mem-per-cpu"));
    assert_eq!(f.err(&["-h", "job.sh"]), SbatchError::HelpRequested);
    let usage = f.err(&["--usage"]);
    assert_eq!(usage.exit_code(), 0);
    assert!(usage.to_string().starts_with("Usage: sbatch [-J name]"));
    let version = f.err(&["-V"]);
    assert_eq!(version.exit_code(), 0);
    assert_eq!(
        version.to_string(),
        format!("canopy {}", env!("CARGO_PKG_VERSION"))
    );
    // Only the command line asks for help; a directive is ignored.
    let sub = f.script("#!/bin/sh\n#SBATCH --help\n#SBATCH -J ok\n", &[]);
    assert_eq!(sub.unwrap().submit.name, "ok");
}

// ---- the script ---------------------------------------------------

#[test]
fn script_checks() {
    let f = fixture();
    assert_eq!(f.script("", &[]).unwrap_err(), SbatchError::EmptyScript);
    assert_eq!(
        f.script("  \n\t\n", &[]).unwrap_err().to_string(),
        "sbatch: error: Batch script contains only whitespace!"
    );
    assert_eq!(
        f.script("echo hi\n", &[]).unwrap_err().to_string(),
        "sbatch: error: This does not look like a batch script.  The first\n\
             sbatch: error: line must start with #! followed by the path to an interpreter.\n\
             sbatch: error: For instance: #!/bin/sh"
    );
    assert_eq!(
        f.script("#!/bin/sh\necho \0\n", &[])
            .unwrap_err()
            .to_string(),
        "sbatch: error: The Slurm controller does not allow scripts that\n\
             sbatch: error: contain a NULL character '\\0'."
    );
    assert_eq!(
        f.script("#!/bin/sh\r\necho hi\r\n", &[])
            .unwrap_err()
            .to_string(),
        "sbatch: error: Batch script contains DOS line breaks (\\r\\n)\n\
             sbatch: error: instead of expected UNIX line breaks (\\n)."
    );
}

#[test]
fn unreadable_scripts() {
    let f = fixture();
    let e = f.err(&["nope.sh"]);
    assert!(
        e.to_string()
            .starts_with("sbatch: error: Unable to open file nope.sh: "),
        "{e}"
    );
    fs::write(f.dir.path().join("bin.sh"), b"#!/bin/sh\n\xff\xfe\n").unwrap();
    assert_eq!(
        f.err(&["bin.sh"]).to_string(),
        "sbatch: error: Batch script bin.sh is not valid UTF-8 text"
    );
}

#[test]
fn bare_script_name_is_found_on_path() {
    let tools = tempfile::tempdir().unwrap();
    fs::write(tools.path().join("tool.sh"), SCRIPT).unwrap();
    let path = format!("/nonexistent:{}", tools.path().display());
    let f = fixture().env("PATH", &path);
    let s = f.ok(&["tool.sh"]).submit;
    assert_eq!(s.command, tools.path().join("tool.sh").to_string_lossy());
    assert_eq!(s.name, "tool.sh");
    // A name with a slash is only looked up from the current directory.
    assert!(matches!(
        f.err(&["./tool.sh"]),
        SbatchError::ScriptUnreadable { .. }
    ));
}

#[test]
fn script_file_defaults() {
    let f = fixture();
    f.write("sub/job.sh", SCRIPT);
    let sub = f.ok(&["-J", "a", "./sub/job.sh", "x", "y"]);
    let s = sub.submit;
    assert_eq!(s.command, format!("{}/sub/job.sh", f.cwd()));
    assert_eq!(s.script, SCRIPT);
    assert_eq!(s.workdir, f.cwd());
    assert_eq!(s.submit_dir, f.cwd());
    assert_eq!(s.submit_host, "login1");
    assert_eq!((s.user.as_str(), s.uid, s.gid), ("alice", 1000, 100));
    assert_eq!(s.submit_line, "sbatch -J a ./sub/job.sh x y");
    assert_eq!(s.script_args, argv(&["x", "y"]));
    assert_eq!((s.stdout, s.stderr, s.stdin), (None, None, None));
    assert!(!sub.parsable && !sub.quiet && sub.warnings.is_empty());
    // The job name defaults to the script's file name.
    assert_eq!(f.ok(&["sub/job.sh"]).submit.name, "job.sh");
}

#[test]
fn working_directory() {
    let f = fixture();
    f.write("job.sh", SCRIPT);
    assert_eq!(
        f.ok(&["-D", "/scratch/x", "job.sh"]).submit.workdir,
        "/scratch/x"
    );
    assert_eq!(
        f.ok(&["--chdir=./a/./b/", "job.sh"]).submit.workdir,
        format!("{}/a/b", f.cwd())
    );
}

#[test]
fn stream_none_means_dev_null() {
    let f = fixture();
    f.write("job.sh", SCRIPT);
    let s = f
        .ok(&["-o", "none", "-e", "NONE", "-i", "None", "job.sh"])
        .submit;
    assert_eq!(s.stdout.as_deref(), Some("/dev/null"));
    assert_eq!(s.stderr.as_deref(), Some("/dev/null"));
    assert_eq!(s.stdin.as_deref(), Some("/dev/null"));
}

#[test]
fn wrap_builds_a_script() {
    let f = fixture();
    let s = f.ok(&["--wrap=echo \"$HOME\" && true"]).submit;
    assert_eq!(
        s.script,
        "#!/bin/sh\n# Written by sbatch --wrap.\n\necho \"$HOME\" && true\n"
    );
    assert_eq!(s.name, "wrap");
    assert_eq!(s.command, "(null)");
    assert!(s.script_args.is_empty());
    assert_eq!(f.ok(&["-J", "w", "--wrap", "true"]).submit.name, "w");
    let e = f.err(&["--wrap", "true", "job.sh"]);
    assert_eq!(
        e.to_string(),
        "sbatch: error: Script arguments not permitted with --wrap option"
    );
}

#[test]
fn stdin_script() {
    let f = fixture();
    let e = f.err(&["--parsable"]);
    assert_eq!(e, SbatchError::NoScript);
    assert_eq!(e.exit_code(), 1);
    let text = "#!/bin/bash\n#SBATCH -J from-stdin\n#SBATCH --parsable\necho hi\n";
    let sub = parse_submission(&argv(&["-N", "1"]), Some(text.to_string()), &f.ctx).unwrap();
    assert_eq!(sub.submit.name, "from-stdin");
    assert_eq!(sub.submit.command, "(null)");
    assert_eq!(sub.submit.script, text);
    assert!(sub.parsable);
    let plain = parse_submission(&[], Some(SCRIPT.to_string()), &f.ctx).unwrap();
    assert_eq!(plain.submit.name, "sbatch");
    // A named file wins over standard input.
    f.write("job.sh", SCRIPT);
    let sub = parse_submission(&argv(&["job.sh"]), Some(text.to_string()), &f.ctx).unwrap();
    assert_eq!(sub.submit.name, "job.sh");
    // Standard input gets the same checks as a file.
    let e = parse_submission(&[], Some("echo\n".to_string()), &f.ctx).unwrap_err();
    assert_eq!(e, SbatchError::MissingShebang);
}

// ---- directives ---------------------------------------------------

#[test]
fn simple_slurm_padded_directives() {
    let f = fixture();
    let text = "#!/bin/sh\n\n#SBATCH --array               0-2\n\
                    #SBATCH --job-name            n\n\
                    #SBATCH --output              o_%j.out\n\
                    #SBATCH --parsable   \n\necho hi\n";
    let sub = f.script(text, &[]).unwrap();
    assert!(sub.parsable);
    assert_eq!(sub.submit.name, "n");
    assert_eq!(sub.submit.stdout.as_deref(), Some("o_%j.out"));
    assert!(sub.warnings.is_empty(), "{:?}", sub.warnings);
    let array = sub.submit.array.unwrap();
    assert_eq!((array.indices, array.throttle), (vec![0, 1, 2], None));
}

#[test]
fn arrays_and_dependencies() {
    let f = fixture();
    f.write("job.sh", SCRIPT);
    let sub = f.ok(&["-a", "1-7:2%2", "-d", "afterok:5", "job.sh"]);
    let array = sub.submit.array.unwrap();
    assert_eq!(array.indices, vec![1, 3, 5, 7]);
    assert_eq!((array.step, array.throttle), (2, Some(2)));
    assert_eq!(sub.submit.dependency.as_deref(), Some("afterok:5"));
    let sub = f.ok(&["--kill-on-invalid-dep=yes", "job.sh"]);
    assert_eq!(sub.submit.kill_on_invalid_dep, Some(true));
    let sig = |v: &str| parse_warn_signal(v);
    assert_eq!(
        sig("USR2@90"),
        Ok(SignalSpec {
            signal: 12,
            secs: 90,
            batch_only: false
        })
    );
    assert_eq!(
        sig("B:TERM").map(|s| (s.signal, s.secs, s.batch_only)),
        Ok((15, 60, true))
    );
    assert_eq!(sig("R:10@5").map(|s| (s.signal, s.secs)), Ok((10, 5)));
    for bad in ["USR9@1", "USR1@x", "X:USR1", "USR1@99999999", ""] {
        assert!(sig(bad).is_err(), "{bad}");
    }
    let e = parse_submission(&argv(&["--array=3-1", "job.sh"]), None, &f.ctx).unwrap_err();
    assert_eq!(
        e.to_string(),
        "sbatch: error: Invalid job array specification \"3-1\": \
             invalid --array range \"3-1\": the end is below the start"
    );
    let e = parse_submission(
        &argv(&["--kill-on-invalid-dep=maybe", "job.sh"]),
        None,
        &f.ctx,
    )
    .unwrap_err();
    assert!(matches!(e, SbatchError::InvalidChoice { .. }));
}

#[test]
fn submitit_directives() {
    let f = fixture();
    let text = "#!/bin/bash\n\n# Parameters\n\
                    #SBATCH --error=/abs/logs/%j/%j_0_log.err\n\
                    #SBATCH --job-name=smoke\n\
                    #SBATCH --nodes=1\n\
                    #SBATCH --open-mode=append\n\
                    #SBATCH --output=/abs/logs/%j/%j_0_log.out\n\
                    #SBATCH --signal=USR2@90\n\
                    #SBATCH --time=2\n\
                    #SBATCH --wckey=submitit\n\n# command\nexport X=1\n";
    let sub = f.script(text, &[]).unwrap();
    let s = &sub.submit;
    assert_eq!(s.name, "smoke");
    assert_eq!((s.min_nodes, s.max_nodes), (Some(1), Some(1)));
    assert_eq!(s.time_limit_min, Some(2));
    assert_eq!(s.stderr.as_deref(), Some("/abs/logs/%j/%j_0_log.err"));
    assert_eq!(s.stdout.as_deref(), Some("/abs/logs/%j/%j_0_log.out"));
    assert!(s.open_append);
    assert_eq!(s.signal.map(|x| (x.signal, x.secs)), Some((12, 90)));
    assert_eq!(sub.warnings, vec![unsupported("wckey")]);
    assert!(!sub.parsable);
}

#[test]
fn directive_quotes_and_comments() {
    let f = fixture();
    let name = |line: &str| {
        let text = format!("#!/bin/sh\n{line}\ntrue\n");
        f.script(&text, &[]).unwrap().submit.name
    };
    assert_eq!(name("#SBATCH --job-name='a b'"), "a b");
    assert_eq!(name("#SBATCH -J \"x y\""), "x y");
    assert_eq!(name("#SBATCH -J plain # trailing comment"), "plain");
    assert_eq!(name("#SBATCH -J cut#here"), "cut");
    assert_eq!(name("#SBATCH -J 'keep#this'"), "keep#this");
    assert_eq!(name("#SBATCH -J a\\#b"), "a#b");
    assert_eq!(name("#SBATCH -J \"say \\\"hi\\\"\""), "say \"hi\"");
    assert_eq!(name("#SBATCH\t-J\ttabs"), "tabs");
}

#[test]
fn directive_scan_rules() {
    let f = fixture();
    let text = "#!/bin/sh\n\
                    #SBATCH -J first\n\
                    \n\
                    # a comment\n\
                    \x20   # an indented comment\n\
                    \x20#SBATCH -J indented-is-not-a-directive\n\
                    #sbatch -J lowercase-is-not-either\n\
                    #SBATCH -p part\n\
                    #SBATCH -J second\n\
                    echo start\n\
                    #SBATCH -J after-the-first-command\n";
    let s = f.script(text, &[]).unwrap().submit;
    // Later directives override earlier ones; the scan stops at `echo`.
    assert_eq!(s.name, "second");
    assert_eq!(s.partition.as_deref(), Some("part"));
}

#[test]
fn legacy_slurm_directive() {
    let f = fixture();
    let sub = f
        .script("#!/bin/sh\n#SLURM -J legacy\n#SLURM -p p\n", &[])
        .unwrap();
    assert_eq!(sub.submit.name, "legacy");
    assert_eq!(
        sub.warnings,
        vec![
            "sbatch: error: Change from #SLURM to #SBATCH in your script and verify the \
                 options are valid in sbatch"
                .to_string()
        ]
    );
}

#[test]
fn directive_syntax_errors() {
    let f = fixture();
    assert_eq!(
        f.script("#!/bin/sh\n#SBATCH -J 'oops\n", &[])
            .unwrap_err()
            .to_string(),
        "sbatch: fatal: job.sh: line 2: Unmatched `'` in [#SBATCH -J 'oops]"
    );
    assert_eq!(
        f.script("#!/bin/sh\n\n#SBATCH -J \"oops\n", &[])
            .unwrap_err(),
        SbatchError::UnmatchedQuote {
            file: "job.sh".to_string(),
            line: 3,
            quote: '"',
            text: "#SBATCH -J \"oops".to_string()
        }
    );
    assert_eq!(
        f.script("#!/bin/sh\n#SBATCH -J foo\\\n", &[])
            .unwrap_err()
            .to_string(),
        "sbatch: fatal: job.sh: line 2: cannot split directive [#SBATCH -J foo\\]"
    );
    let e = parse_submission(&[], Some("#!/bin/sh\n#SBATCH -J 'x\n".to_string()), &f.ctx);
    assert!(matches!(
        e,
        Err(SbatchError::UnmatchedQuote { ref file, .. }) if file == "(stdin)"
    ));
}

#[test]
fn directive_value_errors() {
    let f = fixture();
    assert_eq!(
        f.script("#!/bin/sh\n#SBATCH --nodes=x\n", &[]).unwrap_err(),
        SbatchError::InvalidNodeCount {
            value: "x".to_string()
        }
    );
    assert_eq!(
        f.script("#!/bin/sh\n#SBATCH --bogus\n", &[]).unwrap_err(),
        SbatchError::Syntax(GetoptError::Unrecognized {
            option: "bogus".to_string()
        })
    );
}

#[test]
fn directive_stray_word_stops_option_parsing() {
    let f = fixture();
    let sub = f
        .script("#!/bin/sh\n#SBATCH -J a\n#SBATCH stray -N 3\n", &[])
        .unwrap();
    assert_eq!(sub.submit.name, "a");
    assert_eq!(sub.submit.min_nodes, None);
    assert_eq!(
        sub.warnings,
        vec![
            "sbatch: warning: #SBATCH directives from 'stray' on are ignored: 'stray' is \
                 not an option"
                .to_string()
        ]
    );
}

#[test]
fn directive_wrap_is_ignored() {
    let f = fixture();
    let sub = f
        .script("#!/bin/sh\n#SBATCH --wrap=hostname\n", &[])
        .unwrap();
    assert_eq!(sub.submit.script, "#!/bin/sh\n#SBATCH --wrap=hostname\n");
    assert_eq!(
        sub.warnings,
        vec!["sbatch: warning: --wrap in a batch script is ignored".to_string()]
    );
}

#[test]
fn heterogeneous_jobs_are_refused() {
    let f = fixture();
    let e = f
        .script("#!/bin/sh\n#SBATCH -N1\n#SBATCH hetjob\n#SBATCH -N2\n", &[])
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "sbatch: error: heterogeneous jobs (#SBATCH hetjob) are not supported by canopy yet"
    );
    assert_eq!(
        f.err(&["-N1", ":", "-N2", "job.sh"]),
        SbatchError::HetJobUnsupported {
            marker: "':'".to_string()
        }
    );
}

// ---- precedence and environment -----------------------------------

#[test]
fn command_line_over_env_over_directives() {
    let f = fixture()
        .env("SBATCH_JOB_NAME", "from-env")
        .env("SBATCH_TIMELIMIT", "20")
        .env("SBATCH_PARTITION", "");
    let text = "#!/bin/sh\n#SBATCH -J from-script\n#SBATCH -p script-part\n\
                    #SBATCH -t 10\n#SBATCH -o script.out\n";
    let s = f.script(text, &["-J", "from-cli"]).unwrap().submit;
    assert_eq!(s.name, "from-cli");
    assert_eq!(s.time_limit_min, Some(20));
    // An empty variable counts as unset.
    assert_eq!(s.partition.as_deref(), Some("script-part"));
    assert_eq!(s.stdout.as_deref(), Some("script.out"));
    let s = f.script(text, &[]).unwrap().submit;
    assert_eq!(s.name, "from-env");
    let s = f.script(text, &["-t", "5"]).unwrap().submit;
    assert_eq!(s.time_limit_min, Some(5));
}

#[test]
fn env_options_warn_and_validate() {
    let f = fixture()
        .env("SBATCH_ACCOUNT", "proj")
        .env("SBATCH_NO_REQUEUE", "1")
        .env("SBATCH_GRES", "gpu:1");
    f.write("job.sh", SCRIPT);
    let sub = f.ok(&["job.sh"]);
    assert!(sub.warnings.is_empty(), "{:?}", sub.warnings);
    assert_eq!(sub.submit.resources.gres.len(), 1);
    assert_eq!(sub.submit.account.as_deref(), Some("proj"));
    assert!(sub.submit.no_requeue);
    let bad = fixture().env("SBATCH_TIMELIMIT", "later");
    bad.write("job.sh", SCRIPT);
    assert!(matches!(
        bad.err(&["job.sh"]),
        SbatchError::InvalidTime { .. }
    ));
}

#[test]
fn every_env_variable_names_a_known_option() {
    for (var, long) in ENV_OPTIONS {
        let spec = find_long(long).unwrap();
        assert_eq!(spec.long, *long, "{var} names a prefix, not an option");
    }
}

#[test]
fn option_table_has_no_duplicates() {
    for (i, a) in OPTIONS.iter().enumerate() {
        for b in &OPTIONS[i + 1..] {
            assert_ne!(a.long, b.long);
            assert!(a.short.is_none() || a.short != b.short, "{}", a.long);
        }
    }
}

// ---- --export -----------------------------------------------------

fn caller_env() -> Vec<(String, String)> {
    vars(&[
        ("PATH", "/usr/bin"),
        ("HOME", "/home/alice"),
        ("FOO", "foo"),
        ("SLURM_CONF", "/etc/slurm.conf"),
    ])
}

#[test]
fn export_all_is_the_default() {
    assert_eq!(export_env(None, &caller_env()), caller_env());
    assert_eq!(export_env(Some("ALL"), &caller_env()), caller_env());
    let f = fixture();
    f.write("job.sh", SCRIPT);
    assert_eq!(f.ok(&["job.sh"]).submit.env, f.ctx.env);
}

#[test]
fn export_none_keeps_only_slurm_variables() {
    let only_slurm = vars(&[("SLURM_CONF", "/etc/slurm.conf")]);
    assert_eq!(export_env(Some("NONE"), &caller_env()), only_slurm);
    assert_eq!(export_env(Some("nil"), &caller_env()), only_slurm);
    assert_eq!(export_env(Some(""), &caller_env()), only_slurm);
}

#[test]
fn export_lists() {
    assert_eq!(
        export_env(Some("FOO,BAR=2,MISSING"), &caller_env()),
        vars(&[
            ("SLURM_CONF", "/etc/slurm.conf"),
            ("FOO", "foo"),
            ("BAR", "2")
        ])
    );
    assert_eq!(
        export_env(Some("ALL,HOME=/tmp/h,NEW=1"), &caller_env()),
        vars(&[
            ("PATH", "/usr/bin"),
            ("HOME", "/tmp/h"),
            ("FOO", "foo"),
            ("SLURM_CONF", "/etc/slurm.conf"),
            ("NEW", "1"),
        ])
    );
    // A comma inside a value stays in it.
    assert_eq!(
        export_env(Some("NONE,A=x,y z,B=1"), &[]),
        vars(&[("A", "x,y z"), ("B", "1")])
    );
}

#[test]
fn export_from_option_and_env() {
    let f = fixture();
    f.write("job.sh", SCRIPT);
    let s = f.ok(&["--export=NONE", "job.sh"]).submit;
    assert_eq!(s.env, vars(&[("SLURM_CONF", "/etc/slurm.conf")]));
    let f = fixture().env("SBATCH_EXPORT", "HOME");
    f.write("job.sh", SCRIPT);
    let s = f.ok(&["job.sh"]).submit;
    assert_eq!(
        s.env,
        vars(&[("SLURM_CONF", "/etc/slurm.conf"), ("HOME", "/home/alice")])
    );
}

#[test]
fn uid_and_gid_are_roots_alone() {
    let f = fixture();
    for (opt, name) in [("--uid=bob", "uid"), ("--gid=staff", "gid")] {
        let e = f.run(&[opt, "--wrap", "true"]).unwrap_err();
        assert_eq!(e, SbatchError::RootOnly { option: name });
        assert_eq!(
            e.to_string(),
            format!("sbatch: error: --{name} only permitted by root user")
        );
    }
    // In a directive too: Slurm checks the real uid wherever it is given.
    f.write("j.sh", "#!/bin/sh\n#SBATCH --uid=bob\ntrue\n");
    assert!(f.run(&["j.sh"]).is_err());
    let mut root = fixture();
    root.ctx.uid = 0;
    let s = root
        .run(&["--uid=bob", "--gid=7", "--wrap", "true"])
        .unwrap();
    assert_eq!(s.run_as, (Some("bob".into()), Some("7".into())));
    // Left for sbatch to resolve: the request still names the submitter.
    assert_eq!(s.submit.uid, 0);
}

// -- resource options (--gres, --gpus*, -B, --hint, binding) ------------------

fn gpu(t: Option<&str>, count: u64) -> crate::model::tres::GresRequest {
    crate::model::tres::GresRequest {
        name: "gpu".into(),
        type_: t.map(str::to_string),
        count,
    }
}

#[test]
fn resource_options_fill_the_request() {
    use crate::model::tres::{GresFlags, Hint};
    let f = fixture();
    f.write("job.sh", SCRIPT);
    let s = f.ok(&[
        "--gres=gpu:a100:2,nic:1",
        "-G",
        "a100:4",
        "--gpus-per-node=2",
        "--gpus-per-task=v100:1",
        "--gpus-per-socket=1",
        "--cpus-per-gpu=8",
        "--mem-per-gpu=10G",
        "--gres-flags=enforce-binding",
        "--ntasks-per-socket=2",
        "--hint=nomultithread",
        "-m",
        "block:cyclic",
        "--gpu-bind=closest",
        "job.sh",
    ]);
    let r = &s.submit.resources;
    assert_eq!(r.gres.len(), 2);
    assert_eq!(r.gres[0], gpu(Some("a100"), 2));
    assert_eq!(r.gres[1].name, "nic");
    assert_eq!(r.gpus, Some(gpu(Some("a100"), 4)));
    assert_eq!(r.gpus_per_node, Some(gpu(None, 2)));
    assert_eq!(r.gpus_per_task, Some(gpu(Some("v100"), 1)));
    assert_eq!(r.gpus_per_socket, Some(gpu(None, 1)));
    assert_eq!(r.cpus_per_gpu, Some(8));
    assert_eq!(r.mem_per_gpu_mb, Some(10240));
    assert_eq!(r.gres_flags, Some(GresFlags::EnforceBinding));
    assert_eq!(r.ntasks_per_socket, Some(2));
    assert_eq!(r.hint, Some(Hint::Nomultithread));
    assert_eq!(r.distribution.as_deref(), Some("block:cyclic"));
    assert_eq!(r.gpu_bind.as_deref(), Some("closest"));
    assert_eq!(s.gres, ["gpu", "nic"]);
    // Honoured now: no "not supported" warnings.
    assert!(s.warnings.is_empty(), "{:?}", s.warnings);
}

#[test]
fn extra_node_info_and_shape_counts() {
    let f = fixture();
    f.write("job.sh", SCRIPT);
    let r = f.ok(&["-B", "2:8:1", "job.sh"]).submit.resources;
    assert_eq!(
        (r.sockets_per_node, r.cores_per_socket, r.threads_per_core),
        (Some(2), Some(8), Some(1))
    );
    let r = f
        .ok(&["--extra-node-info=*:4-8", "job.sh"])
        .submit
        .resources;
    assert_eq!(
        (r.sockets_per_node, r.cores_per_socket, r.threads_per_core),
        (None, Some(4), None)
    );
    let r = f
        .ok(&[
            "--sockets-per-node=2",
            "--cores-per-socket=4",
            "--threads-per-core=2",
            "--ntasks-per-core=1",
            "job.sh",
        ])
        .submit
        .resources;
    assert_eq!(
        (
            r.sockets_per_node,
            r.cores_per_socket,
            r.threads_per_core,
            r.ntasks_per_core
        ),
        (Some(2), Some(4), Some(2), Some(1))
    );
}

#[test]
fn resource_values_refused_with_slurms_words() {
    let f = fixture();
    f.write("job.sh", SCRIPT);
    let cases: &[(&[&str], &str)] = &[
        (
            &["--gres=gpu:a:b:c"],
            "sbatch: error: Invalid generic resource (gres) specification",
        ),
        (&["--gpus=0"], "sbatch: error: Invalid --gpus specification"),
        (
            &["--gpus-per-task=x:y:z"],
            "sbatch: error: Invalid --gpus-per-task specification",
        ),
        (
            &["--cpus-per-gpu=0"],
            "sbatch: error: Invalid numeric value \"0\" for --cpus-per-gpu.",
        ),
        (
            &["--mem-per-gpu=lots"],
            "sbatch: error: Invalid --mem-per-gpu specification",
        ),
        (
            &["--gres-flags=bind"],
            "sbatch: error: Invalid --gres-flags specification",
        ),
        (
            &["-B", "x"],
            "sbatch: error: Invalid numeric value \"x\" for first arg of -B.",
        ),
        (
            &["-B", "1:2:3:4"],
            "sbatch: error: Invalid --extra-node-info specification",
        ),
        (
            &["--threads-per-core=two"],
            "sbatch: error: Invalid numeric value \"two\" for --threads-per-core.",
        ),
        (
            &["--ntasks-per-socket=-1"],
            "sbatch: error: Invalid numeric value \"-1\" for --ntasks-per-socket.",
        ),
        (
            &["--hint=fast"],
            "sbatch: error: unrecognized --hint argument \"fast\", see --hint=help",
        ),
        (
            &["--distribution="],
            "sbatch: error: Invalid --distribution specification",
        ),
        (
            &["--gpu-bind="],
            "sbatch: error: Invalid --gpu-bind argument: ",
        ),
        (
            &["--mem=1G", "--mem-per-gpu=1G"],
            "sbatch: fatal: --mem, --mem-per-cpu, and --mem-per-gpu are mutually exclusive.",
        ),
    ];
    for (args, want) in cases {
        let mut all = args.to_vec();
        all.push("job.sh");
        let e = f.err(&all);
        assert_eq!(e.to_string(), *want, "{args:?}");
        assert_eq!(e.exit_code(), 1, "{args:?}");
    }
    // sbatch has no --cpu-bind in 22.05 (srun only).
    assert!(matches!(
        f.err(&["--cpu-bind=cores", "job.sh"]),
        SbatchError::Syntax(_)
    ));
}

#[test]
fn gres_and_hint_help() {
    let f = fixture();
    f.write("job.sh", SCRIPT);
    let e = f.err(&["--hint=help", "job.sh"]);
    assert_eq!(e.exit_code(), 0);
    assert!(e.to_string().starts_with("Application hint options:"));
    let e = f.err(&["--gres=help", "job.sh"]);
    assert_eq!(e, SbatchError::ResourceHelp(ResHelp::Gres));
    assert_eq!(
        gres_help(&["gpu".into(), "nic".into()]),
        "Valid gres options are:\ngpu[[:type]:count]\nnic[[:type]:count]"
    );
}

#[test]
fn resource_variables_and_precedence() {
    use crate::model::tres::{GresFlags, Hint};
    let f = fixture()
        .env("SBATCH_GRES", "gpu:1")
        .env("SBATCH_GPUS", "2")
        .env("SBATCH_GPUS_PER_NODE", "1")
        .env("SBATCH_GPUS_PER_TASK", "1")
        .env("SBATCH_GPUS_PER_SOCKET", "1")
        .env("SBATCH_CPUS_PER_GPU", "3")
        .env("SBATCH_MEM_PER_GPU", "2G")
        .env("SBATCH_GRES_FLAGS", "disable-binding")
        .env("SBATCH_HINT", "compute_bound")
        .env("SBATCH_DISTRIBUTION", "cyclic")
        .env("SBATCH_GPU_BIND", "single:1")
        .env("SBATCH_THREADS_PER_CORE", "1");
    f.write(
        "job.sh",
        "#!/bin/sh\n#SBATCH --gpus=8\n#SBATCH --cpus-per-gpu=9\n",
    );
    // -B on the command line: the environment's --hint goes (Slurm's rule).
    let r = f.ok(&["--cpus-per-gpu=4", "job.sh"]).submit.resources;
    assert_eq!(r.gres, [gpu(None, 1)]);
    // The environment beats the script; the command line beats both.
    assert_eq!(r.gpus, Some(gpu(None, 2)));
    assert_eq!(r.cpus_per_gpu, Some(4));
    assert_eq!(r.gpus_per_node, Some(gpu(None, 1)));
    assert_eq!(r.gpus_per_task, Some(gpu(None, 1)));
    assert_eq!(r.gpus_per_socket, Some(gpu(None, 1)));
    assert_eq!(r.mem_per_gpu_mb, Some(2048));
    assert_eq!(r.gres_flags, Some(GresFlags::DisableBinding));
    assert_eq!(r.distribution.as_deref(), Some("cyclic"));
    assert_eq!(r.gpu_bind.as_deref(), Some("single:1"));
    // SBATCH_HINT and SBATCH_THREADS_PER_CORE are rivals from the same
    // level: the hint is dropped.
    assert_eq!((r.hint, r.threads_per_core), (None, Some(1)));
    let hint = fixture().env("SLURM_HINT", "memory_bound");
    hint.write("job.sh", SCRIPT);
    assert_eq!(
        hint.ok(&["job.sh"]).submit.resources.hint,
        Some(Hint::MemoryBound)
    );
    // --mem on the command line drops the environment's --mem-per-gpu.
    let m = fixture().env("SBATCH_MEM_PER_GPU", "2G");
    m.write("job.sh", SCRIPT);
    let s = m.ok(&["--mem=1G", "job.sh"]).submit;
    assert_eq!(
        (s.mem_per_node_mb, s.resources.mem_per_gpu_mb),
        (Some(1024), None)
    );
    let two = fixture()
        .env("SBATCH_MEM_PER_GPU", "2G")
        .env("SBATCH_MEM_PER_CPU", "1G");
    two.write("job.sh", SCRIPT);
    assert_eq!(two.err(&["job.sh"]), SbatchError::EnvMemoryConflict);
}

#[test]
fn hint_rivals_follow_slurms_rules() {
    use crate::model::tres::Hint;
    let f = fixture();
    f.write("job.sh", SCRIPT);
    // Both on the command line: --hint is ignored (noted with -v).
    let s = f.ok(&["--hint=nomultithread", "--ntasks-per-core=2", "job.sh"]);
    assert_eq!(
        (s.submit.resources.hint, s.submit.resources.ntasks_per_core),
        (None, Some(2))
    );
    assert!(s.warnings.is_empty());
    let s = f.ok(&["-v", "--hint=multithread", "-B", "2", "job.sh"]);
    assert_eq!(s.submit.resources.hint, None);
    assert_eq!(
        s.warnings,
        [
            "sbatch: Following options are mutually exclusive with --hint: --ntasks-per-core, \
          --threads-per-core, -B and --cpu-bind (other then --cpu-bind=verbose). Ignoring --hint."
        ]
    );
    // --hint on the command line drops the environment's rivals.
    let e = fixture().env("SBATCH_THREADS_PER_CORE", "2");
    e.write("job.sh", SCRIPT);
    let r = e.ok(&["--hint=compute_bound", "job.sh"]).submit.resources;
    assert_eq!(
        (r.hint, r.threads_per_core),
        (Some(Hint::ComputeBound), None)
    );
    // A rival on the command line drops the environment's --hint.
    let e = fixture().env("SBATCH_HINT", "multithread");
    e.write("job.sh", SCRIPT);
    let r = e.ok(&["--threads-per-core=1", "job.sh"]).submit.resources;
    assert_eq!((r.hint, r.threads_per_core), (None, Some(1)));
    // The script counts with the command line.
    let r = f
        .script(
            "#!/bin/sh\n#SBATCH --ntasks-per-core=1\n",
            &["--hint=memory_bound"],
        )
        .unwrap()
        .submit
        .resources;
    assert_eq!((r.hint, r.ntasks_per_core), (None, Some(1)));
}

#[test]
fn requests_are_echoed_to_the_job_environment() {
    let f = fixture();
    f.write("job.sh", SCRIPT);
    let s = f
        .ok(&[
            "--export=NONE",
            "--gpus-per-node=a100:2",
            "-G",
            "4",
            "--gpus-per-task=1",
            "--gpus-per-socket=1",
            "--cpus-per-gpu=6",
            "--mem-per-gpu=2G",
            "--gpu-bind=closest",
            "--ntasks-per-core=1",
            "--ntasks-per-socket=2",
            "-m",
            "cyclic",
            "job.sh",
        ])
        .submit;
    let get = |k: &str| s.env.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
    assert_eq!(get("SLURM_GPUS_PER_NODE"), Some("a100:2"));
    assert_eq!(get("SLURM_GPUS"), Some("4"));
    assert_eq!(get("SLURM_GPUS_PER_TASK"), Some("1"));
    assert_eq!(get("SLURM_GPUS_PER_SOCKET"), Some("1"));
    assert_eq!(get("SLURM_CPUS_PER_GPU"), Some("6"));
    assert_eq!(get("SLURM_MEM_PER_GPU"), Some("2048"));
    assert_eq!(get("SLURM_GPU_BIND"), Some("closest"));
    assert_eq!(get("SLURM_NTASKS_PER_CORE"), Some("1"));
    assert_eq!(get("SLURM_NTASKS_PER_SOCKET"), Some("2"));
    assert_eq!(get("SLURM_DISTRIBUTION"), Some("cyclic"));
    // And srun in the job reads them back: the step inherits the request.
    let step = crate::cli::srun::parse_env(&["true".to_string()], &s.env).unwrap();
    assert_eq!(step.resources.gpus_per_node, s.resources.gpus_per_node);
    assert_eq!(step.resources.mem_per_gpu_mb, Some(2048));
    assert_eq!(step.resources.cpus_per_gpu, Some(6));
}

#[test]
fn oversubscribe_and_exclusive_replace_each_other() {
    let f = fixture();
    let s = f.ok(&["-s", "--wrap", "true"]);
    assert!(s.submit.oversubscribe);
    assert_eq!(s.submit.exclusive, None);
    assert!(s.warnings.is_empty(), "{:?}", s.warnings);
    // The later of the two wins, as both set Slurm's one field.
    let s = f.ok(&["--exclusive", "--oversubscribe", "--wrap", "true"]);
    assert!(s.submit.oversubscribe);
    assert_eq!(s.submit.exclusive, None);
    let s = f.ok(&["-s", "--exclusive", "--wrap", "true"]);
    assert!(!s.submit.oversubscribe);
    assert_eq!(s.submit.exclusive, Some(Exclusive::Node));
    // The command line overrides a directive.
    let s = f
        .script("#!/bin/sh\n#SBATCH --exclusive\ntrue\n", &["-s"])
        .unwrap();
    assert!(s.submit.oversubscribe);
    assert_eq!(s.submit.exclusive, None);
    let s = f
        .script("#!/bin/sh\n#SBATCH -s\ntrue\n", &["--exclusive"])
        .unwrap();
    assert!(!s.submit.oversubscribe);
    assert_eq!(s.submit.exclusive, Some(Exclusive::Node));
}
