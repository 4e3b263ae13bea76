//! Zero-copy header views over packet bytes, in the style of smoltcp's `wire` module.
//!
//! Each view wraps a buffer `T` (`&[u8]`, `&mut [u8]`, or anything `AsRef<[u8]>`).
//! `new_checked` refuses buffers shorter than the fixed part of the header, so the
//! getters for fixed fields never panic; setters exist when `T: AsMut<[u8]>`. Accessors
//! for variable-length parts (options, payloads) clamp to the bytes actually present.

pub mod arp;
pub mod esp;
pub mod ethernet;
pub mod icmp;
pub mod ipv4;
pub mod ipv6;
pub mod tcp;
pub mod udp;
pub mod vlan;

pub use arp::ArpPacket;
pub use esp::EspHeader;
pub use ethernet::EthernetFrame;
pub use icmp::IcmpHeader;
pub use ipv4::Ipv4Header;
pub use ipv6::Ipv6Header;
pub use tcp::TcpHeader;
pub use udp::UdpHeader;
pub use vlan::VlanTag;

/// Reads a big-endian u16 at `off`; the caller guarantees `off + 2 <= b.len()`.
#[inline]
pub(crate) fn be16(b: &[u8], off: usize) -> u16 {
    u16::from_be_bytes([b[off], b[off + 1]])
}

#[inline]
pub(crate) fn be32(b: &[u8], off: usize) -> u32 {
    u32::from_be_bytes([b[off], b[off + 1], b[off + 2], b[off + 3]])
}

#[inline]
pub(crate) fn put16(b: &mut [u8], off: usize, v: u16) {
    b[off..off + 2].copy_from_slice(&v.to_be_bytes());
}

#[inline]
pub(crate) fn put32(b: &mut [u8], off: usize, v: u32) {
    b[off..off + 4].copy_from_slice(&v.to_be_bytes());
}

#[inline]
pub(crate) fn arr<const N: usize>(b: &[u8], off: usize) -> [u8; N] {
    let mut a = [0u8; N];
    a.copy_from_slice(&b[off..off + N]);
    a
}

/// Declares a header view type: the struct, `new_checked`, `new_unchecked`-free access to
/// the buffer, and `into_inner`.
macro_rules! view {
    ($(#[$m:meta])* $name:ident, $min:expr) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub struct $name<T> {
            buf: T,
        }

        impl<T: AsRef<[u8]>> $name<T> {
            /// Length of the fixed part of the header.
            pub const MIN_LEN: usize = $min;

            /// Wraps `buf` if it holds at least the fixed part of the header.
            pub fn new_checked(buf: T) -> Option<Self> {
                if buf.as_ref().len() >= Self::MIN_LEN {
                    Some($name { buf })
                } else {
                    None
                }
            }

            /// The whole underlying buffer.
            pub fn as_bytes(&self) -> &[u8] {
                self.buf.as_ref()
            }

            pub fn into_inner(self) -> T {
                self.buf
            }
        }

        impl<T: AsRef<[u8]> + AsMut<[u8]>> $name<T> {
            /// The whole underlying buffer, writable.
            pub fn as_bytes_mut(&mut self) -> &mut [u8] {
                self.buf.as_mut()
            }
        }
    };
}
pub(crate) use view;

#[cfg(test)]
mod fuzz;
