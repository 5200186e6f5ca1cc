//! Spec tests: a profile and a fixture host in, the exact SandboxSpec out. No launching.

mod fixture;

use std::path::{Path, PathBuf};

use airlock_config::{MountMode, NetworkMode, Profile};
use airlock_sandbox::host::PathKind;
use airlock_sandbox::{MountOp, RunRequest, SpecError, build};
use fixture::{dir, host, mount, targets};
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
    assert!(pos("/home/dev/code/app") < pos("/home/dev/code/app/.airlock.toml"));
    assert!(pos("/run") < pos(airlock_sandbox::hide::EMPTY));
}

#[test]
fn hidden_files_are_a_rule_kept_for_the_session() {
    let profile = Profile {
        hide: vec!["*.pem".into(), "/config/master.key".into()],
        ..Profile::default()
    };
    let spec = build(&profile, &host(), &RunRequest::default()).expect("spec");
    let hide = spec.hide.expect("a keeper");
    assert_eq!(hide.root, PathBuf::from("/home/dev/code/app"));
    for pattern in [
        ".env",
        ".env.*",
        ".envrc",
        "/.airlock.toml",
        "*.pem",
        "/config/master.key",
    ] {
        assert!(
            hide.patterns.iter().any(|p| p == pattern),
            "{pattern} missing"
        );
    }
    assert!(hide.skip.iter().any(|s| s == "node_modules"));
    assert_eq!(hide.known.len(), 1, "the last session's masks come first");
    assert!(hide.index.ends_with("hidden.json"));
    assert!(
        hide.index
            .starts_with("/home/dev/.local/share/airlock/sandboxes")
    );
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
    assert_eq!(spec.hide, None, "nothing hidden, nothing pinned: no keeper");
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
    assert_eq!(
        text,
        "mount path /home/dev/data is listed twice with different modes, by \
         /home/dev/.config/airlock/config.toml: [[sandbox.mounts]] #1 (path = \"~/data\", mode = \"readonly\") \
         and by /home/dev/code/app/.airlock.toml: [[sandbox.mounts]] #1 \
         (path = \"/home/dev/data\", mode = \"readwrite\"); keep one entry"
    );
}
