//! # appflow-sim — the deterministic phone simulator (`appflow sim`)
//!
//! A discrete-event model of a phone's memory and storage (docs/sim.md) that
//! runs the same policy code as the daemon (`appflow-core`) at phone scale.
//!
//! | module | owns |
//! |---|---|
//! | [`device`] | device presets (DRAM, zram, swap, storage curve, reclaim costs) and their sources |
//! | [`devfile`] | device and app files (`--device-file`, `--apps-file`): any device, e.g. the testbed's domain |
//! | [`catalog`] | the app catalogue (Table 1 GB-scale apps, low-memory and tail apps) and generated launch profiles |
//! | [`policy`] | the policies by name, resolved through the core's registry |
//! | [`engine`] | the device state and the event loop that drives the core's scheduler |
//! | [`fleet`] | one call over a batch of users × policies on a device: per-user and per-launch rows (`--per-user`, the Python package) |
//! | [`android`] | stock Android 15's killers: lmkd's kill reasons and floors, ActivityManager's adj classes and cached-process limit (pure decisions) |
//! | [`kernel`] | the kernel model (LRU, kswapd, direct reclaim, zram, swap, PSI, the platform killers, OOM killer) |
//! | [`launch`] | the launch model (phases, reads, CPU, allocation, 5 ms steps) |
//! | [`worker`] | the preload worker and the mechanism traits the scheduler acts through |
//! | [`peers`] | kernel variants of other systems (Acclaim) |
//! | [`trace`] | the app-usage trace format, its reader and the long-trace generator |
//! | [`population`] | generated users who differ (light, heavy, GB-app-heavy, work, night) from published app-usage figures |
//! | [`workload`] | the §6.1 scenarios, multitask rounds, trace replay, and the report they produce |
//! | [`output`] | table / JSON / CSV output, SVG plot and the paper's reported figures |
//! | [`cli`] | `appflow sim` arguments and entry point |

pub mod android;
pub mod catalog;
pub mod cli;
pub mod devfile;
pub mod device;
pub mod engine;
pub mod fleet;
pub mod kernel;
pub mod launch;
pub mod output;
pub mod peers;
pub mod policy;
pub mod population;
pub mod rng;
pub mod trace;
pub mod worker;
pub mod workload;
