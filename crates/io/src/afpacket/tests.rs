//! AF_PACKET port tests over a veth pair in a namespace of their own (root needed).
//!
//! The peer side is a plain AF_PACKET socket written here with `send`/`recvfrom`, not
//! the port under test.

mod rss;

use super::*;
use packet::anno::PacketType;
use std::collections::BTreeMap;
use std::process::Command;
use std::sync::atomic::AtomicUsize;
use std::time::{Duration, Instant};

static NEXT_NS: AtomicUsize = AtomicUsize::new(0);

/// A network namespace with a veth pair `va` <-> `vb` (both up, IPv6 off so the kernel
/// sends nothing on its own); removed on drop, with its interfaces.
struct Netns {
    name: String,
}

fn ip(args: &[&str]) {
    let o = Command::new("ip").args(args).output().expect("run ip");
    assert!(
        o.status.success(),
        "ip {:?}: {}",
        args,
        String::from_utf8_lossy(&o.stderr)
    );
}

impl Netns {
    fn with_veth() -> Netns {
        let name = format!(
            "brt{}io{}",
            std::process::id(),
            NEXT_NS.fetch_add(1, Ordering::Relaxed)
        );
        ip(&["netns", "add", &name]);
        let ns = Netns { name };
        ns.run(|| {
            for f in ["all", "default"] {
                std::fs::write(format!("/proc/sys/net/ipv6/conf/{}/disable_ipv6", f), "1").unwrap();
            }
        });
        let n = ns.name.as_str();
        ip(&[
            "-n", n, "link", "add", "va", "address", VA_MAC, "type", "veth", "peer", "name", "vb",
        ]);
        ip(&["-n", n, "link", "set", "va", "up"]);
        ip(&["-n", n, "link", "set", "vb", "up"]);
        ns
    }

    /// Runs `f` on a thread that has entered the namespace (sockets it opens live there).
    fn run<T: Send>(&self, f: impl FnOnce() -> T + Send) -> T {
        std::thread::scope(|s| {
            s.spawn(|| {
                let file = std::fs::File::open(format!("/run/netns/{}", self.name)).unwrap();
                // SAFETY: `file` is an open network namespace file; setns changes only
                // this thread's namespace.
                let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
                assert_eq!(rc, 0, "setns: {}", std::io::Error::last_os_error());
                f()
            })
            .join()
            .unwrap()
        })
    }

    fn link_details(&self, dev: &str) -> String {
        let o = Command::new("ip")
            .args(["-n", &self.name, "-d", "link", "show", dev])
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).into_owned()
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.name]).output();
    }
}

/// A plain AF_PACKET socket bound to one interface: the test's peer.
struct Peer {
    fd: OwnedFd,
}

impl Peer {
    fn open(dev: &str) -> Peer {
        // SAFETY: plain system calls; `sll` and `tv` are valid for their sizes.
        unsafe {
            let raw = libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                ETH_P_ALL_BE as i32,
            );
            assert!(raw >= 0, "socket: {}", std::io::Error::last_os_error());
            let fd = OwnedFd::from_raw_fd(raw);
            let mut sll: libc::sockaddr_ll = std::mem::zeroed();
            sll.sll_family = libc::AF_PACKET as u16;
            sll.sll_protocol = ETH_P_ALL_BE;
            sll.sll_ifindex = ifindex(dev).unwrap();
            let rc = libc::bind(
                raw,
                &sll as *const _ as *const libc::sockaddr,
                size_of::<libc::sockaddr_ll>() as u32,
            );
            assert_eq!(rc, 0);
            let tv = libc::timeval {
                tv_sec: 0,
                tv_usec: 100_000,
            };
            setsockopt(&fd, libc::SOL_SOCKET, libc::SO_RCVTIMEO, &tv);
            Peer { fd }
        }
    }

    fn send(&self, frame: &[u8]) {
        // SAFETY: `frame` is valid for its length.
        let n = unsafe { libc::send(self.fd.as_raw_fd(), frame.as_ptr() as *const _, frame.len(), 0) };
        assert_eq!(
            n,
            frame.len() as isize,
            "send: {}",
            std::io::Error::last_os_error()
        );
    }

    /// The next frame that arrived (not one sent out), or None after 100 ms of silence.
    fn recv(&self) -> Option<Vec<u8>> {
        let mut buf = vec![0u8; 4096];
        loop {
            // SAFETY: `buf`, `sll` and `len` are valid for the sizes given.
            let (n, pkttype) = unsafe {
                let mut sll: libc::sockaddr_ll = std::mem::zeroed();
                let mut len = size_of::<libc::sockaddr_ll>() as u32;
                let n = libc::recvfrom(
                    self.fd.as_raw_fd(),
                    buf.as_mut_ptr() as *mut _,
                    buf.len(),
                    0,
                    &mut sll as *mut _ as *mut libc::sockaddr,
                    &mut len,
                );
                (n, sll.sll_pkttype)
            };
            if n < 0 {
                return None;
            }
            if pkttype != libc::PACKET_OUTGOING {
                return Some(buf[..n as usize].to_vec());
            }
        }
    }
}

