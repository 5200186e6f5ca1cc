//! The bwrap backend's stage: airlock's init in a sandbox bubblewrap built.
//!
//! bwrap makes the namespaces, writes the id maps and builds the root from the spec; then it runs
//! the airlock binary, bound read-only at [`STAGE_PATH`], as its command. From there the launch is
//! native's (`child.rs`) after the root is built: the stage tells the supervisor who it is (a
//! pidfd of itself, so signals reach it across bwrap's pid namespace), waits for the go byte, hands
//! over the egress listener and becomes init: the hidden files kept, the terminal, the workload
//! with its capabilities dropped, Landlock and seccomp applied, the exit status reported.
//!
//! Its plan comes from the supervisor on [`PLAN_FD`] (a sealed memfd, never a file a sandbox could
//! write): the tty the supervisor saw, its descriptor limit, and the spec as JSON.

use std::io::Read as _;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::OpenOptionsExt as _;

use nix::sys::signal::{SigSet, SigmaskHow, Signal, sigprocmask};

use crate::native::child::{self, ChildPlan};
use crate::native::creds::FdLimit;
use crate::native::net;
use crate::native::setup::Setup;
use crate::native::tty::TtyPlan;
use crate::spec::SandboxSpec;
use airlock_config::NetworkMode;

pub use crate::backend::bwrap::render::{PLAN_FD, SOCK_FD, STAGE_PATH};

mod overlays;

/// The name the airlock binary answers as the stage (the basename of [`STAGE_PATH`]).
pub const STAGE_NAME: &str = "airlock-stage";

/// The largest plan the stage reads.
const PLAN_CAP: u64 = 16 << 20;

/// The stage's plan in bytes: the tty (flag, the three slots, termios, winsize), the descriptor
/// limit (flag, soft, hard), then the spec as JSON.
pub(crate) fn encode(spec: &SandboxSpec, tty: Option<&TtyPlan>, limit: Option<FdLimit>) -> Vec<u8> {
    let mut out = Vec::new();
    match tty {
        Some(t) => {
            out.push(1);
            out.extend(t.slots.iter().map(|&s| u8::from(s)));
            out.extend_from_slice(as_bytes(&t.termios));
            out.extend_from_slice(as_bytes(&t.winsize));
        }
        None => out.push(0),
    }
    match limit {
        Some(l) => {
            out.push(1);
            out.extend_from_slice(&l.soft.to_le_bytes());
            out.extend_from_slice(&l.hard.to_le_bytes());
        }
        None => out.push(0),
    }
    out.extend(serde_json::to_vec(spec).expect("a spec serialises"));
    out
}

type Decoded = (SandboxSpec, Option<TtyPlan>, Option<FdLimit>);

pub(crate) fn decode(mut bytes: &[u8]) -> Result<Decoded, String> {
    let short = || "the stage's plan is cut short".to_owned();
    let mut take = |n: usize| -> Result<&[u8], String> {
        let (head, rest) = bytes.split_at_checked(n).ok_or_else(short)?;
        bytes = rest;
        Ok(head)
    };
    let tty = match take(1)?[0] {
        1 => {
            let s = take(3)?;
            let slots = [s[0] == 1, s[1] == 1, s[2] == 1];
            let termios = from_bytes::<libc::termios>(take(size_of::<libc::termios>())?);
            let winsize = from_bytes::<libc::winsize>(take(size_of::<libc::winsize>())?);
            Some(TtyPlan {
                slots,
                termios,
                winsize,
            })
        }
        _ => None,
    };
    let limit = match take(1)?[0] {
        1 => {
            let soft = u64::from_le_bytes(take(8)?.try_into().expect("8 bytes"));
            let hard = u64::from_le_bytes(take(8)?.try_into().expect("8 bytes"));
            Some(FdLimit { soft, hard })
        }
        _ => None,
    };
    let spec = serde_json::from_slice(bytes).map_err(|e| format!("the stage's spec: {e}"))?;
    Ok((spec, tty, limit))
}

fn as_bytes<T: Copy>(value: &T) -> &[u8] {
    // SAFETY: T is plain old data (termios, winsize); its bytes are read, never interpreted.
    unsafe { std::slice::from_raw_parts((value as *const T).cast::<u8>(), size_of::<T>()) }
}

fn from_bytes<T: Copy>(bytes: &[u8]) -> T {
    assert_eq!(bytes.len(), size_of::<T>());
    // SAFETY: the length matches and T (termios, winsize) is valid for any bit pattern.
    unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast::<T>()) }
}

/// Reads and checks a plan [`encode`] wrote (the stage's, a prestarted init's): the spec and the
/// [`ChildPlan`] made of it, with the tty and the descriptor limit. Any error ends init with an
/// `E` on `sock`.
pub(crate) fn read_plan(plan_fd: OwnedFd, sock: RawFd) -> (SandboxSpec, ChildPlan) {
    let mut bytes = Vec::new();
    if let Err(e) = std::fs::File::from(plan_fd)
        .take(PLAN_CAP)
        .read_to_end(&mut bytes)
    {
        child::die(sock, &format!("cannot read the sandbox's plan: {e}"));
    }
    let (spec, tty, limit) = match decode(&bytes) {
        Ok(decoded) => decoded,
        Err(e) => child::die(sock, &e),
    };
    let mut plan = match ChildPlan::new(&spec) {
        Ok(plan) => plan,
        Err(e) => child::die(sock, &e),
    };
    plan.tty = tty;
    plan.fd_limit = limit;
    (spec, plan)
}

