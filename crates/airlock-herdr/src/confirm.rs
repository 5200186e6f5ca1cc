//! The deletion popup handshake: a request file, herdr opens the popup pane, the pane writes a
//! decision file; the action waits 60 s (`HERDR_SBX_CONFIRMATION_TIMEOUT_MS`), or until the popup
//! process is gone without an answer (closed, interrupted). Stale files are swept.

use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use serde::{Deserialize, Serialize};

use crate::app::App;
use crate::error::{ErrorKind, PluginError, Result};
use crate::herdr::HerdrCli;
use crate::proc;
use crate::store::{PaneMapping, WorkspaceMode};

/// The popup's entrypoint id in herdr-plugin.toml.
pub const POPUP_ENTRYPOINT: &str = "confirm-deletion";
/// The environment variable that tells the popup which request it answers.
pub const REQUEST_ENV: &str = "HERDR_SBX_CONFIRMATION_ID";
pub const WINDOW: Duration = Duration::from_secs(60);
/// Request and decision files older than this are removed by the sweep.
const SWEEP_AGE: Duration = Duration::from_secs(600);

/// What the popup shows.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConfirmationRequest {
    pub request_id: String,
    pub action: String,
    pub pane_ids: Vec<String>,
    pub sandbox_names: Vec<String>,
    /// What DELETE does, in words (clone-mode work included).
    #[serde(default)]
    pub consequence: String,
    pub created_at: String,
    /// Milliseconds since the Unix epoch after which the answer no longer counts.
    pub expires_at_ms: u64,
}

/// The popup's answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Decision {
    pub request_id: String,
    /// `confirmed` or `cancelled`.
    pub decision: String,
    pub decided_at: String,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

fn request_path(dir: &Path, id: &str) -> PathBuf {
    dir.join(format!("{id}.request.json"))
}

fn decision_path(dir: &Path, id: &str) -> PathBuf {
    dir.join(format!("{id}.decision.json"))
}

/// `<pid> <start token>` of the popup process answering request `id`.
fn popup_path(dir: &Path, id: &str) -> PathBuf {
    dir.join(format!("{id}.popup"))
}

/// The popup registered itself and is gone (closed or interrupted) without answering.
fn popup_gone(dir: &Path, id: &str) -> bool {
    let Ok(text) = std::fs::read_to_string(popup_path(dir, id)) else {
        return false;
    };
    let mut words = text.split_whitespace();
    match (
        words.next().and_then(|p| p.parse::<u32>().ok()),
        words.next(),
    ) {
        (Some(pid), Some(token)) => !proc::process_owns(pid, token, "pane", None),
        _ => false,
    }
}

fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension(format!("tmp.{}", proc::random_hex(4)));
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)?;
    f.write_all(bytes)?;
    drop(f);
    std::fs::rename(&tmp, path)
}

