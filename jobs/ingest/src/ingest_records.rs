//! `ingest plain` and `ingest bullet`: the formats `lakefish export` writes for other
//! trainers, read back (issue 45).
//!
//! - Stockfish's `plain` text (`fen`, `move`, `score`, `ply`, `result`, then `e`, one
//!   `key value` per line) → `positions/source=plain/`: every column. A row continues the
//!   previous one's game when its ply is one more and its result the opposite; otherwise a
//!   new game starts.
//! - bullet's text (`<FEN> | <score> | <result>`, White's point of view, centipawns and
//!   1.0 / 0.5 / 0.0) and bulletformat (32-byte `ChessBoard` records, side to move's point
//!   of view) → `positions/source=bullet/`, told apart per file by their first bytes. No
//!   move is stored (`0000`, the null move every reader of the lake accepts); the ply comes
//!   from the FEN's move counters (0 for records); each row is its own game. Centipawns
//!   become internal units by Stockfish's win-rate model (`to_cp` inverted), ±32000 stays a
//!   mate. A record becomes White to move (its side to move), without castling rights or
//!   en passant, which bulletformat does not keep.
//!
//! Every row is checked (a legal position, a legal move, values in range); a bad line or
//! record is skipped and reported by byte offset, the rest goes on. Blocks of whole lines or
//! records are parsed on all cores and pushed in file order, so parts are the same on every
//! run.

use crate::binpack::{game_id, input_key};
use crate::dataset_writer::{IngestSummary, InputFormat, PartBuilder, Written, ingest};
use lakefish_engine::scores::{centipawns_to_internal, material};
use lakefish_lake::input::Input;
use lakefish_lake::parts::PositionColumns;
use lakefish_lake::{JobContext, JobError};
use lakefish_schemas::positions::NO_SCORE;
use lakefish_schemas::{IngestSpec, InputReport, JobId, SkippedRange, Source};
use rayon::prelude::*;
use shakmaty::fen::Fen;
use shakmaty::{CastlingMode, Chess, Color, EnPassantMode, FromSetup, Position, Role};

/// Bytes read per block (whole lines or records are cut from it).
const BLOCK: usize = 4 << 20;
/// How far past a block the reader looks for the end of a line or entry before it skips
/// what it holds (a file without line ends is not read whole into memory).
const MAX_LINE: usize = 4096;

pub fn ingest_plain(
    ctx: &JobContext,
    job_id: &JobId,
    spec: &IngestSpec,
) -> Result<IngestSummary, JobError> {
    ingest(ctx, job_id, spec, &PLAIN)
}

pub fn ingest_bullet(
    ctx: &JobContext,
    job_id: &JobId,
    spec: &IngestSpec,
) -> Result<IngestSummary, JobError> {
    ingest(ctx, job_id, spec, &BULLET)
}

const PLAIN: InputFormat = InputFormat {
    source: Source::Plain,
    has_games: false,
    thread_name: "plain-parse",
    nothing_found: "the inputs hold no plain entries (fen/move/score/ply/result/e lines)",
    read: read_plain,
};

const BULLET: InputFormat = InputFormat {
    source: Source::Bullet,
    has_games: false,
    thread_name: "bullet-parse",
    nothing_found: "the inputs hold no bullet positions",
    read: read_bullet,
};

/// How one file is cut and parsed.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Layout {
    /// Stockfish's plain text: entries end with an `e` line.
    Plain,
    /// bullet's `FEN | score | result` lines.
    BulletText,
    /// bulletformat's 32-byte records.
    Bulletformat,
}

/// bullet text when the first line reads as `… | … | …` in ASCII; records otherwise.
pub fn detect_bullet(head: &[u8]) -> Layout {
    // The first line with something on it, past a UTF-8 byte-order mark.
    let head = head.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(head);
    let line = head
        .split(|&b| b == b'\n')
        .find(|l| !l.trim_ascii().is_empty())
        .unwrap_or_default();
    let text = line
        .iter()
        .all(|b| b.is_ascii() && (*b >= b' ' || *b == b'\r'));
    if text && line.iter().filter(|&&b| b == b'|').count() == 2 {
        Layout::BulletText
    } else {
        Layout::Bulletformat
    }
}

fn read_plain(
    ctx: &JobContext,
    _spec: &IngestSpec,
    pool: &rayon::ThreadPool,
    input: &Input,
    part: &mut PartBuilder,
    written: &Written,
    progress: &dyn Fn(u64, u64),
) -> Result<InputReport, JobError> {
    read_input(ctx, pool, input, Layout::Plain, part, written, progress)
}

