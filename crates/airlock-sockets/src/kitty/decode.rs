//! Strict decoding of one kitty request (security invariant 5).
//!
//! kitty reads requests with Python's `json.loads`, which keeps the last of two duplicate keys,
//! and its commands read payload fields with `dict.get`, which ignores every field they do not
//! know. A filter that checked one reading of a request while kitty acted on another would be
//! bypassed, so a request passes only when it has exactly one reading: one JSON object, no
//! duplicate key at any depth (compared after unescaping, so `"c\u006dd"` is `"cmd"`), no two
//! keys that differ only in ASCII case, bounded nesting, and only the envelope keys kitty's
//! protocol defines.

use std::collections::BTreeSet;
use std::fmt;

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Number, Value};

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
    if json.len() > limit {
        return Err(DecodeError::TooLong);
    }
    let text = std::str::from_utf8(json).map_err(|_| DecodeError::NotUtf8)?;
    if !text.starts_with('{') {
        return Err(DecodeError::NotAnObject);
    }
    let mut stream = serde_json::Deserializer::from_str(text).into_iter::<StrictValue>();
    let value = match stream.next() {
        Some(Ok(StrictValue(value))) => value,
        Some(Err(err)) => return Err(classify(&err)),
        None => return Err(DecodeError::NotAnObject),
    };
    if stream.byte_offset() != text.len() {
        return Err(DecodeError::TrailingBytes);
    }
    match value {
        Value::Object(map) => Ok(map),
        _ => Err(DecodeError::NotAnObject),
    }
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

const DUPLICATE_KEY: &str = "airlock-kitty: duplicate key";
const CASE_VARIANT_KEY: &str = "airlock-kitty: case-variant key";
const TOO_DEEP: &str = "airlock-kitty: nested too deeply";

fn classify(err: &serde_json::Error) -> DecodeError {
    let text = err.to_string();
    if text.starts_with(DUPLICATE_KEY) {
        DecodeError::DuplicateKey
    } else if text.starts_with(CASE_VARIANT_KEY) {
        DecodeError::CaseVariantKey
    } else if text.starts_with(TOO_DEEP) || text.starts_with("recursion limit exceeded") {
        DecodeError::TooDeep
    } else {
        DecodeError::InvalidJson
    }
}

/// A JSON value decoded with duplicate and case-variant keys refused at every depth and
/// nesting capped at [`MAX_DEPTH`].
struct StrictValue(Value);

impl<'de> Deserialize<'de> for StrictValue {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Strict { depth: 0 }.deserialize(deserializer)
    }
}

/// `depth`: how many arrays and objects enclose the value being decoded.
#[derive(Clone, Copy)]
struct Strict {
    depth: usize,
}

impl Strict {
    /// The seed for the members of a container opened at this depth.
    fn inside<E: de::Error>(self) -> Result<Strict, E> {
        if self.depth >= MAX_DEPTH {
            return Err(E::custom(TOO_DEEP));
        }
        Ok(Strict {
            depth: self.depth + 1,
        })
    }
}

impl<'de> DeserializeSeed<'de> for Strict {
    type Value = StrictValue;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<StrictValue, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Strict {
    type Value = StrictValue;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<StrictValue, E> {
        Ok(StrictValue(Value::Bool(v)))
    }

    fn visit_i64<E>(self, v: i64) -> Result<StrictValue, E> {
        Ok(StrictValue(Value::Number(v.into())))
    }

    fn visit_u64<E>(self, v: u64) -> Result<StrictValue, E> {
        Ok(StrictValue(Value::Number(v.into())))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<StrictValue, E> {
        Number::from_f64(v)
            .map(|n| StrictValue(Value::Number(n)))
            .ok_or_else(|| E::custom("non-finite number"))
    }

    fn visit_str<E>(self, v: &str) -> Result<StrictValue, E> {
        Ok(StrictValue(Value::String(v.to_owned())))
    }

    fn visit_string<E>(self, v: String) -> Result<StrictValue, E> {
        Ok(StrictValue(Value::String(v)))
    }

    fn visit_unit<E>(self) -> Result<StrictValue, E> {
        Ok(StrictValue(Value::Null))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<StrictValue, A::Error> {
        let inner = self.inside()?;
        let mut items = Vec::new();
        while let Some(StrictValue(item)) = seq.next_element_seed(inner)? {
            items.push(item);
        }
        Ok(StrictValue(Value::Array(items)))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<StrictValue, A::Error> {
        let inner = self.inside()?;
        let mut object = Map::new();
        let mut folded = BTreeSet::new();
        // Keys arrive unescaped, so `"c\u006dd"` and `"cmd"` compare equal here.
        while let Some(key) = map.next_key::<String>()? {
            if object.contains_key(&key) {
                return Err(de::Error::custom(DUPLICATE_KEY));
            }
            if !folded.insert(key.to_ascii_lowercase()) {
                return Err(de::Error::custom(CASE_VARIANT_KEY));
            }
            let StrictValue(value) = map.next_value_seed(inner)?;
            object.insert(key, value);
        }
        Ok(StrictValue(Value::Object(object)))
    }
}
