//! Filename patterns for a job's standard streams (`sbatch -o/-e/-i`, later
//! `srun`): expands Slurm's `%` fields for one node (and one task) and places a
//! relative result under the job's working directory.
//!
//! This module only computes names. It does not open, create or check files,
//! and it does not decide *which* pattern applies (the default `slurm-%j.out`,
//! stderr joined to stdout, ...): the caller passes the pattern it chose.
//!
//! Rules (Slurm's, see slurm.md §6.2):
//! - `%%` is a literal `%`.
//! - `%A` array master job id (the job id for a non-array job), `%a` array
//!   index (4294967294 for a non-array job), `%b` array index modulo 10,
//!   `%j` job id, `%J` `jobid.stepid` (just the job id for the batch script),
//!   `%N` first node's short name, `%n` node index, `%r` restart count,
//!   `%s` step id (`batch` for the batch script), `%t` task rank,
//!   `%u` user name, `%x` job name.
//! - Digits between `%` and the field zero-pad numeric fields (`%4j` →
//!   `0042`); any width above 9 means 10. Text fields ignore the width.
//! - A backslash anywhere in the pattern turns every substitution off; the
//!   backslashes themselves are dropped.
//! - N.B. an unknown field (`%q`, `%S`: canopy has no SLUIDs) and a `%` at the
//!   very end are copied through unchanged, digits included. Slurm's own
//!   handling of `%<digits><unknown>` is odd (it keeps only the last digit);
//!   copying the text verbatim is easier to reason about.

use std::path::{Path, PathBuf};

/// Slurm's NO_VAL, which `%a` shows for a job that is not part of an array.
pub const NO_ARRAY_INDEX: u32 = 4_294_967_294;

/// Widest zero-padding Slurm honours.
const MAX_WIDTH: usize = 10;

/// What the fields of a pattern expand to, for one node (and task).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PatternContext {
    pub job_id: u32,
    /// `None` for a job that is not an array task.
    pub array_job_id: Option<u32>,
    pub array_task_id: Option<u32>,
    pub job_name: String,
    pub user: String,
    /// Short name of the first node of the job (or step).
    pub first_node: String,
    /// Index of this node in the job's node list.
    pub node_index: u32,
    /// `None` for the batch script.
    pub step_id: Option<u32>,
    /// Task rank; `None` (shown as 0) for the batch script.
    pub task_id: Option<u32>,
    pub restart: u32,
}

/// Expand every `%` field of `pattern` (see the module doc for the rules).
pub fn expand(pattern: &str, ctx: &PatternContext) -> String {
    if pattern.contains('\\') {
        return pattern.chars().filter(|&c| c != '\\').collect();
    }
    let mut out = String::with_capacity(pattern.len() + 16);
    let mut rest = pattern;
    while let Some(pos) = rest.find('%') {
        out.push_str(&rest[..pos]);
        rest = expand_one(&rest[pos + 1..], ctx, &mut out);
    }
    out.push_str(rest);
    out
}

/// Place an expanded name: absolute names stay as they are, relative ones go
/// under the job's working directory.
pub fn resolve(path_after_expand: &str, workdir: &Path) -> PathBuf {
    let path = Path::new(path_after_expand);
    if path.is_absolute() {
        path.to_path_buf()
    } else {
        workdir.join(path)
    }
}

/// Expand the field that follows a `%` (`after` starts right after it), append
/// the result to `out`, and return the text after the field.
fn expand_one<'a>(after: &'a str, ctx: &PatternContext, out: &mut String) -> &'a str {
    let digits_len = after.bytes().take_while(u8::is_ascii_digit).count();
    let (digits, tail) = after.split_at(digits_len);
    let mut chars = tail.chars();
    let Some(field) = chars.next() else {
        // A trailing `%` (with or without digits) is plain text.
        out.push('%');
        out.push_str(digits);
        return tail;
    };
    if field == '%' && digits.is_empty() {
        out.push('%');
        return chars.as_str();
    }
    let width = pad_width(digits);
    match field_value(field, ctx) {
        Some(Field::Number(n)) => out.push_str(&format!("{n:0width$}")),
        Some(Field::JobStep(job, step)) => out.push_str(&format!("{job:0width$}.{step}")),
        Some(Field::Text(s)) => out.push_str(&s),
        None => {
            out.push('%');
            out.push_str(digits);
            out.push(field);
        }
    }
    chars.as_str()
}

fn pad_width(digits: &str) -> usize {
    if digits.is_empty() {
        return 0;
    }
    // Any width above 9, even one too long to parse, means "maximum".
    digits
        .parse::<usize>()
        .ok()
        .filter(|w| *w <= 9)
        .unwrap_or(MAX_WIDTH)
}

enum Field {
    Number(u32),
    /// `%J` inside a step: the job id takes the padding, the step id does not.
    JobStep(u32, u32),
    Text(String),
}

