//! Pure text formatting for `squeue`, `sinfo` and `scontrol show`: turns the
//! job, node and partition records the controller reports into exactly the
//! text Slurm prints. This module owns the pieces the three share: the
//! `%[.][width]code` format parser (and the `-O name[:[.]width]` list parser),
//! column justification and truncation, memory sizes and name lookups.
//!
//! It does no I/O beyond passwd/group look-ups and reads no clock: callers pass
//! `now`. It does not parse command lines or talk to the controller; warnings
//! about bad format letters are returned for the caller to print on stderr.

pub mod sacct;
pub mod scontrol;
pub mod sinfo;
pub mod squeue;
pub mod squeue_steps;
pub mod time;

use std::fmt;

use thiserror::Error;

use crate::wire::types::JobInfo;

/// Input Slurm refuses outright (it exits 1 without printing a table).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum FormatError {
    /// A `squeue -t` entry that names no job state.
    #[error("Invalid job state specified: {state}")]
    InvalidJobState { state: String },
    /// A `sinfo -t` entry that names no node state.
    #[error("Bad state string: \"{state}\"")]
    InvalidNodeState { state: String },
    /// `now` is outside the calendar, so the `-l` date line cannot be printed.
    #[error("time {secs} is out of range for a local date")]
    TimeOutOfRange { secs: i64 },
}

/// A format problem Slurm reports on stderr and then carries on past: the bad
/// `%` token is echoed literally (or a bad `-O` name dropped) and the table is
/// printed anyway, exit 0. The CLI prints these, prefixed with the command name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FormatWarning {
    /// squeue: an unknown `%` letter or `-O` field name.
    InvalidJobField { spec: String },
    /// sinfo: an unknown `%` letter or `-O` field name.
    InvalidNodeField { spec: String },
}

impl fmt::Display for FormatWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FormatWarning::InvalidJobField { spec } => {
                write!(f, "Invalid job format specification: {spec}")
            }
            FormatWarning::InvalidNodeField { spec } => {
                write!(f, "Invalid node format specification: {spec}")
            }
        }
    }
}

/// Widths beyond this are clamped: Slurm reads them with `atoi`, and an
/// absurd width must not make us allocate gigabytes of padding.
const MAX_WIDTH: usize = 4096;

/// Default column width of a `-O` field given without `:width`.
const LONG_DEFAULT_WIDTH: usize = 20;

/// How wide a column is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Width {
    /// Pad to, and truncate at, this many characters; 0 means "as is".
    Fixed(usize),
    /// The longest value in the column (at least the given minimum): the
    /// default sinfo layouts' partition and node-name columns (`%#P`).
    Auto(usize),
}

/// One `%` field: which datum, how wide, which side, and the literal text
/// that follows it up to the next `%`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FieldSpec<C> {
    pub code: C,
    pub width: Width,
    pub right: bool,
    pub suffix: String,
}

/// A parsed format: literal text and fields, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Item<C> {
    Literal(String),
    Field(FieldSpec<C>),
}

/// The result of parsing a user format: the items, plus the specs Slurm would
/// complain about (a letter for `-o`, a name for `-O`).
pub(crate) struct Parsed<C> {
    pub items: Vec<Item<C>>,
    pub bad_specs: Vec<String>,
}

/// Parses an `-o` style format. Text before the first `%` is a literal prefix.
/// Like Slurm (which splits on `%` with `strtok`), runs of `%` collapse, so
/// `%%` is *not* an escape. Each token is `[.][digits]letter[suffix]`. An
/// unknown letter is echoed as `%token` and reported, unless `skip_unknown`
/// (used for `%all`, where Slurm silently drops letters it lacks).
pub(crate) fn parse_percent<C>(
    format: &str,
    resolve: impl Fn(char) -> Option<C>,
    skip_unknown: bool,
) -> Parsed<C> {
    let mut parsed = Parsed {
        items: Vec::new(),
        bad_specs: Vec::new(),
    };
    let (prefix, rest) = format.split_once('%').unwrap_or((format, ""));
    if !prefix.is_empty() {
        parsed.items.push(Item::Literal(prefix.to_string()));
    }
    for token in rest.split('%').filter(|t| !t.is_empty()) {
        let (right, after_dot) = match token.strip_prefix('.') {
            Some(r) => (true, r),
            None => (false, token),
        };
        let digits = after_dot.len()
            - after_dot
                .trim_start_matches(|c: char| c.is_ascii_digit())
                .len();
        let (width_text, tail) = after_dot.split_at(digits);
        let mut chars = tail.chars();
        let code = chars.next().and_then(|c| resolve(c).map(|code| (c, code)));
        match code {
            Some((_, code)) => parsed.items.push(Item::Field(FieldSpec {
                code,
                width: Width::Fixed(parse_width(width_text)),
                right,
                suffix: chars.as_str().to_string(),
            })),
            None if skip_unknown => {}
            None => {
                parsed.items.push(Item::Literal(format!("%{token}")));
                parsed
                    .bad_specs
                    .push(tail.chars().next().map(String::from).unwrap_or_default());
            }
        }
    }
    parsed
}

