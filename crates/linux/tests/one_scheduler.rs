//! One scheduler: a recorded real run of the daemon on this kernel
//! (`fixtures/records/`, written by `daemon_kernel.rs`'s `record_fixture`)
//! replayed through the daemon's configuration path and through the
//! simulator's must give exactly the decisions the live daemon made.
//!
//! The daemon and the simulator drive the same `appflow_core::scheduler`
//! type with the same records; what could differ is how each builds the
//! scheduler (configuration, defaults, policy). This test pins that down on
//! real kernel input: a launch with a profile, page cache read in the
//! domain, an allocation burst (normal → efficiency-first → rebalancing →
//! normal), readiness and a switch to the background.

use appflow_core::policy;
use appflow_core::profile::LaunchProfile;
use appflow_core::scheduler::{replay, Decision, Record};
use appflow_linux::config::Config;
use appflow_sim::engine::SimConfig;
use serde_json::Value;
use std::path::Path;

struct Fixture {
    config: Config,
    profiles: Vec<LaunchProfile>,
    records: Vec<Record>,
    live: Vec<Value>,
}

fn fixture() -> Fixture {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/records");
    let config = Config::load(&dir.join("appflow.toml")).expect("fixture config");
    let profile = std::fs::read_to_string(dir.join("prot.json")).unwrap();
    let profiles = vec![LaunchProfile::from_json(&profile).unwrap()];
    let mut records = Vec::new();
    let mut live = Vec::new();
    for line in std::fs::read_to_string(dir.join("run.jsonl"))
        .unwrap()
        .lines()
    {
        let v: Value = serde_json::from_str(line).unwrap();
        match v.get("decision") {
            Some(d) => live.push(d.clone()),
            None => records.push(serde_json::from_value(v).unwrap()),
        }
    }
    Fixture {
        config,
        profiles,
        records,
        live,
    }
}

fn as_json(ds: &[Decision]) -> Vec<Value> {
    ds.iter()
        .map(|d| serde_json::to_value(d).unwrap())
        .collect()
}

#[test]
fn the_daemon_and_the_simulator_path_replay_the_live_decisions() {
    let f = fixture();
    let curve = appflow_linux::daemon::default_curve();
    let declared: Vec<String> = f.config.apps.iter().map(|a| a.name.clone()).collect();
    // The daemon's path: its configuration file → the scheduler's configuration.
    let (daemon, daemon_calls) = replay(
        f.config.scheduler_config(),
        curve.clone(),
        f.profiles.clone(),
        &declared,
        &f.records,
    );
    // The simulator's path: its run configuration with the same module
    // parameters, for the same registered policy.
    let sim_cfg = SimConfig {
        seed: 0,
        preload: f.config.preload.core.clone(),
        reclaim: f.config.reclaim.core.clone(),
        killer: f.config.killer.core.clone(),
        ..SimConfig::with_seed(0)
    };
    let (sim, sim_calls) = replay(
        sim_cfg.scheduler_config(policy::lookup(&f.config.daemon.policy).unwrap()),
        curve,
        f.profiles.clone(),
        &declared,
        &f.records,
    );
    assert_eq!(
        as_json(&daemon),
        f.live,
        "the daemon's path departs from the live run"
    );
    assert_eq!(
        as_json(&sim),
        f.live,
        "the simulator's path departs from the live run"
    );
    assert_eq!(daemon_calls, sim_calls);
    // The run is not trivial: the modes went round and a launch streamed.
    let switches = daemon
        .iter()
        .filter(|d| d.kind == "reclaim" && d.mark.is_some())
        .count();
    assert!(switches >= 3, "{switches} mode switches");
    assert!(daemon
        .iter()
        .any(|d| d.reason == Some(appflow_core::reason::Reason::PreloadStreamLarge)));
    assert!(f.records.len() > 20);
}
