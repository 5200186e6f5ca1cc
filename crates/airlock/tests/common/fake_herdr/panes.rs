//! The `pane.*` and `layout.*` methods. Panes sit side by side in their tab, left to right; moves,
//! swaps and resizes change nothing and say so.

use serde_json::{Map, Value, json};

use super::answers::{Answer, Failure, ok, workspace_not_found};
use super::methods::{
    bool_param, env_param, read, str_param, workspace_or_active, workspace_param,
};
use super::state::Session;

/// The methods whose `pane_id` may be left out for the focused pane.
const FOCUSED_BY_DEFAULT: &[&str] = &[
    "pane.zoom",
    "pane.layout",
    "pane.process_info",
    "pane.neighbor",
    "pane.edges",
    "pane.focus_direction",
    "pane.resize",
];

pub(super) fn panes(s: &mut Session, method: &str, p: &Map<String, Value>) -> Answer {
    match method {
        "pane.list" => {
            let w = workspace_param(s, p)?;
            let list: Vec<Value> = s
                .panes_in(w)
                .into_iter()
                .map(|at| s.pane_info(at))
                .collect();
            return Ok(json!({"type": "pane_list", "panes": list}));
        }
        "pane.current" => {
            let at = s.resolve(str_param(p, "caller_pane_id"))?;
            return Ok(json!({"type": "pane_current", "pane": s.pane_info(at)}));
        }
        "pane.split" => {
            env_param(p)?;
            let at = s.resolve(str_param(p, "target_pane_id"))?;
            let cwd = str_param(p, "cwd")
                .map(str::to_owned)
                .or_else(|| s.pane(at).cwd.clone());
            let new = s.split(at, cwd, bool_param(p, "focus"));
            return Ok(json!({"type": "pane_info", "pane": s.pane_info(new)}));
        }
        "pane.swap" => {
            let at = s.resolve(str_param(p, "source_pane_id").or(str_param(p, "pane_id")))?;
            let target = str_param(p, "target_pane_id");
            if let Some(t) = target {
                s.find_pane(t)?;
            }
            return Ok(json!({
                "type": "pane_swap",
                "swap": {
                    "changed": false,
                    "reason": "no_neighbor",
                    "source_pane_id": s.pane(at).id,
                    "target_pane_id": target,
                    "focused_pane_id": s.focused_in_tab(at),
                    "layout": s.layout((at.0, at.1)),
                },
            }));
        }
        "layout.export" | "layout.set_split_ratio" => {
            let tab = match (str_param(p, "tab_id"), str_param(p, "pane_id")) {
                (Some(id), _) => s.find_tab(id)?,
                (None, pane) => {
                    let at = s.resolve(pane)?;
                    (at.0, at.1)
                }
            };
            let kind = if method == "layout.export" {
                "layout_export"
            } else {
                "layout_split_ratio_set"
            };
            return Ok(json!({"type": kind, "layout": s.description(tab)}));
        }
        "layout.apply" => {
            let w = workspace_or_active(s, p, || workspace_not_found("(active)"))?;
            if let Some(id) = str_param(p, "tab_id") {
                s.find_tab(id)?;
            }
            let leaves = count_leaves(&p["root"]);
            let t = s.new_tab(w, str_param(p, "tab_label"), None, bool_param(p, "focus"));
            for _ in 1..leaves {
                s.split((w, t, 0), None, false);
            }
            return Ok(json!({"type": "layout_apply", "layout": s.description((w, t))}));
        }
        _ => {}
    }

    let at = if FOCUSED_BY_DEFAULT.contains(&method) {
        s.resolve(str_param(p, "pane_id"))?
    } else {
        s.find_pane(str_param(p, "pane_id").unwrap_or_default())?
    };
    let tab = (at.0, at.1);
    let pane_id = s.pane(at).id.clone();
    match method {
        "pane.get" => Ok(json!({"type": "pane_info", "pane": s.pane_info(at)})),
        "pane.focus" => {
            s.focus_pane(at);
            Ok(json!({"type": "pane_info", "pane": s.pane_info(at)}))
        }
        "pane.read" => read(s, at, p),
        "pane.rename" => {
            s.pane_mut(at).label = str_param(p, "label").map(str::to_owned);
            ok()
        }
        "pane.close" => {
            s.close_pane(at);
            ok()
        }
        "pane.report_agent" | "pane.report_agent_session" => {
            let agent = str_param(p, "agent").unwrap_or_default().trim().to_owned();
            if agent.is_empty() {
                return Err(Failure::new(
                    "invalid_agent",
                    "agent label must not be empty",
                ));
            }
            let source = str_param(p, "source").unwrap_or_default().to_owned();
            let session = str_param(p, "agent_session_id")
                .map(|v| ("id", v))
                .or_else(|| str_param(p, "agent_session_path").map(|v| ("path", v)))
                .map(
                    |(kind, v)| json!({"source": source, "agent": agent, "kind": kind, "value": v}),
                );
            let pane = s.pane_mut(at);
            if method == "pane.report_agent" {
                pane.status = str_param(p, "state").unwrap_or("unknown").to_owned();
                pane.state_change_seq += 1;
            }
            pane.agent = Some(agent);
            if session.is_some() {
                pane.session = session;
            }
            pane.revision += 1;
            ok()
        }
        "pane.release_agent" => {
            let pane = s.pane_mut(at);
            if pane.agent.as_deref() == str_param(p, "agent") {
                pane.agent = None;
                pane.session = None;
                pane.status = "unknown".into();
                pane.revision += 1;
            }
            ok()
        }
        "pane.report_metadata" => {
            let pane = s.pane_mut(at);
            if bool_param(p, "clear_title") {
                pane.title = None;
            }
            if let Some(title) = str_param(p, "title") {
                pane.title = Some(title.to_owned());
            }
            ok()
        }
        "pane.graphics.set" => {
            s.graphics_sequence += 1;
            Ok(json!({
                "type": "pane_graphics_frame_ack",
                "sequence": s.graphics_sequence,
                "revision": s.graphics_sequence,
            }))
        }
        "pane.graphics.info" => Ok(json!({
            "type": "pane_graphics_info",
            "cell_width_px": 9,
            "cell_height_px": 18,
            "pane_visible": s.is_focused_tab(tab),
            "file_frame_formats": [],
            "file_frame_damage": false,
            "file_frame_direct_max_bytes": null,
            "file_frame_directory": null,
            "file_frame_max_bytes": null,
            "file_frame_transport": null,
            "max_layers_per_pane": 0,
            "pixel_mouse": false,
        })),
        "pane.zoom" => {
            let single = s.tab(tab).panes.len() == 1;
            let was = s.tab(tab).zoomed;
            let now = match str_param(p, "mode").unwrap_or("toggle") {
                "on" => true,
                "off" => false,
                _ => !was,
            };
            let now = now && !single;
            s.tab_mut(tab).zoomed = now;
            let reason = if single {
                json!("single_pane")
            } else if was == now {
                json!(if now {
                    "already_zoomed"
                } else {
                    "already_unzoomed"
                })
            } else {
                Value::Null
            };
            Ok(json!({
                "type": "pane_zoom",
                "zoom": {
                    "changed": was != now,
                    "zoom_changed": was != now,
                    "focus_changed": false,
                    "pane_id": pane_id,
                    "focused_pane_id": s.focused_in_tab(at),
                    "zoomed": now,
                    "reason": reason,
                    "layout": s.layout(tab),
                },
            }))
        }
        "pane.layout" => Ok(json!({"type": "pane_layout", "layout": s.layout(tab)})),
        "pane.process_info" => Ok(json!({
            "type": "pane_process_info",
            "process_info": {
                "pane_id": pane_id,
                "shell_pid": null,
                "tty": null,
                "foreground_process_group_id": null,
                "foreground_processes": [],
            },
        })),
        "pane.neighbor" => Ok(json!({
            "type": "pane_neighbor",
            "neighbor": {
                "pane_id": pane_id,
                "direction": str_param(p, "direction"),
                "neighbor_pane_id": s.neighbor(at, str_param(p, "direction").unwrap_or_default()),
                "layout": s.layout(tab),
            },
        })),
        "pane.edges" => {
            let count = s.tab(tab).panes.len();
            Ok(json!({
                "type": "pane_edges",
                "edges": {
                    "pane_id": pane_id,
                    "left": at.2 == 0,
                    "right": at.2 + 1 == count,
                    "up": true,
                    "down": true,
                    "layout": s.layout(tab),
                },
            }))
        }
        "pane.focus_direction" => {
            let neighbor = s.neighbor(at, str_param(p, "direction").unwrap_or_default());
            let reason = if neighbor.is_none() {
                json!("no_neighbor")
            } else {
                Value::Null
            };
            if let Some(n) = neighbor.as_deref().and_then(|n| s.pane_at(n)) {
                s.focus_pane(n);
            }
            Ok(json!({
                "type": "pane_focus_direction",
                "focus": {
                    "changed": neighbor.is_some(),
                    "source_pane_id": pane_id,
                    "focused_pane_id": neighbor.clone().unwrap_or_else(|| pane_id.clone()),
                    "reason": reason,
                    "layout": s.layout(tab),
                },
            }))
        }
        "pane.resize" => Ok(json!({
            "type": "pane_resize",
            "resize": {
                "changed": false,
                "pane_id": pane_id,
                "focused_pane_id": s.focused_in_tab(at),
                "reason": "unchanged",
                "layout": s.layout(tab),
            },
        })),
        "pane.move" => {
            let info = s.pane_info(at);
            Ok(json!({
                "type": "pane_move",
                "move_result": {
                    "changed": false,
                    "reason": "same_tab",
                    "previous_pane_id": pane_id,
                    "previous_workspace_id": s.workspaces[at.0].id,
                    "previous_tab_id": s.tab(tab).id,
                    "pane": info,
                    "target_layout": s.layout(tab),
                    "source_layout": null,
                    "focused_pane_id": s.focused_in_tab(at),
                    "created_tab": null,
                    "created_workspace": null,
                    "closed_tab_id": null,
                    "closed_workspace_id": null,
                },
            }))
        }
        // pane.send_input, pane.send_text, pane.send_keys, pane.input.set, pane.graphics.clear,
        // pane.clear_agent_authority: herdr acts on the pane and answers ok
        _ => ok(),
    }
}

fn count_leaves(node: &Value) -> usize {
    if node.get("type").and_then(Value::as_str) == Some("split") {
        count_leaves(&node["first"]) + count_leaves(&node["second"])
    } else {
        1
    }
}
