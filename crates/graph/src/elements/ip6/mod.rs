//! Click's IPv6 elements: `CheckIP6Header` and `MarkIP6Header` find the IPv6 header,
//! `DecIP6HLIM` decrements its hop limit, `ICMP6Error` answers with ICMPv6 errors,
//! `GetIP6Address` sets the destination IPv6 annotation from the packet,
//! `LookupIP6Route` routes by it over the `lpm` crate's IPv6 table, and
//! `ICMP6PingResponder` (brickroute's own) answers echo requests.

use crate::args::{split_words, FromArg};
use crate::elements::multipath::{self, RouteError, Weighted};
use packet::checksum::{fold, pseudo_header_v6, sum};
use std::net::Ipv6Addr;

pub(crate) mod checkip6header;
pub(crate) mod decip6hlim;
pub(crate) mod getip6address;
pub(crate) mod icmp6error;
pub(crate) mod icmp6ping;
pub(crate) mod lookupip6route;
#[cfg(test)]
pub(crate) mod testutil;

/// The checksum of an ICMPv6 message from `src` to `dst` (RFC 4443 2.3): over the
/// IPv6 pseudo-header and `message`, whose checksum field must hold zero.
pub(crate) fn icmp6_checksum(src: &[u8; 16], dst: &[u8; 16], message: &[u8]) -> u16 {
    !fold(sum(message, pseudo_header_v6(src, dst, 58, message.len() as u32)))
}

/// An IPv6 prefix as Click's `cp_ip6_prefix` reads it with bare addresses allowed:
/// `ADDR/LEN`, `ADDR/MASK` (a contiguous mask written as an address) or `ADDR` (a /128).
/// The address keeps its bits past the prefix; [`Ipv6Prefix::network`] clears them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Ipv6Prefix {
    pub addr: u128,
    pub len: u8,
}

impl Ipv6Prefix {
    /// The address with the bits past the prefix cleared.
    pub fn network(&self) -> u128 {
        self.addr & mask_of(self.len)
    }

    /// The prefix's mask: `len` one bits, then zeros.
    pub fn mask(&self) -> u128 {
        mask_of(self.len)
    }
}

fn mask_of(len: u8) -> u128 {
    if len == 0 {
        0
    } else {
        u128::MAX << (128 - u32::from(len))
    }
}

impl FromArg for Ipv6Prefix {
    const WHAT: &'static str = "IPv6 address prefix";
    fn from_arg(s: &str) -> Option<Self> {
        let s = s.trim();
        let (a, m) = match s.split_once('/') {
            None => (s, None),
            Some((a, m)) => (a, Some(m)),
        };
        let addr = match a.parse::<Ipv6Addr>() {
            Ok(a) => u128::from(a),
            // An AddressInfo name, alone: its address, a /128.
            Err(_) if m.is_none() => {
                return crate::addressinfo::lookup_ipv6(a).map(|a| Ipv6Prefix {
                    addr: u128::from(a),
                    len: 128,
                })
            }
            Err(_) => return None,
        };
        let len = match m {
            None => 128,
            Some(m) if m.contains(':') => {
                let mask = u128::from(m.parse::<Ipv6Addr>().ok()?);
                // Only contiguous masks: the table matches prefixes.
                (mask.leading_ones() + mask.trailing_zeros() == 128).then_some(mask.leading_ones() as u8)?
            }
            Some(m) => {
                // Digits only (no sign, no spaces), as Click reads a prefix length.
                if m.is_empty() || !m.bytes().all(|b| b.is_ascii_digit()) {
                    return None;
                }
                let len: u32 = m.parse().ok()?;
                (len <= 128).then_some(len as u8)?
            }
        };
        Some(Ipv6Prefix { addr, len })
    }
}

/// A parsed IPv6 route: network address, prefix length, (gateway, output) members and
/// their weights.
pub(crate) type ParsedRoute6 = (u128, u8, Vec<Weighted<(u128, i64)>>);

