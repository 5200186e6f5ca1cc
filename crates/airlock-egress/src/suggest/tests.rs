use super::*;
use crate::log::LogDecision;
use crate::log::read::tests::record;
use airlock_config::{EgressPreset, EgressRule, EgressSettings};

fn policy(preset: EgressPreset, allow: &[&str], deny: &[&str], private: bool) -> EgressPolicy {
    let tag = |r: &&str| EgressRule {
        rule: (*r).to_owned(),
        origin: "/home/u/.config/airlock/config.toml".into(),
    };
    let mut settings = EgressSettings {
        preset,
        allow: allow.iter().map(tag).collect(),
        deny: deny.iter().map(tag).collect(),
        allow_private: private,
        ..EgressSettings::default()
    };
    settings
        .resolve
        .insert("db.internal".into(), "10.0.0.5".parse().unwrap());
    EgressPolicy::from_settings(&settings, &[], &[]).unwrap()
}

/// `n` requests to `host` with `decision`.
fn usage(entries: &[(&str, LogDecision, u64)]) -> Usage {
    let mut usage = Usage::default();
    for &(host, decision, n) in entries {
        for _ in 0..n {
            let mut r = record(0, host);
            r.decision = decision;
            usage.add(&Logged {
                line: String::new(),
                record: r,
                time: 0,
                seq: 0,
            });
        }
    }
    usage
}

fn run(usage: &Usage, policy: &EgressPolicy, options: SuggestOptions) -> Suggestion {
    suggest(usage, policy, &[], vec!["app-12345678".into()], options)
}

fn rules(s: &Suggestion) -> Vec<&str> {
    s.allow.iter().map(|r| r.rule.as_str()).collect()
}

fn verdict<'a>(s: &'a Suggestion, host: &str) -> &'a HostVerdict {
    s.hosts.iter().find(|h| h.host == host).unwrap()
}

