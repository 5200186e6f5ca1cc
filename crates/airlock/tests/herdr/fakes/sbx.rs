//! Fake `sbx` (Docker Sandboxes 0.42 CLI shapes). State: `FAKE_SBX_STATE` (JSON), argv log:
//! `FAKE_SBX_LOG`, sandbox filesystems under `FAKE_SBX_ROOT/<name>/` (`clone/` is the private
//! clone of clone mode, `fs/` everything else). Knobs:
//! - `FAKE_SBX_FAIL="cmd=message;..."`: that subcommand prints the message on stderr and exits 1.
//! - `FAKE_SBX_DELAY_MS="cmd=ms;..."`: sleep before answering (timeouts).
//! - `FAKE_SBX_DAEMON=down`: every call fails like a stopped daemon.
//! - `FAKE_SBX_LS_FORMAT`: documented | array | map | chatter | null | sandboxes-null | garbage | unnamed.
//! - `FAKE_SBX_MISSING_BINARIES=a,b`: `command -v` fails silently for them.
//! - `FAKE_SBX_ATTACH_HOLD=<file>`: an interactive session runs until the file exists (with
//!   `FAKE_SBX_ATTACH_HOLD_MATCH=<program>`: only sessions running that program).
//! - `FAKE_SBX_ATTACH_EXIT=<code>`, `FAKE_SBX_SETUP_EXIT=<code>`.
//! - `FAKE_SBX_ON_LS=<sh command>`: run before `ls` answers (a race during a listing).
//! - `FAKE_SBX_LOGGED_OUT=1`: every call but `version`, `daemon` and `login` fails as sbx does
//!   for a user who is not signed in.
//! - `FAKE_SBX_RUN=1`: `exec` runs its command on the host, in `--workdir`, with the variables
//!   of the sandbox's `--env-file`, and exits with its code (`airlock run --backend sbx`).
//!
//! `create` accepts only sbx's documented flags and names (an unknown flag or a bad name is an
//! error, as in sbx), and keeps the variables of `--env-file` and the `--deny-network` rules in
//! the sandbox's state.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

use super::{delay, knob, log_argv, with_state};

const STATE: &str = "FAKE_SBX_STATE";

fn fail(message: &str) -> i32 {
    eprintln!("{message}");
    1
}

fn root(name: &str) -> PathBuf {
    PathBuf::from(std::env::var("FAKE_SBX_ROOT").expect("FAKE_SBX_ROOT is set")).join(name)
}

fn not_found(name: &str) -> i32 {
    fail(&format!("Error: sandbox \"{name}\" not found"))
}

pub fn main(argv: Vec<String>) -> i32 {
    log_argv("FAKE_SBX_LOG", &argv);
    let cmd = argv.first().cloned().unwrap_or_default();
    delay("FAKE_SBX_DELAY_MS", &cmd);
    if std::env::var("FAKE_SBX_DAEMON").as_deref() == Ok("down") {
        return fail("cannot connect to the daemon at /run/sandboxd.sock: is the daemon running?");
    }
    if std::env::var_os("FAKE_SBX_LOGGED_OUT").is_some()
        && !["version", "daemon", "login"].contains(&cmd.as_str())
    {
        return fail("not logged in; run \"sbx login\" first");
    }
    if let Some(message) = knob("FAKE_SBX_FAIL", &cmd) {
        return fail(&message);
    }
    let rest = &argv[1.min(argv.len())..];
    match cmd.as_str() {
        "version" => {
            let v = std::env::var("FAKE_SBX_VERSION").unwrap_or_else(|_| "0.42.1".into());
            println!(
                "{}",
                json!({"client": {"version": v}, "server": {"version": v, "state": "running"}})
            );
            0
        }
        "daemon" => {
            println!(
                "{}",
                json!({"running": true, "socket": "/run/sandboxd.sock"})
            );
            0
        }
        "ls" => ls(),
        "create" => create(rest),
        "exec" => exec(rest),
        "stop" => with_state(STATE, |s| match s["sandboxes"].get_mut(&rest[0]) {
            Some(sb) => {
                sb["status"] = json!("stopped");
                0
            }
            None => not_found(&rest[0]),
        }),
        "rm" => {
            let names: Vec<&String> = rest.iter().filter(|a| !a.starts_with('-')).collect();
            with_state(STATE, |s| {
                for n in &names {
                    if s["sandboxes"].get(n.as_str()).is_none() {
                        return not_found(n);
                    }
                }
                for n in names {
                    s["sandboxes"]
                        .as_object_mut()
                        .expect("object")
                        .remove(n.as_str());
                    let _ = std::fs::remove_dir_all(root(n));
                }
                0
            })
        }
        "ports" => with_state(STATE, |s| match s["sandboxes"].get(&rest[0]) {
            Some(sb) => {
                println!("{}", sb["ports"]);
                0
            }
            None => not_found(&rest[0]),
        }),
        "cp" => cp(&rest[0], &rest[1]),
        other => fail(&format!("fake sbx: unknown command {other:?}")),
    }
}

