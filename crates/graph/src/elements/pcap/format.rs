//! The tcpdump (libpcap) file format as Click's FromDump and ToDump read and write it.
//!
//! Everything here is pure: functions take byte slices and return parsed values, so a
//! fuzz target can call [`parse_capture`] on arbitrary bytes. Click's quirks are kept:
//! both byte orders, microsecond (`A1B2C3D4`), nanosecond (`A1B23C4D`) and the
//! "modified" Linux magic (`A1B2CD34`, 8 extra bytes after each record header); before
//! version 2.3 the `caplen` and `len` fields are swapped; a record whose `caplen`
//! exceeds 65535 ends the file with "bad packet header; giving up"; a record whose
//! `caplen` exceeds `len` is cut to `len` and the rest skipped.

use packet::Timestamp;
use std::fmt;

pub const MAGIC: u32 = 0xA1B2_C3D4;
pub const MAGIC_NANO: u32 = 0xA1B2_3C4D;
pub const MAGIC_MODIFIED: u32 = 0xA1B2_CD34;
pub const VERSION_MAJOR: u16 = 2;
pub const VERSION_MINOR: u16 = 4;
pub const FILE_HEADER_LEN: usize = 24;
pub const RECORD_HEADER_LEN: usize = 16;
/// Extra bytes after each record header in files with [`MAGIC_MODIFIED`].
pub const MODIFIED_EXTRA_LEN: usize = 8;
/// Largest capture length Click accepts in a record.
pub const MAX_CAPLEN: u32 = 65535;

/// Data link types (canonical pcap file values) Click knows.
pub mod dlt {
    pub const NULL: u32 = 0;
    pub const EN10MB: u32 = 1;
    pub const PPP: u32 = 9;
    pub const FDDI: u32 = 10;
    /// The host value some systems write for raw IP; Click maps it to [`RAW`].
    pub const HOST_RAW: u32 = 12;
    pub const PPP_HDLC: u32 = 50;
    pub const ATM_RFC1483: u32 = 100;
    pub const RAW: u32 = 101;
    pub const C_HDLC: u32 = 104;
    pub const IEEE802_11: u32 = 105;
    pub const LINUX_SLL: u32 = 113;
    pub const PRISM_HEADER: u32 = 119;
    pub const AIRONET_HEADER: u32 = 120;
    pub const SUNATM: u32 = 123;
    pub const IEEE802_11_RADIO: u32 = 127;
}

/// Click's encapsulation names, in Click's order (the first name of a type is the one
/// printed).
const DLT_NAMES: &[(&str, u32)] = &[
    ("NULL", dlt::NULL),
    ("IP", dlt::RAW),
    ("ETHER", dlt::EN10MB),
    ("FDDI", dlt::FDDI),
    ("ATM", dlt::ATM_RFC1483),
    ("RFC1483", dlt::ATM_RFC1483),
    ("ATM_RFC1483", dlt::ATM_RFC1483),
    ("802_11", dlt::IEEE802_11),
    ("802.11", dlt::IEEE802_11),
    ("802_11_RADIO", dlt::IEEE802_11_RADIO),
    ("802.11_RADIO", dlt::IEEE802_11_RADIO),
    ("SLL", dlt::LINUX_SLL),
    ("AIRONET", dlt::AIRONET_HEADER),
    ("HDLC", dlt::C_HDLC),
    ("PPP_HDLC", dlt::PPP_HDLC),
    ("PPP", dlt::PPP),
    ("SUNATM", dlt::SUNATM),
    ("PRISM", dlt::PRISM_HEADER),
];

/// Parses an encapsulation name (`ETHER`, `IP`, ... or `#N`), as Click's
/// `fake_pcap_parse_dlt`.
pub fn parse_dlt(s: &str) -> Option<u32> {
    if let Some(&(_, d)) = DLT_NAMES.iter().find(|(n, _)| *n == s) {
        return Some(d);
    }
    let n = s.strip_prefix('#')?;
    if n.is_empty() || !n.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    n.parse::<u32>().ok().filter(|&v| v < 0x7FFF_FFFF)
}

