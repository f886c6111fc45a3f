//! Registration leaves a function ready to run: its copy-on-write memory image (on Linux a
//! memfd holding the module's data segments) is built when it is registered, not by its first
//! request on a worker. Alone in its test binary, so that no other test registers modules
//! while it counts the process's memory images.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use luge_runtime::{FunctionConfig, Runtime, RuntimeConfig};

const HELLO: &str = include_str!("../../../functions/builtin/hello.wat");

/// The process's open memory images (`memfd:wasm-memory-image` descriptors).
fn memory_images() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter(|target| target.to_string_lossy().contains("wasm-memory-image"))
        .count()
}

#[test]
fn registration_builds_the_memory_image_before_the_first_request() {
    let rt = Runtime::start(RuntimeConfig::default()).unwrap();
    let before = memory_images();
    rt.register(FunctionConfig::new("hello"), HELLO.as_bytes()).unwrap();
    assert_eq!(memory_images(), before + 1, "no image built at registration");
    // The first request uses it: no new image.
    let outcome = rt
        .submit("hello", Vec::new(), Default::default())
        .wait_timeout(std::time::Duration::from_secs(30))
        .unwrap();
    assert!(outcome.result.is_ok(), "{:?}", outcome.result);
    assert_eq!(memory_images(), before + 1);
}
