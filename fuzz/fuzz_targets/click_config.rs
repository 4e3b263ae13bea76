//! Any bytes must become a configuration or an error, never a panic: first through
//! `source_text` (non-UTF-8 bytes are allowed in comments only, and located elsewhere),
//! then through the parser.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::collections::HashMap;

fuzz_target!(|data: &[u8]| {
    let source = match graph::lang::source_text(data, "fuzz.click") {
        Ok(s) => s,
        Err(e) => {
            let _ = e.to_string();
            return;
        }
    };
    let mut defines = HashMap::new();
    defines.insert("DEV".to_string(), "eth0".to_string());
    match graph::lang::parse(&source, "fuzz.click", &defines) {
        Ok(config) => {
            for c in &config.connections {
                assert!(c.from < config.elements.len() && c.to < config.elements.len());
            }
        }
        Err(e) => {
            let _ = e.to_string();
        }
    }
});
