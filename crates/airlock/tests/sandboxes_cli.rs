//! `airlock sandboxes list --sort/--no-size` with its STATUS column and `sandboxes prune
//! --all/--keep`, with the real binary on state roots laid out as `airlock run` leaves them (and
//! one real session), in a temp HOME.

mod common;

use std::fs::{self, File};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, SystemTime};

use common::{TestHome, report, stderr, stdout};

fn home() -> TestHome {
    TestHome::new("home/code/app")
}

fn run(h: &TestHome, args: &[&str]) -> Output {
    h.run(args)
}

fn json(out: &Output) -> serde_json::Value {
    serde_json::from_str(&stdout(out)).unwrap_or_else(|e| panic!("{e}: {}", report(out)))
}

/// A state root made as `airlock run` leaves one: `sandbox.json`, `last-used` (used `ago`),
/// `home/` holding `bytes` of data, an empty `sessions/`.
fn sandbox(h: &TestHome, name: &str, project: &Path, ago: Duration, bytes: usize) -> PathBuf {
    let root = h.sandboxes().join(name);
    fs::create_dir_all(root.join("home")).expect("home");
    fs::create_dir_all(root.join("sessions")).expect("sessions");
    let metadata = serde_json::json!({"project": project, "created": 1_700_000_000});
    fs::write(root.join("sandbox.json"), metadata.to_string()).expect("sandbox.json");
    fs::write(root.join("home/data"), vec![1u8; bytes]).expect("data");
    let last_used = File::create(root.join("last-used")).expect("last-used");
    last_used
        .set_modified(SystemTime::now() - ago)
        .expect("mtime");
    root
}

/// Holds `name` as a live session does: SHARED on its name lock, EXCLUSIVE on a session file;
/// dropping the files ends the "session".
fn hold(h: &TestHome, root: &Path, name: &str) -> Vec<File> {
    let locks = h.home.join(".local/state/airlock/locks");
    fs::create_dir_all(&locks).expect("locks dir");
    let lock = File::create(locks.join(format!("{name}.lock"))).expect("lock");
    let session = File::create(root.join("sessions/4000000")).expect("session file");
    for (file, op) in [(&lock, libc::LOCK_SH), (&session, libc::LOCK_EX)] {
        // SAFETY: flock on a descriptor we own.
        assert_eq!(
            unsafe { libc::flock(file.as_raw_fd(), op | libc::LOCK_NB) },
            0
        );
    }
    vec![lock, session]
}

const DAY: Duration = Duration::from_secs(86_400);

/// Three sandboxes: `new-1` (1 day, 8 KiB), `mid-2` (3 days, 512 KiB), `old-3` (9 days, 64 KiB).
fn three(h: &TestHome) -> [PathBuf; 3] {
    [
        sandbox(h, "new-1", &h.project, DAY, 8 << 10),
        sandbox(h, "mid-2", &h.project, 3 * DAY, 512 << 10),
        sandbox(h, "old-3", &h.project, 9 * DAY, 64 << 10),
    ]
}

fn names(list: &serde_json::Value) -> Vec<String> {
    list.as_array()
        .expect("array")
        .iter()
        .map(|s| s["name"].as_str().expect("name").to_owned())
        .collect()
}

#[test]
fn list_sorts_shows_the_status_and_can_skip_sizes() {
    let h = home();
    let [new, ..] = three(&h);
    let _held = hold(&h, &new, "new-1");

    let list = json(&run(&h, &["sandboxes", "list", "--json"]));
    assert_eq!(names(&list), ["mid-2", "new-1", "old-3"]);
    let status: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["status"].as_str().unwrap())
        .collect();
    assert_eq!(status, ["idle", "running", "idle"]);
    assert!(list[0]["size_bytes"].as_u64().unwrap() >= 512 << 10);

    let by_use = json(&run(&h, &["sandboxes", "list", "--json", "--sort", "used"]));
    assert_eq!(names(&by_use), ["new-1", "mid-2", "old-3"]);
    let by_size = json(&run(&h, &["sandboxes", "list", "--json", "--sort", "size"]));
    assert_eq!(names(&by_size), ["mid-2", "old-3", "new-1"]);
    let unsized_ = json(&run(&h, &["sandboxes", "list", "--json", "--no-size"]));
    assert!(unsized_[0]["size_bytes"].is_null(), "{unsized_}");
    assert_eq!(unsized_[1]["status"], "running");

    let out = run(&h, &["sandboxes", "list", "--sort", "used"]);
    assert!(out.status.success(), "{}", report(&out));
    let table = stdout(&out);
    let header = table.lines().nth(1).expect("header row");
    for column in ["NAME", "PROJECT", "STATUS", "SIZE", "LAST USED", "SESSIONS"] {
        assert!(header.contains(column), "{column}: {table}");
    }
    let rows: Vec<&str> = table
        .lines()
        .filter(|l| l.contains("-1 ") || l.contains("-2 ") || l.contains("-3 "))
        .collect();
    assert_eq!(rows.len(), 3, "{table}");
    assert!(
        rows[0].contains("new-1") && rows[0].contains("running"),
        "{table}"
    );
    assert!(
        rows[1].contains("mid-2") && rows[1].contains("idle"),
        "{table}"
    );
    assert!(rows[1].contains(" KiB"), "{table}");

    let out = run(&h, &["sandboxes", "list", "--no-size"]);
    let table = stdout(&out);
    assert!(!table.contains("SIZE") && !table.contains("KiB"), "{table}");
    assert!(table.contains("STATUS"), "{table}");
}

