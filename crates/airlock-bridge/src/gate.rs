//! The checks every route but `/healthz` passes, in the contract's order: method, token, bucket,
//! body cap. Routes then decode strictly and validate.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt as _, Limited};
use hyper::body::Body;
use hyper::{Method, Request, StatusCode, header};

use crate::routes::{BridgeRoute, Reply};
use crate::scope::{self, SessionScope};
use crate::state::BridgeState;

/// How long the whole body may take to arrive.
pub const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Who is asking: a sandbox with its scope, or (with `[bridge] shared_token`) any holder of the
/// install-time token.
pub enum Caller {
    Session(Box<SessionScope>),
    Shared,
}

impl Caller {
    /// The sandbox's scope; `None` for a shared-token caller, which routes serve unscoped.
    pub fn scope(&self) -> Option<&SessionScope> {
        match self {
            Caller::Session(scope) => Some(scope),
            Caller::Shared => None,
        }
    }
}

/// Runs the gate for `route`; the body bytes and the caller when every check passed, else the
/// refusal.
pub async fn admit<B>(
    state: &BridgeState,
    route: BridgeRoute,
    request: Request<B>,
) -> Result<(Bytes, Caller), Reply>
where
    B: Body<Data = Bytes>,
    B::Error: std::error::Error + Send + Sync + 'static,
{
    if request.method() != Method::POST {
        return Err(Reply::refuse(
            StatusCode::METHOD_NOT_ALLOWED,
            format!("method {} is not allowed; use POST", request.method()),
        ));
    }
    // Before the bucket, so a caller without the token cannot spend anyone's budget.
    let Some(caller) = authorized(state, request.headers().get(header::AUTHORIZATION)) else {
        return Err(Reply::refuse(StatusCode::UNAUTHORIZED, "bad token"));
    };
    if !state.buckets.take(route.bucket()) {
        return Err(Reply::refuse(
            StatusCode::TOO_MANY_REQUESTS,
            format!(
                "rate limit: at most {}/s (burst {}) for this route; retry shortly",
                route.bucket().limits().0,
                route.bucket().limits().1
            ),
        ));
    }
    let body = read_body(route.body_cap(), request.into_body()).await?;
    Ok((body, caller))
}

fn authorized(state: &BridgeState, value: Option<&header::HeaderValue>) -> Option<Caller> {
    let bytes = value?.as_bytes();
    // The scheme is case-insensitive (RFC 9110); the token is compared exactly.
    let (scheme, presented) = bytes.split_at_checked(7)?;
    if !scheme.eq_ignore_ascii_case(b"bearer ") {
        return None;
    }
    if state.shared_token && state.token.matches(presented) {
        return Some(Caller::Shared);
    }
    let sessions = state.sessions.as_ref()?;
    scope::lookup(sessions, presented).map(|scope| Caller::Session(Box::new(scope)))
}

/// Reads at most `cap` bytes: more is 413 (told apart from a malformed body, which is 400 later).
pub async fn read_body<B>(cap: usize, body: B) -> Result<Bytes, Reply>
where
    B: Body<Data = Bytes>,
    B::Error: std::error::Error + Send + Sync + 'static,
{
    let too_large = || {
        Reply::refuse(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("request body is larger than {cap} bytes"),
        )
    };
    if body.size_hint().lower() > cap as u64 {
        return Err(too_large());
    }
    match tokio::time::timeout(READ_TIMEOUT, Limited::new(body, cap).collect()).await {
        Ok(Ok(collected)) => Ok(collected.to_bytes()),
        Ok(Err(e))
            if e.downcast_ref::<http_body_util::LengthLimitError>()
                .is_some() =>
        {
            Err(too_large())
        }
        Ok(Err(_)) => Err(Reply::bad_request("cannot read the request body")),
        Err(_) => Err(Reply::refuse(
            StatusCode::REQUEST_TIMEOUT,
            format!(
                "request body did not arrive within {}s",
                READ_TIMEOUT.as_secs()
            ),
        )),
    }
}
