//! Consumer IA handles are small integers (1, 2, ...), as in the original library: slot 0 is
//! never used, the table grows 64 slots at a time, and `dats_get_ia_handle` converts both ways.

use crate::abi::*;

use super::Key;

/// Growth step and initial capacity of the table, as in the original.
const STEP: usize = 64;

/// One open IA.
#[derive(Clone)]
pub struct IaSlot {
    /// The provider's own IA handle.
    pub raw: usize,
    /// The provider's dispatch table (the first word of `raw`).
    pub provider: *const DAT_PROVIDER,
    /// The registry key the IA was opened with.
    pub key: Key,
}

// SAFETY: the provider pointer refers to a table in a loaded library that outlives the slot.
unsafe impl Send for IaSlot {}
// SAFETY: as above; the slot is plain data.
unsafe impl Sync for IaSlot {}

pub struct IaTable {
    slots: Vec<Option<IaSlot>>,
}

impl IaTable {
    pub fn new() -> Self {
        IaTable { slots: vec![None; STEP] }
    }

    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// Stores an IA in the lowest free slot >= 1 and returns that slot.
    pub fn insert(&mut self, slot: IaSlot) -> usize {
        let index = match self.slots.iter().skip(1).position(Option::is_none) {
            Some(i) => i + 1,
            None => {
                let first = self.slots.len();
                self.slots.resize(first + STEP, None);
                first
            }
        };
        self.slots[index] = Some(slot);
        index
    }

    pub fn get(&self, index: usize) -> Option<&IaSlot> {
        self.slots.get(index).and_then(Option::as_ref)
    }

    pub fn remove(&mut self, index: usize) -> Option<IaSlot> {
        self.slots.get_mut(index).and_then(Option::take)
    }

    /// The slot that holds the provider IA `raw`, if any.
    pub fn find_raw(&self, raw: usize) -> Option<usize> {
        self.slots.iter().position(|s| s.as_ref().is_some_and(|s| s.raw == raw))
    }
}
