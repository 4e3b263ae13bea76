//! Click's packet annotations.
//!
//! The 48-byte user annotation area uses Click 2.x's layout (`packet_anno.hh`), so
//! elements that take an annotation offset (`Paint(COLOR, ANNO)`, `GetIPAddress(16)`)
//! address the same bytes as in Click.

/// Size of the user annotation area, as in Click.
pub const ANNO_SIZE: usize = 48;
/// Destination IPv4 address annotation (bytes 0-3).
pub const DST_IP_ANNO_OFFSET: usize = 0;
/// Destination IPv6 address annotation (bytes 0-15).
pub const DST_IP6_ANNO_OFFSET: usize = 0;
/// Paint annotation (byte 16).
pub const PAINT_ANNO_OFFSET: usize = 16;
/// ICMP parameter-problem pointer annotation (byte 17).
pub const ICMP_PARAMPROB_ANNO_OFFSET: usize = 17;
/// "Fix IP source" annotation (byte 19), set by ICMPError, read by FixIPSrc.
pub const FIX_IP_SRC_ANNO_OFFSET: usize = 19;
/// VLAN TCI annotation (bytes 20-21).
pub const VLAN_TCI_ANNO_OFFSET: usize = 20;
/// Aggregate annotation (bytes 20-23).
pub const AGGREGATE_ANNO_OFFSET: usize = 20;
/// Extra packets annotation (bytes 24-27).
pub const EXTRA_PACKETS_ANNO_OFFSET: usize = 24;
/// Extra length annotation (bytes 28-31): bytes of the original packet not captured.
pub const EXTRA_LENGTH_ANNO_OFFSET: usize = 28;
/// Packet number annotation (bytes 32-35).
pub const PACKET_NUMBER_ANNO_OFFSET: usize = 32;
/// Sequence number annotation (bytes 36-39).
pub const SEQUENCE_NUMBER_ANNO_OFFSET: usize = 36;
/// First timestamp annotation (bytes 32-39, over the packet and sequence numbers, as
/// in Click), set by `SetTimestamp(FIRST true)`: a signed 64-bit count of nanoseconds
/// since the epoch, in host order.
pub const FIRST_TIMESTAMP_ANNO_OFFSET: usize = 32;

/// Click's packet types (`Packet::PacketType`), as the `packet_type_anno`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[repr(u8)]
pub enum PacketType {
    #[default]
    Host = 0,
    Broadcast = 1,
    Multicast = 2,
    OtherHost = 3,
    Outgoing = 4,
    Loopback = 5,
    FastRoute = 6,
}

/// A timestamp with nanosecond precision (Click's `Timestamp`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Default, Hash)]
pub struct Timestamp {
    pub sec: i64,
    pub nsec: u32,
}

impl Timestamp {
    pub const ZERO: Timestamp = Timestamp { sec: 0, nsec: 0 };

    pub fn new(sec: i64, nsec: u32) -> Timestamp {
        Timestamp { sec, nsec }
    }

    /// The current wall-clock time.
    pub fn now() -> Timestamp {
        let d = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        Timestamp {
            sec: d.as_secs() as i64,
            nsec: d.subsec_nanos(),
        }
    }

    pub fn is_zero(&self) -> bool {
        self.sec == 0 && self.nsec == 0
    }

    /// Microseconds part (truncated), for microsecond-resolution formats.
    pub fn usec(&self) -> u32 {
        self.nsec / 1000
    }

    pub fn as_nanos(&self) -> i128 {
        self.sec as i128 * 1_000_000_000 + self.nsec as i128
    }
}

impl std::fmt::Display for Timestamp {
    /// Click's default format: seconds, a dot, then microseconds (6 digits).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{:06}", self.sec, self.nsec / 1000)
    }
}

/// All annotations of one packet. (`repr(C)`: the user area comes first, and its
/// first bytes share the frame's first cache line; see `frame::HOT_ANNO_BYTES`.)
#[derive(Clone, Copy, Debug)]
#[repr(C)]
pub struct Anno {
    /// Click's user annotation area, with Click's layout (see the offsets above).
    pub user: [u8; ANNO_SIZE],
    pub timestamp: Timestamp,
    pub packet_type: PacketType,
    /// Port (device index) the packet arrived on.
    pub input_port: u16,
    /// Receive queue the packet arrived on.
    pub input_queue: u16,
    /// RSS hash computed by the (software or hardware) classifier, 0 if none.
    pub rss_hash: u32,
}

impl Default for Anno {
    fn default() -> Self {
        Anno {
            user: [0; ANNO_SIZE],
            timestamp: Timestamp::ZERO,
            packet_type: PacketType::Host,
            input_port: 0,
            input_queue: 0,
            rss_hash: 0,
        }
    }
}

impl Anno {
    pub fn u8_at(&self, off: usize) -> u8 {
        self.user[off]
    }
    pub fn set_u8_at(&mut self, off: usize, v: u8) {
        self.user[off] = v;
    }
    /// Reads a host-order u32 at `off` (Click stores annotations in host order).
    pub fn u32_at(&self, off: usize) -> u32 {
        u32::from_ne_bytes(self.user[off..off + 4].try_into().unwrap())
    }
    pub fn set_u32_at(&mut self, off: usize, v: u32) {
        self.user[off..off + 4].copy_from_slice(&v.to_ne_bytes());
    }
    /// Destination IPv4 address annotation, in network byte order as Click keeps it.
    pub fn dst_ip(&self) -> [u8; 4] {
        self.user[DST_IP_ANNO_OFFSET..DST_IP_ANNO_OFFSET + 4]
            .try_into()
            .unwrap()
    }
    pub fn set_dst_ip(&mut self, a: [u8; 4]) {
        self.user[DST_IP_ANNO_OFFSET..DST_IP_ANNO_OFFSET + 4].copy_from_slice(&a);
    }
    /// Destination IPv6 address annotation (it overlays the IPv4 one, as in Click).
    pub fn dst_ip6(&self) -> [u8; 16] {
        self.user[DST_IP6_ANNO_OFFSET..DST_IP6_ANNO_OFFSET + 16]
            .try_into()
            .unwrap()
    }
    pub fn set_dst_ip6(&mut self, a: [u8; 16]) {
        self.user[DST_IP6_ANNO_OFFSET..DST_IP6_ANNO_OFFSET + 16].copy_from_slice(&a);
    }
    pub fn paint(&self) -> u8 {
        self.user[PAINT_ANNO_OFFSET]
    }
    pub fn set_paint(&mut self, c: u8) {
        self.user[PAINT_ANNO_OFFSET] = c;
    }
    pub fn extra_length(&self) -> u32 {
        self.u32_at(EXTRA_LENGTH_ANNO_OFFSET)
    }
    pub fn set_extra_length(&mut self, v: u32) {
        self.set_u32_at(EXTRA_LENGTH_ANNO_OFFSET, v)
    }
}
