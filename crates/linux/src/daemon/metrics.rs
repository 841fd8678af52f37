//! Observability of the daemon: Prometheus text metrics (served by the
//! socket's `metrics` command and written to `metrics_file`) and a
//! Chrome/Perfetto JSON trace (`trace_file`: mode spans, launch spans, kill
//! instants, domain memory counters) that opens in ui.perfetto.dev.

use super::{Decision, DomainSample, Mark};
use appflow_core::reclaim::ReclaimMode;
use appflow_core::scheduler::Stats;
use serde_json::json;
use std::collections::BTreeMap;
use std::fmt::Write;

/// Bucket upper bounds of the loop histograms, seconds.
pub const LOOP_BUCKETS_S: [f64; 12] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 1.0,
];

/// A latency histogram: Prometheus buckets plus a ring of recent samples for quantiles.
#[derive(Debug, Clone, Default)]
pub struct Histogram {
    counts: [u64; LOOP_BUCKETS_S.len()],
    count: u64,
    sum_s: f64,
    recent: Vec<f64>,
    next: usize,
}

const RECENT_KEPT: usize = 20_000;

impl Histogram {
    /// Records one observation, seconds.
    pub fn observe(&mut self, v_s: f64) {
        for (i, b) in LOOP_BUCKETS_S.iter().enumerate() {
            if v_s <= *b {
                self.counts[i] += 1;
            }
        }
        self.count += 1;
        self.sum_s += v_s;
        if self.recent.len() < RECENT_KEPT {
            self.recent.push(v_s);
        } else {
            self.recent[self.next] = v_s;
            self.next = (self.next + 1) % RECENT_KEPT;
        }
    }

    /// Observations so far.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The q-quantile (0..=1) of the recent observations, seconds (nearest rank).
    pub fn quantile(&self, q: f64) -> f64 {
        if self.recent.is_empty() {
            return 0.0;
        }
        let mut v = self.recent.clone();
        v.sort_by(|a, b| a.total_cmp(b));
        let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
        v[rank - 1]
    }

    fn render(&self, out: &mut String, name: &str, help: &str) {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        for (b, c) in LOOP_BUCKETS_S.iter().zip(self.counts) {
            let _ = writeln!(out, "{name}_bucket{{le=\"{b}\"}} {c}");
        }
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {}", self.count);
        let _ = writeln!(out, "{name}_sum {}", self.sum_s);
        let _ = writeln!(out, "{name}_count {}", self.count);
    }
}

/// The daemon's counters: the scheduler's own, and the live loop's.
#[derive(Debug, Clone, Default)]
pub struct Metrics {
    /// What the scheduler did (a copy of its counters).
    pub sched: Stats,
    /// Lateness of the tick start against its schedule.
    pub loop_jitter: Histogram,
    /// Work time of a tick.
    pub loop_work: Histogram,
    /// Requests refused on the socket (malformed, unauthorised).
    pub socket_errors: u64,
}

