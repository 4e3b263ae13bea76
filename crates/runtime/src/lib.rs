//! The brickroute runtime: one worker thread per core, each running its own instance of
//! the router graph in a poll loop.
//!
//! A worker pinned to a core instantiates the compiled router ([`RouterSpec`]) for
//! itself and loops: run every source once (a `FromDevice` polls up to k_p packets of
//! its queue and pushes them through the graph to completion; a `ToDevice` hands
//! groups of k_n to its queue and flushes a partial group on timeout). It counts the
//! TSC cycles of passes that moved packets apart from those of passes that found
//! nothing ("empty polls"), so cycles per packet can be reported without the idle
//! spinning. A worker stops when the router's stop flag is set (after one last pass in
//! which sources see the request and flush) or when all its sources are done. A worker
//! that panics sets the stop flag, and the run ends with its panic.

pub mod bench;
pub mod device;
pub mod kernel_forwarding;
// The cycle counter lives with the elements, which time batches with it too.
pub use graph::tsc;

pub use device::{open_interface, open_interface_sharing, register, DeviceTable, Method};

use graph::router::{ElementProfile, RouterSpec};
use graph::WorkerInfo;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// What one worker did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct WorkerStats {
    pub index: usize,
    /// The core it was pinned to, if pinning succeeded.
    pub core: Option<usize>,
    /// Packets its sources emitted.
    pub packets: u64,
    /// TSC cycles of passes that emitted packets.
    pub busy_cycles: u64,
    /// TSC cycles of passes that emitted none (empty polls).
    pub empty_cycles: u64,
    /// Passes over the sources.
    pub iterations: u64,
    /// Passes that emitted no packet.
    pub empty_iterations: u64,
    /// Times it slept in `poll(2)` after staying idle (see [`IDLE_SPIN`]).
    pub idle_sleeps: u64,
    /// Wall-clock time from the first pass to the last.
    pub elapsed: Duration,
    /// Each element's calls on this worker, by element index, when the run profiled
    /// ([`Runtime::profile`]); empty otherwise.
    pub profile: Vec<ElementProfile>,
}

impl WorkerStats {
    /// Busy cycles per packet.
    pub fn cycles_per_packet(&self) -> f64 {
        if self.packets == 0 {
            0.0
        } else {
            self.busy_cycles as f64 / self.packets as f64
        }
    }

    /// Share of the loop's cycles spent in empty polls, 0 to 1.
    pub fn empty_poll_share(&self) -> f64 {
        let all = self.busy_cycles + self.empty_cycles;
        if all == 0 {
            0.0
        } else {
            self.empty_cycles as f64 / all as f64
        }
    }

    /// Millions of packets per second over the worker's run time.
    pub fn mpps(&self) -> f64 {
        let s = self.elapsed.as_secs_f64();
        if s > 0.0 {
            self.packets as f64 / s / 1e6
        } else {
            0.0
        }
    }
}

/// What a run did: every worker's statistics.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunStats {
    pub workers: Vec<WorkerStats>,
    /// Wall-clock time of the whole run.
    pub elapsed: Duration,
    /// TSC ticks per second used to read the cycle counts.
    pub tsc_hz: f64,
}

impl RunStats {
    /// Adds a later run of the same workers (another round, or a configuration that
    /// replaced this one's): each worker's counts and times summed, the wall-clock
    /// times summed. Element profiles are not summed: the sum has none.
    pub fn add(&mut self, later: &RunStats) {
        for w in &later.workers {
            match self.workers.iter_mut().find(|m| m.index == w.index) {
                Some(m) => {
                    m.packets += w.packets;
                    m.busy_cycles += w.busy_cycles;
                    m.empty_cycles += w.empty_cycles;
                    m.iterations += w.iterations;
                    m.empty_iterations += w.empty_iterations;
                    m.idle_sleeps += w.idle_sleeps;
                    m.elapsed += w.elapsed;
                    m.profile.clear();
                }
                None => self.workers.push(WorkerStats {
                    profile: Vec::new(),
                    ..w.clone()
                }),
            }
        }
        self.elapsed += later.elapsed;
        self.tsc_hz = later.tsc_hz;
    }

    pub fn packets(&self) -> u64 {
        self.workers.iter().map(|w| w.packets).sum()
    }

    /// Busy cycles per packet over all workers.
    pub fn cycles_per_packet(&self) -> f64 {
        let p = self.packets();
        if p == 0 {
            0.0
        } else {
            self.workers.iter().map(|w| w.busy_cycles).sum::<u64>() as f64 / p as f64
        }
    }

