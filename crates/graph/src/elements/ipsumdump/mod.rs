//! IP summary dumps: `ToIPSummaryDump` and `FromIPSummaryDump`, Click's text format of
//! one line of fields per packet (`!IPSummaryDump 1.3`, then `!data FIELDS...`).
//!
//! [`fields`] is the field table both share (names, synonyms, the order fields apply
//! in), [`write`] formats a packet's fields and [`build`] makes a packet from a line's;
//! [`options`] reads and writes IP and TCP options as text.

pub(crate) mod build;
pub(crate) mod fields;
pub(crate) mod from;
pub(crate) mod options;
pub(crate) mod to;
pub(crate) mod write;

#[cfg(test)]
mod tests;

use crate::args::FromArg;

/// An argument taken as written, quotes and all (Click's `AnyArg`): a field list, whose
/// quoted names hold spaces.
pub(crate) struct Raw(pub String);

impl FromArg for Raw {
    const WHAT: &'static str = "string";
    fn from_arg(s: &str) -> Option<Self> {
        Some(Raw(s.to_string()))
    }
}

/// Parses data lines as FromIPSummaryDump does, for the fuzz target: `text` is a
/// whole dump, its first line the `!data` line if it starts with `!`.
pub fn parse_dump_for_fuzzing(text: &[u8]) -> usize {
    let text = String::from_utf8_lossy(text);
    let mut lines = text.lines();
    let first = lines.next().unwrap_or("");
    let columns: Vec<Option<fields::Field>> = crate::args::split_words(first)
        .iter()
        .skip(1)
        .map(|w| fields::Field::find(&crate::args::unquote(w)))
        .collect();
    let mut order: Vec<usize> = (0..columns.len()).collect();
    order.sort_by_key(|&i| columns[i].map_or(0, fields::Field::order));
    let settings = build::BuildSettings {
        default_proto: 6,
        flowid: None,
        minor_version: 3,
        checksum: true,
    };
    let mut ranges = Vec::new();
    let mut made = 0;
    let opts = write::LineOptions {
        bad_packets: true,
        careful_trunc: true,
        extra_length: true,
    };
    let all: Vec<fields::Field> = columns.iter().flatten().copied().collect();
    let (mut line, mut bad) = (Vec::new(), Vec::new());
    for l in lines {
        if let Some(p) = build::build_packet(l, &columns, &order, settings, &mut ranges).packet {
            write::summary(&p, &all, &opts, &mut line, &mut bad);
            made += 1;
        }
    }
    made
}