/// Removes request and decision files older than the sweep age.
pub fn sweep(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let old = e
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|m| SystemTime::now().duration_since(m).ok())
            .is_some_and(|age| age > SWEEP_AGE);
        if old {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// What DELETE does for `action` on `mappings`, as the popup says it. Clone-mode sandboxes get a
/// warning: their commits live only inside them.
pub fn consequence(action: &str, mappings: &[PaneMapping]) -> String {
    let n: usize = mappings.iter().map(|m| m.deletion_targets().len()).sum();
    let (them, it_them) = if n == 1 {
        ("The sandbox is".to_owned(), "it")
    } else {
        (format!("These {n} sandboxes are"), "them")
    };
    let mut text = match action {
        "replace-sandbox" => {
            format!("{them} deleted permanently, then a fresh one is created for this pane.")
        }
        "prune-mappings" => format!(
            "{} herdr pane. DELETE removes {it_them} permanently; anything else keeps {it_them} (reconnect adopts a single orphan).",
            if n == 1 {
                "1 sandbox has lost its".to_owned()
            } else {
                format!("{n} sandboxes have lost their")
            }
        ),
        "worktree.removed" => format!(
            "herdr removed this worktree. DELETE removes {it_them} permanently, including anything that exists only inside; anything else keeps {it_them} (prune-mappings offers this again later)."
        ),
        _ => format!("{them} deleted permanently and this pane forgets {it_them}."),
    };
    for m in mappings
        .iter()
        .filter(|m| m.workspace_mode == WorkspaceMode::Clone)
    {
        text.push_str(&format!(
            " Clone mode: {name}'s commits exist only inside it. Cancel, run fetch-changes and keep a branch with \"git branch <branch> sandbox-{name}/<branch>\" first.",
            name = m.sandbox_name
        ));
    }
    text
}

/// Asks the user to type DELETE for every sandbox of `mappings`; `Ok` only for a confirmation
/// within the window, else `cancelled`.
pub fn ask(app: &App, herdr: &HerdrCli, action: &str, mappings: &[PaneMapping]) -> Result<()> {
    let pane_ids: Vec<String> = mappings.iter().map(|m| m.pane_id.clone()).collect();
    let sandbox_names: Vec<String> = mappings
        .iter()
        .flat_map(PaneMapping::deletion_targets)
        .collect();
    let dir = app.store.confirmations_dir();
    std::fs::create_dir_all(&dir)
        .map_err(|e| PluginError::startup(format!("Could not create {}: {e}.", dir.display())))?;
    sweep(&dir);
    let window = proc::env_duration("HERDR_SBX_CONFIRMATION_TIMEOUT_MS", WINDOW);
    let id = proc::random_hex(8);
    let request = ConfirmationRequest {
        request_id: id.clone(),
        action: action.to_owned(),
        pane_ids,
        sandbox_names,
        consequence: consequence(action, mappings),
        created_at: proc::now_iso(),
        expires_at_ms: now_ms() + window.as_millis() as u64,
    };
    let req_path = request_path(&dir, &id);
    write_atomic(
        &req_path,
        &serde_json::to_vec(&request).expect("serialisable"),
    )
    .map_err(|e| PluginError::startup(format!("Could not write {}: {e}.", req_path.display())))?;
    let cleanup = || {
        let _ = std::fs::remove_file(&req_path);
        let _ = std::fs::remove_file(decision_path(&dir, &id));
        let _ = std::fs::remove_file(popup_path(&dir, &id));
    };
    if let Err(e) = herdr.open_plugin_pane(
        &app.plugin_id,
        POPUP_ENTRYPOINT,
        &[(REQUEST_ENV.to_owned(), id.clone())],
    ) {
        cleanup();
        return Err(e);
    }
    let deadline = Instant::now() + window;
    let outcome = loop {
        if let Ok(bytes) = std::fs::read(decision_path(&dir, &id)) {
            break match serde_json::from_slice::<Decision>(&bytes) {
                Ok(d) if d.request_id == id && d.decision == "confirmed" => Ok(()),
                Ok(_) => Err(PluginError::new(
                    ErrorKind::Cancelled,
                    format!("The {action} confirmation was declined; nothing was deleted."),
                )),
                Err(e) => Err(PluginError::new(
                    ErrorKind::Cancelled,
                    format!("The confirmation answer was unreadable ({e}); nothing was deleted."),
                )),
            };
        }
        // Checked after the decision file: an answer written just before exiting still counts.
        if popup_gone(&dir, &id) && !decision_path(&dir, &id).exists() {
            break Err(PluginError::new(
                ErrorKind::Cancelled,
                format!(
                    "The {action} confirmation popup was closed without an answer; nothing was deleted."
                ),
            ));
        }
        if Instant::now() >= deadline {
            break Err(PluginError::new(
                ErrorKind::Cancelled,
                format!(
                    "Nobody answered the {action} confirmation within {} s; nothing was deleted.",
                    window.as_secs()
                ),
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    cleanup();
    outcome
}

/// The popup pane: shows the request, reads a line, writes the decision. Returns the exit code.
pub fn popup(app: &App, input: &mut dyn std::io::BufRead) -> i32 {
    let dir = app.store.confirmations_dir();
    let Some(id) = std::env::var(REQUEST_ENV)
        .ok()
        .filter(|i| i.chars().all(|c| c.is_ascii_hexdigit()) && !i.is_empty())
    else {
        println!(
            "No confirmation request was given ({REQUEST_ENV} is missing or malformed). Close this popup."
        );
        return 1;
    };
    let request: ConfirmationRequest = match std::fs::read(request_path(&dir, &id))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
    {
        Some(r) => r,
        None => {
            println!(
                "The confirmation request {id} no longer exists (answered, timed out or swept). Close this popup."
            );
            return 1;
        }
    };
    // Register, so the waiting action notices a popup closed or interrupted without an answer.
    let _ = write_atomic(
        &popup_path(&dir, &id),
        format!("{} {}\n", std::process::id(), proc::own_token()).as_bytes(),
    );
    println!(
        "{} will permanently delete these sandboxes:",
        request.action
    );
    for name in &request.sandbox_names {
        println!("  {name}");
    }
    println!("panes: {}", request.pane_ids.join(", "));
    if !request.consequence.is_empty() {
        println!("{}", request.consequence);
    }
    print!("Type DELETE to confirm, anything else to cancel: ");
    let _ = std::io::stdout().flush();
    let mut line = String::new();
    let confirmed = input.read_line(&mut line).is_ok() && line.trim() == "DELETE";
    if now_ms() > request.expires_at_ms {
        println!("\nThe request expired before it was answered; nothing will be deleted.");
        return 1;
    }
    let decision = Decision {
        request_id: id.clone(),
        decision: if confirmed { "confirmed" } else { "cancelled" }.to_owned(),
        decided_at: proc::now_iso(),
    };
    if let Err(e) = write_atomic(
        &decision_path(&dir, &id),
        &serde_json::to_vec(&decision).expect("serialisable"),
    ) {
        println!("Could not record the answer: {e}");
        return 1;
    }
    println!(
        "{}",
        if confirmed {
            "Confirmed."
        } else {
            "Cancelled."
        }
    );
    0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mapping::sample;

    #[test]
    fn the_consequence_counts_sandboxes_and_warns_about_clone_mode() {
        let mut m = sample("w1:p2");
        m.replaces_sandbox_names = vec!["old".into()];
        let text = consequence("forget-mapping", std::slice::from_ref(&m));
        assert!(
            text.starts_with("These 2 sandboxes are deleted permanently"),
            "{text}"
        );
        assert!(!text.contains("Clone mode"));
        m.replaces_sandbox_names.clear();
        m.workspace_mode = WorkspaceMode::Clone;
        let text = consequence("prune-mappings", &[m]);
        assert!(
            text.starts_with("1 sandbox has lost its herdr pane."),
            "{text}"
        );
        assert!(
            text.contains("Clone mode: herdr-claude-code-0123456789ab's commits"),
            "{text}"
        );
    }
}
