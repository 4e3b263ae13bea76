//! The Click configuration of one server of a full mesh, RouteBricks' RB4 layout: every
//! server has one external interface and one internal link to each other server.
//!
//! - From the external interface: IPv4 and IPv6 frames are checked, their TTL or hop
//!   limit decremented, and looked up once (RadixIPLookup, LookupIP6Route: output `j`
//!   for routes that leave by server `j`).
//!   Each gets an Ethernet header whose destination address names its output server
//!   ([`server_mac`]), or the external next hop when it leaves by this server, and
//!   `VLBSwitch` sends it straight to its output server or through another.
//! - From an internal link: a frame addressed to this server leaves by the external
//!   interface with the next hop's address; one addressed to another server is
//!   relayed to it unchanged. Neither is looked up again.
//! - With heartbeats ([`ServerConfig::heartbeat`]), `VLBSwitch` sends one to every
//!   other server at an interval and takes theirs from the links: a server that falls
//!   silent relays nothing until it is heard again (see [`crate::heartbeat`]).
//!
//! Handlers worth reading: `vlb.local`, `vlb.direct`, `vlb.balanced`,
//! `vlb.flowlet_hits`, with heartbeats `vlb.heartbeats` and `vlb.silent` (the
//! servers not heard from), `relayed.count` (frames this server passed on as intermediate),
//! `delivered.count` (frames from the mesh sent out of the external interface),
//! `dropped.count` (frames of neither IP family or of a family without routes, or
//! internal frames for no server).

use crate::vlb::MAX_NODES;
use std::fmt::Write;

/// The Ethernet address that names server `k` on the internal links.
pub fn server_mac(k: usize) -> [u8; 6] {
    assert!(k < MAX_NODES, "server {} of at most {}", k, MAX_NODES);
    [0x02, 0xb5, 0x00, 0x00, 0x00, k as u8]
}

fn mac_text(m: [u8; 6]) -> String {
    m.iter()
        .map(|b| format!("{:02x}", b))
        .collect::<Vec<_>>()
        .join(":")
}

/// What [`ServerConfig::click`] needs to know about one server.
#[derive(Clone, Debug, PartialEq)]
pub struct ServerConfig {
    /// This server's index.
    pub node: usize,
    /// The external interface.
    pub external: String,
    /// The external interface's own address (the source of frames it sends).
    pub external_mac: [u8; 6],
    /// The external next hop's address (where frames leaving by this server go).
    pub next_hop_mac: [u8; 6],
    /// The internal link to each server, `None` at this server's own index; its length
    /// is the mesh's size.
    pub links: Vec<Option<String>>,
    /// `PREFIX SERVER`: the routes, IPv4 and IPv6, each to the server whose external
    /// interface it leaves by.
    pub routes: Vec<(String, usize)>,
    /// VLBSwitch's keyword arguments after NODE, such as `RATE 10Gbps` or
    /// `SCHEME vlb, FLOWLET 0`.
    pub balancing: String,
    /// VLBSwitch's heartbeat keywords, such as `HEARTBEAT 50ms` or `HEARTBEAT 20ms,
    /// TIMEOUT 100ms`; empty for none.
    pub heartbeat: String,
    /// FromDevice's and ToDevice's keyword arguments after the interface, such as
    /// `METHOD PACKET`.
    pub device: String,
    /// Appended verbatim (a ControlSocket, say).
    pub extra: String,
}

impl ServerConfig {
    /// Checks the layout: the server in the mesh, a link to every other server and
    /// none to itself, routes to servers in the mesh.
    pub fn check(&self) -> Result<(), String> {
        let n = self.links.len();
        if !(2..=MAX_NODES).contains(&n) {
            return Err(format!("a mesh has 2 to {} servers, not {}", MAX_NODES, n));
        }
        if self.node >= n {
            return Err(format!("server {} is not in a mesh of {}", self.node, n));
        }
        for (k, link) in self.links.iter().enumerate() {
            match (k == self.node, link) {
                (true, Some(l)) => return Err(format!("server {} has a link to itself ({})", k, l)),
                (false, None) => return Err(format!("no link from server {} to server {}", self.node, k)),
                _ => {}
            }
        }
        if let Some((p, k)) = self.routes.iter().find(|(_, k)| *k >= n) {
            return Err(format!(
                "route {} leaves by server {}, not in a mesh of {}",
                p, k, n
            ));
        }
        Ok(())
    }

