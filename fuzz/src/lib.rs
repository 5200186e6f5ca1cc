//! Helpers shared by the fuzz targets: small specifications written independently of the parsers
//! they check.

/// What a strict HTTP/1.1 reader makes of `buf`: the length of the head through the first CRLF CRLF
/// (`Ok(None)` if there is none yet), or `Err(400)` if a line before that end is ended by a bare LF
/// or holds a CR not followed by LF. A CR as the very last byte may still be followed by LF.
pub fn crlf_head_end(buf: &[u8]) -> Result<Option<usize>, u16> {
    let end = buf.windows(4).position(|w| w == b"\r\n\r\n").map(|p| p + 4);
    let scan = &buf[..end.unwrap_or(buf.len())];
    let bare_lf = scan
        .iter()
        .enumerate()
        .any(|(i, &b)| b == b'\n' && (i == 0 || scan[i - 1] != b'\r'));
    let lone_cr = scan
        .iter()
        .enumerate()
        .any(|(i, &b)| b == b'\r' && scan.get(i + 1).is_some_and(|&next| next != b'\n'));
    if bare_lf || lone_cr {
        Err(400)
    } else {
        Ok(end)
    }
}

/// The values of every header named `name` (any case).
pub fn values<'h>(headers: &[httparse::Header<'h>], name: &str) -> Vec<&'h [u8]> {
    headers
        .iter()
        .filter(|h| h.name.eq_ignore_ascii_case(name))
        .map(|h| h.value)
        .collect()
}

/// Whether a header that must never cross the proxy (hop-by-hop, proxy credentials) is present.
pub fn has_hop_by_hop(headers: &[httparse::Header<'_>]) -> Option<String> {
    headers
        .iter()
        .map(|h| h.name.to_ascii_lowercase())
        .find(|n| matches!(n.as_str(), "keep-alive" | "te" | "trailer") || n.starts_with("proxy-"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_spec_of_a_head_end() {
        assert_eq!(crlf_head_end(b"GET / HTTP/1.1\r\n\r\nbody\n"), Ok(Some(18)));
        assert_eq!(crlf_head_end(b"GET / HTTP/1.1\r\nX: y\r"), Ok(None));
        assert_eq!(crlf_head_end(b"GET / HTTP/1.1\nX: y\r\n\r\n"), Err(400));
        assert_eq!(crlf_head_end(b"GET / HTTP/1.1\r\rX"), Err(400));
    }
}

/// The keys of the JSON object `json` holds, in order, repeats kept (serde_json's `Value` keeps
/// only the last of two): `None` when `json` is not exactly one object.
pub fn object_keys(json: &str) -> Option<Vec<String>> {
    use serde::de::{Deserializer as _, IgnoredAny, MapAccess, Visitor};
    struct Keys;
    impl<'de> Visitor<'de> for Keys {
        type Value = Vec<String>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("an object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Vec<String>, A::Error> {
            let mut keys = Vec::new();
            while let Some(key) = map.next_key::<String>()? {
                map.next_value::<IgnoredAny>()?;
                keys.push(key);
            }
            Ok(keys)
        }
    }
    let mut de = serde_json::Deserializer::from_str(json);
    let keys = (&mut de).deserialize_map(Keys).ok()?;
    de.end().ok()?;
    Some(keys)
}
