//! `session_dir`: each agent's own session store on the host.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::super::session_dir;

fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<OsString> {
    let map: HashMap<String, OsString> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), OsString::from(v)))
        .collect();
    move |name| map.get(name).cloned()
}

#[test]
fn defaults_under_home() {
    let home = Path::new("/home/u");
    let cases = [
        ("claude", "/home/u/.claude/projects"),
        ("pi", "/home/u/.pi/agent/sessions"),
        ("codex", "/home/u/.codex/sessions"),
    ];
    for (agent, dir) in cases {
        assert_eq!(
            session_dir(agent, home, env(&[])),
            Some(PathBuf::from(dir)),
            "{agent}"
        );
    }
}

#[test]
fn each_agents_own_variable_moves_its_store() {
    let home = Path::new("/home/u");
    let vars = env(&[
        ("CLAUDE_CONFIG_DIR", "/cfg/claude"),
        ("PI_CODING_AGENT_DIR", "/cfg/pi"),
        ("CODEX_HOME", "/cfg/codex"),
    ]);
    assert_eq!(
        session_dir("claude", home, &vars),
        Some(PathBuf::from("/cfg/claude/projects"))
    );
    assert_eq!(
        session_dir("pi", home, &vars),
        Some(PathBuf::from("/cfg/pi/sessions"))
    );
    assert_eq!(
        session_dir("codex", home, &vars),
        Some(PathBuf::from("/cfg/codex/sessions"))
    );
    // Another agent's variable is not consulted.
    let only_codex = env(&[("CODEX_HOME", "/cfg/codex")]);
    let claude = session_dir("claude", home, only_codex);
    assert_eq!(claude, Some(PathBuf::from("/home/u/.claude/projects")));
}

#[test]
fn empty_variables_count_as_unset() {
    let home = Path::new("/home/u");
    let dir = session_dir("codex", home, env(&[("CODEX_HOME", "")]));
    assert_eq!(dir, Some(PathBuf::from("/home/u/.codex/sessions")));
}

#[test]
fn unknown_agents_and_relative_roots_give_none() {
    let home = Path::new("/home/u");
    assert_eq!(session_dir("opencode", home, env(&[])), None);
    assert_eq!(session_dir("Claude", home, env(&[])), None);
    assert_eq!(session_dir("claude", Path::new("home/u"), env(&[])), None);
    assert_eq!(
        session_dir("claude", home, env(&[("CLAUDE_CONFIG_DIR", "cfg")])),
        None
    );
}
