//! The two hot integer kernels of NNUE inference, in AVX2 (with AVX-VNNI's dot product for
//! dense layers where the CPU has it; both chosen at run time) and in plain Rust. All give
//! bit-identical results; the property tests compare them on every move of random games.
//!
//! - [`Kernel::update`]: a child accumulator is the parent's minus the weight rows of the
//!   features a move switched off plus those it switched on (i16, wrapping like SIMD lanes).
//! - [`Kernel::dense`]: a dense layer over clipped activations (the accumulators of both
//!   perspectives for the first layer), `u8 × i8` products summed in i32. The SIMD kernels
//!   take the weights regrouped by four inputs ([`Dense::by_input_quads`]): four activations
//!   broadcast, multiplied into eight outputs per register, groups of four zeros skipped.
//!   `_mm256_maddubs_epi16` saturates pairs at i16, which never happens here: activations
//!   are at most 127, so a pair is within `2·127·128 = 32512`; `vpdpbusd` does not saturate.

use crate::nnue::Dense;

/// An `i16` buffer that starts on a cache line (64 bytes), so the kernels' 32-byte loads and
/// stores of a row or an accumulator never straddle two lines (a split access costs two).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct AlignedI16 {
    lines: Vec<Line>,
    len: usize,
}

#[derive(Clone, Copy, PartialEq, Eq)]
#[repr(C, align(64))]
struct Line([i16; 32]);

impl AlignedI16 {
    pub fn zeroed(len: usize) -> AlignedI16 {
        AlignedI16 {
            lines: vec![Line([0; 32]); len.div_ceil(32)],
            len,
        }
    }
}

impl From<Vec<i16>> for AlignedI16 {
    fn from(v: Vec<i16>) -> AlignedI16 {
        let mut out = AlignedI16::zeroed(v.len());
        out.copy_from_slice(&v);
        out
    }
}

impl std::ops::Deref for AlignedI16 {
    type Target = [i16];
    fn deref(&self) -> &[i16] {
        // SAFETY: `lines` holds at least `len` initialized i16s, contiguous (repr(C) arrays
        // of i16 with no padding: 64 bytes each, aligned to 64).
        unsafe { std::slice::from_raw_parts(self.lines.as_ptr() as *const i16, self.len) }
    }
}

impl std::ops::DerefMut for AlignedI16 {
    fn deref_mut(&mut self) -> &mut [i16] {
        // SAFETY: as in `deref`; the borrow of `self` is unique.
        unsafe { std::slice::from_raw_parts_mut(self.lines.as_mut_ptr() as *mut i16, self.len) }
    }
}

impl std::fmt::Debug for AlignedI16 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&**self, f)
    }
}

/// Which implementation runs the kernels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kernel {
    Scalar,
    /// x86-64 AVX2.
    Avx2(CpuChecked),
    /// AVX2 plus AVX-VNNI, whose `vpdpbusd` does a dense layer's multiply-and-sum in one
    /// instruction instead of three.
    Vnni(CpuChecked),
}

/// Proof that the CPU was checked: only [`Kernel::available`] can make one, so the SIMD
/// variants cannot be built by hand and run on a CPU without those instructions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuChecked(());

impl Kernel {
    /// The fastest kernel this CPU runs for accumulators `width` wide (AVX2 needs
    /// multiples of 32 lanes).
    pub fn detect(width: usize) -> Kernel {
        Kernel::available(width)
            .pop()
            .expect("scalar is always there")
    }

    /// Every kernel usable here for `width`, slowest (scalar) first: tests compare them all.
    pub fn available(width: usize) -> Vec<Kernel> {
        let mut v = vec![Kernel::Scalar];
        #[cfg(target_arch = "x86_64")]
        if width.is_multiple_of(32) && std::is_x86_feature_detected!("avx2") {
            v.push(Kernel::Avx2(CpuChecked(())));
            if std::is_x86_feature_detected!("avxvnni") {
                v.push(Kernel::Vnni(CpuChecked(())));
            }
        }
        let _ = width;
        v
    }

