//! Reading a credential's value on the host, when a request needs it.
//!
//! `env` values are the host's, as airlock was started (captured once; the supervisor's own
//! environment never changes). A `file` is read on every request (a rotated token is picked up at
//! once), capped at 64 KiB. A `command` or the keychain runs at most once a minute per rule: its
//! answer is kept that long, in memory only. A source that fails names the rule and why, never
//! what it printed (it may be half a secret).

use std::collections::BTreeMap;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use airlock_config::credentials::CredentialSource;

/// The most a file or a command may give: a token, not a document.
pub const VALUE_BYTES: u64 = 64 * 1024;
/// How long a command's or the keychain's answer is used before it is asked again.
pub const COMMAND_TTL: Duration = Duration::from_secs(60);
/// How long a command may take.
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(10);

/// One rule's source, with what it needs to be read.
#[derive(Debug)]
pub struct Source {
    source: CredentialSource,
    /// The `env` source's value, captured at start.
    captured: Option<String>,
    home: PathBuf,
    cached: Mutex<Option<(Instant, String)>>,
}

impl Source {
    /// `env` is the host's environment at start; `home` expands `~/` in a file source.
    pub fn new(source: &CredentialSource, env: &BTreeMap<String, String>, home: &Path) -> Source {
        let captured = match source {
            CredentialSource::Env(var) => env.get(var).cloned(),
            _ => None,
        };
        Source {
            source: source.clone(),
            captured,
            home: home.to_path_buf(),
            cached: Mutex::new(None),
        }
    }

    /// The value now, or why it cannot be read (never the value, never what a command printed).
    pub fn read(&self) -> Result<String, String> {
        match &self.source {
            CredentialSource::Env(var) => self
                .captured
                .clone()
                .filter(|v| !v.is_empty())
                .ok_or_else(|| format!("the host variable {var} is not set (or empty)")),
            CredentialSource::File(path) => {
                let path = match path.strip_prefix("~/") {
                    Some(rest) => self.home.join(rest),
                    None => PathBuf::from(path),
                };
                let bytes = std::fs::File::open(&path)
                    .and_then(|f| {
                        let mut bytes = Vec::new();
                        f.take(VALUE_BYTES + 1).read_to_end(&mut bytes)?;
                        Ok(bytes)
                    })
                    .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
                if bytes.len() as u64 > VALUE_BYTES {
                    return Err(format!("{} is larger than 64 KiB", path.display()));
                }
                value_of(bytes).map_err(|why| format!("{}: {why}", path.display()))
            }
            CredentialSource::Command(argv) => self.cached(|| {
                let mut cmd = Command::new(&argv[0]);
                cmd.args(&argv[1..]);
                run(cmd, &argv[0])
            }),
            CredentialSource::Keychain { service, account } => self.cached(|| {
                let account = account
                    .clone()
                    .or_else(|| std::env::var("USER").ok())
                    .unwrap_or_default();
                let cmd = keychain_command(service, &account);
                run(cmd, "the keychain")
            }),
        }
    }

    fn cached(&self, fetch: impl FnOnce() -> Result<String, String>) -> Result<String, String> {
        let mut cached = self.cached.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((at, value)) = cached.as_ref()
            && at.elapsed() < COMMAND_TTL
        {
            return Ok(value.clone());
        }
        let value = fetch()?;
        *cached = Some((Instant::now(), value.clone()));
        Ok(value)
    }
}

#[cfg(target_os = "macos")]
fn keychain_command(service: &str, account: &str) -> Command {
    let mut cmd = Command::new("/usr/bin/security");
    cmd.args(["find-generic-password", "-s", service, "-a", account, "-w"]);
    cmd
}

#[cfg(not(target_os = "macos"))]
fn keychain_command(service: &str, account: &str) -> Command {
    // libsecret's CLI (the GNOME keyring, KWallet through its Secret Service API).
    let mut cmd = Command::new("secret-tool");
    cmd.args(["lookup", "service", service, "account", account]);
    cmd
}

