//! The policy registry: every policy the simulator, the testbed and the
//! daemon can run, each one small file that composes a preload, a reclaim
//! and a killer strategy, registered once in [`REGISTRY`] by name with its
//! aliases.
//!
//! `appflow sim --policy`, `appflow bench --policies` and the daemon's
//! `[daemon] policy` key all resolve names through [`lookup`]; their help
//! texts list [`names`]. Adding a policy is one file in this folder plus one
//! line in the `registry!` list below (docs/writing-a-policy.md).
//!
//! A strategy says *what* the scheduler ([`crate::scheduler`]) does; the
//! kernel-level variants ([`KernelVariant`]) change the simulated kernel's
//! own reclaim and exist only where a kernel can be changed (the simulator's
//! kernel model).

use crate::InputError;
use serde::Serialize;

/// What the preloader does with the launch profiles.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PreloadStrategy {
    /// No preloading: apps read on demand.
    None,
    /// AppFlow's Selective File Preloader (the AppFlow paper §4.1): knapsack cutoffs,
    /// small files kept before launch, large files streamed at launch.
    Selective,
    /// Paralfetch / iorap-like baseline (the AppFlow paper §6.1): the whole launch
    /// profile streamed at launch in large reads, nothing kept before.
    WholeProfile,
    /// Every profiled range kept resident before launch, no budget.
    KeepAll,
}

/// What the user-space reclaimer does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReclaimStrategy {
    /// Nothing: the kernel's reclaim as it is.
    Kernel,
    /// AppFlow's Adaptive Memory Reclaimer (the AppFlow paper §4.2, Algorithm 1).
    Adaptive,
    /// PMR's user-space half (the PMR paper §4.2-§4.3): keep δ of memory ready
    /// ahead of bursts by paging out background apps' anonymous memory in
    /// per-app batches (`crate::proactive`).
    Proactive,
    /// Re-fault-aware reclaim (the re-fault study §5): kswapd's reclaim step
    /// (`vm.watermark_scale_factor`) lowered while re-faults are high and
    /// direct reclaim low, raised back when direct reclaim grows
    /// (`crate::refault`).
    RefaultAware,
    /// Ariadne's user-space half (the Ariadne paper §4.2, HotnessOrg): when an
    /// app leaves the foreground, its anonymous data that its last
    /// foreground window did not bring back (the window's hot set) is marked
    /// cold, so the kernel's reclaim evicts it before the hot set. A list
    /// operation only (`MADV_COLD`: deactivate, no I/O), as HotnessOrg's
    /// are (§4.2, §6.4).
    HotnessAware,
}

/// What happens when a running app is switched back to the foreground.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SwitchStrategy {
    /// Demand paging: the app faults its pages back itself.
    Demand,
    /// ASAP (the ASAP paper): prepage the app's estimated switch footprint at
    /// switch start, at idle priority; the estimate is a candidate table
    /// updated with precision/recall feedback (`crate::prepage`).
    Prepage,
}

/// Who chooses the victim when memory runs out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum KillerStrategy {
    /// The platform's own killer: Android's lmkd in the simulator, the
    /// kernel OOM killer on Linux. The scheduler kills nothing.
    Kernel,
    /// AppFlow's Context-Aware Process Killer (the AppFlow paper §4.3): highest net
    /// freed memory ΔM, recently used apps deferred.
    NetFreed,
    /// lmkd's order from user space: highest oom_score_adj, then least
    /// recently used, on the same trigger as the Context-Aware killer.
    Lru,
}

/// A change to the kernel's own reclaim (simulator kernel model only).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum KernelVariant {
    /// The stock kernel.
    Stock,
    /// Acclaim (the AppFlow paper §6.1 baseline): foreground-aware eviction and
    /// larger kswapd batches, a kernel patch.
    Acclaim,
    /// PMR (the PMR paper §4.2-§4.3): a `kshrinkd` thread keeps a victim list of
    /// δ = 462 MB shrunk ahead of time, and writeback unmaps per application
    /// and writes in device-sized batches.
    Pmr,
    /// Ariadne (the Ariadne paper §4.2-§4.4): anonymous data split hot/warm/cold by
    /// the last relaunch, evicted cold first, compressed in chunks sized by
    /// hotness (1K/2K/16K), the next page pre-decompressed on a swap-in.
    Ariadne,
    /// Re-fault-aware reclaim (the re-fault study §5): kswapd reclaims a
    /// batch above the low watermark instead of up to the high one; the
    /// batch is the step the policy's controller sets (or a fixed
    /// `--kswapd-batch-kib`). On a real kernel the step is the watermark gap
    /// `vm.watermark_scale_factor` sets, no patch needed.
    Refault,
    /// The stock kernel with the simulator's simplified platform in place
    /// of the device's own (Android 15 on the phone presets: lmkd's
    /// `mp_event_psi`, ActivityManager's adj classes and compaction; the
    /// simulator's `android` module): one lmkd rule and no ActivityManager.
    /// A model only, kept to compare against.
    SimpleLmkd,
}

