use super::*;
use airlock_config::EgressRule;
use proptest::prelude::*;
use std::path::PathBuf;

fn rules(list: &[&str]) -> Vec<EgressRule> {
    list.iter()
        .map(|r| EgressRule {
            rule: (*r).into(),
            origin: PathBuf::from("/home/u/.config/airlock/config.toml"),
        })
        .collect()
}

fn policy(preset: EgressPreset, allow: &[&str], deny: &[&str]) -> EgressPolicy {
    let settings = EgressSettings {
        preset,
        allow: rules(allow),
        deny: rules(deny),
        ..EgressSettings::default()
    };
    EgressPolicy::from_settings(&settings, &[], &[]).unwrap()
}

fn allowed(p: &EgressPolicy, host: &str, port: u16) -> bool {
    p.decide(&Host::parse(host).unwrap(), port).allowed
}

#[test]
fn balanced_allows_the_providers_and_denies_the_rest() {
    let p = policy(EgressPreset::Balanced, &[], &[]);
    for host in [
        "api.anthropic.com",
        "API.OpenAI.com.",
        "registry.npmjs.org",
        "github.com",
    ] {
        assert!(allowed(&p, host, 443), "{host}");
    }
    let d = p.decide(&Host::parse("api.githubcopilot.com").unwrap(), 443);
    assert_eq!(d.origin.as_deref(), Some("preset balanced"));
    for host in [
        "evil.com",
        "github.com.evil.com",
        "notgithub.com",
        "127.0.0.1",
    ] {
        assert!(!allowed(&p, host, 443), "{host}");
    }
    assert_eq!(p.decide(&Host::parse("evil.com").unwrap(), 443).rule, None);
}

#[test]
fn presets_allow_all_and_deny_all() {
    assert!(allowed(
        &policy(EgressPreset::AllowAll, &[], &[]),
        "anything.example",
        8443
    ));
    let deny_all = policy(EgressPreset::DenyAll, &["only.example"], &[]);
    assert!(!allowed(&deny_all, "github.com", 443));
    assert!(allowed(&deny_all, "only.example", 443));
}

#[test]
fn wildcards_match_subdomains_only() {
    let p = policy(EgressPreset::DenyAll, &["*.example.com"], &[]);
    assert!(allowed(&p, "a.example.com", 443));
    assert!(allowed(&p, "a.b.example.com", 80));
    assert!(!allowed(&p, "example.com", 443));
    assert!(!allowed(&p, "badexample.com", 443));
    assert!(!allowed(&p, "example.com.evil", 443));
}

#[test]
fn ports_restrict_rules() {
    let p = policy(
        EgressPreset::DenyAll,
        &["example.com:8443", "[::1]:80", "10.0.0.1"],
        &[],
    );
    assert!(allowed(&p, "example.com", 8443));
    assert!(!allowed(&p, "example.com", 443));
    assert!(allowed(&p, "::1", 80));
    assert!(!allowed(&p, "::1", 81));
    assert!(allowed(&p, "10.0.0.1", 5432));
}

#[test]
fn deny_wins_over_allow_for_every_spelling() {
    let p = policy(
        EgressPreset::Balanced,
        &["evil.com"],
        &["evil.com", "*.github.com:22"],
    );
    for host in ["evil.com", "EVIL.COM", "evil.com.", "Evil.Com."] {
        for port in [80, 443, 8080] {
            let d = p.decide(&Host::parse(host).unwrap(), port);
            assert!(!d.allowed, "{host}:{port}");
            assert_eq!(d.rule.as_deref(), Some("evil.com"));
        }
    }
    assert!(!allowed(&p, "ssh.github.com", 22));
    assert!(allowed(&p, "api.github.com", 443));
}

#[test]
fn invalid_rules_name_the_rule_and_its_origin() {
    for bad in [
        "",
        "*",
        "*:443",
        "a*.com",
        "*.1.2.3.4",
        "ex ample.com",
        "bücher.de",
        "x.com:0",
        "x.com:http",
        "x.com:99999",
    ] {
        let settings = EgressSettings {
            allow: rules(&[bad]),
            ..EgressSettings::default()
        };
        let err = EgressPolicy::from_settings(&settings, &[], &[])
            .unwrap_err()
            .to_string();
        assert!(err.contains(&format!("{bad:?}")), "{err}");
        assert!(err.contains("/home/u/.config/airlock/config.toml"), "{err}");
    }
    let err = EgressPolicy::from_settings(&EgressSettings::default(), &[], &["a b".into()])
        .unwrap_err()
        .to_string();
    assert!(err.contains("--deny-host"), "{err}");
}

