//! The metadata store: job records in a database, SQLite (a file, the embedded default) or
//! PostgreSQL (deployments on many machines), behind [`RecordBackend`]. One SQL text serves
//! both through sqlx's `Any` driver (`$N` parameters, `ON CONFLICT` upserts, row values).
//!
//! Invariants:
//! - Every change of a record is a compare-and-swap on its `revision` column, decided again
//!   when another writer came first: a final state is never overwritten by a stale writer, an
//!   attempt is counted once (the rules themselves are in `JobStore`).
//! - `job_tally` (counts and run times by kind and state) changes in the same transaction as
//!   the record it counts, so `/metrics` and the overview read a few rows, never the history.
//! - Lists page by `(created, id)`, newest first, from an index: no request scans the table.
//! - The schema is versioned; a database newer than this binary is refused, never written.
//! - The catalogue (`catalog.rs`) is derived from the lake and can be rebuilt from it.

use lakefish_lake::catalog::CatalogHandle;
use lakefish_lake::records::{
    JobCursor, JobPage, JobQuery, JobStore, JobTally, LakeRecords, RecordBackend, RecordChange,
    run_seconds,
};
use lakefish_lake::{JobError, Lake};
use lakefish_schemas::{JobId, JobKind, JobRecord, JobState};
use sqlx::any::{AnyPoolOptions, AnyRow};
use sqlx::{AnyPool, Row};
use std::time::Duration;

mod catalog;

/// Migrations, in order; `MIGRATIONS.len()` is the schema version this binary writes. Each
/// statement must be safe to run twice (two processes starting at once both migrate).
const MIGRATIONS: &[&[&str]] = &[
    &[
        "CREATE TABLE IF NOT EXISTS jobs (
        id TEXT PRIMARY KEY,
        kind TEXT NOT NULL,
        state TEXT NOT NULL,
        created TEXT NOT NULL,
        run_ms BIGINT,
        revision BIGINT NOT NULL,
        record TEXT NOT NULL
    )",
        "CREATE INDEX IF NOT EXISTS jobs_newest ON jobs (created, id)",
        "CREATE INDEX IF NOT EXISTS jobs_state_newest ON jobs (state, created, id)",
        "CREATE INDEX IF NOT EXISTS jobs_kind_newest ON jobs (kind, created, id)",
        "CREATE INDEX IF NOT EXISTS jobs_state_kind_newest ON jobs (state, kind, created, id)",
        "CREATE TABLE IF NOT EXISTS job_tally (
        kind TEXT NOT NULL,
        state TEXT NOT NULL,
        count BIGINT NOT NULL,
        run_ms BIGINT NOT NULL,
        timed BIGINT NOT NULL,
        PRIMARY KEY (kind, state)
    )",
    ],
    &[
        // 2: the catalogue, an index of what the lake holds (lakefish_lake::catalog).
        "CREATE TABLE IF NOT EXISTS catalog (
        kind TEXT NOT NULL,
        name TEXT NOT NULL,
        created TEXT NOT NULL,
        state TEXT,
        rank BIGINT NOT NULL,
        weight BIGINT NOT NULL,
        summary TEXT NOT NULL,
        PRIMARY KEY (kind, name)
    )",
        "CREATE INDEX IF NOT EXISTS catalog_newest ON catalog (kind, created, name)",
        "CREATE INDEX IF NOT EXISTS catalog_state_newest ON catalog (kind, state, created, name)",
        // Covers the totals `/metrics` asks for, so they never read the summaries.
        "CREATE INDEX IF NOT EXISTS catalog_totals ON catalog (kind, state, weight)",
        "CREATE TABLE IF NOT EXISTS catalog_links (
        kind TEXT NOT NULL,
        link TEXT NOT NULL,
        name TEXT NOT NULL,
        created TEXT NOT NULL,
        PRIMARY KEY (kind, link, name)
    )",
        "CREATE INDEX IF NOT EXISTS catalog_links_newest ON catalog_links (kind, link, created, name)",
    ],
];

/// The schema version this binary reads and writes.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// Rows in one statement of a bulk insert (6 parameters each, well under either database's limit).
pub const BULK_ROWS: usize = 100;

/// Tries of one compare-and-swap before giving up (each lost try means another writer won).
const CAS_TRIES: usize = 1000;

