//! Reading a rotating log back: every file oldest first, then following the current one.

use std::fs::{File, OpenOptions};
use std::io::{self, BufRead as _, BufReader, Read as _, Seek as _, SeekFrom};
use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};

use super::numbered;

/// The log's files that exist, oldest first: `path.<n>` … `path.1`, then `path`.
pub fn files_oldest_first(path: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = (1..)
        .map(|n| numbered(path, n))
        .take_while(|p| p.exists())
        .collect();
    files.reverse();
    if path.exists() {
        files.push(path.to_path_buf());
    }
    files
}

/// Calls `each` with every line of the log (without its newline), its rotated files first, oldest
/// first. A rotated file is read whole, a last line without a newline included (no writer will
/// finish it); the current file up to its last newline. The [`Tail`] returned goes on from there.
pub fn read(path: &Path, mut each: impl FnMut(&[u8])) -> io::Result<Tail> {
    let mut tail = Tail::new(path);
    for file in files_oldest_first(path) {
        let opened = match open_read(&file) {
            Ok(opened) => opened,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue, // rotated away meanwhile
            Err(e) => return Err(e),
        };
        if file == path {
            tail.file = Some(opened);
            tail.poll(&mut each)?;
        } else {
            let mut reader = BufReader::new(opened);
            let mut line = Vec::new();
            while reader.read_until(b'\n', &mut line)? > 0 {
                let text = line.strip_suffix(b"\n").unwrap_or(&line);
                if !text.is_empty() {
                    each(text);
                }
                line.clear();
            }
        }
    }
    Ok(tail)
}

/// Where a reader of the current file is: lines appended later come from [`Tail::poll`], across
/// rotations (`tail -F`).
#[derive(Debug)]
pub struct Tail {
    path: PathBuf,
    file: Option<File>,
    position: u64,
    pending: Vec<u8>,
}

impl Tail {
    /// A reader of `path` from its start (the file may not exist yet).
    pub fn new(path: &Path) -> Tail {
        Tail {
            path: path.to_path_buf(),
            file: None,
            position: 0,
            pending: Vec::new(),
        }
    }

    /// Calls `each` for every complete line appended since the last call. When the log was rotated
    /// (its path names another file now), what is left of the old file comes first; a file that
    /// shrank was replaced and is read from its start.
    pub fn poll(&mut self, mut each: impl FnMut(&[u8])) -> io::Result<()> {
        loop {
            let Some(file) = self.file.as_mut() else {
                match open_read(&self.path) {
                    Ok(file) => self.file = Some(file),
                    Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
                    Err(e) => return Err(e),
                }
                self.position = 0;
                continue;
            };
            let len = file.metadata()?.len();
            if len < self.position {
                self.position = 0;
                self.pending.clear();
            }
            self.drain(&mut each)?;
            match self.replaced()? {
                Replaced::No => return Ok(()),
                Replaced::Gone => return Ok(()), // mid-rotation: the new file comes next time
                Replaced::Yes(new) => {
                    // The writer moves on only after whole lines: this tail is left by a dead one.
                    self.drain(&mut each)?;
                    if !self.pending.is_empty() {
                        each(&std::mem::take(&mut self.pending));
                    }
                    self.file = Some(new);
                    self.position = 0;
                }
            }
        }
    }

    fn drain(&mut self, each: &mut impl FnMut(&[u8])) -> io::Result<()> {
        let Some(file) = self.file.as_mut() else {
            return Ok(());
        };
        file.seek(SeekFrom::Start(self.position))?;
        let start = self.pending.len();
        let n = file.read_to_end(&mut self.pending)?;
        self.position += n as u64;
        let Some(last) = self.pending[start..].iter().rposition(|&b| b == b'\n') else {
            return Ok(());
        };
        let end = start + last + 1;
        for line in self.pending[..end - 1].split(|&b| b == b'\n') {
            if !line.is_empty() {
                each(line);
            }
        }
        self.pending.drain(..end);
        Ok(())
    }

    /// Whether `path` names another file than the one being read.
    fn replaced(&self) -> io::Result<Replaced> {
        let Some(file) = &self.file else {
            return Ok(Replaced::No);
        };
        let current = match open_read(&self.path) {
            Ok(current) => current,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Replaced::Gone),
            Err(e) => return Err(e),
        };
        let (old, new) = (file.metadata()?, current.metadata()?);
        Ok(if (old.dev(), old.ino()) == (new.dev(), new.ino()) {
            Replaced::No
        } else {
            Replaced::Yes(current)
        })
    }
}

enum Replaced {
    No,
    Gone,
    Yes(File),
}

fn open_read(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
}
