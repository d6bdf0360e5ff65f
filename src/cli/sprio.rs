//! `sprio`: the factors behind pending jobs' priorities. Under
//! `priority/basic` (the default) it refuses with Slurm's three-line
//! message and exit 1, as Slurm's does; under `priority/multifactor` the
//! controller computes each pending job's factors and this lays them out
//! as Slurm's sprio does: `%[.][width]X` fields (`.` right-justifies, as in
//! Slurm's code), the default columns being those with a non-zero weight.

use super::client::Client;
use super::getopt::{self, spec, Ambiguity, ArgKind::Flag, ArgKind::Required, OptSpec};
use crate::wire::messages::Body;
use crate::wire::priority::{JobFactors, PriorityQuery, PriorityReport, PriorityWeights};

static OPTIONS: &[OptSpec<&str>] = &[
    spec("noheader", Some('h'), Flag, "noheader"),
    spec("jobs", Some('j'), Required, "jobs"),
    spec("long", Some('l'), Flag, "long"),
    spec("cluster", Some('M'), Required, "clusters"),
    spec("clusters", None, Required, "clusters"),
    spec("norm", Some('n'), Flag, "norm"),
    spec("format", Some('o'), Required, "format"),
    spec("sort", Some('S'), Required, "sort"),
    spec("partition", Some('p'), Required, "partition"),
    spec("user", Some('u'), Required, "user"),
    spec("verbose", Some('v'), Flag, "verbose"),
    spec("version", Some('V'), Flag, "version"),
    spec("weights", Some('w'), Flag, "weights"),
    spec("federation", None, Flag, "ignored"),
    spec("local", None, Flag, "ignored"),
    spec("sibling", None, Flag, "ignored"),
    spec("help", None, Flag, "help"),
    spec("usage", None, Flag, "usage"),
];

const USAGE: &str = "Usage: sprio [-j jid[s]] [-u user_name[s]] [-o format] [-p partitions]\n     [--federation] [--local] [--sibling] [--usage] [-h] [-l] [-n] [-v] [-w] [-M cluster]";

const HELP: &str = "Usage: sprio [OPTIONS]
      --federation                display jobs in federation if a member of one
  -h, --noheader                  no headers on output
  -j, --jobs                      comma separated list of jobs
                                  to view, default is all
      --local                     display jobs on local cluster only
  -l, --long                      long report
  -M, --cluster=cluster_name      cluster to issue commands to.  Default is
                                  current cluster.  cluster with no name will
                                  reset to default.
                                  NOTE: SlurmDBD must be up.
  -n, --norm                      display normalized values
  -o, --format=format             format specification
      --sibling                   display job records separately for each federation cluster
  -p, --partition=partition_name  comma separated list of partitions
  -u, --user=user_name            comma separated list of users to view
  -v, --verbose                   verbosity level
  -V, --version                   output version information and exit
  -w, --weights                   show the weights for each priority factor

Help options:
  --help                          show this help message
  --usage                         display a brief summary of sprio options";

#[derive(Debug, Default)]
struct Params {
    noheader: bool,
    long: bool,
    norm: bool,
    weights: bool,
    format: Option<String>,
    sort: Option<String>,
    query: PriorityQuery,
    users_given: bool,
}

