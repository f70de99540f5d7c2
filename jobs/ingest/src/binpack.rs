//! Stockfish `.binpack` reading: a chunk scanner that survives damaged files, and a chunk
//! decoder that turns one chunk into column vectors.
//!
//! A binpack is a sequence of chunks, each `"BINP"` + u32 LE payload size + payload; a move
//! chain never crosses a chunk, so chunks decode independently (and in parallel). The
//! scanner reads one chunk at a time (constant memory) and, when a header is damaged, skips
//! to the next plausible header, reporting the skipped byte range. The decoder runs
//! `sfbinpack` under `catch_unwind` (it panics on some malformed payloads) and checks each
//! chain's first position and move with the engine's rules, so garbage is refused per chunk.

use lakefish_engine::fen::{FenFields, PIECE_CHARS, piece_letters_from};
use lakefish_engine::random_games::splitmix64;
use lakefish_lake::JobError;
use lakefish_lake::input::Input;
use lakefish_lake::parts::PositionColumns;
use lakefish_schemas::SkippedRange;
use lakefish_schemas::positions::NO_SCORE;
use sfbinpack::chess::color::Color;
use sfbinpack::chess::coords::Square;
use sfbinpack::chess::r#move::{Move, MoveType};
use sfbinpack::chess::piece::Piece;
use sfbinpack::chess::piecetype::PieceType;
use sfbinpack::chess::position::Position;
use sfbinpack::{ChunkReader, TrainingDataEntry};
use std::cell::Cell;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Once;

pub const MAGIC: &[u8; 4] = b"BINP";
const HEADER: u64 = 8;
/// Stockfish writes chunks of about 1 MiB; anything past this is a damaged header.
pub const MAX_CHUNK_BYTES: u32 = 128 << 20;
/// How far ahead the scanner looks at once when resynchronising after damage.
const SCAN_WINDOW: usize = 1 << 20;

/// One step of a scan: a chunk payload, or a byte range that could not be used.
#[derive(Debug)]
pub enum ScanItem {
    Chunk { offset: u64, data: Vec<u8> },
    Skipped(SkippedRange),
}

/// Walks the chunks of one input, one at a time.
pub struct ChunkScanner<'a> {
    input: &'a Input,
    offset: u64,
}

impl<'a> ChunkScanner<'a> {
    pub fn new(input: &'a Input) -> Self {
        ChunkScanner { input, offset: 0 }
    }

    /// Bytes consumed so far.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// A header is plausible when it says "BINP" and its size fits in the file.
    fn plausible_header(&self, at: u64, header: &[u8]) -> Option<u32> {
        if &header[..4] != MAGIC {
            return None;
        }
        let size = u32::from_le_bytes(header[4..8].try_into().unwrap());
        (size > 0 && size <= MAX_CHUNK_BYTES && at + HEADER + size as u64 <= self.input.len())
            .then_some(size)
    }

    /// When the bytes after a chunk are neither the end of the file nor another "BINP", either
    /// this chunk's size field or the next header is damaged. A plausible header inside the
    /// payload means the size is wrong (it swallowed the next chunk): returns its offset.
    fn swallowed_header(&self, at: u64, data: &[u8]) -> Result<Option<u64>, JobError> {
        let end = at + HEADER + data.len() as u64;
        if end + 4 > self.input.len() || self.input.read_at(end, 4)? == MAGIC {
            return Ok(None);
        }
        let found = data.windows(8).enumerate().find_map(|(i, w)| {
            let pos = at + HEADER + i as u64;
            (w[0] == b'B' && self.plausible_header(pos, w).is_some()).then_some(pos)
        });
        Ok(found)
    }

    /// Finds the next plausible chunk header after `from`, or the end of the input.
    fn resync(&self, from: u64) -> Result<u64, JobError> {
        let len = self.input.len();
        let mut pos = from;
        while pos + HEADER <= len {
            let n = (SCAN_WINDOW as u64).min(len - pos) as usize;
            let window = self.input.read_at(pos, n)?;
            for i in 0..window.len().saturating_sub(HEADER as usize - 1) {
                if window[i] == b'B'
                    && self
                        .plausible_header(pos + i as u64, &window[i..i + 8])
                        .is_some()
                {
                    return Ok(pos + i as u64);
                }
            }
            if n < SCAN_WINDOW {
                break;
            }
            pos += (n - (HEADER as usize - 1)) as u64;
        }
        Ok(len)
    }

