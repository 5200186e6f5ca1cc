use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use airlock_config::NetworkMode;
use airlock_sandbox::SandboxSpec;
use airlock_sandbox::spec::{MountOp, PrepareStep, Upper};

use super::plan::{self, Plan, Session};

fn spec() -> SandboxSpec {
    serde_json::from_str(include_str!("testdata/spec.json")).unwrap()
}

fn carried() -> BTreeSet<String> {
    ["MY_TOKEN".to_owned()].into()
}

fn planned(spec: &SandboxSpec) -> Result<Plan, String> {
    let session = Session {
        pid: 42,
        tty: false,
        env_file: Path::new("/state/sbx/42/env"),
    };
    plan::plan(spec, &carried(), &session)
}

fn refusal(spec: &SandboxSpec) -> String {
    let refused = plan::unsupported(spec);
    assert!(!refused.is_empty(), "not refused");
    assert_eq!(planned(spec).unwrap_err(), refused.join("; "));
    refused.join("; ")
}

/// The whole argv, exactly: a change to what sbx is told shows here.
#[test]
fn the_spec_renders_to_these_sbx_calls() {
    let p = planned(&spec()).unwrap();
    assert_eq!(p.name, "airlock-proj-7aa6b4cb-42");
    assert_eq!(
        p.create,
        [
            "create",
            "--name",
            "airlock-proj-7aa6b4cb-42",
            "--env-file",
            "/state/sbx/42/env",
            "--publish",
            "127.0.0.1:8080:3000",
            "--cpus",
            "2",
            "--memory",
            "8192m",
            "shell",
            "/home/dev/proj",
            "/home/dev/proj/.git:ro",
            "/data/fixtures:ro",
        ]
    );
    assert_eq!(
        p.exec,
        [
            "exec",
            "--interactive",
            "--workdir",
            "/home/dev/proj/src",
            "airlock-proj-7aa6b4cb-42",
            "--",
            "cargo",
            "test",
            "--",
            "--nocapture",
        ]
    );
    assert_eq!(p.rm, ["rm", "--force", "airlock-proj-7aa6b4cb-42"]);
    // Only what means something in the VM: no host paths, no airlock proxy or CA variables.
    let names: Vec<&str> = p.env.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        names,
        [
            "AIRLOCK",
            "AIRLOCK_PROJECT",
            "LANG",
            "LC_ALL",
            "MY_TOKEN",
            "TERM"
        ]
    );
}

#[test]
fn a_terminal_adds_tty_and_no_network_denies_every_host() {
    let mut s = spec();
    s.network = NetworkMode::None;
    let session = Session {
        pid: 7,
        tty: true,
        env_file: Path::new("/e"),
    };
    let p = plan::plan(&s, &carried(), &session).unwrap();
    let at = p.create.iter().position(|a| a == "--deny-network").unwrap();
    assert_eq!(p.create[at + 1], "**");
    assert_eq!(&p.exec[..3], ["exec", "--interactive", "--tty"]);
}

#[test]
fn the_egress_proxy_is_refused_with_the_ways_out() {
    let mut s = spec();
    s.network = NetworkMode::Proxy;
    let e = refusal(&s);
    assert!(e.contains("egress proxy"), "{e}");
    assert!(
        e.contains("--network none") && e.contains("--network host"),
        "{e}"
    );
}

#[test]
fn hidden_files_are_refused_naming_no_hide_env() {
    let mut s: SandboxSpec = spec();
    s.hide = Some(airlock_sandbox::hide::HideSpec {
        root: s.project.clone(),
        patterns: vec![".env".into()],
        skip: Vec::new(),
        known: Vec::new(),
        pins: Vec::new(),
        index: "/state/hidden.json".into(),
    });
    let e = refusal(&s);
    assert!(e.contains(".env") && e.contains("--no-hide-env"), "{e}");
}

#[test]
fn the_git_layer_overlay_is_refused_naming_readonly_mode() {
    let mut s = spec();
    s.mounts.push(MountOp::Overlay {
        lower: "/home/dev/proj/.git".into(),
        target: "/home/dev/proj/.git".into(),
        upper: Upper::Owned {
            dir: "/state/layers/git".into(),
        },
    });
    let e = refusal(&s);
    assert!(e.contains("an overlay at /home/dev/proj/.git"), "{e}");
    assert!(e.contains("--git-mode readonly"), "{e}");
}

#[test]
fn a_pinned_copy_passes_only_while_it_matches_the_host_file() {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("proj");
    std::fs::create_dir_all(project.join(".git")).unwrap();
    std::fs::write(project.join(".git/config"), "[core]\n\tbare = false\n").unwrap();
    let mut s = spec();
    s.project = project.clone();
    s.cwd = project.clone();
    s.mounts = vec![MountOp::Bind {
        source: project.clone(),
        target: project.clone(),
        writable: true,
    }];
    let generated = PathBuf::from("/state/generated/git-config");
    s.mounts.push(MountOp::Bind {
        source: generated.clone(),
        target: project.join(".git/config"),
        writable: false,
    });
    s.prepare = vec![PrepareStep::WriteFile {
        path: generated.clone(),
        content: "[core]\n\tbare = false\n".into(),
    }];
    assert_eq!(plan::unsupported(&s), Vec::<String>::new());
    // A token the sanitiser took out: the VM would see it through the workspace.
    std::fs::write(
        project.join(".git/config"),
        "[core]\n\tbare = false\n[github]\n\ttoken = x\n",
    )
    .unwrap();
    let e = refusal(&s);
    assert!(
        e.contains(".git/config holds what airlock takes out"),
        "{e}"
    );
}

