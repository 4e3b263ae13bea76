//! Keeping the kernel out of the forwarding path of AF_PACKET interfaces.
//!
//! AF_PACKET reads a *copy* of every received frame; the frame itself goes on into the
//! kernel's stack. Where the kernel forwards IPv4 (`net.ipv4.conf.DEV.forwarding = 1`,
//! which `net.ipv4.ip_forward = 1` sets on every interface), it would forward each frame
//! arriving on DEV as well as brickroute: every packet leaves twice. IPv4 forwarding is
//! decided by the flag of the interface a packet *arrives* on, and with it at 0 the kernel
//! drops such packets without an ICMP error (it still delivers what is addressed to the
//! host, and answers ARP). So while brickroute reads an interface with AF_PACKET it sets
//! that flag to 0 ([`KernelForwardingOff::take`]) and puts the original value back when
//! it is done (dropping the [`KernelForwardingOff`]).
//!
//! A run killed before it could restore the flag (SIGKILL, a crash) must not lose the
//! original value. Before changing the flag, brickroute writes a record of the change to
//! `/run/brickroute/kernel-forwarding/netns-cookie-COOKIE.DEV.ipv4` ([`record_dir`];
//! COOKIE is the network namespace's cookie, unique until the machine reboots, and
//! `/run` is emptied at boot, as the flags are reset) and holds an exclusive `flock` on
//! it while it runs. The next run that opens DEV in that namespace finds the
//! record unlocked, takes its original value as the original, and removes it when it
//! restores. A record is believed only while it still describes the interface: same
//! namespace, same interface index (an interface deleted and made again is a new one),
//! and the flag still at the value brickroute set (if someone changed it since, their
//! value stands). A record locked by a live process means another brickroute holds the
//! flag off; this run then leaves the flag alone.
//!
//! IPv6 has no such per-interface switch: `net.ipv6.conf.DEV.forwarding` only chooses
//! host or router behaviour (router advertisements, redirects, the router flag in
//! neighbour advertisements), and the kernel forwards IPv6 from any interface whenever
//! `net.ipv6.conf.all.forwarding` is 1. The one per-interface setting that stops it,
//! `disable_ipv6`, also removes the interface's IPv6 addresses and neighbour discovery,
//! so brickroute does not touch it: [`ipv6_forwarding_warning`] says what to do instead.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Where the records of changed flags live: `$BRICKROUTE_RUN_DIR/kernel-forwarding`,
/// `/run/brickroute/kernel-forwarding` by default (the testbed's records sit beside).
pub fn record_dir() -> PathBuf {
    std::env::var_os("BRICKROUTE_RUN_DIR")
        .map_or_else(|| PathBuf::from("/run/brickroute"), PathBuf::from)
        .join("kernel-forwarding")
}

/// The value brickroute sets the flag to while it runs.
const OFF: &str = "0";

/// Flags this process is turning off or holds off, not yet restored.
static HELD_OFF: AtomicUsize = AtomicUsize::new(0);

/// How many interfaces' flags this process has turned off (or is writing the record
/// of) and not yet restored. One atomic load, so a signal handler may call it:
/// `brickroute run` ends at once on a signal during its configuration only while this
/// is 0, since then there is nothing an orderly stop would restore.
pub fn held_off() -> usize {
    HELD_OFF.load(Ordering::SeqCst)
}

/// The first line of a record file.
const RECORD_HEADER: &str = "brickroute kernel-forwarding record 1";

/// What brickroute does with the kernel's forwarding on the interfaces it opens with
/// AF_PACKET.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum KernelForwarding {
    /// Turn IPv4 forwarding off on each such interface while the router runs.
    #[default]
    TurnOff,
    /// Leave it as it is (and warn where it is on).
    Keep,
}

/// The record of one changed flag, as kept in its file: `KEY VALUE` lines after the
/// header line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// The interface's name.
    pub interface: String,
    /// Its index when the flag was changed.
    pub ifindex: u32,
    /// The network namespace: `cookie N` (`SO_NETNS_COOKIE`) or `inode N` where the
    /// kernel has no cookies.
    pub netns: String,
    /// The flag's value before brickroute changed it.
    pub original: String,
    /// The value brickroute set.
    pub set: String,
    /// The process that changed it.
    pub pid: u32,
}

