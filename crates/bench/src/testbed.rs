//! The namespace testbed: `gen` — `dut` — `sink` joined by veth pairs.
//!
//! ```text
//! [{P}gen] g0 198.18.0.1 ==veth== d0 198.18.0.2 [{P}dut] d1 198.18.1.2 ==veth== s0 198.18.1.1 [{P}sink]
//! ```
//!
//! Addresses are in RFC 2544's benchmarking range 198.18.0.0/15; traffic goes to
//! 198.19.0.0/16, routed gen -> dut -> sink. MACs are fixed and every neighbour is
//! permanent, so no ARP is needed on the data path. In every namespace IPv6 is off
//! (no router or neighbour solicitations on the links) and so is the kernel's IPv4
//! forwarding: the router under test forwards, the kernel of `dut` must not do it a
//! second time.
//!
//! `up` records what it made in a state file (`/run/brickroute/testbed-{P}.json`, or
//! under `$BRICKROUTE_RUN_DIR`); `down` removes exactly that: the processes still
//! running inside its namespaces, then the namespaces (which takes the veth pairs with
//! them). `up` on a prefix that is already up fails, and so does `up` when a namespace
//! of that name exists. Names cannot collide across prefixes: the suffixes `gen`,
//! `dut` and `sink` end in different letters, so `P1 + s1 == P2 + s2` only when the
//! prefixes are equal.

use serde::{Deserialize, Serialize};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

pub const DEFAULT_PREFIX: &str = "br-";

pub const G0_MAC: &str = "02:b7:00:00:00:01";
pub const D0_MAC: &str = "02:b7:00:00:00:02";
pub const D1_MAC: &str = "02:b7:00:00:01:02";
pub const S0_MAC: &str = "02:b7:00:00:01:01";
pub const G0_IP: &str = "198.18.0.1";
pub const D0_IP: &str = "198.18.0.2";
pub const D1_IP: &str = "198.18.1.2";
pub const S0_IP: &str = "198.18.1.1";
/// Where the generator's traffic goes by default.
pub const DST_NET: &str = "198.19.0.0/16";
/// Most queues per veth.
pub const MAX_QUEUES: usize = 64;

/// A testbed as recorded in its state file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Testbed {
    pub prefix: String,
    pub queues: usize,
    /// The namespaces made so far, in the order they were made.
    pub namespaces: Vec<String>,
}

impl Testbed {
    pub fn gen_ns(&self) -> String {
        format!("{}gen", self.prefix)
    }
    pub fn dut_ns(&self) -> String {
        format!("{}dut", self.prefix)
    }
    pub fn sink_ns(&self) -> String {
        format!("{}sink", self.prefix)
    }
}

/// Checks a prefix: 1 to 32 characters out of letters, digits, `-`, `_` and `.`.
pub fn validate_prefix(p: &str) -> Result<(), String> {
    if p.is_empty()
        || p.len() > 32
        || !p
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.')
    {
        return Err(format!(
            "bad testbed prefix '{}': use 1 to 32 letters, digits, '-', '_' or '.'",
            p
        ));
    }
    Ok(())
}

/// Fails with a clear reason unless the process runs as root, which making network
/// namespaces, veth pairs and raw sockets needs.
pub fn require_root() -> Result<(), String> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Err("needs root (network namespaces, veth pairs, raw sockets): run it with sudo".into());
    }
    Ok(())
}

/// The directory of the state files.
pub fn state_dir() -> PathBuf {
    std::env::var_os("BRICKROUTE_RUN_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/run/brickroute"))
}

pub fn state_path(prefix: &str) -> PathBuf {
    state_dir().join(format!("testbed-{}.json", prefix))
}

fn netns_exists(name: &str) -> bool {
    std::path::Path::new("/run/netns").join(name).exists()
}

