//! The Docker filter end to end: a real engine (podman's Docker API, tests/common/podman.rs),
//! a real sandbox, and clients nobody here wrote inside it: the docker CLI and the Docker SDK for
//! Python. What reads and execs works; what creates, removes, copies files out or escalates gets
//! 403 and changes nothing on the engine.

mod common;
#[path = "common/podman.rs"]
mod podman;

use std::fs;
use std::path::PathBuf;
use std::process::Output;

use common::{TestHome, report, sandbox_starts, stderr, stdout, write};
use podman::{IMAGE, Podman};

const WHEELS: &str = "/var/cache/airlock-test-tools/wheels";

struct World {
    h: TestHome,
    engine: Podman,
    container: String,
}

impl World {
    fn new() -> Option<World> {
        if !sandbox_starts() {
            eprintln!("skipped: the sandbox cannot start here");
            return None;
        }
        let mut engine = match Podman::start() {
            Ok(engine) => engine,
            Err(why) => {
                eprintln!("skipped: no Docker-compatible engine: {why}");
                return None;
            }
        };
        let container = engine.run("echo hello-from-the-container; exec sleep 1000");
        let h = TestHome::new("home/code/app");
        h.config(&format!(
            "[tools.docker]\nenabled = true\nsocket = \"{}\"\n",
            engine.socket().display()
        ));
        Some(World {
            h,
            engine,
            container,
        })
    }

    /// `sh -c script` in the sandbox, `$C` the container's name and `$IMAGE` the image (set by
    /// the script itself: the sandbox passes only the host variables it knows).
    fn inside(&self, script: &str) -> Output {
        let script = format!("export C='{}' IMAGE='{IMAGE}'\n{script}", self.container);
        self.h
            .airlock(&["run", "--network", "none", "--", "sh", "-c", &script])
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .output()
            .expect("airlock")
    }
}

fn value<'a>(text: &'a str, key: &str) -> &'a str {
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{key}=")))
        .unwrap_or_else(|| panic!("no {key}= in {text}"))
}

const CLI: &str = r#"
echo "host=$DOCKER_HOST"
docker ps --format '{{.Names}}' > ps.out 2>&1; echo "ps=$?"
docker logs "$C" > logs.out 2>&1; echo "logs=$?"
docker inspect -f '{{.State.Running}}' "$C" > inspect.out 2>&1; echo "inspect=$?"
docker stats --no-stream --format '{{.Name}}' "$C" > stats.out 2>&1; echo "stats=$?"
docker exec "$C" echo exec-ran > exec.out 2>&1; echo "exec=$?"
script -qec 'stty rows 33 cols 111; docker exec -it "$C" sh -c "tty; echo tty-ran"' /dev/null > tty.out 2>&1; echo "tty=$?"
docker run --rm "$IMAGE" true > run.out 2>&1; echo "run=$?"
docker rm -f "$C" > rm.out 2>&1; echo "rm=$?"
docker cp "$C:/bin/busybox" ./copied > cp.out 2>&1; echo "cp=$?"
docker export "$C" > export.out 2>&1; echo "export=$?"
docker save "$IMAGE" > save.out 2>&1; echo "save=$?"
docker exec --privileged "$C" true > privileged.out 2>&1; echo "privileged=$?"
docker exec -u root "$C" true > root.out 2>&1; echo "root=$?"
docker exec -u 0 "$C" true > uid0.out 2>&1; echo "uid0=$?"
docker stop "$C" > stop.out 2>&1; echo "stop=$?"
"#;

#[test]
fn the_docker_cli_reads_and_execs_and_cannot_change_anything() {
    let Some(w) = World::new() else { return };
    let out = w.inside(CLI);
    let text = stdout(&out);
    assert!(out.status.success(), "{}", report(&out));
    assert!(value(&text, "host").ends_with("/docker.sock"), "{text}");
    let file = |name: &str| fs::read_to_string(w.h.project.join(format!("{name}.out"))).unwrap();
    for ok in ["ps", "logs", "inspect", "stats", "exec", "tty"] {
        assert_eq!(
            value(&text, ok),
            "0",
            "{ok}: {}\n{}",
            file(ok),
            report(&out)
        );
    }
    assert!(file("ps").contains(&w.container), "{}", file("ps"));
    assert!(file("logs").contains("hello-from-the-container"));
    assert_eq!(file("inspect").trim(), "true");
    assert!(file("exec").contains("exec-ran"));
    // A terminal inside the container, through the upgraded connection; the CLI's resize of it
    // (POST /exec/{id}/resize) was not refused, or the CLI would say so.
    assert!(
        file("tty").contains("/dev/pts/") && file("tty").contains("tty-ran"),
        "tty: {}",
        file("tty")
    );
    assert!(!file("tty").contains("resize"), "tty: {}", file("tty"));
    for denied in [
        "run",
        "rm",
        "cp",
        "export",
        "save",
        "privileged",
        "root",
        "uid0",
        "stop",
    ] {
        assert_ne!(
            value(&text, denied),
            "0",
            "{denied} worked: {}",
            file(denied)
        );
        assert!(
            file(denied).contains("read-only Docker access"),
            "{denied}: {}\n{}\nlog:\n{}",
            file(denied),
            report(&out),
            fs::read_to_string(log_path(&w.h)).unwrap_or_default()
        );
    }
    assert!(!w.h.project.join("copied").exists());
    assert!(
        w.engine.exists(&w.container),
        "the container is still there"
    );
    let log = fs::read_to_string(log_path(&w.h)).unwrap();
    assert!(log.contains(" allow ") && log.contains(" deny "), "{log}");
    assert!(!log.contains(&w.container), "no path is logged: {log}");
}

