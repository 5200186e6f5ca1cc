//! The portal of a launch (`[tools.portal] notifications`, on by default): a per-session
//! `xdg-dbus-proxy` in front of the host's session bus that lets through only the notification
//! portal, its socket at `$XDG_RUNTIME_DIR/.dbus-proxy/bus` inside.

use std::path::Path;

use airlock_sandbox::{MountOp, SandboxSpec};
use airlock_sockets::portal::{INSIDE_SOCKET, PortalProxy, app_id, flatpak_info};
use airlock_tools::{HostView, Settings};

use super::{Filters, session_sockets};

/// Why the portal is not inside, when it is on but cannot be: `None` when it can.
pub fn missing(settings: &Settings, view: &HostView, project: &Path) -> Option<String> {
    let portal = settings.tool("portal");
    if !portal.enabled || !portal.flag("notifications", true) {
        return Some("notifications are off ([tools.portal] notifications = false)".into());
    }
    if view
        .var("DBUS_SESSION_BUS_ADDRESS")
        .is_none_or(str::is_empty)
    {
        return Some("the host has no session bus (DBUS_SESSION_BUS_ADDRESS is not set)".into());
    }
    if view.find_host_program("xdg-dbus-proxy", project).is_none() {
        return Some("xdg-dbus-proxy is not on PATH (apt-get install xdg-dbus-proxy)".into());
    }
    None
}

/// Starts the proxy for `spec` when the portal applies; a warning when it should and cannot.
pub fn plan_portal(
    filters: &mut Filters,
    spec: &mut SandboxSpec,
    settings: &Settings,
    view: &HostView,
    home: &Path,
) -> anyhow::Result<Option<String>> {
    if missing(settings, view, &spec.project).is_some() {
        // Off, or nothing to filter: quietly no bus inside, as before.
        return Ok(None);
    }
    let program = view
        .find_host_program("xdg-dbus-proxy", &spec.project)
        .expect("checked by missing");
    let bus = view
        .var("DBUS_SESSION_BUS_ADDRESS")
        .unwrap_or_default()
        .to_owned();
    let sockets = session_sockets(filters, spec, home)?;
    let socket = sockets.host_dir().join("dbus-proxy.sock");
    let info = sockets.host_dir().join("flatpak-info");
    std::fs::write(&info, flatpak_info(&app_id(&spec.name)))?;
    let proxy = match PortalProxy::start(&program, &bus, &socket) {
        Ok(proxy) => proxy,
        Err(e) => {
            return Ok(Some(format!(
                "the notification portal is not inside: xdg-dbus-proxy did not start ({e})"
            )));
        }
    };
    let uid = nix::unistd::getuid().as_raw();
    let runtime = Path::new("/run/user").join(uid.to_string());
    let inside = runtime.join(INSIDE_SOCKET);
    spec.mounts.push(MountOp::Bind {
        source: socket,
        target: inside.clone(),
        writable: false,
    });
    spec.mounts.push(MountOp::Bind {
        source: info,
        target: "/.flatpak-info".into(),
        writable: false,
    });
    spec.env.insert(
        "XDG_RUNTIME_DIR".into(),
        runtime.to_string_lossy().into_owned(),
    );
    spec.env.insert(
        "DBUS_SESSION_BUS_ADDRESS".into(),
        format!("unix:path={}", inside.display()),
    );
    filters.helpers.push(Box::new(proxy));
    Ok(None)
}
