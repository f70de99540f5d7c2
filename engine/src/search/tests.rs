//! Tests of `search.rs`.

use super::*;

use crate::fen::test_position as pos;

fn search(fen: &str, limits: Limits) -> SearchResult {
    Searcher::new(Evaluator::Classical, 4).search(&pos(fen), &[], &limits, |_| {})
}

/// Plain minimax: can the side to move force mate within `moves` moves?
fn forces_mate(pos: &Chess, moves: u32) -> bool {
    moves > 0
        && pos.legal_moves().iter().any(|&m| {
            let mut p = pos.clone();
            p.play_unchecked(m);
            p.is_checkmate()
                || (!p.legal_moves().is_empty()
                    && p.legal_moves().iter().all(|&r| {
                        let mut q = p.clone();
                        q.play_unchecked(r);
                        forces_mate(&q, moves - 1)
                    }))
        })
}

/// Every evaluation inside real searches (null moves, captures, castling, promotions,
/// checks) equals a refresh of the searched position: the accumulator stack never goes
/// stale however the search walks the tree.
#[test]
fn nnue_search_evaluates_the_position_it_is_at() {
    use crate::features::FeatureSetKind;
    crate::eval::VERIFY_SEARCH.store(true, std::sync::atomic::Ordering::Relaxed);
    for (i, kind) in [
        FeatureSetKind::All768,
        FeatureSetKind::HalfKp,
        FeatureSetKind::HalfKaV2Hm,
    ]
    .into_iter()
    .enumerate()
    {
        // Small and full-size widths: the SIMD kernels take other paths for each.
        for arch in ["32x2-8-8", "256x2-32-32"] {
            let net = Arc::new(crate::nnue::random_network(kind, arch, i as u64));
            let mut s = Searcher::new(Evaluator::Nnue(net), 4);
            for fen in crate::bench::POSITIONS {
                let limits = Limits {
                    nodes: Some(3000),
                    ..Limits::default()
                };
                s.search(&pos(fen), &[], &limits, |_| {});
            }
        }
    }
    crate::eval::VERIFY_SEARCH.store(false, std::sync::atomic::Ordering::Relaxed);
}

#[test]
fn finds_the_shortest_mate_a_brute_force_confirms() {
    for fen in [
        "6k1/5ppp/8/8/8/8/5PPP/R5K1 w - - 0 1",
        "7k/8/5K2/8/8/8/8/R7 w - - 0 1",
        "r1bqkb1r/pppp1ppp/2n2n2/4p2Q/2B1P3/8/PPPP1PPP/RNB1K1NR w KQkq - 4 4",
    ] {
        let p = pos(fen);
        let shortest = (1..=3).find(|&n| forces_mate(&p, n)).expect("a mate in 3");
        let r = search(fen, Limits::depth(2 * shortest + 2));
        assert_eq!(
            Score::from_internal(r.value, &p),
            Score::Mate(shortest as i32),
            "{fen}"
        );
        let mut after = p.clone();
        after.play_unchecked(r.best.unwrap());
        if shortest == 1 {
            assert!(after.is_checkmate(), "{fen}");
        } else {
            assert!(!after.legal_moves().is_empty(), "{fen}");
        }
    }
    // The side being mated sees a negative mate score.
    let fen = "8/8/8/8/8/5kq1/P7/7K w - - 0 1";
    let r = search(fen, Limits::depth(4));
    assert_eq!(r.value, -VALUE_MATE + 2);
    assert_eq!(Score::from_internal(r.value, &pos(fen)), Score::Mate(-1));
    // Already mated: no move.
    let r = search("6k1/5ppp/8/8/8/8/r4PPP/r5K1 w - - 0 1", Limits::depth(4));
    assert_eq!((r.best, r.value), (None, -VALUE_MATE));
}

#[test]
fn static_exchange_evaluation() {
    let gain = |fen: &str, uci: &str| {
        let p = pos(fen);
        let m: shakmaty::uci::UciMove = uci.parse().unwrap();
        see(&p, &m.to_move(&p).unwrap())
    };
    assert_eq!(gain("4k3/8/8/3p4/4P3/8/8/4K3 w - - 0 1", "e4d5"), 100);
    assert_eq!(gain("4k3/8/1n6/3p4/4P3/8/8/4K3 w - - 0 1", "e4d5"), 0);
    assert_eq!(gain("4k3/8/1n6/3p4/8/8/3Q4/4K3 w - - 0 1", "d2d5"), -800);
    // Rooks stacked behind each other (x-rays) on both sides.
    assert_eq!(gain("3rk3/3r4/8/3p4/8/8/3R4/3RK3 w - - 0 1", "d2d5"), -400);
    assert_eq!(gain("3rk3/8/8/3p4/8/8/3R4/3RK3 w - - 0 1", "d2d5"), 100);
    // A king may not take a defended piece.
    assert_eq!(gain("4k3/8/8/8/8/3q4/8/3RK3 b - - 0 1", "d3d1"), 500 - 900);
    assert_eq!(gain("4k3/8/8/8/8/3qn3/8/3RK3 b - - 0 1", "d3d1"), 500);
}

