//! Any UTF-8 text must parse to a configuration or an error, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::collections::HashMap;

fuzz_target!(|data: &[u8]| {
    if let Ok(source) = std::str::from_utf8(data) {
        let mut defines = HashMap::new();
        defines.insert("DEV".to_string(), "eth0".to_string());
        match graph::lang::parse(source, "fuzz.click", &defines) {
            Ok(config) => {
                for c in &config.connections {
                    assert!(c.from < config.elements.len() && c.to < config.elements.len());
                }
            }
            Err(e) => {
                let _ = e.to_string();
            }
        }
    }
});
