//! The mapping store: one atomic JSON file per herdr pane under `<state dir>/panes/`.

use std::fs::OpenOptions;
use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};

use sha2::{Digest as _, Sha256};

use crate::error::{PluginError, Result};
use crate::lock::{self, LockGuard};
pub use crate::mapping::*;
use crate::proc;

/// The mapping store rooted at a state directory.
#[derive(Debug, Clone)]
pub struct Store {
    root: PathBuf,
}

impl Store {
    pub fn new(root: impl Into<PathBuf>) -> Store {
        Store { root: root.into() }
    }

    /// The plugin's state directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `<state dir>/panes`.
    pub fn panes_dir(&self) -> PathBuf {
        self.root.join("panes")
    }

    /// `<state dir>/confirmations`.
    pub fn confirmations_dir(&self) -> PathBuf {
        self.root.join("confirmations")
    }

    /// The mapping file of `pane_id`: any bytes in a pane id give a safe, unique name.
    pub fn mapping_path(&self, pane_id: &str) -> PathBuf {
        self.panes_dir()
            .join(format!("{}.json", file_stem(pane_id)))
    }

    fn lock_path(&self, pane_id: &str) -> PathBuf {
        self.panes_dir()
            .join(format!("{}.lock", file_stem(pane_id)))
    }

    /// Locks the mapping of `pane_id` (re-entrant) for a read-modify-write.
    pub fn lock(&self, pane_id: &str) -> Result<LockGuard> {
        self.ensure_dirs()?;
        lock::acquire(&self.lock_path(pane_id), lock::configured_wait())
    }

    fn ensure_dirs(&self) -> Result<()> {
        use std::os::unix::fs::DirBuilderExt as _;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(self.panes_dir())
            .map_err(|e| {
                PluginError::startup(format!(
                    "Could not create the state directory {}: {e}. Check its permissions.",
                    self.panes_dir().display()
                ))
            })
    }

    /// The mapping of `pane_id`, if any.
    pub fn load(&self, pane_id: &str) -> Result<Option<PaneMapping>> {
        let path = self.mapping_path(pane_id);
        match std::fs::read(&path) {
            Ok(bytes) => parse_mapping(&path, &bytes).map(Some),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(PluginError::startup(format!(
                "Could not read the mapping {}: {e}.",
                path.display()
            ))),
        }
    }

    /// The mapping of `pane_id`, or a `target` error.
    pub fn require(&self, pane_id: &str) -> Result<PaneMapping> {
        self.load(pane_id)?.ok_or_else(|| {
            PluginError::target(format!(
                "Pane {pane_id} has no sandbox mapping. Run start-agent first, or pick the pane of a sandboxed agent."
            ))
        })
    }

