//! What a sandbox may ask of kitty, and the dispatch from a decoded request to its checks.

use std::collections::BTreeSet;
use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::commands::Command;
use super::decode::Envelope;
use super::frame::json_frame;
use super::launch;
use super::owned::{self, Owned};
use super::pattern::LaunchPattern;
use crate::overlay::RevdiffOverlay;

/// The longest title (window, tab or OS window) airlock lets a sandbox set, in characters.
pub const TITLE_MAX_CHARS: usize = 256;

/// One kitty capability a tool can declare (`[tools.kitty]`, the tool catalog).
///
/// The four `launch_*` ones are host code execution: kitty starts the program on the host,
/// outside every sandbox layer. Each is honoured only for commands matching a declared
/// [`LaunchPattern`], which is why the config layer refuses them in `extra_capabilities`.
/// The `*_owned` ones act only on windows kitty reported as created by this sandbox's launches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Capability {
    /// `launch --type=overlay` (and `overlay-main`).
    LaunchOverlay,
    /// `launch --type=window`, kitty's default type.
    LaunchWindow,
    /// `launch --type=tab`.
    LaunchTab,
    /// `launch --type=os-window`.
    LaunchOsWindow,
    /// `close-window` of an owned window.
    CloseOwned,
    /// `launch --wait-for-child-to-exit`: the launching client waits for its program's exit.
    WaitOwned,
    /// `focus-window` of an owned window.
    FocusOwned,
    /// `send-text` to an owned window.
    SendTextOwned,
    /// `get-text` of an owned window.
    GetTextOwned,
    /// `set-window-title` of an owned window.
    SetTitleOwned,
    /// `ls`, its answer cut down to owned windows.
    ListOwned,
}

impl Capability {
    /// Every capability, in declaration order.
    pub const ALL: [Capability; 11] = [
        Capability::LaunchOverlay,
        Capability::LaunchWindow,
        Capability::LaunchTab,
        Capability::LaunchOsWindow,
        Capability::CloseOwned,
        Capability::WaitOwned,
        Capability::FocusOwned,
        Capability::SendTextOwned,
        Capability::GetTextOwned,
        Capability::SetTitleOwned,
        Capability::ListOwned,
    ];

    /// The name in config files and logs (`launch_overlay`, `list_owned`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            Capability::LaunchOverlay => "launch_overlay",
            Capability::LaunchWindow => "launch_window",
            Capability::LaunchTab => "launch_tab",
            Capability::LaunchOsWindow => "launch_os_window",
            Capability::CloseOwned => "close_owned",
            Capability::WaitOwned => "wait_owned",
            Capability::FocusOwned => "focus_owned",
            Capability::SendTextOwned => "send_text_owned",
            Capability::GetTextOwned => "get_text_owned",
            Capability::SetTitleOwned => "set_title_owned",
            Capability::ListOwned => "list_owned",
        }
    }

    /// The capability named `name` exactly (no case folding).
    pub fn parse(name: &str) -> Option<Capability> {
        Capability::ALL.into_iter().find(|c| c.as_str() == name)
    }

    /// Whether this is one of the `launch_*` capabilities (host code execution).
    pub fn is_launch(self) -> bool {
        matches!(
            self,
            Capability::LaunchOverlay
                | Capability::LaunchWindow
                | Capability::LaunchTab
                | Capability::LaunchOsWindow
        )
    }

    /// The denial reason when a request needs this capability and the policy lacks it.
    fn not_enabled(self) -> &'static str {
        match self {
            Capability::LaunchOverlay => "launch_overlay capability not enabled",
            Capability::LaunchWindow => "launch_window capability not enabled",
            Capability::LaunchTab => "launch_tab capability not enabled",
            Capability::LaunchOsWindow => "launch_os_window capability not enabled",
            Capability::CloseOwned => "close_owned capability not enabled",
            Capability::WaitOwned => "wait_owned capability not enabled",
            Capability::FocusOwned => "focus_owned capability not enabled",
            Capability::SendTextOwned => "send_text_owned capability not enabled",
            Capability::GetTextOwned => "get_text_owned capability not enabled",
            Capability::SetTitleOwned => "set_title_owned capability not enabled",
            Capability::ListOwned => "list_owned capability not enabled",
        }
    }
}

/// What one sandbox may do through the kitty filter. The default allows nothing.
#[derive(Debug, Clone, Default)]
pub struct KittyPolicy {
    /// The capabilities the enabled tools declared (plus `extra_capabilities`, never `launch_*`).
    pub capabilities: BTreeSet<Capability>,
    /// The commands `launch_*` may start: each tool's program, pinned to its resolved path.
    pub launch_patterns: Vec<LaunchPattern>,
    /// The host's `KITTY_WINDOW_ID`: the window airlock runs in. Requests may claim only this
    /// window as theirs, and `launch --match` may name only its tab.
    pub caller_window: Option<u64>,
    /// revdiff's overlay launches: a launch of it is run as airlock's own script (see
    /// [`crate::overlay`]); `None` when revdiff is not a tool of this session.
    pub overlay: Option<Arc<RevdiffOverlay>>,
}

