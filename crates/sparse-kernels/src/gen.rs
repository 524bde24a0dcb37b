//! Sparse matrix generators: stencils, R-MAT/Kronecker power-law graphs, uniform random,
//! arrow, banded and striped matrices. Every generator is deterministic for a given seed.
//!
//! R-MAT edges come from the shared `sparse_formats::rmat` generator, the same edge list the
//! graph kernels build their Kronecker graphs from.

use crate::{AlignedVec, CsrMatrix, Scalar, SpIndex, SparseError};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sparse_formats::rmat::{RmatConfig, GRAPH500_A, GRAPH500_B, GRAPH500_C};

/// Graph500 R-MAT quadrant probabilities `(a, b, c)`; `d = 1 - a - b - c` (Graph500 spec
/// §3: A = 0.57, B = 0.19, C = 0.19; the constants live in `sparse_formats::rmat`).
pub const GRAPH500_ABC: (f64, f64, f64) = (GRAPH500_A, GRAPH500_B, GRAPH500_C);
/// Graph500 edge factor (edges per vertex).
pub const GRAPH500_EDGE_FACTOR: usize = sparse_formats::rmat::GRAPH500_EDGE_FACTOR as usize;
/// The most stored entries [`from_spec`] generates (2^40), whatever the index type.
pub const MAX_GENERATED_NNZ: u64 = 1 << 40;

/// SplitMix64 finaliser mapped to `[-1, 1)`: the deterministic value of entry `k` for `seed`.
pub fn unit_hash(seed: u64, k: u64) -> f64 {
    let mut z = seed ^ k.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 52) as f64 - 1.0
}

fn build<T: Scalar, I: SpIndex>(n: usize, m: usize, t: &[(usize, usize, T)]) -> CsrMatrix<T, I> {
    CsrMatrix::from_triplets(n, m, t)
        .expect("generated indices are in range and fit the index type")
}

/// The 5-point Laplacian on an `nx × ny` grid (4 on the diagonal, -1 to each neighbour).
///
/// # Panics
/// If the grid does not fit the index type `I`.
pub fn stencil_2d_5pt<T: Scalar, I: SpIndex>(nx: usize, ny: usize) -> CsrMatrix<T, I> {
    let id = |x: usize, y: usize| y * nx + x;
    let mut t = Vec::with_capacity(5 * nx * ny);
    for y in 0..ny {
        for x in 0..nx {
            let i = id(x, y);
            t.push((i, i, T::from_f64(4.0)));
            let neighbours = [
                (x > 0).then(|| id(x - 1, y)),
                (x + 1 < nx).then(|| id(x + 1, y)),
                (y > 0).then(|| id(x, y - 1)),
                (y + 1 < ny).then(|| id(x, y + 1)),
            ];
            t.extend(
                neighbours
                    .into_iter()
                    .flatten()
                    .map(|j| (i, j, T::from_f64(-1.0))),
            );
        }
    }
    build(nx * ny, nx * ny, &t)
}

/// The 27-point stencil on an `n × n × n` grid (26 on the diagonal, -1 to each of the up to
/// 26 neighbours). `n = 64` gives 262,144 rows.
///
/// # Panics
/// If the grid does not fit the index type `I`.
pub fn stencil_3d_27pt<T: Scalar, I: SpIndex>(n: usize) -> CsrMatrix<T, I> {
    let rows = n * n * n;
    let mut offsets = Vec::with_capacity(rows + 1);
    let mut indices = Vec::with_capacity(27 * rows);
    let mut values = Vec::with_capacity(27 * rows);
    let ix = |v: usize| I::checked_from(v).expect("grid fits the index type");
    offsets.push(ix(0));
    let range = |c: usize| c.saturating_sub(1)..(c + 2).min(n);
    for z in 0..n {
        for y in 0..n {
            for x in 0..n {
                let i = (z * n + y) * n + x;
                for zz in range(z) {
                    for yy in range(y) {
                        for xx in range(x) {
                            let j = (zz * n + yy) * n + xx;
                            indices.push(ix(j));
                            values.push(T::from_f64(if i == j { 26.0 } else { -1.0 }));
                        }
                    }
                }
                offsets.push(ix(indices.len()));
            }
        }
    }
    CsrMatrix::try_new(rows, rows, offsets, indices, values).expect("stencil structure is valid")
}

