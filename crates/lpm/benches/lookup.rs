//! Lookups on BGP-shaped synthetic tables (1M IPv4, 234K IPv6 prefixes; see
//! `lpm::synth`), single and in batches of 32, for uniform random and table-drawn
//! queries; and the cost of one route update (delete + re-add) on the IPv4 table.

use criterion::measurement::WallTime;
use criterion::{black_box, criterion_group, criterion_main, BenchmarkGroup, Criterion, Throughput};
use lpm::synth::{self, Queries};
use lpm::{Ipv4Lpm, Ipv6Lpm, Lpm};

const QUERIES: usize = 1 << 16;

/// Lookups of `addrs` in batches of 32, as the element graph hands them over.
fn bench_batches<T: Lpm>(g: &mut BenchmarkGroup<'_, WallTime>, name: &str, table: &T, addrs: &[T::Key]) {
    let mut out = vec![0u32; addrs.len()];
    g.bench_function(format!("batch32_{}", name), |b| {
        b.iter(|| {
            for (ab, ob) in addrs.chunks(32).zip(out.chunks_mut(32)) {
                table.lookup_batch(black_box(ab), ob);
            }
            out[0]
        })
    });
}

fn ipv4(c: &mut Criterion) {
    let routes = synth::ipv4_table(1_000_000, 1);
    let table = Ipv4Lpm::build(&routes);
    let mut g = c.benchmark_group("ipv4_1m");
    g.throughput(Throughput::Elements(QUERIES as u64));
    for (name, kind) in [("random", Queries::Random), ("table", Queries::Table)] {
        let addrs = synth::ipv4_queries(&routes, QUERIES, kind, 7);
        bench_batches(&mut g, name, &table, &addrs);
        g.bench_function(format!("single_{}", name), |b| {
            b.iter(|| {
                addrs
                    .iter()
                    .map(|&a| table.lookup(black_box(a)).unwrap_or(0))
                    .fold(0u32, u32::wrapping_add)
            })
        });
    }
    g.finish();

    let mut g = c.benchmark_group("ipv4_1m_update");
    let mut i = 0usize;
    g.bench_function("delete_readd", |b| {
        b.iter(|| {
            let (a, l, nh) = routes[i % routes.len()];
            i = i.wrapping_add(7919);
            table.remove(a, l);
            table.insert(a, l, nh)
        })
    });
    g.finish();
}

fn ipv6(c: &mut Criterion) {
    let routes = synth::ipv6_table(234_000, 1);
    let table = Ipv6Lpm::build(&routes);
    let mut g = c.benchmark_group("ipv6_234k");
    g.throughput(Throughput::Elements(QUERIES as u64));
    for (name, kind) in [("random", Queries::Random), ("table", Queries::Table)] {
        let addrs = synth::ipv6_queries(&routes, QUERIES, kind, 7);
        bench_batches(&mut g, name, &table, &addrs);
    }
    g.finish();
}

fn build(c: &mut Criterion) {
    let routes = synth::ipv4_table(1_000_000, 1);
    let mut g = c.benchmark_group("build");
    g.sample_size(10);
    g.bench_function("ipv4_1m", |b| b.iter(|| Ipv4Lpm::build(black_box(&routes)).len()));
    g.finish();
}

criterion_group!(benches, ipv4, ipv6, build);
criterion_main!(benches);
