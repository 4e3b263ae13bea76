//! `EtherEncap(ETHERTYPE, SRC, DST)`, `EtherRewrite(SRC, DST)` and `EtherMirror`, as
//! Click's elements of the same names.

use crate::args::{Args, EtherAddr, FromArg};
use crate::element::*;
use crate::error::ConfigError;
use packet::PacketBatch;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

/// An Ethernet address in an atomic, so handler writes reach every worker.
struct AtomicEther(AtomicU64);

impl AtomicEther {
    fn new(a: EtherAddr) -> AtomicEther {
        AtomicEther(AtomicU64::new(Self::pack(a)))
    }
    fn pack(a: EtherAddr) -> u64 {
        let mut b = [0u8; 8];
        b[2..].copy_from_slice(&a.0);
        u64::from_be_bytes(b)
    }
    fn load(&self) -> EtherAddr {
        let b = self.0.load(Ordering::Relaxed).to_be_bytes();
        let mut a = [0u8; 6];
        a.copy_from_slice(&b[2..]);
        EtherAddr(a)
    }
    fn store(&self, a: EtherAddr) {
        self.0.store(Self::pack(a), Ordering::Relaxed);
    }
}

/// Parses a handler value as the configuration keyword `kw` would be parsed.
fn parse_value<T: FromArg>(kw: &str, value: &str) -> Result<T, String> {
    T::from_arg(value.trim()).ok_or_else(|| format!("{} expects {}", kw, T::WHAT))
}

pub struct EtherEncapClass;

impl ElementClass for EtherEncapClass {
    fn name(&self) -> &'static str {
        "EtherEncap"
    }
    fn port_count(&self) -> PortCount {
        PortCount::parse("1/1")
    }
    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        let ethertype = args.required::<u16>("ETHERTYPE").map_err(|e| cx.error(e))?;
        let src = args.required::<EtherAddr>("SRC").map_err(|e| cx.error(e))?;
        let dst = args.required::<EtherAddr>("DST").map_err(|e| cx.error(e))?;
        args.finish().map_err(|e| cx.error(e))?;
        Ok(Arc::new(EtherEncapSpec {
            hdr: Arc::new(Header {
                src: AtomicEther::new(src),
                dst: AtomicEther::new(dst),
                ethertype: AtomicU32::new(ethertype as u32),
                generation: AtomicU64::new(0),
            }),
        }))
    }
}

struct Header {
    src: AtomicEther,
    dst: AtomicEther,
    ethertype: AtomicU32,
    /// Bumped after every handler write, so workers rebuild their copy of the header
    /// bytes only when it changed (a compare per batch instead of three loads and the
    /// byte assembly).
    generation: AtomicU64,
}

impl Header {
    /// The header bytes and the generation they are at least as new as: the
    /// generation is read first, so a write that lands meanwhile shows up as a newer
    /// generation on the next batch.
    fn snapshot(&self) -> (u64, [u8; 14]) {
        let g = self.generation.load(Ordering::Acquire);
        (g, self.bytes())
    }

    /// Applies a handler write, then publishes it.
    fn write(&self, f: impl FnOnce(&Header)) {
        f(self);
        self.generation.fetch_add(1, Ordering::Release);
    }

    /// The 14 header bytes: destination, source, type in network order.
    fn bytes(&self) -> [u8; 14] {
        let mut h = [0u8; 14];
        h[0..6].copy_from_slice(&self.dst.load().0);
        h[6..12].copy_from_slice(&self.src.load().0);
        h[12..14].copy_from_slice(&(self.ethertype.load(Ordering::Relaxed) as u16).to_be_bytes());
        h
    }
}

struct EtherEncapSpec {
    hdr: Arc<Header>,
}

