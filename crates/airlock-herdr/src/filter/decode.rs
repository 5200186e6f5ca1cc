//! Strict decoding of one herdr request line (security invariant 5).
//!
//! herdr itself is lenient: it ignores unknown params fields and serde_json's default `Value`
//! keeps the last of two duplicate keys. A filter that checked one reading of a line while herdr
//! acted on another would be bypassed, so a line passes only when it has exactly one reading:
//! one JSON object on one line, no duplicate key at any depth, the envelope `id`/`method`/`params`
//! and nothing else, and (for the methods airlock allows) params that match the schema exactly.

use std::fmt;

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

/// The longest request line herdr reads (1 MiB), trailing newline included; longer is refused
/// before any parsing.
pub const MAX_LINE_BYTES: usize = 1 << 20;

/// The most arrays and objects that may enclose one another in a request. Allowed requests need
/// three (envelope, params, a field's value); the cap keeps hostile nesting far from serde_json's
/// own limit (128) and from any stack limit.
pub const MAX_DEPTH: usize = 32;

/// A request whose envelope decoded: exactly `{"id": string, "method": string, "params": object}`.
#[derive(Debug, Clone, PartialEq)]
pub struct Envelope {
    /// The client's request id, echoed in herdr's response and in airlock's denials.
    pub id: String,
    /// The method name exactly as sent (case-sensitive, as herdr treats it).
    pub method: String,
    /// The params object, free of duplicate keys; not yet checked against any schema.
    pub params: Map<String, Value>,
}

/// Why a line did not decode into an [`Envelope`]. Each variant names a rule and carries no
/// bytes of the request, so it is safe to log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecodeError {
    TooLong,
    NotUtf8,
    MultipleLines,
    NotAnObject,
    TrailingBytes,
    InvalidJson,
    DuplicateKey,
    TooDeep,
    UnknownEnvelopeKey,
    MissingEnvelopeKey,
    IdNotString,
    MethodNotString,
    ParamsNotObject,
}

impl DecodeError {
    /// The rule the line broke, for the denial message and the decision log.
    pub fn rule(self) -> &'static str {
        match self {
            DecodeError::TooLong => "request line over 1 MiB",
            DecodeError::NotUtf8 => "request is not UTF-8",
            DecodeError::MultipleLines => "request spans more than one line",
            DecodeError::NotAnObject => "request is not a JSON object",
            DecodeError::TrailingBytes => "bytes after the request object",
            DecodeError::InvalidJson => "invalid JSON",
            DecodeError::DuplicateKey => "duplicate JSON key",
            DecodeError::TooDeep => "JSON nested too deeply",
            DecodeError::UnknownEnvelopeKey => "unknown key in the request envelope",
            DecodeError::MissingEnvelopeKey => "request envelope lacks id, method or params",
            DecodeError::IdNotString => "id must be a string",
            DecodeError::MethodNotString => "method must be a string",
            DecodeError::ParamsNotObject => "params must be a JSON object",
        }
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.rule())
    }
}

/// Params that do not match the method's schema: an unknown or case-variant key, a missing
/// required field, a wrong type or an enum value outside the schema. serde's own message is
/// dropped on purpose: it quotes the offending key or value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParamsMismatch;

/// Decodes one request line: optional single trailing `\n`, nothing else around the object.
pub fn decode_line(line: &[u8]) -> Result<Envelope, DecodeError> {
    if line.len() > MAX_LINE_BYTES {
        return Err(DecodeError::TooLong);
    }
    let body = line.strip_suffix(b"\n").unwrap_or(line);
    // herdr reads up to the first newline; a second line would be a different request to it.
    if body.contains(&b'\n') {
        return Err(DecodeError::MultipleLines);
    }
    let text = std::str::from_utf8(body).map_err(|_| DecodeError::NotUtf8)?;
    if !text.starts_with('{') {
        return Err(DecodeError::NotAnObject);
    }
    use airlock_sockets::strict::StrictError as E;
    let map = airlock_sockets::strict::parse_object::<MAX_DEPTH, false>(text.as_bytes()).map_err(
        |e| match e {
            E::NotUtf8 => DecodeError::NotUtf8,
            E::NotAnObject => DecodeError::NotAnObject,
            E::TrailingBytes => DecodeError::TrailingBytes,
            E::DuplicateKey => DecodeError::DuplicateKey,
            E::TooDeep => DecodeError::TooDeep,
            // Case variants are not folded here: the envelope and params refuse unknown keys.
            E::CaseVariantKey | E::InvalidJson => DecodeError::InvalidJson,
        },
    )?;
    envelope(map)
}

/// Checks `params` against the schema type `T` (which must deny unknown fields).
pub fn decode_params<T: DeserializeOwned>(params: Map<String, Value>) -> Result<T, ParamsMismatch> {
    T::deserialize(Value::Object(params)).map_err(|_| ParamsMismatch)
}

fn envelope(map: Map<String, Value>) -> Result<Envelope, DecodeError> {
    let (mut id, mut method, mut params) = (None, None, None);
    for (key, value) in map {
        match key.as_str() {
            "id" => id = Some(value),
            "method" => method = Some(value),
            "params" => params = Some(value),
            // Case variants (`"Method"`) land here too: herdr would ignore them, so a filter
            // must not have to guess which spelling herdr reads.
            _ => return Err(DecodeError::UnknownEnvelopeKey),
        }
    }
    let (Some(id), Some(method), Some(params)) = (id, method, params) else {
        return Err(DecodeError::MissingEnvelopeKey);
    };
    let Value::String(id) = id else {
        return Err(DecodeError::IdNotString);
    };
    let Value::String(method) = method else {
        return Err(DecodeError::MethodNotString);
    };
    let Value::Object(params) = params else {
        return Err(DecodeError::ParamsNotObject);
    };
    Ok(Envelope { id, method, params })
}
