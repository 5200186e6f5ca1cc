//! The gates of one `airlock run`: what `airlock_sandbox::session::run` prepares before the launch
//! (the socket filters, the session CA and ask socket, the git layer, the bridge grant), serves
//! while it runs (the egress proxy, the filters' threads) and tears down after it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use airlock_config::XdgPaths;
use airlock_egress::{EgressPolicy, ProxyConfig, ProxyHandle};
use airlock_sandbox::native::Gates;
use airlock_sandbox::session::SessionGates;
use airlock_sandbox::{HostFacts, SandboxSpec};
use anyhow::Context;

/// What one launch's gates need from its plan, and what they hold while it runs.
#[derive(Default)]
pub(super) struct RunGates<'a> {
    /// The sandbox is a microVM (`--backend sbx`): no host socket, bridge or egress proxy can
    /// reach it, so none is started (what was asked for explicitly is refused before, by
    /// [`refused_in_a_microvm`]); the git session still runs.
    pub microvm: bool,
    pub paths: Option<&'a XdgPaths>,
    pub facts: Option<&'a HostFacts>,
    pub settings: Option<&'a airlock_tools::Settings>,
    pub view: Option<&'a airlock_tools::HostView>,
    pub contrib: Option<&'a airlock_sandbox::Contributions>,
    pub profile: Option<&'a airlock_config::Profile>,
    /// Said once per change: what the shell's startup files use that is not inside.
    pub startup_hint: Option<String>,
    pub policy: Option<EgressPolicy>,
    pub upstream_proxy: Option<airlock_egress::UpstreamProxy>,
    /// `[network.credentials]`: the rules and the session CA, for the proxy.
    pub injector: Option<Arc<airlock_egress::inject::Injector>>,
    /// Ask mode: the session's socket for `airlock network monitor`.
    pub ask: Option<Arc<airlock_egress::ask::AskGate>>,
    pub log: Option<PathBuf>,
    pub proxy: Option<ProxyHandle>,
    /// The socket filters (herdr's, ...), served once the sandbox is cloned.
    pub filters: Option<crate::commands::filters::Filters>,
    pub git: Option<airlock_tools::GitSession>,
    pub bridge: Option<airlock_bridge::scope::SessionGrant>,
}

impl RunGates<'_> {
    fn prepare_all(&mut self, spec: &mut SandboxSpec, dir: &Path) -> anyhow::Result<()> {
        let (Some(paths), Some(facts), Some(settings), Some(view), Some(contrib), Some(profile)) = (
            self.paths,
            self.facts,
            self.settings,
            self.view,
            self.contrib,
            self.profile,
        ) else {
            anyhow::bail!("the launch's gates were not given its plan");
        };
        if let Some(hint) = self.startup_hint.take() {
            say_once(dir, "startup-hint", &hint);
        }
        if self.microvm {
            self.git = begin_git(spec, contrib, view, settings)?;
            return Ok(());
        }
        // Looked up only inside a herdr pane: most launches are not, and need no PATH search.
        let herdr_on_path = std::env::var_os("HERDR_ENV").is_some_and(|v| v == "1")
            && view.find_binary("herdr").is_some();
        let planned =
            crate::commands::filters::plan(spec, settings, view, &facts.home, herdr_on_path);
        if settings.tool("herdr").choice("mode", "auto") != "disabled" {
            crate::commands::filters::record_pane(spec, &paths.state_dir());
        }
        let (filters, warnings) = planned?;
        for warning in warnings {
            eprintln!("airlock: warning: {warning}");
        }
        self.filters = Some(filters);
        self.injector = crate::commands::credentials::start(spec, &facts.env, &facts.home)?;
        self.ask = crate::commands::monitor::gate(paths, spec)?;
        self.log = spec.egress.as_ref().map(|e| e.log.clone());
        self.git = begin_git(spec, contrib, view, settings)?;
        self.bridge = register_bridge(spec, facts, profile)?;
        Ok(())
    }
}

impl SessionGates for RunGates<'_> {
    fn prepare(&mut self, spec: &mut SandboxSpec, state_dir: &Path) -> Result<(), String> {
        self.prepare_all(spec, state_dir)
            .map_err(|e| format!("{e:#}"))
    }

    fn finish(&mut self) -> Vec<String> {
        // The bridge record first: nothing may use this session's token once it is ending.
        drop(self.bridge.take());
        let messages = self.git.take().map(|git| git.finish()).unwrap_or_default();
        if let Some(proxy) = self.proxy.take() {
            // Told to stop when the sandbox ended; joined (its log flushed) at the session's end.
            airlock_sandbox::session::end_later(move || proxy.shutdown());
        }
        messages
    }
}

