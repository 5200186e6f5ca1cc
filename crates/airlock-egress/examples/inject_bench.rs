//! What credential injection adds to one HTTPS request, against a plain CONNECT tunnel through
//! the same proxy (scripts/bench-credentials; docs/benchmarks.md "Credential injection").
//!
//! A local TLS server (its certificate, for `inject.test` and `tunnel.test`, signed by a test CA the
//! script made and names in `SSL_CERT_FILE`, so the injector trusts it upstream) answers `ok`. The
//! proxy runs with one rule for `inject.test`. Each round makes one request of each kind, in
//! alternating order, each on a new connection as curl does: CONNECT, TLS, GET, the whole answer.
//!
//! Usage: inject_bench CERT KEY CA ROUNDS   (prints p50, p90, mean of both and the difference)

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use airlock_config::credentials::{Credential, CredentialSource};
use airlock_config::{EgressPreset, EgressRule, EgressSettings};
use airlock_egress::inject::Injector;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, cert, key, ca, rounds] = &args[..] else {
        eprintln!("usage: inject_bench CERT KEY CA ROUNDS");
        std::process::exit(2);
    };
    let rounds: usize = rounds.parse().expect("ROUNDS");
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let certs: Vec<CertificateDer<'static>> =
        rustls_pemfile_certs(&std::fs::read(cert).expect("cert"));
    let key = {
        use rustls::pki_types::pem::PemObject as _;
        PrivateKeyDer::from_pem_slice(&std::fs::read(key).expect("key")).expect("key")
    };
    let server = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap();
    // The server on a thread of its own, as a real server is another process.
    let (port_tx, port_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(serve(server, port_tx));
    });
    let port: u16 = port_rx.recv().unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        let loopback: std::net::IpAddr = "127.0.0.1".parse().unwrap();
        let settings = EgressSettings {
            preset: EgressPreset::DenyAll,
            allow: ["inject.test", "tunnel.test", "127.0.0.1"]
                .iter()
                .map(|r| EgressRule {
                    rule: (*r).into(),
                    origin: "bench".into(),
                })
                .collect(),
            resolve: [
                ("inject.test".to_owned(), loopback),
                ("tunnel.test".to_owned(), loopback),
            ]
            .into(),
            ..EgressSettings::default()
        };
        let policy = airlock_egress::EgressPolicy::from_settings(&settings, &[], &[]).unwrap();
        let env: BTreeMap<String, String> =
            [("BENCH_KEY".to_owned(), "sk-bench".to_owned())].into();
        let rule = Credential {
            name: "bench".into(),
            hosts: vec!["inject.test".into()],
            header: "x-api-key".into(),
            value_format: "{value}".into(),
            source: CredentialSource::Env("BENCH_KEY".into()),
            placeholder_env: None,
            placeholder: "airlock-placeholder".into(),
            origin: "bench".into(),
        };
        let injector = Injector::new("bench", &[rule], &env, std::path::Path::new("/")).unwrap();
        let session_ca = injector.ca_pem().to_owned();
        let log = std::env::temp_dir().join(format!("inject-bench-{}.jsonl", std::process::id()));
        let proxy_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let proxy_addr = proxy_listener.local_addr().unwrap();
        let config = airlock_egress::ProxyConfig {
            injector: Some(Arc::new(injector)),
            ..airlock_egress::ProxyConfig::default()
        };
        let _proxy =
            airlock_egress::spawn_with(proxy_listener, policy, log.clone(), config).unwrap();

        let mut roots = rustls::RootCertStore::empty();
        for pem in [std::fs::read(ca).expect("ca"), session_ca.into_bytes()] {
            for c in rustls_pemfile_certs(&pem) {
                roots.add(c).unwrap();
            }
        }
        let client = Arc::new(
            rustls::ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_root_certificates(roots)
                .with_no_client_auth(),
        );
        let mut tunnel = Vec::new();
        let mut injected = Vec::new();
        for round in 0..rounds + 20 {
            let order = if round % 2 == 0 {
                ["tunnel.test", "inject.test"]
            } else {
                ["inject.test", "tunnel.test"]
            };
            for host in order {
                let took = request(proxy_addr, host, port, client.clone()).await;
                if round >= 20 {
                    match host {
                        "tunnel.test" => tunnel.push(took),
                        _ => injected.push(took),
                    }
                }
            }
        }
        let _ = std::fs::remove_file(&log);
        report("tunnel", &mut tunnel);
        report("injected", &mut injected);
        let p50 = |v: &[Duration]| v[v.len() / 2].as_secs_f64() * 1e3;
        println!("added at p50: {:.3} ms", p50(&injected) - p50(&tunnel));
    });
}

/// Answers `ok` to one request per TLS connection.
async fn serve(server: rustls::ServerConfig, port: std::sync::mpsc::Sender<u16>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    port.send(listener.local_addr().unwrap().port()).unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(server));
    loop {
        let (tcp, _) = listener.accept().await.unwrap();
        let _ = tcp.set_nodelay(true);
        let acceptor = acceptor.clone();
        tokio::spawn(async move {
            let Ok(mut tls) = acceptor.accept(tcp).await else {
                return;
            };
            let mut buf = vec![0u8; 8192];
            let mut got = Vec::new();
            while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                match tls.read(&mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => got.extend_from_slice(&buf[..n]),
                }
            }
            let _ = tls
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\nok\n")
                .await;
            let _ = tls.shutdown().await;
        });
    }
}

async fn request(
    proxy: std::net::SocketAddr,
    host: &str,
    port: u16,
    client: Arc<rustls::ClientConfig>,
) -> Duration {
    let start = Instant::now();
    let mut tcp = TcpStream::connect(proxy).await.unwrap();
    tcp.set_nodelay(true).unwrap();
    tcp.write_all(
        format!("CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n").as_bytes(),
    )
    .await
    .unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        tcp.read_exact(&mut byte).await.unwrap();
        head.push(byte[0]);
    }
    assert!(
        head.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&head)
    );
    let name = ServerName::try_from(host.to_owned()).unwrap();
    let mut tls = tokio_rustls::TlsConnector::from(client)
        .connect(name, tcp)
        .await
        .unwrap();
    tls.write_all(
        format!("GET / HTTP/1.1\r\nHost: {host}\r\nx-api-key: airlock-placeholder\r\nConnection: close\r\n\r\n")
            .as_bytes(),
    )
    .await
    .unwrap();
    let mut answer = Vec::new();
    let _ = tls.read_to_end(&mut answer).await;
    assert!(
        answer.ends_with(b"ok\n"),
        "{}",
        String::from_utf8_lossy(&answer)
    );
    start.elapsed()
}

fn report(name: &str, times: &mut [Duration]) {
    times.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let mean = times.iter().map(|d| ms(*d)).sum::<f64>() / times.len() as f64;
    println!(
        "{name}: p50 {:.3} ms, p90 {:.3} ms, mean {mean:.3} ms (n={})",
        ms(times[times.len() / 2]),
        ms(times[times.len() * 9 / 10]),
        times.len()
    );
}

fn rustls_pemfile_certs(pem: &[u8]) -> Vec<CertificateDer<'static>> {
    use rustls::pki_types::pem::PemObject as _;
    CertificateDer::pem_slice_iter(pem)
        .map(|c| c.expect("certificate"))
        .collect()
}