impl KernelVariant {
    /// What a real kernel would need to be changed for this variant, if anything.
    pub fn kernel_change(self) -> Option<&'static str> {
        match self {
            KernelVariant::Stock => None,
            KernelVariant::Acclaim => Some("Acclaim's foreground-aware eviction and kswapd sizing"),
            KernelVariant::Pmr => Some("PMR's kshrinkd victim list and batched writeback"),
            KernelVariant::Ariadne => {
                Some("Ariadne's hotness-aware zram with size-adaptive chunks")
            }
            KernelVariant::Refault => Some("a kswapd reclaim batch apart from the watermark gap"),
            KernelVariant::SimpleLmkd => Some("the simulator's simplified lmkd, a model only"),
        }
    }
}

/// A registered policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Policy {
    /// Canonical name.
    pub name: &'static str,
    /// Other accepted names.
    pub aliases: &'static [&'static str],
    /// One line for help texts.
    pub summary: &'static str,
    /// Preloader.
    pub preload: PreloadStrategy,
    /// User-space reclaimer.
    pub reclaim: ReclaimStrategy,
    /// Killer.
    pub killer: KillerStrategy,
    /// App switches (warm relaunches).
    pub switch: SwitchStrategy,
    /// Kernel reclaim variant.
    pub kernel: KernelVariant,
}

impl Policy {
    /// The kernel variant's part the daemon cannot run. A policy whose
    /// user-space half is everything the daemon needs still runs there (see
    /// [`Policy::needs_kernel_change`]); this names what it runs without.
    pub fn kernel_part(&self) -> Option<&'static str> {
        self.kernel.kernel_change()
    }

    /// Whether the scheduler has anything to do for this policy.
    pub fn has_user_space(&self) -> bool {
        self.preload != PreloadStrategy::None
            || self.reclaim != ReclaimStrategy::Kernel
            || self.killer != KillerStrategy::Kernel
            || self.switch != SwitchStrategy::Demand
    }

    /// The AppFlow modules this policy has.
    pub fn modules(&self) -> crate::Modules {
        crate::Modules {
            sfp: self.preload == PreloadStrategy::Selective,
            amr: self.reclaim == ReclaimStrategy::Adaptive,
            cpk: self.killer == KillerStrategy::NetFreed,
        }
    }

    /// True when the scheduler has nothing to do (the stock system).
    pub fn is_stock(&self) -> bool {
        !self.has_user_space() && self.kernel == KernelVariant::Stock
    }

    /// Why this policy cannot run on a real, unmodified kernel (the daemon
    /// and the testbed), if it cannot. A policy with a kernel variant but
    /// also a user-space half (PMR's batched page-out, Ariadne's cold
    /// marking) runs its user-space half there (so does the re-fault
    /// policy's step controller); one that is only a kernel change
    /// (Acclaim) cannot. Switch prepaging (ASAP) is user space: pagemap
    /// windows and `MADV_WILLNEED` (docs/peers.md).
    pub fn needs_kernel_change(&self) -> Option<String> {
        let what = self.kernel.kernel_change()?;
        if self.has_user_space() {
            return None;
        }
        Some(format!(
            "policy {:?} changes the kernel's own reclaim ({what}, a kernel patch); it runs in the simulator only",
            self.name
        ))
    }
}

macro_rules! registry {
    ($($module:ident),* $(,)?) => {
        $(mod $module;)*
        /// Every policy, in listing order.
        pub static REGISTRY: &[&Policy] = &[$(&$module::POLICY),*];
    };
}

// One line per policy.
registry!(
    stock,
    android_simple,
    prefetch,
    acclaim,
    acclaim_prefetch,
    appflow,
    appflow_sfp,
    appflow_amr,
    appflow_cpk,
    preload_all,
    lru_killer,
    pmr,
    asap,
    ariadne,
    refault,
    appflow_asap,
);

/// Canonical names, in listing order.
pub fn names() -> Vec<&'static str> {
    REGISTRY.iter().map(|p| p.name).collect()
}

