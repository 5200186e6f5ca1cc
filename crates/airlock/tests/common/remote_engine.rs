//! A podman API service on `tcp://127.0.0.1:PORT` standing in for a remote engine, with a
//! minimal image (static busybox, the host's git, the libraries it and airlock link) imported
//! through that API: for `tests/remote_engine.rs`.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::common::{self, TestHome, stdout, write};

const CONTAINERS_CONF: &str = "[containers]\ndefault_ulimits = [\"nofile=20000:20000\", \"nproc=32768:32768\"]\n[engine]\nruntime = \"runc\"\n";
pub const IMAGE: &str = "localhost/airlock-remote-test:1";

/// A podman API service on a TCP port of its own, with the test image imported through it.
pub struct Remote {
    child: Child,
    pub url: String,
    pub conf: PathBuf,
    _dir: tempfile::TempDir,
}

impl Remote {
    /// The engine, or `None` (printed: why) when it cannot run here.
    pub fn start() -> Option<Remote> {
        let why = if !nix::unistd::geteuid().is_root() {
            Some("podman's engine runs as root on these machines".to_owned())
        } else {
            [
                "/usr/bin/podman",
                "/bin/busybox",
                "/usr/bin/git",
                "/usr/bin/ldd",
            ]
            .iter()
            .find(|p| !Path::new(p).exists())
            .map(|p| format!("{p} is missing (scripts/test installs it)"))
        };
        if let Some(why) = why {
            eprintln!("skipped: {why}");
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let conf = dir.path().join("containers.conf");
        write(&conf, CONTAINERS_CONF);
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let url = format!("tcp://127.0.0.1:{port}");
        let child = Command::new("/usr/bin/podman")
            .env("CONTAINERS_CONF", &conf)
            .args(["system", "service", "--time=0", &url])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("podman system service");
        let remote = Remote {
            child,
            url,
            conf,
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if Instant::now() > deadline {
                eprintln!("skipped: the podman service did not listen on {port} in 20 s");
                return None;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        remote.import_image();
        Some(remote)
    }

    pub fn podman(&self, args: &[&str]) -> Output {
        Command::new("/usr/bin/podman")
            .env("CONTAINERS_CONF", &self.conf)
            .args(["--remote", "--url", &self.url])
            .args(args)
            .output()
            .unwrap()
    }

    /// busybox and its applets in /bin, git in /usr/bin, the libraries of git and airlock.
    /// One import at a time in this process (the services share root's image store).
    fn import_image(&self) {
        static IMPORT: std::sync::Mutex<()> = std::sync::Mutex::new(());
        let _one = IMPORT.lock().unwrap_or_else(|e| e.into_inner());
        let root = self._dir.path().join("rootfs");
        for d in ["bin", "usr/bin", "tmp", "etc"] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        std::fs::copy("/bin/busybox", root.join("bin/busybox")).unwrap();
        let list = Command::new("/bin/busybox").arg("--list").output().unwrap();
        for applet in String::from_utf8_lossy(&list.stdout).lines() {
            let _ = std::os::unix::fs::symlink("busybox", root.join("bin").join(applet));
        }
        std::fs::copy("/usr/bin/git", root.join("usr/bin/git")).unwrap();
        for binary in ["/usr/bin/git", common::AIRLOCK] {
            let ldd = Command::new("/usr/bin/ldd").arg(binary).output().unwrap();
            for lib in String::from_utf8_lossy(&ldd.stdout)
                .split_whitespace()
                .filter(|w| w.starts_with('/'))
            {
                let to = root.join(lib.trim_start_matches('/'));
                std::fs::create_dir_all(to.parent().unwrap()).unwrap();
                std::fs::copy(lib, &to).unwrap();
            }
        }
        // A tar with names sorted and times and owners fixed, so the same files give the same
        // bytes: imported only when its label says the store's image holds other files (each
        // import is a new image, and the one it untags would stay dangling in root's store).
        let tar = Command::new("tar")
            .arg("-C")
            .arg(&root)
            .args([
                "--sort=name",
                "--mtime=@0",
                "--owner=0",
                "--group=0",
                "--numeric-owner",
            ])
            .args(["-cf", "-", "."])
            .output()
            .unwrap();
        assert!(tar.status.success());
        use sha2::Digest as _;
        let content = format!("{:x}", sha2::Sha256::digest(&tar.stdout));
        let label = "airlock.test.content";
        let format = format!("{{{{index .Labels \"{label}\"}}}}");
        let held = self.podman(&["image", "inspect", "--format", &format, IMAGE]);
        if stdout(&held).trim() == content {
            return;
        }
        let change = format!("LABEL={label}={content}");
        let mut import = Command::new("/usr/bin/podman")
            .env("CONTAINERS_CONF", &self.conf)
            .args([
                "--remote", "--url", &self.url, "import", "--change", &change,
            ])
            .args(["-", IMAGE])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        use std::io::Write as _;
        import.stdin.take().unwrap().write_all(&tar.stdout).unwrap();
        assert!(import.wait().unwrap().success(), "podman import");
    }

    /// `airlock run` of `script` on this engine, with `extra` flags before `--`.
    pub fn run(&self, h: &TestHome, extra: &[&str], script: &str) -> Output {
        let mut args = vec!["run"];
        args.extend(extra);
        args.extend(["--", "sh", "-c", script]);
        self.run_env(h, &self.url, &args)
    }

    pub fn run_env(&self, h: &TestHome, url: &str, args: &[&str]) -> Output {
        h.airlock(args)
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("SHELL", "/bin/sh")
            .env("CONTAINERS_CONF", &self.conf)
            .env("AIRLOCK_BACKEND", "container")
            .env("CONTAINER_HOST", url)
            .output()
            .expect("spawn airlock")
    }

    /// The containers and volumes of the sandbox of `h` left on the engine (named by its
    /// sandbox, whose hash is of the project's path: not another run's of a project so named).
    pub fn left(&self, h: &TestHome) -> String {
        let prefix = format!(
            "airlock-{}-",
            airlock_sandbox::state::sandbox_name(&h.project)
        );
        let ps = self.podman(&["ps", "-a", "--format", "{{.Names}}"]);
        let vols = self.podman(&["volume", "ls", "--format", "{{.Name}}"]);
        format!("{}{}", stdout(&ps), stdout(&vols))
            .lines()
            .filter(|l| l.starts_with(&prefix))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

impl Drop for Remote {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The files in this machine's temporary directories (`/tmp`, `/var/tmp`: where an engine CLI
/// spools what it is given) that hold `marker`: a session's copy left behind.
pub fn spooled_copies(marker: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for dir in ["/tmp", "/var/tmp"] {
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let is_file = entry.file_type().is_ok_and(|t| t.is_file());
            let held = is_file
                && std::fs::read(entry.path())
                    .is_ok_and(|bytes| bytes.windows(marker.len()).any(|w| w == marker.as_bytes()));
            if held {
                found.push(entry.path());
            }
        }
    }
    found
}
