//! Host checks for `airlock doctor`: can this machine run the native backend, and with which layers?
//!
//! Each check that needs a kernel feature tries it for real in a forked child (a probe) rather than
//! guessing from version numbers, and reads the relevant sysctls only to explain a failure. Probes are
//! killed after a deadline, so `doctor` never hangs.

use std::ffi::CString;
use std::fs;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::Serialize;

/// How a check came out. Serialises as `ok`, `warn`, `fail`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Works (or is informational only).
    Ok,
    /// Works with a weaker or missing layer; airlock still runs.
    Warn,
    /// The native backend cannot run until this is fixed.
    Fail,
}

/// One row of `airlock doctor` (also its `--json` object).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    pub name: &'static str,
    pub status: Status,
    pub detail: String,
    /// What to do about a `warn` or `fail`.
    pub fix: Option<String>,
}

impl Check {
    fn ok(name: &'static str, detail: impl Into<String>) -> Check {
        Check {
            name,
            status: Status::Ok,
            detail: detail.into(),
            fix: None,
        }
    }

    fn problem(
        name: &'static str,
        status: Status,
        detail: String,
        fix: impl Into<String>,
    ) -> Check {
        Check {
            name,
            status,
            detail,
            fix: Some(fix.into()),
        }
    }
}

/// Runs every host check, in display order.
pub fn run_checks() -> Vec<Check> {
    vec![
        check_user_namespaces(),
        check_proc_in_pid_namespace(),
        check_landlock(),
        check_seccomp(),
        check_overlay(),
        check_cgroup(),
        check_tiocsti(),
    ]
}

// ---- user namespaces ---------------------------------------------------------------------------

const USERNS: &str = "user namespaces";

