//! Batches of packets: the unit elements process.

use crate::{split, Packet};

/// Default batch size (RouteBricks' k_p).
pub const DEFAULT_BATCH: usize = 32;
/// Largest batch a port or source hands over at once.
pub const MAX_BATCH: usize = 256;

/// A batch of packets. Its storage is allocated once, with room for [`MAX_BATCH`]
/// packets, and reused: the graph keeps batches per output port and swaps them.
#[derive(Debug)]
pub struct PacketBatch {
    pkts: Vec<Packet>,
}

impl Default for PacketBatch {
    fn default() -> Self {
        PacketBatch::new()
    }
}

impl PacketBatch {
    pub fn new() -> PacketBatch {
        PacketBatch {
            pkts: Vec::with_capacity(MAX_BATCH),
        }
    }

    /// An empty batch that has not allocated (for placeholders).
    pub const fn empty() -> PacketBatch {
        PacketBatch { pkts: Vec::new() }
    }

    #[inline]
    pub fn len(&self) -> usize {
        self.pkts.len()
    }

    #[inline]
    pub(crate) fn vec_mut(&mut self) -> &mut Vec<Packet> {
        &mut self.pkts
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.pkts.is_empty()
    }

    /// Appends `p`, growing out of line only when the batch is full, so a dispatch
    /// loop pushing packet by packet keeps the growing call out of its body.
    #[inline(always)]
    pub fn push(&mut self, p: Packet) {
        let len = self.pkts.len();
        if len < self.pkts.capacity() {
            // SAFETY: `len < capacity`, so slot `len` is allocated and unused; writing it
            // and counting it moves `p` into the batch.
            unsafe {
                self.pkts.as_mut_ptr().add(len).write(p);
                self.pkts.set_len(len + 1);
            }
        } else {
            self.push_growing(p);
        }
    }

    #[inline]
    pub fn pop(&mut self) -> Option<Packet> {
        self.pkts.pop()
    }

