//! Size limits on what a job carries, and the checks on `--mail-user`.
//!
//! Every string a job holds is kept for its whole life and shown by
//! squeue, scontrol and sacct to everyone, so one user's megabyte-long job
//! name slows every listing down. Slurm's controller bounds each field
//! (`_test_job_desc_fields` in job_mgr.c): names, comments, accounts,
//! features, licenses, mail users and the like at 1024 bytes, paths at
//! `MAXPATHLEN` (4096), dependencies at 128 KiB, and the batch script at
//! `SchedulerParameters=max_script_size` (4 MiB by default). A field over
//! its bound is refused with Slurm's `ESLURM_PATHNAME_TOO_LONG` text, and
//! canopy says which field it was.

use crate::model::job::JobSubmit;
use crate::wire::messages::{ErrorCode, ErrorReply};

/// Slurm's bound on names, comments and other free strings.
pub const MAX_STR_LEN: usize = 1024;
/// Slurm's bound on paths (`MAXPATHLEN`).
pub const MAX_PATH_LEN: usize = 4096;
/// Slurm's bound on a dependency expression (128 KiB).
pub const MAX_DEPENDENCY_LEN: usize = 128 * 1024;
/// Slurm's default `max_submit_line_size` (1 MiB): the command line as
/// typed, and the script's arguments together.
pub const MAX_SUBMIT_LINE_LEN: usize = 1024 * 1024;
/// Slurm's bound on each environment variable's name and value is the
/// message size; canopy bounds the whole environment at what Slurm's
/// default script size allows, so an environment cannot carry what a
/// script may not.
pub const MAX_ENV_LEN: usize = 4 * 1024 * 1024;

/// Slurm's text for a field over its bound (`ESLURM_PATHNAME_TOO_LONG`).
pub const TOO_LONG: &str = "Pathname of a file, directory or other parameter too long";

/// The refusal of a `--mail-user` that is unsafe to hand to MailProg
/// (canopy's words: Slurm has no such check).
pub const BAD_MAIL_USER: &str = "Invalid --mail-user";

/// A field that is over its bound: which, how long, and the bound.
fn too_long(field: &str, len: usize, max: usize) -> ErrorReply {
    tracing::info!(field, len, max, "job field too long");
    ErrorReply {
        code: ErrorCode::InvalidRequest,
        message: format!("{TOO_LONG} ({field} is {len} bytes; the limit is {max})"),
    }
}

/// `value`'s length against `max`, naming `field` on refusal.
pub fn check_len(field: &str, value: &str, max: usize) -> Result<(), ErrorReply> {
    if value.len() > max {
        return Err(too_long(field, value.len(), max));
    }
    // A NUL cannot reach a process's argv or environment (a Prolog given
    // such a job's directory could not start, and would drain its node);
    // Slurm's C strings cannot hold one either.
    if value.contains('\0') {
        return Err(ErrorReply {
            code: ErrorCode::InvalidRequest,
            message: format!("Invalid {field}: it contains a NUL byte"),
        });
    }
    Ok(())
}

/// The binding options a job or step carries to its nodes: bounded, and
/// read here as the nodes will read them, so a bad or oversized one is
/// refused at the door rather than on every node.
pub fn check_resources(r: &crate::model::tres::ResourceRequest) -> Result<(), ErrorReply> {
    use crate::model::binding::{CpuBind, Distribution, GpuBind};
    let invalid = |e: crate::model::binding::BindError| ErrorReply {
        code: ErrorCode::InvalidRequest,
        message: e.to_string(),
    };
    if let Some(v) = &r.cpu_bind {
        check_len("--cpu-bind", v, MAX_STR_LEN)?;
        CpuBind::parse(v).map_err(invalid)?;
    }
    if let Some(v) = &r.distribution {
        check_len("--distribution", v, MAX_STR_LEN)?;
        Distribution::parse(v).map_err(invalid)?;
    }
    if let Some(v) = &r.gpu_bind {
        check_len("--gpu-bind", v, MAX_STR_LEN)?;
        GpuBind::parse(v).map_err(invalid)?;
    }
    Ok(())
}

/// The batch script against `max_script_size`. Slurm refuses an
/// oversized script with the same text as any other oversized field.
pub fn check_script(script: &str, max_script_size: u64) -> Result<(), ErrorReply> {
    let max = usize::try_from(max_script_size).unwrap_or(usize::MAX);
    if script.len() > max {
        return Err(too_long("batch script", script.len(), max));
    }
    Ok(())
}

