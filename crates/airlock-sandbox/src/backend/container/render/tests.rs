use super::*;
use crate::backend::container::engine::Endpoint;

/// The fixture: a git project, whose sanitised `.git/config` is pinned.
fn spec() -> SandboxSpec {
    serde_json::from_str(include_str!("../testdata/spec.json")).unwrap()
}

/// An engine whose containers the keeper cannot enter (docker's, for another user than root)
/// gets neither a pin nor hidden files: a host rename would show the host's file inside.
#[test]
fn without_the_keeper_a_pin_and_hidden_files_are_refused() {
    let no_sockets: [PathBuf; 0] = [];
    let mut spec = spec();
    let pin = spec.hide.as_ref().unwrap().pins[0].target.clone();
    let r = unsupported(&spec, &podman(), &no_sockets, false).join("; ");
    assert!(
        r.contains(&format!(
            "cannot keep {} hidden or held in place",
            pin.display()
        )) && r.contains("use rootless podman, run airlock as root, use --backend native"),
        "{r}"
    );
    assert!(unsupported(&spec, &podman(), &no_sockets, true).is_empty());
    spec.hide.as_mut().unwrap().pins.clear();
    assert!(unsupported(&spec, &podman(), &no_sockets, false).is_empty());
    spec.hide.as_mut().unwrap().patterns = vec![".env".into(), ".env.*".into()];
    let r = unsupported(&spec, &podman(), &no_sockets, false).join("; ");
    assert!(
        r.contains("cannot keep .env, .env.* hidden") && r.contains("hide_env_files = false"),
        "{r}"
    );
    assert!(unsupported(&spec, &podman(), &no_sockets, true).is_empty());
}

#[test]
fn only_the_users_own_engines_or_root_let_the_keeper_in() {
    assert!(keeper_enters(&engine(EngineName::Podman, true), false));
    assert!(!keeper_enters(&engine(EngineName::Docker, false), false));
    assert!(keeper_enters(&engine(EngineName::Docker, false), true));
    assert!(keeper_enters(&engine(EngineName::Podman, false), true));
}

fn engine(name: EngineName, rootless: bool) -> Engine {
    Engine {
        name,
        program: format!("/usr/bin/{}", name.as_str()).into(),
        endpoint: Endpoint::Default,
        rootless,
    }
}

fn files() -> SessionFiles {
    SessionFiles {
        dir: "/home/dev/.local/share/airlock/sandboxes/proj-12345678/container/42".into(),
    }
}

fn argv(spec: &SandboxSpec, engine: &Engine, keep: bool) -> Result<Vec<String>, String> {
    let files = files();
    let plan = Plan {
        engine,
        image: "localhost/airlock-root:0123456789ab",
        exe: Path::new("/opt/airlock/bin/airlock"),
        files: &files,
        name: "airlock-proj-12345678-42",
        keep,
        tty: false,
        keeper: true,
    };
    let sockets = [PathBuf::from("/run/podman/podman.sock")];
    render(spec, &plan, &sockets).map(|args| {
        args.iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    })
}

const S: &str = "/home/dev/.local/share/airlock/sandboxes/proj-12345678";

