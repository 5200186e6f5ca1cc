//! Tests of sessions on a state root: naming, the private layout, concurrent opens and closes, stale
//! session files and removal of what a sandbox left behind. Also the shared [`Fixture`] (a temp
//! sandboxes and locks dir) that the inventory tests use.

use std::fs::{self, File};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Barrier};
use std::time::{Duration, SystemTime};

use super::*;

pub(super) struct Fixture {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    pub(super) sandboxes: PathBuf,
    locks: PathBuf,
}

impl Fixture {
    pub(super) fn new() -> Fixture {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        Fixture {
            sandboxes: root.join("data/airlock/sandboxes"),
            locks: root.join("state/airlock/locks"),
            root,
            _tmp: tmp,
        }
    }

    pub(super) fn project(&self, name: &str) -> PathBuf {
        let p = self.root.join("projects").join(name);
        fs::create_dir_all(&p).unwrap();
        p
    }

    pub(super) fn open(&self, project: &Path) -> Session {
        open_session(&self.sandboxes, &self.locks, project).unwrap()
    }

    pub(super) fn list(&self) -> Vec<SandboxInfo> {
        list(&self.sandboxes, &self.locks).unwrap()
    }

    pub(super) fn prune(&self, options: PruneOptions) -> Vec<PruneResult> {
        prune(&self.sandboxes, &self.locks, &options).unwrap()
    }
}

fn mode(path: &Path) -> u32 {
    fs::symlink_metadata(path).unwrap().permissions().mode() & 0o777
}

fn session_files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir.join(SESSIONS_DIR))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

pub(super) fn set_last_used(dir: &Path, ago: Duration) {
    let file = File::options()
        .write(true)
        .open(dir.join(LAST_USED_FILE))
        .unwrap();
    file.set_modified(SystemTime::now() - ago).unwrap();
}

pub(super) const DAY: Duration = Duration::from_secs(86_400);

#[test]
fn name_is_sanitised_basename_and_path_hash() {
    assert_eq!(
        sandbox_name(Path::new("/home/u/my proj!")),
        "my_proj_-5ddd9935"
    );
    assert_eq!(sandbox_name(Path::new("/")), "_-8a5edab2");
    let name = sandbox_name(Path::new("/x/.dot-ted_Dir.9"));
    assert!(name.starts_with(".dot-ted_Dir.9-"), "{name}");
    assert_eq!(name.len(), ".dot-ted_Dir.9-".len() + 8);
    assert_ne!(
        sandbox_name(Path::new("/a/p")),
        sandbox_name(Path::new("/b/p"))
    );
    let long = format!("/x/{}", "é".repeat(100));
    let name = sandbox_name(Path::new(&long));
    assert_eq!(name.len(), MAX_BASENAME_CHARS + 9, "{name}");
    assert!(name.starts_with("____"), "{name}");
}

#[test]
fn refuses_relative_root_and_non_utf8_projects() {
    let f = Fixture::new();
    let err = open_session(&f.sandboxes, &f.locks, Path::new("rel/p")).unwrap_err();
    assert!(
        matches!(err, StateError::ProjectNotAbsolute { .. }),
        "{err}"
    );
    let err = open_session(&f.sandboxes, &f.locks, Path::new("/")).unwrap_err();
    assert!(err.to_string().contains("no directory name"), "{err}");
    let bad = PathBuf::from(std::ffi::OsStr::from_bytes(b"/tmp/\xff"));
    let err = open_session(&f.sandboxes, &f.locks, &bad).unwrap_err();
    assert!(matches!(err, StateError::ProjectNotUtf8 { .. }), "{err}");
    assert!(!f.sandboxes.exists());
}

