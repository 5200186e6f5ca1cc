//! Overlay launches: revdiff's real launcher lines pass and become airlock's script; every
//! other shape, program, option and path is refused; the handoff never writes through a link.

use std::fs;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};

use super::*;

struct World {
    _tmp: tempfile::TempDir,
    shared: PathBuf,
    overlay: RevdiffOverlay,
}

const REVDIFF: &str = "/opt/revdiff/bin/revdiff";

fn world() -> World {
    let tmp = tempfile::tempdir().unwrap();
    let shared = tmp.path().join("shared");
    fs::create_dir(&shared).unwrap();
    let scripts = ScriptDir::create(&tmp.path().join("scripts/s1")).unwrap();
    let pins = Pins {
        revdiff: PathBuf::from(REVDIFF),
        airlock: PathBuf::from("/usr/local/bin/airlock"),
        git: Some(PathBuf::from("/usr/bin/git")),
        project: PathBuf::from("/home/u/code/app"),
        git_dir: Some(PathBuf::from("/home/u/code/app/.git")),
        shared: shared.clone(),
        editor_env: vec![("EDITOR".into(), "/usr/bin/vim".into())],
    };
    World {
        _tmp: tmp,
        shared,
        overlay: RevdiffOverlay {
            pins,
            program_names: vec![REVDIFF.into(), "/usr/local/bin/revdiff".into()],
            scripts,
        },
    }
}

impl World {
    fn s(&self, name: &str) -> String {
        self.shared.join(name).display().to_string()
    }

    /// The kitty payload revdiff's current launcher sends.
    fn payload(&self, args: &str) -> String {
        format!(
            "cd '/home/u/code/app' && '{REVDIFF}' '--output={}' {args}; touch '{}'",
            self.s("revdiff-output-Ab12"),
            self.s("revdiff-done-Cd34")
        )
    }

    fn kitty(&self, payload: &str) -> Result<Vec<String>, &'static str> {
        self.overlay
            .relocate_argv(&["sh".into(), "-c".into(), payload.into()])
    }
}

fn script_of(argv: &[String]) -> String {
    assert_eq!(argv[0], "/bin/sh");
    let path = Path::new(&argv[1]);
    let mode = fs::metadata(path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o500, "launch scripts are 0500");
    fs::read_to_string(path).unwrap()
}

#[test]
fn the_launchers_kitty_payload_becomes_airlocks_script() {
    let w = world();
    let argv = w.kitty(&w.payload("'HEAD~1' '--staged'")).unwrap();
    let script = script_of(&argv);
    let dir = w.overlay.scripts.path().display().to_string();
    assert!(script.starts_with("#!/bin/sh\n"), "{script}");
    assert!(
        script.contains(&format!(
            "cd '/home/u/code/app' && PATH='{dir}/bin' GIT_DIR='/home/u/code/app/.git' GIT_WORK_TREE='/home/u/code/app' EDITOR='/usr/bin/vim' '{REVDIFF}' '--output={dir}/output-1' 'HEAD~1' '--staged'\n"
        )),
        "{script}"
    );
    assert!(
        script.ends_with(&format!(
            "exec '/usr/local/bin/airlock' 'overlay-handoff' '{dir}/output-1' '{}' 'revdiff-output-Ab12' 'revdiff-done-Cd34'\n",
            w.shared.display()
        )),
        "{script}"
    );
}

#[test]
fn older_launcher_spellings_pass_too() {
    let w = world();
    // Unquoted words, no cd, an env prefix whose value is dropped.
    let lines = [
        format!("{REVDIFF} --output={} HEAD; touch '{}'", w.s("o"), w.s("d")),
        format!(
            "cd '/home/u/code/app' && /usr/bin/env 'EDITOR=nano -w' 'VISUAL=x' '{REVDIFF}' '--output={}'",
            w.s("o")
        ),
        format!("/usr/local/bin/revdiff -o {} main feature", w.s("o")),
    ];
    for line in lines {
        let script = script_of(&w.kitty(&line).unwrap_or_else(|e| panic!("{line}: {e}")));
        assert!(!script.contains("nano"), "the sandbox's editor is dropped");
    }
    // The direct form: revdiff as the program.
    let argv = w
        .overlay
        .relocate_argv(&[REVDIFF.into(), format!("--output={}", w.s("o"))])
        .unwrap();
    assert!(script_of(&argv).contains("'overlay-handoff'"));
}

