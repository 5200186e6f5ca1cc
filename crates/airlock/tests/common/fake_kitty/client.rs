//! The client side, for tests: frames, requests, and connections the way kitty's clients make them.

use std::io::{self, Read, Write};
use std::net::Shutdown;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use super::{CLIENT_VERSION, FRAME_PREFIX, FRAME_SUFFIX, find};

/// Wraps JSON bytes in a frame.
pub fn frame(json: &[u8]) -> Vec<u8> {
    [FRAME_PREFIX, json, FRAME_SUFFIX].concat()
}

/// A request as kitty's client writes it: `{"cmd","version","no_response":false,"payload"}`.
pub fn request(cmd: &str, payload: Value) -> Value {
    json!({"cmd": cmd, "version": CLIENT_VERSION, "no_response": false, "payload": payload})
}

/// [`request`], framed.
pub fn request_frame(cmd: &str, payload: Value) -> Vec<u8> {
    frame(request(cmd, payload).to_string().as_bytes())
}

/// Splits what a server wrote into its frames' JSON, parsed. Panics on bytes that are not whole
/// frames of JSON.
pub fn parse_frames(mut bytes: &[u8]) -> Vec<Value> {
    let mut out = Vec::new();
    while !bytes.is_empty() {
        let text = String::from_utf8_lossy(bytes).into_owned();
        let body = bytes
            .strip_prefix(FRAME_PREFIX)
            .unwrap_or_else(|| panic!("fake kitty: not a frame: {text:?}"));
        let end = find(body, FRAME_SUFFIX, 0)
            .unwrap_or_else(|| panic!("fake kitty: unterminated frame: {text:?}"));
        let value = serde_json::from_slice(&body[..end])
            .unwrap_or_else(|e| panic!("fake kitty: frame is not JSON ({e}): {text:?}"));
        out.push(value);
        bytes = &body[end + FRAME_SUFFIX.len()..];
    }
    out
}

/// Client side, for tests: connects to `socket`, writes `bytes` as they are, shuts the writing
/// side, and reads until the server closes. Gives up reading after 10 s.
pub fn roundtrip(socket: &Path, bytes: &[u8]) -> io::Result<Vec<u8>> {
    let mut stream = UnixStream::connect(socket)?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    stream.write_all(bytes)?;
    stream.shutdown(Shutdown::Write)?;
    let mut out = Vec::new();
    stream.read_to_end(&mut out)?;
    Ok(out)
}

/// Client side, for tests: reads one answer frame from `stream` (byte by byte, so nothing after it
/// is consumed) and parses its JSON. `Ok(None)` when the server closed before a whole frame.
pub fn read_answer(stream: &mut UnixStream) -> io::Result<Option<Value>> {
    let mut bytes = Vec::new();
    let mut byte = [0u8; 1];
    while !bytes.ends_with(FRAME_SUFFIX) {
        if stream.read(&mut byte)? == 0 {
            return Ok(None);
        }
        bytes.push(byte[0]);
    }
    let mut frames = parse_frames(&bytes);
    Ok(frames.pop())
}

/// Client side, for tests, as `kitten @` does it: one connection, one request frame of `cmd` with
/// `payload`, its parsed answer, close. Panics when there is no answer.
pub fn call(socket: &Path, cmd: &str, payload: Value) -> Value {
    let fail = |e: &dyn std::fmt::Display| -> ! { panic!("fake kitty: {cmd}: {e}") };
    let mut stream = UnixStream::connect(socket).unwrap_or_else(|e| fail(&e));
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let bytes = request_frame(cmd, payload);
    stream.write_all(&bytes).unwrap_or_else(|e| fail(&e));
    match read_answer(&mut stream) {
        Ok(Some(answer)) => answer,
        Ok(None) => fail(&"closed without an answer"),
        Err(e) => fail(&e),
    }
}
