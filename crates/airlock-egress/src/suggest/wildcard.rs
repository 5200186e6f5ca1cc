//! Folding suggested subdomains into `*.suffix` rules.
//!
//! A wildcard is suggested only for three or more suggested hosts under one suffix, the most
//! specific such suffix first, and never for a suffix of two labels or fewer under a country code
//! (`co.uk`) nor under a shared-hosting domain, where the subdomains are other people's sites (a
//! short list, not the Public Suffix List).

use std::collections::BTreeMap;

use super::{HostVerdict, SuggestedRule, Verdict};
use crate::log::Counts;

/// How many suggested subdomains make a wildcard.
pub const WILDCARD_AT: usize = 3;

/// Domains whose subdomains belong to different people.
const SHARED: &[&str] = &[
    "amazonaws.com",
    "appspot.com",
    "azurewebsites.net",
    "blogspot.com",
    "cloudfront.net",
    "deno.dev",
    "firebaseapp.com",
    "fly.dev",
    "github.io",
    "githubusercontent.com",
    "gitlab.io",
    "glitch.me",
    "herokuapp.com",
    "netlify.app",
    "ngrok-free.app",
    "ngrok.io",
    "onrender.com",
    "pages.dev",
    "repl.co",
    "surge.sh",
    "trycloudflare.com",
    "vercel.app",
    "web.app",
    "workers.dev",
];

/// Second-level labels that, under a two-letter country code, are registries, not sites.
const REGISTRY_LABELS: &[&str] = &[
    "ac", "co", "com", "edu", "go", "gov", "ne", "net", "or", "org",
];

/// The rules for the suggested hosts in `hosts`: a wildcard where [`WILDCARD_AT`] or more share a
/// suffix, else the host itself. Each suggested host's `rule` is set to the rule that covers it.
pub(crate) fn group(hosts: &mut [HostVerdict]) -> Vec<SuggestedRule> {
    let suggested: Vec<usize> = (0..hosts.len())
        .filter(|&i| hosts[i].verdict == Verdict::Suggested)
        .collect();
    let mut under: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for &i in &suggested {
        if hosts[i].host.parse::<std::net::IpAddr>().is_ok() {
            continue;
        }
        for suffix in suffixes(&hosts[i].host) {
            under.entry(suffix.to_owned()).or_default().push(i);
        }
    }
    let mut candidates: Vec<(&String, &Vec<usize>)> = under
        .iter()
        .filter(|(suffix, members)| members.len() >= WILDCARD_AT && wildcard_allowed(suffix))
        .collect();
    // The most specific suffix first: `*.cdn.example.com` before `*.example.com`.
    candidates.sort_by_key(|(suffix, _)| std::cmp::Reverse(suffix.matches('.').count()));
    let mut rules = Vec::new();
    let mut covered = vec![false; hosts.len()];
    for (suffix, members) in candidates {
        let free: Vec<usize> = members.iter().copied().filter(|&i| !covered[i]).collect();
        if free.len() < WILDCARD_AT {
            continue;
        }
        let rule = format!("*.{suffix}");
        rules.push(rule_for(hosts, &free, &rule));
        for &i in &free {
            covered[i] = true;
            hosts[i].rule = Some(rule.clone());
        }
    }
    for &i in suggested.iter().filter(|&&i| !covered[i]) {
        let rule = hosts[i].host.clone();
        rules.push(rule_for(hosts, &[i], &rule));
    }
    rules
}

fn rule_for(hosts: &[HostVerdict], members: &[usize], rule: &str) -> SuggestedRule {
    let mut counts = Counts::default();
    for &i in members {
        let c = &hosts[i].counts;
        counts.requests += c.requests;
        counts.allowed += c.allowed;
        counts.denied += c.denied;
        counts.errors += c.errors;
    }
    SuggestedRule {
        rule: rule.to_owned(),
        hosts: members.iter().map(|&i| hosts[i].host.clone()).collect(),
        counts,
    }
}

/// The proper suffixes of `name` with two labels or more: `a.b.example.com` → `b.example.com`,
/// `example.com`.
fn suffixes(name: &str) -> impl Iterator<Item = &str> {
    name.match_indices('.')
        .map(move |(i, _)| &name[i + 1..])
        .filter(|suffix| suffix.contains('.'))
}

fn wildcard_allowed(suffix: &str) -> bool {
    let shared = SHARED
        .iter()
        .any(|s| suffix == *s || suffix.ends_with(&format!(".{s}")));
    let registry = match suffix.split_once('.') {
        Some((second, cc)) => {
            cc.len() == 2 && !cc.contains('.') && REGISTRY_LABELS.contains(&second)
        }
        None => true,
    };
    !shared && !registry && suffix != "localhost" && !suffix.ends_with(".localhost")
}
