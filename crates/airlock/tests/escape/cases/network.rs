//! Network cases: with `--network none` host listeners on loopback (TCP and abstract unix
//! sockets, which live in the network namespace) are unreachable while the same attempt with
//! `--network host` works; host unix sockets on the filesystem are absent in every mode.

use std::fs;
use std::net::TcpListener;
use std::os::linux::net::SocketAddrExt as _;
use std::os::unix::fs::PermissionsExt as _;
use std::os::unix::net::{SocketAddr, UnixListener};

use super::files::s;
use crate::harness::{Mode, Net, Outcome, World, give};

pub fn none_host_tcp(mode: &Mode) -> Outcome {
    let mut w = World::new(mode)?;
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?.to_string();
    w.probe(Net::None, &["connect-tcp", &addr])?.denied(&[])?;
    // Controls: loopback itself works inside, and the listener is reachable with the host network.
    w.probe(Net::None, &["loopback-self"])?.succeeded()?;
    w.probe(Net::Host, &["connect-tcp", &addr])?.succeeded()?;
    drop(listener);
    Ok(())
}

pub fn none_host_abstract_socket(mode: &Mode) -> Outcome {
    let mut w = World::new(mode)?;
    let name = format!("airlock-escape-{}", w.token);
    let listener = UnixListener::bind_addr(&SocketAddr::from_abstract_name(name.as_bytes())?)?;
    w.probe(Net::None, &["connect-abstract", &name])?
        .denied(&[])?;
    w.probe(Net::Host, &["connect-abstract", &name])?
        .succeeded()?;
    drop(listener);
    Ok(())
}

/// Landlock does not cover connect() on unix sockets; the mount namespace must hide them.
pub fn host_unix_socket_absent(mode: &Mode) -> Outcome {
    let mut w = World::new(mode)?;
    let in_home = w.home.join(".ssh/agent.sock");
    let in_sibling = w.sibling.join("control.sock");
    let mut listeners = Vec::new();
    for path in [&in_home, &in_sibling] {
        listeners.push(UnixListener::bind(path)?);
        fs::set_permissions(path, fs::Permissions::from_mode(0o777))?;
        give(mode, path)?;
    }
    w.host_probe(&["connect-unix", s(&in_home)])?.succeeded()?;
    for path in [&in_home, &in_sibling] {
        for net in [Net::Host, Net::None] {
            w.probe(net, &["connect-unix", s(path)])?
                .denied(&["ENOENT"])?;
        }
    }
    drop(listeners);
    Ok(())
}

/// A published port is on the host's loopback only, never on every interface, and only for the
/// session; the sandbox's other ports are not reachable from the host at all.
pub fn publish_loopback_only(mode: &Mode) -> Outcome {
    use std::io::{Read as _, Write as _};
    let mut w = World::new(mode)?;
    w.put(&w.project.join("site/index.html"), "published\n")?;
    give(mode, &w.project.join("site"))?;
    let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let publish = format!("{port}:8000");
    let script = "python3 -m http.server 8000 --bind 127.0.0.1 --directory site >/dev/null 2>&1 & \
                  python3 -m http.server 8001 --bind 127.0.0.1 --directory site >/dev/null 2>&1 & \
                  while [ ! -e stop ]; do sleep 0.05; done";
    let cwd = w.project.clone();
    let (mut cmd, _, err) = w.airlock_command(
        &cwd,
        &[
            "run",
            "--network",
            "none",
            "--publish",
            &publish,
            "--",
            "sh",
            "-c",
            script,
        ],
    )?;
    let mut child = cmd.spawn()?;
    let get = |port: u16| -> Option<String> {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
        s.set_read_timeout(Some(std::time::Duration::from_secs(2)))
            .ok()?;
        s.write_all(b"GET / HTTP/1.0\r\n\r\n").ok()?;
        let mut body = String::new();
        s.read_to_string(&mut body).ok()?;
        Some(body)
    };
    let answered = crate::harness::wait_until(crate::harness::CONDITION_DEADLINE, || {
        get(port).is_some_and(|b| b.ends_with("published\n"))
    });
    let listeners = listeners_of(port);
    let other = get(8001);
    fs::write(w.project.join("stop"), "")?;
    let status = crate::harness::wait_deadline(&mut child, crate::harness::RUN_DEADLINE)?;
    if status.is_none() {
        let _ = child.kill();
        let _ = child.wait();
    }
    // Control: the forward works.
    crate::check!(
        answered,
        "the published port {port} never answered from the host: {}",
        fs::read_to_string(&err).unwrap_or_default().trim()
    );
    crate::check!(
        listeners == [format!("0100007F:{port:04X}")],
        "ESCAPE: the published port listens on {listeners:?}, not 127.0.0.1 alone"
    );
    crate::check!(
        other.is_none_or(|b| !b.ends_with("published\n")),
        "ESCAPE: the sandbox's unpublished port 8001 answered on the host's loopback"
    );
    crate::check!(
        TcpListener::bind(("127.0.0.1", port)).is_ok(),
        "the published port {port} is still held after the session"
    );
    Ok(())
}

/// The local addresses (hex, as `/proc/net/tcp{,6}` has them) listening on `port`.
fn listeners_of(port: u16) -> Vec<String> {
    let suffix = format!(":{port:04X}");
    ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .flat_map(|f| {
            fs::read_to_string(f)
                .unwrap_or_default()
                .lines()
                .skip(1)
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            (f.get(3) == Some(&"0A") && f.get(1).is_some_and(|a| a.ends_with(&suffix)))
                .then(|| f[1].to_owned())
        })
        .collect()
}
