//! Bad input: malformed config, unknown mapping versions, hostile pane ids, unquotable paths,
//! a missing or garbage invocation context, a sandbox name clash.

use serde_json::json;

use crate::check;
use crate::world::{Outcome, World};

pub fn config() -> Outcome {
    let w = World::new();
    let repo = w.git_repo("repo");
    std::fs::write(
        w.config_dir.join("config.json"),
        "{\n  \"agentKind\": \"codex\",\n  \"paneRatoi\": 0.3\n}",
    )
    .map_err(|e| e.to_string())?;
    let run = w.action("start-agent", w.ctx(&repo));
    let msg = run.text("message");
    check!(
        !run.ok() && run.kind() == "config" && msg.contains("paneRatoi") && msg.contains("line 3"),
        "{}",
        run.show()
    );
    std::fs::write(w.config_dir.join("config.json"), "{\"agentKind\": ")
        .map_err(|e| e.to_string())?;
    let run = w.action("doctor", json!({}));
    check!(!run.ok() && run.kind() == "config", "{}", run.show());
    w.write_config(
        json!({"customAgents": {"x": {"sbxAgent": "shell", "command": ["x"], "setupscript": "y"}}}),
    );
    let run = w.action("list-sandboxes", json!({}));
    check!(
        !run.ok()
            && run.kind() == "config"
            && run.result["message"]
                .as_str()
                .is_some_and(|m| m.contains("setupscript")),
        "{}",
        run.show()
    );
    check!(
        w.argv_log("FAKE_HERDR_LOG").is_empty(),
        "nothing reached herdr"
    );
    Ok(())
}

pub fn mapping_version_and_pane_ids() -> Outcome {
    let w = World::new();
    let repo = w.git_repo("repo");
    // The fake names a split pane <workspace of the source>:p<n>, so hostile workspace ids give
    // hostile mapping pane ids.
    for (i, ws) in ["../../../etc/x", "a b'c\"d$e`f", &"é/".repeat(100)]
        .into_iter()
        .enumerate()
    {
        let source = format!("src{i}");
        w.herdr_state(|s| s["panes"][&source] = json!({"workspace_id": ws}));
        let ctx = json!({"workspace_id": ws, "focused_pane_id": source, "focused_pane_cwd": repo.display().to_string()});
        let run = w.action("start-agent", ctx);
        check!(run.ok(), "{ws:?}: {}", run.show());
        let pane = run.text("paneId");
        check!(pane.starts_with(ws), "hostile pane id {pane:?}");
        w.wait_for("the bridge with a hostile pane id", || {
            w.mapping(&pane)
                .is_some_and(|m| m["bridge"]["exitedAt"].is_string())
        })?;
    }
    for entry in std::fs::read_dir(w.state_dir.join("panes"))
        .map_err(|e| e.to_string())?
        .flatten()
    {
        let name = entry.file_name().to_string_lossy().into_owned();
        check!(
            name.chars()
                .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c)),
            "safe file name {name:?}"
        );
    }
    // A pane id the pane shell cannot take is refused before anything is created.
    w.herdr_state(|s| s["panes"]["nl"] = json!({"workspace_id": "bad\nws"}));
    let run = w.action("start-agent", json!({"workspace_id": "bad\nws", "focused_pane_id": "nl", "focused_pane_cwd": repo.display().to_string()}));
    check!(
        !run.ok() && run.kind() == "target",
        "newline pane id: {}",
        run.show()
    );
    check!(
        w.herdr_state(|s| s["panes"]
            .as_object()
            .is_some_and(|p| !p.keys().any(|k| k.starts_with("bad\n")))),
        "the unusable pane was closed"
    );
    let (pane, _) = w.start_agent(&repo)?;
    let store = airlock_herdr::store::Store::new(&w.state_dir);
    let path = store.mapping_path(&pane);
    let mut m: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).map_err(|e| e.to_string())?)
            .map_err(|e| e.to_string())?;
    m["version"] = json!(2);
    std::fs::write(&path, m.to_string()).map_err(|e| e.to_string())?;
    let run = w.action("list-sandboxes", json!({}));
    check!(
        !run.ok()
            && run.kind() == "startup"
            && run.result["message"]
                .as_str()
                .is_some_and(|s| s.contains("version 2")),
        "{}",
        run.show()
    );
    let prune = w.action_with(
        "prune-mappings",
        Some("{}"),
        &[("FAKE_HERDR_POPUP_INPUT", "DELETE\n")],
    );
    check!(
        !prune.ok() && prune.kind() == "startup" && path.exists(),
        "never dropped: {}",
        prune.show()
    );
    Ok(())
}

pub fn context_and_paths() -> Outcome {
    let w = World::new();
    let run = w.action_with("start-agent", Some("{this is not json"), &[]);
    check!(
        !run.ok()
            && run.kind() == "startup"
            && run.result["message"]
                .as_str()
                .is_some_and(|m| m.contains("HERDR_PLUGIN_CONTEXT_JSON")),
        "{}",
        run.show()
    );
    let run = w.action_with("start-agent", None, &[]);
    check!(
        !run.ok() && run.kind() == "target",
        "missing context: {}",
        run.show()
    );
    let run = w.action_with("info", None, &[]);
    check!(
        !run.ok() && run.kind() == "target",
        "info without a pane: {}",
        run.show()
    );
    let odd = w.root.join("back\\slash");
    std::fs::create_dir_all(&odd).map_err(|e| e.to_string())?;
    let run = w.action("start-agent", w.ctx(&odd));
    check!(
        !run.ok()
            && run.kind() == "target"
            && run.result["message"]
                .as_str()
                .is_some_and(|m| m.contains("backslash")),
        "{}",
        run.show()
    );
    let quoted = w.root.join("it's a dir");
    std::fs::create_dir_all(&quoted).map_err(|e| e.to_string())?;
    let (pane, _) = w.start_agent(&quoted)?;
    check!(
        w.mapping(&pane).is_some_and(|m| m["localPath"]
            .as_str()
            .is_some_and(|p| p.ends_with("it's a dir"))),
        "quoted path works"
    );
    let run = w.action("start-agent", w.ctx(&w.home));
    check!(
        !run.ok()
            && run.kind() == "target"
            && run.result["message"]
                .as_str()
                .is_some_and(|m| m.contains("Refusing")),
        "home: {}",
        run.show()
    );
    Ok(())
}

pub fn name_clash() -> Outcome {
    let mut w = World::new();
    let repo = w.git_repo("repo");
    w.set(
        "FAKE_SBX_FAIL",
        "create=Error: sandbox \"herdr-claude-code-x\" already exists",
    );
    let run = w.action("start-agent", w.ctx(&repo));
    check!(run.ok(), "{}", run.show());
    let pane = run.text("paneId");
    w.wait_for("the bridge to fail", || {
        w.mapping(&pane)
            .is_some_and(|m| m["lifecycleState"] == "failed")
    })?;
    check!(
        w.mapping(&pane)
            .is_some_and(|m| m["lastError"]["kind"] == "conflict"),
        "a clash sbx does not list is a conflict"
    );
    Ok(())
}
