//! Numbers for people: SI prefixes, latencies, and durations given in seconds.

use std::time::Duration;

/// `x` with an SI prefix (up to E) and 4 significant digits at most: `298.1 k`,
/// `1.523 M`, `12`. The value is rounded before the prefix is chosen, so 999,999
/// is `1.000 M`, not `1000.0 k`.
pub fn si(x: f64) -> String {
    if x == 0.0 || !x.is_finite() {
        return format!("{} ", x);
    }
    let r = round_to_4_digits(x);
    let (scale, prefix) = [
        (1e18, " E"),
        (1e15, " P"),
        (1e12, " T"),
        (1e9, " G"),
        (1e6, " M"),
        (1e3, " k"),
    ]
    .into_iter()
    .find(|&(scale, _)| r.abs() >= scale)
    .unwrap_or((1.0, " "));
    let v = r / scale;
    let decimals = if prefix == " " && x.fract() == 0.0 {
        0
    } else if v.abs() >= 100.0 {
        1
    } else if v.abs() >= 10.0 {
        2
    } else {
        3
    };
    format!("{:.*}{}", decimals, v, prefix)
}

/// `x` (finite, not zero) rounded to 4 significant digits.
fn round_to_4_digits(x: f64) -> f64 {
    let magnitude = x.abs().log10().floor() as i32;
    // Dividing and multiplying by a power of ten (exact up to 10^22) rather than by
    // its inverse keeps 999,999 rounding to exactly 1e6.
    let shift = magnitude - 3;
    let p = 10f64.powi(shift.abs());
    if !p.is_finite() {
        // (Below 1e-305 or so: too small for anyone to read a prefix into.)
        return x;
    }
    if shift >= 0 {
        (x / p).round() * p
    } else {
        (x * p).round() / p
    }
}

/// A latency in nanoseconds as µs below a millisecond, else as ms: `35.2 us`,
/// `1.25 ms`. Rounded first, so 999,999 ns is `1.00 ms`, not `1000.0 us`.
pub fn latency(ns: u64) -> String {
    let tenth_us = ns / 100 + u64::from(ns % 100 >= 50);
    if tenth_us < 10_000 {
        format!("{}.{} us", tenth_us / 10, tenth_us % 10)
    } else {
        let hundredth_ms = ns / 10_000 + u64::from(ns % 10_000 >= 5_000);
        format!("{}.{:02} ms", hundredth_ms / 100, hundredth_ms % 100)
    }
}

/// The duration an option `name` (as `--duration`) gives in seconds: positive, at
/// least a nanosecond, and at most what a [`Duration`] holds (2^64 seconds less a
/// nanosecond, so about 585 billion years; 18446744073709551615 s is accepted).
pub fn seconds_option(name: &str, seconds: f64) -> Result<Duration, String> {
    if seconds.is_nan() || seconds <= 0.0 {
        return Err(format!("{} must be a positive number of seconds", name));
    }
    match Duration::try_from_secs_f64(seconds) {
        Ok(d) if d.is_zero() => Err(format!("{} must be at least a nanosecond (1e-9 seconds)", name)),
        Ok(d) => Ok(d),
        Err(_) => Err(format!("{} must be at most {} seconds", name, u64::MAX)),
    }
}

/// `start_ns + d` in nanoseconds, saturating: a duration past the clock's range is a
/// deadline never reached, not one that wraps round to the past.
pub fn deadline_ns(start_ns: u64, d: Duration) -> u64 {
    start_ns.saturating_add(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(si(298_123.0), "298.1 k");
        assert_eq!(si(1_523_000.0), "1.523 M");
        assert_eq!(si(12.0), "12 ");
        assert_eq!(si(0.5), "0.500 ");
        assert_eq!(si(15_200_000_000.0), "15.20 G");
        assert_eq!(latency(35_210), "35.2 us");
        assert_eq!(latency(1_250_000), "1.25 ms");
    }

    #[test]
    fn si_rounds_before_choosing_the_prefix_and_the_decimals() {
        assert_eq!(si(999_999.0), "1.000 M");
        assert_eq!(si(999_949.0), "999.9 k");
        assert_eq!(si(9.9996), "10.00 ");
        assert_eq!(si(99.996), "100.0 ");
        assert_eq!(si(999.96), "1.000 k");
        assert_eq!(si(999_999_999.0), "1.000 G");
        assert_eq!(si(0.0), "0 ");
    }

    #[test]
    fn si_keeps_4_digits_past_giga() {
        assert_eq!(si(1_500_000_000_000.0), "1.500 T");
        assert_eq!(si(999_999_999_999.0), "1.000 T");
    }

    #[test]
    fn latency_rounds_before_choosing_the_unit() {
        assert_eq!(latency(999_949), "999.9 us");
        assert_eq!(latency(999_950), "1.00 ms");
        assert_eq!(latency(999_999), "1.00 ms");
        assert_eq!(latency(1_000_000), "1.00 ms");
        assert_eq!(latency(1_994_999), "1.99 ms");
        assert_eq!(latency(1_995_000), "2.00 ms");
        assert_eq!(latency(49), "0.0 us");
        assert_eq!(latency(50), "0.1 us");
        assert_eq!(latency(u64::MAX), "18446744073709.55 ms");
    }

    #[test]
    fn seconds_options_are_positive_and_fit_a_duration() {
        assert_eq!(seconds_option("--duration", 1.5), Ok(Duration::from_millis(1500)));
        assert_eq!(
            seconds_option("--duration", 18446744074.0),
            Ok(Duration::from_secs(18_446_744_074))
        );
        let positive = "--duration must be a positive number of seconds".to_string();
        assert_eq!(seconds_option("--duration", 0.0), Err(positive.clone()));
        assert_eq!(seconds_option("--duration", -1.0), Err(positive.clone()));
        assert_eq!(seconds_option("--duration", f64::NAN), Err(positive));
        assert_eq!(
            seconds_option("--idle", 1e-12),
            Err("--idle must be at least a nanosecond (1e-9 seconds)".to_string())
        );
        let too_long = "--duration must be at most 18446744073709551615 seconds".to_string();
        assert_eq!(seconds_option("--duration", 1e20), Err(too_long.clone()));
        assert_eq!(seconds_option("--duration", 1e30), Err(too_long.clone()));
        assert_eq!(seconds_option("--duration", f64::INFINITY), Err(too_long));
    }

    #[test]
    fn deadlines_past_the_clock_saturate() {
        assert_eq!(deadline_ns(5, Duration::from_nanos(7)), 12);
        // 18446744074 s is 1.8446744074e19 ns, past u64::MAX (about 1.8446744073e19):
        // truncated to 64 bits it would be 290448384 ns, a third of a second.
        assert_eq!(deadline_ns(1_000, Duration::from_secs(18_446_744_074)), u64::MAX);
        assert_eq!(deadline_ns(u64::MAX - 1, Duration::from_nanos(2)), u64::MAX);
        assert_eq!(deadline_ns(1_000, Duration::MAX), u64::MAX);
    }
}
