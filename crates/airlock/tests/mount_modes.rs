//! Tool mount modes end to end: the real binary, a real sandbox, a temp HOME whose tool
//! directories the catalog detects, and checks made on the host afterwards. The git tool's modes
//! are in git_modes.rs; the fixture both use is tests/common/modes.rs.

mod common;

use std::fs;
use std::path::Path;

use common::modes::{MODES, World, available};
use common::{report as text, stderr as stderr_text, stdout, write};

#[test]
fn overlay_writes_stay_in_the_sandbox_and_come_back_next_run() {
    if !available() {
        return;
    }
    let w = World::new(MODES);
    let o = w.sh("cat ~/.claude/settings.json && echo '{\"sandbox\": 1}' > ~/.claude/settings.json && echo new > ~/.claude/session");
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(
        stdout(&o),
        "{\"host\": true}\n",
        "host content visible through the overlay"
    );
    assert_eq!(
        fs::read_to_string(w.home.join(".claude/settings.json")).expect("host file"),
        "{\"host\": true}\n",
        "the host file is untouched"
    );
    assert!(
        !w.home.join(".claude/session").exists(),
        "nothing new on the host"
    );
    let o = w.sh("cat ~/.claude/settings.json ~/.claude/session");
    assert_eq!(stdout(&o), "{\"sandbox\": 1}\nnew\n", "{}", text(&o));
}

#[test]
fn a_second_session_sees_what_the_first_saved_and_keeps_nothing() {
    if !available() {
        return;
    }
    second_session_keeps_nothing(&World::new(MODES));
}

#[test]
fn a_second_session_with_a_root_built_ahead_sees_what_the_first_saved_and_keeps_nothing() {
    if !available() {
        return;
    }
    // The second session's init builds the recorded root ahead, whose overlay it must never
    // mount: that session sees the layers stacked, plans another root, and refuses it.
    let w = World::new(CLAUDE_ONLY);
    let o = w.sh("true");
    assert!(o.status.success(), "{}", text(&o));
    let record = overlay_dir(&w, "claude-.claude-").join("../../root-ahead");
    assert_eq!(
        fs::read(&record).expect("the root's record").first(),
        Some(&b'1'),
        "control: the next launch builds its root ahead"
    );
    second_session_keeps_nothing(&w);
}

/// claude's directory the only overlay (a root with a throwaway one is never built ahead).
const CLAUDE_ONLY: &str = "[tools.claude]\nmount_mode = \"overlay\"\n\n[tools.codex]\nmount_mode = \
                           \"readonly\"\n\n[tools.nvim]\nmount_mode = \"readonly\"\n";

fn second_session_keeps_nothing(w: &World) {
    // Session 1 saves a login in its overlay and stays open.
    // In the project: the host and the session both see it.
    let (ready, stop) = (w.project.join("ready"), w.project.join("stop"));
    let first = w
        .airlock(&[
            "run",
            "--network",
            "none",
            "--",
            "sh",
            "-c",
            &format!(
                "echo saved-by-first > ~/.claude/login && : > {} && while [ ! -e {} ]; do sleep 0.05; done",
                ready.display(),
                stop.display()
            ),
        ])
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .spawn()
        .expect("first session");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !ready.exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    if !ready.exists() {
        let mut first = first;
        let _ = first.kill();
        let _ = first.wait();
        panic!("the first session never became ready");
    }
    let second =
        w.sh("cat ~/.claude/login ~/.claude/settings.json && echo mine > ~/.claude/second");
    fs::write(&stop, "").expect("stop");
    let status = {
        let mut first = first;
        first.wait().expect("first exits")
    };
    assert!(status.success());
    assert!(second.status.success(), "{}", text(&second));
    assert_eq!(
        stdout(&second),
        "saved-by-first\n{\"host\": true}\n",
        "the second session sees the first one's saved state over the host's files"
    );
    assert!(
        stderr_text(&second).contains("sees what that one has saved"),
        "{}",
        text(&second)
    );
    // Afterwards: the first session's write is kept, the second's is gone, the host is untouched.
    let o = w.sh("cat ~/.claude/login; ls ~/.claude");
    assert!(stdout(&o).starts_with("saved-by-first\n"), "{}", text(&o));
    assert!(!stdout(&o).contains("second"), "{}", text(&o));
    assert!(
        !w.home.join(".claude/login").exists(),
        "nothing reached the host"
    );
}

