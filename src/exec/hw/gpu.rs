//! GPUs a node has, found through NVML as Slurm's gpu/nvml plugin finds
//! them, and the GRES lines `slurmd -G` prints for them.
//!
//! NVML is loaded at run time (`nvml-wrapper` dlopens libnvidia-ml.so):
//! a node without the NVIDIA driver gets an empty list and the reason,
//! never an error that stops the daemon. [`DetectedGpu`] is plain data, so
//! tests and gres.conf-configured GPUs build it without NVML, and
//! [`format_gres_line`] prints any GRES the way slurmd logs it.

use serde::{Deserialize, Serialize};

use super::topology::Topology;

/// One GPU as a node reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DetectedGpu {
    /// NVML's index (what CUDA_VISIBLE_DEVICES counts when unrestricted).
    pub index: u32,
    /// Slurm's Type: NVML's name lowercased, spaces as `_` ([`slurm_type_name`]).
    pub type_name: String,
    /// The device file, `/dev/nvidia<minor>`.
    pub file: String,
    pub minor: u32,
    /// Abstract core ids local to the GPU (gres.conf `Cores=`); empty when unknown.
    pub cores: Vec<u32>,
    /// NVLink counts to every GPU in index order, -1 for itself (`Links=`).
    pub links: Option<Vec<i32>>,
    pub bus_id: String,
}

/// NVML's NVML_NVLINK_MAX_LINKS (nvml.h); the wrapper does not re-export it.
const NVLINK_MAX_LINKS: u32 = 18;

/// What detection found, and if nothing, why.
#[derive(Debug, Clone, Default)]
pub struct GpuDetection {
    pub gpus: Vec<DetectedGpu>,
    /// Why no GPU list could be read (no driver, NVML error).
    pub reason: Option<String>,
}

/// Slurm's GPU type name from NVML's device name: every character
/// lowercased and every space made `_`, nothing dropped
/// ("NVIDIA A100-SXM4-80GB" → "nvidia_a100-sxm4-80gb"); gres.conf `Type=`
/// may be any substring of it, which is how `Type=a100` matches.
pub fn slurm_type_name(device_name: &str) -> String {
    device_name
        .chars()
        .map(|c| {
            if c == ' ' {
                '_'
            } else {
                c.to_ascii_lowercase()
            }
        })
        .collect()
}

/// OS CPU ids set in NVML's affinity words (bit `i` of word `w` is CPU `w*64+i`).
fn bits_of(words: &[std::os::raw::c_ulong]) -> Vec<u32> {
    let width = std::mem::size_of::<std::os::raw::c_ulong>() * 8;
    let mut cpus = Vec::new();
    for (w, &word) in words.iter().enumerate() {
        for b in 0..width {
            if word & (1 << b) != 0 {
                cpus.push((w * width + b) as u32);
            }
        }
    }
    cpus
}

