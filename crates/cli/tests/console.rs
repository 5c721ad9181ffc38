//! The web console in a real headless Chromium (Debian's `chromium` and `chromium-driver`),
//! driven over WebDriver, against the real `agentsessionsd` serving `--http-addr` on 127.0.0.1,
//! with the offline `directive` model calling tools of the MCP fixture server (one of which
//! needs approval) and `agentctl` running turns beside the browser.
//!
//! The list shows created sessions; a session's timeline shows a turn's records and follows a
//! slow turn live; the fork tree shows children; a parked tool call is approved with the button
//! and the turn completes; a denied one ends as the spec says; markup in content stays inert;
//! a viewer without permission sees neither the session nor the button.
//!
//! Without Chromium the tests are skipped with a note, unless `AGENTSESSIONS_REQUIRE_BROWSER` is
//! set (as `.ci/run` does). With `CONSOLE_SCREENSHOT_DIR` set, the timeline and fork tree are
//! saved there as PNGs (the README's screenshots: `docs/console-*.png`).
#![allow(
    clippy::tests_outside_test_module,
    clippy::unwrap_used,
    clippy::print_stderr
)]

mod common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{CTL, Daemon, fixture_server};
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
const ISSUER: &str = "https://idp.console.e2e";
const AUDIENCE: &str = "agentsessions-console-e2e";
const SECRET: &str = "console-e2e-secret-with-more-than-32-bytes";

/// Whether Chromium and its driver are installed; missing, the calling test is skipped with a
/// note, unless `AGENTSESSIONS_REQUIRE_BROWSER` is set: then it fails.
fn browser_or_skip() -> bool {
    let installed = Path::new(CHROMIUM).exists() && Path::new(CHROMEDRIVER).exists();
    if !installed {
        assert!(
            std::env::var_os("AGENTSESSIONS_REQUIRE_BROWSER").is_none(),
            "chromium and chromium-driver are not installed, and AGENTSESSIONS_REQUIRE_BROWSER requires them"
        );
        eprintln!(
            "skipped: chromium and chromium-driver are not installed (apt-get install chromium chromium-driver)"
        );
    }
    installed
}

/// The daemon in `dir`: the directive model, the fixture MCP server whose `count` needs
/// approval, the console on an HTTP port; `extra` is appended to the config.
fn start(dir: &Path, extra: &str) -> (Daemon, String) {
    let config = dir.join("agentsessionsd.toml");
    std::fs::write(
        &config,
        format!(
            "journal = \"agents.db\"\n\
             model = \"directive\"\n\
             model_provider = \"directive\"\n\
             {extra}\n\
             [[mcp_servers]]\n\
             name = \"fixture\"\n\
             command = \"{server}\"\n\
             env = {{ MCP_FIXTURE_COUNT_FILE = \"{count}\" }}\n\
             approval = [\"count\"]\n",
            server = fixture_server().display(),
            count = dir.join("count").display(),
        ),
    )
    .unwrap();
    let mut command = Daemon::command();
    command
        .args([
            "--addr",
            "127.0.0.1:0",
            "--http-addr",
            "127.0.0.1:0",
            "--config",
        ])
        .arg(&config)
        .current_dir(dir)
        .stderr(Stdio::null());
    let (daemon, http) = Daemon::spawn_with_http(command);
    daemon.wait_for_mcp(&["fixture"]);
    (daemon, http)
}

/// A chromedriver on a free port and a headless Chromium session through it; both end when
/// dropped.
struct Browser {
    client: Option<Client>,
    driver: Child,
    runtime: tokio::runtime::Runtime,
    _profile: tempfile::TempDir,
}

