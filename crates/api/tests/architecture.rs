//! Architecture rules as a test (STYLE rule 15): internal dependencies point one way
//! (`api <- wire <- journal <- controller <- placement <- server <- cli`), the plug-in crates
//! never depend on the server, and the neutral core depends on no backend, vendor or producer
//! crate.
#![allow(clippy::tests_outside_test_module)]

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use serde_json::Value;

/// For each workspace crate (directory name), the internal crates it may depend on.
fn allowed() -> BTreeMap<&'static str, BTreeSet<&'static str>> {
    let core = [
        "api",
        "wire",
        "journal",
        "controller",
        "placement",
        "server",
    ];
    let mut map = BTreeMap::new();
    for (i, name) in core.iter().enumerate() {
        let mut deps: BTreeSet<&str> = core[..i].iter().copied().collect();
        if *name == "server" {
            deps.extend([
                "harnesswire",
                "runtime",
                "model",
                "harnesses",
                "postgres",
                "auth",
            ]);
        }
        map.insert(*name, deps);
    }
    for plugin in ["harnesswire", "runtime", "model", "harnesses"] {
        map.insert(
            plugin,
            BTreeSet::from(["api", "wire", "harnesswire", "model"]),
        );
    }
    // The durable backends: what they share comes from the journal (its rules, stored rows and
    // writer queue); each holds its own SQL and I/O.
    map.insert("postgres", BTreeSet::from(["api", "wire", "journal"]));
    map.insert("sqlite", BTreeSet::from(["api", "wire", "journal"]));
    // What the backends' tests share (the conformance suite, fixtures, `Instrumented`): a
    // dev-dependency of the crates that test against a journal, standing on the journal alone.
    map.insert("testkit", BTreeSet::from(["api", "wire", "journal"]));
    // The runtime's tests drive the reference harnesses.
    if let Some(runtime) = map.get_mut("runtime") {
        runtime.insert("harnesses");
    }
    // The harness binary: a reference harness behind the SDK, with the TLS settings loader.
    map.insert(
        "harnessnode",
        BTreeSet::from([
            "api",
            "wire",
            "harnesses",
            "harnesswire",
            "model",
            "runtime",
            "auth",
        ]),
    );
    // Tools from MCP servers: offered through the api catalog, run as the controller's executor,
    // calling HTTP servers with tokens the auth crate's delegated identity mints.
    map.insert(
        "mcp",
        BTreeSet::from(["api", "wire", "journal", "controller", "auth"]),
    );
    // Transport security and verified identity: the SPI types only.
    map.insert("auth", BTreeSet::from(["api"]));
    // The SDK reuses the wire crate's channel and request ids and the journal's chain verifier.
    map.insert(
        "client",
        BTreeSet::from(["api", "wire", "journal", "harnesswire", "auth"]),
    );
    // The web console: an HTTP front end over the server's service, reading records with the
    // SDK's decoder and writing the journal's audit bundle.
    map.insert(
        "console",
        BTreeSet::from(["api", "wire", "journal", "server", "auth", "client"]),
    );
    // The QEMU microVM runtime: a Runtime and InstanceRestorer over the SPI types only.
    map.insert("microvm", BTreeSet::from(["api"]));
    // Observability is a leaf every crate may record through (spans, metrics, propagation);
    // it depends on no other crate of ours.
    for deps in map.values_mut() {
        deps.insert("telemetry");
    }
    map.insert("telemetry", BTreeSet::new());
    let everything: BTreeSet<&str> = map.keys().copied().collect();
    map.insert("conformance", everything.clone());
    let mut with_suite = everything;
    with_suite.insert("conformance");
    // The fuzz targets reach every decoder, the daemon's configuration and HTTP API included.
    let mut fuzz = with_suite.clone();
    fuzz.insert("cli");
    map.insert("cli", with_suite);
    map.insert("fuzz", fuzz);
    map
}

/// Crates the neutral core must never pull in: vendor SDKs, producer clients, runtime backends.
const FORBIDDEN_IN_CORE: &[&str] = &[
    "async-openai",
    "anthropic",
    "octocrab",
    "aws-sdk",
    "azure",
    "kube",
    "agentsessions-model",
    "agentsessions-runtime",
    "agentsessions-harnesses",
];

#[test]
fn dependency_arrows_point_one_way() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let out = Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: Value = serde_json::from_slice(&out.stdout).expect("metadata is JSON");
    let allowed = allowed();
    let packages = meta["packages"].as_array().expect("packages");
    assert!(packages.len() >= 3, "expected the workspace crates");
    for package in packages {
        let name = package["name"].as_str().unwrap_or_default();
        let short = name
            .strip_prefix("agentsessions-")
            .expect("crates are agentsessions-<dir>");
        let may = allowed
            .get(short)
            .unwrap_or_else(|| panic!("crate {name} is not in the architecture; add it"));
        for dep in package["dependencies"].as_array().into_iter().flatten() {
            if dep["kind"].as_str() == Some("dev") {
                continue;
            }
            let dep_name = dep["name"].as_str().unwrap_or_default();
            if let Some(internal) = dep_name.strip_prefix("agentsessions-") {
                assert!(
                    may.contains(internal),
                    "{name} must not depend on {dep_name} (arrows: api <- wire <- journal <- \
                     controller <- placement <- server <- cli)"
                );
            }
            if ["api", "wire", "journal", "controller", "placement"].contains(&short) {
                assert!(
                    !FORBIDDEN_IN_CORE.iter().any(|f| dep_name.starts_with(f)),
                    "neutral core crate {name} depends on {dep_name}"
                );
            }
        }
    }
}
