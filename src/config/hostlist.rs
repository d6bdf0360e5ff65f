//! Slurm hostlist expressions: expanding `tux[0-3],io[01-02]` into names and compressing
//! names back into the shortest ranged form, the way `scontrol show hostnames`,
//! `show hostlist` and `show hostlistsorted` do.
//!
//! This module is pure string work: it knows nothing about which nodes exist (callers check
//! names against the configuration) and it never resolves `feature{x}` or `/file` arguments.
//!
//! Grammar accepted by [`expand`]: terms separated by `,`, space, tab or newline (outside
//! brackets); each term is literal text with any number of `[RANGES]` groups, RANGES being a
//! comma list of `N` or `LO-HI`. Zero padding comes from the length of the `LO` text, so
//! `n[001-100]` keeps three digits and `n[1-10]` none. Several groups expand left-most slowest.
//! Output keeps input order and is not deduplicated.

use thiserror::Error;

/// Most names one expression may expand to; stops a typo such as `n[1-99999999]` from
/// allocating gigabytes before anyone can notice.
pub const MAX_HOSTS_PER_EXPR: usize = 1_000_000;

/// Most bytes of name text one expression may expand to. The name count alone does not
/// bound memory: a long literal times a large range (`<20,000 x's>[1-65536]`, 20 KB of
/// input) asked for over a gigabyte. 64 MiB is a million names of 64 characters.
pub const MAX_EXPANDED_BYTES: u64 = 64 << 20;

/// Most names one `LO-HI` range may hold (Slurm's own limit is 64K per range).
pub const MAX_HOSTS_PER_RANGE: u64 = 65_536;

/// Longest digit run treated as a number. 18 digits always fit in a `u64`, so neither
/// parsing nor `HI + 1` can overflow.
const MAX_DIGITS: usize = 18;

/// Why a hostlist expression could not be expanded. Every variant names the term (one
/// comma-separated element of the expression) and, where narrower, the offending text.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum HostlistError {
    #[error("hostlist term '{term}': range '{range}' runs backwards ({lo} > {hi})")]
    Reversed {
        term: String,
        range: String,
        lo: u64,
        hi: u64,
    },
    #[error(
        "hostlist term '{term}': '{range}' is not a range \
         (expected N or LO-HI, non-negative integers of at most {MAX_DIGITS} digits)"
    )]
    BadRange { term: String, range: String },
    #[error("hostlist term '{term}': '[' has no matching ']'")]
    Unclosed { term: String },
    #[error("hostlist term '{term}': ']' has no matching '['")]
    StrayClose { term: String },
    #[error("hostlist term '{term}': '[' inside brackets (ranges cannot nest)")]
    Nested { term: String },
    #[error("hostlist term '{term}': empty range inside '[...]'")]
    EmptyRange { term: String },
    #[error(
        "hostlist term '{term}': range '{range}' holds {count} names \
         (at most {MAX_HOSTS_PER_RANGE} per range)"
    )]
    RangeTooLarge {
        term: String,
        range: String,
        count: u64,
    },
    #[error("hostlist term '{term}' takes the expression past {MAX_HOSTS_PER_EXPR} names")]
    TooManyHosts { term: String },
    #[error(
        "hostlist term '{term}' takes the expression past {MAX_EXPANDED_BYTES} bytes of names"
    )]
    TooLarge { term: String },
}

/// One `LO-HI` (or single `N`) range; `width` is the zero-pad width taken from the LO text.
#[derive(Debug, Clone, Copy)]
struct Range {
    lo: u64,
    hi: u64,
    width: usize,
}

impl Range {
    fn count(self) -> u64 {
        self.hi - self.lo + 1
    }
}

/// A term split into literal text and bracket groups.
#[derive(Debug)]
enum Segment<'a> {
    Literal(&'a str),
    Group(Vec<Range>),
}