#[test]
fn limits_forwards_and_places_sbx_cannot_give_are_refused() {
    let mut s = spec();
    s.limits.pids = Some(100);
    assert!(refusal(&s).contains("pids"));
    let mut s = spec();
    s.limits.cpus_milli = Some(1500);
    assert!(refusal(&s).contains("whole CPUs"));
    let mut s = spec();
    s.ports.forwards[0].direction = airlock_config::ports::PortDirection::Out;
    assert!(refusal(&s).contains("127.0.0.1:8080 out"));
    let mut s = spec();
    s.cwd = "/home/dev".into();
    assert!(refusal(&s).contains("working directory /home/dev"));
    let mut s = spec();
    s.mounts.push(MountOp::Tmpfs {
        target: "/home/dev/proj/build".into(),
        writable: true,
    });
    assert!(refusal(&s).contains("a tmpfs at /home/dev/proj/build"));
}

#[test]
fn a_custom_mount_sbx_cannot_make_is_refused_naming_its_entry() {
    let mut s = spec();
    s.mounts.push(MountOp::Bind {
        source: "/srv/a".into(),
        target: "/data/b".into(),
        writable: false,
    });
    s.mount_origins
        .insert("/data/b".into(), "x.toml: [[sandbox.mounts]] #2".into());
    let e = refusal(&s);
    assert!(e.contains("/data/b (x.toml: [[sandbox.mounts]] #2)"), "{e}");
}

#[test]
fn hostile_values_cannot_become_sbx_flags() {
    // A project directory named with spaces, a newline and a leading dash: the name is cleaned,
    // the path is refused (a control character), and nothing starts with '-'.
    assert_eq!(
        plan::sandbox_name("-rf --x\ny-0123abcd", 9).unwrap(),
        "airlock--rf---x-y-0123abcd-9"
    );
    let long = format!("{}-0123abcd", "a".repeat(200));
    let name = plan::sandbox_name(&long, 1).unwrap();
    assert!(name.ends_with("a-0123abcd-1") && name.len() < 70, "{name}");
    let mut s = spec();
    s.project = "/home/dev/-x\n--name".into();
    s.cwd = s.project.clone();
    s.mounts = vec![MountOp::Bind {
        source: s.project.clone(),
        target: s.project.clone(),
        writable: true,
    }];
    assert!(refusal(&s).contains("cannot name"));
    let mut s = spec();
    s.project = "/home/dev/a:rw".into();
    s.cwd = s.project.clone();
    s.mounts = vec![];
    assert!(refusal(&s).contains("cannot name \"/home/dev/a:rw\""));
    // A value that looks like a flag goes into the env file, never into the argv; a command
    // that looks like one comes after `--`.
    let mut s = spec();
    s.env.insert("MY_TOKEN".into(), "--privileged".into());
    s.argv = vec!["--name".into(), "x".into()];
    let p = planned(&s).unwrap();
    assert!(!p.create.iter().any(|a| a == "--privileged"));
    let dashdash = p.exec.iter().position(|a| a == "--").unwrap();
    assert_eq!(&p.exec[dashdash + 1..], ["--name", "x"]);
    let mut s = spec();
    s.env.insert("MY_TOKEN".into(), "a\nEVIL=1".into());
    assert!(refusal(&s).contains("MY_TOKEN has a newline"));
}

#[test]
fn a_linked_worktrees_repository_outside_the_project_is_read_only_and_checked_too() {
    let dir = tempfile::tempdir().unwrap();
    let main_git = dir.path().join("main/.git");
    std::fs::create_dir_all(&main_git).unwrap();
    std::fs::write(main_git.join("config"), "[core]\n\tbare = false\n").unwrap();
    let mut s = spec();
    s.env.insert(
        "AIRLOCK_GIT_READONLY".into(),
        main_git.display().to_string(),
    );
    s.mounts.push(MountOp::Bind {
        source: main_git.clone(),
        target: main_git.clone(),
        writable: false,
    });
    let generated = PathBuf::from("/state/generated/git-config");
    s.mounts.push(MountOp::Bind {
        source: generated.clone(),
        target: main_git.join("config"),
        writable: false,
    });
    s.prepare.push(PrepareStep::WriteFile {
        path: generated,
        content: "[core]\n\tbare = false\n".into(),
    });
    let p = planned(&s).unwrap();
    let ro = format!("{}:ro", main_git.display());
    assert_eq!(p.create.last(), Some(&ro), "{:?}", p.create);
    std::fs::write(
        main_git.join("config"),
        "[remote \"o\"]\n\turl = https://x:tok@example.com/r\n",
    )
    .unwrap();
    let e = refusal(&s);
    assert!(e.contains("config holds what airlock takes out"), "{e}");
}
