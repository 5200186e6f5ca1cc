//! The container backend end to end with the real podman: what it renders, what it refuses
//! (nothing created), a launch's exit status and environment, a second engine socket, kept
//! containers, and the attacks it must stop (the engine's socket, the host's network, writes
//! outside the spec's writable paths), each with its control.
//!
//! podman runs as root here, with a `containers.conf` of lower ulimits and runc (as
//! `common/podman.rs` explains); elsewhere every case skips with the reason.

#[path = "../common/mod.rs"]
mod common;
mod engines;
mod keeper;
mod network;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{TestHome, report, stderr, stdout, write};

const CONTAINERS_CONF: &str = "[containers]\ndefault_ulimits = [\"nofile=20000:20000\", \"nproc=32768:32768\"]\n[engine]\nruntime = \"runc\"\n";

/// Whether podman can run containers here; prints why when it cannot.
fn podman_runs() -> bool {
    let why = if !nix::unistd::geteuid().is_root() {
        Some("podman's engine runs as root on these machines")
    } else if !Path::new("/usr/bin/podman").exists() {
        Some("podman is not installed (as root: apt-get install podman)")
    } else {
        None
    };
    if let Some(why) = why {
        eprintln!("skipped: {why}");
    }
    why.is_none()
}

fn conf(h: &TestHome) -> PathBuf {
    let path = h.root.join("containers.conf");
    write(&path, CONTAINERS_CONF);
    path
}

/// `airlock ARGS` with the container backend and this machine's podman config, not started.
fn container_command(h: &TestHome, env: &[(&str, &str)], args: &[&str]) -> Command {
    let mut cmd = h.airlock(args);
    cmd.env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("SHELL", "/bin/sh")
        .env("CONTAINERS_CONF", conf(h))
        .env("AIRLOCK_BACKEND", "container");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd
}

fn run_with(h: &TestHome, env: &[(&str, &str)], args: &[&str]) -> Output {
    container_command(h, env, args)
        .output()
        .expect("spawn airlock")
}

/// `run` with no proxy and no hidden files (the keeper's cases are in `keeper.rs`) and `script`.
fn launch_args(script: &str) -> [&str; 8] {
    [
        "run",
        "--network",
        "none",
        "--no-hide-env",
        "--",
        "sh",
        "-c",
        script,
    ]
}

/// A launch with no proxy and no hidden files (see `launch_args`).
fn launch(h: &TestHome, env: &[(&str, &str)], script: &str) -> Output {
    run_with(h, env, &launch_args(script))
}

#[test]
fn render_prints_the_engine_command_and_creates_nothing() {
    if !podman_runs() {
        return;
    }
    let h = TestHome::new("home/code/app");
    let out = run_with(
        &h,
        &[],
        &[
            "run",
            "--network",
            "none",
            "--no-hide-env",
            "--print-spec",
            "--render",
            "--",
            "true",
        ],
    );
    assert!(out.status.success(), "{}", report(&out));
    let line = stdout(&out);
    for part in [
        "/usr/bin/podman run --pull never --name airlock-app-",
        " --rm --read-only --log-driver none",
        "--network none --cap-drop ALL --security-opt no-new-privileges --security-opt seccomp=",
        "--mount type=tmpfs,dst=/sys,ro=true",
        "/run/airlock/airlock-container-exec --wait-go --writable=",
    ] {
        assert!(line.contains(part), "{part} not in {line}");
    }
    let project = h.project.display();
    assert!(
        line.contains(&format!("type=bind,src={project},dst={project} ")),
        "{line}"
    );
    assert!(line.trim_end().ends_with("-- true"), "{line}");
    assert!(!h.sandboxes().exists(), "{}", h.sandboxes().display());
}

