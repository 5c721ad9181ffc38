//! The recorded effect stream of one execution and the pure rules that match a harness's calls
//! against it (semantics §3.3 step 4, §3.7). No I/O: each function consumes recorded effects and
//! says what to serve, where the harness diverged, or that the record ends here.
//!
//! Each consumed effect is also regenerated — the event the live sink would have written for the
//! same call — and hashed at the recorded position, counting the effects that are reproduced
//! byte for byte (I5).

use agentsessions_api::{
    ApprovalResult, Event, EventBody, EventKind, JsonObject, Mediation, Message, ModelCall,
    ModelRequest, ModelResponse, ToolCall, ToolResult, Usage,
};
use agentsessions_journal::LogRecord;
use agentsessions_wire::{content_hash, pb};
use serde_json::Value;

/// The effects of one execution, with a cursor.
#[derive(Debug, Default)]
pub struct Recorded {
    records: Vec<LogRecord>,
    position: usize,
    /// Consumed effects whose regenerated event hashes to the recorded hash.
    pub reproduced: usize,
}

/// What a model call finds in the record.
#[derive(Debug)]
pub enum ModelStep {
    /// The recorded completion, to be returned.
    Served(ModelResponse),
    /// The harness asked for something else.
    Diverged(String),
    /// The MODEL_CALL matched but no OUTPUT follows it; `last` when nothing else is recorded.
    CompletionMissing {
        /// True when the MODEL_CALL was the last recorded effect.
        last: bool,
    },
    /// Nothing is left to serve.
    Exhausted,
}

/// What a controller-mediated tool call finds in the record.
#[derive(Debug)]
pub enum ToolStep {
    /// The recorded result.
    Served(ToolResult),
    /// The harness asked for something else.
    Diverged(String),
    /// The intent matched but has no result.
    ResultMissing {
        /// True when the TOOL_CALL was the last recorded effect.
        last: bool,
        /// The call as recorded, to re-drive with.
        recorded: ToolCall,
    },
}

/// An approval gate (a gated call with its request, decision and receipt) as the record holds it.
#[derive(Debug)]
pub struct RecordedGate {
    /// Seq of the APPROVAL_REQUEST.
    pub request_seq: i64,
    /// The decision.
    pub decision: ApprovalResult,
    /// Seq of the APPROVAL_RESULT.
    pub decision_seq: i64,
    /// The receipt, when written.
    pub receipt: Option<ToolResult>,
}

impl Recorded {
    /// A cursor at the start of `records` (the execution's effect records in journal order).
    pub fn new(records: Vec<LogRecord>) -> Self {
        Self {
            records,
            position: 0,
            reproduced: 0,
        }
    }

    /// Whether every recorded effect was consumed.
    pub fn exhausted(&self) -> bool {
        self.position >= self.records.len()
    }

    /// Effects recorded in total.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// Effects consumed so far.
    pub fn consumed(&self) -> usize {
        self.position.min(self.records.len())
    }

    /// The recorded effects not consumed yet, in order.
    pub fn rest(&self) -> &[LogRecord] {
        self.records.get(self.position..).unwrap_or_default()
    }

    /// How a run that stopped before consuming every recorded effect diverged, told of
    /// `subject` (`the harness`, `execution …`); `None` when the record was consumed whole.
    pub fn unconsumed(&self, subject: &str) -> Option<String> {
        (!self.exhausted()).then(|| {
            format!(
                "{subject} consumed {} of {} recorded effects",
                self.consumed(),
                self.len()
            )
        })
    }

    /// When the recorded effect at `seq` was committed (approval waits are measured from it).
    pub fn committed_at(&self, seq: i64) -> Option<agentsessions_api::Timestamp> {
        self.records
            .iter()
            .find(|r| r.seq == seq)
            .and_then(|r| r.committed_at.or(r.event.timestamp))
    }

