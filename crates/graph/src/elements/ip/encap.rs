//! What IPEncap and UDPIPEncap share: the destination argument (an address or
//! `DST_ANNO`), the fixed IPv4 header they prepend, a per-element IP ID counter taken
//! a batch at a time, and settings that handler writes change under every worker.

use crate::args::FromArg;
use crate::elements::shared::SharedSettings;
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicU32, Ordering};

/// The longest IPv4 packet (its total length is 16 bits).
pub(crate) const MAX_IP_LEN: usize = 0xffff;

/// Where the destination address comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Dst {
    Addr([u8; 4]),
    /// Click's `DST_ANNO`: each packet's destination IP annotation.
    Anno,
}

impl FromArg for Dst {
    const WHAT: &'static str = "IP address or 'DST_ANNO'";
    fn from_arg(s: &str) -> Option<Self> {
        match s.trim() {
            "DST_ANNO" => Some(Dst::Anno),
            a => Ipv4Addr::from_arg(a).map(|a| Dst::Addr(a.octets())),
        }
    }
}

impl std::fmt::Display for Dst {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Dst::Addr(a) => write!(f, "{}", Ipv4Addr::from(*a)),
            Dst::Anno => f.write_str("DST_ANNO"),
        }
    }
}

impl Dst {
    /// The address for a packet whose destination annotation is `anno`.
    #[inline]
    pub(crate) fn resolve(self, anno: [u8; 4]) -> [u8; 4] {
        match self {
            Dst::Addr(a) => a,
            Dst::Anno => anno,
        }
    }
}

/// The IPv4 header fields that stay the same from packet to packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FixedFields {
    pub tos: u8,
    /// The flags and fragment offset word (0x4000 for Don't Fragment).
    pub frag: u16,
    pub ttl: u8,
    pub proto: u8,
    pub src: [u8; 4],
}

impl FixedFields {
    /// A 20-byte header with total length `len`, ID `id` and destination `dst`, with its
    /// checksum.
    #[inline]
    pub(crate) fn header(&self, len: u16, id: u16, dst: [u8; 4]) -> [u8; 20] {
        let [l0, l1] = len.to_be_bytes();
        let [i0, i1] = id.to_be_bytes();
        let [f0, f1] = self.frag.to_be_bytes();
        let s = self.src;
        let mut h = [
            0x45, self.tos, l0, l1, i0, i1, f0, f1, self.ttl, self.proto, 0, 0, s[0], s[1], s[2], s[3],
            dst[0], dst[1], dst[2], dst[3],
        ];
        let c = packet::checksum::checksum20(&h);
        h[10..12].copy_from_slice(&c.to_be_bytes());
        h
    }
}

/// IP IDs given out a batch at a time (a batch takes as many consecutive ones as it
/// has packets), consecutive over all workers, 16-bit and wrapping.
#[derive(Default)]
pub(crate) struct IpIds(AtomicU32);

impl IpIds {
    /// The first of `n` consecutive IDs.
    #[inline]
    pub(crate) fn take(&self, n: usize) -> u16 {
        self.0.fetch_add(n as u32, Ordering::Relaxed) as u16
    }

    /// Goes on from where `old` is (a replaced configuration's element's IDs).
    pub(crate) fn go_on_from(&self, old: &IpIds) {
        self.0.store(old.0.load(Ordering::Relaxed), Ordering::Relaxed);
    }
}

/// An encapsulation's settings, shared by the spec and every worker (see
/// [`SharedSettings`]), and its IP IDs.
pub(crate) struct EncapState<S: Clone> {
    settings: SharedSettings<S>,
    ids: IpIds,
}

impl<S: Clone> EncapState<S> {
    pub(crate) fn new(settings: S) -> EncapState<S> {
        EncapState {
            settings: SharedSettings::new(settings),
            ids: IpIds::default(),
        }
    }

    /// The first of `n` consecutive IDs (16-bit, wrapping).
    #[inline]
    pub(crate) fn take_ids(&self, n: usize) -> u16 {
        self.ids.take(n)
    }
}

impl<S: Clone> std::ops::Deref for EncapState<S> {
    type Target = SharedSettings<S>;
    fn deref(&self) -> &SharedSettings<S> {
        &self.settings
    }
}

/// Parses a handler value as the configuration keyword `kw` would be parsed.
pub(crate) fn parse_value<T: FromArg>(kw: &str, value: &str) -> Result<T, String> {
    T::from_arg(value.trim()).ok_or_else(|| format!("{} expects {}", kw, T::WHAT))
}

#[cfg(test)]
mod tests {
    use super::super::testutil::cksum;
    use super::*;

    #[test]
    fn header_fields_and_checksum() {
        let f = FixedFields {
            tos: 0xb8,
            frag: 0x4000,
            ttl: 250,
            proto: 4,
            src: [18, 26, 4, 24],
        };
        let h = f.header(0x0154, 0x1234, [140, 247, 60, 147]);
        assert_eq!(
            &h[..10],
            &[0x45, 0xb8, 0x01, 0x54, 0x12, 0x34, 0x40, 0x00, 250, 4]
        );
        assert_eq!(&h[12..], &[18, 26, 4, 24, 140, 247, 60, 147]);
        let mut zeroed = h;
        zeroed[10] = 0;
        zeroed[11] = 0;
        assert_eq!(u16::from_be_bytes([h[10], h[11]]), cksum(&zeroed));
    }

    #[test]
    fn ids_are_reserved_a_batch_at_a_time_and_wrap() {
        let s = EncapState::new(());
        assert_eq!(s.take_ids(3), 0);
        assert_eq!(s.take_ids(1), 3);
        s.ids.0.store(0xffff, Ordering::Relaxed);
        assert_eq!(s.take_ids(2), 0xffff);
        assert_eq!(s.take_ids(1), 1);
    }

    #[test]
    fn dst_argument() {
        assert_eq!(Dst::from_arg("DST_ANNO"), Some(Dst::Anno));
        assert_eq!(Dst::from_arg("1.2.3.4"), Some(Dst::Addr([1, 2, 3, 4])));
        assert_eq!(Dst::from_arg("dst_anno"), None);
        assert_eq!(Dst::Anno.resolve([9, 9, 9, 9]), [9, 9, 9, 9]);
        assert_eq!(Dst::Addr([1, 2, 3, 4]).resolve([9, 9, 9, 9]), [1, 2, 3, 4]);
        assert_eq!(Dst::Anno.to_string(), "DST_ANNO");
    }
}
