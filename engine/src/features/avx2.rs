//! The loader's feature pass ([`super::FeatureSetKind::active_pair_from_men`]) in AVX2, eight
//! men at a time, for CPUs that have it (with BMI1 and POPCNT: Haswell on).
//!
//! Per perspective and per eight men, each code's term is looked up in a 16-entry table held in two registers (the
//! king's addend already in it), the square XOR-ed with the perspective's flip (the king's
//! mirror folded in, which the `PIECE_TERMS` test allows) and added, and lanes without an
//! input (HalfKP's kings, lanes past the last man) are squeezed out with a permutation.
//! Same lists in the same order as the portable pass; the features test compares the two.

use std::arch::x86_64::*;

use shakmaty::{Color, Square};

use super::{FeatureError, FeatureSet, MAX_MEN, Men};

/// Whether this CPU runs [`active_pair`].
pub(super) fn available() -> bool {
    std::is_x86_feature_detected!("avx2")
        && std::is_x86_feature_detected!("bmi1")
        && std::is_x86_feature_detected!("popcnt")
}

/// `COMPACT[m]`: the lanes whose bit is set in `m`, ascending, then zeros: the permutation
/// that moves the kept lanes of eight to the front.
const COMPACT: [[i32; 8]; 256] = {
    let mut t = [[0i32; 8]; 256];
    let mut m = 0;
    while m < 256 {
        let (mut at, mut lane) = (0, 0);
        while lane < 8 {
            if m & (1 << lane) != 0 {
                t[m][at] = lane;
                at += 1;
            }
            lane += 1;
        }
        m += 1;
    }
    t
};

/// [`super::FeatureSetKind::active_pair_from_men`] for the set `S`, in AVX2. Callers must
/// have checked [`available`] (calling it is `unsafe` outside code built for these features).
#[target_feature(enable = "avx2,bmi1,popcnt")]
pub(super) fn pair<S: FeatureSet>(
    men_in: &Men,
    turn: Color,
    mirror: bool,
    first: &mut Vec<i32>,
    second: &mut Vec<i32>,
) -> Result<(), FeatureError> {
    let men = men_in.len();
    debug_assert!(men <= MAX_MEN as usize);
    let words = |bytes: &[u8; MAX_MEN as usize]| -> [u64; 4] {
        std::array::from_fn(|j| u64::from_le_bytes(bytes[8 * j..8 * j + 8].try_into().unwrap()))
    };
    let (squares, codes) = (words(&men_in.squares), words(&men_in.codes));
    let men_mask = if men == 32 {
        u32::MAX
    } else {
        (1u32 << men) - 1
    };
    let all_codes = _mm256_set_epi64x(
        codes[3] as i64,
        codes[2] as i64,
        codes[1] as i64,
        codes[0] as i64,
    );
    // Each side's king square, where it has exactly one king (codes 6 and 14).
    let mut kings = [None::<u32>; 2];
    for (king, code) in kings.iter_mut().zip([6i8, 14]) {
        let hits = _mm256_movemask_epi8(_mm256_cmpeq_epi8(all_codes, _mm256_set1_epi8(code)))
            as u32
            & men_mask;
        if hits != 0 && hits & (hits - 1) == 0 {
            let k = hits.trailing_zeros() as usize;
            *king = Some(((squares[k / 8] >> (8 * (k % 8))) & 0xff) as u32);
        }
    }
    let mirror = if mirror { 7 } else { 0 };
    let black = |c: Color| usize::from(c == Color::Black);
    let has_input = S::HAS_INPUT
        .iter()
        .enumerate()
        .fold(0u32, |m, (code, &h)| m | (h << code));
    let has_input = _mm256_set1_epi32(has_input as i32);
    let one = _mm256_set1_epi32(1);
    let king_of = |perspective: Color| match (S::KING_RELATIVE, kings[black(perspective)]) {
        (false, _) => Ok(Square::A1),
        (true, Some(k)) => Ok(Square::new(k ^ mirror)),
        (true, None) => Err(FeatureError::NoKing(perspective)),
    };
    let ours = king_of(turn)?;
    let theirs = king_of(turn.other())?;
    for (perspective, king, out) in [(turn, ours, first), (turn.other(), theirs, second)] {
        let b = black(perspective);
        let (x, a) = S::king_terms(perspective, king);
        let terms = &S::PIECE_TERMS[b];
        let add = _mm256_set1_epi32(a as i32);
        // SAFETY: `terms` is sixteen u32s: two unaligned loads of eight.
        let (low, high) = unsafe {
            (
                _mm256_add_epi32(_mm256_loadu_si256(terms.as_ptr().cast()), add),
                _mm256_add_epi32(_mm256_loadu_si256(terms[8..].as_ptr().cast()), add),
            )
        };
        let flip = _mm256_set1_epi32((S::SQUARE_FLIP[b] ^ mirror ^ x) as i32);
        // Room for every man plus the eight lanes the last store writes.
        out.reserve(MAX_MEN as usize + 8);
        let len = out.len();
        let mut n = 0usize;
        for g in 0..men.div_ceil(8) {
            let code = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(codes[g] as i64));
            let square = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(squares[g] as i64));
            // Codes 8..16 (Black's men) take the high table: bit 3 moved to the sign bit.
            let term = _mm256_castps_si256(_mm256_blendv_ps(
                _mm256_castsi256_ps(_mm256_permutevar8x32_epi32(low, code)),
                _mm256_castsi256_ps(_mm256_permutevar8x32_epi32(high, code)),
                _mm256_castsi256_ps(_mm256_slli_epi32(code, 28)),
            ));
            let feature = _mm256_add_epi32(term, _mm256_xor_si256(square, flip));
            let input = _mm256_and_si256(_mm256_srlv_epi32(has_input, code), one);
            let input = _mm256_cmpeq_epi32(input, one);
            let lanes = men - 8 * g;
            let in_board = if lanes >= 8 {
                0xff
            } else {
                (1u32 << lanes) - 1
            };
            let keep = _mm256_movemask_ps(_mm256_castsi256_ps(input)) as u32 & in_board;
            // SAFETY: `COMPACT[keep]` is eight i32s; `out` has room for `len + n + 8`
            // (n <= 32, reserved above), and the store is unaligned.
            unsafe {
                let order = _mm256_loadu_si256(COMPACT[keep as usize].as_ptr().cast());
                let packed = _mm256_permutevar8x32_epi32(feature, order);
                _mm256_storeu_si256(out.as_mut_ptr().add(len + n).cast(), packed);
            }
            n += keep.count_ones() as usize;
        }
        // SAFETY: the `n` values after `len` were written by the stores above.
        unsafe { out.set_len(len + n) };
    }
    Ok(())
}
