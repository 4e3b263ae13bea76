//! `VLANEncap(VLAN_TCI [, VLAN_PCP], keywords VLAN_ID, NATIVE_VLAN, ETHERTYPE)` and
//! `VLANDecap([ANNO], keyword ETHERTYPE)`: insert or remove an 802.1Q tag after the
//! addresses of an Ethernet frame, as Click's elements of the same names. The VLAN TCI
//! annotation (bytes 20-21, network order) carries the tag's TCI between them.
//!
//! `SetVLANAnno(VLAN_TCI [, VLAN_PCP], keyword VLAN_ID)` sets that annotation, and
//! `EtherVLANEncap(ETHERTYPE, SRC, DST [, VLAN_TCI, VLAN_PCP], keywords VLAN_ID,
//! NATIVE_VLAN)` puts a whole 802.1Q Ethernet header in front of a packet (untagged for
//! the native VLAN), as Click's elements of the same names (also under Click's other
//! names, SetVlanAnno and EtherVlanEncap). Both read the TCI as VLANEncap does.

use super::shared::{lock, SharedSettings};
use crate::args::{uncomment, Args, EtherAddr, FromArg};
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

    /// These arguments with handler `name`'s argument set to `value`, as Click's
    /// reconfiguring handlers rebuild an element from its `config`; `None` if `name`
    /// is not one of them.
    fn rewritten(&self, name: &str, value: &str) -> Option<EncapArgs> {
        let mut next = self.clone();
        if matches!(name, "vlan_id" | "vlan_pcp") {
            // Click rebuilds from its `config`, `VLAN_ID n, VLAN_PCP p`: a TCI given
            // as such becomes its ID and priority, which the write then changes.
            if let Some(c) = self.resolve().ok().filter(|c| !c.anno) {
                next.tci = None;
                next.id = Some((c.tci & 0xfff).to_string());
                next.pcp = Some((c.tci >> 13).to_string());
            }
        }
        *field(&mut next, name)? = Some(uncomment(value).trim().to_string());
        Some(next)
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
        let next = args.rewritten(name, value)?;
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

/// The TCI of a TCI argument that may not be `ANNO` (SetVLANAnno's).
fn fixed_tci(a: &EncapArgs) -> Result<u16, String> {
    if a.tci.as_deref() == Some("ANNO") {
        return Err("VLAN_TCI expects integer from 0 to 65535".to_string());
    }
    a.resolve().map(|c| c.tci)
}

/// `SetVLANAnno` (and Click's other name for it, `SetVlanAnno`).
pub struct SetVLANAnnoClass {
    name: &'static str,
}

pub const SET_VLAN_ANNO: SetVLANAnnoClass = SetVLANAnnoClass { name: "SetVLANAnno" };
pub const SET_VLAN_ANNO_ALIAS: SetVLANAnnoClass = SetVLANAnnoClass { name: "SetVlanAnno" };

impl ElementClass for SetVLANAnnoClass {
    fn name(&self) -> &'static str {
        self.name
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
            ..EncapArgs::default()
        };
        args.finish().map_err(e)?;
        let tci = fixed_tci(&given).map_err(e)?;
        Ok(Arc::new(SetVLANAnnoSpec {
            tci: Arc::new(AtomicU64::new(u64::from(tci))),
            args: Mutex::new(given),
        }))
    }
}

struct SetVLANAnnoSpec {
    /// The TCI every worker sets (a u16; an atomic so handler writes reach them).
    tci: Arc<AtomicU64>,
    args: Mutex<EncapArgs>,
}