/// Live values that are not counters of the scheduler (filled by the runtime).
#[derive(Debug, Clone, Default)]
pub struct Gauges {
    /// Current mode.
    pub mode: Option<ReclaimMode>,
    /// Latest domain sample.
    pub sample: Option<DomainSample>,
    /// n_alloc of the latest tick.
    pub alloc_pages: u64,
    /// Preload budget M_p.
    pub budget_bytes: u64,
    /// Bytes mlocked by the worker.
    pub protected_bytes: u64,
    /// Bytes of touched standby spans.
    pub standby_bytes: u64,
    /// Bytes read by the worker's loads.
    pub preload_read_bytes: u64,
    /// Bytes read by the worker's touches.
    pub touch_read_bytes: u64,
    /// Bytes dropped by fadvise.
    pub dropped_bytes: u64,
    /// Processes watched in the domain.
    pub processes: u64,
    /// Apps known.
    pub apps: u64,
    /// Features (name, available).
    pub features: Vec<(&'static str, bool)>,
    /// Settings changed and not yet restored.
    pub changed_settings: u64,
    /// `process_madvise(MADV_PAGEOUT)` calls made.
    pub page_out_calls: u64,
    /// Failed page-out requests by errno.
    pub page_out_errors: BTreeMap<i32, u64>,
    /// Bytes the worker advised with `MADV_WILLNEED` (switch prepaging).
    pub prepaged_bytes: u64,
    /// Bytes the worker marked with `MADV_COLD` (Ariadne's cold marking).
    pub cold_marked_bytes: u64,
    /// Switch prepaging's precision and recall so far (ASAP's feedback).
    pub prepage_precision: Option<f64>,
    /// See `prepage_precision`.
    pub prepage_recall: Option<f64>,
}

/// The symbolic name of an errno value (`EINVAL`), or `errno N`.
pub fn errno_name(errno: i32) -> String {
    match nix::errno::Errno::from_raw(errno) {
        nix::errno::Errno::UnknownErrno => format!("errno {errno}"),
        e => format!("{e:?}"),
    }
}

/// Renders the Prometheus text exposition.
pub fn render(m: &Metrics, g: &Gauges) -> String {
    let mut o = String::new();
    let gauge = |o: &mut String, name: &str, help: &str, v: f64| {
        let _ = writeln!(o, "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {v}");
    };
    let mode = g.mode.unwrap_or(ReclaimMode::Normal);
    let _ = writeln!(o, "# HELP appflow_reclaim_mode Current reclaim mode (1 = active).\n# TYPE appflow_reclaim_mode gauge");
    for md in [
        ReclaimMode::Normal,
        ReclaimMode::EfficiencyFirst,
        ReclaimMode::Rebalancing,
    ] {
        let _ = writeln!(
            o,
            "appflow_reclaim_mode{{mode=\"{}\"}} {}",
            md.name(),
            u8::from(md == mode)
        );
    }
    let _ = writeln!(o, "# HELP appflow_mode_switches_total Reclaim mode switches.\n# TYPE appflow_mode_switches_total counter");
    for ((f, t), n) in &m.sched.mode_switches {
        let _ = writeln!(
            o,
            "appflow_mode_switches_total{{from=\"{f}\",to=\"{t}\"}} {n}"
        );
    }
    let _ = writeln!(o, "# HELP appflow_reclaim_ticks_total Reclaim ticks by reason.\n# TYPE appflow_reclaim_ticks_total counter");
    for ((code, name), n) in &m.sched.reclaim_reasons {
        let _ = writeln!(
            o,
            "appflow_reclaim_ticks_total{{reason=\"{name}\",code=\"{code}\"}} {n}"
        );
    }
    let _ = writeln!(o, "# HELP appflow_reclaimed_bytes_total Bytes reclaimed by the daemon, by type.\n# TYPE appflow_reclaimed_bytes_total counter");
    let _ = writeln!(
        o,
        "appflow_reclaimed_bytes_total{{type=\"anon\"}} {}",
        m.sched.reclaimed_anon_bytes
    );
    let _ = writeln!(
        o,
        "appflow_reclaimed_bytes_total{{type=\"file\"}} {}",
        g.dropped_bytes
    );
    let t = &m.sched.refault_total;
    let _ = writeln!(o, "# HELP appflow_refault_window_pages_total Pages of the re-fault windows judged (re-fault-aware reclaim), by kind: refault, evicted, kswapd, direct.\n# TYPE appflow_refault_window_pages_total counter");
    for (kind, n) in [
        ("refault", t.refault_pages),
        ("evicted", t.evicted_pages),
        ("kswapd", t.kswapd_pages),
        ("direct", t.direct_pages),
    ] {
        let _ = writeln!(
            o,
            "appflow_refault_window_pages_total{{kind=\"{kind}\"}} {n}"
        );
    }
    let _ = writeln!(o, "# HELP appflow_reclaim_step_changes_total Changes of kswapd's step (vm.watermark_scale_factor).\n# TYPE appflow_reclaim_step_changes_total counter\nappflow_reclaim_step_changes_total {}", m.sched.reclaim_step_changes);
    if let Some(w) = m.sched.reclaim_step {
        let _ = writeln!(o, "# HELP appflow_reclaim_step kswapd's step in force (vm.watermark_scale_factor).\n# TYPE appflow_reclaim_step gauge\nappflow_reclaim_step {w}");
    }
    let _ = writeln!(o, "# HELP appflow_prepage_calls_total Switches prepaged (ASAP).\n# TYPE appflow_prepage_calls_total counter\nappflow_prepage_calls_total {}", m.sched.prepage_calls);
    let _ = writeln!(o, "# HELP appflow_cold_marked_bytes_total Anonymous bytes of background apps outside their last window's hot set: asked by the scheduler, marked (MADV_COLD) by the worker (Ariadne).\n# TYPE appflow_cold_marked_bytes_total counter\nappflow_cold_marked_bytes_total{{kind=\"asked\"}} {}\nappflow_cold_marked_bytes_total{{kind=\"marked\"}} {}", m.sched.cold_marked_bytes, g.cold_marked_bytes);
    let _ = writeln!(o, "# HELP appflow_prepage_bytes_total Switch prepaging bytes: asked by the scheduler, advised (MADV_WILLNEED) by the worker.\n# TYPE appflow_prepage_bytes_total counter\nappflow_prepage_bytes_total{{kind=\"asked\"}} {}\nappflow_prepage_bytes_total{{kind=\"advised\"}} {}", m.sched.prepage_requested_bytes, g.prepaged_bytes);
    if let Some(p) = g.prepage_precision {
        gauge(
            &mut o,
            "appflow_prepage_precision",
            "Prepaged bytes the switches used, over bytes prepaged (ASAP).",
            p,
        );
    }
    if let Some(r) = g.prepage_recall {
        gauge(
            &mut o,
            "appflow_prepage_recall",
            "Prepaged bytes the switches used, over their footprint (ASAP).",
            r,
        );
    }
    let _ = writeln!(o, "# HELP appflow_page_out_calls_total process_madvise(MADV_PAGEOUT) calls.\n# TYPE appflow_page_out_calls_total counter\nappflow_page_out_calls_total {}", g.page_out_calls);
    let _ = writeln!(o, "# HELP appflow_page_out_errors_total Failed page-out requests, by errno (a vanished process is not counted).\n# TYPE appflow_page_out_errors_total counter");
    for (e, n) in &g.page_out_errors {
        let _ = writeln!(
            o,
            "appflow_page_out_errors_total{{errno=\"{e}\",name=\"{}\"}} {n}",
            errno_name(*e)
        );
    }
    let _ = writeln!(o, "# HELP appflow_kills_total Processes (apps) killed, by reason.\n# TYPE appflow_kills_total counter");
    for ((code, name), n) in &m.sched.kills {
        let _ = writeln!(
            o,
            "appflow_kills_total{{reason=\"{name}\",code=\"{code}\"}} {n}"
        );
    }
    let _ = writeln!(o, "# HELP appflow_killed_bytes_total Footprint of killed apps.\n# TYPE appflow_killed_bytes_total counter\nappflow_killed_bytes_total {}", m.sched.killed_bytes);
    let _ = writeln!(o, "# HELP appflow_notifications_total Notifications received.\n# TYPE appflow_notifications_total counter");
    for (e, n) in &m.sched.events {
        let _ = writeln!(o, "appflow_notifications_total{{event=\"{e}\"}} {n}");
    }
    let _ = writeln!(o, "# HELP appflow_preload_queued_bytes_total Bytes queued to the preload worker, by hold.\n# TYPE appflow_preload_queued_bytes_total counter");
    let _ = writeln!(
        o,
        "appflow_preload_queued_bytes_total{{hold=\"touch\"}} {}",
        m.sched.preload_queued_bytes_touch
    );
    let _ = writeln!(
        o,
        "appflow_preload_queued_bytes_total{{hold=\"protect\"}} {}",
        m.sched.preload_queued_bytes_protect
    );
    let _ = writeln!(o, "# HELP appflow_preload_read_bytes_total Bytes read by the preload worker, by cause.\n# TYPE appflow_preload_read_bytes_total counter");
    let _ = writeln!(
        o,
        "appflow_preload_read_bytes_total{{cause=\"load\"}} {}",
        g.preload_read_bytes
    );
    let _ = writeln!(
        o,
        "appflow_preload_read_bytes_total{{cause=\"touch\"}} {}",
        g.touch_read_bytes
    );
    gauge(
        &mut o,
        "appflow_preload_protected_bytes",
        "Bytes mlocked by the preload worker.",
        g.protected_bytes as f64,
    );
    gauge(
        &mut o,
        "appflow_preload_standby_bytes",
        "Bytes of standby spans kept warm.",
        g.standby_bytes as f64,
    );
    gauge(
        &mut o,
        "appflow_preload_budget_bytes",
        "Preload budget M_p.",
        g.budget_bytes as f64,
    );
    gauge(
        &mut o,
        "appflow_preload_plan_bytes",
        "Sum of P_i(s_i) of the cutoff plan.",
        m.sched.plan_bytes as f64,
    );
    let _ = writeln!(o, "# HELP appflow_cutoff_plans_total Cutoff plans solved.\n# TYPE appflow_cutoff_plans_total counter\nappflow_cutoff_plans_total {}", m.sched.plans_solved);
    if let Some(s) = g.sample {
        gauge(
            &mut o,
            "appflow_domain_total_bytes",
            "The domain's memory.",
            s.total_bytes as f64,
        );
        gauge(
            &mut o,
            "appflow_domain_available_bytes",
            "M_aval of the domain.",
            s.avail_bytes as f64,
        );
        gauge(
            &mut o,
            "appflow_domain_anon_bytes",
            "Anonymous memory in the domain.",
            s.anon_bytes as f64,
        );
        gauge(
            &mut o,
            "appflow_domain_file_bytes",
            "Page cache in the domain.",
            s.file_bytes as f64,
        );
        if let Some(p) = s.psi_some_avg10 {
            gauge(
                &mut o,
                "appflow_psi_memory_some_avg10",
                "PSI memory some avg10, percent.",
                p,
            );
        }
    }
    gauge(
        &mut o,
        "appflow_alloc_pages_per_tick",
        "n_alloc of the last tick.",
        g.alloc_pages as f64,
    );
    gauge(
        &mut o,
        "appflow_processes_watched",
        "Processes in the domain.",
        g.processes as f64,
    );
    gauge(
        &mut o,
        "appflow_apps_known",
        "Apps known to the daemon.",
        g.apps as f64,
    );
    gauge(
        &mut o,
        "appflow_changed_settings",
        "Settings changed and not yet restored.",
        g.changed_settings as f64,
    );
    let _ = writeln!(o, "# HELP appflow_socket_errors_total Refused control requests.\n# TYPE appflow_socket_errors_total counter\nappflow_socket_errors_total {}", m.socket_errors);
    let _ = writeln!(o, "# HELP appflow_kernel_feature Kernel features found (0 = missing, degraded).\n# TYPE appflow_kernel_feature gauge");
    for (f, ok) in &g.features {
        let _ = writeln!(
            o,
            "appflow_kernel_feature{{feature=\"{f}\"}} {}",
            u8::from(*ok)
        );
    }
    m.loop_jitter.render(
        &mut o,
        "appflow_loop_jitter_seconds",
        "Lateness of each tick against its schedule.",
    );
    m.loop_work.render(
        &mut o,
        "appflow_loop_work_seconds",
        "Work time of each tick.",
    );
    o
}

/// A Chrome/Perfetto JSON trace, kept in memory and written whole.
#[derive(Debug, Clone, Default)]
pub struct Trace {
    enabled: bool,
    events: Vec<serde_json::Value>,
    last_counter_ms: Option<u64>,
    dropped: u64,
    /// The mode span begun and not yet ended.
    open_mode: Option<&'static str>,
    /// Launch spans begun and not yet ended.
    open_launches: std::collections::BTreeSet<String>,
}

const TRACE_MAX_EVENTS: usize = 200_000;
const PID: u32 = 1;
const TID_MODE: u32 = 1;
const TID_KILL: u32 = 2;
const TID_LAUNCH: u32 = 3;

impl Trace {
    /// A trace; a disabled one records nothing.
    pub fn new(enabled: bool) -> Self {
        let mut t = Self {
            enabled,
            ..Default::default()
        };
        if enabled {
            for (tid, name) in [
                (TID_MODE, "reclaim mode"),
                (TID_KILL, "kills"),
                (TID_LAUNCH, "launches"),
            ] {
                t.events.push(
                    json!({"ph":"M","name":"thread_name","pid":PID,"tid":tid,"args":{"name":name}}),
                );
            }
            t.events.push(
                json!({"ph":"M","name":"process_name","pid":PID,"args":{"name":"appflow daemon"}}),
            );
        }
        t
    }

