//! Step 5 of a launch: the workload's last moments before `execve`, in init's fork.

use std::ffi::CString;
use std::os::fd::{AsRawFd, BorrowedFd, RawFd};

use nix::sys::signal::{SigSet, SigmaskHow, sigprocmask};

use super::child::{ChildPlan, die, send_fd};
use super::{caps, creds, landlock, tty};

/// Step 5: the workload's last moments before `execve`, in the order docs/architecture.md gives.
/// `slave`: the terminal's descriptor in this process's table (init's copy stays init's).
/// `bounding_dropped`: init emptied the bounding set this process inherited.
pub(super) fn run(
    plan: &ChildPlan,
    sock: RawFd,
    slave: Option<RawFd>,
    bounding_dropped: bool,
) -> ! {
    // SAFETY: the descriptor is open in this process's own table until it is closed below.
    let borrowed = slave.map(|fd| unsafe { BorrowedFd::borrow_raw(fd) });
    if let Err(e) = tty::attach(borrowed, plan.tty.as_ref()) {
        die(sock, &format!("cannot give the sandbox its terminal: {e}"));
    }
    if let Some(fd) = slave {
        // SAFETY: this process's copy; the workload holds the terminal on 0, 1 and 2 now.
        unsafe { libc::close(fd) };
    }
    let _ = sigprocmask(SigmaskHow::SIG_SETMASK, Some(&SigSet::empty()), None);
    // Rust ignores SIGPIPE in its runtime; a shell pipeline expects the default.
    // SAFETY: resetting dispositions to their default is always sound.
    unsafe {
        for sig in 1..32 {
            if sig != libc::SIGKILL && sig != libc::SIGSTOP {
                libc::signal(sig, libc::SIG_DFL);
            }
        }
    }
    // SAFETY: a valid C string.
    if unsafe { libc::chdir(plan.cwd.as_ptr()) } < 0 {
        let e = std::io::Error::last_os_error();
        die(
            sock,
            &format!("cannot enter the working directory {:?}: {e}", plan.cwd),
        );
    }
    // SAFETY: prctl with integer arguments.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } < 0 {
        die(sock, "cannot set no_new_privs");
    }
    let dropped = match bounding_dropped {
        true => caps::drop_the_rest(),
        false => caps::drop_all(plan.last_cap),
    };
    if let Err(e) = dropped {
        die(sock, &format!("cannot drop capabilities: {e}"));
    }
    if plan.landlock
        && let Err(e) = landlock::restrict_writes(&plan.writable)
    {
        die(sock, &format!("cannot apply the Landlock write rules: {e}"));
    }
    // The notifying filter where the kernel can give it a listener; else the plain one.
    let listener = plan
        .seccomp_notifying
        .as_ref()
        .and_then(|p| p.install_listening().ok());
    match &listener {
        Some(fd) => send_fd(sock, b'U', fd.as_raw_fd(), "the seccomp listener"),
        None => {
            if let Err(e) = plan.seccomp.install() {
                die(sock, &format!("cannot install the seccomp filter: {e}"));
            }
        }
    }
    drop(listener);
    close_inherited_fds();
    if let Some(limit) = plan.fd_limit
        && let Err(e) = creds::restore_fd_limit(limit)
    {
        die(
            sock,
            &format!(
                "cannot restore the descriptor limit (soft {}, hard {}): {e}",
                limit.soft, limit.hard
            ),
        );
    }
    exec(plan)
}

/// Closes every descriptor but stdin, stdout and stderr: one the developer's shell left open (to a
/// secret file, a socket, a host terminal) must not reach the agent.
fn close_inherited_fds() {
    // SAFETY: close_range only closes descriptors; nothing after this point uses any of them.
    let ret = unsafe { libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, 0u32) };
    if ret < 0 {
        // Kernels before 5.9: close one by one up to the descriptor limit.
        let max = match nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE) {
            Ok((soft, _)) => soft.min(1 << 20) as i32,
            Err(_) => 1024,
        };
        for fd in 3..max {
            // SAFETY: closing a descriptor that may not exist is harmless.
            unsafe { libc::close(fd) };
        }
    }
}

/// `execvpe` over the sandbox's PATH (glibc's would search the parent's).
fn exec(plan: &ChildPlan) -> ! {
    let mut argv: Vec<*const libc::c_char> = plan.argv.iter().map(|a| a.as_ptr()).collect();
    argv.push(std::ptr::null());
    let mut envp: Vec<*const libc::c_char> = plan.env.iter().map(|e| e.as_ptr()).collect();
    envp.push(std::ptr::null());
    let name = plan.argv[0].as_bytes();
    let mut denied = false;
    let candidates: Vec<CString> = if name.contains(&b'/') {
        vec![plan.argv[0].clone()]
    } else {
        plan.path
            .iter()
            .filter_map(|dir| {
                let mut full = dir.as_bytes().to_vec();
                full.push(b'/');
                full.extend_from_slice(name);
                CString::new(full).ok()
            })
            .collect()
    };
    for candidate in &candidates {
        // SAFETY: null-terminated arrays of valid C strings.
        unsafe { libc::execve(candidate.as_ptr(), argv.as_ptr(), envp.as_ptr()) };
        match std::io::Error::last_os_error().raw_os_error() {
            Some(libc::EACCES) | Some(libc::EPERM) => denied = true,
            Some(libc::ENOENT) | Some(libc::ENOTDIR) => {}
            _ => denied = true,
        }
    }
    let shown = String::from_utf8_lossy(name);
    if denied {
        eprintln!("airlock: cannot execute {shown} in the sandbox: permission denied");
        // SAFETY: as in die().
        unsafe { libc::_exit(126) }
    }
    eprintln!("airlock: command not found in the sandbox: {shown}");
    // SAFETY: as in die().
    unsafe { libc::_exit(127) }
}
