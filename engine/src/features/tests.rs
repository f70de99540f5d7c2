//! Tests of `features.rs`.

use std::collections::BTreeSet;

use shakmaty::fen::Fen;
use shakmaty::{CastlingMode, Chess, Position};

use super::*;

use Color::{Black, White};

const START: &str = "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR";

fn board(board_fen: &str) -> Board {
    Board::from_ascii_board_fen(board_fen.as_bytes()).unwrap()
}

fn features(kind: FeatureSetKind, board: &Board, perspective: Color) -> Vec<u32> {
    let mut out = Vec::new();
    kind.active_features(board, perspective, &mut out).unwrap();
    out.sort_unstable();
    out
}

fn piece(color: Color, role: Role) -> Piece {
    Piece { color, role }
}

/// xorshift64: deterministic, no dependency.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

#[test]
fn features_all768_start_position_by_hand() {
    // White: pawns a2..h2 = 8..15; Nb1 = 64+1; Bc1 = 128+2; Ra1 = 192+0; Qd1 = 256+3;
    // Ke1 = 320+4. Black pieces add 384: a7 pawn = 384+48 = 432, ke8 = 384+320+60 = 764.
    #[rustfmt::skip]
    let expected = vec![
        8, 9, 10, 11, 12, 13, 14, 15, 65, 70, 130, 133, 192, 199, 259, 324,
        432, 433, 434, 435, 436, 437, 438, 439, 505, 510, 570, 573, 632, 639, 699, 764,
    ];
    let b = board(START);
    assert_eq!(features(FeatureSetKind::All768, &b, White), expected);
    // Black flips ranks: its a7 pawn is "own pawn on a2" = 8, White's Ke1 is
    // "their king on e8" = 384+320+60 = 764. The start position is rank-symmetric.
    assert_eq!(features(FeatureSetKind::All768, &b, Black), expected);
}

#[test]
fn features_halfkp_start_position_by_hand() {
    // White: king e1 = 4, base 641*4 + 1 = 2565. Own pawn a2: 2565 + 0*64 + 8 = 2573.
    // Their pawn a7: 2565 + 1*64 + 48 = 2677. Own queen d1: 2565 + 8*64 + 3 = 3080.
    // Their queen d8: 2565 + 9*64 + 59 = 3200.
    #[rustfmt::skip]
    let white = vec![
        2573, 2574, 2575, 2576, 2577, 2578, 2579, 2580, // own pawns
        2677, 2678, 2679, 2680, 2681, 2682, 2683, 2684, // their pawns
        2694, 2699, 2814, 2819, // knights
        2823, 2826, 2943, 2946, // bishops
        2949, 2956, 3069, 3076, // rooks
        3080, 3200, // queens
    ];
    // Black rotates (sq ^ 63): king e8 = 60 -> 3, base 641*3 + 1 = 1924. Own queen d8 = 59
    // -> 4: 1924 + 8*64 + 4 = 2440. Their queen d1 = 3 -> 60: 1924 + 9*64 + 60 = 2560.
    // Rotation swaps the king and queen sides, so apart from the queens this is the white
    // list shifted down one king block (641).
    #[rustfmt::skip]
    let black = vec![
        1932, 1933, 1934, 1935, 1936, 1937, 1938, 1939,
        2036, 2037, 2038, 2039, 2040, 2041, 2042, 2043,
        2053, 2058, 2173, 2178,
        2182, 2185, 2302, 2305,
        2308, 2315, 2428, 2435,
        2440, 2560,
    ];
    let b = board(START);
    assert_eq!(features(FeatureSetKind::HalfKp, &b, White), white);
    assert_eq!(features(FeatureSetKind::HalfKp, &b, Black), black);
}

