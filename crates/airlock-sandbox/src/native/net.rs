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

/// Largest GSO/GRO packet asked for on the sandbox's `lo` (BIG TCP: the kernel's limit for
/// loopback, 512 KiB minus 8).
const LOOPBACK_GSO_BYTES: u32 = 524_280;

/// Lets TCP on the sandbox's `lo` build packets up to [`LOOPBACK_GSO_BYTES`] instead of 64 KiB
/// (BIG TCP, IPv4 from Linux 6.3, IPv6 from 5.19). Every byte between a sandboxed client and the
/// egress proxy crosses this `lo`, and on loopback the cost is per packet, not per byte: eight
/// times fewer packets is what lets a download through the proxy keep up with a direct one.
/// A kernel that refuses the sizes keeps its defaults; nothing depends on this.
pub fn loopback_big_packets() -> io::Result<()> {
    const IFLA_GSO_MAX_SIZE: u16 = 41;
    const IFLA_GRO_MAX_SIZE: u16 = 58;
    const IFLA_GSO_IPV4_MAX_SIZE: u16 = 63;
    const IFLA_GRO_IPV4_MAX_SIZE: u16 = 64;
    let attrs = [
        IFLA_GSO_MAX_SIZE,
        IFLA_GRO_MAX_SIZE,
        IFLA_GSO_IPV4_MAX_SIZE,
        IFLA_GRO_IPV4_MAX_SIZE,
    ];
    rtnl_set_link_u32(loopback_index()?, &attrs, LOOPBACK_GSO_BYTES)
}

/// The interface index of `lo` (1 in a new namespace, asked rather than assumed).
fn loopback_index() -> io::Result<i32> {
    // SAFETY: a NUL-terminated literal.
    let index = unsafe { libc::if_nametoindex(c"lo".as_ptr()) };
    if index == 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(index as i32)
}

/// Sends one `RTM_NEWLINK` for interface `index` setting each attribute in `attrs` to `value`,
/// and waits for the kernel's acknowledgement.
fn rtnl_set_link_u32(index: i32, attrs: &[u16], value: u32) -> io::Result<()> {
    const NLMSG_HDR: usize = 16;
    const IFINFO: usize = 16;
    const RTATTR_U32: usize = 8;
    let len = NLMSG_HDR + IFINFO + RTATTR_U32 * attrs.len();
    let mut msg = Vec::with_capacity(len);
    // struct nlmsghdr
    msg.extend_from_slice(&(len as u32).to_ne_bytes());
    msg.extend_from_slice(&libc::RTM_NEWLINK.to_ne_bytes());
    msg.extend_from_slice(&((libc::NLM_F_REQUEST | libc::NLM_F_ACK) as u16).to_ne_bytes());
    msg.extend_from_slice(&1u32.to_ne_bytes()); // sequence number
    msg.extend_from_slice(&0u32.to_ne_bytes()); // port id: the kernel
    // struct ifinfomsg
    msg.extend_from_slice(&[libc::AF_UNSPEC as u8, 0]);
    msg.extend_from_slice(&0u16.to_ne_bytes()); // device type
    msg.extend_from_slice(&index.to_ne_bytes());
    msg.extend_from_slice(&0u32.to_ne_bytes()); // flags
    msg.extend_from_slice(&0u32.to_ne_bytes()); // change mask
    for attr in attrs {
        msg.extend_from_slice(&(RTATTR_U32 as u16).to_ne_bytes());
        msg.extend_from_slice(&attr.to_ne_bytes());
        msg.extend_from_slice(&value.to_ne_bytes());
    }
    debug_assert_eq!(msg.len(), len);

    // SAFETY: plain socket creation; the fd is owned right below.
    let raw = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            libc::NETLINK_ROUTE,
        )
    };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: freshly created.
    let sock = unsafe { OwnedFd::from_raw_fd(raw) };
    // SAFETY: the buffer is valid for its length; a netlink socket with no address sends to the
    // kernel.
    let sent = unsafe { libc::send(sock.as_raw_fd(), msg.as_ptr().cast(), msg.len(), 0) };
    if sent < 0 {
        return Err(io::Error::last_os_error());
    }
    // The answer: an NLMSG_ERROR whose error field is 0 (acknowledged) or a negative errno.
    let mut answer = [0u8; 256];
    // SAFETY: the buffer is valid for its length.
    let got = unsafe {
        libc::recv(
            sock.as_raw_fd(),
            answer.as_mut_ptr().cast(),
            answer.len(),
            0,
        )
    };
    if got < 0 {
        return Err(io::Error::last_os_error());
    }
    let got = got as usize;
    let kind = u16::from_ne_bytes([answer[4], answer[5]]);
    if got < NLMSG_HDR + 4 || kind != libc::NLMSG_ERROR as u16 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "unexpected netlink answer",
        ));
    }
    let error = i32::from_ne_bytes(
        answer[NLMSG_HDR..NLMSG_HDR + 4]
            .try_into()
            .expect("4 bytes"),
    );
    if error != 0 {
        return Err(io::Error::from_raw_os_error(-error));
    }
    Ok(())
}

/// A new network namespace owned by the user namespace of the process `pidfd` refers to, made
/// by the calling process (which joins that user namespace for good: a prestart's starter, about
/// to exit), its loopback brought up. Returns the namespace's descriptor, for that process to
/// join (which brings the loopback up again, reporting what fails; the second time costs little,
/// and tunes it for the proxy mode, which the starter does not know).
pub(super) fn make_in_user_ns_of(pidfd: &OwnedFd) -> io::Result<OwnedFd> {
    use nix::sched::{CloneFlags, setns, unshare};
    setns(pidfd, CloneFlags::CLONE_NEWUSER)?;
    unshare(CloneFlags::CLONE_NEWNET)?;
    let _ = loopback_up();
    std::fs::File::open("/proc/thread-self/ns/net").map(OwnedFd::from)
}

/// The calling process's network namespace, as its `nsfs` inode.
pub(super) fn current_ns() -> io::Result<u64> {
    use std::os::unix::fs::MetadataExt as _;
    std::fs::metadata("/proc/thread-self/ns/net").map(|m| m.ino())
}

/// The calling thread's namespace directory (`/proc/thread-self/ns`), opened while `/proc` is
/// there: each lookup in it names the thread's namespace of the moment, wherever its root is
/// by then (a root built ahead but for its overlays has no `/proc` until it is finished).
pub(super) struct NsDir(Option<OwnedFd>);

impl NsDir {
    pub(super) fn open() -> NsDir {
        let dir = std::fs::File::open("/proc/thread-self/ns").ok();
        NsDir(dir.map(OwnedFd::from))
    }

    /// The thread's network namespace now, as its `nsfs` inode ([`current_ns`] without a dir).
    pub(super) fn net(&self) -> io::Result<u64> {
        let Some(dir) = &self.0 else {
            return current_ns();
        };
        let stat =
            nix::sys::stat::fstatat(Some(dir.as_raw_fd()), "net", nix::fcntl::AtFlags::empty())?;
        Ok(stat.st_ino)
    }
}
