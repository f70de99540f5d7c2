//! `/v1/openapi.json`: the OpenAPI 3.1 document, generated from the route table
//! ([`crate::api::routes`]) and the schemas the Rust types derive, so it cannot drift from
//! what is served.

use crate::api::{Body, routes};
use axum::http::StatusCode;
use schemars::{Schema, SchemaGenerator};
use serde_json::json;

/// Where schemas live in the document; schemars writes its `$ref`s against this path.
const COMPONENTS: &str = "/components/schemas";
/// Request schemas describe what is read (fields with defaults optional), responses what is
/// written (always-present fields required); a type used both ways gets a second,
/// suffixed component for its request shape.
const REQUEST_SUFFIX: &str = "Input";

/// OpenAPI 3.1 from the route table: for each route its parameters, request body, success
/// and error statuses with their bodies' schemas (JSON Schema 2020-12, derived from the Rust
/// types), and the scope it needs (the same function the auth middleware asks).
pub fn openapi_document() -> serde_json::Value {
    use schemars::generate::SchemaSettings;
    let settings = SchemaSettings::draft2020_12().with(|s| {
        s.definitions_path = COMPONENTS.into();
        s.meta_schema = None;
    });
    let mut out = settings.clone().for_serialize().into_generator();
    let mut inp = settings.for_deserialize().into_generator();
    let error = out.subschema_for::<crate::bodies::ErrorBody>().to_value();
    let mut paths = serde_json::Map::new();
    for rt in routes() {
        let mut params: Vec<serde_json::Value> = rt
            .path
            .split('/')
            .filter_map(|seg| seg.strip_prefix('{')?.strip_suffix('}'))
            .map(|name| json!({ "name": name, "in": "path", "required": true, "schema": { "type": "string", "minLength": 1 } }))
            .collect();
        if let Some(query) = rt.query {
            params.extend(query_parameters(&mut inp, query));
        }
        let scope = crate::auth::needed_scope(&rt.method, rt.path);
        let mut responses = serde_json::Map::new();
        for (status, body) in &rt.ok {
            // A redirect (a form's answer) has no body.
            let mut r = json!({ "description": status.canonical_reason() });
            if !status.is_redirection() {
                r["content"] = content(&mut out, *body);
            }
            responses.insert(status.as_u16().to_string(), r);
        }
        // A dashboard page asked for without a token goes to the login form.
        if rt.page && scope.is_some() && rt.method == axum::http::Method::GET {
            responses.insert(
                "303".into(),
                json!({ "description": "Not logged in: to /ui/login?next=..." }),
            );
        }
        let mut errors = rt.errors.clone();
        if scope.is_some() {
            errors.push(StatusCode::UNAUTHORIZED);
        }
        // Every route refuses a Host the server does not answer to, and (state-changing
        // ones) a request from another origin: `guard.rs`.
        if rt.path != "/healthz" {
            errors.push(StatusCode::FORBIDDEN);
        }
        if matches!(rt.request, Some(crate::api::Body::Json(_))) {
            errors.extend([
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                StatusCode::REQUEST_TIMEOUT,
                StatusCode::PAYLOAD_TOO_LARGE,
                StatusCode::BAD_REQUEST,
            ]);
        }
        errors.sort();
        errors.dedup();
        for status in errors {
            // Dashboard routes answer every refusal as a page, the token and origin checks
            // included; only the body guards of JSON routes answer JSON.
            let html = rt.page && !matches!(status.as_u16(), 408 | 415);
            let content = if html {
                json!({ "text/html": { "schema": { "type": "string" } } })
            } else {
                json!({ "application/json": { "schema": error } })
            };
            responses.insert(
                status.as_u16().to_string(),
                json!({ "description": error_description(status), "content": content }),
            );
        }
        let mut op = json!({
            "summary": rt.summary,
            "operationId": format!("{} {}", rt.method, rt.path),
            "responses": responses,
            "x-lakefish-scope": scope.map(|s| s.as_str()),
        });
        if !params.is_empty() {
            op["parameters"] = serde_json::Value::Array(params);
        }
        if let Some(body) = rt.request {
            op["requestBody"] = json!({ "required": true, "content": content(&mut inp, body) });
        }
        if scope.is_some() {
            op["security"] = json!([{ "bearer": [] }]);
        }
        let entry = paths
            .entry(rt.path.to_string())
            .or_insert_with(|| json!({}));
        entry[rt.method.as_str().to_ascii_lowercase()] = op;
    }
    let mut schemas = out.take_definitions(true);
    for (name, schema) in inp.take_definitions(true) {
        schemas.insert(format!("{name}{REQUEST_SUFFIX}"), schema);
    }
    let mut doc = json!({
        "openapi": "3.1.0",
        "info": { "title": "lakefish", "version": env!("CARGO_PKG_VERSION"),
                  "description": "NNUE training data lake and job service. See the README for the job specs." },
        "components": {
            "securitySchemes": { "bearer": { "type": "http", "scheme": "bearer" } },
            "schemas": schemas,
        },
        "paths": paths,
    });
    rename_request_refs(&mut doc);
    doc
}

