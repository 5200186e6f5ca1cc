//! doctor, list-sandboxes / info, the `sbx ls` shapes, open-port, install-keybindings, timeouts,
//! run-action and the overlay.

use serde_json::json;

use crate::check;
use crate::world::{Outcome, World};

pub fn doctor() -> Outcome {
    let mut w = World::new();
    let run = w.action("doctor", json!({}));
    check!(
        run.ok()
            && run.result["version"]["client"]["version"] == "0.42.1"
            && run.result["versionWarning"].is_null(),
        "{}",
        run.show()
    );
    check!(
        run.result["stateDir"] == w.state_dir.display().to_string(),
        "state dir under XDG_STATE_HOME/airlock: {}",
        run.result
    );
    check!(
        run.result["configDir"] == w.config_dir.display().to_string(),
        "config dir {}",
        run.result
    );
    check!(!w.state_dir.exists(), "doctor creates nothing");
    w.set("FAKE_SBX_VERSION", "0.41.0");
    let run = w.action("doctor", json!({}));
    check!(
        run.ok()
            && run.result["versionWarning"]
                .as_str()
                .is_some_and(|s| s.contains("0.41.0")),
        "{}",
        run.show()
    );
    // The sbx backend named: a failing sbx is reported, not replaced by airlock's sandbox.
    w.write_config(json!({"backend": "sbx"}));
    w.set("FAKE_SBX_DAEMON", "down");
    let run = w.action("doctor", json!({}));
    check!(
        !run.ok()
            && run.kind() == "daemon"
            && run.result["output"]
                .as_str()
                .is_some_and(|o| o.contains("is the daemon running")),
        "{}",
        run.show()
    );
    w.set("PATH", "/usr/bin:/bin");
    let run = w.action("doctor", json!({}));
    check!(
        !run.ok()
            && run.kind() == "startup"
            && run.result["message"]
                .as_str()
                .is_some_and(|m| m.contains("sbxBin")),
        "{}",
        run.show()
    );
    w.set("FAKE_SBX_DAEMON", "up");
    w.set(
        "HERDR_SBX_BIN",
        &w.root.join("bin/sbx").display().to_string(),
    );
    let run = w.action("doctor", json!({}));
    check!(run.ok(), "HERDR_SBX_BIN is honoured: {}", run.show());
    w.set(
        "FAKE_SBX_FAIL",
        "version=Error: not logged in; run \"sbx login\" first",
    );
    let run = w.action("doctor", json!({}));
    check!(
        !run.ok() && run.kind() == "authentication",
        "{}",
        run.show()
    );
    Ok(())
}

pub fn list_and_info() -> Outcome {
    let w = World::new();
    let repo = w.git_repo("repo");
    w.write_config(json!({"publish": ["8080:3000"]}));
    let (pane, name) = w.start_agent(&repo)?;
    let run = w.action("info", w.ctx_pane(&pane));
    check!(
        run.ok() && run.result["mapping"]["sandboxName"] == name.as_str(),
        "{}",
        run.show()
    );
    check!(
        run.result["agent"]["command"] == json!(["claude", "--dangerously-skip-permissions"]),
        "{}",
        run.result
    );
    check!(
        run.result["sandbox"]["status"] == "running"
            && run.result["ports"][0]["hostPort"] == 8080
            && run.result["ports"][0]["sandboxPort"] == 3000,
        "{}",
        run.result
    );
    check!(
        run.stdout.contains(&format!("airlock://{name}/3000")),
        "port link printed: {}",
        run.stdout
    );
    check!(
        run.result["gitRemote"] == format!("sandbox-{name}").as_str(),
        "{}",
        run.result
    );
    // From the pane next to the agent: the workspace's only mapping is used.
    let run = w.action("info", w.ctx_pane("w1:p1"));
    check!(
        run.ok() && run.result["paneId"] == pane.as_str(),
        "workspace fallback: {}",
        run.show()
    );
    w.sbx_state(|s| s["sandboxes"].as_object_mut().map(|m| m.remove(&name)));
    let list = w.action("list-sandboxes", json!({}));
    let row = &list.result["mappings"][0];
    check!(
        list.ok()
            && row["exists"] == false
            && row["paneExists"] == true
            && row["lifecycleState"] == "ready",
        "{}",
        list.show()
    );
    check!(list.stdout.contains("[sandbox gone]"), "{}", list.stdout);
    let list = w.action_with(
        "list-sandboxes",
        Some("{}"),
        &[("FAKE_HERDR_FAIL", "pane list")],
    );
    let row = &list.result["mappings"][0];
    check!(
        list.ok()
            && row["paneExists"].is_null()
            && row["paneError"]
                .as_str()
                .is_some_and(|e| e.contains("pane list")),
        "{}",
        list.show()
    );
    // A stop on a sandbox that is gone marks the mapping missing.
    let run = w.action("stop", w.ctx_pane(&pane));
    check!(!run.ok() && run.kind() == "not-found", "{}", run.show());
    check!(
        w.mapping(&pane)
            .is_some_and(|m| m["lifecycleState"] == "missing"),
        "marked missing"
    );
    let run = w.action("open-shell", w.ctx_pane(&pane));
    check!(
        !run.ok() && run.kind() == "target",
        "no shell into a missing sandbox: {}",
        run.show()
    );
    Ok(())
}