/// An R-MAT / Kronecker power-law graph with `2^scale` vertices and `edge_factor · 2^scale`
/// generated edges (Chakrabarti, Zhan, Faloutsos, SDM 2004; Graph500 generator parameters by
/// default via [`GRAPH500_ABC`]), as a directed adjacency matrix with duplicate edges merged
/// (values summed). Edge `k` of the shared generator's list (`sparse_formats::rmat`, vertex
/// labels permuted as Graph500 does, so the long rows are not all at the top) gets the value
/// [`unit_hash`]`(seed, k)`, uniform in `[-1, 1)`. Edges are generated in the caller's rayon
/// pool; the matrix is the same on any thread count.
///
/// # Panics
/// If the probabilities are not in `[0, 1]` with `a + b + c <= 1`, `scale > 31`, more than
/// 2^40 edges are asked for, or the matrix does not fit the index type `I`.
pub fn rmat<T: Scalar, I: SpIndex>(
    scale: u32,
    edge_factor: usize,
    abc: (f64, f64, f64),
    seed: u64,
) -> CsrMatrix<T, I> {
    let (a, b, c) = abc;
    let config = RmatConfig {
        scale,
        edge_factor: u32::try_from(edge_factor).expect("edge factor fits u32"),
        a,
        b,
        c,
        seed,
    };
    let edges = config.edges().unwrap_or_else(|e| panic!("{e}"));
    let t: Vec<(usize, usize, T)> = edges
        .into_iter()
        .enumerate()
        .map(|(k, (u, v))| {
            (
                u as usize,
                v as usize,
                T::from_f64(unit_hash(seed, k as u64)),
            )
        })
        .collect();
    let n = 1usize << scale;
    build(n, n, &t)
}

/// Graph500 Kronecker graph of a given scale (`rmat` with [`GRAPH500_ABC`] and edge factor 16).
pub fn kronecker<T: Scalar, I: SpIndex>(scale: u32, seed: u64) -> CsrMatrix<T, I> {
    rmat(scale, GRAPH500_EDGE_FACTOR, GRAPH500_ABC, seed)
}

/// `rows × cols` with `per_row` distinct columns per row drawn uniformly, values in `[-1, 1)`.
///
/// # Panics
/// If `per_row > cols`.
pub fn uniform<T: Scalar, I: SpIndex>(
    rows: usize,
    cols: usize,
    per_row: usize,
    seed: u64,
) -> CsrMatrix<T, I> {
    assert!(
        per_row <= cols,
        "{per_row} entries per row but only {cols} columns"
    );
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut t = Vec::with_capacity(rows * per_row);
    for r in 0..rows {
        let cols_of_row = rand::seq::index::sample(&mut rng, cols, per_row);
        t.extend(
            cols_of_row
                .into_iter()
                .map(|c| (r, c, T::from_f64(rng.random_range(-1.0..1.0)))),
        );
    }
    build(rows, cols, &t)
}

/// An `n × n` arrow matrix: the first `dense` rows and columns are full, plus the diagonal
/// (the extreme long-row case). Values are deterministic from `seed`.
pub fn arrow<T: Scalar, I: SpIndex>(n: usize, dense: usize, seed: u64) -> CsrMatrix<T, I> {
    let dense = dense.min(n);
    let mut t = Vec::with_capacity(2 * dense * n + n);
    for i in 0..n {
        if i < dense {
            t.extend((0..n).map(|j| (i, j, 0.0)));
        } else {
            t.extend((0..dense).map(|j| (i, j, 0.0)));
            t.push((i, i, 0.0));
        }
    }
    let t: Vec<(usize, usize, T)> = t
        .into_iter()
        .enumerate()
        .map(|(k, (i, j, _))| (i, j, T::from_f64(unit_hash(seed, k as u64))))
        .collect();
    build(n, n, &t)
}

