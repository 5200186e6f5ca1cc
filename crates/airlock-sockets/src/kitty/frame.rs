//! kitty's remote-control framing: `ESC P @kitty-cmd <JSON> ESC \`, requests and responses alike.
//!
//! A frame ends at the first `ESC \`. JSON never carries a raw ESC (control characters must be
//! escaped inside strings and are invalid outside them), so an ESC followed by anything but `\`
//! is not a frame kitty and airlock would read the same way, and is refused. So are bytes between
//! frames: kitty's own client writes frames back to back, and a filter that skipped stray bytes
//! would be guessing where kitty's parser resynchronises.

use serde::Serialize;

/// The bytes that open every frame.
pub const FRAME_PREFIX: &[u8] = b"\x1bP@kitty-cmd";
/// The bytes that close every frame (ESC, backslash).
pub const FRAME_SUFFIX: &[u8] = b"\x1b\\";
/// The longest request frame read from the sandbox (1 MiB, prefix and suffix included); longer
/// is refused before any parsing.
pub const MAX_FRAME_BYTES: usize = 1 << 20;
/// The longest response frame read from kitty: `get-text` of a long scrollback and `ls` of a
/// busy kitty are legitimately larger than any request.
pub const MAX_RESPONSE_FRAME_BYTES: usize = 16 << 20;

const ESC: u8 = 0x1b;

/// Why bytes did not split into frames. Each variant names a rule and carries no byte of the
/// input, so it is safe to log. After any of them the connection is closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameError {
    /// A frame, complete or not, is past the size limit.
    TooLarge,
    /// Bytes that are not the start of a frame.
    OutsideFrame,
    /// An ESC inside a frame that does not start its `ESC \` end.
    EscapeInFrame,
    /// The peer closed the connection halfway through a frame.
    Truncated,
}

impl FrameError {
    /// The rule the bytes broke, for the denial message and the decision log.
    pub fn rule(self) -> &'static str {
        match self {
            FrameError::TooLarge => "frame over 1 MiB",
            FrameError::OutsideFrame => "bytes outside a kitty-cmd frame",
            FrameError::EscapeInFrame => "escape byte inside a frame",
            FrameError::Truncated => "connection closed inside a frame",
        }
    }
}

impl std::fmt::Display for FrameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.rule())
    }
}

/// What the start of a buffer holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parsed<'a> {
    /// One whole frame: its JSON and how many bytes of the buffer it took.
    Frame { json: &'a [u8], len: usize },
    /// The start of a frame (or nothing): wait for more bytes.
    Incomplete,
}

/// Reads the frame at the start of `buf`, whose frames may be at most `limit` bytes long.
pub fn parse_frame(buf: &[u8], limit: usize) -> Result<Parsed<'_>, FrameError> {
    let head = buf.len().min(FRAME_PREFIX.len());
    if buf[..head] != FRAME_PREFIX[..head] {
        return Err(FrameError::OutsideFrame);
    }
    // Whatever is still missing makes the frame at least one byte longer than `buf`.
    let incomplete = if buf.len() >= limit {
        Err(FrameError::TooLarge)
    } else {
        Ok(Parsed::Incomplete)
    };
    if head < FRAME_PREFIX.len() {
        return incomplete;
    }
    let body = &buf[FRAME_PREFIX.len()..];
    let Some(at) = body.iter().position(|&b| b == ESC) else {
        return incomplete;
    };
    match body.get(at + 1) {
        None => incomplete,
        Some(b'\\') => {
            let len = FRAME_PREFIX.len() + at + FRAME_SUFFIX.len();
            if len > limit {
                return Err(FrameError::TooLarge);
            }
            Ok(Parsed::Frame {
                json: &body[..at],
                len,
            })
        }
        Some(_) => Err(FrameError::EscapeInFrame),
    }
}

/// The bytes of one connection direction, split into frames as they arrive.
///
/// Call [`FrameBuffer::next_frame`] until it returns `Ok(None)` after every
/// [`FrameBuffer::push`]; that keeps the buffer within one frame limit plus one read.
#[derive(Debug, Clone)]
pub struct FrameBuffer {
    buf: Vec<u8>,
    limit: usize,
}

impl Default for FrameBuffer {
    fn default() -> Self {
        FrameBuffer::new()
    }
}

impl FrameBuffer {
    /// A buffer for requests from the sandbox ([`MAX_FRAME_BYTES`]).
    pub fn new() -> FrameBuffer {
        FrameBuffer::with_limit(MAX_FRAME_BYTES)
    }

    /// A buffer whose frames may be up to `limit` bytes (see [`MAX_RESPONSE_FRAME_BYTES`]).
    pub fn with_limit(limit: usize) -> FrameBuffer {
        FrameBuffer {
            buf: Vec::new(),
            limit,
        }
    }

    /// Appends bytes read from the peer.
    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// The JSON of the next whole frame, `None` while the next frame is incomplete.
    pub fn next_frame(&mut self) -> Result<Option<Vec<u8>>, FrameError> {
        match parse_frame(&self.buf, self.limit)? {
            Parsed::Frame { json, len } => {
                let json = json.to_vec();
                self.buf.drain(..len);
                Ok(Some(json))
            }
            Parsed::Incomplete => Ok(None),
        }
    }

    /// At the end of the stream: an error when half a frame is left over.
    pub fn finish(&self) -> Result<(), FrameError> {
        if self.buf.is_empty() {
            Ok(())
        } else {
            Err(FrameError::Truncated)
        }
    }

    /// How many bytes wait for the rest of their frame.
    pub fn pending(&self) -> usize {
        self.buf.len()
    }
}

/// Wraps JSON bytes in a frame.
pub fn encode_frame(json: &[u8]) -> Vec<u8> {
    let mut frame = Vec::with_capacity(FRAME_PREFIX.len() + json.len() + FRAME_SUFFIX.len());
    frame.extend_from_slice(FRAME_PREFIX);
    frame.extend_from_slice(json);
    frame.extend_from_slice(FRAME_SUFFIX);
    frame
}

/// Serialises `value` as compact, ASCII-only JSON. kitty's own clients escape every non-ASCII
/// character so a frame survives any transport that is not 8-bit clean; airlock's frames do
/// the same. Control characters are escaped by serde_json, so no raw ESC can end a frame early.
pub(super) fn ascii_json<T: Serialize>(value: &T) -> Option<String> {
    let text = serde_json::to_string(value).ok()?;
    if text.is_ascii() {
        return Some(text);
    }
    // serde_json writes non-ASCII only inside string literals, where `\uXXXX` means the same.
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if c.is_ascii() {
            out.push(c);
        } else {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        }
    }
    Some(out)
}

/// [`ascii_json`] in a frame.
pub(super) fn json_frame<T: Serialize>(value: &T) -> Option<Vec<u8>> {
    ascii_json(value).map(|text| encode_frame(text.as_bytes()))
}
