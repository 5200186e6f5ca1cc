//! The airlock backend, attacker first: a mapping or record that names something outside
//! airlock's own state never makes the plugin delete, signal or run it; paths typed into a pane
//! are quoted. Also which backend the default picks, and why doctor says so.

use std::path::Path;

use serde_json::{Value, json};

use crate::check;
use crate::world::{Outcome, World};

/// Saves a ready airlock mapping for `pane` naming sandbox `name`, as a tampered store would.
fn plant_mapping(w: &World, pane: &str, name: &str, local: &Path, mode: &str) -> Outcome {
    let m: airlock_herdr::store::PaneMapping = serde_json::from_value(json!({
        "version": 1, "paneId": pane, "sandboxName": name, "workspaceId": "w1",
        "agentKind": "claude-code", "sbxAgent": "claude", "localPath": local.display().to_string(),
        "workdir": local.display().to_string(), "workspaceMode": mode,
        "lifecycleState": "ready", "backend": "airlock"
    }))
    .map_err(|e| e.to_string())?;
    let mut m = m;
    airlock_herdr::store::Store::new(&w.state_dir)
        .save(&mut m)
        .map_err(|e| e.to_string())
}

fn plant_record(w: &World, name: &str, record: Value) -> Outcome {
    let dir = w.state_dir.join("airlock");
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    std::fs::write(dir.join(format!("{name}.json")), record.to_string()).map_err(|e| e.to_string())
}

fn victim(w: &World) -> Result<std::path::PathBuf, String> {
    let v = w.root.join("victim");
    std::fs::create_dir_all(&v).map_err(|e| e.to_string())?;
    std::fs::write(v.join("precious"), "keep").map_err(|e| e.to_string())?;
    Ok(v)
}

pub fn default_follows_sbx_and_doctor_says_why() -> Outcome {
    let mut w = World::new();
    let run = w.action("doctor", json!({}));
    check!(
        run.ok()
            && run.result["backend"] == "sbx"
            && run.result["backendReason"]
                .as_str()
                .is_some_and(|r| r.contains("installed and signed in")),
        "signed-in sbx is the default: {}",
        run.show()
    );
    w.set(
        "FAKE_SBX_FAIL",
        "version=Error: not logged in; run \"sbx login\" first",
    );
    let run = w.action("doctor", json!({}));
    check!(
        run.ok()
            && run.result["backend"] == "airlock"
            && run.result["backendReason"].as_str().is_some_and(|r| r
                .contains("does not answer signed in")
                && r.contains("authentication")),
        "signed out: airlock, with the reason: {}",
        run.show()
    );
    w.set("FAKE_SBX_FAIL", "");
    w.set("PATH", "/usr/bin:/bin");
    let run = w.action("doctor", json!({}));
    check!(
        run.ok()
            && run.result["backend"] == "airlock"
            && run.result["sbxBin"].is_null()
            && run.result["backendReason"]
                .as_str()
                .is_some_and(|r| r.contains("not installed")),
        "no sbx: airlock: {}",
        run.show()
    );
    w.write_config(json!({"backend": "sbx"}));
    let run = w.action("doctor", json!({}));
    check!(
        !run.ok() && run.kind() == "startup",
        "\"backend\": \"sbx\" without sbx fails as the original: {}",
        run.show()
    );
    w.write_config(json!({"backend": "docker"}));
    let run = w.action("doctor", json!({}));
    check!(
        !run.ok()
            && run.kind() == "config"
            && run.result["message"]
                .as_str()
                .is_some_and(|m| m.contains("docker")),
        "an unknown backend is refused naming it: {}",
        run.show()
    );
    w.write_config(json!({"backend": "airlock", "memory": "8g", "kits": ["k"]}));
    let repo = w.git_repo("repo");
    let run = w.action("start-agent", w.ctx(&repo));
    check!(
        !run.ok()
            && run.kind() == "config"
            && run.result["message"]
                .as_str()
                .is_some_and(|m| m.contains("kits, memory"))
            && w.herdr_calls() == 0,
        "sbx-only keys are refused before a pane opens: {}",
        run.show()
    );
    Ok(())
}

pub fn a_tampered_sandbox_name_deletes_nothing_outside() -> Outcome {
    let w = World::new();
    w.write_config(json!({"backend": "airlock"}));
    let repo = w.git_repo("repo");
    let v = victim(&w)?;
    w.add_pane("w1:p7", "w1");
    let rel = "../../../victim";
    plant_mapping(&w, "w1:p7", rel, &repo, "clone")?;
    let forget = w.confirmed_action("forget-mapping", "w1:p7");
    check!(!forget.ok(), "refused: {}", forget.show());
    check!(
        forget.stdout.contains(rel) || forget.stderr.contains(rel),
        "the error names the value: {}",
        forget.show()
    );
    check!(v.join("precious").exists(), "nothing outside was deleted");
    check!(repo.join(".git").is_dir(), "the worktree stays");
    Ok(())
}

