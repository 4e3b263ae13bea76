//! A full mesh of brickroute servers in namespaces, each with an external host, for the
//! cluster tests (root needed). Include with `#[path]` beside `netns.rs`,
//! `router_process.rs` and `control_client.rs` (as `netns`, `router_process` and
//! `control_client`).
//!
//!   h_j: e_j -- x_j :s_j     s_i: m_i_k -- m_k_i :s_k (every pair)
//!   h_j owns 198.19.j.0/24 and 2001:db8:j::/48.

#![allow(dead_code)]

use crate::control_client::{connect_unix, Client};
use crate::netns::{veth, Netns};
use crate::router_process::RouterProcess;
use cluster::mesh::ServerConfig;
use std::io::{BufRead, BufReader, Read};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_brickroute");

pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

pub fn mac(m: [u8; 6]) -> String {
    m.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":")
}

pub fn server_mac(j: usize) -> [u8; 6] {
    [2, 0, 0, 0, j as u8, 1]
}

pub fn host_mac(j: usize) -> [u8; 6] {
    [2, 0, 0, 0, j as u8, 2]
}

/// The mesh: namespaces, routers and a control connection to each.
pub struct Mesh {
    pub hosts: Vec<Netns>,
    pub servers: Vec<Netns>,
    pub routers: Vec<RouterProcess>,
    pub clients: Vec<Client<UnixStream>>,
    configs: Vec<String>,
    sockets: Vec<PathBuf>,
    _dir: tempfile::TempDir,
}

impl Mesh {
    /// `n` servers, each running the configuration `cluster::mesh` writes with
    /// VLBSwitch's `balancing` and `heartbeat` keywords, one worker, METHOD PACKET,
    /// and a ControlSocket.
    pub fn new(n: usize, balancing: &str, heartbeat: &str) -> Mesh {
        let hosts: Vec<Netns> = (0..n).map(|j| Netns::new(&format!("h{j}-"))).collect();
        let servers: Vec<Netns> = (0..n).map(|j| Netns::new(&format!("s{j}-"))).collect();
        for j in 0..n {
            veth(
                &hosts[j],
                &format!("e{j}"),
                &mac(host_mac(j)),
                &servers[j],
                &format!("x{j}"),
                &mac(server_mac(j)),
            );
        }
        for i in 0..n {
            for k in i + 1..n {
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
        let routes: Vec<(String, usize)> = (0..n)
            .map(|j| (format!("198.19.{j}.0/24"), j))
            .chain((0..n).map(|j| (format!("2001:db8:{j}::/48"), j)))
            .collect();
        let sockets: Vec<PathBuf> = (0..n).map(|i| dir.path().join(format!("s{i}.sock"))).collect();
        let configs: Vec<String> = (0..n)
            .map(|i| {
                ServerConfig {
                    node: i,
                    external: format!("x{i}"),
                    external_mac: server_mac(i),
                    next_hop_mac: host_mac(i),
                    links: (0..n).map(|k| (k != i).then(|| format!("m{i}{k}"))).collect(),
                    routes: routes.clone(),
                    balancing: balancing.into(),
                    heartbeat: heartbeat.into(),
                    // One worker a server: AF_PACKET reads every queue of an interface.
                    device: "METHOD PACKET".into(),
                    extra: format!("ControlSocket(unix, {});\n", sockets[i].display()),
                }
                .click()
                .unwrap()
            })
            .collect();
        let mut mesh = Mesh {
            hosts,
            servers,
            routers: Vec::new(),
            clients: Vec::new(),
            configs,
            sockets,
            _dir: dir,
        };
        for i in 0..n {
            let r = mesh.start_router(i);
            mesh.routers.push(r);
        }
        for i in 0..n {
            let c = connect_unix(&mesh.sockets[i], &mut mesh.routers[i]);
            mesh.clients.push(c);
        }
        mesh
    }

    fn start_router(&self, i: usize) -> RouterProcess {
        let _ = std::fs::remove_file(&self.sockets[i]);
        let child = self.servers[i]
            .brickroute_run(&["--threads", "1", "-e", &self.configs[i]])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        RouterProcess(child)
    }

    /// Kills server `i`'s router at once (SIGKILL: no orderly stop).
    pub fn kill(&mut self, i: usize) {
        let _ = self.routers[i].0.kill();
        let _ = self.routers[i].0.wait();
    }

    /// Starts server `i`'s router again, with a new control connection.
    pub fn restart(&mut self, i: usize) {
        self.routers[i] = self.start_router(i);
        self.clients[i] = connect_unix(&self.sockets[i], &mut self.routers[i]);
    }

    /// Handler `h` of server `i`, trimmed.
    pub fn read(&mut self, i: usize, h: &str) -> String {
        self.clients[i].read(h).trim().to_string()
    }

    /// A count handler of server `i`.
    pub fn count(&mut self, i: usize, h: &str) -> u64 {
        self.read(i, h).parse().unwrap()
    }

    /// Waits until handler `h` of server `i` reads `want`, up to `limit`.
    pub fn wait_for(&mut self, i: usize, h: &str, want: &str, limit: Duration) {
        let deadline = Instant::now() + limit;
        loop {
            let got = self.read(i, h);
            if got == want {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "server {i}: {h} is {got:?}, not {want:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// A child process killed on drop, whose output can be collected with a deadline.
pub struct Guarded(pub Option<Child>);

impl Guarded {
    pub fn output(mut self, limit: Duration) -> (bool, String, String) {
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

/// A sink on host `h`'s interface, started and listening, ending 3 s after its last
/// frame (or once it has `expect` frames).
pub fn sink(h: &Netns, dev: &str, expect: u64) -> (Guarded, BufReader<std::process::ChildStderr>) {
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

/// `brickroute gen` from host 0 into server 0: `count` frames over `flows` flows to
/// `dst`, 20,000 a second; waits for it to finish.
pub fn generate(mesh: &Mesh, dst: &str, flows: u64, count: u64) {
    let gen = Command::new(BIN)
        .args(["gen", "--netns", &mesh.hosts[0].name, "-i", "e0", "-q"])
        .args([
            "--dst-mac",
            &mac(server_mac(0)),
            "--src",
            "198.18.0.1",
            "--dst",
            dst,
        ])
        .args(["--flows", &flows.to_string(), "--rate", "20000"])
        .args(["--count", &count.to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (ok, _, err) = Guarded(Some(gen)).output(Duration::from_secs(30));
    assert!(ok, "gen: {err}");
}

/// A sink's report, once it has ended.
pub fn report(sink: Guarded, what: &str) -> serde_json::Value {
    let (ok, out, err) = sink.output(Duration::from_secs(40));
    assert!(ok, "{what}: {err}");
    serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{what}: {e}: {out}"))
}