/// The name Click prints for a link type (`ETHER`, `IP`, `#228`).
pub fn unparse_dlt(d: u32) -> String {
    match DLT_NAMES.iter().find(|(_, v)| *v == d) {
        Some((n, _)) => (*n).to_string(),
        None if d > i32::MAX as u32 => "<none>".to_string(),
        None => format!("#{}", d),
    }
}

/// Maps host link types to file link types (Click: 12 becomes 101).
pub fn canonical_dlt(d: u32) -> u32 {
    if d == dlt::HOST_RAW {
        dlt::RAW
    } else {
        d
    }
}

/// Link types for which `FORCE_IP` can find the IP header.
pub fn dlt_force_ipable(d: u32) -> bool {
    matches!(
        d,
        dlt::RAW
            | dlt::HOST_RAW
            | dlt::EN10MB
            | dlt::SUNATM
            | dlt::FDDI
            | dlt::ATM_RFC1483
            | dlt::LINUX_SLL
            | dlt::C_HDLC
            | dlt::IEEE802_11
            | dlt::PRISM_HEADER
            | dlt::PPP_HDLC
            | dlt::PPP
            | dlt::NULL
            | dlt::IEEE802_11_RADIO
    )
}

/// A parsed file header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileHeader {
    /// The file was written in the other byte order.
    pub swapped: bool,
    /// Record timestamps carry nanoseconds.
    pub nano: bool,
    /// Bytes following each record header (8 for the modified Linux format).
    pub record_extra: usize,
    pub version_major: u16,
    pub version_minor: u16,
    pub thiszone: i32,
    pub sigfigs: u32,
    pub snaplen: u32,
    /// The link type, canonical (12 read as 101).
    pub linktype: u32,
}

/// Why a file is not a readable tcpdump file. The texts are Click's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HeaderError {
    Empty,
    TooShort,
    BadMagic,
    UnknownMajorVersion(u16),
}

impl fmt::Display for HeaderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HeaderError::Empty => write!(f, "empty file"),
            HeaderError::TooShort => write!(f, "not a tcpdump file (too short)"),
            HeaderError::BadMagic => write!(f, "not a tcpdump file (bad magic number)"),
            HeaderError::UnknownMajorVersion(v) => write!(f, "unknown major version {}", v),
        }
    }
}

fn u32_at(b: &[u8], off: usize, swapped: bool) -> u32 {
    let a = [b[off], b[off + 1], b[off + 2], b[off + 3]];
    if swapped {
        u32::from_ne_bytes(a).swap_bytes()
    } else {
        u32::from_ne_bytes(a)
    }
}

fn u16_at(b: &[u8], off: usize, swapped: bool) -> u16 {
    let a = [b[off], b[off + 1]];
    if swapped {
        u16::from_ne_bytes(a).swap_bytes()
    } else {
        u16::from_ne_bytes(a)
    }
}

/// Parses the 24-byte file header at the start of `b` (Click reads it in host order
/// and byte-swaps if the magic does not match).
pub fn parse_file_header(b: &[u8]) -> Result<FileHeader, HeaderError> {
    if b.is_empty() {
        return Err(HeaderError::Empty);
    }
    if b.len() < FILE_HEADER_LEN {
        return Err(HeaderError::TooShort);
    }
    let known = |m: u32| m == MAGIC || m == MAGIC_NANO || m == MAGIC_MODIFIED;
    let swapped = if known(u32_at(b, 0, false)) {
        false
    } else if known(u32_at(b, 0, true)) {
        true
    } else {
        return Err(HeaderError::BadMagic);
    };
    let magic = u32_at(b, 0, swapped);
    let version_major = u16_at(b, 4, swapped);
    if version_major != VERSION_MAJOR {
        return Err(HeaderError::UnknownMajorVersion(version_major));
    }
    Ok(FileHeader {
        swapped,
        nano: magic == MAGIC_NANO,
        record_extra: if magic == MAGIC_MODIFIED {
            MODIFIED_EXTRA_LEN
        } else {
            0
        },
        version_major,
        version_minor: u16_at(b, 6, swapped),
        thiszone: u32_at(b, 8, swapped) as i32,
        sigfigs: u32_at(b, 12, swapped),
        snaplen: u32_at(b, 16, swapped),
        linktype: canonical_dlt(u32_at(b, 20, swapped)),
    })
}

