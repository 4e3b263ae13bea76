//! How the traffic tools (`gen`, `sink`) end: a JSON report on standard output, or an
//! error on standard error.

use std::process::ExitCode;

/// Reports `e` as `brickroute TOOL: e` on standard error (if it can still be written)
/// and fails.
pub fn fail(tool: &str, e: impl std::fmt::Display) -> ExitCode {
    graph::warn!("brickroute {}: {}", tool, e);
    ExitCode::from(1)
}

/// Prints `json`, a report, as one line on standard output; a failed write is `tool`'s
/// failure.
pub fn print_json(tool: &str, json: &str) -> ExitCode {
    use std::io::Write;
    match writeln!(std::io::stdout().lock(), "{}", json) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(tool, format!("writing the report: {}", e)),
    }
}
