//! `AddressInfo(NAME ADDRESS [ADDRESS...], ...)`: names for addresses, which the other
//! elements' arguments may use in place of the addresses, as in Click.
//!
//! A router collects every AddressInfo of its configuration before it configures any
//! element ([`collect`]), so a name may be used before the AddressInfo that defines
//! it. While elements are configured, and while handlers are written, the table is the
//! thread's ([`with_table`]); the address parsers of [`crate::args`] look a word up in
//! it when it is not an address ([`lookup`]). A name alone means the address of its
//! kind (an IPv4 address, with its prefix where one was given, an Ethernet address, an
//! IPv6 address); `NAME:ip`, `NAME:ipnet` (the prefix's network), `NAME:bcast` (its
//! broadcast address), `NAME:eth` and `NAME:ip6` pick one.

use crate::args::{split_words, EtherAddr, FromArg, Ipv4Prefix};
use crate::element::*;
use crate::error::ConfigError;
use packet::PacketBatch;
use std::cell::RefCell;
use std::collections::HashMap;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

/// The names a configuration's AddressInfo elements define.
#[derive(Default, Debug)]
pub struct AddressTable {
    /// A name's IPv4 address and prefix, kept apart as Click keeps them: an address
    /// sets the address, a prefix the prefix (and the address too when its host bits
    /// are not all zero: `10.0.0.1/24`).
    ipv4: HashMap<String, (Option<Ipv4Addr>, Option<Ipv4Prefix>)>,
    ether: HashMap<String, [u8; 6]>,
    ipv6: HashMap<String, Ipv6Addr>,
}

impl AddressTable {
    /// Adds the names of one AddressInfo configuration; `Err` says what is wrong.
    fn add(&mut self, config: &str) -> Result<(), String> {
        for arg in crate::args::split_args(config) {
            let words = split_words(&arg);
            if words.is_empty() {
                continue;
            }
            let Some((name, addrs)) = words.split_first().filter(|(_, a)| !a.is_empty()) else {
                return Err(format!("expected 'NAME ADDRESS...', not '{}'", arg));
            };
            let first = name.chars().next().unwrap_or('0');
            if !(first.is_ascii_alphabetic() || first == '_')
                || !name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_-.@/".contains(c))
            {
                return Err(format!("'{}' is not a name", name));
            }
            if self.ipv4.contains_key(name.as_str())
                || self.ether.contains_key(name.as_str())
                || self.ipv6.contains_key(name.as_str())
            {
                return Err(format!(
                    "'{}' is named twice (AddressInfo names are global here, not scoped by compound element)",
                    name
                ));
            }
            for a in addrs {
                if let Some(ip) = crate::args::parse_ipv4(a) {
                    self.ipv4.entry(name.clone()).or_default().0 = Some(ip);
                } else if let Some(p) = plain_ipv4_prefix(a) {
                    let e = self.ipv4.entry(name.clone()).or_default();
                    let network = u32::from(p.addr) & u32::from(p.mask);
                    if network != u32::from(p.addr) && e.0.is_none() {
                        e.0 = Some(p.addr);
                    }
                    e.1 = Some(p);
                } else if let Some(e) = plain_ether(a) {
                    self.ether.insert(name.clone(), e);
                } else if let Some(p) = without_table(|| crate::elements::ip6::Ipv6Prefix::from_arg(a)) {
                    // As for IPv4: an address, or a prefix whose host bits name one.
                    if !a.contains('/') {
                        self.ipv6.insert(name.clone(), Ipv6Addr::from(p.addr));
                    } else if p.addr != p.network() {
                        self.ipv6.entry(name.clone()).or_insert(Ipv6Addr::from(p.addr));
                    }
                } else {
                    return Err(format!("'{}' is not an IP, IPv6 or Ethernet address", a));
                }
            }
        }
        Ok(())
    }

