//! RSS of AF_PACKET ports: the BPF program against `classify`'s Toeplitz hash (itself
//! checked against Microsoft's test vectors), and live changes of key and table.

use super::*;
use classify::rss::{parse_key, KEY_LEN};
use classify::Reta;

/// Every frame of these tests ends with this and a 16-bit id, so that a received frame
/// is told apart from anything else and matched to the frame sent.
const MARK: [u8; 2] = [0xb5, 0x5b];

const MACS: [u8; 12] = [0x02, 0, 0, 0, 0, 0x0b, 0x02, 0, 0, 0, 0, 0x0a];

fn marked(mut f: Vec<u8>, id: u16) -> Vec<u8> {
    f.extend_from_slice(&MARK);
    f.extend_from_slice(&id.to_be_bytes());
    f
}

fn id_of(f: &[u8]) -> Option<u16> {
    let n = f.len();
    (n >= 4 && f[n - 4..n - 2] == MARK).then(|| u16::from_be_bytes([f[n - 2], f[n - 1]]))
}

/// Ethernet (with `tags`, each a TPID and a TCI) and an IPv4 header of `ihl` words
/// (options zero), protocol `proto`, flags+offset `frag`, then `rest`.
fn ipv4(tags: &[u16], ihl: u8, frag: u16, proto: u8, src: [u8; 4], dst: [u8; 4], rest: &[u8]) -> Vec<u8> {
    let mut f = MACS.to_vec();
    for &t in tags {
        f.extend_from_slice(&t.to_be_bytes());
        f.extend_from_slice(&[0x00, 0x07]);
    }
    f.extend_from_slice(&[0x08, 0x00]);
    let len = (usize::from(ihl) * 4 + rest.len() + 4) as u16;
    f.extend_from_slice(&[0x40 | ihl, 0]);
    f.extend_from_slice(&len.to_be_bytes());
    f.extend_from_slice(&[0, 1]);
    f.extend_from_slice(&frag.to_be_bytes());
    f.extend_from_slice(&[64, proto, 0, 0]);
    f.extend_from_slice(&src);
    f.extend_from_slice(&dst);
    f.resize(f.len() + (usize::from(ihl) - 5) * 4, 0);
    f.extend_from_slice(rest);
    f
}

/// Ethernet (with `tags`) and an IPv6 header with next header `next`, then `rest`
/// (extension headers and the transport header, written by the caller).
fn ipv6(tags: &[u16], next: u8, src_last: u8, dst_last: u8, rest: &[u8]) -> Vec<u8> {
    let mut f = MACS.to_vec();
    for &t in tags {
        f.extend_from_slice(&t.to_be_bytes());
        f.extend_from_slice(&[0x00, 0x07]);
    }
    f.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0]);
    f.extend_from_slice(&((rest.len() + 4) as u16).to_be_bytes());
    f.extend_from_slice(&[next, 64]);
    f.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, src_last]);
    f.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, dst_last]);
    f.extend_from_slice(rest);
    f
}

/// UDP/TCP ports and 4 more bytes of transport header.
fn ports(sport: u16, dport: u16) -> Vec<u8> {
    let mut p = sport.to_be_bytes().to_vec();
    p.extend_from_slice(&dport.to_be_bytes());
    p.extend_from_slice(&[0, 8, 0, 0]);
    p
}

/// An IPv6 extension header: next header, length byte, and `bytes` bytes in all.
fn ext(next: u8, len_byte: u8, bytes: usize) -> Vec<u8> {
    let mut e = vec![next, len_byte];
    e.resize(bytes, 0);
    e
}