    /// Every mapping, sorted by pane id. Any unreadable or unknown-version file is an error.
    pub fn list(&self) -> Result<Vec<PaneMapping>> {
        let dir = self.panes_dir();
        let entries = match std::fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => {
                return Err(PluginError::startup(format!(
                    "Could not list {}: {e}.",
                    dir.display()
                )));
            }
        };
        let mut out = Vec::new();
        for entry in entries.flatten() {
            let path = entry.path();
            if path.extension().and_then(|e| e.to_str()) != Some("json") {
                sweep_debris(&path);
                continue;
            }
            let bytes = match std::fs::read(&path) {
                Ok(b) => b,
                // Deleted between listing and reading.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => {
                    return Err(PluginError::startup(format!(
                        "Could not read {}: {e}.",
                        path.display()
                    )));
                }
            };
            out.push(parse_mapping(&path, &bytes)?);
        }
        out.sort_by(|a, b| a.pane_id.cmp(&b.pane_id));
        Ok(out)
    }

    /// Writes `mapping` atomically (temp sibling, mode 0600, then rename), stamping version,
    /// `updatedAt` and a fresh `revision`. Callers hold the mapping's lock.
    pub fn save(&self, mapping: &mut PaneMapping) -> Result<()> {
        self.ensure_dirs()?;
        mapping.version = MAPPING_VERSION;
        mapping.updated_at = proc::now_iso();
        mapping.revision = proc::random_hex(8);
        let path = self.mapping_path(&mapping.pane_id);
        let tmp = path.with_extension(format!(
            "json.{}.{}.tmp",
            std::process::id(),
            proc::random_hex(4)
        ));
        let bytes = serde_json::to_vec_pretty(mapping).expect("a mapping always serialises");
        let written = (|| {
            let mut file = OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&tmp)?;
            file.write_all(&bytes)?;
            file.sync_all()?;
            std::fs::rename(&tmp, &path)
        })();
        written.map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            PluginError::startup(format!(
                "Could not write the mapping {}: {e}.",
                path.display()
            ))
        })
    }

    /// Locks, loads, lets `f` change the mapping (or create it from `None`), saves it when `f`
    /// returned `Some`, and deletes the file when `f` set it to `None`.
    pub fn update<T>(
        &self,
        pane_id: &str,
        f: impl FnOnce(&mut Option<PaneMapping>) -> Result<T>,
    ) -> Result<T> {
        let _guard = self.lock(pane_id)?;
        let before = self.load(pane_id)?;
        let mut current = before.clone();
        let out = f(&mut current)?;
        match current {
            Some(mut m) if Some(&m) != before.as_ref() => {
                m.pane_id = pane_id.to_owned();
                self.save(&mut m)?;
            }
            Some(_) => {}
            None if before.is_some() => self.remove_file(pane_id)?,
            None => {}
        }
        Ok(out)
    }

    /// Applies `f` to an existing mapping; a `target` error when there is none.
    pub fn modify<T>(
        &self,
        pane_id: &str,
        f: impl FnOnce(&mut PaneMapping) -> Result<T>,
    ) -> Result<T> {
        self.update(pane_id, |slot| match slot {
            Some(m) => f(m),
            None => Err(PluginError::target(format!(
                "Pane {pane_id} has no sandbox mapping any more."
            ))),
        })
    }

    /// Deletes the mapping only if it still has `revision` (compare-and-delete); returns whether.
    pub fn delete_if_revision(&self, pane_id: &str, revision: &str) -> Result<bool> {
        let _guard = self.lock(pane_id)?;
        match self.load(pane_id)? {
            Some(m) if m.revision == revision => {
                self.remove_file(pane_id)?;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    fn remove_file(&self, pane_id: &str) -> Result<()> {
        let path = self.mapping_path(pane_id);
        match std::fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(PluginError::startup(format!(
                "Could not delete {}: {e}.",
                path.display()
            ))),
        }
    }
}

/// Removes a temp file a killed process left behind (`<stem>.lock.<pid>.<hex>` from a lock
/// attempt, `<stem>.json.<pid>.<hex>.tmp` from a save) once that pid is dead.
fn sweep_debris(path: &Path) {
    let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
        return;
    };
    let rest = name
        .split_once(".lock.")
        .or_else(|| name.split_once(".json."))
        .map(|(_, rest)| rest);
    let pid = rest
        .and_then(|r| r.split('.').next())
        .and_then(|p| p.parse::<u32>().ok());
    if let Some(pid) = pid
        && !name.ends_with(".reclaim")
        && !proc::pid_alive(pid)
    {
        let _ = std::fs::remove_file(path);
    }
}

/// `<readable>-<digest>`: the pane id with `[^A-Za-z0-9._-]` as `_`, cut to 64 characters, then
/// the first 10 hex digits of sha256(pane id).
pub fn file_stem(pane_id: &str) -> String {
    let readable: String = pane_id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    let digest = proc::hex(&Sha256::digest(pane_id.as_bytes()));
    format!("{readable}-{}", &digest[..10])
}

