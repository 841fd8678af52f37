//! The policies the simulator compares: the core's registry
//! (`appflow_core::policy`), selected by name or alias. The name a user
//! typed is kept for reports, so `android` stays `android` in a table while
//! it runs the registered `stock` policy.

use appflow_core::policy::{self as registry, Policy as Registered};
use appflow_core::InputError;

/// A policy as selected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// The name (or alias) it was selected by.
    pub name: &'static str,
    /// The registered policy.
    pub def: &'static Registered,
}

/// Every canonical policy name, in listing order.
pub fn names() -> Vec<&'static str> {
    registry::names()
}

impl Policy {
    /// Looks a policy up by name or alias; the error lists the valid names.
    pub fn by_name(name: &str) -> Result<Policy, InputError> {
        let def = registry::lookup(name)?;
        let name = std::iter::once(&def.name)
            .chain(def.aliases)
            .find(|n| **n == name)
            .copied()
            .unwrap_or(def.name);
        Ok(Policy { name, def })
    }

    /// The AppFlow modules this policy has (all off for the baselines).
    pub fn modules(&self) -> appflow_core::Modules {
        self.def.modules()
    }
}

/// Parses a comma-separated list of policy names (no policy twice).
pub fn parse_list(list: &str) -> Result<Vec<Policy>, InputError> {
    let defs = registry::parse_list(list)?;
    let given: Vec<&str> = list
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    given
        .iter()
        .zip(defs)
        .map(|(n, _)| Policy::by_name(n))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_resolve_through_the_registry_and_keep_the_alias() {
        let p = Policy::by_name("android").unwrap();
        assert_eq!((p.name, p.def.name), ("android", "stock"));
        let p = Policy::by_name("acclaim+paralfetch").unwrap();
        assert_eq!(p.def.name, "acclaim+prefetch");
        for n in names() {
            assert_eq!(Policy::by_name(n).unwrap().name, n);
        }
        assert_eq!(
            Policy::by_name("appflow").unwrap().modules(),
            appflow_core::Modules::ALL
        );
        let e = parse_list("android,foo").unwrap_err().to_string();
        assert!(e.contains("\"foo\"") && e.contains("appflow-cpk"), "{e}");
        assert!(parse_list("android,stock").is_err());
    }
}