fn field_value(field: char, ctx: &PatternContext) -> Option<Field> {
    let array_index = ctx.array_task_id.unwrap_or(NO_ARRAY_INDEX);
    Some(match field {
        'A' => Field::Number(ctx.array_job_id.unwrap_or(ctx.job_id)),
        'a' => Field::Number(array_index),
        'b' => Field::Number(array_index % 10),
        'j' => Field::Number(ctx.job_id),
        'J' => match ctx.step_id {
            Some(step) => Field::JobStep(ctx.job_id, step),
            None => Field::Number(ctx.job_id),
        },
        'N' => Field::Text(ctx.first_node.clone()),
        'n' => Field::Number(ctx.node_index),
        'r' => Field::Number(ctx.restart),
        's' => match ctx.step_id {
            Some(step) => Field::Number(step),
            None => Field::Text("batch".to_string()),
        },
        't' => Field::Number(ctx.task_id.unwrap_or(0)),
        'u' => Field::Text(ctx.user.clone()),
        'x' => Field::Text(ctx.job_name.clone()),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch_ctx() -> PatternContext {
        PatternContext {
            job_id: 42,
            array_job_id: None,
            array_task_id: None,
            job_name: "train".to_string(),
            user: "alice".to_string(),
            first_node: "n001".to_string(),
            node_index: 0,
            step_id: None,
            task_id: None,
            restart: 0,
        }
    }

    fn array_step_ctx() -> PatternContext {
        PatternContext {
            job_id: 107,
            array_job_id: Some(100),
            array_task_id: Some(13),
            node_index: 3,
            step_id: Some(2),
            task_id: Some(5),
            restart: 1,
            ..batch_ctx()
        }
    }

    #[test]
    fn default_names() {
        assert_eq!(expand("slurm-%j.out", &batch_ctx()), "slurm-42.out");
        assert_eq!(
            expand("slurm-%A_%a.out", &array_step_ctx()),
            "slurm-100_13.out"
        );
    }

    #[test]
    fn every_field_for_an_array_step() {
        let ctx = array_step_ctx();
        assert_eq!(
            expand("%A|%a|%b|%j|%J|%N|%n|%r|%s|%t|%u|%x", &ctx),
            "100|13|3|107|107.2|n001|3|1|2|5|alice|train"
        );
    }

    #[test]
    fn batch_script_fields() {
        let ctx = batch_ctx();
        assert_eq!(expand("%A", &ctx), "42");
        assert_eq!(expand("%a", &ctx), "4294967294");
        assert_eq!(expand("%b", &ctx), "4");
        assert_eq!(expand("%J", &ctx), "42");
        assert_eq!(expand("%s", &ctx), "batch");
        assert_eq!(expand("%t", &ctx), "0");
    }

    #[test]
    fn zero_padding() {
        let ctx = array_step_ctx();
        assert_eq!(expand("job%4j.out", &ctx), "job0107.out");
        assert_eq!(expand("%2j-%2t", &ctx), "107-05");
        assert_eq!(expand("%6J", &ctx), "000107.2");
        assert_eq!(expand("%3a", &ctx), "013");
        // Width above 9 is capped at 10.
        assert_eq!(expand("%12j", &ctx), "0000000107");
        assert_eq!(expand("%99999999999999999999j", &ctx), "0000000107");
        // Text fields ignore the width.
        assert_eq!(expand("%5N-%5u-%5x", &ctx), "n001-alice-train");
    }

    #[test]
    fn percent_escape_and_unknown_fields() {
        let ctx = batch_ctx();
        assert_eq!(expand("100%%-%j", &ctx), "100%-42");
        assert_eq!(expand("%%j", &ctx), "%j");
        assert_eq!(expand("a%qb", &ctx), "a%qb");
        assert_eq!(expand("a%3qb", &ctx), "a%3qb");
        assert_eq!(expand("%S", &ctx), "%S");
        assert_eq!(expand("end%", &ctx), "end%");
        assert_eq!(expand("end%4", &ctx), "end%4");
        assert_eq!(expand("no fields", &ctx), "no fields");
        assert_eq!(expand("", &ctx), "");
    }

    #[test]
    fn backslash_disables_substitution() {
        let ctx = batch_ctx();
        assert_eq!(expand("\\\\slurm-%j.out", &ctx), "slurm-%j.out");
        assert_eq!(expand("out-%j\\.txt", &ctx), "out-%j.txt");
    }

    #[test]
    fn multibyte_text_survives() {
        let ctx = batch_ctx();
        assert_eq!(expand("ü-%j-é%", &ctx), "ü-42-é%");
    }

    #[test]
    fn resolve_relative_and_absolute() {
        let wd = Path::new("/home/alice/run");
        assert_eq!(
            resolve("logs/slurm-42.out", wd),
            PathBuf::from("/home/alice/run/logs/slurm-42.out")
        );
        assert_eq!(resolve("/dev/null", wd), PathBuf::from("/dev/null"));
    }
}
