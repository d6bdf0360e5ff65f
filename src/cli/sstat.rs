//! `sstat`: what a job's running steps use now, read by their nodes from the
//! steps' cgroups and summed by the controller (MaxRSS the highest task's
//! with its node and task, CPU times summed, AveRSS over the tasks).
//!
//! As Slurm 22.05's sstat: `-j J[.S][,...]` (or the ids as arguments); a job
//! without a step id shows its first running step, `-a` every running one;
//! the header comes first, then one line per step; a job that cannot be
//! asked, or has nothing running, gets an error line on stderr and the rest
//! go on (the exit status stays 0, as Slurm's does). The layout is sacct's
//! field engine with sstat's default field list.
//!
//! `J.batch` (and `-a`) read the batch script's step cgroup. `-i` prints
//! Slurm's pid layout (JobID, Nodelist, Pids: one line per node). Not yet:
//! the extern step (canopy has none), `-o` together with `-i`, and the
//! fields canopy does not measure
//! (virtual memory, pages, disk I/O, energy, CPU frequency), which print
//! empty or zero as sacct prints them.

use thiserror::Error;

use super::client::{CliError, Client};
use super::format::sacct::{render, SacctFieldError, SacctFormat, SacctRequest};
use super::getopt::{self, spec, Ambiguity, ArgKind, GetoptError, OptSpec, Word};
use crate::model::acct::AcctStep;
use crate::wire::messages::{Body, ErrorCode, StatStep, StepStat, StepStatRequest};
use crate::wire::types::{AcctJob, JobState, StepKind};

/// Slurm 22.05's `STAT_FIELDS` (src/sstat/sstat.h): sstat's columns
/// without `-o`.
pub const DEFAULT_FIELDS: &str = "jobid,maxvmsize,maxvmsizenode,maxvmsizetask,avevmsize,maxrss,\
maxrssnode,maxrsstask,averss,maxpages,maxpagesnode,maxpagestask,avepages,mincpu,mincpunode,\
mincputask,avecpu,ntasks,avecpufreq,reqcpufreqmin,reqcpufreqmax,reqcpufreqgov,consumedenergy,\
maxdiskread,maxdiskreadnode,maxdiskreadtask,avediskread,maxdiskwrite,maxdiskwritenode,\
maxdiskwritetask,avediskwrite,tresusageinave,tresusageinmax,tresusageinmaxn,tresusageinmaxt,\
tresusageinmin,tresusageinminn,tresusageinmint,tresusageintot,tresusageoutave,tresusageoutmax,\
tresusageoutmaxn,tresusageoutmaxt,tresusageoutmin,tresusageoutminn,tresusageoutmint,\
tresusageouttot";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Opt {
    AllSteps,
    Format,
    Help,
    Jobs,
    NoHeader,
    Parsable,
    Parsable2,
    PidFormat,
    NoConvert,
    Units,
    Verbose,
    Version,
}

static OPTIONS: &[OptSpec<Opt>] = &[
    spec("allsteps", Some('a'), ArgKind::Flag, Opt::AllSteps),
    spec("fields", Some('o'), ArgKind::Required, Opt::Format),
    spec("format", Some('o'), ArgKind::Required, Opt::Format),
    spec("help", Some('h'), ArgKind::Flag, Opt::Help),
    spec("jobs", Some('j'), ArgKind::Required, Opt::Jobs),
    spec("noheader", Some('n'), ArgKind::Flag, Opt::NoHeader),
    spec("noconvert", None, ArgKind::Flag, Opt::NoConvert),
    spec("parsable", Some('p'), ArgKind::Flag, Opt::Parsable),
    spec("parsable2", Some('P'), ArgKind::Flag, Opt::Parsable2),
    spec("pidformat", Some('i'), ArgKind::Flag, Opt::PidFormat),
    spec("units", None, ArgKind::Required, Opt::Units),
    spec("verbose", Some('v'), ArgKind::Flag, Opt::Verbose),
    spec("version", Some('V'), ArgKind::Flag, Opt::Version),
];

/// One `-j` entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Selected {
    pub job_id: u32,
    pub step: Option<StatStep>,
}

/// What sstat was asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SstatArgs {
    pub jobs: Vec<Selected>,
    pub all_steps: bool,
    format: SacctFormat,
    header: bool,
    /// `-p` / `-P`.
    delimiter: Option<String>,
    trailing: bool,
    units: Option<char>,
    noconvert: bool,
    /// `-i`: one line per node with its pids.
    pub pid_format: bool,
}

