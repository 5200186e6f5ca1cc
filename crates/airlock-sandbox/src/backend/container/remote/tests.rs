//! The remote argv exactly, what a remote engine refuses, and the copy-back's unpacking of a
//! hostile tar.

use std::path::{Path, PathBuf};

use super::super::engine::{Endpoint, Engine, EngineName};
use super::super::render::SessionFiles;
use super::*;
use crate::spec::{MountOp, SandboxSpec};

fn spec() -> SandboxSpec {
    serde_json::from_str(include_str!("../testdata/spec.json")).unwrap()
}

fn remote() -> Engine {
    Engine {
        name: EngineName::Podman,
        program: "/usr/bin/podman".into(),
        endpoint: Endpoint::Remote("tcp://10.0.0.2:8080".into()),
        rootless: false,
    }
}

const S: &str = "/home/dev/.local/share/airlock/sandboxes/proj-12345678";

/// The whole argv, exactly: no host path but the env file (which the engine's client reads here).
#[test]
fn the_spec_renders_to_this_remote_create_argv() {
    let files = SessionFiles {
        dir: format!("{S}/container/42").into(),
    };
    let got = render::create(
        &spec(),
        &remote(),
        "localhost/dev:1",
        "airlock-proj-42",
        &render::Volumes {
            project: "airlock-proj-42-project",
            read_only: &[("/home/dev/proj/.git".into(), "airlock-proj-42-ro-0")],
        },
        &files,
        false,
    );
    let expected = [
        "--remote",
        "--url",
        "tcp://10.0.0.2:8080",
        "create",
        "--pull",
        "never",
        "--name",
        "airlock-proj-42",
        "--read-only",
        "--log-driver",
        "none",
        "--read-only-tmpfs=false",
        "--no-hosts",
        "--unsetenv-all",
        "--network",
        "none",
        "--cap-drop",
        "ALL",
        "--security-opt",
        "no-new-privileges",
        "--user",
        "1000:1000",
        "--hostname",
        "proj",
        "--workdir",
        "/home/dev/proj",
        "--env-file",
        &format!("{S}/container/42/env"),
        "--memory",
        "1073741824",
        "--cpus",
        "1.500",
        "--pids-limit",
        "256",
        "--mount",
        "type=tmpfs,dst=/sys,ro=true,tmpfs-mode=0755",
        "--mount",
        "type=tmpfs,dst=/tmp,tmpfs-mode=1777,tmpfs-size=1048576",
        "--mount",
        "type=tmpfs,dst=/run,tmpfs-mode=1777,tmpfs-size=1048576",
        "--mount",
        "type=tmpfs,dst=/srv,ro=true,tmpfs-mode=0755",
        "--mount",
        "type=tmpfs,dst=/home/dev,tmpfs-mode=1777,tmpfs-size=1048576",
        "--mount",
        "type=volume,src=airlock-proj-42-project,dst=/home/dev/proj",
        "--mount",
        "type=volume,src=airlock-proj-42-ro-0,dst=/home/dev/proj/.git,ro=true",
        "-i",
        "localhost/dev:1",
        "/.airlock/airlock-container-exec",
        "--writable=/home/dev/proj",
        "--writable=/tmp",
        "--",
        "sh",
        "-c",
        "echo hi",
    ];
    assert_eq!(got, expected);
    assert!(
        !got.iter().any(|a| a.contains("src=/")),
        "a host bind: {got:?}"
    );
}

#[test]
fn a_remote_engine_refuses_networks_but_none_forwards_and_mounts_inside_the_project() {
    let e = remote();
    assert!(
        unsupported(&spec(), &e).is_empty(),
        "{:?}",
        unsupported(&spec(), &e)
    );
    for mode in [
        airlock_config::NetworkMode::Proxy,
        airlock_config::NetworkMode::Host,
    ] {
        let mut s = spec();
        s.network = mode;
        let r = unsupported(&s, &e).join("; ");
        assert!(
            r.contains("CONTAINER_HOST=tcp://10.0.0.2:8080") && r.contains("--network none"),
            "{r}"
        );
    }
    let mut s = spec();
    s.mounts.push(MountOp::Bind {
        source: "/srv/data".into(),
        target: "/home/dev/proj/data".into(),
        writable: false,
    });
    let r = unsupported(&s, &e).join("; ");
    assert!(r.contains("/srv/data bound at /home/dev/proj/data"), "{r}");
    // Hidden files are honoured (they are not sent): no refusal for them.
    let mut s = spec();
    s.hide.as_mut().unwrap().patterns = vec![".env".into()];
    assert!(unsupported(&s, &e).is_empty());
}

