//! The data behind `airlock tools list|info|check`: plain serializable values (their JSON shapes
//! are documented in `docs/tools.md`); the binary renders them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use airlock_config::NetworkMode;
use airlock_sandbox::ToolMountMode;
use serde::Serialize;

use crate::catalog::Catalog;
use crate::host::{HostView, PathState};
use crate::plan::{Status, detect, resolve_mode};
use crate::settings::{Settings, valid_keys};
use crate::tool::{Category, KeyKind, Shell, Tool, ToolContext};

/// One row of `tools list`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ToolSummary {
    pub name: &'static str,
    pub status: Status,
    pub description: &'static str,
    pub binary: Option<PathBuf>,
}

/// `tools info <name>`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ToolInfo {
    pub name: &'static str,
    pub status: Status,
    pub description: &'static str,
    /// The binaries looked for on `PATH`, and the first found.
    pub binaries: Vec<&'static str>,
    pub binary: Option<PathBuf>,
    pub mounts: Vec<MountInfo>,
    /// What the tool adds to the environment (computed only for an enabled tool).
    pub env: BTreeMap<String, String>,
    /// Generated files, by path inside (`~` for the home).
    pub files: Vec<String>,
    /// Shell name → init line.
    pub shell_init: BTreeMap<&'static str, &'static str>,
    pub keys: Vec<KeyInfo>,
}

/// One declared mount of a tool, with its mode under the current config.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MountInfo {
    /// The host path, `~` for the home.
    pub source: String,
    /// The path inside.
    pub target: String,
    /// None for the mounts a tool derives from the project or the settings (git's `.git`).
    pub category: Option<Category>,
    /// `overlay`, `tmpoverlay`, `readonly`, `readwrite` or `disabled`.
    pub mode: &'static str,
    pub required: bool,
    pub state: PathState,
}

/// One `[tools.<name>]` key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KeyInfo {
    pub name: &'static str,
    /// `bool`, `string`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// Allowed values of a string key.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<&'static str>,
    pub default: &'static str,
    pub help: &'static str,
}

/// `tools check`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CheckReport {
    pub tools: Vec<ToolCheck>,
    pub available: usize,
    pub total: usize,
}

/// One tool's rows in `tools check`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ToolCheck {
    pub name: &'static str,
    pub status: Status,
    pub binary: Option<PathBuf>,
    /// Each declared path and what is there (available tools only).
    pub paths: Vec<PathCheck>,
    /// Things to fix: a missing binary, a dangling symlink, an unreadable dir, a missing required path.
    pub problems: Vec<String>,
    /// What the tool's state is, beyond its paths (herdr: the mode, whether agent reporting can
    /// be active here and which anchor is missing).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// The tool's version command run inside a real sandbox (absent with `--fast`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inside: Option<Inside>,
}

/// What the tool's version command did inside a sandbox.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Inside {
    /// The command, as run.
    pub command: String,
    pub ok: bool,
    /// Its first line of output (stdout and stderr), e.g. the version or the error.
    pub output: String,
}

/// A shell script that runs the version command of every available tool in `report` at once (in
/// parallel, 20 s each at most) and prints one `name<TAB>status<TAB>first line` per tool. None when
/// there is nothing to run.
pub fn inside_script(report: &CheckReport, catalog: &Catalog) -> Option<String> {
    let mut script = String::from(
        "cd /tmp || exit 1
",
    );
    let mut any = false;
    for t in report
        .tools
        .iter()
        .filter(|t| t.status == Status::Available)
    {
        let (Some(binary), Some(tool)) = (&t.binary, catalog.get(t.name)) else {
            continue;
        };
        any = true;
        let mut command = shell_quote(&binary.to_string_lossy());
        for arg in tool.version_args() {
            command.push(' ');
            command.push_str(&shell_quote(arg));
        }
        script.push_str(&format!(
            "( out=$(timeout 20 {command} 2>&1 </dev/null); rc=$?; \
             printf '%s\\t%s\\t%s\\n' {name} \"$rc\" \"$(printf '%s\\n' \"$out\" | head -n 1)\" \
             ) > /tmp/airlock-check-{name} &\n",
            name = t.name
        ));
    }
    script.push_str(
        "wait
cat /tmp/airlock-check-* 2>/dev/null
",
    );
    any.then_some(script)
}