fn ls() -> i32 {
    if let Ok(script) = std::env::var("FAKE_SBX_ON_LS") {
        let _ = Command::new("sh").args(["-c", &script]).status();
    }
    let list = with_state(STATE, |s| {
        s.get("sandboxes").cloned().unwrap_or_else(|| json!({}))
    });
    let entries: Vec<Value> = list
        .as_object()
        .into_iter()
        .flatten()
        .map(|(_, v)| v.clone())
        .collect();
    match std::env::var("FAKE_SBX_LS_FORMAT")
        .as_deref()
        .unwrap_or("documented")
    {
        "array" => println!("{}", Value::Array(entries)),
        "map" => println!("{list}"),
        "chatter" => println!(
            "daemon: warming up\nnotice: 1 update available\n{}",
            json!({"sandboxes": entries})
        ),
        "null" => println!("null"),
        "sandboxes-null" => println!("{}", json!({"sandboxes": null})),
        "garbage" => println!("{{\"sandboxes\": [oops"),
        "unnamed" => println!(
            "{}",
            json!({"sandboxes": entries.iter().map(|e| json!({"status": e["status"]})).collect::<Vec<_>>()})
        ),
        _ => println!("{}", json!({"sandboxes": entries})),
    }
    0
}

/// sbx's rule for names: at least two characters, alphanumeric first, `[A-Za-z0-9.-]`, not
/// `default`.
fn valid_name(name: &str) -> bool {
    name.len() >= 2
        && name != "default"
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-')
}

/// The `KEY=VALUE` lines of an env file.
fn env_file(path: &str) -> Result<serde_json::Map<String, Value>, String> {
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("Error: --env-file {path}: {e}"))?;
    let mut env = serde_json::Map::new();
    for line in text.lines().filter(|l| !l.is_empty()) {
        let (k, v) = line
            .split_once('=')
            .ok_or(format!("Error: bad env line {line:?}"))?;
        env.insert(k.to_owned(), json!(v));
    }
    Ok(env)
}

