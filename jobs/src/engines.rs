//! The engine registry (`engines/<name>.json`), uploaded engine binaries
//! (`engines/bin/<sha256>`), a side of a match resolved against both registries, and the
//! checks a worker makes before it lets an engine play: the binary's sha256 and its `bench`
//! node count against the registration, as OpenBench's workers do.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use lakefish_engine::matchplay::{Player, PlayerEngine};
use lakefish_engine::uci_client::{ScratchDir, UciCommand, UciProcess};
use lakefish_schemas::engines::{
    BUILTIN_ENGINE, ENGINE_BINARIES, ENGINES_PREFIX, EngineSpec, OptionRefusal, SideRequest,
    UPLOADED_PREFIX, UciOption, check_engine_name, engine_key,
};
use lakefish_schemas::sprt::SprtSide;

use crate::{JobError, Lake};

/// Registers `spec` (admin only over HTTP: workers will run its command). The engine is
/// started here when its program is on this machine (uploaded binaries are fetched) and its
/// `uci` answer read: `allow` and `options` are checked against the options it announces.
/// The same spec again is a no-op (`Ok((spec, false))`); a different one under a taken name
/// is refused (remove it first).
pub async fn register(lake: &Lake, spec: &EngineSpec) -> Result<(EngineSpec, bool), JobError> {
    spec.validate().map_err(JobError::Invalid)?;
    if let Some(sha) = spec.command.strip_prefix(UPLOADED_PREFIX)
        && lake.size(&binary_key(sha)).await?.is_none()
    {
        return Err(JobError::NotFound(format!(
            "no uploaded engine binary {sha} (upload it first: lakefish engines add --upload)"
        )));
    }
    let mut spec = spec.clone();
    if let Some(program) = local_program(lake, &spec).await? {
        match probe_options(program, spec.args.clone()).await {
            Ok(announced) => spec.uci_options = announced,
            // An engine that cannot answer `uci` here can still be registered (its games
            // will say why it loses them), as long as sides may set nothing on it.
            Err(e) if spec.allow.is_empty() => {
                tracing::warn!(engine = spec.name, "its options could not be read: {e}");
            }
            Err(e) => return Err(e.prefixed(&format!("engine {}: ", spec.name))),
        }
    }
    spec.resolve_allow()
        .map_err(|e| JobError::Invalid(format!("engine {}: {e}", spec.name)))?;
    let json = serde_json::to_vec_pretty(&spec).expect("serializable");
    if let Some(old) = get(lake, &spec.name).await? {
        if old == spec {
            return Ok((old, false));
        }
        // Registered before engines' options were read (no `uci_options`, no `allow`): the
        // same registration again records what the engine announces.
        let mut upgraded = old.clone();
        upgraded.uci_options = spec.uci_options.clone();
        if old.uci_options.is_empty() && old.allow.is_empty() && upgraded == spec {
            lake.put(&engine_key(&spec.name), json).await?;
            return Ok((spec, false));
        }
        return Err(JobError::EngineExists { name: spec.name });
    }
    // Create-only: of two first registrations racing under one name, one wins.
    if !lake.put_if_absent(&engine_key(&spec.name), json).await? {
        return match get(lake, &spec.name).await? {
            Some(old) if old == spec => Ok((old, false)),
            _ => Err(JobError::EngineExists { name: spec.name }),
        };
    }
    Ok((spec, true))
}

/// The engine's program on this machine, if it is here: an uploaded binary fetched into the
/// cache (checked against its name), or a path that exists.
async fn local_program(lake: &Lake, spec: &EngineSpec) -> Result<Option<PathBuf>, JobError> {
    match spec.command.strip_prefix(UPLOADED_PREFIX) {
        Some(sha) => fetch_binary(lake, sha).await.map(Some),
        None => Ok(Path::new(&spec.command)
            .is_file()
            .then(|| PathBuf::from(&spec.command))),
    }
}

