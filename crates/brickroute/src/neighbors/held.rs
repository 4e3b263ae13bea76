//! The packets one worker's `NeighborEncap` holds while the kernel resolves their next
//! hop, as the kernel holds its own (`unres_qlen`): a few an address and a bounded
//! number in all, sent once the address resolves, passed on for an ICMP error when the
//! kernel fails to resolve it, and dropped when nothing is heard in time.

use super::Snapshot;
use graph::element::Outputs;
use packet::Packet;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Packets held for one address at most: Linux's `unres_qlen` of old. Later ones are
/// dropped (the first packets of a flow, a TCP handshake's, are the ones that matter).
pub(super) const PER_ADDRESS: usize = 3;
/// Packets one worker holds at most: they hold packet buffers (an AF_XDP interface's
/// UMEM frames), which receiving needs too.
pub(super) const PER_WORKER: usize = 256;
/// How long packets wait for their address at most, should the kernel's answer never
/// come: well past its own resolution (three probes a second apart), after which it
/// has said `FAILED` and the packets have gone to output 1.
pub(super) const WAIT: Duration = Duration::from_secs(10);

struct Waiting {
    since: Instant,
    packets: Vec<Packet>,
}

/// The held packets, by next-hop address (hashed with the standard library's keyed
/// hash: senders choose these addresses where the route is a connected network's).
#[derive(Default)]
pub(super) struct Held {
    by_address: HashMap<u128, Waiting>,
    count: usize,
    /// The snapshot generation the held packets were last checked against, and when
    /// the first of them waits too long: until one changes, there is nothing to check
    /// (a flood towards unresolved addresses does not walk the table every batch).
    checked: u64,
    expiry: Option<Instant>,
}

impl Held {
    pub(super) fn is_empty(&self) -> bool {
        self.count == 0
    }

    pub(super) fn len(&self) -> usize {
        self.count
    }

    /// Whether packets for `a` are held (a packet for it then waits behind them, even
    /// if it resolved meanwhile).
    pub(super) fn holds(&self, a: u128) -> bool {
        self.by_address.contains_key(&a)
    }

    /// Holds `p` until `a` resolves; gives it back when `a` or the worker has no room.
    pub(super) fn hold(&mut self, a: u128, p: Packet, now: Instant) -> Result<(), Packet> {
        if self.count >= PER_WORKER {
            return Err(p);
        }
        let w = self.by_address.entry(a).or_insert_with(|| Waiting {
            since: now,
            packets: Vec::new(),
        });
        let expiry = w.since + WAIT;
        self.expiry = Some(self.expiry.map_or(expiry, |e| e.min(expiry)));
        if w.packets.len() >= PER_ADDRESS {
            return Err(p);
        }
        w.packets.push(p);
        self.count += 1;
        Ok(())
    }

