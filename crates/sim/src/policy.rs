//! The policies the simulator compares, selectable by name.
//!
//! A policy is a combination of a preloader, a reclaim variant and a killer.
//! The `appflow` family drives the core's pure functions
//! (`appflow_core::preload`, `reclaim`, `killer`); the others are kernel
//! model variants (seed 000 §6.1 baselines).

use appflow_core::{InputError, Modules};

/// How files are brought in around a launch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Preloader {
    /// None: the app reads on demand (stock).
    None,
    /// Paralfetch: at launch, prefetch the whole profile in profile order,
    /// merged into large reads, at normal I/O priority.
    Paralfetch,
    /// AppFlow's Selective File Preloader (core `preload`).
    Sfp,
}

/// Which reclaim behaviour the kernel model has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reclaimer {
    /// Stock kswapd + direct reclaim, anon/file scanned in proportion to list sizes.
    Stock,
    /// Acclaim: foreground-aware eviction (background owners first) and larger kswapd batches.
    Acclaim,
    /// AppFlow's Adaptive Memory Reclaimer (core `reclaim::ReclaimController`).
    Amr,
}

/// Which killer runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Killer {
    /// Stock lmkd: PSI/swap triggers, victim by adj then LRU (core `choose_victim_lru`).
    Lmkd,
    /// AppFlow's Context-Aware Process Killer (core `should_kill` + `choose_victim`).
    Cpk,
}

/// A named policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// Its name as given on the command line.
    pub name: &'static str,
    /// Preloader.
    pub preloader: Preloader,
    /// Reclaim variant.
    pub reclaimer: Reclaimer,
    /// Killer.
    pub killer: Killer,
}

/// Every policy name, in listing order.
pub const POLICY_NAMES: [&str; 8] = [
    "android",
    "paralfetch",
    "acclaim",
    "acclaim+paralfetch",
    "appflow",
    "appflow-sfp",
    "appflow-amr",
    "appflow-cpk",
];

impl Policy {
    /// Looks a policy up by name; the error lists the valid names.
    pub fn by_name(name: &str) -> Result<Policy, InputError> {
        use Killer::*;
        use Preloader as P;
        use Reclaimer as R;
        let (name, preloader, reclaimer, killer) = match name {
            "android" => ("android", P::None, R::Stock, Lmkd),
            "paralfetch" => ("paralfetch", P::Paralfetch, R::Stock, Lmkd),
            "acclaim" => ("acclaim", P::None, R::Acclaim, Lmkd),
            "acclaim+paralfetch" | "paralfetch+acclaim" => {
                ("acclaim+paralfetch", P::Paralfetch, R::Acclaim, Lmkd)
            }
            "appflow" => ("appflow", P::Sfp, R::Amr, Cpk),
            "appflow-sfp" => ("appflow-sfp", P::Sfp, R::Stock, Lmkd),
            "appflow-amr" => ("appflow-amr", P::None, R::Amr, Lmkd),
            "appflow-cpk" => ("appflow-cpk", P::None, R::Stock, Cpk),
            _ => {
                return Err(InputError::new(format!(
                    "unknown policy {name:?}; valid policies: {}",
                    POLICY_NAMES.join(", ")
                )))
            }
        };
        Ok(Policy {
            name,
            preloader,
            reclaimer,
            killer,
        })
    }

    /// The AppFlow modules this policy has (all off for the baselines).
    pub fn modules(&self) -> Modules {
        Modules {
            sfp: self.preloader == Preloader::Sfp,
            amr: self.reclaimer == Reclaimer::Amr,
            cpk: self.killer == Killer::Cpk,
        }
    }
}

/// Parses a comma-separated list of policy names (no duplicates).
pub fn parse_list(list: &str) -> Result<Vec<Policy>, InputError> {
    let mut out: Vec<Policy> = Vec::new();
    for n in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let p = Policy::by_name(n)?;
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
            POLICY_NAMES.join(", ")
        )));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_ablations_have_one_module() {
        for n in POLICY_NAMES {
            assert_eq!(Policy::by_name(n).unwrap().name, n);
        }
        for n in ["appflow-sfp", "appflow-amr", "appflow-cpk"] {
            let m = Policy::by_name(n).unwrap().modules();
            assert_eq!(
                [m.sfp, m.amr, m.cpk].iter().filter(|x| **x).count(),
                1,
                "{n}"
            );
        }
        assert_eq!(Policy::by_name("appflow").unwrap().modules(), Modules::ALL);
        assert_eq!(Policy::by_name("android").unwrap().modules(), Modules::NONE);
        let e = parse_list("android,foo").unwrap_err().to_string();
        assert!(e.contains("\"foo\"") && e.contains("appflow-cpk"), "{e}");
        assert!(parse_list("android,android").is_err());
    }
}
