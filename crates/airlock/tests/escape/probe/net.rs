//! Networking: TCP, abstract and path unix sockets, loopback.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::linux::net::SocketAddrExt as _;
use std::os::unix::net::{SocketAddr as UnixAddr, UnixStream};
use std::time::Duration;

use super::{Attempt, Denial, denial};

pub(super) fn connect_tcp(addr: &str) -> Attempt {
    let parsed: SocketAddr = addr.parse().map_err(|_| Denial {
        name: "EINVAL".into(),
        what: format!("bad address {addr}"),
    })?;
    TcpStream::connect_timeout(&parsed, Duration::from_secs(5))
        .map(|_| format!("connected to {addr}"))
        .map_err(|e| denial(format!("connect tcp {addr}"), &e))
}

pub(super) fn connect_abstract(name: &str) -> Attempt {
    let addr =
        UnixAddr::from_abstract_name(name.as_bytes()).map_err(|e| denial("abstract name", &e))?;
    UnixStream::connect_addr(&addr)
        .map(|_| format!("connected to @{name}"))
        .map_err(|e| denial(format!("connect @{name}"), &e))
}

pub(super) fn loopback_self() -> Attempt {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| denial("bind 127.0.0.1:0", &e))?;
    let addr = listener
        .local_addr()
        .map_err(|e| denial("local_addr", &e))?;
    TcpStream::connect_timeout(&addr, Duration::from_secs(5))
        .map(|_| format!("connected to own listener {addr}"))
        .map_err(|e| denial(format!("connect {addr}"), &e))
}
