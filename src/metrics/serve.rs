//! The `/metrics` listener: hyper's HTTP/1 server on the daemon's tokio runtime. Plain
//! HTTP on a loopback address by default (config refuses others unless
//! `metrics_allow_remote`), `GET /metrics` only, stopped by the shutdown token.

use super::Metrics;
use crate::shutdown::Shutdown;
use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Why the listener could not start.
#[derive(Debug, thiserror::Error)]
#[error("cannot listen for metrics on {addr}: {source}")]
pub struct ListenError {
    pub addr: SocketAddr,
    #[source]
    pub source: std::io::Error,
}

/// A bound listener, not yet serving (bound first, so a taken port fails the start).
pub struct Listener {
    inner: tokio::net::TcpListener,
}

impl Listener {
    /// Binds `addr`; needs to run inside the tokio runtime.
    pub fn bind(addr: SocketAddr) -> Result<Listener, ListenError> {
        let err = |source| ListenError { addr, source };
        let std = std::net::TcpListener::bind(addr).map_err(err)?;
        std.set_nonblocking(true).map_err(err)?;
        let inner = tokio::net::TcpListener::from_std(std).map_err(err)?;
        Ok(Listener { inner })
    }

    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.inner.local_addr().ok()
    }

    /// Serves until the token fires; open connections are dropped with it.
    pub async fn run(self, metrics: Arc<Metrics>, token: Shutdown) {
        if let Some(addr) = self.local_addr() {
            tracing::info!(%addr, "Serving metrics at http://{addr}/metrics.");
        }
        let mut conns = tokio::task::JoinSet::new();
        loop {
            let accepted = tokio::select! {
                () = token.stopped() => break,
                a = self.inner.accept() => a,
                // Reap finished connections so the set stays small.
                Some(_) = conns.join_next(), if !conns.is_empty() => continue,
            };
            let stream = match accepted {
                Ok((s, _)) => s,
                Err(e) => {
                    tracing::warn!(error = %e, "Metrics listener: accept failed.");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            let metrics = Arc::clone(&metrics);
            conns.spawn(async move {
                let service =
                    hyper::service::service_fn(move |req| answer(req, Arc::clone(&metrics)));
                if let Err(e) = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await
                {
                    tracing::debug!(error = %e, "Metrics connection ended with an error.");
                }
            });
        }
        conns.shutdown().await;
    }
}

async fn answer(
    req: Request<Incoming>,
    metrics: Arc<Metrics>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let reply = |status: StatusCode, ctype: &'static str, body: String| {
        let mut r = Response::new(Full::new(Bytes::from(body)));
        *r.status_mut() = status;
        r.headers_mut().insert(
            hyper::header::CONTENT_TYPE,
            hyper::header::HeaderValue::from_static(ctype),
        );
        Ok(r)
    };
    if req.uri().path() != "/metrics" {
        return reply(
            StatusCode::NOT_FOUND,
            "text/plain",
            "not found; try /metrics\n".into(),
        );
    }
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return reply(
            StatusCode::METHOD_NOT_ALLOWED,
            "text/plain",
            "only GET\n".into(),
        );
    }
    reply(StatusCode::OK, CONTENT_TYPE, metrics.encode())
}