/// The port side's MAC address.
const VA_MAC: &str = "02:00:00:00:00:0a";

/// Test ethertype (IEEE 802 local experimental): frames of this test, nothing else.
const TEST_TYPE: [u8; 2] = [0x88, 0xb5];

/// A frame of `len` bytes to 02:00:00:00:00:0b carrying `seq` and a byte pattern.
fn test_frame(seq: u32, len: usize) -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 0x0b, 0x02, 0, 0, 0, 0, 0x0a];
    f.extend_from_slice(&TEST_TYPE);
    f.extend_from_slice(&seq.to_be_bytes());
    while f.len() < len {
        f.push((f.len() as u32 ^ seq) as u8);
    }
    f
}

fn is_test_frame(f: &[u8]) -> bool {
    f.len() >= 14 && f[12..14] == TEST_TYPE
}

/// Ethernet + IPv4 + UDP frame from 10.0.0.1:`sport` to 10.0.0.2:9, 60 bytes, written
/// out by hand (checksum 0: the receive path does not check it).
fn udp_frame(sport: u16, seq: u8) -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 0x0b, 0x02, 0, 0, 0, 0, 0x0a, 0x08, 0x00];
    f.extend_from_slice(&[0x45, 0, 0, 46, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2]);
    f.extend_from_slice(&sport.to_be_bytes());
    f.extend_from_slice(&[0, 9, 0, 26, 0, 0]);
    f.resize(60, seq);
    f
}

/// Polls `queue` until `want` test frames came (all frames are returned), or panics
/// after 10 s.
fn receive(port: &AfPacketPort, queue: usize, want: usize, filter: fn(&[u8]) -> bool) -> Vec<Vec<u8>> {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut all = Vec::new();
    let mut b = PacketBatch::new();
    while all.iter().filter(|f: &&Vec<u8>| filter(f)).count() < want {
        assert!(
            Instant::now() < deadline,
            "timed out: {} frames so far",
            all.len()
        );
        if port.rx_burst(queue, &mut b, 32) == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
        all.extend(b.drain().map(|p| p.data().to_vec()));
    }
    all
}

#[test]
fn frames_sent_on_the_peer_arrive_byte_for_byte() {
    let ns = Netns::with_veth();
    ns.run(|| {
        let port = AfPacketPort::open("va", 1, &AfPacketConfig::default()).unwrap();
        assert_eq!(port.queues(), 1);
        assert_eq!(port.fanout_group(), None);
        let peer = Peer::open("vb");
        let sent: Vec<Vec<u8>> = (0..200u32)
            .map(|i| test_frame(i, 60 + (i as usize * 37) % 1455))
            .collect();
        for f in &sent {
            peer.send(f);
        }
        let all = receive(&port, 0, sent.len(), is_test_frame);
        let ours: Vec<Vec<u8>> = all.iter().filter(|f| is_test_frame(f)).cloned().collect();
        assert_eq!(ours, sent);
        // Counters: every frame the queue delivered, counted once, bytes included.
        let bytes: usize = all.iter().map(|f| f.len()).sum();
        let s = port.stats(0);
        assert_eq!((s.rx_packets, s.rx_bytes), (all.len() as u64, bytes as u64));
        assert_eq!((s.tx_packets, s.tx_bytes), (0, 0));
        assert_eq!(port.totals(), s);
        // A queue that does not exist receives nothing.
        let mut b = PacketBatch::new();
        assert_eq!(port.rx_burst(1, &mut b, 32), 0);
        assert_eq!(port.stats(1), QueueStats::default());
    });
}

