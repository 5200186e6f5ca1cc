//! The CLI as a user meets it: the real binary in a temp HOME, its output, exit codes and state.

mod common;

use std::fs;
use std::ops::Deref;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use common::{AIRLOCK, TestHome, report, stderr, stdout};

/// A temp HOME with a project directory in it (`~/code/app`).
struct World(TestHome);

impl Deref for World {
    type Target = TestHome;
    fn deref(&self) -> &TestHome {
        &self.0
    }
}

impl World {
    fn new() -> World {
        World(TestHome::new("home/code/app"))
    }

    fn airlock(&self, args: &[&str]) -> Command {
        let mut cmd = self.0.airlock(args);
        cmd.env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("SHELL", "/bin/sh");
        cmd
    }

    fn run(&self, args: &[&str]) -> Output {
        self.airlock(args).output().expect("spawn airlock")
    }

    /// `sh -c script` in a sandbox without network, with a system PATH.
    fn sh(&self, script: &str) -> Output {
        self.airlock(&["run", "--network", "none", "--", "sh", "-c", script])
            .env("PATH", "/usr/bin:/bin")
            .output()
            .expect("spawn airlock")
    }

    fn sandbox_count(&self) -> usize {
        fs::read_dir(self.sandboxes())
            .map(|d| d.count())
            .unwrap_or(0)
    }
}

fn sandbox_available() -> bool {
    common::sandbox_starts()
}

#[test]
fn unknown_config_key_names_file_key_and_valid_keys() {
    let w = World::new();
    let file = w.config("[sandbox]\nnetwrk = \"none\"\n");
    let out = w.run(&["run", "--", "true"]);
    assert_eq!(out.status.code(), Some(125), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains(&file.display().to_string()), "{err}");
    assert!(err.contains("netwrk"), "{err}");
    assert!(err.contains("network"), "valid keys listed: {err}");
    assert_eq!(w.sandbox_count(), 0, "nothing created on a config error");
}

#[test]
fn config_that_is_not_toml_is_an_error() {
    let w = World::new();
    let file = w.config("this is = = not toml\n");
    let out = w.run(&["run", "--", "true"]);
    assert_eq!(out.status.code(), Some(125));
    assert!(
        stderr(&out).contains(&file.display().to_string()),
        "{}",
        stderr(&out)
    );
}

#[test]
fn missing_mount_path_is_an_error_naming_it() {
    let w = World::new();
    w.config("[[sandbox.mounts]]\npath = \"~/nowhere\"\nmode = \"readonly\"\n");
    let out = w.run(&["run", "--", "true"]);
    assert_eq!(out.status.code(), Some(125));
    let err = stderr(&out);
    assert!(
        err.contains(&format!("{}/nowhere does not exist", w.home.display())),
        "{err}"
    );
    assert_eq!(w.sandbox_count(), 0);
}

#[test]
fn home_and_root_are_refused_as_projects() {
    let w = World::new();
    let out = w.run(&[
        "run",
        "--project",
        w.home.to_str().expect("utf8"),
        "--",
        "true",
    ]);
    assert_eq!(out.status.code(), Some(125));
    assert!(
        stderr(&out).contains("refusing to use your home directory"),
        "{}",
        stderr(&out)
    );
    let out = w.run(&["run", "--project", "/", "--", "true"]);
    assert_eq!(out.status.code(), Some(125));
    assert!(
        stderr(&out).contains("refusing to use / as the project"),
        "{}",
        stderr(&out)
    );
    assert_eq!(w.sandbox_count(), 0);
}

