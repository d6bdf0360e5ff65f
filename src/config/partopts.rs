//! Reading the partition settings of [`PartOpts`] (Hidden, AllowGroups,
//! OverSubscribe/Shared, the DefMem/MaxMem family, DefCpuPerGPU,
//! DefMemPerGPU, MaxCPUsPerNode, ExclusiveUser, LLN, RootOnly, ReqResv,
//! Alternate) and the global memory keys partitions fall back to. What the
//! values do is `policy::partition`'s and the scheduler's business.

use super::build::{bad_value, int_in, require_set, yes_no, Builder};
use super::parse::{Item, Loc};
use super::types::ConfigError;
use super::units;
use crate::model::part_opts::{MemDefaults, MemPer, OverSubscribe, PartOpts};

/// What one PartitionName line (or its DEFAULT lines) set; `None` = not given.
#[derive(Debug, Clone, Default)]
pub(super) struct PartOptsSpec {
    hidden: Option<bool>,
    allow_groups: Option<Option<Vec<String>>>,
    oversubscribe: Option<OverSubscribe>,
    /// `Shared=`, the old name: any OverSubscribe (the line's or DEFAULT's)
    /// comes first, as in Slurm's reader.
    shared: Option<OverSubscribe>,
    def_mem: Option<Option<MemPer>>,
    max_mem: Option<Option<MemPer>>,
    def_cpu_per_gpu: Option<Option<u32>>,
    def_mem_per_gpu: Option<Option<u64>>,
    max_cpus_per_node: Option<Option<u32>>,
    exclusive_user: Option<bool>,
    lln: Option<bool>,
    root_only: Option<bool>,
    req_resv: Option<bool>,
    alternate: Option<Option<String>>,
}

impl PartOptsSpec {
    /// This line's values over `base` (the DEFAULT lines').
    pub(super) fn over(self, base: &PartOptsSpec) -> PartOptsSpec {
        PartOptsSpec {
            hidden: self.hidden.or(base.hidden),
            allow_groups: self.allow_groups.or_else(|| base.allow_groups.clone()),
            oversubscribe: self.oversubscribe.or(base.oversubscribe),
            shared: self.shared.or(base.shared),
            def_mem: self.def_mem.or(base.def_mem),
            max_mem: self.max_mem.or(base.max_mem),
            def_cpu_per_gpu: self.def_cpu_per_gpu.or(base.def_cpu_per_gpu),
            def_mem_per_gpu: self.def_mem_per_gpu.or(base.def_mem_per_gpu),
            max_cpus_per_node: self.max_cpus_per_node.or(base.max_cpus_per_node),
            exclusive_user: self.exclusive_user.or(base.exclusive_user),
            lln: self.lln.or(base.lln),
            root_only: self.root_only.or(base.root_only),
            req_resv: self.req_resv.or(base.req_resv),
            alternate: self.alternate.or_else(|| base.alternate.clone()),
        }
    }

    pub(super) fn finish(self) -> PartOpts {
        PartOpts {
            hidden: self.hidden.unwrap_or(false),
            allow_groups: self.allow_groups.flatten(),
            oversubscribe: self.oversubscribe.or(self.shared).unwrap_or_default(),
            mem: MemDefaults {
                def_mem: self.def_mem.flatten(),
                max_mem: self.max_mem.flatten(),
                def_cpu_per_gpu: self.def_cpu_per_gpu.flatten(),
                def_mem_per_gpu: self.def_mem_per_gpu.flatten(),
            },
            max_cpus_per_node: self.max_cpus_per_node.flatten(),
            exclusive_user: self.exclusive_user.unwrap_or(false),
            lln: self.lln.unwrap_or(false),
            root_only: self.root_only.unwrap_or(false),
            req_resv: self.req_resv.unwrap_or(false),
            alternate: self.alternate.flatten(),
        }
    }
}

