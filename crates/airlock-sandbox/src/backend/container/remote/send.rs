//! The project as a tar stream for a remote engine: what airlock sends is all the container gets.
//!
//! The walk holds each directory open and opens every name beneath it through no symlink
//! (`hostfs::open_beneath`), so a link planted in the project is sent as a link (its target
//! text), never as the file it points at; FIFOs, sockets and devices are left out. What the spec
//! hides (its hide globs, the paths the keeper's index knows, masked files) is not sent at all;
//! a pinned file (the sanitised `.git/config`) is sent with the pin's content instead of the
//! project's, and the project's own `.git/config` is never sent.

use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd as _, AsRawFd as _, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};

use airlock_config::hostfs::{self, Kind};
use sha2::{Digest, Sha256};

use crate::hide::Rules;

/// Directories deeper than this are not walked (and the launch refused: the copy is incomplete).
const MAX_DEPTH: usize = 128;

/// What was sent at one path of the project.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SentKind {
    Dir,
    File { hash: [u8; 32], mode: u32 },
    Symlink(PathBuf),
}

/// Every path sent, relative to the project: the copy-back deletes only these, and changes only
/// files still as they were sent.
pub type Sent = BTreeMap<PathBuf, SentKind>;

/// What of the project stays on this machine.
pub struct Exclusions {
    pub rules: Rules,
    /// Paths (relative) hidden whatever their name: the keeper's index, masked files.
    pub paths: Vec<PathBuf>,
    /// Paths (relative) sent with other content: a pin's file on the host, airlock's own.
    pub substitutes: BTreeMap<PathBuf, PathBuf>,
}

impl Exclusions {
    /// Whether `rel` is kept from the container (and so never written by the copy-back).
    pub fn hidden(&self, rel: &Path) -> bool {
        self.rules.matches(rel)
            || self.paths.iter().any(|p| rel.starts_with(p))
            || (rel == Path::new(".git/config") && !self.substitutes.contains_key(rel))
    }
}

/// Writes the tree `base` of the project at `project` (`""`: the whole project) as a tar to
/// `out`, names relative to that tree (owned by `uid:gid` inside, setuid, setgid and sticky bits
/// dropped), leaving out what `ex` hides and the trees in `skip` (sent on their own). Returns what
/// it sent, named from the project.
pub fn write_tree(
    project: &Path,
    base: &Path,
    skip: &[PathBuf],
    ex: &Exclusions,
    (uid, gid): (u32, u32),
    out: impl Write,
) -> Result<Sent, String> {
    let top = project.join(base);
    let failed = |e: io::Error| format!("cannot send {}: {e}", top.display());
    let mut root =
        hostfs::open_nofollow(project, libc::O_RDONLY | libc::O_DIRECTORY).map_err(failed)?;
    if !base.as_os_str().is_empty() {
        root = hostfs::open_beneath(root.as_fd(), base, libc::O_RDONLY | libc::O_DIRECTORY)
            .map_err(failed)?;
    }
    let mut w = Walk {
        tar: tar::Builder::new(out),
        ex,
        base,
        skip,
        uid,
        gid,
        sent: Sent::new(),
    };
    // The root first, so the volume's top is the user's and an empty project is still a tar
    // (an engine refuses a stream of no entries).
    let st = stat(root.as_fd()).map_err(failed)?;
    let mut h = w.header(tar::EntryType::Directory, st.st_mode, st.st_mtime as u64);
    w.tar
        .append_data(&mut h, ".", io::empty())
        .map_err(failed)?;
    w.dir(root.as_fd(), base, 0).map_err(failed)?;
    w.tar.finish().map_err(failed)?;
    if !base.as_os_str().is_empty() {
        w.sent.insert(base.to_path_buf(), SentKind::Dir);
    }
    Ok(w.sent)
}

struct Walk<'a, W: Write> {
    tar: tar::Builder<W>,
    ex: &'a Exclusions,
    base: &'a Path,
    skip: &'a [PathBuf],
    uid: u32,
    gid: u32,
    sent: Sent,
}

