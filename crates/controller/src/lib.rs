//! The agentsessions controller: the single writer of a session's turns.
//!
//! A [`Controller`] drives one harness for one session. A turn (`exec`) writes EXECUTION_START
//! and the inputs as its CAS point, runs the harness against a live [`agentsessions_api::EventSink`]
//! that journals every effect before the harness observes it (model calls through a
//! [`agentsessions_api::ModelProvider`], tools through a [`ToolExecutor`], approvals through the
//! gate), and closes with END or ERROR. `replay` re-runs recorded executions against their
//! journaled effects without calling any model; `resume` re-drives an interrupted execution at
//! most once per effect; `approve` records decisions; [`Cancellations`] stops a running turn.
//!
//! The decisions are pure and live apart from the I/O: [`log`] reads a journal as executions,
//! [`approval`] derives approval state, [`effects`] matches harness calls against recorded
//! effects. The sink and the controller perform what those decisions ask for.
//!
//! Module map:
//! - [`controller`] — [`Controller`] (construction, exec, resume, approve), [`ExecRequest`],
//!   outcomes; its submodules replay ([`ReplayReport`]) and close a turn (END, CANCEL, ERROR).
//! - [`log`] — execution grouping, the legacy prefix, input completeness, inherited intents,
//!   harness identity (semantics §3.5) and the history a harness is given.
//! - [`approval`] — the approval scan ([`approval::ApprovalGate`]s), receipt rules, and the
//!   resume and decision rules at an open gate.
//! - [`effects`] — the recorded effect cursor and matching rules.
//! - [`hooks`] — [`ToolExecutor`], [`Observer`], [`IdSource`], [`Cancellations`],
//!   [`TokenMinting`].
//! - [`settings`] — [`TurnSettings`], what every turn of a host shares.
//! - [`settlement`] — unfinished executions: the refusal of new input that would leave one
//!   behind, and the results that settle its open calls when a host closes it.
//! - [`legacy`] — the compatibility id of v0.1.2 turns.
//! - [`view`] — [`LogView`], a session's decoded log and readings kept between operations.
//! - [`mod@error`] — [`ControllerError`].
#![warn(missing_docs)]

pub mod approval;
pub mod controller;
pub mod effects;
pub mod error;
pub mod hooks;
pub mod legacy;
pub mod log;
pub mod settings;
pub mod settlement;
mod sink;
mod spans;
pub mod view;

pub use controller::{Controller, ExecRequest, ReplayReport, ResumeOutcome, TurnOutcome};
pub use error::{ControllerError, Result};
pub use hooks::{
    Cancellations, IdSource, Observer, ProgressSink, RandomIds, TokenMinting, ToolCallContext,
    ToolExecutor, ToolProgress,
};
pub use settings::TurnSettings;
pub use view::LogView;