    fn skip_to(&mut self, to: u64, reason: String) -> ScanItem {
        let item = ScanItem::Skipped(SkippedRange {
            offset: self.offset,
            len: to - self.offset,
            reason,
        });
        self.offset = to;
        item
    }

    fn step(&mut self) -> Result<Option<ScanItem>, JobError> {
        let len = self.input.len();
        let at = self.offset;
        if at >= len {
            return Ok(None);
        }
        let remaining = len - at;
        if remaining < HEADER {
            return Ok(Some(self.skip_to(
                len,
                format!("truncated chunk header at byte offset {at}: only {remaining} bytes left"),
            )));
        }
        let header = self.input.read_at(at, HEADER as usize)?;
        if let Some(size) = self.plausible_header(at, &header) {
            let data = self.input.read_at(at + HEADER, size as usize)?;
            if let Some(next) = self.swallowed_header(at, &data)? {
                return Ok(Some(self.skip_to(
                    next,
                    format!(
                        "chunk header at byte offset {at} announces {size} bytes, but another chunk starts at byte offset {next} (damaged size field)"
                    ),
                )));
            }
            self.offset = at + HEADER + size as u64;
            return Ok(Some(ScanItem::Chunk { offset: at, data }));
        }
        let reason = if &header[..4] == MAGIC {
            let size = u32::from_le_bytes(header[4..8].try_into().unwrap()) as u64;
            if size > MAX_CHUNK_BYTES as u64 {
                format!(
                    "chunk header at byte offset {at} announces {size} bytes, more than a binpack chunk can hold"
                )
            } else if size == 0 {
                format!("empty chunk at byte offset {at}")
            } else {
                format!(
                    "truncated chunk at byte offset {at}: header announces {size} bytes, only {} remain",
                    remaining - HEADER
                )
            }
        } else {
            format!("no \"BINP\" chunk header at byte offset {at} (not a binpack file, or damaged)")
        };
        let next = self.resync(at + 1)?;
        Ok(Some(self.skip_to(next, reason)))
    }
}

impl Iterator for ChunkScanner<'_> {
    type Item = Result<ScanItem, JobError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.step().transpose()
    }
}

/// Appends one decoded binpack entry to a block of rows.
fn push_entry(rows: &mut PositionColumns, e: &TrainingDataEntry, game_id: u64) {
    write_fen(&e.pos, &mut rows.fen_bytes);
    rows.fen_ends.push(rows.fen_bytes.len() as u32);
    write_uci(e.mv, &mut rows.move_bytes);
    rows.move_ends.push(rows.move_bytes.len() as u32);
    rows.score.push(e.score);
    rows.result.push(e.result as i8);
    rows.ply.push(e.ply);
    rows.game_id.push(game_id);
}

/// A stable 64-bit id for a move chain: the same file, chunk and chain always give the same
/// id, so a re-run writes identical rows.
pub fn game_id(input_key: u64, chunk_offset: u64, chain: u64) -> u64 {
    splitmix64(input_key ^ splitmix64(chunk_offset.wrapping_mul(0x9E37_79B9) ^ (chain << 40)))
}

/// Identifies an input by file name and size, so the same file read from another directory
/// or uploaded into the lake yields the same game ids.
pub fn input_key(name: &str, len: u64) -> u64 {
    let base = name.rsplit('/').next().unwrap_or(name);
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in base.bytes() {
        h = (h ^ b as u64).wrapping_mul(0x100_0000_01b3);
    }
    splitmix64(h ^ len)
}

thread_local! {
    static DECODING: Cell<bool> = const { Cell::new(false) };
}

/// Keeps panics from the binpack decoder (caught and reported as skipped chunks) off stderr.
fn install_quiet_panic_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !DECODING.with(|d| d.get()) {
                default(info);
            }
        }));
    });
}

/// Decodes one chunk payload. `Err` says why the whole chunk is unusable.
pub fn decode_chunk(
    data: &[u8],
    input_key: u64,
    chunk_offset: u64,
) -> Result<PositionColumns, String> {
    install_quiet_panic_hook();
    DECODING.with(|d| d.set(true));
    // The entry being decoded, so a decoder panic can say where in the chunk it happened.
    let entry = Cell::new(0usize);
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        decode_entries(data, input_key, chunk_offset, &entry)
    }));
    DECODING.with(|d| d.set(false));
    match outcome {
        Ok(r) => r,
        Err(panic) => {
            let msg = panic
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| panic.downcast_ref::<&str>().copied())
                .unwrap_or("unknown");
            Err(format!(
                "malformed chunk payload at entry {} (decoder failed: {msg})",
                entry.get()
            ))
        }
    }
}

