//! Strict decoding of one herdr request line (security invariant 5).
//!
//! herdr itself is lenient: it ignores unknown params fields and serde_json's default `Value`
//! keeps the last of two duplicate keys. A filter that checked one reading of a line while herdr
//! acted on another would be bypassed, so a line passes only when it has exactly one reading:
//! one JSON object on one line, no duplicate key at any depth, the envelope `id`/`method`/`params`
//! and nothing else, and (for the methods airlock allows) params that match the schema exactly.

use std::fmt;

use serde::de::{self, DeserializeOwned, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Number, Value};

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
    let mut stream = serde_json::Deserializer::from_str(text).into_iter::<StrictValue>();
    let value = match stream.next() {
        Some(Ok(StrictValue(value))) => value,
        Some(Err(err)) => return Err(classify(&err)),
        None => return Err(DecodeError::NotAnObject),
    };
    // The stream stops right after the object; serde_json's `from_str` would skip trailing
    // whitespace, which the framing does not allow.
    if stream.byte_offset() != text.len() {
        return Err(DecodeError::TrailingBytes);
    }
    let Value::Object(map) = value else {
        return Err(DecodeError::NotAnObject);
    };
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

const DUPLICATE_KEY: &str = "airlock-filter: duplicate key";
const TOO_DEEP: &str = "airlock-filter: nested too deeply";

fn classify(err: &serde_json::Error) -> DecodeError {
    let text = err.to_string();
    if text.starts_with(DUPLICATE_KEY) {
        DecodeError::DuplicateKey
    } else if text.starts_with(TOO_DEEP) || text.starts_with("recursion limit exceeded") {
        DecodeError::TooDeep
    } else {
        DecodeError::InvalidJson
    }
}

/// A JSON value decoded with duplicate keys refused at every depth and nesting capped.
struct StrictValue(Value);

impl<'de> Deserialize<'de> for StrictValue {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        StrictSeed { depth: 0 }.deserialize(deserializer)
    }
}

/// `depth`: how many arrays and objects enclose the value being decoded.
#[derive(Clone, Copy)]
struct StrictSeed {
    depth: usize,
}

impl StrictSeed {
    /// The seed for the members of a container opened here.
    fn nested<E: de::Error>(self) -> Result<StrictSeed, E> {
        let depth = self.depth + 1;
        if depth > MAX_DEPTH {
            return Err(E::custom(TOO_DEEP));
        }
        Ok(StrictSeed { depth })
    }
}

impl<'de> DeserializeSeed<'de> for StrictSeed {
    type Value = StrictValue;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<StrictValue, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for StrictSeed {
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
        let inner = self.nested()?;
        let mut items = Vec::new();
        while let Some(StrictValue(item)) = seq.next_element_seed(inner)? {
            items.push(item);
        }
        Ok(StrictValue(Value::Array(items)))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<StrictValue, A::Error> {
        let inner = self.nested()?;
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if object.contains_key(&key) {
                return Err(de::Error::custom(DUPLICATE_KEY));
            }
            let StrictValue(value) = map.next_value_seed(inner)?;
            object.insert(key, value);
        }
        Ok(StrictValue(Value::Object(object)))
    }
}
