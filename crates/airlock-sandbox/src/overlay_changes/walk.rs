//! The walk of one layer: each upper entry compared with the host's entry of the same name
//! (`entries.rs`; a one-file layer: `seeded.rs`), reported, and (applying) brought over and
//! removed from the upper.
//!
//! A directory's own entries are handled first and its subdirectories after, with the
//! directory's descriptors closed, so a walk holds two directory fds besides its roots; each
//! directory is reopened beneath its root with no symlink on the way. What a directory applied
//! leaves the upper only after one `syncfs` of the host made it durable, so a crash never loses
//! both copies.

use std::ffi::{OsStr, OsString};
use std::io;
use std::path::{Path, PathBuf};

use super::fsops::{self, DirFd, Meta, Type};
use super::{
    Action, Change, ChangeKind, Cover, EntryType, Layer, LayerKind, OverlayError, Overlays,
    Refusal, Scope, Summary,
};

pub(super) fn walk(
    overlays: &Overlays,
    layer: &Layer,
    scope: &Scope,
    action: Action,
    visit: &mut dyn FnMut(&Change),
) -> Result<Summary, OverlayError> {
    let upper_error = |source| OverlayError::Upper {
        path: layer.kept.clone(),
        source,
    };
    let host_error = |path: &Path| {
        let path = path.to_owned();
        move |source| OverlayError::Host {
            path,
            kept: layer.kept.clone(),
            source,
        }
    };
    let Some(state) =
        missing_is_none(DirFd::open_trusted(&overlays.state_root)).map_err(upper_error)?
    else {
        return Ok(Summary::default());
    };
    let kept = layer
        .kept
        .strip_prefix(&overlays.state_root)
        .map_err(|_| upper_error(io::Error::from(io::ErrorKind::InvalidInput)))?;
    let (upper_rel, host_dir, names) = match layer.kind {
        LayerKind::Dir => (kept, layer.host.as_path(), None),
        LayerKind::File => {
            let (Some(dir), Some(copy), Some(parent), Some(name)) = (
                kept.parent(),
                kept.file_name(),
                layer.host.parent(),
                layer.host.file_name(),
            ) else {
                return Err(upper_error(io::Error::from(io::ErrorKind::InvalidInput)));
            };
            (dir, parent, Some((copy, name)))
        }
    };
    let Some(upper) = missing_is_none(state.beneath(upper_rel)).map_err(upper_error)? else {
        return Ok(Summary::default());
    };
    let host = DirFd::open_no_symlinks(host_dir).map_err(host_error(host_dir))?;
    let mut walker = Walker {
        layer,
        scope,
        apply: action == Action::Apply,
        uid: overlays.uid,
        upper,
        host,
        visit,
        summary: Summary::default(),
        pending: Vec::new(),
        settled: Vec::new(),
        wrote: false,
    };
    match names {
        None => walker.dir(Path::new(""), true, false, 0),
        Some((copy, name)) => walker.seeded(copy, name),
    }
    Ok(walker.summary)
}