/// The whole argv, exactly: a change to what the engine is told shows here.
#[test]
fn the_spec_renders_to_this_podman_argv() {
    let got = argv(&spec(), &engine(EngineName::Podman, true), false).unwrap();
    let c = format!("{S}/container/42");
    let expected: Vec<String> = [
        "run",
        "--pull",
        "never",
        "--name",
        "airlock-proj-12345678-42",
        "--rm",
        "--read-only",
        "--log-driver",
        "none",
        "--read-only-tmpfs=false",
        "--no-hosts",
        "--passwd=false",
        "--unsetenv-all",
        "--network",
        "none",
        "--cap-drop",
        "ALL",
        "--security-opt",
        "no-new-privileges",
        "--security-opt",
        &format!("seccomp={c}/seccomp.json"),
        "--userns",
        "keep-id",
        "--user",
        "1000:1000",
        "--hostname",
        "proj",
        "--workdir",
        "/home/dev/proj",
        "--env-file",
        &format!("{c}/env"),
        "--memory",
        "1073741824",
        "--cpus",
        "1.500",
        "--pids-limit",
        "256",
        "--mount",
        "type=tmpfs,dst=/sys,ro=true,tmpfs-mode=0755",
        "--mount",
        "type=bind,src=/usr,dst=/usr,ro=true",
        "--mount",
        "type=tmpfs,dst=/tmp,tmpfs-mode=1777,tmpfs-size=1048576",
        "--mount",
        "type=tmpfs,dst=/run,tmpfs-mode=1777,tmpfs-size=1048576",
        "--mount",
        "type=tmpfs,dst=/srv,ro=true,tmpfs-mode=0755",
        "--mount",
        &format!("type=bind,src={S}/home,dst=/home/dev"),
        "--mount",
        "type=bind,src=/home/dev/proj,dst=/home/dev/proj",
        "--mount",
        &format!("type=bind,src={c}/copy-0,dst=/etc/hosts"),
        "--mount",
        &format!("type=bind,src={c}/empty,dst=/home/dev/.netrc,ro=true"),
        "--mount",
        &format!("type=bind,src={S}/git/config,dst=/run/airlock/hidden/pin-0,ro=true"),
        "--mount",
        &format!("type=bind,src={c}/empty,dst=/run/airlock/hidden/empty,ro=true"),
        "--mount",
        "type=bind,src=/home/dev/my dir,dst=/home/dev/my dir,ro=true",
        "--mount",
        &format!("type=bind,src={c}/go,dst=/run/airlock/go,ro=true"),
        "--mount",
        "type=bind,src=/opt/airlock/bin/airlock,dst=/run/airlock/airlock-container-exec,ro=true",
        "--mount",
        &format!("type=bind,src={c}/status,dst=/.airlock/status"),
        "-i",
        "localhost/airlock-root:0123456789ab",
        "/run/airlock/airlock-container-exec",
        "--wait-go",
        "--writable=/home/dev/proj",
        "--writable=/tmp",
        "--",
        "sh",
        "-c",
        "echo hi",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    assert_eq!(got, expected);
}

#[test]
fn docker_and_root_podman_get_the_users_ids_without_keep_id_and_a_kept_container_a_name() {
    let docker = argv(&spec(), &engine(EngineName::Docker, false), true).unwrap();
    assert!(
        !docker
            .iter()
            .any(|a| a == "--userns" || a == "--no-hosts" || a == "--rm")
    );
    let at = docker.iter().position(|a| a == "--name").unwrap();
    assert_eq!(docker[at + 1], "airlock-proj-12345678-42");
    let at = docker.iter().position(|a| a == "--user").unwrap();
    assert_eq!(docker[at + 1], "1000:1000");
    let root = argv(&spec(), &engine(EngineName::Podman, false), false).unwrap();
    assert!(!root.iter().any(|a| a == "--userns"));
}

#[test]
fn host_network_is_the_engines_host_network_and_nested_namespaces_reach_the_wrapper() {
    let mut spec = spec();
    spec.network = NetworkMode::Host;
    spec.seccomp.nested_namespaces = true;
    let args = argv(&spec, &engine(EngineName::Podman, true), false).unwrap();
    let at = args.iter().position(|a| a == "--network").unwrap();
    assert_eq!(args[at + 1], "host");
    assert!(args.iter().any(|a| a == "--nested-namespaces"));
    assert!(!args.iter().any(|a| a.starts_with("--egress-port")));
}

#[test]
fn proxy_mode_tells_the_wrapper_to_wait_for_the_proxy_port() {
    let mut spec = spec();
    spec.network = NetworkMode::Proxy;
    let args = argv(&spec, &engine(EngineName::Podman, true), false).unwrap();
    let at = args.iter().position(|a| a == "--network").unwrap();
    assert_eq!(args[at + 1], "none");
    let dashdash = args.iter().position(|a| a == "--").unwrap();
    assert!(args[..dashdash].iter().any(|a| a == "--egress-port=3128"));
}

fn podman() -> Engine {
    engine(EngineName::Podman, true)
}

/// An overlay is podman's overlay volume: airlock's own upper and work dirs when writes persist,
/// podman's throwaway layer when they do not.
#[test]
fn overlays_become_podman_overlay_volumes() {
    let mut spec = spec();
    spec.mounts.push(MountOp::Overlay {
        lower: "/home/dev/.claude".into(),
        target: "/home/dev/.claude".into(),
        upper: crate::spec::Upper::Persistent {
            dir: format!("{S}/overlays/claude").into(),
        },
    });
    spec.mounts.push(MountOp::Overlay {
        lower: "/home/dev/.cache".into(),
        target: "/home/dev/.cache".into(),
        upper: crate::spec::Upper::Throwaway,
    });
    let args = argv(&spec, &podman(), false).unwrap();
    let volumes: Vec<&str> = args
        .windows(2)
        .filter(|w| w[0] == "-v")
        .map(|w| w[1].as_str())
        .collect();
    assert_eq!(
        volumes,
        [
            format!(
                "/home/dev/.claude:/home/dev/.claude:O,upperdir={S}/overlays/claude/upper,\
                 workdir={S}/container/42/work-0"
            ),
            "/home/dev/.cache:/home/dev/.cache:O".to_owned(),
        ]
    );
}

#[test]
fn what_an_engine_cannot_honour_is_refused_naming_it_and_the_way_out() {
    let no_sockets: [PathBuf; 0] = [];
    let refused = |spec: &SandboxSpec| unsupported(spec, &podman(), &no_sockets, true).join("; ");
    let mut proxy = spec();
    proxy.network = NetworkMode::Proxy;
    assert_eq!(refused(&proxy), "", "proxy mode is served (egress.rs)");
    let mut overlay = spec();
    overlay.mounts.push(MountOp::Overlay {
        lower: "/home/dev/.claude".into(),
        target: "/home/dev/.claude".into(),
        upper: crate::spec::Upper::Throwaway,
    });
    assert_eq!(refused(&overlay), "", "podman mounts overlays");
    let docker = unsupported(
        &overlay,
        &engine(EngineName::Docker, false),
        &no_sockets,
        true,
    )
    .join("; ");
    assert!(
        docker.contains("with podman only") && docker.contains("(/home/dev/.claude)"),
        "{docker}"
    );
    let mut stacked = spec();
    stacked.mounts.push(MountOp::Overlay {
        lower: "/home/dev/.claude".into(),
        target: "/home/dev/.claude".into(),
        upper: crate::spec::Upper::Stacked {
            dir: format!("{S}/overlays/claude").into(),
        },
    });
    let r = refused(&stacked);
    assert!(
        r.contains("cannot stack this session's view of /home/dev/.claude")
            && r.contains("--backend native"),
        "{r}"
    );
    let mut colon = spec();
    colon.mounts.push(MountOp::Overlay {
        lower: "/home/dev/a:b".into(),
        target: "/home/dev/a:b".into(),
        upper: crate::spec::Upper::Throwaway,
    });
    assert!(refused(&colon).contains("\"/home/dev/a:b\" in podman's overlay volume"));
    let mut comma = spec();
    comma.mounts.push(MountOp::Bind {
        source: "/srv/a,dst=/etc".into(),
        target: "/srv/a,dst=/etc".into(),
        writable: true,
    });
    let r = refused(&comma);
    assert!(r.contains("\"/srv/a,dst=/etc\""), "{r}");
    let mut covered = spec();
    covered.mounts.push(MountOp::Tmpfs {
        target: "/home/dev".into(),
        writable: true,
    });
    let r = refused(&covered);
    assert!(r.contains("mounts /home/dev over /home/dev/proj"), "{r}");
    let mut newline = spec();
    newline.env.insert("X".into(), "a\nFOO=b".into());
    assert!(refused(&newline).contains("X has a newline"));
    assert!(unsupported(&spec(), &podman(), &no_sockets, true).is_empty());
}

#[test]
fn a_bind_that_holds_the_engines_socket_is_refused() {
    let mut spec = spec();
    spec.mounts.push(MountOp::Bind {
        source: "/run/podman".into(),
        target: "/srv/engine".into(),
        writable: false,
    });
    let e = argv(&spec, &engine(EngineName::Podman, true), false).unwrap_err();
    assert!(e.contains("/run/podman/podman.sock"), "{e}");
}

#[test]
fn a_path_that_looks_like_an_option_stays_inside_its_mount_and_the_command_after_the_wrapper() {
    let mut spec = spec();
    spec.argv = vec!["--privileged".into()];
    spec.mounts.push(MountOp::Bind {
        source: "/srv/--privileged".into(),
        target: "/srv/--privileged".into(),
        writable: false,
    });
    let args = argv(&spec, &engine(EngineName::Podman, true), false).unwrap();
    assert!(
        args.iter()
            .any(|a| a == "type=bind,src=/srv/--privileged,dst=/srv/--privileged,ro=true")
    );
    let dashdash = args.iter().position(|a| a == "--").unwrap();
    assert_eq!(args[dashdash + 1..], ["--privileged"]);
    assert!(!args[..dashdash].iter().any(|a| a == "--privileged"));
}

/// Rootless podman without cgroup v2 ignores limits with a warning: a spec with any of them is
/// refused there, naming the keys and the way out; root podman, docker, a cgroup v2 host and a
/// spec without limits are not.
#[test]
fn limits_rootless_podman_would_ignore_are_refused() {
    let limited = Limits {
        memory: Some(64 << 20),
        pids: Some(50),
        ..Limits::default()
    };
    let rootless = engine(EngineName::Podman, true);
    let why = limits_refusal(&limited, &rootless, false).expect("refused");
    for part in [
        "the container backend",
        "[sandbox.resources] memory, pids",
        "rootless podman",
        "cgroup v1",
        "--backend native",
    ] {
        assert!(why.contains(part), "{part:?} in {why}");
    }
    let cpus = Limits {
        cpus_milli: Some(500),
        ..Limits::default()
    };
    assert!(limits_refusal(&cpus, &rootless, false).is_some_and(|w| w.contains("] cpus here")));
    assert_eq!(limits_refusal(&limited, &rootless, true), None);
    assert_eq!(
        limits_refusal(&limited, &engine(EngineName::Podman, false), false),
        None
    );
    assert_eq!(
        limits_refusal(&limited, &engine(EngineName::Docker, false), false),
        None
    );
    let tmpfs_only = Limits {
        tmpfs_bytes: 1 << 20,
        ..Limits::default()
    };
    assert_eq!(limits_refusal(&tmpfs_only, &rootless, false), None);
}
