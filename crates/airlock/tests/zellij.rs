//! zellij pass-through (`[tools.zellij] enabled = true`, off by default): inside a zellij pane,
//! the socket directory and `ZELLIJ*` reach the sandbox, with a warning naming what it grants.

mod common;

use std::fs;
use std::os::unix::fs::PermissionsExt;

use common::{TestHome, report, sandbox_starts, stderr, stdout, write};

#[test]
fn zellij_is_passed_only_when_enabled_and_says_it_is_unfiltered() {
    if !sandbox_starts() {
        eprintln!("skipped: the sandbox cannot start here");
        return;
    }
    let h = TestHome::new("home/code/app");
    let sockets = h.root.join("zellij-sockets");
    write(&sockets.join("contract_version_1/session-a"), "");
    let bin = h.root.join("bin");
    write(&bin.join("zellij"), "#!/bin/sh\nexit 0\n");
    fs::set_permissions(bin.join("zellij"), fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!("{}:/usr/bin:/bin", bin.display());
    let run = || {
        h.airlock(&[
            "run",
            "--network",
            "none",
            "--",
            "sh",
            "-c",
            "echo \"z=$ZELLIJ s=$ZELLIJ_SESSION_NAME p=$ZELLIJ_PANE_ID\"; ls \"$ZELLIJ_SOCKET_DIR/contract_version_1\"",
        ])
        .env("PATH", &path)
        .env("ZELLIJ", "0")
        .env("ZELLIJ_SESSION_NAME", "work")
        .env("ZELLIJ_PANE_ID", "3")
        .env("ZELLIJ_SOCKET_DIR", &sockets)
        .output()
        .expect("airlock")
    };
    // Off by default: nothing of zellij inside.
    let off = run();
    assert!(stdout(&off).starts_with("z= s= p="), "{}", report(&off));
    assert!(!stderr(&off).contains("zellij"), "{}", report(&off));
    h.config("[tools.zellij]\nenabled = true\n");
    let on = run();
    assert!(on.status.success(), "{}", report(&on));
    let text = stdout(&on);
    assert!(text.starts_with("z=0 s=work p=3\n"), "{}", report(&on));
    assert!(
        text.contains("session-a"),
        "the socket dir is inside: {}",
        report(&on)
    );
    assert!(
        stderr(&on).contains("full control of your zellij sessions"),
        "{}",
        report(&on)
    );
}
