//! Desktop notifications from a sandbox through the XDG desktop portal: a per-session
//! `xdg-dbus-proxy` between the host's session bus and a socket the sandbox sees, filtering every
//! message so that the only thing the sandbox can reach is the portal's notification interface.
//!
//! The proxy runs with [`rules`]:
//!
//! ```text
//! --filter
//! --call=org.freedesktop.portal.Desktop=org.freedesktop.portal.Notification.*@/org/freedesktop/portal/desktop
//! --broadcast=org.freedesktop.portal.Desktop=org.freedesktop.portal.Notification.*@/org/freedesktop/portal/desktop
//! ```
//!
//! `--filter` hides every name on the bus except the bus itself and the client's own unique name.
//! The `--call` rule makes `org.freedesktop.portal.Desktop` visible (SEE) and lets through method
//! calls to it only on the `org.freedesktop.portal.Notification` interface at the portal's one
//! object path (`AddNotification`, `RemoveNotification`); any other portal on the same name
//! (OpenURI, FileChooser, Screenshot, Settings...), its properties and its introspection get
//! `AccessDenied`. The `--broadcast` rule lets the portal's `ActionInvoked` signal (a click on a
//! notification's button) reach the sandbox, and no other signal. No `--talk`: TALK on the portal's
//! name would open every portal interface. Owning names, monitoring and eavesdropping are refused
//! by the proxy itself.
//!
//! Who the portal thinks is calling: xdg-desktop-portal identifies a caller by the bus peer's pid,
//! which is the proxy's (the proxy opens the bus connection), and reads that process's
//! `/proc/<pid>/root/.flatpak-info`. The proxy runs on the host, so the portal sees a host app
//! (named from the proxy's cgroup, i.e. the terminal airlock runs in). The `.flatpak-info` the
//! sandbox is given ([`flatpak_info`], bound at `/.flatpak-info` inside) is read by client
//! libraries inside the sandbox (GLib and GTK send notifications through the portal only when it
//! is there), not by the portal.
//!
//! [`PortalProxy`] owns one proxy process: started on a socket in the session's own host
//! directory (two sessions never share a socket, and a path in use is refused rather than taken
//! over), ready when the proxy says so on its `--fd` pipe and the session bus answered through it,
//! killed and its socket removed when dropped. The proxy also exits by itself when the process
//! that started it dies (the read end of the `--fd` pipe closes).

use std::ffi::OsString;
use std::fs;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The bus name the portal owns.
pub const PORTAL_NAME: &str = "org.freedesktop.portal.Desktop";
/// The portal's object.
pub const PORTAL_PATH: &str = "/org/freedesktop/portal/desktop";
/// The one interface the sandbox may call.
pub const NOTIFICATION_INTERFACE: &str = "org.freedesktop.portal.Notification";
/// Where the proxy's socket is bound inside the sandbox, under `$XDG_RUNTIME_DIR`.
pub const INSIDE_SOCKET: &str = ".dbus-proxy/bus";
/// The prefix of every app id [`app_id`] makes.
pub const APP_ID_PREFIX: &str = "dev.airlock.";

/// How long [`PortalProxy::start`] waits for the proxy to be ready and the bus to answer.
const START_TIMEOUT: Duration = Duration::from_secs(2);
/// The longest well-known name D-Bus allows.
const MAX_NAME: usize = 255;
/// `sun_path` holds 108 bytes, the terminating NUL included.
const MAX_SOCKET_PATH: usize = 107;

/// The arguments after `ADDRESS PATH` given to xdg-dbus-proxy: filtering on, one call rule and one
/// broadcast rule, both limited to the notification interface at the portal's object path.
pub fn rules() -> Vec<String> {
    let rule = format!("{NOTIFICATION_INTERFACE}.*@{PORTAL_PATH}");
    vec![
        "--filter".to_string(),
        format!("--call={PORTAL_NAME}={rule}"),
        format!("--broadcast={PORTAL_NAME}={rule}"),
    ]
}