/// An `n × n` banded matrix with `half_width` diagonals on each side of the main diagonal.
pub fn banded<T: Scalar, I: SpIndex>(n: usize, half_width: usize, seed: u64) -> CsrMatrix<T, I> {
    let mut t = Vec::with_capacity(n * (2 * half_width + 1));
    for i in 0..n {
        for j in i.saturating_sub(half_width)..(i + half_width + 1).min(n) {
            t.push((i, j, T::from_f64(unit_hash(seed, (i * n + j) as u64))));
        }
    }
    build(n, n, &t)
}

/// An `n × n` matrix with the columns of a 27-point stencil's rows without its grid: every row
/// `i` has 9 runs of 3 consecutive columns, the runs' first columns `spacing` apart and centred
/// on the diagonal (columns `i + (r − 4) · spacing − 1 + j`, `r < 9`, `j < 3`, those within
/// `0..n`). With `spacing` the length of a grid line it has the shift pairs and the runs of a
/// stencil's rows in one plane; varying it moves the rows of B a row reads apart without
/// changing anything else (benches/README.md, sparse, "Why the stencil is slower than its
/// twin"). `spacing` is clamped to `3..=max(n, 3)` (3: one run of 27, the band of
/// half-width 13).
pub fn striped<T: Scalar, I: SpIndex>(n: usize, spacing: usize, seed: u64) -> CsrMatrix<T, I> {
    let spacing = spacing.clamp(3, n.max(3));
    let mut t = Vec::with_capacity(n * 27);
    for i in 0..n {
        for r in 0..9 {
            for j in 0..3 {
                // Column i + (r − 4) · spacing − 1 + j, skipped outside 0..n.
                let Some(c) = (i + r * spacing + j).checked_sub(4 * spacing + 1) else {
                    continue;
                };
                if c < n {
                    t.push((
                        i,
                        c,
                        T::from_f64(unit_hash(seed, (i * 27 + r * 3 + j) as u64)),
                    ));
                }
            }
        }
    }
    build(n, n, &t)
}

/// A dense row-major `rows × cols` matrix with deterministic entries in `[-1, 1)`, starting on a
/// cache line ([`AlignedVec`]: B 16 bytes past a line, where the allocator puts a large `Vec`,
/// costs the kernels 11–21 %; see `examples/b_alignment.rs`). `.to_vec()` gives a `Vec`.
pub fn dense<T: Scalar>(rows: usize, cols: usize, seed: u64) -> AlignedVec<T> {
    let mut out = AlignedVec::zeroed(rows * cols);
    for (k, x) in out.iter_mut().enumerate() {
        *x = T::from_f64(unit_hash(seed, k as u64));
    }
    out
}

