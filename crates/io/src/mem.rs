//! `MemPort`: an in-memory multi-queue port.

use crate::port::{CachePadded, Port, QueueCounters, QueueStats};
use classify::rss::{Reta, Toeplitz};
use packet::{Packet, PacketBatch};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// A queue budget that never runs out.
const ENDLESS: u64 = u64::MAX;

/// An in-memory port with N RX/TX queue pairs.
///
/// The receive side replays a traffic template. The template, repeated, is the packet
/// sequence arriving on the wire: packet j is `frames[j % frames.len()]`. Each frame
/// goes to the queue its RSS hash (Microsoft key, [`Toeplitz::hash_frame`]) selects in
/// the indirection table, exactly as a multi-queue NIC steers it; a queue then delivers
/// its frames in template order, cycling. With a total of N packets, queue q delivers
/// exactly the packets among the first N of the sequence that steer to q, so the
/// queues' budgets add up to N exactly. Without a total the traffic never ends. A total
/// can be raised later ([`MemPort::set_total`]): the queues then go on to deliver the
/// next packets of the same sequence, so a benchmark can run exact shares in turns.
///
/// [`Port::rx_burst`] writes each frame into a fresh packet from the calling thread's
/// pool: that copy stands for the NIC's DMA write and is part of the measured cost.
/// [`Port::tx_burst`] counts the packets and drops them, recycling their frames.
pub struct MemPort {
    rx: Vec<RxQueue>,
    /// The queue each template frame steers to.
    steer: Vec<usize>,
    counters: Vec<CachePadded<QueueCounters>>,
    reta: Reta,
}

/// Frames up to this size are copied with fixed-size moves (minimum-size frames are the
/// ones whose per-packet cost matters).
const SHORT_FRAME: usize = 64;

struct RxQueue {
    /// The queue's frames, back to back.
    data: Vec<u8>,
    /// (offset, length) of each frame in `data`, in template order.
    frames: Vec<(usize, usize)>,
    /// `bytes_before[i]`: bytes of `frames[..i]` (one more entry than `frames`), so a
    /// burst's byte count is one subtraction per run instead of an add per packet.
    bytes_before: Vec<u64>,
    /// Every frame is at most [`SHORT_FRAME`] bytes: bursts copy with fixed-size moves
    /// and test no length per packet.
    all_short: bool,
    /// Packets this queue delivers in all ([`ENDLESS`]: no end).
    budget: AtomicU64,
    state: CachePadded<RxState>,
}

/// Written only by the queue's owner; atomics keep the port shareable (`Sync`)
/// without locks.
#[derive(Debug, Default)]
struct RxState {
    /// Next frame to deliver.
    cursor: AtomicUsize,
    /// Packets delivered so far.
    delivered: AtomicU64,
}

impl MemPort {
    /// A port with `queues` queue pairs and no traffic (transmit only).
    pub fn new(queues: usize) -> MemPort {
        MemPort::with_traffic(queues, &[], Some(0))
    }

    /// A port whose receive side replays `frames` (see [`MemPort`]), `total_packets` in
    /// all or endlessly, steered by a round-robin indirection table over `queues`.
    pub fn with_traffic(queues: usize, frames: &[Vec<u8>], total_packets: Option<u64>) -> MemPort {
        MemPort::with_reta(Reta::new(queues), frames, total_packets)
    }

