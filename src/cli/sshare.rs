//! `sshare`: association shares and usage as the controller's fair share
//! computes them (see `ctld/priority.rs`): RawShares, NormShares,
//! RawUsage, NormUsage, EffectvUsage, FairShare, LevelFS, with Slurm's
//! field widths, its right-justified headers, and account names indented
//! one space per level below root. Options: `-a -A -u -U -l -n -p -P
//! -o/--format -e/--helpformat -m -M -v -V`. Exits 0, as the exporter and
//! snakemake expect. Under priority/basic the controller still answers
//! (the tree of jobs' accounts and users, without usage).

use super::client::Client;
use super::getopt::{self, spec, Ambiguity, ArgKind, OptSpec, Word};
use crate::wire::messages::Body;
use crate::wire::priority::{ShareQuery, ShareRow};

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
    spec("cluster", Some('M'), ArgKind::Required, "clusters"),
    spec("clusters", None, ArgKind::Required, "clusters"),
    spec("helpformat", Some('e'), ArgKind::Flag, "helpformat"),
    spec("verbose", Some('v'), ArgKind::Flag, "verbose"),
    spec("version", Some('V'), ArgKind::Flag, "version"),
    spec("help", Some('h'), ArgKind::Flag, "help"),
    spec("usage", None, ArgKind::Flag, "help"),
];

const HELP: &str = "Usage:  sshare [OPTION]                                                    
  Valid OPTIONs are:                                                       
    -a or --all            list all users                                  
    -A or --accounts=      display specific accounts (comma separated list)
    -e or --helpformat     Print a list of fields that can be specified    
                           with the '--format' option                      
    -l or --long           include normalized usage in output              
    -m or --partition      print the partition part of the association     
    -M or --cluster=names  clusters to issue commands to.                  
                           NOTE: SlurmDBD must be up.                      
    -n or --noheader       omit header from output                         
    -o or --format=        Comma separated list of fields (use             
                           \"--helpformat\" for a list of available fields).
    -p or --parsable       '|' delimited output with a trailing '|'        
    -P or --parsable2      '|' delimited output without a trailing '|'     
    -u or --users=         display specific users (comma separated list)   
    -U or --Users          display only user information                   
    -v or --verbose        display more information                        
    -V or --version        display tool version number                     
          --help           display this usage description                  
          --usage          display this usage description                  
                                                                           ";

const HELPFORMAT: &str = "Account           Cluster           EffectvUsage      FairShare        
GrpTRESMins       GrpTRESRaw        ID                LevelFS          
NormShares        NormUsage         Partition         RawShares        
RawUsage          TRESRunMins       User             ";

/// A field: its name, width, and whether values are left-justified
/// (headers are always right-justified, as Slurm prints them).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Field {
    name: &'static str,
    width: usize,
    left: bool,
}

const FIELDS: &[Field] = &[
    Field {
        name: "Account",
        width: 20,
        left: true,
    },
    Field {
        name: "Cluster",
        width: 10,
        left: true,
    },
    Field {
        name: "EffectvUsage",
        width: 13,
        left: false,
    },
    Field {
        name: "FairShare",
        width: 10,
        left: false,
    },
    Field {
        name: "GrpTRESMins",
        width: 30,
        left: true,
    },
    Field {
        name: "GrpTRESRaw",
        width: 30,
        left: true,
    },
    Field {
        name: "ID",
        width: 6,
        left: false,
    },
    Field {
        name: "LevelFS",
        width: 10,
        left: false,
    },
    Field {
        name: "NormShares",
        width: 11,
        left: false,
    },
    Field {
        name: "NormUsage",
        width: 11,
        left: false,
    },
    Field {
        name: "Partition",
        width: 12,
        left: true,
    },
    Field {
        name: "RawShares",
        width: 10,
        left: false,
    },
    Field {
        name: "RawUsage",
        width: 11,
        left: false,
    },
    Field {
        name: "TRESRunMins",
        width: 30,
        left: true,
    },
    Field {
        name: "User",
        width: 10,
        left: false,
    },
];

const DEFAULT: &str = "Account,User,RawShares,NormShares,RawUsage,EffectvUsage,FairShare";
const LONG: &str = "Account,User,RawShares,NormShares,RawUsage,NormUsage,EffectvUsage,FairShare,LevelFS,GrpTRESMins,TRESRunMins";

/// `Name[%width]` (a negative width... is Slurm's too; the sign is dropped).
fn field(spec: &str) -> Result<Field, String> {
    let (base, width) = match spec.split_once('%') {
        Some((b, w)) => (
            b,
            Some(
                w.trim_start_matches('-')
                    .parse::<usize>()
                    .map_err(|_| format!("Invalid field requested: \"{spec}\""))?,
            ),
        ),
        None => (spec, None),
    };
    let lower = base.trim().to_ascii_lowercase();
    // Slurm matches a prefix (`Eff`, `Fairshare`, `A`); `Account` wins `A`.
    let f = FIELDS
        .iter()
        .find(|f| !lower.is_empty() && f.name.to_ascii_lowercase().starts_with(&lower))
        .copied()
        .ok_or_else(|| format!("Invalid field requested: \"{base}\""))?;
    Ok(Field {
        width: width.unwrap_or(f.width),
        ..f
    })
}

