//! `SetTimestamp([TIMESTAMP, keyword FIRST])`: sets each packet's timestamp annotation
//! to the current time, or to TIMESTAMP when given, as Click's element of the same
//! name. With FIRST true it sets the first timestamp annotation instead (bytes 32-39
//! of the annotation area, [`packet::anno::FIRST_TIMESTAMP_ANNO_OFFSET`]). The current
//! time is read once per batch.

use crate::args::{decimal_number, Args, FromArg};
use crate::element::*;
use crate::error::ConfigError;
use packet::{PacketBatch, Timestamp};
use std::sync::Arc;

pub struct SetTimestampClass;

/// A timestamp as Click's `cp_time` reads one: a non-negative decimal number of
/// seconds (`1189383079.180265331`, `1e3`) with an optional unit as for time intervals
/// (`s`, `sec`, `m`, `min`, `h`, `hr`, `d`, `day`, optionally with a prefix `m`, `u`
/// or `n`), kept to the nanosecond, at most 4294967295 seconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TimestampArg(pub Timestamp);

/// Click's `seconds_units`, in Click's order (the first whose name ends the text is
/// the unit): name, seconds.
const UNITS: [(&str, u128); 8] = [
    ("s", 1),
    ("sec", 1),
    ("m", 60),
    ("min", 60),
    ("h", 3600),
    ("hr", 3600),
    ("d", 86400),
    ("day", 86400),
];

impl FromArg for TimestampArg {
    const WHAT: &'static str = "timestamp";
    fn from_arg(s: &str) -> Option<Self> {
        let s = s.trim();
        let (mut num, mut unit, mut power) = (s, 1u128, 0i32);
        if let Some(&(name, seconds)) = UNITS.iter().find(|(name, _)| s.ends_with(name)) {
            num = &s[..s.len() - name.len()];
            unit = seconds;
            let prefix = match num.as_bytes().last() {
                Some(b'm') => -3,
                Some(b'u') => -6,
                Some(b'n') => -9,
                _ => 0,
            };
            if prefix != 0 {
                num = &num[..num.len() - 1];
                power = prefix;
            }
            num = num.trim_end();
        }
        // "DIGITS[.DIGITS][e[+-]DIGITS]", underscores removed.
        let norm = decimal_number(num)?;
        let (mantissa, exp) = match norm.split_once('e') {
            Some((m, e)) => (m, e.parse::<i32>().ok()?),
            None => (norm.as_str(), 0),
        };
        let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
        let digits = format!("{}{}", int, frac);
        let digits = digits.trim_start_matches('0');
        let m: u128 = if digits.is_empty() {
            0
        } else {
            digits.parse().ok()?
        };
        // Nanoseconds = m * unit * 10^e10.
        let e10 = i64::from(exp) - frac.len() as i64 + i64::from(power) + 9;
        let scaled = m.checked_mul(unit)?;
        let ns = if e10 >= 0 {
            let f = 10u128.checked_pow(u32::try_from(e10).ok()?)?;
            scaled.checked_mul(f)?
        } else if e10 < -38 {
            0
        } else {
            // Rounded to the nearest nanosecond, halves up.
            let d = 10u128.pow(e10.unsigned_abs() as u32);
            scaled / d + u128::from(scaled % d >= d.div_ceil(2))
        };
        let sec = ns / 1_000_000_000;
        (sec <= u128::from(u32::MAX))
            .then(|| TimestampArg(Timestamp::new(sec as i64, (ns % 1_000_000_000) as u32)))
    }
}

impl ElementClass for SetTimestampClass {
    fn name(&self) -> &'static str {
        "SetTimestamp"
    }
    fn port_count(&self) -> PortCount {
        PortCount::parse("1/1")
    }
    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        let e = |m: String| cx.error(m);
        let fixed = args
            .positional::<TimestampArg>("TIMESTAMP")
            .map_err(e)?
            .map(|t| t.0);
        let first = args.keyword::<bool>("FIRST").map_err(e)?.unwrap_or(false);
        args.finish().map_err(e)?;
        Ok(Arc::new(SetTimestamp { fixed, first }))
    }
}

#[derive(Clone, Copy)]
struct SetTimestamp {
    /// TIMESTAMP, or `None` for the current time.
    fixed: Option<Timestamp>,
    first: bool,
}

impl ElementSpec for SetTimestamp {
    fn instantiate(&self, _w: WorkerInfo) -> Box<dyn Element> {
        Box::new(*self)
    }
}

