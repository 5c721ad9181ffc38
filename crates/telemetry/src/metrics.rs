//! The process's metrics registry and the typed calls every crate records through.
//!
//! Names follow the Prometheus conventions (`agentsessions_` prefix, base units, `_total` on
//! counters, `_seconds` on durations); labels carry bounded values only — no session or execution
//! uids, and names a caller chooses go through [`BoundedLabel`]. Gauges that describe stored
//! state (sessions by compute state, pending approvals) are read from the journal at scrape time
//! by a [`GaugeSource`], so every host reports the shared truth rather than its own memory.

use std::future::Future;
use std::pin::Pin;
use std::sync::LazyLock;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};

use crate::bounded::BoundedLabel;
use crate::error::TelemetryError;
use crate::exposition::{Exposition, prometheus_text};

type Histograms<L> = Family<L, Histogram, fn() -> Histogram>;

/// Call latencies: 1 ms to about 2 minutes.
fn latency() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 2.0, 18))
}

/// Journal latencies: 50 µs to about 1.6 s.
fn storage_latency() -> Histogram {
    Histogram::new(exponential_buckets(0.000_05, 2.0, 16))
}

/// How long a person takes to decide: 1 s to about 3 days.
fn decision_latency() -> Histogram {
    Histogram::new(exponential_buckets(1.0, 4.0, 10))
}

