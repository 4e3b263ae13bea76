//! The queriers' clock, in milliseconds: the pass's time-stamp counter reading in a
//! router, a value the test sets in unit tests (entries expire after minutes).

use crate::element::Context;
use crate::tsc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

#[derive(Clone)]
pub(crate) enum Clock {
    /// Milliseconds since the process's first querier was configured, from the TSC:
    /// one epoch for all, so the times in a replaced configuration's table mean the
    /// same in the table that takes its entries.
    Tsc { start: u64, ticks_per_ms: f64 },
    /// Milliseconds as a test sets them.
    Manual(Arc<AtomicU64>),
}

impl Clock {
    /// The clock a test set (`manual`), or the TSC's.
    pub(crate) fn new(manual: &Option<Arc<AtomicU64>>) -> Clock {
        match manual {
            Some(ms) => Clock::Manual(ms.clone()),
            None => Clock::tsc(),
        }
    }

    pub(crate) fn tsc() -> Clock {
        static EPOCH: OnceLock<u64> = OnceLock::new();
        Clock::Tsc {
            start: *EPOCH.get_or_init(tsc::rdtsc),
            ticks_per_ms: (tsc::tsc_hz() / 1000.0).max(1.0),
        }
    }

    /// Now, from the pass's counter reading (one per pass, shared by its elements).
    pub(crate) fn now(&self, cx: &mut Context<'_>) -> u64 {
        match self {
            Clock::Tsc { .. } => self.ms_at(cx.now_tsc()),
            Clock::Manual(ms) => ms.load(Ordering::Relaxed),
        }
    }

    /// Now, outside a pass (handlers).
    pub(crate) fn now_outside(&self) -> u64 {
        match self {
            Clock::Tsc { .. } => self.ms_at(tsc::rdtsc()),
            Clock::Manual(ms) => ms.load(Ordering::Relaxed),
        }
    }

    fn ms_at(&self, now: u64) -> u64 {
        match self {
            // Saturating: a core whose counter lags the configuring core's reads 0.
            Clock::Tsc { start, ticks_per_ms } => (now.saturating_sub(*start) as f64 / ticks_per_ms) as u64,
            Clock::Manual(ms) => ms.load(Ordering::Relaxed),
        }
    }
}
