//! Failure detection in the mesh: every server sends a heartbeat frame to every other
//! server over their internal link at a fixed interval, and a server that has not been
//! heard from for a while is taken for down: it relays nothing until it is heard again
//! (see [`crate::vlb::Balancer::set_down`]).
//!
//! A heartbeat is an Ethernet frame from the sender's server address to the receiver's
//! ([`crate::mesh::server_mac`]), of EtherType [`ETHERTYPE`] (IEEE 802's first local
//! experimental type), 60 bytes long:
//!
//! | bytes | field |
//! | --- | --- |
//! | 14-17 | `BRVH` |
//! | 18-19 | the mesh's size, big-endian |
//! | 20-21 | the sender's server number |
//! | 22-25 | a sequence number, one more each round |
//!
//! Only a heartbeat crossing the link proves the path: a server whose process died, or
//! whose link went down, falls silent, even though its interfaces may still be up.

use crate::mesh::server_mac;
use std::sync::atomic::{AtomicU64, Ordering};

/// The heartbeat frames' EtherType.
pub const ETHERTYPE: u16 = 0x88b5;
const MAGIC: &[u8; 4] = b"BRVH";
/// A heartbeat's length: Ethernet's least.
pub const FRAME_LEN: usize = 60;

/// The heartbeat server `from` sends to server `to` of a mesh of `nodes` servers.
pub fn frame(from: usize, to: usize, nodes: usize, seq: u32) -> [u8; FRAME_LEN] {
    let mut f = [0u8; FRAME_LEN];
    f[0..6].copy_from_slice(&server_mac(to));
    f[6..12].copy_from_slice(&server_mac(from));
    f[12..14].copy_from_slice(&ETHERTYPE.to_be_bytes());
    f[14..18].copy_from_slice(MAGIC);
    f[18..20].copy_from_slice(&(nodes as u16).to_be_bytes());
    f[20..22].copy_from_slice(&(from as u16).to_be_bytes());
    f[22..26].copy_from_slice(&seq.to_be_bytes());
    f
}

/// The sender of a heartbeat received by server `node` of a mesh of `nodes`; `None`
/// for anything else: another EtherType, another mesh's size, a frame for another
/// server, a sender outside the mesh or this server itself.
pub fn sender(frame: &[u8], node: usize, nodes: usize) -> Option<usize> {
    if frame.len() < 26
        || frame[12..14] != ETHERTYPE.to_be_bytes()
        || &frame[14..18] != MAGIC
        || frame[0..6] != server_mac(node)
        || usize::from(u16::from_be_bytes([frame[18], frame[19]])) != nodes
    {
        return None;
    }
    let from = usize::from(u16::from_be_bytes([frame[20], frame[21]]));
    (from < nodes && from != node && frame[6..12] == server_mac(from)).then_some(from)
}

/// When each server of the mesh was last heard, shared by a server's workers: any of
/// them may receive a heartbeat, and each decides for itself who is silent.
pub struct Liveness {
    /// Nanoseconds (on the workers' clock) of the last heartbeat from each server; the
    /// time the element was made for servers not heard yet, so every server has
    /// `silent_after` to speak up when the mesh starts.
    last: Vec<AtomicU64>,
    silent_after: u64,
    node: usize,
}

impl Liveness {
    pub fn new(node: usize, nodes: usize, silent_after_ns: u64, now: u64) -> Liveness {
        Liveness {
            last: (0..nodes).map(|_| AtomicU64::new(now)).collect(),
            silent_after: silent_after_ns,
            node,
        }
    }

    /// Counts every server as heard at `now` at the latest: the router starts, so each
    /// has the silence allowed from here. (Every worker calls it as it starts; a
    /// heartbeat heard in between is not moved back.)
    pub fn restart(&self, now: u64) {
        for t in &self.last {
            t.fetch_max(now, Ordering::Relaxed);
        }
    }

    /// Server `from` was heard at `now`.
    pub fn heard(&self, from: usize, now: u64) {
        if let Some(t) = self.last.get(from) {
            t.fetch_max(now, Ordering::Relaxed);
        }
    }

    /// The servers not heard from for longer than the silence allowed, at `now`, in
    /// order (never this server).
    pub fn silent(&self, now: u64) -> Vec<usize> {
        self.last
            .iter()
            .enumerate()
            .filter(|&(k, t)| {
                k != self.node && now.saturating_sub(t.load(Ordering::Relaxed)) > self.silent_after
            })
            .map(|(k, _)| k)
            .collect()
    }

    /// Milliseconds since each server was last heard, at `now` (this server: 0).
    pub fn ages_ms(&self, now: u64) -> Vec<u64> {
        self.last
            .iter()
            .enumerate()
            .map(|(k, t)| {
                if k == self.node {
                    0
                } else {
                    now.saturating_sub(t.load(Ordering::Relaxed)) / 1_000_000
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_heartbeat_names_its_sender_to_its_receiver_only() {
        let f = frame(2, 0, 4, 7);
        assert_eq!(f.len(), 60);
        assert_eq!(f[..14], [2, 0xb5, 0, 0, 0, 0, 2, 0xb5, 0, 0, 0, 2, 0x88, 0xb5]);
        assert_eq!(f[14..26], *b"BRVH\x00\x04\x00\x02\x00\x00\x00\x07");
        assert_eq!(sender(&f, 0, 4), Some(2));
        // For another server, from another mesh's size, cut short, or not a heartbeat.
        assert_eq!(sender(&f, 1, 4), None);
        assert_eq!(sender(&f, 0, 5), None);
        assert_eq!(sender(&f[..25], 0, 4), None);
        let mut other = f;
        other[13] = 0xb6;
        assert_eq!(sender(&other, 0, 4), None);
        // A sender whose number and address disagree, or outside the mesh, or itself.
        let mut forged = f;
        forged[21] = 3;
        assert_eq!(sender(&forged, 0, 4), None);
        assert_eq!(sender(&frame(0, 0, 4, 1), 0, 4), None);
        assert_eq!(sender(&frame(9, 0, 4, 1), 0, 4), None);
    }

    #[test]
    fn servers_fall_silent_after_the_allowed_time_and_speak_up_again() {
        let l = Liveness::new(1, 4, 100, 1_000);
        assert_eq!(l.silent(1_100), Vec::<usize>::new());
        l.heard(0, 1_050);
        l.heard(2, 1_090);
        assert_eq!(l.silent(1_101), vec![3]);
        assert_eq!(l.silent(1_151), vec![0, 3]);
        // An older heartbeat handled late does not move the time back.
        l.heard(2, 1_010);
        assert_eq!(l.silent(1_190), vec![0, 3]);
        l.heard(3, 1_200);
        assert_eq!(l.silent(1_200), vec![0, 2]);
        assert_eq!(l.ages_ms(3_001_200), vec![3, 0, 3, 3]);
        // The router starts again: every server has the silence allowed from then.
        l.restart(4_000_000);
        assert_eq!(l.silent(4_000_100), Vec::<usize>::new());
        assert_eq!(l.silent(4_000_101), vec![0, 2, 3]);
    }
}
