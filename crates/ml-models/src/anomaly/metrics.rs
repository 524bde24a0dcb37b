//! Exact ranking metrics: AUC-ROC with ties counted as half, and average precision as
//! scikit-learn's `average_precision_score` defines it (step-wise, no interpolation).

use super::InputError;

/// Checks that `scores` and `labels` have the same length, that every score is finite and every
/// label is 0 or 1, and that both classes occur.
fn check(scores: &[f64], labels: &[u8]) -> Result<(usize, usize), InputError> {
    if scores.len() != labels.len() {
        return Err(InputError::LengthMismatch {
            rows: scores.len(),
            labels: labels.len(),
        });
    }
    if let Some(i) = scores.iter().position(|s| !s.is_finite()) {
        return Err(InputError::NonFiniteScore { index: i });
    }
    if let Some(i) = labels.iter().position(|&l| l > 1) {
        return Err(InputError::BadLabel {
            index: i,
            value: f64::from(labels[i]),
        });
    }
    let pos = labels.iter().filter(|&&l| l == 1).count();
    let neg = labels.len() - pos;
    if pos == 0 || neg == 0 {
        return Err(InputError::OneClass);
    }
    Ok((pos, neg))
}

/// Indices of `scores` sorted by decreasing score.
fn descending(scores: &[f64]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..scores.len()).collect();
    order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]));
    order
}

/// Area under the ROC curve of `scores` (higher = more anomalous) for `labels` (1 = anomaly):
/// the probability that a random anomaly outscores a random normal, ties counting ½ (equal to
/// the trapezoidal area under the exact ROC curve, as `sklearn.metrics.roc_auc_score`).
///
/// Complexity: O(n log n).
///
/// # Errors
/// [`InputError`] when lengths differ, a score is not finite, a label is not 0/1 or one class
/// is absent.
pub fn auc_roc(scores: &[f64], labels: &[u8]) -> Result<f64, InputError> {
    let (pos, neg) = check(scores, labels)?;
    let order = descending(scores);
    // Walk groups of tied scores from the top: each normal in the group is beaten by every
    // anomaly above the group and ties with half of the group's anomalies.
    let (mut pos_above, mut wins) = (0.0f64, 0.0f64);
    let mut i = 0;
    while i < order.len() {
        let mut j = i;
        let (mut gp, mut gn) = (0.0, 0.0);
        while j < order.len() && scores[order[j]] == scores[order[i]] {
            if labels[order[j]] == 1 {
                gp += 1.0;
            } else {
                gn += 1.0;
            }
            j += 1;
        }
        wins += gn * (pos_above + 0.5 * gp);
        pos_above += gp;
        i = j;
    }
    Ok(wins / (pos as f64 * neg as f64))
}

/// Average precision `Σₖ (Rₖ − Rₖ₋₁) Pₖ` over the distinct score thresholds in decreasing
/// order (tied scores form one threshold), as `sklearn.metrics.average_precision_score`.
///
/// # Errors
/// As [`auc_roc`].
pub fn average_precision(scores: &[f64], labels: &[u8]) -> Result<f64, InputError> {
    let (pos, _) = check(scores, labels)?;
    let order = descending(scores);
    let (mut tp, mut seen, mut ap) = (0usize, 0usize, 0.0f64);
    let mut i = 0;
    while i < order.len() {
        let mut j = i;
        let mut gp = 0;
        while j < order.len() && scores[order[j]] == scores[order[i]] {
            gp += usize::from(labels[order[j]] == 1);
            j += 1;
        }
        tp += gp;
        seen += j - i;
        ap += (gp as f64 / pos as f64) * (tp as f64 / seen as f64);
        i = j;
    }
    Ok(ap)
}
