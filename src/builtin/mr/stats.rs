//! What the registration cache reports (`dat2-info`, the debug log, `dat_ia_query`), and why
//! it evicts.

/// Evictions from the cache, by cause.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Evictions {
    /// The memory was unmapped, remapped or discarded (kept registrations deregistered, and
    /// live ones dropped from the lookup table).
    pub unmap: u64,
    /// The entry or byte bound was passed, or the device ran out of resources.
    pub lru: u64,
    /// Unused for longer than the TTL.
    pub collector: u64,
    /// Their PD or device was flushed (PZ free, IA close).
    pub flush: u64,
}

/// What `dat2-info` and the debug log report about the registration cache.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Whether registrations of devices that opt in are cached.
    pub enabled: bool,
    /// Why not, when not.
    pub why_off: Option<String>,
    /// Registrations taken back from the cache.
    pub hits: u64,
    /// Registrations made afresh on a device that opts in, with the cache on.
    pub misses: u64,
    pub evictions: Evictions,
    /// Registrations kept now, and their bytes.
    pub entries: u64,
    pub bytes: u64,
    /// The bounds in force.
    pub max_entries: u64,
    pub max_bytes: u64,
    /// The TTL in milliseconds (0: no collector).
    pub ttl_ms: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Cause {
    Unmap,
    Lru,
    Collector,
    Flush,
}

impl Cause {
    pub(super) fn name(self) -> &'static str {
        match self {
            Cause::Unmap => "memory unmapped/remapped/discarded",
            Cause::Lru => "LRU bound",
            Cause::Collector => "unused past the TTL",
            Cause::Flush => "flush",
        }
    }
}
