//! A connection to the user's session bus: the address (unix sockets only), the `EXTERNAL`
//! authentication, `Hello`, and method calls with their answers.
//!
//! No program is run for it (no `dbus-send`, `gdbus` or `notify-send` looked up on a PATH the
//! sandbox may have written into): the supervisor speaks the protocol itself, to the socket the
//! host's `DBUS_SESSION_BUS_ADDRESS` names.

use std::io::{self, Read as _, Write as _};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::wire::{self, Call, Kind, Message};

/// Where the session bus listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BusAddress {
    Path(PathBuf),
    /// Linux's abstract socket namespace (`unix:abstract=`).
    Abstract(Vec<u8>),
}

impl BusAddress {
    /// The first `unix:path=` or `unix:abstract=` entry of a `DBUS_SESSION_BUS_ADDRESS` value
    /// (`;`-separated, values percent-escaped). Other transports (`tcp:`, `nonce-tcp:`,
    /// `unixexec:`) are never used: they would mean the network or a program to run.
    pub fn parse(value: &str) -> Result<BusAddress, String> {
        for entry in value.split(';') {
            let Some(keys) = entry.strip_prefix("unix:") else {
                continue;
            };
            for pair in keys.split(',') {
                let (key, raw) = pair.split_once('=').unwrap_or((pair, ""));
                let bytes = unescape(raw).ok_or_else(|| {
                    format!("DBUS_SESSION_BUS_ADDRESS {value:?}: a bad %-escape in {pair:?}")
                })?;
                match key {
                    "path" if bytes.first() == Some(&b'/') => {
                        use std::os::unix::ffi::OsStringExt as _;
                        return Ok(BusAddress::Path(std::ffi::OsString::from_vec(bytes).into()));
                    }
                    "abstract" if !bytes.is_empty() => return Ok(BusAddress::Abstract(bytes)),
                    _ => {}
                }
            }
        }
        Err(format!(
            "DBUS_SESSION_BUS_ADDRESS {:?} names no unix:path= or unix:abstract= socket",
            airlock_config::printable(value)
        ))
    }

    /// The session bus of this process's environment: `DBUS_SESSION_BUS_ADDRESS`, else
    /// `$XDG_RUNTIME_DIR/bus` when that is a socket. None: no session bus.
    pub fn from_env() -> Option<Result<BusAddress, String>> {
        if let Some(value) = std::env::var_os("DBUS_SESSION_BUS_ADDRESS") {
            return Some(BusAddress::parse(&value.to_string_lossy()));
        }
        let dir = std::env::var_os("XDG_RUNTIME_DIR")?;
        let path = PathBuf::from(dir).join("bus");
        use std::os::unix::fs::FileTypeExt as _;
        let is_socket = std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_socket());
        is_socket.then_some(Ok(BusAddress::Path(path)))
    }
}

fn unescape(raw: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(raw.len());
    let mut bytes = raw.bytes();
    while let Some(b) = bytes.next() {
        if b == b'%' {
            let hex = [bytes.next()?, bytes.next()?];
            out.push(u8::from_str_radix(std::str::from_utf8(&hex).ok()?, 16).ok()?);
        } else {
            out.push(b);
        }
    }
    Some(out)
}

/// One authenticated connection.
pub struct Bus {
    stream: UnixStream,
    buf: Vec<u8>,
    serial: u32,
    /// This connection's unique name (`:1.42`).
    pub unique: String,
}

/// How long the bus may take to authenticate and answer a call.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(5);

impl Bus {
    /// Connects, authenticates as this process's uid and says `Hello`.
    pub fn connect(address: &BusAddress) -> io::Result<Bus> {
        let stream = match address {
            BusAddress::Path(path) => UnixStream::connect(path)?,
            BusAddress::Abstract(name) => {
                use std::os::linux::net::SocketAddrExt as _;
                let addr = std::os::unix::net::SocketAddr::from_abstract_name(name)?;
                UnixStream::connect_addr(&addr)?
            }
        };
        stream.set_write_timeout(Some(CALL_TIMEOUT))?;
        stream.set_read_timeout(Some(CALL_TIMEOUT))?;
        let mut bus = Bus {
            stream,
            buf: Vec::new(),
            serial: 0,
            unique: String::new(),
        };
        bus.authenticate()?;
        let hello = bus.call(&Call {
            destination: DBUS,
            path: "/org/freedesktop/DBus",
            interface: DBUS,
            member: "Hello",
            args: vec![],
            no_reply: false,
        })?;
        bus.unique = first_str(&hello).ok_or_else(|| bad("Hello gave no name"))?;
        Ok(bus)
    }

