//! The ABCI server on a Unix socket in CometBFT's home, readable and writable by the node's user
//! only: a TCP port on loopback answered `Info` (and every other ABCI call) to any local process.
//!
//! Written here rather than with `tendermint_abci::Server`, which serves TCP only and keeps its
//! codec private. The framing is what CometBFT's socket client writes: each message is a
//! protobuf varint of its length, then the message; one connection answers its requests in
//! order, one at a time (CometBFT opens four: consensus, mempool, query, snapshot). A request
//! without a value closes its connection (the crate's dispatcher would panic on it).

use std::io::{BufReader, BufWriter, Read, Write};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};

use prost::Message;
use tendermint_abci::Application;
use tendermint_proto::v0_38::abci::request::Value;
use tendermint_proto::v0_38::abci::{response, Request, Response};

use super::WalrasApp;
use crate::NodeError;

/// The socket's name in CometBFT's home.
const SOCKET_NAME: &str = "abci.sock";
/// The largest ABCI message accepted: far above any block CometBFT proposes (its
/// `max_block_bytes` is at most 100 MiB), so only a broken peer meets it.
const MESSAGE_BYTES_MAX: u64 = 256 << 20;
/// A varint of a `u64` has at most this many bytes.
const VARINT_BYTES_MAX: usize = 10;

/// A bound ABCI socket, not yet serving.
pub(super) struct AbciSocket {
    listener: UnixListener,
    path: PathBuf,
}

impl AbciSocket {
    /// Binds `home/abci.sock` (replacing a stale socket a killed node left behind) with mode
    /// 0600.
    pub(super) fn bind(home: &Path) -> Result<AbciSocket, NodeError> {
        let path = home.join(SOCKET_NAME);
        remove_stale(&path)?;
        let listener = UnixListener::bind(&path).map_err(|error| NodeError::Abci {
            doing: "binding the ABCI socket",
            detail: format!(
                "{}: {error} (a Unix socket path holds at most 107 bytes: use a shorter \
                 --cometbft-home)",
                path.display()
            ),
        })?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).map_err(
            |error| NodeError::Abci {
                doing: "restricting the ABCI socket to this user",
                detail: format!("{}: {error}", path.display()),
            },
        )?;
        Ok(AbciSocket { listener, path })
    }

    /// The address CometBFT's `--proxy_app` takes.
    pub(super) fn proxy_app(&self) -> String {
        format!("unix://{}", self.path.display())
    }

    /// Serves `app` on a thread of its own, one thread per connection, until the process ends.
    pub(super) fn serve(self, app: WalrasApp) -> Result<(), NodeError> {
        std::thread::Builder::new()
            .name("abci".into())
            .spawn(move || accept_forever(self.listener, app))
            .map(|_| ())
            .map_err(|error| NodeError::Abci {
                doing: "starting the ABCI server",
                detail: error.to_string(),
            })
    }
}

/// Removes a socket file left by an earlier run; anything else at that path is an error.
fn remove_stale(path: &Path) -> Result<(), NodeError> {
    match std::fs::symlink_metadata(path) {
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Ok(meta) if meta.file_type().is_socket() => {
            std::fs::remove_file(path).map_err(|error| NodeError::Abci {
                doing: "removing the previous run's ABCI socket",
                detail: format!("{}: {error}", path.display()),
            })
        }
        Ok(_) => Err(NodeError::Abci {
            doing: "binding the ABCI socket",
            detail: format!("{} exists and is not a socket", path.display()),
        }),
        Err(error) => Err(NodeError::Abci {
            doing: "binding the ABCI socket",
            detail: format!("{}: {error}", path.display()),
        }),
    }
}