pub fn run(args: &[String]) -> i32 {
    let options = match getopt::read_all(OPTIONS, args, Ambiguity::SameAction) {
        Ok((options, _)) => options,
        Err(e) => {
            eprintln!("{}", e.message("sprio"));
            eprintln!("Try \"sprio --help\" for more information");
            return 1;
        }
    };
    let mut p = Params {
        format: std::env::var("SPRIO_FORMAT").ok().filter(|s| !s.is_empty()),
        ..Default::default()
    };
    for g in &options {
        let v = g.value.clone().unwrap_or_default();
        match g.spec.action {
            "help" => {
                println!("{HELP}");
                return 0;
            }
            "usage" => {
                println!("{USAGE}");
                return 0;
            }
            "version" => {
                println!("canopy {}", env!("CARGO_PKG_VERSION"));
                return 0;
            }
            "noheader" => p.noheader = true,
            "long" => p.long = true,
            "norm" => p.norm = true,
            "weights" => p.weights = true,
            "format" => p.format = Some(v),
            "sort" => p.sort = Some(v),
            "jobs" => {
                for id in v.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                    let base = id.split('_').next().unwrap_or(id);
                    match base.parse::<u32>() {
                        Ok(n) if n > 0 => p.query.job_ids.push(n),
                        _ => {
                            eprintln!("sprio: error: Invalid job id: {id}");
                            return 1;
                        }
                    }
                }
            }
            "user" => {
                p.users_given = true;
                p.query.users = v
                    .split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(String::from)
                    .collect();
            }
            "partition" => {
                p.query.partitions = v
                    .split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(String::from)
                    .collect();
            }
            _ => {}
        }
    }
    let conf = match Client::connect_config(None) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("sprio: error: {e}");
            return 1;
        }
    };
    if let Some(text) = refusal(&conf.priority_type) {
        eprint!("{text}");
        return 1;
    }
    super::block_on(async move {
        let r = async {
            let mut c = Client::connect(None).await?;
            c.call(Body::QueryPriority(p.query.clone())).await
        };
        match r.await {
            Ok(Body::Priority(report)) => {
                if !report.multifactor {
                    if let Some(text) = refusal(&report.priority_type) {
                        eprint!("{text}");
                    }
                    return 1;
                }
                match render(&p, &report) {
                    Ok(text) => {
                        print!("{text}");
                        0
                    }
                    Err(e) => {
                        eprintln!("sprio: error: {e}");
                        1
                    }
                }
            }
            Ok(Body::Error(e)) => {
                eprintln!("sprio: error: {}", e.message);
                1
            }
            Ok(_) => {
                eprintln!("sprio: error: unexpected reply from the controller");
                1
            }
            Err(e) => super::report("sprio", &e),
        }
    })
}

/// What sprio prints (on stderr, exit 1) under `priority_type`, if it
/// refuses.
fn refusal(priority_type: &str) -> Option<String> {
    (priority_type != "priority/multifactor").then(|| {
        format!(
            "You are not running a supported priority plugin\n({priority_type}).\n\
             Only 'priority/multifactor' is supported.\n"
        )
    })
}

/// The default format, as Slurm builds it from the options and weights.
fn default_format(p: &Params, w: &PriorityWeights) -> String {
    let tres = !w.tres.is_empty();
    if p.long {
        return if p.norm {
            "%.15i %9r %.8u %10y %10a %10b %10f %10j %10p %10q %20t".into()
        } else {
            "%.15i %9r %.8u %.10Y %.10S %.10A %.10B %.10F %.10J %.10P %.10Q %.11N %.20T".into()
        };
    }
    let mut f = String::from("%.15i %9r");
    if p.users_given {
        f.push_str(" %.8u");
    }
    let cols: [(bool, &str, &str); 7] = [
        (w.age > 0, " %10a", " %.10A"),
        (w.assoc > 0, " %10b", " %.10B"),
        (w.fairshare > 0, " %10f", " %.10F"),
        (w.job_size > 0, " %10j", " %.10J"),
        (w.partition > 0, " %10p", " %.10P"),
        (w.qos > 0, " %10q", " %.10Q"),
        (tres, " %20t", " %.20T"),
    ];
    f.push_str(if p.norm { " %10y" } else { " %.10Y %.10S" });
    for (on, norm, weighted) in cols {
        if on {
            f.push_str(if p.norm { norm } else { weighted });
        }
    }
    f
}

/// One `%[.][width]X` field, or literal text.
#[derive(Debug, Clone, PartialEq)]
enum Piece {
    Text(String),
    Field {
        letter: char,
        width: Option<usize>,
        right: bool,
    },
}

const LETTERS: &str = "aAbBcfFijJNpPqQrStTuyY";

