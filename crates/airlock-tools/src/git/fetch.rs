//! Commits made inside come back as data: from the git layer's upper directory into the host
//! repository as `refs/remotes/airlock/<branch>`.
//!
//! The upper holds what the sandbox wrote to `.git`: new objects, changed refs, and anything else
//! it liked (a config with `core.fsmonitor`, hooks, `commondir`, symlinks, FIFOs). The host's git
//! must never open it as a repository. So airlock reads only two things from it, itself and with
//! no link followed: branch tips (`refs/heads/**`, `packed-refs`: names and object ids checked)
//! and object files (loose objects and packs, regular files only). It copies them into a fresh
//! bare repository of its own (`git init`, objects borrowed from the host repository through
//! `alternates`), and the host's git fetches from that with `fetch.fsckObjects`, no tags, no
//! submodules: the sandbox's config, hooks and `protocol.*` settings play no part.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::os::fd::{AsFd as _, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use airlock_config::hostfs::{self, Kind};

/// Where fetched branches land in the host repository.
pub const REMOTE_PREFIX: &str = "refs/remotes/airlock/";

/// A loose ref is one line; a `packed-refs` file and an object file have caps of their own.
const REF_BYTES: u64 = 256;
const PACKED_REFS_BYTES: u64 = 64 << 20;
const MAX_BRANCHES: usize = 10_000;

/// One branch brought back: its name inside, the commit, and what `airlock/<name>` was before.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BranchUpdate {
    pub branch: String,
    pub old: Option<String>,
    pub new: String,
}

/// The branch tips the sandbox wrote, read from the layer's upper directory.
pub fn layer_branches(upper: &Path) -> io::Result<BTreeMap<String, String>> {
    let mut branches = BTreeMap::new();
    let root = hostfs::open_nofollow(upper, libc::O_RDONLY | libc::O_DIRECTORY)?;
    if let Ok(fd) = hostfs::open_beneath(root.as_fd(), Path::new("packed-refs"), libc::O_RDONLY)
        && let Ok(bytes) = hostfs::read_fd(fd, PACKED_REFS_BYTES, Path::new("packed-refs"))
    {
        for line in String::from_utf8_lossy(&bytes).lines() {
            let Some((oid, name)) = line.split_once(' ') else {
                continue;
            };
            if let Some(branch) = name.strip_prefix("refs/heads/")
                && is_object_id(oid)
                && is_branch_name(branch)
            {
                branches.insert(branch.to_owned(), oid.to_owned());
            }
        }
    }
    if let Ok(heads) = hostfs::open_beneath(
        root.as_fd(),
        Path::new("refs/heads"),
        libc::O_RDONLY | libc::O_DIRECTORY,
    ) {
        loose_refs(heads, String::new(), 0, &mut branches);
    }
    Ok(branches)
}

/// Loose refs under `dir` (a directory of `refs/heads`), `prefix` being its path there.
fn loose_refs(dir: OwnedFd, prefix: String, depth: usize, out: &mut BTreeMap<String, String>) {
    if depth > 32 {
        return;
    }
    for (name, kind) in entries(dir.as_fd()) {
        if out.len() >= MAX_BRANCHES {
            return;
        }
        let branch = format!("{prefix}{name}");
        let Ok(fd) = hostfs::open_beneath(dir.as_fd(), Path::new(&name), libc::O_RDONLY) else {
            continue;
        };
        match kind {
            Kind::Dir => loose_refs(fd, format!("{branch}/"), depth + 1, out),
            Kind::File => {
                let Ok(bytes) = hostfs::read_fd(fd, REF_BYTES, Path::new(&name)) else {
                    continue;
                };
                let text = String::from_utf8_lossy(&bytes);
                let oid = text.trim_end_matches('\n');
                if is_object_id(oid) && is_branch_name(&branch) {
                    out.insert(branch, oid.to_owned());
                }
            }
            // Whiteouts (deleted refs) are character devices; symlinked refs are not read.
            Kind::Symlink | Kind::Special => {}
        }
    }
}

