//! `airlock tools list|info|check` through the real binary, in a temp HOME with a fixture PATH.

mod common;

use std::fs;
use std::ops::Deref;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::Output;

use common::{TestHome, stderr, stdout};

struct World {
    base: TestHome,
    bin: PathBuf,
}

impl Deref for World {
    type Target = TestHome;
    fn deref(&self) -> &TestHome {
        &self.base
    }
}

impl World {
    /// A home with claude (binary + ~/.claude.json) and codex (binary + ~/.codex/sessions).
    fn new() -> World {
        let base = TestHome::new("home/code/app");
        let bin = base.root.join("bin");
        fs::create_dir_all(&bin).expect("mkdir");
        let w = World { base, bin };
        w.binary("claude");
        w.binary("codex");
        fs::write(w.home.join(".claude.json"), "{}").expect("claude.json");
        fs::create_dir_all(w.home.join(".codex/sessions")).expect("codex");
        w
    }

    fn binary(&self, name: &str) {
        let path = self.bin.join(name);
        fs::write(&path, "#!/bin/sh\n").expect("binary");
        fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).expect("chmod");
    }

    fn run(&self, args: &[&str]) -> Output {
        self.airlock(args)
            .env("PATH", &self.bin)
            .output()
            .expect("spawn airlock")
    }
}

