//! AF_XDP port tests on veth pairs in fresh network namespaces (needs root).
//!
//! Each test makes its own namespace `brx{pid}_{n}` holding a veth pair: `xa` (the
//! port, 198.18.0.1/24, MAC 02:00:00:00:00:0a) and `xb` (the peer, MAC
//! 02:00:00:00:00:0b, no address). The peer sends and receives raw frames through an
//! AF_PACKET socket. The test body runs in a thread that entered the namespace
//! (setns); a guard deletes the namespace, also when the test fails.
//!
//! These tests do not skip: without root, AF_XDP or bpf(2) they fail and say why.

use io::{attached_xdp_program, Attached, Port, UmemSet, XdpConfig, XdpMode, XdpPort, PROGRAM_NAME};
use packet::{Packet, PacketBatch};
use std::ffi::CString;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

const XA_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x0a];
const XB_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x0b];
const XA_IP: [u8; 4] = [198, 18, 0, 1];
const XB_IP: [u8; 4] = [198, 18, 0, 2];
/// How long a test waits for frames before failing (not a speed assertion).
const WAIT: Duration = Duration::from_secs(5);

fn run(args: &[&str]) {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {}", args.join(" "), e));
    assert!(
        out.status.success(),
        "`{}` failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A namespace with the veth pair; deleted on drop.
struct Netns {
    name: String,
}

impl Netns {
    fn new(queues: u32) -> Netns {
        static N: AtomicUsize = AtomicUsize::new(0);
        let name = format!("brx{}_{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed));
        run(&["ip", "netns", "add", &name]);
        let ns = Netns { name };
        let q = queues.to_string();
        let sh = |cmd: &str| {
            let mut a = vec!["ip", "netns", "exec", &ns.name];
            a.extend(cmd.split(' '));
            run(&a);
        };
        // No IPv6: the kernel's own router solicitations and MLD reports would be extra
        // frames on the wire.
        for conf in ["default", "all"] {
            run(&[
                "ip",
                "netns",
                "exec",
                &ns.name,
                "sh",
                "-c",
                &format!("echo 1 > /proc/sys/net/ipv6/conf/{}/disable_ipv6", conf),
            ]);
        }
        sh(&format!(
            "ip link add xa address 02:00:00:00:00:0a numrxqueues {q} numtxqueues {q} type veth \
             peer name xb address 02:00:00:00:00:0b numrxqueues {q} numtxqueues {q}"
        ));
        sh("ip addr add 198.18.0.1/24 dev xa");
        sh("ip link set xa up");
        sh("ip link set xb up");
        ns
    }

    /// Runs `f` in a thread that entered the namespace.
    fn enter<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> T {
        in_netns(&self.name, f)
    }
}

/// Runs `f` in a thread that entered namespace `name`.
fn in_netns<T: Send + 'static>(name: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let path = format!("/run/netns/{}", name);
    std::thread::spawn(move || {
        let c = CString::new(path.clone()).unwrap();
        // SAFETY: plain open(2) of a NUL-terminated path.
        let fd = unsafe { libc::open(c.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
        assert!(fd >= 0, "open {}: {}", path, std::io::Error::last_os_error());
        // SAFETY: setns(2) on the namespace descriptor just opened; it changes only
        // this thread's network namespace.
        let r = unsafe { libc::setns(fd, libc::CLONE_NEWNET) };
        assert!(r == 0, "setns {}: {}", path, std::io::Error::last_os_error());
        // SAFETY: closing the descriptor opened above.
        unsafe { libc::close(fd) };
        f()
    })
    .join()
    .unwrap_or_else(|e| std::panic::resume_unwind(e))
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.name]).status();
    }
}

/// An AF_PACKET socket on `xb` (the peer): sends frames, receives incoming ones.
struct Peer {
    fd: i32,
    ifindex: i32,
}

impl Peer {
    fn open() -> Peer {
        Peer::on("xb")
    }

    /// A peer socket on interface `ifname`.
    fn on(ifname: &str) -> Peer {
        let proto = (libc::ETH_P_ALL as u16).to_be();
        // SAFETY: plain socket(2) call, checked.
        let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW, i32::from(proto)) };
        assert!(fd >= 0, "AF_PACKET socket: {}", std::io::Error::last_os_error());
        let name = CString::new(ifname).unwrap();
        // SAFETY: NUL-terminated name.
        let ifindex = unsafe { libc::if_nametoindex(name.as_ptr()) } as i32;
        assert!(ifindex > 0, "{} not found", ifname);
        // SAFETY: all-zero sockaddr_ll is valid; filled below.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = proto;
        sll.sll_ifindex = ifindex;
        // SAFETY: binding to a valid sockaddr_ll of the size given.
        let r = unsafe {
            libc::bind(
                fd,
                &sll as *const _ as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_ll>() as u32,
            )
        };
        assert!(r == 0, "bind AF_PACKET: {}", std::io::Error::last_os_error());
        let tv = libc::timeval {
            tv_sec: 0,
            tv_usec: 100_000,
        };
        // SAFETY: SO_RCVTIMEO with a timeval of the size given.
        unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                &tv as *const _ as *const libc::c_void,
                std::mem::size_of::<libc::timeval>() as u32,
            )
        };
        // Room for every frame a test sends before it reads them.
        let rcvbuf: libc::c_int = 16 << 20;
        // SAFETY: SO_RCVBUFFORCE with an int of the size given.
        unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_RCVBUFFORCE,
                &rcvbuf as *const _ as *const libc::c_void,
                std::mem::size_of::<libc::c_int>() as u32,
            )
        };
        Peer { fd, ifindex }
    }

    fn send(&self, frame: &[u8]) {
        // SAFETY: all-zero sockaddr_ll is valid; filled below.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_ifindex = self.ifindex;
        sll.sll_halen = 6;
        sll.sll_addr[..6].copy_from_slice(&frame[..6]);
        // SAFETY: `frame` is readable; the address is a valid sockaddr_ll.
        let n = unsafe {
            libc::sendto(
                self.fd,
                frame.as_ptr() as *const libc::c_void,
                frame.len(),
                0,
                &sll as *const _ as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_ll>() as u32,
            )
        };
        assert_eq!(
            n,
            frame.len() as isize,
            "send: {}",
            std::io::Error::last_os_error()
        );
    }

    /// Incoming frames (not the ones this side sent) that `keep` accepts, until `n` are
    /// there or the wait is over.
    fn receive(&self, n: usize, keep: impl Fn(&[u8]) -> bool) -> Vec<Vec<u8>> {
        let deadline = Instant::now() + WAIT;
        let mut got = Vec::new();
        let mut buf = vec![0u8; 4096];
        while got.len() < n && Instant::now() < deadline {
            // SAFETY: all-zero sockaddr_ll is valid.
            let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
            let mut alen = std::mem::size_of::<libc::sockaddr_ll>() as u32;
            // SAFETY: `buf` is writable for its length; `sll` for `alen` bytes.
            let r = unsafe {
                libc::recvfrom(
                    self.fd,
                    buf.as_mut_ptr() as *mut libc::c_void,
                    buf.len(),
                    0,
                    &mut sll as *mut _ as *mut libc::sockaddr,
                    &mut alen,
                )
            };
            if r > 0 && sll.sll_pkttype != libc::PACKET_OUTGOING && keep(&buf[..r as usize]) {
                got.push(buf[..r as usize].to_vec());
            }
        }
        got
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        // SAFETY: closing the socket this value owns.
        unsafe { libc::close(self.fd) };
    }
}

fn ipv4_checksum(h: &[u8]) -> u16 {
    let mut s: u32 = 0;
    for c in h.chunks(2) {
        s += u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]));
    }
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

/// Ethernet + IPv4 + UDP, `src` -> `dst`:`dport`, `payload` bytes, IPv4 checksum
/// right, UDP checksum 0 (none).
fn udp_frame(
    src_mac: [u8; 6],
    dst_mac: [u8; 6],
    src: [u8; 4],
    dst: [u8; 4],
    sport: u16,
    dport: u16,
    payload: &[u8],
) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&dst_mac);
    f.extend_from_slice(&src_mac);
    f.extend_from_slice(&[0x08, 0x00]);
    let total = (20 + 8 + payload.len()) as u16;
    let mut ip = vec![0x45, 0];
    ip.extend_from_slice(&total.to_be_bytes());
    ip.extend_from_slice(&[0, 1, 0, 0, 64, 17, 0, 0]);
    ip.extend_from_slice(&src);
    ip.extend_from_slice(&dst);
    let c = ipv4_checksum(&ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&ip);
    f.extend_from_slice(&sport.to_be_bytes());
    f.extend_from_slice(&dport.to_be_bytes());
    f.extend_from_slice(&(8 + payload.len() as u16).to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend_from_slice(payload);
    f
}

/// Frame `i` of a test stream from the peer to 198.18.1.9 (not the port's address):
/// sizes from 60 to 1514 bytes, a payload pattern depending on `i`.
fn stream_frame(i: usize) -> Vec<u8> {
    let len = [60, 64, 128, 333, 1000, 1514][i % 6];
    let payload: Vec<u8> = (0..len - 42).map(|k| (k + i * 7) as u8).collect();
    udp_frame(
        XB_MAC,
        XA_MAC,
        XB_IP,
        [198, 18, 1, 9],
        1000 + i as u16,
        9,
        &payload,
    )
}

