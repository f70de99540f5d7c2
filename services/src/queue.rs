//! The job queue: apalis over SQLite (embedded default, one process) or Redis (any number of
//! workers on any number of machines). The queue only carries [`QueuedJob`]s; job records
//! live in the record store (see `lakefish_lake::records`).

use apalis::prelude::*;
use apalis_redis::{Config as RedisConfig, RedisStorage};
use apalis_sqlite::{Config as SqliteConfig, SqliteConnectOptions, SqlitePool, SqliteStorage};
use lakefish_jobs::{JobError, JobSubmitter, Lake, Trainer};
use lakefish_lake::input::InputPolicy;
use lakefish_lake::records::JobStore;
use lakefish_schemas::{JobId, JobSpec, JobState, QueuedJob};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Mutex;

/// The queue's name in both backends (apalis would default to the Rust type name): jobs any
/// worker may run.
pub const QUEUE_NAME: &str = "lakefish:jobs";
/// Jobs only a worker with a GPU may run ([`JobSpec::needs_gpu`]). GPU workers take from both
/// queues, CPU workers only from [`QUEUE_NAME`]: a CUDA job never lands on a CPU worker, and a
/// CPU job never waits behind GPU-only ones.
pub const GPU_QUEUE_NAME: &str = "lakefish:jobs:gpu";

/// Which of the two queues.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lane {
    Any,
    Gpu,
}

impl Lane {
    pub fn of(spec: &JobSpec) -> Lane {
        if spec.needs_gpu() {
            Lane::Gpu
        } else {
            Lane::Any
        }
    }

    fn name(self) -> &'static str {
        match self {
            Lane::Any => QUEUE_NAME,
            Lane::Gpu => GPU_QUEUE_NAME,
        }
    }
}

/// A fresh `queued` record for `spec`; one that waits for a GPU worker says so.
pub fn new_record(id: JobId, spec: &JobSpec) -> lakefish_schemas::JobRecord {
    let mut rec = JobStore::new_record(id, spec.clone());
    if Lane::of(spec) == Lane::Gpu {
        rec.progress.stage = WAITING_FOR_GPU.into();
    }
    rec
}

/// What a record of a job no worker may take yet says (`progress.stage`).
pub const WAITING_FOR_GPU: &str =
    "waiting for a GPU worker: device cuda runs only on `lakefish worker --gpu` (or `serve --gpu`)";
/// Deliveries of one job before it stays failed (a dead worker's job counts one).
pub const MAX_ATTEMPTS: usize = 3;
/// Workers beat this often; a worker silent for `MISSED_HEARTBEATS` beats is presumed dead
/// and its jobs go back to the queue (apalis's orphan re-enqueue).
pub const HEARTBEAT: Duration = Duration::from_secs(5);
pub const MISSED_HEARTBEATS: usize = 3;
/// An idle worker looks for new jobs this often (apalis otherwise waits a heartbeat).
pub const POLL: Duration = Duration::from_millis(250);

fn sqlite_config(lane: Lane) -> SqliteConfig {
    SqliteConfig::default()
        .queue(lane.name())
        .heartbeat_interval(HEARTBEAT)
        .missed_heartbeats(MISSED_HEARTBEATS)
}

fn redis_config(lane: Lane) -> RedisConfig {
    RedisConfig::default()
        .queue(lane.name())
        .heartbeat_interval(HEARTBEAT)
        .missed_heartbeats(MISSED_HEARTBEATS)
}

#[derive(Clone)]
pub enum Queue {
    Sqlite {
        path: String,
        pool: SqlitePool,
        sink: Arc<Mutex<SqliteStorage<QueuedJob>>>,
        gpu_sink: Arc<Mutex<SqliteStorage<QueuedJob>>>,
    },
    Redis {
        url: String,
        sink: Arc<Mutex<RedisStorage<QueuedJob>>>,
        gpu_sink: Arc<Mutex<RedisStorage<QueuedJob>>>,
    },
}

