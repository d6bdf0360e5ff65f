//! `sacctmgr show|list`: the field table (Slurm's names, abbreviations
//! and widths), each entity's rows and default columns, and the
//! printing: right-aligned columns cut with `+`, or `|`-separated with
//! `-p`/`-P`.

use crate::model::assoc::limits::fmt_minutes;
use crate::model::assoc::{Assoc, AssocDb, AssocKey, Qos, Tres, ROOT};

use super::grammar::{is_key, Bad, Show, ShowEntity};

/// One column: (its header, width; negative = left-aligned).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum F {
    Account,
    Admin,
    Cluster,
    ControlHost,
    ControlPort,
    DefAcct,
    DefQos,
    Descr,
    Flags,
    GraceTime,
    GrpCpus,
    GrpCpuMins,
    GrpJobs,
    GrpMem,
    GrpNodes,
    GrpSubmit,
    GrpTres,
    GrpTresMins,
    GrpTresRunMins,
    GrpWall,
    Id,
    MaxCpus,
    MaxJobs,
    MaxJobsPu,
    MaxNodes,
    MaxSubmit,
    MaxSubmitPu,
    MaxTres,
    MaxTresMins,
    MaxTresPerNode,
    MaxTresPu,
    MaxWall,
    Name,
    Org,
    ParentName,
    Partition,
    Preempt,
    PreemptExemptTime,
    PreemptMode,
    Priority,
    Qos,
    Rpc,
    Share,
    UsageFactor,
    UsageThres,
    User,
    /// A column canopy keeps nothing for (shown empty).
    Blank,
}

