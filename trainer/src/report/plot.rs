//! PNG curves of a run's metrics, drawn with `plotters`' bitmap backend.
//!
//! Each curve's file is named after its metric (`reward.png`, `rewards_swe-rl_mean.png`: `/`
//! becomes `_`). A plot has a title naming the metric and the run, the axis titles `step` and
//! the metric, tick labels on both axes, the raw values as a thin light line and a moving
//! average (window: a tenth of the run) as a thick dark one, and a legend naming both. Text is
//! drawn with DejaVu Sans, embedded in the binary (`trainer/assets/fonts/`, Bitstream Vera
//! licence), so plots look the same on every machine and need no system fonts. `plots.json`
//! beside them lists each file with its metric's first, last, min and max values.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::error::{Error, IoOp, Result};
use crate::report::metrics_log::StepMetrics;

/// Plot size in pixels.
pub(crate) const SIZE: (u32, u32) = (800, 480);

/// The embedded font (DejaVu Sans 2.37).
/// The metrics plotted after a GRPO run.
pub(crate) const GRPO_PLOTS: [&str; 9] = [
    "reward",
    "reward_std",
    "frac_reward_zero_std",
    "completions/mean_length",
    "completions/clipped_ratio",
    "entropy",
    "kl",
    "loss",
    "grad_norm",
];

/// The metrics plotted after an SFT run.
pub(crate) const SFT_PLOTS: [&str; 3] = ["loss", "entropy", "grad_norm"];

const FONT: &[u8] = include_bytes!("../../assets/fonts/DejaVuSans.ttf");

/// The family name the embedded font is registered under; `plotters` asks for it by this name.
const FAMILY: &str = "sans-serif";

/// Registers the embedded font with `plotters` (once per process).
fn register_font() -> std::result::Result<(), String> {
    static REGISTERED: OnceLock<std::result::Result<(), String>> = OnceLock::new();
    REGISTERED
        .get_or_init(|| {
            plotters::style::register_font(FAMILY, FontStyle::Normal, FONT)
                .map_err(|_| "the embedded DejaVu Sans font does not parse".to_owned())
        })
        .clone()
}

/// Draws one PNG per metric in `names` that has at least two defined values into `dir`, and
/// `plots.json`; `run` names the run in each plot's title. Returns the files written.
pub(crate) fn plot_metrics(
    history: &[StepMetrics],
    names: &[&str],
    dir: &Path,
    run: &str,
) -> Result<Vec<PathBuf>> {
    fs_err::create_dir_all(dir).map_err(|e| Error::io(IoOp::CreateDir, dir, e))?;
    let mut written = Vec::new();
    let mut index = serde_json::Map::new();
    for name in names {
        let points: Vec<(f64, f64)> = history
            .iter()
            .filter_map(|m| m.get(name).map(|v| (m.step as f64, v)))
            .collect();
        if points.len() < 2 {
            continue;
        }
        let path = dir.join(format!("{}.png", name.replace('/', "_")));
        let plot = |reason| Error::Plot {
            path: path.clone(),
            reason,
        };
        register_font().map_err(plot)?;
        // Drawn in memory and written whole, so that a plot is the old one or the new one.
        let mut pixels = vec![0; SIZE.0 as usize * SIZE.1 as usize * 3];
        draw(
            BitMapBackend::with_buffer(&mut pixels, SIZE).into_drawing_area(),
            &points,
            name,
            run,
        )
        .map_err(plot)?;
        let png = encode_png(&pixels).map_err(plot)?;
        swerve_cache::write_atomic(&path, png).map_err(|e| Error::io(IoOp::Write, &path, e))?;
        let values: Vec<f64> = points.iter().map(|p| p.1).collect();
        index.insert(
            name.to_string(),
            serde_json::json!({
                "file": path.file_name().map(|f| f.to_string_lossy().into_owned()),
                "first_step": points[0].0,
                "last_step": points[points.len() - 1].0,
                "first": values[0],
                "last": values[values.len() - 1],
                "min": values.iter().copied().fold(f64::INFINITY, f64::min),
                "max": values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            }),
        );
        written.push(path);
    }
    let index_path = dir.join("plots.json");
    let text = serde_json::to_string_pretty(&index).expect("JSON values serialise");
    swerve_cache::write_atomic(&index_path, text)
        .map_err(|e| Error::io(IoOp::Write, &index_path, e))?;
    Ok(written)
}