    /// Sends on what `snapshot` (of `generation`) resolved (with its Ethernet header, to
    /// output 0) or says the kernel failed to resolve (unchanged, to `failed_port`, or
    /// dropped when that is `DROP`), and drops what waited longer than [`WAIT`]; returns
    /// how many were dropped. Does nothing when neither the snapshot nor the time gives
    /// anything new.
    pub(super) fn release(
        &mut self,
        snapshot: &Snapshot,
        generation: u64,
        failed_port: u8,
        now: Instant,
        out: &mut Outputs<'_>,
    ) -> u64 {
        if generation == self.checked && self.expiry.is_none_or(|e| now < e) {
            return 0;
        }
        self.checked = generation;
        let mut dropped = 0u64;
        let mut count = self.count;
        let mut expiry: Option<Instant> = None;
        self.by_address.retain(|a, w| {
            let n = w.packets.len();
            if let Some(h) = snapshot.headers.get(a) {
                for mut p in w.packets.drain(..) {
                    p.push_mac_header_bytes(h);
                    out.push(0, p);
                }
            } else if snapshot.failed.contains(a) && failed_port != graph::element::DROP {
                for p in w.packets.drain(..) {
                    out.push(usize::from(failed_port), p);
                }
            } else if snapshot.failed.contains(a) || now.duration_since(w.since) >= WAIT {
                dropped += n as u64;
                w.packets.clear();
            } else {
                let e = w.since + WAIT;
                expiry = Some(expiry.map_or(e, |x| x.min(e)));
                return true;
            }
            count -= n;
            false
        });
        self.count = count;
        self.expiry = expiry;
        dropped
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use graph::element::DROP;
    use packet::PacketBatch;

    const A: u128 = 0x0a00_0002;
    const B: u128 = 0x0a00_0003;
    const HEADER: [u8; 14] = [2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00];

    fn packet(tag: u8) -> Packet {
        Packet::from_slice(&[0x45, tag])
    }

    /// Releases against `snapshot` (of `generation`) at `now`: what left on outputs 0 and
    /// 1 (their bytes), and how many were dropped.
    fn release(
        held: &mut Held,
        snapshot: &Snapshot,
        generation: u64,
        failed_port: u8,
        now: Instant,
    ) -> (Vec<Vec<Vec<u8>>>, u64) {
        let mut outs: Vec<PacketBatch> = (0..2).map(|_| PacketBatch::new()).collect();
        let dropped = held.release(
            snapshot,
            generation,
            failed_port,
            now,
            &mut Outputs::new(&mut outs),
        );
        let bytes = outs
            .iter()
            .map(|b| b.iter().map(|p| p.data().to_vec()).collect())
            .collect();
        (bytes, dropped)
    }

    fn resolved(a: u128) -> Snapshot {
        let mut s = Snapshot::default();
        s.headers.insert(a, HEADER);
        s
    }

    #[test]
    fn held_packets_leave_in_order_with_their_header_once_resolved() {
        let (mut held, now) = (Held::default(), Instant::now());
        for tag in 1..=3 {
            assert!(held.hold(A, packet(tag), now).is_ok());
        }
        // A fourth for the same address is given back.
        assert!(held.hold(A, packet(4), now).is_err());
        assert!(held.holds(A) && held.len() == 3);
        // A newer snapshot without the address: nothing leaves.
        let (out, dropped) = release(&mut held, &Snapshot::default(), 1, DROP, now);
        assert_eq!((out[0].len(), dropped, held.len()), (0, 0, 3));
        let (out, dropped) = release(&mut held, &resolved(A), 2, DROP, now);
        let want: Vec<Vec<u8>> = (1..=3u8).map(|t| [&HEADER[..], &[0x45, t]].concat()).collect();
        assert_eq!((out[0].clone(), dropped), (want, 0));
        assert!(held.is_empty() && !held.holds(A));
    }

    #[test]
    fn a_failed_address_sends_its_packets_to_the_failed_port_or_drops_them() {
        let now = Instant::now();
        let mut failed = Snapshot::default();
        failed.failed.insert(A);
        let mut held = Held::default();
        held.hold(A, packet(1), now).unwrap();
        held.hold(B, packet(2), now).unwrap();
        let (out, dropped) = release(&mut held, &failed, 1, 1, now);
        assert_eq!((out[1].clone(), dropped, held.len()), (vec![vec![0x45, 1]], 0, 1));
        let mut held = Held::default();
        held.hold(A, packet(1), now).unwrap();
        let (out, dropped) = release(&mut held, &failed, 1, DROP, now);
        assert_eq!((out[1].len(), dropped, held.len()), (0, 1, 0));
    }

    #[test]
    fn packets_without_news_are_dropped_after_the_wait() {
        let (mut held, now) = (Held::default(), Instant::now());
        held.hold(A, packet(1), now).unwrap();
        held.hold(B, packet(2), now + Duration::from_secs(1)).unwrap();
        // The same snapshot, before the wait is over: nothing to do.
        assert_eq!(
            release(&mut held, &Snapshot::default(), 0, DROP, now + WAIT / 2).1,
            0
        );
        // A's wait is over, B's not yet, with no new snapshot.
        let (_, dropped) = release(&mut held, &Snapshot::default(), 0, DROP, now + WAIT);
        assert_eq!((dropped, held.len(), held.holds(B)), (1, 1, true));
        let (_, dropped) = release(
            &mut held,
            &Snapshot::default(),
            0,
            DROP,
            now + WAIT + Duration::from_secs(1),
        );
        assert_eq!((dropped, held.len()), (1, 0));
    }

    #[test]
    fn a_worker_holds_at_most_its_share() {
        let (mut held, now) = (Held::default(), Instant::now());
        for i in 0..PER_WORKER as u128 {
            assert!(held.hold(i, packet(0), now).is_ok());
        }
        assert!(held.hold(PER_WORKER as u128, packet(0), now).is_err());
        assert_eq!(held.len(), PER_WORKER);
    }
}
