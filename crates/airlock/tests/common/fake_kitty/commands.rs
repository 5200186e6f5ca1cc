//! The session model (one OS window, one tab, its windows) and what each command does to it.

use serde_json::{Map, Value, json};

use super::{
    CALLER_PID, CALLER_WINDOW_ID, FIRST_LAUNCHED_ID, Launch, OS_WINDOW_ID, OTHER_WINDOW_ID,
    SECRET_ENV, TAB_ID, USER_CWD, screen_text,
};

/// A command's outcome: `Ok(None)` is `{"ok":true}`, `Ok(Some(data))` adds `data`, `Err` is
/// `{"ok":false,"error":..}`.
pub(super) type Answer = Result<Option<Value>, String>;

/// The `launch` types that open a window (kitty's `clipboard`/`primary` open none).
const WINDOW_TYPES: &[&str] = &[
    "window",
    "tab",
    "os-window",
    "overlay",
    "overlay-main",
    "background",
];
/// The `pid` of the first launched window; later ones count up from it.
const FIRST_LAUNCHED_PID: u64 = 5000;

/// One request whose envelope the fake could read.
pub(super) struct Request {
    pub(super) cmd: String,
    pub(super) no_response: bool,
    /// `kitty_window_id`: the window the client says it runs in.
    pub(super) window_id: Option<u64>,
    pub(super) payload: Map<String, Value>,
}

/// Reads the envelope: an object with a string `cmd`, an object `payload` (or none).
pub(super) fn parse_request(value: &Value) -> Result<Request, String> {
    let invalid = |why: &str| format!("invalid request: {why}");
    let object = value.as_object().ok_or_else(|| invalid("not an object"))?;
    let cmd = object.get("cmd").and_then(Value::as_str);
    let cmd = cmd.ok_or_else(|| invalid("no cmd string"))?;
    let payload = match object.get("payload") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(payload)) => payload.clone(),
        Some(_) => return Err(invalid("payload is not an object")),
    };
    Ok(Request {
        cmd: cmd.to_owned(),
        no_response: object.get("no_response").and_then(Value::as_bool) == Some(true),
        window_id: object.get("kitty_window_id").and_then(Value::as_u64),
        payload,
    })
}

struct Window {
    id: u64,
    title: String,
    pid: u64,
    cwd: String,
    cmdline: Vec<String>,
    env: Map<String, Value>,
    text: String,
}

impl Window {
    fn user(id: u64, title: &str, pid: u64) -> Window {
        let mut env = Map::new();
        env.insert(SECRET_ENV.0.to_owned(), json!(SECRET_ENV.1));
        env.insert("HOME".to_owned(), json!(USER_CWD));
        Window {
            id,
            title: title.to_owned(),
            pid,
            cwd: USER_CWD.to_owned(),
            cmdline: vec!["/bin/zsh".to_owned()],
            env,
            text: screen_text(id),
        }
    }
}

/// The user's kitty as the fake sees it.
pub(super) struct Session {
    windows: Vec<Window>,
    pub(super) focused: Option<u64>,
    next_id: u64,
    next_pid: u64,
    pub(super) launches: Vec<Launch>,
    pub(super) sent: Vec<(u64, String)>,
}

impl Default for Session {
    fn default() -> Session {
        Session {
            windows: vec![
                Window::user(CALLER_WINDOW_ID, "shell", CALLER_PID),
                Window::user(OTHER_WINDOW_ID, "notes", CALLER_PID + 1),
            ],
            focused: Some(CALLER_WINDOW_ID),
            next_id: FIRST_LAUNCHED_ID,
            next_pid: FIRST_LAUNCHED_PID,
            launches: Vec::new(),
            sent: Vec::new(),
        }
    }
}

impl Session {
    pub(super) fn window_ids(&self) -> Vec<u64> {
        self.windows.iter().map(|w| w.id).collect()
    }

    fn index(&self, id: u64) -> Option<usize> {
        self.windows.iter().position(|w| w.id == id)
    }

    pub(super) fn set_text(&mut self, id: u64, text: &str) -> bool {
        let Some(at) = self.index(id) else {
            return false;
        };
        text.clone_into(&mut self.windows[at].text);
        true
    }

    /// Window `id` as `ls` lists it; `self_id` is the asking client's `kitty_window_id`.
    pub(super) fn describe(&self, id: u64, self_id: Option<u64>) -> Option<Value> {
        let w = &self.windows[self.index(id)?];
        Some(json!({
            "id": w.id,
            "is_focused": self.focused == Some(w.id),
            "is_active": self.focused == Some(w.id),
            "is_self": self_id == Some(w.id),
            "title": w.title,
            "pid": w.pid,
            "cwd": w.cwd,
            "cmdline": w.cmdline,
            "env": w.env,
            "foreground_processes": [],
            "lines": 24,
            "columns": 80,
            "user_vars": {},
        }))
    }

    fn listing(&self, self_id: Option<u64>) -> Value {
        let windows: Vec<Value> = self
            .windows
            .iter()
            .filter_map(|w| self.describe(w.id, self_id))
            .collect();
        let focused = self.focused.and_then(|id| self.index(id));
        let title = focused.map_or("", |at| self.windows[at].title.as_str());
        json!([{
            "id": OS_WINDOW_ID,
            "platform_window_id": 0x03a0_0007,
            "is_focused": true,
            "is_active": true,
            "wm_class": "kitty",
            "wm_name": "kitty",
            "tabs": [{
                "id": TAB_ID,
                "is_focused": true,
                "is_active": true,
                "title": title,
                "layout": "tall",
                "windows": windows,
            }],
        }])
    }

