//! Builds the C shim and links the cdylib.
//!
//! - By default: `libdat2.so.2`, the library. The shim is the variadic `dat_extension_op` and
//!   the `va_list` readers; link arguments: soname, `-z defs`, and the version script that
//!   binds every exported function to `DAT_2.0`.
//! - With the feature `plugin`: `libdat2prov.so.2`, the built-in providers as a DAT provider
//!   library (`src/plugin.rs`). The shim is the `va_list` readers only; `dat_extension_op`,
//!   `dat_registry_add_provider` and the rest are the host library's, found when it loads us
//!   (so no `-z defs`). Only `dat_provider_init` and `dat_provider_fini` are exported
//!   (`src/dat2prov.map`), and `-z nodelete` keeps the library mapped after the host's
//!   `dlclose`: the devices' threads outlive the last IA.

// Cargo's variables for a build script, not the library's environment (clippy.toml).
#[allow(clippy::disallowed_methods)]
fn main() {
    let plugin = std::env::var_os("CARGO_FEATURE_PLUGIN").is_some();
    for f in ["shim/extension_op.c", "shim/va_args.c", "src/dat2.map", "src/dat2prov.map"] {
        println!("cargo:rerun-if-changed={f}");
    }
    let mut shim = cc::Build::new();
    shim.file("shim/va_args.c");
    if !plugin {
        shim.file("shim/extension_op.c");
    }
    shim.flag_if_supported("-fvisibility=hidden").warnings(true).extra_warnings(true).cargo_metadata(false).compile("dat2shim");
    let out = std::env::var("OUT_DIR").expect("OUT_DIR");
    let dir = std::env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR");
    println!("cargo:rustc-link-search=native={out}");
    // Whole-archive: nothing in Rust references dat_extension_op, and it must be kept.
    println!("cargo:rustc-link-lib=static:+whole-archive=dat2shim");
    if plugin {
        println!("cargo:rustc-cdylib-link-arg=-Wl,--version-script={dir}/src/dat2prov.map");
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libdat2prov.so.2");
        println!("cargo:rustc-cdylib-link-arg=-Wl,-z,nodelete");
    } else {
        println!("cargo:rustc-cdylib-link-arg=-Wl,--version-script={dir}/src/dat2.map");
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libdat2.so.2");
        println!("cargo:rustc-cdylib-link-arg=-Wl,-z,defs");
    }
}
