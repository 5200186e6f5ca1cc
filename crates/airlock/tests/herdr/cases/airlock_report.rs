//! `backend = "airlock"` with herdr's control socket: the agent the plugin starts runs in a real
//! sandbox, and its status reports reach herdr only through airlock's herdr filter, bound to the
//! pane the plugin opened. A fake herdr *server* (tests/common/fake_herdr, built from herdr's
//! schema) stands in for the socket; the plugin's own calls still go to the fake herdr CLI.

use std::os::unix::fs::PermissionsExt as _;

use serde_json::{Value, json};

#[path = "../../common/fake_herdr/mod.rs"]
#[allow(dead_code)]
mod fake_herdr;

use super::airlock_backend::airlock_world;
use crate::check;
use crate::world::Outcome;

fn report(id: &str, pane: &str) -> String {
    json!({"id": id, "method": "pane.report_agent",
        "params": {"pane_id": pane, "source": "claude-hook", "agent": "claude", "state": "working"}})
    .to_string()
}

pub fn agent_reports_reach_herdr_only_for_its_own_pane() -> Outcome {
    if !std::path::Path::new("/usr/bin/python3").exists() {
        println!("skip: needs /usr/bin/python3 for the fake agent");
        return Ok(());
    }
    let Some((mut w, repo)) = airlock_world(json!({"agentKind": "claude-code"}))? else {
        return Ok(());
    };
    let socket = w.root.join("herdr-host/herdr.sock");
    std::fs::create_dir_all(socket.parent().ok_or("parent")?).map_err(|e| e.to_string())?;
    let herdr = fake_herdr::FakeHerdr::start(&socket);
    let claude = w.home.join(".local/bin/claude");
    std::fs::create_dir_all(claude.parent().ok_or("parent")?).map_err(|e| e.to_string())?;
    std::fs::write(
        &claude,
        format!("#!/usr/bin/python3\n{}", fake_herdr::client::CLIENT),
    )
    .map_err(|e| e.to_string())?;
    std::fs::set_permissions(&claude, std::fs::Permissions::from_mode(0o755))
        .map_err(|e| e.to_string())?;
    let path = w
        .env
        .iter()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.clone())
        .unwrap_or_default();
    w.set(
        "PATH",
        &format!("{path}:{}", claude.parent().ok_or("bin")?.display()),
    );
    w.set("HERDR_ENV", "1");
    w.set("HERDR_SOCKET_PATH", &socket.display().to_string());

    let run = w.action("start-agent", w.ctx(&repo));
    check!(run.ok(), "start-agent: {}", run.show());
    let pane = run.text("paneId");
    // Its own pane, then a neighbour's (w1:p2 exists in herdr): only the first may pass.
    let requests = [report("own", &pane), report("other", "w1:p2")].join("\n") + "\n";
    std::fs::write(repo.join("requests.jsonl"), requests).map_err(|e| e.to_string())?;
    let answers_file = repo.join("answers.jsonl");
    w.wait_for("the agent's answers", || answers_file.exists())?;
    w.wait_for_bridge_exit(&pane)?;
    let answers: Vec<Value> = std::fs::read_to_string(&answers_file)
        .map_err(|e| e.to_string())?
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or(Value::String(l.to_owned())))
        .collect();
    check!(answers.len() == 2, "two answers: {answers:?}");
    // herdr's own answer, not the filter's (the socket fake does not know the pane the CLI fake
    // opened, so it says pane_not_found: what passed is told by what reached it, below).
    check!(
        answers[0]["id"] == "own" && answers[0]["error"]["code"] != "forbidden",
        "its own pane's report is passed to herdr: {answers:?}"
    );
    check!(
        answers[1]["error"]["code"] == "forbidden",
        "another pane's report is refused by the filter: {answers:?}"
    );
    let reached: Vec<Value> = herdr
        .requests()
        .into_iter()
        .filter(|r| r["id"] != "airlock-probe")
        .collect();
    check!(
        reached.len() == 1
            && reached[0]["method"] == "pane.report_agent"
            && reached[0]["params"]["pane_id"] == pane.as_str(),
        "only the own pane's report reached herdr: {reached:?}"
    );
    let raw = String::from_utf8_lossy(&herdr.raw().concat()).into_owned();
    check!(
        !raw.contains("w1:p2"),
        "the neighbour's id reached herdr: {raw}"
    );
    Ok(())
}
