//! Data out (issue 45): a committed dataset, optionally through one of its masks, or a
//! committed shuffle (its chunks in order: the rows already shuffled, as trainers want
//! them), written in the formats other tools read. Per format, what survives:
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
use lakefish_schemas::export::RowsOf;

use crate::{JobContext, JobError};

pub use lakefish_schemas::export::ExportFormat;

/// What an export read and wrote.
pub type ExportSummary = lakefish_schemas::export::ExportCounts;

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
/// [`export_rows`] of a dataset (the rows `mask` keeps, when given).
pub fn export_dataset(
    ctx: &JobContext,
    source: lakefish_schemas::Source,
    dataset: &lakefish_schemas::DatasetName,
    mask: Option<&lakefish_schemas::MaskName>,
    format: ExportFormat,
    out: &mut dyn Write,
    on_part: impl FnMut(u64, u64),
) -> Result<ExportSummary, JobError> {
    let of = RowsOf::Dataset {
        source,
        dataset: dataset.clone(),
        mask: mask.cloned(),
    };
    export_rows(ctx, &of, format, out, on_part)
}

/// Writes every row `of` names to `out` in `format`, unit after unit (a dataset's parts, a
/// shuffle's chunks) in the manifest's order. `on_part` sees the rows read so far.
pub fn export_rows(
    ctx: &JobContext,
    of: &RowsOf,
    format: ExportFormat,
    out: &mut dyn Write,
    on_part: impl FnMut(u64, u64),
) -> Result<ExportSummary, JobError> {
    let c = crate::rows::committed(ctx, of)?;
    write_parts(ctx, of, format, &c.units, c.rows, out, on_part)
}

