//! `[network.credentials.<name>]`: secrets the egress proxy adds to requests at the edge, so the
//! sandbox only ever holds a placeholder.
//!
//! A rule names the hosts it is for, the header it sets and how the value is written
//! (`value_format`), where the value comes from on the host (`source`: a host variable, a file, a
//! command, the keychain), and the variable set inside to the placeholder so the agent sends
//! something to replace. Presets (`anthropic`, `openai`, `github`, `gemini`) fill in all of that;
//! a key written next to `preset` wins over the preset's.
//!
//! The rules are read on the host only: a project file holding one is an error (it could otherwise
//! send any host file or command output to a host of its choice). This module parses, checks and
//! resolves the tables; `airlock-egress` reads the values at request time.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::ConfigError;

/// The placeholder set inside when a rule does not name its own.
pub const DEFAULT_PLACEHOLDER: &str = "airlock-placeholder";

mod presets;

use presets::PRESETS;
pub use presets::preset_names;

/// `host = "a"` or `host = ["a", "b"]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Hosts {
    One(String),
    Many(Vec<String>),
}

impl Hosts {
    fn list(&self) -> Vec<String> {
        match self {
            Hosts::One(h) => vec![h.clone()],
            Hosts::Many(v) => v.clone(),
        }
    }
}

/// One `[network.credentials.<name>]` table as written.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CredentialEntry {
    /// `anthropic`, `openai`, `github`, `github-git`, `gemini`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preset: Option<String>,
    /// The host names the rule is for (exact names; the proxy adds the header only for them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<Hosts>,
    /// The request header set (`x-api-key`, `authorization`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub header: Option<String>,
    /// How the value is written: `{value}`, `Bearer {value}`, `Basic {basic:USER}` (base64 of
    /// `USER:value`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value_format: Option<String>,
    /// Where the value comes from on the host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<SourceEntry>,
    /// The variable set inside to the placeholder (`ANTHROPIC_API_KEY`); `""` sets none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placeholder_env: Option<String>,
    /// What the sandbox sees instead of the value (default `airlock-placeholder`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placeholder: Option<String>,
}

/// `source = { env = "VAR" }`, `{ file = "~/.config/x/key" }`, `{ command = ["pass", "show",
/// "x"] }`, or `{ keychain = "SERVICE", account = "ACCOUNT" }`: exactly one.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourceEntry {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keychain: Option<String>,
    /// With `keychain`: the account (default: the user name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub account: Option<String>,
}

/// Where a credential's value is read on the host, at request time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CredentialSource {
    /// The host variable, as airlock was started with it.
    Env(String),
    /// The file's contents (absolute, or `~/…` under the host's home), one trailing newline
    /// removed.
    File(String),
    /// The command's standard output (argv, no shell), one trailing newline removed.
    Command(Vec<String>),
    /// The login keychain: `secret-tool lookup service S account A` on Linux,
    /// `security find-generic-password -s S -a A -w` on macOS.
    /// `account` `None`: the user's name.
    Keychain {
        service: String,
        account: Option<String>,
    },
}

impl CredentialSource {
    /// What it is, for messages and `config show`, never the value: `env ANTHROPIC_API_KEY`.
    pub fn describe(&self) -> String {
        match self {
            CredentialSource::Env(v) => format!("env {v}"),
            CredentialSource::File(p) => format!("file {p}"),
            CredentialSource::Command(argv) => format!("command {}", argv.join(" ")),
            CredentialSource::Keychain { service, account } => match account {
                Some(account) => format!("keychain {service} (account {account})"),
                None => format!("keychain {service}"),
            },
        }
    }
}

/// A resolved rule: every field known.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Credential {
    pub name: String,
    pub hosts: Vec<String>,
    /// Lower case.
    pub header: String,
    pub value_format: String,
    pub source: CredentialSource,
    /// `None`: no variable set inside.
    pub placeholder_env: Option<String>,
    pub placeholder: String,
    /// The file that declared it.
    pub origin: PathBuf,
}

/// The rules by name, after layering (the later file's table replaces the whole entry).
pub type CredentialMap = BTreeMap<String, Credential>;

