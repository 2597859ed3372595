//! Why the gateway could not start, or stopped.

use crate::node_link::NodeLinkError;
use walras_gateway::GatewayError;

#[derive(Debug, thiserror::Error)]
pub enum GatewayNetError {
    #[error("invalid gateway configuration: {0}")]
    Config(String),
    #[error("listening on {address}: {cause}")]
    Listen {
        address: String,
        cause: std::io::Error,
    },
    #[error(transparent)]
    Node(#[from] NodeLinkError),
    #[error(transparent)]
    Core(#[from] GatewayError),
    #[error("the gateway stopped: {0}")]
    Stopped(String),
}
