//! Seeded stratified splits: the one per-class shuffle-and-cut that the class-incremental data
//! sets (`incremental::ClassData::stratified_split`) and the anomaly-detection protocols
//! (`anomaly::adbench_split`) share.

use rand::seq::SliceRandom;
use rand::Rng;

/// Splits row indices class by class into `(train, test)`, both sorted ascending. Each class's
/// rows are shuffled with `rng` in the order given, and the first `round(test_fraction · n)` go
/// to the test part, clamped so that the test part gets at least one row of a non-empty class
/// and, where the class's flag `keep_one_for_training` is set, the training part keeps at least
/// one (a class of one row then stays in training).
pub(crate) fn stratified_rows<R: Rng>(
    classes: impl IntoIterator<Item = (Vec<usize>, bool)>,
    test_fraction: f64,
    rng: &mut R,
) -> (Vec<usize>, Vec<usize>) {
    let (mut train, mut test) = (Vec::new(), Vec::new());
    for (mut rows, keep_one_for_training) in classes {
        rows.shuffle(rng);
        let n = rows.len();
        let k = (test_fraction * n as f64).round() as usize;
        let k = match (keep_one_for_training, n) {
            (true, 0 | 1) | (false, 0) => 0,
            (true, _) => k.clamp(1, n - 1),
            (false, _) => k.clamp(1, n),
        };
        test.extend_from_slice(&rows[..k]);
        train.extend_from_slice(&rows[k..]);
    }
    train.sort_unstable();
    test.sort_unstable();
    (train, test)
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    use super::stratified_rows;

    #[test]
    fn classes_are_cut_by_their_share_with_the_documented_bounds() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let classes = vec![
            ((0..10).collect(), true),   // 3 to test
            (vec![10], true),            // stays in training
            ((11..13).collect(), true),  // round(0.6) = 1
            ((13..14).collect(), false), // the one row goes to test
            ((14..54).collect(), false), // 12 to test
        ];
        let (train, test) = stratified_rows(classes, 0.3, &mut rng);
        let count = |part: &[usize], r: std::ops::Range<usize>| {
            part.iter().filter(|i| r.contains(i)).count()
        };
        assert_eq!(count(&test, 0..10), 3);
        assert_eq!(count(&test, 10..11), 0);
        assert_eq!(count(&test, 11..13), 1);
        assert_eq!(count(&test, 13..14), 1);
        assert_eq!(count(&test, 14..54), 12);
        let mut all: Vec<usize> = train.iter().chain(&test).copied().collect();
        all.sort_unstable();
        assert_eq!(all, (0..54).collect::<Vec<_>>());
        assert!(train.windows(2).all(|w| w[0] < w[1]));
        assert!(test.windows(2).all(|w| w[0] < w[1]));
    }
}
