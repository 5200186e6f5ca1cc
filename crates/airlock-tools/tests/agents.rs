//! The agents against fixture homes: exact contributions with their files present and absent.

mod fixture;

use airlock_sandbox::{Contributions, ToolMount, ToolMountMode::*};
use fixture::{Fixture, env};

#[test]
fn an_agent_without_binary_or_files_contributes_nothing() {
    let f = Fixture::new();
    let tools = [
        "claude", "codex", "pi", "opencode", "copilot", "gemini", "cursor", "aider", "rtk",
    ];
    assert_eq!(f.plan(&tools), Contributions::default());
}

#[test]
fn claude_home_desktop_config_and_json_persist_as_overlays() {
    let f = Fixture::new();
    f.binary("claude");
    f.dir(".claude/projects");
    f.file(".claude.json", "{}");
    // ~/.config/Claude absent: not mounted.
    assert_eq!(
        f.plan(&["claude"]),
        Contributions {
            mounts: vec![
                f.mount("claude", ".claude", Overlay, true),
                f.mount("claude", ".claude.json", Overlay, false),
            ],
            ..Contributions::default()
        }
    );
}

#[test]
fn claude_honours_claude_config_dir() {
    let mut f = Fixture::new();
    f.binary("claude");
    let dir = f.dir("elsewhere/claude");
    f.set_env("CLAUDE_CONFIG_DIR", dir.to_str().unwrap());
    f.dir(".claude");
    let plan = f.plan(&["claude"]);
    assert_eq!(
        plan.mounts,
        vec![f.mount("claude", "elsewhere/claude", Overlay, true)]
    );
    assert_eq!(
        plan.env,
        env(&[("CLAUDE_CONFIG_DIR", dir.to_str().unwrap())])
    );
}

#[test]
fn claude_is_detected_by_its_files_alone() {
    let f = Fixture::new();
    f.dir(".config/Claude");
    let plan = f.plan(&["claude"]);
    assert_eq!(
        plan.mounts,
        vec![f.mount("claude", ".config/Claude", Overlay, true)]
    );
}

#[test]
fn codex_home_is_shielded_and_its_sessions_persist() {
    let f = Fixture::new();
    f.binary("codex");
    f.file(".codex/auth.json", "{}");
    f.dir(".codex/sessions");
    assert_eq!(
        f.plan(&["codex"]),
        Contributions {
            mounts: vec![
                f.mount("codex", ".codex", Tmpoverlay, true),
                f.mount("codex", ".codex/sessions", Overlay, true),
            ],
            ..Contributions::default()
        }
    );
}

#[test]
fn codex_honours_codex_home_and_passes_it_through() {
    let mut f = Fixture::new();
    f.binary("codex");
    let dir = f.dir("state/codex");
    f.set_env("CODEX_HOME", dir.to_str().unwrap());
    let plan = f.plan(&["codex"]);
    assert_eq!(
        plan.mounts,
        vec![
            f.mount("codex", "state/codex", Tmpoverlay, true),
            f.mount("codex", "state/codex/sessions", Overlay, true),
        ]
    );
    assert_eq!(plan.env, env(&[("CODEX_HOME", dir.to_str().unwrap())]));
}

#[test]
fn pi_agent_dir_is_shielded_and_sessions_persist() {
    let mut f = Fixture::new();
    f.binary("pi");
    f.dir(".pi/agent/sessions");
    let plan = f.plan(&["pi"]);
    assert_eq!(
        plan.mounts,
        vec![
            f.mount("pi", ".pi/agent", Tmpoverlay, true),
            f.mount("pi", ".pi/agent/sessions", Overlay, true),
        ]
    );
    assert!(plan.env.is_empty());
    let dir = f.dir("pi-home");
    f.set_env("PI_CODING_AGENT_DIR", dir.to_str().unwrap());
    let plan = f.plan(&["pi"]);
    assert_eq!(
        plan.mounts,
        vec![
            f.mount("pi", "pi-home", Tmpoverlay, true),
            f.mount("pi", "pi-home/sessions", Overlay, true),
        ]
    );
    assert_eq!(
        plan.env,
        env(&[("PI_CODING_AGENT_DIR", dir.to_str().unwrap())])
    );
}

#[test]
fn copilot_cli_home_persists_and_extension_dirs_split() {
    let f = Fixture::new();
    f.binary("copilot");
    f.dir(".copilot");
    f.dir(".config/github-copilot");
    f.dir(".cache/github-copilot");
    assert_eq!(
        f.plan(&["copilot"]).mounts,
        vec![
            f.mount("copilot", ".copilot", Overlay, true),
            f.mount("copilot", ".config/github-copilot", Tmpoverlay, true),
            f.mount("copilot", ".cache/github-copilot", Overlay, true),
        ]
    );
}