/// Polls `queues` of the port until `n` packets arrived or the wait is over.
fn receive_on(port: &XdpPort, queues: &[usize], n: usize) -> Vec<(usize, Vec<u8>)> {
    let deadline = Instant::now() + WAIT;
    let mut got = Vec::new();
    let mut b = PacketBatch::new();
    while got.len() < n && Instant::now() < deadline {
        for &q in queues {
            port.rx_burst(q, &mut b, 32);
            got.extend(b.drain().map(|p| (q, p.data().to_vec())));
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    got
}

/// Waits until every UMEM frame is back in its place (transmissions completed).
fn assert_no_frame_leaked(port: &XdpPort) {
    let deadline = Instant::now() + WAIT;
    while !port.frames_accounted() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    for q in 0..port.queues() {
        let s = port.xdp_stats(q);
        assert_eq!(
            s.frames.in_kernel(),
            0,
            "queue {}: frames not accounted: {:?}",
            q,
            s
        );
        assert_eq!(s.frames.total, XdpConfig::default().frames_per_queue);
    }
}

/// Asserts that no XDP program is attached to `ifname` once the port is dropped. A
/// child process that another test thread is spawning at that moment may hold a copy
/// of the link descriptor until its exec closes it, so the check allows that long.
fn assert_detached(ifname: &str) {
    let deadline = Instant::now() + WAIT;
    let mut now = attached_xdp_program(ifname).unwrap();
    while now.is_some() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
        now = attached_xdp_program(ifname).unwrap();
    }
    assert_eq!(now, None, "XDP program still attached to {}", ifname);
}

fn open(queues: usize) -> XdpPort {
    XdpPort::open("xa", queues, &XdpConfig::default())
        .unwrap_or_else(|e| panic!("AF_XDP port on a veth pair: {}", e))
}

#[test]
fn frames_from_the_peer_arrive_byte_for_byte() {
    let ns = Netns::new(1);
    ns.enter(|| {
        let port = open(1);
        eprintln!("{}", port);
        assert_eq!(port.mode(), XdpMode::Copy, "veth has no zero-copy");
        assert!(
            port.to_string().starts_with("xa: AF_XDP, copy mode, "),
            "{}",
            port
        );
        assert!(port.to_string().ends_with(" XDP, 1 queue"), "{}", port);
        let peer = Peer::open();
        let sent: Vec<Vec<u8>> = (0..100).map(stream_frame).collect();
        for f in &sent {
            peer.send(f);
        }
        let got = receive_on(&port, &[0], sent.len());
        let got: Vec<Vec<u8>> = got.into_iter().map(|(_, f)| f).collect();
        assert_eq!(got.len(), sent.len());
        assert!(got == sent, "received frames differ from the sent ones");
        let bytes: usize = sent.iter().map(|f| f.len()).sum();
        let s = port.stats(0);
        assert_eq!((s.rx_packets, s.rx_bytes), (100, bytes as u64));
        let k = port.xdp_stats(0).kernel;
        assert_eq!(
            (k.rx_dropped, k.rx_ring_full, k.rx_invalid_descs),
            (0, 0, 0),
            "{:?}",
            k
        );
        assert_no_frame_leaked(&port);
    });
}

#[test]
fn transmitted_frames_arrive_at_the_peer() {
    let ns = Netns::new(1);
    ns.enter(|| {
        let port = open(1);
        let peer = Peer::open();
        // Frames from the port to the peer: 300 of them, more than one transmit call
        // of the kernel's copy mode sends at once.
        let sent: Vec<Vec<u8>> = (0..300)
            .map(|i| {
                let payload: Vec<u8> = (0..18 + (i * 5) % 1400).map(|k| (k ^ i) as u8).collect();
                udp_frame(
                    XA_MAC,
                    XB_MAC,
                    XA_IP,
                    [198, 18, 2, 2],
                    2000 + i as u16,
                    9,
                    &payload,
                )
            })
            .collect();
        let mut accepted = 0;
        for chunk in sent.chunks(16) {
            let mut b: PacketBatch = chunk.iter().map(|f| Packet::from_slice(f)).collect();
            accepted += port.tx_burst(0, &mut b);
            assert!(b.is_empty());
        }
        assert_eq!(accepted, 300);
        let got = peer.receive(sent.len(), |f| f[6..12] == XA_MAC);
        assert_eq!(got.len(), sent.len());
        assert!(got == sent, "frames at the peer differ from the transmitted ones");
        let bytes: usize = sent.iter().map(|f| f.len()).sum();
        let s = port.stats(0);
        assert_eq!((s.tx_packets, s.tx_bytes), (300, bytes as u64));
        // A packet longer than a UMEM frame (2,048 bytes) is dropped and counted.
        let mut b = PacketBatch::new();
        b.push(Packet::from_slice(&[0x5a; 2100]));
        assert_eq!(port.tx_burst(0, &mut b), 0);
        assert!(b.is_empty());
        assert_eq!(port.xdp_stats(0).tx_too_long, 1);
        assert_eq!(port.stats(0).tx_packets, 300);
        assert_no_frame_leaked(&port);
    });
}

/// A UDP socket bound to `addr`:`port` in the current namespace, with a receive timeout.
fn udp_socket(addr: [u8; 4], port: u16) -> std::net::UdpSocket {
    let a = std::net::SocketAddrV4::new(addr.into(), port);
    let s = std::net::UdpSocket::bind(a).unwrap_or_else(|e| panic!("bind {}: {}", a, e));
    s.set_read_timeout(Some(WAIT)).unwrap();
    s
}

#[test]
fn arp_and_traffic_to_the_own_address_go_to_the_kernel() {
    let ns = Netns::new(1);
    ns.enter(|| {
        let port = open(1);
        assert_eq!(port.local_addresses(), vec![XA_IP]);
        let peer = Peer::open();
        let sock = udp_socket(XA_IP, 7777);

        // ARP request: who has 198.18.0.1? tell 198.18.0.2.
        let mut arp = vec![0xff; 6];
        arp.extend_from_slice(&XB_MAC);
        arp.extend_from_slice(&[0x08, 0x06, 0, 1, 0x08, 0x00, 6, 4, 0, 1]);
        arp.extend_from_slice(&XB_MAC);
        arp.extend_from_slice(&XB_IP);
        arp.extend_from_slice(&[0; 6]);
        arp.extend_from_slice(&XA_IP);
        arp.resize(60, 0);
        peer.send(&arp);
        // The kernel's answer: 198.18.0.1 is at 02:00:00:00:00:0a.
        let mut expected = XB_MAC.to_vec();
        expected.extend_from_slice(&XA_MAC);
        expected.extend_from_slice(&[0x08, 0x06, 0, 1, 0x08, 0x00, 6, 4, 0, 2]);
        expected.extend_from_slice(&XA_MAC);
        expected.extend_from_slice(&XA_IP);
        expected.extend_from_slice(&XB_MAC);
        expected.extend_from_slice(&XB_IP);
        let replies = peer.receive(1, |f| f[12..14] == [0x08, 0x06]);
        assert_eq!(replies.len(), 1, "no ARP reply from the kernel");
        assert_eq!(&replies[0][..42], &expected[..]);

        // UDP to the port's own address reaches the kernel's socket.
        let payload = b"to the kernel";
        peer.send(&udp_frame(XB_MAC, XA_MAC, XB_IP, XA_IP, 5555, 7777, payload));
        let mut buf = [0u8; 64];
        let (n, from) = sock
            .recv_from(&mut buf)
            .expect("UDP to 198.18.0.1 did not reach the kernel");
        assert_eq!(&buf[..n], payload);
        assert_eq!(from, "198.18.0.2:5555".parse().unwrap());

        // A frame to another address goes to the AF_XDP socket, and it is the only
        // one there: neither the ARP request nor the UDP datagram was.
        let marker = stream_frame(3);
        peer.send(&marker);
        // The queue delivers in arrival order, so whatever came before the marker is
        // in the same poll or an earlier one.
        let mut got = receive_on(&port, &[0], 1);
        got.extend(receive_on(&port, &[0], 0));
        let mut b = PacketBatch::new();
        port.rx_burst(0, &mut b, 32);
        got.extend(b.drain().map(|p| (0, p.data().to_vec())));
        assert_eq!(got, vec![(0, marker)]);
        assert_no_frame_leaked(&port);
    });
}

/// An ARP frame from the peer (XB): `op` 1 (request) or 2 (reply), target `target`
/// (XA's MAC as the target hardware address of a reply), padded to 60 bytes.
fn arp_frame(op: u8, target: [u8; 4]) -> Vec<u8> {
    let mut f = if op == 1 { vec![0xff; 6] } else { XA_MAC.to_vec() };
    f.extend_from_slice(&XB_MAC);
    f.extend_from_slice(&[0x08, 0x06, 0, 1, 0x08, 0x00, 6, 4, 0, op]);
    f.extend_from_slice(&XB_MAC);
    f.extend_from_slice(&XB_IP);
    f.extend_from_slice(if op == 1 { &[0; 6] } else { &XA_MAC });
    f.extend_from_slice(&target);
    f.resize(60, 0);
    f
}

#[test]
fn with_router_arp_the_sockets_get_arp_for_other_addresses() {
    let ns = Netns::new(1);
    ns.enter(|| {
        let port = open(1);
        let peer = Peer::open();
        port.set_router_arp(true).unwrap();

        // For the interface's own address: the kernel still answers, and the socket
        // gets nothing.
        peer.send(&arp_frame(1, XA_IP));
        let replies = peer.receive(1, |f| f[12..14] == [0x08, 0x06] && f[21] == 2);
        assert_eq!(replies.len(), 1, "no ARP reply from the kernel");
        assert_eq!(&replies[0][28..32], &XA_IP);

        // A request for another address and a reply to someone else's request: both
        // to the socket; turned off, ARP goes to the kernel again (which ignores a
        // request for an address it does not have).
        let frames = [arp_frame(1, [198, 18, 0, 9]), arp_frame(2, [198, 18, 0, 77])];
        to_the_socket_until_turned_off(&port, &peer, &frames, || port.set_router_arp(false).unwrap());
    });
}

/// Sends `frames` from the peer: they must reach the socket, byte for byte and in
/// order. Then, after `turn_off`, the first again and a marker: only the marker may
/// reach it (the frame went to the kernel).
fn to_the_socket_until_turned_off(port: &XdpPort, peer: &Peer, frames: &[Vec<u8>], turn_off: impl FnOnce()) {
    for f in frames {
        peer.send(f);
    }
    let got = receive_on(port, &[0], frames.len());
    assert_eq!(got, frames.iter().map(|f| (0, f.clone())).collect::<Vec<_>>());
    turn_off();
    peer.send(&frames[0]);
    let marker = stream_frame(4);
    peer.send(&marker);
    assert_eq!(receive_on(port, &[0], 1), vec![(0, marker)]);
    assert_no_frame_leaked(port);
}

/// The peer's (XB's) IPv6 address, and the one given to XA in the kernel.
const XB_IP6: [u8; 16] = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x0b];
const XA_IP6: [u8; 16] = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x0a];