    /// Records an event unless the trace is full; says whether it was kept.
    fn push(&mut self, e: serde_json::Value) -> bool {
        if !self.enabled {
            return false;
        }
        if self.events.len() >= TRACE_MAX_EVENTS {
            self.dropped += 1;
            return false;
        }
        self.events.push(e);
        true
    }

    /// Ends a span whose beginning was recorded: kept even in a full trace,
    /// so that no span is left open (at most one end per begin).
    fn push_end(&mut self, e: serde_json::Value) {
        if self.enabled {
            self.events.push(e);
        }
    }

    fn end_mode(&mut self, ts_us: u64, at_shutdown: bool) {
        if let Some(name) = self.open_mode.take() {
            let mut e = json!({"ph":"E","name":name,"pid":PID,"tid":TID_MODE,"ts":ts_us});
            if at_shutdown {
                e["args"] = json!({"closed": "daemon stopped"});
            }
            self.push_end(e);
        }
    }

    fn end_launch(&mut self, app: &str, ts_us: u64, at_shutdown: bool) {
        if self.open_launches.remove(app) {
            let mut e = json!({"ph":"e","cat":"launch","name":format!("launch {app}"),"id":app,"pid":PID,"tid":TID_LAUNCH,"ts":ts_us});
            if at_shutdown {
                e["args"] = json!({"closed": "daemon stopped"});
            }
            self.push_end(e);
        }
    }