    /// The window a window command acts on: its `match` (`id:<N>` only), else the client's own
    /// window, else the focused one.
    fn target(&self, request: &Request) -> Result<usize, String> {
        let no_match = |expr: &str| format!("No matching windows for expression: {expr}");
        match request.payload.get("match") {
            None | Some(Value::Null) => {}
            Some(Value::String(expr)) if expr.is_empty() => {}
            Some(Value::String(expr)) => {
                let id = expr.strip_prefix("id:").and_then(|n| n.parse().ok());
                return id
                    .and_then(|id| self.index(id))
                    .ok_or_else(|| no_match(expr));
            }
            Some(other) => return Err(no_match(&other.to_string())),
        }
        let own = request.window_id.and_then(|id| self.index(id));
        let focused = self.focused.and_then(|id| self.index(id));
        own.or(focused).ok_or_else(|| no_match(""))
    }
}

/// Runs one command on the session.
pub(super) fn handle(session: &mut Session, request: &Request) -> Answer {
    let text_field = |key: &str| string_field(&request.payload, key, &request.cmd);
    match request.cmd.as_str() {
        "launch" => launch(session, request),
        "ls" => {
            let listing = session.listing(request.window_id);
            let text = serde_json::to_string_pretty(&listing).map_err(|e| e.to_string())?;
            Ok(Some(Value::String(text)))
        }
        "close-window" => {
            let at = session.target(request)?;
            let closed = session.windows.remove(at);
            if session.focused == Some(closed.id) {
                session.focused = session.windows.last().map(|w| w.id);
            }
            Ok(None)
        }
        "focus-window" => {
            let at = session.target(request)?;
            session.focused = Some(session.windows[at].id);
            Ok(None)
        }
        "set-window-title" => {
            let title = text_field("title")?.unwrap_or_default();
            let at = session.target(request)?;
            session.windows[at].title = title;
            Ok(None)
        }
        "send-text" => {
            let data = text_field("data")?.unwrap_or_default();
            let at = session.target(request)?;
            let id = session.windows[at].id;
            session.sent.push((id, data));
            Ok(None)
        }
        "get-text" => {
            let at = session.target(request)?;
            Ok(Some(Value::String(session.windows[at].text.clone())))
        }
        other => Err(format!("Unknown remote control command: {other}")),
    }
}

fn launch(session: &mut Session, request: &Request) -> Answer {
    let payload = &request.payload;
    let field = |key: &str| string_field(payload, key, "launch");
    let kind = field("type")?.unwrap_or_else(|| "window".to_owned());
    if !WINDOW_TYPES.contains(&kind.as_str()) {
        return Err(format!(
            "launch type not modelled by the fake kitty: {kind}"
        ));
    }
    let args = string_list(payload, "args")?;
    let env = string_list(payload, "env")?;
    let title = field("window_title")?;
    let cwd = field("cwd")?;
    let match_expr = field("match")?;
    if let Some(expr) = match_expr.as_deref().filter(|m| !m.is_empty()) {
        let window = expr.strip_prefix("window_id:").and_then(|n| n.parse().ok());
        let tab = expr.strip_prefix("id:").and_then(|n| n.parse::<u64>().ok());
        let found = window.is_some_and(|id| session.index(id).is_some()) || tab == Some(TAB_ID);
        if !found {
            return Err(format!("No matching tabs for expression: {expr}"));
        }
    }

    let id = session.next_id;
    session.next_id += 1;
    let pid = session.next_pid;
    session.next_pid += 1;
    let mut window_env = Map::new();
    for pair in &env {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        window_env.insert(name.to_owned(), json!(value));
    }
    let window_title = title.clone().unwrap_or_else(|| match args.first() {
        Some(program) => program.clone(),
        None => "kitty".to_owned(),
    });
    session.windows.push(Window {
        id,
        title: window_title,
        pid,
        cwd: cwd.clone().unwrap_or_else(|| USER_CWD.to_owned()),
        cmdline: args.clone(),
        env: window_env,
        text: String::new(),
    });
    let keep_focus = payload.get("keep_focus").and_then(Value::as_bool) == Some(true);
    if !keep_focus && kind != "background" {
        session.focused = Some(id);
    }
    session.launches.push(Launch {
        id,
        kind,
        args,
        title,
        cwd,
        match_expr,
        payload: Value::Object(payload.clone()),
    });
    Ok(Some(Value::String(id.to_string())))
}

/// A payload field that must be a string when present.
fn string_field(
    payload: &Map<String, Value>,
    key: &str,
    cmd: &str,
) -> Result<Option<String>, String> {
    match payload.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(format!("{cmd}: {key} must be a string")),
    }
}

/// A payload field that must be a list of strings when present (empty when absent).
fn string_list(payload: &Map<String, Value>, key: &str) -> Result<Vec<String>, String> {
    let bad = || format!("launch: {key} must be a list of strings");
    match payload.get(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| item.as_str().map(str::to_owned).ok_or_else(bad))
            .collect(),
        Some(_) => Err(bad()),
    }
}
