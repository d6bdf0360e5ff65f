//! `canopy trace fanout [--last KIND | --job ID]`: one real broadcast the
//! controller sent (a launch, a signal, a no-op), as each relay on the way
//! recorded it: the slowest of the controller's subtrees, the chain of
//! slowest relays below it, when each node finished its part, the late
//! nodes, and who kept no record or never answered. The relays' records are
//! fetched only when this runs.

use clap::{Parser, Subcommand};

use super::client::Client;
use super::ping::dur;
use crate::console::trace::FanoutPick;
use crate::wire::messages::{Body, FanoutTraceReport, FanoutTraceRequest};

#[derive(Parser, Debug)]
#[command(
    name = "canopy trace",
    about = "Trace one real broadcast through the relay tree"
)]
struct Args {
    #[command(subcommand)]
    what: What,
}

#[derive(Subcommand, Debug)]
enum What {
    /// The latest broadcast of a kind (Launch, Signal, Terminate, Noop, ...) or for a job.
    Fanout {
        /// The latest broadcast of this kind (default: the latest of any kind).
        #[arg(long, conflicts_with = "job")]
        last: Option<String>,
        /// The latest broadcast for this job.
        #[arg(long)]
        job: Option<u32>,
        /// How many late nodes to name one by one.
        #[arg(long, default_value_t = 10)]
        keep: u32,
        /// Seconds the tree has to answer.
        #[arg(long, default_value_t = 10)]
        timeout: u64,
        #[arg(long)]
        json: bool,
    },
}

pub fn run(args: &[String]) -> i32 {
    let a = match Args::try_parse_from(
        std::iter::once("canopy trace".to_string()).chain(args.iter().cloned()),
    ) {
        Ok(a) => a,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { 2 } else { 0 };
        }
    };
    let What::Fanout {
        last,
        job,
        keep,
        timeout,
        json,
    } = a.what;
    let pick = match job {
        Some(j) => FanoutPick::Job(j),
        None => FanoutPick::Last(last.unwrap_or_default()),
    };
    let req = FanoutTraceRequest {
        pick: pick.clone(),
        budget_ms: timeout.saturating_mul(1000),
        keep,
    };
    super::block_on(async move {
        let r = async {
            let mut c = Client::connect(None).await?;
            c.call(Body::TraceFanout(req)).await
        }
        .await;
        match r {
            Ok(Body::FanoutTraceReply(rep)) => {
                if json {
                    match serde_json::to_string_pretty(&*rep) {
                        Ok(t) => println!("{t}"),
                        Err(e) => {
                            eprintln!("canopy trace: error: {e}");
                            return 1;
                        }
                    }
                } else {
                    print!("{}", render(&pick, &rep));
                }
                i32::from(rep.fold.is_none())
            }
            Ok(other) => {
                eprintln!("canopy trace: error: unexpected reply {}", other.kind());
                1
            }
            Err(e) => super::report("canopy trace", &e),
        }
    })
}

/// The text view.
pub fn render(pick: &FanoutPick, rep: &FanoutTraceReport) -> String {
    let name = |r: u32| {
        rep.names
            .iter()
            .find(|(x, _)| *x == r)
            .map_or_else(|| format!("rank{r}"), |(_, n)| n.clone())
    };
    let mut o = String::new();
    let Some(f) = &rep.fold else {
        let what = match pick {
            FanoutPick::Last(k) if k.is_empty() => "any kind".to_string(),
            FanoutPick::Last(k) => k.clone(),
            FanoutPick::Job(j) => format!("job {j}"),
        };
        o.push_str(&format!("no recent broadcast matches ({what})\n"));
        if rep.recent.is_empty() {
            o.push_str("the controller remembers no broadcast yet\n");
        } else {
            o.push_str("recent broadcasts, oldest first:\n");
            for (kind, job, _) in &rep.recent {
                match job {
                    Some(j) => o.push_str(&format!("  {kind} job {j}\n")),
                    None => o.push_str(&format!("  {kind}\n")),
                }
            }
        }
        return o;
    };
    let job = f.job_id.map(|j| format!(" job {j}")).unwrap_or_default();
    o.push_str(&format!(
        "FANOUT {}{job}: {} targets, {} at the controller\n",
        f.kind,
        f.targets,
        dur(f.total_us)
    ));
    o.push_str("subtrees of the controller, slowest first:\n");
    for s in f.subtrees.iter().take(10) {
        let rtt = s.rtt_us.map_or_else(|| "no answer".to_string(), dur);
        let failed = if s.failed > 0 {
            format!("  {} failed", s.failed)
        } else {
            String::new()
        };
        o.push_str(&format!(
            "  {:<14} {:>6} targets  {:>12}{failed}\n",
            name(s.child),
            s.targets,
            rtt
        ));
    }
    if f.subtrees.len() > 10 {
        o.push_str(&format!(
            "  ({} more subtrees not shown)\n",
            f.subtrees.len() - 10
        ));
    }
    let chain: Vec<String> = f
        .critical_path
        .iter()
        .map(|(r, t)| format!("{} ({})", name(*r), dur(*t)))
        .collect();
    o.push_str(&format!(
        "slowest chain: controller > {}\n",
        chain.join(" > ")
    ));
    o.push_str(&format!(
        "node finished (controller's clock): p50 {}  p99 {}  max {}  over {} nodes\n",
        dur(f.node_done.p50_us),
        dur(f.node_done.p99_us),
        dur(f.node_done.max_us),
        f.node_done.count
    ));
    if f.late.is_empty() {
        o.push_str("late nodes: none\n");
    } else {
        let late: Vec<String> = f
            .late
            .iter()
            .map(|(r, t)| format!("{} {}", name(*r), dur(*t)))
            .collect();
        o.push_str(&format!("late nodes: {}", late.join(", ")));
        if rep.late_omitted > 0 {
            o.push_str(&format!(" (+{} more)", rep.late_omitted));
        }
        o.push('\n');
    }
    let names_of = |v: &[u32]| {
        let n: Vec<String> = v.iter().map(|r| name(*r)).collect();
        crate::config::hostlist::compress(&n)
    };
    if !f.unanswered.is_empty() {
        o.push_str(&format!("never answered: {}\n", names_of(&f.unanswered)));
    }
    if !f.no_record.is_empty() {
        o.push_str(&format!(
            "reached but no record kept: {}\n",
            names_of(&f.no_record)
        ));
    }
    for (list, why) in &rep.unreachable {
        o.push_str(&format!("did not answer this trace: {list}: {why}\n"));
    }
    o
}
