//! cgroup v2 device fencing: v2 has no `devices.deny`; the kernel instead runs
//! `BPF_PROG_TYPE_CGROUP_DEVICE` programs attached to a cgroup (and its ancestors) on every
//! device open and mknod. This module builds one such program from a deny list and
//! attaches it with the bpf(2) syscall, as Slurm's cgroup/v2 plugin and runc do.
//!
//! The program is a handful of hand-assembled instructions: one block per denied device
//! (`type major:minor` → return 0), then return 1, so every device not denied stays
//! allowed, as with Slurm's ConstrainDevices (only the GRES devices a job was not given
//! are fenced). Hand assembly avoids a BPF toolchain and a loader crate that builds C;
//! the instruction set used is five opcodes, checked by the kernel's verifier at load.
//!
//! Programs are attached with `BPF_F_ALLOW_MULTI`, so a step's program runs together
//! with its job's (the kernel allows access only if all allow), and they live as long as
//! the cgroup: no descriptor needs keeping after the attach.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;

use nix::libc;

use super::{fs, ContainError};

const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_PROG_ATTACH: libc::c_long = 8;
const BPF_PROG_TYPE_CGROUP_DEVICE: u32 = 15;
const BPF_CGROUP_DEVICE: u32 = 6;
const BPF_F_ALLOW_MULTI: u32 = 2;
/// `bpf_cgroup_dev_ctx.access_type`'s low half: the device type.
const BPF_DEVCG_DEV_BLOCK: i32 = 1;
const BPF_DEVCG_DEV_CHAR: i32 = 2;

/// One instruction: `struct bpf_insn` (8 bytes; registers in one byte, dst low).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Insn {
    code: u8,
    regs: u8,
    off: i16,
    imm: i32,
}

const fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Insn {
    Insn {
        code,
        regs: (src << 4) | dst,
        off,
        imm,
    }
}

/// `rD = *(u32 *)(rS + off)`
const fn load_word(dst: u8, src: u8, off: i16) -> Insn {
    insn(0x61, dst, src, off, 0)
}
/// `rD &= imm` (32-bit)
const fn and32(dst: u8, imm: i32) -> Insn {
    insn(0x54, dst, 0, 0, imm)
}
/// `if rD != imm goto +off`
const fn jump_ne(dst: u8, imm: i32, off: i16) -> Insn {
    insn(0x55, dst, 0, off, imm)
}
/// `r0 = imm`
const fn ret_value(imm: i32) -> Insn {
    insn(0xb7, 0, 0, 0, imm)
}
const EXIT: Insn = insn(0x95, 0, 0, 0, 0);

/// A denied device: `(type, major, minor)` with type 'c' or 'b'.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Denied {
    pub char_device: bool,
    pub major: u32,
    pub minor: u32,
}

impl Denied {
    /// From the `c MAJ:MIN` form the v1 code writes.
    pub(super) fn parse(rule: &str) -> Option<Denied> {
        let (kind, numbers) = rule.split_once(' ')?;
        let (major, minor) = numbers.split_once(':')?;
        Some(Denied {
            char_device: match kind {
                "c" => true,
                "b" => false,
                _ => return None,
            },
            major: major.parse().ok()?,
            minor: minor.parse().ok()?,
        })
    }
}

/// The program: deny each listed device, allow everything else.
fn program(denied: &[Denied]) -> Vec<Insn> {
    // r1 = ctx: { u32 access_type; u32 major; u32 minor; }
    let mut out = vec![
        load_word(2, 1, 0),
        and32(2, 0xffff), // the device type; the access (r/w/mknod) is not looked at
        load_word(4, 1, 4),
        load_word(5, 1, 8),
    ];
    for d in denied {
        let kind = if d.char_device {
            BPF_DEVCG_DEV_CHAR
        } else {
            BPF_DEVCG_DEV_BLOCK
        };
        // Majors are 12 bits and minors 20: both fit an i32 immediate.
        out.extend([
            jump_ne(2, kind, 4),
            jump_ne(4, d.major as i32, 3),
            jump_ne(5, d.minor as i32, 2),
            ret_value(0),
            EXIT,
        ]);
    }
    out.extend([ret_value(1), EXIT]);
    out
}

/// `union bpf_attr` for BPF_PROG_LOAD, up to `expected_attach_type`.
#[repr(C)]
#[derive(Default)]
struct LoadAttr {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
    prog_ifindex: u32,
    expected_attach_type: u32,
}

