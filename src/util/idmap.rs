//! Maps keyed by our own integers (handles, work request ids, keys), hashed with rustc-hash's
//! Fx hasher instead of SipHash. Nobody outside chooses the keys that go in: handles, ids and
//! keys are ours, and a peer's claimed key is only looked up, never inserted. So flooding
//! resistance buys nothing, while every data-path call looks some of them up (the handle
//! tables, the posted work requests). rustc-hash 2 finishes with a rotation that spreads the
//! high bits of a product into the low ones hashbrown picks buckets with, so aligned handle
//! addresses spread too.

/// A `HashMap` with the Fx hasher; make one with `IdMap::default()`.
pub type IdMap<K, V> = std::collections::HashMap<K, V, rustc_hash::FxBuildHasher>;
