//! The agentsessions Placer: puts a session's harness on compute and takes it off.
//!
//! For each registry name a [`Backend`] pairs a [`agentsessions_api::Runtime`] (where the
//! harness runs), a [`agentsessions_api::HarnessDialer`] (how the host reaches it) and a
//! [`DescriptorSource`] (what the admission gate checks before any compute exists). The
//! [`Placer`] runs every operation that touches compute: Exec, Resume, Suspend, Fork, plus the
//! host-only Approve, Cancel and Delete, under one per-session guard shared by every route.
//!
//! ```text
//!  server ──► Placer ──► Registry (name → Backend) ──► Runtime ─ create/snapshot/restore/fork
//!               │                                      Dialer  ─ Arc<dyn Harness>
//!               ├──► SessionGuards (one operation per session on this host)
//!               └──► Controller (one fence per invocation) ──► Journal
//!                        └── records, deltas, opening ──► TurnEvents (bounded) ──► server
//! ```
//!
//! Module map:
//! - [`backend`] — [`Backend`], [`DescriptorSource`], [`Attached`] (a harness object in this
//!   process as runtime and dialer).
//! - [`describe`] — [`describe_within`], the one bounded Describe.
//! - [`registry`] — [`Registry`], routes by name, the pin rule.
//! - [`placer`] — [`Placer`] and its calls.
//! - [`guard`] — [`SessionGuards`].
//! - [`turn_events`] — [`TurnEvents`], the one bounded channel a turn reports through (its
//!   records, deltas and opening) and the feed that also notes the running execution on the
//!   guard.
//! - [`progress`] — [`ProgressBus`], running tools' progress for the streams watching their
//!   sessions (transport only).
//! - [`history`] — what placement reads from records.
//! - [`mod@error`] — [`PlacementError`].

pub mod backend;
pub mod describe;
pub mod error;
pub mod guard;
pub mod history;
mod observed;
pub mod placer;
pub mod progress;
pub mod registry;
pub mod states;
pub mod turn_events;

pub use agentsessions_controller::TokenMinting;
pub use backend::{Attached, Backend, DescriptorSource};
pub use describe::{DESCRIBE_TIMEOUT, DescribeFailure, describe_within};
pub use error::{PlacementError, Result, RuntimeOp};
pub use guard::{Held, SessionGuards};
pub use placer::{
    ExecCall, ForkCall, ForkOutcome, MAX_FORK_COUNT, Placer, ReclaimReport, ResumeCall,
    SessionCompute, TurnCall, TurnRun,
};
pub use progress::{PROGRESS_CAPACITY, ProgressBus, ProgressWatch};
pub use registry::{Registry, Route, Source};
pub use states::{DEFAULT_STATE_BUDGET, SessionState, SessionStates};
pub use turn_events::{TURN_EVENT_CAPACITY, TurnEvent, TurnEvents};
