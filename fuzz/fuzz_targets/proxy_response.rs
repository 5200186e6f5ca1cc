//! The egress proxy's rewrite of an upstream server's response head (`proxy/response.rs`): bytes
//! from any server on the internet the policy allows, read through the first CRLF CRLF.
//!
//! The first input byte says whether the client asked to upgrade; the rest is the upstream's bytes.
//! Beyond "no panic": a head that is passed on is the whole head that was read (nothing between the
//! parsed end and the CRLF CRLF is silently dropped), and what the client gets is a well-formed
//! CRLF head with the same status, no hop-by-hop or proxy headers, `Connection: close` on a final
//! head (`upgrade` and the `Upgrade` header only on a switch that was asked for), none on a 1xx.
#![no_main]

use airlock_egress::fuzzing;
use airlock_fuzz::{crlf_head_end, has_hop_by_hop, values};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&flags, bytes)) = data.split_first() else {
        return;
    };
    let upgrade = flags & 1 == 1;
    // As relay_heads reads it: through the first CRLF CRLF.
    let Some(end) = bytes.windows(4).position(|w| w == b"\r\n\r\n") else {
        return;
    };
    let head = &bytes[..end + 4];
    let Some((status, out)) = fuzzing::response_head(head, upgrade) else {
        return;
    };
    let shown = String::from_utf8_lossy(&out);

    // The parser read the whole head the proxy consumed.
    let mut headers = vec![httparse::EMPTY_HEADER; fuzzing::MAX_RESPONSE_HEADERS];
    let mut original = httparse::Response::new(&mut headers);
    assert_eq!(
        original.parse(head),
        Ok(httparse::Status::Complete(head.len())),
        "accepted head {:?} was not read to its end",
        String::from_utf8_lossy(head)
    );

    assert!(
        out.starts_with(format!("HTTP/1.1 {status} ").as_bytes()),
        "{shown}"
    );
    assert_eq!(crlf_head_end(&out), Ok(Some(out.len())), "{shown}");
    let mut headers = vec![httparse::EMPTY_HEADER; fuzzing::MAX_RESPONSE_HEADERS + 1];
    let mut response = httparse::Response::new(&mut headers);
    assert_eq!(
        response.parse(&out),
        Ok(httparse::Status::Complete(out.len())),
        "{shown}"
    );
    assert_eq!(response.code, Some(status));
    let headers = response.headers;
    assert_eq!(has_hop_by_hop(headers), None, "{shown}");
    let switching = upgrade && status == 101;
    let connection = values(headers, "connection");
    if switching {
        assert_eq!(connection, [&b"upgrade"[..]], "{shown}");
    } else if (100..200).contains(&status) {
        assert!(connection.is_empty(), "{shown}");
        assert!(values(headers, "upgrade").is_empty(), "{shown}");
    } else {
        assert_eq!(connection, [&b"close"[..]], "{shown}");
        assert!(values(headers, "upgrade").is_empty(), "{shown}");
    }
});
