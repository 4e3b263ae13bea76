//! A cluster of servers that acts as one router, as RouteBricks' RB4: every server has
//! external ports and internal links to the others, and traffic crosses the mesh by
//! Valiant load balancing (VLB), so no traffic matrix can overload an internal link.
//!
//! - [`vlb`]: the balancing decision a packet's input server makes (classic VLB, or
//!   Direct VLB, which sends a destination's fair share straight to it), with
//!   flowlets against reordering.
//! - [`element`]: `VLBSwitch`, the Click element that applies it in a router, and
//!   [`flow`], the flow hash its flowlets follow.
//! - [`heartbeat`]: failure detection: servers that fall silent relay nothing.
//! - [`mesh`]: the configuration of one server of a full mesh.
//! - [`plan`]: the topology planner: servers and links for N external ports, full
//!   mesh or k-ary n-fly.
//! - [`sim`]: a discrete-event simulator of the mesh that makes every decision with
//!   [`vlb::Balancer`], for meshes of up to hundreds of servers.

pub mod element;
pub mod flow;
pub mod heartbeat;
pub mod mesh;
pub mod plan;
pub mod sim;
pub mod vlb;

pub use element::register;
