//! Per-sandbox scope: each `airlock run` session gets a token of its own, and the daemon knows
//! which sandbox asks and what that sandbox may have.
//!
//! The supervisor writes a record, `sessions/<sha256(token)>.json` (0600, in the bridge state dir,
//! never mounted into a sandbox), holding the sandbox's project, home, network mode, egress rules
//! and the hosts `/credential` may answer for, and its own pid and start time. The sandbox gets
//! only the token, bound read-only where the shims read it. The record is removed when the session
//! ends; a record whose supervisor is gone (killed) is treated as revoked and removed on sight.
//! So a token opens exactly one live sandbox's scope, and the daemon needs no registration route.

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use airlock_config::{EgressSettings, NetworkMode};
use airlock_egress::{EgressPolicy, Host};
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use crate::paths::BridgePaths;
use crate::token::Token;

/// What one sandbox may ask of the bridge.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionScope {
    /// The sandbox's name, for the audit log.
    pub sandbox: String,
    pub project: PathBuf,
    /// The sandbox's home on the host (its state root's `home/`).
    pub home: PathBuf,
    pub network: NetworkMode,
    /// The egress rules, in `proxy` mode.
    pub egress: Option<ScopeEgress>,
    /// Hosts `/credential` answers for: the project's git remotes and `[bridge] credential_hosts`.
    pub credential_hosts: Vec<String>,
    /// The supervisor that registered the session, and its start time (clock ticks since boot).
    pub pid: u32,
    pub started: u64,
    /// The supervisor's control socket, for OAuth callback forwards ([`crate::callback`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control: Option<PathBuf>,
}

/// The sandbox's egress policy as configured: settings plus `--allow-host` / `--deny-host`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScopeEgress {
    pub settings: EgressSettings,
    pub allow_hosts: Vec<String>,
    pub deny_hosts: Vec<String>,
}

/// A registered session: removing it (on drop) revokes the token.
pub struct SessionGrant {
    record: PathBuf,
    token_file: PathBuf,
}

impl Drop for SessionGrant {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.record);
        let _ = std::fs::remove_file(&self.token_file);
    }
}

fn record_path(paths: &BridgePaths, token: &str) -> PathBuf {
    let digest = Sha256::digest(token.as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    paths.sessions_dir().join(format!("{hex}.json"))
}

/// Registers `scope` under a fresh token, written to `token_file` (0600) for the sandbox.
pub fn register(
    paths: &BridgePaths,
    scope: &SessionScope,
    token_file: &Path,
) -> std::io::Result<SessionGrant> {
    use std::os::unix::fs::DirBuilderExt as _;
    let token = Token::generate()?;
    let dir = paths.sessions_dir();
    match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => return Err(e),
        _ => {}
    }
    let record = record_path(paths, token.expose());
    let json = serde_json::to_vec(scope).map_err(std::io::Error::other)?;
    write_private(&record, &json)?;
    if let Some(parent) = token_file.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let grant = SessionGrant {
        record,
        token_file: token_file.to_path_buf(),
    };
    token.write(token_file).map_err(std::io::Error::other)?;
    Ok(grant)
}

fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(bytes)
}

/// The scope of a presented token, when it belongs to a live session.
pub fn lookup(paths: &BridgePaths, presented: &[u8]) -> Option<SessionScope> {
    let token = Token::parse(presented).ok()?;
    let record = record_path(paths, token.expose());
    let bytes = airlock_config::hostfs::read_regular(&record, 1 << 20).ok()?;
    let scope: SessionScope = serde_json::from_slice(&bytes).ok()?;
    if start_time(scope.pid) != Some(scope.started) {
        // The supervisor is gone (SIGKILL): its sandbox died with it.
        let _ = std::fs::remove_file(&record);
        return None;
    }
    Some(scope)
}

/// A process's start time (field 22 of `/proc/<pid>/stat`), to tell it from a reused pid.
pub fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses: fields start after the last ')'.
    let rest = &stat[stat.rfind(')')? + 2..];
    rest.split(' ').nth(19)?.parse().ok()
}

impl SessionScope {
    fn policy(&self) -> Option<EgressPolicy> {
        let egress = self.egress.as_ref()?;
        EgressPolicy::from_settings(&egress.settings, &egress.allow_hosts, &egress.deny_hosts).ok()
    }

