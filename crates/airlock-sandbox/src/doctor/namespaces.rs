//! The checks that enter a new user namespace: whether one can be created at all (and, if not, which
//! sysctl forbids it), whether a fresh `/proc` can be mounted in a new pid namespace, and whether an
//! overlay can be mounted there. Each runs as a probe (see `probe`).

use std::ffi::CString;
use std::fs;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use super::kernel::{kernel_release, kernel_version};
use super::probe::{
    IdMaps, PROBE_DEADLINE, ProbeOutcome, Step, StepFailure, errno, exit_probe,
    make_mounts_private, run_probe, sys,
};
use super::{Check, Status};

// ---- user namespaces ---------------------------------------------------------------------------

const USERNS: &str = "user namespaces";

pub(super) fn check_user_namespaces() -> Check {
    let outcome = run_probe(PROBE_DEADLINE, |_| {
        sys(Step::Unshare, unsafe {
            libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNS)
        })
    });
    match outcome {
        ProbeOutcome::Passed => {
            let mut detail = "new user and mount namespaces can be created".to_string();
            // Root bypasses every sysctl below; the answer may differ for the user who runs agents.
            // SAFETY: geteuid has no preconditions.
            if unsafe { libc::geteuid() } == 0 {
                detail.push_str(
                    " (checked as root: run `airlock doctor` as the user who runs agents)",
                );
            }
            Check::ok(USERNS, detail)
        }
        other => {
            let (cause, fix) = userns_diagnosis(
                read_sysctl("user/max_user_namespaces"),
                read_sysctl("kernel/unprivileged_userns_clone"),
                read_sysctl("kernel/apparmor_restrict_unprivileged_userns"),
            );
            Check::problem(
                USERNS,
                Status::Fail,
                format!("{}; {cause}", other.describe()),
                fix,
            )
        }
    }
}

/// The likely cause of a refused `unshare(CLONE_NEWUSER)` and its fix, from the sysctls that exist
/// (`None` = not present on this kernel).
fn userns_diagnosis(
    max_user_namespaces: Option<i64>,
    unprivileged_userns_clone: Option<i64>,
    apparmor_restrict: Option<i64>,
) -> (String, String) {
    let mut causes = Vec::new();
    let mut fixes = Vec::new();
    if max_user_namespaces == Some(0) {
        causes.push("user.max_user_namespaces is 0");
        fixes.push("sudo sysctl -w user.max_user_namespaces=15000");
    }
    if unprivileged_userns_clone == Some(0) {
        causes.push("kernel.unprivileged_userns_clone is 0 (Debian and older kernels)");
        fixes.push("sudo sysctl -w kernel.unprivileged_userns_clone=1");
    }
    if apparmor_restrict == Some(1) {
        causes.push("kernel.apparmor_restrict_unprivileged_userns is 1 (Ubuntu 23.10 and later)");
        fixes.push(
            "sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0 (or an AppArmor profile \
             that allows userns for airlock)",
        );
    }
    if causes.is_empty() {
        return (
            "no host sysctl forbids them, so a container or seccomp profile around airlock probably does"
                .to_string(),
            "run airlock on the host, or let its container create user namespaces (e.g. docker run \
             --security-opt seccomp=unconfined); check `sysctl user.max_user_namespaces` too"
                .to_string(),
        );
    }
    let fix = format!(
        "{}; make it permanent in /etc/sysctl.d/99-airlock.conf",
        fixes.join("; ")
    );
    (format!("cause: {}", causes.join(", ")), fix)
}

// ---- proc in a pid namespace -------------------------------------------------------------------

const PROC: &str = "proc in a pid namespace";

