//! `VLANEncap(VLAN_TCI [, VLAN_PCP], keywords VLAN_ID, NATIVE_VLAN, ETHERTYPE)` and
//! `VLANDecap([ANNO], keyword ETHERTYPE)`: insert or remove an 802.1Q tag after the
//! addresses of an Ethernet frame, as Click's elements of the same names. The VLAN TCI
//! annotation (bytes 20-21, network order) carries the tag's TCI between them.

use super::shared::lock;
use crate::args::{uncomment, Args, FromArg};
use crate::element::*;
use crate::error::ConfigError;
use packet::anno::VLAN_TCI_ANNO_OFFSET;
use packet::{Packet, PacketBatch};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// 802.1Q's tag protocol identifier, both elements' default ETHERTYPE.
const ETHERTYPE_8021Q: u16 = 0x8100;
/// An Ethernet header: two addresses and a type.
const ETHER_LEN: usize = 14;

/// An argument kept as its text, read once the others are known.
struct Text(String);

impl FromArg for Text {
    const WHAT: &'static str = "string";
    fn from_arg(s: &str) -> Option<Self> {
        Some(Text(s.trim().to_string()))
    }
}

/// An integer argument between `lo` and `hi`.
fn bounded(kw: &str, text: &str, lo: i64, hi: i64) -> Result<i64, String> {
    i64::from_arg(text)
        .filter(|v| (lo..=hi).contains(v))
        .ok_or_else(|| format!("{} expects integer from {} to {}", kw, lo, hi))
}

/// VLANEncap's arguments as given (text), so a handler write can replace one and
/// check the whole configuration again, as Click's reconfiguring handlers do.
#[derive(Clone, Default)]
struct EncapArgs {
    tci: Option<String>,
    pcp: Option<String>,
    id: Option<String>,
    native: Option<String>,
    ethertype: Option<String>,
}

/// VLANEncap's settings, as they are packed for the workers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct EncapConfig {
    /// The TCI to insert (unless `anno`).
    tci: u16,
    /// Take the TCI from the packet's VLAN TCI annotation.
    anno: bool,
    /// The VLAN ID whose frames are sent untagged, if any.
    native: Option<u16>,
    ethertype: u16,
}

impl EncapConfig {
    fn pack(self) -> u64 {
        u64::from(self.tci)
            | u64::from(self.ethertype) << 16
            | u64::from(self.native.unwrap_or(u16::MAX)) << 32
            | u64::from(self.anno) << 48
    }
    fn unpack(v: u64) -> EncapConfig {
        let native = (v >> 32) as u16;
        EncapConfig {
            tci: v as u16,
            ethertype: (v >> 16) as u16,
            native: (native != u16::MAX).then_some(native),
            anno: v >> 48 & 1 == 1,
        }
    }
}

impl EncapArgs {
    /// The settings, as Click's VLANEncap::configure reads them: VLAN_TCI (or
    /// VLAN_ID when it is absent) with VLAN_PCP in the top three bits.
    fn resolve(&self) -> Result<EncapConfig, String> {
        let pcp = match &self.pcp {
            Some(t) => bounded("VLAN_PCP", t, 0, 7)?,
            None => 0,
        };
        let id = match &self.id {
            Some(t) => bounded("VLAN_ID", t, 0, 0xfff)?,
            None => 0,
        };
        let native = match &self.native {
            Some(t) => bounded("NATIVE_VLAN", t, -1, 0xfff)?,
            None => 0,
        };
        let ethertype = match &self.ethertype {
            Some(t) => u16::from_arg(t).ok_or_else(|| format!("ETHERTYPE expects {}", u16::WHAT))?,
            None => ETHERTYPE_8021Q,
        };
        let anno = self.tci.as_deref() == Some("ANNO");
        let tci = match &self.tci {
            Some(t) if !anno => bounded("VLAN_TCI", t, 0, 0xffff)?,
            _ => id,
        };
        Ok(EncapConfig {
            tci: (tci | pcp << 13) as u16,
            anno,
            native: u16::try_from(native).ok(),
            ethertype,
        })
    }
}