impl ElementSpec for EtherEncapSpec {
    fn instantiate(&self, _w: WorkerInfo) -> Box<dyn Element> {
        let (generation, bytes) = self.hdr.snapshot();
        Box::new(EtherEncap {
            hdr: self.hdr.clone(),
            bytes,
            generation,
        })
    }
    fn handlers(&self) -> Vec<HandlerInfo> {
        // Click's reconfigure_keyword_handlers "1 SRC", "2 DST" and "0 ETHERTYPE".
        vec![
            HandlerInfo::read_write("src").reconfiguring(1, "SRC"),
            HandlerInfo::read_write("dst").reconfiguring(2, "DST"),
            HandlerInfo::read_write("ethertype").reconfiguring(0, "ETHERTYPE"),
            HandlerInfo::read_write("etht").reconfiguring(0, "ETHERTYPE"),
        ]
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        match name {
            "src" => Some(self.hdr.src.load().to_string()),
            "dst" => Some(self.hdr.dst.load().to_string()),
            // Click prints the type in decimal (a network-order data handler).
            "ethertype" | "etht" => Some(self.hdr.ethertype.load(Ordering::Relaxed).to_string()),
            _ => None,
        }
    }
    fn write_handler(&self, name: &str, value: &str) -> Option<Result<(), String>> {
        let h = &self.hdr;
        match name {
            "src" => Some(parse_value("SRC", value).map(|a| h.write(|h| h.src.store(a)))),
            "dst" => Some(parse_value("DST", value).map(|a| h.write(|h| h.dst.store(a)))),
            "ethertype" | "etht" => Some(
                parse_value::<u16>("ETHERTYPE", value)
                    .map(|t| h.write(|h| h.ethertype.store(t as u32, Ordering::Relaxed))),
            ),
            _ => None,
        }
    }
}

struct EtherEncap {
    hdr: Arc<Header>,
    /// This worker's copy of the header bytes, as of `generation`.
    bytes: [u8; 14],
    generation: u64,
}

impl EtherEncap {
    #[cold]
    #[inline(never)]
    fn refresh(&mut self) {
        (self.generation, self.bytes) = self.hdr.snapshot();
    }
}

impl Element for EtherEncap {
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, out: &mut Outputs<'_>, _cx: &mut Context<'_>) {
        if self.hdr.generation.load(Ordering::Acquire) != self.generation {
            self.refresh();
        }
        let hdr = self.bytes;
        for p in batch.iter_mut() {
            // Click's push_mac_header: the MAC header is the new front.
            p.push_mac_header_bytes(&hdr);
        }
        out.push_batch(0, batch);
    }
}

pub struct EtherRewriteClass;

impl ElementClass for EtherRewriteClass {
    fn name(&self) -> &'static str {
        "EtherRewrite"
    }
    fn port_count(&self) -> PortCount {
        PortCount::parse("1/1")
    }
    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        let src = args.required::<EtherAddr>("SRC").map_err(|e| cx.error(e))?;
        let dst = args.required::<EtherAddr>("DST").map_err(|e| cx.error(e))?;
        args.finish().map_err(|e| cx.error(e))?;
        Ok(Arc::new(EtherRewriteSpec {
            addrs: Arc::new((AtomicEther::new(src), AtomicEther::new(dst))),
        }))
    }
}

struct EtherRewriteSpec {
    /// (source, destination)
    addrs: Arc<(AtomicEther, AtomicEther)>,
}

impl ElementSpec for EtherRewriteSpec {
    fn instantiate(&self, _w: WorkerInfo) -> Box<dyn Element> {
        Box::new(EtherRewrite {
            addrs: self.addrs.clone(),
        })
    }
    fn handlers(&self) -> Vec<HandlerInfo> {
        // Click declares these "1 SRC" and "2 DST", EtherEncap's positions, so that
        // writing `src` of an EtherRewrite configured by position replaces its DST
        // argument there; here each replaces its own argument.
        vec![
            HandlerInfo::read_write("src").reconfiguring(0, "SRC"),
            HandlerInfo::read_write("dst").reconfiguring(1, "DST"),
        ]
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        match name {
            "src" => Some(self.addrs.0.load().to_string()),
            "dst" => Some(self.addrs.1.load().to_string()),
            _ => None,
        }
    }
    fn write_handler(&self, name: &str, value: &str) -> Option<Result<(), String>> {
        match name {
            "src" => Some(parse_value("SRC", value).map(|a| self.addrs.0.store(a))),
            "dst" => Some(parse_value("DST", value).map(|a| self.addrs.1.store(a))),
            _ => None,
        }
    }
}

