//! Parity with the original plugin (issue #16), deletions: prune-mappings' guards with their
//! `kept` reasons (item 2), replace-sandbox validating before it deletes and taking the
//! configured agent (item 3), deletion history kept whole and the worktree hook's exit codes
//! (item 7).

use serde_json::{Value, json};

use crate::check;
use crate::world::{Outcome, World};

const PRUNE_CAME_BACK: &str = "pane came back while the confirmation was open; nothing deleted";
const PRUNE_CHANGED: &str = "mapping changed while pruning; run prune-mappings again";
const PRUNE_OWNED: &str = "a bridge or a deletion still owns this mapping";
const PRUNE_ORPHAN: &str = "sandbox still exists: reconnect adopts it, forget-mapping deletes it";
const PRUNE_PANE_OPEN: &str = "pane still open: run forget-mapping from that pane";

fn prune_line(pruned: Value, kept: Value, deleted: Value, confirmed: Value) -> Value {
    json!({"schemaVersion": 1, "plugin": "airlock.sandbox", "action": "prune-mappings", "ok": true,
        "pruned": pruned, "kept": kept, "deleted": deleted, "failures": [], "orphansConfirmed": confirmed})
}

fn prune(w: &World, popup: &str) -> crate::world::Run {
    w.action_with(
        "prune-mappings",
        Some("{}"),
        &[("FAKE_HERDR_POPUP_INPUT", popup)],
    )
}

/// Item 2: an orphan whose pane came back while the DELETE popup was open is not deleted.
pub fn prune_pane_came_back_during_the_popup() -> Outcome {
    let w = World::new();
    let repo = w.git_repo("repo");
    let (pane, name) = w.start_agent(&repo)?;
    let saved = w.herdr_state(|s| s["panes"][&pane].clone());
    w.remove_pane(&pane);
    w.herdr_state(|s| s["restore_on_popup"] = json!({ pane.clone(): saved }));
    let run = prune(&w, "DELETE\n");
    check!(
        run.result
            == prune_line(
                json!([]),
                json!([{"paneId": pane, "sandboxName": name, "reason": PRUNE_CAME_BACK}]),
                json!([]),
                json!(true)
            ),
        "{}",
        run.show()
    );
    check!(
        w.sandbox(&name).is_some() && w.mapping(&pane).is_some(),
        "nothing deleted"
    );
    // Declined: kept as an orphan; a live pane whose sandbox is gone is kept as well.
    w.remove_pane(&pane);
    let (open, open_name) = w.start_agent(&repo)?;
    w.sbx_state(|s| s["sandboxes"].as_object_mut().map(|m| m.remove(&open_name)));
    let run = prune(&w, "keep\n");
    let mut kept = vec![
        json!({"paneId": pane, "sandboxName": name, "reason": PRUNE_ORPHAN}),
        json!({"paneId": open, "sandboxName": open_name, "reason": PRUNE_PANE_OPEN}),
    ];
    kept.sort_by_key(|k| k["paneId"].as_str().unwrap_or("").to_owned());
    let mut got = run.result["kept"].as_array().cloned().unwrap_or_default();
    got.sort_by_key(|k| k["paneId"].as_str().unwrap_or("").to_owned());
    check!(
        run.ok() && got == kept && run.result["orphansConfirmed"] == false,
        "{}",
        run.show()
    );
    Ok(())
}

/// Item 2: a mapping rewritten while prune-mappings lists sandboxes is kept, never dropped on
/// the stale reading.
pub fn prune_mapping_rewritten_during_the_listing() -> Outcome {
    let mut w = World::new();
    let repo = w.git_repo("repo");
    let (pane, name) = w.start_agent(&repo)?;
    w.remove_pane(&pane);
    w.sbx_state(|s| s["sandboxes"].as_object_mut().map(|m| m.remove(&name)));
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    w.set(
        "FAKE_SBX_ON_LS",
        &format!(
            "'{}' touch-mapping '{}' '{}'",
            exe.display(),
            w.state_dir.display(),
            pane
        ),
    );
    let run = prune(&w, "DELETE\n");
    check!(
        run.result
            == prune_line(
                json!([]),
                json!([{"paneId": pane, "sandboxName": name, "reason": PRUNE_CHANGED}]),
                json!([]),
                Value::Null
            ),
        "{}",
        run.show()
    );
    check!(w.mapping(&pane).is_some(), "the newer mapping survived");
    w.set("FAKE_SBX_ON_LS", "");
    let run = prune(&w, "DELETE\n");
    check!(
        run.result
            == prune_line(
                json!([{"paneId": pane, "sandboxName": name}]),
                json!([]),
                json!([]),
                Value::Null
            ),
        "pruned once stable: {}",
        run.show()
    );
    Ok(())
}

/// Item 2: a mapping whose bridge is still creating a sandbox sbx does not list yet is kept.
pub fn prune_keeps_a_bridge_in_creating() -> Outcome {
    let mut w = World::new();
    let repo = w.git_repo("repo");
    w.set("FAKE_SBX_DELAY_MS", "create=4000");
    let run = w.action("start-agent", w.ctx(&repo));
    let pane = run.text("paneId");
    let name = run.text("sandboxName");
    w.wait_for("the bridge to be creating", || {
        w.mapping(&pane)
            .is_some_and(|m| m["lifecycleState"] == "creating" && m["bridge"]["pid"].is_u64())
    })?;
    w.remove_pane(&pane);
    w.set("FAKE_SBX_DELAY_MS", "");
    let run = prune(&w, "DELETE\n");
    check!(
        run.result
            == prune_line(
                json!([]),
                json!([{"paneId": pane, "sandboxName": name, "reason": PRUNE_OWNED}]),
                json!([]),
                Value::Null
            ),
        "{}",
        run.show()
    );
    w.wait_for_bridge_exit(&pane)?;
    check!(
        w.sandbox(&name).is_some() && w.mapping(&pane).is_some(),
        "the sandbox stays tracked"
    );
    Ok(())
}

