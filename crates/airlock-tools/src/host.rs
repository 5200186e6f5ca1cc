//! The host as the catalog sees it: a home, an environment (with `PATH`), and the file system
//! under them. Tests point it at a fixture home and a fixture `PATH`.

use std::cell::{OnceCell, RefCell};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::ffi::{CString, OsString};
use std::fs;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Serialize;

/// A home directory and an environment to detect tools in.
#[derive(Debug, Clone)]
pub struct HostView {
    /// The host home (canonical when it exists).
    pub home: PathBuf,
    /// The host environment: `PATH`, `SHELL`, `XDG_*_HOME`, `CODEX_HOME`, ...
    pub env: BTreeMap<String, String>,
    /// `PATH` lookups already made: one launch detects each tool several times (plan, shell init),
    /// and every miss costs one `stat` per `PATH` entry.
    found: RefCell<BTreeMap<String, Option<PathBuf>>>,
    /// [`HostView::state`]s already read: each tool's config dirs are looked at by the plan, the
    /// mounts and the shell init of one launch, up to four times each, two `stat`s and an open
    /// per look.
    /// Keyed by the path's bytes: a map ordered by `Path` compares component by component, which
    /// cost as much as the `stat`s themselves.
    states: RefCell<HashMap<OsString, PathState>>,
    /// The `PATH` directories, each listed once and opened once: a lookup in one is then one
    /// `fstatat` of the name, not a walk of the whole path (a launch makes ~300, mostly misses).
    path_dirs: OnceCell<Arc<[PathDir]>>,
    /// Which of them [`HostView::find_host_program`] searches, for the project it was asked for.
    trusted: RefCell<Option<(PathBuf, Vec<bool>)>>,
}

/// A `PATH` entry as written, and the directory it named when first looked in (`O_PATH`), if any.
#[derive(Debug)]
struct PathDir {
    entry: String,
    dir: Option<OwnedFd>,
    /// The directory's names, when it is small enough to be listed ([`LISTED_DIR_BYTES`]).
    names: Option<HashSet<Vec<u8>>>,
    /// The directory's device and inode, when it could be opened.
    id: Option<(u64, u64)>,
    /// The index of an earlier entry that is the same directory (`/bin` and `/usr/bin` on a
    /// merged-/usr system): what that one lacks, this one lacks too, so it is not looked in again.
    same_as: Option<usize>,
}

/// A `PATH` directory this small (`st_size`: one or two ext4 blocks, ~400 tmpfs entries) is listed
/// once, and a name the listing lacks is not looked up: a launch looks up ~35 names in every
/// entry, mostly misses, and one `getdents` of a small directory costs what a few `fstatat`s
/// do. A larger one (`/usr/bin`) is looked in name by name.
const LISTED_DIR_BYTES: i64 = 8192;

impl PathDir {
    fn open(entry: &str) -> PathDir {
        // O_PATH: a directory that may be searched but not listed still counts.
        let dir = fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_PATH | libc::O_DIRECTORY)
            .open(entry)
            .ok()
            .map(OwnedFd::from);
        let st = dir
            .as_ref()
            .and_then(|dir| nix::sys::stat::fstat(dir.as_raw_fd()).ok());
        let names = dir.as_ref().zip(st.as_ref()).and_then(list_small);
        PathDir {
            entry: entry.to_owned(),
            dir,
            names,
            id: st.map(|st| (st.st_dev, st.st_ino)),
            same_as: None,
        }
    }

    /// `entry/name` when it is an executable regular file (symlinks followed, as `execve` does).
    fn program(&self, name: &CString) -> Option<PathBuf> {
        let dir = self.dir.as_ref()?;
        if let Some(names) = &self.names
            && !names.contains(name.as_bytes())
        {
            return None;
        }
        // SAFETY: stat is plain data; fstatat writes it and reads the C string.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        let found = unsafe { libc::fstatat(dir.as_raw_fd(), name.as_ptr(), &mut st, 0) } == 0
            && st.st_mode & libc::S_IFMT == libc::S_IFREG
            && st.st_mode & 0o111 != 0;
        found.then(|| Path::new(&self.entry).join(name.to_str().unwrap_or_default()))
    }
}

