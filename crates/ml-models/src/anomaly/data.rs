//! Tabular anomaly-detection data: a validated feature matrix with 0/1 labels, loaders for the
//! ADBench `.npz` files and the PCL-AD CSVs, the PCL-AD paper's split, and min-max scaling.

use std::path::Path;

use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::InputError;
use crate::data::{read_csv, read_npz};
use crate::{MlError, Result};

/// A dense feature matrix, `rows × cols`, row-major.
#[derive(Debug, Clone, PartialEq)]
pub struct Features {
    /// Number of samples.
    pub rows: usize,
    /// Number of features.
    pub cols: usize,
    /// Values, row-major.
    pub data: Vec<f64>,
}

impl Features {
    /// A matrix from row-major `data`, rejecting shape mismatches and NaN/±∞ values.
    ///
    /// # Errors
    /// [`InputError::Shape`], [`InputError::NonFinite`] or [`InputError::Empty`].
    pub fn new(rows: usize, cols: usize, data: Vec<f64>) -> Result<Self, InputError> {
        if data.len() != rows * cols {
            return Err(InputError::Shape {
                rows,
                cols,
                len: data.len(),
            });
        }
        if rows == 0 || cols == 0 {
            return Err(InputError::Empty);
        }
        if let Some(k) = data.iter().position(|v| !v.is_finite()) {
            return Err(InputError::NonFinite {
                row: k / cols,
                col: k % cols,
            });
        }
        Ok(Self { rows, cols, data })
    }

    /// Row `i`.
    pub fn row(&self, i: usize) -> &[f64] {
        &self.data[i * self.cols..(i + 1) * self.cols]
    }

    /// The rows at `idx`, in that order.
    pub fn select(&self, idx: &[usize]) -> Self {
        let mut data = Vec::with_capacity(idx.len() * self.cols);
        for &i in idx {
            data.extend_from_slice(self.row(i));
        }
        Self {
            rows: idx.len(),
            cols: self.cols,
            data,
        }
    }

    /// The values as `f32`, row-major (for candle tensors).
    pub fn to_f32(&self) -> Vec<f32> {
        self.data.iter().map(|&v| v as f32).collect()
    }
}

/// A labelled data set: features and `labels[i] ∈ {0 normal, 1 anomaly}`.
#[derive(Debug, Clone, PartialEq)]
pub struct Labelled {
    /// The samples.
    pub x: Features,
    /// 0 = normal, 1 = anomaly.
    pub labels: Vec<u8>,
}

impl Labelled {
    /// Validates `y` (same length as `x`, every value exactly 0 or 1) and pairs it with `x`.
    ///
    /// # Errors
    /// [`InputError::LengthMismatch`] or [`InputError::BadLabel`].
    pub fn new(x: Features, y: &[f64]) -> Result<Self, InputError> {
        if y.len() != x.rows {
            return Err(InputError::LengthMismatch {
                rows: x.rows,
                labels: y.len(),
            });
        }
        let mut labels = Vec::with_capacity(y.len());
        for (index, &value) in y.iter().enumerate() {
            if value == 0.0 {
                labels.push(0);
            } else if value == 1.0 {
                labels.push(1);
            } else {
                return Err(InputError::BadLabel { index, value });
            }
        }
        Ok(Self { x, labels })
    }

    /// Number of anomalies.
    pub fn anomalies(&self) -> usize {
        self.labels.iter().filter(|&&l| l == 1).count()
    }
}

/// Reads an ADBench `.npz` (arrays `X` n×d and `y` n; any numeric dtype, C or Fortran order).
///
/// # Errors
/// I/O or format errors, a missing array, or invalid values ([`InputError`]).
pub fn read_adbench_npz(path: &Path) -> Result<Labelled> {
    let mut arrays = read_npz(path)?;
    let missing = |name: &str| MlError::format("npz", path, format!("no array `{name}`"));
    let x = arrays.remove("X").ok_or_else(|| missing("X"))?;
    let y = arrays.remove("y").ok_or_else(|| missing("y"))?;
    let (rows, cols) = match x.shape.as_slice() {
        [r, c] => (*r, *c),
        [r] => (*r, 1),
        s => return Err(MlError::format("npz", path, format!("`X` has shape {s:?}"))),
    };
    Ok(Labelled::new(Features::new(rows, cols, x.data)?, &y.data)?)
}

/// Reads a numeric CSV whose last column is the 0/1 label (the PCL-AD repository's format).
///
/// # Errors
/// I/O or format errors, fewer than two columns, or invalid values ([`InputError`]).
pub fn read_labelled_csv(path: &Path) -> Result<Labelled> {
    let t = read_csv(path)?;
    if t.cols < 2 {
        return Err(MlError::format(
            "csv",
            path,
            "need features and a label column",
        ));
    }
    let d = t.cols - 1;
    let mut data = Vec::with_capacity(t.rows * d);
    let mut y = Vec::with_capacity(t.rows);
    for r in t.data.chunks_exact(t.cols) {
        data.extend_from_slice(&r[..d]);
        y.push(r[d]);
    }
    Ok(Labelled::new(Features::new(t.rows, d, data)?, &y)?)
}