#[test]
fn open_creates_private_layout_and_close_keeps_it() {
    let f = Fixture::new();
    let project = f.project("app");
    let s = f.open(&project);
    assert!(s.created_now);
    assert_eq!(s.name, sandbox_name(&project));
    assert_eq!(s.dir, f.sandboxes.join(&s.name));
    assert_eq!(s.home, s.dir.join("home"));
    assert_eq!(mode(&s.dir), 0o700);
    assert_eq!(mode(&s.home), 0o700);
    assert_eq!(mode(&f.locks), 0o700);
    let lock = f.locks.join(format!("{}.lock", s.name));
    assert_eq!(mode(&lock), 0o600);
    let meta: serde_json::Value =
        serde_json::from_slice(&fs::read(s.dir.join("sandbox.json")).unwrap()).unwrap();
    assert_eq!(meta["project"], project.to_str().unwrap());
    assert!(meta["created"].as_u64().unwrap() > 1_600_000_000);
    assert!(s.dir.join("last-used").is_file());
    assert_eq!(session_files(&s.dir), vec![std::process::id().to_string()]);

    let dir = s.dir.clone();
    assert_eq!(s.close(false).unwrap(), CloseOutcome::Kept);
    assert!(dir.join("home").is_dir());
    assert!(session_files(&dir).is_empty());
    assert!(lock.exists(), "the name lock file is never removed");

    let again = f.open(&project);
    assert!(!again.created_now);
    assert_eq!(again.close(true).unwrap(), CloseOutcome::Removed);
    assert!(!dir.exists());
    assert!(lock.exists());
}

#[test]
fn two_sessions_last_close_removes() {
    let f = Fixture::new();
    let project = f.project("app");
    let first = f.open(&project);
    let second = f.open(&project);
    assert!(first.created_now && !second.created_now);
    let dir = first.dir.clone();
    let pid = std::process::id();
    assert_eq!(
        session_files(&dir),
        vec![pid.to_string(), format!("{pid}.1")]
    );
    assert_eq!(f.list()[0].live_sessions, 2);

    assert_eq!(first.close(true).unwrap(), CloseOutcome::KeptInUse);
    assert!(dir.join("home").is_dir());
    assert_eq!(f.list()[0].live_sessions, 1);
    assert_eq!(second.close(true).unwrap(), CloseOutcome::Removed);
    assert!(!dir.exists());
    assert!(f.list().is_empty());
}

#[test]
fn concurrent_opens_race_free() {
    let f = Arc::new(Fixture::new());
    let project = f.project("race");
    let barrier = Arc::new(Barrier::new(8));
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let (f, project, barrier) = (f.clone(), project.clone(), barrier.clone());
            std::thread::spawn(move || {
                barrier.wait();
                f.open(&project)
            })
        })
        .collect();
    let sessions: Vec<Session> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    assert_eq!(sessions.iter().filter(|s| s.created_now).count(), 1);
    assert_eq!(f.list()[0].live_sessions, 8);
    let outcomes: Vec<CloseOutcome> = sessions
        .into_iter()
        .map(|s| s.close(true).unwrap())
        .collect();
    assert_eq!(
        outcomes
            .iter()
            .filter(|o| **o == CloseOutcome::Removed)
            .count(),
        1
    );
    assert_eq!(outcomes.last(), Some(&CloseOutcome::Removed));
    assert!(f.list().is_empty());
}

#[test]
fn dropped_session_unregisters_but_keeps_root() {
    let f = Fixture::new();
    let s = f.open(&f.project("app"));
    let dir = s.dir.clone();
    drop(s);
    assert!(session_files(&dir).is_empty());
    assert!(dir.join("home").is_dir());
}

#[test]
fn stale_session_files_are_not_counted_and_are_removed() {
    let f = Fixture::new();
    let s = f.open(&f.project("app"));
    let stale = s.dir.join(SESSIONS_DIR).join("4194999");
    fs::write(&stale, b"").unwrap();
    let infos = f.list();
    assert_eq!(infos[0].live_sessions, 1);
    assert!(!stale.exists());
    assert_eq!(session_files(&s.dir), vec![std::process::id().to_string()]);
    s.close(false).unwrap();
}

#[test]
fn failed_open_keeps_old_root_and_failed_launch_removes_new_one() {
    let f = Fixture::new();
    let project = f.project("app");
    let dir = f.sandboxes.join(sandbox_name(&project));
    // Opening fails half-way (`home` is taken by a file): the pre-existing root is left as it was.
    fs::create_dir_all(&f.sandboxes).unwrap();
    let err = {
        fs::create_dir(&dir).unwrap();
        fs::write(dir.join("home"), b"").unwrap();
        open_session(&f.sandboxes, &f.locks, &project).unwrap_err()
    };
    assert!(matches!(err, StateError::NotADirectory { .. }), "{err}");
    assert!(
        dir.join("home").is_file(),
        "a root that existed before is kept"
    );
    fs::remove_dir_all(&dir).unwrap();

    // The launch-failure path: a session that created the root removes it again.
    let s = f.open(&project);
    assert!(s.created_now);
    assert_eq!(s.close(true).unwrap(), CloseOutcome::Removed);
    assert!(!dir.exists());
}

