//! One test's world: a temp HOME with XDG dirs, a plugin root with the real manifest and the real
//! airlock binary, a `bin/` with the fakes, their state files, and helpers to run actions.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

#[path = "../common/users.rs"]
mod users;
pub use users::other_user;

pub type Outcome = Result<(), String>;

/// Fails the case with a message unless `cond`.
#[macro_export]
macro_rules! check {
    ($cond:expr, $($msg:tt)+) => {
        if !$cond {
            return Err(format!("{} (at line {})", format!($($msg)+), line!()));
        }
    };
}

pub struct World {
    _tmp: tempfile::TempDir,
    pub root: PathBuf,
    pub home: PathBuf,
    pub plugin_root: PathBuf,
    pub config_dir: PathBuf,
    pub state_dir: PathBuf,
    pub env: Vec<(String, String)>,
    /// Every command runs as this uid:gid ([`World::hand_to`]); `None`: as the test's own user.
    user: Option<(u32, u32)>,
}

/// A finished action: exit code, parsed result line, raw output.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub result: Value,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn ok(&self) -> bool {
        self.result["ok"] == true
    }

    pub fn kind(&self) -> &str {
        self.result["errorKind"].as_str().unwrap_or("")
    }

    /// Refused as a conflict whose message mentions `why`.
    pub fn refused_as_conflict(&self, why: &str) -> bool {
        !self.ok()
            && self.kind() == "conflict"
            && self.result["message"]
                .as_str()
                .is_some_and(|m| m.contains(why))
    }

    /// A string field of the result line (`paneId`, `sandboxName`, ...); empty when absent.
    pub fn text(&self, key: &str) -> String {
        self.result[key].as_str().unwrap_or_default().to_owned()
    }

    /// An error string describing this run, for failed checks.
    pub fn show(&self) -> String {
        format!(
            "exit {}, result {}, stderr {}",
            self.code,
            self.result,
            self.stderr.trim()
        )
    }
}

