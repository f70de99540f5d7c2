//! PGN (Lichess dumps and other dialects) → `positions` and `games` rows.
//!
//! The decompressed stream is cut into blocks of whole games ([`BlockSplitter`]), and each
//! block is parsed on its own ([`parse_block`]), so blocks are parsed on all cores while the
//! stream is read once. A block is cut where a tag line starts after a blank line; the cut
//! points depend only on the bytes, so a re-run yields the same blocks, rows and game ids.

use lakefish_engine::fen::{write_fen, write_uci};
use lakefish_engine::random_games::splitmix64;
use lakefish_engine::scores::{centipawns_to_internal, mate_to_internal, material};
use lakefish_lake::parts::PositionColumns;
use lakefish_lake::parts::{GameRecord, NO_RESULT};
use lakefish_schemas::games::TAG_COLUMNS;
use lakefish_schemas::positions::NO_SCORE;
use pgn_reader::{Outcome, RawComment, RawTag, Reader, SanPlus, Skip, Visitor};
use shakmaty::fen::Fen;
use shakmaty::san::San;
use shakmaty::uci::UciMove;
use shakmaty::{
    CastlingMode, Chess, Color, EnPassantMode, FromSetup, KnownOutcome, Move, Position, Rank, Role,
    Setup, Square,
};
use std::collections::BTreeMap;
use std::io::{self, Read};
use std::ops::ControlFlow;

/// Target size of a block of games (a block ends at the first game boundary past it).
pub const BLOCK_BYTES: usize = 2 << 20;
/// zstd frame magic number, little endian.
pub const ZSTD_MAGIC: [u8; 4] = [0x28, 0xB5, 0x2F, 0xFD];
const BOM: &[u8] = b"\xef\xbb\xbf";

/// Cuts a PGN byte stream into blocks of whole games.
///
/// Memory stays bounded whatever the input: a game that runs on for more than `max_game`
/// bytes without the next game starting (a file with no game boundaries at all, a runaway
/// comment) is dropped as it streams by and reported through [`BlockSplitter::take_too_long`].
pub struct BlockSplitter<R> {
    reader: R,
    buf: Vec<u8>,
    /// Stream offset of `buf[0]`.
    offset: u64,
    eof: bool,
    started: bool,
    /// `buf[..scanned]` holds no game start past [`BLOCK_BYTES`]: the search resumes there
    /// (rescanning from the start on every read would be quadratic).
    scanned: usize,
    max_game: usize,
    too_long: Vec<TooLongGame>,
    /// Blocks returned or queued so far.
    blocks: u64,
    /// Blocks cut and waiting to be returned (a block with a long game inside comes out
    /// as the pieces around it).
    ready: std::collections::VecDeque<(u64, Vec<u8>)>,
}

/// A game that was skipped for its length, with its place in the (decompressed) stream.
#[derive(Debug, Clone, PartialEq)]
pub struct TooLongGame {
    pub offset: u64,
    pub len: u64,
    /// Blocks returned before it: it lies between block `after_blocks - 1` and the next.
    pub after_blocks: u64,
}

impl<R: Read> BlockSplitter<R> {
    pub fn new(reader: R, max_game_bytes: u64) -> Self {
        BlockSplitter {
            reader,
            buf: Vec::new(),
            offset: 0,
            eof: false,
            started: false,
            scanned: 0,
            max_game: max_game_bytes.min(usize::MAX as u64 / 2) as usize,
            too_long: Vec::new(),
            blocks: 0,
            ready: Default::default(),
        }
    }

    /// Games skipped for their length since the last call.
    pub fn take_too_long(&mut self) -> Vec<TooLongGame> {
        std::mem::take(&mut self.too_long)
    }

    /// The next block and its offset in the (decompressed) stream. A read error leaves the
    /// bytes buffered so far available to [`BlockSplitter::salvage`].
    pub fn next_block(&mut self) -> io::Result<Option<(u64, Vec<u8>)>> {
        loop {
            if let Some(block) = self.ready.pop_front() {
                return Ok(Some(block));
            }
            if !self.started && (self.buf.len() >= BOM.len() || self.eof) {
                self.started = true;
                if self.buf.starts_with(BOM) {
                    self.buf.drain(..BOM.len());
                    self.offset += BOM.len() as u64;
                }
            }
            if self.started && self.buf.len() > BLOCK_BYTES {
                if let Some(cut) = find_game_start(&self.buf, self.scanned.max(BLOCK_BYTES)) {
                    let block = self.take(cut);
                    self.queue(block);
                    continue;
                }
                self.scanned = self.buf.len();
                if self.buf.len() > BLOCK_BYTES + self.max_game {
                    // No game start past the block: the game running past it (from the
                    // last start before it, or from the first byte) is longer than allowed.
                    match last_game_start(&self.buf) {
                        Some(start) => {
                            let block = self.take(start);
                            self.queue(block);
                            self.skip_long_game()?;
                            continue;
                        }
                        None => {
                            self.skip_long_game()?;
                            continue;
                        }
                    }
                }
            }
            if self.eof {
                if self.buf.is_empty() {
                    return Ok(None);
                }
                let n = self.buf.len();
                let block = self.take(n);
                self.queue(block);
                continue;
            }
            self.fill()?;
        }
    }

