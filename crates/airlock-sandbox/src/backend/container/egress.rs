//! The egress proxy's listener for a container: made by the supervisor inside the container's
//! own network namespace, as native's init makes it inside the sandbox's, and served on the
//! host by the gates. Nothing relays inside the container, and no other namespace can reach it.
//!
//! A forked child joins the container's user namespace (when it is not ours: rootless podman)
//! and network namespace, binds `127.0.0.1:3128`, passes the listener back with SCM_RIGHTS and
//! exits. The exec wrapper waits for the port before it runs the command, so the workload's
//! first request finds the proxy.

use std::io::{IoSlice, IoSliceMut};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use nix::sys::socket::{
    AddressFamily, ControlMessage, ControlMessageOwned, MsgFlags, SockFlag, SockType, recvmsg,
    sendmsg, socketpair,
};

/// A listener on `127.0.0.1:port` in the network namespace of `pid`.
///
/// Must be called while this process is single-threaded (it forks and the child allocates).
pub(super) fn listener_in(pid: libc::pid_t, port: u16) -> Result<std::net::TcpListener, String> {
    let (ours, theirs) = socketpair(
        AddressFamily::Unix,
        SockType::SeqPacket,
        None,
        SockFlag::SOCK_CLOEXEC,
    )
    .map_err(|e| e.to_string())?;
    // SAFETY: the caller guarantees a single-threaded process.
    match unsafe { nix::unistd::fork() }.map_err(|e| e.to_string())? {
        nix::unistd::ForkResult::Child => {
            drop(ours);
            let code = match make_listener(pid, port) {
                Ok(fd) => {
                    let fds = [fd.as_raw_fd()];
                    let cmsg = [ControlMessage::ScmRights(&fds)];
                    let sent = sendmsg::<()>(
                        theirs.as_raw_fd(),
                        &[IoSlice::new(b"L")],
                        &cmsg,
                        MsgFlags::empty(),
                        None,
                    );
                    i32::from(sent.is_err())
                }
                Err(e) => {
                    let text = format!("E{e}");
                    let _ = nix::unistd::write(&theirs, text.as_bytes());
                    1
                }
            };
            // SAFETY: _exit skips the parent's atexit handlers and buffers, as a forked child must.
            unsafe { libc::_exit(code) }
        }
        nix::unistd::ForkResult::Parent { child } => {
            drop(theirs);
            let answer = receive(&ours);
            let _ = nix::sys::wait::waitpid(child, None);
            answer
        }
    }
}

/// In the child: join the namespaces, bind, listen.
fn make_listener(pid: libc::pid_t, port: u16) -> Result<OwnedFd, String> {
    super::enter::join(
        pid,
        "net",
        nix::sched::CloneFlags::CLONE_NEWNET,
        "use --network none, or an engine of your own",
    )?;
    let listener = std::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, port))
        .map_err(|e| format!("cannot listen on 127.0.0.1:{port} in the container: {e}"))?;
    Ok(listener.into())
}

fn receive(sock: &OwnedFd) -> Result<std::net::TcpListener, String> {
    let mut buf = [0u8; 512];
    let mut cmsg = nix::cmsg_space!([RawFd; 1]);
    let mut iov = [IoSliceMut::new(&mut buf)];
    let msg = recvmsg::<()>(
        sock.as_raw_fd(),
        &mut iov,
        Some(&mut cmsg),
        MsgFlags::MSG_CMSG_CLOEXEC,
    )
    .map_err(|e| e.to_string())?;
    let mut fd = None;
    for c in msg.cmsgs().map_err(|e| e.to_string())? {
        if let ControlMessageOwned::ScmRights(fds) = c {
            // SAFETY: SCM_RIGHTS just installed it in our table; we own it now.
            fd = fds.first().map(|&fd| unsafe { OwnedFd::from_raw_fd(fd) });
        }
    }
    let n = msg.bytes;
    match (buf.first(), fd) {
        (Some(b'L'), Some(fd)) if n == 1 => Ok(std::net::TcpListener::from(fd)),
        (Some(b'E'), _) => Err(airlock_config::printable(&String::from_utf8_lossy(
            &buf[1..n],
        ))),
        _ => Err("the egress listener's helper ended without an answer".into()),
    }
}