fn parse_format(f: &str) -> Result<Vec<Piece>, String> {
    let mut out = Vec::new();
    let mut chars = f.chars().peekable();
    let mut text = String::new();
    while let Some(c) = chars.next() {
        if c != '%' {
            text.push(c);
            continue;
        }
        if !text.is_empty() {
            out.push(Piece::Text(std::mem::take(&mut text)));
        }
        let right = chars.next_if_eq(&'.').is_some();
        let mut digits = String::new();
        while let Some(d) = chars.next_if(|c| c.is_ascii_digit()) {
            digits.push(d);
        }
        let Some(letter) = chars.next() else {
            break;
        };
        if !LETTERS.contains(letter) {
            return Err(format!("Invalid job format specification: {letter}"));
        }
        out.push(Piece::Field {
            letter,
            width: digits.parse().ok(),
            right,
        });
    }
    if !text.is_empty() {
        out.push(Piece::Text(text));
    }
    Ok(out)
}

fn header(letter: char) -> &'static str {
    match letter {
        'a' | 'A' => "AGE",
        'b' | 'B' => "ASSOC",
        'c' => "CLUSTER",
        'f' | 'F' => "FAIRSHARE",
        'i' => "JOBID",
        'j' | 'J' => "JOBSIZE",
        'N' => "NICE",
        'p' | 'P' => "PARTITION",
        'q' | 'Q' => "QOS",
        'r' => "PARTITION",
        'S' => "SITE",
        't' | 'T' => "TRES",
        'u' => "USER",
        _ => "PRIORITY",
    }
}

fn norm(x: f64) -> String {
    format!("{x:.7}")
}

fn int(x: f64) -> String {
    format!("{x:.0}")
}

fn tres_weight(w: &PriorityWeights, name: &str) -> f64 {
    w.tres
        .iter()
        .find(|(n, _)| n == name)
        .map_or(0.0, |(_, v)| *v)
}

fn value(letter: char, j: &JobFactors, w: &PriorityWeights, cluster: &str) -> String {
    match letter {
        'a' => norm(j.age),
        'A' => int(j.age * f64::from(w.age)),
        'b' => norm(j.assoc),
        'B' => int(j.assoc * f64::from(w.assoc)),
        'c' => cluster.to_string(),
        'f' => norm(j.fairshare),
        'F' => int(j.fairshare * f64::from(w.fairshare)),
        'i' => j.job_id.to_string(),
        'j' => norm(j.job_size),
        'J' => int(j.job_size * f64::from(w.job_size)),
        'N' => j.nice.to_string(),
        'p' => norm(j.partition_factor),
        'P' => int(j.partition_factor * f64::from(w.partition)),
        'q' => norm(j.qos_factor),
        'Q' => int(j.qos_factor * f64::from(w.qos)),
        'r' => j.partition.clone(),
        'S' => j.site.to_string(),
        't' => j
            .tres
            .iter()
            .map(|(n, f)| format!("{n}={f:.2}"))
            .collect::<Vec<_>>()
            .join(","),
        'T' => j
            .tres
            .iter()
            .map(|(n, f)| format!("{n}={:.0}", f * tres_weight(w, n)))
            .collect::<Vec<_>>()
            .join(","),
        'u' => j.user.clone(),
        'y' => format!("{:.14}", f64::from(j.priority) / f64::from(u32::MAX)),
        _ => j.priority.to_string(),
    }
}

/// The `-w` row: each factor's weight under its column.
fn weight_value(letter: char, w: &PriorityWeights) -> String {
    match letter {
        'i' => "Weights".into(),
        'a' | 'A' => w.age.to_string(),
        'b' | 'B' => w.assoc.to_string(),
        'f' | 'F' => w.fairshare.to_string(),
        'j' | 'J' => w.job_size.to_string(),
        'p' | 'P' => w.partition.to_string(),
        'q' | 'Q' => w.qos.to_string(),
        'S' => "1".into(),
        't' | 'T' => w
            .tres
            .iter()
            .map(|(n, v)| format!("{n}={v:.0}"))
            .collect::<Vec<_>>()
            .join(","),
        _ => String::new(),
    }
}

