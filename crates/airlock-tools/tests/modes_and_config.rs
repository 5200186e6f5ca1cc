//! Mode precedence (tool `mount_mode` > `[overlay] default` > each mount's default), `enabled`,
//! config errors, and broken tool paths.

mod fixture;

use airlock_config::{OverlayDefault, Profile};
use airlock_sandbox::ToolMountMode::{self, *};
use airlock_tools::{
    Catalog, Category, DefaultMode, MountDecl, PathState, ToolConfigError, resolve_mode,
};
use fixture::{Fixture, overlay, settings};

fn decl(default: DefaultMode, category: Category) -> MountDecl {
    MountDecl {
        default,
        ..MountDecl::same("/h/x".into(), category)
    }
}

#[test]
fn split_maps_categories_and_fixed_defaults_win_only_under_split() {
    use OverlayDefault as O;
    let split = |c| resolve_mode(&decl(DefaultMode::Split, c), None, O::Split);
    assert_eq!(split(Category::Config), Some(Tmpoverlay));
    assert_eq!(split(Category::Runtime), Some(Tmpoverlay));
    assert_eq!(split(Category::Data), Some(Overlay));
    assert_eq!(split(Category::Cache), Some(Overlay));
    assert_eq!(split(Category::State), Some(Overlay));
    let ro = decl(DefaultMode::Fixed(Readonly), Category::Data);
    assert_eq!(resolve_mode(&ro, None, O::Split), Some(Readonly));
    assert_eq!(resolve_mode(&ro, None, O::Overlay), Some(Overlay));
    assert_eq!(
        resolve_mode(&ro, Some(O::Tmpoverlay), O::Overlay),
        Some(Tmpoverlay)
    );
    // A tool's own "split" beats a global default: back to the mount's default.
    assert_eq!(
        resolve_mode(&ro, Some(O::Split), O::Readwrite),
        Some(Readonly)
    );
    assert_eq!(resolve_mode(&ro, Some(O::Disabled), O::Overlay), None);
    assert_eq!(resolve_mode(&ro, None, O::Disabled), None);
    assert_eq!(
        resolve_mode(&ro, Some(O::Readwrite), O::Split),
        Some(Readwrite)
    );
    let locked = decl(DefaultMode::Locked(Readonly), Category::Config);
    for tool in [None, Some(O::Readwrite), Some(O::Disabled)] {
        for global in O::ALL {
            assert_eq!(resolve_mode(&locked, tool, global), Some(Readonly));
        }
    }
}

fn rtk_modes(f: &Fixture, s: &airlock_tools::Settings) -> Vec<ToolMountMode> {
    f.plan_with(&["rtk"], s, airlock_config::NetworkMode::Proxy)
        .mounts
        .iter()
        .map(|m| m.mode)
        .collect()
}

#[test]
fn precedence_through_the_plan() {
    let f = Fixture::new();
    f.binary("rtk");
    f.dir(".config/rtk");
    f.dir(".local/share/rtk");
    assert_eq!(
        rtk_modes(&f, &overlay(OverlayDefault::Split)),
        [Tmpoverlay, Overlay]
    );
    assert_eq!(
        rtk_modes(&f, &overlay(OverlayDefault::Readonly)),
        [Readonly, Readonly]
    );
    let s = settings("[overlay]\ndefault = \"readonly\"\n[tools.rtk]\nmount_mode = \"overlay\"\n")
        .unwrap();
    assert_eq!(rtk_modes(&f, &s), [Overlay, Overlay]);
    let s = settings("[overlay]\ndefault = \"tmpoverlay\"\n").unwrap();
    assert_eq!(rtk_modes(&f, &s), [Tmpoverlay, Tmpoverlay]);
    let s = settings("[tools.rtk]\nmount_mode = \"disabled\"\n").unwrap();
    assert_eq!(rtk_modes(&f, &s), []);
}

#[test]
fn readwrite_is_warned_per_mount() {
    let f = Fixture::new();
    f.binary("rtk");
    f.dir(".config/rtk");
    let s = settings("[tools.rtk]\nmount_mode = \"readwrite\"\n").unwrap();
    let plan = f.plan_with(&["rtk"], &s, airlock_config::NetworkMode::Proxy);
    assert_eq!(plan.mounts[0].mode, Readwrite);
    assert_eq!(
        plan.warnings,
        ["tool rtk: ~/.config/rtk is mounted read-write: the sandbox's writes reach your host"]
    );
}

#[test]
fn a_disabled_tool_contributes_nothing_even_when_present() {
    let f = Fixture::new();
    f.binary("codex");
    f.dir(".codex");
    let s = settings("[tools.codex]\nenabled = false\n").unwrap();
    let plan = f.plan_with(&["codex"], &s, airlock_config::NetworkMode::Proxy);
    assert_eq!(plan, Default::default());
    let list = airlock_tools::report::list(&Catalog::builtin(), &s, &f.host(), true);
    let codex = list.iter().find(|t| t.name == "codex").unwrap();
    assert_eq!(codex.status, airlock_tools::Status::Disabled);
}

