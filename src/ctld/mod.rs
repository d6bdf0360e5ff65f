//! The controller core: every decision the controller makes, without I/O.
//!
//! [`Core::apply`] takes `now` and one [`Command`] (a submission, a cancel,
//! a node's change, a job's end, a scheduling pass, a timer tick), changes
//! the core's state, and returns an [`Output`]: the records to persist, the
//! [`Effect`]s to carry out (launch, signal, fan out, mail, wake me at T)
//! and the reply. It reads no clock and does no I/O, so the same command
//! log gives the same state: tests drive it directly (see
//! `tests/ctld_sim.rs`), and a standby controller can replay it.
//!
//! The actix actor in `actors/controller.rs` is the shell: it feeds
//! commands in and carries effects out, and only after the records they
//! depend on are on disk.
//!
//! Files: `core.rs` (state, recovery, dispatch), `admission.rs` (submit,
//! `--test-only`), `job_control.rs` (cancel, hold, update, requeue,
//! suspend, top), `lifecycle.rs` (schedule, end, reconcile, timers),
//! `nodes.rs` (node health: registration, not responding → DOWN,
//! ReturnToService, DRAIN/DOWN/RESUME), `register.rs` (a registration's
//! hardware checked against slurm.conf; autodetected GPUs), `steps.rs` (srun steps), `mailer.rs` (which mail goes when),
//! `views.rs` (what clients are shown), `reconfig.rs`, `accounts.rs`
//! (the association and QOS database: sacctmgr, submit checks, run limits),
//! `preempt.rs` (who preempts whom, grace times) and `gang.rs` (preemption by
//! suspending: CPUs lent to the preemptor, resumed when they are free).

mod accounts;
#[cfg(test)]
mod accounts_tests;
mod admission;
mod backfill;
mod command;
mod console;
mod core;
mod dynamic;
#[cfg(test)]
mod fixtures;
mod gang;
mod job_control;
mod lifecycle;
mod mailer;
#[cfg(test)]
mod minutes_tests;
mod nodes;
mod pass_policy;
mod power;
#[cfg(test)]
mod power_tests;
mod preempt;
#[cfg(test)]
mod preempt_tests;
mod priority;
#[cfg(test)]
mod priority_tests;
mod prolog;
mod reconfig;
mod register;
pub mod renumber;
#[cfg(test)]
mod requeue_tests;
mod reservations;
#[cfg(test)]
mod resv_tests;
mod steps;
#[cfg(test)]
mod tres_tests;
mod usage_limits;
mod views;

pub use self::backfill::{BackfillState, BackfillStats};
pub use self::command::{
    Command, CtldScript, Effect, Output, PowerAction, PowerProgram, Reply, StartJob,
};
pub use self::core::{Core, Counters};
pub use self::dynamic::NodePlace;
pub use self::power::{PassStats, PowerSave, POWER_DOWN_ASAP_REASON, RESUME_TIMEOUT_REASON};
pub use self::priority::{account_of, PolicyInputs, PrioState};
pub use self::steps::step_layout;

#[cfg(test)]
mod tests {
    use super::command::*;
    use crate::config::Config;
    use crate::model::acct::Usage;
    use crate::model::job::JobSubmit;
    use crate::model::job::{ExitStatus, JobState};
    use crate::model::reason::JobReason;
    use crate::policy::authz::Caller;
    use crate::wire::messages::RequeueKind;
    use crate::wire::messages::{CancelRequest, JobUpdate};
    use std::sync::Arc;

    /// A standby replays the log: every command survives serialisation.
    #[test]
    fn every_command_round_trips_through_messagepack() {
        let text = "ClusterName=t\nSlurmctldHost=c(127.0.0.1)\nNodeName=n1 CPUs=2\nPartitionName=p Nodes=n1\n";
        let conf = Config::parse_str(text, std::path::Path::new("/x/slurm.conf")).unwrap();
        let caller = Caller::ROOT;
        let commands = vec![
            Command::Submit {
                submit: Box::new(JobSubmit {
                    name: "a".into(),
                    hold: true,
                    ..Default::default()
                }),
                caller,
            },
            Command::Cancel {
                req: CancelRequest {
                    job_ids: vec![1, 2],
                    signal: Some(10),
                    batch_only: true,
                    exact: false,
                },
                caller,
            },
            Command::UpdateJobs {
                update: JobUpdate {
                    job_ids: vec![3],
                    requeue: Some(RequeueKind::Hold),
                    ..Default::default()
                },
                caller,
            },
            Command::StartStep {
                req: Box::default(),
                caller,
            },
            Command::StepLaunchFailed {
                job_id: 4,
                step_id: 0,
            },
            Command::Schedule,
            Command::Backfill,
            Command::JobEnded {
                job_id: 5,
                state: JobState::Failed,
                exit: ExitStatus { code: 0, signal: 9 },
                reason: JobReason::RaisedSignal(9),
                usage: Usage::default(),
            },
            Command::Tick,
            Command::Reconfigure {
                conf: Arc::new(conf),
            },
        ];
        for c in commands {
            let bytes = rmp_serde::to_vec_named(&c).unwrap();
            let back: Command = rmp_serde::from_slice(&bytes).unwrap();
            assert_eq!(format!("{back:?}"), format!("{c:?}"));
        }
    }
}
