//! The lexical layer of slurm.conf: physical lines → logical lines (comments cut,
//! continuations joined, CRLF stripped) → `Key=Value` items, with `Include` files inlined in
//! place. Every logical line remembers its file and the number of its first physical line, so
//! later errors point at the right place.
//!
//! It knows no key's meaning: apart from `Include` (and reading `ClusterName` for the `%c`
//! include modifier) interpretation belongs to the parent module.

use std::path::{Path, PathBuf};
use std::rc::Rc;

use super::ConfigError;

/// Deepest chain of nested `Include`s accepted; a chain this deep is a mistake, not a design.
pub const MAX_INCLUDE_DEPTH: usize = 16;

/// The assignment operator of an item. slurm.conf accepts `+= -= *= /=` for a few keys;
/// canopy reads them so it can refuse them by name on keys it uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Set,
    Add,
    Sub,
    Mul,
    Div,
}

impl Op {
    pub fn text(self) -> &'static str {
        match self {
            Op::Set => "=",
            Op::Add => "+=",
            Op::Sub => "-=",
            Op::Mul => "*=",
            Op::Div => "/=",
        }
    }
}

/// One `Key=Value` pair; quotes and escapes already removed from the value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    pub key: String,
    pub op: Op,
    pub value: String,
}

/// Where a logical line came from: its file and first physical line (1-based).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Loc {
    pub file: Rc<Path>,
    pub line: usize,
}

impl Loc {
    /// An error at this location about `key`.
    pub fn error(&self, key: &str, message: impl Into<String>) -> ConfigError {
        ConfigError {
            file: self.file.to_path_buf(),
            line: self.line,
            key: key.into(),
            message: message.into(),
        }
    }
}

impl std::fmt::Display for Loc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.file.display(), self.line)
    }
}

/// A non-empty logical line split into items.
#[derive(Debug, Clone)]
pub struct Line {
    pub loc: Loc,
    pub items: Vec<Item>,
}

/// Split `text` (the contents of `path`) into logical lines, inlining `Include`s.
pub fn read_lines(text: &str, path: &Path) -> Result<Vec<Line>, ConfigError> {
    let mut reader = Reader::default();
    reader.read(text, Rc::from(path))?;
    Ok(reader.lines)
}

#[derive(Default)]
struct Reader {
    lines: Vec<Line>,
    /// Latest `ClusterName` value seen, for the `%c` include modifier. It is used as
    /// written (not lower-cased), as Slurm does.
    cluster_name: Option<String>,
    /// Files being read, outermost first, to catch include cycles.
    stack: Vec<PathBuf>,
}

impl Reader {
    fn read(&mut self, text: &str, file: Rc<Path>) -> Result<(), ConfigError> {
        self.stack.push(identity(&file));
        for (line, logical) in logical_lines(text) {
            let loc = Loc {
                file: file.clone(),
                line,
            };
            if let Some(rest) = include_argument(&logical) {
                self.include(&loc, rest)?;
                continue;
            }
            let items = tokenize(&logical).map_err(|e| loc.error(e.key(), e.to_string()))?;
            if let Some(name) = items.iter().rev().find(|i| is_key(i, "ClusterName")) {
                self.cluster_name = Some(name.value.clone());
            }
            if !items.is_empty() {
                self.lines.push(Line { loc, items });
            }
        }
        self.stack.pop();
        Ok(())
    }

    fn include(&mut self, loc: &Loc, argument: &str) -> Result<(), ConfigError> {
        let target = self.include_target(loc, argument)?;
        if self.stack.len() >= MAX_INCLUDE_DEPTH {
            return Err(loc.error(
                "Include",
                format!(
                    "Include {}: includes nest deeper than {MAX_INCLUDE_DEPTH} files",
                    target.display()
                ),
            ));
        }
        if self.stack.contains(&identity(&target)) {
            return Err(loc.error(
                "Include",
                format!(
                    "Include {}: include cycle (the file is already being read)",
                    target.display()
                ),
            ));
        }
        let text = std::fs::read_to_string(&target).map_err(|e| {
            loc.error(
                "Include",
                format!("Include {}: cannot read: {e}", target.display()),
            )
        })?;
        self.read(&text, Rc::from(target.as_path()))
    }

