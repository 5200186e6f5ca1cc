use super::*;
use std::os::unix::fs::PermissionsExt;

struct Fixture {
    tmp: tempfile::TempDir,
    store: PathBuf,
}

fn fixture() -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("state/airlock/trust.json");
    Fixture { tmp, store }
}

impl Fixture {
    fn project(&self, name: &str, text: Option<&str>) -> PathBuf {
        let dir = self.tmp.path().join(name);
        fs::create_dir_all(&dir).unwrap();
        if let Some(text) = text {
            fs::write(dir.join(PROJECT_FILE_NAME), text).unwrap();
        }
        dir
    }
}

#[test]
fn sha256_is_lower_hex() {
    assert_eq!(
        sha256_hex(b"abc"),
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
}

#[test]
fn missing_store_is_empty() {
    let fx = fixture();
    let store = TrustStore::load(&fx.store).unwrap();
    assert!(store.entries().is_empty());
    assert_eq!(store.status(Path::new("/p"), b""), TrustStatus::Untrusted);
}

#[test]
fn add_save_load_roundtrip_and_status() {
    let fx = fixture();
    let text = "[sandbox]\nnetwork = \"none\"\n";
    let dir = fx.project("p", Some(text));
    let mut store = TrustStore::load(&fx.store).unwrap();
    let record = store.add(&dir).unwrap();
    assert_eq!(record.sha256, sha256_hex(text.as_bytes()));
    assert!(record.trusted_at > 1_600_000_000);
    store.save().unwrap();

    let store = TrustStore::load(&fx.store).unwrap();
    assert_eq!(store.get(&dir), Some(&record));
    assert_eq!(store.status(&dir, text.as_bytes()), TrustStatus::Trusted);
    assert_eq!(store.status(&dir, b"[sandbox]\n"), TrustStatus::Changed);
    assert_eq!(
        store.status(&fx.tmp.path().join("other"), text.as_bytes()),
        TrustStatus::Untrusted
    );

    let json: serde_json::Value = serde_json::from_slice(&fs::read(&fx.store).unwrap()).unwrap();
    assert_eq!(
        json,
        serde_json::json!({
            "version": 1,
            "projects": { dir.to_str().unwrap(): {
                "sha256": record.sha256, "trusted_at": record.trusted_at } }
        })
    );
}

#[test]
fn add_requires_an_existing_valid_file() {
    let fx = fixture();
    let mut store = TrustStore::load(&fx.store).unwrap();

    let empty = fx.project("empty", None);
    let err = store.add(&empty).unwrap_err();
    assert!(matches!(err, ConfigError::NoProjectFile { .. }), "{err}");
    assert!(err.to_string().contains(".airlock.toml"), "{err}");

    let bad = fx.project("bad", Some("[sandbox]\nnetwrk = \"none\"\n"));
    let err = store.add(&bad).unwrap_err();
    assert!(matches!(err, ConfigError::Parse { .. }), "{err}");

    let err = store.add(Path::new("relative/dir")).unwrap_err();
    assert!(matches!(err, ConfigError::RelativeDir { .. }), "{err}");

    assert!(store.entries().is_empty(), "nothing was trusted");
}

#[test]
fn remove() {
    let fx = fixture();
    let dir = fx.project("p", Some(""));
    let mut store = TrustStore::load(&fx.store).unwrap();
    store.add(&dir).unwrap();
    assert!(store.remove(&dir).unwrap());
    assert!(!store.remove(&dir).unwrap());
    store.save().unwrap();
    let store = TrustStore::load(&fx.store).unwrap();
    assert_eq!(store.status(&dir, b""), TrustStatus::Untrusted);
}

#[test]
fn entries_report_trusted_changed_and_missing() {
    let fx = fixture();
    let same = fx.project("a-same", Some("[sandbox]\n"));
    let changed = fx.project("b-changed", Some("[sandbox]\n"));
    let gone = fx.project("c-gone", Some("[sandbox]\n"));
    let mut store = TrustStore::load(&fx.store).unwrap();
    for d in [&same, &changed, &gone] {
        store.add(d).unwrap();
    }
    fs::write(
        changed.join(PROJECT_FILE_NAME),
        "[sandbox]\nnetwork = \"host\"\n",
    )
    .unwrap();
    fs::remove_dir_all(&gone).unwrap();

    let got: Vec<(PathBuf, EntryStatus)> = store
        .entries()
        .into_iter()
        .map(|e| (e.dir, e.status))
        .collect();
    assert_eq!(
        got,
        [
            (same, EntryStatus::Trusted),
            (changed, EntryStatus::Changed),
            (gone, EntryStatus::Missing),
        ]
    );
}

#[test]
fn save_is_atomic_and_private() {
    let fx = fixture();
    let dir = fx.project("p", Some(""));
    let mut store = TrustStore::load(&fx.store).unwrap();
    store.add(&dir).unwrap();
    store.save().unwrap();
    store.save().unwrap(); // replacing an existing file works too

    let parent = fx.store.parent().unwrap();
    let names: Vec<String> = fs::read_dir(parent)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["trust.json"], "no temp file left behind");
    let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&fx.store), 0o600);
    assert_eq!(mode(parent), 0o700);
    assert_eq!(mode(parent.parent().unwrap()), 0o700);
}

