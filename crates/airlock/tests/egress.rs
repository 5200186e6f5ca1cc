//! `--network proxy` end to end: the real binary, a real sandbox, curl inside, servers on the host's
//! loopback. Names like `allowed.test` reach those servers through the `[network] resolve` map.

mod common;

use std::path::Path;
use std::process::Command;

use common::egress::{World, http_server, sandbox_available};
use common::report as out;

#[test]
fn allowed_host_passes_and_denied_host_gets_403_with_a_log_line() {
    if !sandbox_available() {
        return;
    }
    let port = http_server("hello from the host");
    let w = World::new(
        "[network]\npreset = \"deny-all\"\nallow = [\"allowed.test\", \"127.0.0.1\"]\n\
         resolve = { \"allowed.test\" = \"127.0.0.1\", \"denied.test\" = \"127.0.0.1\" }\n",
    );
    let script = format!(
        "curl -sS http://allowed.test:{port}/ && echo && \
         curl -s -o /dev/null -w '%{{http_code}}' http://denied.test:{port}/"
    );
    let o = w.sh(&[], &script);
    assert!(o.status.success(), "{}", out(&o));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "hello from the host\n403",
        "{}",
        out(&o)
    );
    let log = w.log();
    let decision = |host: &str| {
        log.iter()
            .find(|l| l["host"] == host)
            .map(|l| l["decision"].as_str().unwrap_or_default().to_owned())
    };
    assert_eq!(
        decision("allowed.test").as_deref(),
        Some("allowed"),
        "{log:?}"
    );
    assert_eq!(
        decision("denied.test").as_deref(),
        Some("denied"),
        "{log:?}"
    );
}

#[test]
fn denied_body_names_the_host_and_the_config_line() {
    if !sandbox_available() {
        return;
    }
    let w = World::new("[network]\npreset = \"deny-all\"\n");
    let o = w.sh(&[], "curl -s http://nope.test/");
    let body = String::from_utf8_lossy(&o.stdout);
    assert!(body.contains("nope.test"), "{}", out(&o));
    assert!(body.contains("allow = [\"nope.test\"]"), "{}", out(&o));
}

#[test]
fn allowed_name_pointing_at_loopback_is_refused_without_an_address_rule() {
    if !sandbox_available() {
        return;
    }
    let port = http_server("host service");
    let w = World::new(
        "[network]\npreset = \"deny-all\"\nallow = [\"allowed.test\"]\n\
         resolve = { \"allowed.test\" = \"127.0.0.1\" }\n",
    );
    let o = w.sh(
        &[],
        &format!("curl -s -o /dev/null -w '%{{http_code}}' http://allowed.test:{port}/"),
    );
    let code = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(code == "403" || code == "502", "refused, got {}", out(&o));
    assert!(
        w.log()
            .iter()
            .any(|l| l["host"] == "allowed.test" && l["decision"] != "allowed")
    );
}

#[test]
fn case_trailing_dot_and_port_variants_of_a_denied_host_are_denied() {
    if !sandbox_available() {
        return;
    }
    let port = http_server("x");
    let w = World::new(&format!(
        "[network]\npreset = \"allow-all\"\nallow_private = true\ndeny = [\"blocked.test\"]\n\
         resolve = {{ \"blocked.test\" = \"127.0.0.1\" }}\n# port {port}\n"
    ));
    for url in [
        format!("http://BLOCKED.test:{port}/"),
        format!("http://blocked.test.:{port}/"),
        format!("http://Blocked.Test.:{port}/"),
        "http://blocked.test:80/".to_owned(),
    ] {
        let o = w.sh(
            &[],
            &format!("curl -s -o /dev/null -w '%{{http_code}}' '{url}'"),
        );
        assert_eq!(
            String::from_utf8_lossy(&o.stdout),
            "403",
            "{url}: {}",
            out(&o)
        );
    }
}

