//! Prints the Fig. 12 / Fig. 13 analogue tables of the simulator as Markdown.
//!
//! `cargo run --release -p walras-gateway --example dbo_table -- [seconds] [seed]`

use walras_gateway::sim::{run, Scheme, SimConfig};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let seconds: f64 = args.get(1).map_or(Ok(0.2), |s| s.parse())?;
    let seed: u64 = args.get(2).map_or(Ok(1), |s| s.parse())?;
    println!(
        "Fig. 12 analogue: latency (µs) vs participants, {seconds} s simulated, seed {seed}\n"
    );
    println!("| participants | scheme | fairness | mean | p50 | p99 | p999 | max |");
    println!("|---:|---|---:|---:|---:|---:|---:|---:|");
    for participants in (10..=90).step_by(10) {
        for scheme in [Scheme::Direct, Scheme::MaxRtt, Scheme::Dbo] {
            let r = run(&SimConfig::new(scheme, participants, seconds, seed))?;
            let l = r.latency_us;
            println!(
                "| {participants} | {scheme} | {:.4} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} |",
                r.fairness, l.mean, l.p50, l.p99, l.p999, l.max
            );
        }
    }
    println!("\nFig. 13 analogue: CloudEx thresholds vs DBO\n");
    println!("| participants | scheme | threshold_us | fairness | mean | p99 |");
    println!("|---:|---|---:|---:|---:|---:|");
    for participants in [10, 60] {
        let dbo = run(&SimConfig::new(Scheme::Dbo, participants, seconds, seed))?;
        println!(
            "| {participants} | dbo | - | {:.4} | {:.1} | {:.1} |",
            dbo.fairness, dbo.latency_us.mean, dbo.latency_us.p99
        );
        for threshold_us in [15, 30, 45, 60, 90, 150, 220, 290, 400] {
            let mut config = SimConfig::new(Scheme::CloudEx, participants, seconds, seed);
            config.threshold_us = threshold_us;
            let r = run(&config)?;
            println!(
                "| {participants} | cloudex | {threshold_us} | {:.4} | {:.1} | {:.1} |",
                r.fairness, r.latency_us.mean, r.latency_us.p99
            );
        }
    }
    Ok(())
}