const SDK: &str = r#"
import docker, os, sys
c = docker.from_env()
name = os.environ["C"]
def attempt(key, f):
    try:
        f()
        print(key + "=ok")
    except docker.errors.APIError as e:
        print(key + "=%d %s" % (e.status_code, e.explanation))
attempt("list", lambda: [x.name for x in c.containers.list()])
attempt("logs", lambda: c.containers.get(name).logs())
attempt("exec", lambda: c.containers.get(name).exec_run("true"))
attempt("run", lambda: c.containers.run(os.environ["IMAGE"], "true", remove=True))
attempt("archive", lambda: c.containers.get(name).get_archive("/bin"))
attempt("save", lambda: b"".join(c.images.get(os.environ["IMAGE"]).save()))
attempt("privileged", lambda: c.containers.get(name).exec_run("true", privileged=True))
attempt("root", lambda: c.containers.get(name).exec_run("true", user="root"))
attempt("kill", lambda: c.containers.get(name).kill())
"#;

#[test]
fn the_python_sdk_gets_the_same_answers() {
    let Some(w) = World::new() else { return };
    let Some(wheel) = fs::read_dir(WHEELS).ok().and_then(|d| {
        d.flatten()
            .map(|e| e.path())
            .find(|p| p.to_string_lossy().ends_with(".whl"))
    }) else {
        eprintln!("skipped: no docker SDK wheel in {WHEELS} (scripts/test fetches it as root)");
        return;
    };
    let local: PathBuf = w.h.project.join("docker-sdk.whl");
    fs::copy(&wheel, &local).unwrap();
    write(&w.h.project.join("sdk.py"), SDK);
    let out = w.inside("PYTHONPATH=$PWD/docker-sdk.whl python3 sdk.py");
    let text = stdout(&out);
    assert!(out.status.success(), "{}", report(&out));
    for ok in ["list", "logs", "exec"] {
        assert_eq!(value(&text, ok), "ok", "{ok}: {text}\n{}", stderr(&out));
    }
    for denied in ["run", "archive", "save", "privileged", "root", "kill"] {
        let answer = value(&text, denied);
        assert!(
            answer.starts_with("403 ") && answer.contains("airlock"),
            "{denied}: {answer}"
        );
    }
    assert!(w.engine.exists(&w.container));
}

/// Raw requests, each on a connection of its own: `name=<status line>`.
const RAW: &str = r#"
import os, socket
path = os.environ["DOCKER_HOST"][len("unix://"):]
def send(name, data, read=True):
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)
    try:
        s.sendall(data)
    except OSError:
        pass
    s.settimeout(10)
    got = b""
    try:
        while b"\r\n" not in got:
            chunk = s.recv(4096)
            if not chunk:
                break
            got += chunk
    except OSError:
        pass
    print(name + "=" + (got.split(b"\r\n")[0].decode(errors="replace") or "closed"), flush=True)
    return s
def get(name, target, extra=b""):
    send(name, b"GET " + target + b" HTTP/1.1\r\nHost: docker\r\n" + extra + b"\r\n")
get("versioned", b"/v1.41/containers/json")
get("dotdot", b"/containers/x/../../images/x/get")
get("double-slash", b"//containers/json")
get("encoded-slash", b"/containers%2Fjson")
get("double-encoded", b"/containers/%252e%252e/json")
get("query-smuggle", b"/containers/json%3F/../../images/get")
get("archive", b"/containers/" + os.environ["C"].encode() + b"/archive?path=/")
get("absolute-form", b"http://docker/containers/json")
get("long-path", b"/" + b"a" * 65536)
get("many-headers", b"/_ping", b"".join(b"X-%d: y\r\n" % i for i in range(10000)))
send("chunked", b"POST /containers/x/exec HTTP/1.1\r\nHost: d\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello")
send("two-lengths", b"POST /exec/x/resize HTTP/1.1\r\nHost: d\r\nContent-Length: 0\r\nContent-Length: 5\r\n\r\n")
send("bare-lf", b"GET /_ping HTTP/1.1\nHost: d\n\n")
send("huge-head", b"GET /_ping HTTP/1.1\r\nX: " + b"a" * (1 << 20) + b"\r\n\r\n")
lazy = send("never-reads", b"GET /events HTTP/1.1\r\nHost: d\r\n\r\n")
get("still-serving", b"/_ping")
"#;

#[test]
fn raw_requests_are_normalised_before_they_are_matched() {
    let Some(w) = World::new() else { return };
    write(&w.h.project.join("raw.py"), RAW);
    let out = w.inside("python3 raw.py");
    let text = stdout(&out);
    assert!(out.status.success(), "{}", report(&out));
    let status = |name: &str| value(&text, name).to_owned();
    assert!(status("versioned").contains(" 200 "), "{text}");
    assert!(status("still-serving").contains(" 200 "), "{text}");
    for (name, code) in [
        ("dotdot", "400"),
        ("double-slash", "400"),
        ("encoded-slash", "400"),
        ("double-encoded", "400"),
        ("query-smuggle", "400"),
        ("archive", "403"),
        ("absolute-form", "400"),
        ("chunked", "501"),
        ("two-lengths", "400"),
        ("bare-lf", "400"),
    ] {
        assert!(
            status(name).contains(&format!(" {code} ")),
            "{name}: {text}"
        );
    }
    for name in ["long-path", "many-headers", "huge-head"] {
        let s = status(name);
        assert!(
            s.contains(" 431 ") || s.contains(" 414 ") || s.contains(" 413 ") || s == "closed",
            "{name}: {s}"
        );
    }
}

fn log_path(h: &TestHome) -> PathBuf {
    let entry = fs::read_dir(h.sandboxes())
        .unwrap()
        .flatten()
        .next()
        .expect("a sandbox");
    entry.path().join("logs/internal/docker.log")
}
