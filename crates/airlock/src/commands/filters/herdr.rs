//! The herdr filter of a launch, and the pane record of a direct agent launch in a herdr pane.

use std::path::Path;
use std::sync::Arc;

use airlock_herdr::filter::activate::{self, Activation, PASSED_ENV};
use airlock_herdr::filter::serve::HerdrFilter;
use airlock_herdr::filter::{LaunchOverlay, ScriptLauncher};
use airlock_sandbox::{MountOp, SandboxSpec};
use airlock_sockets::overlay::RevdiffOverlay;
use airlock_sockets::{DecisionLog, Filter};

use super::{Filters, session_sockets};

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
pub fn plan_herdr(
    spec: &mut SandboxSpec,
    mode: &str,
    herdr_on_path: bool,
    home: &Path,
    overlay: Option<Arc<RevdiffOverlay>>,
) -> anyhow::Result<(Filters, Option<String>)> {
    let env = |k: &str| std::env::var_os(k);
    let mut filters = Filters::default();
    if let Some(overlay) = &overlay {
        filters
            .remove_on_drop
            .push(overlay.scripts.path().to_path_buf());
    }
    let launch_overlay = overlay.map(|launcher| LaunchOverlay {
        workspace_id: std::env::var("HERDR_WORKSPACE_ID").ok(),
        project: spec.project.clone(),
        launcher: launcher as Arc<dyn ScriptLauncher>,
    });
    let (policy, host_socket) =
        match activate::activation(mode, herdr_on_path, &spec.argv, home, &env, launch_overlay)
            .map_err(anyhow::Error::msg)?
        {
            Activation::Off => return Ok((filters, None)),
            Activation::Warn(warning) => return Ok((filters, Some(warning))),
            Activation::On {
                policy,
                host_socket,
            } => (policy, host_socket),
        };
    let sockets = session_sockets(&mut filters, spec, home)?;
    let listener = sockets.bind("herdr")?;
    let host_dir = sockets.host_dir().to_path_buf();
    let inside = sockets.inside_path("herdr");
    // Some herdr subcommands connect to the default path directly.
    spec.mounts.push(MountOp::Bind {
        source: host_dir.join("herdr.sock"),
        target: home.join(".config/herdr/herdr.sock"),
        writable: false,
    });
    spec.env.insert(
        "HERDR_SOCKET_PATH".into(),
        inside.to_string_lossy().into_owned(),
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
        owned: Default::default(),
    });
    filters.pending.push((listener, filter, log));
    Ok((filters, None))
}