#[test]
fn direct_connections_bypassing_the_proxy_fail() {
    if !sandbox_available() {
        return;
    }
    let port = http_server("should not be reachable");
    let w = World::new("[network]\npreset = \"allow-all\"\nallow_private = true\n");
    let o = w.sh(
        &[],
        &format!("curl -s -m 5 --noproxy '*' http://127.0.0.1:{port}/; echo \"rc=$?\""),
    );
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(!text.contains("should not be reachable"), "{}", out(&o));
    assert!(
        text.contains("rc=7"),
        "connection refused inside: {}",
        out(&o)
    );
}

/// The sandbox's `lo` carries 512 KiB packets (BIG TCP), which is what keeps a download through
/// the proxy close to a direct one; the host's own `lo` is left as it is.
#[test]
fn the_sandbox_loopback_is_tuned_for_big_packets() {
    if !sandbox_available() {
        return;
    }
    let Some(ip) = ["/usr/sbin/ip", "/sbin/ip", "/bin/ip"]
        .into_iter()
        .find(|p| Path::new(p).exists())
    else {
        eprintln!("skipped: no ip binary (apt-get install iproute2)");
        return;
    };
    let gso = |text: &str| -> Option<u32> {
        let rest = &text[text.find("gso_max_size ")? + "gso_max_size ".len()..];
        rest.split_whitespace().next()?.parse().ok()
    };
    let w = World::new("");
    let o = w.sh(&[], &format!("{ip} -d link show lo"));
    assert!(o.status.success(), "{}", out(&o));
    let inside = gso(&String::from_utf8_lossy(&o.stdout));
    let host = Command::new(ip)
        .args(["-d", "link", "show", "lo"])
        .output()
        .expect("ip on the host");
    let host_text = String::from_utf8_lossy(&host.stdout).into_owned();
    let tso_max = host_text.find("tso_max_size ").and_then(|i| {
        host_text[i + 13..]
            .split_whitespace()
            .next()?
            .parse::<u32>()
            .ok()
    });
    match tso_max {
        Some(max) if max > 65536 => assert_eq!(inside, Some(524_280), "{}", out(&o)),
        _ => eprintln!("skipped: this kernel's lo takes no packets over 64 KiB ({host_text})"),
    }
    let o = w.sh(&["--network", "none"], &format!("{ip} -d link show lo"));
    assert_eq!(
        gso(&String::from_utf8_lossy(&o.stdout)),
        Some(65536),
        "only the proxy mode tunes lo: {}",
        out(&o)
    );
}

#[test]
fn cli_rules_add_to_the_config() {
    if !sandbox_available() {
        return;
    }
    let port = http_server("via --allow-host");
    let w = World::new(
        "[network]\npreset = \"deny-all\"\nresolve = { \"cli.test\" = \"127.0.0.1\" }\n",
    );
    let script = format!("curl -s http://cli.test:{port}/");
    let denied = w.sh(&[], &script);
    assert!(!String::from_utf8_lossy(&denied.stdout).contains("via --allow-host"));
    let allowed = w.sh(
        &["--allow-host", "cli.test", "--allow-host", "127.0.0.1"],
        &script,
    );
    assert_eq!(
        String::from_utf8_lossy(&allowed.stdout),
        "via --allow-host",
        "{}",
        out(&allowed)
    );
    let overridden = w.sh(
        &[
            "--allow-host",
            "cli.test",
            "--allow-host",
            "127.0.0.1",
            "--deny-host",
            "cli.test",
        ],
        &script,
    );
    assert!(
        !String::from_utf8_lossy(&overridden.stdout).contains("via --allow-host"),
        "deny wins"
    );
}

#[test]
fn an_invalid_rule_is_an_error_before_anything_starts() {
    let w = World::new("[network]\nallow = [\"bad host name\"]\n");
    let o = w.sh(&[], "true");
    assert_eq!(o.status.code(), Some(125), "{}", out(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("bad host name"),
        "{}",
        out(&o)
    );
    assert!(!w.home.join(".local/share/airlock/sandboxes").exists() || w.log().is_empty());
}