impl Drop for World {
    /// Stops what the fake herdr started detached (panes, popups, action logs) and is still
    /// running, and waits (up to 5 s) for it to end: a pane's process writing its state after
    /// the world's directory is removed would leave that directory behind in the machine's /tmp.
    /// Only a process group whose leader's environment names this world is signalled (a pid
    /// reused by another program never is).
    fn drop(&mut self) {
        let herdr = self.root.join("herdr");
        let Ok(pids) = std::fs::read_to_string(herdr.join("detached.pids")) else {
            return;
        };
        let ours = format!("FAKE_HERDR_DIR={}\0", herdr.display());
        let running: Vec<i32> = pids
            .lines()
            .filter_map(|l| l.trim().parse::<i32>().ok())
            .filter(|pid| {
                std::fs::read(format!("/proc/{pid}/environ"))
                    .is_ok_and(|env| env.windows(ours.len()).any(|w| w == ours.as_bytes()))
            })
            .collect();
        for pid in &running {
            // SAFETY: kill(2) with a negative pid signals that process group; no memory is shared.
            unsafe { libc::kill(-pid, libc::SIGKILL) };
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while running
            .iter()
            .any(|pid| Path::new(&format!("/proc/{pid}")).exists())
            && Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl World {
    pub fn new() -> World {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path().to_owned();
        let home = root.join("home");
        let bin = root.join("bin");
        let plugin_root = root.join("plugin");
        for d in [
            &home,
            &bin,
            &plugin_root.join("bin"),
            &root.join("herdr"),
            &root.join("sbx-root"),
        ] {
            std::fs::create_dir_all(d).expect("mkdir");
        }
        let exe = std::env::current_exe().expect("test exe");
        std::os::unix::fs::symlink(&exe, bin.join("herdr")).expect("symlink herdr");
        std::os::unix::fs::symlink(&exe, bin.join("sbx")).expect("symlink sbx");
        let manifest =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../herdr-plugin/herdr-plugin.toml");
        std::fs::copy(&manifest, plugin_root.join("herdr-plugin.toml")).expect("manifest copies");
        std::os::unix::fs::symlink(
            env!("CARGO_BIN_EXE_airlock"),
            plugin_root.join("bin/airlock"),
        )
        .expect("symlink airlock");
        let config_dir = root.join("config/herdr/plugins/config/airlock.sandbox");
        std::fs::create_dir_all(&config_dir).expect("mkdir");
        let state_dir = root.join("state/airlock/herdr");
        let s = |p: &Path| p.display().to_string();
        let env = vec![
            ("HOME".into(), s(&home)),
            ("XDG_CONFIG_HOME".into(), s(&root.join("config"))),
            ("XDG_STATE_HOME".into(), s(&root.join("state"))),
            (
                "PATH".into(),
                format!("{}:/usr/local/bin:/usr/bin:/bin", s(&bin)),
            ),
            ("HERDR_BIN_PATH".into(), s(&bin.join("herdr"))),
            ("HERDR_PLUGIN_ID".into(), "airlock.sandbox".into()),
            ("HERDR_PLUGIN_ROOT".into(), s(&plugin_root)),
            ("HERDR_PLUGIN_CONFIG_DIR".into(), s(&config_dir)),
            (
                "HERDR_PLUGIN_STATE_DIR".into(),
                s(&root.join("herdr-plugin-state")),
            ),
            ("FAKE_HERDR_STATE".into(), s(&root.join("herdr/state.json"))),
            ("FAKE_HERDR_LOG".into(), s(&root.join("herdr/argv.jsonl"))),
            ("FAKE_HERDR_DIR".into(), s(&root.join("herdr"))),
            ("FAKE_SBX_STATE".into(), s(&root.join("sbx-state.json"))),
            ("FAKE_SBX_LOG".into(), s(&root.join("sbx-argv.jsonl"))),
            ("FAKE_SBX_ROOT".into(), s(&root.join("sbx-root"))),
            ("GIT_CONFIG_NOSYSTEM".into(), "1".into()),
            ("GIT_AUTHOR_NAME".into(), "t".into()),
            ("GIT_AUTHOR_EMAIL".into(), "t@example.com".into()),
            ("GIT_COMMITTER_NAME".into(), "t".into()),
            ("GIT_COMMITTER_EMAIL".into(), "t@example.com".into()),
            ("HERDR_SBX_ACK_TIMEOUT_MS".into(), "3000".into()),
        ];
        let world = World {
            _tmp: tmp,
            root,
            home,
            plugin_root,
            config_dir,
            state_dir,
            env,
            user: None,
        };
        world.herdr_state(|s| {
            *s = json!({"panes": {"w1:p1": {"workspace_id": "w1", "label": "main"}}, "next": 100})
        });
        world
    }

    /// Sets an environment variable for every later command.
    pub fn set(&mut self, key: &str, value: &str) {
        self.env.retain(|(k, _)| k != key);
        self.env.push((key.to_owned(), value.to_owned()));
    }

    pub fn command(&self, program: &Path) -> Command {
        let mut c = Command::new(program);
        c.env_clear();
        for (k, v) in &self.env {
            c.env(k, v);
        }
        if let Some(user) = self.user {
            users::as_user(&mut c, user);
        }
        c
    }

    /// From now on the plugin, the fakes and the sandboxes run as `user`, who owns the whole
    /// world (the harness, as root, still reads and writes its files in place).
    pub fn user(&self) -> Option<(u32, u32)> {
        self.user
    }

    pub fn hand_to(&mut self, user: (u32, u32)) {
        users::chown_tree(&self.root, user);
        self.user = Some(user);
    }

    pub fn write_config(&self, config: Value) {
        std::fs::write(self.config_dir.join("config.json"), config.to_string())
            .expect("config writes");
    }

    /// Runs `airlock herdr action <name>` with `ctx` as HERDR_PLUGIN_CONTEXT_JSON.
    pub fn action(&self, name: &str, ctx: Value) -> Run {
        self.action_with(name, Some(&ctx.to_string()), &[])
    }

    pub fn action_with(&self, name: &str, ctx: Option<&str>, extra: &[(&str, &str)]) -> Run {
        let mut c = self.command(&self.plugin_root.join("bin/airlock"));
        c.args(["herdr", "action", name])
            .current_dir(&self.plugin_root);
        if let Some(ctx) = ctx {
            c.env("HERDR_PLUGIN_CONTEXT_JSON", ctx);
        }
        for (k, v) in extra {
            c.env(k, v);
        }
        Run::from(c.output().expect("airlock runs"))
    }

    /// Runs action `name` on `pane`, answering any confirmation popup with DELETE.
    pub fn confirmed_action(&self, name: &str, pane: &str) -> Run {
        self.action_with(
            name,
            Some(&self.ctx_pane(pane).to_string()),
            &[("FAKE_HERDR_POPUP_INPUT", "DELETE\n")],
        )
    }

    /// Starts action `name` on `pane` in the background, answering its popup with `popup_input`;
    /// stdout is piped so the finished child becomes a [`Run`].
    pub fn spawn_action(&self, name: &str, pane: &str, popup_input: &str) -> Result<Child, String> {
        self.command(&self.plugin_root.join("bin/airlock"))
            .args(["herdr", "action", name])
            .current_dir(&self.plugin_root)
            .env("HERDR_PLUGIN_CONTEXT_JSON", self.ctx_pane(pane).to_string())
            .env("FAKE_HERDR_POPUP_INPUT", popup_input)
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| e.to_string())
    }

    pub fn airlock(&self, args: &[&str], extra: &[(&str, &str)]) -> Run {
        let mut c = self.command(&self.plugin_root.join("bin/airlock"));
        c.args(args).current_dir(&self.plugin_root);
        for (k, v) in extra {
            c.env(k, v);
        }
        Run::from(c.output().expect("airlock runs"))
    }

    /// The usual context: pane w1:p1 of workspace w1, in `cwd`.
    pub fn ctx(&self, cwd: &Path) -> Value {
        json!({"workspace_id": "w1", "focused_pane_id": "w1:p1", "focused_pane_cwd": cwd.display().to_string(), "invocation_source": "cli"})
    }

    pub fn ctx_pane(&self, pane: &str) -> Value {
        json!({"workspace_id": "w1", "focused_pane_id": pane})
    }

    fn state_file(&self, var: &str) -> PathBuf {
        PathBuf::from(&self.env.iter().find(|(k, _)| k == var).expect("var").1)
    }

    /// Reads and changes the fake herdr's state (under its lock).
    pub fn herdr_state<T>(&self, f: impl FnOnce(&mut Value) -> T) -> T {
        with_file(&self.state_file("FAKE_HERDR_STATE"), f)
    }

    /// herdr forgets `pane`, as after a restart.
    pub fn remove_pane(&self, pane: &str) {
        self.herdr_state(|s| s["panes"].as_object_mut().map(|p| p.remove(pane)));
    }

    pub fn sbx_state<T>(&self, f: impl FnOnce(&mut Value) -> T) -> T {
        with_file(&self.state_file("FAKE_SBX_STATE"), f)
    }

    pub fn sandbox(&self, name: &str) -> Option<Value> {
        self.sbx_state(|s| s["sandboxes"].get(name).cloned())
    }

    /// Every logged argv of a fake.
    pub fn argv_log(&self, var: &str) -> Vec<Vec<String>> {
        std::fs::read_to_string(self.state_file(var))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .map(|v| {
                v["argv"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|a| a.as_str().map(str::to_owned))
                    .collect()
            })
            .collect()
    }

    pub fn mapping(&self, pane: &str) -> Option<Value> {
        let store = airlock_herdr::store::Store::new(&self.state_dir);
        std::fs::read(store.mapping_path(pane))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
    }

    /// A real git repository with one commit, under the temp dir.
    pub fn git_repo(&self, name: &str) -> PathBuf {
        let repo = self.root.join(name);
        std::fs::create_dir_all(repo.join("src")).expect("mkdir");
        std::fs::write(repo.join("README.md"), "hello\n").expect("write");
        self.git(&repo, &["init", "-q", "-b", "main"]);
        self.git(&repo, &["add", "."]);
        self.git(&repo, &["commit", "-q", "-m", "initial"]);
        std::fs::canonicalize(repo).expect("canonical")
    }

    pub fn git(&self, dir: &Path, args: &[&str]) -> String {
        let out = self
            .command(Path::new("git"))
            .arg("-C")
            .arg(dir)
            .args(args)
            .output()
            .expect("git runs");
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Starts an agent from pane w1:p1 in `repo` and waits until its bridge attached and left.
    pub fn start_agent(&self, repo: &Path) -> Result<(String, String), String> {
        let run = self.action("start-agent", self.ctx(repo));
        check!(run.ok(), "start-agent: {}", run.show());
        let pane = run.text("paneId");
        let name = run.text("sandboxName");
        self.wait_for("the bridge to attach and exit", || {
            self.mapping(&pane).is_some_and(|m| {
                m["lifecycleState"] == "ready" && m["bridge"]["exitedAt"].is_string()
            })
        })?;
        Ok((pane, name))
    }

    /// herdr gains pane `id` in workspace `ws` (a pane the user works in).
    pub fn add_pane(&self, id: &str, ws: &str) {
        self.herdr_state(|s| s["panes"][id] = json!({"workspace_id": ws, "label": "shell"}));
    }

    /// A context focused on `pane` of workspace `ws` (none: the context names no workspace).
    pub fn ctx_in(&self, ws: Option<&str>, pane: &str) -> Value {
        let mut ctx = json!({"focused_pane_id": pane, "invocation_source": "cli"});
        if let Some(ws) = ws {
            ctx["workspace_id"] = json!(ws);
        }
        ctx
    }

    /// Starts an agent in `repo` from `pane` of workspace `ws` and waits for its bridge to exit.
    pub fn start_agent_from(
        &self,
        repo: &Path,
        ws: Option<&str>,
        pane: &str,
    ) -> Result<(String, String), String> {
        let mut ctx = self.ctx_in(ws, pane);
        ctx["focused_pane_cwd"] = json!(repo.display().to_string());
        let run = self.action("start-agent", ctx);
        check!(run.ok(), "start-agent from {pane}: {}", run.show());
        let new_pane = run.text("paneId");
        let name = run.text("sandboxName");
        self.wait_for_bridge_exit(&new_pane)?;
        Ok((new_pane, name))
    }

    /// Waits until the bridge of `pane`'s mapping gave its record back.
    pub fn wait_for_bridge_exit(&self, pane: &str) -> Outcome {
        self.wait_for("the bridge to exit", || {
            self.mapping(pane).is_some_and(|m| {
                m["bridge"]["exitedAt"].is_string() && m["bridge"]["pid"].is_null()
            })
        })
    }

    /// Changes `pane`'s mapping through the store (under its lock), as another airlock would.
    pub fn modify_mapping(
        &self,
        pane: &str,
        f: impl FnOnce(&mut airlock_herdr::store::PaneMapping),
    ) -> Outcome {
        airlock_herdr::store::Store::new(&self.state_dir)
            .modify(pane, |m| {
                f(m);
                Ok(())
            })
            .map_err(|e| e.to_string())
    }

    /// How many commands the fake herdr has run so far.
    pub fn herdr_calls(&self) -> usize {
        self.argv_log("FAKE_HERDR_LOG").len()
    }

    /// Waits for `cond` with a deadline (tests never sleep to wait).
    pub fn wait_for(&self, what: &str, cond: impl Fn() -> bool) -> Outcome {
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if cond() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Err(format!(
            "timed out waiting for {what}; pane output: {}",
            self.pane_outputs()
        ))
    }

    /// The commands the fake herdr ran in `pane`, each `{pid, out, text}`.
    pub fn pane_runs(&self, pane: &str) -> Vec<Value> {
        self.herdr_state(|s| {
            s["panes"][pane]["runs"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
    }

    /// What the fake's background pane commands printed (for failure messages).
    pub fn pane_outputs(&self) -> String {
        let mut out = String::new();
        for e in std::fs::read_dir(self.root.join("herdr"))
            .into_iter()
            .flatten()
            .flatten()
        {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.ends_with(".out") || name.ends_with(".stdout") {
                out.push_str(&format!(
                    "\n--- {name}\n{}",
                    std::fs::read_to_string(e.path()).unwrap_or_default()
                ));
            }
        }
        out
    }
}

fn with_file<T>(path: &Path, f: impl FnOnce(&mut Value) -> T) -> T {
    let _lock = crate::fakes::FileLock::take(&PathBuf::from(format!("{}.lock", path.display())));
    let mut v: Value = std::fs::read(path)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_else(|| json!({}));
    let out = f(&mut v);
    std::fs::write(path, serde_json::to_vec_pretty(&v).expect("json")).expect("state writes");
    out
}

impl From<Output> for Run {
    fn from(o: Output) -> Run {
        let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
        let result = airlock_herdr::result::parse(stdout.lines().next().unwrap_or(""))
            .unwrap_or(Value::Null);
        Run {
            code: o.status.code().unwrap_or(-1),
            result,
            stdout,
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    }
}
