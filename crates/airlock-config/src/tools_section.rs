//! The `[overlay]` and `[tools.<name>]` tables.
//!
//! Which tool names and keys exist is declared by each tool in `airlock-tools`, so this crate keeps
//! the tables as plain key → value maps (each value tagged with its file) and `airlock-tools`
//! validates them against the catalog.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::de::{self, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};

/// The `[overlay]` table.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OverlaySection {
    /// `default = "split" | "overlay" | "tmpoverlay" | "readonly" | "readwrite" | "disabled"`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default: Option<OverlayDefault>,
}

impl OverlaySection {
    pub fn is_empty(&self) -> bool {
        self.default.is_none()
    }
}

/// How tool mounts behave unless a tool's own `mount_mode` says otherwise.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OverlayDefault {
    /// Each mount's own default: config and runtime dirs `tmpoverlay`, data, cache and state dirs
    /// `overlay`, unless the tool documents another default (mise, shells and nvim: `readonly`).
    #[default]
    Split,
    /// Host content visible; writes kept in the sandbox's state across runs, never on the host.
    Overlay,
    /// Host content visible; writes discarded at exit.
    Tmpoverlay,
    Readonly,
    /// Writes reach the host.
    Readwrite,
    /// Not mounted at all.
    Disabled,
}

impl OverlayDefault {
    pub const ALL: [OverlayDefault; 6] = [
        OverlayDefault::Split,
        OverlayDefault::Overlay,
        OverlayDefault::Tmpoverlay,
        OverlayDefault::Readonly,
        OverlayDefault::Readwrite,
        OverlayDefault::Disabled,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            OverlayDefault::Split => "split",
            OverlayDefault::Overlay => "overlay",
            OverlayDefault::Tmpoverlay => "tmpoverlay",
            OverlayDefault::Readonly => "readonly",
            OverlayDefault::Readwrite => "readwrite",
            OverlayDefault::Disabled => "disabled",
        }
    }

    /// Parses the spelling used in the files (`mount_mode` values use it too).
    pub fn parse(s: &str) -> Option<OverlayDefault> {
        OverlayDefault::ALL.into_iter().find(|m| m.as_str() == s)
    }
}

/// One value in a `[tools.<name>]` table. Only the shapes tool settings use are accepted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum ToolValue {
    Bool(bool),
    Integer(i64),
    String(String),
    Strings(Vec<String>),
}

impl ToolValue {
    /// The value's type as the error messages name it.
    pub fn type_name(&self) -> &'static str {
        match self {
            ToolValue::Bool(_) => "a boolean",
            ToolValue::Integer(_) => "an integer",
            ToolValue::String(_) => "a string",
            ToolValue::Strings(_) => "an array of strings",
        }
    }

    /// The value as TOML text.
    pub fn to_toml(&self) -> String {
        match self {
            ToolValue::Bool(b) => b.to_string(),
            ToolValue::Integer(i) => i.to_string(),
            ToolValue::String(s) => toml::Value::String(s.clone()).to_string(),
            ToolValue::Strings(list) => {
                let items: Vec<String> = list
                    .iter()
                    .map(|s| toml::Value::String(s.clone()).to_string())
                    .collect();
                format!("[{}]", items.join(", "))
            }
        }
    }
}