/// (what the user may type, shortest prefix, header, width, field), in
/// Slurm's lookup order: the first match wins.
const FIELDS: &[(&str, usize, &str, i32, F)] = &[
    ("Account", 3, "Account", 10, F::Account),
    ("Acct", 4, "Account", 10, F::Account),
    ("AdminLevel", 2, "Admin", 9, F::Admin),
    ("Clusters", 2, "Cluster", 10, F::Cluster),
    ("ControlHost", 8, "ControlHost", 15, F::ControlHost),
    ("ControlPort", 8, "ControlPort", 12, F::ControlPort),
    ("DefaultAccount", 8, "Def Acct", 10, F::DefAcct),
    ("DefaultQOS", 8, "Def QOS", 9, F::DefQos),
    ("Description", 3, "Descr", 20, F::Descr),
    ("Flags", 2, "Flags", 20, F::Flags),
    ("GraceTime", 3, "GraceTime", 10, F::GraceTime),
    ("GrpCPUs", 6, "GrpCPUs", 8, F::GrpCpus),
    ("GrpCPUMins", 7, "GrpCPUMins", 11, F::GrpCpuMins),
    ("GrpTRES", 7, "GrpTRES", 13, F::GrpTres),
    ("GrpTRESMins", 7, "GrpTRESMins", 13, F::GrpTresMins),
    ("GrpTRESRunMins", 7, "GrpTRESRunMins", 13, F::GrpTresRunMins),
    ("GrpJobs", 4, "GrpJobs", 7, F::GrpJobs),
    ("GrpMemory", 4, "GrpMem", 7, F::GrpMem),
    ("GrpNodes", 4, "GrpNodes", 8, F::GrpNodes),
    ("GrpSubmitJobs", 4, "GrpSubmit", 9, F::GrpSubmit),
    ("GrpWall", 4, "GrpWall", 11, F::GrpWall),
    ("ID", 2, "ID", 6, F::Id),
    ("MaxCPUMinsPerJob", 7, "MaxCPUMins", 11, F::Blank),
    ("MaxCPUsPerJob", 7, "MaxCPUs", 8, F::MaxCpus),
    ("MaxTRES", 7, "MaxTRES", 13, F::MaxTres),
    ("MaxTRESPerJob", 11, "MaxTRES", 13, F::MaxTres),
    (
        "MaxTRESPerNode",
        11,
        "MaxTRESPerNode",
        14,
        F::MaxTresPerNode,
    ),
    ("MaxTRESMinsPerJob", 8, "MaxTRESMins", 13, F::MaxTresMins),
    ("MaxTRESPerAccount", 11, "MaxTRESPA", 13, F::Blank),
    ("MaxTRESPerAcct", 11, "MaxTRESPA", 13, F::Blank),
    ("MaxTRESPA", 9, "MaxTRESPA", 13, F::Blank),
    ("MaxTRESPerUser", 11, "MaxTRESPU", 13, F::MaxTresPu),
    ("MaxTRESPU", 9, "MaxTRESPU", 13, F::MaxTresPu),
    ("MaxJobs", 4, "MaxJobs", 7, F::MaxJobs),
    ("MaxJobsPerAccount", 11, "MaxJobsPA", 9, F::Blank),
    ("MaxJobsPerAcct", 11, "MaxJobsPA", 9, F::Blank),
    ("MaxJobsPA", 9, "MaxJobsPA", 9, F::Blank),
    ("MaxJobsPerUser", 11, "MaxJobsPU", 9, F::MaxJobsPu),
    ("MaxJobsPU", 9, "MaxJobsPU", 9, F::MaxJobsPu),
    ("MaxNodesPerJob", 4, "MaxNodes", 8, F::MaxNodes),
    ("MaxSubmitJobs", 4, "MaxSubmit", 9, F::MaxSubmit),
    ("MaxSubmitJobsPerAccount", 17, "MaxSubmitPA", 11, F::Blank),
    ("MaxSubmitJobsPerAcct", 17, "MaxSubmitPA", 11, F::Blank),
    ("MaxSubmitPA", 11, "MaxSubmitPA", 11, F::Blank),
    (
        "MaxSubmitJobsPerUser",
        10,
        "MaxSubmitPU",
        11,
        F::MaxSubmitPu,
    ),
    ("MaxSubmitJobsPU", 10, "MaxSubmitPU", 11, F::MaxSubmitPu),
    ("MaxSubmitPU", 6, "MaxSubmitPU", 11, F::MaxSubmitPu),
    ("MaxWallDurationPerJob", 4, "MaxWall", 11, F::MaxWall),
    ("MinTRESPerJob", 7, "MinTRES", 13, F::Blank),
    ("Name", 2, "Name", 10, F::Name),
    ("Organization", 1, "Org", 20, F::Org),
    ("ParentName", 7, "ParentName", 10, F::ParentName),
    ("Partition", 4, "Partition", 10, F::Partition),
    ("PreemptMode", 8, "PreemptMode", 11, F::PreemptMode),
    ("Preempt", 7, "Preempt", 10, F::Preempt),
    (
        "PreemptExemptTime",
        8,
        "PreemptExemptTime",
        19,
        F::PreemptExemptTime,
    ),
    ("Priority", 3, "Priority", 10, F::Priority),
    ("QOSLevel", 3, "QOS", 20, F::Qos),
    ("RPC", 1, "RPC", 5, F::Rpc),
    ("Share", 1, "Share", 9, F::Share),
    ("FairShare", 2, "Share", 9, F::Share),
    ("UsageFactor", 6, "UsageFactor", 11, F::UsageFactor),
    ("UsageThreshold", 6, "UsageThres", 10, F::UsageThres),
    ("User", 1, "User", 10, F::User),
];

/// A `format=` item: `Name[%width]`.
fn column(item: &str, tree: bool) -> Result<(String, i32, F), Bad> {
    let (name, width) = match item.split_once('%') {
        Some((n, w)) => (n, w.parse::<i32>().ok()),
        None => (item, None),
    };
    let found = FIELDS
        .iter()
        .find(|(full, min, ..)| is_key(name, full, *min))
        .ok_or_else(|| Bad(format!("Unknown field '{name}'")))?;
    let (_, _, header, w, f) = *found;
    let w = match (f, tree) {
        (F::Account, true) => -20,
        _ => w,
    };
    Ok((header.to_string(), width.unwrap_or(w), f))
}

/// How rows print.
#[derive(Debug, Clone, Copy, Default)]
pub struct Style {
    pub noheader: bool,
    /// `-p` (`true`: a trailing `|`) or `-P`.
    pub parsable: Option<bool>,
}

/// What a row stands for.
enum Row<'a> {
    Cluster(&'a str, Option<&'a Assoc>),
    Account(
        &'a crate::model::assoc::Account,
        Option<(&'a AssocKey, &'a Assoc, usize)>,
    ),
    User(
        &'a crate::model::assoc::User,
        Option<(&'a AssocKey, &'a Assoc)>,
    ),
    Assoc(&'a AssocKey, &'a Assoc, usize),
    Qos(&'a Qos),
}