/// The names in `dir` when its size is at most [`LISTED_DIR_BYTES`] and it can be listed; else
/// `None` (each name is then looked up).
fn list_small((dir, st): (&OwnedFd, &libc::stat)) -> Option<HashSet<Vec<u8>>> {
    use nix::fcntl::OFlag;
    if st.st_size > LISTED_DIR_BYTES {
        return None;
    }
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
    let mut listing = nix::dir::Dir::openat(
        Some(dir.as_raw_fd()),
        ".",
        flags,
        nix::sys::stat::Mode::empty(),
    )
    .ok()?;
    listing
        .iter()
        .map(|entry| entry.map(|e| e.file_name().to_bytes().to_vec()))
        .collect::<Result<_, _>>()
        .ok()
}

impl PartialEq for HostView {
    fn eq(&self, other: &Self) -> bool {
        self.home == other.home && self.env == other.env
    }
}

impl Eq for HostView {}

/// What is at a tool path, symlinks followed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PathState {
    Dir,
    File,
    Missing,
    /// A symlink whose target does not exist.
    Dangling,
    /// Exists but cannot be read (or, for a directory, listed).
    Unreadable,
    /// A socket, fifo or device.
    Other,
}

/// `name` for a lookup in a `PATH` directory: one path component, or nothing to find.
fn program_name(name: &str) -> Option<CString> {
    (!name.is_empty() && !name.contains('/') && name != "." && name != "..")
        .then(|| CString::new(name).ok())
        .flatten()
}

