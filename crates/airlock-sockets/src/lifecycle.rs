//! The directory of a session's filter sockets, and the accept loop.

use std::fs;
use std::io;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crate::log::DecisionLog;

/// How many connections one filter serves at once; past it new ones are closed unanswered (a
/// sandbox cannot exhaust the supervisor's threads).
const MAX_CONNECTIONS: usize = 64;

/// What a filter does with one accepted connection.
pub trait Filter: Send + Sync + 'static {
    /// The socket's and the log's name (`herdr` → `herdr.sock`, `logs/internal/herdr.log`).
    fn name(&self) -> &'static str;
    /// Serves one connection from the sandbox; `log` takes one line per request.
    fn serve(&self, client: UnixStream, log: &DecisionLog);
}

/// One session's filter sockets: a host directory that is the session's own, named by the
/// supervisor's pid, removed when this is dropped.
pub struct SessionSockets {
    host_dir: PathBuf,
    inside_dir: PathBuf,
}

fn pid_alive(pid: u32) -> bool {
    Path::new("/proc").join(pid.to_string()).exists()
}

impl SessionSockets {
    /// Creates `<state_root>/sockets/<pid>/` (0700), after removing the directories of sessions
    /// whose supervisor is gone (a crash leaves them). `home` is the home path inside the sandbox.
    pub fn create(state_root: &Path, home: &Path) -> io::Result<SessionSockets> {
        let pid = std::process::id();
        let parent = state_root.join("sockets");
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&parent)?;
        if let Ok(entries) = fs::read_dir(&parent) {
            for entry in entries.flatten() {
                let stale = entry
                    .file_name()
                    .to_str()
                    .and_then(|n| n.parse::<u32>().ok())
                    .is_some_and(|p| p != pid && !pid_alive(p));
                if stale {
                    let _ = fs::remove_dir_all(entry.path());
                }
            }
        }
        let host_dir = parent.join(pid.to_string());
        // A directory left by an earlier process with this pid is not ours to trust.
        let _ = fs::remove_dir_all(&host_dir);
        fs::DirBuilder::new().mode(0o700).create(&host_dir)?;
        Ok(SessionSockets {
            host_dir,
            inside_dir: home.join(".run").join(pid.to_string()),
        })
    }

    /// The host directory (bound read-only at [`SessionSockets::inside_dir`]: connecting to a
    /// socket needs no write access to its mount).
    pub fn host_dir(&self) -> &Path {
        &self.host_dir
    }

    pub fn inside_dir(&self) -> &Path {
        &self.inside_dir
    }

    /// Where `name`'s socket is seen inside.
    pub fn inside_path(&self, name: &str) -> PathBuf {
        self.inside_dir.join(format!("{name}.sock"))
    }

    /// Binds `name`'s socket (0600). Call before the sandbox is cloned: no thread is started.
    pub fn bind(&self, name: &str) -> io::Result<UnixListener> {
        let path = self.host_dir.join(format!("{name}.sock"));
        let listener = UnixListener::bind(&path)?;
        fs::set_permissions(&path, fs::Permissions::from_mode(0o600))?;
        Ok(listener)
    }
}

impl Drop for SessionSockets {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.host_dir);
    }
}

/// Serves `listener` with `filter` on a thread of its own until the process ends; each
/// connection on a thread, at most [`MAX_CONNECTIONS`] at once, with `deadline` for reads and
/// writes. Call after the sandbox is cloned.
pub fn serve(
    listener: UnixListener,
    filter: Arc<dyn Filter>,
    log: Arc<DecisionLog>,
    deadline: Duration,
) -> io::Result<()> {
    let live = Arc::new(AtomicUsize::new(0));
    std::thread::Builder::new()
        .name(format!("{}-filter", filter.name()))
        .spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else {
                    continue;
                };
                if live.fetch_add(1, Ordering::SeqCst) >= MAX_CONNECTIONS {
                    live.fetch_sub(1, Ordering::SeqCst);
                    log.write("-", crate::Decision::Deny, "too many connections at once");
                    continue;
                }
                let _ = client.set_read_timeout(Some(deadline));
                let _ = client.set_write_timeout(Some(deadline));
                let (filter, log, done) = (filter.clone(), log.clone(), live.clone());
                let spawned = std::thread::Builder::new()
                    .name("filter-connection".into())
                    .spawn(move || {
                        filter.serve(client, &log);
                        done.fetch_sub(1, Ordering::SeqCst);
                    });
                if spawned.is_err() {
                    // The closure, and the client with it, went with the error.
                    live.fetch_sub(1, Ordering::SeqCst);
                }
            }
        })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    struct Echo;

    impl Filter for Echo {
        fn name(&self) -> &'static str {
            "echo"
        }
        fn serve(&self, mut client: UnixStream, log: &DecisionLog) {
            if let Ok(line) = crate::read_line(&mut client, 64) {
                log.write("echo", crate::Decision::Allow, "test");
                let _ = client.write_all(&line);
            }
        }
    }

    #[test]
    fn a_session_dir_is_made_served_and_removed_and_a_dead_ones_is_swept() {
        let state = tempfile::tempdir().unwrap();
        // A dead session's directory (no such pid) and a live one's (pid 1 always exists).
        let dead = state.path().join("sockets/4194304");
        fs::create_dir_all(&dead).unwrap();
        fs::create_dir_all(state.path().join("sockets/1")).unwrap();
        let sockets = SessionSockets::create(state.path(), Path::new("/home/dev")).unwrap();
        assert!(!dead.exists(), "swept");
        assert!(
            state.path().join("sockets/1").exists(),
            "a live session's is kept"
        );
        let pid = std::process::id();
        assert_eq!(
            sockets.inside_path("echo"),
            PathBuf::from(format!("/home/dev/.run/{pid}/echo.sock"))
        );
        let listener = sockets.bind("echo").unwrap();
        let socket = sockets.host_dir().join("echo.sock");
        let mode = fs::metadata(&socket).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let log = Arc::new(DecisionLog::open(state.path(), "echo"));
        serve(listener, Arc::new(Echo), log, Duration::from_secs(5)).unwrap();
        let mut c = UnixStream::connect(&socket).unwrap();
        c.write_all(b"hello\n").unwrap();
        let mut back = String::new();
        c.read_to_string(&mut back).unwrap();
        assert_eq!(back, "hello\n");
        let logged = fs::read_to_string(state.path().join("logs/internal/echo.log")).unwrap();
        assert!(logged.trim_end().ends_with("echo allow test"), "{logged}");
        let dir = sockets.host_dir().to_path_buf();
        drop(sockets);
        assert!(!dir.exists(), "removed at the end of the session");
    }
}