/// Facts about the controller the cluster rows show.
pub struct Host {
    pub addr: String,
    pub port: u16,
}

fn tres(t: &Tres) -> String {
    t.to_string()
}

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map(|v| v.to_string()).unwrap_or_default()
}

fn qos_list(db: &AssocDb, a: &Assoc, key: Option<&AssocKey>) -> String {
    // The association's own list, else what it inherits.
    let list = match (&a.qos, key) {
        (Some(q), _) => q.clone(),
        (None, Some(k)) => db.allowed_qos(k),
        (None, None) => Default::default(),
    };
    list.into_iter().collect::<Vec<_>>().join(",")
}

fn assoc_value(
    db: &AssocDb,
    key: Option<&AssocKey>,
    a: &Assoc,
    f: F,
    depth: usize,
    tree: bool,
) -> Option<String> {
    let l = &a.limits;
    Some(match f {
        F::Account => match key {
            Some(k) if tree => format!("{}{}", " ".repeat(depth), k.account),
            Some(k) => k.account.clone(),
            None => String::new(),
        },
        F::Cluster => key.map(|k| k.cluster.clone()).unwrap_or_default(),
        F::User => key.map(|k| k.user.clone()).unwrap_or_default(),
        F::Partition => String::new(),
        F::ParentName => a.parent.clone().unwrap_or_default(),
        F::Id => a.id.to_string(),
        F::Share => a.shares.to_string(),
        F::Priority => opt(a.priority),
        F::GrpJobs => opt(l.grp_jobs),
        F::GrpSubmit => opt(l.grp_submit_jobs),
        F::GrpTres => tres(&l.grp_tres),
        F::GrpTresMins => tres(&l.grp_tres_mins),
        F::GrpTresRunMins => String::new(),
        F::GrpWall => opt(l.grp_wall.map(fmt_minutes)),
        F::GrpCpus => opt(l.grp_tres.get("cpu")),
        F::GrpCpuMins => opt(l.grp_tres_mins.get("cpu")),
        F::GrpMem => opt(l.grp_tres.get("mem")),
        F::GrpNodes => opt(l.grp_tres.get("node")),
        F::MaxJobs => opt(l.max_jobs),
        F::MaxSubmit => opt(l.max_submit_jobs),
        F::MaxTres => tres(&l.max_tres_per_job),
        F::MaxTresPerNode => tres(&l.max_tres_per_node),
        F::MaxTresMins => String::new(),
        F::MaxWall => opt(l.max_wall.map(fmt_minutes)),
        F::MaxCpus => opt(l.max_tres_per_job.get("cpu")),
        F::MaxNodes => opt(l.max_tres_per_job.get("node")),
        F::Qos => qos_list(db, a, key),
        F::DefQos => match (&a.default_qos, key) {
            (Some(q), _) => q.clone(),
            (None, Some(k)) => db.default_qos(k).unwrap_or_default(),
            (None, None) => String::new(),
        },
        _ => return None,
    })
}

fn qos_value(q: &Qos, f: F) -> String {
    match f {
        F::Name => q.name.clone(),
        F::Descr => q.description.clone(),
        F::Id => q.id.to_string(),
        F::Priority => q.priority.to_string(),
        F::GraceTime => crate::model::time::fmt_duration_long(u64::from(q.grace_time)),
        F::Preempt => q.preempt.iter().cloned().collect::<Vec<_>>().join(","),
        // sacctmgr shows the mode in lower case (`cluster`, `suspend`).
        F::PreemptMode => q.preempt_mode.to_string().to_lowercase(),
        F::PreemptExemptTime => q
            .preempt_exempt_time
            .map(|s| crate::model::time::fmt_duration_long(u64::from(s)))
            .unwrap_or_default(),
        F::Flags => q.flags_text(),
        F::UsageFactor => format!("{:.6}", q.usage_factor),
        F::GrpTres => tres(&q.grp_tres),
        F::GrpJobs => opt(q.grp_jobs),
        F::GrpSubmit => opt(q.grp_submit_jobs),
        F::GrpWall => opt(q.grp_wall.map(fmt_minutes)),
        F::GrpTresMins => tres(&q.grp_tres_mins),
        F::GrpCpuMins => opt(q.grp_tres_mins.get("cpu")),
        F::MaxTres => tres(&q.max_tres_per_job),
        F::MaxTresPerNode => tres(&q.max_tres_per_node),
        F::MaxTresPu => tres(&q.max_tres_per_user),
        F::MaxJobsPu => opt(q.max_jobs_per_user),
        F::MaxSubmitPu => opt(q.max_submit_jobs_per_user),
        F::MaxWall => opt(q.max_wall.map(fmt_minutes)),
        F::MaxCpus => opt(q.max_tres_per_job.get("cpu")),
        F::MaxNodes => opt(q.max_tres_per_job.get("node")),
        _ => String::new(),
    }
}

