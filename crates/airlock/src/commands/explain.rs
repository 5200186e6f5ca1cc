//! `airlock run --explain`: the launch in words, read off the same [`SandboxSpec`] that
//! `--print-spec` prints, so the two cannot tell different stories. The spec does not say which
//! tool asked for a mount, so that comes from the tools' contributions; every mode shown is the
//! one of the spec's mount at that path, and the user's own mounts are the spec's targets whose
//! origin is a `[[sandbox.mounts]]` entry. Variable values are never shown, only names.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use airlock_config::ports::PortDirection;
use airlock_config::{EgressPreset, NetworkMode};
use airlock_sandbox::{Contributions, HostFacts, MountOp, SandboxSpec, Upper};
use airlock_tools::{Catalog, Settings};

/// Width of the label column.
const LABEL: usize = 10;
/// Lines are wrapped near this width.
const WIDTH: usize = 100;

/// What `--explain` says about one launch.
pub struct Launch<'a> {
    spec: &'a SandboxSpec,
    /// The host home, shown as `~` in paths.
    home: &'a Path,
    /// Per tool that takes part: the paths inside it brings (mounts and generated files).
    tools: BTreeMap<String, Vec<PathBuf>>,
    /// Per tool with a `mode` key (git, herdr, kitty): the mode of this run.
    tool_modes: BTreeMap<String, String>,
    /// Tools turned off (`enabled = false`, or opt-in tools not turned on).
    disabled: Vec<String>,
}

