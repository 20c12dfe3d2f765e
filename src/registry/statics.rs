//! The static registry: the loadable `dat.conf` entries and the provider libraries they name.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;

use libloading::os::unix::{Library, Symbol, RTLD_GLOBAL, RTLD_NOW};

use super::config::ConfEntry;
use super::{write, Key};
use crate::abi::*;
use crate::builtin::{ops, provider as builtin};
use crate::dbg_log;
use crate::device::{self, Driver};
use crate::log::DbgType;

/// `void dat_provider_init(const DAT_PROVIDER_INFO *, const char *instance_data)`.
type InitFn = unsafe extern "C" fn(*const DAT_PROVIDER_INFO, *const core::ffi::c_char);
/// `void dat_provider_fini(const DAT_PROVIDER_INFO *)`.
type FiniFn = unsafe extern "C" fn(*const DAT_PROVIDER_INFO);

pub struct SrEntry {
    pub key: Key,
    /// Handed to `dat_provider_init`; boxed so its address stays fixed (providers keep it).
    pub info: Box<DAT_PROVIDER_INFO>,
    pub lib_path: CString,
    pub ia_params: CString,
    /// `file:line` of the dat.conf entry, for messages.
    pub origin: String,
    lib: Option<Library>,
    fini: Option<FiniFn>,
    /// Set when lib_path names one of dat2's built-in providers (`builtin:<kind>`).
    builtin: Option<&'static dyn Driver>,
    pub ref_count: u32,
}

// SAFETY: the library handle and function pointers are process-wide and only used under the
// registry lock or after being taken out of it.
unsafe impl Send for SrEntry {}
// SAFETY: as above.
unsafe impl Sync for SrEntry {}

fn entry(key: Key, lib_path: &[u8], ia_params: &[u8], origin: String) -> SrEntry {
    SrEntry {
        info: Box::new(key.to_info()),
        key,
        builtin: device::driver(lib_path),
        // The parser rejects embedded NULs, so these cannot fail.
        lib_path: CString::new(lib_path).unwrap_or_default(),
        ia_params: CString::new(ia_params).unwrap_or_default(),
        origin,
        lib: None,
        fini: None,
        ref_count: 0,
    }
}

/// The static registry: the loadable dat.conf entries, then dat2's built-in providers whose
/// names dat.conf does not use (each offered as thread safe and not).
pub fn from_config(path: &str, entries: Vec<ConfEntry>) -> Vec<SrEntry> {
    let mut out: Vec<SrEntry> = entries
        .into_iter()
        .filter(ConfEntry::is_loadable)
        .map(|e| {
            let key = Key { name: e.ia_name, major: e.api_major, minor: e.api_minor, thread_safe: e.thread_safe as DAT_BOOLEAN };
            entry(key, &e.lib_path, &e.ia_params, format!("{path}:{}", e.line))
        })
        .collect();
    for (name, lib_path, params) in builtin::defaults() {
        if out.iter().any(|e| e.key.name == name.as_bytes()) {
            continue;
        }
        for thread_safe in [DAT_FALSE, DAT_TRUE] {
            let key = Key { name: name.as_bytes().to_vec(), major: DAT_VERSION_MAJOR, minor: DAT_VERSION_MINOR, thread_safe };
            out.push(entry(key, lib_path.as_bytes(), params.as_bytes(), format!("built-in {name}")));
        }
    }
    out
}

/// The `DAT_PROVIDER_INFO` of every key, in the order of first appearance. Entries with a
/// key already seen are alternatives for it (tried in order when opening), not new entries.
pub fn list() -> Vec<DAT_PROVIDER_INFO> {
    let reg = super::read();
    let mut out: Vec<DAT_PROVIDER_INFO> = Vec::new();
    for (i, e) in reg.statics.iter().enumerate() {
        if !reg.statics[..i].iter().any(|earlier| earlier.key == e.key) {
            out.push(*e.info);
        }
    }
    out
}