impl Gates for RunGates<'_> {
    fn ended(&mut self) {
        if let Some(proxy) = self.proxy.as_mut() {
            proxy.stop();
        }
    }

    fn started(&mut self) -> Result<(), String> {
        match self.filters.as_mut() {
            Some(filters) => filters.start(),
            None => Ok(()),
        }
    }

    fn bring_back_git(&mut self, staged: &Path) -> Vec<String> {
        match &self.git {
            Some(git) => git.bring_back_synced(staged),
            None => Vec::new(),
        }
    }

    fn serve_egress(&mut self, listener: std::net::TcpListener) -> Result<(), String> {
        let (Some(policy), Some(log)) = (self.policy.take(), self.log.clone()) else {
            return Err("no egress policy was prepared for this sandbox".into());
        };
        if let Some(dir) = log.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        }
        // The launch raised the soft descriptor limit before the clone; size the cap from it.
        let fd_limit = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)
            .map_or(1024, |(soft, _)| soft);
        let config = ProxyConfig {
            upstream_proxy: self.upstream_proxy.take(),
            injector: self.injector.take(),
            ask: self.ask.take(),
            ..ProxyConfig::for_fd_limit(fd_limit)
        };
        let proxy =
            airlock_egress::spawn_with(listener, policy, log, config).map_err(|e| e.to_string())?;
        self.proxy = Some(proxy);
        Ok(())
    }
}

/// What a microVM cannot be given that the settings ask for by name: a filtered host socket
/// (the socket filters need a unix socket bound into the sandbox; a VM has no path to the host's).
/// Filters in their `auto` mode are left out without a word: they follow what the host has.
pub(super) fn refused_in_a_microvm(settings: &airlock_tools::Settings) -> Vec<String> {
    let mut out = Vec::new();
    for tool in ["herdr", "kitty"] {
        let config = settings.tool(tool);
        let mode = config.choice("mode", "auto");
        if mode != "auto" && mode != "disabled" {
            out.push(format!(
                "the sbx backend cannot give a microVM the host's {tool} socket ([tools.{tool}] \
                 mode = {mode:?}); set it to \"auto\" or \"disabled\", or use --backend native"
            ));
        }
    }
    for tool in ["docker", "zellij"] {
        if settings.tool(tool).enabled {
            out.push(format!(
                "the sbx backend cannot give a microVM the host's {tool} socket ([tools.{tool}] \
                 is enabled); disable it for this run, or use --backend native"
            ));
        }
    }
    out
}

/// Prints `line` unless this sandbox's state holds the same line under `name` (so a hint is said
/// again only when what it says changed).
fn say_once(dir: &Path, name: &str, line: &str) {
    let path = dir.join(name);
    if std::fs::read_to_string(&path).is_ok_and(|said| said == line) {
        return;
    }
    eprintln!("airlock: {line}");
    let _ = std::fs::write(&path, line);
}

/// Gives this sandbox a bridge token of its own, scoped to its project, home, network policy and
/// the hosts its git remotes name, revoked when the returned grant is dropped.
fn register_bridge(
    spec: &mut SandboxSpec,
    facts: &HostFacts,
    profile: &airlock_config::Profile,
) -> anyhow::Result<Option<airlock_bridge::scope::SessionGrant>> {
    let target = Path::new(airlock_sandbox::builder::bridge::STATE_DIR).join("token");
    let Some(state_dir) = facts.bridge.state_dir.as_ref() else {
        return Ok(None);
    };
    if !spec.mounts.iter().any(|op| op.target() == target) {
        return Ok(None);
    }
    let mut credential_hosts = profile.bridge_credential_hosts.clone();
    credential_hosts.extend(airlock_tools::git::remote_hosts_of(&spec.project));
    let pid = std::process::id();
    let scope = airlock_bridge::scope::SessionScope {
        sandbox: spec.name.clone(),
        project: spec.project.clone(),
        home: spec.state_root.join("home"),
        network: spec.network,
        egress: spec
            .egress
            .as_ref()
            .map(|e| airlock_bridge::scope::ScopeEgress {
                settings: e.settings.clone(),
                allow_hosts: e.allow_hosts.clone(),
                deny_hosts: e.deny_hosts.clone(),
            }),
        credential_hosts,
        pid,
        started: airlock_bridge::scope::start_time(pid).unwrap_or(0),
        control: spec.ports.control_socket(pid),
    };
    let token_file = spec
        .state_root
        .join("bridge")
        .join("tokens")
        .join(pid.to_string());
    let paths = airlock_bridge::BridgePaths::at(state_dir.clone());
    let grant =
        airlock_bridge::scope::register(&paths, &scope, &token_file).with_context(|| {
            format!(
                "cannot register this sandbox with the host bridge in {}",
                paths.sessions_dir().display()
            )
        })?;
    spec.rebind(&target, token_file);
    Ok(Some(grant))
}

/// The git tool's session (layer, marker), when the tool is enabled.
fn begin_git(
    spec: &mut SandboxSpec,
    contrib: &airlock_sandbox::Contributions,
    view: &airlock_tools::HostView,
    settings: &airlock_tools::Settings,
) -> anyhow::Result<Option<airlock_tools::GitSession>> {
    if !settings.tool("git").enabled {
        return Ok(None);
    }
    let git = view.find_host_program("git", &spec.project);
    let mut messages = Vec::new();
    let session = airlock_tools::GitSession::begin(spec, contrib, git, &view.home, &mut messages)
        .context("cannot prepare the git layer in the sandbox state")?;
    for message in messages {
        eprintln!("airlock: {message}");
    }
    Ok(Some(session))
}
