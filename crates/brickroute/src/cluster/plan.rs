//! `brickroute cluster plan`: how many servers, in a full mesh or a k-ary n-fly, make a
//! router of N external ports, for each N asked (the model is `cluster::plan`'s).
//!
//! The defaults describe a RouteBricks-like server: 10 Gbps ports, 8 NIC ports of
//! 10 Gbps (4 slots of dual-port NICs) and 40 Gbps of processing. 40 Gbps carries one
//! external port under VLB's worst case of 3R = 30 Gbps and keeps a quarter of the
//! server for bursts, control and measurement error; two ports (60 Gbps) would not
//! fit. It stands for one server's forwarding rate: measure yours with `brickroute
//! bench` and pass it as `--server-capacity`.
//!
//! A row that no topology fits is an answer, not an error: it says which bound fails,
//! and the command still exits 0. Bad options exit 2.

use cluster::plan::{plan, Plan, Request, Server, Topology, MAX_PORTS};
use cluster::vlb::Scheme;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct PlanArgs {
    /// External ports N to plan for, comma-separated: each a number, or A..B for the
    /// powers of two from A to B (A and B powers of two).
    #[arg(long, value_name = "LIST", default_value = "4..1024")]
    ports: String,
    /// The rate R of each external port, in Gbps.
    #[arg(long, value_name = "GBPS", default_value_t = 10.0)]
    rate: f64,
    /// Packets a server can process, in Gbps (C): one server's forwarding rate, as
    /// `brickroute bench` measures it.
    #[arg(long, value_name = "GBPS", default_value_t = 40.0)]
    server_capacity: f64,
    /// NIC ports a server holds in all, external and internal (P).
    #[arg(long, value_name = "P", default_value_t = 8)]
    nic_ports: u32,
    /// The speed of each NIC port, in Gbps (L).
    #[arg(long, value_name = "GBPS", default_value_t = 10.0)]
    link_rate: f64,
    /// vlb plans for VLB's worst case, 3R of processing for each external port; direct
    /// plans for Direct VLB's 2R, which holds only for uniform traffic matrices.
    #[arg(long, value_name = "vlb|direct", default_value = "vlb", value_parser = scheme)]
    scheme: Scheme,
    /// One JSON object a value of N (JSON lines) instead of the table.
    #[arg(long)]
    json: bool,
}

fn scheme(s: &str) -> Result<Scheme, String> {
    Scheme::parse(s).ok_or_else(|| format!("'{}' is not a scheme: use vlb or direct", s))
}

