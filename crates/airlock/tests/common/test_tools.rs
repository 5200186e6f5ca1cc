//! The real tool binaries scripts/test fetches once into `$AIRLOCK_TEST_TOOLS` (bun, deno, uv,
//! mise), and placing one in a temp HOME as its installer would.

#![allow(dead_code)]

use std::fs;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

/// A real binary from the test-tools cache, or why the test skips.
pub fn cached(name: &str) -> Option<PathBuf> {
    let dir = std::env::var("AIRLOCK_TEST_TOOLS")
        .unwrap_or_else(|_| "/var/cache/airlock-test-tools".to_owned());
    let path = Path::new(&dir).join(name);
    if path.is_file() {
        Some(path)
    } else {
        eprintln!(
            "skipped: no {name} binary in {dir} (scripts/test fetches bun, deno, uv and mise there as root)"
        );
        None
    }
}

/// Copies `binary` to `to` (a real file, as the installers leave it), executable.
pub fn install(binary: &Path, to: &Path) {
    fs::create_dir_all(to.parent().expect("parent")).expect("dirs");
    fs::copy(binary, to).expect("copy binary");
    fs::set_permissions(to, fs::Permissions::from_mode(0o755)).expect("chmod");
}