fn read_bullet(
    ctx: &JobContext,
    _spec: &IngestSpec,
    pool: &rayon::ThreadPool,
    input: &Input,
    part: &mut PartBuilder,
    written: &Written,
    progress: &dyn Fn(u64, u64),
) -> Result<InputReport, JobError> {
    let head = input.read_at(0, input.len().min(MAX_LINE as u64) as usize)?;
    read_input(
        ctx,
        pool,
        input,
        detect_bullet(&head),
        part,
        written,
        progress,
    )
}

/// One parsed row before its game id: the id depends on the rows before it.
#[derive(Debug)]
struct Row {
    offset: u64,
    fen: String,
    mv: String,
    score: i16,
    ply: u16,
    result: i8,
}

/// Reads `input` block by block, parses a window of blocks on the pool, pushes rows in order.
fn read_input(
    ctx: &JobContext,
    pool: &rayon::ThreadPool,
    input: &Input,
    layout: Layout,
    part: &mut PartBuilder,
    written: &Written,
    progress: &dyn Fn(u64, u64),
) -> Result<InputReport, JobError> {
    let key = input_key(input.name(), input.len());
    let mut report = InputReport::new(input.name(), input.len());
    let mut offset = 0u64;
    let mut carry: Vec<u8> = Vec::new();
    // The previous row's (ply, result, game id): plain rows continue its game.
    let mut prev: Option<(u16, i8, u64)> = None;
    let window = (ctx.threads * 2).max(2);
    while offset < input.len() || !carry.is_empty() {
        ctx.check_cancelled()?;
        // Cut up to `window` blocks of whole units; the tail goes on with the next read.
        let mut blocks: Vec<(u64, Vec<u8>)> = Vec::with_capacity(window);
        while blocks.len() < window && (offset < input.len() || !carry.is_empty()) {
            let start = offset - carry.len() as u64;
            let len = (input.len() - offset).min(BLOCK as u64) as usize;
            let mut data = std::mem::take(&mut carry);
            data.extend_from_slice(&input.read_at(offset, len)?);
            offset += len as u64;
            let at_end = offset >= input.len();
            let cut = if at_end {
                data.len()
            } else {
                cut_point(layout, &data)
            };
            carry = data.split_off(cut);
            if carry.len() > BLOCK + MAX_LINE && !at_end {
                // No end of a line or entry in a whole block: skip what was read of it.
                let skip = carry.len();
                let at = start + cut as u64;
                report.skipped.push(SkippedRange {
                    offset: at,
                    len: skip as u64,
                    reason: format!(
                        "bytes at byte offset {at}: no end of a line or entry in {skip} bytes"
                    ),
                });
                carry.clear();
            }
            if !data.is_empty() {
                blocks.push((start, data));
            }
        }
        let parsed: Vec<(Vec<Row>, Vec<SkippedRange>)> = pool.install(|| {
            blocks
                .par_iter()
                .map(|(start, data)| parse_block(layout, *start, data))
                .collect()
        });
        for (rows, skipped) in parsed {
            report.chunks += 1;
            report.skipped.extend(skipped);
            let mut cols = PositionColumns::default();
            for r in rows {
                let game = match (layout, prev) {
                    (Layout::Plain, Some((ply, result, id)))
                        if r.ply == ply.wrapping_add(1) && r.result == -result =>
                    {
                        id
                    }
                    _ => game_id(key, r.offset, 0),
                };
                prev = Some((r.ply, r.result, game));
                cols.push_row(&lakefish_lake::parts::PositionRow {
                    fen: r.fen,
                    score: (r.score != NO_SCORE).then_some(r.score),
                    mv: r.mv,
                    result: Some(r.result),
                    ply: r.ply,
                    game_id: game,
                });
            }
            report.rows += cols.rows() as u64;
            part.push("", cols, Vec::new())?;
        }
        if written.failed() {
            return Err(JobError::Internal("a part failed to write".into()));
        }
        progress(offset, part.total_rows);
    }
    report.skipped.sort_by_key(|s| s.offset);
    Ok(report)
}