impl Drop for Browser {
    fn drop(&mut self) {
        if let Some(client) = self.client.take() {
            let _ = self.runtime.block_on(client.close());
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

impl Browser {
    fn start() -> Self {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let driver = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "chromedriver did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        let profile = tempfile::tempdir().unwrap();
        let mut capabilities = serde_json::Map::new();
        capabilities.insert("browserName".into(), json!("chrome"));
        capabilities.insert(
            "goog:chromeOptions".into(),
            json!({
                "binary": CHROMIUM,
                "args": [
                    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                    "--no-first-run", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync",
                    "--disable-dev-shm-usage", "--window-size=1400,900",
                    format!("--user-data-dir={}", profile.path().display()),
                ],
            }),
        );
        let client = runtime
            .block_on(
                ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
                    .capabilities(capabilities)
                    .connect(&format!("http://127.0.0.1:{port}")),
            )
            .unwrap();
        Self {
            client: Some(client),
            driver,
            runtime,
            _profile: profile,
        }
    }

    fn client(&self) -> &Client {
        self.client.as_ref().unwrap()
    }

    fn goto(&self, url: &str) {
        self.runtime.block_on(self.client().goto(url)).unwrap();
    }

    /// Runs `script` (a function body) in the page.
    fn js(&self, script: &str) -> Value {
        self.runtime
            .block_on(self.client().execute(script, Vec::new()))
            .unwrap()
    }

    /// Waits until `script` returns true, failing with `what` after 30 s.
    fn wait(&self, what: &str, script: &str) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if self.js(script) == json!(true) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}; page text: {}",
                self.text("body")
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The visible text of the first element matching `css` ("" when there is none).
    fn text(&self, css: &str) -> String {
        self.js(&format!(
            "const e = document.querySelector({}); return e ? e.innerText : '';",
            json!(css)
        ))
        .as_str()
        .unwrap_or_default()
        .to_owned()
    }

    fn count(&self, css: &str) -> u64 {
        self.js(&format!(
            "return document.querySelectorAll({}).length;",
            json!(css)
        ))
        .as_u64()
        .unwrap()
    }

    fn click(&self, css: &str) {
        self.runtime
            .block_on(async { self.client().find(Locator::Css(css)).await?.click().await })
            .unwrap();
    }

    /// Saves a screenshot as `name` in `CONSOLE_SCREENSHOT_DIR`, when it is set.
    fn screenshot(&self, name: &str) {
        let Some(dir) = std::env::var_os("CONSOLE_SCREENSHOT_DIR") else {
            return;
        };
        let png = self.runtime.block_on(self.client().screenshot()).unwrap();
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(Path::new(&dir).join(name), png).unwrap();
    }
}

fn session_of(out: &str) -> String {
    out.lines()
        .find_map(|l| l.strip_prefix("session "))
        .map(|rest| {
            rest.split_whitespace()
                .next()
                .unwrap_or_default()
                .to_owned()
        })
        .unwrap_or_else(|| panic!("no session line in {out}"))
}

fn created(out: &str) -> String {
    out.trim().to_owned()
}

/// CSS for the timeline row of kind `kind` (`END`, `TOOL_CALL` …).
fn row(kind: &str) -> String {
    format!("#records tr.record[data-kind={kind}]")
}

fn has(css: &str) -> String {
    format!("return document.querySelector({}) !== null;", json!(css))
}

#[test]
fn the_console_lists_sessions_follows_a_slow_turn_live_and_draws_the_fork_tree() {
    if !browser_or_skip() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (daemon, http) = start(dir.path(), "");
    let browser = Browser::start();

    let first = created(&daemon.ok(&["create", "--name", "research", "--harness", "chat"]));
    let second = created(&daemon.ok(&["create", "--name", "drafts"]));
    browser.goto(&format!("http://{http}/"));
    browser.wait(
        "the sessions list",
        &has(&format!("tr.session-row[data-uid='{second}']")),
    );
    assert_eq!(browser.count("tr.session-row"), 2);
    let listed = browser.text("#sessions");
    assert!(
        listed.contains("research") && listed.contains("drafts"),
        "{listed}"
    );
    // Newest first.
    let order = browser
        .js("return [...document.querySelectorAll('tr.session-row')].map(r => r.dataset.uid);");
    assert_eq!(order, json!([second, first]));

    // A first turn, then the timeline opened from the list.
    daemon.ok(&[
        "exec",
        "--session",
        &first,
        "/tool fixture__add {\"a\": 2, \"b\": 3}",
    ]);
    browser.click(&format!("tr.session-row[data-uid='{first}'] a"));
    browser.wait("the first turn's end", &has(&row("END")));
    for kind in [
        "EXECUTION_START",
        "INPUT",
        "MODEL_CALL",
        "OUTPUT",
        "USAGE",
        "TOOL_CALL",
        "TOOL_RESULT",
        "END",
    ] {
        assert!(
            browser.count(&row(kind)) >= 1,
            "{kind}: {}",
            browser.text("#timeline")
        );
    }
    assert!(browser.text(&row("TOOL_CALL")).contains("fixture__add"));
    assert!(
        browser.text(&row("TOOL_RESULT")).contains('5'),
        "{}",
        browser.text(&row("TOOL_RESULT"))
    );
    let committed = browser.text(&format!("{} td.time", row("EXECUTION_START")));
    assert!(
        committed.starts_with("20") && committed.ends_with('Z'),
        "commit time: {committed}"
    );
    browser.wait(
        "the live stream",
        "return document.getElementById('live-status').textContent.includes('live');",
    );
    browser.wait(
        "the chain verification",
        "return document.getElementById('chain-status').className === 'ok';",
    );
    assert!(browser.text("#chain-status").contains("verified"));

    // A slow turn: its tool call shows while the tool still sleeps, then the end follows.
    let ends_before = browser.count(&row("END"));
    let uid = first.clone();
    let addr = daemon.addr.clone();
    let slow = std::thread::spawn(move || {
        Command::new(CTL)
            .args([
                "--server",
                &addr,
                "exec",
                "--session",
                &uid,
                "/tool fixture__sleep {\"ms\": 4000}",
            ])
            .output()
            .unwrap()
    });
    browser.wait(
        "the slow turn's tool call, live",
        "return [...document.querySelectorAll('#records tr.record[data-kind=TOOL_CALL]')].some(r => r.innerText.includes('fixture__sleep'));",
    );
    assert!(
        !slow.is_finished(),
        "the tool call showed while the turn was still running"
    );
    assert_eq!(
        browser.count(&row("END")),
        ends_before,
        "the turn has not ended yet"
    );
    browser.wait(
        "the slow turn's end",
        &format!(
            "return document.querySelectorAll({}).length > {ends_before};",
            json!(row("END"))
        ),
    );
    assert!(slow.join().unwrap().status.success());
    browser.wait(
        "the state after the turn",
        "return document.getElementById('exec-state').textContent === 'COMPLETED';",
    );
    browser.wait(
        "the chain verified up to the last record",
        "return document.getElementById('chain-status').textContent.includes(' ' + document.querySelectorAll('#records tr.record').length + ' records');",
    );
    browser.screenshot("console-timeline.png");

    // Forks: the tree shows the children under their parent, and navigates.
    daemon.ok(&[
        "fork",
        "--session",
        &first,
        "--at",
        "5",
        "--count",
        "2",
        "--names",
        "left,right",
    ]);
    browser.goto(&format!("http://{http}/?reload#/sessions/{first}"));
    browser.wait("two children in the fork tree", &format!(
        "return document.querySelectorAll('#fork-tree li[data-uid={first}] > ul > li').length === 2;"
    ));
    let tree = browser.text("#fork-tree");
    assert!(
        tree.contains("(left)") && tree.contains("(right)") && tree.contains("@5"),
        "{tree}"
    );
    browser.screenshot("console-fork-tree.png");
    let child = browser.js(&format!(
        "return document.querySelector('#fork-tree li[data-uid={first}] > ul > li').dataset.uid;"
    ));
    let child = child.as_str().unwrap().to_owned();
    browser.click(&format!("#fork-tree li[data-uid='{child}'] > a"));
    browser.wait("the child's page", &format!(
        "return location.hash === '#/sessions/{child}' && document.querySelector('#session-header h1') !== null && document.querySelector('#session-header h1').textContent.includes('{child}');"
    ));
    assert!(
        browser
            .text("#session-header")
            .contains(&format!("forked from {first}"))
    );

    // The list filters by name and state.
    browser.goto(&format!("http://{http}/#/?q=draft"));
    browser.wait(
        "the filtered list",
        "return document.querySelectorAll('tr.session-row').length === 1;",
    );
    assert!(browser.text("#sessions").contains("drafts"));
}

#[test]
fn approvals_are_decided_with_the_buttons_and_markup_in_content_stays_inert() {
    if !browser_or_skip() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (daemon, http) = start(dir.path(), "");
    let browser = Browser::start();

    // Approve: the parked call runs once and the turn completes.
    let out = daemon.parked(&["exec", "--harness", "chat", "/tool fixture__count {}"]);
    let approved = session_of(&out);
    browser.goto(&format!("http://{http}/#/approvals"));
    browser.wait(
        "the pending approval",
        &has(&format!(
            ".approval-panel[data-session='{approved}'] button.approve"
        )),
    );
    assert!(
        browser
            .text(".approval-panel .tool")
            .contains("fixture__count")
    );
    browser.goto(&format!("http://{http}/#/sessions/{approved}"));
    browser.wait("the approval panel", &has("#approval button.approve"));
    assert_eq!(browser.text("#exec-state"), "AWAITING");
    browser.click("#approval button.approve");
    browser.wait("the approved turn's end", &has(&row("END")));
    browser.wait(
        "the completed state",
        "return document.getElementById('exec-state').textContent === 'COMPLETED';",
    );
    assert!(browser.text(&row("APPROVAL_RESULT")).contains("approved"));
    assert!(browser.text(&row("TOOL_RESULT")).contains("ok"));
    assert_eq!(
        browser.count("#approval button"),
        0,
        "nothing waits any more"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("count"))
            .unwrap()
            .trim(),
        "1"
    );

    // Deny: the tool never runs; the call's result is the denial and the turn ends.
    let out = daemon.parked(&["exec", "--harness", "chat", "/tool fixture__count {}"]);
    let denied = session_of(&out);
    browser.goto(&format!("http://{http}/#/sessions/{denied}"));
    browser.wait("the approval panel", &has("#approval button.deny"));
    browser.click("#approval button.deny");
    browser.wait("the denied turn's end", &has(&row("END")));
    assert!(browser.text(&row("APPROVAL_RESULT")).contains("denied"));
    let result = browser.text(&row("TOOL_RESULT"));
    assert!(
        result.contains("error") && result.contains("APPROVAL_DENIED"),
        "{result}"
    );
    assert!(browser.text(&row("END")).contains("COMPLETED"));
    assert_eq!(
        std::fs::read_to_string(dir.path().join("count"))
            .unwrap()
            .trim(),
        "1",
        "a denied tool never runs"
    );

    // A session in another project: its page finds its approval all the same.
    let out = daemon.parked(&[
        "--project",
        "elsewhere",
        "exec",
        "--harness",
        "chat",
        "/tool fixture__count {}",
    ]);
    let elsewhere = session_of(&out);
    browser.goto(&format!("http://{http}/#/sessions/{elsewhere}"));
    browser.wait(
        "the other project's approval panel",
        &has("#approval button.approve"),
    );
    browser.click("#approval button.approve");
    browser.wait("its approved turn's end", &has(&row("END")));
    browser.goto(&format!("http://{http}/#/approvals?project=elsewhere"));
    browser.wait("its project's empty queue", &has("#no-approvals"));

    // Markup in an input, in a tool's arguments and in the model's answer shows as text.
    let payload = "<script>window.__pwned = 1</script><img src=x onerror=\"window.__pwned = 2\">";
    let out = daemon.ok(&[
        "exec",
        "--harness",
        "chat",
        &format!(
            "/tool fixture__add {{\"a\": 1, \"b\": 1, \"note\": {}}}",
            json!(payload)
        ),
    ]);
    let injected = session_of(&out);
    browser.goto(&format!("http://{http}/#/sessions/{injected}"));
    browser.wait("the injected turn", &has(&row("END")));
    let input = browser.text(&row("INPUT"));
    assert!(
        input.contains("<script>window.__pwned = 1</script><img src=x onerror="),
        "{input}"
    );
    assert!(browser.text(&row("TOOL_CALL")).contains("onerror"));
    assert_eq!(
        browser.count("#timeline img, #timeline script"),
        0,
        "no markup became elements"
    );
    assert_eq!(
        browser.js("return window.__pwned === undefined;"),
        json!(true)
    );
    // The session's name is content too.
    let named = created(&daemon.ok(&[
        "create",
        "--name",
        "<img src=x onerror=\"window.__pwned=3\">",
    ]));
    browser.goto(&format!("http://{http}/"));
    browser.wait(
        "the list",
        &has(&format!("tr.session-row[data-uid='{named}']")),
    );
    assert_eq!(browser.count("#sessions img"), 0);
    assert_eq!(
        browser.js("return window.__pwned === undefined;"),
        json!(true)
    );
}

fn token(subject: &str) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let claims = json!({"iss": ISSUER, "sub": subject, "aud": AUDIENCE, "iat": now, "nbf": now, "exp": now + 600});
    jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
        &claims,
        &jsonwebtoken::EncodingKey::from_secret(SECRET.as_bytes()).unwrap(),
    )
    .unwrap()
}

