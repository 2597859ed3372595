//! `walras._walras`: the native half of the Python package `walras` (the Python half, in
//! `python/walras/`, shapes results into numpy arrays and DataFrames and holds the docstrings
//! users read).
//!
//! Every function here calls the workspace's own crates — clearing, the offers-CSV reader,
//! the generators, the DBO simulator, the oracle, the signing code and the HTTP client — never
//! a re-implementation and never the `walras` binary. Two rules hold for every entry point:
//! the GIL is released while Rust works ([`Python::allow_threads`]), and no Rust panic crosses
//! into Python ([`guarded`] turns one into `walras.InternalError`).

use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;

mod clear;
mod node;
mod signing;
mod tools;

pyo3::create_exception!(
    _walras,
    InternalError,
    PyRuntimeError,
    "A defect inside walras (a Rust panic caught at the boundary): please report it with the input."
);

/// Runs `work` with the GIL released and a panic caught: the interpreter never sees an unwind,
/// and the caller gets `InternalError` naming what was being done.
pub(crate) fn guarded<T, F>(py: Python<'_>, doing: &str, work: F) -> PyResult<T>
where
    T: Send,
    F: FnOnce() -> PyResult<T> + Send,
{
    let outcome = py.allow_threads(|| std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)));
    match outcome {
        Ok(result) => result,
        Err(payload) => Err(InternalError::new_err(format!(
            "{doing} failed inside walras: {}",
            panic_text(payload.as_ref())
        ))),
    }
}

fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_string()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "a panic without a message".to_string()
    }
}

/// A `ValueError` from any message.
pub(crate) fn value_error(message: impl Into<String>) -> PyErr {
    PyValueError::new_err(message.into())
}

/// Panics on purpose, so the tests can check that no panic crosses into Python.
#[pyfunction]
fn _panic_for_test(py: Python<'_>) -> PyResult<()> {
    guarded(py, "the panic test", || -> PyResult<()> {
        panic!("deliberate panic for the boundary test")
    })
}

#[pymodule]
fn _walras(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("InternalError", m.py().get_type::<InternalError>())?;
    m.add_function(wrap_pyfunction!(_panic_for_test, m)?)?;
    clear::register(m)?;
    signing::register(m)?;
    node::register(m)?;
    tools::register(m)?;
    Ok(())
}
