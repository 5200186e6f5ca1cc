//! The submodules' `.git` entries, mounted read-only so the sandbox cannot point them elsewhere.
//!
//! A submodule's `.git` is a file (`gitdir: ../.git/modules/sub`) or, in old layouts, a
//! directory, inside the project: ordinary project content. Rewritten to `gitdir:
//! ../.cache/evil`, it makes the host's next `git status` in the superproject run whatever that
//! git dir's config says (`core.fsmonitor`). The paths come from `.gitmodules` (nested ones from
//! each submodule's own), read without git; a path that is absolute, climbs out with `..` or
//! passes through a symlink is not followed. Submodules that are not checked out have no `.git`
//! yet; one created there inside is caught by [`super::quarantine`] at exit.

use std::os::fd::{AsFd as _, AsRawFd as _};
use std::path::{Component, Path, PathBuf};

use airlock_config::hostfs;

/// At most this many submodule links are mounted, and nesting is followed this deep.
const MAX_LINKS: usize = 256;
const MAX_DEPTH: usize = 8;

/// A submodule's `.git`, as found at launch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    pub path: PathBuf,
    pub is_dir: bool,
}

/// Every checked-out submodule's `.git` under `project`.
pub fn links(project: &Path) -> Vec<Link> {
    let mut found = Vec::new();
    let Ok(root) = std::fs::File::open(project) else {
        return found;
    };
    let mut pending = vec![(PathBuf::new(), 0)];
    while let Some((dir, depth)) = pending.pop() {
        let gitmodules = project.join(&dir).join(".gitmodules");
        let Ok(bytes) = hostfs::read_regular(&gitmodules, 1 << 20) else {
            continue;
        };
        for rel in paths(&String::from_utf8_lossy(&bytes)) {
            if found.len() >= MAX_LINKS {
                return found;
            }
            let rel = dir.join(rel);
            let Some(is_dir) = dot_git_beneath(root.as_fd(), &rel) else {
                continue;
            };
            found.push(Link {
                path: project.join(&rel).join(".git"),
                is_dir,
            });
            if depth + 1 < MAX_DEPTH {
                pending.push((rel, depth + 1));
            }
        }
    }
    found
}

/// `path = …` values of a `.gitmodules` text that are plain relative paths inside the tree.
fn paths(text: &str) -> Vec<PathBuf> {
    text.lines()
        .filter_map(|line| {
            let (key, value) = line.split_once('=')?;
            key.trim()
                .eq_ignore_ascii_case("path")
                .then(|| value.trim().trim_matches('"'))
        })
        .filter(|value| !value.is_empty() && !value.contains('\\'))
        .map(PathBuf::from)
        .filter(|path| path.components().all(|c| matches!(c, Component::Normal(_))))
        .collect()
}

/// Whether `<rel>/.git` is a directory (`Some(true)`) or a regular file (`Some(false)`), reached
/// from `root` through no symlink; `None` for anything else.
fn dot_git_beneath(root: std::os::fd::BorrowedFd<'_>, rel: &Path) -> Option<bool> {
    let dir = hostfs::open_beneath(root, rel, libc::O_PATH | libc::O_DIRECTORY).ok()?;
    // SAFETY: a zeroed stat is a valid out-buffer; valid fd and C string.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    let rc = unsafe {
        libc::fstatat(
            dir.as_raw_fd(),
            c".git".as_ptr(),
            &mut st,
            libc::AT_SYMLINK_NOFOLLOW,
        )
    };
    if rc != 0 {
        return None;
    }
    match st.st_mode & libc::S_IFMT {
        libc::S_IFDIR => Some(true),
        libc::S_IFREG => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_relative_paths_are_taken() {
        let text = "[submodule \"a\"]\n\tpath = libs/a\n\turl = ../a.git\n\
                    [submodule \"b\"]\n\tpath = ../outside\n[submodule \"c\"]\n\tpath = /etc\n\
                    [submodule \"d\"]\n\tPath = \"d\"\n";
        assert_eq!(
            paths(text),
            vec![PathBuf::from("libs/a"), PathBuf::from("d")]
        );
    }

    #[test]
    fn links_are_found_nested_and_symlinks_not_followed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path();
        std::fs::write(p.join(".gitmodules"), "path = a\npath = l\npath = none\n").expect("gm");
        std::fs::create_dir_all(p.join("a/b")).expect("a/b");
        std::fs::write(p.join("a/.git"), "gitdir: ../.git/modules/a\n").expect("a/.git");
        std::fs::write(p.join("a/.gitmodules"), "path = b\n").expect("nested gm");
        std::fs::create_dir(p.join("a/b/.git")).expect("b/.git");
        std::fs::create_dir_all(p.join("elsewhere/.git")).expect("elsewhere");
        std::os::unix::fs::symlink("elsewhere", p.join("l")).expect("l");
        std::fs::create_dir(p.join("none")).expect("none");
        let found = links(p);
        assert_eq!(
            found,
            vec![
                Link {
                    path: p.join("a/.git"),
                    is_dir: false
                },
                Link {
                    path: p.join("a/b/.git"),
                    is_dir: true
                },
            ]
        );
    }
}
