//! info: the mapping, the resolved agent command, live sandbox status and published ports.

use serde_json::json;

use crate::app::{App, Outcome};
use crate::backend::SandboxBackend;
use crate::error::Result;
use crate::naming::sandbox_remote;

pub fn run(app: &App) -> Result<Outcome> {
    let config = app.config()?;
    let m = super::target_mapping(app)?;
    let agent = config.agent(&m.agent_kind)?;
    let backend = app.backend(&config)?;
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
        Err(e) => (None, Some(e.message)),
    };
    let (ports, ports_error) = match (&sandbox, ports) {
        (Some(_), Ok(p)) => (p, None),
        (Some(_), Err(e)) => (Vec::new(), Some(e.message)),
        (None, _) => (Vec::new(), None),
    };
    let links: Vec<String> = ports
        .iter()
        .map(|p| format!("airlock://{}/{}", m.sandbox_name, p.sandbox_port))
        .collect();
    let mut out = Outcome::default()
        .field("paneId", m.pane_id.clone())
        .field("mapping", super::mapping_json(&m))
        .field("agent", serde_json::to_value(&agent).expect("serialisable"))
        .field("gitRemote", sandbox_remote(&m.sandbox_name))
        .field(
            "sandbox",
            sandbox
                .as_ref()
                .map(|s| json!({"name": s.name, "status": s.status, "agent": s.agent})),
        )
        .field("sandboxError", sandbox_error.clone())
        .field("ports", serde_json::to_value(&ports).expect("serialisable"))
        .field("portsError", ports_error);
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
                .or(sandbox_error)
                .unwrap_or_else(|| "not listed by sbx".to_owned())
        ));
    for l in links {
        out = out.line(l);
    }
    Ok(out)
}
