//! App-usage traces: the format, a reader, and a generator of long
//! synthetic traces.
//!
//! ## Format
//! Text, one event per line, four columns `user, timestamp, app, event`,
//! separated by commas (CSV) or tabs (TSV; a file is TSV when its first
//! data line contains a tab). Blank lines and lines starting with `#` are
//! ignored; a first line `user,timestamp,app,event` is a header.
//!
//! * `user`: any non-empty text; each user is replayed on a fresh device.
//! * `timestamp`: milliseconds since the Unix epoch (integer); non-decreasing per user.
//! * `app`: an app of the catalogue (`appflow sim --list`).
//! * `event`: `open` (the app comes to the foreground; aliases `launch`,
//!   `foreground`) or `close` (the user goes to the home screen; aliases
//!   `background`, `home`). The testbed's replay also accepts `exit` (the
//!   app is stopped), read with [`parse_events`]; the simulator does not.
//!
//! Errors name the file and line. The reader follows libCacheSim's shape
//! (its trace readers): independent of policies, `next()` / `reset()`.

use crate::catalog::{AppClass, AppSpec};
use crate::rng::SplitMix;
use appflow_core::InputError;
use std::fmt::Write as _;

/// What happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    /// App to the foreground.
    Open,
    /// Home screen.
    Close,
    /// The app is stopped (accepted only where asked for: the testbed).
    Exit,
}

/// One trace event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceEvent {
    /// User id.
    pub user: String,
    /// Unix ms.
    pub ts_ms: u64,
    /// App name.
    pub app: String,
    /// Open or close.
    pub kind: EventKind,
}