    /// Like [`MemPort::with_traffic`] with a given indirection table; the port has
    /// `reta.queues()` queues.
    pub fn with_reta(reta: Reta, frames: &[Vec<u8>], total_packets: Option<u64>) -> MemPort {
        let nq = reta.queues();
        let toeplitz = Toeplitz::microsoft();
        let steer: Vec<usize> = frames
            .iter()
            .map(|f| reta.queue_for(toeplitz.hash_frame(f)))
            .collect();
        let budgets = queue_budgets(&steer, nq, total_packets);
        let rx = budgets
            .into_iter()
            .enumerate()
            .map(|(q, budget)| {
                let mut data = Vec::new();
                let mut offs = Vec::new();
                let mut bytes_before = vec![0u64];
                for (f, _) in frames.iter().zip(&steer).filter(|(_, &s)| s == q) {
                    offs.push((data.len(), f.len()));
                    data.extend_from_slice(f);
                    bytes_before.push(data.len() as u64);
                }
                let all_short = offs.iter().all(|&(_, len)| len <= SHORT_FRAME);
                // Room for the receive path's fixed 64-byte copies of the last frame.
                data.extend_from_slice(&[0u8; SHORT_FRAME]);
                RxQueue {
                    data,
                    frames: offs,
                    bytes_before,
                    all_short,
                    budget: AtomicU64::new(budget.unwrap_or(ENDLESS)),
                    state: CachePadded::default(),
                }
            })
            .collect();
        MemPort {
            rx,
            steer,
            counters: (0..nq).map(|_| CachePadded::default()).collect(),
            reta,
        }
    }

    pub fn reta(&self) -> &Reta {
        &self.reta
    }

    /// Packets queue `q` delivers in all (`None`: endless; 0 for a queue that does not
    /// exist).
    pub fn rx_budget(&self, q: usize) -> Option<u64> {
        self.rx.get(q).map_or(Some(0), |r| {
            Some(r.budget.load(Ordering::Relaxed)).filter(|&b| b != ENDLESS)
        })
    }

    /// Makes the port deliver `total` packets of its sequence in all, counting those it
    /// has delivered (`None`: endlessly). Raising the total of a port whose queues have
    /// each delivered their budget makes them go on with the next packets of the
    /// sequence, exactly as if the larger total had been given at the start; a total
    /// below what a queue has delivered stops it.
    pub fn set_total(&self, total: Option<u64>) {
        let budgets = queue_budgets(&self.steer, self.rx.len(), total);
        for (rx, b) in self.rx.iter().zip(budgets) {
            rx.budget.store(b.unwrap_or(ENDLESS), Ordering::Relaxed);
        }
    }

    /// Number of template frames steered to queue `q`.
    pub fn rx_frames(&self, q: usize) -> usize {
        self.rx.get(q).map_or(0, |r| r.frames.len())
    }
}

/// Each queue's share of the first `total` packets of the sequence (`None`: endless):
/// the whole template's count of frames steered to it per cycle, plus those of the
/// last, partial cycle.
fn queue_budgets(steer: &[usize], queues: usize, total: Option<u64>) -> Vec<Option<u64>> {
    let Some(total) = total else {
        return vec![None; queues];
    };
    if steer.is_empty() {
        return vec![Some(0); queues];
    }
    let cycles = total / steer.len() as u64;
    let rem = (total % steer.len() as u64) as usize;
    (0..queues)
        .map(|q| {
            let per_cycle = steer.iter().filter(|&&s| s == q).count() as u64;
            let partial = steer[..rem].iter().filter(|&&s| s == q).count() as u64;
            Some(cycles * per_cycle + partial)
        })
        .collect()
}

impl Port for MemPort {
    fn queues(&self) -> usize {
        self.rx.len()
    }

