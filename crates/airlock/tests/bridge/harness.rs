//! The suite's host side: a temp HOME with a bridge state dir, fake host launchers that record
//! their argv, the real `airlock bridge daemon` started on it, and a small raw HTTP client.

use std::fs;
use std::io::{Read as _, Write as _};
use std::os::unix::fs::PermissionsExt as _;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

#[path = "../common/users.rs"]
mod users;

/// How long a condition the daemon should bring about quickly may take.
pub const DEADLINE: Duration = Duration::from_secs(20);

pub fn airlock() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_airlock"))
}

/// Waits for `cond` with a deadline, polling; panics with `what` when it never holds.
pub fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < DEADLINE, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A fake host program: records `name<TAB>arg<TAB>arg...` per call in `calls.log`, stdin in
/// `<name>.stdin`, then runs `extra` (shell).
fn fake_script(log: &Path, dir: &Path, name: &str, extra: &str) -> String {
    format!(
        "#!/bin/sh\n\
         {{ printf '%s' '{name}'; for a in \"$@\"; do printf '\\t%s' \"$a\"; done; printf '\\n'; }} >> '{log}'\n\
         {extra}\n",
        log = log.display(),
        name = name,
        extra = extra.replace("$DIR", &dir.display().to_string()),
    )
}

/// The default fakes: an opener, both editors, git, proximo, paplay, and a helper tool.
pub const FAKES: &[(&str, &str)] = &[
    ("xdg-open", "exit 0"),
    ("code", "exit 0"),
    ("codium", "exit 0"),
    (
        "git",
        "cat > \"$DIR/git.stdin\"\n\
         if [ \"$2\" = fill ]; then printf 'protocol=https\\nhost=forge.example\\nusername=dev\\npassword=s3cret-from-host\\n'; fi\n\
         exit 0",
    ),
    (
        "proximo",
        "echo \"proximo says: $*\"\necho 'to stderr' >&2\ncase \"$1\" in errors) exit 3;; esac\nexit 0",
    ),
    ("paplay", "cp \"$1\" \"$DIR/played.mp3\"\nexit 0"),
    ("mytool", "echo \"mytool $*\"\nexit 0"),
];

/// A temp HOME with the bridge state, the fakes, and optionally a running daemon.
pub struct World {
    pub root: tempfile::TempDir,
    pub home: PathBuf,
    pub state: PathBuf,
    pub fakes: PathBuf,
    pub project: PathBuf,
    pub daemon: Option<Child>,
}

impl World {
    /// A world with an installed bridge (state dir + token written as install would) and fakes.
    pub fn new() -> World {
        let root = tempfile::Builder::new()
            .prefix("airlock-bridge-test-")
            .tempdir()
            .unwrap();
        fs::set_permissions(root.path(), fs::Permissions::from_mode(0o755)).unwrap();
        let base = fs::canonicalize(root.path()).unwrap();
        let home = base.join("home");
        let state = home.join(".local/state/airlock/bridge");
        let fakes = base.join("fakes");
        let project = home.join("code/app");
        for dir in [&home, &fakes, &project] {
            fs::create_dir_all(dir).unwrap();
        }
        let world = World {
            root,
            home,
            state,
            fakes,
            project,
            daemon: None,
        };
        for (name, extra) in FAKES {
            world.fake(name, extra);
        }
        world
    }

    /// A world whose state dir holds a fresh token, as `airlock bridge install` leaves it.
    pub fn installed() -> World {
        let world = World::new();
        fs::create_dir_all(world.state.join("run")).unwrap();
        fs::set_permissions(&world.state, fs::Permissions::from_mode(0o700)).unwrap();
        let token: String = (0..32)
            .map(|i| format!("{:02x}", (i * 37 + 11) % 256))
            .collect();
        fs::write(world.state.join("token"), format!("{token}\n")).unwrap();
        fs::set_permissions(world.state.join("token"), fs::Permissions::from_mode(0o600)).unwrap();
        // The host-side route tests call with the install token; sandboxes get their own.
        world.write_config("");
        world
    }

    pub fn base(&self) -> PathBuf {
        fs::canonicalize(self.root.path()).unwrap()
    }

    /// (Re)writes a fake host program.
    pub fn fake(&self, name: &str, extra: &str) {
        let path = self.fakes.join(name);
        fs::write(
            &path,
            fake_script(&self.calls_path(), &self.base(), name, extra),
        )
        .unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
    }

    pub fn calls_path(&self) -> PathBuf {
        self.base().join("calls.log")
    }

    /// Every recorded call, one `Vec` of argv per line (argv[0] is the fake's name).
    pub fn calls(&self) -> Vec<Vec<String>> {
        fs::read_to_string(self.calls_path())
            .unwrap_or_default()
            .lines()
            .map(|l| l.split('\t').map(str::to_owned).collect())
            .collect()
    }

    pub fn token(&self) -> String {
        fs::read_to_string(self.state.join("token"))
            .unwrap()
            .trim()
            .to_owned()
    }

    pub fn socket(&self) -> PathBuf {
        self.state.join("run/bridge.sock")
    }

    pub fn audit_log(&self) -> String {
        fs::read_to_string(self.state.join("log")).unwrap_or_default()
    }

    pub fn config_file(&self) -> PathBuf {
        self.home.join(".config/airlock/config.toml")
    }

    /// Writes the global config: `[bridge] shared_token = true` (so the install token works for
    /// the host-side tests) followed by `extra`.
    pub fn write_config(&self, extra: &str) {
        let path = self.config_file();
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        let shared = if extra.contains("[bridge]") {
            extra.replacen("[bridge]", "[bridge]\nshared_token = true", 1)
        } else {
            format!("[bridge]\nshared_token = true\n{extra}")
        };
        fs::write(path, shared).unwrap();
    }

