//! Command-line entry points (`appflow bench`, hidden `appflow bench-app`).
/// Arguments of `appflow bench`.
#[derive(clap::Args, Debug)]
pub struct BenchArgs {}
/// Runs `appflow bench`.
pub fn run(_a: BenchArgs) -> anyhow::Result<()> {
    anyhow::bail!("appflow bench is not built yet")
}
/// Arguments of the hidden `appflow bench-app` (a synthetic app process).
#[derive(clap::Args, Debug)]
pub struct AppArgs {}
/// Runs one synthetic app.
pub fn run_app(_a: AppArgs) -> anyhow::Result<()> {
    anyhow::bail!("appflow bench-app is not built yet")
}
