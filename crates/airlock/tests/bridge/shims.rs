//! The shims (the airlock binary under other names), against the running daemon, a daemon that is
//! down, a bridge that is not installed, and a fake old daemon.

use std::fs;
use std::io::{Read as _, Write as _};
use std::os::unix::net::UnixListener;

use crate::harness::World;

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// An installed bridge whose daemon is down: a token, and a port file naming a closed port.
fn down() -> World {
    let w = World::installed();
    let closed = std::net::TcpListener::bind(("127.0.0.1", 0)).unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    fs::write(w.state.join("port"), format!("{port}\n")).unwrap();
    w
}

#[test]
fn xdg_open_and_its_synonyms_reach_the_opener() {
    for name in [
        "xdg-open",
        "sensible-browser",
        "x-www-browser",
        "www-browser",
        "gnome-open",
        "open",
    ] {
        // A daemon each: six opens in a row would exceed the shared bucket's burst of 5.
        let mut w = World::installed();
        w.start();
        let url = format!("https://example.com/{name}");
        let out = w.shim(name, &[&url], b"", &[]);
        assert!(out.status.success(), "{name}: {}", stderr(&out));
        assert_eq!(stderr(&out), "", "{name}");
        assert_eq!(w.calls(), [["xdg-open", url.as_str()]]);
    }
}

#[test]
fn xdg_open_always_exits_0_with_one_line_saying_what_to_do() {
    // Not installed: no state dir at all.
    let w = World::new();
    let out = w.shim("xdg-open", &["https://example.com/"], b"", &[]);
    assert!(out.status.success());
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("airlock bridge install") && err.contains("on the host"),
        "{err}"
    );
    // Installed but the daemon is down.
    let w = down();
    let out = w.shim("xdg-open", &["https://example.com/"], b"", &[]);
    assert!(out.status.success());
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("not reachable") && err.contains("airlock bridge status"),
        "{err}"
    );
    // Refused by the daemon.
    let mut w = World::installed();
    w.start();
    let out = w.shim("xdg-open", &["javascript:alert(1)"], b"", &[]);
    assert!(out.status.success());
    assert!(
        stderr(&out).contains("only http and https"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn code_sends_host_paths_and_refuses_what_has_none() {
    let mut w = World::installed();
    w.start();
    let host_home = w.base().join("sandbox-home");
    fs::create_dir_all(&host_home).unwrap();
    fs::write(host_home.join(".bashrc"), "").unwrap();
    fs::write(w.project.join("main.rs"), "").unwrap();
    let env = [
        ("AIRLOCK_PROJECT_DIR", w.project.to_str().unwrap()),
        ("AIRLOCK_HOST_HOME_DIR", host_home.to_str().unwrap()),
    ];
    let home_file = w.home.join(".bashrc");
    let out = w.shim(
        "code",
        &["main.rs", ".", home_file.to_str().unwrap()],
        b"",
        &env,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        w.calls(),
        [
            vec![
                "code".to_owned(),
                w.project.join("main.rs").display().to_string()
            ],
            vec!["code".to_owned(), w.project.display().to_string()],
            vec![
                "code".to_owned(),
                host_home.join(".bashrc").display().to_string()
            ],
        ]
    );
    let out = w.shim("codium", &["-g", "main.rs:3"], b"", &env);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("-g is not supported"),
        "{}",
        stderr(&out)
    );
    let out = w.shim("codium", &["/tmp/x"], b"", &env);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("tmpfs"), "{}", stderr(&out));
    let out = w.shim("code", &["/usr/share"], b"", &env);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("no host path"), "{}", stderr(&out));
    let out = w.shim("code", &["missing.rs"], b"", &env);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("does not exist on the host"),
        "{}",
        stderr(&out)
    );
    assert_eq!(w.calls().len(), 3, "no refused path reached the editor");
    let down = down();
    let out = down.shim("code", &["."], b"", &env);
    assert_eq!(
        out.status.code(),
        Some(1),
        "an editor shim fails loudly when the bridge is down"
    );
}

#[test]
fn code_says_update_the_host_on_404_and_nothing_is_retried_on_tcp() {
    let w = World::installed();
    // A fake old daemon on the socket that knows no /edit; a TCP listener that must stay untouched.
    let listener = UnixListener::bind(w.socket()).unwrap();
    let tcp = std::net::TcpListener::bind(("127.0.0.1", 0)).unwrap();
    tcp.set_nonblocking(true).unwrap();
    fs::write(
        w.state.join("port"),
        format!("{}\n", tcp.local_addr().unwrap().port()),
    )
    .unwrap();
    let server = std::thread::spawn(move || {
        let (mut conn, _) = listener.accept().unwrap();
        let mut buf = [0u8; 4096];
        let _ = conn.read(&mut buf);
        conn.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            .unwrap();
    });
    let env = [
        ("AIRLOCK_PROJECT_DIR", w.project.to_str().unwrap()),
        ("AIRLOCK_HOST_HOME_DIR", "/x"),
    ];
    let out = w.shim("code", &["."], b"", &env);
    server.join().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("update the host airlock"),
        "{}",
        stderr(&out)
    );
    assert!(
        tcp.accept().is_err(),
        "a request that got a status is never retried on TCP"
    );
}

