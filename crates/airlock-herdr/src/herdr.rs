//! herdr through its CLI (`HERDR_BIN_PATH`, else `herdr` on PATH): the portable plugin API. Every
//! call is killed after ten seconds so a wedged server cannot hang an action or the agent launch.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

use crate::backend::sbx::find_executable;
use crate::error::{ErrorKind, PluginError, Result};
use crate::proc;

/// herdr CLI calls are killed after this.
pub const HERDR_TIMEOUT: Duration = Duration::from_secs(10);

/// herdr's answer when a pane id is unknown.
pub fn is_pane_not_found(output: &str) -> bool {
    let t = output.to_ascii_lowercase();
    t.contains("pane_not_found")
        || t.contains("no such pane")
        || t.contains("unknown pane")
        || (t.contains("pane ") && t.contains(" not found"))
}

/// A pane as `herdr pane get` describes it (unknown fields ignored, as herdr asks of clients).
#[derive(Debug, Clone, PartialEq)]
pub struct PaneInfo {
    pub pane_id: String,
    pub workspace_id: Option<String>,
    /// The agent herdr detects in the pane, if any.
    pub agent: Option<String>,
    pub agent_status: Option<String>,
}

impl PaneInfo {
    fn from_json(v: &Value) -> Option<PaneInfo> {
        let s = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
        Some(PaneInfo {
            pane_id: s("pane_id")?,
            workspace_id: s("workspace_id"),
            agent: s("agent").filter(|a| !a.is_empty()),
            agent_status: s("agent_status"),
        })
    }

    /// herdr sees an agent running in the pane.
    pub fn has_agent(&self) -> bool {
        self.agent.is_some() && !matches!(self.agent_status.as_deref(), Some("done"))
    }
}

/// The herdr CLI.
#[derive(Debug, Clone)]
pub struct HerdrCli {
    pub bin: PathBuf,
    pub timeout: Duration,
}

