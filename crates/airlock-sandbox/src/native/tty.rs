//! The sandbox's own terminal. No descriptor of the host's terminal enters the sandbox: when the
//! caller's stdin, stdout or stderr is a terminal, init opens a pty in the sandbox's devpts, the
//! workload gets its slave in those slots as its controlling terminal (a session of its own), and
//! the supervisor relays bytes and window-size changes between the master and the host terminal.
//!
//! So `tty`, `ttyname` and `GPG_TTY` name `/dev/pts/0` inside, and what the workload does to its
//! terminal (TIOCSTI, a line discipline, `chmod`, a stuck raw mode) stays on that pty.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

/// What the launch learned about the caller's terminal before the clone.
#[derive(Clone, Copy)]
pub struct TtyPlan {
    /// Which of stdin, stdout and stderr are terminals: the workload gets the pty there.
    pub slots: [bool; 3],
    /// The host terminal's modes and size, which the pty starts with.
    pub termios: libc::termios,
    pub winsize: libc::winsize,
}

fn is_terminal(fd: RawFd) -> bool {
    // SAFETY: isatty only inspects the descriptor.
    unsafe { libc::isatty(fd) == 1 }
}

/// The host terminal's descriptor: the first of 0, 1, 2 that is one.
fn host_terminal(slots: [bool; 3]) -> Option<RawFd> {
    (0..3).find(|&fd| slots[fd as usize])
}

impl TtyPlan {
    /// `None` when none of stdin, stdout and stderr is a terminal.
    pub fn detect() -> Option<TtyPlan> {
        let slots = [is_terminal(0), is_terminal(1), is_terminal(2)];
        let fd = host_terminal(slots)?;
        // SAFETY: zeroed termios and winsize are valid out-parameters for the calls below.
        let mut termios: libc::termios = unsafe { std::mem::zeroed() };
        let mut winsize: libc::winsize = unsafe { std::mem::zeroed() };
        // SAFETY: tcgetattr and TIOCGWINSZ write into the structs above.
        if unsafe { libc::tcgetattr(fd, &mut termios) } != 0 {
            return None;
        }
        // A terminal without a size (a serial line) leaves it 0x0, as the pty would be.
        unsafe { libc::ioctl(fd, libc::TIOCGWINSZ, &mut winsize) };
        Some(TtyPlan {
            slots,
            termios,
            winsize,
        })
    }
}

/// In init, before the workload starts: a pty in the sandbox's devpts with the host terminal's
/// modes and size, as (master, slave); then init's own host-terminal slots point at /dev/null.
pub fn open(plan: &TtyPlan) -> io::Result<(OwnedFd, OwnedFd)> {
    let cvt = |ret: libc::c_int| {
        if ret < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(ret)
        }
    };
    // SAFETY: plain calls on descriptors owned right away; the structs outlive the calls.
    unsafe {
        let master = OwnedFd::from_raw_fd(cvt(libc::open(
            c"/dev/pts/ptmx".as_ptr(),
            libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC,
        ))?);
        let unlock: libc::c_int = 0;
        cvt(libc::ioctl(master.as_raw_fd(), libc::TIOCSPTLCK, &unlock))?;
        // TIOCGPTPEER opens the slave of this very master, with no path lookup to race.
        let slave = OwnedFd::from_raw_fd(cvt(libc::ioctl(
            master.as_raw_fd(),
            libc::TIOCGPTPEER,
            libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC,
        ))?);
        let mut termios = plan.termios;
        if !plan.slots[0] {
            // Output only: the host terminal stays cooked and does the output processing itself
            // (`\n` to `\r\n`); done twice it would print `\r\r\n`.
            termios.c_oflag &= !libc::OPOST;
        }
        cvt(libc::tcsetattr(slave.as_raw_fd(), libc::TCSANOW, &termios))?;
        cvt(libc::ioctl(
            slave.as_raw_fd(),
            libc::TIOCSWINSZ,
            &plan.winsize,
        ))?;
        let null = cvt(libc::open(c"/dev/null".as_ptr(), libc::O_RDWR))?;
        for fd in 0..3 {
            if plan.slots[fd as usize] {
                cvt(libc::dup2(null, fd))?;
            }
        }
        libc::close(null);
        Ok((master, slave))
    }
}

