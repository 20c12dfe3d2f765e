//! Local memory regions: `dat_lmr_create`, `dat_lmr_query`, `dat_lmr_free`,
//! `dat_lmr_sync_rdma_read`, `dat_lmr_sync_rdma_write`.

use super::dispatch::call;
use crate::abi::*;
use crate::api::dispatch;
use crate::builtin;
use crate::ffi::{guard_try, guard_try_local};
use crate::registry::{self, handles, handles::Kind};

#[allow(clippy::too_many_arguments)]
extern "C" fn dat_lmr_create(
    ia_handle: DAT_IA_HANDLE,
    mem_type: DAT_MEM_TYPE,
    region: DAT_REGION_DESCRIPTION,
    length: DAT_VLEN,
    pz: DAT_PZ_HANDLE,
    privileges: DAT_MEM_PRIV_FLAGS,
    va_type: DAT_VA_TYPE,
    lmr: *mut DAT_LMR_HANDLE,
    lmr_context: *mut DAT_LMR_CONTEXT,
    rmr_context: *mut DAT_RMR_CONTEXT,
    registered_length: *mut DAT_VLEN,
    registered_address: *mut DAT_VADDR,
) -> DAT_RETURN {
    guard_try_local(|local| {
        // A built-in PZ of this IA: resolved once (no lock, no lookup) and the built-in layer
        // called directly, under this one guard. Any other case (and a copy of an LMR, whose
        // original is checked here first) takes the path below, which tells the errors apart.
        if mem_type != DAT_MEM_TYPE_LMR {
            if let Some(pinned) = builtin::pz::pinned(&local, pz) {
                if pinned.ia.is_consumer_handle(ia_handle) {
                    let pz = pinned.to_arc();
                    drop(pinned);
                    return builtin::lmr::create_in(
                        pz,
                        mem_type,
                        region,
                        length,
                        privileges,
                        va_type,
                        lmr,
                        lmr_context,
                        rmr_context,
                        registered_length,
                        registered_address,
                    );
                }
            }
        }
        let ia = registry::ia(ia_handle)?;
        handles::check(pz, Kind::Pz, DAT_INVALID_HANDLE_PZ)?;
        if mem_type == DAT_MEM_TYPE_LMR {
            // SAFETY: for DAT_MEM_TYPE_LMR the region names an LMR handle; reading the union
            // field only copies a pointer, which is then looked up, never dereferenced.
            let original = unsafe { region.for_lmr_handle };
            handles::check(original, Kind::Lmr, DAT_INVALID_HANDLE_LMR)?;
        }
        Ok(dispatch::create(lmr, Kind::Lmr, ia.slot, ia.provider, |out| {
            call!(
                ia.provider,
                lmr_create_func,
                ia.raw,
                mem_type,
                region,
                length,
                pz,
                privileges,
                va_type,
                out,
                lmr_context,
                rmr_context,
                registered_length,
                registered_address
            )
        }))
    })
}

extern "C" fn dat_lmr_query(lmr: DAT_LMR_HANDLE, mask: DAT_LMR_PARAM_MASK, param: *mut DAT_LMR_PARAM) -> DAT_RETURN {
    guard_try(|| {
        let t = handles::check(lmr, Kind::Lmr, DAT_INVALID_HANDLE_LMR)?;
        Ok(call!(t.provider, lmr_query_func, lmr, mask, param))
    })
}

extern "C" fn dat_lmr_free(lmr: DAT_LMR_HANDLE) -> DAT_RETURN {
    // The LMR was made under dat_lmr_create's guard, after dat_ia_open's installed the panic
    // hook: the guard of the data path's calls, without the hook's check (see guard_local).
    guard_try_local(|_| {
        // A built-in LMR: its free called directly (it looks the handle up itself, under the
        // table's lock, and answers DAT_INVALID_HANDLE_LMR if it is gone meanwhile).
        if builtin::lmr::published(lmr) {
            let status = match builtin::lmr::free(lmr) {
                Ok(r) | Err(r) => r,
            };
            if status == DAT_SUCCESS {
                handles::remove_cell(lmr);
            }
            return Ok(status);
        }
        let t = handles::check(lmr, Kind::Lmr, DAT_INVALID_HANDLE_LMR)?;
        Ok(dispatch::free(lmr, call!(t.provider, lmr_free_func, lmr)))
    })
}

extern "C" fn dat_lmr_sync_rdma_read(ia_handle: DAT_IA_HANDLE, segments: *const DAT_LMR_TRIPLET, count: DAT_VLEN) -> DAT_RETURN {
    guard_try(|| {
        let ia = registry::ia(ia_handle)?;
        Ok(call!(ia.provider, lmr_sync_rdma_read_func, ia.raw, segments, count))
    })
}

extern "C" fn dat_lmr_sync_rdma_write(ia_handle: DAT_IA_HANDLE, segments: *const DAT_LMR_TRIPLET, count: DAT_VLEN) -> DAT_RETURN {
    guard_try(|| {
        let ia = registry::ia(ia_handle)?;
        Ok(call!(ia.provider, lmr_sync_rdma_write_func, ia.raw, segments, count))
    })
}

crate::export_c!(dat_lmr_create, dat_lmr_query, dat_lmr_free, dat_lmr_sync_rdma_read, dat_lmr_sync_rdma_write);
