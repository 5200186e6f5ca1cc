//! Strict decoding (invariant 5): one object, one line, one reading.

use super::super::{FilterPolicy, MAX_LINE_BYTES};
use super::{decide, denial_id, denied, forwarded, full_policy, request};

const PING: &str = r#"{"id":"r1","method":"ping","params":{}}"#;

#[test]
fn ping_is_forwarded_under_any_policy_with_or_without_the_newline() {
    let expected = format!("{PING}\n");
    for policy in [FilterPolicy::default(), full_policy()] {
        assert_eq!(forwarded(decide(PING.as_bytes(), &policy)), expected);
        assert_eq!(forwarded(decide(expected.as_bytes(), &policy)), expected);
    }
}

#[test]
fn ping_params_must_be_empty() {
    let reason = denied(&request("ping", r#"{"verbose":true}"#));
    assert_eq!(reason, "ping params must be {}");
    assert_eq!(
        denied(&request("ping", "[]")),
        "params must be a JSON object"
    );
    assert_eq!(
        denied(&request("ping", "null")),
        "params must be a JSON object"
    );
}

#[test]
fn the_forwarded_line_is_reserialised_not_relayed() {
    // Whitespace, key order, escapes and nulls are the client's; the forwarded line is airlock's.
    let line = br#"{ "params" : {"body":null,"title":"\u0062uild done","sound":"done"}, "method":"notification.show", "id":"a\/b" }"#;
    assert_eq!(
        forwarded(decide(line, &full_policy())),
        "{\"id\":\"a/b\",\"method\":\"notification.show\",\"params\":{\"title\":\"build done\",\"sound\":\"done\"}}\n"
    );
}

#[test]
fn unknown_params_fields_cannot_be_smuggled_through_an_allowed_method() {
    // herdr would ignore `pane_id` here; a filter that ignored it too could be relaying a field
    // a later herdr reads.
    let line = request("notification.show", r#"{"title":"t","pane_id":"w9:p9"}"#);
    assert_eq!(denied(&line), "params do not match herdr's schema");
    let line = request("ping", r#"{"__proto__":{}}"#);
    assert_eq!(denied(&line), "ping params must be {}");
}

#[test]
fn unknown_and_case_variant_envelope_keys_are_denied() {
    for line in [
        r#"{"id":"r1","method":"ping","params":{},"extra":1}"#,
        r#"{"id":"r1","Method":"ping","params":{}}"#,
        r#"{"ID":"r1","method":"ping","params":{}}"#,
        r#"{"id":"r1","method":"ping","params":{},"METHOD":"pane.read"}"#,
    ] {
        assert_eq!(
            denied(line.as_bytes()),
            "unknown key in the request envelope",
            "{line}"
        );
        assert_eq!(denial_id(line.as_bytes(), &full_policy()), "", "{line}");
    }
}

#[test]
fn case_variant_params_keys_are_denied() {
    let line = request("notification.show", r#"{"Title":"t"}"#);
    assert_eq!(denied(&line), "params do not match herdr's schema");
    let line = request(
        "pane.release_agent",
        r#"{"pane_id":"w1:p2","source":"s","Agent":"claude"}"#,
    );
    assert_eq!(denied(&line), "params do not match herdr's schema");
}

#[test]
fn duplicate_keys_are_denied_at_every_depth() {
    for line in [
        // The classic smuggle: the filter reads one method, herdr the other.
        r#"{"id":"r1","method":"ping","method":"pane.read","params":{}}"#,
        r#"{"id":"r1","id":"r2","method":"ping","params":{}}"#,
        r#"{"id":"r1","method":"ping","params":{},"params":{}}"#,
        r#"{"id":"r1","method":"notification.show","params":{"title":"a","title":"b"}}"#,
        r#"{"id":"r1","method":"pane.release_agent","params":{"pane_id":"w1:p2","pane_id":"w1:p3","source":"s","agent":"claude"}}"#,
        r#"{"id":"r1","method":"tab.create","params":{"env":{"A":"1","A":"2"}}}"#,
    ] {
        assert_eq!(denied(line.as_bytes()), "duplicate JSON key", "{line}");
        assert_eq!(denial_id(line.as_bytes(), &full_policy()), "", "{line}");
    }
}

#[test]
fn keys_equal_only_after_unescaping_are_duplicates() {
    let line = br#"{"id":"r1","method":"ping","\u006dethod":"pane.read","params":{}}"#;
    assert_eq!(denied(line), "duplicate JSON key");
}

#[test]
fn missing_or_mistyped_envelope_fields_are_denied_with_an_empty_id() {
    let cases = [
        (
            r#"{"id":"r1","method":"ping"}"#,
            "request envelope lacks id, method or params",
        ),
        (
            r#"{"method":"ping","params":{}}"#,
            "request envelope lacks id, method or params",
        ),
        (
            r#"{"id":7,"method":"ping","params":{}}"#,
            "id must be a string",
        ),
        (
            r#"{"id":"r1","method":["ping"],"params":{}}"#,
            "method must be a string",
        ),
        (
            r#"{"id":"r1","method":"ping","params":"{}"}"#,
            "params must be a JSON object",
        ),
    ];
    for (line, rule) in cases {
        assert_eq!(denied(line.as_bytes()), rule, "{line}");
        assert_eq!(denial_id(line.as_bytes(), &full_policy()), "", "{line}");
    }
}

#[test]
fn a_denial_after_decoding_echoes_the_client_id() {
    let line = request("pane.read", r#"{"pane_id":"w1:p1","source":"visible"}"#);
    assert_eq!(denial_id(&line, &full_policy()), "r1");
    let line = br#"{"id":"q\"uote","method":"server.stop","params":{}}"#;
    assert_eq!(denial_id(line, &full_policy()), "q\"uote");
}

#[test]
fn only_one_trailing_newline_is_allowed() {
    let cases = [
        (format!("{PING}\n\n"), "request spans more than one line"),
        (
            format!("{PING}\n{PING}\n"),
            "request spans more than one line",
        ),
        (
            PING.replace(",\"method\"", ",\n\"method\""),
            "request spans more than one line",
        ),
        (format!("{PING} \n"), "bytes after the request object"),
        (format!("{PING}\r\n"), "bytes after the request object"),
        (format!("{PING}\t"), "bytes after the request object"),
        (format!("{PING}{PING}"), "bytes after the request object"),
        (format!("{PING}x"), "bytes after the request object"),
        (format!("{PING}\0"), "bytes after the request object"),
        (format!(" {PING}"), "request is not a JSON object"),
        ("[]".to_owned(), "request is not a JSON object"),
        ("\n".to_owned(), "request is not a JSON object"),
        (String::new(), "request is not a JSON object"),
        (PING[..PING.len() - 1].to_owned(), "invalid JSON"),
        ("{\"id\":\"r1\",}".to_owned(), "invalid JSON"),
    ];
    for (line, rule) in cases {
        assert_eq!(denied(line.as_bytes()), rule, "{line:?}");
    }
}

#[test]
fn the_line_cap_is_one_mebibyte_newline_included() {
    // Whitespace between tokens pads a valid ping to exactly the cap.
    let pad = MAX_LINE_BYTES - PING.len() - 1;
    let at_cap = format!(
        "{{\"id\":\"r1\",{}\"method\":\"ping\",\"params\":{{}}}}\n",
        " ".repeat(pad)
    );
    assert_eq!(at_cap.len(), MAX_LINE_BYTES);
    assert_eq!(
        forwarded(decide(at_cap.as_bytes(), &full_policy())),
        format!("{PING}\n")
    );

    let over = format!(
        "{{\"id\":\"r1\",{}\"method\":\"ping\",\"params\":{{}}}}\n",
        " ".repeat(pad + 1)
    );
    assert_eq!(denied(over.as_bytes()), "request line over 1 MiB");
    let huge = vec![b'{'; 8 * MAX_LINE_BYTES];
    assert_eq!(denied(&huge), "request line over 1 MiB");
}

#[test]
fn invalid_utf8_is_denied() {
    let mut line = br#"{"id":"r1","method":"notification.show","params":{"title":"x"#.to_vec();
    line.extend_from_slice(&[0xff, 0xfe]);
    line.extend_from_slice(br#""}}"#);
    assert_eq!(denied(&line), "request is not UTF-8");
    assert_eq!(denied(&[0xc0, 0x80]), "request is not UTF-8");
}

#[test]
fn lone_surrogate_escapes_are_invalid_json() {
    let line = request("notification.show", r#"{"title":"\ud800"}"#);
    assert_eq!(denied(&line), "invalid JSON");
}

#[test]
fn deep_nesting_is_denied_without_overflowing_the_stack() {
    let depth = 10_000;
    let arrays = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
    let objects = format!("{}1{}", r#"{"a":"#.repeat(depth), "}".repeat(depth));
    for nested in [arrays, objects] {
        let line = request("ping", &format!(r#"{{"x":{nested}}}"#));
        assert_eq!(denied(&line), "JSON nested too deeply");
        assert_eq!(denied(&request("ping", &nested)), "JSON nested too deeply");
    }
    // An unterminated deep prefix is refused the same way, before the missing end is noticed.
    let line = request("ping", &format!(r#"{{"x":{}"#, "[".repeat(depth)));
    assert_eq!(denied(&line), "JSON nested too deeply");
}

#[test]
fn nesting_up_to_the_cap_decodes() {
    use super::super::{MAX_DEPTH, decode_line};
    // The envelope and params are two levels; the rest is the value of one params key.
    let inner = MAX_DEPTH - 2;
    let nested = format!("{}{}", "[".repeat(inner), "]".repeat(inner));
    let line = request("pane.read", &format!(r#"{{"x":{nested}}}"#));
    assert!(decode_line(&line).is_ok());
    let nested = format!("{}{}", "[".repeat(inner + 1), "]".repeat(inner + 1));
    let line = request("pane.read", &format!(r#"{{"x":{nested}}}"#));
    assert_eq!(denied(&line), "JSON nested too deeply");
}

#[test]
fn big_and_fractional_numbers_are_refused_where_integers_are_expected() {
    let base = r#""pane_id":"w1:p2","source":"s","agent":"claude""#;
    for seq in ["-1", "1.0", "1e3", "18446744073709551616", "\"1\""] {
        let line = request("pane.release_agent", &format!("{{{base},\"seq\":{seq}}}"));
        assert_eq!(
            denied(&line),
            "params do not match herdr's schema",
            "seq {seq}"
        );
    }
    let line = request(
        "pane.release_agent",
        &format!("{{{base},\"seq\":18446744073709551615}}"),
    );
    assert!(forwarded(decide(&line, &full_policy())).contains("\"seq\":18446744073709551615"));
    assert_eq!(denied(&request("ping", r#"{"x":1e999}"#)), "invalid JSON");
}
