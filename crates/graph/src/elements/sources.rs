//! Packet generators: `InfiniteSource` and `RatedSource`, as Click's.
//!
//! A source with a LIMIT must produce exactly LIMIT packets router-wide, so only worker 0
//! gets a generating instance; the other workers get an [`IdleSource`]. Handler state
//! (count, limit, active, data ...) lives in the spec so handlers see and change it.

use super::shared::lock;
use super::tokenbucket::{jiffies, TokenCounter, TokenRate};
use crate::args::{unquote_bytes, Args, Bandwidth, FromArg};
use crate::element::*;
use crate::error::ConfigError;
use packet::{Packet, PacketBatch, Timestamp};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Click's default packet contents.
pub const DEFAULT_DATA: &[u8] = b"Random bullshit in a packet, at least 64 bytes long. Well, now it is.";

/// The instance a single-resource source gives to workers other than worker 0: it
/// produces nothing and reports `Done` at once.
pub(crate) struct IdleSource;

impl Element for IdleSource {
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, _out: &mut Outputs<'_>, _cx: &mut Context<'_>) {
        batch.clear();
    }
    fn run(&mut self, _out: &mut Outputs<'_>, _cx: &mut Context<'_>) -> TaskStatus {
        TaskStatus::Done
    }
    fn is_source(&self) -> bool {
        true
    }
}

/// A DATA argument: bytes after Click's unquoting.
pub(crate) struct DataArg(pub(crate) Vec<u8>);

impl FromArg for DataArg {
    const WHAT: &'static str = "string";
    fn from_arg(s: &str) -> Option<Self> {
        Some(DataArg(unquote_bytes(s)))
    }
}

/// Click's `setup_packet`: DATA, cut or repeated to LENGTH when LENGTH >= 0.
fn make_template(data: &[u8], length: i64) -> Vec<u8> {
    if length < 0 {
        return data.to_vec();
    }
    let n = length as usize;
    if n <= data.len() {
        data[..n].to_vec()
    } else if data.is_empty() {
        // Click would loop forever repeating nothing; the packet is zero-filled.
        vec![0; n]
    } else {
        data.iter().copied().cycle().take(n).collect()
    }
}

fn arg<T>(r: Result<T, String>, cx: &BuildContext) -> Result<T, ConfigError> {
    r.map_err(|e| cx.error(e))
}

fn parse_handler<T: FromArg>(v: &str) -> Option<T> {
    T::from_arg(crate::args::uncomment(v).trim())
}

// ---------------------------------------------------------------------------------
// InfiniteSource

pub struct InfiniteSourceClass;

struct InfiniteTemplate {
    data: Vec<u8>,
    length: i64,
    bytes: Arc<Vec<u8>>,
}

struct InfiniteShared {
    count: AtomicU64,
    limit: AtomicI64,
    burst: AtomicI64,
    active: AtomicBool,
    /// Bumped whenever DATA or LENGTH change.
    generation: AtomicU64,
    template: Mutex<InfiniteTemplate>,
}

struct InfiniteSourceSpec {
    shared: Arc<InfiniteShared>,
    stop: bool,
    timestamp: bool,
    taken: AtomicBool,
}

struct InfiniteSource {
    shared: Arc<InfiniteShared>,
    stop: bool,
    timestamp: bool,
    generation: u64,
    bytes: Arc<Vec<u8>>,
}

impl Element for InfiniteSource {
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, _out: &mut Outputs<'_>, _cx: &mut Context<'_>) {
        batch.clear();
    }

    fn is_source(&self) -> bool {
        true
    }

    fn run(&mut self, out: &mut Outputs<'_>, cx: &mut Context<'_>) -> TaskStatus {
        let s = &*self.shared;
        if !s.active.load(Ordering::Relaxed) {
            return TaskStatus::Idle;
        }
        let g = s.generation.load(Ordering::Acquire);
        if g != self.generation {
            self.bytes = lock(&s.template).bytes.clone();
            self.generation = g;
        }
        let count = s.count.load(Ordering::Relaxed);
        let limit = s.limit.load(Ordering::Relaxed);
        let mut n = s.burst.load(Ordering::Relaxed).max(1) as u64;
        if limit >= 0 && count + n >= limit as u64 {
            n = (limit as u64).saturating_sub(count);
        }
        // One run emits at most one batch; the rest of a large BURST follows next run.
        let n = n.min(packet::MAX_BATCH as u64);
        if n == 0 {
            // Click calls the end handler (`stop` with STOP) once LIMIT is reached.
            if self.stop {
                cx.request_stop();
                return TaskStatus::Done;
            }
            return TaskStatus::Idle;
        }
        for _ in 0..n {
            let mut p = Packet::from_slice(&self.bytes);
            if self.timestamp {
                p.anno_mut().timestamp = Timestamp::now();
            }
            out.push(0, p);
        }
        s.count.fetch_add(n, Ordering::Relaxed);
        TaskStatus::Busy
    }
}

