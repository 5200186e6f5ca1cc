//! Parity with the original plugin (issue #16), the remaining scenarios of its suite: a swallowed
//! command re-homed next to the user, an open shell protecting a re-homed sandbox, fetch-changes
//! recording what it learns about the sandbox, the keep command, and a garbage context.

use serde_json::json;

use crate::check;
use crate::world::{Outcome, World};

/// A pane that swallows the typed command: the fresh pane opens next to the user (not next to
/// the busy pane), the old one is relabelled `<label> (moved to <pane>)`, the moved mapping
/// records where it came from; `HERDR_SBX_BRIDGE_START_TIMEOUT_MS` sets the wait.
pub fn swallowed_command_moves_next_to_the_user() -> Outcome {
    let mut w = World::new();
    let repo = w.git_repo("repo");
    let (pane, name) = w.start_agent(&repo)?;
    let label = w.herdr_state(|s| s["panes"][&pane]["label"].clone());
    w.herdr_state(|s| s["panes"][&pane]["swallow"] = json!(true));
    w.set("HERDR_SBX_ACK_TIMEOUT_MS", "");
    w.set("HERDR_SBX_BRIDGE_START_TIMEOUT_MS", "300");
    let started = std::time::Instant::now();
    let run = w.action("reconnect", w.ctx_pane("w1:p1"));
    let moved = run.text("movedTo");
    check!(
        run.result
            == json!({"schemaVersion": 1, "plugin": "airlock.sandbox", "action": "reconnect", "ok": true,
                "paneId": moved, "sandboxName": name, "agentKind": "claude-code", "mode": "start",
                "adoptedFrom": null, "movedTo": moved}),
        "{}",
        run.show()
    );
    check!(
        started.elapsed() < std::time::Duration::from_millis(3500),
        "waited {:?}, not the 4 s default",
        started.elapsed()
    );
    let split = w
        .argv_log("FAKE_HERDR_LOG")
        .into_iter()
        .rfind(|a| a.len() > 2 && a[0] == "pane" && a[1] == "split")
        .ok_or("split")?;
    check!(split[2] == "w1:p1", "next to the user: {split:?}");
    let old = w.herdr_state(|s| s["panes"][&pane]["label"].clone());
    check!(
        old == json!(format!(
            "{} (moved to {moved})",
            label.as_str().unwrap_or("")
        )),
        "relabelled {old}"
    );
    let m = w.mapping(&moved).ok_or("moved mapping")?;
    check!(
        m["adoptedFrom"] == pane.as_str() && m["sourcePaneId"] == "w1:p1",
        "{m}"
    );
    w.wait_for_bridge_exit(&moved)?;
    Ok(())
}

/// A shell opened under the old pane still protects the sandbox after reconnect re-homed the
/// mapping: forget-mapping refuses, nothing is deleted.
pub fn shell_protects_a_rehomed_sandbox() -> Outcome {
    let mut w = World::new();
    w.add_pane("wP:p1", "wP");
    let repo = w.git_repo("repo");
    let (pane, name) = w.start_agent(&repo)?;
    let hold = w.root.join("release");
    w.set("FAKE_SBX_ATTACH_HOLD", &hold.display().to_string());
    w.set("FAKE_SBX_ATTACH_HOLD_MATCH", "bash");
    let run = w.action("open-shell", w.ctx_pane(&pane));
    check!(run.ok(), "{}", run.show());
    w.wait_for("the shell to register", || {
        w.mapping(&pane)
            .is_some_and(|m| m["shells"].as_array().is_some_and(|s| s.len() == 1))
    })?;
    w.remove_pane(&pane);
    let run = w.action("reconnect", w.ctx_in(Some("wP"), "wP:p1"));
    let adopted = run.text("paneId");
    check!(
        run.ok() && run.result["adoptedFrom"] == pane.as_str(),
        "{}",
        run.show()
    );
    w.wait_for_bridge_exit(&adopted)?;
    let m = w.mapping(&adopted).ok_or("adopted")?;
    check!(
        m["shells"][0]["paneId"] == pane.as_str(),
        "the shell record travels with its own pane id: {m}"
    );
    let ctx = json!({"workspace_id": "wP", "focused_pane_id": adopted}).to_string();
    let forget = || {
        w.action_with(
            "forget-mapping",
            Some(&ctx),
            &[("FAKE_HERDR_POPUP_INPUT", "DELETE\n")],
        )
    };
    let run = forget();
    check!(run.refused_as_conflict("open-shell"), "{}", run.show());
    check!(
        w.sandbox(&name).is_some(),
        "nothing deleted under the shell"
    );
    let shell_pid = m["shells"][0]["pid"].as_u64().unwrap_or(0) as u32;
    std::fs::write(&hold, "").map_err(|e| e.to_string())?;
    // Its record stays on the moved mapping; it stops counting once the process is gone.
    w.wait_for("the shell to leave", || {
        !airlock_herdr::proc::pid_alive(shell_pid)
    })?;
    let run = forget();
    check!(
        run.ok() && w.sandbox(&name).is_none(),
        "deleted once the shell left: {}",
        run.show()
    );
    Ok(())
}

