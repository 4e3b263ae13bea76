//! `brickroute fib`: the longest-prefix-match tables on their own — look addresses up in a
//! table file, benchmark the structure, write realistic synthetic tables.

use lpm::synth::{self, Queries};
use lpm::table::{self, RouteTable};
use lpm::{Ipv4Lpm, Ipv6Lpm, Lpm, LpmView, ReadGuard};
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// Synthetic table sizes when `fib bench` is given no table (today's BGP tables).
const V4_PREFIXES: usize = 1_000_000;
const V6_PREFIXES: usize = 234_000;
const SEED: u64 = 1;
/// Lookups a benchmark reader makes under one pin before it repins (64 batches of 32).
const LOOKUPS_PER_PIN: usize = 2048;

/// A reader's held pin, moved on after every [`LOOKUPS_PER_PIN`] lookups, with a view of
/// the table taken at each (re)pin: how a thread that loops over batches uses the tables
/// (see `lpm::ReadGuard` and `lpm::Ipv4View`).
struct Reader {
    guard: ReadGuard,
}

impl Reader {
    fn new() -> Reader {
        Reader { guard: lpm::pin() }
    }

    /// Looks up `q` in batches of `batch`, answers into `out` (as long as `q`): as many
    /// whole batches under one view as fit in [`LOOKUPS_PER_PIN`] lookups (one at least),
    /// then a repin and a new view.
    #[inline]
    fn pass<T: Lpm>(&mut self, lpm: &T, q: &[T::Key], batch: usize, out: &mut [u32]) {
        let per_pin = batch * (LOOKUPS_PER_PIN / batch).max(1);
        for (qs, os) in q.chunks(per_pin).zip(out.chunks_mut(per_pin)) {
            self.guard.repin();
            let view = lpm.view(&self.guard);
            for (x, o) in qs.chunks(batch).zip(os.chunks_mut(batch)) {
                view.lookup_batch(x, o);
            }
        }
    }
}

#[derive(clap::Subcommand)]
pub enum FibCommand {
    /// Reads addresses from standard input, one per line, and prints `ADDRESS NEXTHOP`
    /// (or `ADDRESS -` when no prefix matches) for each, in order. Blank lines and `#`
    /// comments are skipped; a line that is not an address is reported on standard
    /// error with its line number and skipped, and the exit status is then 1.
    Lookup(LookupArgs),
    /// Measures lookups/s, ns/lookup, memory, build time and update latency.
    ///
    /// Readers loop over batches the way a forwarding thread does: each holds one pin of
    /// the tables' memory reclamation (`lpm::ReadGuard`) across its batches and repins
    /// after every 2,048 lookups (64 batches of 32; a held pin delays the frees of
    /// replaced chunks, and this keeps that delay well under a millisecond), taking a
    /// view of the table (`lpm::Ipv4View`) at each repin and looking its batches up
    /// through it.
    Bench(BenchArgs),
    /// Writes the realistic synthetic table `fib bench` uses without --table.
    Gen(GenArgs),
}