/// Why sstat stops before asking anything. `Display` is the line for stderr.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SstatArgsError {
    #[error("{}", .0.message("sstat"))]
    Syntax(#[from] GetoptError),
    #[error("sstat: error: {0}")]
    Field(#[from] SacctFieldError),
    /// Slurm's words for a `-j` entry it cannot read.
    #[error("sstat: fatal: Bad job/step specified: {0}")]
    BadStep(String),
    #[error("sstat: error: Invalid --units value: {0}")]
    BadUnits(String),
    #[error("sstat: error: -o/--format with -i/--pidformat is not supported by canopy yet")]
    PidFormat,
    /// `-h`/`-V`: text for stdout, exit 0.
    #[error("{0}")]
    Info(String),
}

const USAGE: &str = "Usage: sstat [options] -j <job(.stepid)>
    Use --help for help
Options:
  -a, --allsteps   print all steps for the given job(s) when no step is specified
  -e, --helpformat print a list of fields that can be specified with the '--format' option
  -h, --help       print this description of use
  -i, --pidformat  return the pids running for the job or step
  -j, --jobs       comma separated list of jobs or job steps
  -n, --noheader   no header will be added to the beginning of output
      --noconvert  don't convert units from their original type
  -o, --format     comma separated list of fields
  -p, --parsable   output will be '|' delimited with a '|' at the end
  -P, --parsable2  output will be '|' delimited without a '|' at the end
      --units=[KMGTP] display values in specified unit type
  -V, --version    print version";

/// `J`, `J.S`, `J.batch` (Slurm also takes `J.extern`, which canopy has not).
fn parse_step(text: &str) -> Result<Selected, SstatArgsError> {
    let bad = || SstatArgsError::BadStep(text.to_string());
    let (job, step) = match text.split_once('.') {
        Some((j, s)) => (j, Some(s)),
        None => (text, None),
    };
    let job_id: u32 = job.trim().parse().map_err(|_| bad())?;
    let step = match step {
        None => None,
        Some(s) if s.eq_ignore_ascii_case("batch") => Some(StatStep::Batch),
        Some(s) => Some(StatStep::Numbered(s.trim().parse().map_err(|_| bad())?)),
    };
    Ok(Selected { job_id, step })
}

fn add_jobs(list: &str, out: &mut Vec<Selected>) -> Result<(), SstatArgsError> {
    for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        out.push(parse_step(item)?);
    }
    Ok(())
}

pub fn parse(args: &[String]) -> Result<SstatArgs, SstatArgsError> {
    let mut a = SstatArgs {
        jobs: Vec::new(),
        all_steps: false,
        format: SacctFormat::parse(DEFAULT_FIELDS)?,
        header: true,
        delimiter: None,
        trailing: false,
        units: None,
        noconvert: false,
        pid_format: false,
    };
    let mut fields: Option<String> = None;
    let mut i = 0;
    while let Some(arg) = args.get(i) {
        if arg == "--" {
            for rest in &args[i + 1..] {
                add_jobs(rest, &mut a.jobs)?;
            }
            break;
        }
        match getopt::read_word(OPTIONS, args, i, Ambiguity::SameAction) {
            Word::Options {
                given,
                problem,
                next,
            } => {
                for g in given {
                    let v = g.value.clone().unwrap_or_default();
                    match g.spec.action {
                        Opt::AllSteps => a.all_steps = true,
                        // `-o` lists add up, as Slurm's do.
                        Opt::Format => {
                            fields = Some(match fields.take() {
                                Some(f) => format!("{f},{v}"),
                                None => v,
                            })
                        }
                        Opt::Help => return Err(SstatArgsError::Info(USAGE.to_string())),
                        Opt::Jobs => add_jobs(&v, &mut a.jobs)?,
                        Opt::NoHeader => a.header = false,
                        Opt::Parsable => {
                            a.delimiter = Some("|".into());
                            a.trailing = true;
                        }
                        Opt::Parsable2 => {
                            a.delimiter = Some("|".into());
                            a.trailing = false;
                        }
                        Opt::PidFormat => a.pid_format = true,
                        Opt::NoConvert => a.noconvert = true,
                        Opt::Units => {
                            let c = v.chars().next().map(|c| c.to_ascii_uppercase());
                            match c.filter(|c| "KMGTP".contains(*c)) {
                                Some(c) if v.len() == 1 => a.units = Some(c),
                                _ => return Err(SstatArgsError::BadUnits(v)),
                            }
                        }
                        Opt::Verbose => {}
                        Opt::Version => {
                            return Err(SstatArgsError::Info(format!(
                                "slurm {}",
                                env!("CARGO_PKG_VERSION")
                            )))
                        }
                    }
                }
                if let Some(p) = problem {
                    return Err(p.into());
                }
                i = next;
            }
            Word::EndOfOptions | Word::Positional => {
                add_jobs(arg, &mut a.jobs)?;
                i += 1;
            }
        }
    }
    if let Some(f) = fields {
        if a.pid_format {
            return Err(SstatArgsError::PidFormat);
        }
        a.format = SacctFormat::parse(&f)?;
    }
    Ok(a)
}

