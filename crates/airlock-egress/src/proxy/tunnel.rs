//! Byte streams through the proxy: counting, and closing them when idle.
//!
//! [`Tracked`] wraps a read side (the request body's), counts what it reads and stamps the shared
//! [`Activity`], as the splice relays do; the watchdog in [`with_idle_timeout`] ends the work once no
//! byte moved either way for the idle timeout.
//! Dropping the future drops the sockets, so a stalled peer leaves no task or buffer behind.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, ReadBuf};
use tokio::time::Instant;

/// Buffer size for a request body, and the first size of a relay's buffer.
pub(crate) const RELAY_BUFFER: usize = 64 * 1024;

/// When a byte last moved, in milliseconds since the connection started.
#[derive(Clone)]
pub(crate) struct Activity {
    start: Instant,
    last_ms: Arc<AtomicU64>,
}

impl Activity {
    pub(crate) fn new() -> Activity {
        Activity {
            start: Instant::now(),
            last_ms: Arc::new(AtomicU64::new(0)),
        }
    }

    pub(crate) fn touch(&self) {
        let ms = self.start.elapsed().as_millis() as u64;
        self.last_ms.fetch_max(ms, Ordering::Relaxed);
    }

    fn idle_deadline(&self, idle: Duration) -> Instant {
        self.start + Duration::from_millis(self.last_ms.load(Ordering::Relaxed)) + idle
    }
}

/// A read side that counts the bytes read from it and stamps activity on every read.
pub(crate) struct Tracked<S> {
    inner: S,
    activity: Activity,
    read: Arc<AtomicU64>,
}

impl<S> Tracked<S> {
    pub(crate) fn new(inner: S, activity: Activity, read: Arc<AtomicU64>) -> Tracked<S> {
        Tracked {
            inner,
            activity,
            read,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Tracked<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let poll = Pin::new(&mut self.inner).poll_read(cx, buf);
        let n = buf.filled().len() - before;
        if n > 0 {
            self.read.fetch_add(n as u64, Ordering::Relaxed);
            self.activity.touch();
        }
        poll
    }
}

/// Runs `work` until it ends, or until nothing moved for `idle` (then `Err(TimedOut)`).
pub(crate) async fn with_idle_timeout<T>(
    activity: &Activity,
    idle: Duration,
    work: impl Future<Output = io::Result<T>>,
) -> io::Result<T> {
    let watchdog = async {
        loop {
            let deadline = activity.idle_deadline(idle);
            if Instant::now() >= deadline {
                return;
            }
            tokio::time::sleep_until(deadline).await;
        }
    };
    tokio::select! {
        result = work => result,
        () = watchdog => Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!("idle for {} s", idle.as_secs_f32()),
        )),
    }
}
