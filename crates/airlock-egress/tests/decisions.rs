//! Allow and deny decisions end to end: real clients, a real proxy, a loopback upstream.

mod support;

use std::process::Command;

use airlock_config::EgressPreset;
use airlock_egress::LogDecision;
use support::upstream::Upstream;
use support::*;

#[test]
fn allowed_host_via_plain_http_with_curl() {
    let Some(curl) = tool("curl") else { return };
    let up = Upstream::start();
    let proxy = Proxy::start(&settings(
        EgressPreset::DenyAll,
        &["allowed.test", "127.0.0.1"],
        &[],
    ));
    let out = Command::new(curl)
        .args(["-sS", "--max-time", "30", "--proxy"])
        .arg(format!("http://{}", proxy.addr))
        .arg(format!(
            "http://allowed.test:{}/hello?token=SECRET",
            up.port()
        ))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "hello from upstream",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let records = proxy.finish();
    let r = record_for(&records, "allowed.test");
    assert_decision(r, LogDecision::Allowed);
    assert_eq!(
        (r.method.as_str(), r.port, r.rule.as_deref()),
        ("GET", up.port(), Some("allowed.test"))
    );
    assert!(r.bytes_down > 19, "{r:?}");
    assert!(!proxy_log_text(&records).contains("SECRET"));
}

fn proxy_log_text(records: &[airlock_egress::LogRecord]) -> String {
    records
        .iter()
        .map(|r| serde_json::to_string(r).unwrap())
        .collect()
}

#[test]
fn log_lines_never_hold_paths_queries_or_headers() {
    let up = Upstream::start();
    let proxy = Proxy::start(&settings(
        EgressPreset::DenyAll,
        &["allowed.test", "127.0.0.1"],
        &[],
    ));
    let port = up.port();
    let resp = proxy.raw(
        format!(
            "GET http://allowed.test:{port}/secret-path?key=SECRET1 HTTP/1.1\r\nHost: allowed.test:{port}\r\n\
             Authorization: Bearer SECRET2\r\nProxy-Authorization: Basic SECRET3\r\n\r\n"
        )
        .as_bytes(),
    );
    assert_eq!(status_of(&resp), 404);
    let text = proxy.finish_text();
    for secret in ["secret-path", "SECRET1", "SECRET2", "SECRET3", "Bearer"] {
        assert!(!text.contains(secret), "{secret} in {text}");
    }
    assert_eq!(text.lines().count(), 1, "{text}");
}

#[test]
fn denied_host_gets_403_naming_the_config_line_and_a_log_line() {
    let up = Upstream::start();
    let proxy = Proxy::start(&settings(EgressPreset::Balanced, &[], &[]));
    let resp = proxy.raw(b"CONNECT evil.test:443 HTTP/1.1\r\nHost: evil.test:443\r\n\r\n");
    assert_eq!(status_of(&resp), 403, "{resp}");
    assert!(resp.contains("egress to evil.test:443 is denied"), "{resp}");
    assert!(resp.contains("allow = [\"evil.test\"]"), "{resp}");
    assert!(
        resp.contains("[network]") && resp.contains("--allow-host evil.test"),
        "{resp}"
    );
    let records = proxy.finish();
    let r = record_for(&records, "evil.test");
    assert_decision(r, LogDecision::Denied);
    assert_eq!(
        (r.method.as_str(), r.port, r.rule.as_deref()),
        ("CONNECT", 443, None)
    );
    assert_eq!(r.reason.as_deref(), Some("no rule allows it"));
    assert_eq!(up.connections(), 0);
}

