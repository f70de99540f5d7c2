//! Encoding `positions` rows into Parquet parts (zstd, one file = one object).

use crate::JobError;
use arrow_array::{
    ArrayRef, BooleanArray, Int8Array, Int16Array, RecordBatch, StringArray, UInt16Array,
    UInt64Array,
};
use arrow_buffer::OffsetBuffer;
use lakefish_schemas::games;
use lakefish_schemas::positions::{self, COL_FEN, COL_MOVE, NO_SCORE};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::schema::types::ColumnPath;
use std::sync::{Arc, Mutex};

/// A block of `positions` rows, column by column: what every reader (binpack, PGN)
/// produces and [`batch_from_chunks`] turns into one record batch.
#[derive(Debug, Default, Clone)]
pub struct PositionColumns {
    pub fen_bytes: Vec<u8>,
    /// End offset of each FEN in `fen_bytes`.
    pub fen_ends: Vec<u32>,
    pub move_bytes: Vec<u8>,
    pub move_ends: Vec<u32>,
    /// `NO_SCORE` marks "no score" (stored as null).
    pub score: Vec<i16>,
    pub result: Vec<i8>,
    pub ply: Vec<u16>,
    pub game_id: Vec<u64>,
}

impl PositionColumns {
    pub fn rows(&self) -> usize {
        self.ply.len()
    }

    /// Appends one row (`None` score or result: stored as null).
    pub fn push_row(&mut self, row: &PositionRow) {
        self.fen_bytes.extend_from_slice(row.fen.as_bytes());
        self.fen_ends.push(self.fen_bytes.len() as u32);
        self.move_bytes.extend_from_slice(row.mv.as_bytes());
        self.move_ends.push(self.move_bytes.len() as u32);
        self.score
            .push(row.score.unwrap_or(lakefish_schemas::positions::NO_SCORE));
        self.result.push(row.result.unwrap_or(NO_RESULT));
        self.ply.push(row.ply);
        self.game_id.push(row.game_id);
    }

    pub fn fen(&self, i: usize) -> &str {
        let start = if i == 0 {
            0
        } else {
            self.fen_ends[i - 1] as usize
        };
        std::str::from_utf8(&self.fen_bytes[start..self.fen_ends[i] as usize]).unwrap()
    }

    pub fn uci(&self, i: usize) -> &str {
        let start = if i == 0 {
            0
        } else {
            self.move_ends[i - 1] as usize
        };
        std::str::from_utf8(&self.move_bytes[start..self.move_ends[i] as usize]).unwrap()
    }
}

/// Writer settings for `positions` parts. FENs are neither dictionary-encoded (no gain,
/// half the read speed) nor given min/max statistics (useless for strings like these).
pub fn writer_properties() -> WriterProperties {
    let fen = ColumnPath::from(COL_FEN);
    let mv = ColumnPath::from(COL_MOVE);
    WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::try_new(1).unwrap()))
        .set_max_row_group_row_count(Some(256 * 1024))
        .set_column_dictionary_enabled(fen.clone(), false)
        .set_column_statistics_enabled(fen, EnabledStatistics::None)
        .set_column_statistics_enabled(mv, EnabledStatistics::None)
        .set_created_by(format!("lakefish {}", env!("CARGO_PKG_VERSION")))
        .set_key_value_metadata(Some(
            positions::file_metadata()
                .into_iter()
                .map(|(k, v)| KeyValue::new(k, v))
                .collect(),
        ))
        .build()
}

/// Writer settings for shuffle chunks: a part's, plus the packed board's layout in the
/// metadata (`board_layout`, from `lakefish_engine::packed_board`) and no dictionary or
/// statistics for the board column (fixed binary that neither helps).
pub fn chunk_writer_properties(board_layout: &str) -> WriterProperties {
    let board = ColumnPath::from(positions::COL_BOARD);
    let mut meta: Vec<KeyValue> = positions::file_metadata()
        .into_iter()
        .map(|(k, v)| KeyValue::new(k, v))
        .collect();
    meta.push(KeyValue::new(
        positions::META_BOARD_LAYOUT.to_string(),
        board_layout.to_string(),
    ));
    writer_properties()
        .into_builder()
        .set_column_dictionary_enabled(board.clone(), false)
        .set_column_statistics_enabled(board, EnabledStatistics::None)
        .set_key_value_metadata(Some(meta))
        .build()
}

