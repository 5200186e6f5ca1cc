//! The sandboxes overlay: every mapping with pane, agent, state, status and port links, refreshed
//! every few seconds in a background thread (a hung sbx call never freezes the screen); q closes.

use std::io::{Read as _, Write as _};
use std::sync::mpsc;
use std::time::Duration;

use crate::actions::list_rows;
use crate::app::App;

const REFRESH: Duration = Duration::from_secs(3);

/// Renders one frame of rows.
pub fn render(rows: &[serde_json::Value], error: Option<&str>, refreshing: bool) -> String {
    let mut out = String::from("\x1b[H\x1b[2Jairlock sandboxes (q closes)\n\n");
    if rows.is_empty() {
        out.push_str("no sandboxes; start-agent creates one\n");
    }
    for r in rows {
        let s = |k: &str| r[k].as_str().unwrap_or("-").to_owned();
        let pane = if r["paneExists"] == false {
            format!("{} (gone)", s("paneId"))
        } else {
            s("paneId")
        };
        out.push_str(&format!(
            "{:<14} {:<12} {:<10} {:<9} {}\n",
            pane,
            s("agentKind"),
            s("lifecycleState"),
            s("status"),
            s("sandboxName")
        ));
        for p in r["ports"].as_array().into_iter().flatten() {
            out.push_str(&format!("    airlock://{}/{}\n", s("sandboxName"), p));
        }
    }
    if let Some(e) = error {
        out.push_str(&format!("\nsbx: {e}\n"));
    }
    if refreshing {
        out.push_str("\nrefreshing...\n");
    }
    out
}

/// Runs the overlay until q (or end of input). Returns the exit code.
pub fn run(app: &App) -> i32 {
    let _raw = RawMode::enable();
    let (keys_tx, keys_rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut byte = [0u8; 1];
        while std::io::stdin().read(&mut byte).is_ok_and(|n| n == 1) {
            if keys_tx.send(byte[0]).is_err() {
                return;
            }
        }
        let _ = keys_tx.send(b'q');
    });
    let (rows_tx, rows_rx) = mpsc::channel();
    let worker_app = app.clone();
    std::thread::spawn(move || {
        loop {
            let config = worker_app.config().unwrap_or_default();
            let mappings = worker_app.store.list().unwrap_or_default();
            let sbx = worker_app.backend_for_all(&config, &mappings).ok();
            let herdr = worker_app.herdr().ok();
            let (rows, err, _) = list_rows(&mappings, sbx.as_deref(), herdr.as_ref());
            if rows_tx.send((rows, err.map(|e| e.message))).is_err() {
                return;
            }
            std::thread::sleep(REFRESH);
        }
    });
    let mut last: (Vec<serde_json::Value>, Option<String>) = (Vec::new(), None);
    let mut stdout = std::io::stdout();
    let _ = write!(stdout, "{}", render(&last.0, None, true));
    let _ = stdout.flush();
    loop {
        if let Ok(frame) = rows_rx.recv_timeout(Duration::from_millis(100)) {
            last = frame;
            let _ = write!(stdout, "{}", render(&last.0, last.1.as_deref(), false));
            let _ = stdout.flush();
        }
        while let Ok(key) = keys_rx.try_recv() {
            if key == b'q' || key == b'Q' {
                return 0;
            }
        }
    }
}

/// Non-canonical, no-echo input while the overlay runs (restored on drop); a no-op off a TTY.
struct RawMode(Option<libc::termios>);

impl RawMode {
    fn enable() -> RawMode {
        // SAFETY: tcgetattr/tcsetattr on fd 0 with a zeroed, then filled, termios.
        unsafe {
            let mut t: libc::termios = std::mem::zeroed();
            if libc::isatty(0) == 0 || libc::tcgetattr(0, &mut t) != 0 {
                return RawMode(None);
            }
            let saved = t;
            t.c_lflag &= !(libc::ICANON | libc::ECHO);
            libc::tcsetattr(0, libc::TCSANOW, &t);
            RawMode(Some(saved))
        }
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        if let Some(t) = self.0 {
            // SAFETY: restoring the attributes read in `enable`.
            unsafe { libc::tcsetattr(0, libc::TCSANOW, &t) };
        }
    }
}
