use std::os::unix::fs::MetadataExt as _;
use std::path::Path;

use super::*;
use crate::spec::Upper;

fn bind(source: &Path, target: &str) -> MountOp {
    MountOp::Bind {
        source: source.to_path_buf(),
        target: target.into(),
        writable: false,
    }
}

fn spec_with(mounts: Vec<MountOp>) -> SandboxSpec {
    let mut spec: SandboxSpec =
        serde_json::from_str(include_str!("../../backend/bwrap/testdata/spec.json"))
            .expect("the fixture spec");
    spec.mounts = mounts;
    spec
}

fn id(path: &Path) -> FileId {
    let m = std::fs::metadata(path).expect("stat");
    (m.dev(), m.ino())
}

#[test]
fn a_root_with_persistent_overlays_is_recorded_when_they_can_be_mounted_last() {
    let dir = tempfile::tempdir().expect("tempdir");
    let overlay = |target: &str| MountOp::Overlay {
        lower: dir.path().into(),
        target: target.into(),
        upper: Upper::Persistent {
            dir: dir.path().join("layers"),
        },
    };
    let last = spec_with(vec![
        bind(dir.path(), "/home/u"),
        overlay("/home/u/.claude"),
        bind(dir.path(), "/home/u/.rustup"),
        overlay("/home/u/.cargo/registry"),
        bind(dir.path(), "/home/u/.cargo/bin"),
    ]);
    assert!(root_bytes(&last).is_some());
    // A later mount beneath it, at it or above it would come out another tree.
    for later in ["/home/u/.claude/x", "/home/u/.claude", "/home/u", "/"] {
        let spec = spec_with(vec![overlay("/home/u/.claude"), bind(dir.path(), later)]);
        assert_eq!(
            root_bytes(&spec),
            None,
            "a mount at {later} after the overlay"
        );
    }
    // Another session's layers, seen stacked: never built ahead.
    let stacked = spec_with(vec![MountOp::Overlay {
        lower: dir.path().into(),
        target: "/o".into(),
        upper: Upper::Stacked {
            dir: dir.path().join("layers"),
        },
    }]);
    assert_eq!(root_bytes(&stacked), None);
}

#[test]
fn a_root_with_a_throwaway_overlay_or_a_copy_is_never_recorded() {
    let dir = tempfile::tempdir().expect("tempdir");
    let plain = spec_with(vec![bind(dir.path(), "/d")]);
    assert!(root_bytes(&plain).is_some());
    let overlay = spec_with(vec![MountOp::Overlay {
        lower: dir.path().into(),
        target: "/o".into(),
        upper: Upper::Throwaway,
    }]);
    assert_eq!(root_bytes(&overlay), None);
    let copy = spec_with(vec![MountOp::CopyFile {
        source: dir.path().join("f"),
        target: "/f".into(),
    }]);
    assert_eq!(root_bytes(&copy), None);
}

#[test]
fn the_record_is_what_the_root_build_reads() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut spec = spec_with(vec![bind(dir.path(), "/d")]);
    let before = root_bytes(&spec).expect("plain");
    spec.env.insert("OTHER".into(), "x".into());
    spec.argv = vec!["other".into()];
    assert_eq!(
        root_bytes(&spec).as_ref(),
        Some(&before),
        "env and argv are not the root's"
    );
    spec.hostname = "other".into();
    assert_ne!(root_bytes(&spec).as_ref(), Some(&before), "the hostname is");
    spec.hostname = spec_with(vec![]).hostname;
    spec.limits.tmpfs_bytes += 1;
    assert_ne!(
        root_bytes(&spec).as_ref(),
        Some(&before),
        "the tmpfs size is"
    );
}

#[test]
fn sources_match_only_while_each_path_holds_the_file_init_bound() {
    let dir = tempfile::tempdir().expect("tempdir");
    let a = dir.path().join("a");
    let b = dir.path().join("b");
    std::fs::create_dir(&a).expect("a");
    std::fs::write(&b, "b").expect("b");
    let spec = spec_with(vec![
        bind(&a, "/a"),
        MountOp::Tmpfs {
            target: "/t".into(),
            writable: true,
        },
        bind(&b, "/b"),
    ]);
    let ids = [id(&a), id(&b)];
    assert_eq!(Sources::now(&spec).bound_as(&ids), Ok(()));
    // The control above; now the attack: `b` replaced (a rename over it, as a rewrite does),
    // found by a lookup after the swap, and by one before it when init bound the new file.
    let before = Sources::now(&spec);
    let fresh = dir.path().join("b.new");
    std::fs::write(&fresh, "other").expect("b.new");
    std::fs::rename(&fresh, &b).expect("rename");
    assert_eq!(
        Sources::now(&spec).bound_as(&ids),
        Err(Refused::Moved(b.clone()))
    );
    assert_eq!(
        before.bound_as(&[ids[0], id(&b)]),
        Err(Refused::Moved(b.clone()))
    );
    // A directory swapped for a link to another one.
    let other = dir.path().join("other");
    std::fs::create_dir(&other).expect("other");
    std::fs::remove_dir(&a).expect("rmdir");
    std::os::unix::fs::symlink(&other, &a).expect("symlink");
    assert_eq!(
        Sources::now(&spec).bound_as(&[ids[0], id(&b)]),
        Err(Refused::Moved(a.clone()))
    );
    // Gone, or a count that does not match.
    std::fs::remove_file(&a).expect("rm link");
    assert_eq!(
        Sources::now(&spec).bound_as(&[ids[0], id(&b)]),
        Err(Refused::Moved(a))
    );
    let one = spec_with(vec![bind(&b, "/b")]);
    assert_eq!(
        Sources::now(&one).bound_as(&[id(&b), id(&b)]),
        Err(Refused::Changed)
    );
}