/// A parsed record header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordHeader {
    pub ts: Timestamp,
    /// Bytes of packet data stored in the record.
    pub caplen: u32,
    /// The packet's original length.
    pub len: u32,
    /// Bytes stored after the data and ignored (when the record's caplen exceeded len).
    pub skip: u32,
}

impl RecordHeader {
    /// What Click stores in the EXTRA_LENGTH annotation.
    pub fn extra_length(&self) -> u32 {
        self.len - self.caplen
    }
}

/// A record header Click refuses ("bad packet header; giving up").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BadRecordHeader;

impl fmt::Display for BadRecordHeader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "bad packet header; giving up")
    }
}

/// Builds a timestamp from a record's signed 32-bit seconds and sub-seconds, carrying
/// out-of-range sub-seconds into the seconds.
pub fn make_timestamp(sec: i32, subsec: i32, nano: bool) -> Timestamp {
    let total = sec as i64 * 1_000_000_000 + subsec as i64 * if nano { 1 } else { 1000 };
    Timestamp::new(
        total.div_euclid(1_000_000_000),
        total.rem_euclid(1_000_000_000) as u32,
    )
}

/// Parses a 16-byte record header. `b` must hold at least [`RECORD_HEADER_LEN`] bytes
/// (a shorter slice is an error too).
pub fn parse_record_header(fh: &FileHeader, b: &[u8]) -> Result<RecordHeader, BadRecordHeader> {
    if b.len() < RECORD_HEADER_LEN {
        return Err(BadRecordHeader);
    }
    let sec = u32_at(b, 0, fh.swapped) as i32;
    let subsec = u32_at(b, 4, fh.swapped) as i32;
    let c = u32_at(b, 8, fh.swapped);
    let l = u32_at(b, 12, fh.swapped);
    // Files before version 2.3 had the two length fields the other way round.
    let (mut caplen, len) = if fh.version_minor > 3 || (fh.version_minor == 3 && c <= l) {
        (c, l)
    } else {
        (l, c)
    };
    if caplen > MAX_CAPLEN {
        return Err(BadRecordHeader);
    }
    let mut skip = 0;
    if caplen > len {
        // tcptrace writes caplen one too large; Click (like tcpdump) keeps len bytes.
        skip = caplen - len;
        caplen = len;
    }
    Ok(RecordHeader {
        ts: make_timestamp(sec, subsec, fh.nano),
        caplen,
        len,
        skip,
    })
}

/// One record of an in-memory capture.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record<'a> {
    pub header: RecordHeader,
    /// File offset of the record header.
    pub offset: usize,
    pub data: &'a [u8],
}

/// How reading a capture ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CaptureEnd {
    /// The last record ended exactly at the end of the file.
    Clean,
    /// The file ended inside a record header or its data: Click stops there silently.
    Truncated,
    /// A record header was refused ("bad packet header; giving up").
    BadRecord,
}

/// A whole capture parsed from memory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Capture<'a> {
    pub header: FileHeader,
    pub records: Vec<Record<'a>>,
    pub end: CaptureEnd,
}

