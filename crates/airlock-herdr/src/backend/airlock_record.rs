//! What the airlock backend knows about a sandbox it made: one record per sandbox name in
//! `<mapping store>/airlock/<name>.json`, host-trusted (a sandbox never writes there), and the
//! paths derived from it. Every path the backend deletes or runs in is recomputed from the name
//! and checked against the record, never taken from the record alone.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{PluginError, Result};
use crate::proc;

/// Bumped when the record's meaning changes; another version is refused, never guessed at.
pub const RECORD_VERSION: u32 = 1;

/// One airlock-backed sandbox.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SandboxRecord {
    pub version: u32,
    pub name: String,
    /// The host worktree the mapping is for.
    pub local_path: String,
    /// What `airlock run --project` gets: the worktree (mount mode) or the private clone.
    pub project: String,
    pub clone: bool,
    /// `--publish` specs for every session.
    #[serde(default)]
    pub publish: Vec<String>,
    pub created_at: String,
    /// Pids of the `airlock run` sessions the plugin started and has not seen end. Only ever
    /// matched against airlock's own session list, never signalled on their own say-so.
    #[serde(default)]
    pub pids: Vec<u32>,
}

/// A sandbox name as the plugin makes them: 2–120 of `[A-Za-z0-9.-]`, starting alphanumeric. So
/// it is always one path component (no `/`, never `.` or `..`).
pub fn check_name(name: &str) -> Result<()> {
    let ok = (2..=120).contains(&name.len())
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-');
    if ok {
        Ok(())
    } else {
        Err(PluginError::target(format!(
            "Sandbox name {name:?} is not one the plugin makes (2-120 of A-Z a-z 0-9 . -, starting with a letter or digit); refusing to touch anything for it."
        )))
    }
}

/// The record directory and the clones directory of one user.
#[derive(Debug, Clone)]
pub struct Records {
    pub dir: PathBuf,
    pub clones: PathBuf,
}

impl Records {
    /// `<name>.json` in the record directory; `name` is checked first.
    pub fn path(&self, name: &str) -> Result<PathBuf> {
        check_name(name)?;
        Ok(self.dir.join(format!("{name}.json")))
    }

    /// Where a clone-mode sandbox's private clone of `local_path` lives:
    /// `<clones>/<name>/<basename of the worktree>`.
    pub fn clone_path(&self, name: &str, local_path: &str) -> Result<PathBuf> {
        check_name(name)?;
        let base = Path::new(local_path)
            .file_name()
            .and_then(|b| b.to_str())
            .filter(|b| !b.is_empty())
            .unwrap_or("worktree");
        Ok(self.clones.join(name).join(base))
    }

