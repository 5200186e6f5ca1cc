//! Parity with the original plugin (issue #16), pane side: orphans adopted across workspaces
//! (items 1 and 7), start-agent's sbx check and the conflict rules (item 4). Each case asserts the
//! result line the seed's field table gives.

use serde_json::json;

use crate::check;
use crate::world::{Outcome, World};

/// A world with two more workspaces the user works in: wC (pane wC:p1) and wP (pane wP:p1).
fn two_workspaces() -> World {
    let w = World::new();
    w.add_pane("wC:p1", "wC");
    w.add_pane("wP:p1", "wP");
    w
}

fn last_split(w: &World) -> Vec<String> {
    w.argv_log("FAKE_HERDR_LOG")
        .into_iter()
        .rfind(|a| a.len() > 2 && a[0] == "pane" && a[1] == "split")
        .unwrap_or_default()
}

/// Item 1: an orphan from another workspace is reachable by every pane action, and reconnect
/// adopts it into the invoking workspace (`adoptedFrom`).
pub fn orphan_reachable_from_any_workspace() -> Outcome {
    let w = two_workspaces();
    let repo = w.git_repo("repo");
    let (orphan, name) = w.start_agent_from(&repo, Some("wC"), "wC:p1")?;
    w.remove_pane(&orphan);
    let from_p = w.ctx_in(Some("wP"), "wP:p1");
    let info = w.action("info", from_p.clone());
    check!(
        info.ok() && info.result["paneId"] == orphan.as_str(),
        "info: {}",
        info.show()
    );
    let stop = w.action("stop", from_p.clone());
    check!(
        stop.result
            == json!({"schemaVersion": 1, "plugin": "airlock.sandbox", "action": "stop", "ok": true,
                "paneId": orphan, "sandboxName": name}),
        "stop: {}",
        stop.show()
    );
    let shell = w.action("open-shell", from_p.clone());
    check!(
        shell.ok() && shell.result["mappedPaneId"] == orphan.as_str(),
        "open-shell: {}",
        shell.show()
    );
    check!(
        last_split(&w)[2] == "wP:p1",
        "the shell opens next to the user: {:?}",
        last_split(&w)
    );
    w.wait_for("the shell to leave", || {
        w.mapping(&orphan)
            .is_some_and(|m| m["shells"].as_array().is_some_and(Vec::is_empty))
    })?;
    let run = w.action("reconnect", from_p);
    let adopted = run.text("paneId");
    check!(
        run.result
            == json!({"schemaVersion": 1, "plugin": "airlock.sandbox", "action": "reconnect", "ok": true,
                "paneId": adopted, "sandboxName": name, "agentKind": "claude-code", "mode": "start",
                "adoptedFrom": orphan, "movedTo": null}),
        "reconnect: {}",
        run.show()
    );
    check!(
        adopted.starts_with("wP:") && last_split(&w)[2] == "wP:p1",
        "adopted next to the user, in the user's workspace: {adopted}"
    );
    let m = w.mapping(&adopted).ok_or("the adopted mapping")?;
    check!(
        m["workspaceId"] == "wP"
            && m["sourcePaneId"] == "wP:p1"
            && m["adoptedFrom"] == orphan.as_str(),
        "adopted mapping {m}"
    );
    check!(
        w.mapping(&orphan).is_none(),
        "the old pane's mapping is gone"
    );
    w.wait_for_bridge_exit(&adopted)?;
    Ok(())
}

