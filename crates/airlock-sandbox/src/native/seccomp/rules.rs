//! What the filter refuses, as data: the system call lists, the ioctl requests and the socket
//! families. `build` in the parent module turns these into BPF; `docs/security.md` lists them.

// open_tree_attr (Linux 6.15) is open_tree plus mount_setattr; libc does not name it yet. New system calls
// share one number on every architecture.
const SYS_OPEN_TREE_ATTR: libc::c_long = 467;

/// System calls that fail with EPERM whatever the policy: kernel keyrings, BPF, perf, userfaultfd, kernel
/// modules and kexec, file handles (open_by_handle_at walks around the mount namespace), and io_uring
/// (its rings run operations seccomp never sees, `IORING_OP_SOCKET` among them, so every other rule
/// here could be walked around through it; libuv and others fall back to plain system calls).
pub(crate) const ALWAYS_DENIED: &[(&str, libc::c_long)] = &[
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
    ("io_uring_setup", libc::SYS_io_uring_setup),
    ("io_uring_enter", libc::SYS_io_uring_enter),
    ("io_uring_register", libc::SYS_io_uring_register),
];

/// The mount family and setns: denied unless the policy allows nested namespaces.
pub(crate) const MOUNT_FAMILY: &[(&str, libc::c_long)] = &[
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

/// ioctl requests refused on every file: TIOCSTI and TIOCLINUX inject keystrokes into the terminal
/// shared with the developer's shell; TIOCSETD switches a tty's line discipline, which loads kernel
/// code (n_gsm, n_hdlc, slcan, ... with a long CVE history) that no dev tool needs.
pub(crate) const DENIED_IOCTLS: &[(&str, u32)] = &[
    ("TIOCSTI", libc::TIOCSTI as u32),
    ("TIOCLINUX", libc::TIOCLINUX as u32),
    ("TIOCSETD", libc::TIOCSETD as u32),
];

/// The only address families `socket` and `socketpair` may create; every other family fails with
/// EPERM. Most of the others are not namespaced or are rarely used kernel code: AF_VSOCK reaches the
/// hypervisor's services (Firecracker, cloud VMs, WSL2) even with `--network none`, AF_PACKET,
/// AF_ALG, AF_TIPC, AF_RDS, AF_XDP and the old radio and WAN families have a long CVE history.
pub(crate) const ALLOWED_FAMILIES: &[(&str, u32)] = &[
    ("AF_UNIX", libc::AF_UNIX as u32),
    ("AF_INET", libc::AF_INET as u32),
    ("AF_INET6", libc::AF_INET6 as u32),
];

/// AF_NETLINK is allowed for these protocols only: NETLINK_ROUTE (getaddrinfo's AI_ADDRCONFIG,
/// getifaddrs, `ip`), NETLINK_SOCK_DIAG (`ss`) and NETLINK_KOBJECT_UEVENT (libudev monitors, e.g. in
/// Chromium; nothing to receive in the sandbox's network namespace). Generic netlink, audit,
/// netfilter, xfrm, crypto and the rest fail with EPERM.
pub(crate) const ALLOWED_NETLINK: &[(&str, u32)] = &[
    ("NETLINK_ROUTE", libc::NETLINK_ROUTE as u32),
    ("NETLINK_SOCK_DIAG", libc::NETLINK_SOCK_DIAG as u32),
    (
        "NETLINK_KOBJECT_UEVENT",
        libc::NETLINK_KOBJECT_UEVENT as u32,
    ),
];

/// `AF_NETLINK`, allowed for the protocols of [`ALLOWED_NETLINK`].
pub(crate) const AF_NETLINK: u32 = libc::AF_NETLINK as u32;
