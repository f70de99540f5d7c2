//! Experiments (issue 44): every cell of an [`ExperimentSpec`] trained, quantized and
//! registered, then the nets rated together in fixed-length matches (each an SPRT test with
//! `fixed_length`, so its games are stored, shown and resumed like any other), and one table
//! fitted from all the pairings' counts ([`lakefish_engine::rating::fit_joint`], Ordo's model).
//!
//! In-process ([`run_here`]) the cells and matches run one after the other in this process.
//! Queued, the `experiment` job plans and hands over to [`advance`], which the scheduler of
//! `lakefish serve` calls every second: it queues each cell as an `experiment_cell` job and
//! each pairing as an `sprt` job (ids derived from the experiment, so nothing is queued twice)
//! and fits the table once every match has ended. Both keep their state in the lake only, so
//! a killed run, started again with the same document, redoes nothing finished: a cell whose
//! `cell-NNN.json` exists is not trained again, a training run goes on from its checkpoint,
//! and a match from its stored batches.

use lakefish_engine::rating::{ELO_76, Pairing, fit_joint};
use lakefish_lake::records::now;
use lakefish_schemas::experiment::{
    CellResult, EXPERIMENTS_PREFIX, ExperimentId, ExperimentPlan, ExperimentSpec, ExperimentState,
    ExperimentStatus, ExperimentTask, PairingResult, Schedule, TableRow,
};
use lakefish_schemas::{
    JobId, JobSpec, JobState, Progress, QuantizeReport, QuantizeSpec, RegisterSpec, SprtSpec,
    SprtState, SprtStatus,
};

use crate::{JobContext, JobError, Lake};

fn plan_key(id: &str) -> String {
    format!("{EXPERIMENTS_PREFIX}/{id}/experiment.json")
}
fn cell_key(id: &str, index: u32) -> String {
    format!("{EXPERIMENTS_PREFIX}/{id}/cells/cell-{index:03}.json")
}
fn status_key(id: &str) -> String {
    format!("{EXPERIMENTS_PREFIX}/{id}/status.json")
}
/// The table as CSV, beside the status (`lakefish experiment show --csv` prints it).
pub fn csv_key(id: &str) -> String {
    format!("{EXPERIMENTS_PREFIX}/{id}/table.csv")
}
/// The table as Markdown.
pub fn markdown_key(id: &str) -> String {
    format!("{EXPERIMENTS_PREFIX}/{id}/table.md")
}

/// Depth of the nodes/s measurement over the bench positions.
pub const NPS_DEPTH: u32 = 4;
/// Held-out positions the move accuracy is measured on.
pub const MOVE_ACCURACY_POSITIONS: usize = 2000;

/// The id the cell's training runs under (its run id derives from it): the same for every
/// attempt, so a cell started again goes on from its run's checkpoints.
fn cell_run_job(id: &str, index: u32) -> JobId {
    JobId::derived(&format!("experiment/{id}/cell/{index}"))
}
/// Queued jobs' ids derive from the experiment and its attempt: a job is queued once per
/// attempt, and a failed one is not found again by the next attempt.
fn attempt_key(id: &str, attempt: u32) -> String {
    if attempt == 0 {
        id.to_string()
    } else {
        format!("{id}/attempt/{attempt}")
    }
}
fn cell_job(id: &str, attempt: u32, index: u32) -> JobId {
    JobId::derived(&format!(
        "experiment/{}/cell/{index}",
        attempt_key(id, attempt)
    ))
}
fn pairing_job(id: &str, attempt: u32, a: usize, b: usize) -> JobId {
    JobId::derived(&format!(
        "experiment/{}/pairing/{a}/{b}",
        attempt_key(id, attempt)
    ))
}

/// What can fail the rating after hours of training, checked before any: the book and the
/// anchor (the API calls it at the door, `plan` again where the experiment starts).
pub fn check_rating(ctx: &JobContext, spec: &ExperimentSpec) -> Result<(), JobError> {
    let name = |e: JobError| match e {
        e if e.is_transient() => e,
        e => JobError::Payload(format!("rating.book: {e}")),
    };
    crate::sprt::read_book_at(ctx, &spec.rating.book).map_err(name)?;
    if let Some(p) = &spec.puzzles {
        read_puzzles(ctx, &p.file).map_err(|e| match e {
            e if e.is_transient() => e,
            e => JobError::Payload(format!("puzzles.file: {e}")),
        })?;
    }
    if let Some(anchor) = &spec.rating.anchor {
        ctx.block_on(crate::engines::resolve_side(&ctx.lake, anchor))
            .map_err(|e| match e {
                e if e.is_transient() => e,
                e => JobError::Payload(format!("rating.anchor: {e}")),
            })?;
    }
    Ok(())
}

