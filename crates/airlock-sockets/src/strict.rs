//! Strict JSON for every filter (security invariant 5): one object filling the whole input,
//! duplicate keys refused at every depth (compared after unescaping, so `"\u006dethod"` and
//! `"method"` are the same key), optionally keys that differ only in ASCII case, and nesting capped.
//! serde_json alone would keep the last of two duplicates, which the server behind a filter may
//! read differently.

use std::collections::BTreeSet;
use std::fmt;

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Number, Value};

/// What a filter's request may be.
#[derive(Debug, Clone, Copy)]
struct Rules {
    /// How many arrays and objects may enclose a value.
    max_depth: usize,
    /// Refuse keys of one object that differ only in ASCII case (`"cmd"` and `"Cmd"`).
    fold_case: bool,
}

/// Why the input is not one strict object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StrictError {
    NotUtf8,
    NotAnObject,
    TrailingBytes,
    DuplicateKey,
    CaseVariantKey,
    TooDeep,
    InvalidJson,
}

const DUPLICATE_KEY: &str = "airlock-strict: duplicate key";
const CASE_VARIANT_KEY: &str = "airlock-strict: case-variant key";
const TOO_DEEP: &str = "airlock-strict: nested too deeply";

/// The object `json` holds, nothing around it (no whitespace either), with at most `MAX_DEPTH`
/// arrays and objects around any value and, with `FOLD_CASE`, no two keys of one object that
/// differ only in ASCII case.
pub fn parse_object<const MAX_DEPTH: usize, const FOLD_CASE: bool>(
    json: &[u8],
) -> Result<Map<String, Value>, StrictError> {
    let text = std::str::from_utf8(json).map_err(|_| StrictError::NotUtf8)?;
    if !text.starts_with('{') {
        return Err(StrictError::NotAnObject);
    }
    let mut stream =
        serde_json::Deserializer::from_str(text).into_iter::<StrictValue<MAX_DEPTH, FOLD_CASE>>();
    let value = match stream.next() {
        Some(Ok(StrictValue(value))) => value,
        Some(Err(err)) => return Err(classify(&err)),
        None => return Err(StrictError::NotAnObject),
    };
    // The stream stops right after the object; `from_str` would skip trailing whitespace.
    if stream.byte_offset() != text.len() {
        return Err(StrictError::TrailingBytes);
    }
    match value {
        Value::Object(map) => Ok(map),
        _ => Err(StrictError::NotAnObject),
    }
}

struct StrictValue<const MAX_DEPTH: usize, const FOLD_CASE: bool>(Value);

impl<'de, const MAX_DEPTH: usize, const FOLD_CASE: bool> Deserialize<'de>
    for StrictValue<MAX_DEPTH, FOLD_CASE>
{
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let rules = Rules {
            max_depth: MAX_DEPTH,
            fold_case: FOLD_CASE,
        };
        Strict { depth: 0, rules }
            .deserialize(deserializer)
            .map(StrictValue)
    }
}

fn classify(err: &serde_json::Error) -> StrictError {
    let text = err.to_string();
    if text.starts_with(DUPLICATE_KEY) {
        StrictError::DuplicateKey
    } else if text.starts_with(CASE_VARIANT_KEY) {
        StrictError::CaseVariantKey
    } else if text.starts_with(TOO_DEEP) || text.starts_with("recursion limit exceeded") {
        StrictError::TooDeep
    } else {
        StrictError::InvalidJson
    }
}

/// `depth`: how many arrays and objects enclose the value being decoded.
#[derive(Clone, Copy)]
struct Strict {
    depth: usize,
    rules: Rules,
}

impl Strict {
    /// The seed for the members of a container opened at this depth.
    fn inside<E: de::Error>(self) -> Result<Strict, E> {
        if self.depth >= self.rules.max_depth {
            return Err(E::custom(TOO_DEEP));
        }
        Ok(Strict {
            depth: self.depth + 1,
            ..self
        })
    }
}

impl<'de> DeserializeSeed<'de> for Strict {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Strict {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        Number::from_f64(v)
            .map(Value::Number)
            .ok_or_else(|| E::custom("non-finite number"))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let inner = self.inside()?;
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(inner)? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let inner = self.inside()?;
        let mut object = Map::new();
        let mut folded = BTreeSet::new();
        while let Some(key) = map.next_key::<String>()? {
            if object.contains_key(&key) {
                return Err(de::Error::custom(DUPLICATE_KEY));
            }
            if self.rules.fold_case && !folded.insert(key.to_ascii_lowercase()) {
                return Err(de::Error::custom(CASE_VARIANT_KEY));
            }
            let value = map.next_value_seed(inner)?;
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
}
