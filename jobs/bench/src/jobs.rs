//! `lakefish bench ingest-binpack`: the full ingest against a bare `sfbinpack` decode loop
//! over the same file, measured in the same run.

use lakefish_ingest::ingest_binpack::ingest_binpack;
use lakefish_jobs::{JobContext, JobError, Lake};
use lakefish_schemas::{DatasetName, IngestBinpackSpec, JobId};
use serde::Serialize;
use std::collections::HashMap;
use std::time::Instant;

/// CPU time this process has used so far, every thread (finished ones too), in seconds.
/// "Per core" figures divide by this rather than by the thread count: a one-thread ingest
/// also keeps an encoder and the reader busy, and two threads on two cores never use both
/// fully.
fn cpu_seconds() -> f64 {
    cpu_seconds_of(libc::RUSAGE_SELF)
}

/// [`cpu_seconds`] of `who`: `RUSAGE_SELF`, or `RUSAGE_CHILDREN` (the children waited for).
pub(crate) fn cpu_seconds_of(who: libc::c_int) -> f64 {
    // SAFETY: getrusage only writes the struct it is given.
    let usage = unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        libc::getrusage(who, &mut u);
        u
    };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    secs(usage.ru_utime) + secs(usage.ru_stime)
}

/// The best of several timed runs: least wall time, and least CPU time with the wall time of
/// that same run (for "cores busy").
struct BestRun {
    wall: f64,
    cpu: f64,
    cpu_run_wall: f64,
}

impl BestRun {
    fn new() -> Self {
        BestRun {
            wall: f64::MAX,
            cpu: f64::MAX,
            cpu_run_wall: 0.0,
        }
    }

    /// Runs `f`, keeping its times if they are the best so far.
    fn time<T>(&mut self, f: impl FnOnce() -> T) -> T {
        let (start, cpu) = (Instant::now(), cpu_seconds());
        let out = f();
        let (wall, cpu) = (start.elapsed().as_secs_f64(), cpu_seconds() - cpu);
        self.wall = self.wall.min(wall);
        if cpu < self.cpu {
            (self.cpu, self.cpu_run_wall) = (cpu, wall);
        }
        out
    }