/// Runs `ip ARGS`; on failure the error quotes the command and what `ip` said.
///
/// `ip` runs in a process group of its own, so a Ctrl-C at the terminal reaches only
/// the program building or removing the testbed, not the step it is running: that
/// step completes, and the program (`brickroute demo`) sees the signal and removes
/// what it made, where a killed step failed the build with a false error.
pub fn ip(args: &[String]) -> Result<String, String> {
    let out = Command::new("ip")
        .args(args)
        .process_group(0)
        .output()
        .map_err(|e| format!("`ip {}`: cannot run ip (iproute2): {}", args.join(" "), e))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "`ip {}` failed ({}): {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

fn words(s: &str) -> Vec<String> {
    s.split_whitespace().map(String::from).collect()
}

/// The `ip` commands that build a testbed's namespaces once they exist, in order.
pub fn plan(tb: &Testbed) -> Vec<Vec<String>> {
    let (g, d, s, q) = (tb.gen_ns(), tb.dut_ns(), tb.sink_ns(), tb.queues);
    let mut cmds = Vec::new();
    for ns in [&g, &d, &s] {
        // Quiet links: no IPv6 (no solicitations), no kernel IPv4 forwarding.
        let mut c = words(&format!("netns exec {} sh -c", ns));
        c.push(
            "echo 1 > /proc/sys/net/ipv6/conf/all/disable_ipv6 && \
             echo 1 > /proc/sys/net/ipv6/conf/default/disable_ipv6 && \
             echo 0 > /proc/sys/net/ipv4/ip_forward"
                .to_string(),
        );
        cmds.push(c);
    }
    for (a, ans, amac, b, bns, bmac) in [
        ("g0", &g, G0_MAC, "d0", &d, D0_MAC),
        ("d1", &d, D1_MAC, "s0", &s, S0_MAC),
    ] {
        cmds.push(words(&format!(
            "link add {a} netns {ans} address {amac} numtxqueues {q} numrxqueues {q} \
             type veth peer name {b} netns {bns} address {bmac} numtxqueues {q} numrxqueues {q}"
        )));
    }
    for (ns, dev) in [(&g, "g0"), (&d, "d0"), (&d, "d1"), (&s, "s0")] {
        cmds.push(words(&format!("-n {ns} link set {dev} up")));
    }
    for ns in [&g, &d, &s] {
        cmds.push(words(&format!("-n {ns} link set lo up")));
    }
    for (ns, addr, dev) in [
        (&g, G0_IP, "g0"),
        (&d, D0_IP, "d0"),
        (&d, D1_IP, "d1"),
        (&s, S0_IP, "s0"),
    ] {
        cmds.push(words(&format!("-n {ns} addr add {addr}/24 dev {dev}")));
    }
    for (ns, addr, mac, dev) in [
        (&g, D0_IP, D0_MAC, "g0"),
        (&d, G0_IP, G0_MAC, "d0"),
        (&d, S0_IP, S0_MAC, "d1"),
        (&s, D1_IP, D1_MAC, "s0"),
    ] {
        cmds.push(words(&format!(
            "-n {ns} neigh replace {addr} lladdr {mac} dev {dev} nud permanent"
        )));
    }
    cmds.push(words(&format!("-n {g} route add {DST_NET} via {D0_IP} dev g0")));
    cmds.push(words(&format!(
        "-n {g} route add 198.18.1.0/24 via {D0_IP} dev g0"
    )));
    cmds.push(words(&format!(
        "-n {s} route add 198.18.0.0/24 via {D1_IP} dev s0"
    )));
    // Used only when someone switches the kernel's forwarding on to compare with it.
    cmds.push(words(&format!("-n {d} route add {DST_NET} via {S0_IP} dev d1")));
    cmds
}

fn write_state(tb: &Testbed) -> Result<(), String> {
    let path = state_path(&tb.prefix);
    let tmp = path.with_extension("json.tmp");
    let text = serde_json::to_string_pretty(tb).expect("a Testbed serializes");
    std::fs::write(&tmp, text + "\n").map_err(|e| format!("{}: {}", tmp.display(), e))?;
    std::fs::rename(&tmp, &path).map_err(|e| format!("{}: {}", path.display(), e))
}

/// Reads the state file of `prefix`.
pub fn load(prefix: &str) -> Result<Testbed, String> {
    validate_prefix(prefix)?;
    let path = state_path(prefix);
    let text = std::fs::read_to_string(&path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            format!(
                "no testbed with prefix '{}' is up (no state file {})",
                prefix,
                path.display()
            )
        } else {
            format!("{}: {}", path.display(), e)
        }
    })?;
    let tb: Testbed = serde_json::from_str(&text)
        .map_err(|e| format!("{}: not a testbed state file: {}", path.display(), e))?;
    if tb.prefix != prefix {
        return Err(format!(
            "{}: records prefix '{}', not '{}'",
            path.display(),
            tb.prefix,
            prefix
        ));
    }
    Ok(tb)
}

