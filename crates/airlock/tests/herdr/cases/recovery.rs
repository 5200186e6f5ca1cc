//! When panes and processes are not what a mapping expects: adoption after a herdr restart, a
//! command swallowed by a busy pane, and the guards that refuse while an agent, bridge or shell
//! still runs.

use serde_json::json;

use crate::check;
use crate::world::{Outcome, World};

pub fn adopts_a_mapping_whose_pane_is_gone() -> Outcome {
    let w = World::new();
    let repo = w.git_repo("repo");
    let (pane, name) = w.start_agent(&repo)?;
    // herdr restarted: the pane is gone.
    w.remove_pane(&pane);
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
    let new_pane = run.text("paneId");
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
    let adopted = run.text("paneId");
    w.wait_for("the bridge to exit", || {
        w.mapping(&adopted)
            .is_some_and(|m| m["bridge"]["pid"].is_null())
    })?;
    w.remove_pane(&adopted);
    let run = w.confirmed_action("replace-sandbox", "w1:p1");
    check!(
        run.ok()
            && run.result["adoptedFrom"] == adopted.as_str()
            && run.result["deleted"] == json!([name]),
        "replace adopts: {}",
        run.show()
    );
    let fresh = run.text("sandboxName");
    let pane_now = run.text("paneId");
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
    let moved = run.text("movedTo");
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
        swallowed["label"]
            .as_str()
            .is_some_and(|l| l.ends_with(&format!(" (moved to {moved})"))),
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

pub fn guards_refuse_while_agent_or_bridge_runs() -> Outcome {
    let mut w = World::new();
    let repo = w.git_repo("repo");
    let hold = w.root.join("release-agent");
    w.set("FAKE_SBX_ATTACH_HOLD", &hold.display().to_string());
    let run = w.action("start-agent", w.ctx(&repo));
    check!(run.ok(), "{}", run.show());
    let pane = run.text("paneId");
    w.wait_for("the agent to attach", || {
        w.mapping(&pane)
            .is_some_and(|m| m["lifecycleState"] == "ready")
    })?;
    for action in ["stop", "reconnect", "forget-mapping", "replace-sandbox"] {
        let run = w.confirmed_action(action, &pane);
        check!(
            run.refused_as_conflict("bridge"),
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
        run.refused_as_conflict("herdr still detects claude"),
        "{}",
        run.show()
    );
    w.herdr_state(|s| s["panes"][&pane]["agent"] = json!(null));
    let run = w.action("stop", w.ctx_pane(&pane));
    check!(run.ok(), "stop once idle: {}", run.show());
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
        let run = w.confirmed_action(action, &pane);
        check!(
            run.refused_as_conflict("open-shell"),
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
    let run = w.confirmed_action("forget-mapping", &pane);
    check!(
        run.ok() && w.sandbox(&name).is_none(),
        "forget once the shell left: {}",
        run.show()
    );
    Ok(())
}
