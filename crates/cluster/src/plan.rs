//! The topology planner: how many servers, joined how, make a router of N external
//! ports of R Gbps out of servers of a given kind.
//!
//! The model follows RouteBricks' reasoning (SOSP'09 §3): Valiant load balancing puts
//! at most 2R/S on each internal link of a full mesh of S servers and asks each server
//! to process up to 3R, and when a server runs out of NIC ports for a full mesh, the
//! servers are joined by a butterfly of servers instead. The formulas and numbers below
//! are ours, not the paper's figure.
//!
//! # Inputs
//!
//! - N external ports of rate R (Gbps).
//! - A server processes C Gbps of packets, holds P NIC ports in all and each NIC port
//!   runs at L Gbps. An external port takes one NIC port, so R must not exceed L.
//! - The scheme sets the processing a server spends for each of its external ports:
//!   classic VLB needs 3R in the worst case (the server is input, intermediate and
//!   output server for that much traffic). Direct VLB needs 2R when the traffic matrix
//!   is uniform, but its worst case is still 3R: a plan for `Direct` holds only for
//!   uniform traffic.
//!
//! # Full mesh
//!
//! S servers, each with at most e = ceil(N/S) external ports. A server must process
//! factor·e·R ≤ C (factor 3 for VLB, 2 for Direct VLB). Between an ordered pair of
//! servers VLB sends at most 2eR/S (eR/S in phase 1 and as much in phase 2), so each of
//! the S - 1 neighbours takes m = ceil(2eR/(S·L)) NIC ports (at least 1), and a server
//! needs e + (S - 1)·m ≤ P NIC ports. A link is a pair of NIC ports, full duplex, so
//! the mesh has S(S - 1)/2 · m links. One server (S = 1) is a mesh too: it holds all N
//! ports and needs no interconnect. The planner tries every S from the least the
//! processing bound allows upwards and takes the first that fits.
//!
//! # k-ary n-fly
//!
//! S_e = ceil(N/e) edge servers (S_e ≥ 2), each with at most e external ports and the
//! three VLB roles as in the mesh (factor·e·R ≤ C). Each edge server has one uplink
//! bundle of capacity 2eR: VLB sends up to eR of phase-1 and eR of phase-2 traffic out
//! of a server and receives as much. The bundle takes u = ceil(2eR/L) NIC ports, so an
//! edge server needs e + u ≤ P. The edge servers are joined by a k-ary n-fly of
//! switching servers: n = ceil(log_k S_e) stages of ceil(S_e/k) servers, each taking k
//! bundles in and passing k bundles on. A switching server therefore needs 2k·u ≤ P NIC
//! ports and processes k·2eR ≤ C, once for each packet (each packet crosses a stage
//! once). k is the largest both bounds allow, but no more than S_e: a larger k never
//! adds stages or servers a stage. If neither bound allows k = 2 the n-fly cannot be
//! built with that e. The n-fly has S_e + n·ceil(S_e/k) servers, and the planner tries
//! every e the processing bound allows and keeps the fewest servers (the larger e on
//! a tie). Its links are the edge servers' bundles into the first stage and each
//! stage's k bundles a server into the next: u·(S_e + (n - 1)·k·ceil(S_e/k)).
//!
//! # Assumptions
//!
//! - Every server is alike: the same C, P and L whatever role it has.
//! - The bounds are worst cases and do not shrink for small meshes: a server of a mesh
//!   of S counts 3R (or 2R) a port even though VLB keeps some traffic local, and a
//!   single server counts it too, though it processes each packet once. So no plan
//!   depends on how the traffic happens to fall.
//! - When N is not a multiple of the servers, some servers have fewer ports; every
//!   server is sized for the largest share e.
//! - Edge servers of an n-fly send into the first stage and receive from the last on
//!   their one bundle; a switching server spends separate NIC ports on the bundles it
//!   takes in and the bundles it passes on.
//! - Nothing is kept for control traffic, bursts or failures beyond what C holds back:
//!   the headroom is the gap between C and what the plan needs.
//! - Rates are compared with a relative tolerance of 1e-9, so that 3 × 10 Gbps fits in
//!   30 Gbps despite floating-point rounding.

use crate::vlb::Scheme;

/// The most external ports one request may ask for: enough for the thousands of
/// ports the planner is for, small enough that every search stays quick.
pub const MAX_PORTS: u32 = 1 << 20;

/// Relative tolerance when a need is compared with a capacity.
const TOLERANCE: f64 = 1e-9;

/// The kind of server the cluster is built of.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Server {
    /// Packets the server can process, in Gbps (C).
    pub capacity_gbps: f64,
    /// NIC ports the server holds in all, external and internal (P).
    pub nic_ports: u32,
    /// The speed of each NIC port, in Gbps (L).
    pub link_gbps: f64,
}

/// What is to be planned.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Request {
    /// External ports (N).
    pub ports: u32,
    /// The rate of each external port, in Gbps (R).
    pub rate_gbps: f64,
    pub server: Server,
    pub scheme: Scheme,
}

