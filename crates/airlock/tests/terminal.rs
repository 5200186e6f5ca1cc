//! The sandbox's terminal, driven the way a developer's terminal drives airlock: the real binary on
//! a pseudo-terminal the test holds the master of. Typed input, window resizes, Ctrl-C, exit
//! codes, the host terminal's modes after the run, and output redirected to a file.

mod common;

use std::fs;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt as _;
use std::process::{Child, Command, ExitStatus};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::TestHome;

const DEADLINE: Duration = Duration::from_secs(20);

/// airlock on a fresh pty (its controlling terminal, 40x120), with a reader collecting the output.
struct OnPty {
    master: fs::File,
    /// The test's own handle on the slave, to read its modes (never read from).
    slave: OwnedFd,
    /// The slave's modes before airlock started.
    initial: libc::termios,
    child: Child,
    output: mpsc::Receiver<Vec<u8>>,
    seen: Vec<u8>,
}

fn winsize(rows: u16, cols: u16) -> libc::winsize {
    libc::winsize {
        ws_row: rows,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    }
}

fn termios(fd: &OwnedFd) -> libc::termios {
    // SAFETY: tcgetattr fills a zeroed struct.
    unsafe {
        let mut t: libc::termios = std::mem::zeroed();
        assert_eq!(libc::tcgetattr(fd.as_raw_fd(), &mut t), 0, "tcgetattr");
        t
    }
}

impl OnPty {
    fn start(cmd: Command) -> OnPty {
        OnPty::start_with(cmd, true)
    }

    /// As `start`, with stdout left as `cmd` has it unless `stdout_on_pty`.
    fn start_with(cmd: Command, stdout_on_pty: bool) -> OnPty {
        OnPty::start_slots(cmd, true, stdout_on_pty)
    }