pub struct VLANEncapClass;

impl ElementClass for VLANEncapClass {
    fn name(&self) -> &'static str {
        "VLANEncap"
    }
    fn port_count(&self) -> PortCount {
        PortCount::parse("1/1")
    }
    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        let e = |m: String| cx.error(m);
        let text = |r: Result<Option<Text>, String>| r.map(|t| t.map(|t| t.0)).map_err(e);
        let given = EncapArgs {
            tci: text(args.positional::<Text>("VLAN_TCI"))?,
            pcp: text(args.positional::<Text>("VLAN_PCP"))?,
            id: text(args.keyword::<Text>("VLAN_ID"))?,
            native: text(args.keyword::<Text>("NATIVE_VLAN"))?,
            ethertype: text(args.keyword::<Text>("ETHERTYPE"))?,
        };
        args.finish().map_err(e)?;
        let config = given.resolve().map_err(e)?;
        Ok(Arc::new(VLANEncapSpec {
            packed: Arc::new(AtomicU64::new(config.pack())),
            args: Mutex::new(given),
        }))
    }
}

struct VLANEncapSpec {
    packed: Arc<AtomicU64>,
    args: Mutex<EncapArgs>,
}

/// VLANEncap's handlers that replace one argument: name, argument keyword, position.
const ENCAP_HANDLERS: [(&str, &str, usize); 5] = [
    ("vlan_tci", "VLAN_TCI", 0),
    ("vlan_pcp", "VLAN_PCP", 1),
    ("vlan_id", "VLAN_ID", usize::MAX),
    ("native_vlan", "NATIVE_VLAN", usize::MAX),
    ("ethertype", "ETHERTYPE", usize::MAX),
];

fn field<'a>(a: &'a mut EncapArgs, handler: &str) -> Option<&'a mut Option<String>> {
    Some(match handler {
        "vlan_tci" => &mut a.tci,
        "vlan_pcp" => &mut a.pcp,
        "vlan_id" => &mut a.id,
        "native_vlan" => &mut a.native,
        "ethertype" => &mut a.ethertype,
        _ => return None,
    })
}

impl ElementSpec for VLANEncapSpec {
    fn instantiate(&self, _w: WorkerInfo) -> Box<dyn Element> {
        Box::new(VLANEncap {
            packed: self.packed.clone(),
        })
    }
    fn handlers(&self) -> Vec<HandlerInfo> {
        ENCAP_HANDLERS
            .iter()
            .map(|&(name, kw, at)| HandlerInfo::read_write(name).reconfiguring(at, kw))
            .collect()
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        let c = EncapConfig::unpack(self.packed.load(Ordering::Relaxed));
        match name {
            // Click's VLANEncap answers `config` with its settings.
            "config" => {
                let mut s = if c.anno {
                    "ANNO".to_string()
                } else {
                    format!("VLAN_ID {}, VLAN_PCP {}", c.tci & 0xfff, c.tci >> 13)
                };
                match c.native {
                    Some(0) => {}
                    Some(n) => s.push_str(&format!(", NATIVE_VLAN {}", n)),
                    None => s.push_str(", NATIVE_VLAN -1"),
                }
                Some(s)
            }
            "vlan_tci" if c.anno => Some("ANNO".to_string()),
            "vlan_tci" => Some(c.tci.to_string()),
            // As Click reads them from its `config`: from the TCI in use.
            "vlan_id" | "vlan_pcp" if c.anno => Some(String::new()),
            "vlan_id" => Some((c.tci & 0xfff).to_string()),
            "vlan_pcp" => Some((c.tci >> 13).to_string()),
            "native_vlan" => Some(match c.native {
                Some(0) => String::new(),
                Some(n) => n.to_string(),
                None => "-1".to_string(),
            }),
            "ethertype" => Some(format!("0x{:04x}", c.ethertype)),
            _ => field(&mut lock(&self.args), name).map(|f| f.clone().unwrap_or_default()),
        }
    }
    fn write_handler(&self, name: &str, value: &str) -> Option<Result<(), String>> {
        let mut args = lock(&self.args);
        let mut next = args.clone();
        if matches!(name, "vlan_id" | "vlan_pcp") {
            // Click rebuilds from its `config`, `VLAN_ID n, VLAN_PCP p`: a TCI given
            // as such becomes its ID and priority, which the write then changes.
            if let Some(c) = args.resolve().ok().filter(|c| !c.anno) {
                next.tci = None;
                next.id = Some((c.tci & 0xfff).to_string());
                next.pcp = Some((c.tci >> 13).to_string());
            }
        }
        *field(&mut next, name)? = Some(uncomment(value).trim().to_string());
        Some(next.resolve().map(|c| {
            self.packed.store(c.pack(), Ordering::Relaxed);
            *args = next;
        }))
    }
}