fn cell(text: &str, width: Option<usize>, right: bool) -> String {
    match width {
        None => text.to_string(),
        Some(w) => {
            let cut: String = text.chars().take(w).collect();
            if right {
                format!("{cut:>w$}")
            } else {
                format!("{cut:<w$}")
            }
        }
    }
}

fn line(pieces: &[Piece], f: impl Fn(char) -> String) -> String {
    let mut s = String::new();
    for p in pieces {
        match p {
            Piece::Text(t) => s.push_str(t),
            Piece::Field {
                letter,
                width,
                right,
            } => s.push_str(&cell(&f(*letter), *width, *right)),
        }
    }
    // No trimming: Slurm's lines keep a left-justified last column's
    // padding (`sprio -n`, an empty TRES column).
    s + "\n"
}

/// `-S`: letters, each optionally `+`/`-` (descending), comma separated or not.
fn sort(jobs: &mut [JobFactors], spec: &str, w: &PriorityWeights) -> Result<(), String> {
    let mut keys: Vec<(char, bool)> = Vec::new();
    let mut desc = false;
    for c in spec.chars() {
        match c {
            '-' => desc = true,
            '+' | ',' | ' ' => {}
            c if "aAbBfFijJNpPqQrStTuyY".contains(c) => {
                keys.push((c, desc));
                desc = false;
            }
            c => return Err(format!("Invalid sort specification: {c}")),
        }
    }
    let num = |c: char, j: &JobFactors| -> f64 {
        match c {
            'a' | 'A' => j.age,
            'b' | 'B' => j.assoc,
            'f' | 'F' => j.fairshare,
            'i' => f64::from(j.job_id),
            'j' | 'J' => j.job_size,
            'N' => f64::from(j.nice),
            'p' | 'P' => j.partition_factor,
            'q' | 'Q' => j.qos_factor,
            'S' => f64::from(j.site),
            't' | 'T' => j.tres.iter().map(|(n, f)| f * tres_weight(w, n)).sum(),
            _ => f64::from(j.priority),
        }
    };
    jobs.sort_by(|x, y| {
        for &(c, d) in &keys {
            let o = match c {
                'r' => x.partition.cmp(&y.partition),
                'u' => x.user.cmp(&y.user),
                _ => num(c, x)
                    .partial_cmp(&num(c, y))
                    .unwrap_or(std::cmp::Ordering::Equal),
            };
            let o = if d { o.reverse() } else { o };
            if o != std::cmp::Ordering::Equal {
                return o;
            }
        }
        std::cmp::Ordering::Equal
    });
    Ok(())
}

