//! The one field-table engine behind squeue, `squeue -s`, sinfo and sacct. Each formatter
//! declares its columns once, as a [`FieldTable`] of [`FieldDef`]s (the `%` letter, the
//! long name, the header, the default width and justification, whether `-S` may sort by
//! it); this module turns that table into everything the four share: `%` letter and long
//! name look-ups, the `-o` parser (`%[.][width]letter`), the `-O` parser
//! (`name[:[.]width]`), `-S` sort keys and comparison, `%all`'s letter list, headers,
//! column fitting (justification and truncation) and line rendering.
//!
//! What stays with each formatter is what differs between Slurm's commands: the values
//! (a `value`/`text` function over its own row type), the default layouts, the warnings'
//! wording, and the quirks the golden tests pin (sinfo's auto-sized columns and `#P`
//! sort, `%all`'s separators, sacct's prefix matching and `name%width` lists).
//! Pure: no I/O and no clock.

use std::cmp::Ordering;

use super::time::fmt_date_line;
use super::FormatError;

/// One column a formatter can print: how users name it and how it is titled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FieldDef<C> {
    /// The formatter's own name for the datum; its value function matches on it.
    pub code: C,
    /// The `-o %X` letter, if the column has one.
    pub letter: Option<char>,
    /// The long name: `-O`'s (lower case; users' spelling is lower-cased first) or
    /// sacct's field name (matched by prefix, printed as the header).
    pub name: Option<&'static str>,
    /// The column title.
    pub header: &'static str,
    /// Whether a right-justified column prints the title whole rather than cut: Slurm
    /// never cuts its node-list titles.
    pub whole_header: bool,
    /// Width when the layout gives none (sacct's table; `-O` without `:width` uses 20).
    pub width: usize,
    /// Right-justified unless the layout says otherwise (sacct's table).
    pub right: bool,
    /// Whether `-S` may name it (the others are skipped, as Slurm skips them).
    pub sortable: bool,
}

impl<C: Copy> FieldDef<C> {
    /// A column titled `header`, with no letter, no name, not sortable.
    pub const fn new(code: C, header: &'static str) -> Self {
        Self {
            code,
            letter: None,
            name: None,
            header,
            whole_header: false,
            width: 0,
            right: false,
            sortable: false,
        }
    }

    /// With the `-o` letter `c`.
    pub const fn letter(mut self, c: char) -> Self {
        self.letter = Some(c);
        self
    }

    /// With the long name `name`.
    pub const fn name(mut self, name: &'static str) -> Self {
        self.name = Some(name);
        self
    }

    /// Sortable with `-S`.
    pub const fn sort(mut self) -> Self {
        self.sortable = true;
        self
    }

    /// The title is never cut.
    pub const fn whole_header(mut self) -> Self {
        self.whole_header = true;
        self
    }

    /// A default width and justification.
    pub const fn width(mut self, width: usize, right: bool) -> Self {
        self.width = width;
        self.right = right;
        self
    }
}

/// A formatter's columns, in the order `%all` (or sacct's `-e`) lists them.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FieldTable<C: 'static> {
    pub defs: &'static [FieldDef<C>],
}

impl<C: Copy + PartialEq> FieldTable<C> {
    /// The column with the `-o` letter `c`.
    pub fn by_letter(&self, c: char) -> Option<C> {
        self.defs
            .iter()
            .find(|d| d.letter == Some(c))
            .map(|d| d.code)
    }

    /// The column whose long name is `name` exactly (callers lower-case it).
    pub fn by_name(&self, name: &str) -> Option<C> {
        self.defs
            .iter()
            .find(|d| d.name == Some(name))
            .map(|d| d.code)
    }

    /// The index of the first column whose long name starts with `prefix`, ignoring
    /// ASCII case (sacct's look-up: table order decides between candidates).
    pub fn position_by_prefix(&self, prefix: &str) -> Option<usize> {
        self.defs
            .iter()
            .position(|d| d.name.is_some_and(|n| is_prefix_ci(prefix, n)))
    }

