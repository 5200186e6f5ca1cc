//! Spec tests of tool contributions: overlays, copies, generated files and their precedence.

mod fixture;

use std::path::{Path, PathBuf};

use airlock_config::{MountMode, Profile};
use airlock_sandbox::{MountOp, RunRequest};
use fixture::{dir, host, mount};
fn tool_mount(
    tool: &str,
    path: &str,
    mode: airlock_sandbox::ToolMountMode,
    is_dir: bool,
) -> airlock_sandbox::ToolMount {
    airlock_sandbox::ToolMount {
        tool: tool.into(),
        source: path.into(),
        target: path.into(),
        mode,
        is_dir,
    }
}

#[test]
fn tool_contributions_become_overlays_copies_and_generated_files() {
    use airlock_sandbox::{Contributions, GeneratedFile, ToolMountMode::*, build_with_tools};
    let contrib = Contributions {
        mounts: vec![
            tool_mount("claude", "/home/dev/.claude", Overlay, true),
            tool_mount("claude", "/home/dev/.claude.json", Overlay, false),
            tool_mount("codex", "/home/dev/.codex", Tmpoverlay, true),
            tool_mount(
                "rtk",
                "/home/dev/.config/rtk/config.toml",
                Tmpoverlay,
                false,
            ),
            tool_mount("nvim", "/home/dev/.config/nvim", Readonly, true),
            tool_mount("git", "/home/dev/code/app/.git", Readonly, true),
            tool_mount("git", "/home/dev/code/app/.git/hooks", Readonly, true),
            tool_mount("mise", "/home/dev/.local/share/mise", Readwrite, true),
        ],
        env: [("GOTOOLCHAIN", "local"), ("HOME", "/elsewhere")]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect(),
        files: vec![GeneratedFile {
            tool: "git".into(),
            target: "/home/dev/.gitconfig".into(),
            content: "[user]\n\tname = Dev\n".into(),
        }],
        ..Contributions::default()
    };
    let spec = build_with_tools(
        &Profile::default(),
        &host(),
        &RunRequest::default(),
        &contrib,
    )
    .expect("spec");
    let tools: Vec<_> = spec
        .mounts
        .iter()
        .filter(|op| {
            let t = op.target();
            t.starts_with("/home/dev/.") || t.starts_with("/home/dev/code/app/.git")
        })
        .cloned()
        .collect();
    insta::assert_json_snapshot!("tool_mounts", tools);
    insta::assert_json_snapshot!("tool_prepare", spec.prepare);
    assert_eq!(
        spec.env.get("GOTOOLCHAIN").map(String::as_str),
        Some("local")
    );
    assert_eq!(
        spec.env.get("HOME").map(String::as_str),
        Some("/home/dev"),
        "tools cannot move HOME"
    );
    for writable in [
        "/home/dev/.claude",
        "/home/dev/.claude.json",
        "/home/dev/.codex",
        "/home/dev/.local/share/mise",
    ] {
        assert!(
            spec.writable.contains(&PathBuf::from(writable)),
            "{writable}"
        );
    }
    assert!(
        !spec
            .writable
            .contains(&PathBuf::from("/home/dev/.config/nvim"))
    );
}

#[test]
fn a_custom_mount_wins_over_a_tool_mount_at_the_same_path() {
    use airlock_sandbox::{Contributions, ToolMountMode, build_with_tools};
    let mut h = host();
    let m = mount(&mut h, "~/.claude", MountMode::Hidden, dir());
    let profile = Profile {
        mounts: vec![m],
        ..Profile::default()
    };
    let contrib = Contributions {
        mounts: vec![tool_mount(
            "claude",
            "/home/dev/.claude",
            ToolMountMode::Overlay,
            true,
        )],
        ..Contributions::default()
    };
    let spec = build_with_tools(&profile, &h, &RunRequest::default(), &contrib).expect("spec");
    let at: Vec<_> = spec
        .mounts
        .iter()
        .filter(|op| op.target() == Path::new("/home/dev/.claude"))
        .collect();
    assert_eq!(at.len(), 1);
    assert!(
        matches!(
            at[0],
            MountOp::Tmpfs {
                writable: false,
                ..
            }
        ),
        "{at:?}"
    );
    assert!(spec.prepare.is_empty());
}

#[test]
fn a_second_session_gets_throwaway_uppers() {
    use airlock_sandbox::{Contributions, PrepareStep, ToolMountMode, Upper, build_with_tools};
    let contrib = Contributions {
        mounts: vec![
            tool_mount("claude", "/home/dev/.claude", ToolMountMode::Overlay, true),
            tool_mount(
                "claude",
                "/home/dev/.claude.json",
                ToolMountMode::Overlay,
                false,
            ),
        ],
        ..Contributions::default()
    };
    let mut spec = build_with_tools(
        &Profile::default(),
        &host(),
        &RunRequest::default(),
        &contrib,
    )
    .expect("spec");
    assert!(spec.has_persistent_uppers());
    assert_eq!(spec.demote_persistent_uppers(), 1);
    assert!(!spec.has_persistent_uppers());
    assert!(spec.mounts.iter().all(|op| !matches!(
        op,
        MountOp::Overlay {
            upper: Upper::Persistent { .. },
            ..
        }
    )));
    assert!(
        spec.prepare
            .iter()
            .all(|s| !matches!(s, PrepareStep::OverlayDirs { .. }))
    );
}