/// Decodes a mapping file's bytes (`path` is only named in errors). Public for the fuzz targets.
#[doc(hidden)]
pub fn parse_mapping(path: &Path, bytes: &[u8]) -> Result<PaneMapping> {
    // The common case in one pass; anything else goes through a Value for a precise error.
    if let Ok(m) = serde_json::from_slice::<PaneMapping>(bytes)
        && m.version == MAPPING_VERSION
    {
        return Ok(m);
    }
    let value: serde_json::Value = serde_json::from_slice(bytes).map_err(|e| {
        PluginError::startup(format!(
            "The mapping file {} is not valid JSON ({e}). Move it aside to continue; the sandbox it names is kept.",
            path.display()
        ))
    })?;
    match value.get("version").and_then(serde_json::Value::as_u64) {
        Some(v) if v == u64::from(MAPPING_VERSION) => {}
        other => {
            let shown = other.map_or_else(|| "missing".to_owned(), |v| v.to_string());
            return Err(PluginError::startup(format!(
                "The mapping file {} has version {shown}; this airlock reads version {MAPPING_VERSION}. Upgrade airlock (it was written by a newer one) or move the file aside.",
                path.display()
            )));
        }
    }
    serde_json::from_value(value).map_err(|e| {
        PluginError::startup(format!(
            "The mapping file {} is not a valid mapping ({e}). Move it aside to continue.",
            path.display()
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mapping::sample;

    #[test]
    fn pane_ids_with_any_bytes_give_safe_distinct_names() {
        let ids = [
            "w1:p2",
            "../../etc/passwd",
            "a/b",
            "a_b",
            "\n\0é",
            &"x".repeat(300),
        ];
        let mut seen = std::collections::HashSet::new();
        for id in ids {
            let stem = file_stem(id);
            assert!(
                stem.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c)),
                "{stem}"
            );
            assert!(stem.len() <= 64 + 11);
            assert!(seen.insert(stem));
        }
    }

    #[test]
    fn save_load_roundtrip_and_compare_and_delete() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::new(dir.path());
        store
            .update("w1:p2", |slot| {
                *slot = Some(sample("w1:p2"));
                Ok(())
            })
            .expect("created");
        let loaded = store.require("w1:p2").expect("exists");
        assert_eq!(loaded.version, 1);
        assert_eq!(loaded.revision.len(), 16);
        assert!(!store.delete_if_revision("w1:p2", "stale").expect("ok"));
        assert!(
            store
                .delete_if_revision("w1:p2", &loaded.revision)
                .expect("ok")
        );
        assert!(store.load("w1:p2").expect("ok").is_none());
    }

    #[test]
    fn debris_of_dead_processes_is_swept() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::new(dir.path());
        std::fs::create_dir_all(store.panes_dir()).expect("mkdir");
        let mut child = std::process::Command::new("true").spawn().expect("true");
        let dead = child.id();
        child.wait().expect("reaped");
        let own = std::process::id();
        let names = [
            format!("a-1.lock.{dead}.ab12"),
            format!("a-1.json.{dead}.ab12.tmp"),
            format!("a-1.lock.{own}.ab12"),
            "a-1.lock".to_owned(),
        ];
        for n in &names {
            std::fs::write(store.panes_dir().join(n), "").expect("write");
        }
        store.list().expect("lists");
        let left: Vec<bool> = names
            .iter()
            .map(|n| store.panes_dir().join(n).exists())
            .collect();
        assert_eq!(left, [false, false, true, true]);
    }

    #[test]
    fn unknown_version_is_a_startup_error_and_the_file_stays() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::new(dir.path());
        std::fs::create_dir_all(store.panes_dir()).expect("mkdir");
        let path = store.mapping_path("w1:p9");
        std::fs::write(&path, r#"{"version":2,"paneId":"w1:p9"}"#).expect("write");
        let err = store.list().expect_err("refused");
        assert_eq!(err.kind, crate::ErrorKind::Startup);
        assert!(err.message.contains("version 2"), "{}", err.message);
        assert!(path.exists());
    }
}