impl<'a> Launch<'a> {
    pub fn new(
        spec: &'a SandboxSpec,
        contrib: &Contributions,
        settings: &Settings,
        catalog: &Catalog,
        facts: &'a HostFacts,
    ) -> Launch<'a> {
        let mut tools: BTreeMap<String, Vec<PathBuf>> = BTreeMap::new();
        let targets = contrib.mounts.iter().map(|m| (&m.tool, &m.target));
        let files = contrib.files.iter().map(|f| (&f.tool, &f.target));
        for (tool, target) in targets.chain(files) {
            let paths = tools.entry(tool.clone()).or_default();
            if !paths.contains(target) {
                paths.push(target.clone());
            }
        }
        let mut tool_modes = BTreeMap::new();
        let mut disabled = Vec::new();
        for tool in catalog.iter() {
            let config = settings.tool(tool.name());
            if !config.enabled {
                disabled.push(tool.name().to_owned());
                continue;
            }
            let Some(key) = tool.keys().iter().find(|k| k.name == "mode") else {
                continue;
            };
            if tool.name() == "git" || tools.contains_key(tool.name()) {
                let mode = config.text("mode").unwrap_or(key.default.trim_matches('"'));
                tool_modes.insert(tool.name().to_owned(), mode.to_owned());
                tools.entry(tool.name().to_owned()).or_default();
            }
        }
        Launch {
            spec,
            home: &facts.home,
            tools,
            tool_modes,
            disabled,
        }
    }

    /// The text `--explain` prints: one `label  value` line per fact, continuation lines indented.
    pub fn render(&self) -> String {
        let spec = self.spec;
        let mut out = String::new();
        line(&mut out, "project", &spec.project.display().to_string());
        line(
            &mut out,
            "sandbox",
            &format!("{}, state in {}", spec.name, spec.state_root.display()),
        );
        line(
            &mut out,
            "home",
            &format!(
                "{}: the sandbox's own, kept in the state's home/ (of your home, only what \
                 the tools and mounts below bring)",
                self.home.display()
            ),
        );
        line(&mut out, "cwd", &spec.cwd.display().to_string());
        line(&mut out, "command", &shell_words(&spec.argv));
        self.network(&mut out);
        self.limits(&mut out);
        self.tools(&mut out);
        self.hidden(&mut out);
        self.mounts(&mut out);
        let names: Vec<&str> = spec.env.keys().map(String::as_str).collect();
        let head = format!("{} variables (names only):", names.len());
        wrapped(&mut out, "env", &head, &names);
        out
    }

    fn network(&self, out: &mut String) {
        let spec = self.spec;
        match (spec.network, &spec.egress) {
            (NetworkMode::Proxy, Some(egress)) => {
                line(
                    out,
                    "network",
                    &format!(
                        "proxy: only lo; HTTP(S) to allowed hosts through airlock's egress proxy at {}",
                        egress.url
                    ),
                );
                let settings = &egress.settings;
                let preset = match settings.preset {
                    EgressPreset::Balanced => format!(
                        "preset balanced ({} hosts: model APIs, package registries, code hosts)",
                        airlock_egress::presets::balanced().count()
                    ),
                    EgressPreset::AllowAll => "preset allow-all (every host)".to_owned(),
                    EgressPreset::DenyAll => "preset deny-all (no host)".to_owned(),
                };
                let mut policy = vec![
                    preset,
                    format!(
                        "{} allow and {} deny rules from the config",
                        settings.allow.len(),
                        settings.deny.len()
                    ),
                ];
                if !egress.allow_hosts.is_empty() {
                    policy.push(format!("--allow-host {}", egress.allow_hosts.join(" ")));
                }
                if !egress.deny_hosts.is_empty() {
                    policy.push(format!("--deny-host {}", egress.deny_hosts.join(" ")));
                }
                line(
                    out,
                    "",
                    &format!("policy: {}; deny wins", policy.join("; ")),
                );
                let private = if settings.allow_private {
                    "allowed"
                } else {
                    "refused"
                };
                let mut rest = vec![format!("private and local addresses {private}")];
                if !settings.resolve.is_empty() {
                    let names: Vec<&str> = settings.resolve.keys().map(String::as_str).collect();
                    rest.push(format!("fixed addresses for {}", names.join(", ")));
                }
                if let Some(upstream) = &egress.upstream_proxy {
                    let shown = airlock_config::without_userinfo(upstream);
                    rest.push(format!("through the upstream proxy {shown}"));
                }
                line(out, "", &rest.join("; "));
                line(out, "", &format!("log: {}", egress.log.display()));
            }
            (NetworkMode::Proxy, None) => line(out, "network", "proxy"),
            (NetworkMode::None, _) => line(out, "network", "none: only lo, no way out"),
            (NetworkMode::Host, _) => line(
                out,
                "network",
                "host: the host's network, unfiltered (no egress policy)",
            ),
        }
        for f in &spec.ports.forwards {
            let what = match f.direction {
                PortDirection::In => format!(
                    "the host's 127.0.0.1:{} reaches 127.0.0.1:{} inside",
                    f.host, f.sandbox
                ),
                PortDirection::Out => format!(
                    "127.0.0.1:{} inside reaches the host's 127.0.0.1:{} (a door to that service)",
                    f.sandbox, f.host
                ),
            };
            line(out, "", &format!("forward: {what}; {}", f.origin));
        }
    }

    fn tools(&self, out: &mut String) {
        let mut label = "tools";
        if self.tools.is_empty() {
            line(out, label, "none");
        }
        let width = self.tools.keys().map(String::len).max().unwrap_or(0);
        for (tool, paths) in &self.tools {
            let mut parts = Vec::new();
            if let Some(mode) = self.tool_modes.get(tool) {
                parts.push(format!("mode {mode}"));
            }
            // Paths grouped by what the spec does at each, in first-seen order.
            let mut by_mode: Vec<(&'static str, Vec<String>)> = Vec::new();
            for path in paths {
                let mode = self.mode_at(path);
                let shown = self.show(path);
                match by_mode.iter_mut().find(|(m, _)| *m == mode) {
                    Some((_, list)) => list.push(shown),
                    None => by_mode.push((mode, vec![shown])),
                }
            }
            for (mode, list) in by_mode {
                parts.push(format!("{mode} {}", list.join(", ")));
            }
            line(out, label, &format!("{tool:width$}  {}", parts.join("; ")));
            label = "";
        }
        if !self.disabled.is_empty() {
            line(out, label, &format!("off: {}", self.disabled.join(", ")));
        }
    }

    fn hidden(&self, out: &mut String) {
        let Some(hide) = &self.spec.hide else {
            line(out, "hidden", "nothing in the project");
            return;
        };
        if hide.patterns.is_empty() {
            line(out, "hidden", "no patterns");
        } else {
            line(
                out,
                "hidden",
                &format!(
                    "{} (read as empty, for the whole session)",
                    hide.patterns.join(", ")
                ),
            );
            line(out, "", &format!("not searched: {}", hide.skip.join(", ")));
        }
        if !hide.known.is_empty() {
            let known: Vec<String> = hide
                .known
                .iter()
                .map(|h| h.path.display().to_string())
                .collect();
            line(
                out,
                "",
                &format!("also where the last session hid: {}", known.join(", ")),
            );
        }
        if !hide.pins.is_empty() {
            let pinned: Vec<String> = hide.pins.iter().map(|p| self.show(&p.target)).collect();
            line(
                out,
                "",
                &format!("held read-only copies: {}", pinned.join(", ")),
            );
        }
    }

    fn limits(&self, out: &mut String) {
        let limits = &self.spec.limits;
        let mut parts = Vec::new();
        if let Some(bytes) = limits.memory {
            parts.push(format!("memory {}", size(bytes)));
        }
        if let Some(milli) = limits.cpus_milli {
            parts.push(format!("{} CPUs", f64::from(milli) / 1000.0));
        }
        if let Some(pids) = limits.pids {
            parts.push(format!("{pids} processes"));
        }
        if parts.is_empty() {
            parts.push("no memory, CPU or process limit".to_owned());
        }
        let tmpfs = match limits.tmpfs_bytes {
            0 => "each tmpfs up to the kernel's default (half of RAM)".to_owned(),
            bytes => format!("each tmpfs up to {}", size(bytes)),
        };
        parts.push(tmpfs);
        line(out, "limits", &parts.join(", "));
    }

    fn mounts(&self, out: &mut String) {
        let mut label = "mounts";
        for (target, origin) in &self.spec.mount_origins {
            if !origin.contains("[[sandbox.mounts]]") {
                continue;
            }
            let origin = match origin.split_once(": ") {
                Some((file, entry)) => format!("{}: {entry}", self.show(Path::new(file))),
                None => origin.clone(),
            };
            let mode = self.mode_at(target);
            line(
                out,
                label,
                &format!("{} {mode}, from {origin}", self.show(target)),
            );
            label = "";
        }
        if label == "mounts" {
            line(out, "mounts", "none of your own ([[sandbox.mounts]])");
        }
    }

    /// What the spec does at `target`: the last mount there wins, as it covers the earlier ones.
    fn mode_at(&self, target: &Path) -> &'static str {
        let generated = self.spec.state_root.join("generated");
        match self
            .spec
            .mounts
            .iter()
            .rev()
            .find(|op| op.target() == target)
        {
            None => "not mounted",
            Some(MountOp::Bind { source, .. }) if source.starts_with(&generated) => "generated",
            Some(op) => op_mode(op),
        }
    }

    /// `path` with the host home as `~`.
    fn show(&self, path: &Path) -> String {
        match path.strip_prefix(self.home) {
            Ok(rel) if rel.as_os_str().is_empty() => "~".to_owned(),
            Ok(rel) => format!("~/{}", rel.display()),
            Err(_) => path.display().to_string(),
        }
    }
}