#[test]
fn features_halfka_v2_hm_start_position_by_hand() {
    // King e1: no mirror, bucket 31, base 31*704 = 21824. Own pawn a2: 21824 + 8 = 21832.
    // Their queen d8: 21824 + 9*64 + 59 = 22459. Kings share plane 10:
    // Ke1 = 21824 + 640 + 4 = 22468, ke8 = 21824 + 640 + 60 = 22524.
    #[rustfmt::skip]
    let expected = vec![
        21832, 21833, 21834, 21835, 21836, 21837, 21838, 21839,
        21936, 21937, 21938, 21939, 21940, 21941, 21942, 21943,
        21953, 21958, 22073, 22078,
        22082, 22085, 22202, 22205,
        22208, 22215, 22328, 22335,
        22339, 22459,
        22468, 22524,
    ];
    let b = board(START);
    assert_eq!(features(FeatureSetKind::HalfKaV2Hm, &b, White), expected);
    // Black's king e8 flips to e1: same bucket, same list.
    assert_eq!(features(FeatureSetKind::HalfKaV2Hm, &b, Black), expected);
}

#[test]
fn features_start_position_counts() {
    let b = board(START);
    for (kind, n) in [
        (FeatureSetKind::All768, 32),
        (FeatureSetKind::HalfKp, 30),
        (FeatureSetKind::HalfKaV2Hm, 32),
    ] {
        for p in Color::ALL {
            assert_eq!(features(kind, &b, p).len(), n, "{kind} {p:?}");
        }
        assert_eq!(kind.max_active(), n);
    }
}

#[test]
fn features_queen_side_king_by_hand() {
    // White Kd1, Pa2; black kh1.
    let b = board("8/8/8/8/8/8/P7/3K3k");
    // all768. White: Pa2 = 8, Kd1 = 320+3 = 323, kh1 = 384+320+7 = 711.
    // Black (sq ^ 56): Pa2 -> a7: 384+48 = 432; Kd1 -> d8: 384+320+59 = 763;
    // kh1 -> h8: 320+63 = 383.
    assert_eq!(features(FeatureSetKind::All768, &b, White), [8, 323, 711]);
    assert_eq!(features(FeatureSetKind::All768, &b, Black), [383, 432, 763]);
    // halfkp. White: king d1 = 3, Pa2 = 641*3 + 1 + 8 = 1932.
    // Black: king h1 ^ 63 = 56, Pa2 = 641*56 + 1 + 64 + (8 ^ 63 = 55) = 36016.
    assert_eq!(features(FeatureSetKind::HalfKp, &b, White), [1932]);
    assert_eq!(features(FeatureSetKind::HalfKp, &b, Black), [36016]);
    // halfka_v2_hm. White king on d1 mirrors files (flip 7): d1 -> e1, bucket 31, base
    // 21824. Pa2 -> h2 = 15: 21839. Kd1 -> e1: 21824+640+4 = 22468. kh1 -> a1: 22464.
    // Black king h1: no mirror, flip 56, h1 -> h8: bucket 0. Pa2 -> a7: 64 + 48 = 112.
    // Kd1 -> d8: 640 + 59 = 699. kh1 -> h8: 640 + 63 = 703.
    assert_eq!(
        features(FeatureSetKind::HalfKaV2Hm, &b, White),
        [21839, 22464, 22468]
    );
    assert_eq!(
        features(FeatureSetKind::HalfKaV2Hm, &b, Black),
        [112, 699, 703]
    );
}

#[test]
fn features_king_buckets_match_stockfish_table() {
    // Stockfish's KingBuckets rows for White, rank 1 and rank 8.
    let rank1 = [28, 29, 30, 31, 31, 30, 29, 28];
    let rank8 = [0, 1, 2, 3, 3, 2, 1, 0];
    for file in 0..8 {
        assert_eq!(
            HalfKaV2Hm::king_bucket(White, Square::new(file)),
            rank1[file as usize]
        );
        assert_eq!(
            HalfKaV2Hm::king_bucket(White, Square::new(56 + file)),
            rank8[file as usize]
        );
        assert_eq!(
            HalfKaV2Hm::king_bucket(Black, Square::new(56 + file)),
            rank1[file as usize]
        );
        assert_eq!(
            HalfKaV2Hm::king_bucket(Black, Square::new(file)),
            rank8[file as usize]
        );
    }
}

