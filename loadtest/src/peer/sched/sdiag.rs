//! Reading `sdiag`'s "Backfilling stats" section (Slurm 22.05's layout, which
//! canopy's `sdiag` prints too) and turning successive readings into the figures of
//! the cycles that ran while they were taken.
//!
//! sdiag only keeps the last cycle and running sums (printed as means), so the
//! comparison polls it more often than cycles end: each reading whose `Total cycles`
//! is one more than the previous reading's gives that cycle's own time and depth.
//! Where a poll missed cycles, the window's means come from the change in the
//! printed sums instead (mean × cycles, so within a microsecond per cycle).
//!
//! Does not: run sdiag (the parent module does).

/// One reading of the backfill section. Means are absent before the first cycle,
/// as sdiag prints them only then.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(in crate::peer) struct Backfill {
    pub(in crate::peer) backfilled: u64,
    pub(in crate::peer) cycles: u64,
    pub(in crate::peer) last_us: u64,
    pub(in crate::peer) max_us: u64,
    pub(in crate::peer) mean_us: Option<u64>,
    pub(in crate::peer) last_depth: u64,
    pub(in crate::peer) last_depth_try: u64,
    pub(in crate::peer) depth_mean: Option<u64>,
    pub(in crate::peer) depth_try_mean: Option<u64>,
    pub(in crate::peer) last_queue_len: u64,
    pub(in crate::peer) queue_len_mean: Option<u64>,
    pub(in crate::peer) last_table_size: u64,
}

/// The backfill section of `sdiag`'s output, or what is wrong with it.
pub(in crate::peer) fn parse_backfill(out: &str) -> Result<Backfill, String> {
    let mut lines = out.lines();
    // Slurm adds "(WARNING: data obtained in the middle of backfilling execution.)"
    // when a cycle is running; the figures are those of the cycles before it.
    if !lines.any(|l| l.starts_with("Backfilling stats")) {
        return Err("no \"Backfilling stats\" section".into());
    }
    let mut b = Backfill::default();
    let mut seen = Vec::new();
    for line in lines.take_while(|l| l.starts_with('\t')) {
        let Some((key, value)) = line.trim().split_once(':') else {
            continue;
        };
        let key = key.trim();
        let slot = match key {
            "Total backfilled jobs (since last slurm start)" => &mut b.backfilled,
            "Total cycles" => &mut b.cycles,
            "Last cycle" => &mut b.last_us,
            "Max cycle" => &mut b.max_us,
            "Last depth cycle" => &mut b.last_depth,
            "Last depth cycle (try sched)" => &mut b.last_depth_try,
            "Last queue length" => &mut b.last_queue_len,
            "Last table size" => &mut b.last_table_size,
            "Mean cycle" | "Depth Mean" | "Depth Mean (try depth)" | "Queue length mean" => {
                let v = number(key, value)?;
                match key {
                    "Mean cycle" => b.mean_us = Some(v),
                    "Depth Mean" => b.depth_mean = Some(v),
                    "Depth Mean (try depth)" => b.depth_try_mean = Some(v),
                    _ => b.queue_len_mean = Some(v),
                }
                continue;
            }
            _ => continue,
        };
        *slot = number(key, value)?;
        seen.push(key);
    }
    for key in [
        "Total cycles",
        "Last cycle",
        "Max cycle",
        "Last depth cycle",
    ] {
        if !seen.contains(&key) {
            return Err(format!("no \"{key}\" line in the backfill section"));
        }
    }
    Ok(b)
}

fn number(key: &str, value: &str) -> Result<u64, String> {
    value
        .trim()
        .parse()
        .map_err(|_| format!("\"{key}\": expected a number, found {:?}", value.trim()))
}

/// One cycle as a reading right after it showed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::peer) struct Cycle {
    pub(in crate::peer) us: u64,
    pub(in crate::peer) depth: u64,
    pub(in crate::peer) depth_try: u64,
    pub(in crate::peer) queue_len: u64,
}