fn decode_entries(
    data: &[u8],
    input_key: u64,
    chunk_offset: u64,
    entry: &Cell<usize>,
) -> Result<PositionColumns, String> {
    let mut out = PositionColumns::default();
    let mut reader = ChunkReader::default();
    let mut prev: Option<TrainingDataEntry> = None;
    let mut chain = 0u64;
    let mut id = 0u64;
    let mut index = 0usize;
    while reader.has_next(data) {
        entry.set(index);
        let e = reader.next(data);
        if !(-1..=1).contains(&e.result) {
            return Err(format!(
                "entry {index}: result {} is not -1, 0 or 1",
                e.result
            ));
        }
        let continues = prev.is_some_and(|p| continues_chain(&p, &e));
        if !continues {
            if prev.is_some() {
                chain += 1;
            }
            id = game_id(input_key, chunk_offset, chain);
            check_stem(&e).map_err(|why| format!("entry {index} (move chain {chain}): {why}"))?;
        }
        push_entry(&mut out, &e, id);
        prev = Some(e);
        index += 1;
    }
    if out.rows() == 0 {
        return Err("chunk holds no complete entry".into());
    }
    Ok(out)
}

/// Does `next` continue `prev`'s move chain? The decoder yields a chain's entries one after
/// another, each the position after the previous move: the next ply, the result seen from the
/// other side, the moved piece's square emptied and its destination taken by the mover. (A
/// new chain starts where the game went on with another move than the stored one; that
/// move lands elsewhere.) A stem matching all of this by chance is not a practical concern, and this avoids replaying every move
/// (`TrainingDataEntry::is_continuation`), which cost a fifth of the decode time.
fn continues_chain(prev: &TrainingDataEntry, next: &TrainingDataEntry) -> bool {
    let mover = prev.pos.side_to_move();
    let landed = match prev.mv.mtype() {
        // Castling is stored king-takes-rook: the king lands beside its start square.
        MoveType::Castle => true,
        _ => {
            let p = next.pos.piece_at(prev.mv.to());
            p != Piece::none() && p.color() == mover
        }
    };
    prev.ply + 1 == next.ply
        && prev.result == -next.result
        && next.pos.side_to_move() != mover
        && next.pos.piece_at(prev.mv.from()) == Piece::none()
        && landed
}

/// The first entry of a chain comes straight from 32 stored bytes: check it is a legal
/// position with a legal move. Later entries are generated from it by the decoder.
fn check_stem(e: &TrainingDataEntry) -> Result<(), String> {
    let mut fen = Vec::with_capacity(96);
    write_fen(&e.pos, &mut fen);
    let mut uci = Vec::with_capacity(5);
    write_uci(e.mv, &mut uci);
    let fen = String::from_utf8(fen).map_err(|_| "position is not text".to_string())?;
    let uci = String::from_utf8(uci).map_err(|_| "move is not text".to_string())?;
    lakefish_engine::rules::check_move(&fen, &uci).map_err(|e| e.to_string())
}

const PIECE_TYPES: [PieceType; 6] = [
    PieceType::Pawn,
    PieceType::Knight,
    PieceType::Bishop,
    PieceType::Rook,
    PieceType::Queen,
    PieceType::King,
];

fn piece_char(p: Piece) -> u8 {
    let t = p.piece_type().ordinal() as usize;
    let c = if p.color() == Color::White { 0 } else { 1 };
    PIECE_CHARS[c][t.min(5)]
}

fn push_square(sq: Square, out: &mut Vec<u8>) {
    let i = sq.index() as u8;
    out.push(b'a' + (i & 7));
    out.push(b'1' + (i >> 3));
}

