//! Gives this crate pyo3's cfgs (`Py_GIL_DISABLED` on free-threaded Pythons: see `src/ints.rs`).

fn main() {
    pyo3_build_config::use_pyo3_cfgs();
}
