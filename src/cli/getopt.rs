//! The getopt_long syntax every Slurm command shares: `--name=value`,
//! `--name value`, unique prefixes of long names, bundled short flags
//! (`-Qv`), `-kvalue` and `-k value`, and `--` ending the options.
//!
//! Each command keeps its own option table (what each option *does*) and its
//! own error wording; this module only splits words into options. Written by
//! hand because clap's matching differs from getopt's where scripts notice
//! (prefix abbreviations, Slurm's `-N2`-style bundles, per-tool ambiguity rules).

/// Whether and how an option takes a value (getopt's three kinds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgKind {
    Flag,
    Required,
    /// Only as `--opt=value` or `-ovalue`.
    Optional,
}

/// One row of a command's option table.
#[derive(Debug, Clone)]
pub struct OptSpec<A: 'static> {
    /// Empty for short-only options.
    pub long: &'static str,
    pub short: Option<char>,
    pub arg: ArgKind,
    pub action: A,
}

pub const fn spec<A>(
    long: &'static str,
    short: Option<char>,
    arg: ArgKind,
    action: A,
) -> OptSpec<A> {
    OptSpec {
        long,
        short,
        arg,
        action,
    }
}

/// How a long-name prefix matching several options is resolved; the Slurm
/// tools differ here, and scripts depend on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ambiguity {
    /// getopt_long: an error naming the candidates.
    Error,
    /// Aliases (`--cluster`/`--clusters`: same action, value kind and short
    /// letter) count as one option; anything else is ambiguous.
    SameAction,
    /// The first matching row of the table wins (sacct's field-like behaviour).
    FirstWins,
}

/// A syntax problem, before any tool-specific wording.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GetoptError {
    Unrecognized {
        option: String,
    },
    Ambiguous {
        option: String,
        candidates: String,
    },
    /// `--flag=value` for an option that takes none.
    UnexpectedArgument {
        option: &'static str,
    },
    MissingLongArgument {
        option: &'static str,
    },
    InvalidShort {
        option: char,
    },
    MissingShortArgument {
        option: char,
    },
}

impl GetoptError {
    /// The message GNU getopt prints for this problem, as program `prog`.
    pub fn message(&self, prog: &str) -> String {
        match self {
            GetoptError::Unrecognized { option } => {
                format!("{prog}: unrecognized option '--{option}'")
            }
            GetoptError::Ambiguous { option, candidates } => {
                format!("{prog}: option '--{option}' is ambiguous; possibilities: {candidates}")
            }
            GetoptError::UnexpectedArgument { option } => {
                format!("{prog}: option '--{option}' doesn't allow an argument")
            }
            GetoptError::MissingLongArgument { option } => {
                format!("{prog}: option '--{option}' requires an argument")
            }
            GetoptError::InvalidShort { option } => format!("{prog}: invalid option -- '{option}'"),
            GetoptError::MissingShortArgument { option } => {
                format!("{prog}: option requires an argument -- '{option}'")
            }
        }
    }
}

/// Without a program name; commands print [`GetoptError::message`] instead.
impl std::fmt::Display for GetoptError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message("canopy"))
    }
}

impl std::error::Error for GetoptError {}

/// One option occurrence.
#[derive(Debug)]
pub struct Given<A: 'static> {
    pub spec: &'static OptSpec<A>,
    pub value: Option<String>,
}

/// What the word at `args[i]` is.
#[derive(Debug)]
pub enum Word<A: 'static> {
    /// Options read from this word (and maybe its value word), the problem
    /// that stopped reading it if any, and the index of the next word.
    Options {
        given: Vec<Given<A>>,
        problem: Option<GetoptError>,
        next: usize,
    },
    /// Not an option (a positional argument).
    Positional,
    /// `--`: everything after it is positional.
    EndOfOptions,
}

/// Exact long name, else a unique prefix resolved by `rule`.
pub fn find_long<A: PartialEq>(
    table: &'static [OptSpec<A>],
    name: &str,
    rule: Ambiguity,
) -> Result<&'static OptSpec<A>, GetoptError> {
    let named = || table.iter().filter(|s| !s.long.is_empty());
    if let Some(s) = named().find(|s| s.long == name) {
        return Ok(s);
    }
    let matches: Vec<&'static OptSpec<A>> = named()
        .filter(|s| !name.is_empty() && s.long.starts_with(name))
        .collect();
    match (matches.as_slice(), rule) {
        ([], _) => Err(GetoptError::Unrecognized {
            option: name.to_string(),
        }),
        ([only], _) => Ok(only),
        ([first, ..], Ambiguity::FirstWins) => Ok(first),
        ([first, rest @ ..], Ambiguity::SameAction)
            if rest.iter().all(|s| {
                s.action == first.action && s.arg == first.arg && s.short == first.short
            }) =>
        {
            Ok(first)
        }
        (many, _) => Err(GetoptError::Ambiguous {
            option: name.to_string(),
            candidates: many
                .iter()
                .map(|s| format!("'--{}'", s.long))
                .collect::<Vec<_>>()
                .join(" "),
        }),
    }
}

