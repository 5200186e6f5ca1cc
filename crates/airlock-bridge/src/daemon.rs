//! `airlock bridge daemon`: read the state, bind both listeners, record port and pid, serve until
//! SIGTERM or SIGINT. Runs in the foreground under the supervisor (or by hand).

use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::net::{TcpListener, UnixListener};

use crate::audit::AuditLog;
use crate::commands::{CommandConfigError, CommandTable};
use crate::paths::{BridgePaths, PREFERRED_PORT, fits_sun_path};
use crate::rate::Buckets;
use crate::server::{self, Listeners};
use crate::state::BridgeState;
use crate::token::{Token, TokenError};

/// Why the daemon did not start. Each says what to do.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error("the bridge is not installed: {0} does not exist; run `airlock bridge install` first")]
    NotInstalled(PathBuf),
    #[error("{0}")]
    Token(#[from] TokenError),
    #[error("{path}: {error}")]
    Config {
        path: PathBuf,
        error: Box<airlock_config::ConfigError>,
    },
    #[error("{path}: {error}")]
    Command {
        path: PathBuf,
        error: CommandConfigError,
    },
    #[error(
        "another bridge daemon is already serving {0}; stop it first (`airlock bridge status` shows it)"
    )]
    AlreadyRunning(PathBuf),
    #[error("refusing to serve on {0}: the bridge listens on 127.0.0.1 only")]
    NotLoopback(SocketAddr),
    #[error("{what} {path}: {source}")]
    Io {
        what: &'static str,
        path: PathBuf,
        source: io::Error,
    },
}

fn io_error(what: &'static str, path: &Path) -> impl FnOnce(io::Error) -> DaemonError + use<> {
    let path = path.to_owned();
    move |source| DaemonError::Io { what, path, source }
}

/// Daemon settings from the command line.
#[derive(Debug, Clone)]
pub struct DaemonOptions {
    /// The TCP port tried first (an ephemeral one when it is busy).
    pub preferred_port: u16,
}

impl Default for DaemonOptions {
    fn default() -> Self {
        DaemonOptions {
            preferred_port: PREFERRED_PORT,
        }
    }
}

/// The host commands from the global config file (a missing file means the built-ins only).
pub fn load_commands(config_file: &Path) -> Result<CommandTable, DaemonError> {
    load_section(config_file).and_then(|section| commands_of(config_file, &section))
}

fn load_section(config_file: &Path) -> Result<airlock_config::BridgeSection, DaemonError> {
    if !config_file.exists() {
        return Ok(Default::default());
    }
    Ok(airlock_config::parse_file(config_file)
        .map_err(|error| DaemonError::Config {
            path: config_file.to_owned(),
            error: Box::new(error),
        })?
        .bridge)
}

fn commands_of(
    config_file: &Path,
    section: &airlock_config::BridgeSection,
) -> Result<CommandTable, DaemonError> {
    CommandTable::from_config(&section.commands).map_err(|error| DaemonError::Command {
        path: config_file.to_owned(),
        error,
    })
}

/// Raises the soft `RLIMIT_NOFILE` to the hard limit (best effort): the connection cap, not the
/// descriptor limit, decides how many callers are served at once.
fn raise_fd_limit() {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: valid out-pointer; setrlimit with the values just read.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 && limit.rlim_cur < limit.rlim_max
        {
            limit.rlim_cur = limit.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
    }
}

/// Runs the daemon until SIGTERM/SIGINT. `notice` receives one-line status messages for stderr.
pub fn run(
    paths: &BridgePaths,
    config_file: &Path,
    options: &DaemonOptions,
    notice: &dyn Fn(&str),
) -> Result<(), DaemonError> {
    if !paths.dir.is_dir() {
        return Err(DaemonError::NotInstalled(paths.dir.clone()));
    }
    std::fs::set_permissions(&paths.dir, std::fs::Permissions::from_mode(0o700))
        .map_err(io_error("cannot set mode 0700 on", &paths.dir))?;
    let token = Token::read(&paths.token())?;
    raise_fd_limit();
    let section = load_section(config_file)?;
    let commands = commands_of(config_file, &section)?;
    let shared_token = section.shared_token;
    let audit = AuditLog::open(&paths.log())
        .map_err(io_error("cannot open the audit log", &paths.log()))?;
    let _ = std::fs::remove_dir_all(paths.sounds());
    std::os::unix::fs::DirBuilderExt::mode(&mut std::fs::DirBuilder::new(), 0o700)
        .create(paths.sounds())
        .map_err(io_error("cannot create", &paths.sounds()))?;
    // One thread: the daemon is idle almost always, and a small footprint matters more.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(io_error("cannot start the async runtime for", &paths.dir))?;
    runtime.block_on(async {
        let tcp = bind_tcp(options.preferred_port).await?;
        let port = tcp
            .local_addr()
            .map_err(io_error("cannot read the TCP address of", &paths.dir))?
            .port();
        let unix = bind_unix(paths, &audit, notice)?;
        write_small(&paths.port(), &format!("{port}\n"))?;
        write_small(&paths.pid(), &format!("{}\n", std::process::id()))?;
        let message = match &unix {
            Some(_) => format!(
                "listening on {} and 127.0.0.1:{port} (pid {})",
                paths.socket().display(),
                std::process::id()
            ),
            None => format!(
                "listening on 127.0.0.1:{port} only (pid {})",
                std::process::id()
            ),
        };
        audit.message(&message);
        notice(&message);
        let state = Arc::new(BridgeState {
            token,
            audit,
            buckets: Buckets::default(),
            commands,
            sessions: Some(paths.clone()),
            shared_token,
        });
        server::serve(
            Arc::clone(&state),
            Listeners { tcp, unix },
            shutdown_signal(),
        )
        .await;
        if unix_is_ours(paths) {
            let _ = std::fs::remove_file(paths.socket());
        }
        let _ = std::fs::remove_file(paths.pid());
        state.audit.message("stopped");
        notice("stopped");
        Ok(())
    })
}