/// Parses a trace. `file` names the source in errors; `cat` is the
/// catalogue app names are checked against.
pub fn parse(text: &str, file: &str, cat: &[AppSpec]) -> Result<Vec<TraceEvent>, InputError> {
    let names: std::collections::HashSet<&str> = cat.iter().map(|a| a.name.as_str()).collect();
    parse_with(text, file, false, &|app| {
        if names.contains(app) {
            Ok(())
        } else {
            Err(format!(
                "unknown app {app:?}; valid apps: {}",
                cat.iter()
                    .map(|a| a.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        }
    })
}

/// Parses a trace without a catalogue (any non-empty app name), accepting
/// the `exit` event when `exit_event` is set: the testbed's reader, which
/// maps the names onto its own app set.
pub fn parse_events(
    text: &str,
    file: &str,
    exit_event: bool,
) -> Result<Vec<TraceEvent>, InputError> {
    parse_with(text, file, exit_event, &|_| Ok(()))
}

/// Reads a trace file with [`parse_events`].
pub fn read_events(
    path: &std::path::Path,
    exit_event: bool,
) -> Result<Vec<TraceEvent>, InputError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| InputError::new(format!("{}: cannot read: {e}", path.display())))?;
    parse_events(&text, &path.display().to_string(), exit_event)
}

fn parse_with(
    text: &str,
    file: &str,
    exit_event: bool,
    check_app: &dyn Fn(&str) -> Result<(), String>,
) -> Result<Vec<TraceEvent>, InputError> {
    let mut out = Vec::new();
    let mut delim: Option<char> = None;
    let mut last_ts: std::collections::HashMap<&str, u64> = std::collections::HashMap::new();
    for (i, raw) in text.lines().enumerate() {
        let line_no = i + 1;
        let line = raw.trim_end_matches('\r');
        if line.trim().is_empty() || line.trim_start().starts_with('#') {
            continue;
        }
        let d = *delim.get_or_insert(if line.contains('\t') { '\t' } else { ',' });
        let cols: Vec<&str> = line.split(d).map(str::trim).collect();
        let err = |what: String| InputError::new(format!("{file}:{line_no}: {what}"));
        if out.is_empty() && cols.first().is_some_and(|c| c.eq_ignore_ascii_case("user")) {
            continue; // header
        }
        if cols.len() != 4 {
            return Err(err(format!(
                "expected 4 columns (user, timestamp, app, event), found {}",
                cols.len()
            )));
        }
        let user = cols[0];
        if user.is_empty() {
            return Err(err("empty user".into()));
        }
        let ts_ms: u64 = cols[1].parse().map_err(|_| {
            err(format!(
                "timestamp {:?} is not an integer number of milliseconds",
                cols[1]
            ))
        })?;
        let app = cols[2];
        if app.is_empty() {
            return Err(err("empty app".into()));
        }
        check_app(app).map_err(err)?;
        let kind = match cols[3].to_ascii_lowercase().as_str() {
            "open" | "launch" | "foreground" => EventKind::Open,
            "close" | "background" | "home" => EventKind::Close,
            "exit" if exit_event => EventKind::Exit,
            other => {
                return Err(err(format!(
                    "unknown event {other:?}; valid events: open, close{}",
                    if exit_event { ", exit" } else { "" }
                )))
            }
        };
        let prev = last_ts.entry(user).or_insert(0);
        if ts_ms < *prev {
            return Err(err(format!(
                "timestamp {ts_ms} goes back in time for user {user:?} (previous {prev})"
            )));
        }
        *prev = ts_ms;
        out.push(TraceEvent {
            user: user.to_string(),
            ts_ms,
            app: app.to_string(),
            kind,
        });
    }
    if out.is_empty() {
        return Err(InputError::new(format!("{file}: the trace has no events")));
    }
    Ok(out)
}

/// A reader over parsed events: `next()` yields them in file order,
/// `reset()` starts again.
#[derive(Debug, Clone)]
pub struct TraceReader {
    events: Vec<TraceEvent>,
    pos: usize,
}

impl TraceReader {
    /// Reads a trace file.
    pub fn open(path: &std::path::Path, cat: &[AppSpec]) -> Result<Self, InputError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| InputError::new(format!("{}: cannot read: {e}", path.display())))?;
        Ok(Self::from_events(parse(
            &text,
            &path.display().to_string(),
            cat,
        )?))
    }
    /// A reader over events already parsed.
    pub fn from_events(events: Vec<TraceEvent>) -> Self {
        Self { events, pos: 0 }
    }
    /// Starts again from the first event.
    pub fn reset(&mut self) {
        self.pos = 0;
    }
    /// All events.
    pub fn events(&self) -> &[TraceEvent] {
        &self.events
    }
    /// All events, taken from the reader.
    pub fn into_events(self) -> Vec<TraceEvent> {
        self.events
    }
    /// Users in order of first appearance.
    pub fn users(&self) -> Vec<String> {
        let mut v: Vec<String> = Vec::new();
        for e in &self.events {
            if !v.contains(&e.user) {
                v.push(e.user.clone());
            }
        }
        v
    }
}

impl Iterator for TraceReader {
    type Item = TraceEvent;
    fn next(&mut self) -> Option<TraceEvent> {
        let e = self.events.get(self.pos).cloned();
        self.pos += 1;
        e
    }
}

/// App usage categories for the daily rhythm (the AppFlow paper §2.2.3: productivity
/// in the morning, media in the evening).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Category {
    Productivity,
    Social,
    Media,
    Game,
    Utility,
}

pub(crate) fn category(name: &str) -> Category {
    use Category::*;
    match name {
        "Qwen2.5" | "Gemma" | "Photoshop" | "ChatGPT" | "Zoom" | "Gmail" | "Docs" | "Sheets"
        | "Slack" | "Teams" | "Outlook" | "Calendar" | "Notes" | "Drive" | "Translate"
        | "LinkedIn" | "Files" | "Calculator" => Productivity,
        "WhatsApp" | "Instagram" | "Facebook" | "X" | "Telegram" | "Line" | "WeChat"
        | "Messages" | "Snapchat" | "Reddit" | "Discord" | "RedNote" | "Pinterest" | "Phone"
        | "Contacts" => Social,
        "TikTok" | "YouTube" | "Spotify" | "Netflix" | "PrimeVideo" | "DisneyPlus" | "Twitch"
        | "Snow" | "Podcasts" | "Audible" | "Kindle" | "CapCut" | "Lightroom" | "Camera"
        | "Photos" => Media,
        "PUBG" | "Roblox" => Game,
        _ => Utility,
    }
}

