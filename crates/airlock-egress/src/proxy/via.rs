//! An upstream proxy: on a network that reaches the internet only through a company proxy
//! (`HTTPS_PROXY` on the host, or `[network] upstream_proxy`), allowed traffic goes through it.
//!
//! The policy is still decided here, on the host the sandbox asked for; only the connection is
//! made through the upstream proxy, with `CONNECT host:port` (for plain HTTP too: the request then
//! travels over that tunnel as it would over a direct connection). Names the policy maps with
//! `resolve`, IP addresses and names `NO_PROXY` lists are reached directly.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::host::Host;

use super::reply::Refusal;

/// The largest response head read from the upstream proxy.
const MAX_HEAD: usize = 16 * 1024;

/// Where allowed traffic goes instead of straight out.
#[derive(Clone, PartialEq, Eq)]
pub struct UpstreamProxy {
    host: String,
    port: u16,
    /// `Basic <base64(user:password)>`, from the URL's userinfo.
    authorization: Option<String>,
    /// `NO_PROXY` entries: a name (and its subdomains), `.suffix`, or `*`.
    no_proxy: Vec<String>,
}

impl std::fmt::Debug for UpstreamProxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the credentials.
        write!(f, "UpstreamProxy({})", self.shown())
    }
}

impl UpstreamProxy {
    /// Parses `http://[user:password@]host[:port][/]` (the port defaults to 80; `https://` proxies
    /// and other schemes are refused) and a `NO_PROXY` list.
    pub fn parse(url: &str, no_proxy: &str) -> Result<UpstreamProxy, String> {
        let shown = airlock_config::without_userinfo(url);
        let rest = url.strip_prefix("http://").ok_or_else(|| {
            format!("upstream proxy {shown:?}: only http:// proxies are supported (the tunnel inside is TLS already)")
        })?;
        let rest = rest.trim_end_matches('/');
        let (userinfo, authority) = match rest.rsplit_once('@') {
            Some((userinfo, authority)) => (Some(userinfo), authority),
            None => (None, rest),
        };
        if authority.is_empty() || authority.contains('/') {
            return Err(format!(
                "upstream proxy {shown:?}: write it as http://HOST:PORT"
            ));
        }
        let (host, port) = match authority.rsplit_once(':') {
            Some((host, port)) if !host.ends_with(']') || authority.starts_with('[') => {
                let port = port
                    .parse::<u16>()
                    .map_err(|_| format!("upstream proxy {shown:?}: {port:?} is not a port"))?;
                (host, port)
            }
            _ => (authority, 80),
        };
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if host.is_empty() {
            return Err(format!("upstream proxy {shown:?}: no host"));
        }
        let authorization = userinfo.map(|u| {
            use base64::Engine;
            let decoded = percent_decode(u);
            format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(decoded)
            )
        });
        Ok(UpstreamProxy {
            host: host.to_owned(),
            port,
            authorization,
            no_proxy: no_proxy
                .split(',')
                .map(|e| e.trim().to_ascii_lowercase())
                .filter(|e| !e.is_empty())
                .collect(),
        })
    }

    /// `host:port` of the proxy, for messages.
    pub fn shown(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }

    /// Whether `host` goes through this proxy (a name not listed in `NO_PROXY`).
    pub(crate) fn applies_to(&self, host: &Host) -> bool {
        let Host::Name(name) = host else {
            return false;
        };
        let name = name.to_ascii_lowercase();
        !self.no_proxy.iter().any(|entry| {
            let entry = entry.trim_start_matches("*.").trim_start_matches('.');
            entry == "*" || name == entry || name.ends_with(&format!(".{entry}"))
        })
    }

    /// A connection to `host:port` through the proxy: `CONNECT`, then its `2xx`.
    pub(crate) async fn connect(
        &self,
        host: &Host,
        port: u16,
        timeout: Duration,
    ) -> Result<TcpStream, Refusal> {
        let target = host.to_authority(port);
        let attempt = async {
            let mut stream = TcpStream::connect((self.host.as_str(), self.port))
                .await
                .map_err(|e| {
                    Refusal::new(
                        502,
                        format!(
                            "cannot reach the upstream proxy {} for {target}: {e}",
                            self.shown()
                        ),
                    )
                })?;
            let _ = stream.set_nodelay(true);
            let mut head = format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n");
            if let Some(auth) = &self.authorization {
                head.push_str(&format!("Proxy-Authorization: {auth}\r\n"));
            }
            head.push_str("\r\n");
            let io = |e: std::io::Error| {
                Refusal::new(
                    502,
                    format!("the upstream proxy {} for {target}: {e}", self.shown()),
                )
            };
            stream.write_all(head.as_bytes()).await.map_err(io)?;
            let status = read_status(&mut stream).await.map_err(io)?;
            if !(200..300).contains(&status) {
                return Err(Refusal::new(
                    502,
                    format!(
                        "the upstream proxy {} answered {status} to CONNECT {target}",
                        self.shown()
                    ),
                ));
            }
            Ok(stream)
        };
        super::upstream::within(timeout, attempt, || {
            format!(
                "the upstream proxy {} did not connect {target} within {} s",
                self.shown(),
                timeout.as_secs_f32()
            )
        })
        .await
    }
}

