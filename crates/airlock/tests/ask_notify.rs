//! Ask mode's desktop notifications with the real binary: curl in a `--network proxy` sandbox
//! asks for a host no rule matches while no monitor runs; the question reaches a fake
//! notification server on a private session bus (the one `DBUS_SESSION_BUS_ADDRESS` names for
//! `airlock run`), whose "Allow once" lets the request through; with `ask_notify = false` nothing
//! is posted and the timeout denies.

mod common;

#[path = "../../airlock-egress/tests/support/desktop.rs"]
mod desktop;

use common::egress::{World, sandbox_available};
use common::report;
use desktop::Desktop;

fn world(extra: &str) -> World {
    World::new(&format!(
        "[network]\npreset = \"deny-all\"\nunmatched = \"ask\"\nask_timeout = 3\n{extra}\
         allow = [\"127.0.0.1\"]\nresolve = {{ \"asked.test\" = \"127.0.0.1\" }}\n"
    ))
}

fn curl_in_sandbox(w: &World, desktop: &Desktop, port: u16) -> std::process::Output {
    w.airlock(&[
        "run",
        "--",
        "sh",
        "-c",
        &format!("curl -s -o /dev/null -w '%{{http_code}}\\n' http://asked.test:{port}/"),
    ])
    .env("PATH", "/usr/local/bin:/usr/bin:/bin")
    .env(
        "DBUS_SESSION_BUS_ADDRESS",
        format!("unix:path={}", desktop.socket.display()),
    )
    .output()
    .expect("airlock")
}

#[test]
fn allow_once_on_the_desktop_lets_the_sandboxs_request_through() {
    if !sandbox_available() || !desktop::available() {
        return;
    }
    let w = world("");
    let port = common::egress::http_server("ok\n");
    let desktop = Desktop::start("allow", "markup");
    let out = curl_in_sandbox(&w, &desktop, port);
    assert_eq!(common::stdout(&out), "200\n", "{}", report(&out));
    let notifies = desktop.notifies();
    assert_eq!(notifies.len(), 1, "{notifies:?}");
    let name = airlock_sandbox::state::sandbox_name(&w.project);
    assert_eq!(
        notifies[0]["summary"],
        format!("airlock: {name} asks for the network")
    );
    assert_eq!(
        notifies[0]["body"],
        format!("asked.test:{port} (no rule allows it). Denied in 3 s unless allowed.")
    );
    let log = serde_json::to_string(&w.log()).unwrap();
    assert!(log.contains("asked: once"), "{log}");
}

#[test]
fn ask_notify_false_posts_nothing_and_the_timeout_denies() {
    if !sandbox_available() || !desktop::available() {
        return;
    }
    let w = world("ask_notify = false\n");
    let port = common::egress::http_server("ok\n");
    let desktop = Desktop::start("allow", "markup");
    let out = curl_in_sandbox(&w, &desktop, port);
    assert_eq!(common::stdout(&out), "403\n", "{}", report(&out));
    assert!(desktop.notifies().is_empty());
    let log = serde_json::to_string(&w.log()).unwrap();
    assert!(
        log.contains("not answered in airlock network monitor within 3 s"),
        "{log}"
    );
}