/// Every (king, piece, square) combination maps inside the input range, and the ranges are
/// fully used except HalfKP's never-active slot 0 of each king block.
#[test]
fn features_indices_in_range_and_cover_inputs() {
    for kind in FeatureSetKind::ALL {
        for p in Color::ALL {
            let mut seen = BTreeSet::new();
            for k in Square::ALL {
                for color in Color::ALL {
                    for role in Role::ALL {
                        for sq in Square::ALL {
                            if let Some(i) = kind.index(p, k, piece(color, role), sq) {
                                assert!((i as usize) < kind.inputs(), "{kind} {i}");
                                seen.insert(i);
                            }
                        }
                    }
                }
            }
            match kind {
                FeatureSetKind::HalfKp => {
                    assert_eq!(seen.len(), 64 * 640);
                    assert!(seen.iter().all(|i| i % 641 != 0));
                }
                _ => assert_eq!(seen.len(), kind.inputs(), "{kind}"),
            }
        }
    }
}

/// A position and its colour-swapped image (ranks flipped for all768 and halfka_v2_hm,
/// rotated for halfkp, matching each set's orientation) give the same lists with the
/// perspectives swapped.
#[test]
fn features_symmetric_under_colour_flip() {
    let mut boards = vec![
        board(START),
        board("8/8/8/8/8/8/P7/3K3k"),
        board("r3k2r/pp1n1ppp/2p1b3/q7/3P4/2N2N2/PPQ2PPP/1K1R3R"),
        board("4k3/8/8/3pP3/8/8/8/R3K2R"),
    ];
    let mut rng = Rng(7);
    for _ in 0..20 {
        let mut pos = Chess::default();
        for _ in 0..(20 + rng.below(60)) {
            let moves = pos.legal_moves();
            if moves.is_empty() {
                break;
            }
            pos.play_unchecked(moves[rng.below(moves.len())]);
        }
        boards.push(pos.board().clone());
    }
    for b in &boards {
        let mirrored = b.clone().into_mirrored();
        let mut rotated = b.clone();
        rotated.rotate_180();
        rotated.swap_colors();
        let mut side_mirrored = b.clone();
        side_mirrored.flip_horizontal();
        for p in Color::ALL {
            for (kind, image) in [
                (FeatureSetKind::All768, &mirrored),
                (FeatureSetKind::HalfKp, &rotated),
                (FeatureSetKind::HalfKaV2Hm, &mirrored),
                (FeatureSetKind::HalfKaV2Hm, &rotated),
            ] {
                assert_eq!(
                    features(kind, b, p),
                    features(kind, image, !p),
                    "{kind} {b}"
                );
            }
            // Horizontal mirroring is built into halfka_v2_hm.
            assert_eq!(
                features(FeatureSetKind::HalfKaV2Hm, b, p),
                features(FeatureSetKind::HalfKaV2Hm, &side_mirrored, p)
            );
        }
    }
}

#[test]
fn features_names_round_trip() {
    for kind in FeatureSetKind::ALL {
        assert_eq!(FeatureSetKind::from_name(kind.name()), Ok(kind));
        assert_eq!(kind.to_string().parse::<FeatureSetKind>(), Ok(kind));
    }
    assert_eq!(FeatureSetKind::HalfKp.inputs(), 41_024);
    assert_eq!(FeatureSetKind::HalfKaV2Hm.inputs(), 22_528);
    assert_eq!(FeatureSetKind::All768.inputs(), 768);
    let err = FeatureSetKind::from_name("HalfKP").unwrap_err();
    assert!(err.to_string().contains("halfka_v2_hm"), "{err}");
}

