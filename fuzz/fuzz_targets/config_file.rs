//! The config loader (`airlock_config::parse_bytes`, behind `parse_file` and the trust store): the
//! bytes of a config file, the project's `.airlock.toml` among them, which the sandbox can write.
//!
//! Beyond "no panic": every error names the file; an accepted file passes its own validation (no
//! empty, `=`- or NUL-holding env names, no empty or NUL-holding mount paths), reads back the same
//! after serialising it again, and layers into a profile without duplicate env names.
#![no_main]

use std::path::Path;

use airlock_config::{ConfigFile, Profile, parse_bytes, parse_str};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let origin = Path::new("/fuzz/.airlock.toml");
    let file: ConfigFile = match parse_bytes(data, origin) {
        Ok(file) => file,
        Err(e) => {
            let message = e.to_string();
            assert!(message.contains("/fuzz/.airlock.toml"), "{message}");
            return;
        }
    };
    assert!(file.validate(origin).is_ok());
    for name in &file.sandbox.env_passthrough {
        assert!(!name.is_empty() && !name.contains(['=', '\0']), "{name:?}");
    }
    for mount in &file.sandbox.mounts {
        // Exactly one of `path` and `pattern` (validate refuses both and neither).
        let text = match (&mount.path, &mount.pattern) {
            (Some(path), None) | (None, Some(path)) => path,
            other => panic!("a validated mount has one of path and pattern: {other:?}"),
        };
        assert!(!text.is_empty() && !text.contains('\0'));
    }
    if let Ok(text) = toml::to_string(&file) {
        let again = parse_str(&text, origin).unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(again, file, "{text}");
    }
    let global = Path::new("/fuzz/config.toml");
    let profile = Profile::layer(Some((global, &file)), Some((origin, &file)));
    let mut names = profile.env_passthrough.clone();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), profile.env_passthrough.len());
    assert_eq!(profile.mounts.len(), 2 * file.sandbox.mounts.len());
});
