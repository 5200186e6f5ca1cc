//! The suggestion as TOML to paste under `[network]`: the rules in an `allow` array, each with its
//! counts in a comment, and the hosts that get no rule in comments after it.

use std::fmt::Write as _;

use super::{HostVerdict, Suggestion, Verdict};
use crate::log::Counts;
use crate::proxy::CONFIG_FILE;

impl Suggestion {
    /// The TOML text: it parses, and its `allow` array holds only the suggested rules.
    pub fn to_toml(&self) -> String {
        let mut out = String::new();
        let from = match self.sandboxes.as_slice() {
            [one] => format!("sandbox {one}"),
            many => format!("{} sandboxes", many.len()),
        };
        let _ = writeln!(
            out,
            "# airlock network suggest: {} in the network log of {from}",
            plural(self.requests, "request")
        );
        let _ = writeln!(
            out,
            "# Paste under [network] in {CONFIG_FILE} or a trusted .airlock.toml."
        );
        if self.allow.iter().any(|r| r.hosts.len() > 1) {
            let _ = writeln!(
                out,
                "# A wildcard stands for {} or more subdomains seen.",
                super::wildcard::WILDCARD_AT
            );
        }
        if self.allow.is_empty() {
            out.push_str("allow = []  # nothing to add\n");
        } else {
            out.push_str("allow = [\n");
            for rule in &self.allow {
                let hosts = if rule.hosts.len() > 1 {
                    format!(" to {} hosts ({})", rule.hosts.len(), rule.hosts.join(", "))
                } else {
                    String::new()
                };
                let _ = writeln!(
                    out,
                    "    \"{}\",  # {}{hosts}: {}",
                    rule.rule,
                    plural(rule.counts.requests, "request"),
                    outcomes(&rule.counts)
                );
            }
            out.push_str("]\n");
        }
        section(&mut out, &self.hosts, Verdict::Allowed, "Allowed already:");
        section(
            &mut out,
            &self.hosts,
            Verdict::DeniedByRule,
            "Denied by a deny rule (remove the rule to allow them):",
        );
        section(
            &mut out,
            &self.hosts,
            Verdict::AddressCheck,
            "Not suggested: the address check refuses these whatever the rules say \
             (docs/network.md, \"The address check\"):",
        );
        if self.left_out > 0 {
            let _ = writeln!(
                out,
                "# Left out: {} with fewer than {} (--min-requests).",
                plural(self.left_out, "host"),
                plural(self.min_requests, "request")
            );
        }
        out
    }
}

fn section(out: &mut String, hosts: &[HostVerdict], verdict: Verdict, title: &str) {
    let mut listed = hosts.iter().filter(|h| h.verdict == verdict).peekable();
    if listed.peek().is_none() {
        return;
    }
    let _ = writeln!(out, "# {title}");
    for h in listed {
        let why = match (&h.rule, &h.origin, &h.address) {
            (_, _, Some(address)) => format!(" ({address})"),
            (Some(rule), Some(origin), _) => format!(" (rule {rule:?} from {})", comment(origin)),
            (Some(rule), None, _) => format!(" (rule {rule:?})"),
            _ => String::new(),
        };
        let _ = writeln!(
            out,
            "#   {}: {}: {}{why}",
            h.host,
            plural(h.counts.requests, "request"),
            outcomes(&h.counts)
        );
    }
}

/// `3 allowed, 1 denied`: the non-zero counts.
fn outcomes(c: &Counts) -> String {
    let parts: Vec<String> = [
        (c.allowed, "allowed"),
        (c.denied, "denied"),
        (c.errors, "error"),
    ]
    .iter()
    .filter(|(n, _)| *n > 0)
    .map(|&(n, what)| match what {
        "error" => plural(n, "error"),
        _ => format!("{n} {what}"),
    })
    .collect();
    parts.join(", ")
}

fn plural(n: u64, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

/// Text safe in a one-line TOML comment (a file path may hold anything).
fn comment(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}
