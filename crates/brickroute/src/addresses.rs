//! Keeps the AF_XDP interfaces' address maps true while the router runs.
//!
//! brickroute's XDP program passes to the kernel the frames for an interface's own
//! addresses (IPv4 traffic, and ARP and neighbour discovery when the router does its
//! own), and reads those addresses from maps filled when the interface opened. A thread
//! follows the kernel's address changes (route netlink) and has every interface re-read
//! its addresses after each, so an address added while the router runs reaches the
//! kernel's stack, and a removed one the router.

use crate::services::ServiceThreads;
use graph::router::RouterSpec;
use io::rtnl::{self, RouteSocket};
use io::Port;
use runtime::{DeviceTable, Method};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How long the thread waits for a change before it looks at its stop flag again.
const POLL: Duration = Duration::from_millis(100);

/// Starts the thread, if the router has AF_XDP interfaces (it has nothing to do for the
/// others). It does not keep the router running.
pub fn follow(devices: &DeviceTable, router: &Arc<RouterSpec>) -> ServiceThreads {
    let ports: Vec<Arc<dyn Port>> = devices
        .devices()
        .into_iter()
        .filter(|d| d.method == Some(Method::Xdp))
        .map(|d| d.port)
        .collect();
    let items = if ports.is_empty() { Vec::new() } else { vec![ports] };
    ServiceThreads::spawn("addresses", items, router, |ports, _router, stop| {
        run(&ports, &stop)
    })
}

fn run(ports: &[Arc<dyn Port>], stop: &AtomicBool) {
    let socket = match RouteSocket::subscribe_addresses() {
        Ok(s) => s,
        Err(e) => {
            graph::warn!(
                "brickroute: cannot follow the interfaces' address changes ({}): the XDP programs keep the addresses the interfaces had when they opened",
                e
            );
            return;
        }
    };
    let mut buf = vec![0u8; 1 << 16];
    // Each port's last warning, and the socket's: a problem is told once, not at every
    // poll it lasts.
    let mut last_warnings = vec![String::new(); ports.len()];
    let mut last_warning = String::new();
    // Once at the start: addresses may have changed between the opening of an interface
    // and the subscription.
    let mut due = true;
    while !stop.load(Ordering::Relaxed) {
        if due {
            due = false;
            for (p, last) in ports.iter().zip(&mut last_warnings) {
                match p.refresh_addresses() {
                    Ok(()) => last.clear(),
                    Err(e) => {
                        // Tried again at the next poll.
                        due = true;
                        // (The error names the interface.)
                        let w = format!("brickroute: {}", e);
                        if w != *last {
                            graph::warn!("{}", w);
                            *last = w;
                        }
                    }
                }
            }
        }
        match socket.recv(&mut buf, POLL) {
            // Every message of these groups is an address change (one that does not
            // parse is taken as one as well).
            Ok(Some(n)) => {
                due |= rtnl::parse(&buf[..n]).map_or(true, |ms| !ms.is_empty());
            }
            Ok(None) => {}
            // Changes were lost: read the addresses again.
            Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => due = true,
            Err(e) => {
                let w = format!("brickroute: following address changes: {}", e);
                if w != last_warning {
                    graph::warn!("{}", w);
                    last_warning = w;
                }
                std::thread::sleep(POLL);
            }
        }
    }
}
