//! Network namespaces, veth pairs and raw AF_PACKET sockets for the tests that move
//! real frames (root needed). Everything made here is removed on drop, also when a test
//! fails; names carry the test process's id so concurrent runs never collide, and what
//! a test process killed before its drops ran left behind goes at the next one's start.

#![allow(dead_code)]

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

static NEXT: AtomicUsize = AtomicUsize::new(0);

/// Runs `ip ARGS`, panicking with its error output if it fails.
pub fn ip(args: &[&str]) {
    let o = Command::new("ip").args(args).output().expect("run ip");
    assert!(
        o.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// A network namespace named `brt<pid><role><n>`, IPv6 off (so its kernel sends no
/// router solicitations or MLD reports into the test's traffic); deleted on drop with
/// every interface in it.
pub struct Netns {
    pub name: String,
}

/// Removes what test processes killed before their drops ran left behind: namespaces
/// named for a process that no longer exists, the processes still in them (a router,
/// routing daemons), and FRR's directories for them. Once per test process.
fn sweep_stale() {
    static SWEEP: std::sync::Once = std::sync::Once::new();
    SWEEP.call_once(|| {
        let Ok(o) = Command::new("ip").args(["netns", "list"]).output() else {
            return;
        };
        for line in String::from_utf8_lossy(&o.stdout).lines() {
            let Some(name) = line.split_whitespace().next() else {
                continue;
            };
            let Some(rest) = name.strip_prefix("brt") else {
                continue;
            };
            let pid: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
            if pid.is_empty() || std::path::Path::new(&format!("/proc/{pid}")).exists() {
                continue;
            }
            if let Ok(o) = Command::new("ip").args(["netns", "pids", name]).output() {
                for p in String::from_utf8_lossy(&o.stdout).split_whitespace() {
                    if let Ok(p) = p.parse::<i32>() {
                        // SAFETY: kill(2) with a pid the kernel listed in the namespace.
                        unsafe { libc::kill(p, libc::SIGKILL) };
                        for d in ["zebra", "bgpd"] {
                            let _ = std::fs::remove_dir_all(format!("/var/tmp/frr/{d}.{p}"));
                        }
                    }
                }
            }
            let _ = Command::new("ip").args(["netns", "del", name]).output();
            let _ = std::fs::remove_dir_all(std::path::Path::new("/run/frr").join(name));
        }
    });
}

impl Netns {
    pub fn new(role: &str) -> Netns {
        sweep_stale();
        let name = format!(
            "brt{}{}{}",
            std::process::id(),
            role,
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        ip(&["netns", "add", &name]);
        let ns = Netns { name };
        ns.run(|| {
            for f in ["all", "default"] {
                std::fs::write(format!("/proc/sys/net/ipv6/conf/{}/disable_ipv6", f), "1")
                    .expect("disable IPv6");
            }
        });
        ns
    }

    /// Runs `f` on a thread inside the namespace: sockets it opens live there (and can
    /// be used from any thread afterwards).
    pub fn run<T: Send>(&self, f: impl FnOnce() -> T + Send) -> T {
        std::thread::scope(|s| {
            s.spawn(|| {
                let file = std::fs::File::open(format!("/run/netns/{}", self.name)).expect("open netns");
                // SAFETY: `file` is an open network-namespace file; setns moves only this
                // thread.
                let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
                assert_eq!(rc, 0, "setns: {}", std::io::Error::last_os_error());
                f()
            })
            .join()
            .unwrap()
        })
    }

    /// `brickroute run ARGS` inside the namespace (`ip netns exec` execs it, so the
    /// child's process id is brickroute's).
    pub fn brickroute_run(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new("ip");
        cmd.args([
            "netns",
            "exec",
            &self.name,
            env!("CARGO_BIN_EXE_brickroute"),
            "run",
        ])
        .args(args);
        cmd
    }

    /// `ip -n NAME ARGS`.
    pub fn ip(&self, args: &[&str]) {
        let mut a = vec!["-n", self.name.as_str()];
        a.extend_from_slice(args);
        ip(&a);
    }

    /// The contents of `/proc/sys/PATH` as seen in the namespace, trimmed
    /// (`proc_sys("net/ipv4/conf/d0/forwarding")`).
    pub fn proc_sys(&self, path: &str) -> String {
        let p = format!("/proc/sys/{}", path);
        self.run(|| std::fs::read_to_string(&p))
            .unwrap_or_else(|e| panic!("read {} in {}: {}", p, self.name, e))
            .trim()
            .to_string()
    }

    /// Writes `value` to `/proc/sys/PATH` in the namespace.
    pub fn set_proc_sys(&self, path: &str, value: &str) {
        let p = format!("/proc/sys/{}", path);
        self.run(|| std::fs::write(&p, value))
            .unwrap_or_else(|e| panic!("write {} in {}: {}", p, self.name, e));
    }

    /// The namespace's cookie (`SO_NETNS_COOKIE`), which names it until reboot.
    pub fn cookie(&self) -> u64 {
        self.run(|| {
            // SAFETY: plain system calls; `cookie` and `len` are valid for the size
            // given and the descriptor is owned at once.
            unsafe {
                let raw = libc::socket(libc::AF_UNIX, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
                assert!(raw >= 0, "socket: {}", std::io::Error::last_os_error());
                let fd = OwnedFd::from_raw_fd(raw);
                let mut cookie: u64 = 0;
                let mut len = std::mem::size_of::<u64>() as libc::socklen_t;
                let rc = libc::getsockopt(
                    fd.as_raw_fd(),
                    libc::SOL_SOCKET,
                    libc::SO_NETNS_COOKIE,
                    &mut cookie as *mut u64 as *mut libc::c_void,
                    &mut len,
                );
                assert_eq!(rc, 0, "SO_NETNS_COOKIE: {}", std::io::Error::last_os_error());
                cookie
            }
        })
    }

    /// `ip -d link show DEV` in the namespace.
    pub fn link_details(&self, dev: &str) -> String {
        let o = Command::new("ip")
            .args(["-n", &self.name, "-d", "link", "show", dev])
            .output()
            .expect("run ip");
        String::from_utf8_lossy(&o.stdout).into_owned()
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.name]).output();
    }
}

/// Makes veth pair `a_dev` (in `a`, MAC `a_mac`) <-> `b_dev` (in `b`, MAC `b_mac`), both
/// up.
pub fn veth(a: &Netns, a_dev: &str, a_mac: &str, b: &Netns, b_dev: &str, b_mac: &str) {
    // Two queues each way, so that two workers each own one (AF_XDP binds per queue).
    ip(&[
        "link",
        "add",
        a_dev,
        "netns",
        &a.name,
        "address",
        a_mac,
        "numtxqueues",
        "2",
        "numrxqueues",
        "2",
        "type",
        "veth",
        "peer",
        "name",
        b_dev,
        "netns",
        &b.name,
        "address",
        b_mac,
        "numtxqueues",
        "2",
        "numrxqueues",
        "2",
    ]);
    a.ip(&["link", "set", a_dev, "up"]);
    b.ip(&["link", "set", b_dev, "up"]);
}

/// A plain AF_PACKET socket bound to one interface (open it inside the namespace with
/// [`Netns::run`]).
pub struct RawSocket {
    fd: OwnedFd,
}

const ETH_P_ALL_BE: u16 = (libc::ETH_P_ALL as u16).to_be();

impl RawSocket {
    pub fn open(dev: &str) -> RawSocket {
        let name = std::ffi::CString::new(dev).unwrap();
        // SAFETY: plain system calls; every pointer passed is to a live value of the
        // size given.
        unsafe {
            let ifindex = libc::if_nametoindex(name.as_ptr());
            assert!(ifindex > 0, "{}: {}", dev, std::io::Error::last_os_error());
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
            sll.sll_ifindex = ifindex as i32;
            let rc = libc::bind(
                raw,
                &sll as *const _ as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_ll>() as u32,
            );
            assert_eq!(rc, 0, "bind: {}", std::io::Error::last_os_error());
            RawSocket { fd }
        }
    }

    pub fn send(&self, frame: &[u8]) {
        // SAFETY: `frame` is valid for its length.
        let n = unsafe { libc::send(self.fd.as_raw_fd(), frame.as_ptr() as *const _, frame.len(), 0) };
        assert_eq!(
            n,
            frame.len() as isize,
            "send: {}",
            std::io::Error::last_os_error()
        );
    }

    /// The next frame that arrived on the interface (frames sent out of it are skipped),
    /// or None if none comes within `wait`.
    pub fn recv(&self, wait: Duration) -> Option<Vec<u8>> {
        let mut buf = vec![0u8; 65536];
        loop {
            let mut pfd = libc::pollfd {
                fd: self.fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd.
            let r = unsafe { libc::poll(&mut pfd, 1, wait.as_millis() as i32) };
            if r <= 0 {
                return None;
            }
            // SAFETY: `buf`, `sll` and `len` are valid for the sizes given.
            let (n, pkttype) = unsafe {
                let mut sll: libc::sockaddr_ll = std::mem::zeroed();
                let mut len = std::mem::size_of::<libc::sockaddr_ll>() as u32;
                let n = libc::recvfrom(
                    self.fd.as_raw_fd(),
                    buf.as_mut_ptr() as *mut _,
                    buf.len(),
                    libc::MSG_DONTWAIT,
                    &mut sll as *mut _ as *mut libc::sockaddr,
                    &mut len,
                );
                (n, sll.sll_pkttype)
            };
            if n >= 0 && pkttype != libc::PACKET_OUTGOING {
                return Some(buf[..n as usize].to_vec());
            }
        }
    }
}