impl HerdrCli {
    pub fn resolve() -> Result<HerdrCli> {
        let requested = std::env::var("HERDR_BIN_PATH")
            .ok()
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "herdr".to_owned());
        let bin = find_executable(&requested).ok_or_else(|| {
            PluginError::startup(format!(
                "The herdr CLI was not found (looked for {requested:?}). Run the action from herdr, which sets HERDR_BIN_PATH, or put herdr on PATH."
            ))
        })?;
        Ok(HerdrCli {
            bin,
            timeout: HERDR_TIMEOUT,
        })
    }

    /// Runs `herdr args`; a non-zero exit is an `unknown` error carrying the output.
    pub fn run(&self, args: &[&str], step: &str) -> Result<Value> {
        let out = proc::run_captured(&self.bin, args, &[], None, self.timeout).map_err(|e| {
            PluginError::startup(format!(
                "Could not run the herdr CLI ({}) while {step}: {e}.",
                self.bin.display()
            ))
        })?;
        let head = args.iter().take(2).copied().collect::<Vec<_>>().join(" ");
        if out.timed_out {
            return Err(PluginError::new(ErrorKind::Unknown, format!("herdr {head} did not answer within {} s while {step}; is the herdr server wedged?", self.timeout.as_secs()))
                .with_output(out.output()));
        }
        if !out.success() {
            return Err(PluginError::new(
                ErrorKind::Unknown,
                format!(
                    "herdr {head} failed while {step} (exit {}).",
                    out.code.unwrap_or(-1)
                ),
            )
            .with_output(out.output()));
        }
        Ok(serde_json::from_str(out.stdout.trim()).unwrap_or(Value::Null))
    }

    fn result<'a>(json: &'a Value, key: &str) -> Option<&'a Value> {
        json.pointer(&format!("/result/{key}"))
            .or_else(|| json.get(key))
    }

    /// The non-empty `pane_id` of the pane object under `key` in a `command`'s answer.
    fn new_pane_id(json: &Value, key: &str, command: &str) -> Result<String> {
        Self::result(json, key)
            .and_then(|p| p.get("pane_id"))
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .ok_or_else(|| {
                PluginError::new(
                    ErrorKind::Unknown,
                    format!("{command} did not return a pane id."),
                )
                .with_output(json.to_string())
            })
    }

    /// Splits `pane` and returns the new pane id (the CLI needs an explicit pane).
    pub fn split_pane(
        &self,
        pane: &str,
        direction: &str,
        ratio: f64,
        cwd: Option<&str>,
        focus: bool,
    ) -> Result<String> {
        let ratio_text = ratio.to_string();
        let mut args = vec!["pane", "split", pane, "--direction", direction];
        // An even split is herdr's default: `--ratio` (herdr 0.9) only when it differs.
        if (ratio - 0.5).abs() > f64::EPSILON {
            args.extend(["--ratio", &ratio_text]);
        }
        if let Some(cwd) = cwd {
            args.extend(["--cwd", cwd]);
        }
        args.push(if focus { "--focus" } else { "--no-focus" });
        let json = self.run(&args, "splitting the pane")?;
        Self::new_pane_id(&json, "pane", "herdr pane split")
    }

    /// A pane next to `source` (a split), or a new tab in `workspace` when there is no source pane.
    pub fn open_pane(
        &self,
        source: Option<&str>,
        workspace: Option<&str>,
        cwd: Option<&str>,
        label: Option<&str>,
    ) -> Result<String> {
        match source {
            Some(pane) => self.split_pane(pane, "right", 0.5, cwd, true),
            None => self.create_tab(workspace, cwd, label),
        }
    }

    /// Creates a tab; returns its root pane id.
    pub fn create_tab(
        &self,
        workspace: Option<&str>,
        cwd: Option<&str>,
        label: Option<&str>,
    ) -> Result<String> {
        let mut args = vec!["tab", "create"];
        if let Some(w) = workspace {
            args.extend(["--workspace", w]);
        }
        if let Some(c) = cwd {
            args.extend(["--cwd", c]);
        }
        if let Some(l) = label {
            args.extend(["--label", l]);
        }
        args.push("--focus");
        let json = self.run(&args, "creating a tab")?;
        Self::new_pane_id(&json, "root_pane", "herdr tab create")
    }

    /// The pane, or `None` when herdr does not know it.
    pub fn get_pane(&self, pane: &str) -> Result<Option<PaneInfo>> {
        match self.run(&["pane", "get", pane], "reading the pane") {
            Ok(json) => Ok(Self::result(&json, "pane").and_then(PaneInfo::from_json)),
            Err(e) if e.output.as_deref().is_some_and(is_pane_not_found) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Every pane id herdr knows.
    pub fn list_panes(&self) -> Result<Vec<PaneInfo>> {
        let json = self.run(&["pane", "list"], "listing panes")?;
        let panes = Self::result(&json, "panes")
            .and_then(Value::as_array)
            .ok_or_else(|| {
                PluginError::new(
                    ErrorKind::Unknown,
                    "herdr pane list did not return a pane list.",
                )
                .with_output(json.to_string())
            })?;
        Ok(panes.iter().filter_map(PaneInfo::from_json).collect())
    }

    pub fn rename_pane(&self, pane: &str, label: &str) -> Result<()> {
        self.run(&["pane", "rename", pane, label], "renaming the pane")
            .map(drop)
    }

    pub fn close_pane(&self, pane: &str) -> Result<()> {
        self.run(&["pane", "close", pane], "closing the pane")
            .map(drop)
    }

    /// Types `command` into `pane` and presses Enter.
    pub fn run_in_pane(&self, pane: &str, command: &str) -> Result<()> {
        self.run(
            &["pane", "run", pane, command],
            "running a command in the pane",
        )
        .map(drop)
    }

    pub fn report_agent(&self, pane: &str, source: &str, agent: &str, state: &str) -> Result<()> {
        self.run(
            &[
                "pane",
                "report-agent",
                pane,
                "--source",
                source,
                "--agent",
                agent,
                "--state",
                state,
            ],
            "reporting the agent",
        )
        .map(drop)
    }

    pub fn release_agent(&self, pane: &str, source: &str, agent: &str) -> Result<()> {
        self.run(
            &[
                "pane",
                "release-agent",
                pane,
                "--source",
                source,
                "--agent",
                agent,
            ],
            "releasing the agent",
        )
        .map(drop)
    }

    /// A toast; failures go to stderr and never abort the action.
    pub fn notify(&self, title: &str, body: &str) -> bool {
        match self.run(
            &[
                "notification",
                "show",
                title,
                "--body",
                body,
                "--sound",
                "none",
            ],
            "showing a notification",
        ) {
            Ok(_) => true,
            Err(e) => {
                eprintln!("notification skipped: {e}");
                false
            }
        }
    }

    /// Opens a manifest `[[panes]]` entry with extra environment.
    pub fn open_plugin_pane(
        &self,
        plugin: &str,
        entrypoint: &str,
        env: &[(String, String)],
    ) -> Result<()> {
        let pairs: Vec<String> = env.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let mut args = vec![
            "plugin",
            "pane",
            "open",
            "--plugin",
            plugin,
            "--entrypoint",
            entrypoint,
        ];
        for p in &pairs {
            args.extend(["--env", p]);
        }
        args.push("--focus");
        self.run(&args, "opening the plugin pane").map(drop)
    }
}
