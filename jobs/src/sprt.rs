//! SPRT tests: plan (resolve nets, read the book), play batches of colour-reversed game
//! pairs (in-process or fanned out over the queue), and count them the way fishtest does.
//!
//! Determinism is what makes the queue safe: games are node-limited, so a batch re-run after
//! a worker died writes the same file, and counts come only from batch files, taken over the
//! consecutive batches from 0. A batch is never counted twice, and the first prefix whose LLR
//! leaves the bounds decides the test, whatever order the batches finished in.

use lakefish_engine::book::Book;
use lakefish_engine::matchplay::{MatchConfig, Player, Termination, play_pair};
use lakefish_engine::random_games::SplitMix;
use lakefish_engine::sprt::{
    Pentanomial, SprtBounds, SprtDecision, elo_estimate, llr_logistic, llr_normalized,
};
use lakefish_lake::catalog::{CatalogEntry, CatalogKind, CatalogQuery};
use lakefish_schemas::engines::SideRequest;
use lakefish_schemas::sprt::{EloSummary, Incidents, SPRT_PREFIX, SprtSide, parse_tc};
use lakefish_schemas::{
    JobId, JobSpec, Progress, SprtBatch, SprtPlan, SprtSpec, SprtState, SprtStatus, SprtTask,
};
use shakmaty::Chess;

use crate::{JobContext, JobError, Lake};
use lakefish_schemas::names::SprtId;

fn plan_key(id: &str) -> String {
    format!("{SPRT_PREFIX}/{id}/test.json")
}
fn book_key(id: &str) -> String {
    format!("{SPRT_PREFIX}/{id}/book.epd")
}
fn batch_key(id: &str, index: u64) -> String {
    format!("{SPRT_PREFIX}/{id}/batches/batch-{index:06}.json")
}
fn result_key(id: &str) -> String {
    format!("{SPRT_PREFIX}/{id}/result.json")
}
fn pgn_key(id: &str) -> String {
    format!("{SPRT_PREFIX}/{id}/games.pgn")
}

/// A side with `best` resolved now (see [`crate::engines::resolve_side`]).
pub(crate) async fn resolve_side(
    lake: &Lake,
    requested: &SideRequest,
) -> Result<SprtSide, JobError> {
    crate::engines::resolve_side(lake, requested).await
}

/// The largest opening book read (books are parsed whole, in the API process too).
pub const MAX_BOOK_BYTES: u64 = 64 << 20;

/// Reads and parses the book named in the spec (a local path or `lake:<key>`).
fn read_book(ctx: &JobContext, spec: &SprtSpec) -> Result<Book, JobError> {
    read_book_at(ctx, &spec.book)
}

/// Reads and parses a book (a local path or `lake:<key>`); the error names it.
pub fn read_book_at(ctx: &JobContext, book: &str) -> Result<Book, JobError> {
    let input = lakefish_lake::input::Input::open(ctx, book)?;
    if input.len() > MAX_BOOK_BYTES {
        return Err(JobError::TooLarge {
            input: book.to_string(),
            max: MAX_BOOK_BYTES,
        });
    }
    let bytes = input.read_at(0, input.len() as usize)?;
    Book::parse(book, &bytes).map_err(|e| JobError::Payload(e.to_string()))
}

/// Plans a test: resolves both sides and the book, and writes `test.json` and `book.epd`.
/// The id hashes the spec and the resolved nets, so the same request finds the same test.
pub fn plan(ctx: &JobContext, spec: &SprtSpec) -> Result<SprtPlan, JobError> {
    spec.validate().map_err(JobError::Payload)?;
    let bounds =
        SprtBounds::new(spec.alpha, spec.beta).map_err(|e| JobError::Payload(e.to_string()))?;
    let new = ctx.block_on(resolve_side(&ctx.lake, &spec.new))?;
    let base = ctx.block_on(resolve_side(&ctx.lake, &spec.base))?;
    if new.name == base.name {
        return Err(JobError::Payload(format!(
            "new and base are the same evaluation ({})",
            new.name
        )));
    }
    let book = read_book(ctx, spec)?;
    let epd = book.to_epd();
    // How many batches run at once changes nothing in the result, so not the test either.
    let mut same = spec.clone();
    same.concurrency = 0;
    // A side given as fields is the same test as its text form.
    same.new = SideRequest::Text(spec.new.to_string());
    same.base = SideRequest::Text(spec.base.to_string());
    let book_sha = crate::nets::sha256_hex(epd.as_bytes());
    let identity =
        serde_json::json!({"spec": same, "new": new.name, "base": base.name, "book": book_sha});
    let id = lakefish_schemas::names::SprtId::new(&format!(
        "sprt-{}",
        &crate::nets::sha256_hex(identity.to_string().as_bytes())[..12]
    ))
    .expect("sprt- and hex digits make a name");
    if let Some(existing) = ctx.block_on(read_plan(&ctx.lake, &id))? {
        return Ok(existing);
    }
    let plan = SprtPlan {
        id: id.clone(),
        spec: spec.clone(),
        new,
        base,
        openings: book.positions.len(),
        lower: bounds.lower,
        upper: bounds.upper,
        created: lakefish_lake::records::now(),
    };
    ctx.block_on(ctx.lake.put(&book_key(&id), epd))?;
    let json = serde_json::to_vec_pretty(&plan).expect("serializable");
    ctx.block_on(ctx.lake.put(&plan_key(&id), json))?;
    ctx.block_on(index_status(&ctx.lake, &summarize(&plan, &[]).0))?;
    Ok(plan)
}

