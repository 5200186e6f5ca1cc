//! The sandbox's seccomp filter: a small classic-BPF program, built as data and installed last before exec.
//!
//! We write the BPF by hand rather than use a crate because we need three things exactly: an x32 range
//! check, a masked 32-bit comparison of ioctl requests, and flag-bit tests on clone/unshare.

use std::io;

use crate::spec::SeccompPolicy;

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
compile_error!("the seccomp filter only knows the x86_64 and aarch64 system call ABIs");

// AUDIT_ARCH_* from include/uapi/linux/audit.h (EM_* | __AUDIT_ARCH_64BIT | __AUDIT_ARCH_LE); libc does not
// export them.
#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xC000_003E;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xC000_00B7;

// x32 calls reach the x86_64 table with this bit set in the number; filtering only the plain numbers would
// leave every x32 alias open.
#[cfg(target_arch = "x86_64")]
const X32_SYSCALL_BIT: u32 = 0x4000_0000;

// open_tree_attr (Linux 6.15) is open_tree plus mount_setattr; libc does not name it yet. New system calls
// share one number on every architecture.
const SYS_OPEN_TREE_ATTR: libc::c_long = 467;

// Offsets into `struct seccomp_data`: nr, arch, instruction_pointer, then six 64-bit args. Both targets
// are little-endian, so an argument's low 32 bits are the first word of its slot.
const OFFSET_NR: u32 = 0;
const OFFSET_ARCH: u32 = 4;
const fn offset_arg_low(index: u32) -> u32 {
    16 + 8 * index
}

const RET_ALLOW: u32 = libc::SECCOMP_RET_ALLOW;
const RET_KILL_PROCESS: u32 = libc::SECCOMP_RET_KILL_PROCESS;
const RET_EPERM: u32 = ret_errno(libc::EPERM);
const RET_ENOSYS: u32 = ret_errno(libc::ENOSYS);

const fn ret_errno(errno: i32) -> u32 {
    libc::SECCOMP_RET_ERRNO | (errno as u32 & libc::SECCOMP_RET_DATA)
}

const NS_FLAGS_CLONE: u32 = (libc::CLONE_NEWNS
    | libc::CLONE_NEWUSER
    | libc::CLONE_NEWPID
    | libc::CLONE_NEWNET
    | libc::CLONE_NEWIPC
    | libc::CLONE_NEWUTS
    | libc::CLONE_NEWCGROUP) as u32;
// CLONE_NEWTIME (0x80) lies in clone's exit-signal byte, so only unshare (and clone3) can request it.
const NS_FLAGS_UNSHARE: u32 = NS_FLAGS_CLONE | libc::CLONE_NEWTIME as u32;

/// System calls that fail with EPERM whatever the policy: kernel keyrings, BPF, perf, userfaultfd, kernel
/// modules and kexec, and file handles (open_by_handle_at walks around the mount namespace).
const ALWAYS_DENIED: &[(&str, libc::c_long)] = &[
    ("keyctl", libc::SYS_keyctl),
    ("add_key", libc::SYS_add_key),
    ("request_key", libc::SYS_request_key),
    ("bpf", libc::SYS_bpf),
    ("perf_event_open", libc::SYS_perf_event_open),
    ("userfaultfd", libc::SYS_userfaultfd),
    ("kexec_load", libc::SYS_kexec_load),
    ("kexec_file_load", libc::SYS_kexec_file_load),
    ("init_module", libc::SYS_init_module),
    ("finit_module", libc::SYS_finit_module),
    ("delete_module", libc::SYS_delete_module),
    ("open_by_handle_at", libc::SYS_open_by_handle_at),
];

/// The mount family and setns: denied unless the policy allows nested namespaces.
const MOUNT_FAMILY: &[(&str, libc::c_long)] = &[
    ("mount", libc::SYS_mount),
    ("umount2", libc::SYS_umount2),
    ("pivot_root", libc::SYS_pivot_root),
    ("chroot", libc::SYS_chroot),
    ("move_mount", libc::SYS_move_mount),
    ("open_tree", libc::SYS_open_tree),
    ("open_tree_attr", SYS_OPEN_TREE_ATTR),
    ("fsopen", libc::SYS_fsopen),
    ("fsconfig", libc::SYS_fsconfig),
    ("fsmount", libc::SYS_fsmount),
    ("fspick", libc::SYS_fspick),
    ("mount_setattr", libc::SYS_mount_setattr),
    ("setns", libc::SYS_setns),
];

/// A compiled seccomp filter, ready to install in the workload just before `execve`.
#[derive(Debug, Clone)]
pub struct SeccompProgram(Vec<libc::sock_filter>);

impl SeccompProgram {
    /// The BPF instructions, in order.
    pub fn instructions(&self) -> &[libc::sock_filter] {
        &self.0
    }