/// One raw ustar entry, its name written as given (the tar crate refuses to write `..`).
fn raw(name: &[u8], kind: u8, link: &[u8], mode: u32, body: &[u8]) -> Vec<u8> {
    let mut h = tar::Header::new_ustar();
    h.as_old_mut().name[..name.len()].copy_from_slice(name);
    h.as_old_mut().linkname[..link.len()].copy_from_slice(link);
    h.set_entry_type(tar::EntryType::new(kind));
    h.set_mode(mode);
    h.set_size(body.len() as u64);
    h.set_cksum();
    let mut out = h.as_bytes().to_vec();
    out.extend(body);
    out.resize(out.len().div_ceil(512) * 512, 0);
    out
}

#[test]
fn a_hostile_tar_makes_nothing_outside_the_staging_dir_and_nothing_but_files_dirs_links() {
    let dir = tempfile::tempdir().unwrap();
    let staging = dir.path().join("back");
    let outside = dir.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    let mut t = Vec::new();
    t.extend(raw(b"./ok.txt", b'0', b"", 0o644, b"fine"));
    t.extend(raw(b"../escaped", b'0', b"", 0o644, b"x"));
    t.extend(raw(b"/abs", b'0', b"", 0o644, b"x"));
    t.extend(raw(b"a/../../up", b'0', b"", 0o644, b"x"));
    t.extend(raw(
        b"link",
        b'2',
        outside.to_str().unwrap().as_bytes(),
        0o777,
        b"",
    ));
    t.extend(raw(b"link/through", b'0', b"", 0o644, b"x"));
    t.extend(raw(b"hard", b'1', b"ok.txt", 0o644, b""));
    t.extend(raw(b"fifo", b'6', b"", 0o644, b""));
    t.extend(raw(b"null", b'3', b"", 0o666, b""));
    t.extend(raw(b"suid", b'0', b"", 0o6755, b"#!/bin/sh\n"));
    t.extend([0u8; 1024]);
    let dropped = receive::unpack(&t[..], &staging, receive::Caps::DEFAULT).unwrap();
    assert_eq!(
        std::fs::read_to_string(staging.join("ok.txt")).unwrap(),
        "fine"
    );
    assert!(
        std::fs::read_dir(&outside).unwrap().next().is_none(),
        "wrote through the link"
    );
    assert!(!dir.path().join("escaped").exists() && !dir.path().join("up").exists());
    assert!(!Path::new("/abs").exists());
    for name in ["hard", "fifo", "null"] {
        assert!(
            std::fs::symlink_metadata(staging.join(name)).is_err(),
            "{name} was made"
        );
    }
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(staging.join("suid"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o7777, 0o755);
    assert!(
        std::fs::symlink_metadata(staging.join("link"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    let all = dropped.join("\n");
    for name in [
        "../escaped",
        "/abs",
        "a/../../up",
        "link/through",
        "hard",
        "fifo",
        "null",
    ] {
        assert!(all.contains(name), "{name} not named in {all}");
    }
    // Control: the caps refuse the whole stream.
    let small = receive::Caps {
        bytes: 2,
        entries: 100,
    };
    let e = receive::unpack(&t[..], &dir.path().join("back2"), small).unwrap_err();
    assert!(e.contains("over 2 bytes"), "{e}");
}

#[test]
fn a_link_planted_in_the_project_is_sent_as_a_link_and_hidden_files_not_at_all() {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("p");
    std::fs::create_dir_all(project.join("sub")).unwrap();
    std::fs::write(dir.path().join("secret"), "TOP-SECRET").unwrap();
    std::os::unix::fs::symlink(dir.path().join("secret"), project.join("leak")).unwrap();
    std::fs::write(project.join("sub/.env"), "KEY=1").unwrap();
    std::fs::write(project.join("a.txt"), "a").unwrap();
    let ex = send::Exclusions {
        rules: crate::hide::Rules::new(&[".env".into()]).unwrap(),
        paths: Vec::new(),
        substitutes: Default::default(),
    };
    let mut tar = Vec::new();
    let sent = send::write_tree(&project, Path::new(""), &[], &ex, (1000, 1000), &mut tar).unwrap();
    let names: Vec<PathBuf> = sent.keys().cloned().collect();
    assert_eq!(names, [PathBuf::from("a.txt"), "leak".into(), "sub".into()]);
    assert!(
        !tar.windows(10).any(|w| w == b"TOP-SECRET"),
        "the link's target was sent"
    );
    assert!(
        !tar.windows(5).any(|w| w == b"KEY=1"),
        "a hidden file was sent"
    );
}

proptest::proptest! {
    /// Whatever names, kinds, link targets and modes a tar holds, the unpacker makes nothing
    /// outside the staging dir, nothing but files, directories and links in it, no setid bit.
    #[test]
    fn no_tar_makes_anything_outside_staging_or_anything_special(
        entries in proptest::collection::vec(
            (
                proptest::collection::vec(
                    proptest::sample::select(vec!["..", ".", "a", "b", "", "c.txt"]),
                    1..5,
                ),
                proptest::bool::ANY,
                proptest::sample::select(vec![b'0', b'1', b'2', b'3', b'5', b'6', b'7']),
                proptest::sample::select(vec!["..", "../..", "/", "a", "../outside"]),
                proptest::sample::select(vec![0o644u32, 0o4755, 0o2755, 0o1777, 0o777]),
            ),
            1..12,
        )
    ) {
        let dir = tempfile::tempdir().unwrap();
        let outside = dir.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        let staging = dir.path().join("back");
        let mut t = Vec::new();
        for (parts, absolute, kind, link, mode) in &entries {
            let mut name = if *absolute { "/".to_owned() } else { String::new() };
            name.push_str(&parts.join("/"));
            if name.is_empty() || name.len() > 90 {
                continue;
            }
            let body: &[u8] = if *kind == b'0' { b"x" } else { b"" };
            t.extend(raw(name.as_bytes(), *kind, link.as_bytes(), *mode, body));
        }
        t.extend([0u8; 1024]);
        let _ = receive::unpack(&t[..], &staging, receive::Caps::DEFAULT);
        let mut top: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        top.sort();
        proptest::prop_assert!(top == ["back", "outside"] || top == ["outside"], "{top:?}");
        proptest::prop_assert!(std::fs::read_dir(&outside).unwrap().next().is_none());
        let mut stack = vec![staging.clone()];
        while let Some(d) = stack.pop() {
            let Ok(list) = std::fs::read_dir(&d) else { continue };
            for e in list {
                let e = e.unwrap();
                let m = std::fs::symlink_metadata(e.path()).unwrap();
                let t = m.file_type();
                proptest::prop_assert!(t.is_file() || t.is_dir() || t.is_symlink(), "{:?}", e.path());
                if !t.is_symlink() {
                    use std::os::unix::fs::PermissionsExt;
                    proptest::prop_assert_eq!(m.permissions().mode() & 0o7000, 0);
                }
                if t.is_dir() {
                    stack.push(e.path());
                }
            }
        }
    }
}

/// A copy kept after a conflict holds the container's `.git` (with `core.fsmonitor`) and a nested
/// repository: both are renamed, so git run there opens neither; a link named `.git`'s target and
/// plain files are left as they are (control).
#[test]
fn a_kept_copy_has_no_git_metadata_git_would_open() {
    let dir = tempfile::tempdir().unwrap();
    let staging = dir.path().join("back");
    let outside = dir.path().join("outside");
    std::fs::create_dir_all(staging.join(".git")).unwrap();
    std::fs::write(
        staging.join(".git/config"),
        "[core]\n\tfsmonitor = touch /tmp/x\n",
    )
    .unwrap();
    std::fs::create_dir_all(staging.join("sub/deeper")).unwrap();
    std::fs::write(staging.join("sub/deeper/.git"), "gitdir: /elsewhere\n").unwrap();
    std::fs::create_dir_all(staging.join("sub/.git.airlock-quarantine")).unwrap();
    std::fs::create_dir_all(outside.join(".git")).unwrap();
    std::os::unix::fs::symlink(&outside, staging.join("link")).unwrap();
    std::fs::write(staging.join("plain.txt"), "kept\n").unwrap();
    std::fs::create_dir_all(staging.join("sub/.git")).unwrap();

    let mut retired = receive::retire_git(&staging);
    retired.sort();
    assert_eq!(
        retired,
        [
            PathBuf::from(".git.airlock-quarantine"),
            PathBuf::from("sub/.git.airlock-quarantine-2"),
            PathBuf::from("sub/deeper/.git.airlock-quarantine"),
        ]
    );
    assert!(!staging.join(".git").exists() && !staging.join("sub/.git").exists());
    assert!(!staging.join("sub/deeper/.git").exists());
    assert!(staging.join(".git.airlock-quarantine/config").exists());
    // Control: nothing beyond a link is touched, plain files stay.
    assert!(outside.join(".git").is_dir());
    assert_eq!(
        std::fs::read_to_string(staging.join("plain.txt")).unwrap(),
        "kept\n"
    );
}
