//! open-port: http://localhost:<host port> for the focused sandbox's first published port, or for a
//! clicked `airlock://<sandbox>/<port>` link. Only sandboxes this plugin created, only ports sbx
//! reports as published: text printed by an agent cannot steer the browser anywhere else.

use std::time::{Duration, Instant};

use crate::app::{App, Outcome};
use crate::backend::SandboxBackend;
use crate::error::{PluginError, Result};
use crate::store::{BackendKind, PaneMapping};

/// Parses `airlock://<sandbox>/<port>`.
pub fn parse_link(url: &str) -> Result<(String, u16)> {
    let bad = || {
        PluginError::target(format!(
            "{url:?} is not an airlock://<sandbox>/<port> link."
        ))
    };
    let rest = url.strip_prefix("airlock://").ok_or_else(bad)?;
    let (name, port) = rest.trim_end_matches('/').split_once('/').ok_or_else(bad)?;
    let port: u16 = port.parse().ok().filter(|p| *p > 0).ok_or_else(bad)?;
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-')
    {
        return Err(bad());
    }
    Ok((name.to_owned(), port))
}

pub fn run(app: &App) -> Result<Outcome> {
    let config = app.config()?;
    let ctx = app.context()?;
    let clicked = ctx
        .clicked_url
        .clone()
        .or_else(|| std::env::var("HERDR_PLUGIN_CLICKED_URL").ok())
        .filter(|u| !u.is_empty());
    // A link names any sandbox a mapping still tracks (one it replaced included); text an agent
    // prints cannot name anything else.
    let (name, wanted, owner): (String, Option<u16>, PaneMapping) = match &clicked {
        Some(url) => {
            let (name, port) = parse_link(url)?;
            let owner = app
                .store
                .list()?
                .into_iter()
                .find(|m| m.tracked_names().contains(&name));
            let Some(owner) = owner else {
                return Err(PluginError::target(format!(
                    "{name} is not a sandbox this plugin created; the link is ignored."
                )));
            };
            (name, Some(port), owner)
        }
        None => {
            let m = super::target_mapping(app)?;
            (m.sandbox_name.clone(), None, m)
        }
    };
    let backend = app.backend_of(&config, &owner)?;
    let airlock = owner.backend == Some(BackendKind::Airlock);
    // airlock forwards ports into a running session; a stopped one has none.
    let airlock_hint = |port: &str| {
        format!(
            "{name} has no port {port} forwarded into a running session. While the agent runs, run \"airlock forward --sandbox <its sandbox in airlock sessions> {port}\", or add the port to publish in config.json"
        )
    };
    let sbx: &dyn SandboxBackend = backend.as_ref();
    let ports = sbx.ports(&name)?;
    let port = match wanted {
        Some(w) => ports.iter().find(|p| p.sandbox_port == w).copied().ok_or_else(|| {
            if airlock {
                return PluginError::target(format!("{}.", airlock_hint(&w.to_string())));
            }
            PluginError::target(format!("Port {w} is not published by {}; publish it with sbx ports {} --publish {w}.", name, name))
        })?,
        None => ports.first().copied().ok_or_else(|| {
            if airlock {
                return PluginError::target(format!("{}.", airlock_hint("PORT")));
            }
            PluginError::target(format!("{} publishes no ports. Add one to publish in config.json or run sbx ports {} --publish PORT.", name, name))
        })?,
    };
    let host = port.host_port.ok_or_else(|| {
        PluginError::new(
            crate::error::ErrorKind::Unknown,
            format!(
                "sbx did not report a host port for {name}:{}; run \"sbx ports {name}\" to see the mapping.",
                port.sandbox_port
            ),
        )
    })?;
    let url = format!("http://localhost:{host}");
    let opener = std::env::var("HERDR_SBX_OPENER")
        .ok()
        .filter(|o| !o.is_empty())
        .unwrap_or_else(|| {
            if cfg!(target_os = "macos") {
                "open"
            } else {
                "xdg-open"
            }
            .to_owned()
        });
    let opened = open_detached(&opener, &url);
    Ok(Outcome::default()
        .field("sandboxName", name.clone())
        .field("sandboxPort", port.sandbox_port)
        .field("hostPort", host)
        .field("url", url.clone())
        .field("opened", opened)
        .field("opener", opener)
        .line(format!("{url} ({name}:{})", port.sandbox_port)))
}

/// Starts the opener detached. One that fails within two seconds did not open the page; one still
/// running then (a browser in the foreground) counts as open and is not waited for.
fn open_detached(opener: &str, url: &str) -> bool {
    use std::os::unix::process::CommandExt as _;
    let child = std::process::Command::new(opener)
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .process_group(0)
        .spawn();
    let Ok(mut child) = child else { return false };
    let deadline = Instant::now() + Duration::from_secs(2);
    while Instant::now() < deadline {
        match child.try_wait() {
            Ok(Some(status)) => return status.success(),
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(_) => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_are_strict() {
        assert_eq!(
            parse_link("airlock://herdr-x-1/3000").expect("ok"),
            ("herdr-x-1".to_owned(), 3000)
        );
        for bad in [
            "http://x/1",
            "airlock://x",
            "airlock://x/0",
            "airlock://a b/1",
            "airlock://x/70000",
            "airlock://../1/2",
        ] {
            assert!(parse_link(bad).is_err(), "{bad}");
        }
    }
}