impl ElementSpec for SetVLANAnnoSpec {
    fn instantiate(&self, _w: WorkerInfo) -> Box<dyn Element> {
        Box::new(SetVLANAnno {
            tci: self.tci.clone(),
        })
    }
    fn handlers(&self) -> Vec<HandlerInfo> {
        // Click's reconfigure_keyword_handlers "VLAN_TCI", "VLAN_ID" and "VLAN_PCP".
        ["vlan_tci", "vlan_id", "vlan_pcp"]
            .into_iter()
            .map(|name| {
                let kw = ENCAP_HANDLERS.iter().find(|h| h.0 == name).map_or("", |h| h.1);
                HandlerInfo::read_write(name).reconfiguring(usize::MAX, kw)
            })
            .collect()
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        let tci = self.tci.load(Ordering::Relaxed) as u16;
        match name {
            "config" => Some(format!("VLAN_ID {}, VLAN_PCP {}", tci & 0xfff, tci >> 13)),
            "vlan_tci" => Some(tci.to_string()),
            // As Click reads them from its `config`.
            "vlan_id" => Some((tci & 0xfff).to_string()),
            "vlan_pcp" => Some((tci >> 13).to_string()),
            _ => None,
        }
    }
    fn write_handler(&self, name: &str, value: &str) -> Option<Result<(), String>> {
        if !matches!(name, "vlan_tci" | "vlan_id" | "vlan_pcp") {
            return None;
        }
        let mut args = lock(&self.args);
        let next = args.rewritten(name, value)?;
        Some(fixed_tci(&next).map(|tci| {
            self.tci.store(u64::from(tci), Ordering::Relaxed);
            *args = next;
        }))
    }
}

struct SetVLANAnno {
    tci: Arc<AtomicU64>,
}

impl Element for SetVLANAnno {
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, out: &mut Outputs<'_>, _cx: &mut Context<'_>) {
        let tci = (self.tci.load(Ordering::Relaxed) as u16).to_be_bytes();
        out.route_each(batch, |p| {
            p.set_user_anno(VLAN_TCI_ANNO_OFFSET, &tci);
            0
        });
    }
}

/// `EtherVLANEncap` (and Click's other name for it, `EtherVlanEncap`).
pub struct EtherVLANEncapClass {
    name: &'static str,
}

pub const ETHER_VLAN_ENCAP: EtherVLANEncapClass = EtherVLANEncapClass {
    name: "EtherVLANEncap",
};
pub const ETHER_VLAN_ENCAP_ALIAS: EtherVLANEncapClass = EtherVLANEncapClass {
    name: "EtherVlanEncap",
};

/// EtherVLANEncap's settings as the workers use them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct EtherVlan {
    dst: [u8; 6],
    src: [u8; 6],
    /// The encapsulated protocol (the type after the tag).
    ethertype: u16,
    /// TCI, ANNO and native VLAN (its `ethertype`, the tag's, is 802.1Q's).
    vlan: EncapConfig,
}

impl ElementClass for EtherVLANEncapClass {
    fn name(&self) -> &'static str {
        self.name
    }
    fn port_count(&self) -> PortCount {
        PortCount::parse("1/1")
    }
    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        let e = |m: String| cx.error(m);
        let ethertype = args.required::<u16>("ETHERTYPE").map_err(e)?;
        let src = args.required::<EtherAddr>("SRC").map_err(e)?.0;
        let dst = args.required::<EtherAddr>("DST").map_err(e)?.0;
        let text = |r: Result<Option<Text>, String>| r.map(|t| t.map(|t| t.0)).map_err(e);
        let given = EncapArgs {
            tci: text(args.positional::<Text>("VLAN_TCI"))?,
            pcp: text(args.positional::<Text>("VLAN_PCP"))?,
            id: text(args.keyword::<Text>("VLAN_ID"))?,
            native: text(args.keyword::<Text>("NATIVE_VLAN"))?,
            ethertype: None,
        };
        args.finish().map_err(e)?;
        let vlan = given.resolve().map_err(e)?;
        Ok(Arc::new(EtherVLANEncapSpec {
            settings: Arc::new(SharedSettings::new(EtherVlan {
                dst,
                src,
                ethertype,
                vlan,
            })),
            args: Mutex::new(given),
        }))
    }
}

struct EtherVLANEncapSpec {
    settings: Arc<SharedSettings<EtherVlan>>,
    /// The VLAN arguments as given, for the reconfiguring handlers.
    args: Mutex<EncapArgs>,
}