impl<W: Write> Walk<'_, W> {
    /// The tar name of `rel`: relative to the tree sent.
    fn inside<'p>(&self, rel: &'p Path) -> &'p Path {
        rel.strip_prefix(self.base).unwrap_or(rel)
    }

    fn header(&self, kind: tar::EntryType, mode: u32, mtime: u64) -> tar::Header {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(kind);
        h.set_mode(mode & 0o777);
        h.set_uid(u64::from(self.uid));
        h.set_gid(u64::from(self.gid));
        h.set_mtime(mtime);
        h.set_size(0);
        h
    }

    fn dir(&mut self, dir: BorrowedFd<'_>, rel: &Path, depth: usize) -> io::Result<()> {
        if depth > MAX_DEPTH {
            return Err(io::Error::other(format!(
                "{} is more than {MAX_DEPTH} directories deep",
                rel.display()
            )));
        }
        let mut names = names(dir)?;
        names.sort_by(|a, b| a.0.cmp(&b.0));
        for (name, kind) in names {
            let rel = rel.join(&name);
            if self.skip.contains(&rel) {
                continue;
            }
            if let Some(source) = self.ex.substitutes.get(&rel) {
                let body = hostfs::read_regular(source, 64 << 20)?;
                self.file(&rel, &mut &body[..], body.len() as u64, 0o644, 0)?;
                continue;
            }
            if self.ex.hidden(&rel) {
                continue;
            }
            match kind {
                Kind::Dir => {
                    let sub = hostfs::open_beneath(
                        dir,
                        Path::new(&name),
                        libc::O_RDONLY | libc::O_DIRECTORY,
                    )?;
                    let st = stat(sub.as_fd())?;
                    let mut h =
                        self.header(tar::EntryType::Directory, st.st_mode, st.st_mtime as u64);
                    self.tar
                        .append_data(&mut h, self.inside(&rel), io::empty())?;
                    self.sent.insert(rel.clone(), SentKind::Dir);
                    self.dir(sub.as_fd(), &rel, depth + 1)?;
                }
                Kind::File => {
                    let fd = hostfs::open_beneath(
                        dir,
                        Path::new(&name),
                        libc::O_RDONLY | libc::O_NONBLOCK,
                    )?;
                    // Swapped for something else since the listing: not sent.
                    if hostfs::kind(fd.as_fd())? != Kind::File {
                        continue;
                    }
                    let st = stat(fd.as_fd())?;
                    let mut file = std::fs::File::from(fd);
                    self.file(
                        &rel,
                        &mut file,
                        st.st_size as u64,
                        st.st_mode,
                        st.st_mtime as u64,
                    )?;
                }
                Kind::Symlink => {
                    let target = nix::fcntl::readlinkat(Some(dir.as_raw_fd()), name.as_str())
                        .map_err(io::Error::from)?;
                    let target = PathBuf::from(target);
                    let mut h = self.header(tar::EntryType::Symlink, 0o777, 0);
                    self.tar.append_link(&mut h, self.inside(&rel), &target)?;
                    self.sent.insert(rel, SentKind::Symlink(target));
                }
                // FIFOs, sockets, devices: nothing a project needs, and a FIFO would block.
                Kind::Special => {}
            }
        }
        Ok(())
    }

    fn file(
        &mut self,
        rel: &Path,
        body: &mut dyn Read,
        size: u64,
        mode: u32,
        mtime: u64,
    ) -> io::Result<()> {
        let mut h = self.header(tar::EntryType::Regular, mode, mtime);
        h.set_size(size);
        let mut reader = Hashing {
            inner: body.take(size),
            hash: Sha256::new(),
            read: 0,
        };
        self.tar
            .append_data(&mut h, self.inside(rel), &mut reader)?;
        if reader.read != size {
            return Err(io::Error::other(format!(
                "{} changed size while it was being sent",
                rel.display()
            )));
        }
        self.sent.insert(
            rel.to_path_buf(),
            SentKind::File {
                hash: reader.hash.finalize().into(),
                mode: mode & 0o777,
            },
        );
        Ok(())
    }
}

/// A reader that hashes what passes through it.
struct Hashing<R> {
    inner: R,
    hash: Sha256,
    read: u64,
}

impl<R: Read> Read for Hashing<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hash.update(&buf[..n]);
        self.read += n as u64;
        Ok(n)
    }
}

/// The SHA-256 of what `read` gives.
pub fn hash_of(mut read: impl Read) -> io::Result<[u8; 32]> {
    let mut h = Hashing {
        inner: &mut read,
        hash: Sha256::new(),
        read: 0,
    };
    io::copy(&mut h, &mut io::sink())?;
    Ok(h.hash.finalize().into())
}

/// The names in a directory with their types (from the listing: links not followed), `.` and
/// `..` left out; a name that is not UTF-8 is an error (it could not be named to the engine).
pub fn names(dir: BorrowedFd<'_>) -> io::Result<Vec<(String, Kind)>> {
    let dup: OwnedFd = dir.try_clone_to_owned()?;
    let mut out = Vec::new();
    for entry in std::fs::read_dir(format!("/proc/self/fd/{}", dup.as_raw_fd()))? {
        let entry = entry?;
        let t = entry.file_type()?;
        let kind = if t.is_symlink() {
            Kind::Symlink
        } else if t.is_dir() {
            Kind::Dir
        } else if t.is_file() {
            Kind::File
        } else {
            Kind::Special
        };
        let name = entry
            .file_name()
            .into_string()
            .map_err(|n| io::Error::other(format!("the name {n:?} is not UTF-8")))?;
        out.push((name, kind));
    }
    Ok(out)
}

pub fn stat(fd: BorrowedFd<'_>) -> io::Result<libc::stat> {
    // SAFETY: a zeroed stat is a valid out-buffer; valid fd.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(st)
}
