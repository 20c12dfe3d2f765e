//! The soft device's memory keys (lmr_context / rmr_context): 32-bit, unpredictable, and
//! not reused soon.
//!
//! A remote key is a capability, so keys must not be guessable from one another. Each key is a
//! running counter passed through a keyed 32-bit permutation (a Feistel network whose round
//! keys come from the kernel's random generator): distinct counters give distinct keys, so a
//! key comes back only after 2^32 allocations, and consecutive keys look unrelated.

use std::sync::atomic::{AtomicU64, Ordering};

pub struct KeyGen {
    counter: AtomicU64,
    round_keys: [u32; 4],
}

impl KeyGen {
    pub fn new() -> KeyGen {
        let mut seed = [0u8; 24];
        fill_random(&mut seed);
        let word = |i: usize| u32::from_le_bytes([seed[4 * i], seed[4 * i + 1], seed[4 * i + 2], seed[4 * i + 3]]);
        let start = u64::from(word(4)) | (u64::from(word(5)) << 32);
        KeyGen { counter: AtomicU64::new(start & 0xffff_ffff), round_keys: [word(0), word(1), word(2), word(3)] }
    }

    /// The next key; never 0 (0 means "no key" in DAT).
    pub fn next(&self) -> u32 {
        loop {
            let n = self.counter.fetch_add(1, Ordering::Relaxed) as u32;
            let key = self.permute(n);
            if key != 0 {
                return key;
            }
        }
    }

    fn permute(&self, x: u32) -> u32 {
        let (mut l, mut r) = ((x >> 16) as u16, x as u16);
        for k in self.round_keys {
            let f = round(r, k);
            (l, r) = (r, l ^ f);
        }
        (u32::from(l) << 16) | u32::from(r)
    }
}

impl Default for KeyGen {
    fn default() -> Self {
        Self::new()
    }
}

/// The Feistel round function: a 16-bit mix of the half block and the round key.
fn round(half: u16, key: u32) -> u16 {
    let mut v = (u32::from(half) ^ key).wrapping_mul(0x9e37_79b1);
    v ^= v >> 15;
    v = v.wrapping_mul(0x85eb_ca77);
    v ^= v >> 13;
    (v ^ (v >> 16)) as u16
}

/// A random 32-bit value from the kernel (a UD QP's Q_Key, see ud/).
pub fn random_u32() -> u32 {
    let mut b = [0u8; 4];
    fill_random(&mut b);
    u32::from_le_bytes(b)
}

fn fill_random(buf: &mut [u8]) {
    let mut filled = 0;
    while filled < buf.len() {
        // SAFETY: getrandom writes at most the given number of bytes into the buffer tail.
        let n = unsafe { libc::getrandom(buf[filled..].as_mut_ptr().cast(), buf.len() - filled, 0) };
        if n <= 0 {
            // No kernel randomness: fall back to time and address entropy (still a permutation).
            let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
            let mix = t ^ (buf.as_ptr() as u128) ^ (u128::from(std::process::id()) << 64);
            for (i, b) in buf.iter_mut().enumerate().skip(filled) {
                *b = (mix >> ((i % 16) * 8)) as u8 ^ (i as u8).wrapping_mul(151);
            }
            return;
        }
        filled += n as usize;
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::KeyGen;

    #[test]
    fn distinct_nonzero_and_not_sequential() {
        let g = KeyGen::new();
        let keys: Vec<u32> = (0..100_000).map(|_| g.next()).collect();
        let set: HashSet<_> = keys.iter().collect();
        assert_eq!(set.len(), keys.len());
        assert!(!keys.contains(&0));
        let sequential = keys.windows(2).filter(|w| w[1].wrapping_sub(w[0]) == 1).count();
        assert!(sequential < 10, "{sequential} consecutive keys differ by one");
    }

    #[test]
    fn permutation_is_bijective_on_a_sample() {
        let g = KeyGen::new();
        let outs: HashSet<u32> = (0u32..1 << 16).map(|x| g.permute(x.wrapping_mul(65537))).collect();
        assert_eq!(outs.len(), 1 << 16);
    }
}
