//! `brickroute`: the command line.

use clap::{Parser, Subcommand};
use std::process::ExitCode;

mod bench;
mod fib;
mod handlers;
mod run;

#[derive(Parser)]
#[command(
    name = "brickroute",
    version,
    about = "A parallel, programmable software IP router"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Runs a router configuration written in the Click language.
    Run(run::RunArgs),
    /// Measurements: packets/s and cycles/packet of the shipped applications.
    #[command(subcommand)]
    Bench(bench::BenchCommand),
    /// Longest-prefix-match tables: lookups from a table file, benchmarks, synthetic tables.
    #[command(subcommand)]
    Fib(fib::FibCommand),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Run(args) => run::main(args),
        Command::Bench(cmd) => bench::main(cmd),
        Command::Fib(cmd) => fib::main(cmd),
    }
}