impl ElementSpec for InfiniteSourceSpec {
    fn instantiate(&self, worker: WorkerInfo) -> Box<dyn Element> {
        if worker.index != 0 || self.taken.swap(true, Ordering::AcqRel) {
            return Box::new(IdleSource);
        }
        let (generation, bytes) = {
            let t = lock(&self.shared.template);
            (self.shared.generation.load(Ordering::Acquire), t.bytes.clone())
        };
        Box::new(InfiniteSource {
            shared: self.shared.clone(),
            stop: self.stop,
            timestamp: self.timestamp,
            generation,
            bytes,
        })
    }

    fn handlers(&self) -> Vec<HandlerInfo> {
        vec![
            HandlerInfo::read_write("data"),
            HandlerInfo::read_write("limit"),
            HandlerInfo::read_write("burst"),
            HandlerInfo::read_write("active"),
            HandlerInfo::read("count"),
            HandlerInfo::write("reset"),
            HandlerInfo::read_write("length"),
            HandlerInfo::read_write("burstsize"),
            HandlerInfo::read_write("datasize"),
        ]
    }

    fn read_handler(&self, name: &str) -> Option<String> {
        let s = &self.shared;
        Some(match name {
            "data" => String::from_utf8_lossy(&lock(&s.template).data).into_owned(),
            "limit" => s.limit.load(Ordering::Relaxed).to_string(),
            "burst" | "burstsize" => s.burst.load(Ordering::Relaxed).to_string(),
            "active" => s.active.load(Ordering::Relaxed).to_string(),
            "count" => s.count.load(Ordering::Relaxed).to_string(),
            "length" | "datasize" => lock(&s.template).length.to_string(),
            _ => return None,
        })
    }

    fn write_handler(&self, name: &str, value: &str) -> Option<Result<(), String>> {
        let s = &self.shared;
        let retemplate = |data: Option<Vec<u8>>, length: Option<i64>| {
            let mut t = lock(&s.template);
            if let Some(d) = data {
                t.data = d;
            }
            if let Some(l) = length {
                t.length = l;
            }
            t.bytes = Arc::new(make_template(&t.data, t.length));
            s.generation.fetch_add(1, Ordering::Release);
        };
        Some(match name {
            // A raw handler: the text is the data, unquoted by nobody.
            "data" => {
                retemplate(Some(value.as_bytes().to_vec()), None);
                Ok(())
            }
            "limit" => match parse_handler::<i32>(value) {
                Some(v) => {
                    s.limit.store(v as i64, Ordering::Relaxed);
                    Ok(())
                }
                None => Err("limit parameter must be integer".to_string()),
            },
            "burst" | "burstsize" => match parse_handler::<i32>(value).filter(|&v| v >= 1) {
                Some(v) => {
                    s.burst.store(v as i64, Ordering::Relaxed);
                    Ok(())
                }
                None => Err("burstsize parameter must be integer >= 1".to_string()),
            },
            "active" => match parse_handler::<bool>(value) {
                Some(v) => {
                    s.active.store(v, Ordering::Relaxed);
                    Ok(())
                }
                None => Err("active parameter must be boolean".to_string()),
            },
            "reset" => {
                s.count.store(0, Ordering::Relaxed);
                Ok(())
            }
            "length" | "datasize" => match parse_handler::<i32>(value) {
                Some(v) => {
                    retemplate(None, Some(v as i64));
                    Ok(())
                }
                None => Err("length must be integer".to_string()),
            },
            _ => return None,
        })
    }
}