    /// Reads up to 1 MiB more into `buf`; sets `eof` at the end of the stream.
    fn fill(&mut self) -> io::Result<()> {
        let old = self.buf.len();
        self.buf.resize(old + (1 << 20), 0);
        let read = loop {
            match self.reader.read(&mut self.buf[old..]) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                other => break other,
            }
        };
        match read {
            Ok(n) => {
                self.buf.truncate(old + n);
                self.eof = n == 0;
                Ok(())
            }
            Err(e) => {
                self.buf.truncate(old);
                Err(e)
            }
        }
    }

    /// Drops the game at `buf[0]` as it streams by, up to the next game start, keeping only
    /// the few bytes a game start's blank line needs.
    fn skip_long_game(&mut self) -> io::Result<()> {
        let start = self.offset;
        let after_blocks = self.blocks;
        loop {
            let found = find_game_start(&self.buf, 1);
            let drop = match found {
                Some(i) => i,
                None if self.eof => self.buf.len(),
                None => self.buf.len().saturating_sub(3),
            };
            self.buf.drain(..drop);
            self.offset += drop as u64;
            if found.is_some() || self.eof {
                self.too_long.push(TooLongGame {
                    offset: start,
                    len: self.offset - start,
                    after_blocks,
                });
                self.scanned = 0;
                return Ok(());
            }
            self.fill()?;
        }
    }

    fn take(&mut self, n: usize) -> (u64, Vec<u8>) {
        let rest = self.buf.split_off(n);
        let block = std::mem::replace(&mut self.buf, rest);
        let at = self.offset;
        self.offset += n as u64;
        self.scanned = 0;
        (at, block)
    }

    /// Queues a block of whole games, as the pieces around any game in it longer than the
    /// limit (only a block longer than the limit can hold one: most are never scanned).
    fn queue(&mut self, (at, block): (u64, Vec<u8>)) {
        if block.len() <= self.max_game {
            self.blocks += 1;
            self.ready.push_back((at, block));
            return;
        }
        let mut starts: Vec<usize> = std::iter::once(0)
            .chain(memchr::memmem::find_iter(&block, b"\n[").map(|i| i + 1))
            .filter(|&i| i == 0 || is_game_start(&block, i))
            .collect();
        starts.push(block.len());
        let mut piece = 0;
        for game in starts.windows(2) {
            let (from, to) = (game[0], game[1]);
            if to - from <= self.max_game {
                continue;
            }
            if from > piece {
                self.blocks += 1;
                self.ready
                    .push_back((at + piece as u64, block[piece..from].to_vec()));
            }
            self.too_long.push(TooLongGame {
                offset: at + from as u64,
                len: (to - from) as u64,
                after_blocks: self.blocks,
            });
            piece = to;
        }
        if piece < block.len() {
            self.blocks += 1;
            self.ready
                .push_back((at + piece as u64, block[piece..].to_vec()));
        }
    }

    /// After a read error: the complete games still buffered or queued (everything before
    /// the last game start) as blocks, and the number of bytes of the incomplete game dropped.
    pub fn salvage(&mut self) -> (Vec<(u64, Vec<u8>)>, u64) {
        let cut = last_game_start(&self.buf).unwrap_or(0);
        let dropped = (self.buf.len() - cut) as u64;
        let block = (cut > 0).then(|| self.take(cut));
        self.buf.clear();
        if let Some(block) = block {
            self.queue(block);
        }
        (std::mem::take(&mut self.ready).into(), dropped)
    }
}

/// Is `buf[i]` the `[` of a tag line that follows a blank line (a new game)?
fn is_game_start(buf: &[u8], i: usize) -> bool {
    // The byte after `[` must be seen: `[%` opens a comment command, not a tag.
    buf[i] == b'['
        && buf.get(i + 1).is_some_and(|&c| c != b'%')
        && (buf[..i].ends_with(b"\n\n") || buf[..i].ends_with(b"\n\r\n"))
}

/// First game start at or after `from`.
fn find_game_start(buf: &[u8], from: usize) -> Option<usize> {
    memchr::memmem::find_iter(&buf[from.saturating_sub(3)..], b"\n[")
        .map(|i| from.saturating_sub(3) + i + 1)
        .find(|&i| is_game_start(buf, i))
}

fn last_game_start(buf: &[u8]) -> Option<usize> {
    memchr::memmem::rfind_iter(buf, b"\n[")
        .map(|i| i + 1)
        .find(|&i| is_game_start(buf, i))
}

/// An evaluation found in a comment, from White's point of view.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Eval {
    Pawns(f64),
    /// `#N`: positive, White mates in N moves; negative, Black mates.
    Mate(i32),
}

/// The longest mate an `[%eval #N]` may announce; larger values are not scores.
pub const MAX_MATE_MOVES: u32 = 1000;

/// Finds `[%eval x]` in a comment: `0.23`, `-1.5`, `#3`, `#-2` (a `,depth` suffix is allowed).
/// `None` when absent or out of range (the row's score is then null).
pub fn parse_eval(comment: &[u8]) -> Option<Eval> {
    let at = memchr::memmem::find(comment, b"[%eval")?;
    let rest = &comment[at + 6..];
    let rest = &rest[rest.iter().take_while(|b| b.is_ascii_whitespace()).count()..];
    let end = rest.iter().position(|&b| matches!(b, b']' | b',' | b' '))?;
    let text = std::str::from_utf8(&rest[..end]).ok()?;
    if let Some(mate) = text.strip_prefix('#') {
        // Beyond any mate a game can hold: not a score (the row's score is null).
        let n = mate.parse::<i32>().ok()?;
        return (n.unsigned_abs() <= MAX_MATE_MOVES).then_some(Eval::Mate(n));
    }
    let pawns: f64 = text.parse().ok()?;
    pawns.is_finite().then_some(Eval::Pawns(pawns))
}

impl Eval {
    /// The score of `pos` (the position the eval describes) for its side to move, in
    /// Stockfish internal units (see `lakefish_engine::scores`).
    pub fn to_internal(self, pos: &Chess) -> i16 {
        let white = pos.turn() == Color::White;
        match self {
            Eval::Pawns(p) => {
                let cp = if white { p * 100.0 } else { -p * 100.0 };
                centipawns_to_internal(cp, material(pos.board()))
            }
            Eval::Mate(n) => mate_to_internal(if white { n } else { n.saturating_neg() }),
        }
    }
}

/// The rows of one calendar month of a block.
#[derive(Default)]
pub struct MonthRows {
    pub rows: PositionColumns,
    pub games: Vec<GameRecord>,
}

/// What one block yielded. Game numbers are 0-based within the block.
#[derive(Default)]
pub struct BlockRows {
    /// By partition name, `month=YYYY-MM` (or `month=unknown`).
    pub months: BTreeMap<String, MonthRows>,
    pub games: u64,
    pub skipped: Vec<(u64, String)>,
    pub variants: BTreeMap<String, u64>,
    pub evals: u64,
}

/// Parses one block of whole games. `input_key` and `block_offset` make game ids of games
/// without a Lichess URL unique and stable.
pub fn parse_block(block: &[u8], input_key: u64, block_offset: u64) -> BlockRows {
    let (out, lost_letter) = parse_games(block, input_key, block_offset);
    // pgn-reader silently drops what it cannot read as SAN: the piece letter of `e7e8q` /
    // `e8Q` (it sees `e7e8`, `e8`) and the null move `0000`, both of which python-chess reads.
    // Rare, so such blocks are spelled out and parsed again (same games, same order).
    if (lost_letter || memchr::memmem::find(block, b"0000").is_some() || has_hyphenated_move(block))
        && let Some(fixed) = spell_out_for_pgn_reader(block)
    {
        return parse_games(&fixed, input_key, block_offset).0;
    }
    out
}