/// The `allow` array of the TOML text, parsed back.
fn parsed_allow(text: &str) -> Vec<String> {
    let table: toml::Table = toml::from_str(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    table["allow"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn denied_hosts_come_first_allowed_ones_are_marked_and_the_toml_parses() {
    use LogDecision::*;
    let u = usage(&[
        ("api.github.com", Allowed, 10),
        ("gist.github.com", Denied, 2),
        ("registry.example.com", Denied, 3),
        ("tool.example.dev", Allowed, 5),
        ("flaky.example.org", Denied, 1),
        ("flaky.example.org", Error, 1),
    ]);
    let p = policy(EgressPreset::Balanced, &[], &["gist.github.com"], false);
    let s = run(&u, &p, SuggestOptions::default());
    // Denied ones first (busiest first), then those allowed when logged but not by the config now.
    assert_eq!(
        rules(&s),
        [
            "registry.example.com",
            "flaky.example.org",
            "tool.example.dev"
        ]
    );
    assert_eq!(verdict(&s, "api.github.com").verdict, Verdict::Allowed);
    assert_eq!(
        verdict(&s, "api.github.com").origin.as_deref(),
        Some("preset balanced")
    );
    assert_eq!(
        verdict(&s, "gist.github.com").verdict,
        Verdict::DeniedByRule
    );
    let text = s.to_toml();
    assert_eq!(
        parsed_allow(&text),
        [
            "registry.example.com",
            "flaky.example.org",
            "tool.example.dev"
        ]
    );
    assert!(
        text.contains("\"flaky.example.org\",  # 2 requests: 1 denied, 1 error\n"),
        "{text}"
    );
    assert!(
        text.contains("#   api.github.com: 10 requests: 10 allowed (rule \"api.github.com\" from preset balanced)"),
        "{text}"
    );
    assert!(
        text.contains("# Denied by a deny rule (remove the rule to allow them):\n#   gist.github.com: 2 requests: 2 denied (rule \"gist.github.com\" from /home/u/.config/airlock/config.toml)"),
        "{text}"
    );
    assert!(
        text.starts_with(
            "# airlock network suggest: 22 requests in the network log of sandbox app-12345678\n"
        ),
        "{text}"
    );
}

#[test]
fn a_wildcard_stands_for_three_subdomains_or_more_and_never_for_shared_hosting() {
    use LogDecision::*;
    let u = usage(&[
        ("a.cdn.example.net", Denied, 1),
        ("b.cdn.example.net", Denied, 2),
        ("c.cdn.example.net", Denied, 1),
        ("x.example.net", Denied, 1),
        ("one.twice.test", Denied, 1),
        ("two.twice.test", Denied, 1),
        ("alice.github.io", Denied, 1),
        ("bob.github.io", Denied, 1),
        ("carol.github.io", Denied, 1),
        ("a.example.co.uk", Denied, 1),
        ("shop.co.uk", Denied, 1),
        ("news.co.uk", Denied, 1),
    ]);
    let p = policy(EgressPreset::DenyAll, &[], &[], false);
    let s = run(&u, &p, SuggestOptions::default());
    let wildcard = s
        .allow
        .iter()
        .find(|r| r.rule == "*.cdn.example.net")
        .unwrap();
    assert_eq!(
        wildcard.hosts,
        [
            "a.cdn.example.net",
            "b.cdn.example.net",
            "c.cdn.example.net"
        ]
    );
    assert_eq!(wildcard.counts.requests, 4);
    assert_eq!(
        verdict(&s, "b.cdn.example.net").rule.as_deref(),
        Some("*.cdn.example.net")
    );
    let all = rules(&s);
    // The wildcard's hosts are not counted again for *.example.net; two are not enough.
    assert!(
        !all.contains(&"*.example.net") && all.contains(&"x.example.net"),
        "{all:?}"
    );
    assert!(all.contains(&"one.twice.test") && !all.contains(&"*.twice.test"));
    assert!(
        !all.iter()
            .any(|r| r.ends_with("github.io") && r.starts_with('*')),
        "{all:?}"
    );
    assert!(!all.contains(&"*.co.uk"), "{all:?}");
    assert_eq!(all[0], "*.cdn.example.net", "busiest first: {all:?}");
    let text = s.to_toml();
    assert!(
        text.contains("# A wildcard stands for 3 or more subdomains seen."),
        "{text}"
    );
    assert!(
        text.contains("\"*.cdn.example.net\",  # 4 requests to 3 hosts (a.cdn.example.net, b.cdn.example.net, c.cdn.example.net): 4 denied"),
        "{text}"
    );
    assert_eq!(parsed_allow(&text).len(), all.len());
}

#[test]
fn hosts_the_address_check_refuses_are_never_suggested() {
    use LogDecision::*;
    let mut u = usage(&[
        ("127.0.0.1", Denied, 2),
        ("169.254.169.254", Denied, 1),
        ("10.1.2.3", Denied, 1),
        ("localhost", Denied, 1),
        ("db.internal", Denied, 1),
        ("93.184.215.14", Denied, 1),
    ]);
    // An allowed name that DNS pointed at a private address: the proxy's reason says so.
    let mut r = record(0, "sneaky.example");
    r.decision = Denied;
    r.reason = Some("sneaky.example resolves to 192.168.1.10, which is private".into());
    u.add(&Logged {
        line: String::new(),
        record: r,
        time: 0,
        seq: 0,
    });
    let p = policy(EgressPreset::DenyAll, &[], &[], false);
    let s = run(&u, &p, SuggestOptions::default());
    assert_eq!(rules(&s), ["93.184.215.14"]);
    for (host, class) in [
        ("127.0.0.1", "loopback"),
        ("169.254.169.254", "a cloud metadata service"),
        ("10.1.2.3", "private"),
        ("localhost", "loopback"),
        ("db.internal", "private"),
        ("sneaky.example", "private"),
    ] {
        let v = verdict(&s, host);
        assert_eq!(
            (v.verdict, v.address.as_deref()),
            (Verdict::AddressCheck, Some(class)),
            "{host}"
        );
    }
    let text = s.to_toml();
    assert_eq!(parsed_allow(&text), ["93.184.215.14"]);
    assert!(
        text.contains("#   127.0.0.1: 2 requests: 2 denied (loopback)"),
        "{text}"
    );
    // With allow_private, private names and addresses are not refused any more; metadata still is.
    let open = policy(EgressPreset::DenyAll, &[], &[], true);
    let s = run(&u, &open, SuggestOptions::default());
    assert!(rules(&s).contains(&"db.internal") && rules(&s).contains(&"10.1.2.3"));
    assert_eq!(
        verdict(&s, "169.254.169.254").verdict,
        Verdict::AddressCheck
    );
}

#[test]
fn min_requests_and_denied_only_narrow_the_list() {
    use LogDecision::*;
    let u = usage(&[
        ("busy.example", Denied, 5),
        ("rare.example", Denied, 1),
        ("used.example", Allowed, 4),
    ]);
    let p = policy(EgressPreset::DenyAll, &[], &[], false);
    let s = run(
        &u,
        &p,
        SuggestOptions {
            min_requests: 2,
            denied_only: false,
        },
    );
    assert_eq!(rules(&s), ["busy.example", "used.example"]);
    assert_eq!(s.left_out, 1);
    assert!(
        s.to_toml()
            .contains("# Left out: 1 host with fewer than 2 requests (--min-requests).")
    );
    let s = run(
        &u,
        &p,
        SuggestOptions {
            min_requests: 1,
            denied_only: true,
        },
    );
    assert_eq!(rules(&s), ["busy.example", "rare.example"]);
    let none = run(&Usage::default(), &p, SuggestOptions::default());
    assert!(none.to_toml().contains("allow = []  # nothing to add"));
    assert!(parsed_allow(&none.to_toml()).is_empty());
}

#[test]
fn json_names_every_field() {
    let u = usage(&[("registry.example.com", LogDecision::Denied, 1)]);
    let p = policy(EgressPreset::DenyAll, &[], &[], false);
    let json = serde_json::to_value(run(&u, &p, SuggestOptions::default())).unwrap();
    assert_eq!(
        json,
        serde_json::json!({
            "sandboxes": ["app-12345678"], "requests": 1, "left_out": 0, "min_requests": 1,
            "allow": [{"rule": "registry.example.com", "hosts": ["registry.example.com"],
                "requests": 1, "allowed": 0, "denied": 1, "errors": 0}],
            "hosts": [{"host": "registry.example.com", "requests": 1, "allowed": 0, "denied": 1,
                "errors": 0, "verdict": "suggested", "rule": "registry.example.com"}],
        })
    );
}