/// Item 3: replace-sandbox checks the replacement before deleting: a removed worktree is
/// `target` with no `sbx rm` and no popup.
pub fn replace_validates_before_it_deletes() -> Outcome {
    let w = World::new();
    let repo = w.git_repo("repo");
    let (pane, name) = w.start_agent(&repo)?;
    std::fs::remove_dir_all(&repo).map_err(|e| e.to_string())?;
    let run = w.confirmed_action("replace-sandbox", &pane);
    check!(
        !run.ok()
            && run.kind() == "target"
            && run.result["message"]
                .as_str()
                .is_some_and(|m| m.contains("nothing was deleted")),
        "{}",
        run.show()
    );
    check!(
        !w.argv_log("FAKE_SBX_LOG").iter().any(|a| a[0] == "rm"),
        "no sbx rm"
    );
    check!(
        w.herdr_state(|s| s["popups"].as_array().map_or(0, Vec::len)) == 0,
        "no popup"
    );
    check!(
        w.sandbox(&name).is_some()
            && w.mapping(&pane)
                .is_some_and(|m| m["sandboxName"] == name.as_str()),
        "untouched"
    );
    Ok(())
}

/// Items 3 and 7: the replacement uses the configured agent kind, and every round's sandboxes
/// stay in the mapping's history.
pub fn replace_uses_the_configured_agent_and_keeps_history() -> Outcome {
    let w = World::new();
    let repo = w.git_repo("repo");
    let (pane, first) = w.start_agent(&repo)?;
    w.write_config(json!({"agentKind": "codex"}));
    let run = w.confirmed_action("replace-sandbox", &pane);
    let second = run.text("sandboxName");
    check!(
        run.result
            == json!({"schemaVersion": 1, "plugin": "airlock.sandbox", "action": "replace-sandbox", "ok": true,
                "paneId": pane, "sandboxName": second, "agentKind": "codex", "deleted": [first],
                "alreadyMissing": [], "adoptedFrom": null, "movedTo": null}),
        "{}",
        run.show()
    );
    check!(second.starts_with("herdr-codex-"), "{second}");
    w.wait_for_bridge_exit(&pane)?;
    let m = w.mapping(&pane).ok_or("mapping")?;
    check!(
        m["agentKind"] == "codex"
            && m["sbxAgent"] == "codex"
            && m["replacesSandboxNames"] == json!([first])
            && m["deletedSandboxNames"] == json!([first]),
        "{m}"
    );
    let session = w.sandbox(&second).ok_or("codex sandbox")?["sessions"][0].clone();
    check!(
        session["herdrAgent"] == "codex",
        "HERDR_AGENT=codex: {session}"
    );
    let run = w.confirmed_action("replace-sandbox", &pane);
    let third = run.text("sandboxName");
    check!(
        run.ok() && run.result["deleted"] == json!([second]),
        "{}",
        run.show()
    );
    w.wait_for_bridge_exit(&pane)?;
    let m = w.mapping(&pane).ok_or("mapping")?;
    check!(
        m["sandboxName"] == third.as_str()
            && m["replacesSandboxNames"] == json!([second, first])
            && m["deletedSandboxNames"] == json!([first, second]),
        "the whole history: {m}"
    );
    Ok(())
}

/// Items 6 and 7: the worktree hook lists deleted sandboxes by name, exits 0 for an event it does
/// not handle or a declined popup, and 1 when a confirmed deletion failed.
pub fn worktree_hook_names_and_exit_codes() -> Outcome {
    let w = World::new();
    let repo = w.git_repo("repo");
    let (pane, name) = w.start_agent(&repo)?;
    let event = json!({"event": "worktree.removed", "data": {"worktree": {"path": repo.display().to_string()}}});
    let hook = |event: &str, input: &str, extra: &[(&str, &str)]| {
        let mut env = vec![
            ("HERDR_PLUGIN_EVENT_JSON", event),
            ("FAKE_HERDR_POPUP_INPUT", input),
        ];
        env.extend_from_slice(extra);
        w.airlock(&["herdr", "event"], &env)
    };
    let other = json!({"event": "workspace.created", "data": {}}).to_string();
    let run = hook(&other, "DELETE\n", &[]);
    check!(run.code == 0 && run.ok(), "another event: {}", run.show());
    let run = hook(&event.to_string(), "keep\n", &[]);
    check!(
        run.code == 0 && run.result["confirmed"] == false,
        "declined: {}",
        run.show()
    );
    let run = hook(
        &event.to_string(),
        "DELETE\n",
        &[("FAKE_SBX_FAIL", "rm=Error: permission denied")],
    );
    check!(
        run.code == 1 && run.result["failures"][0]["errorKind"] == "permission",
        "a failed deletion exits 1: {}",
        run.show()
    );
    let run = hook(&event.to_string(), "DELETE\n", &[]);
    check!(
        run.code == 0 && run.result["deleted"] == json!([name]) && w.mapping(&pane).is_none(),
        "deleted by name: {}",
        run.show()
    );
    Ok(())
}