#[test]
fn sessions_back_to_back_keep_every_overlay_write() {
    if !available() {
        return;
    }
    let w = World::new(CLAUDE_ONLY);
    // Each session's closer lets the overlay lease go after airlock has exited, once the overlay
    // is unmounted: the next session waits for it rather than discarding its own writes.
    for i in 0..5 {
        let o = w.sh(&format!("echo {i} >> ~/.claude/log"));
        assert!(o.status.success(), "{}", text(&o));
        assert!(
            !stderr_text(&o).contains("overlay layers"),
            "session {i} did not own the layers: {}",
            text(&o)
        );
    }
    let o = w.sh("cat ~/.claude/log");
    assert_eq!(stdout(&o), "0\n1\n2\n3\n4\n", "{}", text(&o));
    // The later launches' roots were built ahead, their overlays mounted after `G`: a root built
    // ahead and refused would have marked the record `0`.
    let state = overlay_dir(&w, "claude-.claude-").join("../..");
    let record = fs::read(state.join("root-ahead")).expect("the root's record");
    assert_eq!(
        record.first(),
        Some(&b'1'),
        "{:?}",
        String::from_utf8_lossy(&record)
    );
}

#[test]
fn what_an_interrupted_copy_up_left_is_cleared_by_the_kernel_never_followed() {
    use std::os::unix::fs::PermissionsExt as _;
    if !available() {
        return;
    }
    let w = World::new(MODES);
    let o = w.sh("echo 1 > ~/.claude/log");
    assert!(o.status.success(), "{}", text(&o));
    let work = overlay_dir(&w, "claude-.claude-").join("work/work");
    // A copy-up of a link the sandbox made, cut short: the kernel's temp entry keeps the target
    // the sandbox chose (here a host file); and a directory with a file in it.
    let host = w.root.join("host-secret");
    fs::write(&host, "kept").expect("host file");
    fs::set_permissions(&work, fs::Permissions::from_mode(0o700)).expect("open work");
    std::os::unix::fs::symlink(&host, work.join("#1")).expect("link");
    write(&work.join("#2/inside"), "x");
    fs::set_permissions(&work, fs::Permissions::from_mode(0o000)).expect("close work");
    let o = w.sh("echo 2 >> ~/.claude/log && cat ~/.claude/log");
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(stdout(&o), "1\n2\n", "{}", text(&o));
    assert_eq!(fs::read_to_string(&host).expect("host file"), "kept");
    fs::set_permissions(&work, fs::Permissions::from_mode(0o700)).expect("open work");
    let left: Vec<_> = fs::read_dir(&work)
        .expect("work")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert!(left.is_empty(), "the mount cleared the work dir: {left:?}");
}

/// The persistent layers of the overlay slot whose name starts with `slot` in `w`'s one sandbox.
fn overlay_dir(w: &World, slot: &str) -> std::path::PathBuf {
    let sandboxes: Vec<_> = fs::read_dir(w.sandboxes())
        .expect("sandboxes")
        .map(|e| e.expect("entry").path())
        .collect();
    assert_eq!(sandboxes.len(), 1, "{sandboxes:?}");
    fs::read_dir(sandboxes[0].join("overlay"))
        .expect("overlay dir")
        .map(|e| e.expect("entry").path())
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(slot))
        })
        .unwrap_or_else(|| panic!("no overlay slot {slot} in {}", sandboxes[0].display()))
}

#[test]
fn tmpoverlay_writes_are_gone_after_the_run() {
    if !available() {
        return;
    }
    let w = World::new(MODES);
    let o = w.sh("echo 'model = \"sandbox\"' > ~/.codex/config.toml && cat ~/.codex/config.toml");
    assert_eq!(stdout(&o), "model = \"sandbox\"\n", "{}", text(&o));
    let o = w.sh("cat ~/.codex/config.toml");
    assert_eq!(stdout(&o), "model = \"host\"\n", "{}", text(&o));
    assert_eq!(
        fs::read_to_string(w.home.join(".codex/config.toml")).expect("host"),
        "model = \"host\"\n"
    );
}

#[test]
fn codex_temp_dir_starts_empty_and_its_dirs_can_be_renamed() {
    if !available() {
        return;
    }
    let w = World::new(MODES);
    // A host run's leftover: in an overlay, renaming it would fail with EXDEV.
    write(&w.home.join(".codex/tmp/arg0/codex-arg0old/.lock"), "");
    let o = w.sh(
        "ls -A ~/.codex/tmp; echo listed; mkdir -p ~/.codex/tmp/arg0/codex-arg0new && \
         mv ~/.codex/tmp/arg0/codex-arg0new ~/.codex/tmp/arg0/gone && echo renamed",
    );
    assert_eq!(stdout(&o), "listed\nrenamed\n", "{}", text(&o));
    assert!(w.home.join(".codex/tmp/arg0/codex-arg0old/.lock").exists());
    assert!(
        !w.home.join(".codex/tmp/arg0/gone").exists(),
        "nothing reached the host"
    );
}