impl KittyPolicy {
    /// Whether `capability` is granted.
    pub fn allows(&self, capability: Capability) -> bool {
        self.capabilities.contains(&capability)
    }

    pub(super) fn require(&self, capability: Capability) -> Result<(), &'static str> {
        if self.allows(capability) {
            Ok(())
        } else {
            Err(capability.not_enabled())
        }
    }
}

/// A request that passed: the frame to send kitty, and what it is.
pub(super) struct Checked {
    pub frame: Vec<u8>,
    pub cmd: Command,
    pub expect_response: bool,
}

/// A payload that passed its command's checks, ready to be forwarded.
pub(super) struct Allowed {
    pub cmd: Command,
    pub payload: Value,
}

/// Checks one decoded request. The error is a fixed rule (`&'static str` on purpose: no byte of
/// the request can reach a denial or the decision log).
pub(super) fn evaluate(
    envelope: Envelope,
    policy: &KittyPolicy,
    owned: &Owned,
) -> Result<Checked, &'static str> {
    // kitty runs a socket request "in" the window this id names: the default target of
    // close-window, get-text, send-text… and the tab `launch` opens in. Claiming another
    // window would borrow its identity.
    if let Some(id) = envelope.kitty_window_id
        && policy.caller_window != Some(id)
    {
        return Err("kitty_window_id is not the caller's window");
    }
    if envelope.async_id.is_some() && envelope.cmd != "launch" {
        return Err("async requests are refused");
    }
    let payload = envelope.payload;
    let allowed = match envelope.cmd.as_str() {
        "launch" => launch::check(payload, envelope.async_id.as_deref(), policy)?,
        "close-window" => owned::close_window(payload, policy, owned)?,
        "focus-window" => owned::focus_window(payload, policy, owned)?,
        "send-text" => owned::send_text(payload, policy, owned)?,
        "get-text" => owned::get_text(payload, policy, owned)?,
        "set-window-title" => owned::set_window_title(payload, policy, owned)?,
        "ls" => owned::ls(payload, policy, owned)?,
        _ => return Err("command not allowed through the kitty filter"),
    };
    // The async id only matters when kitty answers later (a waiting launch); on any other
    // launch kitty answers at once either way, and dropping it keeps kitty's table of pending
    // async requests free of ids a sandbox chose.
    let async_id = match allowed.cmd {
        Command::LaunchAndWait => envelope.async_id,
        _ => None,
    };
    let request = Request {
        cmd: allowed.cmd.name(),
        version: envelope.version,
        no_response: envelope.no_response,
        kitty_window_id: envelope.kitty_window_id,
        async_id: async_id.as_deref(),
        payload: &allowed.payload,
    };
    let frame = json_frame(&request).ok_or("request could not be re-serialised")?;
    Ok(Checked {
        frame,
        cmd: allowed.cmd,
        expect_response: !envelope.no_response,
    })
}

/// The request sent to kitty: serialised from the validated values, never the client's bytes,
/// so anything the checks did not see (an ignored field, odd whitespace, an escape) is dropped.
#[derive(Serialize)]
struct Request<'a> {
    cmd: &'static str,
    version: [u64; 3],
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    no_response: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    kitty_window_id: Option<u64>,
    #[serde(rename = "async", skip_serializing_if = "Option::is_none")]
    async_id: Option<&'a str>,
    payload: &'a Value,
}

/// Decodes a payload into its command's schema type (which denies unknown fields, and so keys
/// differing only in case). `null` is refused outright: kitty's client never sends it, and the
/// two readings differ: serde's `Option` takes it as absent, while kitty's payload getter
/// returns `None` instead of the option's default (`"self": null` acts as `self: true`).
pub(super) fn schema<T: DeserializeOwned>(
    payload: Map<String, Value>,
    mismatch: &'static str,
) -> Result<T, &'static str> {
    if payload.values().any(Value::is_null) {
        return Err("null payload fields are refused");
    }
    T::deserialize(Value::Object(payload)).map_err(|_| mismatch)
}

/// A validated payload type as the JSON forwarded to kitty.
pub(super) fn to_payload<T: Serialize>(payload: &T) -> Result<Value, &'static str> {
    serde_json::to_value(payload).map_err(|_| "request could not be re-serialised")
}

/// Titles end up in kitty's tab bar and the OS window manager: bounded, and free of control
/// characters that a title escape sequence or a window manager might act on.
pub(super) fn check_title(title: Option<&str>) -> Result<(), &'static str> {
    match title {
        Some(text)
            if text.chars().count() > TITLE_MAX_CHARS || text.chars().any(char::is_control) =>
        {
            Err("title too long or has a control character")
        }
        _ => Ok(()),
    }
}
