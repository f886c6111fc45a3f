//! Every seed (`fuzz/corpus/<target>/`) and every regression (`fuzz/regressions/<target>/`)
//! through its target, uninstrumented, in `cargo test`; and one test per finding, named after
//! it, that replays its input.

use std::path::{Path, PathBuf};

fn dir(kind: &str, target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(kind).join(target)
}

/// Runs `target` on every input of the target's corpus and regressions; returns how many.
fn replay(name: &str, target: fn(&[u8])) -> usize {
    let mut count = 0;
    for kind in ["corpus", "regressions"] {
        let dir = dir(kind, name);
        if !dir.exists() {
            continue;
        }
        let files = luge_fuzz::inputs(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        for file in files {
            let data = std::fs::read(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            eprintln!("{}", file.display());
            target(&data);
            count += 1;
        }
    }
    count
}

#[test]
fn proto_corpus_replays() {
    assert!(replay("proto", luge_fuzz::proto::run) > 0, "no seeds");
}

#[test]
fn http_head_corpus_replays() {
    assert!(replay("http_head", luge_fuzz::http_head::run) > 0, "no seeds");
}

#[test]
fn manifest_corpus_replays() {
    assert!(replay("manifest", luge_fuzz::manifest::run) > 0, "no seeds");
}

#[test]
fn upload_corpus_replays() {
    assert!(replay("upload", luge_fuzz::upload::run) > 0, "no seeds");
}

#[test]
fn wasi_corpus_replays() {
    assert!(replay("wasi", luge_fuzz::wasi::run) > 0, "no seeds");
}

/// The seeds reach what they were written for (else the targets could pass by doing nothing).
#[test]
fn seeds_reach_their_code() {
    let seed = |target: &str, name: &str| {
        std::fs::read(dir("corpus", target).join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
    };
    assert_eq!(luge_fuzz::http_head::heads(&seed("http_head", "health")), 3);
    assert_eq!(luge_fuzz::http_head::heads(&seed("http_head", "admin-chain")), 2);
    assert_eq!(luge_fuzz::http_head::heads(&seed("http_head", "hosts")), 4);
    // A response with both optional fields decodes (so the target reads readiness, then the
    // table behind it).
    let both = seed("proto", "response-readiness-stages");
    let Ok(luge_proto::Message::Response(r)) = luge_proto::decode(&both) else {
        panic!("response-readiness-stages does not decode as a response")
    };
    let flags = luge_proto::Flags(luge_proto::Flags::READINESS.0 | luge_proto::Flags::STAGES.0);
    assert!(r.header.flags.contains(flags));
    assert!(r.payload.ends_with(b"ok"));
    use luge_runtime::Failure;
    assert_eq!(luge_fuzz::wasi::outcome(&seed("wasi", "echo")), Ok(b"hello world".to_vec()));
    assert_eq!(luge_fuzz::wasi::outcome(&seed("wasi", "every-call")), Ok(Vec::new()));
    assert_eq!(luge_fuzz::wasi::outcome(&seed("wasi", "exit-status")), Err(Failure::Exit(3)));
    let cap = luge_fuzz::wasi::LIMITS.max_output_bytes;
    assert_eq!(
        luge_fuzz::wasi::outcome(&seed("wasi", "output-cap")),
        Err(Failure::OutputTooLarge { cap })
    );
    assert!(matches!(luge_fuzz::wasi::outcome(&seed("wasi", "trap-store")), Err(Failure::Trap(_))));
}

/// Finding `admin-path-repeated-prefix` (http_head): `/admin/functions//admin/functions/x`
/// named the function `x` — the prefix was trimmed as often as it repeated — so one resource
/// had many admin paths. The name is now exactly what follows one prefix (here an invalid name,
/// refused).
#[test]
fn admin_path_repeated_prefix() {
    let input = std::fs::read(dir("regressions", "http_head").join("admin-path-repeated-prefix"));
    let input = input.unwrap_or_else(|e| panic!("admin-path-repeated-prefix: {e}"));
    assert_eq!(luge_fuzz::http_head::heads(&input), 2);
}