/// Item 1: forget-mapping and replace-sandbox reach an orphan of another workspace; two orphans
/// and a live mapping elsewhere are `target` errors naming them.
pub fn orphan_deletions_and_ambiguity() -> Outcome {
    let w = two_workspaces();
    let repo = w.git_repo("repo");
    let (first, first_name) = w.start_agent_from(&repo, Some("wC"), "wC:p1")?;
    let from_p = w.ctx_in(Some("wP"), "wP:p1");
    let run = w.action("info", from_p.clone());
    check!(
        !run.ok()
            && run.kind() == "target"
            && run.result["message"].as_str().is_some_and(|m| m.contains(
                &format!("No sandbox is mapped in workspace wP. Existing mappings: {first} ({first_name})")
            )),
        "a live mapping elsewhere: {}",
        run.show()
    );
    // A herdr that cannot list its panes never turns a live mapping into an orphan.
    let splits = |w: &World| {
        w.argv_log("FAKE_HERDR_LOG")
            .iter()
            .filter(|a| a.len() > 1 && a[0] == "pane" && a[1] == "split")
            .count()
    };
    let before = splits(&w);
    let run = w.action_with(
        "reconnect",
        Some(&from_p.to_string()),
        &[("FAKE_HERDR_FAIL", "pane list")],
    );
    check!(
        !run.ok() && run.kind() == "unknown" && splits(&w) == before,
        "an unreadable pane list: {}",
        run.show()
    );
    check!(w.mapping(&first).is_some(), "the mapping stays");
    let (second, _) = w.start_agent_from(&repo, Some("wC"), "wC:p1")?;
    w.remove_pane(&first);
    w.remove_pane(&second);
    let run = w.action("reconnect", from_p.clone());
    check!(
        !run.ok()
            && run.kind() == "target"
            && run.result["message"]
                .as_str()
                .is_some_and(|m| m.contains("Several sandboxes lost their panes")),
        "two orphans: {}",
        run.show()
    );
    let ctx = from_p.to_string();
    // From workspace wC both are its own: still ambiguous, named.
    let run = w.action("forget-mapping", w.ctx_in(Some("wC"), "wC:p1"));
    check!(
        run.kind() == "target"
            && run.result["message"]
                .as_str()
                .is_some_and(|m| m.contains("has several")),
        "{}",
        run.show()
    );
    // One orphan left: forget-mapping from the other workspace deletes it.
    let second_name = w.mapping(&second).ok_or("second")?["sandboxName"].clone();
    w.herdr_state(|s| s["panes"][&first] = json!({"workspace_id": "wC"}));
    let run = w.action_with(
        "forget-mapping",
        Some(&ctx),
        &[("FAKE_HERDR_POPUP_INPUT", "DELETE\n")],
    );
    check!(
        run.result
            == json!({"schemaVersion": 1, "plugin": "airlock.sandbox", "action": "forget-mapping", "ok": true,
                "paneId": second, "sandboxName": second_name, "deleted": [second_name], "alreadyMissing": []}),
        "forget: {}",
        run.show()
    );
    // And replace-sandbox re-homes the remaining one after deleting its sandbox.
    w.remove_pane(&first);
    let run = w.action_with(
        "replace-sandbox",
        Some(&ctx),
        &[("FAKE_HERDR_POPUP_INPUT", "DELETE\n")],
    );
    let pane = run.text("paneId");
    check!(
        run.ok()
            && run.result["adoptedFrom"] == first.as_str()
            && run.result["deleted"] == json!([first_name])
            && pane.starts_with("wP:"),
        "replace: {}",
        run.show()
    );
    w.wait_for_bridge_exit(&pane)?;
    Ok(())
}

/// Items 1 and 7: a mapping saved with `workspaceId: null` is found by its pane id's workspace;
/// herdr handing the orphan's own pane id out again keeps the mapping (it used to be deleted);
/// an id another mapping still held passes that mapping's sandboxes and history on.
pub fn workspace_null_and_reused_pane_ids() -> Outcome {
    let w = two_workspaces();
    w.add_pane("wD:p1", "wD");
    let repo = w.git_repo("repo");
    let (pane, name) = w.start_agent_from(&repo, None, "wC:p1")?;
    check!(
        w.mapping(&pane).is_some_and(|m| m["workspaceId"].is_null()),
        "saved without a workspace"
    );
    let run = w.action("info", w.ctx_in(Some("wC"), "wC:p1"));
    check!(
        run.ok() && run.result["paneId"] == pane.as_str(),
        "found through its pane id's workspace: {}",
        run.show()
    );
    // herdr restarts and hands the orphan's id out again.
    w.remove_pane(&pane);
    w.herdr_state(|s| s["reuse_ids"] = json!([pane]));
    let run = w.action("reconnect", w.ctx_in(Some("wP"), "wP:p1"));
    check!(
        run.ok()
            && run.result["paneId"] == pane.as_str()
            && run.result["adoptedFrom"] == pane.as_str(),
        "reconnect into its own id: {}",
        run.show()
    );
    let m = w
        .mapping(&pane)
        .ok_or("the mapping survives its own pane id")?;
    check!(m["sandboxName"] == name.as_str(), "{m}");
    w.wait_for_bridge_exit(&pane)?;
    // A displaced mapping: its pane id is handed to the orphan re-homed from workspace wC.
    let (other, other_name) = w.start_agent_from(&repo, Some("wD"), "wD:p1")?;
    w.modify_mapping(&other, |m| {
        m.deleted_sandbox_names = vec!["herdr-codex-000000000000".to_owned()];
    })?;
    w.remove_pane(&pane);
    w.remove_pane(&other);
    w.herdr_state(|s| s["reuse_ids"] = json!([other]));
    let run = w.action("reconnect", w.ctx_in(Some("wC"), "wC:p1"));
    check!(
        run.ok()
            && run.result["paneId"] == other.as_str()
            && run.result["adoptedFrom"] == pane.as_str(),
        "re-homed into the displaced id: {}",
        run.show()
    );
    let m = w.mapping(&other).ok_or("moved mapping")?;
    check!(
        m["sandboxName"] == name.as_str()
            && m["replacesSandboxNames"] == json!([other_name])
            && m["deletedSandboxNames"] == json!(["herdr-codex-000000000000"])
            && w.mapping(&pane).is_none(),
        "the displaced sandbox stays deletable: {m}"
    );
    w.wait_for_bridge_exit(&other)?;
    let run = w.confirmed_action("forget-mapping", &other);
    check!(
        run.ok() && run.result["deleted"] == json!([name, other_name]),
        "forget deletes both: {}",
        run.show()
    );
    Ok(())
}

