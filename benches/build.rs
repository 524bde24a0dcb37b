//! Builds the C reference of the Airfoil loops (`c/airfoil.c`) with -O3 for the `mesh` bench,
//! when a C compiler exists; otherwise the bench says the reference was skipped.

fn main() {
    println!("cargo::rustc-check-cfg=cfg(pardis_c_airfoil)");
    println!("cargo::rerun-if-changed=c/airfoil.c");
    let built = cc::Build::new()
        .file("c/airfoil.c")
        .opt_level(3)
        .flag_if_supported("-fno-fast-math")
        .cargo_warnings(false)
        .try_compile("pardis_airfoil_c");
    match built {
        Ok(()) => println!("cargo::rustc-cfg=pardis_c_airfoil"),
        Err(e) => println!("cargo::warning=C reference of Airfoil not built (no C compiler?): {e}"),
    }
}