/// Folds the output of [`inside_script`] into `report`: a tool whose command failed inside gets a
/// problem naming the command and what it printed. A tool with no line (the sandbox did not run)
/// gets `failure` as its problem when given.
pub fn apply_inside(
    report: &mut CheckReport,
    catalog: &Catalog,
    output: &str,
    failure: Option<&str>,
) {
    for t in report
        .tools
        .iter_mut()
        .filter(|t| t.status == Status::Available)
    {
        let (Some(binary), Some(tool)) = (&t.binary, catalog.get(t.name)) else {
            continue;
        };
        let command = std::iter::once(binary.to_string_lossy().into_owned())
            .chain(tool.version_args().iter().map(|a| a.to_string()))
            .collect::<Vec<_>>()
            .join(" ");
        let line = output.lines().find_map(|l| {
            let mut parts = l.splitn(3, '\t');
            (parts.next() == Some(t.name)).then(|| {
                let rc = parts.next().unwrap_or("").to_owned();
                (rc, parts.next().unwrap_or("").to_owned())
            })
        });
        let inside = match line {
            Some((rc, text)) => {
                // What a tool printed inside is shown on the host's terminal.
                let text = airlock_config::printable(&text);
                Inside {
                    ok: rc == "0",
                    output: if rc == "0" || rc.is_empty() {
                        text
                    } else {
                        format!("exit {rc}: {text}")
                    },
                    command,
                }
            }
            None => Inside {
                ok: false,
                output: failure.unwrap_or("no result").to_owned(),
                command,
            },
        };
        if !inside.ok {
            t.problems.push(format!(
                "inside a sandbox, `{}` failed ({}); see `airlock tools info {}`",
                inside.command, inside.output, t.name
            ));
        }
        t.inside = Some(inside);
    }
}

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// One path row of `tools check`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PathCheck {
    pub path: String,
    pub state: PathState,
    pub required: bool,
}

/// A mode as `tools info` and the docs spell it.
pub fn mode_name(mode: Option<ToolMountMode>) -> &'static str {
    match mode {
        None => "disabled",
        Some(ToolMountMode::Overlay) => "overlay",
        Some(ToolMountMode::Tmpoverlay) => "tmpoverlay",
        Some(ToolMountMode::Readonly) => "readonly",
        Some(ToolMountMode::Readwrite) => "readwrite",
        Some(ToolMountMode::Layer) => "layer",
        Some(ToolMountMode::Scratch) => "scratch",
    }
}

/// `tools list`: every tool, or only the available ones.
pub fn list(
    catalog: &Catalog,
    settings: &Settings,
    host: &HostView,
    all: bool,
) -> Vec<ToolSummary> {
    catalog
        .iter()
        .map(|tool| {
            let d = detect(tool, host, &settings.tool(tool.name()));
            ToolSummary {
                name: tool.name(),
                status: d.status,
                description: tool.description(),
                binary: d.binary,
            }
        })
        .filter(|s| all || s.status == Status::Available)
        .collect()
}

/// `tools info` for one tool. Runs nothing that changes the host.
pub fn info(
    tool: &dyn Tool,
    settings: &Settings,
    host: &HostView,
    network: NetworkMode,
    project: &Path,
) -> ToolInfo {
    let config = settings.tool(tool.name());
    let d = detect(tool, host, &config);
    let mut mounts: Vec<MountInfo> = d
        .mounts
        .iter()
        .map(|(decl, state)| MountInfo {
            source: host.tilde(&decl.source),
            target: host.tilde(&decl.target),
            category: Some(decl.category),
            mode: mode_name(resolve_mode(
                decl,
                config.mount_mode,
                settings.overlay_default,
            )),
            required: decl.required,
            state: *state,
        })
        .collect();
    let (env, files) = if config.enabled {
        let ctx = ToolContext {
            host,
            config: &config,
            network,
            project,
            dry_run: true,
        };
        let extras = tool.extras(&ctx);
        let binary = d.binary.as_deref().map_or_else(Vec::new, |b| {
            crate::resolve::binary_mounts(tool.name(), b, host, &[], &mut Vec::new())
        });
        mounts.extend(
            binary
                .iter()
                .chain(&extras.fixed_mounts)
                .map(|m| MountInfo {
                    source: host.tilde(&m.source),
                    target: host.tilde(&m.target),
                    category: None,
                    mode: mode_name(Some(m.mode)),
                    required: false,
                    state: host.state(&m.source),
                }),
        );
        let mut env: BTreeMap<String, String> = extras.env.into_iter().collect();
        if !extras.path_prepend.is_empty() {
            let dirs: Vec<String> = extras
                .path_prepend
                .iter()
                .map(|p| p.to_string_lossy().into_owned())
                .collect();
            env.insert("PATH".into(), format!("{}:$PATH", dirs.join(":")));
        }
        let files = extras.files.iter().map(|f| host.tilde(&f.target)).collect();
        (env, files)
    } else {
        (BTreeMap::new(), Vec::new())
    };
    ToolInfo {
        name: tool.name(),
        status: d.status,
        description: tool.description(),
        binaries: tool.binaries().to_vec(),
        binary: d.binary,
        mounts,
        env,
        files,
        shell_init: Shell::ALL
            .into_iter()
            .filter_map(|s| tool.shell_init(s).map(|line| (s.as_str(), line)))
            .collect(),
        keys: keys(tool),
    }
}