/// Checks the spec as the door does and writes `experiment.json` unless it exists (the same
/// document is the same experiment: its plan is read back).
pub fn plan(ctx: &JobContext, spec: &ExperimentSpec) -> Result<ExperimentPlan, JobError> {
    let cells = crate::admission::check_experiment(spec)?;
    let id = spec.id();
    if let Some(plan) = read_plan(ctx, &id)? {
        return Ok(plan);
    }
    check_rating(ctx, spec)?;
    // The bytes read now are the ones every match and cell uses, on any worker.
    let book = crate::sprt::read_book_at(ctx, &spec.rating.book)?;
    let book_key = format!("{EXPERIMENTS_PREFIX}/{id}/book.epd");
    ctx.block_on(ctx.lake.put(&book_key, book.to_epd().into_bytes()))?;
    let puzzles = match &spec.puzzles {
        Some(p) => {
            let bytes = read_input(ctx, &p.file)?;
            let key = format!("{EXPERIMENTS_PREFIX}/{id}/puzzles.epd");
            ctx.block_on(ctx.lake.put(&key, bytes))?;
            Some(format!("lake:{key}"))
        }
        None => None,
    };
    let anchor = match &spec.rating.anchor {
        Some(a) => Some(
            ctx.block_on(crate::engines::resolve_side(&ctx.lake, a))?
                .name,
        ),
        None => None,
    };
    let plan = ExperimentPlan {
        id: id.clone(),
        spec: spec.clone(),
        cells,
        book: Some(format!("lake:{book_key}")),
        puzzles,
        anchor,
        created: now(),
    };
    // The first plan written stays: another process planning the same document reads it.
    let created = ctx.block_on(
        ctx.lake
            .put_if_absent(&plan_key(&id), serde_json::to_vec_pretty(&plan)?),
    )?;
    if !created {
        return read_plan(ctx, &id)?
            .ok_or_else(|| JobError::Internal(format!("experiment {id}: its plan vanished")));
    }
    let status = initial_status(&plan);
    put_status(ctx, &status)?;
    Ok(plan)
}

fn read_plan(ctx: &JobContext, id: &ExperimentId) -> Result<Option<ExperimentPlan>, JobError> {
    ctx.block_on(ctx.lake.get_json(&plan_key(id), "experiment plan"))
}

/// An experiment's status (the table once rated), `None` when it does not exist.
pub async fn status(lake: &Lake, id: &ExperimentId) -> Result<Option<ExperimentStatus>, JobError> {
    lake.get_json(&status_key(id), "experiment status").await
}

/// Every experiment's status, newest first.
pub async fn list(lake: &Lake) -> Result<Vec<ExperimentStatus>, JobError> {
    let mut out = Vec::new();
    for dir in lake.list_dirs(EXPERIMENTS_PREFIX).await? {
        let name = dir.rsplit('/').next().unwrap_or(&dir);
        let Ok(id) = ExperimentId::new(name) else {
            continue;
        };
        // One unreadable status must not hide (or stop driving) all the others.
        match status(lake, &id).await {
            Ok(Some(s)) => out.push(s),
            Ok(None) => {}
            Err(e) if e.is_transient() => return Err(e),
            Err(e) => tracing::warn!(experiment = %id, "skipped: {e}"),
        }
    }
    out.sort_by(|a, b| b.created.cmp(&a.created));
    Ok(out)
}

fn put_status(ctx: &JobContext, s: &ExperimentStatus) -> Result<(), JobError> {
    ctx.block_on(
        ctx.lake
            .put(&status_key(&s.id), serde_json::to_vec_pretty(s)?),
    )
}

/// The players: the cells, then the anchor unless it is absent (the first cell anchors) or
/// names one of the cells' nets.
fn players(plan: &ExperimentPlan, cells: &[Option<CellResult>]) -> (Vec<String>, usize) {
    let mut players: Vec<String> = plan.cells.iter().map(|c| c.label.clone()).collect();
    let anchor = match anchor_name(plan) {
        None => 0,
        Some(a) => match cells
            .iter()
            .position(|c| c.as_ref().is_some_and(|c| same_net(&c.net, &a)))
        {
            Some(i) => i,
            None => {
                players.push(a);
                players.len() - 1
            }
        },
    };
    (players, anchor)
}

/// The anchor as planned (resolved), or as written for plans made before that was stored.
fn anchor_name(plan: &ExperimentPlan) -> Option<String> {
    plan.anchor
        .clone()
        .or_else(|| plan.spec.rating.anchor.as_ref().map(ToString::to_string))
}