/// Builds the testbed with `queues` queues per veth. If a step fails, whatever was made
/// is removed again and the error says which command failed and why.
pub fn up(prefix: &str, queues: usize) -> Result<Testbed, String> {
    validate_prefix(prefix)?;
    if queues == 0 || queues > MAX_QUEUES {
        return Err(format!("--queues must be 1..{}", MAX_QUEUES));
    }
    let dir = state_dir();
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {}", dir.display(), e))?;
    let path = state_path(prefix);
    // Creating the state file exclusively is the lock: two `up`s cannot both win.
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&path)
    {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            return Err(format!(
                "a testbed with prefix '{}' is already up (state file {}); \
                 take it down first: brickroute testbed down --prefix {}",
                prefix,
                path.display(),
                prefix
            ))
        }
        Err(e) => return Err(format!("{}: {}", path.display(), e)),
    }
    let mut tb = Testbed {
        prefix: prefix.to_string(),
        queues,
        namespaces: Vec::new(),
    };
    let result = build(&mut tb);
    if let Err(e) = result {
        let cleanup = remove(&tb).err();
        let _ = std::fs::remove_file(&path);
        return Err(match cleanup {
            None => e,
            Some(c) => format!("{}\n(and cleaning up failed too: {})", e, c),
        });
    }
    Ok(tb)
}

fn build(tb: &mut Testbed) -> Result<(), String> {
    write_state(tb)?;
    for ns in [tb.gen_ns(), tb.dut_ns(), tb.sink_ns()] {
        if netns_exists(&ns) {
            return Err(format!(
                "network namespace '{}' already exists and is not this testbed's: \
                 choose another --prefix",
                ns
            ));
        }
        ip(&["netns".into(), "add".into(), ns.clone()])?;
        tb.namespaces.push(ns);
        write_state(tb)?;
    }
    for cmd in plan(tb) {
        ip(&cmd)?;
    }
    Ok(())
}

