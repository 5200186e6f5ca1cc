//! The egress policy: which `host:port` may be reached, decided from rules alone (pure, no I/O).
//!
//! Rule syntax: `host`, `*.suffix` (every subdomain of `suffix`, never `suffix` itself: write both to
//! allow both), or an IP address (`1.2.3.4`, `::1`, `[::1]`), each optionally followed by `:port`.
//! Deny rules win over allow rules; with no matching allow rule a request is denied.

use std::collections::BTreeMap;
use std::net::IpAddr;

use airlock_config::{EgressPreset, EgressSettings};

use crate::addr::{self, AddressClass};
use crate::host::{Host, HostError, parse_port};
use crate::presets;

/// An invalid rule or `resolve` entry, naming it and where it came from.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    #[error(
        "invalid network rule {rule:?} (from {origin}): {reason}; write a host such as \"example.com\", a wildcard such as \"*.example.com\" or an IP address, optionally with \":port\""
    )]
    InvalidRule {
        rule: String,
        origin: String,
        reason: String,
    },
    #[error(
        "invalid [network] resolve entry {name:?}: {reason}; map a host name to an IP address, e.g. resolve = {{ \"db.internal\" = \"10.0.0.5\" }}"
    )]
    InvalidResolve { name: String, reason: String },
}

/// What a rule matches, before the port.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Pattern {
    /// Every host (the `allow-all` preset).
    Any,
    Exact(String),
    /// `*.suffix`: stored as `suffix`; matches names ending in `.suffix`.
    Subdomains(String),
    Ip(IpAddr),
}

/// One parsed rule, with its text and origin kept for decisions and errors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pattern: Pattern,
    port: Option<u16>,
    text: String,
    origin: String,
}

impl Rule {
    /// Parses one rule; `origin` says where it came from (a file, `--allow-host`, a preset).
    pub fn parse(text: &str, origin: &str) -> Result<Rule, PolicyError> {
        let err = |reason: String| PolicyError::InvalidRule {
            rule: text.to_owned(),
            origin: origin.to_owned(),
            reason,
        };
        if text == "*" || text.starts_with("*:") {
            return Err(err(
                "a bare `*` is not a rule; use preset = \"allow-all\" to allow every host".into(),
            ));
        }
        let (wildcard, rest) = match text.strip_prefix("*.") {
            Some(rest) => (true, rest),
            None => (false, text),
        };
        if rest.contains('*') {
            return Err(err(
                "`*` may only start a rule, as in \"*.example.com\"".into()
            ));
        }
        let (host, port) = split_rule_port(rest).map_err(|e| err(e.to_string()))?;
        let pattern = match (Host::parse(host).map_err(|e| err(e.to_string()))?, wildcard) {
            (Host::Ip(ip), false) => Pattern::Ip(ip),
            (Host::Ip(_), true) => {
                return Err(err("a wildcard cannot apply to an IP address".into()));
            }
            (Host::Name(name), false) => Pattern::Exact(name),
            (Host::Name(name), true) => Pattern::Subdomains(name),
        };
        Ok(Rule {
            pattern,
            port,
            text: text.to_owned(),
            origin: origin.to_owned(),
        })
    }

    fn any(origin: &str) -> Rule {
        Rule {
            pattern: Pattern::Any,
            port: None,
            text: "*".to_owned(),
            origin: origin.to_owned(),
        }
    }

    fn matches(&self, host: &Host, port: u16) -> bool {
        if self.port.is_some_and(|p| p != port) {
            return false;
        }
        match (&self.pattern, host) {
            (Pattern::Any, _) => true,
            (Pattern::Exact(rule), Host::Name(name)) => rule == name,
            (Pattern::Subdomains(suffix), Host::Name(name)) => name
                .strip_suffix(suffix.as_str())
                .is_some_and(|head| head.len() > 1 && head.ends_with('.')),
            (Pattern::Ip(rule), Host::Ip(ip)) => rule == ip,
            _ => false,
        }
    }

    /// Whether this rule names `ip` literally (and allows `port`).
    fn names_address(&self, ip: IpAddr, port: u16) -> bool {
        matches!(self.pattern, Pattern::Ip(rule) if addr::same_address(rule, ip))
            && self.port.is_none_or(|p| p == port)
    }

    /// The rule as written, e.g. `*.example.com:443`.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Where the rule came from, e.g. a config file path or `--allow-host`.
    pub fn origin(&self) -> &str {
        &self.origin
    }
}

