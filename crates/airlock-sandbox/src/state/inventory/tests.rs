use std::fs;
use std::time::{Duration, SystemTime};

use super::super::sandbox_name;
use super::super::tests::{DAY, Fixture, set_last_used};
use super::*;

#[test]
fn list_reports_fields() {
    let f = Fixture::new();
    assert!(f.list().is_empty(), "a missing sandboxes dir lists nothing");
    let kept = f.project("kept");
    let gone = f.project("gone");
    let a = f.open(&kept);
    fs::write(a.home.join("blob"), vec![7u8; 64 * 1024]).unwrap();
    f.open(&gone).close(false).unwrap();
    fs::remove_dir(&gone).unwrap();
    fs::create_dir_all(f.sandboxes.join("stray")).unwrap();
    fs::write(f.sandboxes.join("not-a-dir"), b"").unwrap();

    let infos = f.list();
    let names: Vec<&str> = infos.iter().map(|i| i.name.as_str()).collect();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted);
    assert_eq!(infos.len(), 3);

    let info = infos.iter().find(|i| i.name == a.name).unwrap();
    assert_eq!(info.path, a.dir);
    assert_eq!(info.project.as_deref(), Some(kept.as_path()));
    assert!(info.project_exists);
    assert!(info.size_bytes >= 64 * 1024, "{}", info.size_bytes);
    let age = SystemTime::now()
        .duration_since(info.last_used.unwrap())
        .unwrap();
    assert!(age < Duration::from_secs(60));
    assert_eq!(info.live_sessions, 1);

    let info = infos
        .iter()
        .find(|i| i.name == sandbox_name(&gone))
        .unwrap();
    assert_eq!(info.project.as_deref(), Some(gone.as_path()));
    assert!(!info.project_exists);
    assert_eq!(info.live_sessions, 0);

    let stray = infos.iter().find(|i| i.name == "stray").unwrap();
    assert_eq!(
        (stray.project.as_ref(), stray.project_exists),
        (None, false)
    );
    assert_eq!((stray.last_used, stray.live_sessions), (None, 0));

    let json = serde_json::to_value(stray).unwrap();
    let keys: Vec<&str> = json
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "last_used_unix",
            "live_sessions",
            "name",
            "oom_killed",
            "path",
            "project",
            "project_exists",
            "size_bytes"
        ]
    );
    let json = serde_json::to_value(&infos[0]).unwrap();
    assert!(json["last_used_unix"].as_u64().unwrap() > 1_600_000_000);
    a.close(false).unwrap();
}

#[test]
fn prune_without_filter_selects_nothing() {
    let f = Fixture::new();
    let gone = f.project("gone");
    f.open(&gone).close(false).unwrap();
    fs::remove_dir(&gone).unwrap();
    assert!(f.prune(PruneOptions::default()).is_empty());
    assert_eq!(f.list().len(), 1);
}

#[test]
fn prune_orphaned() {
    let f = Fixture::new();
    let kept = f.project("kept");
    let gone = f.project("gone");
    f.open(&kept).close(false).unwrap();
    f.open(&gone).close(false).unwrap();
    fs::remove_dir(&gone).unwrap();
    fs::create_dir_all(f.sandboxes.join("no-metadata")).unwrap();

    let results = f.prune(PruneOptions {
        orphaned: true,
        ..PruneOptions::default()
    });
    let mut removed: Vec<&str> = results.iter().map(|r| r.name.as_str()).collect();
    removed.sort();
    let gone_name = sandbox_name(&gone);
    assert_eq!(removed, [gone_name.as_str(), "no-metadata"]);
    assert!(results.iter().all(|r| r.action == PruneAction::Removed));
    let left: Vec<String> = f.list().into_iter().map(|i| i.name).collect();
    assert_eq!(left, [sandbox_name(&kept)]);
}

#[test]
fn prune_older_than_and_dry_run() {
    let f = Fixture::new();
    let old = f.open(&f.project("old"));
    let new = f.open(&f.project("new"));
    let (old_name, old_dir, new_dir) = (old.name.clone(), old.dir.clone(), new.dir.clone());
    old.close(false).unwrap();
    new.close(false).unwrap();
    set_last_used(&old_dir, 10 * DAY);
    set_last_used(&new_dir, DAY);
    let options = PruneOptions {
        older_than: Some(5 * DAY),
        dry_run: true,
        ..PruneOptions::default()
    };

    let results = f.prune(options.clone());
    assert_eq!(results.len(), 1);
    assert_eq!(results[0].name, old_name);
    assert_eq!(results[0].action, PruneAction::WouldRemove);
    assert!(results[0].size_bytes > 0);
    assert!(old_dir.is_dir(), "dry run removes nothing");

    let results = f.prune(PruneOptions {
        dry_run: false,
        ..options
    });
    assert_eq!(results[0].action, PruneAction::Removed);
    assert!(!old_dir.exists());
    assert!(new_dir.is_dir());
}

