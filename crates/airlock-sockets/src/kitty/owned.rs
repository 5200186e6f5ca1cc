//! Windows this sandbox launched, and the commands that may act on them.
//!
//! Ownership comes only from kitty's answers to forwarded launches (see
//! [`super::observe_response`]), never from what a client claims: a window id in a request is
//! just a number the sandbox typed. Each owned-window command must name its target as exactly
//! `id:<owned id>` in `match`; without a match kitty would act on the window the request runs
//! in or the active one, which are the user's.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::commands::Command;
use super::launch::parse_window_id;
use super::policy::{Allowed, Capability, KittyPolicy, check_title, schema, to_payload};

/// The most windows one filter records as owned; launches past it still run but their windows
/// stay out of reach (memory stays bounded whatever a sandbox launches).
pub const MAX_OWNED_WINDOWS: usize = 1024;

/// The kitty window ids this sandbox's launches created, as kitty reported them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Owned {
    windows: BTreeSet<u64>,
}

impl Owned {
    /// No windows owned.
    pub fn new() -> Owned {
        Owned::default()
    }

    /// Whether kitty reported window `id` as created by this sandbox.
    pub fn contains(&self, id: u64) -> bool {
        self.windows.contains(&id)
    }

    /// The owned window ids, ascending.
    pub fn windows(&self) -> impl Iterator<Item = u64> + '_ {
        self.windows.iter().copied()
    }

    pub fn len(&self) -> usize {
        self.windows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.windows.is_empty()
    }

    /// Records `id`; `false` when the table is full or `id` was already owned.
    pub(super) fn record(&mut self, id: u64) -> bool {
        self.windows.len() < MAX_OWNED_WINDOWS && self.windows.insert(id)
    }
}

const NOT_OWNED: &str = "--match must name one window this sandbox launched";
const MISMATCH: &str = "payload does not match kitty's schema";

/// The single owned window `match` names.
fn target(expr: Option<&str>, owned: &Owned) -> Result<(), &'static str> {
    let id = expr
        .and_then(|m| m.strip_prefix("id:"))
        .and_then(parse_window_id)
        .ok_or(NOT_OWNED)?;
    if owned.contains(id) {
        Ok(())
    } else {
        Err(NOT_OWNED)
    }
}

fn forward<T: Serialize>(cmd: Command, payload: &T) -> Result<Allowed, &'static str> {
    Ok(Allowed {
        cmd,
        payload: to_payload(payload)?,
    })
}

/// `close-window`.
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
struct CloseWindow {
    #[serde(rename = "match", skip_serializing_if = "Option::is_none")]
    target: Option<String>,
    #[serde(rename = "self", skip_serializing_if = "Option::is_none")]
    this_window: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ignore_no_match: Option<bool>,
}

pub(super) fn close_window(
    payload: Map<String, Value>,
    policy: &KittyPolicy,
    owned: &Owned,
) -> Result<Allowed, &'static str> {
    policy.require(Capability::CloseOwned)?;
    let close: CloseWindow = schema(payload, MISMATCH)?;
    target(close.target.as_deref(), owned)?;
    forward(Command::CloseWindow, &close)
}

/// `focus-window`.
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
struct FocusWindow {
    #[serde(rename = "match", skip_serializing_if = "Option::is_none")]
    target: Option<String>,
}

pub(super) fn focus_window(
    payload: Map<String, Value>,
    policy: &KittyPolicy,
    owned: &Owned,
) -> Result<Allowed, &'static str> {
    policy.require(Capability::FocusOwned)?;
    let focus: FocusWindow = schema(payload, MISMATCH)?;
    target(focus.target.as_deref(), owned)?;
    forward(Command::FocusWindow, &focus)
}

/// `send-text`. Typing into an owned window drives the tool running there, which is what the
/// capability grants; `all`, `match_tab` and broadcast sessions would reach other windows.
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
struct SendText {
    #[serde(skip_serializing_if = "Option::is_none")]
    data: Option<String>,
    #[serde(rename = "match", skip_serializing_if = "Option::is_none")]
    target: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    match_tab: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    all: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    exclude_active: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    session_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    bracketed_paste: Option<String>,
}