/// Which database, from `--metastore` / `LAKEFISH_METASTORE`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MetastoreSpec {
    /// `sqlite:PATH`: a file, created if missing.
    Sqlite(String),
    /// `postgres://USER@HOST:PORT/DB` (or `postgresql://`).
    Postgres(String),
    /// `lake`: records as `jobs/<id>.json` in the lake, as lakefish kept them before the
    /// metastore (every list reads them all; for lakes not yet moved over).
    Lake,
}

impl MetastoreSpec {
    /// How the lake's catalogue marker names this store: a SQLite file by its absolute path
    /// (so an in-process command run elsewhere finds it), PostgreSQL without its password.
    pub fn locator(&self) -> String {
        match self {
            MetastoreSpec::Sqlite(path) => {
                let abs = std::path::absolute(path).unwrap_or_else(|_| path.into());
                format!("sqlite:{}", abs.display())
            }
            other => other.describe(),
        }
    }

    pub fn parse(s: &str) -> Result<Self, String> {
        if s == "lake" {
            return Ok(MetastoreSpec::Lake);
        }
        if let Some(path) = s.strip_prefix("sqlite:") {
            let path = path.strip_prefix("//").unwrap_or(path);
            if path.is_empty() {
                return Err("metastore \"sqlite:\": sqlite:PATH needs a file path".to_string());
            }
            return Ok(MetastoreSpec::Sqlite(path.to_string()));
        }
        if s.starts_with("postgres://") || s.starts_with("postgresql://") {
            return Ok(MetastoreSpec::Postgres(s.to_string()));
        }
        Err(format!(
            "metastore {:?}: use sqlite:PATH (a file, the default beside the queue file), postgres://USER@HOST:PORT/DB or lake",
            redact(s)
        ))
    }

    /// Where it is, without a password.
    pub fn describe(&self) -> String {
        match self {
            MetastoreSpec::Sqlite(path) => format!("sqlite:{path}"),
            MetastoreSpec::Postgres(url) => redact(url),
            MetastoreSpec::Lake => "lake".into(),
        }
    }
}

/// What `--metastore` opened: the job records, and the catalogue when it is a database.
pub struct Opened {
    pub jobs: JobStore,
    pub catalog: Option<CatalogHandle>,
    /// The catalogue was created just now and is empty: fill it from the lake
    /// (`lakefish_jobs::catalog::rebuild`) before serving lists from it.
    pub catalog_is_new: bool,
}

/// The job records `spec` names, ready to use (schema created or migrated). A database
/// created just now first receives the records an older lakefish kept in the lake, so an
/// upgrade keeps its history (and a pipeline run in flight finds the jobs it already ran).
pub async fn open_job_store(spec: &MetastoreSpec, lake: &Lake) -> Result<JobStore, JobError> {
    Ok(open(spec, lake).await?.jobs)
}

/// The metastore `spec` names: job records and, in a database, the catalogue.
pub async fn open(spec: &MetastoreSpec, lake: &Lake) -> Result<Opened, JobError> {
    if *spec == MetastoreSpec::Lake {
        return Ok(Opened {
            jobs: JobStore::new(lake.clone()),
            catalog: None,
            catalog_is_new: false,
        });
    }
    let store = SqlRecords::open(spec).await?;
    if store.created_now() {
        let copied = store.import_lake_records(lake).await?;
        if copied > 0 {
            tracing::info!(
                metastore = spec.describe(),
                copied,
                "copied the job records kept in the lake into the new metastore"
            );
        }
    }
    let store = std::sync::Arc::new(store);
    Ok(Opened {
        jobs: JobStore::with_backend(store.clone()),
        catalog_is_new: store.catalog_created_now(),
        catalog: Some(CatalogHandle(store)),
    })
}

/// Hides a password in a URL: the user part (`scheme://user:secret@host` →
/// `scheme://***@host`) and any query string (`?password=...` → `?***`).
pub fn redact(url: &str) -> String {
    let url = match url.split_once('?') {
        Some((base, _)) => format!("{base}?***"),
        None => url.to_string(),
    };
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => format!("{}://***{}", &url[..s], &url[at..]),
        _ => url,
    }
}

/// Job records in SQLite or PostgreSQL.
#[derive(Clone, Debug)]
pub struct SqlRecords {
    pool: AnyPool,
    spec: MetastoreSpec,
    /// This process created the schema (the database was empty).
    created_now: bool,
    /// This process created the catalogue tables (empty until a rebuild fills them).
    catalog_created_now: bool,
}

