//! The staged copy of the container's project applied to the host project.
//!
//! What changes on the host: files and symlinks the container added or changed, directories it
//! made, and what it deleted of what was sent. Never: a path with a `.git` component (commits
//! come back through git's fetch, as data), a path the spec hides, a read-only path of the spec,
//! a file that changed on this machine during the session (a conflict: the host's stays, the
//! container's is kept in the staging directory and named). Every host path is reached beneath
//! the project through no symlink, and each write is a new file renamed into place, so a link
//! the container (or anyone) left in the project is replaced, never written through.

use std::collections::BTreeSet;
use std::ffi::CString;
use std::io;
use std::os::fd::{AsFd as _, AsRawFd as _, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};

use airlock_config::hostfs::{self, Kind};

use super::receive::{check, create_new};
use super::send::{self, Sent, SentKind};

/// What applying did, for the developer.
#[derive(Debug, Default)]
pub struct Applied {
    pub written: Vec<PathBuf>,
    pub deleted: Vec<PathBuf>,
    /// Paths left as they are on the host, with why.
    pub kept: Vec<(PathBuf, String)>,
    /// Paths the container wrote that the rules keep from the host (`.git`, hidden, read-only).
    pub refused: Vec<(PathBuf, &'static str)>,
}

/// Why `rel` is never written by the copy-back, if it is not.
pub type Guard<'a> = &'a dyn Fn(&Path) -> Option<&'static str>;

/// Applies `staging` (the container's project) to `project`, given what was `sent`.
pub fn apply(
    project: &Path,
    staging: &Path,
    sent: &Sent,
    guard: Guard<'_>,
) -> Result<Applied, String> {
    let host = hostfs::open_nofollow(project, libc::O_RDONLY | libc::O_DIRECTORY)
        .map_err(|e| format!("cannot open the project {}: {e}", project.display()))?;
    let staged_root = hostfs::open_nofollow(staging, libc::O_RDONLY | libc::O_DIRECTORY)
        .map_err(|e| format!("cannot open {}: {e}", staging.display()))?;
    let mut a = Applied::default();
    let mut seen = BTreeSet::new();
    walk(
        host.as_fd(),
        staged_root.as_fd(),
        Path::new(""),
        sent,
        guard,
        &mut seen,
        &mut a,
    );
    // Deleted inside: what was sent and is not in the container's copy, deepest first.
    for (rel, kind) in sent.iter().rev() {
        if seen.contains(rel) || guard(rel).is_some() {
            continue;
        }
        match state(host.as_fd(), rel) {
            Ok(Some(now)) if &now == kind => match remove(host.as_fd(), rel, kind) {
                Ok(()) => a.deleted.push(rel.clone()),
                // A directory the host added to since: kept.
                Err(e) if e.raw_os_error() == Some(libc::ENOTEMPTY) => {}
                Err(e) => a.kept.push((rel.clone(), format!("cannot delete it: {e}"))),
            },
            Ok(None) => {}
            Ok(Some(_)) => a.kept.push((
                rel.clone(),
                "deleted in the container, but changed on this machine during the session".into(),
            )),
            Err(e) => a.kept.push((rel.clone(), format!("cannot check it: {e}"))),
        }
    }
    Ok(a)
}

fn walk(
    host: BorrowedFd<'_>,
    dir: BorrowedFd<'_>,
    rel: &Path,
    sent: &Sent,
    guard: Guard<'_>,
    seen: &mut BTreeSet<PathBuf>,
    a: &mut Applied,
) {
    let Ok(names) = send::names(dir) else {
        a.kept
            .push((rel.to_path_buf(), "cannot list the staged copy".into()));
        return;
    };
    for (name, kind) in names {
        let rel = rel.join(&name);
        seen.insert(rel.clone());
        if let Some(why) = guard(&rel) {
            let changed = match kind {
                Kind::Dir => !sent.contains_key(&rel),
                _ => staged_kind(dir, &name).ok() != sent.get(&rel).cloned(),
            };
            if changed {
                a.refused.push((rel, why));
            }
            continue;
        }
        let Ok(staged) = staged_kind(dir, &name) else {
            continue;
        };
        let host_now = match state(host, &rel) {
            Ok(s) => s,
            Err(e) => {
                a.kept
                    .push((rel, format!("cannot reach it on this machine: {e}")));
                continue;
            }
        };
        if host_now.as_ref() == Some(&staged) {
            if staged == SentKind::Dir {
                descend(host, dir, &name, &rel, sent, guard, seen, a);
            }
            continue;
        }
        if host_now != sent.get(&rel).cloned() {
            a.kept.push((
                rel,
                "changed on this machine during the session; the container's version is in the \
                 staging directory"
                    .into(),
            ));
            continue;
        }
        let done = match &staged {
            SentKind::Dir => make_dir(host, &rel).map(|()| {
                descend(host, dir, &name, &rel, sent, guard, seen, a);
            }),
            SentKind::File { mode, .. } => copy_in(host, dir, &name, &rel, *mode),
            SentKind::Symlink(target) => link_in(host, &rel, target),
        };
        match done {
            Ok(()) if staged != SentKind::Dir => a.written.push(rel),
            Ok(()) => {}
            Err(e) => a.kept.push((rel, format!("cannot write it: {e}"))),
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn descend(
    host: BorrowedFd<'_>,
    dir: BorrowedFd<'_>,
    name: &str,
    rel: &Path,
    sent: &Sent,
    guard: Guard<'_>,
    seen: &mut BTreeSet<PathBuf>,
    a: &mut Applied,
) {
    match hostfs::open_beneath(dir, Path::new(name), libc::O_RDONLY | libc::O_DIRECTORY) {
        Ok(sub) => walk(host, sub.as_fd(), rel, sent, guard, seen, a),
        Err(e) => a.kept.push((
            rel.to_path_buf(),
            format!("cannot read the staged copy: {e}"),
        )),
    }
}

/// What a staged entry is (the staging tree is airlock's own, but still read through no link).
fn staged_kind(dir: BorrowedFd<'_>, name: &str) -> io::Result<SentKind> {
    kind_of(dir, Path::new(name))
}

/// What is at `rel` beneath `root` now, or `None`; an error when a parent is a link.
fn state(root: BorrowedFd<'_>, rel: &Path) -> io::Result<Option<SentKind>> {
    match kind_of(root, rel) {
        Ok(k) => Ok(Some(k)),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(None),
        Err(e) => Err(e),
    }
}

fn kind_of(root: BorrowedFd<'_>, rel: &Path) -> io::Result<SentKind> {
    let (parent, name) = parent_of(root, rel)?;
    // SAFETY: a zeroed stat is a valid out-buffer; valid fd and C string.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    let rc = unsafe {
        libc::fstatat(
            parent.as_raw_fd(),
            name.as_ptr(),
            &mut st,
            libc::AT_SYMLINK_NOFOLLOW,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    match Kind::of(st.st_mode) {
        Kind::Dir => Ok(SentKind::Dir),
        Kind::Symlink => {
            let target = nix::fcntl::readlinkat(Some(parent.as_raw_fd()), name.as_c_str())
                .map_err(io::Error::from)?;
            Ok(SentKind::Symlink(target.into()))
        }
        Kind::File => {
            let fd = hostfs::openat2(
                parent.as_fd(),
                &name,
                libc::O_RDONLY | libc::O_NONBLOCK | libc::O_NOFOLLOW,
                hostfs::RESOLVE_BENEATH | hostfs::RESOLVE_NO_SYMLINKS,
            )?;
            Ok(SentKind::File {
                hash: send::hash_of(std::fs::File::from(fd))?,
                mode: st.st_mode & 0o777,
            })
        }
        Kind::Special => Err(io::Error::other("a FIFO, socket or device")),
    }
}

/// The parent directory of `rel` opened beneath `root` through no link, and the last name.
fn parent_of(root: BorrowedFd<'_>, rel: &Path) -> io::Result<(OwnedFd, CString)> {
    let name = rel
        .file_name()
        .ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?;
    let parent = match rel.parent().filter(|p| !p.as_os_str().is_empty()) {
        Some(p) => hostfs::open_beneath(root, p, libc::O_RDONLY | libc::O_DIRECTORY)?,
        None => root.try_clone_to_owned()?,
    };
    Ok((parent, CString::new(name.as_bytes())?))
}

fn make_dir(host: BorrowedFd<'_>, rel: &Path) -> io::Result<()> {
    let (parent, name) = parent_of(host, rel)?;
    // SAFETY: valid fd and C string.
    check(unsafe { libc::mkdirat(parent.as_raw_fd(), name.as_ptr(), 0o755) })
}

/// Writes the staged file `dir/name` to `rel` as a new file renamed over whatever is there.
fn copy_in(
    host: BorrowedFd<'_>,
    dir: BorrowedFd<'_>,
    name: &str,
    rel: &Path,
    mode: u32,
) -> io::Result<()> {
    let from = hostfs::open_beneath(dir, Path::new(name), libc::O_RDONLY | libc::O_NONBLOCK)?;
    let (parent, last) = parent_of(host, rel)?;
    let temp = CString::new(format!(".airlock-copy-back-{}", std::process::id()))?;
    // SAFETY: valid fd and C strings.
    unsafe { libc::unlinkat(parent.as_raw_fd(), temp.as_ptr(), 0) };
    let mut out = create_new(parent.as_fd(), &temp)?;
    let written = io::copy(&mut std::fs::File::from(from), &mut out)
        // SAFETY: valid fd; permission bits only (the staged mode had its setid bits dropped).
        .and_then(|_| check(unsafe { libc::fchmod(out.as_raw_fd(), mode & 0o777) }))
        .and_then(|()| replace(parent.as_fd(), &temp, &last));
    if written.is_err() {
        // SAFETY: valid fd and C string.
        unsafe { libc::unlinkat(parent.as_raw_fd(), temp.as_ptr(), 0) };
    }
    written
}

fn link_in(host: BorrowedFd<'_>, rel: &Path, target: &Path) -> io::Result<()> {
    let (parent, last) = parent_of(host, rel)?;
    let temp = CString::new(format!(".airlock-copy-back-{}", std::process::id()))?;
    let t = CString::new(target.as_os_str().as_bytes())?;
    // SAFETY: valid fd and C strings.
    unsafe { libc::unlinkat(parent.as_raw_fd(), temp.as_ptr(), 0) };
    check(unsafe { libc::symlinkat(t.as_ptr(), parent.as_raw_fd(), temp.as_ptr()) })?;
    replace(parent.as_fd(), &temp, &last)
}

/// Renames `temp` over `name` in `dir`; a directory there (emptied by the container) is removed
/// first when empty.
fn replace(dir: BorrowedFd<'_>, temp: &CString, name: &CString) -> io::Result<()> {
    // SAFETY: valid fd and C strings.
    let rc = unsafe {
        libc::renameat(
            dir.as_raw_fd(),
            temp.as_ptr(),
            dir.as_raw_fd(),
            name.as_ptr(),
        )
    };
    if rc == 0 {
        return Ok(());
    }
    let e = io::Error::last_os_error();
    if matches!(e.raw_os_error(), Some(libc::EISDIR) | Some(libc::ENOTEMPTY)) {
        // SAFETY: as above.
        check(unsafe { libc::unlinkat(dir.as_raw_fd(), name.as_ptr(), libc::AT_REMOVEDIR) })?;
        return check(unsafe {
            libc::renameat(
                dir.as_raw_fd(),
                temp.as_ptr(),
                dir.as_raw_fd(),
                name.as_ptr(),
            )
        });
    }
    Err(e)
}

fn remove(host: BorrowedFd<'_>, rel: &Path, kind: &SentKind) -> io::Result<()> {
    let (parent, name) = parent_of(host, rel)?;
    let flags = if *kind == SentKind::Dir {
        libc::AT_REMOVEDIR
    } else {
        0
    };
    // SAFETY: valid fd and C string.
    check(unsafe { libc::unlinkat(parent.as_raw_fd(), name.as_ptr(), flags) })
}
