//! Docker Sandboxes through its CLI, `sbx`: every call is a direct argv, never a shell string.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::{
    BackendStatus, CreateRequest, ExecRequest, PortMapping, SandboxBackend, SandboxInfo, sbx_parse,
};
use crate::classify::classify;
use crate::error::{ErrorKind, PluginError, Result};
use crate::proc::{self, Captured};

/// Captured sbx calls are killed after this (`HERDR_SBX_TIMEOUT_MS`).
pub const CALL_TIMEOUT: Duration = Duration::from_secs(120);
/// `sbx create` and setup scripts (`HERDR_SBX_SLOW_TIMEOUT_MS`): the first create pulls an image.
pub const SLOW_TIMEOUT: Duration = Duration::from_secs(30 * 60);
/// sbx versions below this get a warning from doctor.
pub const MIN_VERSION: (u64, u64) = (0, 42);

/// The `sbx` CLI at a resolved path.
#[derive(Debug, Clone)]
pub struct SbxCli {
    pub bin: PathBuf,
    pub timeout: Duration,
    pub slow_timeout: Duration,
}

impl SbxCli {
    /// `sbxBin` from config, else `HERDR_SBX_BIN`, else `sbx` on PATH; timeouts from the environment.
    pub fn resolve(config_bin: Option<&str>) -> Result<SbxCli> {
        let requested = config_bin
            .map(str::to_owned)
            .or_else(|| {
                std::env::var("HERDR_SBX_BIN")
                    .ok()
                    .filter(|s| !s.is_empty())
            })
            .unwrap_or_else(|| "sbx".to_owned());
        let bin = find_executable(&requested).ok_or_else(|| {
            PluginError::startup(format!(
                "The sbx CLI was not found (looked for {requested:?}). Install Docker Sandboxes, or set sbxBin in config.json (or HERDR_SBX_BIN) to its absolute path."
            ))
        })?;
        Ok(SbxCli {
            bin,
            timeout: proc::env_duration("HERDR_SBX_TIMEOUT_MS", CALL_TIMEOUT),
            slow_timeout: proc::env_duration("HERDR_SBX_SLOW_TIMEOUT_MS", SLOW_TIMEOUT),
        })
    }

    /// Runs sbx captured; a timeout is a `daemon` failure, a spawn failure `startup`.
    pub fn run(&self, args: &[String], slow: bool) -> Result<Captured> {
        let timeout = if slow {
            self.slow_timeout
        } else {
            self.timeout
        };
        let out = proc::run_captured(&self.bin, args, &[], None, timeout).map_err(|e| {
            PluginError::startup(format!(
                "Could not run {}: {e}. Set sbxBin in config.json.",
                self.bin.display()
            ))
        })?;
        if out.timed_out {
            let var = if slow {
                "HERDR_SBX_SLOW_TIMEOUT_MS"
            } else {
                "HERDR_SBX_TIMEOUT_MS"
            };
            return Err(PluginError::new(
                ErrorKind::Daemon,
                format!(
                    "sbx {} did not finish within {} s and was killed. The sandbox daemon may be wedged (try \"sbx daemon status\"); {var} raises the limit.",
                    args.first().map_or("", String::as_str),
                    timeout.as_secs_f64().round()
                ),
            )
            .with_output(out.output()));
        }
        Ok(out)
    }

    /// Like [`run`](Self::run), with a non-zero exit turned into a classified error.
    pub fn run_checked(&self, args: &[String], step: &str, slow: bool) -> Result<Captured> {
        let out = self.run(args, slow)?;
        if !out.success() {
            let output = out.output();
            return Err(PluginError::new(
                classify(&output),
                format!(
                    "sbx {} failed while {step} (exit {}).",
                    args.first().map_or("", String::as_str),
                    out.code
                        .map_or_else(|| "by signal".to_owned(), |c| c.to_string())
                ),
            )
            .with_output(output));
        }
        Ok(out)
    }
}