    /// Installs the filter on the calling thread with `seccomp(SECCOMP_SET_MODE_FILTER, 0, ..)`.
    ///
    /// Does not allocate, so it is safe between fork and exec. The caller must already have set
    /// `PR_SET_NO_NEW_PRIVS` (or hold CAP_SYS_ADMIN), or the kernel refuses with EACCES.
    pub fn install(&self) -> io::Result<()> {
        let len =
            u16::try_from(self.0.len()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
        let prog = libc::sock_fprog {
            len,
            filter: self.0.as_ptr().cast_mut(),
        };
        // SAFETY: `prog` points at our instructions, which outlive the call; the kernel copies them and
        // never writes through the pointer.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_seccomp,
                libc::SECCOMP_SET_MODE_FILTER,
                0 as libc::c_uint,
                &prog as *const libc::sock_fprog,
            )
        };
        if rc == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }
}

const fn load(offset: u32) -> libc::sock_filter {
    libc::sock_filter {
        code: (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16,
        jt: 0,
        jf: 0,
        k: offset,
    }
}

const fn jump(op: u32, k: u32, jt: u8, jf: u8) -> libc::sock_filter {
    libc::sock_filter {
        code: (libc::BPF_JMP | op | libc::BPF_K) as u16,
        jt,
        jf,
        k,
    }
}

const fn ret(action: u32) -> libc::sock_filter {
    libc::sock_filter {
        code: (libc::BPF_RET | libc::BPF_K) as u16,
        jt: 0,
        jf: 0,
        k: action,
    }
}

/// Builds the filter for `policy`. Pure: it only assembles instructions.
///
/// Every block either returns or falls through with the system call number still in the accumulator, so
/// all jumps are short and forward.
pub fn build(policy: SeccompPolicy) -> SeccompProgram {
    let mut p = Vec::with_capacity(80);

    // Another ABI (i386 via int 0x80, arm32) has another numbering: nothing below would mean anything.
    p.push(load(OFFSET_ARCH));
    p.push(jump(libc::BPF_JEQ, AUDIT_ARCH, 1, 0));
    p.push(ret(RET_KILL_PROCESS));
    p.push(load(OFFSET_NR));

    #[cfg(target_arch = "x86_64")]
    {
        p.push(jump(libc::BPF_JSET, X32_SYSCALL_BIT, 0, 1));
        p.push(ret(RET_EPERM));
    }

    // clone3 passes its flags in memory where BPF cannot look; ENOSYS makes libc fall back to clone.
    p.push(jump(libc::BPF_JEQ, libc::SYS_clone3 as u32, 0, 1));
    p.push(ret(RET_ENOSYS));

    let mut denied = ALWAYS_DENIED.to_vec();
    if !policy.nested_namespaces {
        denied.extend_from_slice(MOUNT_FAMILY);
    }
    for &(_, nr) in &denied {
        p.push(jump(libc::BPF_JEQ, nr as u32, 0, 1));
        p.push(ret(RET_EPERM));
    }

    // The kernel reads the request as 32 bits, so a 64-bit comparison is bypassed by setting high bits:
    // load only the low word.
    p.push(jump(libc::BPF_JEQ, libc::SYS_ioctl as u32, 0, 5));
    p.push(load(offset_arg_low(1)));
    p.push(jump(libc::BPF_JEQ, libc::TIOCSTI as u32, 2, 0));
    p.push(jump(libc::BPF_JEQ, libc::TIOCLINUX as u32, 1, 0));
    p.push(ret(RET_ALLOW));
    p.push(ret(RET_EPERM));

    if !policy.nested_namespaces {
        // Flags are the first argument of both calls on x86_64 and aarch64, and are an int to the kernel.
        for (nr, flags) in [
            (libc::SYS_unshare, NS_FLAGS_UNSHARE),
            (libc::SYS_clone, NS_FLAGS_CLONE),
        ] {
            p.push(jump(libc::BPF_JEQ, nr as u32, 0, 4));
            p.push(load(offset_arg_low(0)));
            p.push(jump(libc::BPF_JSET, flags, 0, 1));
            p.push(ret(RET_EPERM));
            p.push(ret(RET_ALLOW));
        }
    }

    p.push(ret(RET_ALLOW));
    SeccompProgram(p)
}

/// What the filter refuses under `policy`, for documentation and `airlock doctor`. Argument-dependent
/// denials are written as `call(ARGUMENT)`.
pub fn denied_syscall_names(policy: SeccompPolicy) -> Vec<&'static str> {
    let mut names = Vec::new();
    #[cfg(target_arch = "x86_64")]
    names.push("x32 system calls");
    names.push("clone3 (ENOSYS)");
    names.extend(ALWAYS_DENIED.iter().map(|&(name, _)| name));
    names.extend(["ioctl(TIOCSTI)", "ioctl(TIOCLINUX)"]);
    if !policy.nested_namespaces {
        names.extend(MOUNT_FAMILY.iter().map(|&(name, _)| name));
        names.extend(["unshare(CLONE_NEW*)", "clone(CLONE_NEW*)"]);
    }
    names
}

#[cfg(test)]
mod tests;
