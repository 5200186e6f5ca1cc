//! Deletions: the popup confirmed, cancelled and timed out; the worktree hook; prune-mappings; an
//! unreadable `sbx ls` never treated as "sandbox gone".

use serde_json::json;

use crate::check;
use crate::world::{Outcome, World};

pub fn popup_cancelled_and_timed_out() -> Outcome {
    let mut w = World::new();
    let repo = w.git_repo("repo");
    let (pane, name) = w.start_agent(&repo)?;
    let ctx = w.ctx_pane(&pane).to_string();
    let run = w.action_with(
        "forget-mapping",
        Some(&ctx),
        &[("FAKE_HERDR_POPUP_INPUT", "no thanks\n")],
    );
    check!(
        !run.ok() && run.kind() == "cancelled",
        "declined: {}",
        run.show()
    );
    check!(
        w.sandbox(&name).is_some() && w.mapping(&pane).is_some(),
        "nothing deleted"
    );
    check!(
        w.mapping(&pane).is_some_and(|m| m["deletion"].is_null()),
        "no claim left behind"
    );
    w.set("HERDR_SBX_CONFIRMATION_TIMEOUT_MS", "400");
    let run = w.action("replace-sandbox", w.ctx_pane(&pane));
    check!(
        !run.ok()
            && run.kind() == "cancelled"
            && run.result["message"]
                .as_str()
                .is_some_and(|m| m.contains("Nobody answered")),
        "timed out: {}",
        run.show()
    );
    check!(w.sandbox(&name).is_some(), "nothing deleted");
    let leftovers = std::fs::read_dir(w.state_dir.join("confirmations"))
        .map(|d| d.count())
        .unwrap_or(0);
    check!(leftovers == 0, "request files swept ({leftovers} left)");
    Ok(())
}

pub fn worktree_hook() -> Outcome {
    let w = World::new();
    let repo = w.git_repo("repo");
    let other = w.git_repo("other");
    let (pane_a, name_a) = w.start_agent(&repo)?;
    let (pane_b, name_b) = w.start_agent(&repo)?;
    let (pane_c, name_c) = w.start_agent(&other)?;
    let event = json!({"event": "worktree.removed", "data": {"type": "worktree_removed", "workspace_id": "w1", "forced": false,
        "worktree": {"path": repo.display().to_string(), "is_bare": false, "is_detached": false, "is_prunable": false, "is_linked_worktree": true, "label": "repo"}}});
    // Declined: everything is kept for prune-mappings.
    let run = w.airlock(
        &["herdr", "event"],
        &[
            ("HERDR_PLUGIN_EVENT_JSON", &event.to_string()),
            ("FAKE_HERDR_POPUP_INPUT", "keep\n"),
        ],
    );
    check!(
        run.ok() && run.result["confirmed"] == false,
        "declined: {}",
        run.show()
    );
    check!(
        w.sandbox(&name_a).is_some() && w.mapping(&pane_a).is_some(),
        "kept"
    );
    let run = w.airlock(
        &["herdr", "event"],
        &[
            ("HERDR_PLUGIN_EVENT_JSON", &event.to_string()),
            ("FAKE_HERDR_POPUP_INPUT", "DELETE\n"),
        ],
    );
    check!(
        run.ok()
            && run.result["confirmed"] == true
            && run.result["deleted"].as_array().map_or(0, Vec::len) == 2,
        "confirmed: {}",
        run.show()
    );
    check!(
        w.sandbox(&name_a).is_none()
            && w.sandbox(&name_b).is_none()
            && w.mapping(&pane_a).is_none()
            && w.mapping(&pane_b).is_none(),
        "both deleted"
    );
    check!(
        w.sandbox(&name_c).is_some() && w.mapping(&pane_c).is_some(),
        "the other worktree's sandbox stays"
    );
    let popups = w.herdr_state(|s| s["popups"].as_array().map_or(0, Vec::len));
    check!(popups == 2, "one popup per hook run ({popups})");
    let run = w.airlock(
        &["herdr", "event"],
        &[("HERDR_PLUGIN_EVENT_JSON", "{garbage")],
    );
    check!(
        !run.ok() && run.kind() == "target",
        "garbage event: {}",
        run.show()
    );
    Ok(())
}