/// Where the last whole unit in `data` ends (0: none yet).
fn cut_point(layout: Layout, data: &[u8]) -> usize {
    match layout {
        Layout::Bulletformat => data.len() / 32 * 32,
        Layout::BulletText => memchr::memrchr(b'\n', data).map_or(0, |i| i + 1),
        // After the last `e` line.
        Layout::Plain => {
            let mut end = data.len();
            while let Some(i) = memchr::memrchr(b'\n', &data[..end]) {
                let line_start = memchr::memrchr(b'\n', &data[..i]).map_or(0, |j| j + 1);
                if data[line_start..i].trim_ascii() == b"e" {
                    return i + 1;
                }
                end = i;
            }
            0
        }
    }
}

/// The rows of one block starting at byte `start` of its file, and what was skipped.
fn parse_block(layout: Layout, start: u64, data: &[u8]) -> (Vec<Row>, Vec<SkippedRange>) {
    let mut rows = Vec::new();
    let mut skipped = Vec::new();
    let mut skip = |offset: u64, len: usize, what: &str, why: String| {
        skipped.push(SkippedRange {
            offset,
            len: len as u64,
            reason: format!("{what} at byte offset {offset}: {why}"),
        })
    };
    match layout {
        Layout::Bulletformat => {
            for (i, rec) in data.chunks(32).enumerate() {
                let at = start + 32 * i as u64;
                match <&[u8; 32]>::try_from(rec)
                    .map_err(|_| format!("{} trailing bytes, not a whole record", rec.len()))
                    .and_then(record_row)
                {
                    Ok(mut r) => {
                        r.offset = at;
                        rows.push(r);
                    }
                    Err(why) => skip(at, rec.len(), "record", why),
                }
            }
        }
        Layout::BulletText => {
            let mut at = start;
            for line in data.split_inclusive(|&b| b == b'\n') {
                let text = line.trim_ascii();
                if !text.is_empty() {
                    match bullet_line(text) {
                        Ok(mut r) => {
                            r.offset = at;
                            rows.push(r);
                        }
                        Err(why) => skip(at, line.len(), "line", why),
                    }
                }
                at += line.len() as u64;
            }
        }
        Layout::Plain => {
            let mut at = start;
            let mut entry_start = start;
            let mut fields: Vec<(&[u8], &[u8])> = Vec::new();
            for line in data.split_inclusive(|&b| b == b'\n') {
                let text = line.trim_ascii();
                at += line.len() as u64;
                if text.is_empty() {
                    if fields.is_empty() {
                        // Blank lines between entries belong to none.
                        entry_start = at;
                    }
                    continue;
                }
                if text == b"e" {
                    match plain_entry(&fields) {
                        Ok(mut r) => {
                            r.offset = entry_start;
                            rows.push(r);
                        }
                        Err(why) => skip(entry_start, (at - entry_start) as usize, "entry", why),
                    }
                    fields.clear();
                    entry_start = at;
                    continue;
                }
                let (k, v) = match text.iter().position(|&b| b == b' ') {
                    Some(i) => (&text[..i], text[i + 1..].trim_ascii()),
                    None => (text, &b""[..]),
                };
                fields.push((k, v));
            }
            if !fields.is_empty() {
                let len = (at - entry_start) as usize;
                skip(entry_start, len, "entry", "no closing `e` line".into());
            }
        }
    }
    (rows, skipped)
}

/// A FEN checked to be a legal position, written back as shakmaty writes it.
fn position(fen: &str) -> Result<(Chess, String), String> {
    let setup = fen
        .parse::<Fen>()
        .map_err(|e| format!("fen {fen:?}: {e}"))?;
    let pos: Chess = setup
        .clone()
        .into_position(CastlingMode::Chess960)
        .map_err(|e| format!("fen {fen:?}: {e}"))?;
    Ok((pos, setup.to_string()))
}

/// The ply the FEN's move counters say (0 when it has none).
fn ply_of(pos: &Chess) -> u16 {
    let full = u32::from(pos.fullmoves()).saturating_sub(1);
    (2 * full + u32::from(pos.turn() == Color::Black)).min(u32::from(u16::MAX)) as u16
}

/// Side-to-move internal units from the side to move's centipawns; ±32000 (a mate, as
/// bullet's data and lakefish's export write it) stays beyond the evaluation range.
fn internal(cp: i32, pos: &Chess) -> Result<i16, String> {
    if cp.unsigned_abs() > 32000 {
        return Err(format!("score {cp} beyond ±32000"));
    }
    if cp.abs() == 32000 {
        return Ok(32000 * cp.signum() as i16);
    }
    Ok(centipawns_to_internal(f64::from(cp), material(pos.board())))
}