#[test]
fn what_the_engine_cannot_honour_is_refused_before_anything_is_created() {
    if !podman_runs() {
        return;
    }
    let h = TestHome::new("home/code/app");
    // An overlay with docker, which has no overlay mount of a host directory.
    let cache = h.home.join("cache");
    std::fs::create_dir_all(&cache).unwrap();
    let config = h.config(&format!(
        "[sandbox.container]\nengine = \"docker\"\n\n[[sandbox.mounts]]\npath = \"{}\"\n\
         mode = \"tmpoverlay\"\n",
        cache.display()
    ));
    let out = run_with(&h, &[], &["run", "--network", "none", "--", "true"]);
    assert_eq!(out.status.code(), Some(125), "{}", report(&out));
    let e = stderr(&out);
    assert!(
        e.contains("mounts airlock's overlays with podman only")
            && e.contains(&cache.display().to_string()),
        "{e}"
    );
    assert!(!h.sandboxes().exists(), "{}", h.sandboxes().display());
    std::fs::remove_file(config).unwrap();
    // A remote engine without an image of that machine's (tests/remote_engine.rs runs one).
    let out = run_with(
        &h,
        &[("CONTAINER_HOST", "tcp://192.0.2.1:2375")],
        &["run", "--network", "none", "--no-hide-env", "--", "true"],
    );
    assert_eq!(out.status.code(), Some(125), "{}", report(&out));
    assert!(
        stderr(&out).contains("CONTAINER_HOST=tcp://192.0.2.1:2375")
            && stderr(&out).contains("needs [sandbox.container] image"),
        "{}",
        report(&out)
    );
    assert!(!h.sandboxes().exists());
}

#[test]
fn the_exit_status_and_only_the_specs_environment_pass_through() {
    if !podman_runs() {
        return;
    }
    let h = TestHome::new("home/code/app");
    let out = launch(&h, &[], "exit 7");
    assert_eq!(out.status.code(), Some(7), "{}", report(&out));
    let out = launch(&h, &[("SECRET_TOKEN", "s3cr3t")], "env; id -u");
    assert!(out.status.success(), "{}", report(&out));
    let seen = stdout(&out);
    assert!(seen.contains("AIRLOCK=1"), "{seen}");
    assert!(
        !seen.contains("s3cr3t"),
        "a host variable reached the container: {seen}"
    );
    let uid = nix::unistd::getuid().to_string();
    assert_eq!(seen.lines().last(), Some(uid.as_str()), "{seen}");
    // The session's files for the engine are gone with it.
    let left: Vec<_> = glob(&h.sandboxes(), "container");
    assert!(
        left.iter()
            .all(|d| std::fs::read_dir(d).unwrap().next().is_none()),
        "{left:?}"
    );
}

/// The go socket names the container's first process to the supervisor by its one connection:
/// once the command runs, the listener is closed, so nothing inside can be taken for the
/// wrapper (the control: the socket is still bound there, and refuses).
#[test]
fn the_go_socket_answers_no_one_once_the_command_runs() {
    if !podman_runs() {
        return;
    }
    let h = TestHome::new("home/code/app");
    let probe = "test -S /run/airlock/go && echo bound; python3 -c '\
import socket\n\
s = socket.socket(socket.AF_UNIX)\n\
try:\n    s.connect(\"/run/airlock/go\"); print(\"connected\")\n\
except ConnectionRefusedError: print(\"refused\")\n'";
    let out = launch(&h, &[], probe);
    assert!(out.status.success(), "{}", report(&out));
    assert_eq!(stdout(&out).trim(), "bound\nrefused", "{}", report(&out));
}

fn glob(root: &Path, name: &str) -> Vec<PathBuf> {
    std::fs::read_dir(root)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join(name))
        .filter(|p| p.exists())
        .collect()
}

#[test]
fn writes_outside_the_writable_paths_fail_and_the_project_is_written() {
    if !podman_runs() {
        return;
    }
    let h = TestHome::new("home/code/app");
    let script = "echo x > /usr/planted 2>/dev/null && echo WROTE-USR; \
                  echo x > /etc/planted 2>/dev/null && echo WROTE-ETC; \
                  echo x > /planted 2>/dev/null && echo WROTE-ROOT; \
                  chmod 600 /dev/null 2>/dev/null; \
                  grep -E '^(CapEff|NoNewPrivs|Seccomp):' /proc/self/status; \
                  unshare -U true 2>/dev/null && echo UNSHARED; \
                  echo made > control.txt && echo control";
    let out = launch(&h, &[], script);
    assert!(out.status.success(), "{}", report(&out));
    let seen = stdout(&out);
    for escaped in ["WROTE-USR", "WROTE-ETC", "WROTE-ROOT", "UNSHARED"] {
        assert!(!seen.contains(escaped), "{escaped}: {seen}");
    }
    assert!(seen.contains("CapEff:\t0000000000000000"), "{seen}");
    assert!(
        seen.contains("NoNewPrivs:\t1") && seen.contains("Seccomp:\t2"),
        "{seen}"
    );
    assert!(seen.contains("control"), "{seen}");
    assert_eq!(
        std::fs::read_to_string(h.project.join("control.txt")).unwrap(),
        "made\n"
    );
    assert!(!Path::new("/usr/planted").exists() && !Path::new("/planted").exists());
    // The engine's /dev holds nodes of its own (rootful) or binds a user cannot chmod
    // (rootless): the host's /dev/null keeps its mode.
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata("/dev/null").unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o666, "the host's /dev/null changed");
}

