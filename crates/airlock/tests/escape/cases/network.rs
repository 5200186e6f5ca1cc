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