#[derive(clap::Args)]
pub struct LookupArgs {
    /// Route table: `PREFIX/LEN NEXTHOP` per line, IPv4 and IPv6 mixed, `#` comments;
    /// or an MRT routing table dump, next hops numbered by address; either may be gzip-
    /// or bzip2-compressed.
    #[arg(long)]
    table: PathBuf,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum QueryKind {
    /// Uniform random addresses (IPv6: uniform in 2000::/3).
    Random,
    /// A random host inside a random prefix of the table.
    Table,
}

#[derive(clap::Args)]
pub struct BenchArgs {
    /// Route table file (text, or an MRT dump as for `fib lookup`); without it a
    /// realistic table is generated (see `fib gen`).
    #[arg(long)]
    table: Option<PathBuf>,
    #[arg(long, value_enum, default_value = "random")]
    queries: QueryKind,
    /// Addresses per lookup_batch call.
    #[arg(long, default_value_t = 32)]
    batch: usize,
    /// Query addresses per run (IPv6 uses half), at most 2^26.
    #[arg(long, default_value_t = 4 << 20, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1 << 26))]
    count: usize,
    /// Timed runs; the median is reported.
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// Route updates timed (each a delete or a re-add) while a reader thread looks up.
    #[arg(long, default_value_t = 20_000)]
    updates: usize,
    /// Skip the IPv4 yardstick: by default the same queries then go through a DIR-24-8
    /// table (the layout of DPDK's rte_lpm and rte_fib, 64 MiB), which must give the
    /// same answers, and the ratio of the two rates is reported.
    #[arg(long)]
    no_baseline: bool,
    /// One JSON object per family and line.
    #[arg(long)]
    json: bool,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum Family {
    #[value(name = "4")]
    V4,
    #[value(name = "6")]
    V6,
    Both,
}

#[derive(clap::Args)]
pub struct GenArgs {
    #[arg(long, value_enum, default_value = "both")]
    family: Family,
    /// Prefixes (default: 1000000 IPv4, 234000 IPv6), at most 2^24.
    #[arg(long, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(0..=1 << 24))]
    count: Option<usize>,
    #[arg(long, default_value_t = SEED)]
    seed: u64,
}

pub fn main(cmd: FibCommand) -> ExitCode {
    let r = match cmd {
        FibCommand::Lookup(a) => lookup(a).map_err(|e| ("lookup", e)),
        FibCommand::Bench(a) => bench(a).map_err(|e| ("bench", e)),
        FibCommand::Gen(a) => gen(a).map_err(|e| ("gen", e)),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err((what, e)) => {
            eprintln!("brickroute fib {}: {}", what, e);
            ExitCode::from(1)
        }
    }
}

/// Loads a table file; warns on standard error (as `brickroute fib WHAT: warning: ...`)
/// about prefixes written with host bits set, which load as their network.
fn load_table(path: &Path, what: &str) -> Result<RouteTable, String> {
    let t = table::load(path).map_err(|e| e.to_string())?;
    if let Some(w) = t.host_bits_warning(&path.display().to_string()) {
        eprintln!("brickroute fib {}: warning: {}", what, w);
    }
    Ok(t)
}

fn lookup(a: LookupArgs) -> Result<(), String> {
    let t = load_table(&a.table, "lookup")?;
    let v4 = Ipv4Lpm::build(&t.v4);
    let v6 = Ipv6Lpm::build(&t.v6);
    let mut stdin = BufReader::with_capacity(1 << 16, std::io::stdin());
    let mut out = BufWriter::new(std::io::stdout().lock());
    let flush = |out: &mut BufWriter<_>| out.flush().map_err(|e| format!("standard output: {}", e));
    let mut bad = 0usize;
    let mut raw = Vec::new();
    for n in 1.. {
        // Answers go out whenever no more input is waiting, so a caller that writes an
        // address and waits for its answer gets it.
        if stdin.buffer().is_empty() {
            flush(&mut out)?;
        }
        raw.clear();
        let got = stdin
            .read_until(b'\n', &mut raw)
            .map_err(|e| format!("standard input: {}", e))?;
        if got == 0 {
            break;
        }
        // A bad line is reported and skipped: the addresses after it are still answered
        // (and those before it are out first).
        let Ok(line) = std::str::from_utf8(&raw) else {
            flush(&mut out)?;
            eprintln!("brickroute fib lookup: stdin:{}: not UTF-8 text", n);
            bad += 1;
            continue;
        };
        // (`#` starts a comment, as in route files.)
        let text = line.split('#').next().unwrap_or("").trim();
        if text.is_empty() {
            continue;
        }
        let hop = match text.parse::<IpAddr>() {
            Ok(IpAddr::V4(x)) => v4.lookup(u32::from(x)),
            Ok(IpAddr::V6(x)) => v6.lookup(u128::from(x)),
            Err(_) => {
                flush(&mut out)?;
                eprintln!(
                    "brickroute fib lookup: stdin:{}: {:?} is not an IPv4 or IPv6 address",
                    n, text
                );
                bad += 1;
                continue;
            }
        };
        let w = match hop {
            Some(h) => writeln!(out, "{} {}", text, h),
            None => writeln!(out, "{} -", text),
        };
        w.map_err(|e| format!("standard output: {}", e))?;
    }
    flush(&mut out)?;
    match bad {
        0 => Ok(()),
        1 => Err("1 line of standard input was not an address".to_string()),
        n => Err(format!("{} lines of standard input were not addresses", n)),
    }
}

fn gen(a: GenArgs) -> Result<(), String> {
    let mut t = RouteTable::default();
    if matches!(a.family, Family::V4 | Family::Both) {
        t.v4 = synth::ipv4_table(a.count.unwrap_or(V4_PREFIXES), a.seed);
    }
    if matches!(a.family, Family::V6 | Family::Both) {
        t.v6 = synth::ipv6_table(a.count.unwrap_or(V6_PREFIXES), a.seed);
    }
    let mut out = BufWriter::new(std::io::stdout().lock());
    table::write(&t, &mut out)
        .and_then(|_| out.flush())
        .map_err(|e| format!("standard output: {}", e))
}

/// What one family's benchmark measured.
struct Report {
    family: &'static str,
    prefixes: usize,
    queries: &'static str,
    batch: usize,
    /// Median, slowest and fastest pass.
    lookups_per_sec: f64,
    lookups_per_sec_min: f64,
    lookups_per_sec_max: f64,
    memory_bytes: usize,
    control_bytes: usize,
    build_seconds: f64,
    /// Updates timed (none with `--updates 0`).
    updates: usize,
    update_median_us: f64,
    update_p99_us: f64,
    /// The yardstick, its median lookups/s, and ours over it.
    baseline: Option<(Yardstick, f64, f64)>,
}

/// A structure that answers the same queries beside ours, for a ratio taken in one run.
struct Yardstick {
    /// Its name in JSON, and in the text output.
    key: &'static str,
    title: &'static str,
    memory_bytes: usize,
    build_seconds: f64,
}

/// A batch lookup: addresses in, next hops (or NONE) out.
type BatchLookup<K> = Box<dyn Fn(&[K], &mut [u32])>;

/// A yardstick and how to query it.
struct BaselineTable<K> {
    about: Yardstick,
    /// Addresses per call (as the DPDK driver calls `rte_fib_lookup_bulk`).
    batch: usize,
    lookup_batch: BatchLookup<K>,
}

/// The IPv4 yardstick, unless `--no-baseline` or a next hop does not fit its entries.
fn dir24_8_baseline(a: &BenchArgs, routes: &[(u32, u8, u32)]) -> Option<BaselineTable<u32>> {
    if a.no_baseline {
        return None;
    }
    let start = Instant::now();
    let Some(t) = lpm::baseline::Dir24_8::build(routes) else {
        eprintln!(
            "brickroute fib bench: no DIR-24-8 yardstick: its entries hold next hops up to {}",
            lpm::baseline::Dir24_8::MAX_NEXT_HOP
        );
        return None;
    };
    Some(BaselineTable {
        about: Yardstick {
            key: "dir24_8",
            title: "DIR-24-8",
            memory_bytes: t.memory_bytes(),
            build_seconds: start.elapsed().as_secs_f64(),
        },
        batch: 64,
        lookup_batch: Box::new(move |x, o| t.lookup_batch(x, o)),
    })
}

impl Report {
    fn print(&self, json: bool) {
        let ns = 1e9 / self.lookups_per_sec;
        if json {
            println!(
                "{{\"family\":\"{}\",\"prefixes\":{},\"queries\":\"{}\",\"batch\":{},\"lookups_per_sec\":{:.0},\"lookups_per_sec_min\":{:.0},\"lookups_per_sec_max\":{:.0},\"ns_per_lookup\":{:.3},\"memory_bytes\":{},\"control_bytes\":{},\"build_seconds\":{:.4},\"update_median_us\":{:.3},\"update_p99_us\":{:.3}{}}}",
                self.family, self.prefixes, self.queries, self.batch, self.lookups_per_sec,
                self.lookups_per_sec_min, self.lookups_per_sec_max, ns,
                self.memory_bytes, self.control_bytes, self.build_seconds,
                self.update_median_us, self.update_p99_us,
                match &self.baseline {
                    Some((b, rate, ratio)) => format!(
                        ",\"baseline\":\"{}\",\"baseline_lookups_per_sec\":{:.0},\"baseline_memory_bytes\":{},\"baseline_build_seconds\":{:.4},\"ratio_to_baseline\":{:.3}",
                        b.key, rate, b.memory_bytes, b.build_seconds, ratio
                    ),
                    None => String::new(),
                }
            );
        } else {
            println!(
                "{}: {} prefixes, built in {:.3} s, lookup structure {:.2} MiB (route record {:.2} MiB)",
                self.family,
                self.prefixes,
                self.build_seconds,
                self.memory_bytes as f64 / 1048576.0,
                self.control_bytes as f64 / 1048576.0
            );
            println!(
                "  {} queries, batch {}: {:.2} Mlookups/s (passes {:.2}-{:.2}), {:.2} ns/lookup",
                self.queries,
                self.batch,
                self.lookups_per_sec / 1e6,
                self.lookups_per_sec_min / 1e6,
                self.lookups_per_sec_max / 1e6,
                ns
            );
            if let Some((b, rate, ratio)) = &self.baseline {
                println!(
                    "  the same queries through {} ({:.1} MiB, built in {:.3} s, same answers): {:.2} Mlookups/s; ours {:.2}x",
                    b.title,
                    b.memory_bytes as f64 / 1048576.0,
                    b.build_seconds,
                    rate / 1e6,
                    ratio
                );
            }
            if self.updates == 0 {
                println!("  updates while lookups run: not measured (--updates 0)");
            } else {
                println!(
                    "  {} updates while lookups run: median {:.2} us, p99 {:.2} us",
                    self.updates, self.update_median_us, self.update_p99_us
                );
            }
        }
    }
}

fn bench(a: BenchArgs) -> Result<(), String> {
    if a.batch == 0 || a.runs == 0 || a.count == 0 {
        return Err("--batch, --runs and --count must be at least 1".into());
    }
    let t = match &a.table {
        Some(p) => load_table(p, "bench")?,
        None => RouteTable {
            v4: synth::ipv4_table(V4_PREFIXES, SEED),
            v6: synth::ipv6_table(V6_PREFIXES, SEED),
            host_bits: Vec::new(),
        },
    };
    if t.v4.is_empty() && t.v6.is_empty() {
        return Err("the table has no routes".into());
    }
    let kind = match a.queries {
        QueryKind::Random => Queries::Random,
        QueryKind::Table => Queries::Table,
    };
    let name = match kind {
        Queries::Random => "random",
        Queries::Table => "table",
    };
    if !t.v4.is_empty() {
        bench_family::<Ipv4Lpm>(
            "ipv4",
            &t.v4,
            name,
            &a,
            || synth::ipv4_queries(&t.v4, a.count, kind, 12345),
            || dir24_8_baseline(&a, &t.v4),
        )?
        .print(a.json);
    }
    if !t.v6.is_empty() {
        bench_family::<Ipv6Lpm>(
            "ipv6",
            &t.v6,
            name,
            &a,
            || synth::ipv6_queries(&t.v6, a.count.div_ceil(2), kind, 12345),
            || None,
        )?
        .print(a.json);
    }
    Ok(())
}

/// One family's figures: build `routes`, look up the queries `make_queries` gives, then
/// the same queries through the yardstick `make_baseline` gives (which must answer each
/// as ours does), then time updates while a second thread looks up.
fn bench_family<T: Lpm>(
    family: &'static str,
    routes: &[(T::Key, u8, u32)],
    queries: &'static str,
    a: &BenchArgs,
    make_queries: impl FnOnce() -> Vec<T::Key>,
    make_baseline: impl FnOnce() -> Option<BaselineTable<T::Key>>,
) -> Result<Report, String> {
    let start = Instant::now();
    let lpm = Arc::new(T::build(routes));
    let build_seconds = start.elapsed().as_secs_f64();
    // Measured before the update test: replaced arena nodes stay until the table goes.
    let memory_bytes = lpm.memory_bytes();
    let control_bytes = lpm.control_bytes();
    let q = make_queries();
    let mut ours = Passes::new(q.len());
    let mut reader = Reader::new();
    ours.time(a.runs, |out| reader.pass(&*lpm, &q, a.batch, out));
    // (Its pin would hold back the frees of the updates timed below.)
    drop(reader);
    // Built and run after ours, not pass by pass with it: its 64 MiB would evict our
    // table from the caches before each of our passes (measured: ours about 5 % slower,
    // which is not what a router sees).
    let baseline = match make_baseline() {
        None => None,
        Some(b) => {
            let mut theirs = Passes::new(q.len());
            theirs.time(a.runs, |out| {
                for (x, o) in q.chunks(b.batch).zip(out.chunks_mut(b.batch)) {
                    (b.lookup_batch)(x, o);
                }
            });
            if let Some(j) = (0..q.len()).find(|&j| theirs.out[j] != ours.out[j]) {
                return Err(format!(
                    "the {} yardstick answers query {} ({:?}) with {}, ours with {}",
                    b.about.title, j, q[j], theirs.out[j], ours.out[j]
                ));
            }
            let rate = theirs.spread().1;
            Some((b.about, rate, ours.spread().1 / rate))
        }
    };
    let (lps_min, lps, lps_max) = ours.spread();
    if !(lps_min > 0.0 && lps_max.is_finite()) {
        return Err(format!(
            "{} queries ran too fast to time ({} lookups/s): raise --count",
            family, lps_min
        ));
    }
    drop(ours);
    let (median, p99) = updates(routes, a.updates, q.clone(), lpm.clone(), |p, l, nh| {
        match nh {
            Some(nh) => lpm.insert(p, l, nh),
            None => lpm.remove(p, l),
        };
    });
    Ok(Report {
        family,
        prefixes: lpm.len(),
        queries,
        batch: a.batch,
        lookups_per_sec: lps,
        lookups_per_sec_min: lps_min,
        lookups_per_sec_max: lps_max,
        memory_bytes,
        control_bytes,
        build_seconds,
        updates: a.updates,
        update_median_us: median,
        update_p99_us: p99,
        baseline,
    })
}

/// Passes of one structure over the queries: the answers of the last pass, and the
/// lookups/s of the timed ones, slowest first.
struct Passes {
    out: Vec<u32>,
    rates: Vec<f64>,
}

impl Passes {
    fn new(n: usize) -> Passes {
        Passes {
            out: vec![0u32; n],
            rates: Vec::new(),
        }
    }