    /// The path an `Include` names: unquoted, `%c` replaced, relative to the including file.
    fn include_target(&self, loc: &Loc, argument: &str) -> Result<PathBuf, ConfigError> {
        let mut words = Words::new(argument);
        let name = match (words.next_word(), words.next_word()) {
            (Ok(Some(name)), Ok(None)) if !name.is_empty() => name,
            (Err(Unterminated), _) | (_, Err(Unterminated)) => {
                return Err(loc.error("Include", format!("Include{argument}: unterminated quote")))
            }
            _ => {
                return Err(loc.error(
                    "Include",
                    format!("Include {argument}: expected exactly one file name"),
                ))
            }
        };
        let name = if name.contains("%c") {
            let cluster = self.cluster_name.as_deref().ok_or_else(|| {
                loc.error(
                    "Include",
                    format!("Include {name}: %c needs ClusterName to be set on an earlier line"),
                )
            })?;
            name.replace("%c", cluster)
        } else {
            name
        };
        let base = loc.file.parent().unwrap_or(Path::new(""));
        Ok(base.join(name))
    }
}

/// A file's identity for cycle detection: its canonical path when it exists on disk.
fn identity(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

fn is_key(item: &Item, key: &str) -> bool {
    item.key.eq_ignore_ascii_case(key)
}

/// The rest of a line whose first word is `Include` (a bare `Include` gives `""`, which
/// is then reported as a missing file name).
fn include_argument(logical: &str) -> Option<&str> {
    let line = logical.trim_start();
    let word = line.get(..7)?;
    let rest = line.get(7..)?;
    let word_ends = rest.is_empty() || rest.starts_with(|c: char| c.is_whitespace());
    (word.eq_ignore_ascii_case("include") && word_ends).then_some(rest)
}

/// Join physical lines into logical ones: `(first physical line number, text)`.
/// Escapes stay in the text (the tokenizer resolves them); comments and the joining
/// backslashes are gone.
fn logical_lines(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut pending: Option<(usize, String)> = None;
    for (index, raw) in text.split('\n').enumerate() {
        let raw = raw.strip_suffix('\r').unwrap_or(raw);
        let body = strip_comment(raw).trim_end();
        let (content, continues) = match body.strip_suffix('\\') {
            Some(head) if trailing_backslashes(body) % 2 == 1 => (head, true),
            _ => (body, false),
        };
        let entry = pending.get_or_insert_with(|| (index + 1, String::new()));
        entry.1.push_str(content);
        if !continues {
            out.extend(pending.take());
        }
    }
    // A file that ends on a continuation simply ends the line there.
    out.extend(pending);
    out
}

fn trailing_backslashes(s: &str) -> usize {
    s.bytes().rev().take_while(|&b| b == b'\\').count()
}

/// Cut at the first `#` that is not escaped by a backslash.
fn strip_comment(raw: &str) -> &str {
    let bytes = raw.as_bytes();
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        match b {
            // Skipping one byte is safe for UTF-8: continuation bytes never equal `#` or `\`.
            b'\\' => i += 2,
            b'#' => return &raw[..i],
            _ => i += 1,
        }
    }
    raw
}

/// What went wrong splitting a logical line into items.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LexError {
    #[error(
        "{key}: unterminated quote (note that '#' starts a comment even inside quotes; \
         write \\# for a literal one)"
    )]
    UnterminatedQuote { key: String },
    #[error("'{word}' is not a Key=Value pair")]
    MissingEquals { word: String },
    #[error("'={value}' has no key before the '='")]
    MissingKey { value: String },
}

impl LexError {
    fn key(&self) -> &str {
        match self {
            LexError::UnterminatedQuote { key } => key,
            LexError::MissingEquals { word } => word,
            LexError::MissingKey { .. } => "",
        }
    }
}

/// Split a logical line into `Key=Value` items; spaces around `=` are allowed.
pub fn tokenize(logical: &str) -> Result<Vec<Item>, LexError> {
    let mut words = Words::new(logical);
    let mut items = Vec::new();
    while let Some(key) = words.next_key() {
        if key.is_empty() {
            words.eat('=');
            let value = words.next_word().ok().flatten().unwrap_or_default();
            return Err(LexError::MissingKey { value });
        }
        let (key, op) = split_operator(key);
        words.skip_blanks();
        if !words.eat('=') {
            return Err(LexError::MissingEquals { word: key.into() });
        }
        words.skip_blanks();
        let value = words
            .next_word()
            .map_err(|_| LexError::UnterminatedQuote { key: key.into() })?
            .unwrap_or_default();
        items.push(Item {
            key: key.into(),
            op,
            value,
        });
    }
    Ok(items)
}