    /// Whether the host may open `url` for this sandbox: only what its network could reach
    /// itself, never the host's own or private addresses.
    pub fn allows_open(&self, url: &url::Url) -> Result<(), String> {
        let shown = format!("{}://{}", url.scheme(), url.host_str().unwrap_or(""));
        let refused = || {
            format!(
                "/open: {shown} is not allowed by this sandbox's network policy (add it with \
                 --allow-host or [network] allow)"
            )
        };
        let host = Host::parse(url.host_str().unwrap_or("")).map_err(|_| refused())?;
        if is_local(&host) {
            return Err(format!(
                "/open: {shown} is this host or a private address; the sandbox cannot open it on \
                 the host"
            ));
        }
        match self.network {
            NetworkMode::Host => Ok(()),
            NetworkMode::None => Err(format!(
                "/open: {shown} is not opened: this sandbox has no network (--network none)"
            )),
            NetworkMode::Proxy => {
                let policy = self.policy().ok_or_else(refused)?;
                let port = url.port_or_known_default().unwrap_or(443);
                policy
                    .decide(&host, port)
                    .allowed
                    .then_some(())
                    .ok_or_else(refused)
            }
        }
    }

    /// Whether `path` (absolute, cleaned) is a regular file of this sandbox's project or home.
    /// Missing and not allowed get the same answer, so the route is no oracle for host paths.
    pub fn allows_edit(&self, path: &Path) -> Result<PathBuf, String> {
        let refused = || {
            format!(
                "/edit: {} is not a file in this sandbox's project or home",
                crate::audit::clip(&path.to_string_lossy(), 256)
            )
        };
        let real = airlock_config::canonicalize(path).map_err(|_| refused())?;
        let inside = real.starts_with(&self.project) || real.starts_with(&self.home);
        let file = std::fs::symlink_metadata(&real).is_ok_and(|m| m.is_file());
        (inside && file).then_some(real).ok_or_else(refused)
    }

    /// Whether `/credential` may answer for the `host=` of `input`.
    pub fn allows_credential(&self, input: &str) -> Result<(), String> {
        let host = input
            .lines()
            .find_map(|l| l.strip_prefix("host="))
            .map(|h| h.trim().to_ascii_lowercase())
            .or_else(|| {
                input.lines().find_map(|l| {
                    let rest = l.strip_prefix("url=")?.split_once("://")?.1;
                    Some(rest.split(['/', '?']).next()?.to_ascii_lowercase())
                })
            })
            .ok_or_else(|| "/credential: the input names no host".to_owned())?;
        let bare = host.rsplit_once('@').map_or(host.as_str(), |(_, h)| h);
        let name = bare.split(':').next().unwrap_or(bare);
        let word = name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-');
        let shown = if word { name } else { "(not a host name)" };
        let listed = self
            .credential_hosts
            .iter()
            .any(|h| h.eq_ignore_ascii_case(name));
        if !listed {
            return Err(format!(
                "/credential: {shown} is not a host this project's git remotes name (add it to \
                 [bridge] credential_hosts in the global config)"
            ));
        }
        let reachable = match self.network {
            NetworkMode::Host => true,
            NetworkMode::None => false,
            NetworkMode::Proxy => Host::parse(name)
                .ok()
                .zip(self.policy())
                .is_some_and(|(host, policy)| policy.decide(&host, 443).allowed),
        };
        reachable.then_some(()).ok_or_else(|| {
            format!("/credential: {shown} is not reachable under this sandbox's network policy")
        })
    }
}

/// `localhost`, `*.localhost` and loopback, private, link-local or metadata addresses.
fn is_local(host: &Host) -> bool {
    match host {
        Host::Ip(ip) => is_special(*ip),
        Host::Name(name) => name == "localhost" || name.ends_with(".localhost"),
    }
}

