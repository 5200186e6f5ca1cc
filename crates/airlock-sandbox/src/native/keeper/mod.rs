//! The hide keeper: part of the sandbox's init, for the whole session.
//!
//! A mask is a mount over one file, and the kernel drops it when the host replaces that file by a
//! rename; a scan at launch also misses what appears later. So init keeps the rules
//! ([`crate::hide`]) itself: before the workload starts it hides the last session's masks, walks
//! the project (every depth, skipping only [`crate::hide::SKIP`] names) hiding what matches and
//! putting an inotify watch on each directory; afterwards every name created or moved into a
//! watched directory is checked, and hidden the moment it matches. Init has the capabilities the
//! workload dropped, and it never follows a link: every open is beneath the project's root fd
//! with `RESOLVE_NO_SYMLINKS`, and a mask is mounted on the very file that was checked.

use std::collections::HashMap;
use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify, WatchDescriptor};

mod mask;
mod mountinfo;

use super::sys;
use crate::hide::{self, HiddenPath, HideSpec, Rules};
use mountinfo::hidden_in_mountinfo;

const WATCHED: AddWatchFlags = AddWatchFlags::IN_CREATE
    .union(AddWatchFlags::IN_MOVED_TO)
    .union(AddWatchFlags::IN_MOVED_FROM)
    .union(AddWatchFlags::IN_ONLYDIR);

/// The largest index sent to the supervisor in one message.
pub const INDEX_MESSAGE_CAP: usize = 128 * 1024;

/// How many watched directories before the user's inotify limit is looked at.
const WATCH_CHECK_AT: usize = 1024;

/// The most directories one keeper watches, whatever the user's inotify limit allows.
const MAX_WATCHES: usize = 65_536;

/// A held file bind: the project file's parent (relative), its name, and the unreplaceable source.
struct PinState {
    parent: PathBuf,
    name: OsString,
    source: OwnedFd,
    id: (u64, u64),
}

pub struct Keeper {
    /// Where this process's procfs is: `/proc`, or a relative path to the host's when the keeper
    /// runs in a container's mount namespace but not its pid namespace (`self` is not there).
    proc: PathBuf,
    root: PathBuf,
    root_fd: OwnedFd,
    rules: Rules,
    skip: Vec<OsString>,
    empty: OwnedFd,
    empty_id: (u64, u64),
    pins: Vec<PinState>,
    inotify: Inotify,
    /// Watched directories, relative to the project ("" is the project).
    dirs: HashMap<WatchDescriptor, PathBuf>,
    /// The devices of the empty directories this keeper mounted.
    hidden_dirs: Vec<u64>,
    hidden: usize,
    /// The watch limit, read once many directories are watched.
    watch_cap: Option<usize>,
    /// A warning for the supervisor to print, taken once.
    warning: Option<String>,
    warned: bool,
    /// What this keeper hid (relative paths); the index while no directory moved.
    mine: Vec<HiddenPath>,
    /// A directory moved: masks may have moved with it, and only the mount table knows where.
    moved: bool,
    /// The index the supervisor has (the last session's at first).
    sent: Vec<HiddenPath>,
}

/// Why the keeper stopped the sandbox: a path it had to hide and could not.
#[derive(Debug)]
pub struct KeepError(pub String);

fn id_of(fd: BorrowedFd<'_>) -> io::Result<(u64, u64)> {
    let st = nix::sys::stat::fstat(fd.as_raw_fd())?;
    Ok((st.st_dev, st.st_ino))
}

fn c(name: &OsStr) -> io::Result<CString> {
    CString::new(name.as_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

/// `rel` for `openat2`: "." for the project itself.
fn c_rel(rel: &Path) -> io::Result<CString> {
    if rel.as_os_str().is_empty() {
        Ok(c".".to_owned())
    } else {
        c(rel.as_os_str())
    }
}

const BENEATH: u64 = sys::RESOLVE_BENEATH | sys::RESOLVE_NO_SYMLINKS;

/// An error that means the file simply went away (or was swapped) before it could be hidden.
fn vanished(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ENOENT) | Some(libc::ENOTDIR) | Some(libc::ELOOP) | Some(libc::EXDEV)
    )
}

