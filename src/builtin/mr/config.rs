//! The registration cache's settings, from the environment (`DAT2_MR_CACHE*`).

use std::time::Duration;

pub const DEFAULT_MAX_ENTRIES: usize = 1024;
pub const DEFAULT_MAX_BYTES: u64 = 1 << 30;
pub const DEFAULT_TTL: Duration = Duration::from_secs(5);

/// The cache's settings (from the environment for the library's own cache).
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// `DAT2_MR_CACHE` (anything but 0/no/off/false keeps it on).
    pub enabled: bool,
    /// `DAT2_MR_CACHE_MAX_ENTRIES`: kept registrations at most (0 keeps none).
    pub max_entries: usize,
    /// `DAT2_MR_CACHE_MAX_BYTES`: bytes of kept registrations at most (K, M, G, T suffixes).
    pub max_bytes: u64,
    /// `DAT2_MR_CACHE_TTL`: seconds a kept registration may stay unused (0: no collector).
    pub ttl: Option<Duration>,
}

impl Default for Config {
    fn default() -> Config {
        Config { enabled: true, max_entries: DEFAULT_MAX_ENTRIES, max_bytes: DEFAULT_MAX_BYTES, ttl: Some(DEFAULT_TTL) }
    }
}

fn parse_bytes(s: &str) -> Option<u64> {
    let s = s.trim();
    let lower = s.to_ascii_lowercase();
    let body = lower.strip_suffix("ib").or_else(|| lower.strip_suffix('b')).unwrap_or(&lower);
    let (digits, shift) = match body.chars().last()? {
        'k' => (&body[..body.len() - 1], 10),
        'm' => (&body[..body.len() - 1], 20),
        'g' => (&body[..body.len() - 1], 30),
        't' => (&body[..body.len() - 1], 40),
        _ => (body, 0),
    };
    digits.trim().parse::<u64>().ok()?.checked_mul(1u64 << shift)
}

impl Config {
    /// The settings the environment asks for (none in a secure-execution process:
    /// `util::env`), and a note for each value that was not understood (the default is used
    /// instead).
    pub fn from_env() -> (Config, Vec<String>) {
        Config::parse(crate::util::env::var)
    }

    /// As [`Config::from_env`], reading variables through `get`.
    pub fn parse(get: impl Fn(&str) -> Option<String>) -> (Config, Vec<String>) {
        let mut c = Config::default();
        let mut notes = Vec::new();
        if let Some(v) = get("DAT2_MR_CACHE") {
            c.enabled = !matches!(v.trim().to_ascii_lowercase().as_str(), "0" | "no" | "off" | "false");
        }
        if let Some(v) = get("DAT2_MR_CACHE_MAX_ENTRIES") {
            match v.trim().parse::<usize>() {
                Ok(n) => c.max_entries = n,
                Err(_) => notes.push(format!("DAT2_MR_CACHE_MAX_ENTRIES={v:?} is not a count; using {DEFAULT_MAX_ENTRIES}")),
            }
        }
        if let Some(v) = get("DAT2_MR_CACHE_MAX_BYTES") {
            match parse_bytes(&v) {
                Some(n) => c.max_bytes = n,
                None => notes.push(format!("DAT2_MR_CACHE_MAX_BYTES={v:?} is not a size; using {DEFAULT_MAX_BYTES}")),
            }
        }
        if let Some(v) = get("DAT2_MR_CACHE_TTL") {
            match v.trim().parse::<f64>() {
                Ok(0.0) => c.ttl = None,
                Ok(s) if s.is_finite() && s > 0.0 && s < 1e9 => c.ttl = Some(Duration::from_secs_f64(s)),
                _ => notes.push(format!("DAT2_MR_CACHE_TTL={v:?} is not a number of seconds; using {}", DEFAULT_TTL.as_secs())),
            }
        }
        (c, notes)
    }
}