/// A mount operation in the words of the mount modes (docs/tools.md, README).
fn op_mode(op: &MountOp) -> &'static str {
    match op {
        MountOp::Bind {
            writable: false, ..
        } => "readonly",
        MountOp::Bind { writable: true, .. } => "readwrite",
        MountOp::Overlay { upper, .. } => match upper {
            Upper::Persistent { .. } => "overlay",
            Upper::Throwaway => "tmpoverlay",
            Upper::Owned { .. } => "layer",
            Upper::Stacked { .. } => "overlay (another session's, writes discarded)",
        },
        MountOp::Tmpfs { writable: true, .. } => "tmpfs",
        MountOp::Tmpfs {
            writable: false, ..
        }
        | MountOp::MaskFile { .. } => "hidden",
        MountOp::CopyFile { .. } => "copy",
        MountOp::Symlink { .. } => "symlink",
        MountOp::Proc { .. } | MountOp::Dev { .. } => "system",
    }
}

/// Binary units: `512 MiB`, `1.5 GiB`.
fn size(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if value.fract() == 0.0 {
        format!("{value:.0} {}", UNITS[unit])
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// argv as one would type it: words with spaces or quotes in single quotes.
fn shell_words(argv: &[String]) -> String {
    let words: Vec<String> = argv
        .iter()
        .map(|w| {
            let plain = !w.is_empty()
                && w.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c));
            if plain {
                w.clone()
            } else {
                format!("'{}'", w.replace('\'', r"'\''"))
            }
        })
        .collect();
    words.join(" ")
}

