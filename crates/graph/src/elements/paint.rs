//! `Paint(COLOR [, ANNO])` sets a one-byte annotation (the paint annotation by
//! default); `PaintSwitch([ANNO])` sends each packet to the output its paint names,
//! as Click's elements of the same names.

use crate::args::{Args, FromArg};
use crate::element::*;
use crate::error::ConfigError;
use packet::anno::{ANNO_SIZE, FIX_IP_SRC_ANNO_OFFSET, ICMP_PARAMPROB_ANNO_OFFSET, PAINT_ANNO_OFFSET};
use packet::PacketBatch;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

/// A one-byte annotation: its Click name or its byte offset (Click's `AnnoArg(1)`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Anno1(pub usize);

impl FromArg for Anno1 {
    const WHAT: &'static str = "annotation";
    fn from_arg(s: &str) -> Option<Self> {
        let s = s.trim();
        let off = match s {
            "PAINT" => PAINT_ANNO_OFFSET,
            "ICMP_PARAMPROB" => ICMP_PARAMPROB_ANNO_OFFSET,
            "FIX_IP_SRC" => FIX_IP_SRC_ANNO_OFFSET,
            _ => usize::from_arg(s)?,
        };
        (off < ANNO_SIZE).then_some(Anno1(off))
    }
}

pub struct PaintClass;

impl ElementClass for PaintClass {
    fn name(&self) -> &'static str {
        "Paint"
    }
    fn port_count(&self) -> PortCount {
        PortCount::parse("1/1")
    }
    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        let color = args.required::<u8>("COLOR").map_err(|e| cx.error(e))?;
        let anno = args
            .positional::<Anno1>("ANNO")
            .map_err(|e| cx.error(e))?
            .unwrap_or(Anno1(PAINT_ANNO_OFFSET));
        args.finish().map_err(|e| cx.error(e))?;
        Ok(Arc::new(PaintSpec {
            color: Arc::new(AtomicU8::new(color)),
            anno: anno.0,
        }))
    }
}

struct PaintSpec {
    /// Shared so a write to the `color` handler reaches every worker.
    color: Arc<AtomicU8>,
    anno: usize,
}

impl ElementSpec for PaintSpec {
    fn instantiate(&self, _w: WorkerInfo) -> Box<dyn Element> {
        Box::new(Paint {
            color: self.color.clone(),
            anno: self.anno,
        })
    }
    fn handlers(&self) -> Vec<HandlerInfo> {
        vec![HandlerInfo::read_write("color")]
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        (name == "color").then(|| self.color.load(Ordering::Relaxed).to_string())
    }
    fn write_handler(&self, name: &str, value: &str) -> Option<Result<(), String>> {
        (name == "color").then(|| match u8::from_arg(value) {
            Some(c) => {
                self.color.store(c, Ordering::Relaxed);
                Ok(())
            }
            None => Err("expected uint8_t".to_string()),
        })
    }
}

struct Paint {
    color: Arc<AtomicU8>,
    anno: usize,
}

impl Element for Paint {
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, out: &mut Outputs<'_>, _cx: &mut Context<'_>) {
        let color = self.color.load(Ordering::Relaxed);
        for p in batch.iter_mut() {
            p.set_user_anno(self.anno, &[color]);
        }
        out.push_batch(0, batch);
    }
}

pub struct PaintSwitchClass;

impl ElementClass for PaintSwitchClass {
    fn name(&self) -> &'static str {
        "PaintSwitch"
    }
    fn port_count(&self) -> PortCount {
        PortCount::parse("1/-")
    }
    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        let anno = args
            .positional::<Anno1>("ANNO")
            .map_err(|e| cx.error(e))?
            .unwrap_or(Anno1(PAINT_ANNO_OFFSET));
        args.finish().map_err(|e| cx.error(e))?;
        Ok(Arc::new(PaintSwitchSpec { anno: anno.0 }))
    }
}

struct PaintSwitchSpec {
    anno: usize,
}

impl ElementSpec for PaintSwitchSpec {
    fn instantiate(&self, _w: WorkerInfo) -> Box<dyn Element> {
        Box::new(PaintSwitch { anno: self.anno })
    }
}

struct PaintSwitch {
    anno: usize,
}

impl Element for PaintSwitch {
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, out: &mut Outputs<'_>, _cx: &mut Context<'_>) {
        let n = out.len();
        for p in batch.drain() {
            let port = p.anno().u8_at(self.anno) as usize;
            if port != 0xff {
                // A paint with no matching output is dropped (`Outputs::push`).
                out.push(port, p);
            } else if n > 0 {
                // Paint 255: a copy to every output, the original to the last.
                for i in 0..n - 1 {
                    out.push(i, p.clone());
                }
                out.push(n - 1, p);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{build_error, Harness};
    use packet::Packet;

    fn painted(data: &[u8], off: usize, color: u8) -> Packet {
        let mut p = Packet::from_slice(data);
        p.anno_mut().set_u8_at(off, color);
        p
    }

    #[test]
    fn paint_sets_annotation() {
        let mut h = Harness::new(&PaintClass, "7", 1, 1);
        let out = h.push_bytes(0, &[1, 2, 3]);
        assert_eq!(out[0][0].anno().paint(), 7);
        assert_eq!(out[0][0].data(), &[1, 2, 3]);
        assert_eq!(h.read("color"), "7");
        h.write("color", "9").unwrap();
        let out = h.push_bytes(0, &[1]);
        assert_eq!(out[0][0].anno().paint(), 9);
        assert_eq!(h.write("color", "256").unwrap_err(), "expected uint8_t");

        let mut h = Harness::new(&PaintClass, "COLOR 3, ANNO 40", 1, 1);
        let out = h.push_bytes(0, &[1]);
        assert_eq!(out[0][0].anno().u8_at(40), 3);
        assert_eq!(out[0][0].anno().paint(), 0);
    }

    #[test]
    fn paint_switch_routes_by_paint() {
        let mut h = Harness::new(&PaintSwitchClass, "", 1, 3);
        let out = h.push(
            0,
            vec![
                painted(&[0], PAINT_ANNO_OFFSET, 2),
                painted(&[1], PAINT_ANNO_OFFSET, 0),
                painted(&[2], PAINT_ANNO_OFFSET, 5),
                painted(&[3], PAINT_ANNO_OFFSET, 255),
                painted(&[4], PAINT_ANNO_OFFSET, 2),
            ],
        );
        let bytes = |v: &Vec<Packet>| v.iter().map(|p| p.data()[0]).collect::<Vec<u8>>();
        assert_eq!(bytes(&out[0]), vec![1, 3]);
        assert_eq!(bytes(&out[1]), vec![3]);
        assert_eq!(bytes(&out[2]), vec![0, 3, 4]);

        let mut h = Harness::new(&PaintSwitchClass, "ANNO 20", 1, 2);
        let out = h.push(0, vec![painted(&[9], 20, 1)]);
        assert_eq!(out[1].len(), 1);
        assert!(out[0].is_empty());
    }

    #[test]
    fn bad_arguments() {
        assert_eq!(
            build_error(&PaintClass, "", 1, 1),
            "e :: Paint: missing mandatory COLOR argument"
        );
        assert_eq!(
            build_error(&PaintClass, "300", 1, 1),
            "e :: Paint: COLOR expects unsigned integer"
        );
        assert_eq!(
            build_error(&PaintClass, "1, 48", 1, 1),
            "e :: Paint: ANNO expects annotation"
        );
        assert_eq!(
            build_error(&PaintSwitchClass, "BOGUS", 1, 1),
            "e :: PaintSwitch: ANNO expects annotation"
        );
    }
}
