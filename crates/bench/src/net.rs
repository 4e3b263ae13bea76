//! The generator's and the sink's own link-layer sockets (AF_PACKET, batched with
//! `sendmmsg`/`recvmmsg`), entering a network namespace, and the clock both share.
//!
//! These are measurement tools, deliberately independent of the router's ports in
//! `io`, so a fault in a port under test cannot hide in the instrument measuring it.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

/// CLOCK_MONOTONIC now, nanoseconds: the clock of the stamps.
#[inline]
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Moves the calling thread into network namespace `name` (as `ip netns exec` would,
/// from `/run/netns/NAME`). Sockets the thread opens afterwards live in it.
pub fn enter_netns(name: &str) -> Result<(), String> {
    if name.is_empty() || name.contains('/') {
        return Err(format!("'{}' is not a network namespace name", name));
    }
    let path = format!("/run/netns/{}", name);
    let f =
        std::fs::File::open(&path).map_err(|e| format!("network namespace '{}': {}: {}", name, path, e))?;
    // SAFETY: `f` is an open namespace file; setns only changes this thread's namespace.
    if unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        return Err(format!(
            "entering network namespace '{}': {}",
            name,
            io::Error::last_os_error()
        ));
    }
    Ok(())
}

/// The iovec and mmsghdr arrays with which one `sendmmsg`/`recvmmsg` call describes its
/// buffers, kept from call to call so the generator's and sink's loops do not allocate.
#[derive(Default)]
pub struct MsgScratch {
    iov: Vec<libc::iovec>,
    msgs: Vec<libc::mmsghdr>,
}

impl MsgScratch {
    /// One message of one iovec per `(start, length)` buffer. The pointers stay valid
    /// only as long as the buffers they were made from.
    fn describe(&mut self, bufs: impl Iterator<Item = (*mut u8, usize)>) -> &mut [libc::mmsghdr] {
        self.iov.clear();
        self.iov.extend(bufs.map(|(p, l)| libc::iovec {
            iov_base: p as *mut libc::c_void,
            iov_len: l,
        }));
        self.msgs.clear();
        // SAFETY: mmsghdr is plain data; zeroed is valid.
        self.msgs.resize(self.iov.len(), unsafe { std::mem::zeroed() });
        for (m, v) in self.msgs.iter_mut().zip(self.iov.iter_mut()) {
            m.msg_hdr.msg_iov = v;
            m.msg_hdr.msg_iovlen = 1;
        }
        &mut self.msgs
    }
}

/// What one [`PacketSocket::send_batch`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sent {
    pub packets: usize,
    pub bytes: usize,
    /// Frames the kernel refused.
    pub dropped: usize,
}

/// A raw AF_PACKET socket bound to one interface.
pub struct PacketSocket {
    fd: OwnedFd,
    pub ifname: String,
    pub ifindex: u32,
}

fn os_err(ifname: &str, step: &str) -> String {
    format!("{}: {}: {}", ifname, step, io::Error::last_os_error())
}

