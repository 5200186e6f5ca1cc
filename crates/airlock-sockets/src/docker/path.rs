//! The request target, normalised once, and the read-only allowlist.
//!
//! The engine (Go's `net/http` and gorilla/mux) takes the path before the first `?`,
//! percent-decodes it and matches anchored patterns such as `/images/{name:.*}/json`. A filter
//! that matched the raw bytes could be fooled by whatever the engine decodes or cleans
//! differently: `%2F` inside a segment, `/../`, `//`, `%252F` (decoded twice somewhere), a `?`
//! or `#` smuggled in an escape, absolute-form targets. So the target is decoded exactly once
//! here, everything ambiguous is refused, and the decoded path (which then contains no `%`,
//! `?`, `#`, dot segments or empty segments) is what goes upstream: the engine sees what was
//! matched.
//!
//! Matching is on whole segments. `{id}` is one segment `[A-Za-z0-9][A-Za-z0-9_.-]{0,127}`
//! (containers, networks, volumes, execs); `{name}` (images only: `docker.io/library/alpine:3`)
//! is one or more segments of `[A-Za-z0-9._:@-]`, 255 bytes at most, and the LAST segment
//! always names the endpoint, as the engine's anchored patterns do: `/images/x/get` is the
//! `get` endpoint (refused), and `/images/x/get/json` is the inspection of an image `x/get`.
//! Volume and network names are `{id}`s (one segment), as the engine's names are.

use super::{Denial, NOT_ALLOWED};

/// The longest request target accepted (414 above it).
pub const MAX_TARGET_BYTES: usize = 8 << 10;
const MAX_IMAGE_NAME: usize = 255;
const MAX_ID: usize = 128;

/// What an allowed pair does, beyond being read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    /// A GET/HEAD endpoint that only reads.
    Read,
    /// `POST /containers/{id}/exec`: the body is checked.
    ExecCreate,
    /// `POST /exec/{id}/start`, `POST /containers/{id}/attach`: may switch to a raw stream.
    Upgrade,
    /// `POST /exec/{id}/resize`, `POST /containers/{id}/resize`: a TTY's size.
    Resize,
}

/// A target once decoded: `version` (`/v1.47`, as given, or empty), `path` (decoded, after the
/// version), `query` (after the first raw `?`, unchanged).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Normalised {
    pub version: String,
    pub path: String,
    pub query: Option<String>,
}

impl Normalised {
    /// The version prefix and the decoded path: what a denial may quote to the client.
    pub fn full_path(&self) -> String {
        format!("{}{}", self.version, self.path)
    }

    /// What is sent upstream.
    pub fn path_and_query(&self) -> String {
        match &self.query {
            Some(q) => format!("{}{}?{q}", self.version, self.path),
            None => self.full_path(),
        }
    }
}

/// An allowed (method, target) pair.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Routed {
    pub normalised: Normalised,
    pub endpoint: Endpoint,
}

fn bad(reason: &'static str) -> Denial {
    Denial::new(400, reason)
}

fn visible(b: u8) -> bool {
    (0x21..=0x7e).contains(&b)
}

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// Decodes `raw` (a path, no `?`) once; an escape that yields `/`, `?`, `#` or `%` (an encoded
/// slash, or double encoding) or a byte that is not visible ASCII is refused.
fn decode_once(raw: &[u8]) -> Result<String, Denial> {
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        let b = if raw[i] == b'%' {
            let (Some(hi), Some(lo)) = (
                raw.get(i + 1).copied().and_then(hex),
                raw.get(i + 2).copied().and_then(hex),
            ) else {
                return Err(bad("a malformed percent-escape is refused"));
            };
            i += 3;
            let b = hi << 4 | lo;
            if matches!(b, b'/' | b'?' | b'#' | b'%') {
                return Err(bad("an encoded '/', '?', '#' or '%' is refused"));
            }
            b
        } else {
            i += 1;
            raw[i - 1]
        };
        if !visible(b) {
            return Err(bad("a control, space or non-ASCII byte is refused"));
        }
        out.push(b);
    }
    // Every byte is visible ASCII.
    String::from_utf8(out).map_err(|_| bad("a control, space or non-ASCII byte is refused"))
}