impl<'de> Deserialize<'de> for ToolValue {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<ToolValue, D::Error> {
        struct ToolValueVisitor;
        impl<'de> Visitor<'de> for ToolValueVisitor {
            type Value = ToolValue;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a boolean, an integer, a string or an array of strings")
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<ToolValue, E> {
                Ok(ToolValue::Bool(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<ToolValue, E> {
                Ok(ToolValue::Integer(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<ToolValue, E> {
                i64::try_from(v)
                    .map(ToolValue::Integer)
                    .map_err(|_| E::custom(format!("integer {v} is too large")))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<ToolValue, E> {
                Ok(ToolValue::String(v.to_owned()))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<ToolValue, A::Error> {
                let mut list = Vec::new();
                while let Some(item) = seq.next_element::<String>()? {
                    list.push(item);
                }
                Ok(ToolValue::Strings(list))
            }
        }
        deserializer.deserialize_any(ToolValueVisitor)
    }
}

/// One `[tools.<name>]` key after layering, with the file that set it (for error messages).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolSetting {
    pub value: ToolValue,
    pub origin: PathBuf,
}

/// `[tools.<name>]` tables as written in one file: tool name → key → value.
pub type ToolTables = BTreeMap<String, BTreeMap<String, ToolValue>>;

/// The layered `[tools]` settings: tool name → key → value with its file.
pub type ToolSettingsMap = BTreeMap<String, BTreeMap<String, ToolSetting>>;

/// Layers one file's `[tools]` tables over `into`, key by key: a key the file sets replaces the
/// earlier file's value for that key; the other keys of the table stay.
pub(crate) fn layer_tools(into: &mut ToolSettingsMap, origin: &Path, tables: &ToolTables) {
    for (tool, keys) in tables {
        let entry = into.entry(tool.clone()).or_default();
        for (key, value) in keys {
            entry.insert(
                key.clone(),
                ToolSetting {
                    value: value.clone(),
                    origin: origin.to_path_buf(),
                },
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Profile, parse_str};

    #[test]
    fn overlay_and_tools_tables_parse() {
        let cfg = parse_str(
            r#"
            [overlay]
            default = "tmpoverlay"
            [tools.git]
            mode = "readwrite"
            allow_hooks = true
            [tools.mise]
            mount_mode = "overlay"
            extra = ["a", "b"]
            depth = 3
            "#,
            Path::new("/c.toml"),
        )
        .unwrap();
        assert_eq!(cfg.overlay.default, Some(OverlayDefault::Tmpoverlay));
        let git = &cfg.tools["git"];
        assert_eq!(git["mode"], ToolValue::String("readwrite".into()));
        assert_eq!(git["allow_hooks"], ToolValue::Bool(true));
        let mise = &cfg.tools["mise"];
        assert_eq!(
            mise["extra"],
            ToolValue::Strings(vec!["a".into(), "b".into()])
        );
        assert_eq!(mise["depth"], ToolValue::Integer(3));
    }

    #[test]
    fn bad_overlay_values_are_errors_naming_the_value() {
        let err = parse_str("[overlay]\ndefault = \"sometimes\"\n", Path::new("/c.toml"))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("sometimes") && err.contains("tmpoverlay"),
            "{err}"
        );
        let err = parse_str("[overlay]\nmode = \"split\"\n", Path::new("/c.toml"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("mode") && err.contains("default"), "{err}");
        let err = parse_str("[tools.git]\nmode = 1.5\n", Path::new("/c.toml"))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("array of strings") && err.contains("/c.toml"),
            "{err}"
        );
        let err = parse_str("[tools.git]\nmode = { a = 1 }\n", Path::new("/c.toml"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("a boolean, an integer"), "{err}");
        let err = parse_str("tools = 3\n", Path::new("/c.toml"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("/c.toml"), "{err}");
    }

    #[test]
    fn tools_layer_per_key_and_overlay_default_is_a_scalar() {
        let g = parse_str(
            "[overlay]\ndefault = \"readonly\"\n[tools.git]\nmode = \"disabled\"\nallow_hooks = true\n[tools.mise]\nenabled = false\n",
            Path::new("/g.toml"),
        )
        .unwrap();
        let p = parse_str(
            "[overlay]\ndefault = \"overlay\"\n[tools.git]\nmode = \"readwrite\"\n",
            Path::new("/p.toml"),
        )
        .unwrap();
        let profile = Profile::layer(
            Some((Path::new("/g.toml"), &g)),
            Some((Path::new("/p.toml"), &p)),
        );
        assert_eq!(profile.overlay_default, OverlayDefault::Overlay);
        let git = &profile.tools["git"];
        assert_eq!(git["mode"].value, ToolValue::String("readwrite".into()));
        assert_eq!(git["mode"].origin, Path::new("/p.toml"));
        assert_eq!(git["allow_hooks"].value, ToolValue::Bool(true));
        assert_eq!(git["allow_hooks"].origin, Path::new("/g.toml"));
        assert_eq!(
            profile.tools["mise"]["enabled"].value,
            ToolValue::Bool(false)
        );
        let only_global = Profile::layer(Some((Path::new("/g.toml"), &g)), None);
        assert_eq!(only_global.overlay_default, OverlayDefault::Readonly);
        assert_eq!(Profile::default().overlay_default, OverlayDefault::Split);
    }

    #[test]
    fn overlay_default_spellings_round_trip() {
        for mode in OverlayDefault::ALL {
            assert_eq!(OverlayDefault::parse(mode.as_str()), Some(mode));
        }
        assert_eq!(OverlayDefault::parse("Overlay"), None);
        let template = crate::init_template();
        for mode in OverlayDefault::ALL {
            assert!(
                template.contains(&format!("\"{}\"", mode.as_str())),
                "{mode:?}"
            );
        }
    }
}
