//! sacct's list grammars: the comma lists of `-u` (names or uids), `-s` (long or short
//! state names, with Slurm's rules for states it does not account and the ones canopy never
//! records) and `-j` (`N`, `N_T`, `N.batch`, `N.extern`, `N.<step>`), and the
//! `Builder` methods that add each list to the request.
//!
//! Does not: parse the command line or decide defaults; the parent module does.

use super::*;

impl Builder {
    /// `-u`: a comma list of names or uids; `-1` means every user. Either way it replaces
    /// an earlier `-a` (Slurm applies them in order).
    pub(super) fn add_users(&mut self, list: &str) -> Result<(), SacctArgsError> {
        if list == "-1" {
            self.all_users = true;
            return Ok(());
        }
        self.all_users = false;
        for name in list_items(list) {
            let uid = lookup_uid(name).ok_or_else(|| SacctArgsError::InvalidUser {
                name: name.to_string(),
            })?;
            if !self.uids.contains(&uid) {
                self.uids.push(uid);
            }
        }
        Ok(())
    }

    /// `-s`: long or short state names, any case. States Slurm does not account are
    /// refused as Slurm refuses them; accounted states canopy never produces are noted.
    pub(super) fn add_states(&mut self, list: &str) -> Result<(), SacctArgsError> {
        self.states_given = true;
        for name in list_items(list) {
            match classify_state(name) {
                StateName::Recorded(state) => {
                    if !self.states.contains(&state) {
                        self.states.push(state);
                    }
                }
                StateName::NeverRecorded(long) => self.never_recorded.push(long.to_string()),
                StateName::NotAccounted => {
                    return Err(SacctArgsError::UnaccountedState {
                        state: name.to_string(),
                    })
                }
                StateName::Unknown => {
                    return Err(SacctArgsError::InvalidState {
                        state: name.to_string(),
                    })
                }
            }
        }
        Ok(())
    }

    /// `-j`: `N`, `N.batch`, `N.extern`, `N.<step>`, comma separated; repeated `-j`s add up.
    pub(super) fn add_jobs(&mut self, list: &str) -> Result<(), SacctArgsError> {
        for item in list_items(list) {
            let selector = parse_selector(item)?;
            if !self.selectors.contains(&selector) {
                self.selectors.push(selector);
            }
        }
        Ok(())
    }
}

/// The items of a Slurm comma list, empty ones skipped. A list that starts with a quote
/// ends at the matching quote, as Slurm's list reader does.
pub(super) fn list_items(list: &str) -> impl Iterator<Item = &str> {
    let inner = match list.chars().next() {
        Some(q @ ('"' | '\'')) => {
            let rest = &list[1..];
            rest.split(q).next().unwrap_or(rest)
        }
        _ => list,
    };
    inner.split(',').filter(|item| !item.is_empty())
}

/// Adds a comma list of names, skipping ones already present (ignoring case, as Slurm's
/// list helper does).
pub(super) fn add_names(into: &mut Vec<String>, list: &str) {
    for item in list_items(list) {
        if !into.iter().any(|n| n.eq_ignore_ascii_case(item)) {
            into.push(item.to_string());
        }
    }
}

/// A user name's uid, or a numeric uid as given.
pub(super) fn lookup_uid(name: &str) -> Option<u32> {
    nix::unistd::User::from_name(name)
        .ok()
        .flatten()
        .map(|u| u.uid.as_raw())
        .or_else(|| name.parse().ok())
}

/// How Slurm's sacct treats a state name given to `-s`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum StateName {
    /// A state canopy records.
    Recorded(JobState),
    /// Accounted by Slurm, but canopy never puts a job in it (its long name).
    NeverRecorded(&'static str),
    /// A real Slurm state (a flag such as COMPLETING) that accounting does not keep.
    NotAccounted,
    Unknown,
}

/// Slurm job states canopy's [`JobState`] lacks: (long name, short name, accounted?).
pub(super) const OTHER_SLURM_STATES: &[(&str, &str, bool)] = &[
    ("RESIZING", "RS", true),
    ("REVOKED", "RV", true),
    ("STAGE_OUT", "SO", false),
    ("REQUEUE_FED", "RF", false),
    ("REQUEUE_HOLD", "RH", false),
    ("SPECIAL_EXIT", "SE", false),
    ("STOPPED", "ST", false),
    ("RESV_DEL_HOLD", "RD", false),
    ("SIGNALING", "SI", false),
];

pub(super) fn classify_state(name: &str) -> StateName {
    match JobState::parse(name) {
        // COMPLETING and CONFIGURING are flags in Slurm, and accounting
        // does not keep flags.
        Some(JobState::Completing | JobState::Configuring) => StateName::NotAccounted,
        Some(state) => StateName::Recorded(state),
        None => OTHER_SLURM_STATES
            .iter()
            .find(|(long, short, _)| {
                long.eq_ignore_ascii_case(name) || short.eq_ignore_ascii_case(name)
            })
            .map_or(StateName::Unknown, |&(long, _, accounted)| {
                if accounted {
                    StateName::NeverRecorded(long)
                } else {
                    StateName::NotAccounted
                }
            }),
    }
}

/// One `-j` item: `N` or `N_T`, optionally `.batch`, `.extern` or `.<number>`. Het
/// components (`N+i`) are refused: canopy has no het jobs.
pub(super) fn parse_selector(item: &str) -> Result<StepSelector, SacctArgsError> {
    let bad = || SacctArgsError::BadJobStep {
        spec: item.to_string(),
    };
    let (job, step) = match item.split_once('.') {
        Some((job, step)) => (job, Some(step)),
        None => (item, None),
    };
    if !job.starts_with(|c: char| c.is_ascii_digit()) {
        return Err(bad());
    }
    if job.contains('+') {
        return Err(SacctArgsError::CompositeJobId {
            spec: item.to_string(),
        });
    }
    let (job, task) = match job.split_once('_') {
        Some((job, task)) => (job, Some(task.parse::<u32>().map_err(|_| bad())?)),
        None => (job, None),
    };
    let job_id = job.parse::<u32>().map_err(|_| bad())?;
    let step = step.map(|step| parse_step(step, job)).transpose()?;
    Ok(StepSelector { job_id, task, step })
}

/// The part after `N.`: `batch`, `extern` or a step number. Slurm names only the job part
/// when it complains (it has already cut the text at the dot).
pub(super) fn parse_step(step: &str, job: &str) -> Result<StepKind, SacctArgsError> {
    match step {
        "batch" => Ok(StepKind::Batch),
        "extern" => Ok(StepKind::Extern),
        n => n
            .parse::<u32>()
            .ok()
            .filter(|_| n.bytes().all(|b| b.is_ascii_digit()))
            .map(StepKind::Numbered)
            .ok_or_else(|| SacctArgsError::BadStep {
                spec: job.to_string(),
            }),
    }
}
