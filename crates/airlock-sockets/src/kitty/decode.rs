//! Strict decoding of one kitty request (security invariant 5).
//!
//! kitty reads requests with Python's `json.loads`, which keeps the last of two duplicate keys,
//! and its commands read payload fields with `dict.get`, which ignores every field they do not
//! know. A filter that checked one reading of a request while kitty acted on another would be
//! bypassed, so a request passes only when it has exactly one reading: one JSON object, no
//! duplicate key at any depth (compared after unescaping, so `"c\u006dd"` is `"cmd"`), no two
//! keys that differ only in ASCII case, bounded nesting, and only the envelope keys kitty's
//! protocol defines.

use std::fmt;

use serde_json::{Map, Value};

use super::frame::MAX_FRAME_BYTES;

/// The most arrays and objects that may enclose one another in a request. The deepest allowed
/// request needs three (envelope, payload, `args`); the cap keeps hostile nesting far from
/// serde_json's own limit (128) and from any stack limit.
pub const MAX_DEPTH: usize = 16;

/// kitty's envelope keys of password-protected requests. airlock refuses them: kitty would
/// prompt the user or apply a password's own permissions, neither of which the filter can see
/// through (an encrypted payload cannot be checked at all).
const PASSWORD_KEYS: &[&str] = &[
    "password",
    "encrypted",
    "iv",
    "tag",
    "pubkey",
    "enc_proto",
    "timestamp",
];
/// Streamed requests: one command split over many frames that kitty joins.
const STREAM_KEYS: &[&str] = &["stream", "stream_id"];
/// Async control: `cancel_async` is honoured by kitty without authentication; `async_id` is the
/// payload-side name of the async id and must never come from the client.
const ASYNC_CONTROL_KEYS: &[&str] = &["cancel_async", "async_id"];

/// A request whose envelope decoded.
#[derive(Debug, Clone, PartialEq)]
pub struct Envelope {
    /// The command name exactly as sent (`launch`, `ls`, …).
    pub cmd: String,
    /// The client's kitty version, `[major, minor, patch]`.
    pub version: [u64; 3],
    /// `true` when the client asked kitty not to answer.
    pub no_response: bool,
    /// The window the client says it runs in; kitty resolves "this window" (`self`, the
    /// default target of most commands) from it.
    pub kitty_window_id: Option<u64>,
    /// The `async` id kitty's client puts on asynchronous commands (`launch` among them).
    pub async_id: Option<String>,
    /// The payload object (empty when absent), free of duplicate keys; not yet checked.
    pub payload: Map<String, Value>,
}

/// Why a request did not decode into an [`Envelope`]. Each variant names a rule and carries no
/// bytes of the request, so it is safe to log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecodeError {
    TooLong,
    NotUtf8,
    NotAnObject,
    TrailingBytes,
    InvalidJson,
    DuplicateKey,
    CaseVariantKey,
    TooDeep,
    PasswordEnvelope,
    Streaming,
    AsyncControl,
    UnknownEnvelopeKey,
    MissingEnvelopeKey,
    CmdNotString,
    BadVersion,
    NoResponseNotBool,
    BadWindowId,
    AsyncNotString,
    PayloadNotObject,
}

impl DecodeError {
    /// The rule the request broke, for the denial message and the decision log.
    pub fn rule(self) -> &'static str {
        match self {
            DecodeError::TooLong => "frame over 1 MiB",
            DecodeError::NotUtf8 => "request is not UTF-8",
            DecodeError::NotAnObject => "request is not a JSON object",
            DecodeError::TrailingBytes => "bytes after the request object",
            DecodeError::InvalidJson => "invalid JSON",
            DecodeError::DuplicateKey => "duplicate JSON key",
            DecodeError::CaseVariantKey => "JSON keys that differ only in case",
            DecodeError::TooDeep => "JSON nested too deeply",
            DecodeError::PasswordEnvelope => "password and encrypted requests are refused",
            DecodeError::Streaming => "streamed requests are refused",
            DecodeError::AsyncControl => "async control requests are refused",
            DecodeError::UnknownEnvelopeKey => "unknown key in the request envelope",
            DecodeError::MissingEnvelopeKey => "request envelope lacks cmd or version",
            DecodeError::CmdNotString => "cmd must be a string",
            DecodeError::BadVersion => "version must be three non-negative integers",
            DecodeError::NoResponseNotBool => "no_response must be a boolean",
            DecodeError::BadWindowId => "kitty_window_id must be a non-negative integer",
            DecodeError::AsyncNotString => "async must be a string",
            DecodeError::PayloadNotObject => "payload must be a JSON object",
        }
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.rule())
    }
}

