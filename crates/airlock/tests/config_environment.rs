//! `[sandbox.environment]` and `[[include]]` as a user meets them: the real binary in a temp HOME,
//! the variables seen inside a real sandbox, what `--print-spec` and `config show` print, and the
//! errors for bad input.

mod common;

use std::fs;
use std::path::Path;
use std::process::{Command, Output};

use common::{TestHome, report, sandbox_starts, stderr, stdout, write};

/// A home with the project at `~/work/app`.
fn home() -> TestHome {
    TestHome::new("home/work/app")
}

fn airlock(h: &TestHome, dir: &Path, args: &[&str]) -> Command {
    let mut cmd = h.airlock(args);
    cmd.current_dir(dir)
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("SHELL", "/bin/sh");
    cmd
}

fn run(h: &TestHome, args: &[&str]) -> Output {
    airlock(h, &h.project, args)
        .output()
        .expect("spawn airlock")
}

/// `sh -c script` in a sandbox without network, in `dir`.
fn sh_in(h: &TestHome, dir: &Path, script: &str) -> Output {
    airlock(
        h,
        dir,
        &["run", "--network", "none", "--", "sh", "-c", script],
    )
    .env("AIRLOCK_E2E_HOST_VAR", "from the host")
    .output()
    .expect("spawn airlock")
}

fn trust(h: &TestHome, project_toml: &str) {
    write(&h.project.join(".airlock.toml"), project_toml);
    let out = run(h, &["trust", "add"]);
    assert!(out.status.success(), "{}", report(&out));
}

#[test]
fn a_variable_from_each_source_is_seen_inside() {
    if !sandbox_starts() {
        return;
    }
    let h = home();
    h.config(
        r#"
        [sandbox.environment.FROM_VALUE]
        value = "a literal"
        [sandbox.environment.FROM_ENV]
        env = "AIRLOCK_E2E_HOST_VAR"
        [sandbox.environment.FROM_FILE]
        file = "token"
        [sandbox.environment.OVERRIDDEN]
        value = "global"
        "#,
    );
    write(&h.home.join(".config/airlock/token"), "s3cret-token\n");
    write(&h.project.join("team.env"), "from the project dir\n");
    trust(
        &h,
        "[sandbox.environment.OVERRIDDEN]\nvalue = \"project\"\n\
         [sandbox.environment.PROJECT_FILE]\nfile = \"team.env\"\n",
    );
    let out = sh_in(
        &h,
        &h.project,
        "printf '%s|' \"$FROM_VALUE\" \"$FROM_ENV\" \"$FROM_FILE\" \"$OVERRIDDEN\" \"$PROJECT_FILE\" \
         \"${AIRLOCK_E2E_HOST_VAR-not copied}\"",
    );
    assert!(out.status.success(), "{}", report(&out));
    assert_eq!(
        stdout(&out),
        "a literal|from the host|s3cret-token|project|from the project dir|not copied|"
    );
}

#[test]
fn an_include_applies_only_where_the_project_path_matches() {
    if !sandbox_starts() {
        return;
    }
    let h = home();
    h.config(
        "[sandbox.environment.WHERE]\nvalue = \"global\"\n\
         [[include]]\nif = \"dir:~/work/**\"\npath = \"work.toml\"\n",
    );
    write(
        &h.home.join(".config/airlock/work.toml"),
        "[sandbox.environment.WHERE]\nvalue = \"work\"\n[sandbox.environment.CORP]\nvalue = \"1\"\n",
    );
    let play = h.home.join("play/app");
    fs::create_dir_all(&play).expect("play dir");
    let script = "printf '%s %s' \"$WHERE\" \"${CORP-unset}\"";
    let out = sh_in(&h, &h.project, script);
    assert!(out.status.success(), "{}", report(&out));
    assert_eq!(stdout(&out), "work 1", "~/work/app matches ~/work/**");
    let out = sh_in(&h, &play, script);
    assert!(out.status.success(), "{}", report(&out));
    assert_eq!(stdout(&out), "global unset", "~/play/app does not");
}

#[test]
fn print_spec_shows_where_file_and_host_values_come_from_not_the_values() {
    let h = home();
    h.config(
        "[sandbox.environment.TOKEN]\nfile = \"~/.token\"\n\
         [sandbox.environment.GH]\nenv = \"AIRLOCK_E2E_HOST_VAR\"\n\
         [sandbox.environment.MODE]\nvalue = \"dev\"\n",
    );
    write(&h.home.join(".token"), "s3cret-token\n");
    let out = airlock(&h, &h.project, &["run", "--print-spec", "--", "true"])
        .env("AIRLOCK_E2E_HOST_VAR", "host-secret")
        .output()
        .expect("spawn");
    assert!(out.status.success(), "{}", report(&out));
    let spec: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("json");
    assert_eq!(spec["env"]["TOKEN"], "<from file ~/.token>");
    assert_eq!(spec["env"]["GH"], "<from env AIRLOCK_E2E_HOST_VAR>");
    assert_eq!(spec["env"]["MODE"], "dev");
    let all = format!("{}{}", stdout(&out), stderr(&out));
    assert!(
        !all.contains("s3cret-token") && !all.contains("host-secret"),
        "{all}"
    );
}