pub fn a_tampered_record_is_refused_and_links_are_not_followed() -> Outcome {
    let w = World::new();
    w.write_config(json!({"backend": "airlock"}));
    let repo = w.git_repo("repo");
    let v = victim(&w)?;
    let name = "herdr-claude-code-0123456789ab";
    w.add_pane("w1:p7", "w1");
    plant_mapping(&w, "w1:p7", name, &repo, "clone")?;
    // A record whose clone "is" the victim directory: refused, naming the value.
    let record = json!({"version": 1, "name": name, "localPath": repo.display().to_string(),
        "project": v.display().to_string(), "clone": true, "createdAt": "x", "pids": []});
    plant_record(&w, name, record.clone())?;
    let forget = w.confirmed_action("forget-mapping", "w1:p7");
    check!(
        !forget.ok() && forget.stdout.contains(&v.display().to_string()),
        "a record pointing elsewhere is refused with the value: {}",
        forget.show()
    );
    check!(v.join("precious").exists(), "the victim stays");
    // A valid record whose clone directory was swapped for a link to the victim: only the link goes.
    let clones = w.home.join(".local/share/airlock/herdr-clones");
    std::fs::create_dir_all(&clones).map_err(|e| e.to_string())?;
    std::os::unix::fs::symlink(&v, clones.join(name)).map_err(|e| e.to_string())?;
    let project = clones.join(name).join("repo");
    let mut record = record;
    record["project"] = json!(project.display().to_string());
    plant_record(&w, name, record)?;
    let forget = w.confirmed_action("forget-mapping", "w1:p7");
    check!(forget.ok(), "forget: {}", forget.show());
    check!(v.join("precious").exists(), "the link was not followed");
    check!(
        std::fs::symlink_metadata(clones.join(name)).is_err(),
        "the link itself is gone"
    );
    Ok(())
}

pub fn stop_signals_only_sessions_airlock_lists() -> Outcome {
    let w = World::new();
    w.write_config(json!({"backend": "airlock"}));
    let repo = w.git_repo("repo");
    let name = "herdr-claude-code-0123456789ab";
    w.add_pane("w1:p7", "w1");
    plant_mapping(&w, "w1:p7", name, &repo, "mount")?;
    let mut bystander = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .map_err(|e| e.to_string())?;
    plant_record(
        &w,
        name,
        json!({"version": 1, "name": name, "localPath": repo.display().to_string(),
            "project": repo.display().to_string(), "clone": false, "createdAt": "x",
            "pids": [bystander.id()]}),
    )?;
    let stop = w.action("stop", w.ctx_pane("w1:p7"));
    let alive = bystander.try_wait().map_err(|e| e.to_string())?.is_none();
    let _ = bystander.kill();
    let _ = bystander.wait();
    check!(stop.ok(), "stop: {}", stop.show());
    check!(
        alive,
        "a pid the record names but airlock does not list is never signalled"
    );
    Ok(())
}

pub fn paths_typed_into_a_pane_are_quoted() -> Outcome {
    let Some((mut w, repo)) = super::airlock_backend::airlock_world(json!({}))? else {
        return Ok(());
    };
    // A config directory whose name is shell syntax: the typed line must carry it as one word.
    let odd = w.root.join("cfg it's $(touch PWNED) `touch PWNED2`");
    std::fs::create_dir_all(&odd).map_err(|e| e.to_string())?;
    std::fs::copy(w.config_dir.join("config.json"), odd.join("config.json"))
        .map_err(|e| e.to_string())?;
    w.set("HERDR_PLUGIN_CONFIG_DIR", &odd.display().to_string());
    let run = w.action("start-agent", w.ctx(&repo));
    check!(run.ok(), "start-agent: {}", run.show());
    let pane = run.text("paneId");
    w.wait_for_bridge_exit(&pane)?;
    let m = w.mapping(&pane).ok_or("mapping")?;
    check!(
        m["lifecycleState"] == "ready" && m["lastError"].is_null(),
        "the bridge read the config from the odd directory: {m}"
    );
    for dir in [&repo, &w.root, &w.plugin_root] {
        check!(
            !dir.join("PWNED").exists() && !dir.join("PWNED2").exists(),
            "nothing in the path ran as shell in {}",
            dir.display()
        );
    }
    Ok(())
}
