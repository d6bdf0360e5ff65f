//! Association limits (`GrpTRES`, `GrpJobs`, `MaxWall`, ...), the edits
//! sacctmgr makes to them, and how sacctmgr prints an edit's settings.

use serde::{Deserialize, Serialize};

use super::tres::{Tres, TresEdit};

/// A change to one optional value: `None` leaves it, `Some(None)` clears
/// it (`-1`), `Some(Some(v))` sets it. Fields of this type carry
/// `#[serde(default, skip_serializing_if = "Option::is_none", with =
/// "double_option")]`: serde alone reads a stored `Some(None)` back as
/// `None`, turning a clear into nothing.
pub type Edit<T> = Option<Option<T>>;

/// Serde for [`Edit`] fields: absent = leave, nil = clear.
pub mod double_option {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer, T: Serialize>(
        v: &Option<Option<T>>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        match v {
            Some(inner) => inner.serialize(s),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
        d: D,
    ) -> Result<Option<Option<T>>, D::Error> {
        Option::<T>::deserialize(d).map(Some)
    }
}

/// An association's own limits (unset ones are inherited or absent; see
/// `policy::assoc_limits` for how they combine up the tree). Times in
/// minutes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AssocLimits {
    #[serde(default)]
    pub grp_tres: Tres,
    #[serde(default)]
    pub grp_jobs: Option<u32>,
    #[serde(default)]
    pub grp_submit_jobs: Option<u32>,
    #[serde(default)]
    pub grp_tres_mins: Tres,
    #[serde(default)]
    pub grp_wall: Option<u32>,
    /// `MaxTRES` (= `MaxTRESPerJob`).
    #[serde(default)]
    pub max_tres_per_job: Tres,
    #[serde(default)]
    pub max_tres_per_node: Tres,
    #[serde(default)]
    pub max_jobs: Option<u32>,
    #[serde(default)]
    pub max_submit_jobs: Option<u32>,
    /// `MaxWall` (= `MaxWallDurationPerJob`).
    #[serde(default)]
    pub max_wall: Option<u32>,
}

/// An edit to [`AssocLimits`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LimitsEdit {
    pub grp_tres: Option<TresEdit>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "double_option"
    )]
    pub grp_jobs: Edit<u32>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "double_option"
    )]
    pub grp_submit_jobs: Edit<u32>,
    pub grp_tres_mins: Option<TresEdit>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "double_option"
    )]
    pub grp_wall: Edit<u32>,
    pub max_tres_per_job: Option<TresEdit>,
    pub max_tres_per_node: Option<TresEdit>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "double_option"
    )]
    pub max_jobs: Edit<u32>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "double_option"
    )]
    pub max_submit_jobs: Edit<u32>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "double_option"
    )]
    pub max_wall: Edit<u32>,
}

fn set<T: Clone>(slot: &mut Option<T>, e: &Edit<T>) {
    if let Some(v) = e {
        *slot = v.clone();
    }
}

impl LimitsEdit {
    pub fn is_empty(&self) -> bool {
        *self == LimitsEdit::default()
    }

    pub fn apply(&self, l: &mut AssocLimits) {
        let tres = |e: &Option<TresEdit>, t: &mut Tres| {
            if let Some(e) = e {
                e.apply(t)
            }
        };
        tres(&self.grp_tres, &mut l.grp_tres);
        set(&mut l.grp_jobs, &self.grp_jobs);
        set(&mut l.grp_submit_jobs, &self.grp_submit_jobs);
        tres(&self.grp_tres_mins, &mut l.grp_tres_mins);
        set(&mut l.grp_wall, &self.grp_wall);
        tres(&self.max_tres_per_job, &mut l.max_tres_per_job);
        tres(&self.max_tres_per_node, &mut l.max_tres_per_node);
        set(&mut l.max_jobs, &self.max_jobs);
        set(&mut l.max_submit_jobs, &self.max_submit_jobs);
        set(&mut l.max_wall, &self.max_wall);
    }

    /// The settings lines sacctmgr prints for this edit (`  GrpJobs       = 4`).
    pub fn lines(&self, out: &mut Vec<String>) {
        edit_line(out, "GrpJobs       ", &self.grp_jobs);
        edit_line(out, "GrpSubmitJobs ", &self.grp_submit_jobs);
        tres_line(out, "GrpTRES       ", &self.grp_tres);
        tres_line(out, "GrpTRESMins   ", &self.grp_tres_mins);
        wall_line(out, "GrpWall       ", &self.grp_wall);
        edit_line(out, "MaxJobs       ", &self.max_jobs);
        edit_line(out, "MaxSubmitJobs ", &self.max_submit_jobs);
        tres_line(out, "MaxTRES       ", &self.max_tres_per_job);
        tres_line(out, "MaxTRESPerNode", &self.max_tres_per_node);
        wall_line(out, "MaxWall       ", &self.max_wall);
    }
}

/// One sacctmgr settings line for a count edit (`  GrpJobs       = 4`,
/// `= NONE` when cleared); nothing when the edit leaves it alone. Shared by
/// the association and QOS edits.
pub(super) fn edit_line(out: &mut Vec<String>, label: &str, e: &Edit<u32>) {
    match e {
        Some(None) => out.push(format!("  {label}= NONE")),
        Some(Some(v)) => out.push(format!("  {label}= {v}")),
        None => {}
    }
}

/// As [`edit_line`], for a TRES edit.
pub(super) fn tres_line(out: &mut Vec<String>, label: &str, e: &Option<TresEdit>) {
    if let Some(e) = e {
        out.push(format!("  {label}= {e}"));
    }
}

/// As [`edit_line`], for a time in minutes.
pub(super) fn wall_line(out: &mut Vec<String>, label: &str, e: &Edit<u32>) {
    match e {
        Some(None) => out.push(format!("  {label}= NONE")),
        Some(Some(m)) => out.push(format!("  {label}= {}", fmt_minutes(*m))),
        None => {}
    }
}

/// Minutes the way sacctmgr prints limits: `00:30:00`, `1-00:00:00`.
pub fn fmt_minutes(m: u32) -> String {
    let (d, h, mi) = (m / 1440, (m / 60) % 24, m % 60);
    if d > 0 {
        format!("{d}-{h:02}:{mi:02}:00")
    } else {
        format!("{h:02}:{mi:02}:00")
    }
}
