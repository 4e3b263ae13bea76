//! The shipped `conf/nat.click` (a NAT gateway: Click's IP router with IPRewriter,
//! ICMPPingRewriter and ICMPRewriter on its outside interface) between an inside and an
//! outside host in network namespaces (root needed). The hosts' kernels are the judges:
//! the outside host's sockets see whom a connection comes from, the inside host's see
//! the replies and the ICMP errors come back, and iputils' `ping` counts echoes.
//!
//! inside  h0: e0 10.0.1.2/24 -- r0 [NAT: 10.0.1.1 | 10.0.2.1] r1 -- e1 10.0.2.2/24 :h1  outside

mod common;
#[path = "common/netns.rs"]
mod netns;
#[path = "common/router_process.rs"]
mod router_process;
#[path = "common/two_hosts.rs"]
mod two_hosts;

use netns::Netns;
use std::io::{ErrorKind, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpListener, TcpStream, UdpSocket};
use std::time::Duration;
use two_hosts::TwoHosts;

const INSIDE: Ipv4Addr = Ipv4Addr::new(10, 0, 1, 2);
const OUTSIDE: Ipv4Addr = Ipv4Addr::new(10, 0, 2, 2);
/// The router's outside address: every translated flow's source.
const PUBLIC: Ipv4Addr = Ipv4Addr::new(10, 0, 2, 1);

fn ping(ns: &Netns, args: &[&str]) -> (bool, String) {
    two_hosts::ping(ns, "-4", args)
}

