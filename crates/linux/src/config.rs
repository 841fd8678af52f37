//! The daemon's configuration (reference in docs/daemon.md): TOML, a default for every field,
//! unknown fields refused, validated after parsing with errors that name the
//! field. Parse → validate → build: [`Config::from_toml`] does the first two;
//! the daemon builds its state from the validated value.
//!
//! The `[preload]`, `[reclaim]` and `[killer]` sections carry the daemon's own
//! switches plus every field of the core's `PreloadConfig`, `ReclaimConfig`
//! and `KillerConfig` at the same level. serde's `flatten` cannot be combined
//! with `deny_unknown_fields`, so these sections are read as a table, the
//! daemon's keys split off, and the rest handed to the core struct (which
//! denies unknown fields itself).

use appflow_core::killer::KillerConfig;
use appflow_core::preload::PreloadConfig;
use appflow_core::reclaim::ReclaimConfig;
use appflow_core::scheduler::SchedulerConfig;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use thiserror::Error;

/// What is wrong with a configuration.
#[derive(Debug, Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("config {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// Not TOML, a wrong type, or an unknown field.
    #[error("config {path}: {msg}")]
    Parse {
        /// The file (or `<string>`).
        path: String,
        /// The parser's message (names the field).
        msg: String,
    },
    /// A field has an impossible value.
    #[error("config {path}: field {field}: {msg}")]
    Invalid {
        /// The file (or `<string>`).
        path: String,
        /// The dotted field name, e.g. `daemon.tick_ms`.
        field: String,
        /// What is wrong.
        msg: String,
    },
}

/// The whole configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Daemon-wide settings.
    pub daemon: DaemonSection,
    /// The memory domain scheduled as "the device".
    pub domain: DomainSection,
    /// Selective File Preloader.
    pub preload: PreloadSection,
    /// Adaptive Memory Reclaimer.
    pub reclaim: ReclaimSection,
    /// Context-Aware Process Killer.
    pub killer: KillerSection,
    /// Launch detection without a launcher, and profiles learned on the fly.
    pub detect: DetectSection,
    /// Declared apps (`[[app]]`); apps can also be announced over the socket.
    #[serde(rename = "app")]
    pub apps: Vec<AppDecl>,
}

/// `[daemon]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DaemonSection {
    /// Unix control socket (created with mode 0600).
    pub socket: PathBuf,
    /// State directory: `profiles/` (one JSON per app), `journal.json`, `calibration.json`.
    pub state_dir: PathBuf,
    /// Decide and log, change nothing (every actuator only logs).
    pub dry_run: bool,
    /// Period of the control loop, ms (the AppFlow paper §4.2.1: 100 ms).
    pub tick_ms: u64,
    /// Optional Prometheus text file, rewritten atomically every second ("" = none).
    pub metrics_file: PathBuf,
    /// Optional Chrome/Perfetto JSON trace of decisions ("" = none).
    pub trace_file: PathBuf,
    /// Optional JSON-lines log of every record the scheduler was given
    /// (ticks and events) and of every decision it made, replayable through
    /// `appflow_core::scheduler::replay` ("" = none).
    pub record_file: PathBuf,
    /// Re-scan the domain's processes this often, ms.
    pub scan_interval_ms: u64,
    /// A launch whose `launched` event never comes is ended after this long, ms.
    pub launch_timeout_ms: u64,
    /// Root of the proc file system (tests point it elsewhere).
    pub proc_root: PathBuf,
    /// The registered policy to run (`appflow sim --help` lists them all;
    /// policies that change the kernel itself run in the simulator only).
    pub policy: String,
    /// Accept `notify` for app names neither declared (`[[app]]`) nor
    /// profiled (`appflow record`), up to `max_undeclared_apps` of them.
    pub allow_undeclared_apps: bool,
    /// Most undeclared app names remembered when `allow_undeclared_apps`
    /// is on (bounds the daemon's app table; 1..=4096).
    pub max_undeclared_apps: usize,
}

