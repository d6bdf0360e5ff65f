//! Job event mail (`--mail-type`, `--mail-user`), sent the way Slurm's
//! controller sends it: `MailProg -s "<subject>" <user>` with an empty body,
//! and the job described in `SLURM_JOB_*` variables. Site tools written for
//! Slurm's mail (slurm-mail and its kind) read exactly these, so the subjects
//! and variables follow Slurm 22.05, checked side by side.
//!
//! Sent: BEGIN, END and FAIL, per job; for arrays one summary per array
//! (`Slurm Array Summary Job_id=7_* (7) ...`), or one per task with
//! ARRAY_TASKS. REQUEUE, TIME_LIMIT_50/80/90, TIME_LIMIT and INVALID_DEPEND
//! per job (task). Accepted but never sent: STAGE_OUT (canopy has no burst
//! buffers to stage out of).

use std::process::{Command, Stdio};

use crate::model::acct::AcctJob;
use crate::model::job::JobState;
use crate::model::time::fmt_duration_long;

pub const BEGIN: u32 = 1 << 0;
pub const END: u32 = 1 << 1;
pub const FAIL: u32 = 1 << 2;
pub const REQUEUE: u32 = 1 << 3;
pub const TIME_LIMIT: u32 = 1 << 4;
pub const TIME_LIMIT_90: u32 = 1 << 5;
pub const TIME_LIMIT_80: u32 = 1 << 6;
pub const TIME_LIMIT_50: u32 = 1 << 7;
pub const ARRAY_TASKS: u32 = 1 << 8;
pub const INVALID_DEPEND: u32 = 1 << 9;
pub const STAGE_OUT: u32 = 1 << 10;
/// Slurm's ALL: every event but the time-limit ones (and not ARRAY_TASKS).
pub const ALL: u32 = BEGIN | END | FAIL | REQUEUE | INVALID_DEPEND | STAGE_OUT;

/// `--mail-type=list` (case-insensitive, comma-separated) as flags; `None`
/// for a name Slurm does not know. `NONE` clears what came before it.
pub fn parse_mail_type(list: &str) -> Option<u32> {
    let mut flags = 0;
    for name in list.split(',') {
        flags = match name.trim().to_ascii_uppercase().as_str() {
            "NONE" => 0,
            "BEGIN" => flags | BEGIN,
            "END" => flags | END,
            "FAIL" => flags | FAIL,
            "REQUEUE" => flags | REQUEUE,
            "ALL" => flags | ALL,
            "TIME_LIMIT" => flags | TIME_LIMIT,
            "TIME_LIMIT_90" => flags | TIME_LIMIT_90,
            "TIME_LIMIT_80" => flags | TIME_LIMIT_80,
            "TIME_LIMIT_50" => flags | TIME_LIMIT_50,
            "ARRAY_TASKS" => flags | ARRAY_TASKS,
            "INVALID_DEPEND" => flags | INVALID_DEPEND,
            "STAGE_OUT" => flags | STAGE_OUT,
            _ => return None,
        };
    }
    Some(flags)
}

/// One mail to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mail {
    pub to: String,
    pub subject: String,
    pub env: Vec<(String, String)>,
}

/// Who gets a job's mail: `--mail-user`, else the job's user; with
/// MailDomain, a bare name gets `@domain` (as Slurm does).
pub fn recipient(mail_user: Option<&str>, job_user: &str, domain: Option<&str>) -> String {
    let user = mail_user.filter(|u| !u.is_empty()).unwrap_or(job_user);
    match domain {
        Some(d) if !user.contains('@') => format!("{user}@{d}"),
        _ => user.to_string(),
    }
}

/// How a job is named in a subject: `Job_id=12`, `Array Task Job_id=7_3 (9)`,
/// or `Array Summary Job_id=7_* (7)`.
fn job_phrase(j: &AcctJob, summary: bool) -> String {
    match &j.array {
        Some(a) if summary => format!("Array Summary Job_id={0}_* ({0})", a.array_job_id),
        Some(a) => format!(
            "Array Task Job_id={}_{} ({})",
            a.array_job_id, a.task_id, j.job_id
        ),
        None => format!("Job_id={}", j.job_id),
    }
}

