//! Tests of the rules that keep rarely needed kernel code out of reach: socket families (evaluated
//! on sample `seccomp_data`, then tried for real), io_uring and line disciplines.

use super::super::super::forked::{assert_ok, errno_of, expect};
use super::*;

/// What `call(family, SOCK_STREAM, protocol)` gets from the filter.
fn socket_call(p: &SeccompProgram, call: libc::c_long, family: u64, protocol: u64) -> u32 {
    let args = [family, libc::SOCK_STREAM as u64, protocol, 0, 0, 0];
    eval(p, AUDIT_ARCH, nr(call), args)
}

#[test]
fn socket_families_outside_the_allowlist_are_denied() {
    let strict = build(STRICT);
    let nested = build(NESTED);
    let allowed = [libc::AF_UNIX, libc::AF_INET, libc::AF_INET6];
    for p in [&strict, &nested] {
        for call in [libc::SYS_socket, libc::SYS_socketpair] {
            // Every family number the kernel knows (AF_MAX is 46 on 6.x) and some it does not.
            for family in 0..64u64 {
                let got = socket_call(p, call, family, 0);
                let want =
                    if allowed.contains(&(family as i32)) || family == libc::AF_NETLINK as u64 {
                        RET_ALLOW
                    } else {
                        RET_EPERM
                    };
                assert_eq!(got, want, "call {call}, family {family}");
            }
            // The kernel reads an int: high bits neither hide a denied family nor spoil an allowed one.
            let high = 0xdead_beef_0000_0000;
            assert_eq!(
                socket_call(p, call, high | libc::AF_VSOCK as u64, 0),
                RET_EPERM
            );
            assert_eq!(
                socket_call(p, call, high | libc::AF_INET as u64, 0),
                RET_ALLOW
            );
        }
    }
    let netlink = |protocol: i32| {
        socket_call(
            &strict,
            libc::SYS_socket,
            libc::AF_NETLINK as u64,
            protocol as u64,
        )
    };
    for protocol in [
        libc::NETLINK_ROUTE,
        libc::NETLINK_SOCK_DIAG,
        libc::NETLINK_KOBJECT_UEVENT,
    ] {
        assert_eq!(netlink(protocol), RET_ALLOW, "netlink protocol {protocol}");
    }
    for protocol in [
        libc::NETLINK_GENERIC,
        libc::NETLINK_AUDIT,
        libc::NETLINK_NETFILTER,
        libc::NETLINK_XFRM,
        libc::NETLINK_CRYPTO,
        libc::NETLINK_SELINUX,
        libc::NETLINK_CONNECTOR,
    ] {
        assert_eq!(netlink(protocol), RET_EPERM, "netlink protocol {protocol}");
    }
    assert_eq!(netlink(1 << 20 | libc::NETLINK_GENERIC), RET_EPERM);
    // The filter looks at the family of socket calls only.
    let connect = [libc::AF_VSOCK as u64, 0, 0, 0, 0, 0];
    assert_eq!(
        eval(&strict, AUDIT_ARCH, nr(libc::SYS_connect), connect),
        RET_ALLOW
    );
}

#[test]
fn line_discipline_changes_are_denied() {
    // Control: unfiltered, setting the line discipline a fresh pty already has (N_TTY) is a no-op
    // that succeeds, so nothing is switched on the host either way.
    assert_ok(|| {
        let pty = open_pty()?;
        let n_tty: libc::c_int = 0;
        // SAFETY: TIOCSETD reads an int from a valid pointer.
        let rc = unsafe { libc::ioctl(pty, libc::TIOCSETD as _, &n_tty) };
        expect(
            "unfiltered ioctl(TIOCSETD, N_TTY)",
            errno_of(rc.into()),
            Ok(0),
        )
    });
    assert_ok(|| {
        let pty = open_pty()?;
        confine(STRICT)?;
        let n_tty: libc::c_int = 0;
        for request in [libc::TIOCSETD, 0xdead_beef_0000_0000 | libc::TIOCSETD] {
            // SAFETY: as above.
            let rc = unsafe { libc::ioctl(pty, request as _, &n_tty) };
            expect(
                &format!("ioctl({request:#x})"),
                errno_of(rc.into()),
                Err(libc::EPERM),
            )?;
        }
        let mut ldisc: libc::c_int = -1;
        // SAFETY: TIOCGETD writes an int into a valid pointer.
        let rc = unsafe { libc::ioctl(pty, libc::TIOCGETD as _, &mut ldisc) };
        expect("ioctl(TIOCGETD)", errno_of(rc.into()), Ok(0))?;
        expect("the line discipline", Ok(ldisc.into()), Ok(0))
    });
}

