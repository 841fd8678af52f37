//! `appflow_sim._native`: the Python binding of the simulator (docs/python.md).
//!
//! A thin shell over `appflow-sim`: every simulation goes through
//! `appflow_sim::fleet::run_users` (the CLI's `--per-user` uses the same
//! call), results leave as Arrow C streams (`__arrow_c_stream__`), and
//! every long call runs in [`detached`]: the work runs on its own thread
//! while the calling thread waits without the GIL and checks for Ctrl-C
//! every 100 ms, so other Python threads run meanwhile and Ctrl-C raises
//! `KeyboardInterrupt`. Bad input raises `ValueError` with the CLI's own
//! message. The Python layer (`python/appflow_sim/__init__.py`) adds
//! pyarrow tables, sweeps and the trace converters.

use appflow_core::InputError;
use appflow_sim::catalog::{self, AppModel, AppSpec};
use appflow_sim::fleet::{self, Batch, LaunchRow, UserRow, UserTrace};
use appflow_sim::trace::{EventKind, TraceEvent};
use appflow_sim::{devfile, device, engine::SimConfig, policy, population, workload};
use arrow_array::ffi_stream::{FFI_ArrowArrayStream, RecordBatchStreamReader};
use arrow_array::{
    Array, ArrayRef, BooleanArray, Float64Array, Int64Array, RecordBatch, RecordBatchIterator,
    RecordBatchReader, StringArray, UInt64Array,
};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use pyo3::exceptions::{PyKeyboardInterrupt, PyMemoryError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyCapsule;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

fn value_error(e: impl std::fmt::Display) -> PyErr {
    PyValueError::new_err(e.to_string())
}

/// An `anyhow` error from the CLI's code: `ValueError` when it is bad
/// input (an `InputError` in the chain), else `RuntimeError`.
fn cli_error(e: anyhow::Error) -> PyErr {
    if e.chain().any(|c| c.downcast_ref::<InputError>().is_some()) {
        PyValueError::new_err(format!("{e:#}"))
    } else {
        PyRuntimeError::new_err(format!("{e:#}"))
    }
}

/// Runs `work` on a thread of its own while this thread waits without the
/// GIL, checking for signals every 100 ms. On Ctrl-C the work is told to
/// stop (the flag it gets), joined, and `KeyboardInterrupt` is raised.
fn detached<T, F>(py: Python<'_>, work: F) -> PyResult<T>
where
    T: Send + 'static,
    F: FnOnce(&AtomicBool) -> T + Send + 'static,
{
    let cancel = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel();
    let flag = Arc::clone(&cancel);
    let handle = std::thread::spawn(move || {
        let out = work(&flag);
        let _ = tx.send(());
        out
    });
    let mut rx = rx;
    loop {
        let (back, done) = py.detach(move || {
            let r = rx.recv_timeout(Duration::from_millis(100));
            (rx, r)
        });
        rx = back;
        match done {
            Ok(()) | Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
        if let Err(e) = py.check_signals() {
            cancel.store(true, Ordering::Relaxed);
            let _ = py.detach(|| handle.join());
            return Err(e);
        }
    }
    py.detach(|| handle.join())
        .map_err(|_| PyRuntimeError::new_err("the simulation panicked (a bug: please report it)"))
}

// ---------------------------------------------------------------------
// Arrow out
// ---------------------------------------------------------------------

/// A result table as an Arrow C stream (`__arrow_c_stream__`): pyarrow,
/// pandas (through pyarrow) and polars import it without copying.
#[pyclass(frozen, module = "appflow_sim._native")]
struct ArrowStream {
    schema: SchemaRef,
    batches: Vec<RecordBatch>,
}

#[pymethods]
impl ArrowStream {
    /// The Arrow PyCapsule stream interface.
    #[pyo3(signature = (requested_schema=None))]
    fn __arrow_c_stream__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyCapsule>> {
        let _ = requested_schema; // the schema is fixed; consumers cast
        let reader = RecordBatchIterator::new(
            self.batches.clone().into_iter().map(Ok),
            Arc::clone(&self.schema),
        );
        let stream = FFI_ArrowArrayStream::new(Box::new(reader));
        PyCapsule::new_with_value(py, stream, c"arrow_array_stream")
    }

    /// Rows.
    fn __len__(&self) -> usize {
        self.batches.iter().map(|b| b.num_rows()).sum()
    }
}

/// A column type of a result table.
trait Column: Sized {
    fn array(v: Vec<Self>) -> (DataType, ArrayRef);
}
impl Column for u64 {
    fn array(v: Vec<Self>) -> (DataType, ArrayRef) {
        (DataType::UInt64, Arc::new(UInt64Array::from(v)))
    }
}
impl Column for f64 {
    fn array(v: Vec<Self>) -> (DataType, ArrayRef) {
        (DataType::Float64, Arc::new(Float64Array::from(v)))
    }
}
impl Column for bool {
    fn array(v: Vec<Self>) -> (DataType, ArrayRef) {
        (DataType::Boolean, Arc::new(BooleanArray::from(v)))
    }
}
impl Column for String {
    fn array(v: Vec<Self>) -> (DataType, ArrayRef) {
        (DataType::Utf8, Arc::new(StringArray::from(v)))
    }
}
impl Column for &'static str {
    fn array(v: Vec<Self>) -> (DataType, ArrayRef) {
        (DataType::Utf8, Arc::new(StringArray::from(v)))
    }
}

fn stream(cols: Vec<(&'static str, (DataType, ArrayRef))>) -> PyResult<ArrowStream> {
    let schema: SchemaRef = Arc::new(Schema::new(
        cols.iter()
            .map(|(n, (t, _))| Field::new(*n, t.clone(), false))
            .collect::<Vec<_>>(),
    ));
    let batch = RecordBatch::try_new(
        Arc::clone(&schema),
        cols.into_iter().map(|(_, (_, a))| a).collect(),
    )
    .map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
    Ok(ArrowStream {
        schema,
        batches: vec![batch],
    })
}

/// Columns of `rows`, one per named field, in the order given.
macro_rules! columns {
    ($rows:expr, [$($f:ident),* $(,)?]) => {
        vec![$((stringify!($f), Column::array($rows.iter().map(|r| r.$f.clone()).collect()))),*]
    };
}

fn user_table(rows: &[UserRow]) -> PyResult<ArrowStream> {
    stream(columns!(
        rows,
        [
            user,
            device,
            policy,
            seed,
            days,
            launches,
            cold_launches,
            warm_launches,
            hot_launches,
            cold_mean_ms,
            cold_p50_ms,
            cold_p90_ms,
            launch_mean_ms,
            under_1s_share,
            cold_relaunches,
            gb_scale_cold_relaunches,
            gb_scale_cold_launches,
            kills,
            oom_kills,
            survivors,
            direct_reclaims,
            direct_reclaim_stall_ms,
            refault_ratio,
            preload_bytes_peak,
            amr_mode_switches,
            reclaim_step_changes,
            prepage_switches,
            stuck_launches,
        ]
    ))
}

fn launch_table(rows: &[LaunchRow]) -> PyResult<ArrowStream> {
    stream(columns!(
        rows,
        [
            user,
            device,
            policy,
            seed,
            at_ms,
            app,
            gb_scale,
            kind,
            relaunch_after_kill,
            latency_ms,
        ]
    ))
}

// ---------------------------------------------------------------------
// Devices
// ---------------------------------------------------------------------

/// A simulated device: a preset or a device file (TOML, e.g. the
/// testbed's `appflow bench --emit-sim-device`).
#[pyclass(frozen, module = "appflow_sim._native")]
#[derive(Clone)]
struct Device {
    dev: device::Device,
    /// The file's preload budget, if it sets one.
    budget_bytes: Option<u64>,
    /// The apps: the built-in catalogue, or the file's `[[app]]` list.
    apps: Arc<Vec<AppSpec>>,
    /// `("preset", name)` or `("file", path)`: how to make it again.
    source: (String, String),
}

#[pymethods]
impl Device {
    /// A device preset by name (`devices()` lists them).
    #[staticmethod]
    fn preset(name: &str) -> PyResult<Self> {
        Ok(Device {
            dev: device::device(name).map_err(value_error)?,
            budget_bytes: None,
            apps: Arc::new(catalog::catalogue()),
            source: ("preset".into(), name.into()),
        })
    }

    /// A device file (TOML, docs/simdev.md); its `[[app]]` list, if any,
    /// replaces the app catalogue.
    #[staticmethod]
    fn from_toml(path: PathBuf) -> PyResult<Self> {
        let name = path.display().to_string();
        let f = devfile::read(&path).map_err(value_error)?;
        let d = devfile::device(&f, &name).map_err(value_error)?;
        let apps = match devfile::apps(&f, &name).map_err(value_error)? {
            Some(l) => l.apps,
            None => catalog::catalogue(),
        };
        Ok(Device {
            dev: d.device,
            budget_bytes: d.preload_budget_bytes,
            apps: Arc::new(apps),
            source: ("file".into(), name),
        })
    }

    /// The device's name.
    #[getter]
    fn name(&self) -> String {
        self.dev.name.clone()
    }

    /// What the device models and its sources.
    #[getter]
    fn description(&self) -> String {
        self.dev.description.clone()
    }

    /// DRAM, bytes.
    #[getter]
    fn dram_bytes(&self) -> u64 {
        self.dev.dram_bytes
    }

    /// `("preset", name)` or `("file", path)`.
    #[getter]
    fn source(&self) -> (String, String) {
        self.source.clone()
    }

    fn __repr__(&self) -> String {
        format!(
            "Device.{}({:?})",
            if self.source.0 == "preset" {
                "preset"
            } else {
                "from_toml"
            },
            self.source.1
        )
    }
}

// ---------------------------------------------------------------------
// Traces
// ---------------------------------------------------------------------

/// An app-usage trace: users, each with its events in time order.
#[pyclass(frozen, module = "appflow_sim._native")]
#[derive(Clone)]
struct Trace {
    users: Arc<Vec<UserTrace>>,
}

fn kind_name(k: EventKind) -> &'static str {
    match k {
        EventKind::Open => "open",
        EventKind::Close => "close",
        EventKind::Exit => "exit",
    }
}

#[pymethods]
impl Trace {
    /// Reads a trace file (CSV or TSV: user,timestamp,app,event; docs/sim.md).
    /// Errors name the file and line.
    #[staticmethod]
    fn from_csv(py: Python<'_>, path: PathBuf) -> PyResult<Self> {
        let events = detached(py, move |_| {
            let events =
                appflow_sim::trace::TraceReader::open(&path, &catalog::catalogue())?.into_events();
            // The CLI's own check: a span past the simulator's clock, or a
            // timestamp past Arrow's int64, is refused here, not replayed.
            workload::check_trace_clock(&events)?;
            Ok::<_, InputError>(events)
        })?
        .map_err(value_error)?;
        Ok(Trace {
            users: Arc::new(fleet::split_users(events)),
        })
    }

    /// Reads an Arrow stream (any object with `__arrow_c_stream__`) of
    /// columns user (utf8), timestamp (int64, Unix ms), app (utf8), event
    /// (utf8: open/close and their aliases). `source` names it in errors,
    /// which give the row (1-based).
    #[staticmethod]
    #[pyo3(signature = (stream, source="arrow"))]
    fn _from_arrow_stream(
        py: Python<'_>,
        stream: Bound<'_, PyAny>,
        source: &str,
    ) -> PyResult<Self> {
        let capsule = stream.call_method0("__arrow_c_stream__")?;
        let capsule = capsule.cast::<PyCapsule>()?;
        let ptr = capsule.pointer_checked(Some(c"arrow_array_stream"))?;
        // SAFETY: the capsule holds an FFI_ArrowArrayStream (the PyCapsule
        // interface); from_raw moves it out and marks the original released.
        let reader = unsafe { RecordBatchStreamReader::from_raw(ptr.as_ptr().cast()) }
            .map_err(value_error)?;
        let source = source.to_string();
        let events = detached(py, move |_| read_arrow(reader, &source))??;
        Ok(Trace {
            users: Arc::new(fleet::split_users(events)),
        })
    }

    /// The trace as an Arrow stream: user, timestamp, app, event (users in
    /// order, each user's rows contiguous).
    fn _to_arrow_stream(&self) -> PyResult<ArrowStream> {
        let evs: Vec<&TraceEvent> = self.users.iter().flat_map(|u| u.events.iter()).collect();
        let user: Vec<&str> = evs.iter().map(|e| e.user.as_str()).collect();
        // Every entry point ran `check_trace_clock`, which bounds
        // timestamps by i64::MAX; a bad one is an error, never a wrap.
        let ts: Vec<i64> = evs
            .iter()
            .map(|e| i64::try_from(e.ts_ms))
            .collect::<Result<_, _>>()
            .map_err(|_| {
                PyRuntimeError::new_err("a timestamp past i64::MAX (a bug: please report it)")
            })?;
        let app: Vec<&str> = evs.iter().map(|e| e.app.as_str()).collect();
        let ev: Vec<&str> = evs.iter().map(|e| kind_name(e.kind)).collect();
        stream(vec![
            (
                "user",
                (
                    DataType::Utf8,
                    Arc::new(StringArray::from(user)) as ArrayRef,
                ),
            ),
            (
                "timestamp",
                (DataType::Int64, Arc::new(Int64Array::from(ts))),
            ),
            ("app", (DataType::Utf8, Arc::new(StringArray::from(app)))),
            ("event", (DataType::Utf8, Arc::new(StringArray::from(ev)))),
        ])
    }

    /// User ids, in order of first appearance.
    #[getter]
    fn users(&self) -> Vec<String> {
        self.users.iter().map(|u| u.user.clone()).collect()
    }

    /// Events per user, in user order.
    #[getter]
    fn events_per_user(&self) -> Vec<usize> {
        self.users.iter().map(|u| u.events.len()).collect()
    }

    /// Events in all.
    #[getter]
    fn num_events(&self) -> usize {
        self.users.iter().map(|u| u.events.len()).sum()
    }

    /// The users at these positions, as a trace.
    fn select(&self, positions: Vec<usize>) -> PyResult<Self> {
        let n = self.users.len();
        let users = positions
            .iter()
            .map(|&i| {
                self.users.get(i).cloned().ok_or_else(|| {
                    value_error(format!(
                        "user position {i} is out of range (the trace has {n} users)"
                    ))
                })
            })
            .collect::<PyResult<Vec<_>>>()?;
        Ok(Trace {
            users: Arc::new(users),
        })
    }

    /// Users.
    fn __len__(&self) -> usize {
        self.users.len()
    }

    fn __repr__(&self) -> String {
        format!(
            "Trace({} users, {} events)",
            self.users.len(),
            self.num_events()
        )
    }
}

fn read_arrow(reader: RecordBatchStreamReader, source: &str) -> PyResult<Vec<TraceEvent>> {
    let schema = reader.schema();
    let col = |name: &str, want: &[DataType]| -> PyResult<usize> {
        let (i, f) = schema.column_with_name(name).ok_or_else(|| {
            value_error(format!(
                "{source}: no column {name:?}; a trace has columns user, timestamp, app, event (docs/sim.md), found {}",
                schema.fields().iter().map(|f| f.name().as_str()).collect::<Vec<_>>().join(", ")
            ))
        })?;
        if !want.contains(f.data_type()) {
            return Err(value_error(format!(
                "{source}: column {name:?} is {}, expected {}",
                f.data_type(),
                want.iter()
                    .map(|t| t.to_string())
                    .collect::<Vec<_>>()
                    .join(" or ")
            )));
        }
        Ok(i)
    };
    let (cu, ct, ca, ce) = (
        col("user", &[DataType::Utf8])?,
        col("timestamp", &[DataType::Int64])?,
        col("app", &[DataType::Utf8])?,
        col("event", &[DataType::Utf8])?,
    );
    let cat = catalog::catalogue();
    let names: std::collections::HashSet<&str> = cat.iter().map(|a| a.name.as_str()).collect();
    let mut last: HashMap<String, u64> = HashMap::new();
    let mut out = Vec::new();
    let mut row = 0usize;
    for batch in reader {
        let batch = batch.map_err(value_error)?;
        let s = |i: usize| {
            batch
                .column(i)
                .as_any()
                .downcast_ref::<StringArray>()
                .expect("checked utf8")
                .clone()
        };
        let (u, a, e) = (s(cu), s(ca), s(ce));
        let t = batch
            .column(ct)
            .as_any()
            .downcast_ref::<Int64Array>()
            .expect("checked int64")
            .clone();
        for k in 0..batch.num_rows() {
            row += 1;
            let err = |what: String| value_error(format!("{source}: row {row}: {what}"));
            for (arr, name) in [(&u, "user"), (&a, "app"), (&e, "event")] {
                if arr.is_null(k) {
                    return Err(err(format!("empty {name}")));
                }
            }
            if t.is_null(k) || t.value(k) < 0 {
                return Err(err(
                    "timestamp is missing or negative (Unix ms expected)".into()
                ));
            }
            let (user, app, ev, ts) = (u.value(k), a.value(k), e.value(k), t.value(k) as u64);
            if user.is_empty() {
                return Err(err("empty user".into()));
            }
            if !names.contains(app) {
                return Err(err(format!(
                    "unknown app {app:?}; valid apps: {}",
                    cat.iter()
                        .map(|a| a.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )));
            }
            let kind = match ev.to_ascii_lowercase().as_str() {
                "open" | "launch" | "foreground" => EventKind::Open,
                "close" | "background" | "home" => EventKind::Close,
                other => {
                    return Err(err(format!(
                        "unknown event {other:?}; valid events: open, close"
                    )))
                }
            };
            let prev = last.entry(user.to_string()).or_insert(0);
            if ts < *prev {
                return Err(err(format!(
                    "timestamp {ts} goes back in time for user {user:?} (previous {prev})"
                )));
            }
            *prev = ts;
            out.push(TraceEvent {
                user: user.to_string(),
                ts_ms: ts,
                app: app.to_string(),
                kind,
            });
        }
    }
    if out.is_empty() {
        return Err(value_error(format!("{source}: the trace has no events")));
    }
    workload::check_trace_clock(&out).map_err(|e| value_error(format!("{source}: {e}")))?;
    Ok(out)
}

/// Bytes a generated event takes at the peak of [`generate_trace`]: the
/// event (64 B) with its user and app strings (two small heap blocks,
/// 64 B), the generator's vector grown by doubling (up to another 64 B of
/// address space), the grouping by user (16 B) and the per-user copy
/// (64 B) made before the first vector is freed. Measured: see
/// `crates/py/tests/test_limits.py`.
const GENERATED_EVENT_PEAK_BYTES: u64 = 288;
/// Users and days of the sample [`estimate_events`] generates.
const SAMPLE_USERS: usize = 64;
const SAMPLE_DAYS: u64 = 7;

/// Events `generate_trace(users, days, ...)` would make, estimated before
/// generating anything: the first users over the first days (the same
/// seed and population, so the same draws) scaled to the request, plus a
/// quarter for the spread between users. Exact for small requests.
fn estimate_events(
    users: usize,
    days: u64,
    apps: usize,
    seed: u64,
    pop: &population::Population,
) -> Result<u64, InputError> {
    let (k, d) = (users.min(SAMPLE_USERS), days.min(SAMPLE_DAYS));
    let (sample, _, _) = population::generate(&catalog::catalogue(), k, d, apps, seed, pop)?;
    if (k, d) == (users, days) {
        return Ok(sample.len() as u64);
    }
    let per_user_day = sample.len() as f64 / (k as f64 * d as f64);
    Ok((per_user_day * users as f64 * days as f64 * 1.25).ceil() as u64)
}

/// Generates a trace of `users` users from a population (docs/sim.md "A
/// user population"): the generator of `appflow sim --generate-trace`.
/// With `max_bytes`, a request whose estimated peak memory exceeds it
/// raises `MemoryError` before anything big is allocated.
#[pyfunction]
#[pyo3(signature = (users=1, days=30, apps=60, seed=1, population="mixed", max_bytes=None))]
fn generate_trace(
    py: Python<'_>,
    users: usize,
    days: u64,
    apps: usize,
    seed: u64,
    population: &str,
    max_bytes: Option<u64>,
) -> PyResult<Trace> {
    let pop = population::Population::parse(population).map_err(value_error)?;
    if let Some(budget) = max_bytes {
        let p = pop.clone();
        let events = detached(py, move |_| estimate_events(users, days, apps, seed, &p))?
            .map_err(value_error)?;
        let need = events.saturating_mul(GENERATED_EVENT_PEAK_BYTES);
        if need > budget {
            let gib = |b: u64| b as f64 / f64::from(1u32 << 30);
            return Err(PyMemoryError::new_err(format!(
                "generate_trace(users={users}, days={days}): about {events} events, \
                 {:.1} GiB at the peak ({GENERATED_EVENT_PEAK_BYTES} bytes an event), \
                 more than the {:.1} GiB this process may still allocate; \
                 generate fewer users or days per call (the trace is held in memory)",
                gib(need),
                gib(budget)
            )));
        }
    }
    let users = detached(py, move |_| {
        let (events, _, _) =
            population::generate(&catalog::catalogue(), users, days, apps, seed, &pop)?;
        workload::check_trace_clock(&events)?;
        Ok::<_, InputError>(fleet::split_users(events))
    })?
    .map_err(value_error)?;
    Ok(Trace {
        users: Arc::new(users),
    })
}

// ---------------------------------------------------------------------
// Simulation
// ---------------------------------------------------------------------

/// Simulates every user of `trace` on `device` under each policy: returns
/// (per-user × policy table, per-launch table or None).
#[pyfunction]
#[pyo3(signature = (trace, device, policies, seed=1, threads=0, launches=false))]
fn simulate(
    py: Python<'_>,
    trace: &Trace,
    device: &Device,
    policies: &str,
    seed: u64,
    threads: usize,
    launches: bool,
) -> PyResult<(ArrowStream, Option<ArrowStream>)> {
    let pols = policy::parse_list(policies).map_err(value_error)?;
    // Apps of the trace must be the device's (a device file may bring its own).
    let known: std::collections::HashSet<&str> =
        device.apps.iter().map(|a| a.name.as_str()).collect();
    for u in trace.users.iter() {
        if let Some(e) = u.events.iter().find(|e| !known.contains(e.app.as_str())) {
            return Err(value_error(format!(
                "user {:?}: unknown app {:?} on device {}; valid apps: {}",
                u.user,
                e.app,
                device.dev.name,
                device
                    .apps
                    .iter()
                    .map(|a| a.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
    }
    let users = Arc::clone(&trace.users);
    let dev = device.clone();
    let out = detached(py, move |cancel| {
        let models: Vec<AppModel> = dev.apps.iter().map(catalog::model).collect();
        let mut cfg = SimConfig::with_seed(seed);
        if let Some(b) = dev.budget_bytes {
            cfg.preload.budget_bytes = b;
        }
        let b = Batch {
            device: &dev.dev,
            policies: &pols,
            cfg: &cfg,
            models: &models,
            launches,
            threads,
        };
        fleet::run_users(&b, &users, Some(cancel))
    })?;
    // A cancelled run raised KeyboardInterrupt above; this is a safety net.
    let out = out.map_err(|_| PyKeyboardInterrupt::new_err("cancelled"))?;
    let summary = user_table(&out.users)?;
    let launches = if launches {
        Some(launch_table(&out.launches)?)
    } else {
        None
    };
    Ok((summary, launches))
}

/// Runs a workload of the CLI (none, low, medium, high, multitask) and
/// returns the RunReport JSON (`appflow sim --format json`).
#[pyfunction]
#[pyo3(signature = (device, workload="high", policies="android,appflow", seed=1, targets=None, threads=0))]
fn run_scenario(
    py: Python<'_>,
    device: &Device,
    workload: &str,
    policies: &str,
    seed: u64,
    targets: Option<Vec<String>>,
    threads: usize,
) -> PyResult<String> {
    let (device_name, device_file) = match device.source.0.as_str() {
        "file" => (
            "pixel8-6gb".to_string(),
            Some(PathBuf::from(&device.source.1)),
        ),
        _ => (device.source.1.clone(), None),
    };
    let args = appflow_sim::cli::SimArgs {
        device: device_name,
        device_file,
        workload: workload.into(),
        policy: policies.into(),
        seed,
        format: appflow_sim::cli::Format::Json,
        targets: targets.unwrap_or_default(),
        threads,
        ..Default::default()
    };
    if workload == "trace" {
        return Err(value_error(
            "run_scenario runs the CLI's scenarios (none, low, medium, high, multitask); for a trace use simulate()",
        ));
    }
    let report = detached(py, move |_| {
        let (cat, setup) = appflow_sim::cli::catalogue_of(&args)?;
        appflow_sim::cli::simulate_with(&args, &cat, &setup)
    })?
    .map_err(cli_error)?;
    Ok(appflow_sim::output::json(&report))
}

/// Most days a generated trace may span (`population::generate`'s bound).
const MAX_DAYS: u64 = 100;

/// Device preset names.
#[pyfunction]
fn devices() -> Vec<String> {
    device::DEVICE_NAMES.iter().map(|s| s.to_string()).collect()
}

/// Canonical policy names of the registry.
#[pyfunction]
fn policies() -> Vec<String> {
    policy::names().iter().map(|s| s.to_string()).collect()
}

/// The built-in app catalogue: name, class, anon_mib, file_mib, small_files.
#[pyfunction]
fn catalogue() -> PyResult<ArrowStream> {
    let cat = catalog::catalogue();
    let class: Vec<&'static str> = cat
        .iter()
        .map(|a| match a.class {
            catalog::AppClass::GbScale => "gb",
            catalog::AppClass::Low => "low",
            catalog::AppClass::Tail => "tail",
        })
        .collect();
    stream(vec![
        (
            "name",
            Column::array(cat.iter().map(|a| a.name.clone()).collect::<Vec<_>>()),
        ),
        ("class", Column::array(class)),
        (
            "anon_mib",
            Column::array(cat.iter().map(|a| a.anon_mib).collect::<Vec<_>>()),
        ),
        (
            "file_mib",
            Column::array(cat.iter().map(|a| a.file_mib).collect::<Vec<_>>()),
        ),
        (
            "small_files",
            Column::array(cat.iter().map(|a| a.small_files as u64).collect::<Vec<_>>()),
        ),
    ])
}

/// The native module.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<ArrowStream>()?;
    m.add_class::<Device>()?;
    m.add_class::<Trace>()?;
    m.add_function(wrap_pyfunction!(generate_trace, m)?)?;
    m.add_function(wrap_pyfunction!(simulate, m)?)?;
    m.add_function(wrap_pyfunction!(run_scenario, m)?)?;
    m.add_function(wrap_pyfunction!(devices, m)?)?;
    m.add_function(wrap_pyfunction!(policies, m)?)?;
    m.add_function(wrap_pyfunction!(catalogue, m)?)?;
    m.add("MAX_USERS", population::MAX_USERS)?;
    m.add("MAX_DAYS", MAX_DAYS)?;
    let cat = catalog::catalogue();
    let core = cat
        .iter()
        .filter(|a| a.class != catalog::AppClass::Tail)
        .count();
    m.add("APPS_RANGE", (core.max(1), cat.len()))?;
    Ok(())
}
