//! The batch script and its `#SBATCH` directives: loading the script (a file, found on
//! `PATH` as Slurm does, standard input or `--wrap`), the checks Slurm makes on it, and the
//! directive scan (Slurm's quoting and where the scan stops) that yields the directives'
//! [`Layer`].
//!
//! Does not: parse option values (`options` and `values` do) or decide precedence between
//! sources (the parent module does).

use super::*;

/// Where the script text came from.
#[derive(Debug)]
pub(super) enum Origin {
    File { given: String, absolute: PathBuf },
    Stdin,
    Wrap,
}

#[derive(Debug)]
pub(super) struct Script {
    pub(super) text: String,
    pub(super) origin: Origin,
    pub(super) args: Vec<String>,
}

impl Script {
    /// How error messages name the script.
    fn label(&self) -> &str {
        match &self.origin {
            Origin::File { given, .. } => given,
            Origin::Stdin => "(stdin)",
            Origin::Wrap => "(wrap)",
        }
    }

    pub(super) fn default_job_name(&self) -> String {
        match &self.origin {
            Origin::File { given, .. } => Path::new(given)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| given.clone()),
            Origin::Stdin => "sbatch".to_string(),
            Origin::Wrap => "wrap".to_string(),
        }
    }

    /// scontrol's `Command=`.
    pub(super) fn command(&self) -> String {
        match &self.origin {
            Origin::File { absolute, .. } => absolute.to_string_lossy().into_owned(),
            Origin::Stdin | Origin::Wrap => "(null)".to_string(),
        }
    }
}

/// Pick the script: `--wrap`, else the first positional word, else stdin.
pub(super) fn load_script(
    cmd: &Layer,
    positional: &[String],
    stdin_script: Option<String>,
    ctx: &SubmitContext,
) -> Result<Script, SbatchError> {
    if let Some(command) = &cmd.wrap {
        if !positional.is_empty() {
            return Err(SbatchError::WrapWithScriptArgs);
        }
        return Ok(Script {
            text: wrap_script(command),
            origin: Origin::Wrap,
            args: Vec::new(),
        });
    }
    let Some((given, args)) = positional.split_first() else {
        let text = stdin_script.ok_or(SbatchError::NoScript)?;
        return Ok(Script {
            text,
            origin: Origin::Stdin,
            args: Vec::new(),
        });
    };
    if given == ":" {
        return Err(SbatchError::HetJobUnsupported {
            marker: "':'".to_string(),
        });
    }
    let (absolute, bytes) = read_script_file(given, ctx)?;
    let text = String::from_utf8(bytes).map_err(|_| SbatchError::ScriptNotUtf8 {
        path: given.clone(),
    })?;
    Ok(Script {
        text,
        origin: Origin::File {
            given: given.clone(),
            absolute,
        },
        args: args.to_vec(),
    })
}

/// The script Slurm builds around a `--wrap` command.
pub(super) fn wrap_script(command: &str) -> String {
    format!("#!/bin/sh\n# Written by sbatch --wrap.\n\n{command}\n")
}

/// Read the script named `given`: relative to the current directory first
/// and, for a bare file name not found there, along the caller's PATH (as
/// Slurm does). N.B. Slurm checks PATH before the current directory; canopy
/// prefers the file the user can see in front of them.
pub(super) fn read_script_file(
    given: &str,
    ctx: &SubmitContext,
) -> Result<(PathBuf, Vec<u8>), SbatchError> {
    let local = absolute_path(&ctx.cwd, given);
    let first_error = match fs::read(&local) {
        Ok(bytes) => return Ok((local, bytes)),
        Err(e) => e,
    };
    if first_error.kind() == io::ErrorKind::NotFound && !given.contains('/') {
        for dir in path_dirs(ctx) {
            let candidate = absolute_path(&ctx.cwd, &dir).join(given);
            if let Ok(bytes) = fs::read(&candidate) {
                return Ok((candidate, bytes));
            }
        }
    }
    Err(SbatchError::ScriptUnreadable {
        path: given.to_string(),
        reason: first_error.to_string(),
    })
}