impl SacctRequest for SstatArgs {
    fn format(&self) -> &SacctFormat {
        &self.format
    }
    fn header(&self) -> bool {
        self.header
    }
    fn delimiter(&self) -> Option<&str> {
        self.delimiter.as_deref()
    }
    fn trailing_delimiter(&self) -> bool {
        self.trailing
    }
    fn units(&self) -> Option<char> {
        self.units
    }
    fn noconvert(&self) -> bool {
        self.noconvert
    }
    fn allocations(&self) -> bool {
        false
    }
    fn expand_arrays(&self) -> bool {
        true
    }
    fn selects(&self, _job: &AcctJob) -> bool {
        true
    }
    fn shows_job_row(&self, _job: &AcctJob) -> bool {
        false
    }
    fn shows_step(&self, _job: &AcctJob, _step: StepKind) -> bool {
        true
    }
}

/// A step's usage as a one-step accounting record, for sacct's renderer.
pub fn as_acct(s: &StepStat) -> AcctJob {
    let t = &s.totals;
    let kind = match s.step {
        StatStep::Batch => StepKind::Batch,
        StatStep::Numbered(n) => StepKind::Numbered(n),
    };
    AcctJob {
        job_id: s.job_id,
        state: JobState::Running,
        steps: vec![AcctStep {
            kind,
            name: String::new(),
            state: JobState::Running,
            exit_code: (0, 0),
            start_time: None,
            end_time: None,
            nodes: s.nodes.clone(),
            num_nodes: t.nodes,
            num_tasks: t.tasks,
            alloc_cpus: 0,
            max_rss_kb: t.max_rss_kb,
            max_vmsize_kb: 0,
            user_cpu_ms: t.user_cpu_ms,
            system_cpu_ms: t.system_cpu_ms,
            srun_host: String::new(),
            srun_pid: 0,
            usage: t.clone(),
        }],
        ..Default::default()
    }
}

/// The body of sstat's output for one `-j` entry's answer, or its error
/// line (Slurm's words).
pub fn entry_text(
    sel: Selected,
    answer: Result<Vec<StepStat>, (ErrorCode, String)>,
    args: &SstatArgs,
) -> Result<String, String> {
    let steps = match answer {
        Ok(s) => s,
        Err((ErrorCode::PermissionDenied, message)) => {
            return Err(format!("sstat: error: {message}"));
        }
        Err(_) => {
            return Err(format!(
                "sstat: error: couldn't get steps for job {}",
                sel.job_id
            ))
        }
    };
    if steps.is_empty() {
        return Err(match sel.step {
            None => format!("sstat: error: No steps running for job {}", sel.job_id),
            Some(StatStep::Batch) => {
                format!(
                    "sstat: error: StepId={}.batch not found running.",
                    sel.job_id
                )
            }
            Some(StatStep::Numbered(s)) => {
                format!("sstat: error: StepId={}.{s} not found running.", sel.job_id)
            }
        });
    }
    if args.pid_format {
        return Ok(pid_lines(&steps, args));
    }
    let jobs: Vec<AcctJob> = steps.iter().map(as_acct).collect();
    let quiet = SstatNoHeader(args);
    Ok(render(&jobs, &quiet, 0))
}

/// `-i`'s columns (Slurm's `STAT_FIELDS_PID`) and their widths (negative:
/// left-justified).
const PID_COLUMNS: [(&str, i32); 3] = [("JobID", -12), ("Nodelist", 20), ("Pids", 20)];

