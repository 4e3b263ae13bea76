//! What the header-checking elements (CheckIPHeader, CheckUDPHeader and its kin) count
//! about the packets they refuse, as Click's do: `drops`, `drop_details` (per reason,
//! with DETAILS true), and a message for the element's first failure (or every one
//! with VERBOSE).

use crate::element::HandlerInfo;
use std::sync::atomic::{AtomicU64, Ordering};

pub(crate) struct CheckDrops {
    /// What the message says before the reason (`c: IP header check failed`).
    what: String,
    /// The reasons' texts, in Click's order (a reason is an index into them).
    reasons: &'static [&'static str],
    verbose: bool,
    drops: AtomicU64,
    /// Per-reason counts, kept only with DETAILS true.
    per_reason: Option<Box<[AtomicU64]>>,
}

impl CheckDrops {
    pub fn new(what: String, reasons: &'static [&'static str], details: bool, verbose: bool) -> CheckDrops {
        CheckDrops {
            what,
            reasons,
            verbose,
            drops: AtomicU64::new(0),
            per_reason: details.then(|| reasons.iter().map(|_| AtomicU64::new(0)).collect()),
        }
    }

    /// The rare path of a failed check: counts its reason, and reports it as Click does
    /// (the element's first failure, or every one with VERBOSE). `batch_failures`, the
    /// failures of the batch so far, goes to [`CheckDrops::add`] at its end.
    #[cold]
    #[inline(never)]
    pub fn failed(&self, reason: usize, batch_failures: &mut u64) {
        if self.verbose || (*batch_failures == 0 && self.drops.load(Ordering::Relaxed) == 0) {
            crate::warn!("{}: {}", self.what, self.reasons[reason]);
        }
        *batch_failures += 1;
        if let Some(counts) = &self.per_reason {
            counts[reason].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Adds a batch's failures to `drops` (one atomic add a batch that had any).
    #[inline]
    pub fn add(&self, batch_failures: u64) {
        if batch_failures > 0 {
            self.drops.fetch_add(batch_failures, Ordering::Relaxed);
        }
    }

    pub fn handlers(&self) -> Vec<HandlerInfo> {
        let mut h = vec![HandlerInfo::read("drops")];
        if self.per_reason.is_some() {
            h.push(HandlerInfo::read("drop_details"));
        }
        h
    }

    pub fn read_handler(&self, name: &str) -> Option<String> {
        match name {
            "drops" => Some(self.drops.load(Ordering::Relaxed).to_string()),
            "drop_details" => self.per_reason.as_ref().map(|counts| {
                counts
                    .iter()
                    .zip(self.reasons)
                    .map(|(c, t)| format!("{}\t{}\n", c.load(Ordering::Relaxed), t))
                    .collect()
            }),
            _ => None,
        }
    }
}