/// A plot's RGB `pixels` as PNG, encoded as `plotters` saves a bitmap to a `.png` path.
fn encode_png(pixels: &[u8]) -> std::result::Result<Vec<u8>, String> {
    use image::ImageEncoder;
    let mut png = Vec::new();
    image::codecs::png::PngEncoder::new(&mut png)
        .write_image(pixels, SIZE.0, SIZE.1, image::ColorType::Rgb8)
        .map_err(|e| e.to_string())?;
    Ok(png)
}

/// A trailing moving average over `window` points.
pub(crate) fn moving_average(values: &[f64], window: usize) -> Vec<f64> {
    let window = window.max(1);
    let mut sum = 0.0;
    values
        .iter()
        .enumerate()
        .map(|(i, v)| {
            sum += v;
            if i >= window {
                sum -= values[i - window];
            }
            sum / (i + 1).min(window) as f64
        })
        .collect()
}

/// Draws the plot of `metric`'s `points` (at least two) onto `root`.
fn draw<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    points: &[(f64, f64)],
    metric: &str,
    run: &str,
) -> std::result::Result<(), String> {
    let err = |e: &dyn std::fmt::Display| e.to_string();
    let (x0, x1) = (
        points[0].0,
        points[points.len() - 1].0.max(points[0].0 + 1.0),
    );
    let (mut y0, mut y1) = points
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), p| {
            (lo.min(p.1), hi.max(p.1))
        });
    if y1 - y0 < 1e-12 {
        (y0, y1) = (y0 - 0.5, y1 + 0.5);
    }
    let pad = (y1 - y0) * 0.05;
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let mut chart = ChartBuilder::on(&root)
        .margin(16)
        .caption(format!("{metric} · {run}"), (FAMILY, 20))
        .x_label_area_size(44)
        .y_label_area_size(72)
        .build_cartesian_2d(x0..x1, (y0 - pad)..(y1 + pad))
        .map_err(|e| err(&e))?;
    chart
        .configure_mesh()
        .x_desc("step")
        .y_desc(metric)
        .axis_desc_style((FAMILY, 15))
        .label_style((FAMILY, 13))
        .x_labels(10)
        .y_labels(6)
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_label_formatter(&|y| format_tick(*y, y1 - y0))
        .light_line_style(RGBColor(240, 240, 240))
        .bold_line_style(RGBColor(215, 215, 215))
        .draw()
        .map_err(|e| err(&e))?;
    let raw = RGBColor(150, 180, 230);
    chart
        .draw_series(LineSeries::new(points.iter().copied(), raw))
        .map_err(|e| err(&e))?
        .label(format!("{metric} (raw)"))
        .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], raw.stroke_width(2)));
    let values: Vec<f64> = points.iter().map(|p| p.1).collect();
    let window = points.len().div_ceil(10);
    let smooth = moving_average(&values, window);
    let dark = RGBColor(20, 60, 160);
    chart
        .draw_series(LineSeries::new(
            points.iter().map(|p| p.0).zip(smooth),
            dark.stroke_width(3),
        ))
        .map_err(|e| err(&e))?
        .label(format!("moving average ({window} steps)"))
        .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], dark.stroke_width(3)));
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .label_font((FAMILY, 13))
        .background_style(WHITE.mix(0.85))
        .border_style(RGBColor(180, 180, 180))
        .draw()
        .map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))?;
    Ok(())
}