/// Default of `daemon.max_undeclared_apps`: well above the apps a device
/// uses (the AppFlow paper's 100-day traces switch between 60 apps), small enough
/// that the daemon's app table and `status` reply stay small.
pub const DEFAULT_MAX_UNDECLARED_APPS: usize = 256;

impl Default for DaemonSection {
    fn default() -> Self {
        Self {
            socket: PathBuf::from("/run/appflow/appflow.sock"),
            state_dir: PathBuf::from("/var/lib/appflow"),
            dry_run: false,
            tick_ms: 100,
            metrics_file: PathBuf::new(),
            trace_file: PathBuf::new(),
            record_file: PathBuf::new(),
            scan_interval_ms: 1000,
            launch_timeout_ms: 30_000,
            proc_root: PathBuf::from("/proc"),
            policy: "appflow".into(),
            allow_undeclared_apps: false,
            max_undeclared_apps: DEFAULT_MAX_UNDECLARED_APPS,
        }
    }
}

/// Kind of memory domain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum DomainKind {
    /// The whole machine (MemAvailable, vmstat pgalloc_*, global swappiness).
    #[default]
    System,
    /// One memory cgroup (v1 or v2) as the device.
    Cgroup,
}

/// `[domain]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
pub struct DomainSection {
    /// "system" or "cgroup".
    pub kind: DomainKind,
    /// Path of the domain's memory cgroup (v1 or v2) when kind = "cgroup".
    pub memory_cgroup: PathBuf,
    /// Optional v1 blkio cgroup the preload worker joins (throttled like the apps).
    pub blkio_cgroup: PathBuf,
}

/// `[preload]`: the daemon's switches plus every `PreloadConfig` field.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "toml::Table")]
pub struct PreloadSection {
    /// Run the preloader (when the policy has one).
    pub enabled: bool,
    /// The core's preloader parameters (budget M_p, cutoffs, read size, touch interval).
    #[serde(flatten)]
    pub core: PreloadConfig,
}

impl Default for PreloadSection {
    fn default() -> Self {
        Self {
            enabled: true,
            core: PreloadConfig::default(),
        }
    }
}

/// `[reclaim]`: the daemon's switches plus every `ReclaimConfig` field.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "toml::Table")]
pub struct ReclaimSection {
    /// Run the reclaimer (when the policy has one).
    pub enabled: bool,
    /// In efficiency-first, also drop (POSIX_FADV_DONTNEED) cold unprotected
    /// files of background apps' profiles.
    pub drop_cold_files: bool,
    /// M_F derived from the apps' launches (`low_memory_bytes = "auto"`, the
    /// default; docs/daemon.md "Sizing"), else `core.low_memory_bytes`.
    #[serde(skip_serializing)]
    pub auto_low_memory: bool,
    /// N_alloc derived from the apps' launch rates (`alloc_threshold_pages
    /// = "auto"`, the default), else `core.alloc_threshold_pages`.
    #[serde(skip_serializing)]
    pub auto_alloc_threshold: bool,
    /// The core's reclaimer parameters (N_alloc, M_F, hysteresis, rebalancing).
    #[serde(flatten)]
    pub core: ReclaimConfig,
}

impl Default for ReclaimSection {
    fn default() -> Self {
        Self {
            enabled: true,
            drop_cold_files: false,
            auto_low_memory: true,
            auto_alloc_threshold: true,
            core: ReclaimConfig {
                burst_ticks: appflow_core::reclaim::DAEMON_BURST_TICKS,
                ..ReclaimConfig::default()
            },
        }
    }
}