#[test]
fn readonly_tool_dirs_refuse_writes() {
    if !available() {
        return;
    }
    let w = World::new(MODES);
    let o = w.sh("cat ~/.config/nvim/init.lua; echo x >> ~/.config/nvim/init.lua; echo rc=$?");
    let out = stdout(&o);
    assert!(out.starts_with("-- host config\n"), "{}", text(&o));
    assert!(out.contains("rc=1") || out.contains("rc=2"), "{}", text(&o));
    assert_eq!(
        fs::read_to_string(w.home.join(".config/nvim/init.lua")).expect("host"),
        "-- host config\n"
    );
}

#[test]
fn zsh_prompt_gets_the_sandbox_marker_after_the_users_zshrc() {
    if !available() {
        return;
    }
    if !Path::new("/usr/bin/zsh").exists() {
        eprintln!("skipped: zsh is not installed (apt-get install zsh)");
        return;
    }
    let w = World::new("");
    fs::create_dir_all(w.home.join(".oh-my-zsh")).expect("oh-my-zsh dir");
    write(&w.home.join(".zshrc"), "PROMPT='host> '\n");
    let o = w.airlock_with(
        &[
            "run",
            "--network",
            "none",
            "--",
            "zsh",
            "-i",
            "-c",
            "print -r -- \"$PROMPT\"",
        ],
        "/usr/bin/zsh",
    );
    assert_eq!(stdout(&o), "%F{red}[sandbox]%f host> \n", "{}", text(&o));
    assert_eq!(
        fs::read_to_string(w.home.join(".zshrc")).expect("host zshrc"),
        "PROMPT='host> '\n",
        "the user's file is untouched"
    );
}

/// Without a prompt theme, each shell still shows it is in a sandbox: a plain `[sandbox]` before
/// the user's own prompt, after their startup file set it. Control: a theme's marker is not doubled
/// (oh-my-zsh's, in the test above) and the host's files are untouched.
#[test]
fn a_plain_prompt_gets_a_sandbox_marker_in_bash_zsh_and_fish() {
    if !available() {
        return;
    }
    let w = World::new("");
    write(&w.home.join(".bashrc"), "PS1='host$ '\n");
    write(&w.home.join(".zshrc"), "PROMPT='host> '\n");
    write(
        &w.home.join(".config/fish/config.fish"),
        "function fish_prompt; printf 'host> '; end\n",
    );
    // bash: what airlock starts for `airlock run` (its rc file), interactive as on a terminal.
    let bash = w.airlock_with(
        &[
            "run",
            "--network",
            "none",
            "--",
            "bash",
            "--rcfile",
            "/run/airlock/shell/bashrc",
            "-i",
            "-c",
            "printf '%s\\n' \"$PS1\"",
        ],
        "/bin/bash",
    );
    let shown = stdout(&bash);
    assert!(
        shown.contains("[sandbox]") && shown.trim_end().ends_with("host$"),
        "{}",
        text(&bash)
    );
    for (shell, path, argv, expected) in [
        (
            "zsh",
            "/usr/bin/zsh",
            vec!["zsh", "-i", "-c", "print -r -- \"$PROMPT\""],
            "%F{red}[sandbox]%f host> \n",
        ),
        (
            "fish",
            "/usr/bin/fish",
            vec!["fish", "-i", "-c", "fish_mode_prompt; fish_prompt"],
            "[sandbox] host> ",
        ),
    ] {
        if !Path::new(path).exists() {
            eprintln!("skipped: {shell} is not installed (apt-get install {shell})");
            continue;
        }
        let mut args = vec!["run", "--network", "none", "--"];
        args.extend(argv);
        let o = w.airlock_with(&args, path);
        // fish colours the marker; compare the text.
        let plain: String = strip_escapes(&stdout(&o));
        assert!(
            plain.ends_with(expected),
            "{shell}: {plain:?}\n{}",
            text(&o)
        );
        assert_eq!(plain.matches("sandbox").count(), 1, "{shell}: {plain:?}");
    }
    assert_eq!(
        fs::read_to_string(w.home.join(".zshrc")).unwrap(),
        "PROMPT='host> '\n"
    );
}

/// `text` without ANSI escape sequences (ESC, `[`, parameters, a final letter; ESC `(B`).
fn strip_escapes(text: &str) -> String {
    let mut out = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\u{1b}' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('[') => {
                for c in chars.by_ref() {
                    if c.is_ascii_alphabetic() {
                        break;
                    }
                }
            }
            Some('(') => {
                chars.next();
            }
            _ => {}
        }
    }
    out
}