    fn peek(&self) -> Option<&LogRecord> {
        self.records.get(self.position)
    }

    fn peek_kind(&self, kind: EventKind) -> Option<&LogRecord> {
        self.peek().filter(|r| r.event.kind == kind)
    }

    fn consume(&mut self, regenerated: Option<&Event>) {
        if let (Some(record), Some(event)) = (self.records.get(self.position), regenerated)
            && reproduces(record, event)
        {
            self.reproduced += 1;
        }
        self.position += 1;
    }
}

/// Whether `event` hashes to `record`'s hash at `record`'s position.
fn reproduces(record: &LogRecord, event: &Event) -> bool {
    content_hash(&record.prev_hash, record.seq, &pb::Event::from(event))
        .is_ok_and(|hash| hash == record.hash)
}

fn regenerated(record: &LogRecord, kind: EventKind, body: EventBody) -> Event {
    Event::new(kind, body).with_execution(record.event.execution_id.clone())
}

fn describe(record: Option<&LogRecord>) -> String {
    match record {
        Some(r) => format!("{} at seq {}", r.event.kind.as_str(), r.seq),
        None => "nothing".to_owned(),
    }
}

/// Consumes a MODEL_CALL (with its OUTPUT, and the USAGE right after it) for `request` whose
/// model-input hash is `hash`.
pub fn take_model(recorded: &mut Recorded, request: &ModelRequest, hash: &str) -> ModelStep {
    let Some(next) = recorded.peek() else {
        return ModelStep::Exhausted;
    };
    let Some(EventBody::ModelCall(call)) = &next.event.body else {
        return ModelStep::Diverged(format!(
            "the harness called the model where the journal records {}",
            describe(Some(next))
        ));
    };
    if call.input_hash != hash {
        return ModelStep::Diverged(format!(
            "model input hash mismatch at seq {} (recorded {}, harness sent {hash})",
            next.seq, call.input_hash
        ));
    }
    let again = regenerated(
        next,
        EventKind::ModelCall,
        EventBody::ModelCall(ModelCall {
            model: request.model.clone(),
            params: Default::default(),
            input_hash: hash.to_owned(),
            id: call.id.clone(),
        }),
    );
    recorded.consume(Some(&again));
    let message = match recorded.peek_kind(EventKind::Output) {
        Some(output) => output.event.message().cloned(),
        None => None,
    };
    let Some(message) = message else {
        return ModelStep::CompletionMissing {
            last: recorded.exhausted(),
        };
    };
    let again = recorded
        .peek()
        .map(|r| regenerated(r, EventKind::Output, EventBody::Message(message.clone())));
    recorded.consume(again.as_ref());
    // A USAGE right after the OUTPUT is the answer's own (the live sink appends the two together,
    // and a harness that reports usage at once records it there too): it is consumed with the
    // answer and served in it, and the harness's report of it is matched by the sink.
    let usage = match recorded.peek_kind(EventKind::Usage).map(|r| &r.event.body) {
        Some(Some(EventBody::Usage(usage))) => usage.clone(),
        _ => {
            return ModelStep::Served(ModelResponse {
                message,
                usage: Usage::default(),
            });
        }
    };
    let again = recorded
        .peek()
        .map(|r| regenerated(r, EventKind::Usage, EventBody::Usage(usage.clone())));
    recorded.consume(again.as_ref());
    ModelStep::Served(ModelResponse { message, usage })
}

/// Consumes an OUTPUT whose text is `text`.
///
/// # Errors
/// The divergence, when the next effect is something else.
pub fn take_output(recorded: &mut Recorded, text: &str) -> Result<(), String> {
    let next = recorded.peek();
    match next.and_then(|r| r.event.message()) {
        Some(message) if next.is_some_and(|r| r.event.kind == EventKind::Output) => {
            if message.text() != text {
                return Err(format!(
                    "output differs from the OUTPUT recorded at {}",
                    describe(next)
                ));
            }
        }
        _ => {
            return Err(format!(
                "the harness emitted output where the journal records {}",
                describe(next)
            ));
        }
    }
    let again = next.map(|r| {
        regenerated(
            r,
            EventKind::Output,
            EventBody::Message(Message::text_message("assistant", text)),
        )
    });
    recorded.consume(again.as_ref());
    Ok(())
}

