//! `Truncate(LENGTH [, keyword EXTRA_LENGTH])`: shortens packets longer than LENGTH
//! bytes, as Click's element of the same name. With EXTRA_LENGTH (true by default) the
//! bytes removed are added to the extra length annotation. Handlers `length` and
//! `nbytes` (Click's name) read and write LENGTH.

use crate::args::{Args, FromArg};
use crate::element::*;
use crate::error::ConfigError;
use packet::{Packet, PacketBatch};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

pub struct TruncateClass;

impl ElementClass for TruncateClass {
    fn name(&self) -> &'static str {
        "Truncate"
    }
    fn port_count(&self) -> PortCount {
        PortCount::parse("1/1")
    }
    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        let e = |m: String| cx.error(m);
        let length = args.required::<u32>("LENGTH").map_err(e)?;
        let extra = args.keyword::<bool>("EXTRA_LENGTH").map_err(e)?.unwrap_or(true);
        args.finish().map_err(e)?;
        Ok(Arc::new(TruncateSpec {
            length: Arc::new(AtomicU32::new(length)),
            extra,
        }))
    }
}

struct TruncateSpec {
    /// LENGTH, which the handlers change while workers run.
    length: Arc<AtomicU32>,
    extra: bool,
}

impl ElementSpec for TruncateSpec {
    fn instantiate(&self, _w: WorkerInfo) -> Box<dyn Element> {
        Box::new(Truncate {
            length: self.length.clone(),
            extra: self.extra,
        })
    }
    fn handlers(&self) -> Vec<HandlerInfo> {
        vec![
            HandlerInfo::read_write("length"),
            HandlerInfo::read_write("nbytes"),
        ]
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        matches!(name, "length" | "nbytes").then(|| self.length.load(Ordering::Relaxed).to_string())
    }
    fn write_handler(&self, name: &str, value: &str) -> Option<Result<(), String>> {
        matches!(name, "length" | "nbytes").then(|| match u32::from_arg(value.trim()) {
            Some(n) => {
                self.length.store(n, Ordering::Relaxed);
                Ok(())
            }
            None => Err(format!("expected {}", u32::WHAT)),
        })
    }
}

struct Truncate {
    length: Arc<AtomicU32>,
    extra: bool,
}

#[inline(always)]
fn truncate(p: &mut Packet, max: usize, extra: bool) {
    let Some(cut) = p.len().checked_sub(max).filter(|&c| c > 0) else {
        return;
    };
    if extra {
        // Click's annotation is 32 bits and wraps.
        let a = p.anno().extra_length().wrapping_add(cut as u32);
        p.set_user_anno(packet::anno::EXTRA_LENGTH_ANNO_OFFSET, &a.to_ne_bytes());
    }
    p.take(cut);
}

impl Element for Truncate {
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, out: &mut Outputs<'_>, _cx: &mut Context<'_>) {
        let max = self.length.load(Ordering::Relaxed) as usize;
        let extra = self.extra;
        for p in batch.iter_mut() {
            truncate(p, max, extra);
        }
        out.push_batch(0, batch);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{build_error, Harness};

    #[test]
    fn shortens_long_packets_and_counts_the_bytes() {
        let mut h = Harness::new(&TruncateClass, "4", 1, 1);
        let mut long = Packet::from_slice(&[1, 2, 3, 4, 5, 6, 7]);
        long.anno_mut().set_extra_length(10);
        let out = h.push(
            0,
            vec![long, Packet::from_slice(&[1, 2, 3, 4]), Packet::from_slice(&[9])],
        );
        let got: Vec<(&[u8], u32)> = out[0]
            .iter()
            .map(|p| (p.data(), p.anno().extra_length()))
            .collect();
        assert_eq!(
            got,
            vec![(&[1u8, 2, 3, 4][..], 13), (&[1, 2, 3, 4][..], 0), (&[9][..], 0)]
        );
    }

    #[test]
    fn extra_length_false_leaves_the_annotation() {
        let mut h = Harness::new(&TruncateClass, "LENGTH 2, EXTRA_LENGTH false", 1, 1);
        let p = h.push_bytes(0, &[1, 2, 3, 4, 5]).remove(0).remove(0);
        assert_eq!(p.data(), &[1, 2]);
        assert_eq!(p.anno().extra_length(), 0);
        // Zero: every packet becomes empty.
        let mut h = Harness::new(&TruncateClass, "0", 1, 1);
        let p = h.push_bytes(0, &[1, 2, 3]).remove(0).remove(0);
        assert_eq!(p.len(), 0);
        assert_eq!(p.anno().extra_length(), 3);
    }

    #[test]
    fn the_annotation_wraps_at_32_bits() {
        let mut h = Harness::new(&TruncateClass, "1", 1, 1);
        let mut p = Packet::from_slice(&[1, 2, 3]);
        p.anno_mut().set_extra_length(u32::MAX);
        let p = h.push(0, vec![p]).remove(0).remove(0);
        assert_eq!(p.anno().extra_length(), 1);
    }

    #[test]
    fn handlers_read_and_write_length() {
        let mut h = Harness::new(&TruncateClass, "3", 1, 1);
        assert_eq!(h.read("length"), "3");
        assert_eq!(h.read("nbytes"), "3");
        h.write("length", "5\n").unwrap();
        assert_eq!(h.read("nbytes"), "5");
        assert_eq!(h.push_bytes(0, &[0; 9])[0][0].len(), 5);
        h.write("nbytes", "1").unwrap();
        assert_eq!(h.read("length"), "1");
        assert_eq!(h.push_bytes(0, &[0; 9])[0][0].len(), 1);
        assert_eq!(
            h.write("length", "-1"),
            Err("expected unsigned integer".to_string())
        );
        assert_eq!(h.read("length"), "1");
    }

    #[test]
    fn config_errors() {
        assert_eq!(
            build_error(&TruncateClass, "", 1, 1),
            "e :: Truncate: missing mandatory LENGTH argument"
        );
        assert_eq!(
            build_error(&TruncateClass, "ten", 1, 1),
            "e :: Truncate: LENGTH expects unsigned integer"
        );
        assert_eq!(
            build_error(&TruncateClass, "10, EXTRA_LENGTH maybe", 1, 1),
            "e :: Truncate: EXTRA_LENGTH expects bool"
        );
        assert_eq!(
            build_error(&TruncateClass, "10, true", 1, 1),
            "e :: Truncate: too many arguments"
        );
    }
}