/// Starts the engine, reads the options its `uci` answer announces, and stops it.
pub async fn probe_options(
    program: PathBuf,
    args: Vec<String>,
) -> Result<Vec<UciOption>, JobError> {
    let label = program.display().to_string();
    let lines = tokio::task::spawn_blocking(move || {
        let command = UciCommand {
            program: program.display().to_string(),
            args,
            options: Vec::new(),
        };
        UciProcess::start(&command, Duration::from_secs(10)).map(|p| p.option_lines.clone())
    })
    .await
    .map_err(|e| JobError::Internal(e.to_string()))?
    .map_err(|fault| JobError::Input {
        input: format!("{label} uci"),
        reason: fault.to_string(),
    })?;
    Ok(lines.iter().filter_map(|l| UciOption::parse(l)).collect())
}

pub async fn get(lake: &Lake, name: &str) -> Result<Option<EngineSpec>, JobError> {
    if check_engine_name(name).is_err() {
        return Ok(None);
    }
    lake.get_json(&engine_key(name), "engine").await
}

/// Every registered engine, by name (lakefish's own is not stored).
pub async fn list(lake: &Lake) -> Result<Vec<EngineSpec>, JobError> {
    let mut out = Vec::new();
    for meta in lake.list(ENGINES_PREFIX).await? {
        let key = meta.location.to_string();
        let Some(name) = key
            .strip_prefix(&format!("{ENGINES_PREFIX}/"))
            .and_then(|k| k.strip_suffix(".json"))
        else {
            continue;
        };
        if name.contains('/') {
            continue;
        }
        if let Some(spec) = get(lake, name).await? {
            out.push(spec);
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// Removes a registration (tests that used it keep their records). `false` if absent.
pub async fn remove(lake: &Lake, name: &str) -> Result<bool, JobError> {
    check_engine_name(name).map_err(JobError::Payload)?;
    if get(lake, name).await?.is_none() {
        return Ok(false);
    }
    lake.delete(&engine_key(name)).await?;
    Ok(true)
}

fn binary_key(sha: &str) -> String {
    format!("{ENGINE_BINARIES}/{sha}")
}

/// Stores an engine binary in the lake under its sha256 and returns the `command` that
/// names it.
pub async fn upload_binary(lake: &Lake, bytes: Vec<u8>) -> Result<String, JobError> {
    let sha = crate::nets::sha256_hex(&bytes);
    if lake.size(&binary_key(&sha)).await?.is_none() {
        lake.put(&binary_key(&sha), bytes).await?;
    }
    Ok(format!("{UPLOADED_PREFIX}{sha}"))
}

/// The sha256 of a file, hex.
pub fn file_sha256(path: &Path) -> Result<String, JobError> {
    let bytes = std::fs::read(path).map_err(|e| JobError::Input {
        input: path.display().to_string(),
        reason: e.to_string(),
    })?;
    Ok(crate::nets::sha256_hex(&bytes))
}

/// Runs `program bench` and reads the node count it reports (`Nodes searched : N`, as
/// Stockfish and most engines print it, on stdout or stderr).
pub fn bench_nodes(program: &Path, args: &[String]) -> Result<u64, JobError> {
    let err = |reason: String| JobError::Input {
        input: format!("{} bench", program.display()),
        reason,
    };
    let scratch = ScratchDir::new().map_err(|e| err(e.to_string()))?;
    let program = std::path::absolute(program).map_err(|e| err(e.to_string()))?;
    let mut child = std::process::Command::new(&program)
        .current_dir(scratch.path())
        .env_clear()
        .envs(lakefish_engine::uci_client::engine_env(scratch.path()))
        .args(args)
        .arg("bench")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| err(e.to_string()))?;
    let (mut out, mut errs) = (child.stdout.take(), child.stderr.take());
    let reader = std::thread::spawn(move || {
        use std::io::Read;
        let mut text = String::new();
        if let Some(o) = out.as_mut() {
            let _ = o.take(1 << 20).read_to_string(&mut text);
        }
        if let Some(e) = errs.as_mut() {
            let _ = e.take(1 << 20).read_to_string(&mut text);
        }
        text
    });
    let deadline = std::time::Instant::now() + Duration::from_secs(300);
    loop {
        if child.try_wait().map_err(|e| err(e.to_string()))?.is_some() {
            break;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            return Err(err("bench ran past 300 s".into()));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let text = reader.join().unwrap_or_default();
    text.lines()
        .filter(|l| l.to_ascii_lowercase().starts_with("nodes searched"))
        .filter_map(|l| l.rsplit(':').next()?.trim().parse::<u64>().ok())
        .next_back()
        .ok_or_else(|| err("printed no `Nodes searched : N` line".into()))
}

/// Where uploaded engines and nets given to engines are kept on this machine, absolute:
/// engines run in scratch directories, so a relative path would point into those.
fn cache_dir() -> PathBuf {
    let dir = cache_dir_setting();
    std::path::absolute(&dir).unwrap_or(dir)
}

fn cache_dir_setting() -> PathBuf {
    if let Some(d) = std::env::var_os("LAKEFISH_CACHE_DIR") {
        return PathBuf::from(d);
    }
    if let Some(d) = std::env::var_os("XDG_CACHE_HOME") {
        return PathBuf::from(d).join("lakefish");
    }
    if let Some(h) = std::env::var_os("HOME") {
        return PathBuf::from(h).join(".cache/lakefish");
    }
    std::env::temp_dir().join("lakefish-cache")
}

/// Writes `bytes` to `path` whole (a temporary name, then a rename), unless a file with
/// the same sha256 is there already.
fn cache_file(path: &Path, bytes: &[u8], sha: &str, executable: bool) -> Result<(), JobError> {
    let io = |e: std::io::Error| JobError::Input {
        input: path.display().to_string(),
        reason: e.to_string(),
    };
    if path.exists() && file_sha256(path)? == sha {
        return Ok(());
    }
    std::fs::create_dir_all(path.parent().expect("a file in the cache")).map_err(io)?;
    let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
    std::fs::write(&tmp, bytes).map_err(io)?;
    if executable {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755)).map_err(io)?;
    }
    std::fs::rename(&tmp, path).map_err(io)
}

/// An uploaded binary in this machine's cache, fetched if missing and checked against its name.
async fn fetch_binary(lake: &Lake, sha: &str) -> Result<PathBuf, JobError> {
    let path = cache_dir().join("engines").join(sha);
    if path.exists() && file_sha256(&path)? == sha {
        return Ok(path);
    }
    let bytes = lake
        .get(&binary_key(sha))
        .await?
        .ok_or_else(|| JobError::NotFound(format!("engine binary {sha}")))?;
    if crate::nets::sha256_hex(&bytes) != sha {
        return Err(JobError::Corrupt {
            what: "engine binary",
            key: binary_key(sha),
            reason: "its bytes do not hash to its name".into(),
        });
    }
    cache_file(&path, &bytes, sha, true)?;
    Ok(path)
}

/// Engines this process has already checked: (name, path, sha256, bench).
static CHECKED: Mutex<Option<HashSet<String>>> = Mutex::new(None);

/// The local program of a registered engine, fetched if uploaded, and checked against the
/// registration (sha256, then `bench`) once per process. A mismatch refuses to play.
pub async fn prepare_program(lake: &Lake, spec: &EngineSpec) -> Result<PathBuf, JobError> {
    let path = match spec.command.strip_prefix(UPLOADED_PREFIX) {
        Some(sha) => fetch_binary(lake, sha).await?,
        None => PathBuf::from(&spec.command),
    };
    // Everything the checks below depend on: a registration replaced with another `allow`
    // is checked again by a long-running worker.
    let key = format!(
        "{}|{}|{:?}|{:?}|{}",
        spec.name,
        path.display(),
        spec.sha256,
        spec.bench,
        serde_json::to_string(&(&spec.allow, &spec.uci_options)).expect("serializable")
    );
    if CHECKED
        .lock()
        .expect("checked engines")
        .get_or_insert_with(HashSet::new)
        .contains(&key)
    {
        return Ok(path);
    }
    let refuse = |reason: String| {
        JobError::Payload(format!(
            "engine {}: refusing to play with {}: {reason}",
            spec.name,
            path.display()
        ))
    };
    if !path.is_file() {
        return Err(refuse("no such file on this worker".into()));
    }
    if let Some(want) = &spec.sha256 {
        let have = file_sha256(&path)?;
        if &have != want {
            return Err(refuse(format!(
                "its sha256 is {have}, the registration says {want}"
            )));
        }
    }
    if let Some(want) = spec.bench {
        let (p, args) = (path.clone(), spec.args.clone());
        let have = tokio::task::spawn_blocking(move || bench_nodes(&p, &args))
            .await
            .map_err(|e| JobError::Internal(e.to_string()))??;
        if have != want {
            return Err(refuse(format!(
                "`bench` searched {have} nodes, the registration says {want}"
            )));
        }
    }
    // The options a side may set must still be the engine's, of the same kind: a binary
    // swapped under the same path (without sha256/bench) cannot widen what sides may do.
    if !spec.allow.is_empty() {
        let announced = probe_options(path.clone(), spec.args.clone()).await?;
        for name in spec.allow.keys() {
            let registered = spec
                .uci_options
                .iter()
                .find(|o| o.name.eq_ignore_ascii_case(name));
            let here = announced.iter().find(|o| o.name.eq_ignore_ascii_case(name));
            if here.map(|o| &o.kind) != registered.map(|o| &o.kind) || here.is_none() {
                return Err(refuse(format!(
                    "allowed option {name:?} is not announced as at registration ({:?} here, {:?} then)",
                    here.map(|o| o.kind.as_str()),
                    registered.map(|o| o.kind.as_str())
                )));
            }
        }
    }
    CHECKED
        .lock()
        .expect("checked engines")
        .get_or_insert_with(HashSet::new)
        .insert(key);
    Ok(path)
}

/// A side resolved: which engine, which net (`best` made a name), which options. A bare
/// word that is no registered engine is a net for lakefish's engine.
pub async fn resolve_side(lake: &Lake, request: &SideRequest) -> Result<SprtSide, JobError> {
    let parsed = request.parse().map_err(JobError::Payload)?;
    let requested = request.to_string();
    // The registration, read once: whether the head is an engine, and its policy.
    let registered = if parsed.head == BUILTIN_ENGINE || check_engine_name(&parsed.head).is_err() {
        None
    } else {
        get(lake, &parsed.head).await?
    };
    let engine = if parsed.head == BUILTIN_ENGINE {
        None
    } else if let Some(spec) = registered {
        Some(spec)
    } else if parsed.net.is_none() {
        // Today's meaning: a net (or `best`, `classical`) for lakefish's engine.
        if !parsed.options.is_empty() {
            return Err(JobError::Payload(format!(
                "{requested}: {} is not a registered engine, and lakefish's own engine takes no UCI options here",
                parsed.head
            )));
        }
        let name = crate::nets::resolve_evaluation(lake, &parsed.head)
            .await
            .map_err(|e| match e {
                JobError::Payload(m) => JobError::Payload(format!(
                    "{m}; nor is {} a registered engine (lakefish engines ls)",
                    parsed.head
                )),
                other => other,
            })?;
        return Ok(SprtSide {
            name,
            requested,
            engine: None,
            net: None,
            options: BTreeMap::new(),
        });
    } else {
        return Err(JobError::Payload(format!(
            "{requested}: engine {} is not registered (lakefish engines add)",
            parsed.head
        )));
    };
    let Some(spec) = engine else {
        // lakefish+NET
        if !parsed.options.is_empty() {
            return Err(JobError::Payload(format!(
                "{requested}: lakefish's own engine takes no UCI options here"
            )));
        }
        let net = parsed.net.as_deref().unwrap_or("classical");
        let name = crate::nets::resolve_evaluation(lake, net).await?;
        return Ok(SprtSide {
            name,
            requested,
            engine: None,
            net: None,
            options: BTreeMap::new(),
        });
    };
    let engine = spec.name.clone();
    let options = side_options(&spec, &parsed.options)
        .map_err(|e| e.prefixed(&format!("side {requested}: ")))?;
    let net = match &parsed.net {
        Some(n) => Some(crate::nets::resolve_net_name(lake, n).await?),
        None => None,
    };
    if let Some(n) = &net {
        let Some(m) = crate::nets::read_net(lake, n).await? else {
            return Err(JobError::Payload(format!(
                "{requested}: net {n} is not registered"
            )));
        };
        check_net_format(&spec, &m).map_err(|e| e.prefixed(&format!("{requested}: ")))?;
    }
    let mut name = engine.clone();
    if let Some(n) = &net {
        name.push('+');
        name.push_str(n);
    }
    for (k, v) in &options {
        name.push_str(&format!(",{k}={v}"));
    }
    Ok(SprtSide {
        name,
        requested,
        engine: Some(engine),
        net,
        options,
    })
}

/// An engine is given only nets of a format it loads: anything else would lose every game
/// to a crash at load.
fn check_net_format(spec: &EngineSpec, m: &lakefish_schemas::NetManifest) -> Result<(), JobError> {
    if let Some(layout) = &spec.net_layout {
        let fits = match &m.net {
            Some(net) => layout.check(net).map_err(|e| e.to_string()),
            None => Err(format!(
                "its manifest has no description of the net ({} {})",
                m.features, m.arch
            )),
        };
        return fits.map_err(|why| {
            JobError::Invalid(format!(
                "engine {} loads nets in layout {:?} (its registration's net_layout), which net {} does not fit: {why}",
                spec.name,
                layout.name.as_deref().unwrap_or("(unnamed)"),
                m.name
            ))
        });
    }
    if spec.net_formats.contains(&m.format) {
        return Ok(());
    }
    let takes: Vec<&str> = spec.net_formats.iter().map(|f| f.as_str()).collect();
    Err(JobError::Invalid(format!(
        "engine {} loads nets in {} format (its registration's net_formats), and {} is a {} net; give it a net of its format, or play this one with lakefish's engine (lakefish+{})",
        spec.name,
        if takes.is_empty() {
            "no".to_string()
        } else {
            takes.join(" or ")
        },
        m.name,
        m.format.as_str(),
        m.name
    )))
}

/// A side's options under the registration's policy: an option the engine does not have is
/// a bad request, one no admin allowed (or a value outside its rule) is forbidden.
fn side_options(
    spec: &EngineSpec,
    options: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, String>, JobError> {
    spec.check_side_options(options).map_err(|r| match r {
        OptionRefusal::Unknown(m) => JobError::Invalid(m),
        OptionRefusal::Forbidden(m) => JobError::Forbidden(m),
    })
}

/// Every side a job names, resolved (and so checked against the engines' policies) before
/// the job is recorded: what `POST /v1/jobs` runs for SPRT and datagen specs.
pub async fn check_sides(lake: &Lake, spec: &lakefish_schemas::JobSpec) -> Result<(), JobError> {
    for (field, side) in spec.sides() {
        resolve_side(lake, side)
            .await
            .map_err(|e| e.prefixed(&format!("{field}: ")))?;
    }
    Ok(())
}

/// The player for a resolved side: lakefish's engine in-process, or a registered engine's
/// program (checked, fetched if uploaded) with its options, the side's, and its net.
pub async fn player(lake: &Lake, side: &SprtSide) -> Result<Player, JobError> {
    let Some(engine) = &side.engine else {
        return Ok(Player::builtin(
            side.name.clone(),
            crate::nets::load_evaluator(lake, &side.name).await?,
        ));
    };
    let spec = get(lake, engine)
        .await?
        .ok_or_else(|| JobError::NotFound(format!("engine {engine} is no longer registered")))?;
    // Checked again here: a queue can be written by others than the API.
    let allowed = side_options(&spec, &side.options)
        .map_err(|e| e.prefixed(&format!("side {}: ", side.name)))?;
    let program = prepare_program(lake, &spec).await?;
    let mut options = spec.options.clone();
    options.extend(allowed);
    if let Some(net) = &side.net {
        let (manifest, bytes) = crate::nets::fetch_net(lake, net).await?;
        check_net_format(&spec, &manifest)?;
        let path = match &spec.net_layout {
            None => {
                let path = cache_dir().join("nets").join(&manifest.name);
                cache_file(&path, &bytes, &manifest.sha256, false)?;
                path
            }
            Some(layout) => {
                // The net as the engine reads it, named by its own bytes.
                let written = crate::foreign_nets::export_layout(&manifest, &bytes, layout)?;
                let sha = crate::nets::sha256_hex(&written);
                let path = cache_dir().join("nets").join(format!(
                    "{}.{}.bin",
                    manifest.name.trim_end_matches(".nnue"),
                    &sha[..12]
                ));
                cache_file(&path, &written, &sha, false)?;
                path
            }
        };
        options.insert(spec.net_option.clone(), path.display().to_string());
    }
    Ok(Player {
        name: side.name.clone(),
        engine: PlayerEngine::Uci(UciCommand {
            program: program.display().to_string(),
            args: spec.args.clone(),
            options: options.into_iter().collect(),
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use lakefish_schemas::engines::OptionRule;

    /// A registration as the registry stores it (written directly: no engine runs here).
    async fn stored(lake: &Lake) -> EngineSpec {
        let spec = EngineSpec {
            name: "sf".into(),
            command: "/nonexistent/stockfish".into(),
            args: vec![],
            options: BTreeMap::from([("Threads".to_string(), "1".to_string())]),
            allow: BTreeMap::from([(
                "Skill Level".to_string(),
                OptionRule {
                    min: Some(0),
                    max: Some(20),
                    values: vec![],
                },
            )]),
            uci_options: ["Threads", "Skill Level", "Debug Log File"]
                .iter()
                .map(|n| UciOption {
                    name: n.to_string(),
                    kind: if n.starts_with("Debug") {
                        "string"
                    } else {
                        "spin"
                    }
                    .into(),
                    min: Some(0),
                    max: Some(20),
                    vars: vec![],
                })
                .collect(),
            net_option: "EvalFile".into(),
            net_formats: vec![lakefish_schemas::nets::NetFormat::Stockfish],
            net_layout: None,
            sha256: None,
            bench: None,
        };
        lake.put(&engine_key("sf"), serde_json::to_vec(&spec).unwrap())
            .await
            .unwrap();
        spec
    }

    /// A side that reached a worker without passing the API (a forged queue payload) is
    /// refused before any engine starts, naming the option.
    #[tokio::test]
    async fn the_worker_checks_a_side_s_options_again() {
        let lake = Lake::in_memory();
        stored(&lake).await;
        let side = |options: &[(&str, &str)]| SprtSide {
            name: "sf".into(),
            requested: "sf".into(),
            engine: Some("sf".into()),
            net: None,
            options: options
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        };
        for (options, forbidden, says) in [
            (
                &[("Debug Log File", "/etc/passwd")][..],
                true,
                "Debug Log File",
            ),
            (&[("Threads", "64")][..], true, "Threads"),
            (&[("Skill Level", "99")][..], true, "0..20"),
            (&[("Thraeds", "1")][..], false, "no such UCI option"),
        ] {
            let err = match player(&lake, &side(options)).await {
                Err(e) => e,
                Ok(_) => panic!("{options:?} was accepted"),
            };
            assert_eq!(matches!(err, JobError::Forbidden(_)), forbidden, "{err}");
            assert!(err.to_string().contains(says), "{err}");
        }
        // An allowed option passes the policy; this engine's program is not here, which is
        // the next check's refusal.
        let err = match player(&lake, &side(&[("skill level", "3")])).await {
            Err(e) => e.to_string(),
            Ok(_) => panic!("no such program"),
        };
        assert!(err.contains("no such file on this worker"), "{err}");
        // A net in a format the engine does not load is refused before any game (issue 35,
        // item 7): Stockfish and a lakefish net.
        let net: lakefish_schemas::NetManifest = serde_json::from_value(serde_json::json!({
            "name": "nn-0123456789ab.nnue", "sha256": "00", "bytes": 1, "features": "all768",
            "arch": "256x2-32-32", "arch_hash": "x", "description": "", "run": "run-x",
            "checkpoint": "step-1", "step": 1, "shuffle": "sh-x", "datasets": [], "mask": "quiet",
            "parent": null, "created": "2026-11-26T00:00:00Z", "format": "lakefish",
            "quantization": {"positions": 1, "mean_abs_cp": 0.0, "p99_abs_cp": 0.0,
                "max_abs_cp": 0.0, "mean_abs_internal": 0.0, "p99_abs_internal": 0.0}
        }))
        .unwrap();
        let key = lakefish_schemas::nets::net_keys(&net.name).1;
        lake.put(&key, serde_json::to_vec(&net).unwrap())
            .await
            .unwrap();
        let err = resolve_side(&lake, &"sf+nn-0123456789ab.nnue".into())
            .await
            .unwrap_err();
        assert!(matches!(err, JobError::Invalid(_)), "{err}");
        assert!(
            err.to_string().contains("loads nets in stockfish format"),
            "{err}"
        );
        let forged = SprtSide {
            net: Some(net.name.clone()),
            ..side(&[])
        };
        assert!(player(&lake, &forged).await.is_err());
        // Resolution at submission gives the registration's spelling of the option.
        let resolved = resolve_side(&lake, &"sf,skill level=3".into())
            .await
            .unwrap();
        assert_eq!(resolved.options["Skill Level"], "3");
        assert_eq!(resolved.name, "sf,Skill Level=3");
    }

    /// An engine registered with a saved layout gets its net written in that layout (bullet's
    /// `quantised.bin` here), and a net the layout does not fit is refused before any game.
    #[tokio::test]
    async fn an_engine_with_a_layout_gets_the_net_in_it() {
        use lakefish_schemas::layout::{Layout, SHIPPED};
        let lake = Lake::in_memory();
        let layout = Layout::parse(SHIPPED[0].1).unwrap();
        let mut spec = stored(&lake).await;
        spec.name = "bl".into();
        // A real UCI program (make test installs it); it only answers `uci` here.
        spec.command = "/usr/games/stockfish".into();
        spec.net_layout = Some(layout.clone());
        lake.put(&engine_key("bl"), serde_json::to_vec(&spec).unwrap())
            .await
            .unwrap();
        // bullet's 1_simple, 16 wide, as an imported file would be.
        let mut net =
            lakefish_schemas::netspec::NetSpec::parse(lakefish_schemas::layout::SHIPPED_NETS[0].1)
                .unwrap();
        net.transformer.width = 16;
        let random = lakefish_engine::spec_net::random_spec_net(net.clone(), 3).unwrap();
        let file = lakefish_engine::layout::write(
            &lakefish_engine::layout::NetTensors::of_spec_net(&random),
            &layout,
        )
        .unwrap();
        let m = crate::foreign_nets::import_layout(&lake, &file, &layout, net)
            .await
            .unwrap();
        let side = resolve_side(&lake, &format!("bl+{}", m.name).as_str().into())
            .await
            .unwrap();
        let p = player(&lake, &side).await.unwrap();
        let PlayerEngine::Uci(cmd) = p.engine else {
            panic!("a UCI engine")
        };
        let (_, path) = cmd
            .options
            .iter()
            .find(|(k, _)| k == "EvalFile")
            .expect("the net's option");
        assert_eq!(std::fs::read(path).unwrap(), file, "bullet's bytes");

        // A Stockfish net does not fit bullet's layout.
        let mut sf: lakefish_schemas::NetManifest = m.clone();
        sf.name = "nn-aaaaaaaaaaaa.nnue".into();
        sf.format = lakefish_schemas::nets::NetFormat::Stockfish;
        sf.net = lakefish_schemas::netspec::NetSpec::preset("halfka_v2_hm", "stockfish-15.1").ok();
        let key = lakefish_schemas::nets::net_keys(&sf.name).1;
        lake.put(&key, serde_json::to_vec(&sf).unwrap())
            .await
            .unwrap();
        let err = resolve_side(&lake, &format!("bl+{}", sf.name).as_str().into())
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("loads nets in layout \"bullet 1_simple\""),
            "{err}"
        );
    }
}
