//! Engines and containers: the engine's socket out of reach, a second engine socket, kept
//! containers, the exec wrapper on the host, and the watchdog that stops a container when airlock is killed.

use super::*;

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
    let podman = |args: &[&str]| podman_cli(&h, args);
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

/// A launch records that the store had its image and the next one does not ask the engine
/// again; when the image has gone since, the engine's failure before the container ran makes
/// airlock ask, forget the record and name the image (a configured one) rather than run
/// anything. Control: the image back, the launch runs again and records it again.
#[test]
fn an_image_gone_since_it_was_seen_is_asked_for_again() {
    if !podman_runs() {
        return;
    }
    let h = TestHome::new("home/code/app");
    let podman = |args: &[&str]| podman_cli(&h, args);
    let out = launch(&h, &[], "true");
    assert!(out.status.success(), "{}", report(&out));
    let rendered = run_with(&h, &[], &["run", "--print-spec", "--render", "--", "true"]);
    let own = stdout(&rendered)
        .split_whitespace()
        .find(|w| w.starts_with("localhost/airlock-root:"))
        .expect("airlock's image in the rendered command")
        .to_owned();
    let image = format!("localhost/airlock-test-seen:{}", std::process::id());
    assert!(podman(&["tag", &own, &image]).status.success());
    h.config(&format!("[sandbox.container]\nimage = \"{image}\"\n"));
    let records = || {
        glob(&h.sandboxes(), "container-images")
            .iter()
            .flat_map(|d| std::fs::read_dir(d).unwrap())
            .count()
    };
    let out = launch(&h, &[], "true");
    assert!(out.status.success(), "{}", report(&out));
    let seen = records();
    assert_eq!(seen, 2, "one record per image");
    assert!(podman(&["rmi", &image]).status.success());
    let out = launch(&h, &[], "echo RAN");
    assert_eq!(out.status.code(), Some(125), "{}", report(&out));
    let e = stderr(&out);
    assert!(e.contains(&image) && e.contains("never pulls"), "{e}");
    assert!(!stdout(&out).contains("RAN"));
    assert_eq!(records(), 1, "the configured image's record is forgotten");
    assert!(podman(&["tag", &own, &image]).status.success());
    let out = launch(&h, &[], "echo RAN");
    assert!(out.status.success(), "{}", report(&out));
    assert_eq!(stdout(&out), "RAN\n");
    assert_eq!(records(), 2);
    let _ = podman(&["rmi", &image]);
}

/// The podman CLI with the tests' `containers.conf`, run to its end.
fn podman_cli(h: &TestHome, args: &[&str]) -> Output {
    Command::new("/usr/bin/podman")
        .env("CONTAINERS_CONF", conf(h))
        .args(args)
        .output()
        .unwrap()
}

/// A home and the airlock binary linked under the wrapper's name, to run it on the host; None
/// (with the reason printed) without Landlock.
fn wrapper_on_the_host() -> Option<(TestHome, PathBuf)> {
    if airlock_sandbox::native::landlock::abi().is_none() {
        eprintln!("skipped: this kernel has no Landlock");
        return None;
    }
    let h = TestHome::new("home/code/app");
    let wrapper = h.root.join("airlock-container-exec");
    std::os::unix::fs::symlink(common::AIRLOCK, &wrapper).unwrap();
    Some((h, wrapper))
}