/// A D-Bus-valid app id for a sandbox: `dev.airlock.<name>`, every character of the name other
/// than an ASCII letter, digit, `_` or `-` replaced by `_` (dots too: the id keeps exactly three
/// elements), `_` put first when the name starts with a digit, `sandbox` for an empty name, cut
/// to 255 bytes. Valid as a D-Bus well-known name and as a Flatpak app id (`-` only in the last
/// element, no element starting with a digit).
pub fn app_id(sandbox: &str) -> String {
    let mut last: String = sandbox
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if last.is_empty() {
        last.push_str("sandbox");
    }
    if last.starts_with(|c: char| c.is_ascii_digit()) {
        last.insert(0, '_');
    }
    last.truncate(MAX_NAME - APP_ID_PREFIX.len());
    format!("{APP_ID_PREFIX}{last}")
}

/// The `.flatpak-info` for an app id: `[Application]` with `name=`. Any character of `app_id` that
/// cannot appear in an app id (a newline above all, which would add keys) is written as `_`.
pub fn flatpak_info(app_id: &str) -> String {
    let name: String = app_id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("[Application]\nname={name}\n")
}

/// One running xdg-dbus-proxy. Dropping it kills and reaps the process and removes the socket.
#[derive(Debug)]
pub struct PortalProxy {
    child: Child,
    socket: PathBuf,
    /// The read end of the proxy's `--fd` pipe: the proxy stops when it is closed, so it never
    /// outlives this process even when this process is killed.
    alive: io::PipeReader,
}

impl PortalProxy {
    /// Starts `program` (xdg-dbus-proxy's resolved absolute path) for the bus at `bus_address`
    /// (the host's `DBUS_SESSION_BUS_ADDRESS`) with its socket at `socket`, whose parent must be a
    /// directory of this user's, closed to everyone else (0700; the session's own directory), and
    /// which must not exist yet. The proxy's stderr goes to `/dev/null`
    /// ([`PortalProxy::start_logged`] keeps it).
    ///
    /// Returns once the proxy wrote to its `--fd` pipe (its socket is listening) and a connection
    /// through the socket reached the bus (D-Bus authentication answered), within 2 s; otherwise
    /// the proxy is killed and the error names what failed.
    ///
    /// The proxy runs with an empty environment, stdin and stdout on `/dev/null`, in its own
    /// process group (a Ctrl-C at the terminal does not reach it), and with no descriptor of this
    /// process but stdio and the `--fd` pipe.
    pub fn start(program: &Path, bus_address: &str, socket: &Path) -> io::Result<PortalProxy> {
        Self::spawn(program, bus_address, socket, None)
    }

    /// [`PortalProxy::start`], with the proxy's stderr appended to `log` (created 0600 when
    /// missing). A start that fails quotes the proxy's last words from it.
    pub fn start_logged(
        program: &Path,
        bus_address: &str,
        socket: &Path,
        log: &Path,
    ) -> io::Result<PortalProxy> {
        Self::spawn(program, bus_address, socket, Some(log))
    }