#[test]
fn print_spec_is_json_and_launches_nothing() {
    let w = World::new();
    fs::write(w.project.join(".env"), "TOKEN=x").expect("env file");
    let out = w.run(&[
        "run",
        "--print-spec",
        "--network",
        "none",
        "--",
        "echo",
        "hi",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let spec: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("json");
    assert_eq!(spec["argv"], serde_json::json!(["echo", "hi"]));
    assert_eq!(spec["network"], "none");
    assert_eq!(spec["project"], w.project.display().to_string());
    assert_eq!(spec["hide"]["root"], w.project.display().to_string());
    let rules = spec["hide"]["patterns"].as_array().expect("hide patterns");
    assert!(
        rules.iter().any(|p| p == ".env"),
        "the .env files are hidden"
    );
    assert_eq!(w.sandbox_count(), 0);
}

#[test]
fn project_file_is_ignored_until_trusted_and_again_after_a_change() {
    let w = World::new();
    let file = w.project.join(".airlock.toml");
    fs::write(&file, "[sandbox]\nnested_namespaces = true\n").expect("project file");
    let spec = |w: &World| {
        let out = w.run(&["run", "--print-spec"]);
        assert!(out.status.success(), "{}", stderr(&out));
        let v: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("json");
        (v["seccomp"]["nested_namespaces"] == true, stderr(&out))
    };
    let (nested, warn) = spec(&w);
    assert!(!nested, "untrusted file not loaded");
    assert!(warn.contains("is not trusted and was ignored"), "{warn}");

    let out = w.run(&["trust", "add"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("trusted"), "{}", stdout(&out));
    let (nested, warn) = spec(&w);
    assert!(nested, "trusted file loaded");
    assert!(warn.is_empty(), "{warn}");

    fs::write(&file, "[sandbox]\nnested_namespaces = true # changed\n").expect("changed file");
    let (nested, warn) = spec(&w);
    assert!(!nested, "a changed file is ignored");
    assert!(warn.contains("changed since it was trusted"), "{warn}");

    let out = w.run(&["trust", "list", "--json"]);
    let list: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("json");
    assert_eq!(list[0]["status"], "changed", "{list}");
    let out = w.run(&["trust", "remove"]);
    assert!(out.status.success());
    let out = w.run(&["trust", "list", "--json"]);
    assert_eq!(stdout(&out).trim(), "[]");
}

#[test]
fn trust_add_refuses_an_invalid_file() {
    let w = World::new();
    fs::write(w.project.join(".airlock.toml"), "[sandbox]\nbogus = 1\n").expect("file");
    let out = w.run(&["trust", "add"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("bogus"), "{}", stderr(&out));
}

#[test]
fn config_init_path_and_show() {
    let w = World::new();
    let out = w.run(&["config", "init"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let file = w.home.join(".config/airlock/config.toml");
    assert!(file.exists());
    let again = w.run(&["config", "init"]);
    assert_eq!(again.status.code(), Some(125));
    assert!(stderr(&again).contains("--force"), "{}", stderr(&again));
    let out = w.run(&["config", "path"]);
    assert!(
        stdout(&out).contains(&file.display().to_string()),
        "{}",
        stdout(&out)
    );
    let out = w.run(&["config", "show"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("hide_env_files = true"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn shorthand_runs_the_command_and_subcommands_win() {
    if !sandbox_available() {
        return;
    }
    let w = World::new();
    let out = w.run(&["sh", "-c", "echo inside-$AIRLOCK; exit 3"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "inside-1");
    let out = w.run(&["doctor", "--json"]);
    assert!(
        stdout(&out).contains("\"landlock\""),
        "doctor is a subcommand, not a command to run"
    );
}

#[test]
fn rm_removes_the_state_unless_another_session_holds_it() {
    if !sandbox_available() {
        return;
    }
    let w = World::new();
    let marker = w.project.join("first-running");
    // A first session that stays up until we let it go.
    let mut first = w
        .airlock(&[
            "run",
            "--network",
            "none",
            "--",
            "sh",
            "-c",
            "touch first-running; while [ ! -e release ]; do sleep 0.05; done",
        ])
        .spawn()
        .expect("first session");
    wait_for(|| marker.exists(), "the first session to start");

    // A second, concurrent session in the same project works, and its --rm keeps the shared state.
    let out = w.run(&[
        "run",
        "--rm",
        "--network",
        "none",
        "--",
        "sh",
        "-c",
        "echo second > second.txt",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("another session is using it"),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        fs::read_to_string(w.project.join("second.txt")).expect("written"),
        "second\n"
    );
    assert_eq!(w.sandbox_count(), 1);

    let list = w.run(&["sandboxes", "list", "--json"]);
    let list: serde_json::Value = serde_json::from_str(&stdout(&list)).expect("json");
    assert_eq!(list[0]["live_sessions"], 1, "{list}");
    assert_eq!(list[0]["project"], w.project.display().to_string());

    // Prune never removes a sandbox in use.
    let out = w.run(&["sandboxes", "prune", "--older-than", "0s"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(w.sandbox_count(), 1, "{}", stdout(&out));

    fs::write(w.project.join("release"), "").expect("release");
    assert!(first.wait().expect("wait").success());

    // Now nothing holds it: --rm removes the state root.
    let out = w.run(&["run", "--rm", "--network", "none", "--", "true"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(w.sandbox_count(), 0, "state removed");
}

#[test]
fn synthetic_home_persists_across_runs() {
    if !sandbox_available() {
        return;
    }
    let w = World::new();
    let out = w.run(&[
        "run",
        "--network",
        "none",
        "--",
        "sh",
        "-c",
        "echo kept > ~/note",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = w.run(&["run", "--network", "none", "--", "cat", "note"]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "cwd is the project, not the home"
    );
    let out = w.run(&["run", "--network", "none", "--", "sh", "-c", "cat ~/note"]);
    assert_eq!(stdout(&out), "kept\n", "{}", stderr(&out));
    assert!(!w.home.join("note").exists(), "the real home is untouched");
}

/// The workload gets every CPU airlock may use, on a project's first launch and on the next (the
/// root built ahead): the init airlock clones early is kept on one CPU while it prepares, and
/// must give the whole set back before it starts the workload, which inherits it.
#[test]
fn the_workload_may_run_on_every_cpu_airlock_may() {
    if !sandbox_available() {
        return;
    }
    let allowed = |status: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            .map(|v| v.trim().to_owned())
    };
    let ours = allowed(&fs::read_to_string("/proc/self/status").expect("status"));
    let w = World::new();
    for launch in ["first", "next"] {
        let out = w.sh("cat /proc/self/status");
        assert!(out.status.success(), "{launch}: {}", report(&out));
        assert_eq!(allowed(&stdout(&out)), ours, "{launch} launch");
    }
}

fn wait_for(cond: impl Fn() -> bool, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn without_user_namespaces_one_line_says_what_to_enable() {
    // A user namespace whose own limit on nested user namespaces is 0 stands in for a kernel
    // without them (the limit is per namespace, so the host is untouched).
    let w = World::new();
    let script = format!(
        "echo 0 > /proc/sys/user/max_user_namespaces && exec {AIRLOCK} run --network none -- true"
    );
    let out = Command::new("unshare")
        .args(["--user", "--map-root-user", "sh", "-c", &script])
        .current_dir(&w.project)
        .env_clear()
        .env("HOME", &w.home)
        .env("PATH", "/usr/bin:/bin")
        .output();
    let Ok(out) = out else {
        eprintln!("skipped: unshare(1) is not installed");
        return;
    };
    let err = stderr(&out);
    if err.contains("unshare failed")
        || err.contains("Permission denied") && !err.contains("airlock")
    {
        eprintln!("skipped: cannot create the stand-in user namespace here: {err}");
        return;
    }
    assert_eq!(out.status.code(), Some(125), "{err}");
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(err.contains("user namespaces are not available"), "{err}");
    assert!(
        err.contains("user.max_user_namespaces"),
        "says what to enable: {err}"
    );
    assert_eq!(w.sandbox_count(), 0, "nothing half-created");
}

#[test]
fn print_spec_writes_nothing_on_the_host() {
    let w = World::new();
    fs::create_dir_all(w.home.join(".codex")).expect("codex home");
    let git = Command::new("git")
        .args(["init", "-q"])
        .current_dir(&w.project)
        .status();
    if !git.is_ok_and(|s| s.success()) {
        eprintln!("skipped: git is not installed");
        return;
    }
    fs::remove_dir_all(w.project.join(".git/hooks")).ok();
    w.config("[tools.git]\nmode = \"readwrite\"\n");
    let out = w.run(&["run", "--print-spec"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        !w.project.join(".git/hooks").exists(),
        "no hooks dir created"
    );
    assert!(
        !w.home.join(".codex/sessions").exists(),
        "no sessions dir created"
    );
    assert_eq!(w.sandbox_count(), 0);
}

#[test]
fn startup_files_that_use_what_the_sandbox_lacks_are_named_once() {
    if !sandbox_available() || !std::path::Path::new("/bin/bash").exists() {
        return;
    }
    let w = World::new();
    common::write(&w.home.join(".sdkman/bin/sdkman-init.sh"), "echo sdkman\n");
    common::write(&w.home.join(".nvm/nvm.sh"), "echo nvm\n");
    common::write(
        &w.home.join(".bashrc"),
        "source ~/.sdkman/bin/sdkman-init.sh\n\
         export NVM_DIR=\"$HOME/.nvm\"\n[ -s \"$NVM_DIR/nvm.sh\" ] && . \"$NVM_DIR/nvm.sh\"\n",
    );
    let shell = |w: &World| {
        w.airlock(&["run", "--network", "none"])
            .env("SHELL", "/bin/bash")
            .env("PATH", "/usr/bin:/bin")
            .output()
            .expect("airlock")
    };
    let out = shell(&w);
    let err = stderr(&out);
    assert!(
        err.contains(
            "airlock: ~/.bashrc uses what this sandbox does not have: ~/.sdkman/bin/sdkman-init.sh;"
        ),
        "{}",
        report(&out)
    );
    assert!(err.contains("[[sandbox.mounts]]"), "{err}");
    assert!(!err.contains(".nvm"), "a guarded line is not named: {err}");
    // Said once: the same again is quiet, a change is said.
    let out = shell(&w);
    assert!(!stderr(&out).contains("does not have"), "{}", report(&out));
    common::write(&w.home.join(".bashrc"), "source ~/.nvm/nvm.sh\n");
    let out = shell(&w);
    assert!(
        stderr(&out).contains(": ~/.nvm/nvm.sh;"),
        "{}",
        report(&out)
    );
}

#[test]
fn a_refused_namespace_call_names_the_key_once() {
    if !sandbox_available() {
        return;
    }
    let has_unshare = ["/usr/bin/unshare", "/bin/unshare"]
        .iter()
        .any(|p| std::path::Path::new(p).exists());
    if !has_unshare {
        eprintln!("skipped: unshare (util-linux) is not installed");
        return;
    }
    let w = World::new();
    let out = w.sh("unshare -Ur true; echo first=$?; unshare -Ur true; echo second=$?");
    assert!(
        stdout(&out).contains("first=1\nsecond=1\n"),
        "{}",
        report(&out)
    );
    let err = stderr(&out);
    assert_eq!(
        err.matches("Operation not permitted").count(),
        2,
        "EPERM, as before: {err}"
    );
    assert_eq!(
        err.matches("set [sandbox] nested_namespaces = true")
            .count(),
        1,
        "one line from airlock: {err}"
    );
    // With the key set, nothing is refused, so nothing is said (as root the uid map still fails).
    w.config("[sandbox]\nnested_namespaces = true\n");
    let out = w.sh("unshare -Ur true; true");
    assert!(
        !stderr(&out).contains("nested_namespaces"),
        "{}",
        report(&out)
    );
}

#[test]
fn the_shorthand_takes_runs_options_and_an_unknown_option_is_an_error() {
    let w = World::new();
    // Run's options before the command: a spec for `echo hi`, nothing launched.
    let out = w.run(&["--print-spec", "--network", "none", "echo", "hi"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let spec: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("json");
    assert_eq!(spec["argv"], serde_json::json!(["echo", "hi"]));
    assert_eq!(spec["network"], "none");
    let out = w.run(&["-v", "--network=none", "--print-spec", "ls", "-la"]);
    let spec: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("json");
    assert_eq!(spec["argv"], serde_json::json!(["ls", "-la"]));
    // A mistyped option is refused with a hint, never run as a command.
    let out = w.run(&["run", "--netwrk", "none", "ls"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("'--netwrk'"), "{}", stderr(&out));
    assert!(stderr(&out).contains("--network"), "{}", stderr(&out));
    assert_eq!(w.sandbox_count(), 0);
}

#[test]
fn airlock_inside_airlock_runs_the_command_in_the_same_sandbox() {
    if !sandbox_available() {
        return;
    }
    let w = World::new();
    let out = w.run(&[
        "run",
        "--network",
        "none",
        "--",
        "/run/airlock/airlock",
        "run",
        "--",
        "sh",
        "-c",
        "echo nested-ok; echo $AIRLOCK",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "nested-ok\n1\n");
    assert!(
        stderr(&out).contains("already inside the airlock sandbox"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn network_explain_names_the_rule_that_decides() {
    let w = World::new();
    w.config("[network]\ndeny = [\"gist.github.com\"]\nallow = [\"*.corp.example\"]\n");
    let out = w.run(&["network", "explain", "api.github.com"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out).starts_with(
            "api.github.com:443 is allowed: rule \"api.github.com\" from preset balanced"
        ),
        "{}",
        stdout(&out)
    );
    let out = w.run(&["network", "explain", "git.corp.example:8443"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(
        stdout(&out).contains("rule \"*.corp.example\" from"),
        "{}",
        stdout(&out)
    );
    let out = w.run(&["network", "explain", "gist.github.com"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stdout(&out).contains("is denied: rule \"gist.github.com\" from"),
        "{}",
        stdout(&out)
    );
    let out = w.run(&["network", "explain", "unknown.example"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stdout(&out).contains("to allow it: allow = [\"unknown.example\"]"),
        "{}",
        stdout(&out)
    );
    let out = w.run(&["network", "explain", "bad host"]);
    assert_eq!(out.status.code(), Some(125), "{}", stderr(&out));
}
