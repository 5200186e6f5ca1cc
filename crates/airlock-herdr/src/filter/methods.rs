//! Which rule governs each herdr method name.
//!
//! herdr 0.8.2 exposes 91 methods and newer versions add more; only the handful a sandbox needs
//! are ever forwarded, and every other name is denied, known or not. The named groups exist so
//! a denial says why, not to decide anything: an unlisted method is denied just the same.

/// The rule a method falls under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MethodRule {
    /// `ping`: always allowed. A liveness handshake that reveals only the server's version and
    /// feature flags, less than a successful connect() to the socket already does.
    Ping,
    /// `notification.show`, with the `notify` capability.
    NotificationShow,
    /// `pane.report_agent`, with `agent_reporting`.
    ReportAgent,
    /// `pane.report_agent_session`, with `agent_reporting`.
    ReportAgentSession,
    /// `pane.release_agent`, with `agent_reporting`.
    ReleaseAgent,
    /// `tab.create`, `tab.close`, `pane.send_input`: the `launch_overlay` capability, which runs
    /// a command on the host, and only in a tab herdr said the sandbox created (see
    /// [`super::Owned`]).
    LaunchOverlay(LaunchMethod),
    /// Never allowed, whatever the policy says.
    Denied(DeniedGroup),
}

/// The three methods of `launch_overlay`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LaunchMethod {
    TabCreate,
    TabClose,
    PaneSendInput,
}

/// Methods no policy can allow, grouped by what they would hand the sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeniedGroup {
    /// `events.subscribe`, `events.wait`, `pane.wait_for_output`, `agent.wait`: they hold the
    /// connection open and stream what happens in every pane, including other terminals' output.
    Streaming,
    /// `pane.list`, `tab.list`, `pane.current`, `session.snapshot` and the other read-only
    /// queries: they map the host's panes, cwds and agents. Launchers read `HERDR_*_ID` from the
    /// environment instead.
    Introspection,
    /// `pane.read`: reads the screen and scrollback of any pane, i.e. other terminals.
    PaneRead,
    /// `pane.send_text`, `pane.send_keys`: type into any pane, which is host code execution.
    PaneInput,
    /// `pane.clear_agent_authority`: would erase the host's record of which agent owns a pane.
    ClearAgentAuthority,
    /// `agent.*`: starts agents and sends them prompts and keys (input to other panes).
    Agent,
    /// `worktree.*`: creates, opens and removes git worktrees, mutating the host's git state.
    Worktree,
    /// `plugin.*`: links, enables and invokes plugins, i.e. loads and runs code on the host.
    Plugin,
    /// `server.*`: stops the server, reloads its config, hands it off.
    Server,
    /// Anything else, including names herdr does not know and case variants of allowed ones.
    NotAllowlisted,
}

impl DeniedGroup {
    /// The rule named in the denial message and the decision log.
    pub fn rule(self) -> &'static str {
        match self {
            DeniedGroup::Streaming => "streaming and waiting methods are denied",
            DeniedGroup::Introspection => "introspection methods are denied",
            DeniedGroup::PaneRead => "reading panes is denied",
            DeniedGroup::PaneInput => "typing into panes is denied",
            DeniedGroup::ClearAgentAuthority => "clearing agent authority is denied",
            DeniedGroup::Agent => "agent.* methods are denied",
            DeniedGroup::Worktree => "worktree.* methods are denied",
            DeniedGroup::Plugin => "plugin.* methods are denied",
            DeniedGroup::Server => "server.* methods are denied",
            DeniedGroup::NotAllowlisted => "not in airlock's herdr allowlist",
        }
    }
}

const STREAMING: &[&str] = &[
    "events.subscribe",
    "events.wait",
    "pane.wait_for_output",
    "agent.wait",
];

const INTROSPECTION: &[&str] = &[
    "pane.list",
    "pane.get",
    "pane.current",
    "pane.edges",
    "pane.layout",
    "pane.neighbor",
    "pane.process_info",
    "pane.graphics.info",
    "tab.list",
    "tab.get",
    "workspace.list",
    "workspace.get",
    "session.snapshot",
    "layout.export",
];

/// The rule for `method`, matched exactly (herdr's method names are case-sensitive).
pub fn rule_for(method: &str) -> MethodRule {
    use DeniedGroup as G;
    let group = match method {
        "ping" => return MethodRule::Ping,
        "notification.show" => return MethodRule::NotificationShow,
        "pane.report_agent" => return MethodRule::ReportAgent,
        "pane.report_agent_session" => return MethodRule::ReportAgentSession,
        "pane.release_agent" => return MethodRule::ReleaseAgent,
        "tab.create" => return MethodRule::LaunchOverlay(LaunchMethod::TabCreate),
        "tab.close" => return MethodRule::LaunchOverlay(LaunchMethod::TabClose),
        "pane.send_input" => return MethodRule::LaunchOverlay(LaunchMethod::PaneSendInput),
        "pane.read" => G::PaneRead,
        "pane.send_text" | "pane.send_keys" => G::PaneInput,
        "pane.clear_agent_authority" => G::ClearAgentAuthority,
        m if STREAMING.contains(&m) => G::Streaming,
        m if INTROSPECTION.contains(&m) => G::Introspection,
        m if m.starts_with("agent.") => G::Agent,
        m if m.starts_with("worktree.") => G::Worktree,
        m if m.starts_with("plugin.") => G::Plugin,
        m if m.starts_with("server.") => G::Server,
        _ => G::NotAllowlisted,
    };
    MethodRule::Denied(group)
}

/// The method as it may appear in a log line or a denial: herdr-shaped names (lowercase ASCII,
/// digits, `_` and `.`, at most 64 bytes) as sent, anything else replaced, so a sandbox cannot
/// write arbitrary text (or a secret) into the host's log through the method field.
pub fn loggable(method: &str) -> &str {
    let herdr_shaped = !method.is_empty()
        && method.len() <= 64
        && method
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'.');
    if herdr_shaped {
        method
    } else {
        UNRECOGNISED_METHOD
    }
}

/// Stands in for a method name that [`loggable`] will not repeat.
pub const UNRECOGNISED_METHOD: &str = "(unrecognised method)";