    /// The record of `name`, validated: its name and project are what the name and mode imply.
    pub fn load(&self, name: &str) -> Result<Option<SandboxRecord>> {
        let path = self.path(name)?;
        let bytes = match airlock_config::hostfs::read_regular(&path, 1 << 20) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => {
                return Err(PluginError::startup(format!(
                    "Could not read {}: {e}.",
                    path.display()
                )));
            }
        };
        let record: SandboxRecord = serde_json::from_slice(&bytes).map_err(|e| {
            PluginError::startup(format!(
                "{} is not a valid airlock sandbox record: {e}. Move it aside; nothing was touched.",
                path.display()
            ))
        })?;
        self.validate(&record, name, &path)?;
        Ok(Some(record))
    }

    fn validate(&self, r: &SandboxRecord, name: &str, path: &Path) -> Result<()> {
        let bad = |what: &str, value: &str| {
            Err(PluginError::startup(format!(
                "{} has {what} {value:?}, which does not belong to sandbox {name}; refusing to use it. Move the file aside.",
                path.display()
            )))
        };
        if r.version != RECORD_VERSION {
            return bad("version", &r.version.to_string());
        }
        if r.name != name {
            return bad("name", &r.name);
        }
        let expected = if r.clone {
            self.clone_path(name, &r.local_path)?
        } else {
            PathBuf::from(&r.local_path)
        };
        if Path::new(&r.project) != expected || !Path::new(&r.local_path).is_absolute() {
            return bad("project", &r.project);
        }
        Ok(())
    }

    /// Every valid record; an unreadable one is an error, never "no sandbox".
    pub fn list(&self) -> Result<Vec<SandboxRecord>> {
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => {
                return Err(PluginError::startup(format!(
                    "Could not list {}: {e}.",
                    self.dir.display()
                )));
            }
        };
        let mut names: Vec<String> = entries
            .filter_map(|e| e.ok())
            .filter_map(|e| e.file_name().to_str().map(str::to_owned))
            .filter_map(|f| f.strip_suffix(".json").map(str::to_owned))
            .collect();
        names.sort();
        let mut out = Vec::new();
        for name in names {
            if let Some(r) = self.load(&name)? {
                out.push(r);
            }
        }
        Ok(out)
    }

    /// Writes the record atomically (a 0600 temp sibling, then rename).
    pub fn save(&self, record: &SandboxRecord) -> Result<()> {
        let path = self.path(&record.name)?;
        let io = |e: std::io::Error| {
            PluginError::startup(format!("Could not write {}: {e}.", path.display()))
        };
        create_private_dir(&self.dir).map_err(io)?;
        let tmp = self
            .dir
            .join(format!(".{}.{}.tmp", record.name, proc::random_hex(4)));
        let text = serde_json::to_vec_pretty(record).expect("a record serialises");
        {
            use std::io::Write as _;
            use std::os::unix::fs::OpenOptionsExt as _;
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&tmp)
                .map_err(io)?;
            f.write_all(&text).map_err(io)?;
            f.sync_all().map_err(io)?;
        }
        std::fs::rename(&tmp, &path).map_err(io)
    }

    pub fn delete(&self, name: &str) -> Result<()> {
        let path = self.path(name)?;
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(PluginError::startup(
                format!("Could not remove {}: {e}.", path.display()),
            )),
            _ => Ok(()),
        }
    }

    /// Read-modify-write of a record under its own lock (two sessions of one sandbox may end at
    /// the same time).
    pub fn modify(&self, name: &str, f: impl FnOnce(&mut SandboxRecord)) -> Result<()> {
        let path = self.path(name)?;
        create_private_dir(&self.dir).map_err(|e| {
            PluginError::startup(format!("Could not create {}: {e}.", self.dir.display()))
        })?;
        let _guard =
            crate::lock::acquire(&path.with_extension("lock"), crate::lock::configured_wait())?;
        if let Some(mut r) = self.load(name)? {
            f(&mut r);
            self.save(&r)?;
        }
        Ok(())
    }

    /// Removes `name`'s clone directory, `<clones>/<name>`, recomputed from the name. A symlink
    /// there is removed as a link, never followed.
    pub fn remove_clone_dir(&self, name: &str) -> Result<()> {
        check_name(name)?;
        let dir = self.clones.join(name);
        match std::fs::symlink_metadata(&dir) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(PluginError::startup(format!(
                "Could not inspect {}: {e}.",
                dir.display()
            ))),
            Ok(meta) => {
                // remove_dir_all does not follow symlinks below the top; the top is checked here.
                let removed = if meta.file_type().is_dir() {
                    std::fs::remove_dir_all(&dir)
                } else {
                    std::fs::remove_file(&dir)
                };
                removed.map_err(|e| {
                    PluginError::startup(format!("Could not remove {}: {e}.", dir.display()))
                })
            }
        }
    }
}

fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt as _;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn records(root: &Path) -> Records {
        Records {
            dir: root.join("records"),
            clones: root.join("clones"),
        }
    }

    #[test]
    fn names_that_could_leave_the_directory_are_refused_with_the_name() {
        for bad in [
            "..",
            "../x",
            "a/b",
            "-a",
            ".a",
            "a",
            "",
            "a b",
            "a\nb",
            "x/../../etc",
        ] {
            let e = check_name(bad).expect_err(bad);
            assert!(e.message.contains(&format!("{bad:?}")), "{}", e.message);
        }
        check_name("herdr-claude-code-0123456789ab").expect("a plugin name");
    }

    #[test]
    fn a_record_pointing_its_project_elsewhere_is_refused() {
        let tmp = tempfile::tempdir().expect("tmp");
        let r = records(tmp.path());
        let mut rec = SandboxRecord {
            version: RECORD_VERSION,
            name: "herdr-x-1".into(),
            local_path: "/src/app".into(),
            project: "/src/app".into(),
            clone: false,
            publish: vec![],
            created_at: "now".into(),
            pids: vec![],
        };
        r.save(&rec).expect("save");
        assert_eq!(r.load("herdr-x-1").expect("load"), Some(rec.clone()));
        // A clone-mode record must name the clone the name implies, nothing else.
        rec.clone = true;
        rec.project = "/home/me".into();
        r.save(&rec).expect("save");
        let e = r.load("herdr-x-1").expect_err("refused");
        assert!(e.message.contains("\"/home/me\""), "{}", e.message);
        rec.project = r
            .clone_path("herdr-x-1", "/src/app")
            .expect("path")
            .display()
            .to_string();
        r.save(&rec).expect("save");
        assert!(r.load("herdr-x-1").expect("load").is_some());
    }

    #[test]
    fn removing_a_clone_dir_that_is_a_symlink_removes_only_the_link() {
        let tmp = tempfile::tempdir().expect("tmp");
        let r = records(tmp.path());
        let victim = tmp.path().join("victim");
        std::fs::create_dir_all(&victim).expect("mkdir");
        std::fs::write(victim.join("keep"), "x").expect("write");
        std::fs::create_dir_all(&r.clones).expect("mkdir");
        std::os::unix::fs::symlink(&victim, r.clones.join("herdr-x-1")).expect("link");
        r.remove_clone_dir("herdr-x-1").expect("removed");
        assert!(victim.join("keep").exists());
        assert!(!r.clones.join("herdr-x-1").exists());
        assert!(r.remove_clone_dir("../victim").is_err());
        assert!(victim.join("keep").exists());
    }
}