pub(super) fn check_proc_in_pid_namespace() -> Check {
    let maps = IdMaps::current();
    let outcome = run_probe(PROBE_DEADLINE, |report| {
        maps.enter_user_namespace(libc::CLONE_NEWNS | libc::CLONE_NEWPID)?;
        // Only a child of ours is inside the new pid namespace; it mounts proc there.
        // SAFETY: this probe child is single-threaded; the grandchild only makes raw system calls.
        match unsafe { libc::fork() } {
            -1 => Err(StepFailure::now(Step::ForkInPidNamespace)),
            0 => {
                let result = mount_fresh_proc();
                exit_probe(report, result)
            }
            pid => wait_for_grandchild(pid),
        }
    });
    match outcome {
        ProbeOutcome::Passed => {
            Check::ok(PROC, "a fresh /proc can be mounted in a new pid namespace")
        }
        ProbeOutcome::Failed {
            step: Step::MountProc,
            error,
        } => {
            let covered = covered_proc_mounts();
            let detail = format!(
                "mounting proc in a new pid namespace failed: {error}; {}",
                if covered.is_empty() {
                    "the kernel refused it".to_string()
                } else {
                    format!(
                        "the host's /proc is partly covered by other mounts ({}), so the kernel refuses a \
                         new proc in a user namespace (common inside containers)",
                        covered.join(", ")
                    )
                }
            );
            Check::problem(
                PROC,
                Status::Fail,
                detail,
                "run airlock outside the container, or give the container an uncovered /proc (docker: \
                 --security-opt systempaths=unconfined; podman: --security-opt unmask=ALL)",
            )
        }
        other => Check::problem(
            PROC,
            Status::Fail,
            other.describe(),
            "fix the user namespaces row first",
        ),
    }
}

/// Runs in the pid namespace's first process.
fn mount_fresh_proc() -> Result<(), StepFailure> {
    // SAFETY: raw system calls with static C strings.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
        make_mounts_private()?;
        sys(
            Step::MountProc,
            libc::mount(
                c"proc".as_ptr(),
                c"/proc".as_ptr(),
                c"proc".as_ptr(),
                libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                std::ptr::null(),
            ),
        )
    }
}

fn wait_for_grandchild(pid: libc::pid_t) -> Result<(), StepFailure> {
    let mut status = 0;
    loop {
        // SAFETY: waitpid on our own child with a valid status pointer.
        let rc = unsafe { libc::waitpid(pid, &mut status, 0) };
        if rc == pid {
            break;
        }
        if errno() != libc::EINTR {
            return Err(StepFailure::now(Step::ForkInPidNamespace));
        }
    }
    if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0 {
        Ok(())
    } else {
        Err(StepFailure::ALREADY_REPORTED)
    }
}

/// Mount points strictly under `/proc` in this process's view (what makes a new proc "too revealing").
fn covered_proc_mounts() -> Vec<String> {
    let Ok(mountinfo) = fs::read_to_string("/proc/self/mountinfo") else {
        return Vec::new();
    };
    mountinfo
        .lines()
        .filter_map(|line| line.split(' ').nth(4))
        .filter(|mount_point| mount_point.starts_with("/proc/"))
        .map(str::to_string)
        .collect()
}

// ---- overlayfs in a user namespace -------------------------------------------------------------

const OVERLAY: &str = "overlayfs in a user namespace";

