//! The one module of the native tier that uses `unsafe`: the context that
//! compiled code shares with the host, the `extern "C"` helpers compiled
//! code calls (AD stacks, arrays, shadows, traps, math), entering compiled
//! code, and giving its memory back.
//!
//! Compiled code is made only from functions that passed the verifier
//! (`Program::stamp` is `Some` only for verified functions), so it reads and
//! writes only its own registers (Cranelift variables: verifier check 2
//! proves every register operand `< nregs`, and the translation declares
//! `nregs` variables), indexes side tables the verifier checked (check 3),
//! calls callees whose signatures match its call sites (check 4) and
//! returns what its callers expect (check 5). Everything that touches
//! memory outside its own frame goes through the helpers here, which call
//! the VM's safe `native_*` methods.
#![allow(unsafe_code)]

use std::sync::atomic::AtomicBool;
use vm::{TrapKind, Vm};

/// What compiled code and the host share during one call from the host.
/// Compiled code reads and writes the fields before `vm` at the offsets
/// below (`repr(C)`); the rest is the host's.
#[repr(C)]
pub(crate) struct Ctx {
    /// Nonzero once something trapped: every frame returns at once.
    pub trapped: u64,
    /// Instructions executed (handed from frame to frame at calls and
    /// returns; written by the frame that traps).
    pub steps: u64,
    /// Active frames, the entry function's included.
    pub depth: u64,
    /// `Limits::max_call_depth`.
    pub max_depth: u64,
    /// `Limits::fuel`, or `u64::MAX`.
    pub fuel: u64,
    /// The VM's interrupt flag (an `AtomicBool`, read as a byte).
    pub interrupt: *const AtomicBool,
    /// The `pc` of the last `ret` or `ret.n` executed.
    pub ret_pc: u64,
    /// The VM's comms stack, which compiled code pushes to and pops from
    /// in place while it has room: its buffer, length and capacity, read
    /// from the stack on entry and after every helper that may change it
    /// ([`sync_in`]), the length written back before such a helper and on
    /// exit ([`sync_out`]).
    pub comms_ptr: *mut u64,
    pub comms_len: u64,
    pub comms_cap: u64,
    /// The VM's block stack, likewise.
    pub blk_ptr: *mut u32,
    pub blk_len: u64,
    pub blk_cap: u64,
    /// The live arrays' views ([`ArrView`], indexed by handle - 1) and
    /// their number: `views`' buffer and length, set on entry and after
    /// every `anew` ([`sync_arrays`]). Compiled code reads and writes an
    /// element in place when the handle and index are within these
    /// bounds, and calls the helper (which traps as the interpreter does)
    /// otherwise.
    pub arr_tab: *const ArrView,
    pub arr_n: u64,
    /// The lowest stack pointer at which compiled code calls a function
    /// of a recursive call graph on the stack it runs on; below it, the
    /// call runs on the next of the tier's stack segments ([`Stacks`],
    /// [`h_call_grown`]).
    pub stack_limit: u64,
    vm: *mut Vm,
    /// The tier's stack segments (host-only; reached by [`h_call_grown`]).
    stacks: *mut Stacks,
    /// The views themselves (host-only; kept with the context between
    /// calls, so that a warm call allocates nothing).
    views: Vec<ArrView>,
    /// [`Vm::native_array_moves`] when `views` was last filled.
    moves: u64,
    /// The trap: where (`site`, see [`site`]) and what.
    pub pending: Option<(u64, TrapKind)>,
    /// The sites of the calls a trap unwound through, innermost first
    /// (host-only; filled on the trap path alone).
    pub callers: Vec<u64>,
}

pub(crate) const OFF_TRAPPED: i32 = std::mem::offset_of!(Ctx, trapped) as i32;
pub(crate) const OFF_STEPS: i32 = std::mem::offset_of!(Ctx, steps) as i32;
pub(crate) const OFF_DEPTH: i32 = std::mem::offset_of!(Ctx, depth) as i32;
pub(crate) const OFF_MAX_DEPTH: i32 = std::mem::offset_of!(Ctx, max_depth) as i32;
pub(crate) const OFF_FUEL: i32 = std::mem::offset_of!(Ctx, fuel) as i32;
pub(crate) const OFF_INTERRUPT: i32 = std::mem::offset_of!(Ctx, interrupt) as i32;
pub(crate) const OFF_RET_PC: i32 = std::mem::offset_of!(Ctx, ret_pc) as i32;
pub(crate) const OFF_COMMS_PTR: i32 = std::mem::offset_of!(Ctx, comms_ptr) as i32;
pub(crate) const OFF_COMMS_LEN: i32 = std::mem::offset_of!(Ctx, comms_len) as i32;
pub(crate) const OFF_COMMS_CAP: i32 = std::mem::offset_of!(Ctx, comms_cap) as i32;
pub(crate) const OFF_BLK_PTR: i32 = std::mem::offset_of!(Ctx, blk_ptr) as i32;
pub(crate) const OFF_BLK_LEN: i32 = std::mem::offset_of!(Ctx, blk_len) as i32;
pub(crate) const OFF_BLK_CAP: i32 = std::mem::offset_of!(Ctx, blk_cap) as i32;
pub(crate) const OFF_ARR_TAB: i32 = std::mem::offset_of!(Ctx, arr_tab) as i32;
pub(crate) const OFF_ARR_N: i32 = std::mem::offset_of!(Ctx, arr_n) as i32;
pub(crate) const OFF_STACK_LIMIT: i32 = std::mem::offset_of!(Ctx, stack_limit) as i32;

