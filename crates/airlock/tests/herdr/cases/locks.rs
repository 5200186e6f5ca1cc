//! Locks across real processes: 8 workers hammering one mapping lose no update and never overlap;
//! a kill -9 leaves a reclaimable lock and never a corrupt mapping; stale and recycled pids.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use airlock_herdr::store::{LifecycleState, PaneMapping, Store, WorkspaceMode};

use crate::check;
use crate::world::{Outcome, World};

const PANE: &str = "w1:p7";

fn seed(state: &Path) {
    let store = Store::new(state);
    store
        .update(PANE, |slot| {
            *slot = Some(PaneMapping {
                version: 1,
                pane_id: PANE.into(),
                sandbox_name: "herdr-claude-code-000000000000".into(),
                workspace_id: Some("w1".into()),
                agent_kind: "claude-code".into(),
                sbx_agent: "claude".into(),
                local_path: "/repo".into(),
                workdir: "/repo".into(),
                workspace_mode: WorkspaceMode::Mount,
                lifecycle_state: LifecycleState::Provisional,
                created_at: None,
                updated_at: String::new(),
                revision: String::new(),
                source_pane_id: None,
                replaces_sandbox_names: vec![],
                deleted_sandbox_names: vec![],
                last_error: None,
                setup_script_ran_at: None,
                last_connected_at: Some("0".into()),
                adopted_from: None,
                bridge: None,
                shells: vec![],
                deletion: None,
                backend: None,
            });
            Ok(())
        })
        .expect("seeded");
}

fn counter(state: &Path) -> u64 {
    Store::new(state)
        .require(PANE)
        .ok()
        .and_then(|m| m.last_connected_at)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

/// `hammer <state dir> <count>`: `count` read-modify-writes of the counter, each checking that no
/// other process is inside the critical section (an O_EXCL marker file). Exit 3 on overlap.
pub fn hammer(args: &[String]) -> i32 {
    let state = PathBuf::from(&args[0]);
    let count: u64 = args[1].parse().expect("count");
    let store = Store::new(&state);
    let marker = state.join("inside");
    for _ in 0..count {
        let result = store.modify(PANE, |m| {
            if std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&marker)
                .is_err()
            {
                return Err(airlock_herdr::PluginError::conflict("overlap"));
            }
            let n: u64 = m
                .last_connected_at
                .as_deref()
                .unwrap_or("0")
                .parse()
                .unwrap_or(0);
            m.last_connected_at = Some((n + 1).to_string());
            std::fs::remove_file(&marker).expect("marker removed");
            Ok(())
        });
        match result {
            Ok(()) => {}
            Err(e) if e.message == "overlap" => return 3,
            Err(e) => {
                eprintln!("hammer: {e}");
                return 2;
            }
        }
    }
    0
}

/// `touch-mapping <state dir> <pane>`: one locked update of the mapping (a new revision).
pub fn touch(args: &[String]) -> i32 {
    let store = Store::new(&args[0]);
    match store.modify(&args[1], |m| {
        m.last_connected_at = Some(airlock_herdr::proc::now_iso());
        Ok(())
    }) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("touch-mapping: {e}");
            2
        }
    }
}

fn spawn_hammer(w: &World, count: u64) -> std::process::Child {
    w.command(&std::env::current_exe().expect("exe"))
        .args([
            "hammer",
            &w.state_dir.display().to_string(),
            &count.to_string(),
        ])
        .env("HERDR_SBX_LOCK_WAIT_MS", "60000")
        .stdout(Stdio::null())
        .spawn()
        .expect("hammer starts")
}

pub fn hammer_8_processes() -> Outcome {
    let w = World::new();
    seed(&w.state_dir);
    let children: Vec<_> = (0..8).map(|_| spawn_hammer(&w, 200)).collect();
    for mut c in children {
        let status = c.wait().map_err(|e| e.to_string())?;
        check!(
            status.code() == Some(0),
            "a worker failed or overlapped: {status}"
        );
    }
    let n = counter(&w.state_dir);
    check!(n == 1600, "lost updates: {n} of 1600");
    let leftovers: Vec<String> = std::fs::read_dir(w.state_dir.join("panes"))
        .map_err(|e| e.to_string())?
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !n.ends_with(".json"))
        .collect();
    check!(
        leftovers.is_empty(),
        "no lock or temp files left: {leftovers:?}"
    );
    Ok(())
}

