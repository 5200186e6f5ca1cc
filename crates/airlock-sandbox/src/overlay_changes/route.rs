//! The way to a layer's host path: a symlink on it that the sandbox could have planted turns an
//! overlay of `~/code/app/data` into one of `~/.ssh`, so such a link refuses the layer.
//!
//! The spec's lower dirs are canonical (planning resolved them), and the walk opens them with no
//! symlink on the way; what remains is a link that was already there when the spec was planned:
//! one in a tree the sandbox writes (the project, the state root, a `readwrite` mount), left by
//! an earlier session, that planning resolved through.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};

/// More links than the kernel follows in one lookup (`ELOOP`): the path does not resolve.
const MAX_LINKS: usize = 40;

/// The first symlink on the way to the absolute `path` (resolved one component at a time, as
/// the kernel does) that lies in one of the `writable` trees; `None` when there is none, or the
/// path stops resolving (what does not exist cannot be written through).
pub(super) fn planted_link(path: &Path, writable: &[PathBuf]) -> Option<PathBuf> {
    let mut todo: VecDeque<OsString> = names(path).into();
    let mut at = PathBuf::from("/");
    let mut links = 0;
    while let Some(name) = todo.pop_front() {
        if name == ".." {
            at.pop();
            continue;
        }
        let next = at.join(&name);
        let meta = std::fs::symlink_metadata(&next).ok()?;
        if !meta.file_type().is_symlink() {
            at = next;
            continue;
        }
        if writable.iter().any(|w| next.starts_with(w)) {
            return Some(next);
        }
        links += 1;
        let to = std::fs::read_link(&next)
            .ok()
            .filter(|_| links <= MAX_LINKS)?;
        if to.is_absolute() {
            at = PathBuf::from("/");
        }
        for name in names(&to).into_iter().rev() {
            todo.push_front(name);
        }
    }
    None
}

/// The components of `path` that name something (`..` kept, `/` and `.` dropped).
fn names(path: &Path) -> Vec<OsString> {
    path.components()
        .filter_map(|c| match c {
            Component::Normal(name) => Some(name.to_owned()),
            Component::ParentDir => Some("..".into()),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => None,
        })
        .collect()
}
