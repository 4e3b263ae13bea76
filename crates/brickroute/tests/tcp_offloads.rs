//! TCP through Click's IP routers (conf/iprouter.click, conf/iprouter6.click) with their
//! interfaces opened with `METHOD PACKET`, between hosts in network namespaces whose
//! veths keep Linux's default offloads (root needed). The sending host's TCP hands its
//! veth super-frames of up to 64 KiB with partial checksums (segmentation and checksum
//! offload), which the router's packet sockets receive whole; the router must cut them
//! back into the segments TCP meant. Without that, the IPv4 router fragments them
//! (or answers "fragmentation needed" with the link's MTU, which TCP already uses)
//! and the IPv6 router's transmit refuses them as longer than the MTU. A UDP sender's
//! segmentation offload (`UDP_SEGMENT`) likewise hands over one frame for several
//! datagrams.
//!
//! h0: e0 -- r0 [router] r1 -- e1 :h1

mod common;
#[path = "common/netns.rs"]
mod netns;
#[path = "common/router_process.rs"]
mod router_process;
#[path = "common/two_hosts.rs"]
mod two_hosts;

use netns::Netns;
use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::time::Duration;
use two_hosts::TwoHosts;

/// Bytes sent each way: well over a hundred segments at either MSS.
const BYTES: usize = 4_000_000;

/// A copy of the shipped configuration `name` whose devices are opened with `METHOD
/// PACKET` (it opens them with XDP by default), in `dir`.
fn with_packet_devices(name: &str, dir: &tempfile::TempDir) -> PathBuf {
    let text = std::fs::read_to_string(common::root().join("conf").join(name)).unwrap();
    let mut changed = text.clone();
    for dev in ["$DEV0", "$DEV1"] {
        for class in ["FromDevice", "ToDevice"] {
            let from = format!("{class}({dev})");
            assert!(changed.contains(&from), "{name} has no {from}");
            changed = changed.replace(&from, &format!("{class}({dev}, METHOD PACKET)"));
        }
    }
    let path = dir.path().join(name);
    std::fs::write(&path, changed).unwrap();
    path
}

/// `BYTES` from h0 to h1 and back over one connection to `to` port 9000, compared byte
/// for byte at both ends.
fn tcp_echo(t: &TwoHosts, to: IpAddr) {
    let at = SocketAddr::new(to, 9000);
    let listener = t.h1.run(|| TcpListener::bind(at).expect("listen"));
    let mut conn = t
        .h0
        .run(|| TcpStream::connect_timeout(&at, Duration::from_secs(5)).expect("connect through the router"));
    let (mut accepted, _) = listener.accept().unwrap();
    let payload: Vec<u8> = (0..BYTES).map(|i| (i * 7 % 251) as u8).collect();
    let echo = std::thread::spawn(move || {
        accepted.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let mut got = vec![0u8; BYTES];
        accepted
            .read_exact(&mut got)
            .expect("the data crosses the router");
        accepted.write_all(&got).unwrap();
        got
    });
    conn.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let writer = {
        let mut conn = conn.try_clone().unwrap();
        let payload = payload.clone();
        std::thread::spawn(move || conn.write_all(&payload).unwrap())
    };
    let mut back = vec![0u8; BYTES];
    conn.read_exact(&mut back).expect("the echo crosses the router");
    writer.join().unwrap();
    assert!(echo.join().unwrap() == payload, "h1 got other bytes");
    assert!(back == payload, "h0 got other bytes back");
}

/// Frames the router received on `dev`, from its summary line ("r0 (PACKET, 1 queue:
/// 2766 in, 2754 out)"), and the line's text after them (losses, if any).
fn received(summary: &str, dev: &str) -> (u64, String) {
    let at = summary
        .find(&format!("{dev} (PACKET, 1 queue: "))
        .unwrap_or_else(|| panic!("no PACKET device {dev} in: {summary}"));
    let rest = &summary[at..];
    let rest = &rest[rest.find(": ").unwrap() + 2..];
    let n = rest.split(' ').next().unwrap().parse().unwrap();
    (n, rest[..rest.find(')').unwrap()].to_string())
}

#[test]
fn ipv4_tcp_from_offloading_hosts_crosses_in_segments_unfragmented() {
    let dir = tempfile::tempdir().unwrap();
    let conf = with_packet_devices("iprouter.click", &dir);
    let mut args: Vec<String> = two_hosts::ipv4_router_defines();
    for h in ["fr0.fragments", "fr1.fragments", "fr0.drops", "fr1.drops"] {
        args.extend(["-h".to_string(), h.to_string()]);
    }
    let mut t = TwoHosts::up(
        conf.to_str().unwrap(),
        &args.iter().map(String::as_str).collect::<Vec<_>>(),
        two_hosts::ipv4_host,
        |h0| two_hosts::ping(h0, "-4", &["-c", "1", "-W", "1", "10.0.2.2"]).0,
    );
    tcp_echo(&t, "10.0.2.2".parse().unwrap());
    let (out, err) = t.stop();
    // Nothing fragmented, nothing too big: every packet fit the MTU as TCP sent it.
    assert_eq!(
        out, "fr0.fragments:\n0\n\nfr1.fragments:\n0\n\nfr0.drops:\n0\n\nfr1.drops:\n0\n\n",
        "{err}"
    );
    // Each way, at least a frame for every 1,448 bytes (the MSS: 1,500 less 20 of
    // IPv4, 20 of TCP and 12 of timestamps), where the hosts' veths hand over a few
    // dozen super-frames; and none lost.
    for dev in ["r0", "r1"] {
        let (n, line) = received(&err, dev);
        assert!(n as usize >= BYTES / 1448, "{dev}: {n} frames in: {err}");
        assert!(!line.contains("lost") && !line.contains("refused"), "{err}");
    }
}