#[test]
fn list_shows_the_available_tools_as_a_table() {
    let w = World::new();
    let out = w.run(&["tools", "list"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        "┌────────┬───────────┬──────────────────────────┐\n\
         │ NAME   ┆ STATUS    ┆ DESCRIPTION              │\n\
         ╞════════╪═══════════╪══════════════════════════╡\n\
         │ claude ┆ available ┆ Claude Code AI assistant │\n\
         │ codex  ┆ available ┆ OpenAI Codex CLI         │\n\
         └────────┴───────────┴──────────────────────────┘\n"
    );
}

#[test]
fn list_all_json_has_every_tool_with_its_status() {
    let w = World::new();
    w.config("[tools.claude]\nenabled = false\n");
    let out = w.run(&["tools", "list", "--all", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let rows: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("json");
    let rows = rows.as_array().expect("array");
    assert_eq!(rows.len(), 33);
    let find = |name: &str| rows.iter().find(|r| r["name"] == name).expect(name).clone();
    assert_eq!(find("claude")["status"], "disabled");
    assert_eq!(
        find("codex"),
        serde_json::json!({
            "name": "codex",
            "status": "available",
            "description": "OpenAI Codex CLI",
            "binary": w.bin.join("codex"),
        })
    );
    assert_eq!(find("nvim")["status"], "missing");
    assert_eq!(find("nvim")["binary"], serde_json::Value::Null);
}

#[test]
fn info_shows_binary_bindings_with_modes_env_and_keys() {
    let w = World::new();
    let out = w.run(&["tools", "info", "codex"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        format!(
            "Tool: codex\n\
             Status: available\n\
             Description: OpenAI Codex CLI\n\
             Binary: {}\n\
             \n\
             Bindings:\n  \
             ~/.codex                            (tmpoverlay, optional)\n  \
             ~/.codex/sessions                   (overlay, optional)\n  \
             ~/.codex/tmp                        (scratch, optional, missing)\n\
             \n\
             Environment Variables: (none)\n\
             \n\
             Shell Init: (none)\n\
             \n\
             Config Keys ([tools.codex]):\n  \
             enabled = true: false: the tool contributes nothing to the sandbox\n  \
             mount_mode = [overlay] default (split | overlay | tmpoverlay | readonly | readwrite | disabled): \
             how this tool's mounts behave; overrides [overlay] default\n",
            w.bin.join("codex").display()
        )
    );
}

#[test]
fn info_reflects_the_configured_modes_and_json_shape() {
    let w = World::new();
    w.config("[overlay]\ndefault = \"readonly\"\n[tools.codex]\nmount_mode = \"overlay\"\n");
    let out = w.run(&["tools", "info", "claude", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let info: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("json");
    assert_eq!(info["name"], "claude");
    assert_eq!(
        info["mounts"][2],
        serde_json::json!({
            "source": "~/.claude.json",
            "target": "~/.claude.json",
            "category": "state",
            "mode": "readonly",
            "required": false,
            "state": "file",
        })
    );
    assert_eq!(info["mounts"][0]["state"], "missing");
    let codex = w.run(&["tools", "info", "codex", "--json"]);
    let codex: serde_json::Value = serde_json::from_str(&stdout(&codex)).expect("json");
    assert_eq!(codex["mounts"][0]["mode"], "overlay");
    let all = w.run(&["tools", "info", "--all", "--json"]);
    let all: serde_json::Value = serde_json::from_str(&stdout(&all)).expect("json");
    assert_eq!(all.as_array().map(Vec::len), Some(33));
}

#[test]
fn info_of_an_unknown_tool_lists_the_known_ones() {
    let w = World::new();
    let out = w.run(&["tools", "info", "vim"]);
    assert_eq!(out.status.code(), Some(125));
    assert_eq!(
        stderr(&out),
        "airlock: unknown tool \"vim\"; known tools: aider, bash, bun, claude, codex, copilot, cursor, \
         deno, docker, fish, gemini, git, go, herdr, kitty, mise, node, nvim, oh-my-posh, \
         oh-my-zsh, opencode, pi, portal, powerlevel10k, python, revdiff, rtk, rust, starship, \
         tmux, uv, zellij, zsh\n"
    );
    let out = w.run(&["tools", "check", "claude", "vim"]);
    assert_eq!(out.status.code(), Some(125));
    assert!(stderr(&out).contains("unknown tool \"vim\""));
}

#[test]
fn check_shows_rows_and_the_summary() {
    let w = World::new();
    let out = w.run(&["tools", "check", "--fast", "claude", "codex", "starship"]);
    assert_eq!(out.status.code(), Some(1), "a named tool is missing");
    assert_eq!(
        stdout(&out),
        format!(
            "Checking tools...\n\
             \n\
             ✓ claude ({})\n    \
             ○ ~/.claude (optional, missing)\n    \
             ○ ~/.config/Claude (optional, missing)\n    \
             ✓ ~/.claude.json\n\
             ✓ codex ({})\n    \
             ✓ ~/.codex\n    \
             ✓ ~/.codex/sessions\n    \
             ○ ~/.codex/tmp (optional, missing)\n\
             ✗ starship (not available)\n    \
             ! starship binary not found in PATH\n\
             \n\
             Summary: 2/3 tools available\n",
            w.bin.join("claude").display(),
            w.bin.join("codex").display()
        )
    );
    let ok = w.run(&["tools", "check", "--fast", "claude"]);
    assert_eq!(ok.status.code(), Some(0));
    assert!(stdout(&ok).ends_with("Summary: 1/1 tools available\n"));
}

#[test]
fn check_reports_a_dangling_tool_dir_and_json_has_the_same_rows() {
    let w = World::new();
    fs::remove_dir_all(w.home.join(".codex")).expect("rm");
    std::os::unix::fs::symlink(w.home.join("gone"), w.home.join(".codex")).expect("symlink");
    let out = w.run(&["tools", "check", "--fast", "codex"]);
    assert!(
        stdout(&out).contains(
            "    ✗ ~/.codex (dangling symlink)\n    ○ ~/.codex/sessions (optional, missing)\n    \
             ○ ~/.codex/tmp (optional, missing)\n    \
             ! ~/.codex is a symlink to a path that does not exist; fix or remove the link\n"
        ),
        "{}",
        stdout(&out)
    );
    let json = w.run(&["tools", "check", "--fast", "--json"]);
    let report: serde_json::Value = serde_json::from_str(&stdout(&json)).expect("json");
    assert_eq!(report["total"], 33);
    assert_eq!(report["available"], 2);
    let codex = report["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .find(|t| t["name"] == "codex")
        .expect("codex");
    assert_eq!(codex["paths"][0]["state"], "dangling");
    assert_eq!(codex["status"], "available");
}

#[test]
fn a_bad_tools_table_is_an_error_naming_file_and_key() {
    let w = World::new();
    w.config("[tools.git]\nmode = \"sometimes\"\n");
    let out = w.run(&["tools", "list"]);
    assert_eq!(out.status.code(), Some(125));
    let config = w.home.join(".config/airlock/config.toml");
    assert_eq!(
        stderr(&out),
        format!(
            "airlock: {}: [tools.git] mode = \"sometimes\" is not valid; expected one of \"readonly\", \"readwrite\", \"disabled\"\n",
            config.display()
        )
    );
    w.config("[tools.vim]\nenabled = true\n");
    let out = w.run(&["tools", "list"]);
    assert!(
        stderr(&out).contains("[tools.vim] is not a known tool; known tools: aider,"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn check_runs_each_tool_inside_a_sandbox_and_reports_one_that_fails_there() {
    if !common::sandbox_starts() {
        return;
    }
    let w = World::new();
    // In the home, where tools install themselves: the sandbox mounts what they run from. (The
    // fixture's own bin dir, under /tmp, is not visible inside, which is what the check reports.)
    let bin = w.home.join(".local/bin");
    fs::create_dir_all(&bin).expect("bin");
    let exe = |name: &str, text: String| {
        let path = bin.join(name);
        fs::write(&path, text).expect("binary");
        fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).expect("chmod");
    };
    exe("claude", "#!/bin/sh\necho claude 9.9.9\n".into());
    // codex works on the host but needs a file of the home no tool mounts: inside it fails.
    fs::write(w.home.join("codex-lib"), "").expect("lib");
    exe(
        "codex",
        format!(
            "#!/bin/sh\n. {} && echo codex 1.0\n",
            w.home.join("codex-lib").display()
        ),
    );
    let out = w
        .airlock(&["tools", "check", "claude", "codex"])
        .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
        .output()
        .expect("spawn airlock");
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}{}", stderr(&out));
    assert!(text.contains("✓ runs inside: claude 9.9.9"), "{text}");
    assert!(
        text.contains(&format!(
            "! inside a sandbox, `{} --version` failed (exit ",
            bin.join("codex").display()
        )),
        "{text}"
    );
    let json = w
        .airlock(&["tools", "check", "--json", "claude"])
        .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
        .output()
        .expect("spawn airlock");
    let report: serde_json::Value = serde_json::from_slice(&json.stdout).expect("json");
    assert_eq!(report["tools"][0]["inside"]["ok"], true);
    assert_eq!(report["tools"][0]["inside"]["output"], "claude 9.9.9");
}