fn secs_between(from: Option<i64>, to: Option<i64>) -> u64 {
    match (from, to) {
        (Some(a), Some(b)) => u64::try_from(b - a).unwrap_or(0),
        _ => 0,
    }
}

/// The variables Slurm sets for MailProg, for job `j` in event `what`.
fn base_env(j: &AcctJob, what: &str, group: &str) -> Vec<(String, String)> {
    // Slurm's word for an empty field.
    let or_null = |s: &str| if s.is_empty() { "(null)" } else { s }.to_string();
    let mut env = vec![
        ("SLURM_CLUSTER_NAME", j.cluster.clone()),
        ("SLURM_JOBID", j.job_id.to_string()),
        ("SLURM_JOB_ID", j.job_id.to_string()),
        ("SLURM_JOB_ACCOUNT", or_null(&j.account)),
        ("SLURM_JOB_GID", j.gid.to_string()),
        ("SLURM_JOB_GROUP", group.to_string()),
        ("SLURM_JOB_MAIL_TYPE", what.to_string()),
        ("SLURM_JOB_NAME", j.name.clone()),
        ("SLURM_JOB_NODELIST", or_null(&j.nodes)),
        ("SLURM_JOB_PARTITION", j.partition.clone()),
        ("SLURM_JOB_RESTART_COUNT", j.restarts.to_string()),
        ("SLURM_JOB_STATE", j.state.name().to_string()),
        ("SLURM_JOB_UID", j.uid.to_string()),
        ("SLURM_JOB_USER", j.user.clone()),
        ("SLURM_JOB_WORK_DIR", j.workdir.clone()),
    ];
    if j.num_nodes > 0 {
        env.push(("SLURM_JOB_NUM_NODES", j.num_nodes.to_string()));
    }
    if let Some(a) = &j.array {
        env.extend([
            ("SLURM_ARRAY_JOB_ID", a.array_job_id.to_string()),
            ("SLURM_ARRAY_TASK_COUNT", a.count.to_string()),
            ("SLURM_ARRAY_TASK_ID", a.task_id.to_string()),
            ("SLURM_ARRAY_TASK_MAX", a.max.to_string()),
            ("SLURM_ARRAY_TASK_MIN", a.min.to_string()),
            ("SLURM_ARRAY_TASK_STEP", a.step.to_string()),
        ]);
    }
    env.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

/// The BEGIN mail for job `j` just started (`summary`: the first task of an
/// array mailed as a whole).
pub fn began(j: &AcctJob, to: String, group: &str, summary: bool) -> Mail {
    let queued = fmt_duration_long(secs_between(Some(j.submit_time), j.start_time));
    let subject = if summary {
        format!("Slurm {} Name={} Began", job_phrase(j, true), j.name)
    } else {
        format!(
            "Slurm {} Name={} Began, Queued time {queued}",
            job_phrase(j, false),
            j.name
        )
    };
    let mut env = base_env(j, "Began", group);
    env.push(("SLURM_JOB_QUEUED_TIME".into(), queued));
    Mail { to, subject, env }
}

/// The time-limit mails, with the share of the limit each is sent at (in
/// percent) and Slurm's words for it.
pub const TIME_LIMIT_MAILS: [(u32, u64, &str); 4] = [
    (TIME_LIMIT_50, 50, "Reached 50% of time limit"),
    (TIME_LIMIT_80, 80, "Reached 80% of time limit"),
    (TIME_LIMIT_90, 90, "Reached 90% of time limit"),
    (TIME_LIMIT, 100, "Reached time limit"),
];

/// The time-limit mails due for a job `run_s` seconds into a limit of
/// `limit_s`, given the ones it asked for (`mail_type`) and has had (`sent`).
pub fn time_limit_due(
    mail_type: u32,
    sent: u32,
    run_s: u64,
    limit_s: u64,
) -> impl Iterator<Item = (u32, &'static str)> {
    TIME_LIMIT_MAILS
        .into_iter()
        .filter(move |&(bit, pct, _)| {
            mail_type & bit != 0 && sent & bit == 0 && run_s * 100 >= limit_s * pct
        })
        .map(|(bit, _, what)| (bit, what))
}

/// A mail for an event during a job's life (`Requeued`, `Invalid
/// dependency`, `Reached 50% of time limit`, ...): `what` is both the
/// subject's ending and `SLURM_JOB_MAIL_TYPE`, `run_secs` adds the run time
/// (`Slurm Job_id=12 Name=x Requeued, Run time 00:00:44`), and `state`, when
/// given, is the state to report (a timed-out job is mailed as RUNNING, as
/// Slurm mails it before the kill).
pub fn event(
    j: &AcctJob,
    to: String,
    group: &str,
    what: &str,
    run_secs: Option<u64>,
    state: Option<JobState>,
) -> Mail {
    let mut subject = format!("Slurm {} Name={} {what}", job_phrase(j, false), j.name);
    let mut env = base_env(j, what, group);
    if let Some(s) = state {
        for (k, v) in env.iter_mut() {
            if k == "SLURM_JOB_STATE" {
                *v = s.name().to_string();
            }
        }
    }
    if let Some(secs) = run_secs {
        let run = fmt_duration_long(secs);
        subject.push_str(&format!(", Run time {run}"));
        env.push(("SLURM_JOB_RUN_TIME".into(), run));
    }
    Mail { to, subject, env }
}

/// States Slurm mails as ENDED rather than FAILED.
fn ended_well(s: JobState) -> bool {
    matches!(s, JobState::Completed | JobState::Cancelled)
}

/// "Failed" or "Ended" for a job (or array) that ended, as `mail_type`
/// asks; `None` when it asks for neither.
fn end_word(mail_type: u32, well: bool) -> Option<&'static str> {
    if !well && mail_type & FAIL != 0 {
        Some("Failed")
    } else if mail_type & END != 0 {
        Some("Ended")
    } else {
        None
    }
}

