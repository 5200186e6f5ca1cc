//! Spec tests: a profile and a fixture host in, the exact SandboxSpec out. No launching.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use airlock_config::{MountMode, NetworkMode, Profile, ProfileMount};
use airlock_sandbox::host::{MountSource, PathKind};
use airlock_sandbox::{HostFacts, MountOp, RunRequest, SpecError, build};

fn dir() -> PathKind {
    PathKind::Dir
}

fn link(to: &str, resolved: &str) -> PathKind {
    PathKind::Symlink {
        link_to: to.into(),
        resolved: Some(resolved.into()),
    }
}

/// A Debian-like host: merged /usr, resolv.conf pointing into /run, a project in the home.
fn host() -> HostFacts {
    let system = [
        ("/usr", dir()),
        ("/bin", link("usr/bin", "/usr/bin")),
        ("/sbin", link("usr/sbin", "/usr/sbin")),
        ("/lib", link("usr/lib", "/usr/lib")),
        ("/lib64", link("usr/lib64", "/usr/lib64")),
        ("/lib32", PathKind::Missing),
        ("/opt", dir()),
    ];
    let etc = [
        ("/etc/passwd", PathKind::File),
        ("/etc/ssl", dir()),
        (
            "/etc/localtime",
            link("/usr/share/zoneinfo/Etc/UTC", "/usr/share/zoneinfo/Etc/UTC"),
        ),
        (
            "/etc/resolv.conf",
            link(
                "../run/systemd/resolve/stub-resolv.conf",
                "/run/systemd/resolve/stub-resolv.conf",
            ),
        ),
        ("/etc/hosts", PathKind::File),
        ("/etc/timezone", PathKind::Missing),
    ];
    let env = [
        ("PATH", "/usr/local/bin:/usr/bin:/bin"),
        ("SHELL", "/bin/zsh"),
        ("TERM", "xterm-256color"),
        ("LANG", "en_US.UTF-8"),
        ("LC_TIME", "de_DE.UTF-8"),
        ("AWS_SECRET_ACCESS_KEY", "hunter2"),
        ("GITHUB_TOKEN", "ghp_x"),
        ("EDITOR", "nvim"),
    ];
    HostFacts {
        home: "/home/dev".into(),
        user: "dev".into(),
        uid: 1000,
        gid: 1000,
        hostname: "box".into(),
        env: env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        cwd: "/home/dev/code/app/src".into(),
        project: "/home/dev/code/app".into(),
        sandboxes_dir: "/home/dev/.local/share/airlock/sandboxes".into(),
        system: system
            .into_iter()
            .map(|(p, k)| (PathBuf::from(p), k))
            .collect(),
        etc: etc
            .into_iter()
            .map(|(p, k)| (PathBuf::from(p), k))
            .collect(),
        env_files: vec![
            "/home/dev/code/app/.env".into(),
            "/home/dev/code/app/web/.env.local".into(),
        ],
        project_config: Some("/home/dev/code/app/.airlock.toml".into()),
        mount_sources: BTreeMap::new(),
        bridge: Default::default(),
    }
}

fn mount(host: &mut HostFacts, path: &str, mode: MountMode, kind: PathKind) -> ProfileMount {
    let expanded = path.replacen('~', "/home/dev", 1);
    let resolved = (kind != PathKind::Missing).then(|| PathBuf::from(&expanded));
    host.mount_sources.insert(
        path.to_owned(),
        MountSource {
            path: expanded.into(),
            resolved,
            kind,
        },
    );
    ProfileMount {
        path: path.into(),
        mode,
        origin: "/home/dev/.config/airlock/config.toml".into(),
    }
}

fn targets(ops: &[MountOp]) -> Vec<String> {
    ops.iter()
        .map(|op| op.target().display().to_string())
        .collect()
}

#[test]
fn default_spec() {
    let spec = build(&Profile::default(), &host(), &RunRequest::default()).expect("spec");
    insta::assert_json_snapshot!(spec);
}

#[test]
fn secrets_and_unlisted_host_env_stay_out() {
    let spec = build(&Profile::default(), &host(), &RunRequest::default()).expect("spec");
    assert!(!spec.env.contains_key("AWS_SECRET_ACCESS_KEY"));
    assert!(!spec.env.contains_key("GITHUB_TOKEN"));
    assert!(!spec.env.contains_key("EDITOR"));
    // Nothing of the real home is bound: the only mount at the home path is the synthetic one.
    for op in &spec.mounts {
        if let MountOp::Bind { source, .. } = op {
            assert!(
                !source.starts_with("/home/dev")
                    || source.starts_with("/home/dev/code/app")
                    || source.starts_with("/home/dev/.local/share/airlock/sandboxes"),
                "unexpected host-home bind {source:?}"
            );
        }
    }
}