fn create(args: &[String]) -> i32 {
    let (mut name, mut clone, mut ports, mut positional) = (None, false, Vec::new(), Vec::new());
    let (mut env, mut deny) = (serde_json::Map::new(), Vec::new());
    let mut i = 0;
    while i < args.len() {
        match args[i].as_str() {
            "--clone" => clone = true,
            "--name" => {
                name = args.get(i + 1).cloned();
                i += 1;
            }
            "--env-file" => {
                match env_file(args.get(i + 1).map_or("", String::as_str)) {
                    Ok(vars) => env.extend(vars),
                    Err(e) => return fail(&e),
                }
                i += 1;
            }
            "--deny-network" => {
                deny.push(args.get(i + 1).cloned().unwrap_or_default());
                i += 1;
            }
            "--publish" => {
                let spec = args.get(i + 1).cloned().unwrap_or_default();
                let parts: Vec<&str> = spec.split('/').next().unwrap_or("").split(':').collect();
                let sandbox: u64 = parts.last().and_then(|p| p.parse().ok()).unwrap_or(0);
                let host: u64 = if parts.len() > 1 {
                    parts[parts.len() - 2].parse().unwrap_or(0)
                } else {
                    40000 + sandbox
                };
                ports.push(json!({"host_ip": "127.0.0.1", "host_port": host, "sandbox_port": sandbox, "protocol": "tcp4"}));
                i += 1;
            }
            "--template" | "-t" | "--kit" | "--kit-arg" | "--env" | "-e" | "--cpus"
            | "--memory" | "-m" => i += 1,
            flag if flag.starts_with('-') => {
                return fail(&format!("Error: unknown flag: {flag}"));
            }
            _ => positional.push(args[i].clone()),
        }
        i += 1;
    }
    let Some(name) = name else {
        return fail("Error: --name is required by the fake");
    };
    if !valid_name(&name) {
        return fail(&format!("Error: invalid sandbox name {name:?}"));
    }
    let exists = with_state(STATE, |s| s["sandboxes"].get(&name).is_some());
    if exists {
        return fail(&format!("Error: sandbox \"{name}\" already exists"));
    }
    let agent = positional.first().cloned().unwrap_or_default();
    let workspaces: Vec<String> = positional.iter().skip(1).cloned().collect();
    std::fs::create_dir_all(root(&name).join("fs/tmp")).expect("sandbox root");
    if clone && let Some(path) = workspaces.first() {
        let ok = Command::new("git")
            .args(["clone", "-q", path])
            .arg(root(&name).join("clone"))
            .status();
        if !ok.is_ok_and(|s| s.success()) {
            return fail("fake sbx: git clone failed");
        }
    }
    with_state(STATE, |s| {
        if s.get("sandboxes").is_none() {
            s["sandboxes"] = json!({});
        }
        s["sandboxes"][&name] = json!({
            "name": name, "id": format!("id-{name}"), "agent": agent, "status": "running",
            "workspaces": workspaces, "workspace_missing": false, "ports": ports, "clone": clone,
            "created_at": "2026-01-01T00:00:00Z", "setup_runs": 0, "sessions": [],
            "env": env, "deny_network": deny,
        });
    });
    println!("Created sandbox {name}");
    0
}

/// Maps a path inside the sandbox to the fake's directory for it.
fn translate(name: &str, clone_path: Option<&str>, path: &str) -> String {
    if let Some(c) = clone_path
        && (path == c || path.starts_with(&format!("{c}/")))
    {
        return format!("{}{}", root(name).join("clone").display(), &path[c.len()..]);
    }
    if path.starts_with("/tmp/") {
        return format!("{}{path}", root(name).join("fs").display());
    }
    path.to_owned()
}