/// Weight of a category at an hour of the day (weekend shifts to media).
pub(crate) fn hour_weight(c: Category, hour: u64, weekend: bool) -> f64 {
    use Category::*;
    let morning = (7..12).contains(&hour);
    let midday = (12..18).contains(&hour);
    let evening = hour >= 18;
    match c {
        Productivity if morning && !weekend => 3.0,
        Productivity if midday && !weekend => 1.5,
        Productivity => 0.5,
        Social if midday => 2.0,
        Social => 1.2,
        Media if evening => 3.0,
        Media if weekend => 2.0,
        Media => 0.8,
        Game if evening => 2.5,
        Game if weekend => 1.5,
        Game => 0.4,
        Utility => 1.0,
    }
}

/// Summary of a generated trace.
#[derive(Debug, Clone, PartialEq)]
pub struct GenStats {
    /// App switches (open events).
    pub switches: u64,
    /// Distinct apps used.
    pub apps_used: u64,
    /// Share of re-opens within 30 minutes of the app's previous use.
    pub reaccess_30min_share: f64,
    /// Days.
    pub days: u64,
}

/// Trace start: 2024-01-01T00:00:00Z (a Monday), Unix ms.
pub const TRACE_EPOCH_MS: u64 = 1_704_067_200_000;

/// Generates a synthetic trace of `days` days over `apps` apps of the
/// catalogue (all GB-scale and low-memory apps first, then tail apps), as
/// CSV text with a header. Deterministic for a seed.
pub fn generate(
    cat: &[AppSpec],
    days: u64,
    apps: usize,
    seed: u64,
) -> Result<(String, GenStats), InputError> {
    if !(1..=100).contains(&days) {
        return Err(InputError::new(format!("--days must be 1-100, got {days}")));
    }
    let core = cat.iter().filter(|a| a.class != AppClass::Tail).count();
    if apps < core.max(1) || apps > cat.len() {
        return Err(InputError::new(format!(
            "--apps must be {core}-{} (the catalogue's size), got {apps}",
            cat.len()
        )));
    }
    let chosen: Vec<&AppSpec> = cat.iter().take(apps).collect();
    let mut r = SplitMix::new(seed ^ 0x7261_6365);
    // Popularity: Zipf-like over a seeded order; GB-scale apps are among
    // the heavily used (they dominate cold launches in the 100-day study, §6.6).
    let mut order: Vec<usize> = (0..chosen.len()).collect();
    for i in (1..order.len()).rev() {
        let j = r.below(i as u64 + 1) as usize;
        order.swap(i, j);
    }
    let mut pop = vec![0.0; chosen.len()];
    for (rank, &i) in order.iter().enumerate() {
        let boost = if chosen[i].class == AppClass::GbScale {
            2.0
        } else {
            1.0
        };
        pop[i] = boost / (rank as f64 + 1.0).powf(0.9);
    }
    let cats: Vec<Category> = chosen.iter().map(|a| category(&a.name)).collect();
    let mut text = String::from("user,timestamp,app,event\n");
    let mut last_use: Vec<Option<u64>> = vec![None; chosen.len()];
    let mut recent: Vec<usize> = Vec::new();
    let (mut switches, mut reopen, mut reopen_30) = (0u64, 0u64, 0u64);
    for day in 0..days {
        let weekend = matches!(day % 7, 5 | 6);
        let wake_ms = if weekend {
            9 * 3_600_000
        } else {
            7 * 3_600_000
        } + r.below(3_600_000);
        let sleep_ms = 23 * 3_600_000 + r.below(3_600_000);
        let mut t = wake_ms;
        while t < sleep_ms {
            // A session of 2-5 switches.
            let n = 2 + r.below(4);
            let mut prev: Option<usize> = None;
            for _ in 0..n {
                let hour = t / 3_600_000;
                let app = if !recent.is_empty() && r.unit() < 0.92 {
                    // Re-access of a recently used app (§2.2.3: 92.5 % within 30 min).
                    recent[r.below(recent.len().min(3) as u64) as usize]
                } else {
                    let w: Vec<f64> = (0..chosen.len())
                        .map(|i| pop[i] * hour_weight(cats[i], hour, weekend))
                        .collect();
                    let total: f64 = w.iter().sum();
                    let mut x = r.unit() * total;
                    let mut pick = 0;
                    for (i, wi) in w.iter().enumerate() {
                        if x < *wi {
                            pick = i;
                            break;
                        }
                        x -= wi;
                        pick = i;
                    }
                    pick
                };
                if Some(app) == prev {
                    continue;
                }
                prev = Some(app);
                let ts = TRACE_EPOCH_MS + day * 86_400_000 + t;
                if let Some(lu) = last_use[app] {
                    reopen += 1;
                    if ts - lu <= 30 * 60_000 {
                        reopen_30 += 1;
                    }
                }
                let _ = writeln!(text, "u1,{ts},{},open", chosen[app].name);
                switches += 1;
                recent.retain(|&x| x != app);
                recent.insert(0, app);
                recent.truncate(8);
                // Dwell: exponential, mean 2 min, at least 5 s.
                t += 5_000 + r.exp(115_000.0) as u64;
                last_use[app] = Some(TRACE_EPOCH_MS + day * 86_400_000 + t);
            }
            let ts = TRACE_EPOCH_MS + day * 86_400_000 + t;
            if let Some(p) = prev {
                let _ = writeln!(text, "u1,{ts},{},close", chosen[p].name);
            }
            // Gap between sessions: exponential, mean 7 min.
            t += 60_000 + r.exp(360_000.0) as u64;
        }
    }
    let apps_used = last_use.iter().filter(|x| x.is_some()).count() as u64;
    Ok((
        text,
        GenStats {
            switches,
            apps_used,
            reaccess_30min_share: if reopen > 0 {
                reopen_30 as f64 / reopen as f64
            } else {
                0.0
            },
            days,
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::catalogue;

    #[test]
    fn errors_name_file_and_line() {
        let c = catalogue();
        let e = parse(
            "user,timestamp,app,event\nu,1,TikTok,open\nu,x,TikTok,open\n",
            "t.csv",
            &c,
        )
        .unwrap_err()
        .to_string();
        assert!(e.starts_with("t.csv:3:"), "{e}");
        let e = parse("u,1,Nope,open\n", "t.csv", &c)
            .unwrap_err()
            .to_string();
        assert!(e.contains("t.csv:1") && e.contains("TikTok"), "{e}");
        let e = parse("u,5,TikTok,open\nu,4,TikTok,close\n", "f", &c)
            .unwrap_err()
            .to_string();
        assert!(e.contains("f:2") && e.contains("back in time"), "{e}");
        let e = parse("u,5,TikTok,jump\n", "f", &c).unwrap_err().to_string();
        assert!(e.contains("f:1") && e.contains("jump"), "{e}");
        let e = parse("u,5,TikTok\n", "f", &c).unwrap_err().to_string();
        assert!(e.contains("4 columns"), "{e}");
        assert!(parse("# nothing\n", "f", &c).is_err());
    }

    #[test]
    fn generator_is_deterministic_and_realistic() {
        let c = catalogue();
        let (a, sa) = generate(&c, 10, 60, 7).unwrap();
        let (b, _) = generate(&c, 10, 60, 7).unwrap();
        assert_eq!(a, b);
        let (other, _) = generate(&c, 10, 60, 8).unwrap();
        assert_ne!(a, other);
        assert!(sa.switches >= 800, "{sa:?}");
        assert!(sa.reaccess_30min_share > 0.8, "{sa:?}");
        let ev = parse(&a, "gen", &c).unwrap();
        assert_eq!(
            ev.iter().filter(|e| e.kind == EventKind::Open).count() as u64,
            sa.switches
        );
        assert!(generate(&c, 0, 60, 1).is_err());
        assert!(generate(&c, 101, 60, 1).is_err());
        assert!(generate(&c, 5, 500, 1).is_err());
    }
}
