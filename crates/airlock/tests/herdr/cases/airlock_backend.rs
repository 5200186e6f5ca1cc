//! `backend = "airlock"`: the fake herdr drives the plugin, the agent is a fake program in a REAL
//! airlock sandbox (`airlock run`). start-agent → the agent runs sandboxed in the worktree →
//! reconnect → open-shell → stop → forget; clone mode → a commit inside → fetch-changes. A machine
//! where no sandbox can start (no user namespaces) skips with the reason printed.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::check;
use crate::world::{Outcome, World};

/// The fake agent: proves where it runs (`$PWD`, `$AIRLOCK`, a host secret it must not see),
/// leaves a file in the worktree, lingers a moment, exits.
const AGENT: &str = r#"secret=absent; test -e "$HOME/.ssh/id_fake" && secret=visible
echo "fake-agent up pwd=$PWD airlock=${AIRLOCK:-no} secret=$secret"
echo ran >> .agent-ran
sleep 0.2"#;

/// A world with the airlock backend and the fake agent, or `None` (printed) when this machine
/// cannot start a sandbox.
pub fn airlock_world(extra: Value) -> Result<Option<(World, PathBuf)>, String> {
    let w = World::new();
    let repo = w.git_repo("repo");
    std::fs::create_dir_all(w.home.join(".ssh")).map_err(|e| e.to_string())?;
    std::fs::write(w.home.join(".ssh/id_fake"), "host secret").map_err(|e| e.to_string())?;
    let probe = w.airlock(
        &[
            "run",
            "--project",
            &repo.display().to_string(),
            "--",
            "true",
        ],
        &[],
    );
    if probe.code != 0 {
        println!(
            "skip: no airlock sandbox can start here (exit {}): {}",
            probe.code,
            probe.stderr.lines().last().unwrap_or("")
        );
        return Ok(None);
    }
    let mut config = json!({
        "backend": "airlock",
        "agentKind": "fake",
        "shell": "sh",
        "customAgents": {"fake": {
            "title": "Fake agent", "sbxAgent": "shell",
            "command": ["sh", "-c", AGENT], "herdrDetectionKind": null
        }}
    });
    if let (Some(c), Some(e)) = (config.as_object_mut(), extra.as_object()) {
        c.extend(e.clone());
    }
    w.write_config(config);
    Ok(Some((w, repo)))
}

/// Every output line of `pane`'s typed commands so far.
fn pane_output(w: &World, pane: &str) -> String {
    w.pane_runs(pane)
        .iter()
        .filter_map(|r| r["out"].as_str())
        .map(|p| std::fs::read_to_string(p).unwrap_or_default())
        .collect()
}

fn typed(w: &World, pane: &str) -> Vec<String> {
    w.pane_runs(pane)
        .iter()
        .filter_map(|r| r["text"].as_str().map(str::to_owned))
        .collect()
}

pub fn mount_flow() -> Outcome {
    let Some((w, repo)) = airlock_world(json!({}))? else {
        return Ok(());
    };
    mount_flow_in(w, repo)
}

/// The same flow with the plugin, herdr, the bridge and the sandboxes all run by the
/// unprivileged test user, as a developer runs them.
pub fn mount_flow_as_the_unprivileged_user() -> Outcome {
    let Some(user) = crate::world::other_user() else {
        println!("skip: needs root to run the plugin as the unprivileged user (AIRLOCK_TEST_USER)");
        return Ok(());
    };
    let Some((mut w, repo)) = airlock_world(json!({}))? else {
        return Ok(());
    };
    w.hand_to(user);
    mount_flow_in(w, repo)
}

