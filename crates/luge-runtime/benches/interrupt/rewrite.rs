//! Rewrites a module's code with interruption checks of our own, in place of the epoch checks
//! Cranelift inserts (`Config::epoch_interruption`), to measure what each kind of check costs.
//!
//! Every check sits where Wasmtime puts its epoch checks — at each function's entry and at each
//! loop header — and reads one flag: word 0 of a one-page memory added to the module. Exported
//! as [`FLAG_EXPORT`], the host can set it from another thread (`Memory::data_ptr`); the guest's
//! own code cannot reach it, since its instructions were validated against the memories it had.
//! What a set flag does is the strategy's ([`Checks`]); [`Rewriter::check`] says why each check
//! also stores what it read, and why the export matters to what the checks cost.

use wasm_encoder::reencode::{Error, Reencode};
use wasm_encoder::{BlockType, Instruction, MemArg, MemoryType};
use wasmparser::{Operator, Parser, Payload, TypeRef};

/// The export naming the added flag memory.
pub const FLAG_EXPORT: &str = "__luge_interrupt";

/// What a check does when the flag is set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Checks {
    /// Traps (`unreachable`): the guest ends, as a kill at its budget does. Not resumable.
    Trap,
    /// Calls an added function, as a yield to the host would (a host call clobbers the same
    /// caller-saved registers). Resumable: what preemption needs.
    Call,
    /// `Call` at function entries and at loops that hold other loops, `Trap` at innermost
    /// loops: resumable, but only once an innermost loop has finished.
    Outer,
}

/// What went wrong rewriting: a malformed module, or a construct this rewriter does not handle.
pub type RewriteError = Box<dyn std::error::Error + Send + Sync>;

/// Index spaces the additions extend: the added memory, function and type get the next index.
#[derive(Debug, Default)]
struct Counts {
    memories: u32,
    functions: u32,
    types: u32,
}

struct Rewriter {
    checks: Checks,
    /// Whether the flag's memory is exported as [`FLAG_EXPORT`].
    exported: bool,
    /// Index of the added memory holding the flag.
    flag_memory: u32,
    /// Index of the added function a `Call` check calls: its body is `unreachable`, so a set
    /// flag ends the run there too, and the timed runs never take it.
    callee: u32,
}

impl Rewriter {
    /// One check: `if (flag) { unreachable | call }`, with what it read stored to word 1.
    ///
    /// The store is what makes the flag read again at every check. Cranelift's alias analysis
    /// forwards a load across a loop that stores nothing to the load's alias region, so in a
    /// loop without stores a plain load would read the flag once; a call on the path clobbers
    /// that knowledge, a trap does not. An atomic load would do without the store, but needs the
    /// threads proposal, which Luge's build of Wasmtime leaves out. Wasmtime 48 gives a memory
    /// that is not exported a region of its own, and every exported memory one shared region:
    /// with the flag's memory exported (as the host needs, to find it), the store also makes
    /// Cranelift reload the guest's own loads of its (exported) memory around every check.
    fn check(&self, f: &mut wasm_encoder::Function, resumable: bool) {
        let word = |offset| MemArg { offset, align: 2, memory_index: self.flag_memory };
        // word 1 = word 0; if (word 1): Cranelift forwards the stored value to the second load.
        f.instruction(&Instruction::I32Const(0));
        f.instruction(&Instruction::I32Const(0));
        f.instruction(&Instruction::I32Load(word(0)));
        f.instruction(&Instruction::I32Store(word(4)));
        f.instruction(&Instruction::I32Const(0));
        f.instruction(&Instruction::I32Load(word(4)));
        f.instruction(&Instruction::If(BlockType::Empty));
        if resumable {
            f.instruction(&Instruction::Call(self.callee));
        } else {
            f.instruction(&Instruction::Unreachable);
        }
        f.instruction(&Instruction::End);
    }

    /// For each loop of `body`, in order, whether another loop is nested in it.
    fn outer_loops(body: &wasmparser::FunctionBody<'_>) -> Result<Vec<bool>, RewriteError> {
        let (mut outer, mut open) = (Vec::new(), Vec::<Option<usize>>::new());
        let mut reader = body.get_operators_reader()?;
        while !reader.eof() {
            match reader.read()? {
                Operator::Loop { .. } => {
                    for &l in open.iter().flatten() {
                        outer[l] = true;
                    }
                    open.push(Some(outer.len()));
                    outer.push(false);
                }
                Operator::Block { .. } | Operator::If { .. } | Operator::TryTable { .. } => {
                    open.push(None)
                }
                Operator::Try { .. } => return Err("legacy exception handling".into()),
                Operator::End => {
                    open.pop();
                }
                _ => {}
            }
        }
        Ok(outer)
    }
}

impl Reencode for Rewriter {
    type Error = RewriteError;

