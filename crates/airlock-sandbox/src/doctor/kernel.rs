//! The checks of the kernel's other security layers and host facts: Landlock (its ABI, or why it is
//! missing), seccomp filter mode (tried in a probe), the cgroup hierarchy and legacy TIOCSTI. Also the
//! kernel release helpers that other checks use to explain a failure.

use std::fs;
use std::io;

use super::probe::{PROBE_DEADLINE, ProbeOutcome, Step, run_probe, sys};
use super::{Check, Status};

// ---- landlock ----------------------------------------------------------------------------------

const LANDLOCK: &str = "landlock";

pub(super) fn check_landlock() -> Check {
    if let Some(abi) = crate::native::landlock::abi() {
        return Check::ok(LANDLOCK, format!("ABI version {abi}"));
    }
    let lsms = fs::read_to_string("/sys/kernel/security/lsm").ok();
    let detail = match lsms.as_deref().map(str::trim) {
        Some(list) if !list.split(',').any(|l| l == "landlock") => format!(
            "Landlock is not enabled (active security modules: {list}); airlock runs without its \
             second write-protection layer"
        ),
        _ => format!(
            "the kernel ({}) has no Landlock; airlock runs without its second write-protection layer",
            kernel_release()
        ),
    };
    Check::problem(
        LANDLOCK,
        Status::Warn,
        detail,
        "use a kernel >= 5.13 built with CONFIG_SECURITY_LANDLOCK and add landlock to the lsm= list on \
         the kernel command line (e.g. lsm=landlock,lockdown,yama,integrity,apparmor,bpf)",
    )
}

// ---- seccomp -----------------------------------------------------------------------------------

const SECCOMP: &str = "seccomp";

pub(super) fn check_seccomp() -> Check {
    // SAFETY: PR_GET_SECCOMP takes no pointers.
    let mode = unsafe { libc::prctl(libc::PR_GET_SECCOMP) };
    if mode < 0 {
        return Check::problem(
            SECCOMP,
            Status::Fail,
            format!(
                "prctl(PR_GET_SECCOMP) failed: {}",
                io::Error::last_os_error()
            ),
            "use a kernel built with CONFIG_SECCOMP and CONFIG_SECCOMP_FILTER",
        );
    }
    let allow_all = [libc::sock_filter {
        code: (libc::BPF_RET | libc::BPF_K) as u16,
        jt: 0,
        jf: 0,
        k: libc::SECCOMP_RET_ALLOW,
    }];
    let program = libc::sock_fprog {
        len: 1,
        filter: allow_all.as_ptr().cast_mut(),
    };
    let outcome = run_probe(PROBE_DEADLINE, |_| {
        // SAFETY: `program` points at `allow_all`, both alive for the call.
        unsafe {
            sys(
                Step::NoNewPrivs,
                libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0),
            )?;
            sys(
                Step::InstallFilter,
                libc::prctl(
                    libc::PR_SET_SECCOMP,
                    libc::SECCOMP_MODE_FILTER,
                    &program as *const libc::sock_fprog,
                ),
            )
        }
    });
    match outcome {
        ProbeOutcome::Passed => {
            let mut detail = "filter mode works".to_string();
            if mode == libc::SECCOMP_MODE_FILTER as i32 {
                detail.push_str(
                    " (airlock itself already runs under a filter, e.g. a container's; filters stack)",
                );
            }
            Check::ok(SECCOMP, detail)
        }
        other => Check::problem(
            SECCOMP,
            Status::Fail,
            other.describe(),
            "use a kernel built with CONFIG_SECCOMP_FILTER; in a container, allow prctl(PR_SET_SECCOMP)",
        ),
    }
}

// ---- cgroup ------------------------------------------------------------------------------------

const CGROUP: &str = "cgroup";

