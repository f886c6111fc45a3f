//! The request fields both front ends carry — the relative deadline and the expected
//! execution, in µs (UDP-RPC's Request header, `docs/protocol.md` §1.2; HTTP's
//! `Luge-Deadline-Us` / `Luge-Expected-Us`, `docs/http.md` §3) — and the one check of their
//! values, so that the two protocols give every value the same meaning and refuse the same ones.
//!
//! | value | deadline | expected execution |
//! |---|---|---|
//! | `0` | not given: the function's default relative deadline | not given: no estimate |
//! | 1 … [`MAX_FIELD_US`] | this many µs | this many µs |
//! | above | refused ([`FieldError`]; RPC `BadRequest`, HTTP 400) | refused |
//!
//! `0` cannot mean a zero deadline: UDP-RPC has no other way to say "not given", and a
//! deadline of zero could never be met anyway.

use std::time::Duration;

use thiserror::Error;

/// Largest accepted value of a µs field: one hour.
pub const MAX_FIELD_US: u64 = 3_600_000_000;

/// A µs field of a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Field {
    /// The relative deadline.
    Deadline,
    /// The client's expected execution.
    Expected,
}

impl Field {
    /// How messages name the field.
    pub fn name(self) -> &'static str {
        match self {
            Field::Deadline => "deadline",
            Field::Expected => "expected execution",
        }
    }
}

/// Why a field's value is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Error)]
pub enum FieldError {
    /// Above [`MAX_FIELD_US`].
    #[error("{} of {us} µs exceeds the maximum of {MAX_FIELD_US} µs", field.name())]
    TooLarge {
        /// The field.
        field: Field,
        /// Its value.
        us: u64,
    },
}

impl FieldError {
    /// A stable snake-case name for metric labels.
    pub fn label(&self) -> &'static str {
        "bad_field"
    }
}

/// Checks one µs field: `Ok(None)` for `0` (not given), `Ok(Some(_))` for 1 … [`MAX_FIELD_US`].
pub fn validate_us(field: Field, us: u64) -> Result<Option<Duration>, FieldError> {
    match us {
        0 => Ok(None),
        1..=MAX_FIELD_US => Ok(Some(Duration::from_micros(us))),
        _ => Err(FieldError::TooLarge { field, us }),
    }
}

/// [`validate_us`] for the deadline: `None` means the function's default.
pub fn validate_deadline(us: u64) -> Result<Option<Duration>, FieldError> {
    validate_us(Field::Deadline, us)
}

/// [`validate_us`] for the expected execution: `None` means no estimate.
pub fn validate_expected(us: u64) -> Result<Option<Duration>, FieldError> {
    validate_us(Field::Expected, us)
}

/// A request's fields, checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct RequestFields {
    /// Relative deadline; `None`: the function's default.
    pub deadline: Option<Duration>,
    /// Expected execution; `None`: no estimate.
    pub expected: Option<Duration>,
}

impl RequestFields {
    /// Checks both fields (the deadline first).
    pub fn from_us(deadline_us: u64, expected_us: u64) -> Result<Self, FieldError> {
        Ok(Self {
            deadline: validate_deadline(deadline_us)?,
            expected: validate_expected(expected_us)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_is_not_given_and_one_hour_is_the_maximum() {
        let us = Duration::from_micros;
        assert_eq!(validate_deadline(0), Ok(None));
        assert_eq!(validate_deadline(1), Ok(Some(us(1))));
        assert_eq!(validate_deadline(MAX_FIELD_US), Ok(Some(us(MAX_FIELD_US))));
        let over = MAX_FIELD_US + 1;
        assert_eq!(
            validate_deadline(over),
            Err(FieldError::TooLarge { field: Field::Deadline, us: over })
        );
        assert_eq!(validate_expected(0), Ok(None));
        assert!(validate_expected(u64::from(u32::MAX)).is_err());
        assert_eq!(
            RequestFields::from_us(0, 5),
            Ok(RequestFields { deadline: None, expected: Some(us(5)) })
        );
        let err = RequestFields::from_us(1, u64::MAX).err().map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some(
                "expected execution of 18446744073709551615 µs exceeds the maximum of 3600000000 µs"
            )
        );
    }
}
