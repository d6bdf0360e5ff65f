//! `--constraint`: which nodes a job may use, by the features the
//! configuration gives them (`NodeName=... Features=a,b`).
//!
//! Slurm's forms supported: a single feature, AND (`a&b`, or `a,b`, which
//! Slurm rewrites to `a&b`), OR (`a|b`), parentheses, and a whole-expression
//! matching OR (`[a|b]`: every node of the job shares one alternative).
//! Resource counts (`a*2`) are refused by name. Each feature named must exist
//! on some node, or the job is refused, as in Slurm. Hand-written because the
//! grammar is a handful of tokens; no crate parses Slurm's dialect.

use thiserror::Error;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ConstraintError {
    /// Slurm's words for any feature expression it cannot use.
    #[error("Invalid feature specification")]
    Invalid,
    #[error("feature counts ({0}) are not supported by canopy yet")]
    Counts(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Expr {
    Feature(String),
    And(Vec<Expr>),
    Or(Vec<Expr>),
}

impl Expr {
    fn matches(&self, features: &[String]) -> bool {
        match self {
            Expr::Feature(f) => features.iter().any(|g| g == f),
            Expr::And(all) => all.iter().all(|e| e.matches(features)),
            Expr::Or(any) => any.iter().any(|e| e.matches(features)),
        }
    }

    fn names<'a>(&'a self, out: &mut Vec<&'a str>) {
        match self {
            Expr::Feature(f) => out.push(f),
            Expr::And(v) | Expr::Or(v) => v.iter().for_each(|e| e.names(out)),
        }
    }
}

/// A parsed `--constraint`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Constraint {
    /// One entry for a plain expression; several for a matching OR, each an
    /// alternative that all of the job's nodes must satisfy together.
    alternatives: Vec<Expr>,
}

impl Constraint {
    /// Parse `text`; `None` for an empty constraint (no restriction).
    pub fn parse(text: &str) -> Result<Option<Constraint>, ConstraintError> {
        let text = text.trim();
        if text.is_empty() {
            return Ok(None);
        }
        if text.contains('*') {
            return Err(ConstraintError::Counts(text.to_string()));
        }
        let alternatives = match text.strip_prefix('[') {
            Some(rest) => {
                let inner = rest.strip_suffix(']').ok_or(ConstraintError::Invalid)?;
                match Parser::new(inner).parse_all()? {
                    Expr::Or(alts) => alts,
                    one => vec![one],
                }
            }
            None => vec![Parser::new(text).parse_all()?],
        };
        Ok(Some(Constraint { alternatives }))
    }

    /// Every feature the expression names.
    pub fn features(&self) -> Vec<&str> {
        let mut out = Vec::new();
        self.alternatives.iter().for_each(|e| e.names(&mut out));
        out
    }

    /// For each alternative, the ranks (of `0..count`) whose features match.
    pub fn node_sets<'a>(
        &self,
        count: usize,
        features_of: impl Fn(u32) -> &'a [String],
    ) -> Vec<Vec<u32>> {
        self.alternatives
            .iter()
            .map(|e| {
                (0..count as u32)
                    .filter(|&r| e.matches(features_of(r)))
                    .collect()
            })
            .collect()
    }
}

/// Slurm's spelling of a constraint as shown back (`a,b` becomes `a&b`).
pub fn normalise(text: &str) -> String {
    text.trim().replace(',', "&")
}

struct Parser<'a> {
    text: &'a str,
    pos: usize,
}

impl<'a> Parser<'a> {
    fn new(text: &'a str) -> Self {
        Parser { text, pos: 0 }
    }

    fn parse_all(mut self) -> Result<Expr, ConstraintError> {
        let e = self.or()?;
        if self.pos == self.text.len() {
            Ok(e)
        } else {
            Err(ConstraintError::Invalid)
        }
    }

    fn peek(&self) -> Option<char> {
        self.text[self.pos..].chars().next()
    }

    fn or(&mut self) -> Result<Expr, ConstraintError> {
        let mut terms = vec![self.and()?];
        while self.peek() == Some('|') {
            self.pos += 1;
            terms.push(self.and()?);
        }
        Ok(if terms.len() == 1 {
            terms.remove(0)
        } else {
            Expr::Or(terms)
        })
    }

    fn and(&mut self) -> Result<Expr, ConstraintError> {
        let mut factors = vec![self.factor()?];
        while matches!(self.peek(), Some('&' | ',')) {
            self.pos += 1;
            factors.push(self.factor()?);
        }
        Ok(if factors.len() == 1 {
            factors.remove(0)
        } else {
            Expr::And(factors)
        })
    }

    fn factor(&mut self) -> Result<Expr, ConstraintError> {
        if self.peek() == Some('(') {
            self.pos += 1;
            let e = self.or()?;
            if self.peek() != Some(')') {
                return Err(ConstraintError::Invalid);
            }
            self.pos += 1;
            return Ok(e);
        }
        let rest = &self.text[self.pos..];
        let len = rest
            .find(|c: char| "&|,()[]".contains(c) || c.is_whitespace())
            .unwrap_or(rest.len());
        if len == 0 {
            return Err(ConstraintError::Invalid);
        }
        self.pos += len;
        Ok(Expr::Feature(rest[..len].to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sets(text: &str, nodes: &[&[&str]]) -> Vec<Vec<u32>> {
        let owned: Vec<Vec<String>> = nodes
            .iter()
            .map(|n| n.iter().map(|s| s.to_string()).collect())
            .collect();
        Constraint::parse(text)
            .unwrap()
            .unwrap()
            .node_sets(owned.len(), |r| &owned[r as usize])
    }

    const NODES: &[&[&str]] = &[&["fast", "big"], &["fast"], &["big"], &[]];

    #[test]
    fn and_or_and_parentheses_select_nodes() {
        assert_eq!(sets("fast", NODES), [vec![0, 1]]);
        assert_eq!(sets("fast&big", NODES), [vec![0]]);
        assert_eq!(sets("fast,big", NODES), [vec![0]]);
        assert_eq!(sets("fast|big", NODES), [vec![0, 1, 2]]);
        assert_eq!(sets("(fast|big)&big", NODES), [vec![0, 2]]);
        assert_eq!(sets("fast&big|big", NODES), [vec![0, 2]]);
    }

    #[test]
    fn a_matching_or_gives_one_node_set_per_alternative() {
        assert_eq!(sets("[fast|big]", NODES), [vec![0, 1], vec![0, 2]]);
        assert_eq!(sets("[fast]", NODES), [vec![0, 1]]);
    }

    #[test]
    fn malformed_expressions_and_counts_are_refused() {
        for bad in [
            "fast&&big",
            "&fast",
            "fast|",
            "(fast",
            "fast)",
            "[fast|big",
            "a b",
        ] {
            assert_eq!(
                Constraint::parse(bad),
                Err(ConstraintError::Invalid),
                "{bad}"
            );
        }
        assert_eq!(
            Constraint::parse("fast*2").unwrap_err().to_string(),
            "feature counts (fast*2) are not supported by canopy yet"
        );
        assert_eq!(Constraint::parse("  "), Ok(None));
    }

    #[test]
    fn names_and_spelling() {
        let c = Constraint::parse("[(a|b)&c|d]").unwrap().unwrap();
        assert_eq!(c.features(), ["a", "b", "c", "d"]);
        assert_eq!(normalise("fast,big"), "fast&big");
    }
}
