//! Maps keyed by our own integers (handles, work request ids, keys): hashed by a few
//! multiplies instead of SipHash. Nobody outside chooses these keys, so flooding resistance buys
//! nothing, while every data-path call looks some of them up (the handle tables, the posted
//! work requests).

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A `HashMap` with [`IdHasher`]; make one with `IdMap::default()`.
pub type IdMap<K, V> = HashMap<K, V, BuildHasherDefault<IdHasher>>;

/// Multiplicative hashing of integer keys (other input is folded in 8 bytes at a time).
#[derive(Default, Clone, Copy)]
pub struct IdHasher(u64);

const K: u64 = 0x9e37_79b9_7f4a_7c15;

impl IdHasher {
    fn add(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(K);
    }
}

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        // The table takes the bucket from the low bits and a tag from the top ones; a product
        // leaves the low bits poor (aligned addresses), so finish with MurmurHash3's fmix64.
        let mut x = self.0;
        x ^= x >> 33;
        x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
        x ^= x >> 33;
        x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        x ^ (x >> 33)
    }

    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut b = [0u8; 8];
            b[..chunk.len()].copy_from_slice(chunk);
            self.add(u64::from_le_bytes(b));
        }
    }

    fn write_u8(&mut self, v: u8) {
        self.add(u64::from(v));
    }

    fn write_u16(&mut self, v: u16) {
        self.add(u64::from(v));
    }

    fn write_u32(&mut self, v: u32) {
        self.add(u64::from(v));
    }

    fn write_u64(&mut self, v: u64) {
        self.add(v);
    }

    fn write_usize(&mut self, v: usize) {
        self.add(v as u64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spreads_sequential_and_aligned_keys() {
        // Sequential ids and 16-byte aligned addresses both fill a table without piling up.
        for step in [1u64, 16, 4096] {
            let mut m: IdMap<u64, u64> = IdMap::default();
            for i in 0..10_000u64 {
                m.insert(0x5555_0000_0000 + i * step, i);
            }
            for i in 0..10_000u64 {
                assert_eq!(m.get(&(0x5555_0000_0000 + i * step)), Some(&i));
            }
            let mut buckets = std::collections::HashSet::new();
            for i in 0..1024u64 {
                let mut h = IdHasher::default();
                h.write_u64(0x5555_0000_0000 + i * step);
                buckets.insert(h.finish() & 1023);
            }
            assert!(buckets.len() > 600, "step {step}: {} of 1024 buckets", buckets.len());
        }
    }
}
