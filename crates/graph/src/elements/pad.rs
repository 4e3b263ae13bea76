//! `Pad([LENGTH, keyword ZERO])`: lengthens packets at the tail, as Click's element of
//! the same name. With LENGTH (non-zero) a shorter packet grows to LENGTH bytes;
//! without it, each packet grows by its extra length annotation. The annotation is 0
//! afterwards either way. With ZERO (true by default) the new bytes are zeros;
//! otherwise they are whatever the buffer held.
//!
//! A packet that padding would make longer than [`MAX_PADDED`] bytes is dropped and
//! counted in `drops` (read), rather than given a buffer of up to gigabytes because of
//! its annotation.

use crate::args::Args;
use crate::element::*;
use crate::error::ConfigError;
use packet::{Packet, PacketBatch};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The longest packet Pad makes: the largest IP datagram.
pub const MAX_PADDED: usize = 65_535;

pub struct PadClass;

impl ElementClass for PadClass {
    fn name(&self) -> &'static str {
        "Pad"
    }
    fn port_count(&self) -> PortCount {
        PortCount::parse("1/1")
    }
    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        let e = |m: String| cx.error(m);
        let length = args.positional::<u32>("LENGTH").map_err(e)?.unwrap_or(0);
        let zero = args.keyword::<bool>("ZERO").map_err(e)?.unwrap_or(true);
        args.finish().map_err(e)?;
        if length as usize > MAX_PADDED {
            return Err(cx.error(format!("LENGTH must be at most {}", MAX_PADDED)));
        }
        Ok(Arc::new(PadSpec {
            length: length as usize,
            zero,
            drops: Arc::new(AtomicU64::new(0)),
        }))
    }
}

struct PadSpec {
    length: usize,
    zero: bool,
    drops: Arc<AtomicU64>,
}

impl ElementSpec for PadSpec {
    fn instantiate(&self, _w: WorkerInfo) -> Box<dyn Element> {
        Box::new(Pad {
            length: self.length,
            zero: self.zero,
            drops: self.drops.clone(),
        })
    }
    fn handlers(&self) -> Vec<HandlerInfo> {
        vec![HandlerInfo::read("drops")]
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        (name == "drops").then(|| self.drops.load(Ordering::Relaxed).to_string())
    }
}

struct Pad {
    length: usize,
    zero: bool,
    drops: Arc<AtomicU64>,
}

impl Pad {
    /// Pads `p`; false if it is to be dropped.
    #[inline(always)]
    fn pad(&self, p: &mut Packet) -> bool {
        let len = p.len();
        let add = if self.length != 0 {
            self.length.saturating_sub(len)
        } else {
            p.anno().extra_length() as usize
        };
        if add > 0 {
            if len + add > MAX_PADDED || !p.try_put(add) {
                return false;
            }
            if self.zero {
                p.data_mut()[len..].fill(0);
            }
        }
        if p.anno().extra_length() != 0 {
            p.set_user_anno(packet::anno::EXTRA_LENGTH_ANNO_OFFSET, &[0; 4]);
        }
        true
    }
}

impl Element for Pad {
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, out: &mut Outputs<'_>, _cx: &mut Context<'_>) {
        let mut dropped = 0;
        out.route_each(batch, |p| {
            if self.pad(p) {
                0
            } else {
                dropped += 1;
                DROP
            }
        });
        if dropped > 0 {
            self.drops.fetch_add(dropped, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{build, build_error, Harness};

    fn with_extra(bytes: &[u8], extra: u32) -> Packet {
        let mut p = Packet::from_slice(bytes);
        p.anno_mut().set_extra_length(extra);
        p
    }

    #[test]
    fn pads_by_the_extra_length_annotation() {
        let mut h = Harness::new(&PadClass, "", 1, 1);
        let out = h.push(0, vec![with_extra(&[1, 2, 3], 4), with_extra(&[7], 0)]);
        assert_eq!(out[0][0].data(), &[1, 2, 3, 0, 0, 0, 0]);
        assert_eq!(out[0][0].anno().extra_length(), 0);
        assert_eq!(out[0][1].data(), &[7]);
        assert_eq!(h.read("drops"), "0");
    }

    #[test]
    fn pads_to_length_and_clears_the_annotation() {
        let mut h = Harness::new(&PadClass, "6", 1, 1);
        let out = h.push(
            0,
            vec![
                with_extra(&[1, 2], 100),
                Packet::from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]),
                Packet::from_slice(&[]),
            ],
        );
        assert_eq!(out[0][0].data(), &[1, 2, 0, 0, 0, 0]);
        assert_eq!(out[0][0].anno().extra_length(), 0);
        assert_eq!(out[0][1].data(), &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(out[0][2].data(), &[0; 6]);
    }

    #[test]
    fn zero_false_keeps_the_length_and_the_data() {
        let mut h = Harness::new(&PadClass, "LENGTH 60, ZERO false", 1, 1);
        let p = h.push_bytes(0, &[0xab; 14]).remove(0).remove(0);
        assert_eq!(p.len(), 60);
        assert_eq!(&p.data()[..14], &[0xab; 14]);
    }

    #[test]
    fn drops_what_would_grow_past_the_largest_datagram() {
        let mut h = Harness::new(&PadClass, "", 1, 1);
        let out = h.push(
            0,
            vec![
                with_extra(&[1], u32::MAX),
                with_extra(&[1, 2], 65_533),
                with_extra(&[1, 2], 65_534),
            ],
        );
        assert_eq!(out[0].len(), 1);
        assert_eq!(out[0][0].len(), 65_535);
        assert_eq!(&out[0][0].data()[..3], &[1, 2, 0]);
        assert_eq!(h.read("drops"), "2");
    }

    #[test]
    fn config_errors() {
        assert_eq!(
            build_error(&PadClass, "65536", 1, 1),
            "e :: Pad: LENGTH must be at most 65535"
        );
        assert!(build(&PadClass, "65535", 1, 1).is_ok());
        assert_eq!(
            build_error(&PadClass, "60, ZERO 2", 1, 1),
            "e :: Pad: ZERO expects bool"
        );
        assert_eq!(
            build_error(&PadClass, "60, true", 1, 1),
            "e :: Pad: too many arguments"
        );
        assert_eq!(
            build_error(&PadClass, "x", 1, 1),
            "e :: Pad: LENGTH expects unsigned integer"
        );
    }
}