fn line(out: &mut String, label: &str, value: &str) {
    let _ = writeln!(out, "{label:LABEL$}{value}");
}

/// `head` then `items` joined by `, `, wrapped under the value column.
fn wrapped(out: &mut String, label: &str, head: &str, items: &[&str]) {
    let mut current = head.to_owned();
    let mut label = label;
    for (i, item) in items.iter().enumerate() {
        let sep = if i + 1 < items.len() { "," } else { "" };
        if LABEL + current.len() + 1 + item.len() + sep.len() > WIDTH && !current.is_empty() {
            line(out, label, &current);
            label = "";
            current = format!("{item}{sep}");
        } else if current.is_empty() {
            current = format!("{item}{sep}");
        } else {
            current = format!("{current} {item}{sep}");
        }
    }
    line(out, label, &current);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_quoted_only_when_needed() {
        let argv = ["sh", "-c", "echo 'hi' there", ""].map(String::from);
        assert_eq!(shell_words(&argv), r"sh -c 'echo '\''hi'\'' there' ''");
    }

    #[test]
    fn long_lists_wrap_under_the_value_column() {
        let names: Vec<String> = (0..30).map(|n| format!("NAME_{n:02}")).collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let mut out = String::new();
        wrapped(&mut out, "env", "30 variables (names only):", &names);
        let lines: Vec<&str> = out.lines().collect();
        assert!(lines.len() > 1, "{out}");
        assert!(lines[0].starts_with("env       30 variables (names only): NAME_00,"));
        assert!(
            lines[1..].iter().all(|l| l.starts_with("          NAME_")),
            "{out}"
        );
        assert!(lines.iter().all(|l| l.len() <= WIDTH), "{out}");
        assert!(out.trim_end().ends_with("NAME_29"), "{out}");
    }

    #[test]
    fn sizes_in_binary_units() {
        assert_eq!(size(512), "512 B");
        assert_eq!(size(64 << 20), "64 MiB");
        assert_eq!(size(3 << 29), "1.5 GiB");
    }

    #[test]
    fn mount_ops_in_mode_words() {
        let bind = |writable| MountOp::Bind {
            source: "/a".into(),
            target: "/a".into(),
            writable,
        };
        let overlay = |upper| MountOp::Overlay {
            lower: "/a".into(),
            target: "/a".into(),
            upper,
        };
        assert_eq!(op_mode(&bind(false)), "readonly");
        assert_eq!(op_mode(&bind(true)), "readwrite");
        assert_eq!(
            op_mode(&overlay(Upper::Persistent { dir: "/s".into() })),
            "overlay"
        );
        assert_eq!(op_mode(&overlay(Upper::Throwaway)), "tmpoverlay");
        assert_eq!(
            op_mode(&overlay(Upper::Owned { dir: "/s".into() })),
            "layer"
        );
        let tmpfs = |writable| MountOp::Tmpfs {
            target: "/a".into(),
            writable,
        };
        assert_eq!(op_mode(&tmpfs(true)), "tmpfs");
        assert_eq!(op_mode(&tmpfs(false)), "hidden");
        assert_eq!(
            op_mode(&MountOp::MaskFile {
                target: "/a".into()
            }),
            "hidden"
        );
    }
}