#[test]
fn hash_collision_is_an_error_naming_both_projects() {
    let f = Fixture::new();
    let project = f.project("app");
    let s = f.open(&project);
    let dir = s.dir.clone();
    s.close(false).unwrap();
    fs::write(
        dir.join("sandbox.json"),
        br#"{"project": "/elsewhere/app", "created": 1}"#,
    )
    .unwrap();
    let err = open_session(&f.sandboxes, &f.locks, &project).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, StateError::Collision { .. }), "{msg}");
    assert!(
        msg.contains("/elsewhere/app") && msg.contains(project.to_str().unwrap()),
        "{msg}"
    );
    assert!(msg.contains(dir.to_str().unwrap()), "{msg}");
    assert!(
        dir.join("home").is_dir(),
        "the other project's state is untouched"
    );
    assert!(session_files(&dir).is_empty());
}

#[test]
fn close_removes_read_only_dirs_without_following_symlinks() {
    let f = Fixture::new();
    let outside = f.root.join("outside");
    fs::create_dir(&outside).unwrap();
    fs::write(outside.join("keep"), b"precious").unwrap();
    let s = f.open(&f.project("app"));
    let ro = s.home.join("ro");
    fs::create_dir_all(ro.join("sub")).unwrap();
    fs::write(ro.join("sub/file"), b"x").unwrap();
    std::os::unix::fs::symlink(&outside, s.home.join("link")).unwrap();
    std::os::unix::fs::symlink(&outside, ro.join("link")).unwrap();
    fs::set_permissions(ro.join("sub"), fs::Permissions::from_mode(0o500)).unwrap();
    fs::set_permissions(&ro, fs::Permissions::from_mode(0o500)).unwrap();
    let dir = s.dir.clone();
    assert_eq!(s.close(true).unwrap(), CloseOutcome::Removed);
    assert!(!dir.exists());
    assert_eq!(fs::read(outside.join("keep")).unwrap(), b"precious");
    assert_eq!(mode(&outside) & 0o700, 0o700);
}

#[test]
fn lock_idle_is_refused_while_a_session_runs_and_removes_the_root_after() {
    let fx = Fixture::new();
    let project = fx.project("pad");
    let session = fx.open(&project);
    let dir = session.dir.clone();
    assert!(
        lock_idle(&fx.sandboxes, &fx.locks, &project)
            .unwrap()
            .is_none()
    );
    session.close(false).unwrap();
    let lock = lock_idle(&fx.sandboxes, &fx.locks, &project)
        .unwrap()
        .expect("idle once the session closed");
    assert_eq!(lock.dir, dir);
    lock.remove_state().unwrap();
    assert!(!dir.exists());
    lock.remove_state().expect("a missing root is no error");
}

#[test]
fn a_symlinks_step_leaves_exactly_the_names_each_linked_once() {
    use std::os::unix::fs::MetadataExt as _;
    let root = tempfile::tempdir().expect("tempdir");
    let dir = root.path().join("bin");
    let link_to = root.path().join("shim");
    fs::create_dir(&dir).expect("dir");
    std::os::unix::fs::symlink(&link_to, dir.join("right")).expect("right");
    std::os::unix::fs::symlink("/elsewhere", dir.join("wrong")).expect("wrong");
    fs::write(dir.join("stray"), "x").expect("stray");
    fs::create_dir_all(dir.join("stray-dir/inner")).expect("stray dir");
    let kept = fs::symlink_metadata(dir.join("right"))
        .expect("right")
        .ino();
    let names: Vec<String> = ["right", "wrong", "new", "new", "../out", ""]
        .iter()
        .map(|n| n.to_string())
        .collect();
    let step = crate::spec::PrepareStep::Symlinks {
        dir: dir.clone(),
        link_to: link_to.clone(),
        names,
    };
    prepare(&[step]).expect("prepare");
    let mut left: Vec<String> = fs::read_dir(&dir)
        .expect("read")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, ["new", "right", "wrong"]);
    for name in &left {
        assert_eq!(
            fs::read_link(dir.join(name)).expect("link"),
            link_to,
            "{name}"
        );
    }
    // A link already right is left as it was, not made again.
    assert_eq!(
        fs::symlink_metadata(dir.join("right"))
            .expect("right")
            .ino(),
        kept
    );
    assert!(!root.path().join("out").exists());
}