/// A MiB amount where 0, `UNLIMITED` and `INFINITE` mean no value, as
/// Slurm reads these keys.
fn mem_or_unset(loc: &Loc, item: &Item) -> Result<Option<u64>, ConfigError> {
    let v = item.value.trim();
    if v.eq_ignore_ascii_case("UNLIMITED") || v.eq_ignore_ascii_case("INFINITE") {
        return Ok(None);
    }
    let mb = units::parse_mem_mb(v).map_err(|_| {
        bad_value(
            loc,
            item,
            "a size in MiB (optionally with a K, M, G or T suffix) or UNLIMITED",
        )
    })?;
    Ok((mb > 0).then_some(mb))
}

/// Which memory key `key` is, if any: (is a default, per CPU, per GPU).
/// The global memory keys, in Slurm's spelling.
pub(super) const MEM_KEYS: &[&str] = &[
    "DefMemPerCPU",
    "DefMemPerNode",
    "MaxMemPerCPU",
    "MaxMemPerNode",
    "DefCpuPerGPU",
    "DefMemPerGPU",
];

fn mem_key_kind(key: &str) -> Option<MemKey> {
    const KEYS: &[(&str, MemKey)] = &[
        ("DefMemPerCPU", MemKey::DefCpu),
        ("DefMemPerNode", MemKey::DefNode),
        ("MaxMemPerCPU", MemKey::MaxCpu),
        ("MaxMemPerNode", MemKey::MaxNode),
        ("DefCpuPerGPU", MemKey::DefCpuPerGpu),
        ("DefMemPerGPU", MemKey::DefMemPerGpu),
    ];
    KEYS.iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(key))
        .map(|(_, m)| *m)
}

#[derive(Debug, Clone, Copy)]
enum MemKey {
    DefCpu,
    DefNode,
    MaxCpu,
    MaxNode,
    DefCpuPerGpu,
    DefMemPerGpu,
}

/// Apply one memory key to `m`: the per-CPU and per-node forms of a pair
/// replace each other, as in Slurm (it keeps one value with a flag).
fn apply_mem(
    loc: &Loc,
    item: &Item,
    kind: MemKey,
    def_mem: &mut Option<Option<MemPer>>,
    max_mem: &mut Option<Option<MemPer>>,
    def_cpu_per_gpu: &mut Option<Option<u32>>,
    def_mem_per_gpu: &mut Option<Option<u64>>,
) -> Result<(), ConfigError> {
    require_set(loc, item)?;
    match kind {
        MemKey::DefCpu => *def_mem = Some(mem_or_unset(loc, item)?.map(MemPer::Cpu)),
        MemKey::DefNode => *def_mem = Some(mem_or_unset(loc, item)?.map(MemPer::Node)),
        MemKey::MaxCpu => *max_mem = Some(mem_or_unset(loc, item)?.map(MemPer::Cpu)),
        MemKey::MaxNode => *max_mem = Some(mem_or_unset(loc, item)?.map(MemPer::Node)),
        MemKey::DefMemPerGpu => *def_mem_per_gpu = Some(mem_or_unset(loc, item)?),
        MemKey::DefCpuPerGpu => {
            let n: u32 = int_in(loc, item, 0, u16::MAX.into())?;
            *def_cpu_per_gpu = Some((n > 0).then_some(n));
        }
    }
    Ok(())
}

/// `AllowGroups=a,b`: names as written (group names are case-sensitive);
/// `ALL` or empty is `None`.
fn group_names(value: &str) -> Option<Vec<String>> {
    let v: Vec<String> = value
        .split(',')
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect();
    (!v.is_empty() && !v.iter().any(|s| s.eq_ignore_ascii_case("ALL"))).then_some(v)
}

impl Builder {
    /// A global memory key (`DefMemPerCPU`, `DefMemPerNode`,
    /// `MaxMemPerCPU`, `MaxMemPerNode`, `DefCpuPerGPU`, `DefMemPerGPU`):
    /// `None` if `item` is not one.
    pub(super) fn mem_key(&mut self, loc: &Loc, item: &Item) -> Option<Result<(), ConfigError>> {
        let kind = mem_key_kind(&item.key)?;
        let m = &mut self.cfg.mem;
        let (mut d, mut x, mut c, mut g) = (
            Some(m.def_mem),
            Some(m.max_mem),
            Some(m.def_cpu_per_gpu),
            Some(m.def_mem_per_gpu),
        );
        let r = apply_mem(loc, item, kind, &mut d, &mut x, &mut c, &mut g);
        if r.is_ok() {
            *m = MemDefaults {
                def_mem: d.flatten(),
                max_mem: x.flatten(),
                def_cpu_per_gpu: c.flatten(),
                def_mem_per_gpu: g.flatten(),
            };
        }
        Some(r)
    }

