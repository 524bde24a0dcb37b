//! Breadth-first search: a serial reference and three parallel variants.
//!
//! - [`bfs_serial`]: the textbook queue, the oracle the others are tested against.
//! - [`bfs_top_down`]: level-synchronous; each level's frontier is split across rayon tasks,
//!   each task appends discoveries to its own buffer, and a vertex is claimed by an atomic
//!   `fetch_or` of its bit in a visited bitmap, so exactly one parent wins.
//! - [`bfs_bottom_up`]: every unvisited vertex scans its in-neighbours for one in the frontier,
//!   held as a bitmap, and stops at the first hit (Beamer, Asanović, Patterson, "Direction-
//!   optimizing breadth-first search", SC 2012).
//! - [`bfs_direction_optimizing`]: Beamer's hybrid, the default: top-down while the frontier is
//!   small, bottom-up once the frontier's edges exceed the unexplored edges / α, back to
//!   top-down when the frontier shrinks below n / β. The same scheme is the hybrid of PEbfs
//!   (Guo et al., ICA3PP 2024) and of GAPBS `bfs.cc`.
//!
//! All variants run in the caller's rayon pool (`ThreadPool::install` to choose the thread
//! count), use fork-join only (no spinning barriers), and fall back to a serial loop for small
//! frontiers.

mod bottom_up;
mod direction_optimizing;
mod serial;
mod state;
mod top_down;

pub use bottom_up::bfs_bottom_up;
pub use direction_optimizing::bfs_direction_optimizing;
pub use serial::bfs_serial;
pub use top_down::bfs_top_down;

use crate::csr::CsrGraph;

/// Marks "no parent" / "not reached" in [`BfsResult::parent`] and [`BfsResult::depth`].
pub const UNREACHED: u32 = u32::MAX;

/// Default α of the top-down → bottom-up switch (Beamer et al.; GAPBS).
pub const DEFAULT_ALPHA: u32 = 15;
/// Default β of the bottom-up → top-down switch (Beamer et al.; GAPBS).
pub const DEFAULT_BETA: u32 = 18;
/// Default γ of the bottom-up scan-cost guard (this crate's addition to Beamer's rule).
pub const DEFAULT_GAMMA: u32 = 16;
/// Default frontier size below which a top-down step runs on one thread.
pub const DEFAULT_SERIAL_THRESHOLD: usize = 1024;

/// Tuning of the parallel BFS variants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BfsConfig {
    /// Switch top-down → bottom-up when the frontier's out-edges exceed the edges still to
    /// check divided by `alpha`. Default [`DEFAULT_ALPHA`] (15).
    pub alpha: u32,
    /// Switch bottom-up → top-down when the frontier stops growing and holds fewer than
    /// `n / beta` vertices. Default [`DEFAULT_BETA`] (18).
    pub beta: u32,
    /// Go bottom-up only when the frontier's out-edges also exceed `n / gamma`: a bottom-up
    /// step scans all `n` vertices, which α alone ignores, so without this guard the last
    /// levels of high-diameter searches (road networks), where few unexplored edges remain,
    /// would pay `O(n)` per level. `0` disables the guard (pure Beamer/GAPBS rule). Default
    /// [`DEFAULT_GAMMA`] (16); it never binds on Graph500 graphs, whose switching frontiers
    /// hold more than `n` edges.
    pub gamma: u32,
    /// Top-down steps with fewer frontier vertices than this run serially, avoiding task
    /// overhead on the long thin levels of road networks. Default
    /// [`DEFAULT_SERIAL_THRESHOLD`] (1024).
    pub serial_threshold: usize,
}

impl Default for BfsConfig {
    fn default() -> Self {
        BfsConfig {
            alpha: DEFAULT_ALPHA,
            beta: DEFAULT_BETA,
            gamma: DEFAULT_GAMMA,
            serial_threshold: DEFAULT_SERIAL_THRESHOLD,
        }
    }
}

/// Direction of one BFS level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    /// Frontier vertices push to their out-neighbours.
    TopDown,
    /// Unvisited vertices pull from their in-neighbours.
    BottomUp,
}

/// One level of a search: which direction it ran in and how big its input frontier was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BfsStep {
    /// Depth of the frontier this step expanded.
    pub depth: u32,
    /// Direction the step ran in.
    pub direction: Direction,
    /// Vertices in the frontier expanded.
    pub frontier: u64,
}

