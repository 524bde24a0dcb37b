//! Labelled image / feature data for class-incremental learning: validated rows in `[0, 1]`,
//! integer class labels, the IDX (Fashion-MNIST) and CSV (UCI digits) readers, and a seeded
//! stratified train/test split.

use std::path::Path;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::data::{read_csv, read_idx, IdxData};
use crate::{MlError, Result};

/// A labelled classification data set: `len()` rows of `dim` features (scaled to `[0, 1]`),
/// one class label per row.
#[derive(Debug, Clone, PartialEq)]
pub struct ClassData {
    /// Features, row-major, `len() × dim`.
    pub x: Vec<f32>,
    /// Class label of each row (original labels, `0..classes`).
    pub y: Vec<u32>,
    /// Features per row.
    pub dim: usize,
    /// `(height, width)` when the rows are single-channel images (`height · width == dim`).
    pub image: Option<(usize, usize)>,
    /// Number of classes (largest label + 1).
    pub classes: usize,
}

impl ClassData {
    /// Validates and wraps rows and labels.
    ///
    /// # Errors
    /// [`MlError::InvalidInput`] when `x` does not hold `y.len() × dim` values, a value is not
    /// finite, there are no rows, or `image` does not match `dim`.
    pub fn new(
        x: Vec<f32>,
        y: Vec<u32>,
        dim: usize,
        image: Option<(usize, usize)>,
    ) -> Result<Self> {
        let bad = |m: String| MlError::InvalidInput(m);
        if dim == 0 || y.is_empty() {
            return Err(bad(
                "class data needs at least one row and one feature".into()
            ));
        }
        if x.len() != y.len() * dim {
            return Err(bad(format!(
                "{} values cannot form {} rows of {dim} features",
                x.len(),
                y.len()
            )));
        }
        if let Some(i) = x.iter().position(|v| !v.is_finite()) {
            return Err(bad(format!(
                "feature {} of row {} is not finite",
                i % dim,
                i / dim
            )));
        }
        if let Some((h, w)) = image {
            if h * w != dim {
                return Err(bad(format!("a {h}×{w} image does not have {dim} pixels")));
            }
        }
        let classes = y.iter().max().map_or(0, |&m| m as usize + 1);
        Ok(Self {
            x,
            y,
            dim,
            image,
            classes,
        })
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.y.len()
    }

    /// Whether there are no rows (never true for a validated set).
    pub fn is_empty(&self) -> bool {
        self.y.is_empty()
    }

    /// Row `i`.
    pub fn row(&self, i: usize) -> &[f32] {
        &self.x[i * self.dim..(i + 1) * self.dim]
    }

    /// The rows `idx`, in that order (the class count is kept).
    pub fn select(&self, idx: &[usize]) -> Self {
        let mut x = Vec::with_capacity(idx.len() * self.dim);
        for &i in idx {
            x.extend_from_slice(self.row(i));
        }
        Self {
            x,
            y: idx.iter().map(|&i| self.y[i]).collect(),
            dim: self.dim,
            image: self.image,
            classes: self.classes,
        }
    }

    /// Images and labels from a pair of IDX files (plain or gzip): unsigned-byte images of shape
    /// `[n, h, w]` (scaled by 1/255) and unsigned-byte labels of shape `[n]`.
    ///
    /// # Errors
    /// [`MlError::Format`] for a corrupt file (bad magic, truncated body, wrong element type or
    /// shape, image and label counts that differ); [`MlError::Io`] when a file cannot be read.
    pub fn from_idx(images: &Path, labels: &Path) -> Result<Self> {
        let im = read_idx(images)?;
        let lb = read_idx(labels)?;
        let (IdxData::U8(px), [n, h, w]) = (&im.data, im.shape.as_slice()) else {
            return Err(MlError::format(
                "idx",
                images,
                format!(
                    "expected unsigned-byte images [n, h, w], found shape {:?}",
                    im.shape
                ),
            ));
        };
        let (IdxData::U8(ls), [m]) = (&lb.data, lb.shape.as_slice()) else {
            return Err(MlError::format(
                "idx",
                labels,
                format!(
                    "expected unsigned-byte labels [n], found shape {:?}",
                    lb.shape
                ),
            ));
        };
        if n != m || *n == 0 {
            return Err(MlError::format(
                "idx",
                labels,
                format!("{m} labels for {n} images"),
            ));
        }
        let x = px.iter().map(|&p| f32::from(p) / 255.0).collect();
        Self::new(
            x,
            ls.iter().map(|&l| u32::from(l)).collect(),
            h * w,
            Some((*h, *w)),
        )
    }