    fn parse_function_body(
        &mut self,
        code: &mut wasm_encoder::CodeSection,
        body: wasmparser::FunctionBody<'_>,
    ) -> Result<(), Error<RewriteError>> {
        let outer = Self::outer_loops(&body).map_err(Error::UserError)?;
        let mut f = self.new_function_with_parsed_locals(&body)?;
        self.check(&mut f, self.checks != Checks::Trap);
        let (mut reader, mut loops) = (body.get_operators_reader()?, 0);
        while !reader.eof() {
            let op = reader.read()?;
            let is_loop = matches!(op, Operator::Loop { .. });
            f.instruction(&self.instruction(op)?);
            if is_loop {
                let resumable = match self.checks {
                    Checks::Trap => false,
                    Checks::Call => true,
                    Checks::Outer => outer[loops],
                };
                self.check(&mut f, resumable);
                loops += 1;
            }
        }
        code.function(&f);
        Ok(())
    }
}

fn counts(wasm: &[u8]) -> Result<Counts, RewriteError> {
    let mut n = Counts::default();
    for payload in Parser::new(0).parse_all(wasm) {
        match payload? {
            Payload::ImportSection(s) => {
                for import in s.into_imports() {
                    match import?.ty {
                        TypeRef::Func(_) => n.functions += 1,
                        TypeRef::Memory(_) => n.memories += 1,
                        _ => {}
                    }
                }
            }
            Payload::TypeSection(s) => n.types += s.count(),
            Payload::FunctionSection(s) => n.functions += s.count(),
            Payload::MemorySection(s) => n.memories += s.count(),
            _ => {}
        }
    }
    Ok(n)
}

/// `wasm` with `checks` at every function entry and loop header, the flag memory (`exported` as
/// [`FLAG_EXPORT`], or not) and the callee added. The module must define its types, functions,
/// memories and exports in sections of its own (C programs built with wasi-libc do); it must not
/// use legacy exceptions.
pub fn instrument(wasm: &[u8], checks: Checks, exported: bool) -> Result<Vec<u8>, RewriteError> {
    let n = counts(wasm)?;
    let mut rw = Rewriter { checks, exported, flag_memory: n.memories, callee: n.functions };
    let mut module = wasm_encoder::Module::new();
    let mut code: Option<wasm_encoder::CodeSection> = None;
    let mut added = [false; 4]; // type, function, memory, export
    let e = |e: Error<RewriteError>| -> RewriteError { e.to_string().into() };
    for payload in Parser::new(0).parse_all(wasm) {
        let payload = payload?;
        if let Some(c) = code.as_mut() {
            if let Payload::CodeSectionEntry(body) = payload {
                rw.parse_function_body(c, body).map_err(e)?;
                continue;
            }
            let mut callee = wasm_encoder::Function::new([]);
            callee.instruction(&Instruction::Unreachable).instruction(&Instruction::End);
            c.function(&callee);
            module.section(c);
            code = None;
        }
        match payload {
            Payload::Version { .. } | Payload::End(_) => {}
            Payload::TypeSection(s) => {
                let mut t = wasm_encoder::TypeSection::new();
                rw.parse_type_section(&mut t, s).map_err(e)?;
                t.ty().function([], []);
                module.section(&t);
                added[0] = true;
            }
            Payload::FunctionSection(s) => {
                let mut t = wasm_encoder::FunctionSection::new();
                rw.parse_function_section(&mut t, s).map_err(e)?;
                t.function(n.types);
                module.section(&t);
                added[1] = true;
            }
            Payload::MemorySection(s) => {
                let mut t = wasm_encoder::MemorySection::new();
                rw.parse_memory_section(&mut t, s).map_err(e)?;
                t.memory(MemoryType {
                    minimum: 1,
                    maximum: Some(1),
                    memory64: false,
                    shared: false,
                    page_size_log2: None,
                });
                module.section(&t);
                added[2] = true;
            }
            Payload::ExportSection(s) => {
                let mut t = wasm_encoder::ExportSection::new();
                rw.parse_export_section(&mut t, s).map_err(e)?;
                if rw.exported {
                    t.export(FLAG_EXPORT, wasm_encoder::ExportKind::Memory, rw.flag_memory);
                }
                module.section(&t);
                added[3] = true;
            }
            Payload::CodeSectionStart { .. } => code = Some(wasm_encoder::CodeSection::new()),
            other => match other.as_section() {
                Some((id, range)) => {
                    let data = wasm.get(range).ok_or("a section past the module's end")?;
                    module.section(&wasm_encoder::RawSection { id, data });
                }
                None => return Err(format!("unexpected payload {other:?}").into()),
            },
        }
    }
    if added.contains(&false) {
        return Err("the module lacks a type, function, memory or export section".into());
    }
    Ok(module.finish())
}