#[test]
fn features_need_a_king_only_when_king_relative() {
    let b = board("8/8/8/8/8/8/P7/7k");
    let mut out = Vec::new();
    assert_eq!(
        FeatureSetKind::HalfKp.active_features(&b, White, &mut out),
        Err(FeatureError::NoKing(White))
    );
    assert_eq!(
        FeatureSetKind::HalfKaV2Hm.active_features(&b, White, &mut out),
        Err(FeatureError::NoKing(White))
    );
    assert!(out.is_empty());
    FeatureSetKind::All768
        .active_features(&b, White, &mut out)
        .unwrap();
    assert_eq!(out.len(), 2);
}

#[test]
fn features_refresh_rules() {
    let k = piece(White, Role::King);
    let (d1, e1, f1, e2) = (Square::D1, Square::E1, Square::F1, Square::E2);
    for (kind, own_king_moves) in [
        (FeatureSetKind::All768, false),
        (FeatureSetKind::HalfKp, true),
        (FeatureSetKind::HalfKaV2Hm, true),
    ] {
        assert_eq!(
            kind.needs_refresh(White, k, e1, f1),
            own_king_moves,
            "{kind}"
        );
        assert_eq!(
            kind.needs_refresh(White, k, e1, e2),
            own_king_moves,
            "{kind}"
        );
        // The other side's king, and non-king pieces, never force a refresh.
        assert!(!kind.needs_refresh(Black, k, e1, f1), "{kind}");
        assert!(!kind.needs_refresh(White, piece(White, Role::Queen), d1, e2));
    }
    // d1 and e1 share bucket 31 in halfka_v2_hm but differ in mirroring.
    assert_eq!(
        HalfKaV2Hm::king_bucket(White, d1),
        HalfKaV2Hm::king_bucket(White, e1)
    );
    assert!(HalfKaV2Hm::needs_refresh(White, k, d1, e1));
}

fn play(fen: &str, uci: &str, mode: CastlingMode) -> (Chess, BoardDelta) {
    let pos: Chess = fen.parse::<Fen>().unwrap().into_position(mode).unwrap();
    let mv = uci
        .parse::<shakmaty::uci::UciMove>()
        .unwrap()
        .to_move(&pos)
        .unwrap();
    (pos.clone(), BoardDelta::from_move(pos.turn(), mv))
}

#[test]
fn features_board_delta_special_moves() {
    let std = CastlingMode::Standard;
    let (_, d) = play("r3k2r/8/8/8/8/8/8/R3K2R w KQkq - 0 1", "e1g1", std);
    let (wk, wr) = (piece(White, Role::King), piece(White, Role::Rook));
    assert_eq!(d.removed(), [(wk, Square::E1), (wr, Square::H1)]);
    assert_eq!(d.added(), [(wk, Square::G1), (wr, Square::F1)]);
    assert_eq!(d.king_move(White), Some((Square::E1, Square::G1)));
    assert_eq!(d.king_move(Black), None);

    let (_, d) = play("r3k2r/8/8/8/8/8/8/R3K2R b KQkq - 0 1", "e8c8", std);
    let (bk, br) = (piece(Black, Role::King), piece(Black, Role::Rook));
    assert_eq!(d.removed(), [(bk, Square::E8), (br, Square::A8)]);
    assert_eq!(d.added(), [(bk, Square::C8), (br, Square::D8)]);

    let (_, d) = play("4k3/8/8/3pP3/8/8/8/4K3 w - d6 0 2", "e5d6", std);
    let (wp, bp) = (piece(White, Role::Pawn), piece(Black, Role::Pawn));
    assert_eq!(d.removed(), [(wp, Square::E5), (bp, Square::D5)]);
    assert_eq!(d.added(), [(wp, Square::D6)]);

    let (_, d) = play("1r2k3/P7/8/8/8/8/8/4K3 w - - 0 1", "a7b8q", std);
    assert_eq!(d.removed(), [(wp, Square::A7), (br, Square::B8)]);
    assert_eq!(d.added(), [(piece(White, Role::Queen), Square::B8)]);

    // Chess960: king already on g1 castles short; only the rook moves.
    let (_, d) = play(
        "4k3/8/8/8/8/8/8/6KR w H - 0 1",
        "g1h1",
        CastlingMode::Chess960,
    );
    assert_eq!(d.removed(), [(wr, Square::H1)]);
    assert_eq!(d.added(), [(wr, Square::F1)]);
    assert_eq!(d.king_move(White), None);
    for kind in FeatureSetKind::ALL {
        assert!(!kind.needs_refresh_for(White, &d));
    }

    // halfka_v2_hm deltas are in the moving perspective's king frame: black's Ra8-d8 after
    // castling long, seen by White (king e1, bucket 31): their rook plane 7.
    let (_, d) = play("r3k2r/8/8/8/8/8/8/R3K2R b KQkq - 0 1", "e8c8", std);
    let fd = HalfKaV2Hm::changed(White, Square::E1, &d);
    let base = 31 * 704;
    assert_eq!(fd.removed(), [base + 640 + 60, base + 7 * 64 + 56]);
    assert_eq!(fd.added(), [base + 640 + 58, base + 7 * 64 + 59]);
    // HalfKP ignores the enemy king entirely.
    let fd = HalfKp::changed(White, Square::E1, &d);
    assert_eq!(fd.removed().len(), 1);
    assert_eq!(fd.added().len(), 1);
}

