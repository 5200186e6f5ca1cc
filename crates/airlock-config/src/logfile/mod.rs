//! Line logs on the host that rotate at a size cap, and reading them back.
//!
//! A log at `path` is appended to until the next line would take it past [`Rotation::max_bytes`];
//! then `path.<files-1>` → `path.<files>`, …, `path` → `path.1` (the oldest dropped) and a fresh
//! `path` is started, so a flood of lines cannot fill the disk. Readers take the rotated files
//! oldest first, then `path` ([`read`]). The bridge's audit log, the egress proxy's decision log and
//! the socket filters' logs are all written this way.

mod read;

pub use read::{Tail, files_oldest_first, read};

use std::fs::{File, OpenOptions};
use std::io::{self, Read as _, Seek as _, SeekFrom, Write as _};
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};

/// When a log rotates and how many rotated files it keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rotation {
    /// The size past which the log is rotated.
    pub max_bytes: u64,
    /// How many rotated files are kept (`path.1` … `path.<files>`).
    pub files: usize,
}

/// 8 MiB per file.
pub const DEFAULT_MAX_BYTES: u64 = 8 << 20;
/// Three rotated files: at most 32 MiB in all.
pub const DEFAULT_FILES: usize = 3;

impl Default for Rotation {
    fn default() -> Rotation {
        Rotation {
            max_bytes: DEFAULT_MAX_BYTES,
            files: DEFAULT_FILES,
        }
    }
}

/// An append-only log file (mode 0600, never opened through a symlink) that rotates.
#[derive(Debug)]
pub struct RotatingFile {
    file: File,
    path: PathBuf,
    size: u64,
    rotation: Rotation,
}

impl RotatingFile {
    /// Opens `path` for appending, creating it and its directory. A file that ends inside a line
    /// (a writer died mid-line) gets a newline first, so only that half line is unreadable.
    pub fn open(path: &Path, rotation: Rotation) -> io::Result<RotatingFile> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let mut file = open_append(path)?;
        let mut size = file.metadata()?.len();
        if size > 0 && !ends_with_newline(path, size)? {
            file.write_all(b"\n")?;
            size += 1;
        }
        Ok(RotatingFile {
            file,
            path: path.to_path_buf(),
            size,
            rotation,
        })
    }

    /// Appends `bytes`, whole lines, rotating first whenever the next line would take the file
    /// past the cap (a single line larger than the cap gets a file of its own). One write per
    /// file, so lines written together never interleave with another writer's.
    pub fn append(&mut self, mut bytes: &[u8]) -> io::Result<()> {
        while !bytes.is_empty() {
            let room = self.rotation.max_bytes.saturating_sub(self.size);
            let fit = fitting_lines(bytes, room);
            if fit == 0 && self.size > 0 {
                self.rotate();
                if self.size > 0 {
                    // Could not rotate: keep writing on the old file rather than lose lines.
                    return self.write(bytes);
                }
                continue;
            }
            let take = if fit == 0 { first_line(bytes) } else { fit };
            self.write(&bytes[..take])?;
            bytes = &bytes[take..];
        }
        Ok(())
    }

    fn write(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.file.write_all(bytes)?;
        self.size += bytes.len() as u64;
        Ok(())
    }

    /// `path.<files-1>` → `path.<files>`, …, `path` → `path.1`, then a fresh `path`. On failure
    /// the old file is kept and written on (a log that cannot rotate still logs).
    pub fn rotate(&mut self) {
        for n in (1..self.rotation.files).rev() {
            let _ = std::fs::rename(numbered(&self.path, n), numbered(&self.path, n + 1));
        }
        let renamed = if self.rotation.files == 0 {
            std::fs::remove_file(&self.path)
        } else {
            std::fs::rename(&self.path, numbered(&self.path, 1))
        };
        if renamed.is_err() {
            return;
        }
        if let Ok(file) = open_append(&self.path) {
            self.file = file;
            self.size = 0;
        }
    }

    pub fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

/// `path.<n>`: the n-th most recent rotated file.
pub fn numbered(path: &Path, n: usize) -> PathBuf {
    let mut name = path.to_path_buf().into_os_string();
    name.push(format!(".{n}"));
    PathBuf::from(name)
}

fn open_append(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
}

fn ends_with_newline(path: &Path, size: u64) -> io::Result<bool> {
    let mut file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)?;
    file.seek(SeekFrom::Start(size - 1))?;
    let mut last = [0u8];
    file.read_exact(&mut last)?;
    Ok(last[0] == b'\n')
}

/// How many bytes of whole lines at the start of `bytes` fit in `room`.
fn fitting_lines(bytes: &[u8], room: u64) -> usize {
    let limit = bytes.len().min(usize::try_from(room).unwrap_or(usize::MAX));
    if limit == bytes.len() {
        return limit;
    }
    bytes[..limit]
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| i + 1)
}

fn first_line(bytes: &[u8]) -> usize {
    bytes
        .iter()
        .position(|&b| b == b'\n')
        .map_or(bytes.len(), |i| i + 1)
}

#[cfg(test)]
mod tests;