/// Reads `.npz` (ADBench) or `.csv` (label last) by extension.
///
/// # Errors
/// As the two readers; an unknown extension is [`MlError::InvalidInput`].
pub fn read_labelled(path: &Path) -> Result<Labelled> {
    match path.extension().and_then(|e| e.to_str()) {
        Some("npz") => read_adbench_npz(path),
        Some("csv") => read_labelled_csv(path),
        _ => Err(MlError::InvalidInput(format!(
            "{}: expected a .npz or .csv file",
            path.display()
        ))),
    }
}

/// One seed's split ([`Protocol`]), min-max scaled on the training part.
#[derive(Debug, Clone, PartialEq)]
pub struct Split {
    /// The rows to fit on, labels not given to detectors (PCL-AD protocol: half of the normal
    /// samples; ADBench: 70 % of each class).
    pub train: Features,
    /// The rows to score (PCL-AD protocol: the other normals and every anomaly; ADBench: 30 %
    /// of each class).
    pub test: Features,
    /// Labels of `test`.
    pub test_labels: Vec<u8>,
    /// Row indices of `train` in the original data (lets peers reproduce the split).
    pub train_rows: Vec<usize>,
    /// Row indices of `test` in the original data.
    pub test_rows: Vec<usize>,
}

/// Shuffles with `seed`, trains on ⌊n_normal/2⌋ normals, tests on the remaining normals plus all
/// anomalies, and min-max scales both parts with the training split's per-feature range
/// ([`MinMaxScaler`]). The whole data set, as the protocol says; see
/// [`protocol_split_capped`] for ADBench's cap on large sets.
///
/// # Errors
/// [`InputError::OneClass`] without anomalies or with fewer than 2 normals.
pub fn protocol_split(data: &Labelled, seed: u64) -> Result<Split, InputError> {
    protocol_split_capped(data, seed, None)
}

/// ADBench's own cap on large data sets (`DataGenerator.generator` subsamples every set of more
/// than 10 000 samples to 10 000 before splitting, "considering the computational cost").
pub const ADBENCH_MAX_ROWS: usize = 10_000;

/// [`protocol_split`] after a seeded subsample of at most `max_rows` rows when the data set is
/// larger (`None`: no cap). Unlike ADBench's plain uniform draw, the subsample is stratified:
/// it keeps `round(max_rows · anomalies / rows)` anomalies (at least 1) and fills the rest with
/// normals, so a seed never loses every anomaly of a set like `smtp` (30 in 95 156). The
/// split's row indices refer to the full data set. Without a cap, or with one at or above the
/// row count, the split is exactly [`protocol_split`]'s.
///
/// # Errors
/// [`InputError::OneClass`] as [`protocol_split`]; [`InputError::Unsupported`] for a cap below
/// 3 rows.
pub fn protocol_split_capped(
    data: &Labelled,
    seed: u64,
    max_rows: Option<usize>,
) -> Result<Split, InputError> {
    let (mut normals, anomalies) = capped_rows(data, seed, max_rows)?;
    normals.shuffle(&mut ChaCha8Rng::seed_from_u64(seed));
    let n_train = normals.len() / 2;
    let train_rows = normals[..n_train].to_vec();
    let mut test_rows = normals[n_train..].to_vec();
    test_rows.extend_from_slice(&anomalies);
    Ok(scaled_split(data, train_rows, test_rows))
}

/// The rows of `data` that a split of `seed` draws from: `(normals, anomalies)` in row order,
/// after the stratified cap of [`protocol_split_capped`].
fn capped_rows(
    data: &Labelled,
    seed: u64,
    max_rows: Option<usize>,
) -> Result<(Vec<usize>, Vec<usize>), InputError> {
    let mut normals: Vec<usize> = (0..data.x.rows).filter(|&i| data.labels[i] == 0).collect();
    let mut anomalies: Vec<usize> = (0..data.x.rows).filter(|&i| data.labels[i] == 1).collect();
    if anomalies.is_empty() || normals.len() < 2 {
        return Err(InputError::OneClass);
    }
    if let Some(cap) = max_rows.filter(|&c| c < data.x.rows) {
        if cap < 3 {
            return Err(InputError::Unsupported(format!(
                "a row cap of {cap} leaves no room for 2 normals and an anomaly"
            )));
        }
        let share = cap as f64 * anomalies.len() as f64 / data.x.rows as f64;
        let keep_a = (share.round() as usize)
            .clamp(1, cap - 2)
            .min(anomalies.len());
        let keep_n = (cap - keep_a).min(normals.len());
        // A stream of its own, so that the split's shuffle below draws as without a cap.
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        rng.set_stream(1);
        for (v, keep) in [(&mut anomalies, keep_a), (&mut normals, keep_n)] {
            v.shuffle(&mut rng);
            v.truncate(keep);
            v.sort_unstable();
        }
    }
    Ok((normals, anomalies))
}

