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
    // Two lines may not name the same task.
    for (i, l) in lines.iter().enumerate() {
        for earlier in &lines[..i] {
            let dup = match (&l.ranks, &earlier.ranks) {
                (None, None) => Some(0),
                (Some(a), Some(b)) => ranks(a).find(|r| ranks(b).any(|x| x == *r)),
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
    let words = split_words(line);
    let Some(first) = words.first() else {
        return Ok(None);
    };
    if first.starts_with('#') {
        return Ok(None);
    }
    // Everything from a word starting with `#` on is a comment.
    let words: Vec<String> = words
        .into_iter()
        .take_while(|w| !w.starts_with('#'))
        .collect();
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

/// Words split at blanks; single quotes group (and are removed).
fn split_words(line: &str) -> Vec<String> {
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
    if in_word {
        words.push(word);
    }
    words
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

fn ranks(r: &[(u32, u32)]) -> impl Iterator<Item = u32> + '_ {
    r.iter().flat_map(|&(a, b)| a..=b)
}

/// Check the file against a step of `ntasks` tasks: every task has exactly
/// one program and no line names a task past the last.
pub fn check(m: &MultiProg, ntasks: u32) -> Result<(), Vec<String>> {
    for l in &m.lines {
        if let Some(r) = &l.ranks {
            if let Some(bad) = ranks(r).find(|&t| t >= ntasks) {
                return Err(vec![
                    format!("Invalid task id, {bad} >= ntasks"),
                    invalid_line(&m.file, l.line),
                ]);
            }
        }
    }
    if let Some(t) = (0..ntasks).find(|&t| argv_for(m, t).is_none()) {
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
        let r = l.ranks.as_ref()?;
        let offset = ranks(r).position(|t| t == rank)?;
        Some((l, offset as u32))
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