/// Marks the frames of the VLAN test (after their tags and ethertype).
const VLAN_MAGIC: [u8; 4] = *b"vlan";

/// A frame of `len` bytes to 02:00:00:00:00:0b with `tags` (TPID, TCI) after the MAC
/// addresses, outer first, then the test ethertype, [`VLAN_MAGIC`], `seq` and a pattern.
fn vlan_frame(tags: &[(u16, u16)], seq: u8, len: usize) -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 0x0b, 0x02, 0, 0, 0, 0, 0x0a];
    for (tpid, tci) in tags {
        f.extend_from_slice(&tpid.to_be_bytes());
        f.extend_from_slice(&tci.to_be_bytes());
    }
    f.extend_from_slice(&TEST_TYPE);
    f.extend_from_slice(&VLAN_MAGIC);
    f.push(seq);
    while f.len() < len {
        f.push((f.len() as u8).wrapping_mul(7) ^ seq);
    }
    f
}

fn is_vlan_test_frame(f: &[u8]) -> bool {
    f.windows(VLAN_MAGIC.len()).any(|w| w == VLAN_MAGIC)
}

#[test]
fn vlan_tags_the_kernel_takes_out_are_put_back() {
    let ns = Netns::with_veth();
    // Room for a frame that outgrows a standard packet buffer once its tag is back.
    for dev in ["va", "vb"] {
        ip(&["-n", &ns.name, "link", "set", dev, "mtu", "9000"]);
    }
    ns.run(|| {
        let port = AfPacketPort::open("va", 1, &AfPacketConfig::default()).unwrap();
        let peer = Peer::open("vb");
        let sent = vec![
            // 802.1Q: priority 5, VLAN 12.
            vlan_frame(&[(0x8100, 0xa00c)], 0, 64),
            // QinQ: 802.1ad outer (priority 3, VLAN 100), 802.1Q inner (VLAN 7).
            vlan_frame(&[(0x88a8, 0x6064), (0x8100, 0x0007)], 1, 80),
            // Priority-tagged (VLAN 0, priority 1), then one with a TCI of 0.
            vlan_frame(&[(0x8100, 0x2000)], 2, 64),
            vlan_frame(&[(0x8100, 0x0000)], 3, 64),
            // Untagged.
            vlan_frame(&[], 4, 64),
            // Tagged, larger than a standard packet buffer (2048 bytes) with its tag.
            vlan_frame(&[(0x8100, 0x0fff)], 5, 3000),
            // Tagged, exactly a standard packet buffer with its tag.
            vlan_frame(&[(0x8100, 0x0001)], 6, packet::FRAME_DATA),
            vlan_frame(&[], 7, 1514),
        ];
        for f in &sent {
            peer.send(f);
        }
        let all = receive(&port, 0, sent.len(), is_vlan_test_frame);
        let ours: Vec<Vec<u8>> = all.iter().filter(|f| is_vlan_test_frame(f)).cloned().collect();
        assert_eq!(ours.len(), sent.len());
        for (i, (got, want)) in ours.iter().zip(&sent).enumerate() {
            assert!(
                got == want,
                "frame {}: sent {} bytes {:02x?}..., received {} bytes {:02x?}...",
                i,
                want.len(),
                &want[..want.len().min(24)],
                got.len(),
                &got[..got.len().min(24)]
            );
        }
        // The counters count the frames as delivered, tags included.
        let bytes: usize = all.iter().map(|f| f.len()).sum();
        assert_eq!(port.stats(0).rx_bytes, bytes as u64);
    });
}