/// Every string of a submission against its bound, and the script against
/// `max_script_size`. Names are the options users type.
pub fn check_submit(s: &JobSubmit, max_script_size: u64) -> Result<(), ErrorReply> {
    let opt = |v: &Option<String>| v.as_deref().unwrap_or_default().to_string();
    let fields: [(&str, String, usize); 17] = [
        ("--job-name", s.name.clone(), MAX_STR_LEN),
        ("--comment", opt(&s.comment), MAX_STR_LEN),
        ("--account", opt(&s.account), MAX_STR_LEN),
        ("--partition", opt(&s.partition), MAX_STR_LEN),
        ("--reservation", opt(&s.reservation), MAX_STR_LEN),
        ("--licenses", opt(&s.licenses), MAX_STR_LEN),
        ("--constraint", opt(&s.constraint), MAX_STR_LEN),
        ("--mail-user", opt(&s.mail_user), MAX_STR_LEN),
        ("--dependency", opt(&s.dependency), MAX_DEPENDENCY_LEN),
        ("--output", opt(&s.stdout), MAX_PATH_LEN),
        ("--error", opt(&s.stderr), MAX_PATH_LEN),
        ("--input", opt(&s.stdin), MAX_PATH_LEN),
        ("--chdir", s.workdir.clone(), MAX_PATH_LEN),
        ("the submit directory", s.submit_dir.clone(), MAX_PATH_LEN),
        ("the script path", s.command.clone(), MAX_PATH_LEN),
        ("--nodelist", opt(&s.req_nodes), MAX_PATH_LEN),
        ("--exclude", opt(&s.exc_nodes), MAX_PATH_LEN),
    ];
    for (field, value, max) in &fields {
        check_len(field, value, *max)?;
    }
    check_len("the submit host", &s.submit_host, MAX_STR_LEN)?;
    check_resources(&s.resources)?;
    check_len("the submit line", &s.submit_line, MAX_SUBMIT_LINE_LEN)?;
    let args: usize = s.script_args.iter().map(|a| a.len() + 1).sum();
    if args > MAX_SUBMIT_LINE_LEN {
        return Err(too_long(
            "the script's arguments",
            args,
            MAX_SUBMIT_LINE_LEN,
        ));
    }
    let env: usize = s.env.iter().map(|(k, v)| k.len() + v.len() + 2).sum();
    if env > MAX_ENV_LEN {
        return Err(too_long("the environment", env, MAX_ENV_LEN));
    }
    check_script(&s.script, max_script_size)?;
    if let Some(m) = &s.mail_user {
        check_mail_user(m)?;
    }
    Ok(())
}

/// An srun step's strings, bounded as a job's are (the step is kept in
/// its job's record and shown by `squeue -s` and `scontrol show step`).
pub fn check_step(r: &crate::wire::messages::StepRequest) -> Result<(), ErrorReply> {
    let opt = |v: &Option<String>| v.as_deref().unwrap_or_default().to_string();
    let fields: [(&str, String, usize); 8] = [
        ("--job-name", r.name.clone(), MAX_STR_LEN),
        ("--chdir", r.cwd.clone(), MAX_PATH_LEN),
        ("--output", opt(&r.stdout), MAX_PATH_LEN),
        ("--error", opt(&r.stderr), MAX_PATH_LEN),
        ("--input", opt(&r.stdin_pattern), MAX_PATH_LEN),
        ("--nodelist", opt(&r.nodelist), MAX_PATH_LEN),
        ("--exclude", opt(&r.exclude), MAX_PATH_LEN),
        ("the srun host", r.srun_host.clone(), MAX_STR_LEN),
    ];
    for (field, value, max) in &fields {
        check_len(field, value, *max)?;
    }
    check_resources(&r.resources)?;
    let args: usize = r.argv.iter().map(|a| a.len() + 1).sum();
    if args > MAX_SUBMIT_LINE_LEN {
        return Err(too_long("the command line", args, MAX_SUBMIT_LINE_LEN));
    }
    let env: usize = r.env.iter().map(|(k, v)| k.len() + v.len() + 2).sum();
    if env > MAX_ENV_LEN {
        return Err(too_long("the environment", env, MAX_ENV_LEN));
    }
    Ok(())
}

