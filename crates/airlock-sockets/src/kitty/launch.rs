//! `launch`: the only way a sandbox gets kitty to start a program, and the options it may use.
//!
//! The payload fields are kitty's own (the protocol spec of `kitty/rc/launch.py`). Each option
//! is either allowed, refused (with its own reason), or accepted only at the value kitty's
//! client sends when the option is not given, so `kitten @ launch` works unchanged.

use serde::Deserialize;
use serde_json::{Map, Value};

use super::commands::Command;
use super::pattern::check_command;
use super::policy::{Allowed, Capability, KittyPolicy, check_title, schema};

/// kitty's launch payload. Unknown fields are refused: a field kitty learns later might be one
/// the filter should have checked.
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct LaunchPayload {
    args: Option<Vec<String>>,
    #[serde(rename = "match")]
    match_tab: Option<String>,
    next_to: Option<String>,
    source_window: Option<String>,
    window_title: Option<String>,
    cwd: Option<String>,
    add_to_session: Option<String>,
    env: Option<Vec<String>>,
    var: Option<Vec<String>>,
    os_panel: Option<Vec<String>>,
    tab_title: Option<String>,
    #[serde(rename = "type")]
    kind: Option<String>,
    keep_focus: Option<bool>,
    copy_colors: Option<bool>,
    copy_cmdline: Option<bool>,
    copy_env: Option<CopyEnv>,
    hold: Option<bool>,
    location: Option<String>,
    allow_remote_control: Option<bool>,
    remote_control_password: Option<Vec<String>>,
    stdin_source: Option<String>,
    stdin_add_formatting: Option<bool>,
    stdin_add_line_wrap_markers: Option<bool>,
    spacing: Option<Vec<String>>,
    marker: Option<String>,
    logo: Option<String>,
    logo_position: Option<String>,
    logo_alpha: Option<f64>,
    #[serde(rename = "self")]
    in_own_tab: Option<bool>,
    os_window_title: Option<String>,
    os_window_name: Option<String>,
    os_window_class: Option<String>,
    os_window_state: Option<String>,
    color: Option<Vec<String>>,
    watcher: Option<Vec<String>>,
    bias: Option<f64>,
    wait_for_child_to_exit: Option<bool>,
    hold_after_ssh: Option<bool>,
}

/// `copy_env`: a flag in older kitty, the client's environment as `NAME=VALUE` in newer.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum CopyEnv {
    Flag(bool),
    List(Vec<String>),
}

const LOCATIONS: &[&str] = &[
    "first", "after", "before", "neighbor", "last", "vsplit", "hsplit", "split", "default",
];
const OS_WINDOW_STATES: &[&str] = &["normal", "fullscreen", "maximized", "minimized"];

/// Checks a launch payload; `async_id` is the envelope's `async`.
pub(super) fn check(
    payload: Map<String, Value>,
    async_id: Option<&str>,
    policy: &KittyPolicy,
) -> Result<Allowed, &'static str> {
    let launch: LaunchPayload = schema(payload, "payload does not match kitty's launch schema")?;
    check_refused(&launch)?;
    let kind = launch.kind.as_deref().unwrap_or("window");
    policy.require(capability_for(kind)?)?;
    let waits = launch.wait_for_child_to_exit == Some(true);
    if waits {
        policy.require(Capability::WaitOwned)?;
        // kitty delivers a waiting launch's answer only to a registered async id.
        if !async_id.is_some_and(valid_async_id) {
            return Err("launch --wait-for-child-to-exit needs a valid async id");
        }
    }
    check_match(launch.match_tab.as_deref(), policy.caller_window)?;
    check_choice(
        launch.location.as_deref(),
        LOCATIONS,
        "unknown launch --location",
    )?;
    check_choice(
        launch.os_window_state.as_deref(),
        OS_WINDOW_STATES,
        "unknown launch --os-window-state",
    )?;
    for title in [
        &launch.window_title,
        &launch.tab_title,
        &launch.os_window_title,
        &launch.os_window_name,
        &launch.os_window_class,
    ] {
        check_title(title.as_deref())?;
    }
    let args = launch.args.as_deref().unwrap_or_default();
    let current_cwd = launch.cwd.as_deref() == Some("current");
    let args = launch_args(args, current_cwd, policy)?;
    Ok(Allowed {
        cmd: if waits {
            Command::LaunchAndWait
        } else {
            Command::Launch
        },
        payload: Value::Object(forwarded(&launch, args, kind, waits)),
    })
}

