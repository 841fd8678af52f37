//! Prints everything one run produced, exactly: every measured launch
//! (latency as the f64 itself, not rounded) and every counter, one policy
//! after another. Two builds that print the same text took the same
//! decisions at the same moments; `--format json` rounds latencies to µs.
//!
//! `cargo run --release -p appflow-sim --example digest -- DEVICE WORKLOAD POLICIES [TRACE] [SEED]`
use appflow_sim::catalog::{self, AppModel};
use appflow_sim::engine::SimConfig;
use appflow_sim::workload::{run_policy, Workload};
use appflow_sim::{device, policy, trace};

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [dev, workload, policies, rest @ ..] = args.as_slice() else {
        anyhow::bail!("usage: digest DEVICE WORKLOAD POLICIES [TRACE] [SEED]");
    };
    let dev = device::device(dev)?;
    let cat = catalog::catalogue();
    let events = match rest.first() {
        Some(p) if workload == "trace" => {
            Some(trace::TraceReader::open(std::path::Path::new(p), &cat)?.into_events())
        }
        _ => None,
    };
    let seed = rest.get(1).map(|s| s.parse()).transpose()?.unwrap_or(1);
    let models: Vec<AppModel> = cat.iter().map(catalog::model).collect();
    let w = Workload::resolve(workload, &models, &[], events)?;
    let cfg = SimConfig::with_seed(seed);
    for p in policy::parse_list(policies)? {
        let o = run_policy(&dev, p, &cfg, &models, &w, &|| {});
        println!("policy {}", p.name);
        for r in &o.measured {
            println!("{r:?}");
        }
        let o = appflow_sim::workload::Outcome {
            measured: Vec::new(),
            ..o
        };
        println!("{o:#?}");
    }
    Ok(())
}
