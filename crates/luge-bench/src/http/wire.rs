//! HTTP/1.1 on the wire for the load generator: a request written into a reused buffer, and a
//! response framed and read for what the load generator records (pure, no I/O).
//!
//! Requests are always `POST` with a `content-length` body, so a server never has to guess
//! their end. Responses are framed as RFC 9112 §6.3 says: no body for 1xx (skipped), 204 and
//! 304; else, with a `transfer-encoding`, chunks (parsed with `httparse`, trailers skipped) when
//! its last coding is `chunked`, else the body runs to the end of the connection (and a
//! `content-length` beside it is ignored, the connection closed after); else
//! `content-length` (digits only, all copies equal); else the body runs to the end of the
//! connection. Status line and headers are parsed by `httparse`, the parser hyper itself uses.

use std::io::Write;

use luge_proto::{
    DEADLINE_HEADER, EXECUTION_HEADER, EXPECTED_HEADER, OUTCOME_HEADER, QUEUEING_HEADER,
    READINESS_HEADER,
};

use crate::calibrate::Reply;
use crate::sample::ErrorKind;

/// The most header lines a response may have.
const MAX_HEADERS: usize = 64;

/// Whether `path` can stand in a request line as it is: an absolute path of visible ASCII
/// (no space, control character or `#`), so that a route cannot split or add to the request.
pub(super) fn valid_path(path: &str) -> bool {
    path.starts_with('/') && path.bytes().all(|b| b.is_ascii_graphic() && b != b'#')
}

/// Writes a whole request into `out` (cleared first); `path` must be [`valid_path`].
pub(super) fn encode_request(
    out: &mut Vec<u8>,
    path: &str,
    host: &str,
    deadline_us: u32,
    expected_us: Option<u32>,
    payload: &[u8],
) {
    out.clear();
    // Writing into a Vec cannot fail.
    let _ =
        write!(out, "POST {path} HTTP/1.1\r\nhost: {host}\r\n{DEADLINE_HEADER}: {deadline_us}\r\n");
    if let Some(e) = expected_us {
        let _ = write!(out, "{EXPECTED_HEADER}: {e}\r\n");
    }
    let _ = write!(out, "content-length: {}\r\n\r\n", payload.len());
    out.extend_from_slice(payload);
}

/// What the bytes received so far on a connection hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Parsed {
    /// Not a whole response yet.
    Partial,
    /// A whole response of `len` bytes from the start of the buffer; `close` when the
    /// connection cannot carry another (the server said so, or the body ran to its end).
    Complete { len: usize, reply: Reply, close: bool },
    /// Not HTTP/1.x, or a framing error: the connection is unusable.
    Invalid,
}

/// Frames the response at the start of `buf`; `eof` when the server closed its side, so no
/// more bytes will come.
pub(super) fn parse_response(buf: &[u8], eof: bool) -> Parsed {
    let partial = if eof { Parsed::Invalid } else { Parsed::Partial };
    let mut start = 0;
    loop {
        let Some(rest) = buf.get(start..) else { return Parsed::Invalid };
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut resp = httparse::Response::new(&mut headers);
        let head = match resp.parse(rest) {
            Ok(httparse::Status::Complete(n)) => n,
            Ok(httparse::Status::Partial) => return partial,
            Err(_) => return Parsed::Invalid,
        };
        let status = resp.code.unwrap_or(0);
        if (100..200).contains(&status) {
            // An interim response (100 Continue, 103 Early Hints): the final one follows.
            start += head;
            continue;
        }
        let framing = match Framing::of(resp.version, resp.headers) {
            Some(f) => f,
            None => return Parsed::Invalid,
        };
        let body = start + head;
        let (end, close) = if status == 204 || status == 304 {
            (body, framing.close)
        } else if framing.chunked {
            match chunked_end(buf, body) {
                Ok(Some(end)) => (end, framing.close),
                Ok(None) => return partial,
                Err(()) => return Parsed::Invalid,
            }
        } else if framing.encoded {
            // Encoded but not chunked: the body runs to the close (a length is ignored).
            if !eof {
                return Parsed::Partial;
            }
            (buf.len(), true)
        } else if let Some(n) = framing.length {
            let Some(end) = body.checked_add(n) else { return Parsed::Invalid };
            if buf.len() < end {
                return partial;
            }
            (end, framing.close)
        } else if eof {
            (buf.len(), true)
        } else {
            return Parsed::Partial;
        };
        return Parsed::Complete { len: end, reply: reply_of(status, resp.headers), close };
    }
}

/// How a response's end is found, from its version and headers.
struct Framing {
    length: Option<usize>,
    /// A `transfer-encoding` was given…
    encoded: bool,
    /// …and its last coding is `chunked`.
    chunked: bool,
    close: bool,
}

