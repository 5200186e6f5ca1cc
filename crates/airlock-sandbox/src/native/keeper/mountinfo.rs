//! Where the masks are now, read from the mount table: a mask moves with its file's parent, so
//! after a directory moved only the kernel knows.

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};

use crate::hide::{self, HiddenPath};

/// The masks under `root` in a mountinfo text: clones of the empty file (mounts of the same
/// filesystem and root as the mount at [`hide::EMPTY`]: a tmpfs's `/empty` in native, a host
/// file a container engine bound; a tmpfs's `/empty` when the file is not a mount itself, as
/// under bwrap) and the keeper's empty directories (source [`hide::HIDDEN_SOURCE`]).
pub(super) fn hidden_in_mountinfo(text: &str, root: &Path) -> Vec<HiddenPath> {
    let mounts: Vec<Mount<'_>> = text.lines().filter_map(Mount::parse).collect();
    let empty = mounts
        .iter()
        .find(|m| m.point == Path::new(hide::EMPTY))
        .map(|m| (m.devno, m.fs_root));
    let mut hidden = Vec::new();
    for m in &mounts {
        let Ok(rel) = m.point.strip_prefix(root) else {
            continue;
        };
        if !hide::is_plain_relative(rel) {
            continue;
        }
        let tmpfs = m.fstype == "tmpfs";
        let dir = tmpfs && m.source.as_bytes() == hide::HIDDEN_SOURCE.to_bytes();
        let file = match empty {
            Some(empty) => empty == (m.devno, m.fs_root),
            None => tmpfs && m.fs_root == "/empty",
        };
        if dir || file {
            hidden.push(HiddenPath {
                path: rel.to_owned(),
                dir,
            });
        }
    }
    hidden.sort();
    hidden.dedup();
    hidden.truncate(hide::MAX_HIDDEN);
    hidden
}

/// One line of mountinfo, the fields the index needs.
struct Mount<'a> {
    devno: &'a str,
    fs_root: &'a str,
    point: PathBuf,
    fstype: &'a str,
    source: &'a str,
}

impl<'a> Mount<'a> {
    fn parse(line: &'a str) -> Option<Mount<'a>> {
        let (head, tail) = line.split_once(" - ")?;
        let head: Vec<&str> = head.split(' ').collect();
        let tail: Vec<&str> = tail.split(' ').collect();
        Some(Mount {
            devno: head.get(2)?,
            fs_root: head.get(3)?,
            point: PathBuf::from(OsString::from_vec(unescape(head.get(4)?))),
            fstype: tail.first()?,
            source: tail.get(1)?,
        })
    }
}

/// Undoes mountinfo's octal escapes (`\040` for a space, `\012` for a newline, ...).
fn unescape(field: &str) -> Vec<u8> {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\'
            && i + 3 < bytes.len()
            && bytes[i + 1..i + 4]
                .iter()
                .all(|b| (b'0'..=b'7').contains(b))
        {
            let v = (bytes[i + 1] - b'0') * 64 + (bytes[i + 2] - b'0') * 8 + (bytes[i + 3] - b'0');
            out.push(v);
            i += 4;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_are_found_where_they_moved() {
        let text = "\
36 35 0:40 / /work/p rw - ext4 /dev/sda1 rw
37 36 0:41 /empty /work/p/node_modules/config/.env ro - tmpfs tmpfs rw
38 36 0:42 / /work/p/secrets ro - tmpfs airlock-hidden ro
39 36 0:41 /empty /run/airlock/hidden/empty ro - tmpfs tmpfs rw
40 36 0:41 /empty /work/p/with\\040space/.env ro - tmpfs tmpfs rw
41 36 0:43 / /work/p/cache rw - tmpfs tmpfs rw
";
        let found = hidden_in_mountinfo(text, Path::new("/work/p"));
        assert_eq!(
            found,
            vec![
                HiddenPath {
                    path: "node_modules/config/.env".into(),
                    dir: false
                },
                HiddenPath {
                    path: "secrets".into(),
                    dir: true
                },
                HiddenPath {
                    path: "with space/.env".into(),
                    dir: false
                },
            ]
        );
    }

    #[test]
    fn unescape_leaves_plain_text_and_short_escapes() {
        assert_eq!(unescape("a\\040b"), b"a b");
        assert_eq!(unescape("a\\04"), b"a\\04");
        assert_eq!(unescape("plain"), b"plain");
    }

    /// In a container the empty file is a host file the engine bound: its clones are the
    /// mounts of that file, and other binds of the same filesystem are not masks.
    #[test]
    fn masks_of_an_engine_bound_empty_file_are_found() {
        let text = "\
36 35 8:1 /work/p /work/p rw - ext4 /dev/sda1 rw
37 36 8:1 /state/container/7/empty /run/airlock/hidden/empty ro - ext4 /dev/sda1 rw
38 36 8:1 /state/container/7/empty /work/p/node_modules/config/.env ro - ext4 /dev/sda1 rw
39 36 8:1 /state/git/config /work/p/.git/config ro - ext4 /dev/sda1 rw
40 36 0:41 /empty /work/p/other/.env ro - tmpfs tmpfs rw
";
        let found = hidden_in_mountinfo(text, Path::new("/work/p"));
        assert_eq!(
            found,
            vec![HiddenPath {
                path: "node_modules/config/.env".into(),
                dir: false
            }]
        );
    }

    /// Under bwrap the empty file is a plain file in the keeper's tmpfs, not a mount.
    #[test]
    fn without_a_mount_at_the_empty_file_its_tmpfs_clones_are_masks() {
        let text = "\
36 35 0:40 / /work/p rw - ext4 /dev/sda1 rw
37 36 0:41 /empty /work/p/.env ro - tmpfs tmpfs rw
38 36 0:40 /x /work/p/.git/config ro - ext4 /dev/sda1 rw
";
        let found = hidden_in_mountinfo(text, Path::new("/work/p"));
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].path, Path::new(".env"));
    }
}
