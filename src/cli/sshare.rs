//! `sshare`: association shares and usage. Canopy has no association tree
//! yet (the scheduling issue adds one), so the view is flat: the `root`
//! association, and with `-a`/`-u` one row per user that has a job in the
//! controller, each with an equal share. Exits 0, as the exporter and
//! snakemake expect, and accepts Slurm's options (`-n -P -p -o/--format
//! -a -u -U -A -l -m -M -v`).

use super::client::Client;
use super::getopt::{self, spec, Ambiguity, ArgKind, OptSpec, Word};
use crate::wire::messages::{Body, JobQuery};

static OPTIONS: &[OptSpec<&str>] = &[
    spec("noheader", Some('n'), ArgKind::Flag, "noheader"),
    spec("parsable", Some('p'), ArgKind::Flag, "parsable"),
    spec("parsable2", Some('P'), ArgKind::Flag, "parsable2"),
    spec("format", Some('o'), ArgKind::Required, "format"),
    spec("all", Some('a'), ArgKind::Flag, "all"),
    spec("users", Some('u'), ArgKind::Required, "users"),
    spec("Users", Some('U'), ArgKind::Flag, "Users"),
    spec("accounts", Some('A'), ArgKind::Required, "accounts"),
    spec("long", Some('l'), ArgKind::Flag, "long"),
    spec("partition", Some('m'), ArgKind::Flag, "partition"),
    spec("clusters", Some('M'), ArgKind::Required, "clusters"),
    spec("verbose", Some('v'), ArgKind::Flag, "verbose"),
    spec("help", Some('h'), ArgKind::Flag, "help"),
];

const DEFAULT_FIELDS: &[&str] = &[
    "Account",
    "User",
    "RawShares",
    "NormShares",
    "RawUsage",
    "EffectvUsage",
    "FairShare",
];

/// (name, width, right-aligned)
fn field(name: &str) -> Option<(&'static str, usize, bool)> {
    const ALL: &[(&str, usize, bool)] = &[
        ("Account", 20, false),
        ("User", 10, false),
        ("RawShares", 10, true),
        ("NormShares", 11, true),
        ("RawUsage", 11, true),
        ("EffectvUsage", 13, true),
        ("FairShare", 10, true),
        ("Cluster", 10, false),
    ];
    ALL.iter()
        .find(|(n, _, _)| {
            n.to_ascii_lowercase()
                .starts_with(&name.to_ascii_lowercase())
        })
        .copied()
}

/// One association row: (account, user, raw shares, norm shares, fairshare).
struct Row {
    account: String,
    user: String,
    shares: String,
    norm: String,
    fairshare: String,
}

impl Row {
    fn value(&self, f: &str) -> String {
        match f {
            "Account" => self.account.clone(),
            "User" => self.user.clone(),
            "RawShares" => self.shares.clone(),
            "NormShares" => self.norm.clone(),
            "RawUsage" => "0".into(),
            "EffectvUsage" => "0.000000".into(),
            "FairShare" => self.fairshare.clone(),
            _ => String::new(),
        }
    }
}

