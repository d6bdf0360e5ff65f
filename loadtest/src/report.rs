//! Results: one row per measured configuration, printed as an aligned table
//! (default) or as one JSON object per line (`--json`).

use serde_json::{Map, Value};

pub struct Row {
    fields: Vec<(String, Value)>,
}

impl Row {
    pub fn new(scenario: &str) -> Row {
        Row {
            fields: vec![("scenario".into(), Value::from(scenario))],
        }
    }

    pub fn set(mut self, key: &str, v: impl Into<Value>) -> Row {
        self.fields.push((key.to_string(), v.into()));
        self
    }

    /// Rounded to 3 decimals (enough for ms and ratios; keeps tables readable).
    pub fn num(self, key: &str, v: f64) -> Row {
        let r = (v * 1000.0).round() / 1000.0;
        self.set(key, r)
    }

    pub fn get(&self, key: &str) -> Option<&Value> {
        self.fields.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    pub fn json(&self) -> String {
        let mut m = Map::new();
        for (k, v) in &self.fields {
            m.insert(k.clone(), v.clone());
        }
        Value::Object(m).to_string()
    }
}

/// Rows of one scenario as a table: the union of keys as columns, in first-seen order.
pub fn table(rows: &[Row]) -> String {
    let mut cols: Vec<&str> = Vec::new();
    for r in rows {
        for (k, _) in &r.fields {
            if !cols.contains(&k.as_str()) {
                cols.push(k);
            }
        }
    }
    let cell = |r: &Row, c: &str| match r.get(c) {
        Some(Value::String(s)) => s.clone(),
        Some(v) => v.to_string(),
        None => "-".into(),
    };
    let widths: Vec<usize> = cols
        .iter()
        .map(|c| {
            rows.iter()
                .map(|r| cell(r, c).len())
                .max()
                .unwrap_or(0)
                .max(c.len())
        })
        .collect();
    let mut out = String::new();
    let line = |vals: Vec<String>| {
        vals.iter()
            .zip(&widths)
            .map(|(v, w)| format!("{v:>w$}"))
            .collect::<Vec<_>>()
            .join("  ")
    };
    out.push_str(&line(cols.iter().map(|c| c.to_string()).collect()));
    out.push('\n');
    for r in rows {
        out.push_str(&line(cols.iter().map(|c| cell(r, c)).collect()));
        out.push('\n');
    }
    out
}

/// Latency summary of an hdrhistogram recorded in microseconds.
pub fn latency(row: Row, h: &hdrhistogram::Histogram<u64>) -> Row {
    let ms = |q: f64| h.value_at_quantile(q) as f64 / 1000.0;
    row.num("p50_ms", ms(0.5))
        .num("p99_ms", ms(0.99))
        .num("p999_ms", ms(0.999))
        .num("max_ms", h.max() as f64 / 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_aligns_union_of_columns() {
        let rows = vec![
            Row::new("a").set("nodes", 10).num("x_ms", 1.23456),
            Row::new("a").set("nodes", 1000).set("extra", "y"),
        ];
        let t = table(&rows);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines[0], "scenario  nodes   x_ms  extra");
        assert_eq!(lines[1], "       a     10  1.235      -");
        assert_eq!(lines[2], "       a   1000      -      y");
        assert_eq!(
            rows[0].json(),
            r#"{"nodes":10,"scenario":"a","x_ms":1.235}"#
        );
    }
}
