//! The socket filters of one launch: planned before the sandbox is cloned (their sockets bound in
//! the session's own directory, that directory and the paths tools look for added to the spec),
//! served once it is (threads may start only then).

use std::os::unix::net::UnixListener;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use airlock_herdr::filter::activate::{self, Activation, PASSED_ENV};
use airlock_herdr::filter::serve::HerdrFilter;
use airlock_sandbox::{MountOp, SandboxSpec};
use airlock_sockets::{DecisionLog, Filter, SessionSockets};

/// How long a client of a filter may take to send its request, and to read the answer.
const CLIENT_DEADLINE: Duration = Duration::from_secs(5);

/// The filters planned for a launch; the session's socket directory goes when this is dropped.
#[derive(Default)]
pub struct Filters {
    sockets: Option<SessionSockets>,
    pending: Vec<(UnixListener, Arc<dyn Filter>, Arc<DecisionLog>)>,
}

impl Filters {
    /// Starts serving every planned filter (after the clone).
    pub fn start(&mut self) -> Result<(), String> {
        for (listener, filter, log) in self.pending.drain(..) {
            let name = filter.name();
            airlock_sockets::serve(listener, filter, log, CLIENT_DEADLINE)
                .map_err(|e| format!("cannot start the {name} socket filter: {e}"))?;
        }
        Ok(())
    }
}

/// A direct agent launch in a herdr pane records the pane (for the restore guard of
/// `run-agent`); a record that cannot be written is said, and the launch goes on.
pub fn record_pane(spec: &SandboxSpec, state_dir: &Path) {
    use airlock_herdr::restore::{PaneRecord, asks_for_worktree, records_dir, write_record};
    if std::env::var_os("HERDR_ENV").is_none_or(|v| v != "1") {
        return;
    }
    let Ok(pane_id) = std::env::var("HERDR_PANE_ID") else {
        return;
    };
    let Some(agent) = spec
        .argv
        .first()
        .and_then(|p| Path::new(p).file_name())
        .and_then(|n| n.to_str())
        .filter(|n| activate::REPORTING_AGENTS.contains(n))
    else {
        return;
    };
    let args = spec.argv[1..].to_vec();
    let record = PaneRecord {
        pane_id,
        agent: agent.to_owned(),
        project: spec.project.clone(),
        state_root: spec.state_root.clone(),
        worktree: asks_for_worktree(&args),
        args,
    };
    let dir = records_dir(state_dir);
    if let Err(e) = write_record(&dir, &record) {
        eprintln!(
            "airlock: warning: cannot record this herdr pane in {} ({e}): herdr's restore of this session is not guarded",
            dir.display()
        );
    }
}

/// Plans the herdr filter for `spec` (`[tools.herdr] mode`); a warning to print, if any.
pub fn plan(
    spec: &mut SandboxSpec,
    mode: &str,
    herdr_on_path: bool,
    home: &Path,
) -> anyhow::Result<(Filters, Option<String>)> {
    let env = |k: &str| std::env::var_os(k);
    let mut filters = Filters::default();
    let (policy, host_socket) =
        match activate::activation(mode, herdr_on_path, &spec.argv, home, &env)
            .map_err(anyhow::Error::msg)?
        {
            Activation::Off => return Ok((filters, None)),
            Activation::Warn(warning) => return Ok((filters, Some(warning))),
            Activation::On {
                policy,
                host_socket,
            } => (policy, host_socket),
        };
    let sockets = SessionSockets::create(&spec.state_root, home)?;
    let listener = sockets.bind("herdr")?;
    let host_dir = sockets.host_dir().to_path_buf();
    spec.mounts.push(MountOp::Bind {
        source: host_dir.clone(),
        target: sockets.inside_dir().to_path_buf(),
        writable: false,
    });
    // Some herdr subcommands connect to the default path directly.
    spec.mounts.push(MountOp::Bind {
        source: host_dir.join("herdr.sock"),
        target: home.join(".config/herdr/herdr.sock"),
        writable: false,
    });
    spec.env.insert(
        "HERDR_SOCKET_PATH".into(),
        sockets.inside_path("herdr").to_string_lossy().into_owned(),
    );
    for key in PASSED_ENV {
        if let Ok(value) = std::env::var(key) {
            spec.env.insert((*key).into(), value);
        }
    }
    let log = Arc::new(DecisionLog::open(&spec.state_root, "herdr"));
    let filter: Arc<dyn Filter> = Arc::new(HerdrFilter {
        policy,
        host_socket,
    });
    filters.pending.push((listener, filter, log));
    filters.sockets = Some(sockets);
    Ok((filters, None))
}
