//! A real Docker-compatible engine for tests: `podman system service` on a socket of its own,
//! with a busybox image imported from the host's static busybox (no registry needed), and
//! containers the test starts through podman's own CLI (never through the filter under test).
//!
//! podman needs two settings on these machines (root cannot raise RLIMIT_NOFILE; crun refuses
//! the hybrid cgroup layout): a `containers.conf` with lower default ulimits and runc.

use std::fs;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The image every test container runs.
pub const IMAGE: &str = "localhost/airlock-test-busybox:latest";

/// The settings podman needs here (see above); tests that run the container backend use it too.
pub const CONTAINERS_CONF: &str = "[containers]\ndefault_ulimits = [\"nofile=20000:20000\", \"nproc=32768:32768\"]\n[engine]\nruntime = \"runc\"\n";

static NEXT: AtomicUsize = AtomicUsize::new(0);

pub struct Podman {
    dir: tempfile::TempDir,
    service: Option<Child>,
    containers: Vec<String>,
}

impl Podman {
    /// The engine, or why it cannot run here (printed by the caller as the skip reason).
    pub fn start() -> Result<Podman, String> {
        if !nix::unistd::geteuid().is_root() {
            return Err("podman's engine runs as root here".into());
        }
        for program in ["/usr/bin/podman", "/bin/busybox"] {
            if !Path::new(program).exists() {
                return Err(format!("{program} is missing (scripts/test installs it)"));
            }
        }
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        fs::write(dir.path().join("containers.conf"), CONTAINERS_CONF)
            .map_err(|e| e.to_string())?;
        let mut podman = Podman {
            service: None,
            dir,
            containers: Vec::new(),
        };
        podman.import_image()?;
        let socket = podman.socket();
        let service = podman
            .command()
            .args(["system", "service", "--time=0"])
            .arg(format!("unix://{}", socket.display()))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("podman system service: {e}"))?;
        podman.service = Some(service);
        let deadline = Instant::now() + Duration::from_secs(20);
        while UnixStream::connect(&socket).is_err() {
            if Instant::now() > deadline {
                return Err("podman's API socket did not come up in 20 s".into());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(podman)
    }

    /// The engine's socket (what the filter forwards to).
    pub fn socket(&self) -> PathBuf {
        self.dir.path().join("podman.sock")
    }

    /// podman with this engine's settings and a store of its own: the tests of one binary run
    /// in parallel, and an engine that lists another test's containers (removed a moment later)
    /// answers the list with a 500.
    fn command(&self) -> Command {
        let mut cmd = Command::new("/usr/bin/podman");
        let dir = self.dir.path();
        cmd.env("CONTAINERS_CONF", dir.join("containers.conf"))
            .arg("--root")
            .arg(dir.join("storage"))
            .arg("--runroot")
            .arg(dir.join("run"))
            .arg("--tmpdir")
            .arg(dir.join("tmp"))
            .args(["--storage-driver", "vfs"]);
        cmd
    }

    fn import_image(&self) -> Result<(), String> {
        let root = self.dir.path().join("rootfs");
        fs::create_dir_all(root.join("bin")).map_err(|e| e.to_string())?;
        fs::copy("/bin/busybox", root.join("bin/busybox")).map_err(|e| e.to_string())?;
        for applet in [
            "sh", "sleep", "echo", "cat", "ls", "id", "stty", "true", "yes", "head",
        ] {
            std::os::unix::fs::symlink("busybox", root.join("bin").join(applet))
                .map_err(|e| e.to_string())?;
        }
        let tar = self.dir.path().join("rootfs.tar");
        let ok = Command::new("tar")
            .arg("-C")
            .arg(&root)
            .arg("-cf")
            .arg(&tar)
            .arg(".")
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            return Err("tar of the busybox rootfs failed".into());
        }
        let out = self
            .command()
            .arg("import")
            .arg(&tar)
            .arg(IMAGE)
            .output()
            .map_err(|e| e.to_string())?;
        if !out.status.success() {
            return Err(format!(
                "podman import: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        Ok(())
    }

    /// Starts a detached container running `sh -c script`; returns its name.
    pub fn run(&mut self, script: &str) -> String {
        let name = format!(
            "airlock-test-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::SeqCst)
        );
        let out = self
            .command()
            .args(["run", "-d", "--name", &name, IMAGE, "sh", "-c", script])
            .output()
            .expect("podman run");
        assert!(
            out.status.success(),
            "podman run: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        self.containers.push(name.clone());
        name
    }

    /// Whether a container of that name exists (the engine's own view).
    pub fn exists(&self, name: &str) -> bool {
        self.command()
            .args(["container", "exists", name])
            .status()
            .is_ok_and(|s| s.success())
    }
}

impl Drop for Podman {
    fn drop(&mut self) {
        for name in &self.containers {
            let _ = self
                .command()
                .args(["rm", "-f", "-t", "0", name])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
        if let Some(service) = &mut self.service {
            let _ = service.kill();
            let _ = service.wait();
        }
    }
}
