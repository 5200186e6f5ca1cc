//! The sandbox's seccomp filter: a small classic-BPF program, built as data and installed last before exec.
//!
//! We write the BPF by hand rather than use a crate because we need three things exactly: an x32 range
//! check, masked 32-bit comparisons of ioctl requests and socket families, and flag-bit tests on
//! clone/unshare. What it refuses is data, in `rules`.

use std::io;

use crate::spec::SeccompPolicy;

pub(crate) mod rules;

use rules::{
    AF_NETLINK, ALLOWED_FAMILIES, ALLOWED_NETLINK, ALWAYS_DENIED, DENIED_IOCTLS, MOUNT_FAMILY,
};

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
/// The supervisor decides (it answers EPERM, and says once which key allows nested namespaces).
const RET_USER_NOTIF: u32 = libc::SECCOMP_RET_USER_NOTIF;

const fn ret_errno(errno: i32) -> u32 {
    libc::SECCOMP_RET_ERRNO | (errno as u32 & libc::SECCOMP_RET_DATA)
}

pub(crate) const NS_FLAGS_CLONE: u32 = (libc::CLONE_NEWNS
    | libc::CLONE_NEWUSER
    | libc::CLONE_NEWPID
    | libc::CLONE_NEWNET
    | libc::CLONE_NEWIPC
    | libc::CLONE_NEWUTS
    | libc::CLONE_NEWCGROUP) as u32;
// CLONE_NEWTIME (0x80) lies in clone's exit-signal byte, so only unshare (and clone3) can request it.
pub(crate) const NS_FLAGS_UNSHARE: u32 = NS_FLAGS_CLONE | libc::CLONE_NEWTIME as u32;

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
        self.set_filter(0).map(drop)
    }

    /// Installs the filter with a listener for its `SECCOMP_RET_USER_NOTIF` decisions
    /// (`SECCOMP_FILTER_FLAG_NEW_LISTENER`) and returns the listener. On failure nothing was
    /// installed: a kernel before 5.0 (EINVAL), or a filter with a listener already in place
    /// (EBUSY, e.g. airlock run inside a container manager that uses one).
    pub fn install_listening(&self) -> io::Result<std::os::fd::OwnedFd> {
        use std::os::fd::FromRawFd as _;
        let fd = self.set_filter(libc::SECCOMP_FILTER_FLAG_NEW_LISTENER as libc::c_uint)?;
        // SAFETY: with this flag the kernel returns a new descriptor, which we now own.
        Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd as i32) })
    }

    fn set_filter(&self, flags: libc::c_uint) -> io::Result<libc::c_long> {
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
                flags,
                &prog as *const libc::sock_fprog,
            )
        };
        if rc < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(rc)
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
pub fn build(policy: SeccompPolicy) -> SeccompProgram {
    assemble(policy, RET_EPERM)
}

/// The same filter, but a refused namespace call (`unshare`/`clone` with `CLONE_NEW*`) goes to the
/// supervisor, which answers EPERM and says once which key allows it. `None` when `policy` allows
/// namespaces, so there is nothing to report.
pub fn build_notifying(policy: SeccompPolicy) -> Option<SeccompProgram> {
    (!policy.nested_namespaces).then(|| assemble(policy, RET_USER_NOTIF))
}

/// Every block either returns or falls through with the system call number still in the accumulator, so
/// all jumps are short and forward. `namespace` is what a refused namespace call returns.
fn assemble(policy: SeccompPolicy, namespace: u32) -> SeccompProgram {
    let mut p = Vec::with_capacity(128);

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

    ioctl_rules(&mut p);
    socket_rules(&mut p);

    if !policy.nested_namespaces {
        // Flags are the first argument of both calls on x86_64 and aarch64, and are an int to the kernel.
        for (nr, flags) in [
            (libc::SYS_unshare, NS_FLAGS_UNSHARE),
            (libc::SYS_clone, NS_FLAGS_CLONE),
        ] {
            p.push(jump(libc::BPF_JEQ, nr as u32, 0, 4));
            p.push(load(offset_arg_low(0)));
            p.push(jump(libc::BPF_JSET, flags, 0, 1));
            p.push(ret(namespace));
            p.push(ret(RET_ALLOW));
        }
    }

    p.push(ret(RET_ALLOW));
    SeccompProgram(p)
}