/// A neighbour solicitation (`icmp_type` 135) or advertisement (136) from the peer to
/// `dst` (by XA's MAC) about `target`, with the peer's link-layer address option (source
/// for a solicitation, target for an advertisement) and a right ICMPv6 checksum.
fn nd_frame(icmp_type: u8, dst: [u8; 16], target: [u8; 16]) -> Vec<u8> {
    let mut icmp = vec![icmp_type, 0, 0, 0];
    // Advertisement flags: solicited and override.
    icmp.extend_from_slice(if icmp_type == 136 {
        &[0x60, 0, 0, 0]
    } else {
        &[0; 4]
    });
    icmp.extend_from_slice(&target);
    icmp.extend_from_slice(&[if icmp_type == 135 { 1 } else { 2 }, 1]);
    icmp.extend_from_slice(&XB_MAC);
    // The checksum over the pseudo-header (addresses, length, next header 58) and the
    // message.
    let mut sum_over = XB_IP6.to_vec();
    sum_over.extend_from_slice(&dst);
    sum_over.extend_from_slice(&(icmp.len() as u32).to_be_bytes());
    sum_over.extend_from_slice(&[0, 0, 0, 58]);
    sum_over.extend_from_slice(&icmp);
    let c = ipv4_checksum(&sum_over).to_be_bytes();
    icmp[2..4].copy_from_slice(&c);
    let mut f = XA_MAC.to_vec();
    f.extend_from_slice(&XB_MAC);
    f.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0]);
    f.extend_from_slice(&(icmp.len() as u16).to_be_bytes());
    f.extend_from_slice(&[58, 255]);
    f.extend_from_slice(&XB_IP6);
    f.extend_from_slice(&dst);
    f.extend_from_slice(&icmp);
    f
}

#[test]
fn with_router_nd_the_sockets_get_neighbour_discovery_for_other_addresses() {
    let ns = Netns::new(1);
    let name = ns.name.clone();
    // IPv6 on xa only, with an address of the kernel's (no duplicate detection, so it
    // is usable at once).
    run(&[
        "ip",
        "netns",
        "exec",
        &name,
        "sysctl",
        "-qw",
        "net.ipv6.conf.xa.disable_ipv6=0",
    ]);
    run(&[
        "ip",
        "-n",
        &name,
        "addr",
        "add",
        "2001:db8::a/64",
        "dev",
        "xa",
        "nodad",
    ]);
    ns.enter(|| {
        let port = open(1);
        assert!(port.local_addresses_v6().contains(&XA_IP6));
        let peer = Peer::open();
        port.set_router_nd(true).unwrap();
        let is_advertisement = |f: &[u8]| f.len() > 54 && f[12..14] == [0x86, 0xdd] && f[54] == 136;

        // A solicitation for the kernel's address: the kernel advertises it.
        peer.send(&nd_frame(135, XA_IP6, XA_IP6));
        let replies = peer.receive(1, is_advertisement);
        assert_eq!(replies.len(), 1, "no advertisement from the kernel");
        assert_eq!(&replies[0][62..78], &XA_IP6);

        // A solicitation for another address and an advertisement to another address:
        // both to the socket, byte for byte, in order.
        let other = |last: u8| {
            let mut a = XA_IP6;
            a[15] = last;
            a
        };
        // Turned off: neighbour discovery goes to the kernel again.
        let frames = [
            nd_frame(135, other(0x99), other(0x99)),
            nd_frame(136, other(0x77), XB_IP6),
        ];
        to_the_socket_until_turned_off(&port, &peer, &frames, || port.set_router_nd(false).unwrap());
    });
}

#[test]
fn program_is_attached_while_open_and_gone_after_drop() {
    let ns = Netns::new(1);
    ns.enter(|| {
        assert_eq!(attached_xdp_program("xa").unwrap(), None);
        let port = open(1);
        let prog = attached_xdp_program("xa")
            .unwrap()
            .expect("a program is attached");
        assert_eq!(prog.name, PROGRAM_NAME);
        let expected_mode = match port.attach_mode() {
            io::XdpAttach::Native => Attached::Driver,
            io::XdpAttach::Generic => Attached::Generic,
        };
        assert_eq!(prog.attached, expected_mode);
        // While it is open, a second port on the interface is refused, and the first
        // keeps its program.
        let e = XdpPort::open("xa", 1, &XdpConfig::default()).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "xa: brickroute's XDP program (id {}) is held by a bpf_link: another brickroute \
                 port (in this process or another) is open on this interface: {}",
                prog.id,
                std::io::Error::from_raw_os_error(libc::EBUSY)
            )
        );
        assert_eq!(attached_xdp_program("xa").unwrap(), Some(prog));
        drop(port);
        assert_detached("xa");
        // A second port opens on the same interface after the first is gone.
        let again = open(1);
        drop(again);
        assert_detached("xa");
    });
}

#[test]
fn two_queues_receive_and_transmit() {
    let ns = Netns::new(2);
    ns.enter(|| {
        let port = open(2);
        assert!(port.to_string().ends_with(" XDP, 2 queues"), "{}", port);
        let peer = Peer::open();
        let sent: Vec<Vec<u8>> = (0..128).map(stream_frame).collect();
        for f in &sent {
            peer.send(f);
        }
        let got = receive_on(&port, &[0, 1], sent.len());
        assert_eq!(got.len(), sent.len());
        let mut got_frames: Vec<Vec<u8>> = got.iter().map(|(_, f)| f.clone()).collect();
        let mut want = sent.clone();
        got_frames.sort();
        want.sort();
        assert!(got_frames == want, "received frames differ from the sent ones");
        let on_1 = got.iter().filter(|(q, _)| *q == 1).count();
        assert!(
            on_1 > 0 && on_1 < sent.len(),
            "128 flows all on one queue ({} on queue 1)",
            on_1
        );
        assert_eq!(port.stats(0).rx_packets + port.stats(1).rx_packets, 128);
        assert_eq!(port.stats(1).rx_packets, on_1 as u64);

        // Each queue transmits.
        for q in 0..2 {
            let f = udp_frame(
                XA_MAC,
                XB_MAC,
                XA_IP,
                [198, 18, 2, 2],
                4000 + q as u16,
                9,
                &[q as u8; 30],
            );
            let mut b = PacketBatch::new();
            b.push(Packet::from_slice(&f));
            assert_eq!(port.tx_burst(q, &mut b), 1);
            let at_peer = peer.receive(1, |x| x[6..12] == XA_MAC);
            assert_eq!(at_peer, vec![f], "queue {}", q);
            assert_eq!(port.stats(q).tx_packets, 1);
        }
        assert_no_frame_leaked(&port);
    });
}

#[test]
fn errors_name_the_interface_and_the_reason() {
    let ns = Netns::new(2);
    ns.enter(|| {
        let e = XdpPort::open("nosuch0", 1, &XdpConfig::default()).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "nosuch0: find the interface: {}",
                std::io::Error::from_raw_os_error(libc::ENODEV)
            )
        );
        let e = XdpPort::open("xa", 3, &XdpConfig::default()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "xa: 3 queues asked, the interface has 2 receive queues"
        );
        let e = XdpPort::open("xa", 0, &XdpConfig::default()).unwrap_err();
        assert_eq!(e.to_string(), "xa: an AF_XDP port needs at least one queue");
        let cfg = XdpConfig {
            ring_size: 1000,
            ..XdpConfig::default()
        };
        let e = XdpPort::open("xa", 1, &cfg).unwrap_err();
        assert_eq!(
            e.to_string(),
            "xa: ring size 1000 is not a power of two of at least 64"
        );
        // Nothing was left attached by the failed opens.
        assert_eq!(attached_xdp_program("xa").unwrap(), None);
    });
}

/// Loads `r0 = XDP_PASS; exit` as an XDP program named `name` with bpf(2), written
/// out here independently of the port's loader; returns its descriptor.
fn load_pass_program(name: &str) -> i32 {
    // mov64 r0, 2 ; exit
    let insns: [[u8; 8]; 2] = [[0xb7, 0, 0, 0, 2, 0, 0, 0], [0x95, 0, 0, 0, 0, 0, 0, 0]];
    load_program(6, name, &insns) // BPF_PROG_TYPE_XDP
}

/// Loads `insns` as a program of type `prog_type` named `name` with bpf(2); returns
/// its descriptor.
fn load_program(prog_type: u32, name: &str, insns: &[[u8; 8]]) -> i32 {
    #[repr(C)]
    struct ProgLoad {
        prog_type: u32,
        insn_cnt: u32,
        insns: u64,
        license: u64,
        log_level: u32,
        log_size: u32,
        log_buf: u64,
        kern_version: u32,
        prog_flags: u32,
        prog_name: [u8; 16],
    }
    let mut prog_name = [0u8; 16];
    prog_name[..name.len()].copy_from_slice(name.as_bytes());
    let mut a = ProgLoad {
        prog_type,
        insn_cnt: insns.len() as u32,
        insns: insns.as_ptr() as u64,
        license: c"GPL".as_ptr() as u64,
        log_level: 0,
        log_size: 0,
        log_buf: 0,
        kern_version: 0,
        prog_flags: 0,
        prog_name,
    };
    // SAFETY: BPF_PROG_LOAD (5) with an attribute block of the size given; the
    // instruction and licence pointers stay valid during the call.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            5,
            &mut a as *mut ProgLoad,
            std::mem::size_of::<ProgLoad>(),
        )
    };
    assert!(
        fd >= 0,
        "load test program {}: {}",
        name,
        std::io::Error::last_os_error()
    );
    fd as i32
}