/// Why a `PATH` entry is not searched for host programs, if it is not.
fn untrusted_entry(dir: &str, untrusted: &[(PathBuf, &'static str)]) -> Option<&'static str> {
    if dir.is_empty() || !dir.starts_with('/') {
        return Some("not an absolute path");
    }
    // A symlinked entry counts where it leads; one that does not resolve is searched as written.
    let inside = |path: &Path| {
        untrusted.iter().find_map(|(root, why)| {
            let shared_but_private = *why == SHARED_TMP && private_below(root, path);
            (path.starts_with(root) && !shared_but_private).then_some(*why)
        })
    };
    inside(Path::new(dir)).or_else(|| {
        airlock_config::canonicalize(dir)
            .ok()
            .and_then(|real| inside(&real))
    })
}

const SHARED_TMP: &str = "in a shared temp directory";

/// Whether every directory from below `root` down to `path` is owned by this user (or root) and
/// writable by no one else: a checkout under /tmp that is yours, which no other user (and no
/// sandbox: its /tmp is its own) can plant a program in.
fn private_below(root: &Path, path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    let Ok(rel) = path.strip_prefix(root) else {
        return false;
    };
    if rel.as_os_str().is_empty() {
        return false;
    }
    // SAFETY: geteuid cannot fail.
    let me = unsafe { libc::geteuid() };
    let mut dir = root.to_path_buf();
    rel.components().all(|part| {
        dir.push(part);
        fs::symlink_metadata(&dir)
            .is_ok_and(|m| m.is_dir() && (m.uid() == me || m.uid() == 0) && m.mode() & 0o022 == 0)
    })
}

impl PathState {
    /// Whether the path can be mounted.
    pub fn is_usable(self) -> bool {
        matches!(self, PathState::Dir | PathState::File)
    }
}

impl HostView {
    /// The view of this process: `$HOME` and the whole environment.
    pub fn from_env(home: &Path) -> HostView {
        HostView::new(home, std::env::vars().collect())
    }

    /// A view of `home` with the given environment.
    pub fn new(home: &Path, env: BTreeMap<String, String>) -> HostView {
        let home = airlock_config::canonicalize(home).unwrap_or_else(|_| home.to_path_buf());
        HostView {
            home,
            env,
            found: RefCell::default(),
            states: RefCell::default(),
            path_dirs: OnceCell::new(),
            trusted: RefCell::default(),
        }
    }

    /// The `PATH` directories, opened on first use.
    fn path_dirs(&self) -> &[PathDir] {
        self.path_dirs.get_or_init(|| {
            let mut seen = BTreeSet::new();
            // A directory listed twice (a profile that prepends `~/.cargo/bin` again) is
            // searched once.
            let mut dirs: Vec<PathDir> = self
                .var("PATH")
                .unwrap_or("")
                .split(':')
                .filter(|entry| !entry.is_empty() && seen.insert(*entry))
                .map(PathDir::open)
                .collect();
            let mut first = HashMap::new();
            for (i, dir) in dirs.iter_mut().enumerate() {
                if let Some(id) = dir.id {
                    dir.same_as = first.get(&id).copied();
                    first.entry(id).or_insert(i);
                }
            }
            dirs.into()
        })
    }

    /// A variable that is set and not empty.
    pub fn var(&self, name: &str) -> Option<&str> {
        self.env
            .get(name)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }

    /// A variable holding an absolute path (relative values are ignored, as XDG says).
    pub fn path_var(&self, name: &str) -> Option<PathBuf> {
        self.var(name)
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
    }

    /// `home/<rel>`.
    pub fn home_path(&self, rel: &str) -> PathBuf {
        self.home.join(rel)
    }

    /// The host's `$XDG_CONFIG_HOME` (default `~/.config`).
    pub fn xdg_config(&self) -> PathBuf {
        self.path_var("XDG_CONFIG_HOME")
            .unwrap_or_else(|| self.home.join(".config"))
    }

    /// The host's `$XDG_DATA_HOME` (default `~/.local/share`).
    pub fn xdg_data(&self) -> PathBuf {
        self.path_var("XDG_DATA_HOME")
            .unwrap_or_else(|| self.home.join(".local/share"))
    }

    /// The host's `$XDG_STATE_HOME` (default `~/.local/state`).
    pub fn xdg_state(&self) -> PathBuf {
        self.path_var("XDG_STATE_HOME")
            .unwrap_or_else(|| self.home.join(".local/state"))
    }

    /// The host's `$XDG_CACHE_HOME` (default `~/.cache`).
    pub fn xdg_cache(&self) -> PathBuf {
        self.path_var("XDG_CACHE_HOME")
            .unwrap_or_else(|| self.home.join(".cache"))
    }

    /// The first executable regular file called `name` in the directories of `PATH`.
    pub fn find_binary(&self, name: &str) -> Option<PathBuf> {
        if let Some(found) = self.found.borrow().get(name) {
            return found.clone();
        }
        let found = self.search_path(name);
        self.found
            .borrow_mut()
            .insert(name.to_owned(), found.clone());
        found
    }

    fn search_path(&self, name: &str) -> Option<PathBuf> {
        let name = program_name(name)?;
        self.path_dirs()
            .iter()
            .filter(|d| d.same_as.is_none())
            .find_map(|d| d.program(&name))
    }

    /// A program airlock itself runs on the host (git, to read your identity): the first
    /// executable `name` in a `PATH` directory the sandbox cannot write. Entries that are relative
    /// or lie in the project, the sandboxes' state or a shared temp dir are skipped (a
    /// `node_modules/.bin` or direnv `PATH_add bin` entry would otherwise let the sandbox plant
    /// the `git` that airlock starts at the next launch).
    pub fn find_host_program(&self, name: &str, project: &Path) -> Option<PathBuf> {
        let name = program_name(name)?;
        let dirs = self.path_dirs();
        let mut trusted = self.trusted.borrow_mut();
        let trusted = match &*trusted {
            Some((for_project, trusted)) if for_project == project => trusted,
            _ => {
                let untrusted = self.untrusted_dirs(project);
                let list = dirs
                    .iter()
                    .map(|d| untrusted_entry(&d.entry, &untrusted).is_none())
                    .collect();
                &trusted.insert((project.to_path_buf(), list)).1
            }
        };
        // An entry that is an earlier trusted one again is not looked in twice; one that is an
        // untrusted entry's directory is, since that one was skipped.
        dirs.iter()
            .zip(trusted)
            .filter(|(d, ok)| **ok && !d.same_as.is_some_and(|i| trusted[i]))
            .find_map(|(d, _)| d.program(&name))
    }

    /// The `PATH` entries [`HostView::find_host_program`] skips, each with the reason.
    pub fn skipped_path_entries(&self, project: &Path) -> Vec<(String, &'static str)> {
        let untrusted = self.untrusted_dirs(project);
        self.var("PATH")
            .unwrap_or("")
            .split(':')
            .filter_map(|dir| untrusted_entry(dir, &untrusted).map(|why| (dir.to_owned(), why)))
            .collect()
    }

    /// Directories a sandbox can write, as the host sees them: each as written and resolved.
    fn untrusted_dirs(&self, project: &Path) -> Vec<(PathBuf, &'static str)> {
        let mut dirs = vec![
            (project.to_path_buf(), "inside the project"),
            (
                self.xdg_data().join("airlock"),
                "inside airlock's sandbox state",
            ),
        ];
        for tmp in ["/tmp", "/var/tmp", "/dev/shm"] {
            dirs.push((PathBuf::from(tmp), SHARED_TMP));
        }
        // revdiff's shared temp directories: written by sandboxes, seen by the host.
        dirs.push((self.xdg_cache().join("airlock/tmp"), SHARED_TMP));
        let resolved: Vec<_> = dirs
            .iter()
            .filter_map(|(dir, why)| {
                let real = airlock_config::canonicalize(dir).ok()?;
                (&real != dir).then_some((real, *why))
            })
            .collect();
        dirs.extend(resolved);
        dirs
    }

    /// What is at `path`, symlinks followed; a dangling symlink and an unreadable path are told apart
    /// from a missing one, so `check` can report them and `plan` can skip them with a warning.
    pub fn state(&self, path: &Path) -> PathState {
        if let Some(state) = self.states.borrow().get(path.as_os_str()) {
            return *state;
        }
        let state = Self::read_state(path);
        self.states
            .borrow_mut()
            .insert(path.as_os_str().to_owned(), state);
        state
    }

    /// Creates the directory `path` on the host, so later [`HostView::state`]s see it.
    pub fn create_dir(&self, path: &Path) -> std::io::Result<()> {
        self.states.borrow_mut().remove(path.as_os_str());
        fs::create_dir(path)
    }

    /// What is at `path`, read from the file system (the uncached [`HostView::state`]).
    fn read_state(path: &Path) -> PathState {
        let Ok(link) = fs::symlink_metadata(path) else {
            return PathState::Missing;
        };
        let meta = match fs::metadata(path) {
            Ok(meta) => meta,
            Err(_) if link.file_type().is_symlink() => return PathState::Dangling,
            Err(_) => return PathState::Unreadable,
        };
        if meta.is_dir() {
            if fs::read_dir(path).is_err() {
                return PathState::Unreadable;
            }
            PathState::Dir
        } else if meta.is_file() {
            if fs::File::open(path).is_err() {
                return PathState::Unreadable;
            }
            PathState::File
        } else {
            PathState::Other
        }
    }

    /// `path` with the home replaced by `~`, for display.
    pub fn tilde(&self, path: &Path) -> String {
        match path.strip_prefix(&self.home) {
            Ok(rest) if rest.as_os_str().is_empty() => "~".to_owned(),
            Ok(rest) => format!("~/{}", rest.display()),
            Err(_) => path.display().to_string(),
        }
    }
}

#[cfg(test)]
mod path_safety_tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    #[test]
    fn a_private_dir_under_tmp_is_searched_a_shared_one_not() {
        let dir = tempfile::Builder::new()
            .prefix("airlock-path-")
            .tempdir_in("/tmp")
            .expect("tempdir");
        let bin = dir.path().join("bin");
        fs::create_dir(&bin).expect("bin");
        fs::set_permissions(&bin, fs::Permissions::from_mode(0o755)).expect("chmod");
        let project = dir.path().join("project");
        let view = HostView::new(dir.path(), BTreeMap::new());
        let untrusted = view.untrusted_dirs(&project);
        let entry = bin.to_str().expect("utf-8");
        assert_eq!(untrusted_entry(entry, &untrusted), None, "yours, 0755");
        fs::set_permissions(&bin, fs::Permissions::from_mode(0o777)).expect("chmod");
        assert_eq!(
            untrusted_entry(entry, &untrusted),
            Some(SHARED_TMP),
            "world-writable"
        );
        assert_eq!(
            untrusted_entry("/tmp", &untrusted),
            Some(SHARED_TMP),
            "/tmp itself"
        );
        assert_eq!(
            untrusted_entry("bin", &untrusted),
            Some("not an absolute path")
        );
        let inside = project.join("node_modules/.bin");
        fs::create_dir_all(&inside).expect("inside");
        assert_eq!(
            untrusted_entry(inside.to_str().expect("utf-8"), &untrusted),
            Some("inside the project")
        );
    }
}

#[cfg(test)]
mod tests;
