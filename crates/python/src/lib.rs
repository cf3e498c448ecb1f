//! bindings (in progress)