impl Keeper {
    /// Opens what the keeper draws from and hides everything the rules name, watching as it walks.
    /// Runs in init after the root is built, before the workload starts.
    pub fn start(spec: &HideSpec) -> Result<Keeper, KeepError> {
        Keeper::start_with_proc(spec, Path::new("/proc"))
    }

    /// [`Keeper::start`] with this process's procfs at `proc` (see the field).
    pub fn start_with_proc(spec: &HideSpec, proc: &Path) -> Result<Keeper, KeepError> {
        let fail = |what: &str, path: &Path| {
            let what = what.to_owned();
            let path = path.to_owned();
            move |e: io::Error| KeepError(format!("{what} {}: {e}", path.display()))
        };
        let rules = Rules::new(&spec.patterns).map_err(KeepError)?;
        let root_c = c(spec.root.as_os_str()).map_err(fail("cannot open", &spec.root))?;
        let slash: OwnedFd = std::fs::File::open("/")
            .map_err(fail("cannot open", Path::new("/")))?
            .into();
        let root_fd = sys::openat2(
            slash.as_fd(),
            &root_c,
            libc::O_PATH | libc::O_DIRECTORY,
            sys::RESOLVE_NO_SYMLINKS,
        )
        .map_err(fail("cannot open the project", &spec.root))?;
        let empty_path = Path::new(hide::EMPTY);
        let empty = sys::openat2(
            slash.as_fd(),
            &c(empty_path.as_os_str()).map_err(fail("cannot open", empty_path))?,
            libc::O_PATH,
            sys::RESOLVE_NO_SYMLINKS,
        )
        .map_err(fail("cannot open", empty_path))?;
        let empty_id = id_of(empty.as_fd()).map_err(fail("cannot stat", empty_path))?;
        let inotify = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC)
            .map_err(|e| fail("cannot watch", &spec.root)(e.into()))?;
        let mut keeper = Keeper {
            proc: proc.to_owned(),
            root: spec.root.clone(),
            root_fd,
            rules,
            skip: spec.skip.iter().map(OsString::from).collect(),
            empty,
            empty_id,
            pins: Vec::new(),
            inotify,
            dirs: HashMap::new(),
            hidden_dirs: Vec::new(),
            hidden: 0,
            watch_cap: None,
            warning: None,
            warned: false,
            mine: Vec::new(),
            moved: false,
            sent: {
                let mut known = spec.known.clone();
                known.sort();
                known
            },
        };
        for pin in &spec.pins {
            let (Ok(rel), Some(name)) =
                (pin.target.strip_prefix(&spec.root), pin.target.file_name())
            else {
                continue;
            };
            let source = sys::openat2(
                slash.as_fd(),
                &c(pin.source.as_os_str()).map_err(fail("cannot open", &pin.source))?,
                libc::O_PATH,
                sys::RESOLVE_NO_SYMLINKS,
            )
            .map_err(fail("cannot open", &pin.source))?;
            let id = id_of(source.as_fd()).map_err(fail("cannot stat", &pin.source))?;
            let parent = rel.parent().unwrap_or(Path::new("")).to_owned();
            keeper.pins.push(PinState {
                parent: parent.clone(),
                name: name.to_owned(),
                source,
                id,
            });
            if let Ok(dir) = keeper.open_dir(&parent) {
                keeper.watch(&dir, &parent);
            }
        }
        for known in &spec.known {
            keeper.hide_path(known)?;
        }
        if !keeper.rules.is_empty() {
            keeper.walk(Path::new(""))?;
        }
        Ok(keeper)
    }

    /// `fd`'s magic link in this process's procfs.
    fn fd_path(&self, fd: BorrowedFd<'_>) -> PathBuf {
        self.proc.join(format!("self/fd/{}", fd.as_raw_fd()))
    }

    /// The descriptor to poll: readable when a watched directory changed.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.inotify.as_fd()
    }

    /// Handles every pending event. Errors only when something that must be hidden cannot be.
    pub fn handle(&mut self) -> Result<(), KeepError> {
        let mut rewalk = false;
        loop {
            let events = match self.inotify.read_events() {
                Ok(events) => events,
                Err(nix::errno::Errno::EAGAIN) => break,
                Err(nix::errno::Errno::EINTR) => continue,
                Err(e) => return Err(KeepError(format!("cannot read directory events: {e}"))),
            };
            for event in events {
                if event.mask.contains(AddWatchFlags::IN_Q_OVERFLOW) {
                    rewalk = true;
                    continue;
                }
                if event.mask.contains(AddWatchFlags::IN_IGNORED) {
                    self.dirs.remove(&event.wd);
                    continue;
                }
                let (Some(dir), Some(name)) = (self.dirs.get(&event.wd).cloned(), event.name)
                else {
                    continue;
                };
                let rel = dir.join(&name);
                let is_dir = event.mask.contains(AddWatchFlags::IN_ISDIR);
                if event.mask.contains(AddWatchFlags::IN_MOVED_FROM) {
                    if is_dir {
                        self.forget(&rel);
                        self.moved = true;
                    }
                    continue;
                }
                self.arrived(&dir, &name, &rel, is_dir)?;
            }
        }
        if rewalk && !self.rules.is_empty() {
            self.walk(Path::new(""))?;
        }
        Ok(())
    }

    /// A name created or moved into the watched directory `dir`.
    fn arrived(
        &mut self,
        dir: &Path,
        name: &OsStr,
        rel: &Path,
        is_dir: bool,
    ) -> Result<(), KeepError> {
        if let Some(at) = self
            .pins
            .iter()
            .position(|p| p.parent == dir && p.name == name)
        {
            return self.repin(at, rel);
        }
        if is_dir {
            if self.rules.matches(rel) {
                return self.hide_dir(rel);
            }
            if !self.skip.iter().any(|s| s == name) {
                return self.walk(rel);
            }
            return Ok(());
        }
        if self.rules.matches(rel) {
            self.hide_file(rel)?;
        }
        Ok(())
    }

    /// Hides what matches under `start` (relative), watching each directory walked.
    fn walk(&mut self, start: &Path) -> Result<(), KeepError> {
        let mut stack = vec![start.to_owned()];
        while let Some(rel) = stack.pop() {
            let Ok(fd) = self.open_dir(&rel) else {
                continue;
            };
            self.watch(&fd, &rel);
            let Ok(mut dir) = nix::dir::Dir::from(fd) else {
                continue;
            };
            let mut entries: Vec<(OsString, Option<nix::dir::Type>)> = Vec::new();
            for entry in dir.iter().flatten() {
                let name = OsStr::from_bytes(entry.file_name().to_bytes());
                if name != "." && name != ".." {
                    entries.push((name.to_owned(), entry.file_type()));
                }
            }
            for (name, kind) in entries {
                let child = rel.join(&name);
                let kind = match kind {
                    Some(kind) => kind,
                    None => match self.kind_of(&child) {
                        Some(kind) => kind,
                        None => continue,
                    },
                };
                match kind {
                    nix::dir::Type::Directory if self.rules.matches(&child) => {
                        self.hide_dir(&child)?
                    }
                    nix::dir::Type::Directory if !self.skip.contains(&name) => stack.push(child),
                    nix::dir::Type::File | nix::dir::Type::Symlink
                        if self.rules.matches(&child) =>
                    {
                        self.hide_file(&child)?
                    }
                    _ => {}
                }
            }
        }
        Ok(())
    }

    fn kind_of(&self, rel: &Path) -> Option<nix::dir::Type> {
        let fd = sys::openat2(
            self.root_fd.as_fd(),
            &c_rel(rel).ok()?,
            libc::O_PATH | libc::O_NOFOLLOW,
            BENEATH,
        )
        .ok()?;
        let st = nix::sys::stat::fstat(fd.as_raw_fd()).ok()?;
        Some(match st.st_mode & libc::S_IFMT {
            libc::S_IFDIR => nix::dir::Type::Directory,
            libc::S_IFREG => nix::dir::Type::File,
            libc::S_IFLNK => nix::dir::Type::Symlink,
            _ => return None,
        })
    }

    fn open_dir(&self, rel: &Path) -> io::Result<OwnedFd> {
        sys::openat2(
            self.root_fd.as_fd(),
            &c_rel(rel)?,
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW,
            BENEATH,
        )
    }

    fn watch(&mut self, dir: &OwnedFd, rel: &Path) {
        if self.dirs.len() >= WATCH_CHECK_AT {
            let proc = self.proc.clone();
            let cap = *self.watch_cap.get_or_insert_with(|| watch_cap(&proc));
            if self.dirs.len() >= cap {
                self.warn_unwatched(rel, "the watch limit of this session is reached");
                return;
            }
        }
        let path = self.fd_path(dir.as_fd());
        match self.inotify.add_watch(&path, WATCHED) {
            Ok(wd) => {
                self.dirs.insert(wd, rel.to_owned());
            }
            Err(e) => self.warn_unwatched(rel, &e.to_string()),
        }
    }

    fn warn_unwatched(&mut self, rel: &Path, why: &str) {
        if !self.warned {
            self.warned = true;
            self.warning = Some(format!(
                "cannot watch {} for new secret files ({why}); files the host creates there during \
                 this session are not hidden; raise fs.inotify.max_user_watches or add the \
                 directory to [sandbox] hide",
                rel.display()
            ));
        }
    }

    /// Drops the watches on `rel` and below (a directory moved away).
    fn forget(&mut self, rel: &Path) {
        let gone: Vec<WatchDescriptor> = self
            .dirs
            .iter()
            .filter(|(_, path)| path.starts_with(rel))
            .map(|(wd, _)| *wd)
            .collect();
        for wd in gone {
            self.dirs.remove(&wd);
            let _ = self.inotify.rm_watch(wd);
        }
    }

    /// Tells the supervisor on `sock` where the masks are now (for the next launch) and what to
    /// warn about: `W` and `H` messages, when there is news.
    pub fn report(&mut self, sock: std::os::fd::RawFd) {
        if let Some(warning) = self.take_warning() {
            super::child::send(sock, b'W', warning.as_bytes());
        }
        if let Some(index) = self.take_index() {
            super::child::send(sock, b'H', &index);
        }
    }

    /// A warning for the supervisor, once.
    pub fn take_warning(&mut self) -> Option<String> {
        self.warning.take()
    }

    /// The index body when it differs from what the supervisor has: where every mask of the
    /// project is now. Once a directory has moved, that is read from this mount namespace's table
    /// (a mask moves with its parent); until then it is what this keeper hid.
    pub fn take_index(&mut self) -> Option<Vec<u8>> {
        let mut hidden = if self.moved {
            let text = std::fs::read_to_string(self.proc.join("self/mountinfo")).ok()?;
            hidden_in_mountinfo(&text, &self.root)
        } else {
            let mut mine = self.mine.clone();
            mine.sort();
            mine.dedup();
            mine
        };
        if hidden == self.sent {
            return None;
        }
        self.sent = hidden.clone();
        loop {
            let body = serde_json::to_vec(&hide::Index {
                hidden: hidden.clone(),
            })
            .ok()?;
            // One message on the launch socket; the walk finds the rest next time.
            if body.len() <= INDEX_MESSAGE_CAP || hidden.is_empty() {
                return Some(body);
            }
            hidden.truncate(hidden.len() / 2);
        }
    }
}

fn watch_cap(proc: &Path) -> usize {
    let limit = std::fs::read_to_string(proc.join("sys/fs/inotify/max_user_watches"))
        .ok()
        .and_then(|s| s.trim().parse::<usize>().ok())
        .unwrap_or(8192);
    (limit / 2).clamp(1, MAX_WATCHES)
}