/// Frames of every kind the hash tells apart, each marked with its index.
fn frames() -> Vec<Vec<u8>> {
    let mut fs = Vec::new();
    // IPv4 UDP and TCP flows.
    for i in 0..48u16 {
        let proto = if i % 3 == 0 { 6 } else { 17 };
        fs.push(ipv4(
            &[],
            5,
            0,
            proto,
            [10, 0, (i >> 4) as u8, i as u8],
            [192, 0, 2, 9],
            &ports(1024 + i * 7, 53),
        ));
    }
    // Microsoft's first IPv4 TCP vector.
    fs.push(ipv4(
        &[],
        5,
        0x4000,
        6,
        [66, 9, 149, 187],
        [161, 142, 100, 80],
        &ports(2794, 1766),
    ));
    // Options: the ports lie past the 24-byte header.
    fs.push(ipv4(
        &[],
        6,
        0,
        17,
        [10, 1, 1, 1],
        [10, 2, 2, 2],
        &ports(4000, 4001),
    ));
    // Fragments (first, with more fragments; and a later one) and ICMP: 2-tuple.
    fs.push(ipv4(
        &[],
        5,
        0x2000,
        17,
        [10, 3, 3, 3],
        [10, 4, 4, 4],
        &ports(5000, 5001),
    ));
    fs.push(ipv4(
        &[],
        5,
        0x0010,
        17,
        [10, 3, 3, 3],
        [10, 4, 4, 4],
        &ports(5000, 5001),
    ));
    fs.push(ipv4(
        &[],
        5,
        0,
        1,
        [10, 5, 5, 5],
        [10, 6, 6, 6],
        &[8, 0, 0, 0, 0, 1, 0, 1],
    ));
    // A header length under 20 bytes, another IP version, a header cut short: hash 0.
    let mut bad_ihl = ipv4(&[], 5, 0, 17, [10, 7, 7, 7], [10, 8, 8, 8], &ports(1, 2));
    bad_ihl[14] = 0x44;
    fs.push(bad_ihl);
    let mut v5 = ipv4(&[], 5, 0, 17, [10, 7, 7, 7], [10, 8, 8, 8], &ports(1, 2));
    v5[14] = 0x55;
    fs.push(v5);
    fs.push(ipv4(&[], 5, 0, 17, [10, 7, 7, 7], [10, 8, 8, 8], &[])[..14 + 8].to_vec());
    // VLAN: one 802.1Q tag; 802.1ad outside 802.1Q.
    for i in 0..6u16 {
        fs.push(ipv4(
            &[0x8100],
            5,
            0,
            17,
            [10, 9, 9, i as u8],
            [10, 10, 10, 10],
            &ports(6000 + i, 80),
        ));
        fs.push(ipv6(&[0x88a8, 0x8100], 17, i as u8, 1, &ports(6100 + i, 443)));
    }
    // IPv6: UDP and TCP flows.
    for i in 0..24u16 {
        fs.push(ipv6(
            &[],
            if i % 2 == 0 { 6 } else { 17 },
            i as u8,
            2,
            &ports(7000 + i * 13, 8080),
        ));
    }
    // Hop-by-hop (8 bytes), destination options (16), then TCP.
    let mut r = ext(60, 0, 8);
    r.extend(ext(6, 1, 16));
    r.extend(ports(7500, 22));
    fs.push(ipv6(&[], 0, 30, 3, &r));
    // Routing (8), then the authentication header ((4 + 2) * 4 = 24 bytes), then UDP.
    let mut r = ext(51, 0, 8);
    r.extend(ext(17, 4, 24));
    r.extend(ports(7600, 23));
    fs.push(ipv6(&[], 43, 31, 3, &r));
    // A fragment header and ICMPv6: 2-tuple.
    let mut r = ext(17, 0, 8);
    r.extend(ports(7700, 24));
    fs.push(ipv6(&[], 44, 32, 3, &r));
    fs.push(ipv6(&[], 58, 33, 3, &[128, 0, 0, 0, 0, 1, 0, 1]));
    // Eight extension headers before UDP: past the walk, 2-tuple. Seven: 4-tuple.
    for hops in [7, 8] {
        let mut r = Vec::new();
        for h in 0..hops {
            r.extend(ext(if h + 1 == hops { 17 } else { 60 }, 0, 8));
        }
        r.extend(ports(7800 + hops, 25));
        fs.push(ipv6(&[], 60, 34 + hops as u8, 3, &r));
    }
    // An extension header cut short: 2-tuple.
    fs.push(ipv6(&[], 0, 40, 3, &[17]));
    // ARP and a frame of another EtherType: hash 0.
    let mut arp = MACS.to_vec();
    arp.extend_from_slice(&[0x08, 0x06, 0, 1, 8, 0, 6, 4, 0, 1]);
    arp.resize(14 + 28, 0);
    fs.push(arp);
    fs.push(test_frame(77, 40));
    fs.into_iter()
        .enumerate()
        .map(|(i, f)| marked(f, i as u16))
        .collect()
}

