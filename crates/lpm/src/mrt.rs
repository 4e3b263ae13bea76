//! Routing tables from MRT dumps (RFC 6396), as RouteViews and RIPE RIS publish them:
//! `TABLE_DUMP_V2` (RIB_IPV4_UNICAST, RIB_IPV6_UNICAST and their ADD-PATH forms) and the
//! older `TABLE_DUMP`. Each prefix takes its first RIB entry (the dump lists one entry
//! per peer, none marked best), and that entry's BGP next hop (`NEXT_HOP`, or the next
//! hop of `MP_REACH_NLRI`) becomes a next-hop number: the n-th distinct next-hop address
//! of the file is n, from 0. Records of other types (BGP4MP message streams, peer
//! tables) are skipped. Any bytes are read without panicking (fuzzed).

use crate::table::{LoadError, RouteTable};
use std::collections::{HashMap, HashSet};

const TABLE_DUMP: u16 = 12;
const TABLE_DUMP_V2: u16 = 13;

const RIB_IPV4_UNICAST: u16 = 2;
const RIB_IPV6_UNICAST: u16 = 4;
const RIB_IPV4_UNICAST_ADDPATH: u16 = 8;
const RIB_IPV6_UNICAST_ADDPATH: u16 = 10;

const ATTR_NEXT_HOP: u8 = 3;
const ATTR_MP_REACH_NLRI: u8 = 14;
const ATTR_EXTENDED_LENGTH: u8 = 0x10;

/// The record types RFC 6396 defines (OSPFv2, TABLE_DUMP, TABLE_DUMP_V2, BGP4MP,
/// BGP4MP_ET, ISIS, ISIS_ET, OSPFv3, OSPFv3_ET).
const MRT_TYPES: [u8; 9] = [11, 12, 13, 16, 17, 32, 33, 48, 49];

/// Whether `bytes` look like an MRT file: the first record's type is one RFC 6396
/// defines (a text table cannot have a NUL byte there). A file of other records is
/// then refused as holding no table dump.
pub fn looks_like_mrt(bytes: &[u8]) -> bool {
    bytes.len() >= 12 && bytes[4] == 0 && MRT_TYPES.contains(&bytes[5])
}

/// A cursor over a record's bytes; every read is checked.
struct Reader<'a> {
    b: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if self.b.len() < n {
            return Err(format!("truncated: {} bytes wanted, {} left", n, self.b.len()));
        }
        let (head, rest) = self.b.split_at(n);
        self.b = rest;
        Ok(head)
    }
    fn u8(&mut self) -> Result<u8, String> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16, String> {
        Ok(u16::from_be_bytes(self.take(2)?.try_into().unwrap_or_default()))
    }
    fn u32(&mut self) -> Result<u32, String> {
        Ok(u32::from_be_bytes(self.take(4)?.try_into().unwrap_or_default()))
    }
}

/// An address of `bits` bits (32 or 128) from its first `bytes.len()` bytes (a prefix
/// written in as many bytes as its length needs).
fn address(bytes: &[u8], bits: u32) -> u128 {
    let mut a = [0u8; 16];
    let n = bytes.len().min(16);
    a[..n].copy_from_slice(&bytes[..n]);
    u128::from_be_bytes(a) >> (128 - bits)
}

/// The next hop a path's attributes give an IPv4 prefix (`NEXT_HOP`, else
/// `MP_REACH_NLRI`'s: RFC 8950) or an IPv6 one (`MP_REACH_NLRI`'s only: RFC 4760 has a
/// `NEXT_HOP` beside it ignored). `MP_REACH_NLRI` in the abbreviated form of RFC 6396
/// 4.3.4 (a length and the address) or the full form of RFC 4760 that the older dumps
/// use; the first address of a global and link-local pair.
fn next_hop(mut attrs: Reader<'_>, v6: bool) -> Result<Option<Vec<u8>>, String> {
    let mut mp = None;
    while !attrs.b.is_empty() {
        let flags = attrs.u8()?;
        let kind = attrs.u8()?;
        let len = if flags & ATTR_EXTENDED_LENGTH != 0 {
            usize::from(attrs.u16()?)
        } else {
            usize::from(attrs.u8()?)
        };
        let value = attrs.take(len)?;
        match kind {
            ATTR_NEXT_HOP if value.len() == 4 && !v6 => return Ok(Some(value.to_vec())),
            ATTR_MP_REACH_NLRI => mp = Some(value),
            _ => {}
        }
    }
    let Some(v) = mp else {
        return Ok(None);
    };
    // Abbreviated: NH length, then the next hop(s).
    if let Some((&n, rest)) = v.split_first() {
        if usize::from(n) == rest.len() && matches!(n, 4 | 16 | 32) {
            return Ok(Some(rest[..if n == 32 { 16 } else { usize::from(n) }].to_vec()));
        }
    }
    // Full: AFI, SAFI, NH length, next hop(s), ...
    if v.len() >= 4 {
        let n = usize::from(v[3]);
        if matches!(n, 4 | 16 | 32) && v.len() >= 4 + n {
            return Ok(Some(v[4..4 + if n == 32 { 16 } else { n }].to_vec()));
        }
    }
    Err("MP_REACH_NLRI without a next hop of 4, 16 or 32 bytes".to_string())
}