    /// One untimed pass (it warms caches and page tables), then `runs` timed ones; a
    /// pass answers every query into the slice it is given.
    fn time(&mut self, runs: usize, mut pass: impl FnMut(&mut [u32])) {
        for timed in 0..=runs {
            let start = Instant::now();
            pass(&mut self.out);
            if timed > 0 {
                self.rates
                    .push(self.out.len() as f64 / start.elapsed().as_secs_f64());
            }
        }
        self.rates.sort_by(|a, b| a.total_cmp(b));
    }

    /// The slowest, the median and the fastest timed pass (`time` leaves them sorted).
    fn spread(&self) -> (f64, f64, f64) {
        let r = &self.rates;
        (r[0], r[r.len() / 2], r[r.len() - 1])
    }
}

/// Times `n` updates — deletes and re-adds of table prefixes spread over the table —
/// while a reader thread runs batch lookups (repinning as [`Reader`] does, so the
/// writer's deferred frees run as they would beside a forwarding thread); returns
/// (median, 99th percentile) in us.
fn updates<T: Lpm>(
    routes: &[(T::Key, u8, u32)],
    n: usize,
    queries: Vec<T::Key>,
    lpm: Arc<T>,
    update: impl Fn(T::Key, u8, Option<u32>),
) -> (f64, f64) {
    if n == 0 || routes.is_empty() {
        return (0.0, 0.0);
    }
    let stop = Arc::new(AtomicBool::new(false));
    let handle = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut out = vec![0u32; LOOKUPS_PER_PIN];
            let mut reader = Reader::new();
            while !stop.load(Ordering::Relaxed) {
                for x in queries.chunks(LOOKUPS_PER_PIN) {
                    reader.pass(&*lpm, x, 32, &mut out[..x.len()]);
                }
            }
        })
    };
    let mut times = Vec::with_capacity(n);
    let mut rng = synth::Rng::new(99);
    while times.len() < n {
        let (p, l, nh) = routes[rng.below(routes.len() as u64) as usize];
        let start = Instant::now();
        update(p, l, None);
        times.push(start.elapsed().as_secs_f64() * 1e6);
        let start = Instant::now();
        update(p, l, Some(nh));
        times.push(start.elapsed().as_secs_f64() * 1e6);
    }
    stop.store(true, Ordering::Relaxed);
    let _ = handle.join();
    times.sort_by(|a, b| a.total_cmp(b));
    (times[times.len() / 2], times[times.len() * 99 / 100])
}