    /// The entry for `code`.
    pub fn def(&self, code: C) -> Option<&'static FieldDef<C>> {
        self.defs.iter().find(|d| d.code == code)
    }

    /// The title of `code`'s column, as a cell.
    pub fn header(&self, code: C) -> Cell {
        match self.def(code) {
            Some(d) if d.whole_header => Cell::whole(d.header),
            Some(d) => Cell::cut(d.header),
            None => Cell::cut(""),
        }
    }

    /// The lines above the rows: the `-l` date line if `date_line`, then the titles
    /// of `items`. Callers skip it for `-h`.
    pub fn push_heading(
        &self,
        out: &mut String,
        items: &[Item<C>],
        date_line: bool,
        now: i64,
    ) -> Result<(), FormatError> {
        if date_line {
            let date = fmt_date_line(now).ok_or(FormatError::TimeOutOfRange { secs: now })?;
            out.push_str(&date);
            out.push('\n');
        }
        render_line_into(out, items, |code, _| self.header(code));
        out.push('\n');
        Ok(())
    }

    /// The letters, in table order (what `%all` prints).
    pub fn letters(&self) -> impl Iterator<Item = char> + '_ {
        self.defs.iter().filter_map(|d| d.letter)
    }

    /// Parses an `-o` format against the table's letters (see [`parse_percent`]).
    pub fn parse_format(&self, format: &str, skip_unknown: bool) -> Parsed<C> {
        parse_percent(format, |c| self.by_letter(c), skip_unknown)
    }

    /// Parses an `-O` list against the table's long names (see [`parse_long_list`]).
    pub fn parse_list(&self, list: &str) -> Parsed<C> {
        parse_long_list(list, |name| self.by_name(name))
    }

    /// Parses `-S`: comma-separated `[+|-]letter` keys, `-` descending. Keys that are
    /// not one sortable letter are skipped, as Slurm skips them. With `syntax`
    /// [`SortSyntax::Sinfo`], blanks around keys are ignored and `#` may precede the
    /// letter (sinfo's "configuration order").
    pub fn parse_sort(&self, spec: &str, syntax: SortSyntax) -> Vec<SortKey<C>> {
        spec.split(',')
            .filter_map(|key| {
                let key = match syntax {
                    SortSyntax::Plain => key,
                    SortSyntax::Sinfo => key.trim(),
                };
                let (descending, rest) = match key.strip_prefix('-') {
                    Some(rest) => (true, rest),
                    None => (false, key.strip_prefix('+').unwrap_or(key)),
                };
                let (conf_order, rest) = match (syntax, rest.strip_prefix('#')) {
                    (SortSyntax::Sinfo, Some(r)) => (true, r),
                    _ => (false, rest),
                };
                let mut chars = rest.chars();
                let (Some(c), None) = (chars.next(), chars.next()) else {
                    return None;
                };
                let def = self.defs.iter().find(|d| d.letter == Some(c))?;
                def.sortable.then_some(SortKey {
                    code: def.code,
                    descending,
                    conf_order,
                })
            })
            .collect()
    }
}

/// Which `-S` grammar a command reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SortSyntax {
    /// squeue's: `[+|-]letter`.
    Plain,
    /// sinfo's: blanks allowed around keys, and `#` for configuration order.
    Sinfo,
}

/// One `-S` key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SortKey<C> {
    pub code: C,
    pub descending: bool,
    /// sinfo's `#`: configuration order rather than the printed value.
    pub conf_order: bool,
}

/// Compares two rows by `keys` in turn, the first unequal key deciding; `Equal` if all
/// tie (callers add their own tie-break). `by` compares one key ascending.
pub(crate) fn compare_keys<C: Copy, R: ?Sized>(
    keys: &[SortKey<C>],
    a: &R,
    b: &R,
    mut by: impl FnMut(&SortKey<C>, &R, &R) -> Ordering,
) -> Ordering {
    keys.iter()
        .map(|k| {
            let ord = by(k, a, b);
            if k.descending {
                ord.reverse()
            } else {
                ord
            }
        })
        .find(|o| o.is_ne())
        .unwrap_or(Ordering::Equal)
}