    /// The daemon command with the fakes first on PATH.
    pub fn daemon_command(&self, port: u16) -> Command {
        let mut cmd = self.daemon_command_from_home(port);
        cmd.arg("--state-dir")
            .arg(&self.state)
            .arg("--config")
            .arg(self.config_file());
        cmd
    }

    /// The daemon command without explicit paths: they derive from HOME, as by hand.
    pub fn daemon_command_from_home(&self, port: u16) -> Command {
        let mut cmd = Command::new(airlock());
        cmd.args(["bridge", "daemon", "--port", &port.to_string()])
            .env_clear()
            .env("HOME", &self.home)
            .env("PATH", format!("{}:/usr/bin:/bin", self.fakes.display()))
            .stdin(Stdio::null());
        cmd
    }

    /// Starts the daemon on an ephemeral port and waits until it answers /healthz.
    pub fn start(&mut self) {
        self.start_with(self.daemon_command(0));
    }

    pub fn start_with(&mut self, mut cmd: Command) {
        let port_file = self.state.join("port");
        let _ = fs::remove_file(&port_file);
        let child = cmd
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        self.daemon = Some(child);
        wait_for("the daemon's port file", || port_file.exists());
        let port = self.port();
        wait_for("the daemon to answer /healthz", || {
            get_tcp(port, "/healthz").is_some_and(|(status, _)| status == 200)
        });
    }

    pub fn port(&self) -> u16 {
        fs::read_to_string(self.state.join("port"))
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    }

    /// Stops the daemon with SIGTERM and returns its stderr and exit status.
    pub fn stop(&mut self) -> (String, std::process::ExitStatus) {
        let mut child = self.daemon.take().expect("a running daemon");
        // SAFETY: plain kill(2) on our own child.
        unsafe {
            libc::kill(child.id() as libc::pid_t, libc::SIGTERM);
        }
        let status = child.wait().unwrap();
        let mut err = String::new();
        if let Some(mut stderr) = child.stderr.take() {
            let _ = stderr.read_to_string(&mut err);
        }
        (err, status)
    }

    /// Sends a request over the unix socket: `(status, body)`.
    pub fn send(&self, method: &str, path: &str, auth: Option<&str>, body: &[u8]) -> (u16, String) {
        let stream = UnixStream::connect(self.socket()).expect("connect to the bridge socket");
        raw_request(stream, method, path, auth, body).expect("an HTTP answer")
    }

    /// POST with the right token.
    pub fn post(&self, path: &str, body: &str) -> (u16, String) {
        let auth = format!("Bearer {}", self.token());
        self.send("POST", path, Some(&auth), body.as_bytes())
    }

    /// Runs the airlock binary under a shim name (a symlink named `name`), with the state dir given.
    pub fn shim(&self, name: &str, args: &[&str], stdin: &[u8], env: &[(&str, &str)]) -> Output {
        let dir = self.base().join("shims");
        fs::create_dir_all(&dir).unwrap();
        let link = dir.join(name);
        if link.symlink_metadata().is_err() {
            std::os::unix::fs::symlink(airlock(), &link).unwrap();
        }
        let mut cmd = Command::new(&link);
        cmd.args(args)
            .env_clear()
            .env("HOME", &self.home)
            .env("PATH", "/usr/bin:/bin")
            .env("AIRLOCK_BRIDGE_DIR", &self.state)
            .envs(env.iter().copied())
            .current_dir(&self.project)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        // A shim that does not read its stdin may exit first: a broken pipe here is fine.
        let _ = child.stdin.take().unwrap().write_all(stdin);
        child.wait_with_output().unwrap()
    }
}

impl Drop for World {
    fn drop(&mut self) {
        if let Some(mut child) = self.daemon.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// GET over TCP on 127.0.0.1.
pub fn get_tcp(port: u16, path: &str) -> Option<(u16, String)> {
    let stream = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    raw_request(stream, "GET", path, None, b"").ok()
}

/// One HTTP/1.1 request written by hand (so malformed ones can be sent too), `Connection: close`.
pub fn raw_request<S: std::io::Read + std::io::Write>(
    mut stream: S,
    method: &str,
    path: &str,
    auth: Option<&str>,
    body: &[u8],
) -> std::io::Result<(u16, String)> {
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    if let Some(auth) = auth {
        head.push_str(&format!("Authorization: {auth}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes())?;
    // A refusal may come before the whole body is read; a reset then is fine.
    let _ = stream.write_all(body);
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    let text = String::from_utf8_lossy(&answer).into_owned();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("no status line in {text:?}")))?;
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    Ok((status, body))
}

/// The unprivileged account install/uninstall run as when the suite runs as root.
pub struct Unprivileged {
    pub uid: u32,
    pub gid: u32,
}

/// `AIRLOCK_TEST_USER` (default airlock-test), else `nobody`; None when not root (run as self).
pub fn unprivileged() -> Option<Unprivileged> {
    users::other_user().map(|(uid, gid)| Unprivileged { uid, gid })
}

/// Makes `cmd` run as `user` (when given), after chowning `tree` to it.
pub fn run_as(cmd: &mut Command, user: Option<&Unprivileged>, tree: &Path) {
    let Some(user) = user else { return };
    users::chown_tree(tree, (user.uid, user.gid));
    users::as_user(cmd, (user.uid, user.gid));
}