pub fn ls_shapes() -> Outcome {
    let mut w = World::new();
    let repo = w.git_repo("repo");
    let (_, name) = w.start_agent(&repo)?;
    for format in ["documented", "array", "map", "chatter"] {
        w.set("FAKE_SBX_LS_FORMAT", format);
        let list = w.action("list-sandboxes", json!({}));
        check!(
            list.ok()
                && list.result["mappings"][0]["exists"] == true
                && list.result["mappings"][0]["status"] == "running",
            "{format}: {}",
            list.show()
        );
    }
    for format in ["null", "sandboxes-null"] {
        w.set("FAKE_SBX_LS_FORMAT", format);
        let list = w.action("list-sandboxes", json!({}));
        check!(
            list.ok()
                && list.result["mappings"][0]["exists"] == false
                && list.result["sandboxError"].is_null(),
            "{format}: {}",
            list.show()
        );
    }
    let _ = name;
    Ok(())
}

pub fn open_port() -> Outcome {
    let mut w = World::new();
    let repo = w.git_repo("repo");
    w.write_config(json!({"publish": ["8080:3000", "5173"]}));
    let (pane, name) = w.start_agent(&repo)?;
    let opened = w.root.join("opened.txt");
    let opener = w.root.join("bin/fake-opener");
    std::fs::write(
        &opener,
        format!("#!/bin/sh\necho \"$1\" > '{}'\n", opened.display()),
    )
    .map_err(|e| e.to_string())?;
    std::os::unix::fs::PermissionsExt::set_mode(
        &mut std::fs::metadata(&opener)
            .map_err(|e| e.to_string())?
            .permissions(),
        0o755,
    );
    std::fs::set_permissions(&opener, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .map_err(|e| e.to_string())?;
    w.set("HERDR_SBX_OPENER", &opener.display().to_string());
    let run = w.action("open-port", w.ctx_pane(&pane));
    check!(
        run.ok() && run.result["url"] == "http://localhost:8080" && run.result["opened"] == true,
        "{}",
        run.show()
    );
    w.wait_for("the opener", || {
        std::fs::read_to_string(&opened).is_ok_and(|s| s.trim() == "http://localhost:8080")
    })?;
    let link = json!({"workspace_id": "w1", "clicked_url": format!("airlock://{name}/5173")});
    let run = w.action("open-port", link);
    check!(
        run.ok() && run.result["hostPort"] == 45173 && run.result["sandboxPort"] == 5173,
        "{}",
        run.show()
    );
    for url in [
        format!("airlock://{name}/9999"),
        "airlock://not-ours/3000".to_owned(),
        "airlock://x/y".to_owned(),
    ] {
        let run = w.action("open-port", json!({"clicked_url": url}));
        check!(!run.ok() && run.kind() == "target", "{url}: {}", run.show());
    }
    w.set("HERDR_SBX_OPENER", "/bin/false");
    let run = w.action("open-port", w.ctx_pane(&pane));
    check!(
        run.ok() && run.result["opened"] == false,
        "a failing opener: {}",
        run.show()
    );
    Ok(())
}

pub fn install_keybindings() -> Outcome {
    let mut w = World::new();
    let config = w.root.join("config/herdr/config.toml");
    std::fs::create_dir_all(config.parent().ok_or("parent")?).map_err(|e| e.to_string())?;
    std::fs::write(&config, "[[keys.command]]\nkey = \"prefix+shift+o\"\ntype = \"plugin_action\"\ncommand = \"other.thing\"\n").map_err(|e| e.to_string())?;
    let run = w.action("install-keybindings", json!({}));
    check!(
        run.ok()
            && run.result["added"].as_array().map_or(0, Vec::len) == 3
            && run.result["reloaded"] == true,
        "{}",
        run.show()
    );
    check!(
        run.result["warnings"][0]
            .as_str()
            .is_some_and(|s| s.contains("prefix+shift+o")),
        "taken chord reported: {}",
        run.result
    );
    let text = std::fs::read_to_string(&config).map_err(|e| e.to_string())?;
    check!(
        text.contains("command = \"airlock.sandbox.start-agent\"") && text.contains("other.thing"),
        "{text}"
    );
    let run = w.action("install-keybindings", json!({}));
    check!(
        run.ok()
            && run.result["added"] == json!([])
            && run.result["existing"].as_array().map_or(0, Vec::len) == 3,
        "idempotent: {}",
        run.show()
    );
    std::fs::write(&config, "").map_err(|e| e.to_string())?;
    w.set("FAKE_HERDR_CONFIG_CHECK", "reject");
    let run = w.action("install-keybindings", json!({}));
    check!(!run.ok() && run.kind() == "config", "{}", run.show());
    check!(
        std::fs::read_to_string(&config)
            .map_err(|e| e.to_string())?
            .is_empty(),
        "restored from the backup"
    );
    Ok(())
}

pub fn timeouts_are_daemon_failures() -> Outcome {
    let mut w = World::new();
    let repo = w.git_repo("repo");
    let (pane, _) = w.start_agent(&repo)?;
    w.set("HERDR_SBX_TIMEOUT_MS", "300");
    w.set("FAKE_SBX_DELAY_MS", "stop=20000;ls=20000");
    let started = std::time::Instant::now();
    let run = w.action("stop", w.ctx_pane(&pane));
    check!(
        !run.ok()
            && run.kind() == "daemon"
            && run.result["message"]
                .as_str()
                .is_some_and(|m| m.contains("HERDR_SBX_TIMEOUT_MS")),
        "{}",
        run.show()
    );
    check!(
        started.elapsed() < std::time::Duration::from_secs(15),
        "the wedged call was killed"
    );
    let list = w.action("list-sandboxes", json!({}));
    check!(
        list.ok()
            && list.result["mappings"][0]["exists"].is_null()
            && list.result["sandboxError"]["kind"] == "daemon"
            && list.result["sandboxError"]["message"]
                .as_str()
                .is_some_and(|e| e.contains("did not finish")),
        "{}",
        list.show()
    );
    // sbx create gets the slow limit, which has its own override.
    w.set("HERDR_SBX_TIMEOUT_MS", "120000");
    w.set("FAKE_SBX_DELAY_MS", "create=20000");
    w.set("HERDR_SBX_SLOW_TIMEOUT_MS", "300");
    let run = w.action("start-agent", w.ctx(&repo));
    check!(run.ok(), "{}", run.show());
    let fresh = run.text("paneId");
    w.wait_for("the create to be killed", || {
        w.mapping(&fresh)
            .is_some_and(|m| m["lifecycleState"] == "failed" && m["lastError"]["kind"] == "daemon")
    })?;
    let message = w
        .mapping(&fresh)
        .map(|m| m["lastError"]["message"].clone())
        .unwrap_or_default();
    check!(
        message
            .as_str()
            .is_some_and(|m| m.contains("HERDR_SBX_SLOW_TIMEOUT_MS")),
        "{message}"
    );
    Ok(())
}

pub fn run_action_waits_for_the_result() -> Outcome {
    let w = World::new();
    let run = w.airlock(&["herdr", "run-action", "doctor", "30"], &[]);
    check!(
        run.code == 0 && run.ok() && run.result["action"] == "doctor",
        "{}",
        run.show()
    );
    let script = w.plugin_root.join("scripts/run-action.sh");
    std::fs::create_dir_all(script.parent().ok_or("parent")?).map_err(|e| e.to_string())?;
    std::fs::copy(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../herdr-plugin/scripts/run-action.sh"),
        &script,
    )
    .map_err(|e| e.to_string())?;
    let out = w
        .command(std::path::Path::new("/bin/sh"))
        .arg(&script)
        .args(["info", "30"])
        .output()
        .map_err(|e| e.to_string())?;
    let run = crate::world::Run::from(out);
    check!(
        run.code == 1 && run.kind() == "target",
        "a failing action exits 1: {}",
        run.show()
    );
    Ok(())
}

pub fn overlay_and_sandboxes_action() -> Outcome {
    let w = World::new();
    let repo = w.git_repo("repo");
    w.write_config(json!({"publish": ["3000"]}));
    let (pane, name) = w.start_agent(&repo)?;
    let run = w.action_with("sandboxes", Some("{}"), &[("FAKE_HERDR_POPUP_INPUT", "q")]);
    check!(
        run.ok() && run.result["entrypoint"] == "sandboxes",
        "{}",
        run.show()
    );
    w.wait_for("the overlay to render and close on q", || {
        let out = w.pane_outputs();
        out.contains(&pane)
            && out.contains(&name)
            && out.contains(&format!("airlock://{name}/3000"))
    })?;
    let run = w.action_with(
        "sandboxes",
        Some("{}"),
        &[("FAKE_HERDR_FAIL", "plugin pane")],
    );
    check!(
        !run.ok()
            && run.kind() == "unknown"
            && run.result["output"]
                .as_str()
                .is_some_and(|o| o.contains("fake herdr refuses")),
        "herdr refusing the overlay: {}",
        run.show()
    );
    Ok(())
}

pub fn manifest_declares_everything() -> Outcome {
    let text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../herdr-plugin/herdr-plugin.toml"),
    )
    .map_err(|e| e.to_string())?;
    let m: toml::Value = toml::from_str(&text).map_err(|e| e.to_string())?;
    check!(
        m["id"].as_str() == Some("airlock.sandbox")
            && m["min_herdr_version"].as_str() == Some("0.9.0"),
        "header"
    );
    check!(
        m["platforms"] == toml::Value::try_from(["linux", "macos"]).map_err(|e| e.to_string())?,
        "platforms"
    );
    let ids: Vec<&str> = m["actions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| a["id"].as_str())
        .collect();
    check!(
        ids == airlock_herdr::actions::ACTIONS,
        "all 14 actions, in order: {ids:?}"
    );
    for a in m["actions"].as_array().into_iter().flatten() {
        let argv: Vec<&str> = a["command"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str())
            .collect();
        check!(
            argv == [
                "bin/airlock",
                "herdr",
                "action",
                a["id"].as_str().unwrap_or("")
            ],
            "action argv {argv:?}"
        );
    }
    check!(
        m["events"][0]["on"].as_str() == Some("worktree.removed"),
        "the worktree hook"
    );
    let panes: Vec<&str> = m["panes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["id"].as_str())
        .collect();
    check!(
        panes == ["confirm-deletion", "sandboxes"],
        "panes {panes:?}"
    );
    check!(
        m["link_handlers"][0]["action"].as_str() == Some("open-port"),
        "link handler"
    );
    check!(
        m["build"][0]["command"]
            .as_array()
            .is_some_and(|c| c.len() == 2),
        "build step"
    );
    Ok(())
}