impl ElementClass for InfiniteSourceClass {
    fn name(&self) -> &'static str {
        "InfiniteSource"
    }

    fn port_count(&self) -> PortCount {
        PortCount::parse("0/1")
    }

    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        let data =
            arg(args.positional::<DataArg>("DATA"), cx)?.map_or_else(|| DEFAULT_DATA.to_vec(), |d| d.0);
        let limit = arg(args.positional::<i64>("LIMIT"), cx)?.unwrap_or(-1);
        let burst = arg(args.positional::<i32>("BURST"), cx)?.unwrap_or(1);
        let active = arg(args.positional::<bool>("ACTIVE"), cx)?.unwrap_or(true);
        let timestamp = arg(args.keyword::<bool>("TIMESTAMP"), cx)?.unwrap_or(true);
        let length = arg(args.keyword::<i32>("LENGTH"), cx)?;
        let datasize = arg(args.keyword::<i32>("DATASIZE"), cx)?;
        let stop = arg(args.keyword::<bool>("STOP"), cx)?.unwrap_or(false);
        arg(args.finish(), cx)?;
        if burst < 1 {
            return Err(cx.error("burst size must be >= 1"));
        }
        // Click reads LENGTH then the deprecated DATASIZE into one variable.
        let length = datasize.or(length).unwrap_or(-1) as i64;
        let bytes = Arc::new(make_template(&data, length));
        Ok(Arc::new(InfiniteSourceSpec {
            shared: Arc::new(InfiniteShared {
                count: AtomicU64::new(0),
                limit: AtomicI64::new(limit),
                burst: AtomicI64::new(burst as i64),
                active: AtomicBool::new(active),
                generation: AtomicU64::new(0),
                template: Mutex::new(InfiniteTemplate { data, length, bytes }),
            }),
            stop,
            timestamp,
            taken: AtomicBool::new(false),
        }))
    }
}

// ---------------------------------------------------------------------------------
// RatedSource

pub struct RatedSourceClass;

const NO_LIMIT: u32 = u32::MAX;

fn rated_capacity(rate: u32) -> u32 {
    if rate < 200 {
        2
    } else {
        rate / 100
    }
}

struct RatedConfig {
    data: Vec<u8>,
    length: i64,
    bytes: Arc<Vec<u8>>,
    rate: TokenRate,
    /// A `rate` write: the instance re-assigns its bucket (adjusting the tokens).
    rate_changed: bool,
    /// A `reset` or `active true` write: the instance sets its bucket to one token.
    set_one: bool,
}

struct RatedShared {
    count: AtomicU32,
    limit: AtomicU32,
    active: AtomicBool,
    generation: AtomicU64,
    config: Mutex<RatedConfig>,
}

struct RatedSourceSpec {
    shared: Arc<RatedShared>,
    stop: bool,
    taken: AtomicBool,
}

struct RatedSource {
    shared: Arc<RatedShared>,
    stop: bool,
    generation: u64,
    bytes: Arc<Vec<u8>>,
    rate: TokenRate,
    bucket: TokenCounter,
}

impl Element for RatedSource {
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, _out: &mut Outputs<'_>, _cx: &mut Context<'_>) {
        batch.clear();
    }

    fn is_source(&self) -> bool {
        true
    }

    fn run(&mut self, out: &mut Outputs<'_>, cx: &mut Context<'_>) -> TaskStatus {
        let s = &*self.shared;
        let g = s.generation.load(Ordering::Acquire);
        if g != self.generation {
            let mut c = lock(&s.config);
            self.bytes = c.bytes.clone();
            if c.rate_changed {
                self.bucket.adjust(&self.rate, &c.rate);
                self.rate = c.rate;
                c.rate_changed = false;
            }
            if c.set_one {
                self.bucket.set(&self.rate, 1);
                c.set_one = false;
            }
            self.generation = g;
        }
        if !s.active.load(Ordering::Relaxed) {
            return TaskStatus::Idle;
        }
        let limit = s.limit.load(Ordering::Relaxed);
        if limit != NO_LIMIT && s.count.load(Ordering::Relaxed) >= limit {
            if self.stop {
                cx.request_stop();
                return TaskStatus::Done;
            }
            return TaskStatus::Idle;
        }
        self.bucket.refill(&self.rate, jiffies());
        if !self.bucket.remove_if(&self.rate, 1) {
            return TaskStatus::Idle;
        }
        let mut p = Packet::from_slice(&self.bytes);
        p.anno_mut().timestamp = Timestamp::now();
        out.push(0, p);
        s.count.fetch_add(1, Ordering::Relaxed);
        TaskStatus::Busy
    }
}