/// Parses a `-O` list: comma-separated `name[:[.][width][suffix]]`, names
/// case-insensitive. Without `:` the width is 20; with `:` and no digits it is
/// 0 (no padding). Unknown names are dropped and reported.
pub(crate) fn parse_long_list<C>(list: &str, resolve: impl Fn(&str) -> Option<C>) -> Parsed<C> {
    let mut parsed = Parsed {
        items: Vec::new(),
        bad_specs: Vec::new(),
    };
    for token in list.split(',').filter(|t| !t.is_empty()) {
        let (name, spec) = match token.split_once(':') {
            Some((name, spec)) => (name, Some(spec)),
            None => (token, None),
        };
        let Some(code) = resolve(&name.to_ascii_lowercase()) else {
            parsed.bad_specs.push(name.to_string());
            continue;
        };
        let field = match spec {
            None => FieldSpec {
                code,
                width: Width::Fixed(LONG_DEFAULT_WIDTH),
                right: false,
                suffix: String::new(),
            },
            Some(spec) => {
                let (right, rest) = match spec.strip_prefix('.') {
                    Some(r) => (true, r),
                    None => (false, spec),
                };
                let digits =
                    rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
                let (width_text, suffix) = rest.split_at(digits);
                FieldSpec {
                    code,
                    width: Width::Fixed(parse_width(width_text)),
                    right,
                    suffix: suffix.to_string(),
                }
            }
        };
        parsed.items.push(Item::Field(field));
    }
    parsed
}

/// Digits to a width, clamped to [`MAX_WIDTH`]; empty means 0.
fn parse_width(digits: &str) -> usize {
    digits
        .bytes()
        .fold(0usize, |acc, d| {
            acc.saturating_mul(10).saturating_add(usize::from(d - b'0'))
        })
        .min(MAX_WIDTH)
}

/// A value about to go into a column, and whether a right-justified column
/// may cut it: Slurm never cuts some values (node lists, elapsed times) when
/// they are right-justified, though a left-justified column always does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Cell {
    pub text: String,
    pub cut: bool,
}

impl Cell {
    /// A value the column truncates to its width.
    pub fn cut(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            cut: true,
        }
    }

    /// A value a right-justified column prints whole.
    pub fn whole(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            cut: false,
        }
    }
}

/// Fits a value into a column the way Slurm's `_print_str` does: width 0
/// leaves it alone; a left-justified column cuts it to `width` and pads on
/// the right; a right-justified one pads on the left, cutting only if allowed.
pub(crate) fn fit_into(out: &mut String, cell: &Cell, width: usize, right: bool) {
    let text = cell.text.as_str();
    if width == 0 {
        out.push_str(text);
        return;
    }
    // Written straight into the line (no per-cell String): a 10,000-job
    // listing fits some 80,000 cells.
    let shown = if right && !cell.cut {
        text
    } else {
        text.char_indices()
            .nth(width)
            .map_or(text, |(cut_at, _)| &text[..cut_at])
    };
    let pad = width.saturating_sub(shown.chars().count());
    if right {
        out.extend(std::iter::repeat_n(' ', pad));
        out.push_str(shown);
    } else {
        out.push_str(shown);
        out.extend(std::iter::repeat_n(' ', pad));
    }
}

/// Resolves `Auto` widths against the rows about to be printed, so a column
/// is as wide as its longest value (never less than its minimum).
pub(crate) fn resolve_auto_widths<C: Copy + PartialEq>(
    items: &[Item<C>],
    mut longest: impl FnMut(C) -> usize,
) -> Vec<Item<C>> {
    items
        .iter()
        .map(|item| match item {
            Item::Field(f) => match f.width {
                Width::Auto(min) => Item::Field(FieldSpec {
                    width: Width::Fixed(longest(f.code).max(min)),
                    ..f.clone()
                }),
                Width::Fixed(_) => item.clone(),
            },
            Item::Literal(_) => item.clone(),
        })
        .collect()
}

/// Renders one output line (without its newline) from items, asking `cell`
/// for each field's value given its code and column width.
pub(crate) fn render_line<C: Copy>(
    items: &[Item<C>],
    cell: impl FnMut(C, usize) -> Cell,
) -> String {
    let mut line = String::new();
    render_line_into(&mut line, items, cell);
    line
}

