//! The socket filters of one launch: planned before the sandbox is cloned (their sockets bound in
//! the session's own directory, that directory and the paths tools look for added to the spec),
//! served once it is (threads may start only then).

use std::os::unix::net::UnixListener;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use airlock_sandbox::{MountOp, SandboxSpec};
use airlock_sockets::{DecisionLog, Filter, SessionSockets};

mod docker;
mod herdr;
mod kitty;
mod portal;
mod zellij;

pub use docker::{check_notes as docker_check_notes, plan_docker};
pub use herdr::{plan_herdr, record_pane};
pub use kitty::plan_kitty;
pub use portal::{missing as portal_missing, plan_portal};
pub use zellij::plan_zellij;

/// How long a client of a filter may take to send its request, and to read the answer.
const CLIENT_DEADLINE: Duration = Duration::from_secs(5);

/// The filters planned for a launch; the session's socket directory and overlay scripts go
/// when this is dropped (the filters' threads hold their policies until the process ends).
#[derive(Default)]
pub struct Filters {
    sockets: Option<SessionSockets>,
    pending: Vec<(UnixListener, Arc<dyn Filter>, Arc<DecisionLog>)>,
    remove_on_drop: Vec<std::path::PathBuf>,
    /// Started with the sandbox, stopped when this is dropped (the portal's xdg-dbus-proxy).
    helpers: Vec<Box<dyn std::any::Any>>,
}

impl Drop for Filters {
    fn drop(&mut self) {
        for dir in &self.remove_on_drop {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
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

/// Whether revdiff is a tool of this launch (enabled, on PATH): it declares `launch_overlay`.
fn revdiff_declared(settings: &airlock_tools::Settings, view: &airlock_tools::HostView) -> bool {
    settings.tool("revdiff").enabled && view.find_binary("revdiff").is_some()
}

/// The kitty capabilities of a launch: the enabled tools' (revdiff: `launch_overlay`) and
/// `[tools.kitty] extra_capabilities` (checked by the config layer: never `launch_*`).
pub fn kitty_capabilities(
    settings: &airlock_tools::Settings,
    view: &airlock_tools::HostView,
) -> std::collections::BTreeSet<airlock_sockets::kitty::Capability> {
    use airlock_sockets::kitty::Capability;
    let mut capabilities: std::collections::BTreeSet<Capability> = settings
        .tool("kitty")
        .list("extra_capabilities")
        .iter()
        .filter_map(|name| Capability::parse(name))
        .collect();
    if revdiff_declared(settings, view) {
        capabilities.insert(Capability::LaunchOverlay);
    }
    capabilities
}

/// The socket filters of a launch, and revdiff's shared temp directory and overlay, which
/// two of them (kitty, herdr) run its launches as.
pub fn plan(
    spec: &mut airlock_sandbox::SandboxSpec,
    settings: &airlock_tools::Settings,
    view: &airlock_tools::HostView,
    home: &Path,
    herdr_on_path: bool,
) -> anyhow::Result<(Filters, Vec<String>)> {
    use airlock_sockets::kitty::activate::Request;
    let revdiff = revdiff_declared(settings, view);
    let overlay = if revdiff {
        let shared = crate::commands::overlay::shared_tmp(spec, view)?;
        crate::commands::overlay::revdiff_overlay(spec, view, &shared)?
    } else {
        None
    };
    let herdr = settings.tool("herdr");
    let (mut filters, herdr_warning) = plan_herdr(
        spec,
        herdr.choice("mode", "auto"),
        herdr_on_path,
        home,
        overlay.clone(),
    )?;
    let mut warnings: Vec<String> = herdr_warning.into_iter().collect();
    let kitty = settings.tool("kitty");
    let capabilities = kitty_capabilities(settings, view);
    let kitty_on_path = std::env::var_os("KITTY_LISTEN_ON").is_some_and(|v| !v.is_empty())
        && view.find_binary("kitty").is_some();
    let request = Request {
        mode: kitty.choice("mode", "auto"),
        kitty_on_path,
        capabilities,
        overlay,
    };
    if let Some(warning) = plan_kitty(&mut filters, spec, request, home)? {
        warnings.push(warning);
    }
    warnings.extend(plan_docker(
        &mut filters,
        spec,
        &settings.tool("docker"),
        home,
    )?);
    warnings.extend(plan_portal(&mut filters, spec, settings, view, home)?);
    let env = |k: &str| std::env::var(k).ok();
    let zellij_on_path =
        std::env::var_os("ZELLIJ").is_some() && view.find_binary("zellij").is_some();
    let uid = nix::unistd::getuid().as_raw();
    warnings.extend(plan_zellij(
        spec,
        settings.tool("zellij").enabled,
        zellij_on_path,
        &env,
        uid,
    ));
    Ok((filters, warnings))
}

/// The session's socket directory, made (and bound inside) by the first filter that needs it.
pub(super) fn session_sockets<'a>(
    filters: &'a mut Filters,
    spec: &mut SandboxSpec,
    home: &Path,
) -> anyhow::Result<&'a SessionSockets> {
    if filters.sockets.is_none() {
        let sockets = SessionSockets::create(&spec.state_root, home)?;
        spec.mounts.push(MountOp::Bind {
            source: sockets.host_dir().to_path_buf(),
            target: sockets.inside_dir().to_path_buf(),
            writable: false,
        });
        filters.sockets = Some(sockets);
    }
    Ok(filters.sockets.as_ref().expect("just made"))
}
