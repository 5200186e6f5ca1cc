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

/// Runs code in a forked child for tests of process-wide, irreversible state (seccomp filters, Landlock
/// domains, dropped capabilities).
#[cfg(test)]
pub(crate) mod forked {
    use std::io::Read;
    use std::panic::{AssertUnwindSafe, catch_unwind};

    use nix::fcntl::OFlag;
    use nix::sys::signal::Signal;
    use nix::sys::wait::{WaitStatus, waitpid};
    use nix::unistd::{ForkResult, fork, pipe2};

    /// How the child ended, with the message it returned on failure.
    #[derive(Debug, PartialEq, Eq)]
    pub enum End {
        Exited(i32, String),
        Signaled(Signal),
    }

    /// Forks, runs `body` in the child and `_exit`s with 0 on `Ok`, 1 (message passed back) on `Err`.
    pub fn run(body: impl FnOnce() -> Result<(), String>) -> End {
        // Non-blocking: the parent reads only after the child is gone, so a write end leaked into a
        // concurrently forked child (tests run in threads) cannot make it wait.
        let (read_end, write_end) = pipe2(OFlag::O_CLOEXEC | OFlag::O_NONBLOCK).expect("pipe2");
        // SAFETY: the child only runs `body` and exits; glibc keeps malloc usable after fork.
        match unsafe { fork() }.expect("fork") {
            ForkResult::Child => {
                drop(read_end);
                let (code, message) = match catch_unwind(AssertUnwindSafe(body)) {
                    Ok(Ok(())) => (0, String::new()),
                    Ok(Err(message)) => (1, message),
                    Err(_) => (2, "the child panicked".to_owned()),
                };
                let mut file = std::fs::File::from(write_end);
                let _ = std::io::Write::write_all(&mut file, message.as_bytes());
                // SAFETY: leave without running the test harness's atexit handlers or destructors.
                unsafe { libc::_exit(code) }
            }
            ForkResult::Parent { child } => {
                drop(write_end);
                let status = waitpid(child, None).expect("waitpid");
                let mut message = String::new();
                let _ = std::fs::File::from(read_end).read_to_string(&mut message);
                match status {
                    WaitStatus::Exited(_, code) => End::Exited(code, message),
                    WaitStatus::Signaled(_, signal, _) => End::Signaled(signal),
                    other => panic!("unexpected wait status {other:?}"),
                }
            }
        }
    }

    /// Like [`run`], and panics with the child's message unless it succeeded.
    pub fn assert_ok(body: impl FnOnce() -> Result<(), String>) {
        match run(body) {
            End::Exited(0, _) => {}
            End::Exited(_, message) => panic!("{message}"),
            End::Signaled(signal) => panic!("child killed by {signal}"),
        }
    }

