//! Fake `herdr` CLI: prints the raw protocol responses (`{"id","result"}` on success,
//! `{"id","error"}` with exit 1) the real CLI prints. State: `FAKE_HERDR_STATE` (JSON: panes with
//! workspace, label, agent, swallow flag; plugin log records), argv log: `FAKE_HERDR_LOG`.
//! - `pane run` starts the typed command with `sh -c` in the background (output in
//!   `FAKE_HERDR_DIR/pane-<n>.out`) unless the pane has `"swallow": true` (not at a prompt).
//! - `plugin pane open` and `plugin action invoke` run the manifest's command from
//!   `$HERDR_PLUGIN_ROOT/herdr-plugin.toml`; a popup gets `FAKE_HERDR_POPUP_INPUT` on stdin and
//!   is never answered when it is unset (`__hold__`: the popup opens and waits forever).
//! - `FAKE_HERDR_ON_POPUP=<sh command>`: run when a popup opens (a race while it waits).
//! - `FAKE_HERDR_FAIL="pane split;..."`: those commands fail; `FAKE_HERDR_DELAY_MS="pane list=ms"`.
//! - State `"reuse_ids": [..]`: the next new panes get these ids (herdr hands out an id again).
//! - State `"restore_on_popup": {pane: {...}}`: those panes come back when a popup opens.
//! - A pane's command never sees `HERDR_SBX_BIN`: a pane shell has herdr's environment, not the
//!   invoking action's.

use std::path::PathBuf;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use super::{delay, log_argv, with_state};

const STATE: &str = "FAKE_HERDR_STATE";

fn ok(id: &str, result: Value) -> i32 {
    println!("{}", json!({"id": id, "result": result}));
    0
}

fn err(id: &str, code: &str, message: &str) -> i32 {
    eprintln!(
        "{}",
        json!({"id": id, "error": {"code": code, "message": message}})
    );
    1
}

fn dir() -> PathBuf {
    PathBuf::from(std::env::var("FAKE_HERDR_DIR").expect("FAKE_HERDR_DIR is set"))
}

fn flag(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .cloned()
}

