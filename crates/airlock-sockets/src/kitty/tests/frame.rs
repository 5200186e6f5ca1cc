//! Framing: `ESC P @kitty-cmd <JSON> ESC \`, whole frames out, nothing else accepted.

use super::super::{
    FrameBuffer, FrameError, MAX_FRAME_BYTES, Parsed, deny_frame_error, encode_frame, parse_frame,
};
use super::{denied_with, full_policy, owned};

const LS: &[u8] = br#"{"cmd":"ls","version":[0,42,0]}"#;

fn framed(json: &[u8]) -> Vec<u8> {
    encode_frame(json)
}

#[test]
fn a_whole_frame_yields_its_json_and_length() {
    let frame = framed(LS);
    assert_eq!(
        parse_frame(&frame, MAX_FRAME_BYTES),
        Ok(Parsed::Frame {
            json: LS,
            len: frame.len()
        })
    );
}

#[test]
fn frames_back_to_back_come_out_one_by_one() {
    let mut buffer = FrameBuffer::new();
    let mut bytes = framed(LS);
    bytes.extend(framed(br#"{"cmd":"launch"}"#));
    buffer.push(&bytes);
    assert_eq!(buffer.next_frame(), Ok(Some(LS.to_vec())));
    assert_eq!(
        buffer.next_frame(),
        Ok(Some(br#"{"cmd":"launch"}"#.to_vec()))
    );
    assert_eq!(buffer.next_frame(), Ok(None));
    assert_eq!(buffer.finish(), Ok(()));
}

#[test]
fn a_half_frame_waits_for_the_rest_at_every_split_point() {
    let frame = framed(LS);
    for split in 0..frame.len() {
        let mut buffer = FrameBuffer::new();
        buffer.push(&frame[..split]);
        assert_eq!(buffer.next_frame(), Ok(None), "split at {split}");
        assert_eq!(buffer.pending(), split);
        buffer.push(&frame[split..]);
        assert_eq!(
            buffer.next_frame(),
            Ok(Some(LS.to_vec())),
            "split at {split}"
        );
        assert_eq!(buffer.pending(), 0);
    }
}

#[test]
fn a_connection_closed_inside_a_frame_is_an_error() {
    let mut buffer = FrameBuffer::new();
    buffer.push(&framed(LS)[..10]);
    assert_eq!(buffer.next_frame(), Ok(None));
    assert_eq!(buffer.finish(), Err(FrameError::Truncated));
}

#[test]
fn bytes_outside_frames_are_refused() {
    for bytes in [
        b"garbage".to_vec(),
        b"\n".to_vec(),
        b"\x1bP@kitty-cmX".to_vec(),
        b"\x1b]@kitty-cmd{}\x1b\\".to_vec(),
        [b" ".as_slice(), &framed(LS)].concat(),
    ] {
        assert_eq!(
            parse_frame(&bytes, MAX_FRAME_BYTES),
            Err(FrameError::OutsideFrame),
            "{bytes:?}"
        );
    }
    // Between two frames as much as before the first.
    let mut buffer = FrameBuffer::new();
    buffer.push(&[framed(LS), b"\n".to_vec(), framed(LS)].concat());
    assert_eq!(buffer.next_frame(), Ok(Some(LS.to_vec())));
    assert_eq!(buffer.next_frame(), Err(FrameError::OutsideFrame));
}

#[test]
fn an_escape_inside_a_frame_is_refused() {
    let bytes = b"\x1bP@kitty-cmd{\"cmd\":\x1b[31m\"ls\"}\x1b\\";
    assert_eq!(
        parse_frame(bytes, MAX_FRAME_BYTES),
        Err(FrameError::EscapeInFrame)
    );
    // A lone trailing ESC may still be the start of the terminator.
    assert_eq!(
        parse_frame(b"\x1bP@kitty-cmd{}\x1b", MAX_FRAME_BYTES),
        Ok(Parsed::Incomplete)
    );
}

#[test]
fn frames_over_one_mebibyte_are_refused_complete_or_not() {
    let overhead = framed(b"").len();
    let fits = framed(&vec![b' '; MAX_FRAME_BYTES - overhead]);
    assert_eq!(fits.len(), MAX_FRAME_BYTES);
    assert!(matches!(
        parse_frame(&fits, MAX_FRAME_BYTES),
        Ok(Parsed::Frame { .. })
    ));
    let over = framed(&vec![b' '; MAX_FRAME_BYTES - overhead + 1]);
    assert_eq!(
        parse_frame(&over, MAX_FRAME_BYTES),
        Err(FrameError::TooLarge)
    );
    // Without its end: refused as soon as the buffer alone reaches the limit.
    let mut buffer = FrameBuffer::new();
    buffer.push(&over[..MAX_FRAME_BYTES - 1]);
    assert_eq!(buffer.next_frame(), Ok(None));
    buffer.push(&over[MAX_FRAME_BYTES - 1..MAX_FRAME_BYTES]);
    assert_eq!(buffer.next_frame(), Err(FrameError::TooLarge));
}

#[test]
fn a_larger_limit_serves_kitty_answers() {
    let big = framed(&vec![b' '; 2 * MAX_FRAME_BYTES]);
    let mut buffer = FrameBuffer::with_limit(super::super::MAX_RESPONSE_FRAME_BYTES);
    buffer.push(&big);
    assert_eq!(
        buffer.next_frame().map(|f| f.map(|j| j.len())),
        Ok(Some(2 * MAX_FRAME_BYTES))
    );
}

#[test]
fn frame_errors_become_kitty_shaped_denials() {
    for err in [
        FrameError::TooLarge,
        FrameError::OutsideFrame,
        FrameError::EscapeInFrame,
        FrameError::Truncated,
    ] {
        let decision = deny_frame_error(err);
        assert!(!decision.is_forward());
        assert_eq!(decision.cmd(), "");
    }
    // The same shape check every denial in these tests goes through, on an empty request.
    assert_eq!(
        denied_with(b"", &full_policy(), &owned(&[])),
        "request is not a JSON object"
    );
}