/// fetch-changes marks a vanished sandbox `missing`, and a mapping marked missing whose sandbox
/// turns out to exist `created`; the keep command names the repository (`git -C`).
pub fn fetch_changes_records_what_it_learns() -> Outcome {
    let w = World::new();
    let repo = w.git_repo("repo");
    w.write_config(json!({"workspaceMode": "clone"}));
    let (pane, name) = w.start_agent(&repo)?;
    let clone = w.root.join("sbx-root").join(&name).join("clone");
    w.git(&clone, &["checkout", "-q", "-b", "agent-work"]);
    std::fs::write(clone.join("a.txt"), "a\n").map_err(|e| e.to_string())?;
    w.git(&clone, &["add", "a.txt"]);
    w.git(&clone, &["commit", "-q", "-m", "work"]);
    w.modify_mapping(&pane, |m| {
        m.lifecycle_state = airlock_herdr::store::LifecycleState::Missing;
    })?;
    let run = w.action("fetch-changes", w.ctx_pane(&pane));
    let remote = format!("sandbox-{name}");
    check!(
        run.ok()
            && run.result["keep"][0]["command"]
                == format!(
                    "git -C {} branch agent-work {remote}/agent-work",
                    repo.display()
                )
                .as_str(),
        "{}",
        run.show()
    );
    check!(
        w.mapping(&pane)
            .is_some_and(|m| m["lifecycleState"] == "created"),
        "a sandbox that exists is created, not ready"
    );
    w.sbx_state(|s| s["sandboxes"].as_object_mut().map(|m| m.remove(&name)));
    let run = w.action("fetch-changes", w.ctx_pane(&pane));
    check!(
        !run.ok()
            && run.kind() == "not-found"
            && run.result["message"]
                .as_str()
                .is_some_and(|m| m.contains("no longer exists")),
        "{}",
        run.show()
    );
    check!(
        w.mapping(&pane)
            .is_some_and(|m| m["lifecycleState"] == "missing"),
        "marked missing"
    );
    Ok(())
}

