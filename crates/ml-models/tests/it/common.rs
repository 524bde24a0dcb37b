//! Shared test helpers.

use std::path::PathBuf;

use candle_core::Tensor;

/// A real data file: `$PARDIS_DATA`, then `<workspace>/datasets/cache/`, then
/// `<workspace>/../shared/datasets/` (the workspace's `pardis-datasets` roots); `None` (with a
/// printed reason) when absent.
pub(crate) fn data_file(rel: &str) -> Option<PathBuf> {
    let found = pardis_datasets::DataRoots::from_env().locate_path(rel);
    if found.is_none() {
        println!("skipping: data file {rel} not found");
    }
    found.map(|l| l.path)
}

/// Largest |a - b| / max(1, |b|) over all elements.
pub(crate) fn max_rel_diff(a: &Tensor, b: &Tensor) -> f32 {
    let a = a.flatten_all().unwrap().to_vec1::<f32>().unwrap();
    let b = b.flatten_all().unwrap().to_vec1::<f32>().unwrap();
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(&b)
        .map(|(x, y)| (x - y).abs() / y.abs().max(1.0))
        .fold(0.0, f32::max)
}

/// Largest |x| over all elements.
pub(crate) fn max_abs(t: &Tensor) -> f32 {
    t.abs()
        .unwrap()
        .max_all()
        .unwrap()
        .to_scalar::<f32>()
        .unwrap()
}

/// A scratch directory unique to this test process.
pub(crate) fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("ml-models-it-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}
