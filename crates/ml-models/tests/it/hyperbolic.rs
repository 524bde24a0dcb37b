//! The Lorentz-model geometry against f64 scalar references, metric properties, maps, cones and
//! finite gradients.

use candle_core::{Device, Tensor, Var};
use ml_models::hyperbolic::lorentz::{
    centroid, cone_violation, cosine, distance, expmap0, exterior_angle, half_aperture, inner,
    logmap0, project, time, to_full,
};
use proptest::prelude::*;

const D: usize = 4;

fn t(v: &[f32]) -> Tensor {
    Tensor::new(v, &Device::Cpu).unwrap()
}

fn scalar(x: Tensor) -> f32 {
    x.to_scalar::<f32>().unwrap()
}

fn vec1(x: Tensor) -> Vec<f32> {
    x.to_vec1::<f32>().unwrap()
}

/// f64 reference: time component, Lorentzian inner product, acosh distance.
fn ref_time(x: &[f32], c: f64) -> f64 {
    (1.0 / c + x.iter().map(|&a| (a as f64).powi(2)).sum::<f64>()).sqrt()
}
fn ref_inner(x: &[f32], y: &[f32], c: f64) -> f64 {
    let dot: f64 = x.iter().zip(y).map(|(&a, &b)| a as f64 * b as f64).sum();
    dot - ref_time(x, c) * ref_time(y, c)
}
fn ref_distance(x: &[f32], y: &[f32], c: f64) -> f64 {
    (-c * ref_inner(x, y, c)).max(1.0).acosh() / c.sqrt()
}
fn ref_norm(x: &[f32]) -> f64 {
    x.iter().map(|&a| (a as f64).powi(2)).sum::<f64>().sqrt()
}

fn point() -> impl Strategy<Value = Vec<f32>> {
    prop::collection::vec(-3.0f32..3.0, D)
}