    /// An IPv4 address: the name's address.
    fn ipv4_addr(&self, word: &str) -> Option<Ipv4Addr> {
        match split(word) {
            (name, None) => self.ipv4.get(name)?.0,
            (name, Some(p)) if is(p, &["ip", "ip4"]) => self.ipv4.get(name)?.0,
            (name, Some(p)) if is(p, &["bcast"]) => {
                let q = self.ipv4.get(name)?.1?;
                Some(Ipv4Addr::from(u32::from(q.addr) | !u32::from(q.mask)))
            }
            _ => None,
        }
    }

    /// An IPv4 prefix, as Click's IPPrefixArg reads a name: its address as a /32,
    /// else its prefix; `:ipnet` the prefix's network.
    fn ipv4_prefix(&self, word: &str) -> Option<Ipv4Prefix> {
        let whole = |addr: Ipv4Addr| Ipv4Prefix {
            addr,
            mask: Ipv4Addr::BROADCAST,
        };
        match split(word) {
            (name, None) => {
                let (a, p) = *self.ipv4.get(name)?;
                a.map(whole).or(p)
            }
            (name, Some(s)) if is(s, &["ipnet", "net", "ip4net"]) => {
                let p = self.ipv4.get(name)?.1?;
                Some(Ipv4Prefix {
                    addr: Ipv4Addr::from(u32::from(p.addr) & u32::from(p.mask)),
                    mask: p.mask,
                })
            }
            _ => self.ipv4_addr(word).map(whole),
        }
    }

    fn ether(&self, word: &str) -> Option<[u8; 6]> {
        match split(word) {
            (name, None) => self.ether.get(name).copied(),
            (name, Some(p)) if is(p, &["eth", "ethernet"]) => self.ether.get(name).copied(),
            _ => None,
        }
    }

    fn ipv6(&self, word: &str) -> Option<Ipv6Addr> {
        match split(word) {
            (name, None) => self.ipv6.get(name).copied(),
            (name, Some(p)) if is(p, &["ip6"]) => self.ipv6.get(name).copied(),
            _ => None,
        }
    }
}

/// Whether suffix `s` is one of `names`, in any case (as Click compares them).
fn is(s: &str, names: &[&str]) -> bool {
    names.iter().any(|n| s.eq_ignore_ascii_case(n))
}

fn split(word: &str) -> (&str, Option<&str>) {
    match word.rsplit_once(':') {
        Some((n, p)) => (n, Some(p)),
        None => (word, None),
    }
}

/// An address written out, not a name (the table's own entries never recurse).
fn plain_ipv4_prefix(s: &str) -> Option<Ipv4Prefix> {
    without_table(|| Ipv4Prefix::from_arg(s))
}

fn plain_ether(s: &str) -> Option<[u8; 6]> {
    without_table(|| EtherAddr::from_arg(s).map(|e| e.0))
}

thread_local! {
    static TABLE: RefCell<Option<Arc<AddressTable>>> = const { RefCell::new(None) };
}

fn without_table<R>(f: impl FnOnce() -> R) -> R {
    with_table(None, f)
}

/// Puts the thread's names back as they were when dropped, also on a panic.
struct Restore(Option<Arc<AddressTable>>);

impl Drop for Restore {
    fn drop(&mut self) {
        let before = self.0.take();
        TABLE.with(|t| *t.borrow_mut() = before);
    }
}

/// Runs `f` with `table` as the thread's names (restored after).
pub fn with_table<R>(table: Option<Arc<AddressTable>>, f: impl FnOnce() -> R) -> R {
    let _restore = Restore(TABLE.with(|t| t.replace(table)));
    f()
}

/// Whether `word` can be a name: names start with a letter or `_`, so numbers and
/// addresses never cost a lookup.
fn may_be_name(word: &str) -> bool {
    word.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
}

/// Looks `word` up in the thread's names: an IPv4 address with its prefix (a bare
/// address as a /32) ...
pub(crate) fn lookup_ipv4(word: &str) -> Option<Ipv4Addr> {
    let word = word.trim();
    may_be_name(word)
        .then(|| TABLE.with(|t| t.borrow().as_ref().and_then(|t| t.ipv4_addr(word))))
        .flatten()
}

