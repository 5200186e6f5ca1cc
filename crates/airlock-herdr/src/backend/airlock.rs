//! airlock's own sandbox as the plugin's backend. A "sandbox" is a record (see
//! [`airlock_record`](super::airlock_record)) plus airlock's state root for its project; a session
//! is one `airlock run` of this same airlock binary, by absolute path, with a direct argv. Running
//! sessions, their supervisor pids and ports come from `airlock sessions --json`; state roots are
//! removed only through `airlock sandboxes prune --name`, which takes airlock's own locks.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::Deserialize;

use super::airlock_record::{RECORD_VERSION, Records, SandboxRecord};
use super::{
    BackendStatus, CreateRequest, ExecRequest, PortMapping, SandboxBackend, SandboxInfo,
    sbx::CALL_TIMEOUT,
};
use crate::error::{ErrorKind, PluginError, Result};
use crate::proc::{self, Captured};

/// The airlock binary and where its records and clones live.
#[derive(Debug, Clone)]
pub struct AirlockCli {
    pub bin: PathBuf,
    pub records: Records,
    pub timeout: Duration,
    pub slow_timeout: Duration,
}

/// One row of `airlock sessions --json` (fields the plugin does not use are ignored: the command
/// is airlock's own, its schema documented and additive).
#[derive(Debug, Clone, Deserialize)]
pub struct SessionRow {
    pub sandbox: String,
    pub project: PathBuf,
    pub pid: u32,
    #[serde(default)]
    pub ports: Option<Vec<SessionPort>>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct SessionPort {
    pub host: u16,
    pub sandbox: u16,
    pub direction: String,
}

impl AirlockCli {
    /// This airlock (`self_exe`), records under the mapping store, clones under airlock's data dir.
    pub fn new(self_exe: &Path, store_root: &Path) -> Result<AirlockCli> {
        let paths = airlock_config::XdgPaths::from_env().map_err(|e| {
            PluginError::startup(format!("{e}. herdr must start airlock with HOME set."))
        })?;
        Ok(AirlockCli {
            bin: self_exe.to_owned(),
            records: Records {
                dir: store_root.join("airlock"),
                clones: paths.data_home.join("airlock").join("herdr-clones"),
            },
            timeout: proc::env_duration("HERDR_SBX_TIMEOUT_MS", CALL_TIMEOUT),
            slow_timeout: proc::env_duration("HERDR_SBX_SLOW_TIMEOUT_MS", super::sbx::SLOW_TIMEOUT),
        })
    }

    fn captured(&self, args: &[String], cwd: Option<&Path>, slow: bool) -> Result<Captured> {
        let timeout = if slow {
            self.slow_timeout
        } else {
            self.timeout
        };
        let out = proc::run_captured(&self.bin, args, &[], cwd, timeout).map_err(|e| {
            PluginError::startup(format!("Could not run {}: {e}.", self.bin.display()))
        })?;
        if out.timed_out {
            return Err(PluginError::new(
                ErrorKind::Daemon,
                format!(
                    "airlock {} did not finish within {} s and was killed; HERDR_SBX_TIMEOUT_MS raises the limit.",
                    args.first().map_or("", String::as_str),
                    timeout.as_secs()
                ),
            )
            .with_output(out.output()));
        }
        Ok(out)
    }

    /// `airlock sessions --json`; unreadable output is an error, never "nothing runs".
    pub fn sessions(&self) -> Result<Vec<SessionRow>> {
        let out = self.captured(&["sessions".into(), "--json".into()], None, false)?;
        if !out.success() {
            return Err(
                PluginError::new(ErrorKind::Unknown, "airlock sessions --json failed.")
                    .with_output(out.output()),
            );
        }
        serde_json::from_str(&out.stdout).map_err(|e| {
            PluginError::new(
                ErrorKind::Unknown,
                format!("airlock sessions --json printed something unreadable: {e}."),
            )
            .with_output(out.output())
        })
    }

    fn record(&self, name: &str) -> Result<SandboxRecord> {
        self.records.load(name)?.ok_or_else(|| {
            PluginError::new(
                ErrorKind::NotFound,
                format!("Sandbox {name} not found (no airlock sandbox record)."),
            )
        })
    }

