//! Property tests (the fuzz target, run in the suite) of the request decoding and validation
//! functions: arbitrary bytes never panic, and whatever is accepted satisfies the route's contract.

use airlock_bridge::commands::{CommandTable, check_invocation, proximo};
use airlock_bridge::routes::{command, credential, edit, open, sound};
use proptest::prelude::*;

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 2000,
        ..ProptestConfig::default()
    }
}

/// JSON-ish bytes: objects with the routes' keys, case variants, duplicates and junk values.
fn jsonish() -> impl Strategy<Value = Vec<u8>> {
    let key = prop_oneof![
        Just("url"),
        Just("URL"),
        Just("editor"),
        Just("path"),
        Just("op"),
        Just("input"),
        Just("command"),
        Just("args"),
        Just("name"),
        Just("data"),
        Just("extra"),
    ];
    let value = prop_oneof![
        Just("\"https://example.com/\"".to_owned()),
        Just("\"code\"".to_owned()),
        Just("\"/tmp\"".to_owned()),
        Just("\"get\"".to_owned()),
        Just("\"proximo\"".to_owned()),
        Just("[\"status\",\"-jo\"]".to_owned()),
        Just("\"SUQz\"".to_owned()),
        Just("null".to_owned()),
        Just("1".to_owned()),
        "\"[ -~]{0,40}\"".prop_map(|s| s.replace('\\', "")),
    ];
    prop::collection::vec((key, value), 0..5).prop_map(|pairs| {
        let body: Vec<String> = pairs.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
        format!("{{{}}}", body.join(",")).into_bytes()
    })
}

fn bytes() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![prop::collection::vec(any::<u8>(), 0..300), jsonish()]
}