/// The rows of a block, and whether a pawn reached the last rank without a promotion piece.
fn parse_games(block: &[u8], input_key: u64, block_offset: u64) -> (BlockRows, bool) {
    let mut collector = Collector {
        out: BlockRows::default(),
        input_key,
        block_offset,
        scratch: PositionColumns::default(),
        lost_letter: false,
        open: Open::No,
    };
    let mut reader = Reader::new(block);
    loop {
        match reader.read_game(&mut collector) {
            Ok(Some(())) => {}
            Ok(None) => break,
            Err(e) => {
                // pgn-reader skips to the next line after a broken tag; record and go on. A
                // game whose movetext had begun is already counted: it is the one skipped.
                let game = match std::mem::replace(&mut collector.open, Open::No) {
                    Open::Playing => collector.out.games - 1,
                    // Already counted as a variant or skipped with its reason.
                    Open::Accounted => continue,
                    Open::No => {
                        collector.out.games += 1;
                        collector.out.games - 1
                    }
                };
                collector
                    .out
                    .skipped
                    .push((game, format!("unreadable PGN: {e}")));
            }
        }
    }
    (collector.out, collector.lost_letter)
}

/// `block` with the movetext tokens pgn-reader cannot read rewritten as ones it can: a pawn
/// promotion without `=` (`e7e8q`, `bxa8N`) gets one, `0000` becomes `--`. Tag lines, `%`
/// lines and comments are left alone. `None` when nothing needed it.
/// Long algebraic with a hyphen (`e2-e4`, `Ng1-f3`), as some tools write and python-chess
/// reads: pgn-reader drops such a token without a word, and the next move would then be
/// played by the wrong side.
fn is_hyphenated_square_pair(around: &[u8]) -> bool {
    matches!(around, [f1, r1, b'-', f2, r2, ..]
        if (b'a'..=b'h').contains(f1) && (b'1'..=b'8').contains(r1)
            && (b'a'..=b'h').contains(f2) && (b'1'..=b'8').contains(r2))
}

fn has_hyphenated_move(block: &[u8]) -> bool {
    memchr::memchr_iter(b'-', block)
        .any(|at| at >= 2 && is_hyphenated_square_pair(&block[at - 2..]))
}

fn spell_out_for_pgn_reader(block: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(block.len() + 16);
    let mut changed = false;
    let mut i = 0;
    let mut line_start = true;
    let skip_to =
        |i: usize, byte: u8| memchr::memchr(byte, &block[i..]).map_or(block.len(), |at| i + at + 1);
    while i < block.len() {
        let b = block[i];
        let end = match b {
            b'{' => skip_to(i, b'}'),
            b';' => skip_to(i, b'\n'),
            b'[' => skip_to(i, b'\n'),
            b'%' if line_start => skip_to(i, b'\n'),
            _ if is_delimiter(b) => i + 1,
            _ => {
                let end = block[i..]
                    .iter()
                    .position(|&c| is_delimiter(c))
                    .map_or(block.len(), |at| i + at);
                let token = &block[i..end];
                let core = token.len()
                    - token
                        .iter()
                        .rev()
                        .take_while(|c| b"+#!?".contains(c))
                        .count();
                // `e2-e4` → `e2e4` (read as UCI), `Ng1-f3` → `Ng1f3` (fully disambiguated SAN).
                let piece = usize::from(token.first().is_some_and(|c| b"NBRQK".contains(c)));
                if core >= piece + 5 && is_hyphenated_square_pair(&token[piece..core]) {
                    let mut joined = token[..piece + 2].to_vec();
                    joined.extend_from_slice(&token[piece + 3..core]);
                    if is_promotion_without_equals(&joined) {
                        joined.insert(joined.len() - 1, b'=');
                    }
                    out.extend_from_slice(&joined);
                    out.extend_from_slice(&token[core..]);
                    changed = true;
                    i = end;
                    line_start = false;
                    continue;
                }
                if &token[..core] == b"0000" {
                    out.extend_from_slice(b"--");
                    out.extend_from_slice(&token[core..]);
                    changed = true;
                    i = end;
                    line_start = false;
                    continue;
                }
                if is_promotion_without_equals(&token[..core]) {
                    out.extend_from_slice(&token[..core - 1]);
                    out.push(b'=');
                    out.extend_from_slice(&token[core - 1..]);
                    changed = true;
                    i = end;
                    line_start = false;
                    continue;
                }
                end
            }
        };
        out.extend_from_slice(&block[i..end]);
        line_start = block[end - 1] == b'\n';
        i = end;
    }
    changed.then_some(out)
}

fn is_delimiter(b: u8) -> bool {
    matches!(
        b,
        b' ' | b'\t' | b'\r' | b'\n' | b'.' | b'(' | b')' | b'{' | b'}' | b';' | b'[' | b'$'
    )
}

/// A pawn move to the first or last rank ending in a piece letter with no `=`, as
/// python-chess reads it: `[a-h]?[1-8]?x?[a-h][18][nbrqkNBRQK]`.
fn is_promotion_without_equals(t: &[u8]) -> bool {
    let Some((&piece, rest)) = t.split_last() else {
        return false;
    };
    let file = |c: &u8| (b'a'..=b'h').contains(c);
    let rank = |c: &u8| (b'1'..=b'8').contains(c);
    let (Some(to_file), Some(to_rank)) = (rest.len().checked_sub(2), rest.last()) else {
        return false;
    };
    let from = &rest[..to_file];
    let from = from.strip_suffix(b"x").unwrap_or(from);
    b"nbrqkNBRQK".contains(&piece)
        && file(&rest[to_file])
        && matches!(to_rank, b'1' | b'8')
        && match from {
            [] => true,
            [f] => file(f),
            [f, r] => file(f) && rank(r),
            _ => false,
        }
}

#[derive(Default)]
struct Tags {
    values: [Option<String>; TAG_COLUMNS.len()],
    fen: Option<String>,
    variant: Option<String>,
    date: Option<String>,
    any: bool,
}

enum Game {
    Skip,
    Play(Box<Playing>),
}

struct Playing {
    index: u64,
    tags: Tags,
    pos: Chess,
    /// Chess960 when the game is (python-chess: the tag, or castling rights only Chess960 has).
    mode: CastlingMode,
    first_ply: u32,
    plies: u32,
    pending: Option<Eval>,
    outcome: Option<Outcome>,
    error: Option<String>,
}

struct Collector {
    out: BlockRows,
    input_key: u64,
    block_offset: u64,
    scratch: PositionColumns,
    /// A pawn move to the last rank came without a promotion piece (see [`parse_block`]).
    lost_letter: bool,
    /// Whether a game's movetext began and has not ended: a reader error now belongs to it.
    open: Open,
}

#[derive(Clone, Copy, PartialEq)]
enum Open {
    No,
    /// Being played: a reader error skips it.
    Playing,
    /// Already counted (a variant, or skipped with its reason when it started).
    Accounted,
}