/// `host[:port]` where host may be `[v6]` or a bare IPv6 address (which takes no port).
fn split_rule_port(s: &str) -> Result<(&str, Option<u16>), HostError> {
    if s.parse::<IpAddr>().is_ok() || s.ends_with(']') {
        return Ok((s, None));
    }
    match s.rsplit_once(':') {
        Some((host, port)) => match parse_port(port) {
            Some(port) => Ok((host, Some(port))),
            None => Err(HostError::BadPort {
                authority: s.to_owned(),
                value: port.to_owned(),
            }),
        },
        None => Ok((s, None)),
    }
}

/// The outcome of [`EgressPolicy::decide`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub allowed: bool,
    /// The rule that decided, as written (`None`: nothing matched, so denied by default).
    pub rule: Option<String>,
    /// Where that rule came from.
    pub origin: Option<String>,
}

/// Allow and deny rules, the private-address switch and the static resolve map.
#[derive(Debug, Clone)]
pub struct EgressPolicy {
    allow: Vec<Rule>,
    deny: Vec<Rule>,
    allow_private: bool,
    resolve: BTreeMap<Host, IpAddr>,
}

impl EgressPolicy {
    /// Builds the policy from the resolved `[network]` settings plus the command line's
    /// `--allow-host` / `--deny-host` rules. Every rule and resolve name is checked here, so an invalid
    /// one stops the launch with an error naming it and its origin.
    pub fn from_settings(
        settings: &EgressSettings,
        extra_allow: &[String],
        extra_deny: &[String],
    ) -> Result<EgressPolicy, PolicyError> {
        let mut allow = Vec::new();
        match settings.preset {
            EgressPreset::Balanced => {
                for rule in presets::balanced() {
                    allow.push(Rule::parse(rule, "preset balanced")?);
                }
            }
            EgressPreset::AllowAll => allow.push(Rule::any("preset allow-all")),
            EgressPreset::DenyAll => {}
        }
        for r in &settings.allow {
            allow.push(Rule::parse(&r.rule, &r.origin.display().to_string())?);
        }
        for r in extra_allow {
            allow.push(Rule::parse(r, "--allow-host")?);
        }
        let mut deny = Vec::new();
        for r in &settings.deny {
            deny.push(Rule::parse(&r.rule, &r.origin.display().to_string())?);
        }
        for r in extra_deny {
            deny.push(Rule::parse(r, "--deny-host")?);
        }
        let mut resolve = BTreeMap::new();
        for (name, ip) in &settings.resolve {
            let host = Host::parse(name).map_err(|e| PolicyError::InvalidResolve {
                name: name.clone(),
                reason: e.to_string(),
            })?;
            if matches!(host, Host::Ip(_)) {
                return Err(PolicyError::InvalidResolve {
                    name: name.clone(),
                    reason: "it is already an IP address".into(),
                });
            }
            resolve.insert(host, *ip);
        }
        Ok(EgressPolicy {
            allow,
            deny,
            allow_private: settings.allow_private,
            resolve,
        })
    }

    /// Decides on a canonical `host:port`: the first matching deny rule denies; else the first
    /// matching allow rule allows; else denied.
    pub fn decide(&self, host: &Host, port: u16) -> Decision {
        let found = |rule: &Rule, allowed| Decision {
            allowed,
            rule: Some(rule.text.clone()),
            origin: Some(rule.origin.clone()),
        };
        if let Some(rule) = self.deny.iter().find(|r| r.matches(host, port)) {
            return found(rule, false);
        }
        if let Some(rule) = self.allow.iter().find(|r| r.matches(host, port)) {
            return found(rule, true);
        }
        Decision {
            allowed: false,
            rule: None,
            origin: None,
        }
    }

    /// Checks one resolved address. `Err` names what the address is (loopback, private, …) when it
    /// may not be reached: a deny rule naming it always refuses; a special address is refused unless
    /// an allow rule names it literally, or `allow_private` is set (never for cloud metadata).
    /// `local` is this host's own interface addresses.
    pub fn check_address(
        &self,
        ip: IpAddr,
        port: u16,
        local: &[IpAddr],
    ) -> Result<(), AddressClass> {
        if self.deny.iter().any(|r| r.names_address(ip, port)) {
            return Err(AddressClass::Denied);
        }
        let Some(class) = addr::classify(ip, local) else {
            return Ok(());
        };
        if self.allow.iter().any(|r| r.names_address(ip, port)) {
            return Ok(());
        }
        if self.allow_private && class != AddressClass::CloudMetadata {
            return Ok(());
        }
        Err(class)
    }

    /// The `resolve` map's address for `host`, if it has one.
    pub fn resolve_override(&self, host: &Host) -> Option<IpAddr> {
        self.resolve.get(host).copied()
    }
}

#[cfg(test)]
mod tests;