/// Attaches `prog_fd` to `ifname` in generic mode through netlink (RTM_SETLINK with
/// IFLA_XDP), as `ip link set dev IF xdpgeneric ...` does: it stays attached when the
/// descriptor is closed, like a program left behind by a crashed tool.
fn attach_with_netlink(ifname: &str, prog_fd: i32) {
    let name = CString::new(ifname).unwrap();
    // SAFETY: NUL-terminated name.
    let ifindex = unsafe { libc::if_nametoindex(name.as_ptr()) } as i32;
    let mut m: Vec<u8> = Vec::new();
    m.extend_from_slice(&52u32.to_ne_bytes()); // total length
    m.extend_from_slice(&19u16.to_ne_bytes()); // RTM_SETLINK
    m.extend_from_slice(&5u16.to_ne_bytes()); // NLM_F_REQUEST | NLM_F_ACK
    m.extend_from_slice(&[1, 0, 0, 0, 0, 0, 0, 0]); // sequence, port id
    m.extend_from_slice(&[0, 0, 0, 0]); // ifinfomsg: family, pad, type
    m.extend_from_slice(&ifindex.to_ne_bytes());
    m.extend_from_slice(&[0; 8]); // flags, change
    m.extend_from_slice(&20u16.to_ne_bytes()); // IFLA_XDP, nested
    m.extend_from_slice(&(43u16 | 0x8000).to_ne_bytes());
    m.extend_from_slice(&8u16.to_ne_bytes()); // IFLA_XDP_FD
    m.extend_from_slice(&1u16.to_ne_bytes());
    m.extend_from_slice(&prog_fd.to_ne_bytes());
    m.extend_from_slice(&8u16.to_ne_bytes()); // IFLA_XDP_FLAGS = XDP_FLAGS_SKB_MODE
    m.extend_from_slice(&3u16.to_ne_bytes());
    m.extend_from_slice(&2u32.to_ne_bytes());
    assert_eq!(m.len(), 52);
    // SAFETY: plain socket/send/recv/close calls on buffers of the sizes given.
    unsafe {
        let s = libc::socket(libc::AF_NETLINK, libc::SOCK_RAW, libc::NETLINK_ROUTE);
        assert!(s >= 0);
        assert_eq!(libc::send(s, m.as_ptr() as *const libc::c_void, m.len(), 0), 52);
        let mut ack = [0u8; 256];
        let n = libc::recv(s, ack.as_mut_ptr() as *mut libc::c_void, ack.len(), 0);
        libc::close(s);
        assert!(n >= 20);
        let err = i32::from_ne_bytes(ack[16..20].try_into().unwrap());
        assert_eq!(
            err,
            0,
            "netlink attach: {}",
            std::io::Error::from_raw_os_error(-err)
        );
    }
}

#[test]
fn a_program_left_by_an_earlier_run_is_replaced() {
    let ns = Netns::new(1);
    ns.enter(|| {
        let fd = load_pass_program(PROGRAM_NAME);
        attach_with_netlink("xa", fd);
        // SAFETY: closing the descriptor loaded above; the attachment keeps the program.
        unsafe { libc::close(fd) };
        let leftover = attached_xdp_program("xa").unwrap().expect("leftover attached");
        assert_eq!(
            (leftover.name.as_str(), leftover.attached),
            (PROGRAM_NAME, Attached::Generic)
        );

        let port = open(1);
        let now = attached_xdp_program("xa").unwrap().expect("our program attached");
        assert_eq!(now.name, PROGRAM_NAME);
        assert_ne!(now.id, leftover.id, "the leftover was not replaced");
        // Our program steers: a frame from the peer reaches the socket (the leftover
        // passed everything to the kernel).
        let peer = Peer::open();
        peer.send(&stream_frame(1));
        assert_eq!(receive_on(&port, &[0], 1), vec![(0, stream_frame(1))]);
        drop(port);
        assert_detached("xa");
    });
}

#[test]
fn a_foreign_program_is_refused_and_left_alone() {
    let ns = Netns::new(1);
    ns.enter(|| {
        let fd = load_pass_program("foreign_pass");
        attach_with_netlink("xa", fd);
        // SAFETY: closing the descriptor loaded above.
        unsafe { libc::close(fd) };
        let foreign = attached_xdp_program("xa").unwrap().expect("attached");
        let e = XdpPort::open("xa", 1, &XdpConfig::default()).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "xa: another XDP program ('foreign_pass', id {}) is attached; brickroute will not \
                 replace it: detach it first (ip link set dev xa xdp off; if that fails, a \
                 bpf_link holds it: end the process that holds the link, which `bpftool link` \
                 lists)",
                foreign.id
            )
        );
        assert_eq!(attached_xdp_program("xa").unwrap(), Some(foreign));
    });
}

/// The child half of `killed_process_leaves_no_program_behind`: run only by that test
/// (it sets the variable), it opens a port in the given namespace, says so, and waits
/// to be killed.
#[test]
#[ignore = "run by killed_process_leaves_no_program_behind"]
fn child_holding_a_port() {
    let Ok(ns) = std::env::var("BRT_XDP_CHILD_NETNS") else {
        return;
    };
    in_netns(&ns, || {
        let port = open(1);
        println!("XDP-CHILD-READY {}", port);
        use std::io::Write;
        std::io::stdout().flush().unwrap();
        std::thread::sleep(Duration::from_secs(60));
        drop(port);
    });
}

#[test]
fn killed_process_leaves_no_program_behind() {
    use std::io::BufRead;
    let ns = Netns::new(1);
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["child_holding_a_port", "--exact", "--ignored", "--nocapture"])
        .env("BRT_XDP_CHILD_NETNS", &ns.name)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn the child test process");
    // Kill the child however this test ends.
    struct Kill(std::process::Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let stdout = child.stdout.take().unwrap();
    let mut child = Kill(child);
    let ready = std::io::BufReader::new(stdout)
        .lines()
        .map_while(Result::ok)
        .find(|l| l.starts_with("XDP-CHILD-READY"));
    assert!(ready.is_some(), "the child did not open its port");
    let attached = ns.enter(|| attached_xdp_program("xa").unwrap());
    assert_eq!(attached.map(|p| p.name), Some(PROGRAM_NAME.to_string()));
    // SIGKILL: no destructor runs; the kernel closes the link with the process.
    child.0.kill().unwrap();
    child.0.wait().unwrap();
    ns.enter(|| {
        assert_detached("xa");
        // And the queue is free for the next run.
        let port = open(1);
        drop(port);
    });
}

/// Drops CAP_NET_ADMIN, CAP_NET_RAW, CAP_SYS_ADMIN and CAP_BPF from the calling
/// thread's effective set (capabilities are per thread on Linux).
fn drop_network_capabilities() {
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
    let mut h = Header {
        version: 0x2008_0522, // _LINUX_CAPABILITY_VERSION_3
        pid: 0,
    };
    let mut d = [Data::default(); 2];
    // SAFETY: capget/capset with a v3 header and two data blocks, as the ABI wants.
    unsafe {
        assert_eq!(
            libc::syscall(libc::SYS_capget, &mut h as *mut Header, d.as_mut_ptr()),
            0
        );
        d[0].effective &= !((1 << 12) | (1 << 13) | (1 << 21)); // NET_ADMIN, NET_RAW, SYS_ADMIN
        d[1].effective &= !(1 << (39 - 32)); // BPF
        assert_eq!(
            libc::syscall(libc::SYS_capset, &mut h as *mut Header, d.as_ptr()),
            0
        );
    }
}

#[test]
fn missing_privileges_are_named() {
    let ns = Netns::new(1);
    ns.enter(|| {
        drop_network_capabilities();
        let e = XdpPort::open("xa", 1, &XdpConfig::default()).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "xa: create the XSKMAP (AF_XDP needs root, or CAP_NET_ADMIN, CAP_NET_RAW and \
                 CAP_BPF): {}",
                std::io::Error::from_raw_os_error(libc::EPERM)
            )
        );
    });
}

#[test]
fn a_small_umem_recycles_its_frames() {
    // 64 UMEM frames: 32 for receiving, 32 for transmitting; 1,000 frames each way go
    // through them, in rounds of 20 so that the rings never overflow.
    let ns = Netns::new(1);
    ns.enter(|| {
        let cfg = XdpConfig {
            frames_per_queue: 64,
            ring_size: 64,
            rx_batch: 8,
            tx_batch: 4,
            ..XdpConfig::default()
        };
        let port = XdpPort::open("xa", 1, &cfg).unwrap_or_else(|e| panic!("{}", e));
        let peer = Peer::open();
        for round in 0..50 {
            let sent: Vec<Vec<u8>> = (round * 20..round * 20 + 20).map(stream_frame).collect();
            for f in &sent {
                peer.send(f);
            }
            let got: Vec<Vec<u8>> = receive_on(&port, &[0], 20).into_iter().map(|(_, f)| f).collect();
            assert!(got == sent, "round {}: received frames differ", round);

            let out: Vec<Vec<u8>> = (0..20)
                .map(|i| {
                    udp_frame(
                        XA_MAC,
                        XB_MAC,
                        XA_IP,
                        [198, 18, 2, 2],
                        3000 + i,
                        9,
                        &[round as u8; 40],
                    )
                })
                .collect();
            let mut b: PacketBatch = out.iter().map(|f| Packet::from_slice(f)).collect();
            assert_eq!(port.tx_burst(0, &mut b), 20, "round {}", round);
            let at_peer = peer.receive(20, |f| f[6..12] == XA_MAC);
            assert!(at_peer == out, "round {}: frames at the peer differ", round);
        }
        let s = port.stats(0);
        assert_eq!((s.rx_packets, s.tx_packets), (1000, 1000));
        let x = port.xdp_stats(0);
        assert_eq!(
            (x.tx_no_room, x.kernel.rx_dropped, x.kernel.rx_ring_full),
            (0, 0, 0)
        );
        let deadline = Instant::now() + WAIT;
        while !port.frames_accounted() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        let f = port.xdp_stats(0).frames;
        assert_eq!((f.total, f.in_kernel()), (64, 0), "{:?}", f);
        // The receive side is back to its half, give or take one k_p batch not yet
        // topped up.
        assert!(f.fill + f.rx <= 32 && f.fill + f.rx > 32 - 8, "{:?}", f);
    });
}