fn value(f: &str, r: &ShareRow, cluster: &str) -> String {
    let account_cell = || format!("{}{}", " ".repeat(r.depth as usize), r.account);
    match f {
        "Account" => {
            // A user's row shows its account at the user's own depth.
            account_cell()
        }
        "User" => r.user.clone(),
        "Cluster" => cluster.to_string(),
        "RawShares" => r.raw_shares.map(|s| s.to_string()).unwrap_or_default(),
        "NormShares" => format!("{:.6}", r.norm_shares),
        "RawUsage" => format!("{}", r.raw_usage.max(0.0).floor() as u64),
        "NormUsage" => format!("{:.6}", r.norm_usage),
        "EffectvUsage" => format!("{:.6}", r.effective_usage),
        "FairShare" => r.fairshare.map(|f| format!("{f:.6}")).unwrap_or_default(),
        "LevelFS" => r
            .level_fs
            .map(|l| {
                if l.is_infinite() {
                    "inf".to_string()
                } else {
                    format!("{l:.6}")
                }
            })
            .unwrap_or_default(),
        "TRESRunMins" => r.tres_run_mins.clone(),
        "GrpTRESMins" => r.grp_tres_mins.clone(),
        "GrpTRESRaw" => r.grp_tres_raw.clone(),
        _ => String::new(),
    }
}

#[derive(Debug, Default)]
struct Params {
    noheader: bool,
    sep: Option<(&'static str, bool)>,
    fields: Vec<Field>,
    only_users: bool,
    query: ShareQuery,
}

fn render(p: &Params, rows: &[ShareRow], cluster: &str) -> String {
    let mut out = String::new();
    let line = |cells: Vec<String>, header: bool, out: &mut String| {
        match p.sep {
            Some((s, trailing)) => {
                out.push_str(&cells.join(s));
                if trailing {
                    out.push_str(s);
                }
            }
            None => {
                for (cell, f) in cells.iter().zip(&p.fields) {
                    let w = f.width;
                    let cut: String = cell.chars().take(w).collect();
                    if f.left && !header {
                        out.push_str(&format!("{cut:<w$} "));
                    } else {
                        out.push_str(&format!("{cut:>w$} "));
                    }
                }
            }
        }
        out.push('\n');
    };
    if !p.noheader {
        line(
            p.fields.iter().map(|f| f.name.to_string()).collect(),
            true,
            &mut out,
        );
        if p.sep.is_none() {
            line(
                p.fields.iter().map(|f| "-".repeat(f.width)).collect(),
                true,
                &mut out,
            );
        }
    }
    for r in rows {
        if p.only_users && r.user.is_empty() {
            continue;
        }
        line(
            p.fields.iter().map(|f| value(f.name, r, cluster)).collect(),
            false,
            &mut out,
        );
    }
    out
}

fn list(v: &str) -> Vec<String> {
    v.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect()
}

pub fn run(args: &[String]) -> i32 {
    let mut p = Params::default();
    let mut long = false;
    let mut format: Option<String> = None;
    let mut i = 0;
    loop {
        match getopt::read_word(OPTIONS, args, i, Ambiguity::Error) {
            Word::EndOfOptions | Word::Positional => break,
            Word::Options {
                given,
                problem,
                next,
            } => {
                if let Some(prob) = problem {
                    eprintln!("{}", prob.message("sshare"));
                    return 1;
                }
                for g in given {
                    let v = g.value.unwrap_or_default();
                    match g.spec.action {
                        "noheader" => p.noheader = true,
                        "parsable" => p.sep = Some(("|", true)),
                        "parsable2" => p.sep = Some(("|", false)),
                        "all" => p.query.all_users = true,
                        "users" => p.query.users = list(&v),
                        "Users" => p.only_users = true,
                        "accounts" => p.query.accounts = list(&v),
                        "long" => long = true,
                        "format" => format = Some(v),
                        "help" => {
                            println!("{HELP}");
                            return 0;
                        }
                        "helpformat" => {
                            println!("{HELPFORMAT}");
                            return 0;
                        }
                        "version" => {
                            println!("canopy {}", env!("CARGO_PKG_VERSION"));
                            return 0;
                        }
                        _ => {}
                    }
                }
                i = next;
            }
        }
    }
    let spec = format.unwrap_or_else(|| if long { LONG } else { DEFAULT }.to_string());
    for name in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        match field(name) {
            Ok(f) => p.fields.push(f),
            Err(e) => {
                eprintln!("sshare: error: {e}");
                return 1;
            }
        }
    }
    super::block_on(async move {
        let r = async {
            let mut c = Client::connect(None).await?;
            let pd = c.conf.private_data;
            let cluster = c.conf.cluster_name.clone();
            let me = own_name_unless_operator(c.conf.slurm_user.as_deref());
            // Without -a or -u, a user sees their own rows (and the
            // accounts); `PrivateData=usage` or `users` keeps a user to
            // their own rows whatever they ask, as Slurm does.
            if let Some(me) = &me {
                let private = pd.usage || pd.users;
                if private || (!p.query.all_users && p.query.users.is_empty()) {
                    p.query.users = vec![me.clone()];
                    p.query.all_users = false;
                }
            } else if !p.query.all_users && p.query.users.is_empty() {
                p.query.users = vec!["root".into()];
            }
            let reply = c.call(Body::QueryShares(p.query.clone())).await?;
            Ok::<_, super::client::CliError>((reply, cluster))
        };
        match r.await {
            Ok((Body::Shares(report), cluster)) => {
                print!("{}", render(&p, &report.rows, &cluster));
                0
            }
            Ok((Body::Error(e), _)) => {
                eprintln!("sshare: error: {}", e.message);
                1
            }
            Ok(_) => {
                eprintln!("sshare: error: unexpected reply from the controller");
                1
            }
            Err(e) => super::report("sshare", &e),
        }
    })
}

