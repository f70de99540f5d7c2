//! Capability routing on both queue backends: a job that needs a GPU (training with device
//! `cuda`) waits for a GPU worker and says so; CPU jobs submitted after it never wait behind
//! it; a GPU worker takes it. The trainer is a stand-in (no GPU here): what is tested is who
//! gets which job.

use lakefish_jobs::{JobContext, JobError, Trainer};
use lakefish_lake::Lake;
use lakefish_lake::input::InputPolicy;
use lakefish_lake::records::JobStore;
use lakefish_schemas::{JobId, JobRecord, JobSpec, JobState, QueuedJob};
use lakefish_services::queue::{WAITING_FOR_GPU, new_record};
use lakefish_services::{Lane, Queue, WorkerSpec};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Says which device it was asked for instead of training.
struct StandInTrainer;

impl Trainer for StandInTrainer {
    fn train(
        &self,
        _: &JobContext,
        _: &JobId,
        spec: &lakefish_schemas::TrainSpec,
    ) -> Result<serde_json::Value, JobError> {
        Ok(serde_json::json!({ "device": spec.device.as_str() }))
    }

    fn quantize(
        &self,
        _: &JobContext,
        _: &lakefish_schemas::QuantizeSpec,
    ) -> Result<serde_json::Value, JobError> {
        Err(JobError::Failed("not in this test".into()))
    }
}

fn train(device: &str) -> JobSpec {
    JobSpec::from_request(
        format!(r#"{{"kind":"train","spec":{{"shuffle":"sh-1","device":"{device}"}}}}"#).as_bytes(),
    )
    .unwrap()
}

async fn submit(queue: &Queue, jobs: &JobStore, spec: &JobSpec) -> JobId {
    let id = JobId::new();
    jobs.put(&new_record(id.clone(), spec)).await.unwrap();
    queue.push(QueuedJob::new(id.clone(), spec)).await.unwrap();
    id
}

async fn wait_final(jobs: &JobStore, id: &JobId) -> JobRecord {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let rec = jobs.get(id).await.unwrap().unwrap();
        if rec.state.is_final() {
            return rec;
        }
        assert!(Instant::now() < deadline, "job {id} never ended: {rec:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn worker(name: &str, gpu: bool) -> WorkerSpec {
    WorkerSpec {
        name: name.into(),
        concurrency: 2,
        threads: 1,
        gpu,
    }
}

fn spawn_worker(
    queue: &Queue,
    (lake, jobs): (&Lake, &JobStore),
    trainer: Arc<dyn Trainer>,
    spec: WorkerSpec,
) -> tokio::task::JoinHandle<anyhow::Result<()>> {
    let (q, lake, jobs) = (queue.clone(), lake.clone(), jobs.clone());
    tokio::spawn(async move {
        q.run_workers((lake, jobs), spec, Some(trainer), InputPolicy::Unconfined)
            .await
    })
}

async fn routes_by_capability(queue: Queue) {
    let lake = Lake::in_memory();
    let jobs = JobStore::new(lake.clone());
    assert_eq!(Lane::of(&train("cuda")), Lane::Gpu);
    assert_eq!(Lane::of(&train("auto")), Lane::Any);

    let on_gpu = submit(&queue, &jobs, &train("cuda")).await;
    let waiting = jobs.get(&on_gpu).await.unwrap().unwrap();
    assert_eq!(waiting.progress.stage, WAITING_FOR_GPU);
    let on_cpu = submit(&queue, &jobs, &train("cpu")).await;
    let anywhere = submit(&queue, &jobs, &train("auto")).await;

    let trainer: Arc<dyn Trainer> = Arc::new(StandInTrainer);
    let cpu = spawn_worker(
        &queue,
        (&lake, &jobs),
        trainer.clone(),
        worker("cpu-only", false),
    );
    // The CPU jobs, submitted after the GPU one, run at once on the CPU worker...
    for id in [&on_cpu, &anywhere] {
        let rec = wait_final(&jobs, id).await;
        assert_eq!(rec.state, JobState::Succeeded, "{rec:?}");
        assert_eq!(rec.worker.as_deref(), Some("cpu-only"));
    }
    // ... which never takes the GPU one: it stays queued and says why.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let still = jobs.get(&on_gpu).await.unwrap().unwrap();
    assert_eq!(still.state, JobState::Queued, "{still:?}");
    assert_eq!(still.attempts, 0);
    assert_eq!(still.progress.stage, WAITING_FOR_GPU);

    let gpu = spawn_worker(&queue, (&lake, &jobs), trainer, worker("gpu-box", true));
    let done = wait_final(&jobs, &on_gpu).await;
    assert_eq!(done.state, JobState::Succeeded, "{done:?}");
    assert_eq!(done.worker.as_deref(), Some("gpu-box"));
    assert_eq!(done.result, Some(serde_json::json!({"device": "cuda"})));
    assert_eq!(done.attempts, 1);
    assert_ne!(
        done.progress.stage, WAITING_FOR_GPU,
        "started: no longer waiting"
    );
    cpu.abort();
    gpu.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_queue_routes_gpu_jobs_to_gpu_workers_only() {
    let dir = tempfile::tempdir().unwrap();
    let queue = Queue::sqlite(dir.path().join("queue.sqlite").to_str().unwrap())
        .await
        .unwrap();
    routes_by_capability(queue).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn redis_queue_routes_gpu_jobs_to_gpu_workers_only() {
    let dir = tempfile::tempdir().unwrap();
    let (server, port) = lakefish_testkit::start_on_free_port("redis-server", |port| {
        Command::new("redis-server")
            .args(["--save", "", "--appendonly", "no", "--bind", "127.0.0.1"])
            .args(["--port", &port.to_string()])
            .current_dir(dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server not found: run `make setup`")
    });
    let _server = KillOnDrop(server);
    let queue = Queue::redis(&format!("redis://127.0.0.1:{port}"))
        .await
        .unwrap();
    routes_by_capability(queue).await;
}

/// Stops the server however the test ends (a panic included).
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
