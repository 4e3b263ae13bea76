//! Cycle counting with the time-stamp counter: cycles per packet, and timers read
//! on every batch (a clock_gettime there costs more than the work it times).

use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The time-stamp counter: cycles at the TSC's constant rate (on other architectures,
/// nanoseconds since the first call).
#[inline]
pub fn rdtsc() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: RDTSC reads a counter; it has no preconditions and every x86_64 CPU
        // has it. (Older compilers declare the intrinsic unsafe, newer ones safe.)
        #[allow(unused_unsafe)]
        unsafe {
            core::arch::x86_64::_rdtsc()
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        static EPOCH: OnceLock<Instant> = OnceLock::new();
        EPOCH.get_or_init(Instant::now).elapsed().as_nanos() as u64
    }
}

/// Estimated TSC ticks per second, measured once per process against the monotonic
/// clock over 20 ms.
pub fn tsc_hz() -> f64 {
    static HZ: OnceLock<f64> = OnceLock::new();
    *HZ.get_or_init(|| {
        if !cfg!(target_arch = "x86_64") {
            return 1e9;
        }
        let t0 = Instant::now();
        let c0 = rdtsc();
        std::thread::sleep(Duration::from_millis(20));
        let c1 = rdtsc();
        let secs = t0.elapsed().as_secs_f64();
        if secs > 0.0 && c1 > c0 {
            (c1 - c0) as f64 / secs
        } else {
            1e9
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counter_advances_and_rate_is_plausible() {
        let a = rdtsc();
        let b = rdtsc();
        assert!(b >= a);
        let hz = tsc_hz();
        // Between 100 MHz and 10 GHz on any machine this runs on.
        assert!((1e8..1e10).contains(&hz), "{}", hz);
    }
}
