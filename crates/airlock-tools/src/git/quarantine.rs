//! Git metadata the sandbox created or changed in the project is renamed out of git's sight when
//! the session ends, before the host's git can trust it.
//!
//! The project is writable, and git trusts whatever `.git` it finds: a repository made inside
//! (`git init`, `git init sub`, a clone) carries hooks and a config with `core.fsmonitor` that
//! the host's next `git status` there would run. A session cannot be stopped from creating one,
//! so airlock checks when it ends: a `.git` anywhere under the project (outside the repository
//! airlock mounted, which the sandbox cannot write) that was created, moved in or had its config,
//! `commondir`, hooks or link changed since the session started is renamed to
//! `.git.airlock-quarantine` (`-2`, `-3`, … when taken), with a message. So is a hook dir the
//! host's `core.hooksPath` names in the project when it did not exist at launch.
//!
//! "Since the session started" is the change time (`ctime`), which no process can set back, and
//! the birth time where the file system records one; it is compared with that of a marker file
//! made at launch, less one second for file systems with coarse timestamps. The check needs no
//! list made at launch and races nothing: after the sandbox exits, a changed time is a fact. A
//! session that dies before its check (SIGKILL, power loss) leaves its marker, and the next
//! launch of the project runs the check for it first.

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd as _, AsRawFd as _, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};

use airlock_config::hostfs::{self, Kind};

use super::fetch::entries;

/// Nothing this deep or this many directories in is searched (a message says so).
const MAX_DEPTH: usize = 256;
const MAX_DIRS: usize = 1_000_000;

/// The suffix of a quarantined name.
pub const SUFFIX: &str = ".airlock-quarantine";

/// What one check found and did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// `(original, new name)` of each quarantined path.
    pub moved: Vec<(PathBuf, PathBuf)>,
    /// Paths that should have been quarantined but could not be, with the reason.
    pub failed: Vec<(PathBuf, String)>,
    /// Set when the walk stopped at a limit.
    pub truncated: bool,
}

impl Report {
    /// One line per finding, for the user.
    pub fn messages(&self) -> Vec<String> {
        let mut lines: Vec<String> = self
            .moved
            .iter()
            .map(|(from, to)| {
                format!(
                    "quarantined {} (git metadata created or changed inside the sandbox; your git \
                     would run its hooks and config): it is now {}. Check it, then rename it back \
                     if you trust it",
                    from.display(),
                    to.display()
                )
            })
            .collect();
        for (path, why) in &self.failed {
            lines.push(format!(
                "warning: could not quarantine {} ({why}): it was written inside the sandbox; \
                 check it before you run git there",
                path.display()
            ));
        }
        if self.truncated {
            lines.push(format!(
                "warning: the project is deeper than {MAX_DEPTH} levels or has more than {MAX_DIRS} \
                 directories; git metadata beyond that was not checked"
            ));
        }
        lines
    }
}

/// The point in time a check compares against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Since {
    secs: i64,
}

impl Since {
    /// The change time of `marker`, less a second (file systems with coarse timestamps).
    pub fn of(marker: &Path) -> io::Result<Since> {
        let fd = hostfs::open_nofollow(marker, libc::O_RDONLY)?;
        let st = fstat(fd.as_fd())?;
        Ok(Since {
            secs: st.st_ctime.min(st.st_mtime) - 1,
        })
    }

    fn covers(self, secs: i64) -> bool {
        secs >= self.secs
    }
}

/// Checks `project` for git metadata changed since `since`. `protected` are git paths airlock
/// mounted for the session (read-only or a layer): not entered, not checked. `hook_dirs` are
/// extra directories to treat like a `.git` (the host's hook dir, when it did not exist).
pub fn check(project: &Path, since: Since, protected: &[PathBuf], hook_dirs: &[PathBuf]) -> Report {
    let mut report = Report::default();
    let Ok(root) = hostfs::open_nofollow(project, libc::O_RDONLY | libc::O_DIRECTORY) else {
        return report;
    };
    let mut dirs = 0usize;
    let mut pending: Vec<(OwnedFd, PathBuf, usize)> = vec![(root, project.to_path_buf(), 0)];
    while let Some((dir, path, depth)) = pending.pop() {
        dirs += 1;
        if dirs > MAX_DIRS {
            report.truncated = true;
            break;
        }
        for (name, kind) in entries(dir.as_fd()) {
            let child = path.join(&name);
            if name.ends_with(SUFFIX) || name.contains(&format!("{SUFFIX}-")) {
                continue;
            }
            let is_git = name == ".git" || hook_dirs.contains(&child);
            if is_git {
                if !protected.contains(&child) && changed(dir.as_fd(), &name, kind, since) {
                    quarantine(dir.as_fd(), &name, &child, &mut report);
                }
                continue;
            }
            if kind != Kind::Dir {
                continue;
            }
            if depth + 1 >= MAX_DEPTH {
                report.truncated = true;
                continue;
            }
            if let Ok(fd) = hostfs::open_beneath(
                dir.as_fd(),
                Path::new(&name),
                libc::O_RDONLY | libc::O_DIRECTORY,
            ) {
                pending.push((fd, child, depth + 1));
            }
        }
    }
    report
}