/// Database errors name the store and what was being done; they are transient (the server
/// restarting, a lock held too long): the job or request is tried again later.
fn db(spec: &MetastoreSpec, what: &str, e: sqlx::Error) -> JobError {
    JobError::Retry(format!("metastore {} {what}: {e}", spec.describe()))
}

fn corrupt(id: &str, e: impl std::fmt::Display) -> JobError {
    JobError::Corrupt {
        what: "job record",
        key: format!("metastore jobs/{id}"),
        reason: e.to_string(),
    }
}

impl SqlRecords {
    /// Connects, creates the schema on an empty database and applies missing migrations.
    /// A database whose schema is newer than this binary's is refused.
    pub async fn open(spec: &MetastoreSpec) -> Result<Self, JobError> {
        sqlx::any::install_default_drivers();
        let url = match spec {
            MetastoreSpec::Sqlite(path) => {
                if let Some(dir) = std::path::Path::new(path).parent()
                    && !dir.as_os_str().is_empty()
                {
                    std::fs::create_dir_all(dir).map_err(|e| JobError::Input {
                        input: spec.describe(),
                        reason: format!("cannot create its directory: {e}"),
                    })?;
                }
                format!("sqlite://{path}?mode=rwc")
            }
            MetastoreSpec::Postgres(url) => url.clone(),
            MetastoreSpec::Lake => {
                return Err(JobError::Internal(
                    "SqlRecords::open given the lake; use open_job_store".into(),
                ));
            }
        };
        let pool = AnyPoolOptions::new()
            .max_connections(8)
            .acquire_timeout(Duration::from_secs(10))
            .connect(&url)
            .await
            .map_err(|e| db(spec, "connect", e))?;
        let mut store = SqlRecords {
            pool,
            spec: spec.clone(),
            created_now: false,
            catalog_created_now: false,
        };
        let found = store.migrate().await?;
        store.created_now = found == 0;
        store.catalog_created_now = found < catalog::CATALOG_SINCE;
        Ok(store)
    }

    pub fn spec(&self) -> &MetastoreSpec {
        &self.spec
    }

    /// Did opening it create the schema (an empty database)?
    pub fn created_now(&self) -> bool {
        self.created_now
    }

    /// Did opening it create the catalogue (a new database, or one from before it)? Then
    /// it is empty, and the caller fills it from the lake (`lakefish_jobs::catalog::rebuild`).
    pub fn catalog_created_now(&self) -> bool {
        self.catalog_created_now
    }