/// `vN.NN`: digits, a dot, digits.
fn is_version(segment: &str) -> bool {
    let Some((major, minor)) = segment
        .strip_prefix('v')
        .and_then(|rest| rest.split_once('.'))
    else {
        return false;
    };
    let digits = |s: &str| (1..=4).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_digit());
    digits(major) && digits(minor)
}

/// Normalises a request target (the second word of the request line).
pub fn normalise(target: &str) -> Result<Normalised, Denial> {
    if target.len() > MAX_TARGET_BYTES {
        return Err(Denial::new(414, "the request target is too long"));
    }
    if !target.starts_with('/') {
        return Err(bad("the request target must be origin-form"));
    }
    if !target.bytes().all(visible) {
        return Err(bad("a control, space or non-ASCII byte is refused"));
    }
    if target.contains('#') {
        return Err(bad("a fragment is refused"));
    }
    let (raw_path, query) = match target.split_once('?') {
        Some((p, q)) => (p, Some(q.to_owned())),
        None => (target, None),
    };
    let path = decode_once(raw_path.as_bytes())?;
    if path.len() > 1 && path.ends_with('/') {
        return Err(bad("a trailing slash is refused"));
    }
    let segments: Vec<&str> = path[1..].split('/').collect();
    if segments.iter().any(|s| s.is_empty()) {
        return Err(bad("an empty path segment is refused"));
    }
    if segments.iter().any(|s| *s == "." || *s == "..") {
        return Err(bad("a dot segment is refused"));
    }
    let (version, path) = if is_version(segments[0]) {
        let cut = 1 + segments[0].len();
        (path[..cut].to_owned(), path[cut..].to_owned())
    } else {
        (String::new(), path)
    };
    Ok(Normalised {
        version,
        path,
        query,
    })
}

/// `[A-Za-z0-9][A-Za-z0-9_.-]{0,127}`
fn is_id(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= MAX_ID
        && b[0].is_ascii_alphanumeric()
        && b.iter()
            .all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'-'))
}

/// One or more segments of `[A-Za-z0-9._:@-]`, 255 bytes at most joined with `/`.
fn is_image_name(segments: &[&str]) -> bool {
    if segments.is_empty() {
        return false;
    }
    let joined = segments.iter().map(|s| s.len() + 1).sum::<usize>() - 1;
    joined <= MAX_IMAGE_NAME
        && segments.iter().all(|s| {
            s.bytes()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b':' | b'@' | b'-'))
        })
}

fn read_endpoint(segments: &[&str]) -> bool {
    match segments {
        ["_ping"] | ["version"] | ["info"] | ["events"] | ["system", "df"] => true,
        ["containers", "json"] | ["images", "json"] | ["networks"] | ["volumes"] => true,
        [
            "containers",
            id,
            "json" | "logs" | "top" | "stats" | "changes",
        ] => is_id(id),
        ["networks", id] | ["volumes", id] | ["exec", id, "json"] => is_id(id),
        ["images", name @ .., "json" | "history"] => is_image_name(name),
        _ => false,
    }
}

fn post_endpoint(segments: &[&str]) -> Option<Endpoint> {
    let (id, endpoint) = match segments {
        ["containers", id, "exec"] => (id, Endpoint::ExecCreate),
        ["containers", id, "attach"] | ["exec", id, "start"] => (id, Endpoint::Upgrade),
        ["containers", id, "resize"] | ["exec", id, "resize"] => (id, Endpoint::Resize),
        _ => return None,
    };
    is_id(id).then_some(endpoint)
}

/// Normalises `target` and matches (`method`, path) against the allowlist. HEAD is allowed
/// wherever GET is; methods are case-sensitive, as the engine's are.
pub fn route(method: &str, target: &str) -> Result<Routed, Denial> {
    let normalised = normalise(target)?;
    let segments: Vec<&str> = match normalised.path.strip_prefix('/') {
        Some(rest) => rest.split('/').collect(),
        None => Vec::new(),
    };
    let endpoint = match method {
        "GET" | "HEAD" if read_endpoint(&segments) => Some(Endpoint::Read),
        "POST" => post_endpoint(&segments),
        _ => None,
    };
    match endpoint {
        Some(endpoint) => Ok(Routed {
            normalised,
            endpoint,
        }),
        None => Err(Denial::new(403, NOT_ALLOWED)),
    }
}