fn is_special(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
        }
        IpAddr::V6(v6) => {
            v6.is_loopback()
                || v6.is_unspecified()
                || (v6.segments()[0] & 0xfe00) == 0xfc00
                || (v6.segments()[0] & 0xffc0) == 0xfe80
                || v6
                    .to_ipv4_mapped()
                    .is_some_and(|v4| is_special(IpAddr::V4(v4)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scope(network: NetworkMode) -> SessionScope {
        SessionScope {
            sandbox: "app-1".into(),
            project: PathBuf::from("/p"),
            home: PathBuf::from("/h"),
            network,
            egress: Some(ScopeEgress {
                settings: EgressSettings::default(),
                allow_hosts: vec!["docs.example".into()],
                deny_hosts: vec![],
            }),
            credential_hosts: vec!["github.com".into()],
            pid: 1,
            started: 0,
            control: None,
        }
    }

    #[test]
    fn open_follows_the_network_policy() {
        let url = |s: &str| url::Url::parse(s).expect("url");
        let s = scope(NetworkMode::Proxy);
        assert!(s.allows_open(&url("https://docs.example/a?b")).is_ok());
        assert!(
            s.allows_open(&url("https://github.com/o/r")).is_ok(),
            "balanced preset"
        );
        let e = s
            .allows_open(&url("https://attacker.example/?d=x"))
            .expect_err("denied");
        assert!(e.contains("https://attacker.example is not allowed"), "{e}");
        for local in [
            "http://127.0.0.1:8080/",
            "http://localhost:3000/",
            "http://10.0.0.1/",
            "http://[::1]/",
        ] {
            assert!(s.allows_open(&url(local)).is_err(), "{local}");
            assert!(
                scope(NetworkMode::Host).allows_open(&url(local)).is_err(),
                "{local}"
            );
        }
        assert!(
            scope(NetworkMode::Host)
                .allows_open(&url("https://attacker.example/"))
                .is_ok()
        );
        assert!(
            scope(NetworkMode::None)
                .allows_open(&url("https://docs.example/"))
                .is_err()
        );
    }

    #[test]
    fn credentials_only_for_listed_reachable_hosts() {
        let s = scope(NetworkMode::Proxy);
        assert!(
            s.allows_credential("protocol=https\nhost=github.com\n")
                .is_ok()
        );
        assert!(
            s.allows_credential("protocol=https\nhost=GitHub.com:443\n")
                .is_ok()
        );
        assert!(s.allows_credential("url=https://github.com/o/r\n").is_ok());
        let e = s
            .allows_credential("protocol=https\nhost=gitlab.com\n")
            .expect_err("unlisted");
        assert!(e.contains("gitlab.com is not a host"), "{e}");
        assert!(
            scope(NetworkMode::None)
                .allows_credential("protocol=https\nhost=github.com\n")
                .is_err()
        );
        assert!(s.allows_credential("protocol=https\n").is_err());
    }

    #[test]
    fn edit_only_for_files_of_the_project_or_home() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = std::fs::canonicalize(dir.path()).expect("canonical");
        let mut s = scope(NetworkMode::Proxy);
        s.project = root.join("p");
        s.home = root.join("h");
        std::fs::create_dir_all(s.project.join("src")).expect("p");
        std::fs::create_dir_all(&s.home).expect("h");
        std::fs::write(s.project.join("src/main.rs"), "").expect("file");
        std::fs::write(root.join("secret"), "").expect("secret");
        std::os::unix::fs::symlink(root.join("secret"), s.project.join("link")).expect("link");
        assert!(s.allows_edit(&s.project.join("src/main.rs")).is_ok());
        let missing = s.allows_edit(&root.join("nope")).expect_err("missing");
        let outside = s.allows_edit(&root.join("secret")).expect_err("outside");
        assert_eq!(
            missing.replace("nope", "X"),
            outside.replace("secret", "X"),
            "same answer"
        );
        assert!(
            s.allows_edit(&s.project.join("link")).is_err(),
            "a link out"
        );
        assert!(
            s.allows_edit(&s.project.join("src")).is_err(),
            "a directory"
        );
        assert!(s.allows_edit(Path::new("/dev/null")).is_err(), "a device");
    }

    #[test]
    fn records_open_a_live_session_only() {
        let dir = tempfile::tempdir().expect("tempdir");
        let paths = BridgePaths::at(dir.path());
        let mut s = scope(NetworkMode::Proxy);
        s.pid = std::process::id();
        s.started = start_time(s.pid).expect("own start time");
        let token_file = dir.path().join("sandbox/token");
        let grant = register(&paths, &s, &token_file).expect("register");
        let token = std::fs::read(&token_file).expect("token");
        let token = token.strip_suffix(b"\n").expect("newline");
        assert_eq!(lookup(&paths, token), Some(s.clone()));
        assert_eq!(lookup(&paths, &[b'0'; 64]), None, "another token");
        drop(grant);
        assert_eq!(lookup(&paths, token), None, "revoked");
        // A record whose supervisor is gone is revoked too.
        s.started += 1;
        let _grant = register(&paths, &s, &token_file).expect("register");
        let token = std::fs::read(&token_file).expect("token");
        assert_eq!(lookup(&paths, token.strip_suffix(b"\n").expect("nl")), None);
    }
}