impl Element for SetTimestamp {
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, out: &mut Outputs<'_>, cx: &mut Context<'_>) {
        let ts = self.fixed.unwrap_or_else(|| cx.now());
        if self.first {
            let ns = i64::try_from(ts.as_nanos()).unwrap_or(i64::MAX).to_ne_bytes();
            for p in batch.iter_mut() {
                p.set_user_anno(packet::anno::FIRST_TIMESTAMP_ANNO_OFFSET, &ns);
            }
        } else {
            for p in batch.iter_mut() {
                p.anno_mut().timestamp = ts;
            }
        }
        out.push_batch(0, batch);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{build_error, Harness};
    use packet::Packet;

    fn first_anno(p: &Packet) -> [u8; 8] {
        p.anno().user[32..40].try_into().unwrap()
    }

    #[test]
    fn sets_the_current_time_the_same_for_a_batch() {
        let mut h = Harness::new(&SetTimestampClass, "", 1, 1);
        let before = Timestamp::now();
        let out = h.push(0, vec![Packet::from_slice(&[1]), Packet::from_slice(&[2])]);
        let after = Timestamp::now();
        let t = out[0][0].anno().timestamp;
        assert!(
            before <= t && t <= after,
            "{:?} not in {:?}..{:?}",
            t,
            before,
            after
        );
        assert_eq!(out[0][1].anno().timestamp, t);
        assert_eq!(out[0][0].data(), &[1]);
        assert_eq!(first_anno(&out[0][0]), [0; 8]);
    }

    #[test]
    fn sets_a_fixed_timestamp() {
        let mut h = Harness::new(&SetTimestampClass, "1189383079.180265331", 1, 1);
        let p = h.push_bytes(0, &[0])[0].remove(0);
        assert_eq!(p.anno().timestamp, Timestamp::new(1_189_383_079, 180_265_331));
        for (text, sec, nsec) in [
            ("TIMESTAMP 2min", 120, 0),
            ("1.5ms", 0, 1_500_000),
            ("1_000.25e1", 10_002, 500_000_000),
            ("3usec", 0, 3_000),
            ("0.0000000015", 0, 2),
            ("1d", 86_400, 0),
            ("4294967295.999999999", 4_294_967_295, 999_999_999),
        ] {
            let mut h = Harness::new(&SetTimestampClass, text, 1, 1);
            let p = h.push_bytes(0, &[0])[0].remove(0);
            assert_eq!(p.anno().timestamp, Timestamp::new(sec, nsec), "{}", text);
        }
    }

    #[test]
    fn first_sets_the_first_timestamp_annotation() {
        let mut h = Harness::new(&SetTimestampClass, "12.5, FIRST true", 1, 1);
        let mut p = Packet::from_slice(&[0]);
        p.anno_mut().timestamp = Timestamp::new(7, 8);
        let p = h.push(0, vec![p])[0].remove(0);
        assert_eq!(first_anno(&p), 12_500_000_000i64.to_ne_bytes());
        assert_eq!(p.anno().timestamp, Timestamp::new(7, 8));

        let mut h = Harness::new(&SetTimestampClass, "FIRST true", 1, 1);
        let before = Timestamp::now().as_nanos() as i64;
        let p = h.push_bytes(0, &[0])[0].remove(0);
        let after = Timestamp::now().as_nanos() as i64;
        let got = i64::from_ne_bytes(first_anno(&p));
        assert!(before <= got && got <= after);
        assert_eq!(p.anno().timestamp, Timestamp::ZERO);
    }

    #[test]
    fn config_errors() {
        for bad in ["-1", "now", "4294967296", "1.2.3", "5 parsecs"] {
            assert_eq!(
                build_error(&SetTimestampClass, bad, 1, 1),
                "e :: SetTimestamp: TIMESTAMP expects timestamp",
                "{}",
                bad
            );
        }
        assert_eq!(
            build_error(&SetTimestampClass, "FIRST maybe", 1, 1),
            "e :: SetTimestamp: FIRST expects bool"
        );
        assert_eq!(
            build_error(&SetTimestampClass, "DELTA true", 1, 1),
            "e :: SetTimestamp: bad keyword 'DELTA'"
        );
        assert_eq!(
            build_error(&SetTimestampClass, "1, 2", 1, 1),
            "e :: SetTimestamp: too many arguments"
        );
    }
}