#[test]
fn a_report_confirms_only_the_planned_root() {
    let dir = tempfile::tempdir().expect("tempdir");
    let spec = spec_with(vec![bind(dir.path(), "/d")]);
    let planned = root_bytes(&spec).expect("plain");
    let hash: [u8; 32] = Sha256::digest(&planned).into();
    let report = |built| Report { built };
    let ok = report(Some(Built {
        hash,
        sources: vec![id(dir.path())],
    }));
    assert_eq!(ok.confirms(Some(&planned), &Sources::now(&spec)), Ok(()));
    assert_eq!(
        ok.confirms(None, &Sources::now(&spec)),
        Err(Refused::Changed)
    );
    let mut other = planned.clone();
    other.push(b' ');
    assert_eq!(
        ok.confirms(Some(&other), &Sources::now(&spec)),
        Err(Refused::Changed)
    );
    assert_eq!(
        report(None).confirms(Some(&planned), &Sources::now(&spec)),
        Err(Refused::NotBuilt)
    );
}

#[test]
fn the_mark_follows_what_the_launches_found() {
    let (a, b): (&[u8], &[u8]) = (b"root a", b"root b");
    let moved = Refused::Moved("/x".into());
    // First launch: record, to build ahead next time.
    assert_eq!(next(None, Some(a), None), Some(Ahead::Build));
    // Built ahead and used: nothing to write.
    assert_eq!(next(Some((Ahead::Build, a)), Some(a), Some(&Ok(()))), None);
    // Another root: record it, not to be built ahead until it repeats.
    let changed = Some(&Err(Refused::Changed));
    assert_eq!(
        next(Some((Ahead::Build, a)), Some(b), changed),
        Some(Ahead::Changed)
    );
    assert_eq!(
        next(Some((Ahead::Changed, b)), Some(b), None),
        Some(Ahead::Build)
    );
    // A root that differs every launch (a per-session path) stays not built ahead.
    assert_eq!(
        next(Some((Ahead::Changed, a)), Some(b), None),
        Some(Ahead::Changed)
    );
    // Files that moved: not built ahead again until the root changes.
    assert_eq!(
        next(Some((Ahead::Build, a)), Some(a), Some(&Err(moved))),
        Some(Ahead::Moved)
    );
    assert_eq!(next(Some((Ahead::Moved, a)), Some(a), None), None);
    assert_eq!(
        next(Some((Ahead::Moved, a)), Some(b), None),
        Some(Ahead::Changed)
    );
    // Init could not build it (a generated file not written yet): try again when it repeats.
    let unbuilt = Some(&Err(Refused::NotBuilt));
    assert_eq!(
        next(Some((Ahead::Build, a)), Some(a), unbuilt),
        Some(Ahead::Changed)
    );
    // A root never built ahead (an overlay): the record goes.
    assert_eq!(next(Some((Ahead::Build, a)), None, None), None);
}

#[test]
fn saving_writes_the_mark_and_the_root_and_removes_a_record_of_no_use() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = path_in(dir.path());
    Record::new(path.clone(), Some(b"root".to_vec()), false, None).save();
    assert_eq!(std::fs::read(&path).expect("record"), b"1nroot");
    assert_eq!(builds_ahead_on_host_network(&path), Some(false));
    // The same root on the host's network: the namespaces differ, so the record is rewritten.
    Record::new(path.clone(), Some(b"root".to_vec()), true, Some(Ok(()))).save();
    assert_eq!(std::fs::read(&path).expect("record"), b"1hroot");
    assert_eq!(builds_ahead_on_host_network(&path), Some(true));
    let moved = Err(Refused::Moved("/x".into()));
    Record::new(path.clone(), Some(b"root".to_vec()), true, Some(moved)).save();
    assert_eq!(std::fs::read(&path).expect("record"), b"-hroot");
    assert_eq!(builds_ahead_on_host_network(&path), None);
    Record::new(path.clone(), None, true, None).save();
    assert!(!path.exists());
    assert_eq!(builds_ahead_on_host_network(&path), None);
}

#[test]
fn a_report_of_more_binds_than_planned_is_received_as_such_and_refused() {
    use std::os::fd::AsRawFd as _;
    let dir = tempfile::tempdir().expect("tempdir");
    let spec = spec_with(vec![bind(dir.path(), "/d")]);
    let planned = root_bytes(&spec).expect("plain");
    let hash: [u8; 32] = Sha256::digest(&planned).into();
    let sources = Sources::now(&spec);
    let message = |ids: usize| {
        let mut m = vec![BUILT];
        m.extend_from_slice(&hash);
        for _ in 0..ids {
            let (dev, ino) = id(dir.path());
            m.extend_from_slice(&dev.to_le_bytes());
            m.extend_from_slice(&ino.to_le_bytes());
        }
        m
    };
    let (ours, init) = crate::native::launch::launch_socket().expect("socketpair");
    // The planned report is received whole and confirmed.
    crate::native::child::send(init.as_raw_fd(), BUILT, &message(1)[1..]);
    let report = Report::receive(ours.as_raw_fd(), &sources);
    assert_eq!(report.confirms(Some(&planned), &sources), Ok(()));
    // Far more ids than the buffer holds: cut to it, still more than planned, refused.
    crate::native::child::send(init.as_raw_fd(), BUILT, &message(40)[1..]);
    let report = Report::receive(ours.as_raw_fd(), &sources);
    assert_eq!(
        report.built.as_ref().map(|b| b.sources.len()),
        Some(2),
        "cut to the planned ids and one more"
    );
    assert_eq!(
        report.confirms(Some(&planned), &sources),
        Err(Refused::Changed)
    );
}
