//! The sandbox's environment: rebuilt from scratch, never inherited.

use std::collections::BTreeMap;

use airlock_config::Profile;

use super::SpecError;
use crate::host::HostFacts;

/// Environment variables copied from the host when set (besides `env_passthrough`).
const ENV_FROM_HOST: &[&str] = &["TERM", "COLORTERM", "LANG", "LANGUAGE", "TZ"];

/// Environment variables airlock sets itself.
const ENV_RESERVED: &[&str] = &[
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "AIRLOCK",
    "AIRLOCK_PROJECT",
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
    "XDG_STATE_HOME",
    "XDG_CACHE_HOME",
];

const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// The variables through which curl, git, pip, npm, yarn, cargo and Node find the egress proxy. They
/// override anything passed through: in proxy mode there is no other way out.
pub(super) fn proxy_environment(env: &mut BTreeMap<String, String>, url: &str) {
    for key in [
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "http_proxy",
        "https_proxy",
        "all_proxy",
        "npm_config_proxy",
        "npm_config_https_proxy",
        "YARN_HTTP_PROXY",
        "YARN_HTTPS_PROXY",
        "PIP_PROXY",
        "CARGO_HTTP_PROXY",
        "GLOBAL_AGENT_HTTP_PROXY",
    ] {
        env.insert(key.into(), url.into());
    }
    for key in ["NO_PROXY", "no_proxy"] {
        env.insert(key.into(), "localhost,127.0.0.1,::1".into());
    }
    env.insert("NODE_USE_ENV_PROXY".into(), "1".into());
}

/// The proxy the egress proxy sends allowed traffic through: `[network] upstream_proxy` when set
/// (`""` for none), else the host's `HTTPS_PROXY`, `https_proxy`, `HTTP_PROXY`, `http_proxy`.
pub(super) fn upstream_proxy(profile: &Profile, host: &HostFacts) -> Option<String> {
    match &profile.egress.upstream_proxy {
        Some(url) => Some(url.clone()).filter(|u| !u.is_empty()),
        None => ["HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"]
            .iter()
            .find_map(|k| host.env.get(*k).filter(|v| !v.is_empty()).cloned()),
    }
}

/// Whether `key` is one of the variables airlock sets itself (tools cannot override them).
pub(super) fn is_reserved(key: &str) -> bool {
    ENV_RESERVED.contains(&key)
}

pub(super) fn environment(
    profile: &Profile,
    host: &HostFacts,
    name: &str,
    shell: &str,
) -> Result<BTreeMap<String, String>, SpecError> {
    let home = host.home.to_string_lossy().into_owned();
    let mut env = BTreeMap::new();
    for key in ENV_FROM_HOST {
        if let Some(value) = host.env.get(*key) {
            env.insert((*key).to_owned(), value.clone());
        }
    }
    for (key, value) in &host.env {
        if key.starts_with("LC_") {
            env.insert(key.clone(), value.clone());
        }
    }
    for key in &profile.env_passthrough {
        if ENV_RESERVED.contains(&key.as_str()) {
            return Err(SpecError::ReservedEnv(key.clone()));
        }
        if let Some(value) = host.env.get(key) {
            env.insert(key.clone(), value.clone());
        }
    }
    let path = host
        .env
        .get("PATH")
        .map(String::as_str)
        .unwrap_or(DEFAULT_PATH);
    env.entry("PATH".into()).or_insert_with(|| path.to_owned());
    for (key, value) in [
        ("HOME", home.clone()),
        ("USER", host.user.clone()),
        ("LOGNAME", host.user.clone()),
        ("SHELL", shell.to_owned()),
        ("XDG_CONFIG_HOME", format!("{home}/.config")),
        ("XDG_DATA_HOME", format!("{home}/.local/share")),
        ("XDG_STATE_HOME", format!("{home}/.local/state")),
        ("XDG_CACHE_HOME", format!("{home}/.cache")),
        ("AIRLOCK", "1".into()),
        ("AIRLOCK_PROJECT", name.to_owned()),
    ] {
        env.insert(key.into(), value);
    }
    Ok(env)
}