#[test]
fn case_dot_and_port_variants_of_a_denied_host_are_denied() {
    let up = Upstream::start();
    let p = up.port();
    let proxy = Proxy::start(&settings(
        EgressPreset::AllowAll,
        &["127.0.0.1"],
        &["evil.test"],
    ));
    let requests = [
        format!("CONNECT EVIL.TEST:{p} HTTP/1.1\r\n\r\n"),
        format!("CONNECT evil.test.:{p} HTTP/1.1\r\n\r\n"),
        "CONNECT Evil.Test.:8443 HTTP/1.1\r\n\r\n".to_owned(),
        format!("GET http://EVIL.test.:{p}/hello HTTP/1.1\r\nHost: evil.test:{p}\r\n\r\n"),
        "GET http://evil.TEST/hello HTTP/1.1\r\nHost: EVIL.test.\r\n\r\n".to_owned(),
    ];
    for req in &requests {
        let resp = proxy.raw(req.as_bytes());
        assert_eq!(status_of(&resp), 403, "{req}\n{resp}");
        assert!(
            resp.contains("deny rule \"evil.test\" from /test/config.toml"),
            "{resp}"
        );
    }
    // The same proxy does let other names through, so the 403s were the deny rule's doing.
    let ok = proxy.raw(
        format!("GET http://other.test:{p}/hello HTTP/1.1\r\nHost: other.test:{p}\r\n\r\n")
            .as_bytes(),
    );
    assert_eq!(status_of(&ok), 200, "{ok}");
    let records = proxy.finish();
    let denied = records
        .iter()
        .filter(|r| r.decision == LogDecision::Denied)
        .count();
    assert_eq!(denied, requests.len(), "{records:#?}");
    assert!(
        records
            .iter()
            .all(|r| r.host != "EVIL.TEST" && r.host != "evil.test.")
    );
    assert_eq!(up.connections(), 1, "only other.test reached the server");
}

#[test]
fn allowed_name_resolving_to_loopback_is_refused_without_an_address_rule() {
    let up = Upstream::start();
    let p = up.port();
    let req =
        format!("GET http://allowed.test:{p}/hello HTTP/1.1\r\nHost: allowed.test:{p}\r\n\r\n");
    let proxy = Proxy::start(&settings(EgressPreset::DenyAll, &["allowed.test"], &[]));
    let resp = proxy.raw(req.as_bytes());
    assert_eq!(status_of(&resp), 403, "{resp}");
    assert!(
        resp.contains("allowed.test resolves to 127.0.0.1, which is loopback"),
        "{resp}"
    );
    assert!(
        resp.contains("allow = [\"127.0.0.1\"]") && resp.contains("allow_private = true"),
        "{resp}"
    );
    let records = proxy.finish();
    let r = record_for(&records, "allowed.test");
    assert_decision(r, LogDecision::Denied);
    assert_eq!(up.connections(), 0);

    // A literal IP target is checked the same way.
    let proxy = Proxy::start(&settings(EgressPreset::AllowAll, &[], &[]));
    let resp = proxy.raw(format!("CONNECT 127.0.0.1:{p} HTTP/1.1\r\n\r\n").as_bytes());
    assert_eq!(status_of(&resp), 403, "{resp}");
    let resp = proxy.raw(format!("CONNECT [::ffff:127.0.0.1]:{p} HTTP/1.1\r\n\r\n").as_bytes());
    assert_eq!(status_of(&resp), 403, "{resp}");
    proxy.finish();
    assert_eq!(up.connections(), 0);

    // allow_private lets it through.
    let mut s = settings(EgressPreset::DenyAll, &["allowed.test"], &[]);
    s.allow_private = true;
    let proxy = Proxy::start(&s);
    assert_eq!(status_of(&proxy.raw(req.as_bytes())), 200);
    proxy.finish();
}

#[test]
fn unresolvable_allowed_name_gets_502_naming_it() {
    let proxy = Proxy::start(&settings(EgressPreset::DenyAll, &["*.invalid"], &[]));
    let resp = proxy.raw(b"CONNECT no-such-host.invalid:443 HTTP/1.1\r\n\r\n");
    assert_eq!(status_of(&resp), 502, "{resp}");
    assert!(
        resp.contains("cannot resolve no-such-host.invalid"),
        "{resp}"
    );
    let records = proxy.finish();
    let r = record_for(&records, "no-such-host.invalid");
    assert_decision(r, LogDecision::Error);
    assert_eq!(r.rule.as_deref(), Some("*.invalid"));
}

#[test]
fn refused_upstream_gets_502() {
    // A port nobody listens on: bind, note it, close.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let proxy = Proxy::start(&settings(
        EgressPreset::DenyAll,
        &["allowed.test", "127.0.0.1"],
        &[],
    ));
    let resp = proxy.raw(format!("CONNECT allowed.test:{port} HTTP/1.1\r\n\r\n").as_bytes());
    assert_eq!(status_of(&resp), 502, "{resp}");
    assert!(
        resp.contains(&format!("cannot connect to allowed.test:{port}")),
        "{resp}"
    );
    proxy.finish();
}