async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}

/// 127.0.0.1 on the preferred port, else an ephemeral one; anything but 127.0.0.1 is refused.
async fn bind_tcp(preferred: u16) -> Result<TcpListener, DaemonError> {
    let addr = |port| SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let listener = match TcpListener::bind(addr(preferred)).await {
        Ok(listener) => listener,
        Err(e) if e.kind() == io::ErrorKind::AddrInUse => TcpListener::bind(addr(0))
            .await
            .map_err(io_error("cannot listen on", Path::new("127.0.0.1:0")))?,
        Err(source) => {
            return Err(DaemonError::Io {
                what: "cannot listen on",
                path: PathBuf::from(format!("127.0.0.1:{preferred}")),
                source,
            });
        }
    };
    let local = listener.local_addr().map_err(io_error(
        "cannot read the address of",
        Path::new("the TCP listener"),
    ))?;
    if local.ip() != Ipv4Addr::LOCALHOST {
        return Err(DaemonError::NotLoopback(local));
    }
    Ok(listener)
}

/// The unix socket. A live socket means another daemon runs: this one refuses to start. When the
/// socket cannot be bound (a path longer than `sun_path`, a permission problem), that is logged and
/// the daemon serves TCP only. A stale socket is replaced.
fn bind_unix(
    paths: &BridgePaths,
    audit: &AuditLog,
    notice: &dyn Fn(&str),
) -> Result<Option<UnixListener>, DaemonError> {
    let socket = paths.socket();
    let why = if !fits_sun_path(&socket) {
        "the path is too long for a socket address".to_owned()
    } else {
        match try_bind(paths) {
            Ok(listener) => return Ok(Some(listener)),
            Err(None) => return Err(DaemonError::AlreadyRunning(socket)),
            Err(Some(e)) => e,
        }
    };
    let message = format!("unix socket {}: {why}; serving TCP only", socket.display());
    audit.message(&message);
    notice(&message);
    Ok(None)
}

/// Binds the socket (0600 in the 0700 `run/`); `Err(None)` when a live daemon answers on it.
fn try_bind(paths: &BridgePaths) -> Result<UnixListener, Option<String>> {
    let run_dir = paths.run_dir();
    let socket = paths.socket();
    let fail = |what: &str, e: io::Error| Some(format!("cannot {what}: {e}"));
    std::fs::create_dir_all(&run_dir).map_err(|e| fail("create its directory", e))?;
    std::fs::set_permissions(&run_dir, std::fs::Permissions::from_mode(0o700))
        .map_err(|e| fail("set mode 0700 on its directory", e))?;
    if std::fs::symlink_metadata(&socket).is_ok() {
        if std::os::unix::net::UnixStream::connect(&socket).is_ok() {
            return Err(None);
        }
        std::fs::remove_file(&socket).map_err(|e| fail("remove the stale socket", e))?;
    }
    let listener = UnixListener::bind(&socket).map_err(|e| fail("listen", e))?;
    if let Err(e) = std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o600)) {
        let _ = std::fs::remove_file(&socket);
        return Err(fail("set mode 0600", e));
    }
    Ok(listener)
}

/// Whether the socket file still names this daemon's listener (not one a newer daemon bound).
fn unix_is_ours(paths: &BridgePaths) -> bool {
    std::fs::read_to_string(paths.pid())
        .is_ok_and(|pid| pid.trim() == std::process::id().to_string())
}

/// Writes a small 0644 file atomically.
fn write_small(path: &Path, text: &str) -> Result<(), DaemonError> {
    write_atomic(path, text.as_bytes(), 0o644).map_err(io_error("cannot write", path))
}

pub(crate) fn write_atomic(path: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    use std::io::Write as _;
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut file = tempfile::Builder::new()
        .prefix(".tmp-")
        .permissions(std::fs::Permissions::from_mode(mode))
        .tempfile_in(dir)?;
    file.write_all(bytes)?;
    file.persist(path).map_err(|e| e.error)?;
    Ok(())
}