/// Takes a key that is `"auto"` or a number of the core's struct: true
/// (and the key removed) for `"auto"` or when absent (`default_auto`), false
/// (and the number left for the core) otherwise.
fn take_auto(t: &mut toml::Table, section: &str, key: &str) -> Result<bool, String> {
    match t.get(key) {
        None => Ok(true),
        Some(toml::Value::String(v)) if v == "auto" => {
            t.remove(key);
            Ok(true)
        }
        Some(toml::Value::String(v)) => Err(format!(
            "{section}.{key}: {v:?} is neither \"auto\" nor a number"
        )),
        Some(_) => Ok(false),
    }
}

/// `[killer]`: the daemon's switches plus every `KillerConfig` field.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "toml::Table")]
pub struct KillerSection {
    /// Run the killer (when the policy has one).
    pub enabled: bool,
    /// Process names (comm) never killed.
    pub protected: Vec<String>,
    /// Memory cgroups (absolute paths, as for `[[app]] cgroup`) whose
    /// processes, and those of every cgroup below, are never killed nor
    /// paged out.
    pub protected_cgroups: Vec<String>,
    /// Freeze the victim (v1 freezer) before killing it, where available.
    pub freeze_first: bool,
    /// The core's killer parameters (recency window, triggers, settle time).
    #[serde(flatten)]
    pub core: KillerConfig,
}

impl Default for KillerSection {
    fn default() -> Self {
        Self {
            enabled: true,
            protected: vec!["systemd".into(), "sshd".into()],
            protected_cgroups: Vec::new(),
            freeze_first: false,
            core: KillerConfig::default(),
        }
    }
}

/// `[detect]`: launches of declared apps detected from the kernel's exec
/// and exit events (no launcher integration), their readiness inferred,
/// and each detected launch recorded into the app's profile.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DetectSection {
    /// Detect launches of declared apps (process connector, else /proc scans).
    pub enabled: bool,
    /// A tick whose demand (bytes read / 4096 + page faults, per second)
    /// is at or below this is quiet. 0 = derived from the storage curve
    /// (`appflow_core::detect::ReadinessConfig::for_device`: half the
    /// 4 KiB read rate, in pages per second).
    pub quiet_floor_pages_per_s: u64,
    /// ... and whose CPU use (its processes' user + system time) is at or
    /// below this, per mille of one core (default 100, a tenth of a core:
    /// `appflow_core::detect::DEFAULT_QUIET_CPU_PERMILLE`); a value of 1000
    /// per core of the machine or more leaves CPU out of it.
    pub quiet_cpu_permille: u32,
    /// A launch is ready once quiet this long, ms (default: the AppFlow paper's 1 s
    /// usability threshold, `appflow_core::detect::DEFAULT_QUIET_MS`);
    /// lengthened per app to its profile's longest pause.
    pub quiet_ms: u64,
    /// Record detected launches (fanotify + page-cache residency, as
    /// `appflow record`) and merge them into the app's stored profile.
    pub learn_profiles: bool,
    /// Once an app's profile is settled (its latest recorded launch read
    /// what the profile held, `appflow_core::profile::SETTLED_CHANGE_PERMILLE`),
    /// record only one launch in this many (0 or 1: every launch). Default
    /// [`appflow_core::profile::HISTORY_LAUNCHES`]: one recording per
    /// window of the majority rule.
    pub relearn_every: u32,
}

impl Default for DetectSection {
    fn default() -> Self {
        Self {
            enabled: true,
            quiet_floor_pages_per_s: 0,
            quiet_cpu_permille: appflow_core::detect::DEFAULT_QUIET_CPU_PERMILLE,
            quiet_ms: appflow_core::detect::DEFAULT_QUIET_MS,
            learn_profiles: true,
            relearn_every: appflow_core::profile::HISTORY_LAUNCHES,
        }
    }
}

/// `[[app]]`: one app and how to recognise its processes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
pub struct AppDecl {
    /// App name (its profile is `<state_dir>/profiles/<name>.json`).
    pub name: String,
    /// Executable path (/proc/PID/exe) of its processes ("" = not used).
    pub exe: String,
    /// Regex matched against the space-joined command line ("" = not used).
    pub cmdline: String,
    /// Memory cgroup path holding its processes ("" = not used).
    pub cgroup: String,
}

