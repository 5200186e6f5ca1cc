//! The session's control socket: `<run dir>/<pid>.sock`, and the session record beside it.
//!
//! The run dir (`<state dir>/run`) is host-only: never mounted into a sandbox, created 0700,
//! opened without following a link and checked to be a directory of this user's (a looser mode
//! is tightened; a link, another owner or a non-directory is refused). The socket is bound after
//! removing whatever stale entry has its name (`unlinkat`, which never follows a link), and the
//! record is written beside it with `O_EXCL | O_NOFOLLOW` and renamed into place. A client is
//! answered only when its uid (SO_PEERCRED) is this process's effective uid; one request per
//! connection, [`MAX_REQUEST`] bytes at most, 2 s to send it.

use std::ffi::CString;
use std::io::{Read as _, Write as _};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::MetadataExt as _;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};

use super::Shared;
use super::protocol::{MAX_REQUEST, Request, answer_line};
use super::sessions::SessionRecord;

/// How long a client may take to send its request or read the answer.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(2);

/// The run dir, held open by descriptor once checked.
pub(crate) struct RunDir {
    fd: OwnedFd,
    path: PathBuf,
}

impl RunDir {
    /// Opens `path` (created 0700 when missing) as a host-only directory of this user's.
    pub fn open(path: &Path) -> Result<RunDir, String> {
        let shown = path.display();
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
        }
        let c = CString::new(path.as_os_str().as_bytes())
            .map_err(|_| format!("{shown}: a NUL byte"))?;
        // SAFETY: a valid C string; mkdir creates or fails.
        if unsafe { libc::mkdir(c.as_ptr(), 0o700) } != 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::AlreadyExists {
                return Err(format!("cannot create {shown}: {e}"));
            }
        }
        // SAFETY: as above; O_NOFOLLOW refuses a symlink planted in its place.
        let fd = unsafe {
            libc::open(
                c.as_ptr(),
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            let e = std::io::Error::last_os_error();
            return Err(format!(
                "{shown} is not a directory airlock can use ({e}); remove it (airlock makes it \
                 again, 0700)"
            ));
        }
        // SAFETY: just opened, ours alone.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let meta = std::fs::File::from(fd.try_clone().map_err(|e| e.to_string())?)
            .metadata()
            .map_err(|e| format!("cannot inspect {shown}: {e}"))?;
        // SAFETY: geteuid cannot fail.
        let euid = unsafe { libc::geteuid() };
        if meta.uid() != euid {
            return Err(format!(
                "{shown} belongs to uid {}, not to you (uid {euid}); remove it",
                meta.uid()
            ));
        }
        if meta.mode() & 0o077 != 0 {
            // SAFETY: fchmod on the directory we hold.
            if unsafe { libc::fchmod(fd.as_raw_fd(), 0o700) } != 0 {
                return Err(format!(
                    "cannot make {shown} private (0700): {}",
                    std::io::Error::last_os_error()
                ));
            }
        }
        Ok(RunDir {
            fd,
            path: path.to_path_buf(),
        })
    }

    /// Whether `path` still names the directory held (not swapped since it was checked).
    fn still_here(&self) -> bool {
        let held = std::fs::File::from(match self.fd.try_clone() {
            Ok(fd) => fd,
            Err(_) => return false,
        })
        .metadata();
        match (held, std::fs::symlink_metadata(&self.path)) {
            (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino() && b.is_dir(),
            _ => false,
        }
    }

    /// Removes `name` in the dir, whatever it is; a link is removed, never followed.
    pub fn unlink(&self, name: &str) {
        if let Ok(c) = CString::new(name) {
            // SAFETY: a name under the directory we hold.
            unsafe { libc::unlinkat(self.fd.as_raw_fd(), c.as_ptr(), 0) };
        }
    }

    /// Writes `bytes` to `name` (0600): a new file under a temporary name, renamed over `name`.
    pub fn write(&self, name: &str, bytes: &[u8]) -> std::io::Result<()> {
        let temp = format!(".{name}.{}.tmp", std::process::id());
        self.unlink(&temp);
        let c = CString::new(temp.as_str()).map_err(std::io::Error::other)?;
        // SAFETY: a name under the directory we hold; O_EXCL|O_NOFOLLOW never opens a planted file.
        let fd = unsafe {
            libc::openat(
                self.fd.as_raw_fd(),
                c.as_ptr(),
                libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC,
                0o600,
            )
        };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: just opened, ours alone.
        let mut file = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) });
        let written = file.write_all(bytes);
        drop(file);
        let target = CString::new(name).map_err(std::io::Error::other)?;
        // SAFETY: two names under the directory we hold; rename replaces a link, never follows it.
        let renamed = written.and_then(|()| {
            if unsafe {
                libc::renameat(
                    self.fd.as_raw_fd(),
                    c.as_ptr(),
                    self.fd.as_raw_fd(),
                    target.as_ptr(),
                )
            } == 0
            {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        });
        if renamed.is_err() {
            self.unlink(&temp);
        }
        renamed
    }
}

