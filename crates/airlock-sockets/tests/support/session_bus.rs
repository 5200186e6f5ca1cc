//! A private session bus for tests: `dbus-daemon --nofork` with a config that listens on one
//! socket, activates nothing and lets anyone own any name. `dbus.rs` (airlock-sockets' portal
//! tests) and airlock-egress's `desktop.rs` (the notification tests) put their fakes on it.

#![allow(dead_code)]

use std::fs;
use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// No service directories (nothing gets activated) and no includes.
pub const BUS_CONFIG: &str = r#"<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:path=@BUS@</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
"#;

/// A running bus; the daemon is killed when this drops.
pub struct SessionBus {
    /// The bus socket, `<dir>/bus`.
    pub socket: PathBuf,
    /// `unix:path=<socket>`.
    pub address: String,
    daemon: Child,
}

impl SessionBus {
    /// Starts `dbus_daemon` on `<dir>/bus` and returns once it listens.
    pub fn start(dbus_daemon: &Path, dir: &Path) -> SessionBus {
        let socket = dir.join("bus");
        let config = dir.join("session.conf");
        fs::write(
            &config,
            BUS_CONFIG.replace("@BUS@", socket.to_str().unwrap()),
        )
        .unwrap();
        let mut daemon = Command::new(dbus_daemon)
            .arg("--nofork")
            .arg("--print-address")
            .arg(format!("--config-file={}", config.display()))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // The address is printed once the bus listens.
        let mut line = String::new();
        BufReader::new(daemon.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert!(line.starts_with("unix:path="), "dbus-daemon said {line:?}");
        let address = format!("unix:path={}", socket.display());
        SessionBus {
            socket,
            address,
            daemon,
        }
    }
}

impl Drop for SessionBus {
    fn drop(&mut self) {
        let _ = self.daemon.kill();
        let _ = self.daemon.wait();
    }
}