/// Records a test's state in the catalogue: when planned, after each batch, once decided.
pub async fn index_status(lake: &Lake, s: &SprtStatus) -> Result<(), JobError> {
    // Newer counts replace older ones; an ending replaces any count, however many batches
    // a late `running` entry had counted.
    let rank = if s.state == SprtState::Running {
        2 * s.batches as i64
    } else {
        2 * s.spec.batches() as i64 + 1
    };
    let entry = CatalogEntry::of(CatalogKind::Sprt, &s.id, &s.created, s)
        .with_state(s.state.as_str())
        .with_links([s.new.name.clone(), s.base.name.clone()])
        .with_rank(rank)
        .with_weight(s.games as i64);
    lake.index(entry).await
}

pub async fn read_plan(lake: &Lake, id: &SprtId) -> Result<Option<SprtPlan>, JobError> {
    lake.get_json(&plan_key(id), "sprt test").await
}

/// How the test's games are played.
fn match_config(spec: &SprtSpec) -> MatchConfig {
    let clock = spec
        .tc
        .as_deref()
        .map(|tc| parse_tc(tc).expect("validated"));
    MatchConfig {
        nodes: if clock.is_some() {
            None
        } else {
            Some(spec.nodes.unwrap_or(lakefish_schemas::sprt::DEFAULT_NODES))
        },
        clock,
        time_margin_ms: spec.time_margin_ms,
        ..MatchConfig::default()
    }
}

/// The opening of pair `pair`: the book in an order shuffled by the seed, cycled.
fn opening(book: &[Chess], seed: u64, pair: u64) -> Chess {
    let n = book.len() as u64;
    let round = pair / n;
    // A fresh permutation per pass over the book, so long tests do not repeat pairs in order.
    let mut order: Vec<u64> = (0..n).collect();
    let mut rng = SplitMix(seed ^ round.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    for i in (1..order.len()).rev() {
        order.swap(i, rng.below(i as u64 + 1) as usize);
    }
    book[order[(pair % n) as usize] as usize].clone()
}

/// What one worker needs to play batches of a test.
struct Arena {
    plan: SprtPlan,
    book: Vec<Chess>,
    new: Player,
    base: Player,
    config: MatchConfig,
}

fn arena(ctx: &JobContext, plan: &SprtPlan) -> Result<Arena, JobError> {
    let epd = ctx
        .block_on(ctx.lake.get(&book_key(&plan.id)))?
        .ok_or_else(|| JobError::Corrupt {
            what: "sprt book",
            key: book_key(&plan.id),
            reason: "missing".into(),
        })?;
    let book = Book::parse("book.epd", &epd).map_err(|e| JobError::Corrupt {
        what: "sprt book",
        key: book_key(&plan.id),
        reason: e.to_string(),
    })?;
    let new = ctx.block_on(crate::engines::player(&ctx.lake, &plan.new))?;
    let base = ctx.block_on(crate::engines::player(&ctx.lake, &plan.base))?;
    Ok(Arena {
        config: match_config(&plan.spec),
        plan: plan.clone(),
        book: book.positions,
        new,
        base,
    })
}

/// Plays batch `index` on `threads` threads (pairs are independent) and returns it.
fn play_batch(arena: &Arena, index: u64, threads: usize) -> SprtBatch {
    let spec = &arena.plan.spec;
    let first = index * spec.batch_pairs as u64;
    let last = (first + spec.batch_pairs as u64).min(spec.max_pairs);
    let pairs: Vec<u64> = (first..last).collect();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results = std::sync::Mutex::new(vec![None; pairs.len()]);
    std::thread::scope(|s| {
        for _ in 0..threads.max(1).min(pairs.len()) {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(&pair) = pairs.get(i) else { break };
                    let open = opening(&arena.book, spec.seed, pair);
                    let r = play_pair(&arena.new, &arena.base, &open, &arena.config);
                    results.lock().expect("results")[i] = Some(r);
                }
            });
        }
    });
    let mut batch = SprtBatch {
        index,
        first_pair: first,
        wdl: [0; 3],
        penta: [0; 5],
        pgn: String::new(),
        incidents: [Incidents::default(); 2],
    };
    for (i, r) in results
        .into_inner()
        .expect("results")
        .into_iter()
        .enumerate()
    {
        let r = r.expect("every pair played");
        let pair = first + i as u64;
        let (w, d, l) = r.wdl();
        batch.wdl[0] += w;
        batch.wdl[1] += d;
        batch.wdl[2] += l;
        batch.penta[r.bin()] += 1;
        for (g, game) in r.games.iter().enumerate() {
            // `new` is White in the first game of a pair; the side that faulted lost.
            if game.termination.is_fault() {
                let white_lost = game.result == "0-1";
                let new_lost = (g == 0) == white_lost;
                count_incident(
                    &mut batch.incidents[usize::from(!new_lost)],
                    game.termination,
                );
            }
            let event = format!("lakefish sprt {}", arena.plan.id);
            batch
                .pgn
                .push_str(&game.to_pgn(&event, &(pair + 1).to_string()));
        }
    }
    batch
}