/// Result of a BFS from `root`: a BFS tree as a parent array and the depth of every vertex.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BfsResult {
    /// The source vertex.
    pub root: u32,
    /// `parent[v]`: the tree parent of `v`, `root` for the root, [`UNREACHED`] if unreached.
    pub parent: Vec<u32>,
    /// `depth[v]`: hop distance from the root, [`UNREACHED`] if unreached.
    pub depth: Vec<u32>,
    /// The levels expanded, in order, with their direction.
    pub steps: Vec<BfsStep>,
}

impl BfsResult {
    /// Parent of `v`, `None` when unreached.
    pub fn parent_of(&self, v: u32) -> Option<u32> {
        Some(self.parent[v as usize]).filter(|&p| p != UNREACHED)
    }

    /// Depth of `v`, `None` when unreached.
    pub fn depth_of(&self, v: u32) -> Option<u32> {
        Some(self.depth[v as usize]).filter(|&d| d != UNREACHED)
    }

    /// Depths as `i64` with −1 for unreached vertices (the convention of many BFS codes).
    pub fn depths_i64(&self) -> Vec<i64> {
        self.depth
            .iter()
            .map(|&d| if d == UNREACHED { -1 } else { i64::from(d) })
            .collect()
    }

    /// Number of reached vertices (including the root).
    pub fn num_reached(&self) -> u64 {
        self.depth.iter().filter(|&&d| d != UNREACHED).count() as u64
    }

    /// Number of non-empty levels (the eccentricity of the root plus one).
    pub fn num_levels(&self) -> u32 {
        self.depth
            .iter()
            .filter(|&&d| d != UNREACHED)
            .max()
            .map_or(0, |&d| d + 1)
    }

    /// Steps at which the direction changed from the previous step: `(depth, new direction)`.
    pub fn direction_switches(&self) -> Vec<(u32, Direction)> {
        self.steps
            .windows(2)
            .filter(|w| w[0].direction != w[1].direction)
            .map(|w| (w[1].depth, w[1].direction))
            .collect()
    }
}

/// The BFS variants, for callers that pick one at run time (CLI, TEPS runner).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum BfsAlgorithm {
    /// [`bfs_serial`].
    Serial,
    /// [`bfs_top_down`].
    TopDown,
    /// [`bfs_bottom_up`].
    BottomUp,
    /// [`bfs_direction_optimizing`] (the default).
    #[default]
    DirectionOptimizing,
}

impl BfsAlgorithm {
    /// All variants, serial first.
    pub const ALL: [BfsAlgorithm; 4] = [
        BfsAlgorithm::Serial,
        BfsAlgorithm::TopDown,
        BfsAlgorithm::BottomUp,
        BfsAlgorithm::DirectionOptimizing,
    ];

    /// Short name (`serial`, `top-down`, `bottom-up`, `auto`).
    pub fn name(self) -> &'static str {
        match self {
            BfsAlgorithm::Serial => "serial",
            BfsAlgorithm::TopDown => "top-down",
            BfsAlgorithm::BottomUp => "bottom-up",
            BfsAlgorithm::DirectionOptimizing => "auto",
        }
    }

    /// Runs this variant from `root`.
    ///
    /// # Panics
    /// If `root` is not a vertex of `graph`.
    #[track_caller]
    pub fn run(self, graph: &CsrGraph, root: u32, config: &BfsConfig) -> BfsResult {
        match self {
            BfsAlgorithm::Serial => bfs_serial(graph, root),
            BfsAlgorithm::TopDown => bfs_top_down(graph, root, config),
            BfsAlgorithm::BottomUp => bfs_bottom_up(graph, root),
            BfsAlgorithm::DirectionOptimizing => bfs_direction_optimizing(graph, root, config),
        }
    }
}

impl std::str::FromStr for BfsAlgorithm {
    type Err = crate::GraphError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "serial" => Ok(BfsAlgorithm::Serial),
            "top-down" | "topdown" => Ok(BfsAlgorithm::TopDown),
            "bottom-up" | "bottomup" => Ok(BfsAlgorithm::BottomUp),
            "auto" | "direction-optimizing" | "hybrid" => Ok(BfsAlgorithm::DirectionOptimizing),
            other => Err(crate::GraphError::InvalidInput(format!(
                "unknown BFS algorithm `{other}` (expected auto, top-down, bottom-up or serial)"
            ))),
        }
    }
}

#[track_caller]
fn assert_root(graph: &CsrGraph, root: u32) {
    assert!(
        root < graph.num_vertices(),
        "BFS root {root} is not a vertex (graph has {} vertices)",
        graph.num_vertices()
    );
}
