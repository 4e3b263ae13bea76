//! Click's token bucket (`TokenBucketX` with jiffy epochs, 1000 a second), shared by
//! the elements that go at a rate (RatedSource, RatedSplitter).

use std::sync::OnceLock;
use std::time::Instant;

const MAX_TOKENS: u32 = u32::MAX;
const JIFFIES_PER_SEC: u32 = 1000;

/// Click's `TokenRateX`: refill rate and capacity in scaled fractional tokens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TokenRate {
    tokens_per_tick: u32,
    token_scale: u32,
    time_until_full: u32,
}

impl TokenRate {
    /// `rate` tokens per second, at most `capacity` tokens (Click's `assign`).
    pub fn new(rate: u32, capacity: u32) -> TokenRate {
        let (mut rate, mut capacity) = (rate, capacity);
        if capacity == 0 {
            rate = 0;
            capacity = MAX_TOKENS;
        }
        if rate != 0 {
            let min_capacity = (rate - 1) / JIFFIES_PER_SEC + 1;
            capacity = capacity.max(min_capacity);
        }
        let token_scale = MAX_TOKENS / capacity;
        let l = (rate as u64 * token_scale as u64 / JIFFIES_PER_SEC as u64).min(MAX_TOKENS as u64) as u32;
        if rate != 0 {
            let tokens_per_tick = l.max(1);
            TokenRate {
                tokens_per_tick,
                token_scale,
                time_until_full: (MAX_TOKENS - 1) / tokens_per_tick + 1,
            }
        } else {
            TokenRate {
                tokens_per_tick: 0,
                token_scale,
                time_until_full: u32::MAX,
            }
        }
    }

    /// The rate as Click reports it (rounded back from the scaled representation).
    pub fn rate(&self) -> u32 {
        let t = self.tokens_per_tick as u64;
        ((t / 2 + t * JIFFIES_PER_SEC as u64) / self.token_scale as u64).min(MAX_TOKENS as u64) as u32
    }

    /// `t` whole tokens in scaled units; `None` (saturated) if it exceeds capacity.
    fn scaled(&self, t: u32) -> Option<u32> {
        (t as u64 * self.token_scale as u64).try_into().ok()
    }
}

/// Click's `TokenCounterX`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TokenCounter {
    tokens: u32,
    time_point: u64,
}

impl TokenCounter {
    /// An empty counter whose time point is 0, so the first refill fills it.
    pub fn new() -> TokenCounter {
        TokenCounter {
            tokens: 0,
            time_point: 0,
        }
    }

    pub fn set(&mut self, rate: &TokenRate, t: u32) {
        self.tokens = rate.scaled(t).unwrap_or(MAX_TOKENS);
    }

    pub fn refill(&mut self, rate: &TokenRate, now: u64) {
        let diff = now.saturating_sub(self.time_point);
        if rate.tokens_per_tick == 0 {
            // An idle rate (0 a second) never refills. (Click's 32-bit tick difference
            // never reaches its idle `time_until_full`, all ones; ours is 64 bits and
            // starts at 2^32, so the test below would fill the bucket once.)
        } else if diff >= rate.time_until_full as u64 {
            self.tokens = MAX_TOKENS;
        } else if diff > 0 {
            let add = (diff as u32).wrapping_mul(rate.tokens_per_tick);
            self.tokens = self.tokens.checked_add(add).unwrap_or(MAX_TOKENS);
        }
        self.time_point = now;
    }

    pub fn remove_if(&mut self, rate: &TokenRate, t: u32) -> bool {
        match rate.scaled(t) {
            Some(f) if f <= self.tokens => {
                self.tokens -= f;
                true
            }
            _ => false,
        }
    }

    /// Whether the counter holds `t` tokens (Click's `contains`): false for more than
    /// the bucket can hold.
    pub fn contains(&self, rate: &TokenRate, t: u32) -> bool {
        rate.scaled(t).is_some_and(|f| f <= self.tokens)
    }

    /// Takes `t` tokens, or all there are if fewer (Click's `remove`, which a
    /// bandwidth bucket uses to take a packet's bytes once it holds its threshold).
    pub fn remove(&mut self, rate: &TokenRate, t: u32) {
        self.tokens = match rate.scaled(t) {
            Some(f) => self.tokens.saturating_sub(f),
            None => 0,
        };
    }

    /// Keeps the token count when the rate's scale changes (Click's `adjust`).
    pub fn adjust(&mut self, old: &TokenRate, new: &TokenRate) {
        if old.token_scale != new.token_scale {
            let v = self.tokens as u128 * new.token_scale as u128 / old.token_scale as u128;
            self.tokens = v.min(MAX_TOKENS as u128) as u32;
        }
    }
}

impl Default for TokenCounter {
    fn default() -> Self {
        TokenCounter::new()
    }
}

/// Click's jiffies: milliseconds of a monotonic clock that started long ago.
pub fn jiffies() -> u64 {
    static BASE: OnceLock<Instant> = OnceLock::new();
    let base = BASE.get_or_init(Instant::now);
    base.elapsed().as_millis() as u64 + (1 << 32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_bucket_arithmetic_is_clicks() {
        let r = TokenRate::new(10, 2);
        assert_eq!(r.rate(), 10);
        assert_eq!(TokenRate::new(1000, 10).rate(), 1000);
        let mut c = TokenCounter::new();
        c.set(&r, 1);
        let t0 = 1 << 32;
        // The first refill fills the bucket (its time point starts at 0).
        c.refill(&r, t0);
        assert!(c.remove_if(&r, 1));
        assert!(c.remove_if(&r, 1));
        assert!(!c.remove_if(&r, 1));
        // 10 per second with jiffies: 100 ms is a hair short of one token, 101 is enough.
        c.refill(&r, t0 + 100);
        assert!(!c.remove_if(&r, 1));
        c.refill(&r, t0 + 101);
        assert!(c.remove_if(&r, 1));
    }

    #[test]
    fn an_idle_rate_never_refills() {
        let idle = TokenRate::new(0, 2);
        assert_eq!(idle.rate(), 0);
        let mut c = TokenCounter::new();
        // The first refill of a new counter (time point 0) fills any other rate.
        c.refill(&idle, 1 << 32);
        assert!(!c.remove_if(&idle, 1));
        c.refill(&idle, (1 << 32) + 1_000_000);
        assert!(!c.remove_if(&idle, 1));
        // What was set stays until taken.
        c.set(&idle, 1);
        c.refill(&idle, (1 << 32) + 2_000_000);
        assert!(c.remove_if(&idle, 1));
        assert!(!c.remove_if(&idle, 1));
    }
}
