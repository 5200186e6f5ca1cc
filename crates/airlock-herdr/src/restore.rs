//! herdr session restore for sandboxed agents: the pane records and the guard.
//!
//! herdr resumes an agent after a restart by typing its resume command (`claude --resume ID`,
//! `pi --session ID`, `codex resume ID`) into the restored pane's shell; the agent wrappers turn it
//! into `airlock run-agent`. The session lives in the synthetic home of the sandbox that launch used,
//! and the agent keys sessions by project path, so the resume reaches it only from the same project.
//!
//! - **Records**: a direct agent launch in a herdr pane writes one JSON file per pane under
//!   `$XDG_STATE_HOME/airlock/herdr-panes/` (0700, files 0600; outside every sandbox mount; the pane
//!   id is hashed into the name, so herdr's opaque string never shapes a path): the pane, the
//!   agent, the project, the sandbox state root, and the invocation.
//! - **The guard** ([`guard`]): a resume-shaped command from a pane with a record of that agent is
//!   refused unless it would reach the same project or state root, naming the directory to change
//!   to; a `--worktree` session is refused naming the invocation to re-run; a record that cannot be
//!   read fails closed; no record re-enters normally.

use std::fs;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// One pane's last direct agent launch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PaneRecord {
    pub pane_id: String,
    pub agent: String,
    pub project: PathBuf,
    pub state_root: PathBuf,
    /// The launch asked the agent for a worktree of its own (`--worktree`).
    pub worktree: bool,
    /// The agent's arguments at that launch, to name the invocation to re-run.
    pub args: Vec<String>,
}

/// `$XDG_STATE_HOME/airlock/herdr-panes` (the caller passes airlock's state dir).
pub fn records_dir(state_dir: &Path) -> PathBuf {
    state_dir.join("herdr-panes")
}

fn record_path(dir: &Path, pane_id: &str) -> PathBuf {
    let digest = Sha256::digest(pane_id.as_bytes());
    let hex: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
    dir.join(format!("{hex}.json"))
}

/// Whether the launch arguments ask the agent for a worktree of its own.
pub fn asks_for_worktree(args: &[String]) -> bool {
    args.iter()
        .any(|a| a == "--worktree" || a.starts_with("--worktree=") || a == "-w")
}

/// Writes `record` (replacing the pane's earlier one): a temp file, then a rename.
pub fn write_record(dir: &Path, record: &PaneRecord) -> std::io::Result<()> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let path = record_path(dir, &record.pane_id);
    let temp = path.with_extension("json.tmp");
    let _ = fs::remove_file(&temp);
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&temp)?;
    let body = serde_json::to_vec_pretty(record).map_err(std::io::Error::other)?;
    file.write_all(&body)?;
    file.sync_all()?;
    fs::rename(&temp, &path)
}

/// The session a resume-shaped command names, if `args` is one for `agent`: herdr's own forms and
/// the agent's equivalents typed by hand (`claude -c` reaches the same session store).
pub fn is_resume(agent: &str, args: &[String]) -> bool {
    let has = |flags: &[&str]| {
        args.iter().any(|a| {
            flags
                .iter()
                .any(|f| a == f || a.starts_with(&format!("{f}=")))
        })
    };
    match agent {
        "claude" => has(&["--resume", "-r", "--continue", "-c"]),
        "pi" => has(&["--session", "--continue", "-c", "--resume", "-r"]),
        "codex" => args.first().is_some_and(|a| a == "resume"),
        _ => false,
    }
}

/// What `run-agent` may do with a resume-shaped command.
#[derive(Debug, PartialEq, Eq)]
pub enum Guard {
    /// Go on: no record for this pane and agent, or the same project or state root.
    Enter,
    /// Refuse, with the message.
    Refuse(String),
}

