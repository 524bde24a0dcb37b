//! Touches one real item through each umbrella path, so a broken re-export fails to compile and a
//! wrong one fails the test.
#![allow(missing_docs)]

#[test]
#[cfg(feature = "memory")]
fn memory() {
    let model = pardis::memory::ModelConfig::preset("llama2-7b").unwrap();
    assert_eq!(model.num_parameters(), 6_738_415_616);
}

#[test]
#[cfg(feature = "plan")]
fn plan() {
    let mesh = pardis::plan::mesh::DeviceMesh::preset("dgx-a100-80g", 2).unwrap();
    assert_eq!(mesh.num_devices(), 16);
}

#[test]
#[cfg(feature = "mesh")]
fn mesh() {
    use pardis::plan::unstructured::{Backend, Context, DistConfig};
    let sizes = pardis::collectives::run_local(2, |comm| {
        let mut ctx = Context::new(Backend::distributed(comm, DistConfig::default()));
        let s = ctx.decl_set("s", 5).unwrap();
        let d = ctx.decl_dat("d", s, 1, vec![1i64; 5]).unwrap();
        ctx.par_loop("double", s, &[d.rw()], |_, w| w[0][0] *= 2)
            .unwrap();
        ctx.dat_values(d).unwrap()
    })
    .unwrap();
    assert!(sizes.iter().all(|v| v == &vec![2i64; 5]));
}

#[test]
#[cfg(feature = "sparse")]
fn sparse() {
    let err = pardis::sparse::CsrMatrix::<f64, u32>::try_new(2, 2, vec![0, 1], vec![0], vec![1.0]);
    assert!(err.is_err(), "offsets of the wrong length are rejected");
}

#[test]
#[cfg(feature = "graph")]
fn graph() {
    let g = pardis::graph::generate::grid_2d(3, 4);
    let bfs = pardis::graph::bfs::bfs_serial(&g, 0);
    assert_eq!(
        bfs.depth[11], 5,
        "opposite corner of a 3x4 grid is 5 hops away"
    );
}

#[test]
#[cfg(any(feature = "sparse", feature = "graph"))]
fn formats() {
    let text = "%%MatrixMarket matrix coordinate pattern general\n2 2 1\n2 1\n";
    let mut mm = pardis::formats::matrix_market::MatrixMarketReader::new(text.as_bytes()).unwrap();
    let entry = mm.next_entry().unwrap().unwrap();
    assert_eq!((entry.row, entry.col), (1, 0));
    assert_eq!(pardis::formats::rmat::GRAPH500_EDGE_FACTOR, 16);
}

#[test]
#[cfg(feature = "collectives")]
fn collectives() {
    let sums = pardis::collectives::run_local(3, |comm| {
        comm.all_reduce(
            vec![comm.rank() as i64 + 1],
            pardis::collectives::ReduceOp::Sum,
        )
        .unwrap()
    })
    .unwrap();
    assert!(sums.iter().all(|s| s == &[6]));
}

#[test]
#[cfg(feature = "ml")]
fn ml() {
    let code = pardis::ml::qlora::nf4::NF4_CODE;
    assert_eq!(code.len(), 16);
    assert!(code.contains(&0.0), "NF4 has an exact zero");
}
