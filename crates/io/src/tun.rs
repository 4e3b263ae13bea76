//! Linux's universal TUN/TAP driver (`/dev/net/tun`): a virtual interface whose other
//! side is a file descriptor, through which the router hands packets to the kernel's
//! own stack and takes the packets the kernel routes to the interface (Click's
//! KernelTun and KernelTap). A TUN device carries IP packets, a TAP device Ethernet
//! frames; neither has the driver's 4-byte packet-information prefix (`IFF_NO_PI`).
//!
//! The device lives as long as its descriptor: dropping a [`TunDevice`] removes the
//! interface, with its addresses and routes.

use std::io;
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// What a device carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TunKind {
    /// IP packets (`IFF_TUN`).
    Tun,
    /// Ethernet frames (`IFF_TAP`).
    Tap,
}

/// How the kernel side of a device is set up: its address and netmask, MTU, and (TAP
/// only) Ethernet address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TunSettings {
    pub addr: Ipv4Addr,
    pub mask: Ipv4Addr,
    /// `None` leaves the driver's default (1500).
    pub mtu: Option<u32>,
    pub ether: Option<[u8; 6]>,
}

/// A TUN or TAP device and the descriptor that is its other side (non-blocking).
pub struct TunDevice {
    fd: OwnedFd,
    name: String,
    kind: TunKind,
}

