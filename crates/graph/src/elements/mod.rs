//! The element library. Each module registers its classes in [`register_all`].

use crate::registry::Registry;
use std::sync::Arc;

pub(crate) mod classifier;
pub(crate) mod discard;

pub fn register_all(reg: &mut Registry) {
    reg.add(Arc::new(discard::DiscardClass));
    reg.add(Arc::new(classifier::ClassifierClass));
    reg.add(Arc::new(classifier::IPClassifierClass));
    reg.add(Arc::new(classifier::IPFilterClass));
}