/// Sends `frames` from the peer and returns the queue each arrived on, by index.
fn queues_of(port: &AfPacketPort, peer: &Peer, frames: &[Vec<u8>]) -> Vec<usize> {
    for f in frames {
        peer.send(f);
    }
    let mut seen: BTreeMap<u16, usize> = BTreeMap::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut b = PacketBatch::new();
    while seen.len() < frames.len() {
        assert!(
            Instant::now() < deadline,
            "timed out: {} of {} frames",
            seen.len(),
            frames.len()
        );
        let mut got = 0;
        for q in 0..port.queues() {
            got += port.rx_burst(q, &mut b, 32);
            for p in b.drain() {
                if let Some(id) = id_of(p.data()) {
                    assert!(seen.insert(id, q).is_none(), "frame {} twice", id);
                }
            }
        }
        if got == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    seen.into_values().collect()
}

/// The queue each marked frame arrived on, by id, once `n` came or none came for half
/// a second (the kernel may drop a mangled frame it cannot untag).
fn arrived_until_quiet(port: &AfPacketPort, n: usize) -> BTreeMap<u16, usize> {
    let mut seen = BTreeMap::new();
    let mut quiet_since = Instant::now();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut b = PacketBatch::new();
    while seen.len() < n && quiet_since.elapsed() < Duration::from_millis(500) {
        assert!(Instant::now() < deadline, "timed out");
        for q in 0..port.queues() {
            if port.rx_burst(q, &mut b, 32) > 0 {
                quiet_since = Instant::now();
            }
            for p in b.drain() {
                if let Some(id) = id_of(p.data()) {
                    seen.insert(id, q);
                }
            }
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    seen
}

fn expected(settings: &RssSettings, frames: &[Vec<u8>]) -> Vec<usize> {
    frames.iter().map(|f| settings.queue_for_frame(f)).collect()
}

#[test]
fn each_frame_lands_on_the_queue_its_hash_and_table_name() {
    let ns = Netns::with_veth();
    ns.run(|| {
        let port = AfPacketPort::open("va", 4, &AfPacketConfig::default()).unwrap();
        assert_eq!(port.mode(), None, "RSS program refused: {:?}", port.rss());
        let settings = port.rss().unwrap();
        assert_eq!(settings, RssSettings::new(4));
        let peer = Peer::open("vb");
        let fs = frames();
        let got = queues_of(&port, &peer, &fs);
        assert_eq!(got, expected(&settings, &fs));
        for q in 0..4 {
            assert!(got.contains(&q), "queue {} got nothing: {:?}", q, got);
        }
    });
}

#[test]
fn microsofts_vector_follows_its_table_entry() {
    let ns = Netns::with_veth();
    ns.run(|| {
        let port = AfPacketPort::open("va", 4, &AfPacketConfig::default()).unwrap();
        let peer = Peer::open("vb");
        // 66.9.149.187:2794 -> 161.142.100.80:1766 hashes to 0x51ccc178 under
        // Microsoft's key: entry 0x78 = 120. Only that entry names queue 3.
        let mut settings = port.rss().unwrap();
        settings.reta = Reta::parse("0 ".repeat(128).trim(), 4).unwrap();
        settings.reta.set(120, 3).unwrap();
        port.set_rss(&settings).unwrap();
        let vector = marked(
            ipv4(
                &[],
                5,
                0x4000,
                6,
                [66, 9, 149, 187],
                [161, 142, 100, 80],
                &ports(2794, 1766),
            ),
            0,
        );
        let neighbour = marked(
            ipv4(
                &[],
                5,
                0x4000,
                6,
                [66, 9, 149, 187],
                [161, 142, 100, 80],
                &ports(2794, 1767),
            ),
            1,
        );
        assert_eq!(queues_of(&port, &peer, &[vector, neighbour]), vec![3, 0]);
    });
}

#[test]
fn key_and_table_change_while_the_port_runs() {
    let ns = Netns::with_veth();
    ns.run(|| {
        let port = AfPacketPort::open("va", 4, &AfPacketConfig::default()).unwrap();
        let peer = Peer::open("vb");
        let fs = frames();
        // Everything to queue 2.
        let mut s = port.rss().unwrap();
        s.reta = Reta::parse(&"2 ".repeat(128), 4).unwrap();
        port.set_rss(&s).unwrap();
        assert_eq!(port.rss().unwrap(), s);
        assert!(queues_of(&port, &peer, &fs).iter().all(|&q| q == 2));
        // A zero key hashes every frame to 0: entry 0, queue 3.
        s.key = [0; KEY_LEN];
        s.reta = Reta::parse("weight 1 0 0 0", 4).unwrap();
        s.reta.set(0, 3).unwrap();
        port.set_rss(&s).unwrap();
        assert!(queues_of(&port, &peer, &fs).iter().all(|&q| q == 3));
        // Another key and an uneven table: the program agrees with the reference.
        s.key = parse_key(&vec!["a5"; KEY_LEN].join(":")).unwrap();
        s.reta = Reta::parse("weight 1 2 3 4", 4).unwrap();
        port.set_rss(&s).unwrap();
        let got = queues_of(&port, &peer, &fs);
        assert_eq!(got, expected(&s, &fs));
        // Back to the defaults.
        port.set_rss(&RssSettings::new(4)).unwrap();
        assert_eq!(queues_of(&port, &peer, &fs), expected(&RssSettings::new(4), &fs));
    });
}

#[test]
fn a_table_naming_a_missing_queue_is_refused_and_changes_nothing() {
    let ns = Netns::with_veth();
    ns.run(|| {
        let port = AfPacketPort::open("va", 2, &AfPacketConfig::default()).unwrap();
        let mut s = RssSettings::new(4);
        s.reta.set(9, 3).unwrap();
        assert_eq!(
            port.set_rss(&s).unwrap_err(),
            "the indirection table names queue 2, and va has 2 queues"
        );
        assert_eq!(port.rss().unwrap(), RssSettings::new(2));
        // One queue: the settings are kept, and can only name queue 0.
        let one = AfPacketPort::open("vb", 1, &AfPacketConfig::default()).unwrap();
        assert_eq!(one.rss().unwrap(), RssSettings::new(1));
        let mut s = RssSettings::new(1);
        s.key = [7; KEY_LEN];
        one.set_rss(&s).unwrap();
        assert_eq!(one.rss().unwrap().key, [7; KEY_LEN]);
        assert_eq!(
            one.set_rss(&RssSettings::new(2)).unwrap_err(),
            "the indirection table names queue 1, and vb has 1 queue"
        );
    });
}

/// Takes `CAP_BPF` and `CAP_SYS_ADMIN` out of the calling thread's effective
/// capabilities (capabilities are per thread: the rest of the process keeps them).
fn drop_bpf_capabilities() {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Clone, Copy, Default)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    const VERSION_3: u32 = 0x2008_0522;
    const CAP_SYS_ADMIN: u32 = 21;
    const CAP_BPF: u32 = 39;
    let mut header = Header {
        version: VERSION_3,
        pid: 0,
    };
    let mut data = [Data::default(); 2];
    // SAFETY: capget and capset read and write a version-3 header and two data blocks,
    // which `header` and `data` are, for the calling thread (pid 0).
    unsafe {
        assert_eq!(libc::syscall(libc::SYS_capget, &mut header, data.as_mut_ptr()), 0);
        data[0].effective &= !(1 << CAP_SYS_ADMIN);
        data[1].effective &= !(1 << (CAP_BPF - 32));
        assert_eq!(libc::syscall(libc::SYS_capset, &header, data.as_ptr()), 0);
    }
}

#[test]
fn without_bpf_the_kernels_flow_hash_spreads_the_queues() {
    // Without CAP_BPF and CAP_SYS_ADMIN the kernel refuses the program only where it
    // refuses unprivileged BPF (Debian's default, 2).
    let unprivileged =
        std::fs::read_to_string("/proc/sys/kernel/unprivileged_bpf_disabled").unwrap_or_default();
    if unprivileged.trim() == "0" {
        eprintln!("skipped: this kernel lets unprivileged processes load BPF programs");
        return;
    }
    let ns = Netns::with_veth();
    ns.run(|| {
        drop_bpf_capabilities();
        let port = AfPacketPort::open("va", 2, &AfPacketConfig::default()).unwrap();
        assert_eq!(port.mode().as_deref(), Some("kernel flow hash"));
        assert_eq!(port.warning(), port.rss().err());
        let why = port.rss().unwrap_err();
        assert!(
            why.starts_with("the kernel refused brickroute's RSS program when the port opened (create the RSS map: Operation not permitted"),
            "{}",
            why
        );
        assert!(why.ends_with("has no key, table or rules to change"), "{}", why);
        assert_eq!(port.set_rss(&RssSettings::new(2)).unwrap_err(), why);
        // Still spread, by flow: 64 flows all on one queue has probability 2^-63.
        let peer = Peer::open("vb");
        let flows: Vec<Vec<u8>> = (0..64u16)
            .map(|i| marked(ipv4(&[], 5, 0, 17, [10, 0, 0, 1], [10, 0, 0, 2], &ports(5000 + i, 9)), i))
            .collect();
        let got = queues_of(&port, &peer, &flows);
        assert!(got.contains(&0) && got.contains(&1), "{:?}", got);
    });
}

/// xorshift64*: a fixed sequence, so a failure repeats.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 33) as usize % n.max(1)
    }
}

