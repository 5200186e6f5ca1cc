//! Host names and authorities in the one canonical form every rule and decision uses.
//!
//! Canonical means: ASCII only (IDNA is not done: a non-ASCII name is refused, so `раураl.com` can never
//! be mistaken for `paypal.com`), lower-case, at most one trailing dot removed, IP literals in their
//! standard text form. Canonicalising a canonical host returns it unchanged.

use std::fmt;
use std::net::{IpAddr, Ipv6Addr};

/// A canonical host: a DNS name or an IP address.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Host {
    /// A lower-case ASCII name without a trailing dot, e.g. `api.github.com`.
    Name(String),
    /// An IP literal (written `[::1]` in URLs and authorities).
    Ip(IpAddr),
}

/// Why a string is not a usable host or authority.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HostError {
    #[error("host {0:?} is not ASCII; write internationalised names in their xn-- (punycode) form")]
    NotAscii(String),
    #[error("host {value:?} is not a valid host name ({reason})")]
    Invalid { value: String, reason: &'static str },
    #[error("port {value:?} in {authority:?} is not a number from 1 to 65535")]
    BadPort { authority: String, value: String },
}

const MAX_NAME_LEN: usize = 253;
const MAX_LABEL_LEN: usize = 63;

impl Host {
    /// Parses and canonicalises a host: a name, an IPv4 literal, or an IPv6 literal with or
    /// without brackets.
    pub fn parse(raw: &str) -> Result<Host, HostError> {
        if !raw.is_ascii() {
            return Err(HostError::NotAscii(raw.to_owned()));
        }
        let invalid = |reason| HostError::Invalid {
            value: raw.to_owned(),
            reason,
        };
        if let Some(inner) = raw.strip_prefix('[') {
            let inner = inner
                .strip_suffix(']')
                .ok_or_else(|| invalid("unclosed ["))?;
            return inner
                .parse::<Ipv6Addr>()
                .map(|ip| Host::Ip(IpAddr::V6(ip)))
                .map_err(|_| invalid("not an IPv6 address inside [ ]"));
        }
        if let Ok(ip) = raw.parse::<IpAddr>() {
            return Ok(Host::Ip(ip));
        }
        let lower = raw.to_ascii_lowercase();
        let name = lower.strip_suffix('.').unwrap_or(&lower);
        if name.is_empty() {
            return Err(invalid("it is empty"));
        }
        if name.len() > MAX_NAME_LEN {
            return Err(invalid("longer than 253 characters"));
        }
        for label in name.split('.') {
            if label.is_empty() {
                return Err(invalid("it has an empty label"));
            }
            if label.len() > MAX_LABEL_LEN {
                return Err(invalid("a label is longer than 63 characters"));
            }
            if !label
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            {
                return Err(invalid(
                    "only letters, digits, '-', '_' and '.' are allowed",
                ));
            }
        }
        // A dotted all-numeric name that is not a valid IPv4 address (`1.2.3.999`, `0x7f.1`) would be
        // read as an address by some resolvers; refuse it rather than guess.
        if name
            .rsplit('.')
            .next()
            .is_some_and(|last| last.bytes().all(|b| b.is_ascii_digit()) || last.starts_with("0x"))
        {
            return Err(invalid("it looks like a malformed IP address"));
        }
        Ok(Host::Name(name.to_owned()))
    }

    /// The host as written in an authority: names as they are, IPv6 in brackets.
    pub fn to_authority(&self, port: u16) -> String {
        match self {
            Host::Ip(IpAddr::V6(ip)) => format!("[{ip}]:{port}"),
            other => format!("{other}:{port}"),
        }
    }
}

impl fmt::Display for Host {
    /// Names as they are; IP addresses in their standard form without brackets.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Host::Name(name) => f.write_str(name),
            Host::Ip(ip) => write!(f, "{ip}"),
        }
    }
}

