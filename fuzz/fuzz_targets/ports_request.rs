//! The session control socket's request line (`airlock-sandbox/src/ports/protocol.rs`): what a
//! client of `<state>/run/<pid>.sock` sends, `Request::parse` on the bytes before the newline,
//! and `parse_answer` on what a supervisor (or something in its place) answers.
//!
//! Beyond "no panic": an accepted line is plain ASCII (graphic characters and spaces), at most
//! the request cap, one of the four requests with every port from 1 to 65535, written the way a
//! client writes it (or `forward N` for `forward N:N`), and it reads back the same from the line
//! a client sends. An answer's refusal reason never carries a control character but a tab (it is
//! printed on the user's terminal).
#![no_main]

use airlock_sandbox::ports::protocol::{AskError, MAX_REQUEST, Request, parse_answer};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(request) = Request::parse(data) {
        assert!(data.iter().all(|b| b.is_ascii_graphic() || *b == b' '));
        let sent = request.line();
        assert!(sent.len() <= MAX_REQUEST, "{sent:?}");
        assert_eq!(Request::parse(sent.trim_end().as_bytes()), Ok(request));
        let canonical = sent.trim_end().as_bytes();
        let short = match request {
            Request::Forward { host, sandbox } => {
                assert!(host != 0 && sandbox != 0);
                (host == sandbox).then(|| format!("forward {host}"))
            }
            Request::Callback { port } => {
                assert!(port != 0);
                None
            }
            Request::Remove { host } => {
                assert!(host != 0);
                None
            }
            Request::Ports => None,
        };
        assert!(
            data == canonical || short.is_some_and(|s| data == s.as_bytes()),
            "{:?} is not how a client writes {request:?}",
            String::from_utf8_lossy(data)
        );
    }
    match parse_answer(data) {
        Ok(text) => assert!(!text.contains('\n')),
        Err(AskError::Refused(reason)) | Err(AskError::BadAnswer(reason)) => {
            // `printable` keeps tabs (harmless on a terminal) and escapes every other control.
            assert!(
                !reason.chars().any(|c| c.is_control() && c != '\t'),
                "{reason:?}"
            );
        }
        Err(AskError::Unreachable { .. }) => unreachable!("no socket here"),
    }
});
