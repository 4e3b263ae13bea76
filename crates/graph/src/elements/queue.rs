//! `Queue([CAPACITY])`, `SimpleQueue` and `ThreadSafeQueue`.
//!
//! brickroute runs every path in push mode to completion, as FastClick does, so a
//! queue stores nothing: packets pass straight from its input to output 0 and the
//! push-to-pull idiom `... -> Queue -> ToDump(...)` works unchanged. Its handlers
//! answer as Click's SimpleQueue does for a queue that never holds a packet: `length`,
//! `highwater_length` and `drops` are 0, `capacity` is the configured capacity (1000 by
//! default). Output 1, where Click sends overflow drops, never receives a packet.

use crate::args::{Args, FromArg};
use crate::element::*;
use crate::error::ConfigError;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

pub struct QueueClass {
    name: &'static str,
}

impl QueueClass {
    pub const QUEUE: QueueClass = QueueClass { name: "Queue" };
    pub const SIMPLE: QueueClass = QueueClass { name: "SimpleQueue" };
    pub const THREAD_SAFE: QueueClass = QueueClass {
        name: "ThreadSafeQueue",
    };
}

impl ElementClass for QueueClass {
    fn name(&self) -> &'static str {
        self.name
    }
    fn port_count(&self) -> PortCount {
        PortCount::parse("1/1-2")
    }
    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        let capacity = args
            .positional::<u32>("CAPACITY")
            .map_err(|e| cx.error(e))?
            .unwrap_or(1000);
        args.finish().map_err(|e| cx.error(e))?;
        Ok(Arc::new(QueueSpec {
            capacity: AtomicU32::new(capacity),
        }))
    }
}

struct QueueSpec {
    capacity: AtomicU32,
}

impl ElementSpec for QueueSpec {
    fn instantiate(&self, _w: WorkerInfo) -> Box<dyn Element> {
        Box::new(super::null::PassThrough)
    }
    fn is_pass_through(&self) -> bool {
        true
    }
    fn handlers(&self) -> Vec<HandlerInfo> {
        vec![
            HandlerInfo::read("length"),
            HandlerInfo::read("highwater_length"),
            // Click: reconfigure_keyword_handler "0 CAPACITY".
            HandlerInfo::read_write("capacity").reconfiguring(0, "CAPACITY"),
            HandlerInfo::read("drops"),
            HandlerInfo::write("reset_counts"),
            HandlerInfo::write("reset"),
        ]
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        match name {
            "length" | "highwater_length" | "drops" => Some("0".to_string()),
            "capacity" => Some(self.capacity.load(Ordering::Relaxed).to_string()),
            _ => None,
        }
    }
    fn write_handler(&self, name: &str, value: &str) -> Option<Result<(), String>> {
        match name {
            "capacity" => Some(match u32::from_arg(value) {
                Some(c) => {
                    self.capacity.store(c, Ordering::Relaxed);
                    Ok(())
                }
                None => Err(format!("CAPACITY expects {}", u32::WHAT)),
            }),
            // Nothing is ever held or dropped: there is nothing to reset.
            "reset_counts" | "reset" => Some(Ok(())),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{build_error, Harness};
    use packet::Packet;

    #[test]
    fn passes_packets_through_in_order() {
        let mut h = Harness::new(&QueueClass::QUEUE, "", 1, 1);
        let out = h.push(0, vec![Packet::from_slice(&[1]), Packet::from_slice(&[2, 3])]);
        assert_eq!(out[0].len(), 2);
        assert_eq!(out[0][0].data(), &[1]);
        assert_eq!(out[0][1].data(), &[2, 3]);
        assert_eq!(h.read("length"), "0");
        assert_eq!(h.read("highwater_length"), "0");
        assert_eq!(h.read("drops"), "0");
        assert_eq!(h.read("capacity"), "1000");
    }

    #[test]
    fn capacity_handler_and_synonyms() {
        let h = Harness::new(&QueueClass::SIMPLE, "20", 1, 2);
        assert_eq!(h.read("capacity"), "20");
        h.write("capacity", "50").unwrap();
        assert_eq!(h.read("capacity"), "50");
        assert_eq!(
            h.write("capacity", "lots").unwrap_err(),
            "CAPACITY expects unsigned integer"
        );
        h.write("reset", "").unwrap();
        let h = Harness::new(&QueueClass::THREAD_SAFE, "CAPACITY 7", 1, 1);
        assert_eq!(h.read("capacity"), "7");
        assert_eq!(
            build_error(&QueueClass::QUEUE, "-3", 1, 1),
            "e :: Queue: CAPACITY expects unsigned integer"
        );
    }
}
