//! `SetIPAddress(IPADDR [, ANNO])`: sets an IP address annotation (the destination IP
//! annotation by default) to a fixed address; handler `addr` reads and writes it.

use super::{ip_text, Anno4};
use crate::args::{Args, FromArg};
use crate::element::*;
use crate::error::ConfigError;
use packet::PacketBatch;
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

pub struct SetIPAddressClass;

impl ElementClass for SetIPAddressClass {
    fn name(&self) -> &'static str {
        "SetIPAddress"
    }
    fn port_count(&self) -> PortCount {
        PortCount::parse("1/1")
    }
    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        let e = |m: String| cx.error(m);
        let ip = args.required::<Ipv4Addr>("IPADDR").map_err(e)?;
        let anno = args.keyword::<Anno4>("ANNO").map_err(e)?;
        args.finish().map_err(e)?;
        Ok(Arc::new(SetIPAddressSpec {
            addr: Arc::new(AtomicU32::new(u32::from_ne_bytes(ip.octets()))),
            anno: anno.map_or(packet::anno::DST_IP_ANNO_OFFSET, |a| a.0),
        }))
    }
}

struct SetIPAddressSpec {
    /// The address bytes in network order, packed into a u32 (native order) so the
    /// `addr` write handler can change it while workers run.
    addr: Arc<AtomicU32>,
    anno: usize,
}

impl ElementSpec for SetIPAddressSpec {
    fn instantiate(&self, _w: WorkerInfo) -> Box<dyn Element> {
        Box::new(SetIPAddress {
            addr: self.addr.clone(),
            anno: self.anno,
        })
    }
    fn handlers(&self) -> Vec<HandlerInfo> {
        vec![HandlerInfo::read_write("addr")]
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        (name == "addr").then(|| ip_text(self.addr.load(Ordering::Relaxed).to_ne_bytes()))
    }
    fn write_handler(&self, name: &str, value: &str) -> Option<Result<(), String>> {
        (name == "addr").then(|| match Ipv4Addr::from_arg(value) {
            Some(a) => {
                self.addr.store(u32::from_ne_bytes(a.octets()), Ordering::Relaxed);
                Ok(())
            }
            None => Err(format!("expected {}", Ipv4Addr::WHAT)),
        })
    }
}

struct SetIPAddress {
    addr: Arc<AtomicU32>,
    anno: usize,
}

impl Element for SetIPAddress {
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, out: &mut Outputs<'_>, _cx: &mut Context<'_>) {
        let a = self.addr.load(Ordering::Relaxed).to_ne_bytes();
        for p in batch.iter_mut() {
            p.set_user_anno(self.anno, &a);
        }
        out.push_batch(0, batch);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{build_error, Harness};

    #[test]
    fn sets_dst_ip_and_handler() {
        let mut h = Harness::new(&SetIPAddressClass, "10.0.0.9", 1, 1);
        let out = h.push_bytes(0, &[1, 2, 3]);
        assert_eq!(out[0][0].anno().dst_ip(), [10, 0, 0, 9]);
        assert_eq!(out[0][0].data(), &[1, 2, 3]);
        assert_eq!(h.read("addr"), "10.0.0.9");
        h.write("addr", "1.2.3.4").unwrap();
        assert_eq!(h.read("addr"), "1.2.3.4");
        assert_eq!(h.push_bytes(0, &[0])[0][0].anno().dst_ip(), [1, 2, 3, 4]);
        assert_eq!(h.write("addr", "bogus"), Err("expected IP address".to_string()));
    }

    #[test]
    fn other_annotation() {
        let mut h = Harness::new(&SetIPAddressClass, "IPADDR 192.168.0.1, ANNO 32", 1, 1);
        let p = &h.push_bytes(0, &[0])[0][0];
        assert_eq!(&p.anno().user[32..36], &[192, 168, 0, 1]);
        assert_eq!(p.anno().dst_ip(), [0, 0, 0, 0]);
    }

    #[test]
    fn config_errors() {
        assert_eq!(
            build_error(&SetIPAddressClass, "", 1, 1),
            "e :: SetIPAddress: missing mandatory IPADDR argument"
        );
        assert_eq!(
            build_error(&SetIPAddressClass, "1.2.3", 1, 1),
            "e :: SetIPAddress: IPADDR expects IP address"
        );
        assert_eq!(
            build_error(&SetIPAddressClass, "1.2.3.4, 16", 1, 1),
            "e :: SetIPAddress: too many arguments"
        );
    }
}
