//! The container's project back as data: a tar stream from the engine, trusted in nothing,
//! unpacked into a fresh staging directory in airlock's state.
//!
//! Every name must be a plain relative path (a leading `./` aside): no `..`, no absolute name,
//! no empty component. Only regular files, directories and symlinks are made; hard links,
//! devices, FIFOs and anything else are dropped and named. Nothing is made through a symlink:
//! each entry's parent is opened beneath the staging root through no link (`openat2` with
//! `RESOLVE_NO_SYMLINKS`), so `dir -> /etc` then `dir/passwd` writes nothing outside. Modes keep
//! only their permission bits (no setuid, setgid or sticky); ownership is not kept. A stream
//! past the caps is refused whole (nothing is applied).

use std::ffi::CString;
use std::io::{self, Read};
use std::os::fd::{AsFd as _, AsRawFd as _, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Component, Path, PathBuf};

use airlock_config::hostfs;

/// How much a copy-back may hold.
#[derive(Debug, Clone, Copy)]
pub struct Caps {
    pub bytes: u64,
    pub entries: usize,
}

impl Caps {
    pub const DEFAULT: Caps = Caps {
        bytes: 8 << 30,
        entries: 1_000_000,
    };
}

/// What the unpacking left out, one line each.
pub type Dropped = Vec<String>;

/// Unpacks `input` into `staging` (which must not exist; made 0700).
pub fn unpack(input: impl Read, staging: &Path, caps: Caps) -> Result<Dropped, String> {
    use std::os::unix::fs::DirBuilderExt as _;
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(staging)
        .map_err(|e| format!("cannot create {}: {e}", staging.display()))?;
    let root = hostfs::open_nofollow(staging, libc::O_RDONLY | libc::O_DIRECTORY)
        .map_err(|e| format!("cannot open {}: {e}", staging.display()))?;
    let mut archive = tar::Archive::new(input);
    let mut dropped = Dropped::new();
    let (mut bytes, mut count) = (0u64, 0usize);
    let bad = |e: io::Error| format!("the container's copy of the project is not a valid tar: {e}");
    for entry in archive.entries().map_err(bad)? {
        let mut entry = entry.map_err(bad)?;
        count += 1;
        if count > caps.entries {
            return Err(format!(
                "the container's copy of the project has more than {} entries; nothing was \
                 brought back",
                caps.entries
            ));
        }
        let raw = entry.path_bytes().into_owned();
        let shown = String::from_utf8_lossy(&raw).into_owned();
        let Some(rel) = plain(&raw) else {
            dropped.push(format!("{shown:?}: not a plain relative name"));
            continue;
        };
        if rel.as_os_str().is_empty() {
            continue;
        }
        let kind = entry.header().entry_type();
        let mode = entry.header().mode().unwrap_or(0o600) & 0o777;
        let parent = match open_parent(root.as_fd(), &rel) {
            Ok(fd) => fd,
            Err(e) => {
                dropped.push(format!("{shown}: its directory cannot be made ({e})"));
                continue;
            }
        };
        let name = rel.file_name().expect("a plain path has a last name");
        let cname = CString::new(name.as_bytes()).expect("tar names hold no NUL");
        let made = match kind {
            tar::EntryType::Regular | tar::EntryType::Continuous => {
                bytes += entry.size();
                if bytes > caps.bytes {
                    return Err(format!(
                        "the container's copy of the project is over {} bytes; nothing was \
                         brought back",
                        caps.bytes
                    ));
                }
                write_file(parent.as_fd(), &cname, mode, &mut entry)
            }
            tar::EntryType::Directory => make_dir(parent.as_fd(), &cname),
            tar::EntryType::Symlink => match entry.link_name_bytes() {
                Some(target) if !target.is_empty() => make_link(parent.as_fd(), &cname, &target),
                _ => Err(io::Error::from(io::ErrorKind::InvalidInput)),
            },
            other => {
                dropped.push(format!(
                    "{shown}: a {other:?} entry (only files, directories and symlinks come back)"
                ));
                continue;
            }
        };
        if let Err(e) = made {
            dropped.push(format!("{shown}: {e}"));
        }
    }
    Ok(dropped)
}

/// `raw` as a relative path of normal components (a leading `./` and `.` parts skipped), or
/// `None` for anything else.
fn plain(raw: &[u8]) -> Option<PathBuf> {
    if raw.contains(&0) {
        return None;
    }
    let path = Path::new(std::ffi::OsStr::from_bytes(raw));
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::Normal(n) => out.push(n),
            Component::CurDir => {}
            Component::RootDir | Component::ParentDir | Component::Prefix(_) => return None,
        }
    }
    if out.components().count() > 256 {
        return None;
    }
    Some(out)
}