#[test]
fn vlan_tag_comes_from_the_ring_header_status() {
    let valid = libc::TP_STATUS_USER | libc::TP_STATUS_VLAN_VALID;
    let tpid = libc::TP_STATUS_VLAN_TPID_VALID;
    assert_eq!(vlan_tag(libc::TP_STATUS_USER, 0xa00c, 0x8100), None);
    assert_eq!(
        vlan_tag(valid | tpid, 0xa00c, 0x88a8),
        Some([0x88, 0xa8, 0xa0, 0x0c])
    );
    // No TPID reported: 802.1Q. A TCI of 0 is still a tag.
    assert_eq!(vlan_tag(valid, 0x0123, 0), Some([0x81, 0x00, 0x01, 0x23]));
    assert_eq!(vlan_tag(valid | tpid, 0, 0x8100), Some([0x81, 0x00, 0, 0]));
}

#[test]
fn write_tagged_inserts_after_the_macs_and_grows_past_the_buffer() {
    let tag = [0x81, 0x00, 0x20, 0x05];
    for len in [14, 60, packet::FRAME_DATA - 4, packet::FRAME_DATA, 5000] {
        let frame = test_frame(len as u32, len);
        let mut b = PacketBatch::new();
        Packet::alloc_rx_into(&mut b, 1);
        let p = &mut b.as_mut_slice()[0];
        write_tagged(p, &frame, tag);
        let mut want = frame[..12].to_vec();
        want.extend_from_slice(&tag);
        want.extend_from_slice(&frame[12..]);
        assert_eq!(p.data(), &want[..], "{} bytes", len);
        // As a frame that came with its tag: same headroom, MAC header at the start.
        let mut q = PacketBatch::new();
        Packet::alloc_rx_into(&mut q, 1);
        q.as_mut_slice()[0].write_from(&want);
        assert_eq!(p.headroom(), q.as_slice()[0].headroom());
        assert_eq!(p.mac_header_offset(), q.as_slice()[0].mac_header_offset());
    }
    // Too short to have carried a tag: written as it is.
    let mut p = Packet::alloc(0);
    write_tagged(&mut p, &[1, 2, 3], tag);
    assert_eq!(p.data(), &[1, 2, 3]);
}

#[test]
fn received_packets_carry_packet_type_queue_and_time() {
    let ns = Netns::with_veth();
    ns.run(|| {
        let port = AfPacketPort::open("va", 1, &AfPacketConfig::default()).unwrap();
        let peer = Peer::open("vb");
        let before = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64;
        // To va's own MAC, to the broadcast address, to another host's MAC.
        let mut to_host = test_frame(0, 60);
        to_host[..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x0a]);
        let mut to_all = test_frame(1, 60);
        to_all[..6].fill(0xff);
        let to_other = test_frame(2, 60);
        for f in [&to_host, &to_all, &to_other] {
            peer.send(f);
        }
        let mut got = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut b = PacketBatch::new();
        while got.len() < 3 {
            assert!(Instant::now() < deadline, "timed out");
            port.rx_burst(0, &mut b, 32);
            got.extend(b.drain().filter(|p| is_test_frame(p.data())));
        }
        let types: Vec<PacketType> = got.iter().map(|p| p.anno().packet_type).collect();
        assert_eq!(
            types,
            vec![PacketType::Host, PacketType::Broadcast, PacketType::OtherHost]
        );
        for p in &got {
            assert_eq!(p.anno().input_queue, 0);
            let t = p.anno().timestamp.sec;
            assert!(t >= before && t <= before + 60, "timestamp {}", t);
        }
    });
}

/// A one-queue port on `va` with 16 KiB ring blocks, so that a few hundred frames
/// span many blocks.
fn small_blocks_port() -> AfPacketPort {
    let cfg = AfPacketConfig {
        block_size: 16 * 1024,
        block_count: 64,
        ..AfPacketConfig::default()
    };
    AfPacketPort::open("va", 1, &cfg).unwrap()
}