/// Item 7: a re-home whose mapping stays locked fails with `conflict`, leaves the mapping where it
/// was and closes the pane it opened; nothing is started.
pub fn failed_rehome_closes_the_extra_pane() -> Outcome {
    let mut w = two_workspaces();
    let repo = w.git_repo("repo");
    let (orphan, _) = w.start_agent_from(&repo, Some("wC"), "wC:p1")?;
    w.remove_pane(&orphan);
    let store = airlock_herdr::store::Store::new(&w.state_dir);
    let lock = store.mapping_path(&orphan).with_extension("lock");
    // A live holder: this test process.
    std::fs::write(
        &lock,
        format!(
            "{} {}\n",
            std::process::id(),
            airlock_herdr::proc::own_token()
        ),
    )
    .map_err(|e| e.to_string())?;
    w.set("HERDR_SBX_LOCK_WAIT_MS", "300");
    let runs_before = w.herdr_state(|s| s["runs"].as_u64().unwrap_or(0));
    let run = w.action("reconnect", w.ctx_in(Some("wP"), "wP:p1"));
    let _ = std::fs::remove_file(&lock);
    check!(!run.ok() && run.kind() == "conflict", "{}", run.show());
    let split = last_split(&w);
    let closes = w
        .argv_log("FAKE_HERDR_LOG")
        .iter()
        .filter(|a| a.len() > 2 && a[0] == "pane" && a[1] == "close")
        .count();
    check!(
        !split.is_empty() && closes == 1,
        "the opened pane was closed"
    );
    check!(
        w.herdr_state(|s| s["panes"].as_object().map_or(0, |p| p.len())) == 3,
        "only the user's panes are left"
    );
    check!(w.mapping(&orphan).is_some(), "the mapping stayed");
    check!(
        w.herdr_state(|s| s["runs"].as_u64().unwrap_or(0)) == runs_before,
        "no bridge was started"
    );
    Ok(())
}

/// Item 4: start-agent asks sbx first; with the daemon down or signed out it opens nothing.
pub fn start_agent_checks_sbx_first() -> Outcome {
    let mut w = World::new();
    let repo = w.git_repo("repo");
    // The original has only sbx; without a backend key airlock would fall back to its own sandbox
    // (see airlock_backend_default_follows_sbx).
    w.write_config(json!({"backend": "sbx"}));
    for (knob, value, kind) in [
        ("FAKE_SBX_DAEMON", "down", "daemon"),
        (
            "FAKE_SBX_FAIL",
            "version=Error: not logged in; run \"sbx login\" first",
            "authentication",
        ),
    ] {
        w.set(knob, value);
        let run = w.action("start-agent", w.ctx(&repo));
        check!(!run.ok() && run.kind() == kind, "{kind}: {}", run.show());
        check!(
            w.herdr_calls() == 0,
            "{kind}: nothing opened in herdr: {:?}",
            w.argv_log("FAKE_HERDR_LOG")
        );
        check!(
            !w.state_dir.join("panes").exists()
                || std::fs::read_dir(w.state_dir.join("panes"))
                    .map_err(|e| e.to_string())?
                    .next()
                    .is_none(),
            "{kind}: no mapping"
        );
        w.set(knob, "");
    }
    let sbx = w.argv_log("FAKE_SBX_LOG");
    check!(
        sbx.iter().all(|a| a == &["version", "--json"]),
        "only the version is asked: {sbx:?}"
    );
    Ok(())
}