/// Signs in the page with `subject`'s token through the header form.
fn sign_in(browser: &Browser, subject: &str) {
    browser.click("#token-clear");
    let input = token(subject);
    browser
        .runtime
        .block_on(async {
            browser
                .client()
                .find(Locator::Css("#token-input"))
                .await?
                .send_keys(&input)
                .await
        })
        .unwrap();
    browser.click("#token-use");
    browser.wait(
        "the sign-in",
        &format!(
            "return document.getElementById('whoami').textContent === 'signed in as {subject}';"
        ),
    );
}

#[test]
fn a_viewer_without_permission_sees_neither_the_session_nor_the_button() {
    if !browser_or_skip() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("hmac.key"), SECRET).unwrap();
    let auth = format!(
        "[auth.jwt]\nissuers = [\"{ISSUER}\"]\naudience = \"{AUDIENCE}\"\n\
         [[auth.jwt.hmac_keys]]\nsecret_file = \"hmac.key\"\n\
         [auth.authorization]\npolicy = \"owner_allowlist\"\n\
         [[auth.authorization.allow]]\nactions = [\"create\", \"approve\"]\nissuer = \"{ISSUER}\"\nsubject = \"alice\"\n\
         [[auth.authorization.allow]]\nactions = [\"create\"]\nissuer = \"{ISSUER}\"\nsubject = \"bob\"\n"
    );
    let (daemon, http) = start(dir.path(), &auth);
    let alice = token("alice");
    let as_alice = |args: &[&str]| {
        let mut all = vec!["--token", alice.as_str()];
        all.extend(args);
        daemon.ctl(&all)
    };
    let out = common::parked(&as_alice(&[
        "exec",
        "--harness",
        "chat",
        "/tool fixture__count {}",
    ]));
    let secret = session_of(&out);
    let browser = Browser::start();

    // Without a token the page asks for one and shows nothing.
    browser.goto(&format!("http://{http}/"));
    browser.wait("the sign-in prompt", &has("#view-error"));
    assert!(browser.text("#view-error").contains("bearer token"));

    // Bob: not in the list, "not found" on its page, no approval and no button anywhere.
    sign_in(&browser, "bob");
    browser.goto(&format!("http://{http}/#/"));
    browser.wait("bob's empty list", &has("#sessions tbody tr"));
    assert_eq!(browser.count("tr.session-row"), 0);
    assert!(!browser.text("body").contains(&secret));
    browser.goto(&format!("http://{http}/#/sessions/{secret}"));
    browser.wait("the refusal", &has("#view-error"));
    assert_eq!(browser.text("#view-error"), "Not found.");
    assert_eq!(
        browser.count("button.approve, button.deny, #session-actions button"),
        0
    );
    browser.goto(&format!("http://{http}/#/approvals"));
    browser.wait("bob's approvals", &has("#no-approvals"));
    assert_eq!(browser.count("button.approve"), 0);

    // Alice sees her session and decides with the button.
    sign_in(&browser, "alice");
    browser.goto(&format!("http://{http}/#/sessions/{secret}"));
    browser.wait("alice's approval button", &has("#approval button.approve"));
    browser.click("#approval button.approve");
    browser.wait("the approved turn's end", &has(&row("END")));
    assert!(
        browser.text(&row("APPROVAL_RESULT")).contains("by alice"),
        "{}",
        browser.text(&row("APPROVAL_RESULT"))
    );
}