impl Record {
    pub fn to_text(&self) -> String {
        format!(
            "{}\ninterface {}\nifindex {}\nnetns {}\noriginal {}\nset {}\npid {}\n",
            RECORD_HEADER, self.interface, self.ifindex, self.netns, self.original, self.set, self.pid
        )
    }

    /// Parses a record file's text; the error says what is wrong with it.
    pub fn parse(text: &str) -> Result<Record, String> {
        let mut lines = text.lines().enumerate();
        match lines.next() {
            Some((_, RECORD_HEADER)) => {}
            Some((_, l)) => return Err(format!("line 1: expected '{}', found '{}'", RECORD_HEADER, l)),
            None => return Err("empty".to_string()),
        }
        let mut fields: [Option<String>; 6] = Default::default();
        const KEYS: [&str; 6] = ["interface", "ifindex", "netns", "original", "set", "pid"];
        for (i, line) in lines {
            if line.is_empty() {
                continue;
            }
            let (key, value) = line.split_once(' ').unwrap_or((line, ""));
            let slot = KEYS
                .iter()
                .position(|k| *k == key)
                .ok_or_else(|| format!("line {}: unknown field '{}'", i + 1, key))?;
            if value.is_empty() {
                return Err(format!("line {}: field '{}' has no value", i + 1, key));
            }
            if fields[slot].replace(value.to_string()).is_some() {
                return Err(format!("line {}: field '{}' given twice", i + 1, key));
            }
        }
        let mut take = |k: usize| {
            fields[k]
                .take()
                .ok_or_else(|| format!("missing field '{}'", KEYS[k]))
        };
        let number = |k: usize, v: String| {
            v.parse::<u32>()
                .map_err(|_| format!("field '{}': '{}' is not a number", KEYS[k], v))
        };
        let sysctl_value = |k: usize, v: String| {
            if v.bytes().all(|b| b.is_ascii_digit()) {
                Ok(v)
            } else {
                Err(format!("field '{}': '{}' is not a flag's value", KEYS[k], v))
            }
        };
        let interface = take(0)?;
        let ifindex = number(1, take(1)?)?;
        let netns = take(2)?;
        let original = sysctl_value(3, take(3)?)?;
        let set = sysctl_value(4, take(4)?)?;
        let pid = number(5, take(5)?)?;
        Ok(Record {
            interface,
            ifindex,
            netns,
            original,
            set,
            pid,
        })
    }
}

/// `/proc/sys/net/ipv4/conf/DEV/forwarding`.
fn ipv4_flag_path(interface: &str) -> PathBuf {
    PathBuf::from(format!("/proc/sys/net/ipv4/conf/{}/forwarding", interface))
}

/// The sysctl name users know: `net.ipv4.conf.DEV.forwarding`.
fn ipv4_flag_name(interface: &str) -> String {
    format!("net.ipv4.conf.{}.forwarding", interface)
}

/// The record file of `interface` in namespace `netns` (`cookie N` / `inode N`).
fn record_path(dir: &Path, netns: &str, interface: &str) -> PathBuf {
    dir.join(format!("netns-{}.{}.ipv4", netns.replace(' ', "-"), interface))
}

/// Why the kernel's IPv4 forwarding could not be turned off on an interface.
#[derive(Debug)]
pub struct ForwardingError {
    pub interface: String,
    /// What failed, in a few words ("write /proc/sys/...").
    pub step: String,
    pub source: std::io::Error,
}

impl std::fmt::Display for ForwardingError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "cannot turn the kernel's IPv4 forwarding off on {0} ({1}: {2}); brickroute turns \
             it off because AF_PACKET leaves every frame to the kernel too: turn it off \
             yourself (sysctl -w {3}=0), or keep it with --keep-kernel-forwarding",
            self.interface,
            self.step,
            self.source,
            ipv4_flag_name(&self.interface)
        )
    }
}

impl std::error::Error for ForwardingError {}

/// The kernel's IPv4 forwarding held off on one interface; dropping it restores the
/// original value (unless someone changed the flag meanwhile) and removes the record.
#[derive(Debug)]
pub struct KernelForwardingOff {
    interface: String,
    original: String,
    record_path: PathBuf,
    /// The record, open and `flock`ed for as long as the flag is held off.
    record: Option<File>,
}

