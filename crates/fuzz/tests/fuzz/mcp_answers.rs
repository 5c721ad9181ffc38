//! MCP servers' answers: the host's MCP hub connects to a server over stdio (the real child
//! process transport, handshake and tool listing), then calls one of its tools through the
//! ledger, while the server answers `initialize`, `tools/list` or `tools/call` with fuzzed
//! bytes (mutated answers, notifications and server requests around them, garbage). Every case
//! ends in tools or an error, never a panic, and in bounded time: the server
//! (`src/bin/mcp_peer.rs`) closes its side as soon as the hub could not go on, so a malformed
//! answer costs an EOF, not the hub's per-call timeout.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use agentsessions_api::{Mediation, ToolCall, ToolCatalog as _};
use agentsessions_controller::{ToolCallContext, ToolExecutor as _};
use agentsessions_fuzz::{Corpus, bytes_or_mutation, config, run};
use agentsessions_mcp::{McpHub, McpHubOptions, McpServerConfig, ToolLedger};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

/// A case that takes longer than this is a hang: a local process answering from files
/// takes milliseconds, and the hub's own timeouts (30 s) are far above it.
const CASE_LIMIT: Duration = Duration::from_secs(5);

/// The answers of one conversation: `initialize`, `tools/list`, `tools/call`.
type Answers = [Vec<u8>; 3];

/// The seeds of one step: the corpus files whose names start with `prefix`; those that once
/// found a bug (`<step>-found-*`) only with `found`, since as the valid neighbours of a fuzzed
/// step they would end most conversations early.
fn seeds(corpus: &Corpus, prefix: &str, found: bool) -> Vec<Vec<u8>> {
    let seeds: Vec<Vec<u8>> = corpus
        .seeds
        .iter()
        .filter(|(name, _)| name.starts_with(prefix) && (found || !name.contains("-found-")))
        .map(|(_, bytes)| bytes.clone())
        .collect();
    assert!(!seeds.is_empty(), "no corpus/mcp seeds named {prefix}*");
    seeds
}

/// One step fuzzed, the others valid, so every step's deep paths are reached.
fn answers() -> BoxedStrategy<Answers> {
    let corpus = Corpus::load("mcp").unwrap();
    let prefixes = ["initialize", "tools_list", "call_"];
    let valid =
        |step: usize| proptest::sample::select(seeds(&corpus, prefixes[step], false)).boxed();
    let fuzzed = |step: usize| bytes_or_mutation(seeds(&corpus, prefixes[step], true));
    prop_oneof![
        (fuzzed(0), valid(1), valid(2)).prop_map(|(a, b, c)| [a, b, c]),
        (valid(0), fuzzed(1), valid(2)).prop_map(|(a, b, c)| [a, b, c]),
        (valid(0), valid(1), fuzzed(2)).prop_map(|(a, b, c)| [a, b, c]),
    ]
    .boxed()
}

/// How far a conversation went.
#[derive(Debug)]
struct Reached {
    /// The hub connected and listed at least one tool.
    listed: bool,
    /// The call came back as a result that is not an error.
    answered: bool,
    /// The call's result or error, as text.
    text: String,
}

/// Starts a hub on a server answering `answers`, lists its tools and calls the first one (or
/// an unknown one when it offers none).
async fn converse(dir: &Path, case: usize, answers: &Answers, ledger: ToolLedger) -> Reached {
    let mut args = Vec::new();
    for (step, answer) in answers.iter().enumerate() {
        let path = dir.join(format!("case-{case}-{step}.jsonl"));
        std::fs::write(&path, answer).unwrap();
        args.push(path.to_string_lossy().into_owned());
    }
    let server = McpServerConfig {
        name: "fuzz".into(),
        command: env!("CARGO_BIN_EXE_mcp_peer").into(),
        args,
        ..McpServerConfig::default()
    };
    let options = McpHubOptions {
        // No reconnection within a case: the script is played once.
        initial_backoff: Duration::from_secs(600),
        ..McpHubOptions::default()
    };
    let hub = McpHub::start(vec![server], ledger, options).await.unwrap();
    let offered = hub.offered();
    let tool = offered
        .first()
        .map_or_else(|| "fuzz__count".to_owned(), |t| t.definition.name.clone());
    let call = ToolCall {
        id: format!("call-{case}"),
        tool,
        args: Some(serde_json::Map::new()),
        mediation: Mediation::default(),
        idempotency_key: String::new(),
    };
    let outcome = hub
        .execute_for(&ToolCallContext::new(&format!("s-{case}"), "e"), &call)
        .await;
    hub.shutdown().await;
    Reached {
        listed: !offered.is_empty(),
        answered: outcome.as_ref().is_ok_and(|result| !result.is_error),
        text: match outcome {
            Ok(result) => format!("{result:?}"),
            Err(e) => e.to_string(),
        },
    }
}

#[test]
fn mcp_server_answers_are_tools_results_or_errors() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ledger = ToolLedger::in_memory().unwrap();
    let cases = AtomicUsize::new(0);
    let listed = AtomicUsize::new(0);
    let answered = AtomicUsize::new(0);
    run("mcp/server_answers", config(), &answers(), |answers| {
        let case = cases.fetch_add(1, Ordering::Relaxed);
        let ended = runtime.block_on(async {
            tokio::time::timeout(
                CASE_LIMIT,
                converse(dir.path(), case, &answers, ledger.clone()),
            )
            .await
        });
        let Ok(reached) = ended else {
            return Err(TestCaseError::fail(format!(
                "the hub took more than {CASE_LIMIT:?} on a server's answers"
            )));
        };
        listed.fetch_add(usize::from(reached.listed), Ordering::Relaxed);
        answered.fetch_add(usize::from(reached.answered), Ordering::Relaxed);
        Ok(())
    });
    let (cases, listed, answered) = (
        cases.into_inner(),
        listed.into_inner(),
        answered.into_inner(),
    );
    eprintln!(
        "mcp/server_answers: {cases} cases, {listed} listed tools, {answered} calls answered"
    );
    // Not vacuous: the valid steps around the fuzzed one reach the listing and the call.
    assert!(listed > 0 && answered > 0, "no case got past the handshake");
}

// A tools/list answer with a nextCursor that the server hands out for ever (it answers every
// page alike): rmcp's list_all_tools followed it without end, holding the hub's startup until
// its connect timeout and, on a list_changed refresh, for ever, tools piling up page by page.
#[test]
fn a_server_paging_its_tools_for_ever_is_refused_in_bounded_time() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let corpus = Corpus::load("mcp").unwrap();
    let seed = |name: &str| corpus.seed(name).unwrap().to_vec();
    let answers = [
        seed("initialize.jsonl"),
        seed("tools_list-found-paged-for-ever.jsonl"),
        seed("call_result.jsonl"),
    ];
    let started = Instant::now();
    let outcome = runtime
        .block_on(async {
            let ledger = ToolLedger::in_memory().unwrap();
            tokio::time::timeout(CASE_LIMIT, converse(dir.path(), 0, &answers, ledger)).await
        })
        .expect("bounded time");
    eprintln!("paged for ever: {} ({:?})", outcome.text, started.elapsed());
    assert!(
        outcome.text.contains("did not end within"),
        "{}",
        outcome.text
    );
}
