//! The scheduler daemon (docs/daemon.md): one loop that every `tick_ms`
//! samples the domain and hands it to the core's scheduler
//! ([`appflow_core::scheduler::Scheduler`], the same one the simulator
//! runs), which acts only through the mechanism traits.
//!
//! * [`metrics`] — Prometheus text metrics and the Chrome/Perfetto trace.
//! * [`detection`] — launches of declared apps detected from kernel process
//!   events, readiness inferred, each detected launch recorded into the
//!   app's profile (no launcher needed).
//! * [`run`] — the live part: sampling the domain (system or memory cgroup),
//!   scanning its processes, the control socket, signals, the main loop; it
//!   builds one [`Record`] per tick and per event and applies it.
//!
//! ## The domain's signals
//! * system: M_aval = MemAvailable, n_alloc from the sum of vmstat `pgalloc_*`.
//! * cgroup: M_aval = limit − usage + inactive_file (the readers'
//!   `MemCgroup::available_bytes`); n_alloc from the cgroup's own page-fault
//!   counter (v1 `total_pgfault`, v2 `pgfault` of memory.stat). The global
//!   `pgalloc_*` would count every other tenant of the machine; the cgroup's
//!   fault count is the cgroup's own demand for new pages (each first touch
//!   of an anonymous page or an uncached file page faults), which is what
//!   Algorithm 1 watches. A cgroup without a limit uses the system's
//!   MemTotal/MemAvailable for M_total/M_aval.

pub mod detection;
pub mod metrics;
pub mod run;

pub use appflow_core::scheduler::{
    Decision, DomainSample, EventError, EventKind, Mark, Mechanisms, Mechs, ProcId, ProcInfo,
    Record, Scheduler, SchedulerConfig,
};
use appflow_core::storage::ThroughputCurve;

/// The storage curve used when no calibration is stored (`appflow calibrate`).
pub fn default_curve() -> ThroughputCurve {
    ThroughputCurve::phone_default()
}