/// The END or FAIL mail for finished job `j`, if `mail_type` wants one.
pub fn ended(j: &AcctJob, mail_type: u32, to: String, group: &str) -> Option<Mail> {
    let word = end_word(mail_type, ended_well(j.state))?;
    let run = fmt_duration_long(secs_between(j.start_time, j.end_time));
    let subject = format!(
        "Slurm {} Name={} {word}, Run time {run}, {}, ExitCode {}",
        job_phrase(j, false),
        j.name,
        j.state.name(),
        j.exit_code.0
    );
    let mut env = base_env(j, word, group);
    env.extend(exit_env(&[j]));
    env.push(("SLURM_JOB_RUN_TIME".into(), run));
    Some(Mail { to, subject, env })
}

/// The summary for an array whose tasks have all finished: the tasks' common
/// state (or `Mixed`) and the range of their exit codes.
pub fn array_ended(tasks: &[&AcctJob], mail_type: u32, to: String, group: &str) -> Option<Mail> {
    let last = tasks.iter().max_by_key(|t| t.end_time)?;
    let well = tasks.iter().all(|t| ended_well(t.state));
    let word = end_word(mail_type, well)?;
    let state = if tasks.iter().all(|t| t.state == last.state) {
        last.state.name()
    } else {
        "Mixed"
    };
    let (lo, hi) = exit_range(tasks);
    let subject = format!(
        "Slurm {} Name={} {word}, {state}, ExitCode [{lo}-{hi}]",
        job_phrase(last, true),
        last.name
    );
    let first_start = tasks.iter().filter_map(|t| t.start_time).min();
    let mut env = base_env(last, word, group);
    env.extend(exit_env(tasks));
    env.push((
        "SLURM_JOB_RUN_TIME".into(),
        fmt_duration_long(secs_between(first_start, last.end_time)),
    ));
    Some(Mail { to, subject, env })
}

fn exit_range(tasks: &[&AcctJob]) -> (i32, i32) {
    let codes = tasks.iter().map(|t| t.exit_code.0);
    (codes.clone().min().unwrap_or(0), codes.max().unwrap_or(0))
}