fn count_incident(counts: &mut Incidents, t: Termination) {
    match t {
        Termination::IllegalMove => counts.illegal_moves += 1,
        Termination::TimeForfeit => counts.time_forfeits += 1,
        Termination::Crash => counts.crashes += 1,
        Termination::Stall => counts.stalls += 1,
        Termination::Unresponsive => counts.unresponsive += 1,
        _ => {}
    }
}

/// Plays and stores batch `index` unless it is already stored.
fn ensure_batch(ctx: &JobContext, arena: &Arena, index: u64) -> Result<bool, JobError> {
    let key = batch_key(&arena.plan.id, index);
    if ctx.block_on(ctx.lake.size(&key))?.is_some() {
        return Ok(false);
    }
    let batch = play_batch(arena, index, ctx.threads);
    let json = serde_json::to_vec(&batch).expect("serializable");
    ctx.block_on(ctx.lake.put(&key, json))?;
    Ok(true)
}

/// The test's state from its stored batches (or its result once decided).
pub async fn status(lake: &Lake, id: &SprtId) -> Result<Option<SprtStatus>, JobError> {
    if let Some(done) = lake
        .get_json::<SprtStatus>(&result_key(id), "sprt result")
        .await?
    {
        return Ok(Some(done.labelled()));
    }
    let Some(plan) = read_plan(lake, id).await? else {
        return Ok(None);
    };
    let batches = consecutive_batches(lake, &plan).await?;
    Ok(Some(summarize(&plan, &batches).0))
}

/// Batches 0, 1, 2, ... while they exist.
async fn consecutive_batches(lake: &Lake, plan: &SprtPlan) -> Result<Vec<SprtBatch>, JobError> {
    let mut out = Vec::new();
    for index in 0..plan.spec.batches() {
        match lake
            .get_json::<SprtBatch>(&batch_key(&plan.id, index), "sprt batch")
            .await?
        {
            Some(b) => out.push(b),
            None => break,
        }
    }
    Ok(out)
}

fn llr(plan: &SprtPlan, penta: Pentanomial) -> f64 {
    if penta.pairs() == 0 {
        return 0.0;
    }
    let (e0, e1) = (plan.spec.elo0, plan.spec.elo1);
    let r = if plan.spec.model == "logistic" {
        llr_logistic(penta, e0, e1)
    } else {
        llr_normalized(penta, e0, e1)
    };
    r.unwrap_or(0.0)
}