/// The stage's entry point (the airlock binary called as [`STAGE_NAME`]).
pub fn main() -> ! {
    // The supervisor blocked these before the clone in native; here bwrap's mask is whatever it
    // was, so block them before anything can arrive.
    let mut mask = SigSet::empty();
    for s in crate::native::launch::FORWARDED {
        mask.add(s);
    }
    mask.add(Signal::SIGCHLD);
    let _ = sigprocmask(SigmaskHow::SIG_BLOCK, Some(&mask), None);
    let sock: RawFd = SOCK_FD;
    // SAFETY: bwrap was given the plan at PLAN_FD; nothing else in this process owns it.
    let plan_fd = unsafe { OwnedFd::from_raw_fd(PLAN_FD) };
    let (spec, mut plan) = read_plan(plan_fd, sock);
    // bwrap made this process uid 0 of the namespace that owns the mounts (see render's --uid).
    plan.own_user_ns = Some((spec.uid, spec.gid));
    // SAFETY: pidfd_open of this process; the kernel returns a new descriptor or an error.
    let me = unsafe { libc::syscall(libc::SYS_pidfd_open, libc::getpid(), 0) };
    if me < 0 {
        let e = std::io::Error::last_os_error();
        child::die(sock, &format!("cannot open a pidfd of the stage: {e}"));
    }
    // SAFETY: pidfd_open returned a fresh descriptor we own.
    let me = unsafe { OwnedFd::from_raw_fd(me as RawFd) };
    child::send_fd(sock, b'P', me.as_raw_fd(), "the stage's pidfd");
    drop(me);
    // SAFETY: setsid has no preconditions; bwrap's child is not a group leader.
    unsafe { libc::setsid() };
    child::wait_for(sock, child::GO);
    if let Err(e) = overlays::mount_all(&spec) {
        child::die(sock, &e);
    }
    if let Err(e) = devices_read_only(&spec) {
        child::die(sock, &e);
    }
    if plan.network == NetworkMode::Proxy {
        // bwrap brought lo up in the sandbox's network namespace.
        let _ = net::loopback_big_packets();
        match net::egress_listener(net::EGRESS_PORT) {
            Ok(listener) => child::send_fd(sock, b'L', listener.as_raw_fd(), "the egress listener"),
            Err(e) => child::die(
                sock,
                &format!(
                    "cannot open the egress listener on 127.0.0.1:{}: {e}",
                    net::EGRESS_PORT
                ),
            ),
        }
    }
    let setup = Setup::local(&plan).unwrap_or_else(|e| child::die(sock, &e));
    child::init(&plan, sock, setup)
}

/// The host device nodes bwrap bound into each `/dev` of the spec, made read-only binds as
/// native's are: they are the host's own inodes, and a sandbox running as root could chmod
/// `/dev/null` for the whole host through a writable one. Reads and writes of a device still work.
fn devices_read_only(spec: &SandboxSpec) -> Result<(), String> {
    use crate::spec::MountOp;
    for op in &spec.mounts {
        let MountOp::Dev { target } = op else {
            continue;
        };
        for node in crate::native::rootfs::dev::DEVICE_NODES {
            let path = target.join(node);
            let fd = std::fs::File::options()
                .read(true)
                .custom_flags(libc::O_PATH | libc::O_NOFOLLOW)
                .open(&path)
                .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
            crate::native::sys::set_attr(
                std::os::fd::AsFd::as_fd(&fd),
                crate::native::sys::MOUNT_ATTR_RDONLY,
                0,
                false,
            )
            .map_err(|e| format!("cannot make {} read-only: {e}", path.display()))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plan_round_trips_with_and_without_a_tty() {
        let spec: SandboxSpec =
            serde_json::from_str(include_str!("../../backend/bwrap/testdata/spec.json")).unwrap();
        // SAFETY: zeroed termios and winsize are valid values.
        let mut termios: libc::termios = unsafe { std::mem::zeroed() };
        termios.c_lflag = 0o1234;
        let winsize = libc::winsize {
            ws_row: 40,
            ws_col: 120,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        let tty = TtyPlan {
            slots: [true, false, true],
            termios,
            winsize,
        };
        let limit = FdLimit {
            soft: 1024,
            hard: 4096,
        };
        let (back, t, l) = decode(&encode(&spec, Some(&tty), Some(limit))).unwrap();
        assert_eq!(back, spec);
        let t = t.unwrap();
        assert_eq!(t.slots, [true, false, true]);
        assert_eq!(t.termios.c_lflag, 0o1234);
        assert_eq!((t.winsize.ws_row, t.winsize.ws_col), (40, 120));
        assert_eq!(l, Some(limit));
        let (_, t, l) = decode(&encode(&spec, None, None)).unwrap();
        assert!(t.is_none() && l.is_none());
    }

    #[test]
    fn a_cut_plan_is_an_error_not_a_panic() {
        let spec: SandboxSpec =
            serde_json::from_str(include_str!("../../backend/bwrap/testdata/spec.json")).unwrap();
        let bytes = encode(&spec, None, None);
        for n in [0, 1, 5, bytes.len() - 1] {
            assert!(decode(&bytes[..n]).is_err(), "{n} bytes");
        }
    }
}