fn same_net(net: &str, name: &str) -> bool {
    net == name || net.strip_suffix(".nnue") == Some(name)
}

fn pairings(plan: &ExperimentPlan, players: usize, anchor: usize) -> Vec<(usize, usize)> {
    match plan.spec.rating.schedule {
        Schedule::RoundRobin => (0..players)
            .flat_map(|a| (a + 1..players).map(move |b| (a, b)))
            .collect(),
        Schedule::Gauntlet => (0..players)
            .filter(|&p| p != anchor)
            .map(|p| (p, anchor))
            .collect(),
    }
}

fn initial_status(plan: &ExperimentPlan) -> ExperimentStatus {
    let cells = vec![None; plan.cells.len()];
    let (players, anchor) = players(plan, &cells);
    ExperimentStatus {
        id: plan.id.clone(),
        state: ExperimentState::Training,
        cells: plan.cells.len(),
        cells_done: 0,
        pairings: Vec::new(),
        players,
        anchor,
        table: Vec::new(),
        note: None,
        error: None,
        local: false,
        attempt: 0,
        created: plan.created.clone(),
        updated: now(),
    }
}

/// The cells recorded so far, in order (the dashboard draws their curves while it rates).
pub async fn recorded_cells(lake: &Lake, id: &ExperimentId) -> Result<Vec<CellResult>, JobError> {
    let mut out = Vec::new();
    for m in lake
        .list(&format!("{EXPERIMENTS_PREFIX}/{id}/cells"))
        .await?
    {
        if let Some(c) = lake
            .get_json::<CellResult>(m.location.as_ref(), "experiment cell")
            .await?
        {
            out.push(c);
        }
    }
    out.sort_by_key(|c| c.index);
    Ok(out)
}

fn read_cell(ctx: &JobContext, id: &str, index: u32) -> Result<Option<CellResult>, JobError> {
    ctx.block_on(ctx.lake.get_json(&cell_key(id, index), "experiment cell"))
}

/// Trains, quantizes and registers one cell's net, and measures its nodes/s; a cell already
/// recorded is returned as it is. The training run's id derives from the experiment and the
/// cell, so a cell started again goes on from its run's last checkpoint.
pub fn run_cell(
    ctx: &JobContext,
    plan: &ExperimentPlan,
    index: u32,
) -> Result<CellResult, JobError> {
    let cell = plan.cells.get(index as usize).ok_or_else(|| {
        JobError::Payload(format!(
            "index: the experiment {} has {} cells",
            plan.id,
            plan.cells.len()
        ))
    })?;
    if let Some(done) = read_cell(ctx, &plan.id, index)? {
        return Ok(done);
    }
    let trainer = ctx.trainer.as_ref().ok_or_else(|| {
        JobError::Failed("this process cannot train (it was built without lakefish-train)".into())
    })?;
    let run: lakefish_schemas::RunRecord =
        serde_json::from_value(trainer.train(ctx, &cell_run_job(&plan.id, index), &cell.train)?)?;
    ctx.check_cancelled()?;
    let quantize: QuantizeSpec = serde_json::from_value(serde_json::json!({"run": run.id}))?;
    let report: QuantizeReport = serde_json::from_value(trainer.quantize(ctx, &quantize)?)?;
    let net = crate::nets::register(
        ctx,
        &RegisterSpec {
            run: run.id.clone(),
            checkpoint: Some(report.step),
            parent: None,
        },
    )?;
    let evaluator = ctx.block_on(crate::nets::load_evaluator(&ctx.lake, &net.name))?;
    let accuracy = move_accuracy(ctx, &cell.train, evaluator.clone())?;
    let puzzle_accuracy = match &plan.spec.puzzles {
        Some(p) => Some(solved(
            &read_puzzles(ctx, plan.puzzles.as_deref().unwrap_or(&p.file))?,
            evaluator.clone(),
            p.nodes,
        )),
        None => None,
    };
    let nps = lakefish_engine::bench::bench(evaluator, NPS_DEPTH).nps();
    let classical =
        lakefish_engine::bench::bench(lakefish_engine::eval::Evaluator::Classical, NPS_DEPTH).nps();
    let result = CellResult {
        index,
        label: cell.label.clone(),
        run: run.id.clone(),
        net: net.name.clone(),
        val_loss: run.val_loss.last().copied(),
        material_val_loss: run.material_val_loss,
        quantized_mean_cp: Some(report.error.mean_abs_cp),
        move_accuracy: accuracy,
        puzzle_accuracy,
        nodes_per_s: nps,
        nodes_per_s_ratio: nps / classical.max(1e-9),
    };
    ctx.block_on(ctx.lake.put(
        &cell_key(&plan.id, index),
        serde_json::to_vec_pretty(&result)?,
    ))?;
    Ok(result)
}