impl Queue {
    /// Opens (and creates, with its tables) a SQLite queue file.
    pub async fn sqlite(path: &str) -> anyhow::Result<Queue> {
        if let Some(dir) = std::path::Path::new(path).parent()
            && !dir.as_os_str().is_empty()
        {
            std::fs::create_dir_all(dir)?;
        }
        let opts = SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(true);
        let pool = SqlitePool::connect_with(opts)
            .await
            .map_err(|e| anyhow::anyhow!("cannot open the queue database {path}: {e}"))?;
        SqliteStorage::setup(&pool)
            .await
            .map_err(|e| anyhow::anyhow!("cannot set up the queue database {path}: {e}"))?;
        Ok(Queue::Sqlite {
            path: path.to_string(),
            sink: Arc::new(Mutex::new(sqlite_storage(&pool, Lane::Any))),
            gpu_sink: Arc::new(Mutex::new(sqlite_storage(&pool, Lane::Gpu))),
            pool,
        })
    }

    pub async fn redis(url: &str) -> anyhow::Result<Queue> {
        let conn = apalis_redis::connect(url)
            .await
            .map_err(|e| anyhow::anyhow!("cannot connect to redis at {url}: {e}"))?;
        let sink =
            RedisStorage::<QueuedJob>::new(conn.clone()).with_config(redis_config(Lane::Any));
        let gpu_sink = RedisStorage::<QueuedJob>::new(conn).with_config(redis_config(Lane::Gpu));
        Ok(Queue::Redis {
            url: url.to_string(),
            sink: Arc::new(Mutex::new(sink)),
            gpu_sink: Arc::new(Mutex::new(gpu_sink)),
        })
    }

    /// Closes a SQLite queue's connections: every push afterwards fails (a server shutting
    /// down; tests of what a refused push leaves). A Redis queue is left as it is.
    pub async fn close(&self) {
        if let Queue::Sqlite { pool, .. } = self {
            pool.close().await;
        }
    }

    pub fn describe(&self) -> String {
        match self {
            Queue::Sqlite { path, .. } => format!("sqlite:{path}"),
            Queue::Redis { url, .. } => redact(url),
        }
    }

    /// Queues a job on its lane ([`Lane::of`] its spec; a payload that does not parse goes to
    /// [`Lane::Any`], whose worker records why it cannot run). A failed push is tried again for
    /// a few seconds: the first command on a connection whose server restarted fails, and the
    /// connection reconnects behind it.
    pub async fn push(&self, job: QueuedJob) -> anyhow::Result<()> {
        if let Queue::Sqlite { pool, path, .. } = self
            && pool.is_closed()
        {
            // Closed for good (shutting down): nothing to wait for.
            anyhow::bail!("the queue database {path} is closed");
        }
        let lane = job.spec().map(|s| Lane::of(&s)).unwrap_or(Lane::Any);
        let mut wait = Duration::from_millis(250);
        let mut tries = 0;
        loop {
            let task = TaskBuilder::new(job.clone())
                .max_attempts(MAX_ATTEMPTS)
                .build();
            let pushed = match self {
                Queue::Sqlite { sink, gpu_sink, .. } => {
                    if lane == Lane::Gpu { gpu_sink } else { sink }
                        .lock()
                        .await
                        .push_task(task)
                        .await
                        .map_err(anyhow::Error::from)
                }
                Queue::Redis { sink, gpu_sink, .. } => {
                    if lane == Lane::Gpu { gpu_sink } else { sink }
                        .lock()
                        .await
                        .push_task(task)
                        .await
                        .map_err(anyhow::Error::from)
                }
            };
            match pushed {
                Ok(()) => return Ok(()),
                Err(e) if tries >= 5 => return Err(e),
                Err(e) => {
                    tracing::warn!(queue = %self.describe(), "push failed: {e}; trying again in {wait:?}");
                    tokio::time::sleep(wait).await;
                    wait *= 2;
                    tries += 1;
                }
            }
        }
    }

