//! `sacct`: accounting records of jobs and their steps, kept for good by the
//! controller. Options are parsed in `sacct_args`, laid out in `format::sacct`.
//! The tests of the two together (a command line in, Slurm's text out) live here,
//! the one module that uses both, so the renderer never depends on the parser.

use super::client::{CliError, Client};
use super::format::sacct::{help_format, render};
use super::sacct_args::parse;
use crate::wire::messages::Body;

pub fn run(args: &[String]) -> i32 {
    let env: Vec<(String, String)> = std::env::vars().collect();
    let now = chrono::Utc::now().timestamp();
    let a = match parse(args, &env, now) {
        Ok(a) => a,
        // -h, --usage and -V arrive as "errors" that exit 0 on stdout.
        Err(e) if e.exit_code() == 0 => {
            println!("{e}");
            return 0;
        }
        Err(e) => {
            eprintln!("{e}");
            return e.exit_code();
        }
    };
    if a.help_format {
        print!("{}", help_format());
        return 0;
    }
    let mut q = a.query.clone();
    // Like Slurm: users see their own jobs unless they ask for all (-a);
    // root sees everyone's. The controller enforces this too.
    let me = nix::unistd::getuid().as_raw();
    if q.uids.is_empty() && !a.all_users && me != 0 {
        q.uids = vec![me];
    }
    super::block_on(async move {
        let r = async {
            let mut c = Client::connect(None).await?;
            c.call(Body::QueryAcct(q)).await
        }
        .await;
        match r {
            Ok(Body::Acct(jobs)) => {
                print!("{}", render(&jobs, &a, now));
                0
            }
            Ok(other) => {
                eprintln!("sacct: error: unexpected reply {}", other.kind());
                1
            }
            Err(CliError::Refused(e)) => {
                eprintln!("sacct: error: {}", e.message);
                1
            }
            Err(e) => super::report("sacct", &e),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::format::group_name;
    use crate::cli::format::sacct::NO_VAL_ID;
    use crate::cli::format::time::fmt_timestamp;
    use crate::cli::sacct_args::SacctArgs;
    use crate::wire::types::{AcctJob, AcctStep, JobState, StepKind};

    const NOW: i64 = 1_795_240_000;

    fn args(list: &[&str]) -> SacctArgs {
        let argv: Vec<String> = list.iter().map(|s| s.to_string()).collect();
        parse(&argv, &[], NOW).unwrap()
    }

    fn ts(offset: i64) -> String {
        fmt_timestamp(Some(NOW + offset))
    }

    #[allow(clippy::too_many_arguments)]
    fn step(
        kind: StepKind,
        name: &str,
        start: i64,
        end: Option<i64>,
        tasks: u32,
        rss_kb: u64,
        user_ms: u64,
        sys_ms: u64,
    ) -> AcctStep {
        AcctStep {
            kind,
            name: name.to_string(),
            state: if end.is_some() {
                JobState::Completed
            } else {
                JobState::Running
            },
            exit_code: (0, 0),
            start_time: Some(NOW + start),
            end_time: end.map(|e| NOW + e),
            nodes: "node1".to_string(),
            num_nodes: 1,
            num_tasks: tasks,
            alloc_cpus: 2,
            max_rss_kb: rss_kb,
            max_vmsize_kb: rss_kb * 2,
            user_cpu_ms: user_ms,
            system_cpu_ms: sys_ms,
            srun_host: String::new(),
            srun_pid: 0,
            usage: Default::default(),
        }
    }

    /// Job 1000: ran 60 s on node1 with 2 CPUs; steps listed out of order on purpose.
    fn done_job() -> AcctJob {
        AcctJob {
            earlier_runs: Vec::new(),
            job_id: 1000,
            name: "smoke".to_string(),
            user: "root".to_string(),
            uid: 0,
            gid: 0,
            partition: "debug".to_string(),
            account: String::new(),
            qos: "normal".to_string(),
            cluster: "canopy".to_string(),
            state: JobState::Completed,
            reason: "None".to_string(),
            exit_code: (0, 0),
            derived_exit_code: (0, 0),
            submit_time: NOW - 600,
            eligible_time: Some(NOW - 600),
            start_time: Some(NOW - 590),
            end_time: Some(NOW - 530),
            time_limit_min: Some(2),
            nodes: "node1".to_string(),
            num_nodes: 1,
            req_nodes: 1,
            alloc_cpus: 2,
            req_cpus: 2,
            num_tasks: 1,
            req_mem_mb: 1000,
            mem_per_cpu: false,
            workdir: "/home/u".to_string(),
            submit_line: "sbatch run.sh".to_string(),
            priority: 4294,
            restarts: 0,
            comment: String::new(),
            constraints: String::new(),
            steps: vec![
                step(
                    StepKind::Numbered(0),
                    "python",
                    -580,
                    Some(-540),
                    2,
                    1536,
                    30_000,
                    1_000,
                ),
                step(StepKind::Extern, "extern", -590, Some(-530), 1, 0, 0, 0),
                step(
                    StepKind::Batch,
                    "batch",
                    -590,
                    Some(-530),
                    1,
                    1234,
                    1_500,
                    250,
                ),
            ],
            array: None,
            req_gres: Vec::new(),
            alloc_gres: Vec::new(),
            suspended_secs: 0,
        }
    }

    /// Job 1001: still pending, wants 2 nodes, 4 CPUs, 2 GiB per node.
    fn pending_job() -> AcctJob {
        AcctJob {
            job_id: 1001,
            name: "wait".to_string(),
            state: JobState::Pending,
            reason: "Priority".to_string(),
            submit_time: NOW - 100,
            eligible_time: Some(NOW - 100),
            start_time: None,
            end_time: None,
            time_limit_min: None,
            nodes: String::new(),
            num_nodes: 0,
            req_nodes: 2,
            alloc_cpus: 0,
            req_cpus: 4,
            req_mem_mb: 2048,
            steps: Vec::new(),
            ..done_job()
        }
    }

    fn both() -> Vec<AcctJob> {
        // Reverse submit order: rows must still come out oldest first.
        vec![pending_job(), done_job()]
    }

    #[test]
    fn default_format() {
        let out = render(&both(), &args(&["-j", "1000,1001"]), NOW);
        assert_eq!(
            out,
            "\
JobID           JobName  Partition    Account  AllocCPUS      State ExitCode 
------------ ---------- ---------- ---------- ---------- ---------- -------- 
1000              smoke      debug                     2  COMPLETED      0:0 
1000.batch        batch                                2  COMPLETED      0:0 
1000.extern      extern                                2  COMPLETED      0:0 
1000.0           python                                2  COMPLETED      0:0 
1001               wait      debug                     0    PENDING      0:0 
"
        );
    }

    #[test]
    fn parsable2_has_no_trailing_delimiter() {
        let out = render(&both(), &args(&["-P", "-o", "JobID,State,NodeList"]), NOW);
        assert_eq!(
            out,
            "\
JobID|State|NodeList
1000|COMPLETED|node1
1000.batch|COMPLETED|node1
1000.extern|COMPLETED|node1
1000.0|COMPLETED|node1
1001|PENDING|None assigned
"
        );
    }

    #[test]
    fn parsable_ends_every_field() {
        let out = render(
            &[done_job()],
            &args(&["-p", "-X", "-o", "jobid,state"]),
            NOW,
        );
        assert_eq!(out, "JobID|State|\n1000|COMPLETED|\n");
    }

    #[test]
    fn custom_delimiter_only_in_parsable_mode() {
        let out = render(
            &[done_job()],
            &args(&["-P", "--delimiter=::", "-X", "-o", "jobid,jobname,state"]),
            NOW,
        );
        assert_eq!(out, "JobID::JobName::State\n1000::smoke::COMPLETED\n");
        let fixed = render(
            &[done_job()],
            &args(&["--delimiter=::", "-X", "-n", "-o", "jobid,state"]),
            NOW,
        );
        assert_eq!(fixed, "1000          COMPLETED \n");
    }

    #[test]
    fn allocations_hide_steps() {
        let out = render(&both(), &args(&["-X", "-b"]), NOW);
        assert_eq!(
            out,
            "\
JobID             State ExitCode 
------------ ---------- -------- 
1000          COMPLETED      0:0 
1001            PENDING      0:0 
"
        );
    }

    #[test]
    fn noheader_drops_both_header_lines() {
        let out = render(&[pending_job()], &args(&["-n", "-o", "jobid,state"]), NOW);
        assert_eq!(out, "1001            PENDING \n");
        let out = render(
            &[pending_job()],
            &args(&["-n", "-P", "-o", "jobid,state"]),
            NOW,
        );
        assert_eq!(out, "1001|PENDING\n");
    }

    #[test]
    fn widths_prefixes_and_left_justification() {
        let out = render(
            &[done_job()],
            &args(&["-X", "-o", "jobid%-6,JOBN%12,stat%-11,exit%4,nnodes"]),
            NOW,
        );
        assert_eq!(
            out,
            "\
JobID       JobName State       Exit   NNodes 
------ ------------ ----------- ---- -------- 
1000          smoke COMPLETED    0:0        1 
"
        );
    }

    #[test]
    fn long_text_is_cut_with_a_plus_but_numbers_and_times_are_not() {
        let mut job = done_job();
        job.name = "averyverylongname".to_string();
        job.state = JobState::OutOfMemory;
        job.alloc_cpus = 123_456;
        let out = render(
            &[job],
            &args(&["-o", "jobid%6,jobname,state,ncpus%3,elapsed%5,start%10"]),
            NOW,
        );
        let start = ts(-590);
        let step0_start = ts(-580);
        assert_eq!(
            out,
            format!(
                concat!(
                    " JobID    JobName      State NCP Elaps      Start \n",
                    "------ ---------- ---------- --- ----- ---------- \n",
                    "  1000 averyvery+ OUT_OF_ME+ 123456 00:01:00 {d} \n",
                    "1000.+      batch  COMPLETED   2 00:01:00 {d} \n",
                    "1000.+     extern  COMPLETED   2 00:01:00 {d} \n",
                    "1000.0     python  COMPLETED   2 00:00:40 {d0} \n",
                ),
                d = &start[..10],
                d0 = &step0_start[..10]
            )
        );
    }

    #[test]
    fn pending_job_values() {
        let out = render(
            &[pending_job()],
            &args(&[
                "-P",
                "-o",
                "jobid,nodelist,nnodes,alloctres,reqtres,reqmem,start,end,elapsed,timelimit,reason,planned",
            ]),
            NOW,
        );
        assert_eq!(
            out,
            "JobID|NodeList|NNodes|AllocTRES|ReqTRES|ReqMem|Start|End|Elapsed|Timelimit|Reason|Planned\n\
             1001|None assigned|2||billing=4,cpu=4,mem=4G,node=2|4G|Unknown|Unknown|00:00:00|UNLIMITED|Priority|00:01:40\n"
        );
    }

    #[test]
    fn step_values() {
        let out = render(
            &[done_job()],
            &args(&[
                "-P",
                "-o",
                "jobid,jobname,start,end,elapsed,ncpus,ntasks,maxrss,maxvmsize,totalcpu,usercpu,systemcpu,avecpu,alloctres,cputime,partition,user",
            ]),
            NOW,
        );
        let expected = format!(
            "JobID|JobName|Start|End|Elapsed|NCPUS|NTasks|MaxRSS|MaxVMSize|TotalCPU|UserCPU|SystemCPU|AveCPU|AllocTRES|CPUTime|Partition|User\n\
             1000|smoke|{s}|{e}|00:01:00|2||||00:32.750|00:31.500|00:01.250||billing=2,cpu=2,mem=1000M,node=1|00:02:00|debug|root\n\
             1000.batch|batch|{s}|{e}|00:01:00|2|1|1234K|2468K|00:01.750|00:01.500|00:00.250|00:00:01|cpu=2,mem=1000M,node=1|00:02:00||\n\
             1000.extern|extern|{s}|{e}|00:01:00|2|1|||00:00:00|00:00:00|00:00:00|00:00:00|billing=2,cpu=2,mem=1000M,node=1|00:02:00||\n\
             1000.0|python|{s0}|{e0}|00:00:40|2|2|1.50M|3M|00:00:31|00:00:30|00:00:01|00:00:15|cpu=2,mem=1000M,node=1|00:01:20||\n",
            s = ts(-590),
            e = ts(-530),
            s0 = ts(-580),
            e0 = ts(-540),
        );
        assert_eq!(out, expected);
    }

    #[test]
    fn submitit_invocation_and_output_shape() {
        let mut running = done_job();
        running.job_id = 1002;
        running.submit_time = NOW - 50;
        running.state = JobState::Running;
        running.end_time = None;
        running.steps = vec![step(StepKind::Batch, "batch", -40, None, 1, 0, 0, 0)];
        let mut cancelled = pending_job();
        cancelled.job_id = 1003;
        cancelled.submit_time = NOW - 10;
        cancelled.state = JobState::Cancelled;
        cancelled.end_time = Some(NOW - 5);
        let argv = [
            "-o",
            "JobID,State,NodeList",
            "--parsable2",
            "-j",
            "1002",
            "-j",
            "1003",
        ];
        let a = args(&argv);
        assert_eq!(a.query.job_ids, vec![1002, 1003]);
        let out = render(&[cancelled, running], &a, NOW);
        assert_eq!(
            out,
            "\
JobID|State|NodeList
1002|RUNNING|node1
1002.batch|RUNNING|node1
1003|CANCELLED|None assigned
"
        );
    }

    #[test]
    fn snakemake_status_and_efficiency_queries() {
        let status = args(&[
            "-X",
            "--parsable2",
            "--clusters",
            "all",
            "--noheader",
            "--format=JobIdRaw,State",
            "--starttime",
            "2026-11-19T05:00",
            "--endtime",
            "now",
            "--name",
            "run-uuid",
        ]);
        assert_eq!(status.query.names, ["run-uuid"]);
        assert_eq!(
            render(&both(), &status, NOW),
            "1000|COMPLETED\n1001|PENDING\n"
        );
        let mut job = done_job();
        job.comment = "rule_hello".to_string();
        let efficiency = args(&[
            "--name=run-uuid",
            "--parsable2",
            "--noheader",
            "--format=JobID,JobName,Comment,Elapsed,TotalCPU,NNodes,NCPUS,MaxRSS,ReqMem",
        ]);
        assert_eq!(
            render(&[job], &efficiency, NOW),
            "1000|smoke|rule_hello|00:01:00|00:32.750|1|2||1000M\n\
             1000.batch|batch||00:01:00|00:01.750|1|2|1234K|\n\
             1000.extern|extern||00:01:00|00:00:00|1|2||\n\
             1000.0|python||00:00:40|00:00:31|1|2|1.50M|\n"
        );
        // NODE_FAIL lookup: the node list padded to 256 on the left-justified side.
        let node = args(&["-j", "1000", "-n", "-X", "-o", "nodelist%-256"]);
        let out = render(&[done_job()], &node, NOW);
        assert_eq!(out.len(), 258);
        assert_eq!(out.trim(), "node1");
    }

    #[test]
    fn running_job_measures_up_to_now() {
        let mut job = done_job();
        job.state = JobState::Running;
        job.end_time = None;
        job.steps = vec![step(
            StepKind::Numbered(3),
            "srun",
            -100,
            None,
            1,
            0,
            9_000,
            0,
        )];
        let out = render(
            &[job],
            &args(&["-P", "-o", "jobid,state,end,elapsedraw,cputimeraw,totalcpu"]),
            NOW,
        );
        // The running step's CPU time is not yet counted into the job's total.
        assert_eq!(
            out,
            "JobID|State|End|ElapsedRaw|CPUTimeRAW|TotalCPU\n\
             1000|RUNNING|Unknown|590|1180|00:00:00\n\
             1000.3|RUNNING|Unknown|100|200|00:00:09\n"
        );
    }

    #[test]
    fn step_selection_prints_only_that_step() {
        let out = render(
            &both(),
            &args(&["-P", "-o", "jobid", "-j", "1000.batch,1001"]),
            NOW,
        );
        assert_eq!(out, "JobID\n1000.batch\n1001\n");
        let out = render(
            &both(),
            &args(&["-P", "-o", "jobid", "-X", "-j", "1000.0"]),
            NOW,
        );
        assert_eq!(out, "JobID\n");
    }

    #[test]
    fn account_and_node_filters_apply_client_side() {
        let mut other = done_job();
        other.job_id = 1005;
        other.account = "physics".to_string();
        other.nodes = "node[2-3]".to_string();
        let jobs = vec![done_job(), other, pending_job()];
        let out = render(&jobs, &args(&["-XnP", "-o", "jobid", "-A", "PHYSICS"]), NOW);
        assert_eq!(out, "1005\n");
        let out = render(&jobs, &args(&["-XnP", "-o", "jobid", "-N", "node3"]), NOW);
        assert_eq!(out, "1005\n");
        let out = render(
            &jobs,
            &args(&["-XnP", "-o", "jobid", "-N", "node1,node2"]),
            NOW,
        );
        assert_eq!(out, "1000\n1005\n");
    }

    #[test]
    fn exit_codes_timelimits_and_job_only_fields() {
        let mut job = done_job();
        job.state = JobState::Failed;
        job.exit_code = (137, 0);
        job.derived_exit_code = (3, 0);
        job.time_limit_min = Some(1440);
        job.steps = vec![AcctStep {
            exit_code: (0, 9),
            state: JobState::Cancelled,
            ..step(StepKind::Batch, "batch", -590, Some(-530), 1, 0, 0, 0)
        }];
        let out = render(
            &[job],
            &args(&[
                "-P",
                "-o",
                "jobid,state,exitcode,derivedexitcode,timelimit,timelimitraw,priority,uid,gid,restarts,qos,cluster,workdir,submitline",
            ]),
            NOW,
        );
        assert_eq!(
            out,
            "JobID|State|ExitCode|DerivedExitCode|Timelimit|TimelimitRaw|Priority|UID|GID|Restarts|QOS|Cluster|WorkDir|SubmitLine\n\
             1000|FAILED|9:0|3:0|1-00:00:00|1440|4294|0|0|0|normal|canopy|/home/u|sbatch run.sh\n\
             1000.batch|CANCELLED|0:9|||||||||canopy||\n"
        );
    }

    #[test]
    fn unrecorded_fields_print_empty_and_counts_blank_in_fixed_layout() {
        let out = render(
            &[done_job()],
            &args(&["-X", "-o", "maxdiskread,ntasks,wckey"]),
            NOW,
        );
        assert_eq!(
            out,
            concat!(
                " MaxDiskRead   NTasks      WCKey \n",
                "------------ -------- ---------- \n",
                "                                 \n",
            )
        );
    }

    #[test]
    fn group_names_and_the_step_group_quirk() {
        let out = render(
            &[done_job()],
            &args(&["-P", "-o", "jobid,group", "-j", "1000.batch,1000"]),
            NOW,
        );
        let step_group = group_name(NO_VAL_ID).unwrap_or_else(|| NO_VAL_ID.to_string());
        assert!(out.starts_with("JobID|Group\n1000|root\n1000.batch|"));
        assert!(out.contains(&format!("1000.batch|{step_group}\n")));
    }

    #[test]
    fn units_and_noconvert() {
        let mut job = done_job();
        job.req_mem_mb = 1536;
        job.steps.clear();
        let fields = ["-XnP", "-o", "reqmem,reqtres,reqnodes,allocnodes"];
        let plain = render(&[job.clone()], &args(&fields), NOW);
        assert_eq!(plain, "1.50G|billing=2,cpu=2,mem=1.50G,node=1|1|1\n");
        let mut with_units = fields.to_vec();
        with_units.push("--units=M");
        let out = render(&[job.clone()], &args(&with_units), NOW);
        assert_eq!(out, "1536M|billing=2,cpu=2,mem=1536M,node=1|0.00M|1\n");
        let mut noconvert = fields.to_vec();
        noconvert.push("--noconvert");
        job.req_mem_mb = 4096;
        let out = render(&[job], &args(&noconvert), NOW);
        assert_eq!(out, "4096M|billing=2,cpu=2,mem=4096M,node=1|1|1\n");
    }

    #[test]
    fn rows_come_out_in_submit_order() {
        let mut late = done_job();
        late.job_id = 7;
        late.submit_time = NOW;
        let mut early = done_job();
        early.job_id = 9;
        early.submit_time = NOW - 5000;
        let out = render(&[late, early], &args(&["-XnP", "-o", "jobid"]), NOW);
        assert_eq!(out, "9\n7\n");
    }

    #[test]
    fn zero_width_columns() {
        let out = render(&[done_job()], &args(&["-X", "-o", "jobid%0,ntasks%0"]), NOW);
        // Text prints nothing at width 0; an unset number still prints a blank.
        assert_eq!(out, "  \n  \n   \n");
    }
}