/// `--mail-user`: MailProg runs as root (or SlurmUser) with the address
/// as an argument, so an address must be one that cannot be read as an
/// option or reach a shell: comma-separated recipients, none empty or
/// starting with `-`, of letters, digits and `@ . _ + - = %` only.
pub fn check_mail_user(value: &str) -> Result<(), ErrorReply> {
    let refuse = |why: &str| {
        tracing::info!(mail_user = value, why, "mail user refused");
        Err(ErrorReply {
            code: ErrorCode::InvalidRequest,
            message: format!("{BAD_MAIL_USER}: {why}"),
        })
    };
    for who in value.split(',') {
        if who.is_empty() {
            return refuse("an empty recipient");
        }
        if who.starts_with('-') {
            return refuse("a recipient may not start with '-'");
        }
        let allowed = |c: char| c.is_ascii_alphanumeric() || "@._+-=%".contains(c);
        if let Some(c) = who.chars().find(|&c| !allowed(c)) {
            let shown = if c.is_control() || c.is_whitespace() {
                format!("{:?}", c)
            } else {
                format!("'{c}'")
            };
            return refuse(&format!("character {shown} is not allowed in an address"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job() -> JobSubmit {
        JobSubmit {
            name: "j".into(),
            script: "#!/bin/sh\ntrue\n".into(),
            workdir: "/tmp".into(),
            ..Default::default()
        }
    }

    #[test]
    fn strings_at_their_bound_pass_and_one_more_byte_is_refused() {
        let limit = crate::config::DEFAULT_MAX_SCRIPT_SIZE;
        let mut s = job();
        s.name = "x".repeat(MAX_STR_LEN);
        assert!(check_submit(&s, limit).is_ok());
        s.name.push('x');
        let e = check_submit(&s, limit).unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidRequest);
        assert!(e.message.starts_with(TOO_LONG), "{}", e.message);
        assert!(
            e.message.contains("--job-name is 1025 bytes"),
            "{}",
            e.message
        );

        let mut s = job();
        s.comment = Some("c".repeat(MAX_STR_LEN + 1));
        assert!(check_submit(&s, limit)
            .unwrap_err()
            .message
            .contains("--comment"));
        let mut s = job();
        s.workdir = format!("/{}", "d".repeat(MAX_PATH_LEN));
        assert!(check_submit(&s, limit)
            .unwrap_err()
            .message
            .contains("--chdir"));
        // Paths may be longer than names, as in Slurm.
        let mut s = job();
        s.stdout = Some(format!("/{}", "o".repeat(2000)));
        assert!(check_submit(&s, limit).is_ok());
        let mut s = job();
        s.dependency = Some("afterok:1".repeat(20_000));
        assert!(check_submit(&s, limit)
            .unwrap_err()
            .message
            .contains("--dependency"));
        let mut s = job();
        s.env = vec![("BIG".into(), "v".repeat(MAX_ENV_LEN))];
        assert!(check_submit(&s, limit)
            .unwrap_err()
            .message
            .contains("environment"));
    }

    #[test]
    fn steps_are_bounded_like_jobs() {
        let mut r = crate::wire::messages::StepRequest {
            name: "s".into(),
            ..Default::default()
        };
        assert!(check_step(&r).is_ok());
        r.name = "s".repeat(MAX_STR_LEN + 1);
        assert!(check_step(&r).unwrap_err().message.contains("--job-name"));
        r.name = "s".into();
        r.argv = vec!["a".repeat(MAX_SUBMIT_LINE_LEN)];
        assert!(check_step(&r).unwrap_err().message.contains("command line"));
    }

    #[test]
    fn the_script_is_held_to_max_script_size() {
        let mut s = job();
        s.script = format!("#!/bin/sh\n{}", "#".repeat(100));
        assert!(check_submit(&s, 200).is_ok());
        let e = check_submit(&s, 50).unwrap_err();
        assert!(e.message.starts_with(TOO_LONG));
        assert!(e
            .message
            .contains("batch script is 110 bytes; the limit is 50"));
    }

    #[test]
    fn mail_users_that_could_be_options_or_reach_a_shell_are_refused() {
        for ok in [
            "alice",
            "alice@example.org",
            "a.b+tag@x.y",
            "alice,bob@x.org",
        ] {
            assert!(check_mail_user(ok).is_ok(), "{ok}");
        }
        for bad in [
            "-oProxyCommand=x",
            "alice,-x",
            "alice bob",
            "alice;rm -rf /",
            "$(id)",
            "`id`",
            "a\nb",
            "a\u{7}b",
            "a|b",
            "",
            "alice,,bob",
            "a'b",
        ] {
            let e = check_mail_user(bad).unwrap_err();
            assert!(
                e.message.starts_with(BAD_MAIL_USER),
                "{bad:?}: {}",
                e.message
            );
        }
        let mut s = job();
        s.mail_user = Some("-f root".into());
        assert!(check_submit(&s, 1 << 20).is_err());
    }
}