    /// One of [`PartOpts`]' attributes on a PartitionName line, into
    /// `spec`: `None` if `item` is not one.
    pub(super) fn partition_opt(
        &mut self,
        loc: &Loc,
        item: &Item,
        spec: &mut PartOptsSpec,
    ) -> Option<Result<(), ConfigError>> {
        if let Some(kind) = mem_key_kind(&item.key) {
            return Some(apply_mem(
                loc,
                item,
                kind,
                &mut spec.def_mem,
                &mut spec.max_mem,
                &mut spec.def_cpu_per_gpu,
                &mut spec.def_mem_per_gpu,
            ));
        }
        const FLAGS: &[&str] = &[
            "Hidden",
            "ExclusiveUser",
            "LLN",
            "RootOnly",
            "ReqResv",
            "AllowGroups",
            "OverSubscribe",
            "Shared",
            "MaxCPUsPerNode",
            "Alternate",
        ];
        let key = *FLAGS.iter().find(|k| k.eq_ignore_ascii_case(&item.key))?;
        let r = (|| {
            require_set(loc, item)?;
            match key {
                "Hidden" => spec.hidden = Some(yes_no(loc, item)?),
                "ExclusiveUser" => spec.exclusive_user = Some(yes_no(loc, item)?),
                "LLN" => spec.lln = Some(yes_no(loc, item)?),
                "RootOnly" => spec.root_only = Some(yes_no(loc, item)?),
                "ReqResv" => spec.req_resv = Some(yes_no(loc, item)?),
                "AllowGroups" => spec.allow_groups = Some(group_names(&item.value)),
                "OverSubscribe" | "Shared" => {
                    let o =
                        OverSubscribe::parse(&item.value).map_err(|e| bad_value(loc, item, e))?;
                    if key == "Shared" {
                        spec.shared = Some(o)
                    } else {
                        spec.oversubscribe = Some(o)
                    }
                }
                "MaxCPUsPerNode" => {
                    let v = item.value.trim();
                    spec.max_cpus_per_node = Some(
                        if v.eq_ignore_ascii_case("UNLIMITED") || v.eq_ignore_ascii_case("INFINITE")
                        {
                            None
                        } else {
                            Some(int_in(loc, item, 1, u32::MAX.into())?)
                        },
                    )
                }
                _ => {
                    let v = item.value.trim();
                    spec.alternate = Some((!v.is_empty()).then(|| v.to_string()))
                }
            }
            Ok(())
        })();
        Some(r)
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::config::Config;
    use crate::model::part_opts::{MemPer, OverSubscribe};

    fn load(text: &str) -> Result<Config, String> {
        let base = "ClusterName=c\nSlurmctldHost=h\nNodeName=n[1-4] CPUs=4 RealMemory=4000\n";
        Config::parse_str_with_gres(&format!("{base}{text}"), Path::new("/x/slurm.conf"), None)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn partition_settings_are_read_with_default_lines_and_aliases() {
        let c = load(
            "DefMemPerCPU=100\nMaxMemPerNode=3000\n\
             PartitionName=DEFAULT Hidden=YES Shared=FORCE:2\n\
             PartitionName=a Nodes=n[1-2] AllowGroups=bio,Chem ExclusiveUser=yes LLN=YES \
             RootOnly=YES ReqResv=YES Alternate=b MaxCPUsPerNode=2 DefMemPerNode=500 \
             MaxMemPerCPU=1G DefCpuPerGPU=3 DefMemPerGPU=2048\n\
             PartitionName=b Nodes=n[3-4] Hidden=NO OverSubscribe=EXCLUSIVE AllowGroups=ALL\n",
        )
        .unwrap();
        let a = &c.partitions[0].opts;
        assert!(a.hidden);
        assert_eq!(a.allow_groups, Some(vec!["bio".into(), "Chem".into()]));
        assert_eq!(a.oversubscribe, OverSubscribe::Force(2));
        assert!(a.exclusive_user && a.lln && a.root_only && a.req_resv);
        assert_eq!(a.alternate.as_deref(), Some("b"));
        assert_eq!(a.max_cpus_per_node, Some(2));
        assert_eq!(a.mem.def_mem, Some(MemPer::Node(500)));
        assert_eq!(a.mem.max_mem, Some(MemPer::Cpu(1024)));
        assert_eq!(a.mem.def_cpu_per_gpu, Some(3));
        assert_eq!(a.mem.def_mem_per_gpu, Some(2048));
        let b = &c.partitions[1].opts;
        assert!(!b.hidden);
        assert_eq!(b.allow_groups, None);
        assert_eq!(b.oversubscribe, OverSubscribe::Exclusive);
        assert_eq!(b.mem.def_mem, None, "a partition keeps only its own values");
        assert_eq!(c.mem.def_mem, Some(MemPer::Cpu(100)));
        assert_eq!(c.mem.max_mem, Some(MemPer::Node(3000)));
        // Read, so never named as ignored.
        assert!(
            !c.warnings.iter().any(|w| w.contains("not used by canopy")),
            "{:?}",
            c.warnings
        );
        // What canopy does differently is named, with what it does instead.
        // OverSubscribe=FORCE:N is honoured (`sched::share`), and MaxCPUsPerNode as Slurm
        // counts it: no word.
        assert!(c.warnings.is_empty(), "{:?}", c.warnings);
    }

    #[test]
    fn gang_over_force_partitions_is_named() {
        let c = load(
            "PreemptMode=GANG
             PartitionName=f Nodes=ALL OverSubscribe=FORCE:2
             PartitionName=y Nodes=ALL OverSubscribe=YES:2
",
        )
        .unwrap();
        assert_eq!(c.warnings.len(), 1, "{:?}", c.warnings);
        assert!(
            c.warnings[0].contains("PreemptMode=GANG: canopy does not time-slice")
                && c.warnings[0].contains("partitions (f)"),
            "{:?}",
            c.warnings
        );
        // FORCE without GANG, or GANG without FORCE: nothing to say.
        for text in [
            "PartitionName=f Nodes=ALL OverSubscribe=FORCE:2\n",
            "PreemptMode=GANG\nPartitionName=f Nodes=ALL OverSubscribe=FORCE:1\n",
        ] {
            assert!(load(text).unwrap().warnings.is_empty(), "{text}");
        }
    }

    #[test]
    fn the_later_key_of_a_pair_wins_and_zero_means_unset() {
        let c = load(
            "DefMemPerCPU=100\nDefMemPerNode=800\nMaxMemPerNode=0\n\
             PartitionName=p Nodes=ALL MaxMemPerNode=UNLIMITED\n",
        )
        .unwrap();
        assert_eq!(c.mem.def_mem, Some(MemPer::Node(800)));
        assert_eq!(c.mem.max_mem, None);
        assert_eq!(c.partitions[0].opts.mem.max_mem, None);
    }

    #[test]
    fn bad_values_name_the_key() {
        for (line, key) in [
            (
                "PartitionName=p Nodes=ALL OverSubscribe=SOMETIMES",
                "OverSubscribe=SOMETIMES",
            ),
            ("PartitionName=p Nodes=ALL Hidden=perhaps", "Hidden=perhaps"),
            (
                "PartitionName=p Nodes=ALL DefMemPerCPU=lots",
                "DefMemPerCPU=lots",
            ),
            (
                "PartitionName=p Nodes=ALL MaxCPUsPerNode=0",
                "MaxCPUsPerNode=0",
            ),
            ("MaxMemPerCPU=-3", "MaxMemPerCPU=-3"),
        ] {
            let e = load(&format!("{line}\n")).unwrap_err();
            assert!(e.contains(key), "{line}: {e}");
        }
    }
}