/// Splits `host[:port]` (IPv6 as `[addr][:port]`) into a canonical host and a port, `default_port`
/// when none is written. `None` as default means the port is required.
pub fn parse_authority(
    authority: &str,
    default_port: Option<u16>,
) -> Result<(Host, u16), HostError> {
    let (host, port) = split_port(authority);
    let host = Host::parse(host)?;
    let bad_port = |value: &str| HostError::BadPort {
        authority: authority.to_owned(),
        value: value.to_owned(),
    };
    let port = match (port, default_port) {
        (Some(p), _) => parse_port(p).ok_or_else(|| bad_port(p))?,
        (None, Some(default)) => default,
        (None, None) => return Err(bad_port("")),
    };
    Ok((host, port))
}

/// `1`..=`65535`, digits only (no sign, no spaces); leading zeros are tolerated up to 5 digits.
pub(crate) fn parse_port(s: &str) -> Option<u16> {
    if s.is_empty() || s.len() > 5 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse::<u16>().ok().filter(|p| *p != 0)
}

/// `(host, Some(port))` when the authority ends in `:port` outside IPv6 brackets; a bare IPv6
/// address (several colons, no brackets) is all host.
fn split_port(authority: &str) -> (&str, Option<&str>) {
    if authority.starts_with('[') {
        return match authority.rfind("]:") {
            Some(i) => (&authority[..=i], Some(&authority[i + 2..])),
            None => (authority, None),
        };
    }
    match authority.rfind(':') {
        Some(i) if authority[..i].contains(':') => (authority, None),
        Some(i) => (&authority[..i], Some(&authority[i + 1..])),
        None => (authority, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(s: &str) -> Host {
        Host::Name(s.into())
    }

    #[test]
    fn canonicalises_case_and_one_trailing_dot() {
        assert_eq!(
            Host::parse("API.GitHub.COM.").unwrap(),
            name("api.github.com")
        );
        assert!(Host::parse("github.com..").is_err());
        assert!(Host::parse(".").is_err());
        assert!(Host::parse("").is_err());
    }

    #[test]
    fn ip_literals_are_normalised() {
        assert_eq!(Host::parse("[::1]").unwrap().to_string(), "::1");
        assert_eq!(Host::parse("0:0::1").unwrap().to_string(), "::1");
        assert_eq!(
            Host::parse("127.0.0.1").unwrap().to_authority(80),
            "127.0.0.1:80"
        );
        assert_eq!(Host::parse("[::1]").unwrap().to_authority(443), "[::1]:443");
        assert!(Host::parse("1.2.3.999").is_err());
        assert!(Host::parse("0x7f.1").is_err());
        assert!(Host::parse("[::1").is_err());
    }

    #[test]
    fn non_ascii_and_bad_characters_are_refused() {
        let err = Host::parse("bücher.de").unwrap_err();
        assert!(err.to_string().contains("xn--"), "{err}");
        for bad in ["a b.com", "a/b.com", "a@b.com", "a%2e.com", "x\r\n.com"] {
            assert!(Host::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn authorities_split_into_host_and_port() {
        assert_eq!(
            parse_authority("Example.com:8080", Some(80)).unwrap(),
            (name("example.com"), 8080)
        );
        assert_eq!(
            parse_authority("example.com", Some(80)).unwrap(),
            (name("example.com"), 80)
        );
        assert_eq!(parse_authority("[::1]:443", None).unwrap().1, 443);
        assert_eq!(
            parse_authority("::1", Some(443)).unwrap(),
            (Host::Ip("::1".parse().unwrap()), 443)
        );
        for bad in [
            "example.com:http",
            "example.com:0",
            "example.com:65536",
            "example.com:",
            "example.com:+1",
            "example.com: 1",
        ] {
            let err = parse_authority(bad, Some(443)).unwrap_err();
            assert!(matches!(err, HostError::BadPort { .. }), "{bad}: {err}");
        }
        assert!(parse_authority("example.com", None).is_err());
    }
}