/// [`render_line`], appended to `out`.
pub(crate) fn render_line_into<C: Copy>(
    out: &mut String,
    items: &[Item<C>],
    mut cell: impl FnMut(C, usize) -> Cell,
) {
    for item in items {
        match item {
            Item::Literal(text) => out.push_str(text),
            Item::Field(f) => {
                let width = match f.width {
                    Width::Fixed(w) | Width::Auto(w) => w,
                };
                fit_into(out, &cell(f.code, width), width, f.right);
                out.push_str(&f.suffix);
            }
        }
    }
}

/// Empty text is Slurm's NULL.
pub(crate) fn or_null(text: &str) -> &str {
    if text.is_empty() {
        "(null)"
    } else {
        text
    }
}

/// A size in MiB as Slurm prints it: the largest binary unit that divides it
/// exactly (`1000M`, `16G`, `2T`), and a bare `0` for nothing.
pub fn fmt_mem_mb(mb: u64) -> String {
    if mb == 0 {
        return "0".to_string();
    }
    let mut value = mb;
    let mut units = ['M', 'G', 'T', 'P', 'E'].iter().peekable();
    let mut unit = 'M';
    while let Some(&u) = units.next() {
        unit = u;
        if value % 1024 != 0 || units.peek().is_none() {
            break;
        }
        value /= 1024;
    }
    format!("{value}{unit}")
}

/// A job's TRES list (`cpu=2,mem=2000M,node=2,billing=2`) in Slurm's TRES
/// order; billing defaults to the CPU count and zero memory is left out.
pub(crate) fn job_tres(j: &JobInfo) -> String {
    let nodes = squeue::node_count(j);
    let mut parts = vec![format!("cpu={}", j.num_cpus)];
    let mem = j.mem_per_node_mb.saturating_mul(u64::from(nodes));
    if mem > 0 {
        parts.push(format!("mem={}", fmt_mem_mb(mem)));
    }
    parts.push(format!("node={nodes}"));
    parts.push(format!("billing={}", j.num_cpus));
    parts.join(",")
}

/// The group name for `gid`, if the system knows one.
pub(crate) fn group_name(gid: u32) -> Option<String> {
    nix::unistd::Group::from_gid(nix::unistd::Gid::from_raw(gid))
        .ok()
        .flatten()
        .map(|g| g.name)
}