/// Parses a generator spec used by the CLI and benches: `kron:SCALE`, `rmat:SCALE:EDGE_FACTOR`,
/// `stencil27:N`, `stencil5:NX`, `uniform:ROWS:PER_ROW`, `arrow:N:DENSE`, `banded:N:HALF_WIDTH`,
/// `striped:N:SPACING`.
///
/// Sizes are checked before anything is allocated: the rows and the entries generated (before
/// duplicates merge) must fit the index type `I` and stay below [`MAX_GENERATED_NNZ`]; the
/// error says how much memory the matrix would need.
///
/// # Errors
/// [`crate::SparseError::InvalidInput`] for an unknown generator, malformed numbers, or sizes
/// beyond those bounds.
///
/// ```
/// use sparse_kernels::gen::from_spec;
/// let a = from_spec::<f64, u32>("stencil27:4", 1)?;
/// assert_eq!(a.nrows(), 64);
/// let e = from_spec::<f64, u32>("stencil27:1626", 1).unwrap_err();
/// assert!(e.to_string().contains("u32") && e.to_string().contains("TB"), "{e}");
/// # Ok::<(), sparse_kernels::SparseError>(())
/// ```
pub fn from_spec<T: Scalar, I: SpIndex>(spec: &str, seed: u64) -> crate::Result<CsrMatrix<T, I>> {
    let bad = |why: &str| SparseError::InvalidInput(format!("generator `{spec}`: {why}"));
    let mut parts = spec.split(':');
    let name = parts.next().unwrap_or_default();
    let nums: Vec<usize> = parts
        .map(|p| {
            p.parse::<usize>()
                .map_err(|_| bad("parameters must be non-negative integers"))
        })
        .collect::<crate::Result<_>>()?;
    let arg = |i: usize, default: Option<usize>| {
        nums.get(i)
            .copied()
            .or(default)
            .ok_or_else(|| bad("missing parameter"))
    };
    let scale = |s: usize| {
        if (1..=26).contains(&s) {
            Ok(s as u32)
        } else {
            Err(bad("scale must be 1..=26"))
        }
    };
    // Rows and an upper bound of the entries generated, in u128 so that nothing overflows.
    let check = |rows: u128, entries: u128| -> crate::Result<()> {
        // The index types are u32 and usize (sealed).
        let index_max = if I::checked_from(usize::MAX).is_some() {
            usize::MAX as u128
        } else {
            u128::from(u32::MAX)
        };
        if rows <= index_max && entries <= index_max && entries <= u128::from(MAX_GENERATED_NNZ) {
            return Ok(());
        }
        let bytes = entries
            .saturating_mul((std::mem::size_of::<T>() + std::mem::size_of::<I>()) as u128)
            .saturating_add(
                rows.saturating_add(1)
                    .saturating_mul(std::mem::size_of::<I>() as u128),
            );
        Err(bad(&format!(
            "{rows} rows and up to {entries} nonzeros exceed the index type {} \
             (at most {index_max}) or 2^40 nonzeros; the matrix would need {}",
            I::NAME,
            sparse_formats::human_bytes(u64::try_from(bytes).unwrap_or(u64::MAX))
        )))
    };
    let w = |x: usize| x as u128;
    Ok(match name {
        "kron" => {
            let s = scale(arg(0, None)?)?;
            check(1 << s, w(GRAPH500_EDGE_FACTOR) << s)?;
            kronecker(s, seed)
        }
        "rmat" => {
            let (s, ef) = (scale(arg(0, None)?)?, arg(1, Some(GRAPH500_EDGE_FACTOR))?);
            check(1 << s, w(ef) << s)?;
            rmat(s, ef, GRAPH500_ABC, seed)
        }
        "stencil27" => {
            let n = arg(0, Some(64))?;
            let cube = w(n).saturating_pow(3);
            check(cube, cube.saturating_mul(27))?;
            stencil_3d_27pt(n)
        }
        "stencil5" => {
            let n = arg(0, Some(512))?;
            let square = w(n).saturating_pow(2);
            check(square, square.saturating_mul(5))?;
            stencil_2d_5pt(n, n)
        }
        "uniform" => {
            let (rows, per_row) = (arg(0, Some(1 << 16))?, arg(1, Some(16))?);
            if per_row > rows {
                return Err(bad("more entries per row than columns"));
            }
            check(w(rows), w(rows).saturating_mul(w(per_row)))?;
            uniform(rows, rows, per_row, seed)
        }
        "arrow" => {
            let (n, dense) = (arg(0, Some(46_500))?, arg(1, Some(1))?);
            let d = w(dense.min(n));
            check(w(n), (2 * d + 1).saturating_mul(w(n)))?;
            arrow(n, dense, seed)
        }
        "banded" => {
            let (n, half) = (arg(0, Some(1 << 16))?, arg(1, Some(8))?);
            check(w(n), w(n).saturating_mul(2 * w(half) + 1))?;
            banded(n, half, seed)
        }
        "striped" => {
            let (n, spacing) = (arg(0, Some(1 << 16))?, arg(1, Some(64))?);
            if spacing < 3 || spacing > n.max(3) {
                return Err(bad("the spacing of the runs must be 3 to N"));
            }
            check(w(n), w(n).saturating_mul(27))?;
            striped(n, spacing, seed)
        }
        _ => {
            return Err(bad(
                "unknown generator (kron, rmat, stencil27, stencil5, uniform, arrow, banded, \
                 striped)",
            ))
        }
    })
}
