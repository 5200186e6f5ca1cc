//! Parsers for `sbx ls --json` and `sbx ports --json`, whose shapes are undocumented. Anything not
//! understood is an error: an unparsed listing must never read as "no sandboxes".

use serde_json::Value;

use super::{PortMapping, SandboxInfo};
use crate::error::{ErrorKind, PluginError, Result};

fn unknown(message: String, output: &str) -> PluginError {
    PluginError::new(ErrorKind::Unknown, message).with_output(output)
}

/// The JSON document in `stdout`, skipping chatter lines printed before it.
pub fn json_document(stdout: &str, what: &str) -> Result<Value> {
    let mut offset = 0;
    for line in stdout.split_inclusive('\n') {
        let t = line.trim_start();
        if t.starts_with('{') || t.starts_with('[') || t.starts_with("null") {
            return serde_json::from_str(&stdout[offset..]).map_err(|e| {
                unknown(
                    format!("{what} printed invalid JSON ({e}). Run it by hand to see why."),
                    stdout,
                )
            });
        }
        offset += line.len();
    }
    Err(unknown(
        format!("{what} printed no JSON. Run it by hand to see why."),
        stdout,
    ))
}

const SANDBOX_FIELDS: &[&str] = &[
    "name",
    "Name",
    "id",
    "status",
    "state",
    "Status",
    "agent",
    "workspaces",
    "created_at",
];

fn looks_like_sandbox(v: &Value) -> bool {
    v.as_object()
        .is_some_and(|o| SANDBOX_FIELDS.iter().any(|f| o.contains_key(*f)))
}

fn str_field(v: &Value, names: &[&str]) -> Option<String> {
    names
        .iter()
        .find_map(|n| v.get(*n).and_then(Value::as_str))
        .map(str::to_owned)
}

/// Normalises `sbx ls --json`: a bare array, `{sandboxes|items: [...]|null}`, a name-keyed map, or
/// `null`. An entry without a name makes the whole listing unreadable.
pub fn sandbox_list(stdout: &str) -> Result<Vec<SandboxInfo>> {
    let doc = json_document(stdout, "sbx ls --json")?;
    let items: Vec<Value> = match &doc {
        Value::Null => Vec::new(),
        Value::Array(a) => a.clone(),
        Value::Object(o) => {
            if let Some(key) = ["sandboxes", "items", "Sandboxes"]
                .into_iter()
                .find(|k| o.contains_key(*k))
            {
                match &o[key] {
                    Value::Array(a) => a.clone(),
                    Value::Null => Vec::new(),
                    other => {
                        return Err(unknown(
                            format!(
                                "sbx ls --json has a {key} field that is not a list ({other})."
                            ),
                            stdout,
                        ));
                    }
                }
            } else if o.is_empty() {
                Vec::new()
            } else if o.values().all(looks_like_sandbox) {
                o.iter()
                    .map(|(k, v)| {
                        let mut v = v.clone();
                        if str_field(&v, &["name", "Name"]).is_none() {
                            v["name"] = Value::String(k.clone());
                        }
                        v
                    })
                    .collect()
            } else {
                let keys: Vec<&str> = o.keys().map(String::as_str).collect();
                return Err(unknown(
                    format!(
                        "sbx ls --json printed a shape airlock does not understand (top-level keys: {}). Please report it.",
                        keys.join(", ")
                    ),
                    stdout,
                ));
            }
        }
        other => {
            return Err(unknown(
                format!("sbx ls --json printed {other} instead of a list."),
                stdout,
            ));
        }
    };
    let mut out = Vec::with_capacity(items.len());
    for item in &items {
        let Some(name) = str_field(item, &["name", "Name", "id"]).filter(|n| !n.is_empty()) else {
            return Err(unknown(
                "sbx ls --json listed a sandbox without a recognisable name; the whole listing is treated as unreadable. Please report it.".to_owned(),
                stdout,
            ));
        };
        let ports = item
            .get("ports")
            .map(port_items)
            .transpose()?
            .unwrap_or_default();
        out.push(SandboxInfo {
            name,
            status: str_field(item, &["status", "state", "Status"]),
            agent: str_field(item, &["agent"]),
            workspaces: item
                .get("workspaces")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default(),
            ports,
        });
    }
    Ok(out)
}

/// Normalises `sbx ports NAME --json`: an array or `{ports|items|published: [...]}`.
pub fn port_list(stdout: &str) -> Result<Vec<PortMapping>> {
    let doc = json_document(stdout, "sbx ports --json")?;
    match &doc {
        Value::Object(o) if !o.is_empty() => {
            match ["ports", "items", "published"].into_iter().find(|k| o.contains_key(*k)) {
                Some(key) => port_items(&o[key]),
                None => Err(unknown("sbx ports --json printed a shape airlock does not understand. Please report it.".to_owned(), stdout)),
            }
        }
        Value::Object(_) | Value::Null => Ok(Vec::new()),
        other => port_items(other).map_err(|e| e.with_output(stdout)),
    }
}