fn clear(c: &mut PositionColumns) {
    c.fen_bytes.clear();
    c.fen_ends.clear();
    c.move_bytes.clear();
    c.move_ends.clear();
    c.score.clear();
    c.result.clear();
    c.ply.clear();
    c.game_id.clear();
}

fn append(dst: &mut PositionColumns, src: &PositionColumns) {
    let fen_base = dst.fen_bytes.len() as u32;
    dst.fen_bytes.extend_from_slice(&src.fen_bytes);
    dst.fen_ends
        .extend(src.fen_ends.iter().map(|e| e + fen_base));
    let move_base = dst.move_bytes.len() as u32;
    dst.move_bytes.extend_from_slice(&src.move_bytes);
    dst.move_ends
        .extend(src.move_ends.iter().map(|e| e + move_base));
    dst.score.extend_from_slice(&src.score);
    dst.result.extend_from_slice(&src.result);
    dst.ply.extend_from_slice(&src.ply);
    dst.game_id.extend_from_slice(&src.game_id);
}

/// `month=YYYY-MM` from a PGN date (`2025.05.01`); `month=unknown` when it has no month.
fn month_partition(date: Option<&str>) -> String {
    let month = date.and_then(|d| {
        let b = d.as_bytes();
        let ok = b.len() >= 7
            && b[..4].iter().all(u8::is_ascii_digit)
            && b[4] == b'.'
            && b[5..7].iter().all(u8::is_ascii_digit);
        ok.then(|| format!("{}-{}", &d[..4], &d[5..7]))
    });
    format!("month={}", month.as_deref().unwrap_or("unknown"))
}

/// Lichess game ids are 8 base-62 characters: decoded, they are the game id (below 2^48).
/// Other games get a hash of where they are in the input, with the top bit set.
fn lichess_id(site: Option<&str>) -> Option<u64> {
    let id = site?.strip_prefix("https://lichess.org/")?;
    let id = id.get(..8)?;
    let mut v = 0u64;
    for c in id.bytes() {
        let d = match c {
            b'0'..=b'9' => c - b'0',
            b'a'..=b'z' => c - b'a' + 10,
            b'A'..=b'Z' => c - b'A' + 36,
            _ => return None,
        };
        v = v * 62 + d as u64;
    }
    Some(v)
}

const SITE: usize = 1;
const RESULT: usize = 4;
const UTC_DATE: usize = 8;

fn white_result(tag: Option<&str>, outcome: Option<Outcome>) -> Option<i8> {
    match tag {
        Some("1-0") => Some(1),
        Some("0-1") => Some(-1),
        Some("1/2-1/2") => Some(0),
        Some("*") => None,
        _ => match outcome {
            Some(Outcome::Known(KnownOutcome::Decisive { winner })) => {
                Some(if winner == Color::White { 1 } else { -1 })
            }
            Some(Outcome::Known(KnownOutcome::Draw)) => Some(0),
            _ => None,
        },
    }
}

impl Collector {
    // shakmaty hands the rejected position back inside its error; that is what makes it large.
    #[allow(clippy::result_large_err)]
    fn start(&mut self, tags: Tags) -> Game {
        let index = self.out.games;
        self.out.games += 1;
        if !tags.any {
            self.out.skipped.push((
                index,
                "no tag pairs before the moves (not a PGN game)".to_string(),
            ));
            return Game::Skip;
        }
        let variant = tags.variant.as_deref().unwrap_or("Standard");
        let chess960 = is_chess960_variant(variant);
        if !chess960 && !is_standard_variant(variant) {
            *self.out.variants.entry(variant.to_string()).or_default() += 1;
            return Game::Skip;
        }
        let (pos, mode) = match &tags.fen {
            None if chess960 => (
                Chess::from_setup(Setup::initial(), CastlingMode::Chess960)
                    .expect("the initial position is legal"),
                CastlingMode::Chess960,
            ),
            None => (Chess::default(), CastlingMode::Standard),
            Some(text) => {
                let parsed = Fen::from_ascii(text.as_bytes()).map_err(|e| e.to_string());
                let setup = parsed.and_then(|fen| {
                    let setup = fen.into_setup();
                    let mode = if chess960 {
                        CastlingMode::Chess960
                    } else {
                        CastlingMode::detect(&setup)
                    };
                    setup
                        .position::<Chess>(mode)
                        .or_else(|e| e.ignore_invalid_ep_square())
                        // python-chess drops castling rights without their king and rook, and
                        // takes set-ups with more pieces than promotions allow.
                        .or_else(|e| e.ignore_invalid_castling_rights())
                        .or_else(|e| e.ignore_too_much_material())
                        .map(|p| (p, mode))
                        .map_err(|e| e.to_string())
                });
                match setup {
                    Ok(found) => found,
                    Err(why) => {
                        self.out
                            .skipped
                            .push((index, format!("FEN tag {text:?} is not usable: {why}")));
                        return Game::Skip;
                    }
                }
            }
        };
        let first_ply =
            2 * (pos.fullmoves().get().min(1 << 30) - 1) + (pos.turn() == Color::Black) as u32;
        clear(&mut self.scratch);
        Game::Play(Box::new(Playing {
            index,
            tags,
            pos,
            mode,
            first_ply,
            plies: 0,
            pending: None,
            outcome: None,
            error: None,
        }))
    }

    fn finish(&mut self, game: Playing) {
        if let Some(why) = game.error {
            self.out.skipped.push((game.index, why));
            return;
        }
        let game_id = lichess_id(game.tags.values[SITE].as_deref()).unwrap_or_else(|| {
            (1 << 63)
                | splitmix64(self.input_key ^ splitmix64(self.block_offset ^ (game.index << 40)))
                    >> 1
        });
        let result = white_result(game.tags.values[RESULT].as_deref(), game.outcome);
        let s = &mut self.scratch;
        for (i, &ply) in s.ply.iter().enumerate() {
            s.result[i] = match result {
                None => NO_RESULT,
                Some(r) if ply % 2 == 0 => r,
                Some(r) => -r,
            };
            s.game_id[i] = game_id;
        }
        let date = game.tags.values[UTC_DATE]
            .as_deref()
            .or(game.tags.date.as_deref());
        let month = self.out.months.entry(month_partition(date)).or_default();
        append(&mut month.rows, s);
        month.games.push(GameRecord {
            game_id,
            start_fen: game.tags.fen.clone(),
            tags: game.tags.values,
            plies: game.plies.min(u16::MAX as u32) as u16,
            chess960: game.mode == CastlingMode::Chess960,
        });
    }
}

