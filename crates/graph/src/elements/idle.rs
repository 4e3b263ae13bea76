//! `Idle`: a placeholder with any number of inputs and outputs, as Click's `Idle`. It
//! never emits a packet and drops every packet pushed into it, so a configuration can
//! connect a port it has no use for (Click's cure for "input not connected").

use crate::args::Args;
use crate::element::*;
use crate::error::ConfigError;
use packet::PacketBatch;
use std::sync::Arc;

pub struct IdleClass;

impl ElementClass for IdleClass {
    fn name(&self) -> &'static str {
        "Idle"
    }
    fn port_count(&self) -> PortCount {
        PortCount::parse("-/-")
    }
    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        args.finish().map_err(|e| cx.error(e))?;
        Ok(Arc::new(IdleSpec))
    }
}

struct IdleSpec;

impl ElementSpec for IdleSpec {
    fn instantiate(&self, _w: WorkerInfo) -> Box<dyn Element> {
        Box::new(Idle)
    }
}

struct Idle;

impl Element for Idle {
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, _out: &mut Outputs<'_>, _cx: &mut Context<'_>) {
        batch.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Registry;
    use crate::router::RouterSpec;
    use crate::testing::{build_error, Harness};
    use packet::Packet;

    #[test]
    fn drops_what_it_receives_on_any_input_and_emits_nothing() {
        let mut h = Harness::new(&IdleClass, "", 3, 2);
        for port in 0..3 {
            let out = h.push(port, vec![Packet::from_slice(&[1, 2, 3]), Packet::zeroed(60)]);
            assert_eq!(out.len(), 2);
            assert!(out.iter().all(|o| o.is_empty()), "input {}", port);
        }
        assert_eq!(h.spec.handlers(), Vec::new());
    }

    #[test]
    fn any_number_of_ports_and_no_arguments() {
        let p = IdleClass.port_count();
        assert_eq!(
            (p.min_in, p.max_in, p.min_out, p.max_out),
            (0, usize::MAX, 0, usize::MAX)
        );
        assert_eq!(
            build_error(&IdleClass, "1", 0, 0),
            "e :: Idle: too many arguments"
        );
        assert_eq!(
            build_error(&IdleClass, "ACTIVE true", 0, 0),
            "e :: Idle: bad keyword 'ACTIVE'"
        );
    }

    #[test]
    fn stands_in_for_unused_ports_in_a_router() {
        // An unused output of a Tee and an unconnected input of a Discard-less chain.
        let flat = crate::lang::parse(
            "InfiniteSource(LIMIT 1) -> t :: Tee(2) -> Discard; t[1] -> Idle; Idle -> Discard",
            "t.click",
            &Default::default(),
        )
        .unwrap();
        let reg = Registry::with_library();
        let router = RouterSpec::build(&flat, &reg, std::path::Path::new("."), 1).unwrap();
        assert_eq!(router.elements_of_class("Idle").len(), 2);
    }
}
