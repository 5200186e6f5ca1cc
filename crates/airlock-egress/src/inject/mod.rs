//! Credential injection: for the hosts a `[network.credentials.<name>]` rule names, the proxy
//! ends the sandbox's TLS with a certificate of the session's own CA ([`ca`]), sets the rule's
//! header to the real value read on the host ([`source`]), and sends the request on to the real
//! server over TLS checked against the host's trust store. Every other host stays an opaque
//! CONNECT tunnel. The value never enters the sandbox: it sees only the placeholder.

mod ca;
mod source;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use airlock_config::credentials::Credential;
use base64::Engine as _;
use hyper::header::{HeaderMap, HeaderName, HeaderValue};
use rustls::crypto::CryptoProvider;

pub use ca::SessionCa;
pub use source::{COMMAND_TTL, Source};

/// The rules of one session, its CA, and the TLS config for the real servers.
pub struct Injector {
    ca: SessionCa,
    rules: Vec<Rule>,
    upstream: Arc<rustls::ClientConfig>,
}

impl std::fmt::Debug for Injector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.rules.iter().map(|r| r.name.as_str()).collect();
        f.debug_struct("Injector").field("rules", &names).finish()
    }
}

/// One rule, ready to apply.
#[derive(Debug)]
pub struct Rule {
    pub name: String,
    hosts: Vec<String>,
    header: HeaderName,
    format: String,
    placeholder: String,
    source: Source,
}

/// The crypto both TLS sides use (ring, no process-wide default installed).
pub(crate) fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

impl Injector {
    /// The rules `credentials` for the sandbox `sandbox`, with a new CA. `env` is the host's
    /// environment at start (for `env` sources), `home` the host's home (for `~/` in files).
    /// The real servers' certificates are checked against the host's trust store (the system's,
    /// or `SSL_CERT_FILE` / `SSL_CERT_DIR` when set).
    pub fn new(
        sandbox: &str,
        credentials: &[Credential],
        env: &BTreeMap<String, String>,
        home: &Path,
    ) -> Result<Injector, String> {
        let ca = SessionCa::new(sandbox).map_err(|e| format!("cannot make the session CA: {e}"))?;
        let mut rules = Vec::new();
        for c in credentials {
            rules.push(Rule {
                name: c.name.clone(),
                hosts: c.hosts.clone(),
                header: HeaderName::from_bytes(c.header.as_bytes())
                    .map_err(|e| format!("[network.credentials.{}] header: {e}", c.name))?,
                format: c.value_format.clone(),
                placeholder: c.placeholder.clone(),
                source: Source::new(&c.source, env, home),
            });
        }
        let mut roots = rustls::RootCertStore::empty();
        let native = rustls_native_certs::load_native_certs();
        for cert in native.certs {
            let _ = roots.add(cert);
        }
        if roots.is_empty() {
            return Err(
                "no trusted certificate found on the host (the system store, SSL_CERT_FILE, \
                 SSL_CERT_DIR), so no real server could be checked; install ca-certificates"
                    .into(),
            );
        }
        let mut upstream = rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_root_certificates(roots)
            .with_no_client_auth();
        upstream.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Injector {
            ca,
            rules,
            upstream: Arc::new(upstream),
        })
    }

    /// The session CA's certificate (PEM), to trust inside.
    pub fn ca_pem(&self) -> &str {
        self.ca.cert_pem()
    }

    /// Whether a rule names `host`: its CONNECT is served here, not tunnelled.
    pub fn covers(&self, host: &str) -> bool {
        self.rules.iter().any(|r| r.hosts.iter().any(|h| h == host))
    }

    pub(crate) fn rules_for<'a>(&'a self, host: &'a str) -> impl Iterator<Item = &'a Rule> + 'a {
        self.rules
            .iter()
            .filter(move |r| r.hosts.iter().any(|h| h == host))
    }

    pub(crate) fn ca(&self) -> &SessionCa {
        &self.ca
    }

    pub(crate) fn upstream_tls(&self) -> Arc<rustls::ClientConfig> {
        self.upstream.clone()
    }
}

