//! The trust store: which project directories may have their `.airlock.toml` loaded, pinned to the
//! sha256 of the file's bytes as the user reviewed them.
//!
//! It lives in `$XDG_STATE_HOME/airlock/trust.json`, outside every sandbox-writable path, so an agent
//! can edit a project's `.airlock.toml` but can never make the host trust the edit.

use std::collections::BTreeMap;
use std::fs::{self, DirBuilder, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::load::{parse_bytes, read_optional, read_optional_project};
use crate::{ConfigError, PROJECT_FILE_NAME};

const VERSION: u32 = 1;

/// One trusted project: the hash of its `.airlock.toml` when it was trusted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrustRecord {
    /// sha256 of the file's bytes, lower-case hex.
    pub sha256: String,
    /// When it was trusted, in seconds since the Unix epoch.
    pub trusted_at: u64,
}

/// The JSON document on disk.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct TrustDocument {
    version: u32,
    projects: BTreeMap<String, TrustRecord>,
}

/// Whether a project file's current bytes are trusted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrustStatus {
    /// The directory is pinned to exactly these bytes.
    Trusted,
    /// The directory is pinned, but to other bytes: the file changed since it was reviewed.
    Changed,
    /// The directory is not in the store.
    Untrusted,
}

/// The state of a trusted project's file now, for `airlock trust list`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum EntryStatus {
    /// The file still has the trusted hash.
    Trusted,
    /// The file has another hash; it is ignored until re-trusted.
    Changed,
    /// The file (or the directory) no longer exists.
    Missing,
    /// The file exists but could not be read.
    Unreadable,
}

impl EntryStatus {
    /// The spelling used in `airlock trust list` and its `--json` output.
    pub fn as_str(self) -> &'static str {
        match self {
            EntryStatus::Trusted => "trusted",
            EntryStatus::Changed => "changed",
            EntryStatus::Missing => "missing",
            EntryStatus::Unreadable => "unreadable",
        }
    }
}

/// One line of `airlock trust list`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TrustEntry {
    pub dir: PathBuf,
    pub sha256: String,
    pub trusted_at: u64,
    pub status: EntryStatus,
}

/// The trust store, loaded in memory; [`TrustStore::save`] writes it back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrustStore {
    path: PathBuf,
    projects: BTreeMap<String, TrustRecord>,
}

impl TrustStore {
    /// Loads the store at `path`; a missing file is an empty store, a corrupt one an error.
    pub fn load(path: &Path) -> Result<TrustStore, ConfigError> {
        let projects = match read_optional(path)? {
            None => BTreeMap::new(),
            Some(bytes) => decode(&bytes).map_err(|reason| ConfigError::TrustStoreCorrupt {
                path: path.to_path_buf(),
                reason,
            })?,
        };
        Ok(TrustStore {
            path: path.to_path_buf(),
            projects,
        })
    }

    /// The file this store is loaded from and saved to.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Trusts `dir`'s `.airlock.toml` as it is now (in memory; call [`TrustStore::save`]).
    ///
    /// The file must exist and be a valid config; the hash and the parse are of the same bytes.
    /// `dir` is stored as given: the caller canonicalises it.
    pub fn add(&mut self, dir: &Path) -> Result<TrustRecord, ConfigError> {
        dir_key(dir)?;
        let file = dir.join(PROJECT_FILE_NAME);
        let Some(bytes) = read_optional_project(&file)? else {
            return Err(ConfigError::NoProjectFile {
                dir: dir.to_path_buf(),
                file,
            });
        };
        self.add_bytes(dir, &bytes)
    }

    /// Trusts `dir`'s project file as `bytes` (the content airlock itself just wrote there), not as
    /// it is read back: a sandbox changing the file meanwhile leaves it untrusted, never trusted.
    pub fn add_bytes(&mut self, dir: &Path, bytes: &[u8]) -> Result<TrustRecord, ConfigError> {
        let key = dir_key(dir)?;
        let file = dir.join(PROJECT_FILE_NAME);
        let cfg = parse_bytes(bytes, &file)?;
        // Refused at load anyway: better said before the user trusts the file.
        crate::load::check_project_file(&cfg, &file)?;
        let record = TrustRecord {
            sha256: sha256_hex(bytes),
            trusted_at: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
        };
        self.projects.insert(key, record.clone());
        Ok(record)
    }