/// Counts over `batches` up to the first that decides the test; the status and how many
/// batches it used.
fn summarize(plan: &SprtPlan, batches: &[SprtBatch]) -> (SprtStatus, usize) {
    let bounds = SprtBounds {
        lower: plan.lower,
        upper: plan.upper,
    };
    let (mut wdl, mut penta) = ([0u64; 3], [0u64; 5]);
    let mut incidents = [Incidents::default(); 2];
    let mut history = Vec::new();
    let mut state = SprtState::Running;
    let mut used = 0;
    for b in batches {
        for (total, n) in wdl.iter_mut().zip(b.wdl) {
            *total += n;
        }
        for (total, n) in penta.iter_mut().zip(b.penta) {
            *total += n;
        }
        incidents[0].add(&b.incidents[0]);
        incidents[1].add(&b.incidents[1]);
        used += 1;
        let value = llr(plan, Pentanomial(penta));
        history.push(value);
        state = match bounds.decide(value) {
            _ if plan.spec.fixed_length => SprtState::Running,
            SprtDecision::AcceptH1 => SprtState::Accepted,
            SprtDecision::AcceptH0 => SprtState::Rejected,
            SprtDecision::Continue => SprtState::Running,
        };
        if state != SprtState::Running {
            break;
        }
    }
    if state == SprtState::Running && used as u64 == plan.spec.batches() {
        state = SprtState::Inconclusive;
    }
    let elo = elo_estimate(Pentanomial(penta)).ok().map(|e| EloSummary {
        elo: e.elo,
        elo_error: e.elo_error,
        nelo: e.nelo,
        nelo_error: e.nelo_error,
        los: e.los,
    });
    let status = SprtStatus {
        id: plan.id.clone(),
        state,
        new: plan.new.clone(),
        base: plan.base.clone(),
        elo0: plan.spec.elo0,
        elo1: plan.spec.elo1,
        model: plan.spec.model.clone(),
        llr: history.last().copied().unwrap_or(0.0),
        lower: plan.lower,
        upper: plan.upper,
        wins: wdl[0],
        draws: wdl[1],
        losses: wdl[2],
        penta,
        games: 2 * penta.iter().sum::<u64>(),
        batches: used as u64,
        llr_history: history,
        elo,
        new_incidents: incidents[0],
        base_incidents: incidents[1],
        spec: plan.spec.clone(),
        created: plan.created.clone(),
        conditions: String::new(),
        on_the_clock: false,
        finished: None,
        stopped: None,
    }
    .labelled();
    (status, used)
}

/// After a batch: recount; once decided, write `games.pgn` and then `result.json`.
fn advance(ctx: &JobContext, plan: &SprtPlan) -> Result<SprtStatus, JobError> {
    let batches = ctx.block_on(consecutive_batches(&ctx.lake, plan))?;
    let (mut status, used) = summarize(plan, &batches);
    ctx.progress.report(&Progress {
        stage: format!(
            "LLR {:.2} in ({:.2}, {:.2}), W/D/L {}/{}/{}",
            status.llr, status.lower, status.upper, status.wins, status.draws, status.losses
        ),
        done: status.games,
        total: Some(2 * plan.spec.max_pairs),
        unit: "games".into(),
        rows: 0,
    });
    if let Some(done) = decided(ctx, &plan.id)? {
        // Stopped (or decided by another batch) meanwhile: that result stands.
        ctx.block_on(index_status(&ctx.lake, &done))?;
        return Ok(done);
    }
    if status.state != SprtState::Running {
        status.finished = Some(lakefish_lake::records::now());
        status = ctx
            .block_on(end_test(&ctx.lake, &status, &batches[..used]))?
            .0;
    }
    ctx.block_on(index_status(&ctx.lake, &status))?;
    // A stop that landed between the check above and this index wins the index back.
    if status.state == SprtState::Running
        && let Some(done) = decided(ctx, &plan.id)?
    {
        ctx.block_on(index_status(&ctx.lake, &done))?;
        return Ok(done);
    }
    Ok(status)
}

/// Ends a test with `status` unless another ending (a decision, a stop) was written first:
/// the result is created only if absent, then its games are written. Returns the ending that
/// stands and whether it is this one.
async fn end_test(
    lake: &Lake,
    status: &SprtStatus,
    batches: &[SprtBatch],
) -> Result<(SprtStatus, bool), JobError> {
    let json = serde_json::to_vec_pretty(status).expect("serializable");
    if lake.put_if_absent(&result_key(&status.id), json).await? {
        let pgn: String = batches.iter().map(|b| b.pgn.as_str()).collect();
        lake.put(&pgn_key(&status.id), pgn).await?;
        return Ok((status.clone(), true));
    }
    let stood = lake
        .get_json::<SprtStatus>(&result_key(&status.id), "sprt result")
        .await?
        .ok_or_else(|| JobError::Retry(format!("sprt test {}: its result", status.id)))?;
    Ok((stood.labelled(), false))
}

