//! `brickroute bench rss`: what software RSS costs an AF_PACKET interface, per frame.
//!
//! The kernel runs brickroute's steering program (the Toeplitz hash, the indirection
//! table, flow rules first) once for each frame an interface of more than one queue
//! receives. This runs it on frames of each kind through the kernel's own test runner
//! (`BPF_PROG_TEST_RUN`, which times its runs), in turns with a program that only
//! returns 0, so the extra nanoseconds come from the same minutes.

use classify::rss::{parse_rules, RssSettings};
use runtime::bench::median;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct RssArgs {
    /// Queues the table spreads over.
    #[arg(long, default_value_t = 4)]
    queues: usize,
    /// Runs of each program on each frame a round (the kernel's timing is their mean).
    #[arg(long, default_value_t = 1_000_000)]
    repeat: u32,
    /// Rounds of all programs in turns; the median round is reported.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=1000))]
    rounds: u64,
    /// One JSON object instead of the table.
    #[arg(long)]
    json: bool,
}

/// Ethernet header, then `l3` (EtherType `ethertype`).
fn ether(ethertype: u16, l3: &[u8]) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2];
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(l3);
    f
}

/// IPv4 UDP from 10.0.0.1:1234 to 198.51.100.7:53, 64 bytes on the wire.
fn ipv4_udp() -> Vec<u8> {
    let mut ip = vec![
        0x45, 0, 0, 46, 0, 1, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 198, 51, 100, 7,
    ];
    ip.extend_from_slice(&[0x04, 0xd2, 0, 53, 0, 26, 0, 0]);
    ip.resize(46, 0);
    ether(0x0800, &ip)
}

/// IPv6 from 2001:db8::1 to 2001:db8:1::7, `ext` extension headers (hop-by-hop,
/// destination options, ... 8 bytes each) before TCP ports 443 -> 50000.
fn ipv6_tcp(ext: usize) -> Vec<u8> {
    let mut rest = Vec::new();
    for i in 0..ext {
        let next = if i + 1 == ext { 6 } else { 60 };
        rest.extend_from_slice(&[next, 0, 1, 4, 0, 0, 0, 0]);
    }
    rest.extend_from_slice(&[
        0x01, 0xbb, 0xc3, 0x50, 0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x10, 0, 0, 0, 0, 0, 0,
    ]);
    let mut ip = vec![0x60, 0, 0, 0];
    ip.extend_from_slice(&(rest.len() as u16).to_be_bytes());
    ip.extend_from_slice(&[if ext == 0 { 6 } else { 0 }, 64]);
    ip.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
    ip.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7]);
    ip.extend_from_slice(&rest);
    ether(0x86dd, &ip)
}

/// `n` rules for frames of `family` that a frame sent by the functions above passes
/// every test of but the last (its destination port): each is tested in full, the
/// worst case for its rule count. IPv6 rules test both addresses in full.
fn missing_rules(n: usize, family: &str) -> String {
    (0..n)
        .map(|i| match family {
            "ip" => format!(
                "udp src 10.0.0.1 dst 198.51.100.7 sport 1234 dport {} queue 1",
                2000 + i
            ),
            _ => format!(
                "tcp src 2001:db8::1 dst 2001:db8:1::7 sport 443 dport {} queue 1",
                2000 + i
            ),
        })
        .collect::<Vec<_>>()
        .join("; ")
}

pub fn main(a: RssArgs) -> ExitCode {
    match run(a) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => crate::report::fail("bench rss", e),
    }
}