/// `union bpf_attr` for BPF_PROG_ATTACH.
#[repr(C)]
struct AttachAttr {
    target_fd: u32,
    attach_bpf_fd: u32,
    attach_type: u32,
    attach_flags: u32,
}

/// Attach a program denying `denied` to the cgroup at `dir`. Nothing to do for an empty
/// list (every device is allowed anyway).
pub(super) fn deny(dir: &Path, denied: &[Denied]) -> Result<(), ContainError> {
    if denied.is_empty() {
        return Ok(());
    }
    let prog = load(denied).map_err(|e| fs::io_error("load device program for", dir, e))?;
    attach(dir, &prog)
}

/// Whether this kernel loads device programs for us (bpf(2) allowed, CONFIG_CGROUP_BPF).
pub(super) fn probe() -> std::io::Result<()> {
    load(&[]).map(drop)
}

fn load(denied: &[Denied]) -> std::io::Result<OwnedFd> {
    let insns = program(denied);
    let license = c"GPL";
    let mut name = [0u8; 16];
    name[..14].copy_from_slice(b"canopy_devices");
    let mut log = vec![0u8; 4096];
    let attr = LoadAttr {
        prog_type: BPF_PROG_TYPE_CGROUP_DEVICE,
        insn_cnt: insns.len() as u32,
        insns: insns.as_ptr() as u64,
        license: license.as_ptr() as u64,
        log_level: 1,
        log_size: log.len() as u32,
        log_buf: log.as_mut_ptr() as u64,
        prog_name: name,
        ..LoadAttr::default()
    };
    // SAFETY: attr and the buffers it points to (insns, license, log) outlive the call,
    // and the size passed is the struct's; the kernel zero-extends a shorter bpf_attr.
    let prog = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_PROG_LOAD,
            &attr as *const LoadAttr,
            std::mem::size_of::<LoadAttr>(),
        )
    };
    if prog < 0 {
        let error = std::io::Error::last_os_error();
        let verifier = String::from_utf8_lossy(&log);
        let verifier = verifier.trim_end_matches('\0').trim();
        if verifier.is_empty() {
            return Err(error);
        }
        return Err(std::io::Error::new(
            error.kind(),
            format!("{error}; verifier: {verifier}"),
        ));
    }
    // SAFETY: a successful BPF_PROG_LOAD returns a new descriptor that we now own.
    Ok(unsafe { OwnedFd::from_raw_fd(prog as i32) })
}

fn attach(dir: &Path, prog: &OwnedFd) -> Result<(), ContainError> {
    let cgroup = std::fs::File::open(dir).map_err(|e| fs::io_error("open", dir, e))?;
    let attach = AttachAttr {
        target_fd: cgroup.as_raw_fd() as u32,
        attach_bpf_fd: prog.as_raw_fd() as u32,
        attach_type: BPF_CGROUP_DEVICE,
        attach_flags: BPF_F_ALLOW_MULTI,
    };
    // SAFETY: as above; both descriptors are open for the call.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_PROG_ATTACH,
            &attach as *const AttachAttr,
            std::mem::size_of::<AttachAttr>(),
        )
    };
    if rc < 0 {
        return Err(fs::io_error(
            "attach device program to",
            dir,
            std::io::Error::last_os_error(),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_parse_from_the_v1_form() {
        assert_eq!(
            Denied::parse("c 195:1"),
            Some(Denied {
                char_device: true,
                major: 195,
                minor: 1
            })
        );
        assert_eq!(Denied::parse("b 8:0").map(|d| d.char_device), Some(false));
        assert_eq!(Denied::parse("x 1:1"), None);
        assert_eq!(Denied::parse("c 1"), None);
    }

    #[test]
    fn program_denies_each_listed_device_and_allows_the_rest() {
        let denied = [Denied::parse("c 195:0").expect("rule")];
        let p = program(&denied);
        assert_eq!(p.len(), 4 + 5 + 2);
        // Each jump lands on the next block (or the final "allow").
        assert_eq!(p[4], jump_ne(2, BPF_DEVCG_DEV_CHAR, 4));
        assert_eq!(p[5], jump_ne(4, 195, 3));
        assert_eq!(p[6], jump_ne(5, 0, 2));
        assert_eq!(&p[7..9], &[ret_value(0), EXIT]);
        assert_eq!(&p[9..], &[ret_value(1), EXIT]);
        assert_eq!(std::mem::size_of::<Insn>(), 8);
        assert_eq!(std::mem::size_of::<LoadAttr>(), 72);
    }
}