fn port_number(v: &Value) -> Option<u16> {
    match v {
        Value::Number(n) => n
            .as_u64()
            .and_then(|n| u16::try_from(n).ok())
            .filter(|n| *n > 0),
        Value::String(s) if !s.contains(':') => s
            .split('/')
            .next()?
            .trim()
            .parse()
            .ok()
            .filter(|n: &u16| *n > 0),
        _ => None,
    }
}

/// `[[HOST_IP:]HOST_PORT:]SANDBOX_PORT[/PROTO]` → (host, sandbox).
pub fn parse_spec(spec: &str) -> Option<(Option<u16>, u16)> {
    let spec = spec.trim();
    let spec = spec.split('/').next()?;
    let parts: Vec<&str> = spec.split(':').collect();
    let num = |s: &str| s.parse::<u16>().ok().filter(|n| *n > 0);
    match parts.as_slice() {
        [s] => Some((None, num(s)?)),
        [h, s] => Some((num(h), num(s)?)),
        [_, h, s] => Some((num(h), num(s)?)),
        _ => None,
    }
}

fn port_items(v: &Value) -> Result<Vec<PortMapping>> {
    let items = match v {
        Value::Null => return Ok(Vec::new()),
        Value::Array(a) => a,
        other => {
            return Err(PluginError::new(
                ErrorKind::Unknown,
                format!("sbx printed ports as {other}, not a list."),
            ));
        }
    };
    let mut out = Vec::new();
    for item in items {
        let mapping = match item {
            Value::String(s) => parse_spec(s).map(|(host_port, sandbox_port)| PortMapping {
                host_port,
                sandbox_port,
            }),
            Value::Object(_) => {
                let field = |names: &[&str]| {
                    names
                        .iter()
                        .find_map(|n| item.get(*n).and_then(port_number))
                };
                let spec = ["spec", "mapping", "publish"]
                    .iter()
                    .find_map(|n| item.get(*n).and_then(Value::as_str).and_then(parse_spec));
                let sandbox = field(&[
                    "sandbox_port",
                    "sandboxPort",
                    "container_port",
                    "containerPort",
                    "target",
                    "port",
                ])
                .or(spec.map(|s| s.1));
                let host = field(&[
                    "host_port",
                    "hostPort",
                    "published",
                    "local_port",
                    "localPort",
                ])
                .or(spec.and_then(|s| s.0));
                sandbox.map(|sandbox_port| PortMapping {
                    host_port: host,
                    sandbox_port,
                })
            }
            _ => None,
        };
        out.extend(mapping);
    }
    if !items.is_empty() && out.is_empty() {
        return Err(PluginError::new(
            ErrorKind::Unknown,
            "sbx listed ports without a recognisable sandbox port. Please report it.",
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_the_known_shapes() {
        let documented = r#"{"sandboxes":[{"name":"a","status":"running","ports":[{"host_ip":"127.0.0.1","host_port":3774,"sandbox_port":3773,"protocol":"tcp4"}]}]}"#;
        let list = sandbox_list(documented).expect("documented shape");
        assert_eq!(
            list[0].ports,
            [PortMapping {
                host_port: Some(3774),
                sandbox_port: 3773
            }]
        );
        assert_eq!(
            sandbox_list("starting daemon...\nok\n[{\"name\":\"b\"}]")
                .expect("chatter")
                .len(),
            1
        );
        assert!(
            sandbox_list(r#"{"sandboxes":null}"#)
                .expect("null list")
                .is_empty()
        );
        assert!(sandbox_list("null").expect("bare null").is_empty());
        assert_eq!(
            sandbox_list(r#"{"x":{"status":"stopped"}}"#).expect("map")[0].name,
            "x"
        );
    }

    #[test]
    fn rejects_what_it_does_not_understand() {
        for bad in [
            r#"[{"status":"running"}]"#,
            r#"{"weird":1}"#,
            "",
            "Error: oops",
            "42",
            r#"{"sandboxes":{}}"#,
        ] {
            assert!(sandbox_list(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn port_shapes() {
        assert_eq!(
            port_list(r#"["8080:3000/tcp"]"#).expect("spec")[0],
            PortMapping {
                host_port: Some(8080),
                sandbox_port: 3000
            }
        );
        assert_eq!(
            port_list(r#"{"ports":[{"hostPort":1,"sandboxPort":2}]}"#).expect("camel")[0].host_port,
            Some(1)
        );
        assert!(port_list("[]").expect("empty").is_empty());
        assert!(port_list(r#"[{"foo":1}]"#).is_err());
    }
}