/// Whether the next recorded effect is an ordinary TOOL_CALL with `id`, so an unmediated call
/// with that id is compared (and diverges) rather than refused as unmediated.
pub fn next_call_has_id(recorded: &Recorded, id: &str) -> bool {
    match recorded
        .peek_kind(EventKind::ToolCall)
        .map(|r| &r.event.body)
    {
        Some(Some(EventBody::ToolCall(call))) => {
            call.id == id && call.mediation != Mediation::RequiresApproval
        }
        _ => false,
    }
}

/// Consumes a TOOL_CALL matching `call` and serves its TOOL_RESULT.
pub fn take_tool(recorded: &mut Recorded, call: &ToolCall) -> ToolStep {
    let next = recorded.peek();
    let Some(Some(EventBody::ToolCall(recorded_call))) = next
        .filter(|r| r.event.kind == EventKind::ToolCall)
        .map(|r| &r.event.body)
    else {
        return ToolStep::Diverged(format!(
            "the harness called tool {:?} where the journal records {}",
            call.tool,
            describe(next)
        ));
    };
    if let Err(reason) = match_tool_call(recorded_call, call) {
        return ToolStep::Diverged(reason);
    }
    let recorded_call = recorded_call.clone();
    let again =
        next.map(|r| regenerated(r, EventKind::ToolCall, EventBody::ToolCall(call.clone())));
    recorded.consume(again.as_ref());
    let result = match recorded
        .peek_kind(EventKind::ToolResult)
        .map(|r| &r.event.body)
    {
        Some(Some(EventBody::Result(result))) => result.clone(),
        _ => {
            return ToolStep::ResultMissing {
                last: recorded.exhausted(),
                recorded: recorded_call,
            };
        }
    };
    if result.id != call.id {
        return ToolStep::Diverged(format!(
            "recorded result id {:?} does not answer call {:?}",
            result.id, call.id
        ));
    }
    let again = recorded
        .peek()
        .map(|r| regenerated(r, EventKind::ToolResult, EventBody::Result(result.clone())));
    recorded.consume(again.as_ref());
    ToolStep::Served(result)
}

/// Consumes a gated call's TOOL_CALL, APPROVAL_REQUEST, APPROVAL_RESULT and (if written) its
/// receipt.
///
/// # Errors
/// The divergence when the record does not hold that gate.
pub fn take_gate(recorded: &mut Recorded, call: &ToolCall) -> Result<RecordedGate, String> {
    let next = recorded.peek();
    let Some(Some(EventBody::ToolCall(recorded_call))) = next
        .filter(|r| r.event.kind == EventKind::ToolCall)
        .map(|r| &r.event.body)
    else {
        return Err(format!(
            "the harness made gated call {:?} where the journal records {}",
            call.id,
            describe(next)
        ));
    };
    match_tool_call(recorded_call, call)?;
    recorded.consume(None);
    let request = recorded.peek_kind(EventKind::ApprovalRequest);
    let request_seq = match request.map(|r| (&r.event.body, r.seq)) {
        Some((Some(EventBody::Approval(req)), seq)) if req.tool_call_id == call.id => seq,
        _ => {
            return Err(format!(
                "gated call {:?} has no recorded approval request",
                call.id
            ));
        }
    };
    recorded.consume(None);
    let decision = recorded.peek_kind(EventKind::ApprovalResult);
    let (decision, decision_seq) = match decision.map(|r| (&r.event.body, r.seq)) {
        Some((Some(EventBody::ApprovalResult(res)), seq))
            if res.tool_call_id == call.id && res.request_seq == request_seq =>
        {
            (res.clone(), seq)
        }
        _ => return Err(format!("gated call {:?} has no recorded decision", call.id)),
    };
    recorded.consume(None);
    let receipt = match recorded
        .peek_kind(EventKind::ToolResult)
        .map(|r| &r.event.body)
    {
        Some(Some(EventBody::Result(result))) => {
            if result.id != call.id
                || result.approval_request_seq != request_seq
                || result.approval_decision_seq != decision_seq
            {
                return Err(format!(
                    "recorded receipt does not match gated call {:?}",
                    call.id
                ));
            }
            let receipt = result.clone();
            recorded.consume(None);
            Some(receipt)
        }
        _ => None,
    };
    Ok(RecordedGate {
        request_seq,
        decision,
        decision_seq,
        receipt,
    })
}