#[test]
fn cli_rules_add_to_the_file_rules() {
    let p = EgressPolicy::from_settings(
        &EgressSettings::default(),
        &["extra.example".into()],
        &["github.com".into()],
    )
    .unwrap();
    assert!(allowed(&p, "extra.example", 443));
    let d = p.decide(&Host::parse("github.com").unwrap(), 443);
    assert_eq!(
        (d.allowed, d.origin.as_deref()),
        (false, Some("--deny-host"))
    );
}

#[test]
fn special_addresses_need_a_literal_rule_or_allow_private() {
    let ip = |s: &str| s.parse::<IpAddr>().unwrap();
    let p = policy(EgressPreset::Balanced, &["127.0.0.1"], &[]);
    assert_eq!(p.check_address(ip("127.0.0.1"), 8080, &[]), Ok(()));
    assert_eq!(p.check_address(ip("::ffff:127.0.0.1"), 8080, &[]), Ok(()));
    assert_eq!(
        p.check_address(ip("127.0.0.2"), 8080, &[]),
        Err(AddressClass::Loopback)
    );
    assert_eq!(
        p.check_address(ip("10.0.0.1"), 443, &[]),
        Err(AddressClass::Private)
    );
    assert_eq!(p.check_address(ip("93.184.216.34"), 443, &[]), Ok(()));
    let local = [ip("93.184.216.34")];
    assert_eq!(
        p.check_address(ip("93.184.216.34"), 443, &local),
        Err(AddressClass::ThisHost)
    );

    let open = EgressPolicy::from_settings(
        &EgressSettings {
            allow_private: true,
            deny: rules(&["10.9.9.9"]),
            ..EgressSettings::default()
        },
        &[],
        &[],
    )
    .unwrap();
    assert_eq!(open.check_address(ip("10.0.0.1"), 443, &[]), Ok(()));
    assert_eq!(
        open.check_address(ip("10.9.9.9"), 443, &[]),
        Err(AddressClass::Denied)
    );
    assert_eq!(
        open.check_address(ip("169.254.169.254"), 80, &[]),
        Err(AddressClass::CloudMetadata)
    );
}

#[test]
fn resolve_map_is_canonicalised_and_checked() {
    let mut settings = EgressSettings::default();
    settings
        .resolve
        .insert("Allowed.Test.".into(), "127.0.0.1".parse().unwrap());
    let p = EgressPolicy::from_settings(&settings, &[], &[]).unwrap();
    let want = Some("127.0.0.1".parse().unwrap());
    assert_eq!(
        p.resolve_override(&Host::parse("allowed.test").unwrap()),
        want
    );
    settings
        .resolve
        .insert("1.2.3.4".into(), "127.0.0.1".parse().unwrap());
    let err = EgressPolicy::from_settings(&settings, &[], &[])
        .unwrap_err()
        .to_string();
    assert!(err.contains("\"1.2.3.4\""), "{err}");
}

fn host_strategy() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-zA-Z0-9-]{1,8}(\\.[a-zA-Z0-9-]{1,8}){0,3}\\.?",
        "[ -~]{0,20}",
        any::<String>(),
        "[0-9]{1,3}\\.[0-9]{1,3}\\.[0-9]{1,3}\\.[0-9]{1,3}",
    ]
}

proptest! {
    #[test]
    fn canonicalisation_is_idempotent(raw in host_strategy()) {
        if let Ok(host) = Host::parse(&raw) {
            let again = Host::parse(&host.to_string()).expect("a canonical host parses");
            prop_assert_eq!(&again, &host);
            let back = crate::host::parse_authority(&host.to_authority(7), None).expect("an authority parses");
            prop_assert_eq!(back, (host.clone(), 7));
        }
    }

    #[test]
    fn rule_parsing_never_panics(raw in "[ -~]{0,40}") {
        let _ = Rule::parse(&raw, "prop");
    }

    #[test]
    fn deny_wins_over_allow(name in "[a-z]{1,8}\\.[a-z]{2,4}", upper in any::<bool>(), dot in any::<bool>(), port in 1u16..) {
        let p = policy(EgressPreset::AllowAll, &[name.as_str()], &[name.as_str()]);
        let mut spelled = if upper { name.to_ascii_uppercase() } else { name.clone() };
        if dot { spelled.push('.'); }
        let d = p.decide(&Host::parse(&spelled).unwrap(), port);
        prop_assert!(!d.allowed);
        let wild = policy(EgressPreset::AllowAll, &[], &[&format!("*.{name}")]);
        let sub = format!("x.{spelled}");
        prop_assert!(!wild.decide(&Host::parse(&sub).unwrap(), port).allowed);
    }
}