fn chess960_start(n: u32) -> Chess {
    let fen = format!("{} w KQkq - 0 1", Board::chess960(n));
    fen.parse::<Fen>()
        .unwrap()
        .into_position(CastlingMode::Chess960)
        .unwrap()
}

const TACTICAL: [&str; 3] = [
    "r3k2r/p1ppqpb1/bn2pnp1/3PN3/1p2P3/2N2Q1p/PPPBBPPP/R3K2R w KQkq - 0 1",
    "8/2p5/3p4/KP5r/1R3p1k/8/4P1P1/8 w - - 0 1",
    "n1n5/PPPk4/8/8/8/8/4Kppp/5N1N b - - 0 1",
];

#[derive(Default, Debug)]
struct Seen {
    plies: usize,
    castles: usize,
    en_passant: usize,
    promotions: usize,
    capture_promotions: usize,
    refreshes: usize,
}

/// Over many random legal games, applying the per-move deltas (or refreshing when told to)
/// reproduces the full recomputation after every move, for every set and perspective.
#[test]
fn features_incremental_updates_match_full_recompute() {
    const GAMES: usize = 240;
    const MAX_PLIES: usize = 300;
    let mut rng = Rng(0x2545_F491_4F6C_DD1D);
    let mut seen = Seen::default();
    let full = |kind, b: &Board, p| features(kind, b, p).into_iter().collect::<BTreeSet<_>>();

    for game in 0..GAMES {
        let mut pos = match game % 4 {
            0 | 1 => Chess::default(),
            2 => chess960_start(rng.below(960) as u32),
            // Perft positions thick with castling, en passant and promotions.
            _ => TACTICAL[game / 4 % TACTICAL.len()]
                .parse::<Fen>()
                .unwrap()
                .into_position(CastlingMode::Standard)
                .unwrap(),
        };
        let mut acc: Vec<[BTreeSet<u32>; 2]> = FeatureSetKind::ALL
            .iter()
            .map(|&k| Color::ALL.map(|p| full(k, pos.board(), p)))
            .collect();

        for _ in 0..MAX_PLIES {
            let moves = pos.legal_moves();
            if moves.is_empty() {
                break;
            }
            let mv = moves[rng.below(moves.len())];
            let turn = pos.turn();
            let delta = BoardDelta::from_move(turn, mv);
            let kings_before = Color::ALL.map(|c| pos.board().king_of(c).unwrap());
            seen.plies += 1;
            seen.castles += usize::from(mv.is_castle());
            seen.en_passant += usize::from(mv.is_en_passant());
            seen.promotions += usize::from(mv.is_promotion());
            seen.capture_promotions += usize::from(mv.is_promotion() && mv.is_capture());
            pos.play_unchecked(mv);
            let b = pos.board();

            for (kind, sets) in FeatureSetKind::ALL.iter().zip(acc.iter_mut()) {
                for ((p, set), king_before) in Color::ALL.into_iter().zip(sets).zip(kings_before) {
                    let king = b.king_of(p).unwrap();
                    let refresh = kind.needs_refresh_for(p, &delta);
                    let king_moved = king != king_before;
                    assert_eq!(refresh, king_moved && *kind != FeatureSetKind::All768);
                    if let Move::Normal { role, from, to, .. } = mv {
                        let moved = piece(turn, role);
                        assert_eq!(refresh, kind.needs_refresh(p, moved, from, to));
                    }
                    if refresh {
                        seen.refreshes += 1;
                        *set = full(*kind, b, p);
                    } else {
                        let fd = kind.changed(p, king, &delta);
                        for i in fd.removed() {
                            assert!(set.remove(i), "{kind} {p:?} {mv:?}: {i} was not on");
                        }
                        for &i in fd.added() {
                            assert!(set.insert(i), "{kind} {p:?} {mv:?}: {i} already on");
                        }
                    }
                    assert_eq!(*set, full(*kind, b, p), "{kind} {p:?} after {mv:?} in {b}");
                    assert!(set.len() <= kind.max_active());
                    assert!(set.iter().all(|&i| (i as usize) < kind.inputs()));
                }
            }
        }
    }
    eprintln!("{seen:?}");
    assert!(seen.castles > 0 && seen.en_passant > 0, "{seen:?}");
    assert!(
        seen.promotions > 0 && seen.capture_promotions > 0,
        "{seen:?}"
    );
}

