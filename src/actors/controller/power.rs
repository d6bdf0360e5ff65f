//! Running power saving's programs for the controller shell, off its event
//! loop, as slurmctld 22.05 runs them: `PROGRAM NODELIST` (argv\[1\] a host
//! list expression), in their own process group, with ResumeProgram's job
//! data in the JSON file `SLURM_RESUME_FILE` names. What to run, and when,
//! is the core's decision (`ctld::power`); how a program ends is only
//! logged, as in Slurm (a node that does not come up is caught by
//! ResumeTimeout).

use std::process::Stdio;
use std::time::Duration;

use crate::ctld::{PowerAction, PowerProgram};

/// How long a program may run before it is killed (slurmctld kills a
/// power-saving program that runs longer than this too).
const PROGRAM_LIMIT: Duration = Duration::from_secs(300);

fn action_name(a: PowerAction) -> &'static str {
    match a {
        PowerAction::Suspend => "SuspendProgram",
        PowerAction::Resume => "ResumeProgram",
        PowerAction::ResumeFail => "ResumeFailProgram",
    }
}

/// Write ResumeProgram's job data to a new file in the temporary directory.
/// The name is random and the file is created exclusively with mode 0600
/// (tempfile's `O_EXCL`, no symlink followed), so another local user can
/// neither point it at a file of ours nor read or rewrite the jobs' data.
/// The file is removed when the returned path is dropped.
fn write_resume_file(json: &str) -> std::io::Result<tempfile::TempPath> {
    use std::io::Write;
    let mut f = tempfile::Builder::new()
        .prefix("canopy-resume-")
        .suffix(".json")
        .tempfile()?;
    f.write_all(json.as_bytes())?;
    f.flush()?;
    Ok(f.into_temp_path())
}

/// Run `p` to its end (or [`PROGRAM_LIMIT`]) and log how it ended.
pub(super) async fn run(p: PowerProgram) {
    let what = action_name(p.action);
    let mut file = None;
    if let Some(json) = &p.resume_file {
        let json = json.clone();
        let written = tokio::task::spawn_blocking(move || write_resume_file(&json)).await;
        match written {
            Ok(Ok(path)) => file = Some(path),
            Ok(Err(e)) => {
                tracing::error!(program = %p.program, error = %e, "{what}: cannot write SLURM_RESUME_FILE")
            }
            Err(e) => tracing::error!(program = %p.program, error = %e, "{what}: writer failed"),
        }
    }
    let mut cmd = tokio::process::Command::new(&p.program);
    cmd.arg(&p.nodes)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .kill_on_drop(true);
    if let Some(f) = &file {
        cmd.env("SLURM_RESUME_FILE", f.as_os_str());
    }
    tracing::info!(program = %p.program, nodes = %p.nodes, "running {what}");
    let outcome = match cmd.spawn() {
        Ok(mut child) => match tokio::time::timeout(PROGRAM_LIMIT, child.wait()).await {
            Ok(Ok(status)) if status.success() => Ok(()),
            Ok(Ok(status)) => Err(format!("exited with {status}")),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => {
                let _ = child.kill().await;
                Err(format!("killed after {}s", PROGRAM_LIMIT.as_secs()))
            }
        },
        Err(e) => Err(format!("cannot run it: {e}")),
    };
    match outcome {
        Ok(()) => tracing::info!(program = %p.program, nodes = %p.nodes, "{what} done"),
        Err(e) => {
            tracing::error!(program = %p.program, nodes = %p.nodes, error = %e, "{what} failed")
        }
    }
    if let Some(f) = file {
        let _ = tokio::task::spawn_blocking(move || f.close()).await;
    }
}