fn strings(
    chunks: &[PositionColumns],
    pick: impl Fn(&PositionColumns) -> (&[u8], &[u32]),
) -> StringArray {
    let total_bytes: usize = chunks.iter().map(|c| pick(c).0.len()).sum();
    let total_rows: usize = chunks.iter().map(|c| c.rows()).sum();
    let mut values = Vec::with_capacity(total_bytes);
    let mut offsets = Vec::with_capacity(total_rows + 1);
    offsets.push(0i32);
    for c in chunks {
        let (bytes, ends) = pick(c);
        let base = values.len() as i32;
        offsets.extend(ends.iter().map(|&e| base + e as i32));
        values.extend_from_slice(bytes);
    }
    StringArray::try_new(OffsetBuffer::new(offsets.into()), values.into(), None)
        .expect("the decoder writes ASCII")
}

fn flat<T: Copy>(chunks: &[PositionColumns], pick: impl Fn(&PositionColumns) -> &[T]) -> Vec<T> {
    let mut v = Vec::with_capacity(chunks.iter().map(|c| c.rows()).sum());
    for c in chunks {
        v.extend_from_slice(pick(c));
    }
    v
}

/// Builds one record batch from consecutive decoded chunks.
pub fn batch_from_chunks(chunks: &[PositionColumns]) -> RecordBatch {
    let score: Int16Array = flat(chunks, |c| &c.score)
        .into_iter()
        .map(|s| (s != NO_SCORE).then_some(s))
        .collect();
    let columns: Vec<ArrayRef> = vec![
        Arc::new(strings(chunks, |c| (&c.fen_bytes, &c.fen_ends))),
        Arc::new(score),
        Arc::new(strings(chunks, |c| (&c.move_bytes, &c.move_ends))),
        Arc::new(
            flat(chunks, |c| &c.result)
                .into_iter()
                .map(|r| (r != NO_RESULT).then_some(r))
                .collect::<Int8Array>(),
        ),
        Arc::new(UInt16Array::from(flat(chunks, |c| &c.ply))),
        Arc::new(UInt64Array::from(flat(chunks, |c| &c.game_id))),
    ];
    RecordBatch::try_new(positions::schema(), columns).expect("columns match the positions schema")
}

/// Marks an unknown game result in [`PositionColumns::result`] (stored as null).
pub const NO_RESULT: i8 = i8::MIN;

/// One row of the `games` table.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GameRecord {
    pub game_id: u64,
    /// Values of [`games::TAG_COLUMNS`], in order.
    pub tags: [Option<String>; games::TAG_COLUMNS.len()],
    /// The `FEN` tag of games that do not start from the initial position.
    pub start_fen: Option<String>,
    pub plies: u16,
    /// A Chess960 game (castling rights in X-FEN, castling moves as king takes rook).
    pub chess960: bool,
}

/// Encodes `games` rows as a complete Parquet file in memory.
pub fn encode_games(rows: &[GameRecord], key: &str) -> Result<Vec<u8>, JobError> {
    let mut columns: Vec<ArrayRef> = vec![Arc::new(UInt64Array::from_iter_values(
        rows.iter().map(|g| g.game_id),
    ))];
    for (i, (tag, _)) in games::TAG_COLUMNS.iter().enumerate() {
        let values = rows.iter().map(|g| g.tags[i].as_deref());
        if games::is_elo_column(tag) {
            let elo: UInt16Array = values.map(|v| v.and_then(|v| v.parse().ok())).collect();
            columns.push(Arc::new(elo));
        } else {
            columns.push(Arc::new(values.collect::<StringArray>()));
        }
    }
    columns.push(Arc::new(
        rows.iter()
            .map(|g| g.start_fen.as_deref())
            .collect::<StringArray>(),
    ));
    columns.push(Arc::new(UInt16Array::from_iter_values(
        rows.iter().map(|g| g.plies),
    )));
    columns.push(Arc::new(
        rows.iter()
            .map(|g| Some(g.chess960))
            .collect::<BooleanArray>(),
    ));
    let batch =
        RecordBatch::try_new(games::schema(), columns).expect("columns match the games schema");
    let err = |e: parquet::errors::ParquetError| JobError::Parquet {
        key: key.to_string(),
        reason: e.to_string(),
    };
    let props = WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::try_new(3).unwrap()))
        .set_created_by(format!("lakefish {}", env!("CARGO_PKG_VERSION")))
        .set_key_value_metadata(Some(vec![
            KeyValue::new("lakefish.table".into(), "games".to_string()),
            KeyValue::new(
                "lakefish.schema_version".into(),
                games::SCHEMA_VERSION.to_string(),
            ),
        ]))
        .build();
    let mut buf = Vec::new();
    let mut w = ArrowWriter::try_new(&mut buf, batch.schema(), Some(props)).map_err(err)?;
    w.write(&batch).map_err(err)?;
    w.close().map_err(err)?;
    Ok(buf)
}

