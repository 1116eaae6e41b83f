//! Links `podhost-monitor` statically (static-pie), and only it; packs the relative
//! relocations of `podhost` and `podhost-shim` (see [`PACKED_RELOCS_FOR`]).
//!
//! The monitor stays resident for a container's whole life, so what it maps is the
//! per-container cost. Linked dynamically it maps glibc, ld.so and libgcc_s: ~1.7 MiB
//! of RSS (shared pages, but counted in every monitor's RSS) for the few libc calls it
//! makes. Static, it maps only its own file, and ld.so's relocation work at each exec is
//! gone; static-pie keeps ASLR.
//!
//! rustc has no per-binary `crt-static` (it is a `-C target-feature` for every crate,
//! and with it proc-macros cannot be built without `--target`), so this does what
//! `crt-static` does to the link, for this binary: `-static-pie` for the start files
//! and the linker mode, and a directory, searched before the system's, where each
//! shared library rustc asks for (`-lc -lgcc_s -lm …`, see `STATIC_FOR`) is a linker
//! script naming the static archive instead. A library missing here would be linked
//! dynamically into a binary without an interpreter; tests/monitor_binary.rs fails then.
//!
//! glibc's static libc has no NSS (getpwnam, getaddrinfo); the monitor uses neither.

use std::path::PathBuf;

/// The libraries rustc and the crates the monitor links (std, libc, libseccomp-sys)
/// ask for, and the archives that stand in for them.
const STATIC_FOR: &[(&str, &str)] = &[
    ("c", "libc.a"),
    ("gcc_s", "libgcc_eh.a libgcc.a"),
    ("util", "libutil.a"),
    ("rt", "librt.a"),
    ("pthread", "libpthread.a"),
    ("m", "libm.a"),
    ("dl", "libdl.a"),
    ("seccomp", "libseccomp.a"),
];

/// The dynamically linked binaries whose relative relocations are packed (DT_RELR,
/// `-z pack-relative-relocs`). A position-independent Rust binary has one relocation
/// per pointer in its read-only data (vtables, string tables): 1.3 MiB of `.rela.dyn` in
/// `podhost`, which ld.so reads whole at every exec, and which then stays in the
/// daemon's RSS. Packed, it is a few KiB. ld.so supports it from glibc 2.36 (Debian 12);
/// the binary then names the version `GLIBC_ABI_DT_RELR`, so an older glibc refuses it
/// at exec instead of misrunning it (dpkg-shlibdeps does not see that version:
/// scripts/package-deb.sh raises libc6 to 2.36 itself). The static monitor relocates
/// itself (no ld.so) and keeps its own.
const PACKED_RELOCS_FOR: &[&str] = &["podhost", "podhost-shim"];

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let target_env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    let target_os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let features = std::env::var("CARGO_CFG_TARGET_FEATURE").unwrap_or_default();
    if target_os != "linux" || target_env != "gnu" || features.contains("crt-static") {
        // musl and crt-static builds are static already; other systems are not ours.
        return;
    }
    for bin in PACKED_RELOCS_FOR {
        println!("cargo:rustc-link-arg-bin={bin}=-Wl,-z,pack-relative-relocs");
    }
    let Some(out_dir) = std::env::var_os("OUT_DIR").map(PathBuf::from) else {
        panic!("cargo sets OUT_DIR for build scripts");
    };
    let dir = out_dir.join("monitor-static-libs");
    if let Err(e) = std::fs::create_dir_all(&dir) {
        panic!("creating {}: {e}", dir.display());
    }
    for (lib, archives) in STATIC_FOR {
        let script = dir.join(format!("lib{lib}.so"));
        let text = format!(
            "/* podhost build.rs: podhost-monitor links lib{lib} statically */\nINPUT ( {archives} )\n"
        );
        if let Err(e) = std::fs::write(&script, text) {
            panic!("writing {}: {e}", script.display());
        }
    }
    let bin = "podhost-monitor";
    println!("cargo:rustc-link-arg-bin={bin}=-L{}", dir.display());
    println!("cargo:rustc-link-arg-bin={bin}=-static-pie");
}