struct VLANEncap {
    packed: Arc<AtomicU64>,
}

/// Tags one frame; false if it is too short to be an Ethernet frame (or cannot grow).
#[inline(always)]
fn encap(p: &mut Packet, c: &EncapConfig) -> bool {
    if p.len() < ETHER_LEN {
        return false;
    }
    let tci = if c.anno {
        let a = &p.anno().user[VLAN_TCI_ANNO_OFFSET..VLAN_TCI_ANNO_OFFSET + 2];
        u16::from_be_bytes([a[0], a[1]])
    } else {
        c.tci
    };
    if c.native == Some(tci & 0xfff) {
        p.set_mac_header(0);
        return true;
    }
    if !p.try_push(4) {
        return false;
    }
    let d = p.data_mut();
    d.copy_within(4..16, 0);
    d[12..14].copy_from_slice(&c.ethertype.to_be_bytes());
    d[14..16].copy_from_slice(&tci.to_be_bytes());
    p.set_mac_header(0);
    true
}

impl Element for VLANEncap {
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, out: &mut Outputs<'_>, _cx: &mut Context<'_>) {
        let c = EncapConfig::unpack(self.packed.load(Ordering::Relaxed));
        out.route_each(batch, |p| if encap(p, &c) { 0 } else { DROP });
    }
}

pub struct VLANDecapClass;

impl ElementClass for VLANDecapClass {
    fn name(&self) -> &'static str {
        "VLANDecap"
    }
    fn port_count(&self) -> PortCount {
        PortCount::parse("1/1")
    }
    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        let e = |m: String| cx.error(m);
        let anno = args.positional::<bool>("ANNO").map_err(e)?.unwrap_or(true);
        let ethertype = args
            .keyword::<u16>("ETHERTYPE")
            .map_err(e)?
            .unwrap_or(ETHERTYPE_8021Q);
        args.finish().map_err(e)?;
        Ok(Arc::new(VLANDecapSpec(VLANDecap { anno, ethertype })))
    }
}

struct VLANDecapSpec(VLANDecap);

impl ElementSpec for VLANDecapSpec {
    fn instantiate(&self, _w: WorkerInfo) -> Box<dyn Element> {
        Box::new(self.0)
    }
}

#[derive(Clone, Copy)]
struct VLANDecap {
    anno: bool,
    ethertype: u16,
}

impl VLANDecap {
    /// Untags one frame; false if it is too short for its Ethernet header or tag.
    #[inline(always)]
    fn decap(&self, p: &mut Packet) -> bool {
        let d = p.data();
        if d.len() < ETHER_LEN {
            return false;
        }
        let mut tci = [0u8; 2];
        if u16::from_be_bytes([d[12], d[13]]) == self.ethertype {
            // The tag and the encapsulated type.
            if d.len() < ETHER_LEN + 4 {
                return false;
            }
            tci = [d[14], d[15]];
            p.data_mut().copy_within(0..12, 4);
            p.pull(4);
        }
        p.set_mac_header(0);
        if self.anno {
            p.set_user_anno(VLAN_TCI_ANNO_OFFSET, &tci);
        }
        true
    }
}

