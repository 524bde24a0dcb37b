//! Touches one item through each umbrella path, so a broken re-export fails to compile.
#![allow(missing_docs)]

#[test]
#[cfg(feature = "memory")]
fn memory() {
    let e = pardis::memory::MemoryError::InvalidInput("x".into());
    assert!(e.to_string().contains('x'));
}

#[test]
#[cfg(feature = "plan")]
fn plan() {
    let e = pardis::plan::PlanError::InvalidInput("x".into());
    assert!(e.to_string().contains('x'));
}

#[test]
#[cfg(feature = "sparse")]
fn sparse() {
    let e = pardis::sparse::SparseError::InvalidInput("x".into());
    assert!(e.to_string().contains('x'));
}

#[test]
#[cfg(feature = "graph")]
fn graph() {
    let e = pardis::graph::GraphError::InvalidInput("x".into());
    assert!(e.to_string().contains('x'));
}

#[test]
#[cfg(feature = "collectives")]
fn collectives() {
    let e = pardis::collectives::CollectiveError::InvalidInput("x".into());
    assert!(e.to_string().contains('x'));
}

#[test]
#[cfg(feature = "ml")]
fn ml() {
    let e = pardis::ml::MlError::InvalidInput("x".into());
    assert!(e.to_string().contains('x'));
}
