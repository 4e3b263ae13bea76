//! IPClassifier / IPFilter / Classifier patterns come from configuration files: any text
//! is either compiled or refused with an error, never a panic.
#![no_main]

use graph::registry::Registry;
use graph::testing::build;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let reg = Registry::with_library();
    for class in ["IPClassifier", "IPFilter", "Classifier"] {
        let n = graph::args::split_args(text).len().max(1);
        let _ = build(reg.get(class).unwrap().as_ref(), text, 1, n);
    }
});