/// Stops a running test on behalf of `by`: its counted games so far become its result (state
/// `stopped`), batches in flight finish without queueing more, and nothing is counted after.
/// A test that already ended is a conflict, and nothing changes.
pub async fn stop(lake: &Lake, id: &SprtId, by: &str) -> Result<SprtStatus, JobError> {
    let plan = read_plan(lake, id)
        .await?
        .ok_or_else(|| JobError::NotFound(format!("sprt test {id} not found")))?;
    if let Some(done) = lake
        .get_json::<SprtStatus>(&result_key(id), "sprt result")
        .await?
    {
        return Err(JobError::Conflict(format!(
            "sprt test {id} already ended ({}); only a running test can be stopped",
            done.state.as_str()
        )));
    }
    let batches = consecutive_batches(lake, &plan).await?;
    let (mut status, used) = summarize(&plan, &batches);
    let at = lakefish_lake::records::now();
    status.finished = Some(at.clone());
    if status.state == SprtState::Running {
        status.state = SprtState::Stopped;
        status.stopped = Some(lakefish_schemas::Requested {
            by: by.to_string(),
            at,
        });
    }
    // Its counted batches may have decided it already (a batch stored, its count not yet
    // written): that decision is its ending, not the stop.
    let (stood, ours) = end_test(lake, &status, &batches[..used]).await?;
    index_status(lake, &stood).await?;
    if !ours || stood.state != SprtState::Stopped {
        return Err(JobError::Conflict(format!(
            "sprt test {id} already ended ({}); only a running test can be stopped",
            stood.state.as_str()
        )));
    }
    Ok(stood)
}

fn decided(ctx: &JobContext, id: &str) -> Result<Option<SprtStatus>, JobError> {
    ctx.block_on(
        ctx.lake
            .get_json::<SprtStatus>(&result_key(id), "sprt result"),
    )
}

/// Queued, an SPRT fans out as batches of game pairs; in-process it plays here.
impl crate::Job for SprtSpec {
    fn run(
        &self,
        _: lakefish_schemas::JobKind,
        ctx: &JobContext,
        _: &lakefish_schemas::JobId,
    ) -> Result<serde_json::Value, JobError> {
        if ctx.is_queued() {
            fan_out(ctx, self)
        } else {
            Ok(serde_json::to_value(run_here(ctx, self)?)?)
        }
    }
}

impl crate::Job for lakefish_schemas::SprtTask {
    fn run(
        &self,
        _: lakefish_schemas::JobKind,
        ctx: &JobContext,
        _: &lakefish_schemas::JobId,
    ) -> Result<serde_json::Value, JobError> {
        batch_task(ctx, self)
    }
}

/// Runs a whole test in this process, batch after batch, each on all the job's threads.
pub fn run_here(ctx: &JobContext, spec: &SprtSpec) -> Result<SprtStatus, JobError> {
    let plan = plan(ctx, spec)?;
    if let Some(done) = decided(ctx, &plan.id)? {
        ctx.block_on(index_status(&ctx.lake, &done))?;
        return Ok(done);
    }
    let arena = arena(ctx, &plan)?;
    for index in 0..plan.spec.batches() {
        if let Err(cancelled) = ctx.check_cancelled() {
            // Its job was cancelled: the test ends stopped, with the games it counted.
            let _ = ctx.block_on(stop(&ctx.lake, &plan.id, "a cancelled job"));
            return Err(cancelled);
        }
        ensure_batch(ctx, &arena, index)?;
        let status = advance(ctx, &plan)?;
        if status.state != SprtState::Running {
            return Ok(status);
        }
    }
    advance(ctx, &plan)
}

fn batch_id(id: &str, index: u64) -> JobId {
    JobId::derived(&format!("{id}/batch/{index}"))
}

/// The error of a failed batch among the next `concurrency` after the `counted` ones: a test
/// whose batch failed for good never decides.
pub fn failed_batch(
    ctx: &JobContext,
    id: &SprtId,
    counted: u64,
) -> Result<Option<String>, JobError> {
    let Some(plan) = ctx.block_on(read_plan(&ctx.lake, id))? else {
        return Ok(None);
    };
    let store = &ctx.jobs;
    for index in counted..counted + plan.spec.concurrency as u64 {
        if let Some(rec) = ctx.block_on(store.get(&batch_id(id, index)))?
            && rec.state.ended_without_result()
        {
            return Ok(Some(format!(
                "batch {index}: {}",
                rec.error.unwrap_or_default()
            )));
        }
    }
    Ok(None)
}