impl Request {
    /// The processing a server needs for each of its external ports, in multiples of R:
    /// 3 for VLB's worst case, 2 for Direct VLB under uniform traffic.
    pub fn processing_factor(&self) -> u32 {
        match self.scheme {
            Scheme::Vlb => 3,
            Scheme::Direct => 2,
        }
    }

    /// The reason the request cannot be planned at all, if any.
    pub fn check(&self) -> Result<(), String> {
        if self.ports == 0 || self.ports > MAX_PORTS {
            return Err(format!(
                "a router has 1 to {} external ports, not {}",
                MAX_PORTS, self.ports
            ));
        }
        for (what, v) in [
            ("the external port rate", self.rate_gbps),
            ("a server's processing capacity", self.server.capacity_gbps),
            ("the NIC port speed", self.server.link_gbps),
        ] {
            if !(v.is_finite() && v > 0.0) {
                return Err(format!("{} must be more than 0 Gbps, not {}", what, v));
            }
        }
        if self.server.nic_ports < 2 {
            return Err(format!(
                "a server needs at least 2 NIC ports (one external, one to the other servers), not {}",
                self.server.nic_ports
            ));
        }
        if !fits(self.rate_gbps, self.server.link_gbps) {
            return Err(format!(
                "R is faster than a NIC port: an external port of {} Gbps needs a NIC port of its own, \
                 and NIC ports run at {} Gbps",
                self.rate_gbps, self.server.link_gbps
            ));
        }
        Ok(())
    }
}

/// A full mesh of servers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mesh {
    pub servers: u64,
    /// External ports of the fullest server (e).
    pub ports_per_server: u64,
    /// NIC ports to each neighbour (m; 0 for a single server).
    pub ports_per_neighbour: u64,
    /// NIC ports a server needs, external and internal.
    pub nic_ports: u64,
    /// Server-to-server links (pairs of NIC ports).
    pub links: u64,
}

/// Edge servers joined by a k-ary n-fly of switching servers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fly {
    pub edge_servers: u64,
    /// External ports of the fullest edge server (e).
    pub ports_per_server: u64,
    /// NIC ports of each bundle (u).
    pub bundle_ports: u64,
    pub k: u64,
    /// Stages of switching servers (n).
    pub stages: u64,
    /// Switching servers in all stages.
    pub switch_servers: u64,
    /// NIC ports an edge server needs: e + u.
    pub nic_ports_edge: u64,
    /// NIC ports a switching server needs: 2k·u.
    pub nic_ports_switch: u64,
    /// Server-to-server links (pairs of NIC ports).
    pub links: u64,
}

impl Fly {
    pub fn servers(&self) -> u64 {
        self.edge_servers + self.switch_servers
    }
}

/// The topology a plan recommends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Topology<'a> {
    Mesh(&'a Mesh),
    Fly(&'a Fly),
}

impl Topology<'_> {
    pub fn servers(&self) -> u64 {
        match self {
            Topology::Mesh(m) => m.servers,
            Topology::Fly(f) => f.servers(),
        }
    }
}

/// Both topologies for one request, each with the reason it cannot be built if so.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    pub request: Request,
    pub mesh: Result<Mesh, String>,
    pub fly: Result<Fly, String>,
}

impl Plan {
    /// The topology with fewer servers (the mesh on a tie), or why neither fits.
    pub fn best(&self) -> Result<Topology<'_>, String> {
        match (&self.mesh, &self.fly) {
            (Ok(m), Ok(f)) if f.servers() < m.servers => Ok(Topology::Fly(f)),
            (Ok(m), _) => Ok(Topology::Mesh(m)),
            (Err(_), Ok(f)) => Ok(Topology::Fly(f)),
            (Err(m), Err(f)) if m == f => Err(m.clone()),
            (Err(m), Err(f)) => Err(format!("full mesh: {}; n-fly: {}", m, f)),
        }
    }
}

/// Plans both topologies for `r`; `Err` when the request itself is bad.
pub fn plan(r: &Request) -> Result<Plan, String> {
    r.check()?;
    let (mesh, fly) = match most_ports_per_server(r) {
        Ok(e_max) => (mesh(r, e_max), fly(r, e_max)),
        Err(why) => (Err(why.clone()), Err(why)),
    };
    Ok(Plan {
        request: *r,
        mesh,
        fly,
    })
}

/// The most external ports a server can process (at least 1), or why it cannot
/// process one.
fn most_ports_per_server(r: &Request) -> Result<u64, String> {
    let per_port = f64::from(r.processing_factor()) * r.rate_gbps;
    if !fits(per_port, r.server.capacity_gbps) {
        return Err(format!(
            "a server cannot process one external port (needs {} Gbps, has {})",
            per_port, r.server.capacity_gbps
        ));
    }
    // At least 1 (checked above); more than N is never needed.
    Ok(floor_tolerant(r.server.capacity_gbps / per_port).clamp(1, u64::from(r.ports)))
}

