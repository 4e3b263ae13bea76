//! Four brickroute servers in a full mesh acting as one router (root needed): traffic
//! from one external port to all four is looked up once at its input server, sent by
//! Direct VLB straight to its output server or through an intermediate, and every
//! packet reaches its host, each flow in order (flowlets), and a server marked down
//! relays nothing; IPv6 frames too.
//!
//!   h_j: e_j -- x_j :s_j     s_i: m_i_k -- m_k_i :s_k (every pair)
//!   h_j owns 198.19.j.0/24; the generator in h0 sends to 198.19.0.0/22.

mod common;
#[path = "common/control_client.rs"]
mod control_client;
#[path = "common/netns.rs"]
mod netns;
#[path = "common/router_process.rs"]
mod router_process;

use cluster::mesh::ServerConfig;
use control_client::{connect_unix, Client};
use netns::{veth, Netns};
use router_process::RouterProcess;
use std::io::{BufRead, BufReader, Read};
use std::os::unix::net::UnixStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_brickroute");
const SERVERS: usize = 4;
const FLOWS: u64 = 1020;
const PER_FLOW: u64 = 20;

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

fn mac(m: [u8; 6]) -> String {
    m.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":")
}

fn server_mac(j: usize) -> [u8; 6] {
    [2, 0, 0, 0, j as u8, 1]
}

fn host_mac(j: usize) -> [u8; 6] {
    [2, 0, 0, 0, j as u8, 2]
}

/// Packets the generator sends to host j's network: flow f goes to host f of
/// 198.19.0.0/22, that is 198.19.0.0 + 1 + f, so 198.19.0.0/24 gets flows 0-254,
/// the next two 256 flows each and 198.19.3.0/24 the last 253.
fn packets_to(j: usize) -> u64 {
    let flows = (0..FLOWS).filter(|f| ((1 + f) / 256) as usize == j).count() as u64;
    flows * PER_FLOW
}

/// A UDP/IPv6 frame from 2001:db8:0::2 port `sport` to 2001:db8:2::1 port 9 with hop
/// limit `hops`, from `src` to `dst` on Ethernet.
fn udp6(dst: [u8; 6], src: [u8; 6], hops: u8, sport: u16) -> Vec<u8> {
    let payload = b"brickroute mesh";
    let udp_len = (8 + payload.len()) as u16;
    let mut f = dst.to_vec();
    f.extend_from_slice(&src);
    f.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0]);
    f.extend_from_slice(&udp_len.to_be_bytes());
    f.extend_from_slice(&[17, hops]);
    f.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
    f.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
    f.extend_from_slice(&sport.to_be_bytes());
    f.extend_from_slice(&9u16.to_be_bytes());
    f.extend_from_slice(&udp_len.to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend_from_slice(payload);
    f
}

/// A child process killed on drop, whose output can be collected with a deadline.
struct Guarded(Option<Child>);