/// Whether the `.git` entry `name` in `dir` was created, moved in or had what git trusts in it
/// changed since `since`.
fn changed(dir: BorrowedFd<'_>, name: &str, kind: Kind, since: Since) -> bool {
    let Ok(entry) = statx(dir, name) else {
        return true;
    };
    if entry.born.is_some_and(|b| since.covers(b)) {
        return true;
    }
    if kind != Kind::Dir {
        // A file (a worktree or submodule link), symlink or special: its ctime changes with its
        // content and when it is renamed.
        return since.covers(entry.ctime);
    }
    // A directory's own ctime changes with every `index.lock`; a moved-in one also changes its
    // parent's, and without a birth time a new one cannot be told from an old one.
    let parent = statx(dir, ".").map(|p| p.ctime).unwrap_or(i64::MAX);
    if since.covers(entry.ctime) && (entry.born.is_none() || since.covers(parent)) {
        return true;
    }
    let Ok(git_dir) =
        hostfs::open_beneath(dir, Path::new(name), libc::O_RDONLY | libc::O_DIRECTORY)
    else {
        return true;
    };
    for trusted in ["config", "config.worktree", "commondir", "hooks", "info"] {
        match statx(git_dir.as_fd(), trusted) {
            Ok(st) if since.covers(st.ctime) || st.born.is_some_and(|b| since.covers(b)) => {
                return true;
            }
            _ => {}
        }
    }
    let Ok(hooks) = hostfs::open_beneath(
        git_dir.as_fd(),
        Path::new("hooks"),
        libc::O_RDONLY | libc::O_DIRECTORY,
    ) else {
        return false;
    };
    entries(hooks.as_fd())
        .iter()
        .any(|(hook, _)| statx(hooks.as_fd(), hook).map_or(true, |st| since.covers(st.ctime)))
}

/// Renames `name` in `dir` to the first free `name.airlock-quarantine[-N]`, never replacing.
fn quarantine(dir: BorrowedFd<'_>, name: &str, path: &Path, report: &mut Report) {
    let from = match CString::new(name) {
        Ok(c) => c,
        Err(_) => return,
    };
    for n in 1..=100 {
        let to_name = match n {
            1 => format!("{name}{SUFFIX}"),
            n => format!("{name}{SUFFIX}-{n}"),
        };
        let Ok(to) = CString::new(to_name.as_bytes()) else {
            return;
        };
        // SAFETY: valid fd and C strings.
        let rc = unsafe {
            libc::renameat2(
                dir.as_raw_fd(),
                from.as_ptr(),
                dir.as_raw_fd(),
                to.as_ptr(),
                libc::RENAME_NOREPLACE,
            )
        };
        if rc == 0 {
            report
                .moved
                .push((path.to_path_buf(), path.with_file_name(to_name)));
            return;
        }
        let err = io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::EEXIST) {
            report.failed.push((path.to_path_buf(), err.to_string()));
            return;
        }
    }
    report.failed.push((
        path.to_path_buf(),
        "100 quarantined copies exist already".into(),
    ));
}

struct Times {
    ctime: i64,
    born: Option<i64>,
}

