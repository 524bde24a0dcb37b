//! The Lorentz (hyperboloid) model of hyperbolic space with curvature `−c` (`c > 0`), in f32
//! candle tensors so that gradients flow through every map.
//!
//! A point is stored by its **space components** `x ∈ ℝᵈ` only; its time component is implied,
//! `x₀ = √(1/c + ‖x‖²)`, so every tensor of shape `[..., d]` is a point on the hyperboloid
//! `{(x₀, x) : −x₀² + ‖x‖² = −1/c, x₀ > 0}` by construction (the convention of MERU, Desai et al.,
//! ICML 2023). [`to_full`] and [`project`] convert to and from full `[..., d + 1]` coordinates
//! (time first).
//!
//! Every binary function broadcasts over the leading dimensions, so pairwise tables come from
//! `f(&x.unsqueeze(1)?, &y.unsqueeze(0)?)` (`[n, 1, d]` against `[1, m, d]` gives `[n, m]`).
//!
//! # Formulas
//!
//! - Lorentzian inner product `⟨x, y⟩_L = ⟨x, y⟩ − x₀y₀`.
//! - `expmap0(v) = sinh(√c‖v‖)/(√c‖v‖) · v`, `logmap0(x) = asinh(√c‖x‖)/(√c‖x‖) · x` (space
//!   components; the origin is `(1/√c, 0)`).
//! - Geodesic distance `d(x, y) = acosh(−c⟨x, y⟩_L)/√c`, evaluated as
//!   `(2/√c)·asinh(√c‖x − y‖_L/2)` with `‖x − y‖_L² = ‖x − y‖² − (x₀ − y₀)²` (the same value:
//!   `‖x − y‖_L² = (4/c)·sinh²(√c·d/2)`). `acosh` near 1 loses every digit in f32 (its argument
//!   `1 + δ` rounds δ to a multiple of 6e-8 and its slope is infinite there); the difference form
//!   keeps the small distances and has finite gradients.
//! - Lorentzian cosine similarity: the cosine of the angle at the origin between `x` and `y`,
//!   `⟨x, y⟩/(‖x‖‖y‖)` of the space components. For points made by [`expmap0`] it equals the
//!   Euclidean cosine of the tangent vectors (the map scales each vector by a positive factor),
//!   and it lies in `[−1, 1]`.
//! - Entailment cone (Ganea et al., ICML 2018, in the Lorentz form of MERU): the half-aperture
//!   at `x` is `asin(C/(√c‖x‖))` (a cone is only defined away from the origin, so the argument is
//!   clamped at 1), the exterior angle of `y` seen from `x` is the angle at `x` between the
//!   geodesic continuing `0 → x` and the geodesic `x → y`,
//!   `acos((y₀ + c⟨x, y⟩_L·x₀)/(‖x‖·√((c⟨x, y⟩_L)² − 1)))`,
//!   and `y` lies in the cone of `x` (`y ⊑ x`) when the exterior angle is at most the aperture.
//!   The violation `max(0, angle − aperture)` is the cone loss of a point that must lie in the
//!   cone (PO-HRL's own-relation term uses `angle − aperture` unclamped, its Eq. 3).
//!
//! # Numerical guards (f32)
//!
//! - Norms are `√max(‖x‖², 1e-12)` (at least [`NORM_EPS`] = 1e-6), so directions of the zero vector
//!   and quotients by norms stay finite.
//! - `sinh(z)/z` and `asinh(z)/z` use their Taylor series below `z = 1e-2` (the closed forms
//!   lose half the digits there); `sinh` arguments are clamped at [`MAX_SINH_ARG`] = 11
//!   (`sinh(11) ≈ 3e4`): [`expmap0`] saturates beyond, so `logmap0(expmap0(v)) = v` holds for
//!   `√c‖v‖ ≤ 11`.
//! - `‖x − y‖_L²` is clamped at 1e-12, so `d(x, x)` is about 1e-6 rather than exactly 0.
//! - `asin`/`acos` arguments are clamped to `[−1 + 1e-6, 1 − 1e-6]` (slope ≤ 710); the
//!   exterior angle's `(c⟨x, y⟩_L)² − 1` at 1e-8 and its denominator at 1e-8.

use candle_core::{Tensor, D};

use crate::train::inverse_trig::{acos, asin};
use crate::{MlError, Result};

/// Smallest norm used in a quotient (`√1e-12`).
pub const NORM_EPS: f64 = 1e-6;
/// Largest argument of `sinh` in [`expmap0`].
pub const MAX_SINH_ARG: f64 = 11.0;
/// Below this `z`, `sinh(z)/z` and `asinh(z)/z` come from their Taylor series.
const SERIES_BELOW: f64 = 1e-2;
/// Clamp margin of `asin`/`acos` arguments.
const TRIG_EPS: f64 = 1e-6;