    /// A write transaction. SQLite's takes the write lock at once (`IMMEDIATE`): a deferred
    /// one that read first could fail to upgrade without waiting when another writer commits.
    async fn begin(&self) -> Result<sqlx::Transaction<'static, sqlx::Any>, sqlx::Error> {
        match self.spec {
            MetastoreSpec::Sqlite(_) => self.pool.begin_with("BEGIN IMMEDIATE").await,
            _ => self.pool.begin().await,
        }
    }

    /// Sets the stored schema version, to test how a newer database is refused.
    #[doc(hidden)]
    pub async fn set_schema_version_for_tests(&self, version: i64) {
        sqlx::query("UPDATE lakefish_schema SET version = $1 WHERE id = 1")
            .bind(version)
            .execute(&self.pool)
            .await
            .expect("setting the schema version");
    }

    /// Creates or migrates the schema in one transaction, one process at a time (PostgreSQL:
    /// an advisory lock; SQLite: the write lock `BEGIN IMMEDIATE` takes). Returns the version
    /// found (0: the database was empty).
    async fn migrate(&self) -> Result<i64, JobError> {
        let spec = &self.spec;
        let fail = |e| db(spec, "migrating", e);
        if let MetastoreSpec::Sqlite(_) = spec {
            // Readers never wait for the writer; the setting stays with the file.
            sqlx::query("PRAGMA journal_mode=WAL")
                .execute(&self.pool)
                .await
                .map_err(|e| db(spec, "setting WAL", e))?;
        }
        let mut tx = self.begin().await.map_err(fail)?;
        if let MetastoreSpec::Postgres(_) = spec {
            // Any constant: it only has to be the same in every lakefish process.
            sqlx::query("SELECT pg_advisory_xact_lock(727466)")
                .execute(&mut *tx)
                .await
                .map_err(fail)?;
        }
        for sql in [
            "CREATE TABLE IF NOT EXISTS lakefish_schema (id BIGINT PRIMARY KEY, version BIGINT NOT NULL)",
            "INSERT INTO lakefish_schema (id, version) VALUES (1, 0) ON CONFLICT (id) DO NOTHING",
        ] {
            sqlx::query(sql).execute(&mut *tx).await.map_err(fail)?;
        }
        let found: i64 = sqlx::query("SELECT version FROM lakefish_schema WHERE id = 1")
            .fetch_one(&mut *tx)
            .await
            .and_then(|row| row.try_get(0))
            .map_err(fail)?;
        if found > SCHEMA_VERSION {
            return Err(JobError::Failed(format!(
                "metastore {} has schema version {found}, newer than this lakefish knows ({SCHEMA_VERSION}): upgrade lakefish (nothing was changed)",
                spec.describe()
            )));
        }
        for (i, statements) in MIGRATIONS.iter().enumerate().skip(found as usize) {
            let version = i as i64 + 1;
            for sql in statements.iter().copied() {
                sqlx::query(sql)
                    .execute(&mut *tx)
                    .await
                    .map_err(|e| db(spec, &format!("migration {version}"), e))?;
            }
            sqlx::query("UPDATE lakefish_schema SET version = $1 WHERE id = 1")
                .bind(version)
                .execute(&mut *tx)
                .await
                .map_err(|e| db(spec, &format!("migration {version}"), e))?;
            tracing::info!(metastore = spec.describe(), version, "schema migrated");
        }
        tx.commit().await.map_err(fail)?;
        Ok(found)
    }

    pub async fn schema_version(&self) -> Result<i64, JobError> {
        let row = sqlx::query("SELECT version FROM lakefish_schema WHERE id = 1")
            .fetch_one(&self.pool)
            .await
            .map_err(|e| db(&self.spec, "reading the schema version", e))?;
        row.try_get::<i64, _>(0)
            .map_err(|e| db(&self.spec, "reading the schema version", e))
    }

    /// Copies job records an older lakefish left in the lake (`jobs/*.json`) into this
    /// store; records already here are kept. Returns how many were copied.
    pub async fn import_lake_records(&self, lake: &Lake) -> Result<usize, JobError> {
        let records = LakeRecords::new(lake.clone()).scan(usize::MAX).await?;
        self.insert_many(&records).await
    }

    /// Inserts the records not stored yet (bulk loads: an import from a lake, the bench),
    /// with their tally, [`BULK_ROWS`] to a statement. Returns how many were new.
    pub async fn insert_many(&self, records: &[JobRecord]) -> Result<usize, JobError> {
        let spec = &self.spec;
        let fail = |e| db(spec, "inserting job records", e);
        let mut seen = std::collections::HashSet::new();
        let records: Vec<&JobRecord> = records
            .iter()
            .filter(|r| seen.insert(r.id.as_str()))
            .collect();
        let mut inserted = 0;
        for chunk in records.chunks(BULK_ROWS * 10) {
            let mut tx = self.begin().await.map_err(fail)?;
            let mut deltas = Vec::new();
            for rows in chunk.chunks(BULK_ROWS) {
                let values: Vec<String> = (0..rows.len())
                    .map(|r| {
                        let p = (1..=6)
                            .map(|c| format!("${}", r * 6 + c))
                            .collect::<Vec<_>>()
                            .join(", ");
                        format!("({p}, 1)")
                    })
                    .collect();
                let sql = format!(
                    "INSERT INTO jobs (id, kind, state, created, run_ms, record, revision) VALUES {}
                     ON CONFLICT (id) DO NOTHING RETURNING id",
                    values.join(", ")
                );
                // Only numbered parameters went into `sql`.
                let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
                for rec in rows {
                    q = q
                        .bind(rec.id.to_string())
                        .bind(rec.kind.as_str())
                        .bind(rec.state.as_str())
                        .bind(rec.created.clone())
                        .bind(run_seconds(rec).map(|s| (s * 1000.0).round() as i64))
                        .bind(serde_json::to_string(rec)?);
                }
                let new: std::collections::HashSet<String> = q
                    .fetch_all(&mut *tx)
                    .await
                    .map_err(fail)?
                    .iter()
                    .map(|row| row.try_get::<String, _>(0))
                    .collect::<Result<_, _>>()
                    .map_err(fail)?;
                for rec in rows.iter().copied().filter(|r| new.contains(r.id.as_str())) {
                    deltas.push(Delta::of(rec, 1));
                }
                inserted += new.len();
            }
            apply_deltas(&mut tx, deltas).await.map_err(fail)?;
            tx.commit().await.map_err(fail)?;
        }
        Ok(inserted)
    }

    /// The stored record and its revision.
    async fn get_revision(&self, id: &JobId) -> Result<Option<(JobRecord, i64)>, JobError> {
        let row = sqlx::query("SELECT record, revision FROM jobs WHERE id = $1")
            .bind(id.as_str())
            .fetch_optional(&self.pool)
            .await
            .map_err(|e| db(&self.spec, "reading a job record", e))?;
        let Some(row) = row else { return Ok(None) };
        let text: String = row
            .try_get(0)
            .map_err(|e| db(&self.spec, "reading a job record", e))?;
        let revision: i64 = row
            .try_get(1)
            .map_err(|e| db(&self.spec, "reading a job record", e))?;
        let rec = serde_json::from_str(&text).map_err(|e| corrupt(id.as_str(), e))?;
        Ok(Some((rec, revision)))
    }

    /// Writes `next` if the record is still at `revision` (absent when `None`), with the
    /// tally moved from `old` to `next`, in one transaction. `false`: another writer came first.
    async fn swap(
        &self,
        old: Option<(&JobRecord, i64)>,
        next: &JobRecord,
    ) -> Result<bool, JobError> {
        let spec = &self.spec;
        let fail = |e| db(spec, "writing a job record", e);
        let text = serde_json::to_string(next)?;
        let run_ms = run_seconds(next).map(|s| (s * 1000.0).round() as i64);
        let mut tx = self.begin().await.map_err(fail)?;
        let written = match old {
            Some((_, revision)) => sqlx::query(
                "UPDATE jobs SET kind = $1, state = $2, created = $3, run_ms = $4, record = $5, revision = revision + 1
                 WHERE id = $6 AND revision = $7",
            )
            .bind(next.kind.as_str())
            .bind(next.state.as_str())
            .bind(next.created.as_str())
            .bind(run_ms)
            .bind(text.as_str())
            .bind(next.id.as_str())
            .bind(revision)
            .execute(&mut *tx)
            .await
            .map_err(fail)?,
            None => sqlx::query(
                "INSERT INTO jobs (id, kind, state, created, run_ms, record, revision)
                 VALUES ($1, $2, $3, $4, $5, $6, 1) ON CONFLICT (id) DO NOTHING",
            )
            .bind(next.id.as_str())
            .bind(next.kind.as_str())
            .bind(next.state.as_str())
            .bind(next.created.as_str())
            .bind(run_ms)
            .bind(text.as_str())
            .execute(&mut *tx)
            .await
            .map_err(fail)?,
        };
        if written.rows_affected() != 1 {
            tx.rollback().await.map_err(fail)?;
            return Ok(false);
        }
        let mut deltas = Vec::new();
        if let Some((rec, _)) = old {
            deltas.push(Delta::of(rec, -1));
        }
        deltas.push(Delta::of(next, 1));
        apply_deltas(&mut tx, deltas).await.map_err(fail)?;
        tx.commit().await.map_err(fail)?;
        Ok(true)
    }
}