pub fn prune_mappings() -> Outcome {
    let w = World::new();
    let repo = w.git_repo("repo");
    let (gone_both, name_gone) = w.start_agent(&repo)?;
    let (orphan, name_orphan) = w.start_agent(&repo)?;
    let (alive, _) = w.start_agent(&repo)?;
    w.herdr_state(|s| {
        let panes = s["panes"].as_object_mut().expect("panes");
        panes.remove(&gone_both);
        panes.remove(&orphan);
    });
    w.sbx_state(|s| s["sandboxes"].as_object_mut().map(|m| m.remove(&name_gone)));
    let run = w.action_with(
        "prune-mappings",
        Some("{}"),
        &[("FAKE_HERDR_POPUP_INPUT", "DELETE\n")],
    );
    check!(run.ok(), "prune: {}", run.show());
    check!(
        run.result["pruned"][0]["paneId"] == gone_both.as_str()
            && run.result["pruned"].as_array().map_or(0, Vec::len) == 1,
        "pruned {}",
        run.result
    );
    check!(
        run.result["deleted"] == json!([name_orphan]) && run.result["orphansConfirmed"] == true,
        "orphan deleted {}",
        run.result
    );
    // A mapping whose pane and sandbox both exist is no candidate: it is not listed at all.
    check!(run.result["kept"] == json!([]), "kept {}", run.result);
    check!(
        w.sandbox(&name_orphan).is_none()
            && w.mapping(&orphan).is_none()
            && w.mapping(&gone_both).is_none(),
        "cleaned"
    );
    check!(w.mapping(&alive).is_some(), "the live one stays");
    Ok(())
}

pub fn unreadable_ls_is_never_gone() -> Outcome {
    let mut w = World::new();
    let repo = w.git_repo("repo");
    let (mut pane, name) = w.start_agent(&repo)?;
    for format in ["garbage", "unnamed"] {
        w.remove_pane(&pane);
        w.set("FAKE_SBX_LS_FORMAT", format);
        let list = w.action("list-sandboxes", json!({}));
        check!(
            list.ok()
                && list.result["mappings"][0]["exists"].is_null()
                && list.result["sandboxError"]["kind"] == "unknown"
                && list.result["sandboxError"]["message"].is_string(),
            "{format}: {}",
            list.show()
        );
        let prune = w.action_with(
            "prune-mappings",
            Some("{}"),
            &[("FAKE_HERDR_POPUP_INPUT", "DELETE\n")],
        );
        check!(
            !prune.ok() && prune.kind() == "unknown",
            "{format}: prune fails closed: {}",
            prune.show()
        );
        check!(
            w.mapping(&pane).is_some() && w.sandbox(&name).is_some(),
            "{format}: nothing pruned or deleted"
        );
        let reconnect = w.action("reconnect", w.ctx_pane(&pane));
        check!(
            reconnect.ok(),
            "{format}: reconnect adopts: {}",
            reconnect.show()
        );
        pane = reconnect.text("paneId");
        w.wait_for("the bridge to give up", || {
            w.mapping(&pane)
                .is_some_and(|m| m["bridge"]["exitedAt"].is_string())
        })?;
        let m = w.mapping(&pane).ok_or("mapping")?;
        check!(
            m["lifecycleState"] != "missing",
            "{format}: never marked missing: {m}"
        );
        w.wait_for("the pane to show the listing error", || {
            w.pane_outputs().contains("sbx ls --json")
        })?;
    }
    Ok(())
}

pub fn mapping_changed_during_popup() -> Outcome {
    let mut w = World::new();
    let repo = w.git_repo("repo");
    let (pane, name) = w.start_agent(&repo)?;
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    w.set(
        "FAKE_HERDR_ON_POPUP",
        &format!(
            "'{}' touch-mapping '{}' '{}'",
            exe.display(),
            w.state_dir.display(),
            pane
        ),
    );
    let run = w.confirmed_action("forget-mapping", &pane);
    check!(
        run.refused_as_conflict("changed while the confirmation popup"),
        "{}",
        run.show()
    );
    check!(
        w.sandbox(&name).is_some() && w.mapping(&pane).is_some_and(|m| m["deletion"].is_null()),
        "nothing deleted, no claim left"
    );
    Ok(())
}

pub fn no_session_during_a_deletion() -> Outcome {
    let mut w = World::new();
    let repo = w.git_repo("repo");
    let (pane, name) = w.start_agent(&repo)?;
    w.set("FAKE_SBX_DELAY_MS", "rm=2000");
    let child = w.spawn_action("forget-mapping", &pane, "DELETE\n")?;
    w.wait_for("the deletion claim", || {
        w.mapping(&pane)
            .is_some_and(|m| m["deletion"]["pid"].is_u64())
    })?;
    for action in ["reconnect", "open-shell", "replace-sandbox"] {
        let run = w.confirmed_action(action, &pane);
        check!(
            run.refused_as_conflict("deleting"),
            "{action}: {}",
            run.show()
        );
    }
    // A bridge typed earlier that starts now refuses too.
    let bridge = w.airlock(
        &[
            "herdr",
            "bridge",
            "connect",
            "--pane-id",
            &pane,
            "--state-dir",
            &w.state_dir.display().to_string(),
            "--config-dir",
            &w.config_dir.display().to_string(),
        ],
        &[],
    );
    check!(
        bridge.code == 1 && bridge.stdout.contains("deleting"),
        "bridge: {}",
        bridge.stdout
    );
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    let run = crate::world::Run::from(out);
    check!(
        run.ok() && run.result["deleted"] == json!([name]),
        "the deletion finished: {}",
        run.show()
    );
    Ok(())
}

