//! `Paint(COLOR [, ANNO])` sets a one-byte annotation (the paint annotation by
//! default); `PaintSwitch([ANNO])` sends each packet to the output its paint names;
//! `PaintTee(COLOR [, ANNO])` also sends a copy of each packet painted COLOR to output
//! 1; `CheckPaint(COLOR [, ANNO])` sends packets not painted COLOR to output 1 (or
//! drops them), as Click's elements of the same names.

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

/// The COLOR of Paint, PaintTee and CheckPaint, behind their read/write `color`
/// handler: shared so a write reaches every worker, loaded once per batch.
#[derive(Clone)]
struct SharedColor(Arc<AtomicU8>);

impl SharedColor {
    fn get(&self) -> u8 {
        self.0.load(Ordering::Relaxed)
    }

    fn handlers() -> Vec<HandlerInfo> {
        vec![HandlerInfo::read_write("color")]
    }

    fn read_handler(&self, name: &str) -> Option<String> {
        (name == "color").then(|| self.get().to_string())
    }

    fn write_handler(&self, name: &str, value: &str) -> Option<Result<(), String>> {
        (name == "color").then(|| match u8::from_arg(value) {
            Some(c) => {
                self.0.store(c, Ordering::Relaxed);
                Ok(())
            }
            None => Err("expected uint8_t".to_string()),
        })
    }
}

/// Parses `COLOR [, ANNO]`, the arguments of Paint, PaintTee and CheckPaint.
fn color_and_anno(args: &mut Args, cx: &BuildContext) -> Result<(SharedColor, usize), ConfigError> {
    let color = args.required::<u8>("COLOR").map_err(|e| cx.error(e))?;
    let anno = args
        .positional::<Anno1>("ANNO")
        .map_err(|e| cx.error(e))?
        .unwrap_or(Anno1(PAINT_ANNO_OFFSET));
    args.finish().map_err(|e| cx.error(e))?;
    Ok((SharedColor(Arc::new(AtomicU8::new(color))), anno.0))
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
        let (color, anno) = color_and_anno(args, cx)?;
        Ok(Arc::new(PaintSpec { color, anno }))
    }
}

struct PaintSpec {
    color: SharedColor,
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
        SharedColor::handlers()
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        self.color.read_handler(name)
    }
    fn write_handler(&self, name: &str, value: &str) -> Option<Result<(), String>> {
        self.color.write_handler(name, value)
    }
}

struct Paint {
    color: SharedColor,
    anno: usize,
}

impl Element for Paint {
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, out: &mut Outputs<'_>, _cx: &mut Context<'_>) {
        let color = self.color.get();
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

pub struct PaintTeeClass;

impl ElementClass for PaintTeeClass {
    fn name(&self) -> &'static str {
        "PaintTee"
    }
    fn port_count(&self) -> PortCount {
        PortCount::parse("1/2")
    }
    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        let (color, anno) = color_and_anno(args, cx)?;
        Ok(Arc::new(PaintMatchSpec {
            m: PaintMatch { color, anno },
            tee: true,
        }))
    }
}

/// What PaintTee and CheckPaint compare: annotation byte `anno` against `color`.
#[derive(Clone)]
struct PaintMatch {
    color: SharedColor,
    anno: usize,
}

/// PaintTee or CheckPaint, configured: the match, and which of the two it is.
struct PaintMatchSpec {
    m: PaintMatch,
    tee: bool,
}

impl ElementSpec for PaintMatchSpec {
    fn instantiate(&self, _w: WorkerInfo) -> Box<dyn Element> {
        if self.tee {
            Box::new(PaintTee(self.m.clone()))
        } else {
            Box::new(CheckPaint(self.m.clone()))
        }
    }
    fn handlers(&self) -> Vec<HandlerInfo> {
        SharedColor::handlers()
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        self.m.color.read_handler(name)
    }
    fn write_handler(&self, name: &str, value: &str) -> Option<Result<(), String>> {
        self.m.color.write_handler(name, value)
    }
}

struct PaintTee(PaintMatch);

impl Element for PaintTee {
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, out: &mut Outputs<'_>, _cx: &mut Context<'_>) {
        let color = self.0.color.get();
        let anno = self.0.anno;
        // The copy is the one that leaves: the original goes on along the main path
        // with the rest of the batch, untouched.
        for p in batch.iter().filter(|p| p.anno().u8_at(anno) == color) {
            out.push(1, p.clone());
        }
        out.push_batch(0, batch);
    }
}

pub struct CheckPaintClass;

impl ElementClass for CheckPaintClass {
    fn name(&self) -> &'static str {
        "CheckPaint"
    }
    fn port_count(&self) -> PortCount {
        PortCount::parse("1/1-2")
    }
    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        let (color, anno) = color_and_anno(args, cx)?;
        Ok(Arc::new(PaintMatchSpec {
            m: PaintMatch { color, anno },
            tee: false,
        }))
    }
}

struct CheckPaint(PaintMatch);

