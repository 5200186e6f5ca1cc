//! `airlock run`'s per-run overrides and `--explain`, with the real binary in a temp HOME:
//! `--git-mode` over `[tools.git] mode`, `--no-hide-env` over `hide_env_files`, and `--explain`
//! read against the spec `--print-spec` prints.

mod common;

use std::path::Path;
use std::process::{Command, Output};

use common::{TestHome, report, stderr, stdout, write};

fn home() -> TestHome {
    TestHome::new("home/code/app")
}

fn run(h: &TestHome, args: &[&str]) -> Output {
    h.run(args)
}

fn json(out: &Output) -> serde_json::Value {
    serde_json::from_str(&stdout(out)).unwrap_or_else(|e| panic!("{e}: {}", report(out)))
}

/// Whether `program` runs here; says so when it does not.
fn installed(program: &str) -> bool {
    let ok = Command::new(program)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!("skipped: {program} is not installed");
    }
    ok
}

/// A git project with a config, from the mode tests' fixture; None (said why) without git.
fn git_world(config: &str) -> Option<common::modes::World> {
    if !installed("git") {
        return None;
    }
    Some(common::modes::World::new(config))
}

/// The spec's mount at `target`.
fn mount_at<'a>(spec: &'a serde_json::Value, target: &Path) -> &'a serde_json::Value {
    let target = target.display().to_string();
    spec["mounts"]
        .as_array()
        .expect("mounts")
        .iter()
        .rev()
        .find(|m| m["target"] == target.as_str())
        .unwrap_or_else(|| panic!("no mount at {target}"))
}

#[test]
fn git_mode_overrides_the_config_for_one_run() {
    let Some(w) = git_world("[tools.git]\nmode = \"readonly\"\n") else {
        return;
    };
    let git = w.project.join(".git");
    let spec = |args: &[&str]| {
        let mut all = vec!["run", "--print-spec"];
        all.extend_from_slice(args);
        let out = w.airlock_with(&all, "/bin/sh");
        json(&out)
    };
    let readonly = spec(&[]);
    assert_eq!(mount_at(&readonly, &git)["op"], "bind", "{readonly}");
    assert_eq!(mount_at(&readonly, &git)["writable"], false);
    let readwrite = spec(&["--git-mode", "readwrite"]);
    assert_eq!(mount_at(&readwrite, &git)["op"], "overlay");
    assert_eq!(mount_at(&readwrite, &git)["upper"]["kind"], "owned");
    let disabled = spec(&["--git-mode=disabled"]);
    assert!(
        disabled["mounts"]
            .as_array()
            .unwrap()
            .iter()
            .all(|m| m["target"] != w.home.join(".gitconfig").display().to_string()),
        "no git config in disabled mode: {disabled}"
    );
    // The shorthand takes it too.
    let out = w.airlock_with(
        &["--git-mode", "readwrite", "--print-spec", "true"],
        "/bin/sh",
    );
    assert_eq!(mount_at(&json(&out), &git)["op"], "overlay");

    let out = w.airlock_with(&["run", "--git-mode", "rw", "--print-spec"], "/bin/sh");
    assert_eq!(out.status.code(), Some(2), "{}", report(&out));
    let err = stderr(&out);
    assert!(
        err.contains("'rw'") && err.contains("readonly, readwrite, disabled"),
        "{err}"
    );

    if !common::modes::available() {
        return;
    }
    let o = w.airlock_with(
        &[
            "run",
            "--git-mode",
            "readwrite",
            "--network",
            "none",
            "--",
            "sh",
            "-c",
            "echo change >> README && git commit -qam second && echo ok",
        ],
        "/bin/sh",
    );
    assert_eq!(stdout(&o), "ok\n", "{}", report(&o));
    let log = w.host_git(&["log", "-1", "--format=%s", "airlock/main"]);
    assert_eq!(String::from_utf8_lossy(&log.stdout), "second\n");
    // The next run without the flag is read-only again.
    let o = w.sh("git commit -q --allow-empty -m third 2>/dev/null; echo commit=$?");
    assert!(!stdout(&o).contains("commit=0"), "{}", report(&o));
}

#[test]
fn git_mode_is_refused_when_the_config_turns_git_off() {
    let h = home();
    let file = h.config("[tools.git]\nenabled = false\n");
    let out = run(&h, &["run", "--git-mode", "readwrite", "--print-spec"]);
    assert_eq!(out.status.code(), Some(125), "{}", report(&out));
    assert_eq!(
        stderr(&out),
        format!(
            "airlock: --git-mode readwrite: the git tool is turned off ([tools.git] enabled = \
             false in {}); set enabled = true there, or drop --git-mode\n",
            file.display()
        )
    );
    let out = run(&h, &["run", "--git-mode", "disabled", "--print-spec"]);
    assert!(out.status.success(), "{}", report(&out));
}

fn patterns(spec: &serde_json::Value) -> Vec<String> {
    spec["hide"]["patterns"]
        .as_array()
        .map(|p| p.iter().map(|v| v.as_str().unwrap().to_owned()).collect())
        .unwrap_or_default()
}

