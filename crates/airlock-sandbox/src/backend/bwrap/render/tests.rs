use super::*;

fn spec() -> SandboxSpec {
    serde_json::from_str(include_str!("../testdata/spec.json")).unwrap()
}

fn argv(r: &Rendered) -> Vec<String> {
    r.args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect()
}

/// The whole argv, exactly: a change to what bwrap is told shows here.
#[test]
fn the_spec_renders_to_this_bwrap_argv() {
    let r = render(&spec(), Path::new("/opt/airlock/bin/airlock")).unwrap();
    let expected = [
        "--unshare-user",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-net",
        "--uid",
        "0",
        "--gid",
        "0",
        "--hostname",
        "proj",
        "--die-with-parent",
        "--cap-add",
        "ALL",
        "--symlink",
        "usr/bin",
        "/bin",
        "--ro-bind",
        "/usr",
        "/usr",
        "--perms",
        "1777",
        "--size",
        "1048576",
        "--tmpfs",
        "/tmp",
        "--perms",
        "1777",
        "--size",
        "1048576",
        "--tmpfs",
        "/run",
        "--perms",
        "0755",
        "--tmpfs",
        "/srv",
        "--remount-ro",
        "/srv",
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--bind",
        "/home/dev/.local/share/airlock/sandboxes/proj-12345678/home",
        "/home/dev",
        "--bind",
        "/home/dev/proj",
        "/home/dev/proj",
        "--perms",
        "0644",
        "--file",
        "5",
        "/etc/hosts",
        "--perms",
        "0444",
        "--ro-bind-data",
        "6",
        "/home/dev/.netrc",
        "--perms",
        "0755",
        "--tmpfs",
        "/run/airlock/hidden",
        "--ro-bind",
        "/home/dev/.local/share/airlock/sandboxes/proj-12345678/git/config",
        "/run/airlock/hidden/pin-0",
        "--perms",
        "0444",
        "--file",
        "7",
        "/run/airlock/hidden/empty",
        "--ro-bind",
        "/home/dev/my dir",
        "/home/dev/my dir",
        "--remount-ro",
        "/run/airlock/hidden",
        "--ro-bind",
        "/opt/airlock/bin/airlock",
        "/run/airlock/airlock-stage",
        "--remount-ro",
        "/",
        "--",
        "/run/airlock/airlock-stage",
    ];
    assert_eq!(argv(&r), expected);
    assert_eq!(
        r.data,
        [
            DataFd::File("/etc/hosts".into()),
            DataFd::Empty,
            DataFd::Empty
        ]
    );
}

#[test]
fn host_network_keeps_the_network_namespace_and_no_size_means_the_default() {
    let mut spec = spec();
    spec.network = NetworkMode::Host;
    spec.limits.tmpfs_bytes = 0;
    let args = argv(&render(&spec, Path::new("/a")).unwrap());
    assert!(!args.iter().any(|a| a == "--unshare-net"));
    assert!(!args.iter().any(|a| a == "--size"));
    spec.network = NetworkMode::Proxy;
    let args = argv(&render(&spec, Path::new("/a")).unwrap());
    assert!(args.iter().any(|a| a == "--unshare-net"));
}

#[test]
fn overlays_are_their_lower_at_the_target_and_their_layers_staged_for_the_stage() {
    let mut spec = spec();
    let (claude, git) = ("/home/dev/.claude", "/home/dev/proj/.git");
    let state = "/home/dev/.local/share/airlock/sandboxes/proj-12345678";
    spec.mounts.push(MountOp::Overlay {
        lower: claude.into(),
        target: claude.into(),
        upper: crate::spec::Upper::Persistent {
            dir: format!("{state}/overlays/claude").into(),
        },
    });
    spec.mounts.push(MountOp::Overlay {
        lower: git.into(),
        target: git.into(),
        upper: crate::spec::Upper::Stacked {
            dir: format!("{state}/git").into(),
        },
    });
    spec.mounts.push(MountOp::Overlay {
        lower: "/home/dev/.cache".into(),
        target: "/home/dev/.cache".into(),
        upper: crate::spec::Upper::Throwaway,
    });
    let args = argv(&render(&spec, Path::new("/a")).unwrap());
    let joined = args.join(" ");
    for expected in [
        format!("--ro-bind {claude} {claude}"),
        format!("--ro-bind {git} {git}"),
        "--ro-bind /home/dev/.cache /home/dev/.cache".to_owned(),
        format!("--bind {state}/overlays/claude /run/airlock/overlays/0"),
        "--dir /run/airlock/overlays/1".to_owned(),
        format!("--ro-bind {state}/git/upper /run/airlock/overlays/1-saved"),
        "--dir /run/airlock/overlays/2".to_owned(),
    ] {
        assert!(joined.contains(&expected), "{expected:?} not in {joined}");
    }
    // The staging comes after every op of the spec, before the root is made read-only.
    let staged = joined.find("/run/airlock/overlays/0").unwrap();
    assert!(staged > joined.find("/home/dev/my dir").unwrap());
    assert!(staged < joined.rfind("--remount-ro / --").unwrap());
    assert!(unsupported(&spec).is_empty());
}

#[test]
fn a_mount_beneath_an_overlay_is_refused_naming_both() {
    let mut spec = spec();
    spec.mounts.push(MountOp::Overlay {
        lower: "/home/dev/.claude".into(),
        target: "/home/dev/.claude".into(),
        upper: crate::spec::Upper::Throwaway,
    });
    spec.mounts.push(MountOp::MaskFile {
        target: "/home/dev/.claude/.credentials.json".into(),
    });
    let e = render(&spec, Path::new("/a")).unwrap_err();
    assert!(e.contains("/home/dev/.claude/.credentials.json"), "{e}");
    assert!(e.contains("the overlay on /home/dev/.claude"), "{e}");
    assert!(e.contains("--backend native"), "{e}");
    // A later mount beside it (same prefix, another name) is fine.
    spec.mounts.pop();
    spec.mounts.push(MountOp::Tmpfs {
        target: "/home/dev/.claude-other".into(),
        writable: true,
    });
    assert!(unsupported(&spec).is_empty());
}

#[test]
fn the_workload_never_gets_bwraps_own_options_from_the_spec() {
    // A path that looks like an option stays one argument after its flag.
    let mut spec = spec();
    spec.mounts.push(MountOp::Bind {
        source: "/srv/--die-with-parent".into(),
        target: "/srv/--die-with-parent".into(),
        writable: false,
    });
    let args = argv(&render(&spec, Path::new("/a")).unwrap());
    let at = args
        .iter()
        .position(|a| a == "/srv/--die-with-parent")
        .unwrap();
    assert_eq!(args[at - 1], "--ro-bind");
    // The command is the stage alone: the spec's argv goes through the plan, not bwrap.
    assert_eq!(args.last().unwrap(), STAGE_PATH);
    assert!(!args.iter().any(|a| a == "echo hi"));
}