    pub fn name(self) -> &'static str {
        match self {
            Kernel::Scalar => "scalar",
            Kernel::Avx2(_) => "avx2",
            Kernel::Vnni(_) => "avx2+vnni",
        }
    }

    /// `dst = src - Σ rows(removed) + Σ rows(added)` over `weights` laid out `[inputs, width]`.
    #[inline]
    pub fn update(
        self,
        dst: &mut [i16],
        src: &[i16],
        weights: &[i16],
        removed: &[u32],
        added: &[u32],
    ) {
        let width = dst.len();
        debug_assert_eq!(src.len(), width);
        match self {
            Kernel::Scalar => update_scalar(dst, src, weights, removed, added),
            #[cfg(target_arch = "x86_64")]
            // SAFETY: Avx2 and Vnni carry a CpuChecked, which only `Kernel::available` makes,
            // after the CPU reported AVX2 and for widths that are multiples of 32.
            Kernel::Avx2(_) | Kernel::Vnni(_) => {
                debug_assert!(std::is_x86_feature_detected!("avx2"));
                unsafe { avx2::update(dst, src, weights, removed, added) }
            }
            #[cfg(not(target_arch = "x86_64"))]
            Kernel::Avx2(_) | Kernel::Vnni(_) => update_scalar(dst, src, weights, removed, added),
        }
    }

    /// Clipped ReLU of both accumulators, side to move first, as bytes 0..=127.
    pub fn clip(self, stm: &[i16], nstm: &[i16], out: &mut [u8]) {
        debug_assert!(out.len() >= stm.len() + nstm.len());
        match self {
            Kernel::Scalar => clip_scalar(stm, nstm, out),
            #[cfg(target_arch = "x86_64")]
            // SAFETY: as in `update`.
            Kernel::Avx2(_) | Kernel::Vnni(_) => unsafe { avx2::clip(stm, nstm, out) },
            #[cfg(not(target_arch = "x86_64"))]
            Kernel::Avx2(_) | Kernel::Vnni(_) => clip_scalar(stm, nstm, out),
        }
    }

    /// `Σ clamp(v, 0, 255)² · w` over both accumulators (side to move first) against
    /// `weights` (`2·width` values, each within i8): a SCReLU net's output sum, exact.
    pub fn screlu_dot(self, stm: &[i16], nstm: &[i16], weights: &[i16]) -> i64 {
        debug_assert_eq!(weights.len(), stm.len() + nstm.len());
        match self {
            Kernel::Scalar => screlu_dot_scalar(stm, nstm, weights),
            #[cfg(target_arch = "x86_64")]
            // SAFETY: as in `update` (widths are multiples of 32, so of 16).
            Kernel::Avx2(_) | Kernel::Vnni(_) => unsafe { avx2::screlu_dot(stm, nstm, weights) },
            #[cfg(not(target_arch = "x86_64"))]
            Kernel::Avx2(_) | Kernel::Vnni(_) => screlu_dot_scalar(stm, nstm, weights),
        }
    }

    /// A dense layer's sums, bias included, over byte activations of at most 127 (clipped
    /// ReLU outputs: above that `maddubs` could saturate and kernels would disagree); `quads` is
    /// [`Dense::by_input_quads`] of `layer` (empty where its shape does not fit).
    pub fn dense(self, x: &[u8], layer: &Dense, quads: &[i8], out: &mut [i32]) {
        debug_assert_eq!(x.len(), layer.inputs);
        match self {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: as in `update`, and `available` made Vnni only after the CPU reported
            // AVX-VNNI too; the quads kernels check their shapes themselves.
            Kernel::Vnni(_) if !quads.is_empty() => unsafe {
                match layer.outputs {
                    m if m.is_multiple_of(32) => avx2::dense_quads_vnni::<4>(x, layer, quads, out),
                    m if m.is_multiple_of(16) => avx2::dense_quads_vnni::<2>(x, layer, quads, out),
                    _ => avx2::dense_quads_vnni::<1>(x, layer, quads, out),
                }
            },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: as in `update`; the quads kernel checks its shapes itself.
            Kernel::Avx2(_) if !quads.is_empty() => unsafe {
                match layer.outputs {
                    m if m.is_multiple_of(32) => avx2::dense_quads::<4>(x, layer, quads, out),
                    m if m.is_multiple_of(16) => avx2::dense_quads::<2>(x, layer, quads, out),
                    _ => avx2::dense_quads::<1>(x, layer, quads, out),
                }
            },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: as in `update`; rows of a multiple of 32 bytes fill whole registers.
            Kernel::Avx2(_) | Kernel::Vnni(_) if layer.inputs.is_multiple_of(32) => unsafe {
                avx2::dense(x, layer, out)
            },
            _ => dense_scalar(x, layer, out),
        }
    }
}

