//! The session's certificate authority: made in memory when the proxy starts, its private key
//! never written anywhere; its certificate is what the sandbox trusts. A leaf certificate per
//! credential host is made on first use and kept for the session.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rustls::ServerConfig;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// How long the certificates are valid: longer than any session, short enough to be worthless
/// after it (the key dies with the process anyway).
const VALID_DAYS: i64 = 30;

/// The CA and the TLS configs of the hosts it has signed for.
pub struct SessionCa {
    issuer: Issuer<'static, KeyPair>,
    cert_pem: String,
    servers: Mutex<HashMap<String, Arc<ServerConfig>>>,
}

impl std::fmt::Debug for SessionCa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SessionCa")
    }
}

/// From an hour ago (clocks differ a little) to [`VALID_DAYS`] ahead.
fn validity(params: &mut CertificateParams) {
    let now = time::OffsetDateTime::now_utc();
    params.not_before = now - time::Duration::hours(1);
    params.not_after = now + time::Duration::days(VALID_DAYS);
}

impl SessionCa {
    /// A new CA named after the sandbox (`airlock <sandbox> session CA`).
    pub fn new(sandbox: &str) -> Result<SessionCa, rcgen::Error> {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        let mut name = DistinguishedName::new();
        name.push(DnType::CommonName, format!("airlock {sandbox} session CA"));
        name.push(DnType::OrganizationName, "airlock");
        params.distinguished_name = name;
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        validity(&mut params);
        let cert = params.self_signed(&key)?;
        Ok(SessionCa {
            cert_pem: cert.pem(),
            issuer: Issuer::new(params, key),
            servers: Mutex::new(HashMap::new()),
        })
    }

    /// The CA certificate, PEM: what the sandbox trusts.
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// The TLS config that presents a certificate for `host` (made once per host), offering only
    /// HTTP/1.1.
    pub fn server_config(&self, host: &str) -> Result<Arc<ServerConfig>, String> {
        let mut servers = self.servers.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(config) = servers.get(host) {
            return Ok(config.clone());
        }
        let config = Arc::new(self.make_server(host).map_err(|e| e.to_string())?);
        servers.insert(host.to_owned(), config.clone());
        Ok(config)
    }

    fn make_server(&self, host: &str) -> Result<ServerConfig, Box<dyn std::error::Error>> {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(vec![host.to_owned()])?;
        params
            .distinguished_name
            .push(DnType::CommonName, host.to_owned());
        validity(&mut params);
        let cert = params.signed_by(&key, &self.issuer)?;
        let chain = vec![CertificateDer::from(cert.der().to_vec())];
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        let mut config = ServerConfig::builder_with_provider(super::provider())
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_single_cert(chain, key)?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(config)
    }
}