fn missing_is_none<T>(result: io::Result<T>) -> io::Result<Option<T>> {
    match result {
        Ok(value) => Ok(Some(value)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

pub(super) struct Walker<'a> {
    pub(super) layer: &'a Layer,
    pub(super) scope: &'a Scope,
    pub(super) apply: bool,
    pub(super) uid: u32,
    /// The upper root (a file layer: the directory of the copy).
    pub(super) upper: DirFd,
    /// The host root (a file layer: the host file's directory).
    pub(super) host: DirFd,
    pub(super) visit: &'a mut dyn FnMut(&Change),
    pub(super) summary: Summary,
    /// Directories new inside that lie on the way to the scope's path (with their modes): made
    /// on the host, and reported, only once something below them is.
    pub(super) pending: Vec<(PathBuf, u32)>,
    /// Entries of the directory being walked that the host now has: removed from the upper
    /// once the host's writes are on disk ([`Walker::settle`]).
    pub(super) settled: Vec<OsString>,
    /// Whether the host was written since the last [`Walker::settle`].
    pub(super) wrote: bool,
}

/// A subdirectory to walk once its parent's own entries are done.
pub(super) struct Subdir {
    pub(super) name: OsString,
    /// Whether the host has it as a directory (after this walk made it, applying).
    pub(super) on_host: bool,
    pub(super) opaque: bool,
    /// New inside and on the way to the scope's path: its mode, for when it is made.
    pub(super) pending: Option<u32>,
    pub(super) cover: Cover,
}

impl Walker<'_> {
    pub(super) fn host_path(&self, rel: &Path) -> PathBuf {
        if rel.as_os_str().is_empty() {
            self.layer.host.clone()
        } else {
            self.layer.host.join(rel)
        }
    }

    pub(super) fn inside_path(&self, rel: &Path) -> PathBuf {
        if rel.as_os_str().is_empty() {
            self.layer.inside.clone()
        } else {
            self.layer.inside.join(rel)
        }
    }

    pub(super) fn cover(&self, rel: &Path) -> Cover {
        self.scope
            .covers(&self.host_path(rel), &self.inside_path(rel))
    }

    pub(super) fn report(
        &mut self,
        rel: &Path,
        kind: ChangeKind,
        entry: EntryType,
        refused: Option<Refusal>,
    ) {
        if !self.apply && refused.is_none() {
            // Looking only: the directories on the way show up before the first change below.
            for (dir, _) in std::mem::take(&mut self.pending) {
                self.report(&dir, ChangeKind::Added, EntryType::Dir, None);
            }
        }
        self.summary.changes += 1;
        self.summary.refused += usize::from(refused.is_some());
        let change = Change {
            kind,
            entry,
            host: self.host_path(rel),
            inside: self.inside_path(rel),
            refused,
        };
        (self.visit)(&change);
    }

    pub(super) fn failed(
        &mut self,
        rel: &Path,
        entry: EntryType,
        action: &'static str,
        e: io::Error,
    ) {
        let refusal = failure(action, e);
        self.report(rel, ChangeKind::Modified, entry, Some(refusal));
    }

    /// The host directory at `rel`, made first (with the pending ones above it) when it is new.
    pub(super) fn host_dir<'h>(
        &mut self,
        rel: &Path,
        host: &'h mut Option<DirFd>,
    ) -> io::Result<&'h DirFd> {
        if host.is_none() {
            while let Some((dir, mode)) = self.pending.first().cloned() {
                let (Some(parent), Some(name)) = (dir.parent(), dir.file_name()) else {
                    return Err(io::Error::from(io::ErrorKind::InvalidInput));
                };
                self.host.beneath(parent)?.mkdir(name, mode)?;
                self.wrote = true;
                self.pending.remove(0);
                self.report(&dir, ChangeKind::Added, EntryType::Dir, None);
            }
            *host = Some(self.host.beneath(rel)?);
        }
        host.as_ref()
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))
    }

    /// Makes what the host was given durable (one `syncfs`), then removes the settled entries
    /// of the directory `rel` from the upper; if the flush fails the upper keeps them.
    pub(super) fn settle(&mut self, rel: &Path) {
        if std::mem::take(&mut self.wrote)
            && let Err(e) = self.host.sync_fs()
        {
            self.settled.clear();
            let action = "flush the host's file system (the overlay keeps its copies)";
            return self.failed(rel, EntryType::Dir, action, e);
        }
        let settled = std::mem::take(&mut self.settled);
        if settled.is_empty() {
            return;
        }
        let upper = match self.upper.beneath(rel) {
            Ok(upper) => upper,
            Err(e) => return self.failed(rel, EntryType::Dir, "reopen the overlay's directory", e),
        };
        for name in settled {
            if let Err(e) = upper.unlink(&name) {
                let action = "remove it from the overlay (the host has it now)";
                self.failed(&rel.join(&name), EntryType::File, action, e);
            }
        }
    }

    /// The upper dir at `rel` against the host's (`on_host`: the host has it as a directory;
    /// `opaque`: it replaced the host's, so host entries missing from it were deleted inside).
    fn dir(&mut self, rel: &Path, on_host: bool, opaque: bool, depth: usize) {
        let opened = self
            .upper
            .beneath(rel)
            .and_then(|upper| Ok((upper.names()?, upper)));
        let (names, upper) = match opened {
            Ok(opened) => opened,
            Err(e) => return self.failed(rel, EntryType::Dir, "read the overlay's directory", e),
        };
        let mut host = None;
        if on_host {
            match self.host.beneath(rel) {
                Ok(dir) => host = Some(dir),
                Err(e) => return self.failed(rel, EntryType::Dir, "open the host's directory", e),
            }
        }
        let mut subdirs = Vec::new();
        for name in &names {
            let cover = self.cover(&rel.join(name));
            if cover != Cover::No
                && let Some(sub) = self.entry(&upper, &mut host, rel, name, cover)
            {
                subdirs.push(sub);
            }
        }
        if opaque && let Some(host) = &host {
            self.deleted_in_opaque(host, rel, &names);
        }
        drop((upper, host));
        self.settle(rel);
        for sub in subdirs {
            let path = rel.join(&sub.name);
            if depth + 1 >= fsops::MAX_DEPTH {
                self.report(
                    &path,
                    ChangeKind::Modified,
                    EntryType::Dir,
                    Some(Refusal::TooDeep),
                );
                continue;
            }
            if let Some(mode) = sub.pending {
                self.pending.push((path.clone(), mode));
            }
            self.dir(&path, sub.on_host, sub.opaque, depth + 1);
            let made = match self.pending.last() {
                Some((last, _)) if *last == path => {
                    self.pending.pop();
                    false
                }
                _ => sub.pending.is_some(),
            };
            // Emptied: the overlay shows the host's directory again. Only a directory the scope
            // took whole (an opaque one would otherwise hide what the host keeps) or one made.
            if self.apply
                && (sub.cover == Cover::All || made)
                && let Ok(upper) = self.upper.beneath(rel)
            {
                let _ = upper.rmdir(&sub.name);
            }
        }
    }

    /// In a directory that replaced the host's inside: the host's entries it does not have.
    fn deleted_in_opaque(&mut self, host: &DirFd, rel: &Path, upper_names: &[OsString]) {
        let names = match host.names() {
            Ok(names) => names,
            Err(e) => return self.failed(rel, EntryType::Dir, "read the host's directory", e),
        };
        for name in names {
            let path = rel.join(&name);
            if upper_names.binary_search(&name).is_ok() || self.cover(&path) != Cover::All {
                continue;
            }
            let Ok(Some(found)) = host.stat(&name) else {
                continue;
            };
            let mut refused =
                (found.uid != self.uid).then_some(Refusal::HostNotYours { uid: found.uid });
            if self.apply && refused.is_none() {
                self.wrote = true;
                refused = host
                    .remove_tree(&name, self.uid, 0)
                    .err()
                    .map(|(sub, e)| failure_at("delete", &self.host_path(rel), &sub, e));
            }
            self.report(&path, ChangeKind::Deleted, entry_type(found.kind), refused);
        }
    }
}

