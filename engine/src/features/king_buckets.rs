//! King-bucketed piece-square inputs with a layout given at run time (bullet's
//! `ChessBuckets` and `ChessBucketsMirrored`, a NetSpec's `king_buckets` family).
//!
//! Seen from a perspective (a rank flip for Black, as in `all768`), with the perspective's own
//! king on `ksq`: `index = 768·bucket(ksq) + (384·them + 64·role + (sq ^ 56·black)) ^ flip`,
//! where `flip` is 7 (a horizontal mirror: file a ↔ h) when the layout is mirrored and the
//! king stands on files e-h, else 0. XOR 7 only touches the file bits of the square, so a
//! mirrored index stays in its bucket's block. With one bucket and no mirror this is
//! `all768`, index for index.
//!
//! The static sets are types ([`super::FeatureSet`]); this one carries its layout, so its
//! methods take `&self`. It decomposes the same way for the loader's pass: the piece terms and
//! square flip of `all768`, and the king's `(xor, addend)` from a table built once.

use super::{All768, BoardDelta, FeatureDelta, FeatureError, FeatureSet, black};
use shakmaty::{Board, Color, Piece, Square};

/// Most king buckets a layout may use.
pub const MAX_BUCKETS: u32 = 64;

/// A layout that is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LayoutError {
    #[error("a king-bucket layout has 64 entries (a1 to h8), or 32 mirrored; this one has {0}")]
    Length(usize),
    #[error("bucket {0} is beyond the limit of {MAX_BUCKETS} buckets")]
    TooMany(u32),
    #[error("bucket {0} is empty: no king square maps to it")]
    Empty(u32),
}

/// The inputs of one king-bucket layout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KingBuckets {
    /// Per king square (from the perspective's own side): the XOR and the addend its index
    /// terms take, `(flip, 768·bucket)`.
    terms: [(u32, u32); 64],
    buckets: u32,
}

impl KingBuckets {
    /// From a layout of 64 buckets (a1 … h8), or of 32 with `mirror` (files a-d of each rank,
    /// rank 1 first; a king on files e-h takes the bucket of its mirror square and mirrors
    /// every piece).
    pub fn new(layout: &[u32], mirror: bool) -> Result<KingBuckets, LayoutError> {
        let want = if mirror { 32 } else { 64 };
        if layout.len() != want {
            return Err(LayoutError::Length(layout.len()));
        }
        if let Some(&big) = layout.iter().find(|&&b| b >= MAX_BUCKETS) {
            return Err(LayoutError::TooMany(big));
        }
        let buckets = layout.iter().max().map_or(0, |m| m + 1);
        if let Some(empty) = (0..buckets).find(|b| !layout.contains(b)) {
            return Err(LayoutError::Empty(empty));
        }
        let mut terms = [(0, 0); 64];
        for (ksq, t) in terms.iter_mut().enumerate() {
            let (file, rank) = (ksq % 8, ksq / 8);
            *t = if mirror {
                let flip = file > 3;
                let f = if flip { 7 - file } else { file };
                (if flip { 7 } else { 0 }, 768 * layout[rank * 4 + f])
            } else {
                (0, 768 * layout[ksq])
            };
        }
        Ok(KingBuckets { terms, buckets })
    }

    /// Width of the input layer.
    pub fn inputs(&self) -> usize {
        768 * self.buckets as usize
    }

    /// Most features one perspective has on (one per man).
    pub fn max_active(&self) -> usize {
        All768::MAX_ACTIVE
    }

    /// `(xor, addend)` of the perspective's king on `king` (see the module documentation).
    #[inline]
    pub fn king_terms(&self, perspective: Color, king: Square) -> (u32, u32) {
        self.terms[(king.to_u32() ^ (56 * black(perspective))) as usize]
    }

    /// The feature of `piece` on `sq` seen from `perspective`, whose king stands on `king`.
    #[inline]
    pub fn index(&self, perspective: Color, king: Square, piece: Piece, sq: Square) -> u32 {
        let (xor, add) = self.king_terms(perspective, king);
        let plain = All768::index(perspective, king, piece, sq).expect("all768 has every piece");
        (plain ^ xor) + add
    }

    /// Appends the features of `board` seen from `perspective` to `out`.
    pub fn active(
        &self,
        board: &Board,
        perspective: Color,
        out: &mut Vec<u32>,
    ) -> Result<(), FeatureError> {
        let king = board
            .king_of(perspective)
            .ok_or(FeatureError::NoKing(perspective))?;
        if board.occupied().count() > super::MAX_MEN as usize {
            return Err(FeatureError::TooManyMen);
        }
        for (sq, piece) in board.iter() {
            out.push(self.index(perspective, king, piece, sq));
        }
        Ok(())
    }

    /// Whether the perspective's accumulator must be rebuilt after `delta`: its king moved to
    /// another bucket, or across the mirror line.
    pub fn needs_refresh_for(&self, perspective: Color, delta: &BoardDelta) -> bool {
        delta.king_move(perspective).is_some_and(|(from, to)| {
            self.king_terms(perspective, from) != self.king_terms(perspective, to)
        })
    }