fn statx(dir: BorrowedFd<'_>, name: &str) -> io::Result<Times> {
    let name = CString::new(name).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: a zeroed statx is a valid out-buffer.
    let mut st: libc::statx = unsafe { std::mem::zeroed() };
    // SAFETY: valid fd, C string and buffer.
    let rc = unsafe {
        libc::statx(
            dir.as_raw_fd(),
            name.as_ptr(),
            libc::AT_SYMLINK_NOFOLLOW,
            libc::STATX_CTIME | libc::STATX_BTIME,
            &mut st,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    let born = (st.stx_mask & libc::STATX_BTIME != 0).then_some(st.stx_btime.tv_sec);
    Ok(Times {
        ctime: st.stx_ctime.tv_sec,
        born,
    })
}

fn fstat(fd: BorrowedFd<'_>) -> io::Result<libc::stat> {
    // SAFETY: a zeroed stat is a valid out-buffer.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: valid fd and buffer.
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(st)
}

/// A session's marker: made at launch, its times are the session's start; removed after the
/// check. Held locked while the session lives, so the next launch can tell a dead one.
pub struct Marker {
    pub path: PathBuf,
    _lock: File,
}

impl Marker {
    /// Creates a fresh, empty marker in `dir`, named `<pid>.<n>-<tag>`.
    pub fn create(dir: &Path, tag: &str) -> io::Result<Marker> {
        std::fs::create_dir_all(dir)?;
        for n in 0..1000u32 {
            let path = dir.join(format!("{}.{n}-{tag}", std::process::id()));
            let file = match File::create_new(&path) {
                Ok(file) => file,
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            };
            lock(&file)?;
            return Ok(Marker { path, _lock: file });
        }
        Err(io::Error::from(io::ErrorKind::AlreadyExists))
    }

    /// The start of the session.
    pub fn since(&self) -> io::Result<Since> {
        Since::of(&self.path)
    }
}

/// Markers in `dir` that no live session holds: sessions that ended without their check.
pub fn orphaned_markers(dir: &Path) -> Vec<PathBuf> {
    let Ok(read) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    read.filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|path| {
            hostfs::open_nofollow(path, libc::O_RDONLY)
                .map(File::from)
                .is_ok_and(|file| lock(&file).is_ok())
        })
        .collect()
}

/// An exclusive lock, without waiting.
fn lock(file: &File) -> io::Result<()> {
    // SAFETY: valid fd.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn long_ago() -> Since {
        Since { secs: 0 }
    }

    fn future() -> Since {
        Since { secs: i64::MAX / 2 }
    }

    #[test]
    fn new_git_metadata_is_renamed_and_old_left_alone() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path();
        std::fs::create_dir_all(p.join("a/b/.git/hooks")).expect("nested");
        std::fs::write(p.join("c.git"), "").expect("not a .git");
        std::fs::create_dir_all(p.join("top/.git")).expect("top");
        // Nothing changed since the future: nothing moves.
        assert_eq!(check(p, future(), &[], &[]), Report::default());
        let report = check(p, long_ago(), &[p.join("top/.git")], &[]);
        assert_eq!(
            report.moved,
            vec![(p.join("a/b/.git"), p.join("a/b/.git.airlock-quarantine"))]
        );
        assert!(p.join("top/.git").is_dir(), "protected");
        // A second one in the same place gets the next free name; quarantined ones are skipped.
        std::fs::write(p.join("a/b/.git"), "gitdir: /x\n").expect("again");
        let report = check(p, long_ago(), &[p.join("top/.git")], &[]);
        assert_eq!(
            report.moved,
            vec![(p.join("a/b/.git"), p.join("a/b/.git.airlock-quarantine-2"))]
        );
    }

    #[test]
    fn symlinks_are_renamed_not_followed_and_hook_dirs_checked() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path();
        let outside = tempfile::tempdir().expect("outside");
        std::fs::create_dir(outside.path().join(".git")).expect("outside git");
        std::os::unix::fs::symlink(outside.path(), p.join("link")).expect("link");
        std::os::unix::fs::symlink(outside.path().join(".git"), p.join(".git")).expect(".git link");
        std::fs::create_dir(p.join(".husky")).expect("husky");
        let report = check(p, long_ago(), &[], &[p.join(".husky")]);
        let moved: Vec<_> = report.moved.iter().map(|(from, _)| from.clone()).collect();
        assert!(moved.contains(&p.join(".git")), "{report:?}");
        assert!(moved.contains(&p.join(".husky")), "{report:?}");
        assert!(outside.path().join(".git").is_dir(), "nothing followed");
        assert_eq!(moved.len(), 2, "{report:?}");
    }

    #[test]
    fn markers_of_dead_sessions_are_found() {
        let dir = tempfile::tempdir().expect("tempdir");
        let live = Marker::create(dir.path(), "tag").expect("marker");
        assert!(orphaned_markers(dir.path()).is_empty());
        assert!(live.since().is_ok());
        let path = live.path.clone();
        drop(live);
        // Another test's spawn may hold a copy of the lock's descriptor between its fork and its
        // exec: the marker is seen dead once that copy is gone.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let mut found = orphaned_markers(dir.path());
        while found.is_empty() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
            found = orphaned_markers(dir.path());
        }
        assert_eq!(found, vec![path]);
    }
}