pub(super) fn path_dirs(ctx: &SubmitContext) -> Vec<String> {
    lookup(&ctx.env, "PATH")
        .map(|p| {
            p.split(':')
                .filter(|d| !d.is_empty())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// `cwd/path` (or `path` if absolute) without `.` components. `..` is kept:
/// resolving it lexically would be wrong across symlinks.
pub(super) fn absolute_path(cwd: &Path, path: &str) -> PathBuf {
    cwd.join(path).components().collect()
}

/// The checks Slurm makes before submitting a script, in its order.
pub(super) fn check_script(text: &str) -> Result<(), SbatchError> {
    if text.is_empty() {
        return Err(SbatchError::EmptyScript);
    }
    if text.trim().is_empty() {
        return Err(SbatchError::BlankScript);
    }
    if !text.starts_with("#!") {
        return Err(SbatchError::MissingShebang);
    }
    if text.contains('\0') {
        return Err(SbatchError::NulInScript);
    }
    if text.contains("\r\n") {
        return Err(SbatchError::DosLineBreaks);
    }
    Ok(())
}

/// Collect the words of the script's `#SBATCH` (and legacy `#SLURM`)
/// directives, in order, up to the first command line.
pub(super) fn directive_words(
    script: &Script,
    warnings: &mut Vec<String>,
) -> Result<Vec<String>, SbatchError> {
    let mut words = Vec::new();
    for (index, line) in script.text.split('\n').enumerate() {
        let rest = if let Some(rest) = line.strip_prefix("#SBATCH") {
            rest
        } else if let Some(rest) = line.strip_prefix("#SLURM") {
            push_once(
                warnings,
                "sbatch: error: Change from #SLURM to #SBATCH in your script and verify \
                 the options are valid in sbatch"
                    .to_string(),
            );
            rest
        } else {
            match line.trim_start().chars().next() {
                None | Some('#') => continue,
                Some(_) => break,
            }
        };
        let line_words = split_directive(rest, script.label(), index + 1, line)?;
        if let Some(marker) = line_words
            .iter()
            .find(|w| w.eq_ignore_ascii_case("hetjob") || w.eq_ignore_ascii_case("packjob"))
        {
            return Err(SbatchError::HetJobUnsupported {
                marker: format!("#SBATCH {marker}"),
            });
        }
        words.extend(line_words);
    }
    Ok(words)
}

/// Split the text after `#SBATCH` like a shell would, ending it at the first
/// `#` that is neither quoted nor escaped (even inside a word, as Slurm does).
pub(super) fn split_directive(
    rest: &str,
    file: &str,
    line_no: usize,
    line: &str,
) -> Result<Vec<String>, SbatchError> {
    let mut quote: Option<char> = None;
    let mut escaped = false;
    let mut end = rest.len();
    for (i, c) in rest.char_indices() {
        if escaped {
            escaped = false;
            continue;
        }
        match (quote, c) {
            (Some('\''), '\'') | (Some('"'), '"') => quote = None,
            (Some('"'), '\\') | (None, '\\') => escaped = true,
            (Some(_), _) => {}
            (None, '\'' | '"') => quote = Some(c),
            (None, '#') => {
                end = i;
                break;
            }
            (None, _) => {}
        }
    }
    if let Some(quote) = quote {
        return Err(SbatchError::UnmatchedQuote {
            file: file.to_string(),
            line: line_no,
            quote,
            text: line.to_string(),
        });
    }
    shlex::split(&rest[..end]).ok_or_else(|| SbatchError::DirectiveSyntax {
        file: file.to_string(),
        line: line_no,
        text: line.to_string(),
    })
}

/// The directives' options. Like Slurm, parsing stops at the first word that
/// is not an option; canopy says so instead of dropping the rest silently.
pub(super) fn script_layer(
    script: &Script,
    warnings: &mut Vec<String>,
) -> Result<Layer, SbatchError> {
    let words = directive_words(script, warnings)?;
    let (given, stop) = split_options(&words)?;
    if let Some(stray) = words.get(stop) {
        warnings.push(format!(
            "sbatch: warning: #SBATCH directives from '{stray}' on are ignored: \
             '{stray}' is not an option"
        ));
    }
    let mut layer = Layer::default();
    for g in &given {
        apply(
            &mut layer,
            g.spec,
            g.value.as_deref(),
            Source::Script,
            warnings,
        )?;
    }
    if layer.wrap.is_some() {
        warnings.push("sbatch: warning: --wrap in a batch script is ignored".to_string());
    }
    Ok(layer)
}
