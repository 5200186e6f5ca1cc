//! kitty's remote-control command names, and the few the filter can let through.

/// The commands of kitty's remote-control protocol (`kitty/rc/*.py`, named as kitty's client
/// sends them). Used only to name a request in the decision log: a name outside this list is
/// logged as [`UNRECOGNISED_COMMAND`], so a sandbox cannot write arbitrary text into the log.
const KNOWN_COMMANDS: &[&str] = &[
    "action",
    "close-tab",
    "close-window",
    "create-marker",
    "detach-tab",
    "detach-window",
    "disable-ligatures",
    "env",
    "focus-tab",
    "focus-window",
    "get-colors",
    "get-text",
    "goto-layout",
    "kitten",
    "last-used-layout",
    "launch",
    "load-config",
    "ls",
    "mru",
    "new-window",
    "remove-marker",
    "resize-os-window",
    "resize-window",
    "resize-window-edge",
    "run",
    "screenshot",
    "scroll-window",
    "select-window",
    "send-key",
    "send-text",
    "set-background-image",
    "set-background-opacity",
    "set-colors",
    "set-enabled-layouts",
    "set-font-size",
    "set-os-window-title",
    "set-spacing",
    "set-tab-color",
    "set-tab-title",
    "set-user-vars",
    "set-window-logo",
    "set-window-title",
    "signal-child",
];

/// How a request whose `cmd` is not one of kitty's command names is logged.
pub const UNRECOGNISED_COMMAND: &str = "unrecognised";

/// The name to log for `cmd`: kitty's own spelling, or [`UNRECOGNISED_COMMAND`].
pub fn loggable(cmd: &str) -> &'static str {
    KNOWN_COMMANDS
        .iter()
        .find(|known| **known == cmd)
        .copied()
        .unwrap_or(UNRECOGNISED_COMMAND)
}

/// A command the filter forwarded, as [`super::observe_response`] needs to know it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Command {
    /// `launch` answered at once with the new window's id.
    Launch,
    /// `launch --wait-for-child-to-exit`: kitty answers when the program exits, with its exit
    /// status, so the answer is never read as a window id.
    LaunchAndWait,
    CloseWindow,
    FocusWindow,
    SendText,
    GetText,
    SetWindowTitle,
    /// `ls`: the answer must go through [`super::filter_ls_response`] before it is relayed.
    Ls,
}

impl Command {
    /// kitty's name for the command, for the decision log.
    pub fn name(self) -> &'static str {
        match self {
            Command::Launch | Command::LaunchAndWait => "launch",
            Command::CloseWindow => "close-window",
            Command::FocusWindow => "focus-window",
            Command::SendText => "send-text",
            Command::GetText => "get-text",
            Command::SetWindowTitle => "set-window-title",
            Command::Ls => "ls",
        }
    }
}
