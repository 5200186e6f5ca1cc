//! Agent wrappers and `run-agent`, the way a developer meets them: the activation line in a real
//! shell's startup file, the shell interactive in tmux, a command typed into it. A fake agent under
//! the home records its arguments and whether it ran inside a sandbox (`$AIRLOCK`).

mod common;

use std::fs;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::tmux::Tmux;
use common::{AIRLOCK, TestHome, report, sandbox_starts, stdout, write};

struct World {
    h: TestHome,
    /// Where the fake agent appends `<$AIRLOCK or unset>|<its arguments>`.
    record: PathBuf,
    /// PATH for the shells: airlock (by a link, as an install would put it), the agent, the system.
    path: String,
}

impl World {
    fn new() -> World {
        let h = TestHome::new("home/code/app");
        let record = h.project.join("agent-calls.txt");
        let agent = h.home.join(".local/bin/claude");
        write(
            &agent,
            &format!(
                "#!/bin/sh\nprintf '%s|%s\\n' \"${{AIRLOCK:-unset}}\" \"$*\" >> {}\n",
                record.display()
            ),
        );
        fs::set_permissions(&agent, fs::Permissions::from_mode(0o755)).expect("chmod");
        let bin = h.root.join("airlock-bin");
        fs::create_dir_all(&bin).expect("bin");
        symlink(AIRLOCK, bin.join("airlock")).expect("airlock link");
        let path = format!(
            "{}:{}:/usr/bin:/bin",
            bin.display(),
            h.home.join(".local/bin").display()
        );
        World { h, record, path }
    }