/// python-chess's names of standard chess (`chess.Board.aliases`, and the ICS wild boards
/// it reads as standard chess).
fn is_standard_variant(v: &str) -> bool {
    let standard = [
        "standard",
        "chess",
        "classical",
        "normal",
        "illegal",
        "from position",
    ];
    let wild = ["0", "1", "2", "3", "4", "5", "6", "7", "8", "8a"];
    standard.iter().any(|s| v.eq_ignore_ascii_case(s))
        || v.get(..5).is_some_and(|p| p.eq_ignore_ascii_case("wild/"))
            && wild.contains(&v[5..].to_ascii_lowercase().as_str())
}

/// python-chess's names of Chess960 (`Headers.is_chess960`).
fn is_chess960_variant(v: &str) -> bool {
    let names = [
        "chess960",
        "chess 960",
        "fischerandom",
        "fischerrandom",
        "fischer random",
    ];
    names.iter().any(|n| v.eq_ignore_ascii_case(n))
}

enum Step {
    Move(Move),
    /// The position after a null move.
    Null(Chess),
}

/// The position after a null move, as python-chess's `board.push(chess.Move.null())`: the
/// other side to move, no en passant square, the clocks advanced. `None` when the side to
/// move is in check (the result would leave a king in check with the opponent to move).
fn null_move(pos: &Chess) -> Option<Chess> {
    if pos.is_check() {
        return None;
    }
    let mut setup = pos.to_setup(EnPassantMode::Legal);
    setup.swap_turn();
    setup.halfmoves = setup.halfmoves.saturating_add(1);
    if pos.turn() == Color::Black {
        setup.fullmoves = setup.fullmoves.saturating_add(1);
    }
    Chess::from_setup(setup, pos.castles().mode()).ok()
}

/// A move given as from and to squares, as python-chess's `Board.find_move`: castling is the
/// king's two-square move or king takes rook in standard chess, only king takes rook in
/// Chess960 (shakmaty would also take `e1g1` there).
fn uci_move(pos: &Chess, from: Square, to: Square, promotion: Option<Role>) -> Option<Move> {
    let m = UciMove::Normal {
        from,
        to,
        promotion,
    }
    .to_move(pos)
    .ok()?;
    match m {
        Move::Castle { rook, .. }
            if pos.castles().mode() == CastlingMode::Chess960 && rook != to =>
        {
            None
        }
        m => Some(m),
    }
}

impl Visitor for Collector {
    type Tags = Tags;
    type Movetext = Game;
    type Output = ();

    fn begin_tags(&mut self) -> ControlFlow<(), Tags> {
        ControlFlow::Continue(Tags::default())
    }

    fn tag(&mut self, tags: &mut Tags, name: &[u8], value: RawTag<'_>) -> ControlFlow<()> {
        tags.any = true;
        let value = || value.decode_utf8_lossy().trim().to_string();
        match name {
            b"FEN" => tags.fen = Some(value()),
            b"Variant" => tags.variant = Some(value()),
            b"Date" => tags.date = Some(value()),
            _ => {
                if let Some(i) = TAG_COLUMNS.iter().position(|(t, _)| t.as_bytes() == name) {
                    tags.values[i] = Some(value());
                }
            }
        }
        ControlFlow::Continue(())
    }

    fn begin_movetext(&mut self, tags: Tags) -> ControlFlow<(), Game> {
        let game = self.start(tags);
        self.open = match game {
            Game::Play(_) => Open::Playing,
            _ => Open::Accounted,
        };
        ControlFlow::Continue(game)
    }

    fn san(&mut self, game: &mut Game, san_plus: SanPlus) -> ControlFlow<()> {
        let Game::Play(g) = game else {
            return ControlFlow::Continue(());
        };
        if g.error.is_some() {
            return ControlFlow::Continue(());
        }
        let step = match san_plus.san {
            San::Null => null_move(&g.pos).map(Step::Null).ok_or(
                "a null move while in check (python-chess would play it into an impossible position)",
            ),
            // A from square and no piece letter: UCI (`g1f3`, `e1g1`, `e7e8q`), as python-chess
            // takes it (any piece, castling too).
            San::Normal {
                role: Role::Pawn,
                file: Some(file),
                rank: Some(rank),
                to,
                promotion,
                ..
            } => uci_move(&g.pos, Square::from_coords(file, rank), to, promotion)
                .map(Step::Move)
                .ok_or("illegal"),
            san => san.to_move(&g.pos).map(Step::Move).map_err(|e| match e {
                shakmaty::san::SanError::IllegalSan => "illegal",
                shakmaty::san::SanError::AmbiguousSan => "ambiguous",
            }),
        };
        let step = match step {
            Ok(step) => step,
            Err(why) => {
                if let San::Normal {
                    role: Role::Pawn,
                    to,
                    promotion: None,
                    ..
                } = san_plus.san
                    && matches!(to.rank(), Rank::First | Rank::Eighth)
                {
                    self.lost_letter = true;
                }
                let ply = g.first_ply + g.plies;
                let dots = if ply % 2 == 0 { "." } else { "..." };
                g.error = Some(format!(
                    "move {}{dots} {san_plus} is {why} (ply {})",
                    ply / 2 + 1,
                    ply + 1
                ));
                return ControlFlow::Continue(());
            }
        };
        let s = &mut self.scratch;
        write_fen(&g.pos, &mut s.fen_bytes);
        s.fen_ends.push(s.fen_bytes.len() as u32);
        match &step {
            Step::Move(m) => write_uci(m, g.mode, &mut s.move_bytes),
            Step::Null(_) => s.move_bytes.extend_from_slice(b"0000"),
        }
        s.move_ends.push(s.move_bytes.len() as u32);
        s.score.push(match g.pending.take() {
            Some(e) => e.to_internal(&g.pos),
            None => NO_SCORE,
        });
        s.result.push(NO_RESULT);
        s.ply
            .push((g.first_ply + g.plies).min(u16::MAX as u32) as u16);
        s.game_id.push(0);
        match step {
            Step::Move(m) => g.pos.play_unchecked(m),
            Step::Null(next) => g.pos = next,
        }
        g.plies += 1;
        ControlFlow::Continue(())
    }

    fn comment(&mut self, game: &mut Game, comment: RawComment<'_>) -> ControlFlow<()> {
        if let Game::Play(g) = game
            && g.plies > 0
            && let Some(e) = parse_eval(comment.as_bytes())
        {
            self.out.evals += g.pending.is_none() as u64;
            g.pending = Some(e);
        }
        ControlFlow::Continue(())
    }

    fn begin_variation(&mut self, _: &mut Game) -> ControlFlow<(), Skip> {
        ControlFlow::Continue(Skip(true)) // main line only
    }

    fn outcome(&mut self, game: &mut Game, outcome: Outcome) -> ControlFlow<()> {
        if let Game::Play(g) = game {
            g.outcome = Some(outcome);
        }
        ControlFlow::Continue(())
    }