/// The names in a directory with their types, `.` and `..` left out; symlinks not followed.
pub(crate) fn entries(dir: BorrowedFd<'_>) -> Vec<(String, Kind)> {
    let Ok(dup) = dir.try_clone_to_owned() else {
        return Vec::new();
    };
    let Ok(reader) = fs::read_dir(format!(
        "/proc/self/fd/{}",
        std::os::fd::AsRawFd::as_raw_fd(&dup)
    )) else {
        return Vec::new();
    };
    reader
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let kind = match entry.file_type().ok()? {
                t if t.is_symlink() => Kind::Symlink,
                t if t.is_dir() => Kind::Dir,
                t if t.is_file() => Kind::File,
                _ => Kind::Special,
            };
            Some((entry.file_name().into_string().ok()?, kind))
        })
        .collect()
}

/// A SHA-1 or SHA-256 object id in lower-case hex.
fn is_object_id(text: &str) -> bool {
    matches!(text.len(), 40 | 64) && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// A branch name git itself would accept, kept to a conservative alphabet.
fn is_branch_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 200
        && name.split('/').all(|part| {
            !part.is_empty()
                && !part.starts_with('.')
                && !part.starts_with('-')
                && !part.ends_with(".lock")
                && part
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b'+'))
        })
        && !name.contains("..")
}

/// Brings the layer's new branch tips into the host repository at `git_dir` as
/// `airlock/<branch>`; `scratch` is a host-private directory it may use and removes.
pub fn bring_back(
    git: &Path,
    git_dir: &Path,
    upper: &Path,
    home: &Path,
    scratch: &Path,
) -> Result<Vec<BranchUpdate>, String> {
    let inside = layer_branches(upper)
        .map_err(|e| format!("cannot read the git layer {}: {e}", upper.display()))?;
    if inside.is_empty() {
        return Ok(Vec::new());
    }
    // The host's git would block on a FIFO config, or follow a symlinked one.
    let config = git_dir.join("config");
    if std::fs::symlink_metadata(&config).is_ok_and(|m| !m.is_file()) {
        return Err(format!("{} is not a regular file", config.display()));
    }
    let host = host_refs(git, git_dir, home)?;
    let updates: Vec<BranchUpdate> = inside
        .into_iter()
        .filter(|(branch, oid)| {
            host.get(&format!("refs/heads/{branch}")) != Some(oid)
                && host.get(&format!("{REMOTE_PREFIX}{branch}")) != Some(oid)
        })
        .map(|(branch, new)| BranchUpdate {
            old: host.get(&format!("{REMOTE_PREFIX}{branch}")).cloned(),
            branch,
            new,
        })
        .collect();
    if updates.is_empty() {
        return Ok(updates);
    }
    let _ = fs::remove_dir_all(scratch);
    let result = stage_and_fetch(git, git_dir, upper, home, scratch, &updates);
    let _ = fs::remove_dir_all(scratch);
    result.map(|()| updates)
}

fn stage_and_fetch(
    git: &Path,
    git_dir: &Path,
    upper: &Path,
    home: &Path,
    scratch: &Path,
    updates: &[BranchUpdate],
) -> Result<(), String> {
    let mut init = host_git(git, home);
    init.arg("init").args(["--bare", "--quiet"]).arg(scratch);
    run(init, "git init")?;
    let objects = airlock_config::canonicalize(git_dir.join("objects"))
        .map_err(|e| format!("cannot resolve {}/objects: {e}", git_dir.display()))?;
    let alternates = scratch.join("objects/info/alternates");
    fs::write(&alternates, format!("{}\n", objects.display()))
        .map_err(|e| format!("cannot write {}: {e}", alternates.display()))?;
    copy_objects(upper, &scratch.join("objects"))
        .map_err(|e| format!("cannot copy objects out of {}: {e}", upper.display()))?;
    for update in updates {
        let path = scratch.join("refs/heads").join(&update.branch);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent)
                .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
        }
        fs::write(&path, format!("{}\n", update.new))
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    let mut fetch = host_git(git, home);
    fetch
        .arg("--git-dir")
        .arg(git_dir)
        .args([
            "-c",
            "fetch.fsckObjects=true",
            "-c",
            "transfer.fsckObjects=true",
            // The staging repository is airlock's own, on this host: a hardened
            // `protocol.file.allow = never` must not refuse it.
            "-c",
            "protocol.file.allow=always",
            "fetch",
            "--quiet",
            "--no-tags",
            "--no-write-fetch-head",
            "--no-auto-gc",
            "--no-recurse-submodules",
        ])
        .arg(scratch)
        .args(
            updates
                .iter()
                .map(|u| format!("+refs/heads/{0}:{REMOTE_PREFIX}{0}", u.branch)),
        );
    run(fetch, "git fetch")
}