fn bullet_line(text: &[u8]) -> Result<Row, String> {
    let text = std::str::from_utf8(text).map_err(|_| "not UTF-8".to_string())?;
    let f: Vec<&str> = text.split('|').map(str::trim).collect();
    let [fen, score, result] = f[..] else {
        return Err(format!("{} fields, want `FEN | score | result`", f.len()));
    };
    let (pos, fen) = position(fen)?;
    let white = pos.turn() == Color::White;
    let cp: i32 = score
        .parse()
        .ok()
        .filter(|cp: &i32| cp.unsigned_abs() <= 32000)
        .ok_or_else(|| format!("score {score:?}: not an integer within ±32000"))?;
    let white_result: i8 = match result {
        "1.0" | "1" | "[1.0]" => 1,
        "0.5" | "1/2" | "[0.5]" => 0,
        "0.0" | "0" | "[0.0]" => -1,
        other => return Err(format!("result {other:?}: 1.0, 0.5 or 0.0")),
    };
    let sign = if white { 1 } else { -1 };
    Ok(Row {
        offset: 0,
        score: internal(cp * sign, &pos)?,
        ply: ply_of(&pos),
        result: white_result * sign as i8,
        fen,
        mv: "0000".into(),
    })
}

fn plain_entry(fields: &[(&[u8], &[u8])]) -> Result<Row, String> {
    let get = |key: &str| -> Result<&str, String> {
        let mut found = fields.iter().filter(|(k, _)| *k == key.as_bytes());
        let (_, v) = found.next().ok_or_else(|| format!("no `{key}` line"))?;
        if found.next().is_some() {
            return Err(format!("`{key}` twice"));
        }
        std::str::from_utf8(v).map_err(|_| format!("`{key}`: not UTF-8"))
    };
    if let Some((k, _)) = fields
        .iter()
        .find(|(k, _)| !matches!(*k, b"fen" | b"move" | b"score" | b"ply" | b"result"))
    {
        return Err(format!("unknown key {:?}", String::from_utf8_lossy(k)));
    }
    let (pos, fen) = position(get("fen")?)?;
    let mv = get("move")?;
    let uci: shakmaty::uci::UciMove = mv.parse().map_err(|_| format!("move {mv:?}: not UCI"))?;
    if uci != shakmaty::uci::UciMove::Null {
        uci.to_move(&pos)
            .map_err(|_| format!("move {mv} is not legal in {fen}"))?;
    }
    let score = get("score")?;
    let score: i16 = score
        .parse()
        .map_err(|_| format!("score {score:?}: not a 16-bit integer"))?;
    let ply = get("ply")?;
    let ply: u16 = ply
        .parse()
        .map_err(|_| format!("ply {ply:?}: not 0-65535"))?;
    let result = match get("result")? {
        "1" => 1,
        "0" => 0,
        "-1" => -1,
        other => return Err(format!("result {other:?}: 1, 0 or -1")),
    };
    Ok(Row {
        offset: 0,
        fen,
        mv: mv.to_string(),
        score,
        ply,
        result,
    })
}