impl Framing {
    /// `None` for a malformed or conflicting `content-length`.
    fn of(version: Option<u8>, headers: &[httparse::Header<'_>]) -> Option<Self> {
        // HTTP/1.0 closes unless told otherwise.
        let mut f =
            Self { length: None, encoded: false, chunked: false, close: version == Some(0) };
        for h in headers {
            let value = std::str::from_utf8(h.value).ok().map(str::trim);
            if h.name.eq_ignore_ascii_case("content-length") {
                let v = value?;
                if v.is_empty() || !v.bytes().all(|b| b.is_ascii_digit()) {
                    return None;
                }
                let n = v.parse::<usize>().ok()?;
                if f.length.is_some_and(|l| l != n) {
                    return None;
                }
                f.length = Some(n);
            } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
                // The last coding must be chunked for the message to be framed by chunks.
                let last = value?.rsplit(',').next().map(str::trim);
                f.encoded = true;
                f.chunked = last.is_some_and(|c| c.eq_ignore_ascii_case("chunked"));
            } else if h.name.eq_ignore_ascii_case("connection") {
                for token in value.unwrap_or("").split(',').map(str::trim) {
                    if token.eq_ignore_ascii_case("close") {
                        f.close = true;
                    } else if token.eq_ignore_ascii_case("keep-alive") && version == Some(0) {
                        f.close = false;
                    }
                }
            }
        }
        // With both, the encoding frames the message and the connection is not reused
        // (RFC 9112 §6.3, item 3).
        if f.encoded && f.length.is_some() {
            f.close = true;
        }
        Some(f)
    }
}

/// The end of a chunked body starting at `pos`: `Ok(None)` until the last chunk and the
/// trailers' empty line are in.
fn chunked_end(buf: &[u8], mut pos: usize) -> Result<Option<usize>, ()> {
    loop {
        let rest = buf.get(pos..).ok_or(())?;
        match httparse::parse_chunk_size(rest) {
            Ok(httparse::Status::Complete((read, 0))) => {
                pos += read;
                // Trailer lines, then an empty line.
                loop {
                    let rest = buf.get(pos..).ok_or(())?;
                    let Some(eol) = rest.windows(2).position(|w| w == b"\r\n") else {
                        return Ok(None);
                    };
                    pos += eol + 2;
                    if eol == 0 {
                        return Ok(Some(pos));
                    }
                }
            }
            Ok(httparse::Status::Complete((read, size))) => {
                let size = usize::try_from(size).map_err(|_| ())?;
                let data = pos.checked_add(read).ok_or(())?;
                let end = data.checked_add(size).ok_or(())?;
                let after = end.checked_add(2).ok_or(())?;
                match buf.get(end..after) {
                    None => return Ok(None),
                    Some(b"\r\n") => pos = after,
                    Some(_) => return Err(()),
                }
            }
            Ok(httparse::Status::Partial) => return Ok(None),
            Err(_) => return Err(()),
        }
    }
}