#[test]
fn parents_come_before_children() {
    let spec = build(&Profile::default(), &host(), &RunRequest::default()).expect("spec");
    let order = targets(&spec.mounts);
    let pos = |t: &str| {
        order
            .iter()
            .position(|x| x == t)
            .unwrap_or_else(|| panic!("{t} missing"))
    };
    assert!(pos("/home/dev") < pos("/home/dev/code/app"));
    assert!(pos("/home/dev/code/app") < pos("/home/dev/code/app/.env"));
    assert!(pos("/home/dev/code/app") < pos("/home/dev/code/app/web/.env.local"));
}

#[test]
fn env_files_unmasked_when_asked() {
    let profile = Profile {
        hide_env_files: false,
        ..Profile::default()
    };
    let spec = build(&profile, &host(), &RunRequest::default()).expect("spec");
    assert!(
        !spec
            .mounts
            .iter()
            .any(|op| matches!(op, MountOp::MaskFile { .. }))
    );
}

#[test]
fn passthrough_copies_only_named_variables() {
    let profile = Profile {
        env_passthrough: vec!["EDITOR".into(), "NOT_SET".into()],
        ..Profile::default()
    };
    let spec = build(&profile, &host(), &RunRequest::default()).expect("spec");
    assert_eq!(spec.env.get("EDITOR").map(String::as_str), Some("nvim"));
    assert!(!spec.env.contains_key("NOT_SET"));
    let reserved = Profile {
        env_passthrough: vec!["HOME".into()],
        ..Profile::default()
    };
    assert_eq!(
        build(&reserved, &host(), &RunRequest::default()),
        Err(SpecError::ReservedEnv("HOME".into()))
    );
}

#[test]
fn command_line_and_network() {
    let request = RunRequest {
        argv: vec!["claude".into(), "--resume".into()],
        network: Some(NetworkMode::None),
        ..RunRequest::default()
    };
    let spec = build(&Profile::default(), &host(), &request).expect("spec");
    assert_eq!(spec.argv, ["claude", "--resume"]);
    assert_eq!(spec.network, NetworkMode::None);
    assert_eq!(spec.cwd, Path::new("/home/dev/code/app/src"));
    let shell = build(&Profile::default(), &host(), &RunRequest::default()).expect("spec");
    assert_eq!(shell.argv, ["/bin/zsh"]);
}

#[test]
fn proxy_mode_points_every_client_at_the_egress_proxy() {
    let request = RunRequest {
        network: Some(NetworkMode::Proxy),
        allow_hosts: vec!["example.org".into()],
        deny_hosts: vec!["evil.test".into()],
        ..RunRequest::default()
    };
    let mut h = host();
    h.env
        .insert("HTTPS_PROXY".into(), "http://corp-proxy:8080".into());
    let profile = Profile {
        env_passthrough: vec!["HTTPS_PROXY".into()],
        ..Profile::default()
    };
    let spec = build(&profile, &h, &request).expect("spec");
    let egress = spec.egress.as_ref().expect("egress spec in proxy mode");
    assert_eq!(egress.url, "http://127.0.0.1:3128");
    assert_eq!(egress.allow_hosts, ["example.org"]);
    assert_eq!(egress.deny_hosts, ["evil.test"]);
    assert_eq!(
        egress.log,
        Path::new("/home/dev/.local/share/airlock/sandboxes/app-2292478a/logs/network.jsonl")
    );
    for key in [
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "http_proxy",
        "https_proxy",
        "all_proxy",
        "npm_config_proxy",
        "npm_config_https_proxy",
        "YARN_HTTP_PROXY",
        "YARN_HTTPS_PROXY",
        "PIP_PROXY",
        "CARGO_HTTP_PROXY",
    ] {
        assert_eq!(
            spec.env.get(key).map(String::as_str),
            Some("http://127.0.0.1:3128"),
            "{key}"
        );
    }
    assert_eq!(
        spec.env.get("NO_PROXY").map(String::as_str),
        Some("localhost,127.0.0.1,::1")
    );
    assert_eq!(
        spec.env.get("NODE_USE_ENV_PROXY").map(String::as_str),
        Some("1")
    );
    let host_request = RunRequest {
        network: Some(NetworkMode::Host),
        ..RunRequest::default()
    };
    let host_mode = build(&Profile::default(), &host(), &host_request).expect("spec");
    assert!(host_mode.egress.is_none());
    assert!(!host_mode.env.contains_key("HTTP_PROXY"));
}