/// `name` if it contains a slash, else the first match on PATH.
pub fn find_executable(name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt as _;
    let executable = |p: &Path| {
        p.metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if name.contains('/') {
        let p = PathBuf::from(name);
        return executable(&p).then_some(p);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| executable(p))
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

/// The argv of `sbx create` for `request`.
pub fn create_args(r: &CreateRequest) -> Vec<String> {
    let mut args = strings(&["create", "--name", &r.name]);
    let mut push = |flag: &str, values: &[String]| {
        for v in values {
            args.push(flag.to_owned());
            args.push(v.clone());
        }
    };
    push("--template", r.template.as_slice());
    push("--kit", &r.kits);
    push("--kit-arg", &r.kit_args);
    push("--env", &r.env);
    push("--env-file", &r.env_files);
    push("--publish", &r.publish);
    push("--cpus", r.cpus.as_slice());
    push("--memory", r.memory.as_slice());
    push("--deny-network", &r.deny_network);
    if r.clone {
        args.push("--clone".to_owned());
    }
    args.push(r.agent.clone());
    args.extend(r.paths.iter().cloned());
    args
}

/// The argv of `sbx exec`; `--` keeps agent flags away from sbx's own parser.
pub fn exec_args(r: &ExecRequest, interactive: bool) -> Vec<String> {
    exec_args_for(r, interactive, interactive)
}

/// [`exec_args`] with stdin (`--interactive`) and a terminal (`--tty`) chosen apart.
pub fn exec_args_for(r: &ExecRequest, stdin: bool, tty: bool) -> Vec<String> {
    let mut args = vec!["exec".to_owned()];
    if stdin {
        args.push("--interactive".to_owned());
    }
    if tty {
        args.push("--tty".to_owned());
    }
    if let Some(w) = &r.workdir {
        args.extend(["--workdir".to_owned(), w.clone()]);
    }
    for e in &r.env {
        args.extend(["--env".to_owned(), e.clone()]);
    }
    args.push(r.name.clone());
    args.push("--".to_owned());
    args.extend(r.argv.iter().cloned());
    args
}

impl SandboxBackend for SbxCli {
    fn list(&self) -> Result<Vec<SandboxInfo>> {
        let out = self.run_checked(&strings(&["ls", "--json"]), "listing sandboxes", false)?;
        sbx_parse::sandbox_list(&out.stdout)
    }

    fn create(&self, request: &CreateRequest) -> Result<Captured> {
        self.run_checked(&create_args(request), "creating the sandbox", true)
    }

    fn exec(&self, request: &ExecRequest, slow: bool) -> Result<Captured> {
        self.run(&exec_args(request, false), slow)
    }

    fn attach(&self, request: &ExecRequest, host_env: &[(String, String)]) -> Result<i32> {
        let mut command = std::process::Command::new(&self.bin);
        command.args(exec_args(request, true));
        for (k, v) in host_env {
            command.env(k, v);
        }
        let status = command.status().map_err(|e| {
            PluginError::startup(format!(
                "Could not run {}: {e}. Set sbxBin in config.json.",
                self.bin.display()
            ))
        })?;
        use std::os::unix::process::ExitStatusExt as _;
        Ok(status
            .code()
            .unwrap_or_else(|| 128 + status.signal().unwrap_or(0)))
    }

    fn stop(&self, name: &str) -> Result<()> {
        self.run_checked(
            &strings(&["stop", name]),
            &format!("stopping {name}"),
            false,
        )
        .map(drop)
    }

    fn remove(&self, name: &str) -> Result<()> {
        self.run_checked(
            &strings(&["rm", "--force", name]),
            &format!("deleting {name}"),
            false,
        )
        .map(drop)
    }

    fn ports(&self, name: &str) -> Result<Vec<PortMapping>> {
        let out = self.run_checked(
            &strings(&["ports", name, "--json"]),
            &format!("listing the ports of {name}"),
            false,
        )?;
        sbx_parse::port_list(&out.stdout)
    }

    fn copy(&self, source: &str, destination: &str) -> Result<()> {
        self.run_checked(
            &strings(&["cp", source, destination]),
            "copying files",
            false,
        )
        .map(drop)
    }

    fn status(&self) -> Result<BackendStatus> {
        let version = self.run_checked(
            &strings(&["version", "--json"]),
            "reading the version",
            false,
        )?;
        let doc = sbx_parse::json_document(&version.stdout, "sbx version --json")?;
        let client = doc
            .pointer("/client/version")
            .or_else(|| doc.pointer("/server/version"))
            .and_then(|v| v.as_str())
            .map(str::to_owned);
        let version_warning = client.as_deref().and_then(version_warning);
        // sbx itself answered; a daemon status that fails in any way means the daemon does not.
        let shown = client
            .clone()
            .unwrap_or_else(|| "(unknown version)".to_owned());
        let not_running = |output: String| {
            PluginError::new(
                ErrorKind::Daemon,
                format!(
                    "sbx {shown} answers, but its daemon does not. Run \"sbx daemon start\" or \"sbx diagnose\"."
                ),
            )
            .with_output(output)
        };
        let daemon = match self.run(&strings(&["daemon", "status", "--json"]), false) {
            Ok(out) if out.success() => out,
            Ok(out) => return Err(not_running(out.output())),
            Err(e) => return Err(not_running(e.output.unwrap_or(e.message))),
        };
        let daemon = sbx_parse::json_document(&daemon.stdout, "sbx daemon status --json")?;
        if daemon.get("running").and_then(serde_json::Value::as_bool) == Some(false) {
            return Err(not_running(daemon.to_string()));
        }
        Ok(BackendStatus {
            version: doc,
            client_version: client,
            version_warning,
            daemon,
        })
    }

    fn check(&self) -> Result<()> {
        self.run_checked(
            &strings(&["version", "--json"]),
            "checking that sbx answers",
            false,
        )
        .map(drop)
    }
}

/// A warning for an sbx older than 0.42.0.
fn version_warning(v: &str) -> Option<String> {
    let mut parts = v
        .trim_start_matches('v')
        .split('.')
        .map(|p| p.parse::<u64>().unwrap_or(0));
    let (major, minor) = (parts.next()?, parts.next().unwrap_or(0));
    ((major, minor) < MIN_VERSION)
        .then(|| format!("sbx {v} is older than 0.42.0; upgrade Docker Sandboxes."))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn create_argv_is_exact() {
        let r = CreateRequest {
            name: "n".into(),
            agent: "claude".into(),
            paths: vec!["/repo".into(), "/data:ro".into()],
            clone: true,
            kits: vec!["k".into()],
            publish: vec!["8080:3000".into()],
            memory: Some("8g".into()),
            ..CreateRequest::default()
        };
        assert_eq!(
            create_args(&r),
            [
                "create",
                "--name",
                "n",
                "--kit",
                "k",
                "--publish",
                "8080:3000",
                "--memory",
                "8g",
                "--clone",
                "claude",
                "/repo",
                "/data:ro"
            ]
        );
        let e = ExecRequest {
            name: "n".into(),
            workdir: Some("/w".into()),
            env: vec!["A=1".into()],
            argv: vec!["claude".into(), "--x".into()],
        };
        assert_eq!(
            exec_args(&e, true),
            [
                "exec",
                "--interactive",
                "--tty",
                "--workdir",
                "/w",
                "--env",
                "A=1",
                "n",
                "--",
                "claude",
                "--x"
            ]
        );
    }
}