#[test]
fn addresses_added_later_reach_the_kernel_after_a_refresh() {
    let ns = Netns::new(1);
    let name = ns.name.clone();
    ns.enter(move || {
        let port = open(1);
        let peer = Peer::open();
        run(&["ip", "-n", &name, "addr", "add", "198.18.0.5/24", "dev", "xa"]);
        let new_ip = [198, 18, 0, 5];
        let sock = udp_socket(new_ip, 7778);
        let to_new = udp_frame(XB_MAC, XA_MAC, XB_IP, new_ip, 5556, 7778, b"new address");
        // Not yet in the program's map: the frame goes to the AF_XDP socket.
        peer.send(&to_new);
        assert_eq!(receive_on(&port, &[0], 1), vec![(0, to_new.clone())]);
        assert_eq!(port.refresh_local_addresses().unwrap(), 2);
        assert_eq!(port.local_addresses(), vec![XA_IP, new_ip]);
        peer.send(&to_new);
        let mut buf = [0u8; 64];
        let (n, _) = sock
            .recv_from(&mut buf)
            .expect("UDP to 198.18.0.5 did not reach the kernel");
        assert_eq!(&buf[..n], b"new address");
        // Removed again: back to the socket.
        run(&["ip", "-n", &name, "addr", "del", "198.18.0.5/24", "dev", "xa"]);
        assert_eq!(port.refresh_local_addresses().unwrap(), 1);
        peer.send(&to_new);
        assert_eq!(receive_on(&port, &[0], 1), vec![(0, to_new)]);
        // An address with a label is the interface's too, whatever the label says (the
        // kernel takes any; `getifaddrs` lists the address under it): `xa:1`, and even
        // the peer's name.
        for (a, label) in [("198.18.0.6/24", "xa:1"), ("198.18.0.7/24", "xb:7")] {
            run(&["ip", "-n", &name, "addr", "add", a, "dev", "xa", "label", label]);
        }
        assert_eq!(port.refresh_local_addresses().unwrap(), 3);
        assert_eq!(
            port.local_addresses(),
            vec![XA_IP, [198, 18, 0, 6], [198, 18, 0, 7]]
        );
    });
}

const YA_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x1a];
const YB_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x1b];

/// Adds a second veth pair `ya` (198.18.1.1/24) - `yb` to the namespace.
fn add_second_pair(ns: &Netns) {
    let sh = |cmd: &str| {
        let mut a = vec!["ip", "netns", "exec", &ns.name];
        a.extend(cmd.split(' '));
        run(&a);
    };
    sh("ip link add ya address 02:00:00:00:00:1a type veth peer name yb address 02:00:00:00:00:1b");
    sh("ip addr add 198.18.1.1/24 dev ya");
    sh("ip link set ya up");
    sh("ip link set yb up");
}