/// Takes `key` out of `t` and deserialises it, or returns `default`.
fn take<T: serde::de::DeserializeOwned>(
    t: &mut toml::Table,
    section: &str,
    key: &str,
    default: T,
) -> Result<T, String> {
    match t.remove(key) {
        None => Ok(default),
        Some(v) => v
            .try_into::<T>()
            .map_err(|e| format!("{section}.{key}: {}", e.message().trim())),
    }
}

fn core_part<T: serde::de::DeserializeOwned>(t: toml::Table, section: &str) -> Result<T, String> {
    toml::Value::Table(t)
        .try_into::<T>()
        .map_err(|e| format!("[{section}]: {}", e.message().trim()))
}

impl TryFrom<toml::Table> for PreloadSection {
    type Error = String;
    fn try_from(mut t: toml::Table) -> Result<Self, String> {
        let d = Self::default();
        Ok(Self {
            enabled: take(&mut t, "preload", "enabled", d.enabled)?,
            core: core_part(t, "preload")?,
        })
    }
}

impl TryFrom<toml::Table> for ReclaimSection {
    type Error = String;
    fn try_from(mut t: toml::Table) -> Result<Self, String> {
        let d = Self::default();
        Ok(Self {
            enabled: take(&mut t, "reclaim", "enabled", d.enabled)?,
            drop_cold_files: take(&mut t, "reclaim", "drop_cold_files", d.drop_cold_files)?,
            auto_low_memory: take_auto(&mut t, "reclaim", "low_memory_bytes")?,
            auto_alloc_threshold: take_auto(&mut t, "reclaim", "alloc_threshold_pages")?,
            core: {
                if !t.contains_key("burst_ticks") {
                    t.insert(
                        "burst_ticks".into(),
                        toml::Value::Integer(appflow_core::reclaim::DAEMON_BURST_TICKS.into()),
                    );
                }
                core_part(t, "reclaim")?
            },
        })
    }
}

impl TryFrom<toml::Table> for KillerSection {
    type Error = String;
    fn try_from(mut t: toml::Table) -> Result<Self, String> {
        let d = Self::default();
        Ok(Self {
            enabled: take(&mut t, "killer", "enabled", d.enabled)?,
            protected: take(&mut t, "killer", "protected", d.protected)?,
            protected_cgroups: take(&mut t, "killer", "protected_cgroups", d.protected_cgroups)?,
            freeze_first: take(&mut t, "killer", "freeze_first", d.freeze_first)?,
            core: core_part(t, "killer")?,
        })
    }
}

/// A cgroup path as the configuration takes it: absolute, no `.` or `..`
/// component, no control character, not the root of the hierarchy.
fn check_cgroup_path(c: &str) -> Result<(), String> {
    if !c.starts_with('/') {
        return Err(format!("{c:?} must be an absolute path"));
    }
    if c.chars().any(char::is_control) {
        return Err(format!("{c:?} holds a control character"));
    }
    if c.split('/').any(|part| part == "." || part == "..") {
        return Err(format!("{c:?} must not hold . or .. components"));
    }
    // The root of the hierarchy: the cgroup mount itself, or a v1
    // controller's mount below it (`/sys/fs/cgroup/memory`).
    let mount = c
        .trim_end_matches('/')
        .strip_prefix("/sys/fs/cgroup")
        .map(|r| r.split('/').filter(|p| !p.is_empty()).count());
    if c.trim_end_matches('/').is_empty() || matches!(mount, Some(0 | 1)) {
        return Err(format!(
            "{c:?} is the root of its hierarchy: every process would be protected"
        ));
    }
    Ok(())
}

/// Is `name` usable as an app name (and profile file name)? The shared
/// rule, [`appflow_core::valid_app_name`].
pub fn valid_app_name(name: &str) -> bool {
    appflow_core::valid_app_name(name).is_ok()
}