fn check_c(c: f64) -> Result<()> {
    if c.is_finite() && c > 0.0 {
        Ok(())
    } else {
        Err(MlError::InvalidInput(format!(
            "curvature c must be finite and > 0, got {c}"
        )))
    }
}

/// `‖x‖²` over the last dimension, kept as `[..., 1]`.
fn sq_norm(x: &Tensor) -> Result<Tensor> {
    Ok(x.sqr()?.sum_keepdim(D::Minus1)?)
}

/// `‖x‖` over the last dimension, at least [`NORM_EPS`], as `[..., 1]`.
fn norm(x: &Tensor) -> Result<Tensor> {
    Ok(sq_norm(x)?.maximum(NORM_EPS * NORM_EPS)?.sqrt()?)
}

/// `x₀ = √(1/c + ‖x‖²)` as `[..., 1]`.
fn time_keepdim(x: &Tensor, c: f64) -> Result<Tensor> {
    Ok((sq_norm(x)? + 1.0 / c)?.sqrt()?)
}

/// The time component `x₀ = √(1/c + ‖x‖²)` of points `[..., d]`, shape `[...]`.
pub fn time(x: &Tensor, c: f64) -> Result<Tensor> {
    check_c(c)?;
    Ok(time_keepdim(x, c)?.squeeze(D::Minus1)?)
}

/// Full coordinates `[..., d + 1]` (time first) of points given by their space components.
pub fn to_full(x: &Tensor, c: f64) -> Result<Tensor> {
    check_c(c)?;
    Ok(Tensor::cat(&[time_keepdim(x, c)?, x.clone()], D::Minus1)?)
}

/// Projection of full coordinates `[..., d + 1]` (time first, any values) onto the hyperboloid:
/// the space components are kept and the time component is recomputed, `x₀ = √(1/c + ‖x‖²)`
/// (the closest point along the time axis, as in MERU).
pub fn project(full: &Tensor, c: f64) -> Result<Tensor> {
    check_c(c)?;
    let d1 = full.dim(D::Minus1)?;
    if d1 < 2 {
        return Err(MlError::InvalidInput(
            "full Lorentz coordinates need at least 2 components".into(),
        ));
    }
    to_full(&full.narrow(D::Minus1, 1, d1 - 1)?, c)
}

/// Lorentzian inner product `⟨x, y⟩_L = ⟨x, y⟩ − x₀y₀`, broadcasting, shape `[...]`.
pub fn inner(x: &Tensor, y: &Tensor, c: f64) -> Result<Tensor> {
    check_c(c)?;
    Ok(inner_keepdim(x, y, c)?.squeeze(D::Minus1)?)
}

fn inner_keepdim(x: &Tensor, y: &Tensor, c: f64) -> Result<Tensor> {
    let dot = x.broadcast_mul(y)?.sum_keepdim(D::Minus1)?;
    let tt = time_keepdim(x, c)?.broadcast_mul(&time_keepdim(y, c)?)?;
    Ok((dot - tt)?)
}

/// `where(z < SERIES_BELOW, series, exact)`.
fn small_or(z: &Tensor, series: Tensor, exact: Tensor) -> Result<Tensor> {
    Ok(z.lt(SERIES_BELOW)?.where_cond(&series, &exact)?)
}

/// Exponential map at the origin: tangent vectors `v` `[..., d]` (space components; the time
/// component of a tangent vector at the origin is 0) to points.
pub fn expmap0(v: &Tensor, c: f64) -> Result<Tensor> {
    check_c(c)?;
    let z = (norm(v)? * c.sqrt())?;
    let zc = z.minimum(MAX_SINH_ARG)?;
    let sinh = ((zc.exp()? - zc.neg()?.exp()?)? * 0.5)?;
    let exact = sinh.div(&z)?;
    let series = z.sqr()?.affine(1.0 / 6.0, 1.0)?;
    Ok(v.broadcast_mul(&small_or(&z, series, exact)?)?)
}

/// Logarithmic map at the origin: points `[..., d]` to tangent vectors (inverse of
/// [`expmap0`]).
pub fn logmap0(x: &Tensor, c: f64) -> Result<Tensor> {
    check_c(c)?;
    let z = (norm(x)? * c.sqrt())?;
    // asinh(z) = ln(z + √(z² + 1)), z ≥ 0; z ≤ 1e15 keeps z² finite in f32.
    let zc = z.minimum(1e15)?;
    let asinh = (&zc + (zc.sqr()? + 1.0)?.sqrt()?)?.log()?;
    let exact = asinh.div(&z)?;
    let z2 = z.sqr()?;
    let series = (z2.sqr()?.affine(3.0 / 40.0, 0.0)? + z2.affine(-1.0 / 6.0, 1.0)?)?;
    Ok(x.broadcast_mul(&small_or(&z, series, exact)?)?)
}

