//! Ask mode's questions as desktop notifications (`[network] ask_notify`), for when no
//! `airlock network monitor` is connected: the supervisor posts
//! `org.freedesktop.Notifications.Notify` on the user's session bus with two actions, "Allow
//! once" and "Deny", and takes the `ActionInvoked` answer.
//!
//! What the sandbox controls is the host name (and port) of its request; so:
//! - the text is built here: fixed words around the host, every character outside printable
//!   ASCII written as an escape, and markup characters written as entities when the server
//!   renders markup (its `body-markup` capability), so no tag, link or image reaches the screen;
//! - the actions are fixed keys; an `ActionInvoked` counts only for this notification's id, from
//!   the bus connection that owns `org.freedesktop.Notifications` and answered the `Notify`
//!   (the sender the bus daemon stamps, which no other client can forge), whose uid the bus
//!   reports to be this user's;
//! - no program is run ([`bus`] speaks the protocol itself), and a notification closed without an
//!   action answers nothing: the request still waits for a monitor or the timeout, which denies.

pub mod bus;
pub mod wire;

use std::io;
use std::time::{Duration, Instant};

use bus::{Bus, BusAddress, DBUS, first_str, first_u32};
use wire::{Arg, Call, Kind, Message, Value};

use super::protocol::Decision;

const NAME: &str = "org.freedesktop.Notifications";
const PATH: &str = "/org/freedesktop/Notifications";
/// The action keys; the server shows the labels beside them.
pub const ALLOW_ONCE: &str = "allow-once";
pub const DENY: &str = "deny";

/// Where questions are posted: the host's session bus.
#[derive(Debug, Clone)]
pub struct Notifier {
    address: BusAddress,
}

/// A question as the notification shows it.
#[derive(Debug, Clone)]
pub struct Question<'a> {
    pub sandbox: &'a str,
    pub host: &'a str,
    pub port: u16,
    /// How long the request still waits.
    pub timeout: Duration,
}

/// The summary and body of `q`'s notification; `markup`: the server renders markup in bodies.
pub fn text(q: &Question<'_>, markup: bool) -> (String, String) {
    let summary = format!("airlock: {} asks for the network", plain(q.sandbox, false));
    let body = format!(
        "{}:{} (no rule allows it). Denied in {} s unless allowed.",
        plain(q.host, markup),
        q.port,
        q.timeout.as_secs()
    );
    (summary, body)
}

/// `s` as printable ASCII: other characters (controls, bidi overrides, look-alikes) as `\u{..}`,
/// cut to 253 characters (the longest host name); with `markup`, `& < > " '` as entities.
fn plain(s: &str, markup: bool) -> String {
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i == 253 {
            out.push_str("...");
            break;
        }
        match c {
            '&' if markup => out.push_str("&amp;"),
            '<' if markup => out.push_str("&lt;"),
            '>' if markup => out.push_str("&gt;"),
            '"' if markup => out.push_str("&quot;"),
            '\'' if markup => out.push_str("&#39;"),
            ' '..='~' => out.push(c),
            _ => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
        }
    }
    out
}

impl Notifier {
    pub fn new(address: BusAddress) -> Notifier {
        Notifier { address }
    }

    /// Posts `q` and waits for an action until `until`, or until `settled` says the question was
    /// decided elsewhere (a monitor, the timeout); then the notification is closed. `Ok(None)`:
    /// no answer from the notification.
    pub fn ask(
        &self,
        q: &Question<'_>,
        until: Instant,
        settled: &dyn Fn() -> bool,
    ) -> io::Result<Option<Decision>> {
        let mut bus = Bus::connect(&self.address)?;
        // Signals of the server's interface reach us; which ones count is checked below.
        bus.call(&dbus_call(
            "AddMatch",
            vec![Arg::Str(format!(
                "type='signal',interface='{NAME}',path='{PATH}'"
            ))],
        ))?;
        let owner = first_str(&bus.call(&dbus_call("GetNameOwner", vec![Arg::Str(NAME.into())]))?)
            .ok_or_else(|| invalid("GetNameOwner gave no name"))?;
        let uid = first_u32(&bus.call(&dbus_call(
            "GetConnectionUnixUser",
            vec![Arg::Str(owner.clone())],
        ))?);
        let me = nix::unistd::geteuid().as_raw();
        if uid != Some(me) {
            return Err(invalid(&format!(
                "the notification server {owner} runs as uid {uid:?}, not as you (uid {me})"
            )));
        }
        let caps = bus.call(&server_call("GetCapabilities", vec![]))?;
        let markup = matches!(caps.body.first(), Some(Value::Strings(c)) if c.iter().any(|c| c == "body-markup"));
        let (summary, body) = text(q, markup);
        let notify = bus.call(&server_call(
            "Notify",
            vec![
                Arg::Str("airlock".into()),
                Arg::U32(0),
                Arg::Str(String::new()),
                Arg::Str(summary),
                Arg::Str(body),
                Arg::Strings(vec![
                    ALLOW_ONCE.into(),
                    "Allow once".into(),
                    DENY.into(),
                    "Deny".into(),
                ]),
                // Critical: it stays until answered or closed here, not hidden after seconds.
                Arg::ByteHints(vec![("urgency".into(), 2)]),
                Arg::I32(q.timeout.as_millis().min(i32::MAX as u128) as i32),
            ],
        ))?;
        if notify.sender.as_deref() != Some(owner.as_str()) {
            return Err(invalid("Notify was answered by another connection"));
        }
        let id = first_u32(&notify).ok_or_else(|| invalid("Notify gave no id"))?;
        let answer = wait_for_action(&mut bus, &owner, id, until, settled);
        // Whatever happened, the question is over for this notification.
        let _ = bus.send(&Call {
            no_reply: true,
            ..server_call("CloseNotification", vec![Arg::U32(id)])
        });
        answer
    }
}