/// Consumes the TOOL_RESULT of an in-harness tool (re-run by the harness; not compared).
///
/// # Errors
/// The divergence when the next effect is not a TOOL_RESULT.
pub fn take_report(recorded: &mut Recorded) -> Result<(), String> {
    if recorded.peek_kind(EventKind::ToolResult).is_none() {
        return Err(format!(
            "the harness reported a tool result where the journal records {}",
            describe(recorded.peek())
        ));
    }
    recorded.consume(None);
    Ok(())
}

/// Consumes a USAGE equal to `usage` field for field.
///
/// # Errors
/// The divergence when the next effect is not that USAGE.
pub fn take_usage(recorded: &mut Recorded, usage: &Usage) -> Result<(), String> {
    let next = recorded.peek();
    match next
        .filter(|r| r.event.kind == EventKind::Usage)
        .map(|r| &r.event.body)
    {
        Some(Some(EventBody::Usage(recorded_usage))) if recorded_usage == usage => {}
        _ => {
            return Err(format!(
                "usage differs from the journal, which records {}",
                describe(next)
            ));
        }
    }
    let again = next.map(|r| regenerated(r, EventKind::Usage, EventBody::Usage(usage.clone())));
    recorded.consume(again.as_ref());
    Ok(())
}

/// The tool identity check of semantics §3.7.
///
/// # Errors
/// What differs.
pub fn match_tool_call(recorded: &ToolCall, emitted: &ToolCall) -> Result<(), String> {
    let host_run = recorded.mediation == Mediation::ControllerMediated
        || (recorded.mediation == Mediation::RequiresApproval && !recorded.id.is_empty());
    if !host_run || recorded.idempotency_key.is_empty() {
        return Err(format!(
            "recorded call {:?} is not a host-mediated call with an idempotency key",
            recorded.id
        ));
    }
    let field = if recorded.id != emitted.id {
        "id"
    } else if recorded.tool != emitted.tool {
        "tool"
    } else if recorded.mediation != emitted.mediation {
        "mediation"
    } else if recorded.idempotency_key != emitted.idempotency_key {
        "idempotency key"
    } else if !args_equal(recorded.args.as_ref(), emitted.args.as_ref()) {
        "arguments"
    } else {
        return Ok(());
    };
    Err(format!(
        "tool call {:?} differs from the recorded call in its {field}",
        emitted.id
    ))
}

/// Arguments must survive the wire's Struct form (every number a float64).
///
/// # Errors
/// What cannot be represented.
pub fn check_args(args: Option<&JsonObject>) -> Result<(), String> {
    args.map_or(Ok(()), |map| {
        agentsessions_wire::convert::check_struct_exact(map, "args")
    })
}