#[test]
fn cwd_outside_the_project_falls_back_to_the_project() {
    let mut h = host();
    h.cwd = "/srv".into();
    let spec = build(&Profile::default(), &h, &RunRequest::default()).expect("spec");
    assert_eq!(spec.cwd, h.project);
}

#[test]
fn refused_projects() {
    let mut h = host();
    h.project = "/".into();
    assert_eq!(
        build(&Profile::default(), &h, &RunRequest::default()),
        Err(SpecError::ProjectIsRoot)
    );
    h.project = "/home/dev".into();
    assert_eq!(
        build(&Profile::default(), &h, &RunRequest::default()),
        Err(SpecError::ProjectIsHome("/home/dev".into()))
    );
    h.project = "/home".into();
    let err = build(&Profile::default(), &h, &RunRequest::default()).expect_err("contains home");
    assert!(
        err.to_string()
            .contains("contains your home directory /home/dev"),
        "{err}"
    );
}

#[test]
fn custom_mounts() {
    let mut h = host();
    let mounts = vec![
        mount(&mut h, "~/datasets", MountMode::Readonly, dir()),
        mount(&mut h, "/srv/cache", MountMode::Readwrite, dir()),
        mount(&mut h, "~/code/app/secrets", MountMode::Hidden, dir()),
        mount(&mut h, "~/code/app/node_modules", MountMode::Tmpfs, dir()),
        mount(
            &mut h,
            "~/code/app/key.pem",
            MountMode::Hidden,
            PathKind::File,
        ),
        mount(&mut h, "~/datasets", MountMode::Readonly, dir()),
    ];
    let profile = Profile {
        mounts,
        ..Profile::default()
    };
    let spec = build(&profile, &h, &RunRequest::default()).expect("spec");
    let custom: Vec<_> = spec
        .mounts
        .iter()
        .filter(|op| {
            let t = op.target();
            t.starts_with("/home/dev/datasets")
                || t.starts_with("/srv")
                || t.starts_with("/home/dev/code/app/")
        })
        .cloned()
        .collect();
    insta::assert_json_snapshot!(custom);
    assert!(spec.writable.contains(&PathBuf::from("/srv/cache")));
    assert!(
        spec.writable
            .contains(&PathBuf::from("/home/dev/code/app/node_modules"))
    );
    assert!(!spec.writable.contains(&PathBuf::from("/home/dev/datasets")));
}

#[test]
fn bad_mounts_are_rejected_with_the_offending_value() {
    let cases: Vec<(&str, MountMode, PathKind, &str)> = vec![
        (
            "relative/dir",
            MountMode::Readonly,
            dir(),
            "must be absolute",
        ),
        (
            "~/missing",
            MountMode::Readonly,
            PathKind::Missing,
            "/home/dev/missing does not exist",
        ),
        (
            "/etc/passwd",
            MountMode::Readwrite,
            PathKind::File,
            "one of airlock's own mounts",
        ),
        (
            "~/code/app",
            MountMode::Readonly,
            dir(),
            "one of airlock's own mounts",
        ),
        (
            "~/code",
            MountMode::Hidden,
            dir(),
            "would hide /home/dev/code/app",
        ),
        (
            "~/notes.txt",
            MountMode::Tmpfs,
            PathKind::File,
            "needs a directory",
        ),
        (
            "/dev/sda",
            MountMode::Readonly,
            PathKind::Other,
            "not a file or directory",
        ),
        (
            "/srv/../etc",
            MountMode::Readonly,
            dir(),
            "must be absolute",
        ),
    ];
    for (path, mode, kind, expected) in cases {
        let mut h = host();
        let m = mount(&mut h, path, mode, kind);
        let profile = Profile {
            mounts: vec![m],
            ..Profile::default()
        };
        let err = build(&profile, &h, &RunRequest::default()).expect_err(path);
        assert!(err.to_string().contains(expected), "{path}: {err}");
    }
}

#[test]
fn duplicate_mount_with_other_mode_is_an_error() {
    let mut h = host();
    let a = mount(&mut h, "~/data", MountMode::Readonly, dir());
    let mut b = mount(&mut h, "/home/dev/data", MountMode::Readwrite, dir());
    b.origin = "/home/dev/code/app/.airlock.toml".into();
    let profile = Profile {
        mounts: vec![a, b],
        ..Profile::default()
    };
    let err = build(&profile, &h, &RunRequest::default()).expect_err("duplicate");
    let text = err.to_string();
    assert!(text.contains("listed twice"), "{text}");
    assert!(
        text.contains("readonly in /home/dev/.config/airlock/config.toml"),
        "{text}"
    );
    assert!(
        text.contains("readwrite in /home/dev/code/app/.airlock.toml"),
        "{text}"
    );
}

