//! Tool mount modes and the git tool, end to end: the real binary, a real sandbox, a temp HOME whose
//! tool directories the catalog detects, and checks made on the host afterwards.

mod common;

use std::fs;
use std::ops::Deref;
use std::path::Path;
use std::process::{Command, Output};

use common::{TestHome, report as text, stderr as stderr_text, stdout, write};

/// A HOME with claude, codex and nvim directories, a git identity split over an includeIf file,
/// and a git project at ~/code/app.
struct World(TestHome);

impl Deref for World {
    type Target = TestHome;
    fn deref(&self) -> &TestHome {
        &self.0
    }
}

impl World {
    fn new(config: &str) -> World {
        let w = World(TestHome::new("home/code/app"));
        let home = &w.home;
        write(&home.join(".claude/settings.json"), "{\"host\": true}\n");
        write(&home.join(".codex/config.toml"), "model = \"host\"\n");
        write(&home.join(".config/nvim/init.lua"), "-- host config\n");
        write(
            &home.join(".gitconfig"),
            "[user]\n\tname = Host Dev\n[includeIf \"gitdir:~/code/\"]\n\tpath = ~/.gitconfig-work\n",
        );
        write(
            &home.join(".gitconfig-work"),
            "[user]\n\temail = dev@work.example\n",
        );
        w.config(config);
        w.host_git(&["init", "-q", "-b", "main"]);
        write(&w.project.join("README"), "hello\n");
        w.host_git(&["add", "README"]);
        w.host_git(&["commit", "-q", "-m", "first"]);
        w
    }

    fn host_git(&self, args: &[&str]) -> Output {
        self.host_git_in(&self.project, args)
    }

    /// The host's git in `dir`, with this world's HOME; asserts success.
    fn host_git_in(&self, dir: &Path, args: &[&str]) -> Output {
        let out = Command::new("git")
            .args(args)
            .current_dir(dir)
            .env("HOME", &self.home)
            .env_remove("XDG_CONFIG_HOME")
            .env_remove("GIT_CONFIG_GLOBAL")
            .output()
            .expect("host git");
        assert!(out.status.success(), "git {args:?}: {}", text(&out));
        out
    }

    /// airlock with `args` and the environment every case here uses.
    fn airlock_with(&self, args: &[&str], shell: &str) -> Output {
        self.airlock_in(&self.project, args, shell)
    }

    /// The same, started in `dir` (the project, when it is not a subdirectory of another).
    fn airlock_in(&self, dir: &Path, args: &[&str], shell: &str) -> Output {
        self.airlock(args)
            .current_dir(dir)
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("SHELL", shell)
            .output()
            .expect("spawn airlock")
    }

    fn sh(&self, script: &str) -> Output {
        self.sh_in(&self.project, script)
    }

    /// `sh -c script` in a sandbox whose project is `dir`.
    fn sh_in(&self, dir: &Path, script: &str) -> Output {
        self.airlock_in(
            dir,
            &["run", "--network", "none", "--", "sh", "-c", script],
            "/bin/sh",
        )
    }
}

/// Whether the sandbox (with overlayfs) and git are usable here; says why when not.
fn available() -> bool {
    if Command::new("git").arg("--version").output().is_err() {
        eprintln!("skipped: git is not installed");
        return false;
    }
    let w = World::new("");
    let o = w.sh("true");
    if !o.status.success() {
        eprintln!(
            "skipped: the native sandbox cannot start here: {}",
            text(&o)
        );
        return false;
    }
    true
}

const MODES: &str = "[tools.claude]\nmount_mode = \"overlay\"\n\n[tools.codex]\nmount_mode = \"tmpoverlay\"\n\n\
                     [tools.nvim]\nmount_mode = \"readonly\"\n";

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
    let w = World::new(MODES);
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
fn git_readonly_mode_refuses_commits_and_keeps_the_host_identity() {
    if !available() {
        return;
    }
    let w = World::new("");
    let o = w.sh(
        "git config user.name; git config user.email; git log --oneline | wc -l; \
         echo change >> README; git commit -qam second 2>/dev/null; echo commit=$?",
    );
    let out = stdout(&o);
    assert!(
        out.starts_with("Host Dev\ndev@work.example\n1\n"),
        "identity through includeIf: {}",
        text(&o)
    );
    assert!(
        out.contains("commit=") && !out.contains("commit=0"),
        "{}",
        text(&o)
    );
    let log = w.host_git(&["log", "--oneline"]);
    assert_eq!(String::from_utf8_lossy(&log.stdout).lines().count(), 1);
}

