//! `GET /healthz`: liveness only, no auth, reveals nothing.

use super::{Reply, ReplyBody};

pub fn serve() -> Reply {
    Reply::ok(
        ReplyBody::Json(serde_json::json!({"status": "ok"})),
        Vec::new(),
    )
}