/// One `-i` line of `cells`, fixed-width (a cut value ends in `+`) or
/// delimited.
fn pid_line(cells: &[String], args: &SstatArgs) -> String {
    let mut out = String::new();
    match &args.delimiter {
        Some(d) => {
            out.push_str(&cells.join(d));
            if args.trailing {
                out.push_str(d);
            }
        }
        None => {
            for (cell, (_, width)) in cells.iter().zip(PID_COLUMNS) {
                let w = width.unsigned_abs() as usize;
                let text: String = if cell.chars().count() > w {
                    cell.chars().take(w - 1).chain(['+']).collect()
                } else {
                    cell.clone()
                };
                if width < 0 {
                    out.push_str(&format!("{text:<w$} "));
                } else {
                    out.push_str(&format!("{text:>w$} "));
                }
            }
        }
    }
    out.push('\n');
    out
}

/// `-i`'s header (and dash line).
pub fn pid_header(args: &SstatArgs) -> String {
    let names: Vec<String> = PID_COLUMNS.iter().map(|(n, _)| n.to_string()).collect();
    let mut out = pid_line(&names, args);
    if args.delimiter.is_none() {
        for (_, width) in PID_COLUMNS {
            out.push_str(&"-".repeat(width.unsigned_abs() as usize));
            out.push(' ');
        }
        out.push('\n');
    }
    out
}

/// `-i`'s lines: one per node of each step.
fn pid_lines(steps: &[StepStat], args: &SstatArgs) -> String {
    let mut out = String::new();
    for s in steps {
        let id = match s.step {
            StatStep::Batch => format!("{}.batch", s.job_id),
            StatStep::Numbered(n) => format!("{}.{n}", s.job_id),
        };
        for (node, pids) in &s.pids {
            let pids: Vec<String> = pids.iter().map(u32::to_string).collect();
            out.push_str(&pid_line(&[id.clone(), node.clone(), pids.join(",")], args));
        }
    }
    out
}

/// The same layout without the header (printed once, before every entry).
struct SstatNoHeader<'a>(&'a SstatArgs);

impl SacctRequest for SstatNoHeader<'_> {
    fn format(&self) -> &SacctFormat {
        &self.0.format
    }
    fn header(&self) -> bool {
        false
    }
    fn delimiter(&self) -> Option<&str> {
        self.0.delimiter()
    }
    fn trailing_delimiter(&self) -> bool {
        self.0.trailing
    }
    fn units(&self) -> Option<char> {
        self.0.units
    }
    fn noconvert(&self) -> bool {
        self.0.noconvert
    }
    fn allocations(&self) -> bool {
        false
    }
    fn expand_arrays(&self) -> bool {
        true
    }
    fn selects(&self, _job: &AcctJob) -> bool {
        true
    }
    fn shows_job_row(&self, _job: &AcctJob) -> bool {
        false
    }
    fn shows_step(&self, _job: &AcctJob, _step: StepKind) -> bool {
        true
    }
}