/// Checks and resolves one table.
pub fn resolve(
    origin: &Path,
    name: &str,
    entry: &CredentialEntry,
) -> Result<Credential, ConfigError> {
    let bad = |key: &str, value: &str, expected: &str| ConfigError::Credential {
        path: origin.to_path_buf(),
        name: name.to_owned(),
        key: key.to_owned(),
        value: value.to_owned(),
        expected: expected.to_owned(),
    };
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_".contains(c))
    {
        return Err(bad("name", name, "letters, digits, - and _"));
    }
    let preset = match &entry.preset {
        Some(p) => Some(PRESETS.iter().find(|x| x.name == p).ok_or_else(|| {
            bad(
                "preset",
                p,
                &format!("one of {}", preset_names().join(", ")),
            )
        })?),
        None => None,
    };
    let hosts = match (&entry.host, preset) {
        (Some(h), _) => h.list(),
        (None, Some(p)) => p.hosts.iter().map(|h| (*h).to_owned()).collect(),
        (None, None) => return Err(bad("host", "", "a host name, or a preset")),
    };
    if hosts.is_empty() {
        return Err(bad("host", "[]", "at least one host name"));
    }
    let mut canonical = Vec::new();
    for host in &hosts {
        let h = host.trim_end_matches('.').to_ascii_lowercase();
        let plain = !h.is_empty()
            && h.split('.').all(|l| {
                !l.is_empty()
                    && l.len() <= 63
                    && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
                    && !l.starts_with('-')
            });
        if !plain || h.parse::<std::net::IpAddr>().is_ok() {
            return Err(bad(
                "host",
                host,
                "exact host names such as api.example.com",
            ));
        }
        canonical.push(h);
    }
    let header = match (&entry.header, preset) {
        (Some(h), _) => h.to_ascii_lowercase(),
        (None, Some(p)) => p.header.to_owned(),
        (None, None) => return Err(bad("header", "", "a header name such as x-api-key")),
    };
    let token = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
    if header.is_empty() || !header.chars().all(token) {
        return Err(bad(
            "header",
            &header,
            "an HTTP header name such as x-api-key",
        ));
    }
    if matches!(
        header.as_str(),
        "host" | "content-length" | "transfer-encoding" | "connection"
    ) {
        return Err(bad(
            "header",
            &header,
            "a header other than the framing ones",
        ));
    }
    let value_format = match (&entry.value_format, preset) {
        (Some(f), _) => f.clone(),
        (None, Some(p)) => p.format.to_owned(),
        (None, None) => "{value}".to_owned(),
    };
    if let Some(problem) = format_problem(&value_format) {
        return Err(bad("value_format", &value_format, problem));
    }
    let source = match (&entry.source, preset) {
        (Some(s), _) => source(s)
            .map_err(|(key, value, expected)| bad(&format!("source.{key}"), &value, expected))?,
        (None, Some(p)) => CredentialSource::Env(p.inside.to_owned()),
        (None, None) => {
            return Err(bad(
                "source",
                "",
                "one of { env = \"VAR\" }, { file = \"PATH\" }, { command = [...] }, { keychain = \"SERVICE\" }",
            ));
        }
    };
    let placeholder_env = match (&entry.placeholder_env, preset) {
        (Some(v), _) if v.is_empty() => None,
        (Some(v), _) => Some(v.clone()),
        (None, Some(p)) => Some(p.inside.to_owned()),
        (None, None) => None,
    };
    if let Some(var) = &placeholder_env
        && !valid_var(var)
    {
        return Err(bad(
            "placeholder_env",
            var,
            "a variable name such as ANTHROPIC_API_KEY",
        ));
    }
    let placeholder = entry
        .placeholder
        .clone()
        .unwrap_or_else(|| DEFAULT_PLACEHOLDER.to_owned());
    if placeholder.len() < 8 || !placeholder.chars().all(|c| c.is_ascii_graphic()) {
        return Err(bad(
            "placeholder",
            &placeholder,
            "8 or more printable characters without spaces",
        ));
    }
    Ok(Credential {
        name: name.to_owned(),
        hosts: canonical,
        header,
        value_format,
        source,
        placeholder_env,
        placeholder,
        origin: origin.to_path_buf(),
    })
}

fn valid_var(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Why `format` cannot be a `value_format`: it must use the value once, as `{value}` or
/// `{basic:USER}`, and hold nothing that could end a header line.
fn format_problem(format: &str) -> Option<&'static str> {
    let uses = format.matches("{value}").count() + format.matches("{basic:").count();
    if uses != 1 {
        return Some("a text with {value} or {basic:USER} exactly once, e.g. \"Bearer {value}\"");
    }
    if format.chars().any(|c| c.is_control()) {
        return Some("a text without control characters");
    }
    if let Some(rest) = format.split("{basic:").nth(1) {
        let user = rest.split('}').next().unwrap_or("");
        if user.is_empty() || user.contains(':') || !rest.contains('}') {
            return Some("{basic:USER} with a user name without ':'");
        }
    }
    None
}

type SourceProblem = (&'static str, String, &'static str);

