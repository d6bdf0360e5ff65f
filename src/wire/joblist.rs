//! [`JobList`]: a list of [`JobInfo`] records with a columnar wire form.
//!
//! Canopy's frames are named MessagePack (field names on the wire, so peers
//! of different versions understand each other). For one record that is
//! cheap; a 10,000-job `squeue` reply of named records was 4.75 MB, and as
//! columns (with a brief query) it is 0.8 MB. A `JobList` travels as one map from field
//! name to an array of that field's values, so each name is sent once, and a
//! column whose values are all the default (a brief listing's paths, the end
//! times of a queue that has only pending jobs) is not sent at all.
//!
//! The encoding is written by hand (serde's derive has no columnar mode):
//! it serializes straight from the rows and decodes straight into them, with
//! no intermediate per-column vectors. Forward and backward compatible in
//! the same way as named records: an unknown column is skipped, a missing
//! one reads as the default. This module only moves bytes; who builds the
//! rows and who prints them is elsewhere.

use std::fmt;
use std::marker::PhantomData;

use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::types::{ArrayTask, Exclusive, JobInfo, JobState, UnixTime};

/// Rows reserved ahead of decoding, at most (more still decode, by growing).
const MAX_PREALLOCATED_ROWS: usize = 1 << 16;

/// Jobs as a reply carries them; see the module docs for the wire form.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JobList(pub Vec<JobInfo>);

impl JobList {
    pub fn rows(&self) -> &[JobInfo] {
        &self.0
    }

    pub fn into_rows(self) -> Vec<JobInfo> {
        self.0
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl FromIterator<JobInfo> for JobList {
    fn from_iter<I: IntoIterator<Item = JobInfo>>(iter: I) -> Self {
        JobList(iter.into_iter().collect())
    }
}

/// One column, serialized as an array by reading the field from each row.
struct Column<'a, T, F: Fn(&JobInfo) -> &T> {
    rows: &'a [JobInfo],
    get: F,
}

impl<T: Serialize, F: Fn(&JobInfo) -> &T> Serialize for Column<'_, T, F> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.rows.iter().map(&self.get))
    }
}

/// Decodes one column's array into the rows, adding default rows when the
/// column is longer than any seen so far.
struct ColumnSeed<'a, T, F: FnMut(&mut JobInfo, T)> {
    rows: &'a mut Vec<JobInfo>,
    set: F,
    value: PhantomData<T>,
}

impl<'de, T: Deserialize<'de>, F: FnMut(&mut JobInfo, T)> DeserializeSeed<'de>
    for ColumnSeed<'_, T, F>
{
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de, T: Deserialize<'de>, F: FnMut(&mut JobInfo, T)> Visitor<'de> for ColumnSeed<'_, T, F> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an array of one job field's values")
    }

    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<(), A::Error> {
        // Growing 10,000 rows of ~500 bytes by doubling copies them a dozen
        // times; the array header says how many come. Capped, because the
        // header is the peer's word and a row costs far more than its bytes.
        let expected = seq.size_hint().unwrap_or(0).min(MAX_PREALLOCATED_ROWS);
        self.rows.reserve(expected.saturating_sub(self.rows.len()));
        let mut at = 0;
        while let Some(value) = seq.next_element::<T>()? {
            if at == self.rows.len() {
                self.rows.push(JobInfo::default());
            }
            if let Some(row) = self.rows.get_mut(at) {
                (self.set)(row, value);
            }
            at += 1;
        }
        Ok(())
    }
}

struct ListVisitor;

/// The one list of [`JobInfo`]'s fields both directions use, so they cannot
/// drift apart.
macro_rules! job_columns {
    ($($field:ident: $ty:ty),* $(,)?) => {
        impl Serialize for JobList {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let rows = self.0.as_slice();
                let sent = [$(rows.iter().any(|j| j.$field != <$ty>::default()),)*];
                let mut map = s.serialize_map(Some(sent.iter().filter(|&&x| x).count()))?;
                let mut sent = sent.into_iter();
                $(
                    if sent.next().unwrap_or(true) {
                        let column = Column { rows, get: |j: &JobInfo| &j.$field };
                        map.serialize_entry(stringify!($field), &column)?;
                    }
                )*
                map.end()
            }
        }

        impl<'de> Visitor<'de> for ListVisitor {
            type Value = JobList;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a map from job field name to an array of values")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<JobList, A::Error> {
                let mut rows: Vec<JobInfo> = Vec::new();
                while let Some(name) = map.next_key::<String>()? {
                    match name.as_str() {
                        $(
                            stringify!($field) => map.next_value_seed(ColumnSeed {
                                rows: &mut rows,
                                set: |j: &mut JobInfo, v: $ty| j.$field = v,
                                value: PhantomData,
                            })?,
                        )*
                        // A column from a newer peer.
                        _ => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(JobList(rows))
            }
        }
    };
}