/// Expand a hostlist expression into names, in order, duplicates kept.
pub fn expand(expr: &str) -> Result<Vec<String>, HostlistError> {
    let mut names = Vec::new();
    let mut bytes: u64 = 0;
    for term in split_terms(expr) {
        let segments = parse_term(term)?;
        let count = term_count(term, &segments)?;
        if count > (MAX_HOSTS_PER_EXPR - names.len()) as u64 {
            return Err(HostlistError::TooManyHosts { term: term.into() });
        }
        // `count` is at most a million and a name's length at most the term's length
        // plus 18 digits per group, so neither product nor sum can overflow a u64.
        bytes += count * name_len(&segments);
        if bytes > MAX_EXPANDED_BYTES {
            return Err(HostlistError::TooLarge { term: term.into() });
        }
        names.reserve(count as usize);
        emit(&segments, &mut names);
    }
    Ok(names)
}

fn is_separator(c: char) -> bool {
    matches!(c, ',' | ' ' | '\t' | '\n' | '\r')
}

/// Split at separators outside brackets; empty terms (`a,,b`, trailing comma) are dropped.
fn split_terms(expr: &str) -> impl Iterator<Item = &str> {
    let mut depth = 0usize;
    expr.split(move |c: char| {
        match c {
            '[' => depth += 1,
            ']' => depth = depth.saturating_sub(1),
            _ => {}
        }
        depth == 0 && is_separator(c)
    })
    .filter(|t| !t.is_empty())
}

fn parse_term(term: &str) -> Result<Vec<Segment<'_>>, HostlistError> {
    let mut segments = Vec::new();
    let mut rest = term;
    while !rest.is_empty() {
        let open = rest.find(['[', ']']);
        match open {
            None => {
                segments.push(Segment::Literal(rest));
                rest = "";
            }
            Some(i) if rest[i..].starts_with(']') => {
                return Err(HostlistError::StrayClose { term: term.into() })
            }
            Some(i) => {
                if i > 0 {
                    segments.push(Segment::Literal(&rest[..i]));
                }
                let inner = &rest[i + 1..];
                let close = inner
                    .find(['[', ']'])
                    .ok_or_else(|| HostlistError::Unclosed { term: term.into() })?;
                if inner[close..].starts_with('[') {
                    return Err(HostlistError::Nested { term: term.into() });
                }
                segments.push(Segment::Group(parse_group(term, &inner[..close])?));
                rest = &inner[close + 1..];
            }
        }
    }
    Ok(segments)
}

fn parse_group(term: &str, body: &str) -> Result<Vec<Range>, HostlistError> {
    body.split(',').map(|r| parse_range(term, r)).collect()
}

fn parse_range(term: &str, text: &str) -> Result<Range, HostlistError> {
    if text.is_empty() {
        return Err(HostlistError::EmptyRange { term: term.into() });
    }
    let bad = || HostlistError::BadRange {
        term: term.into(),
        range: text.into(),
    };
    let (lo_text, hi_text) = text.split_once('-').unwrap_or((text, text));
    let lo = parse_bound(lo_text).ok_or_else(bad)?;
    let hi = parse_bound(hi_text).ok_or_else(bad)?;
    if lo > hi {
        return Err(HostlistError::Reversed {
            term: term.into(),
            range: text.into(),
            lo,
            hi,
        });
    }
    let range = Range {
        lo,
        hi,
        width: lo_text.len(),
    };
    if range.count() > MAX_HOSTS_PER_RANGE {
        return Err(HostlistError::RangeTooLarge {
            term: term.into(),
            range: text.into(),
            count: range.count(),
        });
    }
    Ok(range)
}

/// A bound is 1..=MAX_DIGITS ASCII digits; a sign or anything else is rejected.
fn parse_bound(text: &str) -> Option<u64> {
    let valid = !text.is_empty() && text.len() <= MAX_DIGITS;
    if valid && text.bytes().all(|b| b.is_ascii_digit()) {
        text.parse().ok()
    } else {
        None
    }
}

