//! The main loop: start-agent → reconnect → open-shell → stop → replace → forget, adoption after
//! a herdr restart, a swallowed command, custom agents, and the guards.

use serde_json::json;

use crate::check;
use crate::world::{Outcome, World};

pub fn start_reconnect_shell_stop_replace_forget() -> Outcome {
    let w = World::new();
    let repo = w.git_repo("repo");
    std::fs::create_dir_all(repo.join("packages/api")).map_err(|e| e.to_string())?;
    let run = w.action("start-agent", w.ctx(&repo.join("packages/api")));
    check!(run.ok(), "start-agent: {}", run.show());
    let r = &run.result;
    let pane = r["paneId"].as_str().unwrap_or_default().to_owned();
    let name = r["sandboxName"].as_str().unwrap_or_default().to_owned();
    check!(
        r["sourcePaneId"] == "w1:p1"
            && r["agentKind"] == "claude-code"
            && r["workspaceMode"] == "mount",
        "fields: {r}"
    );
    check!(
        r["localPath"] == repo.display().to_string(),
        "mounts the repo top: {r}"
    );
    check!(
        r["workdir"] == repo.join("packages/api").display().to_string(),
        "starts in the pane dir: {r}"
    );
    check!(
        name.starts_with("herdr-claude-code-") && name.len() == "herdr-claude-code-".len() + 12,
        "name {name}"
    );
    w.wait_for("the bridge to attach and exit", || {
        w.mapping(&pane)
            .is_some_and(|m| m["bridge"]["exitedAt"].is_string())
    })?;
    let m = w.mapping(&pane).ok_or("mapping")?;
    check!(
        m["lifecycleState"] == "ready" && m["lastConnectedAt"].is_string(),
        "mapping {m}"
    );
    let sb = w.sandbox(&name).ok_or("sandbox created")?;
    let session = &sb["sessions"][0];
    check!(
        session["argv"] == json!(["claude", "--dangerously-skip-permissions"]),
        "agent argv {session}"
    );
    check!(
        session["herdrAgent"] == "claude",
        "HERDR_AGENT on the host-visible command: {session}"
    );
    check!(
        session["workdir"] == repo.join("packages/api").display().to_string(),
        "workdir {session}"
    );
    let create = w
        .argv_log("FAKE_SBX_LOG")
        .into_iter()
        .find(|a| a[0] == "create")
        .ok_or("create logged")?;
    check!(
        create
            == vec![
                "create",
                "--name",
                &name,
                "claude",
                &repo.display().to_string()
            ],
        "create argv {create:?}"
    );
    let split = w
        .argv_log("FAKE_HERDR_LOG")
        .into_iter()
        .find(|a| a[0] == "pane" && a[1] == "split")
        .ok_or("split")?;
    check!(
        !split.contains(&"--ratio".to_owned()) && split[3..5] == ["--direction", "right"],
        "default split {split:?}"
    );
    let label = w.herdr_state(|s| s["panes"][&pane]["label"].clone());
    check!(
        label
            .as_str()
            .is_some_and(|l| l.starts_with("airlock claude-code ")),
        "pane label {label}"
    );

    let run = w.action("reconnect", w.ctx_pane(&pane));
    check!(
        run.ok() && run.result["mode"] == "connect" && run.result["paneId"] == pane.as_str(),
        "reconnect: {}",
        run.show()
    );
    check!(
        run.result["adoptedFrom"].is_null() && run.result["movedTo"].is_null(),
        "no move: {}",
        run.show()
    );
    w.wait_for("a second session", || {
        w.sandbox(&name)
            .is_some_and(|s| s["sessions"].as_array().map_or(0, Vec::len) == 2)
    })?;
    w.wait_for("the bridge to exit", || {
        w.mapping(&pane)
            .is_some_and(|m| m["bridge"]["pid"].is_null())
    })?;

    let run = w.action("open-shell", w.ctx_pane(&pane));
    check!(
        run.ok()
            && run.result["mappedPaneId"] == pane.as_str()
            && run.result["paneId"] != pane.as_str(),
        "open-shell: {}",
        run.show()
    );
    w.wait_for("a login shell", || {
        w.sandbox(&name).is_some_and(|s| {
            s["sessions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|x| x["argv"] == json!(["bash", "-l"]))
        })
    })?;
    w.wait_for("the shell to unregister", || {
        w.mapping(&pane)
            .is_some_and(|m| m["shells"].as_array().is_some_and(Vec::is_empty))
    })?;

    let run = w.action("stop", w.ctx_pane(&pane));
    check!(
        run.ok() && run.result["sandboxName"] == name.as_str(),
        "stop: {}",
        run.show()
    );
    check!(
        w.sandbox(&name).is_some_and(|s| s["status"] == "stopped"),
        "stopped in sbx"
    );
    check!(
        w.mapping(&pane)
            .is_some_and(|m| m["lifecycleState"] == "stopped"),
        "stopped in the mapping"
    );

    let run = w.action_with(
        "replace-sandbox",
        Some(&w.ctx_pane(&pane).to_string()),
        &[("FAKE_HERDR_POPUP_INPUT", "DELETE\n")],
    );
    check!(run.ok(), "replace: {}", run.show());
    let fresh = run.result["sandboxName"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    check!(
        fresh != name && run.result["deleted"] == json!([name]),
        "replace fields {}",
        run.result
    );
    check!(w.sandbox(&name).is_none(), "old sandbox deleted");
    w.wait_for("the fresh sandbox", || {
        w.sandbox(&fresh).is_some()
            && w.mapping(&pane)
                .is_some_and(|m| m["bridge"]["exitedAt"].is_string())
    })?;
    w.wait_for("the popup to list the sandbox and confirm", || {
        let popup = w.pane_outputs();
        popup.contains(&name) && popup.contains("Confirmed.")
    })?;

    let run = w.action_with(
        "forget-mapping",
        Some(&w.ctx_pane(&pane).to_string()),
        &[("FAKE_HERDR_POPUP_INPUT", "DELETE\n")],
    );
    check!(
        run.ok()
            && run.result["deleted"] == json!([fresh])
            && run.result["alreadyMissing"] == json!([]),
        "forget: {}",
        run.show()
    );
    check!(
        w.mapping(&pane).is_none() && w.sandbox(&fresh).is_none(),
        "mapping and sandbox gone"
    );
    // Stopping a sandbox that is gone marks nothing (no mapping) and fails with target.
    let run = w.action("stop", w.ctx_pane(&pane));
    check!(
        !run.ok() && run.kind() == "target" && run.code == 1,
        "stop without mapping: {}",
        run.show()
    );
    Ok(())
}

pub fn adopts_a_mapping_whose_pane_is_gone() -> Outcome {
    let w = World::new();
    let repo = w.git_repo("repo");
    let (pane, name) = w.start_agent(&repo)?;
    // herdr restarted: the pane is gone.
    w.herdr_state(|s| s["panes"].as_object_mut().map(|p| p.remove(&pane)));
    let list = w.action("list-sandboxes", json!({}));
    check!(
        list.ok() && list.result["mappings"][0]["paneExists"] == false,
        "pane gone flagged: {}",
        list.show()
    );
    check!(
        list.stdout.contains("[pane gone]"),
        "human output flags it: {}",
        list.stdout
    );
    // Invoked from the surviving pane next to it: the workspace's only mapping is the target.
    let run = w.action("reconnect", w.ctx_pane("w1:p1"));
    check!(
        run.ok() && run.result["adoptedFrom"] == pane.as_str() && run.result["mode"] == "start",
        "reconnect: {}",
        run.show()
    );
    let split = w
        .argv_log("FAKE_HERDR_LOG")
        .into_iter()
        .rfind(|a| a[0] == "pane" && a[1] == "split")
        .ok_or("split")?;
    check!(
        split[2] == "w1:p1",
        "the new pane opens next to the caller: {split:?}"
    );
    let new_pane = run.result["paneId"].as_str().unwrap_or_default().to_owned();
    check!(
        new_pane != pane && w.mapping(&pane).is_none(),
        "moved off the old pane"
    );
    let m = w.mapping(&new_pane).ok_or("mapping moved")?;
    check!(
        m["adoptedFrom"] == pane.as_str() && m["sandboxName"] == name.as_str(),
        "adopted mapping {m}"
    );
    w.wait_for("the adopted bridge to attach", || {
        w.sandbox(&name)
            .is_some_and(|s| s["sessions"].as_array().map_or(0, Vec::len) == 2)
    })?;
    let creates = w
        .argv_log("FAKE_SBX_LOG")
        .iter()
        .filter(|a| a[0] == "create")
        .count();
    check!(
        creates == 1,
        "the existing sandbox was reused, not recreated ({creates} creates)"
    );
    // replace-sandbox adopts too: the pane is gone again after another restart.
    let adopted = run.result["paneId"].as_str().unwrap_or_default().to_owned();
    w.wait_for("the bridge to exit", || {
        w.mapping(&adopted)
            .is_some_and(|m| m["bridge"]["pid"].is_null())
    })?;
    w.herdr_state(|s| s["panes"].as_object_mut().map(|p| p.remove(&adopted)));
    let run = w.action_with(
        "replace-sandbox",
        Some(&w.ctx_pane("w1:p1").to_string()),
        &[("FAKE_HERDR_POPUP_INPUT", "DELETE\n")],
    );
    check!(
        run.ok()
            && run.result["adoptedFrom"] == adopted.as_str()
            && run.result["deleted"] == json!([name]),
        "replace adopts: {}",
        run.show()
    );
    let fresh = run.result["sandboxName"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let pane_now = run.result["paneId"].as_str().unwrap_or_default().to_owned();
    w.wait_for("the fresh sandbox in the adopting pane", || {
        w.sandbox(&fresh).is_some()
            && w.mapping(&pane_now)
                .is_some_and(|m| m["bridge"]["exitedAt"].is_string())
    })?;
    Ok(())
}

pub fn swallowed_command_moves_to_a_fresh_pane() -> Outcome {
    let mut w = World::new();
    let repo = w.git_repo("repo");
    let (pane, name) = w.start_agent(&repo)?;
    w.herdr_state(|s| s["panes"][&pane]["swallow"] = json!(true));
    w.set("HERDR_SBX_ACK_TIMEOUT_MS", "300");
    let run = w.action("reconnect", w.ctx_pane(&pane));
    check!(run.ok(), "reconnect: {}", run.show());
    let moved = run.result["movedTo"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    check!(
        !moved.is_empty()
            && run.result["paneId"] == moved.as_str()
            && run.result["mode"] == "start",
        "moved: {}",
        run.show()
    );
    let swallowed = w.herdr_state(|s| s["panes"][&pane].clone());
    check!(
        swallowed["swallowed"]
            .as_str()
            .is_some_and(|t| t.contains("herdr bridge connect")),
        "typed into the old pane: {swallowed}"
    );
    check!(
        swallowed["label"] == format!("moved to {moved}").as_str(),
        "old pane relabelled: {swallowed}"
    );
    check!(
        w.mapping(&pane).is_none() && w.mapping(&moved).is_some(),
        "mapping moved"
    );
    w.wait_for("the agent in the fresh pane", || {
        w.sandbox(&name)
            .is_some_and(|s| s["sessions"].as_array().map_or(0, Vec::len) == 2)
    })?;
    Ok(())
}

pub fn custom_agent_setup_once_and_report_agent() -> Outcome {
    let w = World::new();
    let repo = w.git_repo("repo");
    w.write_config(json!({"agentKind": "aider", "customAgents": {"aider": {"title": "Aider", "sbxAgent": "shell",
        "command": ["aider"], "defaultArgs": ["--yes"], "herdrDetectionKind": null, "setupScript": "pipx install aider-chat"}},
        "paneRatio": 0.3, "paneDirection": "down"}));
    let (pane, name) = w.start_agent(&repo)?;
    let split = w
        .argv_log("FAKE_HERDR_LOG")
        .into_iter()
        .find(|a| a[0] == "pane" && a[1] == "split")
        .ok_or("split")?;
    check!(
        split[2..]
            == [
                "w1:p1",
                "--direction",
                "down",
                "--ratio",
                "0.3",
                "--cwd",
                &repo.display().to_string(),
                "--focus"
            ],
        "paneDirection and paneRatio reach herdr: {split:?}"
    );
    let sb = w.sandbox(&name).ok_or("created")?;
    check!(
        sb["agent"] == "shell" && sb["setup_runs"] == 1,
        "setup ran once: {sb}"
    );
    check!(
        sb["sessions"][0]["argv"] == json!(["aider", "--yes"])
            && sb["sessions"][0]["herdrAgent"].is_null(),
        "no HERDR_AGENT: {sb}"
    );
    let log = w.argv_log("FAKE_HERDR_LOG");
    let report = log
        .iter()
        .position(|a| a.len() > 2 && a[1] == "report-agent" && a[2] == pane)
        .ok_or("report-agent called")?;
    let release = log
        .iter()
        .position(|a| a.len() > 2 && a[1] == "release-agent" && a[2] == pane)
        .ok_or("release-agent called")?;
    check!(
        report < release && log[report].contains(&"aider".to_owned()),
        "reported then released: {:?}",
        log[report]
    );
    let setup = w
        .argv_log("FAKE_SBX_LOG")
        .into_iter()
        .find(|a| a.iter().any(|x| x == "-lc"))
        .ok_or("setup exec")?;
    check!(
        setup.ends_with(&[
            "bash".to_owned(),
            "-lc".to_owned(),
            "pipx install aider-chat".to_owned()
        ]),
        "setup argv {setup:?}"
    );
    // A reconnect that has to prepare again (state failed) does not rerun the setup.
    let run = w.action("reconnect", w.ctx_pane(&pane));
    check!(run.ok(), "reconnect {}", run.show());
    w.wait_for("a second session", || {
        w.sandbox(&name)
            .is_some_and(|s| s["sessions"].as_array().map_or(0, Vec::len) == 2)
    })?;
    check!(
        w.sandbox(&name).is_some_and(|s| s["setup_runs"] == 1),
        "setup still ran once"
    );
    Ok(())
}

pub fn missing_agent_binary_is_config() -> Outcome {
    let mut w = World::new();
    let repo = w.git_repo("repo");
    w.set("FAKE_SBX_MISSING_BINARIES", "claude");
    let run = w.action("start-agent", w.ctx(&repo));
    check!(run.ok(), "start-agent itself succeeds: {}", run.show());
    let pane = run.result["paneId"].as_str().unwrap_or_default().to_owned();
    w.wait_for("the bridge to fail", || {
        w.mapping(&pane)
            .is_some_and(|m| m["lifecycleState"] == "failed" && m["bridge"]["exitedAt"].is_string())
    })?;
    let m = w.mapping(&pane).ok_or("mapping")?;
    check!(
        m["lastError"]["kind"] == "config"
            && m["lastError"]["message"]
                .as_str()
                .is_some_and(|s| s.contains("claude is not available")),
        "{m}"
    );
    // The bridge gives its record back first, then prints the error: wait for the text.
    w.wait_for("the pane to say why", || {
        w.pane_outputs().contains("not available inside sandbox")
    })?;
    Ok(())
}

pub fn open_in_tab_and_recycled_pane_id() -> Outcome {
    let w = World::new();
    let repo = w.git_repo("repo");
    w.write_config(json!({"openIn": "tab", "agentKind": "codex", "workspaceMode": "mount"}));
    let (pane, first) = w.start_agent(&repo)?;
    check!(
        w.argv_log("FAKE_HERDR_LOG")
            .iter()
            .any(|a| a[0] == "tab" && a[1] == "create"),
        "opened a tab"
    );
    check!(
        w.sandbox(&first).is_some_and(|s| s["sessions"][0]["argv"]
            == json!(["codex", "--dangerously-bypass-approvals-and-sandbox"])),
        "codex argv"
    );
    // herdr hands the same pane id out again: the old sandbox is carried over.
    w.herdr_state(|s| {
        s["next"] = json!(
            pane.rsplit(":p")
                .next()
                .and_then(|n| n.parse::<u64>().ok())
                .unwrap_or(0)
        )
    });
    let run = w.action("start-agent", w.ctx(&repo));
    check!(
        run.ok() && run.result["paneId"] == pane.as_str(),
        "same pane id again: {}",
        run.show()
    );
    check!(
        run.result["previousSandboxNames"] == json!([first]),
        "carried over: {}",
        run.result
    );
    Ok(())
}

pub fn guards_refuse_while_agent_or_bridge_runs() -> Outcome {
    let mut w = World::new();
    let repo = w.git_repo("repo");
    let hold = w.root.join("release-agent");
    w.set("FAKE_SBX_ATTACH_HOLD", &hold.display().to_string());
    let run = w.action("start-agent", w.ctx(&repo));
    check!(run.ok(), "{}", run.show());
    let pane = run.result["paneId"].as_str().unwrap_or_default().to_owned();
    w.wait_for("the agent to attach", || {
        w.mapping(&pane)
            .is_some_and(|m| m["lifecycleState"] == "ready")
    })?;
    for action in ["stop", "reconnect", "forget-mapping", "replace-sandbox"] {
        let run = w.action_with(
            action,
            Some(&w.ctx_pane(&pane).to_string()),
            &[("FAKE_HERDR_POPUP_INPUT", "DELETE\n")],
        );
        check!(
            !run.ok()
                && run.kind() == "conflict"
                && run.result["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("bridge")),
            "{action}: {}",
            run.show()
        );
    }
    std::fs::write(&hold, "").map_err(|e| e.to_string())?;
    w.wait_for("the bridge to exit", || {
        w.mapping(&pane)
            .is_some_and(|m| m["bridge"]["pid"].is_null())
    })?;
    // herdr still shows an agent in the pane.
    w.herdr_state(|s| {
        s["panes"][&pane]["agent"] = json!("claude");
        s["panes"][&pane]["agent_status"] = json!("working");
    });
    let run = w.action("reconnect", w.ctx_pane(&pane));
    check!(
        !run.ok()
            && run.kind() == "conflict"
            && run.result["message"]
                .as_str()
                .is_some_and(|m| m.contains("herdr still detects claude")),
        "{}",
        run.show()
    );
    w.herdr_state(|s| s["panes"][&pane]["agent"] = json!(null));
    let run = w.action("stop", w.ctx_pane(&pane));
    check!(run.ok(), "stop once idle: {}", run.show());
    Ok(())
}

pub fn without_a_focused_pane_opens_a_tab() -> Outcome {
    let w = World::new();
    let repo = w.git_repo("repo");
    let run = w.action(
        "start-agent",
        json!({"workspace_id": "w1", "workspace_cwd": repo.display().to_string()}),
    );
    check!(
        run.ok() && run.result["openIn"] == "tab" && run.result["sourcePaneId"].is_null(),
        "{}",
        run.show()
    );
    let tab = w
        .argv_log("FAKE_HERDR_LOG")
        .into_iter()
        .find(|a| a[0] == "tab")
        .ok_or("tab create")?;
    check!(
        tab.windows(2)
            .any(|p| p[0] == "--workspace" && p[1] == "w1"),
        "in the workspace: {tab:?}"
    );
    let pane = run.result["paneId"].as_str().unwrap_or_default().to_owned();
    w.wait_for("the agent", || {
        w.mapping(&pane)
            .is_some_and(|m| m["bridge"]["exitedAt"].is_string())
    })?;
    Ok(())
}

pub fn deletion_and_stop_refused_while_a_shell_is_attached() -> Outcome {
    let mut w = World::new();
    let repo = w.git_repo("repo");
    let (pane, name) = w.start_agent(&repo)?;
    let hold = w.root.join("release-shell");
    w.set("FAKE_SBX_ATTACH_HOLD", &hold.display().to_string());
    let run = w.action("open-shell", w.ctx_pane(&pane));
    check!(run.ok(), "open-shell: {}", run.show());
    w.wait_for("the shell to register", || {
        w.mapping(&pane)
            .is_some_and(|m| m["shells"].as_array().is_some_and(|s| s.len() == 1))
    })?;
    for action in ["stop", "forget-mapping"] {
        let run = w.action_with(
            action,
            Some(&w.ctx_pane(&pane).to_string()),
            &[("FAKE_HERDR_POPUP_INPUT", "DELETE\n")],
        );
        check!(
            !run.ok()
                && run.kind() == "conflict"
                && run.result["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("open-shell")),
            "{action}: {}",
            run.show()
        );
    }
    check!(w.sandbox(&name).is_some(), "nothing deleted");
    std::fs::write(&hold, "").map_err(|e| e.to_string())?;
    w.wait_for("the shell to leave", || {
        w.mapping(&pane)
            .is_some_and(|m| m["shells"].as_array().is_some_and(Vec::is_empty))
    })?;
    let run = w.action_with(
        "forget-mapping",
        Some(&w.ctx_pane(&pane).to_string()),
        &[("FAKE_HERDR_POPUP_INPUT", "DELETE\n")],
    );
    check!(
        run.ok() && w.sandbox(&name).is_none(),
        "forget once the shell left: {}",
        run.show()
    );
    Ok(())
}
