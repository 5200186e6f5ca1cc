//! zellij of a launch (`[tools.zellij] enabled = true`): its socket directory, unfiltered.

use std::path::{Path, PathBuf};

use airlock_sandbox::{MountOp, SandboxSpec};

/// The variables zellij sets in a pane that the sandbox gets as they are.
pub const PASSED_ENV: &[&str] = &["ZELLIJ", "ZELLIJ_SESSION_NAME", "ZELLIJ_PANE_ID"];

/// zellij's socket directory: `$ZELLIJ_SOCKET_DIR`, `$XDG_RUNTIME_DIR/zellij`, else
/// `/tmp/zellij-<uid>`; the first that is a directory.
pub fn socket_dir(env: &dyn Fn(&str) -> Option<String>, uid: u32) -> Option<PathBuf> {
    let candidates = [
        env("ZELLIJ_SOCKET_DIR").map(PathBuf::from),
        env("XDG_RUNTIME_DIR").map(|d| Path::new(&d).join("zellij")),
        Some(PathBuf::from(format!("/tmp/zellij-{uid}"))),
    ];
    candidates
        .into_iter()
        .flatten()
        .filter(|p| p.is_absolute())
        .find(|p| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir()))
}

/// Plans zellij for `spec` when enabled, inside zellij (`ZELLIJ` set), with `zellij` on PATH and
/// a socket directory; the warning every such launch prints (the socket cannot be filtered).
pub fn plan_zellij(
    spec: &mut SandboxSpec,
    enabled: bool,
    zellij_on_path: bool,
    env: &dyn Fn(&str) -> Option<String>,
    uid: u32,
) -> Option<String> {
    if !enabled || env("ZELLIJ").is_none() || !zellij_on_path {
        return None;
    }
    let Some(dir) = socket_dir(env, uid) else {
        return Some(
            "[tools.zellij] is enabled but no zellij socket directory was found \
             ($ZELLIJ_SOCKET_DIR, $XDG_RUNTIME_DIR/zellij, /tmp/zellij-<uid>); zellij is not inside"
                .into(),
        );
    };
    spec.mounts.push(MountOp::Bind {
        source: dir.clone(),
        target: dir.clone(),
        writable: true,
    });
    spec.env.insert(
        "ZELLIJ_SOCKET_DIR".into(),
        dir.to_string_lossy().into_owned(),
    );
    for key in PASSED_ENV {
        if let Some(value) = env(key) {
            spec.env.insert((*key).into(), value);
        }
    }
    Some(format!(
        "zellij: the sandbox has full control of your zellij sessions ({} is not filtered: it \
         can type into every pane); remove [tools.zellij] enabled = true to stop",
        dir.display()
    ))
}