/// Number of names a term expands to, checked against the per-expression cap.
fn term_count(term: &str, segments: &[Segment]) -> Result<u64, HostlistError> {
    let too_many = || HostlistError::TooManyHosts { term: term.into() };
    let mut count: u64 = 1;
    for seg in segments {
        if let Segment::Group(ranges) = seg {
            let group: u64 = ranges.iter().map(|r| r.count()).sum();
            count = count.checked_mul(group).ok_or_else(too_many)?;
            if count > MAX_HOSTS_PER_EXPR as u64 {
                return Err(too_many());
            }
        }
    }
    Ok(count)
}

/// The longest name a term expands to: its literals plus, per group, the widest value.
fn name_len(segments: &[Segment]) -> u64 {
    segments
        .iter()
        .map(|seg| match seg {
            Segment::Literal(text) => text.len(),
            Segment::Group(ranges) => ranges
                .iter()
                .map(|r| r.width.max(decimal_len(r.hi)))
                .max()
                .unwrap_or(0),
        })
        .sum::<usize>() as u64
}

/// Every combination of the groups' values, left-most group slowest. An odometer rather
/// than recursion: a term may hold thousands of groups (`n[1][1][1]...`), and recursing
/// once per segment overflowed the stack on such input.
fn emit(segments: &[Segment], out: &mut Vec<String>) {
    let groups: Vec<&[Range]> = segments
        .iter()
        .filter_map(|seg| match seg {
            Segment::Group(ranges) => Some(ranges.as_slice()),
            Segment::Literal(_) => None,
        })
        .collect();
    // Per group: which range, and the value within it. A group with no range yields
    // no names (parse_group never builds one; this keeps indexing below total).
    let mut at: Vec<(usize, u64)> = Vec::with_capacity(groups.len());
    for ranges in &groups {
        match ranges.first() {
            Some(first) => at.push((0, first.lo)),
            None => return,
        }
    }
    let mut buf = String::new();
    loop {
        buf.clear();
        let mut g = 0;
        for seg in segments {
            match seg {
                Segment::Literal(text) => buf.push_str(text),
                Segment::Group(ranges) => {
                    let (r, n) = at[g];
                    push_padded(&mut buf, n, ranges[r].width);
                    g += 1;
                }
            }
        }
        out.push(buf.clone());
        // Advance the right-most group; carry leftwards when it wraps.
        let mut g = groups.len();
        loop {
            let Some(prev) = g.checked_sub(1) else {
                return;
            };
            g = prev;
            let ranges = groups[g];
            let (r, n) = &mut at[g];
            if *n < ranges[*r].hi {
                *n += 1;
                break;
            }
            if *r + 1 < ranges.len() {
                *r += 1;
                *n = ranges[*r].lo;
                break;
            }
            (*r, *n) = (0, ranges[0].lo);
        }
    }
}

fn push_padded(buf: &mut String, n: u64, width: usize) {
    use std::fmt::Write;
    // Writing into a String cannot fail.
    let _ = write!(buf, "{n:0width$}");
}

/// A name split into its non-numeric prefix and trailing digits.
struct Numbered<'a> {
    prefix: &'a str,
    digits: &'a str,
    value: u64,
}

/// Split off the trailing digits; `None` for names that do not end in a digit (or whose
/// digit run is too long to be a number), which are then printed as-is.
fn split_numbered(name: &str) -> Option<Numbered<'_>> {
    let prefix = name.trim_end_matches(|c: char| c.is_ascii_digit());
    let digits = &name[prefix.len()..];
    let value = parse_bound(digits)?;
    Some(Numbered {
        prefix,
        digits,
        value,
    })
}

fn decimal_len(mut n: u64) -> usize {
    let mut len = 1;
    while n >= 10 {
        n /= 10;
        len += 1;
    }
    len
}

/// True when [`expand`] would print `value` as exactly `digits` in a range whose LO text has
/// `width` characters: the digit string must be `value` padded to `width`, no more, no less.
fn renders_as(value: u64, digits: &str, width: usize) -> bool {
    digits.len() == width.max(decimal_len(value))
}