impl Guarded {
    fn output(mut self, limit: Duration) -> (bool, String, String) {
        let mut c = self.0.take().unwrap();
        let deadline = Instant::now() + limit;
        let status = loop {
            if let Some(s) = c.try_wait().unwrap() {
                break s;
            }
            if Instant::now() > deadline {
                let _ = c.kill();
                let _ = c.wait();
                panic!("child did not finish within {limit:?}");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut out = String::new();
        let mut err = String::new();
        c.stdout.take().unwrap().read_to_string(&mut out).unwrap();
        if let Some(mut e) = c.stderr.take() {
            e.read_to_string(&mut err).unwrap();
        }
        (status.success(), out, err)
    }
}

impl Drop for Guarded {
    fn drop(&mut self) {
        if let Some(c) = &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A sink on host `h`'s interface, started and listening.
fn sink(h: &Netns, dev: &str, expect: u64) -> (Guarded, BufReader<std::process::ChildStderr>) {
    let mut c = Command::new(BIN)
        .args([
            "sink",
            "--netns",
            &h.name,
            "-i",
            dev,
            "--duration",
            "30",
            "--idle",
            "3",
            "-q",
        ])
        .args(["--expect", &expect.to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(c.stderr.take().unwrap());
    let g = Guarded(Some(c));
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    assert!(line.contains("listening"), "sink said: {line}");
    (g, err)
}

#[test]
fn a_mesh_of_four_servers_delivers_every_packet_once_and_in_order() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let hosts: Vec<Netns> = (0..SERVERS).map(|j| Netns::new(&format!("h{j}-"))).collect();
    let servers: Vec<Netns> = (0..SERVERS).map(|j| Netns::new(&format!("s{j}-"))).collect();
    for j in 0..SERVERS {
        veth(
            &hosts[j],
            &format!("e{j}"),
            &mac(host_mac(j)),
            &servers[j],
            &format!("x{j}"),
            &mac(server_mac(j)),
        );
    }
    for i in 0..SERVERS {
        for k in i + 1..SERVERS {
            let (a, b) = (format!("m{i}{k}"), format!("m{k}{i}"));
            veth(
                &servers[i],
                &a,
                &format!("02:c0:00:00:{i:02x}:{k:02x}"),
                &servers[k],
                &b,
                &format!("02:c0:00:00:{k:02x}:{i:02x}"),
            );
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let routes: Vec<(String, usize)> = (0..SERVERS)
        .map(|j| (format!("198.19.{j}.0/24"), j))
        .chain((0..SERVERS).map(|j| (format!("2001:db8:{j}::/48"), j)))
        .collect();
    let mut routers = Vec::new();
    let mut sockets = Vec::new();
    for (i, server) in servers.iter().enumerate() {
        let socket = dir.path().join(format!("s{i}.sock"));
        let config = ServerConfig {
            node: i,
            external: format!("x{i}"),
            external_mac: server_mac(i),
            next_hop_mac: host_mac(i),
            links: (0..SERVERS)
                .map(|k| (k != i).then(|| format!("m{i}{k}")))
                .collect(),
            routes: routes.clone(),
            // A direct share of 1 Mbit/s for each output server: the generator's 5,000
            // packets a second to each (2.4 Mbit/s) need balancing. Flowlets of 100 ms
            // (the default) hold each flow, which sends every 51 ms, on one path.
            balancing: "RATE 4Mbps".into(),
            // One worker a server: AF_PACKET reads every queue of an interface.
            device: "METHOD PACKET".into(),
            extra: format!("ControlSocket(unix, {});\n", socket.display()),
        }
        .click()
        .unwrap();
        let child = server
            .brickroute_run(&["--threads", "1", "-e", &config])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        routers.push(RouterProcess(child));
        sockets.push(socket);
    }
    let mut clients: Vec<Client<UnixStream>> = sockets
        .iter()
        .zip(routers.iter_mut())
        .map(|(s, r)| connect_unix(s, r))
        .collect();

    // Server 3 is marked down at server 0: it relays nothing (traffic for its own
    // host still goes to it).
    let status = clients[0].status("WRITE vlb.down 3\n");
    assert!(status.starts_with("200"), "{status}");

    let sinks: Vec<_> = (0..SERVERS)
        .map(|j| sink(&hosts[j], &format!("e{j}"), packets_to(j)))
        .collect();
    let gen = Command::new(BIN)
        .args(["gen", "--netns", &hosts[0].name, "-i", "e0", "-q"])
        .args([
            "--dst-mac",
            &mac(server_mac(0)),
            "--src",
            "198.18.0.1",
            "--dst",
            "198.19.0.0/22",
        ])
        .args(["--flows", &FLOWS.to_string(), "--rate", "20000"])
        .args(["--count", &(FLOWS * PER_FLOW).to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (ok, _, err) = Guarded(Some(gen)).output(Duration::from_secs(30));
    assert!(ok, "gen: {err}");

    for (j, (s, _)) in sinks.into_iter().enumerate() {
        let (ok, out, err) = s.output(Duration::from_secs(40));
        assert!(ok, "sink {j}: {err}");
        let r: serde_json::Value = serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{e}: {out}"));
        assert_eq!(r["delivered"], packets_to(j), "host {j}: {r}");
        assert_eq!(r["duplicates"], 0, "host {j}: {r}");
        assert_eq!(
            r["reordered"], 0,
            "host {j}: flowlets keep each flow on one path: {r}"
        );
    }

    // IPv6, once the IPv4 run is over: frames of 16 flows from h0 to h2's network,
    // each looked up at s0 and delivered by s2 with its hop limit one less.
    let n = |c: &mut Client<UnixStream>, h: &str| -> u64 { c.read(h).trim().parse().unwrap() };
    let before = n(&mut clients[0], "vlb.direct") + n(&mut clients[0], "vlb.balanced");
    let out = hosts[0].run(|| netns::RawSocket::open("e0"));
    let inbox = hosts[2].run(|| netns::RawSocket::open("e2"));
    for flow in 0..16u16 {
        out.send(&udp6(server_mac(0), host_mac(0), 64, 5000 + flow));
    }
    let mut arrived = Vec::new();
    while let Some(f) = inbox.recv(Duration::from_secs(3)) {
        if f.get(12..14) == Some(&[0x86, 0xdd][..]) {
            arrived.push(f);
        }
        if arrived.len() == 16 {
            break;
        }
    }
    arrived.sort();
    let mut expected: Vec<Vec<u8>> = (0..16u16)
        .map(|flow| udp6(host_mac(2), server_mac(2), 63, 5000 + flow))
        .collect();
    expected.sort();
    assert_eq!(arrived, expected);
    let after = n(&mut clients[0], "vlb.direct") + n(&mut clients[0], "vlb.balanced");
    assert_eq!(after - before, 16);
    let local = n(&mut clients[0], "vlb.local");
    let direct = n(&mut clients[0], "vlb.direct");
    let balanced = n(&mut clients[0], "vlb.balanced");
    assert_eq!(local, packets_to(0));
    assert_eq!(direct + balanced, FLOWS * PER_FLOW - packets_to(0) + 16);
    assert!(direct > 0 && balanced > 0, "direct {direct}, balanced {balanced}");
    // Every balanced packet was relayed once, by a server other than the input server,
    // and every packet that crossed the mesh was delivered by its output server.
    let relayed: Vec<u64> = clients.iter_mut().map(|c| n(c, "relayed.count")).collect();
    assert_eq!((relayed[0], relayed[3]), (0, 0), "{relayed:?}");
    assert!(relayed[1] > 0 && relayed[2] > 0, "{relayed:?}");
    assert_eq!(relayed.iter().sum::<u64>(), balanced, "{relayed:?}");
    let delivered: u64 = clients.iter_mut().map(|c| n(c, "delivered.count")).sum();
    assert_eq!(delivered, direct + balanced);
    for (i, c) in clients.iter_mut().enumerate() {
        assert_eq!(n(c, "dropped.count"), 0, "server {i}");
    }
}