/// Plans the test and queues its first `concurrency` batches; each batch queues the next.
pub fn fan_out(ctx: &JobContext, spec: &SprtSpec) -> Result<serde_json::Value, JobError> {
    let plan = plan(ctx, spec)?;
    let submit = ctx.submitter("an sprt's fan-out")?;
    if let Some(done) = decided(ctx, &plan.id)? {
        ctx.block_on(index_status(&ctx.lake, &done))?;
    } else {
        for index in 0..(plan.spec.concurrency as u64).min(plan.spec.batches()) {
            let task = SprtTask {
                sprt: plan.id.clone(),
                index,
            };
            submit.submit(batch_id(&plan.id, index), JobSpec::SprtBatch(task))?;
        }
    }
    Ok(serde_json::json!({"sprt": plan.id, "new": plan.new.name, "base": plan.base.name}))
}

/// A queued batch: plays it (unless stored), recounts, and queues the batch `concurrency`
/// further on while the test is undecided.
pub fn batch_task(ctx: &JobContext, task: &SprtTask) -> Result<serde_json::Value, JobError> {
    task.validate().map_err(JobError::Payload)?;
    if let Some(done) = decided(ctx, &task.sprt)? {
        ctx.block_on(index_status(&ctx.lake, &done))?;
        return Ok(
            serde_json::json!({"sprt": task.sprt, "batch": task.index, "skipped": "decided", "state": done.state}),
        );
    }
    let plan = ctx
        .block_on(read_plan(&ctx.lake, &task.sprt))?
        .ok_or_else(|| JobError::NotFound(format!("sprt test {}", task.sprt)))?;
    let arena = arena(ctx, &plan)?;
    let played = ensure_batch(ctx, &arena, task.index)?;
    let status = advance(ctx, &plan)?;
    let next = task.index + plan.spec.concurrency as u64;
    if status.state == SprtState::Running && next < plan.spec.batches() {
        let submit = ctx.submitter("an sprt batch")?;
        let t = SprtTask {
            sprt: plan.id.clone(),
            index: next,
        };
        submit.submit(batch_id(&plan.id, next), JobSpec::SprtBatch(t))?;
    }
    Ok(serde_json::json!({
        "sprt": plan.id, "batch": task.index, "played": played,
        "state": status.state, "llr": status.llr, "games": status.games,
    }))
}

/// The name a test records for a side that a filter names: a registered net is stored with
/// its `.nnue` (`nn-0123456789ab.nnue`), so `nn-0123456789ab` finds it too; engines and
/// `classical` are as given.
pub fn evaluation_filter(name: &str) -> String {
    if name.starts_with("nn-") && !name.ends_with(".nnue") && !name.contains(['+', ',']) {
        format!("{name}.nnue")
    } else {
        name.to_string()
    }
}

/// All tests, newest first, optionally those involving `net` or in `state` (from the
/// catalogue when the lake has one).
pub async fn list(
    lake: &Lake,
    net: Option<&str>,
    state: Option<SprtState>,
) -> Result<Vec<SprtStatus>, JobError> {
    let net = net.map(evaluation_filter);
    let net = net.as_deref();
    if let Some(catalog) = lake.catalog() {
        let mut query = CatalogQuery::all(CatalogKind::Sprt);
        query.state = state.map(|s| s.as_str().to_string());
        query.link = net.map(str::to_string);
        let all: Vec<SprtStatus> = catalog.decode_all(query).await?;
        return Ok(all.into_iter().map(SprtStatus::labelled).collect());
    }
    let mut out = Vec::new();
    for dir in lake.list_dirs(SPRT_PREFIX).await? {
        let id = dir.trim_end_matches('/').rsplit('/').next().unwrap_or("");
        let Ok(id) = SprtId::new(id) else { continue };
        if let Some(s) = status(lake, &id).await? {
            let involves = |n: &str| s.new.name == n || s.base.name == n;
            if net.is_none_or(involves) && state.is_none_or(|st| s.state == st) {
                out.push(s);
            }
        }
    }
    out.sort_by(|a, b| (&b.created, &b.id).cmp(&(&a.created, &a.id)));
    Ok(out)
}

/// The games played so far (all counted games once decided), as PGN.
pub async fn pgn(lake: &Lake, id: &SprtId) -> Result<Option<String>, JobError> {
    Ok(status_and_pgn(lake, id).await?.map(|(_, pgn)| pgn))
}