#[test]
fn opencode_gemini_cursor_aider() {
    let f = Fixture::new();
    for b in ["opencode", "gemini", "cursor-agent", "aider"] {
        f.binary(b);
    }
    f.dir(".config/opencode");
    f.dir(".local/share/opencode");
    f.dir(".gemini");
    f.dir(".cursor");
    f.file(".aider.conf.yml", "model: x\n");
    f.dir(".aider");
    assert_eq!(
        f.plan(&["opencode", "gemini", "cursor", "aider"]).mounts,
        vec![
            f.mount("aider", ".aider.conf.yml", Tmpoverlay, false),
            f.mount("aider", ".aider", Overlay, true),
            f.mount("cursor", ".cursor", Overlay, true),
            f.mount("gemini", ".gemini", Overlay, true),
            f.mount("opencode", ".config/opencode", Tmpoverlay, true),
            f.mount("opencode", ".local/share/opencode", Overlay, true),
        ]
    );
}

#[test]
fn rtk_config_is_discarded_and_data_persists() {
    let f = Fixture::new();
    f.binary("rtk");
    f.file(".config/rtk/config.toml", "");
    f.dir(".local/share/rtk");
    assert_eq!(
        f.plan(&["rtk"]),
        Contributions {
            mounts: vec![
                f.mount("rtk", ".config/rtk", Tmpoverlay, true),
                f.mount("rtk", ".local/share/rtk", Overlay, true),
            ],
            ..Contributions::default()
        }
    );
}

#[test]
fn host_xdg_dirs_are_mounted_where_the_sandbox_looks() {
    let mut f = Fixture::new();
    f.binary("rtk");
    let conf = f.dir("xdg/conf/rtk");
    f.set_env("XDG_CONFIG_HOME", f.h("xdg/conf").to_str().unwrap());
    // A relative XDG value is ignored, as the spec says.
    f.set_env("XDG_DATA_HOME", "relative/data");
    f.dir(".local/share/rtk");
    assert_eq!(
        f.plan(&["rtk"]).mounts,
        vec![
            ToolMount {
                tool: "rtk".into(),
                source: conf,
                target: f.h(".config/rtk"),
                mode: Tmpoverlay,
                is_dir: true,
            },
            f.mount("rtk", ".local/share/rtk", Overlay, true),
        ]
    );
}

#[test]
fn symlinked_tool_dirs_mount_their_resolved_source() {
    let f = Fixture::new();
    f.binary("gemini");
    let real = f.dir("dotfiles/gemini");
    std::os::unix::fs::symlink(&real, f.h(".gemini")).unwrap();
    assert_eq!(
        f.plan(&["gemini"]).mounts,
        vec![ToolMount {
            tool: "gemini".into(),
            source: real,
            target: f.h(".gemini"),
            mode: Overlay,
            is_dir: true,
        }]
    );
}

#[test]
fn a_binary_installed_in_the_home_is_mounted_read_only() {
    let mut f = Fixture::new();
    let build = f.file(".local/share/claude/versions/2.0.1", "#!/bin/sh\n");
    std::fs::set_permissions(&build, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    f.dir(".local/bin");
    std::os::unix::fs::symlink(&build, f.h(".local/bin/claude")).unwrap();
    f.set_env("PATH", f.h(".local/bin").to_str().unwrap());
    assert_eq!(
        f.plan(&["claude"]).mounts,
        vec![ToolMount {
            tool: "claude".into(),
            source: build,
            target: f.h(".local/bin/claude"),
            mode: Readonly,
            is_dir: false,
        }]
    );
    // When mise brings ~/.local/bin already, only the link's target is added, at its own path.
    std::fs::write(f.h(".local/bin/mise"), "").unwrap();
    std::fs::set_permissions(
        f.h(".local/bin/mise"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let plan = f.plan(&["claude", "mise"]);
    assert_eq!(
        plan.mounts,
        vec![
            f.mount("mise", ".local/bin", Readonly, true),
            f.mount(
                "claude",
                ".local/share/claude/versions/2.0.1",
                Readonly,
                false
            ),
        ]
    );
    // A binary outside the home is the system's, visible as it is.
    let bin = f.bin.to_string_lossy().into_owned();
    f.set_env("PATH", &bin);
    f.binary("claude");
    assert!(f.plan(&["claude"]).mounts.is_empty());
}

#[test]
fn a_missing_sessions_dir_is_created_so_sessions_persist_from_the_first_run() {
    let f = Fixture::new();
    f.binary("codex");
    f.binary("pi");
    f.file(".codex/auth.json", "{}");
    f.dir(".pi/agent");
    // The read-only commands create nothing.
    let report = airlock_tools::report::check(
        &airlock_tools::Catalog::builtin(),
        &Default::default(),
        &f.host(),
        &[],
    );
    assert_eq!(report.available, 2);
    assert!(!f.h(".codex/sessions").exists());
    let plan = f.plan(&["codex", "pi"]);
    assert!(f.h(".codex/sessions").is_dir() && f.h(".pi/agent/sessions").is_dir());
    assert_eq!(
        plan.mounts,
        vec![
            f.mount("codex", ".codex", Tmpoverlay, true),
            f.mount("codex", ".codex/sessions", Overlay, true),
            f.mount("pi", ".pi/agent", Tmpoverlay, true),
            f.mount("pi", ".pi/agent/sessions", Overlay, true),
        ]
    );
}