#[test]
fn agentctl_ui_serves_the_console_over_the_local_journal() {
    let dir = tempfile::tempdir().unwrap();
    let out = common::ctl(dir.path(), &["exec", "hello"]);
    let uid = session_of(&common::stdout(&out));
    let mut ui = Command::new(CTL)
        .current_dir(dir.path())
        .args(["ui", "--addr", "127.0.0.1:0"])
        .env_remove("AGENTCTL_SERVER")
        .env_remove("AGENTSESSIONS_JOURNAL")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(ui.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line
        .split_whitespace()
        .find(|word| word.starts_with("http://"))
        .unwrap_or_else(|| panic!("no URL in {line:?}"))
        .trim_end_matches('/')
        .to_owned();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (page, listed, rebound) = runtime.block_on(async {
        let http = reqwest::Client::new();
        let page = http.get(format!("{url}/")).send().await.unwrap();
        let listed = http
            .get(format!("{url}/api/v1/sessions"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        // A page served under another name (DNS rebinding) gets nothing.
        let rebound = http
            .get(format!("{url}/api/v1/sessions"))
            .header("host", "attacker.example")
            .send()
            .await
            .unwrap()
            .status();
        (page.status(), listed, rebound)
    });
    let _ = ui.kill();
    let _ = ui.wait();
    assert_eq!(page, reqwest::StatusCode::OK);
    assert!(listed.contains(&uid), "{listed}");
    assert_eq!(rebound, reqwest::StatusCode::MISDIRECTED_REQUEST);
    let refused = common::ctl(dir.path(), &["--server", "127.0.0.1:1", "ui"]);
    assert_eq!(refused.status.code(), Some(2));
}