/// The command kitty will run: airlock's script for a revdiff overlay, else the declared
/// command as it was sent (after [`check_command`]). A launch that is neither gets the
/// overlay's reason when revdiff is a tool (the likelier intent), the pattern's otherwise.
/// `--cwd=current` (the window the user is in) is accepted only for an overlay, whose script
/// changes to the project itself.
fn launch_args(
    args: &[String],
    current_cwd: bool,
    policy: &KittyPolicy,
) -> Result<Vec<String>, &'static str> {
    const CWD: &str = "launch --cwd is refused";
    let declared = || {
        if current_cwd {
            return Err(CWD);
        }
        check_command(args, &policy.launch_patterns).map(|()| args.to_vec())
    };
    let Some(overlay) = &policy.overlay else {
        return declared();
    };
    overlay
        .relocate_argv(args)
        .or_else(|reason| declared().map_err(|_| reason))
}

/// Which capability a window type needs. `background` (a process with no window), `clipboard`
/// and `primary` (its output written to the user's clipboard) and `os-panel` (a desktop panel)
/// have none.
fn capability_for(kind: &str) -> Result<Capability, &'static str> {
    match kind {
        "window" => Ok(Capability::LaunchWindow),
        "tab" => Ok(Capability::LaunchTab),
        "os-window" => Ok(Capability::LaunchOsWindow),
        "overlay" | "overlay-main" => Ok(Capability::LaunchOverlay),
        _ => Err("launch type not allowed"),
    }
}

/// The options the reference refuses, each with its reason. Each one either hands the launched
/// program something of the host's (environment, working directory, the user's screen, a
/// second command line), keeps it alive past its command, or lets kitty run code or read files
/// that no pattern checked (`--watcher` is Python kitty runs in-process, `--logo` a host path).
fn check_refused(launch: &LaunchPayload) -> Result<(), &'static str> {
    let text = |v: &Option<String>| v.as_deref().is_some_and(|s| !s.is_empty());
    let list = |v: &Option<Vec<String>>| v.as_ref().is_some_and(|l| !l.is_empty());
    let flag = |v: Option<bool>| v == Some(true);
    let refusals = [
        (list(&launch.env), "launch --env is refused"),
        (
            matches!(&launch.copy_env, Some(CopyEnv::Flag(true)))
                || matches!(&launch.copy_env, Some(CopyEnv::List(l)) if !l.is_empty()),
            "launch --copy-env is refused",
        ),
        (
            flag(launch.copy_cmdline),
            "launch --copy-cmdline is refused",
        ),
        (list(&launch.watcher), "launch --watcher is refused"),
        (
            flag(launch.allow_remote_control),
            "launch --allow-remote-control is refused",
        ),
        (
            list(&launch.remote_control_password),
            "launch --remote-control-password is refused",
        ),
        (
            text(&launch.source_window),
            "launch --source-window is refused",
        ),
        (text(&launch.next_to), "launch --next-to is refused"),
        (
            text(&launch.add_to_session),
            "launch --add-to-session is refused",
        ),
        (list(&launch.os_panel), "launch --os-panel is refused"),
        (flag(launch.hold), "launch --hold is refused"),
        (
            flag(launch.hold_after_ssh),
            "launch --hold-after-ssh is refused",
        ),
        (text(&launch.marker), "launch --marker is refused"),
        (
            text(&launch.logo) || text(&launch.logo_position),
            "launch --logo is refused",
        ),
        // kitty's client sends its default alpha (-1) even when no logo is given.
        (
            launch.logo_alpha.is_some_and(|a| a != -1.0),
            "launch --logo is refused",
        ),
        (
            launch.stdin_source.as_deref().is_some_and(|s| s != "none"),
            "launch --stdin-source other than none is refused",
        ),
        // `current`: see `launch_args`.
        (
            text(&launch.cwd) && launch.cwd.as_deref() != Some("current"),
            "launch --cwd is refused",
        ),
        // User variables, colors and spacing are not dangerous, but nothing airlock runs needs
        // them, and `var:` is a match field other commands could then select windows by.
        (list(&launch.var), "launch --var is not supported"),
        (list(&launch.color), "launch --color is not supported"),
        (list(&launch.spacing), "launch --spacing is not supported"),
    ];
    match refusals.into_iter().find(|(refused, _)| *refused) {
        Some((_, reason)) => Err(reason),
        None => Ok(()),
    }
}