/// Finds this node's NVIDIA GPUs. Never fails: without the library, a
/// driver or permission, the list is empty and `reason` says why.
pub fn detect(topo: &Topology) -> GpuDetection {
    use nvml_wrapper::Nvml;
    let nvml = match Nvml::init() {
        Ok(n) => n,
        Err(e) => {
            return GpuDetection {
                gpus: Vec::new(),
                reason: Some(format!("NVML not available: {e}")),
            }
        }
    };
    let count = match nvml.device_count() {
        Ok(c) => c,
        Err(e) => {
            return GpuDetection {
                gpus: Vec::new(),
                reason: Some(format!("NVML device count: {e}")),
            }
        }
    };
    // One word per 64 CPUs, enough for the whole machine.
    let words = (topo.cpus() as usize).div_ceil(64).max(1) * 2;
    let mut gpus = Vec::new();
    let mut bus_ids = Vec::new();
    let mut reasons = Vec::new();
    for i in 0..count {
        let dev = match nvml.device_by_index(i) {
            Ok(d) => d,
            Err(e) => {
                reasons.push(format!("GPU {i}: {e}"));
                continue;
            }
        };
        // As gpu/nvml: a GPU whose minor number cannot be read has no
        // device file to constrain, so it is skipped.
        let minor = match dev.minor_number() {
            Ok(m) => m,
            Err(e) => {
                reasons.push(format!("GPU {i}: minor number: {e}"));
                continue;
            }
        };
        let name = dev.name().unwrap_or_default();
        let bus_id = dev.pci_info().map(|p| p.bus_id).unwrap_or_default();
        let cores = dev
            .cpu_affinity(words)
            .map(|w| topo.os_cpus_to_cores(&bits_of(&w)))
            .unwrap_or_default();
        bus_ids.push(bus_id.clone());
        gpus.push(DetectedGpu {
            index: i,
            type_name: slurm_type_name(&name),
            file: format!("/dev/nvidia{minor}"),
            minor,
            cores,
            links: None,
            bus_id,
        });
    }
    // Links need every GPU's bus id first: count active NVLinks per peer.
    for (n, gpu) in gpus.iter_mut().enumerate() {
        let Ok(dev) = nvml.device_by_index(gpu.index) else {
            continue;
        };
        let mut links = vec![0i32; bus_ids.len()];
        links[n] = -1;
        for l in 0..NVLINK_MAX_LINKS {
            let link = dev.link_wrapper_for(l);
            match link.is_active() {
                Ok(true) => {}
                Ok(false) => continue,
                // Not supported (no NVLink on this GPU): stop asking.
                Err(nvml_wrapper::error::NvmlError::NotSupported) => break,
                Err(_) => continue,
            }
            let Ok(remote) = link.remote_pci_info() else {
                continue;
            };
            if let Some(k) = bus_ids
                .iter()
                .position(|b| b.eq_ignore_ascii_case(&remote.bus_id))
            {
                if k != n {
                    links[k] += 1;
                }
            }
        }
        gpu.links = Some(links);
    }
    let reason = if gpus.is_empty() {
        Some(if reasons.is_empty() {
            "NVML found no GPUs".to_string()
        } else {
            reasons.join("; ")
        })
    } else {
        None
    };
    GpuDetection { gpus, reason }
}

/// GRES configuration flags, printed in Slurm's order (`gres_flags2str`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GresFlags {
    pub count_only: bool,
    pub explicit: bool,
    pub has_file: bool,
    pub loaded: bool,
    pub has_type: bool,
    pub env_nvml: bool,
    pub uuid: bool,
    pub env_rsmi: bool,
    pub env_oneapi: bool,
    pub env_opencl: bool,
    pub env_default: bool,
    pub shared: bool,
    pub one_sharing: bool,
    pub mig: bool,
}

impl std::fmt::Display for GresFlags {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names = [
            (self.count_only, "CountOnly"),
            (self.explicit, "Explicit"),
            (self.has_file, "HAS_FILE"),
            (self.loaded, "LOADED"),
            (self.has_type, "HAS_TYPE"),
            (self.env_nvml, "ENV_NVML"),
            (self.uuid, "UUID"),
            (self.env_rsmi, "ENV_RSMI"),
            (self.env_oneapi, "ENV_ONEAPI"),
            (self.env_opencl, "ENV_OPENCL"),
            (self.env_default, "ENV_DEFAULT"),
            (self.shared, "SHARED"),
            (self.one_sharing, "ONE_SHARING"),
            (self.mig, "MIG"),
        ];
        let set: Vec<&str> = names
            .iter()
            .filter(|(on, _)| *on)
            .map(|(_, n)| *n)
            .collect();
        f.write_str(&set.join(","))
    }
}

/// One GRES record as slurmd logs it: configured in gres.conf or found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GresLine {
    pub name: String,
    pub type_name: Option<String>,
    pub count: u64,
    pub file: Option<String>,
    /// Abstract cores, already in range form (`0-15`).
    pub cores: Option<String>,
    /// Slurm prints the node's CPU count here.
    pub core_cnt: u32,
    pub links: Option<String>,
    pub flags: GresFlags,
}

/// Slurm's plugin id for a GRES name (`gres_build_id`): each byte shifted
/// left by 0, 8, 16, 24, 0, ... bits and summed; "gpu" is 7696487.
pub fn gres_build_id(name: &str) -> u32 {
    let mut id = 0u32;
    for (i, b) in name.bytes().enumerate() {
        id = id.wrapping_add(u32::from(b) << ((i * 8) % 32));
    }
    id
}

/// Ids as Slurm's ranged form: `0-3,8,10-11`.
pub fn format_ranges(ids: &[u32]) -> String {
    let mut v = ids.to_vec();
    v.sort_unstable();
    v.dedup();
    let mut out = Vec::new();
    let mut i = 0;
    while i < v.len() {
        let start = v[i];
        let mut end = start;
        while i + 1 < v.len() && v[i + 1] == end + 1 {
            i += 1;
            end = v[i];
        }
        out.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        i += 1;
    }
    out.join(",")
}

