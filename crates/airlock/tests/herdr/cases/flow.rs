//! The main loop: start-agent → reconnect → open-shell → stop → replace → forget, and how an agent
//! starts: which agent and setup, where its pane opens, and a missing agent binary.

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

    let run = w.confirmed_action("replace-sandbox", &pane);
    check!(run.ok(), "replace: {}", run.show());
    let fresh = run.text("sandboxName");
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

    let run = w.confirmed_action("forget-mapping", &pane);
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
    let pane = run.text("paneId");
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
    let pane = run.text("paneId");
    w.wait_for("the agent", || {
        w.mapping(&pane)
            .is_some_and(|m| m["bridge"]["exitedAt"].is_string())
    })?;
    Ok(())
}
