//! `[[network.ports]]`: port forwards between the host's loopback and the sandbox's.
//!
//! An entry is `host = 3000, sandbox = 3000, direction = "in" | "out"`: `in` opens a server the
//! sandbox runs on `127.0.0.1:<sandbox>` inside at the host's `127.0.0.1:<host>`; `out` lets the
//! sandbox reach the host's `127.0.0.1:<host>` at `127.0.0.1:<sandbox>` inside. The raw table keeps
//! what the file said, so a wrong value is reported with the file, the entry, the key and the valid
//! form; [`PortRule`] is the checked result. Forwards are carried out by `airlock-sandbox`.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::ConfigError;
use crate::resources::RawValue;

/// The form every message names.
pub const PORT_FORM: &str = "host = 3000, sandbox = 3000, direction = \"in\" (a sandbox server \
                             opened on the host) or \"out\" (a host service the sandbox reaches)";

/// One `[[network.ports]]` entry as written.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PortEntry {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<RawValue>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<RawValue>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub direction: Option<String>,
}

/// Which way connections go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PortDirection {
    /// Host clients reach a server inside the sandbox.
    In,
    /// The sandbox reaches a service on the host's loopback.
    Out,
}

impl PortDirection {
    pub fn as_str(self) -> &'static str {
        match self {
            PortDirection::In => "in",
            PortDirection::Out => "out",
        }
    }
}

/// A checked forward with where it came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortRule {
    pub host: u16,
    pub sandbox: u16,
    pub direction: PortDirection,
    /// The config file that declared it.
    pub origin: PathBuf,
    /// The entry's number among that file's `[[network.ports]]`, from 1.
    pub entry: usize,
}

impl PortRule {
    /// `<file>: [[network.ports]] #2 (host = 3000, sandbox = 3000, direction = "in")`.
    pub fn label(&self) -> String {
        format!(
            "{}: [[network.ports]] #{} ({})",
            self.origin.display(),
            self.entry,
            Mapping::from(self)
        )
    }
}

/// A forward without its origin: what two forwards are compared on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mapping {
    pub host: u16,
    pub sandbox: u16,
    pub direction: PortDirection,
}

impl From<&PortRule> for Mapping {
    fn from(r: &PortRule) -> Mapping {
        Mapping {
            host: r.host,
            sandbox: r.sandbox,
            direction: r.direction,
        }
    }
}

impl fmt::Display for Mapping {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "host = {}, sandbox = {}, direction = {:?}",
            self.host,
            self.sandbox,
            self.direction.as_str()
        )
    }
}

/// Why two different forwards cannot both exist, if they cannot. Identical ones do not clash.
pub fn clash(a: Mapping, b: Mapping) -> Option<String> {
    use PortDirection::{In, Out};
    if a == b {
        return None;
    }
    match (a.direction, b.direction) {
        (In, In) if a.host == b.host => {
            Some(format!("both listen on the host's 127.0.0.1:{}", a.host))
        }
        (Out, Out) if a.sandbox == b.sandbox => Some(format!(
            "both listen on 127.0.0.1:{} inside the sandbox",
            a.sandbox
        )),
        (In, Out) | (Out, In) => {
            let (i, o) = if a.direction == In { (a, b) } else { (b, a) };
            if i.sandbox == o.sandbox {
                Some(format!(
                    "the inbound forward would reach the outbound listener on 127.0.0.1:{} inside, \
                     which leads back to the host",
                    i.sandbox
                ))
            } else if i.host == o.host {
                Some(format!(
                    "the outbound forward would reach the inbound listener on the host's \
                     127.0.0.1:{}, which leads back into the sandbox",
                    i.host
                ))
            } else {
                None
            }
        }
        _ => None,
    }
}

/// A port as written: a whole number from 1 to 65535.
fn port(value: &RawValue) -> Result<u16, &'static str> {
    const FORM: &str = "a port number from 1 to 65535";
    match value {
        RawValue::Int(i) => u16::try_from(*i).ok().filter(|p| *p != 0).ok_or(FORM),
        _ => Err(FORM),
    }
}

fn direction(value: &str) -> Result<PortDirection, &'static str> {
    match value {
        "in" => Ok(PortDirection::In),
        "out" => Ok(PortDirection::Out),
        _ => Err("\"in\" or \"out\""),
    }
}