/// Parses a whole tcpdump file held in memory, record by record, exactly as FromDump
/// reads it. Never panics on any input.
pub fn parse_capture(b: &[u8]) -> Result<Capture<'_>, HeaderError> {
    let header = parse_file_header(b)?;
    let mut records = Vec::new();
    let mut pos = FILE_HEADER_LEN;
    let end = loop {
        if pos == b.len() {
            break CaptureEnd::Clean;
        }
        let Some(h) = b.get(pos..pos + RECORD_HEADER_LEN) else {
            break CaptureEnd::Truncated;
        };
        let rh = match parse_record_header(&header, h) {
            Ok(rh) => rh,
            Err(BadRecordHeader) => break CaptureEnd::BadRecord,
        };
        let data_start = pos + RECORD_HEADER_LEN + header.record_extra;
        let data_end = data_start + rh.caplen as usize;
        let Some(data) = b.get(data_start..data_end) else {
            break CaptureEnd::Truncated;
        };
        records.push(Record {
            header: rh,
            offset: pos,
            data,
        });
        pos = data_end + rh.skip as usize;
        if pos > b.len() {
            // The skipped bytes ran past the end: the next header read finds nothing.
            break CaptureEnd::Truncated;
        }
    };
    Ok(Capture { header, records, end })
}

/// Bytes of a file header as Click's ToDump writes it (host byte order, version 2.4,
/// thiszone and sigfigs 0).
pub fn encode_file_header(nano: bool, snaplen: u32, linktype: u32) -> [u8; FILE_HEADER_LEN] {
    let mut h = [0u8; FILE_HEADER_LEN];
    h[0..4].copy_from_slice(&(if nano { MAGIC_NANO } else { MAGIC }).to_ne_bytes());
    h[4..6].copy_from_slice(&VERSION_MAJOR.to_ne_bytes());
    h[6..8].copy_from_slice(&VERSION_MINOR.to_ne_bytes());
    h[16..20].copy_from_slice(&snaplen.to_ne_bytes());
    h[20..24].copy_from_slice(&linktype.to_ne_bytes());
    h
}

/// Bytes of a record header as ToDump writes it: seconds truncated to 32 bits, then
/// microseconds (or nanoseconds), caplen, len, in host byte order.
pub fn encode_record_header(ts: Timestamp, nano: bool, caplen: u32, len: u32) -> [u8; RECORD_HEADER_LEN] {
    let sub = if nano { ts.nsec } else { ts.usec() };
    let mut h = [0u8; RECORD_HEADER_LEN];
    h[0..4].copy_from_slice(&(ts.sec as u32).to_ne_bytes());
    h[4..8].copy_from_slice(&sub.to_ne_bytes());
    h[8..12].copy_from_slice(&caplen.to_ne_bytes());
    h[12..16].copy_from_slice(&len.to_ne_bytes());
    h
}

/// Where FORCE_IP finds the IP header of a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IpPosition {
    /// Offset of the IP header from the start of the frame.
    pub offset: usize,
    /// Header length: IHL * 4 for IPv4, 40 for IPv6.
    pub header_len: usize,
    /// The IPv4 destination address (Click sets the DST_IP annotation from it).
    pub dst: Option<[u8; 4]>,
}

const ETHERTYPE_IP: u16 = 0x0800;
const ETHERTYPE_IP6: u16 = 0x86DD;
const ETHERTYPE_8021Q: u16 = 0x8100;
const PPP_ADDRESS: u8 = 0xFF;
const PPP_CONTROL: u8 = 0x03;
const PPP_IP: u8 = 0x21;
const PPP_IPV6: u8 = 0x57;
const FDDI_FC_LLCMASK: u8 = 0xF8;
const FDDI_FC_LLC_ASYNC: u8 = 0x50;
const FDDI_HEADER_LEN: usize = 13;
const RFC1483_LEN: usize = 8;
const RFC1483_SNAP_IP: [u8; 6] = [0xAA, 0xAA, 0x03, 0x00, 0x00, 0x00];
const LLC_IP_LSAP: u8 = 0x06;
const LLC_SNAP_LSAP: u8 = 0xAA;

