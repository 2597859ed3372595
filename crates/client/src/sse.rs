//! A parser for `text/event-stream` (server-sent events), fed bytes as they arrive.
//!
//! The format (WHATWG HTML, "server-sent events"): lines end in `\n`, `\r\n` or `\r`; a line
//! `field: value` sets a field (one optional space after the colon is dropped); `data` lines
//! accumulate, joined by `\n`; a line starting with `:` is a comment (servers send them as
//! keep-alives); a blank line ends the event. An event with no `data` is not dispatched. Only
//! `event` and `data` matter here (`id` and `retry` are for browser reconnection).
//!
//! Hand-written on purpose (issue 12 looked at `eventsource-stream`, the usual crate over a
//! reqwest byte stream): its `EventStream` appends every chunk to an internal `String` and has no
//! setting that bounds it, so a server that never sends a line end makes the client buffer
//! without limit; it is also an async `Stream` adapter, where this parser is a pure function of
//! the bytes pushed (tested on every split of a stream). This parser cuts any line at
//! [`LINE_BYTES_MAX`], and stops adding `data` lines to an event at [`EVENT_DATA_BYTES_MAX`].

/// Longest line kept: a longer one is a broken or hostile stream, and is cut rather than
/// buffered without limit.
const LINE_BYTES_MAX: usize = 16 << 20;

/// Most `data` kept for one event: further `data` lines of that event are dropped (a node's
/// events are a few kilobytes; only a broken or hostile stream gets near this).
const EVENT_DATA_BYTES_MAX: usize = LINE_BYTES_MAX;

/// One dispatched event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event` field, or `message` when absent.
    pub name: String,
    pub data: String,
}

/// Incremental parser: [`SseParser::push`] any split of the stream, get whole events back.
#[derive(Debug, Default)]
pub struct SseParser {
    /// Bytes of the current, unfinished line.
    line: Vec<u8>,
    /// The previous chunk ended in `\r`: a `\n` starting the next one belongs to that line end.
    after_cr: bool,
    name: Option<String>,
    data: Option<String>,
}

impl SseParser {
    /// Consumes `bytes` and returns the events they complete, in order.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<SseEvent> {
        let mut events = Vec::new();
        for &byte in bytes {
            let after_cr = std::mem::replace(&mut self.after_cr, false);
            match byte {
                b'\n' if after_cr => {}
                b'\n' | b'\r' => {
                    self.after_cr = byte == b'\r';
                    let line = std::mem::take(&mut self.line);
                    if let Some(event) = self.end_line(&line) {
                        events.push(event);
                    }
                }
                _ if self.line.len() < LINE_BYTES_MAX => self.line.push(byte),
                _ => {}
            }
        }
        events
    }

    /// Handles one complete line; a blank line may dispatch an event.
    fn end_line(&mut self, line: &[u8]) -> Option<SseEvent> {
        if line.is_empty() {
            return self.dispatch();
        }
        if line[0] == b':' {
            return None;
        }
        let text = String::from_utf8_lossy(line);
        let (field, value) = match text.find(':') {
            Some(colon) => {
                let value = &text[colon + 1..];
                (&text[..colon], value.strip_prefix(' ').unwrap_or(value))
            }
            None => (&text[..], ""),
        };
        match field {
            "event" => self.name = Some(value.to_string()),
            "data" => match &mut self.data {
                Some(data) if data.len() + 1 + value.len() <= EVENT_DATA_BYTES_MAX => {
                    data.push('\n');
                    data.push_str(value);
                }
                Some(_) => {}
                None => self.data = Some(value.to_string()),
            },
            _ => {}
        }
        None
    }

    fn dispatch(&mut self) -> Option<SseEvent> {
        let name = self.name.take();
        let data = self.data.take()?;
        Some(SseEvent {
            name: name
                .filter(|name| !name.is_empty())
                .unwrap_or_else(|| "message".to_string()),
            data,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(name: &str, data: &str) -> SseEvent {
        SseEvent {
            name: name.to_string(),
            data: data.to_string(),
        }
    }

    #[test]
    fn parses_events_comments_and_multiline_data() {
        let stream = b": keep-alive\n\nevent: block\ndata: {\"height\":1}\n\n\
                       data:first\ndata: second\nid: 7\n\nevent: block\n\n";
        let events = SseParser::default().push(stream);
        assert_eq!(
            events,
            vec![
                event("block", "{\"height\":1}"),
                event("message", "first\nsecond"),
            ]
        );
    }

    #[test]
    fn any_split_of_the_stream_gives_the_same_events() {
        let stream =
            b"event: block\r\ndata: a\r\n\r\nevent: block\rdata: b\r\revent:block\ndata:c\n\n";
        let whole = SseParser::default().push(stream);
        assert_eq!(
            whole,
            vec![
                event("block", "a"),
                event("block", "b"),
                event("block", "c")
            ]
        );
        for split in 0..stream.len() {
            let mut parser = SseParser::default();
            let mut events = parser.push(&stream[..split]);
            events.extend(parser.push(&stream[split..]));
            assert_eq!(events, whole, "split at {split}");
        }
        let mut parser = SseParser::default();
        let byte_by_byte: Vec<SseEvent> = stream
            .iter()
            .flat_map(|byte| parser.push(std::slice::from_ref(byte)))
            .collect();
        assert_eq!(byte_by_byte, whole);
    }

    #[test]
    fn a_line_longer_than_the_cap_is_cut_not_buffered() {
        let mut parser = SseParser::default();
        let chunk = vec![b'x'; 1 << 20];
        assert!(parser.push(b"data: ").is_empty());
        for _ in 0..(LINE_BYTES_MAX >> 20) + 2 {
            assert!(parser.push(&chunk).is_empty());
            assert!(parser.line.len() <= LINE_BYTES_MAX);
        }
        let events = parser.push(b"\n\n");
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].data.len(), LINE_BYTES_MAX - b"data: ".len());
    }

    #[test]
    fn an_unfinished_event_is_not_dispatched() {
        let mut parser = SseParser::default();
        assert!(parser.push(b"event: block\ndata: x\n").is_empty());
        assert_eq!(parser.push(b"\n"), vec![event("block", "x")]);
    }

    /// Regression (found by the issue 12 review of this parser): every line was capped, but the
    /// `data` of one event was not, so a stream of short `data:` lines that never ended its
    /// event made the client buffer without limit.
    #[test]
    fn an_event_with_endless_data_lines_is_capped_not_buffered() {
        let mut parser = SseParser::default();
        let line = format!("data: {}\n", "x".repeat(1 << 16));
        for _ in 0..(EVENT_DATA_BYTES_MAX >> 16) + 64 {
            assert!(parser.push(line.as_bytes()).is_empty());
            assert!(parser.data.as_ref().map_or(0, String::len) <= EVENT_DATA_BYTES_MAX);
        }
        let events = parser.push(b"\n");
        assert_eq!(events.len(), 1);
        assert!(events[0].data.len() <= EVENT_DATA_BYTES_MAX);
    }
}
