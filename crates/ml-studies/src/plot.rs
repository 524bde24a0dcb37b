//! PNG plots of a held-out metric (perplexity, accuracy) against adapter rank per layer type
//! (plotters).

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
    let e = |x: String| StudyError::Plot(x);
    let ys = curves
        .values()
        .flatten()
        .map(|p| p.1)
        .chain(reference.as_ref().map(|r| r.1));
    let (lo, hi) = ys.fold((f32::MAX, f32::MIN), |(a, b), y| (a.min(y), b.max(y)));
    if lo > hi {
        return Err(StudyError::InvalidInput(
            "no rank-sweep rows to plot".into(),
        ));
    }
    let max_rank = curves.values().flatten().map(|p| p.0).max().unwrap_or(1);
    let xmax = (max_rank as f64).log2().max(1.0);
    let pad = (hi - lo).max(0.01) * 0.1;
    let root = BitMapBackend::new(path, (900, 600)).into_drawing_area();
    root.fill(&WHITE).map_err(|x| e(x.to_string()))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(caption, ("sans-serif", 22))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(60)
        // Head room above the curves for the legend (upper right), so it covers no data.
        .build_cartesian_2d(
            -0.2f64..xmax + 0.2,
            (lo - pad) as f64..(hi + 4.0 * pad) as f64,
        )
        .map_err(|x| e(x.to_string()))?;
    chart
        .configure_mesh()
        .x_desc("adapter rank r (log2 axis)")
        .x_labels(xmax.ceil() as usize + 1)
        .y_desc(y_desc)
        .x_label_formatter(&|x| format!("{}", 2f64.powf(*x).round()))
        .draw()
        .map_err(|x| e(x.to_string()))?;
    let colors = [RED, BLUE, GREEN, MAGENTA];
    for (i, (target, pts)) in curves.iter().enumerate() {
        let c = colors[i % colors.len()];
        let line: Vec<(f64, f64)> = pts
            .iter()
            .map(|&(r, p)| ((r as f64).log2(), p as f64))
            .collect();
        chart
            .draw_series(LineSeries::new(line.clone(), c.stroke_width(2)))
            .map_err(|x| e(x.to_string()))?
            .label(target.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c));
        chart
            .draw_series(line.into_iter().map(|p| Circle::new(p, 4, c.filled())))
            .map_err(|x| e(x.to_string()))?;
    }
    if let Some((label, y)) = reference {
        let style = BLACK.stroke_width(2);
        chart
            .draw_series(DashedLineSeries::new(
                vec![(-0.2, y as f64), (xmax + 0.2, y as f64)],
                10,
                6,
                style,
            ))
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