/// Appends the FEN of `pos`, byte for byte what `Position::fen` returns, without allocating.
pub fn write_fen(pos: &Position, out: &mut Vec<u8>) {
    let squares = piece_letters_from(
        PIECE_TYPES.map(|pt| pos.pieces_bb_type(pt).bits()),
        pos.pieces_bb(Color::Black).bits(),
    );
    use sfbinpack::chess::castling_rights::CastlingRights as CR;
    let cr = pos.castling_rights();
    let castling = [
        CR::WHITE_KING_SIDE,
        CR::WHITE_QUEEN_SIDE,
        CR::BLACK_KING_SIDE,
        CR::BLACK_QUEEN_SIDE,
    ]
    .map(|right| cr.contains(right));
    let white = pos.side_to_move() == Color::White;
    let ep = pos.ep_square();
    FenFields {
        squares: &squares,
        white_to_move: white,
        castling,
        en_passant: (ep != Square::NONE).then(|| ep.index() as u8),
        halfmoves: pos.rule50_counter() as u32,
        fullmoves: (pos.ply() as u32).saturating_sub(if white { 0 } else { 1 }) / 2 + 1,
    }
    .write(out);
}

/// Appends the move in standard UCI (castling as the king's two-square move).
pub fn write_uci(mv: Move, out: &mut Vec<u8>) {
    let from = mv.from();
    push_square(from, out);
    match mv.mtype() {
        MoveType::Castle => {
            // binpack stores castling as king-takes-rook; UCI wants the king's destination.
            let rank = from.index() & !7;
            let file = if (mv.to().index() & 7) > (from.index() & 7) {
                6
            } else {
                2
            };
            push_square(Square::new(rank | file), out);
        }
        MoveType::Promotion => {
            push_square(mv.to(), out);
            let p = piece_char(mv.promoted_piece()).to_ascii_lowercase();
            out.push(p);
        }
        MoveType::Normal | MoveType::EnPassant => push_square(mv.to(), out),
    }
}

/// A made-up but learnable evaluation for synthetic games, side to move: half the usual
/// material values plus 15 per rank each pawn has advanced. A net can learn it; a material
/// count with full piece values is off by a factor of two.
fn synthetic_score(pos: &Position) -> i16 {
    let side = |c: Color| {
        let mut v = 0i32;
        for (pt, value) in [
            (PieceType::Pawn, 104),
            (PieceType::Knight, 390),
            (PieceType::Bishop, 412),
            (PieceType::Rook, 638),
            (PieceType::Queen, 1269),
        ] {
            v += pos.pieces_bb_color(c, pt).bits().count_ones() as i32 * value;
        }
        let mut pawns = pos.pieces_bb_color(c, PieceType::Pawn).bits();
        while pawns != 0 {
            let rank = (pawns.trailing_zeros() >> 3) as i32;
            v += 15
                * if c == Color::White {
                    rank - 1
                } else {
                    6 - rank
                };
            pawns &= pawns - 1;
        }
        v
    };
    let us = pos.side_to_move();
    let them = if us == Color::White {
        Color::Black
    } else {
        Color::White
    };
    (side(us) - side(them)).clamp(-3000, 3000) as i16
}