fn source(s: &SourceEntry) -> Result<CredentialSource, SourceProblem> {
    let set = [
        s.env.is_some(),
        s.file.is_some(),
        s.command.is_some(),
        s.keychain.is_some(),
    ];
    if set.iter().filter(|x| **x).count() != 1 {
        return Err((
            "env",
            String::new(),
            "exactly one of env, file, command, keychain",
        ));
    }
    if s.account.is_some() && s.keychain.is_none() {
        return Err(("account", String::new(), "account only with keychain"));
    }
    if let Some(var) = &s.env {
        return match valid_var(var) {
            true => Ok(CredentialSource::Env(var.clone())),
            false => Err((
                "env",
                var.clone(),
                "a variable name such as ANTHROPIC_API_KEY",
            )),
        };
    }
    if let Some(file) = &s.file {
        return match file.starts_with("~/") || file.starts_with('/') {
            true => Ok(CredentialSource::File(file.clone())),
            false => Err((
                "file",
                file.clone(),
                "an absolute path or one starting with ~/",
            )),
        };
    }
    if let Some(argv) = &s.command {
        return match argv.first() {
            Some(program) if !program.is_empty() => Ok(CredentialSource::Command(argv.clone())),
            _ => Err((
                "command",
                format!("{argv:?}"),
                "a program and its arguments, e.g. [\"pass\", \"show\", \"anthropic\"]",
            )),
        };
    }
    let service = s.keychain.clone().unwrap_or_default();
    if service.is_empty() {
        return Err(("keychain", service, "a service name"));
    }
    Ok(CredentialSource::Keychain {
        service,
        account: s.account.clone(),
    })
}

/// Checks every table of one file.
pub(crate) fn validate(
    origin: &Path,
    entries: &BTreeMap<String, CredentialEntry>,
) -> Result<(), ConfigError> {
    for (name, entry) in entries {
        resolve(origin, name, entry)?;
    }
    Ok(())
}

/// Layers the tables of one file (checked by [`validate`]) over `map`: the later file's table
/// replaces the whole entry.
pub(crate) fn layer(
    map: &mut CredentialMap,
    origin: &Path,
    entries: &BTreeMap<String, CredentialEntry>,
) {
    for (name, entry) in entries {
        if let Ok(cred) = resolve(origin, name, entry) {
            map.insert(name.clone(), cred);
        }
    }
}

/// Two rules for one host would race for its header: an error naming both.
pub(crate) fn check_overlaps(map: &CredentialMap) -> Result<(), ConfigError> {
    let mut seen: BTreeMap<(&str, &str), &Credential> = BTreeMap::new();
    for cred in map.values() {
        for host in &cred.hosts {
            if let Some(other) = seen.insert((host, &cred.header), cred) {
                return Err(ConfigError::Credential {
                    path: cred.origin.clone(),
                    name: cred.name.clone(),
                    key: "host".into(),
                    value: host.clone(),
                    expected: format!(
                        "a host no other rule sets {} for ([network.credentials.{}] in {} does)",
                        cred.header,
                        other.name,
                        other.origin.display()
                    ),
                });
            }
        }
    }
    Ok(())
}

/// The rules for `airlock config show`, each with the file it came from; sources are described,
/// never read.
pub(crate) fn render(out: &mut String, map: &CredentialMap) {
    use crate::template::quote;
    use std::fmt::Write as _;
    let list = |items: &[String]| {
        let quoted: Vec<String> = items.iter().map(|i| quote(i)).collect();
        format!("[{}]", quoted.join(", "))
    };
    for c in map.values() {
        let _ = writeln!(out, "\n# from {:?}", c.origin);
        let _ = writeln!(out, "[network.credentials.{}]", quote(&c.name));
        let _ = writeln!(out, "host = {}", list(&c.hosts));
        let _ = writeln!(out, "header = {}", quote(&c.header));
        let _ = writeln!(out, "value_format = {}", quote(&c.value_format));
        let source = match &c.source {
            CredentialSource::Env(v) => format!("env = {}", quote(v)),
            CredentialSource::File(p) => format!("file = {}", quote(p)),
            CredentialSource::Command(argv) => format!("command = {}", list(argv)),
            CredentialSource::Keychain { service, account } => match account {
                Some(a) => format!("keychain = {}, account = {}", quote(service), quote(a)),
                None => format!("keychain = {}", quote(service)),
            },
        };
        let _ = writeln!(out, "source = {{ {source} }}");
        let inside = c.placeholder_env.as_deref().unwrap_or("");
        let _ = writeln!(out, "placeholder_env = {}", quote(inside));
        let _ = writeln!(out, "placeholder = {}", quote(&c.placeholder));
    }
}

#[cfg(test)]
mod tests;