    /// Removes all packets, in order.
    #[inline]
    pub fn drain(&mut self) -> std::vec::Drain<'_, Packet> {
        self.pkts.drain(..)
    }

    #[inline]
    pub fn iter(&self) -> std::slice::Iter<'_, Packet> {
        self.pkts.iter()
    }

    #[inline]
    pub fn iter_mut(&mut self) -> std::slice::IterMut<'_, Packet> {
        self.pkts.iter_mut()
    }

    #[inline]
    pub fn as_slice(&self) -> &[Packet] {
        &self.pkts
    }

    #[inline]
    pub fn as_mut_slice(&mut self) -> &mut [Packet] {
        &mut self.pkts
    }

    /// Keeps the packets for which `f` returns true, in order; the others are dropped
    /// (their frames recycled).
    #[inline]
    pub fn retain_mut(&mut self, f: impl FnMut(&mut Packet) -> bool) {
        self.pkts.retain_mut(f);
    }

    /// Moves all packets of `other` to the end of this batch.
    #[inline]
    pub fn append(&mut self, other: &mut PacketBatch) {
        if self.pkts.is_empty() && other.pkts.capacity() >= self.pkts.capacity() {
            std::mem::swap(&mut self.pkts, &mut other.pkts);
        } else {
            self.pkts.append(&mut other.pkts);
        }
    }

    /// Moves every packet to the batch `port(i, &mut packet)` names in `outs` (packet
    /// `i` in order, appended), or drops it when that is not an index of `outs`; the
    /// batch is empty afterwards. The split of an element with several outputs (a
    /// route lookup, a classifier): the ports of up to 64 packets are taken first, then
    /// moved port by port (see [`crate::split`]).
    #[inline]
    pub fn distribute(
        &mut self,
        outs: &mut [PacketBatch],
        mut port: impl FnMut(usize, &mut Packet) -> usize,
    ) {
        let n = self.pkts.len();
        let src = self.pkts.as_mut_ptr();
        // SAFETY: the length is zeroed first, so the packets below are owned by this
        // call: each is handed to `split_chunk` once (a panic in `port` would leak the
        // rest, never drop one twice); the storage stays allocated (capacity kept).
        unsafe { self.pkts.set_len(0) };
        let mut ports = [0u32; split::CHUNK];
        let mut start = 0;
        while start < n {
            let len = (n - start).min(split::CHUNK);
            for (j, slot) in ports[..len].iter_mut().enumerate() {
                // SAFETY: packet `start + j` (below `n`) has not been moved out yet.
                let p = unsafe { &mut *src.add(start + j) };
                *slot = u32::try_from(port(start + j, p)).unwrap_or(u32::MAX);
            }
            // SAFETY: packets `start..start + len` are still here and owned by this
            // call; `split_chunk` moves each out once and they are not touched again.
            unsafe { split::split_chunk(src.add(start), &ports[..len], outs) };
            start += len;
        }
    }

    /// [`PacketBatch::distribute`] with the ports given as a slice, `ports[i]` for
    /// packet `i` (a packet without an entry is dropped).
    #[inline]
    pub fn distribute_to(&mut self, outs: &mut [PacketBatch], ports: &[u32]) {
        self.pkts.truncate(ports.len());
        let n = self.pkts.len();
        let src = self.pkts.as_ptr();
        // SAFETY: as in `distribute`: the packets are owned by this call from here on.
        unsafe { self.pkts.set_len(0) };
        for (c, chunk) in ports[..n].chunks(split::CHUNK).enumerate() {
            // SAFETY: the chunk's packets are still here, each handed over once.
            unsafe { split::split_chunk(src.add(c * split::CHUNK), chunk, outs) };
        }
    }

    #[cold]
    #[inline(never)]
    fn push_growing(&mut self, p: Packet) {
        self.pkts.push(p);
    }

    /// Drops every packet, recycling all their frames in one pass over the pool.
    #[inline]
    pub fn clear(&mut self) {
        // The graph clears every element's input after each push; most are empty.
        if self.pkts.is_empty() {
            return;
        }
        crate::pool::recycle_all(&mut self.pkts);
    }

    /// [`PacketBatch::clear`] that also returns the packets' total length in bytes,
    /// summed in the pass that recycles them (a port's transmit counters).
    #[inline]
    pub fn clear_counting_bytes(&mut self) -> u64 {
        if self.pkts.is_empty() {
            return 0;
        }
        crate::pool::recycle_all(&mut self.pkts)
    }

    pub fn truncate(&mut self, n: usize) {
        self.pkts.truncate(n);
    }
}

impl Extend<Packet> for PacketBatch {
    fn extend<T: IntoIterator<Item = Packet>>(&mut self, iter: T) {
        self.pkts.extend(iter)
    }
}

impl FromIterator<Packet> for PacketBatch {
    fn from_iter<T: IntoIterator<Item = Packet>>(iter: T) -> Self {
        let mut b = PacketBatch::new();
        b.extend(iter);
        b
    }
}