fn keys(body: &[u8]) -> Option<Vec<String>> {
    let text = std::str::from_utf8(body).ok()?;
    let mut found = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("\":") {
        let before = &rest[..i];
        let start = before.rfind('"')?;
        found.push(before[start + 1..].to_owned());
        rest = &rest[i + 2..];
    }
    Some(found)
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn open_accepts_only_http_urls_with_a_host(body in bytes()) {
        if let Ok(url) = open::decide(&body) {
            prop_assert!(matches!(url.scheme(), "http" | "https"));
            prop_assert!(url.host_str().is_some_and(|h| !h.is_empty()));
            prop_assert!(url.as_str().chars().count() <= open::MAX_URL_CHARS + 64);
            prop_assert_eq!(keys(&body).unwrap(), vec!["url".to_owned()]);
        }
    }

    #[test]
    fn open_validation_of_any_string(raw in "\\PC{0,64}") {
        if let Ok(url) = open::validate_url(&raw) {
            let lower = raw.to_ascii_lowercase();
            prop_assert!(lower.starts_with("http://") || lower.starts_with("https://"));
            prop_assert!(!raw.chars().any(char::is_whitespace));
            prop_assert!(url.host_str().is_some());
        }
    }

    #[test]
    fn edit_accepts_only_allowlisted_editors_and_clean_absolute_paths(body in bytes(), editor in "[a-z; /-]{0,12}", path in "[a-z./]{0,24}") {
        if let Ok((e, p)) = edit::decide(&body) {
            prop_assert!(matches!(e.command(), "code" | "codium"));
            prop_assert!(p.is_absolute());
        }
        let body = serde_json::json!({"editor": editor, "path": path}).to_string();
        if let Ok((e, p)) = edit::decide(body.as_bytes()) {
            prop_assert_eq!(e.command(), editor.as_str());
            prop_assert!(path.starts_with('/'));
            prop_assert!(p.is_absolute());
            prop_assert!(p.components().all(|c| matches!(c, std::path::Component::RootDir | std::path::Component::Normal(_))));
        }
    }

    #[test]
    fn credential_reasons_never_quote_the_input(body in bytes(), secret in "[a-z0-9=]{8,24}", op in "[a-z=]{0,20}") {
        if let Ok((op, _)) = credential::decide(&body) {
            prop_assert!(matches!(op.git_verb(), "fill" | "approve" | "reject"));
        }
        let marked = format!("zz{secret}zz");
        let body = serde_json::json!({"op": op, "input": marked}).to_string();
        if let Err(reason) = credential::decide(body.as_bytes()) {
            prop_assert!(!reason.contains(&marked));
        }
        let body = format!(r#"{{"op":"get","input":"{marked}","input":"{marked}"}}"#);
        let reason = credential::decide(body.as_bytes()).unwrap_err();
        prop_assert!(!reason.contains(&marked));
    }

    #[test]
    fn command_never_lets_a_refused_flag_through(body in bytes(), args in prop::collection::vec("-{0,2}[a-z=/]{0,6}", 0..5)) {
        let table = CommandTable::from_config(&Default::default()).unwrap();
        let _ = command::decide(&table, &body);
        if check_invocation(&proximo(), &args).is_ok() {
            prop_assert!(matches!(args[0].as_str(), "up" | "down" | "status" | "errors" | "skill"));
            for a in &args {
                let short_o = a.starts_with('-') && !a.starts_with("--") && a.contains('o');
                let long = a == "--out" || a == "--output" || a.starts_with("--out=") || a.starts_with("--output=");
                prop_assert!(!short_o && !long, "{a} passed");
            }
            prop_assert!(!(args[0] == "errors" && args[1..].iter().any(|a| a == "dom")));
        }
    }

    #[test]
    fn sound_accepts_only_non_empty_base64(body in bytes(), data in "[A-Za-z0-9+/=]{0,16}") {
        if let Ok((_, bytes)) = sound::decide(&body) {
            prop_assert!(!bytes.is_empty());
        }
        let body = serde_json::json!({"name": "n", "data": data}).to_string();
        if let Ok((_, bytes)) = sound::decide(body.as_bytes()) {
            use base64::Engine as _;
            prop_assert_eq!(base64::engine::general_purpose::STANDARD.encode(&bytes), data);
        }
    }
}

/// A callback value: loopback-looking hosts, look-alikes, ports, paths, encodings.
fn callback_value() -> impl Strategy<Value = String> {
    let scheme = prop_oneof![Just("http"), Just("https"), Just("HTTP"), Just("ftp")];
    let host = prop_oneof![
        Just("localhost"),
        Just("LOCALHOST"),
        Just("127.0.0.1"),
        Just("127.1"),
        Just("localhost.evil.example"),
        Just("evil.example"),
        Just("[::1]"),
        Just("10.0.0.1"),
        Just("evil.example/@localhost"),
        Just("localhost@evil.example"),
    ];
    let port = prop_oneof![
        Just(String::new()),
        (0u32..70000).prop_map(|p| format!(":{p}"))
    ];
    let path = "[ -~]{0,20}";
    (scheme, host, port, path).prop_map(|(s, h, p, rest)| format!("{s}://{h}{p}/{rest}"))
}

proptest! {
    #![proptest_config(config())]

    /// Whatever the sandbox writes into a URL's query, a callback is only ever a port on the
    /// host's own loopback, named `localhost` or `127.0.0.1`, as the URL-decoded value says.
    #[test]
    fn a_callback_is_only_ever_a_loopback_port(
        key in prop_oneof![Just("redirect_uri"), Just("redirect_url"), Just("callback"), Just("return_to"), Just("REDIRECT_URI")],
        value in callback_value(),
        encode in any::<bool>(),
    ) {
        let written = if encode {
            url::form_urlencoded::byte_serialize(value.as_bytes()).collect::<String>()
        } else {
            value.replace(['&', '#', ' '], "")
        };
        let Ok(url) = url::Url::parse(&format!("https://provider.example/authorize?a=1&{key}={written}")) else {
            return Ok(());
        };
        if let Some(cb) = airlock_bridge::callback::of_url(&url) {
            prop_assert!(["redirect_uri", "redirect_url", "callback"].contains(&key));
            prop_assert!(cb.host == "localhost" || cb.host == "127.0.0.1", "{cb:?}");
            let (_, decoded) = url.query_pairs().find(|(k, _)| k == key).expect("the key");
            let target = url::Url::parse(&decoded).expect("a URL");
            prop_assert_eq!(target.scheme(), "http");
            prop_assert_eq!(target.host_str(), Some(cb.host.as_str()));
            prop_assert_eq!(target.port(), Some(cb.port));
        }
    }
}
