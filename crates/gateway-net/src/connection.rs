//! Connection I/O: the accept loops (TCP and WebSocket), each connection's Challenge/Hello
//! handshake, and its task, which reads frames, checks trades' signatures and hands each message
//! to the core stamped with its arrival time, and writes the core's downlink frames.

use crate::actor::{CoreInput, DOWNLINK_QUEUE_MAX};
use crate::config::GatewayConfig;
use crate::frame::{
    hello_signing_message, Downlink, RefusalCode, Uplink, PROTOCOL_VERSION, UPLINK_FRAME_MAX,
};
use crate::metrics::GatewayMetrics;
use crate::transport::{self, FrameReader, FrameWriter};
use crate::verify::TradeChecker;
use rand_core::RngCore;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot};

/// Which transport a listener speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Transport {
    Tcp,
    WebSocket,
}

/// What every connection task needs.
#[derive(Clone)]
pub(crate) struct ConnectionContext {
    pub(crate) inputs: mpsc::Sender<CoreInput>,
    pub(crate) config: GatewayConfig,
    pub(crate) started: Instant,
    pub(crate) metrics: Arc<GatewayMetrics>,
    pub(crate) checker: Arc<TradeChecker>,
}

pub(crate) async fn accept_loop(
    listener: TcpListener,
    transport: Transport,
    context: ConnectionContext,
) {
    let mut next_conn = 0u64;
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(error) => {
                tracing::warn!("accepting a participant failed: {error}");
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        if context.inputs.is_closed() {
            return;
        }
        next_conn += 1;
        // Connection numbers of the two listeners must differ: odd for TCP, even for WebSocket.
        let conn = next_conn * 2 + u64::from(transport == Transport::WebSocket);
        let _ = stream.set_nodelay(true);
        let context = context.clone();
        tokio::spawn(async move {
            let (reader, writer) = match transport {
                Transport::Tcp => transport::tcp(stream),
                Transport::WebSocket => {
                    let upgrade = tokio_tungstenite::accept_async_with_config(
                        stream,
                        Some(transport::ws_config(UPLINK_FRAME_MAX)),
                    );
                    match tokio::time::timeout(context.config.handshake_timeout, upgrade).await {
                        Ok(Ok(ws)) => transport::ws(ws),
                        Ok(Err(error)) => {
                            context.metrics.handshakes_refused_total.inc();
                            tracing::info!("refused a WebSocket upgrade from {peer}: {error}");
                            return;
                        }
                        Err(_) => {
                            context.metrics.handshakes_refused_total.inc();
                            tracing::info!("no WebSocket upgrade from {peer} in time");
                            return;
                        }
                    }
                }
            };
            serve_connection(reader, writer, peer, conn, context).await;
        });
    }
}

/// Sends a fresh Challenge and checks the Hello that answers it: the protocol version, a
/// participant number this gateway serves, and that participant's signature over the challenge,
/// the number and the last height. Returns the participant and the last block it says it
/// received, or the refusal's code and text.
async fn handshake(
    reader: &mut FrameReader,
    writer: &mut FrameWriter,
    config: &GatewayConfig,
) -> Result<(u32, Option<u64>), (RefusalCode, String)> {
    let mut nonce = [0u8; 32];
    rand_core::OsRng
        .try_fill_bytes(&mut nonce)
        .map_err(|error| {
            (
                RefusalCode::Unavailable,
                format!("the gateway could not draw a challenge: {error}"),
            )
        })?;
    let gateway_key = *config.key.public_key().as_bytes();
    let challenge = Downlink::Challenge { gateway_key, nonce }.encode();
    let timeout = |what: &str| (RefusalCode::Timeout, what.to_string());
    tokio::time::timeout(config.handshake_timeout, writer.send(&challenge))
        .await
        .map_err(|_| timeout("the Challenge could not be sent within the handshake timeout"))?
        .map_err(|error| {
            (
                RefusalCode::Unavailable,
                format!("sending the Challenge: {error}"),
            )
        })?;
    let hello = tokio::time::timeout(config.handshake_timeout, reader.next(UPLINK_FRAME_MAX)).await;
    let (version, participant, signed) =
        match hello.map(|r| r.map(|f| f.map(|p| Uplink::decode(&p)))) {
            Ok(Ok(Some(Ok(Uplink::Hello {
                version,
                participant,
                signed,
            })))) => (version, participant, signed),
            Err(_) => return Err(timeout("no Hello within the handshake timeout")),
            _ => {
                return Err((
                    RefusalCode::NotAHello,
                    "the first frame must be a Hello".into(),
                ))
            }
        };
    if version != PROTOCOL_VERSION {
        return Err((
            RefusalCode::Version,
            format!(
                "Hello refused: protocol version {version} (this gateway speaks \
                 {PROTOCOL_VERSION}: the signature covers the last height received)"
            ),
        ));
    }
    let Some(key) = config.participant_keys.get(participant as usize) else {
        return Err((
            RefusalCode::UnknownParticipant,
            format!(
                "Hello refused: participant {participant} (this gateway serves 0..{})",
                config.participants()
            ),
        ));
    };
    let bad_signature = |text: String| (RefusalCode::BadSignature, text);
    let signed = signed.ok_or_else(|| {
        bad_signature(format!(
            "Hello refused: participant {participant} sent no signature"
        ))
    })?;
    let signature = walras_crypto::Signature::from_bytes(&signed.signature).map_err(|_| {
        bad_signature(format!(
            "Hello refused: participant {participant}'s signature is malformed"
        ))
    })?;
    let message = hello_signing_message(&gateway_key, &nonce, participant, signed.last_height);
    walras_crypto::verify(key, &message, &signature).map_err(|_| {
        bad_signature(format!(
            "Hello refused: the signature (over the challenge, participant {participant} and \
             the last height) does not verify against participant {participant}'s registered key"
        ))
    })?;
    Ok((participant, signed.last_height))
}