#[test]
fn failed_save_leaves_no_temp_file() {
    let fx = fixture();
    // The target is a non-empty directory, so the rename fails after the temp file is written.
    fs::create_dir_all(fx.store.join("x")).unwrap();
    let store = TrustStore::load(&fx.tmp.path().join("missing.json")).unwrap();
    let store = TrustStore {
        path: fx.store.clone(),
        ..store
    };
    let err = store.save().unwrap_err();
    assert!(matches!(err, ConfigError::Write { .. }), "{err}");
    let names: Vec<_> = fs::read_dir(fx.store.parent().unwrap()).unwrap().collect();
    assert_eq!(names.len(), 1, "only the blocking directory remains");
}

#[test]
fn corrupt_stores_are_errors_that_say_how_to_fix() {
    let fx = fixture();
    fs::create_dir_all(fx.store.parent().unwrap()).unwrap();
    let hex = "a".repeat(64);
    for bad in [
        "not json".to_string(),
        r#"{"version":2,"projects":{}}"#.to_string(),
        r#"{"version":1}"#.to_string(),
        r#"{"version":1,"projects":{},"extra":1}"#.to_string(),
        format!(r#"{{"version":1,"projects":{{"rel/dir":{{"sha256":"{hex}","trusted_at":1}}}}}}"#),
        r#"{"version":1,"projects":{"/p":{"sha256":"XYZ","trusted_at":1}}}"#.to_string(),
        format!(r#"{{"version":1,"projects":{{"/p":{{"sha256":"{hex}","trusted_at":1,"x":2}}}}}}"#),
    ] {
        fs::write(&fx.store, &bad).unwrap();
        let err = TrustStore::load(&fx.store).unwrap_err();
        let msg = err.to_string();
        assert!(
            matches!(err, ConfigError::TrustStoreCorrupt { .. }),
            "{bad}: {msg}"
        );
        assert!(msg.contains(&fx.store.display().to_string()), "{msg}");
        assert!(
            msg.contains("remove it") && msg.contains("airlock trust add"),
            "{msg}"
        );
    }
    let good =
        format!(r#"{{"version":1,"projects":{{"/p":{{"sha256":"{hex}","trusted_at":1}}}}}}"#);
    fs::write(&fx.store, good).unwrap();
    let store = TrustStore::load(&fx.store).unwrap();
    assert_eq!(store.status(Path::new("/p"), b"x"), TrustStatus::Changed);
}

/// The trust store is host-written, but a damaged one must still fail cleanly, never panic.
#[test]
fn truncated_stores_never_panic() {
    let hex = "a".repeat(64);
    let good =
        format!(r#"{{"version":1,"projects":{{"/p":{{"sha256":"{hex}","trusted_at":1}}}}}}"#);
    for end in 0..good.len() {
        assert!(
            decode(&good.as_bytes()[..end]).is_err(),
            "prefix {end} accepted"
        );
    }
    assert!(decode(good.as_bytes()).is_ok());
}
