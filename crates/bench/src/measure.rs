//! Measuring: every scenario (and target) × repetition × policy, the
//! policies interleaved (their order rotates each repetition: ABC, BCA,
//! CAB, …), one session each. A session that fails is recorded with its
//! error and the run goes on; an interrupt stops the run.

use crate::live;
use crate::options::BenchOptions;
use crate::policy::Policy;
use crate::progress::Progress;
use crate::run::{self, Bed, LaunchRecord, Measurement, Scenario};
use anyhow::Result;
use std::collections::BTreeMap;
use std::time::Duration;

/// Minimum gap between replayed trace events.
const TRACE_MIN_GAP: Duration = Duration::from_millis(300);

/// One scenario to run, with its target for the target-launch scenarios.
#[derive(Debug, Clone, PartialEq)]
pub struct Job {
    /// The scenario.
    pub scenario: Scenario,
    /// The target app (low / medium / high).
    pub target: Option<String>,
}

/// The jobs of a run: one per target for the target-launch scenarios.
pub fn jobs(o: &BenchOptions) -> Vec<Job> {
    let mut jobs = Vec::new();
    for &scenario in &o.scenarios {
        if scenario.has_target() {
            jobs.extend(o.targets.iter().map(|t| Job {
                scenario,
                target: Some(t.clone()),
            }));
        } else {
            jobs.push(Job {
                scenario,
                target: None,
            });
        }
    }
    jobs
}

/// Runs every session; returns the measurements in the order they ran.
pub fn measure_all(
    o: &BenchOptions,
    bed: &mut Bed,
    skipped: &BTreeMap<String, String>,
    progress: &Progress,
) -> Result<Vec<Measurement>> {
    let policies: Vec<Policy> = o
        .policies
        .iter()
        .copied()
        .filter(|p| !skipped.contains_key(p.name()))
        .collect();
    let jobs = jobs(o);
    if let Some(b) = &progress.bar {
        b.set_length(jobs.len() as u64 * o.reps as u64 * policies.len() as u64);
    }
    let mut all = Vec::new();
    for job in &jobs {
        for rep in 0..o.reps {
            let n = policies.len();
            for i in 0..n {
                let p = policies[(i + rep as usize) % n];
                live::check_interrupted()?;
                let what = format!(
                    "{} {}rep {}/{} policy {}",
                    job.scenario.name(),
                    job.target
                        .as_deref()
                        .map(|t| format!("target {t} "))
                        .unwrap_or_default(),
                    rep + 1,
                    o.reps,
                    p.name()
                );
                progress.step(&what);
                let m = match session(o, bed, job, p, rep) {
                    Ok(m) => m,
                    Err(e) if live::interrupted() => return Err(e),
                    Err(e) => {
                        progress.say(&format!("{what}: session failed: {e:#}"));
                        let mut m = run::measurement(p, job.scenario, rep);
                        m.error = Some(format!("{e:#}"));
                        m
                    }
                };
                if !o.progress || m.launches.len() <= 3 {
                    progress.say(&format!(
                        "{what}: {} kills {}",
                        describe(&m.launches),
                        m.killed.len()
                    ));
                }
                all.push(m);
                progress.inc();
            }
        }
    }
    Ok(all)
}

fn session(o: &BenchOptions, bed: &mut Bed, job: &Job, p: Policy, rep: u32) -> Result<Measurement> {
    match (job.scenario, job.target.as_deref()) {
        (Scenario::Multitask, _) => run::run_multitask(bed, p, rep),
        (Scenario::Trace, _) => {
            run::run_trace(bed, p, rep, &o.trace, o.time_compress, TRACE_MIN_GAP)
        }
        (s, Some(target)) => run::run_target(bed, p, s, target, rep),
        (s, None) => anyhow::bail!("scenario {} needs a target", s.name()),
    }
}

fn describe(launches: &[LaunchRecord]) -> String {
    launches
        .iter()
        .map(|l| {
            format!(
                "{} {:.0} ms{}",
                l.app,
                l.ms,
                if l.timed_out {
                    " (timed out)"
                } else if l.died.is_some() {
                    " (died)"
                } else {
                    ""
                }
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}