impl ElementSpec for EtherVLANEncapSpec {
    fn instantiate(&self, _w: WorkerInfo) -> Box<dyn Element> {
        let (generation, settings) = self.settings.snapshot();
        Box::new(EtherVLANEncap {
            shared: self.settings.clone(),
            generation,
            settings,
        })
    }
    fn handlers(&self) -> Vec<HandlerInfo> {
        vec![
            HandlerInfo::read_write("src"),
            HandlerInfo::read_write("dst"),
            HandlerInfo::read_write("ethertype"),
            // Click's reconfigure_keyword_handlers "3 VLAN_TCI", "VLAN_ID", "VLAN_PCP"
            // and "NATIVE_VLAN".
            HandlerInfo::read_write("vlan_tci").reconfiguring(3, "VLAN_TCI"),
            HandlerInfo::read_write("vlan_id").reconfiguring(usize::MAX, "VLAN_ID"),
            HandlerInfo::read_write("vlan_pcp").reconfiguring(usize::MAX, "VLAN_PCP"),
            HandlerInfo::read_write("native_vlan").reconfiguring(usize::MAX, "NATIVE_VLAN"),
        ]
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        let s = self.settings.read();
        let c = s.vlan;
        let native = match c.native {
            Some(0) => String::new(),
            Some(n) => n.to_string(),
            None => "-1".to_string(),
        };
        match name {
            // Click's EtherVLANEncap answers `config` with its settings.
            "config" => {
                let mut t = format!("{}, {}, {}", EtherAddr(s.src), EtherAddr(s.dst), s.ethertype);
                if c.anno {
                    t.push_str(", ANNO");
                } else {
                    t.push_str(&format!(", VLAN_ID {}, VLAN_PCP {}", c.tci & 0xfff, c.tci >> 13));
                }
                if !native.is_empty() {
                    t.push_str(&format!(", NATIVE_VLAN {}", native));
                }
                Some(t)
            }
            "src" => Some(EtherAddr(s.src).to_string()),
            "dst" => Some(EtherAddr(s.dst).to_string()),
            "ethertype" => Some(s.ethertype.to_string()),
            "vlan_tci" if c.anno => Some("ANNO".to_string()),
            "vlan_tci" => Some(c.tci.to_string()),
            // As Click reads them from its `config`.
            "vlan_id" | "vlan_pcp" if c.anno => Some(String::new()),
            "vlan_id" => Some((c.tci & 0xfff).to_string()),
            "vlan_pcp" => Some((c.tci >> 13).to_string()),
            "native_vlan" => Some(native),
            _ => None,
        }
    }
    fn write_handler(&self, name: &str, value: &str) -> Option<Result<(), String>> {
        let value = uncomment(value);
        let v = value.trim();
        let set = |f: &dyn Fn(&mut EtherVlan)| self.settings.write(|s| f(s));
        match name {
            "src" | "dst" => Some(match EtherAddr::from_arg(v) {
                Some(a) if name == "src" => {
                    set(&|s| s.src = a.0);
                    Ok(())
                }
                Some(a) => {
                    set(&|s| s.dst = a.0);
                    Ok(())
                }
                None => Err(format!("{} expects {}", name.to_uppercase(), EtherAddr::WHAT)),
            }),
            "ethertype" => Some(match u16::from_arg(v) {
                Some(t) => {
                    set(&|s| s.ethertype = t);
                    Ok(())
                }
                None => Err(format!("ETHERTYPE expects {}", u16::WHAT)),
            }),
            "vlan_tci" | "vlan_id" | "vlan_pcp" | "native_vlan" => {
                let mut args = lock(&self.args);
                let next = args.rewritten(name, v)?;
                Some(next.resolve().map(|c| {
                    set(&|s| s.vlan = c);
                    *args = next;
                }))
            }
            _ => None,
        }
    }
}

struct EtherVLANEncap {
    shared: Arc<SharedSettings<EtherVlan>>,
    /// This worker's copy of the settings, as of `generation`.
    generation: u64,
    settings: EtherVlan,
}