/// A test's status and its counted games as PGN, reading its batches once: an ended test's
/// stored result and games, a running one's batches up to the last one counted.
pub async fn status_and_pgn(
    lake: &Lake,
    id: &SprtId,
) -> Result<Option<(SprtStatus, String)>, JobError> {
    let ended = lake
        .get_json::<SprtStatus>(&result_key(id), "sprt result")
        .await?;
    if let Some(done) = &ended
        && let Some(bytes) = lake.get(&pgn_key(id)).await?
    {
        let pgn = String::from_utf8_lossy(&bytes).into_owned();
        return Ok(Some((done.clone().labelled(), pgn)));
    }
    let Some(plan) = read_plan(lake, id).await? else {
        return Ok(None);
    };
    let batches = consecutive_batches(lake, &plan).await?;
    if let Some(done) = ended {
        // Ended a moment ago: its games are still being written; they are its batches.
        let n = (done.batches as usize).min(batches.len());
        let pgn = batches[..n].iter().map(|b| b.pgn.as_str()).collect();
        return Ok(Some((done.labelled(), pgn)));
    }
    let (status, used) = summarize(&plan, &batches);
    let pgn = batches[..used].iter().map(|b| b.pgn.as_str()).collect();
    Ok(Some((status, pgn)))
}

/// LLR, bounds and Elo from counts alone (`lakefish sprt calc`, `GET /v1/sprt/calc`).
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
pub struct Calc {
    pub games: u64,
    pub model: String,
    pub elo0: f64,
    pub elo1: f64,
    pub llr: f64,
    pub lower: f64,
    pub upper: f64,
    /// `accept_h1`, `accept_h0` or `continue`.
    pub decision: &'static str,
    pub elo: f64,
    pub elo_error: f64,
    pub nelo: f64,
    pub nelo_error: f64,
    pub los: f64,
}

/// `counts` is `penta` (LL,LD,DD,WD,WW) or `wdl` (W,D,L) as comma-separated integers.
pub fn calc(
    kind: &str,
    counts: &str,
    elo0: f64,
    elo1: f64,
    model: &str,
    alpha: f64,
    beta: f64,
) -> Result<Calc, String> {
    use lakefish_engine::sprt::{Counts, Wdl};
    let numbers: Vec<u64> = counts
        .split(',')
        .map(|v| {
            v.trim()
                .parse::<u64>()
                .map_err(|_| format!("{kind}: {v:?} is not a non-negative integer"))
        })
        .collect::<Result<_, _>>()?;
    let counts: Counts = match (kind, numbers.as_slice()) {
        ("penta", &[a, b, c, d, e]) => Pentanomial([a, b, c, d, e]).into(),
        ("wdl", &[w, d, l]) => Wdl::new(w, d, l).into(),
        ("penta", _) => return Err("penta needs five counts: LL,LD,DD,WD,WW".into()),
        ("wdl", _) => return Err("wdl needs three counts: W,D,L".into()),
        _ => return Err(format!("unknown count kind {kind:?}")),
    };
    if elo1 <= elo0 {
        return Err(format!("elo1 ({elo1}) must be greater than elo0 ({elo0})"));
    }
    let bounds = SprtBounds::new(alpha, beta).map_err(|e| e.to_string())?;
    let llr = match model {
        "normalized" => llr_normalized(counts, elo0, elo1),
        "logistic" => llr_logistic(counts, elo0, elo1),
        other => return Err(format!("model {other:?}: expected normalized or logistic")),
    }
    .map_err(|e| e.to_string())?;
    let e = elo_estimate(counts).map_err(|e| e.to_string())?;
    Ok(Calc {
        games: counts.games(),
        model: model.to_string(),
        elo0,
        elo1,
        llr,
        lower: bounds.lower,
        upper: bounds.upper,
        decision: match bounds.decide(llr) {
            SprtDecision::AcceptH1 => "accept_h1",
            SprtDecision::AcceptH0 => "accept_h0",
            SprtDecision::Continue => "continue",
        },
        elo: e.elo,
        elo_error: e.elo_error,
        nelo: e.nelo,
        nelo_error: e.nelo_error,
        los: e.los,
    })
}

/// One game of a test's PGN as its headers tell it, with the game's own text.
#[derive(Debug, Clone, PartialEq)]
pub struct GameRow {
    pub round: String,
    pub white: String,
    pub black: String,
    pub result: String,
    /// How it ended: the detail the last move's comment gives ("adjudication: draw",
    /// "checkmate", an engine's fault), else the `Termination` tag.
    pub termination: String,
    /// Half-moves played (`PlyCount`), when the header is there.
    pub plies: Option<u32>,
    /// The game's PGN: headers and moves.
    pub text: String,
}

