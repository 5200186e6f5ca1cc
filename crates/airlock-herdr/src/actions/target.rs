//! Which mapping a pane action acts on: the focused pane's own; else the focused workspace's only
//! one; else, across every workspace, the only mapping whose pane herdr no longer has (after a
//! herdr restart). Such an orphan is flagged, so reconnect and replace-sandbox give it a new pane.

use crate::app::App;
use crate::error::{PluginError, Result};
use crate::herdr::HerdrCli;
use crate::store::PaneMapping;

/// The mapping an action targets, and how it was found.
#[derive(Debug, Clone)]
pub struct Target {
    pub mapping: PaneMapping,
    /// The mapped pane no longer exists.
    pub orphan: bool,
    /// Found through the focused pane itself (so the context's `focused_pane_agent` is about it).
    pub focused: bool,
}

impl Target {
    pub fn pane(&self) -> &str {
        &self.mapping.pane_id
    }
}

fn listing(mappings: &[&PaneMapping]) -> String {
    mappings
        .iter()
        .map(|m| format!("{} ({})", m.pane_id, m.sandbox_name))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Whether `m` belongs to workspace `ws`: recorded so, or (a mapping saved without a workspace)
/// its pane id is one of that workspace's (`<ws>:p<n>`).
fn in_workspace(m: &PaneMapping, ws: &str) -> bool {
    m.workspace_id.as_deref() == Some(ws)
        || m.pane_id
            .strip_prefix(ws)
            .is_some_and(|rest| rest.starts_with(':'))
}

/// Resolves the target of a pane action. herdr is asked only when the focused pane has no mapping
/// of its own; an unreadable pane listing is an error, never "every pane is gone".
pub fn resolve(app: &App, herdr: &HerdrCli) -> Result<Target> {
    let focused = app.focused_pane()?;
    if let Some(pane) = &focused
        && let Some(m) = app.store.load(pane)?
    {
        return Ok(Target {
            mapping: m,
            orphan: false,
            focused: true,
        });
    }
    let shown = focused.as_deref().unwrap_or("(none)");
    let all = app.store.list()?;
    let workspace = app.workspace()?;
    if let Some(ws) = &workspace {
        let mut here: Vec<&PaneMapping> = all.iter().filter(|m| in_workspace(m, ws)).collect();
        if here.len() > 1 {
            return Err(PluginError::target(format!(
                "Pane {shown} has no sandbox and workspace {ws} has several: {}. Focus the pane you mean.",
                listing(&here)
            )));
        }
        if let Some(m) = here.pop() {
            let gone = herdr.get_pane(&m.pane_id)?.is_none();
            eprintln!(
                "pane {shown} has no sandbox; using the workspace's only mapping, pane {} ({}){}",
                m.pane_id,
                m.sandbox_name,
                if gone { ", whose pane is gone" } else { "" }
            );
            return Ok(Target {
                mapping: m.clone(),
                orphan: gone,
                focused: false,
            });
        }
    }
    if all.is_empty() {
        return Err(PluginError::target(match &focused {
            Some(p) => format!(
                "No sandbox is mapped to pane {p} or to another pane in this workspace. Run start-agent first."
            ),
            None => "No pane in the invocation context (HERDR_PLUGIN_CONTEXT_JSON / HERDR_PANE_ID), so there is no sandbox mapping to act on. Run the action from a herdr pane.".to_owned(),
        }));
    }
    let panes: std::collections::HashSet<String> =
        herdr.list_panes()?.into_iter().map(|p| p.pane_id).collect();
    let mut orphans: Vec<&PaneMapping> =
        all.iter().filter(|m| !panes.contains(&m.pane_id)).collect();
    match orphans.len() {
        1 => {
            let m = orphans.remove(0);
            eprintln!(
                "pane {} no longer exists; adopting its sandbox {}",
                m.pane_id, m.sandbox_name
            );
            Ok(Target {
                mapping: m.clone(),
                orphan: true,
                focused: false,
            })
        }
        0 => {
            let every: Vec<&PaneMapping> = all.iter().collect();
            let first_ws = all[0].pane_id.split(':').next().unwrap_or("");
            Err(PluginError::target(format!(
                "No sandbox is mapped in workspace {}. Existing mappings: {}. Focus that workspace, for example \"herdr workspace focus {first_ws}\", and try again.",
                workspace.as_deref().unwrap_or("(unknown)"),
                listing(&every)
            )))
        }
        _ => Err(PluginError::target(format!(
            "Several sandboxes lost their panes: {}. Run the action from a pane in the workspace of the one you mean, or forget the others (list-sandboxes shows them).",
            listing(&orphans)
        ))),
    }
}

/// Refuses while the context says an agent runs in the focused pane that is the target's own
/// (herdr's view at invocation time; `verb` completes "Exit it before you ...").
pub fn refuse_focused_agent(app: &App, target: &Target, verb: &str) -> Result<()> {
    if !target.focused {
        return Ok(());
    }
    match app.context()?.focused_pane_agent.filter(|a| !a.is_empty()) {
        Some(agent) => Err(PluginError::conflict(format!(
            "Pane {p} is still running agent \"{agent}\". Exit it before you {verb}. If nothing is running there, clear a stale report with \"herdr pane release-agent {p} --source {} --agent {agent}\".",
            app.plugin_id,
            p = target.pane(),
        ))),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mapping::sample;

    #[test]
    fn a_mapping_belongs_to_its_recorded_workspace_or_its_pane_ids() {
        let mut m = sample("wC:p2");
        assert!(in_workspace(&m, "w1"), "recorded");
        assert!(in_workspace(&m, "wC"), "by its pane id");
        assert!(
            !in_workspace(&m, "w"),
            "a prefix of the workspace is not it"
        );
        m.workspace_id = None;
        assert!(!in_workspace(&m, "w1"));
        assert!(in_workspace(&m, "wC"));
    }
}