    fn rx_burst(&self, queue: usize, batch: &mut PacketBatch, max: usize) -> usize {
        let Some(rx) = self.rx.get(queue) else {
            return 0;
        };
        if rx.frames.is_empty() {
            return 0;
        }
        let delivered = rx.state.delivered.load(Ordering::Relaxed);
        let budget = rx.budget.load(Ordering::Relaxed);
        let n = budget.saturating_sub(delivered).min(max as u64) as usize;
        if n == 0 {
            return 0;
        }
        // Frames come from the pool in one go; then each is written as the NIC's DMA
        // would write it, in runs of consecutive template frames (a run ends where the
        // template wraps), so the per-packet loop walks two slices in step.
        let first = batch.len();
        Packet::alloc_rx_into(batch, n);
        let nframes = rx.frames.len();
        let mut cursor = rx.state.cursor.load(Ordering::Relaxed).min(nframes - 1);
        let mut bytes = 0u64;
        let mut pkts = &mut batch.as_mut_slice()[first..];
        let data = rx.data.as_ptr();
        while !pkts.is_empty() {
            let run = pkts.len().min(nframes - cursor);
            let (now, rest) = std::mem::take(&mut pkts).split_at_mut(run);
            let frames = &rx.frames[cursor..cursor + run];
            if rx.all_short {
                for (p, &(off, len)) in now.iter_mut().zip(frames) {
                    // SAFETY: `data` has SHORT_FRAME spare bytes after its last frame, so
                    // SHORT_FRAME bytes from any recorded frame offset are in bounds.
                    let frame = unsafe { &*(data.add(off) as *const [u8; SHORT_FRAME]) };
                    // SAFETY: `all_short` says every frame length is at most SHORT_FRAME;
                    // telling the compiler spares `write_from_fixed` its length test.
                    unsafe { std::hint::assert_unchecked(len <= SHORT_FRAME) };
                    p.write_from_fixed(frame, len);
                }
            } else {
                for (p, &(off, len)) in now.iter_mut().zip(frames) {
                    p.write_from(&rx.data[off..off + len]);
                }
            }
            bytes += rx.bytes_before[cursor + run] - rx.bytes_before[cursor];
            cursor += run;
            if cursor == nframes {
                cursor = 0;
            }
            pkts = rest;
        }
        rx.state.cursor.store(cursor, Ordering::Relaxed);
        rx.state.delivered.store(delivered + n as u64, Ordering::Relaxed);
        self.counters[queue].count_rx(n, bytes);
        n
    }

    fn rx_finished(&self, queue: usize) -> bool {
        match self.rx.get(queue) {
            None => true,
            Some(rx) if rx.frames.is_empty() => true,
            Some(rx) => rx.state.delivered.load(Ordering::Relaxed) >= rx.budget.load(Ordering::Relaxed),
        }
    }

    fn tx_burst(&self, queue: usize, batch: &mut PacketBatch) -> usize {
        let Some(c) = self.counters.get(queue) else {
            batch.clear();
            return 0;
        };
        let n = batch.len();
        let bytes = batch.clear_counting_bytes();
        // fetch_add, not load+store: a shared transmit queue (ToDevice with an explicit
        // QUEUE on several workers) still counts exactly.
        c.tx_packets.fetch_add(n as u64, Ordering::Relaxed);
        c.tx_bytes.fetch_add(bytes, Ordering::Relaxed);
        n
    }