/// ... an IPv4 prefix ...
pub(crate) fn lookup_ipv4_prefix(word: &str) -> Option<Ipv4Prefix> {
    let word = word.trim();
    may_be_name(word)
        .then(|| TABLE.with(|t| t.borrow().as_ref().and_then(|t| t.ipv4_prefix(word))))
        .flatten()
}

/// ... an Ethernet address ...
pub(crate) fn lookup_ether(word: &str) -> Option<[u8; 6]> {
    let word = word.trim();
    may_be_name(word)
        .then(|| TABLE.with(|t| t.borrow().as_ref().and_then(|t| t.ether(word))))
        .flatten()
}

/// ... an IPv6 address.
pub(crate) fn lookup_ipv6(word: &str) -> Option<Ipv6Addr> {
    let word = word.trim();
    may_be_name(word)
        .then(|| TABLE.with(|t| t.borrow().as_ref().and_then(|t| t.ipv6(word))))
        .flatten()
}

/// The table of every AddressInfo among `elements` (class and configuration), or
/// the first error with the index of its element; `None` if there is none.
pub fn collect<'a>(
    elements: impl Iterator<Item = (&'a str, &'a str)>,
) -> Result<Option<Arc<AddressTable>>, (usize, String)> {
    let mut table = AddressTable::default();
    let mut any = false;
    for (i, (class, config)) in elements.enumerate() {
        if class == "AddressInfo" {
            any = true;
            table.add(config).map_err(|e| (i, e))?;
        }
    }
    Ok(any.then(|| Arc::new(table)))
}

pub struct AddressInfoClass;

impl ElementClass for AddressInfoClass {
    fn name(&self) -> &'static str {
        "AddressInfo"
    }
    fn port_count(&self) -> PortCount {
        PortCount::parse("0/0")
    }
    fn build(
        &self,
        _args: &mut crate::args::Args,
        _cx: &BuildContext,
    ) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        // The router read the names before configuring anything (`collect`).
        Ok(Arc::new(AddressInfoSpec))
    }
}

struct AddressInfoSpec;

impl ElementSpec for AddressInfoSpec {
    fn instantiate(&self, _w: WorkerInfo) -> Box<dyn Element> {
        Box::new(NoPackets)
    }
}

struct NoPackets;

impl Element for NoPackets {
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, _out: &mut Outputs<'_>, _cx: &mut Context<'_>) {
        batch.clear();
    }
}

#[cfg(test)]
mod tests {
    use crate::args::FromArg;
    use crate::router::RouterSpec;

    fn build(text: &str) -> Result<RouterSpec, String> {
        crate::testing::router(text).map_err(|e| e.message)
    }

    fn error(text: &str) -> String {
        build(text).err().expect("refused")
    }

    #[test]
    fn names_stand_for_their_addresses_in_arguments_and_handlers() {
        // Used before the AddressInfo that names them, as Click allows.
        let r = build(
            "Idle -> q :: ARPQuerier(eth0) -> Discard; Idle -> [1]q;
             Idle -> a :: ARPResponder(eth0) -> Discard;
             Idle -> rt :: RadixIPLookup(eth0:ipnet 0, 0/0 gw 1, eth0:bcast 0) -> Discard; rt[1] -> Discard;
             Idle -> s :: IP6NDSolicitor(h6, eth0:eth) -> Discard; Idle -> [1]s;
             AddressInfo(eth0 10.0.0.1/24 02:00:00:00:00:01, gw 10.0.0.254, h6 2001:db8::1);",
        )
        .unwrap();
        // As Click's IPPrefixArg reads a name: its address, a /32 (so no broadcast
        // address of a prefix).
        assert_eq!(r.read_handler("q.ipaddr").unwrap(), "10.0.0.1");
        assert_eq!(r.read_handler("q.broadcast").unwrap(), "255.255.255.255");
        // ARPResponder(NAME) answers for the name's address with its Ethernet address.
        assert_eq!(
            r.read_handler("a.table").unwrap(),
            "10.0.0.1/32 02-00-00-00-00-01\n"
        );
        assert_eq!(
            r.read_handler("rt.table").unwrap(),
            "10.0.0.0/24\t\t-\t\t0\n0.0.0.0/0\t\t10.0.0.254\t1\n10.0.0.255/32\t\t-\t\t0\n"
        );
        assert_eq!(r.read_handler("s.ipaddr").unwrap(), "2001:db8::1");
        // Handler values too.
        r.write_handler("rt.add", "gw 1").unwrap();
        assert_eq!(r.read_handler("rt.lookup 10.0.0.254").unwrap(), "1");
        assert_eq!(r.read_handler("rt.lookup gw").unwrap(), "1");
    }

