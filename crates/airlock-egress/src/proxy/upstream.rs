//! Resolving an allowed host on the host side, checking every address, and connecting.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use tokio::net::TcpStream;

use crate::addr::local_addresses;
use crate::host::Host;
use crate::policy::EgressPolicy;

use super::reply::Refusal;

/// Resolves `host` (the policy's `resolve` map first, then the system resolver), drops every
/// address the policy refuses, and connects to the first remaining one that answers, all within
/// `timeout`.
pub(crate) async fn connect(
    policy: &EgressPolicy,
    host: &Host,
    port: u16,
    timeout: Duration,
) -> Result<TcpStream, Refusal> {
    let target = host.to_authority(port);
    let attempt = async {
        let candidates = resolve(policy, host, port).await?;
        let permitted = permitted(policy, host, port, &candidates)?;
        let mut last_error = None;
        for addr in permitted {
            match TcpStream::connect(addr).await {
                Ok(stream) => {
                    let _ = stream.set_nodelay(true);
                    return Ok(stream);
                }
                Err(e) => last_error = Some((addr, e)),
            }
        }
        let (addr, e) = last_error.expect("permitted() returns at least one address");
        Err(Refusal::new(
            502,
            format!("cannot connect to {target} ({addr}): {e}"),
        ))
    };
    within(timeout, attempt, || {
        format!("{target} did not answer within {} s", timeout.as_secs_f32())
    })
    .await
}

/// `attempt`, or a 504 saying `late()` when it takes longer than `timeout`.
pub(crate) async fn within<T>(
    timeout: Duration,
    attempt: impl std::future::Future<Output = Result<T, Refusal>>,
    late: impl FnOnce() -> String,
) -> Result<T, Refusal> {
    match tokio::time::timeout(timeout, attempt).await {
        Ok(result) => result,
        Err(_) => Err(Refusal::new(504, late())),
    }
}

async fn resolve(policy: &EgressPolicy, host: &Host, port: u16) -> Result<Vec<IpAddr>, Refusal> {
    let name = match host {
        Host::Ip(ip) => return Ok(vec![*ip]),
        Host::Name(name) => name,
    };
    if let Some(ip) = policy.resolve_override(host) {
        return Ok(vec![ip]);
    }
    let unresolvable = |detail: String| {
        Refusal::new(
            502,
            format!(
                "cannot resolve {name}: {detail}; check the name, or map it with resolve = {{ \"{name}\" = \"ADDRESS\" }} under [network]"
            ),
        )
    };
    let addrs: Vec<IpAddr> = tokio::net::lookup_host((name.as_str(), port))
        .await
        .map_err(|e| unresolvable(e.to_string()))?
        .map(|a: SocketAddr| a.ip())
        .collect();
    if addrs.is_empty() {
        return Err(unresolvable("no addresses".into()));
    }
    Ok(addrs)
}

/// The addresses the policy lets us reach, in resolver order; a 403 naming the first refused one
/// when none is left.
fn permitted(
    policy: &EgressPolicy,
    host: &Host,
    port: u16,
    candidates: &[IpAddr],
) -> Result<Vec<SocketAddr>, Refusal> {
    let local = local_addresses();
    let mut first_refusal = None;
    let mut ok = Vec::new();
    for &ip in candidates {
        match policy.check_address(ip, port, &local) {
            Ok(()) => ok.push(SocketAddr::new(ip, port)),
            Err(class) => {
                first_refusal.get_or_insert_with(|| Refusal::address(host, port, ip, class));
            }
        }
    }
    match (ok.is_empty(), first_refusal) {
        (true, Some(refusal)) => Err(refusal),
        _ => Ok(ok),
    }
}