pub fn run(args: &[String]) -> i32 {
    let a = match parse(args) {
        Ok(a) => a,
        Err(SstatArgsError::Info(text)) => {
            println!("{text}");
            return 0;
        }
        Err(e) => {
            eprintln!("{e}");
            return 1;
        }
    };
    if a.jobs.is_empty() {
        eprintln!("sstat: error: You didn't give me any jobs to stat.");
        return 1;
    }
    super::block_on(async move {
        let mut c = match Client::connect(None).await {
            Ok(c) => c,
            Err(e) => return super::report("sstat", &e),
        };
        if a.header && a.pid_format {
            print!("{}", pid_header(&a));
        } else if a.header {
            print!("{}", render(&[], &a, 0));
        }
        for &sel in &a.jobs {
            let req = StepStatRequest {
                job_id: sel.job_id,
                step: sel.step,
                all: a.all_steps,
            };
            let answer = match c.call(Body::QueryStepStats(req)).await {
                Ok(Body::StepStats(s)) => Ok(s),
                Ok(other) => Err((
                    ErrorCode::Internal,
                    format!("unexpected reply {}", other.kind()),
                )),
                Err(CliError::Refused(e)) => Err((e.code, e.message)),
                Err(e) => return super::report("sstat", &e),
            };
            match entry_text(sel, answer, &a) {
                Ok(text) => print!("{text}"),
                Err(line) => eprintln!("{line}"),
            }
        }
        0
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::acct::StepTotals;

    fn args(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    fn stat(tasks: u32, max_rss_kb: u64) -> StepStat {
        StepStat {
            job_id: 7,
            step: StatStep::Numbered(0),
            nodes: "n1".into(),
            totals: StepTotals {
                max_rss_kb,
                max_rss_node: "n1".into(),
                max_rss_task: Some(0),
                rss_sum_kb: max_rss_kb,
                tasks,
                nodes: 1,
                user_cpu_ms: 1500,
                system_cpu_ms: 500,
                oom_kills: 0,
            },
            pids: vec![],
        }
    }

    #[test]
    fn job_lists_read_like_slurms() {
        let a = parse(&args(&["-j", "7,8.2", "9.batch", "-a"])).unwrap();
        assert_eq!(
            a.jobs,
            vec![
                Selected {
                    job_id: 7,
                    step: None
                },
                Selected {
                    job_id: 8,
                    step: Some(StatStep::Numbered(2))
                },
                Selected {
                    job_id: 9,
                    step: Some(StatStep::Batch)
                },
            ]
        );
        assert!(a.all_steps);
        assert_eq!(
            parse(&args(&["-j", "x"])).unwrap_err().to_string(),
            "sstat: fatal: Bad job/step specified: x"
        );
    }

    #[test]
    fn default_header_is_slurms_stat_fields() {
        let a = parse(&args(&["-j", "7"])).unwrap();
        let head = render(&[], &a, 0);
        let first = head.lines().next().unwrap();
        let names: Vec<&str> = first.split_whitespace().collect();
        assert_eq!(names.len(), 47);
        assert_eq!(
            &names[..6],
            &[
                "JobID",
                "MaxVMSize",
                "MaxVMSizeNode",
                "MaxVMSizeTask",
                "AveVMSize",
                "MaxRSS"
            ]
        );
        assert!(head
            .lines()
            .nth(1)
            .unwrap()
            .starts_with("------------ ----------"));
    }

    #[test]
    fn a_step_row_shows_its_usage() {
        let a = parse(&args(&[
            "-j",
            "7",
            "-P",
            "-o",
            "JobID,MaxRSS,MaxRSSNode,MaxRSSTask,AveRSS,NTasks,TotalCPU",
        ]))
        .unwrap();
        let text = entry_text(a.jobs[0], Ok(vec![stat(1, 61_440)]), &a).unwrap();
        // Sizes in the largest exact unit, CPU times as sacct prints them.
        assert_eq!(text, "7.0|60M|n1|0|60M|1|00:00:02\n");
    }

    #[test]
    fn pid_format_is_a_line_per_node() {
        let a = parse(&args(&["-j", "7", "-i"])).unwrap();
        let mut s = stat(2, 10);
        s.pids = vec![("n1".into(), vec![11, 12]), ("n2".into(), vec![13])];
        let text = format!(
            "{}{}",
            pid_header(&a),
            entry_text(a.jobs[0], Ok(vec![s]), &a).unwrap()
        );
        let lines: Vec<&str> = text.lines().map(str::trim_end).collect();
        assert_eq!(
            lines,
            vec![
                "JobID                    Nodelist                 Pids",
                "------------ -------------------- --------------------",
                "7.0                            n1                11,12",
                "7.0                            n2                   13",
            ]
        );
        assert!(matches!(
            parse(&args(&["-j", "7", "-i", "-o", "jobid"])),
            Err(SstatArgsError::PidFormat)
        ));
    }

    #[test]
    fn errors_are_slurms() {
        let a = parse(&args(&["-j", "7"])).unwrap();
        let sel = |step| Selected { job_id: 7, step };
        assert_eq!(
            entry_text(sel(None), Ok(vec![]), &a).unwrap_err(),
            "sstat: error: No steps running for job 7"
        );
        assert_eq!(
            entry_text(sel(Some(StatStep::Numbered(3))), Ok(vec![]), &a).unwrap_err(),
            "sstat: error: StepId=7.3 not found running."
        );
        assert_eq!(
            entry_text(
                sel(None),
                Err((ErrorCode::InvalidJobId, "Invalid job id specified".into())),
                &a
            )
            .unwrap_err(),
            "sstat: error: couldn't get steps for job 7"
        );
    }
}