/// Decides for `agent args…` typed into pane `pane_id`, which would run in `project` with state
/// root `state_root`. Reading the record is the only I/O.
pub fn guard(
    dir: &Path,
    pane_id: &str,
    agent: &str,
    args: &[String],
    project: &Path,
    state_root: &Path,
) -> Guard {
    if !is_resume(agent, args) {
        return Guard::Enter;
    }
    let path = record_path(dir, pane_id);
    let text = match fs::read(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Guard::Enter,
        Err(e) => {
            return Guard::Refuse(format!(
                "cannot read this pane's session record {}: {e}; delete it to resume outside the \
                 recorded sandbox",
                path.display()
            ));
        }
    };
    let record: PaneRecord = match serde_json::from_slice(&text) {
        Ok(record) => record,
        Err(e) => {
            return Guard::Refuse(format!(
                "this pane's session record {} is not valid ({e}); delete it to resume outside \
                 the recorded sandbox",
                path.display()
            ));
        }
    };
    if record.agent != agent || record.pane_id != pane_id {
        return Guard::Enter;
    }
    if record.worktree {
        let mut invocation = vec![format!("airlock {}", record.agent)];
        invocation.extend(record.args.iter().cloned());
        return Guard::Refuse(format!(
            "this pane's {agent} session ran in a worktree of its own, which a resume cannot reach \
             again (its sandbox state belongs to {}); start it anew with `cd {} && {}`",
            record.project.display(),
            record.project.display(),
            invocation.join(" ")
        ));
    }
    if project == record.project || state_root == record.state_root {
        return Guard::Enter;
    }
    Guard::Refuse(format!(
        "this pane's {agent} session lives in the sandbox of {}; `cd {}` and run the command again \
         (from {} it would open another sandbox, without that session)",
        record.project.display(),
        record.project.display(),
        project.display()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    fn record(dir: &Path, worktree: bool) {
        write_record(
            dir,
            &PaneRecord {
                pane_id: "w1:p3".into(),
                agent: "claude".into(),
                project: "/code/app".into(),
                state_root: "/state/app-1234".into(),
                worktree,
                args: args(&["--worktree", "feature"]),
            },
        )
        .unwrap();
    }

    #[test]
    fn resume_shapes_per_agent() {
        assert!(is_resume("claude", &args(&["--resume", "abc"])));
        assert!(is_resume("claude", &args(&["-c"])));
        assert!(is_resume("claude", &args(&["--resume=abc"])));
        assert!(is_resume("pi", &args(&["--session", "/p/s.jsonl"])));
        assert!(is_resume("codex", &args(&["resume", "abc"])));
        assert!(!is_resume("codex", &args(&["exec", "resume"])));
        assert!(!is_resume("claude", &args(&["-p", "hello"])));
    }

    #[test]
    fn the_guard_lets_the_same_project_in_and_names_where_to_go_otherwise() {
        let dir = tempfile::tempdir().unwrap();
        record(dir.path(), false);
        let resume = args(&["--resume", "abc"]);
        let same = guard(
            dir.path(),
            "w1:p3",
            "claude",
            &resume,
            Path::new("/code/app"),
            Path::new("/x"),
        );
        assert_eq!(same, Guard::Enter);
        let by_state = guard(
            dir.path(),
            "w1:p3",
            "claude",
            &resume,
            Path::new("/other"),
            Path::new("/state/app-1234"),
        );
        assert_eq!(by_state, Guard::Enter);
        let Guard::Refuse(why) = guard(
            dir.path(),
            "w1:p3",
            "claude",
            &resume,
            Path::new("/other"),
            Path::new("/y"),
        ) else {
            panic!("another project must be refused");
        };
        assert!(why.contains("`cd /code/app`"), "{why}");
        // Not a resume, another pane, another agent: nothing to guard.
        assert_eq!(
            guard(
                dir.path(),
                "w1:p3",
                "claude",
                &args(&["-p", "x"]),
                Path::new("/o"),
                Path::new("/y")
            ),
            Guard::Enter
        );
        assert_eq!(
            guard(
                dir.path(),
                "w1:p9",
                "claude",
                &resume,
                Path::new("/o"),
                Path::new("/y")
            ),
            Guard::Enter
        );
        assert_eq!(
            guard(
                dir.path(),
                "w1:p3",
                "pi",
                &args(&["--session", "s"]),
                Path::new("/o"),
                Path::new("/y")
            ),
            Guard::Enter
        );
    }

    #[test]
    fn worktree_sessions_and_unreadable_records_fail_closed() {
        let dir = tempfile::tempdir().unwrap();
        record(dir.path(), true);
        let resume = args(&["--resume", "abc"]);
        let Guard::Refuse(why) = guard(
            dir.path(),
            "w1:p3",
            "claude",
            &resume,
            Path::new("/code/app"),
            Path::new("/state/app-1234"),
        ) else {
            panic!("a worktree session must be refused from the project too");
        };
        assert!(why.contains("airlock claude --worktree feature"), "{why}");
        let path = record_path(dir.path(), "w1:p3");
        let mode =
            std::os::unix::fs::PermissionsExt::mode(&fs::metadata(&path).unwrap().permissions());
        assert_eq!(mode & 0o777, 0o600);
        fs::write(&path, b"{not json").unwrap();
        assert!(matches!(
            guard(
                dir.path(),
                "w1:p3",
                "claude",
                &resume,
                Path::new("/code/app"),
                Path::new("/s")
            ),
            Guard::Refuse(_)
        ));
        // The record's name says nothing of the pane id.
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        assert!(!name.contains("w1") && !name.contains("p3"), "{name}");
    }
}
