//! The bare baseline: a plain sync instantiate + call with a minimal WASI (`fd_read` and
//! `fd_write` on stdin and stdout, `proc_exit`), nothing of Luge's. Shared by the runtime bench
//! and the interruption bench (`benches/interrupt`), which include it by path.

#![allow(dead_code)] // each bench uses a part

use std::time::{Duration, Instant};

use wasmtime::{Caller, Engine, Instance, InstancePre, Linker, Memory, Store, TypedFunc};

#[derive(Default)]
pub struct State {
    stdin: Vec<u8>,
    pos: usize,
    stdout: Vec<u8>,
    memory: Option<Memory>,
}

#[derive(Debug, thiserror::Error)]
#[error("exit {0}")]
struct Exit(i32);

fn iov(mem: &[u8], at: usize) -> Option<(usize, usize)> {
    let b = mem.get(at..at + 8)?;
    let ptr = u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize;
    let len = u32::from_le_bytes([b[4], b[5], b[6], b[7]]) as usize;
    Some((ptr, len))
}

/// `fd_read` / `fd_write`: `each` moves the bytes of one iovec `(ptr, len)` between memory
/// and the state and says how many, `None` for a bad pointer; the total is stored at `out`.
fn fd_rw(
    mut c: Caller<'_, State>,
    iovs: i32,
    n: i32,
    out: i32,
    each: impl Fn(&mut [u8], &mut State, usize, usize) -> Option<usize>,
) -> i32 {
    let Some(memory) = c.data().memory else { return 21 };
    let (mem, s) = memory.data_and_store_mut(&mut c);
    let mut total = 0;
    for i in 0..n as usize {
        let Some((ptr, len)) = iov(mem, iovs as usize + 8 * i) else { return 21 };
        let Some(moved) = each(mem, s, ptr, len) else { return 21 };
        total += moved;
    }
    let Some(dst) = mem.get_mut(out as usize..out as usize + 4) else { return 21 };
    dst.copy_from_slice(&(total as u32).to_le_bytes());
    0
}

/// `fd_read` / `fd_write` on stdin / stdout only, one iovec at a time, bounds-checked by
/// slicing; nothing else.
pub fn linker(engine: &Engine) -> Linker<State> {
    let mut linker = Linker::new(engine);
    let m = "wasi_snapshot_preview1";
    linker
        .func_wrap(m, "fd_read", |c: Caller<'_, State>, _fd: i32, iovs: i32, n: i32, out: i32| {
            fd_rw(c, iovs, n, out, |mem, s, ptr, len| {
                let take = len.min(s.stdin.len() - s.pos);
                mem.get_mut(ptr..ptr + take)?.copy_from_slice(&s.stdin[s.pos..s.pos + take]);
                s.pos += take;
                Some(take)
            })
        })
        .unwrap();
    linker
        .func_wrap(m, "fd_write", |c: Caller<'_, State>, _fd: i32, iovs: i32, n: i32, out: i32| {
            fd_rw(c, iovs, n, out, |mem, s, ptr, len| {
                s.stdout.extend_from_slice(mem.get(ptr..ptr + len)?);
                Some(len)
            })
        })
        .unwrap();
    linker
        .func_wrap(m, "proc_exit", |code: i32| -> wasmtime::Result<()> {
            Err(wasmtime::Error::new(Exit(code)))
        })
        .unwrap();
    linker
}

/// A fresh instance of `pre` with `payload` on its stdin, and its `_start`.
fn start(
    pre: &InstancePre<State>,
    payload: Vec<u8>,
) -> wasmtime::Result<(Store<State>, Instance, TypedFunc<(), ()>)> {
    let mut store = Store::new(pre.module().engine(), State { stdin: payload, ..State::default() });
    // Where epoch interruption is on (the runtime bench's engine, whose ticker bumps it), a
    // deadline far away lets the bare call run without any epoch callback.
    store.set_epoch_deadline(1 << 40);
    let instance = pre.instantiate(&mut store)?;
    store.data_mut().memory = instance.get_memory(&mut store, "memory");
    let start = instance.get_typed_func::<(), ()>(&mut store, "_start")?;
    Ok((store, instance, start))
}

pub fn run(pre: &InstancePre<State>, payload: Vec<u8>) -> Vec<u8> {
    let (mut store, _, start) = start(pre, payload).unwrap();
    start.call(&mut store, ()).unwrap();
    store.into_data().stdout
}

/// Runs `_start` on a fresh instance and times the call alone, not the instantiation; `armed`
/// sees the store and the instance just before. A `proc_exit(0)` is a normal end.
pub fn timed(
    pre: &InstancePre<State>,
    payload: Vec<u8>,
    armed: impl FnOnce(&mut Store<State>, &Instance),
) -> wasmtime::Result<(Vec<u8>, Duration)> {
    let (mut store, instance, start) = start(pre, payload)?;
    armed(&mut store, &instance);
    let began = Instant::now();
    let ended = start.call(&mut store, ());
    let took = began.elapsed();
    match ended {
        Err(e) if !matches!(e.downcast_ref::<Exit>(), Some(Exit(0))) => Err(e),
        _ => Ok((store.into_data().stdout, took)),
    }
}