/// A bulletformat record as a row: its board with its side to move as White.
fn record_row(rec: &[u8; 32]) -> Result<Row, String> {
    let occ = u64::from_le_bytes(rec[..8].try_into().expect("8 bytes"));
    if occ.count_ones() > 32 {
        return Err(format!("{} men", occ.count_ones()));
    }
    let mut board = shakmaty::Board::empty();
    let mut kings = [None, None];
    for (i, sq) in (0..64u32).filter(|s| occ >> s & 1 == 1).enumerate() {
        let nibble = (rec[8 + i / 2] >> (4 * (i & 1))) & 0xF;
        let role = match nibble & 7 {
            0 => Role::Pawn,
            1 => Role::Knight,
            2 => Role::Bishop,
            3 => Role::Rook,
            4 => Role::Queen,
            5 => Role::King,
            k => return Err(format!("man {i}: piece kind {k}")),
        };
        let color = if nibble & 8 == 0 {
            Color::White
        } else {
            Color::Black
        };
        let square = shakmaty::Square::new(sq);
        if role == Role::King {
            kings[usize::from(nibble & 8 != 0)] = Some(sq);
        }
        board.set_piece_at(square, shakmaty::Piece { color, role });
    }
    let score = i16::from_le_bytes([rec[24], rec[25]]);
    let result = match rec[26] {
        r @ 0..=2 => r as i8 - 1,
        r => return Err(format!("result byte {r}: 0, 1 or 2")),
    };
    match kings {
        [Some(ours), Some(theirs)] if rec[27] as u32 == ours && rec[28] as u32 == theirs ^ 56 => {}
        [Some(_), Some(_)] => return Err("king squares disagree with the board".into()),
        _ => return Err("a side without a king".into()),
    }
    let setup = shakmaty::Setup {
        board,
        ..shakmaty::Setup::empty()
    };
    let pos: Chess = Chess::from_setup(setup, CastlingMode::Standard)
        .map_err(|e| format!("not a legal position: {e}"))?;
    let fen = Fen::from_position(&pos, EnPassantMode::Legal).to_string();
    Ok(Row {
        offset: 0,
        score: internal(i32::from(score), &pos)?,
        ply: 0,
        result,
        fen,
        mv: "0000".into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bullet_files_are_told_apart_by_their_first_line() {
        assert_eq!(
            detect_bullet(b"rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1 | 25 | 0.5\n"),
            Layout::BulletText
        );
        assert_eq!(detect_bullet(&[0u8; 64]), Layout::Bulletformat);
        assert_eq!(
            detect_bullet(b"\xEF\xBB\xBF\n\n8/8/8/8/8/8/8/K6k w - - 0 1 | 0 | 0.5\n"),
            Layout::BulletText
        );
    }

    #[test]
    fn bad_lines_are_named_by_offset_and_the_rest_kept() {
        let text = b"8/8/8/8/8/8/8/K6k w - - 0 1 | 10 | 1.0\nnot a line\n8/8/8/8/8/8/8/K6k b - - 0 1 | 10 | 1.0\n8/8/8/8/8/8/8/K6k w - - 0 1 | x | 1.0\n";
        let (rows, skipped) = parse_block(Layout::BulletText, 100, text);
        assert_eq!(rows.len(), 2);
        assert_eq!(
            (rows[0].result, rows[1].result),
            (1, -1),
            "White's result, side to move's"
        );
        assert!(rows[0].score > 0 && rows[1].score < 0);
        assert_eq!(rows[1].ply, 1);
        assert_eq!(skipped.len(), 2);
        assert_eq!(skipped[0].offset, 100 + 39);
        assert!(
            skipped[0].reason.contains("byte offset 139"),
            "{}",
            skipped[0].reason
        );
        assert!(
            skipped[1].reason.contains("score \"x\""),
            "{}",
            skipped[1].reason
        );
    }

    #[test]
    fn plain_entries_need_every_key_once_and_a_legal_move() {
        let text = b"fen 8/8/8/8/8/8/4P3/K6k w - - 0 1\nmove e2e4\nscore 50\nply 10\nresult 1\ne\nfen 8/8/8/8/8/8/4P3/K6k w - - 0 1\nmove e2e5\nscore 50\nply 10\nresult 1\ne\nfen 8/8/8/8/8/8/4P3/K6k w - - 0 1\nscore 5\ne\n";
        let (rows, skipped) = parse_block(Layout::Plain, 0, text);
        assert_eq!(rows.len(), 1);
        assert_eq!(
            (rows[0].score, rows[0].ply, rows[0].mv.as_str()),
            (50, 10, "e2e4")
        );
        assert_eq!(skipped.len(), 2);
        assert!(
            skipped[0].reason.contains("not legal"),
            "{}",
            skipped[0].reason
        );
        assert!(
            skipped[1].reason.contains("no `move` line"),
            "{}",
            skipped[1].reason
        );
        assert_eq!(cut_point(Layout::Plain, b"fen x\ne\nfen y\nmove"), 8);
    }

    #[test]
    fn records_with_impossible_boards_are_refused() {
        let mut rec = [0u8; 32];
        // Kings on a1 (ours) and h8 (theirs, seen from their side: a1 ^ 56 = h1... 63 ^ 56 = 7).
        rec[..8].copy_from_slice(&(1u64 | 1 << 63).to_le_bytes());
        rec[8] = 5 | (13 << 4);
        rec[26] = 1;
        rec[27] = 0;
        rec[28] = 7;
        let r = record_row(&rec).unwrap();
        assert_eq!(r.fen, "7k/8/8/8/8/8/8/K7 w - - 0 1");
        let mut bad = rec;
        bad[28] = 0;
        assert!(record_row(&bad).unwrap_err().contains("king squares"));
        let mut bad = rec;
        bad[26] = 3;
        assert!(record_row(&bad).unwrap_err().contains("result byte 3"));
        let mut bad = rec;
        bad[8] = 7 | (13 << 4);
        assert!(record_row(&bad).unwrap_err().contains("piece kind 7"));
    }
}