/// Reads the proxy's response head byte by byte (nothing past it may be consumed: it belongs to
/// the tunnel) and returns its status code.
async fn read_status(stream: &mut TcpStream) -> std::io::Result<u16> {
    let mut head = Vec::with_capacity(256);
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") && !head.ends_with(b"\n\n") {
        if head.len() >= MAX_HEAD || stream.read(&mut byte).await? == 0 {
            return Err(std::io::Error::other("no complete response head"));
        }
        head.push(byte[0]);
    }
    let line = head.split(|b| *b == b'\n').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let mut parts = line.split_whitespace();
    match (
        parts.next(),
        parts.next().and_then(|s| s.parse::<u16>().ok()),
    ) {
        (Some(version), Some(status)) if version.starts_with("HTTP/1.") => Ok(status),
        _ => Err(std::io::Error::other(format!(
            "not an HTTP response: {:?}",
            line.trim()
        ))),
    }
}

/// `%XX` escapes in a URL's userinfo, decoded.
fn percent_decode(text: &str) -> Vec<u8> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%'
            && let (Some(h), Some(l)) = (
                bytes.get(i + 1).copied().and_then(hex),
                bytes.get(i + 2).copied().and_then(hex),
            )
        {
            out.push((h * 16 + l) as u8);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_parse_with_credentials_kept_out_of_messages() {
        let p = UpstreamProxy::parse("http://u%40corp:p%3Ass@proxy.corp:3128/", "").unwrap();
        assert_eq!(p.shown(), "proxy.corp:3128");
        assert_eq!(p.authorization.as_deref(), Some("Basic dUBjb3JwOnA6c3M="));
        assert!(!format!("{p:?}").contains("p%3Ass"));
        assert_eq!(UpstreamProxy::parse("http://proxy", "").unwrap().port, 80);
        for bad in [
            "https://proxy:1",
            "proxy:1",
            "http://",
            "http://p:x",
            "http://p:1/path",
        ] {
            let err = UpstreamProxy::parse(bad, "").unwrap_err();
            assert!(!err.contains("secret"), "{err}");
        }
        let err = UpstreamProxy::parse("socks5://user:secret@p:1", "").unwrap_err();
        assert!(!err.contains("secret") && err.contains("***"), "{err}");
    }

    #[test]
    fn no_proxy_names_and_suffixes_go_direct() {
        let p = UpstreamProxy::parse("http://p:1", "localhost, .internal,corp.example").unwrap();
        let name = |n: &str| Host::Name(n.into());
        assert!(p.applies_to(&name("api.github.com")));
        assert!(!p.applies_to(&name("db.internal")));
        assert!(!p.applies_to(&name("corp.example")));
        assert!(!p.applies_to(&name("git.corp.example")));
        assert!(p.applies_to(&name("notcorp.example")));
        assert!(!p.applies_to(&Host::Ip("10.0.0.1".parse().unwrap())));
        let all = UpstreamProxy::parse("http://p:1", "*").unwrap();
        assert!(!all.applies_to(&name("api.github.com")));
    }
}
