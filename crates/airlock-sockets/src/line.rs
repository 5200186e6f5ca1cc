//! Reading one newline-terminated request, capped.

use std::io::{self, Read};

/// Why no request line came.
#[derive(Debug, PartialEq, Eq)]
pub enum LineError {
    /// More than the cap without a newline.
    TooLong,
    /// The peer closed before a newline (or sent nothing).
    Closed,
    /// The deadline passed (the read timeout set on the stream).
    TimedOut,
}

/// Reads until the first `\n` (included in the result), at most `cap` bytes; what follows it is
/// not read. The stream's read timeout is the deadline for each read.
pub fn read_line(stream: &mut impl Read, cap: usize) -> Result<Vec<u8>, LineError> {
    let mut line = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        let room = (cap + 1).saturating_sub(line.len()).min(buf.len());
        if room == 0 {
            return Err(LineError::TooLong);
        }
        // Byte by byte would be slow; reading ahead is fine because one connection carries one
        // request: anything after the newline is ignored.
        match stream.read(&mut buf[..room]) {
            Ok(0) => return Err(LineError::Closed),
            Ok(n) => {
                if let Some(end) = buf[..n].iter().position(|&b| b == b'\n') {
                    line.extend_from_slice(&buf[..=end]);
                    if line.len() > cap {
                        return Err(LineError::TooLong);
                    }
                    return Ok(line);
                }
                line.extend_from_slice(&buf[..n]);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                return Err(LineError::TimedOut);
            }
            Err(_) => return Err(LineError::Closed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_within_the_cap() {
        let mut input: &[u8] = b"{\"a\":1}\nrest";
        assert_eq!(read_line(&mut input, 64), Ok(b"{\"a\":1}\n".to_vec()));
        let mut long: &[u8] = &[b'x'; 100];
        assert_eq!(read_line(&mut long, 64), Err(LineError::TooLong));
        let mut exact: Vec<u8> = vec![b'x'; 63];
        exact.push(b'\n');
        assert_eq!(
            read_line(&mut exact.as_slice(), 64).map(|l| l.len()),
            Ok(64)
        );
        let mut half: &[u8] = b"{\"a\":";
        assert_eq!(read_line(&mut half, 64), Err(LineError::Closed));
    }
}