struct EtherRewrite {
    addrs: Arc<(AtomicEther, AtomicEther)>,
}

impl Element for EtherRewrite {
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, out: &mut Outputs<'_>, _cx: &mut Context<'_>) {
        let mut addrs = [0u8; 12];
        addrs[..6].copy_from_slice(&self.addrs.1.load().0);
        addrs[6..].copy_from_slice(&self.addrs.0.load().0);
        for p in batch.iter_mut() {
            // The MAC header if one is marked, else the packet's front (where sources
            // of Ethernet frames put it). Frames too short for the addresses pass
            // unchanged.
            let hdr = if p.mac_header_offset().is_some() {
                p.mac_header_mut()
            } else {
                Some(p.data_mut())
            };
            if let Some(h) = hdr.and_then(|h| h.get_mut(..12)) {
                h.copy_from_slice(&addrs);
            }
        }
        out.push_batch(0, batch);
    }
}

/// `EtherMirror`: swaps the source and destination addresses at the front of each
/// packet. Packets shorter than 12 bytes pass unchanged.
pub struct EtherMirrorClass;

impl ElementClass for EtherMirrorClass {
    fn name(&self) -> &'static str {
        "EtherMirror"
    }
    fn port_count(&self) -> PortCount {
        PortCount::parse("1/1")
    }
    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        args.finish().map_err(|e| cx.error(e))?;
        Ok(Arc::new(EtherMirrorSpec))
    }
}

struct EtherMirrorSpec;

impl ElementSpec for EtherMirrorSpec {
    fn instantiate(&self, _w: WorkerInfo) -> Box<dyn Element> {
        Box::new(EtherMirror)
    }
}

struct EtherMirror;