fn curvature() -> impl Strategy<Value = f64> {
    prop::sample::select(vec![0.5f64, 1.0, 2.0])
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn distance_is_a_metric_and_matches_acosh(
        x in point(), y in point(), z in point(), c in curvature()
    ) {
        let (tx, ty, tz) = (t(&x), t(&y), t(&z));
        let dxy = scalar(distance(&tx, &ty, c).unwrap()) as f64;
        let dyx = scalar(distance(&ty, &tx, c).unwrap()) as f64;
        let dxz = scalar(distance(&tx, &tz, c).unwrap()) as f64;
        let dyz = scalar(distance(&ty, &tz, c).unwrap()) as f64;
        let dxx = scalar(distance(&tx, &tx, c).unwrap()) as f64;
        let r = ref_distance(&x, &y, c);
        prop_assert!((dxy - r).abs() <= 1e-4 * r.max(1.0), "{dxy} vs reference {r}");
        prop_assert!(dxy >= 0.0);
        prop_assert!((dxy - dyx).abs() <= 1e-5 * dxy.max(1.0));
        prop_assert!(dxx.abs() < 1e-5, "d(x, x) = {dxx}");
        prop_assert!(dxz <= dxy + dyz + 1e-4 * dxz.max(1.0), "{dxz} > {dxy} + {dyz}");
    }

    #[test]
    fn pairwise_broadcasting_matches_single_pairs(
        a in prop::collection::vec(point(), 3), b in prop::collection::vec(point(), 2),
        c in curvature()
    ) {
        let flat = |v: &[Vec<f32>]| Tensor::new(v.concat(), &Device::Cpu).unwrap()
            .reshape((v.len(), D)).unwrap();
        let (ta, tb) = (flat(&a), flat(&b));
        let table = distance(&ta.unsqueeze(1).unwrap(), &tb.unsqueeze(0).unwrap(), c).unwrap();
        prop_assert_eq!(table.dims(), &[3, 2]);
        let table = table.to_vec2::<f32>().unwrap();
        for (i, x) in a.iter().enumerate() {
            for (j, y) in b.iter().enumerate() {
                let single = scalar(distance(&t(x), &t(y), c).unwrap());
                prop_assert!((table[i][j] - single).abs() < 1e-6);
            }
        }
    }

    #[test]
    fn exp_and_log_at_the_origin_are_inverse(v in point(), c in curvature(), s in 1e-4f32..1.0) {
        let v: Vec<f32> = v.iter().map(|a| a * s).collect();
        let tv = t(&v);
        let x = expmap0(&tv, c).unwrap();
        let back = vec1(logmap0(&x, c).unwrap());
        for (a, b) in back.iter().zip(&v) {
            prop_assert!((a - b).abs() <= 1e-5 * b.abs().max(1.0) + 1e-6, "{a} vs {b}");
        }
        // The distance to the origin is the tangent norm.
        let d0 = scalar(distance(&x, &t(&[0.0; D]), c).unwrap()) as f64;
        prop_assert!((d0 - ref_norm(&v)).abs() < 1e-4 * ref_norm(&v).max(1.0));
        // exp ∘ log on points.
        let p = t(&v);
        let again = vec1(expmap0(&logmap0(&p, c).unwrap(), c).unwrap());
        for (a, b) in again.iter().zip(&v) {
            prop_assert!((a - b).abs() <= 1e-5 * b.abs().max(1.0) + 1e-6);
        }
    }

    #[test]
    fn lorentz_cosine_equals_tangent_cosine(u in point(), v in point(), c in curvature()) {
        prop_assume!(ref_norm(&u) > 1e-2 && ref_norm(&v) > 1e-2);
        let (x, y) = (expmap0(&t(&u), c).unwrap(), expmap0(&t(&v), c).unwrap());
        let cl = scalar(cosine(&x, &y).unwrap()) as f64;
        let dot: f64 = u.iter().zip(&v).map(|(&a, &b)| a as f64 * b as f64).sum();
        let ce = dot / (ref_norm(&u) * ref_norm(&v));
        prop_assert!((cl - ce).abs() < 1e-5, "{cl} vs {ce}");
        prop_assert!((-1.0..=1.0).contains(&cl));
    }

    #[test]
    fn cones_contain_the_ray_beyond_their_apex(
        u in point(), c in curvature(), a in 0.5f32..2.0, b in 1.2f32..3.0
    ) {
        prop_assume!(ref_norm(&u) > 0.2);
        let dir: Vec<f32> = u.iter().map(|x| x / ref_norm(&u) as f32).collect();
        let at = |s: f32| expmap0(&t(&dir.iter().map(|x| x * s).collect::<Vec<_>>()), c).unwrap();
        let apex = at(a);
        let child = at(a * b);
        let parent = at(a / b);
        let inside = scalar(exterior_angle(&apex, &child, c).unwrap());
        prop_assert!(inside < 2e-2, "angle to the ray beyond the apex: {inside}");
        prop_assert_eq!(scalar(cone_violation(&apex, &child, c, 0.2).unwrap()), 0.0);
        let behind = scalar(exterior_angle(&apex, &parent, c).unwrap());
        prop_assert!(behind > std::f32::consts::PI - 2e-2, "angle towards the origin: {behind}");
        prop_assert!(scalar(cone_violation(&apex, &parent, c, 0.2).unwrap()) > 1.0);
        // The aperture shrinks away from the origin and matches asin(C/(√c‖x‖)).
        let ap = scalar(half_aperture(&apex, c, 0.2).unwrap()) as f64;
        let n = ref_norm(&vec1(apex.clone()));
        let want = (0.2 / (c.sqrt() * n)).min(1.0 - 1e-6).asin();
        prop_assert!((ap - want).abs() < 1e-4, "{ap} vs {want}");
        prop_assert!(scalar(half_aperture(&child, c, 0.2).unwrap()) as f64 <= ap + 1e-6);
    }

    #[test]
    fn exterior_angle_matches_the_f64_formula(x in point(), y in point(), c in curvature()) {
        prop_assume!(ref_norm(&x) > 0.1 && ref_distance(&x, &y, c) > 0.1);
        let got = scalar(exterior_angle(&t(&x), &t(&y), c).unwrap()) as f64;
        let cip = c * ref_inner(&x, &y, c);
        let arg = (ref_time(&y, c) + cip * ref_time(&x, c)) / (ref_norm(&x) * (cip * cip - 1.0).sqrt());
        let want = arg.clamp(-1.0, 1.0).acos();
        prop_assert!((got - want).abs() < 2e-3, "{got} vs {want}");
    }

    #[test]
    fn centroid_of_two_points_is_the_geodesic_midpoint(x in point(), y in point(), c in curvature()) {
        let pts = Tensor::new([x.clone(), y.clone()].concat(), &Device::Cpu).unwrap()
            .reshape((2, D)).unwrap();
        let m = centroid(&pts, &t(&[0.5, 0.5]), c).unwrap();
        let dxm = scalar(distance(&t(&x), &m, c).unwrap());
        let dym = scalar(distance(&t(&y), &m, c).unwrap());
        let dxy = scalar(distance(&t(&x), &t(&y), c).unwrap());
        prop_assert!((dxm - dym).abs() < 1e-3 * dxy.max(1.0), "{dxm} vs {dym}");
        prop_assert!((dxm + dym - dxy).abs() < 2e-3 * dxy.max(1.0), "{dxm} + {dym} vs {dxy}");
        // One point (or weight on one point only) is its own centroid.
        let one = vec1(centroid(&pts, &t(&[1.0, 0.0]), c).unwrap());
        for (a, b) in one.iter().zip(&x) {
            prop_assert!((a - b).abs() < 1e-4 * b.abs().max(1.0));
        }
    }
}