    /// A mode switch: ends the previous mode's span, begins the new one.
    pub fn mode_switch(&mut self, _from: ReclaimMode, to: ReclaimMode, now_ms: u64) {
        let ts = now_ms * 1000;
        self.end_mode(ts, false);
        if to != ReclaimMode::Normal
            && self.push(json!({"ph":"B","name":to.name(),"pid":PID,"tid":TID_MODE,"ts":ts}))
        {
            self.open_mode = Some(to.name());
        }
    }

    /// A launch begins (a launch of an app already launching restarts its span).
    pub fn launch_begin(&mut self, app: &str, now_ms: u64) {
        let ts = now_ms * 1000;
        self.end_launch(app, ts, false);
        if self.push(json!({"ph":"b","cat":"launch","name":format!("launch {app}"),"id":app,"pid":PID,"tid":TID_LAUNCH,"ts":ts}))
        {
            self.open_launches.insert(app.to_string());
        }
    }

    /// A launch ends.
    pub fn launch_end(&mut self, app: &str, now_ms: u64) {
        self.end_launch(app, now_ms * 1000, false);
    }

    /// Ends every span still open (the daemon is stopping): the mode span
    /// and the launch spans, each marked `closed: daemon stopped`.
    pub fn close_open_spans(&mut self, now_ms: u64) {
        let ts = now_ms * 1000;
        self.end_mode(ts, true);
        let apps: Vec<String> = self.open_launches.iter().cloned().collect();
        for app in apps {
            self.end_launch(&app, ts, true);
        }
    }