pub(super) fn check_overlay() -> Check {
    let scratch = match ScratchDir::create() {
        Ok(dir) => dir,
        Err(err) => {
            return Check::problem(
                OVERLAY,
                Status::Warn,
                format!(
                    "cannot create a scratch directory in {}: {err}",
                    std::env::temp_dir().display()
                ),
                "make the temporary directory (TMPDIR) writable",
            );
        }
    };
    let Some(options) = scratch.overlay_options() else {
        return Check::problem(
            OVERLAY,
            Status::Warn,
            format!(
                "cannot test in {}: the path contains a comma, colon or NUL",
                scratch.0.display()
            ),
            "set TMPDIR to a plain path",
        );
    };
    let Ok(merged) = CString::new(scratch.0.join("merged").as_os_str().as_bytes()) else {
        return Check::problem(
            OVERLAY,
            Status::Warn,
            "bad scratch path".to_string(),
            "set TMPDIR",
        );
    };
    let with_userxattr = CString::new(format!("{},userxattr", options.to_string_lossy()));
    let maps = IdMaps::current();
    let outcome = run_probe(PROBE_DEADLINE, |_| {
        maps.enter_user_namespace(libc::CLONE_NEWNS)?;
        make_mounts_private()?;
        let mount = |data: &CString| {
            // SAFETY: valid C strings for the call.
            unsafe {
                libc::mount(
                    c"overlay".as_ptr(),
                    merged.as_ptr(),
                    c"overlay".as_ptr(),
                    0,
                    data.as_ptr().cast(),
                )
            }
        };
        let rc = mount(&options);
        // Some kernels accept an unprivileged overlay only with user.* xattrs; try that form too.
        if rc != 0
            && errno() == libc::EINVAL
            && let Ok(data) = &with_userxattr
        {
            return sys(Step::MountOverlay, mount(data));
        }
        sys(Step::MountOverlay, rc)
    });
    let tested_in = scratch
        .0
        .parent()
        .unwrap_or(Path::new("/"))
        .display()
        .to_string();
    drop(scratch);
    match outcome {
        ProbeOutcome::Passed => Check::ok(
            OVERLAY,
            format!("an overlay can be mounted in a user namespace (tested in {tested_in})"),
        ),
        other => {
            let release = kernel_release();
            let fix = match kernel_version(&release) {
                _ if other.failed_entering_user_namespace() => {
                    "fix the user namespaces row first".to_string()
                }
                Some(version) if version < (5, 11) => "use a kernel >= 5.11".to_string(),
                _ => format!(
                    "check that {tested_in} is on a filesystem that supports overlay upper dirs \
                     (ext4, xfs, btrfs, tmpfs)"
                ),
            };
            Check::problem(
                OVERLAY,
                Status::Warn,
                format!(
                    "{} (kernel {release}); tool configs in overlay mode cannot be used",
                    other.describe()
                ),
                fix,
            )
        }
    }
}

/// `<tmp>/airlock-doctor-<pid>-<nanos>/{lower,upper,work,merged}`, removed on drop.
struct ScratchDir(PathBuf);

impl ScratchDir {
    fn create() -> io::Result<ScratchDir> {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let base =
            std::env::temp_dir().join(format!("airlock-doctor-{}-{nanos}", std::process::id()));
        fs::DirBuilder::new().mode(0o700).create(&base)?;
        let dir = ScratchDir(base);
        for sub in ["lower", "upper", "work", "merged"] {
            fs::DirBuilder::new().mode(0o700).create(dir.0.join(sub))?;
        }
        Ok(dir)
    }

    fn overlay_options(&self) -> Option<CString> {
        let path = self.0.to_str()?;
        if path.contains([',', ':', '\0']) {
            return None;
        }
        CString::new(format!(
            "lowerdir={path}/lower,upperdir={path}/upper,workdir={path}/work"
        ))
        .ok()
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        // The kernel leaves `work/work` with mode 000; remove_tree copes with that.
        let _ = crate::state::remove_tree(&self.0);
    }
}

fn read_sysctl(name: &str) -> Option<i64> {
    fs::read_to_string(Path::new("/proc/sys").join(name))
        .ok()?
        .trim()
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn userns_diagnosis_names_the_sysctl_that_blocks() {
        let (cause, fix) = userns_diagnosis(Some(0), None, None);
        assert!(cause.contains("user.max_user_namespaces is 0"), "{cause}");
        assert!(fix.contains("sysctl -w user.max_user_namespaces="), "{fix}");

        let (cause, fix) = userns_diagnosis(Some(15000), Some(0), None);
        assert!(
            cause.contains("kernel.unprivileged_userns_clone is 0"),
            "{cause}"
        );
        assert!(fix.contains("kernel.unprivileged_userns_clone=1"), "{fix}");
        assert!(!fix.contains("max_user_namespaces"), "{fix}");

        let (cause, fix) = userns_diagnosis(Some(15000), None, Some(1));
        assert!(
            cause.contains("apparmor_restrict_unprivileged_userns is 1"),
            "{cause}"
        );
        assert!(
            fix.contains("kernel.apparmor_restrict_unprivileged_userns=0"),
            "{fix}"
        );

        let (cause, fix) = userns_diagnosis(Some(15000), Some(1), Some(0));
        assert!(cause.contains("container"), "{cause}");
        assert!(fix.contains("user.max_user_namespaces"), "{fix}");
    }
}