/// Where one live array's elements and shadow are (`repr(C)`: compiled
/// code reads the fields at the offsets below). Addresses are kept as
/// integers so that the tier stays `Send`; compiled code only
/// dereferences them below the lengths beside them.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct ArrView {
    pub data: u64,
    pub len: u64,
    /// 0 and 0 outside AD mode (no shadows).
    pub shadow: u64,
    pub shadow_len: u64,
}

pub(crate) const AV_SHIFT: i64 = 5;
pub(crate) const AV_DATA: i32 = std::mem::offset_of!(ArrView, data) as i32;
pub(crate) const AV_LEN: i32 = std::mem::offset_of!(ArrView, len) as i32;
pub(crate) const AV_SHADOW: i32 = std::mem::offset_of!(ArrView, shadow) as i32;
pub(crate) const AV_SHADOW_LEN: i32 = std::mem::offset_of!(ArrView, shadow_len) as i32;
const _: () = assert!(std::mem::size_of::<ArrView>() == 1 << AV_SHIFT);

/// Where a trap happened, as compiled code passes it: function id in the
/// high 32 bits, `pc` in the low ones.
pub(crate) fn site(func: u32, pc: usize) -> u64 {
    (u64::from(func) << 32) | (pc as u64 & 0xffff_ffff)
}

/// The function and `pc` of a [`site`].
pub(crate) fn unsite(s: u64) -> (vm::ir::FuncId, usize) {
    (vm::ir::FuncId((s >> 32) as u32), (s & 0xffff_ffff) as usize)
}

/// Trap codes of [`h_trap`] (the traps compiled code detects itself).
pub(crate) const T_DIV_BY_ZERO: i64 = 0;
pub(crate) const T_REM_BY_ZERO: i64 = 1;
pub(crate) const T_FTOI: i64 = 2;
pub(crate) const T_CALL_DEPTH: i64 = 3;
pub(crate) const T_FUEL: i64 = 4;
pub(crate) const T_INTERRUPTED: i64 = 5;
pub(crate) const T_BAD_BLOCK: i64 = 6;

impl Ctx {
    fn fail(&mut self, site: u64, kind: TrapKind) {
        self.trapped = 1;
        self.pending = Some((site, kind));
    }
}

/// Read the comms and block stacks' buffers, lengths and capacities into
/// the context.
fn sync_in(c: &mut Ctx, vm: &mut Vm) {
    let v = vm.native_comms();
    c.comms_ptr = v.as_mut_ptr();
    c.comms_len = v.len() as u64;
    c.comms_cap = v.capacity() as u64;
    let b = vm.native_blk();
    c.blk_ptr = b.as_mut_ptr();
    c.blk_len = b.len() as u64;
    c.blk_cap = b.capacity() as u64;
}

/// Bring the views of the live arrays up to date: all of them if buffers
/// may have moved since they were taken (or `all`), else those of the
/// arrays allocated since; then point the context at them.
#[inline]
fn sync_arrays(c: &mut Ctx, vm: &mut Vm, all: bool) {
    if vm.native_array_count() == 0 {
        // No live array (most calls of scalar code): no views.
        c.views.clear();
        c.arr_tab = c.views.as_ptr();
        c.arr_n = 0;
        return;
    }
    sync_views(c, vm, all);
}

/// [`sync_arrays`] where there are live arrays.
#[inline(never)]
fn sync_views(c: &mut Ctx, vm: &mut Vm, all: bool) {
    let moves = vm.native_array_moves();
    let n = vm.native_array_count();
    if all || moves != c.moves || n < c.views.len() {
        c.views.clear();
        c.moves = moves;
    }
    for h in c.views.len() + 1..=n {
        let v = match vm.native_array_raw(h as u64) {
            Some((d, l, s, sl)) => ArrView {
                data: d as u64,
                len: l as u64,
                shadow: s as u64,
                shadow_len: sl as u64,
            },
            // Never happens (handles `1..=n` are live); an empty view
            // sends every access to the helper.
            None => ArrView::default(),
        };
        c.views.push(v);
    }
    c.arr_tab = c.views.as_ptr();
    c.arr_n = c.views.len() as u64;
}

/// Give the comms and block stacks the lengths compiled code left in the
/// context.
fn sync_out(c: &Ctx, vm: &mut Vm) {
    let v = vm.native_comms();
    let len = c.comms_len as usize;
    if len <= v.capacity() {
        // SAFETY: `comms_ptr` and `comms_cap` were read from this very
        // vector after its last change (`sync_in` runs on entry and after
        // every `stacks` helper, the only code that changes the stacks
        // while compiled code runs). Compiled code writes an element only at `comms_len <
        // comms_cap` and then adds one, and lowers the length only while
        // it is positive (`translate.rs`, `push_fast` and `pop_fast`), so
        // every element below `len` is initialized (by the vector or by
        // compiled code; any bits are a valid `u64`) and `len <= capacity`
        // (checked here too).
        unsafe { v.set_len(len) }
    }
    let b = vm.native_blk();
    let len = c.blk_len as usize;
    if len <= b.capacity() {
        // SAFETY: as for the comms stack above, with `blk_*` (block ids are
        // `u32`s; any bits are a valid one).
        unsafe { b.set_len(len) }
    }
}