fn clip_scalar(stm: &[i16], nstm: &[i16], out: &mut [u8]) {
    for (x, &v) in out.iter_mut().zip(stm.iter().chain(nstm)) {
        *x = v.clamp(0, 127) as u8;
    }
}

fn screlu_dot_scalar(stm: &[i16], nstm: &[i16], weights: &[i16]) -> i64 {
    stm.iter()
        .chain(nstm)
        .zip(weights)
        .map(|(&v, &w)| {
            let a = (v as i64).clamp(0, 255);
            a * a * w as i64
        })
        .sum()
}

fn dense_scalar(x: &[u8], layer: &Dense, out: &mut [i32]) {
    let n = layer.inputs;
    for (o, out) in out.iter_mut().enumerate().take(layer.outputs) {
        let row = &layer.weights[o * n..][..n];
        let dot: i32 = row.iter().zip(x).map(|(&w, &a)| w as i32 * a as i32).sum();
        *out = layer.bias[o] + dot;
    }
}

fn update_scalar(dst: &mut [i16], src: &[i16], weights: &[i16], removed: &[u32], added: &[u32]) {
    let width = dst.len();
    dst.copy_from_slice(src);
    for &f in removed {
        let row = &weights[f as usize * width..][..width];
        for (d, w) in dst.iter_mut().zip(row) {
            *d = d.wrapping_sub(*w);
        }
    }
    for &f in added {
        let row = &weights[f as usize * width..][..width];
        for (d, w) in dst.iter_mut().zip(row) {
            *d = d.wrapping_add(*w);
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::Dense;
    use std::arch::x86_64::*;

    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn update(
        dst: &mut [i16],
        src: &[i16],
        weights: &[i16],
        removed: &[u32],
        added: &[u32],
    ) {
        let width = dst.len();
        assert!(src.len() == width && width.is_multiple_of(16));
        // Bounds are checked once per row so the loads below stay in range.
        for &f in removed.iter().chain(added) {
            assert!((f as usize + 1) * width <= weights.len());
        }
        // SAFETY: every row is in range (checked above), AVX2 is enabled on this function.
        unsafe {
            let rows = |fs: &[u32]| -> [*const i16; 2] {
                let mut r = [weights.as_ptr(); 2];
                for (r, &f) in r.iter_mut().zip(fs) {
                    *r = weights.as_ptr().add(f as usize * width);
                }
                r
            };
            // A move changes at most two features each way (castling, a capture): those
            // shapes get loops with the row pointers in registers and nothing to count.
            let (s, d) = (src.as_ptr(), dst.as_mut_ptr());
            match (removed.len(), added.len()) {
                (1, 1) => fixed::<1, 1>(d, s, width, rows(removed), rows(added)),
                (2, 1) => fixed::<2, 1>(d, s, width, rows(removed), rows(added)),
                (2, 2) => fixed::<2, 2>(d, s, width, rows(removed), rows(added)),
                (1, 2) => fixed::<1, 2>(d, s, width, rows(removed), rows(added)),
                _ => any(d, s, width, weights.as_ptr(), removed, added),
            }
        }
    }

    /// `dst = src - Σ removed rows + Σ added rows`, the first `R`/`A` of the pointers.
    #[target_feature(enable = "avx2")]
    #[inline]
    unsafe fn fixed<const R: usize, const A: usize>(
        dst: *mut i16,
        src: *const i16,
        width: usize,
        removed: [*const i16; 2],
        added: [*const i16; 2],
    ) {
        unsafe {
            let mut i = 0;
            while i < width {
                let mut v = _mm256_loadu_si256(src.add(i) as *const __m256i);
                for row in &removed[..R] {
                    v = _mm256_sub_epi16(v, _mm256_loadu_si256(row.add(i) as *const __m256i));
                }
                for row in &added[..A] {
                    v = _mm256_add_epi16(v, _mm256_loadu_si256(row.add(i) as *const __m256i));
                }
                _mm256_storeu_si256(dst.add(i) as *mut __m256i, v);
                i += 16;
            }
        }
    }

    /// Any number of rows (refreshes, unusual shapes): 64 lanes at a time in four
    /// registers, so each feature index is read once per 64 lanes rather than per 16.
    #[target_feature(enable = "avx2")]
    unsafe fn any(
        dst: *mut i16,
        src: *const i16,
        width: usize,
        weights: *const i16,
        removed: &[u32],
        added: &[u32],
    ) {
        unsafe {
            let load = |p: *const i16| _mm256_loadu_si256(p as *const __m256i);
            let mut i = 0;
            while i + 64 <= width {
                let mut v = [
                    load(src.add(i)),
                    load(src.add(i + 16)),
                    load(src.add(i + 32)),
                    load(src.add(i + 48)),
                ];
                for &f in removed {
                    let row = weights.add(f as usize * width + i);
                    for (k, v) in v.iter_mut().enumerate() {
                        *v = _mm256_sub_epi16(*v, load(row.add(16 * k)));
                    }
                }
                for &f in added {
                    let row = weights.add(f as usize * width + i);
                    for (k, v) in v.iter_mut().enumerate() {
                        *v = _mm256_add_epi16(*v, load(row.add(16 * k)));
                    }
                }
                for (k, v) in v.into_iter().enumerate() {
                    _mm256_storeu_si256(dst.add(i + 16 * k) as *mut __m256i, v);
                }
                i += 64;
            }
            while i < width {
                let mut v = load(src.add(i));
                for &f in removed {
                    v = _mm256_sub_epi16(v, load(weights.add(f as usize * width + i)));
                }
                for &f in added {
                    v = _mm256_add_epi16(v, load(weights.add(f as usize * width + i)));
                }
                _mm256_storeu_si256(dst.add(i) as *mut __m256i, v);
                i += 16;
            }
        }
    }

    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn clip(stm: &[i16], nstm: &[i16], out: &mut [u8]) {
        assert!(out.len() >= stm.len() + nstm.len());
        unsafe {
            let zero = _mm256_setzero_si256();
            let max = _mm256_set1_epi16(127);
            let mut at = 0;
            for half in [stm, nstm] {
                let mut i = 0;
                while i + 32 <= half.len() {
                    let a = _mm256_loadu_si256(half.as_ptr().add(i) as *const __m256i);
                    let b = _mm256_loadu_si256(half.as_ptr().add(i + 16) as *const __m256i);
                    let a = _mm256_min_epi16(_mm256_max_epi16(a, zero), max);
                    let b = _mm256_min_epi16(_mm256_max_epi16(b, zero), max);
                    // packus interleaves 128-bit lanes; the permute restores the order.
                    let packed = _mm256_permute4x64_epi64(_mm256_packus_epi16(a, b), 0b11_01_10_00);
                    _mm256_storeu_si256(out.as_mut_ptr().add(at + i) as *mut __m256i, packed);
                    i += 32;
                }
                at += half.len();
            }
        }
    }

    /// SCReLU output sum: per 16 lanes, `a = clamp(v, 0, 255)`, `a·w` in i16 (it fits: |w| ≤
    /// 128), then `madd` with `a` sums pairs into i32 lanes. Each lane gathers at most
    /// `width/8` pairs of at most 2·255·32640, within i32 for widths up to
    /// `MAX_SCRELU_WIDTH`; the lanes are summed in i64.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn screlu_dot(stm: &[i16], nstm: &[i16], weights: &[i16]) -> i64 {
        assert!(weights.len() >= stm.len() + nstm.len());
        assert!(stm.len().is_multiple_of(16) && nstm.len().is_multiple_of(16));
        // SAFETY: every load is inside `stm`, `nstm` or `weights` (asserted above); the
        // caller enabled AVX2.
        unsafe {
            let zero = _mm256_setzero_si256();
            let max = _mm256_set1_epi16(255);
            let mut sum = _mm256_setzero_si256();
            let mut at = 0;
            for half in [stm, nstm] {
                let mut i = 0;
                while i < half.len() {
                    let v = _mm256_loadu_si256(half.as_ptr().add(i) as *const __m256i);
                    let w = _mm256_loadu_si256(weights.as_ptr().add(at + i) as *const __m256i);
                    let a = _mm256_min_epi16(_mm256_max_epi16(v, zero), max);
                    let aw = _mm256_mullo_epi16(a, w);
                    sum = _mm256_add_epi32(sum, _mm256_madd_epi16(aw, a));
                    i += 16;
                }
                at += half.len();
            }
            let mut lanes = [0i32; 8];
            _mm256_storeu_si256(lanes.as_mut_ptr() as *mut __m256i, sum);
            lanes.iter().map(|&l| l as i64).sum()
        }
    }

    /// Sum of the eight i32 lanes.
    #[target_feature(enable = "avx2")]
    unsafe fn hsum(v: __m256i) -> i32 {
        let s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
        let s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0b01_00_11_10));
        let s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0b10_11_00_01));
        _mm_cvtsi128_si32(s)
    }

    /// `out = bias + W·x` over [`Dense::by_input_quads`] weights, `8·K` outputs at a time in
    /// `K` registers: each group of four activations is broadcast and multiplied into all of
    /// them; a group of four zeros (common after the clipped ReLU) is skipped.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn dense_quads<const K: usize>(
        x: &[u8],
        layer: &Dense,
        quads: &[i8],
        out: &mut [i32],
    ) {
        // SAFETY: AVX2 is enabled here, and the body is inlined into this function.
        unsafe { quads_body::<K, false>(x, layer, quads, out) }
    }

    /// [`dense_quads`] with one `vpdpbusd` (u8 × i8, four products summed into each i32
    /// lane, no intermediate saturation) per register instead of three instructions.
    #[target_feature(enable = "avx2,avxvnni")]
    pub(super) unsafe fn dense_quads_vnni<const K: usize>(
        x: &[u8],
        layer: &Dense,
        quads: &[i8],
        out: &mut [i32],
    ) {
        // SAFETY: AVX2 and AVX-VNNI are enabled here, and the body is inlined into this
        // function.
        unsafe { quads_body::<K, true>(x, layer, quads, out) }
    }

    /// The loop of both quads kernels; only called from functions that enable AVX2 (and
    /// AVX-VNNI when `VNNI`).
    #[inline(always)]
    unsafe fn quads_body<const K: usize, const VNNI: bool>(
        x: &[u8],
        layer: &Dense,
        quads: &[i8],
        out: &mut [i32],
    ) {
        let (n, m) = (layer.inputs, layer.outputs);
        assert!(n.is_multiple_of(4) && m.is_multiple_of(8 * K) && quads.len() == n * m);
        assert!(x.len() >= n && out.len() >= m && layer.bias.len() >= m);
        // SAFETY: every load below is inside `x`, `quads` or `bias`, every store inside
        // `out` (asserted above); the caller enabled the instructions.
        unsafe {
            let ones = _mm256_set1_epi16(1);
            let mut tile = 0;
            while tile < m {
                // Two sets of sums, for even and odd groups: `vpdpbusd` takes several cycles
                // before its result can be added to again, and one chain per register would
                // wait on that latency rather than on the multipliers.
                let mut sums = [[_mm256_setzero_si256(); K]; 2];
                let mut q = 0;
                while q < n / 4 {
                    for (half, sums) in sums.iter_mut().enumerate() {
                        let q = q + half;
                        if q >= n / 4 {
                            break;
                        }
                        let four = (x.as_ptr().add(4 * q) as *const u32).read_unaligned();
                        if four == 0 {
                            continue;
                        }
                        let a = _mm256_set1_epi32(four as i32);
                        let w = quads.as_ptr().add(4 * (q * m + tile));
                        for (k, sum) in sums.iter_mut().enumerate() {
                            let w = _mm256_loadu_si256(w.add(32 * k) as *const __m256i);
                            *sum = if VNNI {
                                _mm256_dpbusd_avx_epi32(*sum, a, w)
                            } else {
                                let pairs = _mm256_maddubs_epi16(a, w);
                                _mm256_add_epi32(*sum, _mm256_madd_epi16(pairs, ones))
                            };
                        }
                    }
                    q += 2;
                }
                let [even, odd] = sums;
                for (k, (a, b)) in even.into_iter().zip(odd).enumerate() {
                    let sum = _mm256_add_epi32(a, b);
                    let at = tile + 8 * k;
                    let bias = _mm256_loadu_si256(layer.bias.as_ptr().add(at) as *const __m256i);
                    let v = _mm256_add_epi32(sum, bias);
                    _mm256_storeu_si256(out.as_mut_ptr().add(at) as *mut __m256i, v);
                }
                tile += 8 * K;
            }
        }
    }

    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn dense(x: &[u8], layer: &Dense, out: &mut [i32]) {
        let n = layer.inputs;
        assert!(x.len() >= n && n.is_multiple_of(32) && layer.weights.len() >= n * layer.outputs);
        assert!(out.len() >= layer.outputs && layer.bias.len() >= layer.outputs);
        unsafe {
            let ones = _mm256_set1_epi16(1);
            let w = layer.weights.as_ptr();
            let mut o = 0;
            // Four rows at a time share each activation load.
            while o + 4 <= layer.outputs {
                let mut sums = [_mm256_setzero_si256(); 4];
                let mut i = 0;
                while i < n {
                    let a = _mm256_loadu_si256(x.as_ptr().add(i) as *const __m256i);
                    for (k, sum) in sums.iter_mut().enumerate() {
                        let row = _mm256_loadu_si256(w.add((o + k) * n + i) as *const __m256i);
                        let pairs = _mm256_maddubs_epi16(a, row);
                        *sum = _mm256_add_epi32(*sum, _mm256_madd_epi16(pairs, ones));
                    }
                    i += 32;
                }
                for (k, sum) in sums.into_iter().enumerate() {
                    out[o + k] = layer.bias[o + k] + hsum(sum);
                }
                o += 4;
            }
            while o < layer.outputs {
                let mut sum = _mm256_setzero_si256();
                let mut i = 0;
                while i < n {
                    let a = _mm256_loadu_si256(x.as_ptr().add(i) as *const __m256i);
                    let row = _mm256_loadu_si256(w.add(o * n + i) as *const __m256i);
                    let pairs = _mm256_maddubs_epi16(a, row);
                    sum = _mm256_add_epi32(sum, _mm256_madd_epi16(pairs, ones));
                    i += 32;
                }
                out[o] = layer.bias[o] + hsum(sum);
                o += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A seeded xorshift64 stream of test values.
    fn xorshift(mut seed: u64) -> impl FnMut() -> u64 {
        move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        }
    }

    /// Dense layers of the shapes nets use and odd ones (outputs not a multiple of 8 or
    /// 32, one output, an odd number of input groups), over activations with runs of zeros (skipped groups) and at the
    /// extremes (127 × -128): every kernel equals scalar, whichever layout it takes.
    #[test]
    fn every_dense_shape_matches_scalar() {
        let mut next = xorshift(0x2545_f491_4f6c_dd1du64);
        for (inputs, outputs) in [
            (512, 32),
            (32, 32),
            (32, 1),
            (64, 16),
            (96, 8),
            (64, 24),
            (36, 8),
            (1024, 64),
        ] {
            let layer = Dense {
                inputs,
                outputs,
                bias: (0..outputs).map(|_| next() as i32 >> 8).collect(),
                weights: (0..inputs * outputs).map(|_| next() as i8).collect(),
            };
            let quads = layer.by_input_quads();
            assert_eq!(quads.is_empty(), !outputs.is_multiple_of(8));
            for fill in 0..4 {
                let x: Vec<u8> = (0..inputs)
                    .map(|i| match fill {
                        0 => (next() % 128) as u8,
                        1 if (i / 4) % 3 == 0 => 0,
                        1 => (next() % 128) as u8,
                        2 => 127,
                        _ => 0,
                    })
                    .collect();
                let mut want = vec![0; outputs];
                Kernel::Scalar.dense(&x, &layer, &quads, &mut want);
                for kernel in Kernel::available(32) {
                    let mut got = vec![0; outputs];
                    kernel.dense(&x, &layer, &quads, &mut got);
                    assert_eq!(got, want, "{kernel:?} {inputs}x{outputs} fill {fill}");
                }
            }
        }
    }

    /// Every shape of update (the fixed ones moves produce, and refresh-sized lists) at widths
    /// that exercise both the 64-lane blocks and the 16-lane tail: AVX2 equals scalar.
    #[test]
    fn every_update_shape_matches_scalar() {
        let mut next = xorshift(0x9e37_79b9_7f4a_7c15u64);
        let inputs = 100;
        for width in [32usize, 96, 256] {
            let weights: Vec<i16> = (0..inputs * width).map(|_| next() as i16).collect();
            let src: Vec<i16> = (0..width).map(|_| next() as i16).collect();
            for removed in 0..=3 {
                for added in [0usize, 1, 2, 3, 31] {
                    let pick = |n: usize, next: &mut dyn FnMut() -> u64| -> Vec<u32> {
                        (0..n).map(|_| (next() % inputs as u64) as u32).collect()
                    };
                    let (r, a) = (pick(removed, &mut next), pick(added, &mut next));
                    let mut want = vec![0; width];
                    Kernel::Scalar.update(&mut want, &src, &weights, &r, &a);
                    for kernel in Kernel::available(width) {
                        let mut got = vec![0; width];
                        kernel.update(&mut got, &src, &weights, &r, &a);
                        assert_eq!(got, want, "{kernel:?} width {width} rows -{r:?} +{a:?}");
                    }
                }
            }
        }
    }

    /// The SCReLU output sum at the widest transformer, with every lane at its extreme (255
    /// × -128 and × 127, where one i32 lane holds the most), below zero, in range and mixed:
    /// every kernel equals the exact scalar sum.
    #[test]
    fn screlu_dot_matches_scalar_at_the_extremes() {
        let mut next = xorshift(0x1234_5678_9abc_def1u64);
        for width in [32usize, 256, crate::nnue::MAX_SCRELU_WIDTH] {
            for fill in 0..5 {
                let acc = |next: &mut dyn FnMut() -> u64| -> Vec<i16> {
                    (0..width)
                        .map(|_| match fill {
                            0 | 1 => 300,
                            2 => -5,
                            _ => (next() % 600) as i16 - 200,
                        })
                        .collect()
                };
                let (stm, nstm) = (acc(&mut next), acc(&mut next));
                let weights: Vec<i16> = (0..2 * width)
                    .map(|_| match fill {
                        0 => -128,
                        1 => 127,
                        _ => next() as i8 as i16,
                    })
                    .collect();
                let want = Kernel::Scalar.screlu_dot(&stm, &nstm, &weights);
                if fill == 0 {
                    assert_eq!(want, -(2 * width as i64) * 255 * 255 * 128);
                }
                for kernel in Kernel::available(width) {
                    let got = kernel.screlu_dot(&stm, &nstm, &weights);
                    assert_eq!(got, want, "{kernel:?} width {width} fill {fill}");
                }
            }
        }
    }
}
