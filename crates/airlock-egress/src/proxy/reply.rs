//! The proxy's own responses: refusals with a short plain-text body that says what to do.

use std::net::IpAddr;

use crate::addr::AddressClass;
use crate::host::Host;
use crate::policy::Decision;

pub(crate) const CONFIG_FILE: &str = "~/.config/airlock/config.toml";

/// A request the proxy answers itself instead of forwarding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Refusal {
    /// HTTP status; 0 means close without a response (the client is gone or never spoke HTTP).
    pub(crate) status: u16,
    /// One line for the decision log (never a header value or a path).
    pub(crate) reason: String,
    /// The response body, when it says more than the reason.
    pub(crate) body: Option<String>,
}

impl Refusal {
    pub(crate) fn new(status: u16, reason: impl Into<String>) -> Refusal {
        Refusal {
            status,
            reason: reason.into(),
            body: None,
        }
    }

    /// Nothing to answer: just close and log.
    pub(crate) fn silent(reason: impl Into<String>) -> Refusal {
        Refusal::new(0, reason)
    }

    /// 403 for a host the policy denies, naming the config line that would allow it.
    pub(crate) fn denied(host: &Host, port: u16, decision: &Decision) -> Refusal {
        let target = host.to_authority(port);
        let (reason, why) = match (&decision.rule, &decision.origin) {
            (Some(rule), Some(origin)) => (
                format!("denied by rule {rule:?} from {origin}"),
                format!(
                    "it matches the deny rule {rule:?} from {origin}.\nTo allow it, remove that rule; deny rules win over allow rules.\n"
                ),
            ),
            _ => (
                "no rule allows it".to_owned(),
                format!(
                    "no rule allows it.\nTo allow it, add it under [network] in {CONFIG_FILE} (or a trusted .airlock.toml):\n    allow = [\"{host}\"]\nor run airlock with --allow-host {host}\n"
                ),
            ),
        };
        Refusal {
            status: 403,
            reason,
            body: Some(format!("airlock: egress to {target} is denied: {why}")),
        }
    }

    /// 403 for a host no rule matched, after ask mode's question was denied or not answered.
    pub(crate) fn asked(host: &Host, port: u16, why: &str) -> Refusal {
        let target = host.to_authority(port);
        Refusal {
            status: 403,
            reason: format!("no rule allows it; {why}"),
            body: Some(format!(
                "airlock: egress to {target} is denied: no rule allows it, and it was {why}.
To allow it, answer in `airlock network monitor`, or add it under [network] in {CONFIG_FILE}:
    allow = [\"{host}\"]
"
            )),
        }
    }

    /// 403 for an allowed name whose address is special (loopback, private, metadata, …).
    pub(crate) fn address(host: &Host, port: u16, ip: IpAddr, class: AddressClass) -> Refusal {
        let target = host.to_authority(port);
        let reason = address_reason(host, ip, class);
        let fix = match class {
            AddressClass::Denied => "That address is denied by a rule.\n".to_owned(),
            AddressClass::CloudMetadata => format!(
                "Cloud metadata services are refused unless a rule names the address:\n    allow = [\"{ip}\"]\nunder [network] in {CONFIG_FILE}.\n"
            ),
            _ => format!(
                "To reach it, name the address in a rule under [network] in {CONFIG_FILE}:\n    allow = [\"{ip}\"]\nor set allow_private = true there.\n"
            ),
        };
        Refusal {
            status: 403,
            body: Some(format!(
                "airlock: egress to {target} is denied: {reason}.\n{fix}"
            )),
            reason,
        }
    }

    /// Whether this counts as a policy denial (logged `denied`) rather than an error.
    pub(crate) fn is_denial(&self) -> bool {
        self.status == 403
    }

    /// The full HTTP response, `None` for a silent close.
    pub(crate) fn response(&self) -> Option<Vec<u8>> {
        if self.status == 0 {
            return None;
        }
        let body = match &self.body {
            Some(body) => body.clone(),
            None => format!("airlock egress proxy: {}\n", self.reason),
        };
        let mut out = format!(
            "HTTP/1.1 {} {}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n",
            self.status,
            status_text(self.status),
            body.len()
        );
        if self.status == 405 {
            out.push_str(&format!(
                "Allow: {}\r\n",
                super::ACCEPTED_METHODS.join(", ")
            ));
        }
        out.push_str("\r\n");
        out.push_str(&body);
        Some(out.into_bytes())
    }
}

/// The decision log's reason for an address the check refused. [`refused_address`] reads it back.
fn address_reason(host: &Host, ip: IpAddr, class: AddressClass) -> String {
    format!("{host} resolves to {ip}, which is {class}")
}

/// The address in a reason [`address_reason`] wrote, if `reason` is one.
pub(crate) fn refused_address(reason: &str) -> Option<IpAddr> {
    let (_, rest) = reason.split_once(" resolves to ")?;
    let (ip, _) = rest.split_once(", which is ")?;
    ip.parse().ok()
}

fn status_text(status: u16) -> &'static str {
    match status {
        400 => "Bad Request",
        403 => "Forbidden",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        431 => "Request Header Fields Too Large",
        502 => "Bad Gateway",
        504 => "Gateway Timeout",
        _ => "Error",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn denial_names_the_host_and_the_line_to_add() {
        let host = Host::parse("Evil.Example.").unwrap();
        let d = Decision {
            allowed: false,
            rule: None,
            origin: None,
        };
        let text = String::from_utf8(Refusal::denied(&host, 443, &d).response().unwrap()).unwrap();
        assert!(text.starts_with("HTTP/1.1 403 Forbidden\r\n"), "{text}");
        assert!(
            text.contains("egress to evil.example:443 is denied"),
            "{text}"
        );
        assert!(text.contains("allow = [\"evil.example\"]"), "{text}");
        assert!(text.contains("--allow-host evil.example"), "{text}");
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        assert!(
            head.contains(&format!("Content-Length: {}", body.len())),
            "{text}"
        );
    }

    #[test]
    fn an_address_refusal_reads_back_its_address() {
        let host = Host::parse("db.example").unwrap();
        for ip in ["10.0.0.5", "::1"] {
            let ip: IpAddr = ip.parse().unwrap();
            let refusal = Refusal::address(&host, 443, ip, AddressClass::Private);
            assert_eq!(
                refused_address(&refusal.reason),
                Some(ip),
                "{}",
                refusal.reason
            );
        }
        assert_eq!(refused_address("no rule allows it"), None);
    }

    #[test]
    fn silent_refusal_has_no_response() {
        assert_eq!(Refusal::silent("gone").response(), None);
        let r = Refusal::new(405, "x").response().unwrap();
        assert!(
            String::from_utf8(r)
                .unwrap()
                .contains("Allow: CONNECT, GET")
        );
    }
}
