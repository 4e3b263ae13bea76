//! `brickroute bench batching`: RouteBricks' batching experiment. The same application
//! runs with every pair of receive batch k_p (packets a `FromDevice` takes per poll) and
//! transmit batch k_n (packets a `ToDevice` hands the port at once) asked for, in turns
//! over several rounds so that every cell sees the same minutes of a shared host, and
//! each cell's cycles a packet is compared with the unbatched k_p = k_n = 1 measured in
//! the same rounds.

use crate::bench::{bar, check_shape, finish, in_turns, Shape, Turns};
use packet::MAX_BATCH;
use runtime::bench::{median, PipelineOptions};
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct BatchingArgs {
    #[command(flatten)]
    shape: Shape,
    /// Receive batches k_p to try, comma-separated (1 to 256 each).
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8,16,32")]
    kp: Vec<usize>,
    /// Transmit batches k_n to try, comma-separated (1 to 256 each).
    #[arg(long, value_delimiter = ',', default_value = "1,16")]
    kn: Vec<usize>,
    /// Packets each run processes.
    #[arg(long, default_value_t = 1_000_000)]
    packets: u64,
    /// Rounds: each round runs every pair once; a cell's figures are its rounds'
    /// medians.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..=100))]
    rounds: u64,
}

/// One (k_p, k_n) pair's figures: medians over the rounds.
struct Cell {
    kp: usize,
    kn: usize,
    cycles: f64,
    mpps: f64,
    /// The unbatched pair's cycles a packet over this one's, the median of the rounds'
    /// ratios (each round's pair from the same minutes).
    speedup: f64,
}

pub fn main(a: BatchingArgs, app_config: fn(&str) -> Result<&'static str, String>) -> ExitCode {
    let report = run(&a, app_config).map(|(cells, size)| {
        if a.shape.json {
            format!("{}\n", json(&a, size, &cells))
        } else {
            table(&a, size, &cells)
        }
    });
    finish("batching", report)
}

fn check(a: &BatchingArgs) -> Result<(), String> {
    check_shape(&a.shape)?;
    for (name, list) in [("--kp", &a.kp), ("--kn", &a.kn)] {
        if let Some(b) = list.iter().find(|&&b| !(1..=MAX_BATCH).contains(&b)) {
            return Err(format!(
                "{} {}: each batch must be from 1 to {}",
                name, b, MAX_BATCH
            ));
        }
    }
    if a.packets == 0 {
        return Err("--packets must be at least 1".into());
    }
    Ok(())
}

/// The pairs to run: the unbatched one first (every cell is compared with it), then the
/// asked ones in order.
fn pairs(a: &BatchingArgs) -> Vec<(usize, usize)> {
    let mut v = vec![(1, 1)];
    for &kp in &a.kp {
        for &kn in &a.kn {
            if !v.contains(&(kp, kn)) {
                v.push((kp, kn));
            }
        }
    }
    v
}

fn run(
    a: &BatchingArgs,
    app_config: fn(&str) -> Result<&'static str, String>,
) -> Result<(Vec<Cell>, usize), (String, u8)> {
    let conf = app_config(&a.shape.app).map_err(|e| (e, 2))?;
    check(a).map_err(|e| (e, 2))?;
    let pairs = pairs(a);
    let runs: Vec<PipelineOptions> = pairs
        .iter()
        .map(|&(kp, kn)| PipelineOptions {
            app: conf.to_string(),
            conf_dir: a.shape.conf_dir.clone(),
            size: a.shape.size,
            packets: Some(a.packets),
            threads: a.shape.threads,
            flows: a.shape.flows,
            rx_burst: kp,
            tx_burst: kn,
            pin: !a.shape.no_pin,
            extra_classes: Some(cluster::register),
            ..PipelineOptions::default()
        })
        .collect();
    let Turns { mpps, cycles, size } = in_turns(&runs, a.rounds, |i| {
        format!("k_p {}, k_n {}", pairs[i].0, pairs[i].1)
    })?;
    let cells = pairs
        .iter()
        .enumerate()
        .map(|(i, &(kp, kn))| {
            let ratios: Vec<f64> = cycles[0].iter().zip(&cycles[i]).map(|(u, c)| u / c).collect();
            Cell {
                kp,
                kn,
                cycles: median(&cycles[i]),
                mpps: median(&mpps[i]),
                speedup: median(&ratios),
            }
        })
        .collect();
    Ok((cells, size))
}

fn table(a: &BatchingArgs, size: usize, cells: &[Cell]) -> String {
    let mut s = format!(
        "app {}  size {} B  threads {}  flows {}  {} packets a run, {} round{} (medians)\n",
        a.shape.app,
        size,
        a.shape.threads,
        a.shape.flows,
        a.packets,
        a.rounds,
        if a.rounds == 1 { "" } else { "s" }
    );
    s.push_str("  k_p   k_n  cycles/packet      Mpps   against k_p=1 k_n=1\n");
    let widest = cells.iter().map(|c| c.speedup).fold(1.0, f64::max);
    for c in cells {
        // A bar of up to 40 eighths-resolution blocks, proportional to the speedup.
        let bar = bar(c.speedup / widest * 40.0);
        s.push_str(&format!(
            "{:5} {:5} {:14.1} {:9.3}   {:6.2}x  {}\n",
            c.kp, c.kn, c.cycles, c.mpps, c.speedup, bar
        ));
    }
    s
}

fn json(a: &BatchingArgs, size: usize, cells: &[Cell]) -> String {
    let cells: Vec<String> = cells
        .iter()
        .map(|c| {
            format!(
                "{{\"kp\":{},\"kn\":{},\"cycles_per_packet\":{:.2},\"mpps\":{:.4},\"speedup\":{:.4}}}",
                c.kp, c.kn, c.cycles, c.mpps, c.speedup
            )
        })
        .collect();
    format!(
        "{{\"app\":\"{}\",\"size\":{},\"threads\":{},\"flows\":{},\"packets\":{},\"rounds\":{},\"cells\":[{}]}}",
        a.shape.app,
        size,
        a.shape.threads,
        a.shape.flows,
        a.packets,
        a.rounds,
        cells.join(",")
    )
}