/// What [`KernelForwardingOff::take`] did.
#[derive(Debug)]
pub struct Taken {
    /// Held while the flag is off because of this run.
    pub guard: Option<KernelForwardingOff>,
    /// The line to tell the user, if anything changed or is held by another run.
    pub notice: Option<String>,
}

impl Taken {
    /// Nothing changed and nothing to tell.
    const NOTHING: Taken = Taken {
        guard: None,
        notice: None,
    };
}

impl KernelForwardingOff {
    /// The interface whose flag this holds off.
    pub fn interface(&self) -> &str {
        &self.interface
    }

    /// Turns the kernel's IPv4 forwarding off on `interface` of the calling thread's
    /// network namespace, keeping the record in `dir` (normally [`record_dir`]).
    /// Nothing is done where the flag is already 0 (and no record says otherwise), or
    /// where the interface has no IPv4 configuration.
    pub fn take(interface: &str, dir: &Path) -> Result<Taken, ForwardingError> {
        let err = |step: String, source: std::io::Error| ForwardingError {
            interface: interface.to_string(),
            step,
            source,
        };
        let flag_path = ipv4_flag_path(interface);
        let current = match std::fs::read_to_string(&flag_path) {
            Ok(s) => s.trim().to_string(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Taken::NOTHING),
            Err(e) => return Err(err(format!("read {}", flag_path.display()), e)),
        };
        let netns = netns_id().map_err(|e| err("identify the network namespace".into(), e))?;
        let ifindex = ifindex(interface).map_err(|e| err("find the interface".into(), e))?;
        let path = record_path(dir, &netns, interface);
        if current == OFF && !path.exists() {
            // Off, and not by a killed run: nothing to do (and nothing that needs the
            // privileges writing a record would).
            return Ok(Taken::NOTHING);
        }
        std::fs::create_dir_all(dir).map_err(|e| err(format!("create {}", dir.display()), e))?;
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            // A record left by a killed run is read before it is replaced.
            .truncate(false)
            .mode(0o644)
            .open(&path)
            .map_err(|e| err(format!("open {}", path.display()), e))?;
        // SAFETY: flock on a descriptor this function owns; no memory is passed.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EWOULDBLOCK) {
                return Err(err(format!("lock {}", path.display()), e));
            }
            // Another live process holds the record: its run turned the flag off and
            // will restore it.
            let mut text = String::new();
            let _ = file.read_to_string(&mut text);
            let holder = Record::parse(&text).map(|r| format!("pid {}", r.pid));
            return Ok(Taken {
                guard: None,
                notice: Some(held_by_another_notice(
                    interface,
                    &holder.unwrap_or_else(|_| "record being written".to_string()),
                )),
            });
        }
        let mut text = String::new();
        file.read_to_string(&mut text)
            .map_err(|e| err(format!("read {}", path.display()), e))?;
        let left_behind = Record::parse(&text).ok().filter(|r| {
            r.interface == interface && r.netns == netns && r.ifindex == ifindex && r.set == current
        });
        let original = left_behind
            .as_ref()
            .map_or(current.clone(), |r| r.original.clone());
        if original == OFF {
            // Nothing to turn off and nothing to restore later.
            let _ = std::fs::remove_file(&path);
            return Ok(Taken::NOTHING);
        }
        let record = Record {
            interface: interface.to_string(),
            ifindex,
            netns,
            original: original.clone(),
            set: OFF.to_string(),
            pid: std::process::id(),
        };
        // The record first: a run killed between the two writes leaves a record whose
        // `set` does not match the flag, which the next run rightly ignores.
        let write_record = |file: &mut File| -> std::io::Result<()> {
            file.set_len(0)?;
            file.rewind()?;
            file.write_all(record.to_text().as_bytes())?;
            file.sync_data()
        };
        // Counted from before the first write, so a signal from here on waits for the
        // restore instead of ending the process between the record and the flag.
        HELD_OFF.fetch_add(1, Ordering::SeqCst);
        if let Err(e) = write_record(&mut file) {
            let _ = std::fs::remove_file(&path);
            HELD_OFF.fetch_sub(1, Ordering::SeqCst);
            return Err(err(format!("write {}", path.display()), e));
        }
        if current != OFF {
            if let Err(e) = std::fs::write(&flag_path, format!("{}\n", OFF)) {
                let _ = std::fs::remove_file(&path);
                HELD_OFF.fetch_sub(1, Ordering::SeqCst);
                return Err(err(format!("write {}", flag_path.display()), e));
            }
        }
        let notice = match &left_behind {
            None => format!(
                "brickroute: {0}: turned the kernel's IPv4 forwarding off while brickroute runs \
                 ({1}: {2} -> 0; AF_PACKET leaves every frame to the kernel too); restored on exit \
                 (--keep-kernel-forwarding keeps it)",
                interface,
                ipv4_flag_name(interface),
                original
            ),
            Some(r) => format!(
                "brickroute: {0}: the kernel's IPv4 forwarding is still off from a brickroute run \
                 that did not exit cleanly (pid {1}); kept off while brickroute runs, {2} restored \
                 to {3} on exit",
                interface,
                r.pid,
                ipv4_flag_name(interface),
                original
            ),
        };
        Ok(Taken {
            guard: Some(KernelForwardingOff {
                interface: interface.to_string(),
                original,
                record_path: path,
                record: Some(file),
            }),
            notice: Some(notice),
        })
    }

    /// Puts the original value back (done on drop). Returns what to tell the user when
    /// it could not, or when someone else changed the flag meanwhile.
    fn restore(&mut self) -> Option<String> {
        let file = self.record.take()?;
        let message = self.restore_flag(file);
        HELD_OFF.fetch_sub(1, Ordering::SeqCst);
        message
    }

    /// [`KernelForwardingOff::restore`] with the record `file` still locked; removes the
    /// record when the flag is back (or no longer this run's to restore).
    fn restore_flag(&self, file: File) -> Option<String> {
        let flag_path = ipv4_flag_path(&self.interface);
        let name = ipv4_flag_name(&self.interface);
        let message = match std::fs::read_to_string(&flag_path) {
            // The interface is gone, and its flag with it.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => {
                return Some(format!(
                "brickroute: {}: cannot read {} to restore it to {}: {}; the next run restores it from {}",
                self.interface,
                name,
                self.original,
                e,
                self.record_path.display()
            ))
            }
            Ok(now) if now.trim() != OFF => Some(format!(
                "brickroute: {}: {} was changed to {} while brickroute ran; left so (it was {})",
                self.interface,
                name,
                now.trim(),
                self.original
            )),
            Ok(_) => match std::fs::write(&flag_path, format!("{}\n", self.original)) {
                Ok(()) => None,
                Err(e) => {
                    return Some(format!(
                        "brickroute: {}: cannot restore {} to {}: {}; the next run restores it from {}",
                        self.interface,
                        name,
                        self.original,
                        e,
                        self.record_path.display()
                    ))
                }
            },
        };
        // Removed while still locked, so no other run takes it for a crashed one's.
        let _ = std::fs::remove_file(&self.record_path);
        drop(file);
        message
    }
}

