//! Data out (issue 45): a committed dataset, optionally through one of its masks, written in
//! the formats other tools read. Per format, what survives:
//!
//! - `plain` (Stockfish's tools and nnue-pytorch: `fen`, `move`, `score`, `ply`, `result`, `e`
//!   lines): every column. Scores stay in Stockfish's internal units and, like the result
//!   (−1, 0, 1), relative to the side to move, as the lake stores them.
//! - `binpack` (Stockfish's `.binpack`, what nnue-pytorch and Stockfish's tools read; written
//!   by sfbinpack's writer, which chains consecutive positions of a game into movetext):
//!   every column but the game id, which binpacks do not store (a reader numbers the chains).
//!   Castling is written as king-takes-rook, as Stockfish writes it. Rows without a move
//!   (bullet's data, PGN null moves) are skipped and counted.
//! - `bullet-text` (bullet's `<FEN> | <score> | <result>`): the position, the score in UCI
//!   centipawns (Stockfish's material-dependent `to_cp`) and the result as 1.0 / 0.5 / 0.0,
//!   both from White's point of view; the move, ply and game are dropped. Mate and tablebase
//!   scores (beyond Stockfish's largest evaluation), which centipawns cannot hold, are
//!   written as ±32000.
//! - `bulletformat` (bullet's 32-byte `ChessBoard` records, bulletformat 1.8, loaded by its
//!   `DirectSequentialDataLoader`): the men, the score (the same centipawns as bullet-text)
//!   and the result, all from the side to move's point of view, the board flipped when Black
//!   is to move. Dropped besides the move, ply and game: which side is to move, castling
//!   rights, the en-passant square and the fifty-move counter.
//!
//! A row without a score or a result has nothing to train on in any of them: it is skipped
//! and counted.

use std::io::Write;

use lakefish_engine::scores::{MAX_EVAL, internal_to_centipawns};
use lakefish_schemas::{DatasetName, MaskName, Source};

use crate::{JobContext, JobError};

/// The formats a dataset can be written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ExportFormat {
    Plain,
    Binpack,
    BulletText,
    Bulletformat,
}

impl ExportFormat {
    pub fn parse(name: &str) -> Result<ExportFormat, String> {
        match name {
            "plain" => Ok(ExportFormat::Plain),
            "binpack" => Ok(ExportFormat::Binpack),
            "bullet-text" => Ok(ExportFormat::BulletText),
            "bulletformat" => Ok(ExportFormat::Bulletformat),
            other => Err(format!(
                "format {other:?}: plain or binpack (Stockfish's tools, nnue-pytorch), bullet-text or bulletformat (bullet)"
            )),
        }
    }
}

/// What an export read and wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct ExportSummary {
    pub rows_read: u64,
    /// Rows the mask dropped.
    pub masked_out: u64,
    pub no_score: u64,
    pub no_result: u64,
    /// binpack: rows without a move (bullet's data, null moves), which a binpack cannot hold.
    pub no_move: u64,
    pub rows_written: u64,
    pub bytes: u64,
}

/// The score written for bullet, from the side to move's point of view: centipawns, mates
/// at ±32000.
fn bullet_score(score: i16, material: i32) -> i16 {
    if i32::from(score).abs() > MAX_EVAL {
        32000 * score.signum()
    } else {
        internal_to_centipawns(i32::from(score), material)
            .round()
            .clamp(-32000.0, 32000.0) as i16
    }
}

/// One position as bulletformat's 32-byte `ChessBoard`, from the side to move's point of
/// view: occupancy (bit = square, a1 = 0, the board flipped rank for rank when Black is to
/// move), a nibble per man in square order (bit 3 the colour, 0 = the side to move; then
/// pawn 0 … king 5), the score (i16), the result (0 loss, 1 draw, 2 win), the side to
/// move's king square and the other king's square seen from the other side, 3 spare bytes.
/// Little-endian throughout, as bullet transmutes it.
fn bulletformat_record(board: &shakmaty::Board, white: bool, score: i16, result: i8) -> [u8; 32] {
    use shakmaty::{Color, Role};
    let flip = |sq: u32| if white { sq } else { sq ^ 56 };
    let mut men: Vec<(u32, u8)> = board
        .iter()
        .map(|(sq, piece)| {
            let ours = (piece.color == Color::White) == white;
            let kind = match piece.role {
                Role::Pawn => 0,
                Role::Knight => 1,
                Role::Bishop => 2,
                Role::Rook => 3,
                Role::Queen => 4,
                Role::King => 5,
            };
            (flip(sq as u32), (u8::from(!ours) << 3) | kind)
        })
        .collect();
    men.sort_unstable();
    let mut rec = [0u8; 32];
    let mut occ = 0u64;
    for (i, &(sq, nibble)) in men.iter().enumerate().take(32) {
        occ |= 1 << sq;
        rec[8 + i / 2] |= nibble << (4 * (i & 1));
        if nibble == 5 {
            rec[27] = sq as u8;
        } else if nibble == 13 {
            rec[28] = (sq ^ 56) as u8;
        }
    }
    rec[..8].copy_from_slice(&occ.to_le_bytes());
    rec[24..26].copy_from_slice(&score.to_le_bytes());
    rec[26] = (result + 1) as u8;
    rec
}