impl Element for CheckPaint {
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, out: &mut Outputs<'_>, _cx: &mut Context<'_>) {
        let color = self.0.color.get();
        let anno = self.0.anno;
        // Output 1 missing: `route_each` drops what goes there.
        out.route_each(batch, |p| u8::from(p.anno().u8_at(anno) != color));
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

    fn data_and_paint(v: &[Packet], off: usize) -> Vec<(u8, u8)> {
        v.iter().map(|p| (p.data()[0], p.anno().u8_at(off))).collect()
    }

    #[test]
    fn paint_tee_sends_all_on_0_and_copies_of_matching_on_1() {
        let mut h = Harness::new(&PaintTeeClass, "7", 1, 2);
        let mut first = painted(&[0, 0xaa], PAINT_ANNO_OFFSET, 7);
        first.set_network_header(1, 1);
        let out = h.push(
            0,
            vec![
                first,
                painted(&[1, 0xbb], PAINT_ANNO_OFFSET, 3),
                painted(&[2, 0xcc], PAINT_ANNO_OFFSET, 7),
            ],
        );
        assert_eq!(
            data_and_paint(&out[0], PAINT_ANNO_OFFSET),
            vec![(0, 7), (1, 3), (2, 7)]
        );
        assert_eq!(data_and_paint(&out[1], PAINT_ANNO_OFFSET), vec![(0, 7), (2, 7)]);
        // The copy is whole: all bytes and the header annotations.
        assert_eq!(out[1][0].data(), &[0, 0xaa]);
        assert_eq!(out[1][0].network_header(), Some(&[0xaa][..]));
        assert_eq!(out[1][1].data(), &[2, 0xcc]);
        assert_eq!(out[0][1].data(), &[1, 0xbb]);

        assert_eq!(h.read("color"), "7");
        h.write("color", "3").unwrap();
        let out = h.push(
            0,
            vec![
                painted(&[4], PAINT_ANNO_OFFSET, 7),
                painted(&[5], PAINT_ANNO_OFFSET, 3),
            ],
        );
        assert_eq!(data_and_paint(&out[0], PAINT_ANNO_OFFSET), vec![(4, 7), (5, 3)]);
        assert_eq!(data_and_paint(&out[1], PAINT_ANNO_OFFSET), vec![(5, 3)]);
        assert_eq!(h.write("color", "-1").unwrap_err(), "expected uint8_t");
        assert_eq!(h.read("color"), "3");
    }

    #[test]
    fn paint_tee_reads_the_annotation_it_is_given() {
        let mut h = Harness::new(&PaintTeeClass, "COLOR 9, ANNO 40", 1, 2);
        let out = h.push(0, vec![painted(&[1], PAINT_ANNO_OFFSET, 9), painted(&[2], 40, 9)]);
        assert_eq!(out[0].len(), 2);
        assert_eq!(data_and_paint(&out[1], 40), vec![(2, 9)]);

        let mut h = Harness::new(&PaintTeeClass, "0", 1, 2);
        // Nothing painted: paint 0 matches every fresh packet.
        let out = h.push_bytes(0, &[8]);
        assert_eq!((out[0].len(), out[1].len()), (1, 1));
    }

    #[test]
    fn check_paint_splits_by_paint() {
        let mut h = Harness::new(&CheckPaintClass, "2", 1, 2);
        let out = h.push(
            0,
            vec![
                painted(&[0], PAINT_ANNO_OFFSET, 2),
                painted(&[1], PAINT_ANNO_OFFSET, 1),
                painted(&[2], PAINT_ANNO_OFFSET, 2),
                painted(&[3], PAINT_ANNO_OFFSET, 255),
            ],
        );
        assert_eq!(data_and_paint(&out[0], PAINT_ANNO_OFFSET), vec![(0, 2), (2, 2)]);
        assert_eq!(data_and_paint(&out[1], PAINT_ANNO_OFFSET), vec![(1, 1), (3, 255)]);
        // No copies: every packet comes out once.
        assert_eq!(out[0].len() + out[1].len(), 4);

        h.write("color", "1").unwrap();
        assert_eq!(h.read("color"), "1");
        let out = h.push(0, vec![painted(&[5], PAINT_ANNO_OFFSET, 1)]);
        assert_eq!((out[0].len(), out[1].len()), (1, 0));

        // Without output 1 the others are dropped.
        let mut h = Harness::new(&CheckPaintClass, "4, FIX_IP_SRC", 1, 1);
        let out = h.push(
            0,
            vec![
                painted(&[6], FIX_IP_SRC_ANNO_OFFSET, 4),
                painted(&[7], PAINT_ANNO_OFFSET, 4),
            ],
        );
        assert_eq!(data_and_paint(&out[0], FIX_IP_SRC_ANNO_OFFSET), vec![(6, 4)]);
    }

    #[test]
    fn paint_tee_and_check_paint_bad_arguments() {
        assert_eq!(
            build_error(&PaintTeeClass, "", 1, 2),
            "e :: PaintTee: missing mandatory COLOR argument"
        );
        assert_eq!(
            build_error(&PaintTeeClass, "256", 1, 2),
            "e :: PaintTee: COLOR expects unsigned integer"
        );
        assert_eq!(
            build_error(&PaintTeeClass, "1, PAINT, 3", 1, 2),
            "e :: PaintTee: too many arguments"
        );
        assert_eq!(
            build_error(&CheckPaintClass, "1, ICMP", 1, 2),
            "e :: CheckPaint: ANNO expects annotation"
        );
        assert_eq!(
            build_error(&CheckPaintClass, "1, COLOUR 2", 1, 2),
            "e :: CheckPaint: bad keyword 'COLOUR'"
        );
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
