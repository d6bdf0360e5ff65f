//! `srun --multi-prog FILE`: a different program per task. Each line of the
//! file is `RANKS PROGRAM [ARGS...]`, RANKS being `*` (every task no other
//! line names), or ids and ranges (`0`, `1-3`, `4,6`). In the arguments
//! `%t` is the task's rank and `%o` its offset among the line's tasks.
//! `#` starts a comment; a trailing `\` joins the next line; single quotes
//! group words.
//!
//! srun parses the file (its syntax errors need no job); the controller
//! checks it against the step's task count, the one place that knows it;
//! each node picks its tasks' programs. The error texts are Slurm 22.05's.

use crate::wire::messages::{MultiProg, MultiProgLine};

/// Parse `text`, read from `file` (named in errors). Errors are whole
/// lines, as srun prints them after `srun: error: `.
pub fn parse(file: &str, text: &str) -> Result<MultiProg, Vec<String>> {
    let mut lines = Vec::new();
    let mut pending = String::new();
    let mut first_no = 0;
    for (i, raw) in text.lines().enumerate() {
        let no = i as u32 + 1;
        if pending.is_empty() {
            first_no = no;
        }
        match raw.strip_suffix('\\') {
            Some(head) => {
                pending.push_str(head);
                pending.push(' ');
                continue;
            }
            None => pending.push_str(raw),
        }
        let line = std::mem::take(&mut pending);
        if let Some(l) = parse_line(file, first_no, &line)? {
            lines.push(l);
        }
    }
    if !pending.is_empty() {
        if let Some(l) = parse_line(file, first_no, &pending)? {
            lines.push(l);
        }
    }
    // Two lines may not name the same task (compared range by range: a
    // line may name a hundred thousand tasks).
    for (i, l) in lines.iter().enumerate() {
        for earlier in &lines[..i] {
            let dup = match (&l.ranks, &earlier.ranks) {
                (None, None) => Some(0),
                (Some(a), Some(b)) => first_overlap(a, b),
                _ => None,
            };
            if let Some(task) = dup {
                return Err(vec![
                    format!("Duplicate record for task {task}"),
                    invalid_line(file, l.line),
                ]);
            }
        }
    }
    Ok(MultiProg {
        file: file.to_string(),
        lines,
    })
}

fn invalid_line(file: &str, no: u32) -> String {
    format!("Line {no} of configuration file {file} invalid")
}

fn parse_line(file: &str, no: u32, line: &str) -> Result<Option<MultiProgLine>, Vec<String>> {
    let words = split_words(line).ok_or_else(|| vec![invalid_line(file, no)])?;
    if words.is_empty() {
        return Ok(None);
    }
    if words.len() < 2 {
        return Err(vec![invalid_line(file, no)]);
    }
    let ranks = if words[0] == "*" {
        None
    } else {
        Some(parse_ranks(&words[0]).ok_or_else(|| {
            vec![
                format!("Invalid task range specification ({})", words[0]),
                invalid_line(file, no),
            ]
        })?)
    };
    Ok(Some(MultiProgLine {
        line: no,
        ranks,
        argv: words[1..].to_vec(),
    }))
}

/// Words split at blanks; single quotes group (and are removed). A `#`
/// that starts a word outside quotes starts a comment. `None`: a quote is
/// left open.
fn split_words(line: &str) -> Option<Vec<String>> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut quoted = false;
    for c in line.chars() {
        match c {
            '\'' => {
                quoted = !quoted;
                in_word = true;
            }
            '#' if !quoted && !in_word => break,
            c if c.is_whitespace() && !quoted => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            c => {
                word.push(c);
                in_word = true;
            }
        }
    }
    if quoted {
        return None;
    }
    if in_word {
        words.push(word);
    }
    Some(words)
}

/// `0`, `1-3`, `4,6,8-9` as inclusive ranges.
fn parse_ranks(spec: &str) -> Option<Vec<(u32, u32)>> {
    spec.split(',')
        .map(|part| match part.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (a.parse().ok()?, b.parse().ok()?);
                (a <= b).then_some((a, b))
            }
            None => part.parse().ok().map(|n| (n, n)),
        })
        .collect()
}

/// The lowest task two range lists share.
fn first_overlap(a: &[(u32, u32)], b: &[(u32, u32)]) -> Option<u32> {
    a.iter()
        .flat_map(|&(a0, a1)| {
            b.iter()
                .filter(move |&&(b0, b1)| a0 <= b1 && b0 <= a1)
                .map(move |&(b0, _)| a0.max(b0))
        })
        .min()
}

/// Where `rank` falls among a line's tasks (in the order they are listed),
/// without walking the ranges task by task.
fn offset_of(r: &[(u32, u32)], rank: u32) -> Option<u32> {
    let mut before = 0;
    for &(a, b) in r {
        if (a..=b).contains(&rank) {
            return Some(before + (rank - a));
        }
        before += b - a + 1;
    }
    None
}

