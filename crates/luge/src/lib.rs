//! The `luge` package's library: the operator's manifest parser ([`manifest`]), shared by the
//! `luge` binary and the fuzzer (`fuzz/`, target `manifest`). Everything else of the command
//! line lives in the binary.

pub mod manifest;