#[test]
fn burst_limits_each_call_and_frames_stay_in_order_across_blocks() {
    let ns = Netns::with_veth();
    ns.run(|| {
        // Small blocks: 300 frames of 1000 bytes span many blocks.
        let port = small_blocks_port();
        let peer = Peer::open("vb");
        let sent: Vec<Vec<u8>> = (0..300u32).map(|i| test_frame(i, 1000)).collect();
        for f in &sent {
            peer.send(f);
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut got = Vec::new();
        let mut b = PacketBatch::new();
        while got.len() < sent.len() {
            assert!(
                Instant::now() < deadline,
                "timed out: {} frames so far",
                got.len()
            );
            let n = port.rx_burst(0, &mut b, 7);
            assert!(n <= 7);
            assert_eq!(b.len(), n);
            got.extend(b.drain().map(|p| p.data().to_vec()).filter(|f| is_test_frame(f)));
        }
        assert_eq!(got, sent);
    });
}

#[test]
fn transmitted_frames_arrive_at_the_peer_and_are_counted() {
    let ns = Netns::with_veth();
    ns.run(|| {
        let port = AfPacketPort::open("va", 2, &AfPacketConfig::default()).unwrap();
        let peer = Peer::open("vb");
        let sent: Vec<Vec<u8>> = (0..50u32).map(|i| test_frame(i, 60 + i as usize * 29)).collect();
        let mut b = PacketBatch::new();
        for f in &sent[..20] {
            b.push(Packet::from_slice(f));
        }
        assert_eq!(port.tx_burst(1, &mut b), 20);
        assert!(b.is_empty());
        for f in &sent[20..] {
            b.push(Packet::from_slice(f));
        }
        assert_eq!(port.tx_burst(1, &mut b), 30);
        let mut got = Vec::new();
        while got.len() < sent.len() {
            let f = peer.recv().expect("frame at the peer");
            if is_test_frame(&f) {
                got.push(f);
            }
        }
        assert_eq!(got, sent);
        let bytes: u64 = sent.iter().map(|f| f.len() as u64).sum();
        let s = port.stats(1);
        assert_eq!((s.tx_packets, s.tx_bytes), (50, bytes));
        assert_eq!(port.stats(0), QueueStats::default());
        assert_eq!(port.tx_dropped(1), 0);
        // A frame larger than the MTU is refused and dropped; the others still go.
        b.push(Packet::from_slice(&test_frame(100, 60)));
        b.push(Packet::from_slice(&test_frame(101, 1600)));
        b.push(Packet::from_slice(&test_frame(102, 60)));
        assert_eq!(port.tx_burst(1, &mut b), 2);
        assert_eq!(port.tx_dropped(1), 1);
        let seqs: Vec<u8> = (0..2).map(|_| peer.recv().expect("frame")[17]).collect();
        assert_eq!(seqs, vec![100, 102]);
        // A queue that does not exist sends nothing and empties the batch.
        b.push(Packet::from_slice(&test_frame(103, 60)));
        assert_eq!(port.tx_burst(2, &mut b), 0);
        assert!(b.is_empty());
    });
}

#[test]
fn frames_lost_to_a_full_ring_are_counted() {
    let ns = Netns::with_veth();
    ns.run(|| {
        // Two 4 KiB blocks: room for a handful of 1000-byte frames.
        let cfg = AfPacketConfig {
            block_size: 4096,
            block_count: 2,
            ..AfPacketConfig::default()
        };
        let port = AfPacketPort::open("va", 1, &cfg).unwrap();
        let peer = Peer::open("vb");
        assert_eq!(port.rx_dropped(0), 0);
        for i in 0..200u32 {
            peer.send(&test_frame(i, 1000));
        }
        // Read what the ring kept (the last block comes after its retire timeout).
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut got = Vec::new();
        let mut b = PacketBatch::new();
        while got.len() as u64 + port.rx_dropped(0) < 200 {
            assert!(
                Instant::now() < deadline,
                "timed out: {} frames so far",
                got.len()
            );
            if port.rx_burst(0, &mut b, 32) == 0 {
                std::thread::sleep(Duration::from_millis(1));
            }
            got.extend(b.drain().map(|p| p.data().to_vec()));
        }
        let dropped = port.rx_dropped(0);
        assert!(
            dropped > 0 && !got.is_empty(),
            "{} kept, {} dropped",
            got.len(),
            dropped
        );
        assert_eq!(got.len() as u64 + dropped, 200);
        // Kept frames are the first ones, in order.
        let want: Vec<Vec<u8>> = (0..got.len() as u32).map(|i| test_frame(i, 1000)).collect();
        assert_eq!(got, want);
        // Readings accumulate (the kernel resets its counter on each one).
        assert_eq!(port.rx_dropped(0), dropped);
        assert_eq!(port.rx_dropped(5), 0);
    });
}

#[test]
fn transmit_on_a_down_interface_drops_the_burst() {
    let ns = Netns::with_veth();
    let port = ns.run(|| AfPacketPort::open("va", 1, &AfPacketConfig::default()).unwrap());
    ip(&["-n", &ns.name, "link", "set", "va", "down"]);
    let mut b = PacketBatch::new();
    for i in 0..10 {
        b.push(Packet::from_slice(&test_frame(i, 60)));
    }
    assert_eq!(port.tx_burst(0, &mut b), 0);
    assert!(b.is_empty());
    assert_eq!(port.tx_dropped(0), 10);
    assert_eq!(port.stats(0).tx_packets, 0);
}

#[test]
fn outgoing_frames_are_not_received() {
    // One queue (a lone socket ignores outgoing frames) and two (a fanout group, where
    // the group's flag decides).
    for queues in [1, 2] {
        let ns = Netns::with_veth();
        ns.run(|| {
            let port = AfPacketPort::open("va", queues, &AfPacketConfig::default()).unwrap();
            // Another socket sends out of va (through the queueing discipline, so packet
            // taps see it as outgoing), then the peer sends one frame in.
            let other = Peer::open("va");
            let peer = Peer::open("vb");
            other.send(&test_frame(1, 60));
            assert_eq!(peer.recv().map(|f| f[17]), Some(1));
            peer.send(&test_frame(2, 60));
            let deadline = Instant::now() + Duration::from_secs(10);
            let mut ours = Vec::new();
            let mut b = PacketBatch::new();
            while !ours.contains(&2) {
                assert!(Instant::now() < deadline, "timed out: {:?}", ours);
                for q in 0..queues {
                    port.rx_burst(q, &mut b, 32);
                    ours.extend(
                        b.drain()
                            .filter(|p| is_test_frame(p.data()))
                            .map(|p| p.data()[17]),
                    );
                }
            }
            assert_eq!(ours, vec![2], "{} queues", queues);
        });
    }
}

#[test]
fn fanout_spreads_flows_over_queues_and_keeps_each_flow_on_one() {
    let ns = Netns::with_veth();
    ns.run(|| {
        let port = AfPacketPort::open("va", 2, &AfPacketConfig::default()).unwrap();
        let other = AfPacketPort::open("vb", 2, &AfPacketConfig::default()).unwrap();
        assert!(port.fanout_group().is_some());
        assert_ne!(port.fanout_group(), other.fanout_group());
        drop(other);
        let peer = Peer::open("vb");
        let mut sent = Vec::new();
        for round in 0..4u8 {
            for flow in 0..64u16 {
                sent.push(udp_frame(5000 + flow, round));
            }
        }
        for f in &sent {
            peer.send(f);
        }
        let is_udp = |f: &[u8]| f.len() == 60 && f[12..14] == [8, 0] && f[23] == 17;
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut per_queue: Vec<Vec<Vec<u8>>> = vec![Vec::new(), Vec::new()];
        let mut b = PacketBatch::new();
        while per_queue.iter().map(|v| v.len()).sum::<usize>() < sent.len() {
            assert!(Instant::now() < deadline, "timed out");
            for (q, v) in per_queue.iter_mut().enumerate() {
                port.rx_burst(q, &mut b, 32);
                v.extend(b.drain().map(|p| p.data().to_vec()).filter(|f| is_udp(f)));
            }
        }
        // Every flow on exactly one queue, in order; both queues used (64 flows all
        // hashing to one of two queues has probability 2^-63).
        let mut flow_queue: BTreeMap<u16, usize> = BTreeMap::new();
        for (q, v) in per_queue.iter().enumerate() {
            assert!(!v.is_empty(), "queue {} got nothing", q);
            for f in v {
                let sport = u16::from_be_bytes([f[34], f[35]]);
                assert_eq!(*flow_queue.entry(sport).or_insert(q), q, "flow {} split", sport);
            }
        }
        assert_eq!(flow_queue.len(), 64);
        let mut got: Vec<Vec<u8>> = per_queue.concat();
        got.sort();
        let mut want = sent.clone();
        want.sort();
        assert_eq!(got, want);
        for v in &per_queue {
            let first = &v[0];
            let flow: Vec<u8> = v
                .iter()
                .filter(|f| f[34..36] == first[34..36])
                .map(|f| f[59])
                .collect();
            assert_eq!(flow, vec![0, 1, 2, 3]);
        }
        let total = port.totals().rx_packets;
        assert_eq!(total, sent.len() as u64);
    });
}

#[test]
fn promiscuous_while_open_restored_on_drop() {
    let ns = Netns::with_veth();
    assert!(ns.link_details("va").contains("promiscuity 0"));
    let port = ns.run(|| AfPacketPort::open("va", 2, &AfPacketConfig::default()).unwrap());
    assert!(
        ns.link_details("va").contains("promiscuity 1"),
        "{}",
        ns.link_details("va")
    );
    drop(port);
    // The kernel withdraws the membership when the socket's last reference goes, which
    // another test's child process, between its fork and its exec, may briefly hold too.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while !ns.link_details("va").contains("promiscuity 0") && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(
        ns.link_details("va").contains("promiscuity 0"),
        "{}",
        ns.link_details("va")
    );
    let quiet = AfPacketConfig {
        promiscuous: false,
        ..AfPacketConfig::default()
    };
    let port = ns.run(|| AfPacketPort::open("va", 1, &quiet).unwrap());
    assert!(ns.link_details("va").contains("promiscuity 0"));
    drop(port);
}

