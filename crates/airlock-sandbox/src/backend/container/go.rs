//! The go socket of a local container: a unix socket in the host-only session directory, bound
//! at [`GO_PATH`](super::exec::GO_PATH). The wrapper connects to it first thing, before any
//! command of the spec runs, so the one connection names the container's first process by its
//! host pid (`SO_PEERCRED`): no `inspect` call to the engine, no polling. The supervisor starts
//! the gates in that process's namespaces, then writes `G` on the connection; the wrapper runs
//! the command only after it (as native's supervisor sends "G" to init).

use std::os::fd::AsFd as _;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};

use crate::spec::SandboxSpec;

/// How long the engine may take to start the container before the launch fails.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// How often the wait checks that the engine's client still runs.
const ENGINE_CHECK: Duration = Duration::from_millis(20);

/// The listening end, until the wrapper has connected.
pub(super) struct GoSocket {
    listener: UnixListener,
    path: PathBuf,
}

/// The wrapper's connection: its host pid, and the end `G` is written on.
pub(super) struct Wrapper {
    pub pid: libc::pid_t,
    stream: UnixStream,
}

impl GoSocket {
    /// Binds the socket at `path`, 0600 from the start, owned by the container's user (the
    /// spec's, unless root launches for another).
    pub fn bind(spec: &SandboxSpec, path: &Path) -> std::io::Result<GoSocket> {
        let listener = bind_long(path)?;
        // The wrapper runs as the spec's user (the same as ours, unless root launches for another).
        if nix::unistd::geteuid().is_root() && spec.uid != 0 {
            std::os::unix::fs::chown(path, Some(spec.uid), Some(spec.gid))?;
        }
        listener.set_nonblocking(true)?;
        Ok(GoSocket {
            listener,
            path: path.to_path_buf(),
        })
    }

    /// Waits for the wrapper's connection; `None` when the engine's client ended first (its
    /// status says why). The listener is closed and its file removed on return: nothing else
    /// connects later, from inside or out.
    pub fn accept(self, engine: &mut std::process::Child) -> Result<Option<Wrapper>, String> {
        let deadline = Instant::now() + START_TIMEOUT;
        let stream = loop {
            match self.listener.accept() {
                Ok((stream, _)) => break stream,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(format!("cannot accept on {}: {e}", self.path.display())),
            }
            if engine.try_wait().map_err(|e| e.to_string())?.is_some() {
                return Ok(None);
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "the engine did not start the container within {} s",
                    START_TIMEOUT.as_secs()
                ));
            }
            let mut fds = [PollFd::new(self.listener.as_fd(), PollFlags::POLLIN)];
            let wait = PollTimeout::try_from(ENGINE_CHECK).unwrap_or(PollTimeout::NONE);
            match poll(&mut fds, wait) {
                Ok(_) | Err(nix::errno::Errno::EINTR) => {}
                Err(e) => return Err(format!("cannot wait on {}: {e}", self.path.display())),
            }
        };
        let _ = std::fs::remove_file(&self.path);
        let creds =
            nix::sys::socket::getsockopt(&stream, nix::sys::socket::sockopt::PeerCredentials)
                .map_err(|e| format!("cannot read the go socket's peer: {e}"))?;
        let pid = creds.pid();
        first_process(pid)?;
        stream
            .set_nonblocking(false)
            .map_err(|e| format!("cannot use the go socket: {e}"))?;
        Ok(Some(Wrapper { pid, stream }))
    }
}

impl Wrapper {
    /// Says go: the wrapper runs the command once it reads the byte.
    pub fn go(mut self) -> Result<(), String> {
        use std::io::Write as _;
        self.stream
            .write_all(b"G")
            .map_err(|e| format!("cannot say go to the container's wrapper: {e}"))
    }
}

/// Binds a private unix socket at `path` however long it is: `sun_path` holds 107 bytes, and a
/// state root under a long home and project name passes that, so the socket is bound through a
/// descriptor of its directory (`/proc/self/fd/<n>/<name>`, which the kernel resolves).
fn bind_long(path: &Path) -> std::io::Result<UnixListener> {
    use std::os::fd::AsRawFd as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(std::io::Error::from(std::io::ErrorKind::InvalidInput));
    };
    let dir = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW)
        .open(dir)?;
    let mut short = PathBuf::from(format!("/proc/self/fd/{}", dir.as_raw_fd()));
    short.push(name);
    crate::ports::bind_private(&short)
}

