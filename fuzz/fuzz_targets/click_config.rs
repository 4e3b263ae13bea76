//! Any bytes must become a configuration or an error, never a panic: first through
//! `source_text` (non-UTF-8 bytes are allowed in comments only, and located elsewhere),
//! then through the parser, then through the router's build with the element library
//! (port checks, every element's argument parsing, the cycle check), except for the
//! capture elements, which would open and create files.
#![no_main]

use graph::registry::Registry;
use graph::router::RouterSpec;
use libfuzzer_sys::fuzz_target;
use std::collections::HashMap;
use std::path::Path;

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
            if config
                .elements
                .iter()
                .all(|e| !matches!(e.class.as_str(), "FromDump" | "ToDump"))
            {
                let reg = Registry::with_library();
                if let Err(e) = RouterSpec::build(&config, &reg, Path::new("/nonexistent"), 1) {
                    let _ = e.to_string();
                }
            }
        }
        Err(e) => {
            let _ = e.to_string();
        }
    }
});