/// How often the net's quiescence-level best move (a depth-1 search: every legal move, then
/// captures to quiet) is the data's move, over the first [`MOVE_ACCURACY_POSITIONS`] rows of
/// the shuffle's held-out chunk (the trainer validates on the last `val_chunks`), as
/// Nodchip's learner reports it. `None` when the chunk has no rows with a move.
fn move_accuracy(
    ctx: &JobContext,
    train: &lakefish_schemas::TrainSpec,
    evaluator: lakefish_engine::eval::Evaluator,
) -> Result<Option<f64>, JobError> {
    let manifest = ctx
        .block_on(crate::shuffle::read_shuffle_manifest(
            &ctx.lake,
            &train.shuffle,
        ))?
        .ok_or_else(|| JobError::NotFound(format!("shuffle {}", train.shuffle)))?;
    let Some(last) = manifest.chunks.len().checked_sub(1) else {
        return Ok(None);
    };
    let rows = crate::chunks::chunk_rows_as_text(
        ctx,
        &train.shuffle,
        last as u32,
        MOVE_ACCURACY_POSITIONS,
    )?;
    let mut searcher = lakefish_engine::search::Searcher::new(evaluator, 1);
    let (mut same, mut counted) = (0u64, 0u64);
    let mut text = Vec::with_capacity(5);
    for row in rows.iter().filter(|r| !r.mv.is_empty() && r.mv != "0000") {
        let Ok(pos) = lakefish_engine::rules::parse_position(&row.fen) else {
            continue;
        };
        let found = searcher.search(
            &pos,
            &[],
            &lakefish_engine::search::Limits::depth(1),
            |_| {},
        );
        let Some(best) = found.best else { continue };
        text.clear();
        lakefish_engine::fen::write_uci(&best, shakmaty::CastlingMode::Standard, &mut text);
        counted += 1;
        same += u64::from(text == row.mv.as_bytes());
    }
    Ok((counted > 0).then(|| same as f64 / counted as f64))
}

/// A whole input (a local path or `lake:` key) of at most a book's size.
fn read_input(ctx: &JobContext, file: &str) -> Result<Vec<u8>, JobError> {
    let input = lakefish_lake::input::Input::open(ctx, file)?;
    if input.len() > crate::sprt::MAX_BOOK_BYTES {
        return Err(JobError::TooLarge {
            input: file.to_string(),
            max: crate::sprt::MAX_BOOK_BYTES,
        });
    }
    input.read_at(0, input.len() as usize)
}

/// Reads and parses a puzzle file.
fn read_puzzles(
    ctx: &JobContext,
    file: &str,
) -> Result<Vec<lakefish_engine::book::Puzzle>, JobError> {
    let bytes = read_input(ctx, file)?;
    lakefish_engine::book::parse_puzzles(file, &bytes).map_err(|e| JobError::Payload(e.to_string()))
}

/// The share of `puzzles` whose best move lakefish's search with `evaluator` finds in `nodes`.
fn solved(
    puzzles: &[lakefish_engine::book::Puzzle],
    evaluator: lakefish_engine::eval::Evaluator,
    nodes: u64,
) -> f64 {
    let mut searcher = lakefish_engine::search::Searcher::new(evaluator, 16);
    let hits = puzzles
        .iter()
        .filter(|p| {
            searcher.clear();
            let found = searcher.search(
                &p.position,
                &[],
                &lakefish_engine::search::Limits::nodes(nodes),
                |_| {},
            );
            found.best.is_some_and(|m| p.best.contains(&m))
        })
        .count();
    hits as f64 / puzzles.len().max(1) as f64
}

/// The fixed-length match of two players.
fn match_spec(plan: &ExperimentPlan, a: &str, b: &str) -> SprtSpec {
    let r = &plan.spec.rating;
    SprtSpec {
        new: lakefish_schemas::engines::SideRequest::Text(a.to_string()),
        base: lakefish_schemas::engines::SideRequest::Text(b.to_string()),
        book: plan.book.clone().unwrap_or_else(|| r.book.clone()),
        nodes: r.nodes,
        tc: r.tc.clone(),
        elo0: 0.0,
        elo1: 10.0,
        alpha: 0.05,
        beta: 0.05,
        model: "logistic".into(),
        batch_pairs: r.pairs.min(8),
        max_pairs: r.pairs as u64,
        concurrency: 4,
        seed: 0,
        time_margin_ms: 0,
        fixed_length: true,
    }
}

