//! PNG curves of a run's metrics, drawn with `plotters`' bitmap backend.
//!
//! The plots carry no text: `plotters` draws text through system fonts (fontconfig) or a font
//! file that swerve would have to ship, and neither is worth a dependency here. Each curve's
//! file is named after its metric (`reward.png`, `rewards_swe-rl_mean.png`: `/` becomes `_`);
//! the raw values are a thin light line, a moving average (window: a tenth of the run) a thick
//! dark one, and faint horizontal lines mark the quarters of the value range. `plots.json`
//! beside them lists each file with its metric's first, last, min and max values, so the axes
//! can be read off.

use std::path::{Path, PathBuf};

use plotters::prelude::*;

use super::metrics_log::StepMetrics;
use crate::error::{Error, Result};

/// Plot size in pixels.
const SIZE: (u32, u32) = (800, 480);

/// Draws one PNG per metric in `names` that has at least two defined values into `dir`, and
/// `plots.json`. Returns the files written.
pub fn plot_metrics(history: &[StepMetrics], names: &[&str], dir: &Path) -> Result<Vec<PathBuf>> {
    fs_err::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
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
        draw(&points, &path).map_err(|reason| Error::Plot {
            path: path.clone(),
            reason,
        })?;
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
    fs_err::write(&index_path, text).map_err(|e| Error::io(&index_path, e))?;
    Ok(written)
}

/// A trailing moving average over `window` points.
pub fn moving_average(values: &[f64], window: usize) -> Vec<f64> {
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

fn draw(points: &[(f64, f64)], path: &Path) -> std::result::Result<(), String> {
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
    let root = BitMapBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let mut chart = ChartBuilder::on(&root)
        .margin(16)
        .build_cartesian_2d(x0..x1, (y0 - pad)..(y1 + pad))
        .map_err(|e| err(&e))?;
    for q in 0..=4 {
        let y = y0 + (y1 - y0) * q as f64 / 4.0;
        chart
            .draw_series(LineSeries::new([(x0, y), (x1, y)], RGBColor(225, 225, 225)))
            .map_err(|e| err(&e))?;
    }
    chart
        .draw_series(LineSeries::new(
            points.iter().copied(),
            RGBColor(150, 180, 230),
        ))
        .map_err(|e| err(&e))?;
    let values: Vec<f64> = points.iter().map(|p| p.1).collect();
    let smooth = moving_average(&values, points.len().div_ceil(10));
    chart
        .draw_series(LineSeries::new(
            points.iter().map(|p| p.0).zip(smooth),
            RGBColor(20, 60, 160).stroke_width(3),
        ))
        .map_err(|e| err(&e))?;
    root.draw(&Rectangle::new(
        [(16, 16), (SIZE.0 as i32 - 16, SIZE.1 as i32 - 16)],
        BLACK.stroke_width(1),
    ))
    .map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))?;
    Ok(())
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
        let files = plot_metrics(&history, &["reward", "kl"], dir.path()).unwrap();
        assert_eq!(files, vec![dir.path().join("reward.png")]);
        let png = fs_err::read(&files[0]).unwrap();
        assert_eq!(&png[1..4], b"PNG");
        let index = fs_err::read_to_string(dir.path().join("plots.json")).unwrap();
        assert!(index.contains("\"last\": 0.5"), "{index}");
    }
}
