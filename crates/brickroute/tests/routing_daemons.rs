//! Routing daemons drive the router unchanged: BIRD 2 and FRR (Debian's bird2 and frr,
//! which scripts/install-deps.sh installs) in the router's namespace take a BGP peer's
//! routes (the peer is BIRD) and write them to the kernel over netlink (FRR through
//! nexthop objects), and `KernelRoutes` follows: announcements, withdrawals, changed
//! next hops, the failover to a second session's routes and the daemon's shutdown, for
//! IPv4 and IPv6; the RIB dump each daemon writes (MRT TABLE_DUMP_V2) loads in
//! `brickroute fib lookup`. With multipath turned on in the daemon, a prefix both
//! sessions announce becomes one multipath route in the kernel and in the router.
//! Root needed: everything runs in namespaces.

mod common;
#[path = "common/control_client.rs"]
mod control_client;
#[path = "common/netns.rs"]
mod netns;
#[path = "common/router_process.rs"]
mod router_process;

use control_client::{connect_unix, route_lines, Client};
use netns::Netns;
use router_process::RouterProcess;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::Write;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A `bird` process in a namespace, in the foreground, with its own control socket;
/// killed on drop.
struct Bird {
    child: Child,
    ctl: PathBuf,
    conf: PathBuf,
}