/// What each player plays as: a cell's net, or the anchor as named.
fn sides(plan: &ExperimentPlan, cells: &[CellResult], players: &[String]) -> Vec<String> {
    (0..players.len())
        .map(|p| match cells.get(p) {
            Some(c) => c.net.clone(),
            None => anchor_name(plan).unwrap_or_default(),
        })
        .collect()
}

fn counted(a: usize, b: usize, s: &SprtStatus) -> PairingResult {
    PairingResult {
        a,
        b,
        sprt: Some(s.id.clone()),
        wins: s.wins,
        draws: s.draws,
        losses: s.losses,
        penta: s.penta,
        done: s.state != SprtState::Running,
        stopped: s.state == SprtState::Stopped,
    }
}

/// Two cells that trained the same bytes play no match (it would be refused as one side
/// against itself); the fit sees no games between them.
fn no_match(a: usize, b: usize) -> PairingResult {
    PairingResult {
        a,
        b,
        sprt: None,
        wins: 0,
        draws: 0,
        losses: 0,
        penta: [0; 5],
        done: true,
        stopped: false,
    }
}

fn report(ctx: &JobContext, stage: String, done: u64, total: u64) {
    ctx.progress.report(&Progress {
        stage,
        done,
        total: Some(total),
        unit: "steps".into(),
        rows: 0,
    });
}

/// Runs a whole experiment in this process and returns its status with the table.
pub fn run_here(ctx: &JobContext, spec: &ExperimentSpec) -> Result<ExperimentStatus, JobError> {
    let plan = plan(ctx, spec)?;
    if let Some(s) = ctx.block_on(status(&ctx.lake, &plan.id))?
        && s.state == ExperimentState::Succeeded
    {
        return Ok(s);
    }
    let mut s = initial_status(&plan);
    s.local = true;
    put_status(ctx, &s)?;
    match run_here_planned(ctx, &plan) {
        Ok(done) => Ok(done),
        Err(e) => {
            // Said where it stands; the same document run again goes on from here.
            let mut s = ctx
                .block_on(status(&ctx.lake, &plan.id))?
                .unwrap_or_else(|| initial_status(&plan));
            s.state = ExperimentState::Failed;
            s.error = Some(e.to_string());
            s.local = true;
            s.updated = now();
            put_status(ctx, &s)?;
            Err(e)
        }
    }
}

fn run_here_planned(ctx: &JobContext, plan: &ExperimentPlan) -> Result<ExperimentStatus, JobError> {
    let plan = plan.clone();
    let n = plan.cells.len();
    let mut cells = Vec::with_capacity(n);
    for i in 0..n {
        ctx.check_cancelled()?;
        report(
            ctx,
            format!("cell {}/{n}: {}", i + 1, plan.cells[i].label),
            i as u64,
            n as u64,
        );
        cells.push(run_cell(ctx, &plan, i as u32)?);
        let mut s = initial_status(&plan);
        s.local = true;
        s.cells_done = i + 1;
        put_status(ctx, &s)?;
    }
    let some: Vec<Option<CellResult>> = cells.iter().cloned().map(Some).collect();
    let (players, anchor) = players(&plan, &some);
    let sides = sides(&plan, &cells, &players);
    let todo = pairings(&plan, players.len(), anchor);
    let mut results = Vec::with_capacity(todo.len());
    for (k, &(a, b)) in todo.iter().enumerate() {
        ctx.check_cancelled()?;
        report(
            ctx,
            format!(
                "match {}/{}: {} – {}",
                k + 1,
                todo.len(),
                players[a],
                players[b]
            ),
            k as u64,
            todo.len() as u64,
        );
        if sides[a] == sides[b] {
            results.push(no_match(a, b));
            continue;
        }
        let s = crate::sprt::run_here(ctx, &match_spec(&plan, &sides[a], &sides[b]))?;
        results.push(counted(a, b, &s));
        // Where it stands, for `experiment show` and the dashboard meanwhile.
        let mut s = initial_status(&plan);
        s.local = true;
        s.state = ExperimentState::Rating;
        s.cells_done = n;
        s.players = players.clone();
        s.anchor = anchor;
        s.pairings = results.clone();
        s.pairings
            .extend(todo[k + 1..].iter().map(|&(a, b)| PairingResult {
                done: false,
                ..no_match(a, b)
            }));
        put_status(ctx, &s)?;
    }
    finish(ctx, &plan, cells, players, anchor, results, (true, 0))
}

