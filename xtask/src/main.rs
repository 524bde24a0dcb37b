//! Project automation, runnable with nothing but cargo:
//!
//! - `cargo xtask demo [-- <pardis plan flags>]`: installs missing system packages, builds the
//!   CLI's `plan` subcommand in release mode and runs `pardis plan` on its built-in defaults (the
//!   main job).
//! - `cargo xtask test`: everything CI runs, cheapest first: fmt, clippy, tests, selective-build
//!   checks of the umbrella crate and of the demo's CLI, a check that the SpMM micro-kernel
//!   runs on full-width SIMD registers, 50 s of parser fuzzing under a memory
//!   cap, packaging of the published crates, docs. Prints the wall time of each step.
//! - `cargo xtask deps`: only installs missing system packages.

use std::process::{Command, ExitCode};
use std::time::Instant;

/// Umbrella features that must each build alone.
const FEATURES: [&str; 7] = [
    "memory",
    "plan",
    "mesh",
    "sparse",
    "graph",
    "collectives",
    "ml",
];

/// The pardis-cli features `cargo xtask demo` builds.
const DEMO_FEATURES: &str = "plan";

/// Crates that must not appear in a `sparse`-only build of the umbrella.
const HEAVY: [&str; 3] = ["highs", "highs-sys", "candle-core"];