#[test]
fn draws_are_scored_zero() {
    // Stalemate: no move, value 0.
    let r = search("7k/5Q2/6K1/8/8/8/8/8 b - - 0 1", Limits::depth(3));
    assert_eq!((r.best, r.value), (None, 0));
    // King and knight against king: every line is a draw.
    assert_eq!(
        search("8/8/8/4k3/8/8/8/4K2N w - - 0 1", Limits::depth(5)).value,
        0
    );
    // A queen up, but the next non-capture reaches the fifty-move limit.
    let fifty = "8/8/8/4k3/8/8/Q7/4K3 w - - 99 80";
    assert_eq!(search(fifty, Limits::depth(5)).value, 0);
    let fresh = "8/8/8/4k3/8/8/Q7/4K3 w - - 0 80";
    assert!(search(fresh, Limits::depth(5)).value > 2000);
}

#[test]
fn repetitions_within_the_fifty_move_window() {
    let mut s = Searcher::new(Evaluator::Classical, 1);
    s.keys = vec![7, 1, 2, 3, 7];
    assert!(s.is_repetition(4));
    assert!(
        !s.is_repetition(3),
        "a capture or pawn move in between breaks it"
    );
    s.keys = vec![7, 1, 7];
    assert!(
        !s.is_repetition(10),
        "two plies back is the other side to move"
    );
    // Through a search: the start position after knights out and back, with the game
    // so far as history, repeats when Black brings its knight home (a draw, value 0),
    // which a depth-1 search sees exactly for that move.
    let start = Chess::default();
    let mut history = vec![hash(&start)];
    let mut p = start.clone();
    for m in ["g1f3", "g8f6", "f3g1"] {
        let uci: shakmaty::uci::UciMove = m.parse().unwrap();
        p.play_unchecked(uci.to_move(&p).unwrap());
        history.push(hash(&p));
    }
    history.pop();
    let mut s = Searcher::new(Evaluator::Classical, 1);
    s.keys = history.clone();
    s.keys.push(hash(&p));
    s.eval.reset(&p);
    let home: shakmaty::uci::UciMove = "f6g8".parse().unwrap();
    let mut child = p.clone();
    child.play_unchecked(home.to_move(&p).unwrap());
    s.keys.push(hash(&child));
    assert!(s.is_repetition(child.halfmoves()));
}

#[test]
fn node_limited_searches_are_deterministic() {
    let fen = "r1bqkb1r/pppp1ppp/2n2n2/4p3/2B1P3/5N2/PPPP1PPP/RNBQK2R w KQkq - 4 4";
    let a = search(fen, Limits::nodes(30_000));
    let b = search(fen, Limits::nodes(30_000));
    assert_eq!(
        (a.best, a.value, a.depth, a.nodes),
        (b.best, b.value, b.depth, b.nodes)
    );
    assert!(a.nodes <= 30_000 && a.nodes > 25_000, "{}", a.nodes);
    assert!(a.depth >= 4, "depth {}", a.depth);
}

/// The time budget is a pure function of the limits: checked exactly, not by a clock.
#[test]
fn time_budgets_follow_the_clock_and_movetime() {
    let ms = Duration::from_millis;
    let movetime = Limits {
        movetime: Some(ms(150)),
        ..Limits::default()
    };
    assert_eq!(
        movetime.budget(Color::White),
        (Some(ms(140)), Some(ms(140)))
    );
    // 3 s on the clock, 30 moves to go by default: soft 100 ms, hard 300 ms, less the
    // 10 ms overhead; the side without a clock gets no budget.
    let clock = Limits {
        wtime: Some(ms(3000)),
        ..Limits::default()
    };
    assert_eq!(clock.budget(Color::White), (Some(ms(90)), Some(ms(290))));
    assert_eq!(clock.budget(Color::Black), (None, None));
    // An increment adds three quarters of itself; hard never exceeds a third of the clock.
    let inc = Limits {
        btime: Some(ms(600)),
        binc: Some(ms(400)),
        ..Limits::default()
    };
    assert_eq!(inc.budget(Color::Black), (Some(ms(190)), Some(ms(190))));
    // The tighter of movetime and the clock wins; infinite ignores both.
    let both = Limits {
        wtime: Some(ms(3000)),
        movetime: Some(ms(50)),
        ..Limits::default()
    };
    assert_eq!(both.budget(Color::White), (Some(ms(40)), Some(ms(40))));
    let infinite = Limits {
        infinite: true,
        ..clock.clone()
    };
    assert_eq!(infinite.budget(Color::White), (None, None));
}

/// Searches with a time limit, and an infinite one told to stop, end on their own
/// (a search that ignored them would hang the test) short of the depth limit.
#[test]
fn time_limits_and_stop_end_the_search() {
    let fen = "r1bqkb1r/pppp1ppp/2n2n2/4p3/2B1P3/5N2/PPPP1PPP/RNBQK2R w KQkq - 4 4";
    for limits in [
        Limits {
            movetime: Some(Duration::from_millis(150)),
            ..Limits::default()
        },
        Limits {
            wtime: Some(Duration::from_millis(3000)),
            btime: Some(Duration::from_millis(3000)),
            ..Limits::default()
        },
    ] {
        let r = search(fen, limits);
        assert!(r.best.is_some());
        assert!((r.depth as usize) < MAX_SEARCH_PLY, "depth {}", r.depth);
    }
    let mut s = Searcher::new(Evaluator::Classical, 4);
    let stop = s.stop_flag();
    let stopper = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(200));
        stop.store(true, Ordering::Relaxed);
    });
    let infinite = Limits {
        infinite: true,
        ..Limits::default()
    };
    let r = s.search(&pos(fen), &[], &infinite, |_| {});
    stopper.join().unwrap();
    assert!(r.best.is_some());
    assert!((r.depth as usize) < MAX_SEARCH_PLY, "depth {}", r.depth);
}
