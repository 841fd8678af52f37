//! SVG plots: cold-launch latency per app and policy, and the timeline of
//! one target launch (domain memory, storage reads, reclaim mode).

use crate::run::TimelinePoint;
use anyhow::{Context, Result};
use appflow_core::report::RunReport;
use plotters::prelude::*;
use std::path::Path;

const COLORS: &[RGBColor] = &[
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

fn err<E: std::fmt::Debug>(e: E) -> anyhow::Error {
    anyhow::anyhow!("plotting: {e:?}")
}

type Chart<'a, 'b> = ChartContext<
    'a,
    SVGBackend<'b>,
    Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
>;

/// Draws the legend (at `at`, else plotters' default place) and writes the file.
fn finish<'a, 'b: 'a>(
    chart: &mut Chart<'a, 'b>,
    root: &DrawingArea<SVGBackend<'b>, plotters::coord::Shift>,
    at: Option<SeriesLabelPosition>,
    path: &Path,
) -> Result<()> {
    let mut legend = chart.configure_series_labels();
    if let Some(at) = at {
        legend.position(at);
    }
    legend
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(err)?;
    root.present()
        .with_context(|| format!("writing {}", path.display()))
}

/// Bars of the median cold-launch latency (with p90 whiskers) per app and policy.
pub fn latency(report: &RunReport, path: &Path) -> Result<()> {
    let mut apps: Vec<String> = report
        .results
        .iter()
        .flat_map(|r| r.apps.iter().map(|a| a.app.clone()))
        .collect();
    apps.sort();
    apps.dedup();
    let np = report.results.len().max(1);
    let ymax = report
        .results
        .iter()
        .flat_map(|r| r.apps.iter().map(|a| a.cold_launch_ms.p90))
        .fold(1.0f64, f64::max)
        * 1.15;
    let width = (200 + apps.len() * np * 28).clamp(640, 2400) as u32;
    let root = SVGBackend::new(path, (width, 480)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!(
                "appflow bench: {} on {} — launch latency (bar p50, line p90)",
                report.workload, report.device
            ),
            ("sans-serif", 18),
        )
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..apps.len() as f64, 0f64..ymax)
        .map_err(err)?;
    let labels = apps.clone();
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(apps.len().max(1))
        .x_label_formatter(&|x| {
            let i = (*x - 0.5).round() as usize;
            labels.get(i).cloned().unwrap_or_default()
        })
        .y_desc("ms")
        .draw()
        .map_err(err)?;
    let bw = 0.8 / np as f64;
    for (pi, r) in report.results.iter().enumerate() {
        let c = COLORS[pi % COLORS.len()];
        let bars: Vec<(f64, f64, f64)> = r
            .apps
            .iter()
            .filter_map(|a| {
                let i = apps.iter().position(|x| *x == a.app)?;
                Some((
                    i as f64 + 0.1 + pi as f64 * bw,
                    a.cold_launch_ms.p50,
                    a.cold_launch_ms.p90,
                ))
            })
            .collect();
        chart
            .draw_series(
                bars.iter()
                    .map(|&(x, y, _)| Rectangle::new([(x, 0.0), (x + bw * 0.9, y)], c.filled())),
            )
            .map_err(err)?
            .label(r.policy.clone())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 10, y + 5)], c.filled()));
        chart
            .draw_series(bars.iter().map(|&(x, y, p90)| {
                PathElement::new(
                    vec![(x + bw * 0.45, y), (x + bw * 0.45, p90)],
                    BLACK.stroke_width(1),
                )
            }))
            .map_err(err)?;
    }
    finish(&mut chart, &root, None, path)
}

/// Timeline of one launch: memory in the domain (MiB), cumulative storage
/// reads (MiB), and shaded spans where the domain's swappiness is 0
/// (efficiency-first mode: file-only reclaim).
pub fn timeline(title: &str, pts: &[TimelinePoint], path: &Path) -> Result<()> {
    let mib = |b: u64| b as f64 / 1048576.0;
    let tmax = pts.last().map(|p| p.t_ms).unwrap_or(1.0).max(1.0);
    let ymax = pts
        .iter()
        .map(|p| mib(p.usage_bytes.max(p.read_bytes).max(p.swap_bytes)))
        .fold(1.0, f64::max)
        * 1.1;
    let root = SVGBackend::new(path, (900, 480)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..tmax, 0f64..ymax)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("ms since exec")
        .y_desc("MiB")
        .draw()
        .map_err(err)?;
    // Efficiency-first spans.
    let mut spans = Vec::new();
    let mut start: Option<f64> = None;
    for p in pts {
        let eff = p.swappiness == 0 || p.mode.as_deref().is_some_and(|m| m.contains("efficiency"));
        match (eff, start) {
            (true, None) => start = Some(p.t_ms),
            (false, Some(s)) => {
                spans.push((s, p.t_ms));
                start = None;
            }
            _ => {}
        }
    }
    if let Some(s) = start {
        spans.push((s, tmax));
    }
    chart
        .draw_series(
            spans.iter().map(|&(a, b)| {
                Rectangle::new([(a, 0.0), (b, ymax)], RGBColor(255, 230, 200).filled())
            }),
        )
        .map_err(err)?
        .label("efficiency-first (swappiness 0)")
        .legend(|(x, y)| {
            Rectangle::new(
                [(x, y - 5), (x + 10, y + 5)],
                RGBColor(255, 230, 200).filled(),
            )
        });
    type Getter = fn(&TimelinePoint) -> u64;
    let series: [(&str, Getter, RGBColor); 5] = [
        ("usage", |p| p.usage_bytes, COLORS[0]),
        ("page cache", |p| p.cache_bytes, COLORS[1]),
        ("anon (rss)", |p| p.rss_bytes, COLORS[2]),
        ("swapped out", |p| p.swap_bytes, COLORS[3]),
        ("read from storage", |p| p.read_bytes, COLORS[4]),
    ];
    for (name, f, c) in series {
        chart
            .draw_series(LineSeries::new(
                pts.iter().map(|p| (p.t_ms, mib(f(p)))),
                c.stroke_width(2),
            ))
            .map_err(err)?
            .label(name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 15, y)], c.stroke_width(2)));
    }
    finish(
        &mut chart,
        &root,
        Some(SeriesLabelPosition::UpperLeft),
        path,
    )
}
