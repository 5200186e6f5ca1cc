//! Tests of the seccomp filter: [`build`]'s decisions checked by evaluating the BPF on sample
//! `seccomp_data`, and the installed filter tried for real in forked children (denied calls fail
//! with the documented errno, other ABIs are killed, fork and spawn still work).

use super::super::forked::{End, assert_ok, errno_of, expect, run};
use super::*;

mod surface;

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
fn the_notifying_filter_differs_only_in_namespace_calls() {
    let plain = build(STRICT);
    let notifying = build_notifying(STRICT).expect("strict policy reports");
    assert!(
        build_notifying(NESTED).is_none(),
        "nothing to report when namespaces are allowed"
    );
    let none = [0; 6];
    let ns = [libc::CLONE_NEWUSER as u64, 0, 0, 0, 0, 0];
    for (call, args, want) in [
        (libc::SYS_unshare, ns, RET_USER_NOTIF),
        (libc::SYS_clone, ns, RET_USER_NOTIF),
        (libc::SYS_clone, none, RET_ALLOW),
        (libc::SYS_mount, none, RET_EPERM),
        (libc::SYS_getpid, none, RET_ALLOW),
    ] {
        assert_eq!(eval(&notifying, AUDIT_ARCH, nr(call), args), want, "{call}");
        let plain_want = if want == RET_USER_NOTIF {
            RET_EPERM
        } else {
            want
        };
        assert_eq!(
            eval(&plain, AUDIT_ARCH, nr(call), args),
            plain_want,
            "{call}"
        );
    }
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
    assert_eq!(ioctl(&strict, libc::TIOCSETD), RET_EPERM);
    assert_eq!(
        ioctl(&strict, 0xdead_beef_0000_0000 | libc::TIOCSETD),
        RET_EPERM
    );
    assert_eq!(ioctl(&strict, libc::TIOCGETD), RET_ALLOW);
    assert_eq!(ioctl(&strict, libc::TIOCGWINSZ), RET_ALLOW);
    assert_eq!(ioctl(&nested, sti), RET_EPERM);
    assert_eq!(ioctl(&nested, libc::TIOCSETD), RET_EPERM);
    for call in [
        libc::SYS_io_uring_setup,
        libc::SYS_io_uring_enter,
        libc::SYS_io_uring_register,
    ] {
        assert_eq!(eval(&strict, AUDIT_ARCH, nr(call), none), RET_EPERM);
        assert_eq!(eval(&nested, AUDIT_ARCH, nr(call), none), RET_EPERM);
    }
    let unshare = |p: &SeccompProgram, flags: u64| {
        eval(p, AUDIT_ARCH, nr(libc::SYS_unshare), [flags, 0, 0, 0, 0, 0])
    };
    assert_eq!(unshare(&strict, libc::CLONE_NEWUSER as u64), RET_EPERM);
    assert_eq!(unshare(&strict, libc::CLONE_NEWTIME as u64), RET_EPERM);
    assert_eq!(unshare(&strict, libc::CLONE_FILES as u64), RET_ALLOW);
    assert_eq!(unshare(&nested, libc::CLONE_NEWUSER as u64), RET_ALLOW);
    let fork_flags = (libc::CLONE_CHILD_SETTID | libc::CLONE_CHILD_CLEARTID | libc::SIGCHLD) as u64;
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
    let has = |names: &[String], name: &str| names.iter().any(|n| n == name);
    assert!(has(&strict, "mount") && has(&strict, "keyctl"));
    assert!(!has(&nested, "mount") && has(&nested, "keyctl"));
    for names in [&strict, &nested] {
        assert!(has(names, "io_uring_setup") && has(names, "ioctl(TIOCSETD)"));
        assert!(
            names
                .iter()
                .any(|n| n.starts_with("socket(any family but AF_UNIX, AF_INET, AF_INET6,")),
            "{names:?}"
        );
    }
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