/// The jump offset from the instruction at `from` to the one at `to` (both absolute indices).
fn skip(from: usize, to: usize) -> u8 {
    u8::try_from(to - from - 1).expect("the filter's blocks are shorter than 256 instructions")
}

/// ioctl: the requests of [`DENIED_IOCTLS`] fail with EPERM, everything else is allowed.
///
/// The kernel reads the request as 32 bits, so a 64-bit comparison is bypassed by setting high bits:
/// load only the low word.
fn ioctl_rules(p: &mut Vec<libc::sock_filter>) {
    // load, one test per request, allow, deny.
    let body = 1 + DENIED_IOCTLS.len() + 2;
    p.push(jump(libc::BPF_JEQ, libc::SYS_ioctl as u32, 0, body as u8));
    let deny = p.len() + body - 1;
    p.push(load(offset_arg_low(1)));
    for &(_, request) in DENIED_IOCTLS {
        p.push(jump(libc::BPF_JEQ, request, skip(p.len(), deny), 0));
    }
    p.push(ret(RET_ALLOW));
    p.push(ret(RET_EPERM));
}

/// socket and socketpair: the families of [`ALLOWED_FAMILIES`], and AF_NETLINK with the protocols of
/// [`ALLOWED_NETLINK`], are allowed; anything else fails with EPERM. The family (first argument) and
/// the protocol (third) are ints to the kernel: only the low words are compared.
fn socket_rules(p: &mut Vec<libc::sock_filter>) {
    // load family, one test per family, the netlink test, load protocol, one test per protocol,
    // deny, allow.
    let body = 1 + ALLOWED_FAMILIES.len() + 2 + ALLOWED_NETLINK.len() + 2;
    p.push(jump(libc::BPF_JEQ, libc::SYS_socket as u32, 1, 0));
    p.push(jump(
        libc::BPF_JEQ,
        libc::SYS_socketpair as u32,
        0,
        body as u8,
    ));
    let (deny, allow) = (p.len() + body - 2, p.len() + body - 1);
    p.push(load(offset_arg_low(0)));
    for &(_, family) in ALLOWED_FAMILIES {
        p.push(jump(libc::BPF_JEQ, family, skip(p.len(), allow), 0));
    }
    p.push(jump(libc::BPF_JEQ, AF_NETLINK, 0, skip(p.len(), deny)));
    p.push(load(offset_arg_low(2)));
    for &(_, protocol) in ALLOWED_NETLINK {
        p.push(jump(libc::BPF_JEQ, protocol, skip(p.len(), allow), 0));
    }
    p.push(ret(RET_EPERM));
    p.push(ret(RET_ALLOW));
    debug_assert_eq!(p.len(), allow + 1);
}

/// What the filter refuses under `policy`, for documentation and `airlock doctor`. Argument-dependent
/// denials are written as `call(ARGUMENT)`.
pub fn denied_syscall_names(policy: SeccompPolicy) -> Vec<String> {
    let mut names = Vec::new();
    #[cfg(target_arch = "x86_64")]
    names.push("x32 system calls".to_owned());
    names.push("clone3 (ENOSYS)".to_owned());
    names.extend(ALWAYS_DENIED.iter().map(|&(name, _)| name.to_owned()));
    names.extend(
        DENIED_IOCTLS
            .iter()
            .map(|&(name, _)| format!("ioctl({name})")),
    );
    let listed = |list: &[(&str, u32)]| {
        list.iter()
            .map(|&(name, _)| name)
            .collect::<Vec<_>>()
            .join(", ")
    };
    for call in ["socket", "socketpair"] {
        names.push(format!(
            "{call}(any family but {}, AF_NETLINK with {})",
            listed(ALLOWED_FAMILIES),
            listed(ALLOWED_NETLINK)
        ));
    }
    if !policy.nested_namespaces {
        names.extend(MOUNT_FAMILY.iter().map(|&(name, _)| name.to_owned()));
        names.extend([
            "unshare(CLONE_NEW*)".to_owned(),
            "clone(CLONE_NEW*)".to_owned(),
        ]);
    }
    names
}

#[cfg(test)]
mod tests;