fn accept_forever(listener: UnixListener, app: WalrasApp) {
    for stream in listener.incoming() {
        match stream {
            Ok(stream) => {
                let app = app.clone();
                let spawned = std::thread::Builder::new()
                    .name("abci-conn".into())
                    .spawn(move || serve_connection(stream, &app));
                if let Err(error) = spawned {
                    tracing::warn!("cannot serve an ABCI connection: {error}");
                }
            }
            Err(error) => {
                tracing::warn!("accepting an ABCI connection failed: {error}");
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
        }
    }
}

/// Answers one connection's requests in order until it closes or sends garbage.
fn serve_connection(stream: UnixStream, app: &WalrasApp) {
    let writer = match stream.try_clone() {
        Ok(writer) => writer,
        Err(error) => {
            tracing::warn!("cannot use an ABCI connection: {error}");
            return;
        }
    };
    let mut reader = BufReader::new(stream);
    let mut writer = BufWriter::new(writer);
    loop {
        let request = match read_request(&mut reader) {
            Ok(Some(request)) => request,
            Ok(None) => return,
            Err(error) => {
                tracing::warn!("closing an ABCI connection: {error}");
                return;
            }
        };
        let Some(response) = dispatch(app, request) else {
            tracing::warn!("closing an ABCI connection: a request without a value");
            return;
        };
        if let Err(error) = write_response(&mut writer, &response) {
            tracing::warn!("closing an ABCI connection: {error}");
            return;
        }
    }
}

/// The application's answer to `request`; `None` for a request without a value (which
/// `tendermint_abci`'s own dispatcher would panic on).
fn dispatch(app: &WalrasApp, request: Request) -> Option<Response> {
    let value = match request.value? {
        Value::Echo(req) => response::Value::Echo(app.echo(req)),
        Value::Flush(_) => response::Value::Flush(app.flush()),
        Value::Info(req) => response::Value::Info(app.info(req)),
        Value::InitChain(req) => response::Value::InitChain(app.init_chain(req)),
        Value::Query(req) => response::Value::Query(app.query(req)),
        Value::CheckTx(req) => response::Value::CheckTx(app.check_tx(req)),
        Value::Commit(_) => response::Value::Commit(app.commit()),
        Value::ListSnapshots(_) => response::Value::ListSnapshots(app.list_snapshots()),
        Value::OfferSnapshot(req) => response::Value::OfferSnapshot(app.offer_snapshot(req)),
        Value::LoadSnapshotChunk(req) => {
            response::Value::LoadSnapshotChunk(app.load_snapshot_chunk(req))
        }
        Value::ApplySnapshotChunk(req) => {
            response::Value::ApplySnapshotChunk(app.apply_snapshot_chunk(req))
        }
        Value::PrepareProposal(req) => response::Value::PrepareProposal(app.prepare_proposal(req)),
        Value::ProcessProposal(req) => response::Value::ProcessProposal(app.process_proposal(req)),
        Value::ExtendVote(req) => response::Value::ExtendVote(app.extend_vote(req)),
        Value::VerifyVoteExtension(req) => {
            response::Value::VerifyVoteExtension(app.verify_vote_extension(req))
        }
        Value::FinalizeBlock(req) => response::Value::FinalizeBlock(app.finalize_block(req)),
    };
    Some(Response { value: Some(value) })
}

/// The next request, or `None` when the peer closed the connection between messages.
fn read_request(reader: &mut impl Read) -> std::io::Result<Option<Request>> {
    let Some(length) = read_varint(reader)? else {
        return Ok(None);
    };
    if length > MESSAGE_BYTES_MAX {
        return Err(invalid(format!(
            "a message of {length} bytes (at most {MESSAGE_BYTES_MAX})"
        )));
    }
    // Read as it arrives rather than allocated up front: a garbage length costs nothing.
    let mut bytes = Vec::new();
    reader.take(length).read_to_end(&mut bytes)?;
    if bytes.len() as u64 != length {
        return Err(std::io::ErrorKind::UnexpectedEof.into());
    }
    Request::decode(bytes.as_slice())
        .map(Some)
        .map_err(|error| invalid(format!("not an ABCI request: {error}")))
}

fn write_response(writer: &mut impl Write, response: &Response) -> std::io::Result<()> {
    let mut bytes = Vec::with_capacity(response.encoded_len() + VARINT_BYTES_MAX);
    response
        .encode_length_delimited(&mut bytes)
        .map_err(|error| invalid(format!("encoding a response: {error}")))?;
    writer.write_all(&bytes)?;
    writer.flush()
}

/// A varint length prefix; `None` at a clean end of stream before its first byte.
fn read_varint(reader: &mut impl Read) -> std::io::Result<Option<u64>> {
    let mut value = 0u64;
    for index in 0..VARINT_BYTES_MAX {
        let mut byte = [0u8; 1];
        if let Err(error) = reader.read_exact(&mut byte) {
            if index == 0 && error.kind() == std::io::ErrorKind::UnexpectedEof {
                return Ok(None);
            }
            return Err(error);
        }
        value |= u64::from(byte[0] & 0x7f) << (7 * index);
        if byte[0] & 0x80 == 0 {
            return Ok(Some(value));
        }
    }
    Err(invalid("a length prefix longer than 10 bytes".into()))
}

fn invalid(message: String) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The framing reads back what prost's length-delimited encoding writes (CometBFT's
        /// client writes the same), and garbage is an error, never a panic.
        #[test]
        fn the_length_prefix_reads_what_prost_writes(length in 0u64..(1 << 40)) {
            let mut bytes = Vec::new();
            prost::encoding::encode_varint(length, &mut bytes);
            prop_assert_eq!(read_varint(&mut bytes.as_slice()).unwrap(), Some(length));
        }

        #[test]
        fn garbage_on_the_socket_is_an_error_not_a_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = read_request(&mut bytes.as_slice());
        }
    }

    #[test]
    fn a_request_round_trips_through_the_framing() {
        let request = Request {
            value: Some(tendermint_proto::v0_38::abci::request::Value::Echo(
                tendermint_proto::v0_38::abci::RequestEcho {
                    message: "hello".into(),
                },
            )),
        };
        let mut bytes = Vec::new();
        request.encode_length_delimited(&mut bytes).unwrap();
        let read = read_request(&mut bytes.as_slice()).unwrap().unwrap();
        assert_eq!(read, request);
        assert!(
            read_request(&mut [].as_slice()).unwrap().is_none(),
            "a clean end"
        );
        assert!(read_request(&mut [0xff; 11].as_slice()).is_err());
        assert!(read_request(&mut [0x80, 0x80, 0x80, 0x80, 0x80, 0x01].as_slice()).is_err());
    }

    #[test]
    fn the_socket_is_for_this_user_only_and_a_stale_one_is_replaced() {
        let home = tempfile::tempdir().unwrap();
        let first = AbciSocket::bind(home.path()).unwrap();
        let mode = std::fs::metadata(&first.path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        drop(first);
        let again = AbciSocket::bind(home.path()).expect("a killed node's socket is replaced");
        assert!(again.proxy_app().starts_with("unix://"));
        std::fs::remove_file(&again.path).unwrap();
        std::fs::write(&again.path, b"not a socket").unwrap();
        assert!(
            AbciSocket::bind(home.path()).is_err(),
            "a file is not replaced"
        );
    }
}