    fn cores_busy(&self) -> f64 {
        self.cpu / self.cpu_run_wall
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct IngestBench {
    pub file: String,
    pub positions: u64,
    pub threads: usize,
    /// Bare `CompressedTrainingDataEntryReader` loop, one core, best of the runs.
    pub decode_positions_per_s: f64,
    /// Full ingest (decode, FEN/UCI text, checks, Parquet zstd encode, write), best of the runs.
    pub ingest_positions_per_s: f64,
    /// Positions per CPU-second of the ingest (all its threads), best of the runs.
    pub ingest_positions_per_s_per_core: f64,
    /// CPU-seconds per wall-second during the ingest run with the least CPU time.
    pub cores_busy: f64,
    /// ingest per CPU-second / bare decode (target: at least 0.5).
    pub ratio_per_core: f64,
    /// Phases on one core: chunk decode to text columns (with the rules checks), and Parquet
    /// encoding of those columns.
    pub decode_to_columns_ns_per_position: f64,
    pub parquet_encode_ns_per_position: f64,
    pub binpack_bytes_per_position: f64,
    pub parquet_bytes_per_position: f64,
}

fn bare_decode(bytes: &[u8]) -> Result<(u64, f64), JobError> {
    let start = Instant::now();
    let mut reader = sfbinpack::CompressedTrainingDataEntryReader::from_slice(bytes)
        .map_err(|e| JobError::Internal(format!("sfbinpack reader: {e}")))?;
    let mut n = 0u64;
    let mut checksum = 0i64;
    while reader.has_next() {
        let e = reader.next();
        checksum = checksum.wrapping_add(e.score as i64 + e.ply as i64);
        n += 1;
    }
    std::hint::black_box(checksum);
    Ok((n, start.elapsed().as_secs_f64()))
}

/// Times the two halves of the ingest separately, on the calling thread.
fn phases(bytes: &[u8]) -> (f64, f64, u64) {
    let mut chunks = Vec::new();
    let mut offset = 0usize;
    let start = Instant::now();
    while offset + 8 <= bytes.len() {
        let size = u32::from_le_bytes(bytes[offset + 4..offset + 8].try_into().unwrap()) as usize;
        if offset + 8 + size > bytes.len() {
            break;
        }
        if let Ok(c) = lakefish_ingest::binpack::decode_chunk(
            &bytes[offset + 8..offset + 8 + size],
            1,
            offset as u64,
        ) {
            chunks.push(c);
        }
        offset += 8 + size;
    }
    let decode = start.elapsed().as_secs_f64();
    let rows: u64 = chunks.iter().map(|c| c.rows() as u64).sum();
    let start = Instant::now();
    let batch = lakefish_lake::parts::batch_from_chunks(&chunks);
    let encoded = lakefish_lake::parts::encode_parquet(&batch, "bench")
        .map(|b| b.len())
        .unwrap_or(0);
    std::hint::black_box(encoded);
    (decode, start.elapsed().as_secs_f64(), rows)
}

/// Runs both measurements `runs` times and keeps the best of each.
pub fn bench_ingest_binpack(
    rt: &tokio::runtime::Handle,
    file: &str,
    threads: usize,
    runs: usize,
) -> Result<IngestBench, JobError> {
    let bytes = std::fs::read(file).map_err(|e| JobError::Input {
        input: file.to_string(),
        reason: e.to_string(),
    })?;
    let mut decode_best = f64::MAX;
    let mut ingest = BestRun::new();
    let mut positions = 0;
    let mut parquet_bytes = 0;
    let (mut decode_phase, mut encode_phase) = (f64::MAX, f64::MAX);
    for run in 0..runs.max(1) {
        let (n, secs) = bare_decode(&bytes)?;
        decode_best = decode_best.min(secs);
        positions = n;
        let (d, e, _) = phases(&bytes);
        decode_phase = decode_phase.min(d);
        encode_phase = encode_phase.min(e);

        let dir = std::env::temp_dir().join(format!("lakefish-bench-{}-{run}", std::process::id()));
        let lake = Lake::open(dir.to_str().unwrap(), &HashMap::new())?;
        let ctx = JobContext::new(lake, rt.clone()).with_threads(threads);
        let spec = IngestBinpackSpec {
            max_game_bytes: None,
            inputs: vec![file.to_string()],
            dataset: DatasetName::new("bench").expect("valid name"),
            rows_per_part: lakefish_schemas::job::default_rows_per_part(),
        };
        let summary = ingest.time(|| ingest_binpack(&ctx, &JobId::new(), &spec));
        let _ = std::fs::remove_dir_all(&dir);
        let summary = summary?;
        parquet_bytes = summary.bytes;
        if summary.rows != n {
            return Err(JobError::Internal(format!(
                "ingest wrote {} rows, the bare reader saw {n}",
                summary.rows
            )));
        }
    }
    let decode_rate = positions as f64 / decode_best;
    let ingest_rate = positions as f64 / ingest.wall;
    let per_core = positions as f64 / ingest.cpu;
    Ok(IngestBench {
        file: file.to_string(),
        positions,
        threads,
        decode_positions_per_s: decode_rate,
        ingest_positions_per_s: ingest_rate,
        ingest_positions_per_s_per_core: per_core,
        cores_busy: ingest.cores_busy(),
        ratio_per_core: per_core / decode_rate,
        decode_to_columns_ns_per_position: decode_phase * 1e9 / positions as f64,
        parquet_encode_ns_per_position: encode_phase * 1e9 / positions as f64,
        binpack_bytes_per_position: bytes.len() as f64 / positions as f64,
        parquet_bytes_per_position: parquet_bytes as f64 / positions as f64,
    })
}

#[derive(Debug, Clone, Serialize)]
pub struct MaskBench {
    pub file: String,
    pub rows: u64,
    pub threads: usize,
    /// Reading every part's rows back (Parquet decode to Rust strings), all threads.
    pub read_rows_per_s: f64,
    /// The quiet mask job over the same parts (read, rules check, write), all threads.
    pub mask_rows_per_s: f64,
    pub ratio: f64,
}

/// Ingests `file` into a scratch lake (not timed), then times a bare read of its parts
/// against the quiet mask job over them.
pub fn bench_mask(
    rt: &tokio::runtime::Handle,
    file: &str,
    threads: usize,
    runs: usize,
) -> Result<MaskBench, JobError> {
    use lakefish_schemas::{MaskDefinition, MaskName, MaskSpec, Source};
    use rayon::prelude::*;
    let Scratch {
        ctx,
        lake,
        dataset,
        ingested,
        manifest,
        prefix,
        ..
    } = &Scratch::new(rt, file, threads, "mask", None)?;
    {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .map_err(|e| JobError::Internal(e.to_string()))?;
        let (mut read_best, mut mask_best) = (f64::MAX, f64::MAX);
        for run in 0..runs.max(1) {
            let start = Instant::now();
            let n: usize = pool.install(|| {
                manifest
                    .parts
                    .par_iter()
                    .map(|p| {
                        let key = format!("{prefix}/{}", p.name);
                        let bytes = rt.block_on(lake.get(&key))?.unwrap_or_default();
                        Ok(lakefish_lake::parts::read_positions(bytes, &key)?.len())
                    })
                    .sum::<Result<usize, JobError>>()
            })?;
            std::hint::black_box(n);
            read_best = read_best.min(start.elapsed().as_secs_f64());

            let def = MaskDefinition {
                name: MaskName::new(&format!("bench{run}")).expect("valid"),
                min_ply: None,
                max_abs_score: None,
                ..MaskDefinition::quiet()
            };
            let mspec = MaskSpec {
                dataset: dataset.clone(),
                source: Source::Binpack,
                definition: def,
            };
            let start = Instant::now();
            lakefish_jobs::masks::mask_dataset(ctx, &JobId::new(), &mspec)?;
            mask_best = mask_best.min(start.elapsed().as_secs_f64());
        }
        let rows = ingested.rows as f64;
        Ok(MaskBench {
            file: file.to_string(),
            rows: ingested.rows,
            threads,
            read_rows_per_s: rows / read_best,
            mask_rows_per_s: rows / mask_best,
            ratio: read_best / mask_best,
        })
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct ShuffleBench {
    pub file: String,
    pub input_rows: u64,
    pub selected_rows: u64,
    pub input_mib: f64,
    pub chunks: u32,
    /// Plain copy (get + put) of the same part bytes on the same store.
    pub copy_mib_per_s: f64,
    pub shuffle_mib_per_s: f64,
    pub shuffle_rows_per_s: f64,
    /// shuffle / copy, by input bytes per second (target: at least 0.3).
    pub ratio: f64,
}

/// Ingests and masks `file` in a scratch lake (not timed), then times the shuffle of it
/// against a plain copy of the same bytes on the same store. `store` is a lake (a directory
/// or `s3://bucket/prefix`) to work under instead of a scratch directory.
pub fn bench_shuffle(
    rt: &tokio::runtime::Handle,
    file: &str,
    threads: usize,
    chunks: u32,
    runs: usize,
    store: Option<&str>,
) -> Result<ShuffleBench, JobError> {
    use lakefish_schemas::{MaskDefinition, MaskSpec, ShuffleSpec, Source};
    let Scratch {
        ctx,
        lake,
        dataset,
        ingested,
        manifest,
        prefix,
        ..
    } = &Scratch::new(rt, file, threads, "shuffle", store)?;
    {
        let mask = MaskSpec {
            dataset: dataset.clone(),
            source: Source::Binpack,
            definition: MaskDefinition::quiet(),
        };
        lakefish_jobs::masks::mask_dataset(ctx, &JobId::new(), &mask)?;
        let (mut copy_best, mut shuffle_best, mut selected) = (f64::MAX, f64::MAX, 0);
        for run in 0..runs.max(1) {
            let start = Instant::now();
            rt.block_on(async {
                let copies = manifest.parts.iter().map(|p| {
                    let (lake, from) = (lake.clone(), format!("{prefix}/{}", p.name));
                    let to = format!("copy{run}/{}", p.name);
                    async move {
                        let bytes = lake.get(&from).await?.unwrap_or_default();
                        lake.put(&to, bytes).await
                    }
                });
                futures::future::try_join_all(copies).await
            })?;
            copy_best = copy_best.min(start.elapsed().as_secs_f64());
            let sspec = ShuffleSpec {
                datasets: vec![dataset.clone()],
                source: Source::Binpack,
                mask: MaskDefinition::quiet().name,
                chunks,
                seed: run as u64,
                extra: Vec::new(),
            };
            let start = Instant::now();
            let m = lakefish_jobs::shuffle::shuffle_here(ctx, &sspec)?;
            shuffle_best = shuffle_best.min(start.elapsed().as_secs_f64());
            selected = m.rows;
        }
        let mib = ingested.bytes as f64 / (1 << 20) as f64;
        Ok(ShuffleBench {
            file: file.to_string(),
            input_rows: ingested.rows,
            selected_rows: selected,
            input_mib: mib,
            chunks,
            copy_mib_per_s: mib / copy_best,
            shuffle_mib_per_s: mib / shuffle_best,
            shuffle_rows_per_s: ingested.rows as f64 / shuffle_best,
            ratio: copy_best / shuffle_best,
        })
    }
}

/// A throw-away lake holding `file` ingested as dataset `bench` (parts of 100,000 rows):
/// a scratch directory, or a fresh prefix of a given store; deleted when dropped.
struct Scratch {
    place: ScratchPlace,
    lake: Lake,
    ctx: JobContext,
    dataset: DatasetName,
    ingested: lakefish_ingest::ingest_binpack::IngestSummary,
    manifest: lakefish_schemas::DatasetManifest,
    prefix: String,
}

enum ScratchPlace {
    Dir(std::path::PathBuf),
    /// A prefix of the user's store: every object under it is deleted afterwards.
    Store(tokio::runtime::Handle),
}

impl ScratchPlace {
    fn clean(&self, lake: &Lake) {
        match self {
            ScratchPlace::Dir(dir) => {
                let _ = std::fs::remove_dir_all(dir);
            }
            ScratchPlace::Store(rt) => {
                let _ = rt.block_on(async {
                    let keys = lake.list("").await?;
                    lake.delete_many(keys.into_iter().map(|o| o.location.to_string()).collect())
                        .await
                });
            }
        }
    }
}

impl Scratch {
    fn new(
        rt: &tokio::runtime::Handle,
        file: &str,
        threads: usize,
        what: &str,
        store: Option<&str>,
    ) -> Result<Scratch, JobError> {
        use lakefish_schemas::Source;
        let name = format!("lakefish-bench-{what}-{}", std::process::id());
        let (place, lake) = match store {
            Some(store) => {
                let env: HashMap<String, String> = std::env::vars().collect();
                let lake = Lake::open(&format!("{}/{name}", store.trim_end_matches('/')), &env)?;
                (ScratchPlace::Store(rt.clone()), lake)
            }
            None => {
                let dir = std::env::temp_dir().join(&name);
                let _ = std::fs::remove_dir_all(&dir);
                let lake = Lake::open(dir.to_str().unwrap(), &HashMap::new())?;
                (ScratchPlace::Dir(dir), lake)
            }
        };
        let ctx = JobContext::new(lake.clone(), rt.clone()).with_threads(threads);
        let dataset = DatasetName::new("bench").expect("valid name");
        let spec = IngestBinpackSpec {
            max_game_bytes: None,
            inputs: vec![file.to_string()],
            dataset: dataset.clone(),
            rows_per_part: 100_000,
        };
        let ingested = ingest_binpack(&ctx, &JobId::new(), &spec);
        let manifest = rt.block_on(lakefish_lake::datasets::read_manifest(
            &lake,
            Source::Binpack,
            &dataset,
        ));
        let (ingested, manifest) = match (ingested, manifest) {
            (Ok(i), Ok(Some(m))) => (i, m),
            (Err(e), _) | (_, Err(e)) => {
                place.clean(&lake);
                return Err(e);
            }
            (_, Ok(None)) => {
                place.clean(&lake);
                return Err(JobError::Internal("bench dataset vanished".into()));
            }
        };
        let prefix = lakefish_schemas::positions::dataset_prefix(Source::Binpack, &dataset);
        Ok(Scratch {
            place,
            lake,
            ctx,
            dataset,
            ingested,
            manifest,
            prefix,
        })
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        self.place.clean(&self.lake);
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct PgnBench {
    pub file: String,
    /// The input is repeated this many times into a scratch file, so blocks spread over cores.
    pub repeat: usize,
    pub mib: f64,
    pub games: u64,
    pub positions: u64,
    pub threads: usize,
    /// Bare `pgn-reader` visitor (SAN → move, play it, parse `[%eval]`), one core.
    pub bare_mib_per_s: f64,
    /// Full ingest (parse, FEN/UCI text, evals converted, Parquet encode, write), all threads.
    pub ingest_mib_per_s: f64,
    /// MiB per CPU-second of the ingest (all its threads), best of the runs.
    pub ingest_mib_per_s_per_core: f64,
    /// CPU-seconds per wall-second during the ingest run with the least CPU time.
    pub cores_busy: f64,
    pub ingest_positions_per_s: f64,
    /// ingest per CPU-second / bare visitor (target: at least 0.5).
    pub ratio_per_core: f64,
    /// Phases on one core: blocks parsed into row columns; Parquet encoding of those columns.
    pub parse_ns_per_position: f64,
    pub parquet_encode_ns_per_position: f64,
    pub bare_ns_per_position: f64,
}

/// The reference: what any PGN consumer has to do at least.
struct BareVisitor {
    plies: u64,
    evals: u64,
}

impl pgn_reader::Visitor for BareVisitor {
    type Tags = Option<shakmaty::Chess>;
    type Movetext = shakmaty::Chess;
    type Output = ();

    fn begin_tags(&mut self) -> std::ops::ControlFlow<(), Self::Tags> {
        std::ops::ControlFlow::Continue(None)
    }

    fn tag(
        &mut self,
        tags: &mut Self::Tags,
        name: &[u8],
        value: pgn_reader::RawTag<'_>,
    ) -> std::ops::ControlFlow<()> {
        if name == b"FEN" {
            *tags = shakmaty::fen::Fen::from_ascii(value.as_bytes())
                .ok()
                .and_then(|f| f.into_position(shakmaty::CastlingMode::Chess960).ok());
        }
        std::ops::ControlFlow::Continue(())
    }

    fn begin_movetext(&mut self, tags: Self::Tags) -> std::ops::ControlFlow<(), Self::Movetext> {
        std::ops::ControlFlow::Continue(tags.unwrap_or_default())
    }

    fn san(
        &mut self,
        pos: &mut Self::Movetext,
        san: pgn_reader::SanPlus,
    ) -> std::ops::ControlFlow<()> {
        use shakmaty::Position;
        match san.san.to_move(pos) {
            Ok(m) => {
                pos.play_unchecked(m);
                self.plies += 1;
                std::ops::ControlFlow::Continue(())
            }
            Err(_) => std::ops::ControlFlow::Break(()),
        }
    }

    fn comment(
        &mut self,
        _: &mut Self::Movetext,
        comment: pgn_reader::RawComment<'_>,
    ) -> std::ops::ControlFlow<()> {
        self.evals += lakefish_ingest::pgn::parse_eval(comment.as_bytes()).is_some() as u64;
        std::ops::ControlFlow::Continue(())
    }

    fn begin_variation(
        &mut self,
        _: &mut Self::Movetext,
    ) -> std::ops::ControlFlow<(), pgn_reader::Skip> {
        std::ops::ControlFlow::Continue(pgn_reader::Skip(true))
    }

    fn end_game(&mut self, _: Self::Movetext) {}
}

/// PGN ingest against a bare `pgn-reader` visitor over the same bytes, in the same run.
pub fn bench_ingest_pgn(
    rt: &tokio::runtime::Handle,
    file: &str,
    threads: usize,
    runs: usize,
    min_mib: usize,
) -> Result<PgnBench, JobError> {
    use lakefish_schemas::IngestSpec;
    let read_err = |e: std::io::Error| JobError::Input {
        input: file.to_string(),
        reason: e.to_string(),
    };
    let raw = std::fs::read(file).map_err(read_err)?;
    let one = if raw.starts_with(&lakefish_ingest::pgn::ZSTD_MAGIC) {
        zstd::decode_all(&raw[..]).map_err(read_err)?
    } else {
        raw
    };
    if one.is_empty() {
        return Err(JobError::Input {
            input: file.to_string(),
            reason: "empty file".into(),
        });
    }
    let repeat = (min_mib << 20).div_ceil(one.len()).max(1);
    let mut text = Vec::with_capacity(one.len() * repeat);
    for _ in 0..repeat {
        text.extend_from_slice(&one);
        text.extend_from_slice(b"\n\n");
    }
    let dir = std::env::temp_dir().join(format!("lakefish-bench-pgn-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(read_err)?;
    let input = dir.join("bench.pgn");
    std::fs::write(&input, &text).map_err(read_err)?;
    let mib = text.len() as f64 / (1 << 20) as f64;

    let mut bare_best = f64::MAX;
    let mut ingest_run = BestRun::new();
    let (mut games, mut positions) = (0, 0);
    let (mut parse_best, mut encode_best) = (f64::MAX, f64::MAX);
    let outcome = (|| {
        for run in 0..runs.max(1) {
            let start = Instant::now();
            let mut v = BareVisitor { plies: 0, evals: 0 };
            let mut reader = pgn_reader::Reader::new(&text[..]);
            while reader.read_game(&mut v).map_err(read_err)?.is_some() {}
            bare_best = bare_best.min(start.elapsed().as_secs_f64());
            std::hint::black_box(v.evals);

            let lake_dir = dir.join(format!("lake-{run}"));
            let lake = Lake::open(lake_dir.to_str().unwrap(), &HashMap::new())?;
            let ctx = JobContext::new(lake, rt.clone()).with_threads(threads);
            let spec = IngestSpec {
                max_game_bytes: None,
                inputs: vec![input.to_string_lossy().into_owned()],
                dataset: DatasetName::new("bench").expect("valid name"),
                rows_per_part: lakefish_schemas::job::default_rows_per_part(),
            };
            let summary = ingest_run
                .time(|| lakefish_ingest::ingest_pgn::ingest_pgn(&ctx, &JobId::new(), &spec))?;
            if summary.rows != v.plies {
                return Err(JobError::Internal(format!(
                    "ingest wrote {} rows, the bare visitor played {} moves",
                    summary.rows, v.plies
                )));
            }
            positions = v.plies;
            games = ctx
                .block_on(lakefish_lake::datasets::read_manifest(
                    &ctx.lake,
                    lakefish_schemas::Source::Lichess,
                    &spec.dataset,
                ))
                .ok()
                .flatten()
                .map_or(0, |m| m.inputs[0].chunks);
            let _ = std::fs::remove_dir_all(&lake_dir);

            // Phases on one core: parsing blocks into row columns, then Parquet encoding.
            let mut splitter = lakefish_ingest::pgn::BlockSplitter::new(
                &text[..],
                lakefish_schemas::job::DEFAULT_MAX_GAME_BYTES,
            );
            let start = Instant::now();
            let mut chunks = Vec::new();
            while let Some((at, block)) = splitter.next_block().map_err(read_err)? {
                let rows = lakefish_ingest::pgn::parse_block(&block, 1, at);
                chunks.extend(rows.months.into_values().map(|m| m.rows));
            }
            parse_best = parse_best.min(start.elapsed().as_secs_f64());
            let start = Instant::now();
            for c in chunks.chunks(8) {
                let batch = lakefish_lake::parts::batch_from_chunks(c);
                std::hint::black_box(lakefish_lake::parts::encode_parquet(&batch, "bench")?.len());
            }
            encode_best = encode_best.min(start.elapsed().as_secs_f64());
        }
        Ok(())
    })();
    let _ = std::fs::remove_dir_all(&dir);
    outcome?;
    let bare = mib / bare_best;
    let ingest = mib / ingest_run.wall;
    Ok(PgnBench {
        file: file.to_string(),
        repeat,
        mib,
        games,
        positions,
        threads,
        bare_mib_per_s: bare,
        ingest_mib_per_s: ingest,
        ingest_mib_per_s_per_core: mib / ingest_run.cpu,
        cores_busy: ingest_run.cores_busy(),
        ingest_positions_per_s: positions as f64 / ingest_run.wall,
        ratio_per_core: mib / ingest_run.cpu / bare,
        parse_ns_per_position: parse_best * 1e9 / positions as f64,
        parquet_encode_ns_per_position: encode_best * 1e9 / positions as f64,
        bare_ns_per_position: bare_best * 1e9 / positions as f64,
    })
}