/// Fits the ratings and writes the status, `table.csv` and `table.md`.
fn finish(
    ctx: &JobContext,
    plan: &ExperimentPlan,
    cells: Vec<CellResult>,
    players: Vec<String>,
    anchor: usize,
    pairings: Vec<PairingResult>,
    (local, attempt): (bool, u32),
) -> Result<ExperimentStatus, JobError> {
    let sides = sides(plan, &cells, &players);
    let games: Vec<Pairing> = pairings
        .iter()
        .map(|p| Pairing {
            a: p.a,
            b: p.b,
            wins: p.wins,
            draws: p.draws,
            losses: p.losses,
        })
        .collect();
    let fit = fit_joint(players.len(), &games, anchor, ELO_76);
    let stopped: Vec<String> = pairings
        .iter()
        .filter(|p| p.stopped)
        .map(|p| format!("{} – {}", players[p.a], players[p.b]))
        .collect();
    let mut table = Vec::with_capacity(players.len());
    for (p, player) in players.iter().enumerate() {
        let (mut points, mut played) = (0.0, 0u64);
        for g in &pairings {
            let n = g.wins + g.draws + g.losses;
            if g.a == p {
                points += g.wins as f64 + 0.5 * g.draws as f64;
            } else if g.b == p {
                points += g.losses as f64 + 0.5 * g.draws as f64;
            } else {
                continue;
            }
            played += n;
        }
        let rating = fit.as_ref().ok().map(|r| r[p]);
        table.push(TableRow {
            player: if p < cells.len() {
                player.clone()
            } else {
                "anchor".into()
            },
            plays: sides[p].clone(),
            elo: rating.map(|r| r.elo),
            elo_error: rating.map(|r| r.error),
            games: played,
            score: (played > 0).then(|| points / played as f64),
            cell: cells.get(p).cloned(),
        });
    }
    let status = ExperimentStatus {
        id: plan.id.clone(),
        state: ExperimentState::Succeeded,
        cells: plan.cells.len(),
        cells_done: cells.len(),
        pairings,
        players,
        anchor,
        table,
        note: {
            let mut notes = Vec::new();
            if let Err(e) = &fit {
                notes.push(format!("no ratings: {e}"));
            }
            if !stopped.is_empty() {
                notes.push(format!(
                    "matches stopped by hand before all their games: {}",
                    stopped.join(", ")
                ));
            }
            (!notes.is_empty()).then(|| notes.join("; "))
        },
        error: None,
        local,
        attempt,
        created: plan.created.clone(),
        updated: now(),
    };
    ctx.block_on(async {
        ctx.lake.put(&csv_key(&plan.id), table_csv(&status)).await?;
        ctx.lake
            .put(&markdown_key(&plan.id), table_markdown(plan, &status))
            .await
    })?;
    put_status(ctx, &status)?;
    Ok(status)
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(String::new, |v| format!("{v:.digits$}"))
}

/// One CSV line per player; fields with a comma or quote are quoted.
pub fn table_csv(s: &ExperimentStatus) -> String {
    let quote = |f: &str| {
        if f.contains([',', '"', '\n']) {
            format!("\"{}\"", f.replace('"', "\"\""))
        } else {
            f.to_string()
        }
    };
    let mut out = String::from(
        "player,plays,elo,elo_error_95,games,score,val_loss,material_val_loss,quantized_mean_cp,move_accuracy,puzzle_accuracy,nodes_per_s,nodes_per_s_ratio\n",
    );
    for r in &s.table {
        let c = r.cell.as_ref();
        let fields = [
            quote(&r.player),
            quote(&r.plays),
            opt(r.elo, 1),
            opt(r.elo_error, 1),
            r.games.to_string(),
            opt(r.score, 4),
            opt(c.and_then(|c| c.val_loss), 5),
            opt(c.and_then(|c| c.material_val_loss), 5),
            opt(c.and_then(|c| c.quantized_mean_cp), 2),
            opt(c.and_then(|c| c.move_accuracy), 4),
            opt(c.and_then(|c| c.puzzle_accuracy), 4),
            opt(c.map(|c| c.nodes_per_s), 0),
            opt(c.map(|c| c.nodes_per_s_ratio), 3),
        ];
        out.push_str(&fields.join(","));
        out.push('\n');
    }
    out
}