/// Exit-code variables: the highest (and, for arrays, lowest) code, and the
/// last job's as `code:signal` and as a wait status.
fn exit_env(tasks: &[&AcctJob]) -> Vec<(String, String)> {
    let (lo, hi) = exit_range(tasks);
    let Some(j) = tasks.last() else {
        return Vec::new();
    };
    let (code, signal) = j.exit_code;
    let mut env = vec![
        (
            "SLURM_JOB_DERIVED_EC".to_string(),
            j.derived_exit_code.0.to_string(),
        ),
        (
            "SLURM_JOB_EXIT_CODE2".to_string(),
            format!("{code}:{signal}"),
        ),
        (
            "SLURM_JOB_EXIT_CODE".to_string(),
            ((code << 8) | signal).to_string(),
        ),
        ("SLURM_JOB_EXIT_CODE_MAX".to_string(), hi.to_string()),
    ];
    if j.array.is_some() {
        env.push(("SLURM_JOB_EXIT_CODE_MIN".to_string(), lo.to_string()));
    }
    env
}

/// How mail leaves: MailProg, and the SlurmUser it runs as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sender {
    pub prog: std::path::PathBuf,
    /// `SlurmUser`: when the controller runs as root, MailProg runs as
    /// this account instead (a mailer bug then cannot act as root).
    pub slurm_user: Option<String>,
}

/// Whom MailProg runs as: `None` to keep the controller's own identity
/// (it is not root, or no SlurmUser other than root is set), else the
/// SlurmUser's uid and gid; an unknown SlurmUser is an error (mail is
/// then not sent rather than sent as root).
fn mail_identity(slurm_user: Option<&str>, euid_root: bool) -> Result<Option<(u32, u32)>, String> {
    let Some(name) = slurm_user.filter(|n| euid_root && *n != "root" && *n != "0") else {
        return Ok(None);
    };
    let found = match name.parse::<u32>() {
        Ok(uid) => nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid)),
        Err(_) => nix::unistd::User::from_name(name),
    };
    match found {
        Ok(Some(u)) => Ok(Some((u.uid.as_raw(), u.gid.as_raw()))),
        Ok(None) => Err(format!("SlurmUser {name} is not a known user")),
        Err(e) => Err(format!("SlurmUser {name} cannot be looked up: {e}")),
    }
}

