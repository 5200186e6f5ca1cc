//! What herdr hands an action: its environment and `HERDR_PLUGIN_CONTEXT_JSON`, and the mount root
//! rules derived from them.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::error::{PluginError, Result};
use crate::git;

/// The plugin id this build registers.
pub const PLUGIN_ID: &str = "airlock.sandbox";

/// `worktree` in the invocation context.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Worktree {
    pub repo_root: Option<String>,
    pub checkout_path: Option<String>,
}

/// `HERDR_PLUGIN_CONTEXT_JSON` (every field optional; unknown fields ignored, as herdr asks).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct InvocationContext {
    pub workspace_id: Option<String>,
    pub workspace_cwd: Option<String>,
    pub worktree: Option<Worktree>,
    pub tab_id: Option<String>,
    pub focused_pane_id: Option<String>,
    pub focused_pane_cwd: Option<String>,
    pub focused_pane_agent: Option<String>,
    pub invocation_source: Option<String>,
    pub clicked_url: Option<String>,
}

/// Parses the context JSON; `None` input is an empty context (an action run outside herdr).
pub fn parse_context(raw: Option<&str>) -> Result<InvocationContext> {
    match raw.map(str::trim) {
        None | Some("") => Ok(InvocationContext::default()),
        Some(text) => serde_json::from_str(text).map_err(|e| {
            let shown: String = text.chars().take(80).collect();
            PluginError::startup(format!(
                "HERDR_PLUGIN_CONTEXT_JSON is not a valid invocation context ({e}; it starts {shown:?}). Run the action from herdr, or pass a JSON object."
            ))
        }),
    }
}

/// The directory to mount and where the agent starts in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountRoot {
    pub local_path: String,
    pub workdir: String,
}

/// The worktree checkout, else the workspace directory, else the git repository containing the
/// focused pane's directory, else that directory. The pane's own directory only decides where the
/// agent starts. Home and `/` are refused.
pub fn mount_root(ctx: &InvocationContext, home: &Path) -> Result<MountRoot> {
    let pane_cwd = ctx.focused_pane_cwd.as_deref().map(PathBuf::from);
    let root = ctx
        .worktree
        .as_ref()
        .and_then(|w| w.checkout_path.clone())
        .or_else(|| ctx.workspace_cwd.clone())
        .map(PathBuf::from)
        .or_else(|| pane_cwd.as_deref().and_then(git::toplevel))
        .or_else(|| pane_cwd.clone())
        .ok_or_else(|| {
            PluginError::target(
                "The invocation context names no worktree, workspace directory or pane directory. Run start-agent from a pane in a project.",
            )
        })?;
    if !root.is_absolute() {
        return Err(PluginError::target(format!(
            "The workspace path must be absolute (got {:?}).",
            root.display()
        )));
    }
    let root = airlock_config::canonicalize(&root).map_err(|e| {
        PluginError::target(format!(
            "The workspace path {} is not an existing directory ({e}).",
            root.display()
        ))
    })?;
    if !root.is_dir() {
        return Err(PluginError::target(format!(
            "The workspace path {} is not a directory.",
            root.display()
        )));
    }
    let home = airlock_config::canonicalize(home).unwrap_or_else(|_| home.to_owned());
    if root == Path::new("/") || root == home {
        return Err(PluginError::target(format!(
            "Refusing to use {} as a sandbox workspace. Invoke start-agent from a project directory.",
            root.display()
        )));
    }
    let workdir = pane_cwd
        .and_then(|c| airlock_config::canonicalize(c).ok())
        .filter(|c| c.starts_with(&root))
        .unwrap_or_else(|| root.clone());
    let text = |p: &Path| {
        p.to_str().map(str::to_owned).ok_or_else(|| {
            PluginError::target(format!("The path {} is not valid UTF-8.", p.display()))
        })
    };
    Ok(MountRoot {
        local_path: text(&root)?,
        workdir: text(&workdir)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn garbage_context_is_a_startup_error() {
        assert!(
            parse_context(None)
                .expect("empty")
                .focused_pane_id
                .is_none()
        );
        let err = parse_context(Some("{not json")).expect_err("garbage");
        assert_eq!(err.kind, crate::ErrorKind::Startup);
        assert!(err.message.contains("HERDR_PLUGIN_CONTEXT_JSON"));
        // Unknown fields are ignored.
        let ctx = parse_context(Some(r#"{"focused_pane_id":"w1:p1","new_field":1}"#)).expect("ok");
        assert_eq!(ctx.focused_pane_id.as_deref(), Some("w1:p1"));
    }

    #[test]
    fn refuses_home_and_root_and_uses_the_repo_top() {
        let home = tempfile::tempdir().expect("tempdir");
        let ctx = InvocationContext {
            focused_pane_cwd: Some(home.path().display().to_string()),
            ..Default::default()
        };
        assert_eq!(
            mount_root(&ctx, home.path()).expect_err("home").kind,
            crate::ErrorKind::Target
        );
        let ctx = InvocationContext {
            workspace_cwd: Some("/".into()),
            ..Default::default()
        };
        assert_eq!(
            mount_root(&ctx, home.path()).expect_err("root").kind,
            crate::ErrorKind::Target
        );
        let repo = home.path().join("repo");
        std::fs::create_dir_all(repo.join("packages/api")).expect("mkdir");
        let ok = std::process::Command::new("git")
            .args(["init", "-q"])
            .current_dir(&repo)
            .status()
            .expect("git");
        assert!(ok.success());
        let ctx = InvocationContext {
            focused_pane_cwd: Some(repo.join("packages/api").display().to_string()),
            ..Default::default()
        };
        let root = mount_root(&ctx, home.path()).expect("repo");
        let canon = std::fs::canonicalize(&repo).expect("canon");
        assert_eq!(root.local_path, canon.display().to_string());
        assert!(root.workdir.ends_with("packages/api"));
    }
}