/// A help text listing every policy with its aliases and summary.
pub fn help_text() -> String {
    REGISTRY
        .iter()
        .map(|p| {
            let aliases = if p.aliases.is_empty() {
                String::new()
            } else {
                format!(" (= {})", p.aliases.join(", "))
            };
            format!("{}{aliases}: {}", p.name, p.summary)
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Looks a policy up by name or alias; the error lists the valid names.
pub fn lookup(name: &str) -> Result<&'static Policy, InputError> {
    REGISTRY
        .iter()
        .copied()
        .find(|p| p.name == name || p.aliases.contains(&name))
        .ok_or_else(|| {
            InputError::new(format!(
                "unknown policy {name:?}; valid policies: {}",
                names().join(", ")
            ))
        })
}

/// Parses a comma-separated list of names (no policy twice, not empty).
pub fn parse_list(list: &str) -> Result<Vec<&'static Policy>, InputError> {
    let mut out: Vec<&'static Policy> = Vec::new();
    for n in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let p = lookup(n)?;
        if out.iter().any(|q| q.name == p.name) {
            return Err(InputError::new(format!(
                "policy {:?} is listed twice",
                p.name
            )));
        }
        out.push(p);
    }
    if out.is_empty() {
        return Err(InputError::new(format!(
            "no policy given; valid policies: {}",
            names().join(", ")
        )));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn names_and_aliases_are_unique_and_resolve() {
        let mut seen = BTreeSet::new();
        for p in REGISTRY {
            for n in std::iter::once(&p.name).chain(p.aliases) {
                assert!(seen.insert(*n), "{n} registered twice");
                assert_eq!(lookup(n).unwrap().name, p.name);
            }
        }
        assert_eq!(lookup("android").unwrap().name, "stock");
        assert_eq!(lookup("paralfetch").unwrap().name, "prefetch");
        assert!(lookup("stock").unwrap().is_stock());
        let e = lookup("nope").unwrap_err().to_string();
        assert!(e.contains("\"nope\"") && e.contains("lru-killer"), "{e}");
        assert!(parse_list("stock,android").is_err());
        assert!(parse_list(" , ").is_err());
    }

    #[test]
    fn ablations_have_one_module_and_appflow_all() {
        for n in ["appflow-sfp", "appflow-amr", "appflow-cpk"] {
            let m = lookup(n).unwrap().modules();
            assert_eq!(
                [m.sfp, m.amr, m.cpk].iter().filter(|x| **x).count(),
                1,
                "{n}"
            );
        }
        assert_eq!(lookup("appflow").unwrap().modules(), crate::Modules::ALL);
        assert_eq!(lookup("stock").unwrap().modules(), crate::Modules::NONE);
        assert!(lookup("acclaim").unwrap().needs_kernel_change().is_some());
        assert!(lookup("appflow").unwrap().needs_kernel_change().is_none());
    }

    #[test]
    fn peers_run_where_their_halves_can() {
        // Kernel-only policies: simulator only.
        let acclaim = lookup("acclaim").unwrap();
        assert!(acclaim.needs_kernel_change().is_some());
        assert!(!acclaim.has_user_space());
        // Ariadne's user-space half (cold marking) runs on a real kernel;
        // its in-zram half (chunk sizes, pre-decompression) stays the
        // simulator's kernel variant, named by `kernel_part`.
        let ariadne = lookup("ariadne").unwrap();
        assert!(ariadne.needs_kernel_change().is_none() && ariadne.has_user_space());
        assert_eq!(ariadne.reclaim, ReclaimStrategy::HotnessAware);
        assert_eq!(ariadne.kernel, KernelVariant::Ariadne);
        assert!(ariadne.kernel_part().is_some());
        // The re-fault policy's step controller runs on a real kernel; its
        // kernel variant stays the simulator's realisation of the step.
        let refault = lookup("refault").unwrap();
        assert!(refault.needs_kernel_change().is_none() && refault.has_user_space());
        assert_eq!(refault.reclaim, ReclaimStrategy::RefaultAware);
        assert_eq!(refault.kernel, KernelVariant::Refault);
        // PMR's user-space half runs on a real kernel.
        let pmr = lookup("pmr").unwrap();
        assert!(pmr.needs_kernel_change().is_none() && pmr.kernel_part().is_some());
        assert_eq!(pmr.reclaim, ReclaimStrategy::Proactive);
        for n in ["asap", "appflow+asap"] {
            let p = lookup(n).unwrap();
            assert_eq!(p.switch, SwitchStrategy::Prepage, "{n}");
            assert!(p.kernel_part().is_none(), "{n}");
            // Switch prepaging is user space: it runs on a real kernel.
            assert!(p.needs_kernel_change().is_none(), "{n}");
            assert!(p.has_user_space(), "{n}");
        }
        assert_eq!(
            lookup("appflow+asap").unwrap().modules(),
            crate::Modules::ALL
        );
        assert!(!pmr.is_stock() && !lookup("refault").unwrap().is_stock());
    }
}
