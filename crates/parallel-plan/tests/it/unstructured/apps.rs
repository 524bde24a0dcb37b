use parallel_plan::unstructured::apps::{airfoil, jacobi, AirfoilConfig, JacobiConfig};
use parallel_plan::unstructured::{Backend, Context, Grid};

use super::rel_diff;

#[test]
fn airfoil_preserves_the_free_stream_without_walls() {
    let mut g = Grid::generate(300, 1).unwrap();
    g.bound.iter_mut().for_each(|b| *b = 0);
    let out = airfoil(
        &mut Context::new(Backend::Sequential),
        &g,
        &AirfoilConfig {
            iterations: 3,
            report_every: 1,
        },
    )
    .unwrap();
    let qinf = parallel_plan::unstructured::apps::qinf();
    for q in out.q.chunks(4) {
        assert!(rel_diff(q, &qinf) < 1e-12, "{q:?}");
    }
    assert!(out.rms.iter().all(|&(_, r)| r < 1e-12), "{:?}", out.rms);
}

#[test]
fn airfoil_converges_and_threads_match_sequential() {
    let g = Grid::generate(800, 5).unwrap();
    let cfg = AirfoilConfig {
        iterations: 200,
        report_every: 50,
    };
    let seq = airfoil(&mut Context::new(Backend::Sequential), &g, &cfg).unwrap();
    assert_eq!(seq.rms.len(), 4);
    assert!(
        seq.rms.iter().all(|&(_, r)| r.is_finite() && r > 0.0),
        "{:?}",
        seq.rms
    );
    assert!(
        seq.rms[3].1 < seq.rms[0].1,
        "residual did not fall: {:?}",
        seq.rms
    );
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .unwrap();
    let thr = pool
        .install(|| airfoil(&mut Context::new(Backend::Threads), &g, &cfg))
        .unwrap();
    assert!(
        rel_diff(&thr.q, &seq.q) <= 1e-12,
        "{}",
        rel_diff(&thr.q, &seq.q)
    );
    let (a, b): (Vec<f64>, Vec<f64>) = thr
        .rms
        .iter()
        .zip(&seq.rms)
        .map(|(x, y)| (x.1, y.1))
        .unzip();
    assert!(rel_diff(&a, &b) <= 1e-12);
}

#[test]
fn jacobi_converges_between_its_boundary_values() {
    let g = Grid::generate(400, 2).unwrap();
    let cfg = JacobiConfig {
        iterations: 300,
        report_every: 100,
    };
    let seq = jacobi(&mut Context::new(Backend::Sequential), &g, &cfg).unwrap();
    assert!(seq.u.iter().all(|&u| (0.0..=1.0).contains(&u)));
    assert!(seq.history[2].2 < seq.history[0].2, "{:?}", seq.history);
    let thr = jacobi(&mut Context::new(Backend::Threads), &g, &cfg).unwrap();
    assert!(rel_diff(&thr.u, &seq.u) <= 1e-12);
}

#[test]
fn threads_match_sequential_over_many_coloured_blocks() {
    // 6000 cells: a dozen blocks of cells, so res_calc's and bres_calc's blocks take several
    // colours and run concurrently on 2 and 3 threads.
    let g = Grid::generate(6000, 3).unwrap();
    let cfg = AirfoilConfig {
        iterations: 8,
        report_every: 4,
    };
    let seq = airfoil(&mut Context::new(Backend::Sequential), &g, &cfg).unwrap();
    for threads in [2, 3] {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        let thr = pool
            .install(|| airfoil(&mut Context::new(Backend::Threads), &g, &cfg))
            .unwrap();
        assert!(
            rel_diff(&thr.q, &seq.q) <= 1e-12,
            "{}",
            rel_diff(&thr.q, &seq.q)
        );
        let (a, b): (Vec<f64>, Vec<f64>) = thr
            .rms
            .iter()
            .zip(&seq.rms)
            .map(|(x, y)| (x.1, y.1))
            .unzip();
        assert!(rel_diff(&a, &b) <= 1e-12);
    }
}
