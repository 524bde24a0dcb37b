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

/// A `.npy` file: dtype `descr`, `fortran` order or not, the Python tuple `shape`, then `body`
/// as given (it may disagree with the header). Format version 1, or 2 where the header is too
/// long for version 1's 16-bit length.
pub(crate) fn npy_bytes(descr: &str, fortran: bool, shape: &str, body: &[u8]) -> Vec<u8> {
    let mut h = format!(
        "{{'descr': '{descr}', 'fortran_order': {}, 'shape': {shape}, }}",
        if fortran { "True" } else { "False" }
    );
    let (version, prefix) = if h.len() < 0xff00 { (1, 10) } else { (2, 12) };
    while (prefix + h.len() + 1) % 64 != 0 {
        h.push(' ');
    }
    h.push('\n');
    let mut b = vec![0x93, b'N', b'U', b'M', b'P', b'Y', version, 0];
    if version == 1 {
        b.extend((h.len() as u16).to_le_bytes());
    } else {
        b.extend((h.len() as u32).to_le_bytes());
    }
    b.extend(h.as_bytes());
    b.extend(body);
    b
}