    /// The proxy's socket on the host (bind it at `$XDG_RUNTIME_DIR/`[`INSIDE_SOCKET`] inside, and
    /// set `DBUS_SESSION_BUS_ADDRESS=unix:path=<that>`).
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// The proxy's pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    fn spawn(
        program: &Path,
        bus_address: &str,
        socket: &Path,
        log: Option<&Path>,
    ) -> io::Result<PortalProxy> {
        check_program(program)?;
        check_bus_address(bus_address)?;
        check_socket(socket)?;

        let (stderr, log_start) = match log {
            Some(path) => {
                let file = fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .mode(0o600)
                    .open(path)
                    .map_err(|e| annotate(e, &format!("xdg-dbus-proxy log {}", path.display())))?;
                let start = file.metadata().map(|m| m.len()).unwrap_or(0);
                (Stdio::from(file), start)
            }
            None => (Stdio::null(), 0),
        };

        // The proxy writes one byte on `ready_w` once its socket listens, and exits when the read
        // end is closed. Both ends are close-on-exec; the child clears the flag on its copy.
        let (ready_r, ready_w) = io::pipe()?;
        // With stdio closed in this process the pipe could take 0-2, which the child's stdio
        // replaces; a duplicate lands at 3 or above.
        let ready_w = if ready_w.as_raw_fd() < 3 {
            ready_w.try_clone()?
        } else {
            ready_w
        };
        let ready_fd = ready_w.as_raw_fd();
        let mut args: Vec<OsString> = vec![
            format!("--fd={ready_fd}").into(),
            bus_address.into(),
            socket.as_os_str().to_owned(),
        ];
        args.extend(rules().into_iter().map(OsString::from));
        let fd_limit = fd_limit();

        let mut command = Command::new(program);
        command
            .args(&args)
            .env_clear()
            .current_dir("/")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .process_group(0);
        // SAFETY: the closure only makes async-signal-safe system calls (fcntl, close_range).
        unsafe {
            command.pre_exec(move || only_fds_passed(ready_fd, fd_limit));
        }
        let spawned = command.spawn();
        drop(ready_w);
        let child = spawned.map_err(|e| annotate(e, &format!("starting {}", program.display())))?;

        let mut proxy = PortalProxy {
            child,
            socket: socket.to_path_buf(),
            alive: ready_r,
        };
        let deadline = Instant::now() + START_TIMEOUT;
        let ready = wait_ready(&mut proxy.alive, deadline)
            .and_then(|()| check_listening(socket))
            .and_then(|()| probe(socket, bus_address, deadline));
        match ready {
            Ok(()) => Ok(proxy),
            Err(e) => {
                let status = proxy.stop();
                let mut message = format!("xdg-dbus-proxy ({}): {e}", program.display());
                if let Some(status) = status.filter(|s| !s.success() && s.code().is_some()) {
                    message.push_str(&format!(" (it exited: {status})"));
                }
                if let Some(words) = log.and_then(|path| log_tail(path, log_start)) {
                    message.push_str(&format!("; it said: {words}"));
                }
                Err(io::Error::new(e.kind(), message))
            }
        }
    }

    /// Kills and reaps the proxy, removes the socket; the exit status when the proxy had already
    /// exited by itself.
    fn stop(&mut self) -> Option<std::process::ExitStatus> {
        let exited = self.child.try_wait().ok().flatten();
        if exited.is_none() {
            let _ = self.child.kill();
        }
        let status = self.child.wait().ok();
        if let Ok(meta) = fs::symlink_metadata(&self.socket)
            && meta.file_type().is_socket()
        {
            let _ = fs::remove_file(&self.socket);
        }
        exited.or(status)
    }
}

impl Drop for PortalProxy {
    fn drop(&mut self) {
        self.stop();
    }
}

fn annotate(e: io::Error, what: &str) -> io::Error {
    io::Error::new(e.kind(), format!("{what}: {e}"))
}

fn invalid(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, message)
}

fn check_program(program: &Path) -> io::Result<()> {
    if !program.is_absolute() {
        return Err(invalid(format!(
            "xdg-dbus-proxy must be named by its absolute path, not {}",
            program.display()
        )));
    }
    Ok(())
}

fn check_bus_address(address: &str) -> io::Result<()> {
    // A leading '-' would be read as an option.
    if address.is_empty() || address.starts_with('-') || address.contains('\0') {
        return Err(invalid(format!(
            "not a D-Bus address for the session bus: {address:?}"
        )));
    }
    Ok(())
}

