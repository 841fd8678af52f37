//! appflow-bench: the real-kernel testbed (under construction).
pub mod cli {
    /// Arguments of `appflow bench`.
    #[derive(clap::Args, Debug)]
    pub struct BenchArgs {}
    /// Runs `appflow bench`.
    pub fn run(_a: BenchArgs) -> anyhow::Result<()> {
        anyhow::bail!("appflow bench is not built yet")
    }
}