    pub fn empty_poll_share(&self) -> f64 {
        let busy: u64 = self.workers.iter().map(|w| w.busy_cycles).sum();
        let empty: u64 = self.workers.iter().map(|w| w.empty_cycles).sum();
        if busy + empty == 0 {
            0.0
        } else {
            empty as f64 / (busy + empty) as f64
        }
    }

    /// Millions of packets per second over the run's wall-clock time.
    pub fn mpps(&self) -> f64 {
        let s = self.elapsed.as_secs_f64();
        if s > 0.0 {
            self.packets() as f64 / s / 1e6
        } else {
            0.0
        }
    }
}

/// Runs a router on worker threads.
#[derive(Clone, Debug)]
pub struct Runtime {
    threads: usize,
    pin: bool,
    prefill: usize,
    idle_spin: Duration,
    profile: bool,
    until_stopped: bool,
}

/// The most workers a router runs: `brickroute run --threads` and `bench pipeline
/// --threads` refuse more, where a count in the billions made the per-worker tables'
/// allocations overflow or abort. It is above the core count of the machines a router
/// runs on (workers are pinned one per core). Memory grows with it: each worker
/// prefills its own frame pool (4,096 frames of 2,176 bytes, about 9 MB).
pub const MAX_WORKERS: usize = 1024;

impl Runtime {
    /// `threads` workers (at least one), pinned to cores. Callers that take the count
    /// from a user check it against [`MAX_WORKERS`] first.
    pub fn new(threads: usize) -> Runtime {
        Runtime {
            threads: threads.max(1),
            pin: true,
            prefill: 4096,
            idle_spin: IDLE_SPIN,
            profile: false,
            until_stopped: false,
        }
    }

    /// Whether workers keep running (asleep when idle) after their sources are done,
    /// until the stop flag is set: for a router that serves handlers meanwhile (a
    /// ControlSocket), whose writes may give its elements work (a Script's wait).
    pub fn until_stopped(mut self, on: bool) -> Runtime {
        self.until_stopped = on;
        self
    }

    /// How long a worker polls without receiving anything before it may sleep until
    /// traffic arrives (default [`IDLE_SPIN`]; zero sleeps after the first empty pass).
    pub fn idle_spin(mut self, spin: Duration) -> Runtime {
        self.idle_spin = spin;
        self
    }

    /// Whether to pin worker i to core i (modulo the number of cores).
    pub fn pin(mut self, pin: bool) -> Runtime {
        self.pin = pin;
        self
    }

    /// Frames each worker puts in its pool before it starts, so the run does not
    /// measure the pool warming up.
    pub fn prefill(mut self, frames: usize) -> Runtime {
        self.prefill = frames;
        self
    }

    /// Whether workers time every element call (`GraphInstance::set_profiling`):
    /// each worker's [`WorkerStats::profile`] then says where its cycles went. The
    /// timing itself costs two TSC reads a call.
    pub fn profile(mut self, on: bool) -> Runtime {
        self.profile = on;
        self
    }

    pub fn threads(&self) -> usize {
        self.threads
    }

    /// Runs until every worker's sources are done or the router's stop flag is set;
    /// then lets the elements clean up ([`RouterSpec::cleanup`]).
    ///
    /// # Panics
    /// If a worker panics: its panic sets the stop flag, so the other workers end after
    /// one more pass, as on any stop; the elements clean up; then the panic of the
    /// lowest-numbered worker that panicked resumes on the calling thread (its message
    /// was printed where it happened, by the panic hook).
    pub fn run(&self, spec: &RouterSpec) -> RunStats {
        self.run_until(spec, None, || false)
    }

    /// Like [`Runtime::run`], but sets the stop flag after `limit` at the latest.
    pub fn run_for(&self, spec: &RouterSpec, limit: Duration) -> RunStats {
        self.run_until(spec, Some(limit), || false)
    }