fn check_socket(socket: &Path) -> io::Result<()> {
    if !socket.is_absolute() {
        return Err(invalid(format!(
            "the proxy socket must be an absolute path, not {}",
            socket.display()
        )));
    }
    if socket.as_os_str().len() > MAX_SOCKET_PATH {
        return Err(invalid(format!(
            "the proxy socket path is longer than a unix socket allows ({} bytes): {}",
            MAX_SOCKET_PATH,
            socket.display()
        )));
    }
    let parent = socket
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .ok_or_else(|| invalid(format!("no directory for {}", socket.display())))?;
    let meta = fs::metadata(parent).map_err(|e| {
        annotate(
            e,
            &format!("the proxy socket's directory {}", parent.display()),
        )
    })?;
    // SAFETY: geteuid cannot fail.
    let uid = unsafe { libc::geteuid() };
    if !meta.is_dir() || meta.uid() != uid || meta.mode() & 0o077 != 0 {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "the proxy socket's directory {} must be this user's own directory, mode 0700",
                parent.display()
            ),
        ));
    }
    // xdg-dbus-proxy unlinks whatever is at its path: never take over another session's socket.
    if fs::symlink_metadata(socket).is_ok() {
        return Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!("{} exists (another proxy's socket?)", socket.display()),
        ));
    }
    Ok(())
}

/// The highest descriptor number + 1 the child may hold (for the fallback of [`only_fds_passed`]).
fn fd_limit() -> libc::c_int {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct it is given.
    let ok = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0;
    if !ok || limit.rlim_cur == libc::RLIM_INFINITY {
        return 1 << 16;
    }
    libc::c_int::try_from(limit.rlim_cur.min(1 << 20)).unwrap_or(1 << 16)
}

/// In the child, before exec: every descriptor but stdio and `keep` is marked close-on-exec (std
/// already marks its own; this covers descriptors the caller leaked), and `keep` is not.
fn only_fds_passed(keep: RawFd, fd_limit: libc::c_int) -> io::Result<()> {
    cloexec_from(3, keep, fd_limit);
    // SAFETY: fcntl on a descriptor this process owns.
    unsafe {
        let flags = libc::fcntl(keep, libc::F_GETFD);
        if flags < 0 || libc::fcntl(keep, libc::F_SETFD, flags & !libc::FD_CLOEXEC) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

fn cloexec_from(first: RawFd, keep: RawFd, fd_limit: libc::c_int) {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: close_range with CLOSE_RANGE_CLOEXEC only sets flags (Linux 5.11+).
        let done = unsafe {
            libc::syscall(
                libc::SYS_close_range,
                first as libc::c_uint,
                libc::c_uint::MAX,
                libc::CLOSE_RANGE_CLOEXEC,
            )
        } == 0;
        if done {
            return;
        }
    }
    for fd in first..fd_limit.max(keep + 1) {
        if fd != keep {
            // SAFETY: fcntl on a closed descriptor fails with EBADF, harmlessly.
            unsafe {
                libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
            }
        }
    }
}

/// Waits for the proxy's byte on the `--fd` pipe.
fn wait_ready(ready: &mut io::PipeReader, deadline: Instant) -> io::Result<()> {
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "not ready within {} s (no byte on its --fd pipe)",
                    START_TIMEOUT.as_secs()
                ),
            ));
        }
        let mut poll = libc::pollfd {
            fd: ready.as_fd().as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = libc::c_int::try_from(left.as_millis().max(1)).unwrap_or(libc::c_int::MAX);
        // SAFETY: one pollfd, owned by this frame.
        let n = unsafe { libc::poll(&mut poll, 1, ms) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if n == 0 {
            continue;
        }
        let mut byte = [0u8; 1];
        return match ready.read(&mut byte) {
            Ok(1) => Ok(()),
            Ok(_) => Err(io::Error::new(
                io::ErrorKind::BrokenPipe,
                "exited before its socket was ready",
            )),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => Err(e),
        };
    }
}

