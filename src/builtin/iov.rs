//! Local I/O vectors: the consumer's LMR triplet arguments, as the device takes them, and the
//! receives posted with them (to an EP or to an SRQ) until they complete.

use crate::abi::*;
use crate::device::{Sge, Sges};

/// A receive posted to an EP or SRQ and not yet completed: its cookie, its length and, only
/// while no QP has it yet (posted to an EP before a connection), its scatter list: once the
/// device holds the list, a copy here would be made and dropped for nothing.
pub struct PostedRecv {
    cookie: DAT_DTO_COOKIE,
    len: u64,
    sges: Sges,
}

impl PostedRecv {
    /// A receive the device holds.
    pub fn posted(cookie: DAT_DTO_COOKIE, len: u64) -> PostedRecv {
        PostedRecv { cookie, len, sges: Sges::new() }
    }

    /// A receive that waits for a QP, with its list.
    pub fn waiting(cookie: DAT_DTO_COOKIE, len: u64, sges: Sges) -> PostedRecv {
        PostedRecv { cookie, len, sges }
    }

    pub fn cookie(&self) -> DAT_DTO_COOKIE {
        self.cookie
    }

    /// The bytes it can take.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// The list of a receive still waiting for a QP (empty once the device has it).
    pub fn sges(&self) -> &Sges {
        &self.sges
    }

    /// The device has it now.
    pub fn handed(&mut self) {
        self.sges = Sges::new();
    }
}
// SAFETY: the cookie is the consumer's opaque value.
unsafe impl Send for PostedRecv {}

/// Checks a local I/O vector argument, `count` triplets at `iov` (`arg` is the count's
/// subtype; the vector is the next argument), and turns it into the device's scatter list at
/// once (one copy of the consumer's triplets, read once). Inline: the posts' hot path.
#[inline(always)]
pub fn iov_sges(count: DAT_COUNT, iov: *const DAT_LMR_TRIPLET, max: DAT_COUNT, arg: DAT_RETURN) -> Result<Sges, DAT_RETURN> {
    Ok(sges(iov_slice(count, iov, max, arg)?))
}

/// The consumer's vector of `count` triplets at `iov` (`arg` is the count's subtype), checked.
pub fn iov_slice<'a>(
    count: DAT_COUNT,
    iov: *const DAT_LMR_TRIPLET,
    max: DAT_COUNT,
    arg: DAT_RETURN,
) -> Result<&'a [DAT_LMR_TRIPLET], DAT_RETURN> {
    if count < 0 || count > max {
        return Err(dat_error(DAT_INVALID_PARAMETER, arg));
    }
    if count == 0 {
        return Ok(&[]);
    }
    if iov.is_null() {
        return Err(dat_error(DAT_INVALID_PARAMETER, arg + 1));
    }
    // SAFETY: the consumer passes `count` triplets, readable for the call; the callers copy
    // them before the call returns.
    Ok(unsafe { core::slice::from_raw_parts(iov, count as usize) })
}

/// The device's scatter list of `iov`: one copy of the consumer's triplets, read once. A post
/// builds it straight into its own local (`sges(iov_slice(..)?)`): through the `Result` of
/// [`iov_sges`] it can be copied once more.
#[inline(always)]
pub fn sges(iov: &[DAT_LMR_TRIPLET]) -> Sges {
    let sge = |t: &DAT_LMR_TRIPLET| Sge { addr: t.virtual_address, len: t.segment_length, lkey: t.lmr_context };
    let mut inline = [Sge::default(); 4];
    if iov.len() > inline.len() {
        return iov.iter().map(sge).collect();
    }
    // Filled in place: collecting into the small vector costs several times more.
    for (d, t) in inline.iter_mut().zip(iov) {
        *d = sge(t);
    }
    Sges::from_buf_and_len(inline, iov.len())
}
