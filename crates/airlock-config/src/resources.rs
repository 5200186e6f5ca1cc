//! `[sandbox.resources]`: memory, CPU and process limits, and the size of the sandbox's tmpfs.
//!
//! The raw table keeps what the file said (a size may be `"2G"` or a number of bytes, `cpus` an
//! integer, a float or a string), so the loader can name the file, the key and the valid form
//! when a value is wrong; [`Resources`] is the checked result, layered key by key.

use std::path::Path;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::ConfigError;

/// One value as written in the file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum RawValue {
    Int(i64),
    Float(Float),
    Text(String),
}

/// An f64 kept by its bits, so the table stays `Eq`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Float(u64);

impl Float {
    fn get(self) -> f64 {
        f64::from_bits(self.0)
    }
}

impl Serialize for Float {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(self.get())
    }
}

impl<'de> Deserialize<'de> for Float {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Float, D::Error> {
        f64::deserialize(d).map(|f| Float(f.to_bits()))
    }
}

impl std::fmt::Display for RawValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RawValue::Int(i) => write!(f, "{i}"),
            RawValue::Float(x) => write!(f, "{}", x.get()),
            RawValue::Text(s) => write!(f, "{s:?}"),
        }
    }
}

/// The `[sandbox.resources]` table as written.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ResourcesSection {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory: Option<RawValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpus: Option<RawValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pids: Option<RawValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tmp_size: Option<RawValue>,
}

/// How big each of the sandbox's own tmpfs (`/tmp`, `/var/tmp`, `/run`, `/dev/shm`) may grow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TmpSize {
    Bytes(u64),
    /// A percentage of the host's RAM.
    Percent(u8),
}

/// The checked limits; `None`: not limited (tmpfs: the default fraction of RAM).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resources {
    /// `memory.max`, in bytes.
    pub memory: Option<u64>,
    /// CPUs, in thousandths (`cpus = 1.5` → 1500).
    pub cpus_milli: Option<u32>,
    /// `pids.max`.
    pub pids: Option<u64>,
    pub tmp_size: Option<TmpSize>,
}

impl Resources {
    /// Whether any cgroup limit is asked for (memory, cpus or pids).
    pub fn limits_anything(&self) -> bool {
        self.memory.is_some() || self.cpus_milli.is_some() || self.pids.is_some()
    }

    /// Layers `section` (already checked) over `self`: each key the file sets wins.
    pub fn apply(&mut self, section: &ResourcesSection) {
        if let Some(v) = section.memory.as_ref().and_then(|v| memory(v).ok()) {
            self.memory = Some(v);
        }
        if let Some(v) = section.cpus.as_ref().and_then(|v| cpus(v).ok()) {
            self.cpus_milli = Some(v);
        }
        if let Some(v) = section.pids.as_ref().and_then(|v| pids(v).ok()) {
            self.pids = Some(v);
        }
        if let Some(v) = section.tmp_size.as_ref().and_then(|v| tmp_size(v).ok()) {
            self.tmp_size = Some(v);
        }
    }
}

const SIZE_FORM: &str = "a size such as \"2G\", \"512M\" or a number of bytes";
const MIN_MEMORY: u64 = 16 << 20;

/// Checks every key of `section`; the error names `origin`, the key and the valid form.
pub fn check(origin: &Path, section: &ResourcesSection) -> Result<(), ConfigError> {
    let fail =
        |key: &'static str, value: &RawValue, expected: &'static str| ConfigError::Resource {
            path: origin.to_path_buf(),
            key,
            value: value.to_string(),
            expected,
        };
    if let Some(v) = &section.memory {
        memory(v).map_err(|e| fail("memory", v, e))?;
    }
    if let Some(v) = &section.cpus {
        cpus(v).map_err(|e| fail("cpus", v, e))?;
    }
    if let Some(v) = &section.pids {
        pids(v).map_err(|e| fail("pids", v, e))?;
    }
    if let Some(v) = &section.tmp_size {
        tmp_size(v).map_err(|e| fail("tmp_size", v, e))?;
    }
    Ok(())
}

