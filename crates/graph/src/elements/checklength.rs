//! `CheckLength(LENGTH)`: packets no longer than LENGTH bytes go to output 0, longer
//! ones to output 1 (dropped when it is not connected), as Click's element of the same
//! name. Handler `length` reads and writes LENGTH.

use crate::args::{Args, FromArg};
use crate::element::*;
use crate::error::ConfigError;
use packet::PacketBatch;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

pub struct CheckLengthClass;

impl ElementClass for CheckLengthClass {
    fn name(&self) -> &'static str {
        "CheckLength"
    }
    fn port_count(&self) -> PortCount {
        PortCount::parse("1/1-2")
    }
    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        let e = |m: String| cx.error(m);
        let max = args.required::<u32>("LENGTH").map_err(e)?;
        args.finish().map_err(e)?;
        Ok(Arc::new(CheckLengthSpec {
            max: Arc::new(AtomicU32::new(max)),
        }))
    }
}

struct CheckLengthSpec {
    max: Arc<AtomicU32>,
}

impl ElementSpec for CheckLengthSpec {
    fn instantiate(&self, _w: WorkerInfo) -> Box<dyn Element> {
        Box::new(CheckLength {
            max: self.max.clone(),
        })
    }
    fn handlers(&self) -> Vec<HandlerInfo> {
        vec![HandlerInfo::read_write("length")]
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        (name == "length").then(|| self.max.load(Ordering::Relaxed).to_string())
    }
    fn write_handler(&self, name: &str, value: &str) -> Option<Result<(), String>> {
        (name == "length").then(|| match u32::from_arg(value.trim()) {
            Some(n) => {
                self.max.store(n, Ordering::Relaxed);
                Ok(())
            }
            None => Err(format!("expected {}", u32::WHAT)),
        })
    }
}

struct CheckLength {
    max: Arc<AtomicU32>,
}

impl Element for CheckLength {
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, out: &mut Outputs<'_>, _cx: &mut Context<'_>) {
        let max = self.max.load(Ordering::Relaxed) as usize;
        out.route_each(batch, |p| u8::from(p.len() > max));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{build_error, Harness};
    use packet::Packet;

    fn lengths(out: &[Packet]) -> Vec<usize> {
        out.iter().map(|p| p.len()).collect()
    }

    #[test]
    fn longer_packets_go_to_output_1() {
        let mut h = Harness::new(&CheckLengthClass, "3", 1, 2);
        let out = h.push(
            0,
            vec![
                Packet::from_slice(&[1, 2, 3, 4]),
                Packet::from_slice(&[1, 2, 3]),
                Packet::from_slice(&[]),
                Packet::from_slice(&[5; 100]),
            ],
        );
        assert_eq!(lengths(&out[0]), vec![3, 0]);
        assert_eq!(out[0][0].data(), &[1, 2, 3]);
        assert_eq!(lengths(&out[1]), vec![4, 100]);
        assert_eq!(out[1][0].data(), &[1, 2, 3, 4]);
    }

    #[test]
    fn without_output_1_they_are_dropped() {
        let mut h = Harness::new(&CheckLengthClass, "LENGTH 2", 1, 1);
        let out = h.push(
            0,
            vec![Packet::from_slice(&[1, 2, 3]), Packet::from_slice(&[9, 8])],
        );
        assert_eq!(out.len(), 1);
        assert_eq!(lengths(&out[0]), vec![2]);
        assert_eq!(out[0][0].data(), &[9, 8]);
    }

    #[test]
    fn length_handler() {
        let mut h = Harness::new(&CheckLengthClass, "2", 1, 2);
        assert_eq!(h.read("length"), "2");
        h.write("length", "4").unwrap();
        assert_eq!(h.read("length"), "4");
        let out = h.push(
            0,
            vec![Packet::from_slice(&[1, 2, 3, 4]), Packet::from_slice(&[0; 5])],
        );
        assert_eq!((lengths(&out[0]), lengths(&out[1])), (vec![4], vec![5]));
        assert_eq!(
            h.write("length", "big"),
            Err("expected unsigned integer".to_string())
        );
        assert_eq!(h.read("length"), "4");
    }

    #[test]
    fn config_errors() {
        assert_eq!(
            build_error(&CheckLengthClass, "", 1, 1),
            "e :: CheckLength: missing mandatory LENGTH argument"
        );
        assert_eq!(
            build_error(&CheckLengthClass, "1.5", 1, 1),
            "e :: CheckLength: LENGTH expects unsigned integer"
        );
        assert_eq!(
            build_error(&CheckLengthClass, "1, 2", 1, 1),
            "e :: CheckLength: too many arguments"
        );
    }
}