/// Decodes the JSON of one request frame.
pub fn decode_request(json: &[u8]) -> Result<Envelope, DecodeError> {
    envelope(parse_object(json, MAX_FRAME_BYTES)?)
}

/// One strict JSON object filling all of `json` (no whitespace around it either: kitty's
/// clients write none, and a frame is the object's exact extent).
pub(super) fn parse_object(json: &[u8], limit: usize) -> Result<Map<String, Value>, DecodeError> {
    use crate::strict::StrictError as E;
    if json.len() > limit {
        return Err(DecodeError::TooLong);
    }
    crate::strict::parse_object::<MAX_DEPTH, true>(json).map_err(|e| match e {
        E::NotUtf8 => DecodeError::NotUtf8,
        E::NotAnObject => DecodeError::NotAnObject,
        E::TrailingBytes => DecodeError::TrailingBytes,
        E::DuplicateKey => DecodeError::DuplicateKey,
        E::CaseVariantKey => DecodeError::CaseVariantKey,
        E::TooDeep => DecodeError::TooDeep,
        E::InvalidJson => DecodeError::InvalidJson,
    })
}

fn envelope(map: Map<String, Value>) -> Result<Envelope, DecodeError> {
    // Refused groups are looked for before unknown keys, so the reason does not depend on the
    // order keys happen to be stored in.
    let has = |group: &[&str]| map.keys().any(|key| group.contains(&key.as_str()));
    if has(PASSWORD_KEYS) {
        return Err(DecodeError::PasswordEnvelope);
    }
    if has(STREAM_KEYS) {
        return Err(DecodeError::Streaming);
    }
    if has(ASYNC_CONTROL_KEYS) {
        return Err(DecodeError::AsyncControl);
    }
    let (mut cmd, mut version, mut no_response) = (None, None, false);
    let (mut kitty_window_id, mut async_id, mut payload) = (None, None, Map::new());
    for (key, value) in map {
        match key.as_str() {
            "cmd" => cmd = Some(value.as_str().ok_or(DecodeError::CmdNotString)?.to_owned()),
            "version" => version = Some(parse_version(&value)?),
            "no_response" => no_response = value.as_bool().ok_or(DecodeError::NoResponseNotBool)?,
            "kitty_window_id" => {
                kitty_window_id = Some(value.as_u64().ok_or(DecodeError::BadWindowId)?);
            }
            "async" => {
                async_id = Some(
                    value
                        .as_str()
                        .ok_or(DecodeError::AsyncNotString)?
                        .to_owned(),
                );
            }
            "payload" => match value {
                Value::Object(object) => payload = object,
                _ => return Err(DecodeError::PayloadNotObject),
            },
            // Case variants (`"Cmd"`) land here: kitty would ignore them.
            _ => return Err(DecodeError::UnknownEnvelopeKey),
        }
    }
    let (Some(cmd), Some(version)) = (cmd, version) else {
        return Err(DecodeError::MissingEnvelopeKey);
    };
    Ok(Envelope {
        cmd,
        version,
        no_response,
        kitty_window_id,
        async_id,
        payload,
    })
}

fn parse_version(value: &Value) -> Result<[u64; 3], DecodeError> {
    let parts = value.as_array().ok_or(DecodeError::BadVersion)?;
    let mut version = [0u64; 3];
    if parts.len() != version.len() {
        return Err(DecodeError::BadVersion);
    }
    for (slot, part) in version.iter_mut().zip(parts) {
        *slot = part
            .as_u64()
            .filter(|&n| n <= u64::from(u32::MAX))
            .ok_or(DecodeError::BadVersion)?;
    }
    Ok(version)
}
