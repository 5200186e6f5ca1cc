//! The CLI's extras as a user meets them, with the real binary in a temp HOME: shell completion
//! (the scripts parse and complete), `--version`, and the help of the new flags.

mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::{AIRLOCK, TestHome, report, stderr, stdout};

fn home() -> TestHome {
    TestHome::new("home/code/app")
}

fn run(h: &TestHome, args: &[&str]) -> Output {
    h.run(args)
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

/// `airlock completion SHELL` written to a file in `h`'s root.
fn completion_script(h: &TestHome, shell: &str) -> PathBuf {
    let out = run(h, &["completion", shell]);
    assert!(out.status.success(), "{}", report(&out));
    let path = h.root.join(format!("airlock.{shell}"));
    fs::write(&path, &out.stdout).expect("write script");
    path
}

/// `program -n FILE`: the shell parses the script without running it.
fn parses(program: &str, file: &Path) {
    let out = Command::new(program)
        .arg("-n")
        .arg(file)
        .output()
        .expect("spawn shell");
    assert!(out.status.success(), "{program} -n: {}", report(&out));
}

/// What bash's completion function offers for `words`, the last one being completed.
fn bash_completes(script: &Path, words: &[&str]) -> Vec<String> {
    let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
    let cword = words.len() - 1;
    let prev = words[cword.saturating_sub(1)];
    let body = format!(
        "source '{}'; COMP_WORDS=({}); COMP_CWORD={cword}; _airlock airlock '{}' '{prev}'; \
         printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        script.display(),
        quoted.join(" "),
        words[cword],
    );
    let out = Command::new("bash")
        .args(["-c", &body])
        .output()
        .expect("bash");
    assert!(out.status.success(), "{}", report(&out));
    stdout(&out).lines().map(str::to_owned).collect()
}

/// What fish offers for the command line `line`, first column only.
fn fish_completes(script: &Path, line: &str) -> Vec<String> {
    let body = format!("source '{}'; complete -C '{line}'", script.display());
    let out = Command::new("fish")
        .args(["-c", &body])
        .output()
        .expect("fish");
    assert!(out.status.success(), "{}", report(&out));
    stdout(&out)
        .lines()
        .map(|l| l.split('\t').next().unwrap_or("").to_owned())
        .collect()
}

#[test]
fn completion_scripts_parse_and_complete_subcommands_and_values() {
    let h = home();
    let bash = completion_script(&h, "bash");
    parses("bash", &bash);
    let top = bash_completes(&bash, &["airlock", ""]);
    for want in ["run", "sandboxes", "completion", "--version"] {
        assert!(top.iter().any(|c| c == want), "{want} in {top:?}");
    }
    assert!(
        !top.iter().any(|c| c == "overlay-handoff"),
        "hidden subcommands are not offered: {top:?}"
    );
    let network = bash_completes(&bash, &["airlock", "run", "--network", ""]);
    assert_eq!(network, ["proxy", "none", "host"]);
    let git_mode = bash_completes(&bash, &["airlock", "run", "--git-mode", ""]);
    assert_eq!(git_mode, ["readonly", "readwrite", "disabled"]);
    let sort = bash_completes(&bash, &["airlock", "sandboxes", "list", "--sort", ""]);
    assert_eq!(sort, ["name", "used", "size"]);
    let shells = bash_completes(&bash, &["airlock", "completion", ""]);
    assert!(
        shells.ends_with(&["bash", "zsh", "fish"].map(String::from)),
        "{shells:?}"
    );

    if installed("zsh") {
        parses("zsh", &completion_script(&h, "zsh"));
    }
    if installed("fish") {
        let fish = completion_script(&h, "fish");
        parses("fish", &fish);
        let mut network = fish_completes(&fish, "airlock run --network ");
        network.sort();
        assert_eq!(network, ["host", "none", "proxy"]);
        let top = fish_completes(&fish, "airlock ");
        assert!(top.iter().any(|c| c == "run"), "{top:?}");
        assert!(!top.iter().any(|c| c == "overlay-handoff"), "{top:?}");
        let flags = fish_completes(&fish, "airlock run --");
        for want in ["--explain", "--git-mode", "--no-hide-env", "--print-spec"] {
            assert!(flags.iter().any(|c| c == want), "{want} in {flags:?}");
        }
    }
}

#[test]
fn an_unknown_completion_shell_is_refused_with_the_choices() {
    let h = home();
    let out = run(&h, &["completion", "tcsh"]);
    assert_eq!(out.status.code(), Some(2), "{}", report(&out));
    let err = stderr(&out);
    assert!(
        err.contains("'tcsh'") && err.contains("bash, zsh, fish"),
        "{err}"
    );
}

#[test]
fn version_names_the_commit_and_the_build_date() {
    let h = home();
    for flag in ["--version", "-V"] {
        let out = run(&h, &[flag]);
        assert!(out.status.success(), "{}", report(&out));
        let text = stdout(&out);
        let rest = text
            .strip_prefix(concat!("airlock ", env!("CARGO_PKG_VERSION"), " ("))
            .and_then(|r| r.strip_suffix(")\n"))
            .unwrap_or_else(|| panic!("`airlock {flag}` said {text:?}"));
        let (commit, date) = rest.split_once(' ').expect("commit and date");
        let bare = commit.strip_suffix("-dirty").unwrap_or(commit);
        assert!(
            bare == "unknown" || (bare.len() >= 12 && bare.chars().all(|c| c.is_ascii_hexdigit())),
            "{commit}"
        );
        let parts: Vec<u32> = date.split('-').map(|p| p.parse().expect(date)).collect();
        assert!(
            date.len() == 10 && parts[0] >= 2024 && (1..=12).contains(&parts[1]),
            "{date}"
        );
        assert!((1..=31).contains(&parts[2]), "{date}");
        // Built from this checkout: the commit is its HEAD.
        let head = Command::new("git")
            .args(["rev-parse", "--short=12", "HEAD"])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output();
        if let Ok(head) = head
            && head.status.success()
        {
            assert_eq!(bare, stdout(&head).trim(), "{text}");
        }
    }
}

#[test]
fn new_flags_have_help() {
    let out = Command::new(AIRLOCK)
        .args(["run", "--help"])
        .output()
        .expect("airlock");
    let help = stdout(&out);
    for flag in ["--git-mode <MODE>", "--no-hide-env", "--explain"] {
        assert!(help.contains(flag), "{flag}: {help}");
    }
    let out = Command::new(AIRLOCK)
        .args(["completion", "--help"])
        .output()
        .expect("airlock");
    assert!(
        stdout(&out).contains("bash-completion/completions/airlock"),
        "{}",
        report(&out)
    );
}