fn setsockopt_int(fd: &OwnedFd, level: i32, opt: i32, v: i32) -> io::Result<()> {
    // SAFETY: the option value is a valid i32 whose size is passed alongside it.
    let r = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            opt,
            &v as *const i32 as *const libc::c_void,
            std::mem::size_of::<i32>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

impl PacketSocket {
    /// Opens a socket on `ifname` for IPv4 frames (`ETH_P_IP`; for sending the
    /// protocol does not matter). Needs CAP_NET_RAW.
    pub fn open(ifname: &str) -> Result<PacketSocket, String> {
        let cname = CString::new(ifname).map_err(|_| format!("bad interface name '{}'", ifname))?;
        // SAFETY: `cname` is a NUL-terminated string.
        let ifindex = unsafe { libc::if_nametoindex(cname.as_ptr()) };
        if ifindex == 0 {
            return Err(format!("{}: no such interface in this network namespace", ifname));
        }
        let proto = (libc::ETH_P_IP as u16).to_be();
        // SAFETY: plain socket(2) call; the result is checked.
        let raw = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, proto as i32) };
        if raw < 0 {
            return Err(os_err(ifname, "open AF_PACKET socket (root needed)"));
        }
        // SAFETY: `raw` is a fresh descriptor owned by nothing else.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: sockaddr_ll is plain data; zeroed is a valid value.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = proto;
        sll.sll_ifindex = ifindex as i32;
        // SAFETY: `sll` is a valid sockaddr_ll and its size is passed.
        let r = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                &sll as *const libc::sockaddr_ll as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if r != 0 {
            return Err(os_err(ifname, "bind AF_PACKET socket"));
        }
        Ok(PacketSocket {
            fd,
            ifname: ifname.to_string(),
            ifindex,
        })
    }

    /// Sets the socket up for sending: a large send buffer.
    ///
    /// Frames go through the kernel's transmit path (`dev_queue_xmit`), not straight
    /// to the driver with `PACKET_QDISC_BYPASS`: bypassing, the kernel picks the
    /// transmit queue by the CPU the sender runs on, so a flow changes queue (and, on
    /// a veth or through RSS, receive queue and router worker) whenever the generator's
    /// thread moves to another CPU, and the sink sees reordering the router did not
    /// cause. The transmit path picks the queue by the hash of the frame's flow.
    pub fn tune_for_tx(&self) -> Result<(), String> {
        // Without CAP_NET_ADMIN, SO_SNDBUFFORCE fails: the default buffer still works.
        let _ = setsockopt_int(&self.fd, libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, 16 << 20);
        Ok(())
    }

    /// Sets the socket up for receiving: a large buffer, frames this host sends
    /// ignored, and `timeout` as the longest a receive call waits.
    pub fn tune_for_rx(&self, timeout: Duration) -> Result<(), String> {
        let _ = setsockopt_int(&self.fd, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, 64 << 20);
        setsockopt_int(&self.fd, libc::SOL_PACKET, libc::PACKET_IGNORE_OUTGOING, 1)
            .map_err(|e| format!("{}: PACKET_IGNORE_OUTGOING: {}", self.ifname, e))?;
        let tv = libc::timeval {
            tv_sec: timeout.as_secs() as libc::time_t,
            tv_usec: timeout.subsec_micros() as libc::suseconds_t,
        };
        // SAFETY: `tv` is a valid timeval whose size is passed.
        let r = unsafe {
            libc::setsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                &tv as *const libc::timeval as *const libc::c_void,
                std::mem::size_of::<libc::timeval>() as libc::socklen_t,
            )
        };
        if r != 0 {
            return Err(os_err(&self.ifname, "SO_RCVTIMEO"));
        }
        Ok(())
    }

    /// The interface's MAC address.
    pub fn mac(&self) -> Result<[u8; 6], String> {
        // SAFETY: ifreq is plain data; zeroed is a valid value.
        let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
        for (d, s) in ifr.ifr_name.iter_mut().zip(self.ifname.bytes()) {
            *d = s as libc::c_char;
        }
        // SAFETY: `ifr` is a valid ifreq with a NUL-terminated name (the name is at most
        // 15 bytes, since the interface exists); SIOCGIFHWADDR writes ifr_hwaddr.
        let r = unsafe { libc::ioctl(self.fd.as_raw_fd(), libc::SIOCGIFHWADDR, &mut ifr) };
        if r != 0 {
            return Err(os_err(&self.ifname, "read MAC address"));
        }
        // SAFETY: SIOCGIFHWADDR succeeded, so the union holds ifru_hwaddr.
        let sa = unsafe { ifr.ifr_ifru.ifru_hwaddr };
        let mut m = [0u8; 6];
        for (d, s) in m.iter_mut().zip(sa.sa_data.iter()) {
            *d = *s as u8;
        }
        Ok(m)
    }

    /// Sends `frames[i][..lens[i]]` for every i with one `sendmmsg` call per group the
    /// kernel accepts. Returns what was sent and dropped ([`Sent`]): a frame the kernel
    /// refuses with ENOBUFS or EAGAIN (queue full) is counted as dropped and skipped.
    ///
    /// # Panics
    /// If `lens[i]` is longer than `frames[i]`, or there are fewer frames than lengths.
    pub fn send_batch(
        &self,
        frames: &mut [Vec<u8>],
        lens: &[usize],
        scratch: &mut MsgScratch,
    ) -> Result<Sent, String> {
        let n = lens.len();
        let msgs = scratch.describe(frames[..n].iter_mut().zip(lens).map(|(f, &l)| {
            // The kernel reads `l` bytes from the frame's start: never past its end.
            assert!(
                l <= f.len(),
                "send_batch: length {} past a {}-byte frame",
                l,
                f.len()
            );
            (f.as_mut_ptr(), l)
        }));
        let mut out = Sent::default();
        let mut at = 0;
        while at < n {
            // SAFETY: msgs[at..n] point at iovecs that lie inside `frames` (each length was
            // checked against its frame above), all alive and unaliased during the call.
            let r =
                unsafe { libc::sendmmsg(self.fd.as_raw_fd(), msgs[at..].as_mut_ptr(), (n - at) as u32, 0) };
            if r < 0 {
                let e = io::Error::last_os_error();
                match e.raw_os_error() {
                    Some(libc::ENOBUFS) | Some(libc::EAGAIN) => {
                        out.dropped += 1;
                        at += 1;
                    }
                    Some(libc::EINTR) => {}
                    _ => return Err(format!("{}: sendmmsg: {}", self.ifname, e)),
                }
            } else {
                let r = r as usize;
                out.packets += r;
                out.bytes += lens[at..at + r].iter().sum::<usize>();
                at += r;
            }
        }
        Ok(out)
    }

    /// Receives up to `bufs.len()` frames with one `recvmmsg` call, waiting at most the
    /// receive timeout for the first. Fills `lens` with their lengths and returns how
    /// many arrived (0 on timeout or interruption by a signal).
    pub fn recv_batch(
        &self,
        bufs: &mut [Vec<u8>],
        lens: &mut Vec<usize>,
        scratch: &mut MsgScratch,
    ) -> Result<usize, String> {
        lens.clear();
        let msgs = scratch.describe(bufs.iter_mut().map(|b| (b.as_mut_ptr(), b.len())));
        // SAFETY: every mmsghdr points at one iovec covering a live, writable buffer.
        let r = unsafe {
            libc::recvmmsg(
                self.fd.as_raw_fd(),
                msgs.as_mut_ptr(),
                msgs.len() as u32,
                libc::MSG_WAITFORONE,
                std::ptr::null_mut(),
            )
        };
        if r < 0 {
            let e = io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(libc::EAGAIN) | Some(libc::EINTR) => Ok(0),
                _ => Err(format!("{}: recvmmsg: {}", self.ifname, e)),
            };
        }
        lens.extend(msgs[..r as usize].iter().map(|m| m.msg_len as usize));
        Ok(r as usize)
    }

    /// Frames the kernel dropped for this socket (buffer full) since the last call
    /// (`PACKET_STATISTICS` resets on read).
    pub fn drops(&self) -> u64 {
        let mut st = libc::tpacket_stats {
            tp_packets: 0,
            tp_drops: 0,
        };
        let mut len = std::mem::size_of::<libc::tpacket_stats>() as libc::socklen_t;
        // SAFETY: `st` is a writable tpacket_stats and `len` its size.
        let r = unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_PACKET,
                libc::PACKET_STATISTICS,
                &mut st as *mut libc::tpacket_stats as *mut libc::c_void,
                &mut len,
            )
        };
        if r == 0 {
            st.tp_drops as u64
        } else {
            0
        }
    }
}

