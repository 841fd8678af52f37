//! # appflow-linux — the scheduler on a real kernel
//!
//! Live sensors (readers of /proc, /sys and cgroup files, each taking a root
//! path), the launch recorder and profile store, the live mechanisms behind
//! the core's traits (preload worker, reclaim actuators, killer), the daemon
//! loop, its control socket and its configuration.

// Sensors, recorder, profile store, calibration (`record`, `apps`, `calibrate`).
pub mod calibrate;
pub mod doctor;
pub mod readers;
pub mod recorder;
pub mod store;

// Daemon: config, journal of changed settings, actuators, loop, socket (`daemon`, `status`, `notify`).
pub mod actuators;
pub mod config;
pub mod daemon;
pub mod journal;
pub mod ledger;
pub mod lock;
pub mod procevents;
pub mod signals;
pub mod socket;

pub mod cli;
mod cli_daemon;
mod cli_doctor;
mod cli_profiles;