/// A host of `two_hosts`, whose kernel computes its TCP and UDP checksums itself:
/// with transmit checksum offload on (a veth's default), the kernel leaves them for
/// the receiving side's kernel to complete from metadata the frame loses on its way
/// through a router in user space (docs/TESTBED.md).
fn host(ns: &Netns, dev: &str) {
    two_hosts::ipv4_host(ns, dev);
    let o = std::process::Command::new("ip")
        .args(["netns", "exec", &ns.name, "ethtool", "-K", dev, "tx", "off"])
        .output()
        .expect("run ethtool (installed by scripts/install-deps.sh)");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// The hosts and the NAT, ready once it answers the inside host's ping: two workers,
/// so the interfaces open with AF_XDP (one a receive queue), and the hosts' checksum
/// offload off (see [`host`]).
fn testbed() -> TwoHosts {
    testbed_with("2", host)
}

/// The testbed with `threads` workers and the hosts set up by `host`.
fn testbed_with(threads: &str, host: fn(&Netns, &str)) -> TwoHosts {
    TwoHosts::up(
        "conf/nat.click",
        &two_hosts::ipv4_router_defines()
            .iter()
            .map(String::as_str)
            .chain([
                "--threads",
                threads,
                "-h",
                "rw.udp_table",
                "-h",
                "blocked.count",
                "-h",
                "untranslated.count",
            ])
            .collect::<Vec<_>>(),
        host,
        |h0| ping(h0, &["-c", "1", "-W", "1", "10.0.1.1"]).0,
    )
}

fn udp(ns: &Netns, addr: Ipv4Addr, port: u16) -> UdpSocket {
    let s = ns.run(|| UdpSocket::bind(SocketAddrV4::new(addr, port)).expect("bind UDP"));
    s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    s
}

/// A raw ICMP socket in a namespace: the ICMP errors its host received.
struct RawIcmp(std::os::fd::OwnedFd);

impl RawIcmp {
    fn open(ns: &Netns) -> RawIcmp {
        use std::os::fd::FromRawFd;
        ns.run(|| {
            // SAFETY: plain socket(2); the result is checked and owned at once.
            let fd = unsafe {
                libc::socket(
                    libc::AF_INET,
                    libc::SOCK_RAW | libc::SOCK_NONBLOCK,
                    libc::IPPROTO_ICMP,
                )
            };
            assert!(fd >= 0, "raw ICMP socket: {}", std::io::Error::last_os_error());
            // SAFETY: `fd` is a new descriptor owned by nobody else.
            RawIcmp(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) })
        })
    }

    /// The errors queued on the socket: (type, outer source, quoted destination).
    fn errors(&self) -> Vec<(u8, Ipv4Addr, Ipv4Addr)> {
        use std::os::fd::AsRawFd;
        let mut got = Vec::new();
        let mut buf = [0u8; 2048];
        loop {
            // SAFETY: `buf` is writable for its length; the socket is non-blocking.
            let n = unsafe { libc::recv(self.0.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
            if n < 0 {
                return got;
            }
            let b = &buf[..n as usize];
            let hl = usize::from(b[0] & 0x0f) * 4;
            // ICMP header (8 bytes), then the quoted IP header.
            if b.len() >= hl + 8 + 20 && matches!(b[hl], 3 | 11) {
                let q = hl + 8;
                got.push((
                    b[hl],
                    Ipv4Addr::new(b[12], b[13], b[14], b[15]),
                    Ipv4Addr::new(b[q + 16], b[q + 17], b[q + 18], b[q + 19]),
                ));
            }
        }
    }
}

fn v4(a: SocketAddr) -> SocketAddrV4 {
    match a {
        SocketAddr::V4(a) => a,
        SocketAddr::V6(a) => panic!("IPv6 peer {a}"),
    }
}

/// A TCP connection from the inside, accepted outside from the router's address,
/// carries 200 KB each way intact (sequence numbers, checksums and windows all pass
/// through the rewriting).
fn tcp_crosses(t: &TwoHosts) {
    let listener =
        t.h1.run(|| TcpListener::bind(SocketAddrV4::new(OUTSIDE, 8000)).unwrap());
    let mut conn = t.h0.run(|| {
        TcpStream::connect_timeout(&SocketAddrV4::new(OUTSIDE, 8000).into(), Duration::from_secs(5))
            .expect("connect through the NAT")
    });
    let (mut accepted, from) = listener.accept().unwrap();
    assert_eq!(*v4(from).ip(), PUBLIC);
    let payload: Vec<u8> = (0..200_000u32).map(|i| (i * 7 % 251) as u8).collect();
    let echo = std::thread::spawn(move || {
        accepted.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut got = vec![0u8; 200_000];
        accepted.read_exact(&mut got).unwrap();
        accepted.write_all(&got).unwrap();
        got
    });
    conn.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    conn.write_all(&payload).unwrap();
    let mut back = vec![0u8; payload.len()];
    conn.read_exact(&mut back).expect("the echo crosses the NAT");
    assert!(
        echo.join().unwrap() == payload,
        "the outside host got other bytes"
    );
    assert!(back == payload, "the inside host got other bytes back");
    drop(conn);
}

#[test]
fn inside_flows_leave_with_the_routers_address_and_their_replies_come_back() {
    let mut t = testbed();

    // UDP: the outside host sees the datagram come from the router's outside address
    // and a port of the pattern's range, answers it there, and the answer reaches the
    // inside socket from the outside host's address and port.
    let server = udp(&t.h1, OUTSIDE, 7000);
    let client = udp(&t.h0, INSIDE, 5555);
    let mut buf = [0u8; 64];
    let mut peers = Vec::new();
    for (i, msg) in [&b"first"[..], b"second"].into_iter().enumerate() {
        client.send_to(msg, SocketAddrV4::new(OUTSIDE, 7000)).unwrap();
        let (n, from) = server.recv_from(&mut buf).expect("the datagram crosses the NAT");
        assert_eq!(&buf[..n], msg);
        let from = v4(from);
        assert_eq!(*from.ip(), PUBLIC, "datagram {i} left untranslated");
        assert!(from.port() >= 1024, "{from}");
        peers.push(from);
        server.send_to(b"reply", from).unwrap();
        let (n, back) = client.recv_from(&mut buf).expect("the reply crosses the NAT");
        assert_eq!(&buf[..n], b"reply");
        assert_eq!(v4(back), SocketAddrV4::new(OUTSIDE, 7000));
    }
    // One flow, one mapping: both datagrams used the same port.
    assert_eq!(peers[0], peers[1]);
    // Another inside port is another flow, with another outside port.
    let client2 = udp(&t.h0, INSIDE, 5556);
    client2
        .send_to(b"third", SocketAddrV4::new(OUTSIDE, 7000))
        .unwrap();
    let (_, from) = server.recv_from(&mut buf).expect("the second flow crosses");
    let from = v4(from);
    assert_eq!(*from.ip(), PUBLIC);
    assert_ne!(from.port(), peers[0].port());

    tcp_crosses(&t);

    // Ping: echoes from the inside cross (ICMPPingRewriter), 3 of 3.
    let (ok, out) = ping(&t.h0, &["-c", "3", "-i", "0.2", "-W", "2", "10.0.2.2"]);
    assert!(ok && out.contains("3 received"), "{out}");

    // An ICMP error about a translated flow comes back to the inside host: a connected
    // UDP socket to a closed outside port learns of the outside kernel's port
    // unreachable (ICMPRewriter gives the error and the datagram it quotes the inside
    // addresses again).
    let refused = udp(&t.h0, INSIDE, 5557);
    refused.connect(SocketAddrV4::new(OUTSIDE, 7999)).unwrap();
    refused.send(b"anyone?").unwrap();
    let err = refused.recv(&mut buf).expect_err("nothing listens on 7999");
    assert_eq!(err.kind(), ErrorKind::ConnectionRefused, "{err}");

    // The other way: an inside host's own port unreachable, about a reply to a port it
    // closed, leaves with the router's address and the outside flow in its quote, so
    // the outside socket (connected to the router's address and port) learns of it.
    let outside = udp(&t.h1, OUTSIDE, 7100);
    let icmp = RawIcmp::open(&t.h1);
    let gone = udp(&t.h0, INSIDE, 5560);
    gone.send_to(b"knock", SocketAddrV4::new(OUTSIDE, 7100)).unwrap();
    let (_, from) = outside.recv_from(&mut buf).expect("the knock crosses the NAT");
    assert_eq!(*v4(from).ip(), PUBLIC);
    drop(gone);
    outside.connect(from).unwrap();
    outside.send(b"anyone?").unwrap();
    let err = outside.recv(&mut buf).expect_err("the inside port is closed");
    assert_eq!(err.kind(), ErrorKind::ConnectionRefused, "{err}");
    // What the outside host saw: a port unreachable from the router's address,
    // quoting its datagram to the router.
    let seen = icmp.errors();
    assert!(seen.contains(&(3, PUBLIC, PUBLIC)), "{seen:?}");
    assert!(
        seen.iter().all(|&(_, s, q)| s != INSIDE && q != INSIDE),
        "an inside address leaked: {seen:?}"
    );

    // The router's own error about a translated packet: a reply that arrives with TTL
    // 1 expires on its way inside, and the time exceeded the outside host gets quotes
    // the datagram as it sent it, to the router's address, not as translated.
    let outside = udp(&t.h1, OUTSIDE, 7101);
    outside.set_ttl(1).unwrap();
    let inside = udp(&t.h0, INSIDE, 5561);
    inside
        .send_to(b"knock", SocketAddrV4::new(OUTSIDE, 7101))
        .unwrap();
    let (_, from) = outside.recv_from(&mut buf).expect("the knock crosses the NAT");
    outside.send_to(b"short-lived", from).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(3);
    let seen = loop {
        let seen = icmp.errors();
        if !seen.is_empty() || std::time::Instant::now() > deadline {
            break seen;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(seen, [(11, Ipv4Addr::new(10, 0, 2, 1), PUBLIC)]);

    let (out, err) = t.stop();
    // The table lists the UDP flows, each with its reply entry; their source ports
    // were free, so they kept them.
    assert!(
        out.contains("(10.0.1.2, 5555, 10.0.2.2, 7000) => (10.0.2.1, 5555, 10.0.2.2, 7000) [*0 1] i0"),
        "{out}\n{err}"
    );
    assert!(
        out.contains("(10.0.2.2, 7000, 10.0.2.1, 5555) => (10.0.2.2, 7000, 10.0.1.2, 5555) [0 *1] i0"),
        "{out}\n{err}"
    );
    assert!(out.contains("untranslated.count:\n0\n"), "{out}\n{err}");
    drop(t);
}

#[test]
fn nothing_from_the_outside_reaches_the_inside_unasked() {
    let mut t = testbed();
    // The outside host routes the inside network through the router (its default
    // route): its pings to the inside host are blocked, its pings to the router's
    // outside address answered.
    let (ok, out) = ping(&t.h1, &["-c", "2", "-i", "0.2", "-W", "1", "10.0.1.2"]);
    assert!(!ok && out.contains("0 received"), "{out}");
    let (ok, out) = ping(&t.h1, &["-c", "1", "-W", "2", "10.0.2.1"]);
    assert!(ok, "{out}");

    // UDP to the router's address with no mapping behind it goes nowhere: the inside
    // socket bound to the port never hears of it.
    let inside = udp(&t.h0, INSIDE, 6000);
    inside.set_read_timeout(Some(Duration::from_millis(500))).unwrap();
    let outside = udp(&t.h1, OUTSIDE, 6001);
    for port in [6000, 1024, 1025] {
        outside
            .send_to(b"unasked", SocketAddrV4::new(PUBLIC, port))
            .unwrap();
    }
    let mut buf = [0u8; 16];
    assert!(inside.recv_from(&mut buf).is_err(), "an unasked datagram got in");

    let (out, err) = t.stop();
    assert!(out.contains("blocked.count:\n2\n"), "{out}\n{err}");
    drop(t);
}

#[test]
fn with_af_packet_udp_from_hosts_with_checksum_offload_crosses() {
    // One worker: the interfaces open with AF_PACKET, which flags the frames whose
    // UDP checksum the sending host left to its veth (offload on, the default); the
    // router completes them on receipt, so the other host's kernel takes the
    // translated datagrams. (Without the completion the outside host drops every
    // datagram as corrupt: its checksum is the sender's partial sum, rewritten.)
    let mut t = testbed_with("1", two_hosts::ipv4_host);
    let server = udp(&t.h1, OUTSIDE, 7000);
    let client = udp(&t.h0, INSIDE, 5555);
    let mut buf = [0u8; 16];
    client
        .send_to(b"hello", SocketAddrV4::new(OUTSIDE, 7000))
        .unwrap();
    let (n, from) = server.recv_from(&mut buf).expect("the datagram crosses the NAT");
    assert_eq!((&buf[..n], *v4(from).ip()), (&b"hello"[..], PUBLIC));
    server.send_to(b"reply", from).unwrap();
    let (n, _) = client.recv_from(&mut buf).expect("the reply crosses the NAT");
    assert_eq!(&buf[..n], b"reply");
    let (_, err) = t.stop();
    assert!(err.contains("r0 (PACKET") && err.contains("r1 (PACKET"), "{err}");
}