async fn refuse(writer: &mut FrameWriter, code: RefusalCode, text: String) {
    let frame = Downlink::Refused { code, text }.encode();
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        let _ = writer.send(&frame).await;
        writer.close().await;
    })
    .await;
}

/// One participant connection: Challenge and signed Hello, then frames in both directions until
/// either side ends. Each trade's transaction is checked here (decoding, source account,
/// signature: [`TradeChecker`]) before it reaches the core, in the connection's order.
async fn serve_connection(
    mut reader: FrameReader,
    mut writer: FrameWriter,
    peer: SocketAddr,
    conn: u64,
    context: ConnectionContext,
) {
    let ConnectionContext {
        inputs,
        config,
        started,
        metrics,
        checker,
    } = context;
    let (participant, last_height) = match handshake(&mut reader, &mut writer, &config).await {
        Ok(accepted) => accepted,
        Err((code, text)) => {
            metrics.handshakes_refused_total.inc();
            tracing::info!("refused a participant connection from {peer}: {text}");
            refuse(&mut writer, code, text).await;
            return;
        }
    };
    let (downlink, mut outgoing) = mpsc::channel::<Downlink>(DOWNLINK_QUEUE_MAX);
    let (answer, accepted) = oneshot::channel();
    let connected = CoreInput::Connected {
        participant,
        conn,
        last_height,
        downlink,
        answer,
    };
    if inputs.send(connected).await.is_err() || !accepted.await.unwrap_or(false) {
        refuse(
            &mut writer,
            RefusalCode::AlreadyConnected,
            format!("participant {participant} is already connected"),
        )
        .await;
        return;
    }
    tracing::debug!("participant {participant} connected from {peer}");
    let mut writer_task = tokio::spawn(async move {
        while let Some(message) = outgoing.recv().await {
            if writer.send(&message.encode()).await.is_err() {
                return;
            }
        }
    });
    loop {
        let frame = tokio::select! {
            frame = tokio::time::timeout(config.idle_timeout, reader.next(UPLINK_FRAME_MAX)) => frame,
            // The core cut this participant off (its downlink was full) or stopped: close the
            // connection, so that the participant notices and can reconnect.
            _ = &mut writer_task => break,
        };
        let payload = match frame {
            Ok(Ok(Some(payload))) => payload,
            Ok(Err(error)) if error.kind() == std::io::ErrorKind::InvalidData => {
                // Oversized, or not a frame (a text WebSocket message): close.
                metrics.refused_messages_total.inc();
                tracing::debug!("participant {participant}: {error}");
                break;
            }
            Ok(Ok(None)) | Ok(Err(_)) | Err(_) => break,
        };
        let at_ns = started.elapsed().as_nanos() as u64;
        let message = match Uplink::decode(&payload) {
            Ok(message) => message,
            Err(error) => {
                metrics.refused_messages_total.inc();
                tracing::debug!("participant {participant}: undecodable frame: {error}");
                break;
            }
        };
        let trade = match &message {
            Uplink::Trade { transaction, .. } => {
                Some(checker.check(participant, transaction).await.map(Box::new))
            }
            _ => None,
        };
        let input = CoreInput::Message {
            participant,
            conn,
            at_ns,
            message,
            trade,
        };
        if inputs.send(input).await.is_err() {
            break;
        }
    }
    writer_task.abort();
    let _ = inputs
        .send(CoreInput::Disconnected { participant, conn })
        .await;
}
