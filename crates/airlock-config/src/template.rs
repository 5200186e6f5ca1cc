//! The documented starting config (`airlock config init`) and the resolved profile as TOML
//! (`airlock config show`).

use std::fmt::Write;

use crate::Profile;

/// Every key is commented out rather than set, so a later change of a default reaches users who
/// never changed the key. Lines `#key = value` (no space after `#`) are the defaults; the tests
/// uncomment them and check that they match [`Profile::default`].
const INIT_TEMPLATE: &str = r#"# airlock configuration.
#
# Global file: $XDG_CONFIG_HOME/airlock/config.toml (default ~/.config/airlock/config.toml).
# A project may have a .airlock.toml with the same keys. It is loaded only after you review it and
# run `airlock trust add <dir>`, and it is ignored again as soon as it changes, until re-trusted.
# Project values override global ones; env_passthrough and mounts are added to the global ones.
#
# Every key below is commented out and shows its default. Unknown keys are an error.

[sandbox]
# How the sandbox reaches the network:
#   "host"  share the host's network (convenient, weakest)
#   "none"  a private network with only loopback
#network = "host"

# Mask .env* files and .airlock.toml inside the project, so secrets and the config stay unseen.
#hide_env_files = true

# Host environment variables copied into the sandbox, by name, e.g. ["TERM", "LANG"].
#env_passthrough = []

# Allow creating namespaces (and mounting in them) inside the sandbox, e.g. for nested
# containers or sandboxes. Widens what the agent can do; leave off unless a tool needs it.
#nested_namespaces = false

# Extra host paths, each mounted at the same path inside the sandbox. `~/` means your home.
# None by default. mode is one of:
#   "readonly"   visible, not writable
#   "readwrite"  visible and writable: changes reach the host
#   "hidden"     covered by an empty read-only directory (or empty file)
#   "tmpfs"      covered by an empty writable directory, discarded at exit
# [[sandbox.mounts]]
# path = "~/src/shared-lib"
# mode = "readonly"
"#;

/// A commented `config.toml` documenting every key with its default; it parses to an empty config.
pub fn init_template() -> &'static str {
    INIT_TEMPLATE
}

/// The resolved profile as TOML, keys spelled as in the files; each mount notes the file it came from.
pub fn render_profile(p: &Profile) -> String {
    let mut out = String::from("[sandbox]\n");
    // Writing to a String cannot fail.
    let _ = writeln!(out, "network = {}", quote(p.network.as_str()));
    let _ = writeln!(out, "hide_env_files = {}", p.hide_env_files);
    let names: Vec<String> = p.env_passthrough.iter().map(|n| quote(n)).collect();
    let _ = writeln!(out, "env_passthrough = [{}]", names.join(", "));
    let _ = writeln!(out, "nested_namespaces = {}", p.nested_namespaces);
    for m in &p.mounts {
        // `{:?}` escapes newlines, so a hostile file name cannot end the comment.
        let _ = writeln!(out, "\n# from {:?}", m.origin);
        let _ = writeln!(out, "[[sandbox.mounts]]");
        let _ = writeln!(out, "path = {}", quote(&m.path));
        let _ = writeln!(out, "mode = {}", quote(m.mode.as_str()));
    }
    out
}

/// A TOML basic string with every needed escape.
fn quote(s: &str) -> String {
    toml::Value::String(s.to_owned()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ConfigFile, MountMode, NetworkMode, ProfileMount, parse_str};
    use std::path::{Path, PathBuf};

    #[test]
    fn template_parses_to_an_empty_config() {
        let cfg = parse_str(init_template(), Path::new("template.toml")).unwrap();
        assert_eq!(cfg, ConfigFile::default());
    }

    #[test]
    fn template_defaults_match_the_code() {
        let uncommented: String = init_template()
            .lines()
            .map(|l| match l.strip_prefix('#') {
                Some(rest) if rest.starts_with(|c: char| c.is_ascii_lowercase()) => rest,
                _ => l,
            })
            .map(|l| format!("{l}\n"))
            .collect();
        let cfg = parse_str(&uncommented, Path::new("template.toml")).unwrap();
        let s = &cfg.sandbox;
        assert!(s.network.is_some() && s.hide_env_files.is_some() && s.nested_namespaces.is_some());
        let origin = Path::new("template.toml");
        assert_eq!(
            Profile::layer(None, Some((origin, &cfg))),
            Profile::default()
        );
    }

    #[test]
    fn template_documents_every_key_and_mode() {
        let t = init_template();
        for key in [
            "[sandbox]",
            "network =",
            "hide_env_files =",
            "env_passthrough =",
            "nested_namespaces =",
            "[[sandbox.mounts]]",
            "path =",
            "mode =",
            "\"host\"",
            "\"none\"",
        ] {
            assert!(t.contains(key), "template lacks {key}");
        }
        for mode in [
            MountMode::Readonly,
            MountMode::Readwrite,
            MountMode::Hidden,
            MountMode::Tmpfs,
        ] {
            assert!(t.contains(&format!("\"{}\"", mode.as_str())), "{mode:?}");
        }
        // The mount example, uncommented, is valid too.
        let example: String = t
            .lines()
            .skip_while(|l| !l.contains("[[sandbox.mounts]]"))
            .map(|l| format!("{}\n", l.trim_start_matches("# ")))
            .collect();
        let cfg = parse_str(&example, Path::new("example.toml")).unwrap();
        assert_eq!(cfg.sandbox.mounts.len(), 1);
    }

    #[test]
    fn default_profile_renders_exactly() {
        assert_eq!(
            render_profile(&Profile::default()),
            "[sandbox]\n\
             network = \"host\"\n\
             hide_env_files = true\n\
             env_passthrough = []\n\
             nested_namespaces = false\n"
        );
    }

    #[test]
    fn rendered_profile_parses_back_to_the_same_profile() {
        let profile = Profile {
            network: NetworkMode::None,
            hide_env_files: false,
            env_passthrough: vec!["TERM".into(), "WEIRD\"NAME\\".into()],
            nested_namespaces: true,
            mounts: vec![
                ProfileMount {
                    path: "~/a b".into(),
                    mode: MountMode::Readonly,
                    origin: PathBuf::from("/home/u/.config/airlock/config.toml"),
                },
                ProfileMount {
                    path: "/x\n\"y\"".into(),
                    mode: MountMode::Tmpfs,
                    origin: PathBuf::from("/p/evil\n[sandbox]\n/.airlock.toml"),
                },
            ],
        };
        let text = render_profile(&profile);
        assert!(
            text.contains("# from \"/home/u/.config/airlock/config.toml\""),
            "{text}"
        );
        let origin = Path::new("shown.toml");
        let cfg = parse_str(&text, origin).unwrap();
        let back = Profile::layer(None, Some((origin, &cfg)));
        let mut expected = profile.clone();
        for m in &mut expected.mounts {
            m.origin = origin.to_path_buf();
        }
        assert_eq!(back, expected);
    }
}
