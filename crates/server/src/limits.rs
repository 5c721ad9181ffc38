//! Overload limits: how many turns run at once, how many response streams are open at once, and
//! how large one message may be. A call over a limit is refused at once with
//! `RESOURCE_EXHAUSTED` ([`ServerError::Overloaded`], [`ServerError::MessageTooLarge`]) instead of
//! queueing: the client backs off and retries, and the host's memory stays bounded by the limits.
//!
//! ```text
//!  Exec ───► turn permit + stream permit ─► turn task (both held until it ends)
//!  Resume ─► turn permit ─────────────────► the resumed turn
//!  Replay, Watch ─► stream permit ────────► stream task (held until the stream ends)
//! ```

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::error::{Limited, Result, ServerError};

/// The overload limits of one service (the daemon's `[limits]` table).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    /// Turns (Exec, and a Resume that drives a turn) running at once; one more is refused.
    pub max_concurrent_turns: usize,
    /// Exec, Replay and Watch response streams open at once; one more is refused.
    pub max_open_streams: usize,
    /// Largest request or response message, in bytes (an Exec frame carries a whole record).
    pub max_message_bytes: usize,
}

impl Limits {
    /// Default [`Limits::max_concurrent_turns`]: far above what one host's model calls sustain,
    /// low enough that the turns' stream buffers stay a few hundred MB at most.
    pub const DEFAULT_MAX_CONCURRENT_TURNS: usize = 512;
    /// Default [`Limits::max_open_streams`]: each holds at most `STREAM_CAPACITY` items.
    pub const DEFAULT_MAX_OPEN_STREAMS: usize = 2_048;
    /// Default [`Limits::max_message_bytes`].
    pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;

    /// Refuses a limit of 0, which would refuse every call.
    ///
    /// # Errors
    /// [`ServerError::ZeroLimit`] naming the setting.
    pub fn validate(&self) -> Result<()> {
        let settings = [
            ("max_concurrent_turns", self.max_concurrent_turns),
            ("max_open_streams", self.max_open_streams),
            ("max_message_bytes", self.max_message_bytes),
        ];
        match settings.into_iter().find(|(_, value)| *value == 0) {
            Some((setting, _)) => Err(ServerError::ZeroLimit { setting }),
            None => Ok(()),
        }
    }
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_concurrent_turns: Self::DEFAULT_MAX_CONCURRENT_TURNS,
            max_open_streams: Self::DEFAULT_MAX_OPEN_STREAMS,
            max_message_bytes: Self::DEFAULT_MAX_MESSAGE_BYTES,
        }
    }
}

/// The permits of the count limits, shared by every RPC of a service.
#[derive(Debug)]
pub(crate) struct Admission {
    limits: Limits,
    turns: Arc<Semaphore>,
    streams: Arc<Semaphore>,
}

/// What an admitted call holds until its work ends; dropping it frees its places.
#[derive(Debug)]
pub(crate) struct Admitted {
    _turn: Option<OwnedSemaphorePermit>,
    _stream: Option<OwnedSemaphorePermit>,
}

impl Admission {
    pub(crate) fn new(limits: Limits) -> Self {
        Self {
            limits,
            turns: Arc::new(Semaphore::new(limits.max_concurrent_turns)),
            streams: Arc::new(Semaphore::new(limits.max_open_streams)),
        }
    }

    pub(crate) fn limits(&self) -> Limits {
        self.limits
    }

    /// A place for a turn with (`stream`) or without its own response stream.
    pub(crate) fn turn(&self, stream: bool) -> Result<Admitted> {
        let turn = Some(self.permit(&self.turns, Limited::Turns)?);
        let stream = if stream {
            Some(self.permit(&self.streams, Limited::Streams)?)
        } else {
            None
        };
        Ok(Admitted {
            _turn: turn,
            _stream: stream,
        })
    }

    /// A place for a Replay or Watch stream.
    pub(crate) fn stream(&self) -> Result<Admitted> {
        Ok(Admitted {
            _turn: None,
            _stream: Some(self.permit(&self.streams, Limited::Streams)?),
        })
    }

    fn permit(&self, semaphore: &Arc<Semaphore>, which: Limited) -> Result<OwnedSemaphorePermit> {
        Arc::clone(semaphore)
            .try_acquire_owned()
            .map_err(|_| ServerError::Overloaded {
                limit: which,
                max: match which {
                    Limited::Turns => self.limits.max_concurrent_turns,
                    Limited::Streams => self.limits.max_open_streams,
                },
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // A refused place is refused with the limit named; a freed one is admitted again.
    #[test]
    fn places_are_refused_at_the_limit_and_freed_on_drop() {
        let admission = Admission::new(Limits {
            max_concurrent_turns: 1,
            max_open_streams: 2,
            ..Limits::default()
        });
        let first = admission.turn(true).unwrap();
        match admission.turn(false) {
            Err(ServerError::Overloaded {
                limit: Limited::Turns,
                max: 1,
            }) => {}
            other => panic!("expected the turn limit: {other:?}"),
        }
        let replay = admission.stream().unwrap();
        match admission.stream() {
            Err(ServerError::Overloaded {
                limit: Limited::Streams,
                max: 2,
            }) => {}
            other => panic!("expected the stream limit: {other:?}"),
        }
        drop(first);
        drop(replay);
        let _again = admission.turn(true).unwrap();
        let _stream = admission.stream().unwrap();
    }
}