    /// A kill.
    pub fn kill(&mut self, app: &str, pid: u32, net_freed_bytes: i64, now_ms: u64) {
        self.push(json!({"ph":"i","s":"g","name":format!("kill {app}"),"pid":PID,"tid":TID_KILL,"ts":now_ms*1000,
            "args":{"pid":pid,"net_freed_bytes":net_freed_bytes}}));
    }

    /// A decision of the scheduler, on the timeline when it carries a mark.
    pub fn decision(&mut self, d: &Decision) {
        match &d.mark {
            Some(Mark::ModeSwitch { from, to }) => self.mode_switch(*from, *to, d.at_ms),
            Some(Mark::LaunchBegin { app }) => self.launch_begin(app, d.at_ms),
            Some(Mark::LaunchEnd { app }) => self.launch_end(app, d.at_ms),
            Some(Mark::Kill {
                app,
                pid,
                net_freed_bytes,
            }) => self.kill(app, *pid, *net_freed_bytes, d.at_ms),
            None => {}
        }
    }

    /// Domain memory counters (at most once a second).
    pub fn counters(&mut self, s: &DomainSample, alloc_pages: u64) {
        if !self.enabled || self.last_counter_ms.is_some_and(|t| s.now_ms < t + 1000) {
            return;
        }
        self.last_counter_ms = Some(s.now_ms);
        let mib = |b: u64| b as f64 / 1048576.0;
        self.push(json!({"ph":"C","name":"domain memory (MiB)","pid":PID,"ts":s.now_ms*1000,
            "args":{"available":mib(s.avail_bytes),"anon":mib(s.anon_bytes),"file":mib(s.file_bytes)}}));
        self.push(json!({"ph":"C","name":"n_alloc (pages/tick)","pid":PID,"ts":s.now_ms*1000,"args":{"pages":alloc_pages}}));
    }

