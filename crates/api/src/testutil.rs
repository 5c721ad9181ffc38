//! Test helpers: drive the crate's futures without an async runtime.

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

/// Polls `future` once and returns its output. Every future this crate's tests await completes
/// without waiting (no I/O, no timers), so a pending poll is a test bug.
pub(crate) fn block_on<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    match future
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
    {
        Poll::Ready(output) => output,
        Poll::Pending => panic!("test future must complete without waiting"),
    }
}