/// Takes a reference on the first entry for `key` whose library loads, loading it and calling
/// its `dat_provider_init` on first use. Failures are logged; the caller then finds no
/// provider in the dynamic registry.
pub fn open(key: &Key) {
    let candidates: Vec<usize> = {
        let mut reg = write();
        if let Some(e) = reg.statics.iter_mut().find(|e| e.key == *key && e.ref_count > 0) {
            e.ref_count += 1;
            return;
        }
        reg.statics.iter().enumerate().filter(|(_, e)| e.key == *key).map(|(i, _)| i).collect()
    };
    for index in candidates {
        let (path, params, origin, info, kind) = {
            let reg = super::read();
            let e = &reg.statics[index];
            (e.lib_path.clone(), e.ia_params.clone(), e.origin.clone(), &*e.info as *const DAT_PROVIDER_INFO, e.builtin)
        };
        if let Some(driver) = kind {
            write().statics[index].ref_count = 1;
            if key.major != DAT_VERSION_MAJOR || key.minor != DAT_VERSION_MINOR {
                dbg_log!(DbgType::ERROR, "{}: the built-in providers implement DAT 2.0 only", key.display());
                return;
            }
            let table = ops::init(driver, &key.name, key.thread_safe != 0, &params);
            // SAFETY: a table that lives as long as the process, and the entry's boxed info.
            let status = unsafe { super::add_provider(table, info) };
            if status != DAT_SUCCESS {
                dbg_log!(DbgType::DR, "{}: built-in registration: {status:#x}", key.display());
            }
            return;
        }
        if path.as_bytes().starts_with(b"builtin:") {
            dbg_log!(DbgType::ERROR, "{origin}: no built-in provider is called {}", path.to_string_lossy());
            continue;
        }
        // SAFETY: loading a provider library runs its initialisers; that is what dat.conf asks
        // for, exactly as the original library does.
        let lib = match unsafe { Library::open(Some(std::ffi::OsStr::from_bytes(path.as_bytes())), RTLD_NOW | RTLD_GLOBAL) } {
            Ok(lib) => lib,
            Err(err) => {
                dbg_log!(DbgType::ERROR, "{origin}: cannot load provider library {}: {err}", path.to_string_lossy());
                continue;
            }
        };
        // SAFETY: the symbol types are those the DAT provider API defines.
        let init: Option<InitFn> = unsafe { lib.get::<InitFn>(b"dat_provider_init\0") }.ok().map(|s: Symbol<InitFn>| *s);
        // SAFETY: as above.
        let fini: Option<FiniFn> = unsafe { lib.get::<FiniFn>(b"dat_provider_fini\0") }.ok().map(|s: Symbol<FiniFn>| *s);
        if init.is_none() {
            dbg_log!(DbgType::ERROR, "{origin}: {} has no dat_provider_init", path.to_string_lossy());
        }
        {
            let mut reg = write();
            let e = &mut reg.statics[index];
            e.lib = Some(lib);
            e.fini = fini;
            e.ref_count = 1;
        }
        dbg_log!(DbgType::SR, "{origin}: loaded {}", path.to_string_lossy());
        if let Some(init) = init {
            // SAFETY: `info` points into a boxed entry that is never freed while loaded, and
            // `params` is a valid C string; the provider registers itself from here.
            unsafe { init(info, params.as_ptr()) };
        }
        return;
    }
}

/// Drops a reference taken by [`open`]; the last one calls `dat_provider_fini` and unloads
/// the library. Returns `DAT_PROVIDER_NOT_FOUND` when no entry has this key.
pub fn close(key: &Key) -> DAT_RETURN {
    let (lib, fini, info, kind) = {
        let mut reg = write();
        let Some(e) = reg.statics.iter_mut().filter(|e| e.key == *key).max_by_key(|e| e.ref_count > 0) else {
            return dat_error(DAT_PROVIDER_NOT_FOUND, DAT_NAME_NOT_REGISTERED);
        };
        match e.ref_count {
            0 => return DAT_SUCCESS,
            1 => {
                e.ref_count = 0;
                (e.lib.take(), e.fini.take(), &*e.info as *const DAT_PROVIDER_INFO, e.builtin)
            }
            _ => {
                e.ref_count -= 1;
                return DAT_SUCCESS;
            }
        }
    };
    if kind.is_some() {
        super::remove_provider(key);
    }
    if let Some(fini) = fini {
        // SAFETY: the library is still loaded (we hold it) and `info` is its boxed entry.
        unsafe { fini(info) };
    }
    drop(lib);
    dbg_log!(DbgType::SR, "unloaded provider for {}", key.display());
    DAT_SUCCESS
}