/// Runs `cmd` from `/` with stdin closed, for at most [`COMMAND_TIMEOUT`]; its stdout is the value.
fn run(mut cmd: Command, what: &str) -> Result<String, String> {
    cmd.current_dir("/")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut child = cmd.spawn().map_err(|e| format!("cannot run {what}: {e}"))?;
    let mut stdout = child.stdout.take().expect("piped");
    let reader = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = (&mut stdout).take(VALUE_BYTES + 1).read_to_end(&mut bytes);
        bytes
    });
    let deadline = Instant::now() + COMMAND_TIMEOUT;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "{what} took longer than {} s",
                    COMMAND_TIMEOUT.as_secs()
                ));
            }
            Err(e) => return Err(format!("cannot wait for {what}: {e}")),
        }
    };
    let bytes = reader.join().unwrap_or_default();
    if !status.success() {
        return Err(format!("{what} failed ({status})"));
    }
    if bytes.len() as u64 > VALUE_BYTES {
        return Err(format!("{what} printed more than 64 KiB"));
    }
    value_of(bytes).map_err(|why| format!("{what}: {why}"))
}

/// The text, one trailing newline removed; it must fit in a header value.
fn value_of(bytes: Vec<u8>) -> Result<String, String> {
    let text = String::from_utf8(bytes).map_err(|_| "the value is not UTF-8".to_owned())?;
    let text = text
        .strip_suffix('\n')
        .map(|t| t.strip_suffix('\r').unwrap_or(t))
        .unwrap_or(&text);
    if text.is_empty() {
        return Err("the value is empty".into());
    }
    if text.chars().any(|c| c.is_control()) {
        return Err("the value holds control characters (a header cannot carry them)".into());
    }
    Ok(text.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn each_source_reads_its_value_and_says_why_it_cannot() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path();
        std::fs::write(home.join("key"), "sk-file\n").unwrap();
        let src = |s: CredentialSource| Source::new(&s, &env(&[("K", "sk-env")]), home);
        assert_eq!(
            src(CredentialSource::Env("K".into())).read().unwrap(),
            "sk-env"
        );
        let missing = src(CredentialSource::Env("NOPE".into()))
            .read()
            .unwrap_err();
        assert!(missing.contains("NOPE is not set"), "{missing}");
        assert_eq!(
            src(CredentialSource::File("~/key".into())).read().unwrap(),
            "sk-file"
        );
        let gone = src(CredentialSource::File("~/gone".into()))
            .read()
            .unwrap_err();
        assert!(
            gone.contains("cannot read") && gone.contains("gone"),
            "{gone}"
        );
        let cmd = |argv: &[&str]| {
            src(CredentialSource::Command(
                argv.iter().map(|a| (*a).to_owned()).collect(),
            ))
            .read()
        };
        assert_eq!(cmd(&["printf", "sk-cmd\\n"]).unwrap(), "sk-cmd");
        // A failing command: its output (maybe half a secret) is never in the message.
        let failed = cmd(&["sh", "-c", "echo sk-half; exit 1"]).unwrap_err();
        assert!(
            failed.contains("failed") && !failed.contains("sk-half"),
            "{failed}"
        );
        let bad = cmd(&["printf", "a\\x01b"]).unwrap_err();
        assert!(bad.contains("control characters"), "{bad}");
        assert!(cmd(&["true"]).unwrap_err().contains("empty"));
        assert!(cmd(&["/nonexistent/x"]).unwrap_err().contains("cannot run"));
    }

    #[test]
    fn a_command_is_asked_once_per_minute() {
        let dir = tempfile::tempdir().unwrap();
        let count = dir.path().join("count");
        let script = format!("echo x >> {}; echo sk-1", count.display());
        let s = Source::new(
            &CredentialSource::Command(vec!["sh".into(), "-c".into(), script]),
            &BTreeMap::new(),
            dir.path(),
        );
        for _ in 0..3 {
            assert_eq!(s.read().unwrap(), "sk-1");
        }
        assert_eq!(std::fs::read_to_string(&count).unwrap().lines().count(), 1);
    }
}
