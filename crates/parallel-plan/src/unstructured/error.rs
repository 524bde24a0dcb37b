//! Error type of [`unstructured`](super): everything a mesh file, a map, a loop's arguments or a
//! peer rank can make go wrong.

/// What can go wrong in an unstructured-mesh program.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum UnstructuredError {
    /// A declaration (set, map, dat, global) is inconsistent; the message says which and why.
    #[error("invalid declaration `{name}`: {detail}")]
    InvalidDeclaration {
        /// Name of the declared object.
        name: String,
        /// What is wrong.
        detail: String,
    },
    /// A map entry points outside its target set.
    #[error("map `{map}`: entry {entry} (element {element}, slot {slot}) is {value}, but set `{to}` has {to_size} elements")]
    MapOutOfRange {
        /// Name of the map.
        map: String,
        /// Flat index of the entry.
        entry: usize,
        /// Source element.
        element: usize,
        /// Slot (`0..arity`).
        slot: usize,
        /// The offending value.
        value: u32,
        /// Name of the target set.
        to: String,
        /// Size of the target set.
        to_size: usize,
    },
    /// An argument of a `par_loop` does not fit the loop (wrong set, map from another set,
    /// slot past the arity, an access mode the argument cannot have, too many arguments).
    #[error("loop `{loop_name}`, argument {arg}: {detail}")]
    InvalidArgument {
        /// Name of the loop.
        loop_name: String,
        /// Position of the argument.
        arg: usize,
        /// What is wrong.
        detail: String,
    },
    /// Two arguments of one loop access the same dat in modes that conflict (written and
    /// read, or written twice other than by increments).
    #[error("loop `{loop_name}`: dat `{dat}` is accessed as {first} (argument {first_arg}) and as {second} (argument {second_arg})")]
    ConflictingAccess {
        /// Name of the loop.
        loop_name: String,
        /// Name of the dat.
        dat: String,
        /// First argument's position.
        first_arg: usize,
        /// First argument's mode.
        first: &'static str,
        /// Second argument's position.
        second_arg: usize,
        /// Second argument's mode.
        second: &'static str,
    },
    /// An indirect `Write` or `ReadWrite` argument whose map sends two iterations to the same
    /// element: the result would depend on execution order (use `Inc`, or a direct access).
    #[error("loop `{loop_name}`: indirect write to dat `{dat}` through map `{map}` slot {slot}: iterations {first} and {second} both write element {target}")]
    ConflictingIndirectWrite {
        /// Name of the loop.
        loop_name: String,
        /// Name of the dat.
        dat: String,
        /// Name of the map.
        map: String,
        /// Map slot.
        slot: usize,
        /// Global number of the first iteration.
        first: usize,
        /// Global number of the second iteration.
        second: usize,
        /// Global number of the element both write.
        target: usize,
    },
    /// A declaration was made after the program was distributed (the first loop freezes the
    /// mesh).
    #[error("`{name}` declared after the mesh was distributed; declare every set, map and dat before the first par_loop")]
    DeclaredAfterDistribution {
        /// Name of the late declaration.
        name: String,
    },
    /// The partitioner failed (METIS reported an error, or it was asked for without the
    /// `metis` feature).
    #[error("partitioning failed: {detail}")]
    Partition {
        /// What went wrong.
        detail: String,
    },
    /// A mesh file is malformed.
    #[error("{path}:{line}: {detail}")]
    MalformedFile {
        /// The file.
        path: String,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        detail: String,
    },
    /// Reading or writing a file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The underlying error.
        source: std::io::Error,
    },
    /// Communication with the other ranks failed (a peer died, a timeout, a mismatch).
    #[cfg(feature = "distributed")]
    #[error("rank {rank}: communication failed: {source}")]
    Comm {
        /// This rank.
        rank: usize,
        /// The collectives error.
        source: collectives::CollectiveError,
    },
    /// The ranks do not agree on the distribution: their declarations (set sizes, maps, dats
    /// with their names, dimensions, types and initial values, the globals' names and
    /// lengths; with a scatter, the shapes only) or the partition they computed differ from
    /// rank 0's (different programs or meshes, or different
    /// [`DistConfig`](super::DistConfig)s). Every rank returns this error, naming the same
    /// ranks, before any halo list is built.
    #[cfg(feature = "distributed")]
    #[error("ranks {ranks:?} computed a different {what} from rank 0's; every rank must declare the same mesh and use the same DistConfig")]
    DistributionMismatch {
        /// What differs: `declarations` (sets, maps, dats, globals) or `partition`; or
        /// `halo lists` when the named peer asked this rank for elements it does not own
        /// (after a corrupt scatter; only this rank returns it then).
        what: &'static str,
        /// The ranks whose fingerprint differs from rank 0's.
        ranks: Vec<usize>,
    },
    /// The part a rank received from the scatter root does not fit together (a size, element
    /// id, halo owner or map entry out of range, a message of another length than the root
    /// announced), or the set sizes the root announced are not the elements the ranks own
    /// together (then every rank returns it); nothing of it was used. The other ranks return
    /// [`UnstructuredError::PeerFailed`] (step `scatter`) at once.
    #[cfg(feature = "distributed")]
    #[error("the part rank {rank} received from root {root} is inconsistent: {detail}")]
    ScatterInconsistent {
        /// The scatter root.
        root: usize,
        /// This rank.
        rank: usize,
        /// What is out of range.
        detail: String,
    },
    /// Another rank reported an error in a step every rank takes together, so this rank stops
    /// too instead of waiting for it.
    #[error("rank {rank} failed in `{step}`; every rank stops")]
    PeerFailed {
        /// The first failing rank.
        rank: usize,
        /// The step.
        step: String,
    },
}

/// Result alias of [`unstructured`](super).
pub type Result<T, E = UnstructuredError> = std::result::Result<T, E>;

/// [`UnstructuredError::MapOutOfRange`] for the first entry of `values` (a map `map` of arity
/// `arity` into the set `to` of `to_size` elements) that is not below `to_size`.
pub(crate) fn check_map_range(
    map: &str,
    values: &[u32],
    arity: usize,
    to: &str,
    to_size: usize,
) -> Result<()> {
    match values.iter().position(|&v| v as usize >= to_size) {
        Some(entry) => Err(UnstructuredError::MapOutOfRange {
            map: map.to_string(),
            entry,
            element: entry / arity,
            slot: entry % arity,
            value: values[entry],
            to: to.to_string(),
            to_size,
        }),
        None => Ok(()),
    }
}