/// A link planted in the project (an earlier session could) under a mount's target is refused
/// before the engine resolves it; the control without the link runs.
#[test]
fn a_mount_through_a_link_planted_in_the_project_is_refused() {
    if !podman_runs() {
        return;
    }
    let h = TestHome::new("home/code/app");
    let outside = h.root.join("outside/sub");
    std::fs::create_dir_all(&outside).unwrap();
    std::os::unix::fs::symlink(h.root.join("outside"), h.project.join("link")).unwrap();
    let target = h.project.join("link/sub");
    h.config(&format!(
        "[[sandbox.mounts]]\npath = \"{}\"\nmode = \"readonly\"\n",
        target.display()
    ));
    let out = launch(&h, &[], "echo RAN");
    assert_eq!(out.status.code(), Some(125), "{}", report(&out));
    assert!(
        stderr(&out).contains("is a symlink in a sandbox-writable tree"),
        "{}",
        report(&out)
    );
    assert!(!stdout(&out).contains("RAN"));
    h.config("");
    let out = launch(&h, &[], "echo RAN");
    assert!(stdout(&out).contains("RAN"), "{}", report(&out));
}

/// The exec wrapper is the container's init and the workload is not PID 1, so a signal the
/// workload does not handle kills it, and airlock dies of it as native does (the init's record
/// tells a death by SIGTERM from `exit 143`, the control). Native gives the same, checked here.
#[test]
fn a_workload_killed_by_a_signal_ends_airlock_by_that_signal_as_native() {
    use std::os::unix::process::ExitStatusExt as _;
    if !podman_runs() {
        return;
    }
    let h = TestHome::new("home/code/app");
    let script = "kill -TERM $$; echo SURVIVED";
    let out = launch(&h, &[], script);
    assert_eq!(out.status.signal(), Some(libc::SIGTERM), "{}", report(&out));
    assert!(!stdout(&out).contains("SURVIVED"), "{}", report(&out));
    let native = run_with(&h, &[("AIRLOCK_BACKEND", "native")], &launch_args(script));
    assert_eq!(
        native.status.signal(),
        Some(libc::SIGTERM),
        "{}",
        report(&native)
    );
    // Control: the same code as an exit is an exit.
    let out = launch(&h, &[], "exit 143");
    assert_eq!(out.status.code(), Some(143), "{}", report(&out));
    // The workload cannot forge the init's record: Landlock refuses it the FIFO, which is
    // beneath no writable path (without Landlock it could, and would misreport only itself).
    if airlock_sandbox::native::landlock::abi().is_some() {
        let forge = "echo 'signal 15' > /.airlock/status 2>/dev/null && echo FORGED; exit 143";
        let out = launch(&h, &[], forge);
        assert_eq!(out.status.code(), Some(143), "{}", report(&out));
        assert!(!stdout(&out).contains("FORGED"), "{}", report(&out));
    }
}

/// An orphan goes to the init (the container's PID 1), which reaps it: no zombie is left while
/// the workload still runs. Control: the orphan was there, a child of PID 1, and the workload is
/// not PID 1.
#[test]
fn an_orphan_is_reaped_by_the_containers_init() {
    if !podman_runs() {
        return;
    }
    let h = TestHome::new("home/code/app");
    let script = "o=$( (sleep 0.3 >/dev/null 2>&1 & echo $!) ); sleep 0.1; \
                  echo \"orphan-ppid=$(cut -d' ' -f4 /proc/$o/stat)\"; echo \"me=$$\"; sleep 1; \
                  test -e /proc/$o && echo \"LEFT=$(cut -d' ' -f3 /proc/$o/stat)\"; echo done";
    let out = launch(&h, &[], script);
    assert!(out.status.success(), "{}", report(&out));
    let seen = stdout(&out);
    assert!(seen.contains("orphan-ppid=1\n"), "{seen}");
    assert!(!seen.contains("me=1\n"), "{seen}");
    assert!(!seen.contains("LEFT="), "a zombie was left: {seen}");
    assert!(seen.contains("done"), "{seen}");
}