/// The split the loader computes (`PIECE_TERMS`, `SQUARE_FLIP`, `king_terms`) is `index`, for
/// every perspective, king square, piece and square, and has no input exactly where `index`
/// has none; codes that are no piece have no input.
#[test]
fn piece_terms_recompose_every_index() {
    fn check<S: FeatureSet>() {
        for perspective in Color::ALL {
            let b = black(perspective) as usize;
            for code in [0, 7, 8, 15] {
                assert_eq!(S::PIECE_TERMS[b][code], NO_INPUT, "{} code {code}", S::NAME);
                assert_eq!(S::HAS_INPUT[code], 0);
            }
            for king in Square::ALL {
                let (x, a) = S::king_terms(perspective, king);
                // The AVX2 pass folds the king's XOR into the square's: it has to stay below
                // every term's multiple of 64.
                let terms_clear = S::PIECE_TERMS[b]
                    .iter()
                    .all(|&t| t == NO_INPUT || t % 64 == 0);
                assert!(
                    x == 0 || (x < 8 && terms_clear),
                    "{} {perspective:?} {king}",
                    S::NAME
                );
                for color in Color::ALL {
                    for role in Role::ALL {
                        let piece = piece(color, role);
                        let term = S::PIECE_TERMS[b][piece_code(piece) as usize];
                        for sq in Square::ALL {
                            let want = S::index(perspective, king, piece, sq);
                            let got = (term != NO_INPUT)
                                .then(|| ((term + (sq.to_u32() ^ S::SQUARE_FLIP[b])) ^ x) + a);
                            assert_eq!(
                                got,
                                want,
                                "{} {perspective:?} {king} {piece:?} {sq}",
                                S::NAME
                            );
                        }
                    }
                }
            }
        }
    }
    check::<All768>();
    check::<HalfKp>();
    check::<HalfKaV2Hm>();
}
