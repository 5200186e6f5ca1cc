//! What airlock does with kitty's answers: learn window ownership, cut `ls` down, write errors.

use serde::Serialize;
use serde_json::{Map, Value};

use super::commands::Command;
use super::decode::parse_object;
use super::frame::{MAX_RESPONSE_FRAME_BYTES, json_frame};
use super::launch::parse_window_id;
use super::owned::Owned;

/// Records the window a forwarded `launch` created, from kitty's answer to it (the JSON of the
/// response frame). Returns the id recorded, for the decision log.
///
/// Only [`Command::Launch`] answers are read: kitty's answer to it is exactly
/// `{"ok": true, "data": "<new window id>"}`. A waiting launch is answered with its program's
/// exit status in the same shape, and any other command's answer carries text the sandbox may
/// influence, so reading those as ids would let a sandbox choose which windows it "owns".
pub fn observe_response(cmd: Command, response_json: &[u8], owned: &mut Owned) -> Option<u64> {
    if cmd != Command::Launch {
        return None;
    }
    let response = parse_object(response_json, MAX_RESPONSE_FRAME_BYTES).ok()?;
    if response.len() != 2 || response.get("ok") != Some(&Value::Bool(true)) {
        return None;
    }
    // kitty answers "0" when no window was created.
    let id = parse_window_id(response.get("data")?.as_str()?).filter(|&id| id > 0)?;
    owned.record(id).then_some(id)
}

/// kitty's answer to a forwarded `ls` (the JSON of the response frame), cut down to the windows
/// `owned` holds, as the frame to relay to the sandbox.
///
/// `ls` lists every OS window, tab and window of the user's kitty, each window with its title,
/// command line, working directory and environment. The sandbox sees only its own windows,
/// the tabs and OS windows holding them, and of those only ids, focus state and layout. A
/// window's `env` is dropped even for owned windows: it is the host environment kitty gave the
/// launched program. Fields are kept by allowlist, so a field a later kitty adds stays out.
/// An answer that does not parse is replaced by an error, never relayed.
pub fn filter_ls_response(response_json: &[u8], owned: &Owned) -> Vec<u8> {
    filtered(response_json, owned)
        .unwrap_or_else(|| error_frame("airlock: ls response could not be filtered"))
}

fn filtered(response_json: &[u8], owned: &Owned) -> Option<Vec<u8>> {
    let response = parse_object(response_json, MAX_RESPONSE_FRAME_BYTES).ok()?;
    match response.get("ok")? {
        Value::Bool(true) => {}
        // kitty's own error, without its traceback (host paths of kitty's install).
        Value::Bool(false) => {
            return Some(error_frame(response.get("error")?.as_str()?));
        }
        _ => return None,
    }
    // kitty's `ls` data is the listing as a JSON string (pretty-printed by kitty).
    let listing: Value = serde_json::from_str(response.get("data")?.as_str()?).ok()?;
    let os_windows: Vec<Value> = listing
        .as_array()?
        .iter()
        .map(|w| os_window(w, owned))
        .collect::<Option<Vec<_>>>()?
        .into_iter()
        .flatten()
        .collect();
    let data = serde_json::to_string(&os_windows).ok()?;
    json_frame(&Success {
        ok: true,
        data: &data,
    })
}

const OS_WINDOW_KEYS: &[&str] = &["id", "is_active", "is_focused"];
const TAB_KEYS: &[&str] = &["id", "is_active", "is_focused", "layout"];
const WINDOW_KEYS: &[&str] = &[
    "id",
    "is_active",
    "is_focused",
    "is_self",
    "title",
    "pid",
    "cwd",
    "cmdline",
    "last_reported_cmdline",
    "last_cmd_exit_status",
    "at_prompt",
    "lines",
    "columns",
    "user_vars",
    "created_at",
    "in_alternate_screen",
];
const PROCESS_KEYS: &[&str] = &["pid", "cmdline", "cwd"];

/// One OS window of the listing: `None` when malformed, `Some(None)` when it holds no owned
/// window.
fn os_window(value: &Value, owned: &Owned) -> Option<Option<Value>> {
    let object = value.as_object()?;
    let tabs: Vec<Value> = object
        .get("tabs")?
        .as_array()?
        .iter()
        .map(|t| tab(t, owned))
        .collect::<Option<Vec<_>>>()?
        .into_iter()
        .flatten()
        .collect();
    if tabs.is_empty() {
        return Some(None);
    }
    let mut kept = pick(object, OS_WINDOW_KEYS);
    kept.insert("tabs".into(), Value::Array(tabs));
    Some(Some(Value::Object(kept)))
}

fn tab(value: &Value, owned: &Owned) -> Option<Option<Value>> {
    let object = value.as_object()?;
    let mut windows = Vec::new();
    for window in object.get("windows")?.as_array()? {
        let window = window.as_object()?;
        if owned.contains(window.get("id")?.as_u64()?) {
            windows.push(Value::Object(owned_window(window)?));
        }
    }
    if windows.is_empty() {
        return Some(None);
    }
    let mut kept = pick(object, TAB_KEYS);
    kept.insert("windows".into(), Value::Array(windows));
    Some(Some(Value::Object(kept)))
}

fn owned_window(window: &Map<String, Value>) -> Option<Map<String, Value>> {
    let mut kept = pick(window, WINDOW_KEYS);
    if let Some(processes) = window.get("foreground_processes") {
        let processes = processes
            .as_array()?
            .iter()
            .map(|p| p.as_object().map(|p| Value::Object(pick(p, PROCESS_KEYS))))
            .collect::<Option<Vec<_>>>()?;
        kept.insert("foreground_processes".into(), Value::Array(processes));
    }
    Some(kept)
}

fn pick(object: &Map<String, Value>, keys: &[&str]) -> Map<String, Value> {
    keys.iter()
        .filter_map(|&k| object.get(k).map(|v| (k.to_owned(), v.clone())))
        .collect()
}

#[derive(Serialize)]
struct Success<'a> {
    ok: bool,
    data: &'a str,
}

#[derive(Serialize)]
struct Failure<'a> {
    ok: bool,
    error: &'a str,
}

/// A kitty error response frame, `{"ok":false,"error":<message>}`: kitty's client prints the
/// message and exits non-zero.
pub fn error_frame(message: &str) -> Vec<u8> {
    json_frame(&Failure {
        ok: false,
        error: message,
    })
    .unwrap_or_else(|| super::frame::encode_frame(br#"{"ok":false,"error":"airlock: refused"}"#))
}
