use appflow_sim::{catalog, device, engine::*, policy::Policy, workload::*};
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let pol = Policy::by_name(&args[1]).unwrap();
    let dev = device::device(args.get(2).map(|s| s.as_str()).unwrap_or("pixel8-6gb")).unwrap();
    let cat = catalog::catalogue();
    let models: Vec<_> = cat.iter().map(catalog::model).collect();
    let cfg = SimConfig::with_seed(1);
    let target = args.get(3).map(|s| s.as_str()).unwrap_or("TikTok");
    let w = Workload::resolve("high", &models, &[target.to_string()], None).unwrap();
    let inst = w.installed(&models);
    let mut sim = Sim::new(&dev, pol, &cfg, &models, &inst);
    let t = models.iter().position(|m| m.spec.name == target).unwrap();
    sim.reset();
    sim.idle(1_000_000);
    for b in background(&models, Load::High, t) {
        let r = sim.launch(b);
        println!(
            "bg {:<10} {:?} {:.0} ms kills={} dr={} mem={:?}",
            models[b].spec.name,
            r.kind,
            r.latency_ms,
            sim.counters.kills,
            sim.counters.direct_reclaims,
            sim.memory_mib()
        );
        sim.idle(5_000_000);
    }
    sim.go_home();
    sim.idle(30_000_000);
    println!("before target mem={:?}", sim.memory_mib());
    let r = sim.launch(t);
    println!(
        "target {:?} {:.0} ms kills={} dr={} mem={:?} {:?}",
        r.kind,
        r.latency_ms,
        sim.counters.kills,
        sim.counters.direct_reclaims,
        sim.memory_mib(),
        sim.check_accounting()
    );
}