pub fn main(argv: Vec<String>) -> i32 {
    log_argv("FAKE_HERDR_LOG", &argv);
    let head = argv.iter().take(2).cloned().collect::<Vec<_>>().join(" ");
    delay("FAKE_HERDR_DELAY_MS", &head);
    let failing = std::env::var("FAKE_HERDR_FAIL").unwrap_or_default();
    if failing.split(';').any(|f| f == head) {
        return err("", "internal_error", &format!("fake herdr refuses {head}"));
    }
    let id = format!("cli:{}", head.replace(' ', ":"));
    let args = &argv[2.min(argv.len())..];
    match head.as_str() {
        "pane get" => with_state(STATE, |s| match s["panes"].get(&args[0]) {
            Some(p) => ok(
                &id,
                json!({"type": "pane_info", "pane": pane_json(&args[0], p)}),
            ),
            None => err(
                &id,
                "pane_not_found",
                &format!("pane {} not found", args[0]),
            ),
        }),
        "pane list" => with_state(STATE, |s| {
            let panes: Vec<Value> = s["panes"]
                .as_object()
                .into_iter()
                .flatten()
                .map(|(k, p)| pane_json(k, p))
                .collect();
            ok(&id, json!({"type": "pane_list", "panes": panes}))
        }),
        "pane split" if args.first().is_none_or(|a| a.starts_with("--")) => {
            // The real CLI takes the pane id first, always.
            eprintln!(
                "usage: herdr pane split <pane_id> --direction right|down [--cwd PATH] [--focus] [--no-focus]"
            );
            2
        }
        "pane split" | "tab create" => with_state(STATE, |s| {
            let target = (head == "pane split").then(|| args[0].clone());
            let workspace = match &target {
                Some(t) => match s["panes"].get(t) {
                    Some(p) => p["workspace_id"].as_str().unwrap_or("w1").to_owned(),
                    None => return err(&id, "pane_not_found", &format!("pane {t} not found")),
                },
                None => flag(args, "--workspace").unwrap_or_else(|| "w1".into()),
            };
            let n = s["next"].as_u64().unwrap_or(100);
            s["next"] = json!(n + 1);
            let reused = s["reuse_ids"]
                .as_array_mut()
                .filter(|ids| !ids.is_empty())
                .map(|ids| ids.remove(0));
            let pane = match reused.as_ref().and_then(Value::as_str) {
                Some(id) => id.to_owned(),
                None => format!("{workspace}:p{n}"),
            };
            if s.get("panes").is_none() {
                s["panes"] = json!({});
            }
            s["panes"][&pane] = json!({"workspace_id": workspace, "cwd": flag(args, "--cwd"), "label": flag(args, "--label")});
            if head == "tab create" {
                ok(
                    &id,
                    json!({"type": "tab_created", "tab": {"tab_id": format!("{workspace}:t{n}")}, "root_pane": {"pane_id": pane}}),
                )
            } else {
                ok(
                    &id,
                    json!({"type": "pane_info", "pane": {"pane_id": pane, "workspace_id": workspace}}),
                )
            }
        }),
        "pane rename" => with_state(STATE, |s| match s["panes"].get_mut(&args[0]) {
            Some(p) => {
                p["label"] = json!(args[1..].join(" "));
                ok(&id, json!({"type": "ok"}))
            }
            None => err(
                &id,
                "pane_not_found",
                &format!("pane {} not found", args[0]),
            ),
        }),
        "pane close" => with_state(STATE, |s| {
            match s["panes"].as_object_mut().and_then(|p| p.remove(&args[0])) {
                Some(_) => ok(&id, json!({"type": "ok"})),
                None => err(
                    &id,
                    "pane_not_found",
                    &format!("pane {} not found", args[0]),
                ),
            }
        }),
        "pane report-agent" | "pane release-agent" => {
            with_state(STATE, |s| match s["panes"].get_mut(&args[0]) {
                Some(p) => {
                    if head == "pane report-agent" {
                        p["agent"] = json!(flag(args, "--agent"));
                        p["agent_status"] = json!(flag(args, "--state"));
                    } else {
                        p["agent"] = Value::Null;
                        p["agent_status"] = Value::Null;
                    }
                    ok(&id, json!({"type": "ok"}))
                }
                None => err(
                    &id,
                    "pane_not_found",
                    &format!("pane {} not found", args[0]),
                ),
            })
        }
        "pane run" => pane_run(&id, &args[0], &args[1..].join(" ")),
        "notification show" => ok(
            &id,
            json!({"type": "notification_show", "shown": true, "reason": null}),
        ),
        "config check" => match std::env::var("FAKE_HERDR_CONFIG_CHECK").as_deref() {
            Ok("reject") => err(&id, "invalid_config", "duplicate key binding"),
            _ => ok(&id, json!({"type": "ok"})),
        },
        "server reload-config" => ok(&id, json!({"type": "ok"})),
        "plugin pane" => plugin_pane(&id, args),
        "plugin action" => invoke(&id, args),
        "plugin log" => log_list(&id),
        _ => ok(&id, json!({"type": "ok"})),
    }
}

/// A `PaneInfo` with the schema's required fields (pane_id, terminal_id, workspace_id, tab_id,
/// focused, agent_status, revision) plus agent, label and cwd.
fn pane_json(id: &str, p: &Value) -> Value {
    let workspace = p["workspace_id"].as_str().unwrap_or("w1");
    json!({
        "pane_id": id, "terminal_id": format!("term-{id}"), "workspace_id": workspace, "tab_id": format!("{workspace}:t1"),
        "focused": false, "revision": 1, "label": p["label"], "cwd": p["cwd"],
        "agent": p.get("agent").cloned().unwrap_or(Value::Null),
        "agent_status": p.get("agent_status").filter(|s| !s.is_null()).cloned().unwrap_or(json!("unknown")),
    })
}

