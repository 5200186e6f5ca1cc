//! The sandbox's environment: rebuilt from scratch, never inherited.

use std::collections::BTreeMap;
use std::path::PathBuf;

use airlock_config::{EnvSource, NetworkMode, Profile};

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

/// The variables through which curl, git, pip, npm, yarn, cargo and Node find the egress proxy.
const PROXY_URL_VARS: &[&str] = &[
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
];

/// What proxy mode sets besides the URLs.
const PROXY_OTHER_VARS: &[&str] = &["NO_PROXY", "no_proxy", "NODE_USE_ENV_PROXY"];

/// What the host bridge sets besides `PATH` (which it prefixes) and `AIRLOCK_*`.
const BRIDGE_VARS: &[&str] = &["BROWSER", "GIT_CONFIG_SYSTEM"];

/// Points every proxy variable at the egress proxy. They override anything passed through: in
/// proxy mode there is no other way out.
pub(super) fn proxy_environment(env: &mut BTreeMap<String, String>, url: &str) {
    for key in PROXY_URL_VARS {
        env.insert((*key).into(), url.into());
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

/// Why a `[sandbox.environment]` entry cannot be applied. Values never appear in these messages.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum EnvironmentError {
    /// The NAME is one airlock sets itself in this launch.
    #[error("{}: [sandbox.environment.{name}]: {name} {by}; {fix}", origin.display())]
    Reserved {
        name: String,
        origin: PathBuf,
        by: &'static str,
        fix: &'static str,
    },
    /// A `file` source that cannot be used.
    #[error(
        "{}: [sandbox.environment.{name}] file = {written:?} ({}): {reason}; make it a regular \
         UTF-8 file of at most 64 KiB, or fix or remove the entry",
        origin.display(),
        path.display()
    )]
    File {
        name: String,
        origin: PathBuf,
        written: String,
        path: PathBuf,
        reason: String,
    },
}

/// Who else sets `name` in a launch with `network` and the bridge as `bridge` says, and what to do
/// instead; None when `[sandbox.environment]` may set it.
fn set_by_airlock(
    name: &str,
    network: NetworkMode,
    bridge: bool,
) -> Option<(&'static str, &'static str)> {
    if ENV_RESERVED.contains(&name) || name.starts_with("AIRLOCK_") {
        return Some((
            "is set by airlock itself",
            "remove the entry (airlock's own variables cannot be changed)",
        ));
    }
    if network == NetworkMode::Proxy
        && (PROXY_URL_VARS.contains(&name) || PROXY_OTHER_VARS.contains(&name))
    {
        return Some((
            "points the sandbox at airlock's egress proxy in proxy mode",
            "remove the entry; to send traffic through another proxy set [network] upstream_proxy",
        ));
    }
    if bridge && BRIDGE_VARS.contains(&name) {
        return Some((
            "is set by the host bridge",
            "remove the entry, or set [sandbox] bridge = false",
        ));
    }
    None
}

/// Applies `[sandbox.environment]` over `env` (after the tools' and the CA variables, so it wins
/// over both). Returns what `--print-spec` shows instead of each value taken from a host variable
/// or a file: `<from env VAR>`, `<from file PATH>`.
///
/// A NAME airlock sets later in the launch (the bridge's, proxy mode's) is refused rather than
/// silently replaced. An `env` source whose host variable is missing sets nothing (config loading
/// warned about it).
pub(super) fn apply_configured(
    env: &mut BTreeMap<String, String>,
    profile: &Profile,
    host: &HostFacts,
    network: NetworkMode,
) -> Result<BTreeMap<String, String>, EnvironmentError> {
    let mut placeholders = BTreeMap::new();
    for (name, var) in &profile.environment {
        if let Some((by, fix)) = set_by_airlock(name, network, profile.bridge) {
            return Err(EnvironmentError::Reserved {
                name: name.clone(),
                origin: var.origin.clone(),
                by,
                fix,
            });
        }
        let value = match &var.source {
            EnvSource::Value(value) => value.clone(),
            EnvSource::Env(host_var) => match host.env.get(host_var) {
                Some(value) => {
                    placeholders.insert(name.clone(), format!("<from env {host_var}>"));
                    value.clone()
                }
                None => continue,
            },
            EnvSource::File(written) => {
                let read = host.environment_files.get(name);
                let file_error = |path: PathBuf, reason: String| EnvironmentError::File {
                    name: name.clone(),
                    origin: var.origin.clone(),
                    written: written.clone(),
                    path,
                    reason,
                };
                match read {
                    Some(airlock_config::FileValue {
                        value: Ok(value), ..
                    }) => {
                        placeholders.insert(name.clone(), format!("<from file {written}>"));
                        value.clone()
                    }
                    Some(airlock_config::FileValue {
                        path,
                        value: Err(reason),
                    }) => return Err(file_error(path.clone(), reason.clone())),
                    None => {
                        return Err(file_error(
                            PathBuf::from(written),
                            "was not read before the launch".into(),
                        ));
                    }
                }
            }
        };
        env.insert(name.clone(), value);
    }
    Ok(placeholders)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_the_bridge_sets_is_refused_or_prefixed() {
        let mut host: HostFacts = serde_json::from_value(serde_json::json!({
            "home": "/home/u", "user": "u", "uid": 1000, "gid": 1000, "hostname": "h",
            "env": {}, "cwd": "/home/u/p", "project": "/home/u/p",
            "sandboxes_dir": "/home/u/.local/share/airlock/sandboxes",
            "system": {}, "etc": {}, "project_config": null, "mount_sources": {},
        }))
        .expect("host facts");
        host.bridge.exe = Some("/usr/bin/airlock".into());
        host.bridge.state_dir = Some("/home/u/.local/state/airlock/bridge".into());
        let plan = super::super::bridge::plan(
            &Profile::default(),
            &host,
            std::path::Path::new("/state"),
            "/usr/bin",
            &[],
        );
        assert!(!plan.env.is_empty());
        for (name, _) in plan.env {
            assert!(
                name == "PATH" || set_by_airlock(&name, NetworkMode::None, true).is_some(),
                "the bridge sets {name}, which [sandbox.environment] could set too"
            );
        }
    }

    #[test]
    fn proxy_variables_are_refused_only_in_proxy_mode() {
        let mut env = BTreeMap::new();
        proxy_environment(&mut env, "http://127.0.0.1:3128");
        for name in env.keys() {
            assert!(
                set_by_airlock(name, NetworkMode::Proxy, false).is_some(),
                "{name}"
            );
            assert!(
                set_by_airlock(name, NetworkMode::Host, false).is_none(),
                "{name}"
            );
        }
        assert!(set_by_airlock("PATH", NetworkMode::Proxy, true).is_none());
        assert!(set_by_airlock("AIRLOCK_ANYTHING", NetworkMode::None, false).is_some());
    }
}
