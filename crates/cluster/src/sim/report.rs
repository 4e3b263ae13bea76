//! What a run measured.

use super::Scheme;
use crate::vlb::Counts;

/// The measurements of one run (see the model in the parent module). Packet counts
/// satisfy `offered_packets == delivered_packets + dropped()` once a run is over.
#[derive(Clone, Debug, PartialEq)]
pub struct Results {
    pub scheme: Scheme,
    pub offered_packets: u64,
    pub offered_bytes: u64,
    pub delivered_packets: u64,
    pub delivered_bytes: u64,
    /// Packets dropped by a full buffer, by the kind of resource.
    pub dropped_server: u64,
    /// By an n-fly's switching servers.
    pub dropped_switch: u64,
    pub dropped_link: u64,
    pub dropped_port: u64,
    /// Packets that reached the failed server after it failed.
    pub dropped_failed: u64,
    /// Of those, the ones neither from nor for its port: relayed through it, lost
    /// only because it was still drawn as an intermediate.
    pub lost_in_transit: u64,
    /// Packets delivered after a later packet of their flow.
    pub reordered: u64,
    /// From the input server's receiving the packet to its last bit leaving the output
    /// port, over the packets delivered (0 when none was).
    pub latency_mean_us: f64,
    /// Within 1 % (a histogram with 128 buckets per power of two).
    pub latency_p99_us: f64,
    /// Each server's processor: bytes processed × 8 / (R × duration), in units of R.
    pub server_load: Vec<f64>,
    /// Each internal link, bits / (L × duration): of a full mesh, i→j (j ≠ i, in the
    /// order 0→1, 0→2, ...); of an n-fly, each server's uplink, then each stage's
    /// output links (the last stage's are the downlinks).
    pub link_utilisation: Vec<f64>,
    /// Each of an n-fly's switching servers, stage by stage: bytes processed × 8 /
    /// (its capacity × duration). Empty for a full mesh.
    pub switch_utilisation: Vec<f64>,
    /// The balancers' counts, summed over the input servers.
    pub counts: Counts,
    /// Flows that sent (or were sending, at time 0) during the run.
    pub flows: u64,
}

impl Results {
    pub fn dropped(&self) -> u64 {
        self.dropped_server
            + self.dropped_switch
            + self.dropped_link
            + self.dropped_port
            + self.dropped_failed
    }

    /// Delivered packets over offered packets (1 when none was offered).
    pub fn delivered_fraction(&self) -> f64 {
        ratio(self.delivered_packets, self.offered_packets, 1.0)
    }

    /// Reordered packets over delivered packets.
    pub fn reordered_fraction(&self) -> f64 {
        ratio(self.reordered, self.delivered_packets, 0.0)
    }

    pub fn max_server_load(&self) -> f64 {
        self.server_load.iter().copied().fold(0.0, f64::max)
    }

    pub fn mean_server_load(&self) -> f64 {
        mean(&self.server_load)
    }

    pub fn max_link_utilisation(&self) -> f64 {
        self.link_utilisation.iter().copied().fold(0.0, f64::max)
    }

    pub fn mean_link_utilisation(&self) -> f64 {
        mean(&self.link_utilisation)
    }

    pub fn max_switch_utilisation(&self) -> f64 {
        self.switch_utilisation.iter().copied().fold(0.0, f64::max)
    }

    pub fn mean_switch_utilisation(&self) -> f64 {
        mean(&self.switch_utilisation)
    }
}

fn ratio(a: u64, b: u64, if_none: f64) -> f64 {
    if b == 0 {
        if_none
    } else {
        a as f64 / b as f64
    }
}

fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

/// Bits of a value below the leading one that a bucket keeps: 128 buckets for each
/// power of two, so a bucket is less than 1 % of its values wide.
const SUB_BITS: u32 = 7;

/// Latencies in ns: an exact sum, and a log-linear histogram for quantiles in constant
/// memory however long the run.
#[derive(Default)]
pub(crate) struct Latencies {
    buckets: Vec<u64>,
    count: u64,
    sum_ns: u128,
}

impl Latencies {
    pub(crate) fn add(&mut self, ns: u64) {
        let i = bucket(ns);
        if i >= self.buckets.len() {
            self.buckets.resize(i + 1, 0);
        }
        self.buckets[i] += 1;
        self.count += 1;
        self.sum_ns += u128::from(ns);
    }

    pub(crate) fn mean_ns(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.sum_ns as f64 / self.count as f64
        }
    }

    /// The `q` quantile (0 < q ≤ 1): the middle of the bucket that holds it.
    pub(crate) fn quantile_ns(&self, q: f64) -> f64 {
        if self.count == 0 {
            return 0.0;
        }
        let rank = ((q * self.count as f64).ceil() as u64).clamp(1, self.count);
        let mut seen = 0;
        for (i, &c) in self.buckets.iter().enumerate() {
            seen += c;
            if seen >= rank {
                let (low, width) = bucket_bounds(i);
                return low as f64 + (width - 1) as f64 / 2.0;
            }
        }
        unreachable!("the buckets hold all {} values", self.count)
    }
}

fn bucket(ns: u64) -> usize {
    if ns < 1 << (SUB_BITS + 1) {
        return ns as usize;
    }
    let shift = 63 - ns.leading_zeros() - SUB_BITS;
    ((shift as usize) << SUB_BITS) + (ns >> shift) as usize
}

/// The lowest value of bucket `i` and how many values it holds.
fn bucket_bounds(i: usize) -> (u64, u64) {
    if i < 1 << (SUB_BITS + 1) {
        return (i as u64, 1);
    }
    let shift = (i >> SUB_BITS) - 1;
    let mantissa = (i - (shift << SUB_BITS)) as u64;
    (mantissa << shift, 1 << shift)
}

#[cfg(test)]
mod latency_tests {
    use super::*;

    #[test]
    fn buckets_tile_the_values_without_gaps() {
        let mut next = 0;
        for i in 0..2000 {
            let (low, width) = bucket_bounds(i);
            assert_eq!(low, next, "bucket {}", i);
            assert_eq!(bucket(low), i);
            assert_eq!(bucket(low + width - 1), i);
            next = low + width;
        }
        let (low, width) = bucket_bounds(bucket(u64::MAX));
        assert_eq!(low + (width - 1), u64::MAX);
    }

    #[test]
    fn quantiles_are_within_a_percent() {
        let mut l = Latencies::default();
        for ns in 1..=100_000 {
            l.add(ns);
        }
        assert_eq!(l.mean_ns(), 50_000.5);
        let p99 = l.quantile_ns(0.99);
        assert!((p99 - 99_000.0).abs() < 990.0, "{}", p99);
        assert_eq!(l.quantile_ns(0.001), 100.0);
    }
}
