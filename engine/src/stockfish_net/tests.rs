use super::*;
use shakmaty::fen::Fen;
use shakmaty::{CastlingMode, Chess, Position};

fn board(fen: &str) -> (Board, Color) {
    let pos: Chess = fen
        .parse::<Fen>()
        .unwrap()
        .into_position(CastlingMode::Standard)
        .unwrap();
    (pos.board().clone(), pos.turn())
}

#[test]
fn the_header_hash_is_stockfish_15_1s() {
    // Bytes 4..8 of nn-ad9b42354671.nnue, the net Stockfish 15.1 embeds.
    assert_eq!(FILE_HASH, 0x1C10_2EF2);
    assert_eq!(TRANSFORMER_HASH, 0x7F23_44B8);
    // Its size: 47,001,499 bytes with a 75-byte description.
    assert_eq!(BYTES_WITHOUT_DESCRIPTION + 75, 47_001_499);
}

#[test]
fn a_net_written_and_read_back_is_the_same_bytes() {
    let net = random_net(1);
    let bytes = net.to_bytes().unwrap();
    assert_eq!(
        bytes.len(),
        BYTES_WITHOUT_DESCRIPTION + net.description.len()
    );
    assert!(StockfishNet::sniff(&bytes));
    let back = StockfishNet::from_bytes(&bytes).unwrap();
    assert!(back == net);
    assert_eq!(back.to_bytes().unwrap(), bytes);
}

#[test]
fn damaged_files_are_refused_naming_what_differs() {
    let bytes = random_net(2).to_bytes().unwrap();
    let err = |b: &[u8]| StockfishNet::from_bytes(b).unwrap_err().to_string();

    let mut other_version = bytes.clone();
    other_version[0] ^= 1;
    assert!(
        err(&other_version).contains("version 0x7af32f21"),
        "{}",
        err(&other_version)
    );

    let mut other_arch = bytes.clone();
    other_arch[4] ^= 1;
    assert!(err(&other_arch).contains("the file's architecture hash"));

    // A stack hash damaged in the middle of the file.
    // Each stack is 17,640 bytes, its hash first; they end the file.
    let stack3 = bytes.len() - (BUCKETS - 3) * 17_640;
    let mut bad_stack = bytes.clone();
    bad_stack[stack3] ^= 0x80;
    assert!(
        err(&bad_stack).contains("layer stack 3's layers' hash"),
        "{}",
        err(&bad_stack)
    );

    let truncated = &bytes[..bytes.len() - 7];
    assert!(
        err(truncated).contains("layer stack 7's fc_2 weights"),
        "{}",
        err(truncated)
    );
    assert!(err(&bytes[..3]).contains("the version"));
    assert!(err(&bytes[..10_000]).contains("the feature transformer's weights"));

    let mut longer = bytes.clone();
    longer.push(0);
    assert_eq!(
        err(&longer),
        "1 bytes after the last layer (a Stockfish 15.1 net ends there)"
    );

    // A description length beyond the file is a truncation, not an allocation.
    let mut huge = bytes[..12].to_vec();
    huge[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(err(&huge).contains("the description"));
}

#[test]
fn evaluation_is_antisymmetric_under_colour_flip_and_picks_the_bucket_by_piece_count() {
    let net = random_net(3);
    // The same position with colours swapped and the board mirrored vertically evaluates the
    // same for the side to move: every part of the net is per perspective.
    let (b1, t1) = board("r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 2 3");
    let (b2, t2) = board("rnbqkb1r/pppp1ppp/5n2/4p3/4P3/2N5/PPPP1PPP/R1BQKBNR b KQkq - 2 3");
    let e1 = net.evaluate(&b1, t1).unwrap();
    let e2 = net.evaluate(&b2, t2).unwrap();
    assert_eq!(e1, e2);
    assert_eq!(e1.bucket, 7);
    assert_eq!(e1.white(t1), -e2.white(t2));
    assert_ne!(e1.psqt, [0; BUCKETS]);

    let (k, t) = board("8/8/4k3/8/8/3K4/8/8 w - - 0 1");
    assert_eq!(net.evaluate(&k, t).unwrap().bucket, 0);
    assert_eq!(
        net.evaluate(&Board::empty(), Color::White).unwrap_err(),
        SfEvalError::Pieces(0)
    );
}

#[test]
fn values_print_as_stockfish_prints_them() {
    assert_eq!(format_table_cp(0), "   0.00");
    assert_eq!(format_table_cp(155), "+  0.43");
    assert_eq!(format_table_cp(-14), "-  0.04");
    assert_eq!(format_table_cp(-36100), "-100.00");
    assert_eq!(format_line_cp(101), "+0.28");
    assert_eq!(format_line_cp(-47), "-0.13");
    assert_eq!(format_line_cp(0), "+0.00");
}