/// A change of one `job_tally` row.
#[derive(Debug, PartialEq)]
struct Delta {
    kind: &'static str,
    state: &'static str,
    count: i64,
    run_ms: i64,
    timed: i64,
}

impl Delta {
    fn of(rec: &JobRecord, sign: i64) -> Delta {
        let ms = run_seconds(rec).map(|s| (s * 1000.0).round() as i64);
        Delta {
            kind: rec.kind.as_str(),
            state: rec.state.as_str(),
            count: sign,
            run_ms: sign * ms.unwrap_or(0),
            timed: sign * ms.is_some() as i64,
        }
    }
}

/// Applies tally changes in key order (so two transactions never wait on each other's rows
/// in a cycle), netting out changes of the same row (a progress update changes nothing).
async fn apply_deltas(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    mut deltas: Vec<Delta>,
) -> Result<(), sqlx::Error> {
    deltas.sort_by(|a, b| (a.kind, a.state).cmp(&(b.kind, b.state)));
    let mut merged: Vec<Delta> = Vec::new();
    for d in deltas {
        match merged.last_mut() {
            Some(m) if m.kind == d.kind && m.state == d.state => {
                m.count += d.count;
                m.run_ms += d.run_ms;
                m.timed += d.timed;
            }
            _ => merged.push(d),
        }
    }
    for d in merged {
        if d.count == 0 && d.run_ms == 0 && d.timed == 0 {
            continue;
        }
        sqlx::query(
            "INSERT INTO job_tally (kind, state, count, run_ms, timed) VALUES ($1, $2, $3, $4, $5)
             ON CONFLICT (kind, state) DO UPDATE SET count = job_tally.count + excluded.count,
                 run_ms = job_tally.run_ms + excluded.run_ms, timed = job_tally.timed + excluded.timed",
        )
        .bind(d.kind)
        .bind(d.state)
        .bind(d.count)
        .bind(d.run_ms)
        .bind(d.timed)
        .execute(&mut **tx)
        .await?;
    }
    Ok(())
}

