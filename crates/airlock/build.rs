//! Stamps `airlock --version` with the git commit and the build date:
//! `airlock 0.1.0 (abc123def456 2026-12-01)`, `-dirty` after the commit when tracked files had
//! uncommitted changes, `unknown` when there is no git (a source tarball, crates.io).
//!
//! The script runs again only when HEAD or a ref moves (and when SOURCE_DATE_EPOCH changes), so an
//! ordinary edit-and-build does not rebuild the crate for a new stamp.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

fn main() {
    let manifest_dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let commit = match git(&manifest_dir, &["rev-parse", "--short=12", "HEAD"]) {
        Some(commit) => {
            watch_git(&manifest_dir);
            let dirty = git(
                &manifest_dir,
                &["status", "--porcelain", "--untracked-files=no"],
            )
            .is_some_and(|status| !status.is_empty());
            if dirty {
                format!("{commit}-dirty")
            } else {
                commit
            }
        }
        None => "unknown".to_owned(),
    };
    println!("cargo:rerun-if-env-changed=SOURCE_DATE_EPOCH");
    println!("cargo:rustc-env=AIRLOCK_GIT_COMMIT={commit}");
    println!("cargo:rustc-env=AIRLOCK_BUILD_DATE={}", build_date());
}

/// `git ARGS` in `dir`: its trimmed stdout, or None when git is missing or fails.
fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// Asks cargo to run this script again when HEAD, the branch it names or the packed refs change
/// (in a linked worktree HEAD is in the worktree's git dir, the refs in the common one).
fn watch_git(dir: &Path) {
    let absolute = |p: String| {
        let p = PathBuf::from(p);
        if p.is_absolute() { p } else { dir.join(p) }
    };
    let Some(git_dir) = git(dir, &["rev-parse", "--git-dir"]).map(absolute) else {
        return;
    };
    let common = git(dir, &["rev-parse", "--git-common-dir"])
        .map(absolute)
        .unwrap_or_else(|| git_dir.clone());
    let mut watched = vec![git_dir.join("HEAD"), common.join("packed-refs")];
    if let Some(branch) = git(dir, &["symbolic-ref", "-q", "HEAD"]) {
        watched.push(common.join(branch));
    }
    // Only paths that exist: cargo reruns the script on every build while a watched path is
    // missing (and rebuilds the crate with it). A fresh clone has no packed-refs; when `git
    // pack-refs` makes one, it removes the branch's loose ref, which is watched.
    for path in watched.iter().filter(|p| p.exists()) {
        println!("cargo:rerun-if-changed={}", path.display());
    }
}

/// `YYYY-MM-DD` in UTC, of SOURCE_DATE_EPOCH when set (reproducible builds), else of now.
fn build_date() -> String {
    let secs = match std::env::var("SOURCE_DATE_EPOCH") {
        Ok(value) => value.trim().parse::<i64>().unwrap_or_else(|_| {
            panic!(
                "SOURCE_DATE_EPOCH={value:?} is not a number of seconds since 1970; \
                 set it to unix seconds (e.g. `git log -1 --format=%ct`) or unset it"
            )
        }),
        Err(_) => SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64),
    };
    let (y, m, d) = civil_from_days(secs.div_euclid(86_400));
    format!("{y:04}-{m:02}-{d:02}")
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (Howard Hinnant's algorithm),
/// so the script needs neither `date` nor a crate.
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}