/// Geodesic distance `d(x, y)` (see the module docs for the stable form), broadcasting, shape
/// `[...]`.
pub fn distance(x: &Tensor, y: &Tensor, c: f64) -> Result<Tensor> {
    check_c(c)?;
    let dx = sq_norm(&x.broadcast_sub(y)?)?;
    let dt = time_keepdim(x, c)?.broadcast_sub(&time_keepdim(y, c)?)?;
    let q = (dx - dt.sqr()?)?.maximum(1e-12)?;
    let s = (q.sqrt()? * (c.sqrt() / 2.0))?;
    let asinh = (&s + (s.sqr()? + 1.0)?.sqrt()?)?.log()?;
    Ok((asinh * (2.0 / c.sqrt()))?.squeeze(D::Minus1)?)
}

/// Lorentzian cosine similarity (the cosine of the angle at the origin), broadcasting, in
/// `[−1, 1]`, shape `[...]`.
pub fn cosine(x: &Tensor, y: &Tensor) -> Result<Tensor> {
    let dot = x.broadcast_mul(y)?.sum_keepdim(D::Minus1)?;
    let nn = norm(x)?.broadcast_mul(&norm(y)?)?;
    Ok(dot.div(&nn)?.clamp(-1.0, 1.0)?.squeeze(D::Minus1)?)
}

/// Half-aperture `asin(C/(√c‖x‖))` of the entailment cone at points `x` `[..., d]` (`k` is the
/// constant `C`, e.g. 0.2), shape `[...]`; π/2 (minus the clamp) for points with
/// `√c‖x‖ ≤ C`.
pub fn half_aperture(x: &Tensor, c: f64, k: f64) -> Result<Tensor> {
    check_c(c)?;
    if !(k.is_finite() && k > 0.0) {
        return Err(MlError::InvalidInput(format!(
            "cone constant C must be finite and > 0, got {k}"
        )));
    }
    let arg = (norm(x)? * c.sqrt())?.recip()? * k;
    asin(&arg?.clamp(0.0, 1.0 - TRIG_EPS)?.squeeze(D::Minus1)?)
}

/// Exterior angle at `x` between the geodesic `0 → x` continued beyond `x` and the geodesic
/// `x → y` (0 when `y` lies on the ray beyond `x`, π on the segment towards the origin),
/// broadcasting, shape `[...]`.
pub fn exterior_angle(x: &Tensor, y: &Tensor, c: f64) -> Result<Tensor> {
    check_c(c)?;
    let xt = time_keepdim(x, c)?;
    let yt = time_keepdim(y, c)?;
    let cip = (inner_keepdim(x, y, c)? * c)?;
    let numer = yt.broadcast_add(&cip.broadcast_mul(&xt)?)?;
    let root = (cip.sqr()? - 1.0)?.maximum(1e-8)?.sqrt()?;
    let denom = norm(x)?.broadcast_mul(&root)?.maximum(1e-8)?;
    let arg = numer.div(&denom)?.clamp(-1.0 + TRIG_EPS, 1.0 - TRIG_EPS)?;
    acos(&arg.squeeze(D::Minus1)?)
}

/// Cone violation `max(0, exterior_angle(x, y) − half_aperture(x))`: 0 iff `y` lies in the
/// entailment cone of `x` (`y ⊑ x`), broadcasting, shape `[...]`.
pub fn cone_violation(x: &Tensor, y: &Tensor, c: f64, k: f64) -> Result<Tensor> {
    let angle = exterior_angle(x, y, c)?;
    let aperture = half_aperture(x, c, k)?;
    Ok(angle.broadcast_sub(&aperture)?.relu()?)
}

/// Weighted Lorentz centroid (Law et al., ICML 2019): the point on the hyperboloid closest, in
/// squared Lorentzian distance, to the weighted sum `Σ wᵢ xᵢ` of full coordinates, i.e. that sum
/// rescaled to Lorentz norm `1/√c`. `points` `[..., k, d]`, `weights` `[..., k]` (non-negative,
/// not all 0; e.g. a softmax); result `[..., d]`.
pub fn centroid(points: &Tensor, weights: &Tensor, c: f64) -> Result<Tensor> {
    check_c(c)?;
    let w = weights.unsqueeze(D::Minus1)?;
    let k_dim = points.rank() - 2;
    let s = points.broadcast_mul(&w)?.sum(k_dim)?;
    let t = time_keepdim(points, c)?.broadcast_mul(&w)?.sum(k_dim)?;
    let lnorm = (t.sqr()? - sq_norm(&s)?)?.maximum(1e-12)?.sqrt()?;
    Ok(s.broadcast_div(&(lnorm * c.sqrt())?)?)
}