/// The split of `data` into `train_rows` and `test_rows`, min-max scaled on the training part.
fn scaled_split(data: &Labelled, train_rows: Vec<usize>, test_rows: Vec<usize>) -> Split {
    let train = data.x.select(&train_rows);
    let test = data.x.select(&test_rows);
    let test_labels = test_rows.iter().map(|&i| data.labels[i]).collect();
    let scaler = MinMaxScaler::fit(&train);
    Split {
        train: scaler.transform(&train),
        test: scaler.transform(&test),
        test_labels,
        train_rows,
        test_rows,
    }
}

/// The share of each class that ADBench's split puts in the test part (`test_size = 0.3`).
pub const ADBENCH_TEST_SHARE: f64 = 0.3;

/// ADBench's unsupervised setting (Han et al., NeurIPS 2022, `DataGenerator.generator`:
/// `train_test_split(X, y, test_size=0.3, stratify=y)`, then min-max scaling fitted on the
/// training part): a stratified 70/30 split of all rows — each class is shuffled with `seed`
/// and `round(0.3 · n)` of its rows (at least one, and for the normals at most all but one) go
/// to the test part. The detector is fitted on the training rows with labels unused, the
/// anomalies among them included (unlike [`protocol_split`], whose training part is normals
/// only), and scores the test rows. `max_rows` caps the set first as in
/// [`protocol_split_capped`]. Row indices refer to the full data set, in ascending order within
/// each part.
///
/// # Errors
/// As [`protocol_split_capped`].
pub fn adbench_split(
    data: &Labelled,
    seed: u64,
    max_rows: Option<usize>,
) -> Result<Split, InputError> {
    let (normals, anomalies) = capped_rows(data, seed, max_rows)?;
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    // At least one normal row to fit on; every anomaly may be tested.
    let (train_rows, test_rows) = crate::data::stratified_rows(
        [(normals, true), (anomalies, false)],
        ADBENCH_TEST_SHARE,
        &mut rng,
    );
    Ok(scaled_split(data, train_rows, test_rows))
}

/// Which split a detector is evaluated on ([`crate::anomaly::eval`], `pardis ml anomaly
/// --protocol`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    /// The PCL-AD paper's ([`protocol_split_capped`]): fit on half of the normals, test on the
    /// other half plus every anomaly.
    #[default]
    Pclad,
    /// ADBench's unsupervised setting ([`adbench_split`]): fit on a stratified 70 % of all rows
    /// (anomalies included, labels unused), test on the other 30 %.
    Adbench,
}

impl Protocol {
    /// `pclad` or `adbench`.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Pclad => "pclad",
            Protocol::Adbench => "adbench",
        }
    }

    /// The protocol called `name` (`pclad`, `adbench`).
    ///
    /// # Errors
    /// [`MlError::InvalidInput`] for another name.
    pub fn from_name(name: &str) -> Result<Self> {
        match name {
            "pclad" => Ok(Protocol::Pclad),
            "adbench" => Ok(Protocol::Adbench),
            other => Err(MlError::InvalidInput(format!(
                "unknown protocol `{other}` (expected pclad or adbench)"
            ))),
        }
    }

    /// This protocol's split of `data` for `seed`, capped at `max_rows` rows.
    ///
    /// # Errors
    /// As [`protocol_split_capped`].
    pub fn split(
        self,
        data: &Labelled,
        seed: u64,
        max_rows: Option<usize>,
    ) -> Result<Split, InputError> {
        match self {
            Protocol::Pclad => protocol_split_capped(data, seed, max_rows),
            Protocol::Adbench => adbench_split(data, seed, max_rows),
        }
    }
}

/// Per-feature `(x − min) / (max − min)` with the range of the data it was fitted on; a constant
/// feature (range 0) is divided by 1 instead, as scikit-learn's `MinMaxScaler` does, so it maps
/// to 0 on the training data and stays finite elsewhere. Test values may fall outside [0, 1].
#[derive(Debug, Clone, PartialEq)]
pub struct MinMaxScaler {
    min: Vec<f64>,
    scale: Vec<f64>,
}

impl MinMaxScaler {
    /// Fits the per-feature minimum and range of `x`.
    pub fn fit(x: &Features) -> Self {
        let mut min = vec![f64::INFINITY; x.cols];
        let mut max = vec![f64::NEG_INFINITY; x.cols];
        for r in x.data.chunks_exact(x.cols) {
            for (j, &v) in r.iter().enumerate() {
                min[j] = min[j].min(v);
                max[j] = max[j].max(v);
            }
        }
        let scale = min
            .iter()
            .zip(&max)
            .map(|(lo, hi)| if hi > lo { 1.0 / (hi - lo) } else { 1.0 })
            .collect();
        Self { min, scale }
    }

    /// Scales `x` (same number of columns as the fitted data).
    pub fn transform(&self, x: &Features) -> Features {
        let mut data = x.data.clone();
        for r in data.chunks_exact_mut(x.cols) {
            for (j, v) in r.iter_mut().enumerate() {
                *v = (*v - self.min[j]) * self.scale[j];
            }
        }
        Features {
            rows: x.rows,
            cols: x.cols,
            data,
        }
    }
}
