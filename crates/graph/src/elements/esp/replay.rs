//! The receiver's anti-replay window (RFC 4303 section 3.4.3 and appendix A): the
//! highest sequence number accepted, and which of the `window` numbers up to it have
//! been seen, in a ring of 64-bit words (RFC 6479) so that moving the window clears
//! words instead of shifting a bitmap.

/// The largest window: sequence numbers up to this far behind the highest accepted
/// are told apart.
pub(crate) const MAX_WINDOW: u64 = 1024;
/// One word more than the window spans, so the word the top moves into never holds a
/// number still inside the window.
const WORDS: u64 = MAX_WINDOW / 64 + 1;

/// Why a sequence number is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stale {
    /// Seen before.
    Replayed,
    /// Behind the window (or 0, which no sender uses).
    TooOld,
}

pub(crate) struct Replay {
    /// Numbers accepted this far behind the top are checked; 0: none are refused.
    window: u64,
    esn: bool,
    /// The highest sequence number accepted (0: none yet).
    top: u64,
    ring: [u64; WORDS as usize],
}

impl Replay {
    /// `window` at most [`MAX_WINDOW`]; with `esn`, at least 1 (the high half of a
    /// sequence number is inferred from the window, RFC 4303 A2.2).
    pub(crate) fn new(window: u64, esn: bool) -> Replay {
        debug_assert!(window <= MAX_WINDOW && (window > 0 || !esn));
        Replay {
            window,
            esn,
            top: 0,
            ring: [0; WORDS as usize],
        }
    }

    /// The highest sequence number accepted.
    pub(crate) fn top(&self) -> u64 {
        self.top
    }

    /// The whole sequence number of a packet that carries its low 32 bits: itself
    /// without ESN; with ESN, the high half that puts it in or above the window
    /// (RFC 4303 A2.2). 0 for a number from before the first subspace.
    pub(crate) fn full(&self, low: u32) -> u64 {
        if !self.esn {
            return u64::from(low);
        }
        let w = self.window as u32;
        let (th, tl) = ((self.top >> 32) as u32, self.top as u32);
        let bottom = tl.wrapping_sub(w - 1);
        let high = if tl >= w - 1 {
            // The window lies within one subspace: below it is the next one.
            if low >= bottom {
                th
            } else {
                match th.checked_add(1) {
                    Some(h) => h,
                    None => return 0,
                }
            }
        } else if low >= bottom {
            // The window spans two subspaces, and this number is in the lower one.
            match th.checked_sub(1) {
                Some(h) => h,
                None => return 0,
            }
        } else {
            th
        };
        u64::from(high) << 32 | u64::from(low)
    }

    /// Whether `seq` may be accepted: new, or inside the window and not seen.
    pub(crate) fn check(&self, seq: u64) -> Result<(), Stale> {
        if seq == 0 {
            return Err(Stale::TooOld);
        }
        if self.window == 0 || seq > self.top {
            return Ok(());
        }
        if self.top - seq >= self.window {
            return Err(Stale::TooOld);
        }
        if self.ring[Self::word(seq)] & Self::bit(seq) != 0 {
            return Err(Stale::Replayed);
        }
        Ok(())
    }

    /// Accepts `seq` if [`Self::check`] still allows it (it is called again once the
    /// packet has been authenticated: another worker may have taken the number since).
    pub(crate) fn accept(&mut self, seq: u64) -> Result<(), Stale> {
        self.check(seq)?;
        if seq > self.top {
            // Clear the words the top moves over (all of them after a long jump).
            let (from, to) = (self.top / 64, seq / 64);
            for w in (from + 1..=to).take(WORDS as usize) {
                self.ring[(w % WORDS) as usize] = 0;
            }
            self.top = seq;
        }
        // Only numbers the ring spans are recorded: without a window (REPLAY 0) an old
        // number would set the bit of a recent one, which a window taken over
        // (`go_on_from`) would then refuse.
        if self.top - seq < MAX_WINDOW {
            self.ring[Self::word(seq)] |= Self::bit(seq);
        }
        Ok(())
    }

    /// Goes on from `old`'s numbers (a replaced configuration's window for the same
    /// association), with this window's size: the ring records what was accepted
    /// whatever the window, so a number is refused exactly as `old` would have
    /// refused it with this window.
    pub(crate) fn go_on_from(&mut self, old: &Replay) {
        self.top = old.top;
        self.ring = old.ring;
    }

    fn word(seq: u64) -> usize {
        (seq / 64 % WORDS) as usize
    }

    fn bit(seq: u64) -> u64 {
        1 << (seq % 64)
    }
}
