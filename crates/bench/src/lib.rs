//! # appflow-bench — the real-kernel testbed (`appflow bench`)
//!
//! Builds a phone-like device domain on the local kernel (memory cgroup,
//! zram swap, a loop-mounted ext4 image, blkio-throttled storage), launches
//! real processes in it under several policies in one run, and reports
//! cold-launch latency against the physical floor (`oracle`).
//!
//! | module | owns |
//! |---|---|
//! | [`cli`] | `appflow bench` / `bench-app` entry points: build, run, tear down, check |
//! | [`options`] | command-line arguments and their validation |
//! | [`prepare`] | app files and leaves, in-domain calibration, daemon configs, profiles |
//! | [`measure`] | every session, policies interleaved across repetitions |
//! | [`run`] | one session: scenarios, launches, counters |
//! | [`report`] | measurements → the core's `RunReport`, and the table |
//! | [`spec`] | app spec files (synthetic apps and real command lines), validation |
//! | [`device`] | device presets and `--scale` |
//! | [`domain`] | what the testbed creates, the state file, guaranteed teardown, `--cleanup` |
//! | [`live`] | building the domain on the kernel; signal flag |
//! | [`synth`] | synthetic apps: layout, files, launch pattern, the app process |
//! | [`launch`] | spawning into leaf cgroups, exec-to-readiness timing |
//! | [`policy`] | the policies and the daemon driver (config, control socket, SIGTERM) |
//! | [`serve`] | `appflow flash-serve`: the flash device alone over a directory, until stopped |
//! | [`simdev`] | the run's domain and apps as an `appflow sim --device-file` |

pub mod cli;
pub mod counters;
pub mod device;
pub mod domain;
pub mod flash;
pub mod fusefs;
pub mod launch;
pub mod live;
pub mod measure;
pub mod options;
pub mod plot;
pub mod policy;
pub mod prepare;
pub mod progress;
pub mod report;
pub mod run;
pub mod serve;
pub mod simdev;
pub mod spec;
pub mod synth;