fn exec(args: &[String]) -> i32 {
    let (mut interactive, mut workdir, mut i) = (false, None, 0);
    while i < args.len() && args[i].starts_with('-') {
        match args[i].as_str() {
            "--interactive" | "-i" => interactive = true,
            "--tty" | "-t" => {}
            "--workdir" | "-w" => {
                workdir = args.get(i + 1).cloned();
                i += 1;
            }
            "--env" | "-e" => i += 1,
            _ => {}
        }
        i += 1;
    }
    let name = args[i].clone();
    let argv: Vec<String> = args[i + 1..]
        .iter()
        .skip_while(|a| *a == "--")
        .cloned()
        .collect();
    let sandbox = with_state(STATE, |s| {
        let sb = s["sandboxes"].get_mut(&name)?;
        // sbx exec starts a stopped sandbox first.
        sb["status"] = json!("running");
        if interactive {
            let entry = json!({"argv": argv, "herdrAgent": std::env::var("HERDR_AGENT").ok(), "workdir": workdir});
            sb["sessions"].as_array_mut().expect("array").push(entry);
        } else if argv.get(1).map(String::as_str) == Some("-lc") {
            sb["setup_runs"] = json!(sb["setup_runs"].as_u64().unwrap_or(0) + 1);
        }
        Some(sb.clone())
    });
    let Some(sandbox) = sandbox else {
        return not_found(&name);
    };
    if std::env::var_os("FAKE_SBX_RUN").is_some() {
        return run_here(&sandbox, workdir.as_deref(), &argv);
    }
    if interactive {
        println!("[fake sbx] attached to {name}: {}", argv.join(" "));
        let matches = std::env::var("FAKE_SBX_ATTACH_HOLD_MATCH")
            .map_or(true, |p| p.is_empty() || argv.first() == Some(&p));
        if let Ok(hold) = std::env::var("FAKE_SBX_ATTACH_HOLD")
            && matches
        {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
            while !Path::new(&hold).exists() && std::time::Instant::now() < deadline {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        }
        return std::env::var("FAKE_SBX_ATTACH_EXIT")
            .ok()
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
    }
    let clone_path = sandbox["clone"]
        .as_bool()
        .unwrap_or(false)
        .then(|| sandbox["workspaces"][0].as_str().map(str::to_owned))
        .flatten();
    match argv.first().map(String::as_str) {
        Some("sh") if argv.get(1).map(String::as_str) == Some("-c") => {
            let program = argv[2]
                .trim_start_matches("command -v ")
                .trim_matches('\'')
                .to_owned();
            let missing = std::env::var("FAKE_SBX_MISSING_BINARIES").unwrap_or_default();
            if missing.split(',').any(|m| m == program) {
                return 1;
            }
            println!("/usr/local/bin/{program}");
            0
        }
        Some(_) if argv.get(1).map(String::as_str) == Some("-lc") => {
            println!("setup: {}", argv[2]);
            std::env::var("FAKE_SBX_SETUP_EXIT")
                .ok()
                .and_then(|c| c.parse().ok())
                .unwrap_or(0)
        }
        Some("git") => {
            let args: Vec<String> = argv[1..]
                .iter()
                .map(|a| translate(&name, clone_path.as_deref(), a))
                .collect();
            if let Some(parent) = args
                .iter()
                .find(|a| a.contains("/fs/tmp/"))
                .and_then(|a| Path::new(a).parent().map(Path::to_owned))
            {
                let _ = std::fs::create_dir_all(parent);
            }
            let status = Command::new("git").args(&args).status().expect("git runs");
            status.code().unwrap_or(1)
        }
        Some("rm") => {
            for a in argv[1..].iter().filter(|a| !a.starts_with('-')) {
                let _ = std::fs::remove_file(translate(&name, clone_path.as_deref(), a));
            }
            0
        }
        _ => 0,
    }
}

/// `FAKE_SBX_RUN`: the command on the host, as the VM would run it; its exit code, or 128+N.
fn run_here(sandbox: &Value, workdir: Option<&str>, argv: &[String]) -> i32 {
    let Some(program) = argv.first() else {
        return fail("Error: no command");
    };
    let mut command = Command::new(program);
    command.args(&argv[1..]);
    if let Some(dir) = workdir {
        command.current_dir(dir);
    }
    for (k, v) in sandbox["env"].as_object().into_iter().flatten() {
        command.env(k, v.as_str().unwrap_or_default());
    }
    match command.status() {
        Ok(status) => {
            use std::os::unix::process::ExitStatusExt as _;
            status
                .code()
                .unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
        }
        Err(e) => fail(&format!("Error: exec {program}: {e}")),
    }
}

fn cp(source: &str, destination: &str) -> i32 {
    let side = |spec: &str| -> Result<String, i32> {
        match spec.split_once(':') {
            Some((name, path)) if !name.contains('/') => {
                let known = with_state(STATE, |s| s["sandboxes"].get(name).cloned());
                let Some(sb) = known else {
                    return Err(not_found(name));
                };
                let clone = sb["clone"]
                    .as_bool()
                    .unwrap_or(false)
                    .then(|| sb["workspaces"][0].as_str().map(str::to_owned))
                    .flatten();
                Ok(translate(name, clone.as_deref(), path))
            }
            _ => Ok(spec.to_owned()),
        }
    };
    let (src, dst) = match (side(source), side(destination)) {
        (Ok(s), Ok(d)) => (s, d),
        (Err(c), _) | (_, Err(c)) => return c,
    };
    match std::fs::copy(&src, &dst) {
        Ok(_) => 0,
        Err(e) => fail(&format!("Error: copy {src} -> {dst}: {e}")),
    }
}