/// Equality after a round trip through the wire form: numbers compare as float64, maps ignore
/// order, an absent map equals an empty one.
fn args_equal(a: Option<&JsonObject>, b: Option<&JsonObject>) -> bool {
    fn value_equal(a: &Value, b: &Value) -> bool {
        match (a, b) {
            (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
            (Value::Array(x), Value::Array(y)) => {
                x.len() == y.len() && x.iter().zip(y).all(|(a, b)| value_equal(a, b))
            }
            (Value::Object(x), Value::Object(y)) => map_equal(x, y),
            _ => a == b,
        }
    }
    fn map_equal(x: &JsonObject, y: &JsonObject) -> bool {
        x.len() == y.len()
            && x.iter()
                .all(|(k, v)| y.get(k).is_some_and(|w| value_equal(v, w)))
    }
    let empty = JsonObject::new();
    map_equal(a.unwrap_or(&empty), b.unwrap_or(&empty))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn object(v: Value) -> JsonObject {
        match v {
            Value::Object(m) => m,
            _ => JsonObject::new(),
        }
    }

    fn call(args: Value) -> ToolCall {
        ToolCall {
            id: "t1".into(),
            tool: "charge".into(),
            args: Some(object(args)),
            mediation: Mediation::ControllerMediated,
            idempotency_key: "k1".into(),
        }
    }

    // semantics §3.7: args compare after the wire round trip (2 == 2.0, order-insensitive).
    #[test]
    fn args_compare_as_float64() {
        let recorded = call(json!({"count": 2.0, "a": [1, {"b": true}]}));
        let emitted = call(json!({"a": [1.0, {"b": true}], "count": 2}));
        match_tool_call(&recorded, &emitted).unwrap();
        let other = call(json!({"count": 3}));
        assert!(
            match_tool_call(&recorded, &other)
                .unwrap_err()
                .contains("arguments")
        );
    }

    // semantics §3.7: every identity field must match, and the recorded call must be mediated.
    #[test]
    fn identity_fields_must_match() {
        let recorded = call(json!({}));
        let mut emitted = recorded.clone();
        emitted.idempotency_key = "k2".into();
        assert!(
            match_tool_call(&recorded, &emitted)
                .unwrap_err()
                .contains("key")
        );
        let mut unkeyed = recorded;
        unkeyed.idempotency_key.clear();
        assert!(match_tool_call(&unkeyed, &unkeyed).is_err());
    }

    // conformance 17: integers beyond ±2^53−1 cannot ride a float64.
    #[test]
    fn unsafe_integers_are_not_representable() {
        check_args(Some(&object(json!({"n": 9_007_199_254_740_991_u64})))).unwrap();
        let err = check_args(Some(&object(json!({"secret": 9_007_199_254_740_993_u64}))));
        assert!(err.unwrap_err().contains("args.secret"));
        assert!(check_args(Some(&object(json!({"x": [-9_007_199_254_740_993_i64]})))).is_err());
    }

    // semantics §3.3: an exhausted record has nothing to serve.
    #[test]
    fn empty_record_is_exhausted() {
        let mut recorded = Recorded::new(Vec::new());
        assert!(matches!(
            take_model(&mut recorded, &ModelRequest::default(), "h"),
            ModelStep::Exhausted
        ));
        assert!(take_output(&mut recorded, "x").is_err());
        assert!(take_report(&mut recorded).is_err());
    }

    // semantics §3.3: effects left unconsumed are a divergence, told of its subject.
    #[test]
    fn unconsumed_effects_are_a_divergence() {
        let record = LogRecord {
            committed_at: None,
            seq: 1,
            prev_hash: String::new(),
            hash: String::new(),
            fence: 0,
            event: Event::new(EventKind::Output, EventBody::Message(Message::default())),
        };
        let mut recorded = Recorded::new(vec![record]);
        assert_eq!(
            recorded.unconsumed("the harness").as_deref(),
            Some("the harness consumed 0 of 1 recorded effects")
        );
        take_output(&mut recorded, "").unwrap();
        assert_eq!(recorded.unconsumed("the harness"), None);
        assert_eq!(Recorded::default().unconsumed("x"), None);
    }
}