fn be16(d: &[u8], off: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*d.get(off)?, *d.get(off + 1)?]))
}

fn ip_ethertype(t: u16) -> bool {
    t == ETHERTYPE_IP || t == ETHERTYPE_IP6
}

/// The steps of Click's `fake_pcap_force_ip` header walk.
enum Walk {
    /// An Ethernet header whose type field is at `type_at` (the header may start
    /// before the frame, as Click's LLC/SNAP bridged case does).
    Ether {
        type_at: usize,
    },
    Fddi(usize),
    Rfc1483(usize),
    CHdlc(usize),
    Wifi(usize),
}

/// Finds the offset of the IP header as Click's `fake_pcap_force_ip` does for link
/// type `linktype`.
fn find_ip_offset(d: &[u8], linktype: u32) -> Option<usize> {
    let n = d.len();
    let mut step = match linktype {
        dlt::RAW | dlt::HOST_RAW => return Some(0),
        dlt::EN10MB => Walk::Ether { type_at: 12 },
        dlt::FDDI => Walk::Fddi(0),
        dlt::SUNATM => Walk::Rfc1483(4),
        dlt::ATM_RFC1483 => Walk::Rfc1483(0),
        dlt::LINUX_SLL => {
            return (n >= 16 && ip_ethertype(be16(d, 14)?)).then_some(16);
        }
        dlt::C_HDLC => Walk::CHdlc(0),
        dlt::PPP_HDLC => {
            if n < 4 {
                return None;
            }
            if d[0] == PPP_ADDRESS {
                return (d[2] == 0 && (d[3] == PPP_IP || d[3] == PPP_IPV6)).then_some(4);
            } else if d[0] == 0x0F || d[0] == 0x8F {
                Walk::CHdlc(0)
            } else {
                return None;
            }
        }
        dlt::PPP => {
            let mut o = 0;
            if n >= 2 && d[0] == PPP_ADDRESS && d[1] == PPP_CONTROL {
                o = 2;
            }
            if o + 2 > n {
                return None;
            }
            if d[o] == PPP_IP || d[o] == PPP_IPV6 {
                return Some(o + 1);
            } else if d[o] == 0 && (d[o + 1] == PPP_IP || d[o + 1] == PPP_IPV6) {
                return Some(o + 2);
            }
            return None;
        }
        dlt::PRISM_HEADER => Walk::Wifi(144),
        dlt::IEEE802_11 => Walk::Wifi(0),
        dlt::IEEE802_11_RADIO => {
            if n < 4 {
                return None;
            }
            let len = d[2] as usize | (d[3] as usize) << 8;
            if len < 8 {
                return None;
            }
            Walk::Wifi(len)
        }
        dlt::NULL => {
            if n < 4 {
                return None;
            }
            let mut family = d[0] as u32 | (d[1] as u32) << 8;
            if family == 0 {
                family = (d[2] as u32) << 8 | d[3] as u32;
            }
            return matches!(family, 2 | 24 | 28 | 30).then_some(4);
        }
        _ => return None,
    };
    // Each step moves forward in the frame, so this loop ends.
    loop {
        step = match step {
            Walk::Ether { type_at } => {
                if type_at + 2 > n {
                    return None;
                }
                let t = be16(d, type_at)?;
                if ip_ethertype(t) {
                    return Some(type_at + 2);
                }
                if t == ETHERTYPE_8021Q && type_at + 6 <= n && ip_ethertype(be16(d, type_at + 4)?) {
                    return Some(type_at + 6);
                }
                return None;
            }
            Walk::Fddi(o) => {
                if o + FDDI_HEADER_LEN + RFC1483_LEN > n || d[o] & FDDI_FC_LLCMASK != FDDI_FC_LLC_ASYNC {
                    return None;
                }
                Walk::Rfc1483(o + FDDI_HEADER_LEN)
            }
            Walk::Rfc1483(o) => {
                if o + RFC1483_LEN <= n && d[o..o + 6] == RFC1483_SNAP_IP && ip_ethertype(be16(d, o + 6)?) {
                    return Some(o + RFC1483_LEN);
                } else if o + 4 <= n && d[o] == LLC_IP_LSAP && d[o + 1] == LLC_IP_LSAP {
                    return Some(o + 4);
                } else if o + RFC1483_LEN <= n && d[o] == LLC_SNAP_LSAP && d[o + 1] == LLC_SNAP_LSAP {
                    let org = (d[o + 3] as u32) << 16 | (d[o + 4] as u32) << 8 | d[o + 5] as u32;
                    match org {
                        // Encapsulated Ethernet, Cisco bridging: the SNAP type field is
                        // the Ethernet type.
                        0x000000 | 0x0000F8 => Walk::Ether { type_at: o + 6 },
                        // RFC 2684 bridged Ethernet or FDDI.
                        0x0080C2 => match be16(d, o + 6)? {
                            0x0001 | 0x0007 => Walk::Ether {
                                type_at: o + RFC1483_LEN + 12,
                            },
                            0x0004 | 0x000A => Walk::Fddi(o + RFC1483_LEN + 1),
                            _ => return None,
                        },
                        _ => return None,
                    }
                } else {
                    return None;
                }
            }
            Walk::CHdlc(o) => {
                return (o + 4 <= n && ip_ethertype(be16(d, o + 2)?)).then_some(o + 4);
            }
            Walk::Wifi(o) => {
                if o + 24 <= n && d[o] & 0x0C == 0x08 {
                    Walk::Rfc1483(o + if d[o + 1] & 0x03 == 0x03 { 30 } else { 24 })
                } else {
                    return None;
                }
            }
        };
    }
}