#[test]
fn a_missing_host_variable_is_a_warning_and_the_launch_goes_on() {
    let h = home();
    let global = h.config("[sandbox.environment.GH]\nenv = \"AIRLOCK_E2E_UNSET\"\n");
    let out = run(&h, &["run", "--print-spec", "--", "true"]);
    assert!(out.status.success(), "{}", report(&out));
    let err = stderr(&out);
    assert!(
        err.contains(&format!(
            "airlock: warning: {}: [sandbox.environment.GH] env = \"AIRLOCK_E2E_UNSET\": the host has no AIRLOCK_E2E_UNSET",
            global.display()
        )),
        "{err}"
    );
    let spec: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("json");
    assert!(spec["env"].get("GH").is_none(), "{}", spec["env"]);
}

#[test]
fn bad_environment_entries_are_refused_before_anything_starts() {
    let h = home();
    let cases: &[(&str, &[&str])] = &[
        (
            "[sandbox.environment.TOKEN]\nfile = \"missing-token\"\n",
            &[
                "[sandbox.environment.TOKEN] file = \"missing-token\"",
                "missing-token): it does not exist",
            ],
        ),
        (
            "[sandbox.environment.\"bad-name\"]\nvalue = \"x\"\n",
            &[
                "[sandbox.environment.bad-name]",
                "not a valid environment variable name",
            ],
        ),
        (
            "[sandbox.environment.X]\nvalue = \"a\"\nenv = \"B\"\n",
            &["[sandbox.environment.X] sets both `value` and `env`"],
        ),
        (
            "[sandbox]\nenv_passthrough = [\"X\"]\n[sandbox.environment.X]\nvalue = \"a\"\n",
            &["env_passthrough = [\"X\"]", "keep one"],
        ),
        (
            "[sandbox.environment.HOME]\nvalue = \"/tmp\"\n",
            &["[sandbox.environment.HOME]: HOME is set by airlock itself"],
        ),
    ];
    for (text, needles) in cases {
        let global = h.config(text);
        let out = run(&h, &["run", "--network", "none", "--", "true"]);
        assert_eq!(out.status.code(), Some(125), "{text}\n{}", report(&out));
        let err = stderr(&out);
        assert!(err.contains(&global.display().to_string()), "{err}");
        for needle in *needles {
            assert!(err.contains(needle), "expected {needle:?} in:\n{err}");
        }
    }
    assert!(!h.sandboxes().exists(), "nothing created on a config error");
}

#[test]
fn bad_includes_are_refused_naming_the_files() {
    let h = home();
    let global = h.config("[[include]]\nif = \"branch:main\"\npath = \"w.toml\"\n");
    let out = run(&h, &["run", "--", "true"]);
    assert_eq!(out.status.code(), Some(125), "{}", report(&out));
    let err = stderr(&out);
    assert!(err.contains(&global.display().to_string()), "{err}");
    assert!(err.contains("if = \"dir:<glob>\""), "{err}");

    h.config("[[include]]\nif = \"dir:~/work/**\"\npath = \"gone.toml\"\n");
    let out = run(&h, &["run", "--", "true"]);
    assert_eq!(out.status.code(), Some(125), "{}", report(&out));
    let err = stderr(&out);
    let gone = h.home.join(".config/airlock/gone.toml");
    assert!(err.contains(&global.display().to_string()), "{err}");
    assert!(
        err.contains(&format!("{} does not exist", gone.display())),
        "{err}"
    );

    // In a project file it is refused when trusting it.
    h.config("");
    let project = h.project.join(".airlock.toml");
    write(
        &project,
        "[[include]]\nif = \"dir:/**\"\npath = \"/etc/x.toml\"\n",
    );
    let out = run(&h, &["trust", "add"]);
    assert_eq!(out.status.code(), Some(125), "{}", report(&out));
    let err = stderr(&out);
    assert!(
        err.contains(&format!(
            "{}: [[include]] is honoured only in the global config",
            project.display()
        )),
        "{err}"
    );
}

#[test]
fn config_show_names_the_included_file_as_the_origin_of_its_keys() {
    let h = home();
    h.config("[[include]]\nif = \"dir:~/work/*\"\npath = \"~/cfg/work.toml\"\n");
    let work = h.home.join("cfg/work.toml");
    write(
        &work,
        "[sandbox.environment.CORP]\nvalue = \"1\"\n[network]\nallow = [\"corp.example\"]\n",
    );
    let out = run(&h, &["config", "show"]);
    assert!(out.status.success(), "{}", report(&out));
    let shown = stdout(&out);
    for needle in [
        format!("# included config: {} (loaded)", work.display()),
        format!(
            "# from {:?}\n[sandbox.environment.CORP]\nvalue = \"1\"",
            work
        ),
        format!("\"corp.example\", # from {:?}", work),
    ] {
        assert!(shown.contains(&needle), "expected {needle:?} in:\n{shown}");
    }
    let out = run(&h, &["config", "path"]);
    assert!(
        stdout(&out).contains(&format!("included config: {}", work.display())),
        "{}",
        report(&out)
    );
}