/// An IPv4 host whose traffic to the other host also goes through a VXLAN tunnel
/// (id 42, 192.168.42.1/24 at h0 and .2 at h1) between the hosts' addresses, so the
/// frames its veth hands over are UDP datagrams carrying Ethernet frames: merged TCP
/// segments inside a tunnel, their offloads (segmentation, checksum) about the inner
/// TCP header.
fn vxlan_host(ns: &Netns, dev: &str) {
    two_hosts::ipv4_host(ns, dev);
    let (me, peer, inner) = if dev == "e0" {
        ("10.0.1.2", "10.0.2.2", "192.168.42.1/24")
    } else {
        ("10.0.2.2", "10.0.1.2", "192.168.42.2/24")
    };
    ns.ip(&[
        "link", "add", "vx0", "type", "vxlan", "id", "42", "local", me, "remote", peer, "dstport", "4789",
        "dev", dev,
    ]);
    ns.ip(&["addr", "add", inner, "dev", "vx0"]);
    ns.ip(&["link", "set", "vx0", "up"]);
}

#[test]
fn tcp_inside_a_tunnel_crosses_whole_with_its_inner_checksum_completed() {
    let dir = tempfile::tempdir().unwrap();
    let conf = with_packet_devices("iprouter.click", &dir);
    let mut args: Vec<String> = two_hosts::ipv4_router_defines();
    args.extend(["-h".to_string(), "fr0.fragments".to_string()]);
    let mut t = TwoHosts::up(
        conf.to_str().unwrap(),
        &args.iter().map(String::as_str).collect::<Vec<_>>(),
        vxlan_host,
        |h0| two_hosts::ping(h0, "-4", &["-c", "1", "-W", "1", "192.168.42.2"]).0,
    );
    tcp_echo(&t, "192.168.42.2".parse().unwrap());
    let (out, err) = t.stop();
    // The tunnel's merged frames are not cut (their offload is about the packet
    // inside); the router fragments them, and h1 puts them together again.
    // (One handler asked for: its value alone.)
    let fragments: u64 = out.trim().parse().unwrap();
    assert!(fragments > 0, "{out}{err}");
}

#[test]
fn a_udp_segmentation_offload_datagram_crosses_as_the_datagrams_its_sender_meant() {
    let dir = tempfile::tempdir().unwrap();
    let conf = with_packet_devices("iprouter.click", &dir);
    let args = two_hosts::ipv4_router_defines();
    let mut t = TwoHosts::up(
        conf.to_str().unwrap(),
        &args.iter().map(String::as_str).collect::<Vec<_>>(),
        two_hosts::ipv4_host,
        |h0| two_hosts::ping(h0, "-4", &["-c", "1", "-W", "1", "10.0.2.2"]).0,
    );
    let to: SocketAddr = "10.0.2.2:9001".parse().unwrap();
    let rx = t.h1.run(|| UdpSocket::bind(to).unwrap());
    rx.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    let tx = t.h0.run(|| UdpSocket::bind("10.0.1.2:0").unwrap());
    // UDP_SEGMENT (Linux's udp(7)): one send of 3,500 bytes is 1,000-byte datagrams,
    // which the kernel leaves to the veth to cut.
    let size: libc::c_int = 1000;
    // SAFETY: setsockopt(2) on a live socket with a c_int option value of its size.
    let rc = unsafe {
        libc::setsockopt(
            tx.as_raw_fd(),
            libc::SOL_UDP,
            libc::UDP_SEGMENT,
            (&size as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    assert_eq!(rc, 0, "UDP_SEGMENT: {}", std::io::Error::last_os_error());
    let data: Vec<u8> = (0..3500u32).map(|i| (i % 251) as u8).collect();
    tx.send_to(&data, to).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while let Ok(n) = rx.recv(&mut buf) {
        got.push(buf[..n].to_vec());
        if got.len() == 4 {
            break;
        }
    }
    let want: Vec<Vec<u8>> = data.chunks(1000).map(<[u8]>::to_vec).collect();
    assert_eq!(got, want);
    let (_, err) = t.stop();
    let (n, line) = received(&err, "r0");
    assert!(n >= 4 && !line.contains("lost"), "{err}");
}

#[test]
fn ipv6_tcp_from_offloading_hosts_crosses_in_segments() {
    let dir = tempfile::tempdir().unwrap();
    let conf = with_packet_devices("iprouter6.click", &dir);
    let args = two_hosts::ipv6_router_defines();
    let mut t = TwoHosts::up(
        conf.to_str().unwrap(),
        &args.iter().map(String::as_str).collect::<Vec<_>>(),
        two_hosts::ipv6_host,
        |h0| two_hosts::ping(h0, "-6", &["-c", "1", "-W", "1", "2001:db8:2::2"]).0,
    );
    tcp_echo(&t, "2001:db8:2::2".parse().unwrap());
    let (_, err) = t.stop();
    // At least a frame for every 1,428 bytes each way (1,500 less 40 of IPv6, 20 of
    // TCP and 12 of timestamps), none refused on transmit as longer than the MTU.
    for dev in ["r0", "r1"] {
        let (n, line) = received(&err, dev);
        assert!(n as usize >= BYTES / 1428, "{dev}: {n} frames in: {err}");
        assert!(!line.contains("lost") && !line.contains("refused"), "{err}");
    }
}
