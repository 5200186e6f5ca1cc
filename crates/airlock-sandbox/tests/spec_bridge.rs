//! Spec tests of the host bridge inside a sandbox: shims, the state dir, the git config.

mod fixture;

use std::collections::BTreeMap;
use std::path::Path;

use airlock_config::Profile;
use airlock_sandbox::{MountOp, RunRequest, build};
use fixture::host;
#[test]
fn bridge_mounts_shims_and_gitconfig() {
    use airlock_sandbox::PrepareStep;
    use airlock_sandbox::host::BridgeFacts;
    let mut h = host();
    h.bridge = BridgeFacts {
        state_dir: Some("/home/dev/.local/state/airlock/bridge".into()),
        exe: Some("/usr/local/bin/airlock".into()),
        shim: None,
    };
    let profile = Profile {
        bridge_commands: vec!["mytool".into()],
        ..Profile::default()
    };
    let spec = build(&profile, &h, &RunRequest::default()).expect("spec");
    let bridge_ops: Vec<&MountOp> = spec
        .mounts
        .iter()
        .filter(|op| bridge_target(op.target()))
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
    assert!(index("/run") < index("/run/airlock/bridge/run"));
    // The state dir, socket dir included, is read-only: no sandbox can swap the daemon's socket.
    assert!(
        !spec.writable.iter().any(|p| p.starts_with("/run/airlock")),
        "{:?}",
        spec.writable
    );
    for bound in ["/run/airlock/bridge/token", "/run/airlock/bridge/run"] {
        assert!(
            spec.mounts.iter().any(|op| matches!(op,
            MountOp::Bind { target, writable: false, .. } if target == Path::new(bound))),
            "{bound}"
        );
    }
    // Never the audit log (nor the whole state dir).
    assert!(
        !spec
            .mounts
            .iter()
            .any(|op| op.target() == Path::new("/run/airlock/bridge")
                || op.target().ends_with("log")),
        "{:?}",
        spec.mounts
    );

    // Not installed: the shims are still there (xdg-open says how to install), nothing else.
    h.bridge.state_dir = None;
    let spec = build(&profile, &h, &RunRequest::default()).expect("spec");
    let targets: Vec<String> = spec
        .mounts
        .iter()
        .filter(|op| bridge_target(op.target()))
        .map(|op| op.target().display().to_string())
        .collect();
    assert_eq!(targets, ["/run/airlock/airlock", "/run/airlock/bin"]);
    assert!(!spec.env.contains_key("GIT_CONFIG_SYSTEM"));
    assert!(spec.env["PATH"].starts_with("/run/airlock/bin:"));

    // airlock-shim installed beside airlock: the shims are links to it, bound read-only.
    h.bridge.shim = Some("/usr/local/bin/airlock-shim".into());
    let spec = build(&profile, &h, &RunRequest::default()).expect("spec");
    assert!(spec.mounts.iter().any(|op| matches!(op,
        MountOp::Bind { source, target, writable: false }
            if source == Path::new("/usr/local/bin/airlock-shim")
                && target == Path::new("/run/airlock/airlock-shim"))));
    assert!(spec.prepare.iter().any(|s| matches!(s,
        PrepareStep::Symlinks { link_to, names, .. }
            if link_to == Path::new("/run/airlock/airlock-shim")
                && names.iter().any(|n| n == "xdg-open"))));
    h.bridge.shim = None;

    // bridge = false: nothing at all.
    let off = Profile {
        bridge: false,
        ..Profile::default()
    };
    let spec = build(&off, &h, &RunRequest::default()).expect("spec");
    assert!(spec.mounts.iter().all(|op| !bridge_target(op.target())));
    assert!(!spec.env.contains_key("BROWSER"));

    // GIT_CREDENTIAL_BRIDGE=0 on the host: no credential helper registration.
    let mut h = host();
    h.bridge = BridgeFacts {
        state_dir: Some("/home/dev/.local/state/airlock/bridge".into()),
        exe: Some("/usr/local/bin/airlock".into()),
        shim: None,
    };
    h.env.insert("GIT_CREDENTIAL_BRIDGE".into(), "0".into());
    let spec = build(&Profile::default(), &h, &RunRequest::default()).expect("spec");
    assert!(!spec.env.contains_key("GIT_CONFIG_SYSTEM"));
    assert!(
        spec.mounts
            .iter()
            .any(|op| op.target() == Path::new("/run/airlock/bridge/run"))
    );
}

/// A bridge mount: under `/run/airlock`, but not the hidden files' sources.
fn bridge_target(target: &Path) -> bool {
    target.starts_with("/run/airlock") && !target.starts_with(airlock_sandbox::hide::PINNED_DIR)
}
