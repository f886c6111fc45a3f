//! AFL++ harness of the `wasi` target ([`luge_fuzz::wasi::run`]). Built by `cargo afl build`
//! (`--cfg fuzzing`) it is the persistent-mode fuzz loop; built plainly it replays the files
//! and directories named on its command line through the same function (to reproduce a finding).

#[cfg(fuzzing)]
fn main() {
    afl::fuzz!(|data: &[u8]| luge_fuzz::wasi::run(data));
}

#[cfg(not(fuzzing))]
fn main() -> std::process::ExitCode {
    luge_fuzz::replay_main(luge_fuzz::wasi::run)
}