/// Item 4: a pane id whose mapping's bridge is alive is never overwritten (`conflict`), and
/// `focused_pane_agent` in the context refuses reconnect, forget, replace and stop at once.
pub fn conflict_rules() -> Outcome {
    let mut w = World::new();
    let repo = w.git_repo("repo");
    let hold = w.root.join("release-agent");
    w.set("FAKE_SBX_ATTACH_HOLD", &hold.display().to_string());
    let run = w.action("start-agent", w.ctx(&repo));
    let pane = run.text("paneId");
    let name = run.result["sandboxName"].clone();
    w.wait_for("the agent to attach", || {
        w.mapping(&pane)
            .is_some_and(|m| m["lifecycleState"] == "ready")
    })?;
    w.herdr_state(|s| s["reuse_ids"] = json!([pane]));
    let run = w.action("start-agent", w.ctx(&repo));
    check!(
        run.refused_as_conflict("still in use"),
        "start-agent into a busy pane id: {}",
        run.show()
    );
    check!(
        w.mapping(&pane).is_some_and(|m| m["sandboxName"] == name),
        "the live mapping was not overwritten"
    );
    std::fs::write(&hold, "").map_err(|e| e.to_string())?;
    w.wait_for_bridge_exit(&pane)?;
    w.herdr_state(|s| s["panes"][&pane] = json!({"workspace_id": "w1"}));
    let ctx =
        json!({"workspace_id": "w1", "focused_pane_id": pane, "focused_pane_agent": "claude"});
    for action in ["reconnect", "forget-mapping", "replace-sandbox", "stop"] {
        let calls = w.herdr_calls();
        let run = w.action_with(
            action,
            Some(&ctx.to_string()),
            &[("FAKE_HERDR_POPUP_INPUT", "DELETE\n")],
        );
        check!(
            run.refused_as_conflict(&format!("Pane {pane} is still running agent \"claude\"")),
            "{action}: {}",
            run.show()
        );
        check!(
            w.herdr_calls() == calls,
            "{action}: refused before asking herdr"
        );
    }
    check!(
        w.sandbox(name.as_str().unwrap_or("")).is_some(),
        "nothing deleted"
    );
    Ok(())
}

/// Item 7: the typed command carries the resolved sbx, so a pane shell without `HERDR_SBX_BIN`
/// (and without sbx on its PATH) still starts the agent; a bridge that cannot start records why.
pub fn pane_command_carries_the_sbx_path() -> Outcome {
    let mut w = World::new();
    let repo = w.git_repo("repo");
    let elsewhere = w.root.join("sbx-elsewhere");
    std::fs::create_dir_all(&elsewhere).map_err(|e| e.to_string())?;
    std::fs::rename(w.root.join("bin/sbx"), elsewhere.join("sbx")).map_err(|e| e.to_string())?;
    let sbx = elsewhere.join("sbx").display().to_string();
    w.set("HERDR_SBX_BIN", &sbx);
    let (pane, _) = w.start_agent(&repo)?;
    let typed = w.herdr_state(|s| s["panes"][&pane]["runs"][0]["text"].clone());
    check!(
        typed
            .as_str()
            .is_some_and(|t| t.contains(&format!("--sbx-bin {sbx} --launch-id "))),
        "typed {typed}"
    );
    // Without the path the bridge fails to resolve sbx, and the mapping says so.
    let run = w.airlock(
        &[
            "herdr",
            "bridge",
            "start",
            "--pane-id",
            &pane,
            "--state-dir",
            &w.state_dir.display().to_string(),
            "--config-dir",
            &w.config_dir.display().to_string(),
        ],
        &[("HERDR_SBX_BIN", "")],
    );
    check!(run.code == 1, "the bridge fails: {}", run.stdout);
    let m = w.mapping(&pane).ok_or("mapping")?;
    check!(
        m["lastError"]["kind"] == "startup"
            && m["lastError"]["message"]
                .as_str()
                .is_some_and(|e| e.contains("sbx")),
        "recorded: {m}"
    );
    Ok(())
}

/// Item 7: open-shell opens in the mounted path when the recorded working directory is gone.
pub fn open_shell_with_a_vanished_cwd() -> Outcome {
    let w = World::new();
    let repo = w.git_repo("repo");
    let sub = repo.join("packages/gone");
    std::fs::create_dir_all(&sub).map_err(|e| e.to_string())?;
    let run = w.action("start-agent", w.ctx(&sub));
    let pane = run.text("paneId");
    w.wait_for_bridge_exit(&pane)?;
    std::fs::remove_dir_all(repo.join("packages")).map_err(|e| e.to_string())?;
    let run = w.action("open-shell", w.ctx_pane(&pane));
    check!(run.ok(), "{}", run.show());
    let split = last_split(&w);
    let cwd = split
        .iter()
        .position(|a| a == "--cwd")
        .and_then(|i| split.get(i + 1))
        .cloned()
        .unwrap_or_default();
    check!(
        cwd == repo.display().to_string(),
        "--cwd is the mounted path: {split:?}"
    );
    Ok(())
}