#[test]
fn the_program_agrees_with_the_reference_on_mangled_frames() {
    let ns = Netns::with_veth();
    ns.run(|| {
        let port = AfPacketPort::open("va", 4, &AfPacketConfig::default()).unwrap();
        let peer = Peer::open("vb");
        let mut s = RssSettings::new(4);
        s.reta = Reta::parse("weight 5 1 3 7", 4).unwrap();
        port.set_rss(&s).unwrap();
        // Each frame of `frames()` (without its mark) with a few bytes behind the MAC
        // addresses changed or cut out: lengths, versions, protocols, extension
        // headers and tags that no longer fit their frame.
        let bases: Vec<Vec<u8>> = frames().iter().map(|f| f[..f.len() - 4].to_vec()).collect();
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let mut mangled = Vec::new();
        for id in 0..600u16 {
            let mut f = bases[rng.below(bases.len())].clone();
            for _ in 0..1 + rng.below(3) {
                let at = 12 + rng.below(f.len().saturating_sub(12));
                if at < f.len() {
                    if rng.below(4) == 0 {
                        let n = 1 + rng.below(16);
                        f.drain(at..(at + n).min(f.len()));
                    } else {
                        f[at] = rng.below(256) as u8;
                    }
                }
            }
            mangled.push(marked(f, id));
        }
        for f in &mangled {
            peer.send(f);
        }
        // The kernel may drop a frame it cannot untag; compare every frame that came.
        let seen = arrived_until_quiet(&port, mangled.len());
        assert!(seen.len() >= 500, "only {} of 600 frames arrived", seen.len());
        for (&id, &q) in &seen {
            let f = &mangled[usize::from(id)];
            assert_eq!(q, s.queue_for_frame(f), "frame {}: {:02x?}", id, f);
        }
    });
}

