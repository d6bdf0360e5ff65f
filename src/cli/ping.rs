//! `canopy ping NODE|NODESET`: a probe through the relay tree (the path real
//! messages take), timed hop by hop in both directions. One node: a line per
//! hop that sums to the end-to-end time. A node set: percentiles, the
//! slowest paths in full, the stragglers and the nodes that did not answer.
//! The timing model is `console::trace`; this file parses and prints.

use clap::Parser;

use super::client::Client;
use crate::wire::messages::{Body, NamedPath, ProbeReport, ProbeRequest, ProbeRound};

#[derive(Parser, Debug)]
#[command(
    name = "canopy ping",
    about = "Time a probe through the relay tree, hop by hop"
)]
struct Args {
    /// A node name or hostlist (n[1-100]).
    nodes: String,
    /// Probe rounds, one after another (at most 10).
    #[arg(short = 'c', long, default_value_t = 1)]
    count: u32,
    /// How many of the slowest paths to show in full.
    #[arg(long, default_value_t = 5)]
    keep: u32,
    /// Seconds the tree has to answer.
    #[arg(long, default_value_t = 10)]
    timeout: u64,
    #[arg(long)]
    json: bool,
}

pub fn run(args: &[String]) -> i32 {
    let a = match Args::try_parse_from(
        std::iter::once("canopy ping".to_string()).chain(args.iter().cloned()),
    ) {
        Ok(a) => a,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { 2 } else { 0 };
        }
    };
    let req = ProbeRequest {
        nodes: a.nodes.clone(),
        count: a.count,
        budget_ms: a.timeout.saturating_mul(1000),
        keep: a.keep,
    };
    super::block_on(async move {
        let r = async {
            let mut c = Client::connect(None).await?;
            c.call(Body::Probe(req)).await
        }
        .await;
        match r {
            Ok(Body::ProbeReply(rep)) => {
                if a.json {
                    match serde_json::to_string_pretty(&*rep) {
                        Ok(t) => println!("{t}"),
                        Err(e) => {
                            eprintln!("canopy ping: error: {e}");
                            return 1;
                        }
                    }
                } else {
                    print!("{}", render(&a.nodes, &rep));
                }
                // Like ping(8): failure when any target did not answer.
                i32::from(rep.rounds.iter().any(|r| r.answered < r.targets))
            }
            Ok(other) => {
                eprintln!("canopy ping: error: unexpected reply {}", other.kind());
                1
            }
            Err(e) => super::report("canopy ping", &e),
        }
    })
}

/// A duration for people: µs below a millisecond, else ms with three decimals.
pub fn dur(us: u64) -> String {
    if us < 1000 {
        format!("{us}us")
    } else {
        format!("{}.{:03}ms", us / 1000, us % 1000)
    }
}

/// The hop table of one path: a line per hop and the sum.
pub fn hop_table(p: &NamedPath) -> String {
    let b = &p.breakdown;
    let mut o = format!(
        "  {:>3} {:<14} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>11}\n",
        "HOP",
        "NODE",
        "OUT_QUEUE",
        "OUT_HANDLE",
        "WIRE_DOWN",
        "BACK_QUEUE",
        "BACK_HANDLE",
        "WIRE_UP",
        "TOTAL"
    );
    for (l, name) in b.lines.iter().zip(&p.hops) {
        o.push_str(&format!(
            "  {:>3} {:<14} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>11}\n",
            l.hop,
            name,
            dur(l.out_queued_us),
            dur(l.out_handled_us),
            dur(l.wire_down_us),
            dur(l.back_queued_us),
            dur(l.back_handled_us),
            dur(l.wire_up_us),
            dur(l.total_us)
        ));
    }
    let sum: u64 = b.lines.iter().map(|l| l.total_us).sum();
    o.push_str(&format!(
        "  {:>3} {:<14} {:>87}\n",
        "",
        "sum",
        format!(
            "{} (end to end {}{})",
            dur(sum),
            dur(b.end_to_end_us),
            if b.skew_us > 0 {
                format!(", clock skew {}", dur(b.skew_us))
            } else {
                String::new()
            }
        )
    ));
    o
}