    /// Like [`Runtime::run`]; the calling thread also sets the stop flag once `limit`
    /// has passed or `stop_when()` returns true (checked every millisecond).
    pub fn run_until(
        &self,
        spec: &RouterSpec,
        limit: Option<Duration>,
        stop_when: impl Fn() -> bool,
    ) -> RunStats {
        let hz = tsc::tsc_hz();
        let cores = if self.pin {
            core_affinity::get_core_ids().unwrap_or_default()
        } else {
            Vec::new()
        };
        let stop = spec.stop_flag().clone();
        let finished = AtomicUsize::new(0);
        let start = Instant::now();
        let threads = self.threads;
        let workers = std::thread::scope(|s| {
            let handles: Vec<_> = (0..threads)
                .map(|i| {
                    let core = (!cores.is_empty()).then(|| cores[i % cores.len()]);
                    let finished = &finished;
                    let prefill = self.prefill;
                    let idle_spin = self.idle_spin;
                    let profile = self.profile;
                    let until_stopped = self.until_stopped;
                    std::thread::Builder::new()
                        .name(format!("worker{}", i))
                        .spawn_scoped(s, move || {
                            let _ending = WorkerEnd {
                                finished,
                                stop: spec.stop_flag(),
                            };
                            let pinned = core.filter(|c| core_affinity::set_for_current(*c)).map(|c| c.id);
                            packet::pool::prefill(prefill);
                            let mut st = worker_loop(
                                spec,
                                WorkerInfo {
                                    index: i,
                                    count: threads,
                                },
                                idle_spin,
                                profile,
                                until_stopped,
                            );
                            st.core = pinned;
                            st
                        })
                        .expect("spawn worker thread")
                })
                .collect();
            while finished.load(Ordering::Acquire) < threads {
                if stop_when() || limit.is_some_and(|l| start.elapsed() >= l) {
                    stop.end_run();
                    break;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            handles.into_iter().map(|h| h.join()).collect::<Vec<_>>()
        });
        let elapsed = start.elapsed();
        // A panicked worker stopped the others; the elements still flush and close
        // what they hold before its panic goes on.
        spec.cleanup();
        let workers = workers
            .into_iter()
            .map(|w| w.unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
            .collect();
        RunStats {
            workers,
            elapsed,
            tsc_hz: hz,
        }
    }
}

/// Counts a worker as finished when its thread ends, also by a panic, which stops the
/// router: the supervisor waits for every worker, and a worker that can no longer run
/// its share of the graph must not leave the others running for ever.
struct WorkerEnd<'a> {
    finished: &'a AtomicUsize,
    stop: &'a graph::StopFlag,
}

impl Drop for WorkerEnd<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.stop.request();
        }
        self.finished.fetch_add(1, Ordering::Release);
    }
}

/// How long a worker keeps polling without receiving anything before it sleeps until
/// one of its interfaces has traffic (when every live source can be waited on): long
/// enough that a worker under load never sleeps between bursts, short enough that an
/// idle router costs no CPU.
pub const IDLE_SPIN: Duration = Duration::from_micros(200);

/// The longest single sleep: a stop request is seen within this.
const IDLE_SLEEP_MS: i32 = 10;

/// Sleeps until one of `fds` polls readable, or [`IDLE_SLEEP_MS`] pass.
fn sleep_until_readable(fds: &[std::os::fd::RawFd], pollfds: &mut Vec<libc::pollfd>) {
    pollfds.clear();
    pollfds.extend(fds.iter().map(|&fd| libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    }));
    // SAFETY: `pollfds` holds `len` initialised pollfd entries for the call's duration;
    // the descriptors belong to ports the graph keeps open while it runs.
    unsafe { libc::poll(pollfds.as_mut_ptr(), pollfds.len() as libc::nfds_t, IDLE_SLEEP_MS) };
}

/// One worker: its own graph, polled until done or stopped.
fn worker_loop(
    spec: &RouterSpec,
    w: WorkerInfo,
    idle_spin: Duration,
    profile: bool,
    until_stopped: bool,
) -> WorkerStats {
    let mut g = spec.instantiate(w);
    g.set_profiling(profile);
    let stop = spec.stop_flag().clone();
    let mut st = WorkerStats {
        index: w.index,
        ..WorkerStats::default()
    };
    let idle_spin = (idle_spin.as_secs_f64() * tsc::tsc_hz()) as u64;
    let mut idle_since: Option<u64> = None;
    let (mut fds, mut pollfds) = (Vec::new(), Vec::new());
    let start = Instant::now();
    // One TSC read a pass: a pass ends where the next begins, so the loop's own
    // bookkeeping is counted with the next pass instead of with none.
    let mut t0 = tsc::rdtsc();
    loop {
        let stopping = stop.is_requested();
        let r = g.run_sources_in(spec, t0);
        let t1 = tsc::rdtsc();
        let cycles = t1.wrapping_sub(t0);
        st.iterations += 1;
        if r.packets > 0 {
            st.packets += r.packets as u64;
            st.busy_cycles += cycles;
            idle_since = None;
        } else {
            st.empty_cycles += cycles;
            st.empty_iterations += 1;
        }
        // A pass that began with the stop flag set was the last one: every source saw
        // the request (a ToDevice flushed its partial group).
        if r.all_done && !until_stopped || stopping {
            break;
        }
        if r.packets == 0 {
            let since = *idle_since.get_or_insert(t1);
            if t1.wrapping_sub(since) >= idle_spin {
                // Asked once per spin period: a source that must be polled keeps the
                // worker spinning until the next period.
                if g.idle_fds(&mut fds).is_some() {
                    sleep_until_readable(&fds, &mut pollfds);
                    st.idle_sleeps += 1;
                }
                idle_since = None;
                // Whatever the wait took is no pass's.
                t0 = tsc::rdtsc();
                continue;
            }
        }
        t0 = t1;
    }
    if profile {
        st.profile = g.profile();
    }
    // Anything still buffered leaves when the graph's elements drop, on this thread.
    drop(g);
    st.elapsed = start.elapsed();
    st
}