fn mesh(r: &Request, e_max: u64) -> Result<Mesh, String> {
    let n = u64::from(r.ports);
    let p = u64::from(r.server.nic_ports);
    let least = n.div_ceil(e_max);
    // The mesh that needs the fewest NIC ports: when none fits, the reason.
    let mut closest = mesh_of(r, least);
    for s in least..=n {
        let candidate = mesh_of(r, s);
        if candidate.nic_ports <= p {
            return Ok(candidate);
        }
        if candidate.nic_ports < closest.nic_ports {
            closest = candidate;
        }
        // A mesh of s servers needs at least s NIC ports (e ≥ 1 and s - 1 neighbours):
        // none fits beyond P servers, and none beyond the closest's NIC ports needs
        // fewer than it, which the reason reports.
        if s > p && s >= closest.nic_ports {
            break;
        }
    }
    Err(format!(
        "a full mesh needs at least {} NIC ports a server ({} servers of {} external port{}), \
         more than the {} a server has",
        closest.nic_ports,
        closest.servers,
        closest.ports_per_server,
        if closest.ports_per_server == 1 { "" } else { "s" },
        p
    ))
}

/// The full mesh of `s` servers (1 or more) for `r`, fitting or not.
fn mesh_of(r: &Request, s: u64) -> Mesh {
    let e = u64::from(r.ports).div_ceil(s);
    let m = if s == 1 {
        0
    } else {
        ceil_tolerant(2.0 * e as f64 * r.rate_gbps / (s as f64 * r.server.link_gbps)).max(1)
    };
    Mesh {
        servers: s,
        ports_per_server: e,
        ports_per_neighbour: m,
        nic_ports: e + (s - 1) * m,
        links: s * (s - 1) / 2 * m,
    }
}

fn fly(r: &Request, e_max: u64) -> Result<Fly, String> {
    let n = u64::from(r.ports);
    if n == 1 {
        return Err("one external port needs no interconnect".into());
    }
    // One external port an edge server (N edge servers) asks least of every bound: if
    // it does not fit, nothing does, and its reason is the one to give.
    let mut best = fly_with(r, n)?;
    // On a tie the larger e wins: fewer edge servers.
    for e in 2..=e_max {
        let edge = n.div_ceil(e);
        if edge < 2 {
            break;
        }
        if let Ok(f) = fly_with(r, edge) {
            if f.servers() <= best.servers() {
                best = f;
            }
        }
    }
    Ok(best)
}

/// The n-fly of `edge` edge servers (2 or more), or the bound it breaks.
fn fly_with(r: &Request, edge: u64) -> Result<Fly, String> {
    let n = u64::from(r.ports);
    let p = u64::from(r.server.nic_ports);
    let e = n.div_ceil(edge);
    let bundle_gbps = 2.0 * e as f64 * r.rate_gbps;
    let u = ceil_tolerant(bundle_gbps / r.server.link_gbps).max(1);
    if e + u > p {
        return Err(format!(
            "an edge server needs {} NIC ports ({} external, {} for its {} Gbps bundle), more than the {} a server has",
            e + u,
            e,
            u,
            bundle_gbps,
            p
        ));
    }
    let k_ports = p / (2 * u);
    if k_ports < 2 {
        return Err(format!(
            "a switching server of 2 bundles in and 2 out needs {} NIC ports, more than the {} a server has",
            4 * u,
            p
        ));
    }
    let k_processing = floor_tolerant(r.server.capacity_gbps / bundle_gbps);
    if k_processing < 2 {
        return Err(format!(
            "a switching server of 2 bundles cannot process them (needs {} Gbps, has {})",
            2.0 * bundle_gbps,
            r.server.capacity_gbps
        ));
    }
    let k = k_ports.min(k_processing).min(edge);
    let mut stages = 0;
    let mut reach = 1u64;
    while reach < edge {
        reach = reach.saturating_mul(k);
        stages += 1;
    }
    let per_stage = edge.div_ceil(k);
    Ok(Fly {
        edge_servers: edge,
        ports_per_server: e,
        bundle_ports: u,
        k,
        stages,
        switch_servers: stages * per_stage,
        nic_ports_edge: e + u,
        nic_ports_switch: 2 * k * u,
        links: u * (edge + (stages - 1) * k * per_stage),
    })
}

/// Whether a need fits a capacity, forgiving rounding.
fn fits(need: f64, capacity: f64) -> bool {
    need <= capacity * (1.0 + TOLERANCE)
}

/// ceil(x) for x ≥ 0, taking an x within rounding of an integer as that integer.
fn ceil_tolerant(x: f64) -> u64 {
    let nearest = x.round();
    if (x - nearest).abs() <= TOLERANCE * nearest.max(1.0) {
        nearest as u64
    } else {
        x.ceil() as u64
    }
}

/// floor(x) for x ≥ 0, taking an x within rounding of an integer as that integer
/// (saturating at u64::MAX).
fn floor_tolerant(x: f64) -> u64 {
    let nearest = x.round();
    if (x - nearest).abs() <= TOLERANCE * nearest.max(1.0) {
        nearest as u64
    } else {
        x.floor() as u64
    }
}

#[cfg(test)]
mod tests;