fn round_text(nodes: &str, r: &ProbeRound) -> String {
    let mut o = String::new();
    if r.targets == 1 && r.slowest.len() == 1 {
        let p = &r.slowest[0];
        o.push_str(&format!(
            "PING {} (depth {}) via {}: {} end to end\n",
            p.target,
            p.hops.len().saturating_sub(1),
            p.hops.join(" > "),
            dur(p.breakdown.end_to_end_us)
        ));
        o.push_str(&hop_table(p));
    } else {
        o.push_str(&format!(
            "PING {nodes}: {} targets, {} answered, {} at the controller\n",
            r.targets,
            r.answered,
            dur(r.elapsed_us)
        ));
        if r.answered > 0 {
            o.push_str(&format!(
                "path time p50 {}  p99 {}  max {}\n",
                dur(r.spread.p50_us),
                dur(r.spread.p99_us),
                dur(r.spread.max_us)
            ));
            if r.stragglers.is_empty() {
                o.push_str(&format!(
                    "stragglers (path time over {}): none\n",
                    dur(r.straggler_threshold_us)
                ));
            } else {
                o.push_str(&format!(
                    "stragglers (path time over {}): {}\n",
                    dur(r.straggler_threshold_us),
                    r.stragglers
                ));
            }
        }
        for p in &r.slowest {
            o.push_str(&format!(
                "slowest: {} via {}: path {}, end to end {}\n",
                p.target,
                p.hops.join(" > "),
                dur(p.breakdown.path_us),
                dur(p.breakdown.end_to_end_us)
            ));
            o.push_str(&hop_table(p));
        }
        if r.omitted > 0 {
            o.push_str(&format!(
                "({} more answered paths not shown; --keep N shows more)\n",
                r.omitted
            ));
        }
    }
    for (list, why) in &r.failed {
        o.push_str(&format!("no answer: {list}: {why}\n"));
    }
    o
}

/// The text view of a whole report.
pub fn render(nodes: &str, rep: &ProbeReport) -> String {
    let mut o = String::new();
    for (i, r) in rep.rounds.iter().enumerate() {
        if rep.rounds.len() > 1 {
            o.push_str(&format!("round {}\n", i + 1));
        }
        o.push_str(&round_text(nodes, r));
    }
    // ping(8)'s closing line, over the rounds where the one node answered.
    let single: Vec<u64> = rep
        .rounds
        .iter()
        .filter(|r| r.targets == 1)
        .filter_map(|r| r.slowest.first().map(|p| p.breakdown.end_to_end_us))
        .collect();
    if rep.rounds.len() > 1 && !single.is_empty() {
        let s = crate::console::trace::Spread::of(&single);
        o.push_str(&format!(
            "--- {nodes}: {} probes, {} answered, end to end p50 {} max {}\n",
            rep.rounds.len(),
            single.len(),
            dur(s.p50_us),
            dur(s.max_us)
        ));
    }
    o.push_str(
        "(wire = a parent's round trip to the child less the child's own time, on one clock each; \
         split evenly between the two directions)\n",
    );
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::console::trace::{breakdown, HopStamps, ProbePath};

    #[test]
    fn durations_read_well() {
        assert_eq!(dur(999), "999us");
        assert_eq!(dur(1000), "1.000ms");
        assert_eq!(dur(12_345), "12.345ms");
    }

    #[test]
    fn a_single_node_prints_one_line_per_hop_and_the_sum() {
        let path = ProbePath {
            hops: vec![
                HopStamps {
                    rank: None,
                    queued_out_us: 1,
                    handled_out_us: 2,
                    below_us: 300,
                    queued_back_us: 3,
                    handled_back_us: 4,
                },
                HopStamps {
                    rank: Some(0),
                    queued_out_us: 5,
                    handled_out_us: 6,
                    below_us: 100,
                    queued_back_us: 7,
                    handled_back_us: 8,
                },
                HopStamps {
                    rank: Some(3),
                    queued_out_us: 9,
                    handled_out_us: 10,
                    ..Default::default()
                },
            ],
        };
        let b = breakdown(&path);
        let round = ProbeRound {
            targets: 1,
            answered: 1,
            slowest: vec![NamedPath {
                target: "n4".into(),
                hops: vec!["controller".into(), "n1".into(), "n4".into()],
                breakdown: b,
            }],
            ..Default::default()
        };
        let text = render(
            "n4",
            &ProbeReport {
                rounds: vec![round],
            },
        );
        assert!(
            text.starts_with("PING n4 (depth 2) via controller > n1 > n4: 310us end to end\n"),
            "{text}"
        );
        let hop_lines = text
            .lines()
            .filter(|l| l.trim_start().starts_with(|c: char| c.is_ascii_digit()))
            .count();
        assert_eq!(hop_lines, 3, "{text}");
        assert!(text.contains("310us (end to end 310us)"), "{text}");
    }
}