/// The control socket's thread and the files it made.
pub(crate) struct Server {
    dir: RunDir,
    socket: String,
    record: String,
    /// Bound and listening; answered once [`Server::serve`] has started the thread.
    listener: Option<UnixListener>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Server {
    /// Binds `<dir>/<pid>.sock` and writes `<pid>.json`: from here a client's connection waits in
    /// the socket's backlog until [`Server::serve`] answers it.
    pub fn start(dir: &Path, record: &SessionRecord) -> Result<Server, String> {
        let dir = RunDir::open(dir).map_err(|e| format!("no control socket: {e}"))?;
        let socket = super::socket_name(record.pid);
        let path = dir.path.join(&socket);
        if path.as_os_str().len() >= 108 {
            return Err(format!(
                "no control socket: {} is longer than a unix socket address may be (107 bytes); \
                 set XDG_STATE_HOME to a shorter directory",
                path.display()
            ));
        }
        dir.unlink(&socket);
        if !dir.still_here() {
            return Err(format!(
                "no control socket: {} changed under airlock",
                dir.path.display()
            ));
        }
        let listener = bind_private(&path).map_err(|e| {
            format!(
                "no control socket: cannot listen on {}: {e}",
                path.display()
            )
        })?;
        listener
            .set_nonblocking(true)
            .map_err(|e| format!("no control socket: {e}"))?;
        let record_name = format!("{}.json", record.pid);
        let json = serde_json::to_vec(record).map_err(|e| e.to_string())?;
        if let Err(e) = dir.write(&record_name, &json) {
            dir.unlink(&socket);
            return Err(format!(
                "no control socket: cannot write {}: {e}",
                dir.path.join(&record_name).display()
            ));
        }
        Ok(Server {
            dir,
            socket,
            record: record_name,
            listener: Some(listener),
            thread: None,
        })
    }

    /// Starts answering on the control thread (once; the launch calls it after its workload may
    /// run, so the thread's start is not on the way to it).
    pub fn serve(&mut self, shared: &Arc<Shared>) -> Result<(), String> {
        let Some(listener) = self.listener.take() else {
            return Ok(());
        };
        let s = Arc::clone(shared);
        let thread = std::thread::Builder::new()
            .name("airlock-control".into())
            .spawn(move || serve(&s, &listener))
            .map_err(|e| format!("no control socket: {e}"))?;
        self.thread = Some(thread);
        Ok(())
    }

    /// Stops answering and removes the socket and the record.
    pub fn stop(mut self, shared: &Shared) {
        shared.stop.fire();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        self.remove();
    }

    /// Removes the socket and the record (a server whose thread never started).
    pub fn remove(self) {
        self.dir.unlink(&self.socket);
        self.dir.unlink(&self.record);
    }
}

/// A unix listener whose socket file is 0600 from the start (fchmod before bind sets its mode).
/// `path` must fit `sun_path` (107 bytes); the container's go socket passes a short
/// `/proc/self/fd/<n>/<name>` for a long one.
pub(crate) fn bind_private(path: &Path) -> std::io::Result<UnixListener> {
    // SAFETY: plain socket creation; owned right below.
    let fd = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: just created, ours alone.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: fchmod on our own socket.
    unsafe { libc::fchmod(fd.as_raw_fd(), 0o600) };
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let bytes = path.as_os_str().as_bytes();
    for (dst, src) in addr.sun_path.iter_mut().zip(bytes) {
        *dst = *src as libc::c_char;
    }
    let len = std::mem::size_of::<libc::sa_family_t>() + bytes.len() + 1;
    // SAFETY: a sockaddr_un holding the NUL-terminated path (length checked by the caller).
    if unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&addr as *const libc::sockaddr_un).cast(),
            len as libc::socklen_t,
        )
    } != 0
        || unsafe { libc::listen(fd.as_raw_fd(), 16) } != 0
    {
        return Err(std::io::Error::last_os_error());
    }
    Ok(UnixListener::from(fd))
}

