//! Every route's success path against the running daemon, checked at the fake host launchers.

use std::fs;
use std::os::unix::fs::PermissionsExt as _;

use base64::Engine as _;

use crate::harness::{World, wait_for};

#[test]
fn healthz_needs_no_token_and_reveals_nothing() {
    let mut w = World::installed();
    w.start();
    let (status, body) = w.send("GET", "/healthz", None, b"");
    assert_eq!((status, body.as_str()), (200, r#"{"status":"ok"}"#));
    assert_eq!(w.send("POST", "/healthz", None, b"").0, 405);
}

#[test]
fn open_reaches_the_host_opener() {
    let mut w = World::installed();
    w.start();
    let (status, _) = w.post(
        "/open",
        r#"{"url":"https://u:SECRET1@example.com/x?access_token=SECRET2#id_token=SECRET3"}"#,
    );
    assert_eq!(status, 204);
    assert_eq!(
        w.calls(),
        [[
            "xdg-open",
            "https://u:SECRET1@example.com/x?access_token=SECRET2#id_token=SECRET3"
        ]]
    );
    // The log keeps scheme, host and path: no userinfo, query or fragment.
    let log = w.audit_log();
    assert!(
        log.contains("/open ok url=\"https://example.com/x\""),
        "{log}"
    );
    assert!(!log.contains("SECRET"), "{log}");
}

#[test]
fn open_reports_a_failing_or_missing_opener_as_502() {
    let mut w = World::installed();
    w.fake("xdg-open", "echo 'no display here' >&2\nexit 4");
    w.start();
    let (status, body) = w.post("/open", r#"{"url":"https://example.com/"}"#);
    assert_eq!(status, 502, "{body}");
    assert!(
        body.contains("status 4") && body.contains("no display here"),
        "{body}"
    );
    assert!(
        w.audit_log().contains("no display here"),
        "launcher stderr is logged"
    );
    fs::remove_file(w.fakes.join("xdg-open")).unwrap();
    let (status, body) = w.post("/open", r#"{"url":"https://example.com/"}"#);
    assert_eq!(status, 502);
    assert!(
        body.contains("xdg-open is not installed on the host"),
        "{body}"
    );
}

#[test]
fn edit_reaches_the_named_editor_with_the_clean_path() {
    let mut w = World::installed();
    let file = w.project.join("main.rs");
    fs::write(&file, "fn main() {}\n").unwrap();
    w.start();
    let dirty = format!("{}/./sub/../main.rs", w.project.display());
    let body = serde_json::json!({"editor": "code", "path": dirty}).to_string();
    assert_eq!(w.post("/edit", &body).0, 204);
    let body = serde_json::json!({"editor": "codium", "path": w.project}).to_string();
    assert_eq!(w.post("/edit", &body).0, 204);
    assert_eq!(
        w.calls(),
        [
            vec!["code".to_owned(), file.display().to_string()],
            vec!["codium".to_owned(), w.project.display().to_string()],
        ]
    );
}

#[test]
fn credential_runs_git_credential_and_returns_its_answer() {
    let mut w = World::installed();
    w.start();
    let input = "protocol=https\nhost=forge.example\n\n";
    let body = serde_json::json!({"op": "get", "input": input}).to_string();
    let (status, answer) = w.post("/credential", &body);
    assert_eq!(status, 200, "{answer}");
    let answer: serde_json::Value = serde_json::from_str(&answer).unwrap();
    assert_eq!(answer["exit"], 0);
    assert!(
        answer["output"]
            .as_str()
            .unwrap()
            .contains("password=s3cret-from-host")
    );
    assert_eq!(
        fs::read_to_string(w.base().join("git.stdin")).unwrap(),
        input
    );
    for (op, verb) in [("store", "approve"), ("erase", "reject")] {
        let body = serde_json::json!({"op": op, "input": "protocol=https\nhost=x\nusername=u\npassword=p\n"});
        assert_eq!(w.post("/credential", &body.to_string()).0, 200);
        assert_eq!(w.calls().last().unwrap(), &["git", "credential", verb]);
    }
    assert_eq!(w.calls()[0], ["git", "credential", "fill"]);
}

#[test]
fn command_runs_proximo_and_a_configured_command() {
    let mut w = World::installed();
    w.write_config("[bridge.commands.mytool]\nverbs = [\"logs\"]\nrefused_flags = [\"-f\"]\n");
    w.start();
    let (status, body) = w.post(
        "/command",
        r#"{"command":"proximo","args":["status","--json","a b"]}"#,
    );
    assert_eq!(status, 200, "{body}");
    let answer: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(answer["exit"], 0);
    assert_eq!(
        answer["output"],
        "proximo says: status --json a b\nto stderr\n"
    );
    assert_eq!(
        w.calls().last().unwrap(),
        &["proximo", "status", "--json", "a b"]
    );
    // A non-zero exit is data, not a failure.
    let (status, body) = w.post(
        "/command",
        r#"{"command":"proximo","args":["errors","--since","5m"]}"#,
    );
    assert_eq!(status, 200);
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&body).unwrap()["exit"],
        3
    );
    let (status, body) = w.post("/command", r#"{"command":"mytool","args":["logs","web"]}"#);
    assert_eq!(status, 200, "{body}");
    assert_eq!(w.calls().last().unwrap(), &["mytool", "logs", "web"]);
    let (status, body) = w.post("/command", r#"{"command":"mytool","args":["logs","-f"]}"#);
    assert_eq!(status, 400, "{body}");
}

#[test]
fn proximo_is_command_in_toolboxs_spelling() {
    let mut w = World::installed();
    w.start();
    // toolbox's shims post /proximo {"command": verb}, args optional.
    let (status, body) = w.post("/proximo", r#"{"command":"status"}"#);
    assert_eq!(status, 200, "{body}");
    assert_eq!(w.calls().last().unwrap(), &["proximo", "status"]);
    let (status, body) = w.post("/proximo", r#"{"command":"up","args":["web"]}"#);
    assert_eq!(status, 200, "{body}");
    assert_eq!(w.calls().last().unwrap(), &["proximo", "up", "web"]);
}

#[test]
fn sound_plays_the_bytes_from_a_temp_file_the_daemon_names() {
    let mut w = World::installed();
    w.start();
    let bytes: Vec<u8> = (0..=255u8).cycle().take(4000).collect();
    let data = base64::engine::general_purpose::STANDARD.encode(&bytes);
    let body = serde_json::json!({"name": "done.mp3", "data": data}).to_string();
    let (status, _) = w.post("/sound", &body);
    assert_eq!(status, 200);
    let played = w.base().join("played.mp3");
    wait_for("the fake player to copy the file", || {
        fs::read(&played).is_ok_and(|b| b == bytes)
    });
    let call = w.calls().pop().unwrap();
    assert_eq!(call[0], "paplay");
    let temp = std::path::PathBuf::from(&call[1]);
    assert!(
        temp.file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("airlock-sound-")
    );
    // In the daemon's own state (never mounted, emptied at its start), not the shared /tmp.
    assert_eq!(
        temp.parent().map(fs::canonicalize).and_then(Result::ok),
        fs::canonicalize(w.state.join("sounds")).ok(),
        "{}",
        temp.display()
    );
    wait_for("the reaper to remove the temp file", || !temp.exists());
    let log = w.audit_log();
    assert!(
        log.contains("/sound ok name=\"done.mp3\" bytes=\"4000\""),
        "{log}"
    );
    assert!(
        !log.contains(&data[..64]),
        "sound bytes never reach the log"
    );
}

#[test]
fn sound_without_any_player_is_502() {
    let mut w = World::installed();
    fs::remove_file(w.fakes.join("paplay")).unwrap();
    let mut cmd = w.daemon_command(0);
    // Only the fakes: no host player of the chain can be found.
    cmd.env("PATH", &w.fakes);
    w.start_with(cmd);
    let body = serde_json::json!({"name": "x", "data": "SUQz"}).to_string();
    let (status, body) = w.post("/sound", &body);
    assert_eq!(status, 502);
    assert!(
        body.contains("no mp3-capable audio player available"),
        "{body}"
    );
}

#[test]
fn the_audit_log_never_holds_a_secret() {
    let mut w = World::installed();
    w.start();
    let body = serde_json::json!({"op": "store", "input": "protocol=https\nhost=x\npassword=hunter2-input\n"});
    assert_eq!(w.post("/credential", &body.to_string()).0, 200);
    let body = serde_json::json!({"op": "get", "input": "protocol=https\nhost=x\n"});
    assert_eq!(w.post("/credential", &body.to_string()).0, 200);
    // Refused requests carrying secrets are not echoed either.
    let bad = r#"{"op":"get","input":"password=hunter2-bad","extra":"password=hunter2-bad"}"#;
    assert_eq!(w.post("/credential", bad).0, 400);
    let data = base64::engine::general_purpose::STANDARD.encode(b"ID3 secret-sound-bytes-here");
    let body = serde_json::json!({"name": "n", "data": data}).to_string();
    assert_eq!(w.post("/sound", &body).0, 200);
    // The player runs detached; let it finish before the temp HOME goes.
    let played = w.base().join("played.mp3");
    wait_for("the fake player", || played.exists());
    let log = w.audit_log();
    for secret in ["hunter2", "s3cret-from-host", &data, &w.token()] {
        assert!(
            !log.contains(secret),
            "{secret:?} leaked into the log:\n{log}"
        );
    }
    assert!(
        log.contains("/credential ok op=\"store\" exit=\"0\""),
        "{log}"
    );
    assert!(
        log.contains("/credential rejected (malformed request"),
        "{log}"
    );
}

/// H1 and M1 of the gates review: a daemon started by hand inside a project a sandbox can write
/// (`git init` there, `credential.helper = !…`), with askpass helpers in its environment (KDE, VS
/// Code terminals). The host's real git answers `/credential` from `/` with a rebuilt
/// environment, so neither the planted helper nor an askpass dialog runs.
#[test]
fn credential_runs_git_in_root_without_the_daemons_askpass() {
    let mut w = World::installed();
    let git = ["/usr/bin/git", "/usr/local/bin/git"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists());
    let Some(git) = git else {
        eprintln!("skipped: no git on the host");
        return;
    };
    let ran = w.base().join("ran");
    let script = w.base().join("evil.sh");
    fs::write(
        &script,
        format!("#!/bin/sh\necho \"$0 $*\" >> {}\n", ran.display()),
    )
    .unwrap();
    fs::set_permissions(&script, fs::Permissions::from_mode(0o755)).unwrap();
    let run_git = |args: &[&str]| {
        let out = std::process::Command::new(git)
            .args(args)
            .current_dir(&w.project)
            .env("HOME", &w.home)
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}: {out:?}");
    };
    run_git(&["init", "-q"]);
    let helper = format!("!{}", script.display());
    run_git(&["config", "credential.helper", &helper]);
    let input = "protocol=https\nhost=forge.example\n\n";
    // Control: what the daemon used to do (git in its cwd with its environment) runs both.
    let control = std::process::Command::new(git)
        .args(["credential", "fill"])
        .current_dir(&w.project)
        .env_clear()
        .env("HOME", &w.home)
        .env("PATH", "/usr/bin:/bin")
        .env("GIT_ASKPASS", &script)
        .env("GIT_TERMINAL_PROMPT", "0")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write as _;
            child.stdin.take().unwrap().write_all(input.as_bytes())?;
            child.wait()
        });
    assert!(control.is_ok());
    let seen = fs::read_to_string(&ran).unwrap_or_default();
    assert!(
        seen.contains("get") && seen.contains("Username"),
        "control: {seen:?}"
    );
    fs::remove_file(&ran).unwrap();

    let mut cmd = w.daemon_command(0);
    cmd.current_dir(&w.project)
        .env("PATH", "/usr/bin:/bin")
        .env("GIT_ASKPASS", &script)
        .env("SSH_ASKPASS", &script);
    w.start_with(cmd);
    let body = serde_json::json!({"op": "get", "input": input}).to_string();
    let (status, answer) = w.post("/credential", &body);
    assert_eq!(status, 200, "{answer}");
    let answer: serde_json::Value = serde_json::from_str(&answer).unwrap();
    assert_ne!(answer["exit"], 0, "no helper and no prompt: git fails");
    assert!(
        !ran.exists(),
        "a host program ran: {:?}",
        fs::read_to_string(&ran)
    );
    // Other protocols never reach git.
    let ext = serde_json::json!({"op": "get", "input": "protocol=ext\nhost=sh -c x\n"});
    let (status, answer) = w.post("/credential", &ext.to_string());
    assert_eq!(status, 400, "{answer}");
    assert!(
        answer.contains("only https credentials are served"),
        "{answer}"
    );
}

/// Without `[bridge] shared_token = true` the install-time token opens nothing: only the tokens
/// `airlock run` registers per sandbox do.
#[test]
fn the_install_token_alone_is_refused_by_default() {
    let mut w = World::installed();
    fs::write(w.config_file(), "").unwrap();
    w.start();
    let (status, body) = w.post("/open", r#"{"url":"https://example.com/"}"#);
    assert_eq!(status, 401, "{body}");
    assert!(w.calls().is_empty());
    // A token that looks right but has no session record is refused the same way.
    let (status, _) = w.send(
        "POST",
        "/open",
        Some(&format!("Bearer {}", "0".repeat(64))),
        br#"{"url":"https://example.com/"}"#,
    );
    assert_eq!(status, 401);
}