/// The wrapper the container runs, started on the host under its name: Landlock keeps writes to
/// its writable paths, airlock's filter refuses namespaces, and the command's status passes.
#[test]
fn the_exec_wrapper_confines_writes_and_refuses_namespaces() {
    let Some((h, wrapper)) = wrapper_on_the_host() else {
        return;
    };
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

/// The wrapper as init, on the host (where it is not PID 1, so it is the workload's subreaper):
/// an orphan of the workload is reparented to it and reaped, and a workload killed by SIGTERM
/// ends it with 128+15 (with no status FIFO there is no record: the supervisor would read an
/// exit). Control: the orphan's parent is the wrapper, the workload's own parent.
#[test]
fn the_exec_wrapper_reaps_orphans_and_ends_with_128_plus_the_workloads_signal() {
    let Some((_h, wrapper)) = wrapper_on_the_host() else {
        return;
    };
    let script = "o=$( (sleep 0.3 >/dev/null 2>&1 & echo $!) ); sleep 0.1; \
                  echo \"orphan-ppid=$(cut -d' ' -f4 /proc/$o/stat) parent=$PPID\"; sleep 0.6; \
                  test -e /proc/$o && echo LEFT; kill -TERM $$; echo SURVIVED";
    let out = Command::new(&wrapper)
        .args(["--writable=/dev", "--", "sh", "-c", script])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(128 + libc::SIGTERM),
        "{}",
        report(&out)
    );
    let seen = stdout(&out);
    let line = seen.lines().next().unwrap_or_default();
    let (orphan, parent) = line
        .strip_prefix("orphan-ppid=")
        .and_then(|l| l.split_once(" parent="))
        .unwrap_or_else(|| panic!("{seen}"));
    assert_eq!(orphan, parent, "{seen}");
    assert!(
        !seen.contains("LEFT") && !seen.contains("SURVIVED"),
        "{seen}"
    );
}

/// SIGKILL of airlock stops its container: the engine's client is not the container (conmon
/// keeps it), so airlock's watchdog kills it by name. Control: the container runs before.
#[test]
fn a_container_stops_when_airlock_is_killed() {
    if !podman_runs() {
        return;
    }
    let h = TestHome::new("home/code/app");
    let mut cmd = container_command(&h, &[], &launch_args("touch started; exec sleep 1000"));
    cmd.stdout(Stdio::null()).stderr(Stdio::null());
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

/// Overlays are podman's overlay volumes: the host's directory shows inside, writes land in
/// airlock's layer (kept across runs for `overlay`, gone for `tmpoverlay`), never on the host.
#[test]
fn overlay_writes_stay_in_airlocks_layer_and_never_reach_the_host() {
    if !podman_runs() {
        return;
    }
    let h = TestHome::new("home/code/app");
    let kept = h.home.join("kept");
    let gone = h.home.join("gone");
    write(&kept.join("seed"), "from the host\n");
    write(&gone.join("seed"), "from the host\n");
    h.config(&format!(
        "[[sandbox.mounts]]\npath = \"{}\"\nmode = \"overlay\"\n\n\
         [[sandbox.mounts]]\npath = \"{}\"\nmode = \"tmpoverlay\"\n",
        kept.display(),
        gone.display()
    ));
    let script = format!(
        "cat {k}/seed; echo inside > {k}/new; echo inside > {g}/new; echo changed > {k}/seed",
        k = kept.display(),
        g = gone.display()
    );
    let out = launch(&h, &[], &script);
    assert!(out.status.success(), "{}", report(&out));
    assert_eq!(stdout(&out), "from the host\n");
    // The host's directories are as they were.
    assert!(!kept.join("new").exists() && !gone.join("new").exists());
    assert_eq!(
        std::fs::read_to_string(kept.join("seed")).unwrap(),
        "from the host\n"
    );
    // Control: the next run sees the overlay's writes, and none of the tmpoverlay's.
    let script = format!(
        "cat {k}/new {k}/seed; ls {g}",
        k = kept.display(),
        g = gone.display()
    );
    let out = launch(&h, &[], &script);
    assert!(out.status.success(), "{}", report(&out));
    assert_eq!(stdout(&out), "inside\nchanged\nseed\n", "{}", report(&out));
    // The session's own files, the overlay's work dir included, are gone with it.
    let left: Vec<_> = glob(&h.sandboxes(), "container");
    assert!(
        left.iter()
            .all(|d| std::fs::read_dir(d).unwrap().next().is_none()),
        "{left:?}"
    );
}
