//! The seed peers in the simulator (docs/peers.md): each one changes what
//! its paper changes; on the multitask rounds of a 6 GB Pixel 7, PMR and
//! Ariadne make relaunches faster than stock, and ASAP, whose prepaging is
//! bounded by the room above the killer's trigger level, finds none there;
//! the re-fault controller holds the stock step, because the simulated phone
//! reclaims directly as much as the re-fault study's phone without kswapd.

use appflow_sim::catalog;
use appflow_sim::cli::{simulate, SimArgs};
use appflow_sim::output::metric;
use clap::Parser;

#[derive(Parser)]
struct Cmd {
    #[command(flatten)]
    a: SimArgs,
}

fn parse(extra: &[&str]) -> SimArgs {
    let mut argv = vec!["sim"];
    argv.extend_from_slice(extra);
    Cmd::try_parse_from(argv).unwrap().a
}

fn run(extra: &[&str]) -> appflow_core::report::RunReport {
    simulate(&parse(extra), &catalog::catalogue()).unwrap()
}

#[test]
fn pmr_and_ariadne_cut_multitask_relaunches_and_asap_stays_within_the_room() {
    let r = run(&[
        "--device",
        "pixel7-6gb",
        "--workload",
        "multitask",
        "--policy",
        "android,pmr,asap,ariadne",
        "--seed",
        "1",
    ]);
    let get = |p: &str, k: &str| {
        let res = r.results.iter().find(|x| x.policy == p).unwrap();
        metric(res, k).unwrap()
    };
    let base = get("android", "relaunch_mean");
    for p in ["pmr", "ariadne"] {
        let x = get(p, "relaunch_mean");
        assert!(
            x < base,
            "{p}: relaunch mean {x} not below android's {base}"
        );
    }
    // Ariadne acts on warm switches: those get faster.
    let x = get("ariadne", "switch_mean");
    let sw = get("android", "switch_mean");
    assert!(x < sw, "ariadne: switch mean {x} not below android's {sw}");
    // ASAP prepages at most the room above the killer's trigger level (the
    // rule for everything the scheduler brings in); under this pressure
    // the phone never has any at a switch, so its run is android's.
    for k in ["relaunch_mean", "switch_mean", "kills"] {
        assert_eq!(get("asap", k), get("android", k), "asap {k}");
    }
    // The run says so: every warm switch (9) had a footprint, and the room
    // cut each to nothing.
    let asap = r.results.iter().find(|x| x.policy == "asap").unwrap();
    let pp = &asap.extra["prepage"];
    assert_eq!(pp["switches_prepaged"], 0, "{pp}");
    assert_eq!(pp["bounded_by_room"], 9, "{pp}");
    assert!(pp["bounded_out_mib"].as_f64().unwrap() > 0.0, "{pp}");
    assert!(pp["precision"].is_null(), "{pp}");
    let android = r.results.iter().find(|x| x.policy == "android").unwrap();
    assert!(!android.extra.contains_key("prepage"));
    // With room (8 GB), it does prepage: the run differs from android's.
    let r8 = run(&[
        "--device",
        "pixel8-8gb",
        "--workload",
        "multitask",
        "--policy",
        "android,asap",
        "--seed",
        "1",
    ]);
    let get8 = |p: &str| {
        let res = r8.results.iter().find(|x| x.policy == p).unwrap();
        metric(res, "relaunch_mean").unwrap()
    };
    assert_ne!(get8("asap"), get8("android"));
    let asap = r8.results.iter().find(|x| x.policy == "asap").unwrap();
    let pp = &asap.extra["prepage"];
    assert!(pp["switches_prepaged"].as_u64().unwrap() > 0, "{pp}");
    let precision = pp["precision"].as_f64().unwrap();
    assert!(precision > 0.0 && precision < 1.0, "{pp}");
}

#[test]
fn kswapd_batch_is_a_parameter_and_the_full_batch_is_stock() {
    // With a batch reaching the high watermark again (154 - 116 MB), the
    // re-fault policy's kernel is the stock kernel.
    let argv = |kib: &str| {
        run(&[
            "--device",
            "pixel8-6gb",
            "--workload",
            "high",
            "--targets",
            "TikTok",
            "--policy",
            "android,refault",
            "--kswapd-batch-kib",
            kib,
            "--format",
            "json",
        ])
    };
    let r = argv("38912");
    assert_eq!(r.results[0].summary, r.results[1].summary);
    let r = argv("128");
    assert_ne!(r.results[0].summary, r.results[1].summary);
    let bad = parse(&["--kswapd-batch-kib", "0"]);
    let e = simulate(&bad, &catalog::catalogue())
        .unwrap_err()
        .to_string();
    assert!(e.contains("--kswapd-batch-kib 0"), "{e}");
}

#[test]
fn the_simulated_phone_reclaims_directly_like_the_studys_phone_without_kswapd() {
    // docs/peers.md, "Is the simulator's baseline the study's?": on every
    // workload the stock phone reclaims 36-60 % of its pages directly (the
    // re-fault study, Table 2: 1.12 % with kswapd, 40.39 % without), so the
    // re-fault controller's rule holds the step at stock and the run is
    // android's.
    for w in ["low", "medium", "high", "multitask"] {
        let r = run(&[
            "--device",
            "pixel7-6gb",
            "--workload",
            w,
            "--policy",
            "android,refault",
            "--seed",
            "1",
        ]);
        let share = r.results[0].extra["direct_reclaim_page_share"]
            .as_f64()
            .unwrap();
        // Above the rule's bound for raising the step (9.25 %) by far.
        assert!(share > 0.35, "{w}: direct share {share}");
        assert!(share > appflow_core::refault::DIRECT_RAISE);
        let step = &r.results[1].extra["kswapd_step"];
        assert_eq!(step["changes"], 0, "{w}: {step}");
        assert_eq!(r.results[0].summary, r.results[1].summary, "{w}");
    }
}