#[test]
fn shell_syntax_beyond_words_and_the_two_operators_is_refused() {
    let w = world();
    let base = w.payload("'HEAD'");
    let cases = [
        format!("{base}; rm -rf ~"),
        format!("{base} && id"),
        base.replace("'HEAD'", "$(id)"),
        base.replace("'HEAD'", "`id`"),
        base.replace("'HEAD'", "\"HEAD\""),
        base.replace("'HEAD'", "HEAD | tee x"),
        base.replace("'HEAD'", "HEAD > x"),
        base.replace("'HEAD'", "HEAD &"),
        base.replace("'HEAD'", "HEAD\nid"),
        base.replace("'HEAD'", "*"),
        base.replace("'HEAD'", "~/x"),
        base.replace("'HEAD'", "'unterminated"),
        base.replace("'HEAD'", "HEAD #"),
        format!("; {base}"),
        base.replace(" && ", " ; "),
    ];
    for case in cases {
        assert!(w.kitty(&case).is_err(), "allowed: {case:?}");
    }
    assert!(w.kitty(&base).is_ok(), "control");
}

#[test]
fn the_program_directory_and_paths_are_pinned() {
    let w = world();
    let base = w.payload("'HEAD'");
    let cases = [
        // A revdiff the sandbox planted, by path or by name.
        base.replace(REVDIFF, "/tmp/revdiff"),
        base.replace(REVDIFF, "revdiff"),
        base.replace(REVDIFF, &format!("{}/revdiff", w.shared.display())),
        // Another directory: a subdirectory could hold a planted .git.
        base.replace("cd '/home/u/code/app'", "cd '/home/u/code/app/sub'"),
        base.replace("cd '/home/u/code/app'", "cd '/home/u/code/app/../app'"),
        // The output or sentinel outside the shared temp directory.
        base.replace(&w.s("revdiff-output-Ab12"), "/home/u/.bashrc"),
        base.replace(&w.s("revdiff-output-Ab12"), &w.s("../x")),
        base.replace(&w.s("revdiff-output-Ab12"), &w.s("sub/x")),
        base.replace(&w.s("revdiff-done-Cd34"), "/home/u/.profile"),
        base.replace("touch", "rm"),
        // A second command after the sentinel.
        format!("{base}; touch '{}'", w.s("x")),
    ];
    for case in cases {
        assert!(w.kitty(&case).is_err(), "allowed: {case:?}");
    }
}

#[test]
fn revdiff_options_are_allowlisted() {
    let w = world();
    let allowed = [
        "'--staged' '--untracked' '-A'",
        "'--tree-width=3' '--tab-width' '8'",
        "'--theme=dracula' '--chroma-style' 'monokai'",
        "'--only=src/main.rs' '-X' 'vendor' '--include=docs/'",
        "'--description=Review the plan: it is long'",
        "'main' 'feature'",
        "'HEAD~2'",
    ];
    for args in allowed {
        let line = w.payload(args);
        assert!(w.kitty(&line).is_ok(), "refused: {args}");
    }
    let refused = [
        "'--history-dir=/home/u'",
        "'--config=/home/u/x'",
        "'--keys=/x'",
        "'--annotations=/home/u/.ssh/id_ed25519'",
        "'--description-file=/etc/shadow'",
        "'--compare-old=/etc/shadow' '--compare-new=/etc/hosts'",
        "'--install-theme=https://x.test/t'",
        "'--init-themes'",
        "'--only=/etc/shadow'",
        "'--only=../../.ssh/id_ed25519'",
        "'--exclude=-x'",
        "'--tree-width=1e9'",
        "'--theme=../x'",
        "'--output=/tmp/second'",
        "'--'",
        "'--staged=1'",
        "'a' 'b' 'c'",
        "'-rf'",
        "'--tab-width'",
    ];
    for args in refused {
        let line = w.payload(args);
        assert!(w.kitty(&line).is_err(), "allowed: {args}");
    }
    let no_output = format!("'{REVDIFF}' 'HEAD'");
    assert!(w.kitty(&no_output).is_err(), "--output is required");
}

