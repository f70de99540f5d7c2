//! The one interface of the commands that work on the local lake or, with `--api`, through a
//! running service (`nets`, `sprt show`): two implementations of the same questions, so a
//! command is written once and the two modes cannot drift apart.

use crate::client::{check, client};
use anyhow::Context;
use bytes::Bytes;
use lakefish_jobs::Lake;
use lakefish_schemas::{NetManifest, SprtStatus};

pub(crate) enum Backend {
    /// The lake named by `--lake`, read directly.
    Lake(Lake),
    /// A running service at this base URL (`LAKEFISH_TOKEN` is sent when set).
    Api(String),
}

/// A query parameter's value, percent-encoded.
fn encode(v: &str) -> String {
    v.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

impl Backend {
    /// `writes`: the command may add to the lake (and so create it); a command that only
    /// reads refuses a local lake that does not exist.
    pub(crate) async fn new(
        lake: &str,
        api: Option<String>,
        writes: bool,
    ) -> anyhow::Result<Backend> {
        Ok(match api {
            Some(url) => Backend::Api(url.trim_end_matches('/').to_string()),
            None if writes => Backend::Lake(crate::config::open_lake_for_writing(lake).await?),
            None => Backend::Lake(crate::config::open_existing_lake(lake)?),
        })
    }

    async fn get_json(url: &str) -> anyhow::Result<serde_json::Value> {
        check(client().get(url).send().await?).await
    }

    /// Every registered net, oldest first, and the name of the best one.
    pub(crate) async fn nets(&self) -> anyhow::Result<(Vec<NetManifest>, Option<String>)> {
        match self {
            Backend::Api(api) => {
                // Pages come newest first; follow them all.
                let mut nets: Vec<NetManifest> = Vec::new();
                let mut url = format!("{api}/v1/nets?limit=1000");
                loop {
                    let v = Self::get_json(&url).await?;
                    nets.extend(serde_json::from_value::<Vec<NetManifest>>(
                        v["nets"].clone(),
                    )?);
                    match v["next"].as_str() {
                        Some(next) => {
                            url = format!("{api}/v1/nets?limit=1000&after={}", encode(next))
                        }
                        None => {
                            nets.reverse();
                            return Ok((nets, v["best"]["name"].as_str().map(str::to_string)));
                        }
                    }
                }
            }
            Backend::Lake(lake) => {
                let best = lakefish_jobs::nets::read_best(lake).await?;
                Ok((
                    lakefish_jobs::nets::list_nets(lake).await?,
                    best.map(|b| b.name),
                ))
            }
        }
    }

    /// A net's manifest by registry name or `best` (resolved by whoever holds the registry).
    pub(crate) async fn net(&self, name: &str) -> anyhow::Result<NetManifest> {
        match self {
            Backend::Api(api) => {
                let name = match name {
                    "best" => name.to_string(),
                    _ => lakefish_schemas::nets::net_name(name).map_err(anyhow::Error::msg)?,
                };
                Ok(serde_json::from_value(
                    Self::get_json(&format!("{api}/v1/nets/{name}")).await?,
                )?)
            }
            Backend::Lake(lake) => {
                let name = lakefish_jobs::nets::resolve_net_name(lake, name).await?;
                lakefish_jobs::nets::read_net(lake, &name)
                    .await?
                    .with_context(|| format!("net {name} is not registered"))
            }
        }
    }

    /// A net's manifest and file bytes (the caller checks them against each other).
    pub(crate) async fn net_file(&self, name: &str) -> anyhow::Result<(NetManifest, Bytes)> {
        match self {
            Backend::Api(api) => {
                let m = self.net(name).await?;
                let resp = client()
                    .get(format!("{api}/v1/nets/{}/file", m.name))
                    .send()
                    .await?;
                if !resp.status().is_success() {
                    check(resp).await?;
                    unreachable!("check fails on an error status");
                }
                Ok((m, resp.bytes().await?))
            }
            Backend::Lake(lake) => {
                let name = lakefish_jobs::nets::resolve_net_name(lake, name).await?;
                Ok(lakefish_jobs::nets::fetch_net(lake, &name).await?)
            }
        }
    }

    /// An SPRT test's state, counts and decision.
    /// Makes a registered net the best (a promotion or a roll-back), recorded with who and
    /// why: the token's name through the API, `local:<user>` on the lake.
    pub(crate) async fn promote(
        &self,
        name: &str,
        reason: Option<String>,
    ) -> anyhow::Result<lakefish_schemas::nets::BestNet> {
        match self {
            Backend::Api(api) => {
                let req = lakefish_schemas::nets::PromoteRequest {
                    name: name.to_string(),
                    reason,
                };
                let resp = client()
                    .post(format!("{api}/v1/promotions"))
                    .json(&req)
                    .send()
                    .await?;
                Ok(serde_json::from_value(check(resp).await?)?)
            }
            Backend::Lake(lake) => {
                let why = lakefish_jobs::nets::Promotion {
                    reason: reason.unwrap_or_else(|| "promoted by hand".into()),
                    by: crate::local::user(),
                    measured: None,
                };
                Ok(lakefish_jobs::nets::set_best(lake, name, why).await?)
            }
        }
    }

    /// Every promotion, newest first.
    pub(crate) async fn promotions(&self) -> anyhow::Result<Vec<lakefish_schemas::nets::BestNet>> {
        match self {
            Backend::Api(api) => {
                let v = Self::get_json(&format!("{api}/v1/promotions")).await?;
                Ok(serde_json::from_value(v["promotions"].clone())?)
            }
            Backend::Lake(lake) => Ok(lakefish_jobs::nets::best_history(lake).await?),
        }
    }

    pub(crate) async fn sprt(
        &self,
        id: &lakefish_schemas::names::SprtId,
    ) -> anyhow::Result<SprtStatus> {
        match self {
            Backend::Api(api) => Ok(serde_json::from_value(
                Self::get_json(&format!("{api}/v1/sprt/{id}")).await?,
            )?),
            Backend::Lake(lake) => lakefish_jobs::sprt::status(lake, id)
                .await?
                .with_context(|| format!("sprt test {id} not found")),
        }
    }
}