    #[test]
    fn addresses_and_prefixes_of_a_name_are_kept_apart_as_in_click() {
        let r = build(
            "AddressInfo(a 10.0.0.1 10.0.0.0/24, n 10.9.0.0/16, h6 2001:db8::1 2001:db8::/64);
             Idle -> rt :: RadixIPLookup(a 0, a:IPNET 1, n 2, a:bcast 4) -> Discard;
             rt[1] -> Discard; rt[2] -> Discard; rt[3] -> Discard; rt[4] -> Discard;
             Idle -> l6 :: LookupIP6Route(h6 0) -> Discard;",
        )
        .unwrap();
        // The address as a /32; the prefix by `:ipnet` (any case); a name with only a
        // network prefix gives the prefix.
        assert_eq!(
            r.read_handler("rt.table").unwrap(),
            "10.0.0.1/32\t\t-\t\t0\n10.0.0.0/24\t\t-\t\t1\n10.9.0.0/16\t\t-\t\t2\n10.0.0.255/32\t\t-\t\t4\n"
        );
        assert!(r
            .read_handler("l6.table")
            .unwrap()
            .contains("\n2001:db8::1/128\t::\t0\n"));
        // A name cannot stand for `-`, the word for no gateway (names start with a
        // letter or `_`), and is defined once.
        assert_eq!(
            error("AddressInfo(- 1.2.3.4)"),
            "AddressInfo@1 :: AddressInfo: '-' is not a name"
        );
        assert!(
            error("AddressInfo(a 10.0.0.1); AddressInfo(a 10.0.0.2)").ends_with(
                "'a' is named twice (AddressInfo names are global here, not scoped by compound element)"
            )
        );
        assert_eq!(
            error("AddressInfo(h6 2001:db8::1/zzz)"),
            "AddressInfo@1 :: AddressInfo: '2001:db8::1/zzz' is not an IP, IPv6 or Ethernet address"
        );
        // Names do not outlive the router that defines them.
        assert!(crate::args::Ipv4Prefix::from_arg("a").is_none());
    }

    #[test]
    fn bad_names_and_addresses_are_configuration_errors() {
        assert_eq!(
            error("AddressInfo(eth0 10.0.0.300)"),
            "AddressInfo@1 :: AddressInfo: '10.0.0.300' is not an IP, IPv6 or Ethernet address"
        );
        assert_eq!(
            error("AddressInfo(eth0)"),
            "AddressInfo@1 :: AddressInfo: expected 'NAME ADDRESS...', not 'eth0'"
        );
        assert_eq!(
            error("AddressInfo(9lives 10.0.0.1)"),
            "AddressInfo@1 :: AddressInfo: '9lives' is not a name"
        );
        // A name nobody defined is what it was without AddressInfo.
        assert_eq!(
            error("AddressInfo(eth0 10.0.0.1); Idle -> q :: ARPQuerier(eth1) -> Discard; Idle -> [1]q"),
            "q :: ARPQuerier: expected ARPQuerier(IP, ETH) or ARPQuerier(NAME) with an AddressInfo NAME of both, not 'eth1'"
        );
        // An IPv4 name is not an Ethernet address.
        assert!(
            error("AddressInfo(eth0 10.0.0.1); Idle -> q :: ARPQuerier(eth0) -> Discard; Idle -> [1]q")
                .ends_with("missing mandatory ETH argument")
        );
    }
}