/// A row's position and move as a binpack entry (castling as king-takes-rook), or why not.
fn binpack_entry(
    row: &lakefish_lake::parts::PositionRow,
    score: i16,
    result: i8,
) -> Result<sfbinpack::TrainingDataEntry, String> {
    use shakmaty::{CastlingMode, Chess, fen::Fen, uci::UciMove};
    let pos: Chess = row
        .fen
        .parse::<Fen>()
        .map_err(|e| format!("fen {:?}: {e}", row.fen))?
        .into_position(CastlingMode::Chess960)
        .map_err(|e| format!("fen {:?}: {e}", row.fen))?;
    let mv = row
        .mv
        .parse::<UciMove>()
        .ok()
        .and_then(|m| m.to_move(&pos).ok())
        .ok_or_else(|| format!("move {:?} is not legal in {}", row.mv, row.fen))?;
    Ok(crate::datagen::binpack_entry(
        &pos, mv, score, row.ply, result,
    ))
}

/// Where rows go: bytes written as they come (the text formats, bulletformat), or
/// sfbinpack's writer, which holds a chain until it ends.
enum Sink<'a> {
    Bytes(Tap<'a>),
    Binpack(Box<sfbinpack::CompressedTrainingDataEntryWriter<Tap<'a>>>),
}

impl<'a> Sink<'a> {
    fn bytes(&mut self) -> &mut Tap<'a> {
        match self {
            Sink::Bytes(t) => t,
            Sink::Binpack(_) => unreachable!("binpack rows go through its writer"),
        }
    }
}

/// A `Write` that counts what passes and keeps the first error: sfbinpack's writer drops
/// the errors of its last flush, so the export reads them from here.
struct Tap<'a> {
    out: &'a mut dyn Write,
    bytes: u64,
    error: Option<std::io::Error>,
}