/// What the records build: routes, and the numbers given to next-hop addresses.
#[derive(Default)]
struct Builder {
    table: RouteTable,
    seen: HashSet<(bool, u128, u8)>,
    hops: HashMap<Option<Vec<u8>>, u32>,
}

impl Builder {
    fn add(&mut self, v6: bool, addr: u128, len: u8, hop: Option<Vec<u8>>) {
        if !self.seen.insert((v6, addr, len)) {
            return;
        }
        let next = self.hops.len() as u32;
        let nh = *self.hops.entry(hop).or_insert(next);
        if v6 {
            self.table.v6.push((addr, len, nh));
        } else {
            self.table.v4.push((addr as u32, len, nh));
        }
    }
}

/// A `TABLE_DUMP_V2` RIB record of subtype `sub`.
fn rib(b: &mut Builder, sub: u16, mut r: Reader<'_>) -> Result<(), String> {
    let (v6, addpath) = match sub {
        RIB_IPV4_UNICAST => (false, false),
        RIB_IPV6_UNICAST => (true, false),
        RIB_IPV4_UNICAST_ADDPATH => (false, true),
        RIB_IPV6_UNICAST_ADDPATH => (true, true),
        _ => return Ok(()),
    };
    let bits: u32 = if v6 { 128 } else { 32 };
    let _sequence = r.u32()?;
    let len = r.u8()?;
    if u32::from(len) > bits {
        return Err(format!("prefix length {} past {}", len, bits));
    }
    let prefix = address(r.take(usize::from(len).div_ceil(8))?, bits);
    let entries = r.u16()?;
    let mut first_hop = None;
    for i in 0..entries {
        let _peer = r.u16()?;
        let _originated = r.u32()?;
        if addpath {
            let _path_id = r.u32()?;
        }
        let attr_len = usize::from(r.u16()?);
        let attrs = Reader { b: r.take(attr_len)? };
        if i == 0 {
            first_hop = Some(next_hop(attrs, v6)?);
        }
    }
    if let Some(hop) = first_hop {
        b.add(v6, mask(prefix, len, bits), len, hop);
    }
    Ok(())
}

/// A `TABLE_DUMP` record of address family `afi` (1 IPv4, 2 IPv6).
fn table_dump(b: &mut Builder, afi: u16, mut r: Reader<'_>) -> Result<(), String> {
    let (v6, bytes) = match afi {
        1 => (false, 4),
        2 => (true, 16),
        _ => return Err(format!("TABLE_DUMP of address family {}", afi)),
    };
    let bits = bytes as u32 * 8;
    let _view = r.u16()?;
    let _sequence = r.u16()?;
    let prefix = address(r.take(bytes)?, bits);
    let len = r.u8()?;
    if u32::from(len) > bits {
        return Err(format!("prefix length {} past {}", len, bits));
    }
    let _status = r.u8()?;
    let _originated = r.u32()?;
    let _peer = r.take(bytes)?;
    let _peer_as = r.u16()?;
    let attr_len = usize::from(r.u16()?);
    let hop = next_hop(Reader { b: r.take(attr_len)? }, v6)?;
    b.add(v6, mask(prefix, len, bits), len, hop);
    Ok(())
}

fn mask(a: u128, len: u8, bits: u32) -> u128 {
    let host = bits - u32::from(len);
    if host >= 128 {
        0
    } else {
        a >> host << host
    }
}

/// Parses an MRT dump; `origin` names it in errors, which give the record's number
/// (from 1) and byte offset.
pub fn parse(bytes: &[u8], origin: &str) -> Result<RouteTable, LoadError> {
    let mut b = Builder::default();
    let mut rest = bytes;
    let mut record = 0usize;
    let mut dumps = 0usize;
    while !rest.is_empty() {
        record += 1;
        let at = bytes.len() - rest.len();
        let err = |reason: String| LoadError {
            origin: origin.to_string(),
            line: None,
            reason: format!("MRT record {} (byte {}): {}", record, at, reason),
        };
        let mut h = Reader { b: rest };
        let (_time, kind, sub, len) =
            (|| Ok::<_, String>((h.u32()?, h.u16()?, h.u16()?, h.u32()? as usize)))()
                .map_err(|e| err(format!("header {}", e)))?;
        let body = h.take(len).map_err(|e| err(format!("body {}", e)))?;
        rest = h.b;
        let r = Reader { b: body };
        match kind {
            TABLE_DUMP_V2 => {
                dumps += 1;
                rib(&mut b, sub, r).map_err(err)?;
            }
            TABLE_DUMP => {
                dumps += 1;
                table_dump(&mut b, sub, r).map_err(err)?;
            }
            _ => {}
        }
    }
    if dumps == 0 {
        return Err(LoadError {
            origin: origin.to_string(),
            line: None,
            reason: "no TABLE_DUMP or TABLE_DUMP_V2 record: not an MRT routing table dump".to_string(),
        });
    }
    Ok(b.table)
}

#[cfg(test)]
mod tests;