pub(super) fn check_cgroup() -> Check {
    use nix::sys::statfs::{CGROUP2_SUPER_MAGIC, TMPFS_MAGIC, statfs};
    let root = match statfs("/sys/fs/cgroup") {
        Ok(fs) => fs.filesystem_type(),
        Err(err) => {
            return Check::problem(
                CGROUP,
                Status::Warn,
                format!("no cgroup filesystem at /sys/fs/cgroup ({err})"),
                "mount cgroup v2 at /sys/fs/cgroup; resource limits will need it",
            );
        }
    };
    let unified = statfs("/sys/fs/cgroup/unified").map(|fs| fs.filesystem_type());
    let hierarchy = if root == CGROUP2_SUPER_MAGIC {
        CgroupHierarchy::V2
    } else if root == TMPFS_MAGIC && unified == Ok(CGROUP2_SUPER_MAGIC) {
        CgroupHierarchy::Hybrid
    } else if root == TMPFS_MAGIC {
        CgroupHierarchy::V1
    } else {
        CgroupHierarchy::Unknown
    };
    cgroup_row(hierarchy)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CgroupHierarchy {
    V2,
    Hybrid,
    V1,
    Unknown,
}

fn cgroup_row(hierarchy: CgroupHierarchy) -> Check {
    let detail = match hierarchy {
        CgroupHierarchy::V2 => return Check::ok(CGROUP, "v2 (unified hierarchy)"),
        CgroupHierarchy::Hybrid => "hybrid (v1 controllers, v2 at /sys/fs/cgroup/unified)",
        CgroupHierarchy::V1 => "v1",
        CgroupHierarchy::Unknown => "unrecognised filesystem at /sys/fs/cgroup",
    };
    Check::problem(
        CGROUP,
        Status::Warn,
        format!("{detail}; resource limits will need cgroup v2"),
        "boot with systemd.unified_cgroup_hierarchy=1 to switch to cgroup v2",
    )
}

// ---- TIOCSTI -----------------------------------------------------------------------------------

const TIOCSTI: &str = "tiocsti";

pub(super) fn check_tiocsti() -> Check {
    tiocsti_row(
        fs::read_to_string("/proc/sys/dev/tty/legacy_tiocsti"),
        kernel_version(&kernel_release()),
    )
}

fn tiocsti_row(sysctl: io::Result<String>, kernel: Option<(u32, u32)>) -> Check {
    let detail = match sysctl {
        Ok(value) if value.trim() == "1" => {
            "legacy TIOCSTI enabled on the host; airlock blocks it with seccomp".to_string()
        }
        Ok(value) if value.trim() == "0" => {
            "legacy TIOCSTI disabled on the host; airlock blocks it with seccomp as well"
                .to_string()
        }
        Ok(value) => format!(
            "dev.tty.legacy_tiocsti is {:?}; airlock blocks TIOCSTI with seccomp",
            value.trim()
        ),
        Err(err) if err.kind() == io::ErrorKind::NotFound && kernel.is_some_and(|v| v < (6, 2)) => {
            "this kernel (before 6.2) always allows TIOCSTI; airlock blocks it with seccomp"
                .to_string()
        }
        Err(err) => format!(
            "cannot read dev.tty.legacy_tiocsti ({err}); airlock blocks TIOCSTI with seccomp"
        ),
    };
    Check::ok(TIOCSTI, detail)
}

pub(super) fn kernel_release() -> String {
    fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown version".to_string())
}

/// `(major, minor)` of a release string like `6.18.0-1-amd64`.
pub(super) fn kernel_version(release: &str) -> Option<(u32, u32)> {
    let mut parts = release.split(|c: char| !c.is_ascii_digit());
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiocsti_row_is_informational() {
        let new_kernel = Some((6, 18));
        let row = tiocsti_row(Ok("1\n".to_string()), new_kernel);
        assert_eq!(row.status, Status::Ok);
        assert_eq!(
            row.detail,
            "legacy TIOCSTI enabled on the host; airlock blocks it with seccomp"
        );
        let row = tiocsti_row(Ok("0\n".to_string()), new_kernel);
        assert!(row.detail.contains("disabled"), "{}", row.detail);
        let missing = || Err(io::Error::from(io::ErrorKind::NotFound));
        let old = tiocsti_row(missing(), Some((5, 15)));
        assert_eq!(old.status, Status::Ok);
        assert!(old.detail.contains("before 6.2"), "{}", old.detail);
        let hidden = tiocsti_row(missing(), new_kernel);
        assert_eq!(hidden.status, Status::Ok);
        assert!(hidden.detail.contains("cannot read"), "{}", hidden.detail);
    }

    #[test]
    fn cgroup_rows() {
        assert_eq!(cgroup_row(CgroupHierarchy::V2).status, Status::Ok);
        for hierarchy in [
            CgroupHierarchy::V1,
            CgroupHierarchy::Hybrid,
            CgroupHierarchy::Unknown,
        ] {
            let row = cgroup_row(hierarchy);
            assert_eq!(row.status, Status::Warn);
            assert!(
                row.detail.contains("resource limits will need cgroup v2"),
                "{}",
                row.detail
            );
            assert!(row.fix.is_some());
        }
    }

    #[test]
    fn kernel_versions() {
        assert_eq!(kernel_version("6.18.0-1-amd64"), Some((6, 18)));
        assert_eq!(kernel_version("5.10.0"), Some((5, 10)));
        assert_eq!(kernel_version("unknown version"), None);
    }
}