/// Opens (making what is missing, 0700) the parent of `rel` beneath `root`, through no link.
fn open_parent(root: BorrowedFd<'_>, rel: &Path) -> io::Result<OwnedFd> {
    let mut at = root.try_clone_to_owned()?;
    if let Some(parent) = rel.parent() {
        for part in parent.components() {
            let name = CString::new(part.as_os_str().as_bytes())?;
            let _ = make_dir(at.as_fd(), &name);
            at = hostfs::open_beneath(
                at.as_fd(),
                Path::new(part.as_os_str()),
                libc::O_RDONLY | libc::O_DIRECTORY,
            )?;
        }
    }
    Ok(at)
}

fn make_dir(dir: BorrowedFd<'_>, name: &CString) -> io::Result<()> {
    // SAFETY: valid fd and C string.
    match check(unsafe { libc::mkdirat(dir.as_raw_fd(), name.as_ptr(), 0o700) }) {
        Err(e) if e.raw_os_error() == Some(libc::EEXIST) => {
            // Only an existing directory will do (a file or link of that name is refused).
            hostfs::open_beneath(
                dir,
                Path::new(std::ffi::OsStr::from_bytes(name.as_bytes())),
                libc::O_RDONLY | libc::O_DIRECTORY,
            )
            .map(drop)
        }
        other => other,
    }
}

/// A symlink named `name` holding `target` (its text only: never resolved here).
fn make_link(dir: BorrowedFd<'_>, name: &CString, target: &[u8]) -> io::Result<()> {
    let target = CString::new(target).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    remove_any(dir, name);
    // SAFETY: valid C strings and directory fd.
    check(unsafe { libc::symlinkat(target.as_ptr(), dir.as_raw_fd(), name.as_ptr()) })
}

fn write_file(
    dir: BorrowedFd<'_>,
    name: &CString,
    mode: u32,
    body: &mut dyn Read,
) -> io::Result<()> {
    remove_any(dir, name);
    let mut file = create_new(dir, name)?;
    io::copy(body, &mut file)?;
    // SAFETY: valid fd; permission bits only.
    check(unsafe { libc::fchmod(file.as_raw_fd(), mode & 0o777) })
}

/// A new file `name` in `dir` (0600), never through a link and never an existing one.
pub(super) fn create_new(dir: BorrowedFd<'_>, name: &CString) -> io::Result<std::fs::File> {
    // SAFETY: valid fd and C string; O_EXCL|O_NOFOLLOW: a fresh file, never through a link.
    let fd = unsafe {
        libc::openat(
            dir.as_raw_fd(),
            name.as_ptr(),
            libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            0o600,
        )
    };
    check(fd)?;
    // SAFETY: a fresh descriptor this function owns.
    Ok(unsafe { <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(fd) })
}

/// A later entry of the same name replaces an earlier file or link (as tar does); a directory
/// stays (and the entry then fails).
fn remove_any(dir: BorrowedFd<'_>, name: &CString) {
    // SAFETY: valid fd and C string.
    unsafe { libc::unlinkat(dir.as_raw_fd(), name.as_ptr(), 0) };
}

pub(super) fn check(rc: i32) -> io::Result<()> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// The name a staged `.git` is given when the staging copy is kept for the developer.
pub const RETIRED_GIT: &str = ".git.airlock-quarantine";

/// Renames every `.git` (directory or file) in the staged copy to [`RETIRED_GIT`] (`-2`, `-3`,
/// … when taken), so a developer who runs git in a copy kept after a conflict never opens the
/// container's repository: its config (`core.fsmonitor`, `core.hooksPath`), hooks and
/// `commondir` would run on the host. Links are not followed (the walk reads entry types, and
/// only real directories are entered). Returns the paths renamed, relative to `staging`.
pub fn retire_git(staging: &Path) -> Vec<PathBuf> {
    let mut retired = Vec::new();
    retire_below(staging, Path::new(""), &mut retired);
    retired
}

fn retire_below(dir: &Path, rel: &Path, retired: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if name == ".git" {
            for n in 1..=100 {
                let to = match n {
                    1 => RETIRED_GIT.to_owned(),
                    n => format!("{RETIRED_GIT}-{n}"),
                };
                if std::fs::symlink_metadata(dir.join(&to)).is_ok() {
                    continue;
                }
                if std::fs::rename(entry.path(), dir.join(&to)).is_ok() {
                    retired.push(rel.join(&to));
                }
                break;
            }
        } else if kind.is_dir() {
            retire_below(&entry.path(), &rel.join(&name), retired);
        }
    }
}
