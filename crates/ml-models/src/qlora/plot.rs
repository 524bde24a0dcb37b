//! PNG plot of held-out perplexity against adapter rank per layer type (plotters).

use std::collections::BTreeMap;
use std::path::Path;

use plotters::prelude::*;

use crate::qlora::study::StudyReport;
use crate::{MlError, Result};

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

/// Draws perplexity vs rank (log₂ axis) for attention-only, MLP-only and both, with the
/// pretrained model's and full fine-tuning's perplexity as reference lines, into `path` (PNG).
pub fn plot_rank_sweep(rep: &StudyReport, path: &Path) -> Result<()> {
    let e = |x: String| MlError::Plot(x);
    let curves = rank_curves(rep);
    let full = rep
        .rows
        .iter()
        .filter(|r| r.group == "method" && r.target == "all")
        .map(|r| r.perplexity)
        .fold(f32::NAN, f32::min);
    let ys = curves.values().flatten().map(|p| p.1).chain(
        [rep.base_target_perplexity, full]
            .into_iter()
            .filter(|v| v.is_finite()),
    );
    let (lo, hi) = ys.fold((f32::MAX, f32::MIN), |(a, b), y| (a.min(y), b.max(y)));
    if lo > hi {
        return Err(MlError::InvalidInput("no rank-sweep rows to plot".into()));
    }
    let max_rank = curves.values().flatten().map(|p| p.0).max().unwrap_or(1);
    let xmax = (max_rank as f64).log2().max(1.0);
    let pad = (hi - lo).max(0.01) * 0.1;
    let root = BitMapBackend::new(path, (900, 600)).into_drawing_area();
    root.fill(&WHITE).map_err(|x| e(x.to_string()))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "QLoRA (NF4+DQ): held-out perplexity vs rank",
            ("sans-serif", 24),
        )
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(60)
        .build_cartesian_2d(-0.2f64..xmax + 0.2, (lo - pad) as f64..(hi + pad) as f64)
        .map_err(|x| e(x.to_string()))?;
    chart
        .configure_mesh()
        .x_desc("adapter rank r (log2 axis)")
        .x_labels(xmax.ceil() as usize + 1)
        .y_desc("perplexity (target domain)")
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
    for (label, y, c) in [
        ("pretrained (no FT)", rep.base_target_perplexity, BLACK),
        ("full fine-tune", full, CYAN),
    ] {
        if y.is_finite() {
            chart
                .draw_series(LineSeries::new(
                    vec![(-0.2, y as f64), (xmax + 0.2, y as f64)],
                    c,
                ))
                .map_err(|x| e(x.to_string()))?
                .label(label)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c));
        }
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|x| e(x.to_string()))?;
    root.present().map_err(|x| e(x.to_string()))?;
    Ok(())
}