// The fake exits right after spawning: the detached child is reparented, never a zombie of ours.
#[allow(clippy::zombie_processes)]
fn spawn_detached(mut command: Command, out: PathBuf, stdin: Option<String>) -> u32 {
    use std::os::unix::process::CommandExt as _;
    let file = std::fs::File::create(&out).expect("output file");
    command
        .stdout(file.try_clone().expect("dup"))
        .stderr(file)
        .process_group(0);
    // A pane's process starts with SIGHUP at its default, as herdr's own children do, even when
    // the test runs under `nohup` (which would otherwise be inherited and keep a closed pane alive).
    // SAFETY: signal() is async-signal-safe.
    unsafe {
        command.pre_exec(|| {
            libc::signal(libc::SIGHUP, libc::SIG_DFL);
            Ok(())
        });
    }
    command.stdin(if stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    });
    let mut child = command.spawn().expect("command starts");
    // Named for the world's end, which stops what is still running (`World`'s drop).
    let mut pids = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir().join("detached.pids"))
        .expect("detached.pids");
    use std::io::Write as _;
    let _ = writeln!(pids, "{}", child.id());
    if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
        let _ = pipe.write_all(text.as_bytes());
    }
    child.id()
}

fn pane_run(id: &str, pane: &str, text: &str) -> i32 {
    let swallow = with_state(STATE, |s| {
        s["panes"]
            .get(pane)
            .map(|p| p["swallow"].as_bool().unwrap_or(false))
    });
    let Some(swallow) = swallow else {
        return err(id, "pane_not_found", &format!("pane {pane} not found"));
    };
    if swallow {
        with_state(STATE, |s| s["panes"][pane]["swallowed"] = json!(text));
        return ok(id, json!({"type": "ok"}));
    }
    let n = with_state(STATE, |s| {
        let n = s["runs"].as_u64().unwrap_or(0) + 1;
        s["runs"] = json!(n);
        n
    });
    let mut command = Command::new("sh");
    command
        .args(["-c", text])
        .env("HERDR_PANE_ID", pane)
        .env_remove("HERDR_PLUGIN_CONTEXT_JSON")
        .env_remove("HERDR_SBX_BIN");
    let out = dir().join(format!("pane-{n}.out"));
    let pid = spawn_detached(command, out.clone(), None);
    with_state(STATE, |s| {
        let p = &mut s["panes"][pane];
        p["runs"] = json!(
            [
                p["runs"].as_array().cloned().unwrap_or_default(),
                vec![json!({"pid": pid, "out": out, "text": text})]
            ]
            .concat()
        );
    });
    ok(id, json!({"type": "ok"}))
}

fn manifest_command(kind: &str, id_key: &str, wanted: &str) -> Option<(Vec<String>, PathBuf)> {
    let root = PathBuf::from(std::env::var("HERDR_PLUGIN_ROOT").ok()?);
    let manifest: toml::Value =
        toml::from_str(&std::fs::read_to_string(root.join("herdr-plugin.toml")).ok()?).ok()?;
    let entry = manifest
        .get(kind)?
        .as_array()?
        .iter()
        .find(|e| e.get(id_key).and_then(toml::Value::as_str) == Some(wanted))?;
    let argv = entry
        .get("command")?
        .as_array()?
        .iter()
        .filter_map(|v| v.as_str().map(str::to_owned))
        .collect();
    Some((argv, root))
}