/// The kernel crates share `sparse-formats` and never depend on each other: the crate that must
/// not appear in the umbrella built with only the given feature.
const APART: [(&str, &str); 2] = [("sparse", "graph-kernels"), ("graph", "sparse-kernels")];

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("demo") => ensure_system_deps(false).and_then(|()| demo(&args[1..])),
        Some("test") => ensure_system_deps(true).and_then(|()| {
            optional_test_data();
            test()
        }),
        Some("deps") => ensure_system_deps(true),
        _ => Err("usage: cargo xtask <demo|test|deps>".to_string()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Runs a command, echoing it, and fails with a message when it fails.
fn run(program: &str, args: &[&str], envs: &[(&str, &str)]) -> Result<(), String> {
    eprintln!("$ {} {}", program, args.join(" "));
    let status = Command::new(program)
        .args(args)
        .envs(envs.iter().copied())
        .status()
        .map_err(|e| format!("could not start `{program}`: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("`{program} {}` failed ({status})", args.join(" ")))
    }
}

/// Runs a command and returns its stdout.
fn capture(program: &str, args: &[&str]) -> Result<String, String> {
    let out = Command::new(program)
        .args(args)
        .output()
        .map_err(|e| format!("could not start `{program}`: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "`{program} {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn have(program: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Whether bindgen (through `clang-sys`) will find a libclang to load: it looks for
/// `libclang.so`, `libclang-<version>.so`, `libclang.so.<version>` and
/// `libclang-<version>.so.<version>` in `$LIBCLANG_PATH` and the system's library directories.
/// `libclang-cpp.so.N` (the C++ API library, present on images without libclang) does not count.
fn have_libclang() -> bool {
    let mut dirs: Vec<std::path::PathBuf> = std::env::var_os("LIBCLANG_PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    dirs.extend(
        [
            "/usr/lib",
            "/usr/lib64",
            "/usr/local/lib",
            "/usr/lib/x86_64-linux-gnu",
            "/usr/lib/aarch64-linux-gnu",
        ]
        .map(std::path::PathBuf::from),
    );
    for root in ["/usr/lib", "/usr/lib64"] {
        dirs.extend(
            std::fs::read_dir(root)
                .into_iter()
                .flatten()
                .flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with("llvm"))
                .map(|e| e.path().join("lib")),
        );
    }
    dirs.iter().any(|d| dir_has_libclang(d))
}

/// Whether `dir` holds a file bindgen would load as libclang.
fn dir_has_libclang(dir: &std::path::Path) -> bool {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .any(|e| is_libclang_name(&e.file_name().to_string_lossy()))
}

/// `libclang.so`, `libclang-14.so`, `libclang.so.14`, `libclang-14.so.1`, `libclang.so.14.0.6`;
/// not `libclang-cpp.so.14`, `libclang_rt.*` or `libclangBasic.a`.
fn is_libclang_name(name: &str) -> bool {
    let Some(rest) = name.strip_prefix("libclang") else {
        return false;
    };
    let is_version = |v: &str| !v.is_empty() && v.chars().all(|c| c.is_ascii_digit() || c == '.');
    let after_so = if let Some(after) = rest.strip_prefix(".so") {
        after
    } else if let Some(versioned) = rest.strip_prefix('-') {
        match versioned.split_once(".so") {
            Some((v, after)) if is_version(v) => after,
            _ => return false,
        }
    } else {
        return false;
    };
    after_so.is_empty() || after_so.strip_prefix('.').is_some_and(is_version)
}

/// Installs cmake and libclang (needed to build HiGHS) with apt-get when they are missing, and
/// with `mpi` OpenMPI (for the tests of the `collectives` MPI transport).
fn ensure_system_deps(mpi: bool) -> Result<(), String> {
    let mut missing = Vec::new();
    if !have("cmake") {
        missing.push("cmake");
    }
    if !have_libclang() {
        missing.push("libclang-dev");
    }
    if !have("c++") && !have("g++") {
        missing.push("g++");
    }
    if mpi && !have("mpicc") {
        missing.push("libopenmpi-dev");
    }
    if mpi && !have("mpirun") {
        missing.push("openmpi-bin");
    }

    if missing.is_empty() {
        return Ok(());
    }
    eprintln!("xtask: missing system packages: {}", missing.join(" "));
    if !have("apt-get") {
        return Err(format!(
            "please install {} with your system's package manager (needed to build HiGHS)",
            missing.join(", ")
        ));
    }
    let root = capture("id", &["-u"])
        .map(|s| s.trim() == "0")
        .unwrap_or(false);
    let (prog, prefix): (&str, Vec<&str>) = if root {
        ("apt-get", vec![])
    } else if have("sudo") {
        ("sudo", vec!["apt-get"])
    } else {
        return Err(format!(
            "not root and no sudo: run `apt-get install {}` as root",
            missing.join(" ")
        ));
    };
    eprintln!("xtask: installing them with apt-get");
    let env = [("DEBIAN_FRONTEND", "noninteractive")];
    let mut update = prefix.clone();
    update.extend(["update", "-qq"]);
    run(prog, &update, &env)?;
    let mut install = prefix;
    install.extend(["install", "-y", "-qq"]);
    install.extend(missing.iter().copied());
    run(prog, &install, &env)
}

/// Best effort, never fails the run: Debian's `dataset-fashion-mnist` (IDX files under
/// /usr/share/datasets/fashion-mnist/) for the ml-models class-incremental tests, which skip
/// with a message without it. Installed only as root (no sudo prompt).
fn optional_test_data() {
    if std::path::Path::new("/usr/share/datasets/fashion-mnist").is_dir() || !have("apt-get") {
        return;
    }
    let root = capture("id", &["-u"])
        .map(|s| s.trim() == "0")
        .unwrap_or(false);
    let env = [("DEBIAN_FRONTEND", "noninteractive")];
    let args = ["install", "-y", "-qq", "dataset-fashion-mnist"];
    if !root || run("apt-get", &args, &env).is_err() {
        eprintln!(
            "xtask: dataset-fashion-mnist not installed (as root: apt-get install \
             dataset-fashion-mnist); the Fashion-MNIST tests will skip"
        );
    }
}

fn demo(extra: &[String]) -> Result<(), String> {
    use_ccache_for_cmake();
    // Only the `plan` subcommand (and `memory`, which it implies): no candle, no kernels, so
    // the first build is the HiGHS solver and little else.
    let mut args = vec![
        "run",
        "--release",
        "--package",
        "pardis-cli",
        "--no-default-features",
        "--features",
        DEMO_FEATURES,
        "--",
        "plan",
    ];
    args.extend(extra.iter().map(String::as_str));
    run("cargo", &args, &[])
}

/// HiGHS (C++, built by `highs-sys` through cmake) is compiled once per distinct build-script
/// hash, and cargo's check and build modes hash it differently; when `ccache` is installed, route
/// the C/C++ compilers through it so the repeats are cache hits.
fn use_ccache_for_cmake() {
    if !have("ccache") || std::env::var_os("CMAKE_CXX_COMPILER_LAUNCHER").is_some() {
        return;
    }
    let home = std::env::var("HOME").unwrap_or_else(|_| "/tmp".into());
    for (key, value) in [
        ("CMAKE_C_COMPILER_LAUNCHER", "ccache".to_string()),
        ("CMAKE_CXX_COMPILER_LAUNCHER", "ccache".to_string()),
        ("CCACHE_BASEDIR", "/".to_string()),
        ("CCACHE_NOHASHDIR", "1".to_string()),
        ("CCACHE_DIR", format!("{home}/.cache/ccache")),
    ] {
        if std::env::var_os(key).is_none() {
            std::env::set_var(key, value);
        }
    }
    eprintln!("xtask: compiling HiGHS through ccache");
}

/// The crates published to crates.io: the library crates, the umbrella and the data resolver.
const PUBLISHED: [&str; 9] = [
    "memory-model",
    "parallel-plan",
    "sparse-formats",
    "sparse-kernels",
    "graph-kernels",
    "collectives",
    "ml-models",
    "pardis",
    "pardis-datasets",
];

fn test() -> Result<(), String> {
    use_ccache_for_cmake();
    let start = Instant::now();
    let mut timings = Vec::new();
    let mut step = |name: &str, f: &mut dyn FnMut() -> Result<(), String>| {
        let t = Instant::now();
        eprintln!("\n=== {name} ===");
        let r = f();
        timings.push((name.to_string(), t.elapsed().as_secs_f64()));
        r
    };
    step("fmt", &mut || {
        run("cargo", &["fmt", "--all", "--check"], &[])
    })?;
    step("clippy", &mut || {
        run(
            "cargo",
            &[
                "clippy",
                "--workspace",
                "--all-targets",
                "--",
                "-D",
                "warnings",
            ],
            &[],
        )
    })?;
    step("test", &mut || run("cargo", &["test", "--workspace"], &[]))?;
    step("mpi transport", &mut || {
        if have("mpirun") && have("mpicc") {
            // The feature's code is linted here (the workspace clippy above builds without it).
            run(
                "cargo",
                &[
                    "clippy",
                    "-p",
                    "collectives",
                    "-p",
                    "collectives-bench",
                    "--features",
                    "mpi",
                    "--all-targets",
                    "--",
                    "-D",
                    "warnings",
                ],
                &[],
            )?;
            // The test re-runs itself under `mpirun -n 2/3/4`.
            run(
                "cargo",
                &["test", "-p", "collectives", "--features", "mpi"],
                &[],
            )?;
            // Unstructured-mesh programs over MPI ranks (re-runs itself under `mpirun -n 2/3`).
            run(
                "cargo",
                &[
                    "clippy",
                    "-p",
                    "parallel-plan",
                    "--features",
                    "mpi",
                    "--all-targets",
                    "--",
                    "-D",
                    "warnings",
                ],
                &[],
            )?;
            run(
                "cargo",
                &[
                    "test",
                    "-p",
                    "parallel-plan",
                    "--features",
                    "mpi",
                    "--test",
                    "it",
                    "--",
                    "unstructured::mpi",
                ],
                &[],
            )?;
            // `pardis mesh run --transport mpi` (the CLI's `mpi` feature).
            run(
                "cargo",
                &[
                    "clippy",
                    "-p",
                    "pardis-cli",
                    "--no-default-features",
                    "--features",
                    "mpi",
                    "--",
                    "-D",
                    "warnings",
                ],
                &[],
            )
        } else {
            eprintln!("skipped: OpenMPI not installed (libopenmpi-dev, openmpi-bin)");
            Ok(())
        }
    })?;
    step("selective builds", &mut || {
        for f in FEATURES {
            run(
                "cargo",
                &[
                    "check",
                    "-p",
                    "pardis",
                    "--no-default-features",
                    "--features",
                    f,
                ],
                &[],
            )?;
        }
        // The CLI as `cargo xtask demo` builds it.
        run(
            "cargo",
            &[
                "check",
                "-p",
                "pardis-cli",
                "--no-default-features",
                "--features",
                DEMO_FEATURES,
            ],
            &[],
        )?;
        let tree = |feature: &str| {
            capture(
                "cargo",
                &[
                    "tree",
                    "-p",
                    "pardis",
                    "--no-default-features",
                    "--features",
                    feature,
                    "--prefix",
                    "none",
                    "--edges",
                    "normal",
                ],
            )
        };
        let has = |tree: &str, krate: &str| {
            tree.lines()
                .any(|l| l.split_whitespace().next() == Some(krate))
        };
        let sparse_tree = tree("sparse")?;
        for heavy in HEAVY {
            if has(&sparse_tree, heavy) {
                return Err(format!("`pardis --features sparse` pulls in `{heavy}`"));
            }
        }
        for (feature, other) in APART {
            if has(&tree(feature)?, other) {
                return Err(format!("`pardis --features {feature}` pulls in `{other}`"));
            }
        }
        eprintln!("sparse-only and graph-only umbrellas keep the kernel crates apart");
        eprintln!("sparse-only umbrella is free of {}", HEAVY.join(", "));
        Ok(())
    })?;
    step("codegen", &mut codegen_check)?;
    step("fuzz", &mut || {
        // Every parser, 50 s in all, under a 4 GiB address-space cap so that an allocation
        // sized by a file's header aborts the run (see fuzz/README.md).
        run("cargo", &["build", "-p", "pardis-fuzz"], &[])?;
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .map(std::path::PathBuf::from)
            .unwrap_or_else(|| std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"));
        let bin = target.join("debug").join("pardis-fuzz");
        let bin = bin.to_str().ok_or("the target directory is not UTF-8")?;
        run(
            "sh",
            &["-c", "ulimit -v 4194304 && exec \"$0\" --seconds 50", bin],
            &[],
        )
    })?;
    step("package", &mut || {
        // Every library crate and the umbrella must be importable from crates.io: packaging
        // them together checks that no dependency (dev-only helpers included) needs an
        // unpublished crate. Not verified (that would rebuild each crate alone).
        let mut args = vec!["package", "--no-verify", "--allow-dirty"];
        for krate in PUBLISHED {
            args.extend(["-p", krate]);
        }
        run("cargo", &args, &[])
    })?;
    step("doc", &mut || {
        run(
            "cargo",
            &["doc", "--workspace", "--no-deps"],
            &[("RUSTDOCFLAGS", "-D warnings")],
        )
    })?;
    eprintln!("\n=== timings ===");
    for (name, secs) in &timings {
        eprintln!("{name:>18}: {secs:8.1} s");
    }
    eprintln!("{:>18}: {:8.1} s", "total", start.elapsed().as_secs_f64());
    Ok(())
}

/// The SpMM micro-kernel must run on full-width registers: a release build of
/// `sparse-kernels`' `lssm_variants` example, disassembled, must have its packed multiply-adds on
/// `ymm`/`zmm` registers, with at most [`MAX_XMM_FMAS`] on 16-byte `xmm` ones (the narrowest
/// tails). The tiles once ran on `xmm` registers for a day unnoticed (16-byte streaming stores
/// made LLVM pick 16-byte vectors; benches/README.md, sparse, "Streaming stores as wide as the
/// registers"): several hundred `xmm` multiply-adds. x86-64 only; skipped without `objdump`.
fn codegen_check() -> Result<(), String> {
    if !cfg!(target_arch = "x86_64") {
        eprintln!("skipped: not an x86-64 machine");
        return Ok(());
    }
    if Command::new("objdump").arg("--version").output().is_err() {
        eprintln!("skipped: no objdump (binutils)");
        return Ok(());
    }
    run(
        "cargo",
        &[
            "build",
            "--release",
            "-p",
            "sparse-kernels",
            "--example",
            "lssm_variants",
        ],
        &[],
    )?;
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"));
    let bin = target.join("release/examples/lssm_variants");
    let bin = bin.to_str().ok_or("the target directory is not UTF-8")?;
    let listing = capture("objdump", &["-d", "--no-show-raw-insn", bin])?;
    let (xmm, wide) = packed_fmas(&listing);
    let code = kernel_code(&listing);
    let spills = code.stack_stores;
    eprintln!(
        "packed multiply-adds: {wide} on ymm/zmm, {xmm} on xmm; in the kernels: {spills} \
         ymm/zmm stores to the stack, {} scalar multiply-adds",
        code.scalar_fmas
    );
    if xmm > MAX_XMM_FMAS || wide < MIN_WIDE_FMAS {
        return Err(format!(
            "the SpMM micro-kernel is not on full-width registers ({xmm} packed multiply-adds on \
             xmm, {wide} on ymm/zmm): check it with `perf annotate` (benches/README.md, sparse)"
        ));
    }
    if spills > MAX_KERNEL_STACK_STORES {
        return Err(format!(
            "the SpMM micro-kernel keeps accumulators on the stack ({spills} ymm/zmm stores to \
             the stack in its SIMD instances): check its loops with `perf annotate` \
             (benches/README.md, sparse, \"Accumulators on the stack\")"
        ));
    }
    if code.scalar_fmas > MAX_KERNEL_SCALAR_FMAS {
        return Err(format!(
            "the SpMM micro-kernel sums column by column somewhere ({} scalar multiply-adds in \
             its SIMD instances): check its loops with `perf annotate` (benches/README.md, \
             sparse, \"Row pairs on AVX-512\")",
            code.scalar_fmas
        ));
    }
    Ok(())
}

/// Most `ymm`/`zmm` stores to the stack the micro-kernel's SIMD instances (`micro::run_v4`,
/// pulp's AVX2 `vectorize`) may have: 4 since `RowPairs`' AVX-512 tile was fixed, 20 before (16
/// of them its two rows' accumulators, stored on every entry), 252 before the AVX-512 grouped
/// tiles' fix, when a tile's 8 accumulators went to the stack on every nonzero.
const MAX_KERNEL_STACK_STORES: usize = 12;

/// Most scalar multiply-adds (`vfmadd…sd`/`ss`) those instances may have: 132 since
/// `RowPairs`' AVX-512 tile was fixed (the tiles' scalar tails, the same in every instance),
/// 200 before, when that tile summed each row's own entries one column at a time.
const MAX_KERNEL_SCALAR_FMAS: usize = 160;

/// What the functions of an `objdump -d` listing whose (mangled) names are the micro-kernel's
/// SIMD instances hold.
#[derive(Debug, PartialEq, Eq)]
struct KernelCode {
    /// `ymm`/`zmm` register stores to `(%rsp)`.
    stack_stores: usize,
    /// Scalar fused multiply-adds.
    scalar_fmas: usize,
}

fn kernel_code(listing: &str) -> KernelCode {
    let mut inside = false;
    let mut code = KernelCode {
        stack_stores: 0,
        scalar_fmas: 0,
    };
    for line in listing.lines() {
        if line.ends_with(">:") {
            inside = line.contains("micro6run_v4") || line.contains("V39vectorize");
            continue;
        }
        if !inside {
            continue;
        }
        let mut words = line
            .split_whitespace()
            .skip_while(|w| !w.starts_with("vmov") && !w.starts_with("vfmadd"));
        let (Some(op), Some(args)) = (words.next(), words.next()) else {
            continue;
        };
        if op.starts_with("vfmadd") {
            if op.ends_with("sd") || op.ends_with("ss") {
                code.scalar_fmas += 1;
            }
            continue;
        }
        let to_stack = args.split_once(',').is_some_and(|(src, dst)| {
            (src.starts_with("%ymm") || src.starts_with("%zmm")) && dst.ends_with("(%rsp)")
        });
        if to_stack {
            code.stack_stores += 1;
        }
    }
    code
}

/// Most packed multiply-adds on `xmm` registers the micro-kernel build may have (12 at
/// 4f8d9ae: `RowPairs`' two-column tail tile; several hundred with the half-width tiles).
const MAX_XMM_FMAS: usize = 64;

/// Fewest packed multiply-adds on `ymm`/`zmm` registers it must have (about 1000 at 4f8d9ae).
const MIN_WIDE_FMAS: usize = 200;

/// Packed fused multiply-adds (`vfmadd…ps`/`pd`) in an `objdump -d` listing: on `xmm`
/// registers, and on `ymm` or `zmm` ones.
fn packed_fmas(listing: &str) -> (usize, usize) {
    let (mut xmm, mut wide) = (0, 0);
    for line in listing.lines() {
        let mut words = line
            .split_whitespace()
            .skip_while(|w| !w.starts_with("vfmadd"));
        let (Some(op), Some(args)) = (words.next(), words.next()) else {
            continue;
        };
        if !(op.ends_with("pd") || op.ends_with("ps")) {
            continue;
        }
        if args.contains("%zmm") || args.contains("%ymm") {
            wide += 1;
        } else if args.contains("%xmm") {
            xmm += 1;
        }
    }
    (xmm, wide)
}

#[cfg(test)]
mod tests {
    use super::{dir_has_libclang, is_libclang_name, kernel_code, packed_fmas, KernelCode};

    #[test]
    fn stack_stores_and_scalar_multiply_adds_are_counted_in_the_kernels_only() {
        let listing = "\
0000000000048020 <_ZN14sparse_kernels7kernels5micro6run_v417h367f002434d3b542E>:
   4c04e:\tvmovupd %zmm0,0x1a0(%rsp)
   4c050:\tvmovupd 0x1a0(%rsp),%zmm0
   4c052:\tvmovupd %zmm0,(%rsi)
   4c054:\tvmovsd %xmm0,0x8(%rsp)
   4c058:\tvfmadd231sd 0x8(%r11,%r10,8),%xmm3,%xmm16
   4c05e:\tvfmadd231pd %zmm1,%zmm2,%zmm3
0000000000061200 <_ZN4pulp3x862v32V39vectorize3imp17hac2553eb1984f0e9E>:
   61204:\tvmovups %ymm3,(%rsp)
   61208:\tvfmadd213ss %xmm1,%xmm2,%xmm3
0000000000062000 <_ZN4core3fmt5write17h0000000000000000E>:
   62004:\tvmovups %ymm0,0x20(%rsp)
   62008:\tvfmadd231sd %xmm1,%xmm2,%xmm3
";
        assert_eq!(
            kernel_code(listing),
            KernelCode {
                stack_stores: 2,
                scalar_fmas: 2
            }
        );
    }

    #[test]
    fn packed_multiply_adds_are_counted_by_register_width() {
        let listing = "\
   5e194:\tvfmadd231pd 0x20(%rcx,%rdi,8),%ymm8,%ymm7
   5e19b:\tvfmadd231pd %zmm1,%zmm2,%zmm3
   62228:\tvfmadd231pd 0x10(%rcx,%r9,8),%xmm0,%xmm15
   6222e:\tvfmadd231sd %xmm1,%xmm2,%xmm3
   62230:\tvmovapd %xmm2,0x60(%rsp)
   62238:\tvfmadd213ps (%rax),%ymm1,%ymm2
";
        assert_eq!(packed_fmas(listing), (1, 3));
    }

    #[test]
    fn libclang_names_bindgen_loads() {
        for yes in [
            "libclang.so",
            "libclang.so.1",
            "libclang.so.14.0.6",
            "libclang-14.so",
            "libclang-14.0.so.1",
            "libclang-17.so.17",
        ] {
            assert!(is_libclang_name(yes), "{yes}");
        }
        for no in [
            "libclang-cpp.so.14",
            "libclang-cpp.so",
            "libclang-cpp14.so",
            "libclang_rt.asan-x86_64.so",
            "libclangBasic.a",
            "libclang.a",
            "libclang-.so",
            "libclang.so.x",
            "libclang.sox",
        ] {
            assert!(!is_libclang_name(no), "{no}");
        }
    }

    #[test]
    fn fresh_image_with_only_libclang_cpp_lacks_libclang() {
        let dir = std::env::temp_dir().join(format!("xtask-libclang-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("libclang-cpp.so.14"), b"").unwrap();
        std::fs::write(dir.join("libLLVM-14.so.1"), b"").unwrap();
        assert!(!dir_has_libclang(&dir));
        std::fs::write(dir.join("libclang-14.so.1"), b"").unwrap();
        assert!(dir_has_libclang(&dir));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
