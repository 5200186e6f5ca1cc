//! The container outlives a killed airlock unless someone stops it: the engine's `run` is only a
//! client (conmon keeps the container), so SIGKILL of airlock, or of airlock and the client,
//! leaves the workload running. A forked watchdog holds the read end of a pipe whose write end
//! only airlock holds; when the pipe closes without airlock's "done" byte (airlock died), it
//! runs `<engine> kill <name>`. Native's sandbox dies with airlock by PR_SET_PDEATHSIG instead.

use std::ffi::{CString, OsStr};
use std::io::Read as _;
use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd};
use std::os::unix::ffi::OsStrExt as _;
use std::process::Command;

/// airlock's end of the watchdog's pipe; [`Watchdog::done`] tells it the session ended.
pub(super) struct Watchdog {
    pipe: Option<OwnedFd>,
    pid: nix::unistd::Pid,
}

impl Watchdog {
    /// Forks the watchdog for the container `kill` (an engine command: program, arguments,
    /// a cleared environment with the engine's variables, a directory) stops. Everything the
    /// child needs is built here, so after the fork it makes only async-signal-safe calls
    /// (gates may already run threads).
    pub(super) fn start(kill: Command) -> Result<Watchdog, String> {
        let kill = Exec::of(&kill)?;
        let (read, write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
            .map_err(|e| format!("cannot make the container's watchdog pipe: {e}"))?;
        // SAFETY: the child makes only async-signal-safe calls (`watch`).
        match unsafe { nix::unistd::fork() }
            .map_err(|e| format!("cannot fork the container's watchdog: {e}"))?
        {
            nix::unistd::ForkResult::Child => {
                drop(write);
                watch(read, kill);
            }
            nix::unistd::ForkResult::Parent { child } => {
                drop(read);
                Ok(Watchdog {
                    pipe: Some(write),
                    pid: child,
                })
            }
        }
    }

    /// The session ended as it should: the watchdog exits without stopping anything.
    pub(super) fn done(mut self) {
        if let Some(pipe) = self.pipe.take() {
            let _ = nix::unistd::write(&pipe, b"d");
        }
        let _ = nix::sys::wait::waitpid(self.pid, None);
    }
}

/// The `kill` command as `execve` takes it, built before the fork (the pointer arrays point into
/// the strings, whose buffers stay where they are when the struct moves).
struct Exec {
    program: CString,
    dir: CString,
    _strings: Vec<CString>,
    argv: Vec<*const libc::c_char>,
    envp: Vec<*const libc::c_char>,
}

impl Exec {
    fn of(cmd: &Command) -> Result<Exec, String> {
        let c = |s: &OsStr| {
            CString::new(s.as_bytes())
                .map_err(|_| format!("the watchdog's command has a NUL byte: {s:?}"))
        };
        let mut args = vec![c(cmd.get_program())?];
        for arg in cmd.get_args() {
            args.push(c(arg)?);
        }
        // The command clears its environment (`image::bare_command`): only what it sets.
        let mut vars = Vec::new();
        for (key, value) in cmd.get_envs() {
            if let Some(value) = value {
                let mut pair = key.as_bytes().to_vec();
                pair.push(b'=');
                pair.extend_from_slice(value.as_bytes());
                vars.push(c(OsStr::from_bytes(&pair))?);
            }
        }
        let pointers = |strings: &[CString]| -> Vec<*const libc::c_char> {
            strings
                .iter()
                .map(|s| s.as_ptr())
                .chain(std::iter::once(std::ptr::null()))
                .collect()
        };
        let (argv, envp) = (pointers(&args), pointers(&vars));
        args.extend(vars);
        Ok(Exec {
            program: c(cmd.get_program())?,
            dir: c(cmd
                .get_current_dir()
                .map_or(OsStr::new("/"), |d| d.as_os_str()))?,
            _strings: args,
            argv,
            envp,
        })
    }
}

/// In the child: no signal from a terminal or a process group ends it, it keeps no descriptor
/// but the pipe (and /dev/null as 0-2), and it waits; EOF without the byte means airlock died.
fn watch(read: OwnedFd, kill: Exec) -> ! {
    // SAFETY: plain system calls in the single-threaded child.
    unsafe {
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT] {
            libc::signal(sig, libc::SIG_IGN);
        }
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
        if null >= 0 {
            for fd in 0..3 {
                libc::dup2(null, fd);
            }
        }
        // The pipe at 3, everything above closed (airlock's sockets and files stay airlock's).
        let fd = 3;
        if read.as_raw_fd() != fd {
            libc::dup2(read.as_raw_fd(), fd);
        }
        libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
        libc::syscall(libc::SYS_close_range, fd + 1, libc::c_uint::MAX, 0);
        let mut pipe = std::fs::File::from_raw_fd(fd);
        let mut byte = [0u8; 1];
        let said_done = matches!(pipe.read(&mut byte), Ok(1));
        if !said_done && libc::chdir(kill.dir.as_ptr()) == 0 {
            libc::close(fd);
            libc::execve(
                kill.program.as_ptr(),
                kill.argv.as_ptr(),
                kill.envp.as_ptr(),
            );
        }
        libc::_exit(0)
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        // Without `done` (an error path or a panic): the pipe closes and the watchdog stops the
        // container, failing closed.
        drop(self.pipe.take());
    }
}
