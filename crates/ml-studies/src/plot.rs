//! PNG plots (plotters): a held-out metric (perplexity, accuracy) against adapter rank per layer
//! type, and class-incremental accuracy after each task per method.

use std::collections::BTreeMap;
use std::path::Path;

use plotters::prelude::*;

use crate::study::StudyReport;
use crate::{Result, StudyError};

/// Mean perplexity over seeds per (target, rank) of the rank sweep.
pub fn rank_curves(rep: &StudyReport) -> BTreeMap<String, Vec<(usize, f32)>> {
    let mut acc: BTreeMap<(String, usize), (f32, usize)> = BTreeMap::new();
    for r in rep.rows.iter().filter(|r| r.group == "rank") {
        let e = acc.entry((r.target.clone(), r.rank)).or_insert((0.0, 0));
        e.0 += r.perplexity;
        e.1 += 1;
    }
    let mut out: BTreeMap<String, Vec<(usize, f32)>> = BTreeMap::new();
    for ((t, rank), (s, n)) in acc {
        out.entry(t).or_default().push((rank, s / n as f32));
    }
    out
}

/// Mean held-out perplexity of full fine-tuning over seeds (NaN when the report has none).
pub fn full_finetune_mean(rep: &StudyReport) -> f32 {
    let v: Vec<f32> = rep
        .rows
        .iter()
        .filter(|r| r.group == "method" && r.target == "all")
        .map(|r| r.perplexity)
        .collect();
    if v.is_empty() {
        f32::NAN
    } else {
        v.iter().sum::<f32>() / v.len() as f32
    }
}

/// Draws perplexity vs rank (log₂ axis) for attention-only, MLP-only and both (means over
/// seeds), with full fine-tuning's mean perplexity as a dashed reference line and the
/// pretrained model's perplexity in the caption, into `path` (PNG).
pub fn plot_rank_sweep(rep: &StudyReport, path: &Path) -> Result<()> {
    let full = full_finetune_mean(rep);
    let reference = Some(full)
        .filter(|v| v.is_finite())
        .map(|f| (format!("full fine-tune, mean over seeds ({f:.2})"), f));
    let caption = format!(
        "QLoRA (NF4+DQ): held-out perplexity vs rank (before fine-tuning: {:.2})",
        rep.base_target_perplexity
    );
    plot_metric_vs_rank(
        &rank_curves(rep),
        reference,
        &caption,
        "perplexity (target domain)",
        path,
    )
}

/// Draws one line per curve (label → (rank, value) points) against rank on a log₂ axis, an
/// optional dashed horizontal reference line (label, value), into `path` (PNG). The y range
/// covers the curves and the reference line; the legend sits in head room above them.
pub fn plot_metric_vs_rank(
    curves: &BTreeMap<String, Vec<(usize, f32)>>,
    reference: Option<(String, f32)>,
    caption: &str,
    y_desc: &str,
    path: &Path,
) -> Result<()> {
    let log: BTreeMap<String, Vec<(f64, f64)>> = curves
        .iter()
        .map(|(k, v)| {
            let pts = v.iter().map(|&(r, y)| ((r as f64).log2(), f64::from(y)));
            (k.clone(), pts.collect())
        })
        .collect();
    let max_rank = curves.values().flatten().map(|p| p.0).max().unwrap_or(1);
    let xmax = (max_rank as f64).log2().max(1.0);
    plot_lines(
        &log,
        reference.map(|(l, y)| (l, f64::from(y))),
        Axes {
            caption,
            x_desc: "adapter rank r (log2 axis)",
            y_desc,
            x_range: (-0.2, xmax + 0.2),
            x_labels: xmax.ceil() as usize + 1,
            x_label: &|x| format!("{}", 2f64.powf(*x).round()),
        },
        path,
    )
}

/// Accuracy on all classes seen so far after each task, one line per method (label → one
/// value per task, tasks numbered from 1 on the x axis), into `path` (PNG).
pub fn plot_task_curves(
    curves: &BTreeMap<String, Vec<f64>>,
    caption: &str,
    path: &Path,
) -> Result<()> {
    let tasks = curves.values().map(Vec::len).max().unwrap_or(0);
    let pts: BTreeMap<String, Vec<(f64, f64)>> = curves
        .iter()
        .map(|(k, v)| {
            let p = v.iter().enumerate().map(|(t, &a)| ((t + 1) as f64, a));
            (k.clone(), p.collect())
        })
        .collect();
    plot_lines(
        &pts,
        None,
        Axes {
            caption,
            x_desc: "after task",
            y_desc: "accuracy on all classes seen",
            x_range: (0.8, tasks as f64 + 0.2),
            x_labels: tasks,
            x_label: &|x| format!("{}", x.round()),
        },
        path,
    )
}

