//! IP summary dumps are untrusted text: FromIPSummaryDump's line parser and packet
//! builder (and ToIPSummaryDump's formatting of what it builds) must never panic,
//! whatever the `!data` line names and the data lines hold.
#![no_main]

use graph::elements::ipsumdump::parse_dump_for_fuzzing;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = parse_dump_for_fuzzing(data);
});