fn render(p: &Params, report: &PriorityReport) -> Result<String, String> {
    let w = &report.weights;
    let format = p.format.clone().unwrap_or_else(|| default_format(p, w));
    let pieces = parse_format(&format)?;
    let mut out = String::new();
    if !p.noheader {
        out.push_str(&line(&pieces, |c| header(c).to_string()));
    }
    if p.weights {
        out.push_str(&line(&pieces, |c| weight_value(c, w)));
        return Ok(out);
    }
    let mut jobs = report.jobs.clone();
    if jobs.is_empty() && (!p.query.job_ids.is_empty() || p.users_given) {
        // Slurm's words, on stdout, and exit 0, without the header.
        return Ok("Unable to find jobs matching user/id(s) specified\n".into());
    }
    jobs.sort_by_key(|j| j.job_id);
    if let Some(spec) = &p.sort {
        sort(&mut jobs, spec, w)?;
    }
    for j in &jobs {
        // PRIORITY is the job's priority itself (the weighted sum of the
        // other columns, but for their rounding).
        out.push_str(&line(&pieces, |c| value(c, j, w, "")));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Job 9 of the golden capture (tests/golden/INDEX.md): weights
    /// age 1000, job size 100, partition 1000.
    fn report() -> PriorityReport {
        PriorityReport {
            multifactor: true,
            priority_type: "priority/multifactor".into(),
            weights: PriorityWeights {
                age: 1000,
                job_size: 100,
                partition: 1000,
                ..Default::default()
            },
            jobs: vec![JobFactors {
                job_id: 9,
                partition: "debug".into(),
                user: "root".into(),
                priority: 1056,
                age: 0.0,
                job_size: 0.5625,
                partition_factor: 1.0,
                ..Default::default()
            }],
        }
    }

    fn golden(name: &str) -> String {
        let path = format!("{}/tests/golden/{name}.out", env!("CARGO_MANIFEST_DIR"));
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    #[test]
    fn basic_priorities_get_slurms_refusal() {
        assert_eq!(
            refusal("priority/basic").unwrap(),
            "You are not running a supported priority plugin\n(priority/basic).\n\
             Only 'priority/multifactor' is supported.\n"
        );
        assert!(refusal("priority/multifactor").is_none());
    }

    /// Byte for byte what Slurm 22.05's sprio printed for the same job.
    #[test]
    fn layouts_match_slurms_golden_output() {
        let r = report();
        let run = |p: Params| render(&p, &r).unwrap();
        assert_eq!(run(Params::default()), golden("sprio_mf_pend"));
        let long = Params {
            long: true,
            ..Default::default()
        };
        assert_eq!(run(long), golden("sprio_mf_pend_l"));
        let norm = Params {
            norm: true,
            ..Default::default()
        };
        assert_eq!(run(norm), golden("sprio_mf_pend_n"));
        let weights = Params {
            weights: true,
            ..Default::default()
        };
        assert_eq!(run(weights), golden("sprio_mf_pend_w"));
        let format = Params {
            format: Some("%.15i %.8u %.10Y".into()),
            ..Default::default()
        };
        assert_eq!(run(format), golden("sprio_mf_pend_o"));
        // No pending jobs: the header alone; none of those asked for: Slurm's line.
        let empty = PriorityReport {
            jobs: vec![],
            ..report()
        };
        assert_eq!(
            render(&Params::default(), &empty).unwrap(),
            golden("sprio_mf")
        );
        let asked = Params {
            query: PriorityQuery {
                job_ids: vec![1],
                ..Default::default()
            },
            ..Default::default()
        };
        assert_eq!(render(&asked, &empty).unwrap(), golden("sprio_mf_j_held1"));
    }

    #[test]
    fn fair_share_and_tres_columns_and_bad_formats() {
        let mut r = report();
        r.weights.fairshare = 10_000;
        r.weights.tres = vec![("cpu".into(), 1000.0)];
        r.jobs[0].fairshare = 0.5;
        r.jobs[0].tres = vec![("cpu".into(), 0.25)];
        let text = render(&Params::default(), &r).unwrap();
        assert_eq!(
            text,
            "          JOBID PARTITION   PRIORITY       SITE        AGE  FAIRSHARE    JOBSIZE  PARTITION                 TRES\n\
             \x20             9 debug           1056          0          0       5000         56       1000              cpu=250\n"
        );
        let p = Params {
            format: Some("%i|%u|%t".into()),
            noheader: true,
            ..Default::default()
        };
        assert_eq!(render(&p, &r).unwrap(), "9|root|cpu=0.25\n");
        let p = Params {
            format: Some("%i %Z".into()),
            ..Default::default()
        };
        assert_eq!(
            render(&p, &r).unwrap_err(),
            "Invalid job format specification: Z"
        );
    }

    #[test]
    fn sorting_by_priority_descending() {
        let mut r = report();
        let mut second = r.jobs[0].clone();
        second.job_id = 13;
        second.priority = 9000;
        r.jobs.push(second);
        let p = Params {
            format: Some("%i".into()),
            noheader: true,
            sort: Some("-y".into()),
            ..Default::default()
        };
        assert_eq!(render(&p, &r).unwrap(), "13\n9\n");
    }
}
