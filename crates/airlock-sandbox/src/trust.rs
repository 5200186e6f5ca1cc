//! The host's TLS trust settings, carried in: the variables that name a CA bundle (a company's
//! TLS-inspecting proxy puts its root there) are passed through when the file they name is a
//! certificate bundle, and the file is bound read-only at the same path when the sandbox would
//! not otherwise see it.
//!
//! A variable naming anything else (a private key, a file of another kind, a directory outside the
//! system trust dirs) is not passed, so a mistaken or hostile variable cannot carry a secret in.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The variables tools read a CA bundle (or directory) from.
pub const CA_VARS: &[&str] = &[
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "NODE_EXTRA_CA_CERTS",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "PIP_CERT",
    "GIT_SSL_CAINFO",
    "GIT_SSL_CAPATH",
    "AWS_CA_BUNDLE",
    "CARGO_HTTP_CAINFO",
    "NIX_SSL_CERT_FILE",
    "DENO_CERT",
    "HTTPLIB2_CA_CERTS",
    "CLOUDSDK_CORE_CUSTOM_CA_CERTS_FILE",
];

/// Directories the sandbox already has, where a CA directory variable may point.
const SYSTEM_TRUST_DIRS: &[&str] = &["/etc/ssl/certs", "/etc/pki", "/usr"];

/// The largest bundle read to check it (the Mozilla bundle is ~220 KiB).
const BUNDLE_CAP: u64 = 8 << 20;

/// One CA variable to pass in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CaTrust {
    pub var: String,
    /// The value, as the host has it.
    pub path: PathBuf,
    /// The bundle to bind read-only at `path` (canonical), when the sandbox would not see it.
    pub bind: Option<PathBuf>,
}

/// Whether `bytes` are a bundle of certificates: at least one, and no private key.
pub fn is_ca_bundle(bytes: &[u8]) -> bool {
    let text = String::from_utf8_lossy(bytes);
    text.contains("-----BEGIN CERTIFICATE-----") && !text.contains("PRIVATE KEY")
}

/// The CA variables of `env` worth passing in; `visible` says whether the sandbox sees a path
/// without a bind. Several variables usually name one bundle: each value is looked at once.
pub fn gather(
    env: &std::collections::BTreeMap<String, String>,
    visible: impl Fn(&Path) -> bool,
) -> Vec<CaTrust> {
    let mut seen: std::collections::BTreeMap<&str, Option<Option<PathBuf>>> = Default::default();
    let mut out = Vec::new();
    for var in CA_VARS {
        let Some(value) = env.get(*var).filter(|v| v.starts_with('/')) else {
            continue;
        };
        let decided = seen
            .entry(value.as_str())
            .or_insert_with(|| decide(Path::new(value), &visible))
            .clone();
        if let Some(bind) = decided {
            out.push(CaTrust {
                var: (*var).to_owned(),
                path: PathBuf::from(value),
                bind,
            });
        }
    }
    out
}

/// None: not passed. Some(None): passed as it is. Some(Some(bundle)): passed, `bundle` bound.
fn decide(path: &Path, visible: &impl Fn(&Path) -> bool) -> Option<Option<PathBuf>> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    // The system bundle every sandbox sees anyway costs one stat.
    if meta.is_file() && visible(path) {
        return Some(None);
    }
    let real = airlock_config::canonicalize(path).ok()?;
    if real.is_dir() {
        return SYSTEM_TRUST_DIRS
            .iter()
            .any(|d| real.starts_with(d))
            .then_some(None);
    }
    if visible(path) && visible(&real) {
        return Some(None);
    }
    // One that needs a bind must be a certificate bundle.
    is_bundle_file(&real).then_some(Some(real))
}

/// Whether the regular file at `path` (links followed) is a certificate bundle ([`is_ca_bundle`]).
pub fn is_bundle_file(path: &Path) -> bool {
    airlock_config::hostfs::read_regular_following(path, BUNDLE_CAP)
        .is_ok_and(|bytes| is_ca_bundle(&bytes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    const CERT: &str = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";

    #[test]
    fn bundles_pass_keys_and_strangers_do_not() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let ca = root.join("corp-ca.pem");
        std::fs::write(&ca, CERT).unwrap();
        let key = root.join("key.pem");
        std::fs::write(&key, format!("{CERT}-----BEGIN PRIVATE KEY-----\nx\n")).unwrap();
        let text = root.join("notes.txt");
        std::fs::write(&text, "hello").unwrap();
        let env: BTreeMap<String, String> = [
            ("SSL_CERT_FILE", ca.display().to_string()),
            ("NODE_EXTRA_CA_CERTS", key.display().to_string()),
            ("REQUESTS_CA_BUNDLE", text.display().to_string()),
            ("CURL_CA_BUNDLE", "relative.pem".into()),
            ("SSL_CERT_DIR", root.display().to_string()),
            ("GIT_SSL_CAPATH", "/etc/ssl/certs".into()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        let found = gather(&env, |p| p.starts_with("/etc"));
        let vars: Vec<&str> = found.iter().map(|c| c.var.as_str()).collect();
        let mut expected = vec!["SSL_CERT_FILE"];
        if Path::new("/etc/ssl/certs").is_dir() {
            expected.push("GIT_SSL_CAPATH");
        }
        assert_eq!(vars, expected);
        assert_eq!(found[0].bind.as_deref(), Some(ca.as_path()));
    }
}
