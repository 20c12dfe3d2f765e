//! Builds the C shim (the variadic `dat_extension_op`) and links the cdylib as
//! `libdat2.so.2`: soname, `-z defs`, and the version script that binds every exported
//! function to `DAT_2.0`.

fn main() {
    println!("cargo:rerun-if-changed=shim/extension_op.c");
    println!("cargo:rerun-if-changed=src/dat2.map");
    cc::Build::new()
        .file("shim/extension_op.c")
        .flag_if_supported("-fvisibility=hidden")
        .warnings(true)
        .extra_warnings(true)
        .cargo_metadata(false)
        .compile("dat2shim");
    let out = std::env::var("OUT_DIR").expect("OUT_DIR");
    let dir = std::env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR");
    println!("cargo:rustc-link-search=native={out}");
    // Whole-archive: nothing in Rust references dat_extension_op, and it must be kept.
    println!("cargo:rustc-link-lib=static:+whole-archive=dat2shim");
    println!("cargo:rustc-cdylib-link-arg=-Wl,--version-script={dir}/src/dat2.map");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libdat2.so.2");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-z,defs");
}