impl Config {
    /// Parses and validates TOML text; `origin` names the source in errors.
    pub fn from_toml(text: &str, origin: &str) -> Result<Self, ConfigError> {
        let cfg: Config = toml::from_str(text).map_err(|e| ConfigError::Parse {
            path: origin.to_string(),
            msg: e.to_string().trim().replace('\n', " "),
        })?;
        cfg.validate()
            .map_err(|(field, msg)| ConfigError::Invalid {
                path: origin.to_string(),
                field,
                msg,
            })?;
        Ok(cfg)
    }

    /// Reads, parses and validates a file.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Self::from_toml(&text, &path.display().to_string())
    }

    /// Checks every field; the error is (dotted field name, message).
    pub fn validate(&self) -> Result<(), (String, String)> {
        let bad = |f: &str, m: &str| Err((f.to_string(), m.to_string()));
        let d = &self.daemon;
        if d.socket.as_os_str().is_empty() {
            return bad("daemon.socket", "must not be empty");
        }
        if d.state_dir.as_os_str().is_empty() {
            return bad("daemon.state_dir", "must not be empty");
        }
        if !(10..=60_000).contains(&d.tick_ms) {
            return bad("daemon.tick_ms", "must be in 10..=60000");
        }
        if d.scan_interval_ms < d.tick_ms {
            return bad("daemon.scan_interval_ms", "must be >= daemon.tick_ms");
        }
        if d.launch_timeout_ms == 0 || d.launch_timeout_ms > 3_600_000 {
            return bad("daemon.launch_timeout_ms", "must be in 1..=3600000");
        }
        if d.scan_interval_ms > 3_600_000 {
            return bad("daemon.scan_interval_ms", "must be at most 3600000");
        }
        if !(1..=4096).contains(&d.max_undeclared_apps) {
            return bad("daemon.max_undeclared_apps", "must be in 1..=4096");
        }
        match appflow_core::policy::lookup(&d.policy) {
            Ok(p) => {
                if let Some(why) = p.needs_kernel_change() {
                    return Err(("daemon.policy".into(), why));
                }
            }
            Err(e) => return Err(("daemon.policy".into(), e.to_string())),
        }
        match self.domain.kind {
            DomainKind::Cgroup if self.domain.memory_cgroup.as_os_str().is_empty() => {
                return bad(
                    "domain.memory_cgroup",
                    "must be set when domain.kind = \"cgroup\"",
                );
            }
            DomainKind::System if !self.domain.memory_cgroup.as_os_str().is_empty() => {
                return bad(
                    "domain.memory_cgroup",
                    "is only used with domain.kind = \"cgroup\"",
                );
            }
            _ => {}
        }
        // The core checks its own fields and names them ("reclaim.x must ...").
        for check in [
            self.preload.core.validate(),
            self.reclaim.core.validate(),
            self.killer.core.validate(),
        ] {
            if let Err(msg) = check {
                let field = msg.split_whitespace().next().unwrap_or("").to_string();
                return Err((field, msg));
            }
        }
        let det = &self.detect;
        if det.quiet_ms == 0 || det.quiet_ms >= d.launch_timeout_ms {
            return bad(
                "detect.quiet_ms",
                "must be > 0 and below daemon.launch_timeout_ms",
            );
        }
        // 2^32 pages/s is 16 TiB/s: beyond any storage.
        if det.quiet_floor_pages_per_s > u64::from(u32::MAX) {
            return bad(
                "detect.quiet_floor_pages_per_s",
                "must be at most 4294967295",
            );
        }
        for (i, c) in self.killer.protected_cgroups.iter().enumerate() {
            if let Err(why) = check_cgroup_path(c) {
                return Err((format!("killer.protected_cgroups[{i}]"), why));
            }
        }
        let mut seen = std::collections::BTreeSet::new();
        for (i, a) in self.apps.iter().enumerate() {
            let f = |x: &str| format!("app[{i}].{x}");
            if let Err(why) = appflow_core::valid_app_name(&a.name) {
                return Err((
                    f("name"),
                    format!("{:?} is not a valid app name: {why}", a.name),
                ));
            }
            if !seen.insert(a.name.as_str()) {
                return Err((f("name"), format!("{:?} is declared twice", a.name)));
            }
            if a.exe.is_empty() && a.cmdline.is_empty() && a.cgroup.is_empty() {
                return Err((f("exe"), "one of exe, cmdline, cgroup must be set".into()));
            }
            if !a.cmdline.is_empty() {
                if let Err(e) = regex::Regex::new(&a.cmdline) {
                    return Err((f("cmdline"), format!("bad regex: {e}")));
                }
            }
        }
        Ok(())
    }

    /// The registered policy (validated).
    pub fn policy(&self) -> &'static appflow_core::policy::Policy {
        appflow_core::policy::lookup(&self.daemon.policy)
            .unwrap_or(appflow_core::policy::REGISTRY[0])
    }

    /// The scheduler's configuration: the policy and the modules' parameters,
    /// without any path.
    pub fn scheduler_config(&self) -> SchedulerConfig {
        SchedulerConfig {
            policy: self.policy(),
            preload: self.preload.core.clone(),
            reclaim: self.reclaim.core.clone(),
            killer: self.killer.core.clone(),
            preload_enabled: self.preload.enabled,
            reclaim_enabled: self.reclaim.enabled,
            killer_enabled: self.killer.enabled,
            drop_cold_files: self.reclaim.drop_cold_files,
            protected_comms: self.killer.protected.clone(),
            launch_timeout_ms: self.daemon.launch_timeout_ms,
            max_undeclared_apps: self.daemon.max_undeclared_apps,
            auto_low_memory: self.reclaim.auto_low_memory,
            auto_alloc_threshold: self.reclaim.auto_alloc_threshold,
        }
    }

    /// Whether the preloader runs (a worker is needed): file preloading,
    /// switch prepaging (ASAP: the worker advises the pages), or cold
    /// marking (Ariadne: the worker marks the pages cold).
    pub fn preload_active(&self) -> bool {
        let c = self.scheduler_config();
        c.preload_strategy() != appflow_core::policy::PreloadStrategy::None
            || (c.preload_enabled
                && c.policy.switch == appflow_core::policy::SwitchStrategy::Prepage)
            || (c.reclaim_enabled
                && c.policy.reclaim == appflow_core::policy::ReclaimStrategy::HotnessAware)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_text_is_the_default() {
        let c = Config::from_toml("", "<t>").unwrap();
        assert_eq!(c, Config::default());
    }

    #[test]
    fn example_file_parses_and_lists_every_default() {
        let text = include_str!("../appflow.example.toml");
        let c = Config::from_toml(text, "appflow.example.toml").unwrap();
        // Everything but the example's [[app]] entries is the default.
        let mut no_apps = c.clone();
        no_apps.apps.clear();
        assert_eq!(no_apps, Config::default());
        assert_eq!(c.apps.len(), 1);
        // Every default key appears in the example (uncommented).
        let v: toml::Table = toml::from_str(text).unwrap();
        let d = toml::Table::try_from(Config::default()).unwrap();
        for (section, body) in d {
            if let toml::Value::Table(t) = body {
                for key in t.keys() {
                    assert!(
                        v.get(&section).and_then(|s| s.get(key)).is_some(),
                        "example lacks {section}.{key}"
                    );
                }
            }
        }
    }

    #[test]
    fn pmr_runs_its_user_space_half() {
        let c = Config::from_toml("[daemon]\npolicy = \"pmr\"\n", "<t>").unwrap();
        assert_eq!(c.policy().name, "pmr");
        assert!(c.policy().kernel_part().is_some());
    }

    #[test]
    fn section_fields_merge_with_core_fields() {
        let c = Config::from_toml(
            "[daemon]\npolicy = \"paralfetch\"\n[preload]\nbudget_bytes = 1024\n\
             [killer]\nsettle_ms = 9\n[reclaim]\nenabled = false\n",
            "<t>",
        )
        .unwrap();
        assert_eq!(c.policy().name, "prefetch");
        assert_eq!(c.preload.core.budget_bytes, 1024);
        assert_eq!(c.killer.core.settle_ms, 9);
        assert!(!c.reclaim.enabled);
    }

    #[test]
    fn reclaim_thresholds_are_auto_unless_given() {
        let c = Config::default();
        assert!(c.reclaim.auto_low_memory && c.reclaim.auto_alloc_threshold);
        let c = Config::from_toml(
            "[reclaim]\nlow_memory_bytes = \"auto\"\nalloc_threshold_pages = 2000\n",
            "<t>",
        )
        .unwrap();
        assert!(c.reclaim.auto_low_memory);
        assert!(!c.reclaim.auto_alloc_threshold);
        assert_eq!(c.reclaim.core.alloc_threshold_pages, 2000);
        let s = c.scheduler_config();
        assert!(s.auto_low_memory && !s.auto_alloc_threshold);
        let e = Config::from_toml("[reclaim]\nlow_memory_bytes = \"big\"\n", "<t>").unwrap_err();
        assert!(e.to_string().contains("reclaim.low_memory_bytes"), "{e}");
    }

    #[test]
    fn protected_cgroups_are_taken_and_checked() {
        let c = Config::from_toml(
            "[killer]\nprotected_cgroups = [\"/sys/fs/cgroup/memory/system.slice\"]\n",
            "<t>",
        )
        .unwrap();
        assert_eq!(
            c.killer.protected_cgroups,
            vec!["/sys/fs/cgroup/memory/system.slice".to_string()]
        );
        assert!(Config::default().killer.protected_cgroups.is_empty());
    }

    #[test]
    fn switch_prepaging_policies_run_and_start_the_worker() {
        for p in ["asap", "appflow+asap"] {
            let c = Config::from_toml(&format!("[daemon]\npolicy = \"{p}\"\n"), "<t>").unwrap();
            assert!(c.preload_active(), "{p}");
            let off = Config::from_toml(
                &format!("[daemon]\npolicy = \"{p}\"\n[preload]\nenabled = false\n"),
                "<t>",
            )
            .unwrap();
            assert!(!off.preload_active(), "{p}");
        }
        let c = Config::from_toml("[daemon]\npolicy = \"pmr\"\n", "<t>").unwrap();
        assert!(!c.preload_active());
    }

    #[test]
    fn ariadne_runs_its_user_space_half_with_the_worker() {
        let c = Config::from_toml("[daemon]\npolicy = \"ariadne\"\n", "<t>").unwrap();
        assert_eq!(c.policy().name, "ariadne");
        assert!(c.policy().kernel_part().is_some());
        // The worker marks the pages cold; turning reclaim off stops it.
        assert!(c.preload_active());
        let off = Config::from_toml(
            "[daemon]\npolicy = \"ariadne\"\n[reclaim]\nenabled = false\n",
            "<t>",
        )
        .unwrap();
        assert!(!off.preload_active());
        // Acclaim is a kernel change only: refused, naming the field.
        let e = Config::from_toml("[daemon]\npolicy = \"acclaim\"\n", "<t>").unwrap_err();
        assert!(e.to_string().contains("daemon.policy"), "{e}");
    }

    #[test]
    fn errors_name_the_field() {
        let cases = [
            ("[daemon]\ntick_ms = 0\n", "daemon.tick_ms"),
            ("[daemon]\nbogus = 1\n", "bogus"),
            ("[preload]\nbogus_bytes = 1\n", "bogus_bytes"),
            ("[preload]\nstrategy = \"fast\"\n", "strategy"),
            ("[daemon]\npolicy = \"fast\"\n", "daemon.policy"),
            ("[daemon]\npolicy = \"acclaim\"\n", "daemon.policy"),
            ("[daemon]\npolicy = \"acclaim\"\n", "daemon.policy"),
            ("[killer]\nprotected = 3\n", "killer.protected"),
            (
                "[killer]\nprotected_cgroups = \"/sys/fs/cgroup/memory/x\"\n",
                "killer.protected_cgroups",
            ),
            (
                "[killer]\nprotected_cgroups = [\"relative/x\"]\n",
                "killer.protected_cgroups[0]",
            ),
            (
                "[killer]\nprotected_cgroups = [\"/a\", \"/sys/fs/cgroup/memory/../x\"]\n",
                "killer.protected_cgroups[1]",
            ),
            (
                "[killer]\nprotected_cgroups = [\"/sys/fs/cgroup/memory\"]\n",
                "killer.protected_cgroups[0]",
            ),
            (
                "[reclaim]\nlow_memory_fraction = 2.0\n",
                "reclaim.low_memory_fraction",
            ),
            ("[domain]\nkind = \"cgroup\"\n", "domain.memory_cgroup"),
            ("[[app]]\nname = \"a/b\"\nexe = \"/x\"\n", "app[0].name"),
            ("[[app]]\nname = \"a\"\n", "app[0].exe"),
            ("[[app]]\nname = \"a\"\ncmdline = \"(\"\n", "app[0].cmdline"),
            ("[daemon]\ntick_ms = \"fast\"\n", "tick_ms"),
            ("[detect]\nquiet_ms = 0\n", "detect.quiet_ms"),
            ("[detect]\nquiet_ms = 30000\n", "detect.quiet_ms"),
            (
                "[detect]\nquiet_floor_pages_per_s = 99999999999\n",
                "detect.quiet_floor_pages_per_s",
            ),
            ("[detect]\nbogus = 1\n", "bogus"),
            // Every numeric field is range-checked (issue: these were accepted).
            (
                "[killer]\ntrigger_swap_free_fraction = nan\n",
                "killer.trigger_swap_free_fraction",
            ),
            (
                "[killer]\ntrigger_swap_free_fraction = -0.5\n",
                "killer.trigger_swap_free_fraction",
            ),
            (
                "[reclaim]\nalloc_threshold_pages = 0\n",
                "reclaim.alloc_threshold_pages",
            ),
            ("[reclaim]\ncalm_ticks = 0\n", "reclaim.calm_ticks"),
            ("[reclaim]\nexit_margin = inf\n", "reclaim.exit_margin"),
            (
                "[preload]\nlikelihood_window_ms = 0\n",
                "preload.likelihood_window_ms",
            ),
            (
                "[preload]\nbudget_unit_bytes = 0\n",
                "preload.budget_unit_bytes",
            ),
            ("[killer]\nsettle_ms = 18446744073709551615\n", "settle_ms"),
            (
                "[daemon]\nmax_undeclared_apps = 0\n",
                "daemon.max_undeclared_apps",
            ),
            ("[[app]]\nname = \".x\"\nexe = \"/x\"\n", "app[0].name"),
            ("[[app]]\nname = \"a..b\"\nexe = \"/x\"\n", "app[0].name"),
        ];
        for (text, field) in cases {
            let e = Config::from_toml(text, "f.toml").unwrap_err().to_string();
            assert!(e.contains(field), "{text:?}: {e:?} lacks {field}");
            assert!(e.contains("f.toml"), "{e}");
        }
    }

    #[test]
    fn app_names() {
        assert!(valid_app_name("tiktok"));
        assert!(!valid_app_name(""));
        assert!(!valid_app_name(".."));
        assert!(!valid_app_name("a/b"));
        // The store refuses these as file names; so does the config.
        assert!(!valid_app_name(".x"));
        assert!(!valid_app_name("a..b"));
    }
}
