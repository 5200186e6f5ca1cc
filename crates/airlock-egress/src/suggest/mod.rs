//! `airlock network suggest`: from decision logs, the allow rules that would let the hosts used
//! through, each with its counts, ready to paste under `[network]`.
//!
//! A host is one of: already allowed (by a preset or a rule), denied by a deny rule (never
//! suggested: the user said no), refused by the address check whatever the rules say (loopback,
//! private, metadata: never suggested either), or suggested. A wildcard `*.suffix` stands for
//! three or more suggested subdomains of one suffix (never a shared-hosting one, [`wildcard`]).
//! Pure: what was read and the policy in, a [`Suggestion`] out.

mod render;
mod wildcard;

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr};

use serde::Serialize;

use crate::host::Host;
use crate::log::{Counts, Logged};
use crate::policy::EgressPolicy;
use crate::proxy::refused_address;

/// What the logs say of one host.
#[derive(Debug, Clone, Default)]
struct Seen {
    counts: Counts,
    ports: BTreeSet<u16>,
    /// The address the check refused it for, when the proxy said so.
    refused: Option<IpAddr>,
}

/// Decisions summed per host, from one or more logs.
#[derive(Debug, Default)]
pub struct Usage {
    hosts: BTreeMap<String, Seen>,
    requests: u64,
}

impl Usage {
    pub fn add(&mut self, logged: &Logged) {
        let r = &logged.record;
        self.requests += 1;
        if r.host.is_empty() {
            return;
        }
        let seen = self.hosts.entry(r.host.clone()).or_default();
        seen.counts.add(r.decision);
        seen.ports.insert(r.port);
        if let Some(ip) = r.reason.as_deref().and_then(refused_address) {
            seen.refused = Some(ip);
        }
    }
}

/// Which hosts to list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SuggestOptions {
    /// Hosts with fewer requests are left out (counted in [`Suggestion::left_out`]).
    pub min_requests: u64,
    /// Only hosts that were denied at least once.
    pub denied_only: bool,
}

impl Default for SuggestOptions {
    fn default() -> SuggestOptions {
        SuggestOptions {
            min_requests: 1,
            denied_only: false,
        }
    }
}

/// What becomes of a host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// In a suggested rule.
    Suggested,
    /// The policy allows it already.
    Allowed,
    /// A deny rule refuses it.
    DeniedByRule,
    /// The address check refuses it whatever the rules say.
    AddressCheck,
}

/// One host, its counts and what becomes of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HostVerdict {
    pub host: String,
    #[serde(flatten)]
    pub counts: Counts,
    pub verdict: Verdict,
    /// The suggested rule (`suggested`), or the rule that allows or denies it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// Where that deciding rule comes from (a file, `preset balanced`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub origin: Option<String>,
    /// For `address_check`: what the address is (`loopback`, `private`, …).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
}

/// One rule to add.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SuggestedRule {
    pub rule: String,
    /// The hosts it stands for (one, or the subdomains a wildcard covers).
    pub hosts: Vec<String>,
    #[serde(flatten)]
    pub counts: Counts,
}

/// The suggestion: rules to add, and every host listed with its verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Suggestion {
    /// The sandboxes whose logs were read.
    pub sandboxes: Vec<String>,
    /// Records read.
    pub requests: u64,
    /// Rules to add, hosts that were denied first, busiest first.
    pub allow: Vec<SuggestedRule>,
    /// Every host listed, in the order shown.
    pub hosts: Vec<HostVerdict>,
    /// Hosts left out for having fewer than `min_requests` requests.
    pub left_out: u64,
    pub min_requests: u64,
}

/// The suggestion for `usage` under `policy`; `local` is this host's own addresses (for the
/// address check).
pub fn suggest(
    usage: &Usage,
    policy: &EgressPolicy,
    local: &[IpAddr],
    sandboxes: Vec<String>,
    options: SuggestOptions,
) -> Suggestion {
    let mut hosts = Vec::new();
    let mut left_out = 0;
    for (name, seen) in &usage.hosts {
        if options.denied_only && seen.counts.denied == 0 {
            continue;
        }
        if seen.counts.requests < options.min_requests {
            left_out += 1;
            continue;
        }
        // A log line naming something that is not a host is not worth a rule.
        let Ok(host) = Host::parse(name) else {
            continue;
        };
        hosts.push(judge(&host, seen, policy, local));
    }
    let mut allow = wildcard::group(&mut hosts);
    hosts.sort_by_key(|h| order_key(h.verdict, &h.counts, &h.host));
    allow.sort_by_key(|r| order_key(Verdict::Suggested, &r.counts, &r.rule));
    Suggestion {
        sandboxes,
        requests: usage.requests,
        allow,
        hosts,
        left_out,
        min_requests: options.min_requests,
    }
}

/// Suggested first, then allowed, denied by rule, refused by the address check; in each, hosts
/// that were denied first, then the busiest, then by name.
fn order_key(verdict: Verdict, counts: &Counts, name: &str) -> (u8, bool, u64, String) {
    let rank = match verdict {
        Verdict::Suggested => 0,
        Verdict::Allowed => 1,
        Verdict::DeniedByRule => 2,
        Verdict::AddressCheck => 3,
    };
    (
        rank,
        counts.denied == 0,
        u64::MAX - counts.requests,
        name.to_owned(),
    )
}

fn judge(host: &Host, seen: &Seen, policy: &EgressPolicy, local: &[IpAddr]) -> HostVerdict {
    let mut verdict = HostVerdict {
        host: host.to_string(),
        counts: seen.counts,
        verdict: Verdict::Suggested,
        rule: None,
        origin: None,
        address: None,
    };
    let ports: Vec<u16> = if seen.ports.is_empty() {
        vec![443]
    } else {
        seen.ports.iter().copied().collect()
    };
    if let Some(ip) = known_address(host, seen, policy) {
        let refused = ports
            .iter()
            .find_map(|&port| policy.check_address(ip, port, local).err());
        if let Some(class) = refused {
            verdict.verdict = Verdict::AddressCheck;
            verdict.address = Some(class.as_str().to_owned());
            return verdict;
        }
    }
    let decisions: Vec<_> = ports.iter().map(|&p| policy.decide(host, p)).collect();
    if let Some(deny) = decisions.iter().find(|d| !d.allowed && d.rule.is_some()) {
        verdict.verdict = Verdict::DeniedByRule;
        (verdict.rule, verdict.origin) = (deny.rule.clone(), deny.origin.clone());
    } else if decisions.iter().all(|d| d.allowed) {
        verdict.verdict = Verdict::Allowed;
        (verdict.rule, verdict.origin) = (decisions[0].rule.clone(), decisions[0].origin.clone());
    } else {
        verdict.rule = Some(host.to_string());
    }
    verdict
}

/// The address `host` is known to reach without asking DNS: an IP literal, the `resolve` map,
/// `localhost` (RFC 6761), or the address the proxy refused it for.
fn known_address(host: &Host, seen: &Seen, policy: &EgressPolicy) -> Option<IpAddr> {
    match host {
        Host::Ip(ip) => Some(*ip),
        Host::Name(name) => policy.resolve_override(host).or(seen.refused).or_else(|| {
            (name == "localhost" || name.ends_with(".localhost"))
                .then_some(IpAddr::V4(Ipv4Addr::LOCALHOST))
        }),
    }
}

#[cfg(test)]
mod tests;
