//! Spec tests of `[sandbox.environment]`: each source in the spec's env, its place in the order,
//! the names airlock refuses, and what `--print-spec` shows.

mod fixture;

use std::path::PathBuf;

use airlock_config::{EnvSource, EnvironmentVar, FileValue, NetworkMode, Profile};
use airlock_sandbox::builder::EnvironmentError;
use airlock_sandbox::{Contributions, HostFacts, RunRequest, SpecError, build, build_with_tools};
use fixture::host;

const GLOBAL: &str = "/home/dev/.config/airlock/config.toml";

fn profile(entries: &[(&str, EnvSource)]) -> Profile {
    Profile {
        environment: entries
            .iter()
            .map(|(name, source)| {
                let var = EnvironmentVar {
                    source: source.clone(),
                    origin: PathBuf::from(GLOBAL),
                };
                ((*name).to_owned(), var)
            })
            .collect(),
        ..Profile::default()
    }
}

fn with_file(mut host: HostFacts, name: &str, value: Result<&str, &str>) -> HostFacts {
    host.environment_files.insert(
        name.into(),
        FileValue {
            path: "/home/dev/.config/airlock/token".into(),
            value: value.map(str::to_owned).map_err(str::to_owned),
        },
    );
    host
}

fn none() -> RunRequest {
    RunRequest {
        network: Some(NetworkMode::None),
        ..RunRequest::default()
    }
}

#[test]
fn each_source_sets_its_variable_and_print_spec_shows_only_the_literal() {
    let p = profile(&[
        ("NODE_ENV", EnvSource::Value("development".into())),
        ("GH", EnvSource::Env("GITHUB_TOKEN".into())),
        ("TOKEN", EnvSource::File("token".into())),
        ("UNSET", EnvSource::Env("NOT_ON_THE_HOST".into())),
    ]);
    let h = with_file(host(), "TOKEN", Ok("s3cret"));
    let spec = build(&p, &h, &RunRequest::default()).expect("spec");
    let env = |k: &str| spec.env.get(k).map(String::as_str);
    assert_eq!(env("NODE_ENV"), Some("development"));
    assert_eq!(env("GH"), Some("ghp_x"), "the host's GITHUB_TOKEN");
    assert_eq!(env("TOKEN"), Some("s3cret"));
    assert_eq!(env("UNSET"), None, "a missing host variable sets nothing");
    assert_eq!(env("GITHUB_TOKEN"), None, "only the named copy goes in");

    let shown = spec.redacted();
    let shown_env = |k: &str| shown.env.get(k).map(String::as_str);
    assert_eq!(shown_env("NODE_ENV"), Some("development"));
    assert_eq!(shown_env("GH"), Some("<from env GITHUB_TOKEN>"));
    assert_eq!(shown_env("TOKEN"), Some("<from file token>"));
    let json = serde_json::to_string(&shown).expect("json");
    assert!(
        !json.contains("s3cret") && !json.contains("ghp_x"),
        "{json}"
    );
    assert!(
        !serde_json::to_string(&spec)
            .expect("json")
            .contains("env_placeholders"),
        "the placeholders are no part of the JSON"
    );
}

#[test]
fn the_environment_wins_over_tool_and_ca_variables() {
    let p = profile(&[
        ("CARGO_HOME", EnvSource::Value("/opt/cargo".into())),
        (
            "SSL_CERT_FILE",
            EnvSource::Value("/etc/ssl/mine.pem".into()),
        ),
        ("TERM", EnvSource::Value("dumb".into())),
    ]);
    let mut h = host();
    h.ca_trust.push(airlock_sandbox::trust::CaTrust {
        var: "SSL_CERT_FILE".into(),
        path: "/etc/ssl/certs/ca-certificates.crt".into(),
        bind: None,
    });
    let contrib = Contributions {
        env: [("CARGO_HOME".to_owned(), "/home/dev/.cargo".to_owned())].into(),
        ..Contributions::default()
    };
    let spec = build_with_tools(&p, &h, &RunRequest::default(), &contrib).expect("spec");
    assert_eq!(spec.env["CARGO_HOME"], "/opt/cargo");
    assert_eq!(spec.env["SSL_CERT_FILE"], "/etc/ssl/mine.pem");
    assert_eq!(spec.env["TERM"], "dumb", "over the host's TERM too");
}

#[test]
fn path_may_be_set_and_the_bridge_shims_stay_first() {
    let p = profile(&[("PATH", EnvSource::Value("/opt/x/bin:/usr/bin".into()))]);
    let mut h = host();
    h.bridge.exe = Some("/usr/bin/airlock".into());
    let spec = build(&p, &h, &none()).expect("spec");
    assert_eq!(spec.env["PATH"], "/run/airlock/bin:/opt/x/bin:/usr/bin");
}

#[test]
fn names_airlock_sets_are_errors_naming_the_key_and_the_file() {
    let err = |p: Profile, request: &RunRequest| build(&p, &host(), request).expect_err("refused");
    for name in [
        "HOME",
        "AIRLOCK",
        "AIRLOCK_PROJECT",
        "AIRLOCK_PROJECT_DIR",
        "XDG_CONFIG_HOME",
    ] {
        let e = err(profile(&[(name, EnvSource::Value("x".into()))]), &none());
        assert!(
            matches!(e, SpecError::Environment(EnvironmentError::Reserved { .. })),
            "{e}"
        );
        assert_eq!(
            e.to_string(),
            format!(
                "{GLOBAL}: [sandbox.environment.{name}]: {name} is set by airlock itself; \
                 remove the entry (airlock's own variables cannot be changed)"
            )
        );
    }
    // Proxy variables: refused in proxy mode, where airlock points them at its proxy.
    let p = profile(&[("HTTPS_PROXY", EnvSource::Value("http://corp:3128".into()))]);
    let e = err(p.clone(), &RunRequest::default());
    assert!(e.to_string().contains("[network] upstream_proxy"), "{e}");
    let spec = build(&p, &host(), &none()).expect("allowed without the proxy");
    assert_eq!(spec.env["HTTPS_PROXY"], "http://corp:3128");
    // The bridge's own: refused while the bridge is on.
    let p = profile(&[("BROWSER", EnvSource::Value("firefox".into()))]);
    let e = err(p.clone(), &none());
    assert!(e.to_string().contains("[sandbox] bridge = false"), "{e}");
    let off = Profile { bridge: false, ..p };
    assert_eq!(
        build(&off, &host(), &none()).expect("spec").env["BROWSER"],
        "firefox"
    );
}

#[test]
fn an_unusable_file_is_an_error_naming_the_key_the_file_and_why() {
    let p = profile(&[("TOKEN", EnvSource::File("token".into()))]);
    let h = with_file(host(), "TOKEN", Err("it does not exist"));
    let e = build(&p, &h, &none()).expect_err("refused");
    assert_eq!(
        e.to_string(),
        format!(
            "{GLOBAL}: [sandbox.environment.TOKEN] file = \"token\" \
             (/home/dev/.config/airlock/token): it does not exist; make it a regular UTF-8 file \
             of at most 64 KiB, or fix or remove the entry"
        )
    );
    let e = build(&p, &host(), &none()).expect_err("never read");
    assert!(e.to_string().contains("was not read"), "{e}");
}