/// Whether `a` in `da` and `b` in `db` are regular files with the same bytes.
pub(super) fn same_file(da: &DirFd, db: &DirFd, a: &OsStr, b: &OsStr) -> bool {
    match (da.open_file(a), db.open_file(b)) {
        (Ok((mut x, mx)), Ok((mut y, my))) => {
            mx.size == my.size && fsops::same_content(&mut x, &mut y).unwrap_or(false)
        }
        _ => false,
    }
}

pub(super) fn added_or_modified(on_host: Option<Meta>) -> ChangeKind {
    if on_host.is_some() {
        ChangeKind::Modified
    } else {
        ChangeKind::Added
    }
}

pub(super) fn entry_type(kind: Type) -> EntryType {
    match kind {
        Type::File => EntryType::File,
        Type::Dir => EntryType::Dir,
        Type::Symlink => EntryType::Symlink,
        Type::Whiteout | Type::Fifo | Type::Socket | Type::Device => EntryType::Special,
    }
}

pub(super) fn special_name(kind: Type) -> &'static str {
    match kind {
        Type::Fifo => "FIFO",
        Type::Socket => "socket",
        Type::Symlink => "symlink",
        Type::Dir => "directory",
        Type::File | Type::Whiteout | Type::Device => "device node",
    }
}

pub(super) fn failure(action: &'static str, e: io::Error) -> Refusal {
    Refusal::Failed {
        action,
        error: e.to_string(),
    }
}

/// A failure inside a tree being removed: the entry that stopped it, by its host path.
pub(super) fn failure_at(action: &'static str, dir: &Path, sub: &Path, e: io::Error) -> Refusal {
    Refusal::Failed {
        action,
        error: format!("{}: {e}", dir.join(sub).display()),
    }
}