impl ElementSpec for RatedSourceSpec {
    fn instantiate(&self, worker: WorkerInfo) -> Box<dyn Element> {
        if worker.index != 0 || self.taken.swap(true, Ordering::AcqRel) {
            return Box::new(IdleSource);
        }
        let c = lock(&self.shared.config);
        let mut bucket = TokenCounter::new();
        bucket.set(&c.rate, 1);
        Box::new(RatedSource {
            shared: self.shared.clone(),
            stop: self.stop,
            generation: self.shared.generation.load(Ordering::Acquire),
            bytes: c.bytes.clone(),
            rate: c.rate,
            bucket,
        })
    }

    fn handlers(&self) -> Vec<HandlerInfo> {
        vec![
            HandlerInfo::read_write("data"),
            HandlerInfo::read_write("rate"),
            HandlerInfo::read_write("limit"),
            HandlerInfo::read_write("active"),
            HandlerInfo::read("count"),
            HandlerInfo::write("reset"),
            HandlerInfo::read_write("length"),
            HandlerInfo::read_write("datasize"),
        ]
    }

    fn read_handler(&self, name: &str) -> Option<String> {
        let s = &self.shared;
        Some(match name {
            "data" => String::from_utf8_lossy(&lock(&s.config).data).into_owned(),
            "rate" => lock(&s.config).rate.rate().to_string(),
            "limit" => match s.limit.load(Ordering::Relaxed) {
                NO_LIMIT => "-1".to_string(),
                l => l.to_string(),
            },
            "active" => s.active.load(Ordering::Relaxed).to_string(),
            "count" => s.count.load(Ordering::Relaxed).to_string(),
            "length" | "datasize" => lock(&s.config).length.to_string(),
            _ => return None,
        })
    }

    fn write_handler(&self, name: &str, value: &str) -> Option<Result<(), String>> {
        let s = &self.shared;
        let syntax = || Err("syntax error".to_string());
        let changed = || {
            s.generation.fetch_add(1, Ordering::Release);
        };
        Some(match name {
            // Click's RatedSource rebuilds its packet from the whole new DATA here,
            // ignoring LENGTH.
            "data" => {
                let mut c = lock(&s.config);
                c.data = value.as_bytes().to_vec();
                c.bytes = Arc::new(c.data.clone());
                changed();
                Ok(())
            }
            "rate" => match parse_handler::<u32>(value) {
                Some(r) => {
                    let mut c = lock(&s.config);
                    c.rate = TokenRate::new(r, rated_capacity(r));
                    c.rate_changed = true;
                    changed();
                    Ok(())
                }
                None => syntax(),
            },
            "limit" => match parse_handler::<i32>(value) {
                Some(l) => {
                    s.limit
                        .store(if l >= 0 { l as u32 } else { NO_LIMIT }, Ordering::Relaxed);
                    Ok(())
                }
                None => syntax(),
            },
            "active" => match parse_handler::<bool>(value) {
                Some(a) => {
                    let was = s.active.swap(a, Ordering::Relaxed);
                    if a && !was {
                        lock(&s.config).set_one = true;
                        changed();
                    }
                    Ok(())
                }
                None => syntax(),
            },
            "reset" => {
                s.count.store(0, Ordering::Relaxed);
                lock(&s.config).set_one = true;
                changed();
                Ok(())
            }
            "length" | "datasize" => match parse_handler::<i32>(value) {
                Some(l) => {
                    let mut c = lock(&s.config);
                    c.length = l as i64;
                    c.bytes = Arc::new(make_template(&c.data, c.length));
                    changed();
                    Ok(())
                }
                None => syntax(),
            },
            _ => return None,
        })
    }
}