#[test]
fn large_frames_are_hashed_past_the_buffers_linear_head() {
    // A sending AF_PACKET socket leaves most of a large frame in page fragments: the
    // program must read its headers wherever they lie.
    let ns = Netns::with_veth();
    for dev in ["va", "vb"] {
        ip(&["-n", &ns.name, "link", "set", dev, "mtu", "9000"]);
    }
    ns.run(|| {
        let port = AfPacketPort::open("va", 4, &AfPacketConfig::default()).unwrap();
        let peer = Peer::open("vb");
        let fs: Vec<Vec<u8>> = (0..32u16)
            .map(|i| {
                let mut payload = ports(9000 + i, 4789);
                payload.resize(6000, 0x5a);
                let f = if i % 2 == 0 {
                    ipv4(&[], 5, 0, 17, [10, 0, 0, i as u8], [10, 0, 1, 1], &payload)
                } else {
                    ipv6(&[], 17, i as u8, 9, &payload)
                };
                marked(f, i)
            })
            .collect();
        let s = port.rss().unwrap();
        assert_eq!(queues_of(&port, &peer, &fs), expected(&s, &fs));
    });
}

#[test]
fn flow_rules_come_ahead_of_the_hash() {
    let ns = Netns::with_veth();
    ns.run(|| {
        let port = AfPacketPort::open("va", 4, &AfPacketConfig::default()).unwrap();
        let peer = Peer::open("vb");
        let rules = classify::rss::parse_rules(
            "tcp dport 53 queue 3
             dst 192.0.2.9 queue 2
             ip6 udp sport 7013 queue 1
             src 2001:db8::/124 dst 2001:db8:1::/48 queue 0
             proto 58 queue 3
             ip6 proto 44 queue 2
             src 10.3.0.0/16 queue 1",
        )
        .unwrap();
        port.update_rss(&mut |s| {
            s.rules = rules.clone();
            Ok(())
        })
        .unwrap();
        let s = port.rss().unwrap();
        assert_eq!(s.rules, rules);
        let fs = frames();
        let got = queues_of(&port, &peer, &fs);
        assert_eq!(got, expected(&s, &fs));
        // Hand-checked: the first TCP flow (to 192.0.2.9:53) takes rule 1, not rule 2;
        // a UDP flow to 192.0.2.9 takes rule 2; IPv4 fragments from 10.3.3.3, rule 7.
        assert_eq!((got[0], got[1]), (3, 2));
        assert_eq!((got[50], got[51]), (1, 1));
        // The same rules over mangled frames.
        let mut rng = Rng(7);
        let mangled: Vec<Vec<u8>> = (0..300u16)
            .map(|id| {
                let f = &fs[rng.below(fs.len())];
                let mut f = f[..f.len() - 4].to_vec();
                let at = 12 + rng.below(f.len() - 12);
                f[at] = rng.below(256) as u8;
                marked(f, id)
            })
            .collect();
        for f in &mangled {
            peer.send(f);
        }
        let seen = arrived_until_quiet(&port, mangled.len());
        for (&id, &q) in &seen {
            let f = &mangled[usize::from(id)];
            assert_eq!(q, s.queue_for_frame(f), "frame {}: {:02x?}", id, f);
        }
        assert!(seen.len() >= 250, "only {} of 300 arrived", seen.len());
        // A rule naming a queue the port lacks is refused, and nothing changes.
        let err = port
            .update_rss(&mut |s| {
                s.rules = classify::rss::parse_rules("udp queue 4").unwrap();
                Ok(())
            })
            .unwrap_err();
        assert_eq!(err, "rule 1 (udp queue 4) names queue 4, and va has 4 queues");
        assert_eq!(port.rss().unwrap().rules, rules);
    });
}

