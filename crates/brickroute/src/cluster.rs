//! `brickroute cluster`: a mesh of servers acting as one router, planned and simulated.

use clap::Subcommand;
use std::process::ExitCode;

mod demo;
mod plan;
mod simulate;

#[derive(Subcommand)]
pub enum ClusterCommand {
    /// Builds a mesh of brickroute servers in namespaces, sends traffic through it, shows where it went.
    Demo(demo::DemoArgs),
    /// Servers and links a mesh needs for N external ports: full mesh or k-ary n-fly.
    Plan(plan::PlanArgs),
    /// Simulates a full mesh or a k-ary n-fly of servers under a traffic matrix: link and
    /// server loads, reordering, latency.
    Simulate(simulate::SimulateArgs),
}

pub fn main(cmd: ClusterCommand) -> ExitCode {
    match cmd {
        ClusterCommand::Demo(args) => demo::main(args),
        ClusterCommand::Plan(args) => plan::main(args),
        ClusterCommand::Simulate(args) => simulate::main(args),
    }
}