#[test]
fn bad_interface_or_configuration_is_a_device_error_naming_it() {
    let e = AfPacketPort::open("brtnosuch0", 1, &AfPacketConfig::default())
        .err()
        .expect("opened a missing interface");
    assert_eq!(e.device, "brtnosuch0");
    assert_eq!(e.step, "find the interface");
    assert_eq!(
        e.source.as_ref().and_then(|s| s.raw_os_error()),
        Some(libc::ENODEV)
    );
    assert!(e.to_string().starts_with("brtnosuch0: find the interface: "));
    let long = "a-name-of-twenty-chars";
    let e = AfPacketPort::open(long, 1, &AfPacketConfig::default())
        .err()
        .unwrap();
    assert_eq!(
        e.to_string(),
        format!("{}: not a valid interface name (1 to 15 bytes)", long)
    );
    let ns = Netns::with_veth();
    ns.run(|| {
        let e = AfPacketPort::open("va", 0, &AfPacketConfig::default())
            .err()
            .unwrap();
        assert_eq!(e.to_string(), "va: open with 0 queues (need at least 1)");
        let bad = AfPacketConfig {
            block_size: 5000,
            ..AfPacketConfig::default()
        };
        let e = AfPacketPort::open("va", 1, &bad).err().unwrap();
        assert_eq!(
            e.to_string(),
            "va: ring block size 5000 is not a power of two between 4096 and 2^30"
        );
    });
}