impl TunDevice {
    /// Creates a device of `kind`, named `name` or, without one, the first free
    /// `tunN`/`tapN` the kernel picks.
    pub fn create(kind: TunKind, name: Option<&str>) -> io::Result<TunDevice> {
        let path = c"/dev/net/tun";
        // SAFETY: open(2) of a NUL-terminated path; the result is checked and owned at
        // once.
        let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC) };
        if fd < 0 {
            let e = io::Error::last_os_error();
            return Err(io::Error::new(
                e.kind(),
                format!("/dev/net/tun: {} (is the kernel's tun module loaded?)", e),
            ));
        }
        // SAFETY: `fd` is a new descriptor owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let mut req = ifreq(name.unwrap_or(""))?;
        let flags = match kind {
            TunKind::Tun => libc::IFF_TUN,
            TunKind::Tap => libc::IFF_TAP,
        } | libc::IFF_NO_PI;
        req.ifr_ifru.ifru_flags = flags as libc::c_short;
        // SAFETY: TUNSETIFF reads the name and flags of `req` and writes the name the
        // device got back into it.
        if unsafe { libc::ioctl(fd.as_raw_fd(), libc::TUNSETIFF, &mut req) } < 0 {
            return Err(io::Error::last_os_error());
        }
        let name: Vec<u8> = req
            .ifr_name
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect();
        Ok(TunDevice {
            fd,
            name: String::from_utf8_lossy(&name).into_owned(),
            kind,
        })
    }

    /// The interface's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn kind(&self) -> TunKind {
        self.kind
    }

    /// Gives the interface its address and netmask, MTU and Ethernet address, and
    /// brings it up (promiscuous, as Click does, so a TAP device's kernel side takes
    /// frames to any Ethernet address). Errors name the step that failed.
    pub fn configure(&self, s: &TunSettings) -> io::Result<()> {
        let sock = inet_socket()?;
        let ioctl = |what: &str, request: libc::Ioctl, req: &mut libc::ifreq| -> io::Result<()> {
            // SAFETY: `request` is one of the SIOCSIF*/SIOCGIF* requests below, each of
            // which reads the name and its own member of `req` (and the G form writes
            // that member).
            if unsafe { libc::ioctl(sock.as_raw_fd(), request, req as *mut libc::ifreq) } < 0 {
                let e = io::Error::last_os_error();
                return Err(io::Error::new(e.kind(), format!("{}: {}", what, e)));
            }
            Ok(())
        };
        // Linux takes the address first, then the netmask (the address sets a classful
        // mask the second call replaces).
        let mut req = ifreq(&self.name)?;
        req.ifr_ifru.ifru_addr = sockaddr_in(s.addr);
        ioctl("setting the address", libc::SIOCSIFADDR, &mut req)?;
        req.ifr_ifru.ifru_netmask = sockaddr_in(s.mask);
        ioctl("setting the netmask", libc::SIOCSIFNETMASK, &mut req)?;
        if let Some(mtu) = s.mtu {
            req.ifr_ifru.ifru_mtu = libc::c_int::try_from(mtu)
                .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "MTU out of range"))?;
            ioctl("setting the MTU", libc::SIOCSIFMTU, &mut req)?;
        }
        if let (Some(mac), TunKind::Tap) = (s.ether, self.kind) {
            // SAFETY: a zeroed sockaddr is valid; the family and six bytes are set.
            let mut sa: libc::sockaddr = unsafe { std::mem::zeroed() };
            sa.sa_family = libc::ARPHRD_ETHER;
            for (d, &b) in sa.sa_data.iter_mut().zip(&mac) {
                *d = b as libc::c_char;
            }
            req.ifr_ifru.ifru_hwaddr = sa;
            ioctl("setting the Ethernet address", libc::SIOCSIFHWADDR, &mut req)?;
        }
        ioctl("reading the flags", libc::SIOCGIFFLAGS, &mut req)?;
        // SAFETY: SIOCGIFFLAGS filled ifru_flags.
        let flags = unsafe { req.ifr_ifru.ifru_flags };
        req.ifr_ifru.ifru_flags = flags | (libc::IFF_UP | libc::IFF_PROMISC) as libc::c_short;
        ioctl("bringing it up", libc::SIOCSIFFLAGS, &mut req)
    }

    /// Reads one packet (frame, for TAP) the kernel sent into the device: `Ok(None)`
    /// when there is none now.
    pub fn read(&self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        // SAFETY: `buf` is writable for buf.len() bytes.
        let n = unsafe {
            libc::read(
                self.fd.as_raw_fd(),
                buf.as_mut_ptr() as *mut libc::c_void,
                buf.len(),
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            return match e.kind() {
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(None),
                _ => Err(e),
            };
        }
        Ok(Some(n as usize))
    }

    /// Hands the kernel one packet (frame, for TAP), as if the interface received it.
    pub fn write(&self, packet: &[u8]) -> io::Result<()> {
        // SAFETY: `packet` is readable for packet.len() bytes.
        let n = unsafe {
            libc::write(
                self.fd.as_raw_fd(),
                packet.as_ptr() as *const libc::c_void,
                packet.len(),
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

impl AsRawFd for TunDevice {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// An ifreq for interface `name` (empty: none), otherwise zeroed.
fn ifreq(name: &str) -> io::Result<libc::ifreq> {
    let bytes = name.as_bytes();
    if bytes.len() >= libc::IFNAMSIZ || bytes.contains(&0) || bytes.contains(&b'/') {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "'{}' is not an interface name (at most {} bytes)",
                name,
                libc::IFNAMSIZ - 1
            ),
        ));
    }
    // SAFETY: a zeroed ifreq is valid (an empty name, a zero union).
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, &b) in req.ifr_name.iter_mut().zip(bytes) {
        *d = b as libc::c_char;
    }
    Ok(req)
}

fn sockaddr_in(addr: Ipv4Addr) -> libc::sockaddr {
    let sin = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: 0,
        sin_addr: libc::in_addr {
            s_addr: u32::from_ne_bytes(addr.octets()),
        },
        sin_zero: [0; 8],
    };
    // SAFETY: sockaddr_in and sockaddr have the same size (16 bytes) and sockaddr has
    // no invalid bit patterns.
    unsafe { std::mem::transmute::<libc::sockaddr_in, libc::sockaddr>(sin) }
}

fn inet_socket() -> io::Result<OwnedFd> {
    // SAFETY: plain socket(2); the result is checked and owned at once.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a new descriptor owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_too_long_or_with_a_slash_are_refused_before_the_kernel_sees_them() {
        for bad in ["sixteen-bytes-xx", "a/b", "a\0b"] {
            let e = ifreq(bad).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{bad}");
        }
        assert!(ifreq("tun0").is_ok());
    }

    #[test]
    fn an_address_is_laid_out_as_a_sockaddr_in() {
        let sa = sockaddr_in(Ipv4Addr::new(192, 0, 2, 1));
        assert_eq!(sa.sa_family, libc::AF_INET as libc::sa_family_t);
        // Port (2 bytes, zero), then the address in network order.
        let data: Vec<u8> = sa.sa_data[..6].iter().map(|&c| c as u8).collect();
        assert_eq!(data, [0, 0, 192, 0, 2, 1]);
    }
}