/// Every key of `[tools.<name>]`, the common ones first.
fn keys(tool: &dyn Tool) -> Vec<KeyInfo> {
    valid_keys(tool)
        .into_iter()
        .map(|name| match tool.keys().iter().find(|k| k.name == name) {
            Some(spec) => KeyInfo {
                name,
                kind: match spec.kind {
                    KeyKind::Bool => "bool",
                    KeyKind::Choice(_) => "string",
                    KeyKind::List(..) => "list",
                    KeyKind::Path => "path",
                },
                values: match spec.kind {
                    KeyKind::Bool | KeyKind::Path => Vec::new(),
                    KeyKind::Choice(values) | KeyKind::List(values, _) => values.to_vec(),
                },
                default: spec.default,
                help: spec.help,
            },
            None if name == "enabled" => KeyInfo {
                name,
                kind: "bool",
                values: Vec::new(),
                default: if tool.enabled_by_default() {
                    "true"
                } else {
                    "false"
                },
                help: "false: the tool contributes nothing to the sandbox",
            },
            None => KeyInfo {
                name,
                kind: "string",
                values: airlock_config::OverlayDefault::ALL
                    .iter()
                    .map(|m| m.as_str())
                    .collect(),
                default: "[overlay] default",
                help: "how this tool's mounts behave; overrides [overlay] default",
            },
        })
        .collect()
}

/// `tools check` for the named tools (all when `names` is empty; unknown names are the caller's
/// to reject first, with [`Catalog::get`]).
pub fn check(
    catalog: &Catalog,
    settings: &Settings,
    host: &HostView,
    names: &[String],
) -> CheckReport {
    let tools: Vec<ToolCheck> = catalog
        .iter()
        .filter(|t| names.is_empty() || names.iter().any(|n| n == t.name()))
        .map(|tool| check_tool(tool, settings, host))
        .collect();
    CheckReport {
        available: tools
            .iter()
            .filter(|t| t.status == Status::Available)
            .count(),
        total: tools.len(),
        tools,
    }
}

fn check_tool(tool: &dyn Tool, settings: &Settings, host: &HostView) -> ToolCheck {
    let d = detect(tool, host, &settings.tool(tool.name()));
    let mut problems = Vec::new();
    let mut paths = Vec::new();
    match d.status {
        Status::Available => {
            for (decl, state) in &d.mounts {
                let shown = host.tilde(&decl.source);
                match state {
                    PathState::Dangling => problems.push(format!(
                        "{shown} is a symlink to a path that does not exist; fix or remove the link"
                    )),
                    PathState::Unreadable => problems.push(format!(
                        "{shown} cannot be read; fix its permissions (it is skipped in the sandbox)"
                    )),
                    PathState::Missing if decl.required => {
                        problems.push(format!("{shown} is required but does not exist"))
                    }
                    _ => {}
                }
                paths.push(PathCheck {
                    path: shown,
                    state: *state,
                    required: decl.required,
                });
            }
        }
        Status::Missing if d.not_used.is_some() => problems.extend(d.not_used.clone()),
        Status::Missing => match tool.binaries().first() {
            Some(bin) => problems.push(format!("{bin} binary not found in PATH")),
            None => problems.push("none of its paths exist".to_owned()),
        },
        Status::Disabled => {}
    }
    ToolCheck {
        name: tool.name(),
        status: d.status,
        binary: d.binary,
        paths,
        problems,
        notes: Vec::new(),
        inside: None,
    }
}

#[cfg(test)]
mod inside_tests {
    use super::*;

    fn git_report() -> CheckReport {
        CheckReport {
            tools: vec![ToolCheck {
                name: "git",
                status: Status::Available,
                binary: Some("/usr/bin/git".into()),
                paths: Vec::new(),
                problems: Vec::new(),
                notes: Vec::new(),
                inside: None,
            }],
            available: 1,
            total: 1,
        }
    }

    #[test]
    fn what_a_tool_prints_inside_cannot_drive_the_hosts_terminal() {
        let catalog = Catalog::builtin();
        // The attack: a version line with an OSC 52 clipboard write and a line erase.
        let mut report = git_report();
        apply_inside(
            &mut report,
            &catalog,
            "git\t0\tgit 2.0\x1b]52;c;ZXZpbA==\x07\x1b[2K\n",
            None,
        );
        let inside = report.tools[0].inside.clone().expect("inside");
        assert!(inside.ok);
        assert!(!inside.output.contains('\x1b') && !inside.output.contains('\x07'));
        // The control: plain output is shown as printed, a failure becomes a problem.
        let mut report = git_report();
        apply_inside(&mut report, &catalog, "git\t0\tgit version 2.47.3\n", None);
        assert_eq!(
            report.tools[0].inside.as_ref().unwrap().output,
            "git version 2.47.3"
        );
        let mut report = git_report();
        apply_inside(&mut report, &catalog, "git\t127\tnot found\n", None);
        assert!(
            report.tools[0].problems[0]
                .contains("`/usr/bin/git --version` failed (exit 127: not found)")
        );
    }
}