impl ElementClass for RatedSourceClass {
    fn name(&self) -> &'static str {
        "RatedSource"
    }

    fn port_count(&self) -> PortCount {
        PortCount::parse("0/1")
    }

    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        let data =
            arg(args.positional::<DataArg>("DATA"), cx)?.map_or_else(|| DEFAULT_DATA.to_vec(), |d| d.0);
        let mut rate = arg(args.positional::<u32>("RATE"), cx)?.unwrap_or(10);
        let limit = arg(args.positional::<i32>("LIMIT"), cx)?.unwrap_or(-1);
        let active = arg(args.positional::<bool>("ACTIVE"), cx)?.unwrap_or(true);
        let length = arg(args.keyword::<i32>("LENGTH"), cx)?;
        let datasize = arg(args.keyword::<i32>("DATASIZE"), cx)?;
        let stop = arg(args.keyword::<bool>("STOP"), cx)?.unwrap_or(false);
        let bandwidth = arg(args.keyword::<Bandwidth>("BANDWIDTH"), cx)?;
        arg(args.finish(), cx)?;

        let length = datasize.or(length).unwrap_or(-1) as i64;
        let bandwidth = bandwidth.map_or(0, |b| b.0.clamp(0.0, u32::MAX as f64) as u32);
        let mut capacity;
        if bandwidth > 0 {
            let size = if length < 0 {
                data.len() as u64
            } else {
                length as u64
            };
            rate = (bandwidth as u64).checked_div(size).unwrap_or(0) as u32;
        }
        capacity = rated_capacity(rate);
        if bandwidth > 0 && (capacity as i64) < 2 * length {
            capacity = (2 * length).min(u32::MAX as i64) as u32;
        }
        let bytes = Arc::new(make_template(&data, length));
        Ok(Arc::new(RatedSourceSpec {
            shared: Arc::new(RatedShared {
                count: AtomicU32::new(0),
                limit: AtomicU32::new(if limit >= 0 { limit as u32 } else { NO_LIMIT }),
                active: AtomicBool::new(active),
                generation: AtomicU64::new(0),
                config: Mutex::new(RatedConfig {
                    data,
                    length,
                    bytes,
                    rate: TokenRate::new(rate, capacity),
                    rate_changed: false,
                    set_one: false,
                }),
            }),
            stop,
            taken: AtomicBool::new(false),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{build, build_error, Harness};

    fn run_all(h: &mut Harness) -> (Vec<usize>, TaskStatus) {
        let mut sizes = Vec::new();
        loop {
            let (st, out) = h.run();
            if st != TaskStatus::Busy || sizes.len() > 1000 {
                return (sizes, st);
            }
            sizes.push(out[0].len());
        }
    }

    #[test]
    fn infinite_source_default_data_limit_and_burst() {
        let mut h = Harness::new(&InfiniteSourceClass, "LIMIT 5, BURST 2", 0, 1);
        let (st, out) = h.run();
        assert_eq!(st, TaskStatus::Busy);
        assert_eq!(out[0].len(), 2);
        assert_eq!(
            out[0][0].data(),
            b"Random bullshit in a packet, at least 64 bytes long. Well, now it is."
        );
        assert!(!out[0][0].anno().timestamp.is_zero());
        let (sizes, st) = run_all(&mut h);
        assert_eq!(sizes, vec![2, 1]);
        assert_eq!(st, TaskStatus::Idle);
        assert!(!h.stop_requested());
        assert_eq!(h.read("count"), "5");
        assert_eq!(h.read("limit"), "5");
        assert_eq!(h.read("burst"), "2");
        // reset: another LIMIT packets.
        h.write("reset", "").unwrap();
        assert_eq!(run_all(&mut h).0, vec![2, 2, 1]);
    }

    #[test]
    fn infinite_source_stop_and_positional_args() {
        let mut h = Harness::new(
            &InfiniteSourceClass,
            "\\<0800 0a0b>, 3, 1, true, STOP true, TIMESTAMP false",
            0,
            1,
        );
        let (st, out) = h.run();
        assert_eq!(st, TaskStatus::Busy);
        assert_eq!(out[0][0].data(), &[0x08, 0x00, 0x0a, 0x0b]);
        assert!(out[0][0].anno().timestamp.is_zero());
        let (sizes, st) = run_all(&mut h);
        assert_eq!(sizes, vec![1, 1]);
        assert_eq!(st, TaskStatus::Done);
        assert!(h.stop_requested());
    }

    #[test]
    fn infinite_source_length_and_handlers() {
        let mut h = Harness::new(&InfiniteSourceClass, "DATA \"abc\", LENGTH 7", 0, 1);
        assert_eq!(h.run().1[0][0].data(), b"abcabca");
        assert_eq!(h.read("length"), "7");
        h.write("length", "2").unwrap();
        assert_eq!(h.run().1[0][0].data(), b"ab");
        h.write("data", "xyz").unwrap();
        assert_eq!(h.read("data"), "xyz");
        assert_eq!(h.run().1[0][0].data(), b"xy");
        h.write("active", "false").unwrap();
        assert_eq!(h.run().0, TaskStatus::Idle);
        assert_eq!(h.read("active"), "false");
        assert_eq!(
            h.write("limit", "x"),
            Err("limit parameter must be integer".to_string())
        );
        assert_eq!(
            h.write("burst", "0"),
            Err("burstsize parameter must be integer >= 1".to_string())
        );
        assert_eq!(
            h.write("active", "2"),
            Err("active parameter must be boolean".to_string())
        );
        assert_eq!(h.write("length", "y"), Err("length must be integer".to_string()));
        assert_eq!(h.read("limit"), "-1");
        assert_eq!(
            build_error(&InfiniteSourceClass, "BURST 0", 0, 1),
            "e :: InfiniteSource: burst size must be >= 1"
        );
    }

    #[test]
    fn sources_run_on_worker_zero_only() {
        for class in [&InfiniteSourceClass as &dyn ElementClass, &RatedSourceClass] {
            let spec = build(class, "LIMIT 4", 0, 1).unwrap();
            let stop = StopFlag::new();
            let mut outs = vec![PacketBatch::new()];
            let mut cx = Context::new(WorkerInfo { index: 1, count: 2 }, &stop);
            let mut other = spec.instantiate(WorkerInfo { index: 1, count: 2 });
            assert_eq!(other.run(&mut Outputs::new(&mut outs), &mut cx), TaskStatus::Done);
            assert!(outs[0].is_empty());
        }
    }

    #[test]
    fn rated_source_at_rate_0_sends_its_first_token_only() {
        // Click's initialize sets one token; an idle rate never adds another.
        let mut h = Harness::new(&RatedSourceClass, "RATE 0, LIMIT 5", 0, 1);
        assert_eq!(run_all(&mut h), (vec![1], TaskStatus::Idle));
        std::thread::sleep(std::time::Duration::from_millis(5));
        assert_eq!(run_all(&mut h), (vec![], TaskStatus::Idle));
        assert_eq!(h.read("count"), "1");
    }

    #[test]
    fn rated_source_limit_stop_and_handlers() {
        // A high rate has a large bucket, full at the start: no waiting in this test.
        let mut h = Harness::new(&RatedSourceClass, "\\<01 02>, 1000000, 3, STOP true", 0, 1);
        // Click's TokenRate::rate() rounds with tokens_per_tick / 2 (429496000 / 2)
        // before dividing by the token scale (429496): 1000500, not 1000000.
        assert_eq!(h.read("rate"), "1000500");
        assert_eq!(h.read("limit"), "3");
        let (st, out) = h.run();
        assert_eq!(st, TaskStatus::Busy);
        assert_eq!(out[0][0].data(), &[1, 2]);
        assert!(!out[0][0].anno().timestamp.is_zero());
        let (sizes, st) = run_all(&mut h);
        assert_eq!(sizes, vec![1, 1]);
        assert_eq!(st, TaskStatus::Done);
        assert!(h.stop_requested());
        assert_eq!(h.read("count"), "3");

        let mut h = Harness::new(&RatedSourceClass, "RATE 1000000, LIMIT 2", 0, 1);
        assert_eq!(run_all(&mut h), (vec![1, 1], TaskStatus::Idle));
        assert!(!h.stop_requested());
        assert_eq!(h.write("rate", "abc"), Err("syntax error".to_string()));
        h.write("limit", "-1").unwrap();
        assert_eq!(h.read("limit"), "-1");
        assert_eq!(h.read("length"), "-1");
        h.write("length", "3").unwrap();
        assert_eq!(h.run().1[0][0].data(), b"Ran");
        h.write("active", "false").unwrap();
        assert_eq!(h.run().0, TaskStatus::Idle);
        assert_eq!(Harness::new(&RatedSourceClass, "", 0, 1).read("rate"), "10");
    }

    #[test]
    fn unquoting_data() {
        assert_eq!(unquote_bytes("\\<00 ff>x"), vec![0, 0xff, b'x']);
        assert_eq!(
            unquote_bytes("\"a\\n\\x41\\101\\<0102>\""),
            b"a\nAA\x01\x02".to_vec()
        );
        assert_eq!(unquote_bytes("'a\\n'"), b"a\\n".to_vec());
    }
}