job_columns! {
    job_id: u32,
    name: String,
    user: String,
    uid: u32,
    gid: u32,
    partition: String,
    state: JobState,
    reason: String,
    priority: u32,
    submit_time: UnixTime,
    eligible_time: Option<UnixTime>,
    start_time: Option<UnixTime>,
    end_time: Option<UnixTime>,
    time_limit_min: Option<u32>,
    nodes: String,
    num_nodes: u32,
    num_cpus: u32,
    num_tasks: u32,
    cpus_per_task: u32,
    mem_per_node_mb: u64,
    exit_code: (i32, i32),
    workdir: String,
    stdout: String,
    stderr: String,
    stdin: String,
    command: String,
    submit_line: String,
    batch_host: Option<String>,
    restarts: u32,
    req_nodes: u32,
    array: Option<ArrayTask>,
    dependency: String,
    array_pending: Option<String>,
    req_node_list: String,
    exc_node_list: String,
    account: String,
    qos: String,
    comment: String,
    features: String,
    exclusive: Option<Exclusive>,
    over_subscribe: String,
    no_requeue: bool,
    nice: i32,
    tres_per_node: String,
    req_gres: Vec<(String, u64)>,
    alloc_gres: Vec<(String, u64)>,
    node_detail: Vec<crate::wire::types::JobNodeDetail>,
    reservation: String,
    licenses: String,
    sched_start: Option<UnixTime>,
    sched_nodes: String,
    suspend_time: Option<UnixTime>,
    secs_pre_suspend: u64,
    suspended_secs: u64,
    mem_per_cpu_mb: Option<u64>,
    hidden: bool,
}

impl<'de> Deserialize<'de> for JobList {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(ListVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(id: u32, name: &str) -> JobInfo {
        JobInfo {
            job_id: id,
            name: name.to_string(),
            user: "alice".to_string(),
            state: JobState::Running,
            nodes: "n[1-2]".to_string(),
            start_time: Some(1_700_000_000 + i64::from(id)),
            alloc_gres: vec![("gpu".into(), u64::from(id))],
            node_detail: vec![crate::wire::types::JobNodeDetail {
                nodes: "n1".into(),
                cpu_ids: "0-3".into(),
                mem_mb: 100,
                gres: "gpu:1(IDX:0)".into(),
            }],
            array: (id == 2).then_some(ArrayTask {
                array_job_id: 2,
                task_id: 7,
                min: 0,
                max: 7,
                count: 8,
                step: 1,
                throttle: Some(2),
            }),
            ..JobInfo::default()
        }
    }

    fn round_trip(list: &JobList) -> JobList {
        let bytes = rmp_serde::to_vec_named(list).unwrap();
        rmp_serde::from_slice(&bytes).unwrap()
    }

    #[test]
    fn rows_survive_the_columnar_round_trip() {
        let list: JobList = vec![job(1, "a"), job(2, "b"), job(3, "c")]
            .into_iter()
            .collect();
        assert_eq!(round_trip(&list), list);
        assert_eq!(round_trip(&JobList::default()), JobList::default());
    }

    #[test]
    fn all_default_columns_are_not_sent() {
        let list = JobList(vec![job(1, "a"), job(3, "c")]);
        let bytes = rmp_serde::to_vec_named(&list).unwrap();
        let columns: std::collections::BTreeMap<String, IgnoredAny> =
            rmp_serde::from_slice(&bytes).unwrap();
        assert!(columns.contains_key("name"));
        assert!(columns.contains_key("start_time"));
        // Every workdir is "" and no job is an array task here.
        assert!(!columns.contains_key("workdir"));
        assert!(!columns.contains_key("array"));
    }

    /// A newer peer's reply: one column this release does not know, and no
    /// `name` column at all.
    #[derive(Serialize)]
    struct Newer {
        job_id: Vec<u32>,
        shiny_new_field: Vec<String>,
    }

    #[test]
    fn unknown_columns_are_skipped_and_missing_ones_default() {
        let newer = Newer {
            job_id: vec![4],
            shiny_new_field: vec!["x".into()],
        };
        let bytes = rmp_serde::to_vec_named(&newer).unwrap();
        let list: JobList = rmp_serde::from_slice(&bytes).unwrap();
        assert_eq!(list.len(), 1);
        assert_eq!(list.rows()[0].job_id, 4);
        assert_eq!(list.rows()[0].name, "");
        assert_eq!(list.rows()[0].state, JobState::Pending);
    }

    #[test]
    fn a_column_of_the_wrong_type_is_an_error() {
        let mut map = std::collections::BTreeMap::new();
        map.insert("job_id", vec!["seven"]);
        let bytes = rmp_serde::to_vec_named(&map).unwrap();
        let err = rmp_serde::from_slice::<JobList>(&bytes).unwrap_err();
        assert!(!err.to_string().is_empty());
    }

    #[test]
    fn a_column_that_is_not_an_array_is_an_error() {
        let mut map = std::collections::BTreeMap::new();
        map.insert("job_id", 3u32);
        let bytes = rmp_serde::to_vec_named(&map).unwrap();
        let err = rmp_serde::from_slice::<JobList>(&bytes).unwrap_err();
        assert!(err.to_string().contains("array"), "{err}");
    }
}