/// The checked entry, or the error naming `origin`, the entry and the key.
fn rule(origin: &Path, n: usize, e: &PortEntry) -> Result<PortRule, ConfigError> {
    let missing = |key: &'static str| ConfigError::PortMissing {
        path: origin.to_path_buf(),
        entry: n,
        key,
    };
    let bad = |key: &'static str, value: String, expected: &'static str| ConfigError::PortValue {
        path: origin.to_path_buf(),
        entry: n,
        key,
        value,
        expected,
    };
    let host = e.host.as_ref().ok_or_else(|| missing("host"))?;
    let host = port(host).map_err(|x| bad("host", host.to_string(), x))?;
    let sandbox = e.sandbox.as_ref().ok_or_else(|| missing("sandbox"))?;
    let sandbox = port(sandbox).map_err(|x| bad("sandbox", sandbox.to_string(), x))?;
    let written = e.direction.as_ref().ok_or_else(|| missing("direction"))?;
    let direction = direction(written).map_err(|x| bad("direction", format!("{written:?}"), x))?;
    Ok(PortRule {
        host,
        sandbox,
        direction,
        origin: origin.to_path_buf(),
        entry: n,
    })
}

/// Checks one file's entries: every key present and valid, and no two entries of the file naming
/// the same forward twice or forwards that clash.
pub(crate) fn check(origin: &Path, entries: &[PortEntry]) -> Result<(), ConfigError> {
    let mut seen: Vec<PortRule> = Vec::new();
    for (i, entry) in entries.iter().enumerate() {
        let rule = rule(origin, i + 1, entry)?;
        for earlier in &seen {
            let why = if Mapping::from(earlier) == Mapping::from(&rule) {
                Some("the same forward twice".to_owned())
            } else {
                clash(earlier.into(), (&rule).into())
            };
            if let Some(why) = why {
                return Err(ConfigError::PortClash {
                    rule: rule.label(),
                    other: earlier.label(),
                    why,
                });
            }
        }
        seen.push(rule);
    }
    Ok(())
}

/// Appends one file's (checked) entries; an entry the same as an earlier file's counts once.
pub(crate) fn layer(into: &mut Vec<PortRule>, origin: &Path, entries: &[PortEntry]) {
    for (i, entry) in entries.iter().enumerate() {
        let Ok(rule) = self::rule(origin, i + 1, entry) else {
            continue;
        };
        if !into
            .iter()
            .any(|r| Mapping::from(r) == Mapping::from(&rule))
        {
            into.push(rule);
        }
    }
}

/// Across the layered files: two files' forwards that clash are an error naming both.
pub(crate) fn check_layers(rules: &[PortRule]) -> Result<(), ConfigError> {
    for (i, a) in rules.iter().enumerate() {
        for b in &rules[..i] {
            if let Some(why) = clash(b.into(), a.into()) {
                return Err(ConfigError::PortClash {
                    rule: a.label(),
                    other: b.label(),
                    why,
                });
            }
        }
    }
    Ok(())
}