    /// Lets blocking code (job functions, the pipeline driver) queue jobs.
    pub fn submitter(&self, jobs: JobStore) -> Arc<dyn JobSubmitter> {
        Arc::new(QueueSubmitter {
            queue: self.clone(),
            store: jobs,
            rt: tokio::runtime::Handle::current(),
        })
    }

    /// Runs `worker.concurrency` jobs at a time until ctrl-c (or the process is killed), from
    /// the [`Lane::Any`] queue and, on a GPU worker, as many again from [`Lane::Gpu`].
    /// `trainer` runs train and quantize jobs; a worker without one fails them with a reason
    /// (the binary passes `lakefish_train::LakefishTrainer`: this crate never links libtorch).
    /// `inputs` bounds the local files jobs may open (`[inputs] local_roots`).
    pub async fn run_workers(
        &self,
        (lake, jobs): (Lake, JobStore),
        worker: WorkerSpec,
        trainer: Option<Arc<dyn Trainer>>,
        inputs: InputPolicy,
    ) -> anyhow::Result<()> {
        let submitter = self.submitter(jobs.clone());
        let state = Arc::new(WorkerState {
            lake,
            jobs,
            name: worker.name.clone(),
            threads: worker.threads,
            submitter,
            trainer,
            inputs,
        });
        let any = self.run_lane(Lane::Any, &worker, state.clone());
        if worker.gpu {
            tokio::try_join!(any, self.run_lane(Lane::Gpu, &worker, state))?;
        } else {
            any.await?;
        }
        Ok(())
    }

    async fn run_lane(
        &self,
        lane: Lane,
        worker: &WorkerSpec,
        state: Arc<WorkerState>,
    ) -> anyhow::Result<()> {
        let concurrency = worker.concurrency.max(1);
        let name = match lane {
            Lane::Any => worker.name.clone(),
            Lane::Gpu => format!("{}:gpu", worker.name),
        };
        match self {
            Queue::Sqlite { pool, .. } => {
                let worker = WorkerBuilder::new(name)
                    .backend(sqlite_storage(pool, lane).poll_with_interval(POLL))
                    .data(state)
                    .concurrency(concurrency)
                    .build(handle);
                worker.run().await?;
            }
            Queue::Redis { url, .. } => {
                // A lost connection (redis-server restarted, a network blip) stops an apalis
                // worker; this one reconnects and goes on. Each incarnation registers under a
                // new name: the old one's registration stays until its heartbeats lapse, and
                // apalis re-enqueues what it had fetched but not finished.
                let mut incarnation = 0u32;
                let mut backoff = Duration::from_secs(1);
                loop {
                    let began = std::time::Instant::now();
                    let worker_name = if incarnation == 0 {
                        name.clone()
                    } else {
                        format!("{name}~{incarnation}")
                    };
                    let ran = async {
                        let conn = apalis_redis::connect(url.as_str()).await?;
                        // Fetch no more than can run: jobs left waiting in one worker's batch
                        // could run on an idle worker elsewhere (a fanned-out shuffle's tasks).
                        let storage = RedisStorage::<QueuedJob>::new(conn)
                            .with_config(redis_config(lane).batch_size(concurrency))
                            .poll_with_interval(POLL);
                        let worker = WorkerBuilder::new(worker_name)
                            .backend(storage)
                            .data(state.clone())
                            .concurrency(concurrency)
                            .build(handle);
                        worker.run().await?;
                        anyhow::Ok(())
                    }
                    .await;
                    let Err(e) = ran else { break };
                    if began.elapsed() > Duration::from_secs(60) {
                        backoff = Duration::from_secs(1);
                    }
                    tracing::warn!(
                        worker = %name,
                        queue = %redact(url),
                        "lost the queue: {e:#}; reconnecting in {backoff:?}"
                    );
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(10));
                    incarnation += 1;
                }
            }
        }
        Ok(())
    }
}

