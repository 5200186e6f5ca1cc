//! `airlock network monitor`: answers ask mode's questions (`[network] unmatched = "ask"`) of the
//! running sandboxes. On a terminal, one key per question; otherwise line mode for scripts:
//! `ask N SANDBOX HOST:PORT` out, `N once|session|always|deny` in.
//!
//! Also the launch side: the session's ask gate, made when the config asks for it.

use std::collections::VecDeque;
use std::io::{BufRead as _, IsTerminal as _, Write as _};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use airlock_config::{Unmatched, XdgPaths};
use airlock_egress::ask::AskGate;
use airlock_egress::ask::client::{Event, Monitor};
use airlock_egress::ask::protocol::Decision;
use airlock_sandbox::SandboxSpec;
use anyhow::Context as _;

#[derive(Debug, clap::Args)]
pub struct MonitorArgs {
    /// Only this sandbox's questions (a name from `airlock sandboxes list`)
    #[arg(long, value_name = "NAME")]
    pub sandbox: Option<String>,
}

/// The session's ask gate when `[network] unmatched = "ask"` in proxy mode.
pub fn gate(paths: &XdgPaths, spec: &SandboxSpec) -> anyhow::Result<Option<Arc<AskGate>>> {
    let Some(egress) = &spec.egress else {
        return Ok(None);
    };
    if egress.settings.unmatched != Unmatched::Ask {
        return Ok(None);
    }
    // Short names: a unix socket path has at most 107 bytes.
    let hash = spec.name.rsplit('-').next().unwrap_or("x");
    let path = paths
        .monitor_dir()
        .join(format!("{hash}-{}.sock", std::process::id()));
    if path.as_os_str().len() > 100 {
        anyhow::bail!(
            "[network] unmatched = \"ask\": the monitor socket path {} is too long for a unix \
             socket; set XDG_STATE_HOME to a shorter directory",
            path.display()
        );
    }
    let timeout = Duration::from_secs(egress.settings.ask_timeout);
    let mut gate = AskGate::bind(&path, &spec.name, &spec.project, timeout).with_context(|| {
        format!(
            "cannot listen for airlock network monitor on {}",
            path.display()
        )
    })?;
    // The supervisor's own environment (the host's), never the sandbox's.
    match egress
        .settings
        .ask_notify
        .then(airlock_egress::ask::notify::bus::BusAddress::from_env)
        .flatten()
    {
        Some(Ok(address)) => {
            gate = gate.with_notifier(airlock_egress::ask::notify::Notifier::new(address));
        }
        Some(Err(e)) => eprintln!(
            "airlock: warning: [network] ask_notify: {e}; questions go only to `airlock \
             network monitor`"
        ),
        None => {}
    }
    Ok(Some(Arc::new(gate)))
}

struct Question {
    seq: u64,
    session: u64,
    id: u64,
    host: String,
    port: u16,
}

struct Session {
    sandbox: String,
    project: PathBuf,
}

pub fn run(paths: &XdgPaths, args: &MonitorArgs) -> anyhow::Result<i32> {
    let dir = paths.monitor_dir();
    let (mut monitor, events) = Monitor::new(&dir, args.sandbox.as_deref());
    let interactive = std::io::stdin().is_terminal() && std::io::stdout().is_terminal();
    let lines = (!interactive).then(spawn_stdin_reader);
    let mut sessions = std::collections::HashMap::new();
    let mut queue: VecDeque<Question> = VecDeque::new();
    let mut seq = 0;
    let mut shown: Option<u64> = None;
    eprintln!(
        "airlock: watching {} for questions (sandboxes with [network] unmatched = \"ask\"){}",
        dir.display(),
        if interactive { "; q quits" } else { "" }
    );
    let _raw = interactive.then(RawMode::enter).transpose()?;
    loop {
        monitor.scan();
        while let Ok(event) = events.try_recv() {
            match event {
                Event::Joined {
                    session,
                    sandbox,
                    project,
                } => {
                    say(interactive, &format!("connected to {sandbox} ({project})"));
                    sessions.insert(
                        session,
                        Session {
                            sandbox,
                            project: PathBuf::from(project),
                        },
                    );
                }
                Event::Ask {
                    session,
                    id,
                    host,
                    port,
                } => {
                    seq += 1;
                    if !interactive {
                        let name = sessions.get(&session).map_or("?", |s| s.sandbox.as_str());
                        println!("ask {seq} {name} {host}:{port}");
                        let _ = std::io::stdout().flush();
                    }
                    queue.push_back(Question {
                        seq,
                        session,
                        id,
                        host,
                        port,
                    });
                }
                Event::Decided {
                    session,
                    id,
                    decision,
                } => {
                    if let Some(pos) = queue
                        .iter()
                        .position(|q| q.session == session && q.id == id)
                    {
                        let q = queue.remove(pos).expect("found");
                        say(interactive, &format!("{}:{} {decision}", q.host, q.port));
                        if shown == Some(q.seq) {
                            shown = None;
                        }
                    }
                }
                Event::Left { session } => {
                    queue.retain(|q| q.session != session);
                    if let Some(s) = sessions.remove(&session) {
                        say(interactive, &format!("{} ended", s.sandbox));
                    }
                }
            }
        }
        if interactive {
            if let Some(q) = queue.front()
                && shown != Some(q.seq)
            {
                let name = sessions.get(&q.session).map_or("?", |s| s.sandbox.as_str());
                say(
                    true,
                    &format!(
                        "{name} wants {}:{}: (o)nce, (s)ession, (a)lways (writes the rule), (d)eny{}",
                        q.host,
                        q.port,
                        match queue.len() {
                            1 => String::new(),
                            n => format!("   [{} more waiting]", n - 1),
                        }
                    ),
                );
                shown = Some(q.seq);
            }
            match read_key(Duration::from_millis(200))? {
                Some('q') => return Ok(0),
                Some(key) => {
                    if let Some(decision) = decision_of(key)
                        && let Some(q) = queue.front()
                    {
                        let decision = confirm_always(paths, &sessions, q, decision, true)?;
                        monitor.answer(q.session, q.id, decision);
                    }
                }
                None => {}
            }
        } else if let Some(lines) = &lines {
            match lines.recv_timeout(Duration::from_millis(200)) {
                Ok(Some(line)) => {
                    let mut words = line.split_whitespace();
                    let (Some(n), Some(word)) = (words.next(), words.next()) else {
                        continue;
                    };
                    let decision = match word {
                        "once" => Decision::Once,
                        "session" => Decision::Session,
                        "always" => Decision::Always,
                        "deny" => Decision::Deny,
                        _ => {
                            eprintln!(
                                "airlock: expected `N once|session|always|deny`, got {line:?}"
                            );
                            continue;
                        }
                    };
                    if let Some(q) = queue.iter().find(|q| n.parse() == Ok(q.seq)) {
                        let decision = confirm_always(paths, &sessions, q, decision, false)?;
                        monitor.answer(q.session, q.id, decision);
                    }
                }
                Ok(None) => return Ok(0), // stdin closed
                Err(_) => {}
            }
        }
    }
}

