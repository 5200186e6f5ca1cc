//! fetch-changes: a clone-mode sandbox's branches into the host repository as
//! `sandbox-<name>/<branch>` refs, through the sandbox's git remote while attached, otherwise a git
//! bundle carried over with `sbx exec` + `sbx cp`.

use std::path::Path;

use serde_json::{Value, json};

use crate::app::{App, Outcome};
use crate::backend::{ExecRequest, SandboxBackend};
use crate::error::{ErrorKind, PluginError, Result};
use crate::git;
use crate::naming::sandbox_remote;
use crate::proc;
use crate::store::{PaneMapping, WorkspaceMode};

pub fn run(app: &App) -> Result<Outcome> {
    let config = app.config()?;
    let m = super::target_mapping(app)?;
    if m.workspace_mode != WorkspaceMode::Clone {
        return Err(PluginError::target(format!(
            "fetch-changes applies to clone-mode sandboxes; {} mounts {} directly, so its edits are already there.",
            m.sandbox_name, m.local_path
        )));
    }
    let repo = Path::new(&m.local_path);
    if git::toplevel(repo).is_none() {
        return Err(PluginError::new(
            ErrorKind::NotFound,
            format!(
                "{} is not a git repository; nothing to fetch into.",
                m.local_path
            ),
        ));
    }
    let sbx = app.sbx(&config)?;
    let sandbox = sbx.find(&m.sandbox_name)?.ok_or_else(|| {
        PluginError::new(
            ErrorKind::NotFound,
            format!(
                "Sandbox {} no longer exists; its commits are gone.",
                m.sandbox_name
            ),
        )
    })?;
    let remote = sandbox_remote(&m.sandbox_name);
    let refspec = format!("+refs/heads/*:refs/remotes/{remote}/*");
    let running = sandbox.status.as_deref() == Some("running");
    let has_remote = git::run(repo, &["remote", "get-url", &remote]).is_ok_and(|o| o.success());
    let mut transport = "bundle";
    let mut notes = Vec::new();
    if running && has_remote {
        match git::run_checked(
            repo,
            &["fetch", "--no-tags", "--prune", &remote, &refspec],
            "fetching from the sandbox remote",
        ) {
            Ok(_) => transport = "remote",
            Err(e) => notes.push(format!(
                "the {remote} remote did not answer ({}); using a bundle",
                e.message
            )),
        }
    }
    if transport == "bundle" {
        fetch_bundle(&sbx, &m, repo, &refspec)?;
    }
    let branches = fetched_branches(repo, &remote)?;
    let keep: Vec<Value> = branches
        .iter()
        .filter_map(|b| keep_entry(repo, &remote, b))
        .collect();
    let mut out = Outcome::default()
        .field("paneId", m.pane_id.clone())
        .field("remote", remote.clone())
        .field("transport", transport)
        .field("branches", branches.clone())
        .field("keep", keep.clone());
    for n in notes {
        out = out.line(n);
    }
    out = out.line(format!(
        "Fetched {} branch(es) from {} via {transport}.",
        branches.len(),
        m.sandbox_name
    ));
    for k in &keep {
        out = out.line(k["command"].as_str().unwrap_or_default().to_owned());
    }
    Ok(out)
}

fn fetch_bundle(
    sbx: &dyn SandboxBackend,
    m: &PaneMapping,
    repo: &Path,
    refspec: &str,
) -> Result<()> {
    let inside = format!("/tmp/airlock-fetch-{}.bundle", proc::random_hex(6));
    let create = ExecRequest {
        name: m.sandbox_name.clone(),
        workdir: None,
        env: Vec::new(),
        argv: [
            "git",
            "-C",
            &m.local_path,
            "bundle",
            "create",
            &inside,
            "--branches",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect(),
    };
    let out = sbx.exec(&create, false)?;
    if !out.success() {
        let output = out.output();
        let kind = if output.to_ascii_lowercase().contains("not a git repository") {
            ErrorKind::NotFound
        } else {
            crate::classify::classify(&output)
        };
        return Err(PluginError::new(
            kind,
            format!("git bundle create failed inside {}.", m.sandbox_name),
        )
        .with_output(output));
    }
    let host_dir = tempdir_in_state()?;
    let host_file = host_dir.join("changes.bundle");
    let result = (|| {
        sbx.copy(
            &format!("{}:{inside}", m.sandbox_name),
            &host_file.display().to_string(),
        )?;
        git::run_checked(
            repo,
            &[
                "fetch",
                "--no-tags",
                &host_file.display().to_string(),
                refspec,
            ],
            "fetching from the bundle",
        )
    })();
    let _ = std::fs::remove_dir_all(&host_dir);
    let cleanup = ExecRequest {
        name: m.sandbox_name.clone(),
        workdir: None,
        env: Vec::new(),
        argv: vec!["rm".into(), "-f".into(), inside],
    };
    let _ = sbx.exec(&cleanup, false);
    result.map(drop)
}

fn tempdir_in_state() -> Result<std::path::PathBuf> {
    let dir = std::env::temp_dir().join(format!("airlock-fetch-{}", proc::random_hex(8)));
    std::fs::create_dir(&dir)
        .map_err(|e| PluginError::startup(format!("Could not create {}: {e}.", dir.display())))?;
    Ok(dir)
}

fn fetched_branches(repo: &Path, remote: &str) -> Result<Vec<String>> {
    let prefix = format!("refs/remotes/{remote}/");
    let out = git::run_checked(
        repo,
        &["for-each-ref", "--format=%(refname)", &prefix],
        "listing fetched refs",
    )?;
    Ok(out
        .stdout
        .lines()
        .filter_map(|l| l.strip_prefix(&prefix))
        .filter(|b| *b != "HEAD")
        .map(str::to_owned)
        .collect())
}

/// A fetched ref the host does not reach yet: how to keep it before the sandbox goes away.
fn keep_entry(repo: &Path, remote: &str, branch: &str) -> Option<Value> {
    let reference = format!("{remote}/{branch}");
    let containing = git::run(
        repo,
        &[
            "branch",
            "--format=%(refname:short)",
            "--contains",
            &reference,
        ],
    )
    .ok()?;
    if containing.success() && !containing.stdout.trim().is_empty() {
        return None;
    }
    let exists = git::run(
        repo,
        &[
            "rev-parse",
            "--verify",
            "--quiet",
            &format!("refs/heads/{branch}"),
        ],
    )
    .is_ok_and(|o| o.success());
    let local = if exists {
        format!("{branch}-sandbox")
    } else {
        branch.to_owned()
    };
    let reason = if exists {
        "a host branch of that name exists"
    } else {
        "no host branch reaches these commits"
    };
    Some(
        json!({"ref": reference, "local": local, "reason": reason, "command": format!("git branch {local} {reference}")}),
    )
}