/// The uid of user `name`, if the system knows one.
pub(crate) fn user_uid(name: &str) -> Option<u32> {
    nix::unistd::User::from_name(name)
        .ok()
        .flatten()
        .map(|u| u.uid.as_raw())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn letters(c: char) -> Option<char> {
        c.is_ascii_lowercase().then_some(c)
    }

    fn field(code: char, width: usize, right: bool, suffix: &str) -> Item<char> {
        Item::Field(FieldSpec {
            code,
            width: Width::Fixed(width),
            right,
            suffix: suffix.to_string(),
        })
    }

    #[test]
    fn parses_prefix_width_justification_and_suffix() {
        let p = parse_percent(" pre%.18i %9j|%x", letters, false);
        assert_eq!(
            p.items,
            vec![
                Item::Literal(" pre".to_string()),
                field('i', 18, true, " "),
                field('j', 9, false, "|"),
                field('x', 0, false, ""),
            ]
        );
        assert!(p.bad_specs.is_empty());
    }

    #[test]
    fn format_without_percent_is_all_prefix() {
        let p = parse_percent("just text", letters, false);
        assert_eq!(p.items, vec![Item::Literal("just text".to_string())]);
    }

    #[test]
    fn double_percent_collapses_like_strtok() {
        // Slurm: `a%%b %i` prints "a", then field b with suffix " ", then i.
        let p = parse_percent("a%%b %i", letters, false);
        assert_eq!(
            p.items,
            vec![
                Item::Literal("a".to_string()),
                field('b', 0, false, " "),
                field('i', 0, false, "")
            ]
        );
    }

    #[test]
    fn unknown_letter_is_echoed_and_reported() {
        let p = parse_percent("%_|%i", letters, false);
        assert_eq!(
            p.items,
            vec![Item::Literal("%_|".to_string()), field('i', 0, false, "")]
        );
        assert_eq!(p.bad_specs, vec!["_".to_string()]);
        let p = parse_percent("%10 %i", letters, false);
        assert_eq!(p.items[0], Item::Literal("%10 ".to_string()));
        assert_eq!(p.bad_specs, vec![" ".to_string()]);
    }

    #[test]
    fn trailing_width_without_letter_is_echoed() {
        let p = parse_percent("%i%5", letters, false);
        assert_eq!(p.items[1], Item::Literal("%5".to_string()));
        assert_eq!(p.bad_specs, vec![String::new()]);
    }

    #[test]
    fn skip_unknown_drops_token_and_suffix() {
        let p = parse_percent("%a|%_|%b", letters, true);
        assert_eq!(
            p.items,
            vec![field('a', 0, false, "|"), field('b', 0, false, "")]
        );
        assert!(p.bad_specs.is_empty());
    }

    #[test]
    fn huge_width_is_clamped() {
        let p = parse_percent("%99999999999999999999999i", letters, false);
        assert_eq!(p.items, vec![field('i', MAX_WIDTH, false, "")]);
    }

    #[test]
    fn long_list_widths_and_suffixes() {
        let resolve = |n: &str| match n {
            "jobid" => Some('i'),
            "state" => Some('T'),
            "reason" => Some('r'),
            _ => None,
        };
        let p = parse_long_list("JobID,State:.9,reason: ,Foo:4,,JOBID:3x", resolve);
        assert_eq!(
            p.items,
            vec![
                field('i', 20, false, ""),
                field('T', 9, true, ""),
                field('r', 0, false, " "),
                field('i', 3, false, "x"),
            ]
        );
        assert_eq!(p.bad_specs, vec!["Foo".to_string()]);
    }

    #[test]
    fn fit_truncates_and_pads() {
        assert_eq!(fit(&Cell::cut("(NonZeroExitCode)"), 3, false), "(No");
        assert_eq!(fit(&Cell::cut("8"), 3, true), "  8");
        assert_eq!(fit(&Cell::cut("long"), 5, false), "long ");
        assert_eq!(fit(&Cell::cut("CANCELLED"), 8, true), "CANCELLE");
        assert_eq!(fit(&Cell::cut("anything"), 0, true), "anything");
        assert_eq!(fit(&Cell::cut("日本語テキスト"), 3, false), "日本語");
    }

    #[test]
    fn whole_cells_overflow_only_when_right_justified() {
        assert_eq!(fit(&Cell::whole("1-00:00:00"), 9, true), "1-00:00:00");
        assert_eq!(fit(&Cell::whole("5:00"), 9, true), "     5:00");
        assert_eq!(fit(&Cell::whole("n[1-2]"), 3, false), "n[1");
    }

    #[test]
    fn auto_width_takes_longest_with_minimum() {
        let items = vec![Item::Field(FieldSpec {
            code: 'P',
            width: Width::Auto(9),
            right: false,
            suffix: String::new(),
        })];
        assert_eq!(
            resolve_auto_widths(&items, |_| 4),
            vec![field('P', 9, false, "")]
        );
        assert_eq!(
            resolve_auto_widths(&items, |_| 21),
            vec![field('P', 21, false, "")]
        );
    }

    fn fit(cell: &Cell, width: usize, right: bool) -> String {
        let mut out = String::new();
        fit_into(&mut out, cell, width, right);
        out
    }

    #[test]
    fn render_line_joins_literals_and_cells() {
        let items = vec![
            Item::Literal(">".to_string()),
            field('i', 4, true, ","),
            field('j', 0, false, ""),
        ];
        let line = render_line(&items, |c, _| Cell::cut(if c == 'i' { "7" } else { "job" }));
        assert_eq!(line, ">   7,job");
    }

    #[test]
    fn memory_uses_largest_exact_unit() {
        assert_eq!(fmt_mem_mb(0), "0");
        assert_eq!(fmt_mem_mb(100), "100M");
        assert_eq!(fmt_mem_mb(1000), "1000M");
        assert_eq!(fmt_mem_mb(1536), "1536M");
        assert_eq!(fmt_mem_mb(2048), "2G");
        assert_eq!(fmt_mem_mb(16 * 1024), "16G");
        assert_eq!(fmt_mem_mb(3 * 1024 * 1024), "3T");
        assert_eq!(fmt_mem_mb(15000), "15000M");
    }

    #[test]
    fn warnings_read_like_slurm() {
        let w = FormatWarning::InvalidJobField {
            spec: "_".to_string(),
        };
        assert_eq!(w.to_string(), "Invalid job format specification: _");
        let w = FormatWarning::InvalidNodeField {
            spec: "Q".to_string(),
        };
        assert_eq!(w.to_string(), "Invalid node format specification: Q");
        let e = FormatError::InvalidJobState {
            state: "foo".to_string(),
        };
        assert_eq!(e.to_string(), "Invalid job state specified: foo");
        let e = FormatError::InvalidNodeState {
            state: "foo".to_string(),
        };
        assert_eq!(e.to_string(), "Bad state string: \"foo\"");
    }

    #[test]
    fn name_lookups_resolve_root() {
        assert_eq!(group_name(0).as_deref(), Some("root"));
        assert_eq!(user_uid("root"), Some(0));
        assert_eq!(user_uid("no-such-user-canopy-test"), None);
    }
}