    /// The trace as Chrome JSON (object form).
    pub fn to_json(&self) -> String {
        serde_json::to_string(&json!({"traceEvents": self.events, "displayTimeUnit": "ms",
            "otherData": {"dropped_events": self.dropped}}))
        .expect("trace serialises")
    }

    /// Whether events are recorded.
    pub fn enabled(&self) -> bool {
        self.enabled
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use appflow_core::reason::Reason;

    #[test]
    fn histogram_quantiles_and_text() {
        let mut h = Histogram::default();
        for i in 1..=100 {
            h.observe(i as f64 / 1000.0);
        }
        assert_eq!(h.quantile(0.5), 0.05);
        assert_eq!(h.quantile(0.99), 0.099);
        let mut m = Metrics {
            loop_jitter: h,
            ..Default::default()
        };
        m.sched
            .count_switch(ReclaimMode::Normal, ReclaimMode::EfficiencyFirst);
        m.sched.count_kill(Reason::KillHighestNetFreed, 10);
        let g = Gauges {
            page_out_calls: 7,
            page_out_errors: [(libc::EINVAL, 2)].into_iter().collect(),
            ..Default::default()
        };
        let text = render(&m, &g);
        assert!(text.contains("appflow_page_out_calls_total 7"), "{text}");
        assert!(
            text.contains("appflow_page_out_errors_total{errno=\"22\",name=\"EINVAL\"} 2"),
            "{text}"
        );
        assert_eq!(errno_name(libc::ENOMEM), "ENOMEM");
        assert!(
            text.contains("appflow_loop_jitter_seconds_bucket{le=\"0.05\"} 50"),
            "{text}"
        );
        assert!(text.contains("appflow_loop_jitter_seconds_count 100"));
        assert!(
            text.contains("appflow_mode_switches_total{from=\"normal\",to=\"efficiency_first\"} 1")
        );
        assert!(
            text.contains("appflow_kills_total{reason=\"kill_highest_net_freed\",code=\"200\"} 1")
        );
        // Every sample line is "name{labels} value" or "name value".
        for l in text.lines().filter(|l| !l.starts_with('#')) {
            let v = l.rsplit(' ').next().unwrap();
            assert!(v.parse::<f64>().is_ok(), "bad line {l}");
        }
    }

    #[test]
    fn trace_is_chrome_json_with_spans() {
        let mut t = Trace::new(true);
        t.mode_switch(ReclaimMode::Normal, ReclaimMode::EfficiencyFirst, 100);
        t.mode_switch(ReclaimMode::EfficiencyFirst, ReclaimMode::Normal, 600);
        t.kill("a", 5, 10, 700);
        let v: serde_json::Value = serde_json::from_str(&t.to_json()).unwrap();
        let ev = v["traceEvents"].as_array().unwrap();
        assert!(ev.iter().any(|e| e["ph"] == "B" && e["ts"] == 100_000));
        assert!(ev.iter().any(|e| e["ph"] == "E" && e["ts"] == 600_000));
        assert!(ev.iter().any(|e| e["ph"] == "i"));
        assert!(Trace::new(false).to_json().contains("\"traceEvents\":[]"));
    }

    /// Begin and end events of the trace pair up (mode spans by thread,
    /// launch spans by id).
    fn unbalanced(t: &Trace) -> Vec<String> {
        let v: serde_json::Value = serde_json::from_str(&t.to_json()).unwrap();
        let mut open: BTreeMap<String, i64> = BTreeMap::new();
        for e in v["traceEvents"].as_array().unwrap() {
            let key = match e["ph"].as_str().unwrap() {
                "B" | "E" => "mode".to_string(),
                "b" | "e" => format!("launch {}", e["id"]),
                _ => continue,
            };
            let d = if matches!(e["ph"].as_str(), Some("B" | "b")) {
                1
            } else {
                -1
            };
            *open.entry(key).or_default() += d;
        }
        open.into_iter()
            .filter(|(_, n)| *n != 0)
            .map(|(k, n)| format!("{k}: {n}"))
            .collect()
    }

    #[test]
    fn spans_open_at_shutdown_are_closed() {
        let mut t = Trace::new(true);
        t.mode_switch(ReclaimMode::Normal, ReclaimMode::EfficiencyFirst, 100);
        t.launch_begin("a", 150);
        t.launch_begin("b", 160);
        t.launch_end("b", 170);
        t.mode_switch(ReclaimMode::EfficiencyFirst, ReclaimMode::Rebalancing, 600);
        // The daemon stops while rebalancing and while `a` launches.
        assert_eq!(unbalanced(&t), ["launch \"a\": 1", "mode: 1"]);
        t.close_open_spans(900);
        assert!(unbalanced(&t).is_empty(), "{:?}", unbalanced(&t));
        let json = t.to_json();
        assert_eq!(json.matches("daemon stopped").count(), 2, "{json}");
        // Nothing more to close; a second launch of an app restarts its span.
        t.close_open_spans(950);
        t.launch_begin("a", 1000);
        t.launch_begin("a", 1100);
        t.launch_end("a", 1200);
        t.launch_end("a", 1300);
        assert!(unbalanced(&t).is_empty(), "{:?}", unbalanced(&t));
    }

    #[test]
    fn a_full_trace_still_ends_the_spans_it_began() {
        let mut t = Trace::new(true);
        t.mode_switch(ReclaimMode::Normal, ReclaimMode::Rebalancing, 1);
        while t.events.len() < TRACE_MAX_EVENTS {
            t.kill("x", 1, 0, 2);
        }
        t.launch_begin("dropped", 3);
        t.close_open_spans(4);
        assert!(unbalanced(&t).is_empty(), "{:?}", unbalanced(&t));
        assert_eq!(t.dropped, 1);
    }
}