impl Element for EtherVLANEncap {
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, out: &mut Outputs<'_>, _cx: &mut Context<'_>) {
        if self.shared.generation() != self.generation {
            (self.generation, self.settings) = self.shared.snapshot();
        }
        let s = self.settings;
        let mut tagged = [0u8; ETHER_LEN + 4];
        tagged[0..6].copy_from_slice(&s.dst);
        tagged[6..12].copy_from_slice(&s.src);
        tagged[12..14].copy_from_slice(&ETHERTYPE_8021Q.to_be_bytes());
        tagged[16..18].copy_from_slice(&s.ethertype.to_be_bytes());
        out.route_each(batch, |p| {
            let tci = if s.vlan.anno {
                let a = &p.anno().user[VLAN_TCI_ANNO_OFFSET..VLAN_TCI_ANNO_OFFSET + 2];
                u16::from_be_bytes([a[0], a[1]])
            } else {
                s.vlan.tci
            };
            // The native VLAN's frames go untagged: a plain Ethernet header.
            let native = s.vlan.native == Some(tci & 0xfff);
            let n = if native { ETHER_LEN } else { ETHER_LEN + 4 };
            if !p.try_push(n) {
                return DROP;
            }
            let d = p.data_mut();
            if native {
                d[..12].copy_from_slice(&tagged[..12]);
                d[12..14].copy_from_slice(&s.ethertype.to_be_bytes());
            } else {
                d[..n].copy_from_slice(&tagged);
                d[14..16].copy_from_slice(&tci.to_be_bytes());
            }
            p.set_mac_header(0);
            0
        });
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

    #[test]
    fn click_ethervlanencap_testie() {
        // test/ethernet/EtherVlanEncap-01.testie, where our elements allow: the data
        // AA AB AC AD encapsulated as in its lines a, c, e and f.
        let data = [0xaa, 0xab, 0xac, 0xad];
        let hdr = |rest: &[u8]| [&[2, 2, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1][..], rest, &data[..]].concat();
        let run = |class: &EtherVLANEncapClass, config: &str, anno: Option<[u8; 2]>| {
            let mut h = Harness::new(class, config, 1, 1);
            let mut p = Packet::from_slice(&data);
            if let Some(a) = anno {
                p.set_user_anno(VLAN_TCI_ANNO_OFFSET, &a);
            }
            let out = h.push(0, vec![p]);
            out[0][0].data().to_vec()
        };
        // a: VLAN 1.
        assert_eq!(
            run(
                &ETHER_VLAN_ENCAP_ALIAS,
                "0x0800, 1:1:1:1:1:1, 2:2:2:2:2:2, 1",
                None
            ),
            hdr(&[0x81, 0x00, 0x00, 0x01, 0x08, 0x00])
        );
        // c: ANNO, after StripEtherVlanHeader left the TCI 1 in the annotation.
        assert_eq!(
            run(
                &ETHER_VLAN_ENCAP,
                "0x0800, 1:1:1:1:1:1, 2:2:2:2:2:2, ANNO",
                Some([0, 1])
            ),
            hdr(&[0x81, 0x00, 0x00, 0x01, 0x08, 0x00])
        );
        // e: the same with NATIVE_VLAN 1: untagged, 18 bytes.
        assert_eq!(
            run(
                &ETHER_VLAN_ENCAP,
                "0x0800, 1:1:1:1:1:1, 2:2:2:2:2:2, ANNO, NATIVE_VLAN 1",
                Some([0, 1])
            ),
            hdr(&[0x08, 0x00])
        );
        // f: SetVlanAnno(2, 1) sets TCI 2 with priority 1 (0x2002), not the native VLAN.
        let mut set = Harness::new(&SET_VLAN_ANNO_ALIAS, "2, 1", 1, 1);
        let p = set.push(0, vec![Packet::from_slice(&data)]).remove(0).remove(0);
        let mut h = Harness::new(
            &ETHER_VLAN_ENCAP,
            "0x0800, 1:1:1:1:1:1, 2:2:2:2:2:2, ANNO, NATIVE_VLAN 1",
            1,
            1,
        );
        let out = h.push(0, vec![p]);
        assert_eq!(out[0][0].data(), &hdr(&[0x81, 0x00, 0x20, 0x02, 0x08, 0x00])[..]);
        assert_eq!(out[0][0].mac_header_offset(), Some(0));
    }

    #[test]
    fn set_vlan_anno_sets_the_annotation_and_its_handlers() {
        let mut h = Harness::new(&SET_VLAN_ANNO, "VLAN_ID 100, VLAN_PCP 7", 1, 1);
        let out = h.push(0, vec![Packet::from_slice(&frame())]);
        assert_eq!(tci_anno(&out[0][0]), [0xe0, 0x64]);
        assert_eq!(out[0][0].data(), &frame()[..]);
        assert_eq!(h.read("config"), "VLAN_ID 100, VLAN_PCP 7");
        assert_eq!(h.read("vlan_tci"), "57444");
        h.write("vlan_id", "5").unwrap();
        assert_eq!(h.read("vlan_tci"), "57349");
        h.write("vlan_tci", "0x0123").unwrap();
        // The priority written before stays: 0x0123 | 7 << 13.
        assert_eq!(h.read("vlan_tci"), "57635");
        let out = h.push(0, vec![Packet::from_slice(&frame())]);
        assert_eq!(tci_anno(&out[0][0]), [0xe1, 0x23]);
        assert_eq!(
            h.write("vlan_tci", "ANNO"),
            Err("VLAN_TCI expects integer from 0 to 65535".to_string())
        );
        assert_eq!(h.read("vlan_pcp"), "7");
        let err = |c: &str| build_error(&SET_VLAN_ANNO, c, 1, 1);
        assert_eq!(
            err("ANNO"),
            "e :: SetVLANAnno: VLAN_TCI expects integer from 0 to 65535"
        );
        assert_eq!(
            err("1, 8"),
            "e :: SetVLANAnno: VLAN_PCP expects integer from 0 to 7"
        );
        assert_eq!(
            err("NATIVE_VLAN 1"),
            "e :: SetVLANAnno: bad keyword 'NATIVE_VLAN'"
        );
    }

    #[test]
    fn ether_vlan_encap_handlers_and_errors() {
        let mut h = Harness::new(
            &ETHER_VLAN_ENCAP,
            "0x86dd, 0:11:22:33:44:55, 66:77:88:99:aa:bb, 0x123, 5",
            1,
            1,
        );
        assert_eq!(
            h.read("config"),
            "00-11-22-33-44-55, 66-77-88-99-AA-BB, 34525, VLAN_ID 291, VLAN_PCP 5"
        );
        assert_eq!(h.read("vlan_tci"), "41251");
        h.write("dst", "0:0:0:0:0:1").unwrap();
        h.write("src", "0:0:0:0:0:2").unwrap();
        h.write("ethertype", "0x0800").unwrap();
        h.write("vlan_pcp", "0").unwrap();
        h.write("native_vlan", "-1").unwrap();
        let out = h.push(0, vec![Packet::from_slice(&[9])]);
        assert_eq!(
            out[0][0].data(),
            &[0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 2, 0x81, 0, 0x01, 0x23, 0x08, 0, 9][..]
        );
        assert_eq!(h.read("native_vlan"), "-1");
        assert_eq!(h.read("ethertype"), "2048");
        assert_eq!(
            h.write("src", "0:0:0"),
            Err("SRC expects Ethernet address".to_string())
        );
        assert_eq!(
            h.write("vlan_id", "4096"),
            Err("VLAN_ID expects integer from 0 to 4095".to_string())
        );
        let err = |c: &str| build_error(&ETHER_VLAN_ENCAP, c, 1, 1);
        assert_eq!(
            err("0x0800, 0:0:0:0:0:1"),
            "e :: EtherVLANEncap: missing mandatory DST argument"
        );
        assert_eq!(
            err("0x0800, 0:0:0:0:0:1, 0:0:0:0:0:2, 70000"),
            "e :: EtherVLANEncap: VLAN_TCI expects integer from 0 to 65535"
        );
        assert_eq!(
            err("0x0800, 0:0:0:0:0:1, 0:0:0:0:0:2, 1, NATIVE_VLAN 5000"),
            "e :: EtherVLANEncap: NATIVE_VLAN expects integer from -1 to 4095"
        );
    }
}