#[test]
fn git_credential_forwards_and_always_exits_0() {
    let mut w = World::installed();
    w.start();
    let request = b"protocol=https\nhost=forge.example\n\n";
    for name in [
        "git-credential-airlock",
        "git-credential-osxkeychain",
        "git-credential-manager",
        "git-credential-manager-core",
        "git-credential-libsecret",
    ] {
        let out = w.shim(name, &["get"], request, &[]);
        assert!(out.status.success(), "{name}");
        assert!(
            stdout(&out).contains("password=s3cret-from-host"),
            "{name}: {}",
            stdout(&out)
        );
    }
    let out = w.shim(
        "git-credential-airlock",
        &["store"],
        b"protocol=https\nhost=x\nusername=u\npassword=p\n",
        &[],
    );
    assert!(out.status.success());
    assert_eq!(w.calls().last().unwrap(), &["git", "credential", "approve"]);
    let before = w.calls().len();
    let out = w.shim(
        "git-credential-airlock",
        &["get"],
        request,
        &[("GIT_CREDENTIAL_BRIDGE", "0")],
    );
    assert!(out.status.success() && out.stdout.is_empty());
    let out = w.shim("git-credential-airlock", &["list"], request, &[]);
    assert!(out.status.success() && out.stdout.is_empty());
    assert_eq!(
        w.calls().len(),
        before,
        "opt-out and unknown ops never reach the host"
    );
    let down = down();
    let out = down.shim("git-credential-airlock", &["get"], request, &[]);
    assert!(
        out.status.success() && out.stdout.is_empty(),
        "degrades to git's own prompt"
    );
}

#[test]
fn paplay_sends_the_file_bytes_and_fails_silently() {
    let mut w = World::installed();
    w.start();
    let sound = w.project.join("chime.mp3");
    let bytes: Vec<u8> = (0..3000u32).map(|i| (i % 251) as u8).collect();
    fs::write(&sound, &bytes).unwrap();
    let out = w.shim("paplay", &[sound.to_str().unwrap()], b"", &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let played = w.base().join("played.mp3");
    crate::harness::wait_for("the fake player", || {
        fs::read(&played).is_ok_and(|b| b == bytes)
    });
    let down = down();
    let out = down.shim("paplay", &[sound.to_str().unwrap()], b"", &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty() && out.stderr.is_empty(), "silent");
    let out = w.shim("paplay", &["/nonexistent.mp3"], b"", &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stderr.is_empty());
}

#[test]
fn the_sandbox_builder_and_the_bridge_agree_on_names_and_paths() {
    use airlock_sandbox::builder::bridge as sandbox_side;
    let bridge_names: Vec<&str> = airlock_bridge::shims::SHIM_NAMES
        .iter()
        .map(|(n, _)| *n)
        .collect();
    assert_eq!(sandbox_side::SHIM_NAMES, bridge_names.as_slice());
    let table = airlock_bridge::commands::CommandTable::from_config(&Default::default()).unwrap();
    assert_eq!(
        sandbox_side::BUILTIN_COMMANDS,
        table.names().collect::<Vec<_>>().as_slice()
    );
    assert_eq!(
        sandbox_side::SHIM_DIR,
        airlock_bridge::paths::SANDBOX_SHIM_DIR
    );
    assert_eq!(
        sandbox_side::STATE_DIR,
        airlock_bridge::paths::SANDBOX_STATE_DIR
    );
    assert!(sandbox_side::gitconfig().contains(&format!(
        "helper = {}/git-credential-airlock",
        airlock_bridge::paths::SANDBOX_SHIM_DIR
    )));
}

#[test]
fn the_shim_dir_is_made_exact() {
    use airlock_sandbox::PrepareStep;
    let dir = tempfile::tempdir().unwrap();
    let shims = dir.path().join("bridge/bin");
    fs::create_dir_all(&shims).unwrap();
    std::os::unix::fs::symlink("/elsewhere", shims.join("code")).unwrap();
    fs::write(shims.join("stale"), "").unwrap();
    std::os::unix::fs::symlink("/run/airlock/airlock", shims.join("removed-command")).unwrap();
    let step = PrepareStep::Symlinks {
        dir: shims.clone(),
        link_to: "/run/airlock/airlock".into(),
        names: vec!["xdg-open".into(), "code".into()],
    };
    for _ in 0..2 {
        airlock_sandbox::state::prepare(std::slice::from_ref(&step)).unwrap();
        let mut names: Vec<String> = fs::read_dir(&shims)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, ["code", "xdg-open"]);
        for name in &names {
            assert_eq!(
                fs::read_link(shims.join(name)).unwrap(),
                std::path::Path::new("/run/airlock/airlock")
            );
        }
    }
}
