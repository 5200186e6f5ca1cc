//! Socket families: which ones `socket()` and `socketpair()` may create.

use super::{Attempt, Denial, errno_exit, in_child};

/// A family (or a netlink protocol), with the socket type and protocol of a real attempt.
struct Family {
    name: &'static str,
    domain: libc::c_int,
    kind: libc::c_int,
    protocol: libc::c_int,
}

const fn family(name: &'static str, domain: libc::c_int, kind: libc::c_int) -> Family {
    Family {
        name,
        domain,
        kind,
        protocol: 0,
    }
}

const fn netlink(name: &'static str, protocol: libc::c_int) -> Family {
    Family {
        name,
        domain: libc::AF_NETLINK,
        kind: libc::SOCK_RAW,
        protocol,
    }
}

/// Every family the probe knows, by the kernel's numbers (some are missing from libc).
const FAMILIES: &[Family] = &[
    family("AF_UNIX", 1, libc::SOCK_STREAM),
    family("AF_INET", 2, libc::SOCK_STREAM),
    family("AF_AX25", 3, libc::SOCK_SEQPACKET),
    family("AF_IPX", 4, libc::SOCK_DGRAM),
    family("AF_APPLETALK", 5, libc::SOCK_DGRAM),
    family("AF_NETROM", 6, libc::SOCK_SEQPACKET),
    family("AF_ATMPVC", 8, libc::SOCK_DGRAM),
    family("AF_X25", 9, libc::SOCK_SEQPACKET),
    family("AF_INET6", 10, libc::SOCK_STREAM),
    family("AF_ROSE", 11, libc::SOCK_SEQPACKET),
    family("AF_DECnet", 12, libc::SOCK_SEQPACKET),
    Family {
        name: "AF_KEY",
        domain: 15,
        kind: libc::SOCK_RAW,
        protocol: 2, // PF_KEY_V2
    },
    netlink("NETLINK_ROUTE", libc::NETLINK_ROUTE),
    netlink("NETLINK_SOCK_DIAG", libc::NETLINK_SOCK_DIAG),
    netlink("NETLINK_KOBJECT_UEVENT", libc::NETLINK_KOBJECT_UEVENT),
    netlink("NETLINK_GENERIC", libc::NETLINK_GENERIC),
    netlink("NETLINK_AUDIT", libc::NETLINK_AUDIT),
    netlink("NETLINK_NETFILTER", libc::NETLINK_NETFILTER),
    netlink("NETLINK_XFRM", libc::NETLINK_XFRM),
    netlink("NETLINK_CRYPTO", libc::NETLINK_CRYPTO),
    family("AF_PACKET", 17, libc::SOCK_DGRAM),
    family("AF_ATMSVC", 20, libc::SOCK_DGRAM),
    family("AF_RDS", 21, libc::SOCK_SEQPACKET),
    family("AF_IRDA", 23, libc::SOCK_STREAM),
    family("AF_PPPOX", 24, libc::SOCK_DGRAM),
    family("AF_WANPIPE", 25, libc::SOCK_RAW),
    family("AF_LLC", 26, libc::SOCK_DGRAM),
    family("AF_CAN", 29, libc::SOCK_RAW),
    family("AF_TIPC", 30, libc::SOCK_RDM),
    family("AF_BLUETOOTH", 31, libc::SOCK_RAW),
    family("AF_ISDN", 34, libc::SOCK_RAW),
    family("AF_PHONET", 35, libc::SOCK_DGRAM),
    family("AF_IEEE802154", 36, libc::SOCK_DGRAM),
    family("AF_CAIF", 37, libc::SOCK_SEQPACKET),
    family("AF_ALG", 38, libc::SOCK_SEQPACKET),
    family("AF_NFC", 39, libc::SOCK_SEQPACKET),
    family("AF_VSOCK", 40, libc::SOCK_STREAM),
    family("AF_KCM", 41, libc::SOCK_DGRAM),
    family("AF_QIPCRTR", 42, libc::SOCK_DGRAM),
    family("AF_SMC", 43, libc::SOCK_STREAM),
    family("AF_XDP", 44, libc::SOCK_RAW),
    family("AF_MCTP", 45, libc::SOCK_DGRAM),
];

/// The names of every family the probe knows, for the cases.
pub(crate) fn known_families() -> Vec<&'static str> {
    FAMILIES.iter().map(|f| f.name).collect()
}

/// A type with a flag bit the kernel does not know: `socket()` answers EINVAL before it looks at the
/// family at all (so nothing is created and no module is loaded), while a filter that refuses the
/// family answers first with its own errno.
const UNKNOWN_TYPE_FLAG: libc::c_int = 1 << 20;

/// How each attempt of [`socket_errnos`] is made.
#[derive(Clone, Copy)]
pub(super) enum How {
    /// `socket(domain, kind, protocol)`: a real socket, closed at once.
    Real,
    /// `socketpair(domain, kind, protocol)`.
    Pair,
    /// `socket(domain, kind | UNKNOWN_TYPE_FLAG, protocol)`: never creates anything.
    UnknownType,
}

impl How {
    pub(super) fn parse(word: &str) -> Option<How> {
        match word {
            "real" => Some(How::Real),
            "pair" => Some(How::Pair),
            "unknown-type" => Some(How::UnknownType),
            _ => None,
        }
    }
}

/// Tries each named family and reports `NAME=ok` or `NAME=<ERRNO>` for all of them, so one run
/// covers a whole list. Each call runs in a forked child: a filter that kills shows as `KILLED`.
pub(super) fn socket_errnos(how: How, names: &[&str]) -> Attempt {
    let mut shown = Vec::new();
    for name in names {
        let Some(f) = FAMILIES.iter().find(|f| f.name == *name) else {
            return Err(Denial {
                name: "EINVAL".into(),
                what: format!("unknown family {name}"),
            });
        };
        let verdict = match in_child(name, || attempt(how, f)) {
            Ok(_) => "ok".to_owned(),
            Err(d) => d.name,
        };
        shown.push(format!("{name}={verdict}"));
    }
    Ok(shown.join(" "))
}

fn attempt(how: How, f: &Family) -> i32 {
    // SAFETY: socket and socketpair with integer arguments and a valid two-int array.
    let rc = unsafe {
        match how {
            How::Real => libc::socket(f.domain, f.kind | libc::SOCK_CLOEXEC, f.protocol),
            How::UnknownType => libc::socket(f.domain, f.kind | UNKNOWN_TYPE_FLAG, f.protocol),
            How::Pair => {
                let mut pair = [0; 2];
                libc::socketpair(f.domain, f.kind, f.protocol, pair.as_mut_ptr())
            }
        }
    };
    if rc < 0 { errno_exit() } else { 0 }
}
