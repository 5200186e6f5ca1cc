//! The egress proxy's chunked request-body relay (`proxy/forward.rs`): a sandboxed client's body
//! bytes after a `Transfer-Encoding: chunked` head, re-framed for the upstream server.
//!
//! Beyond "no panic": what is sent upstream is a normal-form chunked body (lower-case hex sizes
//! without leading zeros or extensions, CRLF after every size and every chunk, no trailers) that
//! ends exactly at its `0\r\n\r\n`, and every chunk's data was in the client's bytes, in order.
#![no_main]

use airlock_egress::fuzzing;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(out) = fuzzing::rechunk(data) else {
        return;
    };
    let mut rest = &out[..];
    let mut searched_from = 0;
    loop {
        let line_end = rest
            .windows(2)
            .position(|w| w == b"\r\n")
            .expect("a size line ends with CRLF");
        let digits = &rest[..line_end];
        assert!(
            !digits.is_empty()
                && digits.len() <= 15
                && digits
                    .iter()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b))
                && (digits == b"0" || digits[0] != b'0'),
            "size line {:?}",
            String::from_utf8_lossy(digits)
        );
        let size = u64::from_str_radix(std::str::from_utf8(digits).unwrap(), 16).unwrap();
        rest = &rest[line_end + 2..];
        if size == 0 {
            assert_eq!(rest, b"\r\n", "the body goes on after its last chunk");
            return;
        }
        let size = usize::try_from(size).unwrap();
        assert!(rest.len() >= size + 2, "a chunk is cut short");
        let chunk = &rest[..size];
        assert_eq!(&rest[size..size + 2], b"\r\n");
        let at = data[searched_from..]
            .windows(size)
            .position(|w| w == chunk)
            .expect("chunk data comes from the client's bytes, in order");
        searched_from += at + size;
        rest = &rest[size + 2..];
    }
});
