//! Clone mode and fetch-changes with real git repositories: via the sandbox remote while attached,
//! and via a bundle through `sbx exec` + `sbx cp` otherwise.

use std::path::Path;

use serde_json::json;

use crate::check;
use crate::world::{Outcome, World};

/// The agent's work inside the fake sandbox's clone: a new branch with a commit.
fn agent_commits(w: &World, name: &str, branch: &str) -> Result<String, String> {
    let clone = w.root.join("sbx-root").join(name).join("clone");
    check!(
        clone.join(".git").is_dir(),
        "clone mode made a private clone at {}",
        clone.display()
    );
    w.git(&clone, &["checkout", "-q", "-b", branch]);
    std::fs::write(clone.join("agent.txt"), "work\n").map_err(|e| e.to_string())?;
    w.git(&clone, &["add", "agent.txt"]);
    w.git(&clone, &["commit", "-q", "-m", "agent work"]);
    Ok(w.git(&clone, &["rev-parse", "HEAD"]).trim().to_owned())
}

fn ref_of(w: &World, repo: &Path, r: &str) -> String {
    w.git(repo, &["rev-parse", r]).trim().to_owned()
}

pub fn fetch_via_bundle() -> Outcome {
    let w = World::new();
    let repo = w.git_repo("repo");
    w.write_config(json!({"workspaceMode": "clone"}));
    let (pane, name) = w.start_agent(&repo)?;
    let create = w
        .argv_log("FAKE_SBX_LOG")
        .into_iter()
        .find(|a| a[0] == "create")
        .ok_or("create")?;
    check!(
        create.contains(&"--clone".to_owned()),
        "--clone passed: {create:?}"
    );
    let session = w.sandbox(&name).ok_or("sandbox")?["sessions"][0].clone();
    check!(
        session["workdir"].is_null(),
        "no workdir in clone mode: {session}"
    );
    let head = agent_commits(&w, &name, "agent-work")?;
    // Also a branch named like a host branch, with new commits.
    let run = w.action("fetch-changes", w.ctx_pane(&pane));
    check!(
        run.ok() && run.result["transport"] == "bundle",
        "fetch: {}",
        run.show()
    );
    let remote = format!("sandbox-{name}");
    check!(
        run.result["remote"] == remote.as_str(),
        "remote {}",
        run.result
    );
    let branches = run.result["branches"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    check!(
        branches.contains(&json!(format!("{remote}/agent-work")))
            && branches.contains(&json!(format!("{remote}/main"))),
        "branches {branches:?}"
    );
    check!(
        ref_of(&w, &repo, &format!("{remote}/agent-work")) == head,
        "fetched the agent's commit"
    );
    let keep = run.result["keep"].as_array().cloned().unwrap_or_default();
    check!(
        keep.len() == 1 && keep[0]["local"] == "agent-work",
        "only unreached refs are kept: {keep:?}"
    );
    check!(
        keep[0]["command"]
            == format!(
                "git -C {} branch agent-work {remote}/agent-work",
                repo.display()
            )
            .as_str(),
        "command {}",
        keep[0]
    );
    check!(
        run.stdout.contains(&format!(
            "git -C {} branch agent-work {remote}/agent-work",
            repo.display()
        )),
        "printed: {}",
        run.stdout
    );
    // A host branch of the same name gets a -sandbox suffix.
    w.git(&repo, &["branch", "agent-work", "main"]);
    let run = w.action("fetch-changes", w.ctx_pane(&pane));
    check!(
        run.ok() && run.result["keep"][0]["local"] == "agent-work-sandbox",
        "suffix: {}",
        run.show()
    );
    // A stopped sandbox uses the bundle too (sbx exec starts it).
    check!(w.action("stop", w.ctx_pane(&pane)).ok(), "stop");
    let run = w.action("fetch-changes", w.ctx_pane(&pane));
    check!(
        run.ok() && run.result["transport"] == "bundle",
        "stopped: {}",
        run.show()
    );
    Ok(())
}

pub fn fetch_via_remote() -> Outcome {
    let w = World::new();
    let repo = w.git_repo("repo");
    w.write_config(json!({"workspaceMode": "clone"}));
    let (pane, name) = w.start_agent(&repo)?;
    let head = agent_commits(&w, &name, "feature/x")?;
    // While sbx run is attached, sbx registers the sandbox remote in the host repository.
    let remote = format!("sandbox-{name}");
    let clone = w.root.join("sbx-root").join(&name).join("clone");
    w.git(
        &repo,
        &["remote", "add", &remote, &clone.display().to_string()],
    );
    let run = w.action("fetch-changes", w.ctx_pane(&pane));
    check!(
        run.ok() && run.result["transport"] == "remote",
        "fetch: {}",
        run.show()
    );
    check!(
        ref_of(&w, &repo, &format!("{remote}/feature/x")) == head,
        "fetched"
    );
    check!(
        !w.argv_log("FAKE_SBX_LOG").iter().any(|a| a[0] == "cp"),
        "no bundle was carried"
    );
    // A remote that does not answer falls back to the bundle.
    w.git(
        &repo,
        &["remote", "set-url", &remote, "/nonexistent/remote"],
    );
    let run = w.action("fetch-changes", w.ctx_pane(&pane));
    check!(
        run.ok() && run.result["transport"] == "bundle",
        "fallback: {}",
        run.show()
    );
    Ok(())
}

pub fn refuses_mount_mode() -> Outcome {
    let w = World::new();
    let repo = w.git_repo("repo");
    let (pane, _) = w.start_agent(&repo)?;
    let run = w.action("fetch-changes", w.ctx_pane(&pane));
    check!(!run.ok() && run.kind() == "target", "{}", run.show());
    Ok(())
}

pub fn not_a_repository_is_not_found() -> Outcome {
    let w = World::new();
    let repo = w.git_repo("repo");
    w.write_config(json!({"workspaceMode": "clone"}));
    let (pane, _) = w.start_agent(&repo)?;
    std::fs::remove_dir_all(repo.join(".git")).map_err(|e| e.to_string())?;
    let run = w.action("fetch-changes", w.ctx_pane(&pane));
    check!(!run.ok() && run.kind() == "not-found", "{}", run.show());
    Ok(())
}