impl Drop for KernelForwardingOff {
    fn drop(&mut self) {
        if let Some(m) = self.restore() {
            // (Not eprintln!: a panic here would skip the other interfaces' restores.)
            graph::warn!("{}", m);
        }
    }
}

/// What a run that finds the flag of `interface` held off by another brickroute
/// (`holder`: "pid N") tells the user: the flag is that run's to restore, and it does
/// so when it exits, whether or not this run still reads the interface.
fn held_by_another_notice(interface: &str, holder: &str) -> String {
    format!(
        "brickroute: {0}: the kernel's IPv4 forwarding is held off by another brickroute ({1}), \
         which turns it back on when it exits: from then on, while this router still reads \
         {0}, the kernel forwards each frame arriving there too (each leaves twice)",
        interface, holder
    )
}

/// The calling thread's network namespace: `cookie N`, or `inode N` on kernels without
/// `SO_NETNS_COOKIE` (before 5.14; inode numbers can be reused once a namespace is
/// gone, the cookie cannot).
fn netns_id() -> std::io::Result<String> {
    // SAFETY: a plain socket call; the descriptor is owned by `OwnedFd` at once.
    let fd = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fd` is a fresh descriptor nothing else owns.
    let fd = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    let mut cookie: u64 = 0;
    let mut len = std::mem::size_of::<u64>() as libc::socklen_t;
    // SAFETY: `cookie` and `len` are valid for the size given.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_NETNS_COOKIE,
            &mut cookie as *mut u64 as *mut libc::c_void,
            &mut len,
        )
    };
    if rc == 0 {
        return Ok(format!("cookie {}", cookie));
    }
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata("/proc/thread-self/ns/net")?;
    Ok(format!("inode {}", m.ino()))
}

fn ifindex(interface: &str) -> std::io::Result<u32> {
    let name = std::ffi::CString::new(interface)
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "NUL in the name"))?;
    // SAFETY: `name` is a NUL-terminated string that outlives the call.
    let i = unsafe { libc::if_nametoindex(name.as_ptr()) };
    if i == 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(i)
    }
}

/// The warning for an AF_PACKET interface on which the kernel still forwards IPv4
/// (`forwarding_flag`: the contents of `/proc/sys/net/ipv4/conf/DEV/forwarding`, read
/// after brickroute had its say): with `--keep-kernel-forwarding`, or where the flag is
/// held by nobody.
pub fn ipv4_forwarding_warning(interface: &str, forwarding_flag: Option<&str>) -> Option<String> {
    (forwarding_flag?.trim() == "1").then(|| {
        format!(
            "brickroute: warning: the kernel forwards IPv4 arriving on {0} too \
             ({1} = 1), and AF_PACKET leaves every frame to it: each frame is forwarded \
             twice; without --keep-kernel-forwarding brickroute turns it off while it runs, \
             or use METHOD XDP",
            interface,
            ipv4_flag_name(interface)
        )
    })
}

/// The warning for an AF_PACKET interface on which the kernel forwards IPv6
/// (`all_forwarding`: `/proc/sys/net/ipv6/conf/all/forwarding`; `disable_ipv6`:
/// `/proc/sys/net/ipv6/conf/DEV/disable_ipv6`). Linux decides IPv6 forwarding for the
/// whole namespace, so brickroute cannot turn it off for one interface.
pub fn ipv6_forwarding_warning(
    interface: &str,
    all_forwarding: Option<&str>,
    disable_ipv6: Option<&str>,
) -> Option<String> {
    let forwards = all_forwarding?.trim() == "1";
    let ipv6_on = disable_ipv6?.trim() == "0";
    (forwards && ipv6_on).then(|| {
        format!(
            "brickroute: warning: the kernel forwards IPv6 arriving on {0} too \
             (net.ipv6.conf.all.forwarding = 1), and AF_PACKET leaves every frame to it: \
             each IPv6 frame is forwarded twice; Linux has no per-interface switch for IPv6 \
             forwarding: turn it off (sysctl -w net.ipv6.conf.all.forwarding=0), or drop IPv6 \
             arriving on {0} in netfilter's forward hook, or use METHOD XDP",
            interface
        )
    })
}

/// Both warnings for `interface`, from the current namespace's flags.
pub fn forwarding_warnings(interface: &str) -> Vec<String> {
    let read = |p: String| std::fs::read_to_string(p).ok();
    let v4 = read(format!("/proc/sys/net/ipv4/conf/{}/forwarding", interface));
    let v6_all = read("/proc/sys/net/ipv6/conf/all/forwarding".to_string());
    let v6_off = read(format!("/proc/sys/net/ipv6/conf/{}/disable_ipv6", interface));
    ipv4_forwarding_warning(interface, v4.as_deref())
        .into_iter()
        .chain(ipv6_forwarding_warning(
            interface,
            v6_all.as_deref(),
            v6_off.as_deref(),
        ))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Record {
        Record {
            interface: "d0".to_string(),
            ifindex: 7,
            netns: "cookie 4099".to_string(),
            original: "1".to_string(),
            set: "0".to_string(),
            pid: 4321,
        }
    }

    #[test]
    fn records_read_back_what_was_written() {
        let text = sample().to_text();
        assert_eq!(
            text,
            "brickroute kernel-forwarding record 1\ninterface d0\nifindex 7\nnetns cookie 4099\n\
             original 1\nset 0\npid 4321\n"
        );
        assert_eq!(Record::parse(&text), Ok(sample()));
        // Field order does not matter; blank lines are skipped.
        let shuffled = "brickroute kernel-forwarding record 1\npid 4321\n\nset 0\noriginal 1\n\
                        netns cookie 4099\nifindex 7\ninterface d0\n";
        assert_eq!(Record::parse(shuffled), Ok(sample()));
    }

    #[test]
    fn bad_records_say_what_is_wrong() {
        let cases: [(&str, &str); 9] = [
            ("", "empty"),
            (
                "forwarding 1\n",
                "line 1: expected 'brickroute kernel-forwarding record 1', found 'forwarding 1'",
            ),
            (
                "brickroute kernel-forwarding record 1\ninterface d0\n",
                "missing field 'ifindex'",
            ),
            (
                "brickroute kernel-forwarding record 1\ncolour blue\n",
                "line 2: unknown field 'colour'",
            ),
            (
                "brickroute kernel-forwarding record 1\ninterface d0\ninterface d1\n",
                "line 3: field 'interface' given twice",
            ),
            (
                "brickroute kernel-forwarding record 1\ninterface\n",
                "line 2: field 'interface' has no value",
            ),
            (
                "brickroute kernel-forwarding record 1\ninterface d0\nifindex seven\nnetns cookie 1\noriginal 1\nset 0\npid 1\n",
                "field 'ifindex': 'seven' is not a number",
            ),
            (
                "brickroute kernel-forwarding record 1\ninterface d0\nifindex 7\nnetns cookie 1\noriginal yes\nset 0\npid 1\n",
                "field 'original': 'yes' is not a flag's value",
            ),
            (
                "brickroute kernel-forwarding record 1\ninterface d0\nifindex 7\nnetns cookie 1\noriginal 1\nset 0\n",
                "missing field 'pid'",
            ),
        ];
        for (text, want) in cases {
            assert_eq!(Record::parse(text), Err(want.to_string()), "{:?}", text);
        }
    }

    #[test]
    fn record_files_are_named_by_namespace_and_interface() {
        assert_eq!(
            record_path(
                Path::new("/run/brickroute/kernel-forwarding"),
                "cookie 4099",
                "d0"
            ),
            PathBuf::from("/run/brickroute/kernel-forwarding/netns-cookie-4099.d0.ipv4")
        );
    }

    #[test]
    fn errors_name_the_interface_the_step_and_the_ways_out() {
        let e = ForwardingError {
            interface: "d0".to_string(),
            step: "write /proc/sys/net/ipv4/conf/d0/forwarding".to_string(),
            source: std::io::Error::from_raw_os_error(libc::EACCES),
        };
        assert_eq!(
            e.to_string(),
            format!(
                "cannot turn the kernel's IPv4 forwarding off on d0 (write /proc/sys/net/ipv4/conf/d0/forwarding: {}); \
                 brickroute turns it off because AF_PACKET leaves every frame to the kernel too: \
                 turn it off yourself (sysctl -w net.ipv4.conf.d0.forwarding=0), or keep it with --keep-kernel-forwarding",
                std::io::Error::from_raw_os_error(libc::EACCES)
            )
        );
    }

    #[test]
    fn warnings_only_where_the_kernel_forwards() {
        let w = ipv4_forwarding_warning("d0", Some("1\n")).expect("a warning");
        assert!(
            w.starts_with("brickroute: warning: the kernel forwards IPv4 arriving on d0 too (net.ipv4.conf.d0.forwarding = 1)"),
            "{w}"
        );
        assert_eq!(ipv4_forwarding_warning("d0", Some("0\n")), None);
        // No such file (no IPv4 on the interface): nothing to say.
        assert_eq!(ipv4_forwarding_warning("d0", None), None);

        let w = ipv6_forwarding_warning("d0", Some("1\n"), Some("0\n")).expect("a warning");
        assert!(
            w.starts_with("brickroute: warning: the kernel forwards IPv6 arriving on d0 too"),
            "{w}"
        );
        assert!(w.contains("sysctl -w net.ipv6.conf.all.forwarding=0"), "{w}");
        // IPv6 off on the interface, or not forwarded, or no IPv6 at all: no warning.
        assert_eq!(ipv6_forwarding_warning("d0", Some("1\n"), Some("1\n")), None);
        assert_eq!(ipv6_forwarding_warning("d0", Some("0\n"), Some("0\n")), None);
        assert_eq!(ipv6_forwarding_warning("d0", None, None), None);
    }
}