/// A TCP/IPv4 frame 10.0.0.1:1234 -> 10.0.0.2:80 with `payload` bytes of `fill` and
/// sequence number `seq`, its TCP checksum field holding the pseudo-header's sum as a
/// sender with checksum offload leaves it (the IPv4 header checksum left 0: nothing
/// here checks it).
fn tcp_super_frame(seq: u32, payload: usize, fill: u8) -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 0x0b, 0x02, 0, 0, 0, 0, 0x0a, 0x08, 0x00];
    let total = (40 + payload) as u16;
    f.extend_from_slice(&[0x45, 0]);
    f.extend_from_slice(&total.to_be_bytes());
    f.extend_from_slice(&[0, 1, 0x40, 0, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2]);
    f.extend_from_slice(&1234u16.to_be_bytes());
    f.extend_from_slice(&80u16.to_be_bytes());
    f.extend_from_slice(&seq.to_be_bytes());
    f.extend_from_slice(&[0, 0, 0, 1, 0x50, 0x10, 0xff, 0xff]);
    // Pseudo-header: 0x0a00 + 0x0001 + 0x0a00 + 0x0002 + 6 + TCP length.
    let pseudo = 0x1409u32 + u32::from(total - 20);
    let pseudo = ((pseudo & 0xffff) + (pseudo >> 16)) as u16;
    f.extend_from_slice(&pseudo.to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.resize(f.len() + payload, fill);
    f
}

