//! Putting a mask on one path: an empty read-only file over a file, an empty read-only directory
//! over a directory, a pinned file's source back over its target. Each mount goes on the very
//! entry that was opened and checked, beneath the project, with no link followed.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::path::Path;

use super::{BENEATH, KeepError, Keeper, c_rel, id_of, vanished};
use crate::hide::{self, HiddenPath};
use crate::native::sys;

impl Keeper {
    /// The entry at `rel` itself (`O_PATH`, no link followed), or None when it went away.
    fn entry(&self, rel: &Path, flags: libc::c_int) -> Result<Option<OwnedFd>, KeepError> {
        let Ok(name) = c_rel(rel) else {
            return Ok(None);
        };
        let flags = libc::O_PATH | libc::O_NOFOLLOW | flags;
        match sys::openat2(self.root_fd.as_fd(), &name, flags, BENEATH) {
            Ok(fd) => Ok(Some(fd)),
            Err(e) if vanished(&e) => Ok(None),
            Err(e) => Err(self.cannot(rel, e)),
        }
    }

    /// Hides a recorded path from the index, if it is still the kind it was.
    pub(super) fn hide_path(&mut self, known: &HiddenPath) -> Result<(), KeepError> {
        if known.dir {
            self.hide_dir(&known.path)
        } else {
            self.hide_file(&known.path)
        }
    }

    /// Mounts the empty file over the regular file at `rel` (a symlink: over the project file it
    /// leads to, resolved beneath the project).
    pub(super) fn hide_file(&mut self, rel: &Path) -> Result<(), KeepError> {
        let Ok(name) = c_rel(rel) else {
            return Ok(());
        };
        let mut target = sys::openat2(
            self.root_fd.as_fd(),
            &name,
            libc::O_PATH | libc::O_NOFOLLOW,
            BENEATH,
        );
        if let Ok(fd) = &target
            && self.kind(fd.as_fd()) == Some(libc::S_IFLNK)
        {
            // A link (`web/.env -> ../secrets/dev.env`): hide the file it leads to when that is in
            // the project. The mount goes on the opened file, wherever the link pointed then.
            target = sys::openat2(self.root_fd.as_fd(), &name, libc::O_PATH, 0).and_then(|fd| {
                let at = std::fs::read_link(self.fd_path(fd.as_fd()))?;
                if at.starts_with(&self.root) {
                    Ok(fd)
                } else {
                    Err(io::Error::from_raw_os_error(libc::EXDEV))
                }
            });
        }
        let fd = match target {
            Ok(fd) => fd,
            Err(e) if vanished(&e) => return Ok(()),
            Err(e) => return Err(self.cannot(rel, e)),
        };
        if self.kind(fd.as_fd()) != Some(libc::S_IFREG) {
            return Ok(());
        }
        // Where the mask goes: `rel`, or the project file a link led to.
        let at = std::fs::read_link(self.fd_path(fd.as_fd()))
            .ok()
            .and_then(|p| p.strip_prefix(&self.root).ok().map(Path::to_path_buf))
            .unwrap_or_else(|| rel.to_owned());
        if id_of(fd.as_fd()).ok() != Some(self.empty_id) {
            let empty = self.empty.try_clone().map_err(|e| self.cannot(rel, e))?;
            self.mount_copy(empty.as_fd(), fd.as_fd(), rel)?;
        }
        self.mine.push(HiddenPath {
            path: at,
            dir: false,
        });
        Ok(())
    }

    /// Mounts an empty read-only directory over the directory at `rel`.
    pub(super) fn hide_dir(&mut self, rel: &Path) -> Result<(), KeepError> {
        let Some(fd) = self.entry(rel, libc::O_DIRECTORY)? else {
            return Ok(());
        };
        self.mine.push(HiddenPath {
            path: rel.to_owned(),
            dir: true,
        });
        if let Ok((dev, _)) = id_of(fd.as_fd())
            && self.hidden_dirs.contains(&dev)
        {
            return Ok(());
        }
        self.count(rel)?;
        let fs = sys::new_fs(
            c"tmpfs",
            &[(c"mode", c"0555"), (c"source", hide::HIDDEN_SOURCE)],
            sys::MOUNT_ATTR_NOSUID | sys::MOUNT_ATTR_NODEV | sys::MOUNT_ATTR_NOEXEC,
        )
        .and_then(|fs| sys::set_attr(fs.as_fd(), sys::MOUNT_ATTR_RDONLY, 0, false).map(|()| fs))
        .map_err(|e| self.cannot(rel, e))?;
        if let Ok((dev, _)) = id_of(fs.as_fd()) {
            self.hidden_dirs.push(dev);
        }
        match sys::move_mount(fs.as_fd(), fd.as_fd()) {
            Err(e) if !vanished(&e) => Err(self.cannot(rel, e)),
            _ => Ok(()),
        }
    }

    /// The host replaced a pinned file: bind the pinned source over the new one.
    pub(super) fn repin(&mut self, at: usize, rel: &Path) -> Result<(), KeepError> {
        let Some(fd) = self.entry(rel, 0)? else {
            return Ok(());
        };
        if self.kind(fd.as_fd()) != Some(libc::S_IFREG)
            || id_of(fd.as_fd()).ok() == Some(self.pins[at].id)
        {
            return Ok(());
        }
        let source = self.pins[at]
            .source
            .try_clone()
            .map_err(|e| self.cannot(rel, e))?;
        self.mount_copy(source.as_fd(), fd.as_fd(), rel)
    }

    /// Mounts a read-only clone of the file mount at `source` on the file `target`.
    fn mount_copy(
        &mut self,
        source: BorrowedFd<'_>,
        target: BorrowedFd<'_>,
        rel: &Path,
    ) -> Result<(), KeepError> {
        self.count(rel)?;
        let tree = sys::clone_tree(source, false)
            .and_then(|t| sys::set_attr(t.as_fd(), sys::MOUNT_ATTR_RDONLY, 0, false).map(|()| t))
            .map_err(|e| self.cannot(rel, e))?;
        match sys::move_mount(tree.as_fd(), target) {
            Err(e) if !vanished(&e) => Err(self.cannot(rel, e)),
            _ => Ok(()),
        }
    }

    fn count(&mut self, rel: &Path) -> Result<(), KeepError> {
        if self.hidden >= hide::MAX_HIDDEN {
            return Err(KeepError(format!(
                "more than {} paths to hide (the last: {}); stopped the sandbox rather than \
                 leave one readable",
                hide::MAX_HIDDEN,
                rel.display()
            )));
        }
        self.hidden += 1;
        Ok(())
    }

    pub(super) fn kind(&self, fd: BorrowedFd<'_>) -> Option<libc::mode_t> {
        nix::sys::stat::fstat(fd.as_raw_fd())
            .ok()
            .map(|st| st.st_mode & libc::S_IFMT)
    }

    fn cannot(&self, rel: &Path, e: io::Error) -> KeepError {
        KeepError(format!(
            "cannot keep {} hidden: {e}; stopped the sandbox rather than leave it readable",
            rel.display()
        ))
    }
}