    /// Features `delta` switches off and on for `perspective`, whose king stands on `king`;
    /// valid when [`KingBuckets::needs_refresh_for`] is false.
    pub fn changed(&self, perspective: Color, king: Square, delta: &BoardDelta) -> FeatureDelta {
        let mut out = FeatureDelta::default();
        for &(piece, sq) in delta.removed() {
            out.push_removed(self.index(perspective, king, piece, sq));
        }
        for &(piece, sq) in delta.added() {
            out.push_added(self.index(perspective, king, piece, sq));
        }
        out
    }

    /// Turns one perspective's `all768` indices (what the loader's fast pass makes) into this
    /// layout's, in place. The perspective's own king is among them (`all768`'s own-king
    /// inputs, `320 + its square seen from its side`) and brings the XOR and the addend of
    /// every index. Without it the indices are left as they are and this errs.
    pub fn remap_all768(
        &self,
        perspective: Color,
        indices: &mut [i32],
    ) -> Result<(), FeatureError> {
        const OWN_KING: i32 = 64 * 5;
        let Some(&king) = indices
            .iter()
            .find(|&&i| (OWN_KING..OWN_KING + 64).contains(&i))
        else {
            return Err(FeatureError::NoKing(perspective));
        };
        let (xor, add) = self.terms[(king - OWN_KING) as usize];
        for i in indices.iter_mut() {
            *i = ((*i as u32 ^ xor) + add) as i32;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::features::FeatureSetKind;
    use shakmaty::{Chess, Position, Role};
    use std::collections::BTreeSet;

    /// bullet's progression layout (`examples/progression/3_input_buckets`).
    const BULLET: [u32; 32] = [
        0, 1, 2, 3, 4, 4, 5, 5, 6, 6, 6, 6, 7, 7, 7, 7, 8, 8, 8, 8, 8, 8, 8, 8, 9, 9, 9, 9, 9, 9,
        9, 9,
    ];

    /// bullet's `ChessBucketsMirrored`, written from its definition: the 32-entry layout
    /// expanded to 64 by `layout[rank·4 + [0,1,2,3,3,2,1,0][file]]`, the king square taken
    /// from the perspective's side, `flip = 7` for a king on files e-h, and
    /// `768·bucket + (chess768 ^ flip)` with `chess768 = 384·them + 64·role + relative sq`.
    fn bullet_index(
        layout: &[u32; 32],
        perspective: Color,
        king: Square,
        piece: Piece,
        sq: Square,
    ) -> u32 {
        let rel = |s: Square| match perspective {
            Color::White => s.to_u32(),
            Color::Black => s.to_u32() ^ 56,
        };
        let k = rel(king);
        let expanded = layout[((k / 8) * 4 + [0, 1, 2, 3, 3, 2, 1, 0][(k % 8) as usize]) as usize];
        let flip = if k % 8 > 3 { 7 } else { 0 };
        let them = u32::from(piece.color != perspective);
        let role = piece.role as u32 - 1;
        768 * expanded + ((384 * them + 64 * role + rel(sq)) ^ flip)
    }

    #[test]
    fn indices_are_bullet_s_chess_buckets_mirrored() {
        let kb = KingBuckets::new(&BULLET, true).unwrap();
        assert_eq!(kb.inputs(), 7680);
        for perspective in Color::ALL {
            for king in Square::ALL {
                for sq in Square::ALL {
                    for color in Color::ALL {
                        for role in Role::ALL {
                            let piece = Piece { color, role };
                            assert_eq!(
                                kb.index(perspective, king, piece, sq),
                                bullet_index(&BULLET, perspective, king, piece, sq),
                                "{perspective:?} king {king} {piece:?} on {sq}"
                            );
                        }
                    }
                }
            }
        }
    }

    /// The loader's way (all768 indices, then the own king's terms) gives the same lists as
    /// the direct one, along random games, for both perspectives.
    #[test]
    fn all768_indices_remap_to_the_layout() {
        let kb = KingBuckets::new(&BULLET, true).unwrap();
        let mut rng = crate::random_games::SplitMix(11);
        let mut pos = Chess::default();
        for _ in 0..3000 {
            let moves = pos.legal_moves();
            if moves.is_empty() {
                pos = Chess::default();
                continue;
            }
            pos.play_unchecked(moves[rng.below(moves.len() as u64) as usize]);
            for p in Color::ALL {
                let mut plain = Vec::new();
                FeatureSetKind::All768
                    .active_features(pos.board(), p, &mut plain)
                    .unwrap();
                let mut remapped: Vec<i32> = plain.iter().map(|&i| i as i32).collect();
                kb.remap_all768(p, &mut remapped).unwrap();
                let mut direct = Vec::new();
                kb.active(pos.board(), p, &mut direct).unwrap();
                assert_eq!(
                    remapped.iter().map(|&i| i as u32).collect::<BTreeSet<_>>(),
                    direct.into_iter().collect::<BTreeSet<_>>(),
                    "{p:?} in {}",
                    pos.board()
                );
            }
        }
        let mut no_king = vec![0, 1, 2];
        assert!(kb.remap_all768(Color::White, &mut no_king).is_err());
        assert_eq!(no_king, [0, 1, 2]);
    }

    /// bullet's `ChessBucketsMirrored`: files e-h mirror onto d-a, the layout read by
    /// `rank · 4 + file` (moved here from the schemas, which no longer repeat the rule).
    #[test]
    fn king_buckets_mirror_files_e_to_h() {
        let kb = KingBuckets::new(&BULLET, true).unwrap();
        // a1, h1 (mirrored onto a1), d1, e1 (onto d1), c2, h8.
        for (king, (bucket, mirrored)) in [
            (0, (0, false)),
            (7, (0, true)),
            (3, (3, false)),
            (4, (3, true)),
            (10, (5, false)),
            (63, (9, true)),
        ] {
            let want = (if mirrored { 7 } else { 0 }, 768 * bucket);
            assert_eq!(
                kb.king_terms(Color::White, Square::new(king)),
                want,
                "king on {king}"
            );
        }
    }

    /// One bucket, no mirror: `all768`, index for index.
    #[test]
    fn one_bucket_is_all768() {
        let kb = KingBuckets::new(&[0; 64], false).unwrap();
        let b = Chess::default().board().clone();
        for p in Color::ALL {
            let mut ours = Vec::new();
            kb.active(&b, p, &mut ours).unwrap();
            let mut theirs = Vec::new();
            FeatureSetKind::All768
                .active_features(&b, p, &mut theirs)
                .unwrap();
            assert_eq!(
                ours.into_iter().collect::<BTreeSet<_>>(),
                theirs.into_iter().collect::<BTreeSet<_>>()
            );
        }
    }

    #[test]
    fn bad_layouts_are_refused() {
        assert_eq!(
            KingBuckets::new(&[0; 31], true),
            Err(LayoutError::Length(31))
        );
        assert_eq!(
            KingBuckets::new(&[0; 32], false),
            Err(LayoutError::Length(32))
        );
        let mut gap = BULLET;
        gap[31] = 11;
        assert_eq!(KingBuckets::new(&gap, true), Err(LayoutError::Empty(10)));
        assert_eq!(
            KingBuckets::new(&[64; 64], false),
            Err(LayoutError::TooMany(64))
        );
        let mut huge = [0; 64];
        huge[5] = u32::MAX;
        assert_eq!(
            KingBuckets::new(&huge, false),
            Err(LayoutError::TooMany(u32::MAX))
        );
    }

    /// Along random games, the per-move deltas (or a refresh where the king changed bucket or
    /// crossed the mirror line) give the full list after every move, for both perspectives;
    /// the games include king moves of both kinds.
    #[test]
    fn incremental_updates_match_refresh_across_buckets_and_the_mirror() {
        let kb = KingBuckets::new(&BULLET, true).unwrap();
        let full = |b: &Board, p| {
            let mut v = Vec::new();
            kb.active(b, p, &mut v).unwrap();
            v.into_iter().collect::<BTreeSet<u32>>()
        };
        let (mut bucket_changes, mut mirror_changes, mut quiet_king_moves) = (0, 0, 0);
        let mut rng = crate::random_games::SplitMix(0x9E37_79B9);
        for _game in 0..60 {
            let mut pos = Chess::default();
            let mut sets = Color::ALL.map(|p| full(pos.board(), p));
            for _ply in 0..400 {
                let moves = pos.legal_moves();
                if moves.is_empty() {
                    break;
                }
                let mv = moves[rng.below(moves.len() as u64) as usize];
                let turn = pos.turn();
                let delta = BoardDelta::from_move(turn, mv);
                let before = Color::ALL.map(|c| pos.board().king_of(c).unwrap());
                pos.play_unchecked(mv);
                let b = pos.board();
                for (set, (p, king_before)) in
                    sets.iter_mut().zip(Color::ALL.into_iter().zip(before))
                {
                    let king = b.king_of(p).unwrap();
                    let (t0, t1) = (kb.king_terms(p, king_before), kb.king_terms(p, king));
                    if t0.1 != t1.1 {
                        bucket_changes += 1;
                    }
                    if t0.0 != t1.0 {
                        mirror_changes += 1;
                    }
                    if king != king_before && t0 == t1 {
                        quiet_king_moves += 1;
                    }
                    if kb.needs_refresh_for(p, &delta) {
                        assert_ne!(t0, t1);
                        *set = full(b, p);
                    } else {
                        let d = kb.changed(p, king, &delta);
                        for i in d.removed() {
                            assert!(set.remove(i), "{i} was not on");
                        }
                        for &i in d.added() {
                            assert!(set.insert(i), "{i} already on");
                        }
                    }
                    assert_eq!(*set, full(b, p), "{p:?} after {mv:?} in {b}");
                    assert!(set.iter().all(|&i| (i as usize) < kb.inputs()));
                }
            }
        }
        assert!(
            bucket_changes > 0 && mirror_changes > 0 && quiet_king_moves > 0,
            "buckets {bucket_changes}, mirror {mirror_changes}, same terms {quiet_king_moves}"
        );
    }
}