    /// The sessions of `r`: airlock lists them for its project, and the plugin started them.
    fn own_sessions(r: &SandboxRecord, sessions: &[SessionRow]) -> Vec<SessionRow> {
        // airlock records the canonical project path; the record keeps the one it was given.
        let project =
            airlock_config::canonicalize(&r.project).unwrap_or_else(|_| PathBuf::from(&r.project));
        sessions
            .iter()
            .filter(|s| r.pids.contains(&s.pid) && s.project == project)
            .cloned()
            .collect()
    }

    /// `airlock run --project P [--git-mode readwrite] [--publish ..] -- argv`.
    fn run_args(r: &SandboxRecord, argv: &[String]) -> Vec<String> {
        let mut args = vec!["run".to_owned(), "--project".to_owned(), r.project.clone()];
        if r.clone {
            // The clone is the sandbox's own: its commits are the point, fetched back by bundle.
            args.extend(["--git-mode".to_owned(), "readwrite".to_owned()]);
        }
        for p in &r.publish {
            args.extend(["--publish".to_owned(), p.clone()]);
        }
        args.push("--".to_owned());
        args.extend(argv.iter().cloned());
        args
    }

    /// The directory a session starts in: the requested one when it is inside the project (and
    /// exists), else the project.
    fn session_cwd(r: &SandboxRecord, workdir: Option<&str>) -> PathBuf {
        workdir
            .map(PathBuf::from)
            .filter(|w| w.starts_with(&r.project) && w.is_dir())
            .unwrap_or_else(|| PathBuf::from(&r.project))
    }

    fn make_clone(&self, r: &SandboxRecord) -> Result<()> {
        self.records.remove_clone_dir(&r.name)?;
        let parent = Path::new(&r.project)
            .parent()
            .expect("a clone path has a parent");
        std::fs::create_dir_all(parent).map_err(|e| {
            PluginError::startup(format!("Could not create {}: {e}.", parent.display()))
        })?;
        let local = Path::new(&r.local_path);
        // --no-hardlinks: the sandbox writes its clone, which must share no inode with the host repo.
        crate::git::run_checked(
            local,
            &[
                "clone",
                "--quiet",
                "--no-hardlinks",
                "--",
                &r.local_path,
                &r.project,
            ],
            "cloning the worktree for a clone-mode sandbox",
        )
        .map(drop)
    }
}

/// Config keys that only mean something to sbx: refused with the airlock backend, naming them.
pub fn refuse_sbx_only(request: &CreateRequest) -> Result<()> {
    let mut set = Vec::new();
    let mut note = |key: &str, on: bool| {
        if on {
            set.push(key.to_owned());
        }
    };
    note("template", request.template.is_some());
    note("kits", !request.kits.is_empty());
    note("kitArgs", !request.kit_args.is_empty());
    note("env", !request.env.is_empty());
    note("envFiles", !request.env_files.is_empty());
    note("cpus", request.cpus.is_some());
    note("memory", request.memory.is_some());
    note("denyNetwork", !request.deny_network.is_empty());
    note("extraWorkspaces", request.paths.len() > 1);
    if set.is_empty() {
        return Ok(());
    }
    Err(PluginError::config(format!(
        "config.json sets {} which the airlock backend cannot apply (they are sbx create flags); remove them, put the equivalent in airlock's own config ([sandbox], [network]), or set \"backend\": \"sbx\".",
        set.join(", ")
    )))
}

impl SandboxBackend for AirlockCli {
    fn list(&self) -> Result<Vec<SandboxInfo>> {
        let records = self.records.list()?;
        // A record without a session pid cannot be running: airlock is asked only when one has.
        let sessions = if records.iter().any(|r| !r.pids.is_empty()) {
            self.sessions()?
        } else {
            Vec::new()
        };
        Ok(records
            .iter()
            .map(|r| {
                let own = Self::own_sessions(r, &sessions);
                SandboxInfo {
                    name: r.name.clone(),
                    status: Some(if own.is_empty() { "stopped" } else { "running" }.to_owned()),
                    agent: None,
                    workspaces: vec![r.local_path.clone()],
                    ports: ports_of(&own),
                }
            })
            .collect())
    }