    /// A numeric CSV whose last column is an integer class label and whose other columns are
    /// features (the UCI digits file: 64 pixels in 0..=16, then the digit). Features are divided
    /// by the table's largest feature value so that they lie in `[0, 1]`; `image` gives the
    /// image shape when the features are pixels.
    ///
    /// # Errors
    /// [`MlError::Format`] for a malformed file or a label that is not a non-negative integer;
    /// [`MlError::InvalidInput`] for a negative feature or an `image` that does not fit.
    pub fn from_csv_label_last(path: &Path, image: Option<(usize, usize)>) -> Result<Self> {
        let t = read_csv(path)?;
        if t.cols < 2 || t.rows == 0 {
            return Err(MlError::format(
                "csv",
                path,
                "need features and a label column",
            ));
        }
        let dim = t.cols - 1;
        let mut y = Vec::with_capacity(t.rows);
        for (i, &l) in t.column(dim).iter().enumerate() {
            if !(l >= 0.0 && l.fract() == 0.0 && l <= f64::from(u16::MAX)) {
                return Err(MlError::format(
                    "csv",
                    path,
                    format!("row {}: label {l} is not a class index", i + 1),
                ));
            }
            y.push(l as u32);
        }
        let mut x = Vec::with_capacity(t.rows * dim);
        for r in t.data.chunks_exact(t.cols) {
            x.extend(r[..dim].iter().map(|&v| v as f32));
        }
        if x.iter().any(|&v| v < 0.0) {
            return Err(MlError::InvalidInput(format!(
                "{}: negative feature values (expected pixel intensities)",
                path.display()
            )));
        }
        let max = x.iter().copied().fold(0.0f32, f32::max);
        if max > 0.0 {
            x.iter_mut().for_each(|v| *v /= max);
        }
        Self::new(x, y, dim, image)
    }

    /// A seeded stratified split: in every class, `round(test_fraction · n_c)` rows (at least
    /// one when the class has two or more) go to the test set. Returns `(train, test)`.
    ///
    /// # Errors
    /// [`MlError::InvalidInput`] unless `0 < test_fraction < 1`.
    pub fn stratified_split(&self, test_fraction: f64, seed: u64) -> Result<(Self, Self)> {
        if !(test_fraction > 0.0 && test_fraction < 1.0) {
            return Err(MlError::InvalidInput(format!(
                "test fraction {test_fraction} is not in (0, 1)"
            )));
        }
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let classes = (0..self.classes as u32).map(|c| {
            let rows: Vec<usize> = (0..self.len()).filter(|&i| self.y[i] == c).collect();
            (rows, true)
        });
        let (train, test) = crate::data::stratified_rows(classes, test_fraction, &mut rng);
        Ok((self.select(&train), self.select(&test)))
    }
}

/// The four Fashion-MNIST IDX files (`train-images-idx3-ubyte.gz`, …) in `dir`, as
/// `(train, test)`: 60 000 and 10 000 28×28 images of 10 classes.
///
/// # Errors
/// As [`ClassData::from_idx`].
pub fn load_fashion_mnist(dir: &Path) -> Result<(ClassData, ClassData)> {
    let f = |s: &str| dir.join(s);
    Ok((
        ClassData::from_idx(
            &f("train-images-idx3-ubyte.gz"),
            &f("train-labels-idx1-ubyte.gz"),
        )?,
        ClassData::from_idx(
            &f("t10k-images-idx3-ubyte.gz"),
            &f("t10k-labels-idx1-ubyte.gz"),
        )?,
    ))
}
