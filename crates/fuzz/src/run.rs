//! Running one fuzz target: a proptest runner over its strategy that fails the test with the
//! smallest input that broke the rule, and, on success, appends the number of inputs tried to
//! `target/fuzz-tally.tsv` (the figures RELIABILITY.md quotes).

use std::fmt::Debug;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use proptest::strategy::Strategy;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

/// Runs `check` on `config.cases` inputs of `strategy`; a panic in `check` is a failure like an
/// `Err`.
///
/// # Panics
/// When an input breaks the rule: the message names the target and the shrunk input.
pub fn run<S>(
    target: &str,
    config: Config,
    strategy: &S,
    check: impl Fn(S::Value) -> Result<(), TestCaseError>,
) where
    S: Strategy,
    S::Value: Debug,
{
    let cases = config.cases;
    let mut runner = TestRunner::new(config);
    if let Err(failure) = runner.run(strategy, check) {
        panic!("fuzz target {target}: {failure}");
    }
    record(target, cases);
}

/// Appends `target<TAB>inputs` to the tally file (best effort: figures, not a check).
fn record(target: &str, inputs: u32) {
    let line = format!("{target}\t{inputs}\n");
    if let Ok(mut file) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(tally_path())
    {
        let _written = file.write_all(line.as_bytes());
    }
}

/// `target/fuzz-tally.tsv` of the workspace.
pub fn tally_path() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(
            || Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"),
            PathBuf::from,
        )
        .join("fuzz-tally.tsv")
}