fn run(a: RssArgs) -> Result<(), String> {
    if !(2..=classify::RETA_SIZE).contains(&a.queues) {
        return Err(format!(
            "--queues is 2 to {}, not {}",
            classify::RETA_SIZE,
            a.queues
        ));
    }
    if a.repeat == 0 {
        return Err("--repeat must be at least 1".into());
    }
    ::bench::testbed::require_root()?;
    let frames = [
        ("IPv4 UDP", "ip", ipv4_udp()),
        ("IPv6 TCP", "ip6", ipv6_tcp(0)),
        ("IPv6 TCP, 3 extension headers", "ip6", ipv6_tcp(3)),
    ];
    let rule_counts = [0usize, 16, 64];
    // [frame][rule count]: settings with rules of the frame's family.
    let settings: Vec<Vec<RssSettings>> = frames
        .iter()
        .map(|(_, family, _)| {
            rule_counts
                .iter()
                .map(|&n| {
                    let mut s = RssSettings::new(a.queues);
                    s.rules = parse_rules(&missing_rules(n, family))?;
                    Ok(s)
                })
                .collect::<Result<Vec<_>, String>>()
        })
        .collect::<Result<_, String>>()?;
    // [frame][program: empty, then each rule count][round]
    let mut ns = vec![vec![Vec::new(); 1 + rule_counts.len()]; frames.len()];
    for _ in 0..a.rounds {
        for (f, (_, _, frame)) in frames.iter().enumerate() {
            let programs = std::iter::once(None).chain(settings[f].iter().map(Some));
            for (p, s) in programs.enumerate() {
                let cost = io::rss_program_cost(s, frame, a.repeat)?;
                ns[f][p].push(f64::from(cost.ns));
            }
        }
    }
    // A change of settings: the new program built (map, verifier) for each rule count,
    // with the IPv6 rules, the larger ones.
    let mut build_us = vec![Vec::new(); rule_counts.len()];
    for _ in 0..a.rounds {
        for (i, s) in settings[1].iter().enumerate() {
            build_us[i].push(io::rss_program_build_time(s)?.as_secs_f64() * 1e6);
        }
    }
    let build_us: Vec<f64> = build_us.iter().map(|v| median(v)).collect();
    let rows: Vec<(&str, usize, f64, f64)> = frames
        .iter()
        .enumerate()
        .flat_map(|(f, (name, _, _))| {
            let base = median(&ns[f][0]);
            rule_counts
                .iter()
                .enumerate()
                .map(|(i, &n)| (*name, n, median(&ns[f][1 + i]), base))
                .collect::<Vec<_>>()
        })
        .collect();
    if a.json {
        let rows: Vec<serde_json::Value> = rows
            .iter()
            .map(|&(frame, rules, ns, base)| {
                serde_json::json!({"frame": frame, "rules": rules, "ns_per_frame": ns,
                    "empty_program_ns": base, "extra_ns": ns - base})
            })
            .collect();
        let builds: Vec<serde_json::Value> = rule_counts
            .iter()
            .zip(&build_us)
            .map(|(&rules, &us)| serde_json::json!({"rules": rules, "build_us": us}))
            .collect();
        println!(
            "{}",
            serde_json::json!({"queues": a.queues, "repeat": a.repeat, "rounds": a.rounds, "results": rows,
                "changes": builds})
        );
        return Ok(());
    }
    println!(
        "RSS steering program, {} queues: median of {} rounds of {} kernel test runs each",
        a.queues, a.rounds, a.repeat
    );
    println!();
    println!(
        "{:<32}{:>7}{:>12}{:>16}{:>12}",
        "frame", "rules", "ns/frame", "empty program", "extra ns"
    );
    for (frame, rules, ns, base) in rows {
        println!(
            "{:<32}{:>7}{:>12.1}{:>16.1}{:>12.1}",
            frame,
            rules,
            ns,
            base,
            ns - base
        );
    }
    println!();
    println!("a change of settings (the new map and program built, the verifier run; then handed to the fanout group):");
    for (&rules, &us) in rule_counts.iter().zip(&build_us) {
        println!("  {:>2} IPv6 rules: {:.0} us", rules, us);
    }
    println!();
    println!("rules: that many flow rules of the frame's family, each failing only at its last test (the worst case).");
    println!(
        "empty program: one that returns 0, run in turns with the others: the cost of running any program."
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_frames_are_what_the_table_says() {
        let v4 = ipv4_udp();
        assert_eq!(v4.len(), 60);
        let f = classify::Toeplitz::microsoft();
        // UDP ports are hashed: a frame with other ports hashes elsewhere.
        let mut other = v4.clone();
        other[35] ^= 1;
        assert_ne!(f.hash_frame(&v4), f.hash_frame(&other));
        // Extension headers are stepped over: the same 4-tuple, the same hash.
        assert_eq!(f.hash_frame(&ipv6_tcp(0)), f.hash_frame(&ipv6_tcp(3)));
        for (family, frame, dport) in [
            ("ip", ipv4_udp(), 53),
            ("ip6", ipv6_tcp(0), 50000),
            ("ip6", ipv6_tcp(3), 50000),
        ] {
            let rules = parse_rules(&missing_rules(64, family)).unwrap();
            assert_eq!(rules.len(), 64);
            assert_eq!(classify::rss::rule_queue(&rules, &frame), None);
            // Every test but the destination port passes: the rule with the frame's
            // own port matches.
            let own = missing_rules(1, family).replace("dport 2000", &format!("dport {}", dport));
            assert_eq!(
                classify::rss::rule_queue(&parse_rules(&own).unwrap(), &frame),
                Some(1)
            );
        }
    }
}