/// Compress names into a ranged hostlist, keeping input order (`scontrol show hostlist`).
///
/// Adjacent names with the same prefix share one bracket; within it a range grows while the
/// next number is one more and prints with the same zero padding, so `tux2,tux1,tux2` gives
/// `tux[2,1-2]` and `n9,n10` gives `n[9-10]`. A lone name is left unbracketed, and names not
/// ending in a digit are listed as they are. Empty names are skipped. `expand` of the result
/// returns the input (for names without `,[]` or blanks, which no hostname contains).
pub fn compress(names: &[impl AsRef<str>]) -> String {
    let mut out = String::new();
    let mut run: Vec<Numbered> = Vec::new();
    for name in names.iter().map(AsRef::as_ref).filter(|n| !n.is_empty()) {
        match split_numbered(name) {
            Some(num) => {
                if run.first().is_some_and(|r| r.prefix != num.prefix) {
                    flush_run(&mut out, &mut run);
                }
                run.push(num);
            }
            None => {
                flush_run(&mut out, &mut run);
                push_item(&mut out, name);
            }
        }
    }
    flush_run(&mut out, &mut run);
    out
}

/// Compress after sorting by prefix then number (`scontrol show hostlistsorted`);
/// duplicates are kept, so `tux2,tux1,tux2` gives `tux[1-2,2]`.
pub fn compress_sorted(names: &[impl AsRef<str>]) -> String {
    let mut sorted: Vec<&str> = names.iter().map(AsRef::as_ref).collect();
    sorted.sort_by_cached_key(|&name| match split_numbered(name) {
        Some(n) => (n.prefix, Some((n.value, n.digits.len()))),
        None => (name, None),
    });
    compress(&sorted)
}

fn push_item(out: &mut String, item: &str) {
    if !out.is_empty() {
        out.push(',');
    }
    out.push_str(item);
}

fn flush_run(out: &mut String, run: &mut Vec<Numbered>) {
    match run.as_slice() {
        [] => {}
        [one] => {
            push_item(out, one.prefix);
            out.push_str(one.digits);
        }
        [first, ..] => {
            push_item(out, first.prefix);
            out.push('[');
            push_ranges(out, run);
            out.push(']');
        }
    }
    run.clear();
}