/// Click's `fake_pcap_force_ip`: where the IP header of frame `d` of link type
/// `linktype` is, if it holds a complete IPv4 (IHL >= 5) or IPv6 header.
pub fn force_ip(d: &[u8], linktype: u32) -> Option<IpPosition> {
    let off = find_ip_offset(d, linktype)?;
    let first = *d.get(off)?;
    match first >> 4 {
        4 => {
            let hl = (first & 0x0F) as usize * 4;
            if hl >= 20 && off + hl <= d.len() {
                let mut dst = [0u8; 4];
                dst.copy_from_slice(&d[off + 16..off + 20]);
                Some(IpPosition {
                    offset: off,
                    header_len: hl,
                    dst: Some(dst),
                })
            } else {
                None
            }
        }
        6 if off + 40 <= d.len() => Some(IpPosition {
            offset: off,
            header_len: 40,
            dst: None,
        }),
        _ => None,
    }
}

/// Click's `cp_unparse_real2` for fixed-point values with `frac_bits` (at most 29)
/// fraction bits: TeX's `print_scaled`, in Click's 32-bit unsigned arithmetic.
pub fn unparse_fixed(value: u32, frac_bits: u32) -> String {
    let frac_bits = frac_bits.min(29);
    let one: u32 = 1 << frac_bits;
    let mut s = (value >> frac_bits).to_string();
    let mut real = value & (one - 1);
    if real == 0 {
        return s;
    }
    s.push('.');
    real = real.wrapping_mul(10).wrapping_add(5);
    let mut allowable: u32 = 10;
    let mut rounder: u32 = 5;
    while rounder < (one >> 1) {
        rounder = rounder.wrapping_mul(10);
    }
    loop {
        if allowable > one {
            real = real.wrapping_add((one >> 1).wrapping_sub(rounder));
        }
        s.push(b'0'.wrapping_add((real >> frac_bits) as u8) as char);
        real = (real & (one - 1)).wrapping_mul(10);
        allowable = allowable.wrapping_mul(10);
        if real <= allowable {
            break;
        }
    }
    s
}