/// Commands in one journal batch: 1 to 512.
fn batch_sizes() -> Histogram {
    Histogram::new(exponential_buckets(1.0, 2.0, 10))
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HarnessOutcome {
    harness: String,
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HarnessLabel {
    harness: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ModelOutcome {
    provider: String,
    model: String,
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ModelLabels {
    provider: String,
    model: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ModelTokens {
    provider: String,
    model: String,
    r#type: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ModelError {
    provider: String,
    model: String,
    kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ToolOutcome {
    tool: String,
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ToolLabel {
    tool: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ToolError {
    tool: String,
    kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Decision {
    decision: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Backend {
    backend: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ComputeState {
    compute_state: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OperationOutcome {
    operation: String,
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OperationLabel {
    operation: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct MethodCode {
    method: String,
    code: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct MethodLabel {
    method: String,
}

/// Every metric this process exports. Get it with [`metrics`].
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    turns: Family<HarnessOutcome, Counter>,
    turn_duration: Histograms<HarnessLabel>,
    model_calls: Family<ModelOutcome, Counter>,
    model_duration: Histograms<ModelLabels>,
    model_tokens: Family<ModelTokens, Counter>,
    model_errors: Family<ModelError, Counter>,
    replayed_model_calls: Family<ModelLabels, Counter>,
    tool_calls: Family<ToolOutcome, Counter>,
    tool_duration: Histograms<ToolLabel>,
    tool_errors: Family<ToolError, Counter>,
    approvals_requested: Counter,
    redactions: Counter,
    approvals_decided: Family<Decision, Counter>,
    approval_decision_duration: Histogram,
    approvals_pending: Gauge,
    journal_append_duration: Histogram,
    journal_batch_size: Histograms<Backend>,
    journal_commit_duration: Histograms<Backend>,
    journal_fsync_duration: Histogram,
    journal_queue_depth: Family<Backend, Gauge>,
    sessions: Family<ComputeState, Gauge>,
    runtime_operations: Family<OperationOutcome, Counter>,
    runtime_duration: Histograms<OperationLabel>,
    rpcs: Family<MethodCode, Counter>,
    rpc_duration: Histograms<MethodLabel>,
    tool_names: BoundedLabel,
    model_names: BoundedLabel,
    harness_names: BoundedLabel,
}

static METRICS: LazyLock<Metrics> = LazyLock::new(Metrics::new);

/// The process's metrics.
pub fn metrics() -> &'static Metrics {
    &METRICS
}

fn seconds(elapsed: Duration) -> f64 {
    elapsed.as_secs_f64()
}

fn count(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}

impl Metrics {
    #[allow(
        clippy::too_many_lines,
        reason = "one registration per metric, in one place"
    )]
    fn new() -> Self {
        let mut registry = Registry::with_prefix("agentsessions");
        let metrics = Self {
            turns: Family::default(),
            turn_duration: Family::new_with_constructor(latency as fn() -> Histogram),
            model_calls: Family::default(),
            model_duration: Family::new_with_constructor(latency as fn() -> Histogram),
            model_tokens: Family::default(),
            model_errors: Family::default(),
            replayed_model_calls: Family::default(),
            tool_calls: Family::default(),
            tool_duration: Family::new_with_constructor(latency as fn() -> Histogram),
            tool_errors: Family::default(),
            approvals_requested: Counter::default(),
            redactions: Counter::default(),
            approvals_decided: Family::default(),
            approval_decision_duration: decision_latency(),
            approvals_pending: Gauge::default(),
            journal_append_duration: storage_latency(),
            journal_batch_size: Family::new_with_constructor(batch_sizes as fn() -> Histogram),
            journal_commit_duration: Family::new_with_constructor(
                storage_latency as fn() -> Histogram,
            ),
            journal_fsync_duration: storage_latency(),
            journal_queue_depth: Family::default(),
            sessions: Family::default(),
            runtime_operations: Family::default(),
            runtime_duration: Family::new_with_constructor(latency as fn() -> Histogram),
            rpcs: Family::default(),
            rpc_duration: Family::new_with_constructor(latency as fn() -> Histogram),
            tool_names: BoundedLabel::new(),
            model_names: BoundedLabel::new(),
            harness_names: BoundedLabel::new(),
            registry: Registry::default(),
        };
        let r = &mut registry;
        r.register(
            "turns",
            "Turns run, by harness and outcome (completed, parked, or the error kind)",
            metrics.turns.clone(),
        );
        r.register_with_unit(
            "turn_duration",
            "Turn latency, from the opening commit to END, ERROR or a park",
            Unit::Seconds,
            metrics.turn_duration.clone(),
        );
        r.register(
            "model_calls",
            "Live model provider calls, by provider, model and outcome",
            metrics.model_calls.clone(),
        );
        r.register_with_unit(
            "model_call_duration",
            "Live model provider call latency",
            Unit::Seconds,
            metrics.model_duration.clone(),
        );
        r.register(
            "model_tokens",
            "Tokens of live model calls, by provider, model and type (input or output)",
            metrics.model_tokens.clone(),
        );
        r.register(
            "model_errors",
            "Failed live model calls, by provider, model and error kind",
            metrics.model_errors.clone(),
        );
        r.register(
            "model_replayed_calls",
            "Model calls served from the journal instead of the provider",
            metrics.replayed_model_calls.clone(),
        );
        r.register(
            "tool_calls",
            "Tool calls executed by the host, by tool and outcome",
            metrics.tool_calls.clone(),
        );
        r.register_with_unit(
            "tool_call_duration",
            "Tool execution latency",
            Unit::Seconds,
            metrics.tool_duration.clone(),
        );
        r.register(
            "tool_errors",
            "Tool calls that failed, by tool and error kind",
            metrics.tool_errors.clone(),
        );
        r.register(
            "approvals_requested",
            "Approval requests written (a gated tool call parked its turn)",
            metrics.approvals_requested.clone(),
        );
        r.register(
            "redactions",
            "Secret values (known to the host or matched by a configured pattern) replaced in \
             records before they were journaled",
            metrics.redactions.clone(),
        );
        r.register(
            "approvals_decided",
            "Approval decisions recorded, by decision (approved or denied)",
            metrics.approvals_decided.clone(),
        );
        r.register_with_unit(
            "approval_decision_duration",
            "Time from an approval request to its decision",
            Unit::Seconds,
            metrics.approval_decision_duration.clone(),
        );
        r.register(
            "approvals_pending",
            "Approval requests waiting for a decision, read from the journal at scrape time",
            metrics.approvals_pending.clone(),
        );
        r.register_with_unit(
            "journal_append_duration",
            "Journal append latency seen by the caller, until the records are durable",
            Unit::Seconds,
            metrics.journal_append_duration.clone(),
        );
        r.register(
            "journal_batch_size",
            "Commands committed in one journal transaction, by backend",
            metrics.journal_batch_size.clone(),
        );
        r.register_with_unit(
            "journal_commit_duration",
            "Journal transaction latency, from BEGIN to COMMIT, by backend",
            Unit::Seconds,
            metrics.journal_commit_duration.clone(),
        );
        r.register_with_unit(
            "journal_fsync_duration",
            "fdatasync latency of the SQLite journal's write-ahead log",
            Unit::Seconds,
            metrics.journal_fsync_duration.clone(),
        );
        r.register(
            "journal_queue_depth",
            "Commands waiting for the journal writer when it took its last batch, by backend",
            metrics.journal_queue_depth.clone(),
        );
        r.register(
            "sessions",
            "Sessions by compute state, read from the journal at scrape time",
            metrics.sessions.clone(),
        );
        r.register(
            "runtime_operations",
            "Runtime operations (create, snapshot, restore, fork, stop), by outcome",
            metrics.runtime_operations.clone(),
        );
        r.register_with_unit(
            "runtime_operation_duration",
            "Runtime operation latency",
            Unit::Seconds,
            metrics.runtime_duration.clone(),
        );
        r.register(
            "rpc_requests",
            "Sessions RPCs handled, by method and status code",
            metrics.rpcs.clone(),
        );
        r.register_with_unit(
            "rpc_duration",
            "Sessions RPC latency (for streams, until the handler returned)",
            Unit::Seconds,
            metrics.rpc_duration.clone(),
        );
        Self {
            registry,
            ..metrics
        }
    }

    /// The registry in the text exposition `format` (see [`Exposition`]).
    ///
    /// # Errors
    /// [`TelemetryError::Encode`] should writing to a string ever fail.
    pub fn encode(&self, format: Exposition) -> Result<String, TelemetryError> {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry)?;
        Ok(match format {
            Exposition::OpenMetrics => text,
            Exposition::PrometheusText => prometheus_text(&text),
        })
    }

    /// A turn ended: `outcome` is `completed`, `parked` or the error kind.
    pub fn turn(&self, harness: &str, outcome: &str, elapsed: Duration) {
        let harness = self.harness_names.admit(harness);
        self.turns
            .get_or_create(&HarnessOutcome {
                harness: harness.clone(),
                outcome: outcome.to_owned(),
            })
            .inc();
        self.turn_duration
            .get_or_create(&HarnessLabel { harness })
            .observe(seconds(elapsed));
    }

    /// A live model call answered.
    pub fn model_call(
        &self,
        provider: &str,
        model: &str,
        elapsed: Duration,
        input_tokens: i64,
        output_tokens: i64,
    ) {
        let model = self.model_names.admit(model);
        let labels = ModelLabels {
            provider: provider.to_owned(),
            model,
        };
        self.count_model_call(&labels, "success");
        self.model_duration
            .get_or_create(&labels)
            .observe(seconds(elapsed));
        for (kind, tokens) in [("input", input_tokens), ("output", output_tokens)] {
            self.model_tokens
                .get_or_create(&ModelTokens {
                    provider: labels.provider.clone(),
                    model: labels.model.clone(),
                    r#type: kind.to_owned(),
                })
                .inc_by(count(tokens));
        }
    }

    /// A live model call failed with error kind `kind`.
    pub fn model_error(&self, provider: &str, model: &str, elapsed: Duration, kind: &str) {
        let model = self.model_names.admit(model);
        let labels = ModelLabels {
            provider: provider.to_owned(),
            model,
        };
        self.count_model_call(&labels, "error");
        self.model_duration
            .get_or_create(&labels)
            .observe(seconds(elapsed));
        self.model_errors
            .get_or_create(&ModelError {
                provider: labels.provider,
                model: labels.model,
                kind: kind.to_owned(),
            })
            .inc();
    }

    fn count_model_call(&self, labels: &ModelLabels, outcome: &str) {
        self.model_calls
            .get_or_create(&ModelOutcome {
                provider: labels.provider.clone(),
                model: labels.model.clone(),
                outcome: outcome.to_owned(),
            })
            .inc();
    }

    /// A model call served from the journal (no provider was called).
    pub fn model_replayed(&self, provider: &str, model: &str) {
        let model = self.model_names.admit(model);
        self.replayed_model_calls
            .get_or_create(&ModelLabels {
                provider: provider.to_owned(),
                model,
            })
            .inc();
    }

    /// A tool call the host executed; `error_kind` is `None` when it succeeded.
    pub fn tool_call(&self, tool: &str, elapsed: Duration, error_kind: Option<&str>) {
        let tool = self.tool_names.admit(tool);
        self.tool_calls
            .get_or_create(&ToolOutcome {
                tool: tool.clone(),
                outcome: if error_kind.is_some() {
                    "error"
                } else {
                    "success"
                }
                .to_owned(),
            })
            .inc();
        self.tool_duration
            .get_or_create(&ToolLabel { tool: tool.clone() })
            .observe(seconds(elapsed));
        if let Some(kind) = error_kind {
            self.tool_errors
                .get_or_create(&ToolError {
                    tool,
                    kind: kind.to_owned(),
                })
                .inc();
        }
    }

    /// An approval request was written.
    pub fn approval_requested(&self) {
        self.approvals_requested.inc();
    }

    /// `occurrences` secret values were replaced in a record before it was journaled.
    pub fn redacted(&self, occurrences: u64) {
        self.redactions.inc_by(occurrences);
    }

    /// An approval was decided `waited` after it was requested.
    pub fn approval_decided(&self, approved: bool, waited: Duration) {
        let decision = if approved { "approved" } else { "denied" };
        self.approvals_decided
            .get_or_create(&Decision {
                decision: decision.to_owned(),
            })
            .inc();
        self.approval_decision_duration.observe(seconds(waited));
    }

    /// Approval requests waiting for a decision (from the journal).
    pub fn set_approvals_pending(&self, pending: i64) {
        self.approvals_pending.set(pending);
    }

    /// Sessions by compute state (from the journal); states absent from `counts` read zero.
    pub fn set_sessions(&self, counts: &[(&str, i64)]) {
        self.sessions.clear();
        for (state, sessions) in counts {
            self.sessions
                .get_or_create(&ComputeState {
                    compute_state: (*state).to_owned(),
                })
                .set(*sessions);
        }
    }

    /// A journal append became durable (or failed) `elapsed` after the caller made it.
    pub fn journal_append(&self, elapsed: Duration) {
        self.journal_append_duration.observe(seconds(elapsed));
    }

    /// A journal writer committed `commands` in one transaction taking `elapsed`, with `queued`
    /// more commands waiting behind it.
    pub fn journal_batch(&self, backend: &str, commands: usize, elapsed: Duration, queued: usize) {
        let backend = Backend {
            backend: backend.to_owned(),
        };
        #[allow(clippy::cast_precision_loss, reason = "batch sizes are small")]
        self.journal_batch_size
            .get_or_create(&backend)
            .observe(commands as f64);
        self.journal_commit_duration
            .get_or_create(&backend)
            .observe(seconds(elapsed));
        self.journal_queue_depth
            .get_or_create(&backend)
            .set(i64::try_from(queued).unwrap_or(i64::MAX));
    }

    /// The SQLite journal fdatasync'd its write-ahead log.
    pub fn journal_fsync(&self, elapsed: Duration) {
        self.journal_fsync_duration.observe(seconds(elapsed));
    }

    /// A runtime operation (`create`, `snapshot`, `restore`, `fork`, `stop`) ended.
    pub fn runtime_operation(&self, operation: &str, succeeded: bool, elapsed: Duration) {
        self.runtime_operations
            .get_or_create(&OperationOutcome {
                operation: operation.to_owned(),
                outcome: if succeeded { "success" } else { "error" }.to_owned(),
            })
            .inc();
        self.runtime_duration
            .get_or_create(&OperationLabel {
                operation: operation.to_owned(),
            })
            .observe(seconds(elapsed));
    }

    /// A Sessions RPC returned `code` (`OK`, `NOT_FOUND`, …).
    pub fn rpc(&self, method: &str, code: &str, elapsed: Duration) {
        self.rpcs
            .get_or_create(&MethodCode {
                method: method.to_owned(),
                code: code.to_owned(),
            })
            .inc();
        self.rpc_duration
            .get_or_create(&MethodLabel {
                method: method.to_owned(),
            })
            .observe(seconds(elapsed));
    }
}

/// Reads the gauges that describe stored state (sessions by compute state, pending approvals)
/// right before a scrape encodes the registry.
pub trait GaugeSource: Send + Sync {
    /// Sets the gauges on `metrics`; a failure leaves the previous values and is the source's to
    /// log.
    fn refresh<'a>(&'a self, metrics: &'a Metrics)
    -> Pin<Box<dyn Future<Output = ()> + Send + 'a>>;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let scrape = prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_owned())))
            .expect("the exposition parses");
        scrape
            .samples
            .into_iter()
            .find(|s| {
                s.metric == name
                    && labels
                        .iter()
                        .all(|(k, v)| s.labels.get(k).is_some_and(|got| got == *v))
            })
            .map(|s| match s.value {
                prometheus_parse::Value::Counter(v)
                | prometheus_parse::Value::Gauge(v)
                | prometheus_parse::Value::Untyped(v) => v,
                prometheus_parse::Value::Histogram(h) => h.last().map_or(0.0, |b| b.count),
                prometheus_parse::Value::Summary(_) => f64::NAN,
            })
    }

    #[test]
    fn recorded_work_shows_in_the_exposition() {
        let m = Metrics::new();
        m.turn("chat", "completed", Duration::from_millis(20));
        m.model_call("openai", "gpt", Duration::from_millis(5), 11, 7);
        m.model_call("openai", "gpt", Duration::from_millis(5), 11, 7);
        m.tool_call(
            "fixture__count",
            Duration::from_millis(1),
            Some("executor_error"),
        );
        m.journal_batch("sqlite", 3, Duration::from_micros(300), 2);
        m.set_sessions(&[("RUNNING", 2)]);
        let text = m.encode(Exposition::PrometheusText).unwrap();
        assert_eq!(
            sample(
                &text,
                "agentsessions_turns_total",
                &[("harness", "chat"), ("outcome", "completed")]
            ),
            Some(1.0),
            "{text}"
        );
        assert_eq!(
            sample(
                &text,
                "agentsessions_model_tokens_total",
                &[("type", "input")]
            ),
            Some(22.0),
            "{text}"
        );
        assert_eq!(
            sample(
                &text,
                "agentsessions_tool_errors_total",
                &[("kind", "executor_error")]
            ),
            Some(1.0),
            "{text}"
        );
        assert_eq!(
            sample(
                &text,
                "agentsessions_journal_queue_depth",
                &[("backend", "sqlite")]
            ),
            Some(2.0),
            "{text}"
        );
        assert_eq!(
            sample(
                &text,
                "agentsessions_sessions",
                &[("compute_state", "RUNNING")]
            ),
            Some(2.0),
            "{text}"
        );
        m.set_sessions(&[]);
        let text = m.encode(Exposition::PrometheusText).unwrap();
        assert_eq!(
            sample(
                &text,
                "agentsessions_sessions",
                &[("compute_state", "RUNNING")]
            ),
            None,
            "a state no session is in any more disappears: {text}"
        );
    }

    // The Prometheus text format: every sample belongs to a family named by a HELP and a TYPE
    // line (a histogram's samples by their suffixes), which is what `promtool check metrics`
    // reads; the OpenMetrics answer keeps its own names and ends with `# EOF`.
    #[test]
    fn every_sample_has_the_help_and_type_of_its_family() {
        let m = Metrics::new();
        m.turn("chat", "completed", Duration::from_millis(20));
        m.model_call("openai", "gpt", Duration::from_millis(5), 11, 7);
        m.model_error("openai", "gpt", Duration::from_millis(5), "timeout");
        m.model_replayed("openai", "gpt");
        m.tool_call("fixture__count", Duration::from_millis(1), Some("denied"));
        m.approval_requested();
        m.approval_decided(true, Duration::from_secs(3));
        m.redacted(1);
        m.set_approvals_pending(1);
        m.journal_append(Duration::from_micros(80));
        m.journal_batch("sqlite", 3, Duration::from_micros(300), 2);
        m.journal_fsync(Duration::from_micros(90));
        m.set_sessions(&[("RUNNING", 2)]);
        m.runtime_operation("create", true, Duration::from_millis(3));
        m.rpc("Exec", "OK", Duration::from_millis(3));
        let text = m.encode(Exposition::PrometheusText).unwrap();
        let mut helped = std::collections::HashSet::new();
        let mut typed = std::collections::HashMap::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# HELP ") {
                helped.insert(rest.split(' ').next().unwrap().to_owned());
            } else if let Some(rest) = line.strip_prefix("# TYPE ") {
                let (name, kind) = rest.split_once(' ').unwrap();
                typed.insert(name.to_owned(), kind.to_owned());
            } else {
                assert!(!line.starts_with('#'), "a 0.0.4 exposition has no {line:?}");
                let sample = line.split(['{', ' ']).next().unwrap();
                let family = ["_bucket", "_sum", "_count"]
                    .iter()
                    .filter_map(|suffix| sample.strip_suffix(suffix))
                    .find(|base| typed.get(*base).is_some_and(|kind| kind == "histogram"))
                    .unwrap_or(sample);
                assert!(
                    helped.contains(family),
                    "{sample} has no help text:\n{text}"
                );
                assert!(typed.contains_key(family), "{sample} has no type:\n{text}");
                if sample.ends_with("_total") {
                    assert_eq!(typed[family], "counter", "{sample}");
                }
            }
        }
        assert!(typed.len() >= 20, "{text}");
        let openmetrics = m.encode(Exposition::OpenMetrics).unwrap();
        assert!(openmetrics.ends_with("# EOF\n"), "{openmetrics}");
        assert!(
            openmetrics.contains("# TYPE agentsessions_turns counter"),
            "{openmetrics}"
        );
    }
}