pub fn run(args: &[String]) -> i32 {
    let mut noheader = false;
    let mut sep: Option<(&str, bool)> = None;
    let mut fields: Vec<(&str, usize, bool)> = Vec::new();
    let mut users = false;
    let mut i = 0;
    loop {
        match getopt::read_word(OPTIONS, args, i, Ambiguity::Error) {
            Word::EndOfOptions | Word::Positional => break,
            Word::Options {
                given,
                problem,
                next,
            } => {
                if let Some(p) = problem {
                    eprintln!("{}", p.message("sshare"));
                    return 1;
                }
                for g in given {
                    let v = g.value.unwrap_or_default();
                    match g.spec.action {
                        "noheader" => noheader = true,
                        "parsable" => sep = Some(("|", true)),
                        "parsable2" => sep = Some(("|", false)),
                        "all" | "users" | "Users" => users = true,
                        "help" => {
                            println!("Usage: sshare [-a] [-n] [-p|-P] [-o fields] [-u users] [-U]");
                            return 0;
                        }
                        "format" => {
                            for name in v.split(',').filter(|s| !s.is_empty()) {
                                let (base, width) = match name.split_once('%') {
                                    Some((b, w)) => (b, w.trim_start_matches('-').parse().ok()),
                                    None => (name, None),
                                };
                                match field(base) {
                                    Some((n, w, right)) => {
                                        fields.push((n, width.unwrap_or(w), right))
                                    }
                                    None => {
                                        eprintln!(
                                            "sshare: error: Invalid field requested: \"{base}\""
                                        );
                                        return 1;
                                    }
                                }
                            }
                        }
                        _ => {}
                    }
                }
                i = next;
            }
        }
    }
    if fields.is_empty() {
        fields = DEFAULT_FIELDS.iter().filter_map(|f| field(f)).collect();
    }
    let mut rows = vec![Row {
        account: "root".into(),
        user: String::new(),
        shares: String::new(),
        norm: String::new(),
        fairshare: String::new(),
    }];
    if users {
        let mut list: Vec<String> = Vec::new();
        let code = super::block_on(async {
            let q = JobQuery {
                job_ids: vec![],
                include_finished: true,
                brief: false,
            };
            let r = async {
                let mut c = Client::connect(None).await?;
                let pd = c.conf.private_data;
                let private = (pd.usage || pd.users)
                    .then(|| own_name_unless_operator(c.conf.slurm_user.as_deref()))
                    .flatten();
                Ok::<_, super::client::CliError>((c.call(Body::QueryJobs(q)).await?, private))
            };
            match r.await {
                Ok((Body::Jobs(jobs), private)) => {
                    list = jobs.into_rows().into_iter().map(|j| j.user).collect();
                    // `PrivateData=usage` or `users`: a user's sshare shows
                    // only their own row, as Slurm's does. (Which users have
                    // jobs is what squeue shows; `PrivateData=jobs` has the
                    // controller hide other users' jobs from this listing.)
                    if let Some(me) = private {
                        list.retain(|u| *u == me);
                    }
                    list.sort();
                    list.dedup();
                    0
                }
                Ok(_) => 1,
                Err(e) => super::report("sshare", &e),
            }
        });
        if code != 0 {
            return code;
        }
        let n = list.len().max(1) as f64;
        for user in list {
            rows.push(Row {
                account: " root".into(),
                user,
                shares: "1".into(),
                norm: format!("{:.6}", 1.0 / n),
                fairshare: "1.000000".into(),
            });
        }
    }
    let mut out = String::new();
    let line = |cells: Vec<String>, out: &mut String| {
        match sep {
            Some((s, trailing)) => {
                out.push_str(&cells.join(s));
                if trailing {
                    out.push_str(s);
                }
            }
            None => {
                for (cell, (_, w, right)) in cells.iter().zip(&fields) {
                    let cut: String = cell.chars().take(*w).collect();
                    if *right {
                        out.push_str(&format!("{cut:>w$} "));
                    } else {
                        out.push_str(&format!("{cut:<w$} "));
                    }
                }
            }
        }
        out.push('\n');
    };
    if !noheader {
        line(
            fields.iter().map(|(n, _, _)| n.to_string()).collect(),
            &mut out,
        );
        if sep.is_none() {
            line(
                fields.iter().map(|(_, w, _)| "-".repeat(*w)).collect(),
                &mut out,
            );
        }
    }
    for r in &rows {
        line(
            fields.iter().map(|(n, _, _)| r.value(n)).collect(),
            &mut out,
        );
    }
    print!("{out}");
    0
}

/// The caller's user name, unless they are an operator (root or SlurmUser),
/// who sees every row.
fn own_name_unless_operator(slurm_user: Option<&str>) -> Option<String> {
    let uid = nix::unistd::getuid();
    if uid.is_root() {
        return None;
    }
    let name = nix::unistd::User::from_uid(uid)
        .ok()
        .flatten()
        .map_or_else(|| uid.to_string(), |u| u.name);
    (slurm_user != Some(name.as_str())).then_some(name)
}