fn plugin_pane(id: &str, args: &[String]) -> i32 {
    let entry = flag(args, "--entrypoint").unwrap_or_default();
    let Some((argv, root)) = manifest_command("panes", "id", &entry) else {
        return err(
            id,
            "plugin_not_found",
            &format!("no pane entrypoint {entry}"),
        );
    };
    let n = with_state(STATE, |s| {
        let popups = s["popups"].as_array().cloned().unwrap_or_default();
        s["popups"] = json!([popups, vec![json!({"entrypoint": entry, "args": args})]].concat());
        if let Some(back) = s.get_mut("restore_on_popup").map(Value::take)
            && let Some(back) = back.as_object()
        {
            for (id, pane) in back {
                s["panes"][id] = pane.clone();
            }
        }
        s["popups"].as_array().map_or(0, Vec::len)
    });
    // A race knob: something changes while the popup is open.
    if let Ok(script) = std::env::var("FAKE_HERDR_ON_POPUP") {
        let _ = Command::new("sh").args(["-c", &script]).status();
    }
    let input = std::env::var("FAKE_HERDR_POPUP_INPUT").ok();
    if input.is_none() && entry == "confirm-deletion" {
        // Nobody answers this popup.
        return ok(
            id,
            json!({"type": "plugin_pane_opened", "plugin_pane": {"entrypoint": entry}}),
        );
    }
    // `__hold__`: the popup opens and waits for input that never comes (the test closes it).
    let hold = input.as_deref() == Some("__hold__");
    let mut command = if hold {
        let mut c = Command::new("sh");
        c.args(["-c", "sleep 600 | exec \"$0\" \"$@\""])
            .arg(root.join(&argv[0]));
        c
    } else {
        Command::new(root.join(&argv[0]))
    };
    let input = input.filter(|_| !hold);
    command
        .args(&argv[1..])
        .current_dir(&root)
        .env("HERDR_PLUGIN_ENTRYPOINT_ID", &entry)
        .env_remove("HERDR_PANE_ID");
    for pair in args
        .iter()
        .enumerate()
        .filter(|(i, a)| *i > 0 && args[i - 1] == "--env" && a.contains('='))
        .map(|(_, a)| a)
    {
        let (k, v) = pair.split_once('=').expect("checked");
        command.env(k, v);
    }
    spawn_detached(command, dir().join(format!("popup-{n}.out")), input);
    ok(
        id,
        json!({"type": "plugin_pane_opened", "plugin_pane": {"entrypoint": entry}}),
    )
}

fn invoke(id: &str, args: &[String]) -> i32 {
    let action = args.get(1).cloned().unwrap_or_default();
    let Some((argv, root)) = manifest_command("actions", "id", &action) else {
        return err(
            id,
            "plugin_action_not_found",
            &format!("no action {action}"),
        );
    };
    let n = with_state(STATE, |s| {
        let n = s["logs"].as_array().map_or(0, Vec::len) + 1;
        let logs = s["logs"].as_array().cloned().unwrap_or_default();
        s["logs"] = json!([logs, vec![json!({"log_id": n, "action_id": action})]].concat());
        n
    });
    let base = dir().join(format!("log-{n}"));
    let script = format!(
        "\"$0\" \"$@\" > '{b}.stdout' 2> '{b}.stderr'; echo $? > '{b}.rc.tmp'; mv '{b}.rc.tmp' '{b}.rc'",
        b = base.display()
    );
    let mut command = Command::new("sh");
    command
        .arg("-c")
        .arg(script)
        .arg(root.join(&argv[0]))
        .args(&argv[1..])
        .current_dir(&root)
        .env("HERDR_PLUGIN_ACTION_ID", &action);
    spawn_detached(command, dir().join(format!("log-{n}.sh.out")), None);
    ok(
        id,
        json!({"type": "plugin_action_invoked", "action": {"id": action}, "context": {}, "log": {"log_id": n, "status": "running"}}),
    )
}

fn log_list(id: &str) -> i32 {
    let logs = with_state(STATE, |s| s["logs"].as_array().cloned().unwrap_or_default());
    let logs: Vec<Value> = logs
        .into_iter()
        .map(|l| {
            let base = dir().join(format!("log-{}", l["log_id"]));
            let read = |ext: &str| std::fs::read_to_string(format!("{}.{ext}", base.display())).ok();
            let rc = read("rc").and_then(|r| r.trim().parse::<i64>().ok());
            json!({
                "log_id": l["log_id"], "plugin_id": "airlock.sandbox", "action_id": l["action_id"],
                "status": match rc { None => "running", Some(0) => "succeeded", Some(_) => "failed" },
                "exit_code": rc, "stdout": rc.and(read("stdout")), "stderr": rc.and(read("stderr")),
            })
        })
        .collect();
    ok(id, json!({"type": "plugin_log_list", "logs": logs}))
}