fn serve(shared: &Arc<Shared>, listener: &UnixListener) {
    loop {
        let mut fds = [
            PollFd::new(listener.as_fd(), PollFlags::POLLIN),
            PollFd::new(shared.stop.fd(), PollFlags::POLLIN),
        ];
        match poll(&mut fds, PollTimeout::NONE) {
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            Err(_) => return,
        }
        if fds[1].revents().is_some_and(|r| !r.is_empty()) {
            return;
        }
        while let Ok((stream, _)) = listener.accept() {
            let line = answer_line(&handle(shared, &stream));
            let mut stream = stream;
            let _ = stream.write_all(line.as_bytes());
        }
    }
}

/// The answer to one client.
fn handle(shared: &Arc<Shared>, stream: &UnixStream) -> Result<String, String> {
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_read_timeout(Some(CLIENT_TIMEOUT));
    let _ = stream.set_write_timeout(Some(CLIENT_TIMEOUT));
    let uid = peer_uid(stream).map_err(|e| format!("refused: cannot tell who is asking ({e})"));
    // Read first (bounded) even from a client about to be refused: closing on unread bytes would
    // reset the connection, and it would never see why.
    let line = read_line(stream);
    // SAFETY: geteuid cannot fail.
    let euid = unsafe { libc::geteuid() };
    let uid = uid?;
    if uid != euid {
        return Err(format!(
            "refused: uid {uid} is not this session's user; only uid {euid} may ask"
        ));
    }
    let line = line?;
    match Request::parse(&line)? {
        Request::Forward { host, sandbox } => shared.open_forward(host, sandbox),
        Request::Callback { port } => shared.open_callback(port),
        Request::Remove { host } => shared.remove_forward(host),
        Request::Ports => serde_json::to_string(&shared.infos()).map_err(|e| e.to_string()),
    }
}

fn peer_uid(stream: &UnixStream) -> std::io::Result<u32> {
    let mut cred: libc::ucred = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: a ucred buffer of the length given.
    if unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    } != 0
    {
        return Err(std::io::Error::last_os_error());
    }
    Ok(cred.uid)
}

/// The request line without its `\n`: at most [`MAX_REQUEST`] bytes, within the client timeout.
fn read_line(stream: &UnixStream) -> Result<Vec<u8>, String> {
    let mut line = Vec::with_capacity(MAX_REQUEST);
    let mut byte = [0u8; 1];
    let mut reader = stream;
    loop {
        match reader.read(&mut byte) {
            Ok(0) => return Err("the request ended before its newline".into()),
            Ok(_) if byte[0] == b'\n' => return Ok(line),
            Ok(_) if line.len() + 1 >= MAX_REQUEST => {
                return Err(format!("the request is longer than {MAX_REQUEST} bytes"));
            }
            Ok(_) => line.push(byte[0]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return Err("no request line within 2 s".into()),
        }
    }
}