fn value(db: &AssocDb, host: &Host, row: &Row<'_>, f: F, tree: bool) -> String {
    match row {
        Row::Qos(q) => qos_value(q, f),
        Row::Cluster(name, a) => match f {
            F::Cluster | F::Name => name.to_string(),
            F::ControlHost => host.addr.clone(),
            F::ControlPort => host.port.to_string(),
            // Slurm 22.05's protocol version.
            F::Rpc => "9728".into(),
            _ => a
                .and_then(|a| assoc_value(db, Some(&AssocKey::account(name, ROOT)), a, f, 0, false))
                .unwrap_or_default(),
        },
        Row::Account(acct, assoc) => match f {
            F::Account | F::Name => acct.name.clone(),
            F::Descr => acct.description.clone(),
            F::Org => acct.organization.clone(),
            _ => assoc
                .and_then(|(k, a, d)| assoc_value(db, Some(k), a, f, d, tree))
                .unwrap_or_default(),
        },
        Row::User(u, assoc) => match f {
            F::User | F::Name => u.name.clone(),
            F::DefAcct => u.default_account.clone(),
            F::Admin => u.admin_level.to_string(),
            _ => assoc
                .and_then(|(k, a)| assoc_value(db, Some(k), a, f, 0, false))
                .unwrap_or_default(),
        },
        Row::Assoc(k, a, d) => assoc_value(db, Some(k), a, f, *d, tree).unwrap_or_default(),
    }
}

fn defaults(s: &Show) -> &'static str {
    match s.entity {
        ShowEntity::Account if s.with_assoc => "Acc,Des,O,Cl,ParentN,U,Share,Priority,GrpJ,GrpN,GrpCPUs,GrpMEM,GrpS,GrpWall,GrpCPUMins,MaxJ,MaxN,MaxCPUs,MaxS,MaxW,MaxCPUMins,QOS,DefaultQOS",
        ShowEntity::Account => "Acc,Des,O",
        ShowEntity::User if s.with_assoc => "U,DefaultA,Ad,Cl,Acc,Part,Share,Priority,MaxJ,MaxN,MaxCPUs,MaxS,MaxW,MaxCPUMins,QOS,DefaultQOS",
        ShowEntity::User => "U,DefaultA,Ad",
        ShowEntity::Cluster => "Cl,Controlh,Controlp,RPC,Fa,GrpJ,GrpTRES,GrpS,MaxJ,MaxTRES,MaxS,MaxW,QOS,DefaultQOS",
        ShowEntity::Qos => "Name,Prio,GraceT,Preempt,PreemptE,PreemptM,Flags%40,UsageThres,UsageFactor,GrpTRES,GrpTRESMins,GrpTRESRunMins,GrpJ,GrpS,GrpW,MaxTRES,MaxTRESPerN,MaxTRESMins,MaxW,MaxTRESPerUser,MaxJobsPerUser,MaxSubmitJobsPerUser,MaxTRESPerAcct,MaxJobsPerAcct,MaxSubmitJobsPerAcct,MinTRES",
        ShowEntity::Association => "Cluster,Account,User,Part,Share,Priority,GrpJ,GrpTRES,GrpS,GrpWall,GrpTRESMins,MaxJ,MaxTRES,MaxTRESPerN,MaxS,MaxW,MaxTRESMins,QOS,DefaultQOS,GrpTRESRunMins",
    }
}

fn matches(list: &[String], v: &str) -> bool {
    list.is_empty() || list.iter().any(|x| x.eq_ignore_ascii_case(v))
}