#[test]
fn a_herdr_launch_script_is_read_once_and_replaced() {
    let w = world();
    let line = w.payload("'HEAD'");
    fs::write(
        w.shared.join("revdiff-launch-x1"),
        format!("#!/bin/sh\n{line}\n"),
    )
    .unwrap();
    let text = w
        .overlay
        .relocate_command(&format!("sh {}", w.s("revdiff-launch-x1")))
        .unwrap();
    let path = text
        .strip_prefix("/bin/sh '")
        .unwrap()
        .strip_suffix('\'')
        .unwrap();
    assert!(Path::new(path).starts_with(w.overlay.scripts.path()));
    // Swapping the original afterwards changes nothing: the copy is airlock's own text.
    fs::write(w.shared.join("revdiff-launch-x1"), "#!/bin/sh\nid\n").unwrap();
    let script = fs::read_to_string(path).unwrap();
    assert!(script.contains("'HEAD'") && !script.contains("\nid\n"));
    // The swapped script is judged on its own when asked for (quoted path form).
    let quoted = format!("sh '{}'", w.s("revdiff-launch-x1"));
    assert_eq!(
        w.overlay.relocate_command(&quoted),
        Err("launch program is not the host's revdiff")
    );
}

#[test]
fn herdr_launch_scripts_that_are_not_plain_files_or_lines_are_refused() {
    let w = world();
    let line = w.payload("'HEAD'");
    let good = w.shared.join("good");
    fs::write(&good, format!("#!/bin/sh\n{line}\n")).unwrap();
    symlink(&good, w.shared.join("link")).unwrap();
    fs::write(w.shared.join("two"), format!("#!/bin/sh\n{line}\nid\n")).unwrap();
    fs::write(w.shared.join("perl"), format!("#!/usr/bin/perl\n{line}\n")).unwrap();
    fs::write(w.shared.join("empty"), "").unwrap();
    fs::write(w.shared.join("big"), "#".repeat(70 << 10)).unwrap();
    let fifo = CString::new(w.shared.join("fifo").as_os_str().as_bytes()).unwrap();
    // SAFETY: valid C string.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
    for name in ["link", "two", "perl", "empty", "big", "fifo", "missing"] {
        let command = format!("sh {}", w.s(name));
        assert!(
            w.overlay.relocate_command(&command).is_err(),
            "allowed: {name}"
        );
    }
    for command in [
        format!("bash {}", w.s("good")),
        format!("sh {} extra", w.s("good")),
        format!("sh {}; id", w.s("good")),
        "sh /home/u/code/app/launch".to_owned(),
        format!("sh {}/../shared/good", w.shared.display()),
    ] {
        assert!(
            w.overlay.relocate_command(&command).is_err(),
            "allowed: {command}"
        );
    }
    assert!(
        w.overlay
            .relocate_command(&format!("sh {}", w.s("good")))
            .is_ok(),
        "control"
    );
}

#[test]
fn the_handoff_never_writes_through_what_the_sandbox_put_in_the_shared_dir() {
    let tmp = tempfile::tempdir().unwrap();
    let shared = tmp.path().join("shared");
    fs::create_dir(&shared).unwrap();
    let victim = tmp.path().join("bashrc");
    fs::write(&victim, "original\n").unwrap();
    symlink(&victim, shared.join("out")).unwrap();
    let fifo = CString::new(shared.join("done").as_os_str().as_bytes()).unwrap();
    // SAFETY: valid C string.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
    let private = tmp.path().join("output-1");
    fs::write(&private, "src/main.rs:3: rename this\n").unwrap();
    handoff(&private, &shared, "out", Some("done")).unwrap();
    assert_eq!(fs::read_to_string(&victim).unwrap(), "original\n");
    let out = fs::symlink_metadata(shared.join("out")).unwrap();
    assert!(out.file_type().is_file());
    assert_eq!(
        fs::read_to_string(shared.join("out")).unwrap(),
        "src/main.rs:3: rename this\n"
    );
    assert!(fs::symlink_metadata(shared.join("done")).unwrap().is_file());
    assert!(!private.exists(), "the private output is removed");
    // No output at all (revdiff failed): an empty file, and the sentinel still comes.
    handoff(&private, &shared, "out2", Some("done2")).unwrap();
    assert_eq!(fs::read(shared.join("out2")).unwrap(), b"");
    for bad in ["../x", "a/b", ".", "", "x y"] {
        assert!(handoff(&private, &shared, bad, None).is_err(), "{bad:?}");
    }
}
