//! `airlock forward --remove` and `--list` against a running session: the forward's listener
//! closes, the session and its other forwards go on, and an unknown session or port is refused
//! naming it.

mod common;

use common::ports::*;

#[test]
fn forward_remove_closes_one_forward_and_list_shows_what_is_left() {
    if !available() {
        return;
    }
    let h = site("removable\n");
    let published = free_port();
    let run = Running::start(
        &h,
        &["--publish", &format!("{published}:8000")],
        &http_server(8000),
    );
    wait_for("the published server", || get(published, "/").is_some());
    let port = free_port();
    let out = h.run(&["forward", &format!("{port}:8000")]);
    assert!(out.status.success(), "{}", common::report(&out));
    wait_for("the forward", || get(port, "/").is_some());

    let list = h.run(&["forward", "--list"]);
    assert!(list.status.success(), "{}", common::report(&list));
    assert_eq!(
        common::stdout(&list),
        format!("{published}→8000 (publish)\n{port}→8000 (forward)\n")
    );

    let removed = h.run(&["forward", "--remove", &port.to_string()]);
    assert!(removed.status.success(), "{}", common::report(&removed));
    assert!(
        common::stdout(&removed).contains(&format!(
            "the host's 127.0.0.1:{port} no longer reaches 127.0.0.1:8000 in the sandbox \
             (forward forward removed); connections already open go on until they close"
        )),
        "{}",
        common::report(&removed)
    );
    assert!(port_is_free(port), "the listener closed");
    assert_eq!(get(published, "/").as_deref(), Some("removable\n"));
    assert_eq!(
        common::stdout(&h.run(&["forward", "--list"])),
        format!("{published}→8000 (publish)\n")
    );

    // The same port again, by pid: this session does not forward it.
    let again = h.run(&[
        "forward",
        "--session",
        &run.pid().to_string(),
        "--remove",
        &port.to_string(),
    ]);
    assert_eq!(again.status.code(), Some(125), "{}", common::report(&again));
    let name = airlock_sandbox::state::sandbox_name(&h.project);
    assert!(
        common::stderr(&again).contains(&format!(
            "sandbox {name} (session {}) refused the removal: this session forwards no host \
             port {port}; its inbound forwards: {published}→8000",
            run.pid()
        )),
        "{}",
        common::report(&again)
    );
    // No such session; a mapping where a port is expected.
    let nope = h.run(&["forward", "--sandbox", "nope-12345678", "--remove", "9999"]);
    assert_eq!(nope.status.code(), Some(125), "{}", common::report(&nope));
    assert!(
        common::stderr(&nope).contains("sandbox nope-12345678 has no running session"),
        "{}",
        common::report(&nope)
    );
    let pid = h.run(&["forward", "--session", "1", "--list"]);
    assert_eq!(pid.status.code(), Some(125), "{}", common::report(&pid));
    let mapping = h.run(&["forward", "--remove", "8080:3000"]);
    assert_eq!(
        mapping.status.code(),
        Some(2),
        "{}",
        common::report(&mapping)
    );
    assert!(
        common::stderr(&mapping).contains("--remove takes the host port alone"),
        "{}",
        common::report(&mapping)
    );

    let (status, stderr) = run.stop();
    assert!(status.success(), "{stderr}");
    assert!(port_is_free(published));
}