impl Write for Tap<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self.out.write(buf) {
            Ok(n) => {
                self.bytes += n as u64;
                Ok(n)
            }
            Err(e) => {
                let copy = std::io::Error::new(e.kind(), e.to_string());
                self.error.get_or_insert(e);
                Err(copy)
            }
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

/// A committed dataset's manifest, or an error naming it.
pub(crate) fn committed_manifest(
    ctx: &JobContext,
    source: Source,
    dataset: &DatasetName,
) -> Result<lakefish_schemas::DatasetManifest, JobError> {
    ctx.block_on(lakefish_lake::datasets::read_manifest(
        &ctx.lake, source, dataset,
    ))?
    .ok_or_else(|| JobError::Input {
        input: format!("{source}/{dataset}"),
        reason: "no such dataset (no committed manifest)".into(),
    })
}

/// One part's rows with its key (errors name it), after a cancellation check.
pub(crate) fn part_rows(
    ctx: &JobContext,
    source: Source,
    dataset: &DatasetName,
    part: &lakefish_schemas::PartInfo,
) -> Result<(String, Vec<lakefish_lake::parts::PositionRow>), JobError> {
    ctx.check_cancelled()?;
    let key = format!(
        "{}/{}",
        lakefish_schemas::positions::dataset_prefix(source, dataset),
        part.name
    );
    let bytes = ctx
        .block_on(ctx.lake.get(&key))?
        .ok_or_else(|| JobError::Corrupt {
            what: "positions part",
            key: key.clone(),
            reason: "missing (the manifest names it)".into(),
        })?;
    let rows = lakefish_lake::parts::read_positions(bytes, &key)?;
    Ok((key, rows))
}

/// Writes every row of `dataset` (those `mask` keeps, when given) to `out` in `format`, part
/// after part in the manifest's order. `on_part` sees the rows read so far.
pub fn export_dataset(
    ctx: &JobContext,
    source: Source,
    dataset: &DatasetName,
    mask: Option<&MaskName>,
    format: ExportFormat,
    out: &mut dyn Write,
    mut on_part: impl FnMut(u64, u64),
) -> Result<ExportSummary, JobError> {
    let manifest = committed_manifest(ctx, source, dataset)?;
    if let Some(m) = mask
        && ctx
            .block_on(crate::masks::read_mask_manifest(
                &ctx.lake, m, source, dataset,
            ))?
            .is_none()
    {
        return Err(JobError::Input {
            input: format!("mask {m}"),
            reason: format!(
                "no committed mask {m} for dataset {dataset} (lakefish mask {m} --dataset {dataset})"
            ),
        });
    }
    let mut sum = ExportSummary::default();
    let write_err = |e: std::io::Error| JobError::Failed(format!("writing the export: {e}"));
    let tap = Tap {
        out,
        bytes: 0,
        error: None,
    };
    let mut sink = match format {
        ExportFormat::Binpack => Sink::Binpack(Box::new(
            sfbinpack::CompressedTrainingDataEntryWriter::new(tap)
                .map_err(|e| JobError::Failed(format!("writing the export: {e}")))?,
        )),
        _ => Sink::Bytes(tap),
    };
    let mut line = String::with_capacity(128);
    for part in &manifest.parts {
        let (key, rows) = part_rows(ctx, source, dataset, part)?;
        let keep = match mask {
            Some(m) => {
                Some(ctx.block_on(crate::masks::read_mask(&ctx.lake, m, source, dataset, part))?)
            }
            None => None,
        };
        if let Some(k) = &keep
            && k.len() != rows.len()
        {
            return Err(JobError::Corrupt {
                what: "positions part",
                key,
                reason: format!(
                    "holds {} rows, its mask {} (the manifest says {})",
                    rows.len(),
                    k.len(),
                    part.rows
                ),
            });
        }
        let corrupt = |i: usize, reason: String| JobError::Corrupt {
            what: "positions part",
            key: key.clone(),
            reason: format!("row {i}: {reason}"),
        };
        for (i, row) in rows.iter().enumerate() {
            sum.rows_read += 1;
            if keep.as_ref().is_some_and(|k| !k[i]) {
                sum.masked_out += 1;
                continue;
            }
            let Some(score) = row.score else {
                sum.no_score += 1;
                continue;
            };
            let Some(result) = row.result else {
                sum.no_result += 1;
                continue;
            };
            line.clear();
            let white = row.fen.split_whitespace().nth(1) == Some("w");
            let board = || -> Result<shakmaty::Board, JobError> {
                Ok(row
                    .fen
                    .parse::<shakmaty::fen::Fen>()
                    .map_err(|e| corrupt(i, format!("fen {:?}: {e}", row.fen)))?
                    .into_setup()
                    .board)
            };
            match format {
                ExportFormat::Plain => {
                    use std::fmt::Write as _;
                    let _ = write!(
                        line,
                        "fen {}\nmove {}\nscore {score}\nply {}\nresult {result}\ne\n",
                        row.fen, row.mv, row.ply
                    );
                }
                ExportFormat::BulletText => {
                    use std::fmt::Write as _;
                    let board = board()?;
                    let material = lakefish_engine::scores::material(&board);
                    let stm_result = f64::from(result + 1) / 2.0;
                    let white_result = if white { stm_result } else { 1.0 - stm_result };
                    let cp = bullet_score(score, material);
                    let _ = writeln!(
                        line,
                        "{} | {} | {white_result:.1}",
                        row.fen,
                        if white { cp } else { -cp }
                    );
                }
                ExportFormat::Bulletformat => {
                    let board = board()?;
                    let cp = bullet_score(score, lakefish_engine::scores::material(&board));
                    sink.bytes()
                        .write_all(&bulletformat_record(&board, white, cp, result))
                        .map_err(write_err)?;
                }
                ExportFormat::Binpack => {
                    if row.mv.is_empty() || row.mv == "0000" {
                        sum.no_move += 1;
                        continue;
                    }
                    let entry = binpack_entry(row, score, result).map_err(|e| corrupt(i, e))?;
                    let Sink::Binpack(w) = &mut sink else {
                        unreachable!("a binpack writer for binpack")
                    };
                    w.write_entry(&entry)
                        .map_err(|e| JobError::Failed(format!("writing the export: {e}")))?;
                }
            }
            if !line.is_empty() {
                sink.bytes().write_all(line.as_bytes()).map_err(write_err)?;
            }
            sum.rows_written += 1;
        }
        on_part(sum.rows_read, manifest.rows);
    }
    let mut tap = match sink {
        Sink::Bytes(tap) => tap,
        Sink::Binpack(mut w) => {
            w.flush_and_end();
            w.into_inner().map_err(write_err)?
        }
    };
    if let Some(e) = tap.error.take() {
        return Err(write_err(e));
    }
    tap.flush().map_err(write_err)?;
    sum.bytes = tap.bytes;
    Ok(sum)
}