static STOP_SIGNALLED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

extern "C" fn on_stop_signal(_sig: libc::c_int) {
    STOP_SIGNALLED.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// The signals after which a tool stops cleanly rather than dying: SIGINT (Ctrl-C),
/// SIGTERM (`kill`), SIGHUP (its terminal closed) and SIGQUIT (`Ctrl-\`).
pub const STOP_SIGNALS: [libc::c_int; 4] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT];

/// Makes the [`STOP_SIGNALS`] set the returned flag instead of ending the process, so a
/// tool can stop cleanly (print its report, tear down what it made).
pub fn stop_on_signals() -> &'static std::sync::atomic::AtomicBool {
    let handler = on_stop_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
    for sig in STOP_SIGNALS {
        // SAFETY: the handler only stores to an atomic (async-signal-safe) and lives
        // for the whole process.
        unsafe { libc::signal(sig, handler) };
    }
    &STOP_SIGNALLED
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[should_panic(expected = "send_batch: length 61 past a 60-byte frame")]
    fn send_batch_refuses_a_length_past_its_frame() {
        // Loopback exists in every namespace; nothing is sent, the check comes first.
        let s = PacketSocket::open("lo").expect("AF_PACKET socket on lo (root needed)");
        let mut frames = vec![vec![0u8; 60], vec![0u8; 60]];
        let _ = s.send_batch(&mut frames, &[60, 61], &mut MsgScratch::default());
    }
}