/// Copies loose objects and packs (regular files only) from `<upper>/objects` into `to`.
fn copy_objects(upper: &Path, to: &Path) -> io::Result<()> {
    let root = hostfs::open_nofollow(upper, libc::O_RDONLY | libc::O_DIRECTORY)?;
    let Ok(objects) = hostfs::open_beneath(
        root.as_fd(),
        Path::new("objects"),
        libc::O_RDONLY | libc::O_DIRECTORY,
    ) else {
        return Ok(());
    };
    for (name, kind) in entries(objects.as_fd()) {
        let loose = name.len() == 2 && name.bytes().all(|b| b.is_ascii_hexdigit());
        if kind != Kind::Dir || !(loose || name == "pack") {
            continue;
        }
        let dir = hostfs::open_beneath(
            objects.as_fd(),
            Path::new(&name),
            libc::O_RDONLY | libc::O_DIRECTORY,
        )?;
        fs::create_dir_all(to.join(&name))?;
        for (file, kind) in entries(dir.as_fd()) {
            let wanted = if loose {
                matches!(file.len(), 38 | 62) && file.bytes().all(|b| b.is_ascii_hexdigit())
            } else {
                file.starts_with("pack-") && (file.ends_with(".pack") || file.ends_with(".idx"))
            };
            if kind != Kind::File || !wanted {
                continue;
            }
            let from = hostfs::open_beneath(dir.as_fd(), Path::new(&file), libc::O_RDONLY)?;
            if hostfs::kind(from.as_fd())? != Kind::File {
                continue;
            }
            let mut out = fs::File::create_new(to.join(&name).join(&file))?;
            io::copy(&mut fs::File::from(from), &mut out)?;
        }
    }
    Ok(())
}

/// Every ref of the host repository with its object id.
fn host_refs(git: &Path, git_dir: &Path, home: &Path) -> Result<BTreeMap<String, String>, String> {
    let mut cmd = host_git(git, home);
    cmd.arg("--git-dir")
        .arg(git_dir)
        .args(["for-each-ref", "--format=%(objectname) %(refname)"]);
    let out = output(cmd, "git for-each-ref")?;
    Ok(String::from_utf8_lossy(&out)
        .lines()
        .filter_map(|line| line.split_once(' '))
        .map(|(oid, name)| (name.to_owned(), oid.to_owned()))
        .collect())
}

/// The host's git, started in `/` with only what it needs of the environment.
pub(crate) fn host_git(git: &Path, home: &Path) -> Command {
    let mut cmd = Command::new(git);
    cmd.current_dir("/")
        .env_clear()
        .env("HOME", home)
        .env("PATH", "/usr/bin:/bin")
        .env("LC_ALL", "C")
        .env("GIT_TERMINAL_PROMPT", "0")
        .stdin(Stdio::null());
    for var in ["XDG_CONFIG_HOME", "GIT_CONFIG_GLOBAL"] {
        if let Some(value) = std::env::var_os(var) {
            cmd.env(var, value);
        }
    }
    cmd
}

fn run(cmd: Command, what: &str) -> Result<(), String> {
    output(cmd, what).map(drop)
}