#[test]
fn list_refuses_bad_sort_keys_and_sorting_by_a_size_it_skips() {
    let h = home();
    three(&h);
    let out = run(&h, &["sandboxes", "list", "--sort", "age"]);
    assert_eq!(out.status.code(), Some(2), "{}", report(&out));
    let err = stderr(&out);
    assert!(
        err.contains("'age'") && err.contains("name, used, size"),
        "{err}"
    );
    let out = run(&h, &["sandboxes", "list", "--sort", "size", "--no-size"]);
    assert_eq!(out.status.code(), Some(125), "{}", report(&out));
    assert_eq!(
        stderr(&out),
        "airlock: --sort size needs the sizes --no-size skips; drop --no-size, or use --sort \
         name or --sort used\n"
    );
}

fn left(h: &TestHome) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(h.sandboxes())
        .map(|d| {
            d.map(|e| e.unwrap().file_name().into_string().unwrap())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

#[test]
fn prune_keep_spares_the_most_recently_used_and_dry_run_removes_nothing() {
    let h = home();
    three(&h);
    let out = run(&h, &["sandboxes", "prune", "--keep", "1", "--dry-run"]);
    assert!(out.status.success(), "{}", report(&out));
    let text = stdout(&out);
    assert!(
        text.contains("would remove mid-2 (") && text.contains("would remove old-3 ("),
        "{text}"
    );
    assert!(
        text.contains("would remove 2 sandboxes, freeing "),
        "{text}"
    );
    assert!(!text.contains("new-1"), "{text}");
    assert_eq!(left(&h), ["mid-2", "new-1", "old-3"]);

    // With --older-than both must hold: mid-2 (3 days) is not old enough.
    let out = run(
        &h,
        &["sandboxes", "prune", "--keep", "1", "--older-than", "5d"],
    );
    assert!(out.status.success(), "{}", report(&out));
    assert!(
        stdout(&out).starts_with("removed old-3 ("),
        "{}",
        report(&out)
    );
    assert_eq!(left(&h), ["mid-2", "new-1"]);

    let out = run(&h, &["sandboxes", "prune", "--keep", "1"]);
    assert!(
        stdout(&out).contains("removed 1 sandbox, freed "),
        "{}",
        report(&out)
    );
    assert_eq!(left(&h), ["new-1"]);
    let out = run(&h, &["sandboxes", "prune", "--keep", "1"]);
    assert_eq!(stdout(&out), "no sandboxes matched\n", "{}", report(&out));
}

#[test]
fn prune_all_removes_every_sandbox_not_in_use() {
    let h = home();
    let [new, ..] = three(&h);
    let held = hold(&h, &new, "new-1");
    let out = run(&h, &["sandboxes", "prune", "--all"]);
    assert!(out.status.success(), "{}", report(&out));
    let text = stdout(&out);
    assert!(text.contains("skipped new-1: in use"), "{text}");
    assert!(
        text.contains("removed 2 sandboxes, freed ") && text.contains("; skipped 1 in use"),
        "{text}"
    );
    assert_eq!(left(&h), ["new-1"]);
    drop(held);
    // A child another test forks at this moment holds a copy of the lock until it execs: wait
    // for the lock to be free rather than assume it.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let out = loop {
        let out = run(&h, &["sandboxes", "prune", "--all", "--dry-run"]);
        if !stdout(&out).contains("in use") || std::time::Instant::now() > deadline {
            break out;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    assert!(
        stdout(&out).contains("would remove new-1 ("),
        "{}",
        report(&out)
    );
    assert_eq!(left(&h), ["new-1"]);
}

#[test]
fn prune_flags_that_make_no_sense_are_refused() {
    let h = home();
    three(&h);
    let out = run(&h, &["sandboxes", "prune", "--all", "--orphaned"]);
    assert_eq!(out.status.code(), Some(2), "{}", report(&out));
    assert!(stderr(&out).contains("'--orphaned'"), "{}", report(&out));
    let out = run(&h, &["sandboxes", "prune", "--keep", "some"]);
    assert_eq!(out.status.code(), Some(2), "{}", report(&out));
    assert!(
        stderr(&out).contains("\"some\" is not a count"),
        "{}",
        report(&out)
    );
    let out = run(&h, &["sandboxes", "prune"]);
    assert_eq!(out.status.code(), Some(125), "{}", report(&out));
    assert!(
        stderr(&out).contains("--keep N, --name NAME or --all"),
        "{}",
        report(&out)
    );
    assert_eq!(left(&h), ["mid-2", "new-1", "old-3"]);
}

#[test]
fn a_real_session_shows_as_running() {
    if !common::sandbox_starts() {
        return;
    }
    let h = home();
    let started = h.project.join("started");
    let mut session = h
        .airlock(&[
            "run",
            "--network",
            "none",
            "--",
            "sh",
            "-c",
            "touch started; while [ ! -e release ]; do sleep 0.05; done",
        ])
        .env("PATH", "/usr/bin:/bin")
        .spawn()
        .expect("session");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !started.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the session did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let list = json(&run(&h, &["sandboxes", "list", "--json", "--no-size"]));
    assert_eq!(list[0]["status"], "running", "{list}");
    let out = run(&h, &["sandboxes", "prune", "--all"]);
    assert!(stdout(&out).contains(": in use"), "{}", report(&out));
    fs::write(h.project.join("release"), "").expect("release");
    assert!(session.wait().expect("wait").success());
    let list = json(&run(&h, &["sandboxes", "list", "--json", "--no-size"]));
    assert_eq!(list[0]["status"], "idle", "{list}");
}