/// The content map of a body: its media type and schema.
fn content(g: &mut SchemaGenerator, body: Body) -> serde_json::Value {
    match body {
        Body::Json(schema) => json!({ "application/json": { "schema": schema(g) } }),
        Body::Other(media) if media.starts_with("text/") || media.ends_with("-pgn") => {
            json!({ media: { "schema": { "type": "string" } } })
        }
        Body::Other(media) => {
            json!({ media: { "schema": { "type": "string", "format": "binary" } } })
        }
    }
}

/// One query parameter per field of the query type (inlined, so each has its own schema).
fn query_parameters(
    g: &mut SchemaGenerator,
    query: fn(&mut SchemaGenerator) -> Schema,
) -> Vec<serde_json::Value> {
    let mut schema = query(g).to_value();
    if let Some(name) = schema["$ref"]
        .as_str()
        .and_then(|r| r.rsplit('/').next())
        .map(str::to_string)
    {
        schema = g.definitions_mut().remove(&name).unwrap_or_default();
    }
    let required: Vec<&str> = schema["required"]
        .as_array()
        .map(|r| r.iter().filter_map(|v| v.as_str()).collect())
        .unwrap_or_default();
    let Some(props) = schema["properties"].as_object() else {
        return Vec::new();
    };
    props
        .iter()
        .map(|(name, prop)| {
            let mut prop = prop.clone();
            // A query value is present or absent, never `null`.
            if let Some(types) = prop["type"].as_array() {
                let types: Vec<_> = types.iter().filter(|t| *t != "null").cloned().collect();
                prop["type"] = match types.as_slice() {
                    [one] => one.clone(),
                    _ => serde_json::Value::Array(types),
                };
            }
            if let Some(obj) = prop.as_object_mut() {
                obj.remove("default");
            }
            json!({ "name": name, "in": "query", "required": required.contains(&name.as_str()), "schema": prop })
        })
        .collect()
}

fn error_description(status: StatusCode) -> &'static str {
    match status.as_u16() {
        400 => "Bad request; {\"error\"} says what is wrong",
        401 => "No or unknown token (when tokens are configured)",
        403 => {
            "Refused: the token lacks the scope, the Host is not one this server answers to, a state-changing request came from another origin, an engine route without tokens configured, or an engine option no admin allowed"
        }
        408 => "The JSON body did not arrive whole within 60 s",
        415 => "The body is not Content-Type: application/json",
        404 => "Not found",
        409 => "Conflicts with what is stored; nothing was changed",
        413 => "Body larger than the configured limit",
        503 => "The lake or the queue did not answer; try again",
        _ => "Error",
    }
}

/// Points the `$ref`s of request schemas (under `requestBody`, query parameters and the
/// suffixed components) at the suffixed components.
fn rename_request_refs(doc: &mut serde_json::Value) {
    fn walk(v: &mut serde_json::Value) {
        match v {
            serde_json::Value::Object(map) => {
                for (k, child) in map.iter_mut() {
                    if k == "$ref"
                        && let serde_json::Value::String(r) = child
                    {
                        r.push_str(REQUEST_SUFFIX);
                    } else {
                        walk(child);
                    }
                }
            }
            serde_json::Value::Array(items) => items.iter_mut().for_each(walk),
            _ => {}
        }
    }
    if let Some(paths) = doc["paths"].as_object_mut() {
        for op in paths.values_mut().flat_map(|p| p.as_object_mut()) {
            for op in op.values_mut().flat_map(|o| o.as_object_mut()) {
                for key in ["requestBody", "parameters"] {
                    if let Some(v) = op.get_mut(key) {
                        walk(v);
                    }
                }
            }
        }
    }
    if let Some(schemas) = doc["components"]["schemas"].as_object_mut() {
        for (name, schema) in schemas.iter_mut() {
            if name.ends_with(REQUEST_SUFFIX) {
                walk(schema);
            }
        }
    }
}