    fn find(&self, name: &str) -> Result<Option<SandboxInfo>> {
        let Some(r) = self.records.load(name)? else {
            return Ok(None);
        };
        let own = if r.pids.is_empty() {
            Vec::new()
        } else {
            Self::own_sessions(&r, &self.sessions()?)
        };
        Ok(Some(SandboxInfo {
            name: r.name.clone(),
            status: Some(if own.is_empty() { "stopped" } else { "running" }.to_owned()),
            agent: None,
            workspaces: vec![r.local_path.clone()],
            ports: ports_of(&own),
        }))
    }

    fn create(&self, request: &CreateRequest) -> Result<Captured> {
        refuse_sbx_only(request)?;
        let local = request.paths.first().cloned().unwrap_or_default();
        let project = if request.clone {
            self.records.clone_path(&request.name, &local)?
        } else {
            PathBuf::from(&local)
        };
        if self.records.load(&request.name)?.is_some() {
            return Err(PluginError::conflict(format!(
                "Sandbox {} already exists.",
                request.name
            )));
        }
        let record = SandboxRecord {
            version: RECORD_VERSION,
            name: request.name.clone(),
            local_path: local,
            project: project.display().to_string(),
            clone: request.clone,
            publish: request.publish.clone(),
            created_at: proc::now_iso(),
            pids: Vec::new(),
        };
        if record.clone {
            self.make_clone(&record)?;
        }
        self.records.save(&record)?;
        Ok(Captured::default())
    }

    fn exec(&self, request: &ExecRequest, slow: bool) -> Result<Captured> {
        let r = self.record(&request.name)?;
        let cwd = Self::session_cwd(&r, request.workdir.as_deref());
        self.captured(&Self::run_args(&r, &request.argv), Some(&cwd), slow)
    }

    fn attach(&self, request: &ExecRequest, host_env: &[(String, String)]) -> Result<i32> {
        let r = self.record(&request.name)?;
        let mut command = std::process::Command::new(&self.bin);
        command
            .args(Self::run_args(&r, &request.argv))
            .current_dir(Self::session_cwd(&r, request.workdir.as_deref()));
        for (k, v) in host_env {
            command.env(k, v);
        }
        let mut child = command.spawn().map_err(|e| {
            PluginError::startup(format!("Could not run {}: {e}.", self.bin.display()))
        })?;
        let pid = child.id();
        self.records.modify(&r.name, |r| r.pids.push(pid))?;
        let status = child.wait();
        let _ = self
            .records
            .modify(&r.name, |r| r.pids.retain(|p| *p != pid));
        let status = status.map_err(|e| PluginError::startup(format!("airlock run: {e}.")))?;
        use std::os::unix::process::ExitStatusExt as _;
        Ok(status
            .code()
            .unwrap_or_else(|| 128 + status.signal().unwrap_or(0)))
    }