/// Who a worker process is and what it can take.
#[derive(Clone, Debug)]
pub struct WorkerSpec {
    /// Shown in job records; unique per process (apalis refuses a name it believes alive).
    pub name: String,
    /// Jobs at a time from each queue it takes from.
    pub concurrency: usize,
    /// CPU threads each job may use.
    pub threads: usize,
    /// Has a CUDA GPU (checked by the caller): takes GPU-only jobs too.
    pub gpu: bool,
}

fn sqlite_storage(pool: &SqlitePool, lane: Lane) -> SqliteStorage<QueuedJob> {
    SqliteStorage::<QueuedJob>::new(pool).with_config(sqlite_config(lane))
}

/// Hides a password in a redis URL.
fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => format!("{}://***{}", &url[..s], &url[at..]),
        _ => url.to_string(),
    }
}

struct WorkerState {
    lake: Lake,
    jobs: JobStore,
    name: String,
    threads: usize,
    submitter: Arc<dyn JobSubmitter>,
    trainer: Option<Arc<dyn Trainer>>,
    inputs: InputPolicy,
}

/// Lets running jobs queue further jobs (a shuffle's passes): the record is written first,
/// then the job is pushed, as the API does. A job that already succeeded is not queued again.
struct QueueSubmitter {
    queue: Queue,
    store: JobStore,
    rt: tokio::runtime::Handle,
}

/// The one way a job enters the queue, for the API, the fan-out of shuffles and SPRTs and
/// the pipeline driver: its record is written (queued), then the job is pushed. When the
/// push fails, the record this call wrote is deleted again, so nothing is left that no worker
/// will ever run, and the error is [`JobError::Retry`] (a 503 over HTTP; the caller may
/// submit again). A record that was there before the call is left as it was.
pub async fn submit(
    store: &JobStore,
    queue: &Queue,
    id: &JobId,
    spec: &JobSpec,
) -> Result<(), JobError> {
    let created = match store.get(id).await? {
        // The same job again after it succeeded: nothing to do.
        Some(rec) if rec.state == JobState::Succeeded => return Ok(()),
        Some(_) => false,
        None => {
            store.put(&new_record(id.clone(), spec)).await?;
            true
        }
    };
    if let Err(e) = queue.push(QueuedJob::new(id.clone(), spec)).await {
        if created && let Err(d) = store.delete(id).await {
            tracing::error!(job = %id, "the queue refused job {id} and its record could not be removed: {d}");
        }
        return Err(JobError::Retry(format!(
            "the queue did not take the job: {e}"
        )));
    }
    Ok(())
}

impl JobSubmitter for QueueSubmitter {
    fn submit(&self, id: JobId, spec: JobSpec) -> Result<(), JobError> {
        self.rt
            .block_on(submit(&self.store, &self.queue, &id, &spec))
    }
}

/// Transient failures (the lake unreachable) go back to the queue for another attempt;
/// anything else (bad input, a dataset that exists) would fail the same way again, so it is
/// aborted. The Redis backend retries failed jobs up to 25 times whatever `max_attempts`
/// says, so the attempt budget is also enforced here, from the job record.
async fn handle(
    job: QueuedJob,
    state: Data<Arc<WorkerState>>,
    attempt: Attempt,
) -> Result<(), BoxDynError> {
    let may_retry = attempt.current() < MAX_ATTEMPTS;
    let outcome = lakefish_jobs::runner::run_queued_job(
        state.lake.clone(),
        job,
        &state.name,
        state.threads,
        may_retry,
        lakefish_jobs::Hooks {
            mode: lakefish_jobs::Mode::Queued {
                submitter: state.submitter.clone(),
                records: state.jobs.clone(),
            },
            trainer: state.trainer.clone(),
            inputs: state.inputs.clone(),
        },
    )
    .await;
    match outcome {
        Ok(()) => Ok(()),
        Err(e) if e.is_transient() && may_retry => Err(Box::new(e)),
        Err(e) => Err(AbortError::new(e).into()),
    }
}
