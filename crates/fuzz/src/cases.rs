//! How many cases a fuzz run tries: a short default for CI, more on demand.

use proptest::test_runner::Config;

/// The environment variable that sets the cases per target (default [`DEFAULT_CASES`]).
pub const CASES_VARIABLE: &str = "AGENTSESSIONS_FUZZ_CASES";

/// Cases per target in a default (CI) run.
pub const DEFAULT_CASES: u32 = 256;

/// The cases per target of this run.
pub fn cases() -> u32 {
    std::env::var(CASES_VARIABLE)
        .ok()
        .and_then(|text| text.trim().parse().ok())
        .filter(|cases| *cases > 0)
        .unwrap_or(DEFAULT_CASES)
}

/// A proptest configuration with [`cases`] cases. Failures are not persisted by proptest: an
/// input that found a bug goes into the target's corpus by hand, with a regression test.
pub fn config() -> Config {
    config_scaled(1, 1)
}

/// [`config`] with `numerator / denominator` of the cases, for targets whose cases are slow
/// (each one a network round trip or a process).
pub fn config_scaled(numerator: u32, denominator: u32) -> Config {
    let scaled = cases().saturating_mul(numerator) / denominator.max(1);
    Config {
        cases: scaled.max(1),
        failure_persistence: None,
        max_shrink_iters: 256,
        ..Config::default()
    }
}