fn record_of(spec: &MetastoreSpec, row: &AnyRow) -> Result<JobRecord, JobError> {
    let text: String = row
        .try_get(0)
        .map_err(|e| db(spec, "reading a job record", e))?;
    let id: String = row
        .try_get(1)
        .map_err(|e| db(spec, "reading a job record", e))?;
    serde_json::from_str(&text).map_err(|e| corrupt(&id, e))
}

#[async_trait::async_trait]
impl RecordBackend for SqlRecords {
    fn describe(&self) -> String {
        self.spec.describe()
    }

    async fn get(&self, id: &JobId) -> Result<Option<JobRecord>, JobError> {
        Ok(self.get_revision(id).await?.map(|(rec, _)| rec))
    }

    async fn update(
        &self,
        id: &JobId,
        change: &mut RecordChange<'_>,
    ) -> Result<Option<JobRecord>, JobError> {
        for _ in 0..CAS_TRIES {
            let stored = self.get_revision(id).await?;
            let current = stored.as_ref().map(|(rec, _)| rec.clone());
            let Some(next) = change(current.clone()) else {
                return Ok(current);
            };
            if next.id != *id {
                return Err(JobError::Internal(format!(
                    "a change of job record {id} returned the record of {}",
                    next.id
                )));
            }
            if self
                .swap(stored.as_ref().map(|(r, v)| (r, *v)), &next)
                .await?
            {
                return Ok(Some(next));
            }
        }
        Err(JobError::Retry(format!(
            "job record {id} kept changing under {CAS_TRIES} writes"
        )))
    }

    async fn delete(&self, id: &JobId) -> Result<(), JobError> {
        let spec = &self.spec;
        let fail = |e| db(spec, "deleting a job record", e);
        for _ in 0..CAS_TRIES {
            let Some((rec, revision)) = self.get_revision(id).await? else {
                return Ok(());
            };
            let mut tx = self.begin().await.map_err(fail)?;
            let gone = sqlx::query("DELETE FROM jobs WHERE id = $1 AND revision = $2")
                .bind(id.as_str())
                .bind(revision)
                .execute(&mut *tx)
                .await
                .map_err(fail)?;
            if gone.rows_affected() == 1 {
                apply_deltas(&mut tx, vec![Delta::of(&rec, -1)])
                    .await
                    .map_err(fail)?;
                tx.commit().await.map_err(fail)?;
                return Ok(());
            }
            tx.rollback().await.map_err(fail)?;
        }
        Err(JobError::Retry(format!(
            "job record {id} kept changing under {CAS_TRIES} deletes"
        )))
    }

