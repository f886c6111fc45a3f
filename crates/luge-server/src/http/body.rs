//! Request bodies under a cap: read through a length limit that fails as soon as the body
//! crosses it, and the bounded drain that lets a client read its 413 instead of a reset.

use super::*;

/// Why a body could not be read.
pub(super) enum BodyError {
    /// It crossed the limit; the rest can still be drained.
    TooLarge(Limited<Incoming>),
    /// It could not be read at all.
    Unreadable(Unreadable),
}

/// A body that could not be read, for a reason other than its size.
pub(super) enum Unreadable {
    /// The client did not finish in time.
    Timeout,
    /// The connection failed or the framing was invalid.
    Read(String),
}

/// Reads a body of at most `cap` bytes, failing as soon as it crosses the cap.
pub(super) async fn read_body(
    body: Incoming,
    cap: u64,
    timeout: Duration,
) -> Result<Vec<u8>, BodyError> {
    let hint = body.size_hint().lower();
    let mut limited = Limited::new(body, usize::try_from(cap).unwrap_or(usize::MAX));
    let read = async {
        let mut buf = Vec::with_capacity(usize::try_from(hint.min(cap)).unwrap_or(0));
        loop {
            match limited.frame().await {
                None => return Ok(buf),
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        buf.extend_from_slice(&data);
                    }
                }
                Some(Err(e)) if e.is::<LengthLimitError>() => return Err(None),
                Some(Err(e)) => return Err(Some(e.to_string())),
            }
        }
    };
    match tokio::time::timeout(timeout, read).await {
        Ok(Ok(buf)) => Ok(buf),
        Ok(Err(None)) => Err(BodyError::TooLarge(limited)),
        Ok(Err(Some(e))) => Err(BodyError::Unreadable(Unreadable::Read(e))),
        Err(_) => Err(BodyError::Unreadable(Unreadable::Timeout)),
    }
}

/// Keeps reading (and discarding) the rest of a refused body for a bounded while, so that the
/// client, still sending, reads the response instead of a connection reset.
pub(super) fn drain(mut body: Limited<Incoming>) {
    tokio::spawn(async move {
        let discard = async {
            for _ in 0..DRAIN_FRAMES {
                match body.frame().await {
                    None => break,
                    Some(Ok(_)) => {}
                    Some(Err(e)) if e.is::<LengthLimitError>() => {}
                    Some(Err(_)) => break,
                }
            }
        };
        let _ = tokio::time::timeout(DRAIN_TIME, discard).await;
    });
}
