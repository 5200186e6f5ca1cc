//! One client connection: read the head, decide, connect, relay, log.

use std::sync::Arc;
use std::sync::atomic::{AtomicU16, AtomicU64, Ordering};
use std::time::Instant;

use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use crate::log::writer::LogSender;
use crate::log::{LogDecision, LogRecord, now_rfc3339};

use super::Ctx;
use super::forward::forward;
use super::head::{Request, Seen, parse_request, read_head};
use super::reply::Refusal;
use super::tunnel::{Activity, with_idle_timeout};
use super::{relay, upstream};

/// The log record of one connection, sent when it is dropped, so a task cut at shutdown still logs.
pub(crate) struct Entry {
    log: LogSender,
    start: Instant,
    time: String,
    host: String,
    port: u16,
    method: String,
    decision: LogDecision,
    rule: Option<String>,
    /// The HTTP status the client got (0: none yet, or a tunnel).
    pub(crate) status: AtomicU16,
    pub(crate) up: Arc<AtomicU64>,
    pub(crate) down: Arc<AtomicU64>,
    reason: Option<String>,
    pub(crate) via: Option<String>,
    /// The credential rules applied on this connection (`proxy::injected`).
    pub(crate) credentials: std::sync::Mutex<Vec<String>>,
}

impl Entry {
    fn new(log: LogSender) -> Entry {
        Entry {
            log,
            start: Instant::now(),
            time: now_rfc3339(),
            host: String::new(),
            port: 0,
            method: String::new(),
            decision: LogDecision::Error,
            rule: None,
            status: AtomicU16::new(0),
            up: Arc::default(),
            down: Arc::default(),
            reason: Some("cut off when the proxy shut down".into()),
            via: None,
            credentials: std::sync::Mutex::default(),
        }
    }

    fn refused(&mut self, refusal: &Refusal) {
        self.decision = if refusal.is_denial() {
            LogDecision::Denied
        } else {
            LogDecision::Error
        };
        self.reason = Some(refusal.reason.clone());
        if refusal.status != 0 {
            self.status.store(refusal.status, Ordering::Relaxed);
        }
    }
}

impl Drop for Entry {
    fn drop(&mut self) {
        self.log.send(LogRecord {
            time: std::mem::take(&mut self.time),
            host: std::mem::take(&mut self.host),
            port: self.port,
            method: std::mem::take(&mut self.method),
            decision: self.decision,
            status: Some(self.status.load(Ordering::Relaxed)).filter(|&s| s != 0),
            rule: self.rule.take(),
            bytes_up: self.up.load(Ordering::Relaxed),
            bytes_down: self.down.load(Ordering::Relaxed),
            duration_ms: self.start.elapsed().as_millis() as u64,
            reason: self.reason.take(),
            via: self.via.take(),
            credentials: std::mem::take(
                self.credentials
                    .get_mut()
                    .unwrap_or_else(|e| e.into_inner()),
            ),
        });
    }
}

pub(crate) async fn serve_connection(mut client: TcpStream, ctx: Arc<Ctx>) {
    let _ = client.set_nodelay(true);
    let mut entry = Entry::new(ctx.log.clone());
    if let Err(refusal) = handle(&mut client, &ctx, &mut entry).await {
        entry.refused(&refusal);
        if let Some(response) = refusal.response() {
            // A client that does not read its refusal must not hold the task either.
            let _ = tokio::time::timeout(ctx.config.header_timeout, async {
                client.write_all(&response).await?;
                client.shutdown().await
            })
            .await;
        }
    }
}

async fn handle(client: &mut TcpStream, ctx: &Ctx, entry: &mut Entry) -> Result<(), Refusal> {
    let cfg = &ctx.config;
    let (buf, head_len) = read_head(client, cfg.max_head_bytes, cfg.header_timeout).await?;
    let mut seen = Seen::default();
    let parsed = parse_request(&buf[..head_len], cfg.max_headers, &mut seen);
    entry.method = seen.method;
    let request = parsed?;
    let (host, port) = request.host_port();
    entry.host = host.to_string();
    entry.port = port;
    let decision = ctx.policy.decide(host, port);
    entry.rule = decision.rule.clone();
    if !decision.allowed {
        // Ask mode: only a request no rule matched waits; a deny rule stays a deny.
        let Some(ask) = cfg.ask.as_ref().filter(|_| decision.rule.is_none()) else {
            return Err(Refusal::denied(host, port, &decision));
        };
        match ask.ask(&host.to_string(), port).await {
            crate::ask::Outcome::Allowed(how) => {
                entry.rule = Some(format!("asked: {}", how.as_str()));
            }
            crate::ask::Outcome::Denied(why) => return Err(Refusal::asked(host, port, &why)),
        }
    }
    // A name the policy maps with `resolve` is reached directly, like an address or a NO_PROXY name.
    let upstream = match &cfg.upstream_proxy {
        Some(via) if via.applies_to(host) && ctx.policy.resolve_override(host).is_none() => {
            entry.via = Some(via.shown());
            via.connect(host, port, cfg.connect_timeout).await?
        }
        _ => upstream::connect(&ctx.policy, host, port, cfg.connect_timeout).await?,
    };
    // Until the relay returns, the record says "cut off": that is what a task aborted at shutdown logs.
    entry.decision = LogDecision::Allowed;
    let leftover = &buf[head_len..];
    let host_name = host.to_string();
    let injector = cfg.injector.as_deref().filter(|i| i.covers(&host_name));
    let relayed = match (request, injector) {
        (Request::Connect { .. }, Some(injector)) => {
            super::injected::serve(client, upstream, &host_name, leftover, injector, ctx, entry)
                .await?
        }
        (Request::Connect { .. }, None) => tunnel(client, upstream, leftover, ctx, entry).await,
        (Request::Forward(f), _) => forward(client, upstream, &f, leftover, ctx, entry).await,
    };
    entry.reason = relayed
        .err()
        .map(|e| format!("the transfer ended early: {e}"));
    Ok(())
}

/// CONNECT: confirm, then copy bytes both ways untouched (TLS stays end to end).
async fn tunnel(
    client: &mut TcpStream,
    mut upstream: TcpStream,
    leftover: &[u8],
    ctx: &Ctx,
    entry: &Entry,
) -> std::io::Result<()> {
    let activity = Activity::new();
    with_idle_timeout(&activity, ctx.config.idle_timeout, async {
        client
            .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
            .await?;
        upstream.write_all(leftover).await?;
        entry.up.fetch_add(leftover.len() as u64, Ordering::Relaxed);
        relay::both_ways(client, &upstream, &entry.up, &entry.down, &activity).await
    })
    .await
}