#[test]
fn prune_by_name_removes_only_that_root() {
    let f = Fixture::new();
    let (a, b) = (f.project("a"), f.project("b"));
    for p in [&a, &b] {
        f.open(p).close(false).unwrap();
    }
    let results = f.prune(PruneOptions {
        names: vec![sandbox_name(&a)],
        ..PruneOptions::default()
    });
    let names: Vec<&str> = results.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, [sandbox_name(&a)]);
    assert_eq!(results[0].action, PruneAction::Removed);
    assert!(f.sandboxes.join(sandbox_name(&b)).is_dir());
}

#[test]
fn prune_filters_combine_with_and() {
    let f = Fixture::new();
    let gone_recent = f.project("gone-recent");
    let gone_old = f.project("gone-old");
    let alive_old = f.project("alive-old");
    for p in [&gone_recent, &gone_old, &alive_old] {
        let s = f.open(p);
        let dir = s.dir.clone();
        s.close(false).unwrap();
        if p != &gone_recent {
            set_last_used(&dir, 40 * DAY);
        }
    }
    fs::remove_dir(&gone_recent).unwrap();
    fs::remove_dir(&gone_old).unwrap();
    let results = f.prune(PruneOptions {
        orphaned: true,
        older_than: Some(30 * DAY),
        dry_run: true,
        ..PruneOptions::default()
    });
    let names: Vec<&str> = results.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, [sandbox_name(&gone_old)]);
}

#[test]
fn list_without_sizes_skips_the_walk() {
    let f = Fixture::new();
    let s = f.open(&f.project("big"));
    fs::write(s.home.join("blob"), vec![7u8; 64 * 1024]).unwrap();
    s.close(false).unwrap();
    let unused = Path::new("/nonexistent");
    let infos = list_with(&f.sandboxes, unused, &ListOptions { sizes: false }).unwrap();
    assert_eq!((infos.len(), infos[0].size_bytes), (1, 0));
    assert!(f.list()[0].size_bytes >= 64 * 1024);
}

#[test]
fn prune_all_and_keep_the_most_recent() {
    let f = Fixture::new();
    let mut names = Vec::new();
    for (project, ago) in [("a", 3 * DAY), ("b", DAY), ("c", 2 * DAY), ("d", 4 * DAY)] {
        let s = f.open(&f.project(project));
        let (name, dir) = (s.name.clone(), s.dir.clone());
        s.close(false).unwrap();
        set_last_used(&dir, ago);
        names.push(name);
    }
    fs::create_dir_all(f.sandboxes.join("never-used")).unwrap();
    let selected = |options: PruneOptions| -> Vec<String> {
        let mut names: Vec<String> = f.prune(options).into_iter().map(|r| r.name).collect();
        names.sort();
        names
    };
    let dry = PruneOptions {
        dry_run: true,
        ..PruneOptions::default()
    };
    let mut everything = names.clone();
    everything.push("never-used".into());
    everything.sort();
    assert_eq!(
        selected(PruneOptions {
            all: true,
            ..dry.clone()
        }),
        everything
    );
    // b and c are the two used last; a root never used counts as the oldest.
    let mut older = vec![names[0].clone(), names[3].clone(), "never-used".into()];
    older.sort();
    assert_eq!(
        selected(PruneOptions {
            keep: Some(2),
            ..dry.clone()
        }),
        older
    );
    assert_eq!(
        selected(PruneOptions {
            keep: Some(10),
            ..dry.clone()
        }),
        Vec::<String>::new()
    );
    // With --older-than: the two kept are spared, the rest must also be old enough.
    assert_eq!(
        selected(PruneOptions {
            keep: Some(1),
            older_than: Some(2 * DAY + Duration::from_secs(3_600)),
            ..dry.clone()
        }),
        [names[0].clone(), names[3].clone()]
    );
    let results = f.prune(PruneOptions {
        keep: Some(2),
        ..PruneOptions::default()
    });
    assert!(results.iter().all(|r| r.action == PruneAction::Removed));
    let left: Vec<String> = f.list().into_iter().map(|i| i.name).collect();
    assert_eq!(left, [names[1].clone(), names[2].clone()]);
}

#[test]
fn prune_never_removes_a_live_sandbox() {
    let f = Fixture::new();
    let gone = f.project("gone");
    let s = f.open(&gone);
    fs::remove_dir(&gone).unwrap();
    for dry_run in [true, false] {
        let results = f.prune(PruneOptions {
            orphaned: true,
            dry_run,
            ..PruneOptions::default()
        });
        assert_eq!(results.len(), 1);
        assert_eq!(results[0].action, PruneAction::SkippedInUse);
        assert!(s.home.is_dir());
    }
    let dir = s.dir.clone();
    s.close(false).unwrap();
    // Other tests in this process fork (the seccomp and launch tests): a child forked while
    // the session was open holds a copy of its lock until it exits, so the lock may stay
    // taken for a few milliseconds after close. Prune only removes once nothing holds it.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let results = loop {
        let results = f.prune(PruneOptions {
            orphaned: true,
            ..PruneOptions::default()
        });
        if results[0].action != PruneAction::SkippedInUse || std::time::Instant::now() > deadline {
            break results;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    };
    assert_eq!(results[0].action, PruneAction::Removed);
    assert!(!dir.exists());
}