#[test]
fn a_failed_write_in_readonly_mode_says_once_which_key_allows_commits() {
    if !available() {
        return;
    }
    let w = World::new("");
    let o = w.sh(
        "echo change >> README; git commit -qam second; echo commit=$?; \
         git -C . commit -qam third; echo again=$?; git status --short; echo status=$?; \
         git config --get no.such.key; echo config=$?; \
         cd /tmp && git init -q elsewhere && cd elsewhere && git commit -q --allow-empty -m x; \
         echo elsewhere=$?",
    );
    let (out, err) = (stdout(&o), String::from_utf8_lossy(&o.stderr).into_owned());
    for want in [
        "commit=128",
        "again=128",
        "status=0",
        "config=1",
        "elsewhere=0",
    ] {
        assert!(out.contains(want), "{want}: {}", text(&o));
    }
    assert!(
        err.contains("Read-only file system"),
        "git's own error: {err}"
    );
    assert_eq!(
        err.matches("[tools.git] mode = \"readwrite\"").count(),
        1,
        "the hint, once per session: {err}"
    );
    // A later session says it again (its /tmp is new).
    let o = w.sh("git commit -qam fourth; true");
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("[tools.git] mode"),
        "{}",
        text(&o)
    );
}

#[test]
fn git_readwrite_commits_come_back_as_airlock_branches() {
    if !available() {
        return;
    }
    let w = World::new("[tools.git]\nmode = \"readwrite\"\n");
    let o = w.sh("echo change >> README && git commit -qam second && echo ok");
    assert_eq!(stdout(&o), "ok\n", "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("airlock/main (new"),
        "{}",
        text(&o)
    );
    let log = |rev: &str| {
        let out = w.host_git(&["log", "-1", "--format=%an <%ae> %s", rev]);
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert_eq!(log("airlock/main"), "Host Dev <dev@work.example> second\n");
    // main was the host's checked-out branch with nothing staged: it is fast-forwarded, and
    // its index follows, so the host sees a clean tree.
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("main fast-forwarded"),
        "{}",
        text(&o)
    );
    assert_eq!(log("main"), "Host Dev <dev@work.example> second\n");
    let status = w.host_git(&["status", "--porcelain"]);
    assert_eq!(String::from_utf8_lossy(&status.stdout), "");
    // The layer is cleared: the next session starts from the host repository as it is now.
    let o = w.sh("git log -1 --format=%s && git status --porcelain | wc -l");
    assert_eq!(stdout(&o), "second\n0\n", "{}", text(&o));
    assert!(
        !String::from_utf8_lossy(&o.stderr).contains("commits from"),
        "{}",
        text(&o)
    );
}

#[test]
fn hooks_cannot_be_planted_in_any_mode() {
    if !available() {
        return;
    }
    for mode in ["readonly", "readwrite", "disabled"] {
        let w = World::new(&format!("[tools.git]\nmode = \"{mode}\"\n"));
        let o =
            w.sh("printf '#!/bin/sh\\ntouch /tmp/pwned\\n' > .git/hooks/pre-commit; echo rc=$?");
        // readonly refuses the write; the layer takes it and keeps it in the sandbox.
        let refused = !stdout(&o).contains("rc=0");
        assert_eq!(refused, mode == "readonly", "{mode}: {}", text(&o));
        assert!(
            !w.project.join(".git/hooks/pre-commit").exists(),
            "{mode}: hook on the host"
        );
    }
}

#[test]
fn a_git_file_cannot_be_rewritten_or_moved_away() {
    if !available() {
        return;
    }
    // A project whose `.git` is a file naming its git dir (as in a worktree or a submodule).
    let w = World::new("[tools.git]\nmode = \"readwrite\"\n");
    let real = w.project.with_extension("git");
    fs::rename(w.project.join(".git"), &real).expect("move the git dir");
    let pointer = format!("gitdir: {}\n", real.display());
    write(&w.project.join(".git"), &pointer);
    let o = w.sh(
        "printf 'gitdir: /tmp/evil\\n' > .git; echo rc=$?; mv .git moved; echo rc=$?; \
         rm -f .git; echo rc=$?",
    );
    assert!(!stdout(&o).contains("rc=0"), "{}", text(&o));
    assert_eq!(
        fs::read_to_string(w.project.join(".git")).expect(".git"),
        pointer
    );
}

#[test]
fn a_submodule_gets_its_git_dir() {
    if !available() {
        return;
    }
    let w = World::new("[tools.git]\nmode = \"readwrite\"\n");
    let upstream = w.project.with_file_name("upstream");
    fs::create_dir_all(&upstream).expect("dir");
    w.host_git_in(&upstream, &["init", "-q"]);
    w.host_git_in(
        &upstream,
        &[
            "-c",
            "user.name=T",
            "-c",
            "user.email=t@example.com",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "upstream",
        ],
    );
    let url = upstream.to_str().unwrap();
    w.host_git_in(
        &w.project,
        &[
            "-c",
            "protocol.file.allow=always",
            "submodule",
            "add",
            "-q",
            url,
            "sub",
        ],
    );
    let o = w.sh_in(
        &w.project.join("sub"),
        "git log -1 --format=%s && git status --porcelain | wc -l",
    );
    assert_eq!(stdout(&o), "upstream\n0\n", "{}", text(&o));
}

#[test]
fn a_linked_worktree_gets_its_repository_in_the_layer() {
    if !available() {
        return;
    }
    let w = World::new("[tools.git]\nmode = \"readwrite\"\n");
    let wt = w.project.with_file_name("app-feature");
    w.host_git(&[
        "worktree",
        "add",
        "-q",
        "-b",
        "feature",
        wt.to_str().unwrap(),
    ]);
    let o = w.sh_in(
        &wt,
        "echo change >> README && git commit -q -am inside && git log -1 --format=%s; \
         printf '#!/bin/sh\\n' > \"$(git rev-parse --git-common-dir)/hooks/pre-commit\"; echo rc=$?; \
         git config core.fsmonitor 'touch /tmp/pwned'",
    );
    let out = stdout(&o);
    assert!(
        out.starts_with("inside\n"),
        "commits from the worktree: {}",
        text(&o)
    );
    assert!(out.contains("rc=0"), "the layer takes writes: {}", text(&o));
    assert!(!w.project.join(".git/hooks/pre-commit").exists());
    let config = w.host_git(&["config", "--local", "--list"]);
    assert!(!String::from_utf8_lossy(&config.stdout).contains("fsmonitor"));
    // The commit comes back to the main repository as airlock/<the worktree's branch>.
    let log = w.host_git(&["log", "-1", "--format=%s", "airlock/feature"]);
    assert_eq!(String::from_utf8_lossy(&log.stdout), "inside\n");
    // It was the worktree's checked-out branch: fast-forwarded there.
    let log = w.host_git(&["log", "-1", "--format=%s", "feature"]);
    assert_eq!(String::from_utf8_lossy(&log.stdout), "inside\n");

    // A `.git` file pointing at a repository that does not point back is not followed.
    let other = World::new("");
    let stranger = w.project.with_file_name("stranger");
    fs::create_dir_all(&stranger).expect("dir");
    write(
        &stranger.join(".git"),
        &format!("gitdir: {}\n", other.project.join(".git").display()),
    );
    let target = other.project.join(".git");
    let o = w.sh_in(
        &stranger,
        &format!("ls -d '{}'; echo rc=$?", target.display()),
    );
    assert!(!stdout(&o).contains("rc=0"), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("no repository is mounted"),
        "{}",
        text(&o)
    );
}

#[test]
fn git_config_written_inside_never_reaches_the_host() {
    if !available() {
        return;
    }
    for mode in ["readwrite", "disabled"] {
        let w = World::new(&format!("[tools.git]\nmode = \"{mode}\"\n"));
        let before = fs::read(w.project.join(".git/config")).expect("config");
        let o = w.sh(
            "git config alias.x '!touch /tmp/pwned' && git config core.fsmonitor 'touch /tmp/pwned' \
             && git config --get core.fsmonitor && echo ../evil > .git/commondir",
        );
        assert_eq!(stdout(&o), "touch /tmp/pwned\n", "{mode}: {}", text(&o));
        assert_eq!(
            fs::read(w.project.join(".git/config")).expect("config"),
            before,
            "{mode}"
        );
        assert!(!w.project.join(".git/commondir").exists(), "{mode}");
    }
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

/// The layer is sandbox-written: bringing commits back reads only regular object files and
/// checked refs from it, so planted links (to a host file, in `objects/` and `refs/heads`) carry
/// nothing of the host into the repository, and the real commit still comes back.
#[test]
fn links_planted_in_the_git_layer_are_not_followed_when_commits_come_back() {
    if !available() {
        return;
    }
    let w = World::new("[tools.git]\nmode = \"readwrite\"\n");
    let secret = w.root.join("host-secret");
    write(&secret, "HOST-SECRET-BYTES\n");
    let o = w.sh(&format!(
        "git commit -q --allow-empty -m inside && mkdir -p .git/objects/pack .git/refs/heads/x && \
         ln -s {s} .git/objects/pack/pack-{z}.pack && ln -s {s} .git/objects/pack/pack-{z}.idx && \
         ln -s {s} .git/refs/heads/x/linked && echo ok",
        s = secret.display(),
        z = "0".repeat(40)
    ));
    // Control: `ok` is printed only when every link was planted in the layer.
    assert_eq!(stdout(&o), "ok\n", "{}", text(&o));
    let log = w.host_git(&["log", "-1", "--format=%s", "airlock/main"]);
    assert_eq!(
        String::from_utf8_lossy(&log.stdout),
        "inside\n",
        "{}",
        text(&o)
    );
    let refs = w.host_git(&["for-each-ref", "--format=%(refname)"]);
    assert!(
        !String::from_utf8_lossy(&refs.stdout).contains("linked"),
        "{}",
        String::from_utf8_lossy(&refs.stdout)
    );
    let packs = fs::read_dir(w.project.join(".git/objects/pack"))
        .map(|d| d.flatten().any(|e| e.path().is_symlink()))
        .unwrap_or(false);
    assert!(!packs, "no link reached the host's objects");
    let grep = Command::new("grep")
        .args(["-rl", "HOST-SECRET-BYTES"])
        .arg(w.project.join(".git"))
        .output()
        .expect("grep");
    assert!(
        grep.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&grep.stdout)
    );
}
