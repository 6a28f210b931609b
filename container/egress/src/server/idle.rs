//! Idle-time enforcement: a shared activity clock touched by every read and
//! write on both sides of a connection, and a watchdog future that completes
//! once nothing has moved for the limit.
//!
//! Wrapping the streams (rather than timing each copy) covers the request
//! head, a forwarded body, the hyper upgrade hand-off and a raw tunnel with
//! one mechanism; a connection is closed by dropping its future when the
//! watchdog wins the `select!`.

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Milliseconds since the clock's creation at the last byte moved.
#[derive(Debug)]
pub struct ActivityClock {
    origin: Instant,
    last_ms: AtomicU64,
}

impl ActivityClock {
    /// A clock that was just touched.
    pub fn new() -> Arc<Self> {
        Arc::new(ActivityClock {
            origin: Instant::now(),
            last_ms: AtomicU64::new(0),
        })
    }

    /// Records activity now.
    pub fn touch(&self) {
        let now = u64::try_from(self.origin.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_ms.store(now, Ordering::Relaxed);
    }

    /// How long nothing has moved.
    pub fn idle_for(&self) -> Duration {
        let last = Duration::from_millis(self.last_ms.load(Ordering::Relaxed));
        self.origin.elapsed().saturating_sub(last)
    }
}

/// Completes once `clock` has been idle for `limit`.
pub async fn idle_expired(clock: &ActivityClock, limit: Duration) {
    loop {
        let idle = clock.idle_for();
        if idle >= limit {
            return;
        }
        tokio::time::sleep(limit - idle).await;
    }
}

/// A stream that touches its clock whenever bytes move.
#[derive(Debug)]
pub struct Tracked<S> {
    inner: S,
    clock: Arc<ActivityClock>,
}

impl<S> Tracked<S> {
    /// Wraps `inner`.
    pub fn new(inner: S, clock: Arc<ActivityClock>) -> Self {
        Tracked { inner, clock }
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
        if matches!(poll, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.clock.touch();
        }
        poll
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Tracked<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let poll = Pin::new(&mut self.inner).poll_write(cx, data);
        if matches!(poll, Poll::Ready(Ok(n)) if n > 0) {
            self.clock.touch();
        }
        poll
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let poll = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if matches!(poll, Poll::Ready(Ok(n)) if n > 0) {
            self.clock.touch();
        }
        poll
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}
