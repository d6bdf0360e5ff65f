//! A node's CPU topology as Slurm numbers it, plus its memory: a pure,
//! serialisable [`Topology`] that binding and GRES code compute with, and
//! [`detect`] which fills one from hwloc.
//!
//! Slurm's *abstract* CPU numbering puts thread siblings next to each other
//! and sockets one after the other: abstract id =
//! `(socket * cores_per_socket + core) * threads_per_core + thread`, which
//! is the order of PUs in hwloc's tree (logical order). The OS numbers the
//! same PUs differently (on most Intel machines thread siblings are
//! `cpus / 2` apart), so everything the kernel sees — affinity masks, NVML
//! affinity — is converted here.
//!
//! hwloc through `hwlocality`, not `hwloc2`: hwloc2 is unmaintained, binds
//! an hwloc without I/O discovery (no PCI or OS devices, so no GPU
//! locality), and has no way to load synthetic or XML topologies, which
//! tests and simulated clusters need. hwlocality is maintained, links the
//! system libhwloc 2.x, and builds from synthetic strings and XML files.
//! hwloc itself honours `HWLOC_SYNTHETIC` and `HWLOC_XMLFILE` in the
//! environment, so `HWLOC_SYNTHETIC="package:2 core:8 pu:2" canopy-noded -C`
//! reports a fake node (tested in tests/noded_hw.rs); `CANOPY_TOPOLOGY`
//! does the same without touching other hwloc users: a synthetic
//! description, or a path to an XML file (`*.xml`).

use serde::{Deserialize, Serialize};

/// Why a topology could not be read.
#[derive(Debug, thiserror::Error)]
pub enum HwError {
    #[error("hwloc could not load the topology: {0}")]
    Hwloc(String),
    #[error("irregular topology: {0}")]
    Irregular(String),
}

/// A NUMA node (Slurm's "locality domain"): its OS index and the abstract
/// CPUs local to it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NumaNode {
    pub os_index: u32,
    pub cpus: Vec<u32>,
}

/// The CPUs of one node. Invariant: `pus.len() == sockets *
/// cores_per_socket * threads_per_core`, and `pus[abstract] = OS index`
/// (checked when one is deserialised: binding code indexes by it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "RawTopology")]
pub struct Topology {
    pub boards: u32,
    pub sockets: u32,
    pub cores_per_socket: u32,
    pub threads_per_core: u32,
    /// OS (machine) index of each abstract CPU.
    pus: Vec<u32>,
    /// Empty when hwloc reported none (tests, old machines).
    pub numa: Vec<NumaNode>,
    /// Memory hwloc saw, MiB (0 for synthetic topologies without memory).
    pub hwloc_memory_mb: u64,
}

/// [`Topology`]'s fields as they travel, before the invariant is checked.
#[derive(Deserialize)]
struct RawTopology {
    boards: u32,
    sockets: u32,
    cores_per_socket: u32,
    threads_per_core: u32,
    pus: Vec<u32>,
    numa: Vec<NumaNode>,
    hwloc_memory_mb: u64,
}

impl TryFrom<RawTopology> for Topology {
    type Error = String;
    fn try_from(r: RawTopology) -> Result<Self, String> {
        let n =
            u64::from(r.sockets) * u64::from(r.cores_per_socket) * u64::from(r.threads_per_core);
        if n == 0 || r.boards == 0 || n != r.pus.len() as u64 {
            return Err(format!(
                "topology of {} sockets x {} cores x {} threads lists {} CPUs",
                r.sockets,
                r.cores_per_socket,
                r.threads_per_core,
                r.pus.len()
            ));
        }
        Ok(Topology {
            boards: r.boards,
            sockets: r.sockets,
            cores_per_socket: r.cores_per_socket,
            threads_per_core: r.threads_per_core,
            pus: r.pus,
            numa: r.numa,
            hwloc_memory_mb: r.hwloc_memory_mb,
        })
    }
}

impl Topology {
    /// A regular topology whose OS numbering equals the abstract one.
    pub fn uniform(sockets: u32, cores_per_socket: u32, threads_per_core: u32) -> Self {
        Self::with_os_numbering(sockets, cores_per_socket, threads_per_core, |s, c, t| {
            (s * cores_per_socket + c) * threads_per_core + t
        })
    }