    fn end_game(&mut self, game: Game) {
        self.open = Open::No;
        if let Game::Play(g) = game {
            self.finish(*g);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evals_parse() {
        assert_eq!(
            parse_eval(b" [%eval 0.23] [%clk 0:01:00] "),
            Some(Eval::Pawns(0.23))
        );
        assert_eq!(parse_eval(b"[%eval -1.5,20]"), Some(Eval::Pawns(-1.5)));
        assert_eq!(parse_eval(b"[%eval #-3]"), Some(Eval::Mate(-3)));
        // Out of range: no score, and no overflow on the way.
        for huge in [
            &b"[%eval #2147483647]"[..],
            b"[%eval #-2147483648]",
            b"[%eval #1001]",
        ] {
            assert_eq!(parse_eval(huge), None);
        }
        assert_eq!(parse_eval(b"[%eval #99999999999]"), None);
        assert_eq!(parse_eval(b"[%eval #-1000]"), Some(Eval::Mate(-1000)));
        assert_eq!(parse_eval(b"[%clk 0:01:00]"), None);
        assert_eq!(parse_eval(b"[%eval x]"), None);
    }

    #[test]
    fn lichess_ids_decode() {
        assert_eq!(lichess_id(Some("https://lichess.org/00000001")), Some(1));
        assert_eq!(lichess_id(Some("https://lichess.org/0000000Z")), Some(61));
        assert_eq!(lichess_id(Some("https://example.com/x")), None);
    }

    /// Every row of a block as (FEN, move, ply), and its games, in input order.
    fn read(text: &str) -> (Vec<(String, String, u16)>, Vec<GameRecord>, BlockRows) {
        let out = parse_block(text.as_bytes(), 7, 0);
        let mut rows = Vec::new();
        let mut games = Vec::new();
        for m in out.months.values() {
            let r = &m.rows;
            rows.extend(
                (0..r.rows()).map(|i| (r.fen(i).to_string(), r.uci(i).to_string(), r.ply[i])),
            );
            games.extend(m.games.iter().cloned());
        }
        (rows, games, out)
    }

    fn moves(rows: &[(String, String, u16)]) -> Vec<&str> {
        rows.iter().map(|r| r.1.as_str()).collect()
    }

    #[test]
    fn null_moves_switch_sides_and_keep_the_game() {
        let (rows, games, out) = read(
            "[Event \"a\"]\n\n1. e4 -- 2. d4 Z0 3. Nf3 e5 *\n\n\
             [Event \"b\"]\n[FEN \"4k3/8/8/3pP3/8/8/8/4K3 w - d6 0 2\"]\n\n2. --+ Kd7 *\n\n\
             [Event \"c\"]\n\n1. e4 0000 2. d4 *\n",
        );
        assert!(out.skipped.is_empty(), "{:?}", out.skipped);
        assert_eq!(games.len(), 3);
        assert_eq!(
            moves(&rows),
            [
                "e2e4", "0000", "d2d4", "0000", "g1f3", "e7e5", "0000", "e8d7", "e2e4", "0000",
                "d2d4"
            ]
        );
        // python-chess's board after `push(Move.null())`: turn, clocks, no en passant square.
        let after = [
            (
                2,
                "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR w KQkq - 1 2",
                2,
            ),
            (
                4,
                "rnbqkbnr/pppppppp/8/8/3PP3/8/PPP2PPP/RNBQKBNR w KQkq - 1 3",
                4,
            ),
            (6, "4k3/8/8/3pP3/8/8/8/4K3 w - d6 0 2", 2),
            (7, "4k3/8/8/3pP3/8/8/8/4K3 b - - 1 2", 3),
        ];
        for (i, fen, ply) in after {
            assert_eq!((rows[i].0.as_str(), rows[i].2), (fen, ply), "row {i}");
        }
        assert_eq!(games.iter().map(|g| g.plies).collect::<Vec<_>>(), [6, 2, 3]);
    }

    #[test]
    fn a_null_move_in_check_skips_the_game() {
        let (rows, _, out) = read("[Event \"a\"]\n\n1. e4 e5 2. Qh5 Nc6 3. Qxf7+ -- 4. Qxe8 *\n");
        assert!(rows.is_empty());
        assert_eq!(out.skipped.len(), 1);
        assert!(
            out.skipped[0]
                .1
                .contains("3... -- is a null move while in check"),
            "{:?}",
            out.skipped
        );
    }

    #[test]
    fn chess960_games_use_x_fen_and_king_takes_rook() {
        let (rows, games, out) = read(
            "[Event \"a\"]\n[Variant \"Chess960\"]\n\n\
             1. e4 e5 2. Nf3 Nf6 3. Bc4 Bc5 4. O-O O-O *\n\n\
             [Event \"b\"]\n[Variant \"fischerandom\"]\n[SetUp \"1\"]\n\
             [FEN \"rk2r2r/pppppppp/8/8/8/8/PPPPPPPP/RK2R2R w EAea - 0 1\"]\n\n\
             1. O-O-O O-O 2. d4 *\n\n\
             [Event \"c\"]\n[Variant \"Fischerandom\"]\n[SetUp \"1\"]\n\
             [FEN \"1r3krq/pppppppp/8/8/8/8/PPPPPPPP/1R3KRQ w KQkq - 0 1\"]\n\n1. O-O O-O-O *\n\n\
             [Event \"d\"]\n\n1. e4 e5 2. Nf3 Nf6 3. Bc4 Bc5 4. O-O O-O *\n",
        );
        assert!(
            out.skipped.is_empty() && out.variants.is_empty(),
            "{:?}",
            out.skipped
        );
        let m = moves(&rows);
        assert_eq!(
            (m[6], m[7]),
            ("e1h1", "e8h8"),
            "Chess960 castling is king takes rook"
        );
        assert_eq!(&m[8..11], ["b1a1", "b8e8", "d2d4"]);
        assert_eq!(&m[11..13], ["f1g1", "f8b8"], "king and rook side by side");
        assert_eq!(
            (m[19], m[20]),
            ("e1g1", "e8g8"),
            "standard castling stays e1g1"
        );
        // X-FEN as python-chess writes it: KQkq for the outermost rooks, else the file.
        assert_eq!(
            rows[6].0,
            "rnbqk2r/pppp1ppp/5n2/2b1p3/2B1P3/5N2/PPPP1PPP/RNBQK2R w KQkq - 4 4"
        );
        assert_eq!(
            rows[8].0,
            "rk2r2r/pppppppp/8/8/8/8/PPPPPPPP/RK2R2R w EQeq - 0 1"
        );
        assert_eq!(
            rows[9].0,
            "rk2r2r/pppppppp/8/8/8/8/PPPPPPPP/2KRR2R b eq - 1 1"
        );
        assert_eq!(
            rows[12].0,
            "1r3krq/pppppppp/8/8/8/8/PPPPPPPP/1R3RKQ b kq - 1 1"
        );
        let flags: Vec<bool> = games.iter().map(|g| g.chess960).collect();
        assert_eq!(flags, [true, true, true, false]);
    }

    #[test]
    fn uci_movetext_is_played_when_legal() {
        let (rows, _, out) = read(
            "[Event \"a\"]\n\n1. g1f3 g8f6 2. e2e4 f6e4 3. f1c4 e4d6 4. e1g1 d6c4 *\n\n\
             [Event \"b\"]\n[FEN \"8/4P3/8/8/8/8/k7/4K3 w - - 0 1\"]\n\n1. e7e8q Ka3 2. e8e7 *\n\n\
             [Event \"c\"]\n[FEN \"8/8/8/8/8/8/k7/4K2R w K - 0 1\"]\n\n1. e1h1 *\n\n\
             [Event \"d\"]\n\n1. e2e4 e7e5 2. g1g3 *\n\n\
             [Event \"e\"]\n[Variant \"Chess960\"]\n\n1. e4 e5 2. Nf3 Nf6 3. Bc4 Bc5 4. e1g1 *\n",
        );
        assert_eq!(
            moves(&rows),
            [
                "g1f3", "g8f6", "e2e4", "f6e4", "f1c4", "e4d6", "e1g1", "d6c4", "e7e8q", "a2a3",
                "e8e7", "e1g1"
            ]
        );
        let skipped: Vec<_> = out
            .skipped
            .iter()
            .map(|(g, why)| (*g, why.as_str()))
            .collect();
        assert_eq!(
            skipped,
            [
                (3, "move 2. g1g3 is illegal (ply 3)"),
                (4, "move 4. e1g1 is illegal (ply 7)"),
            ],
            "an illegal UCI move skips its game; e1g1 is not castling in Chess960"
        );
    }

    #[test]
    fn other_variants_are_still_skipped_and_standard_aliases_read() {
        let (rows, _, out) = read(
            "[Event \"a\"]\n[Variant \"Crazyhouse\"]\n\n1. e4 e5 *\n\n\
             [Event \"b\"]\n[Variant \"Classical\"]\n\n1. e4 e5 *\n\n\
             [Event \"c\"]\n[Variant \"wild/0\"]\n\n1. e4 *\n",
        );
        assert_eq!(rows.len(), 3);
        assert_eq!(
            out.variants.into_iter().collect::<Vec<_>>(),
            [("Crazyhouse".to_string(), 1)]
        );
    }

    #[test]
    fn promotions_without_equals_are_spelled_out() {
        assert!(is_promotion_without_equals(b"e7e8q"));
        assert!(is_promotion_without_equals(b"bxa8N"));
        assert!(is_promotion_without_equals(b"e1Q"));
        assert!(!is_promotion_without_equals(b"e7e8"));
        assert!(!is_promotion_without_equals(b"Qe8"));
        assert!(!is_promotion_without_equals(b"e6Q"));
        let text = b"[Site \"e7e8q 0000\"]\n\n1. e7e8q+ { e7e8q } 0000 (1. e8Q) 2.bxa1n 1-0\n";
        let fixed = spell_out_for_pgn_reader(text).unwrap();
        assert_eq!(
            String::from_utf8(fixed).unwrap(),
            "[Site \"e7e8q 0000\"]\n\n1. e7e8=q+ { e7e8q } -- (1. e8=Q) 2.bxa1=n 1-0\n"
        );
        assert!(spell_out_for_pgn_reader(b"1. e4 e5 { 0000 } *").is_none());
    }

    /// `e2-e4` and `Ng1-f3` (python-chess reads them) give the rows plain SAN gives.
    #[test]
    fn hyphenated_long_algebraic_is_read() {
        let tags = "[Event \"x\"]\n[Result \"1-0\"]\n\n";
        let long = format!("{tags}1. e2-e4 e7-e5 2. Ng1-f3 Nb8-c6 3. Bf1-c4+ Ng8-f6 1-0\n");
        let san = format!("{tags}1. e4 e5 2. Nf3 Nc6 3. Bc4+ Nf6 1-0\n");
        assert!(has_hyphenated_move(long.as_bytes()));
        assert!(!has_hyphenated_move(san.as_bytes()));
        let rows = |text: &str| {
            let out = parse_block(text.as_bytes(), 7, 0);
            assert!(out.skipped.is_empty(), "{:?}", out.skipped);
            let m = out.months.into_values().next().unwrap();
            (
                m.rows.fen_bytes.clone(),
                m.rows.move_bytes.clone(),
                m.rows.rows(),
            )
        };
        let (fens, moves, n) = rows(&long);
        assert_eq!(n, 6);
        assert_eq!((fens, moves, n), rows(&san));
        let fixed = spell_out_for_pgn_reader(b"1. e7-e8q Ke1-e2+ 1-0 { a1-a2 }").unwrap();
        assert_eq!(fixed, b"1. e7e8=q Ke1e2+ 1-0 { a1-a2 }");
    }

    #[test]
    fn blocks_cut_at_game_starts_only() {
        let game = "[Event \"x\"]\n[Site \"y\"]\n\n1. e4 { [%eval 0.1]\n\n[%clk 0:01] } e5 1-0\n\n";
        let text = game.repeat(BLOCK_BYTES / game.len() * 3);
        let mut s = BlockSplitter::new(text.as_bytes(), u64::MAX);
        let mut total = 0;
        while let Some((at, block)) = s.next_block().unwrap() {
            assert_eq!(at as usize, total);
            assert!(block.starts_with(b"[Event"));
            total += block.len();
        }
        assert_eq!(total, text.len());
    }

    /// A game the reader gives up on part-way (here: a comment that never closes) is skipped
    /// under its own number, and counted once (found by lakefish-fuzz).
    #[test]
    fn a_game_cut_inside_a_comment_is_counted_once() {
        let games = "[Event \"a\"]\n\n1. e4 e5 1-0\n\n[Event \"b\"]\n\n1. d4 d5 0-1\n\n\
                     [Event \"c\"]\n\n1. c4 { never closed";
        let out = parse_block(games.as_bytes(), 1, 0);
        assert_eq!(out.games, 3, "{:?}", out.skipped);
        let rows: usize = out.months.values().map(|m| m.rows.rows()).sum();
        assert_eq!(rows, 4, "games a and b");
        assert!(
            out.skipped.iter().all(|(g, _)| *g == 2),
            "{:?}",
            out.skipped
        );
    }

    /// Streams with no game boundary: the buffer never grows past a block plus the limit
    /// plus one read, and everything is accounted for as skipped.
    #[test]
    fn boundaryless_streams_stay_in_bounded_memory() {
        struct Endless(u64);
        impl Read for Endless {
            fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                let n = (buf.len() as u64).min(self.0) as usize;
                buf[..n].iter_mut().enumerate().for_each(|(i, b)| {
                    *b = b"1. e4 e5 \n"[i % 10];
                });
                self.0 -= n as u64;
                Ok(n)
            }
        }
        let total = 40u64 << 20;
        let max = 1u64 << 20;
        let mut s = BlockSplitter::new(Endless(total), max);
        let mut peak = 0;
        let mut blocks = 0;
        while let Some((_, block)) = s.next_block().unwrap() {
            blocks += block.len() as u64;
            peak = peak.max(s.buf.capacity());
        }
        let skipped: u64 = s.take_too_long().iter().map(|g| g.len).sum();
        assert_eq!(blocks + skipped, total);
        assert!(skipped > total / 2, "{skipped}");
        assert!(
            peak <= BLOCK_BYTES + max as usize + (3 << 20),
            "buffer grew to {peak} bytes"
        );
    }
}

/// A game of [`synthetic_pgn`] as the generator knows it: what the lake must hold.
#[derive(Debug, Clone)]
pub struct SyntheticGame {
    /// False for games the ingest must skip (a variant, an illegal move).
    pub ingestible: bool,
    /// Per row: FEN before the move, the move in UCI, the row's score in internal units.
    pub rows: Vec<(String, String, Option<i16>)>,
}

/// A Lichess-style PGN of random legal games made by the project itself (tests and benches
/// must not depend on `../shared`): clocks and evals in comments (mates too), NAGs, move
/// suffixes, side variations, a BOM, a zero-move game, a game from a `FEN` tag, and, when
/// `with_bad_games`, a Crazyhouse game and a game with an illegal move. Same seed, same text.
pub fn synthetic_pgn(
    games: usize,
    seed: u64,
    with_bad_games: bool,
) -> (String, Vec<SyntheticGame>) {
    use shakmaty::san::SanPlus as Sp;
    let mut rng = lakefish_engine::random_games::SplitMix(seed);
    let mut out = String::from("\u{feff}");
    let mut truth = Vec::new();
    for g in 0..games {
        let special = g % 7;
        let (start, fen_tag) = if special == 3 {
            let fen = "r3k2r/pppq1ppp/2npbn2/4p3/4P3/2NPBN2/PPPQ1PPP/R3K2R w KQkq - 4 8";
            let pos: Chess = Fen::from_ascii(fen.as_bytes())
                .unwrap()
                .into_position(CastlingMode::Standard)
                .unwrap();
            (pos, Some(fen))
        } else {
            (Chess::default(), None)
        };
        let variant = with_bad_games && g == 5;
        let illegal_at = (with_bad_games && g == 2).then_some(9);
        let plies = if special == 6 {
            0
        } else {
            20 + rng.below(60) as usize
        };
        out.push_str(&format!(
            "[Event \"Rated Blitz game\"]\n[Site \"https://lichess.org/{:08}\"]\n[Date \"2025.05.01\"]\n",
            g
        ));
        out.push_str("[White \"alice\"]\n[Black \"bob\"]\n");
        if variant {
            out.push_str("[Variant \"Crazyhouse\"]\n");
        }
        if let Some(fen) = fen_tag {
            out.push_str(&format!("[SetUp \"1\"]\n[FEN \"{fen}\"]\n"));
        }
        let mut pos = start;
        let mut movetext = String::new();
        let mut rows = Vec::new();
        let mut pending: Option<Eval> = None;
        let mut ended = None;
        for ply in 0..plies {
            let moves = pos.legal_moves();
            if moves.is_empty() {
                ended = Some(if pos.is_check() {
                    if pos.turn() == Color::White {
                        "0-1"
                    } else {
                        "1-0"
                    }
                } else {
                    "1/2-1/2"
                });
                break;
            }
            let m = moves[rng.below(moves.len() as u64) as usize];
            let fullmove = pos.fullmoves().get();
            if pos.turn() == Color::White {
                movetext.push_str(&format!("{fullmove}. "));
            } else if ply == 0 {
                movetext.push_str(&format!("{fullmove}... "));
            }
            let score = pending.take().map(|e| e.to_internal(&pos));
            let mut uci = Vec::new();
            write_uci(&m, CastlingMode::Standard, &mut uci);
            let mut fen = Vec::new();
            write_fen(&pos, &mut fen);
            rows.push((
                String::from_utf8(fen).unwrap(),
                String::from_utf8(uci).unwrap(),
                score,
            ));
            if illegal_at == Some(ply) {
                // Black's king is far from a1 at ply 9, so this is always illegal.
                movetext.push_str("Kxa1 ");
            }
            let before = pos.clone();
            let san = Sp::from_move_and_play_unchecked(&mut pos, m);
            movetext.push_str(&san.to_string());
            match rng.below(12) {
                0 => movetext.push_str("?!"),
                1 => movetext.push_str(" $2"),
                _ => {}
            }
            movetext.push(' ');
            let r = rng.below(10);
            if r < 6 {
                let e = if r == 0 {
                    Eval::Mate(rng.below(9) as i32 - 4)
                } else {
                    Eval::Pawns((rng.below(2001) as f64 - 1000.0) / 100.0)
                };
                let text = match e {
                    Eval::Mate(n) => format!("#{n}"),
                    Eval::Pawns(p) => format!("{p:.2}"),
                };
                // `#0` never appears in real files; keep the generator to what Lichess writes.
                if !matches!(e, Eval::Mate(0)) {
                    pending = Some(e);
                    movetext.push_str(&format!(
                        "{{ [%eval {text}] [%clk 0:02:{:02}] }} ",
                        ply % 60
                    ));
                }
            } else if r == 6 {
                movetext.push_str("{ [%clk 0:01:00] } ");
            } else if r == 7 {
                // A side line: the legal alternatives are played in the previous position.
                if let Some(alt) = before.legal_moves().first().copied() {
                    let alt_san = Sp::from_move(before.clone(), alt);
                    movetext.push_str(&format!("( {alt_san} {{ [%eval 9.99] }} ) "));
                }
            }
        }
        let result = ended.unwrap_or(["1-0", "0-1", "1/2-1/2", "*"][rng.below(4) as usize]);
        out.push_str(&format!("[Result \"{result}\"]\n\n{movetext}{result}\n\n"));
        truth.push(SyntheticGame {
            ingestible: !variant && illegal_at.is_none_or(|p| p >= rows.len()),
            rows,
        });
    }
    (out, truth)
}