    fn calls(&self) -> Vec<String> {
        fs::read_to_string(&self.record)
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    fn wait_for_calls(&self, n: usize) -> Vec<String> {
        let end = Instant::now() + Duration::from_secs(20);
        loop {
            let calls = self.calls();
            if calls.len() >= n || Instant::now() > end {
                return calls;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// `airlock agent-wrappers activate <shell>` with this world's PATH.
    fn snippet(&self, shell: &str) -> String {
        let out = self
            .h
            .airlock(&["agent-wrappers", "activate", shell])
            .env("PATH", &self.path)
            .output()
            .expect("airlock");
        assert!(out.status.success(), "{}", report(&out));
        stdout(&out)
    }
}

fn have(program: &str) -> bool {
    ["/usr/bin", "/bin"]
        .iter()
        .any(|d| Path::new(d).join(program).exists())
}

#[test]
fn every_shells_snippet_parses() {
    let w = World::new();
    for (shell, check) in [("bash", "bash"), ("zsh", "zsh"), ("fish", "fish")] {
        if !have(check) {
            eprintln!("skipped {shell}: not installed (scripts/test installs it)");
            continue;
        }
        let snippet = w.snippet(shell);
        assert!(snippet.contains("run-agent claude"), "{snippet}");
        assert!(
            !snippet.contains("codex"),
            "only installed agents: {snippet}"
        );
        let file = w.h.root.join(format!("snippet.{shell}"));
        fs::write(&file, &snippet).expect("snippet");
        let parsed = Command::new(check)
            .arg("-n")
            .arg(&file)
            .output()
            .expect(check);
        assert!(parsed.status.success(), "{shell} -n: {}", report(&parsed));
    }
    // No agent installed: a comment, still valid shell.
    let out =
        w.h.airlock(&["agent-wrappers", "activate", "bash"])
            .env("PATH", "/usr/bin:/bin")
            .output()
            .expect("airlock");
    assert!(
        stdout(&out).lines().all(|l| l.starts_with('#')),
        "{}",
        report(&out)
    );
    let out =
        w.h.airlock(&["agent-wrappers", "activate", "tcsh"])
            .output()
            .expect("airlock");
    assert_eq!(out.status.code(), Some(125), "{}", report(&out));
    assert!(
        common::stderr(&out).contains("bash, zsh, fish"),
        "{}",
        report(&out)
    );
}

/// In a real interactive `shell` driven through tmux, with the activation line in its startup file:
/// `claude --resume X` reaches the agent inside a sandbox; `claude-no-airlock` runs it on the host.
fn typed_in_a_wrapped_shell(shell: &str) {
    if !have("tmux") || !have(shell) {
        eprintln!("skipped {shell}: tmux or {shell} is not installed (scripts/test installs them)");
        return;
    }
    if !sandbox_starts() {
        return;
    }
    let w = World::new();
    let line = match shell {
        "fish" => {
            "if not set -q AIRLOCK; and command -q airlock; airlock agent-wrappers activate fish | source; end"
        }
        _ => &format!(
            "if [ -z \"${{AIRLOCK:-}}\" ] && command -v airlock >/dev/null 2>&1; then eval \"$(airlock agent-wrappers activate {shell})\"; fi"
        ),
    };
    let home = w.h.home.clone();
    let (rc, argv): (PathBuf, Vec<&str>) = match shell {
        "bash" => (
            home.join(".bashrc"),
            vec!["bash", "--noprofile", "--rcfile"],
        ),
        "zsh" => (home.join(".zshrc"), vec!["zsh", "-i"]),
        _ => (home.join(".config/fish/config.fish"), vec!["fish", "-i"]),
    };
    write(&rc, &format!("{line}\n"));
    let mut argv: Vec<String> = argv.into_iter().map(str::to_owned).collect();
    if shell == "bash" {
        argv.push(rc.to_string_lossy().into_owned());
        argv.push("-i".into());
    }
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    let env = [
        ("HOME", home.to_string_lossy().into_owned()),
        ("PATH", w.path.clone()),
        ("SHELL", format!("/usr/bin/{shell}")),
        ("TERM", "xterm".into()),
    ];
    let tmux = Tmux::start(w.h.root.join("tmux.sock"), &w.h.project, &env, &argv);
    tmux.type_line("claude --resume X");
    let calls = w.wait_for_calls(1);
    assert_eq!(
        calls,
        ["1|--resume X"],
        "{shell}: through airlock, arguments untouched; screen:\n{}",
        tmux.screen()
    );
    tmux.type_line("claude-no-airlock --version");
    let calls = w.wait_for_calls(2);
    assert_eq!(
        calls.get(1).map(String::as_str),
        Some("unset|--version"),
        "{shell}: the escape hatch; screen:\n{}",
        tmux.screen()
    );
}

#[test]
fn bash_wrapper_typed_in_tmux_runs_the_agent_sandboxed() {
    typed_in_a_wrapped_shell("bash");
}

#[test]
fn zsh_wrapper_typed_in_tmux_runs_the_agent_sandboxed() {
    typed_in_a_wrapped_shell("zsh");
}

#[test]
fn fish_wrapper_typed_in_tmux_runs_the_agent_sandboxed() {
    typed_in_a_wrapped_shell("fish");
}

#[test]
fn a_wrapper_whose_airlock_is_gone_fails_closed() {
    if !have("bash") {
        return;
    }
    let w = World::new();
    // An airlock that then disappears (an upgrade moved it).
    let moved = w.h.root.join("old/airlock");
    fs::create_dir_all(moved.parent().unwrap()).unwrap();
    fs::copy(AIRLOCK, &moved).expect("copy airlock");
    // Another test thread's fork may still hold the copy open for writing (ETXTBSY) until it
    // execs: try again for a moment.
    let run = || {
        Command::new(&moved)
            .args(["agent-wrappers", "activate", "bash"])
            .env("PATH", &w.path)
            .output()
    };
    let mut tries = 0;
    let out = loop {
        match run() {
            Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy && tries < 100 => {
                tries += 1;
                std::thread::sleep(Duration::from_millis(10));
            }
            result => break result.expect("old airlock"),
        }
    };
    fs::remove_file(&moved).unwrap();
    let script = format!("{}\nclaude --resume X\necho rc=$?\n", stdout(&out));
    let out = Command::new("bash")
        .arg("-c")
        .arg(&script)
        .env("PATH", &w.path)
        .output()
        .expect("bash");
    assert!(stdout(&out).ends_with("rc=127\n"), "{}", report(&out));
    assert!(
        common::stderr(&out).contains(&format!("airlock: no executable at {} - reinstall airlock, then start a new shell to refresh the wrappers", moved.display())),
        "{}",
        report(&out)
    );
    assert!(
        w.calls().is_empty(),
        "nothing else was run: {:?}",
        w.calls()
    );
}

#[test]
fn inside_a_sandbox_nothing_is_wrapped_and_run_agent_runs_the_agent_itself() {
    if !sandbox_starts() || !have("bash") {
        return;
    }
    let w = World::new();
    let snippet = w.snippet("bash");
    let script =
        format!("{snippet}\ntype -t claude; /run/airlock/airlock run-agent claude inner --flag\n");
    let out =
        w.h.airlock(&["run", "--network", "none", "--", "bash", "-c", &script])
            .env("PATH", &w.path)
            .output()
            .expect("airlock");
    assert_eq!(
        stdout(&out),
        "file\n",
        "no function inside: {}",
        report(&out)
    );
    assert_eq!(w.calls(), ["1|inner --flag"], "{}", report(&out));
    // An unknown agent is refused, naming the known ones.
    let out =
        w.h.airlock(&["run-agent", "vim"])
            .output()
            .expect("airlock");
    assert_eq!(out.status.code(), Some(125));
    assert!(
        common::stderr(&out).contains("claude, codex, pi"),
        "{}",
        report(&out)
    );
}

#[test]
fn a_resume_in_a_herdr_pane_reaches_only_the_sandbox_its_session_lives_in() {
    if !sandbox_starts() {
        return;
    }
    let w = World::new();
    let herdr = |cmd: &mut Command, pane: &str| {
        cmd.env("PATH", &w.path)
            .env("HERDR_ENV", "1")
            .env("HERDR_PANE_ID", pane);
    };
    // A direct launch in pane w1:p7 records the pane (no herdr socket here: the filter is off).
    let mut launch =
        w.h.airlock(&["run", "--network", "none", "--", "claude", "first"]);
    herdr(&mut launch, "w1:p7");
    let out = launch.output().expect("airlock");
    assert!(out.status.success(), "{}", report(&out));
    let records = w.h.home.join(".local/state/airlock/herdr-panes");
    let files: Vec<PathBuf> = fs::read_dir(&records)
        .expect("the pane records")
        .flatten()
        .map(|e| e.path())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let name = files[0].file_name().unwrap().to_string_lossy().into_owned();
    assert!(
        !name.contains("p7") && !name.contains("w1"),
        "the pane id is hashed: {name}"
    );
    assert_eq!(
        fs::metadata(&files[0]).unwrap().permissions().mode() & 0o777,
        0o600
    );
    // herdr types the resume from another directory: refused, naming where to go.
    let elsewhere = w.h.root.join("elsewhere");
    fs::create_dir_all(&elsewhere).unwrap();
    let mut resume = w.h.airlock(&["run-agent", "claude", "--resume", "abc"]);
    resume.current_dir(&elsewhere);
    herdr(&mut resume, "w1:p7");
    let out = resume.output().expect("airlock");
    assert_eq!(out.status.code(), Some(125), "{}", report(&out));
    assert!(
        common::stderr(&out).contains(&format!("`cd {}`", w.h.project.display())),
        "{}",
        report(&out)
    );
    // From the project it enters; another pane (no record) enters from anywhere.
    let mut resume = w.h.airlock(&["run-agent", "claude", "--resume", "abc"]);
    herdr(&mut resume, "w1:p7");
    assert!(resume.output().expect("airlock").status.success());
    let mut other = w.h.airlock(&["run-agent", "claude", "-c"]);
    other.current_dir(&elsewhere);
    herdr(&mut other, "w1:p8");
    let out = other.output().expect("airlock");
    // It entered a sandbox of `elsewhere` (where the fake cannot reach its record file).
    assert!(
        common::stderr(&out).contains("agent-calls.txt") && !common::stderr(&out).contains("`cd "),
        "{}",
        report(&out)
    );
    assert_eq!(w.calls(), ["1|first", "1|--resume abc"], "{}", report(&out));
    // A --worktree session is refused from the project too, naming the invocation.
    let mut launch = w.h.airlock(&[
        "run",
        "--network",
        "none",
        "--",
        "claude",
        "--worktree",
        "feat",
    ]);
    herdr(&mut launch, "w1:p7");
    assert!(launch.output().expect("airlock").status.success());
    let mut resume = w.h.airlock(&["run-agent", "claude", "--resume", "abc"]);
    herdr(&mut resume, "w1:p7");
    let out = resume.output().expect("airlock");
    assert_eq!(out.status.code(), Some(125), "{}", report(&out));
    assert!(
        common::stderr(&out).contains("airlock claude --worktree feat"),
        "{}",
        report(&out)
    );
    // An unreadable record fails closed.
    fs::write(&files[0], "{broken").unwrap();
    let mut resume = w.h.airlock(&["run-agent", "claude", "-c"]);
    herdr(&mut resume, "w1:p7");
    let out = resume.output().expect("airlock");
    assert_eq!(out.status.code(), Some(125), "{}", report(&out));
}