    async fn page(&self, query: &JobQuery) -> Result<JobPage, JobError> {
        // Built from the filters present, so each shape of query uses its own index.
        let mut sql = String::from("SELECT record, id FROM jobs");
        let mut clauses = Vec::new();
        let mut n = 0;
        let mut param = || {
            n += 1;
            format!("${n}")
        };
        if query.state.is_some() {
            clauses.push(format!("state = {}", param()));
        }
        if query.kind.is_some() {
            clauses.push(format!("kind = {}", param()));
        }
        let internal: Vec<&str> = lakefish_schemas::JobKind::ALL
            .iter()
            .filter(|k| query.submitted_only && k.is_internal())
            .map(|k| k.as_str())
            .collect();
        if !internal.is_empty() {
            let marks: Vec<String> = internal.iter().map(|_| param()).collect();
            clauses.push(format!("kind NOT IN ({})", marks.join(", ")));
        }
        if query.after.is_some() {
            let (c, i) = (param(), param());
            // A row value, so both databases seek the index to the cursor instead of
            // filtering every newer row on the way there.
            clauses.push(format!("(created, id) < ({c}, {i})"));
        }
        if !clauses.is_empty() {
            sql.push_str(" WHERE ");
            sql.push_str(&clauses.join(" AND "));
        }
        let limit = query.limit.clamp(1, 100_000);
        sql.push_str(&format!(
            " ORDER BY created DESC, id DESC LIMIT {}",
            limit + 1
        ));
        // Only fixed fragments and numbered parameters went into `sql`.
        let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
        if let Some(state) = query.state {
            q = q.bind(state.as_str());
        }
        if let Some(kind) = &query.kind {
            q = q.bind(kind.as_str());
        }
        for kind in internal {
            q = q.bind(kind);
        }
        if let Some(after) = &query.after {
            q = q.bind(after.created.as_str()).bind(after.id.as_str());
        }
        let rows = q
            .fetch_all(&self.pool)
            .await
            .map_err(|e| db(&self.spec, "listing job records", e))?;
        let more = rows.len() > limit;
        let jobs = rows
            .iter()
            .take(limit)
            .map(|row| record_of(&self.spec, row))
            .collect::<Result<Vec<_>, _>>()?;
        let next = if more {
            jobs.last().map(JobCursor::after)
        } else {
            None
        };
        Ok(JobPage { jobs, next })
    }

    async fn tally(&self) -> Result<Vec<JobTally>, JobError> {
        let spec = &self.spec;
        let fail = |e| db(spec, "reading the job tally", e);
        let rows = sqlx::query(
            "SELECT kind, state, count, run_ms, timed FROM job_tally WHERE count > 0 ORDER BY kind, state",
        )
        .fetch_all(&self.pool)
        .await
        .map_err(fail)?;
        let mut out = Vec::new();
        for row in rows {
            let state: String = row.try_get(1).map_err(fail)?;
            let state = JobState::parse(&state).ok_or_else(|| JobError::Corrupt {
                what: "job tally",
                key: format!("metastore {}", spec.describe()),
                reason: format!("unknown state {state:?}"),
            })?;
            let kind: String = row.try_get(0).map_err(fail)?;
            // A kind this build does not know (written by a newer one): left out, not fatal.
            let Some(kind) = JobKind::parse(&kind) else {
                tracing::warn!("job tally: kind {kind:?} is unknown to this lakefish; left out");
                continue;
            };
            out.push(JobTally {
                kind,
                state,
                count: row.try_get::<i64, _>(2).map_err(fail)?.max(0) as u64,
                seconds: row.try_get::<i64, _>(3).map_err(fail)? as f64 / 1000.0,
                timed: row.try_get::<i64, _>(4).map_err(fail)?.max(0) as u64,
            });
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_and_hide_passwords() {
        assert_eq!(
            MetastoreSpec::parse("sqlite:/var/lib/lakefish/meta.sqlite").unwrap(),
            MetastoreSpec::Sqlite("/var/lib/lakefish/meta.sqlite".into())
        );
        assert_eq!(
            MetastoreSpec::parse("sqlite://rel/meta.sqlite").unwrap(),
            MetastoreSpec::Sqlite("rel/meta.sqlite".into())
        );
        let pg = MetastoreSpec::parse("postgres://lf:secret@db:5432/lakefish").unwrap();
        assert_eq!(pg.describe(), "postgres://***@db:5432/lakefish");
        let pg = MetastoreSpec::parse("postgresql://db/lakefish?user=lf&password=secret").unwrap();
        assert_eq!(pg.describe(), "postgresql://db/lakefish?***");
        // A mistyped scheme is refused without echoing the password.
        let err = MetastoreSpec::parse("postgress://lf:secret@db/x").unwrap_err();
        assert!(!err.contains("secret") && err.contains("@db/x"), "{err}");
        assert_eq!(MetastoreSpec::parse("lake").unwrap(), MetastoreSpec::Lake);
        for bad in ["sqlite:", "mysql://x", "meta.sqlite", "", "Lake"] {
            let err = MetastoreSpec::parse(bad).unwrap_err();
            assert!(err.contains("sqlite:PATH"), "{bad}: {err}");
        }
    }
}
