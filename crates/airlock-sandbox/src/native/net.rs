//! The loopback interface of a new network namespace, brought up without an `ip` binary.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// Sets `IFF_UP` on `lo` with the classic SIOCGIFFLAGS/SIOCSIFFLAGS ioctls.
pub fn loopback_up() -> io::Result<()> {
    // SAFETY: plain socket creation; the fd is owned right below.
    let raw = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: freshly created.
    let sock = unsafe { OwnedFd::from_raw_fd(raw) };
    // SAFETY: ifreq is plain old data; zeroed is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(b"lo\0") {
        *dst = *src as libc::c_char;
    }
    // SAFETY: the request and struct match the ioctl's contract.
    if unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFFLAGS, &mut req) } < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: SIOCGIFFLAGS filled the flags member of the union.
    unsafe {
        req.ifr_ifru.ifru_flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
    }
    // SAFETY: as above.
    if unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCSIFFLAGS, &req) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The port the egress proxy listens on inside the sandbox's own network namespace (nothing else
/// can be bound there, so a fixed, conventional port is free).
pub const EGRESS_PORT: u16 = 3128;

/// Opens the egress listener on 127.0.0.1 inside the sandbox's network namespace.
pub fn egress_listener(port: u16) -> io::Result<std::net::TcpListener> {
    std::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, port))
}
