//! Where the masks are now, read from the mount table: a mask moves with its file's parent, so
//! after a directory moved only the kernel knows.

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};

use crate::hide::{self, HiddenPath};

/// The masks under `root` in a mountinfo text: clones of the empty file (root `/empty` on a tmpfs)
/// and the keeper's empty directories (source [`hide::HIDDEN_SOURCE`]).
pub(super) fn hidden_in_mountinfo(text: &str, root: &Path) -> Vec<HiddenPath> {
    let mut hidden = Vec::new();
    for line in text.lines() {
        let Some((head, tail)) = line.split_once(" - ") else {
            continue;
        };
        let head: Vec<&str> = head.split(' ').collect();
        let tail: Vec<&str> = tail.split(' ').collect();
        let (Some(fs_root), Some(point), Some(fstype), Some(source)) =
            (head.get(3), head.get(4), tail.first(), tail.get(1))
        else {
            continue;
        };
        let point = PathBuf::from(OsString::from_vec(unescape(point)));
        let Ok(rel) = point.strip_prefix(root) else {
            continue;
        };
        if !hide::is_plain_relative(rel) || *fstype != "tmpfs" {
            continue;
        }
        let dir = source.as_bytes() == hide::HIDDEN_SOURCE.to_bytes();
        if dir || *fs_root == "/empty" {
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
}