fn rows<'a>(db: &'a AssocDb, s: &Show) -> Vec<Row<'a>> {
    let f = &s.filter;
    match s.entity {
        ShowEntity::Qos => db
            .qos
            .values()
            .filter(|q| matches(&f.names, &q.name))
            .map(Row::Qos)
            .collect(),
        ShowEntity::Cluster => db
            .clusters
            .iter()
            .filter(|c| matches(&f.names, c))
            .map(|c| Row::Cluster(c, db.assocs.get(&AssocKey::account(c, ROOT))))
            .collect(),
        ShowEntity::Account if s.with_assoc => {
            let mut out = Vec::new();
            for c in db.clusters.iter().filter(|c| matches(&f.clusters, c)) {
                for (k, a, d) in db.tree(c) {
                    if matches(&f.names, &k.account) && matches(&s.users, &k.user) {
                        if let Some(acct) = db.accounts.get(&k.account) {
                            out.push(Row::Account(acct, Some((k, a, d))));
                        }
                    }
                }
            }
            out
        }
        ShowEntity::Account => db
            .accounts
            .values()
            .filter(|a| matches(&f.names, &a.name))
            .filter(|a| {
                f.parents.is_empty()
                    || db.assocs.iter().any(|(k, x)| {
                        k.account == a.name
                            && !k.is_user()
                            && x.parent.as_deref().is_some_and(|p| matches(&f.parents, p))
                    })
            })
            .map(|a| Row::Account(a, None))
            .collect(),
        ShowEntity::User if s.with_assoc => {
            let mut out = Vec::new();
            for u in db.users.values().filter(|u| matches(&f.names, &u.name)) {
                for (k, a) in db.assocs.iter().filter(|(k, _)| {
                    k.user == u.name
                        && matches(&f.accounts, &k.account)
                        && matches(&f.clusters, &k.cluster)
                }) {
                    out.push(Row::User(u, Some((k, a))));
                }
            }
            out
        }
        ShowEntity::User => db
            .users
            .values()
            .filter(|u| matches(&f.names, &u.name))
            .filter(|u| {
                f.accounts.is_empty()
                    || db
                        .assocs
                        .keys()
                        .any(|k| k.user == u.name && matches(&f.accounts, &k.account))
            })
            .map(|u| Row::User(u, None))
            .collect(),
        ShowEntity::Association => {
            let mut out = Vec::new();
            for c in db.clusters.iter().filter(|c| matches(&f.clusters, c)) {
                for (k, a, d) in db.tree(c) {
                    let account_ok = matches(&f.accounts, &k.account);
                    let user_ok = s.users.is_empty() || s.users.contains(&k.user);
                    if account_ok && user_ok {
                        out.push(Row::Assoc(k, a, d));
                    }
                }
            }
            out
        }
    }
}