    fn authenticate(&mut self) -> io::Result<()> {
        let uid = nix::unistd::geteuid().as_raw().to_string();
        let hex: String = uid.bytes().map(|b| format!("{b:02x}")).collect();
        self.stream
            .write_all(format!("\0AUTH EXTERNAL {hex}\r\n").as_bytes())?;
        let mut line = Vec::new();
        let mut byte = [0u8; 1];
        while !line.ends_with(b"\r\n") {
            if line.len() > 512 || self.stream.read(&mut byte)? == 0 {
                return Err(bad("the bus ended the authentication"));
            }
            line.push(byte[0]);
        }
        if !line.starts_with(b"OK ") {
            return Err(bad("the bus refused EXTERNAL authentication"));
        }
        self.stream.write_all(b"BEGIN\r\n")
    }

    /// Sends `call`; its serial.
    pub fn send(&mut self, call: &Call<'_>) -> io::Result<u32> {
        self.serial += 1;
        self.stream.write_all(&wire::encode(call, self.serial))?;
        Ok(self.serial)
    }

    /// Sends `call` and waits for its answer (other messages meanwhile are dropped); a D-Bus
    /// error is an `io::Error` naming it.
    pub fn call(&mut self, call: &Call<'_>) -> io::Result<Message> {
        let serial = self.send(call)?;
        let until = Instant::now() + CALL_TIMEOUT;
        loop {
            let Some(m) = self.next(until)? else {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("{} gave no answer within 5 s", call.member),
                ));
            };
            if m.reply_serial != Some(serial) {
                continue;
            }
            if m.is(Kind::Error) {
                let name = m.error_name.unwrap_or_default();
                return Err(bad(&format!("{}: {name}", call.member)));
            }
            return Ok(m);
        }
    }

    /// The next message, or None once `until` has passed without one.
    pub fn next(&mut self, until: Instant) -> io::Result<Option<Message>> {
        loop {
            if let Some(len) = wire::message_len(&self.buf).map_err(bad)?
                && self.buf.len() >= len
            {
                let m = wire::decode(&self.buf[..len]).map_err(bad);
                self.buf.drain(..len);
                return m.map(Some);
            }
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            self.stream.set_read_timeout(Some(left))?;
            let mut chunk = [0u8; 4096];
            match self.stream.read(&mut chunk) {
                Ok(0) => return Err(bad("the bus closed the connection")),
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
}

pub const DBUS: &str = "org.freedesktop.DBus";

pub fn first_str(m: &Message) -> Option<String> {
    match m.body.first() {
        Some(wire::Value::Str(s)) => Some(s.clone()),
        _ => None,
    }
}

pub fn first_u32(m: &Message) -> Option<u32> {
    match m.body.first() {
        Some(wire::Value::U32(v)) => Some(*v),
        _ => None,
    }
}

fn bad(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_unix_sockets_are_bus_addresses() {
        assert_eq!(
            BusAddress::parse("unix:path=/run/user/1000/bus"),
            Ok(BusAddress::Path("/run/user/1000/bus".into()))
        );
        assert_eq!(
            BusAddress::parse("unix:guid=abc,path=/tmp/a%2cb"),
            Ok(BusAddress::Path("/tmp/a,b".into()))
        );
        assert_eq!(
            BusAddress::parse("tcp:host=10.0.0.1,port=5;unix:abstract=/tmp/dbus-x"),
            Ok(BusAddress::Abstract(b"/tmp/dbus-x".to_vec()))
        );
        for bad in [
            "tcp:host=127.0.0.1,port=1234",
            "unixexec:path=/bin/sh",
            "unix:path=relative",
            "unix:path=/tmp/%zz",
            "",
        ] {
            assert!(BusAddress::parse(bad).is_err(), "{bad}");
        }
    }
}