/// Encodes a batch as a complete Parquet file in memory.
pub fn encode_parquet(batch: &RecordBatch, key: &str) -> Result<Vec<u8>, JobError> {
    encode_parquet_on(batch, key, 1)
}

/// [`encode_parquet`] with the column chunks of every row group encoded on up to `threads`
/// threads. The bytes are the same as with one thread: each chunk is encoded alone either
/// way and they are appended in order. Without this the last part of an ingest (and a
/// single-part dataset) was encoded on one core while the others had nothing left to do.
pub fn encode_parquet_on(
    batch: &RecordBatch,
    key: &str,
    threads: usize,
) -> Result<Vec<u8>, JobError> {
    encode_parquet_with(batch, key, threads, writer_properties())
}

/// [`encode_parquet_on`] with explicit writer settings (tests compare it with the plain writer).
pub fn encode_parquet_with(
    batch: &RecordBatch,
    key: &str,
    threads: usize,
    props: WriterProperties,
) -> Result<Vec<u8>, JobError> {
    use parquet::arrow::arrow_writer::{ArrowColumnChunk, compute_leaves};
    let err = |e: parquet::errors::ParquetError| JobError::Parquet {
        key: key.to_string(),
        reason: e.to_string(),
    };
    let group_rows = props.max_row_group_row_count().unwrap_or(usize::MAX).max(1);
    let mut buf = Vec::with_capacity(batch.num_rows() * 16);
    let writer = ArrowWriter::try_new(&mut buf, batch.schema(), Some(props)).map_err(err)?;
    let (mut file, factory) = writer.into_serialized_writer().map_err(err)?;
    let schema = batch.schema();
    let columns = batch.num_columns();
    let groups = batch.num_rows().div_ceil(group_rows);
    // One task per (row group, column), in file order, each with its writer.
    let mut writers = Vec::with_capacity(groups * columns);
    for group in 0..groups {
        let made = factory.create_column_writers(group).map_err(err)?;
        assert_eq!(made.len(), columns, "one leaf per flat column");
        writers.extend(made.into_iter().map(|w| Mutex::new(Some(w))));
    }
    let tasks = writers.len();
    let encode = |task: usize| -> parquet::errors::Result<ArrowColumnChunk> {
        let (group, column) = (task / columns, task % columns);
        let start = group * group_rows;
        let len = group_rows.min(batch.num_rows() - start);
        let array = batch.column(column).slice(start, len);
        let mut writer = writers[task]
            .lock()
            .unwrap()
            .take()
            .expect("each task runs once");
        for leaf in compute_leaves(schema.field(column), &array)? {
            writer.write(&leaf)?;
        }
        writer.close()
    };
    let next = std::sync::atomic::AtomicUsize::new(0);
    let done: Vec<Mutex<Option<parquet::errors::Result<ArrowColumnChunk>>>> =
        (0..tasks).map(|_| Mutex::new(None)).collect();
    let work = || {
        loop {
            let task = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            if task >= tasks {
                return;
            }
            *done[task].lock().unwrap() = Some(encode(task));
        }
    };
    let helpers = threads.clamp(1, tasks.max(1)) - 1;
    std::thread::scope(|s| {
        for _ in 0..helpers {
            s.spawn(work);
        }
        work();
    });
    let mut chunks = done
        .into_iter()
        .map(|slot| slot.into_inner().unwrap().expect("every task ran"));
    for _ in 0..groups {
        let mut group = file.next_row_group().map_err(err)?;
        for chunk in chunks.by_ref().take(columns) {
            chunk
                .map_err(err)?
                .append_to_row_group(&mut group)
                .map_err(err)?;
        }
        group.close().map_err(err)?;
    }
    file.close().map_err(err)?;
    Ok(buf)
}

/// One `positions` row, as read back from a part.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PositionRow {
    pub fen: String,
    pub score: Option<i16>,
    pub mv: String,
    pub result: Option<i8>,
    pub ply: u16,
    pub game_id: u64,
}

/// A whole Parquet file as one record batch (its row groups concatenated), in the file's
/// schema or in `schema` where given: how shuffle inputs and training chunks are read.
pub fn read_whole(
    bytes: bytes::Bytes,
    schema: Option<arrow_schema::SchemaRef>,
) -> Result<RecordBatch, String> {
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(bytes)
        .and_then(|b| b.build())
        .map_err(|e| e.to_string())?;
    let schema = schema.unwrap_or_else(|| arrow_array::RecordBatchReader::schema(&reader));
    let batches = reader
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    arrow_select::concat::concat_batches(&schema, &batches).map_err(|e| e.to_string())
}

