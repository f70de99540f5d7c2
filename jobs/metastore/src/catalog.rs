//! The catalogue in SQL: `catalog` (one row per indexed thing, its summary as JSON text)
//! and `catalog_links` (the names a list filters on: an SPRT test's nets, a pipeline run's
//! pipeline), both paged newest first from an index like the job records.

use crate::{SqlRecords, db};
use lakefish_lake::JobError;
use lakefish_lake::catalog::{
    Catalog, CatalogCursor, CatalogEntry, CatalogKind, CatalogPage, CatalogQuery, CatalogTotal,
};
use sqlx::Row;
use sqlx::any::AnyRow;

/// The schema version that added the catalogue.
pub(crate) const CATALOG_SINCE: i64 = 2;

fn kind_of(s: &str) -> Option<CatalogKind> {
    CatalogKind::ALL.into_iter().find(|k| k.as_str() == s)
}

fn entry_of(store: &SqlRecords, row: &AnyRow) -> Result<CatalogEntry, JobError> {
    let fail = |e| db(&store.spec, "reading a catalogue entry", e);
    let kind: String = row.try_get("kind").map_err(fail)?;
    let name: String = row.try_get("name").map_err(fail)?;
    let summary: String = row.try_get("summary").map_err(fail)?;
    let corrupt = |reason: String| JobError::Corrupt {
        what: "catalogue entry",
        key: format!("metastore catalog/{kind}/{name}"),
        reason,
    };
    Ok(CatalogEntry {
        kind: kind_of(&kind).ok_or_else(|| corrupt("unknown kind".into()))?,
        created: row.try_get("created").map_err(fail)?,
        state: row.try_get("state").map_err(fail)?,
        rank: row.try_get("rank").map_err(fail)?,
        weight: row.try_get("weight").map_err(fail)?,
        // Links are a filter, not part of what a list shows.
        links: Vec::new(),
        summary: serde_json::from_str(&summary).map_err(|e| corrupt(e.to_string()))?,
        name,
    })
}

#[async_trait::async_trait]
impl Catalog for SqlRecords {
    fn describe(&self) -> String {
        self.spec.describe()
    }

    async fn upsert(&self, entry: &CatalogEntry) -> Result<(), JobError> {
        let fail = |e| db(&self.spec, "indexing the catalogue", e);
        let mut tx = self.begin().await.map_err(fail)?;
        // A lower rank than the stored entry's changes nothing (a writer that lost a race).
        let changed = sqlx::query(
            "INSERT INTO catalog (kind, name, created, state, rank, weight, summary)
             VALUES ($1, $2, $3, $4, $5, $6, $7)
             ON CONFLICT (kind, name) DO UPDATE SET created = excluded.created,
                state = excluded.state, rank = excluded.rank, weight = excluded.weight,
                summary = excluded.summary
             WHERE catalog.rank <= excluded.rank",
        )
        .bind(entry.kind.as_str())
        .bind(entry.name.as_str())
        .bind(entry.created.as_str())
        .bind(entry.state.as_deref())
        .bind(entry.rank)
        .bind(entry.weight)
        .bind(entry.summary.to_string())
        .execute(&mut *tx)
        .await
        .map_err(fail)?
        .rows_affected();
        if changed > 0 {
            sqlx::query("DELETE FROM catalog_links WHERE kind = $1 AND name = $2")
                .bind(entry.kind.as_str())
                .bind(entry.name.as_str())
                .execute(&mut *tx)
                .await
                .map_err(fail)?;
            for link in &entry.links {
                sqlx::query(
                    "INSERT INTO catalog_links (kind, link, name, created) VALUES ($1, $2, $3, $4)
                     ON CONFLICT (kind, link, name) DO NOTHING",
                )
                .bind(entry.kind.as_str())
                .bind(link.as_str())
                .bind(entry.name.as_str())
                .bind(entry.created.as_str())
                .execute(&mut *tx)
                .await
                .map_err(fail)?;
            }
        }
        tx.commit().await.map_err(fail)
    }

    async fn remove(&self, kind: CatalogKind, name: &str) -> Result<bool, JobError> {
        let fail = |e| db(&self.spec, "removing a catalogue entry", e);
        let mut tx = self.begin().await.map_err(fail)?;
        sqlx::query("DELETE FROM catalog_links WHERE kind = $1 AND name = $2")
            .bind(kind.as_str())
            .bind(name)
            .execute(&mut *tx)
            .await
            .map_err(fail)?;
        let gone = sqlx::query("DELETE FROM catalog WHERE kind = $1 AND name = $2")
            .bind(kind.as_str())
            .bind(name)
            .execute(&mut *tx)
            .await
            .map_err(fail)?
            .rows_affected();
        tx.commit().await.map_err(fail)?;
        Ok(gone > 0)
    }