/// `HOST[:SANDBOX]` (`--publish 3000`, `airlock forward 8080:3000`): the host port and the
/// sandbox port (the host port when not given).
pub fn parse_mapping(text: &str) -> Result<(u16, u16), String> {
    let one = |s: &str| -> Result<u16, String> {
        // Digits only: `+80`, ` 80` and `0x50` are not ports, whatever `parse` would say.
        if s.is_empty() || s.len() > 5 || !s.bytes().all(|b| b.is_ascii_digit()) {
            return Err(format!(
                "{s:?} is not a port number; write a number from 1 to 65535"
            ));
        }
        match s.parse::<u32>() {
            Ok(p @ 1..=65535) => Ok(p as u16),
            _ => Err(format!("{s} is not a port from 1 to 65535")),
        }
    };
    match text.split_once(':') {
        Some((host, sandbox)) => Ok((one(host)?, one(sandbox)?)),
        None => {
            let port = one(text)?;
            Ok((port, port))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(host: Option<i64>, sandbox: Option<i64>, direction: Option<&str>) -> PortEntry {
        PortEntry {
            host: host.map(RawValue::Int),
            sandbox: sandbox.map(RawValue::Int),
            direction: direction.map(str::to_owned),
        }
    }

    #[test]
    fn mappings_parse_as_host_then_sandbox() {
        assert_eq!(parse_mapping("3000"), Ok((3000, 3000)));
        assert_eq!(parse_mapping("8080:3000"), Ok((8080, 3000)));
        assert_eq!(parse_mapping("65535:1"), Ok((65535, 1)));
        for bad in [
            "", "0", "65536", "+80", " 80", "80:", ":80", "a", "1:2:3", "0x50", "999999",
        ] {
            assert!(parse_mapping(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn clashes_are_the_ones_that_share_a_listener_or_loop() {
        let m = |host, sandbox, direction| Mapping {
            host,
            sandbox,
            direction,
        };
        use PortDirection::{In, Out};
        assert_eq!(clash(m(1, 2, In), m(1, 2, In)), None, "identical");
        assert!(clash(m(1, 2, In), m(1, 3, In)).is_some(), "one host port");
        assert_eq!(
            clash(m(1, 2, In), m(4, 2, In)),
            None,
            "two doors, one server"
        );
        assert!(
            clash(m(1, 2, Out), m(4, 2, Out)).is_some(),
            "one sandbox port"
        );
        assert_eq!(clash(m(1, 2, Out), m(1, 4, Out)), None);
        assert!(clash(m(1, 2, In), m(5, 2, Out)).is_some(), "loop inside");
        assert!(
            clash(m(1, 2, Out), m(1, 5, In)).is_some(),
            "loop on the host"
        );
        assert_eq!(clash(m(1, 2, In), m(3, 4, Out)), None);
    }

    #[test]
    fn a_bad_entry_names_file_entry_key_and_form() {
        let origin = Path::new("/c.toml");
        let err = |e: PortEntry| {
            check(origin, &[entry(Some(1), Some(1), Some("in")), e])
                .unwrap_err()
                .to_string()
        };
        let cases = [
            (entry(Some(0), Some(1), Some("in")), "host = 0"),
            (entry(Some(65536), Some(1), Some("in")), "host = 65536"),
            (entry(Some(2), Some(-1), Some("in")), "sandbox = -1"),
            (
                entry(Some(2), Some(2), Some("both")),
                "direction = \"both\"",
            ),
            (entry(None, Some(2), Some("in")), "has no `host`"),
            (entry(Some(2), None, Some("in")), "has no `sandbox`"),
            (entry(Some(2), Some(2), None), "has no `direction`"),
        ];
        for (e, says) in cases {
            let msg = err(e);
            for needle in ["/c.toml", "[[network.ports]] #2", says, "host = 3000"] {
                assert!(msg.contains(needle), "{needle:?} in {msg}");
            }
        }
        let text = PortEntry {
            host: Some(RawValue::Text("3000".into())),
            ..entry(None, Some(1), Some("in"))
        };
        assert!(err(text).contains("a port number from 1 to 65535"));
        let dup = err(entry(Some(1), Some(1), Some("in")));
        assert!(dup.contains("the same forward twice"), "{dup}");
        assert!(dup.contains("#1") && dup.contains("#2"), "{dup}");
        let clash = err(entry(Some(1), Some(9), Some("in")));
        assert!(
            clash.contains("both listen on the host's 127.0.0.1:1"),
            "{clash}"
        );
    }

    #[test]
    fn config_text_with_bad_ports_is_refused_with_the_file_and_key() {
        let origin = Path::new("/home/u/.config/airlock/config.toml");
        let err = |text: &str| crate::parse_str(text, origin).unwrap_err().to_string();
        let ok = "[[network.ports]]\nhost = 3000\nsandbox = 3000\ndirection = \"in\"\n";
        let cfg = crate::parse_str(ok, origin).expect("valid");
        assert_eq!(cfg.network.ports.len(), 1);
        for (text, says) in [
            (
                "host = 0\nsandbox = 1\ndirection = \"in\"",
                "host = 0 is not valid",
            ),
            (
                "host = 70000\nsandbox = 1\ndirection = \"in\"",
                "host = 70000 is not valid",
            ),
            (
                "host = \"3000\"\nsandbox = 1\ndirection = \"in\"",
                "host = \"3000\"",
            ),
            ("host = 1.5\nsandbox = 1\ndirection = \"in\"", "host = 1.5"),
            (
                "host = 1\nsandbox = 1\ndirection = \"sideways\"",
                "\"in\" or \"out\"",
            ),
            ("sandbox = 1\ndirection = \"in\"", "has no `host`"),
            ("host = 1\ndirection = \"out\"", "has no `sandbox`"),
            ("host = 1\nsandbox = 1", "has no `direction`"),
            (
                "host = 1\nsandbox = 1\ndirection = \"in\"\nproto = \"tcp\"",
                "unknown field `proto`",
            ),
        ] {
            let msg = err(&format!("[[network.ports]]\n{text}\n"));
            assert!(msg.contains(origin.to_str().unwrap()), "{msg}");
            assert!(msg.contains(says), "{says:?} in {msg}");
        }
        let twice = format!("{ok}{ok}");
        let msg = err(&twice);
        assert!(
            msg.contains("the same forward twice") && msg.contains("#2"),
            "{msg}"
        );
    }

    #[test]
    fn files_layer_identical_forwards_once_and_refuse_clashes() {
        let mut rules = Vec::new();
        layer(
            &mut rules,
            Path::new("/g"),
            &[entry(Some(3000), Some(3000), Some("in"))],
        );
        layer(
            &mut rules,
            Path::new("/p"),
            &[entry(Some(3000), Some(3000), Some("in"))],
        );
        assert_eq!(rules.len(), 1);
        assert!(check_layers(&rules).is_ok());
        layer(
            &mut rules,
            Path::new("/p"),
            &[entry(Some(3000), Some(4000), Some("in"))],
        );
        let msg = check_layers(&rules).unwrap_err().to_string();
        assert!(
            msg.contains("/p: [[network.ports]] #1") && msg.contains("/g:"),
            "{msg}"
        );
    }
}