/// Whether `prefix` starts `full`, ignoring ASCII case.
pub(crate) fn is_prefix_ci(prefix: &str, full: &str) -> bool {
    full.as_bytes()
        .get(..prefix.len())
        .is_some_and(|head| head.eq_ignore_ascii_case(prefix.as_bytes()))
}

/// Widths beyond this are clamped: Slurm reads them with `atoi`, and an
/// absurd width must not make us allocate gigabytes of padding.
pub(crate) const MAX_WIDTH: usize = 4096;

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

    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum Col {
        Id,
        Name,
        Nodes,
    }

    static TABLE: FieldTable<Col> = FieldTable {
        defs: &[
            FieldDef::new(Col::Id, "JOBID")
                .letter('i')
                .name("jobid")
                .sort(),
            FieldDef::new(Col::Name, "NAME").letter('j').name("name"),
            FieldDef::new(Col::Nodes, "NODELIST")
                .letter('N')
                .name("nodelist")
                .sort()
                .whole_header(),
        ],
    };

    #[test]
    fn table_lookups_and_headers() {
        assert_eq!(TABLE.by_letter('j'), Some(Col::Name));
        assert_eq!(TABLE.by_letter('x'), None);
        assert_eq!(TABLE.by_name("nodelist"), Some(Col::Nodes));
        assert_eq!(TABLE.position_by_prefix("NA"), Some(1));
        assert_eq!(TABLE.position_by_prefix("nodex"), None);
        assert_eq!(TABLE.header(Col::Nodes), Cell::whole("NODELIST"));
        assert_eq!(TABLE.header(Col::Id), Cell::cut("JOBID"));
        assert_eq!(TABLE.letters().collect::<String>(), "ijN");
        let p = TABLE.parse_format("%.5i %N", false);
        assert_eq!(
            p.items,
            vec![
                Item::Field(FieldSpec {
                    code: Col::Id,
                    width: Width::Fixed(5),
                    right: true,
                    suffix: " ".to_string()
                }),
                Item::Field(FieldSpec {
                    code: Col::Nodes,
                    width: Width::Fixed(0),
                    right: false,
                    suffix: String::new()
                }),
            ]
        );
        assert_eq!(TABLE.parse_list("NAME,bogus").bad_specs, vec!["bogus"]);
    }

    #[test]
    fn sort_keys_skip_what_cannot_sort() {
        let keys = TABLE.parse_sort("-N,j,+i,ij,#i", SortSyntax::Plain);
        assert_eq!(
            keys.iter()
                .map(|k| (k.code, k.descending))
                .collect::<Vec<_>>(),
            vec![(Col::Nodes, true), (Col::Id, false)]
        );
        let keys = TABLE.parse_sort(" -#i , N", SortSyntax::Sinfo);
        assert_eq!(
            keys,
            vec![
                SortKey {
                    code: Col::Id,
                    descending: true,
                    conf_order: true
                },
                SortKey {
                    code: Col::Nodes,
                    descending: false,
                    conf_order: false
                },
            ]
        );
        let by = |k: &SortKey<Col>, a: &(u32, u32), b: &(u32, u32)| match k.code {
            Col::Id => a.0.cmp(&b.0),
            _ => a.1.cmp(&b.1),
        };
        let keys = TABLE.parse_sort("-N,i", SortSyntax::Plain);
        assert_eq!(compare_keys(&keys, &(1, 5), &(2, 5), by), Ordering::Less);
        assert_eq!(compare_keys(&keys, &(1, 5), &(2, 7), by), Ordering::Greater);
        assert_eq!(compare_keys(&keys, &(1, 5), &(1, 5), by), Ordering::Equal);
    }
}