#[cfg(test)]
mod tests {
    use super::*;
    use graph::error::Landmark;
    use graph::lang::{Connection, ElementDecl, FlatConfig};
    use graph::registry::Registry;
    use io::{MemPort, Port};
    use std::path::Path;
    use std::sync::Arc;

    pub(crate) fn decl(name: &str, class: &str, config: &str) -> ElementDecl {
        ElementDecl {
            name: name.into(),
            class: class.into(),
            config: config.into(),
            landmark: Landmark::unknown(),
            class_landmark: Landmark::unknown(),
        }
    }

    pub(crate) fn conn(from: usize, to: usize) -> Connection {
        Connection {
            from,
            from_port: 0,
            to,
            to_port: 0,
            landmark: Landmark::unknown(),
        }
    }

    /// UDP/IPv4 frame from 10.1.0.`i`:`1000+i` to 10.2.0.1:9.
    fn frame(i: u8) -> Vec<u8> {
        let mut f = vec![0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2, 0x08, 0x00];
        f.extend_from_slice(&[0x45, 0, 0, 28, 0, 0, 0, 0, 64, 17, 0, 0, 10, 1, 0, i, 10, 2, 0, 1]);
        f.extend_from_slice(&[0x03, 0xe8 + i, 0, 9, 0, 8, 0, 0]);
        f
    }

    #[test]
    fn from_device_to_device_over_two_workers() {
        let frames: Vec<Vec<u8>> = (1..=16).map(frame).collect();
        let rx = Arc::new(MemPort::with_traffic(2, &frames, Some(10_001)));
        let tx = Arc::new(MemPort::new(2));
        // Both queues must carry traffic for the test to mean something.
        assert!(rx.rx_budget(0).unwrap() > 0 && rx.rx_budget(1).unwrap() > 0);
        let mut t = DeviceTable::new();
        t.insert("mem0", rx.clone());
        t.insert("mem1", tx.clone());
        let t = Arc::new(t);
        let mut reg = Registry::with_library();
        register(&mut reg, &t);
        let flat = FlatConfig {
            elements: vec![
                decl("src", "FromDevice", "mem0"),
                decl("c", "Counter", ""),
                decl("dst", "ToDevice", "mem1, BURST 16"),
            ],
            connections: vec![conn(0, 1), conn(1, 2)],
            requirements: vec![],
        };
        let spec = RouterSpec::build(&flat, &reg, Path::new("."), 2).unwrap();
        let stats = Runtime::new(2).pin(false).prefill(64).run(&spec);
        assert_eq!(stats.workers.len(), 2);
        assert_eq!(stats.packets(), 10_001);
        for q in 0..2 {
            let budget = rx.rx_budget(q).unwrap();
            // Worker q received exactly its queue's packets and sent them on its queue.
            assert_eq!(stats.workers[q].packets, budget, "worker {}", q);
            assert_eq!(rx.stats(q).rx_packets, budget);
            assert_eq!(tx.stats(q).tx_packets, budget);
            assert_eq!(tx.stats(q).tx_bytes, budget * 42);
        }
        assert_eq!(tx.totals().tx_packets, 10_001);
        assert_eq!(spec.read_handler("src.count").unwrap(), "10001");
        assert_eq!(spec.read_handler("c.count").unwrap(), "10001");
        assert_eq!(spec.read_handler("dst.count").unwrap(), "10001");
    }