/// Which slurmd's log line to write: canopy answers as Slurm 22.05 does,
/// newer slurmd (23.02 on) always writes `Links=` and adds `Flags=`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum GresLogStyle {
    #[default]
    Slurm2205,
    Slurm2302,
}

/// The line `slurmd -G` logs for a GRES record (with GRES debugging on,
/// which -G turns on), as Slurm 22.05 writes it. The index is the file
/// name's trailing number; an absent type prints `(null)` as C's printf
/// does, and so do absent links in 22.05 (`CoreCnt=2 (null)`).
pub fn format_gres_line(g: &GresLine) -> String {
    format_gres_line_as(g, GresLogStyle::Slurm2205)
}

/// [`format_gres_line`] in a chosen slurmd version's words.
pub fn format_gres_line_as(g: &GresLine, style: GresLogStyle) -> String {
    let null = "(null)";
    let ty = g.type_name.as_deref().unwrap_or(null);
    let id = gres_build_id(&g.name);
    // 22.05: "Links=<l>" or a bare (null); 23.02: "Links=<l|(null)> Flags=<f>".
    let tail = match style {
        GresLogStyle::Slurm2205 => g
            .links
            .as_deref()
            .map_or_else(|| null.to_string(), |l| format!("Links={l}")),
        GresLogStyle::Slurm2302 => format!(
            "Links={} Flags={}",
            g.links.as_deref().unwrap_or(null),
            g.flags
        ),
    };
    let index = g.file.as_deref().map(|f| {
        let digits: String = f
            .chars()
            .rev()
            .take_while(|c| c.is_ascii_digit())
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        digits.parse::<i64>().unwrap_or(0)
    });
    let head = format!("Gres Name={} Type={ty} Count={}", g.name, g.count);
    match (&g.file, index, &g.cores) {
        (Some(file), Some(index), Some(cores)) => format!(
            "{head} Index={index} ID={id} File={file} Cores={cores} CoreCnt={} {tail}",
            g.core_cnt
        ),
        (Some(file), Some(index), None) => {
            format!("{head} Index={index} ID={id} File={file} {tail}")
        }
        _ => format!("{head} ID={id} {tail}"),
    }
}

impl DetectedGpu {
    /// The GRES record slurmd builds for an autodetected GPU.
    pub fn gres_line(&self, node_cpus: u32) -> GresLine {
        GresLine {
            name: "gpu".into(),
            type_name: Some(self.type_name.clone()),
            count: 1,
            file: Some(self.file.clone()),
            cores: (!self.cores.is_empty()).then(|| format_ranges(&self.cores)),
            core_cnt: node_cpus,
            links: self.links.as_ref().map(|l| {
                l.iter()
                    .map(|x| x.to_string())
                    .collect::<Vec<_>>()
                    .join(",")
            }),
            flags: GresFlags {
                has_file: true,
                has_type: true,
                env_nvml: true,
                ..Default::default()
            },
        }
    }
}