/// In the workload, first thing: a session of its own (so `/dev/tty` is never the host's
/// terminal), and the pty, when there is one, as its controlling terminal in the planned slots.
pub fn attach(slave: Option<BorrowedFd<'_>>, plan: Option<&TtyPlan>) -> io::Result<()> {
    // SAFETY: setsid, ioctl and dup2 on descriptors this process holds.
    unsafe {
        if libc::setsid() < 0 {
            return Err(io::Error::last_os_error());
        }
        let (Some(slave), Some(plan)) = (slave, plan) else {
            return Ok(());
        };
        let fd = slave.as_raw_fd();
        if libc::ioctl(fd, libc::TIOCSCTTY, 0) < 0 {
            return Err(io::Error::last_os_error());
        }
        for slot in 0..3 {
            if plan.slots[slot as usize] && libc::dup2(fd, slot) < 0 {
                return Err(io::Error::last_os_error());
            }
        }
    }
    Ok(())
}

/// The host terminal in raw mode while the sandbox has it; restored when dropped (at the end of
/// the launch, on every path out of it).
pub struct RawMode {
    fd: RawFd,
    saved: libc::termios,
}

impl RawMode {
    /// Raw mode on the caller's stdin, when the pty will read from it: the pty's own line
    /// discipline then does echo, line editing and Ctrl-C. From a background job this stops
    /// the launch (SIGTTOU) until the shell brings it to the foreground, as any terminal program.
    pub fn enter(plan: &TtyPlan) -> Option<RawMode> {
        if !plan.slots[0] {
            return None;
        }
        let mut raw = plan.termios;
        // SAFETY: cfmakeraw edits a local copy; tcsetattr reads it.
        unsafe {
            libc::cfmakeraw(&mut raw);
            if libc::tcsetattr(0, libc::TCSADRAIN, &raw) != 0 {
                return None;
            }
        }
        Some(RawMode {
            fd: 0,
            saved: plan.termios,
        })
    }

    /// After a stop and continue (SIGCONT) the shell may have reset the modes.
    pub fn reapply(&self) {
        let mut raw = self.saved;
        // SAFETY: as in enter().
        unsafe {
            libc::cfmakeraw(&mut raw);
            libc::tcsetattr(self.fd, libc::TCSADRAIN, &raw);
        }
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        // SAFETY: restores the modes saved before the launch.
        unsafe { libc::tcsetattr(self.fd, libc::TCSADRAIN, &self.saved) };
    }
}

const CHUNK: usize = 64 * 1024;

/// The supervisor's half: bytes from the host's stdin to the master, from the master to the host
/// terminal, and the window size when the host's changes.
pub struct Relay {
    master: OwnedFd,
    /// Where the pty's output goes: stdout when it is the terminal, else stderr, else stdin.
    output: RawFd,
    /// Reading the host's stdin (it is the terminal, and has not hung up).
    input: bool,
    /// Read from the host, not yet taken by the pty (it is full while the workload does not read).
    pending: Vec<u8>,
    master_open: bool,
    buf: Vec<u8>,
}

impl Relay {
    pub fn new(master: OwnedFd, plan: &TtyPlan) -> Relay {
        // SAFETY: fcntl on the master this relay owns (never on the host's shared descriptors).
        unsafe {
            let flags = libc::fcntl(master.as_raw_fd(), libc::F_GETFL);
            libc::fcntl(master.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK);
        }
        let output = [1, 2, 0]
            .into_iter()
            .find(|&fd| plan.slots[fd as usize])
            .unwrap_or(1);
        Relay {
            master,
            output,
            input: plan.slots[0],
            pending: Vec::new(),
            master_open: true,
            buf: vec![0; CHUNK],
        }
    }