    #[test]
    fn stop_flag_ends_an_endless_run_without_losing_packets() {
        let frames: Vec<Vec<u8>> = (1..=4).map(frame).collect();
        let rx = Arc::new(MemPort::with_traffic(1, &frames, None));
        let tx = Arc::new(MemPort::new(1));
        let mut t = DeviceTable::new();
        t.insert("in", rx.clone());
        t.insert("out", tx.clone());
        let t = Arc::new(t);
        let mut reg = Registry::empty();
        register(&mut reg, &t);
        let flat = FlatConfig {
            elements: vec![
                decl("src", "FromDevice", "in, BURST 5"),
                decl("dst", "ToDevice", "out, BURST 16, FLUSH_US 1000000"),
            ],
            connections: vec![conn(0, 1)],
            requirements: vec![],
        };
        let spec = RouterSpec::build(&flat, &reg, Path::new("."), 1).unwrap();
        let rx2 = rx.clone();
        let stats = Runtime::new(1)
            .pin(false)
            .run_until(&spec, None, move || rx2.stats(0).rx_packets >= 1003);
        let received = rx.stats(0).rx_packets;
        assert!(received >= 1003);
        // Every received packet was transmitted: the partial group was flushed.
        assert_eq!(tx.stats(0).tx_packets, received);
        assert_eq!(stats.packets(), received);
    }

    /// A port whose queue 0 receives the datagrams written to the other end of a Unix
    /// socket pair, and can be waited on like a real interface.
    struct SocketPort {
        rx: std::os::unix::net::UnixDatagram,
        received: std::sync::atomic::AtomicU64,
    }

    impl Port for SocketPort {
        fn queues(&self) -> usize {
            1
        }
        fn rx_burst(&self, _q: usize, batch: &mut packet::PacketBatch, max: usize) -> usize {
            let mut buf = [0u8; 2048];
            let mut n = 0;
            while n < max {
                match self.rx.recv(&mut buf) {
                    Ok(len) => {
                        batch.push(packet::Packet::from_slice(&buf[..len]));
                        n += 1;
                    }
                    Err(_) => break,
                }
            }
            self.received
                .fetch_add(n as u64, std::sync::atomic::Ordering::Relaxed);
            n
        }
        fn rx_finished(&self, _q: usize) -> bool {
            false
        }
        fn tx_burst(&self, _q: usize, batch: &mut packet::PacketBatch) -> usize {
            let n = batch.len();
            batch.clear();
            n
        }
        fn stats(&self, _q: usize) -> io::QueueStats {
            io::QueueStats {
                rx_packets: self.received.load(std::sync::atomic::Ordering::Relaxed),
                ..Default::default()
            }
        }
        fn wait_fd(&self, _q: usize) -> Option<std::os::fd::RawFd> {
            use std::os::fd::AsRawFd;
            Some(self.rx.as_raw_fd())
        }
    }

    #[test]
    fn an_idle_worker_sleeps_and_wakes_for_traffic() {
        let (rx, peer) = std::os::unix::net::UnixDatagram::pair().unwrap();
        rx.set_nonblocking(true).unwrap();
        let port = Arc::new(SocketPort {
            rx,
            received: Default::default(),
        });
        let mut t = DeviceTable::new();
        t.insert("sock", port.clone());
        let t = Arc::new(t);
        let mut reg = Registry::with_library();
        register(&mut reg, &t);
        let flat = FlatConfig {
            elements: vec![
                decl("src", "FromDevice", "sock"),
                decl("c", "Counter", ""),
                decl("d", "Discard", ""),
            ],
            connections: vec![conn(0, 1), conn(1, 2)],
            requirements: vec![],
        };
        let spec = RouterSpec::build(&flat, &reg, Path::new("."), 1).unwrap();
        // Idle for 300 ms (far longer than IDLE_SPIN), then five frames arrive; the run
        // ends once the worker has counted them (or after 10 s).
        let started = Instant::now();
        let sent = std::cell::Cell::new(false);
        let stats = Runtime::new(1)
            .pin(false)
            .run_until(&spec, Some(Duration::from_secs(10)), || {
                if !sent.get() && started.elapsed() >= Duration::from_millis(300) {
                    for i in 0..5u8 {
                        peer.send(&[i; 60]).unwrap();
                    }
                    sent.set(true);
                }
                port.stats(0).rx_packets >= 5
            });
        assert_eq!(spec.read_handler("c.count").unwrap(), "5");
        assert!(stats.workers[0].idle_sleeps > 0, "the idle worker never slept");
    }
}