/// Every option in `args` in order, and the positional words; stops at the
/// first problem, as getopt_long callers do.
pub fn read_all<A: PartialEq>(
    table: &'static [OptSpec<A>],
    args: &[String],
    rule: Ambiguity,
) -> Result<(Vec<Given<A>>, Vec<String>), GetoptError> {
    let mut options = Vec::new();
    let mut words = Vec::new();
    let mut i = 0;
    while i < args.len() {
        match read_word(table, args, i, rule) {
            Word::Options {
                given,
                problem,
                next,
            } => {
                options.extend(given);
                if let Some(p) = problem {
                    return Err(p);
                }
                i = next;
            }
            Word::Positional => {
                words.extend(args.get(i).cloned());
                i += 1;
            }
            Word::EndOfOptions => {
                words.extend(args.iter().skip(i + 1).cloned());
                break;
            }
        }
    }
    Ok((options, words))
}

/// Read the word at `args[i]`.
pub fn read_word<A: PartialEq>(
    table: &'static [OptSpec<A>],
    args: &[String],
    i: usize,
    rule: Ambiguity,
) -> Word<A> {
    let Some(arg) = args.get(i) else {
        return Word::Positional;
    };
    if arg == "--" {
        return Word::EndOfOptions;
    }
    if let Some(body) = arg.strip_prefix("--") {
        let (given, problem, next) = match long_option(table, body, args, i, rule) {
            Ok((g, next)) => (vec![g], None, next),
            Err(e) => (Vec::new(), Some(e), i + 1),
        };
        return Word::Options {
            given,
            problem,
            next,
        };
    }
    match arg.strip_prefix('-').filter(|c| !c.is_empty()) {
        Some(cluster) => short_options(table, cluster, args, i),
        None => Word::Positional,
    }
}

fn long_option<A: PartialEq>(
    table: &'static [OptSpec<A>],
    body: &str,
    args: &[String],
    i: usize,
    rule: Ambiguity,
) -> Result<(Given<A>, usize), GetoptError> {
    let (name, inline) = match body.split_once('=') {
        Some((name, value)) => (name, Some(value.to_string())),
        None => (body, None),
    };
    let spec = find_long(table, name, rule)?;
    let (value, next) = match (spec.arg, inline) {
        (ArgKind::Flag, Some(_)) => {
            return Err(GetoptError::UnexpectedArgument { option: spec.long })
        }
        (ArgKind::Flag, None) | (ArgKind::Optional, None) => (None, i + 1),
        (ArgKind::Optional, Some(v)) | (ArgKind::Required, Some(v)) => (Some(v), i + 1),
        (ArgKind::Required, None) => match args.get(i + 1) {
            Some(v) => (Some(v.clone()), i + 2),
            None => return Err(GetoptError::MissingLongArgument { option: spec.long }),
        },
    };
    Ok((Given { spec, value }, next))
}