/// The columns `want` of a shuffle chunk (every column when `want` is empty), as one record
/// batch. A chunk written before packed boards has no `board`: `fen` comes instead, so a
/// reader tells the two apart by which column it got. Training reads only what it uses,
/// which is why a chunk's FEN text is never decoded on the packed path.
pub fn read_chunk(bytes: bytes::Bytes, want: &[&str]) -> Result<RecordBatch, String> {
    use parquet::arrow::ProjectionMask;
    let builder = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(bytes)
        .map_err(|e| e.to_string())?;
    // Boards of another layout (a newer lakefish's) must not be read as this one's.
    if builder
        .schema()
        .fields()
        .iter()
        .any(|f| f.name() == positions::COL_BOARD)
    {
        let layout = builder
            .metadata()
            .file_metadata()
            .key_value_metadata()
            .and_then(|kv| kv.iter().find(|kv| kv.key == positions::META_BOARD_LAYOUT))
            .and_then(|kv| kv.value.clone());
        if layout.as_deref() != Some(positions::BOARD_LAYOUT) {
            return Err(format!(
                "board layout {layout:?}, not {} (written by another lakefish version?)",
                positions::BOARD_LAYOUT
            ));
        }
    }
    let builder = if want.is_empty() {
        builder
    } else {
        let fields = builder.schema().fields().clone();
        let has = |name: &str| fields.iter().any(|f| f.name() == name);
        let mut names: Vec<&str> = want.to_vec();
        if names.contains(&positions::COL_BOARD) && !has(positions::COL_BOARD) {
            names.push(COL_FEN);
        }
        let mut roots = Vec::with_capacity(names.len());
        for (i, f) in fields.iter().enumerate() {
            if names.contains(&f.name().as_str()) {
                roots.push(i);
            }
        }
        let mask = ProjectionMask::roots(builder.parquet_schema(), roots);
        builder.with_projection(mask)
    };
    let reader = builder.build().map_err(|e| e.to_string())?;
    let schema = arrow_array::RecordBatchReader::schema(&reader);
    let batches = reader
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    arrow_select::concat::concat_batches(&schema, &batches).map_err(|e| e.to_string())
}

/// The columns of a `positions` record batch (a part or a shuffled chunk), found by name and
/// typed once: every reader of the table goes through this, so a column missing or of
/// another type is one error, worded once.
pub struct PositionsView<'a> {
    pub fen: &'a StringArray,
    pub score: &'a Int16Array,
    pub mv: &'a StringArray,
    pub result: &'a Int8Array,
    pub ply: &'a UInt16Array,
    pub game_id: &'a UInt64Array,
}

impl<'a> PositionsView<'a> {
    pub fn of(batch: &'a RecordBatch) -> Result<PositionsView<'a>, String> {
        fn col<'a, T: 'static>(b: &'a RecordBatch, name: &str) -> Result<&'a T, String> {
            b.column_by_name(name)
                .and_then(|c| c.as_any().downcast_ref::<T>())
                .ok_or_else(|| format!("column {name} missing or of the wrong type"))
        }
        Ok(PositionsView {
            fen: col(batch, COL_FEN)?,
            score: col(batch, positions::COL_SCORE)?,
            mv: col(batch, COL_MOVE)?,
            result: col(batch, positions::COL_RESULT)?,
            ply: col(batch, positions::COL_PLY)?,
            game_id: col(batch, positions::COL_GAME_ID)?,
        })
    }
}

/// Reads every row of one `positions` part (a whole Parquet file), checking its columns.
pub fn read_positions(bytes: bytes::Bytes, key: &str) -> Result<Vec<PositionRow>, JobError> {
    use arrow_array::Array;
    let corrupt = |reason: String| JobError::Corrupt {
        what: "positions part",
        key: key.to_string(),
        reason,
    };
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(bytes)
        .and_then(|b| b.build())
        .map_err(|e| corrupt(e.to_string()))?;
    let mut rows = Vec::new();
    for batch in reader {
        let b = batch.map_err(|e| corrupt(e.to_string()))?;
        let PositionsView {
            fen,
            score,
            mv,
            result,
            ply,
            game_id: game,
        } = PositionsView::of(&b).map_err(corrupt)?;
        rows.extend((0..b.num_rows()).map(|i| PositionRow {
            fen: fen.value(i).to_string(),
            score: score.is_valid(i).then(|| score.value(i)),
            mv: mv.value(i).to_string(),
            result: result.is_valid(i).then(|| result.value(i)),
            ply: ply.value(i),
            game_id: game.value(i),
        }));
    }
    Ok(rows)
}
