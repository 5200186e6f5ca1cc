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
use crate::naming::shell_quote;
use crate::proc;
use crate::store::{LifecycleState, PaneMapping, WorkspaceMode};

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
    let backend = app.backend_of(&config, &m)?;
    let sbx: &dyn SandboxBackend = backend.as_ref();
    // What the listing says is recorded: gone is `missing`; a mapping marked missing whose
    // sandbox exists is `created` (starting it for a fetch does not make it connectable).
    let Some(sandbox) = sbx.find(&m.sandbox_name)? else {
        app.store.modify(&m.pane_id, |cur| {
            cur.lifecycle_state = LifecycleState::Missing;
            Ok(())
        })?;
        return Err(PluginError::new(
            ErrorKind::NotFound,
            format!(
                "Sandbox {} no longer exists; its commits are gone.",
                m.sandbox_name
            ),
        ));
    };
    if m.lifecycle_state == LifecycleState::Missing {
        app.store.modify(&m.pane_id, |cur| {
            cur.lifecycle_state = LifecycleState::Created;
            Ok(())
        })?;
    }
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
        fetch_bundle(sbx, &m, repo)?;
    }
    let branches = fetched_branches(repo, &remote)?;
    let plans: Vec<(Value, bool)> = branches
        .iter()
        .map(|b| keep_entry(repo, &remote, b))
        .collect::<Result<_>>()?;
    let keep: Vec<Value> = plans
        .iter()
        .filter(|(_, reached)| !reached)
        .map(|(e, _)| e.clone())
        .collect();
    let mut out = Outcome::default()
        .field("paneId", m.pane_id.clone())
        .field("remote", remote.clone())
        .field("transport", transport)
        .field(
            "branches",
            branches
                .iter()
                .map(|b| format!("{remote}/{b}"))
                .collect::<Vec<_>>(),
        )
        .field("keep", keep.clone());
    for n in notes {
        out = out.line(n);
    }
    out = out.line(format!(
        "Fetched {} branch(es) from {} via {transport}.",
        branches.len(),
        m.sandbox_name
    ));
    // One command per fetched ref; the ones a host branch already reaches are marked.
    for (entry, reached) in &plans {
        let command = entry["command"].as_str().unwrap_or_default();
        out = out.line(if *reached {
            format!("{command}   # already on a host branch")
        } else {
            command.to_owned()
        });
    }
    Ok(out)
}

fn fetch_bundle(sbx: &dyn SandboxBackend, m: &PaneMapping, repo: &Path) -> Result<()> {
    let inside = sbx.scratch_file(
        &m.sandbox_name,
        &format!(".airlock-fetch-{}.bundle", proc::random_hex(6)),
    )?;
    let checkout = sbx.checkout_path(&m.sandbox_name, &m.local_path)?;
    let (selection, refspec) = sbx.bundle_refs(&sandbox_remote(&m.sandbox_name));
    let mut argv: Vec<String> = ["git", "-C", &checkout, "bundle", "create", &inside]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
    argv.extend(selection);
    let create = ExecRequest {
        name: m.sandbox_name.clone(),
        workdir: None,
        env: Vec::new(),
        argv,
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
                &refspec,
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

/// How to keep a fetched ref before the sandbox goes away, and whether a host branch already
/// reaches its commits (then it needs no keeping). The command names the repository and is
/// quoted for the user's shell.
fn keep_entry(repo: &Path, remote: &str, branch: &str) -> Result<(Value, bool)> {
    let reference = format!("{remote}/{branch}");
    let reached = git::run(
        repo,
        &[
            "branch",
            "--format=%(refname:short)",
            "--contains",
            &reference,
        ],
    )
    .is_ok_and(|o| o.success() && !o.stdout.trim().is_empty());
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
    let reason = match (reached, exists) {
        (true, _) => "a host branch already reaches these commits",
        (false, true) => "no host branch reaches these commits; a host branch of that name exists",
        (false, false) => "no host branch reaches these commits",
    };
    let words = [repo.display().to_string(), local.clone(), reference.clone()];
    let [path, quoted_local, quoted_ref] = words.map(|w| shell_quote(&w));
    let command = format!("git -C {} branch {} {}", path?, quoted_local?, quoted_ref?);
    let entry = json!({"ref": reference, "local": local, "reason": reason, "command": command});
    Ok((entry, reached))
}