/// An invocation context that is not JSON is a `startup` failure, as in the original.
pub fn garbage_context_is_startup() -> Outcome {
    let w = World::new();
    for action in ["doctor", "list-sandboxes", "info"] {
        let run = w.action_with(action, Some("{oops"), &[]);
        check!(
            !run.ok()
                && run.kind() == "startup"
                && run.result["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("HERDR_PLUGIN_CONTEXT_JSON")),
            "{action}: {}",
            run.show()
        );
    }
    Ok(())
}

/// open-port follows a link to any sandbox a mapping still tracks (one it replaced included);
/// list-sandboxes rows always carry `paneError` (null when herdr answered); stop, forget-mapping
/// and replace-sandbox show a toast, as start-agent does.
pub fn links_rows_and_toasts() -> Outcome {
    let mut w = World::new();
    let repo = w.git_repo("repo");
    w.write_config(json!({"publish": ["3000"]}));
    let (pane, first) = w.start_agent(&repo)?;
    w.remove_pane(&pane);
    w.herdr_state(|s| s["reuse_ids"] = json!([pane]));
    let (again, _) = w.start_agent(&repo)?;
    check!(again == pane, "herdr handed the id out again");
    let opener = w.root.join("bin/fake-opener");
    std::fs::write(&opener, "#!/bin/sh\nexit 0\n").map_err(|e| e.to_string())?;
    std::fs::set_permissions(&opener, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .map_err(|e| e.to_string())?;
    w.set("HERDR_SBX_OPENER", &opener.display().to_string());
    let run = w.action(
        "open-port",
        json!({"clicked_url": format!("airlock://{first}/3000")}),
    );
    check!(
        run.ok() && run.result["sandboxName"] == first.as_str() && run.result["hostPort"] == 43000,
        "a replaced but tracked sandbox: {}",
        run.show()
    );
    let list = w.action("list-sandboxes", json!({}));
    let row = list.result["mappings"][0]
        .as_object()
        .cloned()
        .unwrap_or_default();
    check!(
        row.get("paneError") == Some(&serde_json::Value::Null),
        "paneError present and null: {}",
        list.show()
    );
    let toasts = |w: &World| {
        w.argv_log("FAKE_HERDR_LOG")
            .iter()
            .filter(|a| a.len() > 2 && a[0] == "notification" && a[1] == "show")
            .count()
    };
    for action in ["stop", "replace-sandbox", "forget-mapping"] {
        let before = toasts(&w);
        w.wait_for_bridge_exit(&pane)?;
        let run = w.confirmed_action(action, &pane);
        check!(run.ok(), "{action}: {}", run.show());
        check!(toasts(&w) == before + 1, "{action} shows a toast");
    }
    Ok(())
}

/// The DELETE popup says what deleting does, and warns that a clone-mode sandbox's commits exist
/// only inside it.
pub fn popup_warns_about_clone_mode_work() -> Outcome {
    let w = World::new();
    let repo = w.git_repo("repo");
    w.write_config(json!({"workspaceMode": "clone"}));
    let (pane, name) = w.start_agent(&repo)?;
    w.remove_pane(&pane);
    let run = w.action_with(
        "prune-mappings",
        Some("{}"),
        &[("FAKE_HERDR_POPUP_INPUT", "keep\n")],
    );
    check!(
        run.ok() && run.result["orphansConfirmed"] == false,
        "{}",
        run.show()
    );
    w.wait_for("the popup's text", || {
        let out = w.pane_outputs();
        out.contains("1 sandbox has lost its herdr pane. DELETE removes it permanently")
            && out.contains(&format!(
                "Clone mode: {name}'s commits exist only inside it"
            ))
    })?;
    Ok(())
}

/// A clone-mode orphan of another workspace: its commits can still be fetched and its port
/// opened from where the user is, before anything is deleted (the lost-work case).
pub fn fetch_and_open_port_reach_an_orphan() -> Outcome {
    let mut w = World::new();
    w.add_pane("wC:p1", "wC");
    w.add_pane("wP:p1", "wP");
    let repo = w.git_repo("repo");
    w.write_config(json!({"workspaceMode": "clone", "publish": ["8080:3000"]}));
    let (orphan, name) = w.start_agent_from(&repo, Some("wC"), "wC:p1")?;
    let clone = w.root.join("sbx-root").join(&name).join("clone");
    w.git(&clone, &["checkout", "-q", "-b", "agent-work"]);
    std::fs::write(clone.join("a.txt"), "a\n").map_err(|e| e.to_string())?;
    w.git(&clone, &["add", "a.txt"]);
    w.git(&clone, &["commit", "-q", "-m", "work"]);
    w.remove_pane(&orphan);
    let from_p = w.ctx_in(Some("wP"), "wP:p1");
    let run = w.action("fetch-changes", from_p.clone());
    check!(
        run.ok()
            && run.result["paneId"] == orphan.as_str()
            && run.result["branches"]
                .as_array()
                .is_some_and(|b| b.contains(&json!(format!("sandbox-{name}/agent-work")))),
        "{}",
        run.show()
    );
    w.set("HERDR_SBX_OPENER", "/bin/true");
    let run = w.action("open-port", from_p);
    check!(
        run.ok() && run.result["sandboxName"] == name.as_str() && run.result["hostPort"] == 8080,
        "{}",
        run.show()
    );
    Ok(())
}