#[test]
fn no_hide_env_shows_env_files_for_one_run_and_keeps_the_hide_globs() {
    let h = home();
    h.config("[sandbox]\nhide = [\"*.pem\"]\n");
    write(&h.project.join(".env"), "TOKEN=from-dotenv\n");
    write(&h.project.join("web/.env.local"), "LOCAL=1\n");
    write(&h.project.join("key.pem"), "PRIVATE\n");
    let spec = json(&run(&h, &["run", "--print-spec"]));
    assert_eq!(
        patterns(&spec),
        [".env", ".env.*", ".envrc", "/.airlock.toml", "*.pem"]
    );
    let spec = json(&run(&h, &["run", "--print-spec", "--no-hide-env"]));
    assert_eq!(patterns(&spec), ["*.pem"]);

    if !common::sandbox_starts() {
        return;
    }
    let cat = "cat .env web/.env.local key.pem; echo end";
    let sh = |extra: &[&str]| {
        let mut args = vec!["run", "--network", "none"];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["--", "sh", "-c", cat]);
        let out = h
            .airlock(&args)
            .env("PATH", "/usr/bin:/bin")
            .output()
            .expect("airlock");
        assert!(out.status.success(), "{}", report(&out));
        stdout(&out)
    };
    // A first run hides them (and records where, for the next run).
    assert_eq!(sh(&[]), "end\n");
    assert_eq!(sh(&["--no-hide-env"]), "TOKEN=from-dotenv\nLOCAL=1\nend\n");
    assert_eq!(sh(&[]), "end\n", "hidden again without the flag");
}

#[test]
fn explain_reads_the_spec_print_spec_prints_and_starts_nothing() {
    let h = home();
    write(&h.home.join("datasets/a.csv"), "1,2\n");
    h.config(
        "[sandbox]\nenv_passthrough = [\"MY_TOKEN\"]\nhide = [\"*.pem\"]\n\n\
         [[sandbox.mounts]]\npath = \"~/datasets\"\nmode = \"readonly\"\n\n\
         [network]\nallow = [\"*.mycompany.dev\"]\n",
    );
    let args = [
        "run",
        "--allow-host",
        "example.org",
        "--",
        "echo",
        "hi there",
    ];
    let with = |flag: &str| {
        let mut all = vec![args[0], flag];
        all.extend_from_slice(&args[1..]);
        h.airlock(&all)
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("SHELL", "/bin/sh")
            .env("MY_TOKEN", "s3cr3t-value")
            .output()
            .expect("airlock")
    };
    let spec = json(&with("--print-spec"));
    let out = with("--explain");
    assert!(out.status.success(), "{}", report(&out));
    let text = stdout(&out);
    let field = |label: &str| -> String {
        text.lines()
            .find(|l| l.starts_with(&format!("{label:10}")))
            .unwrap_or_else(|| panic!("no {label} line in {text}"))[10..]
            .to_owned()
    };
    assert_eq!(field("project"), spec["project"].as_str().unwrap());
    assert_eq!(
        field("sandbox"),
        format!(
            "{}, state in {}",
            spec["name"].as_str().unwrap(),
            spec["state_root"].as_str().unwrap()
        )
    );
    assert!(field("home").starts_with(&format!("{}: the sandbox's own", h.home.display())));
    assert_eq!(field("command"), "echo 'hi there'");
    assert!(field("network").starts_with("proxy: only lo;"), "{text}");
    assert!(
        text.contains("1 allow and 0 deny rules from the config; --allow-host example.org"),
        "{text}"
    );
    assert!(text.contains("preset balanced ("), "{text}");
    assert!(field("tools").starts_with("git"), "{text}");
    assert!(text.contains("mode readonly"), "{text}");
    assert_eq!(
        field("hidden"),
        format!(
            "{} (read as empty, for the whole session)",
            patterns(&spec).join(", ")
        )
    );
    assert_eq!(
        field("mounts"),
        "~/datasets readonly, from ~/.config/airlock/config.toml: [[sandbox.mounts]] #1 \
         (path = \"~/datasets\", mode = \"readonly\")"
    );
    assert!(field("limits").starts_with("no memory, CPU or process limit, each tmpfs up to "));
    let env = spec["env"].as_object().unwrap();
    assert!(field("env").starts_with(&format!("{} variables (names only): ", env.len())));
    let env_text: String = text
        .lines()
        .skip_while(|l| !l.starts_with("env "))
        .collect::<Vec<_>>()
        .join(" ");
    for name in env.keys() {
        assert!(env_text.contains(name.as_str()), "{name} in {env_text}");
    }
    assert!(env.contains_key("MY_TOKEN"));
    assert!(
        !text.contains("s3cr3t-value"),
        "a value is never shown: {text}"
    );
    assert!(!h.sandboxes().exists(), "nothing created");

    // The flags it explains are this run's.
    let out = run(
        &h,
        &[
            "--explain",
            "--network",
            "none",
            "--no-hide-env",
            "--git-mode",
            "disabled",
        ],
    );
    assert!(out.status.success(), "{}", report(&out));
    let text = stdout(&out);
    assert!(
        text.contains("\nnetwork   none: only lo, no way out\n"),
        "{text}"
    );
    assert!(text.contains("\nhidden    *.pem (read as empty"), "{text}");

    let out = run(&h, &["run", "--explain", "--print-spec"]);
    assert_eq!(out.status.code(), Some(2), "{}", report(&out));
    assert!(stderr(&out).contains("'--print-spec'"), "{}", report(&out));
}
