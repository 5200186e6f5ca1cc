//! The repository git config reader (`airlock_tools::git::sanitize`): a repository's `.git/config`,
//! which the sandbox's own commits and a cloned project can shape, read as the host file is (lossy
//! UTF-8). `sanitize` gives the sandbox its view; `remote_hosts` picks the hosts the bridge may
//! serve credentials for; `plain_value` reads `core.hooksPath`.
//!
//! Beyond "no panic": the sanitised text keeps no `scheme://user:pass@` userinfo anywhere, and
//! sanitising it again changes nothing (so nothing the reader drops is left in it); remote hosts
//! are non-empty, lower-case, distinct, without userinfo, port or path; a plain value is never
//! quoted, escaped or commented.
#![no_main]

use airlock_tools::git::sanitize::{plain_value, remote_hosts, sanitize};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let out = sanitize(&text);
    assert_eq!(sanitize(&out), out, "sanitising twice changes {out:?}");
    let mut rest = out.as_str();
    while let Some(at) = rest.find("://") {
        rest = &rest[at + 3..];
        let authority = rest
            .split(['/', '?', '#', '"', ' ', '\t', '\n', '\r'])
            .next()
            .unwrap_or("");
        assert!(!authority.contains('@'), "userinfo kept in {out:?}");
    }

    let hosts = remote_hosts(&text);
    for (i, host) in hosts.iter().enumerate() {
        assert!(
            !host.is_empty() && !host.contains(['@', ':', '/']),
            "{host:?}"
        );
        assert_eq!(host, &host.to_ascii_lowercase());
        assert!(!hosts[..i].contains(host), "{host:?} twice");
    }

    if let Some(value) = plain_value(&text, "core", "hookspath") {
        assert!(!value.contains(['"', '\\', ';', '#']), "{value:?}");
        assert_eq!(value, value.trim());
    }
});