    /// The result of a raw system call as `Ok(return value)` or `Err(errno)`.
    pub fn errno_of(rc: libc::c_long) -> Result<libc::c_long, i32> {
        if rc == -1 {
            Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0))
        } else {
            Ok(rc)
        }
    }

    /// Checks that `what` returned `expected`, describing the mismatch otherwise.
    pub fn expect(
        what: &str,
        got: Result<libc::c_long, i32>,
        expected: Result<libc::c_long, i32>,
    ) -> Result<(), String> {
        let show = |r: Result<libc::c_long, i32>| match r {
            Ok(v) => format!("Ok({v})"),
            Err(e) => format!("Err({})", std::io::Error::from_raw_os_error(e)),
        };
        if got == expected {
            Ok(())
        } else {
            Err(format!(
                "{what}: got {}, expected {}",
                show(got),
                show(expected)
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::forked::{End, assert_ok, errno_of, expect, run};
    use super::*;

    const STRICT: SeccompPolicy = SeccompPolicy {
        nested_namespaces: false,
    };
    const NESTED: SeccompPolicy = SeccompPolicy {
        nested_namespaces: true,
    };

    /// Runs the program on one `seccomp_data`, the way the kernel would (only the opcodes we emit).
    fn eval(prog: &SeccompProgram, arch: u32, nr: u32, args: [u64; 6]) -> u32 {
        let word = |offset: u32| -> u32 {
            match offset {
                OFFSET_NR => nr,
                OFFSET_ARCH => arch,
                o if (16..64).contains(&o) && o % 8 == 0 => args[((o - 16) / 8) as usize] as u32,
                o => panic!("load of unexpected offset {o}"),
            }
        };
        let (mut pc, mut acc) = (0usize, 0u32);
        loop {
            let insn = prog.0[pc];
            let code = u32::from(insn.code);
            pc += 1;
            if code == libc::BPF_LD | libc::BPF_W | libc::BPF_ABS {
                acc = word(insn.k);
            } else if code == libc::BPF_RET | libc::BPF_K {
                return insn.k;
            } else {
                let taken = match code {
                    c if c == libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K => acc == insn.k,
                    c if c == libc::BPF_JMP | libc::BPF_JSET | libc::BPF_K => acc & insn.k != 0,
                    c => panic!("unexpected opcode {c:#x}"),
                };
                pc += usize::from(if taken { insn.jt } else { insn.jf });
            }
        }
    }

    fn nr(n: libc::c_long) -> u32 {
        n as u32
    }

    #[test]
    fn program_decisions() {
        let strict = build(STRICT);
        let nested = build(NESTED);
        let none = [0; 6];
        assert!(strict.instructions().len() < 256);
        assert_eq!(eval(&strict, 0x4000_0003, 20, none), RET_KILL_PROCESS);
        assert_eq!(
            eval(&strict, AUDIT_ARCH, nr(libc::SYS_getpid), none),
            RET_ALLOW
        );
        assert_eq!(
            eval(&strict, AUDIT_ARCH, nr(libc::SYS_clone3), none),
            RET_ENOSYS
        );
        assert_eq!(
            eval(&strict, AUDIT_ARCH, nr(libc::SYS_keyctl), none),
            RET_EPERM
        );
        let sti = libc::TIOCSTI;
        let ioctl = |p: &SeccompProgram, req: u64| {
            eval(p, AUDIT_ARCH, nr(libc::SYS_ioctl), [0, req, 0, 0, 0, 0])
        };
        assert_eq!(ioctl(&strict, sti), RET_EPERM);
        assert_eq!(ioctl(&strict, 0xdead_beef_0000_0000 | sti), RET_EPERM);
        assert_eq!(ioctl(&strict, libc::TIOCLINUX), RET_EPERM);
        assert_eq!(ioctl(&strict, libc::TIOCGWINSZ), RET_ALLOW);
        assert_eq!(ioctl(&nested, sti), RET_EPERM);
        let unshare = |p: &SeccompProgram, flags: u64| {
            eval(p, AUDIT_ARCH, nr(libc::SYS_unshare), [flags, 0, 0, 0, 0, 0])
        };
        assert_eq!(unshare(&strict, libc::CLONE_NEWUSER as u64), RET_EPERM);
        assert_eq!(unshare(&strict, libc::CLONE_NEWTIME as u64), RET_EPERM);
        assert_eq!(unshare(&strict, libc::CLONE_FILES as u64), RET_ALLOW);
        assert_eq!(unshare(&nested, libc::CLONE_NEWUSER as u64), RET_ALLOW);
        let fork_flags =
            (libc::CLONE_CHILD_SETTID | libc::CLONE_CHILD_CLEARTID | libc::SIGCHLD) as u64;
        let clone = |flags: u64| {
            eval(
                &strict,
                AUDIT_ARCH,
                nr(libc::SYS_clone),
                [flags, 0, 0, 0, 0, 0],
            )
        };
        assert_eq!(clone(fork_flags), RET_ALLOW);
        assert_eq!(clone(fork_flags | libc::CLONE_NEWNET as u64), RET_EPERM);
        assert_eq!(
            eval(&strict, AUDIT_ARCH, nr(libc::SYS_mount), none),
            RET_EPERM
        );
        assert_eq!(
            eval(&nested, AUDIT_ARCH, nr(libc::SYS_mount), none),
            RET_ALLOW
        );
        #[cfg(target_arch = "x86_64")]
        assert_eq!(
            eval(
                &strict,
                AUDIT_ARCH,
                X32_SYSCALL_BIT | nr(libc::SYS_getpid),
                none
            ),
            RET_EPERM
        );
    }

    #[test]
    fn denied_names_follow_the_policy() {
        let strict = denied_syscall_names(STRICT);
        let nested = denied_syscall_names(NESTED);
        assert!(strict.contains(&"mount") && strict.contains(&"keyctl"));
        assert!(!nested.contains(&"mount") && nested.contains(&"keyctl"));
    }

    /// Installs the filter in the (forked) caller, with no_new_privs as the launch sets it.
    fn confine(policy: SeccompPolicy) -> Result<(), String> {
        // SAFETY: prctl with integer arguments only.
        if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
            return Err(format!("no_new_privs: {}", io::Error::last_os_error()));
        }
        build(policy).install().map_err(|e| format!("install: {e}"))
    }

    #[test]
    fn keyctl_is_denied() {
        assert_ok(|| {
            confine(STRICT)?;
            // SAFETY: KEYCTL_GET_KEYRING_ID with integer arguments.
            let rc = unsafe { libc::syscall(libc::SYS_keyctl, 0, -3, 0) };
            expect("keyctl", errno_of(rc), Err(libc::EPERM))
        });
    }

    fn open_pty() -> Result<libc::c_int, String> {
        // SAFETY: opening a path with a NUL-terminated literal.
        let fd = unsafe { libc::open(c"/dev/ptmx".as_ptr(), libc::O_RDWR | libc::O_NOCTTY) };
        if fd < 0 {
            Err(format!("open /dev/ptmx: {}", io::Error::last_os_error()))
        } else {
            Ok(fd)
        }
    }

    #[test]
    fn terminal_injection_is_denied_even_with_high_bits() {
        // Control: unfiltered, the kernel truncates the request and injects, so high bits are a bypass.
        let control = run(|| {
            let pty = open_pty()?;
            let request = 0xdead_beef_0000_0000 | libc::TIOCSTI;
            // SAFETY: TIOCSTI reads one byte from a valid pointer.
            let rc = unsafe { libc::ioctl(pty, request as _, &b'x') };
            expect(
                "unfiltered ioctl(TIOCSTI | high bits)",
                errno_of(rc.into()),
                Ok(0),
            )
        });
        if control != End::Exited(0, String::new()) {
            println!("control skipped (needs legacy TIOCSTI and CAP_SYS_ADMIN): {control:?}");
        }
        assert_ok(|| {
            let pty = open_pty()?;
            confine(STRICT)?;
            let byte = b'x';
            let sti = libc::TIOCSTI;
            for request in [sti, 0xdead_beef_0000_0000 | sti] {
                // SAFETY: TIOCSTI reads one byte from a valid pointer.
                let rc = unsafe { libc::ioctl(pty, request as _, &byte) };
                expect(
                    &format!("ioctl({request:#x})"),
                    errno_of(rc.into()),
                    Err(libc::EPERM),
                )?;
            }
            let mut subcode = 0u8;
            // SAFETY: TIOCLINUX reads one byte from a valid pointer.
            let rc = unsafe { libc::ioctl(pty, libc::TIOCLINUX as _, &mut subcode) };
            expect("ioctl(TIOCLINUX)", errno_of(rc.into()), Err(libc::EPERM))?;
            // SAFETY: TIOCGWINSZ writes a winsize into a valid pointer.
            let mut size: libc::winsize = unsafe { std::mem::zeroed() };
            let rc = unsafe { libc::ioctl(pty, libc::TIOCGWINSZ as _, &mut size) };
            expect("ioctl(TIOCGWINSZ)", errno_of(rc.into()), Ok(0))
        });
    }

    #[test]
    fn new_namespaces_are_denied_unless_nested() {
        assert_ok(|| {
            confine(STRICT)?;
            // SAFETY: unshare with flag arguments only.
            expect(
                "unshare(0)",
                errno_of(unsafe { libc::unshare(0) }.into()),
                Ok(0),
            )?;
            let rc = unsafe { libc::unshare(libc::CLONE_NEWUSER) };
            expect(
                "unshare(CLONE_NEWUSER)",
                errno_of(rc.into()),
                Err(libc::EPERM),
            )?;
            let rc = unsafe { libc::unshare(libc::CLONE_NEWNS) };
            expect(
                "unshare(CLONE_NEWNS)",
                errno_of(rc.into()),
                Err(libc::EPERM),
            )
        });
        assert_ok(|| {
            confine(NESTED)?;
            // SAFETY: unshare with flag arguments only; the forked child is single-threaded.
            let rc = unsafe { libc::unshare(libc::CLONE_NEWUSER) };
            expect("nested unshare(CLONE_NEWUSER)", errno_of(rc.into()), Ok(0))
        });
    }

    #[test]
    fn mount_is_denied() {
        assert_ok(|| {
            confine(STRICT)?;
            // SAFETY: NUL-terminated literals; the target does not exist, so nothing could be mounted.
            let rc = unsafe {
                libc::mount(
                    c"none".as_ptr(),
                    c"/nonexistent-airlock-test".as_ptr(),
                    c"tmpfs".as_ptr(),
                    0,
                    std::ptr::null(),
                )
            };
            expect("mount", errno_of(rc.into()), Err(libc::EPERM))
        });
    }

    #[test]
    fn clone3_reports_enosys() {
        assert_ok(|| {
            confine(STRICT)?;
            // SAFETY: the filter answers before the kernel would read the (null) argument.
            let rc = unsafe { libc::syscall(libc::SYS_clone3, std::ptr::null::<u8>(), 0usize) };
            expect("clone3", errno_of(rc), Err(libc::ENOSYS))
        });
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn x32_numbers_are_denied() {
        assert_ok(|| {
            confine(STRICT)?;
            let x32_getpid = libc::c_long::from(X32_SYSCALL_BIT) | libc::SYS_getpid;
            // SAFETY: getpid takes no arguments.
            let rc = unsafe { libc::syscall(x32_getpid) };
            expect("x32 getpid", errno_of(rc), Err(libc::EPERM))
        });
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn other_abis_kill_the_process() {
        fn int80_getpid() -> i32 {
            let ret: i32;
            // SAFETY: i386 getpid (20) through the compat entry point touches no memory.
            unsafe { std::arch::asm!("int 0x80", inlateout("eax") 20 => ret, options(nostack)) };
            ret
        }
        let control = run(|| {
            let ret = int80_getpid();
            let pid = std::process::id() as i32;
            if ret == pid {
                Ok(())
            } else {
                Err(format!("i386 getpid returned {ret}"))
            }
        });
        if control != End::Exited(0, String::new()) {
            println!("skipped: this kernel has no working i386 entry point ({control:?})");
            return;
        }
        let end = run(|| {
            confine(STRICT)?;
            Err(format!("i386 getpid returned {}", int80_getpid()))
        });
        assert_eq!(end, End::Signaled(nix::sys::signal::Signal::SIGSYS));
    }

    #[test]
    fn fork_and_spawn_still_work() {
        assert_ok(|| {
            confine(STRICT)?;
            // SAFETY: the grandchild only calls _exit.
            let pid = unsafe { libc::fork() };
            if pid < 0 {
                return Err(format!("fork: {}", io::Error::last_os_error()));
            }
            if pid == 0 {
                unsafe { libc::_exit(7) };
            }
            let mut status = 0;
            // SAFETY: waiting for our own child with a valid status pointer.
            unsafe { libc::waitpid(pid, &mut status, 0) };
            if !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 7 {
                return Err(format!("forked grandchild ended with status {status:#x}"));
            }
            // posix_spawn tries clone3 first: this proves the ENOSYS fallback.
            let spawned = std::process::Command::new("/bin/true").status();
            match spawned {
                Ok(s) if s.success() => Ok(()),
                other => Err(format!("spawn /bin/true: {other:?}")),
            }
        });
    }
}