/// The `Gres=` value `slurmd -C` appends (`gpu:<type>:<count>`, one entry
/// per type, in the order first seen), with the note it prints below.
pub fn autodetect_summary(gpus: &[DetectedGpu]) -> Option<(String, String)> {
    let mut types: Vec<(String, u64)> = Vec::new();
    for g in gpus {
        match types.iter_mut().find(|(t, _)| *t == g.type_name) {
            Some((_, n)) => *n += 1,
            None => types.push((g.type_name.clone(), 1)),
        }
    }
    if types.is_empty() {
        return None;
    }
    let gres = types
        .iter()
        .map(|(t, n)| {
            if t.is_empty() {
                format!("gpu:{n}")
            } else {
                format!("gpu:{t}:{n}")
            }
        })
        .collect::<Vec<_>>()
        .join(",");
    let note =
        format!("Found {gres} with Autodetect=nvml (Substring of gpu name may be used instead)");
    Some((gres, note))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu(index: u32, cores: Vec<u32>) -> DetectedGpu {
        DetectedGpu {
            index,
            type_name: slurm_type_name("NVIDIA A100-SXM4-80GB"),
            file: format!("/dev/nvidia{index}"),
            minor: index,
            cores,
            links: Some(if index == 0 { vec![-1, 4] } else { vec![4, -1] }),
            bus_id: format!("00000000:0{index}:00.0"),
        }
    }

    #[test]
    fn type_names_as_gpu_nvml() {
        assert_eq!(
            slurm_type_name("NVIDIA A100-SXM4-80GB"),
            "nvidia_a100-sxm4-80gb"
        );
        assert_eq!(
            slurm_type_name("Tesla V100-PCIE-16GB"),
            "tesla_v100-pcie-16gb"
        );
        assert_eq!(
            slurm_type_name("NVIDIA GeForce RTX 3090"),
            "nvidia_geforce_rtx_3090"
        );
    }

    #[test]
    fn gres_id_and_ranges() {
        assert_eq!(gres_build_id("gpu"), 7696487);
        assert_eq!(format_ranges(&[0, 1, 2, 3, 8, 10, 11]), "0-3,8,10-11");
        assert_eq!(format_ranges(&[]), "");
    }

    #[test]
    fn gres_lines_as_slurmd_logs_them() {
        let g = gpu(1, (8..16).collect());
        assert_eq!(
            format_gres_line_as(&g.gres_line(32), GresLogStyle::Slurm2302),
            "Gres Name=gpu Type=nvidia_a100-sxm4-80gb Count=1 Index=1 ID=7696487 File=/dev/nvidia1 Cores=8-15 CoreCnt=32 Links=4,-1 Flags=HAS_FILE,HAS_TYPE,ENV_NVML"
        );
        assert_eq!(
            format_gres_line(&g.gres_line(32)),
            "Gres Name=gpu Type=nvidia_a100-sxm4-80gb Count=1 Index=1 ID=7696487 File=/dev/nvidia1 Cores=8-15 CoreCnt=32 Links=4,-1"
        );
        let g = gpu(0, vec![]);
        let mut line = g.gres_line(32);
        line.links = None;
        assert_eq!(
            format_gres_line_as(&line, GresLogStyle::Slurm2302),
            "Gres Name=gpu Type=nvidia_a100-sxm4-80gb Count=1 Index=0 ID=7696487 File=/dev/nvidia0 Links=(null) Flags=HAS_FILE,HAS_TYPE,ENV_NVML"
        );
        // What slurmd 22.05.8 -G printed for a gres.conf line
        // `Name=gpu Type=a100 File=/tmp/hwpeer/dev/nvidia0 Cores=0` on a 2-CPU node.
        let conf = GresLine {
            name: "gpu".into(),
            type_name: Some("a100".into()),
            count: 1,
            file: Some("/tmp/hwpeer/dev/nvidia0".into()),
            cores: Some("0".into()),
            core_cnt: 2,
            links: None,
            flags: GresFlags::default(),
        };
        assert_eq!(
            format_gres_line(&conf),
            "Gres Name=gpu Type=a100 Count=1 Index=0 ID=7696487 File=/tmp/hwpeer/dev/nvidia0 Cores=0 CoreCnt=2 (null)"
        );
        let fileless = GresLine {
            name: "bandwidth".into(),
            type_name: None,
            count: 100,
            file: None,
            cores: None,
            core_cnt: 0,
            links: None,
            flags: GresFlags {
                count_only: true,
                ..Default::default()
            },
        };
        assert_eq!(
            format_gres_line_as(&fileless, GresLogStyle::Slurm2302),
            format!(
                "Gres Name=bandwidth Type=(null) Count=100 ID={} Links=(null) Flags=CountOnly",
                gres_build_id("bandwidth")
            )
        );
    }

    #[test]
    fn autodetect_summary_merges_types() {
        assert_eq!(autodetect_summary(&[]), None);
        let (g, note) = autodetect_summary(&[gpu(0, vec![]), gpu(1, vec![])]).unwrap();
        assert_eq!(g, "gpu:nvidia_a100-sxm4-80gb:2");
        assert_eq!(
            note,
            "Found gpu:nvidia_a100-sxm4-80gb:2 with Autodetect=nvml (Substring of gpu name may be used instead)"
        );
    }

    #[test]
    fn affinity_words_to_cpus() {
        let width = std::mem::size_of::<std::os::raw::c_ulong>() * 8;
        let words = [0b1010 as std::os::raw::c_ulong, 1];
        assert_eq!(bits_of(&words), vec![1, 3, width as u32]);
    }

    #[test]
    fn detection_without_a_driver_is_empty_not_an_error() {
        // This machine has no NVIDIA driver; a machine with one gets GPUs.
        let d = detect(&Topology::uniform(1, 2, 1));
        assert!(d.gpus.is_empty() == d.reason.is_some());
    }
}
