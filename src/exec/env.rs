//! The environment a batch script starts with: the environment submitted with
//! the job (already filtered by `--export`) overlaid with the `SLURM_*`
//! variables that describe the job, as Slurm sets them (slurm.md §8).
//!
//! This module only builds the list of variables from a [`JobLaunch`]. It
//! does not start processes, and it does not add what only the executor knows
//! (`SLURM_TASK_PID`, the per-task variables of `srun` steps).
//!
//! N.B. Variables this module owns are always either set from the launch or
//! absent: a value inherited from the submitter's environment (e.g. the
//! `SLURM_NTASKS` of an enclosing job, when `sbatch` runs inside one) is
//! dropped rather than leaking into a job that did not ask for it.

use crate::config::hostlist;
use crate::wire::messages::JobLaunch;
use crate::wire::types::ArrayTask;

/// Variables that are set only in some jobs. Any inherited copy is removed
/// first, so that the variable is present exactly when this job sets it.
const CONDITIONAL: &[&str] = &[
    "SLURM_NTASKS",
    "SLURM_NPROCS",
    "SLURM_CPUS_PER_TASK",
    "SLURM_MEM_PER_NODE",
    "SLURM_MEM_PER_CPU",
    "SLURM_JOB_END_TIME",
    "SLURM_JOB_GROUP",
    "SLURM_ARRAY_JOB_ID",
    "SLURM_ARRAY_TASK_ID",
    "SLURM_ARRAY_TASK_COUNT",
    "SLURM_ARRAY_TASK_MIN",
    "SLURM_ARRAY_TASK_MAX",
    "SLURM_ARRAY_TASK_STEP",
    "SLURM_JOB_GPUS",
    "SLURM_GPUS_ON_NODE",
    "CUDA_VISIBLE_DEVICES",
    "GPU_DEVICE_ORDINAL",
    "SLURM_GPUS",
    "SLURM_GPUS_PER_NODE",
    "SLURM_GPUS_PER_TASK",
    "SLURM_GPUS_PER_SOCKET",
    "SLURM_CPUS_PER_GPU",
    "SLURM_MEM_PER_GPU",
];

/// The GPU variables of a job or step on one node: `SLURM_JOB_GPUS` (or
/// `SLURM_STEP_GPUS`, per `ids_var`) with the node's GPU indices, and
/// `CUDA_VISIBLE_DEVICES`/`GPU_DEVICE_ORDINAL` with what the program should
/// open: the same indices, or 0..n when the node fences devices with
/// cgroups (the program then sees only its own GPUs, renumbered from 0).
pub fn gpu_vars(gpus: &[u32], ids_var: &str, renumbered: bool) -> Vec<(String, String)> {
    if gpus.is_empty() {
        return Vec::new();
    }
    let list = |ids: &mut dyn Iterator<Item = u32>| {
        ids.map(|i| i.to_string()).collect::<Vec<_>>().join(",")
    };
    let global = list(&mut gpus.iter().copied());
    let visible = if renumbered {
        list(&mut (0..gpus.len() as u32))
    } else {
        global.clone()
    };
    vec![
        (ids_var.to_string(), global),
        ("SLURM_GPUS_ON_NODE".to_string(), gpus.len().to_string()),
        ("CUDA_VISIBLE_DEVICES".to_string(), visible.clone()),
        ("GPU_DEVICE_ORDINAL".to_string(), visible),
    ]
}

/// `SLURM_GPUS`, `SLURM_GPUS_PER_NODE`, ... echoing what was asked.
pub fn gpu_option_vars(r: &crate::model::tres::ResourceRequest) -> Vec<(String, String)> {
    let text = |g: &crate::model::tres::GresRequest| match &g.type_ {
        Some(t) => format!("{t}:{}", g.count),
        None => g.count.to_string(),
    };
    let mut v = Vec::new();
    let mut put = |k: &str, val: Option<String>| {
        if let Some(val) = val {
            v.push((k.to_string(), val));
        }
    };
    put("SLURM_GPUS", r.gpus.as_ref().map(text));
    put("SLURM_GPUS_PER_NODE", r.gpus_per_node.as_ref().map(text));
    put("SLURM_GPUS_PER_TASK", r.gpus_per_task.as_ref().map(text));
    put(
        "SLURM_GPUS_PER_SOCKET",
        r.gpus_per_socket.as_ref().map(text),
    );
    put("SLURM_CPUS_PER_GPU", r.cpus_per_gpu.map(|n| n.to_string()));
    put("SLURM_MEM_PER_GPU", r.mem_per_gpu_mb.map(|n| n.to_string()));
    v
}