    /// Forgets `dir` (in memory; call [`TrustStore::save`]); `false` if it was not trusted.
    pub fn remove(&mut self, dir: &Path) -> Result<bool, ConfigError> {
        let key = dir_key(dir)?;
        Ok(self.projects.remove(&key).is_some())
    }

    /// The record for `dir`, if it is trusted.
    pub fn get(&self, dir: &Path) -> Option<&TrustRecord> {
        self.projects.get(dir.to_str()?)
    }

    /// Whether `bytes`, the current content of `dir`'s `.airlock.toml`, are trusted.
    pub fn status(&self, dir: &Path, bytes: &[u8]) -> TrustStatus {
        match self.get(dir) {
            None => TrustStatus::Untrusted,
            Some(r) if r.sha256 == sha256_hex(bytes) => TrustStatus::Trusted,
            Some(_) => TrustStatus::Changed,
        }
    }

    /// Every trusted project, sorted by directory, with the state of its file now.
    pub fn entries(&self) -> Vec<TrustEntry> {
        self.projects
            .iter()
            .map(|(dir, record)| {
                let dir = PathBuf::from(dir);
                let status =
                    match crate::hostfs::read_regular(&dir.join(PROJECT_FILE_NAME), 1 << 20) {
                        Ok(bytes) if sha256_hex(&bytes) == record.sha256 => EntryStatus::Trusted,
                        Ok(_) => EntryStatus::Changed,
                        Err(e) if is_missing(&e) => EntryStatus::Missing,
                        Err(_) => EntryStatus::Unreadable,
                    };
                TrustEntry {
                    dir,
                    sha256: record.sha256.clone(),
                    trusted_at: record.trusted_at,
                    status,
                }
            })
            .collect()
    }

    /// Writes the store atomically: a 0600 temp file in the same directory, fsync, rename, fsync of
    /// the directory. Missing parent directories are created 0700.
    pub fn save(&self) -> Result<(), ConfigError> {
        let doc = TrustDocument {
            version: VERSION,
            projects: self.projects.clone(),
        };
        let mut json = serde_json::to_vec_pretty(&doc).map_err(|e| ConfigError::Write {
            path: self.path.clone(),
            error: io::Error::other(e),
        })?;
        json.push(b'\n');
        write_atomic(&self.path, &json)
    }
}

/// sha256 of `bytes`, lower-case hex: the hash the trust store pins.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn dir_key(dir: &Path) -> Result<String, ConfigError> {
    if !dir.is_absolute() {
        return Err(ConfigError::RelativeDir {
            dir: dir.to_path_buf(),
        });
    }
    dir.to_str()
        .map(str::to_owned)
        .ok_or_else(|| ConfigError::NonUtf8Dir {
            dir: dir.to_path_buf(),
        })
}

/// `NotFound`, or `NotADirectory` when a path component became a file.
fn is_missing(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
    )
}

fn decode(bytes: &[u8]) -> Result<BTreeMap<String, TrustRecord>, String> {
    let doc: TrustDocument = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
    if doc.version != VERSION {
        return Err(format!(
            "version {} is not the version {VERSION} this airlock understands",
            doc.version
        ));
    }
    for (dir, record) in &doc.projects {
        if !Path::new(dir).is_absolute() {
            return Err(format!("project {dir:?} is not an absolute path"));
        }
        let hex_ok = record.sha256.len() == 64
            && record
                .sha256
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        if !hex_ok {
            return Err(format!(
                "project {dir:?} has sha256 {:?}, not 64 lower-case hex digits",
                record.sha256
            ));
        }
    }
    Ok(doc.projects)
}

/// Replaces `path` with `bytes` so that a reader sees the old or the new content, never a mix.
fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), ConfigError> {
    let write_err = |p: &Path| {
        let p = p.to_path_buf();
        move |error| ConfigError::Write { path: p, error }
    };
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(write_err(dir))?;

    let name = path
        .file_name()
        .map_or_else(|| "trust.json".into(), |n| n.to_string_lossy().into_owned());
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let tmp = dir.join(format!(".{name}.tmp.{}.{nanos}", std::process::id()));

    let result = (|| {
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        fs::rename(&tmp, path)
    })();
    if let Err(error) = result {
        // Best effort: the write error is the one worth reporting.
        let _ = fs::remove_file(&tmp);
        return Err(ConfigError::Write {
            path: path.to_path_buf(),
            error,
        });
    }
    // Make the rename itself durable.
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(write_err(dir))
}

#[cfg(test)]
mod tests;