pub(super) fn send_text(
    payload: Map<String, Value>,
    policy: &KittyPolicy,
    owned: &Owned,
) -> Result<Allowed, &'static str> {
    policy.require(Capability::SendTextOwned)?;
    let mut send: SendText = schema(payload, MISMATCH)?;
    if send.all == Some(true) {
        return Err("send-text --all is refused");
    }
    if send.match_tab.as_deref().is_some_and(|m| !m.is_empty()) {
        return Err("send-text --match-tab is refused");
    }
    if send.session_id.as_deref().is_some_and(|s| !s.is_empty()) {
        return Err("send-text broadcast sessions are refused");
    }
    target(send.target.as_deref(), owned)?;
    check_send_data(send.data.as_deref())?;
    if let Some(mode) = &send.bracketed_paste
        && !["disable", "auto", "enable"].contains(&mode.as_str())
    {
        return Err("unknown send-text --bracketed-paste");
    }
    // Dropped, not forwarded empty: kitty treats an empty match_tab/session_id as absent.
    send.match_tab = None;
    send.session_id = None;
    send.all = None;
    forward(Command::SendText, &send)
}

/// `text:` and `base64:` are bytes for the window; `kitty-key:` a base64 key event kitty
/// encodes for it. `session:` controls broadcast sessions and is refused.
fn check_send_data(data: Option<&str>) -> Result<(), &'static str> {
    let data = data.ok_or("send-text needs data")?;
    let (encoding, rest) = data
        .split_once(':')
        .ok_or("send-text data encoding not allowed")?;
    let is_base64 = |s: &str| {
        s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/' || b == b'=')
    };
    match encoding {
        "text" => Ok(()),
        "base64" | "kitty-key" if is_base64(rest) => Ok(()),
        "base64" | "kitty-key" => Err("send-text data is not base64"),
        _ => Err("send-text data encoding not allowed"),
    }
}

/// `get-text`.
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
struct GetText {
    #[serde(rename = "match", skip_serializing_if = "Option::is_none")]
    target: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    extent: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ansi: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cursor: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    wrap_markers: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    clear_selection: Option<bool>,
    #[serde(rename = "self", skip_serializing_if = "Option::is_none")]
    this_window: Option<bool>,
}

const EXTENTS: &[&str] = &[
    "screen",
    "all",
    "selection",
    "first_cmd_output_on_screen",
    "last_cmd_output",
    "last_visited_cmd_output",
    "last_non_empty_output",
];

pub(super) fn get_text(
    payload: Map<String, Value>,
    policy: &KittyPolicy,
    owned: &Owned,
) -> Result<Allowed, &'static str> {
    policy.require(Capability::GetTextOwned)?;
    let get: GetText = schema(payload, MISMATCH)?;
    target(get.target.as_deref(), owned)?;
    if get.extent.as_deref().is_some_and(|e| !EXTENTS.contains(&e)) {
        return Err("unknown get-text --extent");
    }
    forward(Command::GetText, &get)
}

/// `set-window-title`.
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
struct SetWindowTitle {
    #[serde(skip_serializing_if = "Option::is_none")]
    title: Option<String>,
    #[serde(rename = "match", skip_serializing_if = "Option::is_none")]
    target: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temporary: Option<bool>,
    #[serde(rename = "self", skip_serializing_if = "Option::is_none")]
    this_window: Option<bool>,
}

pub(super) fn set_window_title(
    payload: Map<String, Value>,
    policy: &KittyPolicy,
    owned: &Owned,
) -> Result<Allowed, &'static str> {
    policy.require(Capability::SetTitleOwned)?;
    let set: SetWindowTitle = schema(payload, MISMATCH)?;
    target(set.target.as_deref(), owned)?;
    check_title(set.title.as_deref())?;
    forward(Command::SetWindowTitle, &set)
}

/// `ls`. What kitty answers lists every window (with its environment); the answer is cut
/// down by [`super::filter_ls_response`], so the request itself needs little checking.
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
struct Ls {
    #[serde(skip_serializing_if = "Option::is_none")]
    all_env_vars: Option<bool>,
    #[serde(rename = "match", skip_serializing_if = "Option::is_none")]
    target: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    match_tab: Option<String>,
    #[serde(rename = "self", skip_serializing_if = "Option::is_none")]
    this_window: Option<bool>,
}

pub(super) fn ls(
    payload: Map<String, Value>,
    policy: &KittyPolicy,
    owned: &Owned,
) -> Result<Allowed, &'static str> {
    policy.require(Capability::ListOwned)?;
    let mut list: Ls = schema(payload, MISMATCH)?;
    if list.match_tab.as_deref().is_some_and(|m| !m.is_empty()) {
        return Err("ls --match-tab is refused");
    }
    list.match_tab = None;
    match list.target.as_deref() {
        None | Some("") => list.target = None,
        named => target(named, owned)?,
    }
    forward(Command::Ls, &list)
}