pub fn failures_after_delete_are_reported() -> Outcome {
    let mut w = World::new();
    let repo = w.git_repo("repo");
    let (pane, name) = w.start_agent(&repo)?;
    w.remove_pane(&pane);
    w.set(
        "FAKE_SBX_FAIL",
        "rm=Error: remove /var/lib/sbx/x: permission denied",
    );
    let run = w.action_with(
        "prune-mappings",
        Some("{}"),
        &[("FAKE_HERDR_POPUP_INPUT", "DELETE\n")],
    );
    let failure = &run.result["failures"][0];
    check!(
        run.ok() && failure["errorKind"] == "permission" && failure["paneId"] == pane.as_str(),
        "{}",
        run.show()
    );
    let m = w.mapping(&pane).ok_or("mapping kept")?;
    check!(
        m["deletion"].is_null() && m["lastError"]["kind"] == "permission",
        "claim released, error recorded: {m}"
    );
    check!(w.sandbox(&name).is_some(), "still there");
    // The worktree hook does nothing when cleanupOnWorktreeRemoved is false.
    w.write_config(json!({"cleanupOnWorktreeRemoved": false}));
    let popups_before = w.herdr_state(|s| s["popups"].as_array().map_or(0, Vec::len));
    let event = json!({"event": "worktree.removed", "data": {"worktree": {"path": repo.display().to_string()}}});
    let run = w.airlock(
        &["herdr", "event"],
        &[
            ("HERDR_PLUGIN_EVENT_JSON", &event.to_string()),
            ("FAKE_HERDR_POPUP_INPUT", "DELETE\n"),
        ],
    );
    check!(
        run.ok() && run.result["confirmed"].is_null() && run.result["mappings"] == json!([pane]),
        "{}",
        run.show()
    );
    check!(
        w.herdr_state(|s| s["popups"].as_array().map_or(0, Vec::len)) == popups_before,
        "no popup"
    );
    Ok(())
}

pub fn popup_closed_without_an_answer() -> Outcome {
    let mut w = World::new();
    let repo = w.git_repo("repo");
    let (pane, name) = w.start_agent(&repo)?;
    w.set("HERDR_SBX_CONFIRMATION_TIMEOUT_MS", "120000");
    let started = std::time::Instant::now();
    let child = w.spawn_action("forget-mapping", &pane, "__hold__")?;
    let confirmations = w.state_dir.join("confirmations");
    let popup_file = || {
        std::fs::read_dir(&confirmations)
            .ok()?
            .flatten()
            .map(|e| e.path())
            .find(|p| p.extension().is_some_and(|x| x == "popup"))
    };
    w.wait_for("the popup to register", || popup_file().is_some())?;
    let text =
        std::fs::read_to_string(popup_file().ok_or("popup file")?).map_err(|e| e.to_string())?;
    let pid: i32 = text
        .split_whitespace()
        .next()
        .and_then(|p| p.parse().ok())
        .ok_or("popup pid")?;
    // Closing the popup pane hangs up its process group. Never signal a group that is not a
    // real one: getpgid of a gone pid is -1, and kill(1) would reach init.
    // SAFETY: getpgid has no preconditions.
    let group = unsafe { libc::getpgid(pid) };
    if group <= 1 {
        return Err(format!(
            "the popup (pid {pid}) has no process group to hang up"
        ));
    }
    // SAFETY: signalling the fake popup's own process group.
    unsafe { libc::kill(-group, libc::SIGHUP) };
    let run = crate::world::Run::from(child.wait_with_output().map_err(|e| e.to_string())?);
    check!(
        !run.ok()
            && run.kind() == "cancelled"
            && run.result["message"]
                .as_str()
                .is_some_and(|m| m.contains("closed without an answer")),
        "{}",
        run.show()
    );
    check!(
        started.elapsed() < std::time::Duration::from_secs(60),
        "did not wait out the window"
    );
    check!(
        w.sandbox(&name).is_some() && w.mapping(&pane).is_some(),
        "nothing deleted"
    );
    Ok(())
}