    fn stop(&self, name: &str) -> Result<()> {
        let r = self.record(name)?;
        let own = Self::own_sessions(&r, &self.sessions()?);
        for s in &own {
            // SAFETY: kill(2) on a pid airlock itself lists as this sandbox's supervisor.
            unsafe { libc::kill(s.pid as i32, libc::SIGTERM) };
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let left = Self::own_sessions(&r, &self.sessions()?);
            if left.is_empty() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(PluginError::new(
                    ErrorKind::Conflict,
                    format!(
                        "Sandbox {name}'s session(s) {:?} did not end within 10 s of SIGTERM.",
                        left.iter().map(|s| s.pid).collect::<Vec<_>>()
                    ),
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn remove(&self, name: &str) -> Result<()> {
        let r = self.record(name)?;
        self.stop(name)?;
        if r.clone {
            // The clone's own state root (a per-mapping airlock sandbox): found in airlock's
            // listing by its project, removed by airlock under its own lock.
            if let Some(root) = self.state_root_of(&r.project)? {
                let out = self.captured(
                    &[
                        "sandboxes".into(),
                        "prune".into(),
                        "--name".into(),
                        root.clone(),
                    ],
                    None,
                    false,
                )?;
                if !out.success() || out.stdout.contains(&format!("skipped {root}")) {
                    return Err(PluginError::new(
                        ErrorKind::Conflict,
                        format!("airlock could not remove the state of {name} ({root})."),
                    )
                    .with_output(out.output()));
                }
            }
            self.records.remove_clone_dir(name)?;
        }
        self.records.delete(name)
    }

    fn ports(&self, name: &str) -> Result<Vec<PortMapping>> {
        let r = self.record(name)?;
        Ok(ports_of(&Self::own_sessions(&r, &self.sessions()?)))
    }

    fn copy(&self, source: &str, destination: &str) -> Result<()> {
        let (name, inside) = source.split_once(':').ok_or_else(|| {
            PluginError::target(format!(
                "The airlock backend copies out of a sandbox only, not {source:?}."
            ))
        })?;
        let r = self.record(name)?;
        let rel = Path::new(inside)
            .strip_prefix(&r.project)
            .ok()
            .filter(|p| p.components().count() == 1)
            .ok_or_else(|| {
                PluginError::target(format!(
                    "{inside:?} is not a file directly in sandbox {name}'s project {}; refusing to copy it.",
                    r.project
                ))
            })?;
        // Sandbox-written: no symlink followed, no FIFO, capped.
        let bytes = airlock_config::hostfs::read_regular(&Path::new(&r.project).join(rel), 4 << 30)
            .map_err(|e| {
                PluginError::target(format!("Could not read {inside} from {name}: {e}."))
            })?;
        std::fs::write(destination, bytes)
            .map_err(|e| PluginError::startup(format!("Could not write {destination}: {e}.")))
    }

    fn status(&self) -> Result<BackendStatus> {
        let out = self.captured(&["--version".into()], None, false)?;
        let version = out.stdout.trim().to_owned();
        let sessions = self.sessions()?;
        Ok(BackendStatus {
            version: serde_json::json!({"airlock": version}),
            client_version: Some(version),
            version_warning: None,
            daemon: serde_json::json!({"running": true, "sessions": sessions.len()}),
        })
    }

    fn check(&self) -> Result<()> {
        // No daemon and no account: airlock answers when its binary runs.
        Ok(())
    }

    fn checkout_path(&self, name: &str, local_path: &str) -> Result<String> {
        let r = self.record(name)?;
        let _ = local_path;
        Ok(r.project)
    }

    fn scratch_file(&self, name: &str, file: &str) -> Result<String> {
        // /tmp inside an airlock sandbox ends with its session; the project outlives it.
        Ok(format!("{}/{file}", self.record(name)?.project))
    }

    fn bundle_refs(&self, remote: &str) -> (Vec<String>, String) {
        // A session's commits come back into the clone as refs/remotes/airlock/<branch> when it
        // ends (airlock's own git layer); the clone's heads are what it was cloned with. The
        // heads keep the bundle from being empty; only the agent's refs are fetched.
        (
            vec!["--branches".to_owned(), "--remotes=airlock".to_owned()],
            format!("+refs/remotes/airlock/*:refs/remotes/{remote}/*"),
        )
    }

    fn probes_agent(&self) -> bool {
        // The agent is a host program airlock mounts; a missing one fails the session itself.
        false
    }

    fn kind(&self) -> crate::store::BackendKind {
        crate::store::BackendKind::Airlock
    }
}

impl AirlockCli {
    /// The name of airlock's state root for `project`, from `airlock sandboxes list --json`.
    fn state_root_of(&self, project: &str) -> Result<Option<String>> {
        #[derive(Deserialize)]
        struct Row {
            name: String,
            project: Option<PathBuf>,
        }
        let out = self.captured(
            &[
                "sandboxes".into(),
                "list".into(),
                "--json".into(),
                "--no-size".into(),
            ],
            None,
            false,
        )?;
        let rows: Vec<Row> = serde_json::from_str(&out.stdout).map_err(|e| {
            PluginError::new(
                ErrorKind::Unknown,
                format!("airlock sandboxes list --json printed something unreadable: {e}."),
            )
            .with_output(out.output())
        })?;
        Ok(rows
            .into_iter()
            .find(|r| r.project.as_deref() == Some(Path::new(project)))
            .map(|r| r.name))
    }
}

fn ports_of(sessions: &[SessionRow]) -> Vec<PortMapping> {
    sessions
        .iter()
        .flat_map(|s| s.ports.iter().flatten())
        .filter(|p| p.direction == "in")
        .map(|p| PortMapping {
            host_port: Some(p.host),
            sandbox_port: p.sandbox,
        })
        .collect()
}

#[cfg(test)]
#[path = "airlock_tests.rs"]
mod tests;