/// `io_uring_setup(1, params)`: the fd on success (closed at once), or the errno.
fn io_uring_setup() -> Result<libc::c_long, i32> {
    // struct io_uring_params is 120 bytes; all zero asks for the defaults.
    let mut params = [0u8; 120];
    // SAFETY: the kernel reads and writes `params`, which is large enough.
    let rc = unsafe { libc::syscall(libc::SYS_io_uring_setup, 1u32, params.as_mut_ptr()) };
    let result = errno_of(rc);
    if let Ok(fd) = result {
        // SAFETY: closing the ring we just created.
        unsafe { libc::close(fd as libc::c_int) };
    }
    result
}

#[test]
fn io_uring_is_denied() {
    let control = io_uring_setup();
    println!("unfiltered io_uring_setup: {control:?}");
    assert_ok(|| {
        confine(STRICT)?;
        expect("io_uring_setup", io_uring_setup(), Err(libc::EPERM))?;
        // SAFETY: invalid fds: the kernel would answer EBADF, the filter answers first.
        let rc = unsafe { libc::syscall(libc::SYS_io_uring_enter, -1, 0, 0, 0, 0, 0) };
        expect("io_uring_enter", errno_of(rc), Err(libc::EPERM))?;
        let rc = unsafe { libc::syscall(libc::SYS_io_uring_register, -1, 0, 0, 0) };
        expect("io_uring_register", errno_of(rc), Err(libc::EPERM))
    });
}

/// `socket(family, kind | SOCK_CLOEXEC, protocol)`, closed at once on success.
fn try_socket(family: i32, kind: i32, protocol: i32) -> Result<libc::c_long, i32> {
    // SAFETY: socket with integer arguments.
    let fd = unsafe { libc::socket(family, kind | libc::SOCK_CLOEXEC, protocol) };
    if fd >= 0 {
        // SAFETY: closing the socket we just created.
        unsafe { libc::close(fd) };
        return Ok(0);
    }
    errno_of(fd.into())
}

#[test]
fn only_allowed_socket_families_can_be_created() {
    assert_ok(|| {
        confine(STRICT)?;
        for (family, kind, protocol, what) in [
            (libc::AF_UNIX, libc::SOCK_STREAM, 0, "AF_UNIX"),
            (libc::AF_INET, libc::SOCK_STREAM, 0, "AF_INET"),
            (libc::AF_INET6, libc::SOCK_DGRAM, 0, "AF_INET6"),
            (
                libc::AF_NETLINK,
                libc::SOCK_RAW,
                libc::NETLINK_ROUTE,
                "NETLINK_ROUTE",
            ),
        ] {
            expect(what, try_socket(family, kind, protocol), Ok(0))?;
        }
        for (family, kind, protocol, what) in [
            (libc::AF_VSOCK, libc::SOCK_STREAM, 0, "AF_VSOCK"),
            (libc::AF_PACKET, libc::SOCK_DGRAM, 0, "AF_PACKET"),
            (libc::AF_ALG, libc::SOCK_SEQPACKET, 0, "AF_ALG"),
            (
                libc::AF_NETLINK,
                libc::SOCK_RAW,
                libc::NETLINK_GENERIC,
                "NETLINK_GENERIC",
            ),
        ] {
            expect(what, try_socket(family, kind, protocol), Err(libc::EPERM))?;
        }
        let mut pair = [0; 2];
        // SAFETY: socketpair writes two fds into `pair`.
        let rc =
            unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_STREAM, 0, pair.as_mut_ptr()) };
        expect("socketpair(AF_UNIX)", errno_of(rc.into()), Ok(0))?;
        let rc =
            unsafe { libc::socketpair(libc::AF_VSOCK, libc::SOCK_STREAM, 0, pair.as_mut_ptr()) };
        expect(
            "socketpair(AF_VSOCK)",
            errno_of(rc.into()),
            Err(libc::EPERM),
        )
    });
}