/// `"512M"`, `"2G"`, `"1.5GiB"`, `"4096"` or `4096`: bytes (binary units).
pub fn parse_size(text: &str) -> Option<u64> {
    let t = text.trim();
    let t = t.strip_suffix('B').unwrap_or(t);
    let t = t.strip_suffix('i').unwrap_or(t);
    let (digits, unit) = match t.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => (&t[..i], c.to_ascii_uppercase()),
        _ => (t, 'B'),
    };
    let shift = match unit {
        'B' => 0,
        'K' => 10,
        'M' => 20,
        'G' => 30,
        'T' => 40,
        _ => return None,
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return None;
    }
    let n: f64 = digits.parse().ok()?;
    let bytes = n * (1u64 << shift) as f64;
    (bytes.is_finite() && bytes >= 1.0 && bytes < u64::MAX as f64).then_some(bytes as u64)
}

fn memory(v: &RawValue) -> Result<u64, &'static str> {
    let bytes = match v {
        RawValue::Int(i) if *i > 0 => *i as u64,
        RawValue::Text(s) => parse_size(s).ok_or(SIZE_FORM)?,
        _ => return Err(SIZE_FORM),
    };
    if bytes < MIN_MEMORY {
        return Err("at least \"16M\" (less cannot start a shell)");
    }
    Ok(bytes)
}

fn cpus(v: &RawValue) -> Result<u32, &'static str> {
    const FORM: &str = "a number of CPUs greater than 0, such as 2 or 1.5";
    let n = match v {
        RawValue::Int(i) => *i as f64,
        RawValue::Float(f) => f.get(),
        RawValue::Text(s) => s.trim().parse::<f64>().map_err(|_| FORM)?,
    };
    if !(n.is_finite() && n > 0.0 && n <= 1024.0) {
        return Err(FORM);
    }
    let milli = (n * 1000.0).round() as u32;
    if milli == 0 {
        return Err(FORM);
    }
    Ok(milli)
}

fn pids(v: &RawValue) -> Result<u64, &'static str> {
    const FORM: &str = "a whole number of processes from 16 to 4194304";
    match v {
        RawValue::Int(i) if (16..=4_194_304).contains(i) => Ok(*i as u64),
        _ => Err(FORM),
    }
}

fn tmp_size(v: &RawValue) -> Result<TmpSize, &'static str> {
    const FORM: &str = "a size such as \"1G\", or a share of RAM such as \"25%\"";
    match v {
        RawValue::Text(s) if s.trim().ends_with('%') => {
            let pct: u8 = s.trim().trim_end_matches('%').parse().map_err(|_| FORM)?;
            if (1..=100).contains(&pct) {
                Ok(TmpSize::Percent(pct))
            } else {
                Err(FORM)
            }
        }
        RawValue::Text(s) => parse_size(s).map(TmpSize::Bytes).ok_or(FORM),
        RawValue::Int(i) if *i > 0 => Ok(TmpSize::Bytes(*i as u64)),
        _ => Err(FORM),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(s: &str) -> RawValue {
        RawValue::Text(s.into())
    }

    #[test]
    fn sizes_parse_in_binary_units() {
        assert_eq!(parse_size("512M"), Some(512 << 20));
        assert_eq!(parse_size("2G"), Some(2 << 30));
        assert_eq!(parse_size("2GiB"), Some(2 << 30));
        assert_eq!(parse_size("1.5g"), Some(3 << 29));
        assert_eq!(parse_size("4096"), Some(4096));
        for bad in ["lots", "", "G", "-1G", "1X", "1.2.3M", "0"] {
            assert_eq!(parse_size(bad), None, "{bad}");
        }
    }

    #[test]
    fn each_key_refuses_what_it_cannot_mean() {
        assert!(memory(&text("lots")).is_err());
        assert!(memory(&text("1M")).is_err(), "below the floor");
        assert_eq!(memory(&RawValue::Int(1 << 30)), Ok(1 << 30));
        assert!(cpus(&RawValue::Int(0)).is_err());
        assert!(cpus(&RawValue::Int(-2)).is_err());
        assert_eq!(cpus(&RawValue::Float(Float(1.5f64.to_bits()))), Ok(1500));
        assert_eq!(cpus(&text("2")), Ok(2000));
        assert!(pids(&RawValue::Int(-1)).is_err());
        assert!(
            pids(&RawValue::Int(8)).is_err(),
            "too few to run a shell and a tool"
        );
        assert_eq!(pids(&RawValue::Int(512)), Ok(512));
        assert_eq!(tmp_size(&text("25%")), Ok(TmpSize::Percent(25)));
        assert!(tmp_size(&text("0%")).is_err());
        assert!(tmp_size(&text("101%")).is_err());
        assert_eq!(tmp_size(&text("1G")), Ok(TmpSize::Bytes(1 << 30)));
    }
}
