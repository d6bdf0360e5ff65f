//! `prio`: priority/multifactor's cost in the production controller core,
//! driven directly in virtual time (the core reads no clock): a full
//! cluster, many pending jobs across users in accounts; the time of one
//! `PriorityCalcPeriod` calculation (decay, accrual, Fair Tree, every
//! pending job re-prioritised), of a submission (its priority at once),
//! and of an sshare and sprio answer. (Nothing runs: no node registers,
//! so usage is not exercised; a job's end costs one pass of fair share
//! over the tree, about what sshare's answer costs.)

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use canopy::config::Config;
use canopy::ctld::{Command, Core, Output};
use canopy::model::job::JobSubmit;
use canopy::policy::authz::Caller;
use canopy::wire::priority::{PriorityQuery, ShareQuery};

use super::Lcg;
use crate::report::Row;

pub struct Opts {
    pub nodes: u32,
    pub jobs: u32,
    pub users: u32,
    pub accounts: u32,
    pub rounds: u32,
}

fn percentile(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v.get(((v.len() as f64 - 1.0) * p).round() as usize)
        .copied()
        .unwrap_or(0.0)
}

pub fn run(o: &Opts, progress: &mut dyn FnMut(&str)) -> Result<Vec<Row>> {
    if o.jobs == 0 || o.users == 0 || o.accounts == 0 || o.nodes == 0 {
        bail!("--jobs, --users, --accounts and --nodes must be at least 1");
    }
    let text = format!(
        "ClusterName=lt\nSlurmctldHost=c(127.0.0.1)\nNodeName=n[1-{}] CPUs=4\n\
         PartitionName=p Nodes=ALL Default=YES\nPriorityType=priority/multifactor\n\
         PriorityWeightFairshare=100000\nPriorityWeightAge=1000\nPriorityWeightJobSize=100\n\
         PriorityWeightTRES=CPU=100\nMaxJobCount={}\n",
        o.nodes,
        o.jobs.saturating_mul(2).max(10_000)
    );
    let conf = Config::parse_str(&text, std::path::Path::new("/lt/slurm.conf"))
        .context("the scenario's slurm.conf")?;
    let t0 = 1_800_000_000i64;
    let (mut core, _) = Core::recover(Arc::new(conf), vec![], None, &HashMap::new(), t0);
    core.restore_usage(None, t0);
    let mut rng = Lcg::new(16);
    let submit = |core: &mut Core, rng: &mut Lcg, now: i64| -> Result<u32> {
        let u = rng.below(o.users);
        let s = JobSubmit {
            name: "lt".into(),
            user: format!("u{u}"),
            uid: 1000 + u,
            account: Some(format!("a{}", u % o.accounts)),
            ntasks: Some(1 + rng.below(4)),
            time_limit_min: Some(10 + rng.below(600)),
            script: "#!/bin/sh\n".into(),
            ..Default::default()
        };
        let out = core.apply(
            now,
            Command::Submit {
                submit: Box::new(s),
                caller: Caller::ROOT,
            },
        );
        match out.reply {
            Some(canopy::ctld::Reply::Submit(Ok(r))) => Ok(r.job_id),
            other => bail!("submit refused: {other:?}"),
        }
    };
    // Every job pending (no node is up), some "run" through their usage:
    // each user gets some usage as if their jobs had run.
    progress(&format!(
        "prio: {} pending jobs, {} users in {} accounts, {} nodes",
        o.jobs, o.users, o.accounts, o.nodes
    ));
    let mut submit_ms = Vec::with_capacity(o.jobs as usize);
    for i in 0..o.jobs {
        let now = t0 + i64::from(i / 100);
        let t = Instant::now();
        submit(&mut core, &mut rng, now)?;
        submit_ms.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let mut calc_ms = Vec::new();
    let mut changed = 0;
    for r in 0..o.rounds.max(1) {
        let now = t0 + 3600 * i64::from(r + 1);
        let mut out = Output::default();
        let t = Instant::now();
        core.priority_calc(now, &mut out);
        calc_ms.push(t.elapsed().as_secs_f64() * 1e3);
        changed = out.persist.len();
    }
    let t = Instant::now();
    let shares = core.share_report(
        &ShareQuery {
            all_users: true,
            ..Default::default()
        },
        None,
    );
    let sshare_ms = t.elapsed().as_secs_f64() * 1e3;
    let t = Instant::now();
    let sprio = core.priority_report(&PriorityQuery::default(), Caller::ROOT, t0 + 7200);
    let sprio_ms = t.elapsed().as_secs_f64() * 1e3;
    let row = Row::new("prio")
        .set("nodes", o.nodes)
        .set("pending", o.jobs)
        .set("users", o.users)
        .set("accounts", o.accounts)
        .num("calc_median_ms", percentile(&mut calc_ms.clone(), 0.5))
        .num("calc_max_ms", percentile(&mut calc_ms, 1.0))
        .set("calc_records_written", changed as u64)
        .num("submit_p50_ms", percentile(&mut submit_ms.clone(), 0.5))
        .num("submit_p99_ms", percentile(&mut submit_ms, 0.99))
        .num("sshare_ms", sshare_ms)
        .set("sshare_rows", shares.rows.len() as u64)
        .num("sprio_ms", sprio_ms)
        .set("sprio_rows", sprio.jobs.len() as u64);
    progress(&row.json());
    Ok(vec![row])
}
