//! The bearer token: generated at install, read by the daemon and the shims, compared in constant time.

use std::fmt;
use std::io::{self, Write as _};
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use subtle::ConstantTimeEq as _;

/// Why a token file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    #[error("bridge token {path} does not exist; run `airlock bridge install` to create it")]
    Missing { path: PathBuf },
    #[error("cannot read bridge token {path}: {source}")]
    Read { path: PathBuf, source: io::Error },
    #[error(
        "bridge token {path} is {problem}; expected 64 hex characters and a newline. \
         Run `airlock bridge uninstall` and `airlock bridge install` to make a new one"
    )]
    Corrupt { path: PathBuf, problem: String },
    #[error("cannot write bridge token {path}: {source}")]
    Write { path: PathBuf, source: io::Error },
}

/// A validated token (64 lowercase hex characters). `Debug` and `Display` never show it.
#[derive(Clone, PartialEq, Eq)]
pub struct Token(String);

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token(<redacted>)")
    }
}

impl Token {
    /// 32 bytes from the OS random source, as hex.
    pub fn generate() -> io::Result<Token> {
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes).map_err(|e| io::Error::other(e.to_string()))?;
        Ok(Token(bytes.iter().map(|b| format!("{b:02x}")).collect()))
    }

    /// Parses a token file's contents: exactly 64 hex characters, optionally followed by one newline.
    pub fn parse(text: &[u8]) -> Result<Token, String> {
        let body = text.strip_suffix(b"\n").unwrap_or(text);
        if body.is_empty() {
            return Err("empty".into());
        }
        if body.len() != 64 {
            return Err(format!("{} bytes long", body.len()));
        }
        if !body.iter().all(u8::is_ascii_hexdigit) {
            return Err("not hexadecimal".into());
        }
        Ok(Token(String::from_utf8_lossy(body).to_ascii_lowercase()))
    }

    /// Reads and validates the token file.
    pub fn read(path: &Path) -> Result<Token, TokenError> {
        let bytes = std::fs::read(path).map_err(|source| match source.kind() {
            io::ErrorKind::NotFound => TokenError::Missing {
                path: path.to_owned(),
            },
            _ => TokenError::Read {
                path: path.to_owned(),
                source,
            },
        })?;
        Token::parse(&bytes).map_err(|problem| TokenError::Corrupt {
            path: path.to_owned(),
            problem,
        })
    }

    /// Writes the token atomically (a 0600 temp file in the same dir, renamed over `path`).
    pub fn write(&self, path: &Path) -> Result<(), TokenError> {
        let fail = |source| TokenError::Write {
            path: path.to_owned(),
            source,
        };
        let dir = path.parent().unwrap_or(Path::new("."));
        let mut file = tempfile::Builder::new()
            .prefix(".token-")
            .permissions(std::fs::Permissions::from_mode(0o600))
            .tempfile_in(dir)
            .map_err(fail)?;
        file.write_all(format!("{}\n", self.0).as_bytes())
            .and_then(|()| file.as_file().sync_all())
            .map_err(fail)?;
        file.persist(path).map_err(|e| fail(e.error))?;
        Ok(())
    }

    /// The token text, for the `Authorization` header. Never log it.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Whether `presented` is this token, in time independent of where they differ.
    pub fn matches(&self, presented: &[u8]) -> bool {
        self.0.as_bytes().ct_eq(presented).into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_tokens_parse_and_differ() {
        let a = Token::generate().unwrap();
        let b = Token::generate().unwrap();
        assert_ne!(a, b);
        assert_eq!(a.expose().len(), 64);
        assert_eq!(Token::parse(format!("{}\n", a.expose()).as_bytes()), Ok(a));
    }

    #[test]
    fn corrupt_tokens_are_refused() {
        assert_eq!(Token::parse(b""), Err("empty".into()));
        assert_eq!(Token::parse(b"\n"), Err("empty".into()));
        assert_eq!(Token::parse(b"abc\n"), Err("3 bytes long".into()));
        let not_hex = "g".repeat(64);
        assert_eq!(
            Token::parse(not_hex.as_bytes()),
            Err("not hexadecimal".into())
        );
        let two_newlines = format!("{}\n\n", "a".repeat(64));
        assert!(Token::parse(two_newlines.as_bytes()).is_err());
    }

    #[test]
    fn comparison_and_redaction() {
        let t = Token::parse("ab".repeat(32).as_bytes()).unwrap();
        assert!(t.matches("ab".repeat(32).as_bytes()));
        assert!(!t.matches("ab".repeat(31).as_bytes()));
        assert!(!t.matches("ba".repeat(32).as_bytes()));
        assert_eq!(format!("{t:?}"), "Token(<redacted>)");
    }

    #[test]
    fn write_is_0600_and_readable() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        let t = Token::generate().unwrap();
        t.write(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(Token::read(&path).unwrap(), t);
        std::fs::write(&path, b"").unwrap();
        let err = Token::read(&path).unwrap_err().to_string();
        assert!(
            err.contains("is empty") && err.contains("airlock bridge install"),
            "{err}"
        );
    }
}