/// The VM of a context.
///
/// # Safety
/// `ctx` is the pointer [`enter`] passed to compiled code, which passes it
/// on unchanged to every helper; [`enter`] made it from a `&mut Ctx` whose
/// `vm` came from a `&mut Vm` that nothing else uses until compiled code
/// returns.
unsafe fn parts<'a>(ctx: *mut Ctx) -> (&'a mut Ctx, &'a mut Vm) {
    // SAFETY: see the function's contract: both pointers are valid and
    // unaliased for the helper's duration (the host is suspended in
    // `enter`, compiled code holds no reference).
    unsafe {
        let c = &mut *ctx;
        let vm = &mut *c.vm;
        (c, vm)
    }
}

/// A helper. `stacks`: it may change the AD stacks, so their lengths are
/// written back before it and everything read again after it; the others
/// (arrays, shadows, traps) touch neither stack.
///
/// On x86-64 the helpers use the Windows x64 calling convention (`win64`,
/// Cranelift's `WindowsFastcall`), whose callee keeps `xmm6`-`xmm15`:
/// helpers are called on cold paths inside loops, and under the System V
/// convention, where every vector register is the caller's to save, the
/// register allocator kept the loops' `f64` values in stack slots (a store
/// and a load on every dependency chain). Elsewhere they are `extern "C"`.
macro_rules! helper {
    ($(#[$doc:meta])* fn $name:ident($c:ident, $vm:ident, $site:ident $(, $a:ident: $t:ty)*) -> $ret:ty $body:block) => {
        helper_abi! { $(#[$doc])* fn $name(ctx: *mut Ctx, $site: u64 $(, $a: $t)*) -> $ret {
            // SAFETY: only compiled code calls helpers, with the context
            // `enter` gave it (see `parts`).
            let ($c, $vm) = unsafe { parts(ctx) };
            $body
        }}
    };
    (stacks $(#[$doc:meta])* fn $name:ident($c:ident, $vm:ident, $site:ident $(, $a:ident: $t:ty)*) -> $ret:ty $body:block) => {
        helper_abi! { $(#[$doc])* fn $name(ctx: *mut Ctx, $site: u64 $(, $a: $t)*) -> $ret {
            // SAFETY: as above.
            let ($c, $vm) = unsafe { parts(ctx) };
            sync_out($c, $vm);
            let r: $ret = $body;
            sync_in($c, $vm);
            r
        }}
    };
}

/// A helper function with the helpers' calling convention ([`helper!`]).
#[cfg(target_arch = "x86_64")]
macro_rules! helper_abi {
    ($(#[$doc:meta])* fn $($rest:tt)*) => {
        $(#[$doc])*
        pub(crate) extern "win64" fn $($rest)*
    };
}
#[cfg(not(target_arch = "x86_64"))]
macro_rules! helper_abi {
    ($(#[$doc:meta])* fn $($rest:tt)*) => {
        $(#[$doc])*
        pub(crate) extern "C" fn $($rest)*
    };
}

/// The function-pointer type of a helper with these arguments and result.
#[cfg(target_arch = "x86_64")]
macro_rules! helper_ty {
    ($($t:ty),* $(=> $r:ty)?) => { extern "win64" fn($($t),*) $(-> $r)? };
}
#[cfg(not(target_arch = "x86_64"))]
macro_rules! helper_ty {
    ($($t:ty),* $(=> $r:ty)?) => { extern "C" fn($($t),*) $(-> $r)? };
}

helper! { stacks
    /// `comms.push` (and `mul.push`).
    fn h_comms_push(c, vm, site, v: u64) -> () {
        if let Err(k) = vm.native_comms_push(v, unsite(site)) {
            c.fail(site, k);
        }
    }
}
helper! { stacks
    /// `comms.reserve`.
    fn h_comms_reserve(c, vm, site, v: u64, n: u64) -> () {
        if let Err(k) = vm.native_comms_reserve(v, n as u32, unsite(site)) {
            c.fail(site, k);
        }
    }
}
helper! { stacks
    /// `comms.push.r` (cannot trap; `site` is unused).
    fn h_comms_push_r(c, vm, site, v: u64) -> () {
        let _ = (&c, site);
        vm.native_comms_push_r(v);
    }
}
helper! { stacks
    /// `comms.pop`.
    fn h_comms_pop(c, vm, site) -> u64 {
        vm.native_comms_pop().unwrap_or_else(|k| {
            c.fail(site, k);
            0
        })
    }
}
helper! { stacks
    /// `blk.push`.
    fn h_blk_push(c, vm, site, id: u64) -> () {
        if let Err(k) = vm.native_blk_push(id as u32, unsite(site)) {
            c.fail(site, k);
        }
    }
}
helper! { stacks
    /// The pop of `blk.pop`.
    fn h_blk_pop(c, vm, site) -> u64 {
        vm.native_blk_pop().map(u64::from).unwrap_or_else(|k| {
            c.fail(site, k);
            0
        })
    }
}
helper! {
    /// `anew`.
    fn h_anew(c, vm, site, n: i64) -> u64 {
        let h = vm.native_anew(n).unwrap_or_else(|k| {
            c.fail(site, k);
            0
        });
        sync_arrays(c, vm, false);
        h
    }
}
/// The trap of an element, shadow or length access that compiled code
/// found outside the arrays' views: the interpreter's (`Err`), which the
/// views make certain (they are every live array's exact buffers and
/// lengths, a shadow's length 0 outside AD mode, and compiled code goes
/// to the helper only for a handle or index outside them). Compiled code
/// does not continue after these helpers (`translate.rs`, `trapping`), so
/// an access that succeeded here would mean views out of date, a bug: it
/// traps too, saying so.
fn access_trap<T>(c: &mut Ctx, site: u64, r: Result<T, TrapKind>) {
    let k = r.err().unwrap_or_else(|| {
        TrapKind::ArgMismatch(
            "native tier: an array access outside its views succeeded (a bug in advm)".into(),
        )
    });
    c.fail(site, k);
}

helper! {
    /// `alen` of a handle outside the views (always traps).
    fn h_alen(c, vm, site, h: u64) -> i64 {
        access_trap(c, site, vm.native_alen(h));
        0
    }
}
helper! {
    /// `aget`, `aget.add` outside the views (always traps).
    fn h_aget(c, vm, site, h: u64, i: i64) -> f64 {
        access_trap(c, site, vm.native_aget(h, i));
        0.0
    }
}
helper! {
    /// `aset` outside the views (always traps).
    fn h_aset(c, vm, site, h: u64, i: i64, v: f64) -> () {
        access_trap(c, site, vm.native_aset(h, i, v));
    }
}
helper! {
    /// `shadow.acc`, `shadow.acc.mul` outside the views (always traps).
    fn h_shadow_add(c, vm, site, h: u64, i: i64, v: f64) -> () {
        access_trap(c, site, vm.native_shadow_add(h, i, v));
    }
}
helper! {
    /// `len.check`.
    fn h_len_check(c, vm, site, a: u64, b: u64) -> () {
        if let Err(k) = vm.native_len_check(a, b) {
            c.fail(site, k);
        }
    }
}
helper! {
    /// `shadow.take` outside the views (always traps).
    fn h_shadow_take(c, vm, site, h: u64, i: i64) -> f64 {
        access_trap(c, site, vm.native_shadow_take(h, i));
        0.0
    }
}
helper! {
    /// A trap unwinds through the call at `site`: note it for the trap's
    /// call stack.
    fn h_trap_caller(c, vm, site) -> () {
        let _ = vm;
        c.callers.push(site);
    }
}
helper! {
    /// A trap compiled code detected itself (`code`: the `T_*` constants).
    fn h_trap(c, vm, site, code: i64, payload: u64) -> () {
        let _ = vm;
        let kind = match code {
            T_DIV_BY_ZERO => TrapKind::DivByZero,
            T_REM_BY_ZERO => TrapKind::RemByZero,
            T_FTOI => TrapKind::FtoiInvalid(f64::from_bits(payload)),
            T_CALL_DEPTH => TrapKind::CallDepth {
                limit: c.max_depth as usize,
            },
            T_FUEL => TrapKind::OutOfFuel { limit: c.fuel },
            T_INTERRUPTED => TrapKind::Interrupted,
            _ => TrapKind::BadBlockId(payload as u32),
        };
        c.fail(site, kind);
    }
}

// Math, computed by the very functions the interpreter calls (Rust's f64
// methods, which call the C library, and the libm crate), so that both
// tiers give the same bits. `math!` defines each helper, its symbol in
// `sym` (what `translate.rs` names it by) and its line in `MATH1` or
// `MATH2` (what `helpers` registers): an arm of the translation that
// calls a helper not defined here does not compile, and a helper defined
// here is always registered.
macro_rules! math {
    (
        unary { $($n1:ident = $s1:literal |$a:ident| $e1:expr;)* }
        binary { $($n2:ident = $s2:literal |$x:ident, $y:ident| $e2:expr;)* }
    ) => {
        $( pub(crate) extern "C" fn $n1($a: f64) -> f64 { $e1 } )*
        $( pub(crate) extern "C" fn $n2($x: f64, $y: f64) -> f64 { $e2 } )*
        /// The symbol of each math helper, named as its function.
        #[allow(non_upper_case_globals)]
        pub(crate) mod sym {
            $( pub(crate) const $n1: &str = $s1; )*
            $( pub(crate) const $n2: &str = $s2; )*
        }
        /// The unary math helpers: symbol and function.
        const MATH1: &[(&str, extern "C" fn(f64) -> f64)] = &[$(($s1, $n1),)*];
        /// The binary math helpers: symbol and function.
        const MATH2: &[(&str, extern "C" fn(f64, f64) -> f64)] = &[$(($s2, $n2),)*];
    };
}
math! {
    unary {
        m_sin = "advm_sin" |a| a.sin();
        m_cos = "advm_cos" |a| a.cos();
        m_tan = "advm_tan" |a| a.tan();
        m_exp = "advm_exp" |a| a.exp();
        m_log = "advm_log" |a| a.ln();
        m_tanh = "advm_tanh" |a| a.tanh();
        m_erf = "advm_erf" |a| libm::erf(a);
        m_erfc = "advm_erfc" |a| libm::erfc(a);
        m_atan = "advm_atan" |a| a.atan();
        m_asin = "advm_asin" |a| a.asin();
        m_acos = "advm_acos" |a| a.acos();
        m_sinh = "advm_sinh" |a| a.sinh();
        m_cosh = "advm_cosh" |a| a.cosh();
        m_log1p = "advm_log1p" |a| a.ln_1p();
        m_expm1 = "advm_expm1" |a| a.exp_m1();
        m_log2 = "advm_log2" |a| a.log2();
        m_log10 = "advm_log10" |a| a.log10();
        m_cbrt = "advm_cbrt" |a| a.cbrt();
        m_round = "advm_round" |a| a.round();
    }
    binary {
        m_pow = "advm_pow" |a, b| a.powf(b);
        m_atan2 = "advm_atan2" |a, b| a.atan2(b);
        m_hypot = "advm_hypot" |a, b| a.hypot(b);
    }
}

/// The signature class of a helper, for declaring it to Cranelift.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Sig {
    /// `(ctx, site, i64...) -> ()`, with this many i64 arguments.
    Void(u8),
    /// `(ctx, site, i64...) -> i64`.
    Int(u8),
    /// `(ctx, site, i64...) -> f64`.
    Float(u8),
    /// `(ctx, site, i64, i64, f64) -> ()`.
    VoidIIF,
    /// `(f64) -> f64`.
    F1,
    /// `(f64, f64) -> f64`.
    F2,
}

/// Every helper: name, address, signature class.
pub(crate) fn helpers() -> Vec<(&'static str, *const u8, Sig)> {
    type V0 = helper_ty!(*mut Ctx, u64);
    type V1 = helper_ty!(*mut Ctx, u64, u64);
    type V2 = helper_ty!(*mut Ctx, u64, u64, u64);
    type VT = helper_ty!(*mut Ctx, u64, i64, u64);
    type I0 = helper_ty!(*mut Ctx, u64 => u64);
    type IA = helper_ty!(*mut Ctx, u64, i64 => u64);
    type IL = helper_ty!(*mut Ctx, u64, u64 => i64);
    type F2H = helper_ty!(*mut Ctx, u64, u64, i64 => f64);
    type VF = helper_ty!(*mut Ctx, u64, u64, i64, f64);
    type CG = helper_ty!(*mut Ctx, u64, u64, u64, u64 => u64);
    let mut v: Vec<(&'static str, *const u8, Sig)> = vec![
        (
            "advm_comms_push",
            h_comms_push as V1 as *const u8,
            Sig::Void(1),
        ),
        (
            "advm_comms_reserve",
            h_comms_reserve as V2 as *const u8,
            Sig::Void(2),
        ),
        (
            "advm_comms_push_r",
            h_comms_push_r as V1 as *const u8,
            Sig::Void(1),
        ),
        (
            "advm_comms_pop",
            h_comms_pop as I0 as *const u8,
            Sig::Int(0),
        ),
        ("advm_blk_push", h_blk_push as V1 as *const u8, Sig::Void(1)),
        ("advm_blk_pop", h_blk_pop as I0 as *const u8, Sig::Int(0)),
        ("advm_anew", h_anew as IA as *const u8, Sig::Int(1)),
        ("advm_alen", h_alen as IL as *const u8, Sig::Int(1)),
        ("advm_aget", h_aget as F2H as *const u8, Sig::Float(2)),
        ("advm_aset", h_aset as VF as *const u8, Sig::VoidIIF),
        (
            "advm_shadow_add",
            h_shadow_add as VF as *const u8,
            Sig::VoidIIF,
        ),
        (
            "advm_shadow_take",
            h_shadow_take as F2H as *const u8,
            Sig::Float(2),
        ),
        (
            "advm_len_check",
            h_len_check as V2 as *const u8,
            Sig::Void(2),
        ),
        ("advm_trap", h_trap as VT as *const u8, Sig::Void(2)),
        (
            "advm_trap_caller",
            h_trap_caller as V0 as *const u8,
            Sig::Void(0),
        ),
        (
            "advm_call_grown",
            h_call_grown as CG as *const u8,
            Sig::Int(3),
        ),
    ];
    v.extend(MATH1.iter().map(|(n, f)| (*n, *f as *const u8, Sig::F1)));
    v.extend(MATH2.iter().map(|(n, f)| (*n, *f as *const u8, Sig::F2)));
    v
}

/// Bytes of each of the tier's stack segments ([`Stacks`]), besides its
/// guard region; mapped without reserving swap, so that only the pages a
/// recursion reaches take memory.
const SEGMENT_BYTES: usize = 8 << 20;
/// The inaccessible region below each segment (a stack overflow there
/// faults instead of writing over other memory).
const GUARD_BYTES: usize = 64 << 10;
/// Room kept for the helpers' Rust frames (and the stack switch) below the
/// deepest compiled frame.
const HELPER_BYTES: usize = 64 << 10;
/// How far below the stack pointer at entry compiled recursion may go on
/// the host's own stack before it moves to the tier's segments.
const HOST_RECURSION_BYTES: usize = 64 << 10;
/// How far above a segment's lowest address its stack limit is: what the
/// frames of one call chain between two checked calls may take
/// ([`crate::STACK_BUDGET`]), and the helpers' room below them.
const SEGMENT_FLOOR: usize = crate::STACK_BUDGET + HELPER_BYTES;
const _: () = assert!(SEGMENT_FLOOR * 4 < SEGMENT_BYTES);

/// Whether the tier can run recursive call graphs: it needs stack
/// segments of its own, which it maps on Linux.
pub(crate) const SEGMENTED: bool = cfg!(target_os = "linux");

/// The tier's stack segments, on which compiled code runs a recursion
/// deeper than the stack it started on holds ([`h_call_grown`]): a
/// segment per level, mapped on first use and kept while the call runs,
/// so that a recursion going back and forth across a segment's edge does
/// not map and unmap one each time; between calls the first
/// [`SEGMENTS_KEPT`] stay mapped.
#[derive(Default)]
pub(crate) struct Stacks {
    /// Each mapping's address (its guard region first) and length.
    segs: Vec<(usize, usize)>,
    /// Segments in use by the running call.
    level: usize,
}

/// Segments kept mapped between calls from the host ([`Stacks::trim`]).
const SEGMENTS_KEPT: usize = 2;

impl Stacks {
    /// Unmap the segments past the first [`SEGMENTS_KEPT`] (between calls,
    /// when none is in use): a recursion that once went deep does not keep
    /// its stack's pages for the tier's lifetime.
    #[inline]
    fn trim(&mut self) {
        while self.segs.len() > SEGMENTS_KEPT {
            if let Some((map, len)) = self.segs.pop() {
                unmap_segment(map, len);
            }
        }
    }

    /// The lowest address and size of the next segment, mapping it if it
    /// is new; `None` if the system refused the memory.
    fn enter_segment(&mut self) -> Option<(*mut u8, usize)> {
        if self.level == self.segs.len() {
            self.segs.try_reserve(1).ok()?;
            let len = GUARD_BYTES + SEGMENT_BYTES;
            let map = map_segment(len)?;
            self.segs.push((map, len));
        }
        let (map, _) = *self.segs.get(self.level)?;
        self.level += 1;
        Some(((map + GUARD_BYTES) as *mut u8, SEGMENT_BYTES))
    }
}

/// A fresh mapping of `len` bytes, readable and writable but for its first
/// [`GUARD_BYTES`], or `None`.
#[cfg(target_os = "linux")]
fn map_segment(len: usize) -> Option<usize> {
    // SAFETY: an anonymous private mapping at an address of the system's
    // choosing touches no existing memory; the result is checked.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE | libc::MAP_STACK,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return None;
    }
    // SAFETY: the first `GUARD_BYTES` (a multiple of the page size) of the
    // mapping just made, which nothing uses yet.
    if unsafe { libc::mprotect(p, GUARD_BYTES, libc::PROT_NONE) } != 0 {
        // SAFETY: the mapping just made, unused.
        unsafe { libc::munmap(p, len) };
        return None;
    }
    Some(p as usize)
}

#[cfg(not(target_os = "linux"))]
fn map_segment(_len: usize) -> Option<usize> {
    None
}

/// Give back a mapping [`map_segment`] made, which nothing runs on: the
/// tier calls it between calls from the host ([`Stacks::trim`], after
/// [`enter`]'s call returned) or when it drops.
fn unmap_segment(map: usize, len: usize) {
    #[cfg(target_os = "linux")]
    // SAFETY: `map` and `len` are a mapping `map_segment` made, removed
    // from `Stacks::segs`, and no compiled code runs on it (no call of the
    // tier is running: `trim` runs after `enter`'s call, `drop` when the
    // tier drops).
    unsafe {
        libc::munmap(map as *mut libc::c_void, len);
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (map, len);
}

impl Drop for Stacks {
    fn drop(&mut self) {
        for &(map, len) in &self.segs {
            unmap_segment(map, len);
        }
    }
}

helper_abi! {
    /// A call of a function of a recursive call graph made with the stack
    /// pointer below `ctx.stack_limit`: run the callee's trampoline `tramp`
    /// (`(ctx, args, out)`, as an entry's) on the next stack segment, with
    /// the limit moved into it. 0 once the callee returned (or trapped:
    /// the caller looks at `ctx.trapped` as after any call), 1 if no
    /// segment could be mapped (the trap, `OutOfMemory` at the call, is
    /// set).
    fn h_call_grown(ctx: *mut Ctx, site: u64, tramp: u64, args: u64, out: u64) -> u64 {
        // SAFETY: `ctx` is the context `enter` set up (see `parts`); its
        // `stacks` is the tier's, lent for the call. Neither is held by
        // reference across the call below: compiled code and the helpers
        // it calls reach them through the same pointers.
        let (stacks, saved) = unsafe { ((*ctx).stacks, (*ctx).stack_limit) };
        // SAFETY: as above; no other reference to the segments is live.
        let Some((base, size)) = (unsafe { (*stacks).enter_segment() }) else {
            // SAFETY: as above.
            let (c, _) = unsafe { parts(ctx) };
            c.fail(site, TrapKind::OutOfMemory);
            return 1;
        };
        // SAFETY: `base..base + size` is a fresh or unused segment (levels
        // below this one are the stacks of the frames suspended here),
        // page-aligned, readable and writable, with a guard region below
        // it. The new limit keeps `SEGMENT_FLOOR` bytes above the guard:
        // compiled code makes a checked call directly only above the
        // limit, and the frames of a chain without a checked call take at
        // most `STACK_BUDGET` (the tier declines an entry reaching a
        // function whose chain, summed from the frame sizes Cranelift
        // reports, is larger: `Jit::compile_entry`), which leaves the
        // helpers `HELPER_BYTES`. `tramp` is a trampoline the tier
        // compiled for the callee (`translate::trampoline`), a
        // `Trampoline`; it reads the callee's parameters from `args` and
        // writes its results to `out`, both stack slots of the calling
        // frame sized for them.
        unsafe {
            (*ctx).stack_limit = base as u64 + SEGMENT_FLOOR as u64;
            psm::on_stack(base, size, || {
                let f: Trampoline = std::mem::transmute(tramp as usize as *const u8);
                f(ctx, args as usize as *const u64, out as usize as *mut u64);
            });
            (*stacks).level -= 1;
            (*ctx).stack_limit = saved;
        }
        0
    }
}

/// The context of a tier's calls from the host, kept between them so that
/// entering compiled code writes only the fields that change from call to
/// call (a fresh context took a third of a small call's time).
pub(crate) struct CtxCell(Box<Ctx>);

// SAFETY: the raw pointers of a `Ctx` (the VM, its stacks, arrays and
// interrupt flag, the stack segments) are only dereferenced while a call
// from the host runs, and [`enter`] sets every one of them from its own
// arguments before compiled code runs; between calls they are stale
// numbers nothing reads. Moving the cell to another thread between calls
// is therefore sound.
unsafe impl Send for CtxCell {}

// SAFETY: the tier reaches the cell only through `&mut Jit` (in
// [`enter`]); a shared reference gives no access to it.
unsafe impl Sync for CtxCell {}

impl Default for CtxCell {
    fn default() -> CtxCell {
        CtxCell(Box::new(Ctx {
            trapped: 0,
            steps: 0,
            depth: 1,
            max_depth: 0,
            fuel: 0,
            interrupt: std::ptr::null(),
            ret_pc: 0,
            comms_ptr: std::ptr::null_mut(),
            comms_len: 0,
            comms_cap: 0,
            blk_ptr: std::ptr::null_mut(),
            blk_len: 0,
            blk_cap: 0,
            arr_tab: std::ptr::null(),
            arr_n: 0,
            stack_limit: 0,
            vm: std::ptr::null_mut(),
            stacks: std::ptr::null_mut(),
            views: Vec::new(),
            moves: 0,
            pending: None,
            callers: Vec::new(),
        }))
    }
}

impl CtxCell {
    /// Instructions the last call executed.
    pub(crate) fn steps(&self) -> u64 {
        self.0.steps
    }

    /// The `pc` of the last call's last return.
    pub(crate) fn ret_pc(&self) -> u64 {
        self.0.ret_pc
    }

    /// The last call's trap (site, kind) and the call sites it unwound
    /// through, innermost first; `None` if it did not trap.
    pub(crate) fn take_trap(&mut self) -> Option<((u64, TrapKind), Vec<u64>)> {
        let p = self.0.pending.take()?;
        Some((p, std::mem::take(&mut self.0.callers)))
    }
}

/// The machine code of an entry trampoline (`translate::trampoline`).
type Trampoline = extern "C" fn(*mut Ctx, *const u64, *mut u64);

/// A compiled entry trampoline: `(ctx, args, out)`, reading `nparams`
/// arguments and writing `nouts` results.
#[derive(Clone, Copy, Debug)]
pub(crate) struct EntryCode {
    pub ptr: *const u8,
    pub nparams: usize,
    pub nouts: usize,
    /// For an entry whose call graph has recursion, the largest compiled
    /// frame of a function it reaches (what one level of the recursion
    /// may take of the native stack at most); 0 otherwise.
    pub recursive_frame: usize,
}

// SAFETY: an `EntryCode` is an address of finalized, immutable machine code
// owned by the tier's `JITModule`, which lives as long as the tier that
// holds the `EntryCode`; calling it from another thread is as sound as from
// this one.
unsafe impl Send for EntryCode {}

// SAFETY: as for `Send`: the code is immutable once finalized, and an
// `&EntryCode` gives nothing but its address.
unsafe impl Sync for EntryCode {}

/// Run compiled code: the trampoline `code` on `args`, results in `out`,
/// with the context `cell`; whether it trapped ([`CtxCell::take_trap`]).
/// The instructions executed and the last return's `pc` are then in
/// `cell`.
#[inline]
pub(crate) fn enter(
    cell: &mut CtxCell,
    code: EntryCode,
    vm: &mut Vm,
    args: &[u64],
    out: &mut [u64],
    stacks: &mut Stacks,
) -> bool {
    let ctx = &mut *cell.0;
    if args.len() != code.nparams || out.len() < code.nouts {
        // Never happens (the tier sizes both from the same function); no
        // machine code runs on a mismatch.
        ctx.steps = 0;
        ctx.ret_pc = 0;
        ctx.callers.clear();
        ctx.pending = Some((0, TrapKind::ArgMismatch("native tier: bad entry".into())));
        return true;
    }
    let limits = vm.limits();
    ctx.pending = None;
    ctx.callers.clear();
    ctx.trapped = 0;
    ctx.steps = 0;
    ctx.depth = 1;
    ctx.max_depth = limits.max_call_depth as u64;
    ctx.fuel = limits.fuel.unwrap_or(u64::MAX);
    ctx.interrupt = vm.interrupt_flag() as *const AtomicBool;
    ctx.ret_pc = 0;
    // Only a call graph with recursion makes checked calls.
    ctx.stack_limit = if code.recursive_frame > 0 {
        host_stack_limit()
    } else {
        0
    };
    sync_in(ctx, vm);
    sync_arrays(ctx, vm, true);
    // SAFETY: `code.ptr` is a trampoline the tier compiled with exactly
    // this signature from a verified function and finalized in its
    // `JITModule` (alive while the tier is); it reads `nparams` values from
    // `args` and writes at most `nouts` to `out`, both checked just above.
    // `ctx` is the tier's own, boxed (its address does not move while the
    // code runs), and every pointer in it was set just above from this
    // call's arguments; `vm` is reached only through it until the call
    // returns (see `parts`). Compiled code reads and writes array
    // elements in place only at `arr_tab[h - 1]` with `h - 1 < arr_n` and
    // below that view's length (`translate.rs`, `in_place`, unsigned
    // compares): `arr_tab` and `arr_n` are `views`' buffer and length,
    // which `sync_arrays` took from the heap's live arrays on entry and
    // again after every `anew` (the only thing that allocates or, through
    // `Heap::release_spare`, moves a live array's buffers while compiled
    // code runs; it is a helper, and compiled code reloads both fields at
    // each access), so each view's address and length are those of a live
    // array's buffer. No Rust reference to those buffers is held while
    // compiled code runs (helpers make theirs from `vm` and drop them
    // before returning).
    ctx.vm = vm as *mut Vm;
    stacks.level = 0;
    ctx.stacks = stacks as *mut Stacks;
    unsafe {
        let f: Trampoline = std::mem::transmute(code.ptr);
        f(ctx, args.as_ptr(), out.as_mut_ptr());
    }
    sync_out(ctx, vm);
    stacks.trim();
    ctx.pending.is_some()
}

/// The stack limit of a call from the host into a call graph with
/// recursion ([`Ctx::stack_limit`]): [`HOST_RECURSION_BYTES`] below the
/// stack pointer now, or 0 (never below) where the tier has no segments
/// to move to (it runs no recursion there).
fn host_stack_limit() -> u64 {
    #[cfg(target_os = "linux")]
    {
        (psm::stack_pointer() as usize).saturating_sub(HOST_RECURSION_BYTES) as u64
    }
    #[cfg(not(target_os = "linux"))]
    {
        0
    }
}

/// CPU time this thread has used so far (`CLOCK_THREAD_CPUTIME_ID`), or
/// `None` where the clock is not available; compile times are measured
/// with it beside wall-clock time, since on a loaded machine wall-clock
/// time counts other processes' turns too.
pub(crate) fn thread_cpu_time() -> Option<std::time::Duration> {
    #[cfg(target_os = "linux")]
    {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid, writable `timespec` that outlives the
        // call; `clock_gettime` writes only to it.
        let r = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
        (r == 0).then(|| std::time::Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32))
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
}

/// Give back the machine code of a tier being dropped.
pub(crate) fn free(module: cranelift_jit::JITModule) {
    // SAFETY: called only from the tier's `Drop`: every `EntryCode` into
    // this module is held by the tier being dropped, so no pointer into
    // the code outlives it, and no compiled code is running (a call
    // borrows the tier mutably).
    unsafe { module.free_memory() }
}

/// Wrapper making the module `Send` and `Sync`.
pub(crate) struct SendModule(pub cranelift_jit::JITModule);

// SAFETY: the `JITModule` is owned by one tier and used only through
// `&mut` of that tier (never shared between threads at once); its raw
// pointers are to memory it owns, which moving it to another thread does
// not invalidate.
unsafe impl Send for SendModule {}

// SAFETY: the tier never touches the module through a shared reference
// (every use is through `&mut Jit`), so sharing `&SendModule` between
// threads gives no concurrent access.
unsafe impl Sync for SendModule {}
