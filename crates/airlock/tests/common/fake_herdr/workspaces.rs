//! The `workspace.*`, `worktree.*` and `tab.*` methods.

use std::path::Path;

use serde_json::{Map, Value, json};

use super::START_CWD;
use super::answers::{Answer, Failure, ok};
use super::methods::{
    bool_param, env_param, str_param, u64_param, workspace_or_active, workspace_param,
};
use super::state::Session;

pub(super) fn workspaces(s: &mut Session, method: &str, p: &Map<String, Value>) -> Answer {
    let wanted = str_param(p, "workspace_id");
    let find = |s: &Session| s.find_workspace(wanted.unwrap_or_default());
    match method {
        "workspace.create" => {
            env_param(p)?;
            let cwd = str_param(p, "cwd").map(str::to_owned);
            let w = s.new_workspace(str_param(p, "label"), cwd, bool_param(p, "focus"));
            Ok(json!({
                "type": "workspace_created",
                "workspace": s.workspace_info(w),
                "tab": s.tab_info((w, 0)),
                "root_pane": s.pane_info((w, 0, 0)),
            }))
        }
        "workspace.list" => {
            let list: Vec<Value> = (0..s.workspaces.len())
                .map(|w| s.workspace_info(w))
                .collect();
            Ok(json!({"type": "workspace_list", "workspaces": list}))
        }
        "workspace.get" | "workspace.focus" | "workspace.rename" => {
            let w = find(s)?;
            match method {
                "workspace.focus" => s.active = s.workspaces[w].id.clone(),
                "workspace.rename" => {
                    s.workspaces[w].label = str_param(p, "label").unwrap_or_default().to_owned()
                }
                _ => {} // workspace.get
            }
            Ok(json!({"type": "workspace_info", "workspace": s.workspace_info(w)}))
        }
        "workspace.move" => {
            let w = find(s)?;
            move_item(&mut s.workspaces, w, p);
            ok()
        }
        "workspace.move_block" => {
            for id in p["workspace_ids"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
            {
                s.find_workspace(id)?;
            }
            ok()
        }
        "workspace.report_metadata" => {
            let w = find(s)?;
            for (key, value) in p["tokens"].as_object().into_iter().flatten() {
                match value {
                    Value::Null => s.workspaces[w].tokens.remove(key),
                    v => s.workspaces[w].tokens.insert(key.clone(), v.clone()),
                };
            }
            ok()
        }
        "workspace.close" => {
            let w = find(s)?;
            s.close_workspace(w);
            ok()
        }
        "worktree.list" => {
            workspace_param(s, p)?;
            let root = str_param(p, "cwd").unwrap_or(START_CWD);
            Ok(json!({
                "type": "worktree_list",
                "source": {
                    "repo_key": root,
                    "repo_name": Path::new(root).file_name().and_then(|n| n.to_str()).unwrap_or("repo"),
                    "repo_root": root,
                    "source_checkout_path": root,
                    "source_workspace_id": wanted,
                },
                "worktrees": [],
            }))
        }
        "worktree.remove" => {
            let w = find(s)?;
            let path = s.workspaces[w].tabs[0].panes[0].cwd.clone();
            let id = s.workspaces[w].id.clone();
            s.close_workspace(w);
            Ok(json!({
                "type": "worktree_removed",
                "workspace_id": id,
                "path": path.unwrap_or_else(|| START_CWD.into()),
                "forced": bool_param(p, "force"),
            }))
        }
        // worktree.create / worktree.open
        _ => Err(Failure::new(
            "internal_error",
            "fake herdr: git worktrees are not modelled",
        )),
    }
}

pub(super) fn tabs(s: &mut Session, method: &str, p: &Map<String, Value>) -> Answer {
    if method == "tab.create" {
        env_param(p)?;
        let w = workspace_or_active(s, p, || {
            Failure::new("workspace_not_found", "no active workspace")
        })?;
        let cwd = str_param(p, "cwd").map(str::to_owned);
        let t = s.new_tab(w, str_param(p, "label"), cwd, bool_param(p, "focus"));
        return Ok(json!({
            "type": "tab_created",
            "tab": s.tab_info((w, t)),
            "root_pane": s.pane_info((w, t, 0)),
        }));
    }
    if method == "tab.list" {
        let w = workspace_param(s, p)?;
        let list: Vec<Value> = s.tabs_in(w).into_iter().map(|at| s.tab_info(at)).collect();
        return Ok(json!({"type": "tab_list", "tabs": list}));
    }
    let (w, t) = s.find_tab(str_param(p, "tab_id").unwrap_or_default())?;
    match method {
        "tab.focus" => s.focus_tab(w, t),
        "tab.rename" => s.tab_mut((w, t)).label = str_param(p, "label").unwrap_or_default().into(),
        "tab.move" => {
            move_item(&mut s.workspaces[w].tabs, t, p);
            return ok();
        }
        "tab.close" => {
            s.close_tab(w, t);
            return ok();
        }
        _ => {} // tab.get
    }
    Ok(json!({"type": "tab_info", "tab": s.tab_info((w, t))}))
}

/// `workspace.move` and `tab.move`: the item at `from` goes to `insert_index`, at most the last
/// place.
fn move_item<T>(items: &mut Vec<T>, from: usize, p: &Map<String, Value>) {
    let to = (u64_param(p, "insert_index").unwrap_or(0) as usize).min(items.len() - 1);
    let moved = items.remove(from);
    items.insert(to, moved);
}