fn mount_flow_in(w: World, repo: PathBuf) -> Outcome {
    std::fs::write(
        w.home.join(".profile"),
        "echo \"shell-up airlock=$AIRLOCK\"\n",
    )
    .map_err(|e| e.to_string())?;
    let run = w.action("start-agent", w.ctx(&repo));
    check!(run.ok(), "start-agent: {}", run.show());
    check!(run.result["backend"] == "airlock", "{}", run.result);
    let pane = run.text("paneId");
    let name = run.text("sandboxName");
    let line = typed(&w, &pane).join("\n");
    let exe =
        std::fs::canonicalize(w.plugin_root.join("bin/airlock")).map_err(|e| e.to_string())?;
    // The action's own executable, resolved (the plugin's bin/airlock links to it here).
    check!(
        line.starts_with(&format!("{} herdr bridge start ", exe.display()))
            && !line.contains("--sbx-bin"),
        "the typed line runs this airlock by absolute path, no sbx: {line}"
    );
    w.wait_for("the agent's first line", || {
        pane_output(&w, &pane).contains("fake-agent up")
    })?;
    w.wait_for_bridge_exit(&pane)?;
    let out = pane_output(&w, &pane);
    check!(
        out.contains(&format!(
            "fake-agent up pwd={} airlock=1 secret=absent",
            repo.display()
        )),
        "the agent ran sandboxed in the worktree, without the host's secret: {out}"
    );
    check!(
        repo.join(".agent-ran").exists(),
        "its write reached the worktree"
    );
    if let Some((uid, _)) = w.user() {
        use std::os::unix::fs::MetadataExt as _;
        let owner = std::fs::metadata(repo.join(".agent-ran")).map_err(|e| e.to_string())?;
        check!(
            owner.uid() == uid,
            "the agent wrote as the user {uid}, not {}",
            owner.uid()
        );
    }
    let m = w.mapping(&pane).ok_or("mapping")?;
    check!(
        m["backend"] == "airlock" && m["lifecycleState"] == "ready" && m["lastError"].is_null(),
        "mapping {m}"
    );
    let info = w.action("info", w.ctx_pane(&pane));
    check!(
        info.ok() && info.result["sandbox"]["name"] == name.as_str(),
        "info: {}",
        info.show()
    );
    let list = w.action("list-sandboxes", w.ctx_pane(&pane));
    check!(
        list.ok() && list.result["mappings"][0]["exists"] == true,
        "list: {}",
        list.show()
    );

    let again = w.action("reconnect", w.ctx_pane(&pane));
    check!(
        again.ok() && again.result["mode"] == "connect",
        "reconnect: {}",
        again.show()
    );
    w.wait_for("the agent again", || {
        pane_output(&w, &pane).matches("fake-agent up").count() == 2
    })?;
    w.wait_for_bridge_exit(&pane)?;

    let shell = w.action("open-shell", w.ctx_pane(&pane));
    check!(shell.ok(), "open-shell: {}", shell.show());
    let shell_pane = shell.text("paneId");
    w.wait_for("the shell's login line", || {
        pane_output(&w, &shell_pane).contains("shell-up airlock=1")
    })?;

    w.wait_for("the shell to end", || {
        w.mapping(&pane)
            .is_some_and(|m| m["shells"].as_array().is_some_and(Vec::is_empty))
    })?;
    let stop = w.action("stop", w.ctx_pane(&pane));
    check!(stop.ok(), "stop: {}", stop.show());
    check!(
        w.mapping(&pane).ok_or("mapping")?["lifecycleState"] == "stopped",
        "stopped"
    );

    let forget = w.confirmed_action("forget-mapping", &pane);
    check!(
        forget.ok() && forget.result["deleted"] == json!([name]),
        "forget: {}",
        forget.show()
    );
    check!(w.mapping(&pane).is_none(), "mapping dropped");
    check!(
        !w.state_dir.join(format!("airlock/{name}.json")).exists(),
        "the sandbox record is gone"
    );
    check!(
        repo.join(".agent-ran").exists(),
        "a mount-mode worktree is never deleted"
    );
    Ok(())
}

pub fn clone_flow_fetches_a_commit_made_inside() -> Outcome {
    const COMMITTER: &str = r#"git checkout -q -b agent-work && echo inside > inside.txt && git add inside.txt && git -c user.name=a -c user.email=a@e commit -q -m inside && echo "fake-agent up committed in $PWD""#;
    let Some((w, repo)) = airlock_world(json!({
        "workspaceMode": "clone",
        "customAgents": {"fake": {"sbxAgent": "shell", "command": ["sh", "-c", COMMITTER], "herdrDetectionKind": null}}
    }))?
    else {
        return Ok(());
    };
    let run = w.action("start-agent", w.ctx(&repo));
    check!(run.ok(), "start-agent: {}", run.show());
    let pane = run.text("paneId");
    let name = run.text("sandboxName");
    w.wait_for("the commit inside", || {
        pane_output(&w, &pane).contains("fake-agent up committed")
    })?;
    w.wait_for_bridge_exit(&pane)?;
    let out = pane_output(&w, &pane);
    let clone = clone_dir(&w, &name, &repo);
    check!(
        out.contains(&format!("committed in {}", clone.display())),
        "the agent worked in its private clone {}: {out}",
        clone.display()
    );
    check!(
        !repo.join("inside.txt").exists(),
        "the host checkout is untouched"
    );
    let fetch = w.action("fetch-changes", w.ctx_pane(&pane));
    check!(fetch.ok(), "fetch-changes: {}", fetch.show());
    let remote = format!("sandbox-{name}");
    check!(
        fetch.result["transport"] == "bundle"
            && fetch.result["branches"]
                .as_array()
                .is_some_and(|b| b.contains(&json!(format!("{remote}/agent-work")))),
        "fetched: {}",
        fetch.result
    );
    let shown = w.git(&repo, &["show", &format!("{remote}/agent-work:inside.txt")]);
    check!(shown.trim() == "inside", "the commit came in: {shown}");
    let forget = w.confirmed_action("forget-mapping", &pane);
    check!(forget.ok(), "forget: {}", forget.show());
    check!(
        !clone.exists(),
        "the private clone is removed with the sandbox"
    );
    let roots = w.airlock(&["sandboxes", "list", "--json", "--no-size"], &[]);
    check!(
        !roots.stdout.contains(&clone.display().to_string()),
        "its airlock state root is pruned: {}",
        roots.stdout
    );
    check!(repo.join(".git").is_dir(), "the host repo stays");
    Ok(())
}

fn clone_dir(w: &World, name: &str, repo: &Path) -> PathBuf {
    w.home
        .join(".local/share/airlock/herdr-clones")
        .join(name)
        .join(repo.file_name().unwrap_or_default())
}