/// A route as Click's `LookupIP6Route` takes it: `DADDR/MASK [GW] OUTPUT`, a gateway of
/// `::` meaning none; or a multipath route, brickroute's, `DADDR/MASK [GW] OUTPUT
/// [weight N] [GW] OUTPUT [weight N] ...`. Returns the prefix (its network address) and
/// the members.
pub(crate) fn parse_route6(s: &str) -> Result<ParsedRoute6, RouteError> {
    let words = split_words(s);
    let mut words = words.iter().map(String::as_str);
    let p = words
        .next()
        .and_then(Ipv6Prefix::from_arg)
        .ok_or(RouteError::Syntax)?;
    let hops = multipath::read_members(&mut words, |w, words, _| {
        // A gateway is followed by its output; an output stands alone.
        let (gw, port) = match Ipv6Addr::from_arg(w) {
            Some(gw) => (u128::from(gw), words.next().ok_or(RouteError::Syntax)?),
            None => (0, w),
        };
        Ok(Some((gw, i64::from_arg(port).ok_or(RouteError::Syntax)?)))
    })?;
    if hops.is_empty() {
        return Err(RouteError::Syntax);
    }
    Ok((p.network(), p.len, hops))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(s: &str) -> u128 {
        u128::from(s.parse::<Ipv6Addr>().unwrap())
    }

    #[test]
    fn prefixes_as_click_writes_them() {
        let p = |s: &str| Ipv6Prefix::from_arg(s).map(|p| (p.network(), p.len));
        assert_eq!(p("2001:db8::/32"), Some((a("2001:db8::"), 32)));
        assert_eq!(p("2001:db8::1/32"), Some((a("2001:db8::"), 32)));
        assert_eq!(p("2001:db8::1"), Some((a("2001:db8::1"), 128)));
        assert_eq!(p("::/0"), Some((0, 0)));
        assert_eq!(p("2001:db8::/ffff:ffff::"), Some((a("2001:db8::"), 32)));
        assert_eq!(p("2001:db8::/129"), None);
        assert_eq!(p("2001:db8::/+3"), None);
        assert_eq!(p("2001:db8::/"), None);
        // A mask with a hole is refused.
        assert_eq!(p("2001:db8::/ffff:0:ffff::"), None);
        assert_eq!(p("10.0.0.0/8"), None);
    }

    #[test]
    fn routes_with_and_without_gateway() {
        assert_eq!(
            parse_route6("2001:db8::/32 1").ok(),
            Some((a("2001:db8::"), 32, vec![((0, 1), 1)]))
        );
        assert_eq!(
            parse_route6("::/0 2001:db8::2 0").ok(),
            Some((0, 0, vec![((a("2001:db8::2"), 0), 1)]))
        );
        assert_eq!(parse_route6("2001:db8::/32").ok(), None);
        assert_eq!(parse_route6("2001:db8::/32 x 1").ok(), None);
        assert_eq!(parse_route6("2001:db8::/32 one").ok(), None);
        // Multipath: members with or without a gateway (the caller refuses duplicates
        // and too many).
        assert_eq!(
            parse_route6("2001:db8::/32 :: 1 2").ok(),
            Some((a("2001:db8::"), 32, vec![((0, 1), 1), ((0, 2), 1)]))
        );
        assert_eq!(
            parse_route6("2001:db8::/32 fe80::1 1 fe80::2 1").ok(),
            Some((
                a("2001:db8::"),
                32,
                vec![((a("fe80::1"), 1), 1), ((a("fe80::2"), 1), 1)]
            ))
        );
        assert_eq!(
            parse_route6("2001:db8::/32 fe80::1 1 weight 2 fe80::2 1").ok(),
            Some((
                a("2001:db8::"),
                32,
                vec![((a("fe80::1"), 1), 2), ((a("fe80::2"), 1), 1)]
            ))
        );
        assert_eq!(parse_route6("2001:db8::/32 fe80::1 1 weight 300").ok(), None);
        assert_eq!(
            parse_route6("2001:db8::/32 fe80::1 1 fe80::1 1"),
            Err(RouteError::Members(
                "a multipath route's members must differ (one is given twice)".to_string()
            ))
        );
        assert_eq!(parse_route6("2001:db8::/32 fe80::1 1 fe80::2").ok(), None);
    }
}
