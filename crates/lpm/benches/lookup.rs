//! Single versus batched lookups on a random 256K-prefix table, and the naive reference
//! on the same table.

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use lpm::reference::NaiveLpm;
use lpm::Ipv4Lpm;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 16) as u32
    }
}

/// Prefix lengths shaped like a BGP table: mostly /24, then /16../23, a few longer.
fn random_routes(n: usize) -> Vec<(u32, u8, u32)> {
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    (0..n)
        .map(|_| {
            let r = rng.next() % 100;
            let len = match r {
                0..=59 => 24,
                60..=94 => 16 + (rng.next() % 8) as u8,
                _ => 25 + (rng.next() % 8) as u8,
            };
            (rng.next(), len, rng.next() % 1024)
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let routes = random_routes(256 * 1024);
    let table = Ipv4Lpm::new();
    for &(a, l, nh) in &routes {
        table.insert(a, l, nh);
    }
    let mut rng = Rng(0x1234_5678_9abc_def1);
    // Half the addresses fall under installed prefixes, half are random.
    let addrs: Vec<u32> = (0..4096)
        .map(|i| {
            if i % 2 == 0 {
                let (a, l, _) = routes[rng.next() as usize % routes.len()];
                a | (rng.next() >> l.min(31))
            } else {
                rng.next()
            }
        })
        .collect();

    let mut g = c.benchmark_group("ipv4_lookup_256k");
    g.throughput(Throughput::Elements(addrs.len() as u64));
    g.bench_function("single", |b| {
        b.iter(|| {
            let mut acc = 0u32;
            for &a in &addrs {
                acc = acc.wrapping_add(table.lookup(black_box(a)).unwrap_or(0));
            }
            acc
        })
    });
    let mut out = vec![0u32; addrs.len()];
    g.bench_function("batch32", |b| {
        b.iter(|| {
            for (ab, ob) in addrs.chunks(32).zip(out.chunks_mut(32)) {
                table.lookup_batch(black_box(ab), ob);
            }
            out[0]
        })
    });
    g.finish();

    let mut naive = NaiveLpm::new();
    for &(a, l, nh) in &routes {
        naive.insert(a, l, nh);
    }
    let mut g = c.benchmark_group("naive_lookup_256k");
    g.sample_size(10);
    g.throughput(Throughput::Elements(16));
    g.bench_function("single", |b| {
        b.iter(|| {
            addrs[..16]
                .iter()
                .map(|&a| naive.lookup(black_box(a)).unwrap_or(0))
                .sum::<u32>()
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