fn wait_for_action(
    bus: &mut Bus,
    owner: &str,
    id: u32,
    until: Instant,
    settled: &dyn Fn() -> bool,
) -> io::Result<Option<Decision>> {
    while Instant::now() < until && !settled() {
        let step = (Instant::now() + Duration::from_millis(200)).min(until);
        let Some(m) = bus.next(step)? else {
            continue;
        };
        if !ours(&m, owner, id) {
            continue;
        }
        match (m.member.as_deref(), m.body.get(1)) {
            (Some("ActionInvoked"), Some(Value::Str(key))) if key == ALLOW_ONCE => {
                return Ok(Some(Decision::Once));
            }
            (Some("ActionInvoked"), Some(Value::Str(key))) if key == DENY => {
                return Ok(Some(Decision::Deny));
            }
            // Dismissed (or expired): no answer from here.
            (Some("NotificationClosed"), _) => return Ok(None),
            // The body clicked ("default"), or a key this notification never offered.
            _ => {}
        }
    }
    Ok(None)
}

/// A signal about notification `id`, from the server that answered the `Notify`.
fn ours(m: &Message, owner: &str, id: u32) -> bool {
    m.is(Kind::Signal)
        && m.sender.as_deref() == Some(owner)
        && m.interface.as_deref() == Some(NAME)
        && m.path.as_deref() == Some(PATH)
        && m.body.first() == Some(&Value::U32(id))
}

fn dbus_call(member: &'static str, args: Vec<Arg>) -> Call<'static> {
    Call {
        destination: DBUS,
        path: "/org/freedesktop/DBus",
        interface: DBUS,
        member,
        args,
        no_reply: false,
    }
}

fn server_call(member: &'static str, args: Vec<Arg>) -> Call<'static> {
    Call {
        destination: NAME,
        path: PATH,
        interface: NAME,
        member,
        args,
        no_reply: false,
    }
}

fn invalid(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(host: &str) -> Question<'_> {
        Question {
            sandbox: "app-1a2b3c4d",
            host,
            port: 443,
            timeout: Duration::from_secs(60),
        }
    }

    #[test]
    fn the_text_carries_no_markup_or_control_character_of_the_host() {
        let (summary, body) = text(&q("registry.example.org"), true);
        assert_eq!(summary, "airlock: app-1a2b3c4d asks for the network");
        assert_eq!(
            body,
            "registry.example.org:443 (no rule allows it). Denied in 60 s unless allowed."
        );
        let hostile = "<a href=\"https://x\">ok</a>&<img src=x>\n\u{1b}[2J\u{202e}lmth.x";
        let (_, body) = text(&q(hostile), true);
        assert!(body.starts_with(
            "&lt;a href=&quot;https://x&quot;&gt;ok&lt;/a&gt;&amp;&lt;img src=x&gt;\\u{a}\\u{1b}[2J\\u{202e}lmth.x:443"
        ), "{body}");
        let (_, plain_body) = text(&q(hostile), false);
        assert!(plain_body.starts_with("<a href=\"https://x\">ok</a>&<img src=x>\\u{a}"));
        assert!(!plain_body.chars().any(|c| c.is_control() || !c.is_ascii()));
        let (_, long) = text(&q(&"a".repeat(5000)), true);
        assert!(long.len() < 400, "{}", long.len());
    }
}
