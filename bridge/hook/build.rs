//! Links `aep-hook` as a static PIE on glibc Linux: no dynamic loader at start-up.
//!
//! The shim runs once per tool call, so its start is what the agent pays. Measured with
//! `aep-bench hook` on this project's machine, loading `libc.so` and `libgcc_s.so` and
//! binding their symbols is most of what the shim costs over `/bin/true`; a static PIE has
//! none of it and keeps ASLR. Cargo has no per-package `-C target-feature=+crt-static` on
//! stable (and that flag in `RUSTFLAGS` breaks every proc-macro crate of a host build), so
//! the link is made static here: rustc's own libraries (`-lgcc_s -lc -lm ...`) are found
//! first in a directory of this build where each is a linker script naming glibc's and
//! libgcc's static archives, and the binary is linked `-static-pie`.
//!
//! Only when the C toolchain has what that needs (glibc's `libc.a`, `rcrt1.o`, libgcc's
//! `libgcc_eh.a`) and builds for its own host; otherwise (macOS, musl, a cross build, a
//! distribution without static glibc) and with `AEP_HOOK_DYNAMIC` set, the shim is linked
//! as every other binary is.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The libraries rustc links a glibc binary against, besides libgcc's.
const GLIBC_LIBS: &[&str] = &["c", "m", "dl", "rt", "pthread", "util"];

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-env-changed=AEP_HOOK_DYNAMIC");
    println!("cargo::rerun-if-env-changed=CC");
    if let Some(dir) = static_libs() {
        println!("cargo::rustc-link-arg-bins=-L{}", dir.display());
        println!("cargo::rustc-link-arg-bins=-static-pie");
    }
}

/// The directory of linker scripts that make rustc's libraries static, when this build can
/// link a static PIE.
fn static_libs() -> Option<PathBuf> {
    if std::env::var_os("AEP_HOOK_DYNAMIC").is_some() {
        return None;
    }
    let target = std::env::var("TARGET").ok()?;
    if !target.ends_with("-linux-gnu") || std::env::var("HOST").ok()? != target {
        return None;
    }
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    find(&cc, "rcrt1.o")?;
    let eh = find(&cc, "libgcc_eh.a")?;
    let gcc = find(&cc, "libgcc.a")?;
    let out = PathBuf::from(std::env::var_os("OUT_DIR")?).join("static-libs");
    std::fs::create_dir_all(&out).ok()?;
    // libgcc_s: the unwinder and compiler helpers, from libgcc's static archives.
    write(&out.join("libgcc_s.so"), &format!("INPUT({} {})\n", eh.display(), gcc.display()))?;
    for lib in GLIBC_LIBS {
        let script = match (find(&cc, &format!("lib{lib}.a")), *lib) {
            // libc, with the libgcc parts it calls back into (one group, any order).
            (Some(a), "c") => format!("GROUP({} {} {})\n", a.display(), eh.display(), gcc.display()),
            (Some(a), _) => format!("INPUT({})\n", a.display()),
            (None, "c" | "m") => return None,
            // Merged into libc since glibc 2.34: nothing of its own to link.
            (None, _) => format!("/* lib{lib}: in libc */\n"),
        };
        write(&out.join(format!("lib{lib}.so")), &script)?;
    }
    Some(out)
}

/// The absolute path the C compiler links `name` from, if it has one.
fn find(cc: &str, name: &str) -> Option<PathBuf> {
    let out = Command::new(cc).arg(format!("-print-file-name={name}")).output().ok()?;
    let p = PathBuf::from(String::from_utf8(out.stdout).ok()?.trim());
    // Without it, the compiler echoes the bare name back.
    (out.status.success() && p.is_absolute() && p.is_file()).then(|| p.canonicalize().unwrap_or(p))
}

fn write(path: &Path, text: &str) -> Option<()> {
    std::fs::write(path, text).ok()
}
