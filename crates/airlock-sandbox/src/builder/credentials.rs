//! What `[network.credentials]` adds to a `--network proxy` launch: the placeholder variables, and
//! the session CA trusted inside: its certificate at `/run/airlock/egress/ca.pem`, and a bundle
//! (the host's trust plus it) at `/run/airlock/egress/bundle.pem`, over the system bundle and
//! named by the CA variables tools read. The files are written by the launch, from the CA the
//! proxy made ([`crate::spec::CredentialTrust`]); the builder only plans where they go.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use airlock_config::{NetworkMode, Profile};

use super::MountPlan;
use crate::host::HostFacts;
use crate::spec::{CredentialTrust, MountOp};

/// The session CA inside.
pub const CA_INSIDE: &str = "/run/airlock/egress/ca.pem";
/// The host's trust plus the session CA, inside.
pub const BUNDLE_INSIDE: &str = "/run/airlock/egress/bundle.pem";

/// The system bundles a distribution's tools read by default; each one the host has is covered.
const SYSTEM_BUNDLES: &[&str] = &[
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/cert.pem",
];

/// The CA variables set to the bundle; `NODE_EXTRA_CA_CERTS` (added to Node's own roots) gets
/// the CA alone. Directory variables are left as they are.
const BUNDLE_VARS: &[&str] = &[
    "SSL_CERT_FILE",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "PIP_CERT",
    "GIT_SSL_CAINFO",
    "AWS_CA_BUNDLE",
    "CARGO_HTTP_CAINFO",
    "NIX_SSL_CERT_FILE",
    "DENO_CERT",
    "HTTPLIB2_CA_CERTS",
    "CLOUDSDK_CORE_CUSTOM_CA_CERTS_FILE",
];

/// Plans the trust files and sets the variables; `None` when nothing is injected (no rule, or a
/// network mode without the proxy). Warnings say which host variables the placeholders replace.
pub(super) fn plan(
    profile: &Profile,
    host: &HostFacts,
    state_root: &Path,
    network: NetworkMode,
    env: &mut BTreeMap<String, String>,
    plan: &mut MountPlan,
    warnings: &mut Vec<String>,
) -> Option<CredentialTrust> {
    if network != NetworkMode::Proxy || profile.credentials.is_empty() {
        return None;
    }
    let dir = state_root.join("egress");
    // The host's own trust: a CA variable's bundle when the host sets one, else the system's.
    let base = ["SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"]
        .iter()
        .find_map(|var| host.ca_trust.iter().find(|c| c.var == *var))
        .map(|c| c.bind.clone().unwrap_or_else(|| c.path.clone()))
        .or_else(|| {
            SYSTEM_BUNDLES
                .iter()
                .map(PathBuf::from)
                .find(|p| p.is_file())
        });
    let trust = CredentialTrust {
        ca: dir.join("ca.pem"),
        bundle: dir.join("bundle.pem"),
        base,
    };
    for (source, target) in [(&trust.ca, CA_INSIDE), (&trust.bundle, BUNDLE_INSIDE)] {
        plan.push(
            MountOp::Bind {
                source: source.clone(),
                target: target.into(),
                writable: false,
            },
            "the session CA ([network.credentials])",
        );
    }
    for system in SYSTEM_BUNDLES.iter().filter(|p| Path::new(p).is_file()) {
        plan.push(
            MountOp::Bind {
                source: trust.bundle.clone(),
                target: system.into(),
                writable: false,
            },
            "the session CA ([network.credentials])",
        );
    }
    for var in BUNDLE_VARS {
        env.insert((*var).to_owned(), BUNDLE_INSIDE.to_owned());
    }
    env.insert("NODE_EXTRA_CA_CERTS".into(), CA_INSIDE.into());
    for cred in profile.credentials.values() {
        let Some(var) = &cred.placeholder_env else {
            continue;
        };
        if env.contains_key(var) {
            warnings.push(format!(
                "{var} is set to the placeholder of [network.credentials.{}] ({}); the value \
                 env_passthrough or [sandbox.environment] gave it is not passed in",
                cred.name,
                cred.origin.display()
            ));
        }
        env.insert(var.clone(), cred.placeholder.clone());
    }
    Some(trust)
}

/// The largest host bundle read into the sandbox's bundle (the Mozilla bundle is ~220 KiB).
const BASE_BUNDLE_BYTES: u64 = 8 << 20;

/// Writes the session CA `ca_pem` and the bundle (the host's trust, then the CA) where `trust`
/// says, each as a new file renamed into place: a sandbox of the project still running keeps the
/// files it was started with (its binds hold the old ones).
pub fn write_trust(trust: &CredentialTrust, ca_pem: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
    let dir = trust.ca.parent().unwrap_or(Path::new("/"));
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let mut bundle = match &trust.base {
        Some(base) => airlock_config::hostfs::read_regular_following(base, BASE_BUNDLE_BYTES)
            .map_err(|e| {
                std::io::Error::new(e.kind(), format!("cannot read {}: {e}", base.display()))
            })?,
        None => Vec::new(),
    };
    if !bundle.is_empty() && !bundle.ends_with(b"\n") {
        bundle.push(b'\n');
    }
    bundle.extend_from_slice(ca_pem.as_bytes());
    for (path, bytes) in [(&trust.ca, ca_pem.as_bytes()), (&trust.bundle, &bundle[..])] {
        let temp = path.with_extension(format!("{}.tmp", std::process::id()));
        let _ = std::fs::remove_file(&temp);
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&temp)?;
        file.write_all(bytes)?;
        drop(file);
        std::fs::rename(&temp, path)?;
    }
    Ok(())
}