    /// The descriptors to poll and for what: (master, its events), and stdin when it is read.
    pub fn interest(&self) -> (Option<(BorrowedFd<'_>, i16)>, Option<BorrowedFd<'static>>) {
        let master = self.master_open.then(|| {
            let mut events = libc::POLLIN;
            if !self.pending.is_empty() {
                events |= libc::POLLOUT;
            }
            // SAFETY: the master lives as long as the borrow of self.
            (
                unsafe { BorrowedFd::borrow_raw(self.master.as_raw_fd()) },
                events,
            )
        });
        // SAFETY: stdin stays open for the whole process.
        let stdin = (self.input && self.pending.is_empty() && self.master_open)
            .then(|| unsafe { BorrowedFd::borrow_raw(0) });
        (master, stdin)
    }

    /// The master is readable or writable.
    pub fn on_master(&mut self) {
        self.flush_pending();
        self.copy_out();
    }

    /// The host's stdin is readable.
    pub fn on_stdin(&mut self) {
        // SAFETY: reads into the relay's own buffer.
        let n = unsafe { libc::read(0, self.buf.as_mut_ptr().cast(), self.buf.len()) };
        match n {
            n if n > 0 => {
                self.pending.extend_from_slice(&self.buf[..n as usize]);
                self.flush_pending();
            }
            0 => self.input = false,
            _ if interrupted() => {}
            // EIO: the terminal hung up, or this job reads from the background with SIGTTIN ignored.
            _ => self.input = false,
        }
    }

    /// The host's window changed size: the pty takes it, and the kernel signals the workload.
    pub fn on_resize(&self, plan: &TtyPlan) {
        let Some(fd) = host_terminal(plan.slots) else {
            return;
        };
        // SAFETY: TIOCGWINSZ writes into the local struct, TIOCSWINSZ reads it.
        unsafe {
            let mut size: libc::winsize = std::mem::zeroed();
            if libc::ioctl(fd, libc::TIOCGWINSZ, &mut size) == 0 {
                libc::ioctl(self.master.as_raw_fd(), libc::TIOCSWINSZ, &size);
            }
        }
    }

    /// The sandbox has ended: whatever it wrote last still reaches the terminal.
    ///
    /// Every process of the sandbox is gone by then, so every slave is closed and the master gives
    /// what is left and then EIO; but the last bytes may still be on their way through the pty
    /// (the kernel moves them in a worker), so an empty read is waited out, not taken for the end.
    pub fn drain(&mut self) {
        const QUIET: libc::c_int = 1000;
        while self.master_open {
            if self.copy_out() {
                continue;
            }
            let mut fd = libc::pollfd {
                fd: self.master.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: poll on one descriptor this relay owns.
            if unsafe { libc::poll(&mut fd, 1, QUIET) } <= 0 {
                return;
            }
        }
    }

    fn flush_pending(&mut self) {
        while !self.pending.is_empty() {
            // SAFETY: writes from the relay's own buffer to its master.
            let n = unsafe {
                libc::write(
                    self.master.as_raw_fd(),
                    self.pending.as_ptr().cast(),
                    self.pending.len(),
                )
            };
            if n > 0 {
                self.pending.drain(..n as usize);
            } else if n < 0 && interrupted() {
                continue;
            } else if n < 0 && io::Error::last_os_error().kind() == io::ErrorKind::WouldBlock {
                return;
            } else {
                // The pty is gone: what the user typed after the end goes nowhere.
                self.pending.clear();
                return;
            }
        }
    }

    /// Copies one chunk from the master to the host terminal; false when nothing was there.
    fn copy_out(&mut self) -> bool {
        // SAFETY: reads into the relay's own buffer.
        let n = unsafe {
            libc::read(
                self.master.as_raw_fd(),
                self.buf.as_mut_ptr().cast(),
                self.buf.len(),
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                return true;
            }
            // EIO once every slave is closed: the sandbox is gone.
            if e.kind() != io::ErrorKind::WouldBlock {
                self.master_open = false;
            }
            return false;
        }
        if n == 0 {
            self.master_open = false;
            return false;
        }
        write_all(self.output, &self.buf[..n as usize]);
        true
    }
}

fn interrupted() -> bool {
    io::Error::last_os_error().kind() == io::ErrorKind::Interrupted
}

/// Writes everything to the host terminal (blocking, as the terminal's own flow control wants); a
/// terminal that is gone drops the rest.
fn write_all(fd: RawFd, mut bytes: &[u8]) {
    while !bytes.is_empty() {
        // SAFETY: writes from a live slice.
        let n = unsafe { libc::write(fd, bytes.as_ptr().cast(), bytes.len()) };
        if n > 0 {
            bytes = &bytes[n as usize..];
        } else if !(n < 0 && interrupted()) {
            return;
        }
    }
}