fn push_ranges(out: &mut String, run: &[Numbered]) {
    let mut i = 0;
    while let Some(lo) = run.get(i) {
        let width = lo.digits.len();
        let mut hi = lo;
        let mut j = i + 1;
        while let Some(next) = run.get(j) {
            if next.value != hi.value + 1 || !renders_as(next.value, next.digits, width) {
                break;
            }
            hi = next;
            j += 1;
        }
        if i > 0 {
            out.push(',');
        }
        out.push_str(lo.digits);
        if j > i + 1 {
            out.push('-');
            out.push_str(hi.digits);
        }
        i = j;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ex(expr: &str) -> Vec<String> {
        expand(expr).unwrap()
    }

    #[test]
    fn expands_plain_lists_with_every_separator() {
        assert_eq!(ex("a,b c\td\ne"), ["a", "b", "c", "d", "e"]);
        assert_eq!(ex(""), Vec::<String>::new());
        assert_eq!(ex("a,,b,"), ["a", "b"]);
    }

    #[test]
    fn expands_ranges_and_singles() {
        assert_eq!(ex("n[1-3,5]"), ["n1", "n2", "n3", "n5"]);
        assert_eq!(ex("n[7]"), ["n7"]);
        assert_eq!(ex("[1-2]"), ["1", "2"]);
        assert_eq!(ex("n[1-2]-ib"), ["n1-ib", "n2-ib"]);
    }

    #[test]
    fn zero_padding_comes_from_lo_text() {
        let names = ex("n[001-100]");
        assert_eq!(names.len(), 100);
        assert_eq!(names[0], "n001");
        assert_eq!(names[99], "n100");
        assert_eq!(ex("n[8-10]"), ["n8", "n9", "n10"]);
        assert_eq!(ex("n[08-10]"), ["n08", "n09", "n10"]);
    }

    #[test]
    fn several_groups_expand_leftmost_slowest() {
        assert_eq!(
            ex("r[0-1]_n[0-2]"),
            ["r0_n0", "r0_n1", "r0_n2", "r1_n0", "r1_n1", "r1_n2"]
        );
    }

    #[test]
    fn keeps_order_and_duplicates() {
        assert_eq!(ex("b1,a[1-2],b1"), ["b1", "a1", "a2", "b1"]);
    }

    #[test]
    fn separators_inside_brackets_do_not_split() {
        assert_eq!(ex("n[1,3] m2"), ["n1", "n3", "m2"]);
    }

    #[test]
    fn reversed_range_is_an_error() {
        let err = expand("n[5-3]").unwrap_err();
        assert_eq!(
            err,
            HostlistError::Reversed {
                term: "n[5-3]".into(),
                range: "5-3".into(),
                lo: 5,
                hi: 3
            }
        );
        assert!(err.to_string().contains("'5-3'"));
    }

    #[test]
    fn negative_or_non_numeric_bounds_are_errors() {
        for (expr, range) in [
            ("n[-1]", "-1"),
            ("n[1--3]", "1--3"),
            ("n[a-3]", "a-3"),
            ("n[1-]", "1-"),
            ("n[+1]", "+1"),
            ("n[1234567890123456789]", "1234567890123456789"),
        ] {
            match expand(expr) {
                Err(HostlistError::BadRange { range: r, .. }) => assert_eq!(r, range, "{expr}"),
                other => panic!("{expr}: {other:?}"),
            }
        }
    }

    #[test]
    fn bracket_structure_errors() {
        assert!(matches!(
            expand("ok,n[1-3"),
            Err(HostlistError::Unclosed { term }) if term == "n[1-3"
        ));
        assert!(matches!(
            expand("n1-3]"),
            Err(HostlistError::StrayClose { term }) if term == "n1-3]"
        ));
        assert!(matches!(
            expand("n[1-2]]"),
            Err(HostlistError::StrayClose { .. })
        ));
        assert!(matches!(
            expand("n[1[2]]"),
            Err(HostlistError::Nested { term }) if term == "n[1[2]]"
        ));
    }

    #[test]
    fn empty_ranges_are_errors() {
        for expr in ["n[]", "n[1,]", "n[,1]"] {
            assert!(
                matches!(expand(expr), Err(HostlistError::EmptyRange { .. })),
                "{expr}"
            );
        }
    }

    #[test]
    fn caps_are_enforced() {
        assert_eq!(ex("n[1-65536]").len(), 65_536);
        assert!(matches!(
            expand("n[0-65536]"),
            Err(HostlistError::RangeTooLarge { count: 65_537, .. })
        ));
        // 1000 * 1000 is exactly the cap; one more name is over it.
        assert_eq!(ex("a[1-1000]b[1-1000]").len(), MAX_HOSTS_PER_EXPR);
        assert!(matches!(
            expand("a[1-1000]b[1-1000],x"),
            Err(HostlistError::TooManyHosts { term }) if term == "x"
        ));
        assert!(matches!(
            expand("a[1-65536]b[1-65536]c[1-65536]d[1-65536]"),
            Err(HostlistError::TooManyHosts { .. })
        ));
    }

    #[test]
    fn long_names_times_many_are_refused_by_size() {
        // Found by tests/fuzz: 20 KB of input expanded to 1.3 GB of names.
        let long = format!("{}[1-65536]", "x".repeat(20_000));
        assert!(matches!(expand(&long), Err(HostlistError::TooLarge { .. })));
        // The same across terms: each is fine alone, together they are not.
        let half = format!("{}[1-32768]", "y".repeat(1_100));
        assert_eq!(ex(&half).len(), 32_768);
        assert!(matches!(
            expand(&format!("{half},{half}")),
            Err(HostlistError::TooLarge { term }) if term == half
        ));
        // A million short names stay within both caps.
        assert_eq!(ex("a[1-1000]b[1-1000]").len(), MAX_HOSTS_PER_EXPR);
    }

    #[test]
    fn many_groups_in_one_term_do_not_overflow_the_stack() {
        // Found by tests/fuzz: expansion recursed once per segment.
        let expr = format!("n{}", "[1]".repeat(100_000));
        assert_eq!(ex(&expr), vec![format!("n{}", "1".repeat(100_000))]);
        assert_eq!(ex("a[1-2]b[3,5]c"), ["a1b3c", "a1b5c", "a2b3c", "a2b5c"]);
    }

    #[test]
    fn compress_golden_cases() {
        let cases: &[(&[&str], &str)] = &[
            (&["n1", "n2", "n3", "n5"], "n[1-3,5]"),
            (&["n1"], "n1"),
            (&["tux2", "tux1", "tux2"], "tux[2,1-2]"),
            (&["n001", "n002"], "n[001-002]"),
            (&["n9", "n10", "n11"], "n[9-11]"),
            (&["n08", "n09", "n10"], "n[08-10]"),
            (&["n09", "n10", "n010"], "n[09-10,010]"),
            (&["n1", "n1-ib", "n2"], "n1,n1-ib,n2"),
            (&["a1", "b1", "a2"], "a1,b1,a2"),
            (&["head", "login"], "head,login"),
            (&["r1n5", "r1n6", "r2n5"], "r1n[5-6],r2n5"),
            (&["7", "8"], "[7-8]"),
            (&["", "n1", ""], "n1"),
        ];
        for (names, want) in cases {
            assert_eq!(compress(names), *want, "{names:?}");
        }
        let none: [&str; 0] = [];
        assert_eq!(compress(&none), "");
    }

    #[test]
    fn compress_sorted_sorts_by_prefix_then_number() {
        assert_eq!(compress_sorted(&["tux2", "tux1", "tux2"]), "tux[1-2,2]");
        assert_eq!(
            compress_sorted(&["n10", "b", "n9", "a3", "n1"]),
            "a3,b,n[1,9-10]"
        );
        assert_eq!(compress_sorted(&["n2", "n02", "n1"]), "n[1-2,02]");
    }

    /// Small deterministic generator so property tests replay identically.
    struct Lcg(u64);
    impl Lcg {
        fn next(&mut self, bound: u64) -> u64 {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (self.0 >> 33) % bound
        }
    }

    fn random_name(rng: &mut Lcg) -> String {
        const PREFIXES: [&str; 6] = ["n", "tux", "r1n", "gpu-", "", "io"];
        let prefix = PREFIXES[rng.next(PREFIXES.len() as u64) as usize];
        match rng.next(10) {
            0 => format!("{prefix}x"),
            1 => format!("{prefix}{:03}", rng.next(30)),
            2 if !prefix.is_empty() => prefix.to_string(),
            _ => format!("{prefix}{}", rng.next(30)),
        }
    }

    #[test]
    fn expand_inverts_compress_on_generated_lists() {
        let mut rng = Lcg(42);
        for _ in 0..2_000 {
            let len = rng.next(40) as usize;
            let names: Vec<String> = (0..len).map(|_| random_name(&mut rng)).collect();
            let compressed = compress(&names);
            assert_eq!(ex(&compressed), names, "via {compressed}");
            let sorted = compress_sorted(&names);
            let mut want = names.clone();
            let mut got = ex(&sorted);
            want.sort();
            got.sort();
            assert_eq!(got, want, "via {sorted}");
        }
    }

    #[test]
    fn compress_inverts_expand_on_canonical_ranges() {
        for expr in ["n[1-3,5]", "tux[2,1-2]", "n[001-100]", "a1,b[2-4],c"] {
            assert_eq!(compress(&ex(expr)), expr);
        }
    }

    #[test]
    fn compress_is_linear_on_large_lists() {
        let names: Vec<String> = (1..=50_000).map(|i| format!("n{i:05}")).collect();
        let start = std::time::Instant::now();
        let compressed = compress(&names);
        assert_eq!(compressed, "n[00001-50000]");
        // Generous bound (debug build, shared CPU); a quadratic walk would take minutes.
        assert!(start.elapsed() < std::time::Duration::from_secs(2));
        let gappy: Vec<String> = (1..=50_000).step_by(2).map(|i| format!("n{i}")).collect();
        assert_eq!(ex(&compress(&gappy)), gappy);
    }
}
