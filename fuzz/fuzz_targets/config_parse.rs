//! The configuration loader: `Config::parse` (TOML, then validation with line/column issues)
//! and, for accepted configs, the admin API's `redacted_toml` rendering.
//!
//! Properties: no panic (issue positions are computed from byte offsets into the text); error
//! messages render; an accepted config renders to TOML that parses back to the same config once
//! the redacted secrets are put back.
#![no_main]

use libfuzzer_sys::fuzz_target;
use querypilot::config::Config;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let config = match Config::parse(text, "fuzz.toml") {
        Ok(config) => config,
        Err(errors) => {
            let _ = errors.to_string();
            return;
        }
    };
    let rendered = config.redacted_toml();
    let mut reparsed = match Config::parse(&rendered, "rendered.toml") {
        Ok(c) => c,
        Err(e) => panic!("rendered config does not parse back: {e}\n--- input\n{text}\n--- rendered\n{rendered}"),
    };
    for (back, orig) in reparsed.pools.iter_mut().zip(&config.pools) {
        back.password.clone_from(&orig.password);
    }
    reparsed.metrics.admin_token.clone_from(&config.metrics.admin_token);
    assert_eq!(reparsed, config, "rendered:\n{rendered}");
});