/// A y tick label: as many decimals as the range needs (at least enough to tell six ticks
/// apart), in scientific notation for very small or large values.
fn format_tick(y: f64, range: f64) -> String {
    let magnitude = y.abs().max(range.abs());
    if magnitude != 0.0 && !(1e-3..1e5).contains(&magnitude) {
        return format!("{y:.2e}");
    }
    let decimals = if range > 0.0 {
        (1.0 - (range / 5.0).log10().round()).clamp(0.0, 6.0) as usize
    } else {
        2
    };
    format!("{y:.decimals$}")
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    #[test]
    fn moving_average_trails() {
        assert_eq!(
            moving_average(&[1.0, 3.0, 5.0, 7.0], 2),
            vec![1.0, 2.0, 4.0, 6.0]
        );
    }

    #[test]
    fn writes_png_and_index_for_defined_curves() {
        let dir = tempfile::tempdir().unwrap();
        let history: Vec<StepMetrics> = (1..=5)
            .map(|step| StepMetrics {
                step,
                values: BTreeMap::from([
                    ("reward".to_owned(), step as f64 * 0.1),
                    ("kl".to_owned(), f64::NAN),
                ]),
            })
            .collect();
        let files = plot_metrics(&history, &["reward", "kl"], dir.path(), "grpo out").unwrap();
        assert_eq!(files, vec![dir.path().join("reward.png")]);
        let png = fs_err::read(&files[0]).unwrap();
        assert_eq!(&png[1..4], b"PNG");
        let index = fs_err::read_to_string(dir.path().join("plots.json")).unwrap();
        assert!(index.contains("\"last\": 0.5"), "{index}");
    }

    /// The RGB pixels of a plot of a noisy rising curve.
    fn render(metric: &str, run: &str) -> Vec<u8> {
        register_font().unwrap();
        let points: Vec<(f64, f64)> = (1..=60)
            .map(|s| {
                (
                    s as f64,
                    -0.8 + s as f64 * 0.01 + if s % 3 == 0 { 0.1 } else { 0.0 },
                )
            })
            .collect();
        let mut buffer = vec![0u8; (SIZE.0 * SIZE.1 * 3) as usize];
        draw(
            BitMapBackend::with_buffer(&mut buffer, SIZE).into_drawing_area(),
            &points,
            metric,
            run,
        )
        .unwrap();
        buffer
    }

    /// Pixels in rows `rows` and columns `cols` drawn in near-black, the colour of text and axes
    /// (the curves are blue, the grid light grey).
    fn dark_pixels(buffer: &[u8], rows: std::ops::Range<u32>, cols: std::ops::Range<u32>) -> usize {
        rows.flat_map(|y| cols.clone().map(move |x| ((y * SIZE.0 + x) * 3) as usize))
            .filter(|&i| buffer[i..i + 3].iter().all(|&c| c < 110))
            .count()
    }

    /// Rows in which two renders differ.
    fn differing_rows(a: &[u8], b: &[u8]) -> Vec<u32> {
        (0..SIZE.1)
            .filter(|&y| {
                let row = (y * SIZE.0 * 3) as usize..((y + 1) * SIZE.0 * 3) as usize;
                a[row.clone()] != b[row]
            })
            .collect()
    }

    #[test]
    fn plots_carry_title_axis_titles_tick_labels_and_legend() {
        let plot = render("reward", "grpo out/run-1");
        let (w, h) = SIZE;
        // Nothing is drawn in the margin.
        assert_eq!(dark_pixels(&plot, 0..10, 0..w), 0);
        // The title band, the x tick labels, the x axis title, the y tick labels and the y
        // axis title all hold text.
        let regions = [
            ("title", 16..40, 0..w),
            ("x tick labels", h - 58..h - 40, 100..w),
            ("x axis title", h - 38..h - 16, w / 2 - 60..w / 2 + 60),
            ("y tick labels", 60..h - 70, 45..86),
            ("y axis title", h / 2 - 40..h / 2 + 40, 16..40),
            ("legend", 55..110, w - 260..w - 30),
        ];
        for (what, rows, cols) in regions {
            let n = dark_pixels(&plot, rows.clone(), cols.clone());
            assert!(
                n > 20,
                "{what}: {n} dark pixels in rows {rows:?}, columns {cols:?}"
            );
        }
    }

    #[test]
    fn title_names_the_metric_and_the_run() {
        let a = render("reward", "grpo out/run-1");
        let b = render("reward", "grpo out/run-2");
        let rows = differing_rows(&a, &b);
        assert!(!rows.is_empty(), "the run name is not drawn");
        assert!(rows.iter().all(|&y| (16..44).contains(&y)), "{rows:?}");
        // The metric name is both in the title and the y axis title.
        let c = render("loss", "grpo out/run-1");
        let rows = differing_rows(&a, &c);
        assert!(
            rows.iter().any(|&y| y < 44) && rows.iter().any(|&y| y > 100),
            "{rows:?}"
        );
    }

    #[test]
    fn tick_labels_show_enough_decimals() {
        assert_eq!(format_tick(-0.75, 0.9), "-0.75");
        assert_eq!(format_tick(0.0123, 0.004), "0.0123");
        assert_eq!(format_tick(150.0, 400.0), "150");
        assert_eq!(format_tick(2e-5, 1e-5), "2.00e-5");
    }
}
