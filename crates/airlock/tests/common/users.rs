//! Running a test's programs as the unprivileged test user (as root only): who that is, a
//! command switched to it, and a tree handed to it.

#![allow(dead_code)]

use std::fs;
use std::os::unix::process::CommandExt as _;
use std::path::Path;
use std::process::Command;

/// The unprivileged account (root only): `AIRLOCK_TEST_USER`, else `airlock-test`, else nobody.
pub fn other_user() -> Option<(u32, u32)> {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return None;
    }
    let wanted = std::env::var("AIRLOCK_TEST_USER").unwrap_or_else(|_| "airlock-test".into());
    for name in [wanted.as_str(), "nobody"] {
        let cname = std::ffi::CString::new(name).unwrap();
        // SAFETY: the record is copied out at once.
        let pw = unsafe { libc::getpwnam(cname.as_ptr()) };
        if !pw.is_null() {
            // SAFETY: a non-null record from getpwnam.
            return Some(unsafe { ((*pw).pw_uid, (*pw).pw_gid) });
        }
    }
    None
}

/// Makes `cmd` run as uid:gid.
pub fn as_user(cmd: &mut Command, (uid, gid): (u32, u32)) {
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            if libc::setgroups(0, std::ptr::null()) != 0
                || libc::setgid(gid) != 0
                || libc::setuid(uid) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

pub fn chown_tree(path: &Path, (uid, gid): (u32, u32)) {
    let _ = std::os::unix::fs::lchown(path, Some(uid), Some(gid));
    if path.is_dir() && !path.is_symlink() {
        for entry in fs::read_dir(path).unwrap().flatten() {
            chown_tree(&entry.path(), (uid, gid));
        }
    }
}
