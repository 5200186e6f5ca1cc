//! info: the mapping, the resolved agent command, live sandbox status and published ports.

use serde_json::json;

use crate::app::{App, Outcome};
use crate::backend::SandboxBackend;
use crate::error::Result;
use crate::naming::sandbox_remote;

use super::list_sandboxes::error_json;

pub fn run(app: &App) -> Result<Outcome> {
    let config = app.config()?;
    let m = super::target_mapping(app)?;
    let agent = config.agent(&m.agent_kind)?;
    let backend = app.backend_of(&config, &m)?;
    let sbx: &dyn SandboxBackend = backend.as_ref();
    // The listing and the port query are independent sbx calls: run them side by side, and keep
    // the ports only when the sandbox is listed.
    let (found, ports) = std::thread::scope(|scope| {
        let ports = scope.spawn(|| sbx.ports(&m.sandbox_name));
        let found = sbx.find(&m.sandbox_name);
        (found, ports.join().expect("the port query does not panic"))
    });
    let (sandbox, sandbox_error) = match found {
        Ok(s) => (s, None),
        Err(e) => (None, Some(e)),
    };
    let (ports, ports_error) = match (&sandbox, ports) {
        (Some(_), Ok(p)) => (p, None),
        (Some(_), Err(e)) => (Vec::new(), Some(e)),
        (None, _) => (Vec::new(), None),
    };
    // Each port with the URL open-port would open and the link the overlay prints.
    let ports: Vec<serde_json::Value> = ports
        .iter()
        .map(|p| {
            json!({
                "hostPort": p.host_port,
                "sandboxPort": p.sandbox_port,
                "url": p.host_port.map(|h| format!("http://localhost:{h}")),
                "link": format!("airlock://{}/{}", m.sandbox_name, p.sandbox_port),
            })
        })
        .collect();
    let mut agent_json = serde_json::to_value(&agent).expect("serialisable");
    agent_json["launchArgv"] = json!(agent.command);
    let mut out = Outcome::default()
        .field("paneId", m.pane_id.clone())
        .field("mapping", super::mapping_json(&m))
        .field("agent", agent_json)
        .field("gitRemote", sandbox_remote(&m.sandbox_name))
        .field(
            "sandbox",
            sandbox
                .as_ref()
                .map(|s| json!({"name": s.name, "status": s.status, "agent": s.agent})),
        )
        .field("sandboxError", sandbox_error.as_ref().map(error_json))
        .field("ports", ports.clone())
        .field("portsError", ports_error.as_ref().map(error_json));
    out = out
        .line(format!(
            "pane {} -> {} ({}, {} mode, {})",
            m.pane_id,
            m.sandbox_name,
            m.agent_kind,
            m.workspace_mode.as_str(),
            m.lifecycle_state.as_str()
        ))
        .line(format!("command: {}", agent.command.join(" ")))
        .line(format!(
            "status: {}",
            sandbox
                .and_then(|s| s.status)
                .or(sandbox_error.map(|e| e.message))
                .unwrap_or_else(|| "not listed by sbx".to_owned())
        ));
    for p in &ports {
        out = out.line(format!(
            "port {}: {} ({})",
            p["sandboxPort"],
            p["link"].as_str().unwrap_or(""),
            p["url"].as_str().unwrap_or("no host port")
        ));
    }
    Ok(out)
}
