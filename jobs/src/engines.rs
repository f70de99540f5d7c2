//! The engine registry (`engines/<name>.json`), uploaded engine binaries
//! (`engines/bin/<sha256>`), a side of a match resolved against both registries, and the
//! checks a worker makes before it lets an engine play: the binary's sha256 and its `bench`
//! node count against the registration, as OpenBench's workers do.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use lakefish_engine::matchplay::{Player, PlayerEngine};
use lakefish_engine::uci_client::UciCommand;
use lakefish_schemas::engines::{
    BUILTIN_ENGINE, ENGINE_BINARIES, ENGINES_PREFIX, EngineSpec, SideRequest, UPLOADED_PREFIX,
    check_engine_name, engine_key,
};
use lakefish_schemas::sprt::SprtSide;

use crate::{JobError, Lake};

/// Registers `spec` (admin only over HTTP: workers will run its command). The same spec
/// again is a no-op; a different one under a taken name is refused (remove it first).
pub async fn register(lake: &Lake, spec: &EngineSpec) -> Result<EngineSpec, JobError> {
    spec.validate().map_err(JobError::Payload)?;
    if let Some(sha) = spec.command.strip_prefix(UPLOADED_PREFIX)
        && lake.size(&binary_key(sha)).await?.is_none()
    {
        return Err(JobError::NotFound(format!(
            "no uploaded engine binary {sha} (upload it first: lakefish engines add --upload)"
        )));
    }
    if let Some(old) = get(lake, &spec.name).await? {
        if &old == spec {
            return Ok(old);
        }
        return Err(JobError::Payload(format!(
            "engine {} is registered with other settings; remove it first",
            spec.name
        )));
    }
    let json = serde_json::to_vec_pretty(spec).expect("serializable");
    lake.put(&engine_key(&spec.name), json).await?;
    Ok(spec.clone())
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
    let mut child = std::process::Command::new(program)
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

/// Where uploaded engines and nets given to engines are kept on this machine.
fn cache_dir() -> PathBuf {
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

/// Engines this process has already checked: (name, path, sha256, bench).
static CHECKED: Mutex<Option<HashSet<String>>> = Mutex::new(None);

/// The local program of a registered engine, fetched if uploaded, and checked against the
/// registration (sha256, then `bench`) once per process. A mismatch refuses to play.
pub async fn prepare_program(lake: &Lake, spec: &EngineSpec) -> Result<PathBuf, JobError> {
    let path = match spec.command.strip_prefix(UPLOADED_PREFIX) {
        Some(sha) => {
            let path = cache_dir().join("engines").join(sha);
            let local_ok = path.exists() && file_sha256(&path)? == sha;
            if !local_ok {
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
            }
            path
        }
        None => PathBuf::from(&spec.command),
    };
    let key = format!(
        "{}|{}|{:?}|{:?}",
        spec.name,
        path.display(),
        spec.sha256,
        spec.bench
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
    let engine = if parsed.head == BUILTIN_ENGINE {
        None
    } else if check_engine_name(&parsed.head).is_ok() && get(lake, &parsed.head).await?.is_some() {
        Some(parsed.head.clone())
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
    let Some(engine) = engine else {
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
    let net = match &parsed.net {
        Some(n) => Some(crate::nets::resolve_net_name(lake, n).await?),
        None => None,
    };
    if let Some(n) = &net
        && crate::nets::read_net(lake, n).await?.is_none()
    {
        return Err(JobError::Payload(format!(
            "{requested}: net {n} is not registered"
        )));
    }
    let mut name = engine.clone();
    if let Some(n) = &net {
        name.push('+');
        name.push_str(n);
    }
    for (k, v) in &parsed.options {
        name.push_str(&format!(",{k}={v}"));
    }
    Ok(SprtSide {
        name,
        requested,
        engine: Some(engine),
        net,
        options: parsed.options,
    })
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
    let program = prepare_program(lake, &spec).await?;
    let mut options = spec.options.clone();
    options.extend(side.options.clone());
    if let Some(net) = &side.net {
        let (manifest, bytes) = crate::nets::fetch_net(lake, net).await?;
        let path = cache_dir().join("nets").join(&manifest.name);
        cache_file(&path, &bytes, &manifest.sha256, false)?;
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