    /// Intel-style OS numbering: every core's first thread first (socket by
    /// socket), then the second threads: socket 0 core 0 is PUs 0 and
    /// `sockets * cores_per_socket`.
    pub fn intel_style(sockets: u32, cores_per_socket: u32, threads_per_core: u32) -> Self {
        let cores = sockets * cores_per_socket;
        Self::with_os_numbering(sockets, cores_per_socket, threads_per_core, |s, c, t| {
            t * cores + s * cores_per_socket + c
        })
    }

    /// A regular topology with OS indices from `os(socket, core, thread)`.
    pub fn with_os_numbering(
        sockets: u32,
        cores_per_socket: u32,
        threads_per_core: u32,
        os: impl Fn(u32, u32, u32) -> u32,
    ) -> Self {
        let mut pus = Vec::new();
        for s in 0..sockets {
            for c in 0..cores_per_socket {
                for t in 0..threads_per_core {
                    pus.push(os(s, c, t));
                }
            }
        }
        Topology {
            boards: 1,
            sockets,
            cores_per_socket,
            threads_per_core,
            pus,
            numa: Vec::new(),
            hwloc_memory_mb: 0,
        }
    }

    /// Number of CPUs (PUs).
    pub fn cpus(&self) -> u32 {
        self.pus.len() as u32
    }
    pub fn cores(&self) -> u32 {
        self.sockets * self.cores_per_socket
    }
    pub fn abstract_to_os(&self, cpu: u32) -> Option<u32> {
        self.pus.get(cpu as usize).copied()
    }
    pub fn os_to_abstract(&self, os: u32) -> Option<u32> {
        self.pus.iter().position(|&p| p == os).map(|i| i as u32)
    }
    /// The abstract core (`socket * cores_per_socket + core`) of an abstract CPU.
    pub fn core_of(&self, cpu: u32) -> u32 {
        cpu / self.threads_per_core.max(1)
    }
    pub fn socket_of(&self, cpu: u32) -> u32 {
        cpu / (self.cores_per_socket * self.threads_per_core).max(1)
    }
    /// The locality domain of an abstract CPU: its NUMA node's position in
    /// `numa`, or its socket when hwloc reported no NUMA nodes (as Slurm
    /// does without libnuma).
    pub fn ldom_of(&self, cpu: u32) -> u32 {
        self.numa
            .iter()
            .position(|n| n.cpus.contains(&cpu))
            .map_or_else(|| self.socket_of(cpu), |i| i as u32)
    }
    pub fn ldoms(&self) -> u32 {
        if self.numa.is_empty() {
            self.sockets
        } else {
            self.numa.len() as u32
        }
    }
    /// Abstract CPUs of a locality domain.
    pub fn ldom_cpus(&self, ldom: u32) -> Vec<u32> {
        (0..self.cpus())
            .filter(|&c| self.ldom_of(c) == ldom)
            .collect()
    }
    /// OS indices of abstract CPUs (unknown ids are skipped), sorted.
    pub fn to_os(&self, cpus: &[u32]) -> Vec<u32> {
        let mut v: Vec<u32> = cpus
            .iter()
            .filter_map(|&c| self.abstract_to_os(c))
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    }
    /// The abstract cores that OS CPUs belong to, sorted: what gres.conf's
    /// `Cores=` means (a core counts if any of its threads is listed).
    pub fn os_cpus_to_cores(&self, os: &[u32]) -> Vec<u32> {
        let mut v: Vec<u32> = os
            .iter()
            .filter_map(|&o| self.os_to_abstract(o))
            .map(|c| self.core_of(c))
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// Loads the topology hwloc describes with this synthetic string
    /// (e.g. `"package:2 core:8 pu:2"`).
    pub fn from_synthetic(desc: &str) -> Result<Self, HwError> {
        let topo = hwlocality::Topology::builder()
            .from_synthetic(desc)
            .map_err(|e| HwError::Hwloc(e.to_string()))?
            .build()
            .map_err(|e| HwError::Hwloc(e.to_string()))?;
        from_hwloc(&topo)
    }

    /// Loads an hwloc XML export (`lstopo foo.xml`).
    pub fn from_xml_file(path: &std::path::Path) -> Result<Self, HwError> {
        let topo = hwlocality::Topology::builder()
            .from_xml_file(path)
            .map_err(|e| HwError::Hwloc(format!("{}: {e}", path.display())))?
            .build()
            .map_err(|e| HwError::Hwloc(e.to_string()))?;
        from_hwloc(&topo)
    }
}

/// This machine's topology: `CANOPY_TOPOLOGY` if set (synthetic string, or
/// an `.xml` path), else hwloc's discovery, which itself honours
/// `HWLOC_SYNTHETIC` / `HWLOC_XMLFILE`.
pub fn detect() -> Result<Topology, HwError> {
    if let Some(t) = std::env::var_os("CANOPY_TOPOLOGY") {
        let t = t.to_string_lossy();
        if t.ends_with(".xml") {
            return Topology::from_xml_file(std::path::Path::new(t.as_ref()));
        }
        return Topology::from_synthetic(&t);
    }
    let topo = hwlocality::Topology::new().map_err(|e| HwError::Hwloc(e.to_string()))?;
    from_hwloc(&topo)
}

fn from_hwloc(topo: &hwlocality::Topology) -> Result<Topology, HwError> {
    use hwlocality::object::types::ObjectType;
    let count = |t| topo.objects_with_type(t).count() as u32;
    let mut pus: Vec<_> = topo.objects_with_type(ObjectType::PU).collect();
    pus.sort_by_key(|p| p.logical_index());
    let cpus = pus.len() as u32;
    if cpus == 0 {
        return Err(HwError::Irregular("no processing units".into()));
    }
    // As slurmd: no packages or cores reported counts as one.
    let sockets = count(ObjectType::Package).max(1);
    let cores = count(ObjectType::Core).max(1);
    if cpus % cores != 0 || cores % sockets != 0 {
        return Err(HwError::Irregular(format!(
            "{cpus} CPUs, {cores} cores, {sockets} sockets do not divide evenly"
        )));
    }
    let mut os = Vec::with_capacity(pus.len());
    for p in &pus {
        let i = p
            .os_index()
            .ok_or_else(|| HwError::Irregular("a PU without an OS index".into()))?;
        os.push(i as u32);
    }
    let mut t = Topology {
        boards: 1,
        sockets,
        cores_per_socket: cores / sockets,
        threads_per_core: cpus / cores,
        pus: os,
        numa: Vec::new(),
        hwloc_memory_mb: topo.root_object().total_memory() / (1024 * 1024),
    };
    for n in topo.objects_with_type(ObjectType::NUMANode) {
        let Some(set) = n.cpuset() else { continue };
        let cpus: Vec<u32> = set
            .iter_set()
            .filter_map(|i| t.os_to_abstract(usize::from(i) as u32))
            .collect();
        t.numa.push(NumaNode {
            os_index: n.os_index().unwrap_or(0) as u32,
            cpus,
        });
    }
    Ok(t)
}

/// Total RAM in MiB as slurmd's `RealMemory` counts it: physical pages
/// times the page size (sysconf), not what hwloc or a cgroup says.
pub fn real_memory_mb() -> u64 {
    // SAFETY: sysconf reads a system constant; no pointers involved.
    let (pages, size) = unsafe {
        (
            nix::libc::sysconf(nix::libc::_SC_PHYS_PAGES),
            nix::libc::sysconf(nix::libc::_SC_PAGE_SIZE),
        )
    };
    if pages < 1 || size < 1 {
        // slurmd reports 1 when it cannot tell.
        return 1;
    }
    (pages as u64).saturating_mul(size as u64) / (1024 * 1024)
}

/// Seconds since boot (sysinfo), as slurmd's UpTime.
pub fn uptime_secs() -> u64 {
    nix::sys::sysinfo::sysinfo().map_or(0, |i| i.uptime().as_secs())
}

/// Slurm's `UpTime=` value: `days-hh:mm:ss`.
pub fn format_uptime(secs: u64) -> String {
    format!(
        "{}-{:02}:{:02}:{:02}",
        secs / 86400,
        (secs / 3600) % 24,
        (secs / 60) % 60,
        secs % 60
    )
}

/// The `slurmd -C` report: the node line, then the uptime line. `gres` is
/// for slurmd 23.02 and later, which append autodetected GPUs: the `Gres=`
/// value (e.g. `gpu:nvidia_a100-sxm4-80gb:4`) and the `Found ...` note
/// printed under it; Slurm 22.05 prints neither (pass `None`).
pub fn format_node_config(
    name: &str,
    topo: &Topology,
    real_memory_mb: u64,
    gres: Option<(&str, &str)>,
    uptime_secs: u64,
) -> String {
    let mut out = format!(
        "NodeName={name} CPUs={} Boards={} SocketsPerBoard={} CoresPerSocket={} ThreadsPerCore={} RealMemory={real_memory_mb}",
        topo.cpus(),
        topo.boards,
        topo.sockets / topo.boards.max(1),
        topo.cores_per_socket,
        topo.threads_per_core,
    );
    if let Some((g, _)) = gres {
        out.push_str(" Gres=");
        out.push_str(g);
    }
    out.push('\n');
    if let Some((_, found)) = gres {
        out.push_str(found);
        out.push('\n');
    }
    out.push_str(&format!("UpTime={}\n", format_uptime(uptime_secs)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn abstract_numbering_uniform() {
        let t = Topology::uniform(2, 8, 2);
        assert_eq!(t.cpus(), 32);
        assert_eq!(t.cores(), 16);
        assert_eq!(t.abstract_to_os(5), Some(5));
        assert_eq!(t.core_of(5), 2);
        assert_eq!(t.socket_of(15), 0);
        assert_eq!(t.socket_of(16), 1);
        assert_eq!(t.abstract_to_os(32), None);
    }

    #[test]
    fn abstract_numbering_intel_style() {
        let t = Topology::intel_style(2, 8, 2);
        // socket 0 core 0: PUs 0 and 16; socket 1 core 0: PUs 8 and 24.
        assert_eq!(t.abstract_to_os(0), Some(0));
        assert_eq!(t.abstract_to_os(1), Some(16));
        assert_eq!(t.abstract_to_os(2), Some(1));
        assert_eq!(t.abstract_to_os(16), Some(8));
        assert_eq!(t.abstract_to_os(17), Some(24));
        assert_eq!(t.os_to_abstract(24), Some(17));
        assert_eq!(t.os_cpus_to_cores(&[0, 16, 8]), vec![0, 8]);
        assert_eq!(t.ldom_of(17), 1);
    }

    #[test]
    fn synthetic_topology_through_hwloc() {
        let t = Topology::from_synthetic("package:2 core:8 pu:2").unwrap();
        assert_eq!(
            (t.sockets, t.cores_per_socket, t.threads_per_core, t.cpus()),
            (2, 8, 2, 32)
        );
        // hwloc's synthetic OS indices follow the tree: abstract == OS.
        assert_eq!(t.abstract_to_os(17), Some(17));
        let t = Topology::from_synthetic("package:1 numa:2 core:2 pu:1").unwrap();
        assert_eq!(t.numa.len(), 2);
        assert_eq!(t.ldom_of(3), 1);
        assert!(Topology::from_synthetic("bogus:3").is_err());
    }

    #[test]
    fn deserialising_checks_the_shape() {
        let t = Topology::intel_style(2, 4, 2);
        let bytes = rmp_serde::to_vec_named(&t).unwrap();
        let back: Topology = rmp_serde::from_slice(&bytes).unwrap();
        assert_eq!(back, t);
        let mut bad = serde_json::to_value(&t).unwrap();
        bad["sockets"] = 3.into();
        assert!(serde_json::from_value::<Topology>(bad).is_err());
    }

    #[test]
    fn real_machine_detects() {
        let t = detect().unwrap();
        assert!(t.cpus() >= 1);
        assert!(real_memory_mb() > 1);
    }

    #[test]
    fn node_config_line() {
        let t = Topology::uniform(2, 8, 2);
        let s = format_node_config("n1", &t, 7962, None, 86400 + 3600 + 23 * 60 + 45);
        assert_eq!(
            s,
            "NodeName=n1 CPUs=32 Boards=1 SocketsPerBoard=2 CoresPerSocket=8 ThreadsPerCore=2 RealMemory=7962\nUpTime=1-01:23:45\n"
        );
        let s = format_node_config(
            "n1",
            &t,
            10,
            Some(("gpu:tesla_v100:2", "Found gpu:tesla_v100:2 with Autodetect=nvml (Substring of gpu name may be used instead)")),
            0,
        );
        assert!(s.starts_with("NodeName=n1 CPUs=32 Boards=1 SocketsPerBoard=2 CoresPerSocket=8 ThreadsPerCore=2 RealMemory=10 Gres=gpu:tesla_v100:2\nFound gpu:tesla_v100:2"));
        assert!(s.ends_with("UpTime=0-00:00:00\n"));
    }
}
