//! Slots: values kept under ids that are their slot's index and a generation, for requests in
//! flight. Made with room for as many as a queue holds, so that taking and giving back a slot
//! allocates nothing and hashes nothing; a stale id (a slot given back and taken again) finds
//! nothing, as a freed request's completion must.

/// One slot: its generation (bumped each time it is given back), the order it was taken in,
/// and its value while taken.
struct Slot<T> {
    generation: u32,
    taken_as: u64,
    value: Option<T>,
}

pub struct Slots<T> {
    slots: Vec<Slot<T>>,
    /// Indexes of the free slots (the last given back is taken first: its memory is warm).
    free: Vec<u32>,
    taken: usize,
    next: u64,
}

impl<T> Default for Slots<T> {
    fn default() -> Slots<T> {
        Slots::with_room(0)
    }
}

impl<T> Slots<T> {
    /// Room for `n` values before the first allocation.
    pub fn with_room(n: usize) -> Slots<T> {
        let mut s = Slots { slots: Vec::with_capacity(n), free: Vec::with_capacity(n), taken: 0, next: 0 };
        s.grow_to(n);
        s
    }

    #[cold]
    fn grow_to(&mut self, n: usize) {
        while self.slots.len() < n {
            self.free.push(self.slots.len() as u32);
            self.slots.push(Slot { generation: 0, taken_as: 0, value: None });
        }
        // Taken in index order first.
        self.free.sort_unstable_by(|a, b| b.cmp(a));
    }

    /// Keeps `value`; returns its id. Inline: a post takes a slot each time.
    #[inline]
    pub fn insert(&mut self, value: T) -> u64 {
        if self.free.is_empty() {
            let n = (self.slots.len() * 2).max(4);
            self.grow_to(n);
        }
        let index = self.free.pop().expect("a free slot");
        let slot = &mut self.slots[index as usize];
        slot.value = Some(value);
        slot.taken_as = self.next;
        self.next += 1;
        self.taken += 1;
        u64::from(slot.generation) << 32 | u64::from(index)
    }

    fn slot(&self, id: u64) -> Option<&Slot<T>> {
        self.slots.get(id as u32 as usize).filter(|s| u64::from(s.generation) == id >> 32 && s.value.is_some())
    }

    pub fn get(&self, id: u64) -> Option<&T> {
        self.slot(id)?.value.as_ref()
    }

    pub fn get_mut(&mut self, id: u64) -> Option<&mut T> {
        self.slot(id)?;
        self.slots[id as u32 as usize].value.as_mut()
    }

    /// Takes back the value of `id`, if it is still there.
    pub fn remove(&mut self, id: u64) -> Option<T> {
        self.slot(id)?;
        let index = id as u32;
        let slot = &mut self.slots[index as usize];
        // 31 bits: an id never has its top bit set, which a device may keep for ids of its own
        // (the verbs device's SRQ receives share the QP's completion queue).
        slot.generation = slot.generation.wrapping_add(1) & 0x7fff_ffff;
        self.free.push(index);
        self.taken -= 1;
        slot.value.take()
    }

    pub fn len(&self) -> usize {
        self.taken
    }

    pub fn is_empty(&self) -> bool {
        self.taken == 0
    }

    /// The values kept, in the order they were inserted.
    pub fn values(&self) -> impl Iterator<Item = &T> {
        self.slots.iter().filter_map(|s| s.value.as_ref())
    }

    /// The values kept, with their ids.
    pub fn iter(&self) -> impl Iterator<Item = (u64, &T)> {
        self.slots.iter().enumerate().filter_map(|(i, s)| Some((u64::from(s.generation) << 32 | i as u64, s.value.as_ref()?)))
    }

    /// Takes every value, in the order they were inserted, with its id.
    pub fn drain_in_order(&mut self) -> Vec<(u64, T)> {
        let mut order: Vec<(u64, u64)> = self
            .slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.value.is_some())
            .map(|(i, s)| (s.taken_as, u64::from(s.generation) << 32 | i as u64))
            .collect();
        order.sort_unstable();
        order.into_iter().filter_map(|(_, id)| Some((id, self.remove(id)?))).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::Slots;

    #[test]
    fn ids_find_their_value_once() {
        let mut s = Slots::with_room(2);
        let a = s.insert("a");
        let b = s.insert("b");
        let c = s.insert("c");
        assert_eq!((s.len(), s.get(b)), (3, Some(&"b")));
        assert_eq!(s.remove(a), Some("a"));
        assert_eq!(s.remove(a), None);
        // The slot is reused under a new id; the old one stays dead.
        let d = s.insert("d");
        assert_ne!(d, a);
        assert_eq!(s.remove(a), None);
        assert_eq!(s.drain_in_order(), vec![(b, "b"), (c, "c"), (d, "d")]);
        assert!(s.is_empty());
    }

    #[test]
    fn room_made_up_front_is_not_reallocated() {
        let mut s = Slots::with_room(64);
        let before = s.slots.as_ptr();
        for round in 0..1000 {
            let ids: Vec<u64> = (0..64).map(|i| s.insert(round * 64 + i)).collect();
            ids.into_iter().for_each(|id| assert!(s.remove(id).is_some()));
        }
        assert_eq!(s.slots.as_ptr(), before);
    }
}