#[test]
fn the_kernels_test_runner_returns_the_programs_queue() {
    let vector = ipv4(
        &[],
        5,
        0x4000,
        6,
        [66, 9, 149, 187],
        [161, 142, 100, 80],
        &ports(2794, 1766),
    );
    let mut s = RssSettings::new(4);
    s.reta = Reta::parse(&"0 ".repeat(128), 4).unwrap();
    s.reta.set(120, 3).unwrap();
    assert_eq!(crate::rss_program_cost(Some(&s), &vector, 10).unwrap().queue, 3);
    assert_eq!(crate::rss_program_cost(None, &vector, 10).unwrap().queue, 0);
    s.rules = classify::rss::parse_rules("tcp dport 1766 queue 2").unwrap();
    assert_eq!(crate::rss_program_cost(Some(&s), &vector, 10).unwrap().queue, 2);
}

#[test]
fn rules_that_test_nothing_stop_every_packet_of_their_kind() {
    // `ip6 queue 1` takes all IPv6; the rule after it, and the hash, never see IPv6.
    // `queue 2` then takes everything else that is IP.
    let mut s = RssSettings::new(4);
    s.rules =
        classify::rss::parse_rules("ip6 queue 1; ip6 tcp queue 3; tcp dport 53 queue 0; queue 2").unwrap();
    let v6 = ipv6(&[], 6, 1, 2, &ports(5, 6));
    let v4_dns = ipv4(&[], 5, 0, 6, [10, 0, 0, 1], [10, 0, 0, 2], &ports(1000, 53));
    let v4 = ipv4(&[], 5, 0, 17, [10, 0, 0, 1], [10, 0, 0, 2], &ports(1000, 54));
    let mut arp = MACS.to_vec();
    arp.extend_from_slice(&[0x08, 0x06, 0, 1, 8, 0, 6, 4, 0, 1]);
    arp.resize(42, 0);
    for (frame, queue) in [
        (&v6, 1),
        (&v4_dns, 0),
        (&v4, 2),
        (&arp, s.reta.queue_for(0) as u32),
    ] {
        assert_eq!(crate::rss_program_cost(Some(&s), frame, 1).unwrap().queue, queue);
        assert_eq!(s.queue_for_frame(frame), queue as usize);
    }
    for only in [
        "queue 3",
        "ip queue 1",
        "src 0.0.0.0/0 queue 3",
        "udp queue 1; ip queue 2",
    ] {
        s.rules = classify::rss::parse_rules(only).unwrap();
        crate::rss_program_cost(Some(&s), &v4, 1).unwrap_or_else(|e| panic!("{}: {}", only, e));
    }
}
