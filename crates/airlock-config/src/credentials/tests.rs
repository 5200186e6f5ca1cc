//! Tests of `[network.credentials]` parsing, presets, checks and layering.
use super::*;

fn entry(toml_text: &str) -> CredentialEntry {
    toml::from_str(toml_text).expect("toml")
}

fn res(text: &str) -> Result<Credential, ConfigError> {
    resolve(
        Path::new("/home/u/.config/airlock/config.toml"),
        "c",
        &entry(text),
    )
}

#[test]
fn presets_fill_in_everything_and_keys_next_to_them_win() {
    let c = res("preset = \"anthropic\"").unwrap();
    assert_eq!(c.hosts, ["api.anthropic.com"]);
    assert_eq!(c.header, "x-api-key");
    assert_eq!(c.value_format, "{value}");
    assert_eq!(c.source, CredentialSource::Env("ANTHROPIC_API_KEY".into()));
    assert_eq!(c.placeholder_env.as_deref(), Some("ANTHROPIC_API_KEY"));
    assert_eq!(c.placeholder, DEFAULT_PLACEHOLDER);
    let c = res("preset = \"openai\"\nsource = { file = \"~/.config/openai/key\" }").unwrap();
    assert_eq!(c.value_format, "Bearer {value}");
    assert_eq!(
        c.source,
        CredentialSource::File("~/.config/openai/key".into())
    );
    let c = res("preset = \"github-git\"\nsource = { keychain = \"gh\" }").unwrap();
    assert_eq!(c.value_format, "Basic {basic:x-access-token}");
    assert_eq!(
        c.source,
        CredentialSource::Keychain {
            service: "gh".into(),
            account: None
        }
    );
}

#[test]
fn a_rule_without_preset_names_host_header_and_source() {
    let c = res(
        "host = [\"API.Example.com.\"]\nheader = \"X-Token\"\nsource = { command = [\"pass\", \"show\", \"x\"] }\nplaceholder_env = \"X_TOKEN\"",
    )
    .unwrap();
    assert_eq!(c.hosts, ["api.example.com"]);
    assert_eq!(c.header, "x-token");
    assert_eq!(c.value_format, "{value}");
    assert_eq!(
        c.source.describe(),
        "command pass show x",
        "described without a value"
    );
}

#[test]
fn bad_input_names_the_file_the_rule_the_key_and_the_valid_form() {
    for (text, key) in [
        ("preset = \"anthropics\"", "preset"),
        ("header = \"x\"\nsource = { env = \"A\" }", "host"),
        (
            "host = \"*.example.com\"\nheader = \"x\"\nsource = { env = \"A\" }",
            "host",
        ),
        (
            "host = \"127.0.0.1\"\nheader = \"x\"\nsource = { env = \"A\" }",
            "host",
        ),
        ("host = \"a.test\"\nsource = { env = \"A\" }", "header"),
        (
            "host = \"a.test\"\nheader = \"x y\"\nsource = { env = \"A\" }",
            "header",
        ),
        (
            "host = \"a.test\"\nheader = \"host\"\nsource = { env = \"A\" }",
            "header",
        ),
        ("host = \"a.test\"\nheader = \"x\"", "source"),
        (
            "host = \"a.test\"\nheader = \"x\"\nsource = { env = \"A\", file = \"/k\" }",
            "source.env",
        ),
        (
            "host = \"a.test\"\nheader = \"x\"\nsource = { file = \"k\" }",
            "source.file",
        ),
        (
            "host = \"a.test\"\nheader = \"x\"\nsource = { command = [] }",
            "source.command",
        ),
        (
            "host = \"a.test\"\nheader = \"x\"\nsource = { env = \"1A\" }",
            "source.env",
        ),
        (
            "preset = \"openai\"\nvalue_format = \"Bearer\"",
            "value_format",
        ),
        (
            "preset = \"openai\"\nvalue_format = \"{value}{value}\"",
            "value_format",
        ),
        (
            "preset = \"openai\"\nvalue_format = \"a\\r\\nb: {value}\"",
            "value_format",
        ),
        (
            "preset = \"openai\"\nplaceholder = \"short\"",
            "placeholder",
        ),
        (
            "preset = \"openai\"\nplaceholder_env = \"A-B\"",
            "placeholder_env",
        ),
    ] {
        let err = res(text).expect_err(text).to_string();
        assert!(
            err.contains("config.toml") && err.contains(&format!("[network.credentials.c] {key}")),
            "{text}: {err}"
        );
        assert!(err.contains("expected"), "{text}: {err}");
    }
    assert!(entry_parse_fails("preset = \"openai\"\nhosts = [\"x\"]"));
}

fn entry_parse_fails(text: &str) -> bool {
    toml::from_str::<CredentialEntry>(text).is_err()
}

#[test]
fn two_rules_for_one_host_and_header_are_an_error_naming_both() {
    let mut map = CredentialMap::new();
    let a = Path::new("/g.toml");
    let entries: BTreeMap<String, CredentialEntry> = [
        ("one".to_owned(), entry("preset = \"openai\"")),
        (
            "two".to_owned(),
            entry(
                "host = \"api.openai.com\"\nheader = \"Authorization\"\nsource = { env = \"B\" }",
            ),
        ),
    ]
    .into_iter()
    .collect();
    validate(a, &entries).unwrap();
    layer(&mut map, a, &entries);
    let err = check_overlaps(&map).unwrap_err().to_string();
    assert!(err.contains("one") && err.contains("two"), "{err}");
}