/// The games of a PGN text in order: each starts at an `[Event ` line. A header that is not
/// `[Key "Value"]` is skipped, a missing one left empty: the rows show what is there.
pub fn games_of(pgn: &str) -> Vec<GameRow> {
    let mut starts: Vec<usize> = Vec::new();
    let mut at = 0;
    for line in pgn.split_inclusive('\n') {
        if line.starts_with("[Event ") {
            starts.push(at);
        }
        at += line.len();
    }
    starts
        .iter()
        .enumerate()
        .map(|(i, &from)| {
            let to = starts.get(i + 1).copied().unwrap_or(pgn.len());
            let text = &pgn[from..to];
            let header = |key: &str| {
                text.lines()
                    .take_while(|l| l.starts_with('['))
                    .find_map(|l| {
                        let rest = l.strip_prefix('[')?.strip_prefix(key)?;
                        let value = rest.strip_prefix(" \"")?.strip_suffix("\"]")?;
                        Some(value.to_string())
                    })
                    .unwrap_or_default()
            };
            let detail = ending_of(text);
            GameRow {
                round: header("Round"),
                white: header("White"),
                black: header("Black"),
                result: header("Result"),
                termination: detail.unwrap_or_else(|| header("Termination")),
                plies: header("PlyCount").parse().ok(),
                text: text.trim_end().to_string() + "\n",
            }
        })
        .collect()
}

/// How a game ended, from the comment on its last move as lakefish and fastchess write it
/// (`{+0.31/14 0.212s, adjudication: draw}`; a game without moves: `{the reason}`).
fn ending_of(game: &str) -> Option<String> {
    let at = game.rfind('{')?;
    let comment = game[at + 1..].split('}').next()?;
    let comment = comment.split_whitespace().collect::<Vec<_>>().join(" ");
    // A move's own note (`+0.31/14 0.212s`, `0.212s`) says nothing of the ending.
    let is_note = |c: &str| {
        c.rsplit(' ')
            .next()
            .and_then(|t| t.strip_suffix('s'))
            .is_some_and(|t| t.parse::<f64>().is_ok())
    };
    match comment.split_once(", ") {
        Some((note, ending)) if is_note(note) => Some(ending.to_string()),
        _ if is_note(&comment) => None,
        _ => Some(comment),
    }
}

#[cfg(test)]
mod tests {
    use super::{ending_of, games_of};

    #[test]
    fn the_ending_is_read_from_the_last_comment() {
        let g = "1. e4 {+0.10/3 0.010s} e5 {-0.05/2 0.020s, adjudication: resign} 1-0";
        assert_eq!(ending_of(g).as_deref(), Some("adjudication: resign"));
        assert_eq!(ending_of("1. e4 {+0.10/3 0.010s} 1-0"), None);
        assert_eq!(
            ending_of("{sf crashed, it said: x} 0-1").as_deref(),
            Some("sf crashed, it said: x")
        );
        assert_eq!(
            ending_of("1. e4 {0.002s, sf crashed, it said: x} 0-1").as_deref(),
            Some("sf crashed, it said: x")
        );
        assert_eq!(ending_of("1. e4 1-0"), None);
    }

    #[test]
    fn a_pgn_splits_into_its_games_with_their_headers() {
        let pgn = "[Event \"t\"]\n[Round \"1.1\"]\n[White \"a\"]\n[Black \"b\"]\n[Result \"1-0\"]\n\
                   [Termination \"adjudication: resign\"]\n[PlyCount \"3\"]\n\n1. e4 e5 2. Qh5 1-0\n\n\
                   [Event \"t\"]\n[Round \"1.2\"]\n[White \"b\"]\n[Black \"a\"]\n[Result \"1/2-1/2\"]\n\
                   [PlyCount nonsense]\n\n1. d4 1/2-1/2\n";
        let games = games_of(pgn);
        assert_eq!(games.len(), 2);
        assert_eq!(
            (
                games[0].round.as_str(),
                games[0].white.as_str(),
                games[0].result.as_str()
            ),
            ("1.1", "a", "1-0")
        );
        assert_eq!(games[0].termination, "adjudication: resign");
        assert_eq!(games[0].plies, Some(3));
        assert!(games[0].text.starts_with("[Event \"t\"]\n[Round \"1.1\"]"));
        assert!(
            games[0].text.ends_with("2. Qh5 1-0\n"),
            "{:?}",
            games[0].text
        );
        // A malformed header is left out, not guessed.
        assert_eq!(games[1].plies, None);
        assert_eq!(games[1].termination, "");
        assert_eq!(games[1].result, "1/2-1/2");
        assert!(games_of("").is_empty());
        assert!(games_of("no games here\n").is_empty());
    }
}
