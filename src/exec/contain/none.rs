//! Unconfined: no usable cgroupfs (not root, a read-only or non-cgroup mount point, a
//! controller missing) or `CgroupPlugin=disabled`. Steps run as they would without
//! cgroups; every operation is a no-op, so the node daemon keeps working, and the caller
//! must keep its own process-group kill (this mode cannot find double-forked daemons).
//! The reason is logged once, here, at start, and is kept for the daemon's state view.

pub(super) struct Unconfined {
    reason: String,
}

impl Unconfined {
    /// `warn`: false when the operator asked for it (`CgroupPlugin=disabled`).
    pub(super) fn new(reason: String, warn: bool) -> Unconfined {
        if warn {
            tracing::warn!(%reason, "cgroup: steps run unconfined (no memory, cpu or device fencing; proctrack by process group only)");
        } else {
            tracing::info!(%reason, "cgroup: steps run unconfined");
        }
        Unconfined { reason }
    }

    pub(super) fn reason(&self) -> &str {
        &self.reason
    }
}