/// Writes `parts` of what `of` names to `out`, in order; `on_part(rows read, total)`.
fn write_parts(
    ctx: &JobContext,
    of: &RowsOf,
    format: ExportFormat,
    parts: &[lakefish_schemas::PartInfo],
    total_rows: u64,
    out: &mut dyn Write,
    mut on_part: impl FnMut(u64, u64),
) -> Result<ExportSummary, JobError> {
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
    for part in parts {
        let crate::rows::UnitRows { key, rows, keep } = crate::rows::read_unit(ctx, of, part)?;
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
        on_part(sum.rows_read, total_rows);
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

// ---- Exports as jobs: `exports/<id>/` in the lake, one file per dataset part. ----

use lakefish_schemas::export::{ExportCounts, ExportManifest, ExportPlan, ExportSpec, ExportTask};

fn export_prefix(id: &str) -> String {
    format!("exports/{id}")
}

fn part_file(id: &str, index: usize, format: ExportFormat) -> String {
    format!(
        "{}/part-{index:05}.{}",
        export_prefix(id),
        format.extension()
    )
}

fn done_key(id: &str, index: usize) -> String {
    format!("{}/_done/part-{index:05}.json", export_prefix(id))
}

/// The export's id: the spec and the dataset commit it reads, hashed.
pub fn export_id(spec: &ExportSpec, dataset_job_id: &str) -> String {
    let text = format!(
        "{}\n{dataset_job_id}",
        serde_json::to_string(spec).expect("specs serialize")
    );
    format!("out-{}", &crate::nets::sha256_hex(text.as_bytes())[..12])
}

pub async fn read_export(lake: &crate::Lake, id: &str) -> Result<Option<ExportManifest>, JobError> {
    lake.get_json(
        &format!("{}/_manifest.json", export_prefix(id)),
        "export manifest",
    )
    .await
}

pub async fn read_export_plan(
    lake: &crate::Lake,
    id: &str,
) -> Result<Option<ExportPlan>, JobError> {
    lake.get_json(&format!("{}/_plan.json", export_prefix(id)), "export plan")
        .await
}

/// What an export spec reads, or an input error.
fn spec_rows(spec: &ExportSpec) -> Result<RowsOf, JobError> {
    spec.rows().map_err(|reason| JobError::Input {
        input: "export".into(),
        reason,
    })
}

/// Plans an export (idempotent: the same spec on the same commit is the same plan).
pub fn plan_export(ctx: &JobContext, spec: &ExportSpec) -> Result<ExportPlan, JobError> {
    let c = crate::rows::committed(ctx, &spec_rows(spec)?)?;
    let id = export_id(spec, &c.commit);
    if let Some(p) = ctx.block_on(read_export_plan(&ctx.lake, &id))? {
        return Ok(p);
    }
    let plan = ExportPlan {
        id: id.clone(),
        spec: spec.clone(),
        dataset_job_id: c.commit,
        parts: c.units.iter().map(|p| p.name.clone()).collect(),
        created: lakefish_lake::records::now(),
    };
    ctx.block_on(ctx.lake.put(
        &format!("{}/_plan.json", export_prefix(&id)),
        serde_json::to_vec_pretty(&plan)?,
    ))?;
    Ok(plan)
}

/// Writes part `index` of a planned export, then, when every part is written, the manifest.
/// Safe to run twice: the same bytes again.
pub fn export_part(
    ctx: &JobContext,
    plan: &ExportPlan,
    index: usize,
) -> Result<ExportCounts, JobError> {
    let spec = &plan.spec;
    let of = spec_rows(spec)?;
    let c = crate::rows::committed(ctx, &of)?;
    if c.commit != plan.dataset_job_id {
        return Err(JobError::Failed(format!(
            "{of} was committed again since export {} was planned: export it anew",
            plan.id
        )));
    }
    let part = c
        .units
        .iter()
        .find(|p| Some(&p.name) == plan.parts.get(index))
        .ok_or_else(|| JobError::Input {
            input: format!("export {} part {index}", plan.id),
            reason: format!("the plan has {} parts", plan.parts.len()),
        })?;
    let mut bytes = Vec::new();
    let counts = write_parts(
        ctx,
        &of,
        spec.format,
        std::slice::from_ref(part),
        part.rows,
        &mut bytes,
        |_, _| {},
    )?;
    ctx.block_on(
        ctx.lake
            .put(&part_file(&plan.id, index, spec.format), bytes),
    )?;
    ctx.block_on(
        ctx.lake
            .put(&done_key(&plan.id, index), serde_json::to_vec(&counts)?),
    )?;
    commit_if_whole(ctx, plan)?;
    Ok(counts)
}

/// Writes the manifest once every part is done (whoever finishes last; twice is harmless).
fn commit_if_whole(
    ctx: &JobContext,
    plan: &ExportPlan,
) -> Result<Option<ExportManifest>, JobError> {
    if let Some(m) = ctx.block_on(read_export(&ctx.lake, &plan.id))? {
        return Ok(Some(m));
    }
    let mut counts = ExportCounts::default();
    for i in 0..plan.parts.len() {
        let Some(c) = ctx.block_on(
            ctx.lake
                .get_json::<ExportCounts>(&done_key(&plan.id, i), "export part"),
        )?
        else {
            return Ok(None);
        };
        counts.rows_read += c.rows_read;
        counts.masked_out += c.masked_out;
        counts.no_score += c.no_score;
        counts.no_result += c.no_result;
        counts.no_move += c.no_move;
        counts.rows_written += c.rows_written;
        counts.bytes += c.bytes;
    }
    let m = ExportManifest {
        id: plan.id.clone(),
        spec: plan.spec.clone(),
        dataset_job_id: plan.dataset_job_id.clone(),
        files: (0..plan.parts.len())
            .map(|i| part_file(&plan.id, i, plan.spec.format))
            .collect(),
        counts,
        created: lakefish_lake::records::now(),
    };
    ctx.block_on(ctx.lake.put(
        &format!("{}/_manifest.json", export_prefix(&plan.id)),
        serde_json::to_vec_pretty(&m)?,
    ))?;
    Ok(Some(m))
}

impl crate::Job for ExportSpec {
    fn run(
        &self,
        _: lakefish_schemas::JobKind,
        ctx: &JobContext,
        _: &lakefish_schemas::JobId,
    ) -> Result<serde_json::Value, JobError> {
        let plan = plan_export(ctx, self)?;
        if let Some(m) = ctx.block_on(read_export(&ctx.lake, &plan.id))? {
            return Ok(serde_json::to_value(m)?);
        }
        if ctx.is_queued() {
            // One task per part, on whichever workers take them; the last commits.
            let submit = ctx.submitter("an export's parts")?;
            for index in 0..plan.parts.len() as u32 {
                let task = ExportTask {
                    export: plan.id.clone(),
                    index,
                };
                submit.submit(
                    lakefish_schemas::JobId::derived(&format!("{}/part/{index}", plan.id)),
                    lakefish_schemas::JobSpec::ExportPart(task),
                )?;
            }
            return Ok(serde_json::json!({"export": plan.id, "parts": plan.parts.len()}));
        }
        for index in 0..plan.parts.len() {
            ctx.check_cancelled()?;
            ctx.progress.report(&lakefish_schemas::Progress {
                stage: format!("export {}", plan.id),
                done: index as u64,
                total: Some(plan.parts.len() as u64),
                unit: "parts".into(),
                rows: 0,
            });
            export_part(ctx, &plan, index)?;
        }
        let m = ctx
            .block_on(read_export(&ctx.lake, &plan.id))?
            .ok_or_else(|| JobError::Internal("every part written, no manifest".into()))?;
        Ok(serde_json::to_value(m)?)
    }
}

impl crate::Job for ExportTask {
    fn run(
        &self,
        _: lakefish_schemas::JobKind,
        ctx: &JobContext,
        _: &lakefish_schemas::JobId,
    ) -> Result<serde_json::Value, JobError> {
        let plan = ctx
            .block_on(read_export_plan(&ctx.lake, &self.export))?
            .ok_or_else(|| JobError::Input {
                input: export_prefix(&self.export),
                reason: "no such export (no plan)".into(),
            })?;
        let counts = export_part(ctx, &plan, self.index as usize)?;
        Ok(serde_json::json!({"export": plan.id, "part": self.index, "counts": counts}))
    }
}