impl Element for VLANDecap {
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, out: &mut Outputs<'_>, _cx: &mut Context<'_>) {
        let this = *self;
        out.route_each(batch, |p| if this.decap(p) { 0 } else { DROP });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{build_error, Harness};

    const DST: [u8; 6] = [0x00, 0x11, 0x22, 0x33, 0x44, 0x55];
    const SRC: [u8; 6] = [0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb];

    /// An IPv4 Ethernet frame with a four-byte payload.
    fn frame() -> Vec<u8> {
        [&DST[..], &SRC[..], &[0x08, 0x00], &[1, 2, 3, 4]].concat()
    }

    /// The same frame with a tag of type `tpid` and TCI `tci` after the addresses.
    fn tagged(tpid: [u8; 2], tci: [u8; 2]) -> Vec<u8> {
        [
            &DST[..],
            &SRC[..],
            &tpid[..],
            &tci[..],
            &[0x08, 0x00],
            &[1, 2, 3, 4],
        ]
        .concat()
    }

    fn tci_anno(p: &Packet) -> [u8; 2] {
        let a = &p.anno().user[VLAN_TCI_ANNO_OFFSET..VLAN_TCI_ANNO_OFFSET + 2];
        [a[0], a[1]]
    }

    #[test]
    fn vlan_encap_inserts_the_tag() {
        let mut h = Harness::new(&VLANEncapClass, "5", 1, 1);
        let out = h.push_bytes(0, &frame());
        let p = &out[0][0];
        assert_eq!(p.data(), &tagged([0x81, 0x00], [0x00, 0x05])[..]);
        assert_eq!(p.mac_header_offset(), Some(0));
        assert_eq!(p.mac_header().map(|m| m.len()), Some(22));

        // VLAN_PCP 5 goes in the top three bits: 0xa000 | 0x123.
        let mut h = Harness::new(&VLANEncapClass, "0x123, 5, ETHERTYPE 0x88a8", 1, 1);
        let out = h.push_bytes(0, &frame());
        assert_eq!(out[0][0].data(), &tagged([0x88, 0xa8], [0xa1, 0x23])[..]);

        // VLAN_ID instead of VLAN_TCI.
        let mut h = Harness::new(&VLANEncapClass, "VLAN_ID 100, VLAN_PCP 7", 1, 1);
        let out = h.push_bytes(0, &frame());
        assert_eq!(out[0][0].data(), &tagged([0x81, 0x00], [0xe0, 0x64])[..]);
    }

    #[test]
    fn vlan_encap_takes_the_tci_from_the_annotation() {
        let mut h = Harness::new(&VLANEncapClass, "ANNO", 1, 1);
        let mut p = Packet::from_slice(&frame());
        p.set_user_anno(VLAN_TCI_ANNO_OFFSET, &[0x30, 0x07]);
        let out = h.push(0, vec![p]);
        assert_eq!(out[0][0].data(), &tagged([0x81, 0x00], [0x30, 0x07])[..]);
        assert_eq!(h.read("vlan_tci"), "ANNO");
        assert_eq!(h.read("config"), "ANNO");
        // An annotation naming VLAN 0, the default native VLAN: no tag.
        let mut p = Packet::from_slice(&frame());
        p.set_user_anno(VLAN_TCI_ANNO_OFFSET, &[0xe0, 0x00]);
        let out = h.push(0, vec![p]);
        assert_eq!(out[0][0].data(), &frame()[..]);
    }

    #[test]
    fn vlan_encap_leaves_the_native_vlan_untagged() {
        // NATIVE_VLAN is 0 unless given: VLAN ID 0 is not tagged, whatever the PCP.
        let mut h = Harness::new(&VLANEncapClass, "0, 3", 1, 1);
        let out = h.push_bytes(0, &frame());
        assert_eq!(out[0][0].data(), &frame()[..]);
        assert_eq!(out[0][0].mac_header_offset(), Some(0));
        let mut h = Harness::new(&VLANEncapClass, "0, 3, NATIVE_VLAN -1", 1, 1);
        let out = h.push_bytes(0, &frame());
        assert_eq!(out[0][0].data(), &tagged([0x81, 0x00], [0x60, 0x00])[..]);
        let mut h = Harness::new(&VLANEncapClass, "7, NATIVE_VLAN 7", 1, 1);
        let out = h.push_bytes(0, &frame());
        assert_eq!(out[0][0].data(), &frame()[..]);
    }

    #[test]
    fn vlan_encap_drops_frames_shorter_than_an_ethernet_header() {
        let mut h = Harness::new(&VLANEncapClass, "5", 1, 1);
        let out = h.push(
            0,
            vec![
                Packet::from_slice(&frame()[..13]),
                Packet::from_slice(&frame()[..14]),
            ],
        );
        assert_eq!(out[0].len(), 1);
        assert_eq!(out[0][0].data(), &tagged([0x81, 0x00], [0x00, 0x05])[..18]);
    }

    #[test]
    fn vlan_encap_handlers() {
        let mut h = Harness::new(&VLANEncapClass, "0x123, 5", 1, 1);
        assert_eq!(h.read("vlan_tci"), "41251");
        assert_eq!(h.read("config"), "VLAN_ID 291, VLAN_PCP 5");
        assert_eq!(h.read("vlan_pcp"), "5");
        // From the TCI in use, as Click reads them from its `config`.
        assert_eq!(h.read("vlan_id"), "291");
        h.write("vlan_tci", "10").unwrap();
        assert_eq!(h.read("vlan_tci"), "40970");
        h.write("vlan_pcp", "0").unwrap();
        h.write("ethertype", "0x9100").unwrap();
        assert_eq!(h.read("ethertype"), "0x9100");
        let out = h.push_bytes(0, &frame());
        assert_eq!(out[0][0].data(), &tagged([0x91, 0x00], [0x00, 0x0a])[..]);
        h.write("native_vlan", "10").unwrap();
        assert_eq!(h.read("config"), "VLAN_ID 10, VLAN_PCP 0, NATIVE_VLAN 10");
        let out = h.push_bytes(0, &frame());
        assert_eq!(out[0][0].data(), &frame()[..]);
        assert_eq!(
            h.write("vlan_pcp", "8"),
            Err("VLAN_PCP expects integer from 0 to 7".to_string())
        );
        assert_eq!(
            h.write("vlan_tci", "0x10000"),
            Err("VLAN_TCI expects integer from 0 to 65535".to_string())
        );
        assert_eq!(h.read("vlan_tci"), "10");
        h.write("vlan_tci", "ANNO").unwrap();
        assert_eq!(h.read("vlan_tci"), "ANNO");
        assert_eq!(h.read("vlan_id"), "");

        // The native VLAN as Click reads it from its `config`.
        let h = Harness::new(&VLANEncapClass, "5, NATIVE_VLAN 0x7", 1, 1);
        assert_eq!(h.read("native_vlan"), "7");
        assert_eq!(h.read("ethertype"), "0x8100");
        let h = Harness::new(&VLANEncapClass, "5", 1, 1);
        assert_eq!(h.read("native_vlan"), "");

        // A VLAN ID written over a TCI given as such replaces the TCI's ID.
        let mut h = Harness::new(&VLANEncapClass, "5", 1, 1);
        h.write("vlan_id", "10").unwrap();
        assert_eq!(h.read("config"), "VLAN_ID 10, VLAN_PCP 0");
        let out = h.push_bytes(0, &frame());
        assert_eq!(out[0][0].data(), &tagged([0x81, 0x00], [0x00, 0x0a])[..]);
        let names: Vec<_> = h.spec.handlers().into_iter().map(|h| h.name).collect();
        assert_eq!(
            names,
            vec!["vlan_tci", "vlan_pcp", "vlan_id", "native_vlan", "ethertype"]
        );
        assert_eq!(
            h.spec.handlers()[0],
            HandlerInfo::read_write("vlan_tci").reconfiguring(0, "VLAN_TCI")
        );
    }

    #[test]
    fn vlan_encap_configuration_errors() {
        let err = |c: &str| build_error(&VLANEncapClass, c, 1, 1);
        assert_eq!(
            err("70000"),
            "e :: VLANEncap: VLAN_TCI expects integer from 0 to 65535"
        );
        assert_eq!(
            err("anno"),
            "e :: VLANEncap: VLAN_TCI expects integer from 0 to 65535"
        );
        assert_eq!(
            err("1, 8"),
            "e :: VLANEncap: VLAN_PCP expects integer from 0 to 7"
        );
        assert_eq!(
            err("VLAN_ID 4096"),
            "e :: VLANEncap: VLAN_ID expects integer from 0 to 4095"
        );
        assert_eq!(
            err("1, NATIVE_VLAN -2"),
            "e :: VLANEncap: NATIVE_VLAN expects integer from -1 to 4095"
        );
        assert_eq!(
            err("1, ETHERTYPE 0x10000"),
            "e :: VLANEncap: ETHERTYPE expects unsigned integer"
        );
        assert_eq!(err("1, 2, 3"), "e :: VLANEncap: too many arguments");
    }

    #[test]
    fn vlan_decap_removes_the_tag_and_sets_the_annotation() {
        let mut h = Harness::new(&VLANDecapClass, "", 1, 1);
        let out = h.push_bytes(0, &tagged([0x81, 0x00], [0xa1, 0x23]));
        let p = &out[0][0];
        assert_eq!(p.data(), &frame()[..]);
        assert_eq!(tci_anno(p), [0xa1, 0x23]);
        assert_eq!(p.mac_header_offset(), Some(0));
        // Untagged: unchanged, annotation 0.
        let mut p = Packet::from_slice(&frame());
        p.set_user_anno(VLAN_TCI_ANNO_OFFSET, &[0x12, 0x34]);
        let out = h.push(0, vec![p]);
        assert_eq!(out[0][0].data(), &frame()[..]);
        assert_eq!(tci_anno(&out[0][0]), [0, 0]);
        // Another tag type is not this element's.
        let out = h.push_bytes(0, &tagged([0x88, 0xa8], [0x00, 0x05]));
        assert_eq!(out[0][0].data(), &tagged([0x88, 0xa8], [0x00, 0x05])[..]);
    }

    #[test]
    fn vlan_decap_keywords_and_short_frames() {
        let mut h = Harness::new(&VLANDecapClass, "ANNO false, ETHERTYPE 0x88a8", 1, 1);
        let mut p = Packet::from_slice(&tagged([0x88, 0xa8], [0x00, 0x05]));
        p.set_user_anno(VLAN_TCI_ANNO_OFFSET, &[0x12, 0x34]);
        let out = h.push(0, vec![p]);
        assert_eq!(out[0][0].data(), &frame()[..]);
        assert_eq!(tci_anno(&out[0][0]), [0x12, 0x34]);

        let mut h = Harness::new(&VLANDecapClass, "false", 1, 1);
        let out = h.push(
            0,
            vec![
                // Too short for an Ethernet header, and for a tag.
                Packet::from_slice(&frame()[..13]),
                Packet::from_slice(&tagged([0x81, 0x00], [0, 5])[..17]),
                // A tag with nothing behind it but the inner type.
                Packet::from_slice(&tagged([0x81, 0x00], [0, 5])[..18]),
            ],
        );
        assert_eq!(out[0].len(), 1);
        assert_eq!(out[0][0].data(), &frame()[..14]);
        assert_eq!(
            build_error(&VLANDecapClass, "maybe", 1, 1),
            "e :: VLANDecap: ANNO expects bool"
        );
        assert_eq!(
            build_error(&VLANDecapClass, "VLAN_TCI 5", 1, 1),
            "e :: VLANDecap: bad keyword 'VLAN_TCI'"
        );
    }
}