#[test]
fn merged_tcp_frames_arrive_as_their_segments_in_order_whatever_the_burst() {
    let ns = Netns::with_veth();
    ns.run(|| {
        let port = small_blocks_port();
        // The peer sends with a virtio-net header of its own: for a merged frame, TCPv4
        // segmentation at 1,000 bytes and the checksum to finish from the TCP header
        // (34, field 16), as a local sender's TSO hands a veth its frames.
        let peer = Peer::open("vb");
        let one: libc::c_int = 1;
        assert_eq!(
            setsockopt(&peer.fd, libc::SOL_PACKET, libc::PACKET_VNET_HDR, &one),
            0
        );
        let plain_hdr = [0u8; VNET_HDR_LEN];
        let gso_hdr = [1, 1, 54, 0, 0xe8, 0x03, 34, 0, 16, 0];
        let mut want: Vec<(char, u32)> = Vec::new();
        for i in 0..53u32 {
            let (hdr, frame) = if i % 4 == 1 {
                let seq = 1_000_000 * i;
                for k in 0..3 {
                    want.push(('t', seq + 1000 * k));
                }
                (gso_hdr, tcp_super_frame(seq, 3000, i as u8))
            } else {
                want.push(('f', i));
                (plain_hdr, test_frame(i, 200))
            };
            peer.send(&[&hdr[..], &frame].concat());
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut got = Vec::new();
        let mut b = PacketBatch::new();
        let bursts = [1, 2, 3, 5, 8];
        let mut call = 0;
        while got.len() < want.len() {
            assert!(Instant::now() < deadline, "timed out: {:?} so far", got);
            let max = bursts[call % bursts.len()];
            call += 1;
            let n = port.rx_burst(0, &mut b, max);
            assert!(n <= max && b.len() == n, "{n} frames for a burst of {max}");
            for p in b.drain() {
                let d = p.data();
                if is_test_frame(d) {
                    assert_eq!(
                        d,
                        test_frame(u32::from_be_bytes(d[14..18].try_into().unwrap()), 200)
                    );
                    got.push(('f', u32::from_be_bytes(d[14..18].try_into().unwrap())));
                } else if d.len() > 34 && d[12..14] == [0x08, 0x00] && d[23] == 6 {
                    // A segment: 1,000 payload bytes, its checksum finished.
                    assert_eq!(d.len(), 54 + 1000);
                    assert_eq!(packet::checksum::checksum(&d[14..34]), 0, "IPv4 header");
                    let pseudo = packet::checksum::pseudo_header_v4([10, 0, 0, 1], [10, 0, 0, 2], 6, 1020);
                    assert_eq!(
                        !packet::checksum::fold(packet::checksum::sum(&d[34..], pseudo)),
                        0
                    );
                    got.push(('t', u32::from_be_bytes(d[38..42].try_into().unwrap())));
                }
            }
        }
        assert_eq!(got, want);
    });
}
