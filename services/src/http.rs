//! The HTTP server: hyper's HTTP/1.1 with the limits a slow or hostile client needs
//! (`[server]` in `lakefish.toml`). A client must send a request's headers within
//! `header_timeout_secs` of the connection opening or of its previous request (hyper starts
//! the clock whenever it waits for a head, so a kept-alive connection that goes quiet is
//! closed too); a body that stalls longer than `body_timeout_secs` between two pieces is cut
//! (`RequestBodyTimeoutLayer` in the router); at most `max_connections` are served at once,
//! further ones wait in the kernel's queue until a slot frees.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use lakefish_schemas::config::ServerConfig;
use tokio::net::TcpListener;

/// Serves `app` on `listener` until `shutdown` resolves, then lets requests in flight finish
/// (for up to 30 s).
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: &ServerConfig,
    shutdown: impl std::future::Future<Output = ()>,
) -> std::io::Result<()> {
    let slots = Arc::new(tokio::sync::Semaphore::new(limits.max_connections()));
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout())
        .max_buf_size(1 << 20);
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        let slot = tokio::select! {
            s = slots.clone().acquire_owned() => s.expect("never closed"),
            () = &mut shutdown => break,
        };
        let (stream, _peer) = tokio::select! {
            r = listener.accept() => match r {
                Ok(c) => c,
                Err(e) => {
                    // Out of descriptors and the like: wait a little rather than spin.
                    tracing::warn!("accept: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let _ = stream.set_nodelay(true);
        let service = TowerToHyperService::new(app.clone());
        let conn = http.serve_connection(TokioIo::new(stream), service);
        let conn = graceful.watch(conn);
        tokio::spawn(async move {
            let _ = conn.await;
            drop(slot);
        });
    }
    tokio::select! {
        () = graceful.shutdown() => {}
        () = tokio::time::sleep(Duration::from_secs(30)) => {}
    }
    Ok(())
}
