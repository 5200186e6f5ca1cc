//! The host bridge's request decoders (`airlock-bridge/src/routes`): the body bytes a sandbox
//! POSTs, decoded by the strict JSON decoder and validated by each route's `decide`. Every input
//! goes to every decoder (`/open`, `/edit`, `/credential`, `/command`, `/proximo`, `/sound`).
//!
//! Beyond "no panic", what a decoder accepts keeps its route's contract: a JSON object with exactly
//! the route's keys; an http(s) URL with a host; an allow-listed editor and a clean absolute path;
//! a get/store/erase of https-only credential input, with reasons that never quote the input; a
//! configured verb with no refused flag or pair; canonical non-empty base64.
#![no_main]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Component;
use std::sync::OnceLock;

use airlock_bridge::commands::{CommandTable, HostCommand, check_invocation};
use airlock_bridge::routes::{command, credential, edit, open, sound, strict};
use airlock_config::HostCommandEntry;
use base64::Engine as _;
use libfuzzer_sys::fuzz_target;
use serde_json::{Map, Value};

/// The built-in `proximo` and one configured command with both kinds of refused flags and a pair.
fn table() -> &'static CommandTable {
    static TABLE: OnceLock<CommandTable> = OnceLock::new();
    TABLE.get_or_init(|| {
        let tool = HostCommandEntry {
            program: Some("/usr/bin/tool".into()),
            verbs: vec!["run".into(), "list".into()],
            refused_flags: vec!["-w".into(), "--write".into()],
            refused: vec!["run all".into()],
            timeout_secs: Some(5),
        };
        CommandTable::from_config(&BTreeMap::from([("tool".to_owned(), tool)])).expect("table")
    })
}

fuzz_target!(|body: &[u8]| {
    // What a strict decoder may accept at all: one JSON object, nothing after it.
    let object: Option<Map<String, Value>> = strict(body).ok();
    if object.is_some() {
        let first = body.iter().find(|b| !b.is_ascii_whitespace());
        assert_eq!(first, Some(&b'{'));
        assert!(matches!(
            serde_json::from_slice::<Value>(body),
            Ok(Value::Object(_))
        ));
    }
    let keys = || -> BTreeSet<&str> {
        let object = object.as_ref().expect("an accepted body is an object");
        object.keys().map(String::as_str).collect()
    };
    let string = |key: &str| -> String {
        let object = object.as_ref().expect("an accepted body is an object");
        object[key].as_str().expect("a string field").to_owned()
    };

    if let Ok(url) = open::decide(body) {
        assert_eq!(keys(), BTreeSet::from(["url"]));
        let raw = string("url");
        let lower = raw.to_ascii_lowercase();
        assert!(
            lower.starts_with("http://") || lower.starts_with("https://"),
            "{raw:?}"
        );
        assert!(
            !raw.chars().any(|c| c.is_whitespace() || c.is_control()),
            "{raw:?}"
        );
        assert!(raw.chars().count() <= open::MAX_URL_CHARS);
        assert!(matches!(url.scheme(), "http" | "https"));
        assert!(url.host_str().is_some_and(|h| !h.is_empty()), "{raw:?}");
        // The audit log keeps scheme, host, port and path: no query, fragment or userinfo.
        let logged = open::loggable(&url);
        let host = url.host_str().unwrap_or_default();
        assert!(
            logged.starts_with(&format!("{}://{host}", url.scheme())),
            "{logged}"
        );
        assert!(!logged.contains(['?', '#']), "{logged}");
    }

    if let Ok((editor, path)) = edit::decide(body) {
        assert_eq!(keys(), BTreeSet::from(["editor", "path"]));
        assert_eq!(editor.command(), string("editor"));
        assert!(string("path").starts_with('/'));
        assert!(path.is_absolute());
        assert!(
            path.components()
                .all(|c| matches!(c, Component::RootDir | Component::Normal(_))),
            "{path:?}"
        );
        let text = path.to_str().expect("a path from a string is UTF-8");
        assert!(!text.contains('\0'));
        assert_eq!(
            edit::clean_path(text).as_ref(),
            Ok(&path),
            "cleaning is idempotent"
        );
    }

    match credential::decide(body) {
        Ok((op, input)) => {
            assert_eq!(keys(), BTreeSet::from(["input", "op"]));
            assert_eq!(op.name(), string("op"));
            assert_eq!(input, string("input"));
            assert!(!input.contains('\0'));
            let protocols: Vec<&str> = input
                .lines()
                .filter_map(|line| {
                    line.strip_prefix("protocol=").or_else(|| {
                        line.strip_prefix("url=")
                            .map(|v| v.split_once("://").map_or("", |(s, _)| s))
                    })
                })
                .collect();
            assert!(!protocols.is_empty(), "{input:?}");
            assert!(
                protocols.iter().all(|p| p.eq_ignore_ascii_case("https")),
                "{input:?}"
            );
        }
        Err(reason) => assert_quotes_only_words(&reason),
    }

    if let Ok((name, spec, args)) = command::decide(table(), body) {
        assert_eq!(keys(), BTreeSet::from(["args", "command"]));
        assert_eq!(name, string("command"));
        check_args(spec, &args);
    }
    if let Ok(translated) = command::proximo_as_command(body) {
        let keys = keys();
        assert!(keys.contains("command") && keys.is_subset(&BTreeSet::from(["args", "command"])));
        if let Ok((name, spec, args)) = command::decide(table(), translated.as_bytes()) {
            assert_eq!(name, "proximo");
            assert_eq!(args[0], string("command"));
            check_args(spec, &args);
        }
    }

    match sound::decide(body) {
        Ok((name, bytes)) => {
            assert_eq!(keys(), BTreeSet::from(["data", "name"]));
            assert_eq!(name, string("name"));
            assert!(!bytes.is_empty());
            let encoded = base64::engine::general_purpose::STANDARD.encode(&bytes);
            assert_eq!(encoded, string("data"), "only canonical base64 is accepted");
        }
        Err(reason) => assert_quotes_only_words(&reason),
    }
});

/// An accepted invocation: an allowed verb, no NUL, no refused flag in any spelling, no refused pair.
fn check_args(spec: &HostCommand, args: &[String]) {
    assert_eq!(check_invocation(spec, args), Ok(()));
    assert!(spec.verbs.contains(&args[0]), "{args:?}");
    assert!(args.iter().all(|a| !a.contains('\0')), "{args:?}");
    for flag in &spec.refused_flags {
        for arg in args {
            if let Some(long) = flag.strip_prefix("--") {
                let name = arg
                    .strip_prefix("--")
                    .map(|r| r.split('=').next().unwrap_or(r));
                assert!(
                    !name.is_some_and(|n| !n.is_empty() && long.starts_with(n)),
                    "{arg:?} is {flag}"
                );
            } else {
                let letter = flag.chars().nth(1).expect("a short flag");
                let short = arg.starts_with('-') && !arg.starts_with("--");
                assert!(!(short && arg[1..].contains(letter)), "{arg:?} has {flag}");
            }
        }
    }
    for (verb, arg) in &spec.refused {
        assert!(!(&args[0] == verb && args[1..].contains(arg)), "{args:?}");
    }
}

/// `/credential` and `/sound` reasons are fixed text plus, at most, a short word from the request
/// (an op or protocol name): never a serde message quoting a value, never the secret input.
fn assert_quotes_only_words(reason: &str) {
    assert!(
        reason
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || " :{}\",/=;().-_+'".contains(c)),
        "reason {reason:?}"
    );
}