impl Rule {
    /// Sets the rule's header in `headers`: to the formatted real value when the request carries
    /// the placeholder there (as written, or inside a `Basic` value) or no such header at all; a
    /// header with another value (the sandbox's own credential) is left alone. `Err` names why
    /// the value could not be read (then nothing may be sent upstream).
    pub fn apply(&self, headers: &mut HeaderMap) -> Result<bool, String> {
        let present: Vec<&HeaderValue> = headers.get_all(&self.header).iter().collect();
        let carries = present.iter().any(|v| self.carries_placeholder(v));
        if !present.is_empty() && !carries {
            return Ok(false);
        }
        let value = self.source.read()?;
        let formatted = format_value(&self.format, &value);
        let mut header = HeaderValue::from_str(&formatted)
            .map_err(|_| "the value cannot be sent in a header".to_owned())?;
        header.set_sensitive(true);
        headers.remove(&self.header);
        headers.insert(self.header.clone(), header);
        Ok(true)
    }

    fn carries_placeholder(&self, value: &HeaderValue) -> bool {
        let text = String::from_utf8_lossy(value.as_bytes());
        if text.contains(&self.placeholder) {
            return true;
        }
        let basic = text
            .strip_prefix("Basic ")
            .or_else(|| text.strip_prefix("basic "));
        basic
            .and_then(|b64| {
                base64::engine::general_purpose::STANDARD
                    .decode(b64.trim())
                    .ok()
            })
            .is_some_and(|plain| String::from_utf8_lossy(&plain).contains(&self.placeholder))
    }
}

/// `format` with `{value}` replaced, or `{basic:USER}` replaced by base64 of `USER:value`.
fn format_value(format: &str, value: &str) -> String {
    if let Some((before, rest)) = format.split_once("{basic:")
        && let Some((user, after)) = rest.split_once('}')
    {
        let encoded = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{value}"));
        return format!("{before}{encoded}{after}");
    }
    format.replacen("{value}", value, 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use airlock_config::credentials::CredentialSource;

    fn rule(format: &str, header: &str) -> Rule {
        Rule {
            name: "t".into(),
            hosts: vec!["api.test".into()],
            header: HeaderName::from_bytes(header.as_bytes()).unwrap(),
            format: format.into(),
            placeholder: "airlock-placeholder".into(),
            source: Source::new(
                &CredentialSource::Env("K".into()),
                &[("K".to_owned(), "sk-real".to_owned())].into(),
                Path::new("/"),
            ),
        }
    }

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (k, v) in pairs {
            map.append(
                HeaderName::from_bytes(k.as_bytes()).unwrap(),
                HeaderValue::from_str(v).unwrap(),
            );
        }
        map
    }

    #[test]
    fn the_placeholder_is_replaced_a_missing_header_added_and_another_value_kept() {
        let r = rule("{value}", "x-api-key");
        let mut h = headers(&[("x-api-key", "airlock-placeholder")]);
        assert!(r.apply(&mut h).unwrap());
        assert_eq!(h["x-api-key"], "sk-real");
        assert!(h["x-api-key"].is_sensitive());
        let mut h = headers(&[]);
        assert!(r.apply(&mut h).unwrap());
        assert_eq!(h["x-api-key"], "sk-real");
        let mut h = headers(&[("x-api-key", "sk-the-sandboxs-own")]);
        assert!(!r.apply(&mut h).unwrap());
        assert_eq!(h["x-api-key"], "sk-the-sandboxs-own");
        // Two headers, one with the placeholder: one header with the value.
        let mut h = headers(&[("x-api-key", "a"), ("x-api-key", "airlock-placeholder")]);
        r.apply(&mut h).unwrap();
        assert_eq!(h.get_all("x-api-key").iter().count(), 1);
        let bearer = rule("Bearer {value}", "authorization");
        let mut h = headers(&[("authorization", "Bearer airlock-placeholder")]);
        bearer.apply(&mut h).unwrap();
        assert_eq!(h["authorization"], "Bearer sk-real");
    }

    #[test]
    fn basic_credentials_carry_the_placeholder_inside_their_base64() {
        let r = rule("Basic {basic:x-access-token}", "authorization");
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        let sent = format!("Basic {}", b64("x-access-token:airlock-placeholder"));
        let mut h = headers(&[("authorization", &sent)]);
        assert!(r.apply(&mut h).unwrap());
        assert_eq!(
            h["authorization"].to_str().unwrap(),
            format!("Basic {}", b64("x-access-token:sk-real"))
        );
    }

    #[test]
    fn a_source_that_fails_sends_nothing() {
        let mut r = rule("{value}", "x-api-key");
        r.source = Source::new(
            &CredentialSource::Env("UNSET".into()),
            &BTreeMap::new(),
            Path::new("/"),
        );
        let mut h = headers(&[("x-api-key", "airlock-placeholder")]);
        let err = r.apply(&mut h).unwrap_err();
        assert!(err.contains("UNSET"), "{err}");
    }
}