/// `Key+` followed by `=` is the key `Key` with operator `+=` (likewise `-`, `*`, `/`).
fn split_operator(key: &str) -> (&str, Op) {
    let op = match key.chars().last() {
        Some('+') => Op::Add,
        Some('-') => Op::Sub,
        Some('*') => Op::Mul,
        Some('/') => Op::Div,
        _ => return (key, Op::Set),
    };
    (&key[..key.len() - 1], op)
}

/// A quote opened in a word was never closed.
#[derive(Debug)]
struct Unterminated;

/// A cursor over a logical line.
struct Words<'a> {
    rest: &'a str,
}

impl<'a> Words<'a> {
    fn new(text: &'a str) -> Self {
        Words { rest: text }
    }

    fn skip_blanks(&mut self) {
        self.rest = self.rest.trim_start();
    }

    fn eat(&mut self, c: char) -> bool {
        match self.rest.strip_prefix(c) {
            Some(rest) => {
                self.rest = rest;
                true
            }
            None => false,
        }
    }

    /// The next key: text up to a blank or `=`; `None` at the end of the line.
    fn next_key(&mut self) -> Option<&'a str> {
        self.skip_blanks();
        if self.rest.is_empty() {
            return None;
        }
        let end = self
            .rest
            .find(|c: char| c == '=' || c.is_whitespace())
            .unwrap_or(self.rest.len());
        let (key, rest) = self.rest.split_at(end);
        self.rest = rest;
        Some(key)
    }

    /// The next blank-delimited word with quotes and `\x` escapes resolved; `Ok(None)` at
    /// the end of the line.
    fn next_word(&mut self) -> Result<Option<String>, Unterminated> {
        self.skip_blanks();
        if self.rest.is_empty() {
            return Ok(None);
        }
        let mut word = String::new();
        let mut quoted = false;
        let mut chars = self.rest.char_indices();
        let mut end = self.rest.len();
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => match chars.next() {
                    Some((_, escaped)) => word.push(escaped),
                    None => word.push('\\'),
                },
                '"' => quoted = !quoted,
                c if c.is_whitespace() && !quoted => {
                    end = i;
                    break;
                }
                c => word.push(c),
            }
        }
        self.rest = &self.rest[end..];
        if quoted {
            return Err(Unterminated);
        }
        Ok(Some(word))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(key: &str, value: &str) -> Item {
        Item {
            key: key.into(),
            op: Op::Set,
            value: value.into(),
        }
    }

    fn lines(text: &str) -> Vec<(usize, String)> {
        logical_lines(text)
    }

    #[test]
    fn tokenizes_pairs_with_spacing_and_quotes() {
        assert_eq!(
            tokenize("A=1  B = 2\tC= \"x y\" D=\"\"").unwrap(),
            [
                item("A", "1"),
                item("B", "2"),
                item("C", "x y"),
                item("D", "")
            ]
        );
        assert_eq!(
            tokenize("SchedulerParameters=bf_window=100,defer").unwrap(),
            [item("SchedulerParameters", "bf_window=100,defer")]
        );
        assert_eq!(tokenize("E=").unwrap(), [item("E", "")]);
        assert_eq!(tokenize("   ").unwrap(), []);
    }

    #[test]
    fn escapes_make_characters_literal() {
        assert_eq!(
            tokenize(r#"R=a\ b Q=\"x P=\\"#).unwrap(),
            [item("R", "a b"), item("Q", "\"x"), item("P", "\\")]
        );
    }

    #[test]
    fn operators_are_split_from_keys() {
        let items = tokenize("Features+=gpu X-=1 Y*=2 Z/=3").unwrap();
        let ops: Vec<(&str, Op)> = items.iter().map(|i| (i.key.as_str(), i.op)).collect();
        assert_eq!(
            ops,
            [
                ("Features", Op::Add),
                ("X", Op::Sub),
                ("Y", Op::Mul),
                ("Z", Op::Div)
            ]
        );
        assert_eq!(Op::Add.text(), "+=");
    }

    #[test]
    fn lexical_errors() {
        assert_eq!(
            tokenize("A=1 lonely").unwrap_err(),
            LexError::MissingEquals {
                word: "lonely".into()
            }
        );
        assert_eq!(
            tokenize("Reason=\"power down").unwrap_err(),
            LexError::UnterminatedQuote {
                key: "Reason".into()
            }
        );
        assert_eq!(
            tokenize("=5").unwrap_err(),
            LexError::MissingKey { value: "5".into() }
        );
    }

    #[test]
    fn comments_are_cut_unless_escaped() {
        assert_eq!(strip_comment("A=1 # note"), "A=1 ");
        assert_eq!(strip_comment(r"A=x\#y # note"), r"A=x\#y ");
        assert_eq!(strip_comment(r"A=x\\# note"), r"A=x\\");
        assert_eq!(strip_comment("# whole line"), "");
        assert_eq!(strip_comment("é#"), "é");
    }

    #[test]
    fn continuations_join_and_keep_the_first_line_number() {
        let text = "A=1\nB=2 \\\n  C=3\\  \r\nD=4\n\nE=5 \\\\\nF=6";
        assert_eq!(
            lines(text),
            [
                (1, "A=1".to_string()),
                (2, "B=2   C=3D=4".to_string()),
                (5, String::new()),
                (6, r"E=5 \\".to_string()),
                (7, "F=6".to_string()),
            ]
        );
    }

    #[test]
    fn comment_before_backslash_stops_continuation() {
        assert_eq!(
            lines("A=1 # not continued \\\nB=2"),
            [(1, "A=1".to_string()), (2, "B=2".to_string())]
        );
        assert_eq!(
            lines("A=1 \\ # continued\nB=2"),
            [(1, "A=1 B=2".to_string())]
        );
    }

    #[test]
    fn file_ending_in_a_continuation_ends_the_line() {
        assert_eq!(lines("A=1 \\"), [(1, "A=1 ".to_string())]);
    }

    #[test]
    fn include_word_detection() {
        assert_eq!(include_argument("Include a.conf"), Some(" a.conf"));
        assert_eq!(include_argument("  INCLUDE\tb"), Some("\tb"));
        assert_eq!(include_argument("include"), Some(""));
        assert_eq!(include_argument("Include=a"), None);
        assert_eq!(include_argument("Includes a"), None);
        assert_eq!(include_argument("Inc"), None);
    }

    #[test]
    fn read_lines_skips_blank_lines_and_numbers_physical_lines() {
        let got = read_lines("# c\n\nA=1\nB=2 \\\nC=3\n", Path::new("x.conf")).unwrap();
        let locs: Vec<(String, usize)> = got
            .iter()
            .map(|l| (l.loc.file.display().to_string(), l.loc.line))
            .collect();
        assert_eq!(locs, [("x.conf".into(), 3), ("x.conf".into(), 4)]);
        assert_eq!(got[1].items, [item("B", "2"), item("C", "3")]);
    }

    #[test]
    fn lexical_errors_carry_file_and_line() {
        let err = read_lines("A=1\nB=\"open", Path::new("s.conf")).unwrap_err();
        assert_eq!((err.line, err.key.as_str()), (2, "B"));
        assert!(err
            .to_string()
            .starts_with("s.conf:2: B: unterminated quote"));
    }

    #[test]
    fn include_argument_errors() {
        for (text, want) in [
            ("Include", "expected exactly one file name"),
            ("Include a b", "expected exactly one file name"),
            ("Include \"a", "unterminated quote"),
            ("Include x%c.conf", "%c needs ClusterName"),
        ] {
            let err = read_lines(text, Path::new("/nonexistent/s.conf")).unwrap_err();
            assert_eq!((err.line, err.key.as_str()), (1, "Include"), "{text}");
            assert!(err.message.contains(want), "{text}: {err}");
        }
    }

    #[test]
    fn include_of_a_missing_file_names_the_path() {
        let err = read_lines("\nInclude gone.conf", Path::new("/nonexistent/s.conf")).unwrap_err();
        assert_eq!(err.line, 2);
        assert!(
            err.message
                .starts_with("Include /nonexistent/gone.conf: cannot read:"),
            "{err}"
        );
    }
}
