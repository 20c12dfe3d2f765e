//! The registration table's entries by id, found with no hashing: an id is a slot's index and
//! generation (`util::slots`), with the top bit set so that no id is 0 (which names no entry in
//! a `Registration`). A stale id, of an entry removed since, finds nothing.

use crate::util::slots::Slots;

const ID_BIT: u64 = 1 << 63;

pub(super) struct Entries<E>(Slots<E>);

impl<E> Default for Entries<E> {
    fn default() -> Entries<E> {
        Entries(Slots::default())
    }
}

impl<E> Entries<E> {
    pub(super) fn insert(&mut self, e: E) -> u64 {
        self.0.insert(e) | ID_BIT
    }

    #[inline]
    pub(super) fn get(&self, id: u64) -> Option<&E> {
        if id & ID_BIT == 0 {
            return None;
        }
        self.0.get(id & !ID_BIT)
    }

    #[inline]
    pub(super) fn get_mut(&mut self, id: u64) -> Option<&mut E> {
        if id & ID_BIT == 0 {
            return None;
        }
        self.0.get_mut(id & !ID_BIT)
    }

    pub(super) fn remove(&mut self, id: u64) -> Option<E> {
        if id & ID_BIT == 0 {
            return None;
        }
        self.0.remove(id & !ID_BIT)
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = (u64, &E)> {
        self.0.iter().map(|(id, e)| (id | ID_BIT, e))
    }

    pub(super) fn values(&self) -> impl Iterator<Item = &E> {
        self.0.values()
    }
}

#[cfg(test)]
mod tests {
    use super::Entries;

    #[test]
    fn ids_are_never_zero_and_stale_ids_find_nothing() {
        let mut e = Entries::default();
        let a = e.insert("a");
        assert_ne!(a, 0);
        assert_eq!(e.get(0), None);
        assert_eq!(e.remove(a), Some("a"));
        let b = e.insert("b");
        assert_ne!(a, b, "the slot is reused under another id");
        assert_eq!((e.get(a), e.get(b)), (None, Some(&"b")));
        assert_eq!(e.iter().collect::<Vec<_>>(), vec![(b, &"b")]);
    }
}