impl<'a> IntoIterator for &'a PacketBatch {
    type Item = &'a Packet;
    type IntoIter = std::slice::Iter<'a, Packet>;
    fn into_iter(self) -> Self::IntoIter {
        self.pkts.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distribute_keeps_order_per_output_and_drops_unknown_ports() {
        // Packet i holds byte i; ports: 0, 1, 0, 7 (no such output: dropped), 1, 0.
        let ports = [0usize, 1, 0, 7, 1, 0];
        let mut b: PacketBatch = (0..6u8).map(|i| Packet::from_slice(&[i])).collect();
        let mut outs = [PacketBatch::new(), PacketBatch::new()];
        outs[1].push(Packet::from_slice(&[9]));
        let mut edited = Vec::new();
        b.distribute(&mut outs, |i, p| {
            edited.push(p.data()[0]);
            ports[i]
        });
        assert!(b.is_empty());
        assert_eq!(edited, vec![0, 1, 2, 3, 4, 5]);
        let bytes = |b: &PacketBatch| b.iter().map(|p| p.data()[0]).collect::<Vec<u8>>();
        assert_eq!(bytes(&outs[0]), vec![0, 2, 5]);
        assert_eq!(bytes(&outs[1]), vec![9, 1, 4]);
        // The emptied batch keeps its storage for the next round.
        b.push(Packet::from_slice(&[1]));
        assert_eq!(b.len(), 1);
    }

    #[test]
    fn distribute_to_keeps_order_per_output_and_drops_unknown_ports() {
        // Packet i holds byte i; ports: 1, 0, 9 (no such output), 1, 0; packet 5 has
        // no entry in `ports`.
        let mut b: PacketBatch = (0..6u8).map(|i| Packet::from_slice(&[i])).collect();
        let mut outs = [PacketBatch::new(), PacketBatch::new()];
        outs[0].push(Packet::from_slice(&[7]));
        b.distribute_to(&mut outs, &[1, 0, 9, 1, 0]);
        assert!(b.is_empty());
        let bytes = |b: &PacketBatch| b.iter().map(|p| p.data()[0]).collect::<Vec<u8>>();
        assert_eq!(bytes(&outs[0]), vec![7, 1, 4]);
        assert_eq!(bytes(&outs[1]), vec![0, 3]);
    }

    #[test]
    fn distribute_to_grows_a_full_output() {
        let full: PacketBatch = (0..MAX_BATCH).map(|_| Packet::from_slice(&[0])).collect();
        let mut outs = [full];
        let mut b: PacketBatch = (1..=3u8).map(|i| Packet::from_slice(&[i])).collect();
        b.distribute_to(&mut outs, &[0, 0, 0]);
        assert_eq!(outs[0].len(), MAX_BATCH + 3);
        let tail: Vec<u8> = outs[0].iter().skip(MAX_BATCH).map(|p| p.data()[0]).collect();
        assert_eq!(tail, vec![1, 2, 3]);
    }

    #[test]
    fn distribute_grows_a_full_output() {
        let mut full: PacketBatch = (0..MAX_BATCH).map(|_| Packet::from_slice(&[0])).collect();
        assert_eq!(full.len(), MAX_BATCH);
        let mut outs = [std::mem::take(&mut full)];
        let mut b: PacketBatch = (1..=3u8).map(|i| Packet::from_slice(&[i])).collect();
        b.distribute(&mut outs, |_, _| 0);
        assert_eq!(outs[0].len(), MAX_BATCH + 3);
        let tail: Vec<u8> = outs[0].iter().skip(MAX_BATCH).map(|p| p.data()[0]).collect();
        assert_eq!(tail, vec![1, 2, 3]);
    }

    /// Packet i holds the bytes of i (big-endian u16), to check order and identity.
    fn numbered(n: usize) -> PacketBatch {
        (0..n)
            .map(|i| Packet::from_slice(&(i as u16).to_be_bytes()))
            .collect()
    }

    fn numbers(b: &PacketBatch) -> Vec<usize> {
        b.iter()
            .map(|p| usize::from(u16::from_be_bytes([p.data()[0], p.data()[1]])))
            .collect()
    }

    #[test]
    fn splits_of_every_shape_match_a_packet_by_packet_reference() {
        // Batch sizes around the 64-packet mask width and the four-port compare groups,
        // one to six outputs, ports drawn so that some name no output.
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for n in [0usize, 1, 3, 4, 5, 31, 32, 33, 63, 64, 65, 127, 128, 200, 300] {
            for nouts in 1..=6usize {
                let ports: Vec<u32> = (0..n).map(|_| (next() % (nouts as u64 + 2)) as u32).collect();
                let mut want = vec![Vec::new(); nouts];
                for (i, &p) in ports.iter().enumerate() {
                    if let Some(w) = want.get_mut(p as usize) {
                        w.push(i);
                    }
                }
                let mut outs: Vec<PacketBatch> = (0..nouts).map(|_| PacketBatch::new()).collect();
                let mut b = numbered(n);
                b.distribute_to(&mut outs, &ports);
                assert!(b.is_empty());
                let got: Vec<Vec<usize>> = outs.iter().map(numbers).collect();
                assert_eq!(got, want, "distribute_to, {} packets, {} outputs", n, nouts);

                let mut outs: Vec<PacketBatch> = (0..nouts).map(|_| PacketBatch::new()).collect();
                let mut b = numbered(n);
                b.distribute(&mut outs, |i, _| ports[i] as usize);
                let got: Vec<Vec<usize>> = outs.iter().map(numbers).collect();
                assert_eq!(got, want, "distribute, {} packets, {} outputs", n, nouts);
            }
        }
    }

    #[test]
    fn a_split_to_one_output_and_to_no_output_frees_or_keeps_every_frame() {
        crate::pool::prefill(256);
        let before = crate::pool::stats();
        let mut outs = [PacketBatch::new(), PacketBatch::new()];
        let mut b = numbered(100);
        b.distribute_to(&mut outs, &[1; 100]);
        assert_eq!(numbers(&outs[1]), (0..100).collect::<Vec<_>>());
        assert!(outs[0].is_empty());
        // Ports past the outputs (and u32::MAX, a lookup's "no route"): all dropped.
        let mut b = numbered(70);
        let ports: Vec<u32> = (0..70).map(|i| if i % 2 == 0 { 2 } else { u32::MAX }).collect();
        b.distribute_to(&mut outs, &ports);
        assert_eq!(outs[0].len() + outs[1].len(), 100);
        outs[1].clear();
        let after = crate::pool::stats();
        assert_eq!(after.recycled - before.recycled, 170);
    }

    #[test]
    fn clearing_with_a_byte_count_sums_the_lengths_and_recycles_the_frames() {
        crate::pool::prefill(8);
        let before = crate::pool::stats();
        let mut b: PacketBatch = [3usize, 60, 1].iter().map(|&n| Packet::zeroed(n)).collect();
        assert_eq!(b.clear_counting_bytes(), 64);
        assert!(b.is_empty());
        assert_eq!(crate::pool::stats().recycled - before.recycled, 3);
        assert_eq!(b.clear_counting_bytes(), 0);
    }

    #[test]
    fn append_keeps_order() {
        let mut a: PacketBatch = (0..3u8).map(|i| Packet::from_slice(&[i])).collect();
        let mut b: PacketBatch = (3..5u8).map(|i| Packet::from_slice(&[i])).collect();
        a.append(&mut b);
        assert!(b.is_empty());
        let v: Vec<u8> = a.iter().map(|p| p.data()[0]).collect();
        assert_eq!(v, vec![0, 1, 2, 3, 4]);
    }

    #[test]
    fn bulk_alloc_and_clear_recycle_through_the_pool() {
        crate::pool::prefill(64);
        let before = crate::pool::stats();
        let mut b = PacketBatch::new();
        Packet::alloc_into(&mut b, 40, 60);
        assert_eq!(b.len(), 40);
        assert!(b
            .iter()
            .all(|p| p.len() == 60 && p.headroom() == crate::DEFAULT_HEADROOM));
        b.clear();
        let after = crate::pool::stats();
        assert_eq!(after.created, before.created);
        assert_eq!(after.taken - before.taken, 40);
        assert_eq!(after.recycled - before.recycled, 40);
        assert_eq!(after.free, before.free);
    }

    #[test]
    fn receive_allocations_are_empty_with_the_mac_header_at_the_start() {
        let mut b = PacketBatch::new();
        Packet::alloc_into(&mut b, 1, 10);
        Packet::alloc_rx_into(&mut b, 2);
        assert_eq!(b.as_slice()[0].mac_header_offset(), None);
        assert!(b
            .iter()
            .skip(1)
            .all(|p| p.is_empty() && p.mac_header_offset() == Some(0)));
    }

    #[test]
    fn append_into_empty_swaps() {
        let mut a = PacketBatch::new();
        let mut b: PacketBatch = (0..2u8).map(|i| Packet::from_slice(&[i])).collect();
        a.append(&mut b);
        assert_eq!(a.len(), 2);
        assert!(b.is_empty());
    }
}
