//! What the front-end tests share: the WAT functions they register.

#![allow(dead_code)] // each test file uses a part

pub const NOOP: &str = include_str!("../../../../functions/builtin/noop.wat");
pub const ECHO: &str = include_str!("../../../../functions/builtin/echo.wat");
pub const HELLO: &str = include_str!("../../../../functions/builtin/hello.wat");
pub const FIB: &str = include_str!("../../../../functions/builtin/fib.wat");
pub const SPIN: &str = include_str!("../../../../functions/builtin/spin.wat");
pub const LOOP: &str = include_str!("../../../../functions/test/loop.wat");
pub const OOB: &str = include_str!("../../../../functions/test/oob.wat");
pub const EXIT3: &str = include_str!("../../../../functions/test/exit3.wat");
pub const MEMBOMB: &str = include_str!("../../../../functions/test/membomb.wat");
pub const ARGS: &str = include_str!("../../../../functions/test/args.wat");