impl Drop for Bird {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Bird {
    fn start(ns: &Netns, dir: &Path, name: &str, conf: &str) -> Bird {
        let ctl = dir.join(format!("{name}.ctl"));
        let conf_path = dir.join(format!("{name}.conf"));
        std::fs::write(&conf_path, conf).unwrap();
        let child = Command::new("ip")
            .args(["netns", "exec", &ns.name, "bird", "-f", "-c"])
            .arg(&conf_path)
            .arg("-s")
            .arg(&ctl)
            .arg("-P")
            .arg(dir.join(format!("{name}.pid")))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start bird (scripts/install-deps.sh installs Debian's bird2)");
        let mut bird = Bird {
            child,
            ctl,
            conf: conf_path,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while !bird.birdc(&["show", "status"]).contains("Daemon is up") {
            if let Some(s) = bird.child.try_wait().unwrap() {
                let mut err = String::new();
                let _ = std::io::Read::read_to_string(bird.child.stderr.as_mut().unwrap(), &mut err);
                panic!("bird {name} exited ({s}): {err}");
            }
            assert!(Instant::now() < deadline, "bird {name} never answered");
            std::thread::sleep(Duration::from_millis(50));
        }
        bird
    }

    fn birdc(&self, args: &[&str]) -> String {
        let o = Command::new("birdc")
            .arg("-s")
            .arg(&self.ctl)
            .args(args)
            .output()
            .expect("run birdc");
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    /// Loads a new configuration (`birdc configure`).
    fn configure(&self, conf: &str) {
        std::fs::write(&self.conf, conf).unwrap();
        let out = self.birdc(&["configure"]);
        assert!(out.contains("Reconfigur"), "birdc configure: {out}");
    }

    /// Waits (bounded) until every BGP session is established.
    fn wait_established(&self, sessions: &[&str]) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let out = self.birdc(&["show", "protocols"]);
            let up = sessions.iter().all(|s| {
                out.lines()
                    .any(|l| l.split_whitespace().next() == Some(s) && l.contains("Established"))
            });
            if up {
                return;
            }
            assert!(Instant::now() < deadline, "BGP sessions not established:\n{out}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// FRR's zebra and bgpd in a namespace, with their sockets and files in one directory
/// (which user frr owns, as the daemons drop to it); stopped on drop.
struct Frr {
    zebra: Child,
    bgpd: Option<Child>,
    dir: PathBuf,
    /// The namespace's name, which is also the daemons' path space (`-N`).
    ns: String,
}

/// SIGTERM, so that an FRR daemon removes its files (`/run/frr/NS/`, its log buffers
/// in `/var/tmp/frr/`); SIGKILL if it has not exited 5 s later.
fn terminate(c: &mut Child) {
    // SAFETY: kill(2) on our own child's pid, not reaped yet.
    unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
    let deadline = Instant::now() + Duration::from_secs(5);
    while c.try_wait().ok().flatten().is_none() {
        if Instant::now() > deadline {
            let _ = c.kill();
            let _ = c.wait();
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

impl Drop for Frr {
    fn drop(&mut self) {
        for c in self
            .bgpd
            .as_mut()
            .into_iter()
            .chain(std::iter::once(&mut self.zebra))
        {
            terminate(c);
        }
        // (The directory zebra made for the namespace's path space, in case it left it.)
        let _ = std::fs::remove_dir_all(Path::new("/run/frr").join(&self.ns));
    }
}

impl Frr {
    fn start(ns: &Netns, dir: &Path, bgpd_conf: &str) -> Frr {
        let dir = dir.join("frr");
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("zebra.conf"), "").unwrap();
        std::fs::write(dir.join("bgpd.conf"), bgpd_conf).unwrap();
        for d in [dir.parent().unwrap(), &dir] {
            let st = Command::new("chown").args(["frr:frr"]).arg(d).status().unwrap();
            assert!(
                st.success(),
                "no user frr (scripts/install-deps.sh installs Debian's frr)"
            );
        }
        let daemon = |name: &str, extra: &[&str]| {
            Command::new("ip")
                .args(["netns", "exec", &ns.name])
                .arg(format!("/usr/lib/frr/{name}"))
                .args(["-N", &ns.name, "-f"])
                .arg(dir.join(format!("{name}.conf")))
                .arg("-i")
                .arg(dir.join(format!("{name}.pid")))
                .arg("-z")
                .arg(dir.join("zserv.api"))
                .arg("--vty_socket")
                .arg(&dir)
                .args(extra)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap_or_else(|e| {
                    panic!("start {name} (scripts/install-deps.sh installs Debian's frr): {e}")
                })
        };
        let mut frr = Frr {
            zebra: daemon("zebra", &[]),
            bgpd: None,
            dir: dir.clone(),
            ns: ns.name.clone(),
        };
        wait_for(|| dir.join("zserv.api").exists(), "zebra's socket");
        frr.bgpd = Some(daemon("bgpd", &[]));
        wait_for(
            || frr.vtysh(&["show bgp summary"]).contains("BGP router identifier"),
            "bgpd",
        );
        frr
    }

    /// `vtysh -c C ...`: each argument one command.
    fn vtysh(&self, commands: &[&str]) -> String {
        let mut cmd = Command::new("vtysh");
        cmd.arg("--vty_socket").arg(&self.dir);
        for c in commands {
            cmd.args(["-c", c]);
        }
        let o = cmd.output().expect("run vtysh");
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    /// Waits (bounded) until `n` BGP sessions are established.
    fn wait_established(&self, n: usize) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while self
            .vtysh(&["show bgp neighbors"])
            .matches("BGP state = Established")
            .count()
            != n
        {
            assert!(
                Instant::now() < deadline,
                "FRR's BGP sessions not established:\n{}",
                self.vtysh(&["show bgp neighbors"])
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Stops bgpd (SIGTERM): zebra takes its routes out of the kernel.
    fn stop_bgpd(&mut self) {
        terminate(&mut self.bgpd.take().unwrap());
    }
}

/// Waits (bounded, 30 s) until `ready`.
fn wait_for(mut ready: impl FnMut() -> bool, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !ready() {
        assert!(Instant::now() < deadline, "{what}: not ready in 30 s");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The router namespace's routing daemon.
enum Daemon {
    Bird(Bird),
    Frr(Frr),
}

impl Daemon {
    /// With `multipath`, equal BGP routes from both sessions go to the kernel as one
    /// multipath route (BIRD: `merge paths`; FRR: `maximum-paths 2`).
    fn start(which: &str, f: Family, ns: &Netns, dir: &Path, multipath: bool) -> Daemon {
        match which {
            "bird" => Daemon::Bird(Bird::start(ns, dir, "router", &f.router_conf(multipath))),
            _ => Daemon::Frr(Frr::start(ns, dir, &f.frr_conf(multipath))),
        }
    }

    fn wait_established(&self) {
        match self {
            Daemon::Bird(b) => b.wait_established(&["a", "b"]),
            Daemon::Frr(f) => f.wait_established(2),
        }
    }

    /// Writes the daemon's RIB as an MRT TABLE_DUMP_V2 file at `path`.
    fn dump_rib(&self, f: Family, path: &Path) {
        match self {
            Daemon::Bird(b) => {
                let table_name = if f.v6 { "master6" } else { "master4" };
                let to = format!("\"{}\"", path.display());
                let out = b.birdc(&["mrt", "dump", "table", table_name, "to", &to]);
                assert!(!out.contains("rror"), "{out}");
            }
            Daemon::Frr(frr) => {
                let dump = format!("dump bgp routes-mrt {}", path.display());
                let out = frr.vtysh(&["configure terminal", &dump]);
                assert!(out.trim().is_empty(), "{out}");
            }
        }
    }

    /// Stops the daemon's BGP: its routes leave the kernel.
    fn stop(&mut self) {
        match self {
            Daemon::Bird(b) => {
                let out = b.birdc(&["down"]);
                assert!(out.contains("Shutdown"), "{out}");
            }
            Daemon::Frr(f) => f.stop_bgpd(),
        }
    }
}

/// Deterministic pseudo-random numbers (xorshift64*), so a failure can be replayed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn wide(&mut self) -> u128 {
        (u128::from(self.next()) << 64) | u128::from(self.next())
    }
}

/// An address family's side of the test: addresses are `u128`s of `bits` bits.
#[derive(Clone, Copy)]
struct Family {
    v6: bool,
}

/// (address, length), the address's host bits zero.
type Prefix = (u128, u8);

/// A static protocol's routes: prefix -> gateway.
type Routes = BTreeMap<Prefix, u128>;

const V4: Family = Family { v6: false };
const V6: Family = Family { v6: true };

impl Family {
    fn bits(self) -> u8 {
        if self.v6 {
            128
        } else {
            32
        }
    }

    fn mask(self, len: u8) -> u128 {
        let all = if self.v6 { u128::MAX } else { u128::from(u32::MAX) };
        if len == 0 {
            0
        } else {
            all & (all << (self.bits() - len))
        }
    }

    fn addr(self, a: u128) -> String {
        if self.v6 {
            Ipv6Addr::from(a).to_string()
        } else {
            Ipv4Addr::from(a as u32).to_string()
        }
    }

    fn show(self, p: Prefix) -> String {
        format!("{}/{}", self.addr(p.0), p.1)
    }

    fn parse(self, s: &str) -> u128 {
        if self.v6 {
            u128::from(s.parse::<Ipv6Addr>().unwrap())
        } else {
            u128::from(u32::from(s.parse::<Ipv4Addr>().unwrap()))
        }
    }

    fn channel(self) -> &'static str {
        if self.v6 {
            "ipv6"
        } else {
            "ipv4"
        }
    }

    /// (router's interface, peer's, router's address, peer's, network) per link.
    fn links(
        self,
    ) -> [(
        &'static str,
        &'static str,
        &'static str,
        &'static str,
        &'static str,
    ); 2] {
        if self.v6 {
            [
                ("d0", "e0", "2001:db8::1", "2001:db8::2", "2001:db8::/64"),
                ("d1", "e1", "2001:db8:1::1", "2001:db8:1::2", "2001:db8:1::/64"),
            ]
        } else {
            [
                ("d0", "e0", "198.18.0.1", "198.18.0.2", "198.18.0.0/24"),
                ("d1", "e1", "198.19.0.1", "198.19.0.2", "198.19.0.0/24"),
            ]
        }
    }

    /// A gateway on link `link` (the peer's neighbours .3-.6 / ::3-::6).
    fn gateway(self, rng: &mut Rng, link: usize) -> u128 {
        let net = self.links()[link].4.split('/').next().unwrap();
        self.parse(net) + 3 + u128::from(rng.below(4))
    }

    /// `n` distinct prefixes of BGP-like shape, a third of them more-specifics of
    /// earlier ones. IPv4: mostly /24s, /16-/23 and some longer, in 1.0.0.0/8 to
    /// 99.0.0.0/8; IPv6: mostly /48s, /32-/47 and some /49-/64, in 2a00::/12.
    fn prefixes(self, rng: &mut Rng, n: usize) -> Vec<Prefix> {
        let mut out: Vec<Prefix> = Vec::new();
        let mut seen = HashSet::new();
        while out.len() < n {
            let p = if !out.is_empty() && rng.below(3) == 0 {
                let (a, l) = out[rng.below(out.len() as u64) as usize];
                if l >= self.bits() {
                    continue;
                }
                let len = l + 1 + rng.below(u64::from(self.bits() - l).min(8)) as u8;
                ((a | (rng.wide() & !self.mask(l))) & self.mask(len), len)
            } else if self.v6 {
                let len = match rng.below(10) {
                    0..=5 => 48,
                    6..=8 => 32 + rng.below(16) as u8,
                    _ => 49 + rng.below(16) as u8,
                };
                let a = (0x2a0u128 << 116) | (rng.wide() & (u128::MAX >> 12));
                (a & self.mask(len), len)
            } else {
                let len = match rng.below(10) {
                    0..=5 => 24,
                    6..=8 => 16 + rng.below(8) as u8,
                    _ => 25 + rng.below(8) as u8,
                };
                let first = 1 + u128::from(rng.below(99));
                let a = (first << 24) | (rng.wide() & 0x00ff_ffff);
                (a & self.mask(len), len)
            };
            if seen.insert(p) {
                out.push(p);
            }
        }
        out
    }

    /// A static protocol of `routes`, in table `t{name}` of its own with `own_table`.
    fn static_protocol(self, name: &str, routes: &Routes, own_table: bool) -> String {
        let c = self.channel();
        let mut s = if own_table {
            format!("{c} table t{name};\nprotocol static {name} {{\n  {c} {{ table t{name}; }};\n")
        } else {
            format!("protocol static {name} {{\n  {c};\n")
        };
        for (p, gw) in routes {
            s += &format!("  route {} via {};\n", self.show(*p), self.addr(*gw));
        }
        s + "}\n"
    }

    /// The peer: session `a` (over d0's link) announces static protocol `sa`, session
    /// `b` (over d1's) announces `sb`: of a prefix in both, only the peer's best route
    /// (sa's), or with `both` (each protocol in a table of its own) both. Each route
    /// keeps its own gateway on the shared network as the BGP next hop (a third-party
    /// next hop). A session refused is tried again within 2 s (FRR refuses an IPv6
    /// session that opens before zebra has told bgpd about the interfaces, and BIRD
    /// would wait 60 s).
    fn peer_conf(self, sa: &Routes, sb: &Routes, both: bool) -> String {
        let mut s = String::from("router id 198.18.0.2;\nprotocol device {}\n");
        s += &self.static_protocol("sa", sa, both);
        s += &self.static_protocol("sb", sb, both);
        for ((_, _, router, peer, _), (name, from)) in self.links().iter().zip([("a", "sa"), ("b", "sb")]) {
            let channel = if both {
                format!("table t{from}; import none; export all;")
            } else {
                format!("import none; export where proto = \"{from}\";")
            };
            s += &format!(
                "protocol bgp {name} {{\n  local {peer} as 65002;\n  neighbor {router} as 65001;\n  \
                 connect delay time 1; error wait time 1, 2;\n  {} {{ {channel} }};\n}}\n",
                self.channel()
            );
        }
        s
    }

    /// The router's BIRD: both sessions imported, the best routes written to the
    /// kernel's main table (proto bird, metric 32), merged into multipath routes with
    /// `multipath`.
    fn router_conf(self, multipath: bool) -> String {
        let merge = if multipath { " merge paths on;" } else { "" };
        let mut s = format!(
            "router id 198.18.0.1;\nprotocol device {{}}\n\
             protocol kernel {{ {} {{ import none; export all; }};{merge} }}\n",
            self.channel()
        );
        for ((_, _, router, peer, _), name) in self.links().iter().zip(["a", "b"]) {
            s += &format!(
                "protocol bgp {name} {{ local {router} as 65001; neighbor {peer} as 65002; \
                 connect delay time 1; error wait time 1, 2; {} {{ import all; export none; }}; }}\n",
                self.channel()
            );
        }
        s
    }

    /// The router's FRR bgpd: both sessions, best path by router id then neighbour
    /// address as BIRD's (FRR otherwise keeps the older of two eBGP paths), the best
    /// routes written to the kernel by zebra (proto bgp, metric 20, nexthop objects);
    /// with `multipath`, the two sessions' equal paths together.
    fn frr_conf(self, multipath: bool) -> String {
        let mut s = String::from(
            "router bgp 65001\n bgp router-id 198.18.0.1\n no bgp ebgp-requires-policy\n \
             bgp bestpath compare-routerid\n",
        );
        if self.v6 {
            s += " no bgp default ipv4-unicast\n";
        }
        for (_, _, _, peer, _) in self.links() {
            s += &format!(" neighbor {peer} remote-as 65002\n neighbor {peer} timers connect 1\n");
        }
        s += if self.v6 {
            " address-family ipv6 unicast\n"
        } else {
            " address-family ipv4 unicast\n"
        };
        if self.v6 {
            for (_, _, _, peer, _) in self.links() {
                s += &format!("  neighbor {peer} activate\n");
            }
        }
        // (FRR's default is as many paths as it was built for.)
        s += if multipath {
            "  maximum-paths 2\n"
        } else {
            "  maximum-paths 1\n"
        };
        s += " exit-address-family\n";
        s
    }

    /// A connected network's `rt.table` line.
    fn connected(self, link: usize) -> String {
        let gw = if self.v6 { "::" } else { "-" };
        format!("{} {} {}", self.links()[link].4, gw, link + 1)
    }

    /// The table the router must hold, as `rt.table` lines: the connected networks
    /// and, per prefix, session a's route where it has one (BGP prefers it: same path
    /// length and origin, lower neighbour address), else session b's.
    fn expected(self, sa: &Routes, sb: &Routes) -> Vec<String> {
        let mut t = vec![self.connected(0), self.connected(1)];
        for (p, gw) in sb {
            if !sa.contains_key(p) {
                t.push(format!("{} {} 2", self.show(*p), self.addr(*gw)));
            }
        }
        for (p, gw) in sa {
            t.push(format!("{} {} 1", self.show(*p), self.addr(*gw)));
        }
        t.sort();
        t
    }

    /// The kernel's main table in the router's form (`PREFIX GATEWAY PORT`), without
    /// IPv6's link-local networks.
    fn kernel_table(self, ns: &Netns) -> Vec<String> {
        let o = Command::new("ip")
            .args(["-n", &ns.name, if self.v6 { "-6" } else { "-4" }])
            .args(["route", "show", "table", "main"])
            .output()
            .unwrap();
        let mut v: Vec<String> = String::from_utf8_lossy(&o.stdout)
            .lines()
            .filter(|l| !l.starts_with("fe80::/64"))
            .map(|l| {
                let w: Vec<&str> = l.split_whitespace().collect();
                let after = |k: &str| w.iter().position(|x| *x == k).map(|i| w[i + 1]);
                let port = match after("dev") {
                    Some("d0") => "1",
                    Some("d1") => "2",
                    other => panic!("route on {other:?}: {l}"),
                };
                // (`ip route` shows host routes without their length.)
                let prefix = if w[0].contains('/') {
                    w[0].to_string()
                } else {
                    format!("{}/{}", w[0], self.bits())
                };
                let none = if self.v6 { "::" } else { "-" };
                format!("{} {} {}", prefix, after("via").unwrap_or(none), port)
            })
            .collect();
        v.sort();
        v
    }
}

/// Waits (bounded) until both the kernel and the router hold `want`; on a timeout
/// says which differs and how.
fn wait_both(f: Family, ns: &Netns, c: &mut Client<UnixStream>, want: &[String]) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let kernel = f.kernel_table(ns);
        let router = c.routes("rt.table");
        if kernel == want && router == want {
            return;
        }
        if Instant::now() > deadline {
            let diff = |got: &[String]| {
                let missing: Vec<&String> = want.iter().filter(|l| !got.contains(l)).take(5).collect();
                let extra: Vec<&String> = got.iter().filter(|l| !want.contains(l)).take(5).collect();
                format!("{} lines, missing {:?}, extra {:?}", got.len(), missing, extra)
            };
            panic!(
                "expected {} lines; kernel: {}; router: {}",
                want.len(),
                diff(&kernel),
                diff(&router)
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The router's namespace and the peer's, joined by two veth links.
fn namespaces(f: Family) -> (Netns, Netns) {
    let r = Netns::new("br");
    let p = Netns::new("bp");
    for ns in [&r, &p] {
        if f.v6 {
            // Netns turns IPv6 off; these links want it.
            ns.run(|| {
                for k in ["all", "default"] {
                    std::fs::write(format!("/proc/sys/net/ipv6/conf/{}/disable_ipv6", k), "0").unwrap();
                }
            });
        }
        ns.ip(&["link", "set", "lo", "up"]);
    }
    let plen = if f.v6 { "/64" } else { "/24" };
    for (d, e, ra, pa, _) in f.links() {
        netns::ip(&[
            "link", "add", d, "netns", &r.name, "type", "veth", "peer", "name", e, "netns", &p.name,
        ]);
        for (ns, dev, a) in [(&r, d, ra), (&p, e, pa)] {
            let a = format!("{a}{plen}");
            let mut args = vec!["addr", "add", &a, "dev", dev];
            if f.v6 {
                args.push("nodad");
            }
            ns.ip(&args);
            ns.ip(&["link", "set", dev, "up"]);
        }
    }
    (r, p)
}

/// `KernelRoutes` feeding the family's lookup element, with outputs 1 and 2 for d0
/// and d1.
fn lookup_config(f: Family) -> &'static str {
    if f.v6 {
        "KernelRoutes(rt, d0 1, d1 2); InfiniteSource(LIMIT 0) -> rt :: LookupIP6Route; \
         rt[0] -> Discard; rt[1] -> Discard; rt[2] -> Discard;"
    } else {
        "KernelRoutes(rt, d0 1, d1 2); InfiniteSource(LIMIT 0) -> rt :: RadixIPLookup; \
         rt[0] -> Discard; rt[1] -> Discard; rt[2] -> Discard;"
    }
}

/// The router in namespace `r` with the family's `KernelRoutes` configuration and a
/// control socket (in the returned directory, where the daemons keep their files too),
/// and a client of it.
fn start_router(f: Family, r: &Netns) -> (tempfile::TempDir, RouterProcess, Client<UnixStream>) {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("s");
    let config = format!("ControlSocket(unix, {}); {}", sock.display(), lookup_config(f));
    let mut router = RouterProcess(
        r.brickroute_run(&["-e", &config])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start brickroute"),
    );
    let c = connect_unix(&sock, &mut router);
    (dir, router, c)
}

/// BGP routes from the router namespace's daemon (`bird` or `frr`), in a running router
/// and in the daemon's RIB dump, through an announcement, a change of the peer's
/// routes and the daemon's shutdown. The peer is always BIRD.
fn daemon_drives_the_router(daemon: &str, f: Family) {
    let (r, p) = namespaces(f);

    // Session a: 3,000 prefixes; session b: 300 of the same and 200 of its own.
    let mut rng = Rng(0x5eed_b12d);
    let all = f.prefixes(&mut rng, 3_200);
    let mut sa: Routes = all[..3_000]
        .iter()
        .map(|&p| (p, f.gateway(&mut rng, 0)))
        .collect();
    let sb: Routes = all[2_700..]
        .iter()
        .map(|&p| (p, f.gateway(&mut rng, 1)))
        .collect();

    // The router runs first, so every BGP route reaches it as a notification.
    let (dir, mut router, mut c) = start_router(f, &r);
    wait_both(f, &r, &mut c, &f.expected(&Routes::new(), &Routes::new()));

    let mut router_daemon = Daemon::start(daemon, f, &r, dir.path(), false);
    let peer_bird = Bird::start(&p, dir.path(), "peer", &f.peer_conf(&sa, &sb, false));
    router_daemon.wait_established();
    wait_both(f, &r, &mut c, &f.expected(&sa, &sb));

    // The daemon's RIB dump: every address answers with its longest prefix's BGP next
    // hop.
    let rib = dir.path().join("rib.mrt");
    router_daemon.dump_rib(f, &rib);
    check_rib_dump(f, &rib, &sa, &sb, &mut rng);

    // The peer withdraws a third of session a's routes (the 100 of them session b also
    // announces fail over to b), moves another third to other gateways and announces
    // 400 new ones.
    let keys: Vec<Prefix> = sa.keys().copied().collect();
    for (i, k) in keys.iter().enumerate() {
        match i % 3 {
            0 => {
                sa.remove(k);
            }
            1 => {
                let old = sa[k];
                let mut gw = old;
                while gw == old {
                    gw = f.gateway(&mut rng, 0);
                }
                sa.insert(*k, gw);
            }
            _ => {}
        }
    }
    for fresh in f.prefixes(&mut Rng(0x0dd5_eed5), 400) {
        if !sb.contains_key(&fresh) {
            sa.insert(fresh, f.gateway(&mut rng, 0));
        }
    }
    peer_bird.configure(&f.peer_conf(&sa, &sb, false));
    wait_both(f, &r, &mut c, &f.expected(&sa, &sb));

    // A second router started now takes the same table from the kernel's dump.
    let o = r
        .brickroute_run(&["-q", "-e", lookup_config(f), "-h", "rt.table"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let dumped = route_lines(&String::from_utf8_lossy(&o.stdout));
    assert_eq!(dumped, f.expected(&sa, &sb));

    // The daemon shutting down takes its routes out of the kernel, and out of the
    // router.
    router_daemon.stop();
    wait_both(f, &r, &mut c, &f.expected(&Routes::new(), &Routes::new()));
    assert!(router.exited().is_none(), "the router stopped");
}

#[test]
fn bgp_routes_from_bird_reach_the_router_through_the_kernel_and_its_rib_dump_loads() {
    daemon_drives_the_router("bird", V4);
}

#[test]
fn bgp_ipv6_routes_from_bird_reach_the_router_through_the_kernel_and_its_rib_dump_loads() {
    daemon_drives_the_router("bird", V6);
}

#[test]
fn bgp_routes_from_frr_reach_the_router_through_the_kernel_and_its_rib_dump_loads() {
    daemon_drives_the_router("frr", V4);
}

#[test]
fn bgp_ipv6_routes_from_frr_reach_the_router_through_the_kernel_and_its_rib_dump_loads() {
    daemon_drives_the_router("frr", V6);
}

/// Loads BIRD's MRT dump in `brickroute fib lookup` and checks one address inside
/// every prefix, and the first address past it, against a longest-prefix match over
/// the routes the test announced. `fib lookup` numbers next hops by address, so its
/// answers must map one to one onto the gateways the test chose.
fn check_rib_dump(f: Family, rib: &Path, sa: &Routes, sb: &Routes, rng: &mut Rng) {
    let mut best: HashMap<Prefix, u128> = sb.iter().map(|(p, g)| (*p, *g)).collect();
    best.extend(sa.iter().map(|(p, g)| (*p, *g)));
    let lookup = |a: u128| {
        (0..=f.bits())
            .rev()
            .find_map(|l| best.get(&(a & f.mask(l), l)).copied())
    };
    let mut queries: Vec<u128> = Vec::new();
    for &(a, l) in best.keys() {
        queries.push(a | (rng.wide() & !f.mask(l) & f.mask(f.bits())));
        queries.push((a | (!f.mask(l) & f.mask(f.bits()))).wrapping_add(1) & f.mask(f.bits()));
    }
    let input: String = queries.iter().map(|q| format!("{}\n", f.addr(*q))).collect();

    // The daemons write the dump from their event loops: wait (bounded) until the file
    // has stopped growing and a load answers every query.
    let mut last = None;
    wait_for(
        || {
            let size = std::fs::metadata(rib).map(|m| m.len()).ok().filter(|&n| n > 0);
            let same = size.is_some() && size == last;
            last = size;
            std::thread::sleep(Duration::from_millis(200));
            same
        },
        "the RIB dump",
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    let answers = loop {
        let mut child = Command::new(env!("CARGO_BIN_EXE_brickroute"))
            .args(["fib", "lookup", "--table"])
            .arg(rib)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let feed = input.clone();
        let writer = std::thread::spawn(move || stdin.write_all(feed.as_bytes()));
        let o = child.wait_with_output().unwrap();
        let _ = writer.join().unwrap();
        let out = String::from_utf8_lossy(&o.stdout).into_owned();
        if o.status.success() && out.lines().count() == queries.len() {
            break out;
        }
        assert!(
            Instant::now() < deadline,
            "fib lookup on BIRD's dump: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        std::thread::sleep(Duration::from_millis(200));
    };

    let mut index_of: HashMap<u128, String> = HashMap::new();
    let mut gateway_of: HashMap<String, u128> = HashMap::new();
    for (q, line) in queries.iter().zip(answers.lines()) {
        let (addr, hop) = line.split_once(' ').unwrap();
        assert_eq!(addr, f.addr(*q));
        match lookup(*q) {
            None => assert_eq!(hop, "-", "{addr} has no route"),
            Some(gw) => {
                let via = f.addr(gw);
                assert_ne!(hop, "-", "{addr} should go via {via}");
                let i = index_of.entry(gw).or_insert_with(|| hop.to_string());
                assert_eq!(i, hop, "{addr} via {via}");
                let g = gateway_of.entry(hop.to_string()).or_insert(gw);
                assert_eq!(*g, gw, "{addr}: next hop {hop}");
            }
        }
    }
    assert_eq!(index_of.len(), 8, "both sessions' four gateways");
}

/// `ip route show table main` of the family in `ns`.
fn kernel_text(f: Family, ns: &Netns) -> String {
    let o = Command::new("ip")
        .args([
            "-n",
            &ns.name,
            if f.v6 { "-6" } else { "-4" },
            "route",
            "show",
            "table",
            "main",
        ])
        .output()
        .unwrap();
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A route table's lines with each multipath route's members in a fixed order (by
/// output, then gateway), since the daemons order them as they like.
fn members_sorted(lines: Vec<String>) -> Vec<String> {
    let mut out: Vec<String> = lines
        .into_iter()
        .map(|l| {
            let w: Vec<&str> = l.split(' ').collect();
            let mut members: Vec<(&str, &str)> = w[1..].chunks(2).map(|m| (m[1], m[0])).collect();
            members.sort();
            let rest: Vec<String> = members.iter().map(|(port, gw)| format!("{gw} {port}")).collect();
            format!("{} {}", w[0], rest.join(" "))
        })
        .collect();
    out.sort();
    out
}

/// The peer announces 200 prefixes on both sessions (a gateway on each link) and 50 on
/// session a alone; the router's daemon, with multipath on, gives the kernel one
/// multipath route for each of the 200, and the router holds them so: both members.
/// When session b withdraws them, each is left with session a's member.
fn daemon_multipath_reaches_the_router(daemon: &str, f: Family) {
    let (r, p) = namespaces(f);
    let mut rng = Rng(0x00ec_3a77);
    let all = f.prefixes(&mut rng, 250);
    let sa: Routes = all.iter().map(|&p| (p, f.gateway(&mut rng, 0))).collect();
    let sb: Routes = all[..200].iter().map(|&p| (p, f.gateway(&mut rng, 1))).collect();
    let (dir, mut router, mut c) = start_router(f, &r);
    let router_daemon = Daemon::start(daemon, f, &r, dir.path(), true);
    let peer_bird = Bird::start(&p, dir.path(), "peer", &f.peer_conf(&sa, &sb, true));
    router_daemon.wait_established();
    let mut want = vec![f.connected(0), f.connected(1)];
    for (p, gw) in &sa {
        let mut line = format!("{} {} 1", f.show(*p), f.addr(*gw));
        if let Some(b) = sb.get(p) {
            line += &format!(" {} 2", f.addr(*b));
        }
        want.push(line);
    }
    let want = members_sorted(want);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let got = members_sorted(c.routes("rt.table"));
        if got == want {
            break;
        }
        let both = want
            .iter()
            .find(|l| l.split(' ').count() > 3)
            .unwrap()
            .split(' ')
            .next()
            .unwrap();
        let show = || match &router_daemon {
            Daemon::Frr(fr) => fr.vtysh(&[&format!("show bgp {} unicast {}", f.channel(), both)]),
            Daemon::Bird(b) => b.birdc(&["show", "route", "all", "for", both]),
        };
        assert!(
            Instant::now() < deadline,
            "daemon:\n{}\nkernel (the first lines):\n{}\nrouter table: {} lines, missing {:?}, extra {:?}",
            show(),
            kernel_text(f, &r).lines().take(12).collect::<Vec<_>>().join("\n"),
            got.len(),
            want.iter()
                .filter(|l| !got.contains(l))
                .take(4)
                .collect::<Vec<_>>(),
            got.iter()
                .filter(|l| !want.contains(l))
                .take(4)
                .collect::<Vec<_>>()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // The kernel agrees: 200 multipath routes.
    let kernel = kernel_text(f, &r);
    assert_eq!(kernel.matches("nexthop via").count(), 400, "{kernel}");

    // Session b withdraws its routes: each multipath route keeps session a's member.
    peer_bird.configure(&f.peer_conf(&sa, &Routes::new(), true));
    let want = members_sorted(f.expected(&sa, &Routes::new()));
    let deadline = Instant::now() + Duration::from_secs(60);
    while members_sorted(c.routes("rt.table")) != want {
        assert!(Instant::now() < deadline, "session b's members never left");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(router.exited().is_none(), "the router stopped");
}

#[test]
fn bgp_multipath_routes_from_bird_reach_the_router() {
    daemon_multipath_reaches_the_router("bird", V4);
}

#[test]
fn bgp_ipv6_multipath_routes_from_bird_reach_the_router() {
    daemon_multipath_reaches_the_router("bird", V6);
}

#[test]
fn bgp_multipath_routes_from_frr_reach_the_router() {
    daemon_multipath_reaches_the_router("frr", V4);
}

#[test]
fn bgp_ipv6_multipath_routes_from_frr_reach_the_router() {
    daemon_multipath_reaches_the_router("frr", V6);
}