pub fn main(a: PlanArgs) -> ExitCode {
    match plans(&a) {
        Ok(plans) => {
            if a.json {
                for p in &plans {
                    println!("{}", json(p));
                }
            } else {
                print!("{}", table(&plans));
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("brickroute cluster plan: {}", e);
            ExitCode::from(2)
        }
    }
}

/// A plan for each N asked, or the reason the options are bad.
fn plans(a: &PlanArgs) -> Result<Vec<Plan>, String> {
    let server = Server {
        capacity_gbps: a.server_capacity,
        nic_ports: a.nic_ports,
        link_gbps: a.link_rate,
    };
    port_counts(&a.ports)?
        .into_iter()
        .map(|ports| {
            plan(&Request {
                ports,
                rate_gbps: a.rate,
                server,
                scheme: a.scheme,
            })
        })
        .collect()
}

/// The values of `--ports`, in the order given.
fn port_counts(list: &str) -> Result<Vec<u32>, String> {
    let mut counts = Vec::new();
    for item in list.split(',').map(str::trim) {
        if let Some((from, to)) = item.split_once("..") {
            let bound = |s: &str| s.trim().parse::<u32>().ok().filter(|v| v.is_power_of_two());
            match (bound(from), bound(to)) {
                (Some(a), Some(b)) if a <= b => {
                    let mut n = a;
                    while n <= b {
                        counts.push(checked(n)?);
                        // b is a power of two up to 2^31: doubling past it ends the loop.
                        match n.checked_mul(2) {
                            Some(next) => n = next,
                            None => break,
                        }
                    }
                }
                _ => {
                    return Err(format!(
                        "--ports: 'A..B' needs powers of two, A <= B, not '{}'",
                        item
                    ))
                }
            }
        } else {
            let n = item.parse::<u32>().map_err(|_| {
                format!(
                    "--ports: '{}' is not a number of ports or a range A..B of powers of two",
                    item
                )
            })?;
            counts.push(checked(n)?);
        }
    }
    Ok(counts)
}

fn checked(n: u32) -> Result<u32, String> {
    if n == 0 || n > MAX_PORTS {
        return Err(format!(
            "--ports: a router has 1 to {} external ports, not {}",
            MAX_PORTS, n
        ));
    }
    Ok(n)
}

fn table(plans: &[Plan]) -> String {
    let Some(first) = plans.first() else {
        return String::new();
    };
    let r = &first.request;
    let factor = r.processing_factor();
    let mut s = format!(
        "external ports of R = {} Gbps; servers of C = {} Gbps of processing, P = {} NIC ports of L = {} Gbps\n",
        r.rate_gbps, r.server.capacity_gbps, r.server.nic_ports, r.server.link_gbps
    );
    s.push_str(&match r.scheme {
        Scheme::Vlb => format!(
            "scheme vlb: a server processes 3R = {} Gbps for each of its external ports \
             (input, intermediate and output), whatever the traffic matrix\n",
            f64::from(factor) * r.rate_gbps
        ),
        Scheme::Direct => format!(
            "scheme direct: a server processes 2R = {} Gbps for each of its external ports; \
             this holds only for uniform traffic matrices (the worst case is 3R, as for vlb)\n",
            f64::from(factor) * r.rate_gbps
        ),
    });
    s.push_str("e: external ports a server; NIC ports: an edge server's / a switching server's; links: NIC port pairs\n\n");
    s.push_str(&format!(
        "{:>7}  {:<14} {:>8} {:>5} {:>11} {:>8}  other\n",
        "N", "topology", "servers", "e", "NIC ports", "links"
    ));
    for p in plans {
        s.push_str(&row(p));
    }
    s.push('\n');
    s.push_str(&chart(plans));
    let simulations: Vec<(u32, String)> = plans
        .iter()
        .filter_map(|p| simulation(p).map(|args| (p.request.ports, args)))
        .collect();
    if !simulations.is_empty() {
        s.push_str("\ncheck a plan under traffic (the simulator takes one external port a server, 2 to 256 servers):\n");
        for (n, args) in simulations {
            s.push_str(&format!("{:>7}  brickroute cluster simulate {}\n", n, args));
        }
    }
    s
}

/// The arguments of `cluster simulate` that model `p`'s topology, when the simulator
/// can: one external port a server, 2 to 256 servers (edge servers of an n-fly, a
/// power of its k, so that its stages hold the planner's N/k switching servers). Each
/// link is a bundle of NIC ports, simulated as one link of their summed rate.
fn simulation(p: &Plan) -> Option<String> {
    let r = &p.request;
    let c = r.server.capacity_gbps;
    let simulated = |servers: u64| (2..=cluster::vlb::MAX_NODES as u64).contains(&servers);
    match p.best().ok()? {
        Topology::Mesh(m) if m.ports_per_server == 1 && simulated(m.servers) => Some(format!(
            "--servers {} --rate {} --link-rate {} --server-capacity {}",
            m.servers,
            r.rate_gbps,
            m.ports_per_neighbour as f64 * r.server.link_gbps,
            c
        )),
        Topology::Fly(f)
            if f.ports_per_server == 1
                && simulated(f.edge_servers)
                && cluster::sim::Topology::stages(f.k as usize, f.edge_servers as usize)
                    == Some(f.stages as u32) =>
        {
            Some(format!(
                "--topology n-fly --servers {} --radix {} --rate {} --link-rate {} --server-capacity {} --switch-capacity {}",
                f.edge_servers,
                f.k,
                r.rate_gbps,
                f.bundle_ports as f64 * r.server.link_gbps,
                c,
                c
            ))
        }
        _ => None,
    }
}

fn row(p: &Plan) -> String {
    let n = p.request.ports;
    let servers = |t: Option<u64>| t.map_or("-".to_string(), |v| v.to_string());
    match p.best() {
        Ok(Topology::Mesh(m)) => format!(
            "{:>7}  {:<14} {:>8} {:>5} {:>11} {:>8}  n-fly {}\n",
            n,
            "full mesh",
            m.servers,
            m.ports_per_server,
            format!("{}/-", m.nic_ports),
            m.links,
            servers(p.fly.as_ref().ok().map(|f| f.servers()))
        ),
        Ok(Topology::Fly(f)) => format!(
            "{:>7}  {:<14} {:>8} {:>5} {:>11} {:>8}  mesh {}\n",
            n,
            format!("{}-ary {}-fly", f.k, f.stages),
            f.servers(),
            f.ports_per_server,
            format!("{}/{}", f.nic_ports_edge, f.nic_ports_switch),
            f.links,
            servers(p.mesh.as_ref().ok().map(|m| m.servers))
        ),
        Err(why) => format!("{:>7}  no plan: {}\n", n, why),
    }
}

/// Servers against ports, one bar a value of N. The servers run from a handful to
/// thousands, so the bars are on a log scale too: 1 + log2(servers), the widest 40
/// cells.
fn chart(plans: &[Plan]) -> String {
    let length = |servers: u64| 1.0 + (servers as f64).log2();
    let widest = plans
        .iter()
        .filter_map(|p| p.best().ok().map(|t| length(t.servers())))
        .fold(1.0, f64::max);
    let mut s = String::from("servers against ports (log scale)\n");
    for p in plans {
        let n = p.request.ports;
        match p.best() {
            Ok(t) => s.push_str(&format!(
                "{:>7} │{} {}\n",
                n,
                crate::bench::bar(length(t.servers()) / widest * 40.0),
                t.servers()
            )),
            Err(_) => s.push_str(&format!("{:>7} │ no plan\n", n)),
        }
    }
    s
}

fn json(p: &Plan) -> serde_json::Value {
    let r = &p.request;
    let best = p.best();
    let (topology, servers, ports_per_server, nic_ports_edge, nic_ports_switch, stages, k, links) =
        match &best {
            Ok(Topology::Mesh(m)) => (
                Some("mesh"),
                Some(m.servers),
                Some(m.ports_per_server),
                Some(m.nic_ports),
                None,
                Some(0),
                None,
                Some(m.links),
            ),
            Ok(Topology::Fly(f)) => (
                Some("n-fly"),
                Some(f.servers()),
                Some(f.ports_per_server),
                Some(f.nic_ports_edge),
                Some(f.nic_ports_switch),
                Some(f.stages),
                Some(f.k),
                Some(f.links),
            ),
            Err(_) => (None, None, None, None, None, None, None, None),
        };
    serde_json::json!({
        "ports": r.ports,
        "rate_gbps": r.rate_gbps,
        "server_capacity_gbps": r.server.capacity_gbps,
        "nic_ports": r.server.nic_ports,
        "link_gbps": r.server.link_gbps,
        "scheme": r.scheme.name(),
        "topology": topology,
        "servers": servers,
        "ports_per_server": ports_per_server,
        "nic_ports_edge": nic_ports_edge,
        "nic_ports_switch": nic_ports_switch,
        "stages": stages,
        "k": k,
        "links": links,
        "switch_servers": match &best {
            Ok(Topology::Mesh(_)) => Some(0),
            Ok(Topology::Fly(f)) => Some(f.switch_servers),
            Err(_) => None,
        },
        "mesh_servers": p.mesh.as_ref().ok().map(|m| m.servers),
        "nfly_servers": p.fly.as_ref().ok().map(|f| f.servers()),
        "mesh_reason": p.mesh.as_ref().err(),
        "nfly_reason": p.fly.as_ref().err(),
        "reason": best.err(),
        "simulate": simulation(p),
    })
}
