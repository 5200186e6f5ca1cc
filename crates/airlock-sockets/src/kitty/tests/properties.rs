//! Properties over untrusted bytes: no panic, chunking does not matter, forwards are stable.

use proptest::prelude::*;

use super::super::{Decision, FrameBuffer, FrameError, decide, encode_frame};
use super::{OWNED, full_policy, owned, unframe};

/// Requests built from the pieces the filter cares about, so generated input reaches the
/// policy and not only the JSON parser.
fn request_strategy() -> impl Strategy<Value = String> {
    let cmd = prop::sample::select(vec![
        "launch",
        "ls",
        "send-text",
        "get-text",
        "close-window",
        "focus-window",
        "set-window-title",
        "run",
    ]);
    let field = prop::sample::select(vec![
        r#""args":["/usr/local/bin/revdiff"]"#,
        r#""args":["/bin/sh","-c","/usr/local/bin/revdiff x"]"#,
        r#""args":[]"#,
        r#""type":"overlay""#,
        r#""type":"background""#,
        r#""match":"id:42""#,
        r#""match":"window_id:7""#,
        r#""data":"text:x""#,
        r#""cwd":"/""#,
        r#""env":["A=b"]"#,
        r#""title":"t""#,
        r#""all":true"#,
        r#""wait_for_child_to_exit":true"#,
        r#""x":null"#,
    ]);
    (cmd, prop::collection::vec(field, 0..6), any::<bool>()).prop_map(|(cmd, fields, no_response)| {
        format!(
            r#"{{"cmd":"{cmd}","version":[0,42,0],"kitty_window_id":7,"no_response":{no_response},"async":"a1","payload":{{{}}}}}"#,
            fields.join(",")
        )
    })
}

/// All frames of `bytes` pushed in chunks of `chunk` bytes, up to the first error.
fn frames_in_chunks(bytes: &[u8], chunk: usize) -> (Vec<Vec<u8>>, Option<FrameError>) {
    let mut buffer = FrameBuffer::new();
    let mut frames = Vec::new();
    for piece in bytes.chunks(chunk.max(1)) {
        buffer.push(piece);
        loop {
            match buffer.next_frame() {
                Ok(Some(frame)) => frames.push(frame),
                Ok(None) => break,
                Err(err) => return (frames, Some(err)),
            }
        }
    }
    (frames, buffer.finish().err())
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..400)) {
        let _ = frames_in_chunks(&bytes, 7);
        let _ = decide(&bytes, &full_policy(), &owned(&[OWNED]));
    }

    #[test]
    fn how_bytes_arrive_does_not_change_the_frames(
        jsons in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..40), 0..4),
        tail in prop::collection::vec(any::<u8>(), 0..8),
        chunk in 1usize..32,
    ) {
        let mut bytes: Vec<u8> = jsons.iter().flat_map(|j| encode_frame(j)).collect();
        bytes.extend(&tail);
        prop_assert_eq!(frames_in_chunks(&bytes, bytes.len()), frames_in_chunks(&bytes, chunk));
    }

    #[test]
    fn a_forwarded_frame_is_forwarded_again_unchanged(request in request_strategy()) {
        let policy = full_policy();
        let owned = owned(&[OWNED]);
        match decide(request.as_bytes(), &policy, &owned) {
            Decision::Forward { frame, cmd, expect_response } => {
                let again = decide(unframe(&frame).as_bytes(), &policy, &owned);
                prop_assert_eq!(again, Decision::Forward { frame, cmd, expect_response });
            }
            Decision::Deny { reason, response, .. } => {
                prop_assert!(!reason.is_empty() && reason.len() < 80);
                unframe(&response);
            }
        }
    }
}