/// A bundle of short options (`-HQ`, `-J name`, `-Jname`, `-vs KILL`).
fn short_options<A>(
    table: &'static [OptSpec<A>],
    cluster: &str,
    args: &[String],
    i: usize,
) -> Word<A> {
    let mut given = Vec::new();
    for (pos, c) in cluster.char_indices() {
        let Some(spec) = table.iter().find(|s| s.short == Some(c)) else {
            return Word::Options {
                given,
                problem: Some(GetoptError::InvalidShort { option: c }),
                next: i + 1,
            };
        };
        let attached = &cluster[pos + c.len_utf8()..];
        match spec.arg {
            ArgKind::Flag => given.push(Given { spec, value: None }),
            ArgKind::Optional => {
                let value = Some(attached.to_string()).filter(|v| !v.is_empty());
                given.push(Given { spec, value });
                return Word::Options {
                    given,
                    problem: None,
                    next: i + 1,
                };
            }
            ArgKind::Required if !attached.is_empty() => {
                given.push(Given {
                    spec,
                    value: Some(attached.to_string()),
                });
                return Word::Options {
                    given,
                    problem: None,
                    next: i + 1,
                };
            }
            ArgKind::Required => {
                return match args.get(i + 1) {
                    Some(v) => {
                        given.push(Given {
                            spec,
                            value: Some(v.clone()),
                        });
                        Word::Options {
                            given,
                            problem: None,
                            next: i + 2,
                        }
                    }
                    None => Word::Options {
                        given,
                        problem: Some(GetoptError::MissingShortArgument { option: c }),
                        next: i + 1,
                    },
                }
            }
        }
    }
    Word::Options {
        given,
        problem: None,
        next: i + 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum T {
        Name,
        Quiet,
        Verbose,
        Cluster,
        Opt,
    }

    static TABLE: &[OptSpec<T>] = &[
        spec("name", Some('n'), ArgKind::Required, T::Name),
        spec("quiet", Some('Q'), ArgKind::Flag, T::Quiet),
        spec("verbose", Some('v'), ArgKind::Flag, T::Verbose),
        spec("cluster", Some('M'), ArgKind::Required, T::Cluster),
        spec("clusters", Some('M'), ArgKind::Required, T::Cluster),
        spec("nice", None, ArgKind::Optional, T::Opt),
    ];

    fn words(args: &[&str], rule: Ambiguity) -> Vec<(T, Option<String>)> {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        let mut out = Vec::new();
        let mut i = 0;
        while i < args.len() {
            match read_word(TABLE, &args, i, rule) {
                Word::Options {
                    given,
                    problem,
                    next,
                } => {
                    assert_eq!(problem, None);
                    out.extend(given.into_iter().map(|g| (g.spec.action, g.value)));
                    i = next;
                }
                Word::Positional | Word::EndOfOptions => break,
            }
        }
        out
    }

    #[test]
    fn all_value_forms_and_bundles() {
        let s = |v: &str| Some(v.to_string());
        assert_eq!(
            words(
                &["--name=a", "--name", "b", "-nc", "-n", "d", "-Qv", "-Qnx"],
                Ambiguity::Error
            ),
            vec![
                (T::Name, s("a")),
                (T::Name, s("b")),
                (T::Name, s("c")),
                (T::Name, s("d")),
                (T::Quiet, None),
                (T::Verbose, None),
                (T::Quiet, None),
                (T::Name, s("x")),
            ]
        );
        assert_eq!(
            words(&["--nice", "--nice=5"], Ambiguity::Error),
            vec![(T::Opt, None), (T::Opt, s("5"))]
        );
    }

    #[test]
    fn prefixes_follow_the_ambiguity_rule() {
        assert_eq!(
            find_long(TABLE, "qu", Ambiguity::Error).unwrap().action,
            T::Quiet
        );
        assert!(matches!(
            find_long(TABLE, "n", Ambiguity::Error),
            Err(GetoptError::Ambiguous { .. })
        ));
        assert_eq!(
            find_long(TABLE, "n", Ambiguity::FirstWins).unwrap().action,
            T::Name
        );
        assert!(find_long(TABLE, "clu", Ambiguity::Error).is_err());
        assert_eq!(
            find_long(TABLE, "clu", Ambiguity::SameAction)
                .unwrap()
                .action,
            T::Cluster
        );
        assert_eq!(
            find_long(TABLE, "bogus", Ambiguity::Error).unwrap_err(),
            GetoptError::Unrecognized {
                option: "bogus".into()
            }
        );
    }

    #[test]
    fn problems_are_reported_with_what_was_read() {
        let args: Vec<String> = ["-vX"].iter().map(|s| s.to_string()).collect();
        match read_word(TABLE, &args, 0, Ambiguity::Error) {
            Word::Options { given, problem, .. } => {
                assert_eq!(given.len(), 1);
                assert_eq!(problem, Some(GetoptError::InvalidShort { option: 'X' }));
            }
            other => panic!("{other:?}"),
        }
        let args: Vec<String> = ["--quiet=1", "--name"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert!(matches!(
            read_word(TABLE, &args, 0, Ambiguity::Error),
            Word::Options {
                problem: Some(GetoptError::UnexpectedArgument { option: "quiet" }),
                ..
            }
        ));
        assert!(matches!(
            read_word(TABLE, &args, 1, Ambiguity::Error),
            Word::Options {
                problem: Some(GetoptError::MissingLongArgument { option: "name" }),
                ..
            }
        ));
        let args: Vec<String> = ["--", "x"].iter().map(|s| s.to_string()).collect();
        assert!(matches!(
            read_word(TABLE, &args, 0, Ambiguity::Error),
            Word::EndOfOptions
        ));
        assert!(matches!(
            read_word(TABLE, &args, 1, Ambiguity::Error),
            Word::Positional
        ));
    }
}
