//! `Null`, `PushNull` and `PullNull`: pass packets on unchanged (Click's). In full
//! push they are one element; the graph connects around them, so they cost no call.

use crate::args::Args;
use crate::element::*;
use crate::error::ConfigError;
use packet::PacketBatch;
use std::sync::Arc;

pub struct NullClass {
    name: &'static str,
}

impl NullClass {
    pub const NULL: NullClass = NullClass { name: "Null" };
    pub const PUSH: NullClass = NullClass { name: "PushNull" };
    pub const PULL: NullClass = NullClass { name: "PullNull" };
}

impl ElementClass for NullClass {
    fn name(&self) -> &'static str {
        self.name
    }
    fn port_count(&self) -> PortCount {
        PortCount::parse("1/1")
    }
    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        args.finish().map_err(|e| cx.error(e))?;
        Ok(Arc::new(NullSpec))
    }
}

struct NullSpec;

impl ElementSpec for NullSpec {
    fn instantiate(&self, _w: WorkerInfo) -> Box<dyn Element> {
        Box::new(PassThrough)
    }
    fn is_pass_through(&self) -> bool {
        true
    }
}

/// An element that hands its input to output 0 whole, and that the graph connects
/// around ([`Element::is_pass_through`]): a `Null`, or a full-push `Queue`.
pub(crate) struct PassThrough;

impl Element for PassThrough {
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, out: &mut Outputs<'_>, _cx: &mut Context<'_>) {
        out.push_batch(0, batch);
    }
    fn is_pass_through(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{build_error, Harness};
    use packet::Packet;

    #[test]
    fn passes_every_packet_unchanged_and_in_order() {
        for class in [&NullClass::NULL, &NullClass::PUSH, &NullClass::PULL] {
            let mut h = Harness::new(class, "", 1, 1);
            let out = h.push(
                0,
                vec![Packet::from_slice(&[1, 2, 3]), Packet::from_slice(&[4; 60])],
            );
            assert_eq!(out.len(), 1);
            assert_eq!(out[0].len(), 2, "{}", class.name());
            assert_eq!(out[0][0].data(), &[1, 2, 3]);
            assert_eq!(out[0][1].data(), &[4u8; 60][..]);
        }
    }

    #[test]
    fn takes_no_arguments() {
        assert_eq!(
            build_error(&NullClass::NULL, "1", 1, 1),
            "e :: Null: too many arguments"
        );
    }
}
