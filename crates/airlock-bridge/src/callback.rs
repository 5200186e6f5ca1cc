//! OAuth loopback callbacks through `/open`.
//!
//! A login that listens on `http://localhost:<port>` inside the sandbox opens the provider's page
//! with that address as its callback (`redirect_uri=http%3A%2F%2Flocalhost%3A1455%2F...`). The
//! host's browser is sent back to the *host's* `localhost:<port>`, where nothing listens. So when
//! a scoped `/open` URL names such a callback in its `redirect_uri`, `redirect_url` or `callback`
//! query parameter, the daemon asks that sandbox's supervisor, over the control socket its
//! session record names, for a callback forward of that port (`callback <port>`): bounded in
//! time and number by the supervisor (`airlock_sandbox::ports`). The URL itself still has to pass
//! the sandbox's `/open` scope; only the callback's host and port are logged, never the query.

use std::path::Path;
use std::time::Duration;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use crate::scope::SessionScope;

/// The query parameters that may name a loopback callback.
pub const PARAMS: [&str; 3] = ["redirect_uri", "redirect_url", "callback"];

/// How long the supervisor may take to answer.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(3);

/// A loopback callback a URL names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Callback {
    /// `localhost` or `127.0.0.1`, as the callback wrote it.
    pub host: String,
    pub port: u16,
}

impl Callback {
    /// `localhost:1455`, for the audit log and messages.
    pub fn shown(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }
}

/// The first of [`PARAMS`] whose (URL-decoded) value is `http://localhost:<port>/…` or
/// `http://127.0.0.1:<port>/…` with the port written out.
pub fn of_url(url: &url::Url) -> Option<Callback> {
    let value = url
        .query_pairs()
        .find(|(key, _)| PARAMS.contains(&key.as_ref()))?
        .1;
    let target = url::Url::parse(&value).ok()?;
    let host = target.host_str()?;
    let loopback = host == "localhost" || host == "127.0.0.1";
    let port = target.port()?;
    (target.scheme() == "http" && loopback).then(|| Callback {
        host: host.to_owned(),
        port,
    })
}

/// Asks `scope`'s supervisor for a callback forward of `port`: its `ok` text, or why not.
pub async fn forward(scope: &SessionScope, port: u16) -> Result<String, String> {
    if scope.network == airlock_config::NetworkMode::Host {
        return Ok(
            "the sandbox shares the host's network: its server is on the host's loopback \
                   already"
                .into(),
        );
    }
    let Some(control) = &scope.control else {
        return Err("this session has no control socket".into());
    };
    match tokio::time::timeout(ANSWER_TIMEOUT, ask(control, scope.pid, port)).await {
        Ok(answer) => answer,
        Err(_) => Err("the session's supervisor did not answer in time".into()),
    }
}

async fn ask(control: &Path, pid: u32, port: u16) -> Result<String, String> {
    let mut stream = tokio::net::UnixStream::connect(control)
        .await
        .map_err(|e| format!("cannot reach the session's control socket: {e}"))?;
    // The socket must be served by the session's own supervisor, not whatever holds the name.
    let served_by = stream.peer_cred().ok().and_then(|c| c.pid());
    if served_by != Some(pid as i32) {
        return Err("the control socket is not served by this session's supervisor".into());
    }
    stream
        .write_all(format!("callback {port}\n").as_bytes())
        .await
        .map_err(|e| format!("cannot ask the session's supervisor: {e}"))?;
    let mut answer = Vec::new();
    let _ = (&mut stream).take(4096).read_to_end(&mut answer).await;
    let text = String::from_utf8_lossy(&answer);
    let line = text.trim_end_matches('\n');
    match (line.strip_prefix("ok "), line.strip_prefix("error ")) {
        (Some(ok), _) => Ok(ok.to_owned()),
        (_, Some(reason)) => Err(airlock_config::printable(reason)),
        _ => Err("the session's supervisor gave no valid answer".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(s: &str) -> Option<Callback> {
        of_url(&url::Url::parse(s).unwrap())
    }

    #[test]
    fn loopback_callbacks_are_found_url_decoded() {
        let cb = |host: &str, port| {
            Some(Callback {
                host: host.into(),
                port,
            })
        };
        assert_eq!(
            of(
                "https://auth.openai.com/oauth/authorize?client_id=x&redirect_uri=http%3A%2F%2Flocalhost%3A1455%2Fauth%2Fcallback&state=s"
            ),
            cb("localhost", 1455)
        );
        assert_eq!(
            of("https://p.example/a?redirect_url=http://127.0.0.1:8085/cb"),
            cb("127.0.0.1", 8085)
        );
        assert_eq!(
            of("https://p.example/a?callback=http%3A%2F%2FLOCALHOST%3A9000"),
            cb("localhost", 9000)
        );
        assert_eq!(
            of("https://p.example/a?callback=http%3A%2F%2F127.1%3A9000"),
            cb("127.0.0.1", 9000)
        );
        for none in [
            "https://p.example/a",
            "https://p.example/a?redirect_uri=https%3A%2F%2Fp.example%2Fcb",
            "https://p.example/a?redirect_uri=https%3A%2F%2Flocalhost%3A1455%2F",
            "https://p.example/a?redirect_uri=http%3A%2F%2Flocalhost%2Fcb",
            "https://p.example/a?redirect_uri=http%3A%2F%2F10.0.0.1%3A1455%2F",
            "https://p.example/a?redirect_uri=http%3A%2F%2Flocalhost.evil.example%3A1455%2F",
            "https://p.example/a?redirect_uri=http%3A%2F%2Fevil.example%2F%40localhost%3A1455",
            "https://p.example/a?return_to=http%3A%2F%2Flocalhost%3A1455%2F",
            "https://p.example/a?redirect_uri=http%253A%252F%252Flocalhost%253A1455",
        ] {
            assert_eq!(of(none), None, "{none}");
        }
    }
}