    async fn get(&self, kind: CatalogKind, name: &str) -> Result<Option<CatalogEntry>, JobError> {
        let row = sqlx::query(
            "SELECT kind, name, created, state, rank, weight, summary FROM catalog
             WHERE kind = $1 AND name = $2",
        )
        .bind(kind.as_str())
        .bind(name)
        .fetch_optional(&self.pool)
        .await
        .map_err(|e| db(&self.spec, "reading the catalogue", e))?;
        row.map(|r| entry_of(self, &r)).transpose()
    }

    async fn page(&self, query: &CatalogQuery) -> Result<CatalogPage, JobError> {
        // Built from the filters present; the seek is a row value on the index's columns.
        let (mut sql, t) = if query.link.is_some() {
            (
                String::from(
                    "SELECT c.kind, c.name, c.created, c.state, c.rank, c.weight, c.summary
                     FROM catalog_links l JOIN catalog c ON c.kind = l.kind AND c.name = l.name
                     WHERE l.kind = $1 AND l.link = $2",
                ),
                "l",
            )
        } else {
            (
                String::from(
                    "SELECT c.kind, c.name, c.created, c.state, c.rank, c.weight, c.summary
                     FROM catalog c WHERE c.kind = $1",
                ),
                "c",
            )
        };
        let mut n = if query.link.is_some() { 2 } else { 1 };
        let mut param = || {
            n += 1;
            format!("${n}")
        };
        if query.state.is_some() {
            sql.push_str(&format!(" AND c.state = {}", param()));
        }
        if query.after.is_some() {
            let (c, i) = (param(), param());
            sql.push_str(&format!(" AND ({t}.created, {t}.name) < ({c}, {i})"));
        }
        let limit = query.limit.clamp(1, 100_000);
        sql.push_str(&format!(
            " ORDER BY {t}.created DESC, {t}.name DESC LIMIT {}",
            limit + 1
        ));
        // Only fixed fragments and numbered parameters went into `sql`.
        let mut q = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(query.kind.as_str());
        if let Some(link) = &query.link {
            q = q.bind(link.as_str());
        }
        if let Some(state) = &query.state {
            q = q.bind(state.as_str());
        }
        if let Some(after) = &query.after {
            q = q.bind(after.created.as_str()).bind(after.name.as_str());
        }
        let rows = q
            .fetch_all(&self.pool)
            .await
            .map_err(|e| db(&self.spec, "listing the catalogue", e))?;
        let more = rows.len() > limit;
        let entries = rows
            .iter()
            .take(limit)
            .map(|row| entry_of(self, row))
            .collect::<Result<Vec<_>, _>>()?;
        let next = if more {
            entries.last().map(CatalogCursor::after)
        } else {
            None
        };
        Ok(CatalogPage { entries, next })
    }

    async fn counts(&self) -> Result<Vec<(CatalogKind, u64)>, JobError> {
        let fail = |e| db(&self.spec, "counting the catalogue", e);
        let rows = sqlx::query("SELECT kind, COUNT(*) FROM catalog GROUP BY kind ORDER BY kind")
            .fetch_all(&self.pool)
            .await
            .map_err(fail)?;
        let mut out = Vec::new();
        for row in rows {
            let kind: String = row.try_get(0).map_err(fail)?;
            let count: i64 = row.try_get(1).map_err(fail)?;
            if let Some(kind) = kind_of(&kind) {
                out.push((kind, count as u64));
            }
        }
        Ok(out)
    }

    async fn totals(&self, kind: CatalogKind) -> Result<Vec<CatalogTotal>, JobError> {
        let fail = |e| db(&self.spec, "summing the catalogue", e);
        // CAST: PostgreSQL's SUM of BIGINT is NUMERIC, which the Any driver does not read.
        let rows = sqlx::query(
            "SELECT state, COUNT(*), CAST(COALESCE(SUM(weight), 0) AS BIGINT) FROM catalog
             WHERE kind = $1 GROUP BY state ORDER BY state",
        )
        .bind(kind.as_str())
        .fetch_all(&self.pool)
        .await
        .map_err(fail)?;
        let mut out = Vec::new();
        for row in rows {
            let count: i64 = row.try_get(1).map_err(fail)?;
            out.push(CatalogTotal {
                state: row.try_get(0).map_err(fail)?,
                count: count as u64,
                weight: row.try_get(2).map_err(fail)?,
            });
        }
        Ok(out)
    }
}