/// Forwards what arrives on `xa` out of `ya` the way a one-worker router does, with
/// the two ports sharing one UMEM: frames received are the UMEM's own frames and go
/// out without a copy. Along the way, a third of the packets is dropped and a new
/// packet (an element's, like an ICMP error) is sent for every tenth; at the end every
/// UMEM frame is back.
#[test]
fn ports_sharing_a_umem_forward_without_copies_and_get_every_frame_back() {
    let ns = Netns::new(1);
    add_second_pair(&ns);
    ns.enter(|| {
        let cfg = XdpConfig::default();
        let umems = UmemSet::new(4096, cfg.frame_size);
        let xa = XdpPort::open_shared("xa", 1, &cfg, &umems).unwrap_or_else(|e| panic!("{}", e));
        let ya = XdpPort::open_shared("ya", 1, &cfg, &umems).unwrap_or_else(|e| panic!("{}", e));
        assert!(!xa.xdp_stats(0).shared_umem, "xa registered the UMEM");
        assert!(ya.xdp_stats(0).shared_umem, "ya shares it");
        assert_eq!(ya.mode(), XdpMode::Copy);
        let from = Peer::on("xb");
        let to = Peer::on("yb");
        // A shared UMEM's receive sides are filled by the first receive call, once
        // every port sharing it is open (a router's workers start polling then).
        let mut b = PacketBatch::new();
        assert_eq!((xa.rx_burst(0, &mut b, 32), ya.rx_burst(0, &mut b, 32)), (0, 0));

        let sent: Vec<Vec<u8>> = (0..300).map(stream_frame).collect();
        for f in &sent {
            from.send(f);
        }
        // What leaves ya: the kept frames with new MAC addresses (rewritten in place),
        // and a 60-byte frame made for every tenth.
        let mut want = Vec::new();
        let mut made = 0;
        let mut received = 0;
        let mut out = PacketBatch::new();
        let deadline = Instant::now() + WAIT;
        while received < sent.len() && Instant::now() < deadline {
            xa.rx_burst(0, &mut b, 32);
            for mut p in b.drain() {
                let i = received;
                received += 1;
                // The packet is the frame the kernel wrote into the shared UMEM.
                assert!(xa.holds(0, &p) && ya.holds(0, &p), "packet {} was copied", i);
                assert!(p.headroom() >= packet::DEFAULT_HEADROOM, "{}", p.headroom());
                assert_eq!(p.data(), &sent[i][..]);
                if i % 10 == 0 {
                    let mut f = vec![0u8; 60];
                    f[..6].copy_from_slice(&YB_MAC);
                    f[6..12].copy_from_slice(&YA_MAC);
                    f[12] = 0x88;
                    f[13] = 0xb5;
                    f[14] = i as u8;
                    out.push(Packet::from_slice(&f));
                    want.push(f);
                    made += 1;
                }
                if i % 3 == 1 {
                    continue; // dropped: its frame goes back to the UMEM
                }
                p.data_mut()[..6].copy_from_slice(&YB_MAC);
                p.data_mut()[6..12].copy_from_slice(&YA_MAC);
                let mut f = sent[i].clone();
                f[..6].copy_from_slice(&YB_MAC);
                f[6..12].copy_from_slice(&YA_MAC);
                want.push(f);
                out.push(p);
            }
            ya.tx_burst(0, &mut out);
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(received, sent.len());
        let kept = sent.len() - (0..sent.len()).filter(|i| i % 3 == 1).count();
        assert_eq!((kept, made), (200, 30));
        let got = to.receive(want.len(), |f| f[6..12] == YA_MAC);
        assert_eq!(got.len(), want.len());
        assert!(got == want, "frames at yb differ from the forwarded ones");

        let x = ya.xdp_stats(0);
        assert_eq!(
            (x.tx_in_place, x.tx_copied, x.tx_no_room, x.tx_too_long),
            (200, 30, 0, 0),
            "received frames are sent in place, only made ones are copied"
        );
        assert_eq!(ya.stats(0).tx_packets, 230);
        assert_eq!(xa.stats(0).rx_packets, 300);

        let deadline = Instant::now() + WAIT;
        while !(xa.frames_accounted() && ya.frames_accounted()) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        let f = xa.xdp_stats(0).frames;
        assert_eq!(f, ya.xdp_stats(0).frames, "one UMEM behind both ports");
        assert_eq!((f.total, f.packets, f.in_kernel()), (4096, 0, 0), "{:?}", f);
        // Both receive sides are full again (half the UMEM split between the two
        // sockets, 1,024 frames each at most, topped up in k_p batches), and nothing
        // waits to be sent.
        assert!(
            f.fill + f.rx > 2 * 1024 - 32 && f.fill + f.rx <= 2 * 1024,
            "{:?}",
            f
        );
        assert_eq!(f.tx, 0, "{:?}", f);
        assert_eq!(f.free + f.fill + f.rx + f.completion, 4096, "{:?}", f);
    });
}

/// A packet received on one port's own UMEM and sent on a port with another UMEM is
/// copied; a packet kept after its port closed stays readable, and its frame is
/// forgotten when it is dropped.
#[test]
fn packets_cross_umems_by_copy_and_outlive_their_port() {
    let ns = Netns::new(1);
    add_second_pair(&ns);
    ns.enter(|| {
        let xa = open(1);
        let ya = XdpPort::open("ya", 1, &XdpConfig::default()).unwrap_or_else(|e| panic!("{}", e));
        let from = Peer::on("xb");
        let to = Peer::on("yb");
        let sent: Vec<Vec<u8>> = (0..6).map(stream_frame).collect();
        for f in &sent {
            from.send(f);
        }
        let mut b = PacketBatch::new();
        let deadline = Instant::now() + WAIT;
        while b.len() < sent.len() && Instant::now() < deadline {
            xa.rx_burst(0, &mut b, 32);
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(b.len(), sent.len());
        assert!(b.iter().all(|p| xa.holds(0, p) && !ya.holds(0, p)));
        let kept = b.pop().unwrap();
        assert_eq!(ya.tx_burst(0, &mut b), 5);
        let x = ya.xdp_stats(0);
        assert_eq!((x.tx_in_place, x.tx_copied), (0, 5));
        let got = to.receive(5, |f| f[..6] == XA_MAC);
        assert!(got == sent[..5], "copied frames at yb differ");
        assert_eq!(xa.xdp_stats(0).frames.packets, 1, "the kept packet holds a frame");
        drop(xa);
        assert_eq!(kept.data(), &sent[5][..], "readable after its port closed");
        drop(kept);
        assert_no_frame_leaked(&ya);
    });
}

/// Adds veth pair `name`a (address 198.18.`net`.1/24, MAC 02:00:00:00:`net`:0a) -
/// `name`b (MAC 02:00:00:00:`net`:0b) to the namespace.
fn add_pair(ns: &Netns, name: &str, net: u8) {
    let sh = |cmd: &str| {
        let mut a = vec!["ip", "netns", "exec", &ns.name];
        a.extend(cmd.split(' '));
        run(&a);
    };
    sh(&format!(
        "ip link add {name}a address 02:00:00:00:{net:02x}:0a type veth \
         peer name {name}b address 02:00:00:00:{net:02x}:0b"
    ));
    sh(&format!("ip addr add 198.18.{net}.1/24 dev {name}a"));
    sh(&format!("ip link set {name}a up"));
    sh(&format!("ip link set {name}b up"));
}

/// Five interfaces share each worker's UMEM of `UmemSet::DEFAULT_FRAMES` (as in
/// `brickroute run`): every one receives, and packets made by an element (copied into
/// the UMEM) are sent on every one. Each receive side holds its share, half the UMEM
/// split five ways (819 frames), so the other half stays free for transmit.
#[test]
fn five_interfaces_sharing_a_umem_all_receive_and_transmit() {
    let ns = Netns::new(1);
    let names = ["p1", "p2", "p3", "p4"];
    for (i, n) in names.iter().enumerate() {
        add_pair(&ns, n, 10 + i as u8);
    }
    ns.enter(move || {
        let cfg = XdpConfig::default();
        let umems = UmemSet::new(UmemSet::DEFAULT_FRAMES, cfg.frame_size);
        let mut ifs = vec![("xa".to_string(), "xb".to_string(), XA_MAC)];
        for (i, n) in names.iter().enumerate() {
            let mac = [0x02, 0, 0, 0, 10 + i as u8, 0x0a];
            ifs.push((format!("{}a", n), format!("{}b", n), mac));
        }
        let ports: Vec<XdpPort> = ifs
            .iter()
            .map(|(a, _, _)| XdpPort::open_shared(a, 1, &cfg, &umems).unwrap_or_else(|e| panic!("{}", e)))
            .collect();
        // The workers' first polls fill the receive sides.
        let mut b = PacketBatch::new();
        for p in &ports {
            assert_eq!(p.rx_burst(0, &mut b, 32), 0);
        }
        let f = ports[0].xdp_stats(0).frames;
        assert_eq!(f.total, 8192);
        assert_eq!(f.fill, 5 * 819, "{:?}", f);
        assert_eq!(f.free, 8192 - 5 * 819, "{:?}", f);

        for (port, (_, peer_if, mac)) in ports.iter().zip(&ifs) {
            let peer = Peer::on(peer_if);
            let sent: Vec<Vec<u8>> = (0..200)
                .map(|i| {
                    let mut f = stream_frame(i);
                    f[..6].copy_from_slice(mac);
                    f
                })
                .collect();
            for f in &sent {
                peer.send(f);
            }
            let got: Vec<Vec<u8>> = receive_on(port, &[0], sent.len())
                .into_iter()
                .map(|(_, f)| f)
                .collect();
            assert!(
                got == sent,
                "{}: received {} of 200 frames",
                port.ifname(),
                got.len()
            );

            // Made by an element: 300 frames, more than a receive share, each copied
            // into a free UMEM frame.
            let made: Vec<Vec<u8>> = (0..300)
                .map(|i| {
                    let mut f = vec![0u8; 60];
                    f[..6].copy_from_slice(&[0x02, 0, 0, 0, mac[4], 0x0b]);
                    f[6..12].copy_from_slice(mac);
                    f[12] = 0x88;
                    f[13] = 0xb5;
                    f[14..16].copy_from_slice(&(i as u16).to_be_bytes());
                    f
                })
                .collect();
            let mut accepted = 0;
            for chunk in made.chunks(32) {
                let mut out: PacketBatch = chunk.iter().map(|f| Packet::from_slice(f)).collect();
                accepted += port.tx_burst(0, &mut out);
            }
            assert_eq!(accepted, 300, "{}: {:?}", port.ifname(), port.xdp_stats(0));
            let at_peer = peer.receive(made.len(), |f| f[6..12] == mac[..]);
            assert!(
                at_peer == made,
                "{}: {} of 300 made frames at the peer",
                port.ifname(),
                at_peer.len()
            );
            let x = port.xdp_stats(0);
            assert_eq!((x.tx_copied, x.tx_no_room), (300, 0));
            assert_eq!(port.tx_dropped(0), 0);
            assert_eq!(port.rx_dropped(0), 0);
        }
    });
}

/// A UMEM too small to give every socket sharing it a receive share of two receive
/// batches refuses the socket that would not fit, and says why.
/// A port opened and closed beside another on the same UMEM (a configuration that
/// takes an interface over and one that lets it go, `run -R`): in copy mode the closed
/// socket's receive frames, some holding frames it received and never read, go back
/// to the free list, so opening and closing many times loses none.
#[test]
fn a_port_closed_beside_another_gives_its_receive_frames_back() {
    let ns = Netns::new(1);
    add_pair(&ns, "p1", 10);
    ns.enter(move || {
        let cfg = XdpConfig::default();
        let umems = UmemSet::new(UmemSet::DEFAULT_FRAMES, cfg.frame_size);
        let stays = XdpPort::open_shared("xa", 1, &cfg, &umems).unwrap_or_else(|e| panic!("{}", e));
        let peer = Peer::on("p1b");
        let mut b = PacketBatch::new();
        stays.rx_burst(0, &mut b, 32);
        for round in 0..40 {
            let goes = XdpPort::open_shared("p1a", 1, &cfg, &umems).unwrap_or_else(|e| panic!("{}", e));
            goes.rx_burst(0, &mut b, 32);
            // Frames the closing socket received and nobody read.
            for i in 0..3 {
                peer.send(&stream_frame(i));
            }
            let deadline = Instant::now() + WAIT;
            while goes.xdp_stats(0).frames.rx < 3 {
                assert!(
                    Instant::now() < deadline,
                    "round {round}: {:?}",
                    goes.xdp_stats(0)
                );
                std::thread::sleep(Duration::from_millis(1));
            }
            drop(goes);
            stays.rx_burst(0, &mut b, 32);
            let f = stays.xdp_stats(0).frames;
            assert_eq!(f.in_kernel(), 0, "round {round}: {:?}", f);
            assert_eq!(f.free + f.fill + f.rx, 8192, "round {round}: {:?}", f);
        }
    });
}

#[test]
fn a_umem_too_small_for_its_sockets_is_refused() {
    let ns = Netns::new(1);
    add_second_pair(&ns);
    add_pair(&ns, "p1", 10);
    ns.enter(|| {
        let cfg = XdpConfig::default();
        // 512 frames: 256 for receive sides, 128 each for two sockets (four batches of
        // 32, what each gets when it opens), 85 each for three.
        let umems = UmemSet::new(512, cfg.frame_size);
        let _xa = XdpPort::open_shared("xa", 1, &cfg, &umems).unwrap_or_else(|e| panic!("{}", e));
        let _ya = XdpPort::open_shared("ya", 1, &cfg, &umems).unwrap_or_else(|e| panic!("{}", e));
        let e = XdpPort::open_shared("p1a", 1, &cfg, &umems).unwrap_err();
        assert_eq!(
            e.to_string(),
            "p1a: queue 0: a UMEM of 512 frames is too small for 3 AF_XDP sockets: half of it \
             is split among their receive sides, 85 frames each, fewer than 4 receive \
             batches (128); open fewer interfaces with METHOD XDP"
        );
        assert_eq!(attached_xdp_program("p1a").unwrap(), None);
    });
}

/// An interface with more receive queues than the port opens is refused: the program
/// would hand what arrives on the other queues to the kernel.
#[test]
fn fewer_queues_than_the_interface_receives_on_are_refused() {
    let ns = Netns::new(2);
    ns.enter(|| {
        let e = XdpPort::open("xa", 1, &XdpConfig::default()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "xa: the interface has 2 receive queues and 1 worker to read them (AF_XDP reads \
             one queue per worker; frames arriving on the other 1 queue would go to the \
             kernel instead of the router): run 2 workers (--threads 2) or give the \
             interface 1 queue (ethtool -L xa rx 1)"
        );
        assert_eq!(attached_xdp_program("xa").unwrap(), None);
        // The queues in use count, not the most the interface could have: with one
        // of its two in use, one queue is all of them.
        run(&["ethtool", "-L", "xa", "rx", "1"]);
        drop(open(1));
    });
}

/// A port sharing a UMEM set opens on an interface with more receive queues than it
/// has, for transmit: it sends, and says why it would not receive everything (the
/// router refuses FromDevice on it).
#[test]
fn a_shared_port_with_fewer_queues_transmits_and_names_its_receive_problem() {
    let ns = Netns::new(2);
    ns.enter(|| {
        let cfg = XdpConfig::default();
        let umems = UmemSet::new(UmemSet::DEFAULT_FRAMES, cfg.frame_size);
        let port = XdpPort::open_shared("xa", 1, &cfg, &umems).unwrap_or_else(|e| panic!("{}", e));
        assert_eq!(
            port.receive_problem().as_deref(),
            Some(
                "the interface has 2 receive queues and 1 worker to read them (AF_XDP reads \
                 one queue per worker; frames arriving on the other 1 queue would go to the \
                 kernel instead of the router): run 2 workers (--threads 2) or give the \
                 interface 1 queue (ethtool -L xa rx 1)"
            )
        );
        let peer = Peer::open();
        let frame = udp_frame(XA_MAC, XB_MAC, XA_IP, [198, 18, 2, 2], 2000, 9, b"transmit only");
        let mut b: PacketBatch = std::iter::once(Packet::from_slice(&frame)).collect();
        assert_eq!(port.tx_burst(0, &mut b), 1);
        assert_eq!(peer.receive(1, |f| f[6..12] == XA_MAC), vec![frame]);
        // With every queue opened there is none.
        drop(port);
        let both = XdpPort::open_shared("xa", 2, &cfg, &umems).unwrap_or_else(|e| panic!("{}", e));
        assert_eq!(both.receive_problem(), None);
    });
}

/// While the interface is down, transmit refuses everything (as AF_PACKET does), and
/// nothing refused is sent later when the interface comes back up.
#[test]
fn transmit_on_a_down_interface_is_refused_and_not_sent_later() {
    let ns = Netns::new(1);
    let name = ns.name.clone();
    ns.enter(move || {
        let port = open(1);
        let peer = Peer::open();
        let frame = |i: u16| {
            udp_frame(
                XA_MAC,
                XB_MAC,
                XA_IP,
                [198, 18, 2, 2],
                6000 + i,
                9,
                &[i as u8; 40],
            )
        };
        run(&["ip", "-n", &name, "link", "set", "xa", "down"]);
        // The first burst finds the interface down when the kernel is woken; the
        // second one before anything is queued.
        for first in [0u16, 20] {
            let mut b: PacketBatch = (first..first + 20)
                .map(|i| Packet::from_slice(&frame(i)))
                .collect();
            assert_eq!(port.tx_burst(0, &mut b), 0);
            assert!(b.is_empty());
        }
        assert_eq!(port.stats(0).tx_packets, 0);
        assert_eq!(port.xdp_stats(0).tx_link_down, 40);
        assert_eq!(port.tx_dropped(0), 40);
        assert_no_frame_leaked(&port);

        run(&["ip", "-n", &name, "link", "set", "xa", "up"]);
        let mut b: PacketBatch = (100..105).map(|i| Packet::from_slice(&frame(i))).collect();
        assert_eq!(port.tx_burst(0, &mut b), 5);
        let want: Vec<Vec<u8>> = (100..105).map(frame).collect();
        // Only the frames sent while the interface was up reach the peer.
        let got = peer.receive(45, |f| f[6..12] == XA_MAC);
        assert!(
            got == want,
            "frames at the peer: {} (want the last 5 only)",
            got.len()
        );
        assert_eq!(port.stats(0).tx_packets, 5);
        assert_eq!(port.tx_dropped(0), 40);
        assert_no_frame_leaked(&port);
    });
}

/// Frames longer than the interface's MTU allows are refused: MTU + 14 bytes, 4 more
/// with an 802.1Q tag (the MTU is 1400 here, the peer's 1500).
#[test]
fn frames_longer_than_the_mtu_allows_are_refused() {
    let ns = Netns::new(1);
    let name = ns.name.clone();
    run(&["ip", "-n", &name, "link", "set", "xa", "mtu", "1400"]);
    ns.enter(|| {
        let port = open(1);
        let peer = Peer::open();
        // Marker byte at the end; `tagged` puts an 802.1Q tag (VLAN 5) after the MACs.
        let frame = |len: usize, tagged: bool, marker: u8| {
            let mut f = XB_MAC.to_vec();
            f.extend_from_slice(&XA_MAC);
            if tagged {
                f.extend_from_slice(&[0x81, 0x00, 0x00, 0x05]);
            }
            f.extend_from_slice(&[0x88, 0xb5]);
            f.resize(len - 1, 0x77);
            f.push(marker);
            f
        };
        let mut b = PacketBatch::new();
        b.push(Packet::from_slice(&frame(1414, false, 1)));
        b.push(Packet::from_slice(&frame(1415, false, 2)));
        b.push(Packet::from_slice(&frame(1418, true, 3)));
        b.push(Packet::from_slice(&frame(1419, true, 4)));
        assert_eq!(port.tx_burst(0, &mut b), 2);
        assert_eq!(port.xdp_stats(0).tx_too_long, 2);
        assert_eq!(port.tx_dropped(0), 2);
        let markers: Vec<u8> = peer
            .receive(4, |f| f[6..12] == XA_MAC)
            .iter()
            .map(|f| *f.last().unwrap())
            .collect();
        assert_eq!(markers, vec![1, 3]);
        assert_no_frame_leaked(&port);
    });
}

/// `frame` with VLAN tags (TPID, TCI), outer first, put after its MAC addresses.
fn with_tags(frame: &[u8], tags: &[(u16, u16)]) -> Vec<u8> {
    let mut f = frame[..12].to_vec();
    for (tpid, tci) in tags {
        f.extend_from_slice(&tpid.to_be_bytes());
        f.extend_from_slice(&tci.to_be_bytes());
    }
    f.extend_from_slice(&frame[12..]);
    f
}

/// What queue 0 of `port` received before `marker`, a frame the peer sent after the
/// others: the queue delivers in arrival order, so once the marker is there, every
/// frame sent before it that the program redirected is too.
fn received_before(port: &XdpPort, marker: &[u8]) -> Vec<Vec<u8>> {
    let deadline = Instant::now() + WAIT;
    let mut got = Vec::new();
    let mut b = PacketBatch::new();
    while Instant::now() < deadline {
        port.rx_burst(0, &mut b, 32);
        for p in b.drain() {
            if p.data() == marker {
                return got;
            }
            got.push(p.data().to_vec());
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    panic!("the marker frame did not arrive; before it: {} frames", got.len());
}

/// A UDP frame from the peer to 198.18.1.9 (not the port's address) carrying `text`.
fn text_frame(text: &str) -> Vec<u8> {
    udp_frame(XB_MAC, XA_MAC, XB_IP, [198, 18, 1, 9], 4321, 9, text.as_bytes())
}

/// Opens the port on `xa` with the program attached as `attach` asks, and checks it is.
fn open_attached(attach: io::AttachRequest) -> XdpPort {
    let cfg = XdpConfig {
        attach,
        ..XdpConfig::default()
    };
    let port = XdpPort::open("xa", 1, &cfg).unwrap_or_else(|e| panic!("{:?}: {}", attach, e));
    let want = match attach {
        io::AttachRequest::Generic => io::XdpAttach::Generic,
        _ => io::XdpAttach::Native,
    };
    assert_eq!(port.attach_mode(), want, "{}", port);
    port
}

/// Frames whose VLAN tags are in their bytes, as the peer's AF_PACKET socket sends
/// them (the kernel sends them as they are, and the peer's veth hands them over so):
/// the program sees the tags and the socket gets each frame byte for byte, in both
/// attach modes. Generic XDP runs before the kernel's own `skb_vlan_untag`, so a tag in
/// the bytes is still there when the program sees the frame.
///
/// The program looks at the EtherType right after the MAC addresses only: a tagged
/// frame goes to the sockets, ARP and IPv4 for the interface's own address too, even
/// priority-tagged ones (VLAN 0), which the kernel would take as untagged.
fn tagged_frames_arrive_byte_for_byte(attach: io::AttachRequest) {
    let ns = Netns::new(1);
    ns.enter(move || {
        let port = open_attached(attach);
        let peer = Peer::open();
        let to_own = udp_frame(XB_MAC, XA_MAC, XB_IP, XA_IP, 5555, 7777, b"tagged, to 198.18.0.1");
        // The largest 802.1Q frame the MTU (1500) lets through: 1500 + 14 + 4 bytes.
        let mut full: Vec<u8> = text_frame("802.1Q, full size");
        full.resize(1514, 0xa5);
        let full = with_tags(&full, &[(0x8100, 0x0fff)]);
        assert_eq!(full.len(), 1518);
        let sent = vec![
            // 802.1Q: priority 5, VLAN 5.
            with_tags(&text_frame("802.1Q VLAN 5"), &[(0x8100, 0xa005)]),
            // QinQ: 802.1ad outer (priority 3, VLAN 100), 802.1Q inner (VLAN 7).
            with_tags(
                &text_frame("802.1ad VLAN 100, 802.1Q VLAN 7"),
                &[(0x88a8, 0x6064), (0x8100, 0x0007)],
            ),
            // Priority-tagged (VLAN 0, priority 1), then a TCI of 0.
            with_tags(&text_frame("priority-tagged"), &[(0x8100, 0x2000)]),
            with_tags(&text_frame("TCI 0"), &[(0x8100, 0x0000)]),
            full,
            // ARP requests for the port's own address, tagged and priority-tagged.
            with_tags(&arp_frame(1, XA_IP), &[(0x8100, 0x0005)]),
            with_tags(&arp_frame(1, XA_IP), &[(0x8100, 0x2000)]),
            // IPv4 to the port's own address, tagged and priority-tagged.
            with_tags(&to_own, &[(0x8100, 0x0005)]),
            with_tags(&to_own, &[(0x8100, 0x2000)]),
        ];
        for f in &sent {
            peer.send(f);
        }
        let marker = stream_frame(2);
        peer.send(&marker);
        let got = received_before(&port, &marker);
        assert_eq!(got.len(), sent.len(), "{}", port);
        for (i, (g, s)) in got.iter().zip(&sent).enumerate() {
            assert!(
                g == s,
                "{}: frame {} differs:\n got  {:02x?}\n sent {:02x?}",
                port,
                i,
                g,
                s
            );
        }
        let bytes: usize = sent.iter().chain([&marker]).map(|f| f.len()).sum();
        let s = port.stats(0);
        assert_eq!((s.rx_packets, s.rx_bytes), (sent.len() as u64 + 1, bytes as u64));
        assert_no_frame_leaked(&port);
    });
}

#[test]
fn tagged_frames_arrive_byte_for_byte_in_native_mode() {
    tagged_frames_arrive_byte_for_byte(io::AttachRequest::Native);
}

#[test]
fn tagged_frames_arrive_byte_for_byte_in_generic_mode() {
    tagged_frames_arrive_byte_for_byte(io::AttachRequest::Generic);
}

/// A tc program at `ifname`'s egress (tcx, kernel 6.6 on) that moves a VLAN tag into
/// the metadata of every frame sent with a mark, as a VLAN device does
/// (`bpf_skb_vlan_push`): TPID in the mark's upper 16 bits, TCI in the lower. The veth
/// then hands the tag to its peer beside the frame (its default "tx-vlan-offload").
/// Detached when dropped (the link's descriptor closes).
struct VlanPush {
    link: i32,
    prog: i32,
}

impl VlanPush {
    fn attach(ifname: &str) -> VlanPush {
        let insns: [[u8; 8]; 11] = [
            [0xbf, 0x16, 0, 0, 0, 0, 0, 0],       // r6 = r1 (skb)
            [0x61, 0x12, 8, 0, 0, 0, 0, 0],       // r2 = skb->mark
            [0x15, 0x02, 6, 0, 0, 0, 0, 0],       // if r2 == 0 goto pass
            [0xbf, 0x23, 0, 0, 0, 0, 0, 0],       // r3 = r2
            [0x57, 0x03, 0, 0, 0xff, 0xff, 0, 0], // r3 &= 0xffff (TCI)
            [0x77, 0x02, 0, 0, 16, 0, 0, 0],      // r2 >>= 16 (TPID)
            [0xdc, 0x02, 0, 0, 16, 0, 0, 0],      // r2 = htons(r2)
            [0xbf, 0x61, 0, 0, 0, 0, 0, 0],       // r1 = r6
            [0x85, 0x00, 0, 0, 18, 0, 0, 0],      // call bpf_skb_vlan_push
            [0xb7, 0x00, 0, 0, 0, 0, 0, 0],       // pass: r0 = TCX_PASS
            [0x95, 0x00, 0, 0, 0, 0, 0, 0],       // exit
        ];
        let prog = load_program(3, "brt_test_vlan", &insns); // BPF_PROG_TYPE_SCHED_CLS
        #[repr(C)]
        struct LinkCreate {
            prog_fd: u32,
            target_ifindex: u32,
            attach_type: u32,
            flags: u32,
        }
        let name = CString::new(ifname).unwrap();
        // SAFETY: NUL-terminated name.
        let ifindex = unsafe { libc::if_nametoindex(name.as_ptr()) };
        let mut a = LinkCreate {
            prog_fd: prog as u32,
            target_ifindex: ifindex,
            attach_type: 47, // BPF_TCX_EGRESS
            flags: 0,
        };
        // SAFETY: BPF_LINK_CREATE (28) with an attribute block of the size given.
        let link = unsafe {
            libc::syscall(
                libc::SYS_bpf,
                28,
                &mut a as *mut LinkCreate,
                std::mem::size_of::<LinkCreate>(),
            )
        };
        assert!(
            link >= 0,
            "attach the tc program: {}",
            std::io::Error::last_os_error()
        );
        VlanPush {
            link: link as i32,
            prog,
        }
    }
}

impl Drop for VlanPush {
    fn drop(&mut self) {
        // SAFETY: closing descriptors this guard owns.
        unsafe {
            libc::close(self.link);
            libc::close(self.prog);
        }
    }
}

/// Marks what `fd` sends from now on (SO_MARK, which the tc program reads).
fn set_mark(fd: i32, mark: u32) {
    // SAFETY: SO_MARK with a u32 of the size given.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_MARK,
            &mark as *const u32 as *const libc::c_void,
            std::mem::size_of::<u32>() as u32,
        )
    };
    assert_eq!(r, 0, "SO_MARK: {}", std::io::Error::last_os_error());
}

/// Frames whose outer VLAN tag the sender's kernel kept beside the frame (as a VLAN
/// device does with tx-vlan-offload on, and as a NIC's VLAN stripping does on
/// receive): in native mode the program reads it with the driver's kfunc and puts it
/// back, so the router gets each frame as it would have been on the wire.
#[test]
fn tags_kept_as_metadata_are_put_back_in_native_mode() {
    if io::xdp_vlan_tags_restorable().is_none() {
        eprintln!("skipped: this kernel has no bpf_xdp_metadata_rx_vlan_tag (6.8 on)");
        return;
    }
    let ns = Netns::new(1);
    ns.enter(move || {
        let port = open_attached(io::AttachRequest::Native);
        assert!(port.restores_vlan_tags(), "{}: {:?}", port, port.warning());
        let peer = Peer::open();
        let _push = VlanPush::attach("xb");
        // The mark (TPID and TCI of the tag kept as metadata), tags in the bytes, text.
        type Case = (u32, &'static [(u16, u16)], &'static str);
        let cases: [Case; 4] = [
            (0x8100_a005, &[], "802.1Q VLAN 5 as metadata"),
            // The 802.1ad outer tag as metadata, the 802.1Q inner one in the bytes.
            (
                0x88a8_6064,
                &[(0x8100, 0x0007)],
                "802.1ad as metadata, 802.1Q inside",
            ),
            (0x8100_2000, &[], "priority-tagged as metadata"),
            (0x8100_0000, &[], "TCI 0 as metadata"),
        ];
        let mut want = Vec::new();
        for (mark, inner, text) in cases {
            let frame = with_tags(&text_frame(text), inner);
            set_mark(peer.fd, mark);
            peer.send(&frame);
            let mut tagged = frame[..12].to_vec();
            tagged.extend_from_slice(&((mark >> 16) as u16).to_be_bytes());
            tagged.extend_from_slice(&(mark as u16).to_be_bytes());
            tagged.extend_from_slice(&frame[12..]);
            want.push(tagged);
        }
        // ARP for the port's own address and IPv4 to it, tagged as metadata, are
        // tagged frames too: to the socket, tagged, as with the tag in their bytes.
        let to_own = udp_frame(XB_MAC, XA_MAC, XB_IP, XA_IP, 5555, 7777, b"to 198.18.0.1, VLAN 5");
        for frame in [arp_frame(1, XA_IP), to_own] {
            set_mark(peer.fd, 0x8100_0005);
            peer.send(&frame);
            want.push(with_tags(&frame, &[(0x8100, 0x0005)]));
        }
        set_mark(peer.fd, 0);
        let marker = stream_frame(3);
        peer.send(&marker);
        let got = received_before(&port, &marker);
        assert_eq!(got.len(), want.len(), "{}", port);
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!(g == w, "frame {i}:\n got  {g:02x?}\n want {w:02x?}");
        }
        assert_no_frame_leaked(&port);
    });
}

/// A frame whose queue no socket reads goes to the kernel as it came, its stripped
/// tag beside it (the kernel takes it from there), not written into its bytes.
#[test]
fn frames_for_the_kernel_keep_their_stripped_tag_beside_them() {
    if io::xdp_vlan_tags_restorable().is_none() {
        eprintln!("skipped: this kernel has no bpf_xdp_metadata_rx_vlan_tag (6.8 on)");
        return;
    }
    let ns = Netns::new(2);
    ns.enter(|| {
        let cfg = XdpConfig {
            attach: io::AttachRequest::Native,
            ..XdpConfig::default()
        };
        let umems = UmemSet::new(UmemSet::DEFAULT_FRAMES, cfg.frame_size);
        // One socket, on queue 0: what arrives on queue 1 goes to the kernel.
        let port = XdpPort::open_shared("xa", 1, &cfg, &umems).unwrap_or_else(|e| panic!("{}", e));
        assert!(port.restores_vlan_tags(), "{}: {:?}", port, port.warning());
        let tap = Peer::on("xa");
        let peer = Peer::open();
        let _push = VlanPush::attach("xb");
        set_mark(peer.fd, 0x8100_0005);
        let frames: Vec<Vec<u8>> = (0..32u16)
            .map(|i| {
                udp_frame(
                    XB_MAC,
                    XA_MAC,
                    XB_IP,
                    [198, 18, 1, 9],
                    4000 + i,
                    9,
                    b"router or kernel",
                )
            })
            .collect();
        for f in &frames {
            peer.send(f);
        }
        // The kernel's tap: every frame from the peer as sent (a frame with the tag
        // written in would be 4 bytes longer, 0x8100 at byte 12).
        let kernel = tap.receive(frames.len(), |f| f.len() >= 12 && f[6..12] == XB_MAC);
        assert!(!kernel.is_empty(), "no flow took queue 1");
        for f in &kernel {
            assert!(frames.contains(f), "{:02x?}", f);
        }
        // The socket's: tagged.
        let mut b = PacketBatch::new();
        let deadline = Instant::now() + WAIT;
        let mut routed = 0;
        while routed + kernel.len() < frames.len() && Instant::now() < deadline {
            port.rx_burst(0, &mut b, 32);
            for p in b.drain() {
                assert_eq!(p.data()[12..16], [0x81, 0x00, 0x00, 0x05], "{:02x?}", p.data());
                routed += 1;
            }
        }
        assert_eq!(routed + kernel.len(), frames.len());
        // (Both paths were taken: the tags were pushed, and put back on one of them.)
        assert!(routed > 0, "no flow took queue 0");
    });
}

/// An interface without native XDP (loopback) takes the plain program in generic mode;
/// the tag-restoring one, which its driver refuses, is no loss there and no warning.
#[test]
fn generic_mode_by_fallback_warns_of_nothing() {
    let ns = Netns::new(1);
    ns.enter(|| {
        run(&["ip", "link", "set", "lo", "up"]);
        let port = XdpPort::open("lo", 1, &XdpConfig::default()).unwrap_or_else(|e| panic!("{}", e));
        assert_eq!(port.attach_mode(), io::XdpAttach::Generic, "{}", port);
        assert!(!port.restores_vlan_tags());
        assert_eq!(port.warning(), None);
    });
}