#[test]
fn unknown_tool_lists_the_known_ones() {
    let err = settings("[tools.vim]\nenabled = true\n").unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, ToolConfigError::UnknownTool { .. }));
    assert!(
        msg.starts_with(
            "/cfg/config.toml: [tools.vim] is not a known tool; known tools: aider, bash, bun, claude,"
        ),
        "{msg}"
    );
    assert!(msg.contains("nvim") && msg.contains("zsh"), "{msg}");
}

#[test]
fn unknown_key_names_tool_key_and_valid_keys() {
    let msg = settings("[tools.git]\nmount_mode = \"overlay\"\n")
        .unwrap_err()
        .to_string();
    assert_eq!(
        msg,
        "/cfg/config.toml: [tools.git] has no key \"mount_mode\"; valid keys for git: enabled, mode, allow_hooks, trust_config_changes"
    );
    let msg = settings("[tools.mise]\nignore_global = true\n")
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains("enabled, mount_mode, ignore_global_config"),
        "{msg}"
    );
}

#[test]
fn bad_values_name_the_value_and_the_choices() {
    let msg = settings("[tools.mise]\nmount_mode = \"sometimes\"\n")
        .unwrap_err()
        .to_string();
    assert_eq!(
        msg,
        "/cfg/config.toml: [tools.mise] mount_mode = \"sometimes\" is not valid; expected one of \"split\", \"overlay\", \"tmpoverlay\", \"readonly\", \"readwrite\", \"disabled\""
    );
    let msg = settings("[tools.git]\nmode = \"rw\"\n")
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains("mode = \"rw\"") && msg.contains("\"readonly\", \"readwrite\", \"disabled\""),
        "{msg}"
    );
    let msg = settings("[tools.git]\nallow_hooks = \"yes\"\n")
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains("allow_hooks = \"yes\"") && msg.contains("true or false"),
        "{msg}"
    );
    let msg = settings("[tools.claude]\nenabled = 1\n")
        .unwrap_err()
        .to_string();
    assert!(msg.contains("enabled = 1"), "{msg}");
}

#[test]
fn project_file_overrides_global_per_key() {
    let g = airlock_config::parse_str(
        "[tools.git]\nmode = \"readwrite\"\nallow_hooks = true\n",
        "/g.toml".as_ref(),
    )
    .unwrap();
    let p = airlock_config::parse_str("[tools.git]\nmode = \"disabled\"\n", "/p.toml".as_ref())
        .unwrap();
    let profile = Profile::layer(
        Some(("/g.toml".as_ref(), &g)),
        Some(("/p.toml".as_ref(), &p)),
    );
    let s = airlock_tools::Settings::from_profile(&profile, &Catalog::builtin()).unwrap();
    let git = s.tool("git");
    assert_eq!(git.choice("mode", "readonly"), "disabled");
    assert!(git.flag("allow_hooks", false));
    // The bad value's error names the project file that set it.
    let bad =
        airlock_config::parse_str("[tools.git]\nmode = \"all\"\n", "/p.toml".as_ref()).unwrap();
    let profile = Profile::layer(
        Some(("/g.toml".as_ref(), &g)),
        Some(("/p.toml".as_ref(), &bad)),
    );
    let msg = airlock_tools::Settings::from_profile(&profile, &Catalog::builtin())
        .unwrap_err()
        .to_string();
    assert!(
        msg.starts_with("/p.toml: [tools.git] mode = \"all\""),
        "{msg}"
    );
}

#[test]
fn a_dangling_tool_dir_is_reported_by_check_and_skipped_by_plan() {
    let f = Fixture::new();
    f.binary("codex");
    std::os::unix::fs::symlink(f.root.join("gone"), f.h(".codex")).unwrap();
    let plan = f.plan(&["codex"]);
    assert!(plan.mounts.is_empty(), "{:?}", plan.mounts);
    assert_eq!(
        plan.warnings,
        [
            "tool codex: ~/.codex is a symlink to a path that does not exist; skipped (fix or remove it, or set [tools.codex] enabled = false)"
        ]
    );
    let report = airlock_tools::report::check(
        &Catalog::builtin(),
        &Default::default(),
        &f.host(),
        &["codex".into()],
    );
    let codex = &report.tools[0];
    assert_eq!(codex.paths[0].state, PathState::Dangling);
    assert_eq!(
        codex.problems,
        ["~/.codex is a symlink to a path that does not exist; fix or remove the link"]
    );
}