/// The full environment of the batch script of `launch`, run on `node_name`,
/// with `SLURM_CONF` pointing at `conf_path`. Submitted variables come first,
/// in their order; the job's variables follow and take precedence.
pub fn batch_env(launch: &JobLaunch, node_name: &str, conf_path: &str) -> Vec<(String, String)> {
    let job = job_vars(launch, node_name, conf_path);
    let mut env: Vec<(String, String)> = launch
        .env
        .iter()
        .filter(|(key, _)| {
            !CONDITIONAL.contains(&key.as_str()) && !job.iter().any(|(k, _)| k == key)
        })
        .cloned()
        .collect();
    env.extend(job);
    env
}

/// Slurm's run-length form of a per-node count list: consecutive equal values
/// become `value(xN)`, e.g. `[72, 72, 36]` → `72(x2),36`.
pub fn compress_counts(counts: &[u32]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut rest = counts;
    while let Some(&first) = rest.first() {
        let run = rest.iter().take_while(|&&c| c == first).count();
        parts.push(if run > 1 {
            format!("{first}(x{run})")
        } else {
            first.to_string()
        });
        rest = &rest[run..];
    }
    parts.join(",")
}

/// Position of `node_name` in the job's node list. A name that cannot be
/// found (which the controller should never send) counts as the first node,
/// since the batch script runs on the first node in Slurm's own scheme.
fn node_index(launch: &JobLaunch, node_name: &str) -> usize {
    hostlist::expand(&launch.nodelist)
        .ok()
        .and_then(|nodes| nodes.iter().position(|n| n == node_name))
        .unwrap_or(0)
}

fn job_vars(launch: &JobLaunch, node_name: &str, conf_path: &str) -> Vec<(String, String)> {
    let index = node_index(launch, node_name);
    let cpus_here = launch.cpus_per_node.get(index).copied().unwrap_or(0);
    let mut vars = Vars::default();

    vars.set("SLURM_JOB_ID", launch.job_id);
    vars.set("SLURM_JOBID", launch.job_id);
    vars.set("SLURM_JOB_NAME", &launch.name);
    vars.set("SLURM_JOB_NODELIST", &launch.nodelist);
    vars.set("SLURM_NODELIST", &launch.nodelist);
    vars.set("SLURM_JOB_NUM_NODES", launch.num_nodes);
    vars.set("SLURM_NNODES", launch.num_nodes);
    vars.set("SLURM_JOB_PARTITION", &launch.partition);
    if let Some(a) = &launch.account {
        vars.set("SLURM_JOB_ACCOUNT", a);
    }
    vars.set(
        "SLURM_JOB_CPUS_PER_NODE",
        compress_counts(&launch.cpus_per_node),
    );
    vars.set(
        "SLURM_TASKS_PER_NODE",
        compress_counts(&launch.tasks_per_node),
    );
    if launch.ntasks_set {
        vars.set("SLURM_NTASKS", launch.ntasks);
        vars.set("SLURM_NPROCS", launch.ntasks);
    }
    if let Some(cpt) = launch.cpus_per_task {
        vars.set("SLURM_CPUS_PER_TASK", cpt);
    }
    vars.set("SLURM_CPUS_ON_NODE", cpus_here);
    let gpus = launch.held.get(index).map(|h| h.gpus()).unwrap_or_default();
    for (k, v) in gpu_vars(&gpus, "SLURM_JOB_GPUS", false)
        .into_iter()
        .chain(gpu_option_vars(&launch.resources))
    {
        vars.set(&k, v);
    }
    if let Some(mb) = launch.mem_per_node_mb {
        vars.set("SLURM_MEM_PER_NODE", mb);
    } else if let Some(mb) = launch.mem_per_cpu_mb {
        vars.set("SLURM_MEM_PER_CPU", mb);
    }
    vars.set("SLURM_CLUSTER_NAME", &launch.cluster);
    vars.set("SLURM_SUBMIT_DIR", &launch.submit_dir);
    vars.set("SLURM_SUBMIT_HOST", &launch.submit_host);
    vars.set("SLURM_JOB_USER", &launch.user);
    vars.set("SLURM_JOB_UID", launch.uid);
    vars.set("SLURM_JOB_GID", launch.gid);
    if let Some(group) = super::identity::group_name(launch.gid) {
        vars.set("SLURM_JOB_GROUP", group);
    }
    vars.set("SLURM_JOB_START_TIME", launch.start_time);
    if let Some(end) = end_time(launch) {
        vars.set("SLURM_JOB_END_TIME", end);
    }
    vars.set("SLURM_RESTART_COUNT", launch.restarts);
    if launch.open_append {
        // As sbatch does for --open-mode=append: srun steps inside then
        // append to their files too (submitit shares one with the script).
        vars.set("SLURM_OPEN_MODE", "a");
    }
    if let Some(a) = &launch.array {
        array_vars(&mut vars.0, a);
    }
    vars.set("SLURM_NODEID", index);
    vars.set("SLURM_PROCID", 0);
    vars.set("SLURM_LOCALID", 0);
    vars.set("SLURM_GTIDS", 0);
    vars.set("SLURMD_NODENAME", node_name);
    vars.set("SLURM_CONF", conf_path);
    vars.set("ENVIRONMENT", "BATCH");
    vars.0
}