/// The reply a response carries: its status (named by `luge-outcome` when not 200) and the
/// node's timings.
fn reply_of(status: u16, headers: &[httparse::Header<'_>]) -> Reply {
    let text = |name: &str| {
        headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case(name))
            .and_then(|h| std::str::from_utf8(h.value).ok())
    };
    let number = |name: &str| text(name).and_then(|s| s.trim().parse::<u64>().ok());
    Reply {
        error: (status != 200).then(|| ErrorKind::from_http(status, text(OUTCOME_HEADER))),
        execution_ns: number(EXECUTION_HEADER),
        queueing_ns: number(QUEUEING_HEADER),
        readiness_ns: number(READINESS_HEADER),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use luge_proto::Status;

    fn complete(buf: &[u8], eof: bool) -> (usize, Reply, bool) {
        match parse_response(buf, eof) {
            Parsed::Complete { len, reply, close } => (len, reply, close),
            other => panic!("{other:?} for {:?}", String::from_utf8_lossy(buf)),
        }
    }

    #[test]
    fn a_request_is_a_post_with_its_deadline_and_length() {
        let mut out = b"stale".to_vec();
        encode_request(&mut out, "/spin", "127.0.0.1:8080", 1500, Some(7), b"42");
        let text = String::from_utf8(out).unwrap_or_default();
        assert_eq!(
            text,
            "POST /spin HTTP/1.1\r\nhost: 127.0.0.1:8080\r\nluge-deadline-us: 1500\r\n\
             luge-expected-us: 7\r\ncontent-length: 2\r\n\r\n42"
        );
        let mut out = Vec::new();
        encode_request(&mut out, "/", "h", 1, None, b"");
        assert!(!String::from_utf8_lossy(&out).contains(EXPECTED_HEADER));
    }

    #[test]
    fn content_length_frames_a_response_and_its_headers_are_read() {
        let r = b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nLuge-Execution-Ns: 1200\r\n\
                  luge-queueing-ns: 30\r\nluge-readiness-ns: 9\r\n\r\nabcHTTP/1.1";
        let whole = r.len() - "HTTP/1.1".len();
        for cut in 0..whole {
            assert_eq!(parse_response(&r[..cut], false), Parsed::Partial, "cut at {cut}");
            assert_eq!(parse_response(&r[..cut], true), Parsed::Invalid, "cut at {cut}");
        }
        let (len, reply, close) = complete(r, false);
        assert_eq!((len, close), (whole, false));
        assert_eq!(
            reply,
            Reply {
                error: None,
                execution_ns: Some(1200),
                queueing_ns: Some(30),
                readiness_ns: Some(9)
            }
        );
    }

    #[test]
    fn refusals_are_named_by_their_outcome() {
        let r = b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\n\
                  luge-outcome: deadline_unreachable\r\n\r\n";
        assert_eq!(complete(r, false).1.error, Some(ErrorKind::DeadlineUnreachable));
        let r = b"HTTP/1.1 503 x\r\ncontent-length: 0\r\nluge-outcome: overloaded\r\n\r\n";
        assert_eq!(complete(r, false).1.error, Some(ErrorKind::Status(Status::Overloaded)));
        let r = b"HTTP/1.1 418 x\r\ncontent-length: 0\r\n\r\n";
        assert_eq!(complete(r, false).1.error, Some(ErrorKind::Http(418)));
    }

    #[test]
    fn chunked_bodies_and_trailers_are_framed() {
        let r = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n\
                  3\r\nabc\r\n10;ext=1\r\n0123456789abcdef\r\n0\r\ntrailer: x\r\n\r\n";
        for cut in 0..r.len() {
            assert_eq!(parse_response(&r[..cut], false), Parsed::Partial, "cut at {cut}");
        }
        assert_eq!(complete(r, false).0, r.len());
        let bad = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabcXY0\r\n\r\n";
        assert_eq!(parse_response(bad, false), Parsed::Invalid);
        let bad = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n";
        assert_eq!(parse_response(bad, false), Parsed::Invalid);
    }

    #[test]
    fn a_body_without_length_runs_to_the_close() {
        let r = b"HTTP/1.1 200 OK\r\n\r\nall of it";
        assert_eq!(parse_response(r, false), Parsed::Partial);
        assert_eq!(complete(r, true), (r.len(), Reply::default(), true));
        // No body at all for 204 and 304, whatever follows.
        let r = b"HTTP/1.1 204 No Content\r\n\r\n";
        assert_eq!(complete(r, false).0, r.len());
    }

    #[test]
    fn interim_responses_are_skipped() {
        let r = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 1\r\n\r\nx";
        assert_eq!(complete(r, false).0, r.len());
        assert_eq!(parse_response(&r[..30], false), Parsed::Partial);
    }

    #[test]
    fn connection_close_and_http_1_0_end_the_connection() {
        let r = b"HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 0\r\n\r\n";
        assert!(complete(r, false).2);
        let r = b"HTTP/1.0 200 OK\r\ncontent-length: 0\r\n\r\n";
        assert!(complete(r, false).2);
        let r = b"HTTP/1.0 200 OK\r\nconnection: keep-alive\r\ncontent-length: 0\r\n\r\n";
        assert!(!complete(r, false).2);
    }

    #[test]
    fn an_encoding_other_than_chunked_runs_to_the_close_and_beats_a_length() {
        let r = b"HTTP/1.1 200 OK\r\ntransfer-encoding: gzip\r\ncontent-length: 1\r\n\r\nxyz";
        assert_eq!(parse_response(r, false), Parsed::Partial);
        assert_eq!(complete(r, true), (r.len(), Reply::default(), true));
        // Chunked with a length: the chunks frame it, and the connection is not reused.
        let r = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\ncontent-length: 99\r\n\r\n\
                  1\r\nx\r\n0\r\n\r\n";
        assert_eq!(complete(r, false), (r.len(), Reply::default(), true));
    }

    #[test]
    fn paths_that_would_split_a_request_line_are_not_valid() {
        assert!(valid_path("/spin") && valid_path("/fn/a-b_c.d?x=1"));
        for bad in ["spin", "/a b", "/a\r\nx: y", "/a#b", "/é", ""] {
            assert!(!valid_path(bad), "{bad:?}");
        }
    }

    #[test]
    fn garbage_and_conflicting_lengths_are_invalid() {
        assert_eq!(parse_response(b"SSH-2.0-OpenSSH\r\n\r\n", false), Parsed::Invalid);
        let r = b"HTTP/1.1 200 OK\r\ncontent-length: 1\r\ncontent-length: 2\r\n\r\nxx";
        assert_eq!(parse_response(r, false), Parsed::Invalid);
        for length in ["-1", "+1", " ", "1 2", "0x1"] {
            let r = format!("HTTP/1.1 200 OK\r\ncontent-length: {length}\r\n\r\nx");
            assert_eq!(parse_response(r.as_bytes(), false), Parsed::Invalid, "{length:?}");
        }
        // A chunk size at the top of the range does not overflow the framing.
        let r = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nffffffffffffffff\r\n";
        assert_ne!(
            parse_response(r, false),
            Parsed::Complete { len: r.len(), reply: Reply::default(), close: false }
        );
        let r = b"HTTP/1.1 200 OK\r\ncontent-length: 99999999999999999999999\r\n\r\n";
        assert_eq!(parse_response(r, false), Parsed::Invalid);
    }
}