#[test]
fn an_unreadable_tool_dir_is_reported_by_check_and_skipped_by_plan() {
    use std::os::unix::fs::PermissionsExt;
    let f = Fixture::new();
    f.binary("gemini");
    let dir = f.dir(".gemini");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o000)).unwrap();
    if std::fs::read_dir(&dir).is_ok() {
        eprintln!(
            "SKIPPED an_unreadable_tool_dir: this user (root?) reads a mode-000 directory anyway"
        );
        return;
    }
    let plan = f.plan(&["gemini"]);
    assert!(plan.mounts.is_empty());
    assert_eq!(
        plan.warnings,
        [
            "tool gemini: ~/.gemini cannot be read; skipped (fix or remove it, or set [tools.gemini] enabled = false)"
        ]
    );
    let report = airlock_tools::report::check(
        &Catalog::builtin(),
        &Default::default(),
        &f.host(),
        &["gemini".into()],
    );
    assert_eq!(report.tools[0].paths[0].state, PathState::Unreadable);
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn every_builtin_tool_has_a_unique_name_a_description_and_valid_defaults() {
    let catalog = Catalog::builtin();
    let names = catalog.names();
    let expected = [
        "aider",
        "bash",
        "bun",
        "claude",
        "codex",
        "copilot",
        "cursor",
        "deno",
        "docker",
        "fish",
        "gemini",
        "git",
        "go",
        "herdr",
        "kitty",
        "mise",
        "node",
        "nvim",
        "oh-my-posh",
        "oh-my-zsh",
        "opencode",
        "pi",
        "portal",
        "powerlevel10k",
        "python",
        "revdiff",
        "rtk",
        "rust",
        "starship",
        "tmux",
        "uv",
        "zellij",
        "zsh",
    ];
    assert_eq!(names, expected);
    for tool in catalog.iter() {
        assert!(!tool.description().is_empty(), "{}", tool.name());
        for key in tool.keys() {
            // Every documented default is accepted by the tool's own validation.
            let text = format!("[tools.{}]\n{} = {}\n", tool.name(), key.name, key.default);
            settings(&text).unwrap_or_else(|e| panic!("{}: {e}", tool.name()));
        }
    }
}

#[test]
fn with_every_tool_present_no_two_mounts_or_files_share_a_target() {
    let mut f = Fixture::new();
    for b in [
        "aider",
        "bash",
        "bun",
        "claude",
        "codex",
        "copilot",
        "cursor-agent",
        "deno",
        "fish",
        "gemini",
        "go",
        "herdr",
        "mise",
        "node",
        "nvim",
        "oh-my-posh",
        "opencode",
        "pi",
        "python3",
        "rtk",
        "starship",
        "tmux",
        "uv",
        "zsh",
    ] {
        f.binary(b);
    }
    for d in [
        ".bun",
        ".deno",
        ".cache/deno",
        ".local/share/uv",
        ".cache/uv",
        ".local/bin",
        ".config/mise",
        ".local/share/mise",
        ".local/state/mise",
        ".config/fish",
        ".config/nvim",
        ".local/share/nvim",
        ".local/state/nvim",
        ".claude",
        ".config/Claude",
        ".codex/sessions",
        ".pi/agent/sessions",
        ".config/opencode",
        ".local/share/opencode",
        ".copilot",
        ".config/github-copilot",
        ".cache/github-copilot",
        ".gemini",
        ".cursor",
        ".aider",
        ".config/rtk",
        ".local/share/rtk",
        ".oh-my-zsh",
        "powerlevel10k",
        ".cache/gitstatus",
        ".config/oh-my-posh",
        ".tmux",
        ".config/tmux",
    ] {
        f.dir(d);
    }
    for file in [
        ".bashrc",
        ".zshrc",
        ".claude.json",
        ".p10k.zsh",
        ".config/starship.toml",
    ] {
        f.file(file, "");
    }
    f.set_env("SHELL", "/bin/zsh");
    let catalog = Catalog::builtin();
    let plan = airlock_tools::plan(
        &catalog,
        &Default::default(),
        &f.host(),
        airlock_config::NetworkMode::Proxy,
        &f.project,
    );
    let mut targets: Vec<&std::path::Path> = plan
        .mounts
        .iter()
        .map(|m| m.target.as_path())
        .chain(plan.files.iter().map(|file| file.target.as_path()))
        .collect();
    let count = targets.len();
    targets.sort();
    targets.dedup();
    assert_eq!(targets.len(), count, "a target is used twice: {plan:#?}");
    // Every tool with paths contributed (bash and fish are not $SHELL; go, node, python, git and
    // herdr mount nothing here).
    let mut tools: Vec<&str> = plan.mounts.iter().map(|m| m.tool.as_str()).collect();
    tools.dedup();
    assert_eq!(
        tools,
        [
            "aider",
            "bun",
            "claude",
            "codex",
            "copilot",
            "cursor",
            "deno",
            "gemini",
            "mise",
            "nvim",
            "oh-my-posh",
            "oh-my-zsh",
            "opencode",
            "pi",
            "powerlevel10k",
            "rtk",
            "tmux",
            "uv",
            "zsh"
        ]
    );
    assert!(plan.warnings.is_empty(), "{:?}", plan.warnings);
}
