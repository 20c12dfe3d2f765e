//! The one place the library reads its environment (`DAT_OVERRIDE`, `DAT_DBG_TYPE`,
//! `DAT_DBG_DEST`, every `DAT2_*`).
//!
//! In a secure-execution process (the kernel's `AT_SECURE`: set-user-ID, set-group-ID, or
//! file capabilities) the environment belongs to the less privileged user who started the
//! program, so every read here finds nothing, as glibc's `secure_getenv` does: only the
//! built-in defaults and `/etc/dat.conf` remain. Otherwise a caller could name a `dat.conf`
//! whose library is then loaded with the program's privileges.

use std::ffi::OsString;

/// True in a secure-execution process (`getauxval(AT_SECURE)` is nonzero).
pub fn secure_execution() -> bool {
    // SAFETY: getauxval only reads the auxiliary vector the kernel gave the process; it takes
    // no pointer and is safe to call from any thread and from a library's constructor.
    unsafe { libc::getauxval(libc::AT_SECURE) != 0 }
}

/// The variable `name`, or `None` when it is unset or the process is a secure-execution one.
#[allow(clippy::disallowed_methods)] // the one read of the environment (clippy.toml)
pub fn var_os(name: &str) -> Option<OsString> {
    if secure_execution() {
        return None;
    }
    std::env::var_os(name)
}

/// As [`var_os`], for a value that must be UTF-8 (`None` when it is not).
pub fn var(name: &str) -> Option<String> {
    var_os(name)?.into_string().ok()
}

#[cfg(test)]
mod tests {
    use super::{secure_execution, var, var_os};

    // The secure case (a set-user-ID program) is c-tests/secure's: a test process cannot
    // become one.
    #[test]
    fn ordinary_process_reads_the_environment() {
        assert!(!secure_execution());
        assert!(var("PATH").is_some());
        assert!(var_os("DAT2_UTIL_ENV_NEVER_SET").is_none());
    }
}
