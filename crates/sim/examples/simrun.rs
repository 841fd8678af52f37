//! Runs `appflow sim` without the rest of the `appflow` binary (handy while
//! developing the simulator): `cargo run -p appflow-sim --example simrun -- --workload high`.
use clap::Parser;

#[derive(Parser)]
struct Args {
    #[command(flatten)]
    sim: appflow_sim::cli::SimArgs,
}

fn main() -> std::process::ExitCode {
    match appflow_sim::cli::run(Args::parse().sim) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("appflow sim: error: {e:#}");
            let input = e
                .chain()
                .any(|c| c.downcast_ref::<appflow_core::InputError>().is_some());
            std::process::ExitCode::from(if input { 2 } else { 1 })
        }
    }
}
