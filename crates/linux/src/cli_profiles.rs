//! `appflow record`, `appflow apps`, `appflow calibrate` (under construction).
macro_rules! sub {
    ($args:ident, $run:ident, $name:literal) => {
        #[doc = concat!("Arguments of `appflow ", $name, "`.")]
        #[derive(clap::Args, Debug)]
        pub struct $args {}
        #[doc = concat!("Runs `appflow ", $name, "`.")]
        pub fn $run(_a: $args) -> anyhow::Result<()> {
            anyhow::bail!(concat!("appflow ", $name, " is not built yet"))
        }
    };
}
sub!(RecordArgs, run_record, "record");
sub!(AppsArgs, run_apps, "apps");
sub!(CalibrateArgs, run_calibrate, "calibrate");