/// Writes a real binpack of `games` random legal games (scores from `synthetic_score`, results made up,
/// a few "no score" entries), for tests and demos that must not depend on sample files.
pub fn synthetic_binpack(games: usize, seed: u64) -> Vec<u8> {
    use lakefish_engine::random_games::{MoveKind, SplitMix, random_game};
    use sfbinpack::CompressedTrainingDataEntryWriter;
    let mut rng = SplitMix(seed ^ 0x5eed);
    let mut writer = CompressedTrainingDataEntryWriter::new_in_memory().expect("in-memory writer");
    for g in 0..games {
        let game = random_game(seed.wrapping_mul(1_000_003).wrapping_add(g as u64), 160);
        let white_result = rng.below(3) as i16 - 1;
        for (ply, m) in game.iter().enumerate() {
            let pos = Position::from_fen(&m.fen).expect("shakmaty writes valid FEN");
            let (from, to) = (Square::new(m.from as u32), Square::new(m.to as u32));
            let mv = match m.kind {
                MoveKind::Normal => Move::normal(from, to),
                MoveKind::EnPassant => Move::en_passant(from, to),
                MoveKind::Castle => Move::castle(from, to),
                MoveKind::Promotion(p) => {
                    let color = pos.side_to_move();
                    let t = match p {
                        'n' => PieceType::Knight,
                        'b' => PieceType::Bishop,
                        'r' => PieceType::Rook,
                        _ => PieceType::Queen,
                    };
                    Move::promotion(from, to, Piece::new(t, color))
                }
            };
            let white = pos.side_to_move() == Color::White;
            let score = if rng.below(20) == 0 {
                NO_SCORE
            } else {
                synthetic_score(&pos) + rng.below(61) as i16 - 30
            };
            let entry = TrainingDataEntry {
                pos,
                mv,
                score,
                ply: ply as u16,
                result: if white { white_result } else { -white_result },
            };
            writer.write_entry(&entry).expect("in-memory write");
        }
    }
    writer.into_bytes().expect("in-memory writer")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fen_writer_matches_the_reference() {
        for fen in [
            "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1",
            "1q5b/1r5k/4p2p/1b2P1pN/3p4/6PP/1nP3B1/1Q2B1K1 w - - 0 35",
            "r3k2r/8/8/3pP3/8/8/8/R3K2R w Kq d6 12 40",
            "4k3/8/8/8/8/8/8/4K3 b - - 99 120",
        ] {
            let pos = Position::from_fen(fen).unwrap();
            let mut out = Vec::new();
            write_fen(&pos, &mut out);
            assert_eq!(String::from_utf8(out).unwrap(), pos.fen().unwrap());
        }
    }

    #[test]
    fn uci_writer_converts_castling_and_promotions() {
        let cases = [
            (Move::castle(Square::E1, Square::H1), "e1g1"),
            (Move::castle(Square::E1, Square::A1), "e1c1"),
            (Move::castle(Square::E8, Square::A8), "e8c8"),
            (
                Move::promotion(Square::new(52), Square::new(60), Piece::WHITE_KNIGHT),
                "e7e8n",
            ),
            (Move::normal(Square::new(12), Square::new(28)), "e2e4"),
        ];
        for (mv, want) in cases {
            let mut out = Vec::new();
            write_uci(mv, &mut out);
            assert_eq!(std::str::from_utf8(&out).unwrap(), want);
            assert_eq!(mv.as_uci(), want);
        }
    }

    #[test]
    fn synthetic_binpacks_decode_to_what_was_written() {
        let bytes = synthetic_binpack(30, 1);
        let expected: Vec<TrainingDataEntry> = {
            let mut r = sfbinpack::CompressedTrainingDataEntryReader::from_slice(&bytes).unwrap();
            let mut v = Vec::new();
            while r.has_next() {
                v.push(r.next());
            }
            v
        };
        assert!(expected.len() > 300);
        assert_eq!(&bytes[..4], MAGIC);
        let size = u32::from_le_bytes(bytes[4..8].try_into().unwrap()) as usize;
        let chunk = decode_chunk(&bytes[8..8 + size], 9, 0).unwrap();
        assert_eq!(chunk.rows(), expected.len());
        let games: std::collections::HashSet<u64> = chunk.game_id.iter().copied().collect();
        assert_eq!(games.len(), 30, "one game id per game");
        for (i, e) in expected.iter().enumerate() {
            assert_eq!(chunk.fen(i), e.pos.fen().unwrap());
            assert_eq!(chunk.uci(i), e.mv.as_uci());
            assert_eq!(chunk.score[i], e.score);
        }
    }

    #[test]
    fn garbage_chunks_are_refused_not_panicking() {
        assert!(
            decode_chunk(&[], 1, 0)
                .unwrap_err()
                .contains("no complete entry")
        );
        let noise: Vec<u8> = (0..4096u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        let err = decode_chunk(&noise, 1, 0).unwrap_err();
        assert!(!err.is_empty());
        // Found by lakefish-fuzz: a decoder panic names the entry it happened in.
        let chunk = [
            0xff, 0xff, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0x2d, 0x84, 0x4a, 0xd2, 0x00, 0x00,
            0x00, 0x00, 0x11, 0x11, 0x11, 0x11, 0x3e, 0x95, 0x5b, 0xe3, 0x0c, 0x50, 0x00, 0x27,
            0x80, 0x00, 0x00, 0x00, 0x00, 0x30, 0x1f, 0x3b, 0x97, 0xd6, 0x50, 0xd3, 0xce, 0x11,
            0x6c, 0x2c, 0xc8, 0xb1, 0x6f, 0xe5, 0xf4, 0xb1, 0x1d, 0x3e, 0xd0, 0x1c, 0x24, 0x34,
            0x72,
        ];
        let err = decode_chunk(&chunk, 1, 0).unwrap_err();
        assert!(err.contains("decoder failed"), "{err}");
        let entry = err
            .split(" at entry ")
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|n| n.parse::<usize>().ok());
        assert!(
            entry.is_some_and(|n| n < chunk.len()),
            "the entry number: {err}"
        );
    }
}