/// `launch --match` selects the tab to open in. Only the caller's own tab may be named, as
/// `window_id:<KITTY_WINDOW_ID>`: `id:` is looked up among tab ids first, and tab and window
/// ids are separate counters, so `id:<caller>` can name an unrelated tab.
fn check_match(match_tab: Option<&str>, caller: Option<u64>) -> Result<(), &'static str> {
    let Some(expr) = match_tab.filter(|m| !m.is_empty()) else {
        return Ok(());
    };
    let named = expr.strip_prefix("window_id:").and_then(parse_window_id);
    match (named, caller) {
        (Some(id), Some(caller)) if id == caller => Ok(()),
        _ => Err("launch --match other than the caller's window is refused"),
    }
}

/// A kitty window id as airlock accepts it in a match: decimal, no sign, no leading zero.
pub(super) fn parse_window_id(digits: &str) -> Option<u64> {
    let canonical = !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && !(digits.len() > 1 && digits.starts_with('0'));
    canonical.then(|| digits.parse().ok()).flatten()
}

fn check_choice(
    value: Option<&str>,
    choices: &[&str],
    rule: &'static str,
) -> Result<(), &'static str> {
    match value {
        Some(v) if !choices.contains(&v) => Err(rule),
        _ => Ok(()),
    }
}

/// kitty's client makes async ids from a UUID; anything else is not one of its ids.
fn valid_async_id(id: &str) -> bool {
    (1..=64).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// The payload sent to kitty: the validated options only, and `type` always explicit so kitty
/// opens the kind of window whose capability was checked even if its default changes.
fn forwarded(
    launch: &LaunchPayload,
    args: Vec<String>,
    kind: &str,
    waits: bool,
) -> Map<String, Value> {
    let mut out = Map::new();
    out.insert("args".into(), Value::from(args));
    out.insert("type".into(), Value::from(kind));
    let texts = [
        ("match", &launch.match_tab),
        ("window_title", &launch.window_title),
        ("tab_title", &launch.tab_title),
        ("location", &launch.location),
        ("os_window_title", &launch.os_window_title),
        ("os_window_name", &launch.os_window_name),
        ("os_window_class", &launch.os_window_class),
        ("os_window_state", &launch.os_window_state),
    ];
    for (key, value) in texts {
        if let Some(v) = value.as_deref().filter(|v| !v.is_empty()) {
            out.insert(key.into(), Value::from(v));
        }
    }
    let flags = [
        ("keep_focus", launch.keep_focus),
        ("copy_colors", launch.copy_colors),
        ("self", launch.in_own_tab),
        ("stdin_add_formatting", launch.stdin_add_formatting),
        (
            "stdin_add_line_wrap_markers",
            launch.stdin_add_line_wrap_markers,
        ),
    ];
    for (key, value) in flags {
        if value == Some(true) {
            out.insert(key.into(), Value::Bool(true));
        }
    }
    if let Some(bias) = launch.bias.filter(|b| *b != 0.0) {
        out.insert("bias".into(), Value::from(bias));
    }
    if waits {
        out.insert("wait_for_child_to_exit".into(), Value::Bool(true));
    }
    out
}
