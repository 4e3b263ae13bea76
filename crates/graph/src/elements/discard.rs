//! `Discard`: drops every packet it receives (Click's `Discard`, push mode).

use crate::args::Args;
use crate::element::*;
use crate::error::ConfigError;
use packet::PacketBatch;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

pub struct DiscardClass;

impl ElementClass for DiscardClass {
    fn name(&self) -> &'static str {
        "Discard"
    }
    fn port_count(&self) -> PortCount {
        PortCount::parse("1/0")
    }
    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        // ACTIVE and BURST only matter for Click's pull mode; accepted for compatibility.
        args.keyword::<bool>("ACTIVE").map_err(|e| cx.error(e))?;
        args.keyword::<u32>("BURST").map_err(|e| cx.error(e))?;
        args.finish().map_err(|e| cx.error(e))?;
        Ok(Arc::new(DiscardSpec {
            count: Arc::new(AtomicU64::new(0)),
        }))
    }
}

struct DiscardSpec {
    count: Arc<AtomicU64>,
}

impl ElementSpec for DiscardSpec {
    fn instantiate(&self, _w: WorkerInfo) -> Box<dyn Element> {
        Box::new(Discard {
            count: self.count.clone(),
        })
    }
    fn handlers(&self) -> Vec<HandlerInfo> {
        vec![HandlerInfo::read("count"), HandlerInfo::write("reset_counts")]
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        (name == "count").then(|| self.count.load(Ordering::Relaxed).to_string())
    }
    fn write_handler(&self, name: &str, _value: &str) -> Option<Result<(), String>> {
        (name == "reset_counts").then(|| {
            self.count.store(0, Ordering::Relaxed);
            Ok(())
        })
    }
}

struct Discard {
    count: Arc<AtomicU64>,
}

impl Element for Discard {
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, _out: &mut Outputs<'_>, _cx: &mut Context<'_>) {
        // One relaxed add per batch, not per packet.
        self.count.fetch_add(batch.len() as u64, Ordering::Relaxed);
        batch.clear();
    }
}