/// Run MailProg for `mail` on a thread of its own (a slow mailer, or a
/// passwd lookup, must not hold up the controller), reaping it there;
/// failures are logged. Called as Slurm calls it, `MailProg -s SUBJECT
/// ADDRESS`: no `--` goes before the address, since site MailProgs (such
/// as Slurm's `smail`) read the address as their third argument. The
/// address was checked at submission (no leading `-`, no shell or blank
/// characters) and is checked again here for jobs older than the check.
pub fn send(sender: Sender, mail: Mail) {
    let spawned = std::thread::Builder::new()
        .name("mailprog".into())
        .spawn(move || {
            if let Err(e) = crate::policy::limits::check_mail_user(&mail.to) {
                tracing::warn!(to = %mail.to, error = %e.message, "mail not sent");
                return;
            }
            let euid_root = nix::unistd::Uid::effective().is_root();
            let identity = match mail_identity(sender.slurm_user.as_deref(), euid_root) {
                Ok(id) => id,
                Err(e) => {
                    tracing::warn!(error = %e, to = %mail.to, "mail not sent");
                    return;
                }
            };
            let prog = &sender.prog;
            let mut cmd = Command::new(prog);
            cmd.arg("-s")
                .arg(&mail.subject)
                .arg(&mail.to)
                .envs(mail.env.iter().map(|(k, v)| (k, v)))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            if let Some((uid, gid)) = identity {
                use std::os::unix::process::CommandExt;
                // std drops root's supplementary groups when it sets the uid.
                cmd.uid(uid).gid(gid).current_dir("/");
            }
            match cmd.status() {
                Ok(s) if s.success() => {
                    tracing::debug!(to = %mail.to, subject = %mail.subject, "mail sent")
                }
                Ok(s) => tracing::warn!(prog = %prog.display(), to = %mail.to, status = %s, "MailProg failed"),
                Err(e) => tracing::warn!(prog = %prog.display(), error = %e, "cannot run MailProg"),
            }
        });
    if let Err(e) = spawned {
        tracing::warn!(error = %e, "cannot start a thread for MailProg");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::job::ArrayTask;

    fn job(state: JobState, code: i32) -> AcctJob {
        AcctJob {
            job_id: 81,
            name: "mailjob".into(),
            user: "alice".into(),
            uid: 1000,
            gid: 1000,
            partition: "debug".into(),
            cluster: "c".into(),
            state,
            exit_code: (code, 0),
            submit_time: 1_000,
            start_time: Some(1_003),
            end_time: Some(1_005),
            nodes: "n1".into(),
            num_nodes: 1,
            workdir: "/tmp".into(),
            ..AcctJob::default()
        }
    }

    #[test]
    fn mail_types_parse_as_slurm_reads_them() {
        assert_eq!(parse_mail_type("BEGIN,end"), Some(BEGIN | END));
        assert_eq!(parse_mail_type("ALL"), Some(ALL));
        assert_eq!(parse_mail_type("ALL,NONE,FAIL"), Some(FAIL));
        assert_eq!(
            parse_mail_type("TIME_LIMIT_80,ARRAY_TASKS"),
            Some(TIME_LIMIT_80 | ARRAY_TASKS)
        );
        assert_eq!(parse_mail_type("bogus"), None);
        assert_eq!(parse_mail_type(""), None);
    }

    #[test]
    fn event_mails_are_worded_as_slurm_words_them() {
        // As a 22.05 controller sent them to a recording MailProg.
        let mut j = job(JobState::Pending, 0);
        let m = event(&j, "alice".into(), "grp", "Requeued", Some(44), None);
        assert_eq!(
            m.subject,
            "Slurm Job_id=81 Name=mailjob Requeued, Run time 00:00:44"
        );
        assert!(m
            .env
            .contains(&("SLURM_JOB_MAIL_TYPE".into(), "Requeued".into())));
        assert!(m
            .env
            .contains(&("SLURM_JOB_RUN_TIME".into(), "00:00:44".into())));
        assert!(m
            .env
            .contains(&("SLURM_JOB_STATE".into(), "PENDING".into())));
        let m = event(&j, "alice".into(), "grp", "Invalid dependency", None, None);
        assert_eq!(m.subject, "Slurm Job_id=81 Name=mailjob Invalid dependency");
        assert!(!m.env.iter().any(|(k, _)| k == "SLURM_JOB_RUN_TIME"));
        j.state = JobState::Timeout;
        let m = event(
            &j,
            "alice".into(),
            "grp",
            TIME_LIMIT_MAILS[3].2,
            Some(87),
            Some(JobState::Running),
        );
        assert_eq!(
            m.subject,
            "Slurm Job_id=81 Name=mailjob Reached time limit, Run time 00:01:27"
        );
        assert!(m
            .env
            .contains(&("SLURM_JOB_STATE".into(), "RUNNING".into())));
        assert_eq!(TIME_LIMIT_MAILS[0].2, "Reached 50% of time limit");
    }

    #[test]
    fn time_limit_mails_come_due_once_each() {
        let asked = TIME_LIMIT_50 | TIME_LIMIT_90 | END;
        let due = |sent, run| {
            time_limit_due(asked, sent, run, 600)
                .map(|d| d.0)
                .collect::<Vec<_>>()
        };
        assert_eq!(due(0, 299), Vec::<u32>::new());
        assert_eq!(due(0, 300), [TIME_LIMIT_50]);
        // 80% was not asked for; 90% comes with 50% if both are due at once.
        assert_eq!(due(0, 560), [TIME_LIMIT_50, TIME_LIMIT_90]);
        assert_eq!(due(TIME_LIMIT_50, 560), [TIME_LIMIT_90]);
        assert_eq!(due(TIME_LIMIT_50 | TIME_LIMIT_90, 700), Vec::<u32>::new());
        let all = time_limit_due(TIME_LIMIT | TIME_LIMIT_80, 0, 600, 600);
        assert_eq!(
            all.map(|d| d.1).collect::<Vec<_>>(),
            ["Reached 80% of time limit", "Reached time limit"]
        );
    }

    #[test]
    fn subjects_and_variables_follow_slurm() {
        let j = job(JobState::Running, 0);
        let m = began(&j, recipient(None, "alice", None), "grp", false);
        assert_eq!(m.to, "alice");
        assert_eq!(
            m.subject,
            "Slurm Job_id=81 Name=mailjob Began, Queued time 00:00:03"
        );
        assert!(m
            .env
            .contains(&("SLURM_JOB_QUEUED_TIME".into(), "00:00:03".into())));
        assert!(m
            .env
            .contains(&("SLURM_JOB_MAIL_TYPE".into(), "Began".into())));
        assert!(m
            .env
            .contains(&("SLURM_JOB_ACCOUNT".into(), "(null)".into())));

        let failed = job(JobState::Failed, 3);
        let m = ended(&failed, ALL, "bob@x".into(), "grp").unwrap();
        assert_eq!(
            m.subject,
            "Slurm Job_id=81 Name=mailjob Failed, Run time 00:00:02, FAILED, ExitCode 3"
        );
        assert!(m
            .env
            .contains(&("SLURM_JOB_EXIT_CODE".into(), "768".into())));
        assert!(m
            .env
            .contains(&("SLURM_JOB_EXIT_CODE2".into(), "3:0".into())));
        // END alone still reports a failure, as "Ended"; BEGIN alone, nothing.
        let m = ended(&failed, END, "a".into(), "g").unwrap();
        assert!(m
            .subject
            .contains(" Ended, Run time 00:00:02, FAILED, ExitCode 3"));
        assert_eq!(ended(&failed, BEGIN, "a".into(), "g"), None);
        // A cancelled job is "Ended" even under FAIL only: no mail then.
        assert_eq!(
            ended(&job(JobState::Cancelled, 0), FAIL, "a".into(), "g"),
            None
        );
        assert_eq!(
            recipient(Some("carol"), "alice", Some("example.org")),
            "carol@example.org"
        );
        assert_eq!(recipient(Some("c@d"), "alice", Some("example.org")), "c@d");
    }

    #[test]
    fn arrays_mail_per_task_or_as_a_summary() {
        let task = |task_id, id, state, code| AcctJob {
            job_id: id,
            array: Some(ArrayTask {
                array_job_id: 86,
                task_id,
                min: 1,
                max: 3,
                count: 3,
                step: 1,
                ..ArrayTask::default()
            }),
            ..job(state, code)
        };
        let t1 = task(1, 87, JobState::Completed, 0);
        let t2 = task(2, 88, JobState::Failed, 1);
        let t3 = task(3, 86, JobState::Failed, 2);
        let m = began(&t1, "a".into(), "g", true);
        assert_eq!(
            m.subject,
            "Slurm Array Summary Job_id=86_* (86) Name=mailjob Began"
        );
        let m = began(&t1, "a".into(), "g", false);
        assert_eq!(
            m.subject,
            "Slurm Array Task Job_id=86_1 (87) Name=mailjob Began, Queued time 00:00:03"
        );
        let m = array_ended(&[&t1, &t2, &t3], END | FAIL, "a".into(), "g").unwrap();
        assert_eq!(
            m.subject,
            "Slurm Array Summary Job_id=86_* (86) Name=mailjob Failed, Mixed, ExitCode [0-2]"
        );
        assert!(m
            .env
            .contains(&("SLURM_JOB_EXIT_CODE_MIN".into(), "0".into())));
        let m = array_ended(&[&t1], END, "a".into(), "g").unwrap();
        assert_eq!(
            m.subject,
            "Slurm Array Summary Job_id=86_* (86) Name=mailjob Ended, COMPLETED, ExitCode [0-0]"
        );
    }

    #[test]
    fn mailprog_runs_as_slurm_user_only_when_root_and_set() {
        assert_eq!(mail_identity(None, true), Ok(None));
        assert_eq!(mail_identity(Some("root"), true), Ok(None));
        // Not root: there is nobody else to become.
        assert_eq!(mail_identity(Some("nobody"), false), Ok(None));
        let nobody = nix::unistd::User::from_name("nobody").ok().flatten();
        if let Some(n) = nobody {
            assert_eq!(
                mail_identity(Some("nobody"), true),
                Ok(Some((n.uid.as_raw(), n.gid.as_raw())))
            );
        }
        assert!(mail_identity(Some("no-such-user-here"), true).is_err());
    }
}
