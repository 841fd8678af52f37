//! `appflow daemon`, `appflow status`, `appflow notify`, and the hidden
//! preload worker (under construction).
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
sub!(DaemonArgs, run_daemon, "daemon");
sub!(StatusArgs, run_status, "status");
sub!(NotifyArgs, run_notify, "notify");
sub!(PreloadWorkerArgs, run_preload_worker, "preload-worker");
