//! The element library. Each module registers its classes in [`register_all`].

use crate::registry::Registry;

pub fn register_all(_reg: &mut Registry) {}