/// Check the file against a step of `ntasks` tasks: every task has exactly
/// one program and no line names a task past the last.
pub fn check(m: &MultiProg, ntasks: u32) -> Result<(), Vec<String>> {
    for l in &m.lines {
        if let Some(r) = &l.ranks {
            // The first task past the end, in the order the line lists them.
            let past = r.iter().find(|&&(_, hi)| hi >= ntasks);
            if let Some(bad) = past.map(|&(lo, _)| lo.max(ntasks)) {
                return Err(vec![
                    format!("Invalid task id, {bad} >= ntasks"),
                    invalid_line(&m.file, l.line),
                ]);
            }
        }
    }
    let star = m.lines.iter().any(|l| l.ranks.is_none());
    let named = |t: u32| {
        m.lines
            .iter()
            .filter_map(|l| l.ranks.as_ref())
            .any(|r| offset_of(r, t).is_some())
    };
    if let Some(t) = (0..ntasks).find(|&t| !star && !named(t)) {
        return Err(vec![format!(
            "Configuration file {} invalid, no record for task id {t}",
            m.file
        )]);
    }
    Ok(())
}

/// Task `rank`'s command line, `%t` and `%o` filled in.
pub fn argv_for(m: &MultiProg, rank: u32) -> Option<Vec<String>> {
    let named = m.lines.iter().find_map(|l| {
        let offset = offset_of(l.ranks.as_ref()?, rank)?;
        Some((l, offset))
    });
    // `*` covers the tasks no other line names; its offset is the rank.
    let (line, offset) = named.or_else(|| {
        m.lines
            .iter()
            .find(|l| l.ranks.is_none())
            .map(|l| (l, rank))
    })?;
    Some(line.argv.iter().map(|a| expand(a, rank, offset)).collect())
}

fn expand(arg: &str, rank: u32, offset: u32) -> String {
    let mut out = String::with_capacity(arg.len());
    let mut chars = arg.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, chars.peek()) {
            ('%', Some('t')) => {
                chars.next();
                out.push_str(&rank.to_string());
            }
            ('%', Some('o')) => {
                chars.next();
                out.push_str(&offset.to_string());
            }
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const F: &str = "/tmp/mp.conf";

    fn argv(m: &MultiProg, rank: u32) -> String {
        argv_for(m, rank).map(|v| v.join(" ")).unwrap_or_default()
    }

    #[test]
    fn lines_ranges_and_star_give_each_task_its_program() {
        let m = parse(
            F,
            "# comment\n0      echo zero %t %o\n1-2    echo range %t %o\n*      echo rest %t %o\n",
        )
        .unwrap();
        assert!(check(&m, 4).is_ok());
        // As Slurm 22.05 ran this file with -n4.
        assert_eq!(argv(&m, 0), "echo zero 0 0");
        assert_eq!(argv(&m, 1), "echo range 1 0");
        assert_eq!(argv(&m, 2), "echo range 2 1");
        assert_eq!(argv(&m, 3), "echo rest 3 3");
    }

    #[test]
    fn quotes_comments_blank_lines_and_continuations() {
        let m = parse(
            F,
            "0,1 echo 'quoted arg'  \"dq %t-%o\n  # indented comment\n\n*\techo tab %o # trailing\n",
        )
        .unwrap();
        assert_eq!(
            argv_for(&m, 1).unwrap(),
            ["echo", "quoted arg", "\"dq", "1-1"]
        );
        assert_eq!(argv(&m, 2), "echo tab 2");
        // A quoted `#` is an argument; an open quote is an error.
        let m = parse(F, "* echo '#x' # not this\n").unwrap();
        assert_eq!(argv(&m, 0), "echo #x");
        assert_eq!(
            parse(F, "0 echo 'open\n").err().unwrap(),
            [format!("Line 1 of configuration file {F} invalid")]
        );
        // Large ranges are handled range by range.
        let m = parse(F, "0-99999 a %o\n100000-199999 b %o\n").unwrap();
        assert!(check(&m, 200_000).is_ok());
        assert_eq!(argv(&m, 150_000), "b 50000");
        assert_eq!(
            parse(F, "0-99999 a\n5,99999-100000 b\n").err().unwrap()[0],
            "Duplicate record for task 5"
        );
        let m = parse(F, "0 echo a \\\n  continued\n1 true\n").unwrap();
        assert_eq!(argv(&m, 0), "echo a continued");
        assert_eq!(
            check(&m, 3),
            Err(vec![format!(
                "Configuration file {F} invalid, no record for task id 2"
            )])
        );
    }

    #[test]
    fn errors_name_the_line_as_slurm_does() {
        let err = |text: &str| parse(F, text).err().unwrap();
        assert_eq!(
            err("0 echo a\n0-1 echo b\n"),
            [
                "Duplicate record for task 0".to_string(),
                format!("Line 2 of configuration file {F} invalid")
            ]
        );
        assert_eq!(
            err("0 echo zero\nx-1 echo bad\n"),
            [
                "Invalid task range specification (x-1)".to_string(),
                format!("Line 2 of configuration file {F} invalid")
            ]
        );
        assert_eq!(
            err("0\n1 true\n"),
            [format!("Line 1 of configuration file {F} invalid")]
        );
        let m = parse(F, "# c\n0 echo zero\n1-2 echo range\n").unwrap();
        assert_eq!(
            check(&m, 2),
            Err(vec![
                "Invalid task id, 2 >= ntasks".to_string(),
                format!("Line 3 of configuration file {F} invalid")
            ])
        );
    }
}