/// The table as a reader of docs/BENCHMARKS.md expects it, with how the games were played.
pub fn table_markdown(plan: &ExperimentPlan, s: &ExperimentStatus) -> String {
    let r = &plan.spec.rating;
    let conditions = match (&r.nodes, &r.tc) {
        (Some(n), _) => format!("{n} nodes per move (node-limited, not on the clock)"),
        (None, Some(tc)) => format!("time control {tc}"),
        (None, None) => String::new(),
    };
    let schedule = match r.schedule {
        Schedule::RoundRobin => "round robin",
        Schedule::Gauntlet => "gauntlet against the anchor",
    };
    let mut out = format!(
        "# Experiment {}\n\n{schedule}, {} colour-reversed pairs per pairing from `{}`, {conditions}; \
         Elo relative to {} (fixed at 0) with 95 % intervals, fitted jointly (Ordo's model).\n\n",
        s.id,
        r.pairs,
        r.book,
        s.players.get(s.anchor).map_or("?", String::as_str)
    );
    out.push_str(
        "| player | plays | Elo | games | score | val loss | move accuracy | puzzles solved | nodes/s (× classical) |\n",
    );
    out.push_str("|---|---|---:|---:|---:|---:|---:|---:|---:|\n");
    for row in &s.table {
        let elo = match (row.elo, row.elo_error) {
            (Some(e), Some(err)) => format!("{e:+.1} ± {err:.1}"),
            _ => "–".into(),
        };
        let c = row.cell.as_ref();
        out.push_str(&format!(
            "| {} | {} | {elo} | {} | {} | {} | {} | {} | {} |\n",
            row.player.replace('|', "\\|"),
            row.plays,
            row.games,
            opt(row.score, 3),
            opt(c.and_then(|c| c.val_loss), 5),
            opt(c.and_then(|c| c.move_accuracy), 3),
            opt(c.and_then(|c| c.puzzle_accuracy), 3),
            c.map_or_else(String::new, |c| format!(
                "{:.0} ({:.2})",
                c.nodes_per_s, c.nodes_per_s_ratio
            )),
        ));
    }
    if let Some(note) = &s.note {
        out.push_str(&format!("\n{note}\n"));
    }
    out
}

/// Queued: the `experiment` job plans and queues what can start; [`advance`] does the rest.
/// Queued: the `experiment` job plans and hands the experiment to the scheduler, whose
/// [`drive`] queues its jobs (one driver, so nothing is queued twice). A failed experiment, or
/// one a local run left, submitted again starts a new attempt: finished cells and matches are
/// kept, failed jobs are queued anew.
pub fn submit(ctx: &JobContext, spec: &ExperimentSpec) -> Result<serde_json::Value, JobError> {
    let plan = plan(ctx, spec)?;
    let mut s = ctx
        .block_on(status(&ctx.lake, &plan.id))?
        .unwrap_or_else(|| initial_status(&plan));
    if s.state == ExperimentState::Failed || s.local {
        s.attempt += u32::from(s.state == ExperimentState::Failed);
        s.state = ExperimentState::Training;
        s.error = None;
        s.local = false;
        s.updated = now();
        put_status(ctx, &s)?;
    }
    Ok(
        serde_json::json!({"experiment": plan.id, "state": s.state, "cells": plan.cells.len(), "attempt": s.attempt}),
    )
}

/// Queues what the experiment still needs, unless queued already (job ids derive from the
/// experiment), and fits the table once every match has ended. Keeps no state but the lake
/// and the job records: any process may call it, any number of times.
pub fn advance(ctx: &JobContext, id: &ExperimentId) -> Result<ExperimentStatus, JobError> {
    let plan = read_plan(ctx, id)?.ok_or_else(|| JobError::NotFound(format!("experiment {id}")))?;
    let mut s = ctx
        .block_on(status(&ctx.lake, id))?
        .unwrap_or_else(|| initial_status(&plan));
    if s.state.is_final() {
        return Ok(s);
    }
    let before = s.clone();
    match step(ctx, &plan, &mut s) {
        Ok(()) => {}
        Err(e) if e.is_transient() => return Err(e),
        Err(e) => {
            s.state = ExperimentState::Failed;
            s.error = Some(e.to_string());
        }
    }
    if s != before && !(s.state == ExperimentState::Succeeded) {
        s.updated = now();
        put_status(ctx, &s)?;
    }
    Ok(s)
}

/// The state of a derived job, queuing it when it does not exist.
fn ensure(
    ctx: &JobContext,
    id: JobId,
    spec: impl FnOnce() -> JobSpec,
) -> Result<(JobState, Option<serde_json::Value>, Option<String>), JobError> {
    match ctx.block_on(ctx.jobs.get(&id))? {
        Some(rec) => Ok((rec.state, rec.result, rec.error)),
        None => {
            ctx.submitter("an experiment")?.submit(id, spec())?;
            Ok((JobState::Queued, None, None))
        }
    }
}

