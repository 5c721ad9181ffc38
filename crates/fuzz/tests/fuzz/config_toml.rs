//! The daemon's TOML configuration file: any text parses into a configuration or fails with an
//! error, and whatever parses passes or fails the checks the daemon runs before it serves.

use agentsessions_cli::config::HostConfig;
use agentsessions_fuzz::{Corpus, config, run, text_or_mutation};

#[test]
fn config_files_parse_or_fail_and_validate_or_fail() {
    let inputs = text_or_mutation(Corpus::load("config_toml").unwrap().bytes());
    run("cli/config_toml", config(), &inputs, |text| {
        if let Ok(host) = toml::from_str::<HostConfig>(&text) {
            let _auth = host.auth.validate();
            let _limits = host.limits.validate();
            let _shown =
                agentsessions_cli::effective::effective_config(&host, serde_json::Value::Null);
        }
        Ok(())
    });
}
