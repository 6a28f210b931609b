//! Response body types: a boxed body for every route, and a channel-fed body
//! for the streaming proxy.
//!
//! The proxy does not hand Hermes' body to hyper directly: a pump task sits
//! between them so it can enforce the deadline, notice a vanished client
//! (the receiver is dropped) and append a final SSE error event. The channel
//! is small, so a slow client back-pressures Hermes instead of buffering.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body_util::{combinators::BoxBody, BodyExt, Full};
use hyper::body::{Body, Frame};
use tokio::sync::mpsc;

/// Error that aborts a response body mid-way (hyper then closes the
/// connection without a clean end, so the client sees a truncated body).
#[derive(Debug, thiserror::Error)]
#[error("response stream aborted: {0}")]
pub struct StreamAborted(pub &'static str);

pub type ResponseBody = BoxBody<Bytes, StreamAborted>;

pub fn full(bytes: impl Into<Bytes>) -> ResponseBody {
    Full::new(bytes.into())
        .map_err(|never| match never {})
        .boxed()
}

pub type FrameResult = Result<Frame<Bytes>, StreamAborted>;

/// Body whose frames come from a bounded channel.
pub struct ChannelBody {
    rx: mpsc::Receiver<FrameResult>,
}

impl ChannelBody {
    /// A body and the sender the pump task writes into.
    pub fn new(capacity: usize) -> (mpsc::Sender<FrameResult>, Self) {
        let (tx, rx) = mpsc::channel(capacity);
        (tx, Self { rx })
    }
}

impl Body for ChannelBody {
    type Data = Bytes;
    type Error = StreamAborted;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        self.rx.poll_recv(cx)
    }
}
