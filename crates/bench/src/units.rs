//! Numbers for people: SI prefixes and latencies.

/// `x` with an SI prefix and 4 significant digits at most: `298.1 k`, `1.523 M`, `12`.
pub fn si(x: f64) -> String {
    let (v, p) = if x >= 1e9 {
        (x / 1e9, " G")
    } else if x >= 1e6 {
        (x / 1e6, " M")
    } else if x >= 1e3 {
        (x / 1e3, " k")
    } else {
        (x, " ")
    };
    let digits = if v >= 100.0 {
        1
    } else if v >= 10.0 {
        2
    } else {
        3
    };
    let digits = if p == " " && x.fract() == 0.0 { 0 } else { digits };
    format!("{:.*}{}", digits, v, p)
}

/// A latency in nanoseconds as µs or ms: `35.2 us`, `1.25 ms`.
pub fn latency(ns: u64) -> String {
    if ns >= 1_000_000 {
        format!("{:.2} ms", ns as f64 / 1e6)
    } else {
        format!("{:.1} us", ns as f64 / 1e3)
    }
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
}