    /// As `start`, with stdin and stdout left as `cmd` has them unless on the pty.
    fn start_slots(mut cmd: Command, stdin_on_pty: bool, stdout_on_pty: bool) -> OnPty {
        let (mut master, mut slave) = (0, 0);
        let size = winsize(40, 120);
        // SAFETY: openpty writes two descriptors, owned right below.
        let rc = unsafe {
            libc::openpty(
                &mut master,
                &mut slave,
                std::ptr::null_mut(),
                std::ptr::null(),
                &size,
            )
        };
        assert_eq!(rc, 0, "openpty");
        // SAFETY: fresh descriptors from openpty.
        let (master, slave) =
            unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
        let file = |fd: &OwnedFd| fs::File::from(fd.try_clone().expect("dup"));
        cmd.stderr(file(&slave));
        if stdin_on_pty {
            cmd.stdin(file(&slave));
        }
        if stdout_on_pty {
            cmd.stdout(file(&slave));
        }
        let initial = termios(&slave);
        // SAFETY: setsid and ioctl are async-signal-safe.
        unsafe {
            cmd.pre_exec(|| {
                if libc::setsid() < 0 || libc::ioctl(2, libc::TIOCSCTTY, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.spawn().expect("airlock starts");
        drop(cmd);
        let (tx, output) = mpsc::channel();
        let mut reader = fs::File::from(master.try_clone().expect("dup"));
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 || tx.send(buf[..n].to_vec()).is_err() {
                    break;
                }
            }
        });
        OnPty {
            master: fs::File::from(master),
            slave,
            initial,
            child,
            output,
            seen: Vec::new(),
        }
    }

    fn type_in(&mut self, bytes: &[u8]) {
        self.master.write_all(bytes).expect("type");
    }

    /// Waits until the output contains `text`.
    fn expect(&mut self, text: &str) {
        let end = Instant::now() + DEADLINE;
        while !String::from_utf8_lossy(&self.seen).contains(text) {
            let left = end.saturating_duration_since(Instant::now());
            match self.output.recv_timeout(left) {
                Ok(bytes) => self.seen.extend(bytes),
                Err(_) => panic!(
                    "{text:?} never appeared; the terminal showed {:?}",
                    String::from_utf8_lossy(&self.seen)
                ),
            }
        }
    }

    fn resize(&self, rows: u16, cols: u16) {
        let size = winsize(rows, cols);
        // SAFETY: TIOCSWINSZ reads the struct.
        let rc = unsafe { libc::ioctl(self.master.as_raw_fd(), libc::TIOCSWINSZ, &size) };
        assert_eq!(rc, 0, "TIOCSWINSZ");
    }

    fn wait(&mut self) -> ExitStatus {
        let end = Instant::now() + DEADLINE;
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                return status;
            }
            assert!(Instant::now() < end, "airlock did not finish");
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for OnPty {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn airlock(home: &TestHome, script: &str) -> Command {
    let mut cmd = home.airlock(&["run", "--network", "none", "--", "sh", "-c", script]);
    cmd.env("PATH", "/usr/bin:/bin");
    cmd
}

fn sandbox_available() -> bool {
    common::sandbox_starts()
}

#[test]
fn the_workload_has_a_named_terminal_that_takes_typed_lines() {
    if !sandbox_available() {
        return;
    }
    let home = TestHome::new("project");
    let mut pty = OnPty::start(airlock(
        &home,
        "export GPG_TTY=$(tty); echo gpg:$GPG_TTY; \
         printf 'name? '; read name; echo \"hello $name\"; \
         [ -t 0 ] && [ -t 1 ] && echo both-terminals; exit 7",
    ));
    pty.expect("gpg:/dev/pts/0");
    pty.expect("name? ");
    // While the sandbox has it, the host terminal is raw: the pty inside echoes and edits.
    let raw = termios(&pty.slave);
    assert_eq!(
        raw.c_lflag & (libc::ICANON | libc::ECHO),
        0,
        "raw while relaying"
    );
    pty.type_in(b"wox\x7frld\r");
    pty.expect("hello world");
    pty.expect("both-terminals");
    assert_eq!(pty.wait().code(), Some(7));
    // Afterwards the host terminal has its modes back.
    let (after, before) = (termios(&pty.slave), pty.initial);
    assert_eq!(after.c_lflag, before.c_lflag, "local modes restored");
    assert_eq!(after.c_iflag, before.c_iflag, "input modes restored");
    assert_eq!(after.c_oflag, before.c_oflag, "output modes restored");
}

#[test]
fn window_size_travels_in_and_follows_resizes() {
    if !sandbox_available() {
        return;
    }
    let home = TestHome::new("project");
    let mut pty = OnPty::start(airlock(
        &home,
        "trap 'echo resized:$(stty size)' WINCH; echo start:$(stty size); \
         read line; echo end:$(stty size)",
    ));
    pty.expect("start:40 120");
    pty.resize(50, 160);
    pty.expect("resized:50 160");
    pty.type_in(b"\r");
    pty.expect("end:50 160");
    assert_eq!(pty.wait().code(), Some(0));
}

#[test]
fn ctrl_c_interrupts_the_workload_not_airlock_first() {
    if !sandbox_available() {
        return;
    }
    let home = TestHome::new("project");
    let mut pty = OnPty::start(airlock(
        &home,
        "trap 'echo interrupted; exit 3' INT; echo ready; while :; do sleep 0.05; done",
    ));
    pty.expect("ready");
    pty.type_in(b"\x03");
    pty.expect("interrupted");
    assert_eq!(pty.wait().code(), Some(3));
}

#[test]
fn output_redirected_to_a_file_stays_byte_exact() {
    if !sandbox_available() {
        return;
    }
    let home = TestHome::new("project");
    let out = home.root.join("out.bin");
    let mut cmd = airlock(&home, "printf 'a\\nb\\r\\n\\001'; tty >&2");
    // stdin and stderr on the terminal, stdout into a file.
    cmd.stdout(fs::File::create(&out).expect("out file"));
    let mut pty = OnPty::start_with(cmd, false);
    pty.expect("/dev/pts/0");
    assert_eq!(pty.wait().code(), Some(0));
    assert_eq!(fs::read(&out).expect("out"), b"a\nb\r\n\x01");
}

#[test]
fn without_a_terminal_nothing_changes() {
    if !sandbox_available() {
        return;
    }
    let home = TestHome::new("project");
    let out = airlock(&home, "tty; cat /dev/tty 2>&1 | head -c 200; printf 'x\\n'")
        .output()
        .expect("airlock");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("not a tty\n"), "{text}");
    // No controlling terminal inside: /dev/tty is not the one the test runs under.
    assert!(
        text.contains("No such device") || text.contains("No such device or address"),
        "{text}"
    );
    assert!(text.ends_with("x\n"), "{text}");
}

#[test]
fn output_only_to_a_terminal_keeps_its_line_ends_and_ctrl_c_still_reaches_the_workload() {
    if !sandbox_available() {
        return;
    }
    let home = TestHome::new("project");
    // stdin not a terminal (home.airlock gives /dev/null), stdout and stderr the terminal, which
    // stays cooked: its own ^C makes the signal.
    let cmd = airlock(
        &home,
        "trap 'echo interrupted; exit 4' INT; echo ready; while :; do sleep 0.05; done",
    );
    let mut pty = OnPty::start_slots(cmd, false, true);
    pty.expect("ready\r\n");
    assert!(
        !String::from_utf8_lossy(&pty.seen).contains("\r\r\n"),
        "one \\r per line: {:?}",
        String::from_utf8_lossy(&pty.seen)
    );
    pty.type_in(b"\x03");
    pty.expect("interrupted");
    assert_eq!(pty.wait().code(), Some(4));
}
