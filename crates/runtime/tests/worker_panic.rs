//! A worker that panics ends the run: the other workers stop, the elements clean up,
//! and the panic reaches the caller.

use graph::args::Args;
use graph::element::{
    BuildContext, Context, Element, ElementClass, ElementSpec, Outputs, PortCount, TaskStatus, WorkerInfo,
};
use graph::error::ConfigError;
use graph::registry::Registry;
use graph::router::RouterSpec;
use packet::PacketBatch;
use runtime::Runtime;
use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

/// `Boom(N)`: passes packets on and panics at the Nth one it sees.
struct BoomClass;

struct BoomSpec {
    at: u64,
    seen: Arc<AtomicU64>,
}

struct Boom {
    at: u64,
    seen: Arc<AtomicU64>,
}

impl ElementClass for BoomClass {
    fn name(&self) -> &'static str {
        "Boom"
    }
    fn port_count(&self) -> PortCount {
        PortCount::parse("1/1")
    }
    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        let at = args.required::<u32>("N").map_err(|e| cx.error(e))?;
        Ok(Arc::new(BoomSpec {
            at: at.into(),
            seen: Arc::default(),
        }))
    }
}

impl ElementSpec for BoomSpec {
    fn instantiate(&self, _w: WorkerInfo) -> Box<dyn Element> {
        Box::new(Boom {
            at: self.at,
            seen: self.seen.clone(),
        })
    }
}

impl Element for Boom {
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, out: &mut Outputs<'_>, _cx: &mut Context<'_>) {
        let seen = self.seen.fetch_add(batch.len() as u64, Ordering::Relaxed) + batch.len() as u64;
        if seen >= self.at {
            panic!("boom at packet {}", self.at);
        }
        out.push_batch(0, batch);
    }
}

/// `Forever`: a source that never has anything to do and never finishes, so that a
/// worker running it ends only when the router stops.
struct ForeverClass;

struct ForeverSpec;

struct Forever;

impl ElementClass for ForeverClass {
    fn name(&self) -> &'static str {
        "Forever"
    }
    fn port_count(&self) -> PortCount {
        PortCount::parse("0/1")
    }
    fn build(&self, _args: &mut Args, _cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        Ok(Arc::new(ForeverSpec))
    }
}

impl ElementSpec for ForeverSpec {
    fn instantiate(&self, _w: WorkerInfo) -> Box<dyn Element> {
        Box::new(Forever)
    }
}

impl Element for Forever {
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, _out: &mut Outputs<'_>, _cx: &mut Context<'_>) {
        batch.clear();
    }
    fn run(&mut self, _out: &mut Outputs<'_>, _cx: &mut Context<'_>) -> TaskStatus {
        TaskStatus::Idle
    }
    fn is_source(&self) -> bool {
        true
    }
}

fn router(config: &str) -> RouterSpec {
    let mut reg = Registry::with_library();
    reg.add(Arc::new(BoomClass));
    reg.add(Arc::new(ForeverClass));
    let flat = graph::lang::parse_with_classes(config, "<test>", &HashMap::new(), &|c| reg.get(c).is_some())
        .unwrap_or_else(|e| panic!("{}", e));
    RouterSpec::build(&flat, &reg, Path::new("."), 2).unwrap_or_else(|e| panic!("{}", e))
}

#[test]
fn a_panicking_worker_stops_the_run_and_its_panic_reaches_the_caller() {
    let dir = std::env::temp_dir().join(format!("brickroute-worker-panic-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let dump = dir.join("before-the-panic.pcap");
    // Worker 0 emits three packets, all written to the dump before the third one
    // panics; both workers poll a source that never ends.
    let spec = Arc::new(router(&format!(
        "InfiniteSource(DATA \\<0a0b0c>, LIMIT 3, BURST 1) -> dump :: ToDump({}) -> Boom(3) -> Discard;
         Forever -> Discard;",
        dump.display()
    )));
    let (done, ended) = mpsc::channel();
    let run = spec.clone();
    std::thread::spawn(move || {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            Runtime::new(2).pin(false).prefill(16).run(&run)
        }));
        let _ = done.send(r.map(|stats| stats.packets()));
    });
    let panic = ended
        .recv_timeout(Duration::from_secs(30))
        .expect("the run ends after a worker panics")
        .expect_err("the worker's panic reaches the caller");
    assert_eq!(
        panic.downcast_ref::<String>().map(String::as_str),
        Some("boom at packet 3")
    );
    assert_eq!(spec.read_handler("dump.count").unwrap(), "3");
    // The dump was flushed by the cleanup the run does on every stop: the pcap file
    // header (24 bytes), then per packet a 16-byte record header and the 3 bytes.
    let bytes = std::fs::read(&dump).unwrap();
    assert_eq!(bytes.len(), 24 + 3 * (16 + 3));
    assert_eq!(&bytes[..4], &[0xd4, 0xc3, 0xb2, 0xa1]);
    for i in 0..3 {
        let data = 24 + i * 19 + 16;
        assert_eq!(&bytes[data..data + 3], &[0x0a, 0x0b, 0x0c], "packet {}", i);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