pub fn kill_9_leaves_a_reclaimable_lock() -> Outcome {
    let w = World::new();
    seed(&w.state_dir);
    for round in 0..5 {
        let mut child = spawn_hammer(&w, 1_000_000);
        let before = counter(&w.state_dir);
        let progressed = w.wait_for("the worker to make progress", || {
            counter(&w.state_dir) > before + 20 + round * 7
        });
        if progressed.is_err() {
            let _ = child.kill();
            let _ = child.wait();
            return progressed;
        }
        // SAFETY: killing our own child.
        unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
        let _ = child.wait();
        let _ = std::fs::remove_file(w.state_dir.join("inside"));
        let store = Store::new(&w.state_dir);
        let started = std::time::Instant::now();
        let after = store
            .modify(PANE, |m| Ok(m.last_connected_at.clone()))
            .map_err(|e| format!("round {round}: not reclaimed: {e}"))?;
        check!(after.is_some(), "the mapping parses");
        check!(
            started.elapsed() < std::time::Duration::from_secs(5),
            "reclaimed promptly"
        );
    }
    // Temp files the killed workers left are swept by the next listing.
    Store::new(&w.state_dir).list().map_err(|e| e.to_string())?;
    let leftovers: Vec<String> = std::fs::read_dir(w.state_dir.join("panes"))
        .map_err(|e| e.to_string())?
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !n.ends_with(".json"))
        .collect();
    check!(leftovers.is_empty(), "debris left: {leftovers:?}");
    Ok(())
}

pub fn stale_and_recycled_pids() -> Outcome {
    let w = World::new();
    seed(&w.state_dir);
    let store = Store::new(&w.state_dir);
    let lock = store.mapping_path(PANE).with_extension("lock");
    let mut dead = Command::new("true").spawn().map_err(|e| e.to_string())?;
    let pid = dead.id();
    dead.wait().map_err(|e| e.to_string())?;
    std::fs::write(&lock, format!("{pid} linux:12345\n")).map_err(|e| e.to_string())?;
    store
        .modify(PANE, |_| Ok(()))
        .map_err(|e| format!("dead pid not reclaimed: {e}"))?;
    // A live pid with another start token is a recycled pid.
    let mut live = Command::new("sleep")
        .arg("30")
        .spawn()
        .map_err(|e| e.to_string())?;
    std::fs::write(&lock, format!("{} linux:1\n", live.id())).map_err(|e| e.to_string())?;
    let reclaimed = store.modify(PANE, |_| Ok(()));
    let _ = live.kill();
    let _ = live.wait();
    check!(
        reclaimed.is_ok(),
        "recycled pid not reclaimed: {reclaimed:?}"
    );
    // A live holder with its real start token (this process) blocks another process: the action
    // waits HERDR_SBX_LOCK_WAIT_MS and fails with a conflict naming the holder.
    std::fs::write(
        &lock,
        format!(
            "{} {}\n",
            std::process::id(),
            airlock_herdr::proc::own_token()
        ),
    )
    .map_err(|e| e.to_string())?;
    let blocked = w.airlock(
        &["herdr", "action", "stop"],
        &[("HERDR_PANE_ID", PANE), ("HERDR_SBX_LOCK_WAIT_MS", "200")],
    );
    let _ = std::fs::remove_file(&lock);
    let holder = std::process::id().to_string();
    check!(
        blocked.kind() == "conflict"
            && blocked.result["message"]
                .as_str()
                .is_some_and(|m| m.contains(&holder)),
        "a live holder blocks: {}",
        blocked.show()
    );
    Ok(())
}