    /// The Click configuration.
    pub fn click(&self) -> Result<String, String> {
        self.check()?;
        let (me, n) = (self.node, self.links.len());
        let mut c = String::new();
        let w = &mut c;
        // Writing to a String cannot fail.
        let _ = writeln!(
            w,
            "// Server {} of a {}-server mesh (Valiant load balancing).",
            me, n
        );
        let dev = |name: &str| match self.device.trim() {
            "" => name.to_string(),
            args => format!("{}, {}", name, args),
        };
        let _ = writeln!(w, "ext :: ToDevice({});", dev(&self.external));
        let _ = writeln!(w, "dropped :: Counter -> Discard;");
        for (k, link) in self.links.iter().enumerate() {
            if let Some(l) = link {
                let _ = writeln!(w, "link{} :: ToDevice({});", k, dev(l));
            }
        }
        let heartbeat = !self.heartbeat.trim().is_empty();
        let balancing: String = [self.balancing.trim(), self.heartbeat.trim()]
            .iter()
            .filter(|k| !k.is_empty())
            .map(|k| format!(", {}", k))
            .collect();
        let _ = writeln!(w, "vlb :: VLBSwitch({}{});", me, balancing);
        // IPv4 and IPv6 each have their own lookup, fed by the Ethernet type.
        let (v6, v4): (Vec<_>, Vec<_>) = self.routes.iter().partition(|(p, _)| p.contains(':'));
        let _ = writeln!(
            w,
            "FromDevice({}) -> ec :: Classifier(12/0800, 12/86dd, -);",
            dev(&self.external)
        );
        let here = mac_text(server_mac(me));
        let families = [
            ("rt", "RadixIPLookup", v4, "CheckIPHeader -> DecIPTTL", "0x0800"),
            (
                "rt6",
                "LookupIP6Route",
                v6,
                "CheckIP6Header -> GetIP6Address(24) -> DecIP6HLIM",
                "0x86dd",
            ),
        ];
        for (i, (name, class, routes, checks, ethertype)) in families.into_iter().enumerate() {
            if routes.is_empty() {
                let _ = writeln!(w, "ec[{}] -> dropped;", i);
                continue;
            }
            let routes: Vec<String> = routes.iter().map(|(p, k)| format!("{} {}", p, k)).collect();
            let _ = writeln!(w, "{} :: {}({});", name, class, routes.join(", "));
            let _ = writeln!(w, "ec[{}] -> Strip(14) -> {} -> {};", i, checks, name);
            for k in 0..n {
                let (src, dst) = if k == me {
                    (mac_text(self.external_mac), mac_text(self.next_hop_mac))
                } else {
                    (here.clone(), mac_text(server_mac(k)))
                };
                let _ = writeln!(
                    w,
                    "{name}[{k}] -> EtherEncap({ethertype}, {src}, {dst}) -> [{k}]vlb;"
                );
            }
        }
        let _ = writeln!(w, "ec[2] -> dropped;");
        for k in 0..n {
            let to = if k == me {
                "ext".to_string()
            } else {
                format!("link{}", k)
            };
            let _ = writeln!(w, "vlb[{}] -> {};", k, to);
        }
        // Frames from the mesh: for this server, or to relay to another.
        let _ = writeln!(
            w,
            "delivered :: Counter -> EtherRewrite({}, {}) -> ext;",
            mac_text(self.external_mac),
            mac_text(self.next_hop_mac)
        );
        let _ = writeln!(w, "relayed :: Counter -> relay :: PaintSwitch;");
        let others: Vec<usize> = (0..n).filter(|&k| k != me).collect();
        for &k in &others {
            let _ = writeln!(w, "relay[{}] -> link{};", k, k);
        }
        // (No frame is painted with this server's number: the classifiers below send
        // those to `delivered`.)
        let _ = writeln!(w, "relay[{}] -> dropped;", me);
        // Heartbeats first: they are addressed to this server too.
        let first = usize::from(heartbeat);
        let mut patterns = Vec::new();
        if heartbeat {
            patterns.push(format!("12/{:04x}", crate::heartbeat::ETHERTYPE));
        }
        patterns.push(format!("0/{}", here.replace(':', "")));
        patterns.extend(
            others
                .iter()
                .map(|&k| format!("0/{}", mac_text(server_mac(k)).replace(':', ""))),
        );
        patterns.push("-".into());
        for (j, link) in self.links.iter().enumerate() {
            let Some(l) = link else { continue };
            let _ = writeln!(
                w,
                "FromDevice({}) -> mc{} :: Classifier({});",
                dev(l),
                j,
                patterns.join(", ")
            );
            if heartbeat {
                let _ = writeln!(w, "mc{}[0] -> [{}]vlb;", j, n);
            }
            let _ = writeln!(w, "mc{}[{}] -> delivered;", j, first);
            for (i, &k) in others.iter().enumerate() {
                let _ = writeln!(w, "mc{}[{}] -> Paint({}) -> relayed;", j, first + i + 1, k);
            }
            let _ = writeln!(w, "mc{}[{}] -> dropped;", j, first + others.len() + 1);
        }
        c.push_str(&self.extra);
        Ok(c)
    }
}

#[cfg(test)]
mod tests;