#[test]
fn masks_under_a_custom_tmpfs_are_dropped() {
    let mut h = host();
    let m = mount(&mut h, "~/code/app/web", MountMode::Tmpfs, dir());
    let profile = Profile {
        mounts: vec![m],
        ..Profile::default()
    };
    let spec = build(&profile, &h, &RunRequest::default()).expect("spec");
    assert!(!targets(&spec.mounts).contains(&"/home/dev/code/app/web/.env.local".to_owned()));
    assert!(targets(&spec.mounts).contains(&"/home/dev/code/app/.env".to_owned()));
}

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
    assert_eq!(spec.demote_persistent_uppers(), 1);
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

#[test]
fn bridge_mounts_shims_and_gitconfig() {
    use airlock_sandbox::PrepareStep;
    use airlock_sandbox::host::BridgeFacts;
    let mut h = host();
    h.bridge = BridgeFacts {
        state_dir: Some("/home/dev/.local/state/airlock/bridge".into()),
        exe: Some("/usr/local/bin/airlock".into()),
    };
    let profile = Profile {
        bridge_commands: vec!["mytool".into()],
        ..Profile::default()
    };
    let spec = build(&profile, &h, &RunRequest::default()).expect("spec");
    let bridge_ops: Vec<&MountOp> = spec
        .mounts
        .iter()
        .filter(|op| op.target().starts_with("/run/airlock"))
        .collect();
    let prepare: Vec<&PrepareStep> = spec
        .prepare
        .iter()
        .filter(|s| {
            matches!(
                s,
                PrepareStep::Symlinks { .. } | PrepareStep::WriteFile { .. }
            )
        })
        .collect();
    let env: BTreeMap<&str, &str> = [
        "PATH",
        "BROWSER",
        "GIT_CONFIG_SYSTEM",
        "AIRLOCK_PROJECT_DIR",
        "AIRLOCK_HOST_HOME_DIR",
    ]
    .into_iter()
    .filter_map(|k| spec.env.get(k).map(|v| (k, v.as_str())))
    .collect();
    insta::assert_json_snapshot!((bridge_ops, prepare, env));
    // /run (a fresh tmpfs) comes before everything the bridge puts under it.
    let index = |t: &str| {
        spec.mounts
            .iter()
            .position(|op| op.target() == Path::new(t))
            .unwrap()
    };
    assert!(index("/run") < index("/run/airlock/bridge"));
    // The state dir, socket dir included, is read-only: no sandbox can swap the daemon's socket.
    assert!(
        !spec.writable.iter().any(|p| p.starts_with("/run/airlock")),
        "{:?}",
        spec.writable
    );
    assert!(spec.mounts.iter().any(|op| matches!(op,
        MountOp::Bind { target, writable: false, .. } if target == Path::new("/run/airlock/bridge"))));

    // Not installed: the shims are still there (xdg-open says how to install), nothing else.
    h.bridge.state_dir = None;
    let spec = build(&profile, &h, &RunRequest::default()).expect("spec");
    let targets: Vec<String> = spec
        .mounts
        .iter()
        .filter(|op| op.target().starts_with("/run/airlock"))
        .map(|op| op.target().display().to_string())
        .collect();
    assert_eq!(targets, ["/run/airlock/airlock", "/run/airlock/bin"]);
    assert!(!spec.env.contains_key("GIT_CONFIG_SYSTEM"));
    assert!(spec.env["PATH"].starts_with("/run/airlock/bin:"));

    // bridge = false: nothing at all.
    let off = Profile {
        bridge: false,
        ..Profile::default()
    };
    let spec = build(&off, &h, &RunRequest::default()).expect("spec");
    assert!(
        spec.mounts
            .iter()
            .all(|op| !op.target().starts_with("/run/airlock"))
    );
    assert!(!spec.env.contains_key("BROWSER"));

    // GIT_CREDENTIAL_BRIDGE=0 on the host: no credential helper registration.
    let mut h = host();
    h.bridge = BridgeFacts {
        state_dir: Some("/home/dev/.local/state/airlock/bridge".into()),
        exe: Some("/usr/local/bin/airlock".into()),
    };
    h.env.insert("GIT_CREDENTIAL_BRIDGE".into(), "0".into());
    let spec = build(&Profile::default(), &h, &RunRequest::default()).expect("spec");
    assert!(!spec.env.contains_key("GIT_CONFIG_SYSTEM"));
    assert!(
        spec.mounts
            .iter()
            .any(|op| op.target() == Path::new("/run/airlock/bridge"))
    );
}