/// Caption, axis descriptions and the x range and labels of [`plot_lines`].
struct Axes<'a> {
    caption: &'a str,
    x_desc: &'a str,
    y_desc: &'a str,
    x_range: (f64, f64),
    x_labels: usize,
    x_label: &'a dyn Fn(&f64) -> String,
}

/// One line with markers per curve, an optional dashed horizontal reference line, the legend in
/// head room above the data.
fn plot_lines(
    curves: &BTreeMap<String, Vec<(f64, f64)>>,
    reference: Option<(String, f64)>,
    axes: Axes<'_>,
    path: &Path,
) -> Result<()> {
    let e = |x: String| StudyError::Plot(x);
    let ys = curves
        .values()
        .flatten()
        .map(|p| p.1)
        .chain(reference.as_ref().map(|r| r.1));
    let (lo, hi) = ys.fold((f64::MAX, f64::MIN), |(a, b), y| (a.min(y), b.max(y)));
    if lo > hi {
        return Err(StudyError::InvalidInput("no points to plot".into()));
    }
    let pad = (hi - lo).max(0.01) * 0.1;
    let (x0, x1) = axes.x_range;
    let root = BitMapBackend::new(path, (900, 600)).into_drawing_area();
    root.fill(&WHITE).map_err(|x| e(x.to_string()))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(axes.caption, ("sans-serif", 22))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(60)
        // Head room above the curves for the legend (upper right), so it covers no data.
        .build_cartesian_2d(x0..x1, (lo - pad)..(hi + 4.0 * pad))
        .map_err(|x| e(x.to_string()))?;
    chart
        .configure_mesh()
        .x_desc(axes.x_desc)
        .x_labels(axes.x_labels)
        .y_desc(axes.y_desc)
        .x_label_formatter(axes.x_label)
        .draw()
        .map_err(|x| e(x.to_string()))?;
    let colors = [
        RED,
        BLUE,
        GREEN,
        MAGENTA,
        CYAN,
        BLACK,
        RGBColor(230, 140, 0),
    ];
    for (i, (label, pts)) in curves.iter().enumerate() {
        let c = colors[i % colors.len()];
        chart
            .draw_series(LineSeries::new(pts.clone(), c.stroke_width(2)))
            .map_err(|x| e(x.to_string()))?
            .label(label.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c));
        chart
            .draw_series(pts.iter().map(|&p| Circle::new(p, 4, c.filled())))
            .map_err(|x| e(x.to_string()))?;
    }
    if let Some((label, y)) = reference {
        let style = BLACK.stroke_width(2);
        chart
            .draw_series(DashedLineSeries::new(vec![(x0, y), (x1, y)], 10, 6, style))
            .map_err(|x| e(x.to_string()))?
            .label(label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|x| e(x.to_string()))?;
    root.present().map_err(|x| e(x.to_string()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::study::StudyRow;

    fn row(group: &str, target: &str, seed: u64, perplexity: f32) -> StudyRow {
        StudyRow {
            variant: format!("{group} {target}"),
            group: group.into(),
            target: target.into(),
            rank: 0,
            alpha: 0.0,
            seed,
            trainable: 1,
            perplexity,
            state_bytes: 0,
            peak_bytes: None,
            predicted_bytes: None,
            tokens_per_s: 0.0,
        }
    }

    #[test]
    fn full_finetune_line_is_the_mean_over_seeds() {
        let mut rep = StudyReport {
            source_perplexity: 1.0,
            base_target_perplexity: 20.0,
            pretrain_tokens_per_s: 0.0,
            model_params: 1,
            rows: vec![
                row("method", "all", 0, 11.0),
                row("method", "all", 1, 13.0),
                row("method", "both", 0, 5.0),
            ],
        };
        assert_eq!(full_finetune_mean(&rep), 12.0);
        rep.rows.retain(|r| r.target != "all");
        assert!(full_finetune_mean(&rep).is_nan());
    }
}