/// `SLURM_ARRAY_*` for an array task (set only for arrays: clients test
/// their presence).
pub fn array_vars(vars: &mut Vec<(String, String)>, a: &ArrayTask) {
    for (k, v) in [
        ("SLURM_ARRAY_JOB_ID", a.array_job_id),
        ("SLURM_ARRAY_TASK_ID", a.task_id),
        ("SLURM_ARRAY_TASK_COUNT", a.count),
        ("SLURM_ARRAY_TASK_MIN", a.min),
        ("SLURM_ARRAY_TASK_MAX", a.max),
        ("SLURM_ARRAY_TASK_STEP", a.step),
    ] {
        vars.retain(|(key, _)| key != k);
        vars.push((k.to_string(), v.to_string()));
    }
}

/// `start + limit` for a limited job. `None` and `Some(0)` both mean
/// "no limit" (the submit convention), so neither gets an end time.
fn end_time(launch: &JobLaunch) -> Option<i64> {
    let minutes = launch.time_limit_min.filter(|&m| m > 0)?;
    launch.start_time.checked_add(i64::from(minutes) * 60)
}

/// Ordered name/value list with a typed `set`.
#[derive(Default)]
struct Vars(Vec<(String, String)>);

impl Vars {
    fn set(&mut self, key: &str, value: impl ToString) {
        self.0.push((key.to_string(), value.to_string()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn launch() -> JobLaunch {
        JobLaunch {
            job_id: 77,
            name: "train".to_string(),
            user: "alice".to_string(),
            uid: 1000,
            gid: 0,
            partition: "batch".to_string(),
            cluster: "canopy".to_string(),
            batch_host: "n01".to_string(),
            nodelist: "n[01-04]".to_string(),
            num_nodes: 4,
            cpus_per_node: vec![72, 72, 72, 36],
            tasks_per_node: vec![2, 2, 2, 1],
            ntasks: 7,
            ntasks_set: false,
            cpus_per_task: None,
            mem_per_node_mb: None,
            mem_per_cpu_mb: None,
            time_limit_min: None,
            script: "#!/bin/sh\ntrue\n".to_string(),
            env: vec![
                ("PATH".to_string(), "/usr/bin:/bin".to_string()),
                ("HOME".to_string(), "/home/alice".to_string()),
            ],
            workdir: "/home/alice/run".to_string(),
            submit_dir: "/home/alice".to_string(),
            submit_host: "login1".to_string(),
            stdout: "slurm-%j.out".to_string(),
            stderr: None,
            stdin: None,
            start_time: 1_700_000_000,
            restarts: 0,
            interactive: false,
            script_args: Vec::new(),
            array: None,
            open_append: false,
            account: None,
            held: vec![crate::wire::messages::NodeShare {
                cpu_ids: vec![0, 1],
                mem_mb: 0,
                gres: vec![crate::model::tres::GresAlloc {
                    name: "gpu".into(),
                    type_: Some("a100".into()),
                    indices: vec![1, 3],
                    count: 2,
                }],
            }]
            .into(),
            resources: Default::default(),
        }
    }

    fn get<'a>(env: &'a [(String, String)], key: &str) -> Option<&'a str> {
        let hits: Vec<&str> = env
            .iter()
            .filter(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
            .collect();
        assert!(hits.len() <= 1, "{key} set {} times", hits.len());
        hits.first().copied()
    }

    #[test]
    fn compress_counts_runs() {
        assert_eq!(compress_counts(&[72, 72, 36]), "72(x2),36");
        assert_eq!(compress_counts(&[2, 2, 2, 1]), "2(x3),1");
        assert_eq!(compress_counts(&[1, 2, 1]), "1,2,1");
        assert_eq!(compress_counts(&[4]), "4");
        assert_eq!(compress_counts(&[3, 3]), "3(x2)");
        assert_eq!(compress_counts(&[]), "");
    }

    #[test]
    fn core_job_variables() {
        let env = batch_env(&launch(), "n03", "/etc/canopy/slurm.conf");
        let expect = [
            ("SLURM_JOB_ID", "77"),
            ("SLURM_JOBID", "77"),
            ("SLURM_JOB_NAME", "train"),
            ("SLURM_JOB_NODELIST", "n[01-04]"),
            ("SLURM_NODELIST", "n[01-04]"),
            ("SLURM_JOB_NUM_NODES", "4"),
            ("SLURM_NNODES", "4"),
            ("SLURM_JOB_PARTITION", "batch"),
            ("SLURM_JOB_CPUS_PER_NODE", "72(x3),36"),
            ("SLURM_TASKS_PER_NODE", "2(x3),1"),
            ("SLURM_CPUS_ON_NODE", "72"),
            ("SLURM_CLUSTER_NAME", "canopy"),
            ("SLURM_SUBMIT_DIR", "/home/alice"),
            ("SLURM_SUBMIT_HOST", "login1"),
            ("SLURM_JOB_USER", "alice"),
            ("SLURM_JOB_UID", "1000"),
            ("SLURM_JOB_GID", "0"),
            ("SLURM_JOB_START_TIME", "1700000000"),
            ("SLURM_RESTART_COUNT", "0"),
            ("SLURM_NODEID", "2"),
            ("SLURM_PROCID", "0"),
            ("SLURM_LOCALID", "0"),
            ("SLURM_GTIDS", "0"),
            ("SLURMD_NODENAME", "n03"),
            ("SLURM_CONF", "/etc/canopy/slurm.conf"),
            ("ENVIRONMENT", "BATCH"),
        ];
        for (key, value) in expect {
            assert_eq!(get(&env, key), Some(value), "{key}");
        }
    }

    #[test]
    fn gpus_are_named_on_their_node_only() {
        let env = batch_env(&launch(), "n01", "/c");
        assert_eq!(get(&env, "SLURM_JOB_GPUS"), Some("1,3"));
        assert_eq!(get(&env, "CUDA_VISIBLE_DEVICES"), Some("1,3"));
        assert_eq!(get(&env, "GPU_DEVICE_ORDINAL"), Some("1,3"));
        assert_eq!(get(&env, "SLURM_GPUS_ON_NODE"), Some("2"));
        // The second node holds no GPU: no variable, not even inherited.
        let mut l = launch();
        l.env.push(("CUDA_VISIBLE_DEVICES".into(), "7".into()));
        let env = batch_env(&l, "n02", "/c");
        assert_eq!(get(&env, "CUDA_VISIBLE_DEVICES"), None);
        assert_eq!(get(&env, "SLURM_JOB_GPUS"), None);
        // Fenced devices are renumbered from 0.
        let v = gpu_vars(&[1, 3], "SLURM_STEP_GPUS", true);
        assert_eq!(v[0], ("SLURM_STEP_GPUS".into(), "1,3".into()));
        assert_eq!(v[2], ("CUDA_VISIBLE_DEVICES".into(), "0,1".into()));
    }

    #[test]
    fn cpus_on_node_follows_the_node() {
        let env = batch_env(&launch(), "n04", "/c");
        assert_eq!(get(&env, "SLURM_CPUS_ON_NODE"), Some("36"));
        assert_eq!(get(&env, "SLURM_NODEID"), Some("3"));
    }

    #[test]
    fn unknown_node_counts_as_first() {
        let env = batch_env(&launch(), "elsewhere", "/c");
        assert_eq!(get(&env, "SLURM_NODEID"), Some("0"));
        assert_eq!(get(&env, "SLURM_CPUS_ON_NODE"), Some("72"));
        let mut broken = launch();
        broken.nodelist = "n[01-".to_string();
        broken.cpus_per_node.clear();
        let env = batch_env(&broken, "n01", "/c");
        assert_eq!(get(&env, "SLURM_NODEID"), Some("0"));
        assert_eq!(get(&env, "SLURM_CPUS_ON_NODE"), Some("0"));
    }

    #[test]
    fn ntasks_only_when_requested() {
        let env = batch_env(&launch(), "n01", "/c");
        assert_eq!(get(&env, "SLURM_NTASKS"), None);
        assert_eq!(get(&env, "SLURM_NPROCS"), None);

        let mut asked = launch();
        asked.ntasks_set = true;
        let env = batch_env(&asked, "n01", "/c");
        assert_eq!(get(&env, "SLURM_NTASKS"), Some("7"));
        assert_eq!(get(&env, "SLURM_NPROCS"), Some("7"));
    }

    #[test]
    fn cpus_per_task_only_when_given() {
        assert_eq!(
            get(&batch_env(&launch(), "n01", "/c"), "SLURM_CPUS_PER_TASK"),
            None
        );
        let mut given = launch();
        given.cpus_per_task = Some(4);
        let env = batch_env(&given, "n01", "/c");
        assert_eq!(get(&env, "SLURM_CPUS_PER_TASK"), Some("4"));
    }

    #[test]
    fn memory_per_node_or_per_cpu() {
        let env = batch_env(&launch(), "n01", "/c");
        assert_eq!(get(&env, "SLURM_MEM_PER_NODE"), None);
        assert_eq!(get(&env, "SLURM_MEM_PER_CPU"), None);

        let mut per_node = launch();
        per_node.mem_per_node_mb = Some(4096);
        let env = batch_env(&per_node, "n01", "/c");
        assert_eq!(get(&env, "SLURM_MEM_PER_NODE"), Some("4096"));
        assert_eq!(get(&env, "SLURM_MEM_PER_CPU"), None);

        let mut per_cpu = launch();
        per_cpu.mem_per_cpu_mb = Some(512);
        let env = batch_env(&per_cpu, "n01", "/c");
        assert_eq!(get(&env, "SLURM_MEM_PER_CPU"), Some("512"));
        assert_eq!(get(&env, "SLURM_MEM_PER_NODE"), None);
    }

    #[test]
    fn end_time_only_when_limited() {
        assert_eq!(
            get(&batch_env(&launch(), "n01", "/c"), "SLURM_JOB_END_TIME"),
            None
        );
        let mut unlimited = launch();
        unlimited.time_limit_min = Some(0);
        let env = batch_env(&unlimited, "n01", "/c");
        assert_eq!(get(&env, "SLURM_JOB_END_TIME"), None);
        let mut limited = launch();
        limited.time_limit_min = Some(90);
        let env = batch_env(&limited, "n01", "/c");
        assert_eq!(get(&env, "SLURM_JOB_END_TIME"), Some("1700005400"));
    }

    #[test]
    fn job_group_from_gid() {
        // gid 0 is "root" on every Linux system this runs on.
        let env = batch_env(&launch(), "n01", "/c");
        assert_eq!(get(&env, "SLURM_JOB_GROUP"), Some("root"));
    }

    #[test]
    fn unknown_group_is_left_out() {
        let mut l = launch();
        l.gid = 3_999_999_999;
        l.env
            .push(("SLURM_JOB_GROUP".to_string(), "stale".to_string()));
        let env = batch_env(&l, "n01", "/c");
        assert_eq!(get(&env, "SLURM_JOB_GROUP"), None);
        assert_eq!(get(&env, "SLURM_JOB_GID"), Some("3999999999"));
    }

    #[test]
    fn submitted_env_first_job_vars_override() {
        let mut l = launch();
        l.env
            .push(("SLURM_JOB_NAME".to_string(), "stale".to_string()));
        l.env.push(("SLURM_NTASKS".to_string(), "99".to_string()));
        l.env
            .push(("SLURM_ARRAY_TASK_ID".to_string(), "3".to_string()));
        l.env
            .push(("SLURM_EXPORT_ME".to_string(), "kept".to_string()));
        let env = batch_env(&l, "n01", "/c");
        // Submitted variables keep their order at the front.
        assert_eq!(env[0], ("PATH".to_string(), "/usr/bin:/bin".to_string()));
        assert_eq!(env[1], ("HOME".to_string(), "/home/alice".to_string()));
        assert_eq!(env[2], ("SLURM_EXPORT_ME".to_string(), "kept".to_string()));
        assert_eq!(env[3].0, "SLURM_JOB_ID");
        assert_eq!(get(&env, "SLURM_JOB_NAME"), Some("train"));
        // Inherited values of variables this job does not set are dropped.
        assert_eq!(get(&env, "SLURM_NTASKS"), None);
        assert_eq!(get(&env, "SLURM_ARRAY_TASK_ID"), None);
    }
}