/// Refuses a peer that is not the first process of a pid namespace below ours (the container's
/// init is pid 1 in its own): the gates are started in that process's namespaces, so a host
/// process of the same user that connected first would have them started in the host's.
fn first_process(pid: libc::pid_t) -> Result<(), String> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .map_err(|e| format!("cannot read the status of the go socket's peer (pid {pid}): {e}"))?;
    if is_first_process(&status) {
        Ok(())
    } else {
        Err(format!(
            "the go socket's peer (pid {pid}) is not a container's first process; the container's \
             gates were not started"
        ))
    }
}

/// Whether a `/proc/<pid>/status` names pid 1 of a namespace nested below the reader's.
fn is_first_process(status: &str) -> bool {
    status
        .lines()
        .find_map(|l| l.strip_prefix("NSpid:"))
        .map(|ids| ids.split_whitespace().collect::<Vec<_>>())
        .is_some_and(|ids| ids.len() >= 2 && ids.last() == Some(&"1"))
}

/// The wrapper's side: connects, then blocks until the supervisor writes `G`. Any other end (no
/// socket, a closed connection) is an error: the gates did not start.
pub(crate) fn wait(path: &Path) -> std::io::Result<()> {
    use std::io::Read as _;
    let mut stream = UnixStream::connect(path)?;
    let mut byte = [0u8; 1];
    stream.read_exact(&mut byte)?;
    if byte == *b"G" {
        Ok(())
    } else {
        Err(std::io::Error::other("not the go byte"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{FileTypeExt as _, PermissionsExt as _};

    /// The container fixture's spec, as this process's user.
    fn spec() -> SandboxSpec {
        let mut spec: SandboxSpec =
            serde_json::from_str(include_str!("testdata/spec.json")).unwrap();
        spec.uid = nix::unistd::getuid().as_raw();
        spec.gid = nix::unistd::getgid().as_raw();
        spec
    }

    #[test]
    fn a_first_process_is_pid_1_of_a_nested_namespace() {
        let status = |nspid: &str| format!("Name:\tx\nPid:\t42\nNSpid:{nspid}\nPPid:\t1\n");
        assert!(is_first_process(&status("\t4242\t1")));
        assert!(is_first_process(&status("\t4242\t7\t1")));
        // A host process (one namespace), pid 1 of ours, a process inside that is not init.
        assert!(!is_first_process(&status("\t4242")));
        assert!(!is_first_process(&status("\t1")));
        assert!(!is_first_process(&status("\t4242\t12")));
        assert!(!is_first_process("Name:\tx\nPid:\t42\n"));
    }

    /// A real socket, a real peer: a host process (this test's own child) is refused as the
    /// container's first process, and the file is gone once the connection is taken.
    #[test]
    fn a_host_peer_is_refused_and_the_socket_removed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("go");
        let spec = spec();
        let go = GoSocket::bind(&spec, &path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let peer = std::thread::spawn({
            let path = path.clone();
            move || UnixStream::connect(path).unwrap()
        });
        let mut engine = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let err = go.accept(&mut engine).err().unwrap();
        assert!(err.contains("is not a container's first process"), "{err}");
        assert!(!path.exists());
        drop(peer.join());
        let _ = engine.kill();
        let _ = engine.wait();
    }

    /// A state root deep enough that the socket's path passes `sun_path`'s 108 bytes still
    /// binds, at that path, and a peer reaches it there.
    #[test]
    fn a_path_longer_than_sun_path_binds() {
        let dir = tempfile::tempdir().unwrap();
        let deep = dir.path().join("d".repeat(60)).join("e".repeat(60));
        std::fs::create_dir_all(&deep).unwrap();
        let path = deep.join("go");
        assert!(path.as_os_str().len() > 108);
        let _go = GoSocket::bind(&spec(), &path).unwrap();
        assert!(
            std::fs::symlink_metadata(&path)
                .unwrap()
                .file_type()
                .is_socket()
        );
        // The peer reaches it the same way (the wrapper's path inside is short).
        use std::os::fd::AsRawFd as _;
        let at = std::fs::File::open(&deep).unwrap();
        let peer = UnixStream::connect(format!("/proc/self/fd/{}/go", at.as_raw_fd()));
        assert!(peer.is_ok(), "{peer:?}");
    }

    #[test]
    fn an_engine_that_ends_first_is_no_wrapper() {
        let dir = tempfile::tempdir().unwrap();
        let spec = spec();
        let go = GoSocket::bind(&spec, &dir.path().join("go")).unwrap();
        let mut engine = std::process::Command::new("true").spawn().unwrap();
        assert!(go.accept(&mut engine).unwrap().is_none());
    }
}