/// The caller's user name, unless they are an operator (root or
/// SlurmUser), who may see every row.
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

#[cfg(test)]
mod tests {
    use super::*;

    fn rows() -> Vec<ShareRow> {
        vec![
            ShareRow {
                depth: 0,
                account: "root".into(),
                raw_usage: 1234.9,
                norm_usage: 1.0,
                effective_usage: 1.0,
                tres_run_mins: "cpu=0".into(),
                ..Default::default()
            },
            ShareRow {
                depth: 1,
                account: "chem".into(),
                raw_shares: Some(1),
                norm_shares: 0.5,
                raw_usage: 1234.0,
                norm_usage: 1.0,
                effective_usage: 1.0,
                level_fs: Some(0.5),
                tres_run_mins: "cpu=0".into(),
                ..Default::default()
            },
            ShareRow {
                depth: 2,
                account: "chem".into(),
                user: "alice".into(),
                raw_shares: Some(1),
                norm_shares: 1.0,
                raw_usage: 1234.0,
                norm_usage: 1.0,
                effective_usage: 1.0,
                fairshare: Some(0.5),
                level_fs: Some(1.0),
                tres_run_mins: "cpu=0".into(),
                grp_tres_mins: "cpu=100".into(),
                ..Default::default()
            },
            ShareRow {
                depth: 1,
                account: "phys".into(),
                raw_shares: Some(1),
                norm_shares: 0.5,
                level_fs: Some(f64::INFINITY),
                tres_run_mins: "cpu=0".into(),
                ..Default::default()
            },
        ]
    }

    fn params(spec: &str) -> Params {
        Params {
            fields: spec.split(',').map(|f| field(f).unwrap()).collect(),
            ..Default::default()
        }
    }

    #[test]
    fn default_layout_indents_accounts_and_right_justifies_headers() {
        let text = render(&params(DEFAULT), &rows(), "t");
        let expected = concat!(
            "             Account       User  RawShares  NormShares    RawUsage  EffectvUsage  FairShare \n",
            "-------------------- ---------- ---------- ----------- ----------- ------------- ---------- \n",
            "root                                          0.000000        1234      1.000000            \n",
            " chem                                    1    0.500000        1234      1.000000            \n",
            "  chem                    alice          1    1.000000        1234      1.000000   0.500000 \n",
            " phys                                    1    0.500000           0      0.000000            \n",
        );
        assert_eq!(text, expected);
    }

    #[test]
    fn long_parsable_and_fields() {
        let mut p = params(LONG);
        p.sep = Some(("|", false));
        let text = render(&p, &rows(), "t");
        let mut lines = text.lines();
        assert_eq!(
            lines.next().unwrap(),
            "Account|User|RawShares|NormShares|RawUsage|NormUsage|EffectvUsage|FairShare|LevelFS|GrpTRESMins|TRESRunMins"
        );
        assert_eq!(
            lines.next().unwrap(),
            "root|||0.000000|1234|1.000000|1.000000||||cpu=0"
        );
        assert_eq!(
            lines.nth(1).unwrap(),
            "  chem|alice|1|1.000000|1234|1.000000|1.000000|0.500000|1.000000|cpu=100|cpu=0"
        );
        assert_eq!(
            lines.next().unwrap(),
            " phys||1|0.500000|0|0.000000|0.000000||inf||cpu=0"
        );
        assert_eq!(field("Eff").unwrap().name, "EffectvUsage");
        assert_eq!(field("fairshare%5").unwrap().width, 5);
        assert_eq!(
            field("Bogus").unwrap_err(),
            "Invalid field requested: \"Bogus\""
        );
        // -U: users only; -n: no header.
        let mut p = params("User,FairShare");
        p.only_users = true;
        p.noheader = true;
        assert_eq!(render(&p, &rows(), "t"), "     alice   0.500000 \n");
    }
}
