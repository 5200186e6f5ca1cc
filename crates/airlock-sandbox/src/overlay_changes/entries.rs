//! One entry of an upper directory against the host's entry of the same name: what it means
//! (a whiteout, a file, a directory, a link, a FIFO), whether apply may bring it over, and the
//! bringing over. `Walker::dir` (walk.rs) calls it for each name.

use std::ffi::OsStr;
use std::path::Path;

use super::fsops::{DirFd, Meta, Type};
use super::walk::{
    Subdir, Walker, added_or_modified, entry_type, failure, failure_at, same_file, special_name,
};
use super::{ChangeKind, Cover, EntryType, Refusal};

impl Walker<'_> {
    /// Handles the upper's `name` in the directory `rel` (`upper`, and `host` when the host has
    /// it); a subdirectory to walk next is returned.
    pub(super) fn entry(
        &mut self,
        upper: &DirFd,
        host: &mut Option<DirFd>,
        rel: &Path,
        name: &OsStr,
        cover: Cover,
    ) -> Option<Subdir> {
        let path = rel.join(name);
        let meta = match upper.stat(name) {
            Ok(Some(meta)) => meta,
            Ok(None) => return None,
            Err(e) => {
                self.failed(&path, EntryType::File, "read the overlay's entry", e);
                return None;
            }
        };
        // Only a directory can hold the scope's path.
        if cover == Cover::Partly && meta.kind != Type::Dir {
            return None;
        }
        let on_host = match host.as_ref().map(|h| h.stat(name)).transpose() {
            Ok(found) => found.flatten(),
            Err(e) => {
                self.failed(&path, entry_type(meta.kind), "read the host's entry", e);
                return None;
            }
        };
        match meta.kind {
            Type::Dir => return self.subdir(upper, host, rel, name, meta, on_host, cover),
            Type::File => self.file(upper, host, rel, name, meta, on_host),
            Type::Whiteout => self.whiteout(host.as_ref(), &path, name, on_host),
            Type::Symlink => self.symlink(upper, host.as_ref(), &path, name, on_host),
            Type::Fifo | Type::Socket | Type::Device => {
                let kind = added_or_modified(on_host);
                let what = special_name(meta.kind);
                self.report(
                    &path,
                    kind,
                    EntryType::Special,
                    Some(Refusal::Special { what }),
                );
            }
        }
        None
    }

    fn whiteout(&mut self, host: Option<&DirFd>, path: &Path, name: &OsStr, on_host: Option<Meta>) {
        let (Some(found), Some(host)) = (on_host, host) else {
            // Gone on the host as well: nothing differs; applying drops the whiteout.
            if self.apply {
                self.settled.push(name.to_owned());
            }
            return;
        };
        let mut refused =
            (found.uid != self.uid).then_some(Refusal::HostNotYours { uid: found.uid });
        if self.apply && refused.is_none() {
            self.wrote = true;
            refused = match host.remove_tree(name, self.uid, 0) {
                Err((sub, e)) => {
                    let dir = self.host_path(path.parent().unwrap_or(Path::new("")));
                    Some(failure_at("delete", &dir, &sub, e))
                }
                Ok(()) => {
                    self.settled.push(name.to_owned());
                    None
                }
            };
        }
        self.report(path, ChangeKind::Deleted, entry_type(found.kind), refused);
    }

    fn file(
        &mut self,
        upper: &DirFd,
        host: &mut Option<DirFd>,
        rel: &Path,
        name: &OsStr,
        meta: Meta,
        on_host: Option<Meta>,
    ) {
        let path = rel.join(name);
        let refused = if meta.setid() {
            Some(Refusal::SetId { mode: meta.mode })
        } else if meta.uid != self.uid {
            Some(Refusal::NotYours { uid: meta.uid })
        } else {
            on_host
                .filter(|h| h.uid != self.uid)
                .map(|h| Refusal::HostNotYours { uid: h.uid })
        };
        if let (Some(found), Some(dir)) = (on_host, host.as_ref())
            && found.kind == Type::File
            && found.mode == meta.mode
            && found.size == meta.size
            && same_file(upper, dir, name, name)
        {
            // Copied up, then written back as it was (or only touched): nothing differs.
            if self.apply && refused.is_none() {
                self.settled.push(name.to_owned());
            }
            return;
        }
        let kind = added_or_modified(on_host);
        let refused = match refused {
            None if self.apply => self.copy_file(upper, host, rel, name, on_host).err(),
            refused => refused,
        };
        self.report(&path, kind, EntryType::File, refused);
    }

    /// Copies the upper's regular file `name` over the host's entry of that name (a directory
    /// there removed first), then removes it from the upper.
    fn copy_file(
        &mut self,
        upper: &DirFd,
        host: &mut Option<DirFd>,
        rel: &Path,
        name: &OsStr,
        on_host: Option<Meta>,
    ) -> Result<(), Refusal> {
        let (mut from, meta) = upper
            .open_file(name)
            .map_err(|e| failure("read it in the overlay", e))?;
        // Checked again on the opened file: what is copied is what was checked.
        if meta.setid() {
            return Err(Refusal::SetId { mode: meta.mode });
        }
        if meta.uid != self.uid {
            return Err(Refusal::NotYours { uid: meta.uid });
        }
        let dir = self
            .host_dir(rel, host)
            .map_err(|e| failure("make its directory on the host", e))?;
        self.wrote = true;
        if on_host.is_some_and(|h| h.kind == Type::Dir) {
            dir.remove_tree(name, self.uid, 0)
                .map_err(|(sub, e)| failure_at("delete", &self.host_path(rel), &sub, e))?;
        }
        dir.replace_file(name, &mut from, Some(meta.mode & 0o777), Some(meta.mtime))
            .map_err(|e| failure("write it on the host", e))?;
        self.settled.push(name.to_owned());
        Ok(())
    }

    fn symlink(
        &mut self,
        upper: &DirFd,
        host: Option<&DirFd>,
        path: &Path,
        name: &OsStr,
        on_host: Option<Meta>,
    ) {
        let to = match upper.readlink(name) {
            Ok(to) => to,
            Err(e) => return self.failed(path, EntryType::Symlink, "read the link", e),
        };
        let same = on_host.is_some_and(|h| h.kind == Type::Symlink)
            && host.and_then(|h| h.readlink(name).ok()).as_ref() == Some(&to);
        if same {
            if self.apply {
                self.settled.push(name.to_owned());
            }
            return;
        }
        let kind = added_or_modified(on_host);
        self.report(
            path,
            kind,
            EntryType::Symlink,
            Some(Refusal::Symlink { to }),
        );
    }

    #[allow(clippy::too_many_arguments)]
    fn subdir(
        &mut self,
        upper: &DirFd,
        host: &mut Option<DirFd>,
        rel: &Path,
        name: &OsStr,
        meta: Meta,
        on_host: Option<Meta>,
        cover: Cover,
    ) -> Option<Subdir> {
        let path = rel.join(name);
        let mode = meta.mode & 0o777;
        let sub = |on_host, opaque, pending| Subdir {
            name: name.to_owned(),
            on_host,
            opaque,
            pending,
            cover,
        };
        if meta.uid != self.uid {
            let refused = Refusal::NotYours { uid: meta.uid };
            self.report(
                &path,
                added_or_modified(on_host),
                EntryType::Dir,
                Some(refused),
            );
            return None;
        }
        match on_host {
            Some(found) if found.kind == Type::Dir => {
                let opaque = upper.beneath(Path::new(name)).is_ok_and(|d| d.opaque());
                Some(sub(true, opaque, None))
            }
            Some(found) if found.kind == Type::Symlink => {
                let to = host
                    .as_ref()
                    .and_then(|h| h.readlink(name).ok())
                    .unwrap_or_default();
                self.report(
                    &path,
                    ChangeKind::Modified,
                    EntryType::Dir,
                    Some(Refusal::HostSymlink { to }),
                );
                None
            }
            Some(found) if found.uid != self.uid => {
                let refused = Refusal::HostNotYours { uid: found.uid };
                self.report(&path, ChangeKind::Modified, EntryType::Dir, Some(refused));
                None
            }
            None if cover == Cover::Partly => Some(sub(false, false, Some(mode))),
            _ => {
                // New inside, or a directory where the host has a file: everything below is new.
                let kind = added_or_modified(on_host);
                if self.apply {
                    self.wrote = true;
                    let made = self.host_dir(rel, host).and_then(|dir| {
                        if on_host.is_some() {
                            dir.unlink(name)?;
                        }
                        dir.mkdir(name, mode)
                    });
                    if let Err(e) = made {
                        let refused = failure("make the directory on the host", e);
                        self.report(&path, kind, EntryType::Dir, Some(refused));
                        return None;
                    }
                }
                self.report(&path, kind, EntryType::Dir, None);
                Some(sub(self.apply, false, None))
            }
        }
    }
}