/// The cycles after a first reading (the base), as later readings show them.
#[derive(Debug, Clone)]
pub(in crate::peer) struct Window {
    pub(in crate::peer) base: Backfill,
    pub(in crate::peer) last: Backfill,
    /// The cycles seen one by one.
    pub(in crate::peer) cycles: Vec<Cycle>,
    /// Cycles that ended between two readings with others.
    pub(in crate::peer) missed: u64,
}

/// What a window's cycles come to.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(in crate::peer) struct Summary {
    pub(in crate::peer) cycles: u64,
    pub(in crate::peer) mean_us: f64,
    /// The longest cycle seen one by one (None when none was).
    pub(in crate::peer) max_us: Option<u64>,
    pub(in crate::peer) depth_mean: f64,
    pub(in crate::peer) depth_try_mean: f64,
    pub(in crate::peer) queue_len_mean: f64,
    /// Jobs examined per second of cycle time: depth over time, summed over cycles.
    pub(in crate::peer) examined_per_s: f64,
    /// Whether the means came from the printed sums (a poll missed a cycle).
    pub(in crate::peer) from_sums: bool,
}

impl Window {
    pub(in crate::peer) fn new(base: Backfill) -> Window {
        Window {
            last: base.clone(),
            base,
            cycles: Vec::new(),
            missed: 0,
        }
    }

    /// Cycles completed since the base.
    pub(in crate::peer) fn len(&self) -> u64 {
        self.last.cycles.saturating_sub(self.base.cycles)
    }

    /// Take a later reading. A reading with fewer cycles than the last one (a
    /// restarted controller) is refused.
    pub(in crate::peer) fn observe(&mut self, b: Backfill) -> Result<(), String> {
        if b.cycles < self.last.cycles {
            return Err(format!(
                "sdiag's Total cycles went back from {} to {}",
                self.last.cycles, b.cycles
            ));
        }
        match b.cycles - self.last.cycles {
            0 => {}
            1 => self.cycles.push(Cycle {
                us: b.last_us,
                depth: b.last_depth,
                depth_try: b.last_depth_try,
                queue_len: b.last_queue_len,
            }),
            n => self.missed += n,
        }
        self.last = b;
        Ok(())
    }

    /// The window's figures, or None before its first cycle.
    pub(in crate::peer) fn summary(&self) -> Option<Summary> {
        let n = self.len();
        if n == 0 {
            return None;
        }
        let max_us = self.cycles.iter().map(|c| c.us).max();
        if self.missed == 0 {
            let k = self.cycles.len() as f64;
            let sum = |f: fn(&Cycle) -> u64| self.cycles.iter().map(f).sum::<u64>() as f64;
            let (us, depth) = (sum(|c| c.us), sum(|c| c.depth));
            return Some(Summary {
                cycles: n,
                mean_us: us / k,
                max_us,
                depth_mean: depth / k,
                depth_try_mean: sum(|c| c.depth_try) / k,
                queue_len_mean: sum(|c| c.queue_len) / k,
                examined_per_s: per_second(depth, us),
                from_sums: false,
            });
        }
        // sum = mean × cycles, read at both ends of the window.
        let delta = |f: fn(&Backfill) -> Option<u64>| {
            let at = |b: &Backfill| f(b).unwrap_or(0) as f64 * b.cycles as f64;
            (at(&self.last) - at(&self.base)).max(0.0)
        };
        let (us, depth) = (delta(|b| b.mean_us), delta(|b| b.depth_mean));
        let k = n as f64;
        Some(Summary {
            cycles: n,
            mean_us: us / k,
            max_us,
            depth_mean: depth / k,
            depth_try_mean: delta(|b| b.depth_try_mean) / k,
            queue_len_mean: delta(|b| b.queue_len_mean) / k,
            examined_per_s: per_second(depth, us),
            from_sums: true,
        })
    }
}

fn per_second(jobs: f64, us: f64) -> f64 {
    if us > 0.0 {
        jobs * 1e6 / us
    } else {
        0.0
    }
}