#[test]
fn full_coordinates_lie_on_the_hyperboloid_and_project_back() {
    for c in [0.5, 1.0, 2.0] {
        let x = t(&[0.3, -1.2, 2.0, 0.0]);
        let full = vec1(to_full(&x, c).unwrap());
        let l: f64 =
            full[1..].iter().map(|&a| (a as f64).powi(2)).sum::<f64>() - (full[0] as f64).powi(2);
        assert!((l + 1.0 / c).abs() < 1e-5, "⟨x, x⟩_L = {l}");
        assert!((full[0] - scalar(time(&x, c).unwrap())).abs() < 1e-6);
        assert!((scalar(inner(&x, &x, c).unwrap()) as f64 + 1.0 / c).abs() < 1e-5);
        // A perturbed time component is recomputed.
        let off = t(&[7.0, 0.3, -1.2, 2.0, 0.0]);
        let p = vec1(project(&off, c).unwrap());
        assert!(p.iter().zip(&full).all(|(a, b)| (a - b).abs() < 1e-6));
    }
    assert!(project(&t(&[1.0]), 1.0).is_err());
    assert!(distance(&x0(), &x0(), 0.0).is_err());
    assert!(half_aperture(&x0(), 1.0, -0.1).is_err());
}

fn x0() -> Tensor {
    t(&[0.0; D])
}

/// Gradients of every function are finite at the origin, at coincident points, at tiny and
/// large norms.
#[test]
fn gradients_are_finite_everywhere_tested() {
    let cases: [(&[f32], &[f32]); 6] = [
        (&[0.0; D], &[0.0; D]),
        (&[0.5, -0.2, 0.1, 0.0], &[0.5, -0.2, 0.1, 0.0]),
        (&[1e-7, 0.0, 0.0, 0.0], &[0.0, 1e-7, 0.0, 0.0]),
        (&[300.0, -200.0, 50.0, 1.0], &[-100.0, 400.0, 2.0, 3.0]),
        (&[3.0, 0.0, 0.0, 0.0], &[6.0, 0.0, 0.0, 0.0]),
        (&[0.0; D], &[2.0, 1.0, -1.0, 0.5]),
    ];
    for c in [0.5, 1.0, 2.0] {
        for (a, b) in cases {
            let x = Var::from_tensor(&t(a)).unwrap();
            let y = Var::from_tensor(&t(b)).unwrap();
            let (xt, yt) = (x.as_tensor(), y.as_tensor());
            let pts = Tensor::stack(&[xt, yt], 0).unwrap();
            let terms = [
                distance(xt, yt, c).unwrap(),
                cosine(xt, yt).unwrap(),
                exterior_angle(xt, yt, c).unwrap(),
                cone_violation(xt, yt, c, 0.2).unwrap(),
                half_aperture(xt, c, 0.2).unwrap(),
                inner(xt, yt, c).unwrap(),
                expmap0(xt, c).unwrap().sum_all().unwrap(),
                logmap0(yt, c).unwrap().sum_all().unwrap(),
                centroid(&pts, &t(&[0.3, 0.7]), c)
                    .unwrap()
                    .sum_all()
                    .unwrap(),
            ];
            // Which of x, y each term reads: those must get a gradient.
            let reads = [
                (true, true),
                (true, true),
                (true, true),
                (true, true),
                (true, false),
                (true, true),
                (true, false),
                (false, true),
                (true, true),
            ];
            assert_eq!(reads.len(), terms.len());
            for (i, (term, &(rx, ry))) in terms.iter().zip(&reads).enumerate() {
                let v = term.sum_all().unwrap().to_scalar::<f32>().unwrap();
                assert!(v.is_finite(), "term {i} at {a:?}, {b:?}, c = {c}: {v}");
                let g = term.sum_all().unwrap().backward().unwrap();
                for (var, name, read) in [(&x, "x", rx), (&y, "y", ry)] {
                    let Some(gr) = g.get(var.as_tensor()) else {
                        assert!(
                            !read,
                            "term {i} at {a:?}, {b:?}, c = {c}: no gradient for {name}"
                        );
                        continue;
                    };
                    let gv = vec1(gr.clone());
                    assert!(
                        gv.iter().all(|v| v.is_finite()),
                        "term {i} at {a:?}, {b:?}, c = {c}: gradient of {name} {gv:?}"
                    );
                }
            }
        }
    }
}
