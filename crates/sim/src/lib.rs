//! appflow-sim: deterministic phone simulator (under construction).
pub mod cli {
    /// Arguments of `appflow sim`.
    #[derive(clap::Args, Debug)]
    pub struct SimArgs {}
    /// Runs `appflow sim`.
    pub fn run(_a: SimArgs) -> anyhow::Result<()> {
        anyhow::bail!("appflow sim is not built yet")
    }
}
