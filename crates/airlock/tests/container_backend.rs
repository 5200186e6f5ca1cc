//! The container backend end to end with the real podman: what it renders, what it refuses
//! (nothing created), a launch's exit status and environment, a second engine socket, kept
//! containers, and the attacks it must stop (the engine's socket, the host's network, writes
//! outside the spec's writable paths), each with its control.
//!
//! podman runs as root here, with a `containers.conf` of lower ulimits and runc (as
//! `common/podman.rs` explains); elsewhere every case skips with the reason.

mod common;

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

fn run_with(h: &TestHome, env: &[(&str, &str)], args: &[&str]) -> Output {
    let mut cmd = h.airlock(args);
    cmd.env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("SHELL", "/bin/sh")
        .env("CONTAINERS_CONF", conf(h))
        .env("AIRLOCK_BACKEND", "container");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("spawn airlock")
}

/// A launch with what the container backend can honour: no proxy, no hidden files.
fn launch(h: &TestHome, env: &[(&str, &str)], script: &str) -> Output {
    run_with(
        h,
        env,
        &[
            "run",
            "--network",
            "none",
            "--no-hide-env",
            "--",
            "sh",
            "-c",
            script,
        ],
    )
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
        "/run/airlock/airlock-container-exec --writable=",
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
    // The defaults: the hidden-files keeper.
    let out = run_with(&h, &[], &["run", "--", "true"]);
    assert_eq!(out.status.code(), Some(125), "{}", report(&out));
    let e = stderr(&out);
    assert!(e.contains("hide_env_files = false"), "{e}");
    assert!(
        e.contains("cannot keep files hidden") && e.contains(".env"),
        "{e}"
    );
    assert!(!h.sandboxes().exists(), "{}", h.sandboxes().display());
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

#[test]
fn the_host_network_is_out_of_reach_without_network_host() {
    if !podman_runs() {
        return;
    }
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let h = TestHome::new("home/code/app");
    let probe = format!(
        "bash -c 'echo hi > /dev/tcp/127.0.0.1/{port}' 2>/dev/null && echo CONNECTED || echo refused"
    );
    let out = launch(&h, &[], &probe);
    assert!(out.status.success(), "{}", report(&out));
    assert!(stdout(&out).contains("refused"), "{}", report(&out));
    // Control: with network = "host" the same probe connects.
    let out = run_with(
        &h,
        &[],
        &[
            "run",
            "--network",
            "host",
            "--no-hide-env",
            "--",
            "sh",
            "-c",
            &probe,
        ],
    );
    assert!(stdout(&out).contains("CONNECTED"), "{}", report(&out));
}

#[test]
fn the_engines_socket_never_reaches_the_container() {
    if !podman_runs() {
        return;
    }
    let h = TestHome::new("home/code/app");
    let service = Service::start(&h);
    // A mount that would hold the engine's socket is refused before anything starts.
    let dir = service.socket.parent().unwrap().display().to_string();
    h.config(&format!(
        "[[sandbox.mounts]]\npath = \"{dir}\"\nmode = \"readonly\"\n"
    ));
    let url = format!("unix://{}", service.socket.display());
    let out = launch(&h, &[("CONTAINER_HOST", &url)], "true");
    assert_eq!(out.status.code(), Some(125), "{}", report(&out));
    assert!(
        stderr(&out).contains("container engine's socket"),
        "{}",
        report(&out)
    );
    // Control: without that mount the container runs, and no engine socket is inside.
    h.config("");
    let out = launch(
        &h,
        &[("CONTAINER_HOST", &url)],
        "ls /run/podman/podman.sock /var/run/docker.sock 2>/dev/null; echo ran",
    );
    assert!(out.status.success(), "{}", report(&out));
    assert_eq!(stdout(&out).trim(), "ran", "{}", report(&out));
}

/// A second `podman system service` on a socket of its own, standing in for an engine the
/// user points `CONTAINER_HOST` at.
struct Service {
    child: Child,
    socket: PathBuf,
}

impl Service {
    fn start(h: &TestHome) -> Service {
        let socket = h.root.join("engine/podman.sock");
        std::fs::create_dir_all(socket.parent().unwrap()).unwrap();
        let child = Command::new("/usr/bin/podman")
            .env("CONTAINERS_CONF", conf(h))
            .args(["system", "service", "--time=0"])
            .arg(format!("unix://{}", socket.display()))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("podman system service");
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::os::unix::net::UnixStream::connect(&socket).is_err() {
            assert!(
                Instant::now() < deadline,
                "the engine's socket did not come up in 20 s"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Service { child, socket }
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_second_engine_socket_runs_the_container_and_a_dead_one_is_a_clear_error() {
    if !podman_runs() {
        return;
    }
    let h = TestHome::new("home/code/app");
    let service = Service::start(&h);
    let url = format!("unix://{}", service.socket.display());
    let out = launch(
        &h,
        &[("CONTAINER_HOST", &url)],
        "echo via-the-socket > out.txt; exit 3",
    );
    assert_eq!(out.status.code(), Some(3), "{}", report(&out));
    assert_eq!(
        std::fs::read_to_string(h.project.join("out.txt")).unwrap(),
        "via-the-socket\n"
    );
    drop(service);
    let out = launch(&h, &[("CONTAINER_HOST", &url)], "echo RAN");
    assert_eq!(out.status.code(), Some(125), "{}", report(&out));
    assert!(!stdout(&out).contains("RAN"), "{}", report(&out));
    assert!(
        stderr(&out).contains("cannot reach its engine"),
        "{}",
        report(&out)
    );
}

#[test]
fn a_kept_container_stays_and_a_missing_image_is_named() {
    if !podman_runs() {
        return;
    }
    let h = TestHome::new("home/code/app");
    h.config("[sandbox.container]\nkeep = true\n");
    let out = launch(&h, &[], "true");
    assert!(out.status.success(), "{}", report(&out));
    let e = stderr(&out);
    let name = e
        .split_whitespace()
        .find(|w| w.starts_with("airlock-app-"))
        .expect("the kept container's name")
        .to_owned();
    let podman = |args: &[&str]| {
        Command::new("/usr/bin/podman")
            .env("CONTAINERS_CONF", conf(&h))
            .args(args)
            .output()
            .unwrap()
    };
    assert!(
        podman(&["container", "exists", &name]).status.success(),
        "{e}"
    );
    assert!(podman(&["rm", &name]).status.success());
    h.config("[sandbox.container]\nimage = \"localhost/airlock-no-such-image:1\"\n");
    let out = launch(&h, &[], "echo RAN");
    assert_eq!(out.status.code(), Some(125), "{}", report(&out));
    let e = stderr(&out);
    assert!(
        e.contains("localhost/airlock-no-such-image:1") && e.contains("never pulls"),
        "{e}"
    );
    assert!(!stdout(&out).contains("RAN"));
}

/// The wrapper the container runs, started on the host under its name: Landlock keeps writes to
/// its writable paths, airlock's filter refuses namespaces, and the command's status passes.
#[test]
fn the_exec_wrapper_confines_writes_and_refuses_namespaces() {
    if airlock_sandbox::native::landlock::abi().is_none() {
        eprintln!("skipped: this kernel has no Landlock");
        return;
    }
    let h = TestHome::new("home/code/app");
    let wrapper = h.root.join("airlock-container-exec");
    std::os::unix::fs::symlink(common::AIRLOCK, &wrapper).unwrap();
    let allowed = h.root.join("allowed");
    std::fs::create_dir_all(&allowed).unwrap();
    let script = format!(
        "echo x > {a}/ok && echo wrote-allowed; echo x > {r}/planted 2>/dev/null && echo WROTE; \
         unshare -U true 2>/dev/null && echo UNSHARED; exit 4",
        a = allowed.display(),
        r = h.root.display()
    );
    let out = Command::new(&wrapper)
        .arg(format!("--writable={}", allowed.display()))
        .args(["--", "sh", "-c", &script])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(4), "{}", report(&out));
    let seen = stdout(&out);
    assert!(seen.contains("wrote-allowed"), "{seen}");
    assert!(
        !seen.contains("WROTE") && !seen.contains("UNSHARED"),
        "{seen}"
    );
    assert!(!h.root.join("planted").exists());
    // Anything but its own options before `--` is refused, and nothing runs.
    let out = Command::new(&wrapper)
        .args(["--privileged", "--", "sh", "-c", "echo RAN"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(125), "{}", report(&out));
    assert!(!stdout(&out).contains("RAN"));
}

/// A host HTTP server answering `ok` to every request, on 127.0.0.1 (the host's loopback).
fn http_server() -> u16 {
    use std::io::{Read, Write};
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let mut buf = [0u8; 4096];
            let _ = stream.read(&mut buf);
            let _ = stream
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok");
        }
    });
    port
}

#[test]
fn proxy_mode_reaches_allowed_hosts_through_the_egress_proxy_and_nothing_else() {
    if !podman_runs() {
        return;
    }
    let port = http_server();
    let h = TestHome::new("home/code/app");
    h.config(
        "[network]\npreset = \"deny-all\"\nallow = [\"allowed.test\"]\nallow_private = true\n\
         [network.resolve]\n\"allowed.test\" = \"127.0.0.1\"\n\"denied.test\" = \"127.0.0.1\"\n",
    );
    let script = format!(
        "curl -sS --max-time 10 http://allowed.test:{port}/; echo; \
         curl -s -o /dev/null -w '%{{http_code}}\\n' --max-time 10 http://denied.test:{port}/; \
         curl -s --max-time 5 --noproxy '*' http://127.0.0.1:{port}/ && echo DIRECT; \
         bash -c 'echo > /dev/tcp/127.0.0.1/{port}' 2>/dev/null && echo DIRECT-TCP; echo done"
    );
    let out = run_with(
        &h,
        &[],
        &["run", "--no-hide-env", "--", "sh", "-c", &script],
    );
    assert!(out.status.success(), "{}", report(&out));
    let seen = stdout(&out);
    let lines: Vec<&str> = seen.lines().collect();
    assert_eq!(
        lines.first(),
        Some(&"ok"),
        "the allowed host through the proxy: {}",
        report(&out)
    );
    assert_eq!(
        lines.get(1),
        Some(&"403"),
        "the denied host: {}",
        report(&out)
    );
    assert!(
        !seen.contains("DIRECT"),
        "the host's loopback was reached directly: {seen}"
    );
    assert!(seen.contains("done"), "{seen}");
    // Every decision is in the sandbox's log, with no empty connection of airlock's own.
    let logs = glob(&h.sandboxes(), "logs/network.jsonl");
    let log = std::fs::read_to_string(&logs[0]).unwrap();
    assert!(
        log.contains("\"host\":\"allowed.test\"") && log.contains("\"decision\":\"denied\""),
        "{log}"
    );
    assert!(!log.contains("before a full request head"), "{log}");
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

/// SIGKILL of airlock stops its container: the engine's client is not the container (conmon
/// keeps it), so airlock's watchdog kills it by name. Control: the container runs before.
#[test]
fn a_container_stops_when_airlock_is_killed() {
    if !podman_runs() {
        return;
    }
    let h = TestHome::new("home/code/app");
    let mut cmd = h.airlock(&[
        "run",
        "--network",
        "none",
        "--no-hide-env",
        "--",
        "sh",
        "-c",
        "touch started; exec sleep 1000",
    ]);
    cmd.env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("SHELL", "/bin/sh")
        .env("CONTAINERS_CONF", conf(&h))
        .env("AIRLOCK_BACKEND", "container")
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut airlock = cmd.spawn().expect("spawn airlock");
    let suffix = format!("-{}", airlock.id());
    let running = || {
        let out = Command::new("/usr/bin/podman")
            .env("CONTAINERS_CONF", conf(&h))
            .args(["ps", "-a", "--format", "{{.Names}}"])
            .output()
            .unwrap();
        stdout(&out)
            .lines()
            .any(|n| n.starts_with("airlock-app-") && n.ends_with(&suffix))
    };
    let until = |what: &dyn Fn() -> bool| {
        let deadline = Instant::now() + Duration::from_secs(30);
        while !what() {
            if Instant::now() > deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        true
    };
    let started = until(&|| h.project.join("started").exists() && running());
    airlock.kill().unwrap();
    airlock.wait().unwrap();
    assert!(started, "control: the container never ran");
    assert!(
        until(&|| !running()),
        "the container outlived airlock's SIGKILL by 30 s"
    );
}