/// Ends the processes in namespace `ns` (SIGTERM, then SIGKILL after 3 s). Returns
/// their ids.
fn end_processes(ns: &str) -> Result<Vec<i32>, String> {
    let out = ip(&["netns".into(), "pids".into(), ns.to_string()])?;
    let me = std::process::id() as i32;
    let pids: Vec<i32> = out
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .filter(|&p| p != me)
        .collect();
    for &p in &pids {
        // SAFETY: kill(2) on a process id; a process that has gone gives ESRCH.
        unsafe { libc::kill(p, libc::SIGTERM) };
    }
    let deadline = Instant::now() + Duration::from_secs(3);
    // SAFETY: signal 0 only checks that the process exists.
    let alive = |p: i32| unsafe { libc::kill(p, 0) } == 0;
    while pids.iter().any(|&p| alive(p)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    for &p in pids.iter().filter(|&&p| alive(p)) {
        // SAFETY: as above.
        unsafe { libc::kill(p, libc::SIGKILL) };
    }
    Ok(pids)
}

/// Removes the namespaces of `tb` (newest first) and the processes in them.
fn remove(tb: &Testbed) -> Result<(), String> {
    let mut errors = Vec::new();
    for ns in tb.namespaces.iter().rev() {
        if !netns_exists(ns) {
            continue;
        }
        if let Err(e) = end_processes(ns) {
            errors.push(e);
        }
        if let Err(e) = ip(&["netns".into(), "del".into(), ns.clone()]) {
            errors.push(e);
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors.join("\n"))
    }
}

/// Takes down the testbed of `prefix`: exactly what its state file records. Returns
/// the namespaces removed.
pub fn down(prefix: &str) -> Result<Testbed, String> {
    let tb = load(prefix)?;
    remove(&tb)?;
    let path = state_path(prefix);
    std::fs::remove_file(&path).map_err(|e| format!("{}: {}", path.display(), e))?;
    Ok(tb)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tb(prefix: &str, queues: usize) -> Testbed {
        Testbed {
            prefix: prefix.into(),
            queues,
            namespaces: vec![],
        }
    }

    #[test]
    fn prefixes() {
        for ok in ["br-", "a", "x.y_z-1", "brt12345-"] {
            assert!(validate_prefix(ok).is_ok(), "{}", ok);
        }
        for bad in ["", "a/b", "a b", "ä", &"x".repeat(33)] {
            let e = validate_prefix(bad).unwrap_err();
            assert!(e.contains("bad testbed prefix"), "{}", e);
        }
        let t = tb("br-", 1);
        assert_eq!(
            (t.gen_ns(), t.dut_ns(), t.sink_ns()),
            ("br-gen".into(), "br-dut".into(), "br-sink".into())
        );
    }

    #[test]
    fn plan_creates_veths_with_queues_in_their_namespaces() {
        let cmds: Vec<String> = plan(&tb("t-", 4)).iter().map(|c| c.join(" ")).collect();
        assert!(cmds.contains(
            &"link add g0 netns t-gen address 02:b7:00:00:00:01 numtxqueues 4 numrxqueues 4 \
              type veth peer name d0 netns t-dut address 02:b7:00:00:00:02 numtxqueues 4 numrxqueues 4"
                .to_string()
        ));
        assert!(cmds.contains(
            &"link add d1 netns t-dut address 02:b7:00:00:01:02 numtxqueues 4 numrxqueues 4 \
              type veth peer name s0 netns t-sink address 02:b7:00:00:01:01 numtxqueues 4 numrxqueues 4"
                .to_string()
        ));
        for want in [
            "-n t-gen addr add 198.18.0.1/24 dev g0",
            "-n t-dut addr add 198.18.0.2/24 dev d0",
            "-n t-dut addr add 198.18.1.2/24 dev d1",
            "-n t-sink addr add 198.18.1.1/24 dev s0",
            "-n t-gen neigh replace 198.18.0.2 lladdr 02:b7:00:00:00:02 dev g0 nud permanent",
            "-n t-dut neigh replace 198.18.0.1 lladdr 02:b7:00:00:00:01 dev d0 nud permanent",
            "-n t-dut neigh replace 198.18.1.1 lladdr 02:b7:00:00:01:01 dev d1 nud permanent",
            "-n t-sink neigh replace 198.18.1.2 lladdr 02:b7:00:00:01:02 dev s0 nud permanent",
            "-n t-gen route add 198.19.0.0/16 via 198.18.0.2 dev g0",
            "-n t-gen link set lo up",
            "-n t-dut link set lo up",
            "-n t-sink link set lo up",
        ] {
            assert!(cmds.contains(&want.to_string()), "missing: {}", want);
        }
        // Links are up before addresses are added to them.
        let pos = |s: &str| cmds.iter().position(|c| c == s).unwrap();
        assert!(pos("-n t-gen link set g0 up") < pos("-n t-gen addr add 198.18.0.1/24 dev g0"));
    }

    #[test]
    fn state_round_trip_and_errors() {
        let dir = tempfile::tempdir().unwrap();
        // The only test that sets the variable: others do not read it.
        std::env::set_var("BRICKROUTE_RUN_DIR", dir.path());
        let e = load("zz-").unwrap_err();
        assert!(e.contains("no testbed with prefix 'zz-' is up"), "{}", e);
        let t = Testbed {
            prefix: "zz-".into(),
            queues: 2,
            namespaces: vec!["zz-gen".into()],
        };
        write_state(&t).unwrap();
        assert_eq!(load("zz-").unwrap(), t);
        std::fs::write(state_path("yy-"), "{").unwrap();
        assert!(load("yy-").unwrap_err().contains("not a testbed state file"));
        // up refuses a prefix whose state file exists, before touching anything.
        let e = up("zz-", 1).unwrap_err();
        assert!(e.contains("already up"), "{}", e);
        assert!(up("zz-", 0).unwrap_err().contains("--queues"));
        assert!(up("a/b", 1).unwrap_err().contains("bad testbed prefix"));
    }
}