impl Element for EtherMirror {
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, out: &mut Outputs<'_>, _cx: &mut Context<'_>) {
        for p in batch.iter_mut() {
            if let Some(h) = p.data_mut().get_mut(..12) {
                let (d, s) = h.split_at_mut(6);
                d.swap_with_slice(s);
            }
        }
        out.push_batch(0, batch);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{build_error, Harness};
    use packet::Packet;

    const CONF: &str = "0x0800, 00:11:22:33:44:55, 66-77-88-99-AA-BB";

    #[test]
    fn encap_prepends_header_and_marks_mac() {
        let mut h = Harness::new(&EtherEncapClass, CONF, 1, 1);
        let out = h.push_bytes(0, &[0x45, 0x00]);
        let p = &out[0][0];
        assert_eq!(
            p.data(),
            &[
                0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x08, 0x00, 0x45,
                0x00
            ]
        );
        assert_eq!(p.mac_header_offset(), Some(0));
    }

    #[test]
    fn encap_uses_a_header_written_between_batches() {
        let mut h = Harness::new(&EtherEncapClass, CONF, 1, 1);
        let before = h.push_bytes(0, &[0x45]);
        assert_eq!(&before[0][0].data()[..6], &[0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb]);
        h.write("dst", "2:0:0:0:0:9").unwrap();
        let after = h.push_bytes(0, &[0x45]);
        assert_eq!(
            after[0][0].data(),
            &[2, 0, 0, 0, 0, 9, 0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x08, 0x00, 0x45]
        );
        h.write("etht", "0x0806").unwrap();
        h.write("src", "0:0:0:0:0:1").unwrap();
        let later = h.push_bytes(0, &[0x45]);
        assert_eq!(
            later[0][0].data(),
            &[2, 0, 0, 0, 0, 9, 0, 0, 0, 0, 0, 1, 0x08, 0x06, 0x45]
        );
        // A refused value changes nothing.
        assert!(h.write("src", "nonsense").is_err());
        assert_eq!(h.push_bytes(0, &[0x45])[0][0].data(), later[0][0].data());
    }

    #[test]
    fn encap_handlers() {
        let mut h = Harness::new(&EtherEncapClass, CONF, 1, 1);
        assert_eq!(h.read("src"), "00-11-22-33-44-55");
        assert_eq!(h.read("dst"), "66-77-88-99-AA-BB");
        assert_eq!(h.read("ethertype"), "2048");
        h.write("ethertype", "0x86DD").unwrap();
        h.write("src", "1:2:3:4:5:6").unwrap();
        h.write("dst", "ff:ff:ff:ff:ff:ff").unwrap();
        assert_eq!(h.read("ethertype"), "34525");
        assert_eq!(h.read("etht"), "34525");
        let out = h.push_bytes(0, &[]);
        assert_eq!(
            out[0][0].data(),
            &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 1, 2, 3, 4, 5, 6, 0x86, 0xdd]
        );
        assert_eq!(
            h.write("ethertype", "0x10000").unwrap_err(),
            "ETHERTYPE expects unsigned integer"
        );
        assert_eq!(
            h.write("src", "1:2:3").unwrap_err(),
            "SRC expects Ethernet address"
        );
        assert_eq!(h.read("src"), "01-02-03-04-05-06");
    }

    #[test]
    fn encap_bad_arguments() {
        assert_eq!(
            build_error(&EtherEncapClass, "IP, 0:1:2:3:4:5, 0:1:2:3:4:5", 1, 1),
            "e :: EtherEncap: ETHERTYPE expects unsigned integer"
        );
        assert_eq!(
            build_error(&EtherEncapClass, "0x0800, 0:1:2:3:4, 0:1:2:3:4:5", 1, 1),
            "e :: EtherEncap: SRC expects Ethernet address"
        );
        assert_eq!(
            build_error(&EtherEncapClass, "0x0800, 0:1:2:3:4:5", 1, 1),
            "e :: EtherEncap: missing mandatory DST argument"
        );
    }

    fn frame() -> Vec<u8> {
        let mut f = vec![
            0xd0, 0xd1, 0xd2, 0xd3, 0xd4, 0xd5, 0x50, 0x51, 0x52, 0x53, 0x54, 0x55,
        ];
        f.extend_from_slice(&[0x08, 0x06, 0xee]);
        f
    }

    #[test]
    fn rewrite_overwrites_addresses() {
        let mut h = Harness::new(
            &EtherRewriteClass,
            "SRC 00:11:22:33:44:55, DST 66:77:88:99:aa:bb",
            1,
            1,
        );
        let out = h.push_bytes(0, &frame());
        assert_eq!(
            out[0][0].data(),
            &[0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x08, 0x06, 0xee]
        );
        // A marked MAC header before the data start is rewritten in place.
        let mut p = Packet::from_slice(&frame());
        p.set_mac_header(0);
        p.pull(14);
        let out = h.push(0, vec![p]);
        assert_eq!(out[0][0].data(), &[0xee]);
        assert_eq!(
            &out[0][0].mac_header().unwrap()[..6],
            &[0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb]
        );
        // Too short: unchanged.
        let out = h.push_bytes(0, &[1, 2, 3]);
        assert_eq!(out[0][0].data(), &[1, 2, 3]);
        assert_eq!(h.read("dst"), "66-77-88-99-AA-BB");
        h.write("src", "0:0:0:0:0:1").unwrap();
        assert_eq!(h.read("src"), "00-00-00-00-00-01");
        assert_eq!(
            build_error(&EtherRewriteClass, "0:1:2:3:4:5, zz:1:2:3:4:5", 1, 1),
            "e :: EtherRewrite: DST expects Ethernet address"
        );
    }

    #[test]
    fn mirror_swaps_addresses() {
        let mut h = Harness::new(&EtherMirrorClass, "", 1, 1);
        let out = h.push_bytes(0, &frame());
        assert_eq!(
            out[0][0].data(),
            &[0x50, 0x51, 0x52, 0x53, 0x54, 0x55, 0xd0, 0xd1, 0xd2, 0xd3, 0xd4, 0xd5, 0x08, 0x06, 0xee]
        );
        let out = h.push_bytes(0, &[1, 2]);
        assert_eq!(out[0][0].data(), &[1, 2]);
    }
}