fn check_user_namespaces() -> Check {
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

fn check_proc_in_pid_namespace() -> Check {
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

// ---- landlock ----------------------------------------------------------------------------------

const LANDLOCK: &str = "landlock";

fn check_landlock() -> Check {
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

fn check_seccomp() -> Check {
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

// ---- overlayfs in a user namespace -------------------------------------------------------------

const OVERLAY: &str = "overlayfs in a user namespace";

fn check_overlay() -> Check {
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

// ---- cgroup ------------------------------------------------------------------------------------

const CGROUP: &str = "cgroup";

fn check_cgroup() -> Check {
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

fn check_tiocsti() -> Check {
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

// ---- probes: forked children that try a kernel feature -----------------------------------------

/// Longest a probe may take before it is killed; real probes finish in milliseconds.
const PROBE_DEADLINE: Duration = Duration::from_secs(2);

/// The step of a probe that failed, reported by the child as one byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum Step {
    Unshare,
    Setgroups,
    UidMap,
    GidMap,
    MakePrivate,
    ForkInPidNamespace,
    MountProc,
    NoNewPrivs,
    InstallFilter,
    MountOverlay,
    /// Only in tests.
    #[cfg(test)]
    Test,
}

impl Step {
    const ALL: &'static [Step] = &[
        Step::Unshare,
        Step::Setgroups,
        Step::UidMap,
        Step::GidMap,
        Step::MakePrivate,
        Step::ForkInPidNamespace,
        Step::MountProc,
        Step::NoNewPrivs,
        Step::InstallFilter,
        Step::MountOverlay,
        #[cfg(test)]
        Step::Test,
    ];

    fn describe(self) -> &'static str {
        match self {
            Step::Unshare => "creating the namespaces (unshare)",
            Step::Setgroups => "writing /proc/self/setgroups",
            Step::UidMap => "writing /proc/self/uid_map",
            Step::GidMap => "writing /proc/self/gid_map",
            Step::MakePrivate => "making the mount tree private",
            Step::ForkInPidNamespace => "forking into the new pid namespace",
            Step::MountProc => "mounting proc",
            Step::NoNewPrivs => "prctl(PR_SET_NO_NEW_PRIVS)",
            Step::InstallFilter => "installing a seccomp filter",
            Step::MountOverlay => "mounting an overlay",
            #[cfg(test)]
            Step::Test => "the test step",
        }
    }
}

/// A failed step and its errno, as sent from the probe child (5 bytes on a pipe).
#[derive(Debug, Clone, Copy)]
struct StepFailure {
    step: u8,
    errno: i32,
}

impl StepFailure {
    /// A grandchild already wrote the report; the child only has to exit non-zero.
    const ALREADY_REPORTED: StepFailure = StepFailure {
        step: u8::MAX,
        errno: 0,
    };

    fn now(step: Step) -> StepFailure {
        StepFailure {
            step: step as u8,
            errno: errno(),
        }
    }
}

/// The write end of the report pipe, as seen by the probe.
#[derive(Clone, Copy)]
struct Report(RawFd);

#[derive(Debug)]
enum ProbeOutcome {
    Passed,
    Failed {
        step: Step,
        error: io::Error,
    },
    /// Fork failed, the probe was killed or timed out, or it exited without a report.
    Abnormal(String),
}

impl ProbeOutcome {
    fn failed_entering_user_namespace(&self) -> bool {
        matches!(
            self,
            ProbeOutcome::Failed {
                step: Step::Unshare | Step::Setgroups | Step::UidMap | Step::GidMap,
                ..
            }
        )
    }

    fn describe(&self) -> String {
        match self {
            ProbeOutcome::Passed => "passed".to_string(),
            ProbeOutcome::Failed { step, error } => format!("{} failed: {error}", step.describe()),
            ProbeOutcome::Abnormal(message) => message.clone(),
        }
    }
}

/// Forks, runs `probe` in the child, and waits at most `deadline` for it (then kills it).
///
/// `probe` runs between fork and `_exit` while the caller may have other threads (tests do), so it must
/// only make raw system calls on data prepared before the fork: no allocation, no locks, no panics.
fn run_probe(
    deadline: Duration,
    probe: impl FnOnce(Report) -> Result<(), StepFailure>,
) -> ProbeOutcome {
    let mut fds = [-1; 2];
    // Non-blocking, so the parent's read cannot wait on a write end leaked into another forked child.
    // SAFETY: `fds` has room for the two descriptors.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } != 0 {
        return ProbeOutcome::Abnormal(format!(
            "cannot create a pipe: {}",
            io::Error::last_os_error()
        ));
    }
    // SAFETY: pipe2 just returned these descriptors; nobody else owns them.
    let (read_end, write_end) =
        unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // SAFETY: the child runs only `probe` (raw system calls, see above) and `_exit`s.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        let report = Report(write_end.as_raw_fd());
        exit_probe(report, probe(report));
    }
    drop(write_end);
    if pid < 0 {
        return ProbeOutcome::Abnormal(format!("cannot fork: {}", io::Error::last_os_error()));
    }
    let status = match wait_with_deadline(pid, deadline) {
        Some(status) => status,
        None => {
            return ProbeOutcome::Abnormal(format!("the probe did not finish within {deadline:?}"));
        }
    };
    let mut record = [0u8; 5];
    // SAFETY: reading into a buffer of the given length.
    let read = unsafe {
        libc::read(
            read_end.as_raw_fd(),
            record.as_mut_ptr().cast(),
            record.len(),
        )
    };
    if read == record.len() as isize
        && let Some(&step) = Step::ALL.get(usize::from(record[0]))
    {
        let errno = i32::from_le_bytes([record[1], record[2], record[3], record[4]]);
        return ProbeOutcome::Failed {
            step,
            error: io::Error::from_raw_os_error(errno),
        };
    }
    if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0 {
        ProbeOutcome::Passed
    } else if libc::WIFSIGNALED(status) {
        ProbeOutcome::Abnormal(format!(
            "the probe was killed by signal {}",
            libc::WTERMSIG(status)
        ))
    } else {
        ProbeOutcome::Abnormal(format!(
            "the probe exited with status {} without saying why",
            libc::WEXITSTATUS(status)
        ))
    }
}

/// Sends the probe's result to the parent and exits; async-signal-safe.
fn exit_probe(report: Report, result: Result<(), StepFailure>) -> ! {
    let code = match result {
        Ok(()) => 0,
        Err(failure) => {
            if failure.step != StepFailure::ALREADY_REPORTED.step {
                let e = failure.errno.to_le_bytes();
                let record = [failure.step, e[0], e[1], e[2], e[3]];
                // SAFETY: writing a stack buffer; 5 bytes into a pipe are written whole or not at all.
                unsafe { libc::write(report.0, record.as_ptr().cast(), record.len()) };
            }
            1
        }
    };
    // SAFETY: leave without running destructors or atexit handlers inherited from the parent.
    unsafe { libc::_exit(code) }
}

/// Waits for `pid`; kills and reaps it after `deadline`, then returns `None`.
fn wait_with_deadline(pid: libc::pid_t, deadline: Duration) -> Option<libc::c_int> {
    let start = Instant::now();
    let mut status = 0;
    loop {
        // SAFETY: waitpid on our own child with a valid status pointer.
        let rc = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if rc == pid {
            return Some(status);
        }
        if rc < 0 && errno() != libc::EINTR {
            return None;
        }
        if start.elapsed() >= deadline {
            // SAFETY: the child is ours and not yet reaped, so the pid cannot have been reused.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, &mut status, 0);
            }
            return None;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// The uid and gid maps for a user namespace in which the caller keeps its own ids, prepared before
/// the fork. The child writes its own maps (allowed for a single id mapped to itself), so no parent
/// has to coordinate with it.
struct IdMaps {
    uid_map: String,
    gid_map: String,
}

impl IdMaps {
    fn current() -> IdMaps {
        // SAFETY: getuid and getgid have no preconditions.
        let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
        IdMaps {
            uid_map: format!("{uid} {uid} 1"),
            gid_map: format!("{gid} {gid} 1"),
        }
    }

    /// `unshare(CLONE_NEWUSER | extra)`, then `setgroups` = deny (required before an unprivileged
    /// `gid_map`), `uid_map`, `gid_map`. Async-signal-safe.
    fn enter_user_namespace(&self, extra: libc::c_int) -> Result<(), StepFailure> {
        // SAFETY: a raw system call without pointers.
        sys(Step::Unshare, unsafe {
            libc::unshare(libc::CLONE_NEWUSER | extra)
        })?;
        write_proc_file(Step::Setgroups, c"/proc/self/setgroups", b"deny")?;
        write_proc_file(Step::UidMap, c"/proc/self/uid_map", self.uid_map.as_bytes())?;
        write_proc_file(Step::GidMap, c"/proc/self/gid_map", self.gid_map.as_bytes())
    }
}

fn write_proc_file(step: Step, path: &std::ffi::CStr, data: &[u8]) -> Result<(), StepFailure> {
    // SAFETY: a valid C string and a buffer of the given length; the fd is closed on every path.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return Err(StepFailure::now(step));
        }
        let written = libc::write(fd, data.as_ptr().cast(), data.len());
        let failure = StepFailure::now(step);
        libc::close(fd);
        if written == data.len() as isize {
            Ok(())
        } else {
            Err(failure)
        }
    }
}

/// `mount(MS_REC | MS_PRIVATE)` on `/`, so nothing the probe mounts propagates anywhere.
fn make_mounts_private() -> Result<(), StepFailure> {
    // SAFETY: static C strings; null fstype and data are allowed for a propagation change.
    sys(Step::MakePrivate, unsafe {
        libc::mount(
            std::ptr::null(),
            c"/".as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        )
    })
}

fn sys(step: Step, rc: libc::c_int) -> Result<(), StepFailure> {
    if rc < 0 {
        Err(StepFailure::now(step))
    } else {
        Ok(())
    }
}

fn errno() -> i32 {
    io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

fn read_sysctl(name: &str) -> Option<i64> {
    fs::read_to_string(Path::new("/proc/sys").join(name))
        .ok()?
        .trim()
        .parse()
        .ok()
}

fn kernel_release() -> String {
    fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown version".to_string())
}

/// `(major, minor)` of a release string like `6.18.0-1-amd64`.
fn kernel_version(release: &str) -> Option<(u32, u32)> {
    let mut parts = release.split(|c: char| !c.is_ascii_digit());
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_reports_success_failed_step_and_errno() {
        assert!(matches!(
            run_probe(PROBE_DEADLINE, |_| Ok(())),
            ProbeOutcome::Passed
        ));
        let outcome = run_probe(PROBE_DEADLINE, |_| {
            // SAFETY: a static C string.
            let fd = unsafe { libc::open(c"/nonexistent/airlock".as_ptr(), libc::O_RDONLY) };
            sys(Step::Test, fd)
        });
        match outcome {
            ProbeOutcome::Failed { step, error } => {
                assert_eq!(step, Step::Test);
                assert_eq!(error.raw_os_error(), Some(libc::ENOENT));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn probe_without_report_or_killed_is_abnormal() {
        let outcome = run_probe(PROBE_DEADLINE, |_| Err(StepFailure::ALREADY_REPORTED));
        assert!(
            outcome.describe().contains("exited with status 1"),
            "{outcome:?}"
        );
        let outcome = run_probe(PROBE_DEADLINE, |_| {
            // SAFETY: raising a signal on ourselves.
            unsafe { libc::raise(libc::SIGKILL) };
            Ok(())
        });
        assert!(
            outcome.describe().contains("killed by signal 9"),
            "{outcome:?}"
        );
    }

    #[test]
    fn hung_probe_is_killed_at_the_deadline() {
        let start = Instant::now();
        let outcome = run_probe(Duration::from_millis(50), |_| {
            loop {
                // SAFETY: waits for a signal; SIGKILL ends it.
                unsafe { libc::pause() };
            }
        });
        assert!(outcome.describe().contains("did not finish"), "{outcome:?}");
        assert!(start.elapsed() < Duration::from_secs(2));
    }

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

    #[test]
    fn run_checks_gives_every_row_quickly() {
        let start = Instant::now();
        let checks = run_checks();
        let elapsed = start.elapsed();
        let names: Vec<&str> = checks.iter().map(|c| c.name).collect();
        assert_eq!(
            names,
            [
                "user namespaces",
                "proc in a pid namespace",
                "landlock",
                "seccomp",
                "overlayfs in a user namespace",
                "cgroup",
                "tiocsti",
            ]
        );
        for check in &checks {
            eprintln!(
                "{:<32} {:?} {} {:?}",
                check.name, check.status, check.detail, check.fix
            );
            assert!(!check.detail.is_empty());
            assert_eq!(check.status == Status::Ok, check.fix.is_none(), "{check:?}");
        }
        assert!(elapsed < Duration::from_secs(3), "{elapsed:?}");
        let leftovers: Vec<_> = fs::read_dir(std::env::temp_dir())
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| {
                e.file_name()
                    .to_string_lossy()
                    .starts_with(&format!("airlock-doctor-{}-", std::process::id()))
            })
            .collect();
        assert!(
            leftovers.is_empty(),
            "scratch dirs left behind: {leftovers:?}"
        );
    }

    #[test]
    fn check_serialises_with_lowercase_status() {
        let check = Check::problem("x", Status::Warn, "d".to_string(), "f");
        assert_eq!(
            serde_json::to_value(&check).unwrap(),
            serde_json::json!({"name": "x", "status": "warn", "detail": "d", "fix": "f"})
        );
        let json = serde_json::to_value(Check::ok("y", "fine")).unwrap();
        assert_eq!(json["status"], "ok");
        assert_eq!(json["fix"], serde_json::Value::Null);
    }
}