fn output(mut cmd: Command, what: &str) -> Result<Vec<u8>, String> {
    let out = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| format!("cannot run {what}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{what} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(out.stdout)
}

/// Where [`bring_back`] stages its repository: beside the layer, in the host-only state root.
pub fn scratch_dir(layer: &Path) -> PathBuf {
    layer.with_extension("fetch")
}

/// When the project's checked-out branch is among `updates`, the new tip descends from it and
/// nothing is staged, moves the branch there and its index with it (`git reset`, the files are
/// left as they are: they already hold what the sandbox committed). Otherwise leaves it for the
/// user. Returns the branch moved.
pub fn fast_forward_checked_out(
    git: &Path,
    project: &Path,
    home: &Path,
    updates: &[BranchUpdate],
) -> Option<String> {
    let in_project = |args: &[&str]| {
        let mut cmd = host_git(git, home);
        cmd.arg("-C").arg(project).args(args);
        cmd
    };
    let head = output(
        in_project(&["symbolic-ref", "-q", "HEAD"]),
        "git symbolic-ref",
    )
    .ok()?;
    let head = String::from_utf8_lossy(&head).trim().to_owned();
    let branch = head.strip_prefix("refs/heads/")?;
    let update = updates.iter().find(|u| u.branch == branch)?;
    let tip = output(
        in_project(&["rev-parse", "--verify", "-q", &head]),
        "git rev-parse",
    )
    .ok()?;
    let tip = String::from_utf8_lossy(&tip).trim().to_owned();
    run(
        in_project(&["merge-base", "--is-ancestor", &tip, &update.new]),
        "git merge-base",
    )
    .ok()?;
    run(
        in_project(&["diff", "--cached", "--quiet"]),
        "git diff --cached",
    )
    .ok()?;
    let message = "airlock: fast-forward to the commits made in the sandbox";
    run(
        in_project(&["update-ref", "-m", message, &head, &update.new, &tip]),
        "git update-ref",
    )
    .ok()?;
    run(in_project(&["reset", "-q"]), "git reset").ok()?;
    Some(branch.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn branch_names_and_object_ids_are_checked() {
        for good in ["main", "feature/x", "v1.2", "a+b_c-d"] {
            assert!(is_branch_name(good), "{good}");
        }
        for bad in [
            "", "../x", "a..b", ".hidden", "-x", "x.lock", "a//b", "a b", "a\nb", "é",
        ] {
            assert!(!is_branch_name(bad), "{bad:?}");
        }
        assert!(is_object_id(&"a".repeat(40)));
        assert!(is_object_id(&"0".repeat(64)));
        assert!(!is_object_id(&"A".repeat(40)));
        assert!(!is_object_id(&"a".repeat(41)));
    }

    #[test]
    fn branches_come_from_packed_and_loose_refs_and_links_are_ignored() {
        let dir = tempfile::tempdir().expect("tempdir");
        let upper = dir.path();
        let (a, b, c) = ("a".repeat(40), "b".repeat(40), "c".repeat(40));
        fs::write(
            upper.join("packed-refs"),
            format!("# pack-refs with: peeled\n{a} refs/heads/main\n{b} refs/tags/t\n^{c}\n{b} refs/heads/old\n"),
        )
        .expect("packed");
        fs::create_dir_all(upper.join("refs/heads/feat")).expect("heads");
        fs::write(upper.join("refs/heads/main"), format!("{c}\n")).expect("main");
        fs::write(upper.join("refs/heads/feat/x"), format!("{b}\n")).expect("feat");
        fs::write(upper.join("refs/heads/junk"), "ref: refs/heads/main\n").expect("junk");
        std::fs::write(dir.path().join("outside"), format!("{a}\n")).expect("outside");
        std::os::unix::fs::symlink("../../outside", upper.join("refs/heads/linked")).expect("link");
        let got = layer_branches(upper).expect("read");
        let want: BTreeMap<String, String> = [("main", &c), ("old", &b), ("feat/x", &b)]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.clone()))
            .collect();
        assert_eq!(got, want);
    }
}
