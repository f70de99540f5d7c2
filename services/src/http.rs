//! The HTTP server: hyper's HTTP/1.1 with the limits a slow or hostile client needs
//! (`[server]` in `lakefish.toml`). A client must send a request's headers within
//! `header_timeout_secs` of the connection opening or of its previous request (hyper starts
//! the clock whenever it waits for a head, so a kept-alive connection that goes quiet is
//! closed too); a body that stalls longer than `body_timeout_secs` between two pieces is cut
//! (`RequestBodyTimeoutLayer` in the router), and a JSON body must arrive whole within
//! [`crate::guard::JSON_BODY_DEADLINE`]; an answer the client stops reading (a net's bytes,
//! a PGN) is cut after the same `body_timeout_secs` without progress ([`WriteDeadline`]); at
//! most `max_connections` are served at once, further ones wait in the kernel's queue until
//! a slot frees.

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
        let io = WriteDeadline::new(stream, limits.body_timeout());
        let conn = http.serve_connection(TokioIo::new(io), service);
        let conn = graceful.watch(conn);
        tokio::spawn(async move {
            let _ = conn.await;
            drop(slot);
        });
    }
    // No new connections while the ones in flight finish.
    drop(listener);
    tokio::select! {
        () = graceful.shutdown() => {}
        () = tokio::time::sleep(Duration::from_secs(30)) => {}
    }
    Ok(())
}

/// A connection whose writes may not stall longer than `limit`: a client that stops reading
/// its answer gets an error (and the connection closed) instead of holding a slot for good.
struct WriteDeadline<T> {
    io: T,
    limit: Duration,
    stalled: Option<std::pin::Pin<Box<tokio::time::Sleep>>>,
}

impl<T> WriteDeadline<T> {
    fn new(io: T, limit: Duration) -> Self {
        WriteDeadline {
            io,
            limit,
            stalled: None,
        }
    }

    /// Passes a ready result on (and forgets the stall); a pending one starts or checks the
    /// stall's clock.
    fn watch<R>(
        &mut self,
        cx: &mut std::task::Context<'_>,
        r: std::task::Poll<std::io::Result<R>>,
    ) -> std::task::Poll<std::io::Result<R>> {
        use std::future::Future;
        match r {
            std::task::Poll::Pending => {
                let limit = self.limit;
                let sleep = self
                    .stalled
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
                if sleep.as_mut().poll(cx).is_ready() {
                    return std::task::Poll::Ready(Err(std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        "the client stopped reading the answer",
                    )));
                }
                std::task::Poll::Pending
            }
            ready => {
                self.stalled = None;
                ready
            }
        }
    }
}

impl<T: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for WriteDeadline<T> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<T: tokio::io::AsyncWrite + Unpin> tokio::io::AsyncWrite for WriteDeadline<T> {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        let r = std::pin::Pin::new(&mut self.io).poll_write(cx, buf);
        self.watch(cx, r)
    }

    fn poll_write_vectored(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> std::task::Poll<std::io::Result<usize>> {
        let r = std::pin::Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
        self.watch(cx, r)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let r = std::pin::Pin::new(&mut self.io).poll_flush(cx);
        self.watch(cx, r)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    /// A peer that stops reading: the write fails after the limit instead of waiting forever.
    #[tokio::test]
    async fn a_reader_that_stops_reading_is_cut_off() {
        let (ours, theirs) = tokio::io::duplex(1024);
        let mut w = WriteDeadline::new(ours, Duration::from_millis(50));
        let big = vec![0u8; 64 * 1024];
        let e = w.write_all(&big).await.unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::TimedOut);
        // A reader that keeps up is never cut off, however long the answer.
        let (ours, mut theirs2) = tokio::io::duplex(1024);
        let reader = tokio::spawn(async move {
            let mut sink = Vec::new();
            tokio::io::AsyncReadExt::read_to_end(&mut theirs2, &mut sink)
                .await
                .unwrap();
            sink.len()
        });
        let mut w = WriteDeadline::new(ours, Duration::from_millis(50));
        w.write_all(&big).await.unwrap();
        w.shutdown().await.unwrap();
        drop(w);
        assert_eq!(reader.await.unwrap(), big.len());
        drop(theirs);
    }
}