fn step(ctx: &JobContext, plan: &ExperimentPlan, s: &mut ExperimentStatus) -> Result<(), JobError> {
    let mut cells = Vec::with_capacity(plan.cells.len());
    for i in 0..plan.cells.len() as u32 {
        if let Some(c) = read_cell(ctx, &plan.id, i)? {
            cells.push(c);
            continue;
        }
        let task = ExperimentTask {
            experiment: plan.id.clone(),
            index: i,
            gpu: plan.cells[i as usize].train.device == lakefish_schemas::train::DeviceChoice::Cuda,
        };
        let (state, _, error) = ensure(ctx, cell_job(&plan.id, s.attempt, i), || {
            JobSpec::ExperimentCell(task)
        })?;
        if state.ended_without_result() {
            return Err(JobError::Failed(format!(
                "cell {i} ({}): {}",
                plan.cells[i as usize].label,
                error.unwrap_or_else(|| "failed".into())
            )));
        }
        if state == JobState::Succeeded && read_cell(ctx, &plan.id, i)?.is_none() {
            return Err(JobError::Failed(format!(
                "cell {i} ({}): its job succeeded but wrote no cell-{i:03}.json",
                plan.cells[i as usize].label
            )));
        }
    }
    s.cells_done = cells.len();
    if cells.len() < plan.cells.len() {
        return Ok(());
    }
    s.state = ExperimentState::Rating;
    let some: Vec<Option<CellResult>> = cells.iter().cloned().map(Some).collect();
    let (players, anchor) = players(plan, &some);
    let sides = sides(plan, &cells, &players);
    let mut results = Vec::new();
    for (a, b) in pairings(plan, players.len(), anchor) {
        if sides[a] == sides[b] {
            results.push(no_match(a, b));
            continue;
        }
        // A match counted as ended at an earlier look is not read again every second.
        if let Some(done) = s
            .pairings
            .iter()
            .find(|p| p.a == a && p.b == b && p.done && p.sprt.is_some())
        {
            results.push(done.clone());
            continue;
        }
        let spec = match_spec(plan, &sides[a], &sides[b]);
        let (state, result, error) = ensure(ctx, pairing_job(&plan.id, s.attempt, a, b), || {
            JobSpec::Sprt(spec)
        })?;
        if state.ended_without_result() {
            return Err(JobError::Failed(format!(
                "the match {} – {}: {}",
                players[a],
                players[b],
                error.unwrap_or_else(|| "failed".into())
            )));
        }
        let sprt = result
            .as_ref()
            .and_then(|r| r["sprt"].as_str())
            .and_then(|id| lakefish_schemas::names::SprtId::new(id).ok());
        let Some(sprt) = sprt else {
            results.push(PairingResult {
                done: false,
                ..no_match(a, b)
            });
            continue;
        };
        match ctx.block_on(crate::sprt::status(&ctx.lake, &sprt))? {
            Some(st) => {
                if st.state == SprtState::Running
                    && let Some(e) = crate::sprt::failed_batch(ctx, &sprt, st.batches)?
                {
                    return Err(JobError::Failed(format!(
                        "the match {} – {} (sprt {sprt}): {e}",
                        players[a], players[b]
                    )));
                }
                results.push(counted(a, b, &st));
            }
            None => results.push(PairingResult {
                sprt: Some(sprt),
                done: false,
                ..no_match(a, b)
            }),
        }
    }
    s.players = players.clone();
    s.anchor = anchor;
    if results.iter().all(|p| p.done) {
        *s = finish(
            ctx,
            plan,
            cells,
            players,
            anchor,
            results,
            (false, s.attempt),
        )?;
    } else {
        s.pairings = results;
    }
    Ok(())
}

/// Advances every experiment that has not ended (the scheduler's sweep).
pub fn drive(ctx: &JobContext) -> Result<(), JobError> {
    let mut first_error = None;
    for s in ctx.block_on(list(&ctx.lake))? {
        // A local run drives itself.
        if s.state.is_final() || s.local {
            continue;
        }
        if let Err(e) = advance(ctx, &s.id) {
            tracing::warn!(experiment = %s.id, "advancing: {e}");
            first_error.get_or_insert(e);
        }
    }
    first_error.map_or(Ok(()), Err)
}

impl crate::Job for ExperimentSpec {
    fn run(
        &self,
        _: lakefish_schemas::JobKind,
        ctx: &JobContext,
        _: &JobId,
    ) -> Result<serde_json::Value, JobError> {
        if ctx.is_queued() {
            submit(ctx, self)
        } else {
            Ok(serde_json::to_value(run_here(ctx, self)?)?)
        }
    }
}

impl crate::Job for ExperimentTask {
    fn run(
        &self,
        _: lakefish_schemas::JobKind,
        ctx: &JobContext,
        _: &JobId,
    ) -> Result<serde_json::Value, JobError> {
        self.validate().map_err(JobError::Payload)?;
        let plan = read_plan(ctx, &self.experiment)?
            .ok_or_else(|| JobError::NotFound(format!("experiment {}", self.experiment)))?;
        Ok(serde_json::to_value(run_cell(ctx, &plan, self.index)?)?)
    }
}