fn check_listening(socket: &Path) -> io::Result<()> {
    match fs::symlink_metadata(socket) {
        Ok(meta) if meta.file_type().is_socket() => Ok(()),
        Ok(_) => Err(io::Error::other(format!(
            "{} is not a socket",
            socket.display()
        ))),
        Err(e) => Err(annotate(
            e,
            &format!("said it was ready, but its socket {}", socket.display()),
        )),
    }
}

/// Connects through the proxy and starts D-Bus authentication: the proxy connects to the bus for
/// each client and passes the exchange through, so an answer (`OK` or `REJECTED`) means the bus
/// is reachable. Nothing is sent past authentication; no name is claimed, no message sent.
fn probe(socket: &Path, bus_address: &str, deadline: Instant) -> io::Result<()> {
    let unreachable = |detail: String| {
        io::Error::new(
            io::ErrorKind::ConnectionRefused,
            format!("the session bus at {bus_address} did not answer through the proxy: {detail}"),
        )
    };
    let mut stream = UnixStream::connect(socket)
        .map_err(|e| annotate(e, &format!("connecting to {}", socket.display())))?;
    let left = deadline
        .saturating_duration_since(Instant::now())
        .max(Duration::from_millis(100));
    stream.set_read_timeout(Some(left))?;
    stream.set_write_timeout(Some(left))?;
    // SAFETY: geteuid cannot fail.
    let uid = unsafe { libc::geteuid() }.to_string();
    let hex: String = uid.as_bytes().iter().map(|b| format!("{b:02x}")).collect();
    stream
        .write_all(format!("\0AUTH EXTERNAL {hex}\r\n").as_bytes())
        .map_err(|e| unreachable(e.to_string()))?;
    let mut answer = Vec::new();
    let mut buf = [0u8; 256];
    while !answer.ends_with(b"\r\n") && answer.len() < 4096 {
        match stream.read(&mut buf) {
            Ok(0) => return Err(unreachable("the proxy closed the connection".to_string())),
            Ok(n) => answer.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(unreachable(e.to_string())),
        }
    }
    if answer.starts_with(b"OK ") || answer.starts_with(b"REJECTED") {
        Ok(())
    } else {
        let text = String::from_utf8_lossy(&answer);
        Err(unreachable(format!(
            "unexpected answer {:?}",
            text.trim_end()
        )))
    }
}

/// The last few hundred bytes the proxy wrote to its log since `start`, on one line.
fn log_tail(path: &Path, start: u64) -> Option<String> {
    let bytes = fs::read(path).ok()?;
    let new = bytes.get(usize::try_from(start).ok()?..)?;
    let tail = &new[new.len().saturating_sub(400)..];
    let text = String::from_utf8_lossy(tail);
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    (!line.is_empty()).then_some(line)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bus_addresses_that_look_like_options_are_refused() {
        assert!(check_bus_address("--log").is_err());
        assert!(check_bus_address("").is_err());
        assert!(check_bus_address("unix:path=/run/user/1000/bus").is_ok());
    }

    #[test]
    fn log_tail_is_what_came_after_start() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("log");
        fs::write(&log, "old line\nnew\n  words\n").unwrap();
        assert_eq!(log_tail(&log, 9).as_deref(), Some("new words"));
        assert_eq!(log_tail(&log, 22), None);
    }

    #[test]
    fn socket_paths_are_checked() {
        let dir = tempfile::tempdir().unwrap();
        let mut perms = fs::metadata(dir.path()).unwrap().permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
        fs::set_permissions(dir.path(), perms.clone()).unwrap();
        let err = check_socket(&dir.path().join("bus")).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::PermissionDenied);
        std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o700);
        fs::set_permissions(dir.path(), perms).unwrap();
        assert!(check_socket(&dir.path().join("bus")).is_ok());
        assert!(check_socket(Path::new("bus")).is_err());
        let long = dir.path().join("x".repeat(120));
        assert!(check_socket(&long).is_err());
        fs::write(dir.path().join("taken"), "").unwrap();
        let err = check_socket(&dir.path().join("taken")).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::AlreadyExists);
    }
}
