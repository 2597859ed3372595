//! The node's HTTP API through `walras_client::NodeClient`, the CLI's own client: the same
//! requests, the same error mapping. Answers go to Python as JSON text (the Python half parses
//! them); every failure becomes `walras.ApiError` carrying the API's code.

use crate::guarded;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use walras_client::{ApiRequest, BlockEvents, ClientError, NodeApi, NodeClient};
use walras_types::SignedTransaction;

/// The most transactions one batch request may carry (the node's own cap).
const BATCH_MAX: usize = 10_000;

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Node>()?;
    m.add_class::<EventStream>()?;
    Ok(())
}

/// A connection pool to one node, with the async runtime its requests run on.
#[pyclass(frozen, module = "walras._walras")]
pub struct Node {
    client: NodeClient,
    runtime: Arc<tokio::runtime::Runtime>,
}

/// What a request returns before it reaches Python: a body, or the client's error.
type Answer<T> = Result<T, ClientError>;

#[pymethods]
impl Node {
    #[new]
    fn new(py: Python<'_>, url: &str) -> PyResult<Node> {
        let client = NodeClient::new(url).map_err(|error| api_error(py, error))?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .map_err(|error| {
                crate::InternalError::new_err(format!("cannot start the async runtime: {error}"))
            })?;
        Ok(Node {
            client,
            runtime: Arc::new(runtime),
        })
    }

    /// `http://host:port`, as the client normalised it.
    #[getter]
    fn url(&self) -> String {
        self.client.base_url().to_string()
    }

    /// GET `path` (with its query); the JSON body as text.
    fn get(&self, py: Python<'_>, path: String) -> PyResult<String> {
        let answer: Answer<String> = guarded(py, "a request", || {
            Ok(self.runtime.block_on(async {
                let url = format!("{}{path}", self.client.base_url());
                let request = ApiRequest::get(path);
                let what = request.what.clone();
                let response = self.client.exchange(request).await?;
                let body = response.success_body(&what, &url)?;
                Ok(String::from_utf8_lossy(&body).into_owned())
            }))
        })?;
        answer.map_err(|error| api_error(py, error))
    }

    /// Submits one signed transaction (binary, or its JSON form with `as_json`).
    #[pyo3(signature = (signed, as_json=false))]
    fn submit(&self, py: Python<'_>, signed: &[u8], as_json: bool) -> PyResult<String> {
        let transaction = decode(signed)?;
        let answer: Answer<String> = guarded(py, "submitting", || {
            Ok(self.runtime.block_on(async {
                let response = if as_json {
                    self.client.submit_json(&transaction).await?
                } else {
                    self.client.submit(&transaction).await?
                };
                Ok(to_json(&response))
            }))
        })?;
        answer.map_err(|error| api_error(py, error))
    }

    /// Submits up to 10,000 signed transactions in one request; one result each.
    fn submit_batch(&self, py: Python<'_>, signed: Vec<Bound<'_, PyBytes>>) -> PyResult<String> {
        if signed.is_empty() || signed.len() > BATCH_MAX {
            return Err(crate::value_error(format!(
                "a batch holds 1..={BATCH_MAX} transactions, not {}",
                signed.len()
            )));
        }
        let batch = signed
            .iter()
            .map(|bytes| decode(bytes.as_bytes()))
            .collect::<PyResult<Vec<_>>>()?;
        let answer: Answer<String> = guarded(py, "submitting a batch", || {
            Ok(self.runtime.block_on(async {
                let response = self.client.submit_batch(&batch).await?;
                Ok(to_json(&response))
            }))
        })?;
        answer.map_err(|error| api_error(py, error))
    }

    /// Subscribes to `GET /v1/events`: block events from now on.
    fn events(&self, py: Python<'_>) -> PyResult<EventStream> {
        let answer: Answer<BlockEvents> = guarded(py, "subscribing to events", || {
            Ok(self.runtime.block_on(self.client.events()))
        })?;
        let events = answer.map_err(|error| api_error(py, error))?;
        Ok(EventStream {
            events: Mutex::new(Some(events)),
            runtime: Arc::clone(&self.runtime),
        })
    }
}

/// An open `/v1/events` stream.
#[pyclass(frozen, module = "walras._walras")]
pub struct EventStream {
    /// `None` once closed.
    events: Mutex<Option<BlockEvents>>,
    runtime: Arc<tokio::runtime::Runtime>,
}

#[pymethods]
impl EventStream {
    /// The next block event as JSON text; `None` when the node closed the stream. Raises
    /// `TimeoutError` when `timeout_s` passes first (the stream stays open).
    #[pyo3(signature = (timeout_s=None))]
    fn next(&self, py: Python<'_>, timeout_s: Option<f64>) -> PyResult<Option<String>> {
        let timeout = match timeout_s {
            Some(seconds) if seconds.is_finite() && seconds >= 0.0 => {
                Some(Duration::from_secs_f64(seconds))
            }
            Some(seconds) => {
                return Err(crate::value_error(format!(
                    "timeout_s must be a non-negative number, not {seconds}"
                )))
            }
            None => None,
        };
        let answer: Option<Option<Answer<String>>> = guarded(py, "reading events", || {
            let mut guard = self.events.lock().map_err(|_| {
                crate::InternalError::new_err("the event stream's lock is poisoned")
            })?;
            let Some(events) = guard.as_mut() else {
                return Ok(Some(None));
            };
            let next = self.runtime.block_on(async {
                match timeout {
                    Some(limit) => tokio::time::timeout(limit, events.next()).await.ok(),
                    None => Some(events.next().await),
                }
            });
            Ok(next.map(|event| event.map(|event| event.map(|block| to_json(&block)))))
        })?;
        match answer {
            None => Err(pyo3::exceptions::PyTimeoutError::new_err(
                "no block event arrived within the timeout",
            )),
            Some(None) => {
                self.close();
                Ok(None)
            }
            Some(Some(Ok(text))) => Ok(Some(text)),
            Some(Some(Err(error))) => Err(api_error(py, error)),
        }
    }

    /// Closes the stream (later `next` calls return `None`).
    fn close(&self) {
        if let Ok(mut guard) = self.events.lock() {
            guard.take();
        }
    }
}

fn decode(signed: &[u8]) -> PyResult<SignedTransaction> {
    SignedTransaction::decode(signed)
        .map_err(|error| crate::value_error(format!("not a signed transaction: {error}")))
}

fn to_json<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_else(|error| format!("{{\"error\": \"{error}\"}}"))
}

/// `walras.ApiError(message, code, status, retry_after_s)` for a client error: the API's own
/// code when the node answered, `unreachable` or `protocol` when it did not.
fn api_error(py: Python<'_>, error: ClientError) -> PyErr {
    let (code, status, retry_after_s) = match &error {
        ClientError::Api {
            code,
            status,
            retry_after_s,
            ..
        } => (code.clone(), Some(*status), *retry_after_s),
        ClientError::Unreachable { .. } => ("unreachable".to_string(), None, None),
        ClientError::Protocol { .. } => ("protocol".to_string(), None, None),
    };
    let made = py
        .import("walras.errors")
        .and_then(|module| module.getattr("ApiError"))
        .and_then(|class| class.call1((error.to_string(), code, status, retry_after_s)));
    match made {
        Ok(instance) => PyErr::from_value(instance),
        Err(import_error) => import_error,
    }
}