fn decision_of(key: char) -> Option<Decision> {
    match key {
        'o' => Some(Decision::Once),
        's' => Some(Decision::Session),
        'a' => Some(Decision::Always),
        'd' => Some(Decision::Deny),
        _ => None,
    }
}

/// "always": the rule goes into the project's `.airlock.toml` (asked once more on a terminal);
/// when it cannot be written, the answer is `session` and the reason is printed.
fn confirm_always(
    paths: &XdgPaths,
    sessions: &std::collections::HashMap<u64, Session>,
    q: &Question,
    decision: Decision,
    ask: bool,
) -> anyhow::Result<Decision> {
    if decision != Decision::Always {
        return Ok(decision);
    }
    let Some(session) = sessions.get(&q.session) else {
        return Ok(Decision::Session);
    };
    let file = session.project.join(airlock_config::PROJECT_FILE_NAME);
    if ask {
        say(
            true,
            &format!("add allow = [\"{}\"] to {}? (y/n)", q.host, file.display()),
        );
        if read_key(Duration::from_secs(60))? != Some('y') {
            return Ok(Decision::Session);
        }
    }
    match airlock_config::add_allow_rule(paths, &session.project, &q.host) {
        Ok(file) => say(ask, &format!("added {:?} to {}", q.host, file.display())),
        Err(e) => {
            say(ask, &format!("not written ({e}); allowed for this session"));
            return Ok(Decision::Session);
        }
    }
    Ok(Decision::Always)
}

/// A line on stderr; in raw mode lines need a carriage return.
fn say(raw: bool, line: &str) {
    let text = airlock_config::printable(line);
    match raw {
        true => eprint!("{text}\r\n"),
        false => eprintln!("airlock: {text}"),
    }
}

fn spawn_stdin_reader() -> std::sync::mpsc::Receiver<Option<String>> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            let Ok(line) = line else { break };
            if tx.send(Some(line)).is_err() {
                return;
            }
        }
        let _ = tx.send(None);
    });
    rx
}

/// The terminal in raw mode while the monitor runs.
struct RawMode;

impl RawMode {
    fn enter() -> anyhow::Result<RawMode> {
        crossterm::terminal::enable_raw_mode().context("cannot put the terminal in raw mode")?;
        Ok(RawMode)
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        let _ = crossterm::terminal::disable_raw_mode();
    }
}

fn read_key(wait: Duration) -> anyhow::Result<Option<char>> {
    use crossterm::event::{self, Event as Term, KeyCode, KeyEventKind, KeyModifiers};
    if !event::poll(wait)? {
        return Ok(None);
    }
    match event::read()? {
        Term::Key(k) if k.kind == KeyEventKind::Press => match k.code {
            KeyCode::Char('c') if k.modifiers.contains(KeyModifiers::CONTROL) => Ok(Some('q')),
            KeyCode::Char(c) => Ok(Some(c.to_ascii_lowercase())),
            KeyCode::Esc => Ok(Some('q')),
            _ => Ok(None),
        },
        _ => Ok(None),
    }
}