    fn stats(&self, queue: usize) -> QueueStats {
        self.counters
            .get(queue)
            .map_or(QueueStats::default(), |c| c.snapshot())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use classify::rss::rss_queue_for_frame;
    use std::sync::Arc;

    /// Ethernet + IPv4 + UDP frame from 10.0.0.`i` port 1000+`i` to 198.18.0.1:9, with
    /// `pad` payload bytes, written out by hand.
    fn udp_frame(i: u8, pad: usize) -> Vec<u8> {
        let ip_len = (20 + 8 + pad) as u16;
        let mut f = vec![
            0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2, 0x08, 0x00, // Ethernet
            0x45, 0x00,
        ];
        f.extend_from_slice(&ip_len.to_be_bytes());
        f.extend_from_slice(&[0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, i, 198, 18, 0, 1]);
        f.extend_from_slice(&(1000 + u16::from(i)).to_be_bytes());
        f.extend_from_slice(&[0, 9]);
        f.extend_from_slice(&(8 + pad as u16).to_be_bytes());
        f.extend_from_slice(&[0, 0]);
        f.resize(f.len() + pad, i);
        f
    }

    fn drain_queue(port: &MemPort, q: usize, burst: usize) -> Vec<Vec<u8>> {
        let mut got = Vec::new();
        let mut b = PacketBatch::new();
        while port.rx_burst(q, &mut b, burst) > 0 {
            got.extend(b.drain().map(|p| p.data().to_vec()));
        }
        got
    }

    /// Ten frames and the queue of three each steers to, by the RSS hash computed apart.
    fn ten_frames_over_three_queues() -> (Vec<Vec<u8>>, Vec<usize>) {
        let frames: Vec<Vec<u8>> = (1..=10).map(|i| udp_frame(i, 4)).collect();
        let reta = Reta::new(3);
        let steer = frames
            .iter()
            .map(|f| reta.queue_for(rss_queue_for_frame(f)))
            .collect();
        (frames, steer)
    }

    #[test]
    fn budget_split_is_exact_and_follows_rss() {
        let (frames, steer) = ten_frames_over_three_queues();
        let port = MemPort::with_traffic(3, &frames, Some(1003));
        assert_eq!(port.queues(), 3);
        let mut total = 0;
        for q in 0..3 {
            // The NIC's view: packet j of the wire sequence is frame j % 10.
            let expected: Vec<Vec<u8>> = (0..1003)
                .filter(|j| steer[j % 10] == q)
                .map(|j| frames[j % 10].clone())
                .collect();
            assert_eq!(port.rx_budget(q), Some(expected.len() as u64));
            assert!(!port.rx_finished(q) || expected.is_empty());
            let got = drain_queue(&port, q, 32);
            assert_eq!(got, expected, "queue {}", q);
            assert!(port.rx_finished(q));
            let bytes: usize = expected.iter().map(|f| f.len()).sum();
            let s = port.stats(q);
            assert_eq!((s.rx_packets, s.rx_bytes), (expected.len() as u64, bytes as u64));
            total += got.len();
        }
        assert_eq!(total, 1003);
        assert_eq!(port.totals().rx_packets, 1003);
        // Nothing more once the budget is spent.
        let mut b = PacketBatch::new();
        assert_eq!(port.rx_burst(0, &mut b, 32), 0);
    }

    #[test]
    fn a_raised_total_goes_on_with_the_sequence() {
        // Shares of 7, 13 and 0 then 20 more, against the wire sequence's first 40
        // packets: each queue delivers exactly its packets among them, in order.
        let (frames, steer) = ten_frames_over_three_queues();
        let port = MemPort::with_traffic(3, &frames, Some(0));
        let mut got = vec![Vec::new(); 3];
        for total in [7, 20, 20, 40] {
            port.set_total(Some(total));
            for (q, g) in got.iter_mut().enumerate() {
                g.extend(drain_queue(&port, q, 4));
                assert!(port.rx_finished(q));
            }
            assert_eq!(port.totals().rx_packets, total);
        }
        for (q, g) in got.iter().enumerate() {
            let want: Vec<Vec<u8>> = (0..40)
                .filter(|j| steer[j % 10] == q)
                .map(|j| frames[j % 10].clone())
                .collect();
            assert_eq!(*g, want, "queue {}", q);
        }
        // And endless from there on.
        port.set_total(None);
        assert_eq!(port.rx_budget(0), None);
        assert!(!port.rx_finished(0));
        let mut b = PacketBatch::new();
        assert_eq!(port.rx_burst(0, &mut b, 32), 32);
    }

    #[test]
    fn bursts_wrap_the_template_with_short_and_long_frames() {
        // 42 + pad bytes: 64 B frames take the fixed-copy path, 1000 B ones do not; a
        // burst of 5 over a 3-frame template crosses the wrap in most bursts.
        for pads in [[22, 22, 22], [22, 958, 0]] {
            let frames: Vec<Vec<u8>> = pads.iter().zip(1u8..).map(|(&p, i)| udp_frame(i, p)).collect();
            let port = MemPort::with_reta(Reta::new(1), &frames, Some(17));
            let got = drain_queue(&port, 0, 5);
            let want: Vec<Vec<u8>> = (0..17).map(|j| frames[j % 3].clone()).collect();
            assert_eq!(got, want, "pads {:?}", pads);
            let bytes: usize = want.iter().map(Vec::len).sum();
            assert_eq!(port.stats(0).rx_bytes, bytes as u64, "pads {:?}", pads);
        }
    }

    #[test]
    fn burst_respects_max_and_budget() {
        let frames = vec![udp_frame(1, 0)];
        let port = MemPort::with_traffic(1, &frames, Some(5));
        let mut b = PacketBatch::new();
        assert_eq!(port.rx_burst(0, &mut b, 4), 4);
        assert_eq!(port.rx_burst(0, &mut b, 4), 1);
        assert_eq!(port.rx_burst(0, &mut b, 4), 0);
        assert_eq!(b.len(), 5);
        for p in b.iter() {
            assert_eq!(p.data(), &frames[0][..]);
            assert_eq!(p.mac_header_offset(), Some(0));
        }
        // Out-of-range queue: nothing, finished.
        assert_eq!(port.rx_burst(7, &mut b, 4), 0);
        assert!(port.rx_finished(7));
    }

    #[test]
    fn endless_traffic_and_empty_queues() {
        let frames = vec![udp_frame(1, 0), udp_frame(2, 0)];
        let port = MemPort::with_traffic(1, &frames, None);
        let mut b = PacketBatch::new();
        for _ in 0..10 {
            assert_eq!(port.rx_burst(0, &mut b, 32), 32);
            b.clear();
        }
        assert!(!port.rx_finished(0));
        assert_eq!(port.stats(0).rx_packets, 320);
        // A port without traffic is finished at once.
        let empty = MemPort::new(2);
        assert!(empty.rx_finished(0) && empty.rx_finished(1));
        assert_eq!(empty.rx_burst(1, &mut b, 32), 0);
    }

    #[test]
    fn tx_counts_and_recycles() {
        let port = Arc::new(MemPort::new(2));
        let mut b = PacketBatch::new();
        b.push(Packet::from_slice(&[0u8; 60]));
        b.push(Packet::from_slice(&[0u8; 100]));
        let before = packet::pool::stats().recycled;
        assert_eq!(port.tx_burst(1, &mut b), 2);
        assert!(b.is_empty());
        assert_eq!(packet::pool::stats().recycled, before + 2);
        // Readable from another thread.
        let p2 = port.clone();
        let s = std::thread::spawn(move || p2.stats(1)).join().unwrap();
        assert_eq!(
            s,
            QueueStats {
                rx_packets: 0,
                rx_bytes: 0,
                tx_packets: 2,
                tx_bytes: 160
            }
        );
        assert_eq!(port.stats(0), QueueStats::default());
        b.push(Packet::from_slice(&[1]));
        assert_eq!(port.tx_burst(5, &mut b), 0);
        assert!(b.is_empty());
        assert_eq!(port.totals().tx_packets, 2);
    }

    #[test]
    fn custom_reta_steers_everything_to_one_queue() {
        let mut reta = Reta::new(2);
        for i in 0..128 {
            reta.set(i, 1).unwrap();
        }
        let frames: Vec<Vec<u8>> = (1..=4).map(|i| udp_frame(i, 0)).collect();
        let port = MemPort::with_reta(reta, &frames, Some(9));
        assert_eq!(port.rx_budget(0), Some(0));
        assert_eq!(port.rx_budget(1), Some(9));
        assert_eq!(port.rx_frames(1), 4);
        let got = drain_queue(&port, 1, 4);
        let expected: Vec<Vec<u8>> = (0..9).map(|j| frames[j % 4].clone()).collect();
        assert_eq!(got, expected);
    }
}