/// The table `s` asks for, as sacctmgr prints it.
pub fn render(db: &AssocDb, host: &Host, s: &Show, style: Style) -> Result<String, Bad> {
    let spec: Vec<String> = if s.format.is_empty() {
        defaults(s).split(',').map(str::to_string).collect()
    } else {
        s.format.clone()
    };
    let cols = spec
        .iter()
        .map(|c| column(c, s.tree))
        .collect::<Result<Vec<_>, _>>()?;
    let mut out = String::new();
    let n = cols.len();
    // Values cut to their column end in `+`; headers are just cut.
    let line = |cells: Vec<String>, out: &mut String, plus: bool| {
        for (i, (cell, (_, w, _))) in cells.into_iter().zip(&cols).enumerate() {
            match style.parsable {
                Some(trailing) => {
                    out.push_str(&cell);
                    if trailing || i + 1 < n {
                        out.push('|');
                    }
                }
                None => {
                    let width = w.unsigned_abs() as usize;
                    let mut text: String = cell.chars().take(width).collect();
                    if plus && cell.chars().count() > width && width > 0 {
                        text.pop();
                        text.push('+');
                    }
                    if *w < 0 {
                        out.push_str(&format!("{text:<width$} "));
                    } else {
                        out.push_str(&format!("{text:>width$} "));
                    }
                }
            }
        }
        out.push('\n');
    };
    if !style.noheader {
        line(
            cols.iter().map(|(h, _, _)| h.clone()).collect(),
            &mut out,
            false,
        );
        if style.parsable.is_none() {
            let dashes = cols
                .iter()
                .map(|(_, w, _)| "-".repeat(w.unsigned_abs() as usize))
                .collect();
            line(dashes, &mut out, false);
        }
    }
    for r in rows(db, s) {
        let cells = cols
            .iter()
            .map(|(_, _, f)| value(db, host, &r, *f, s.tree))
            .collect();
        line(cells, &mut out, true);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::sacctmgr::grammar::{parse, Command};

    fn show(words: &str) -> Show {
        let w: Vec<String> = words.split_whitespace().map(str::to_string).collect();
        match parse(&w).unwrap() {
            Command::Show(s) => s,
            other => panic!("{other:?}"),
        }
    }

    fn db() -> AssocDb {
        let mut d = AssocDb::default();
        d.ensure_cluster("c1");
        d
    }

    const HOST: Host = Host {
        addr: String::new(),
        port: 6817,
    };

    #[test]
    fn the_association_table_has_slurms_columns_and_widths() {
        let text = render(&db(), &HOST, &show("show assoc"), Style::default()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "   Cluster    Account       User  Partition     Share   Priority GrpJobs       GrpTRES GrpSubmit     GrpWall   GrpTRESMins MaxJobs       MaxTRES MaxTRESPerNode MaxSubmit     MaxWall   MaxTRESMins                  QOS   Def QOS GrpTRESRunMin "
        );
        assert!(lines[1].starts_with("---------- ---------- ---------- ---------- --------- "));
        let head = format!(
            "{:>10} {:>10} {:>10} {:>10} {:>9} ",
            "c1", "root", "", "", "1"
        );
        assert!(lines[2].starts_with(&head), "{text}");
        assert!(
            lines[2].ends_with("               normal                         "),
            "{text}"
        );
    }

    #[test]
    fn long_values_end_in_a_plus_and_formats_take_widths() {
        let mut d = db();
        d.accounts.insert(
            "a".into(),
            crate::model::assoc::Account {
                name: "a".into(),
                description: "a very long description indeed".into(),
                organization: "o".into(),
            },
        );
        let s = show("show account a format=account%5,descr");
        let text = render(
            &d,
            &HOST,
            &s,
            Style {
                noheader: true,
                parsable: None,
            },
        )
        .unwrap();
        assert_eq!(text, "    a a very long descrip+ \n");
        let text = render(
            &d,
            &HOST,
            &s,
            Style {
                noheader: false,
                parsable: Some(true),
            },
        )
        .unwrap();
        assert_eq!(text, "Account|Descr|\na|a very long description indeed|\n");
        assert!(render(
            &d,
            &HOST,
            &show("show account format=bogus"),
            Style::default()
        )
        .is_err());
    }

    #[test]
    fn the_qos_table_starts_with_slurms_columns() {
        let text = render(&db(), &HOST, &show("show qos"), Style::default()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines[0].starts_with(
                "      Name   Priority  GraceTime    Preempt   PreemptExemptTime PreemptMode"
            ),
            "{}",
            lines[0]
        );
        assert!(
            lines[2].starts_with(
                "    normal          0   00:00:00                                    cluster "
            ),
            "{}",
            lines[2]
        );
        assert!(lines[2].contains(" 1.000000 "), "{}", lines[2]);
    }

    #[test]
    fn qos_preemption_settings_show_as_sacctmgr_prints_them() {
        let mut d = db();
        let mut q = crate::model::assoc::Qos::new(2, "urgent");
        q.preempt.insert("normal".into());
        q.preempt.insert("scavenger".into());
        q.preempt_mode = crate::model::assoc::PreemptMode::Suspend;
        q.grace_time = 90;
        q.preempt_exempt_time = Some(3600 + 5);
        d.qos.insert("urgent".into(), q);
        let s = show("show qos urgent format=Name,Preempt,PreemptMode,GraceTime,PreemptExemptTime");
        let style = Style {
            noheader: true,
            parsable: Some(true),
        };
        let text = render(&d, &HOST, &s, style).unwrap();
        assert_eq!(text, "urgent|normal,scavenger|suspend|00:01:30|01:00:05|\n");
    }
}
